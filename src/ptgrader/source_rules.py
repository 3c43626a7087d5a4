"""Rules about how an answer is written, read from its source by the grader, never decided in the kernel.

A part that says "no Python loop" was checked only inside the kernel, by counting torch calls for a
small and a large input: code that got past the code policy could forge that count, and a loop over
``values.tolist()`` makes no torch call at all. The grader reads the rule from the lab's own test
cell (a trusted line of the source, :data:`RULE`), then reads the student's cells (the bodies of
magics such as ``%%time`` included): the function the rule names, and every function, class,
method, import or name of the student's that it uses, however deep and wherever defined (in a
class, under an ``if``). Any Python iteration there breaks the rule:

- ``for`` and ``while`` loops, comprehensions and generator expressions;
- ``map``, ``filter``, ``reduce`` and ``itertools``' iterators, under any name (``from functools
  import reduce as fold``, ``fold = functools.reduce``), and a ``key=`` function (``sorted``, ``min``,
  ``max``, ``list.sort``), which runs once per item;
- ``iter`` and ``next`` (``list(iter(step, None))`` is a loop), ``Counter``, and any special method of the
  student's but ``__init__``, ``__call__`` and the few others Python calls once per call (:data:`ONCE_PER_CALL`):
  a built-in calls ``__iter__``, ``__len__``, ``__repr__`` or ``__eq__`` once per item of a container;
- a function, lambda, class or callable object of the student's handed to other code as a value
  (``defaultdict(pick)``, ``re.sub(pattern, pick, text)``), which may call it once per item, or kept where other
  code gets it: returned, stored in an attribute, an item or a container (``return [pick]``, ``walker.peers =
  [walker]``), a method returning ``self`` (:func:`_kept_as_values`);
- ``.tolist()``, ``.item()`` and ``.numpy()``, which move values into Python, where work per element needs
  no torch call (the meta device, part of these parts' domains, has no values to move anyway);
- code run from a string, read where the call that runs it is (:class:`_CodeInPlace`): a Timer's ``stmt`` and
  ``setup`` and ``%timeit``'s statement as a loop (they run once per timing loop), ``%time``'s once; and a
  Timer's ``timeit``, ``repeat`` and ``autorange``, under any name;
- recursion: a function that reaches itself through any chain of the student's functions or methods (the
  methods Python calls unnamed included: ``self(...)`` calls ``__call__``), or calls one of its own
  arguments (``pick(rows, again)`` calling ``again``, given ``pick`` itself).

An answer that reads a value the reading cannot pin down (:func:`_unpinned`: a name, a class's attribute or a
default argument the student binds other than by a ``def``, a ``class``, an import or a constant) is read with
everything the student wrote: every function, class and lambda in any cell, every function of a forbidden
module used as a value anywhere, and anything that iterates handed around as a value (``partial(map, f)``,
``HELPERS.append(sorted)``). Once a value is handed around, no reading can tell what it holds: rounds 93 to 97
handed a function over through a list filled at the top of a cell, an installer, a closure, a class attribute, a
mutable default, and decorators of every shape (``@(lambda f: HELPERS.append(f) or f)``, ``@[HELPERS.append][0]``).
A name a ``def`` or a lambda binds is a value handed around too once any other statement binds it (round 98: a
``for``, ``match``, ``with`` or ``:=`` at the top of a cell), and so is another function's argument that a helper
nested in it reads (round 98: ``make(_pick)`` defining a global helper over ``tools``), a name the answer declares
``global`` (round 99), and IPython's output history (round 99: a bare expression at the end of a cell binds ``_``
and ``_0``, with no assignment in the source). A definition read under a name a statement binds again is not what
runs either (round 100: ``for last_valid_token in [_pick]`` after an honest ``def``). An honest answer reads its
arguments, torch, constants (a list, set or dict of them that is only read counts: ``x.dtype in INDEX_DTYPES``,
``WIDER.get(dtype)``, ``frozenset({...})``), its own functions, and, in helpers nested in it, its own arguments and
locals: none of these, so nothing another part does reaches it.

A function the rule names that the reader cannot find breaks the rule too. The in-kernel count
stays, for iteration no reading can see (``sum(x.unbind(0))``).

A part may also forbid one call (``# ptgrader: no call of backward in r1_penalty``, :data:`CALL_RULE`)
where a forbidden mechanism gives the same numbers: ``loss.backward(create_graph=True)`` computes the
gradient ``torch.autograd.grad`` would, and clearing ``.grad`` afterwards hides it from every check a
kernel can run. Any use of the name in what the function reaches breaks the rule: an attribute
(``t.backward``, ``torch.autograd.backward``), a plain name, an import of it under any alias, or a
string equal to it (``getattr(t, "backward")``). The name may be a module (``# ptgrader: no call of torch in
expand_strides``): then an import from it, and every name the lab's own cells bound to it or to one of its
submodules (the set-up's ``F`` and ``nn``), count too. Round 86: the in-kernel count of torch calls sees only what
goes through ``__torch_function__``, and ``torch.broadcast_shapes`` is plain Python.
"""

from __future__ import annotations

import ast
import copy
import enum
import functools
import importlib
import inspect
import re
import sys
import textwrap
import types
import typing
import warnings
from collections.abc import Iterator
from typing import NamedTuple

from .ipython_code import as_python, parse
from .library_containers import LIBRARY_CONTAINERS
from .policy import _BY_NAME, _TIMER_CODE, ALLOWED_MAGICS, _last_name, _magic_code, root_name


