"""The Makefile's guards say what is wrong in one line: no CUDA for `make test-gpu`, an unsupported Python.

These run the guards themselves (tests/require_cuda.py, the `check-python` target) and read the
recipes with `make -n`, which prints commands without running them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from tests.manifest import ROOT, supported_pythons


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    """A top-level make, also when the tests themselves run under `make test` (no inherited MAKEFLAGS/level), and
    with no PYTHON of the caller's environment (a test that wants one passes it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHON")}
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
    result = _make("-s", "check-python", f"VENV={venv}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "", "an existing virtualenv of a supported Python is used as it is"


def _fake_python(folder: Path, version: str) -> Path:
    """An executable that answers the version probe like a Python of ``version`` would."""
    fake = folder / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\necho {version}\n", encoding="utf-8")
    fake.chmod(0o755)
    return fake


def _message(result: subprocess.CompletedProcess[str]) -> str:
    (message,) = [line for line in result.stderr.splitlines() if not re.match(r"make(\[\d+\])?:", line)]
    return message


@pytest.mark.parametrize("where", ["PYTHON", "VENV"])
def test_check_python_rejects_an_unsupported_version_in_one_line(tmp_path: Path, where: str) -> None:
    fake = _fake_python(tmp_path / "venv", "3.10")
    if where == "PYTHON":  # no virtualenv yet: make would create it with $(PYTHON)
        result = _make("-s", "check-python", f"VENV={tmp_path / 'none'}", f"PYTHON={fake}")
        expected = f"error: {fake} is Python 3.10; the book needs Python 3.13, 3.12 or 3.11: install one"
        assert not (tmp_path / "none").exists()
    else:  # a virtualenv made by another Python
        result = _make("-s", "check-python", f"VENV={tmp_path / 'venv'}")
        expected = f"error: {tmp_path / 'venv'} has Python 3.10; the book supports Python 3.13, 3.12 or 3.11"
    assert result.returncode != 0
    assert _message(result).startswith(expected), result.stderr


def test_the_supported_pythons_are_read_from_pyproject() -> None:
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    assert supported_pythons() == ["3.11", "3.12", "3.13"], spec
    script = (ROOT / "tests" / "python_for_venv.sh").read_text(encoding="utf-8")
    assert "3.11" not in script and "3.13" not in script, "the script reads the range, it does not repeat it"


def test_check_python_refuses_a_virtualenv_of_another_python_than_the_one_asked(tmp_path: Path) -> None:
    _fake_python(tmp_path / "venv", "3.12")
    asked = _fake_python(tmp_path / "other", "3.13")
    result = _make("-s", "check-python", f"VENV={tmp_path / 'venv'}", f"PYTHON={asked}")
    assert result.returncode != 0
    assert _message(result) == (
        f"error: {tmp_path / 'venv'} has Python 3.12, and PYTHON={asked} is Python 3.13: remove "
        f"{tmp_path / 'venv'} to switch, or keep both with VENV=.venv-3.13")


def test_check_python_names_a_missing_interpreter(tmp_path: Path) -> None:
    result = _make("-s", "check-python", f"VENV={tmp_path / 'none'}", "PYTHON=no-such-python3.11")
    assert result.returncode != 0
    assert "'no-such-python3.11' was not found; the book needs Python 3.13, 3.12 or 3.11" in _message(result)
    assert "PYTHON=python3.13" in _message(result), "the message says how to go on"


def test_check_python_falls_back_from_an_unsupported_python3(tmp_path: Path) -> None:
    """python3 is 3.10 (PYTHON not set): the newest supported python3.X on PATH creates the venv."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    (fakes / "python3").write_text("#!/bin/sh\necho 3.10\n", encoding="utf-8")
    (fakes / "python3").chmod(0o755)
    env_path = f"{fakes}:{os.environ['PATH']}"
    script = [str(ROOT / "tests" / "python_for_venv.sh"), str(tmp_path / "none"), "python3", "default"]
    result = subprocess.run(script, capture_output=True, text=True, env={**os.environ, "PATH": env_path}, timeout=60)
    assert result.returncode == 0, result.stderr
    chosen = Path(result.stdout.strip())
    assert chosen.name in ("python3.13", "python3.12", "python3.11"), result.stdout
    assert result.stderr.startswith(f"note: python3 is Python 3.10; using {chosen.name} (Python 3."), result.stderr


def _choose(tmp_path: Path, origin: str) -> subprocess.CompletedProcess[str]:
    """The script's choice when python3 on PATH is a Python 3.12 and the distribution's folder has one too."""
    on_path, distribution = tmp_path / "pyenv", tmp_path / "usr-bin"
    for folder in (on_path, distribution):
        _fake_python(folder, "3.12").rename(folder / "bin" / ("python3" if folder == on_path else "python3.12"))
    script = [str(ROOT / "tests" / "python_for_venv.sh"), str(tmp_path / "none"), "python3", origin]
    env = {**os.environ, "PATH": f"{on_path / 'bin'}:{os.environ['PATH']}", "DISTRIBUTION_BIN": str(distribution / "bin")}
    return subprocess.run(script, capture_output=True, text=True, env=env, timeout=60)


def test_check_python_takes_the_distributions_build_of_the_version_found(tmp_path: Path) -> None:
    """PYTHON not set: python3 (say pyenv's) is 3.12 and the distribution has python3.12: the venv is made with the
    distribution's optimised build, and a note says so and how to keep python3."""
    result = _choose(tmp_path, "default")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "usr-bin" / "bin" / "python3.12")
    assert result.stderr.startswith(
        f"note: using {tmp_path / 'usr-bin' / 'bin' / 'python3.12'}, the distribution's optimised build of Python"
        f" 3.12, not {tmp_path / 'pyenv' / 'bin' / 'python3'} (PYTHON=python3 keeps that one)"), result.stderr


def test_check_python_keeps_the_python_asked_for(tmp_path: Path) -> None:
    result = _choose(tmp_path, "command line")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "pyenv" / "bin" / "python3") and not result.stderr


@pytest.mark.parametrize(("args", "passed"), [((), "'python3' 'default'"), (("PYTHON=python3.12",), "'python3.12' 'asked'")])
def test_make_tells_the_script_whether_python_was_asked_for(args: tuple[str, ...], passed: str) -> None:
    """Only a PYTHON given on the command line or in the environment is 'asked': python3 is make's default, which
    the script may replace (a Makefile's own `PYTHON ?= python3` once made every run 'asked')."""
    result = _make("-n", "-s", "check-python", "VENV=/nonexistent", *args)
    assert f"python_for_venv.sh '/nonexistent' {passed})" in result.stdout, result.stdout
