"""Rules about how an answer is written, read from the student's source by the grader (ptgrader.source_rules)."""

from __future__ import annotations

import ast
import gc
import sys
import types
from collections.abc import Callable

import pytest
import torch

from ptgrader.ipython_code import parse
from ptgrader.source_rules import (
    call_rules,
    forbidden_calls,
    forbidden_values,
    loop_rules,
    module_aliases,
    python_loops,
)

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
         "reduce (it calls a function per item)"),
        ({3: "def segment_sum(v, ids, n):\n    return segment_sum(v[1:], ids, n) if len(v) else v"},
         "recursion: segment_sum calls itself"),
        # The loop moved into a helper of another cell, or into a lambda bound to a name.
        ({2: "def rows(v):\n    return sum(r for r in v)", 3: "def segment_sum(v, ids, n):\n    return rows(v)"},
         "a generator expression in rows"),
        ({2: "add_all = lambda v: list(map(float, v))", 3: "def segment_sum(v, ids, n):\n    return add_all(v)"},
         "map (it calls a function per item) in add_all"),
        # A second definition of the function, later in the notebook, is the one that runs.
        ({3: VECTORISED, 9: "def segment_sum(v, ids, n):\n    return [r for r in v]"}, "a comprehension"),
    ],
)
def test_python_iteration_anywhere_the_function_reaches_breaks_the_rule(cells: dict[int, str], found: str) -> None:
    loops = python_loops(cells, "segment_sum")
    assert loops and found in loops[0], loops


LOOP = "    out = []\n    for row in v.tolist():\n        out.append(row)\n    return torch.tensor(out)\n"


@pytest.mark.parametrize(
    ("cells", "found"),
    [  # a second red-team round's hiding places, each of which scored full marks against the first reading
        ({3: "if True:\n    def segment_sum(v, ids, n):\n    " + LOOP.replace("\n    ", "\n        ")}, "a for loop"),
        ({3: "try:\n    def segment_sum(v, ids, n):\n    " + LOOP.replace("\n    ", "\n        ") + "finally:\n    pass"},
         "a for loop"),
        ({3: "%%time\ndef segment_sum(v, ids, n):\n" + LOOP}, "a for loop"),
        ({3: "def _impl(v, ids, n):\n" + LOOP + "\n%time segment_sum = _impl"}, "a for loop in _impl"),
        ({3: "from functools import reduce as fold\ndef segment_sum(v, ids, n):\n    return fold(f, v.tolist(), [])"},
         "reduce (it calls a function per item)"),
        ({3: "import functools\nfold = functools.reduce\ndef segment_sum(v, ids, n):\n    return fold(f, v, [])"},
         "reduce (it calls a function per item) in fold"),
        ({3: "def a(v, i):\n    return v if i == 0 else b(v, i - 1)\ndef b(v, i):\n    return a(v, i)\n"
             "def segment_sum(v, ids, n):\n    return a(v, 3)"}, "recursion: a calls itself"),
        ({3: "class S:\n    def rows(self, v, i):\n        return v if i == 0 else self.rows(v, i - 1)\n"
             "def segment_sum(v, ids, n):\n    return S().rows(v, 3)"}, "recursion: rows calls itself"),
        ({3: "def segment_sum(v, ids, n):\n    sorted(range(len(v)), key=add)\n    return v"}, "a key= function"),
        # a third round's: an iterator driven by list(), a Counter, recursion through an argument
        ({3: "def segment_sum(v, ids, n):\n    rows = v.tolist()\n    step = lambda: rows.pop() if rows else None\n"
             "    return torch.tensor(list(iter(step, None)))"}, "iter (it calls a function per item)"),
        ({3: "class Rows:\n    def __init__(self, v):\n        self.v = v\n    def __iter__(self):\n        return self\n"
             "    def __next__(self):\n        raise StopIteration\ndef segment_sum(v, ids, n):\n    return list(Rows(v))"},
         "__next__ (Python calls it once per item)"),
        ({3: "import collections\ndef segment_sum(v, ids, n):\n    return collections.Counter(ids)"},
         "Counter (it calls a function per item)"),
        ({3: "def pick(rows, i, again):\n    return rows if i == 0 else again(rows, i - 1, again)\n"
             "def segment_sum(v, ids, n):\n    return pick(v, 3, pick)"}, "a call of the argument again"),
        ({3: "def segment_sum(v, ids, n):\n    return torch.tensor(sum(v.tolist(), []))"}, ".tolist() (it moves values"),
        # an outside round's: recursion through the methods Python calls without their names
        ({3: "class Pick:\n    def __call__(self, v, i):\n        return v if i == 0 else self(v, i - 1)\n"
             "def segment_sum(v, ids, n):\n    return Pick()(v, 3)"}, "recursion: __call__ calls itself"),
        ({3: "class Rows:\n    def __init__(self, v, i):\n        self.v = v if i == 0 else type(self)(v, i - 1).v\n"
             "def segment_sum(v, ids, n):\n    return Rows(v, 3).v"}, "recursion: __init__ calls itself"),
        ({3: "class Picker:\n    def __init__(self):\n        self.again = self.pick\n"
             "    def pick(self, v, i):\n        return v if i == 0 else self.again(v, i - 1)\n"
             "def segment_sum(v, ids, n):\n    return Picker().pick(v, 3)"}, "recursion: pick calls itself"),
        ({3: "def pick(v, i):\n    return v if i == 0 else step(v, i - 1)\nstep = lambda v, i: pick(v, i)\n"
             "def segment_sum(v, ids, n):\n    return pick(v, 3)"}, "recursion: pick calls itself"),
        ({3: "class Rows:\n    def __len__(self):\n        return 0 if self.i == 0 else len(self)\n"
             "def segment_sum(v, ids, n):\n    return v[:len(Rows())]"}, "recursion: __len__ calls itself"),
        # round 53's: a built-in working through a container of the student's objects calls a method per item
        ({3: "class Row:\n    def __repr__(self):\n        return 'r'\n"
             "def segment_sum(v, ids, n):\n    repr([Row()] * n)\n    return v"}, "__repr__ (Python calls it once per item)"),
        ({3: "class Row:\n    def __eq__(self, other):\n        return True\n"
             "def segment_sum(v, ids, n):\n    [Row()] * n == [Row()] * n\n    return v"},
         "__eq__ (Python calls it once per item)"),
        ({3: "class Row:\n    def __radd__(self, other):\n        return other\n"
             "def segment_sum(v, ids, n):\n    return v + sum([Row()] * n)"}, "__radd__ (Python calls it once per item)"),
        ({3: "class Row:\n    def __float__(self):\n        return 0.0\n"
             "def segment_sum(v, ids, n):\n    return v + torch.tensor([Row()] * n).sum()"},
         "__float__ (Python calls it once per item)"),
        # round 62's: a special method missing from a list of them (any() tests each item through __len__), and a
        # metaclass's __instancecheck__, once per class of isinstance's tuple: now every special method counts
        ({3: "class Row:\n    def __len__(self):\n        return 0\n"
             "def segment_sum(v, ids, n):\n    any([Row()] * n)\n    return v"}, "__len__ (Python calls it once per item)"),
        ({3: "class Pick(type):\n    def __instancecheck__(cls, x):\n        return False\n"
             "def segment_sum(v, ids, n):\n    isinstance(None, (Pick('P', (), {}),) * n)\n    return v"},
         "__instancecheck__ (Python calls it once per item)"),
        ({3: "class Row:\n    __len__ = pick\ndef pick(self):\n    return 0\n"
             "def segment_sum(v, ids, n):\n    any([Row()] * n)\n    return v"}, "__len__ (Python calls it once per item)"),
        ({3: "class Row:\n    pass\ndef segment_sum(v, ids, n):\n    Row.__len__ = lambda self: 0\n"
             "    any([Row()] * n)\n    return v"}, "__len__ (Python calls it once per item)"),
        # and a function of the student's handed to code that calls it once per item
        ({3: "import collections, operator\ndef pick():\n    return 0\n"
             "def segment_sum(v, ids, n):\n    rows = collections.defaultdict(pick)\n"
             "    operator.itemgetter(*range(n))(rows)\n    return v"}, "pick handed to other code as a value"),
        ({3: "import re\ndef segment_sum(v, ids, n):\n    re.sub('.', lambda m: '', 'x' * n)\n    return v"},
         "a lambda handed to other code as a value"),
        ({3: "def pick(self):\n    return 0\n"
             "def segment_sum(v, ids, n):\n    Row = type('Row', (), {'__len__': pick})\n    any([Row()] * n)\n"
             "    return v"}, "pick handed to other code as a value"),
        ({3: "class Pick:\n    def __call__(self):\n        return 0\n"
             "def segment_sum(v, ids, n):\n    import collections\n    p = Pick()\n"
             "    collections.defaultdict(p)\n    return v"}, "p handed to other code as a value"),
        ({3: "class Pick(torch.nn.Module):\n    def forward(self):\n        return 0\n"
             "def segment_sum(v, ids, n):\n    import collections\n    collections.defaultdict(Pick())\n    return v"},
         "an object of Pick handed to other code as a value"),
        ({3: "class S:\n    def pick(self, r):\n        return r\n    def run(self, v):\n"
             "        return torch.vmap(getattr(self, 'pick'), chunk_size=1)(v)\n"
             "def segment_sum(v, ids, n):\n    return S().run(v)"}, "pick handed to other code as a value"),  # getattr(self, 'pick') is read as self.pick
    ],
)
def test_iteration_hidden_in_blocks_magics_aliases_and_call_chains_breaks_the_rule(
    cells: dict[int, str], found: str
) -> None:
    loops = python_loops(cells, "segment_sum")
    assert any(found in loop for loop in loops), loops


