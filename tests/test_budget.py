"""The per-notebook time budget: the summary's over-budget verdict is computed from nbval's cell times."""

from __future__ import annotations

import pytest

from tests import conftest
from tests.manifest import load_manifest


def test_a_notebook_over_its_budget_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    path, entry = next(iter(load_manifest().items()))
    monkeypatch.setattr(conftest, "_cell_seconds", {path: entry.budget_s + 1.0})
    assert conftest._over_budget() == [f"{path}: {entry.budget_s + 1.0:.1f} s > budget {entry.budget_s:.0f} s"]


def test_a_notebook_within_budget_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    path, entry = next(iter(load_manifest().items()))
    monkeypatch.setattr(conftest, "_cell_seconds", {path: entry.budget_s - 1.0})
    assert conftest._over_budget() == []


def test_cell_durations_are_summed_per_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "_cell_seconds", conftest.defaultdict(float))
    monkeypatch.setattr(conftest, "_cell_outcomes", conftest.defaultdict(conftest.Counter))

    class Report:
        def __init__(self, nodeid: str, duration: float) -> None:
            self.nodeid, self.duration = nodeid, duration
            self.when, self.outcome = "call", "passed"

    for nodeid, duration in [("notebooks/a.ipynb::Cell 0", 1.5), ("notebooks/a.ipynb::Cell 1", 2.0),
                             ("tests/test_x.py::test_y", 9.0)]:
        conftest.pytest_runtest_logreport(Report(nodeid, duration))  # type: ignore[arg-type]
    assert dict(conftest._cell_seconds) == {"notebooks/a.ipynb": 3.5}
    assert dict(conftest._cell_outcomes) == {"notebooks/a.ipynb": conftest.Counter(passed=2)}
