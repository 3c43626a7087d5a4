"""Colab's form line kept in the notebooks, left off the website.

Every solution cell opens with ``# @title Solution (try the exercise first; ...)``: Colab shows such
a cell as a titled form with its code folded away, which is what a learner trying the exercise
wants. On the website the line means nothing (the solution is already folded by its ``hide-input``
tag), so this extension removes it from each code cell's source as the page is built.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx

#: Colab's form title: the first line of a cell, ``# @title`` and the title.
FORM_TITLE = re.compile(r"\A#\s*@title\b[^\n]*\n?")


def drop_form_titles(app: Sphinx, doctree: nodes.document) -> None:
    """Remove a leading ``# @title`` line from every literal block (the cells' code) of the page."""
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        if FORM_TITLE.match(text):
            block.children = [nodes.Text(FORM_TITLE.sub("", text, count=1))]
            block.rawsource = block.children[0].astext()


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", drop_form_titles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
