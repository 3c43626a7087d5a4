"""A cell's source as the Python that IPython runs: ``!cmd`` and ``%magic`` become the ``get_ipython()`` calls
they are; and Python parsed into a tree with the garbage collector paused (:func:`parse`).

Why one cached function: the code policy and the source rules read every cell of every submission, some of
them several times, and a class's submissions share most of their text (the lab's locked cells, and many
answers); IPython's tokenizer is the costliest step of reading a cell (a few milliseconds each). The result
is a string, so a cached one cannot be changed by whoever uses it.
"""

from __future__ import annotations

import ast
import functools
import gc

from IPython.core.inputtransformer2 import TransformerManager

_transformer = TransformerManager()


@functools.lru_cache(maxsize=4096)
def as_python(source: str) -> str:
    """``source`` as IPython turns it into Python before running it; raises SyntaxError as IPython does."""
    return _transformer.transform_cell(source)


def parse(code: str) -> ast.Module:
    """``ast.parse(code)``, with the garbage collector paused while it runs.

    Why: Python 3.11 keeps one recursion counter for the whole AST module, set again at the start of each
    conversion of a tree into Python objects. A collection during that conversion can run a finalizer that parses
    too (asyncio logs "exception was never retrieved" with a traceback, and 3.11's traceback module parses each
    line for its ``^^^`` marks), and the outer parse then fails with "SystemError: AST constructor recursion
    depth mismatch" (shown by tests/test_source_rules.py on this Python; CPython issue 106905 names another way to
    the same error). In ``make test`` one student's submission ended
    unprocessed that way, after the grader had taken in another's. What is garbage is collected before or
    after a parse, never during one.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(code)
    finally:
        if was_enabled:
            gc.enable()
