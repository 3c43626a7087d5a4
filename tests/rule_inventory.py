"""Which tests of tests/ apply a rule to the chapters or the labs, read from their source (no import, no run).

`make check` (tests/chapter_check.py) must run every test that concerns a chapter, and CONTRIBUTING.md
must state every rule a test enforces on a chapter or a lab. Both lists are written by hand; this
module finds the tests they must cover, so tests/test_chapter_check.py and tests/test_contributing.py
fail when a new rule is added to tests/ without being added there.

A test concerns the chapters when its code, its decorators or a fixture of its module that it takes
read the book's list of notebooks or its table of contents (``CHAPTER_SOURCES``), unless it is a unit
test of the machinery (``NOT_RULES``). A lab rule is a test of tests/test_labs.py that runs once per lab,
fixture or hostile case (it is parametrised), or one that reads the labs' answers (``LAB_SOURCES``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.manifest import ROOT

#: Names through which a test reads the chapters: the manifest, the notebooks on disk, the table of contents.
CHAPTER_SOURCES = frozenset({"MANIFEST", "load_manifest", "notebooks_on_disk", "TOC", "_toc_files", "_chapter_pages"})
#: Names through which a test reads the labs' answers (the site's leak check).
LAB_SOURCES = frozenset({"_secret_lines"})
LAB_TESTS = "tests/test_labs.py"
#: Tests that read the list of notebooks without applying a rule to a chapter: unit tests of the machinery.
NOT_RULES = {
    "test_a_notebook_over_its_budget_is_reported": "the budget check, fed the manifest's first entry",
    "test_a_long_wall_time_within_the_cpu_budget_passes": "the budget check, fed the manifest's first entry",
    "test_stray_nbconvert_outputs_are_not_notebooks_of_the_book": "notebooks_on_disk, on a temporary folder",
    "test_status_record_and_table": "the execution-status record, fed the manifest's entries",
    "test_registration_lists_the_chapter_in_toc_manifest_and_intro": "the template's registration, on copies",
    "test_the_templates_claim_key_agrees_with_the_book": "the template's claim key, against the book's",
}


@dataclass(frozen=True)
class FoundTest:
    """One ``test_*`` function of a module of tests/, with what its code refers to."""

    module: str  # tests/test_x.py
    name: str
    names: frozenset[str]  # every name and attribute its code, decorators and module fixtures use
    parametrised: bool


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _is_fixture(function: ast.FunctionDef) -> bool:
    return any("fixture" in _names(decorator) for decorator in function.decorator_list)


def tests_in_module(module: Path) -> list[FoundTest]:
    """The module's top-level tests; a fixture defined in the module counts as part of each test that takes it."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    fixtures = {f.name: _names(f) for f in functions if _is_fixture(f)}
    found = []
    for function in functions:
        if not function.name.startswith("test_"):
            continue
        names = _names(function)
        for argument in function.args.args:
            names |= fixtures.get(argument.arg, set())
        parametrised = any("parametrize" in _names(d) for d in function.decorator_list)
        found.append(FoundTest(str(module.relative_to(ROOT)), function.name, frozenset(names), parametrised))
    return found


def all_tests(root: Path = ROOT) -> list[FoundTest]:
    """Every test function of tests/test_*.py."""
    return [test for module in sorted((root / "tests").glob("test_*.py")) for test in tests_in_module(module)]


def chapter_rules(tests: list[FoundTest]) -> list[FoundTest]:
    """The tests that read the book's chapters to apply a rule to each (so also to a new one)."""
    return [test for test in tests if test.names & CHAPTER_SOURCES and test.name not in NOT_RULES]


def lab_rules(tests: list[FoundTest]) -> list[FoundTest]:
    """The tests run once per lab, wrong-answer fixture or hostile case, and those that read the labs' answers."""
    return [test for test in tests if (test.module == LAB_TESTS and test.parametrised) or test.names & LAB_SOURCES]
