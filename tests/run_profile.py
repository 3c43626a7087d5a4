"""Where `make test` spends its time: per stage, the wall seconds, the CPU seconds and the load it ran under.

Loaded as a plugin (``-p tests.run_profile`` in pyproject.toml). A test's wall time alone cannot
tell work from waiting: on two cores shared by two workers, lab grading jobs, notebook kernels and
their threads, a test stretches with whatever runs beside it. So every phase of every test (set-up,
call, tear-down: the lab grading runs in a fixture) also measures the CPU time of its worker's process
tree (the worker and every child it reaped: nbgrader, notebook kernels, chapter 06's ranks), plus what
a test counts by hand for processes no worker reaps (:func:`count_unreaped_cpu`: the grading kernels,
from the grader's reports); the controller samples the machine's load average as reports arrive.
The summary prints, per stage, both times and the load, and the five costliest tests;
``_build/test-profile.json`` keeps the same, with the machine and the date, for a run worth
committing (``tests/quiet-run-profile.json``).

A kernel's CPU is counted when its process is reaped, so a notebook's CPU lands on the item that
ended its kernel: per stage the sums are right, per test only roughly. A process no worker reaps and
no test counts (the reference runs of the grading, the start of each worker) is missing from those
sums, so the summary also gives the whole machine's CPU over the run (busy and idle core-seconds, from
``/proc/stat``), and each worker's span: when it ran its first and last test, and how long its tests
took. Idle core-seconds with a worker already done are time the run's packing loses; time the
virtual machine's host gave to someone else (steal) is counted apart, as neither.

The same code does not cost the same CPU on every run: a virtual machine's host can run it slower
(the same code took 1,217 busy core-seconds one day and 1,430 the next, on the same 2-core machine). So the
controller times a fixed Python loop (:func:`machine_speed_s`) when the run starts and when it ends,
and prints both beside the committed quiet run's: a run whose loop took 15% longer is not 15% worse.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

#: The stages of `make test`, by where a test lives.
STAGES = (
    ("notebooks/", "chapter notebooks (one run each)"),
    ("labs/source/", "lab sources (one run each)"),
    ("tests/test_labs.py", "lab grading through nbgrader"),
    ("tests/test_site.py", "site build and browser checks"),
    ("", "unit, hygiene and tool tests"),
)
#: The name under which a worker sends a phase's CPU time to the controller (a user property).
CPU_PROPERTY = "tree_cpu_s"
PROFILE = Path(__file__).resolve().parent.parent / "_build" / "test-profile.json"
#: Every test's wall and CPU seconds, costliest CPU first: where to look for the next cut.
TEST_TIMES = PROFILE.with_name("test-times.json")
COSTLIEST = 5
#: The committed profile of a quiet run, the yardstick of the speed line.
QUIET_PROFILE = Path(__file__).resolve().parent / "quiet-run-profile.json"
#: Iterations of the fixed loop that :func:`machine_speed_s` times (about 0.09 s of CPU on the 2-core AMD EPYC).
SPEED_LOOP = 2_000_000


def stage(path: str) -> str:
    return next(name for prefix, name in STAGES if path.startswith(prefix))


def tree_cpu_seconds() -> float:
    """User and system CPU of this process and of every child it has reaped."""
    times = psutil.Process().cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def machine_speed_s(rounds: int = 3, clock: Callable[[], float] = time.process_time) -> float:
    """CPU seconds of a fixed pure-Python loop, the fastest of ``rounds``: larger on a slower machine.

    CPU time, not wall time, so that the other processes of a busy start do not count, and the fastest
    round, so that one interruption does not either.
    """
    best = float("inf")
    for _ in range(rounds):
        start = clock()
        total = 0
        for number in range(SPEED_LOOP):
            total += number * number % 7
        best = min(best, clock() - start)
    return round(best, 3)


class RunProfile:
    """What the controller (or a plain run) collects from every test report."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.tests: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # nodeid -> [wall, cpu]
        self.loads: list[float] = []
        self.started = time.monotonic()
        self.machine_at_start = psutil.cpu_times()
        self.spans: dict[str, list[float]] = {}  # worker -> [first start, last stop, test seconds]
        self.speed_s: dict[str, float] = {}  # "start", "end" -> machine_speed_s() (the controller's)

    def add(self, report: pytest.TestReport) -> None:
        path = report.nodeid.partition("::")[0]
        cpu = sum(value for name, value in report.user_properties if name == f"{CPU_PROPERTY}_{report.when}")
        self.wall[stage(path)] += report.duration
        self.cpu[stage(path)] += cpu
        self.tests[report.nodeid][0] += report.duration
        self.tests[report.nodeid][1] += cpu
        self.loads.append(os.getloadavg()[0])
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        span = self.spans.setdefault(gateway.id if gateway else "main", [report.start, report.stop, 0.0])
        span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
        span[2] += report.duration

    def machine(self) -> dict[str, float]:
        """The whole machine's busy, idle and stolen core-seconds since the run started (every process counted)."""
        now = psutil.cpu_times()
        # guest time is already in user and nice (/proc/stat): counted once
        fields = [name for name in now._fields if not name.startswith("guest")]
        spent = {name: getattr(now, name) - getattr(self.machine_at_start, name) for name in fields}
        idle = spent["idle"] + spent.get("iowait", 0.0)
        steal = spent.get("steal", 0.0)  # the host ran something else: neither our work nor idle
        total = sum(spent.values())
        return {"busy_core_s": round(total - idle - steal, 1), "idle_core_s": round(idle, 1),
                "steal_core_s": round(steal, 1)}

    def workers(self) -> dict[str, dict[str, float]]:
        """Each worker's tests: seconds from the run's first test to its first and last, and their sum."""
        origin = min((first for first, _, _ in self.spans.values()), default=0.0)
        return {name: {"first_s": round(first - origin, 1), "last_s": round(last - origin, 1), "tests_s": round(busy, 1)}
                for name, (first, last, busy) in sorted(self.spans.items())}

    def summary(self) -> dict[str, object]:
        costliest = sorted(self.tests.items(), key=lambda item: -max(item[1]))[:COSTLIEST]
        return {
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
            "wall_s": round(time.monotonic() - self.started, 1),
            "load": {"mean": round(sum(self.loads) / max(1, len(self.loads)), 2), "max": round(max(self.loads, default=0.0), 2)},
            "machine_cpu": self.machine(),
            "speed_s": dict(self.speed_s),
            "workers": self.workers(),
            "stages": {
                name: {"wall_s": round(self.wall[name], 1), "cpu_s": round(self.cpu[name], 1)}
                for name in sorted(self.wall, key=lambda name: -self.wall[name])
            },
            "costliest": [{"test": nodeid, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}
                          for nodeid, (wall, cpu) in costliest],
        }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_profile = RunProfile()
