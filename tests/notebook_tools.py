"""Execute notebooks the way the book commits them: top to bottom, on this machine, no tag honoured.

Shared by `make refresh` (which writes the outputs back) and the tests (which read them).
Nothing is written unless the whole notebook ran: a broken notebook is reported and left as it was.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from ptgrader.kernel_client import RepollingKernelManager
from ptgrader.processes import kill_until_gone

from tests.bootstrap import BOOTSTRAP_TAG, ROOT, bootstrap_source

#: Warnings about the machine, not the notebook, so neither kept in committed outputs nor compared with them:
#: - what a CUDA build of torch logs on a machine with a CUDA toolkit but no GPU (a Colab CPU runtime) when
#:   torch.utils.cpp_extension is first imported; chapter 00 shows it and says what it means. (TORCH_LOGS could
#:   silence it, but with TORCH_LOGS set torch ignores the set_logs calls chapter 05 teaches.)
#: - what Dynamo says on Python 3.13.0 exactly, whose guards it checks in a slower way than on 3.13.1+.
MACHINE_WARNINGS = re.compile(
    r"^W\d{4} [\d:.]+ +\d+ \S*torch/utils/cpp_extension\.py:\d+\] (?:\[[^\]]*\] )?"
    r"No CUDA runtime is found, using CUDA_HOME=.*(?:\n|$)"
    r"|^\S*torch/_dynamo/guards\.py:\d+: RuntimeWarning: Guards may run slower on Python 3\.13\.0\..*\n"
    r"  warnings\.warn\($\n?",
    re.MULTILINE,
)


def without_machine_warnings(outputs: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """``outputs`` with MACHINE_WARNINGS taken out of the stderr streams; a stream left empty is dropped."""
    kept = []
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            text = MACHINE_WARNINGS.sub("", output["text"])
            if not text:
                continue
            output = nbformat.from_dict({**output, "text": text})
        kept.append(output)
    return kept


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


def execute_notebook(nb: nbformat.NotebookNode, workdir: Path, kernel_name: str = "python3",
                     env: Mapping[str, str] | None = None) -> float:
    """Run every code cell in order, in ``workdir``, as Run All does; return the wall time in seconds.

    No tag is honoured: a learner's Run All ignores tags, so any error raises NotebookError naming
    the cell. ``env`` adds to the kernel's environment. No widget state is stored: the website shows explorers as static states, and a page
    with widget state would load the widget JavaScript from a CDN.
    """
    nb.metadata.pop("widgets", None)
    client = NotebookClient(
        nb, timeout=600, kernel_name=kernel_name, record_timing=False, resources={"metadata": {"path": str(workdir)}},
        kernel_manager_class=RepollingKernelManager,  # a reply's lost wake-up costs half a second, not the timeout
    )
    started = time.perf_counter()
    token = uuid.uuid4().hex
    kernel_env = {**os.environ, **(env or {}), RUN_MARK: token}
    with _no_process_left_behind(f"{RUN_MARK}={token}"), client.setup_kernel(env=kernel_env):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as exc:
                raise NotebookError(f"code cell {index} failed:\n{exc}") from None
            cell.outputs = without_machine_warnings(cell.outputs)
            error = next((out for out in cell.outputs if out.output_type == "error"), None)
            if error is not None:  # nbclient itself lets a cell tagged `raises-exception` fail
                raise NotebookError(f"code cell {index} failed: {error.ename}: {error.evalue}")
    return time.perf_counter() - started


def execute_cold(nb: nbformat.NotebookNode, workdir: Path) -> float:
    """:func:`execute_notebook` with a cold Inductor cache of its own, as on a reader's first run: a compile
    the chapter times is a real compile (`make refresh`, `make check-timings`)."""
    with tempfile.TemporaryDirectory(prefix="inductor-cold-") as cache:
        return execute_notebook(nb, workdir, env={"TORCHINDUCTOR_CACHE_DIR": cache})


#: Set in the kernel's environment, which every process it starts inherits: how a leftover is recognised.
RUN_MARK = "PTLABS_NOTEBOOK_RUN"


def processes_marked(mark: str) -> dict[int, str]:
    """Live processes whose environment holds ``mark`` (Linux /proc; elsewhere, none are seen)."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if mark.encode() in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


#: How long a shut-down kernel's children may take to exit: generous for a loaded machine, and only a
#: real leftover ever waits this long.
LEFTOVER_GRACE_S = 30.0


