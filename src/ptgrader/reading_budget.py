"""A CPU budget for the grader's own reading of a submission's code.

The code policy (before the run) and the source rules (after it) read the student's cells in the grader's
process, outside the kernel's time limit. Their cost grows faster than a cell's size: a chain of aliases is
read again once per link, and IPython tokenises a cell again for every magic line in it. A cell of a few
kilobytes cost half a minute, and a large notebook could hold every later student's grading for hours. Past
the budget the reading stops with :class:`ReadingTooLong`, and the grader withholds that submission's
grades for an instructor (see ``GuardedExecute.reading_budget``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class ReadingTooLong(Exception):
    """The grader spent its whole budget reading one submission's code."""


class ReadingTooDeep(Exception):
    """One submission's code nests deeper than Python lets the grader follow (round 53: an attribute chain of 3,500
    links; its report gave Python's raw ``RecursionError``)."""


@contextlib.contextmanager
def cpu_budget(seconds: float) -> Iterator[None]:
    """Raise :class:`ReadingTooLong` inside the block once the process has spent ``seconds`` of CPU in it, and
    :class:`ReadingTooDeep` for code nested past Python's recursion limit.

    A profiling timer (``ITIMER_PROF``) counts the process's CPU time, so a busy machine does not shorten
    the budget. Signals reach Python's main thread only, where nbgrader runs its preprocessors; called
    from any other thread the block runs unbounded (a plain function call, as before).
    """
    if threading.current_thread() is not threading.main_thread():
        with _within_reach():
            yield
        return

    def stop(signum: int, frame: object) -> None:
        raise ReadingTooLong(f"over {seconds:g} s of CPU")

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        with _within_reach():
            yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


@contextlib.contextmanager
def _within_reach() -> Iterator[None]:
    """Raise :class:`ReadingTooDeep` for a ``RecursionError`` of the reading (parsing a tree, or walking it)."""
    try:
        yield
    except RecursionError as error:
        raise ReadingTooDeep(str(error)) from error
