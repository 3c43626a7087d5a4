"""Repairs before grading: a submission whose cells lost their nbgrader metadata is still graded.

Editors and tools strip cell metadata (copy-paste into a new notebook, some "clear metadata"
commands). nbgrader then no longer recognises the student's answers, cannot place the test cells
it puts back, and stops on that submission with a ``KeyError``: ``nbgrader autograde`` exits 1.

- :class:`RecoverCellMetadata` gives a cell without nbgrader metadata the metadata of the
  release cell it came from, matched by cell id (nbformat keeps ids when metadata is stripped),
  or by position when the notebook still has the release's shape;
- :class:`PlaceMissingCells` is nbgrader's ``OverwriteCells``, except that a test cell whose
  neighbour is gone too is appended at the end instead of stopping the whole submission;
- :class:`DeduplicateCells` is nbgrader's ``DeduplicateIds``, except that of the copies of a lab cell
  (copied and pasted in Jupyter, metadata and all) the lab's own stays, and the others become ordinary
  cells (a solution's) or are left out (a cell the lab wrote), instead of cells whose empty nbgrader
  metadata stopped nbgrader's later steps with a ``KeyError``;
- :class:`RestoreCellFlags` puts back the flags of every cell of the lab (``grade``, ``solution``,
  ``locked``, ``task``, ``points``, ...) from the gradebook, before nbgrader checks the checksums
  (they cover the flags: a test cell marked ``"solution": true`` made nbgrader fail the submission
  with "Inconsistent checksums"), and makes a cell whose ``grade_id`` is not the lab's an ordinary one.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, Notebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat import SCHEMA_VERSION
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells

#: Cell metadata keys that come back with the nbgrader metadata.
_RESTORED_KEYS = ("nbgrader", "tags", "editable", "deletable")


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


class RecoverCellMetadata(NbGraderPreprocessor):
    """Give cells that lost their nbgrader metadata the metadata of their release cell."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        release = release_cells(self.config, resources)
        if not release:
            return nb, resources
        present = {_grade_id(cell) for cell in nb.cells} - {None}
        by_id = {cell.get("id"): cell for cell in release if _grade_id(cell)}
        same_shape = [c.cell_type for c in nb.cells] == [c.cell_type for c in release]
        recovered = 0
        for index, cell in enumerate(nb.cells):
            if "nbgrader" in cell.get("metadata", {}):
                continue
            origin = by_id.get(cell.get("id")) or (release[index] if same_shape else None)
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


class DeduplicateCells(NbGraderPreprocessor):
    """nbgrader's DeduplicateIds, with every copy of a lab cell but one dealt with, and the lab's own cell kept.

    A cell copied and pasted in Jupyter keeps its nbgrader metadata. nbgrader keeps the last copy and leaves
    each earlier one an empty ``nbgrader`` dict, and its later steps (placing the test cells) read a
    ``grade_id`` from every cell that has one: a pasted cell cost an honest student every mark, and the
    submission went to review (round 19). Here, of the copies of a cell the lab wrote (a test, the set-up, a
    text), the one with the release's cell id stays where it is (the last one where none has it), and the
    others are left out: nbgrader puts the lab's source back into the copy it keeps, and a pasted copy would
    otherwise move the lab's cell to where the student put it (round 21). Of the copies of a solution, the
    last is the lab's, as in nbgrader, and the others run as the student's own code. The report lists each
    copy by its place in the notebook.
    """

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        release_ids = {_grade_id(cell): cell.get("id") for cell in release_cells(self.config, resources)}
        places: dict[str, list[int]] = {}
        for index, cell in enumerate(nb.cells):
            if utils.is_grade(cell) or utils.is_solution(cell) or utils.is_locked(cell):
                places.setdefault(cell.metadata.nbgrader["grade_id"], []).append(index)
        dropped: set[int] = set()
        copies: list[str] = []
        for grade_id, found in places.items():
            if len(found) == 1:
                continue
            if utils.is_solution(nb.cells[found[-1]]):
                for index in found[:-1]:
                    del nb.cells[index].metadata["nbgrader"]
                    copies.append(f"cell {index + 1}, a copy of {grade_id}: graded as an ordinary cell")
                continue
            lab_own = [index for index in found if nb.cells[index].get("id") == release_ids.get(grade_id)]
            kept = lab_own[0] if lab_own else found[-1]
            for index in found:
                if index != kept:
                    dropped.add(index)
                    copies.append(f"cell {index + 1}, a copy of {grade_id}, a cell of the lab's: left out")
        nb.cells = [cell for index, cell in enumerate(nb.cells) if index not in dropped]
        if copies:
            copies.sort(key=lambda line: int(line.split(",")[0].removeprefix("cell ")))
            self.log.warning("ptgrader: %s/%s: %s", resources["nbgrader"]["student"],
                             resources["nbgrader"]["assignment"], "; ".join(copies))
            resources.setdefault("ptgrader", {}).setdefault("restored_flags", []).extend(copies)
        return nb, resources