@pytest.mark.parametrize(
    ("answer", "found"),
    [  # round 116: what a class pattern reads is an attribute read, though ast holds its name as a plain string
        ("def segment_sum(v, ids, n):\n    match v:\n        case object(tolist=as_list):\n"
         "            rows = as_list()\n    return rows", ".tolist()"),
        ("class Walk:\n    def down(self, k):\n        match self:\n            case object(down=again):\n"
         "                return k if k == 0 else again(k - 1)\n"
         "def segment_sum(v, ids, n):\n    return Walk().down(3)", "recursion: down calls itself"),
        ("import functools\ndef segment_sum(v, ids, n):\n    match functools:\n"
         "        case object(reduce=fold) | object(partial=fold):\n            return fold(f, v, 0)", "reduce"),
        # ...and so is a constant name given to getattr, hasattr, attrgetter or methodcaller (the policy's only others)
        ("def segment_sum(v, ids, n):\n    return getattr(v, 'tolist', None)()", ".tolist()"),
        ("import operator\ndef segment_sum(v, ids, n):\n    return operator.methodcaller('tolist')(v)", ".tolist()"),
        ("from operator import attrgetter\ndef segment_sum(v, ids, n):\n"
         "    return attrgetter('shape', 'T.tolist')(v)[1]()", ".tolist()"),
        ("import functools\ndef segment_sum(v, ids, n):\n    return getattr(functools, 'reduce')(f, v)", "reduce"),
    ],
)
def test_an_attribute_named_in_a_class_pattern_or_a_string_is_read(answer: str, found: str) -> None:
    loops = python_loops({3: answer}, "segment_sum")
    assert any(found in loop for loop in loops), loops


@pytest.mark.parametrize(
    "answer",
    [
        "def segment_sum(values, ids, n):\n    match values:\n        case torch.Tensor(shape=(_, width)):\n"
        "            out = values.new_zeros((n, width))\n    return out.index_add_(0, ids, values)",
        "def segment_sum(values, ids, n):\n    width = getattr(values, 'shape')[1]\n"
        "    return values.new_zeros((n, width)).index_add_(0, ids, values)",
    ],
)
def test_an_attribute_read_by_name_that_is_neither_loop_nor_call_keeps_its_part(answer: str) -> None:
    assert python_loops({3: answer}, "segment_sum") == []
    assert forbidden_calls({3: answer}, "segment_sum", "backward") == []


@pytest.mark.parametrize(
    ("answer", "found"),
    [  # round 117: code that is not the student's called their methods, under names no line of theirs wrote
        ("class Steps(torch.nn.Module):\n    def forward(self, k):\n        return 0 if k == 0 else self(k - 1)\n"
         "def segment_sum(v, ids, n):\n    Steps()(3)\n    return v", "class Steps derives from torch.nn.Module"),
        ("import collections\nclass Steps(collections.UserDict):\n    def popitem(self):\n"
         "        return super().popitem()\ndef segment_sum(v, ids, n):\n    Steps({1: 2}).clear()\n    return v",
         "class Steps derives from collections.UserDict"),
        ("import dataclasses\n@dataclasses.dataclass\nclass Steps:\n    k: int = 0\n    def __post_init__(self):\n"
         "        if self.k:\n            dataclasses.replace(self, k=self.k - 1)\n"
         "def segment_sum(v, ids, n):\n    Steps(3)\n    return v", "Steps.__post_init__ hands self to other code"),
        ("import operator\nclass Steps:\n    def __call__(me, k):\n        return 0 if k == 0 else operator.call(me, k - 1)\n"
         "def segment_sum(v, ids, n):\n    Steps()(3)\n    return v", "Steps.__call__ hands me to other code"),
        ("class Steps(dict):\n    def get(self, key, default=None):\n        match self:\n"
         "            case {'rest': rest}:\n                return rest\n        return default\n"
         "def segment_sum(v, ids, n):\n    Steps(rest=1).get('rest')\n    return v", "Steps.get hands self to other code"),
        ("def segment_sum(v, ids, n):\n    raw = bytes(v.untyped_storage())\n    return v", ".untyped_storage()"),
        # round 118: the object called through a local or an attribute of its own, no method of the class
        ("class Steps:\n    def __call__(self, k):\n        again = self.me()\n        return 0 if k == 0 else again(k - 1)\n"
         "    def me(self):\n        return self\ndef segment_sum(v, ids, n):\n    Steps()(3)\n    return v",
         "recursion: __call__ calls itself"),
        ("class Steps:\n    def __call__(self, k):\n        return 0 if k == 0 else self.peer(k - 1)\n"
         "walker = Steps()\nwalker.peer = walker\ndef segment_sum(v, ids, n):\n    walker(3)\n    return v",
         "recursion: __call__ calls itself"),
    ],
)
def test_a_class_whose_methods_code_not_the_students_may_call_is_a_loop(answer: str, found: str) -> None:
    loops = python_loops({3: answer}, "segment_sum")
    assert any(found in loop for loop in loops), loops


WALK = "def _walk(b, box):\n    return [] if b == 0 else box[0](b - 1, box) + [b - 1]\n"
ROWS = ("class Rows:\n    def __call__(self, b):\n        return [] if b == 0 else self.peers[0](b - 1) + [b - 1]\n"
        "    def me(self):\n        return self\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, *exc):\n        return None\n")
COUNTER = "class Count:\n    def __init__(self):\n        self.seen = 0\n    def __call__(self):\n        self.seen += 1\n"
PER_ROW = "import collections, operator\ndef rows(n, count):\n    return operator.itemgetter(*range(n))(collections.defaultdict(count))\n"


def _answer(rows: str) -> str:
    return f"def segment_sum(v, ids, n):\n    rows = {rows}\n    return v[torch.tensor(rows)]\n"