def reap_leftovers(mark: str, grace_s: float | None = None) -> dict[int, str]:
    """Wait up to ``grace_s`` for the processes carrying ``mark`` to exit; kill the survivors; return them.

    A worker or a server left running by a notebook holds memory and a port and breaks the next run,
    so after a kernel shut down, nothing it started may survive. An empty result means a clean exit.
    """
    deadline = time.monotonic() + (LEFTOVER_GRACE_S if grace_s is None else grace_s)
    while (left := processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)  # the kernel and its children may still be exiting
    if left:
        kill_until_gone(lambda: set(processes_marked(mark)), settle=lambda: time.sleep(0.1))
    return left


def describe_leftovers(left: dict[int, str]) -> str:
    """The failure message for processes a notebook left running."""
    listing = "\n".join(f"  pid {pid}: {command[:200]}" for pid, command in sorted(left.items()))
    return f"the notebook left {len(left)} process(es) running after its kernel shut down:\n{listing}"


class _no_process_left_behind:  # noqa: N801  (used as a context manager, named for what it checks)
    """After the kernel shut down, no process it started may survive: leftovers are killed, then reported."""

    def __init__(self, mark: str) -> None:
        self.mark = mark

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        left = reap_leftovers(self.mark)
        if left and kind is None:
            raise NotebookError(describe_leftovers(left))


#: nbgrader metadata of a lab's bootstrap cell: locked, so grading puts back the original of an edited one.
LOCKED_BOOTSTRAP = {
    "grade": False, "grade_id": "bootstrap", "locked": True, "schema_version": 3, "solution": False, "task": False,
}


def is_lab(nb: nbformat.NotebookNode) -> bool:
    """An nbgrader notebook: some cell carries nbgrader metadata."""
    return any("nbgrader" in cell.get("metadata", {}) for cell in nb.cells)


#: The bootstrap cell's tags: its output (pip's) is not compared, and the website does not show it, so a
#: chapter page opens with the chapter's title and text; in Jupyter and Colab it stays visible and runs.
BOOTSTRAP_TAGS = (BOOTSTRAP_TAG, "nbval-ignore-output", "remove-cell")
#: The first line of a solution's code cell: Colab hides a cell's code behind its `@title` when the cell's
#: metadata says `cellView: form`; JupyterLab, Notebook 7 and VS Code honour `jupyter.source_hidden`.
SOLUTION_TITLE = "# @title Solution (try the exercise first; double-click to show the code)"


def solution_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The code cells between a chapter's ``{solution-start}`` and ``{solution-end}`` markdown cells."""
    found, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            inside = ("{solution-start}" in cell.source or inside) and "{solution-end}" not in cell.source
        elif inside and cell.cell_type == "code":
            found.append(cell)
    return found


def collapse_solutions(nb: nbformat.NotebookNode) -> bool:
    """Make every exercise's solution open collapsed, so a learner tries before seeing it; True if it changed.

    The cell still runs in Run All and its check still runs after it; the website keeps its dropdown.
    """
    changed = False
    for cell in solution_cells(nb):
        if not cell.source.startswith(SOLUTION_TITLE):
            cell.source = f"{SOLUTION_TITLE}\n{cell.source}"
            changed = True
        if cell.metadata.get("jupyter", {}).get("source_hidden") is not True or cell.metadata.get("cellView") != "form":
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
            cell.metadata["cellView"] = "form"
            changed = True
    return changed


def ensure_bootstrap(nb: nbformat.NotebookNode) -> bool:
    """Make the first code cell the canonical Colab bootstrap (locked in a lab); return True when it changed."""
    first = next((cell for cell in nb.cells if cell.cell_type == "code"), None)
    wanted = bootstrap_source()
    lab = is_lab(nb)
    if first is not None and BOOTSTRAP_TAG in tags(first):
        changed = first.source != wanted or (lab and first.metadata.get("nbgrader") != LOCKED_BOOTSTRAP)
        changed |= not set(BOOTSTRAP_TAGS) <= tags(first)
        first.source = wanted
        first.metadata["tags"] = sorted(tags(first) | set(BOOTSTRAP_TAGS))
        if lab:
            first.metadata["nbgrader"] = dict(LOCKED_BOOTSTRAP)
        return changed
    metadata = {"tags": list(BOOTSTRAP_TAGS)}
    if lab:
        metadata["nbgrader"] = dict(LOCKED_BOOTSTRAP)
    cell = nbformat.v4.new_code_cell(wanted, metadata=metadata)
    position = nb.cells.index(first) if first is not None else len(nb.cells)
    nb.cells.insert(position, cell)
    return True
