"""What grading found for each submission: written beside the graded notebook, listed by ``python -m ptgrader.report LAB``.

:class:`GradingReport` is what :class:`~ptgrader.execute.GuardedExecute` records while it grades one
notebook; :func:`write` puts it in ``autograded/<student>/<lab>/ptgrader-report.json``.

Run the listing from the course folder (``labs/``) after ``nbgrader autograde LAB``. Submissions whose grades
were withheld, whose run was stopped, that tampered with the checks, left processes behind or changed course files are
marked ``REVIEW``, and so are those refused before grading or that the grader could not process
(:mod:`ptgrader.failsafe`), and submitted folders with no report at all; the others ``ok``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .intake import escaped, is_safe_name

REPORT_NAME = "ptgrader-report.json"
#: What the report of a submission the grader could not process says (ptgrader.failsafe).
NEEDS_REVIEW = "needs review: the grader could not process this submission"


@dataclass
class GradingReport:
    """What the guarded run found for one submitted notebook."""

    student: str
    assignment: str
    notebook: str
    withheld: str = ""  # why no cell earns points (policy, changed files), or ""
    stopped: str = ""  # why the run stopped early (timeout, dead kernel, no kernel, budget), or ""
    incomplete: list[str] = field(default_factory=list)  # test cells whose last line did not run cleanly
    tampered: list[str] = field(default_factory=list)  # test cells whose canaries found the grader changed
    findings: list[str] = field(default_factory=list)
    restored_files: list[str] = field(default_factory=list)
    killed_processes: int = 0  # processes the kernel left running, ended with it
    survivors: str = ""  # a kernel that could not be ended (never seen; an instructor must look)
    truncated_cells: list[int] = field(default_factory=list)
    unsafe_outputs: int = 0  # rich outputs whose HTML/JavaScript/SVG was not kept
    outputs_differ: list[str] = field(default_factory=list)  # test cells whose sent outputs are not the reference's
    stopped_at_a_difference: list[str] = field(default_factory=list)  # of those, the cells stopped at the first one
    checks_differ: list[str] = field(default_factory=list)  # test cells whose checks saw in the kernel what the reference's did not
    rules_broken: list[str] = field(default_factory=list)  # test cells whose rule about the code's source is broken
    dropped_outputs: int = 0  # outputs and display updates past the submission's output budget
    scores: dict[str, str] = field(default_factory=dict)  # test cell -> "passed", or what it lost and why
    isolation: str = ""  # how the kernel was isolated
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step: start, cells, end

    @property
    def needs_review(self) -> bool:
        return bool(
            self.withheld or self.stopped or self.tampered or self.killed_processes or self.restored_files
            or self.survivors or self.outputs_differ
        )


def write(report: GradingReport, folder: Path) -> Path:
    """Write ``report`` as JSON into ``folder`` (made if needed); return the file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REPORT_NAME
    path.write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return path


#: The fields of a report that need an instructor's eyes, each with how the listing says it.
_SAID: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("withheld", lambda value: f"grades withheld: {value}"),
    ("stopped", lambda value: f"stopped: {value}"),
    ("tampered", lambda value: f"the grader's canaries found tampering in {', '.join(value)}"),
    ("killed_processes", lambda value: f"{value} leftover process(es) killed"),
    ("restored_files", lambda value: f"course files changed: {', '.join(value[:5])}"),
    ("survivors", lambda value: f"a kernel could not be ended: {value}"),
    ("refused", lambda value: f"refused before grading, no marks: {'; '.join(value[:5])}"),
    ("unprocessed", lambda value: f"{NEEDS_REVIEW}, no marks: {value.splitlines()[0][:300]}"),
    ("restored_flags", lambda value: f"cell flags edited or lab cells copied (put right): {'; '.join(value[:5])}"),
    ("files_not_copied", lambda value: f"{len(value)} file(s) beside the lab's not kept: {', '.join(value[:5])}"),
)


def summarize(report: dict) -> str:
    """One line saying what happened to a submission (empty when nothing needs an instructor)."""
    return "; ".join(say(report[key]) for key, say in _SAID if report.get(key))


def listed(path: Path) -> str:
    """:func:`summarize` of the report at ``path``, or why it cannot be read.

    The grader writes every report, but the listing trusts none of it: whoever it names, the student
    is the folder's, and a report that is not the grader's JSON (a file a submission could have put
    there, were ``ptgrader-report.json`` not left out of what nbgrader copies) is itself to review.
    """
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        return summarize(report) if isinstance(report, dict) else "the report is not a JSON object"
    except Exception as problem:  # noqa: BLE001  (any unreadable report is listed, never a crash of the listing)
        return f"the report could not be read ({type(problem).__name__})"


def ungraded(course: Path, lab: str) -> list[str]:
    """The students with a submission of ``lab`` and nothing in ``autograded/``, named escaped.

    A student id outside the safe names is refused before nbgrader sees it, and gets no report there.
    """
    submitted = sorted((course / "submitted").glob(f"*/{lab}"))
    return [escaped(path.parent.name) for path in submitted if not (course / "autograded" / path.parent.name).exists()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab", help="the lab's name, e.g. lab01_tensors")
    parser.add_argument("--course", type=Path, default=Path("."), help="the course folder (default: here)")
    args = parser.parse_args(argv)
    reports = sorted((args.course / "autograded").glob(f"*/{args.lab}/{REPORT_NAME}"))
    if not reports:
        print(f"no grading reports for {args.lab} under {args.course / 'autograded'}: run `nbgrader autograde "
              f"{args.lab}` in the course folder first", file=sys.stderr)
        return 2
    review = 0
    for path in reports:
        line = escaped(listed(path))
        review += bool(line)
        print(f"{'REVIEW' if line else 'ok':6}  {escaped(path.parent.parent.name)}" + (f"  {line}" if line else ""))
    missing = ungraded(args.course, args.lab)
    for name in missing:
        why = "its id is not letters, digits and ._- only" if not is_safe_name(name) else "nbgrader graded no notebook"
        print(f"REVIEW  {name}  not graded, no report: {why} (see nbgrader's log)")
    print(f"{len(reports) + len(missing)} submissions, {review + len(missing)} to review")
    return 0


if __name__ == "__main__":
    sys.exit(main())