@pytest.mark.parametrize(
    ("answer", "found"),
    [  # round 119: code of the student's kept where other code gets it, then called under no name of theirs
        (WALK + "def box():\n    return [_walk]\n" + _answer("_walk(3, box())"), "_walk kept as a value"),
        (WALK.replace("return [] if b == 0 else", "yield from") + "def box():\n    return (_walk,)\n"
         + _answer("list(_walk(3, box()))"), "_walk kept as a value"),
        (ROWS + "def segment_sum(v, ids, n):\n    walker = Rows()\n    walker.peers = [walker]\n"
         "    return v[torch.tensor(walker(3))]", "walker kept as a value"),
        (COUNTER + PER_ROW + "def make():\n    return Count()\n" + _answer("rows(3, make())"),
         "an object of Count kept as a value"),
        (WALK + "def box():\n    return [_walk.__call__]\n" + _answer("_walk(3, box())"), "_walk.__call__ kept"),
        (WALK + "def box():\n    return [(again := _walk)]\n" + _answer("_walk(3, box())"), "_walk kept as a value"),
        (WALK + "def box():\n    table = {}\n    table[0] = _walk\n    return table\n" + _answer("_walk(3, box())"),
         "_walk kept as a value"),
        (ROWS + "def segment_sum(v, ids, n):\n    walker = Rows()\n    walker.peers = [1]\n"
         "    walker.peers[0] = walker.me()\n    return v[torch.tensor(walker(3))]", "Rows.me hands self to other code"),
        (ROWS + "def segment_sum(v, ids, n):\n    with Rows() as walker:\n        walker.peers = (walker,)\n"
         "    return v[torch.tensor(walker(3))]", "walker kept as a value"),
        # round 120: a decorator is given what it decorates; a statement at the top of a cell hands it over too
        ("def segment_sum(v, ids, n):\n    box = []\n    @box.append\n    def walk(b):\n"
         "        return [] if b == 0 else box[0](b - 1) + [b - 1]\n    return v[torch.tensor(box[0](3))]",
         "walk handed to its decorator box.append"),
        ("import collections\ndef segment_sum(v, ids, n):\n    box = []\n    @box.append\n    class Count:\n"
         "        def __call__(self):\n            return 1\n    rows = collections.defaultdict(box[0]())\n"
         "    return v", "Count handed to its decorator box.append"),
        # round 121: a trusted decorator's name on something else (an accessor of no property, an alias)
        ("import collections, operator\nclass Hook:\n    def __init__(self, n):\n        self.n = n\n"
         "    def setter(self, fn):\n        operator.itemgetter(*range(self.n))(collections.defaultdict(fn))\n"
         "        return fn\ndef segment_sum(v, ids, n):\n    @Hook(n).setter\n    def walk():\n        return 0\n"
         "    return v", "walk handed to its decorator Hook(n).setter"),
        ("from collections import defaultdict as cache\ndef segment_sum(v, ids, n):\n    @cache\n"
         "    def walk():\n        return 0\n    return v", "walk handed to its decorator cache"),
        # round 123: the object __enter__ hands back, called by name instead of by a with statement
        ("import collections\nclass Tally:\n    def __enter__(self):\n        return self\n"
         "    def __exit__(self, *exc):\n        return None\n    def __call__(self):\n        return 1\n"
         "def segment_sum(v, ids, n):\n    counter = Tally().__enter__()\n    collections.defaultdict(counter)\n"
         "    return v", "counter handed to other code"),
        # round 122: an object a classmethod made as cls(), handed on from there
        ("import collections\nclass Rows:\n    @classmethod\n    def make(cls):\n        return cls()\n"
         "    def __call__(self):\n        return 1\ndef segment_sum(v, ids, n):\n"
         "    collections.defaultdict(Rows.make())\n    return v", "an object made by cls kept as a value"),
        ("import collections\nclass Shift:\n    @property\n    def k(self):\n        return 1\n"
         "def segment_sum(v, ids, n):\n    collections.defaultdict(Shift.k.fget)\n    return v",
         "Shift.k.fget handed to other code"),
        (WALK + "TOOLS = {}\nTOOLS.update(rows=_walk)\ndef segment_sum(v, ids, n):\n"
         "    return v[torch.tensor(TOOLS['rows'](3, [TOOLS['rows']]))]", "at the top of notebook cell 4"),
        # an object with any method of its own, handed to other code: json.dump calls its write once per chunk
        ("import json\nclass Out:\n    def __init__(self):\n        self.n = 0\n    def write(self, text):\n"
         "        self.n += 1\ndef segment_sum(v, ids, n):\n    out = Out()\n    json.dump([0] * n, out)\n"
         "    return v[:out.n]", "out handed to other code"),
    ],
)
def test_code_kept_where_other_code_gets_it_is_a_loop(answer: str, found: str) -> None:
    loops = python_loops({3: answer}, "segment_sum")
    assert any(found in loop for loop in loops), loops


def test_an_object_a_cell_leaves_in_ipython_s_output_history_is_kept() -> None:
    """Round 124: a bare ``Tally()`` at the end of a cell left the object in ``_``, and the answer took it as a
    default (``counter=_``) and handed it to ``defaultdict``: no assignment in the source shows it."""
    cells = {2: "class Tally:\n    def __call__(self):\n        return 1\nTally()",
             3: "import collections\ndef segment_sum(v, ids, n, counter=_):\n"
                "    collections.defaultdict(counter)\n    return v"}
    loops = python_loops(cells, "segment_sum")
    assert any("Tally kept in IPython's output history (_) at the end of notebook cell 3" in loop
               for loop in loops), loops
    cells[2] = cells[2].replace("\nTally()", "\n1 + 1")  # a number in _, no code of the student's
    assert not any("output history" in loop for loop in python_loops(cells, "segment_sum"))


#: Round 125: a statement run once per batch row by a Timer made in the answer.
TIMED_ROWS = ("import torch.utils.benchmark\ndef segment_sum(v, ids, n):\n    rows = []\n"
              "    torch.utils.benchmark.Timer(stmt='rows.append(len(rows))', globals={'rows': rows}).timeit(n)\n"
              "    return v[torch.tensor(rows)]")


@pytest.mark.parametrize(
    ("cells", "found"),
    [
        ({3: TIMED_ROWS}, "code run from a string by Timer or %timeit (once per timing loop) in segment_sum"),
        # the loop written in the string: read where the Timer runs it
        ({3: TIMED_ROWS.replace("stmt='rows.append(len(rows))'", "stmt='for r in range(n): rows.append(r)'")},
         "a for loop in segment_sum (notebook cell 4, line 4)"),
        # the set-up string, given by position, from a Timer imported by name
        ({2: "from torch.utils.benchmark import Timer",
          3: "def segment_sum(v, ids, n):\n    rows = []\n    Timer('pass', 'rows.extend([r for r in range(n)])', "
             "globals={'rows': rows, 'n': n}).timeit(0)\n    return v[torch.tensor(rows)]"},
         "a comprehension in segment_sum (notebook cell 4, line 3)"),
        # a Timer made elsewhere, run by the answer
        ({2: "import torch.utils.benchmark\nROWS = []\nSTEP = torch.utils.benchmark.Timer("
             "stmt='ROWS.append(len(ROWS))', globals={'ROWS': ROWS})",
          3: "def segment_sum(v, ids, n):\n    STEP.timeit(n)\n    return v[torch.tensor(ROWS)]"},
         "timeit (it calls a function per item) in segment_sum"),
        ({2: "import torch.utils.benchmark\nROWS = []\nSTEP = torch.utils.benchmark.Timer("
             "stmt='ROWS.append(len(ROWS))', globals={'ROWS': ROWS})\nRUN = STEP.blocked_autorange",
          3: "def segment_sum(v, ids, n):\n    RUN(min_run_time=n)\n    return v[torch.tensor(ROWS)]"},
         "code run from a string by Timer or %timeit (once per timing loop) at the top of notebook cell 3"),
        # magics inside the answer: %timeit's statement after its options, %time's statement
        ({3: "def segment_sum(v, ids, n):\n    rows = []\n    %timeit -n1 -r1 rows.append(len(rows))\n"
             "    return v[torch.tensor(rows)]"},
         "code run from a string by Timer or %timeit (once per timing loop) in segment_sum"),
        ({3: "def segment_sum(v, ids, n):\n    rows = []\n    %time rows.extend([r for r in range(n)])\n"
             "    return v[torch.tensor(rows)]"},
         "a comprehension in segment_sum (notebook cell 4, line 3)"),
    ],
)
def test_code_a_timer_or_a_magic_runs_from_a_string_is_read_where_it_runs(cells: dict[int, str], found: str) -> None:
    """Round 125: ``Timer(stmt=...).timeit(n)`` ran a statement once per row of the batch: the code policy reads the
    strings Timer and magics run, and the source rules read none of them."""
    loops = python_loops(cells, "segment_sum")
    assert any(found in loop for loop in loops), loops


def test_a_timer_made_for_later_runs_the_forbidden_call_where_the_answer_runs_it() -> None:
    """Round 125: ``backward`` in a Timer's statement, run by ``r1_penalty`` (with ``.grad`` cleared afterwards)."""
    inside = PENALTY.replace(
        "(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
        "total = critic(real).sum()\n    torch.utils.benchmark.Timer(stmt='total.backward(inputs=[real], "
        "create_graph=True)', globals={'total': total, 'real': real}).timeit(0)\n    g, real.grad = real.grad, None")
    assert any("backward in r1_penalty (notebook cell 4, line 4)" in where
               for where in forbidden_calls({3: inside}, "r1_penalty", "backward"))
    made_before = {2: "import torch.utils.benchmark\nBOX = {}\nSTEP = torch.utils.benchmark.Timer("
                      "stmt='BOX[0].backward(inputs=[BOX[1]], create_graph=True)', globals={'BOX': BOX})",
                   3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                                      "BOX.update({0: critic(real).sum(), 1: real})\n    STEP.timeit(0)\n"
                                      "    g, real.grad = real.grad, None")}
    assert any("backward in code kept to run later at the top of notebook cell 3" in where
               for where in forbidden_calls(made_before, "r1_penalty", "backward"))
    made_before[2] = made_before[2].replace("BOX[0].backward(inputs=[BOX[1]], create_graph=True)", "pass")
    assert forbidden_calls(made_before, "r1_penalty", "backward") == [], "a Timer that names no backward"


def _timers(statement: str, depth: int) -> str:
    """``statement`` as the code of ``depth`` Timers, each running the next one's code."""
    for _ in range(depth):
        statement = f"torch.utils.benchmark.Timer(stmt={statement!r}, globals={{'x': x}}).timeit(0)"
    return statement


