"""Static hygiene rules for committed notebooks: what nbval cannot see.

nbval re-runs the cells and compares outputs; these rules check that the committed outputs
themselves are trustworthy. Each rule returns the problems it found (an empty list when the
notebook is clean), so the tests can both apply it to the book and prove it rejects a bad notebook.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import nbformat

from tests.notebook_tools import GPU_TAG, tags

STDERR_TAG = "stderr-expected"

Rule = Callable[[nbformat.NotebookNode], list[str]]


def _code_cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    return [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def executed_top_to_bottom(nb: nbformat.NotebookNode) -> list[str]:
    """Every non-GPU code cell ran, in order, in one kernel (execution counts 1, 2, 3, ...)."""
    counts, never_run = [], []
    for index, cell in _code_cells(nb):
        if GPU_TAG in tags(cell) or not cell.source.strip():
            continue
        if cell.execution_count is None:
            never_run.append(index)
        else:
            counts.append(cell.execution_count)
    problems = [f"code cells {never_run} were never executed; run `make refresh`"] if never_run else []
    if counts != list(range(1, len(counts) + 1)):
        problems.append(f"cells executed out of order {counts[:15]}; run `make refresh`")
    return problems


def errors_only_where_announced(nb: nbformat.NotebookNode) -> list[str]:
    """A cell shows an error exactly when it is tagged `raises-exception` (GPU cells did not run)."""
    problems = []
    for index, cell in _code_cells(nb):
        if GPU_TAG in tags(cell):
            continue
        has_error = any(out.output_type == "error" for out in cell.outputs)
        expects_error = "raises-exception" in tags(cell)
        if has_error and not expects_error:
            problems.append(f"code cell {index} raised without the 'raises-exception' tag")
        if expects_error and not has_error:
            problems.append(f"code cell {index} is tagged 'raises-exception' but raised nothing")
    return problems


def no_stray_stderr(nb: nbformat.NotebookNode) -> list[str]:
    """Nothing on stderr, except in a cell tagged `stderr-expected` (where the warning is the lesson)."""
    problems = []
    for index, cell in _code_cells(nb):
        if STDERR_TAG in tags(cell):
            continue
        stderr = [out.text for out in cell.outputs if out.output_type == "stream" and out.name == "stderr"]
        if stderr:
            problems.append(f"code cell {index} wrote to stderr: {stderr[0][:300]!r}")
    return problems


def outputs_present_gpu_cells_empty(nb: nbformat.NotebookNode) -> list[str]:
    """Outputs were committed, and GPU cells have none (the committed run is a CPU run)."""
    cells = _code_cells(nb)
    problems = [] if any(cell.outputs for _, cell in cells) else ["no outputs committed; run `make refresh`"]
    problems += [
        f"gpu cell {index} has outputs; commit outputs from a CPU run"
        for index, cell in cells
        if GPU_TAG in tags(cell) and cell.outputs
    ]
    return problems


def exercises_balanced_verdicts_printed(nb: nbformat.NotebookNode) -> list[str]:
    """Gated exercise/solution directives open and close in pairs; every verdict cell printed a ✅ line."""
    markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    problems = []
    for directive in ("exercise", "solution"):
        starts = len(re.findall(rf"```\{{{directive}-start\}}", markdown))
        ends = len(re.findall(rf"```\{{{directive}-end\}}", markdown))
        if starts != ends:
            problems.append(f"{starts} {directive}-start but {ends} {directive}-end directives")
    for index, cell in _code_cells(nb):
        if "nbval-check-output" in tags(cell) and GPU_TAG not in tags(cell):
            text = "".join(out.get("text", "") for out in cell.outputs)
            if "✅" not in text:
                problems.append(f"verdict cell {index} printed no '✅' verdict")
    return problems


def has_gpu_cells(nb: nbformat.NotebookNode) -> bool:
    """Whether any cell is tagged `gpu` (tests/notebooks.toml must say the same)."""
    return any(GPU_TAG in tags(cell) for _, cell in _code_cells(nb))


RULES: tuple[Rule, ...] = (
    executed_top_to_bottom,
    errors_only_where_announced,
    no_stray_stderr,
    outputs_present_gpu_cells_empty,
    exercises_balanced_verdicts_printed,
)