def release_cells(config: Any, resources: dict[str, Any]) -> list[NotebookNode]:
    """The cells of the release notebook this submission came from ([] when there is none to read)."""
    info = resources["nbgrader"]
    coursedir = CourseDirectory(config=config)
    path = Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"])) / (
        info["notebook"] + ".ipynb")
    return nbformat.read(path, as_version=4).cells if path.is_file() else []


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


#: The flags that make nbgrader treat a cell as part of the lab.
_FLAGS = ("grade", "solution", "locked", "task")


def lab_flags(notebook: Notebook) -> dict[str, dict[str, Any]]:
    """grade_id -> the nbgrader flags the lab's cell has, as the gradebook recorded them from the source."""
    grades = {cell.name: float(cell.max_score) for cell in notebook.grade_cells}
    solutions = {cell.name for cell in notebook.solution_cells}
    tasks = {cell.name for cell in notebook.task_cells}
    flags = {}
    for cell in notebook.source_cells:
        flags[cell.name] = {
            "grade": cell.name in grades, "solution": cell.name in solutions, "task": cell.name in tasks,
            "locked": bool(cell.locked), "cell_type": cell.cell_type, "schema_version": SCHEMA_VERSION,
        }
        if cell.name in grades:
            flags[cell.name]["points"] = grades[cell.name]
    return flags


class RestoreCellFlags(NbGraderPreprocessor):
    """Give every cell of the lab its flags from the gradebook; one with another grade_id loses its nbgrader metadata."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            flags = lab_flags(gradebook.find_notebook(info["notebook"], info["assignment"]))
        restored = []
        for index, cell in enumerate(nb.cells):
            meta = cell.get("metadata", {}).get("nbgrader")
            if meta is None:
                continue
            grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
            wanted = flags.get(grade_id) if isinstance(grade_id, str) else None
            if wanted is None:  # not a cell of the lab (its id is not logged: a student chose it)
                del cell.metadata["nbgrader"]
                if not isinstance(meta, dict) or any(meta.get(flag) for flag in _FLAGS):
                    restored.append(f"cell {index + 1}: flags of no cell of the lab, removed")
                continue
            edited = sorted(key for key, value in wanted.items() if not _same(meta.get(key), value))
            meta.update(wanted)
            if edited:
                restored.append(f"{grade_id}: {', '.join(edited)}")
        if restored:
            self.log.warning("ptgrader: %s/%s: cell flags put back from the gradebook: %s", info["student"],
                             info["assignment"], "; ".join(restored))
            resources.setdefault("ptgrader", {})["restored_flags"] = restored
        return nb, resources


def _same(found: Any, wanted: Any) -> bool:
    """Whether a flag as the notebook has it is the gradebook's (a missing boolean flag is False)."""
    if isinstance(wanted, bool):
        return bool(found) is wanted and (found is None or isinstance(found, bool))
    return type(found) in (int, float) and found == wanted if isinstance(wanted, float) else found == wanted
