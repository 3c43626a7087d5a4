"""Run All, as a learner's Jupyter or Colab does it: every cell, top to bottom, no tag honoured.

Usage: python -m tests.run_all [--kernel NAME] NOTEBOOK...   (tests/test_run_all.py runs it with a
kernel that lives in a fresh, Colab-like environment)

Each notebook is executed with plain nbclient in its own folder; nothing is written back. The exit
status is 1 when any notebook failed, and the failing cell is named on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.notebook_tools import NotebookError, execute_notebook, read_notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="python3", help="the Jupyter kernel to run the notebooks in")
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    failures = 0
    for path in args.notebooks:
        try:
            seconds = execute_notebook(read_notebook(path), path.parent, args.kernel)
        except NotebookError as exc:
            failures += 1
            print(f"FAILED {path}: {exc}", file=sys.stderr)
            continue
        print(f"ran {path} in {seconds:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
