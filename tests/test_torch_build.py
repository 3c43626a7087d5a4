"""The set-up's torch choice (tests/torch_build.py): the pip command each case builds, and what it says.

PyTorch's CPU index cannot be reached from the development machines, so the commands are tested here, and the
CUDA build end to end on Python 3.12 (PyPI's default there), as the closing notes record.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import torch_build
from tests.manifest import ROOT

PIN = "torch==2.13.0"


@pytest.mark.parametrize(("choice", "system", "gpu", "build"), [
    ("auto", "Linux", False, "cpu"),
    ("auto", "Linux", True, "cuda"),
    ("cpu", "Linux", True, "cpu"),
    ("cuda", "Linux", False, "cuda"),
    ("auto", "Darwin", False, "default"),
    ("cuda", "Windows", True, "default"),
])
def test_the_build_follows_the_gpu_unless_told(choice: str, system: str, gpu: bool, build: str) -> None:
    assert torch_build.decide(choice, system, gpu) == build


def test_an_unknown_choice_is_refused_with_the_choices() -> None:
    with pytest.raises(SystemExit, match=r"TORCH='gpu': use one of auto, cpu, cuda"):
        torch_build.decide("gpu", "Linux", True)


def test_the_cpu_build_comes_from_pytorchs_cpu_index_when_it_answers() -> None:
    command = torch_build.pip_command("/v/bin/python", "cpu", PIN, cpu_index_reachable=True)
    assert command == ["/v/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                       "--extra-index-url", "https://download.pytorch.org/whl/cpu", PIN]


@pytest.mark.parametrize(("build", "reachable"), [("cpu", False), ("cuda", True), ("default", True)])
def test_no_cpu_index_otherwise(build: str, reachable: bool) -> None:
    """The CUDA and the default builds are PyPI's; an unreachable CPU index is never handed to pip."""
    command = torch_build.pip_command("python", build, PIN, cpu_index_reachable=reachable)
    assert "--extra-index-url" not in command and command[-1] == PIN


def test_the_message_names_the_build_the_reason_and_the_override() -> None:
    assert torch_build.describe("cpu", gpu=False, cpu_index_reachable=True, overridden=False) == (
        "torch: the CPU build from https://download.pytorch.org/whl/cpu (no NVIDIA GPU was found; "
        "override with TORCH=cuda)")
    assert torch_build.describe("cuda", gpu=True, cpu_index_reachable=False, overridden=False) == (
        "torch: the CUDA build from PyPI (an NVIDIA GPU was found; override with TORCH=cpu)")
    unreachable = torch_build.describe("cpu", gpu=False, cpu_index_reachable=False, overridden=True)
    assert "as TORCH says" in unreachable and "cannot be reached" in unreachable and "5 GB installed" in unreachable


@pytest.mark.parametrize(("version", "build"), [
    ("2.13.0+cpu", "cpu"), ("2.13.0", "cuda"), ("2.13.0+cu126", "cuda"), ("2.13.0+rocm7.2", "rocm7.2"),
])
def test_an_installed_build_is_read_from_its_version(version: str, build: str) -> None:
    assert torch_build.installed_build(version) == build


def test_the_pin_is_read_from_requirements(tmp_path: Path) -> None:
    assert torch_build.pinned_torch() == PIN
    (tmp_path / "requirements.txt").write_text("numpy==2.0\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="pins no torch"):
        torch_build.pinned_torch(tmp_path / "requirements.txt")


def test_an_installed_pinned_torch_is_kept_without_touching_pip() -> None:
    """What `make` prints on every run once set up: one line, no network, no pip."""
    result = subprocess.run([sys.executable, "-m", "tests.torch_build"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("torch 2.13.0") and result.stdout.rstrip().endswith(
        "is installed (TORCH=cpu or TORCH=cuda installs another build)"), result.stdout
