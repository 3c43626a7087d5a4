"""One plotting style for every figure in the book, so pages look alike.

The style is sized for the website's column: 6.4 x 3.6 in at 100 dpi stays under the page's
7 in limit and scales down to a phone without unreadable labels. Figures are drawn with plain
matplotlib in the notebooks; the one helper here draws a :class:`~ptlabs.timing.Comparison`,
because every timing figure must show its spread the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib as mpl

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .timing import Comparison

__all__ = ["plot_comparison", "use_book_style"]

_STYLE = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": "medium",
    "font.size": 10,
    "image.cmap": "viridis",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (readable at the website's width, grid on)."""
    mpl.rcParams.update(_STYLE)


def plot_comparison(comparison: Comparison, *, unit: str = "ms") -> Figure:
    """Horizontal bars: each candidate's median time, with its fastest and slowest round as whiskers.

    The whiskers are the point: two bars whose whiskers overlap are not a clear difference,
    whatever their medians say.
    """
    import matplotlib.pyplot as plt  # pyplot only when a figure is drawn

    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    names = list(comparison.times)
    medians = [comparison.median_time(name) * scale for name in names]
    lows = [m - min(comparison.times[n]) * scale for m, n in zip(medians, names, strict=True)]
    highs = [max(comparison.times[n]) * scale - m for m, n in zip(medians, names, strict=True)]
    fig, ax = plt.subplots(figsize=(6.4, 0.6 + 0.45 * len(names)))
    ax.barh(names, medians, xerr=[lows, highs], capsize=4, color="#4c72b0")
    ax.invert_yaxis()  # the first candidate (the baseline) on top, as in the table
    ax.set_xlabel(f"time per call ({unit}); whiskers: fastest and slowest of {comparison.rounds} rounds")
    ax.set_title(comparison.label)
    ax.set_xlim(0, max(m + h for m, h in zip(medians, highs, strict=True)) * 1.1)
    fig.tight_layout()
    return fig
