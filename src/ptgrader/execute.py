"""``GuardedExecute``: nbgrader's Execute step, made safe to run on a class's submissions.

``labs/nbgrader_config.py`` puts it in place of nbgrader's ``Execute`` in
``Autograde.autograde_preprocessors``, so the plain ``nbgrader autograde`` command uses it. This
module is the order of the steps; each step lives in a module named for it:

1. **policy** (:mod:`ptgrader.policy`): every cell a student could have written (any code cell
   that is not, byte for byte, a locked cell of the source) is read against the code policy; a
   submission that breaks it is not run, and every test cell gets a ``GradingWithheld`` verdict;
2. **run** (:mod:`ptgrader.kernel_run`): the notebook runs in a jailed kernel
   (:mod:`ptgrader.jail`), forked from a warm server (:mod:`ptgrader.warm`); the checks are held
   right after the set-up cell, and each test cell that ran cleanly lets them print a one-time
   token (:mod:`ptgrader.contract`); a cell past its time, a submission past its time or a kernel
   that dies stops the run;
3. **receive** (:mod:`ptgrader.receive`): outputs are kept within a cell's and a submission's
   budget, as text and raster images only; outputs sent to the grader (:mod:`ptgrader.channel`)
   leave the stream;
4. **compare** (:mod:`ptgrader.compare`): those outputs are held against the reference solution's,
   outside the kernel; a part's rule about how its code is written ("no Python loop") is read from
   the student's source (:mod:`ptgrader.source_rules`);
5. **score** (:mod:`ptgrader.score`): each test cell's score is the grader's verdict alone; the
   kernel's own errors, stderr and ``execute_result`` stay as feedback nbgrader does not score;
6. **report** (:mod:`ptgrader.report`): after the kernel and everything it started are killed and
   the course record is checked (:mod:`ptgrader.course`; a changed file is put back and the
   grades withheld), what happened is written to ``ptgrader-report.json`` beside the graded
   notebook; ``python -m ptgrader.report LAB`` lists the submissions that need an instructor's eyes.

Each clean-up step runs even when the one before it failed.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, OverwriteCells
from traitlets import Bool, Integer, List, Unicode

from . import contract, jail, report as reports, score
from .cells import graded_test_cells, grade_id, number_cells, setup_index
from .compare import IOPUB_TIMEOUT_S, compare, deciding_outputs, reference_outputs, worded
from .course import CourseRecord
from .kernel_client import RECEIVED_BYTES_BUDGET
from .kernel_run import KernelRun
from .kernels import TREE_MEMORY, GraderTemp, IsolatedKernelManager, Isolation, accelerator_devices, default_limits
from .outputs import make_notebook_safe
from .policy import LabNames, scan_cell, setup_module_names
from .reading_budget import ReadingTooDeep, ReadingTooLong, cpu_budget
from .receive import OutputReceiver
from .report import REPORT_NAME, GradingReport
from .score import Failure
from .source_rules import call_rules, forbidden_calls, forbidden_values, loop_rules, module_aliases, python_loops
from .warm import WarmKernels

__all__ = ["REPORT_NAME", "GuardedExecute", "IsolationUnavailable", "setup_index"]


def _count_checks(cell: NotebookNode) -> int:
    """The ✅ lines in a cell's outputs: how many checks the reference solution passes there."""
    text = "".join(output.get("text", "") for output in cell.get("outputs", []) if output.output_type == "stream")
    return sum(line.startswith("✅") for line in text.splitlines())


class IsolationUnavailable(RuntimeError):
    """This machine cannot jail kernels, and the configuration asks for it."""


