"""The score of a test cell is the grader's verdict, never something the kernel printed.

nbgrader scores a graded code cell by the *first* of its outputs that is an error, a ``stderr``
stream or an ``execute_result`` (nbgrader.utils.determine_grade): an error or stderr means zero, an
``execute_result`` whose text is a number is that many points, and any other ``execute_result``
means full points. Every one of those outputs comes from the kernel, so a kernel could decide its
own score: a function that publishes an ``execute_result`` earned full points on a blank notebook,
and an honest answer that made torch print a ``UserWarning`` lost its part.

So after the run, :func:`write_verdicts` rewrites every cell nbgrader scores:

- the kernel's own outputs stay visible as feedback, in forms nbgrader does not score: an
  ``execute_result`` becomes a ``display_data`` with the same data, a ``stderr`` stream becomes a
  ``stdout`` stream, an error becomes its traceback as text;
- then the grader adds its single verdict: one error output when the part fails (why, as
  ``ename: evalue``), nothing when it passes.

The labs give no partial credit: no verdict is an ``execute_result``.
"""

from __future__ import annotations

from dataclasses import dataclass

import nbformat
from nbformat.notebooknode import NotebookNode

from .cells import grade_id, scored_cells

#: Why a test cell earns nothing, strongest first: the first reason found is the verdict's.
WITHHELD, STOPPED, NOT_A_TEST, RAISED, INCOMPLETE, RULE_BROKEN, DIFFER = (
    "GradingWithheld", "GradingStopped", "NotATestCell", "TestFailed", "IncompleteTestCell", "RuleBroken",
    "OutputsDiffer",
)


@dataclass(frozen=True)
class Failure:
    """Why one test cell earns no points."""

    ename: str
    evalue: str

    def output(self) -> NotebookNode:
        return error_output(self.ename, self.evalue)


def error_output(ename: str, evalue: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def kernel_error(cell: NotebookNode) -> Failure | None:
    """The first error the kernel raised in ``cell`` (the test failed), or None."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return Failure(RAISED, f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
    return None


def as_feedback(output: NotebookNode) -> NotebookNode:
    """The same output in a form nbgrader does not score (see the module's docstring)."""
    kind = output.get("output_type")
    if kind == "execute_result":
        return nbformat.v4.new_output("display_data", data=output.get("data", {}), metadata=output.get("metadata", {}))
    if kind == "stream" and output.get("name") != "stdout":
        return nbformat.v4.new_output("stream", name="stdout", text=output.get("text", ""))
    if kind == "error":
        lines = output.get("traceback") or [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return nbformat.v4.new_output("stream", name="stdout", text="\n".join(map(str, lines)) + "\n")
    return output


def write_verdicts(nb: NotebookNode, failures: dict[int, Failure], test_ids: set[str]) -> dict[str, str]:
    """Rewrite every scored cell as the module's docstring says; return grade_id -> "passed" or why not.

    ``failures`` holds what the grading steps found (index -> the strongest reason); a cell the
    kernel raised in fails too. A scored cell whose grade_id is not one of the lab's test cells
    (``test_ids``, from the gradebook: metadata a submission forged) earns nothing.
    """
    scores = {}
    for index, cell in scored_cells(nb):
        name = grade_id(cell) or f"cell {index + 1}"
        failure = failures.get(index) or kernel_error(cell)
        if name not in test_ids:
            failure = Failure(NOT_A_TEST, f"{name} is not one of this lab's test cells")
        cell.outputs = [as_feedback(output) for output in cell.get("outputs", [])]
        if failure is not None:
            cell.outputs.append(failure.output())
        scores[name] = "passed" if failure is None else f"{failure.ename}: {failure.evalue}"[:300]
    return scores
