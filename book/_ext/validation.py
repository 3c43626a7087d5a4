"""Every chapter page says what it was validated with, and the execution-status page lists the last run.

* Under each notebook page's title: the torch version, the date and the device of its committed outputs,
  read at build time from the notebook's ``metadata.ptlabs`` (written by ``make refresh``).
* The ``{execution-status}`` directive (book/status.md) renders ``_build/execution-status.json``, which
  the last pytest run over the notebooks wrote: each notebook's kernel time against its budget and the
  outcome of its cells. Nothing in either is typed by hand.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import nbformat
from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

STATUS = Path("_build") / "execution-status.json"
MANIFEST = Path("tests") / "notebooks.toml"
STATUS_PAGE = "book/status"


def validation_line(app: Sphinx, doctree: nodes.document) -> None:
    """Insert "Outputs validated with torch X on cpu, refreshed DATE" under a notebook page's title."""
    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb" or not app.env.docname.startswith("notebooks/"):
        return  # chapters only: a lab page is the student version, whose outputs are cleared
    stamp = nbformat.read(source, as_version=4).metadata.get("ptlabs")
    section = next(iter(doctree.findall(nodes.section)), None)
    if not stamp or section is None:
        return
    line = nodes.paragraph(classes=["ptlabs-validated"])
    line += nodes.emphasis(
        text=f"Outputs validated with torch {stamp['torch']} on {stamp['device']}, "
        f"refreshed {stamp['refreshed']}. "
    )
    link = addnodes.pending_xref(
        "", refdomain="std", reftype="doc", reftarget=f"/{STATUS_PAGE}", refexplicit=True
    )
    link += nodes.inline(text="Execution status of every notebook")
    line += link
    section.insert(1, line)  # after the title


class ExecutionStatus(SphinxDirective):
    """A table of the last test run's notebook results, or a note that this checkout has none."""

    def run(self) -> list[nodes.Node]:
        root = Path(self.env.srcdir)
        self.env.note_dependency(str(root / STATUS))
        manifest = tomllib.loads((root / MANIFEST).read_text(encoding="utf-8"))["notebooks"]
        if not (root / STATUS).is_file():
            text = ["No test run is recorded in this build. Run `make test`, then `make book`."]
        else:
            text = self.table(json.loads((root / STATUS).read_text(encoding="utf-8")), manifest)
        container = nodes.container()
        self.state.nested_parse(StringList(text), self.content_offset, container)
        return container.children

    @staticmethod
    def table(record: dict, manifest: dict) -> list[str]:
        lines = [
            f"Last run: {record['date']}, torch {record['torch']}, Python {record['python']}, "
            f"on {record['device']}.",
            "",
            "| notebook | result | cells passed / failed / skipped | kernel CPU time | budget | wall time |",
            "|---|---|---|---|---|---|",
        ]
        for path in manifest:
            entry = record["notebooks"].get(path)
            if entry is None:
                lines.append(f"| `{path}` | not run in the last test run | | | | |")
                continue
            cells = entry["cells"]
            counts = f"{cells.get('passed', 0)} / {cells.get('failed', 0)} / {cells.get('skipped', 0)}"
            cpu = entry.get("cpu_seconds")  # a record from before CPU budgets has none
            cpu_time = "not recorded" if cpu is None else f"{cpu:.1f} s"
            lines.append(
                f"| `{path}` | {entry['result']} | {counts} | {cpu_time} "
                f"| {entry['budget_s']:.0f} s | {entry['seconds']:.1f} s |"
            )
        return lines


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", validation_line)
    app.add_directive("execution-status", ExecutionStatus)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
