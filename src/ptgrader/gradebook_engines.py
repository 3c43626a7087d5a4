"""One SQLAlchemy engine per gradebook in a grading process, so that each of nbgrader's queries is compiled once.

nbgrader opens its gradebook (``nbgrader.api.Gradebook``) about eleven times for each submission it
grades (the converter, its preprocessors, ptgrader's own steps), and each opening creates an engine of
its own. SQLAlchemy keeps compiled statements in the engine, so every query was compiled again at each
opening: on lab 02's class of 39 submissions (2026-12-07), the grading process's own CPU went from
12.3 s to 10.6 s with one engine per gradebook.

Only the compiled statements are kept. A Gradebook still closes as before: its ``close()`` disposes of
the engine's connections, and the next opening connects again, so a gradebook file that the course
record put back (:mod:`ptgrader.course`) is read afresh.
"""

from __future__ import annotations

import threading
from typing import Any

import nbgrader.api
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

_ENGINES: dict[tuple[str, tuple[tuple[str, Any], ...]], Engine] = {}
_LOCK = threading.Lock()


def shared_engine(url: Any, **options: Any) -> Engine:
    """``create_engine(url, **options)``, made once per URL and options in this process."""
    key = (str(url), tuple(sorted(options.items())))
    with _LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = create_engine(url, **options)
        return _ENGINES[key]


def share_gradebook_engines() -> None:
    """Make every ``nbgrader.api.Gradebook`` of this process open its database through :func:`shared_engine`.

    nbgrader offers no setting for its engine: ``Gradebook.__init__`` calls the ``create_engine`` of its
    own module, which this replaces (once; calling it again changes nothing).
    """
    nbgrader.api.create_engine = shared_engine  # type: ignore[attr-defined]
