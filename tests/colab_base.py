"""`make colab-base`: Colab's Python with what a Colab runtime preinstalls, for the Colab-like check.

When the running Python is not Colab's, the check (tests/colab_env.py) links Colab's preinstalled packages
from this environment instead, so the notebooks run under the Python a Colab learner has. Like Colab, it
gets PyPI's default torch: the CUDA build (about 5.7 GB on Linux), which also runs on a CPU, as on a Colab
CPU runtime. Versions are requirements.txt's pins where it has them, so the base differs from the
development environment only in its Python and its torch build.

Optional: `make test` passes without it (then the check says it used the running Python). Run it again
after requirements.txt changes; pip keeps what is already right.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests import torch_build
from tests.colab_env import COLAB_BASE, COLAB_PREINSTALLED, COLAB_PYTHON
from tests.torch_build import REQUIREMENTS

#: What the base needs beyond Colab's set: tests/colab_closure.py reads metadata with it (Colab has it too).
BASE_EXTRAS = ("packaging",)


def pinned(names: tuple[str, ...], requirements: Path = REQUIREMENTS) -> list[str]:
    """``names`` as pip arguments, each at requirements.txt's exact pin where it has one (pip itself never)."""
    return [torch_build.pinned(name, requirements) or name for name in names if name != "pip"]


def colab_python() -> str:
    """The python3.12 on PATH that runs (a pyenv shim may name one that is not enabled), or exit with how to
    get one."""
    found = shutil.which(f"python{COLAB_PYTHON}")
    probe = found and subprocess.run([found, "-c", "import venv"], capture_output=True, text=True, timeout=60)
    if not probe or probe.returncode != 0:
        why = f" ({found} does not run: {probe.stderr.strip().splitlines()[0]})" if probe else ""
        sys.exit(f"error: Colab runs Python {COLAB_PYTHON} and no working python{COLAB_PYTHON} is on PATH{why}. "
                 f"Install it (Debian/Ubuntu: sudo apt-get install python{COLAB_PYTHON}-venv; elsewhere: pyenv "
                 f"install {COLAB_PYTHON}, and with pyenv, PYENV_VERSION=<that version>) and run `make colab-base` "
                 "again.")
    return found


def build(base: Path) -> None:
    """Create ``base`` with Colab's Python when missing, then install Colab's set into it."""
    python = base / "bin" / "python"
    if not python.exists():
        interpreter = colab_python()
        print(f"creating {base.name} with {interpreter} (Colab's Python {COLAB_PYTHON})")
        subprocess.run([interpreter, "-m", "venv", str(base)], check=True)
    wanted = pinned(COLAB_PREINSTALLED + BASE_EXTRAS)
    print(f"installing what Colab preinstalls, with PyPI's default torch build (as Colab has it): {' '.join(wanted)}")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *wanted], check=True)
    print(f"{base.name} is ready: `make test` runs the Colab-like check with its Python")


if __name__ == "__main__":
    build(COLAB_BASE)
