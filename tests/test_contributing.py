"""CONTRIBUTING.md states every rule a test enforces on a chapter or a lab, by the name of that test.

A rule's id is the name both carry: a hygiene rule of tests/hygiene.py, or a test function. CONTRIBUTING
names it in brackets beside the rule, [`outputs_fit_the_page`], so a failing test leads to its rule.
The rules are found from the tests' source (tests/rule_inventory.py): a new chapter or lab rule fails
here until CONTRIBUTING states it, and a bracketed name that no longer names a test fails too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests import hygiene, rule_inventory
from tests.manifest import ROOT

CONTRIBUTING = ROOT / "CONTRIBUTING.md"
#: A bracket that names tests: it opens with a backticked name (a markdown link's text is followed by "(").
BRACKET = re.compile(r"\[(`[^\]]*)\](?!\()")
NAME = re.compile(r"`([^`]+)`")
TESTS = rule_inventory.all_tests()


def bracketed_names(text: str) -> set[str]:
    """Every backticked name inside a bracket of ``text``."""
    return {name for bracket in BRACKET.findall(text) for name in NAME.findall(bracket)}


def required_rules() -> set[str]:
    """The ids of every rule the tests apply to a chapter or a lab."""
    found = rule_inventory.chapter_rules(TESTS) + rule_inventory.lab_rules(TESTS)
    return {rule.__name__ for rule in hygiene.RULES} | {test.name for test in found}


def _defines(module: Path, name: str) -> bool:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body)


def names_something(name: str, root: Path = ROOT) -> bool:
    """A hygiene rule, a test function, a file of tests/ (`colab_plugin.py`), or `module.function` in tests/."""
    if name in {rule.__name__ for rule in hygiene.RULES} or name in {test.name for test in TESTS}:
        return True
    if name.endswith(".py"):
        return (root / name).is_file() or (root / "tests" / name).is_file()
    module, _, function = name.partition(".")
    return bool(function) and (root / "tests" / f"{module}.py").is_file() and _defines(root / "tests" / f"{module}.py", function)


def test_contributing_states_every_chapter_and_lab_rule() -> None:
    missing = sorted(required_rules() - bracketed_names(CONTRIBUTING.read_text(encoding="utf-8")))
    assert not missing, (
        "rules enforced by tests/ that CONTRIBUTING.md does not state: write each rule where it belongs, "
        f"with the test's name in brackets, e.g. [`{missing[0]}`]:\n  " + "\n  ".join(missing)
    )


def test_every_bracketed_name_in_contributing_names_a_test() -> None:
    stale = sorted(name for name in bracketed_names(CONTRIBUTING.read_text(encoding="utf-8")) if not names_something(name))
    assert not stale, f"CONTRIBUTING.md names, in brackets, what is no test, hygiene rule or file of tests/: {stale}"


def test_the_check_finds_a_missing_and_a_stale_name() -> None:
    text = "Printed lines fit [`outputs_fit_the_page`: see below]; a [link](x) and [`no_such_rule`]."
    assert bracketed_names(text) == {"outputs_fit_the_page", "no_such_rule"}
    assert not names_something("no_such_rule") and names_something("lab_tools.hostile_cases_for")
    assert names_something("colab_plugin.py") and names_something("test_intro_links_every_chapter")
    assert "ends_with_the_summary" in required_rules() - bracketed_names(text)
