"""The run profile (tests/run_profile.py) puts each phase's wall and CPU time in its stage."""

from __future__ import annotations

from dataclasses import dataclass, field

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
