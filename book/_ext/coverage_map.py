"""The coverage map (book/coverage.md): what each chapter and lab already covers, generated at build time.

``{coverage-map}`` lists, in the order of the table of contents, each chapter's numbered sections, its
exercises and its claim keys (one key, one verdict across the book), and each lab's parts, read from the
published notebooks (the labs' student versions: no solution reaches the page). A contributor reads it
before writing, to extend a chapter rather than repeat one, to reuse a claim key where two chapters meet
the same claim, and to keep a chapter's exercise apart from a lab's graded part. Nothing on the page is
typed by hand, so it cannot fall behind the notebooks.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from claims_table import chapter_title, read_claims, section_titles
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

EXERCISE_LABEL = re.compile(r"^:label: (\S+)$", re.MULTILINE)
LAB_PART = re.compile(r"^## (Part .+?)\s*$", re.MULTILINE)


def _chapter(docname: str, nb: nbformat.NotebookNode) -> list[str]:
    """A chapter's entry: link, numbered sections, exercise labels, claim keys."""
    markdown = [cell.source for cell in nb.cells if cell.cell_type == "markdown"]
    exercises = [label for source in markdown for label in EXERCISE_LABEL.findall(source)]
    keys = [claim.key for claim in read_claims(nb)[0]]
    return [
        f"### {chapter_title(nb)}", "", f"Chapter: {{doc}}`/{docname}`.", "",
        *(f"- §{number} {title}" for number, title in section_titles(nb).items()), "",
        f"Exercises: {', '.join(f'`{label}`' for label in exercises) or 'none'}.", "",
        f"Claim keys: {', '.join(f'`{key}`' for key in keys) or 'none'}.", "",
    ]


def _lab(docname: str, nb: nbformat.NotebookNode) -> list[str]:
    """A lab's entry: link and graded parts, from its student version."""
    parts = [part for cell in nb.cells if cell.cell_type == "markdown" for part in LAB_PART.findall(cell.source)]
    return [f"### {chapter_title(nb)}", "", f"Lab: {{doc}}`/{docname}`.", "", *(f"- {part}" for part in parts), ""]


class CoverageMap(SphinxDirective):
    """Every published chapter and lab, in the order of the table of contents."""

    def run(self) -> list[nodes.Node]:
        root = Path(self.env.srcdir)
        published = sorted(self.env.found_docs)  # NN_ and labNN_ prefixes: the table of contents' order
        lines = ["## Chapters", ""]
        for docname in (d for d in published if re.fullmatch(r"notebooks/\d\d_\w+", d)):
            lines += _chapter(docname, self._read(root, docname))
        lines += ["## Labs", ""]
        for docname in (d for d in published if d.startswith("labs/release/")):
            lines += _lab(docname, self._read(root, docname))
        container = nodes.container(classes=["ptlabs-coverage"])
        nested_parse_with_titles(self.state, StringList(lines), container)
        return container.children

    def _read(self, root: Path, docname: str) -> nbformat.NotebookNode:
        path = root / f"{docname}.ipynb"
        self.env.note_dependency(str(path))
        return nbformat.read(path, as_version=4)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("coverage-map", CoverageMap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
