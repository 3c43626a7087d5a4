"""The workers take the largest file, then the files that mostly wait, then the others (tests/run_order.py)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from tests import chapter_check, run_order
from tests.manifest import ROOT


@dataclass
class Item:
    nodeid: str
    waits: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return name if self.waits and name == run_order.MARK else None


def test_the_largest_file_then_the_waiting_ones_then_the_others_by_size_each_files_tests_in_order() -> None:
    items = [
        Item("tests/test_small.py::a"),
        Item("tests/test_big.py::a"), Item("tests/test_big.py::b"), Item("tests/test_big.py::c"),
        Item("notebooks/01.ipynb::Cell 0"), Item("notebooks/01.ipynb::Cell 1"),
        Item("tests/test_tie.py::a"),
        Item("tests/test_timeout.py::quick"), Item("tests/test_timeout.py::sleeps", waits=True),
    ]
    ordered = [item.nodeid for item in run_order.file_order(items)]
    assert ordered == [
        "tests/test_big.py::a", "tests/test_big.py::b", "tests/test_big.py::c",
        "tests/test_timeout.py::quick", "tests/test_timeout.py::sleeps",
        "notebooks/01.ipynb::Cell 0", "notebooks/01.ipynb::Cell 1",
        "tests/test_small.py::a", "tests/test_tie.py::a",  # a tie keeps the collection's order
    ]


def test_xdist_hands_out_files_in_this_order_in_make_test_and_make_check() -> None:
    """xdist's own reordering (by number of tests) would put the waiting file last again."""
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("\ntest:", 1)[1].split("\n\n", 1)[0]
    command = shlex.split(re.sub(r"\\\n", " ", recipe))
    assert "--no-loadscope-reorder" in command and "loadfile" in command, recipe
    assert "--no-loadscope-reorder" in chapter_check.check_command("notebooks/01_tensors.ipynb", 2)
