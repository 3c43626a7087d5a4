"""Running one submission: a jailed kernel, the checks held before student code, time limits, a certain end.

:class:`KernelRun` is the part of :class:`~ptgrader.execute.GuardedExecute` that runs the
notebook's cells (nbclient does the talking):

- the kernel is forked from a warm server that imported torch once (:mod:`ptgrader.warm`), or
  started cold if that fails; either way in its own jail (:mod:`ptgrader.jail`);
- student code above the lab's set-up cell is not run (it would run before the checks are held);
- right after the set-up cell the checks are held (:func:`ptgrader.contract.hold_source`), each test
  cell runs through that hold, and a test cell that ran cleanly gets a separate execution that lets
  the held checks print its one-time token;
- each cell may run ``timeout`` seconds and the whole submission ``submission_timeout``: past either
  the kernel is stopped (past the submission's time, also between two cells that each ran well within
  their own limit), and the test cells not run earn nothing (the class goes on); so is a kernel that sends
  more bytes of messages than ``received_bytes_budget`` (killed at once, by its client);
- the kernel, and everything it started, is killed at the end, whatever happened.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode

from . import contract, jail
from .cells import cell_label, setup_index
from .compare import IOPUB_TIMEOUT_S
from .kernel_client import SentTooMuch
from .kernels import GraderTemp, IsolatedKernelManager, Isolation, kernel_place
from .receive import OUTPUT_GRACE_S
from .score import error_output
from .warm import WarmKernels, supported


class KernelRun:
    """Mixin for GuardedExecute (a NotebookClient): runs one submission in a jailed kernel."""

    # Traits of GuardedExecute and state set by it before a run.
    timeout: int
    submission_timeout: int
    received_bytes_budget: int
    preload: list[str]
    nb: NotebookNode
    student_cells: set[int]
    test_runs: dict[int, tuple[str, str]]  # test cell index -> (grade_id, the completion line to execute)
    test_sources: dict[str, str]  # grade_id -> the test cell's own source

    def run_submission(self, nb: NotebookNode, resources: dict[str, Any], report: Any,
                       isolation: Isolation | None) -> int | None:
        """Run the notebook (warm kernel, else cold); return the index of the cell the run stopped at, or None."""
        temp = GraderTemp.current()
        warm = self.warm_server(temp, isolation)
        attempts = [warm, None] if warm is not None else [None]
        for attempt, server in enumerate(attempts):
            with kernel_place(isolation) as (folder, spec):
                started, stopped_at = self._run_in(nb, resources, report, folder, spec, server)
            if started or report.stopped or report.survivors:
                return stopped_at
            if server is not None:  # a server that failed a start is replaced before the next student
                server.kill()
            if attempt + 1 < len(attempts):
                self.log.warning("ptgrader: %s/%s: the warm kernel did not start; starting one cold",
                                 report.student, report.assignment)
        report.stopped = "the grading kernel did not start"
        self.log.error("ptgrader: %s/%s: %s", report.student, report.assignment, report.stopped)
        return -1

    def warm_server(self, temp: GraderTemp, isolation: Isolation | None) -> WarmKernels | None:
        """The warm server to fork kernels from, or None (kernels start cold) where it cannot run."""
        if isolation is None or not self.preload or not supported():
            return None
        try:
            return WarmKernels.shared(self.preload, temp.path)
        except (OSError, RuntimeError) as problem:  # grading goes on, only slower
            self.log.warning("ptgrader: no warm kernel server (%s); kernels start from scratch", problem)
            return None

    def _run_in(
        self, nb: NotebookNode, resources: dict[str, Any], report: Any, folder: Path,
        spec: jail.JailSpec | None, warm: WarmKernels | None,
    ) -> tuple[bool, int | None]:
        """Execute every cell in one kernel; stop at a timeout or a dead kernel. (started, stopped at)."""
        NotebookClient.__init__(self, nb, None)  # type: ignore[arg-type]
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._kernel_setup = (folder, spec, warm)
        stopped_at = None
        km: IsolatedKernelManager | None = None
        started = False
        clock = time.perf_counter()
        try:
            with self.setup_kernel(cwd=str(folder)):
                km = self.km
                started = True
                report.seconds["start"] = round(time.perf_counter() - clock, 3)
                clock = time.perf_counter()
                stopped_at = self._cells(report)
                report.seconds["cells"] = round(time.perf_counter() - clock, 3)
                clock = time.perf_counter()
                if isinstance(km, IsolatedKernelManager):
                    report.killed_processes = km.leftover_processes()
                    report.seconds["kernel_cpu"] = round(km.cpu_seconds(), 3)
        except Exception as problem:  # noqa: BLE001  (a kernel that did not start costs this student only)
            if started:
                raise
            self.log.warning("ptgrader: %s/%s: kernel start failed: %s", report.student, report.assignment, problem)
        finally:
            km = km or getattr(self, "km", None)
            if isinstance(km, IsolatedKernelManager) and not km.ensure_dead():
                report.survivors = f"kernel pid {km.kernel_pid} did not die after SIGKILL"
                self.log.error("ptgrader: %s/%s: %s", report.student, report.assignment, report.survivors)
            report.seconds["end"] = round(time.perf_counter() - clock, 3)
        if stopped_at is not None:
            self.log.error("ptgrader: %s/%s: %s", report.student, report.assignment, report.stopped)
        return started, stopped_at

    def _cells(self, report: Any) -> int | None:
        """Run the cells in order; return the index of the cell the run stopped at (None: all ran)."""
        info_msg = self.wait_for_reply(self.kc.kernel_info())
        if info_msg is not None:  # the kernel answered once already (start-up); a late second answer is no error
            self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
        setup = setup_index(self.nb)
        self._deadline = time.monotonic() + self.submission_timeout
        held = False  # the hold is taken once, after the set-up cell and before any student code
        for index, cell in enumerate(self.nb.cells):
            if index < setup and index in self.student_cells:
                # Code that ran before the set-up would run before the checks record what they trust.
                cell.outputs = [error_output("NotRun", "student code above the set-up cell is not run")]
                continue
            if time.monotonic() >= self._deadline:  # silent cells, each within its limit, add up too
                report.stopped = self._past_the_time(f"before {cell_label(cell, index)}")
                cell.outputs = [error_output("GradingStopped", report.stopped)]
                return index
            try:
                if not held and (index > setup or index in self.test_runs):
                    self._take_hold(report)
                    held = True
                # The wait for a cell's last outputs after its reply is charged to the submission's time.
                self.iopub_timeout = max(1, min(IOPUB_TIMEOUT_S, math.ceil(self._deadline - time.monotonic())
                                                + OUTPUT_GRACE_S))
                # No history: code that runs during a test cell cannot read the cell's source.
                self.execute_cell(cell, index, store_history=False)
                if index in self.test_runs and not any(out.output_type == "error" for out in cell.outputs):
                    self._complete(cell, index)
            except CellTimeoutError:
                report.stopped = self._timeout_reason(cell, index)
            except DeadKernelError:
                received = getattr(self.kc, "received", None)  # the grader stopped it, or its relay is gone
                failure = received.reason() if received is not None else ""
                report.stopped = (f"{failure} (at {cell_label(cell, index)}); the kernel was stopped" if failure
                                  else f"the kernel died while running {cell_label(cell, index)}")
            except SentTooMuch as problem:
                report.stopped = f"{problem} (at {cell_label(cell, index)}); the kernel was stopped"
            if report.stopped:
                cell.outputs.append(error_output("GradingStopped", report.stopped))
                return index
        return None

    def _get_timeout(self, cell: NotebookNode | None) -> int | None:
        """A cell may run ``timeout`` seconds, and no longer than what is left of the submission's time.

        At least a second (nbclient's limits are whole seconds): a run past its time is stopped before its
        next cell (``_cells``), so the second is the most it can overrun.
        """
        deadline = getattr(self, "_deadline", None)
        if deadline is None:
            return self.timeout
        left = max(1, math.ceil(deadline - time.monotonic()))
        return min(self.timeout, left) if self.timeout else left

    def _timeout_reason(self, cell: NotebookNode, index: int) -> str:
        if time.monotonic() >= self._deadline - 1:
            return self._past_the_time(f"at {cell_label(cell, index)}")
        return f"{cell_label(cell, index)} ran longer than {self.timeout} s; the kernel was stopped"

    def _past_the_time(self, where: str) -> str:
        return f"the submission ran longer than its {self.submission_timeout} s ({where}); the kernel was stopped"

    def _take_hold(self, report: Any) -> None:
        """After the set-up cell, before any student code: hold the checks (contract.hold_source).

        If that fails (a set-up cell that did not import the checks), every test cell fails on its own:
        it runs through the hold.
        """
        hold = contract.hold_source(self.test_sources)
        msg_id = self.kc.execute(hold, silent=True, store_history=False, allow_stdin=False)
        reply = self.wait_for_reply(msg_id)
        if reply is None or reply["content"].get("status") != "ok":
            why = (reply or {}).get("content", {}).get("evalue", "no reply")
            self.log.error("ptgrader: %s/%s: holding the checks failed: %s", report.student, report.assignment, why)

    def _complete(self, cell: NotebookNode, index: int) -> None:
        """The test cell ran without an error: let the held checks print its token (a separate execution)."""
        completion = nbformat.v4.new_code_cell(self.test_runs[index][1])
        try:
            self.execute_cell(completion, index, store_history=False)
        finally:
            self.nb.cells[index] = cell  # nbclient puts the cell it ran in the notebook
            cell.outputs.extend(completion.outputs)

    def create_kernel_manager(self) -> Any:
        """A kernel manager for one jailed kernel, talking to it over Unix sockets inside its jail.

        Over TCP, jupyter_client picks free ports by binding and releasing them before the kernel binds
        them; graders side by side can pick the same port. Socket files in the kernel's own tmpfs cannot
        collide, and the jail has no network to listen on.
        """
        km = super().create_kernel_manager()  # type: ignore[misc]
        assert isinstance(km, IsolatedKernelManager) and self._kernel_setup is not None
        km.prepare(*self._kernel_setup)
        km.received_bytes_budget = self.received_bytes_budget
        return km
