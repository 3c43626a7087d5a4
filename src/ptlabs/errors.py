"""Show a deliberate error in two lines, and fail loudly when the expected error does not come.

Jupyter's and Colab's "Run All" stop at the first uncaught exception and ignore cell tags, so a
chapter that teaches an error message must catch it. ``expect_error`` does that visibly: the torch
call stays in the reader's cell, the expected exception type is named there, and what is printed
is the lesson (type and message), not a traceback through torch internals.
"""

from __future__ import annotations

import re
import textwrap
from types import TracebackType

__all__ = ["expect_error"]

WIDTH = 80  # the website's code column
MAX_LINES = 6  # a longer message is cut: the first lines carry the lesson
ANSI_STYLE = re.compile(r"\x1b\[[0-9;]*m")  # some messages embed terminal bold/colour codes


class expect_error:  # noqa: N801 - used as a context manager, named like one (`with expect_error(...)`)
    """``with expect_error(RuntimeError): xt.view(-1)`` prints ``RuntimeError: view size is ...``.

    * The expected exception is caught and printed as ``Type: message``, wrapped to 80
      columns and cut after six lines.
    * Nothing raised: ``AssertionError`` (the lesson no longer holds on this torch).
    * Another exception type: it propagates untouched, so the cell fails as it would without us.
    * ``match``: a regular expression the message must contain (``re.search``), so a cell that
      promises a particular message proves it.

    After the block, ``.error`` holds the caught exception for cells that inspect it further.
    """

    def __init__(self, *expected: type[BaseException], match: str | None = None) -> None:
        if not expected or not all(isinstance(t, type) and issubclass(t, BaseException) for t in expected):
            raise TypeError("expect_error() needs one or more exception classes, e.g. expect_error(RuntimeError)")
        self.expected = expected
        self.match = match
        self.error: BaseException | None = None

    def __enter__(self) -> expect_error:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        names = " or ".join(t.__name__ for t in self.expected)
        if error is None:
            raise AssertionError(f"expected {names}, but the block raised nothing")
        if not isinstance(error, self.expected):
            return False  # not the lesson: let it propagate with its own traceback
        message = str(error)
        if self.match is not None and not re.search(self.match, message):
            raise AssertionError(
                f"expected {names} matching {self.match!r}, got {type(error).__name__}: {message}"
            ) from error
        self.error = error
        print(format_error(error))
        return True


def format_error(error: BaseException) -> str:
    """``Type: message`` wrapped to the page width, at most ``MAX_LINES`` lines, terminal codes removed."""
    text = ANSI_STYLE.sub("", f"{type(error).__name__}: {error}").strip()
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(line, WIDTH, subsequent_indent="  ") or [""])
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"  [... {len(lines) - MAX_LINES} more lines]"]
    return "\n".join(lines)
