"""``GuardedExecute``: nbgrader's Execute step, made safe to run on a class's submissions.

``labs/nbgrader_config.py`` puts it in place of nbgrader's ``Execute`` in
``Autograde.autograde_preprocessors``, so the plain ``nbgrader autograde`` command uses it. For
each submitted notebook it:

1. reads every cell a student could have written (any code cell that is not, byte for byte, a
   locked cell of the source) against the code policy (:mod:`ptlabs.autograde.policy`); a
   submission that breaks it is not run: every graded cell gets a ``GradingWithheld`` error;
2. wraps each graded test cell in ``ptlabs.grading.begin`` / ``complete`` with a one-time token
   and the number of checks the reference solution passes there (counted in the source
   notebook's outputs); a cell earns points only if its token was printed;
3. runs the notebook in a kernel of its own (:mod:`ptlabs.autograde.sandbox`), forked from a
   server that imported torch once (:mod:`ptlabs.autograde.warm`), with a time limit per cell;
   a cell that times out or a kernel that dies stops the run: the graded cells not run get an
   error that says why, the cells before keep their grades, and nbgrader goes on with the
   next student (nbgrader's own Execute raises and the whole command exits 1);
4. keeps at most ``max_output_bytes`` of output per cell while it arrives;
5. after the kernel stopped, kills what it left behind, puts back any file of the course it
   changed and, if it changed one, withholds the submission's grades.

What happened is logged and written to ``ptlabs-grading.json`` beside the graded notebook;
``python -m ptlabs.autograde.report`` lists the submissions that need an instructor's eyes.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.client import NotebookClient
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, OverwriteCells
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool, Integer, List, Unicode

import ptlabs
from ptlabs.grading import COMPLETION_FORMAT

from .policy import scan_cell, setup_module_names
from .sandbox import CourseRecord, KernelPlace, become_subreaper, current_children, reap
from .warm import WarmKernelManager, WarmKernels, supported

REPORT_NAME = "ptlabs-grading.json"
TRUNCATED = "\n... output cut by the grader (more than {limit} bytes in this cell) ...\n"


@dataclass
class GradingReport:
    """What the guarded run found for one submitted notebook."""

    student: str
    assignment: str
    notebook: str
    withheld: str = ""  # why no cell earns points (policy, changed files), or ""
    stopped: str = ""  # why the run stopped early (timeout, dead kernel), or ""
    incomplete: list[str] = field(default_factory=list)  # test cells whose last line did not run cleanly
    tampered: list[str] = field(default_factory=list)  # test cells whose canaries found the grader changed
    findings: list[str] = field(default_factory=list)
    restored_files: list[str] = field(default_factory=list)
    killed_processes: int = 0
    truncated_cells: list[int] = field(default_factory=list)

    @property
    def needs_review(self) -> bool:
        return bool(self.withheld or self.stopped or self.tampered or self.killed_processes or self.restored_files)


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


class GuardedExecute(Execute):
    """nbgrader's Execute with a code policy, completion tokens, a private kernel and a reaper."""

    enforce_code_policy = Bool(
        True, help="Withhold the grades of a submission whose own cells break the code policy."
    ).tag(config=True)
    max_output_bytes = Integer(20_000, help="Output kept per cell; the rest is cut while it arrives.").tag(config=True)
    preload = List(
        Unicode(),
        ["torch", "torch._dynamo", "ptlabs"],
        help="Modules a warm server imports once and every grading kernel is forked with (Linux);"
        " an empty list starts each kernel cold. Never ptlabs.grading: its tamper record is taken in the kernel.",
    ).tag(config=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_manager_class", WarmKernelManager)
        super().__init__(*args, **kwargs)
        self._warm: WarmKernels | None = None
        self.interrupt_on_timeout = False  # an interrupt cannot stop a loop that ignores SIGINT: stop the kernel
        self.shutdown_kernel = "immediate"
        become_subreaper()

    # ---------------------------------------------------------------------------------- preprocess

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any], km: Any = None) -> tuple[NotebookNode, dict]:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=self.config)
        report = GradingReport(info["student"], info["assignment"], info["notebook"])
        trusted = self._trusted_sources(info)
        self._student_cell_indexes = set(self._student_cells(nb, trusted))
        modules = setup_module_names(list(trusted.values()))
        findings = [
            finding
            for index in sorted(self._student_cell_indexes)
            for finding in scan_cell(nb.cells[index].source, index, modules)
        ]
        report.findings = [str(finding) for finding in findings]
        if findings and self.enforce_code_policy:
            self._withhold(nb, report, "the submission breaks the lab's code policy: " + "; ".join(report.findings))
            self._finish(report, coursedir)
            return nb, resources

        originals = self._wrap_test_cells(nb, self._expected_checks(coursedir, info))
        self._expected_tokens = {index: token_line for index, (_, token_line) in originals.items()}
        self._seen_tokens: set[int] = set()
        # The course, and ptlabs itself: an edited checker would run in every later student's kernel.
        record = CourseRecord.take(Path(coursedir.root), Path(ptlabs.__file__).parent)
        place = KernelPlace.make(dict(os.environ))
        self._warm = self._warm_server()
        children = current_children()  # the warm server, started before, is not a leftover
        try:
            self._run(nb, resources, place, report)
        finally:
            left_behind = self._warm.reap() if self._warm else 0
            report.killed_processes = left_behind + len(reap(place.marker, children))
            report.restored_files = record.changes()
            record.restore(report.restored_files)
            place.remove()
        self._check_tokens(nb, originals, report)
        if report.restored_files:
            self._withhold(
                nb, report, "the submission changed files of the course: " + ", ".join(report.restored_files[:10])
            )
        self._finish(report, coursedir)
        return nb, resources

    def _warm_server(self) -> WarmKernels | None:
        """The warm server to fork kernels from, or None (kernels start cold) where it cannot run."""
        if not self.preload or not supported():
            return None
        try:
            return WarmKernels.shared(self.preload)
        except (OSError, RuntimeError) as problem:  # grading goes on, only slower
            self.log.warning("ptlabs: no warm kernel server (%s); kernels start from scratch", problem)
            return None

    # ------------------------------------------------------------------------------ code policy

    def _trusted_sources(self, info: dict[str, str]) -> dict[str, str]:
        """grade_id -> source of every locked cell of the source notebook, as the gradebook holds it."""
        with Gradebook(info["db_url"]) as gradebook:
            try:
                notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            except MissingEntry:
                return {}
            return {cell.name: cell.source for cell in notebook.source_cells if cell.locked}

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
            self.log.warning("ptlabs: no source notebook %s; test cells are not held to a count of checks", path)
            return {}
        source = nbformat.read(path, as_version=4)
        return {cell.metadata.nbgrader["grade_id"]: _count_checks(cell) for _, cell in _graded_test_cells(source)}

    def _wrap_test_cells(self, nb: NotebookNode, expected: dict[str, int]) -> dict[int, tuple[str, str]]:
        """Add begin/complete lines to each graded test cell; return index -> (original source, token)."""
        originals = {}
        for index, cell in _graded_test_cells(nb):
            grade_id = cell.metadata.nbgrader["grade_id"]
            token = secrets.token_hex(12)
            count = expected.get(grade_id, -1)
            originals[index] = (cell.source, COMPLETION_FORMAT.format(test_id=grade_id, token=token))
            cell.source = (
                f"import ptlabs.grading; ptlabs.grading.begin({grade_id!r})\n"
                f"{cell.source}\n"
                f"import ptlabs.grading; ptlabs.grading.complete({grade_id!r}, {token!r}, {count})"
            )
        return originals

    def _check_tokens(self, nb: NotebookNode, originals: dict[int, tuple[str, str]], report: GradingReport) -> None:
        """Restore each test cell's source; a cell that ran without its token printed earns nothing."""
        for index, (source, token_line) in originals.items():
            cell = nb.cells[index]
            cell.source = source
            printed = index in self._seen_tokens  # seen while the output arrived, before any cut
            for output in cell.outputs:
                if output.output_type == "stream":
                    output.text = output.text.replace(token_line + "\n", "").replace(token_line, "")
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

    def _run(self, nb: NotebookNode, resources: dict[str, Any], place: KernelPlace, report: GradingReport) -> None:
        """Execute every cell in a private kernel; stop at a timeout or a dead kernel."""
        NotebookClient.__init__(self, nb, None)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._cell_bytes: dict[int, int] = {}
        self._stream_tail: dict[int, str] = {}
        self._truncated = report.truncated_cells
        stopped_at = None
        self._socket_prefix = place.sockets
        with self.setup_kernel(cwd=str(place.folder), env=place.env):
            info_msg = self.wait_for_reply(self.kc.kernel_info())
            if info_msg is not None:  # the kernel answered once already (start-up); a late second answer is no error
                self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
            setup = setup_index(self.nb)
            for index, cell in enumerate(self.nb.cells):
                if index < setup and index in self._student_cell_indexes:
                    # Code that ran before the set-up would run before the checks record what they trust.
                    cell.outputs = [_error_output("NotRun", "student code above the set-up cell is not run")]
                    continue
                try:
                    # No history: code that runs during a test cell cannot read the cell's source (its token).
                    self.execute_cell(cell, index, store_history=False)
                except CellTimeoutError:
                    report.stopped = f"{_cell_label(cell, index)} ran longer than {self.timeout} s; the kernel was stopped"
                except DeadKernelError:
                    report.stopped = f"the kernel died while running {_cell_label(cell, index)}"
                if report.stopped:
                    cell.outputs.append(_error_output("GradingStopped", report.stopped))
                    stopped_at = index
                    break
        if stopped_at is not None:
            self.log.error("ptlabs: %s/%s: %s", report.student, report.assignment, report.stopped)
            for index, cell in _graded_test_cells(nb):
                if index > stopped_at:
                    cell.outputs = [_error_output("GradingStopped", f"not run: {report.stopped}")]

    def create_kernel_manager(self) -> Any:
        """nbclient's kernel manager, talking to the kernel over Unix sockets in the kernel's private place.

        Over TCP, jupyter_client picks free ports by binding and releasing them before the kernel binds
        them; graders running side by side (the tests run four) can pick the same port, and that
        kernel dies at start-up, which nbgrader reports as an error for the whole submission. Socket
        files named after a private folder cannot collide, and nothing listens on the network.
        """
        km = super().create_kernel_manager()
        km.transport = "ipc"
        km.ip = str(self._socket_prefix)
        if isinstance(km, WarmKernelManager):
            km.warm = self._warm
        return km

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        """Keep at most max_output_bytes of a cell's output, cutting while it arrives."""
        out = super().output(outs, msg, display_id, cell_index)
        if out is None or not outs or outs[-1] is not out:
            return out
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

    # ----------------------------------------------------------------------------------- results

    def _withhold(self, nb: NotebookNode, report: GradingReport, reason: str) -> None:
        report.withheld = reason
        self.log.error("ptlabs: %s/%s: grades withheld: %s", report.student, report.assignment, reason)
        for _, cell in _graded_test_cells(nb):
            cell.outputs = [_error_output("GradingWithheld", reason + " (an instructor reviews it)")]

    def _finish(self, report: GradingReport, coursedir: CourseDirectory) -> None:
        folder = Path(coursedir.format_path(coursedir.autograded_directory, report.student, report.assignment))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / REPORT_NAME).write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
        level = self.log.warning if report.needs_review else self.log.info
        level(
            "ptlabs: %s/%s: %s",
            report.student,
            report.assignment,
            "needs review, see " + str(folder / REPORT_NAME) if report.needs_review else "graded normally",
        )
