"""Notebook validation glue: hold every notebook to its time budget and record the run for the site.

Loaded as a plugin (`-p tests.conftest` in pyproject.toml, with conftest discovery off) so the hooks
apply to every pytest run in the repository, also one given only a notebook path.

nbval turns each notebook cell into a test item; GPU experiments are guarded in the cells' own
code (Run All ignores tags), so every cell runs everywhere. Per notebook, two times are summed over
its cells: the wall time, and the CPU time of the kernel and of every process it waited for (the
ranks of chapter 06's launches included). The budget in tests/notebooks.toml holds the CPU time:
it is the work a learner's machine does, while the wall time of a `make test` run grows with
whatever else the other workers run on the same cores (chapter 06 took 45 s alone and 130 s beside
the lab grading). The summary prints both, and a notebook over budget fails the run. The times and
cell outcomes are also written to _build/execution-status.json, which the website's
execution-status page shows.

Warnings about the machine are not compared (tests/notebook_tools.py, MACHINE_WARNINGS: a CUDA build's
CUDA_HOME line on a GPU-less machine, Dynamo's note on Python 3.13.0), and `make refresh` keeps them out of
the committed outputs the same way.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Generator

import psutil
import pytest
from nbval.plugin import IPyNbCell

from tests.manifest import load_manifest
from tests.notebook_tools import without_machine_warnings
from tests.validation import write_status

_cell_seconds: dict[str, float] = defaultdict(float)
_cpu_seconds: dict[str, float] = defaultdict(float)
#: The name under which a worker sends a cell's kernel CPU time to the controller (a user property).
CPU_PROPERTY = "kernel_cpu_s"
_cell_outcomes: dict[str, Counter[str]] = defaultdict(Counter)


def _compare_without_machine_warnings(compare):  # noqa: ANN001, ANN202  (nbval's method, wrapped once)
    def compare_outputs(self, test, ref, skip_compare=None):  # noqa: ANN001, ANN202
        return compare(self, without_machine_warnings(test), ref, skip_compare)

    return compare_outputs


IPyNbCell.compare_outputs = _compare_without_machine_warnings(IPyNbCell.compare_outputs)


def _kernel_cpu_seconds(item: pytest.Item) -> float | None:
    """User and system CPU time of the notebook's kernel and its waited-for children; None without one."""
    kernel = getattr(item.parent, "kernel", None)  # nbval's RunningKernel, on the notebook's collector
    pid = getattr(getattr(getattr(kernel, "km", None), "provisioner", None), "pid", None)
    if pid is None:
        return None
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:  # the kernel died, or nbval stopped it after a timeout
        return None
    return times.user + times.system + times.children_user + times.children_system


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Measure the cell's CPU time in the kernel; it travels to the xdist controller with the report."""
    before = _kernel_cpu_seconds(item)
    try:
        return (yield)
    finally:
        after = _kernel_cpu_seconds(item)
        if before is not None and after is not None:
            item.user_properties.append((CPU_PROPERTY, after - before))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path, _, _ = report.nodeid.partition("::")
    if path.endswith(".ipynb"):
        if report.when == "call":  # the cells' own time: not the kernel's start, nor waiting for its environment
            _cell_seconds[path] += report.duration
            _cpu_seconds[path] += sum(value for name, value in report.user_properties if name == CPU_PROPERTY)
        if report.when == "call" or report.outcome != "passed":  # a failed setup counts too
            _cell_outcomes[path][report.outcome] += 1


def _over_budget() -> list[str]:
    manifest = load_manifest()
    return [
        f"{path}: {seconds:.1f} CPU s > budget {manifest[path].budget_s:.0f} s"
        for path, seconds in _cpu_seconds.items()
        if path in manifest and seconds > manifest[path].budget_s
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _cell_seconds:
        return
    manifest = load_manifest()
    terminalreporter.section("notebook run times (CPU s of the kernel and its processes / budget, wall s)")
    for path, wall in sorted(_cell_seconds.items()):
        budget = manifest[path].budget_s if path in manifest else float("nan")
        cpu = _cpu_seconds[path]
        flag = "OVER BUDGET" if cpu > budget else "ok"
        terminalreporter.write_line(f"{cpu:7.1f} s / {budget:4.0f} s  {flag:11}  {wall:7.1f} s wall  {path}")


def _status() -> dict[str, dict[str, object]]:
    """Per notebook: kernel CPU and wall time, budget, cells passed/failed/skipped, and the verdict."""
    manifest = load_manifest()
    return {
        path: {
            "seconds": round(seconds, 1),
            "cpu_seconds": round(_cpu_seconds.get(path, 0.0), 1),
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
