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
  (``defaultdict(pick)``, ``re.sub(pattern, pick, text)``), which may call it once per item;
- ``.tolist()``, ``.item()`` and ``.numpy()``, which move values into Python, where work per element needs
  no torch call (the meta device, part of these parts' domains, has no values to move anyway);
- recursion: a function that reaches itself through any chain of the student's functions or methods (the
  methods Python calls unnamed included: ``self(...)`` calls ``__call__``), or calls one of its own
  arguments (``pick(rows, again)`` calling ``again``, given ``pick`` itself).

The reading also follows every statement that may bind or change a name the function reads, outside
its assignment (round 93: ``HELPERS.append(looping_sum)``, ``TOOLS.append(torch.broadcast_shapes)``, a
``:=``, a ``for`` or ``match`` target, an ``except`` name and the ``raise`` that filled it, a decorator),
with everything such a statement holds; a statement that only calls the function is not part of it.

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
import re
from collections.abc import Iterator

from .ipython_code import as_python, parse


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
TO_PYTHON = frozenset({"tolist", "item", "numpy"})
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


def _parse(source: str, depth: int = 0) -> list[ast.Module]:
    """The cell as Python, and the code inside its magics (``%%time``'s body, ``%time``'s statement)."""
    try:
        tree = parse(as_python(source) if depth == 0 else source)
    except (SyntaxError, ValueError):
        return []  # a cell that does not parse fails on its own when it runs
    found = [tree]
    if depth < 3:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MAGICS:
                for argument in node.args[1:]:
                    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                        found += _parse(argument.value, depth + 1)
    return found


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
    """name -> (cell index, node) of every def and class, and of every assignment and import others can read; and
    for a name bound outside any function, every other statement that may bind or change it (:func:`_sites`)."""
    found: dict[str, list[tuple[int, ast.AST]]] = {}
    sites: dict[str, list[tuple[int, ast.AST]]] = {}
    outside: set[str] = set()  # names a statement outside any function binds
    for index, source in cells.items():
        for tree in _parse(source):
            for node, allowed in _bindings(tree):
                for name in _bound_names(node):
                    if allowed is None or name in allowed:
                        found.setdefault(name, []).append((index, node))
            for site, names, bound in _sites(tree):
                outside |= bound
                for name in names:
                    sites.setdefault(name, []).append((index, site))
    for name in set(found) | outside:
        found.setdefault(name, []).extend(site for site in sites.get(name, ()) if site not in found[name])
    return found


