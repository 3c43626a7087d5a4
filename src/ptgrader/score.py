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
- then the grader adds its single verdict: nothing when the part passes; one error output when
  it earns nothing (why, as ``ename: evalue``); the reason and then an ``execute_result`` holding
  the points it keeps, when only the kernel's own part of the verdict failed (below).

A part's points are decided in two places. Its outputs, compared with the reference solution's
in the grader (:mod:`ptgrader.compare`), its source rules, the policy and the budgets decide
outside the kernel, where a submission cannot reach. What only the kernel can see (a check's
observation such as "the input is unchanged", an error raised in the test cell, the completion
token, the canaries) could be forged by code that evaded the policy, so it decides at most
:data:`IN_KERNEL_SHARE` of a part: a part whose compared outputs all match, and which fails only
inside the kernel, keeps the rest. Forging the kernel's half therefore gains at most that share.
"""

from __future__ import annotations

from dataclasses import dataclass

import nbformat
from nbformat.notebooknode import NotebookNode

from .cells import grade_id, scored_cells

#: Why a test cell does not earn all its points, strongest first: the strongest reason found is the verdict.
ORDER = (WITHHELD, STOPPED, NOT_A_TEST, RULE_BROKEN, DIFFER, RAISED, INCOMPLETE, CHECKS_DIFFER) = (
    "GradingWithheld", "GradingStopped", "NotATestCell", "RuleBroken", "OutputsDiffer", "TestFailed",
    "IncompleteTestCell", "ChecksDiffer",
)
#: The reasons only the kernel can see: each costs a part whose compared outputs match this share of its points.
IN_KERNEL = frozenset({RAISED, INCOMPLETE, CHECKS_DIFFER})
IN_KERNEL_SHARE = 0.25


@dataclass(frozen=True)
class Failure:
    """Why one test cell does not earn all its points."""

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


def verdict(found: list[Failure], *, compared: bool) -> tuple[Failure | None, float]:
    """(the strongest of ``found``, the share of the part's points it leaves).

    ``compared``: the part's outputs were compared by the grader and all matched; only then can a
    reason seen inside the kernel leave more than nothing.
    """
    if not found:
        return None, 1.0
    strongest = min(found, key=lambda failure: ORDER.index(failure.ename))
    kept = 1.0 - IN_KERNEL_SHARE if compared and strongest.ename in IN_KERNEL else 0.0
    return strongest, kept


def write_verdicts(nb: NotebookNode, failures: dict[int, list[Failure]], test_ids: set[str],
                   compared: set[int] = frozenset()) -> dict[str, str]:
    """Rewrite every scored cell as the module's docstring says; return grade_id -> "passed" or what it lost, why.

    ``failures`` holds what the grading steps found (index -> reasons); a cell the kernel raised in
    fails too. ``compared``: the cells whose outputs the grader compared and found all right. A
    scored cell whose grade_id is not one of the lab's test cells (``test_ids``, from the gradebook:
    metadata a submission forged) earns nothing.
    """
    scores = {}
    for index, cell in scored_cells(nb):
        name = grade_id(cell) or f"cell {index + 1}"
        found = list(failures.get(index, []))
        if (raised := kernel_error(cell)) is not None:
            found.append(raised)
        if name not in test_ids:
            found = [Failure(NOT_A_TEST, f"{name} is not one of this lab's test cells")]
        failure, kept = verdict(found, compared=index in compared)
        cell.outputs = [as_feedback(output) for output in cell.get("outputs", [])]
        if failure is None:
            scores[name] = "passed"
        elif kept == 0:
            cell.outputs.append(failure.output())
            scores[name] = f"{failure.ename}: {failure.evalue}"[:300]
        else:
            points = float(cell.metadata["nbgrader"]["points"])
            earned = round(points * kept, 2)
            cell.outputs += [
                nbformat.v4.new_output("stream", name="stdout", text=(
                    f"{failure.ename}: {failure.evalue}\n{earned:g} of {points:g} points: every output the grader "
                    f"compared is right; what is checked inside the kernel, {IN_KERNEL_SHARE:.0%} of the part, failed\n")),
                nbformat.v4.new_output("execute_result", data={"text/plain": f"{earned:g}"}, execution_count=None),
            ]
            scores[name] = f"partial, {earned:g} of {points:g}: {failure.ename}: {failure.evalue}"[:300]
    return scores