#: The line of a test cell that asks for no Python loop in a function of the student's.
RULE = re.compile(r"^\s*# ptgrader: no Python loop in (\w+)\s*$", re.MULTILINE)
_LOOPS = {
    ast.For: "a for loop", ast.AsyncFor: "a for loop", ast.While: "a while loop", ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension", ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression",
}
#: Functions that call another function once per item, whatever they are named where they are used; ``iter``
#: and ``next`` drive an iterator (``list(iter(step, None))`` is a loop), ``Counter`` counts item by item.
ITERATING = frozenset({
    "map", "filter", "reduce", "accumulate", "starmap", "product", "chain", "repeat", "cycle", "groupby",
    "islice", "takewhile", "dropwhile", "filterfalse", "zip_longest", "combinations", "permutations", "tee",
    "iter", "next", "Counter",
    # a Timer's methods that run its statement once per timing loop (round 125: ``timer.timeit(len(rows))``)
    "timeit", "autorange", "blocked_autorange", "adaptive_autorange", "collect_callgrind",
})
#: The only methods of the student's that Python calls once per call or per object made: every other special
#: method (``__len__``, ``__repr__``, ``__eq__``, ``__instancecheck__`` ...) a built-in calls once per item when it
#: works through a container of such objects (``repr([obj] * n)`` calls ``__repr__`` n times; ``any([obj] * n)``
#: calls ``__len__``, ``isinstance(x, (C,) * n)`` a metaclass's ``__instancecheck__``). Rounds 53 and 62 looped
#: over a batch that way, with no loop, comprehension or ``map`` in the source, through a list of such methods
#: that lacked the next one; now any special method but these is iteration. These run per item only when their
#: function, class or object is handed to other code, which :func:`_handed_over` finds.
ONCE_PER_CALL = frozenset({"__init__", "__new__", "__post_init__", "__call__", "__enter__", "__exit__"})
#: Tensor methods that move values into Python, where work per element needs no torch call at all.
TO_PYTHON = frozenset({"tolist", "item", "numpy", "untyped_storage", "storage"})  # bytes(t.untyped_storage()): round 117
#: IPython's own calls for magics: their string arguments are code the cell runs.
_MAGICS = frozenset({"run_cell_magic", "run_line_magic"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


#: The line of a test cell that forbids one call in a function of the student's.
CALL_RULE = re.compile(r"^\s*# ptgrader: no call of (\w+) in (\w+)\s*$", re.MULTILINE)


def loop_rules(test_source: str) -> list[str]:
    """The functions a test cell's trusted source asks to have no Python loop."""
    return RULE.findall(test_source)


def call_rules(test_source: str) -> list[tuple[str, str]]:
    """(forbidden name, function) of each call a test cell's trusted source forbids."""
    return CALL_RULE.findall(test_source)


@functools.lru_cache(maxsize=64)
def _parse(source: str, depth: int = 0) -> tuple[ast.Module, ...]:
    """The cell as Python, and the code inside its magics (``%%time``'s body, ``%time``'s statement).

    Kept for the same source, at most 64 (a lab's cells), so that the several readings of one submission parse
    each cell once and a large class never holds more than one submission's trees. Nothing changes a tree once it
    is parsed, and no reading relies on meeting the same node objects again (:func:`_span`; round 99: a
    submission of more than 64 cells was read otherwise)."""
    try:
        # code run from a string is read as IPython or a Timer reads it: magics turned into calls, indentation
        # taken off (round 126: an indented Timer statement, and %time's statement that is itself a magic)
        code = as_python(source if depth == 0 else textwrap.dedent(source))
        tree = _CodeInPlace(depth).visit(_ReadsByName().visit(parse(code)))
    except (SyntaxError, ValueError):
        return ()  # a cell that does not parse fails on its own when it runs
    found: tuple[ast.Module, ...] = (tree,)
    if depth < _DEEPEST:
        for node in ast.walk(tree):
            if _is_magic(node):
                for code, _ in _code_strings(node):  # type: ignore[arg-type]
                    found += _parse(code, depth + 1)
    return found


def _is_magic(node: ast.AST) -> bool:
    """Whether ``node`` is IPython's call for a magic (``get_ipython().run_line_magic("time", "...")``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MAGICS


def _code_strings(call: ast.Call) -> list[tuple[str, bool]]:
    """(code, whether it runs once per timing loop) of every string ``call`` runs as code: a Timer's statement and
    set-up (its ``timeit``, ``repeat`` and ``autorange`` run them in a loop), the code of ``%timeit`` (a loop) and of
    ``%time``, read after their options as IPython reads them (``%timeit -n1 -r1 STMT``), and every string of any
    other magic. Anything else runs no string."""
    if _last_name(call.func) == "Timer":
        pieces = [*zip(_TIMER_CODE, call.args, strict=False)]
        pieces += [(keyword.arg, keyword.value) for keyword in call.keywords if keyword.arg in _TIMER_CODE]
        return [(value.value, True) for _, value in pieces
                if isinstance(value, ast.Constant) and isinstance(value.value, str)]
    if not _is_magic(call) or not all(isinstance(argument, ast.Constant) and isinstance(argument.value, str)
                                      for argument in call.args):
        return []
    if len(call.args) >= 2 and call.args[0].value in ALLOWED_MAGICS:  # type: ignore[attr-defined]
        repeated = call.args[0].value == "timeit"  # type: ignore[attr-defined]
        return [(code, repeated) for _, code in _magic_code(call) if code is not None]
    return [(argument.value, False) for argument in call.args[1:]]  # type: ignore[attr-defined]


class _TimedCode(ast.While):
    """Code a Timer or ``%timeit`` runs from a string, read where the call that holds it is (:class:`_CodeInPlace`):
    a loop, since it runs once per timing loop."""


class _UnreadCode(ast.Expr):
    """A code string the reading cannot read, nested deeper than it goes (:data:`_DEEPEST`) or not parsing, kept as
    its text in a :class:`_TimedCode`: a loop, and a mention of every name (:func:`_mentions`), whatever it holds.
    Round 126 ran ``backward`` from a Timer's statement four Timers deep, then five deep with the name split in two
    (``"total.back" "ward(...)"``), which no search of the text finds."""


_LOOPS[_TimedCode] = "code run from a string by Timer or %timeit (once per timing loop)"
#: How many code strings deep the reading follows code run from strings (each level's string is shorter than the one
#: holding it, and escaping doubles its backslashes): anything deeper is read as :class:`_UnreadCode`.
_DEEPEST = 3

#: The fields of a statement that hold statements of their own, read where they are.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


class _CodeInPlace(ast.NodeTransformer):
    """The code a call runs from strings (:func:`_code_strings`), written out just before the statement that holds
    the call, so that every reading sees it as code of the function where it runs: in a loop (:class:`_TimedCode`)
    when it runs once per timing loop, else under ``if True:``.

    Round 125: ``Timer(stmt="rows.append(len(rows))", ...).timeit(n)`` ran a statement once per batch row inside
    ``last_valid_token``, and ``Timer(stmt="total.backward(...)")`` called ``backward`` inside ``r1_penalty``: the
    code policy reads those strings, the source rules read none of them. A magic's code at the top of a cell is read
    as a cell of its own (:func:`_parse`), where the definitions of a ``%%time`` cell are; inside a function it is
    written out here too (a ``%time`` line in an answer's body runs there).
    """

    def __init__(self, depth: int) -> None:
        self.depth, self.functions = depth, 0

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        self.functions += 1
        try:
            return self.generic_visit(node)
        finally:
            self.functions -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and all(isinstance(statement, ast.stmt) for statement in statements):
                setattr(node, field, [written for statement in statements
                                      for written in [*self._run_from_strings(statement), statement]])
        return node

    def _run_from_strings(self, statement: ast.stmt) -> Iterator[ast.stmt]:
        own = [value for field, value in ast.iter_fields(statement) if field not in _BLOCKS]
        for part in own:
            for inner in [found for item in (part if isinstance(part, list) else [part]) if isinstance(item, ast.AST)
                          for found in ast.walk(item)]:
                # a magic at the top of a cell is read as a cell of its own; anywhere else (in a function, in a
                # string another call runs: round 126's %time in a Timer's statement) it runs where it is
                if not isinstance(inner, ast.Call) or _is_magic(inner) and not (self.functions or self.depth):
                    continue
                for code, repeated in _code_strings(inner):
                    trees = _parse(code, self.depth + 1) if self.depth < _DEEPEST else ()
                    body: list[ast.stmt] = ([copy.deepcopy(statement) for statement in trees[0].body] if trees
                                            else [_UnreadCode(ast.Constant(code))])
                    for node in (node for written in body for node in ast.walk(written)):
                        ast.copy_location(node, inner)
                    if body:
                        unread = isinstance(body[0], _UnreadCode)
                        block = (_TimedCode(test=ast.Constant(True), body=body, orelse=[]) if repeated or unread
                                 else ast.If(test=ast.Constant(True), body=body, orelse=[]))
                        yield ast.copy_location(block, inner)


class _ReadsByName(ast.NodeTransformer):
    """Attributes read by a name the code holds as a string, written out as ``ast.Attribute`` reads, so that every
    reading of the source rules sees them like the same code written with a dot.

    The code policy lets a cell name an attribute in three other ways, and checks each name itself: a ``match``
    class pattern (``case C(name=v)`` reads ``subject.name``; ``ast`` holds the name as a plain string,
    ``MatchClass.kwd_attrs``, which no walk of the tree meets), and a constant string given to ``getattr`` or
    ``hasattr``, or to ``operator.attrgetter`` or ``methodcaller`` (the policy allows those functions only so, by
    their own names). Round 116 reached ``backward`` through ``case object(backward=run)`` in a part that forbids it,
    ``.tolist`` and a method calling itself in a part that forbids loops; ``getattr(v, "tolist")()`` and
    ``attrgetter("sum.backward")`` were missed the same way. A class pattern's reads start its ``case`` body
    (``v = subject.name`` where the pattern only captures); a call by name becomes what it does: ``getattr(x, "n")``
    is ``x.n`` (``x.n or default`` with a default, ``x.n and True`` for ``hasattr``), ``methodcaller("n", *a)`` is
    ``lambda obj: obj.n(*a)``, ``attrgetter("a.b")`` is ``lambda obj: obj.a.b``.
    """

    def visit_Match(self, node: ast.Match) -> ast.Match:
        self.generic_visit(node)
        for case in node.cases:
            case.body[:0] = list(_pattern_reads(case.pattern, node.subject))
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        function = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        names = [argument.value for argument in (node.args[1:2] if function in ("getattr", "hasattr") else node.args)
                 if isinstance(argument, ast.Constant) and isinstance(argument.value, str)]
        if function not in _BY_NAME or not names or node.keywords and function != "methodcaller":
            return node
        if function in ("getattr", "hasattr"):
            read = _read(node.args[0], names[0], node)
            rest = [ast.Constant(True)] if function == "hasattr" else node.args[2:]
            return ast.copy_location(ast.BoolOp(ast.And() if function == "hasattr" else ast.Or(), [read, *rest]),
                                     node) if rest else read
        holder = ast.copy_location(ast.Name(id="obj", ctx=ast.Load()), node)
        if function == "methodcaller":
            body: ast.expr = ast.copy_location(ast.Call(_read(holder, names[0], node), node.args[1:], node.keywords),
                                               node)
        else:
            reads = [_read(holder, name, node) for name in names]
            body = reads[0] if len(reads) == 1 else ast.copy_location(ast.Tuple(reads, ast.Load()), node)
        arguments = ast.arguments(posonlyargs=[], args=[ast.arg("obj")], kwonlyargs=[], kw_defaults=[], defaults=[])
        return ast.copy_location(ast.Lambda(arguments, body), node)


def _read(value: ast.expr, dotted: str, where: ast.AST) -> ast.expr:
    """``value.a.b`` for ``dotted`` "a.b", at ``where``'s place in the source."""
    for name in dotted.split("."):
        value = ast.copy_location(ast.Attribute(value=copy.deepcopy(value), attr=name, ctx=ast.Load()), where)
    return value


def _pattern_reads(pattern: ast.pattern, subject: ast.expr) -> Iterator[ast.stmt]:
    """The attribute reads ``pattern`` makes of ``subject`` (and of what those reads give), as statements."""
    if isinstance(pattern, ast.MatchClass):
        for attr, inner in zip(pattern.kwd_attrs, pattern.kwd_patterns, strict=True):
            read = _read(subject, attr, pattern)
            if isinstance(inner, ast.MatchAs) and inner.pattern is None and inner.name:
                yield ast.copy_location(ast.Assign(targets=[ast.copy_location(
                    ast.Name(id=inner.name, ctx=ast.Store()), inner)], value=read), pattern)
            else:
                yield ast.copy_location(ast.Expr(value=read), pattern)
            yield from _pattern_reads(inner, read)
        inside = [(inner, subject) for inner in pattern.patterns]  # a builtin matching itself (the policy refuses others)
    elif isinstance(pattern, ast.MatchAs):
        inside = [(pattern.pattern, subject)] if pattern.pattern else []
    elif isinstance(pattern, (ast.MatchOr, ast.MatchSequence, ast.MatchMapping)):
        inside = [(inner, subject) for inner in pattern.patterns]  # an item's read, as one of the subject's
    else:
        inside = []
    for inner, of in inside:
        yield from _pattern_reads(inner, of)


def _bound_names(node: ast.AST) -> list[str]:
    """The names a definition, an assignment or an import binds."""
    if isinstance(node, _DEFINITIONS):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
    return [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]


def _bindings(node: ast.AST, in_function: bool = False, declared_global: frozenset[str] = frozenset()
              ) -> Iterator[tuple[ast.AST, frozenset[str] | None]]:
    """(node, the names it may bind, None for all) of every binding other code can reach by name.

    Every ``def`` and ``class``, at any depth (under an ``if``, in a class, in another function);
    assignments and imports only where they bind a name another function reads: outside any function,
    or declared ``global`` there. A function's locals (``shape = tuple(shape)``) are its own: its body
    is read as part of it, and a local named like another function's attribute is not that function.
    """
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield child, None
            names = frozenset(name for inner in ast.walk(child) if isinstance(inner, ast.Global) for name in inner.names)
            yield from _bindings(child, True, names)
            continue
        if isinstance(child, ast.ClassDef):
            yield child, None
        elif isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom)):
            yield child, declared_global if in_function else None
        yield from _bindings(child, in_function or isinstance(child, ast.Lambda), declared_global)


def _definitions(cells: dict[int, str]) -> dict[str, list[tuple[int, ast.AST]]]:
    """name -> (cell index, node) of every def and class, and of every assignment and import others can read."""
    found: dict[str, list[tuple[int, ast.AST]]] = {}
    for index, source in cells.items():
        for tree in _parse(source):
            for node, allowed in _bindings(tree):
                for name in _bound_names(node):
                    if allowed is None or name in allowed:
                        found.setdefault(name, []).append((index, node))
    return found


def _iteration(node: ast.AST, holders: set[str], classes: set[str], library: dict[str, str],
               properties: set[str]) -> Iterator[tuple[str, int]]:
    """(what, line) of every Python iteration written in ``node`` itself; ``holders``: the names that hold a
    function, class, lambda or object of the student's (:func:`_holders`), ``classes``: those of their classes
    whose objects carry code, ``library``: the names that hold a module or decorator (:func:`_library_names`),
    ``properties``: the names that are properties only (:func:`_pure_properties`)."""
    for inner in ast.walk(node):
        line = getattr(inner, "lineno", getattr(node, "lineno", 0))
        if type(inner) in _LOOPS:
            yield _LOOPS[type(inner)], line
        elif isinstance(inner, ast.Name) and inner.id in ITERATING:
            yield f"{inner.id} (it calls a function per item)", line
        elif isinstance(inner, ast.Attribute) and inner.attr in ITERATING:
            yield f"{inner.attr} (it calls a function per item)", line
        elif isinstance(inner, ast.alias) and inner.name.split(".")[-1] in ITERATING:
            yield f"{inner.name} (it calls a function per item)", line
        elif isinstance(inner, ast.Call) and any(keyword.arg == "key" for keyword in inner.keywords):
            yield "a key= function (it runs once per item)", line
        elif isinstance(inner, ast.Attribute) and inner.attr in TO_PYTHON:
            yield f".{inner.attr}() (it moves values into Python, to be worked on one by one)", line
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and _per_item(inner.name):
            yield f"{inner.name} (Python calls it once per item)", line
        elif isinstance(inner, (ast.Assign, ast.AnnAssign)):  # ``__len__ = pick``, ``Row.__len__ = pick``
            targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
            for name in (_target_name(target) for target in targets):
                if _per_item(name):
                    yield f"{name} (Python calls it once per item)", line
    yield from _argument_calls(node)
    yield from _handed_over(node, holders, classes)
    yield from _kept_as_values(node, holders, classes, library, properties)


def _per_item(name: str | None) -> bool:
    """Whether a method of this name is one Python may call once per item (:data:`ONCE_PER_CALL`)."""
    return bool(name) and len(name) > 4 and name.startswith("__") and name.endswith("__") and name not in ONCE_PER_CALL


def _target_name(target: ast.AST) -> str | None:
    """The name an assignment target binds: ``x`` of ``x = ...``, ``__len__`` of ``Row.__len__ = ...``."""
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None


def _handed_over(node: ast.AST, holders: set[str], classes: set[str]) -> Iterator[tuple[str, int]]:
    """(what, line) of every function, lambda, class or callable object of the student's that ``node`` passes to a
    call as a value, not calling it: the callee may call it once per item (``defaultdict(pick)`` with
    ``itemgetter(*keys)``, ``re.sub(pattern, pick, text)``, ``json.dumps(rows, default=pick)``, ``type(name, bases,
    {"__len__": pick})``, ``vmap(pick, chunk_size=1)``), which no loop, comprehension or ``map`` shows (round 62).

    ``holders``: the names that hold a function, class, lambda or object of the student's (a string naming one
    counts, for ``getattr(self, "pick")``); ``classes``: those of their classes whose objects carry code. What is
    called, or only read from (``s.scale(v)``, ``rows[0]``), is not handed over."""
    for inner in ast.walk(node):
        if not isinstance(inner, ast.Call):
            continue
        for argument in [*inner.args, *(keyword.value for keyword in inner.keywords)]:
            used = {id(part.func) for part in ast.walk(argument) if isinstance(part, ast.Call)}
            used |= {id(part.value) for part in ast.walk(argument) if isinstance(part, (ast.Attribute, ast.Subscript))}
            direct = {id(value) for value in _direct(argument)}
            for value in ast.walk(argument):
                if id(value) not in used and (what := _code_of_theirs(value, holders, classes, id(value) in direct)):
                    yield f"{what} handed to other code as a value (it may call it once per item)", inner.lineno


def _holders(cells: dict[int, str], defined: set[str], classes: set[str]) -> set[str]:
    """The student's functions and classes (``defined``), and every name or attribute any cell binds (``=``,
    ``:=``, annotated, ``with ... as``) to one of them, to a lambda, to an object of ``classes``, or to another
    such name (``again = pick``, ``self.step = self.pick``, ``walker = Rows()``): what may hold code of theirs. A
    name bound to what such code returns (``rows = torch.tensor(helper(n))``) holds a value, not the code."""
    bindings = [(inner.value, inner.targets if isinstance(inner, ast.Assign) else [inner.target])
                for source in cells.values() for tree in _parse(source) for inner in ast.walk(tree)
                if isinstance(inner, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and inner.value is not None]
    bindings += [(inner.context_expr, [inner.optional_vars]) for source in cells.values()
                 for tree in _parse(source) for inner in ast.walk(tree)
                 if isinstance(inner, ast.withitem) and inner.optional_vars is not None]  # ``with Rows() as walker``
    holders = set(defined)
    while True:
        more = {name for value, targets in bindings
                if any(_code_of_theirs(item, holders, classes, True) for item in _direct(value))
                for target in targets if (name := _target_name(target))}
        if more <= holders:
            return holders
        holders |= more


def _kept_as_values(node: ast.AST, holders: set[str], classes: set[str], library: dict[str, str],
                    properties: set[str]) -> Iterator[tuple[str, int]]:
    """(what, line) of every function, lambda, class or object of the student's that ``node`` puts where code not
    its own may get it, and call it as often as it likes: returned or yielded, stored in an attribute, an item or a
    container, given as a default, or in any other place but these: called, read (an attribute or an item of it),
    compared, bound to a plain local (then that local is read the same way), a ``with`` statement's manager, a base
    (read by :func:`_called_from_outside`), an argument of a call (:func:`_handed_over`). A definition is given to
    each of its decorators but those that call it once (:func:`_calls_once`).

    Round 119 counted rows in an object's ``__call__`` run by ``defaultdict`` that a helper returned
    (``defaultdict(_factory())``), and recursed through ``box[0](b - 1, box)`` after ``return [_walk]`` and through
    ``self.peers[0](b - 1)`` after ``walker.peers = [walker]``: once a value is kept like this, no line that calls
    it names what runs, so keeping it is what breaks the rule."""
    for parent in ast.walk(node):
        if isinstance(parent, _DEFINITIONS):
            for decorator in parent.decorator_list:
                if not _calls_once(decorator, parent, properties, library):
                    yield (f"{parent.name} handed to its decorator {ast.unparse(decorator)[:40]} (it may call it once "
                           "per item)"), decorator.lineno
        for field, child in ast.iter_fields(parent):
            for item in child if isinstance(child, list) else [child]:
                if not isinstance(item, (ast.Name, ast.Attribute, ast.Lambda, ast.Call)) or _used_in_place(parent,
                                                                                                        field, item):
                    continue
                if isinstance(item, (ast.Name, ast.Attribute)) and not isinstance(item.ctx, ast.Load):
                    continue
                if what := _code_of_theirs(item, holders, classes, True):
                    yield f"{what} kept as a value where code not yours may call it once per item", item.lineno


def _code_of_theirs(value: ast.AST, holders: set[str], classes: set[str], direct: bool) -> str | None:
    """What of the student's ``value`` is, when code given it may call it (:func:`_callable_value`); an attribute
    counts when it is named like one of ``holders``, is any attribute of one of ``classes`` or of such an
    attribute (``Shift.k.fget``, ``obj.pick.__func__``), or a special one (``_walk.__call__``, ``obj.__dict__``) of
    something of theirs: ``values.shape`` is no function named ``shape``, ``Shape(v).rows`` is data."""
    if not isinstance(value, ast.Attribute):
        return _callable_value(value, holders, classes, direct)
    special = value.attr.startswith("__") and value.attr.endswith("__")
    inner = value.value
    if (value.attr in holders and not special or _is_name(inner, classes)
            or isinstance(inner, ast.Attribute) and _code_of_theirs(inner, holders, classes, True)
            or special and (_is_name(inner, _SELF | _CLS) or _code_of_theirs(inner, holders, classes, True))):
        return ast.unparse(value)[:40]
    return None


#: functools' decorators that keep results and hand them back to later calls.
_MEMOISING = frozenset({"cache", "lru_cache", "cached_property"})


#: Decorators that call the function they wrap at most once per call of the wrapper, by where they come from: a
#: method's kind and ``property`` (built-ins), torch's grad modes, ``functools.wraps`` and the memoising ones (what
#: those hand back :func:`_unpinned` reads, round 112). A property's ``setter``, ``getter`` and ``deleter`` count
#: only on the property of that name in the same class (:func:`_calls_once`).
_ONCE_DECORATORS = {
    "builtins": frozenset({"staticmethod", "classmethod", "property"}),
    "torch": frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled"}),
    "functools": frozenset({"wraps", *_MEMOISING}),
}
_ACCESSORS = frozenset({"setter", "getter", "deleter"})


def _library_names(cells: dict[int, str]) -> dict[str, str]:
    """name -> module, for every name the student's cells bind only by importing a module of
    :data:`_ONCE_DECORATORS` under its own name (``import functools``) or one of its decorators under its own
    name (``from functools import cache``), and for the built-in decorators they never bind: the names a trusted
    decorator may be spelled with. Round 121 spelled ``defaultdict`` as ``cache`` (``from collections import
    defaultdict as cache``)."""
    origins: dict[str, set[str | None]] = {}
    for source in cells.values():
        for tree in _parse(source):
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):  # ``import torch.nn`` binds torch itself
                    for alias in node.names:
                        bound = alias.asname or alias.name.split(".")[0]
                        origin = alias.name if alias.asname else bound
                        origins.setdefault(bound, set()).add(
                            origin if origin in _ONCE_DECORATORS and bound == origin else None)
                elif isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        trusted = (alias.asname in (None, alias.name)
                                   and alias.name in _ONCE_DECORATORS.get(node.module or "", ()))
                        origins.setdefault(alias.asname or alias.name, set()).add(
                            f"{node.module}.{alias.name}" if trusted else None)
                else:
                    for name in _bound_here(node):
                        origins.setdefault(name, set()).add(None)
    library = {name: "builtins" for name in _ONCE_DECORATORS["builtins"] if name not in origins}
    library |= {"torch": "torch", "functools": "functools"}
    for name, found in origins.items():
        if None in found or len(found) != 1:
            library.pop(name, None)
        else:
            library[name] = found.pop()
    return library


def _bound_here(node: ast.AST) -> list[str]:
    """The names ``node`` itself binds, other than by an import: a definition, a stored name, a parameter, an
    ``except ... as`` or a pattern's capture."""
    if isinstance(node, _DEFINITIONS):
        return [node.name]
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


def _calls_once(decorator: ast.expr, function: ast.AST, properties: set[str], library: dict[str, str]) -> bool:
    """Whether ``decorator`` of ``function`` calls it at most once per call (:data:`_ONCE_DECORATORS`), spelled
    with names that hold what they say (``library``, :func:`_library_names`), or makes the property of that name
    in ``properties`` (:func:`_pure_properties`): ``@property def value``, ``@value.setter def value``. Any other is given
    the function and may call it as often as it likes, or keep it: round 120 decorated a helper nested in the
    answer with ``@box.append`` and recursed through ``box[0](b - 1)``; round 121 spelled a method of its own
    ``@Hook(n).setter``, and ``defaultdict`` imported as ``cache``."""
    named = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(named, ast.Attribute) and named.attr in _ACCESSORS and not isinstance(decorator, ast.Call):
        return _is_name(named.value, properties) and named.value.id == getattr(function, "name", None)
    if _is_name(named, {"property"}) and getattr(function, "name", None) in properties:
        return True
    if isinstance(named, ast.Name):  # ``cache`` from ``from functools import cache``, or a built-in
        origin = library.get(named.id, "")
        module, name = origin.split(".") if "." in origin else (origin, named.id)
    elif isinstance(named, ast.Attribute) and isinstance(named.value, ast.Name):  # ``functools.cache``
        module, name = library.get(named.value.id, ""), named.attr
    else:
        return False
    return name in _ONCE_DECORATORS.get(module, ())


def _pure_properties(cells: dict[int, str]) -> set[str]:
    """The names whose every definition, in any cell, is a property of a class (a bare ``@property``) or its
    ``setter``, ``getter`` or ``deleter`` in the same class: reading one runs its accessor once, and an accessor
    decorated with ``@name.setter`` is given to the property, not to other code."""
    kinds: dict[str, set[bool]] = {}
    for source in cells.values():
        for tree in _parse(source):
            in_classes = {id(item): inner for inner in ast.walk(tree) if isinstance(inner, ast.ClassDef)
                          for item in inner.body}
            for node in ast.walk(tree):
                if isinstance(node, _DEFINITIONS):
                    kinds.setdefault(node.name, set()).add(_is_accessor(node, in_classes.get(id(node))))
    return {name for name, found in kinds.items() if found == {True}}


def _is_accessor(node: ast.AST, owner: ast.ClassDef | None) -> bool:
    """Whether ``node``, a definition in the body of ``owner`` (None: in no class body), is a property there or an
    accessor of one: ``@property def k``, or ``@k.setter def k`` after it."""
    if owner is None or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(node.decorator_list) != 1:
        return False
    (decorator,) = node.decorator_list
    if _is_name(decorator, {"property"}):
        return True
    return (isinstance(decorator, ast.Attribute) and decorator.attr in _ACCESSORS
            and _is_name(decorator.value, {node.name})
            and any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == node.name
                    and any(_is_name(d, {"property"}) for d in item.decorator_list) for item in owner.body))


