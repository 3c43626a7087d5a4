"""Execute notebooks the way the book commits them: top to bottom, on this machine, GPU cells skipped.

Shared by `make refresh` (which writes the outputs back) and the tests (which read them).
Nothing is written unless the whole notebook ran: a broken notebook is reported and left as it was.
"""

from __future__ import annotations

import sysconfig
import time
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from tests.bootstrap import BOOTSTRAP_TAG, ROOT, bootstrap_source

GPU_TAG = "gpu"


class NotebookError(Exception):
    """A notebook could not be read or did not run; the message names the file and the cell."""


def tags(cell: nbformat.NotebookNode) -> set[str]:
    """The cell's tags (an empty set when it has none)."""
    return set(cell.get("metadata", {}).get("tags", []))


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Read and validate a notebook, turning every failure into a NotebookError that names the file."""
    if not path.is_file():
        raise NotebookError(f"{path}: no such notebook")
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several unrelated types for a damaged file
        raise NotebookError(f"{path}: not a valid notebook ({type(exc).__name__}: {exc})") from None
    return nb


def execute_notebook(nb: nbformat.NotebookNode, workdir: Path, *, run_gpu_cells: bool | None = None) -> float:
    """Run every code cell in order, in ``workdir``; return the wall time in seconds.

    Cells tagged ``gpu`` run only when CUDA is available (or ``run_gpu_cells`` says so); on a
    CPU their outputs are cleared, as the committed notebooks have them. Cells tagged
    ``raises-exception`` may fail; any other error raises NotebookError naming the cell.
    Widget state is stored in the notebook metadata so the website can draw the widgets.
    """
    run_gpu = torch.cuda.is_available() if run_gpu_cells is None else run_gpu_cells
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(workdir)}}
    )
    started = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if GPU_TAG in tags(cell) and not run_gpu:
                cell.outputs, cell.execution_count = [], None
                continue
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as exc:
                raise NotebookError(f"code cell {index} failed:\n{exc}") from None
            shorten_traceback_paths(cell)
        client.set_widgets_metadata()
    return time.perf_counter() - started


def shorten_traceback_paths(cell: nbformat.NotebookNode) -> None:
    """Drop this machine's folders from committed tracebacks: readers see `site-packages/torch/...`.

    The committed tracebacks are shown on the website; `/work/main/.venv/lib/python3.11/` says
    nothing to a reader. nbval does not compare tracebacks, so the rewrite cannot hide a difference.
    """
    prefixes = {f"{Path(sysconfig.get_paths()[key])}/": "site-packages/" for key in ("purelib", "platlib")}
    prefixes[f"{ROOT}/"] = ""
    for output in cell.outputs:
        if output.output_type == "error":
            for old, new in prefixes.items():
                output.traceback = [line.replace(old, new) for line in output.traceback]


#: nbgrader metadata of a lab's bootstrap cell: locked, so grading puts back the original of an edited one.
LOCKED_BOOTSTRAP = {
    "grade": False, "grade_id": "bootstrap", "locked": True, "schema_version": 3, "solution": False, "task": False,
}


def is_lab(nb: nbformat.NotebookNode) -> bool:
    """An nbgrader notebook: some cell carries nbgrader metadata."""
    return any("nbgrader" in cell.get("metadata", {}) for cell in nb.cells)


def ensure_bootstrap(nb: nbformat.NotebookNode) -> bool:
    """Make the first code cell the canonical Colab bootstrap (locked in a lab); return True when it changed."""
    first = next((cell for cell in nb.cells if cell.cell_type == "code"), None)
    wanted = bootstrap_source()
    lab = is_lab(nb)
    if first is not None and BOOTSTRAP_TAG in tags(first):
        changed = first.source != wanted or (lab and first.metadata.get("nbgrader") != LOCKED_BOOTSTRAP)
        first.source = wanted
        if lab:
            first.metadata["nbgrader"] = dict(LOCKED_BOOTSTRAP)
        return changed
    metadata = {"tags": [BOOTSTRAP_TAG, "nbval-ignore-output"]}
    if lab:
        metadata["nbgrader"] = dict(LOCKED_BOOTSTRAP)
    cell = nbformat.v4.new_code_cell(wanted, metadata=metadata)
    position = nb.cells.index(first) if first is not None else len(nb.cells)
    nb.cells.insert(position, cell)
    return True
