"""The Makefile's guards say what is wrong in one line: no CUDA for `make test-gpu`, wrong Python.

These run the guards themselves (tests/require_cuda.py, the `check-python` target) and read the
recipes with `make -n`, which prints commands without running them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.manifest import ROOT


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    """A top-level make, also when the tests themselves run under `make test` (no inherited MAKEFLAGS/level)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    command = ["make", "--no-print-directory", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_require_cuda_stops_with_one_line_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: make test-gpu runs")
    command = [sys.executable, "-m", "tests.require_cuda"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("make test-gpu: CUDA is not available on this machine (torch ")
    assert "GPU runner" in lines[0]


def test_test_gpu_checks_for_cuda_before_running_pytest() -> None:
    result = _make("-n", "test-gpu")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    cuda = next(i for i, line in enumerate(lines) if "-m tests.require_cuda" in line)
    pytest_ = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert cuda < pytest_, result.stdout


def test_test_prints_skip_reasons() -> None:
    result = _make("-n", "test")
    assert result.returncode == 0, result.stderr
    assert "-m pytest -rfEs " in result.stdout, "pytest's -rs lists every skip with its reason"


def test_check_python_accepts_the_virtualenv() -> None:
    venv = Path(sys.executable).parent.parent
    if sys.version_info[:2] != (3, 11):
        pytest.skip(f"this interpreter is Python {sys.version_info[0]}.{sys.version_info[1]}")
    result = _make("-s", "check-python", f"VENV={venv}")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("where", ["PYTHON", "VENV"])
def test_check_python_rejects_another_version_in_one_line(tmp_path: Path, where: str) -> None:
    fake = tmp_path / "venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 3.10\n", encoding="utf-8")
    fake.chmod(0o755)
    if where == "PYTHON":  # no virtualenv yet: make would create it with $(PYTHON)
        result = _make("-s", "check-python", f"VENV={tmp_path / 'none'}", f"PYTHON={fake}")
        expected = "error: Python 3.11 is needed, found 3.10; set PYTHON=python3.11"
    else:  # a virtualenv made by another Python
        result = _make("-s", "check-python", f"VENV={tmp_path / 'venv'}")
        expected = "error: Python 3.11 is needed, but"
    assert result.returncode != 0
    (message,) = [line for line in result.stderr.splitlines() if not re.match(r"make(\[\d+\])?:", line)]
    assert message.startswith(expected), result.stderr


def test_check_python_names_a_missing_interpreter(tmp_path: Path) -> None:
    result = _make("-s", "check-python", f"VENV={tmp_path}", "PYTHON=no-such-python3.11")
    assert result.returncode != 0
    assert "'no-such-python3.11' was not found; set PYTHON=python3.11" in result.stderr
