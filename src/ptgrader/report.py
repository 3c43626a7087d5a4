"""List what the guarded grading run found, one line per submission: ``python -m ptgrader.report LAB``.

Run it from the course folder (``labs/``) after ``nbgrader autograde LAB``. Submissions whose grades
were withheld, whose run was stopped, that tampered with the checks, left processes behind or changed course files are
marked ``REVIEW``; the others ``ok``. The details are in each ``autograded/<student>/<lab>/ptgrader-report.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .execute import REPORT_NAME


def summarize(report: dict) -> str:
    """One line saying what happened to a submission (empty when nothing needs an instructor)."""
    parts = []
    if report.get("withheld"):
        parts.append(f"grades withheld: {report['withheld']}")
    if report.get("stopped"):
        parts.append(f"stopped: {report['stopped']}")
    if report.get("tampered"):
        parts.append(f"the grader's canaries found tampering in {', '.join(report['tampered'])}")
    if report.get("killed_processes"):
        parts.append(f"{report['killed_processes']} leftover process(es) killed")
    if report.get("restored_files"):
        parts.append(f"course files changed: {', '.join(report['restored_files'][:5])}")
    if report.get("survivors"):
        parts.append(f"a kernel could not be ended: {report['survivors']}")
    return "; ".join(parts)


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
        report = json.loads(path.read_text(encoding="utf-8"))
        line = summarize(report)
        review += bool(line)
        print(f"{'REVIEW' if line else 'ok':6}  {report['student']}" + (f"  {line}" if line else ""))
    print(f"{len(reports)} submissions, {review} to review")
    return 0


if __name__ == "__main__":
    sys.exit(main())