@pytest.mark.parametrize("depth", [1, 3, 4, 6])
def test_code_strings_nested_deeper_than_the_reading_goes_still_count(depth: int) -> None:
    """Round 126: ``backward`` four Timers deep, past the three levels the reading parsed, then five deep with the
    name split in two (``"total.back" "ward()"``): what the reading cannot read counts as a mention of any name."""
    answer = PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                             "x = real\n    " + _timers("critic(x).sum().backward(inputs=[x])", depth)
                             + "\n    g, real.grad = real.grad, None")
    assert any("backward in r1_penalty" in where for where in forbidden_calls({3: answer}, "r1_penalty", "backward"))
    read = forbidden_calls({3: answer.replace(".backward(inputs=[x])", ".exp()")}, "r1_penalty", "backward")
    assert read == [] if depth < 4 else read, "a string the reading reads names no backward; one it cannot, any"
    looping = "def segment_sum(v, ids, n):\n    x = v\n    " + _timers("x.add_(1)", depth) + "\n    return v"
    assert any("once per timing loop" in loop for loop in python_loops({3: looping}, "segment_sum"))


@pytest.mark.parametrize(
    "statement",
    [
        "    critic(real).sum().backward(inputs=[real])",  # Timer takes the indentation off
        "%time critic(real).sum().backward(inputs=[real])",  # a magic as a Timer's statement
        "critic(real).sum().back" "ward(",  # it does not parse: read as code no one can read
    ],
)
def test_a_code_string_is_read_as_the_code_that_runs_or_as_unreadable(statement: str) -> None:
    """Round 126: an indented Timer statement, which plain ``ast.parse`` refuses, was read as nothing."""
    answer = PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                             f"torch.utils.benchmark.Timer(stmt={statement!r}, globals={{'real': real, "
                             "'critic': critic}).timeit(0)\n    g, real.grad = real.grad, None")
    assert any("backward in r1_penalty" in where for where in forbidden_calls({3: answer}, "r1_penalty", "backward"))


@pytest.mark.parametrize(
    "answer",
    [
        # a magic in a Timer's statement
        "def segment_sum(v, ids, n):\n    rows = []\n    torch.utils.benchmark.Timer(stmt=\"get_ipython()."
        "run_line_magic('time', 'rows.extend([r for r in range(n)])')\", globals={'rows': rows, 'n': n}).timeit(0)\n"
        "    return v[torch.tensor(rows)]",
        # a magic whose statement is a magic, in a class body in the answer
        "def segment_sum(v, ids, n):\n    rows = []\n    class Timed:\n        rows_, n_ = rows, n\n"
        "        %time %time rows_.extend([r for r in range(n_)])\n    return v[torch.tensor(rows)]",
        # a magic in a magic, in a class body in the answer
        "def segment_sum(v, ids, n):\n    rows = []\n    class Timed:\n        rows_, n_ = rows, n\n"
        "        %time get_ipython().run_line_magic('time', 'rows_.extend([r for r in range(n_)])')\n"
        "    return v[torch.tensor(rows)]",
    ],
)
def test_a_magic_inside_code_run_from_a_string_runs_where_that_code_runs(answer: str) -> None:
    """Round 126: ``%time`` in a Timer's statement, and in another ``%time`` in a class body, ran a comprehension
    inside the answer: the magic read as a cell of its own, as at the top of a cell."""
    loops = python_loops({3: answer}, "segment_sum")
    assert any("a comprehension in segment_sum" in loop for loop in loops), loops


#: Round 127: a generator made at the top of a cell, advanced by the answer once per row.
ROWS_LATER = ("import itertools\nBOX = []\nHOLD = []\n"
              "HOLD.append(BOX.append(len(BOX)) for _ in itertools.repeat(None))")
ADVANCED = ("def segment_sum(v, ids, n):\n    BOX.clear()\n    list(zip(range(n), HOLD[0]))\n"
            "    return v[torch.tensor(BOX)]")


@pytest.mark.parametrize(
    ("kept", "found"),
    [
        (ROWS_LATER, "a generator expression at the top of notebook cell 3 (line 4), kept to run later"),
        (ROWS_LATER.replace("BOX.append(len(BOX)) for _ in itertools.repeat(None)",
                            "map(BOX.append, map(len, itertools.repeat(BOX)))"),
         "map (it calls a function per item) at the top of notebook cell 3 (line 4), kept to run later"),
    ],
)
def test_an_iterator_made_at_the_top_of_a_cell_runs_where_the_answer_advances_it(kept: str, found: str) -> None:
    """Round 127: a generator expression (or a ``map``) kept in a list at the top of a cell did the work once per
    row, inside the answer, which only called ``zip`` and ``list``: its code runs later, wherever it is advanced."""
    loops = python_loops({2: kept, 3: ADVANCED}, "segment_sum")
    assert any(found in loop for loop in loops), loops
    honest = {2: kept, 3: VECTORISED}  # an answer that reads no value handed around cannot advance it
    assert python_loops(honest, "segment_sum") == []


def test_a_forbidden_call_in_a_generator_made_at_the_top_of_a_cell_is_read() -> None:
    """Round 127: ``backward`` in a generator expression at the top of a cell, advanced inside ``r1_penalty``."""
    cells = {2: "import itertools\nPAIR = []\nHOLD = []\nHOLD.append(PAIR[0].backward(inputs=[PAIR[1]]) "
                "for _ in itertools.repeat(None))",
             3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                                "PAIR[:] = [critic(real).sum(), real]\n    list(zip(range(1), HOLD[0]))\n"
                                "    g, real.grad = real.grad, None")}
    assert any("backward in code kept to run later at the top of notebook cell 3" in where
               for where in forbidden_calls(cells, "r1_penalty", "backward"))


LAB_MODULES = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "math": "math"}


@pytest.mark.parametrize(
    ("cells", "found"),
    [
        ({2: "def _rows(h, n):\n    return [b for b in range(n)]\nF.tf32_notes.setdefault(2, _rows)",
          3: "def segment_sum(v, ids, n):\n    return v[torch.tensor(F.tf32_notes[2](v, n))]"},
         "F.tf32_notes (a value a module holds"),
        ({2: "import torch.nn.functional\ndef _rows(h, n):\n    return [b for b in range(n)]\n"
             "torch.nn.functional.tf32_notes[2] = _rows",
          3: "def segment_sum(v, ids, n):\n    return v[torch.tensor(torch.nn.functional.tf32_notes[2](v, n))]"},
         "torch.nn.functional.tf32_notes"),
        ({2: "from typing import EXCLUDED_ATTRIBUTES as KEPT\ndef _rows(h, n):\n    return [b for b in range(n)]\n"
             "KEPT.append(_rows)",
          3: "def segment_sum(v, ids, n):\n    return v[torch.tensor(KEPT[-1](v, n))]"},
         "KEPT (a value a module holds"),
        # round 128: a dict a class of a module holds, read past the class
        ({2: "def _rows(h, n):\n    return [b for b in range(n)]\n"
             "torch.distributions.Normal.arg_constraints.setdefault('k', _rows)",
          3: "def segment_sum(v, ids, n):\n    return v[torch.tensor(torch.distributions.Normal.arg_constraints['k'](v, n))]"},
         "torch.distributions.Normal.arg_constraints"),
        ({2: "from torch.distributions import Normal as N\ndef _rows(h, n):\n    return [b for b in range(n)]\n"
             "N.arg_constraints.update(k=_rows)",
          3: "def segment_sum(v, ids, n):\n    return v[torch.tensor(N.arg_constraints['k'](v, n))]"},
         "N.arg_constraints"),
        # round 129: the same dict read through an object of the class, and through a tuple holding the class
        ({2: "def _rows(h, n):\n    return [b for b in range(n)]\n"
             "torch.distributions.Normal.arg_constraints.setdefault('k', _rows)",
          3: "def segment_sum(v, ids, n):\n    normal = torch.distributions.Normal(0.0, 1.0, validate_args=False)\n"
             "    return v[torch.tensor(normal.arg_constraints['k'](v, n))]"},
         ".arg_constraints (a container a library holds"),
        ({2: "def _rows(h, n):\n    return [b for b in range(n)]\n"
             "torch.distributions.Normal.arg_constraints.setdefault('k', _rows)",
          3: "def segment_sum(v, ids, n):\n"
             "    return v[torch.tensor((torch.distributions.Normal,)[0].arg_constraints['k'](v, n))]"},
         ".arg_constraints (a container a library holds"),
        # round 130: a dict a module holds, read through a module a call hands out
        ({2: "def _rows(h, n):\n    return [b for b in range(n)]\nF.tf32_notes.setdefault(2, _rows)",
          3: "def segment_sum(v, ids, n):\n"
             "    return v[torch.tensor(torch.get_device_module('cpu').torch.nn.functional.tf32_notes[2](v, n))]"},
         ".tf32_notes (a container a library holds"),
    ],
)
def test_a_container_a_module_holds_is_a_value_handed_around(cells: dict[int, str], found: str) -> None:
    """Round 127: a helper with a loop kept in ``torch.nn.functional.tf32_notes`` (a dict) or in
    ``typing.EXCLUDED_ATTRIBUTES`` (a list), and called from there by the answer, which read nothing else; round 128:
    in ``torch.distributions.Normal.arg_constraints``, a dict of a class."""
    loops = python_loops(cells, "segment_sum", modules=LAB_MODULES)
    assert any(found in loop for loop in loops), loops
    assert any("a comprehension in _rows" in loop for loop in loops), loops