def _used_in_place(parent: ast.AST, field: str, item: ast.expr) -> bool:
    """Whether ``item``, a field of ``parent``, is used where it stands: called, read from, compared, bound to a
    plain name by ``=`` (then that name is read the same way), entered by ``with``, a decorator (what it is given
    :func:`_kept_as_values` reads), a base, or an argument (which :func:`_handed_over` reads)."""
    if isinstance(parent, ast.Call):
        return True  # its function is called; its arguments are handed over
    if isinstance(parent, (ast.Attribute, ast.Subscript)):
        return field == "value"
    if isinstance(parent, (ast.Assign, ast.AnnAssign)) and field == "value":  # ``:=`` hands its value on too
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return all(isinstance(target, ast.Name) for target in targets)
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return field in ("decorator_list", "bases")
    return isinstance(parent, (ast.Compare, ast.Expr, ast.withitem, ast.keyword))


def _direct(value: ast.AST) -> Iterator[ast.AST]:
    """``value`` and what it holds as it is, not through a call or an attribute: the items of a literal
    container, both branches of a conditional, the operands of ``and`` and ``or``, a starred item."""
    yield value
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        children = value.elts
    elif isinstance(value, ast.Dict):
        children = value.values
    elif isinstance(value, ast.IfExp):
        children = [value.body, value.orelse]
    elif isinstance(value, ast.BoolOp):
        children = value.values
    elif isinstance(value, (ast.Starred, ast.NamedExpr)):
        children = [value.value]
    else:
        children = []
    for child in children:
        yield from _direct(child)


