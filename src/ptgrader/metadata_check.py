"""nbgrader's check of the cells' nbgrader metadata, with its schema compiled once per process.

nbgrader's ``CheckCellMetadata`` validates each cell's nbgrader metadata with ``jsonschema.validate``,
which first validates the schema itself against JSON Schema's meta-schema, again for every cell: 4 ms a
cell on the 2-core machine, about 0.15 s of each submission (two checks of 19 cells), a quarter of what
the grader's own process spends on a submission. :class:`CheckCellMetadata` runs nbgrader's own check,
against nbgrader's own schema file, with a validator built once for that schema: the same cells pass
and fail, with the same ``ValidationError``.
"""

from __future__ import annotations

import contextlib
import json
import types
from collections.abc import Iterator
from typing import Any

import jsonschema
import nbgrader.nbgraderformat.common as nbgrader_format
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import CheckCellMetadata as NbgraderCheckCellMetadata

#: A validator per schema (by its JSON text): nbgrader reads its schema file again for every validator object.
_VALIDATORS: dict[str, Any] = {}


def _validate(instance: Any, schema: dict[str, Any]) -> None:
    """``jsonschema.validate`` without checking the schema again: it is nbgrader's own file, checked once."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _VALIDATORS:
        kind = jsonschema.validators.validator_for(schema)
        kind.check_schema(schema)
        _VALIDATORS[key] = kind(schema)
    error = jsonschema.exceptions.best_match(_VALIDATORS[key].iter_errors(instance))
    if error is not None:
        raise error


@contextlib.contextmanager
def _compiled_schemas() -> Iterator[None]:
    """nbgrader's metadata validators use :func:`_validate` meanwhile (they name ``jsonschema`` as a module)."""
    module = nbgrader_format.jsonschema
    nbgrader_format.jsonschema = types.SimpleNamespace(validate=_validate)
    try:
        yield
    finally:
        nbgrader_format.jsonschema = module


class CheckCellMetadata(NbgraderCheckCellMetadata):
    """nbgrader's ``CheckCellMetadata``, each schema compiled once (see the module docstring)."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        with _compiled_schemas():
            return super().preprocess(nb, resources)
