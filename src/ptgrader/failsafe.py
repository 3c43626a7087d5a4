"""One submission never ends a grading run: whatever goes wrong with it becomes its own report.

nbgrader's converter grades one student after the other; an exception in one of them (a malformed
output message raising ``SafetensorError``, a display nested 3,000 deep raising ``RecursionError``,
"Inconsistent checksums", ...) is logged, that student gets no graded notebook and no grade, and the
whole command exits 1 at the end (a schema error ends it at once). :class:`GuardedExporter` is the
seam nbgrader offers for both of its phases: ``labs/nbgrader_config.py`` makes it the converter's
exporter (``c.Autograde.exporter_class``), so the plain ``nbgrader autograde LAB`` and
``python -m ptgrader.autograde LAB --jobs N`` (which runs that command) both get it. It:

- **refuses unsafe submission folders first.** nbgrader builds its exporter after it has listed the
  submissions and before it opens any file of them; there, every submission folder is checked
  (:mod:`ptgrader.intake`), and one that holds a link, a FIFO, a device or an odd name is taken out
  of the list: nbgrader never opens it, the student gets no marks and a report that says why;
- **grades only its own share of the class** when graders run side by side
  (``ptgrader.autograde --jobs``): ``--GuardedExporter.share`` names a file listing whom this one
  grades. A list of ids in a file, not nbgrader's comma-joined ``student_id_exclude``: a folder
  named ``x,alice`` once made every other job skip ``alice``, who was graded by none;
- **refuses a submission that holds none of the lab's notebooks** (a "Make a copy" name such as
  ``lab01_tensors-Copy1.ipynb``), with the names expected and found, instead of nbgrader's "No
  notebooks found" for the whole run;
- **turns any failure while converting one notebook into that student's report**: the exception
  (any ``Exception``, not a list of known ones) is caught around each of nbgrader's two passes over
  the notebook, the student gets no marks for that notebook, a graded notebook that says "needs
  review" and why, and ``ptgrader-report.json`` with the reason; the run goes on. The same holds
  for nbgrader's other steps of one submission (:class:`StudentSteps`: copying the course's files
  over it, writing the graded notebook, permissions). Only failures of the grading machine itself
  (:data:`RUN_LEVEL`: no jail possible, no gradebook) still end the run;
- **adds to the report what the repairs before the run found** (``resources["ptgrader"]``, e.g. the
  cell flags :class:`~ptgrader.repair.RestoreCellFlags` put back).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import NotebookExporter
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from sqlalchemy.exc import OperationalError
from traitlets import Unicode

from .execute import IsolationUnavailable
from .intake import drop_files_not_of_the_lab, escaped, is_safe_name, problems
from .report import NEEDS_REVIEW, REPORT_NAME

#: Failures of the grading machine, not of a submission: every student would meet them, so the run stops.
RUN_LEVEL: tuple[type[BaseException], ...] = (IsolationUnavailable, OperationalError)
#: The most characters of a reason kept in a report (a message can quote a whole output).
MAX_REASON = 2000

#: (student, assignment, notebook)
Key = tuple[str, str, str]


def describe(problem: BaseException) -> str:
    """An exception as a report states it: its type and message, cut and safe to print."""
    try:
        message = str(problem)
    except Exception:  # noqa: BLE001  (a message that cannot be made is still a failure to report)
        message = "(no message)"
    return escaped(f"{type(problem).__name__}: {message}"[:MAX_REASON])


def _report_path(coursedir: CourseDirectory, student: str, assignment: str) -> Path:
    return Path(coursedir.format_path(coursedir.autograded_directory, student, assignment)) / REPORT_NAME


def add_to_report(coursedir: CourseDirectory, key: Key, fields: dict[str, Any]) -> None:
    """Merge ``fields`` into the submission's ``ptgrader-report.json`` (made if the grading run wrote none)."""
    student, assignment, notebook = key
    path = _report_path(coursedir, student, assignment)
    report: dict[str, Any] = {"student": student, "assignment": assignment, "notebook": notebook}
    try:
        report.update(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass  # none yet (or a half-written one): this one starts it
    report.update(fields)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A new file put in the old one's place: nbgrader may have made the old one read-only already
    # (``set_permissions``), which stops an instructor who is not root from writing it (round 11).
    written = path.with_name(f".{path.name}.new")
    written.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    os.replace(written, path)


def give_no_marks(coursedir: CourseDirectory, student: str, assignment: str, notebook: str | None) -> None:
    """Record 0 for every graded cell of ``notebook`` (None: of every notebook) of the submission.

    What nbgrader itself records for a notebook that was not submitted; the submission is created if
    nbgrader did not get that far, so that the student is in the gradebook's export with 0.
    """
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        gradebook.update_or_create_student(student)
        try:
            submission = gradebook.update_or_create_submission(assignment, student)
        except MissingEntry:  # a lab the gradebook does not know: nbgrader stops on it by itself
            return
        for submitted in submission.notebooks:
            if notebook is None or submitted.notebook.name == notebook:
                for grade in submitted.grades:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
        gradebook.db.commit()


def needs_review_notebook(reason: str) -> NotebookNode:
    """The graded notebook of a submission the grader could not process: why, as text, and nothing of the submission."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"**{NEEDS_REVIEW.capitalize()}.** It earns no marks until an instructor has "
            "looked at it; the reason follows."
        ),
        nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output("stream", name="stdout", text=reason + "\n")]),
    ]
    return nb


def read_share(path: str) -> set[str] | None:
    """The students one of several graders grades (a JSON list in ``path``); None: every student."""
    if not path:
        return None
    share = json.loads(Path(path).read_text(encoding="utf-8"))
    if not (isinstance(share, list) and all(isinstance(student, str) for student in share)):
        raise ValueError(f"{path}: not a JSON list of student ids")
    return set(share)


def lab_notebooks(coursedir: CourseDirectory, assignments: set[str]) -> dict[str, set[str]]:
    """Each lab's notebook names (without ``.ipynb``), as the gradebook knows them; a lab it does not know is left out."""
    names = {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        for assignment in assignments:
            try:
                names[assignment] = {notebook.name for notebook in gradebook.find_assignment(assignment).notebooks}
            except MissingEntry:  # nbgrader stops on it by itself
                continue
    return names


def notebook_problem(expected: set[str], found: list[str]) -> list[str]:
    """Why a submission holding none of its lab's notebooks cannot be graded ([] when it holds one)."""
    stems = {Path(path).stem for path in found}
    if not expected or stems & expected:
        return []
    return [f"none of the lab's notebooks ({', '.join(sorted(name + '.ipynb' for name in expected))});"
            f" found {', '.join(sorted(escaped(Path(path).name) for path in found))}"]


def refuse_unsafe_submissions(converter: Autograde, share: set[str] | None = None) -> None:
    """Take every submission whose folder :func:`ptgrader.intake.problems` refuses out of nbgrader's list.

    Also out: one that holds none of its lab's notebooks (:func:`notebook_problem`), and, when
    ``share`` is given, every student outside it (another grader's, ``ptgrader.autograde --jobs``).
    A refused student with a safe id gets 0 and a report (unless graded earlier and not ``--force``d,
    as nbgrader would skip it); one whose id is not a safe name is only logged, escaped.
    """
    coursedir = converter.coursedir
    excluded = set(filter(None, coursedir.student_id_exclude.split(",")))
    # How nbgrader itself reads the student and the lab from a submission's folder (convert_notebooks).
    pattern = re.compile(coursedir.format_path(coursedir.submitted_directory, "(?P<student>.*)", "(?P<lab>.*)",
                                               escape=True))
    matches = {folder: pattern.fullmatch(folder) for folder in sorted(converter.assignments)}
    expected = lab_notebooks(coursedir, {match["lab"] for match in matches.values() if match is not None})
    for folder, match in matches.items():
        if match is None or match["student"] in excluded:
            continue  # not a folder nbgrader can grade, or one the instructor left out
        student, assignment = match["student"], match["lab"]
        if share is not None and student not in share:
            del converter.assignments[folder]  # another grader's student
            continue
        try:
            reasons = problems(Path(folder)) or notebook_problem(expected.get(assignment, set()),
                                                                 converter.assignments[folder])
        except Exception as error:  # noqa: BLE001  (any failure to check one folder refuses that folder only)
            reasons = [f"the grader could not check this folder ({escaped(type(error).__name__)})"]
        if not reasons:
            continue
        del converter.assignments[folder]
        converter.log.warning("ptgrader: %s/%s: refused before grading: %s", escaped(student), escaped(assignment),
                              "; ".join(reasons))
        if not (is_safe_name(student) and is_safe_name(assignment)):
            continue
        graded = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment))
        if graded.exists():
            if not converter.force:
                converter.log.warning("ptgrader: %s/%s: graded earlier, kept (grade again with --force)", student,
                                      assignment)
                continue
            shutil.rmtree(graded)
        give_no_marks(coursedir, student, assignment, None)
        add_to_report(coursedir, (student, assignment, ""), {"refused": reasons})


