"""``GuardedExecute``: nbgrader's Execute step, made safe to run on a class's submissions.

``labs/nbgrader_config.py`` puts it in place of nbgrader's ``Execute`` in
``Autograde.autograde_preprocessors``, so the plain ``nbgrader autograde`` command uses it. For
each submitted notebook it:

1. reads every cell a student could have written (any code cell that is not, byte for byte, a
   locked cell of the source) against the code policy (:mod:`ptgrader.policy`); a submission
   that breaks it is not run: every graded cell gets a ``GradingWithheld`` error;
2. runs the notebook in a **jailed kernel** (:mod:`ptgrader.jail`): a PID namespace of its own,
   an unprivileged uid, nothing writable but its own size-limited folders, no course, no HOME,
   no network, rlimits on memory, processes and file size. The kernel is forked from a warm
   server that imported torch once (:mod:`ptgrader.warm`), or started cold if that server is not
   there. A cell that times out or a kernel that dies stops the run: the graded cells not run get
   an error that says why, the cells before keep their grades, and nbgrader goes on with the next
   student (nbgrader's own Execute raises and the whole command exits 1);
3. takes hold of the checks right after the set-up cell, runs each graded test cell through that
   hold and, if it ran cleanly, lets the held checks print a one-time token in a separate
   execution (:mod:`ptgrader.contract`); a cell earns points only if its token was printed, after
   as many checks as the reference solution passes there (counted in the source's outputs);
4. keeps at most ``max_output_bytes`` of output per cell while it arrives, and only text and
   raster images of rich outputs (:mod:`ptgrader.outputs`): no student HTML reaches the feedback.
   Outputs a test cell sends out (:mod:`ptgrader.channel`) are taken out of the stream and
   compared here with the reference solution's: such a cell earns points only if they match;
5. kills the kernel, and with it everything it started, then checks the course record
   (:mod:`ptgrader.course`): a changed file is put back and the submission's grades withheld.
   Each step of this clean-up runs even when the one before it failed.

What happened is logged and written to ``ptgrader-report.json`` beside the graded notebook;
``python -m ptgrader.report LAB`` lists the submissions that need an instructor's eyes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import nbformat
from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, OverwriteCells
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool, Integer, List, Unicode

from . import cgroups, channel, contract, jail
from .course import CourseRecord
from .kernels import TREE_MEMORY, GraderTemp, IsolatedKernelManager, Isolation, accelerator_devices, default_limits
from .outputs import make_notebook_safe, make_safe
from .policy import LabNames, scan_cell, setup_module_names
from .warm import WarmKernels, supported

REPORT_NAME = "ptgrader-report.json"
TRUNCATED = "\n... output cut by the grader (more than {limit} bytes in this cell) ...\n"


@dataclass
class GradingReport:
    """What the guarded run found for one submitted notebook."""

    student: str
    assignment: str
    notebook: str
    withheld: str = ""  # why no cell earns points (policy, changed files), or ""
    stopped: str = ""  # why the run stopped early (timeout, dead kernel, no kernel), or ""
    incomplete: list[str] = field(default_factory=list)  # test cells whose last line did not run cleanly
    tampered: list[str] = field(default_factory=list)  # test cells whose canaries found the grader changed
    findings: list[str] = field(default_factory=list)
    restored_files: list[str] = field(default_factory=list)
    killed_processes: int = 0  # processes the kernel left running, ended with it
    survivors: str = ""  # a kernel that could not be ended (never seen; an instructor must look)
    truncated_cells: list[int] = field(default_factory=list)
    unsafe_outputs: int = 0  # rich outputs whose HTML/JavaScript/SVG was not kept
    outputs_differ: list[str] = field(default_factory=list)  # test cells whose sent outputs are not the reference's
    isolation: str = ""  # how the kernel was isolated
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step: start, cells, end

    @property
    def needs_review(self) -> bool:
        return bool(
            self.withheld or self.stopped or self.tampered or self.killed_processes or self.restored_files
            or self.survivors or self.outputs_differ
        )


def _error_output(ename: str, evalue: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _graded_test_cells(nb: NotebookNode) -> list[tuple[int, NotebookNode]]:
    return [
        (index, cell)
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and is_grade(cell) and not is_solution(cell)
    ]


def _cell_label(cell: NotebookNode, index: int) -> str:
    """How a report names a cell: its grade_id when it has one, else its position counted from 1."""
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    return f"cell {index + 1} ({grade_id})" if grade_id else f"cell {index + 1}"


def setup_index(nb: NotebookNode) -> int:
    """Index of the lab's locked set-up cell (grade_id ``setup``), 0 when there is none."""
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
    return ids.index("setup") if "setup" in ids else 0


