"""The visible checks reject the learner pass's wrong answers (tests/reviews/learner-pass-labs-02-07.md).

Each file in tests/fixtures/visible/LAB/, and each graded fixture its graded.txt names, is a plausible
wrong answer that kept every ✅ before its part's visible check was extended. The reference answers
must pass every visible check, and each of these must fail one: a ✅ then means the part's stated
rules hold, not only its one example. The correct alternatives (tests/fixtures/LAB/right/) must pass
every one too: a ❌ for a right answer would send a learner after a mistake they did not make. One
command runs every lab, each in a process of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import lab_tools
from tests.manifest import ROOT
from tests.visible_checks import VISIBLE_FIXTURES, visible_fixtures

LABS = sorted(p.name for p in VISIBLE_FIXTURES.iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict]:
    """lab -> its line from one ``python -m tests.visible_checks`` of every lab."""
    ran = subprocess.run([sys.executable, "-m", "tests.visible_checks", *LABS], cwd=ROOT,
                         capture_output=True, text=True, timeout=300 * len(LABS))
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    return {line["lab"]: line for line in lines}


@pytest.mark.parametrize("lab", LABS)
def test_visible_checks_reject_every_learner_pass_wrong_answer(lab: str, outcomes: dict[str, dict]) -> None:
    assert lab in outcomes, f"{lab}: no result from tests.visible_checks"
    assert "error" not in outcomes[lab], f"{lab} could not be run:\n{outcomes[lab].get('error')}"
    results = dict(outcomes[lab]["results"])
    assert results.pop("reference") is None, f"{lab}: the reference answers fail a visible check"
    right = {name: results.pop(name) for name in list(results) if name.startswith(f"{lab_tools.RIGHT}/")}
    assert len(results) == len(visible_fixtures(lab)) > 0
    kept = sorted(name for name, failure in results.items() if failure is None)
    assert not kept, f"{lab}: these wrong answers still get every ✅: {kept}"
    refused = {name: failure for name, failure in right.items() if failure is not None}
    assert len(right) == len(lab_tools.alternatives(lab))
    assert not refused, f"{lab}: a visible check refuses these correct alternatives: {refused}"