#: How many of the code policy's findings a report keeps, and the characters kept of each: one is enough
#: to withhold the grades, a reviewer reads a few, and each is copied into every test cell, the report and
#: the listing (a cell importing os 100,000 times once wrote a 118 MB graded notebook).
KEPT_FINDINGS, FINDING_CHARS = 20, 300


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: name -> value pairs, hashable (the cache's keys and values)
Pairs = tuple[tuple[str, str], ...]


@lru_cache(maxsize=16)
def _locked_names(trusted: Pairs, test_ids: frozenset[str]) -> tuple[Pairs, LabNames]:
    """What a lab's locked cells bind: (setup name -> module, as pairs; the names they guard).

    Cached because it depends only on the course's own locked cells, the same for every student of a
    lab, and parsing them again took about 75 ms per student of the grader's CPU.
    """
    modules = setup_module_names([source for _, source in trusted])
    return tuple(modules.items()), LabNames.of(dict(trusted), set(test_ids))


#: Why a part with a source rule fails when the code policy, turned off, found something (see _check_source_rules).
UNREADABLE_FOR_RULES = ("a rule about how the answer is written holds only for code the grader can read, and the code"
                        " policy (off in this course) found code it cannot follow: ")
#: Cells up to this many characters have their findings remembered (:func:`_cell_findings`); longer ones, rare in an
#: honest notebook, are read each time, so no submission can fill the grader's memory with what it remembers.
REMEMBERED_CELL_CHARS = 20_000


def _read_findings(source: str, index: int, modules: Pairs, lab: LabNames) -> tuple[str, ...]:
    return tuple(str(finding) for finding in scan_cell(source, index, dict(modules), lab=lab))


_remembered_findings = lru_cache(maxsize=4096)(_read_findings)


def _cell_findings(source: str, index: int, modules: Pairs, lab: LabNames) -> tuple[str, ...]:
    """The code policy's findings in one student cell, as text.

    Remembered for the cells of up to REMEMBERED_CELL_CHARS characters: most cells of a class are the same
    at the same place (the lab's own cells, and answers that many students share), the findings depend on
    nothing else, and reading a cell again cost about 3 ms of the grader's CPU, 0.08 s a student.
    """
    read = _read_findings if len(source) > REMEMBERED_CELL_CHARS else _remembered_findings
    return read(source, index, modules, lab)


class GuardedExecute(KernelRun, OutputReceiver, Execute):
    """nbgrader's Execute with a code policy, completion tokens, a jailed kernel and the grader's own verdicts."""

    enforce_code_policy = Bool(
        True, help="Withhold the grades of a submission whose own cells break the code policy."
    ).tag(config=True)
    max_output_bytes = Integer(20_000, help="Output kept per cell; the rest is cut while it arrives.").tag(config=True)
    max_submission_output_bytes = Integer(
        1_000_000, help="Output kept per submission, display updates included (each output an update rewrites counts)"
    ).tag(config=True)
    submission_timeout = Integer(
        120, help="Seconds all of a submission's cells may run together; past it the kernel is stopped."
    ).tag(config=True)
    received_bytes_budget = Integer(
        RECEIVED_BYTES_BUDGET,
        help="Bytes of messages a kernel may send in all, counted before the grader decodes them; past them the"
        " kernel is stopped at once.",
    ).tag(config=True)
    reading_budget = Integer(
        20,
        help="CPU seconds the grader may spend reading a submission's code (the code policy before the run, the"
        " source rules after it); past them its grades are withheld for review and grading goes on.",
    ).tag(config=True)
    preload = List(
        Unicode(),
        [
            "torch", "torch._dynamo", "torch._functorch.aot_autograd", "torch._inductor.compile_fx", "networkx",
            "torch.onnx", "onnx", "onnxscript", "onnxscript.function_libs.torch_lib.ops", "ptlabs",
            "matplotlib.font_manager", "ipykernel.kernelapp", "ipykernel.debugger",
            # what an ipykernel imports as it starts and runs its first cells (20 ms of each kernel's CPU)
            "IPython.core.completerlib", "IPython.core.debugger", "IPython.core.oinspect", "IPython.core.logger",
            "IPython.extensions.storemagic", "IPython.utils.wildcard", "sqlite3", "pdb", "psutil",
            "tornado.platform.asyncio", "pygments.formatters.terminal256", "pygments.styles",
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
        failures: dict[int, list[Failure]] = defaultdict(list)
        compared: set[int] = set()  # test cells whose outputs the grader compared and found right
        try:
            with cpu_budget(self.reading_budget):
                report.findings = self._policy_findings(nb, trusted, test_ids)
            if report.findings and self.enforce_code_policy:
                report.withheld = "the submission breaks the lab's code policy: " + "; ".join(report.findings)
            else:
                compared = self._grade_run(nb, resources, report, isolation, coursedir, info, failures)
                with cpu_budget(self.reading_budget):
                    self._check_source_rules(nb, trusted, test_ids, report, failures)
        except ReadingTooLong:
            report.withheld = (f"reading the submission's code took over {self.reading_budget} s of the grader's CPU"
                               " (cells far longer or more tangled than a solution needs)")
        except ReadingTooDeep:
            report.withheld = ("the submission's code nests deeper than the grader can read (past Python's recursion"
                               " limit: cells far more tangled than a solution needs)")
        if report.withheld:
            self.log.error("ptgrader: %s/%s: grades withheld: %s", report.student, report.assignment, report.withheld)
            why = Failure(score.WITHHELD, report.withheld + " (an instructor reviews it)")
            failures = {index: [why] for index, _ in graded_test_cells(nb)}
        number_cells(nb)
        report.scores = score.write_verdicts(nb, failures, test_ids, compared)
        self._finish(report, coursedir)
        return nb, resources

    def _grade_run(self, nb: NotebookNode, resources: dict[str, Any], report: GradingReport,
                   isolation: Isolation | None, coursedir: CourseDirectory, info: dict[str, str],
                   failures: dict[int, list[Failure]]) -> set[int]:
        """Run the submission and record, per test cell, why it does not earn all its points.

        Return the test cells whose outputs the grader compared and found all right.
        """
        source = self._source_path(coursedir, info)
        reference = {}
        if self.compare_outputs:
            reference = reference_outputs(source, isolation, self.warm_server(GraderTemp.current(), isolation),
                                          timeout=self.timeout, log=self.log)
        originals = self._wrap_test_cells(nb, self._expected_checks(source))
        self.start_receiving(report, {index: token_line for index, (_, token_line) in originals.items()},
                             deciding_outputs(nb, reference))
        # The course (the packages kernels import are read-only in the jail, and may be edited meanwhile)
        record = CourseRecord.take(Path(coursedir.root), shared=not self.watch_graded)
        stopped_at = None
        try:
            stopped_at = self.run_submission(nb, resources, report, isolation)
        finally:  # each step runs even if the one before failed: the course is checked whatever happened
            self._check_course(record, report)
        self._check_tokens(nb, originals, report)
        for index, cell in graded_test_cells(nb):
            if stopped_at is not None and index >= stopped_at:
                reason = report.stopped if index == stopped_at else f"not run: {report.stopped}"
                failures[index].append(Failure(score.STOPPED, reason))
            if grade_id(cell) in report.incomplete:
                failures[index].append(Failure(score.INCOMPLETE, "the test cell's last line did not run cleanly"))
        compared = set()
        for index, found in compare(nb, self.emitted, reference).items():
            name = grade_id(nb.cells[index])
            if found.outputs:
                report.outputs_differ.append(name)
                stopped = index in self.stopped_cells
                if stopped:
                    report.stopped_at_a_difference.append(name)
                failures[index].append(Failure(score.DIFFER, "compared by the grader with the reference solution's: "
                                               + worded(found.outputs, stopped=stopped)))
            elif found.compared:
                compared.add(index)
            if found.checks:
                report.checks_differ.append(name)
                failures[index].append(Failure(
                    score.CHECKS_DIFFER, "what the checks saw in the kernel is not what they saw in the reference "
                    "solution's run: " + "; ".join(found.checks[:5])))
        report.unsafe_outputs += make_notebook_safe(nb)
        if report.restored_files:
            report.withheld = "the course changed while this submission ran: " + ", ".join(report.restored_files[:10])
        return compared

    def _check_course(self, record: CourseRecord, report: GradingReport) -> None:
        """Put back any course file that changed while the kernel ran; what could not be checked is reported."""
        try:
            report.restored_files = record.changes()
            lost = record.restore(report.restored_files)
            if lost:
                self.log.error("ptgrader: %s/%s: changed and not restorable: %s", report.student,
                               report.assignment, ", ".join(lost[:10]))
        except Exception as problem:  # noqa: BLE001  (reported, never lost)
            report.restored_files.append(f"(the course record could not be checked: {problem})")

    # ------------------------------------------------------------------------------ code policy

    def _policy_findings(self, nb: NotebookNode, trusted: dict[str, str], test_ids: set[str]) -> list[str]:
        """What the code policy finds in the cells a student could have written (and remember those cells)."""
        self.student_cells = set(self._student_cells(nb, trusted))
        modules, lab = _locked_names(tuple(trusted.items()), frozenset(test_ids))
        found = (
            finding
            for index in sorted(self.student_cells)
            for finding in _cell_findings(nb.cells[index].source, index, modules, lab)
        )
        kept = [_shortened(finding, FINDING_CHARS) for finding in itertools.islice(found, KEPT_FINDINGS + 1)]
        if len(kept) > KEPT_FINDINGS:  # one is enough to withhold the grades; the reviewer needs a few
            kept[KEPT_FINDINGS:] = [f"more findings after these {KEPT_FINDINGS} (not listed)"]
        return kept

    def _check_source_rules(self, nb: NotebookNode, trusted: dict[str, str], test_ids: set[str],
                            report: GradingReport, failures: dict[int, list[Failure]]) -> None:
        """A part whose test cell asks for no Python loop, or forbids a call, fails when the student's code
        has one (read, not run).

        The reading holds only for code the grader can read, which is what the code policy vouches for. With the
        policy off, a submission it would refuse may run code the reading never sees (round 92: a loop in a string
        given to ``exec``, torch imported as ``__import__("to" + "rch")``), anywhere, even a second definition of
        the function in another cell: so then every part with such a rule fails, citing the policy's findings.
        """
        cells = {index: nb.cells[index].source for index in self.student_cells}
        pairs, names = _locked_names(tuple(trusted.items()), frozenset(test_ids))
        modules = dict(pairs)
        values = names.locked - modules.keys()  # what the lab's cells bind that is no module (dicts, tensors)
        for index, cell in graded_test_cells(nb):
            trusted_source = trusted.get(grade_id(cell), "")
            loops, calls = loop_rules(trusted_source), call_rules(trusted_source)
            broken = [(f"{function} must have no Python loop, and has ",
                       python_loops(cells, function, values, modules)) for function in loops]
            broken += [(f"{function} must not call {callee}, and names it: ",
                        forbidden_calls(cells, function, callee, module_aliases(modules, callee), values, modules)
                        + forbidden_values(cells, function, callee, modules, values))
                       for callee, function in calls]
            if report.findings and (loops or calls):
                broken.append((UNREADABLE_FOR_RULES, report.findings))
            for message, found in broken:
                if found:
                    report.rules_broken.append(f"{grade_id(cell)}: {found[0]}")
                    failures[index].append(Failure(score.RULE_BROKEN, message + "; ".join(found[:3])))

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
            name = grade_id(cell)
            # A test cell nbgrader put back starts with a comment saying so.
            put_back = "# " + notification.format(cell_id=name) + trusted.get(name, "")
            if name not in trusted or cell.source not in (trusted[name], put_back):
                found.append(index)
        return found

    # ------------------------------------------------------------------------ completion tokens

    def _source_path(self, coursedir: CourseDirectory, info: dict[str, str]) -> Path:
        """The lab's source notebook (the reference solution) of the notebook being graded."""
        folder = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"]))
        return folder / (info["notebook"] + ".ipynb")

    def _expected_checks(self, source: Path) -> dict[str, int]:
        """grade_id -> ✅ lines of each test cell in the source notebook's saved outputs."""
        if not source.is_file():
            self.log.warning("ptgrader: no source notebook %s; test cells are not held to a count of checks", source)
            return {}
        nb = nbformat.read(source, as_version=4)
        return {grade_id(cell): _count_checks(cell) for _, cell in graded_test_cells(nb)}

    def _wrap_test_cells(self, nb: NotebookNode, expected: dict[str, int]) -> dict[int, tuple[str, str]]:
        """Run each graded test cell through the hold; return index -> (original source, token line)."""
        originals = {}
        self.test_sources = {}
        self.test_runs = {}
        for index, cell in graded_test_cells(nb):
            name = grade_id(cell)
            token = secrets.token_hex(12)
            originals[index] = (cell.source, contract.COMPLETION_FORMAT.format(test_id=name, token=token))
            self.test_runs[index] = (name, contract.complete_line(name, token, expected.get(name, -1)))
            self.test_sources[name] = cell.source
            cell.source = contract.run_line(name)
        return originals

    def _check_tokens(self, nb: NotebookNode, originals: dict[int, tuple[str, str]], report: GradingReport) -> None:
        """Restore each test cell's source and hide its token; record the cells whose token was not printed."""
        for index, (source, token_line) in originals.items():
            cell = nb.cells[index]
            cell.source = source
            token = token_line.rsplit(" ", 1)[1]
            for output in cell.outputs:
                if output.output_type == "stream":
                    output.text = output.text.replace(token_line + "\n", "").replace(token_line, "")
                elif output.output_type == "error":  # a traceback through the completion call shows the token
                    output.traceback = [line.replace(token, "<token>") for line in output.get("traceback", [])]
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and not o.text)]
            if any(output.get("ename") == "GraderTampered" for output in cell.outputs):
                report.tampered.append(grade_id(cell))
            if index not in self.seen_tokens:  # seen while the output arrived, before any cut
                report.incomplete.append(grade_id(cell))

    # ----------------------------------------------------------------------------------- results

    def _finish(self, report: GradingReport, coursedir: CourseDirectory) -> None:
        folder = Path(coursedir.format_path(coursedir.autograded_directory, report.student, report.assignment))
        path = reports.write(report, folder)
        level = self.log.warning if report.needs_review else self.log.info
        level("ptgrader: %s/%s: %s", report.student, report.assignment,
              "needs review, see " + str(path) if report.needs_review else "graded normally")
