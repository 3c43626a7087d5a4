"""The Colab-like environment every notebook runs in during `make test`: what a learner's fresh runtime has.

Jupyter's and Colab's Run All ignore cell tags, so this is how learners meet the notebooks. The
validation (nbval, strict) runs every chapter and lab source once, in a kernel that lives in a new
virtual environment whose site-packages links, from a base environment, only COLAB_PREINSTALLED and what
those need. The base is Colab's Python where it can be (:func:`choose_base`): the running environment when
it runs 3.12, else .venv-colab when `make colab-base` built it, else the running environment, and the
report's header says which. Before any notebook runs, the notebooks' own bootstrap cell is executed there as a
script: it must install ``ptlabs[book]`` (from a copy of this checkout, through ``PTLABS_PIP_SOURCE``,
instead of GitHub) and leave torch as it is (:func:`check_the_bootstrap_installed_only_ptlabs`).

pandas is preinstalled in Colab but is not in the book's stack and no chapter uses it; the test's set is
therefore Colab's minus pandas, which can only make the test stricter. Building ``ptlabs`` needs
``setuptools>=68``, which pip installs into an isolated build environment from its configured index.

Used by tests/colab_plugin.py (the ``--colab-like`` option), which builds one in the background.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.bootstrap import bootstrap_source, ptlabs_version
from tests.manifest import ROOT

# pip settings that would make the bootstrap reinstall what is already there: through the links, that
# would rewrite the running environment's own packages. They are removed from the test's environment.
PIP_REINSTALL_SETTINGS = ("PIP_FORCE_REINSTALL", "PIP_IGNORE_INSTALLED", "PIP_UPGRADE", "PIP_UPGRADE_STRATEGY")


def _purelib(python: Path | str) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


#: What a fresh Colab runtime has that the notebooks may rely on (plus pip, which the bootstrap runs).
COLAB_PREINSTALLED = ("torch", "numpy", "matplotlib", "ipywidgets", "ipykernel", "scikit-learn", "tqdm", "pip")
#: The Python a Colab runtime runs.
COLAB_PYTHON = "3.12"
#: Colab's Python with COLAB_PREINSTALLED, built by `make colab-base` (tests/colab_base.py). Optional: used when
#: present and the running Python is not Colab's.
COLAB_BASE = ROOT / ".venv-colab"


@dataclass(frozen=True)
class Base:
    """The interpreter whose installed packages the Colab-like venv links, and what it links from there."""

    python: Path
    version: str  # its Python version
    site: Path
    torch: str  # torch's version, from its metadata (PyPI's CUDA build has no local label there)
    entries: tuple[str, ...]  # COLAB_PREINSTALLED and what it needs, as top-level site-packages names
    why: str

    def describe(self) -> str:
        return f"Python {self.version} ({self.why}) and torch {self.torch}"


def _inspect(python: Path, why: str) -> Base:
    """Ask ``python`` itself what its site-packages holds: its own metadata and markers decide."""
    out = subprocess.run(
        [str(python), "-I", str(Path(__file__).with_name("colab_closure.py")), *COLAB_PREINSTALLED],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, f"{python} cannot serve as the Colab-like base: {out.stderr.strip()}"
    found = json.loads(out.stdout)
    site = Path(found["site"])
    assert Path(found["torch_folder"]).parent == site, f"{python}'s torch is not in its site-packages {site}"
    return Base(python, found["python"], site, found["torch"], tuple(found["entries"]), why)


def choose_base() -> Base:
    """Colab's Python when the running one is not: .venv-colab when `make colab-base` built it."""
    running = Path(sys.executable)
    if ".".join(map(str, sys.version_info[:2])) == COLAB_PYTHON:
        return _inspect(running, "Colab's, the running environment's")
    colab_python = COLAB_BASE / "bin" / "python"
    if colab_python.exists():
        version = subprocess.run([str(colab_python), "-c", "import platform; print(platform.python_version())"],
                                 capture_output=True, text=True, timeout=60).stdout.strip()
        assert version.startswith(f"{COLAB_PYTHON}."), (
            f"{COLAB_BASE} holds Python {version or '(none that runs)'}, not Colab's {COLAB_PYTHON}: remove it and "
            "run `make colab-base` again"
        )
        return _inspect(colab_python, f"Colab's, from {COLAB_BASE.name}")
    return _inspect(running, f"the running environment's; Colab runs {COLAB_PYTHON}, which `make colab-base` adds")


#: What the bootstrap may add: ptlabs and its `book` extra.
BOOTSTRAP_ADDS = (
    "ptlabs", "ptchecks", "safetensors",  # ptchecks: installed with ptlabs (the labs call it)
    "opt_einsum", "torchviz",
    "graphviz",  # what torchviz needs
    "onnx",  # onnx, onnxscript, onnx_ir, onnxruntime: chapter 06's export to ONNX and its check in ONNX Runtime
    "ml_dtypes", "flatbuffers", "protobuf", "google",  # what the ONNX stack needs (google: protobuf's package)
)


