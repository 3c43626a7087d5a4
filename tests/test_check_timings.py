"""`make check-timings` sets each committed verdict beside today's, and fails when they differ."""

from __future__ import annotations

from pathlib import Path

import nbformat

from tests.check_timings import Pair, main
from tests.notebook_tools import execute_notebook

# The tool's logic, not the machine's load, is under test: the "timing" prints the same table on every run.
TIMED = """\
import ptlabs
quiet = {"256": 1e-3, "512": 7.5e-3}
print(ptlabs.Comparison(label="two ops", baseline="sum", checks=[quiet] * 5,
                        times={"sum": [1e-6] * 5, "sleep": [2e-3] * 5}))
"""


def _committed(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(TIMED)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    execute_notebook(nb, path.parent)
    nbformat.write(nb, path)
    return path


def test_an_unchanged_verdict_agrees_and_a_changed_one_differs(tmp_path: Path) -> None:
    path = _committed(tmp_path / "timed.ipynb")
    report = tmp_path / "report.md"
    assert main(["--report", str(report), str(path)]) == 0, report.read_text()
    text = report.read_text()
    assert "| timed | - | none | two ops | sleep | slower (" in text and "| agrees |" in text
    assert "1 of 1 verdicts agree" in text and "machine:" in text and "load average" in text

    nb = nbformat.read(path, as_version=4)  # as if the committed table had said the opposite
    output = nb.cells[0].outputs[0]
    output.text = output.text.replace("(slower)", "(no)").replace("sleep: ", "sleep vs sum: no clear difference ")
    nbformat.write(nb, path)
    assert main(["--report", str(report), str(path)]) == 1
    assert "| unclear | slower (" in report.read_text() and "DIFFERS" in report.read_text()
    assert nbformat.read(path, as_version=4).cells[0].outputs[0].text == output.text, "the notebook was rewritten"


def test_verdicts_agree_by_kind_whatever_their_factors() -> None:
    """The factor varies with the machine and the run; the kind (slower, faster, unclear) is the verdict."""
    def outcome(committed: str, today: str) -> str:
        return Pair("01_x", "§2", "`k`", "label", "b", committed, today).outcome

    assert outcome("slower (2.0x)", "slower (2.4x)") == "agrees"
    assert outcome("faster (2.3x)", "faster (5.3x)") == "agrees"
    assert outcome("slower (1.2x)", "unclear") == "DIFFERS"
    assert outcome("unclear", "busy") == "busy today: not compared"
