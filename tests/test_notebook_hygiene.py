"""Static hygiene of the committed notebooks: what nbval cannot see.

nbval re-runs the cells and compares outputs; these tests check that the committed outputs
themselves are trustworthy: executed top to bottom, errors only where announced, no stray
stderr, GPU cells left empty by the CPU run, and the exercise directives balanced.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tests.manifest import ROOT, load_manifest, notebooks_on_disk
from tests.notebook_tools import GPU_TAG, tags

MANIFEST = load_manifest()
STDERR_TAG = "stderr-expected"


def _code_cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    return [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def test_manifest_lists_exactly_the_notebooks_on_disk() -> None:
    assert sorted(MANIFEST) == notebooks_on_disk(), "add new notebooks to tests/notebooks.toml (and remove old ones)"


@pytest.fixture(params=sorted(MANIFEST), scope="module")
def notebook(request: pytest.FixtureRequest) -> tuple[str, nbformat.NotebookNode]:
    path = request.param
    nb = nbformat.read(ROOT / path, as_version=4)
    nbformat.validate(nb)
    return path, nb


def test_executed_top_to_bottom(notebook: tuple[str, nbformat.NotebookNode]) -> None:
    path, nb = notebook
    counts, never_run = [], []
    for index, cell in _code_cells(nb):
        if GPU_TAG in tags(cell) or not cell.source.strip():
            continue
        if cell.execution_count is None:
            never_run.append(index)
        else:
            counts.append(cell.execution_count)
    assert not never_run, f"{path}: code cells {never_run} were never executed; run `make refresh`"
    assert counts == list(range(1, len(counts) + 1)), f"{path}: cells executed out of order {counts[:15]}"


def test_errors_only_where_announced(notebook: tuple[str, nbformat.NotebookNode]) -> None:
    path, nb = notebook
    for index, cell in _code_cells(nb):
        if GPU_TAG in tags(cell):
            continue  # not run on the CPU: no outputs to judge
        has_error = any(out.output_type == "error" for out in cell.outputs)
        expects_error = "raises-exception" in tags(cell)
        assert has_error == expects_error, (
            f"{path}: code cell {index} " + ("raised without the 'raises-exception' tag" if has_error
                                             else "is tagged 'raises-exception' but raised nothing")
        )


def test_no_stray_stderr(notebook: tuple[str, nbformat.NotebookNode]) -> None:
    path, nb = notebook
    for index, cell in _code_cells(nb):
        if STDERR_TAG in tags(cell):
            continue
        stderr = [out.text for out in cell.outputs if out.output_type == "stream" and out.name == "stderr"]
        assert not stderr, f"{path}: code cell {index} wrote to stderr: {stderr[0][:300]!r}"


def test_outputs_present_and_gpu_cells_empty(notebook: tuple[str, nbformat.NotebookNode]) -> None:
    path, nb = notebook
    cells = _code_cells(nb)
    assert any(cell.outputs for _, cell in cells), f"{path}: no outputs committed; run `make refresh`"
    for index, cell in cells:
        if GPU_TAG in tags(cell):
            assert not cell.outputs, f"{path}: gpu cell {index} has outputs; commit outputs from a CPU run"
    has_gpu = any(GPU_TAG in tags(cell) for _, cell in cells)
    assert has_gpu == MANIFEST[path].gpu_cells, f"{path}: tests/notebooks.toml says gpu_cells={not has_gpu}"


def test_exercises_are_balanced_and_verdicts_printed(notebook: tuple[str, nbformat.NotebookNode]) -> None:
    path, nb = notebook
    markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    for directive in ("exercise", "solution"):
        starts = len(re.findall(rf"```\{{{directive}-start\}}", markdown))
        ends = len(re.findall(rf"```\{{{directive}-end\}}", markdown))
        assert starts == ends, f"{path}: {starts} {directive}-start but {ends} {directive}-end directives"
    for index, cell in _code_cells(nb):
        if "nbval-check-output" in tags(cell) and GPU_TAG not in tags(cell):
            text = "".join(out.get("text", "") for out in cell.outputs)
            assert "✅" in text, f"{path}: verdict cell {index} printed no '✅' verdict"
