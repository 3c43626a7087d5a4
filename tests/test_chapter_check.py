"""`make check NB=...` runs every test that concerns the chapter, and only those (tests/chapter_check.py).

The command's lists are written by hand; tests/rule_inventory.py finds, from the tests' source, every
test that reads the chapters. A new chapter rule therefore fails here until the command runs it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import chapter_check, rule_inventory
from tests.manifest import ROOT

CHAPTER = "notebooks/02_modules.ipynb"
TESTS = rule_inventory.all_tests()
SITE_TESTS = {test.name for test in TESTS if test.module == chapter_check.SITE_MODULE}


def test_the_command_runs_every_chapter_rule() -> None:
    kept = chapter_check.PER_CHAPTER | chapter_check.BOOK_WIDE | SITE_TESTS
    missing = [f"{t.module}::{t.name}" for t in rule_inventory.chapter_rules(TESTS)
               if t.name not in kept or t.module not in chapter_check.MODULES]
    assert not missing, (
        "tests that read the chapters but that `make check` does not run: add each to PER_CHAPTER or BOOK_WIDE "
        "(and its module to MODULES) in tests/chapter_check.py, or to NOT_RULES in tests/rule_inventory.py:\n  "
        + "\n  ".join(missing)
    )


def test_the_command_names_only_tests_that_exist() -> None:
    found = {(t.module, t.name) for t in TESTS}
    named = chapter_check.PER_CHAPTER | chapter_check.BOOK_WIDE
    stale = sorted(name for name in named if not any((module, name) in found for module in chapter_check.MODULES))
    assert not stale, f"tests/chapter_check.py names tests that its MODULES do not hold: {stale}"


def test_the_selection_keeps_the_chapters_case_and_the_book_wide_tests() -> None:
    """Collected as `make check` collects (without running anything): the chapter's cases and nothing else."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.chapter_check",
               "--chapter", CHAPTER, *chapter_check.MODULES]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ids = [line for line in result.stdout.splitlines() if "::" in line]
    names = {nodeid.split("::")[1].split("[")[0] for nodeid in ids}
    assert names == chapter_check.PER_CHAPTER | chapter_check.BOOK_WIDE | SITE_TESTS, names
    parametrised = [nodeid for nodeid in ids if nodeid.split("::")[1].split("[")[0] in chapter_check.PER_CHAPTER]
    assert parametrised and all(CHAPTER in nodeid for nodeid in parametrised), parametrised


@pytest.mark.parametrize(
    ("argument", "message"),
    [("", "usage: make check NB="), ("notebooks/99.ipynb", "not a chapter notebook path"),
     ("notebooks/99_missing.ipynb", "no such notebook")],
)
def test_a_wrong_argument_is_explained_with_the_usage(argument: str, message: str) -> None:
    problem = chapter_check.chapter_problem(argument)
    assert problem is not None and message in problem and chapter_check.USAGE in problem
    assert chapter_check.chapter_problem(CHAPTER) is None