def _callable_value(value: ast.AST, callables: set[str], classes: set[str], direct: bool) -> str | None:
    """What of the student's ``value`` is, when it is something a receiver can call: a lambda; a function, class
    or alias of theirs, by name, attribute or string; where it is passed as it is (``direct``), an object of one
    of ``classes``."""
    if isinstance(value, ast.Lambda):
        return "a lambda"
    if isinstance(value, ast.Name) and value.id in callables:
        return value.id
    if isinstance(value, ast.Attribute) and value.attr in callables:
        return value.attr
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in callables:
        return repr(value.value)
    if direct and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes:
        return f"an object of {value.func.id}"
    if direct and isinstance(value, ast.Call) and _makes_its_own_kind(value.func):
        return f"an object made by {ast.unparse(value.func)[:40]}"
    return None


def _makes_its_own_kind(function: ast.expr) -> bool:
    """Whether calling ``function`` makes or hands back an object of the student's under no class's name:
    ``cls(...)``, ``type(self)(...)``, ``self.__class__(...)``, ``X.__new__(X)``, and ``obj.__enter__()``, which a
    ``with`` statement calls to get its ``as`` target (so it may return ``self``). Round 122: a classmethod's
    ``return cls()`` handed on an object whose property ``str.format`` read once per row; round 123:
    ``counter = Tally(-3).__enter__()``, then ``defaultdict(counter)``."""
    if _is_name(function, _CLS):
        return True
    if isinstance(function, ast.Call) and _is_name(function.func, {"type"}):
        return True
    return isinstance(function, ast.Attribute) and function.attr in ("__class__", "__new__", "__enter__")


def _argument_calls(node: ast.AST) -> Iterator[tuple[str, int]]:
    """(what, line) of every call of a function's own argument in ``node``: recursion the reader cannot follow
    (``pick(rows, again)`` calling ``again(...)``, given ``pick`` itself)."""
    for function in ast.walk(node):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        names = _argument_names(function.args) - {"self", "cls"}
        for inner in ast.walk(function):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in names:
                yield f"a call of the argument {inner.func.id} (it can recurse)", inner.lineno


def _argument_names(arguments: ast.arguments) -> set[str]:
    """The names a function's parameters bind, ``*args`` and ``**kwargs`` included."""
    return {arg.arg for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                arguments.vararg, arguments.kwarg) if arg}


def _used_names(node: ast.AST, known: set[str], callables: set[str]) -> set[str]:
    """The student's names ``node`` uses: plain names it reads but does not bind itself (a function's arguments
    and locals are its own), and attributes named like a function or class of theirs (``self.rows(...)`` uses
    ``rows``; ``values.shape`` does not use a variable named ``shape``)."""
    accessors = {id(decorator.value) for inner in ast.walk(node) if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for decorator in inner.decorator_list if isinstance(decorator, ast.Attribute)
                 and decorator.attr in _ACCESSORS and _is_name(decorator.value, {inner.name})}  # ``@k.setter def k``
    used = {inner.id for inner in ast.walk(node)
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load) and id(inner) not in accessors}
    if isinstance(node, _DEFINITIONS):
        used -= {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store)}
        used -= {name for inner in ast.walk(node) if isinstance(inner, ast.arguments) for name in _argument_names(inner)}
    methods = {inner.name for inner in ast.walk(node) if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))}
    used |= {inner.attr for inner in ast.walk(node) if isinstance(inner, ast.Attribute)} & (callables | methods)
    used |= set(_implicit_methods(node))
    if any(_calls_a_value(inner, node, known) for inner in ast.walk(node)):
        used.add("__call__")
    return used & known


def _calls_a_value(call: ast.AST, node: ast.AST, known: set[str]) -> bool:
    """Whether ``call`` calls a value the reading cannot name, which may be an object of the student's, whose
    ``__call__`` then runs: a local variable of ``node`` (``again = self.me(); again(...)``), or an
    attribute of the object itself that is no method of theirs (``self.peer(...)`` after ``walker.peer = walker``).
    Round 118 recursed through both; ``self(...)`` itself is :func:`_implicit_methods`'."""
    if not isinstance(call, ast.Call):
        return False
    function = call.func
    if isinstance(function, ast.Name):
        local = {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store)}
        return function.id in local  # whatever it was bound to: ``again = self.me()`` is no alias of ``me``
    return (isinstance(function, ast.Attribute) and _is_name(function.value, _SELF | _CLS)
            and function.attr not in known)


#: Names that stand for the object a method runs on, or its class.
_SELF, _CLS = frozenset({"self"}), frozenset({"cls"})


