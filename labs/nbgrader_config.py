# nbgrader configuration of the book's course. Run every nbgrader command from this folder (`cd labs`).
# The course root is this file's own folder, so a copy of labs/ (the tests grade in a temporary copy)
# is a complete course of its own: source/, release/, submitted/, autograded/, feedback/, gradebook.db.
#
# Grading runs students' code. The settings below make the plain `nbgrader autograde` command
# safe to run on a class: each kernel runs jailed (its own namespaces, an unprivileged user, no
# course, no network, rlimits). See "What grading protects" in book/instructors.md.
import os

from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    ClearOutput,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)

try:  # the grading service: in the repository's environment (`make setup`), not in the learners' ptlabs
    from ptgrader.execute import GuardedExecute
    from ptgrader.failsafe import GuardedExporter
    from ptgrader.gradebook_engines import share_gradebook_engines
    from ptgrader.intake import CellCountCheck
    from ptgrader.metadata_check import CheckCellMetadata  # nbgrader's, its schema compiled once
    from ptgrader.repair import DeduplicateCells, PlaceMissingCells, RecoverCellMetadata, RestoreCellFlags
    from ptgrader.safe_html import (
        KeepGradingMetadata,
        LimitRenderedCells,
        ShowFormatCharacters,
        clean,
        highlight_python,
        markdown_to_safe_html,
        template_basedirs,
    )
except ImportError as missing:
    raise SystemExit(
        f"labs/nbgrader_config.py: the grading service is not importable ({missing}). Grade in the repository's"
        " environment: run `make setup` in a clone, then `source .venv/bin/activate`."
    ) from None

c = get_config()  # noqa: F821  (traitlets injects get_config when it loads this file)

c.CourseDirectory.course_id = "ptlabs-book"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# nbgrader's own list, and the grader's report: it stays with the instructor, never copied into a student's feedback
# (nor from a submission into autograded/, where the grader writes its own).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "ptgrader-report.json"]

# Each submission folder is checked before nbgrader opens it (only regular files with plain names: a link, a
# FIFO or a device is refused, with no marks and a report), and any failure while grading one student becomes
# that student's report ("needs review") instead of ending the run. See ptgrader.failsafe.
c.Autograde.exporter_class = GuardedExporter
# nbgrader opens its gradebook about eleven times per submission, each time with a new database engine: one engine
# per gradebook in this process compiles each query once (a seventh of the grading process's CPU). See
# ptgrader.gradebook_engines.
share_gradebook_engines()
# Names and messages from submissions are logged with their control characters escaped (a notebook name with
# terminal escape codes cleared the terminal and printed a fake log line).
c.Application.logging_config = {"formatters": {"console": {"class": "ptgrader.intake.EscapingLogFormatter"}}}
# nbgrader's own steps, with four repairs: every cell's nbgrader flags (grade, solution, locked, points) are
# put back from the gradebook before the checksums are checked, an earlier copy of a lab cell (pasted in
# Jupyter) becomes an ordinary cell, cells whose nbgrader metadata was stripped get it back from the
# release, and a test cell nbgrader cannot place is appended instead of failing the submission.
c.Autograde.sanitize_preprocessors = [
    CellCountCheck,  # a notebook of more than 1,000 cells is refused: no marks, the reason in its report
    ClearOutput,
    RestoreCellFlags,
    DeduplicateCells,
    OverwriteKernelspec,
    RecoverCellMetadata,
    PlaceMissingCells,
    CheckCellMetadata,
]
# nbgrader's own steps, with Execute replaced by GuardedExecute: a code policy read before the run,
# completion tokens in the test cells, a jailed kernel, only text and images kept from outputs, the
# course checked after the run.
c.Autograde.autograde_preprocessors = [
    GuardedExecute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    LimitRenderedCells,
    ShowFormatCharacters,  # what the pages show is what ran: invisible and text-direction characters as escapes
    KeepGradingMetadata,  # no tag, title or other metadata of the student's reaches the pages' markup
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# A lab cell runs in a few seconds on a 2-core laptop (lab 06's ONNX export and ONNX Runtime checks are
# the slowest, about 5 s alone); 60 s leaves room for a busy grading machine. A cell past 60 s is a loop,
# and the kernel is stopped (the rest of that submission earns nothing, the class goes on).
c.GuardedExecute.timeout = 60
c.GuardedExecute.max_output_bytes = 20_000
c.LimitOutput.max_lines = 200
# A test cell that a student deleted or whose metadata was stripped is put back from the gradebook.
c.OverwriteCells.add_missing_cells = True
# The feedback page and the formgrader run nothing a submission wrote: nbgrader's templates render Markdown
# cells with markdown2html alone, so that filter is replaced by one that sanitises (ptgrader.safe_html), and
# nbconvert sanitises the rest (a student's <script> stays text), raw cells and code through the same allow-list
# (nbconvert's own clean_html keeps any class and id: a raw cell drew Bootstrap's modal over the page). They also
# render nothing that takes minutes: code is highlighted as Python whatever a cell's metadata names, a code fence
# only in a few languages, a cell past 20,000 characters is shown as text, and the graded notebook keeps at most
# 100,000 characters of a submission's own cells (LimitRenderedCells, above).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"markdown2html": markdown_to_safe_html, "clean_html": clean, "highlight_code": highlight_python}
# Nor do they typeset TeX: a student's TeX is a program MathJax runs in the reader's browser (it drew a passing
# verdict over a failed part, and hung the page for minutes), and the labs' text has no mathematics. Our
# templates come first, and replace the one that loads MathJax (src/ptgrader/templates/base/mathjax.html.j2).
c.HTMLExporter.extra_template_basedirs = template_basedirs()