def test_backward_kept_in_a_class_dict_is_read() -> None:
    """Round 128: a helper calling ``backward`` kept in ``torch.distributions.Normal.arg_constraints`` and called
    from there inside ``r1_penalty``, which named neither the helper nor ``backward``."""
    cells = {2: "def _grad(critic, x):\n    critic(x).sum().backward(inputs=[x], create_graph=True)\n"
                "    return x.grad\ntorch.distributions.Normal.arg_constraints.setdefault(4, _grad)",
             3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                                "g = torch.distributions.Normal.arg_constraints[4](critic, real)")}
    found = forbidden_calls(cells, "r1_penalty", "backward", module_aliases(SETUP_MODULES, "backward"),
                            modules=SETUP_MODULES)
    assert any("backward in _grad" in where for where in found), found


def test_a_module_s_functions_classes_and_constants_are_pinned() -> None:
    answer = ("import typing\ndef segment_sum(v: torch.Tensor, ids, n) -> typing.Optional[torch.Tensor]:\n"
              "    out = v.new_zeros((n, v.shape[1]), dtype=torch.float32 if math.pi > 3 else torch.long)\n"
              "    return F.relu(out.index_add_(0, ids, v)) + torch.inf * 0 + nn.Linear.__name__.count('x')")
    assert python_loops({3: answer}, "segment_sum", modules=LAB_MODULES) == []
    # round 128: typing's aliases in annotations were read as containers, and an honest answer lost its part
    hinted = ("import typing\ndef segment_sum(v: typing.Sequence[int], ids: typing.List[int], n: typing.Literal[3],"
              " f: typing.Callable[..., int] = None) -> typing.Tuple[int, ...]:\n"
              "    return v.new_zeros((n, v.shape[1])).index_add_(0, ids, v) + torch.float32.is_floating_point * 0")
    assert python_loops({3: hinted, 4: "def _rows(n):\n    return [b for b in range(n)]"}, "segment_sum",
                        modules=LAB_MODULES) == []


def test_a_tuple_a_module_holds_is_pinned_only_when_what_it_holds_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuple of lists holds lists: a helper appended to ``HELD[0]`` is fetched as ``HELD[0][-1]``."""
    held = types.ModuleType("ptgrader_test_held")
    held.HELD, held.SHAPES = ([],), ((1, 2), torch.float32, "names")
    monkeypatch.setitem(sys.modules, held.__name__, held)
    answer = ("import ptgrader_test_held as kept\ndef segment_sum(v, ids, n):\n"
              "    return v[torch.tensor(kept.HELD[0][-1](v, n))] * len(kept.SHAPES)")
    loops = python_loops({2: "def _rows(h, n):\n    return [b for b in range(n)]", 3: answer}, "segment_sum")
    assert any("kept.HELD (a value a module holds" in loop for loop in loops), loops
    assert not any("kept.SHAPES" in loop for loop in loops), loops


def test_a_value_a_helper_returns_and_an_object_read_from_are_not_handed_over() -> None:
    """Honest code that failed until round 119: a name bound to what a helper returns (``idx = _last(lengths)``) was
    read as the helper itself, and an object whose method is called inside an argument (``s.idx(n)``) as handed
    over; both lost the part."""
    helper = ("def _last(lengths):\n    return lengths - 1\ndef last_valid_token(h, lengths):\n"
              "    idx = _last(lengths)\n    return torch.index_select(h, 1, idx)")
    assert python_loops({3: helper}, "last_valid_token") == []
    method = ("class Shift:\n    def __init__(self, w):\n        self.w = w\n    def idx(self, n):\n"
              "        return n - self.w\ndef last_valid_token(h, lengths):\n    s = Shift(1)\n"
              "    return h[torch.arange(h.shape[0]), torch.as_tensor(s.idx(lengths))]")
    assert python_loops({3: method}, "last_valid_token") == []
    decorated = ("class Rows:\n    @staticmethod\n    def last(lengths):\n        return lengths - 1\n"
                 "@torch.no_grad()\ndef last_valid_token(h, lengths):\n"
                 "    return h[torch.arange(h.shape[0]), Rows.last(lengths)]")
    assert python_loops({3: decorated}, "last_valid_token") == []
    library = ("import functools\nfrom functools import lru_cache\nimport torch.nn\nclass Shift:\n"
               "    def __init__(self):\n        self._k = 1\n    @property\n    def k(self):\n        return self._k\n"
               "    @k.setter\n    def k(self, value):\n        self._k = value\n"
               "@functools.cache\ndef width(n):\n    return n\n@lru_cache(maxsize=None)\ndef height(n):\n    return n\n"
               "@torch.inference_mode()\ndef last_valid_token(h, lengths):\n"
               "    return h[torch.arange(width(h.shape[0])), lengths - Shift().k]")
    assert python_loops({3: library}, "last_valid_token") == []


def test_a_plain_class_that_keeps_its_object_to_itself_keeps_its_part() -> None:
    answer = ("class Scale:\n    def __init__(self, w):\n        self.w = w\n    def __enter__(self):\n        return self\n"
              "    def scaled(self, v):\n        return v * self.w if self is not None else v\n"
              "def segment_sum(v, ids, n):\n    return Scale(2).scaled(v)")
    assert python_loops({3: answer}, "segment_sum") == []


def test_a_local_rebound_elsewhere_is_not_recursion_nor_a_use() -> None:
    """An honest notebook: another part's function rebinds its own locals (``shape = tuple(shape)``), and the
    function under the rule reads ``values.shape``. Neither is the other's, and nothing calls itself."""
    cells = {
        3: VECTORISED.replace("return", "width = v.shape[1]\n    return"),
        6: "def expand_strides(shape, stride, target):\n    shape = (1,) * (len(target) - len(shape)) + tuple(shape)\n"
           "    n_new = len(shape)\n    n_new = n_new - len(stride)\n    return tuple(shape)",
        7: "shape = [d for d in (2, 3)]  # a module-level variable, read by no function",
    }
    assert python_loops(cells, "segment_sum") == []
    global_helper = "def setup():\n    global rows\n    rows = lambda v: [r for r in v]\n"
    cells = {3: global_helper + "def segment_sum(v, ids, n):\n    return rows(v)"}
    assert any("a comprehension in rows" in loop for loop in python_loops(cells, "segment_sum"))


def test_vectorised_code_and_loops_it_does_not_use_pass() -> None:
    honest_objects = ("class Scale:\n    def __init__(self, k):\n        self.k = k\n"
                      "    def __call__(self, v):\n        return v * self.k\n"
                      "def segment_sum(v, ids, n):\n    return Scale(1)(v)")  # a call of an object, no recursion
    assert python_loops({3: honest_objects}, "segment_sum") == []
    helper = ("class Shape:\n    def __init__(self, v):\n        self.rows = v.shape[0]\n"
              "def segment_sum(v, ids, n):\n    return v.new_zeros((Shape(v).rows, n)).index_add_(0, ids, v)")
    assert python_loops({3: helper}, "segment_sum") == []  # an object used for its attribute is not handed over
    cells = {
        3: VECTORISED,
        # Exploration elsewhere in the notebook, a local named like it, a magic: none is the function's.
        4: "out = [segment_sum(v, i, 3) for v, i in examples]\n%timeit segment_sum(v, i, 3)",
        5: "def other(x):\n    return [y for y in x]",
    }
    assert python_loops(cells, "segment_sum") == []
    assert python_loops({1: "def segment_sum(:\n"}, "segment_sum") == [  # nothing to read: the rule cannot hold
        "no definition of segment_sum that the grader can read"
    ]


PENALTY = (
    "def r1_penalty(critic, real, gamma):\n    real = real.detach().requires_grad_()\n"
    "    (g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)\n"
    "    return gamma / 2 * g.pow(2).flatten(1).sum(1).mean()"
)


def test_a_forbidden_call_is_read_from_the_test_cells_own_lines() -> None:
    assert call_rules("x = 1\n# ptgrader: no call of backward in r1_penalty\n") == [("backward", "r1_penalty")]
    assert call_rules("# ptgrader: no call of backward\n# no call of backward in f\n") == []


