"""Number exercises by chapter: "Exercise 2.1" is chapter 02's first exercise, not the book's 8th.

sphinx-exercise numbers exercises through Sphinx's figure numbering, which runs across the whole
book. Once Sphinx has assigned those numbers, this extension renumbers each chapter's exercises as
(chapter, position in the chapter), the chapter being the `NN_` prefix of the notebook's name.
Exercise titles, solution titles ("Solution to Exercise 2.1") and references all read these numbers.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

CHAPTER = re.compile(r"(?:^|/)(\d\d)_[^/]*$")


def renumber(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Rewrite the exercise numbers of every chapter document; return the documents changed."""
    changed = []
    for docname, numbers in env.toc_fignumbers.items():
        chapter = CHAPTER.search(docname)
        exercises = numbers.get("exercise")
        if not chapter or not exercises:
            continue
        in_order = sorted(exercises, key=lambda node_id: exercises[node_id])
        renumbered = {node_id: (int(chapter[1]), k) for k, node_id in enumerate(in_order, start=1)}
        if renumbered != exercises:
            numbers["exercise"] = renumbered
            changed.append(docname)
    return changed


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("env-get-updated", renumber, priority=900)  # after Sphinx assigns figure numbers (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