def _implicit_methods(node: ast.AST) -> Iterator[str]:
    """The methods Python calls for ``node`` without naming them: ``self(...)`` and an object made and called at
    once (``Pick()(...)``) call ``__call__``; ``cls(...)`` and ``type(self)(...)`` make an object (``__init__``,
    ``__post_init__``); ``len(self)``, ``str(self)``, ``repr(self)`` and ``with self:`` call their methods. An outside
    round recursed through ``self(...)`` in ``__call__``, which no name in the source showed."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            function, arguments = inner.func, inner.args
            if _is_name(function, _SELF) or isinstance(function, ast.Call):
                yield "__call__"
            if _is_name(function, _CLS) or isinstance(function, ast.Call) and _is_name(function.func, {"type"}):
                yield from ("__init__", "__post_init__")
            if _is_name(function, {"len", "str", "repr", "format"}) and arguments and _is_name(arguments[0], _SELF):
                yield {"len": "__len__", "repr": "__repr__"}.get(function.id, "__str__")
        elif isinstance(inner, (ast.With, ast.AsyncWith)):
            if any(_is_name(item.context_expr, _SELF) for item in inner.items):
                yield from ("__enter__", "__exit__")
        elif isinstance(inner, ast.FormattedValue) and _is_name(inner.value, _SELF):
            yield "__str__"


def _is_name(node: ast.AST, names: frozenset[str] | set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _aliases(cells: dict[int, str], callables: set[str]) -> dict[str, set[str]]:
    """Names and attributes bound to the student's functions under another name: ``self.again = self.pick``
    (an outside round recursed through it), ``again = pick``, ``self.step = lambda *a: self.pick(*a)``,
    anywhere in the student's cells. Alias -> the functions or classes its value names."""
    found: dict[str, set[str]] = {}
    for source in cells.values():
        for tree in _parse(source):
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                    continue
                named = {inner.id for inner in ast.walk(node.value) if isinstance(inner, ast.Name)}
                named |= {inner.attr for inner in ast.walk(node.value) if isinstance(inner, ast.Attribute)}
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for bound in ast.walk(target):
                        name = bound.id if isinstance(bound, ast.Name) else getattr(bound, "attr", None)
                        if isinstance(bound, (ast.Name, ast.Attribute)) and named & callables and name not in callables:
                            found.setdefault(name, set()).update(named & callables)
    return found


def _reaches_itself(name: str, uses: dict[str, set[str]]) -> bool:
    """Whether ``name`` can reach ``name`` again through the student's definitions (recursion, direct or not)."""
    seen, todo = set(), list(uses.get(name, ()))
    while todo:
        current = todo.pop()
        if current == name:
            return True
        if current not in seen:
            seen.add(current)
            todo += uses.get(current, ())
    return False


def _values(cells: dict[int, str]) -> Iterator[tuple[int, ast.expr]]:
    """(cell index, node) of every name or attribute a cell reads as a value, not as the function of a call nor as
    the object whose attribute or item it reads (``out.add_``, ``rows[0]``), at any depth (``tuple([f])[0]``)."""
    for index, source in cells.items():
        for tree in _parse(source):
            called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
            called |= {id(node.value) for node in ast.walk(tree) if isinstance(node, (ast.Attribute, ast.Subscript))}
            called |= {id(decorator) for node in ast.walk(tree) if isinstance(node, _DEFINITIONS)
                       for decorator in node.decorator_list}
            for node in ast.walk(tree):
                if (isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
                        and id(node) not in called):
                    yield index, node


class Reached(NamedTuple):
    """What the reading of one answer covers."""

    nodes: list[tuple[str, int, ast.AST]]  # (name, cell index, node) of the answer and all it may run
    uses: dict[str, set[str]]  # who of the student's uses whom
    defined: set[str]  # the names of the student's functions and classes, wherever defined
    unpinned: set[str]  # the values handed around it reads (then ``nodes`` holds every definition and lambda)


def _reached(cells: dict[int, str], function: str, lab_values: frozenset[str] = frozenset(),
             modules: dict[str, str] | None = None) -> Reached | None:
    """``function`` and everything of the student's it may run (None when no definition of it can be read).

    When it reads a value handed around (:func:`_unpinned`), no reading can tell what that value holds (rounds 93
    to 97 handed a function over through lists, installers, closures, class attributes, defaults and decorators
    of every shape), so everything the student defined is read as part of it: every function, class and lambda."""
    definitions, uses, callables = _graph(cells)
    if function not in definitions:
        return None
    found = _walk(function, definitions, uses)
    unpinned = _unpinned(function, found, definitions, cells, lab_values, modules)
    if unpinned:
        found = _walk(function, definitions, uses, also=sorted(callables)) + _lambdas(cells)
    defined = {name for name, nodes in definitions.items() if any(isinstance(node, _DEFINITIONS) for _, node in nodes)}
    return Reached(found, uses, defined, unpinned)


def _lambdas(cells: dict[int, str]) -> list[tuple[str, int, ast.AST]]:
    """("a lambda", cell index, node) of every lambda outside the student's definitions (those are read with them)."""
    found: list[tuple[str, int, ast.AST]] = []
    for index, source in cells.items():
        for tree in _parse(source):
            todo: list[ast.AST] = [tree]
            while todo:
                node = todo.pop()
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.Lambda):
                        found.append(("a lambda", index, child))
                    elif not isinstance(child, _DEFINITIONS):
                        todo.append(child)
    return found


def _graph(cells: dict[int, str]) -> tuple[dict[str, list[tuple[int, ast.AST]]], dict[str, set[str]], set[str]]:
    """The student's definitions by name, who uses whom, and the names of their functions, classes and aliases."""
    definitions = _definitions(cells)
    callables = {name for name, nodes in definitions.items() if any(isinstance(n, _DEFINITIONS) for _, n in nodes)}
    aliases = _aliases(cells, callables)
    known = set(definitions) | set(aliases)
    callables |= set(aliases)
    uses = {name: set().union(*(_used_names(node, known, callables) for _, node in nodes))
            for name, nodes in definitions.items()}
    for alias, targets in aliases.items():
        uses[alias] = uses.get(alias, set()) | targets
    return definitions, uses, callables


def _walk(function: str, definitions: dict[str, list[tuple[int, ast.AST]]], uses: dict[str, set[str]],
          also: list[str] | tuple[()] = ()) -> list[tuple[str, int, ast.AST]]:
    """(name, cell index, node) of ``function``, of ``also``, and of every definition of the student's they use."""
    reached, todo, found = set(), [function, *also], []
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        found += [(name, index, node) for index, node in definitions.get(name, ())]
        todo += sorted(uses.get(name, set()) - reached)
    return found


def _unpinned(function: str, found: list[tuple[str, int, ast.AST]],
              definitions: dict[str, list[tuple[int, ast.AST]]], cells: dict[int, str],
              lab_values: frozenset[str] = frozenset(), modules: dict[str, str] | None = None) -> set[str]:
    """The names the reached code reads that hold a value the reading cannot pin down: bound by the student other
    than by a ``def``, a ``class``, an import or a constant (a list filled later, a ``:=``, ``for``, ``match`` or
    ``except`` target, a closure's variable); a class's attribute bound to such a value or set from outside the
    class (``Registry.items``, round 95); a parameter whose default is such a value (``_box={}``, round 95). Names
    only the lab binds (``torch``, ``device``) are pinned: the code policy keeps them. An honest answer reads its
    arguments, torch, constants and its own functions: none of these."""
    free, unpinned = set(), set()
    student = {name for source in cells.values() for tree in _parse(source) for inner in ast.walk(tree)
               for name in _names_bound(inner)}
    enclosing = _enclosing_bindings(cells, {_span(index, node) for index, node in definitions[function]})
    read_only = _read_only_names(cells)
    rebound = _bound_otherwise(cells)
    classes = {name: node for name, nodes in definitions.items() for _, node in nodes if isinstance(node, ast.ClassDef)}
    # an attribute assigned anywhere, in any function, under any object's name, may be a class's (round 96:
    # ``Registry.impl = g`` in an installer replaced a method the class body defines)
    stored = {inner.attr for source in cells.values() for tree in _parse(source) for inner in ast.walk(tree)
              if isinstance(inner, ast.Attribute) and not isinstance(inner.ctx, ast.Load)}
    # ...and one set outside the code read, by any statement, may be what that code finds on any object, ``self``
    # included (round 105: ``with _Ctx() as Holder.impl`` at the top of a cell, read as ``Holder().impl``), as may
    # a class attribute the reading cannot pin (``impl = HELPERS[0]`` in a reached class body)
    reached = {_span(index, inner) for _, index, node in found for inner in ast.walk(node)}
    set_elsewhere = {inner.attr for index, source in cells.items() for tree in _parse(source)
                     for inner in ast.walk(tree) if isinstance(inner, ast.Attribute)
                     and not isinstance(inner.ctx, ast.Load) and _span(index, inner) not in reached}
    set_elsewhere |= {name for _, _, node in found if isinstance(node, ast.ClassDef) for statement in node.body
                      if isinstance(statement, (*_DEFINITIONS, ast.Assign, ast.AnnAssign, ast.AugAssign))
                      for name in _bound_names(statement) if not _class_pins(node, name, student)}
    for _, index, node in found:
        loads = {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load)}
        own = {name for inner in ast.walk(node) for name in _names_bound(inner)}  # its arguments, locals, handlers'
        # a name it declares global or nonlocal is not its own (round 99: ``global impl``, bound at the top of a cell)
        own -= {name for inner in ast.walk(node) if isinstance(inner, (ast.Global, ast.Nonlocal)) for name in inner.names}
        free |= loads - own - enclosing.get(_span(index, node), set())
        unpinned |= {f"{name} (IPython's output history)" for name in loads - own if _IPYTHON_HISTORY.match(name)}
        for inner in ast.walk(node):
            if isinstance(inner, ast.arguments):
                defaults = [*inner.defaults, *(default for default in inner.kw_defaults if default)]
                unpinned |= {f"a default ({ast.unparse(default)[:40]})" for default in defaults
                             if not _known(default, student)}
            elif (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                  and inner.value.id in classes
                  and (inner.attr in stored or not _class_pins(classes[inner.value.id], inner.attr, student))):
                unpinned.add(f"{inner.value.id}.{inner.attr}")
            elif (isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Load) and inner.attr in set_elsewhere
                  and root_name(inner) in {None, *student}):
                unpinned.add(f".{inner.attr} (set outside the answer, or not pinned by its class)")
    # a definition read under a name a statement rebinds is not what runs (round 100: the answer's own name, bound
    # to a loop by ``for last_valid_token in [_pick]`` at the top of a cell after an honest ``def``)
    unpinned |= {f"{name} (bound again by a statement)" for name, _, _ in found if name in rebound}
    # a memoised function hands back what a call elsewhere gave it (round 112: ``@functools.cache`` on an identity
    # helper, called at the top of a cell with an object of the student's class, returned that object to the
    # answer's call, whose argument compared equal to it)
    named_elsewhere = {inner.id if isinstance(inner, ast.Name) else inner.attr
                       for index, source in cells.items() for tree in _parse(source) for inner in ast.walk(tree)
                       if isinstance(inner, (ast.Name, ast.Attribute)) and _span(index, inner) not in reached}
    unpinned |= {f"{inner.name} (memoised, and called elsewhere too)" for _, _, node in found
                 for inner in ast.walk(node) if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and inner.name in named_elsewhere and any(_memoises(decorator) for decorator in inner.decorator_list)}
    # a value the lab's cells made (``lab_values``: not a module), which an answer has no reason to read: what it
    # holds is the lab's or the student's to say, not the reading's (round 107: the bootstrap cell's ``origin``
    # dict, filled by ``origin.update(impl=...)``, read as ``origin["impl"]``; round 111: a test cell's tensor,
    # whose methods did expand_strides' work with torch)
    unpinned |= {f"{name} (a value the lab's cells made)" for name in free & lab_values}
    # a container or an object a module holds, which any cell may fill (round 127: a loop kept in
    # torch.nn.functional.tf32_notes, a dict, and torch.broadcast_shapes in typing.EXCLUDED_ATTRIBUTES, a list)
    roots = {**(modules or {}), **_imported_modules(cells)}
    unpinned |= {f"{label} (a value a module holds, which any cell may fill)" for _, _, node in found
                 for label in _module_data(node, roots)}
    # ...and a container a library holds, read through anything but a module name (which _module_data resolves):
    # an object of a class (round 129: ``torch.distributions.Normal(0.0, 1.0).arg_constraints[k](...)``, and
    # ``(Normal,)[0]...``), a module a call hands out (round 130: ``torch.get_device_module("cpu").torch.nn.functional
    # .tf32_notes[k](...)``)
    unpinned |= {f".{name} (a container a library holds, which any cell may fill)"
                 for _, _, node in found for inner in ast.walk(node)
                 if (name := _library_container(inner, roots))}
    return unpinned | {name for name in free & student
                       if not definitions.get(name) or name in rebound
                       or not all(_pinned(node, student, read_only) for _, node in definitions[name])}


