"""The Colab bootstrap cell: the same everywhere, pinned to a release tag, and it works in a fresh environment.

Every chapter notebook's first code cell is ``tests.bootstrap.bootstrap_source()``: in Colab (or any environment
without ``ptlabs``) it pip-installs ``ptlabs`` from the book's repository at the tag ``v<version>``.

The end-to-end test rebuilds that situation cheaply: a new virtual environment whose site-packages
links every entry of the running environment's site-packages (torch, Jupyter, nbval, pip...) except
``ptlabs``. Chapter 01 then runs there under nbval, with ``PTLABS_PIP_SOURCE`` pointing at a copy of
this checkout, so the bootstrap cell installs ``ptlabs`` from local files instead of GitHub. Afterwards
``ptlabs`` is installed in the new environment and torch is still the linked one, same version: pip
did not reinstall it.

Building ``ptlabs`` needs ``setuptools>=68`` (pyproject.toml's build backend), which pip installs into an
isolated build environment from the package index it is configured with (PyPI, or a local mirror); with
no index at all, ``pip install --no-build-isolation`` and an installed setuptools would be needed.
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

import nbformat
import pytest
import torch

from tests.bootstrap import BOOTSTRAP_TAG, book_config, bootstrap_source, ptlabs_version
from tests.manifest import ROOT, notebooks_on_disk

CHAPTER_01 = ROOT / "notebooks" / "01_tensors.ipynb"
RUN_TIMEOUT_S = 300
# pip settings that would make the bootstrap reinstall what is already there: through the links, that
# would rewrite the running environment's own packages. They are removed from the test's environment.
PIP_REINSTALL_SETTINGS = ("PIP_FORCE_REINSTALL", "PIP_IGNORE_INSTALLED", "PIP_UPGRADE", "PIP_UPGRADE_STRATEGY")
PIN = re.compile(r'"ptlabs @ git\+(?P<url>[^"@\s]+)@(?P<ref>[^"\s]+)"')


def _first_code_cell(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    cell = next((c for c in nb.cells if c.cell_type == "code"), None)
    assert cell is not None, f"{path.relative_to(ROOT)} has no code cell"
    return cell


# --------------------------------------------------------------------------- the cell itself


def _check_pin(source: str, where: str) -> None:
    """The cell installs from _config.yml's repository, at the tag v<version of pyproject.toml>."""
    match = PIN.search(source)
    assert match, f"{where}: no `ptlabs @ git+<url>@<ref>` requirement in the bootstrap cell:\n{source}"
    repository = book_config()["repository"]
    assert match["url"] == repository["url"].rstrip("/"), (
        f"{where}: installs from {match['url']}, not from _config.yml's repository.url {repository['url']}"
    )
    assert match["ref"] == f"v{ptlabs_version()}", f"{where}: pins {match['ref']!r}; the release tag is 'v{ptlabs_version()}'"
    assert match["ref"] != repository.get("branch", "main"), f"{where}: pins the branch, not a tag"


def test_bootstrap_pins_the_release_tag_of_the_configured_repository() -> None:
    _check_pin(bootstrap_source(), "tests/bootstrap.py")


@pytest.mark.parametrize("notebook", notebooks_on_disk())
def test_first_code_cell_is_the_bootstrap(notebook: str) -> None:
    cell = _first_code_cell(ROOT / notebook)
    if PIN.search(cell.source):
        _check_pin(cell.source, notebook)
    assert cell.source == bootstrap_source(), (
        f"{notebook}: the first code cell is not the canonical bootstrap; "
        f"run `python -m tests.refresh {notebook}` to fix it"
    )
    tags = set(cell.metadata.get("tags", []))
    assert {BOOTSTRAP_TAG, "nbval-ignore-output"} <= tags, f"{notebook}: bootstrap cell tags are {sorted(tags)}"


def test_how_to_use_names_the_current_release_tag() -> None:
    text = (ROOT / "book" / "how_to_use.md").read_text(encoding="utf-8")
    tags = set(re.findall(r"\bv\d+\.\d+\.\d+\b", text))
    assert tags == {f"v{ptlabs_version()}"}, f"book/how_to_use.md names the tags {sorted(tags)}; the release is v{ptlabs_version()}"


