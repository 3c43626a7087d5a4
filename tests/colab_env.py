"""The Colab-like environment every notebook runs in during `make test`: what a learner's fresh runtime has.

Jupyter's and Colab's Run All ignore cell tags, so this is how learners meet the notebooks. The
validation (nbval, strict) runs every chapter and lab source once, in a kernel that lives in a new
virtual environment whose site-packages links, from the running environment, only COLAB_PREINSTALLED
and what those need. Before any notebook runs, the notebooks' own bootstrap cell is executed there as a
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
import sysconfig
from importlib import metadata
from pathlib import Path

import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
#: What the bootstrap may add: ptlabs and its `book` extra.
BOOTSTRAP_ADDS = (
    "ptlabs", "ptchecks", "safetensors",  # ptchecks: installed with ptlabs (the labs call it)
    "opt_einsum", "torchviz",
    "graphviz",  # what torchviz needs
    "onnx",  # onnx, onnxscript, onnx_ir, onnxruntime: chapter 06's export to ONNX and its check in ONNX Runtime
    "ml_dtypes", "flatbuffers", "protobuf", "google",  # what the ONNX stack needs (google: protobuf's package)
)


def _closure(roots: tuple[str, ...]) -> set[str]:
    """The installed distributions ``roots`` need, recursively: markers evaluated, extras followed.

    Extras matter: PyPI's CUDA build of torch asks for ``cuda-toolkit[cublas,cudart,...]``, and only those
    extras bring in the NVIDIA libraries, which a Colab runtime has preinstalled beside its torch.
    """
    seen: set[tuple[str, str]] = set()
    todo = [(name, "") for name in roots]
    while todo:
        name, extra = todo.pop()
        name = canonicalize_name(name)
        if (name, extra) in seen:
            continue
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            raise AssertionError(f"{name} is needed for the Colab-like environment but is not installed") from None
        seen.add((name, extra))
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                todo.append((requirement.name, ""))
                todo += [(requirement.name, wanted) for wanted in requirement.extras]
    return {name for name, _ in seen}


def _site_entries(distributions: set[str]) -> set[str]:
    """The top-level names in site-packages that belong to these distributions (packages, modules, dist-info)."""
    entries: set[str] = set()
    for name in distributions:
        for file in metadata.distribution(name).files or []:
            top = file.parts[0]
            if top not in ("..", "__pycache__"):
                entries.add(top)
    return entries


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


#: The names the venv's site-packages held before the bootstrap ran, kept beside it for a later check.
LINKED = "linked.json"


class FreshVenv:
    """A venv holding only Colab's preinstalled set (linked), and a copy of this checkout to install from."""

    def __init__(self, root: Path) -> None:
        source_site = Path(sysconfig.get_paths()["purelib"])
        assert Path(torch.__file__).parent.parent == source_site, (
            f"torch is not in {source_site}; run the tests with the environment that has torch installed"
        )
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
        self._locate(root)
        assert self.site != source_site and self.site.is_relative_to(self.venv), f"the venv's site is {self.site}"
        for entry in sorted(_site_entries(_closure(COLAB_PREINSTALLED))):
            if (source_site / entry).exists() and not (self.site / entry).exists():
                (self.site / entry).symlink_to(source_site / entry)
        self.linked = {p.name for p in self.site.iterdir()}
        (root / LINKED).write_text(json.dumps(sorted(self.linked)), encoding="utf-8")
        shutil.copytree(ROOT, self.checkout, ignore=_ignore_for_copy)

    @classmethod
    def reopen(cls, root: Path) -> FreshVenv:
        """The environment an earlier :meth:`__init__` built under ``root`` (another process may have built it)."""
        fresh = cls.__new__(cls)
        fresh._locate(root)
        fresh.linked = set(json.loads((root / LINKED).read_text(encoding="utf-8")))
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
        " 'torch': torch.__file__, 'torch_version': torch.__version__}))",
        cwd=fresh.venv,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert Path(found["ptlabs"]).parent == fresh.site / "ptlabs", f"ptlabs was imported from {found['ptlabs']}"
    assert found["ptlabs_version"] == ptlabs_version()
    assert not (fresh.site / "ptlabs").is_symlink()
    assert Path(found["torch"]) == fresh.site / "torch" / "__init__.py", f"torch was imported from {found['torch']}"
    assert found["torch_version"] == torch.__version__
    torch_entries = [p for p in fresh.site.iterdir() if p.name == "torch" or re.fullmatch(r"torch-.*\.dist-info", p.name)]
    assert len(torch_entries) == 2 and all(p.is_symlink() for p in torch_entries), (
        f"torch was reinstalled: {[(p.name, p.is_symlink()) for p in torch_entries]}"
    )
    added = {p.name for p in fresh.site.iterdir()} - fresh.linked
    assert added and all(_belongs_to_bootstrap(n) or n == "__pycache__" for n in added), (
        f"the bootstrap installed more than ptlabs[book]: {sorted(added)}"
    )


def build(root: Path) -> FreshVenv:
    """Make the environment under ``root`` and run the notebooks' bootstrap cell in it, as a learner's first cell.

    Raises AssertionError naming what went wrong; the caller records it so every notebook reports it.
    """
    fresh = FreshVenv(root)
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
