"""Jailed kernels for the tests: started as GuardedExecute starts them, warm or cold, and ended.

Shared by test_autograde_guard.py (what a kernel sees) and test_grading_jail.py (what a kernel keeps
in memory, the system call filter): each needs a live kernel and what it printed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat

from ptgrader import cgroups, jail
from ptgrader.kernels import GraderTemp, IsolatedKernelManager, Isolation

#: Runs one code cell in the live kernel and returns the cell with its outputs.
RunCell = Callable[[str], nbformat.NotebookNode]


@contextlib.contextmanager
def jailed_kernel(course: Path, warm: object = None) -> Iterator[tuple[IsolatedKernelManager, RunCell]]:
    """A jailed kernel for a course at ``course`` (forked by ``warm``, a WarmKernels, or cold), killed after."""
    from nbclient import NotebookClient

    folder = GraderTemp.current().kernel_folder()
    spec = Isolation(str(course)).spec(folder, dict(os.environ))
    km = IsolatedKernelManager(kernel_name="python3")
    km.prepare(folder, spec, warm)
    nb = nbformat.v4.new_notebook()
    client = NotebookClient(nb, km=km, timeout=120, shutdown_kernel="immediate")

    def run(source: str) -> nbformat.NotebookNode:
        nb.cells.append(nbformat.v4.new_code_cell(source))
        return client.execute_cell(nb.cells[-1], len(nb.cells) - 1)

    try:
        with client.setup_kernel():
            yield km, run
    finally:
        km.ensure_dead()
        cgroups.remove(spec.cgroups)


def kernel_lines(log: str) -> list[str]:
    """The lines of a kernel's log as its keeper relays it (each marked ``jail.KERNEL_MARK``), as the kernel wrote
    them."""
    return [line.removeprefix(jail.KERNEL_MARK) for line in log.strip().splitlines()]
