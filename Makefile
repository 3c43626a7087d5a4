# The two commands a newcomer runs: `make book` (build the website) and `make test` (validate everything).
# Both create .venv when needed and install what the project needs, system packages included.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-requirements
CHROMIUM ?= /usr/bin/chromium
PYTEST_WORKERS ?= 2

.PHONY: book test test-gpu refresh setup system-deps browser clean

# --all: a full rebuild takes seconds and keeps every page's sidebar in step with _toc.yml.
book: setup
	$(BIN)/jupyter-book build . --all -W -n --keep-going

test: setup browser
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile \
	  --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
	  tests notebooks labs/source

# The GPU runner's check: the guarded GPU experiments run; only exercise verdicts (`nbval-check-output`) are compared.
test-gpu: setup
	$(BIN)/python -m pytest --nbval-lax --nbval-current-env notebooks labs/source

# Re-execute every notebook in place (Run All, no tag honoured) and regenerate the lab releases.
refresh: setup
	$(BIN)/python -m tests.refresh

setup: $(STAMP) system-deps

# Reinstalls only when requirements.txt or pyproject.toml changed, so a repeated `make` takes seconds.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@

# Graphviz's `dot` draws autograd graphs (torchviz); the site's figures need it.
system-deps:
	@$(call require,dot,graphviz)

# Debian's Chromium, driven by Playwright in the site test (Playwright's own browser download needs internet).
browser:
	@$(call require,$(CHROMIUM),chromium)

# $(call require,COMMAND,DEBIAN-PACKAGE): install the package with apt when the command is missing.
define require
if ! command -v $(1) >/dev/null 2>&1; then \
  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
    echo "installing $(2) (apt-get)"; \
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null; \
    command -v $(1) >/dev/null 2>&1 || { echo "error: installed $(2) but '$(1)' is still missing" >&2; exit 1; }; \
  else \
    echo "error: '$(1)' is missing. Install the '$(2)' package (Debian/Ubuntu: sudo apt-get install $(2); macOS: brew install $(2)) and run make again." >&2; \
    exit 1; \
  fi; \
fi
endef

clean:
	rm -rf _build
