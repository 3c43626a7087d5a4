"""Which cells of a lab notebook are which: the set-up cell, the graded test cells, how a report names a cell."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.utils import is_grade, is_solution


def graded_test_cells(nb: NotebookNode) -> list[tuple[int, NotebookNode]]:
    """(index, cell) of every code cell nbgrader grades by its outputs and the student did not write."""
    return [
        (index, cell)
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and is_grade(cell) and not is_solution(cell)
    ]


def scored_cells(nb: NotebookNode) -> list[tuple[int, NotebookNode]]:
    """(index, cell) of every code cell nbgrader would score from its outputs, whatever else its metadata says."""
    return [(index, cell) for index, cell in enumerate(nb.cells) if cell.cell_type == "code" and is_grade(cell)]


def grade_id(cell: NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def cell_label(cell: NotebookNode, index: int) -> str:
    """How a report names a cell: its grade_id when it has one, else its position counted from 1."""
    name = grade_id(cell)
    return f"cell {index + 1} ({name})" if name else f"cell {index + 1}"


def setup_index(nb: NotebookNode) -> int:
    """Index of the lab's locked set-up cell (grade_id ``setup``), 0 when there is none."""
    ids = [grade_id(cell) for cell in nb.cells]
    return ids.index("setup") if "setup" in ids else 0


def number_cells(nb: NotebookNode) -> None:
    """Number the code cells that ran 1, 2, 3 ... in their order, and their results with them, in place.

    Why the grader numbers them: the kernel's count is the kernel's to set, and nbclient copies it into the
    notebook, whose pages show it beside each cell (round 48: ``get_ipython().execution_count = 10**4290``
    made every later cell's label 4,290 digits wide on the feedback page)."""
    ran = [cell for cell in nb.cells if cell.cell_type == "code" and cell.get("execution_count") is not None]
    for number, cell in enumerate(ran, start=1):
        cell.execution_count = number
        for output in cell.get("outputs", []):
            if output.get("output_type") == "execute_result":
                output.execution_count = number
