"""Rules about how an answer is written, read from its source by the grader, never decided in the kernel.

A part that says "no Python loop" was checked only inside the kernel, by counting torch calls for a
small and a large input: code that got past the code policy could forge that count, and a loop over
``values.tolist()`` makes no torch call at all. The grader reads the rule from the lab's own test
cell (a trusted line of the source, :data:`RULE`), then reads the student's cells: the function the
rule names, and every function, class or name of the student's that it uses, however deep. Any
Python iteration there breaks the rule: ``for``/``while`` statements, comprehensions and generator
expressions, ``map``/``filter``/``reduce`` and ``itertools``, and a function that calls itself.
The in-kernel count stays, for iteration this reading cannot see (``sum(x.unbind(0))``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from IPython.core.inputtransformer2 import TransformerManager

#: The line of a test cell that asks for no Python loop in a function of the student's.
RULE = re.compile(r"^\s*# ptgrader: no Python loop in (\w+)\s*$", re.MULTILINE)
_LOOPS = {
    ast.For: "a for loop", ast.AsyncFor: "a for loop", ast.While: "a while loop", ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension", ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression",
}
_ITERATING_CALLS = {"map", "filter", "reduce", "accumulate", "starmap", "product", "chain", "repeat", "cycle"}
_transformer = TransformerManager()


def loop_rules(test_source: str) -> list[str]:
    """The functions a test cell's trusted source asks to have no Python loop."""
    return RULE.findall(test_source)


def _definitions(cells: dict[int, str]) -> dict[str, list[tuple[int, ast.AST]]]:
    """name -> (cell index, node) of every top-level def, class and assignment in the student's cells."""
    found: dict[str, list[tuple[int, ast.AST]]] = {}
    for index, source in cells.items():
        try:
            tree = ast.parse(_transformer.transform_cell(source))
        except (SyntaxError, ValueError):
            continue  # a cell that does not parse fails on its own when it runs
        for node in tree.body:
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]
            for name in names:
                found.setdefault(name, []).append((index, node))
    return found


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _iteration(name: str, node: ast.AST) -> Iterator[tuple[str, int]]:
    """(what, line) of every Python iteration in ``node``, the definition of ``name``."""
    for inner in ast.walk(node):
        if type(inner) in _LOOPS:
            yield _LOOPS[type(inner)], inner.lineno
        elif isinstance(inner, ast.Call) and _called_name(inner) in _ITERATING_CALLS:
            yield f"{_called_name(inner)}(...)", inner.lineno
        elif isinstance(inner, ast.Call) and _called_name(inner) == name and isinstance(inner.func, ast.Name):
            yield f"a call of {name} by itself", inner.lineno


def python_loops(cells: dict[int, str], function: str) -> list[str]:
    """Where the student's ``function``, or anything of theirs it uses, iterates in Python ([] when nowhere).

    ``cells``: cell index -> source of every cell the student could have written.
    """
    definitions = _definitions(cells)
    seen, todo, found = set(), [function], []
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        for index, node in definitions[name]:
            found += [f"{what} in {name} (notebook cell {index + 1}, line {line})" for what, line in _iteration(name, node)]
            todo += sorted(_used_names(node) - seen)
    return found


def _used_names(node: ast.AST) -> set[str]:
    """The names ``node`` reads that it does not bind itself (its arguments and locals are its own)."""
    bound = {arg.arg for inner in ast.walk(node) if isinstance(inner, ast.arguments)
             for arg in [*inner.posonlyargs, *inner.args, *inner.kwonlyargs, inner.vararg, inner.kwarg] if arg}
    bound |= {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store)}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        bound = set()  # at the top level, the names it assigns are what others use
    return {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load)} - bound
