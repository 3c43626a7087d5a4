"""A lab part's text names every rule its visible checks exercise, so that text and checks cannot drift apart.

A learner working alone sees the part's text and the visible checks only. When a visible check tests a
rule (a kept dtype, an untouched input, an empty batch, ...), the text must state that rule: each check's
`name=` is matched against RULES, and for each rule it mentions, the part's text must hold one of the rule's
words. A check that matches no rule is not affected, and the hidden tests are not read here.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tests import lab_tools

#: A word in a visible check's name -> the words, one of which the part's text must hold (lowercase).
RULES: dict[str, tuple[str, ...]] = {
    "int32": ("int32",),
    "float64": ("float64",),
    "keeps their dtype": ("dtype",),
    "empty": ("empty",),
    "as it was": ("as it was", "unchanged", "keep their values", "as they were"),
    "as they were": ("as it was", "unchanged", "keep their values", "as they were"),
    "non-contiguous": ("non-contiguous",),
    "far from the origin": ("far from the origin",),
    "no python loop": ("no python loop", "without a python loop"),
    "raises valueerror": ("valueerror",),
    "graph break": ("graph break",),
    "at most 2 graphs": ("duck sizing",),
    "before the first call": ("compiles nothing",),
    "another compiled function": ("reset()",),
    "exactly 0": ("exactly 0",),
    "overflow": ("overflow",),
    "scaled step": ("scaler",),
    "warm-up": ("warm-up",),
    "a label": ("labels",),
    "all calls of an operator": ("all its calls together",),
    "the result's strides": ("in the result",),
}

CHECK_NAME = re.compile(r"""name=f?(["'])(.+?)\1""", re.DOTALL)


def _parts(lab: str) -> list[tuple[str, str, str]]:
    """(part, its text, its visible checks' names joined) for each graded part of the lab's source."""
    (path,) = lab_tools.source_notebooks(lab)
    nb = nbformat.read(path, as_version=4)
    cells = {lab_tools.nbgrader_meta(c).get("grade_id"): c for c in nb.cells}
    found = []
    for grade_id, cell in cells.items():
        if not grade_id or not grade_id.startswith("test_"):
            continue
        part = grade_id.removeprefix("test_")
        text = cells.get(f"{part}_text")
        if text is None:
            continue
        visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        names = " | ".join(match.group(2) for match in CHECK_NAME.finditer(visible))
        found.append((part, " ".join(text.source.lower().split()), names.lower()))  # line breaks as spaces
    return found


def missing_rules(text: str, names: str) -> list[str]:
    """The rules the check names exercise and the text does not state."""
    return [rule for rule, words in RULES.items() if rule in names and not any(w in text for w in words)]


@pytest.mark.parametrize("lab", lab_tools.lab_names())
def test_each_part_states_the_rules_its_visible_checks_exercise(lab: str) -> None:
    problems = {part: missing for part, text, names in _parts(lab) if (missing := missing_rules(text, names))}
    assert not problems, f"{lab}: a visible check tests a rule the part's text does not state: {problems}"


def test_the_rule_check_can_fail() -> None:
    assert missing_rules("returns a tensor", "segment_sum of int32 values keeps their dtype") == ["int32", "keeps their dtype"]
    assert missing_rules("the dtype of `values`, int32 included", "keeps int32") == []
