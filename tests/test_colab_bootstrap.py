"""The Colab bootstrap cell: the same everywhere and pinned to a release tag.

Every chapter notebook's first code cell is ``tests.bootstrap.bootstrap_source()``: in Colab (or any environment
without ``ptlabs``) it pip-installs ``ptlabs`` from the book's repository at the tag ``v<version>``.
That it works in a fresh environment is proved by tests/test_run_all.py, which runs every notebook there.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.bootstrap import BOOTSTRAP_TAG, book_config, bootstrap_source, ptlabs_version
from tests.manifest import ROOT, notebooks_on_disk

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