def _headers(statement: ast.stmt) -> list[ast.AST]:
    """What of ``statement`` runs as the statement itself: a simple statement whole; a compound one's header (a
    ``for``'s target and iterable, a ``with``'s items, a ``match``'s subject and patterns, a handler's type, a
    definition's decorators, bases and defaults), not its body, whose statements are sites of their own."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.target, statement.iter]
    if isinstance(statement, (ast.While, ast.If)):
        return [statement.test]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [part for item in statement.items for part in (item.context_expr, item.optional_vars) if part]
    if isinstance(statement, ast.Match):
        return [statement.subject, *(case.pattern for case in statement.cases)]
    if isinstance(statement, (ast.Try, ast.TryStar)):
        return [handler.type for handler in statement.handlers if handler.type]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [*statement.decorator_list, *statement.args.defaults,
                *(default for default in statement.args.kw_defaults if default)]
    if isinstance(statement, ast.ClassDef):
        return [*statement.decorator_list, *statement.bases, *(keyword.value for keyword in statement.keywords)]
    return [statement]


def _sites(tree: ast.Module) -> Iterator[tuple[ast.AST, set[str], set[str]]]:
    """(site, the names it holds, the names it binds outside any function) for every statement of ``tree``.

    Why: a function may read a name that a statement other than its assignment changes (round 93:
    ``HELPERS.append(looping_sum)``, ``TOOLS.append(torch.broadcast_shapes)``), or that a ``:=``, a ``for``, a
    ``match`` or an ``except`` binds. Reading such a name reads every statement that holds it other than as the
    function it calls (``print(segment_sum(v))`` changes no ``segment_sum``), and every name those hold: the site
    is a tuple of the statement's headers and of those names, so the reader follows them all, bound or read. A
    name an ``except`` binds is what any ``raise`` gave, so a handler's site holds every ``raise`` too.
    """
    raised = [part for node in ast.walk(tree) if isinstance(node, ast.Raise)
              for part in (node.exc, node.cause) if part is not None]
    in_functions = {id(inner) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                                ast.Lambda))
                    for inner in ast.walk(node) if inner is not node}
    for statement in ast.walk(tree):
        if not isinstance(statement, (ast.stmt, ast.ExceptHandler)):
            continue
        if isinstance(statement, ast.ExceptHandler):
            parts = [*([statement.type] if statement.type else []), *raised]
            extra = {statement.name} if statement.name else set()
        else:
            parts, extra = _headers(statement), set()
            if isinstance(statement, _DEFINITIONS) and statement.decorator_list:
                extra = {statement.name}  # handed to each decorator (``@HELPERS.append``)
        callees = {id(node.func) for part in parts for node in ast.walk(part) if isinstance(node, ast.Call)}
        names = {node.id for part in parts for node in ast.walk(part) if isinstance(node, ast.Name)
                 and id(node) not in callees} | extra
        names |= {node.name for part in parts for node in ast.walk(part)
                  if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name}
        names |= {node.rest for part in parts for node in ast.walk(part) if isinstance(node, ast.MatchMapping) and node.rest}
        if not names:
            continue
        bound = set()
        if id(statement) not in in_functions:
            bound = {node.id for part in parts for node in ast.walk(part)
                     if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)} | extra
            bound |= names - {node.id for part in parts for node in ast.walk(part) if isinstance(node, ast.Name)}
        site = ast.Tuple(elts=[*parts, *(ast.Name(id=name, ctx=ast.Load()) for name in sorted(names))], ctx=ast.Load())
        site.lineno = statement.lineno
        site.site = True  # a site, not a definition: no recursion through it (:func:`_reached`)
        yield site, names, bound


def _iteration(node: ast.AST, callables: set[str], classes: set[str]) -> Iterator[tuple[str, int]]:
    """(what, line) of every Python iteration written in ``node`` itself; ``callables``: the names of the student's
    functions, classes and their aliases, ``classes``: those of their classes whose objects may be callable."""
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
    yield from _handed_over(node, callables, classes)


def _per_item(name: str | None) -> bool:
    """Whether a method of this name is one Python may call once per item (:data:`ONCE_PER_CALL`)."""
    return bool(name) and len(name) > 4 and name.startswith("__") and name.endswith("__") and name not in ONCE_PER_CALL


def _target_name(target: ast.AST) -> str | None:
    """The name an assignment target binds: ``x`` of ``x = ...``, ``__len__`` of ``Row.__len__ = ...``."""
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None


def _handed_over(node: ast.AST, callables: set[str], classes: set[str]) -> Iterator[tuple[str, int]]:
    """(what, line) of every function, lambda, class or callable object of the student's that ``node`` passes to a
    call as a value, not calling it: the callee may call it once per item (``defaultdict(pick)`` with
    ``itemgetter(*keys)``, ``re.sub(pattern, pick, text)``, ``json.dumps(rows, default=pick)``, ``type(name, bases,
    {"__len__": pick})``, ``vmap(pick, chunk_size=1)``), which no loop, comprehension or ``map`` shows (round 62).

    ``callables``: the names of the student's functions, classes and aliases (a string naming one counts, for
    ``getattr(self, "pick")``); ``classes``: those of their classes whose objects may be callable. A local bound to
    a lambda or to such an object counts as well."""
    made = {target.id for inner in ast.walk(node) if isinstance(inner, ast.Assign)
            for value in _direct(inner.value) if _callable_value(value, callables, classes, direct=True)
            for target in inner.targets if isinstance(target, ast.Name)}
    for inner in ast.walk(node):
        if not isinstance(inner, ast.Call):
            continue
        for argument in [*inner.args, *(keyword.value for keyword in inner.keywords)]:
            called = {id(call.func) for call in ast.walk(argument) if isinstance(call, ast.Call)}
            direct = {id(value) for value in _direct(argument)}
            for value in ast.walk(argument):
                if id(value) not in called and (what := _callable_value(value, callables | made, classes,
                                                                        direct=id(value) in direct)):
                    yield f"{what} handed to other code as a value (it may call it once per item)", inner.lineno


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
    return None


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
    used = {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load)}
    if isinstance(node, _DEFINITIONS):
        used -= {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store)}
        used -= {name for inner in ast.walk(node) if isinstance(inner, ast.arguments) for name in _argument_names(inner)}
    methods = {inner.name for inner in ast.walk(node) if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))}
    used |= {inner.attr for inner in ast.walk(node) if isinstance(inner, ast.Attribute)} & (callables | methods)
    used |= set(_implicit_methods(node))
    return used & known


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


def _reached(cells: dict[int, str], function: str
             ) -> tuple[list[tuple[str, int, ast.AST]], dict[str, set[str]], set[str]] | None:
    """(name, cell index, node) of ``function`` and of everything of the student's it uses, who uses whom, and
    the names of the student's functions, classes and their aliases; None when no definition of ``function`` can
    be read."""
    definitions = _definitions(cells)
    if function not in definitions:
        return None
    callables = {name for name, nodes in definitions.items() if any(isinstance(n, _DEFINITIONS) for _, n in nodes)}
    aliases = _aliases(cells, callables)
    known = set(definitions) | set(aliases)
    callables |= set(aliases)
    uses = {name: set().union(*(_used_names(node, known, callables) for _, node in nodes
                                if not getattr(node, "site", False)))
            for name, nodes in definitions.items()}
    for alias, targets in aliases.items():
        uses[alias] = uses.get(alias, set()) | targets
    # what a name's sites hold is reached too, but is no call of it: a statement that changes a name holds it
    reaches = {name: uses.get(name, set()).union(*(_used_names(node, known, callables) for _, node in nodes
                                                   if getattr(node, "site", False)))
               for name, nodes in definitions.items()} | {alias: uses[alias] for alias in aliases}
    reached, todo, found = set(), [function], []
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        found += [(name, index, node) for index, node in definitions.get(name, ())]
        todo += sorted(reaches[name] - reached)
    return found, uses, callables


def _objects_callable(node: ast.ClassDef) -> bool:
    """Whether an object of this class may be callable: it defines ``__call__``, or has a base that may."""
    own = {_target_name(target) for inner in node.body if isinstance(inner, (ast.Assign, ast.AnnAssign))
           for target in (inner.targets if isinstance(inner, ast.Assign) else [inner.target])}
    own |= {inner.name for inner in node.body if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return "__call__" in own or any(not (isinstance(base, ast.Name) and base.id == "object") for base in node.bases)


def python_loops(cells: dict[int, str], function: str) -> list[str]:
    """Where the student's ``function``, or anything of theirs it uses, iterates in Python ([] when nowhere).

    ``cells``: cell index -> source of every cell the student could have written.
    """
    reached = _reached(cells, function)
    if reached is None:
        return [f"no definition of {function} that the grader can read"]
    nodes, uses, callables = reached
    classes = {name for name, _, node in nodes if isinstance(node, ast.ClassDef) and _objects_callable(node)}
    found = []
    for name, index, node in nodes:
        found += [f"{what} in {name} (notebook cell {index + 1}, line {line})"
                  for what, line in _iteration(node, callables, classes)]
    for name in dict.fromkeys(name for name, _, _ in nodes):
        if _reaches_itself(name, uses):
            found.append(f"recursion: {name} calls itself, directly or through other functions")
    return found


def _mentions(node: ast.AST, callee: str, aliases: frozenset[str] = frozenset()) -> Iterator[int]:
    """The lines where ``node`` names ``callee``: an attribute, a name (or one of ``aliases``), an imported name, a
    module imported from, or a string."""
    for inner in ast.walk(node):
        named = ((isinstance(inner, ast.Attribute) and inner.attr == callee)
                 or (isinstance(inner, ast.Name) and (inner.id == callee or inner.id in aliases))
                 or (isinstance(inner, ast.alias) and callee in inner.name.split("."))
                 or (isinstance(inner, ast.ImportFrom) and callee in (inner.module or "").split("."))
                 or (isinstance(inner, ast.Constant) and inner.value == callee))
        if named:
            yield getattr(inner, "lineno", getattr(node, "lineno", 0))


def forbidden_calls(cells: dict[int, str], function: str, callee: str,
                    aliases: frozenset[str] = frozenset()) -> list[str]:
    """Where the student's ``function``, or anything of theirs it uses, names ``callee`` ([] when nowhere).

    ``aliases``: other names the lab's own cells bound to it (for ``torch``, the set-up's ``F`` and ``nn``: round
    86's ``torch.broadcast_shapes`` would have been ``F``'s neighbour away), each a mention too.
    """
    reached = _reached(cells, function)
    if reached is None:
        return [f"no definition of {function} that the grader can read"]
    return [f"{callee} in {name} (notebook cell {index + 1}, line {line})"
            for name, index, node in reached[0] for line in sorted(set(_mentions(node, callee, aliases)))]


def module_aliases(module_names: dict[str, str], callee: str) -> frozenset[str]:
    """The names in ``module_names`` (name -> module, as ``policy.setup_module_names`` reads the lab's locked cells)
    bound to the module ``callee`` or to one of its submodules: ``{"torch", "F", "nn"}`` for ``torch``."""
    return frozenset(name for name, module in module_names.items()
                     if module == callee or module.startswith(f"{callee}."))
