"""Code in the book fits the website's column: ruff's line-length rule over every notebook.

ruff reads `.ipynb` files itself; the rule set and width live in pyproject.toml (`[tool.ruff]`),
so `ruff check` run by hand reports exactly what this test does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from tests.manifest import ROOT, load_manifest

RUFF = Path(sys.executable).with_name("ruff")


def _ruff(*paths: str) -> subprocess.CompletedProcess[str]:
    ruff = str(RUFF) if RUFF.exists() else shutil.which("ruff")
    assert ruff, "ruff is not installed; it is in requirements.txt (run `make test`, which installs it)"
    command = [ruff, "check", "--no-cache", "--output-format", "concise", *paths]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_notebook_code_fits_the_page() -> None:
    result = _ruff(*sorted(load_manifest()))
    assert result.returncode == 0, f"code lines too wide for the page (or other lint):\n{result.stdout[-4000:]}"


def test_the_lint_can_fail(tmp_path: Path) -> None:
    wide = tmp_path / "wide.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x = {'1 + ' * 30}1")]
    nbformat.write(nb, wide)
    result = _ruff(str(wide))
    assert result.returncode == 1 and "E501" in result.stdout, result.stdout