@pytest.mark.parametrize(
    ("cells", "found"),
    [
        # The same gradient through .backward(), with .grad cleared afterwards: no kernel check can tell.
        ({3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                             "critic(real).sum().backward(create_graph=True)\n    g, real.grad = real.grad, None")},
         "backward in r1_penalty (notebook cell 4, line 3)"),
        ({3: "from torch.autograd import backward as bw\n" + PENALTY.replace(
            "(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
            "bw(critic(real).sum(), inputs=[real], create_graph=True)\n    g = real.grad")},
         "backward in bw (notebook cell 4, line 1)"),
        ({3: PENALTY.replace("torch.autograd.grad(", "getattr(torch.autograd, 'backward')(")}, "backward in"),
        # In a helper of another cell that the function uses.
        ({2: "def grads(out, x):\n    torch.autograd.backward(out, inputs=[x])\n    return x.grad",
          3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                             "g = grads(critic(real).sum(), real)")},
         "backward in grads (notebook cell 3, line 2)"),
        ({3: "def penalty(c, r, g):\n    return 0"}, "no definition of r1_penalty"),
        # Round 116: the attribute named in a class pattern, which ast holds as a plain string.
        ({3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                             "match critic(real).sum():\n        case object(backward=run):\n            pass\n"
                             "    run(inputs=[real], create_graph=True)\n    g, real.grad = real.grad, None")},
         "backward in r1_penalty (notebook cell 4, line 4)"),
        ({3: PENALTY.replace("(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
                             "match [critic(real).sum()]:\n        case [object(backward=object(__call__=run))]:\n"
                             "            run(inputs=[real], create_graph=True)\n    g = real.grad")},
         "backward in r1_penalty"),
        ({3: "import operator\n" + PENALTY.replace(
            "(g,) = torch.autograd.grad(critic(real).sum(), real, create_graph=True)",
            "operator.attrgetter('sum.backward')(critic(real))(inputs=[real], create_graph=True)\n    g = real.grad")},
         "backward in r1_penalty"),
    ],
)
def test_a_forbidden_call_anywhere_the_function_reaches_breaks_the_rule(cells: dict[int, str], found: str) -> None:
    assert any(found in where for where in forbidden_calls(cells, "r1_penalty", "backward"))


def test_the_allowed_mechanism_and_code_the_function_does_not_use_pass() -> None:
    cells = {2: "def train(loss):\n    loss.backward()", 3: PENALTY}
    assert forbidden_calls(cells, "r1_penalty", "backward") == []


STRIDES = "def expand_strides(shape, stride, target):\n    return tuple(0 for _ in target)"
#: The names lab 01's set-up binds to torch's modules (``policy.setup_module_names`` of its locked cells).
TORCH_NAMES = module_aliases({"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "math": "math",
                              "ptlabs": "ptlabs"}, "torch")


@pytest.mark.parametrize(
    ("cells", "found"),
    [
        # round 86: torch's own broadcasting rule, plain Python, which no in-kernel count of torch calls sees
        ({4: STRIDES.replace("return", "torch.broadcast_shapes(tuple(shape), tuple(target))\n    return")},
         "torch in expand_strides (notebook cell 5, line 2)"),
        ({4: "from torch import broadcast_shapes as fits\n" + STRIDES.replace("return", "fits(shape, target)\n    return")},
         "torch in fits (notebook cell 5, line 1)"),
        ({4: "import torch.nn as layers\n" + STRIDES.replace("return", "layers.Module\n    return")}, "torch in layers"),
        ({4: STRIDES.replace("return", "F.pad\n    return")}, "torch in expand_strides (notebook cell 5, line 2)"),
        ({4: STRIDES.replace("return", "nn.Identity\n    return")}, "torch in expand_strides"),
        ({4: STRIDES.replace("return", "__import__('torch')\n    return")}, "torch in expand_strides"),
    ],
)
def test_a_module_forbidden_is_forbidden_under_every_name_the_lab_gave_it(cells: dict[int, str], found: str) -> None:
    assert TORCH_NAMES == {"torch", "F", "nn", "ptlabs"}  # ptlabs hands out torch objects (round 104)
    assert any(found in where for where in forbidden_calls(cells, "expand_strides", "torch", TORCH_NAMES))


LOOPING = "def looping_sum(v, ids, n):\n    for r in v.tolist():\n        pass\n    return v\n"
CALLS_HELPER = "def segment_sum(v, ids, n):\n    return {}(v, ids, n)\n"
#: A class whose method does the work honestly, and a context manager that hands out the loop (round 105).
HOLDER = "class Holder:\n    def impl(self, v, ids, n):\n        return v\n"
WITH_TARGET = ("class Ctx:\n    def __enter__(self):\n        return staticmethod(looping_sum)\n"
               "    def __exit__(self, *exc):\n        return False\nwith Ctx() as {}:\n    pass\n")


@pytest.mark.parametrize(
    "binding",
    [
        # Round 93: names bound or changed by statements other than an assignment or a definition.
        "HELPERS = []\nHELPERS.append(looping_sum)\n" + CALLS_HELPER.format("HELPERS[0]"),
        "HELPERS = []\nalias = HELPERS\nalias.append(looping_sum)\n" + CALLS_HELPER.format("HELPERS[0]"),
        "HELPERS = []\ndef setup():\n    HELPERS.append(looping_sum)\nsetup()\n" + CALLS_HELPER.format("HELPERS[0]"),
        "HELPERS = [None]\nHELPERS[0] = looping_sum\n" + CALLS_HELPER.format("HELPERS[0]"),
        "(helper := looping_sum)\n" + CALLS_HELPER.format("helper"),
        "for helper in [looping_sum]:\n    pass\n" + CALLS_HELPER.format("helper"),
        "match looping_sum:\n    case helper:\n        pass\n" + CALLS_HELPER.format("helper"),
        "with open('x') as _:\n    pass\ntry:\n    raise ValueError(looping_sum)\nexcept ValueError as caught:\n"
        "    pass\n" + CALLS_HELPER.format("caught.args[0]"),
        "HELPERS = []\n@HELPERS.append\n" + LOOPING + CALLS_HELPER.format("HELPERS[0]"),
        # Round 95: kept in a list a class's body binds, or in a mutable default argument.
        "class Registry:\n    items = []\nRegistry.items.append(looping_sum)\n" + CALLS_HELPER.format("Registry.items[0]"),
        "def segment_sum(v, ids, n, _box={}, _install=None):\n    if _install:\n        _box['f'] = _install\n"
        "        return None\n    return _box['f'](v, ids, n)\nsegment_sum(None, None, 0, _install=looping_sum)\n",
        # Round 94: set on a class by a classmethod called through an alias.
        "class Registry:\n    @classmethod\n    def store(cls, f):\n        cls.f = f\nput = Registry.store\n"
        "put(looping_sum)\n" + CALLS_HELPER.format("Registry.f"),
        # Round 96: a method the class body defines, replaced by an installer.
        "class Registry:\n    def impl(v, ids, n):\n        return v\ndef install(g):\n    Registry.impl = g\n"
        "install(looping_sum)\n" + CALLS_HELPER.format("Registry.impl"),
        # Round 94: handed over by a call, kept in a closure cell.
        "HELPERS = []\ndef install(f):\n    HELPERS.append(f)\ninstall(looping_sum)\n" + CALLS_HELPER.format("HELPERS[0]"),
        "def make():\n    kept = [None]\n    def pick(f):\n        kept[0] = f\n    return pick, lambda: kept[0]\n"
        "pick, get = make()\npick(looping_sum)\n" + CALLS_HELPER.format("get()"),
        # Round 97: handed over by decorators of any shape, a lambda, or a library function kept as a value.
        "HELPERS = []\n@(lambda f: HELPERS.append(f) or f)\n" + LOOPING + CALLS_HELPER.format("HELPERS[0]"),
        "HELPERS = []\n@[HELPERS.append][0]\n" + LOOPING + CALLS_HELPER.format("HELPERS[0]"),
        "PARTS = []\n@(lambda c: PARTS.append(c()) or c)\nclass Part:\n    def __call__(self, v, ids, n):\n"
        "        return looping_sum(v, ids, n)\n" + CALLS_HELPER.format("PARTS[0]"),
        "HELPERS = []\nHELPERS.append(lambda v, ids, n: [r for r in v])\n" + CALLS_HELPER.format("HELPERS[0]"),
        "import functools\nHELPERS = [functools.partial(map, abs)]\n" + CALLS_HELPER.format("HELPERS[0]"),
        # Round 98: a closure over another function's argument; a def or a lambda rebound by a statement.
        "def make(*tools):\n    global helper\n    def helper(v, ids, n):\n        return tools[0](v, ids, n)\n"
        "make(looping_sum)\ndef segment_sum(v, ids, n):\n    assert make\n    return helper(v, ids, n)\n",
        "helper = lambda v, ids, n: v\n(helper := looping_sum)\n" + CALLS_HELPER.format("helper"),
        "def helper(v, ids, n):\n    return v\nfor helper in [looping_sum]:\n    pass\n" + CALLS_HELPER.format("helper"),
        "def helper(v, ids, n):\n    return v\nmatch looping_sum:\n    case helper:\n        pass\n"
        + CALLS_HELPER.format("helper"),
        "def helper(v, ids, n):\n    return v\ndef install():\n    global helper\n    for helper in [looping_sum]:\n"
        "        pass\ninstall()\n" + CALLS_HELPER.format("helper"),
        # Round 99: a name the answer declares global, bound at the top of a cell; IPython's output history.
        "impl = looping_sum\ndef segment_sum(v, ids, n):\n    global impl\n    if v is None:\n        impl = None\n"
        "    return impl(v, ids, n)\n",
        "looping_sum\n" + CALLS_HELPER.format("_"),
        # Round 100: the answer's own name, bound to the loop by a statement after an honest def.
        VECTORISED + "\nfor segment_sum in [looping_sum]:\n    pass\n",
        VECTORISED + "\n(segment_sum := looping_sum)\n",
        VECTORISED + "\nmatch looping_sum:\n    case segment_sum:\n        pass\n",
        # Round 101: a class body declares a helper global and binds it to the loop with a for.
        "def helper(v, ids, n):\n    return v\nclass Holder:\n    global helper\n    for helper in [looping_sum]:\n"
        "        pass\n" + CALLS_HELPER.format("helper"),
        "looping_sum\n" + CALLS_HELPER.format("_0"),
        # Round 105: a with statement's target on a class attribute swapped a method read through an object.
        HOLDER + WITH_TARGET.format("Holder.impl") + CALLS_HELPER.format("Holder().impl"),
        HOLDER + WITH_TARGET.format("Holder.impl") + "class Sub(Holder):\n    pass\n"
        + CALLS_HELPER.format("Sub().impl"),
        HOLDER.replace("    def impl", "    def __call__(self, v, ids, n):\n        return self.impl(v, ids, n)\n"
                       "    def impl") + WITH_TARGET.format("Holder.impl") + CALLS_HELPER.format("Holder()"),
        HOLDER + WITH_TARGET.format("Holder.impl") + CALLS_HELPER.format("[Holder][0]().impl"),
        # ...and a class attribute the class body binds to a value the reading cannot pin, read through an object.
        "HELPERS = [looping_sum]\nclass Holder:\n    impl = HELPERS[0]\n" + CALLS_HELPER.format("Holder().impl"),
    ],
)
def test_a_loop_reached_through_a_name_a_statement_binds_or_changes_breaks_the_rule(binding: str) -> None:
    found = python_loops({2: LOOPING, 3: binding}, "segment_sum")
    assert any("looping_sum" in where for where in found), found


