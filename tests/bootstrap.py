"""The canonical first code cell of every notebook: install `ptlabs` in Colab or a fresh venv.

It installs `ptlabs[book]` (the helper package plus the few packages chapters use that Colab
lacks) from the book's GitHub repository at the branch the launch buttons open (`repository.branch`
in _config.yml), so the notebook a reader opens and the helpers it installs are the same version.
It runs when `ptlabs` is missing or older than the version in pyproject.toml (a learner's earlier
install lacks what later notebooks call; tests/package_vocabulary.py makes that version move with
it), and leaves an editable install alone (a clone of the book: its code is the checkout's, whatever
its recorded version). pip leaves an installed torch alone because `ptlabs` accepts any torch >= 2.1.
A failed install says what to do; an upgrade in a kernel that had already imported the old `ptlabs`
asks for a restart. `PTLABS_PIP_SOURCE` overrides the source, which is how the tests install from the
local checkout.
"""

from __future__ import annotations

import re
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


def needed_version() -> tuple[int, ...]:
    """The version the bootstrap asks for, as the tuple it compares: pyproject.toml's (major, minor, patch)."""
    return tuple(int(part) for part in re.findall(r"\d+", ptlabs_version())[:3])


def bootstrap_source() -> str:
    """The exact source of the bootstrap cell for the current repository URL, branch and version."""
    source = f"ptlabs[book] @ git+{repository_url()}@{launch_ref()}"
    return (
        "# Colab or a fresh environment: install the book's helper package (and the few\n"
        "# packages chapters use that Colab lacks) when it is missing or older than this\n"
        "# notebook needs; torch is kept, and so is an editable install (a clone).\n"
        "import importlib.metadata, json, os, re, subprocess, sys\n"
        "\n"
        f'PTLABS = "{source}"\n'
        f"NEEDED = {needed_version()}  # this notebook's ptlabs version, or a later one\n"
        "try:\n"
        '    found = importlib.metadata.distribution("ptlabs")\n'
        '    origin = json.loads(found.read_text("direct_url.json") or "{}")\n'
        '    editable = origin.get("dir_info", {}).get("editable", False)\n'
        '    version = tuple(int(n) for n in re.findall(r"\\d+", found.version)[:3])\n'
        "    current = editable or version >= NEEDED\n"
        "except importlib.metadata.PackageNotFoundError:\n"
        "    current = False\n"
        "if not current:\n"
        '    source = os.environ.get("PTLABS_PIP_SOURCE", PTLABS)\n'
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", source]\n'
        "    if subprocess.run(pip).returncode != 0:\n"
        "        raise RuntimeError(\n"
        '            f"pip could not install {source}: check the internet connection "\n'
        '            "and run this cell again, or run: pip install " + repr(source)\n'
        "        )\n"
        '    if "ptlabs" in sys.modules:  # the old version is loaded in this kernel\n'
        "        raise RuntimeError(\n"
        '            "ptlabs was upgraded; restart the kernel (Colab: Runtime > Restart "\n'
        '            "session) and run the notebook again from the top"\n'
        "        )"
    )