class StudentSteps:
    """nbgrader's steps for one submission around the exporter, each failure made that submission's report.

    nbgrader offers a seam for converting a notebook (the exporter), none for the steps around it in
    its loop over the class (``BaseConverter.convert_notebooks``): copying the course's files over the
    submission (``init_assignment``: a folder where the lab has a file raised ``IsADirectoryError``),
    writing the graded notebook, setting permissions. There an exception is logged, the student's
    graded folder removed, and the whole run exits 1 at its end, with no report for that student. So
    the converter's own methods are wrapped on its instance, once, when it builds its exporter:
    ``init_destination`` says whose submission comes next, and a failure in any later step gives that
    submission no marks and a report (``unprocessed``), and skips its remaining steps. Once nbgrader has
    copied a submission's files, only the lab's own stay (:func:`ptgrader.intake.drop_files_not_of_the_lab`),
    and the report lists the others (``files_not_copied``).
    """

    #: The converter's steps for one submission after ``init_destination``, in nbgrader's order.
    STEPS = ("init_assignment", "convert_single_notebook", "set_permissions")

    def __init__(self, converter: Autograde) -> None:
        self.converter = converter
        self.current: tuple[str, str] | None = None  # (student, assignment) of the submission being graded
        self.failed: set[tuple[str, str]] = set()
        self.dropped: dict[tuple[str, str], list[str]] = {}  # files of a submission not copied to autograded/
        converter.init_destination = self._starting(converter.init_destination)
        converter.init_assignment = self._followed_by(converter.init_assignment, self._drop_files_not_of_the_lab)
        converter.set_permissions = self._preceded_by(converter.set_permissions, self._report_dropped_files)
        for name in self.STEPS:
            setattr(converter, name, self._guarded(getattr(converter, name)))

    @staticmethod
    def _followed_by(step: Callable[[str, str], Any], then: Callable[[str, str], None]) -> Callable[[str, str], Any]:
        """``step``, then ``then``, also when ``step`` raised (a copy stopped half-way left files behind)."""
        @functools.wraps(step)
        def followed(assignment_id: str, student_id: str) -> Any:
            try:
                return step(assignment_id, student_id)
            finally:
                then(assignment_id, student_id)

        return followed

    @staticmethod
    def _preceded_by(step: Callable[[str, str], Any], first: Callable[[str, str], None]) -> Callable[[str, str], Any]:
        """``first``, then ``step``: the report is written before nbgrader makes the folder read-only."""
        @functools.wraps(step)
        def preceded(assignment_id: str, student_id: str) -> Any:
            first(assignment_id, student_id)
            return step(assignment_id, student_id)

        return preceded

    def _drop_files_not_of_the_lab(self, assignment_id: str, student_id: str) -> None:
        """After nbgrader copied the submission's files and the lab's over them: only the lab's stay."""
        coursedir = self.converter.coursedir
        graded = Path(coursedir.format_path(coursedir.autograded_directory, student_id, assignment_id))
        source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment_id))
        dropped = drop_files_not_of_the_lab(graded, source, also_kept=(REPORT_NAME,))
        if dropped:
            self.dropped[(student_id, assignment_id)] = dropped
            self.converter.log.warning("ptgrader: %s/%s: %d file(s) of the submission not copied, not the lab's: %s",
                                       escaped(student_id), escaped(assignment_id), len(dropped),
                                       ", ".join(dropped[:10]))

    def _report_dropped_files(self, assignment_id: str, student_id: str) -> None:
        """Once the grading run has written its report, before the folder is made read-only: which files
        were left out, for the instructor."""
        dropped = self.dropped.get((student_id, assignment_id))
        if dropped:
            add_to_report(self.converter.coursedir, (student_id, assignment_id, ""), {"files_not_copied": dropped[:100]})

    def _starting(self, init_destination: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
        @functools.wraps(init_destination)
        def starting(assignment_id: str, student_id: str) -> bool:
            self.current = (student_id, assignment_id)
            try:
                return init_destination(assignment_id, student_id)
            except RUN_LEVEL:
                raise
            except Exception as problem:  # noqa: BLE001  (the whole class: one submission never ends the run)
                self._fail(problem)
                return False

        return starting

    def _guarded(self, step: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(step)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.current in self.failed:
                return None  # an earlier step of this submission failed: nothing more of it runs
            try:
                return step(*args, **kwargs)
            except RUN_LEVEL:
                raise
            except Exception as problem:  # noqa: BLE001  (the whole class: one submission never ends the run)
                self._fail(problem)
                return None

        return guarded

    def _fail(self, problem: Exception) -> None:
        assert self.current is not None, "a step of a submission ran before nbgrader named the submission"
        student, assignment = self.current
        self.failed.add(self.current)
        coursedir = self.converter.coursedir
        self.converter.log.warning("ptgrader: %s/%s: %s:\n%s", escaped(student), escaped(assignment), NEEDS_REVIEW,
                                   escaped("".join(traceback.format_exception(problem))[-20_000:]))
        if is_safe_name(student) and is_safe_name(assignment):
            give_no_marks(coursedir, student, assignment, None)
            add_to_report(coursedir, (student, assignment, ""), {"unprocessed": describe(problem)})


class GuardedExporter(NotebookExporter):
    """nbgrader's notebook exporter, with the submissions checked first and every failure made a report."""

    share = Unicode("", help="A file holding a JSON list of the students this grader grades, when several grade"
                             " one course side by side (ptgrader.autograde --jobs); empty: every student.").tag(
        config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._failed: dict[Key, str] = {}
        self._notes: dict[Key, dict[str, Any]] = {}  # what the first pass's repairs found, for the report
        if isinstance(self.parent, Autograde):  # built by the converter once it listed the submissions
            refuse_unsafe_submissions(self.parent, read_share(self.share))
            StudentSteps(self.parent)

    @property
    def _coursedir(self) -> CourseDirectory:
        return self.parent.coursedir

    def from_filename(  # type: ignore[override]
        self, filename: str, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        """nbgrader's conversion of one notebook; any failure of it becomes that submission's report."""
        info = (resources or {})["nbgrader"]
        key: Key = (info["student"], info["assignment"], info["notebook"])
        if key in self._failed:  # its first pass failed: nothing is graded in the second
            return self._needs_review(key, self._failed[key], resources)
        try:
            output, resources = super().from_filename(filename, resources, **kw)
        except RUN_LEVEL:
            raise
        except Exception as problem:  # noqa: BLE001  (the whole class: one submission never ends the run)
            self._failed[key] = describe(problem)
            self.log.warning("ptgrader: %s/%s: %s:\n%s", key[0], key[1], NEEDS_REVIEW,
                             escaped("".join(traceback.format_exception(problem))[-20_000:]))
            return self._needs_review(key, self._failed[key], resources)
        self._notes.setdefault(key, {}).update(resources.get("ptgrader", {}))
        if self._notes[key]:  # after each pass: the grading run writes its report in the second
            add_to_report(self._coursedir, key, self._notes[key])
        return output, resources

    def _needs_review(self, key: Key, reason: str, resources: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """No marks for the notebook, the reason in its report, and a graded notebook that says so."""
        student, assignment, notebook = key
        give_no_marks(self._coursedir, student, assignment, notebook)
        add_to_report(self._coursedir, key, {"unprocessed": reason})
        return nbformat.writes(needs_review_notebook(reason)) + "\n", self._init_resources(resources)
