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
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)

try:  # the grading service: in the repository's environment (`make setup`), not in the learners' ptlabs
    from ptgrader.execute import GuardedExecute
    from ptgrader.repair import PlaceMissingCells, RecoverCellMetadata
except ImportError as missing:
    raise SystemExit(
        f"labs/nbgrader_config.py: the grading service is not importable ({missing}). Grade in the repository's"
        " environment: run `make setup` in a clone, then `source .venv/bin/activate`."
    ) from None

c = get_config()  # noqa: F821  (traitlets injects get_config when it loads this file)

c.CourseDirectory.course_id = "ptlabs-book"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))

# nbgrader's own steps, with two repairs: cells whose nbgrader metadata was stripped get it back from the
# release, and a test cell nbgrader cannot place is appended instead of failing the submission.
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
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
# The feedback page escapes the HTML of Markdown cells and outputs (a student's <script> stays text).
c.HTMLExporter.sanitize_html = True
