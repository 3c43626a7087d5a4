"""Reading back the verdict tables that ``ptlabs.compare`` prints into a notebook's outputs.

Three users need the same reading: the hygiene rule that refuses a committed table that
contradicts itself or came from a busy machine, ``make refresh``, which refuses to write such a
table, and ``make check-timings``, which sets each committed verdict beside today's. The format
is written in one place, ``ptlabs.timing.Comparison.table``; ``tests/test_timing_tables.py`` holds
this reader to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import nbformat

from ptlabs.timing import BUSY

HEADER = re.compile(
    r"^(?P<label>\S.*): (?P<rounds>\d+) interleaved rounds(?:, (?P<threads>\d+) threads?)?(?:, median time per round)?$"
)
ROW = re.compile(
    r"^\s+(?P<name>\S.*?)\s+(?P<time>[\d.,]+) (?P<unit>s|ms|us|ns)\s+"
    r"(?:baseline|(?P<median>[\d.,]+) \((?P<low>[\d.,]+)-(?P<high>[\d.,]+)\))$"
)
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: How far the ratio of two median times may sit from the median of the per-round ratios. On a quiet
#: machine the two agree closely; a table where they disagree more was measured under changing load.
AGREEMENT = 1.25


@dataclass
class Row:
    """One candidate's line: its median time, and (except the baseline) its ratio's quartiles."""

    name: str
    seconds: float
    quartiles: tuple[float, float, float] | None  # None for the baseline


@dataclass
class Table:
    """One printed comparison: where it is, its rows, its machine check and its verdict lines."""

    cell: int
    label: str
    rounds: int
    threads: int | None
    rows: list[Row] = field(default_factory=list)
    machine: str | None = None
    verdicts: dict[str, str] = field(default_factory=dict)

    @property
    def baseline(self) -> Row:
        return next(row for row in self.rows if row.quartiles is None)

    def kind(self, name: str) -> str:
        """The verdict's kind for ``name``: slower, faster, unclear, busy, or missing."""
        text = self.verdicts.get(name, "")
        if BUSY in text:
            return "busy"
        if text.endswith("(slower)"):
            return "slower"
        if " faster than " in text:
            return "faster"
        return "unclear" if "no clear difference" in text else "missing"

    def problems(self) -> list[str]:
        """What makes this table untrustworthy: no machine check, a busy machine, or a self-contradiction."""
        found = []
        if self.machine is None or "not run" in self.machine:
            found.append("has no machine check (time it with ptlabs.compare, or report ptlabs.machine_check)")
        elif BUSY in self.machine:
            found.append(f"was measured while {BUSY}: {self.machine}")
        if not any(row.quartiles is None for row in self.rows):
            return [*found, "has no baseline row"]
        base = self.baseline.seconds
        for row in self.rows:
            if row.quartiles is None:
                continue
            low, median, high = row.quartiles
            of_medians = row.seconds / base
            if not median / AGREEMENT <= of_medians <= median * AGREEMENT:
                found.append(
                    f"row {row.name!r}: the median times give a ratio of {of_medians:.2f}, but the rounds' "
                    f"median ratio is {median:g} (middle rounds {low:g}-{high:g}): the load changed while it ran"
                )
            kind = self.kind(row.name)
            if (kind == "slower" and median <= 1) or (kind == "faster" and median >= 1):
                found.append(f"row {row.name!r}: the verdict says {kind}, but the median ratio is {median:g}")
            if kind == "missing":
                found.append(f"row {row.name!r} has no verdict line")
        return found


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _unwrap(lines: list[str]) -> list[str]:
    """Join the continuation lines (indented) of wrapped verdicts to the line they continue."""
    joined: list[str] = []
    for line in lines:
        if joined and line.startswith(" ") and not ROW.match(line):
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def parse_tables(text: str, cell: int = -1) -> list[Table]:
    """Every verdict table in ``text`` (one cell's printed output), in order."""
    tables: list[Table] = []
    lines = text.splitlines()
    for start, line in enumerate(lines):
        match = HEADER.match(line)
        if not match:
            continue
        table = Table(cell, match["label"], int(match["rounds"]),
                      int(match["threads"]) if match["threads"] else None)
        body = []
        for following in lines[start + 2:]:  # past the column header
            if HEADER.match(following) or not following.strip():
                break
            body.append(following)
        for item in _unwrap(body):
            row = ROW.match(item)
            if row and not table.machine:
                quartiles = None if row["median"] is None else (
                    _number(row["low"]), _number(row["median"]), _number(row["high"]))
                table.rows.append(Row(row["name"], _number(row["time"]) * UNITS[row["unit"]], quartiles))
            elif item.startswith("machine check:"):
                table.machine = item
            else:
                name = next((r.name for r in table.rows if item.startswith((f"{r.name}:", f"{r.name} vs "))), None)
                if name is None:
                    break  # the table has ended; what follows is the cell's own output
                table.verdicts[name] = item
        tables.append(table)
    return tables


def _stdout(cell: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream" and out.get("name") == "stdout")


def notebook_tables(nb: nbformat.NotebookNode) -> list[Table]:
    """Every verdict table in the notebook's stored outputs, each tagged with its code cell's index."""
    return [table for index, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for table in parse_tables(_stdout(cell), index)]
