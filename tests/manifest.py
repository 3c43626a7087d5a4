"""Reads tests/notebooks.toml: the one list of notebooks and their time budgets."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = Path(__file__).resolve().parent / "notebooks.toml"


@dataclass(frozen=True)
class NotebookEntry:
    """One validated notebook: its path relative to the repository root and what it may cost."""

    path: str
    budget_s: float


def load_manifest(manifest: Path = MANIFEST) -> dict[str, NotebookEntry]:
    """Return the entries keyed by relative path."""
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    default_budget = data.get("defaults", {}).get("budget_s", 60)
    return {
        path: NotebookEntry(path, float(spec.get("budget_s", default_budget)))
        for path, spec in data["notebooks"].items()
    }


def notebooks_on_disk(root: Path = ROOT) -> list[str]:
    """Chapter notebooks and lab sources present in the tree, as relative paths.

    Jupyter's checkpoints and the `x.nbconvert.ipynb` copies `jupyter nbconvert --execute` leaves
    behind are not notebooks of the book (both are git-ignored), so they are not listed.
    """
    found = [*root.glob("notebooks/*.ipynb"), *root.glob("labs/source/*/*.ipynb")]
    return sorted(
        str(p.relative_to(root))
        for p in found
        if ".ipynb_checkpoints" not in p.parts and not p.name.endswith(".nbconvert.ipynb")
    )


def toc_files(node: object) -> Iterator[str]:
    """Every ``file`` of a parsed _toc.yml (or any part of it), in reading order."""
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from toc_files(item)


def supported_pythons(root: Path = ROOT) -> list[str]:
    """The Python versions pyproject.toml's ``requires-python`` admits ("3.11", ...), where they are declared once."""
    spec = SpecifierSet(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"])
    return [f"3.{minor}" for minor in range(0, 40) if f"3.{minor}" in spec]