def _count_checks(cell: NotebookNode) -> int:
    """The ✅ lines in a cell's outputs: how many checks the reference solution passes there."""
    text = "".join(output.get("text", "") for output in cell.get("outputs", []) if output.output_type == "stream")
    return sum(line.startswith("✅") for line in text.splitlines())


class IsolationUnavailable(RuntimeError):
    """This machine cannot jail kernels, and the configuration asks for it."""


#: How long to wait for a cell's last output messages after it finished (nbclient's default is 4 s).
IOPUB_TIMEOUT_S = 60


class GuardedExecute(Execute):
    """nbgrader's Execute with a code policy, completion tokens and a jailed kernel per submission."""

    enforce_code_policy = Bool(
        True, help="Withhold the grades of a submission whose own cells break the code policy."
    ).tag(config=True)
    max_output_bytes = Integer(20_000, help="Output kept per cell; the rest is cut while it arrives.").tag(config=True)
    preload = List(
        Unicode(),
        [
            "torch", "torch._dynamo", "torch._functorch.aot_autograd", "torch._inductor.compile_fx", "networkx",
            "torch.onnx", "onnx", "onnxscript", "onnxscript.function_libs.torch_lib.ops", "ptlabs",
            "matplotlib.font_manager", "ipykernel.kernelapp", "ipykernel.debugger",
        ],
        help="Modules a warm server imports once and every grading kernel is forked with (Linux; modules"
        " not installed are skipped); an empty list starts each kernel cold. Never ptchecks: its tamper"
        " record is taken in the kernel. The default holds what the labs import, torch.compile's and the ONNX"
        " exporter's modules included (about 3 s of CPU per kernel of labs 05 and 06).",
    ).tag(config=True)
    isolation = Unicode(
        "jail",
        help="'jail': every kernel runs in its own namespaces as an unprivileged user (Linux; grading stops"
        " with an error where that is not possible). 'none': kernels run as you, with your files and"
        " processes within reach; only for submissions you trust.",
    ).tag(config=True)
    memory_limit = Integer(0, help="Address space of a kernel process in bytes (0: the default, see ptgrader.kernels)").tag(config=True)
    process_limit = Integer(0, help="Processes and threads of a kernel (0: the default)").tag(config=True)
    file_size_limit = Integer(0, help="Largest file a kernel may write, in bytes (0: the default)").tag(config=True)
    scratch_bytes = Integer(512 << 20, help="Size of the tmpfs that holds all of a kernel's writable folders").tag(config=True)
    tree_memory = Integer(0, help="Memory of all of a kernel's processes together, in bytes, where a control group"
                          " can be made (0: the default, see ptgrader.kernels.TREE_MEMORY)").tag(config=True)
    accelerators = Bool(True, help="Give kernels this machine's GPU devices (NVIDIA, AMD), when it has any").tag(config=True)
    watch_graded = Bool(
        True,
        help="Also watch the gradebook and autograded/ for changes while a kernel runs. Off when several graders"
        " share the course (python -m ptgrader.autograde --jobs): they write those for their own students.",
    ).tag(config=True)
    compare_outputs = Bool(
        True,
        help="Where a test cell sends outputs out (ptgrader.channel.emit), compare them with the source notebook's,"
        " in the grader: a cell earns points only if they match.",
    ).tag(config=True)

    #: One per grading process and settings: the uid lock and the checks above are done once.
    _isolations: ClassVar[dict[tuple[Any, ...], Isolation]] = {}
    #: (source notebook, its modification time) -> grade_id -> the outputs its test cells sent.
    _references: ClassVar[dict[tuple[str, int], dict[str, dict[str, Any]]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_manager_class", IsolatedKernelManager)
        super().__init__(*args, **kwargs)
        self.interrupt_on_timeout = False  # an interrupt cannot stop a loop that ignores SIGINT: stop the kernel
        self.shutdown_kernel = "immediate"
        # nbclient waits 4 s for a cell's last messages, then drops them silently: on a loaded machine that
        # lost outputs a hidden test sent to the grader. Wait as long as a cell may run.
        self.iopub_timeout = IOPUB_TIMEOUT_S
        self._kernel_setup: tuple[Path, jail.JailSpec | None, WarmKernels | None] | None = None

    # ---------------------------------------------------------------------------------- isolation

    def _isolation(self, course: str) -> Isolation | None:
        """The jail settings of this grader (None with isolation = 'none'); raises where no jail is possible."""
        if self.isolation == "none":
            return None
        if self.isolation != "jail":
            raise IsolationUnavailable(f"GuardedExecute.isolation must be 'jail' or 'none', not {self.isolation!r}")
        limits = default_limits()
        for key, value in (("address_space", self.memory_limit), ("processes", self.process_limit),
                           ("file_size", self.file_size_limit)):
            if value:
                limits[key] = value
        devices = tuple(accelerator_devices()) if self.accelerators else ()
        memory = self.tree_memory or TREE_MEMORY
        key = (course, tuple(sorted(limits.items())), self.scratch_bytes, devices, memory)
        if key not in self._isolations:
            problem = jail.probe(userns=os.geteuid() != 0)
            if problem:
                raise IsolationUnavailable(
                    f"ptgrader cannot isolate grading kernels on this machine: {problem}. Grade on Linux (as root,"
                    " or as a user allowed to make user namespaces), in the Linux container described in"
                    " book/instructors.md, or set c.GuardedExecute.isolation = 'none' to run students' code as"
                    " yourself (only for submissions you trust)."
                )
            self._isolations[key] = Isolation(course, limits=limits, scratch_bytes=self.scratch_bytes, devices=devices,
                                              memory_bytes=memory)
        return self._isolations[key]

    # ---------------------------------------------------------------------------------- preprocess

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any], km: Any = None) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=self.config)
        isolation = self._isolation(str(Path(coursedir.root).resolve()))
        report = GradingReport(info["student"], info["assignment"], info["notebook"])
        report.isolation = isolation.describe() if isolation else "none"
        trusted, test_ids = self._trusted_sources(info)
        self._student_cell_indexes = set(self._student_cells(nb, trusted))
        modules = setup_module_names(list(trusted.values()))
        lab = LabNames.of(trusted, test_ids)
        findings = [
            finding
            for index in sorted(self._student_cell_indexes)
            for finding in scan_cell(nb.cells[index].source, index, modules, lab=lab)
        ]
        report.findings = [str(finding) for finding in findings]
        if findings and self.enforce_code_policy:
            self._withhold(nb, report, "the submission breaks the lab's code policy: " + "; ".join(report.findings))
            self._finish(report, coursedir)
            return nb, resources

        reference = self._reference_outputs(coursedir, info, isolation) if self.compare_outputs else {}
        self._emitted: dict[int, dict[str, Any]] = {}
        self._emitted_bytes = 0
        originals = self._wrap_test_cells(nb, self._expected_checks(coursedir, info))
        self._originals = originals
        self._expected_tokens = {index: token_line for index, (_, token_line, _) in originals.items()}
        self._seen_tokens: set[int] = set()
        # The course (the packages kernels import are read-only in the jail, and may be edited meanwhile)
        record = CourseRecord.take(Path(coursedir.root), shared=not self.watch_graded)
        try:
            self._run(nb, resources, report, isolation)
        finally:  # each step runs even if the one before failed: the course is checked whatever happened
            try:
                report.restored_files = record.changes()
                lost = record.restore(report.restored_files)
                if lost:
                    self.log.error("ptgrader: %s/%s: changed and not restorable: %s", report.student,
                                   report.assignment, ", ".join(lost[:10]))
            except Exception as problem:  # noqa: BLE001  (reported, never lost)
                report.restored_files.append(f"(the course record could not be checked: {problem})")
        self._check_tokens(nb, originals, report)
        if reference:
            self._compare_outputs(nb, reference, report)
        report.unsafe_outputs += make_notebook_safe(nb)
        if report.restored_files:
            self._withhold(
                nb, report, "the course changed while this submission ran: " + ", ".join(report.restored_files[:10])
            )
        self._finish(report, coursedir)
        return nb, resources

    def _warm_server(self, temp: GraderTemp, isolation: Isolation | None) -> WarmKernels | None:
        """The warm server to fork kernels from, or None (kernels start cold) where it cannot run."""
        if isolation is None or not self.preload or not supported():
            return None
        try:
            return WarmKernels.shared(self.preload, temp.path)
        except (OSError, RuntimeError) as problem:  # grading goes on, only slower
            self.log.warning("ptgrader: no warm kernel server (%s); kernels start from scratch", problem)
            return None

    # ------------------------------------------------------------------------------ code policy

    def _trusted_sources(self, info: dict[str, str]) -> tuple[dict[str, str], set[str]]:
        """(grade_id -> source of every locked cell of the source notebook, the grade_ids of its graded cells)."""
        with Gradebook(info["db_url"]) as gradebook:
            try:
                notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            except MissingEntry:
                return {}, set()
            locked = {cell.name: cell.source for cell in notebook.source_cells if cell.locked}
            return locked, {cell.name for cell in notebook.grade_cells} & set(locked)

    def _student_cells(self, nb: NotebookNode, trusted: dict[str, str]) -> list[int]:
        """Indexes of the code cells a student could have written: all but exact copies of locked cells."""
        notification = OverwriteCells(config=self.config).missing_cell_notification
        found = []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            # A test cell nbgrader put back starts with a comment saying so.
            put_back = "# " + notification.format(cell_id=grade_id) + trusted.get(grade_id, "")
            if grade_id not in trusted or cell.source not in (trusted[grade_id], put_back):
                found.append(index)
        return found

    # ------------------------------------------------------------------------ completion tokens

    def _expected_checks(self, coursedir: CourseDirectory, info: dict[str, str]) -> dict[str, int]:
        """grade_id -> ✅ lines of each test cell in the source notebook's saved outputs."""
        path = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"])) / (
            info["notebook"] + ".ipynb"
        )
        if not path.is_file():
            self.log.warning("ptgrader: no source notebook %s; test cells are not held to a count of checks", path)
            return {}
        source = nbformat.read(path, as_version=4)
        return {cell.metadata.nbgrader["grade_id"]: _count_checks(cell) for _, cell in _graded_test_cells(source)}

    def _wrap_test_cells(self, nb: NotebookNode, expected: dict[str, int]) -> dict[int, tuple[str, str, str]]:
        """Run each graded test cell through the hold; return index -> (original source, token line, completion)."""
        originals = {}
        self._test_sources: dict[str, str] = {}
        for index, cell in _graded_test_cells(nb):
            grade_id = cell.metadata.nbgrader["grade_id"]
            token = secrets.token_hex(12)
            completion = contract.complete_line(grade_id, token, expected.get(grade_id, -1))
            originals[index] = (cell.source, contract.COMPLETION_FORMAT.format(test_id=grade_id, token=token), completion)
            self._test_sources[grade_id] = cell.source
            cell.source = contract.run_line(grade_id)
        return originals

    def _check_tokens(self, nb: NotebookNode, originals: dict[int, tuple[str, str, str]], report: GradingReport) -> None:
        """Restore each test cell's source; a cell that ran without its token printed earns nothing."""
        for index, (source, token_line, _) in originals.items():
            cell = nb.cells[index]
            cell.source = source
            printed = index in self._seen_tokens  # seen while the output arrived, before any cut
            token = token_line.rsplit(" ", 1)[1]
            for output in cell.outputs:
                if output.output_type == "stream":
                    output.text = output.text.replace(token_line + "\n", "").replace(token_line, "")
                elif output.output_type == "error":  # a traceback through the completion call shows the token
                    output.traceback = [line.replace(token, "<token>") for line in output.get("traceback", [])]
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and not o.text)]
            failed = any(output.output_type == "error" for output in cell.outputs)
            if any(output.get("ename") == "GraderTampered" for output in cell.outputs):
                report.tampered.append(cell.metadata.nbgrader["grade_id"])
            if not printed and not failed:
                cell.outputs.append(
                    _error_output("IncompleteTestCell", "the test cell's last line did not run; it earns no points")
                )
            if not printed:
                report.incomplete.append(cell.metadata.nbgrader["grade_id"])

    # ----------------------------------------------------------------------------------- running

    def _run(self, nb: NotebookNode, resources: dict[str, Any], report: GradingReport, isolation: Isolation | None) -> None:
        """Run the notebook in a jailed kernel (warm, or cold if the warm start fails); always end the kernel."""
        temp = GraderTemp.current()
        warm = self._warm_server(temp, isolation)
        attempts = [warm, None] if warm is not None else [None]
        for attempt, server in enumerate(attempts):
            folder = temp.kernel_folder()
            spec = None
            try:
                spec = isolation.spec(folder, dict(os.environ)) if isolation else None
                started = self._run_in(nb, resources, report, folder, spec, server)
            finally:
                if spec is not None and spec.cgroups and not cgroups.remove(spec.cgroups):
                    self.log.warning("ptgrader: %s/%s: a control group of the kernel is still busy: %s",
                                     report.student, report.assignment, spec.cgroups)
                shutil.rmtree(folder, ignore_errors=True)
            if started or report.stopped or report.survivors:
                return
            if server is not None:  # a server that failed a start is replaced before the next student
                server.kill()
            if attempt + 1 < len(attempts):
                self.log.warning("ptgrader: %s/%s: the warm kernel did not start; starting one cold",
                                 report.student, report.assignment)
        report.stopped = "the grading kernel did not start"
        self.log.error("ptgrader: %s/%s: %s", report.student, report.assignment, report.stopped)
        for _, cell in _graded_test_cells(nb):
            cell.outputs = [_error_output("GradingStopped", f"not run: {report.stopped}")]

    def _run_in(
        self, nb: NotebookNode, resources: dict[str, Any], report: GradingReport, folder: Path,
        spec: jail.JailSpec | None, warm: WarmKernels | None,
    ) -> bool:
        """Execute every cell in one kernel; stop at a timeout or a dead kernel. False if it never started."""
        NotebookClient.__init__(self, nb, None)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._cell_bytes: dict[int, int] = {}
        self._stream_tail: dict[int, str] = {}
        self._truncated = report.truncated_cells
        self._report = report
        self._kernel_setup = (folder, spec, warm)
        stopped_at = None
        km: IsolatedKernelManager | None = None
        started = False
        clock = time.perf_counter()
        try:
            with self.setup_kernel(cwd=str(folder)):
                km = self.km  # type: ignore[assignment]
                started = True
                report.seconds["start"] = round(time.perf_counter() - clock, 3)
                clock = time.perf_counter()
                self._cells(report)
                report.seconds["cells"] = round(time.perf_counter() - clock, 3)
                clock = time.perf_counter()
                stopped_at = self._stopped_at
                if isinstance(km, IsolatedKernelManager):
                    report.killed_processes = km.leftover_processes()
                    report.seconds["kernel_cpu"] = round(km.cpu_seconds(), 3)
        except Exception as problem:  # noqa: BLE001  (a kernel that did not start costs this student only)
            if started:
                raise
            self.log.warning("ptgrader: %s/%s: kernel start failed: %s", report.student, report.assignment, problem)
            km = km or self.km  # type: ignore[assignment]
        finally:
            km = km or getattr(self, "km", None)  # type: ignore[assignment]
            if isinstance(km, IsolatedKernelManager) and not km.ensure_dead():
                report.survivors = f"kernel pid {km.kernel_pid} did not die after SIGKILL"
                self.log.error("ptgrader: %s/%s: %s", report.student, report.assignment, report.survivors)
            report.seconds["end"] = round(time.perf_counter() - clock, 3)
        if stopped_at is not None:
            self.log.error("ptgrader: %s/%s: %s", report.student, report.assignment, report.stopped)
            for index, cell in _graded_test_cells(nb):
                if index > stopped_at:
                    cell.outputs = [_error_output("GradingStopped", f"not run: {report.stopped}")]
        return started

    def _cells(self, report: GradingReport) -> None:
        self._stopped_at = None
        info_msg = self.wait_for_reply(self.kc.kernel_info())
        if info_msg is not None:  # the kernel answered once already (start-up); a late second answer is no error
            self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
        setup = setup_index(self.nb)
        held = False  # the hold is taken once, after the set-up cell and before any student code
        for index, cell in enumerate(self.nb.cells):
            if index < setup and index in self._student_cell_indexes:
                # Code that ran before the set-up would run before the checks record what they trust.
                cell.outputs = [_error_output("NotRun", "student code above the set-up cell is not run")]
                continue
            try:
                if not held and (index > setup or index in self._originals):
                    self._take_hold(report)
                    held = True
                # No history: code that runs during a test cell cannot read the cell's source.
                self.execute_cell(cell, index, store_history=False)
                if index in self._originals and not any(out.output_type == "error" for out in cell.outputs):
                    self._complete(cell, index)
            except CellTimeoutError:
                report.stopped = f"{_cell_label(cell, index)} ran longer than {self.timeout} s; the kernel was stopped"
            except DeadKernelError:
                report.stopped = f"the kernel died while running {_cell_label(cell, index)}"
            if report.stopped:
                cell.outputs.append(_error_output("GradingStopped", report.stopped))
                self._stopped_at = index
                break

    def _take_hold(self, report: GradingReport) -> None:
        """After the set-up cell, before any student code: hold the checks (contract.hold_source).

        If that fails (a set-up cell that did not import the checks), every test cell fails on its own:
        it runs through the hold.
        """
        hold = contract.hold_source(self._test_sources)
        msg_id = self.kc.execute(hold, silent=True, store_history=False, allow_stdin=False)
        reply = self.wait_for_reply(msg_id)
        if reply is None or reply["content"].get("status") != "ok":
            why = (reply or {}).get("content", {}).get("evalue", "no reply")
            self.log.error("ptgrader: %s/%s: holding the checks failed: %s", report.student, report.assignment, why)

    def _complete(self, cell: NotebookNode, index: int) -> None:
        """The test cell ran without an error: let the held checks print its token (a separate execution)."""
        completion = nbformat.v4.new_code_cell(self._originals[index][2])
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
        km = super().create_kernel_manager()
        assert isinstance(km, IsolatedKernelManager) and self._kernel_setup is not None
        km.prepare(*self._kernel_setup)
        return km

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        """Keep at most max_output_bytes of a cell's output, cutting while it arrives; no active formats."""
        out = super().output(outs, msg, display_id, cell_index)
        if out is None or not outs or outs[-1] is not out:
            return out
        if out.output_type == "display_data" and channel.MIME in out.get("data", {}):
            outs.pop()  # an output sent to the grader: kept here, never in the graded notebook
            self._receive(out.data[channel.MIME], cell_index)
            return None
        if make_safe(out):
            self._report.unsafe_outputs += 1
        if out.output_type == "stream" and cell_index in self._expected_tokens:
            seen = self._stream_tail.get(cell_index, "") + out.text
            if self._expected_tokens[cell_index] in seen:
                self._seen_tokens.add(cell_index)
            self._stream_tail[cell_index] = seen[-200:]
        size = len(json.dumps(out, default=str))
        used = self._cell_bytes.get(cell_index, 0)
        limit = self.max_output_bytes
        if used >= limit:
            outs.pop()
            return None
        self._cell_bytes[cell_index] = used + size
        if used + size > limit:
            if out.output_type == "stream":
                out.text = out.text[: max(0, limit - used)] + TRUNCATED.format(limit=limit)
            else:
                outs.pop()
                outs.append(nbformat.v4.new_output("stream", name="stdout", text=TRUNCATED.format(limit=limit)))
            if cell_index not in self._truncated:
                self._truncated.append(cell_index)
        return out

    # --------------------------------------------------------------------- outputs sent out (channel)

    def _receive(self, payload: object, cell_index: int) -> None:
        """Keep one output the kernel sent out (decoded as safetensors or JSON: nothing runs), within bounds."""
        emitted = self._emitted.setdefault(cell_index, {})
        self._emitted_bytes += channel.size(payload)
        if self._emitted_bytes > channel.MAX_BYTES or sum(map(len, self._emitted.values())) >= channel.MAX_OUTPUTS:
            emitted["(too many outputs)"] = None
            return
        try:
            name, value = channel.decode(payload)
        except (ValueError, TypeError, KeyError) as problem:
            emitted[f"(malformed output: {problem})"] = None
            return
        emitted[name] = value

    def _reference_outputs(
        self, coursedir: CourseDirectory, info: dict[str, str], isolation: Isolation | None
    ) -> dict[str, dict[str, Any]]:
        """grade_id -> the outputs the source notebook's test cell sends ({} for a lab that sends none).

        The source notebook (the reference solution) runs once per grading process, jailed like a
        submission, in a kernel of its own.
        """
        path = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"])) / (
            info["notebook"] + ".ipynb"
        )
        if not path.is_file():
            return {}
        source = nbformat.read(path, as_version=4)
        tests = _graded_test_cells(source)
        if not any("emit(" in cell.source for _, cell in tests):
            return {}
        key = (str(path), path.stat().st_mtime_ns)
        if key not in self._references:
            self.log.info("ptgrader: running the source notebook %s once for its reference outputs", path)
            runner = _ReferenceRun(source, timeout=self.timeout)
            temp = GraderTemp.current()
            folder = temp.kernel_folder()
            spec = None
            try:
                spec = isolation.spec(folder, dict(os.environ)) if isolation else None
                emitted = runner.run(folder, spec, self._warm_server(temp, isolation))
            finally:
                if spec is not None and spec.cgroups:
                    cgroups.remove(spec.cgroups)
                shutil.rmtree(folder, ignore_errors=True)
            self._references[key] = {
                cell.metadata.nbgrader["grade_id"]: emitted[index] for index, cell in tests if emitted.get(index)
            }
        return self._references[key]

    def _compare_outputs(self, nb: NotebookNode, reference: dict[str, dict[str, Any]], report: GradingReport) -> None:
        """A test cell with reference outputs earns its points only if the ones it sent match them."""
        for index, cell in _graded_test_cells(nb):
            grade_id = cell.metadata.nbgrader["grade_id"]
            if grade_id not in reference or any(o.get("ename") == "GradingWithheld" for o in cell.outputs):
                continue
            problems = channel.differences(self._emitted.get(index, {}), reference[grade_id])
            if problems:
                report.outputs_differ.append(grade_id)
                cell.outputs.append(_error_output(
                    "OutputsDiffer", "compared by the grader with the reference solution's: " + "; ".join(problems[:5])
                ))

    # ----------------------------------------------------------------------------------- results

    def _withhold(self, nb: NotebookNode, report: GradingReport, reason: str) -> None:
        report.withheld = reason
        self.log.error("ptgrader: %s/%s: grades withheld: %s", report.student, report.assignment, reason)
        for _, cell in _graded_test_cells(nb):
            cell.outputs = [_error_output("GradingWithheld", reason + " (an instructor reviews it)")]

    def _finish(self, report: GradingReport, coursedir: CourseDirectory) -> None:
        folder = Path(coursedir.format_path(coursedir.autograded_directory, report.student, report.assignment))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / REPORT_NAME).write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
        level = self.log.warning if report.needs_review else self.log.info
        level(
            "ptgrader: %s/%s: %s",
            report.student,
            report.assignment,
            "needs review, see " + str(folder / REPORT_NAME) if report.needs_review else "graded normally",
        )


