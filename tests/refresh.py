"""`make refresh`: re-execute notebooks in place and regenerate the lab releases.

Usage: python -m tests.refresh [--allow-busy] [NOTEBOOK ...]   (default: every notebook in tests/notebooks.toml)

Each notebook is executed in memory and written back only when every cell ran and every timing
table's machine check found the machine quiet; otherwise it is reported and left untouched, and
the exit status is 1. ``--allow-busy`` writes a draft anyway: its busy tables say so, and the
hygiene rule ``timing_tables_hold_together`` keeps them from landing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from ptlabs.timing import BUSY

from tests.manifest import ROOT, load_manifest
from tests.notebook_tools import NotebookError, collapse_solutions, ensure_bootstrap, execute_cold, read_notebook
from tests.timing_tables import notebook_tables
from tests.validation import stamp


def refresh_notebook(path: Path, *, allow_busy: bool = False) -> float:
    """Execute one notebook and write it back; return its run time.

    It runs with a cold Inductor cache of its own. A timing table measured while the machine was busy
    describes the load, not the code: such a notebook is not written (NotebookError), unless
    ``allow_busy`` asks for a draft.
    """
    nb = read_notebook(path)
    ensure_bootstrap(nb)
    collapse_solutions(nb)
    seconds = execute_cold(nb, path.parent)
    busy = [f"code cell {table.cell} ({table.label}): {table.machine}"
            for table in notebook_tables(nb) if table.machine and BUSY in table.machine]
    if busy and not allow_busy:
        raise NotebookError(
            f"timing measured while {BUSY}, so its verdicts describe the load:\n    " + "\n    ".join(busy)
            + "\n  refresh when nothing else runs (or pass --allow-busy for a draft that cannot land)"
        )
    stamp(nb)
    nbformat.write(nb, path)
    return seconds


def _relative(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to refresh (default: all)")
    parser.add_argument("--allow-busy", action="store_true",
                        help="write notebooks whose timing ran on a busy machine (a draft: make test refuses it)")
    args = parser.parse_args(argv)
    manifest = load_manifest()
    paths = args.notebooks or [ROOT / entry for entry in manifest]
    failures = 0
    for path in paths:
        try:
            seconds = refresh_notebook(path, allow_busy=args.allow_busy)
        except NotebookError as exc:
            failures += 1
            print(f"FAILED {path}: {exc}\n  (left unchanged)", file=sys.stderr)
            continue
        entry = manifest.get(_relative(path))
        limit = f" / budget {entry.budget_s:.0f} s" if entry else " (not in tests/notebooks.toml)"
        print(f"refreshed {path} in {seconds:.1f} s{limit}")
    if not args.notebooks and not failures:
        from tests.lab_tools import regenerate_releases  # nbgrader is slow to import; only needed here

        for release in regenerate_releases():
            print(f"regenerated {release}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