#: Lab 01's set-up names (``policy.setup_module_names`` of its locked cells).
SETUP_MODULES = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "math": "math", "ptlabs": "ptlabs"}
#: Each answer reads what a statement elsewhere keeps: ``TOOLS[0]``, ``STEPS[0]``.
READS_TOOLS = STRIDES.replace("return", "TOOLS[0](shape)\n    return")
READS_STEPS = PENALTY.replace("torch.autograd.grad(", "STEPS[0](")


def test_a_set_up_module_that_uses_the_forbidden_module_counts_as_it() -> None:
    """Round 104: ``ptlabs.SlowSquares(1)[0]`` is a tensor, whose methods did expand_strides' work with torch."""
    assert {"ptlabs", "torch", "F", "nn"} <= module_aliases(SETUP_MODULES, "torch")
    assert "math" not in module_aliases(SETUP_MODULES, "torch")
    through_ptlabs = STRIDES.replace("return", "base = ptlabs.SlowSquares(1)[0]\n    return")
    assert forbidden_calls({3: through_ptlabs}, "expand_strides", "torch", module_aliases(SETUP_MODULES, "torch"))


@pytest.mark.parametrize(
    ("kept", "function", "callee"),
    [
        ("TOOLS = []\nTOOLS.append(torch.broadcast_shapes)", "expand_strides", "torch"),  # round 93
        ("TOOLS = []\ndef install(f):\n    TOOLS.append(f)\ninstall(torch.broadcast_shapes)", "expand_strides",
         "torch"),  # round 94
        ("TOOLS = [F.pad]", "expand_strides", "torch"),
        ("import functools\nTOOLS = [functools.partial(torch.broadcast_shapes, (1,))]", "expand_strides", "torch"),
        ("class Tools:\n    items = []\nTools.items.append(torch.broadcast_shapes)\nTOOLS = Tools.items", "expand_strides",
         "torch"),  # round 95
        ("STEPS = []\nSTEPS.append(torch.Tensor.backward)", "r1_penalty", "backward"),  # round 93
        ("STEPS = []\ndef install(f):\n    STEPS.append(f)\ninstall(torch.autograd.backward)", "r1_penalty",
         "backward"),  # round 94
        # Round 97: inside a call or an item read, wrapped, or returned through a local of another function.
        ("TOOLS = []\nTOOLS.append(tuple([torch.broadcast_shapes])[0])", "expand_strides", "torch"),
        ("import functools\nTOOLS = []\nfor TOOL in [functools.lru_cache(torch.broadcast_shapes)]:\n"
         "    TOOLS.append(TOOL)", "expand_strides", "torch"),
        ("def get():\n    f = torch.broadcast_shapes\n    return f\nTOOLS = []\nTOOLS.append(get())",
         "expand_strides", "torch"),
        ("HELPERS = []\n@(lambda f: HELPERS.append(f) or f)\ndef helper(s):\n    return torch.broadcast_shapes(*s)\n"
         "TOOLS = HELPERS", "expand_strides", "torch"),
        ("STEPS = []\n@[STEPS.append][0]\ndef step(loss, x):\n    loss.backward(inputs=[x], create_graph=True)\n",
         "r1_penalty", "backward"),
        # Round 98: a lambda rebound by := to a forbidden function, which the answer then reads as TOOLS / STEPS.
        ("TOOLS = [lambda s: s]\n(TOOLS := [torch.broadcast_shapes])", "expand_strides", "torch"),
        ("STEPS = [lambda *a: None]\n(STEPS := [torch.autograd.backward])", "r1_penalty", "backward"),
    ],
)
def test_a_forbidden_callable_kept_as_a_value_breaks_the_rule(kept: str, function: str, callee: str) -> None:
    """The rule as the grader applies it (``ptgrader.execute``): what the function names, and callables kept as
    values where it may reach them."""
    cells = {3: kept, 4: READS_TOOLS if callee == "torch" else READS_STEPS}
    aliases = module_aliases(SETUP_MODULES, callee)
    assert forbidden_calls(cells, function, callee, aliases) + forbidden_values(cells, function, callee, SETUP_MODULES)


def test_a_value_the_lab_s_cells_made_is_handed_around() -> None:
    """Round 107: the bootstrap cell's ``origin`` dict, filled by ``origin.update(impl=...)`` (a method call, no
    name bound), read as ``origin["impl"]``."""
    answer = CALLS_HELPER.format('origin["impl"]')
    assert python_loops({2: LOOPING, 3: "origin.update(impl=looping_sum)\n" + answer}, "segment_sum",
                        frozenset({"origin"}))
    assert python_loops({2: LOOPING, 3: "def fill(d):\n    d['impl'] = looping_sum\nfill(origin)\n" + answer},
                        "segment_sum", frozenset({"origin"}))
    # round 111: a test cell's tensor, only read, did the work with torch's methods: any value of the lab's counts
    assert python_loops({2: LOOPING, 3: "print(origin.get('impl'))\n" + answer}, "segment_sum",
                        frozenset({"origin"}))
    assert python_loops({2: LOOPING, 3: "print(origin)\n" + VECTORISED}, "segment_sum", frozenset({"origin"})) == []


def test_a_memoised_helper_called_elsewhere_hands_back_what_it_was_given() -> None:
    """Round 112: ``@functools.cache`` on an identity helper, called at the top of a cell with an object of the
    student's class, handed that object to the answer (its argument compared equal), whose subscript ran the
    class's code. A memoised helper only the answer calls stays its own."""
    memo = "import functools\n@functools.cache\ndef table(key):\n    return key\n"
    half = "class Half(float):\n    def __getitem__(self, item):\n        return looping_sum(*item)\n"
    answer = "def segment_sum(v, ids, n):\n    return table(0.5)[v, ids, n]\n"
    assert python_loops({2: LOOPING, 3: memo + half + "table(Half(0.5))\n" + answer}, "segment_sum")
    assert python_loops({2: LOOPING, 3: memo + "def segment_sum(v, ids, n):\n    return table(v)\n"},
                        "segment_sum") == []


