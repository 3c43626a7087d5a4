"""Outputs sent out of the kernel and compared by the grader: the score decided where student code cannot reach.

Today the labs' hidden tests compare inside the kernel, in the same process as the student's
code: whatever checks there is only as strong as the code policy (:mod:`ptgrader.policy`). This
channel is the other way, shown end to end in ``tests/test_autograde_guard.py`` on a notebook of
its own (not a lab):

- **in the kernel**, a test cell only computes the student's outputs and sends each one out with
  :func:`emit` (a tensor as safetensors bytes, a plain value as JSON) as a display message of
  its own type, :data:`MIME`;
- **in the grader**, :class:`~ptgrader.execute.GuardedExecute` takes those messages out of the
  output stream (they never reach the graded notebook), decodes them without running anything
  (safetensors and JSON, no pickle), runs the lab's *source* notebook once in the same jail to
  collect the reference outputs, and compares each student output with the reference of the same
  name (:func:`differences`). A test cell with reference outputs earns its points only if every
  one of them came back and matches: a kernel that forges the in-kernel verdict (the completion
  token, the canaries) still scores nothing unless it computed the right values.

:func:`emit` is the kernel's half: it imports only torch, safetensors and IPython, nothing of the
service, and belongs with the checks the hidden tests call (``ptlabs.grading``) once a lab uses it.
What a lab's test cell changes to grade this way: it keeps its inputs (seeded, or built from a
generator of its own so that the student's code cannot shift them), calls ``emit(name, output)``
for each output it would have checked, and drops the in-kernel reference implementation and the
expected values (the grader holds them).
"""

from __future__ import annotations

import base64
import json
from typing import Any

#: The display type of an output sent to the grader.
MIME = "application/vnd.ptgrader.output+json"
#: The most outputs, and bytes of outputs, the grader keeps from one submission (more are dropped).
MAX_OUTPUTS = 1024
MAX_BYTES = 64 << 20


# ------------------------------------------------------------------------------------- in the kernel


def emit(name: str, value: Any) -> None:
    """Send one output of the student's code to the grader, under ``name`` (one name per output of a cell).

    A tensor goes as safetensors bytes (moved to the CPU, detached, contiguous); anything else must be
    plain JSON (numbers, strings, lists, dicts). Outside grading it shows a one-line note.
    """
    import torch
    from IPython.display import display

    if isinstance(value, torch.Tensor):
        from safetensors.torch import save

        payload = {"name": name, "safetensors": base64.b64encode(
            save({"value": value.detach().to("cpu").contiguous()})).decode()}
    else:
        payload = {"name": name, "json": json.loads(json.dumps(value))}
    display({MIME: payload, "text/plain": f"[output {name!r} sent to the grader]"}, raw=True)


# ------------------------------------------------------------------------------------- in the grader


def decode(payload: object) -> tuple[str, Any]:
    """(name, value) of one emitted output; raises ValueError for anything malformed. Runs no code."""
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise ValueError("an output without a name")
    if "safetensors" in payload:
        from safetensors.torch import load

        tensors = load(base64.b64decode(payload["safetensors"], validate=True))
        if set(tensors) != {"value"}:
            raise ValueError(f"output {payload['name']!r}: expected one tensor")
        return payload["name"], tensors["value"]
    if "json" in payload:
        return payload["name"], payload["json"]
    raise ValueError(f"output {payload['name']!r}: neither a tensor nor JSON")


def size(payload: object) -> int:
    return len(json.dumps(payload, default=str))


def differences(actual: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """Why the student's outputs of one test cell are not the reference's ([] when they all match)."""
    import torch

    found = []
    for name, expected in reference.items():
        if name not in actual:
            found.append(f"{name}: not sent")
            continue
        value = actual[name]
        if isinstance(expected, torch.Tensor):
            if not isinstance(value, torch.Tensor):
                found.append(f"{name}: sent a {type(value).__name__}, expected a tensor")
                continue
            try:
                torch.testing.assert_close(value, expected)
            except AssertionError as problem:
                found.append(f"{name}: {str(problem).splitlines()[0]}")
        elif value != expected or type(value) is not type(expected):
            found.append(f"{name}: {value!r}, expected {expected!r}")
    return found
