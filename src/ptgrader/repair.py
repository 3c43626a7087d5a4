"""Repairs before grading: a submission whose cells lost their nbgrader metadata is still graded.

Editors and tools strip cell metadata (copy-paste into a new notebook, some "clear metadata"
commands). nbgrader then no longer recognises the student's answers, cannot place the test cells
it puts back, and stops on that submission with a ``KeyError``: ``nbgrader autograde`` exits 1.

- :class:`RecoverCellMetadata` gives a cell without nbgrader metadata the metadata of the
  release cell it came from, matched by cell id (nbformat keeps ids when metadata is stripped),
  or by position when the notebook still has the release's shape;
- :class:`PlaceMissingCells` is nbgrader's ``OverwriteCells``, except that a test cell whose
  neighbour is gone too is appended at the end instead of stopping the whole submission.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells

#: Cell metadata keys that come back with the nbgrader metadata.
_RESTORED_KEYS = ("nbgrader", "tags", "editable", "deletable")


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


class RecoverCellMetadata(NbGraderPreprocessor):
    """Give cells that lost their nbgrader metadata the metadata of their release cell."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=self.config)
        release_path = Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"])) / (
            info["notebook"] + ".ipynb"
        )
        if not release_path.is_file():
            return nb, resources
        release = nbformat.read(release_path, as_version=4)
        present = {_grade_id(cell) for cell in nb.cells} - {None}
        by_id = {cell.get("id"): cell for cell in release.cells if _grade_id(cell)}
        same_shape = [c.cell_type for c in nb.cells] == [c.cell_type for c in release.cells]
        recovered = 0
        for index, cell in enumerate(nb.cells):
            if "nbgrader" in cell.get("metadata", {}):
                continue
            origin = by_id.get(cell.get("id")) or (release.cells[index] if same_shape else None)
            if origin is None or _grade_id(origin) in present or origin.cell_type != cell.cell_type:
                continue
            for key in _RESTORED_KEYS:
                if key in origin.metadata:
                    cell.metadata[key] = copy.deepcopy(origin.metadata[key])
            present.add(_grade_id(origin))
            recovered += 1
        if recovered:
            self.log.warning("ptgrader: %s/%s: restored the nbgrader metadata of %d cells", info["student"],
                             info["assignment"], recovered)
        return nb, resources


class PlaceMissingCells(OverwriteCells):
    """OverwriteCells that appends a missing test cell at the end when nbgrader cannot place it."""

    def add_missing_grade_cells(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict]:
        attempt = copy.deepcopy(nb)
        try:
            return super().add_missing_grade_cells(attempt, resources)
        except (KeyError, ValueError, IndexError):
            pass
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        present = {_grade_id(cell) for cell in nb.cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        sources = {cell.name: cell for cell in source_nb.source_cells}
        for grade_cell in source_nb.grade_cells:
            if grade_cell.name not in present:
                self.log.warning("Missing grade cell %s, appended at the end of the notebook", grade_cell.name)
                nb.cells.append(
                    nbformat.from_dict(
                        self.missing_cell_transform(
                            sources[grade_cell.name], grade_cell.max_score, is_solution=grade_cell.name in solutions
                        )
                    )
                )
        return nb, resources