# --------------------------------------------------------------------------- a fresh environment


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


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A venv with everything of the running one but ptlabs; returns (venv, its python, its site-packages)."""
    source_site = Path(sysconfig.get_paths()["purelib"])
    assert Path(torch.__file__).parent.parent == source_site, (
        f"torch is not in {source_site}; run the tests with the environment that has torch installed"
    )
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = _purelib(python)
    assert site != source_site and site.is_relative_to(venv), f"the new venv's site-packages is {site}"
    for entry in source_site.iterdir():
        if _belongs_to_ptlabs(entry.name) or entry.name == "__pycache__" or (site / entry.name).exists():
            continue
        (site / entry.name).symlink_to(entry)
    missing = subprocess.run(
        [str(python), "-c", "import ptlabs"], cwd=venv, env=_clean_env(venv), capture_output=True, text=True
    )
    assert missing.returncode != 0 and "No module named 'ptlabs'" in missing.stderr, (
        f"ptlabs is importable in the fresh venv before the bootstrap ran:\n{missing.stdout}{missing.stderr}"
    )
    return venv, python, site


def test_chapter_01_bootstraps_ptlabs_in_a_fresh_environment(
    fresh_venv: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    venv, python, site = fresh_venv
    assert CHAPTER_01.is_file(), f"{CHAPTER_01.relative_to(ROOT)} is missing"
    before = {p.name for p in site.iterdir()}

    checkout = tmp_path / "checkout"  # pip builds in the source folder: keep build/ and *.egg-info out of the repo
    shutil.copytree(ROOT, checkout, ignore=_ignore_for_copy)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(CHAPTER_01, run / CHAPTER_01.name)
    # an ini file of its own, so the repository's pytest settings and rootdir stay out of this run
    (run / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")

    env = _clean_env(venv)
    env["PTLABS_PIP_SOURCE"] = str(checkout)
    command = [
        str(python), "-m", "pytest", "-c", str(run / "pytest.ini"), "-q",
        "--nbval", "--nbval-current-env",  # the kernel is the interpreter running pytest: the fresh venv's
        "--nbval-sanitize-with", str(ROOT / "tests" / "sanitize.cfg"),
        "-p", "tests.conftest",  # the project's plugin: skips cells tagged `gpu` without CUDA
        str(run / CHAPTER_01.name),
    ]  # fmt: skip
    # cwd=ROOT makes the `tests` package importable for -p; the kernel itself runs in `run`
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    report = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)
    first_failure = report[max(report.find("= FAILURES ="), 0) :][:8000]  # the first failing cells, in full
    assert result.returncode == 0, (
        f"nbval in the fresh venv failed:\n{first_failure}\n...\n{report[-1500:]}\n{result.stderr[-2000:]}"
    )

    probe = subprocess.run(
        [str(python), "-c",
         "import json, importlib.metadata as md, ptlabs, torch;"
         "print(json.dumps({'ptlabs': ptlabs.__file__, 'ptlabs_version': md.version('ptlabs'),"
         " 'torch': torch.__file__, 'torch_version': torch.__version__}))"],
        cwd=run, env=_clean_env(venv), capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = json.loads(probe.stdout)
    assert Path(found["ptlabs"]).parent == site / "ptlabs", f"ptlabs was imported from {found['ptlabs']}"
    assert found["ptlabs_version"] == ptlabs_version()
    assert not (site / "ptlabs").is_symlink()

    assert Path(found["torch"]) == site / "torch" / "__init__.py", f"torch was imported from {found['torch']}"
    assert found["torch_version"] == torch.__version__
    torch_entries = [p for p in site.iterdir() if p.name == "torch" or re.fullmatch(r"torch-.*\.dist-info", p.name)]
    assert len(torch_entries) == 2 and all(p.is_symlink() for p in torch_entries), (
        f"torch was reinstalled: {[(p.name, p.is_symlink()) for p in torch_entries]}"
    )
    added = {p.name for p in site.iterdir()} - before
    assert added and all(_belongs_to_ptlabs(n) or n == "__pycache__" for n in added), (
        f"the bootstrap installed more than ptlabs: {sorted(added)}"
    )
