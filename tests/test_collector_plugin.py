"""tests/collector_plugin.py: the test processes run with the collector tuned (its docstring says why)."""

from __future__ import annotations

import gc

from tests import collector_plugin


def test_a_test_process_collects_less_often_and_leaves_its_imports_frozen() -> None:
    assert gc.get_threshold() == collector_plugin.THRESHOLDS
    assert gc.isenabled()
    assert gc.get_freeze_count() > 10_000, "the imports and the collection were not frozen"
