"""The test processes' garbage collector: what imports and collection made is frozen, and it runs less often.

Why: a pytest worker imports torch, nbgrader, nbconvert and Playwright and collects every test and
notebook cell, over half a million objects that live to the end of the run, and with Python's default
thresholds the collector ran every 700 allocations and walked all of them at each full collection.
In a run of five unit-test modules, 18 full collections took 3.9 of the process's 10.1 s of CPU. After
the collection the long-lived objects are frozen (``gc.freeze``, after one last collection, so no garbage
is kept) and the thresholds raised: that run took 7.3 s of CPU, 1.1 s of it collecting. Garbage the tests
make is still collected, a little later; the notebooks' kernels are other processes, left as they are.
"""

from __future__ import annotations

import gc

import pytest

#: Allocations between collections of the youngest generation, and how many of those (then of the middle
#: generation's) make the next older generation's: Python's default is (700, 10, 10).
THRESHOLDS = (50_000, 20, 20)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
