"""The run profile (tests/run_profile.py) puts each phase's wall and CPU time in its stage."""

from __future__ import annotations

import json
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import run_profile


@dataclass
class Report:
    nodeid: str
    when: str
    duration: float
    user_properties: list[tuple[str, float]] = field(default_factory=list)
    start: float = 1000.0
    stop: float = 1001.0


@dataclass
class Gateway:
    id: str


@dataclass
class Worker:
    gateway: Gateway


def test_each_phase_counts_its_own_cpu_in_its_stage() -> None:
    profile = run_profile.RunProfile()
    cpu = run_profile.CPU_PROPERTY
    # The lab grading runs in the set-up of the first test that asks for it; its properties pile up on the item.
    grading = [(f"{cpu}_setup", 300.0), (f"{cpu}_call", 0.5)]
    profile.add(Report("tests/test_labs.py::test_solution_earns_full_marks[lab01]", "setup", 200.0, grading[:1]))
    profile.add(Report("tests/test_labs.py::test_solution_earns_full_marks[lab01]", "call", 1.0, grading))
    profile.add(Report("notebooks/05_acceleration.ipynb::Cell 3", "call", 20.0, [(f"{cpu}_call", 15.0)]))
    summary = profile.summary()
    assert summary["stages"] == {
        "lab grading through nbgrader": {"wall_s": 201.0, "cpu_s": 300.5},
        "chapter notebooks (one run each)": {"wall_s": 20.0, "cpu_s": 15.0},
    }
    assert [test["test"] for test in summary["costliest"]][0].startswith("tests/test_labs.py")


def test_the_tree_cpu_grows_with_work_done() -> None:
    before = run_profile.tree_cpu_seconds()
    sum(i * i for i in range(2_000_000))
    assert run_profile.tree_cpu_seconds() > before


def test_cpu_counted_by_hand_joins_the_running_phase_only() -> None:
    """The grading kernels' CPU, which no worker reaps, lands on the phase that graded them, and only there."""
    item = SimpleNamespace(user_properties=[])  # all that _measured uses of a test item
    phase = run_profile._measured(item, "setup")  # type: ignore[arg-type]
    next(phase)
    run_profile.count_unreaped_cpu(40.0)
    run_profile.count_unreaped_cpu(2.5)
    with pytest.raises(StopIteration):
        phase.send(None)
    later = run_profile._measured(item, "call")  # type: ignore[arg-type]
    next(later)
    with pytest.raises(StopIteration):
        later.send(None)
    (setup, call) = (seconds for _, seconds in item.user_properties)
    assert 42.5 <= setup < 42.5 + 1.0, setup
    assert 0.0 <= call < 1.0, call


def test_each_worker_span_runs_from_its_first_test_to_its_last() -> None:
    profile = run_profile.RunProfile()
    for worker, start, stop in (("gw0", 100.0, 160.0), ("gw1", 101.0, 111.0), ("gw0", 160.0, 400.0)):
        report = Report("tests/test_x.py::test_y", "call", stop - start, start=start, stop=stop)
        report.node = Worker(Gateway(worker))  # what xdist's controller attaches
        profile.add(report)
    assert profile.summary()["workers"] == {
        "gw0": {"first_s": 0.0, "last_s": 300.0, "tests_s": 300.0},
        "gw1": {"first_s": 1.0, "last_s": 11.0, "tests_s": 10.0},
    }


def test_the_machine_counts_busy_and_idle_core_seconds() -> None:
    profile = run_profile.RunProfile()
    sum(i * i for i in range(3_000_000))
    machine = profile.machine()
    assert machine["busy_core_s"] > 0 and machine["idle_core_s"] >= 0


def test_stolen_time_is_neither_busy_nor_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A virtual machine's host that runs something else makes a run slower, not the suite costlier."""
    Times = namedtuple("Times", "user nice system idle iowait steal guest")
    clock = iter([Times(0, 0, 0, 0, 0, 0, 0), Times(100.0, 0, 20.0, 30.0, 2.0, 40.0, 5.0)])
    monkeypatch.setattr(run_profile.psutil, "cpu_times", lambda: next(clock))
    profile = run_profile.RunProfile()
    assert profile.machine() == {"busy_core_s": 120.0, "idle_core_s": 32.0, "steal_core_s": 40.0}


def test_the_speed_is_the_fastest_round_of_the_fixed_loop() -> None:
    ticks = iter([0.0, 0.5, 1.0, 1.2, 2.0, 2.6])  # rounds of 0.5, 0.2 and 0.6 s: one was interrupted twice
    assert run_profile.machine_speed_s(rounds=3, clock=lambda: next(ticks)) == 0.2
    assert 0 < run_profile.machine_speed_s(rounds=1) < 5


def test_the_speed_line_names_the_quiet_runs_speed(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet.json"
    assert run_profile.speed_line({"start": 0.1, "end": 0.12}, quiet) == (
        "the machine's speed: a fixed Python loop took 0.100 s of CPU at the start, 0.120 s of CPU at the end")
    quiet.write_text(json.dumps({"speed_s": {"start": 0.09, "end": 0.095}}))
    assert run_profile.speed_line({"end": 0.12}, quiet).endswith("0.120 s of CPU at the end (the committed quiet run's: 0.090 s)")
