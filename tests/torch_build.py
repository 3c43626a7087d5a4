"""Which torch build `make setup` installs: the CPU build without an NVIDIA GPU, the default CUDA build with one.

Why a choice at all: on Linux, PyPI's torch is the CUDA build, about 5 GB installed with its NVIDIA libraries
and triton, which a machine without an NVIDIA GPU never uses; PyTorch's CPU index has a build of the same
release that installs in 0.75 GB. The choice is printed, and ``TORCH=cpu|cuda`` overrides it (``make book TORCH=cpu``).

The set-up must not depend on reaching PyTorch's index: when it cannot be reached, pip takes torch from its
other indexes (a CUDA build on PyPI, which runs on the CPU too) and the message says so.

Runs with the new virtual environment's Python before anything else is installed: standard library only.
Usage: ``python -m tests.torch_build [--choice auto|cpu|cuda]``.
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
import urllib.request
from importlib import metadata
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CHOICES = ("auto", "cpu", "cuda")
REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


def pinned(name: str, requirements: Path = REQUIREMENTS) -> str | None:
    """requirements.txt's ``name==X`` line without its comment, or None. The standard library reads it:
    `make torch` runs before pip has installed anything."""
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if re.match(rf"{re.escape(name)}\s*==", line, re.IGNORECASE):
            return line.split("#", 1)[0].strip()
    return None


def pinned_torch(requirements: Path = REQUIREMENTS) -> str:
    """The torch line of requirements.txt (``torch==2.13.0``): one pin, read where it is kept."""
    pin = pinned("torch", requirements)
    if pin is None:
        raise SystemExit(f"error: {requirements} pins no torch (a line 'torch==X.Y.Z' is expected)")
    return pin


def has_nvidia_gpu() -> bool:
    """An NVIDIA GPU the driver sees: `nvidia-smi -L` lists one (the driver's own tool, present with any driver)."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU " in listed.stdout


def reachable(url: str, timeout: float = 10) -> bool:
    """Whether an index answers: a few seconds to ask, instead of pip's minutes of retries."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status < 400
    except (OSError, ValueError):
        return False


def decide(choice: str, system: str, gpu: bool) -> str:
    """The build to install: ``cpu``, ``cuda`` or ``default`` (macOS and Windows: PyPI's one build)."""
    if choice not in CHOICES:
        raise SystemExit(f"error: TORCH={choice!r}: use one of {', '.join(CHOICES)} (auto picks by the GPU)")
    if system != "Linux":
        return "default"  # macOS: CPU and MPS in one wheel; Windows: PyPI's wheel is the CPU build
    if choice == "auto":
        return "cuda" if gpu else "cpu"
    return choice


def pip_command(python: str, build: str, pin: str, cpu_index_reachable: bool) -> list[str]:
    """The pip command that installs ``pin`` as ``build``.

    The CPU index is an *extra* index: pip still sees its other indexes, and of the CPU build ``2.13.0+cpu`` and
    PyPI's ``2.13.0`` it takes the CPU one, because a local version label sorts above the bare release.
    """
    command = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if build == "cpu" and cpu_index_reachable:
        command += ["--extra-index-url", CPU_INDEX]
    return [*command, pin]


def describe(build: str, gpu: bool, cpu_index_reachable: bool, overridden: bool) -> str:
    """One line saying what will be installed and why."""
    why = "as TORCH says" if overridden else ("an NVIDIA GPU was found" if gpu else "no NVIDIA GPU was found")
    if build == "default":
        return f"torch: PyPI's build for {platform.system()} (the one build there)"
    if build == "cuda":
        return f"torch: the CUDA build from PyPI ({why}; override with TORCH=cpu)"
    if cpu_index_reachable:
        return f"torch: the CPU build from {CPU_INDEX} ({why}; override with TORCH=cuda)"
    return (f"torch: the CPU build was chosen ({why}), but {CPU_INDEX} cannot be reached from here: pip takes "
            "torch from its configured indexes (on PyPI, the CUDA build, about 5 GB installed, which also runs on a CPU)")


def installed_build(version: str) -> str:
    """``cpu`` for a ``+cpu`` version, ``cuda`` for a ``+cuXYZ`` or PyPI's bare Linux version."""
    local = version.partition("+")[2]
    return "cpu" if local == "cpu" else "cuda" if local.startswith("cu") or not local else local


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--choice", default="auto", help="auto (by the GPU), cpu or cuda")
    args = parser.parse_args(argv)
    pin = pinned_torch()
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        version = None
    gpu = has_nvidia_gpu()
    build = decide(args.choice, platform.system(), gpu)
    wanted_release = pin.split("==", 1)[1]
    if version is not None and version.partition("+")[0] == wanted_release and (
        args.choice == "auto" or build == "default" or installed_build(version) == build
    ):
        print(f"torch {version} is installed (TORCH=cpu or TORCH=cuda installs another build)")
        return 0
    index_ok = build == "cpu" and reachable(CPU_INDEX + "/torch/")
    print(describe(build, gpu, index_ok, overridden=args.choice != "auto"), flush=True)
    subprocess.run(pip_command(sys.executable, build, pin, index_ok), check=True)
    got = metadata.version("torch")
    if build in ("cpu", "cuda") and installed_build(got) != build:
        print(f"note: pip installed torch {got}, not the {build} build: its configuration (an index or "
              "find-links) offered that one")
    else:
        print(f"torch {got} installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
