"""Notebook validation glue: hold every notebook to its time budget and record the run for the site.

Loaded as a plugin (`-p tests.conftest` in pyproject.toml, with conftest discovery off) so the hooks
apply to every pytest run in the repository, also one given only a notebook path.

nbval turns each notebook cell into a test item; GPU experiments are guarded in the cells' own
code (Run All ignores tags), so every cell runs everywhere. The cell durations are summed per
notebook; the summary prints each notebook's time against the budget in tests/notebooks.toml,
and a notebook over budget fails the run. The times and cell outcomes are also written to
_build/execution-status.json, which the website's execution-status page shows.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tests.manifest import load_manifest
from tests.validation import write_status

_cell_seconds: dict[str, float] = defaultdict(float)
_stage_seconds: dict[str, float] = defaultdict(float)
#: The stages of `make test`, by where a test lives; the run-time report shows each one's share.
STAGES = (
    ("notebooks/", "chapter notebooks (one run each)"),
    ("labs/source/", "lab sources (one run each)"),
    ("tests/test_labs.py", "lab grading through nbgrader"),
    ("tests/test_site.py", "site build and browser checks"),
    ("", "unit, hygiene and tool tests"),
)


def _stage(path: str) -> str:
    return next(name for prefix, name in STAGES if path.startswith(prefix))
_cell_outcomes: dict[str, Counter[str]] = defaultdict(Counter)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path, _, _ = report.nodeid.partition("::")
    _stage_seconds[_stage(path)] += report.duration  # setup included: lab grading runs in a fixture
    if path.endswith(".ipynb"):
        if report.when == "call":  # the cells' own time: not the kernel's start, nor waiting for its environment
            _cell_seconds[path] += report.duration
        if report.when == "call" or report.outcome != "passed":  # a failed setup counts too
            _cell_outcomes[path][report.outcome] += 1


def _over_budget() -> list[str]:
    manifest = load_manifest()
    return [
        f"{path}: {seconds:.1f} s > budget {manifest[path].budget_s:.0f} s"
        for path, seconds in _cell_seconds.items()
        if path in manifest and seconds > manifest[path].budget_s
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    total = sum(_stage_seconds.values())
    if total:
        terminalreporter.section("time by stage (test seconds, summed over the workers)")
        for name, seconds in sorted(_stage_seconds.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:7.1f} s  {seconds / total:4.0%}  {name}")
    if not _cell_seconds:
        return
    manifest = load_manifest()
    terminalreporter.section("notebook run times (nbval, kernel time per notebook)")
    for path, seconds in sorted(_cell_seconds.items()):
        budget = manifest[path].budget_s if path in manifest else float("nan")
        flag = "OVER BUDGET" if seconds > budget else "ok"
        terminalreporter.write_line(f"{seconds:7.1f} s / {budget:4.0f} s  {flag:11}  {path}")


def _status() -> dict[str, dict[str, object]]:
    """Per notebook: kernel time, budget, cells passed/failed/skipped, and the verdict."""
    manifest = load_manifest()
    return {
        path: {
            "seconds": round(seconds, 1),
            "budget_s": manifest[path].budget_s if path in manifest else None,
            "cells": dict(_cell_outcomes[path]),
            "result": "failed" if _cell_outcomes[path]["failed"] else "passed",
        }
        for path, seconds in sorted(_cell_seconds.items())
    }


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _cell_seconds and not hasattr(session.config, "workerinput"):  # the xdist controller, or a plain run
        write_status(_status())  # _build/execution-status.json, shown on the site's execution-status page
    over = _over_budget()
    if over and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    for line in over:
        print(f"\nnotebook over its time budget: {line}")
