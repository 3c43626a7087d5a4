"""`make check NB=notebooks/NN_name.ipynb`: every rule `make test` applies to one chapter, in one run.

A chapter meets three kinds of test: its own cells (nbval in the Colab-like kernel, with the time
budget), the tests parametrised by notebook (the hygiene rules, the bootstrap cell), and the tests that
read every chapter at once (registration, claim keys across the book, the code-width lint, and the
site's rules for each page, which need a site build). Rather than copying them, this runs `make test`'s
own pytest command on the modules that hold them; as a pytest plugin (``-p tests.chapter_check``), its
``--chapter`` option then keeps only the chapter's case of a parametrised test and the book-wide tests
named here. tests/test_chapter_check.py proves that every test of tests/ that concerns chapters is kept,
so a new chapter rule cannot be left out of the command.

Usage: python -m tests.chapter_check notebooks/NN_name.ipynb [--workers N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from tests.manifest import ROOT

#: The test modules that hold chapter rules (the only ones the command collects).
MODULES = ("tests/test_notebook_hygiene.py", "tests/test_colab_bootstrap.py", "tests/test_lint.py", "tests/test_site.py")
#: Tests parametrised by notebook: only the chapter's own case runs.
PER_CHAPTER = frozenset({"test_committed_notebook_follows", "test_first_code_cell_is_the_bootstrap"})
#: Tests that read every chapter at once: a new chapter can break them, so they run whole.
BOOK_WIDE = frozenset({
    "test_manifest_lists_exactly_the_notebooks_on_disk",  # registered in tests/notebooks.toml
    "test_no_claim_key_carries_two_verdicts_across_the_book",  # claim keys unique book-wide
    "test_notebook_code_fits_the_page",  # ruff over every notebook: a few seconds
})
#: Every site test runs: the build is what costs, and each test reads the chapters' pages or the links to them.
SITE_MODULE = "tests/test_site.py"
CHAPTER_PATH = re.compile(r"notebooks/\d\d_\w+\.ipynb")
#: Where a one-chapter run records its notebook times: not the book's record, which the site shows.
STATUS_FILE = ROOT / "_build" / "chapter-check-status.json"
USAGE = "usage: make check NB=notebooks/NN_name.ipynb   (every rule `make test` applies to that chapter)"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chapter", metavar="NB", help="run only the tests that concern this chapter notebook")


def selected(item: pytest.Item, chapter: str) -> bool:
    """Whether ``item`` applies a rule to ``chapter`` (its cells, its case of a rule, or a book-wide rule)."""
    path = item.nodeid.split("::")[0]
    if path == chapter or path == SITE_MODULE:
        return True
    name = getattr(item, "originalname", item.name)
    if name in BOOK_WIDE:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return name in PER_CHAPTER and chapter in params.values()


def pytest_configure(config: pytest.Config) -> None:
    """Keep the site's execution-status record for `make test`: one chapter's times would replace the book's."""
    if config.getoption("chapter"):
        from tests import conftest, validation

        conftest.write_status = lambda notebooks: validation.write_status(notebooks, STATUS_FILE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chapter = config.getoption("chapter")
    if not chapter:
        return
    kept = [item for item in items if selected(item, chapter)]
    dropped = [item for item in items if not selected(item, chapter)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def chapter_problem(chapter: str) -> str | None:
    """Why ``chapter`` cannot be checked (with the usage line), or None."""
    if not chapter:
        return USAGE
    if not CHAPTER_PATH.fullmatch(chapter):
        return f"{chapter!r} is not a chapter notebook path (notebooks/NN_name.ipynb)\n{USAGE}"
    if not (ROOT / chapter).is_file():
        return f"{chapter}: no such notebook\n{USAGE}"
    return None


def check_command(chapter: str, workers: int) -> list[str]:
    """`make test`'s pytest command, narrowed to the chapter (the notebook and the site build run side by side)."""
    return [
        sys.executable, "-m", "pytest", "-rfEs", "-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder",
        "-p", "tests.chapter_check", "--chapter", chapter,
        "--nbval", "--colab-like", "--nbval-sanitize-with", "tests/sanitize.cfg",
        *MODULES, chapter,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", nargs="?", default="", help="notebooks/NN_name.ipynb")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default 2)")
    args = parser.parse_args(argv)
    chapter = args.chapter.removeprefix("./")
    problem = chapter_problem(chapter)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return subprocess.call(check_command(chapter, args.workers), cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
