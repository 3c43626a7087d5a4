"""The three rooms of src/ and their one-way imports.

- ``ptlabs``, the learners' helpers, imports neither of the others: a learner in Colab never loads
  the checks' tamper evidence or the grading service;
- ``ptchecks``, the checks the labs' test cells call in a kernel, may use ``ptlabs`` but never the
  service: a kernel must not hold the grader's code;
- ``ptgrader``, the grading service, imports neither: it names the checks module as a string
  (``ptgrader.contract.CHECKS_MODULE``) and keeps torch out of the grader's process.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.manifest import ROOT

SRC = ROOT / "src"
#: room -> the rooms it must not import
FORBIDDEN = {"ptlabs": {"ptchecks", "ptgrader"}, "ptchecks": {"ptgrader"}, "ptgrader": {"ptlabs", "ptchecks"}}


def imported_packages(path: Path) -> set[str]:
    """The top-level packages a module imports anywhere in its code (functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_imports_go_one_way(room: str) -> None:
    files = sorted((SRC / room).rglob("*.py"))
    assert files, f"src/{room} has no modules"
    wrong = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[room])
        for path in files
        if imported_packages(path) & FORBIDDEN[room]
    }
    assert not wrong, f"{room} must not import {sorted(FORBIDDEN[room])}: {wrong}"


def test_the_rule_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "late.py"
    module.write_text("def f():\n    from ptgrader.channel import MIME\n    import ptchecks.x\n", encoding="utf-8")
    assert imported_packages(module) == {"ptgrader", "ptchecks"}
