"""Ending processes by a list that can change under us (used by the notebook runner of the tests).

Grading kernels do not need this: each runs as PID 1 of its own PID namespace, and one SIGKILL ends
it and everything it started (:meth:`ptgrader.kernels.IsolatedKernelManager.ensure_dead`). A
notebook run outside the grader (``tests/notebook_tools.py``) has no such namespace, so its
leftovers are found by a marker in their environment and killed here.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


class ProcessesSurvived(RuntimeError):
    """Some processes were still alive after every round of killing."""

    def __init__(self, killed: set[int], survivors: set[int]) -> None:
        super().__init__(f"{len(survivors)} process(es) survived SIGKILL: {sorted(survivors)} (killed {len(killed)})")
        self.killed = killed
        self.survivors = survivors


def kill_until_gone(find: Callable[[], set[int]], settle: Callable[[], None], *, rounds: int = 50) -> set[int]:
    """SIGKILL what ``find()`` returns, let ``settle()`` wait for the dead, and repeat until it finds none.

    Repeat, because a process may start another while it is being killed. ``find`` is called once
    per round (not once per process), so a round costs one look at the process list. Returns every
    pid killed; raises :class:`ProcessesSurvived` (naming them) if some are still there after
    ``rounds`` rounds, instead of giving up silently.
    """
    killed: set[int] = set()
    for _ in range(rounds):
        victims = find() - {os.getpid()}
        if not victims:
            return killed
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
        settle()
    survivors = find() - {os.getpid()}
    if survivors:
        raise ProcessesSurvived(killed, survivors)
    return killed
