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
from collections.abc import Callable, Iterator
from typing import TypeVar

Result = TypeVar("Result")


class ReadingTooLong(BaseException):
    """The grader spent its whole budget reading one submission's code.

    A ``BaseException``, as ``KeyboardInterrupt`` is (round 56): it stops the reading wherever it is, and no ``except
    Exception`` in the reading, or in the code it calls, can take it for an ordinary failure, swallow it and carry on
    with an answer that a cache keeps for every later student.
    """


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


def to_the_end(function: Callable[[], Result]) -> Result:
    """``function()``, run on a thread of its own, where neither the budget nor a deep reading can stop it halfway.

    Why (round 56): the code policy imports the modules a chain of attributes names (``torch._dynamo`` is imported
    on first use). The budget's stop raised inside ``import torch`` left a partly initialised torch in the grader's
    process, and every later student whose code named ``torch.`` anything ended unprocessed. Python runs signal
    handlers on its main thread only, and a new thread starts with an empty stack, so the call runs to its end
    (the import completes, or fails as a whole) and the budget's stop is raised in the caller once it has: an
    import costs its CPU once per process, and only the installed packages' code runs there. What the call raised
    is raised again in the caller.
    """
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # noqa: BLE001  (raised again in the caller, below)
            outcome["error"] = error

    worker = threading.Thread(target=run, name="ptgrader-reading", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
