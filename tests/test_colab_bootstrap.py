"""The Colab bootstrap cell: the same everywhere, installing from the reference the launch buttons open.

Every notebook's first code cell is ``tests.bootstrap.bootstrap_source()``: in Colab (or any environment
without ``ptlabs``) it pip-installs ``ptlabs[book]`` from the book's repository at ``repository.branch``
of _config.yml, the same branch the Colab launch button opens, so notebook and helpers always match.
That it works in a fresh Colab-like environment is proved by tests/test_run_all.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.bootstrap import BOOTSTRAP_TAG, book_config, bootstrap_source, launch_ref, ptlabs_version
from tests.notebook_tools import BOOTSTRAP_TAGS
from tests.manifest import ROOT, notebooks_on_disk

PIN = re.compile(r'"ptlabs\[book\] @ git\+(?P<url>[^"@\s]+)@(?P<ref>[^"\s]+)"')


def _first_code_cell(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    cell = next((c for c in nb.cells if c.cell_type == "code"), None)
    assert cell is not None, f"{path.relative_to(ROOT)} has no code cell"
    return cell


def _check_pin(source: str, where: str) -> None:
    """The cell installs from _config.yml's repository, at the branch the launch buttons open."""
    match = PIN.search(source)
    assert match, f"{where}: no `ptlabs[book] @ git+<url>@<ref>` requirement in the bootstrap cell:\n{source}"
    repository = book_config()["repository"]
    assert match["url"] == repository["url"].rstrip("/"), (
        f"{where}: installs from {match['url']}, not from _config.yml's repository.url {repository['url']}"
    )
    assert match["ref"] == launch_ref(), (
        f"{where}: installs from {match['ref']!r}, but the launch buttons open {launch_ref()!r} "
        "(repository.branch in _config.yml): a reader would run one version with the helpers of another"
    )


def test_bootstrap_installs_from_the_launch_buttons_reference() -> None:
    _check_pin(bootstrap_source(), "tests/bootstrap.py")


def test_bootstrap_explains_a_failed_install() -> None:
    source = bootstrap_source()
    assert "check=True" not in source and "raise RuntimeError(" in source and "internet connection" in source


@pytest.mark.parametrize("notebook", notebooks_on_disk())
def test_first_code_cell_is_the_bootstrap(notebook: str) -> None:
    cell = _first_code_cell(ROOT / notebook)
    assert cell.source == bootstrap_source(), (
        f"{notebook}: the first code cell is not the canonical bootstrap; "
        f"run `python -m tests.refresh {notebook}` to fix it"
    )
    _check_pin(cell.source, notebook)
    tags = set(cell.metadata.get("tags", []))
    assert set(BOOTSTRAP_TAGS) <= tags, f"{notebook}: bootstrap cell tags are {sorted(tags)}"


def test_how_to_use_names_the_reference_the_bootstrap_installs() -> None:
    text = (ROOT / "book" / "how_to_use.md").read_text(encoding="utf-8")
    assert re.search(r"\bv\d+\.\d+\.\d+\b", text) is None, "book/how_to_use.md names a release tag; there is none"
    assert f"`{launch_ref()}`" in text, f"book/how_to_use.md does not say the bootstrap installs from `{launch_ref()}`"


# ----------------------------------------------------------- what the cell does with what is installed

FAKE_PIP = "import json, os, sys\nwith open(os.environ['PIP_LOG'], 'a') as log:\n    log.write(json.dumps(sys.argv[1:]) + '\\n')\nsys.exit(int(os.environ.get('PIP_STATUS', '0')))\n"


def _run_bootstrap(tmp_path: Path, installed: str | None, *, editable: bool = False, imported: bool = False,
                   pip_status: int = 0) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Run the bootstrap cell as a script beside a fake pip (which logs its arguments) and a fake ptlabs install
    (``-S``: without site-packages, whose own ptlabs would answer first)."""
    site = tmp_path / "site"
    (site / "pip").mkdir(parents=True)
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(FAKE_PIP)
    if installed is not None:
        dist = site / f"ptlabs-{installed}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ptlabs\nVersion: {installed}\n")
        if editable:
            (dist / "direct_url.json").write_text('{"dir_info": {"editable": true}, "url": "file:///src/book"}')
    log = tmp_path / "pip.log"
    prelude = "import sys; sys.modules['ptlabs'] = type(sys)('ptlabs')\n" if imported else ""
    env = {**os.environ, "PYTHONPATH": str(site), "PIP_LOG": str(log), "PIP_STATUS": str(pip_status),
           "PTLABS_PIP_SOURCE": "/the/checkout"}
    ran = subprocess.run([sys.executable, "-S", "-c", prelude + bootstrap_source()], env=env, capture_output=True,
                         text=True, timeout=60)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return ran, calls


UPGRADE = ["install", "--quiet", "--upgrade", "/the/checkout"]


@pytest.mark.parametrize(("installed", "editable", "expected"), [
    (None, False, [UPGRADE]),  # a fresh runtime
    ("0.1.0", False, [UPGRADE]),  # an earlier install, which lacks what this notebook calls
    (ptlabs_version(), False, []),
    ("0.10.0", False, []),  # compared as numbers: 0.10 is later than 0.2
    ("0.1.0", True, []),  # a clone's editable install: its code is the checkout's, whatever its version says
])
def test_the_bootstrap_installs_only_what_is_missing_or_older(tmp_path: Path, installed: str | None,
                                                              editable: bool, expected: list[list[str]]) -> None:
    ran, calls = _run_bootstrap(tmp_path, installed, editable=editable)
    assert ran.returncode == 0, ran.stderr
    assert calls == expected


def test_a_failed_install_says_what_to_do(tmp_path: Path) -> None:
    ran, calls = _run_bootstrap(tmp_path, "0.1.0", pip_status=1)
    assert calls == [UPGRADE] and ran.returncode == 1
    assert "RuntimeError: pip could not install /the/checkout: check the internet connection" in ran.stderr


def test_an_upgrade_under_an_imported_ptlabs_asks_for_a_restart(tmp_path: Path) -> None:
    """The kernel keeps the module it imported: after an upgrade on disk, only a restart loads the new one."""
    ran, calls = _run_bootstrap(tmp_path, "0.1.0", imported=True)
    assert calls == [UPGRADE] and ran.returncode == 1
    assert "ptlabs was upgraded; restart the kernel" in ran.stderr