def _library_container(node: ast.AST, roots: dict[str, str]) -> str | None:
    """The name of :data:`~ptgrader.library_containers.LIBRARY_CONTAINERS` that ``node`` reads as an attribute not
    reached from a module of ``roots``, which :func:`_module_data` resolves (``functools.cache`` is a function;
    ``getattr(x, "env")`` is read as ``x.env``)."""
    if not isinstance(node, ast.Attribute) or node.attr not in LIBRARY_CONTAINERS:
        return None
    base, _ = _chain(node)
    return None if isinstance(base, ast.Name) and base.id in roots else node.attr


def _imported_modules(cells: dict[int, str]) -> dict[str, str]:
    """Name -> module (or ``module.attribute``) of each name the student's imports bind (``import typing``,
    ``import torch.nn.functional as G``, ``from torch.nn import functional``)."""
    found: dict[str, str] = {}
    for source in cells.values():
        for tree in _parse(source):
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update({alias.asname or alias.name.split(".")[0]: alias.name if alias.asname
                                  else alias.name.split(".")[0] for alias in node.names})
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
    return found


@functools.cache
def _constants() -> tuple[type, ...]:
    """Values a module may hold that no cell can fill: constants of Python and of torch, and typing's aliases and
    special forms (``typing.Sequence``, ``typing.Optional``: an annotation, round 128's honest ``expand_strides``)
    (imported here, when a reading first meets a module's attribute: the grader imports torch only for labs that
    need it). Tuples and frozensets count when what they hold does (:func:`_holds_nothing_fillable`)."""
    import torch

    return (type(None), bool, int, float, complex, str, bytes, range, torch.dtype, torch.device, torch.layout,
            torch.memory_format, torch.Size, enum.Enum, typing._Final, types.GenericAlias, types.UnionType)


def _module_data(node: ast.AST, roots: dict[str, str]) -> Iterator[str]:
    """Each attribute chain in ``node`` that starts at a name ``roots`` binds to a module and reaches a value other
    than a module, a class, a function, a descriptor or a constant (:func:`_constants`): a container or an object
    any cell may fill, read off the modules the grader imports (``inspect.getattr_static``: no module code runs).
    One the grader cannot read off counts too, and so does a name imported from a module that is such a value."""
    for inner in ast.walk(node):
        if not isinstance(inner, (ast.Attribute, ast.Name)) or not isinstance(inner.ctx, ast.Load):
            continue
        base, path = _chain(inner)
        if isinstance(base, ast.Name) and base.id in roots and not _holds_no_data(roots[base.id], path):
            yield ".".join([base.id, *path])


def _chain(node: ast.expr) -> tuple[ast.expr, tuple[str, ...]]:
    """The expression an attribute chain starts at, and the attributes it reads: ``(torch, ("nn", "functional"))``
    for ``torch.nn.functional``, ``(Normal(...), ("arg_constraints",))`` for ``Normal(...).arg_constraints``."""
    path: list[str] = []
    while isinstance(node, ast.Attribute):
        path.insert(0, node.attr)
        node = node.value
    return node, tuple(path)


@functools.cache
def _holds_no_data(dotted: str, path: tuple[str, ...]) -> bool:
    """Whether ``dotted`` (a module, ``torch.nn.functional``, or a module's attribute, ``typing.Any``), then the
    attributes ``path``, reach only modules, classes, functions, descriptors and constants, each read off what the
    one before reached: a container a class holds is as fillable as one a module holds (round 128:
    ``torch.distributions.Normal.arg_constraints.setdefault(k, helper)``, then ``...arg_constraints[k](...)``)."""
    try:
        value: object = importlib.import_module(dotted)
    except ImportError:
        head, _, last = dotted.rpartition(".")
        return bool(head) and _holds_no_data(head, (last, *path))
    for attribute in path:
        try:
            value = inspect.getattr_static(value, attribute)
        except AttributeError:  # a submodule not imported yet; on anything else, what a __getattr__ makes
            if not isinstance(value, types.ModuleType):
                return False
            try:
                value = importlib.import_module(f"{value.__name__}.{attribute}")
            except ImportError:
                return False
        if not _holds_nothing_fillable(value):
            return False
    return True


def _holds_nothing_fillable(value: object) -> bool:
    """Whether ``value`` is a module, a class, a function, a descriptor or a constant (:func:`_constants`): nothing
    a cell can put code in, other than through an attribute (which :func:`_holds_no_data` reads on)."""
    if isinstance(value, (tuple, frozenset)):  # a tuple of lists holds lists
        return all(_holds_nothing_fillable(item) for item in value)
    return (isinstance(value, (types.ModuleType, type, staticmethod, classmethod, property, *_constants()))
            or inspect.isroutine(value) or inspect.isdatadescriptor(value) or callable(value)
            and not hasattr(value, "__dict__"))


def _memoises(decorator: ast.expr) -> bool:
    """Whether a decorator (``@cache``, ``@functools.lru_cache(maxsize=8)``) is one of :data:`_MEMOISING`."""
    named = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (named.attr if isinstance(named, ast.Attribute) else getattr(named, "id", None)) in _MEMOISING


def _bound_otherwise(cells: dict[int, str]) -> set[str]:
    """The global names a statement other than an assignment, an import, a ``def`` or a ``class`` binds: a ``for``,
    ``with``, ``match`` or ``except`` target or a ``:=`` outside any function, or any binding of a name a function
    or a class body declares ``global``. Round 98: ``for helper in [_pick]``, ``match``, ``(helper := _pick)`` at the top of a cell
    rebound a name a ``def`` or a lambda had bound, and the reading read the ``def``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # their own scope: what they bind globally, they declare (below)
            if isinstance(child, (ast.For, ast.AsyncFor)):
                found.update(_target_names(child.target))
            elif isinstance(child, ast.withitem) and child.optional_vars is not None:
                found.update(_target_names(child.optional_vars))
            elif isinstance(child, ast.NamedExpr):
                found.update(_target_names(child.target))
            elif isinstance(child, (ast.MatchAs, ast.MatchStar, ast.MatchMapping, ast.ExceptHandler)):
                found.update(_names_bound(child))
            visit(child)

    for source in cells.values():
        for tree in _parse(source):
            visit(tree)
            for scope in ast.walk(tree):  # a function's body, and a class's (round 101: ``class H: global f``)
                if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    declared = {name for inner in ast.walk(scope) if isinstance(inner, ast.Global)
                                for name in inner.names}
                    found |= declared & {name for inner in ast.walk(scope) for name in _names_bound(inner)
                                         if not isinstance(inner, (ast.Assign, ast.AnnAssign))}
    return found


def _target_names(target: ast.AST) -> list[str]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``), not an attribute's or an item's object."""
    return [node.id for node in ast.walk(target) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]


#: Names IPython binds to earlier results and inputs (``_``, ``__``, ``_0``, ``_i3``, ``Out``): a bare expression at
#: the end of a cell hands its value over as ``_`` and ``_N`` with no assignment in the source (round 99).
_IPYTHON_HISTORY = re.compile(r"^(_+|_i*\d+|_i{1,3}|_[oid]h|Out|In)$")


def _span(index: int, node: ast.AST) -> tuple[int, int, int, int, int]:
    """Where a node is: its cell and its first and last line and column, the same whenever its cell is parsed."""
    return (index, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), getattr(node, "end_lineno", 0) or 0,
            getattr(node, "end_col_offset", 0) or 0)