def test_a_method_swapped_by_a_with_target_is_not_the_class_body_s() -> None:
    """Round 105: ``with Ctx() as Steps.run`` at the top of a cell swapped an honest method for one that calls
    backward, and the answer read it as ``Steps().run``."""
    swap = ("def step(loss, x):\n    loss.backward(inputs=[x], create_graph=True)\n"
            "class Steps:\n    def run(self, loss, x):\n        return None\n"
            + WITH_TARGET.replace("looping_sum", "step").format("Steps.run"))
    cells = {3: swap, 4: PENALTY.replace("torch.autograd.grad(", "Steps().run(")}
    assert forbidden_calls(cells, "r1_penalty", "backward", module_aliases(SETUP_MODULES, "backward"))


def test_torch_values_elsewhere_do_not_reach_an_answer_that_reads_none() -> None:
    """Honest code elsewhere in the notebook: torch's dtypes and classes, torch functions handed to torch itself or
    kept, while the answer reads only its arguments and torch."""
    cells = {3: "x = torch.zeros(3, dtype=torch.float32).to(torch.float64)\nok = isinstance(x, torch.Tensor)\n"
                "d = torch.vmap(torch.dot)(x[None], x[None])\nloss = (x * 2).sum()\nloss.backward()\n"
                "ops = [torch.add, torch.Tensor.backward]",
             4: STRIDES, 5: PENALTY}
    assert forbidden_values(cells, "expand_strides", "torch", SETUP_MODULES) == []
    assert forbidden_values(cells, "r1_penalty", "backward", SETUP_MODULES) == []
    kept = {3: "x = torch.zeros(3, dtype=torch.float32)\nok = isinstance(x, torch.Tensor)\nTOOLS = [len]", 4: READS_TOOLS}
    assert forbidden_values(kept, "expand_strides", "torch", SETUP_MODULES) == []  # nothing of torch's kept


def test_honest_code_round_95_failed_keeps_its_part() -> None:
    """A torch function bound to a local of another part's function keeps nothing where the answer reads it; a
    constant from torch (``torch.long``) and an ``except ... as error`` inside the answer are pinned."""
    strides = STRIDES.replace("return", "try:\n        len(shape)\n    except TypeError as error:\n"
                                        "        raise ValueError('a shape') from error\n    return")
    pairwise = "def pairwise_sq_dists(a, b):\n    total = torch.sum\n    return total((a[:, None] - b) ** 2, -1)"
    assert forbidden_values({3: strides, 4: pairwise}, "expand_strides", "torch", SETUP_MODULES) == []
    constant = ("INDEX_DTYPE = torch.long\ndef last_valid_token(h, lengths):\n"
                "    return h[torch.arange(h.shape[0]), (lengths - 1).to(INDEX_DTYPE)]\n"
                "def slow(h, lengths):\n    return torch.stack([h[i, n - 1] for i, n in enumerate(lengths)])\n"
                "for fn in (last_valid_token, slow):\n    print(fn(_h, _l))")
    assert python_loops({3: constant}, "last_valid_token") == []
    # Round 96: a default made by torch (a device) is a value the reading knows, beside a loop-based checker.
    checked = ("def segment_sum(v, ids, n, *, device=torch.device('cpu')):\n    return v.new_zeros((n,)).index_add_(0, ids, v)\n"
               "def naive(v, ids, n):\n    return [sum(v[ids == s]) for s in range(n)]\nprint(agree(segment_sum, naive))")
    assert python_loops({3: checked}, "segment_sum") == []


def test_honest_code_round_97_failed_keeps_its_part() -> None:
    """A set of dtypes only looked up (``x.dtype in INDEX_DTYPES``), and a helper nested in the answer that reads the
    answer's own arguments, beside a loop-based checker of the student's: none is a value handed around."""
    checked = ("INDEX_DTYPES = {torch.int32, torch.int64}\ndef last_valid_token(h, lengths):\n"
               "    if lengths.dtype not in INDEX_DTYPES:\n        raise TypeError('lengths')\n"
               "    return h[torch.arange(h.shape[0], device=h.device), lengths - 1]\n"
               "def slow_reference(h, lengths):\n    return torch.stack([h[i, n - 1] for i, n in enumerate(lengths)])\n"
               "print(agree(last_valid_token, slow_reference))")
    assert python_loops({3: checked}, "last_valid_token") == []
    nested = ("def segment_sum(v, ids, n):\n    def scatter(out):\n        return out.index_add_(0, ids, v)\n"
              "    return scatter(v.new_zeros((n, v.shape[1])))\n"
              "def naive(v, ids, n):\n    return [v[ids == s].sum(0) for s in range(n)]")
    assert python_loops({3: nested}, "segment_sum") == []
    changed = checked.replace("print(", "INDEX_DTYPES.add(torch.int16)\nprint(")  # no longer as written
    assert any("slow_reference" in loop for loop in python_loops({3: changed}, "last_valid_token"))
    # Round 98: the set named in an error message, made by frozenset, and a table of dtypes read with .get.
    named = checked.replace("raise TypeError('lengths')", "raise TypeError(f'lengths: one of {INDEX_DTYPES}')")
    assert python_loops({3: named}, "last_valid_token") == []
    frozen = checked.replace("{torch.int32, torch.int64}", "frozenset({torch.int32, torch.int64})")
    assert python_loops({3: frozen}, "last_valid_token") == []
    table = ("WIDER = {torch.float16: torch.float32, torch.bfloat16: torch.float32}\n"
             "def segment_sum(v, ids, n):\n    wide = WIDER.get(v.dtype, v.dtype)\n"
             "    return v.new_zeros((n,), dtype=wide).index_add_(0, ids, v.to(wide)).to(v.dtype)\n"
             "def naive(v, ids, n):\n    return [v[ids == s].sum(0) for s in range(n)]")
    assert python_loops({3: table}, "segment_sum") == []
    # Round 99: past 64 cells (the parse cache's size), a nested helper still reads the answer's own argument.
    nested_helper = ("def last_valid_token(h, lengths):\n    def last_positions():\n        return lengths - 1\n"
                     "    return h[torch.arange(h.shape[0], device=h.device), last_positions()]\n"
                     "def slow(h, lengths):\n    return [h[i, n - 1] for i, n in enumerate(lengths)]")
    scratch = {index: f"print(torch.arange({index}).shape)" for index in range(4, 80)}
    assert python_loops({3: nested_helper, **scratch}, "last_valid_token") == []


def test_code_that_only_calls_the_function_is_not_part_of_it() -> None:
    """A student's own test code, a loop calling the function at the top of a cell, ``torch`` imported again, a
    check through ``.tolist()``: none of it is the function's (round 94: such code failed honest answers)."""
    cells = {3: VECTORISED, 4: "import torch\nEPS = 1e-6\nfor n in range(3):\n    print(segment_sum(values, ids, n), EPS)\n"
                                "sizes = [segment_sum(values, ids, n).shape for n in range(3)]\n"
                                "print(segment_sum(torch.ones(3, 2), torch.tensor([0, 1, 0]), 2).tolist())"}
    assert python_loops(cells, "segment_sum") == []
    checks = {3: PENALTY, 4: "import torch\ncritic = torch.nn.Linear(3, 1)\n"
                             "penalty = r1_penalty(critic, torch.randn(2, 3), 1.0)\npenalty.backward()"}
    assert forbidden_calls(checks, "r1_penalty", "backward") == []
    assert forbidden_values(checks, "r1_penalty", "backward") == []


def test_integer_arithmetic_names_no_torch() -> None:
    cells = {3: "import math\n\ndef scratch(x):\n    return torch.empty_strided((2,), (1,), device='meta')",
             4: STRIDES.replace("return", "math.prod(shape)\n    return")}
    assert forbidden_calls(cells, "expand_strides", "torch", TORCH_NAMES) == []


class _ParsesWhenCollected:
    """Garbage in a cycle whose finalizer parses, as asyncio's logged tracebacks do on Python 3.11."""

    def __del__(self) -> None:
        ast.parse("x = 1")


def _parse_beside_garbage(parse_with: Callable[[str], ast.Module]) -> ast.Module:
    """``parse_with`` on 3,000 lines while 200 such objects wait for a collector that runs every 50 allocations."""
    source = "\n".join(f"v{i} = [{i}, ({i}, {{'k': {i}}})]" for i in range(3000))
    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(50)
    try:
        for _ in range(200):
            cycle = _ParsesWhenCollected()
            cycle.me = cycle
        del cycle
        return parse_with(source)
    finally:
        gc.set_threshold(*threshold)
        gc.collect()


def test_a_parse_is_never_interrupted_by_a_finalizer_that_parses() -> None:
    """The grader's parse pauses the collector: a finalizer that parses during a parse made Python 3.11 raise
    "AST constructor recursion depth mismatch", and a student's submission ended unprocessed in make test."""
    try:
        _parse_beside_garbage(ast.parse)
    except SystemError as error:  # the interpreter's bug the pause avoids (Python 3.11.2, these tests' Python)
        assert "recursion depth mismatch" in str(error)
    assert len(_parse_beside_garbage(parse).body) == 3000
