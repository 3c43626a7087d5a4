"""Precomputed states of an interactive explorer, readable on the website with no network.

A live ipywidgets control needs a kernel; on the static website it would be a control that does
nothing. Chapters therefore compute a handful of the explorer's states in the notebook and show
them with :func:`show_states`: plain HTML (``<details>`` blocks, no JavaScript, no CDN).
"""

from __future__ import annotations

import html
from collections.abc import Mapping

__all__ = ["show_states", "StatesView"]


class StatesView:
    """A labelled list of text states; Jupyter and the website render its HTML, a console its text."""

    def __init__(self, states: Mapping[str, str]) -> None:
        if not states:
            raise ValueError("show_states() needs at least one state to show")
        self.states = dict(states)

    def _repr_html_(self) -> str:
        blocks = []
        for index, (label, text) in enumerate(self.states.items()):
            opened = " open" if index == 0 else ""
            blocks.append(
                f"<details class='ptlabs-state'{opened}><summary><code>{html.escape(label)}</code></summary>"
                f"<pre>{html.escape(text)}</pre></details>"
            )
        return "<div class='ptlabs-states'>" + "".join(blocks) + "</div>"

    def __repr__(self) -> str:
        return "\n\n".join(f"--- {label}\n{text}" for label, text in self.states.items())


def show_states(states: Mapping[str, str]) -> StatesView:
    """Return a view of ``{label: text}``; as a cell's last expression it shows every state."""
    return StatesView(states)
