"""ptgrader.metadata_check: nbgrader's metadata check with its schema compiled once passes and fails the same
cells as nbgrader's own, with the same error."""

from __future__ import annotations

import copy

import nbformat
import pytest
from nbgrader.nbgraderformat import ValidationError
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheckCellMetadata

from ptgrader.metadata_check import CheckCellMetadata
from tests import lab_tools


def _outcome(check: type, nb: nbformat.NotebookNode, caplog: pytest.LogCaptureFixture) -> str:
    caplog.clear()
    try:
        check().preprocess(copy.deepcopy(nb), {})
    except ValidationError as error:
        logged = "\n".join(record.getMessage() for record in caplog.records)
        return f"{error}\n{logged.splitlines()[-2] if logged.count(chr(10)) else logged}"
    return "passed"


def _corrupted(nb: nbformat.NotebookNode, change: str) -> nbformat.NotebookNode:
    broken = copy.deepcopy(nb)
    cell = next(cell for cell in broken.cells if lab_tools.nbgrader_meta(cell).get("grade"))
    meta = cell.metadata.nbgrader
    if change == "points":
        meta["points"] = "two"
    elif change == "flag":
        meta["locked"] = "yes"
    elif change == "missing":
        del meta["grade_id"]
    return broken


@pytest.mark.parametrize("change", ["none", "points", "flag", "missing"])
def test_the_compiled_check_passes_and_fails_as_nbgraders_own(change: str, caplog: pytest.LogCaptureFixture) -> None:
    release = nbformat.read(lab_tools.release_notebooks("lab01_tensors")[0], as_version=4)
    nb = _corrupted(release, change)
    ours, theirs = _outcome(CheckCellMetadata, nb, caplog), _outcome(NbgraderCheckCellMetadata, nb, caplog)
    assert ours == theirs
    assert (ours == "passed") == (change == "none"), ours
