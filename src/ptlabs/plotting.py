"""One plotting style for every figure in the book, so pages look alike."""

from __future__ import annotations

import matplotlib as mpl

__all__ = ["use_book_style"]

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
