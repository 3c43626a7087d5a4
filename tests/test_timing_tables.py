"""tests/timing_tables.py reads back exactly what ptlabs.Comparison prints, whatever its numbers."""

from __future__ import annotations

import pytest

import ptlabs
from tests.timing_tables import parse_tables

QUIET = {"256": 1e-3, "512": 7.5e-3}
STALLED = {"256": 20e-3, "512": 21e-3}


def _printed(times: dict[str, list[float]], checks: list[dict[str, float]], **kwargs) -> str:
    return ptlabs.Comparison(label="a label: with a colon", baseline=next(iter(times)), times=times,
                             checks=checks, **kwargs).table()


@pytest.mark.parametrize(
    ("times", "kinds"),
    [
        ({"eager": [1e-3] * 5, "compiled": [0.25e-3] * 5}, {"compiled": "faster"}),
        ({"a": [2e-9] * 5, "b": [1_200.0] * 5}, {"b": "slower"}),  # thousands separators, ns and s
        ({"a b": [1e-3] * 5, "a b c": [1.02e-3] * 5, "d": [0.5e-3] * 5}, {"a b c": "unclear", "d": "faster"}),
    ],
)
def test_a_quiet_table_reads_back(times: dict[str, list[float]], kinds: dict[str, str]) -> None:
    [table] = parse_tables("before\n" + _printed(times, [QUIET] * 5, num_threads=2) + "\nafter\n", cell=3)
    assert (table.cell, table.label, table.rounds, table.threads) == (3, "a label: with a colon", 5, 2)
    assert [row.name for row in table.rows] == list(times)
    for row in table.rows:
        assert row.seconds == pytest.approx(times[row.name][0], rel=5e-3)
    assert {name: table.kind(name) for name in kinds} == kinds
    assert table.machine is not None and table.machine.endswith("quiet")
    assert table.problems() == []


def test_wrapped_verdicts_and_a_busy_machine_read_back() -> None:
    long_name = "a candidate with a long name that wraps"
    printed = _printed({"base": [1e-3] * 7, long_name: [1.01e-3] * 7}, [STALLED] * 7)
    [table] = parse_tables(printed)
    assert table.kind(long_name) == "busy"
    assert any("measured while the machine was busy" in problem for problem in table.problems())


def test_two_tables_in_one_output_are_two_tables() -> None:
    one = _printed({"a": [1e-3] * 5, "b": [2e-3] * 5}, [QUIET] * 5)
    assert [len(t.rows) for t in parse_tables(one + "\n" + one)] == [2, 2]
