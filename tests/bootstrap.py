"""The canonical first code cell of every notebook: install `ptlabs` in Colab or a fresh venv.

It installs `ptlabs[book]` (the helper package plus the few packages chapters use that Colab
lacks) from the book's GitHub repository at the branch the launch buttons open (`repository.branch`
in _config.yml), so the notebook a reader opens and the helpers it installs are the same version.
It runs only when `ptlabs` is missing, and pip leaves an installed torch alone because `ptlabs`
accepts any torch >= 2.1. A failed install says what to do. `PTLABS_PIP_SOURCE` overrides the
source, which is how the tests install from the local checkout.
"""

from __future__ import annotations

import tomllib
import yaml

from tests.manifest import ROOT

BOOTSTRAP_TAG = "bootstrap"


def book_config() -> dict:
    """The Jupyter Book configuration (_config.yml), where the title and the repository are written once."""
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def repository_url() -> str:
    """The repository URL from _config.yml, the one place it is written."""
    return book_config()["repository"]["url"].rstrip("/")


def launch_ref() -> str:
    """The git reference the launch buttons open (and the bootstrap installs from)."""
    return book_config()["repository"]["branch"]


def ptlabs_version() -> str:
    """The package version from pyproject.toml; releases are tagged v<version>."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def bootstrap_source() -> str:
    """The exact source of the bootstrap cell for the current repository URL and branch."""
    source = f"ptlabs[book] @ git+{repository_url()}@{launch_ref()}"
    return (
        "# Colab or a fresh environment: install the book's helper package (and the few\n"
        "# packages chapters use that Colab lacks) when it is missing; torch is kept.\n"
        "import importlib.util, os, subprocess, sys\n"
        "\n"
        f'PTLABS = "{source}"\n'
        'if importlib.util.find_spec("ptlabs") is None:\n'
        '    source = os.environ.get("PTLABS_PIP_SOURCE", PTLABS)\n'
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet", source]\n'
        "    if subprocess.run(pip).returncode != 0:\n"
        "        raise RuntimeError(\n"
        '            f"pip could not install {source}: check the internet connection "\n'
        '            "and run this cell again, or run: pip install " + repr(source)\n'
        "        )"
    )
