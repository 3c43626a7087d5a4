"""Run All of every notebook in a fresh environment, with no tag honoured, through the Colab bootstrap.

Jupyter's and Colab's Run All ignore cell tags, so this is how learners meet the notebooks: every
chapter and every lab *source* (solutions in) must run top to bottom on a CPU with plain nbclient.
One run serves two checks. The environment is new: a virtual environment whose site-packages links
every entry of the running one (torch, Jupyter, pip...) except ``ptlabs``, so the first notebook's
bootstrap cell must install ``ptlabs`` (from a copy of this checkout, through ``PTLABS_PIP_SOURCE``,
instead of GitHub), and must leave torch as it is.

Building ``ptlabs`` needs ``setuptools>=68`` (pyproject.toml's build backend), which pip installs into an
isolated build environment from the package index it is configured with (PyPI, or a local mirror).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from tests.bootstrap import ptlabs_version
from tests.manifest import ROOT, load_manifest

RUN_TIMEOUT_S = 300
# pip settings that would make the bootstrap reinstall what is already there: through the links, that
# would rewrite the running environment's own packages. They are removed from the test's environment.
PIP_REINSTALL_SETTINGS = ("PIP_FORCE_REINSTALL", "PIP_IGNORE_INSTALLED", "PIP_UPGRADE", "PIP_UPGRADE_STRATEGY")


def _purelib(python: Path | str) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )
    return Path(out.stdout.strip())


def _belongs_to_ptlabs(name: str) -> bool:
    # the package or its dist-info, and an editable install's .pth / finder module (__editable__*ptlabs*)
    return "ptlabs" in name.lower()


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


class FreshVenv:
    """A venv with everything of the running one but ptlabs, and a copy of the checkout to install from."""

    def __init__(self, root: Path) -> None:
        source_site = Path(sysconfig.get_paths()["purelib"])
        assert Path(torch.__file__).parent.parent == source_site, (
            f"torch is not in {source_site}; run the tests with the environment that has torch installed"
        )
        self.venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)], check=True, timeout=120)
        self.python = self.venv / "bin" / "python"
        self.site = _purelib(self.python)
        assert self.site != source_site and self.site.is_relative_to(self.venv), f"the venv's site is {self.site}"
        for entry in source_site.iterdir():
            if _belongs_to_ptlabs(entry.name) or entry.name == "__pycache__" or (self.site / entry.name).exists():
                continue
            (self.site / entry.name).symlink_to(entry)
        self.linked = {p.name for p in self.site.iterdir()}
        self.checkout = root / "checkout"  # pip builds in the source folder: keep build/ out of the repo
        shutil.copytree(ROOT, self.checkout, ignore=_ignore_for_copy)
        self.env = _clean_env(self.venv)

    def run(self, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    venv = FreshVenv(tmp_path_factory.mktemp("fresh"))
    missing = venv.run("-c", "import ptlabs", cwd=venv.venv)
    assert missing.returncode != 0 and "No module named 'ptlabs'" in missing.stderr, (
        f"ptlabs is importable in the fresh venv before any bootstrap ran:\n{missing.stdout}{missing.stderr}"
    )
    venv.env["PTLABS_PIP_SOURCE"] = str(venv.checkout)
    return venv


@pytest.mark.parametrize("notebook", sorted(load_manifest()))
def test_run_all_completes_in_a_fresh_environment(fresh: FreshVenv, notebook: str, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree((ROOT / notebook).parent, folder, ignore=_ignore_for_copy)
    # cwd=ROOT makes the `tests` package importable for the runner; each kernel runs in `folder`
    result = fresh.run("-m", "tests.run_all", str(folder / Path(notebook).name), cwd=ROOT, timeout=RUN_TIMEOUT_S)
    report = re.sub(r"\x1b\[[0-9;]*m", "", result.stderr)  # no terminal colours in the report
    assert result.returncode == 0, f"Run All of {notebook} failed:\n{report[-6000:]}"
    _check_the_bootstrap_installed_only_ptlabs(fresh)


def _check_the_bootstrap_installed_only_ptlabs(fresh: FreshVenv) -> None:
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
    assert added and all(_belongs_to_ptlabs(n) or n == "__pycache__" for n in added), (
        f"the bootstrap installed more than ptlabs: {sorted(added)}"
    )