def _enclosing_bindings(cells: dict[int, str], answer: set[tuple[int, int, int, int, int]]
                        ) -> dict[tuple[int, int, int, int, int], set[str]]:
    """Where a function or lambda nested in the answer is (``answer``: where its definitions are) -> the names
    the answer and the functions between bind: a helper nested in the answer reads the answer's own arguments and
    locals, which the test passes or the answer computes (round 97: such helpers were read as values handed
    around). Only the answer's: another function's arguments are whatever its callers hand it (round 98: a
    ``make(*tools)`` defining a global helper over ``tools``, called as ``make(_pick)`` at the top of a cell)."""
    found: dict[tuple[int, int, int, int, int], set[str]] = {}

    def visit(index: int, node: ast.AST, around: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = around
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                found[_span(index, child)] = around
                if _span(index, child) in answer or around:  # the answer, or a function inside it
                    inner = around | {name for part in ast.walk(child) for name in _names_bound(part)}
            visit(index, child, inner)

    for index, source in cells.items():
        for tree in _parse(source):
            visit(index, tree, set())
    return found


#: Built-ins that read their arguments and change none of them.
_READING_BUILTINS = frozenset({"len", "str", "repr", "format", "print", "sorted", "list", "tuple", "set", "frozenset",
                               "any", "all", "min", "max", "sum", "enumerate", "zip", "reversed", "isinstance",
                               "issubclass", "hash", "bool"})
#: Methods of lists, sets and dicts that read them and change nothing.
_READING_METHODS = frozenset({"get", "keys", "values", "items", "copy", "count", "index", "union", "intersection",
                              "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint"})


def _read_only_names(cells: dict[int, str]) -> set[str]:
    """Names every read of which only looks at what they hold: ``x in NAMES``, ``NAMES[i]``, ``for n in NAMES``,
    ``f"{NAMES}"``, ``NAMES.get(k, d)``, a built-in that reads it (``len``, ``sorted``, ``print``...). A list, set or
    dict of known values bound to such a name stays as it was written (round 97: an honest ``INDEX_DTYPES =
    {torch.int32, torch.int64}`` read as a value handed around; round 98: the same named in an error message, and a
    dtype table read with ``.get``); one that is changed, or handed to other code that could change it, is not."""
    looked_at, other = set(), set()
    for source in cells.values():
        for tree in _parse(source):
            inside: set[int] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    inside |= {id(right) for op, right in zip(node.ops, node.comparators) if isinstance(op, (ast.In, ast.NotIn))}
                elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                    inside.add(id(node.value))
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    inside.add(id(node.iter))
                elif isinstance(node, ast.FormattedValue):
                    inside.add(id(node.value))
                elif isinstance(node, ast.Call) and _is_name(node.func, _READING_BUILTINS):
                    inside |= {id(argument) for argument in node.args}
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr in _READING_METHODS):
                    inside.add(id(node.func.value))
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    (looked_at if id(node) in inside else other).add(node.id)
    return looked_at - other


def _class_pins(node: ast.ClassDef, attribute: str, student: set[str]) -> bool:
    """Whether the class's own body binds ``attribute`` to a value the reading knows (a method, a nested class, a
    constant), and nothing outside the class body could have set it instead."""
    bound = [inner for inner in node.body if isinstance(inner, (*_DEFINITIONS, ast.Import, ast.ImportFrom, ast.Assign,
                                                                 ast.AnnAssign)) and attribute in _bound_names(inner)]
    return bool(bound) and all(_pinned(inner, student) for inner in bound)


#: Calls that make a value holding no callable, and that a default or a constant may be made of (round 96:
#: ``device=torch.device("cpu")`` is honest); a container (``list()``, ``nn.ModuleList()``) may hold anything.
_VALUE_MAKERS = frozenset({"device", "dtype", "Size", "finfo", "iinfo", "float", "int", "complex", "bool", "str",
                           "tuple", "frozenset"})


def _known(value: ast.expr, student: set[str]) -> bool:
    """Whether an expression is a value the reading knows: constants, arithmetic on them, attributes of names only
    the lab binds (``torch.long``, ``math.pi``), not of the student's (an alias of their list is that list), and
    the calls of :data:`_VALUE_MAKERS` on such values."""
    made = set()  # a list, set or dict a value maker turns into a value (``frozenset({...})``, round 98)
    for inner in ast.walk(value):
        if isinstance(inner, ast.Call):
            named = inner.func.attr if isinstance(inner.func, ast.Attribute) else getattr(inner.func, "id", None)
            if named not in _VALUE_MAKERS:
                return False
            made |= {id(argument) for argument in inner.args if isinstance(argument, (ast.List, ast.Set, ast.Dict))}
        elif isinstance(inner, ast.Name):
            if inner.id in student:
                return False
        elif isinstance(inner, (ast.List, ast.Set, ast.Dict)):
            if id(inner) not in made:
                return False
        elif not isinstance(inner, (ast.Constant, ast.Tuple, ast.UnaryOp, ast.unaryop, ast.BinOp, ast.operator,
                                    ast.Load, ast.Attribute, ast.keyword)):
            return False
    return True


def _names_bound(node: ast.AST) -> list[str]:
    """Every name ``node`` binds, in any scope: targets, parameters, definitions, imports, patterns, handlers."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return [node.id]
    if isinstance(node, (*_DEFINITIONS, ast.Import, ast.ImportFrom)):
        return _bound_names(node)
    if isinstance(node, ast.arguments):
        return sorted(_argument_names(node))
    name = getattr(node, "name", None) if isinstance(node, (ast.MatchAs, ast.MatchStar, ast.ExceptHandler)) else None
    rest = node.rest if isinstance(node, ast.MatchMapping) else None
    return [bound for bound in (name, rest) if bound]


def _pinned(node: ast.AST, student: set[str], read_only: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether a binding gives its name a value the reading knows: a function (a lambda too), a class, a module, a
    constant, or an attribute of one only the lab binds (``INDEX_DTYPE = torch.long``; round 95: honest, and
    failed); or a list, set or dict of such values bound to names of ``read_only`` (:func:`_read_only_names`)."""
    if isinstance(node, (*_DEFINITIONS, ast.Import, ast.ImportFrom)):
        return True
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.Lambda):  # a function written in place, read with the answer like a ``def``
        return True
    if isinstance(value, (ast.List, ast.Set, ast.Dict)) and set(_bound_names(node)) <= read_only:
        items = [*value.elts] if not isinstance(value, ast.Dict) else [*value.keys, *value.values]
        return all(item is not None and _known(item, student) for item in items)
    return value is not None and _known(value, student)


def _objects_carry_code(node: ast.ClassDef) -> bool:
    """Whether an object of this class carries code that other code given the object may call: a method of its
    own besides ``__init__`` and ``__new__`` (``__call__``, or ``write`` for ``json.dump(rows, writer)``), an
    attribute bound in the class body, or a base."""
    own = {_target_name(target) for inner in node.body if isinstance(inner, (ast.Assign, ast.AnnAssign))
           for target in (inner.targets if isinstance(inner, ast.Assign) else [inner.target])}
    own |= {inner.name for inner in node.body if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return bool(own - {"__init__", "__new__"}) or any(not _is_name(base, {"object"}) for base in node.bases)


def _called_from_outside(node: ast.ClassDef) -> Iterator[tuple[str, int]]:
    """(what, line) of each way code that is not the student's may call this class's methods, as many times as it
    likes, with no call of them in the source: an inherited base (``nn.Module``'s ``__call__`` runs ``forward``,
    ``UserDict.clear`` calls ``popitem`` once per item, a ``dict``'s mapping pattern calls ``get``), a keyword of the
    class (a metaclass), a decorator (``@dataclass`` writes an ``__init__`` that calls ``__post_init__``), and a method
    that hands its own object or class to other code (``dataclasses.replace(self, ...)``, ``operator.call(self)``).
    Round 117 recursed or looped through each of them; naming every spelling would not close the class."""
    for base in node.bases:
        if not (isinstance(base, ast.Name) and base.id == "object"):
            yield f"class {node.name} derives from {ast.unparse(base)[:40]} (code not yours may call its methods)", \
                node.lineno
    for keyword in node.keywords:
        yield f"class {node.name} has {keyword.arg or '**'}= (code not yours may call its methods)", node.lineno
    for decorator in node.decorator_list:
        yield f"class {node.name} is decorated by {ast.unparse(decorator)[:40]} (which may add code calling its " \
            "methods)", decorator.lineno
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        parameters = [*method.args.posonlyargs, *method.args.args]
        if parameters and not any(_is_name(decorator, {"staticmethod"}) for decorator in method.decorator_list):
            for line in _handed_on(method, parameters[0].arg):
                yield f"{node.name}.{method.name} hands {parameters[0].arg} to other code", line


def _handed_on(function: ast.AST, name: str) -> Iterator[int]:
    """The lines where ``function`` uses ``name`` as a value, other than to read its attributes or items, call it or
    compare it, or return it from ``__enter__`` (for ``with``): it is then handed to other code, or kept where other
    code may get it. Round 119: a method returning ``self`` hands its object to whoever calls it."""
    returned = isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and function.name == "__enter__"
    for parent in ast.walk(function):
        for field, child in ast.iter_fields(parent):
            for item in child if isinstance(child, list) else [child]:
                if not (isinstance(item, ast.Name) and item.id == name and isinstance(item.ctx, ast.Load)):
                    continue
                kept = ((isinstance(parent, (ast.Attribute, ast.Subscript)) and field == "value")
                        or (isinstance(parent, ast.Call) and field == "func")
                        or isinstance(parent, ast.Compare) or returned and isinstance(parent, ast.Return))
                if not kept:
                    yield item.lineno


def python_loops(cells: dict[int, str], function: str, lab_values: frozenset[str] = frozenset(),
                 modules: dict[str, str] | None = None) -> list[str]:
    """Where the student's ``function``, or anything of theirs it uses, iterates in Python ([] when nowhere).

    ``cells``: cell index -> source of every cell the student could have written. ``lab_values``: the names the
    lab's locked cells (set-up and tests) bind to values that are not modules.
    """
    reached = _reached(cells, function, lab_values, modules)
    if reached is None:
        return [f"no definition of {function} that the grader can read"]
    classes = {name for name, _, node in reached.nodes if isinstance(node, ast.ClassDef) and _objects_carry_code(node)}
    properties, library = _pure_properties(cells), _library_names(cells)
    holders = _holders(cells, reached.defined - properties, classes)  # reading ``obj.k`` runs its getter once
    found = []
    for name, index, node in reached.nodes:
        found += [f"{what} in {name} (notebook cell {index + 1}, line {line})"
                  for what, line in dict.fromkeys(_iteration(node, holders, classes, library, properties))]
        if isinstance(node, ast.ClassDef):
            found += [f"{what} (notebook cell {index + 1}, line {line})" for what, line in _called_from_outside(node)]
    for name in dict.fromkeys(name for name, _, _ in reached.nodes):
        if _reaches_itself(name, reached.uses):
            found.append(f"recursion: {name} calls itself, directly or through other functions")
    if reached.unpinned:
        found += [f"{what} handed around as a value (notebook cell {index + 1}, line {node.lineno})"
                  for index, node in _values(cells) if (what := _iterator_name(node))]
        found += [f"{what} kept in IPython's output history (_) at the end of notebook cell {index + 1}"
                  for index, value in _last_expressions(cells) if (what := _code_of_theirs(value, holders, classes, True))]
        found += [f"{what} at the top of notebook cell {index + 1} (line {line})"
                  for index, statement in _top_level_statements(cells)
                  for what, line in dict.fromkeys([*_handed_over(statement, holders, classes),
                                                   *_kept_as_values(statement, holders, classes, library,
                                                                   properties)])]
        found += [f"{what} at the top of notebook cell {index + 1} (line {node.lineno}), kept to run later"
                  for index, node, what in _deferred_at_the_top(cells)]
    return _why_everything(function, reached, found)


def _deferred_at_the_top(cells: dict[int, str]) -> Iterator[tuple[int, ast.AST, str]]:
    """(cell index, node, what it is) of the code at the top of a cell that runs later, whenever other code drives it,
    which an answer reading a value handed around may do: a Timer's strings (they run at each ``timeit``), a
    generator expression, and an iterator that calls a function per item (``map``, ``filter``, ``itertools``', run
    as it is advanced). Round 125: a Timer made at the top of a cell, over a dict the answer fills, ran ``backward``
    for ``r1_penalty``; round 127: ``HOLD.append(BOX.append(len(BOX)) for _ in itertools.repeat(None))`` (and the
    same with ``map``), advanced by the answer's ``zip(range(n), HOLD[0])``, counted a batch's rows, and ran
    ``backward``. Lambdas and definitions are read with the answer anyway (:func:`_reached`)."""
    for index, statement in _top_level_statements(cells):
        todo: list[ast.AST] = [statement]
        while todo:
            node = todo.pop()
            if isinstance(node, _TimedCode):
                yield index, node, _LOOPS[_TimedCode]
            elif isinstance(node, ast.GeneratorExp):
                yield index, node, _LOOPS[ast.GeneratorExp]
            elif isinstance(node, ast.Call) and (name := _last_name(node.func)) in ITERATING:
                yield index, node, f"{name} (it calls a function per item)"
            todo += [child for child in ast.iter_child_nodes(node) if not isinstance(child, (*_DEFINITIONS, ast.Lambda))]


def _last_expressions(cells: dict[int, str]) -> Iterator[tuple[int, ast.expr]]:
    """(cell index, value) of each cell's last statement when it is an expression: IPython keeps its value in
    ``_`` (and ``__``, ``___``, ``Out``) with no assignment in the source (round 124: a bare ``Tally()`` ending a
    cell, then ``def last_valid_token(hidden, lengths, counter=_)`` handed it to ``defaultdict``)."""
    for index, source in cells.items():
        for tree in _parse(source):
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                yield index, tree.body[-1].value


def _top_level_statements(cells: dict[int, str]) -> Iterator[tuple[int, ast.stmt]]:
    """(cell index, statement) of every statement at the top of a cell that is no definition: code that runs when
    the cell does, which may hand the student's functions to values an answer reads later (round 120:
    ``TOOLS.update(rows=_walk)``, then a helper recursing through ``TOOLS["rows"]``)."""
    for index, source in cells.items():
        for tree in _parse(source):
            for statement in tree.body:
                if not isinstance(statement, _DEFINITIONS):
                    yield index, statement


def _why_everything(function: str, reached: Reached, found: list[str]) -> list[str]:
    """``found``, after the reason it covers all the student wrote when it does: a student whose answer reads a value
    handed around learns why a loop elsewhere counts."""
    if not found or not reached.unpinned:
        return found
    names = ", ".join(sorted(reached.unpinned)[:3])
    return [f"{function} reads {names}, a value handed around that the grader cannot pin down, so everything the"
            f" notebook defines is read as part of {function}", *found]


#: Built-ins that go through their argument item by item: handed around as a value (``HELPERS.append(sorted)``),
#: each may be what an answer that reads a value handed around runs.
ITERATING_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "dict", "sum", "min", "max", "sorted", "any",
                                "all", "zip", "enumerate", "reversed"})


