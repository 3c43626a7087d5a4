"""The per-notebook time budget: the over-budget verdict comes from the kernel's CPU time, not the wall time.

A `make test` run shares two cores between its workers, so a notebook's wall time there grows with
whatever else runs; its kernel's CPU time (and that of the processes it waited for) is the work the
notebook does, which the budget holds.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.manifest import load_manifest


def test_a_notebook_over_its_budget_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    path, entry = next(iter(load_manifest().items()))
    monkeypatch.setattr(conftest, "_cpu_seconds", {path: entry.budget_s + 1.0})
    monkeypatch.setattr(conftest, "_cell_seconds", {path: 1.0})
    assert conftest._over_budget() == [f"{path}: {entry.budget_s + 1.0:.1f} CPU s > budget {entry.budget_s:.0f} s"]


def test_a_long_wall_time_within_the_cpu_budget_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    path, entry = next(iter(load_manifest().items()))
    monkeypatch.setattr(conftest, "_cpu_seconds", {path: entry.budget_s - 1.0})
    monkeypatch.setattr(conftest, "_cell_seconds", {path: entry.budget_s * 3})  # a loaded machine
    assert conftest._over_budget() == []


def test_cell_times_are_summed_per_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "_cell_seconds", conftest.defaultdict(float))
    monkeypatch.setattr(conftest, "_cpu_seconds", conftest.defaultdict(float))
    monkeypatch.setattr(conftest, "_cell_outcomes", conftest.defaultdict(conftest.Counter))

    class Report:
        def __init__(self, nodeid: str, duration: float, cpu: float) -> None:
            self.nodeid, self.duration = nodeid, duration
            self.when, self.outcome = "call", "passed"
            self.user_properties = [(conftest.CPU_PROPERTY, cpu)]

    for nodeid, duration, cpu in [("notebooks/a.ipynb::Cell 0", 1.5, 1.0), ("notebooks/a.ipynb::Cell 1", 2.0, 0.5),
                                  ("tests/test_x.py::test_y", 9.0, 9.0)]:
        conftest.pytest_runtest_logreport(Report(nodeid, duration, cpu))  # type: ignore[arg-type]
    assert dict(conftest._cell_seconds) == {"notebooks/a.ipynb": 3.5}
    assert dict(conftest._cpu_seconds) == {"notebooks/a.ipynb": 1.5}
    assert dict(conftest._cell_outcomes) == {"notebooks/a.ipynb": conftest.Counter(passed=2)}


def test_the_cpu_time_is_read_from_the_kernel_process() -> None:
    def item(pid: int | None) -> SimpleNamespace:
        kernel = SimpleNamespace(km=SimpleNamespace(provisioner=SimpleNamespace(pid=pid)))
        return SimpleNamespace(parent=SimpleNamespace(kernel=kernel))

    sum(i * i for i in range(200_000))  # some CPU time of this process
    assert conftest._kernel_cpu_seconds(item(os.getpid())) > 0  # type: ignore[arg-type]
    assert conftest._kernel_cpu_seconds(item(None)) is None  # type: ignore[arg-type]
    assert conftest._kernel_cpu_seconds(SimpleNamespace(parent=None)) is None  # type: ignore[arg-type]
    assert conftest._kernel_cpu_seconds(item(2**22 + 12345)) is None  # type: ignore[arg-type]  # no such process
