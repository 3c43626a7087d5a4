"""Precomputed states of an interactive explorer, readable on the website with no network.

A live ipywidgets control needs a kernel; on the static website it would be a control that does
nothing. Chapters therefore compute a handful of the explorer's states in the notebook and show
them with :func:`show_states`: one row of choices and the chosen state below, like the live
explorer. It is plain HTML and CSS (radio buttons and the ``:checked`` selector): no JavaScript, no
CDN. Where CSS is off, every state shows, one after the other. Where the live explorer draws a
figure, each state carries its own, embedded as a PNG.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["show_states", "StatesView"]

#: The look of the choices. Ids are scoped per view, so two explorers on one page switch separately.
_STYLE = (
    "#{id} > input {{position: absolute; opacity: 0;}}"
    "#{id} > label {{display: inline-block; margin: 0 .3rem .3rem 0; padding: .1rem .5rem; cursor: pointer;"
    " border: 1px solid #8a8a8a; border-radius: .3rem; font-family: monospace; font-size: .9em;}}"
    "#{id} > input:focus-visible + label, #{id} > label:hover {{outline: 2px solid #4c72b0;}}"
    "#{id} > .ptlabs-state {{display: none;}}"
    ".ptlabs-states img {{max-width: 100%;}}"  # a class rule: the site's phone layout may widen it
)


def _png(figure: Figure) -> str:
    """The figure as a base64 PNG, and closed so that Jupyter does not draw it a second time."""
    import matplotlib.pyplot as plt  # only when a state has a figure

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


class StatesView:
    """Labelled text states (each with an optional figure); Jupyter and the website render its HTML, a
    console its text."""

    def __init__(self, states: Mapping[str, str], figures: Mapping[str, Figure] | None = None) -> None:
        if not states:
            raise ValueError("show_states() needs at least one state to show")
        unknown = sorted(set(figures or {}) - set(states))
        if unknown:
            raise ValueError(f"figures for states that do not exist: {unknown}; the states are {list(states)}")
        self.states = dict(states)
        self.figures = {label: _png(figure) for label, figure in (figures or {}).items()}
        # Stable across runs (the committed output is compared): derived from the labels, not random.
        self.id = "ptlabs-states-" + hashlib.sha1("\0".join(self.states).encode()).hexdigest()[:10]

    def _panel(self, index: int, label: str, text: str) -> str:
        figure = self.figures.get(label)
        image = (f"<img src='data:image/png;base64,{figure}' alt='{html.escape(label, quote=True)}: the figure the "
                 "live explorer draws for this state'>") if figure else ""
        return (f"<div class='ptlabs-state' id='{self.id}-state-{index}'><p><code>{html.escape(label)}</code></p>"
                f"<pre>{html.escape(text)}</pre>{image}</div>")

    def _repr_html_(self) -> str:
        choices, shown = [], []
        for index, label in enumerate(self.states):
            checked = " checked" if index == 0 else ""
            choices.append(f"<input type='radio' name='{self.id}' id='{self.id}-{index}'{checked}>"
                           f"<label for='{self.id}-{index}'>{html.escape(label)}</label>")
            shown.append(f"#{self.id}-{index}:checked ~ #{self.id}-state-{index} {{display: block;}}"
                         f"#{self.id}-{index}:checked + label {{background: #4c72b0; color: #fff;}}")
        panels = [self._panel(index, label, text) for index, (label, text) in enumerate(self.states.items())]
        style = _STYLE.format(id=self.id) + "".join(shown)
        return (f"<div class='ptlabs-states' id='{self.id}'><style>{style}</style>"
                + "".join(choices) + "".join(panels) + "</div>")

    def __repr__(self) -> str:
        return "\n\n".join(f"--- {label}\n{text}" + ("\n(with a figure)" if label in self.figures else "")
                           for label, text in self.states.items())


def show_states(states: Mapping[str, str], figures: Mapping[str, Figure] | None = None) -> StatesView:
    """Return a view of ``{label: text}``; as a cell's last expression it shows one state at a time, with
    a choice of states above it. ``figures`` gives some or all states the figure the live explorer draws."""
    return StatesView(states, figures)