def _belongs_to_bootstrap(name: str) -> bool:
    """ptlabs and its extra (package, dist-info, an editable install's .pth / finder module)."""
    lowered = name.lower().replace("-", "_")
    return any(lowered.startswith(added) or f"_{added}" in lowered for added in BOOTSTRAP_ADDS)


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", *PIP_REINSTALL_SETTINGS)}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _ignore_for_copy(folder: str, names: list[str]) -> set[str]:
    """What a fresh clone would not have: VCS data, virtual environments, build outputs, caches."""
    skip = {".git", "_build", "build", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", "gradebook.db"}
    return {
        n for n in names
        if n in skip or n.endswith(".egg-info") or (Path(folder, n) / "pyvenv.cfg").exists()
    }


#: What the venv's site-packages held before the bootstrap ran, and the linked torch's version: for a later check.
LINKED = "linked.json"


class FreshVenv:
    """A venv of the base's Python holding only Colab's preinstalled set (linked from the base), and a copy of
    this checkout to install from."""

    def __init__(self, root: Path, base: Base) -> None:
        subprocess.run([str(base.python), "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
        self._locate(root)
        assert self.site != base.site and self.site.is_relative_to(self.venv), f"the venv's site is {self.site}"
        for entry in base.entries:
            if (base.site / entry).exists() and not (self.site / entry).exists():
                (self.site / entry).symlink_to(base.site / entry)
        self.linked = {p.name for p in self.site.iterdir()}
        self.torch = base.torch
        (root / LINKED).write_text(json.dumps({"names": sorted(self.linked), "torch": self.torch}), encoding="utf-8")
        shutil.copytree(ROOT, self.checkout, ignore=_ignore_for_copy)

    @classmethod
    def reopen(cls, root: Path) -> FreshVenv:
        """The environment an earlier :meth:`__init__` built under ``root`` (another process may have built it)."""
        fresh = cls.__new__(cls)
        fresh._locate(root)
        linked = json.loads((root / LINKED).read_text(encoding="utf-8"))
        fresh.linked, fresh.torch = set(linked["names"]), linked["torch"]
        return fresh

    def _locate(self, root: Path) -> None:
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        self.site = _purelib(self.python)
        self.checkout = root / "checkout"  # pip builds in the source folder: keep build/ out of the repo
        self.env = _clean_env(self.venv)
        self.env["PTLABS_PIP_SOURCE"] = f"{self.checkout}[book]"

    def run(self, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the fresh venv's python."""
        return subprocess.run(
            [str(self.python), *args], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )


def check_the_bootstrap_installed_only_ptlabs(fresh: FreshVenv) -> None:
    """ptlabs came from the checkout, torch is still the linked one, nothing else was added."""
    probe = fresh.run(
        "-c",
        "import json, importlib.metadata as md, ptlabs, torch;"
        "print(json.dumps({'ptlabs': ptlabs.__file__, 'ptlabs_version': md.version('ptlabs'),"
        " 'torch': torch.__file__, 'torch_version': md.version('torch')}))",
        cwd=fresh.venv,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert Path(found["ptlabs"]).parent == fresh.site / "ptlabs", f"ptlabs was imported from {found['ptlabs']}"
    assert found["ptlabs_version"] == ptlabs_version()
    assert not (fresh.site / "ptlabs").is_symlink()
    assert Path(found["torch"]) == fresh.site / "torch" / "__init__.py", f"torch was imported from {found['torch']}"
    assert found["torch_version"] == fresh.torch, f"torch {found['torch_version']} replaced {fresh.torch}"
    torch_entries = [p for p in fresh.site.iterdir() if p.name == "torch" or re.fullmatch(r"torch-.*\.dist-info", p.name)]
    assert len(torch_entries) == 2 and all(p.is_symlink() for p in torch_entries), (
        f"torch was reinstalled: {[(p.name, p.is_symlink()) for p in torch_entries]}"
    )
    added = {p.name for p in fresh.site.iterdir()} - fresh.linked
    assert added and all(_belongs_to_bootstrap(n) or n == "__pycache__" for n in added), (
        f"the bootstrap installed more than ptlabs[book]: {sorted(added)}"
    )


def build(root: Path, base: Base) -> FreshVenv:
    """Make the environment under ``root`` from ``base`` and run the notebooks' bootstrap cell in it, as a
    learner's first cell.

    Raises AssertionError naming what went wrong; the caller records it so every notebook reports it.
    """
    fresh = FreshVenv(root, base)
    for module in ("ptlabs", "safetensors", "nbformat"):  # nbformat: the dev stack stays out too
        missing = fresh.run("-c", f"import {module}", cwd=fresh.venv)
        assert missing.returncode != 0 and f"No module named '{module}'" in missing.stderr, (
            f"{module} is importable in the Colab-like venv before any bootstrap ran:\n{missing.stderr}"
        )
    ran = fresh.run("-c", bootstrap_source(), cwd=fresh.venv, timeout=600)
    assert ran.returncode == 0, f"the bootstrap cell failed in a fresh environment:\n{ran.stdout}{ran.stderr}"
    check_the_bootstrap_installed_only_ptlabs(fresh)
    return fresh


def write_kernel_spec(jupyter_path: Path, name: str, python: Path, env: dict[str, str]) -> None:
    """A kernel spec that starts ``python``'s ipykernel with ``env`` added to its environment."""
    folder = jupyter_path / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": f"Colab-like ({name})", "language": "python", "env": env}
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
