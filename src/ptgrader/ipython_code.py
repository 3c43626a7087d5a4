"""A cell's source as the Python that IPython runs: ``!cmd`` and ``%magic`` become the ``get_ipython()`` calls
they are.

Why one cached function: the code policy and the source rules read every cell of every submission, some of
them several times, and a class's submissions share most of their text (the lab's locked cells, and many
answers); IPython's tokenizer is the costliest step of reading a cell (a few milliseconds each). The result
is a string, so a cached one cannot be changed by whoever uses it.
"""

from __future__ import annotations

import functools

from IPython.core.inputtransformer2 import TransformerManager

_transformer = TransformerManager()


@functools.lru_cache(maxsize=4096)
def as_python(source: str) -> str:
    """``source`` as IPython turns it into Python before running it; raises SyntaxError as IPython does."""
    return _transformer.transform_cell(source)
