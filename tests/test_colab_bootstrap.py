"""The Colab bootstrap cell: the same everywhere, installing from the reference the launch buttons open.

Every notebook's first code cell is ``tests.bootstrap.bootstrap_source()``: in Colab (or any environment
without ``ptlabs``) it pip-installs ``ptlabs[book]`` from the book's repository at ``repository.branch``
of _config.yml, the same branch the Colab launch button opens, so notebook and helpers always match.
That it works in a fresh Colab-like environment is proved by tests/test_run_all.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.bootstrap import BOOTSTRAP_TAG, book_config, bootstrap_source, launch_ref
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
