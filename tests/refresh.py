"""`make refresh`: re-execute notebooks in place and regenerate the lab releases.

Usage: python -m tests.refresh [NOTEBOOK ...]   (default: every notebook in tests/notebooks.toml)

Each notebook is executed in memory and written back only when every cell ran; a missing
file or a broken notebook is reported and left untouched, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from tests.manifest import ROOT, load_manifest
from tests.notebook_tools import NotebookError, collapse_solutions, ensure_bootstrap, execute_notebook, read_notebook
from tests.validation import stamp


def refresh_notebook(path: Path) -> float:
    """Execute one notebook and write it back; return its run time."""
    nb = read_notebook(path)
    ensure_bootstrap(nb)
    collapse_solutions(nb)
    seconds = execute_notebook(nb, path.parent)
    stamp(nb)
    nbformat.write(nb, path)
    return seconds


def _relative(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to refresh (default: all)")
    args = parser.parse_args(argv)
    manifest = load_manifest()
    paths = args.notebooks or [ROOT / entry for entry in manifest]
    failures = 0
    for path in paths:
        try:
            seconds = refresh_notebook(path)
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
