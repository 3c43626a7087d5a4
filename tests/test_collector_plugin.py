"""tests/collector_plugin.py: the test processes run with the imports and the collection frozen (its docstring says why)."""

from __future__ import annotations

import gc


def test_a_test_process_leaves_its_imports_frozen_and_collects_as_python_does() -> None:
    assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() > 10_000, "the imports and the collection were not frozen"
