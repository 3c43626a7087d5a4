"""The reference outputs, and the comparison that decides whether a test cell's outputs are right.

The lab's source notebook (the reference solution) runs once per grading process and per version
of the file, jailed like a submission, in a kernel of its own (:class:`ReferenceRun`); what its test
cells send out (:func:`ptchecks.emit`) is the reference. :func:`compare` then holds each
submission's outputs against it with :func:`ptgrader.channel.differences`, outside the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbclient.client import NotebookClient
from nbformat.notebooknode import NotebookNode

from . import channel, contract, jail
from .cells import grade_id, graded_test_cells, setup_index
from .kernels import IsolatedKernelManager, Isolation, kernel_place
from .warm import WarmKernels

#: How long to wait for a cell's last output messages after it finished (nbclient's default is 4 s).
IOPUB_TIMEOUT_S = 60

#: (source notebook, its modification time) -> grade_id -> the outputs its test cells sent.
_REFERENCES: dict[tuple[str, int], dict[str, dict[str, channel.Output]]] = {}


class ReferenceRun(NotebookClient):
    """Runs the source notebook (the reference solution) in a jailed kernel and keeps the outputs it sends out."""

    def __init__(self, nb: NotebookNode, *, timeout: int | None) -> None:
        # A reference run that lost a message would ask less of every student: it fails instead.
        super().__init__(nb, kernel_name="python3", timeout=timeout, shutdown_kernel="immediate", allow_errors=False,
                         kernel_manager_class=IsolatedKernelManager, iopub_timeout=IOPUB_TIMEOUT_S,
                         raise_on_iopub_timeout=True)
        self.emitted: dict[int, dict[str, channel.Output]] = {}
        self._setup: tuple[Path, jail.JailSpec | None, WarmKernels | None] | None = None

    def run(self, folder: Path, spec: jail.JailSpec | None, warm: WarmKernels | None) -> dict[int, dict[str, Any]]:
        self._setup = (folder, spec, warm)
        km: Any = None
        try:
            with self.setup_kernel():
                km = self.km
                setup = setup_index(self.nb)
                for index, cell in enumerate(self.nb.cells):
                    self.execute_cell(cell, index, store_history=False)
                    if index == setup and grade_id(cell) == "setup":
                        self._take_baseline()
        finally:
            if isinstance(km, IsolatedKernelManager):
                km.ensure_dead()
        return self.emitted

    def _take_baseline(self) -> None:
        """Right after the set-up cell, where a student's run takes its hold: the settings every test cell starts
        from and the calls of the contract compare with (``ptchecks.hold_baseline``), taken at the same point in both
        runs, so what torch does on its own later (importing a module that registers kernels) shows in both alike."""
        reply = self.wait_for_reply(self.kc.execute(contract.BASELINE_LINE, silent=True, store_history=False,
                                                    allow_stdin=False))
        if reply is None or reply["content"].get("status") != "ok":
            raise RuntimeError(f"the reference run could not take the checks' baseline: {(reply or {}).get('content')}")

    def create_kernel_manager(self) -> Any:
        km = super().create_kernel_manager()
        assert isinstance(km, IsolatedKernelManager) and self._setup is not None
        km.prepare(*self._setup)
        return km

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        out = super().output(outs, msg, display_id, cell_index)
        if out is not None and outs and outs[-1] is out and channel.MIME in out.get("data", {}):
            outs.pop()
            cell = self.emitted.setdefault(cell_index, {})
            for payload in channel.payloads(out.data[channel.MIME]):
                name, value = channel.decode(payload)
                if name in cell:
                    raise RuntimeError(f"the reference solution sent {name!r} twice in cell {cell_index + 1}")
                cell[name] = value
            return None
        return out


def reference_outputs(
    source_path: Path, isolation: Isolation | None, warm: WarmKernels | None, *, timeout: int | None, log: Any
) -> dict[str, dict[str, channel.Output]]:
    """grade_id -> the outputs the source notebook's test cell sends ({} for a lab that sends none)."""
    if not source_path.is_file():
        return {}
    source = nbformat.read(source_path, as_version=4)
    tests = graded_test_cells(source)
    if not any("emit(" in cell.source for _, cell in tests):
        return {}
    key = (str(source_path), source_path.stat().st_mtime_ns)
    if key not in _REFERENCES:
        log.info("ptgrader: running the source notebook %s once for its reference outputs", source_path)
        runner = ReferenceRun(source, timeout=timeout)
        with kernel_place(isolation) as (folder, spec):
            emitted = runner.run(folder, spec, warm)
        # where the reference's outputs decide a part, none of the student's hooks may be left on every module (the
        # reference's cells run without ptchecks.begin, which sends the count in a student's run)
        none_left = {channel.LEFT_HOOKS: channel.Output(0)}
        _REFERENCES[key] = {grade_id(cell): {**none_left, **emitted[index]} if _of_kind(emitted[index], observed=False)
                            else emitted[index] for index, cell in tests if emitted.get(index)}
    return _REFERENCES[key]


@dataclass(frozen=True)
class Comparison:
    """One test cell's outputs held against the reference's, in two kinds that weigh differently.

    ``outputs``: why what the student's code computed differs (decided outside the kernel: the part
    earns nothing); ``checks``: why what the cell's checks saw in the kernel differs (an in-kernel
    rule: it costs only its share, :data:`ptgrader.score.IN_KERNEL_SHARE`). ``compared`` is whether the
    reference sent any output of the first kind: without one, the kernel would decide the whole part.
    """

    outputs: list[str]
    checks: list[str]
    compared: bool


def _of_kind(expected: dict[str, channel.Output], *, observed: bool) -> dict[str, channel.Output]:
    """The reference's outputs of one kind: what a check saw (``observed``), or what the student's code computed."""
    return {name: output for name, output in expected.items() if output.observation is observed}


def deciding_outputs(nb: NotebookNode, reference: dict[str, dict[str, channel.Output]]
                     ) -> dict[int, dict[str, channel.Output]]:
    """Test cell index -> the reference's outputs that decide its part: what the student's code computed, not what a
    check saw (an observation costs only a share of the part)."""
    found = {}
    for index, cell in graded_test_cells(nb):
        deciding = _of_kind(reference.get(grade_id(cell), {}), observed=False)
        if deciding:
            found[index] = deciding
    return found


def worded(differences: list[str], *, stopped: bool) -> str:
    """The first few of a cell's ``differences``, for its verdict. In a cell the grader stopped at its first
    difference (:meth:`~ptgrader.receive.OutputReceiver._stop_at_a_difference`), the outputs it then never computed
    are counted, not listed."""
    if not stopped:
        return "; ".join(differences[:5])
    computed = [line for line in differences if not line.endswith(channel.NOT_SENT)] or differences[:1]
    later = len(differences) - len(computed)
    return "; ".join(computed[:5]) + f"; the grader stopped the cell there, so {later} later outputs were not computed"


def compare(nb: NotebookNode, emitted: dict[int, dict[str, channel.Output | None]],
            reference: dict[str, dict[str, channel.Output]]) -> dict[int, Comparison]:
    """index -> the comparison of every test cell the reference sent outputs for."""
    found = {}
    for index, cell in graded_test_cells(nb):
        expected = reference.get(grade_id(cell))
        if not expected:
            continue
        sent = emitted.get(index, {})
        computed, seen = _of_kind(expected, observed=False), _of_kind(expected, observed=True)
        found[index] = Comparison(channel.differences(sent, computed), channel.differences(sent, seen),
                                  compared=bool(computed))
    return found
