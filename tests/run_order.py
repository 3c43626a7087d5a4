"""The order in which `make test`'s workers take the test files: those that mostly wait first, then the largest.

Loaded as a plugin (``-p tests.run_order`` in pyproject.toml). pytest-xdist's ``--dist loadfile`` hands
each worker whole files, by default the files with the most tests first (``--loadscope-reorder``). A
file of one test that waits out a timeout (``tests/test_launch_timeout.py``: 10 s of a sleeping torchrun
job) then came last, and the machine idled through its wait with the other worker done: 25 of a run's
85 idle core-seconds (2026-12-04, sampled every half second). Started first, the wait overlaps the lab
grading's processes, which have work for both cores.

So the files whose tests carry the :data:`MARK` marker come first, then every other file, the most
tests first, as xdist orders them; a file's own tests keep their order. The Makefile passes
``--no-loadscope-reorder``, so this order, the same in every worker, is the order the files are handed out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import pytest

#: The marker of a test that spends most of its wall time waiting (a timeout, a sleeping process), not computing.
MARK = "mostly_waits"


class Marked(Protocol):
    nodeid: str

    def get_closest_marker(self, name: str) -> object | None: ...


T = TypeVar("T", bound=Marked)


def file_order(items: Sequence[T]) -> list[T]:
    """``items`` grouped by file: files with a waiting test first, then the files with the most tests."""
    by_file: dict[str, list[T]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.partition("::")[0], []).append(item)

    def rank(path: str) -> tuple[bool, int]:
        waits = any(item.get_closest_marker(MARK) for item in by_file[path])
        return (not waits, -len(by_file[path]))

    return [item for path in sorted(by_file, key=rank) for item in by_file[path]]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: the test mostly waits; its file is handed out first (tests/run_order.py)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = file_order(items)
