"""The canonical first code cell of every notebook: install `ptlabs` in Colab or a fresh venv.

It installs from the book's GitHub repository at the tag of the current `ptlabs` version
(never a moving branch), and only when `ptlabs` is missing. pip leaves an installed torch
alone because `ptlabs` accepts any torch >= 2.1. `PTLABS_PIP_SOURCE` overrides the source,
which is how the tests install from the local checkout.
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


def ptlabs_version() -> str:
    """The package version from pyproject.toml; releases are tagged v<version>."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def bootstrap_source() -> str:
    """The exact source of the bootstrap cell for the current repository URL and version."""
    source = f"ptlabs @ git+{repository_url()}@v{ptlabs_version()}"
    return (
        "# Colab or a fresh environment: install the book's helper package when it is\n"
        "# missing (torch is left as it is).\n"
        "import importlib.util, os, subprocess, sys\n"
        "\n"
        f'PTLABS = "{source}"\n'
        'if importlib.util.find_spec("ptlabs") is None:\n'
        '    source = os.environ.get("PTLABS_PIP_SOURCE", PTLABS)\n'
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet", source]\n'
        "    subprocess.run(pip, check=True)"
    )