#: CPU seconds that the running phase caused outside this worker's process tree, as measured by whoever ran it.
_unreaped_cpu_s: list[float] = []


def count_unreaped_cpu(seconds: float) -> None:
    """Add to the running test phase CPU that no process of this worker reaps, so that its stage counts it.

    The grading kernels are the case: forked by the grader's warm server into their jail, their CPU
    never reaches the worker's reaped children (a lab 05 class of 6 students: 12.6 s of CPU reaped,
    27.3 s in the kernels, 45.7 s on the whole machine); the grader reports each kernel's CPU
    (``kernel_cpu`` in its report).
    """
    _unreaped_cpu_s.append(seconds)


def count_grading_kernels(reports: Iterable[Mapping[str, Any]]) -> None:
    """Count the CPU of the grading kernels behind ptgrader's reports (their ``seconds["kernel_cpu"]``)."""
    count_unreaped_cpu(sum(report.get("seconds", {}).get("kernel_cpu", 0.0) for report in reports))


def _measured(item: pytest.Item, when: str) -> Generator[None, None, None]:
    before = tree_cpu_seconds()
    _unreaped_cpu_s.clear()
    try:
        return (yield)
    finally:
        spent = tree_cpu_seconds() - before + sum(_unreaped_cpu_s)
        item.user_properties.append((f"{CPU_PROPERTY}_{when}", spent))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _measured(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _measured(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _measured(item, "teardown"))


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        _profile.speed_s["start"] = machine_speed_s()


def speed_line(speed: dict[str, float], quiet: Path = QUIET_PROFILE) -> str:
    """How fast the machine ran this run's fixed loop, at its start and its end, beside the quiet run's."""
    line = "the machine's speed: a fixed Python loop took " + ", ".join(
        f"{seconds:.3f} s of CPU at the {when}" for when, seconds in speed.items())
    try:
        committed = json.loads(quiet.read_text(encoding="utf-8")).get("speed_s", {})
    except (OSError, ValueError):
        committed = {}
    if committed:
        line += f" (the committed quiet run's: {min(committed.values()):.3f} s)"
    return line


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _profile.add(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _profile.tests:
        return
    _profile.speed_s["end"] = machine_speed_s()
    summary = _profile.summary()
    terminalreporter.section(
        f"time by stage (test seconds summed over the workers; load average {summary['load']['mean']} mean,"
        f" {summary['load']['max']} max)"
    )
    for name, times in summary["stages"].items():
        terminalreporter.write_line(f"{times['wall_s']:7.1f} s wall  {times['cpu_s']:7.1f} s CPU  {name}")
    terminalreporter.write_line(f"the {COSTLIEST} costliest tests (wall s, CPU s of the worker's process tree and its grading kernels):")
    for test in summary["costliest"]:
        terminalreporter.write_line(f"{test['wall_s']:7.1f} s  {test['cpu_s']:7.1f} s  {test['test']}")
    machine = summary["machine_cpu"]
    terminalreporter.write_line(f"the machine: {machine['busy_core_s']:.0f} core-s busy, {machine['idle_core_s']:.0f} idle,"
                                f" {machine['steal_core_s']:.0f} stolen by its host over {summary['wall_s']:.0f} s"
                                f" on {os.cpu_count()} cores (every process counted)")
    terminalreporter.write_line(speed_line(summary["speed_s"]))
    for name, span in summary["workers"].items():
        terminalreporter.write_line(f"worker {name}: tests from {span['first_s']:.0f} s to {span['last_s']:.0f} s,"
                                    f" {span['tests_s']:.0f} s of tests")
    PROFILE.parent.mkdir(exist_ok=True)
    PROFILE.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    by_cpu = sorted(_profile.tests.items(), key=lambda item: -item[1][1])
    TEST_TIMES.write_text(json.dumps({nodeid: {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
                                      for nodeid, (wall, cpu) in by_cpu}, indent=1) + "\n", encoding="utf-8")
