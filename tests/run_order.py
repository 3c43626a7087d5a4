"""The order in which `make test`'s workers take the test files: the largest, those that mostly wait, the rest.

Loaded as a plugin (``-p tests.run_order`` in pyproject.toml). pytest-xdist's ``--dist loadfile`` hands
each worker whole files, by default the files with the most tests first (``--loadscope-reorder``). A
file of one test that waits out a timeout (``tests/test_launch_timeout.py``: 10 s of a sleeping torchrun
job) then came last, and the machine idled through its wait with the other worker done: 25 of a run's
85 idle core-seconds (2026-12-04, sampled every half second). Started at once, beside the lab grading,
its wait overlaps the grading's processes, which have work for both cores.

So the file with the most tests comes first (the lab grading's, the longest, whose processes keep both
cores busy), then the files marked with :data:`MARK` (``pytestmark``: a file of a few tests that wait,
where xdist's order puts it last), to wait beside it, then every other file, the most tests first, as
xdist orders them; a file's own tests keep their order. A large file that waits in some tests is not
marked: it is handed out early anyway. The Makefile passes ``--no-loadscope-reorder``, so this order,
the same in every worker, is the order the files are handed out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import pytest

#: The marker of a test file that spends most of its wall time waiting (timeouts, sleeping processes), not computing.
MARK = "mostly_waits"


class Marked(Protocol):
    nodeid: str

    def get_closest_marker(self, name: str) -> object | None: ...


T = TypeVar("T", bound=Marked)


def file_order(items: Sequence[T]) -> list[T]:
    """``items`` grouped by file: the largest file, then the files that mostly wait, then the others by size."""
    by_file: dict[str, list[T]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.partition("::")[0], []).append(item)
    by_size = sorted(by_file, key=lambda path: -len(by_file[path]))  # stable: a tie keeps the collection's order
    waiting = [path for path in by_size[1:] if any(item.get_closest_marker(MARK) for item in by_file[path])]
    order = [*by_size[:1], *waiting, *(path for path in by_size[1:] if path not in waiting)]
    return [item for path in order for item in by_file[path]]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: the file's tests mostly wait; it is handed out early (tests/run_order.py)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = file_order(items)