def _iterator_name(node: ast.expr) -> str | None:
    """The name of ``node`` when it names something that iterates (:data:`ITERATING`, :data:`ITERATING_BUILTINS`,
    :data:`TO_PYTHON`), else None."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name if name in ITERATING | ITERATING_BUILTINS | TO_PYTHON else None


def _mentions(node: ast.AST, callee: str, aliases: frozenset[str] = frozenset()) -> Iterator[int]:
    """The lines where ``node`` names ``callee``: an attribute, a name (or one of ``aliases``), an imported name, a
    module imported from, or a string."""
    for inner in ast.walk(node):
        named = ((isinstance(inner, ast.Attribute) and inner.attr == callee)
                 or (isinstance(inner, ast.Name) and (inner.id == callee or inner.id in aliases))
                 or (isinstance(inner, ast.alias) and callee in inner.name.split("."))
                 or (isinstance(inner, ast.ImportFrom) and callee in (inner.module or "").split("."))
                 or (isinstance(inner, ast.Constant) and inner.value == callee)
                 or isinstance(inner, _UnreadCode))
        if named:
            yield getattr(inner, "lineno", getattr(node, "lineno", 0))


def forbidden_calls(cells: dict[int, str], function: str, callee: str,
                    aliases: frozenset[str] = frozenset(), lab_values: frozenset[str] = frozenset(),
                    modules: dict[str, str] | None = None) -> list[str]:
    """Where the student's ``function``, or anything of theirs it uses, names ``callee`` ([] when nowhere).

    ``aliases``: other names the lab's own cells bound to it (for ``torch``, the set-up's ``F`` and ``nn``: round
    86's ``torch.broadcast_shapes`` would have been ``F``'s neighbour away), each a mention too. ``lab_values``: as
    for :func:`python_loops`.
    """
    reached = _reached(cells, function, lab_values, modules)
    if reached is None:
        return [f"no definition of {function} that the grader can read"]
    found = [f"{callee} in {name} (notebook cell {index + 1}, line {line})"
             for name, index, node in reached.nodes for line in sorted(set(_mentions(node, callee, aliases)))]
    if reached.unpinned:
        found += [f"{callee} in code kept to run later at the top of notebook cell {index + 1} (line {line})"
                  for index, node, _ in _deferred_at_the_top(cells) for line in sorted(set(_mentions(node, callee, aliases)))]
    return _why_everything(function, reached, found)


def forbidden_values(cells: dict[int, str], function: str, callee: str,
                     modules: dict[str, str] | None = None, lab_values: frozenset[str] = frozenset()) -> list[str]:
    """Where a cell uses ``callee`` as a value rather than calling it: an attribute or name of that name, or, when
    ``callee`` is a module, a function of it reached through one of the names ``modules`` (name -> module) binds
    to it or to its submodules (``torch.broadcast_shapes``, ``F.pad``; ``torch.float32`` and ``torch.Tensor`` are no
    functions). A callable handed over can be called wherever it ends up (round 93: ``STEPS.append(torch.Tensor.
    backward)``, then ``STEPS[0](...)``)."""
    definitions, uses, _ = _graph(cells)
    if function not in definitions or not _unpinned(function, _walk(function, definitions, uses), definitions,
                                                    cells, lab_values, modules):
        return []  # it reads no value handed around: a callable kept elsewhere cannot reach it
    roots = {name: module for name, module in (modules or {}).items()
             if module == callee or module.startswith(f"{callee}.")}
    if not roots:
        return [f"{callee} used as a value (notebook cell {index + 1}, line {node.lineno})"
                for index, node in _values(cells) if (node.id if isinstance(node, ast.Name) else node.attr) == callee]
    return [f"{callee} used as a value (notebook cell {index + 1}, line {node.lineno})"
            for index, node in _values(cells) if isinstance(node, ast.Attribute) and _is_function_of(node, roots)]


def _is_function_of(node: ast.Attribute, roots: dict[str, str]) -> bool:
    """Whether ``node`` (``torch.broadcast_shapes``, ``torch.Tensor.backward``) is a function of a module in
    ``roots``, read off the module itself without running any of its code (``inspect.getattr_static``: no module
    ``__getattr__``, no descriptor). The modules are the lab's own set-up's, imported once by the grader."""
    path: list[str] = []
    inner: ast.expr = node
    while isinstance(inner, ast.Attribute):
        path.insert(0, inner.attr)
        inner = inner.value
    if not isinstance(inner, ast.Name) or inner.id not in roots:
        return False
    try:
        value: object = importlib.import_module(roots[inner.id])
        for attribute in path:
            value = inspect.getattr_static(value, attribute)
    except (ImportError, AttributeError):
        return False
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    return inspect.isroutine(value) or isinstance(value, functools.partial)


def module_aliases(module_names: dict[str, str], callee: str) -> frozenset[str]:
    """The names in ``module_names`` (name -> module, as ``policy.setup_module_names`` reads the lab's locked cells)
    bound to the module ``callee`` or to one of its submodules, ``{"torch", "F", "nn"}`` for ``torch``, or to a
    module of the set-up that uses ``callee`` itself (round 104: a tensor from ``ptlabs.SlowSquares(1)[0]`` did
    ``expand_strides``' work with torch's methods, and the part kept the outputs' share)."""
    return frozenset(name for name, module in module_names.items()
                     if module == callee or module.startswith(f"{callee}.") or _uses_module(module, callee))


@functools.cache
def _uses_module(module: str, callee: str) -> bool:
    """Whether the set-up's module ``module``, or one of its submodules, holds the module ``callee`` (or one of its
    submodules) among its globals, read off the modules the grader imported (``ptlabs.data`` imports torch)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    loaded = [space for name, space in list(sys.modules.items()) if name == module or name.startswith(f"{module}.")]
    with warnings.catch_warnings():  # a deprecated alias among torch's globals warns when its class is asked
        warnings.simplefilter("ignore")
        return any(type(value) is types.ModuleType and (value.__name__ == callee or value.__name__.startswith(f"{callee}."))
                   for space in loaded for value in list(vars(space).values()))
