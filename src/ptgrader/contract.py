"""What the grading service expects of the checks that run inside a kernel, and how it calls them.

The checks live apart from the service, in ``ptchecks`` (``src/ptchecks``), the package the labs'
test cells call by full name. The service never imports it (that would import torch into the
grader); it names it here, once (:data:`CHECKS_MODULE`).

How a graded test cell runs (:mod:`ptgrader.execute` sends these as separate executions):

1. right after the lab's locked set-up cell, before any student code, :func:`hold_source` takes
   hold of the checks module, of the shell and of the test cells' sources, in an object kept in
   IPython's hidden namespace (not a notebook global, not ``sys.modules``, not an attribute of
   ``ptlabs``: replacing any of those later does not reach it);
2. the test cell runs through it (:func:`run_line`): ``begin``, then the cell's own code in a copy
   of the notebook's globals taken as the cell starts, so a student's function that rebinds a
   global (``global expected``) while the test calls it changes nothing the test reads; what the
   cell defines is copied back afterwards;
3. if the cell ran without an error, a separate execution (:func:`complete_line`) calls the held
   ``complete``, with the one-time token: the token is not in the kernel while student code runs
   in the test cell. ``complete`` prints it only after the canaries pass and as many checks passed
   as the reference solution passes there.
"""

from __future__ import annotations

from . import ipython_code

#: The module of checks the hidden tests call; the grader wraps each test cell in its begin/complete.
CHECKS_MODULE = "ptchecks"

#: The line ``complete`` prints at the end of a graded test cell; the same as
#: ``ptchecks.COMPLETION_FORMAT`` (tests/test_autograde_guard.py holds them equal).
COMPLETION_FORMAT = "ptlabs-grading: {test_id} complete {token}"

#: What the reference solution's run executes right after its set-up cell, where a student's run takes the hold:
#: the same baseline of the settings in both runs.
BASELINE_LINE = f"__import__({CHECKS_MODULE!r}).hold_baseline()"

#: Where the hold lives in the kernel: ``get_ipython().user_ns_hidden[HOLD]``.
HOLD = "_ptgrader"

_HOLD_SOURCE = """
def _ptgrader_hold(sources, codes):
    import importlib

    checks = importlib.import_module(CHECKS_MODULE)
    shell = get_ipython()
    notebook = shell.user_ns
    begin, complete = checks.begin, checks.complete
    checks.hold_baseline()

    class Hold:
        __slots__ = ()

        def run(self, test_id):
            begin(test_id)
            namespace = dict(notebook)
            before = dict(namespace)
            source = sources[test_id]
            code = codes.get(test_id) or shell.transform_cell(source)
            name = shell.compile.cache(code, shell.execution_count, raw_code=source)
            try:
                exec(compile(code, name, "exec"), namespace)
            finally:
                for key, value in namespace.items():
                    if before.get(key, before) is not value:
                        notebook[key] = value

        def complete(self, test_id, token, expected_checks):
            complete(test_id, token, expected_checks)

    shell.user_ns_hidden[HOLD] = Hold()


_ptgrader_hold(SOURCES, CODES)
del _ptgrader_hold
"""


def hold_source(sources: dict[str, str]) -> str:
    """The code that takes hold of the checks, with the sources of the lab's test cells (grade_id -> source), and
    each as the Python IPython runs (:func:`python_codes`)."""
    return (_HOLD_SOURCE.replace("CHECKS_MODULE", repr(CHECKS_MODULE)).replace("HOLD", repr(HOLD))
            .replace("SOURCES", repr(sources)).replace("CODES", repr(python_codes(sources))))


def python_codes(sources: dict[str, str]) -> dict[str, str]:
    """grade_id -> a test cell's source as the Python IPython runs, made once in the grader (and cached there for
    the class) rather than in every kernel: tokenizing a lab's test cells took 65 ms of each lab 02 kernel.

    A one-line cell is left to the kernel (its shell also runs one-line cells through its prefilters, as
    automagic), and so is one IPython cannot read (the kernel raises the error, as before).
    """
    codes = {}
    for test_id, source in sources.items():
        try:
            code = ipython_code.as_python(source)
        except SyntaxError:
            continue
        if len(code.splitlines()) > 1:
            codes[test_id] = code
    return codes


def run_line(test_id: str) -> str:
    """What the kernel executes for a graded test cell: its source (given to the hold), run through the hold."""
    return f"get_ipython().user_ns_hidden[{HOLD!r}].run({test_id!r})"


def complete_line(test_id: str, token: str, expected_checks: int) -> str:
    """Executed after the test cell ran cleanly: prints the token only after a clean, full run."""
    return f"get_ipython().user_ns_hidden[{HOLD!r}].complete({test_id!r}, {token!r}, {expected_checks})"