class _ReferenceRun(NotebookClient):
    """Runs the source notebook (the reference solution) in a jailed kernel and keeps the outputs it sends out."""

    def __init__(self, nb: NotebookNode, *, timeout: int | None) -> None:
        # A reference run that lost a message would ask less of every student: it fails instead.
        super().__init__(nb, kernel_name="python3", timeout=timeout, shutdown_kernel="immediate", allow_errors=False,
                         kernel_manager_class=IsolatedKernelManager, iopub_timeout=IOPUB_TIMEOUT_S,
                         raise_on_iopub_timeout=True)
        self.emitted: dict[int, dict[str, Any]] = {}
        self._setup: tuple[Path, jail.JailSpec | None, WarmKernels | None] | None = None

    def run(self, folder: Path, spec: jail.JailSpec | None, warm: WarmKernels | None) -> dict[int, dict[str, Any]]:
        self._setup = (folder, spec, warm)
        km: Any = None
        try:
            with self.setup_kernel():
                km = self.km
                for index, cell in enumerate(self.nb.cells):
                    self.execute_cell(cell, index, store_history=False)
        finally:
            if isinstance(km, IsolatedKernelManager):
                km.ensure_dead()
        return self.emitted

    def create_kernel_manager(self) -> Any:
        km = super().create_kernel_manager()
        assert isinstance(km, IsolatedKernelManager) and self._setup is not None
        km.prepare(*self._setup)
        return km

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        out = super().output(outs, msg, display_id, cell_index)
        if out is not None and outs and outs[-1] is out and channel.MIME in out.get("data", {}):
            outs.pop()
            name, value = channel.decode(out.data[channel.MIME])
            self.emitted.setdefault(cell_index, {})[name] = value
            return None
        return out
