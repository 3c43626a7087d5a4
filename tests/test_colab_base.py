"""Which Python the Colab-like check runs (tests/colab_env.py) and how `make colab-base` pins its base."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests import colab_base, colab_env

RUNNING = ".".join(map(str, sys.version_info[:2]))


def test_the_base_is_pinned_like_the_development_environment(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# the stack\ntorch==2.13.0\n-e .\n\nscikit-learn==1.9.1  # note\nnbval==0.11.0\n")
    assert colab_base.pinned(("torch", "numpy", "scikit-learn", "pip"), requirements) == [
        "torch==2.13.0", "numpy", "scikit-learn==1.9.1",
    ]


def test_a_machine_without_colabs_python_is_told_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(colab_base.shutil, "which", lambda _name: None)
    with pytest.raises(SystemExit, match=r"no working python3\.12 is on PATH\. .*python3\.12-venv.*make colab-base"):
        colab_base.colab_python()


@pytest.mark.skipif(RUNNING == colab_env.COLAB_PYTHON, reason="the running Python is Colab's")
def test_without_a_base_the_check_says_it_runs_another_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(colab_env, "COLAB_BASE", tmp_path / "absent")
    base = colab_env.choose_base()
    assert base.python == Path(sys.executable) and base.version == platform.python_version()
    assert "Colab runs 3.12, which `make colab-base` adds" in base.describe()
    assert {"torch", "numpy", "matplotlib", "ipykernel"} <= set(base.entries)
    assert not {"nbval", "pytest", "ptlabs", "nbformat"} & set(base.entries), "the dev stack must not be linked"


def test_colabs_python_in_the_running_environment_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(colab_env, "COLAB_PYTHON", RUNNING)
    assert colab_env.choose_base().describe().startswith(f"Python {platform.python_version()} (Colab's, the running")


@pytest.mark.skipif(RUNNING == colab_env.COLAB_PYTHON, reason="the running Python is Colab's")
def test_a_base_of_another_python_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setattr(colab_env, "COLAB_BASE", tmp_path)
    with pytest.raises(AssertionError, match=rf"holds Python {RUNNING}\.\d+, not Colab's 3\.12: remove it"):
        colab_env.choose_base()


def test_a_base_without_colabs_packages_is_refused(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    with pytest.raises(AssertionError, match="cannot serve as the Colab-like base: packaging is needed .* not installed in"):
        colab_env._inspect(tmp_path / "bare" / "bin" / "python", "a test")


def test_a_python_that_does_not_run_is_not_colabs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shim = tmp_path / "python3.12"  # what pyenv's shim does when 3.12 is installed but not enabled
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match=r"python3\.12 does not run: pyenv: python3\.12: command not found\)"):
        colab_base.colab_python()
