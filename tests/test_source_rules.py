"""Rules about how an answer is written, read from the student's source by the grader (ptgrader.source_rules)."""

from __future__ import annotations

import pytest

from ptgrader.source_rules import loop_rules, python_loops

VECTORISED = (
    "def segment_sum(values, ids, n):\n    out = values.new_zeros((n, values.shape[1]))\n"
    "    return out.index_add_(0, ids, values)"
)


def test_the_rule_is_read_from_the_test_cells_own_lines() -> None:
    source = "ptchecks.emit('x', f(x))\n# ptgrader: no Python loop in segment_sum\n"
    assert loop_rules(source) == ["segment_sum"]
    assert loop_rules("# ptgrader: no Python loop in\n# no Python loop in f\n") == []


@pytest.mark.parametrize(
    ("cells", "found"),
    [
        ({3: "def segment_sum(v, ids, n):\n    for r in v.tolist():\n        pass\n    return v"}, "a for loop"),
        ({3: "def segment_sum(v, ids, n):\n    return torch.stack([r for r in v])"}, "a comprehension"),
        ({3: "def segment_sum(v, ids, n):\n    while n:\n        n -= 1\n    return v"}, "a while loop"),
        ({3: "import functools\ndef segment_sum(v, ids, n):\n    return functools.reduce(torch.add, v.unbind(0))"},
         "reduce(...)"),
        ({3: "def segment_sum(v, ids, n):\n    return segment_sum(v[1:], ids, n) if len(v) else v"},
         "a call of segment_sum by itself"),
        # The loop moved into a helper of another cell, or into a lambda bound to a name.
        ({2: "def rows(v):\n    return sum(r for r in v)", 3: "def segment_sum(v, ids, n):\n    return rows(v)"},
         "a generator expression in rows"),
        ({2: "add_all = lambda v: list(map(float, v))", 3: "def segment_sum(v, ids, n):\n    return add_all(v)"},
         "map(...) in add_all"),
        # A second definition of the function, later in the notebook, is the one that runs.
        ({3: VECTORISED, 9: "def segment_sum(v, ids, n):\n    return [r for r in v]"}, "a comprehension"),
    ],
)
def test_python_iteration_anywhere_the_function_reaches_breaks_the_rule(cells: dict[int, str], found: str) -> None:
    loops = python_loops(cells, "segment_sum")
    assert loops and found in loops[0], loops


def test_vectorised_code_and_loops_it_does_not_use_pass() -> None:
    cells = {
        3: VECTORISED,
        # Exploration elsewhere in the notebook, a local named like it, a magic: none is the function's.
        4: "out = [segment_sum(v, i, 3) for v, i in examples]\n%timeit segment_sum(v, i, 3)",
        5: "def other(x):\n    return [y for y in x]",
    }
    assert python_loops(cells, "segment_sum") == []
    assert python_loops({1: "def segment_sum(:\n"}, "segment_sum") == []  # does not parse: fails when it runs
