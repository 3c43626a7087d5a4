"""`make check-timings`: time every committed comparison again and set today's verdict beside it.

Usage: python -m tests.check_timings [--report FILE] [NOTEBOOK ...]   (default: every chapter)

Each chapter holding a timing table is executed in memory, natively as `make refresh` does (the
machine's best kernels, all its threads, a cold Inductor cache), and never written. Every table's verdicts, committed and
new, are read back (tests/timing_tables.py) and matched by label; the report lists each pair and
whether they agree, with the machine, its load and the date. Run it on a quiet machine: a table
that ran while the machine was busy is reported as such, never as a disagreement. The exit status
is 0 only when every verdict agrees: a disagreement, a missing table, a busy machine or a failed
notebook gives 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import torch

from tests.hygiene import read_claims
from claims_table import SECTION_HEADING  # noqa: E402  (book/_ext, on the path once tests.hygiene is imported)
from tests.manifest import ROOT, load_manifest
from tests.notebook_tools import NotebookError, execute_cold, read_notebook
from tests.timing_tables import Table, notebook_tables
from tests.validation import today

REPORT = ROOT / "tests" / "timing-check.md"


@dataclass(frozen=True)
class Pair:
    """One candidate's verdict as committed and as measured today, with the claims its section shows."""

    chapter: str
    section: str  # "§6": the chapter section the table sits in
    claims: str  # the claim keys whose "shown in" names that section
    label: str
    name: str
    committed: str
    today: str

    @property
    def outcome(self) -> str:
        if self.today == "busy":
            return "busy today: not compared"
        return "agrees" if _kind(self.committed) == _kind(self.today) else "DIFFERS"


def _verdict(table: Table | None, name: str) -> str:
    if table is None:
        return "missing"
    kind = table.kind(name)
    if kind in ("slower", "faster"):
        row = next(row for row in table.rows if row.name == name)
        median = row.quartiles[1] if row.quartiles else 1.0
        factor = median if kind == "slower" else 1 / median
        return f"{kind} ({factor:.1f}x)"
    return kind


def _kind(verdict: str) -> str:
    return verdict.split(" ", 1)[0]


def _section_of(nb: nbformat.NotebookNode, cell: int) -> int | None:
    """The number of the last ``## N.`` heading at or before ``cell``."""
    numbers = [int(number) for candidate in nb.cells[: cell + 1] if candidate.cell_type == "markdown"
               for number, _ in SECTION_HEADING.findall(candidate.source)]
    return numbers[-1] if numbers else None


def compare_notebook(path: Path) -> list[Pair]:
    """Run one notebook and pair each committed verdict with today's, by table label (in order)."""
    nb = read_notebook(path)
    committed = notebook_tables(nb)
    if not committed:
        return []
    claims, _ = read_claims(nb)
    fresh_nb = read_notebook(path)
    execute_cold(fresh_nb, path.parent)
    fresh = notebook_tables(fresh_nb)
    pairs = []
    for index, old in enumerate(committed):
        same_label = [t for t in committed[:index] if t.label == old.label]
        matches = [t for t in fresh if t.label == old.label]
        new = matches[len(same_label)] if len(matches) > len(same_label) else None
        section = _section_of(nb, old.cell)
        keys = ", ".join(f"`{claim.key}`" for claim in claims if section in claim.sections) or "none"
        for row in old.rows:
            if row.quartiles is None:
                continue
            pairs.append(Pair(path.stem, f"§{section}" if section else "-", keys, old.label, row.name,
                              _verdict(old, row.name), _verdict(new, row.name)))
    return pairs


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _machine() -> str:
    return f"{_cpu_model()}, {os.cpu_count()} logical cores, {platform.system()}; torch {torch.__version__}"


def report(pairs: list[Pair], loads: tuple[float, float], failures: list[str]) -> str:
    """The markdown report: machine, date, load, then one line per verdict pair."""
    agree = sum(pair.outcome == "agrees" for pair in pairs)
    lines = [
        "# Timing verdicts re-checked (`make check-timings`)",
        "",
        f"- date: {today()}",
        f"- machine: {_machine()}",
        f"- load average (1 min) at the start and end: {loads[0]:.2f}, {loads[1]:.2f}",
        f"- {agree} of {len(pairs)} verdicts agree with the committed ones"
        + (f"; {len(failures)} notebook(s) failed" if failures else ""),
        "",
        "Kinds compare (slower, faster, no clear difference); the factors vary with the machine and are shown",
        "for information.",
        "",
        "| chapter | section | claims shown there | comparison | candidate | committed | today | outcome |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {p.chapter} | {p.section} | {p.claims} | {p.label} | {p.name} | {p.committed} | {p.today} "
              f"| {p.outcome} |" for p in pairs]
    lines += [f"\nFAILED {failure}" for failure in failures]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="chapters to re-time (default: all)")
    parser.add_argument("--report", type=Path, default=REPORT, help=f"where to write the report ({REPORT.name})")
    args = parser.parse_args(argv)
    paths = args.notebooks or [ROOT / entry for entry in load_manifest() if entry.startswith("notebooks/")]
    start_load = os.getloadavg()[0]
    pairs: list[Pair] = []
    failures = []
    for path in paths:
        try:
            found = compare_notebook(path)
        except NotebookError as exc:
            failures.append(f"{path}: {exc}")
            print(f"FAILED {path}: {exc}", file=sys.stderr)
            continue
        pairs += found
        for pair in found:
            print(f"{pair.chapter} | {pair.label} | {pair.name}: {pair.committed} -> {pair.today}: {pair.outcome}")
    text = report(pairs, (start_load, os.getloadavg()[0]), failures)
    args.report.write_text(text, encoding="utf-8")
    print(f"report written to {args.report}")
    return 1 if failures or any(pair.outcome != "agrees" for pair in pairs) else 0


if __name__ == "__main__":
    sys.exit(main())
