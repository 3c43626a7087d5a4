# The two commands a newcomer runs: `make book` (build the website) and `make test` (validate everything);
# `make check NB=notebooks/NN_name.ipynb` applies to one chapter every rule `make test` would.
# Both create .venv when needed and install what the project needs, system packages included.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-requirements
# Exported: the site test (tests/test_site.py) reads it. CI on Ubuntu sets CHROMIUM=/usr/bin/google-chrome.
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM
PYTEST_WORKERS ?= 2
# The torch build: auto (CPU without an NVIDIA GPU, CUDA with one), cpu or cuda. tests/torch_build.py decides.
TORCH ?= auto
# The Pythons supported are pyproject.toml's requires-python; tests/python_for_venv.sh reads it and picks the
# interpreter: $(VENV)'s own, else $(PYTHON); with PYTHON not set, python3 (or the newest supported python3.X
# when python3 is not supported), in the distribution's optimised build of that version when there is one.
FIND_PYTHON = tests/python_for_venv.sh '$(VENV)' '$(or $(PYTHON),python3)' '$(if $(PYTHON),asked,default)'

.PHONY: book pdf test check colab-base check-timings test-gpu refresh setup check-python torch system-deps browser clean

# --all: a full rebuild takes seconds and keeps every page's sidebar in step with _toc.yml.
book: setup
	$(BIN)/jupyter-book build . --all -W -n --keep-going

# The PDF edition, printed from the website by the tests' Chromium, written beside it
# (_build/html/pytorch-core-apis-tested.pdf, which the introduction links).
pdf: book browser
	$(BIN)/python -m tests.pdf_edition

# -rfEs: the summary lists failures, errors and every skip with its reason.
test: setup browser
	@echo "running the test suite on $(PYTEST_WORKERS) workers (about ten minutes on two quiet cores, more on a slower machine; about half of it grading the labs)..."
	$(BIN)/python -m pytest -rfEs -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  --nbval --colab-like --nbval-sanitize-with tests/sanitize.cfg \
	  tests notebooks labs/source

# One chapter, every rule `make test` applies to it: its cells (nbval, Colab-like), its hygiene, the lint, its
# registration, claim keys across the book and the site's rules (a site build). tests/chapter_check.py selects them.
check: setup browser
	@$(BIN)/python -m tests.chapter_check $(NB) --workers $(PYTEST_WORKERS)

# Optional: Colab's Python (3.12) with what Colab preinstalls, PyPI's default (CUDA) torch as on Colab, in .venv-colab
# (about 6 GB). When it is there and the running Python is not Colab's, make test's Colab-like check uses it.
colab-base: setup
	@$(BIN)/python -m tests.colab_base

# The GPU runner's check: the guarded GPU experiments run; only exercise verdicts (`nbval-check-output`) are compared.
# tests/require_cuda.py stops it at once where there is no CUDA: on a CPU every guarded cell passes, testing nothing.
test-gpu: setup
	@$(BIN)/python -m tests.require_cuda
	$(BIN)/python -m pytest --nbval-lax --nbval-current-env notebooks labs/source

# Re-execute every notebook in place (Run All, no tag honoured) and regenerate the lab releases. It refuses to
# write a notebook whose timing tables found the machine busy: run it when nothing else does.
refresh: setup
	$(BIN)/python -m tests.refresh

# Time every committed comparison again, natively, and write tests/timing-check.md: each committed verdict beside
# today's, with the machine and the date. On a quiet machine (about ten minutes on two cores).
check-timings: setup
	$(BIN)/python -m tests.check_timings

setup: $(STAMP) system-deps

# Reinstalls only when requirements.txt or pyproject.toml changed, so a repeated `make` takes seconds.
# check-python and torch are order-only: they run every time (a fraction of a second) but never force a reinstall.
$(STAMP): requirements.txt pyproject.toml | check-python torch
	@echo "installing the pinned Python stack into $(VENV) (after a change to requirements.txt: under a minute)..."
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@
	@echo "$(VENV) is ready"

# torch first, as its own step: the build for this machine (tests/torch_build.py prints which, and why).
torch: check-python
	@$(BIN)/python -m tests.torch_build --choice '$(TORCH)'

# A supported Python, and $(VENV) made with it. Debian and Ubuntu ship venv's pip separately: when creating the
# venv fails there, the pythonX.Y-venv package is installed and the venv made again.
check-python:
	@py=$$($(FIND_PYTHON)) || exit 1; \
	if [ ! -x $(BIN)/python ]; then \
	  version=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  echo "creating $(VENV) with $$py (Python $$version)"; \
	  $(call install_missing,$$py -m venv $(VENV),Python $$version's venv module (ensurepip),python$$version-venv); \
	fi

# Graphviz's `dot` draws autograd graphs (torchviz); the site's figures need it. On Linux, libseccomp compiles the
# grading kernels' system call filter (src/ptgrader/syscalls.py, through pyseccomp; elsewhere there is no jail).
system-deps:
	@$(call require,dot,graphviz)
ifeq ($(shell uname -s),Linux)
	@$(call require_library,libseccomp.so.2,libseccomp2)
endif

# Debian's Chromium, driven by Playwright in the site test (Playwright's own browser download needs internet), and
# fonts for what the site prints beyond Latin text (✅, ❌, the sources' Chinese titles: tests/pdf_edition.py's
# FONT_PACKAGES), without which the PDF edition prints empty boxes.
browser:
	@$(call require,$(CHROMIUM),chromium)
	@$(call require_font,2705,fonts-noto-color-emoji)
	@$(call require_font,4e0e,fonts-wqy-microhei)

# $(call require,COMMAND,DEBIAN-PACKAGE): install the package with apt when the command is missing.
require = $(call install_missing,command -v $(1) >/dev/null 2>&1,'$(1)',$(2))
# $(call require_library,SONAME,DEBIAN-PACKAGE): the same for a shared library the dynamic linker must find.
require_library = $(call install_missing,/sbin/ldconfig -p | grep -q '$(1) ',the library $(1),$(2))

# $(call require_font,HEX,DEBIAN-PACKAGE): the same for a font that draws the character U+HEX (fontconfig's list).
require_font = $(call install_missing,fc-list ':charset=$(1)' family | grep -q .,a font for the character U+$(1),$(2))
# $(call install_missing,CHECK,WHAT,DEBIAN-PACKAGE): run CHECK; when it fails, install the package (as root, with
# apt-get) and run CHECK again, or stop with a message that says what to install.
define install_missing
if ! $(1); then \
  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
    echo "installing the system package $(3) with apt-get (about a minute)"; \
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(3) >/dev/null; \
    $(1) || { echo "error: installed $(3) but $(2) is still missing" >&2; exit 1; }; \
  else \
    echo "error: $(2) is missing. Install the '$(3)' package (Debian/Ubuntu: sudo apt-get install $(3); macOS: brew install $(3)) and run make again." >&2; \
    exit 1; \
  fi; \
fi
endef

clean:
	rm -rf _build
