"""Notebook validation glue: hold every notebook to its time budget.

Loaded as a plugin (`-p tests.conftest` in pyproject.toml, with conftest discovery off) so the hooks
apply to every pytest run in the repository, also one given only a notebook path.

nbval turns each notebook cell into a test item; GPU experiments are guarded in the cells' own
code (Run All ignores tags), so every cell runs everywhere. The cell durations are summed per
notebook; the summary prints each notebook's time against the budget in tests/notebooks.toml,
and a notebook over budget fails the run.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.manifest import load_manifest

_cell_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path, _, _ = report.nodeid.partition("::")
    if path.endswith(".ipynb"):
        _cell_seconds[path] += report.duration


def _over_budget() -> list[str]:
    manifest = load_manifest()
    return [
        f"{path}: {seconds:.1f} s > budget {manifest[path].budget_s:.0f} s"
        for path, seconds in _cell_seconds.items()
        if path in manifest and seconds > manifest[path].budget_s
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _cell_seconds:
        return
    manifest = load_manifest()
    terminalreporter.section("notebook run times (nbval, kernel time per notebook)")
    for path, seconds in sorted(_cell_seconds.items()):
        budget = manifest[path].budget_s if path in manifest else float("nan")
        flag = "OVER BUDGET" if seconds > budget else "ok"
        terminalreporter.write_line(f"{seconds:7.1f} s / {budget:4.0f} s  {flag:11}  {path}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    over = _over_budget()
    if over and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    for line in over:
        print(f"\nnotebook over its time budget: {line}")
