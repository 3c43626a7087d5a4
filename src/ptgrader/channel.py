"""Outputs sent out of the kernel and compared by the grader: the score decided where student code cannot reach.

- **in the kernel**, a hidden test only computes the student's outputs and sends each one out with
  ``ptchecks.emit`` (a tensor as safetensors bytes, a plain value as JSON); the outputs of one run of
  a cell leave in a few batches (at most ten a second, the last as the run ends), each a list in one display
  message of its own type, :data:`MIME` (:func:`payloads`). The kernel's half lives with the checks, since it must be importable there;
  this module is the grader's half and imports nothing of them;
- **in the grader**, :class:`~ptgrader.execute.GuardedExecute` takes those messages out of the
  output stream (they never reach the graded notebook), decodes them without running anything
  (safetensors and typed JSON, no pickle), runs the lab's *source* notebook once in the same jail to
  collect the reference outputs, and compares each student output with the reference of the same
  name (:func:`differences`). A test cell with reference outputs earns its points only if every
  one of them came back and matches: a kernel that forges the in-kernel verdict (the completion
  token, the canaries) still scores nothing unless it computed the right values.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

#: The display type of an output sent to the grader.
MIME = "application/vnd.ptgrader.output+json"
#: The output every graded test cell sends first, from ``ptchecks.begin`` (``ptchecks.LEFT_HOOKS``; a test holds them
#: equal): how many hooks of the student's on every nn.Module or optimizer are registered as the cell starts, and how
#: many process-wide hooks or modes are left open (a saved-tensors hook, round 108). The
#: reference run starts its cells without ``begin``, so the grader expects 0 itself (round 103: a Python loop in a
#: global forward hook answered for a part whose own code only called a module).
LEFT_HOOKS = "hooks on every module or optimizer, or hooks and modes left open, before this cell"
#: The most outputs, and bytes of outputs, the grader keeps from one submission (more are dropped).
MAX_OUTPUTS = 4096
MAX_BYTES = 64 << 20
#: The largest safetensors header a tensor output may have. One tensor's (its dtype, its shape, its
#: offsets) takes a few hundred bytes; a header declaring 400,000 empty tensors (23 MB) cost the grader
#: 6 s and 775 MB to load before it could be refused as more than one tensor (round 39), so a longer
#: header is refused unread.
MAX_TENSOR_HEADER = 16 << 10


# ------------------------------------------------------------------------------------- in the grader


@dataclass(frozen=True)
class Output:
    """One output as it arrived. The tolerances count only in the reference's: a student's are ignored."""

    value: Any
    rtol: float | None = None
    atol: float | None = None
    device: str | None = None  # the type of device a tensor was on in the kernel ("cpu", "cuda", ...)
    #: What a check saw (``ptchecks._observe``), not an output of the student's code: only the reference's counts.
    observation: bool = False


def payloads(data: object) -> list[object]:
    """The outputs one display message of type :data:`MIME` carries: ``ptchecks`` sends a list (the
    outputs of one run of a cell); anything else a kernel sends is one output, which :func:`decode` judges."""
    return data if isinstance(data, list) else [data]


def decode(payload: object) -> tuple[str, Output]:
    """(name, output) of one emitted output; raises ValueError for anything malformed. Runs no code."""
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise ValueError("an output without a name")
    name = payload["name"]
    tolerance = (payload.get("rtol"), payload.get("atol"))
    observation = payload.get("observation") is True
    if tolerance != (None, None) and not all(type(t) is float and 0 <= t < 1 for t in tolerance):
        raise ValueError(f"output {name!r}: rtol and atol must both be floats in [0, 1)")
    if "safetensors" in payload:
        from safetensors.torch import load

        data = base64.b64decode(payload["safetensors"], validate=True)
        if len(data) < 8 or int.from_bytes(data[:8], "little") > MAX_TENSOR_HEADER:
            raise ValueError(f"output {name!r}: a safetensors header over {MAX_TENSOR_HEADER} bytes")
        tensors = load(data)
        if set(tensors) != {"value"}:
            raise ValueError(f"output {name!r}: expected one tensor")
        device = payload.get("device")
        if device is not None and not (isinstance(device, str) and device.isidentifier()):
            raise ValueError(f"output {name!r}: a malformed device")
        return name, Output(tensors["value"], *tolerance, device=device, observation=observation)
    if "typed" in payload:
        return name, Output(untyped(payload["typed"]), *tolerance, observation=observation)
    raise ValueError(f"output {name!r}: neither a tensor nor a typed value")


#: How deep a sent value may nest (a deeper one is refused before anything recurses far).
MAX_DEPTH = 32
_CONTAINERS = {"list": list, "tuple": tuple}


class Pairs(tuple):
    """A sent dict, as its ``(key, value)`` pairs in order: never hashed.

    Why: the kernel chooses the keys, and every int that is a multiple of ``2**61 - 1`` hashes alike,
    so building a dict of 40,000 of them took the grader 27 s, each copy of it again (round 27: minutes
    of the grader's CPU from one submission). Pairs are compared in order, keys exactly, as a list is.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{key!r}: {item!r}" for key, item in self) + "}"


def _can_be_a_key(key: object) -> bool:
    """Whether a decoded key is of a type a dict's key can be (a list cannot), judged without hashing it."""
    if isinstance(key, tuple) and not isinstance(key, Pairs):
        return all(_can_be_a_key(item) for item in key)
    return key is None or type(key) in (bool, int, float, str)
#: The floats JSON cannot carry, as ``ptchecks`` tags them.
_NON_FINITE = ("nan", "inf", "-inf")


def untyped(value: Any, depth: int = 0) -> Any:
    """A value ``ptchecks.emit`` tagged (``{"list"|"tuple"|"dict": ...}``) back in its own types; ValueError if malformed."""
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {MAX_DEPTH}")
    if value is None or type(value) in (bool, int, float, str):
        return value
    if not (isinstance(value, dict) and len(value) == 1):
        raise ValueError(f"an untagged {type(value).__name__} in a typed value")
    ((tag, items),) = value.items()
    if not isinstance(items, list):
        raise ValueError(f"a {tag!r} whose items are not a list")
    if tag == "float" and len(items) == 1 and items[0] in _NON_FINITE:
        return float(items[0])
    if tag in _CONTAINERS:
        return _CONTAINERS[tag](untyped(item, depth + 1) for item in items)
    if tag == "dict" and all(isinstance(pair, list) and len(pair) == 2 for pair in items):
        pairs = Pairs((untyped(key, depth + 1), untyped(item, depth + 1)) for key, item in items)
        if not all(_can_be_a_key(key) for key, _ in pairs):
            raise ValueError("a dict key that cannot be a key")
        return pairs
    raise ValueError(f"an unknown tag {tag!r} in a typed value")


def size(payload: object) -> int:
    return len(json.dumps(payload, default=str))


#: How :func:`differences` ends the line of an output the kernel did not send (or sent twice).
NOT_SENT = ": not sent"


def differences(actual: dict[str, Output | None], reference: dict[str, Output]) -> list[str]:
    """Why the student's outputs of one test cell are not the reference's ([] when they all match)."""
    import torch

    found = []
    for name, expected in reference.items():
        sent = actual.get(name)
        if sent is None:
            found.append(f"{name}{NOT_SENT}")
            continue
        value = sent.value
        if isinstance(expected.value, torch.Tensor):
            if not isinstance(value, torch.Tensor):
                found.append(f"{name}: sent a {type(value).__name__}, expected a tensor")
                continue
            if sent.device != expected.device:
                found.append(f"{name}: on {sent.device}, expected on {expected.device}")
                continue
            if expected.rtol == expected.atol == 0.0:  # no tolerance: the same bits
                if not same_bits(value, expected.value):
                    found.append(f"{name}: not the same bits (a value, a zero's sign or a nan's payload differs)")
                continue
            if identical(value, expected.value):
                continue
            try:  # dtype and shape included; NaN matches NaN in the same place; the reference's tolerance
                torch.testing.assert_close(value, expected.value, **tensor_tolerance(expected), equal_nan=True)
            except AssertionError as problem:
                found.append(f"{name}: {str(problem).splitlines()[0]}")
        elif not same_value(value, expected.value, expected.rtol, expected.atol):
            found.append(f"{name}: {value!r}, expected {expected.value!r}"[:500])
    return found


def identical(value: Any, expected: Any) -> bool:
    """Two strided tensors of one dtype and shape with equal values: a match under any tolerance.

    Why: most outputs of a right answer equal the reference's exactly, and ``torch.equal`` decides
    that in microseconds where ``torch.testing.assert_close`` takes a third of a millisecond (a
    thousand outputs a submission, in lab 06). Anything else, NaN included (NaN is not equal to
    itself), goes to ``assert_close``, which also words the difference.
    """
    import torch

    return (value.dtype == expected.dtype and value.shape == expected.shape
            and value.layout == expected.layout == torch.strided and torch.equal(value, expected))


def same_bits(value: Any, expected: Any) -> bool:
    """Two tensors of one dtype and shape, equal bit for bit: what a reference that sends ``rtol=0, atol=0`` asks,
    for values a part only moves (round 29: ``x + 0.0`` turned every ``-0.0`` into ``0.0`` in a part whose text
    says values are moved, never computed with, and ``assert_close`` holds the two zeros equal)."""
    import torch

    if value.dtype != expected.dtype or value.shape != expected.shape:
        return False
    if value.is_complex():
        value, expected = torch.view_as_real(value.resolve_conj()), torch.view_as_real(expected.resolve_conj())
    if value.is_floating_point():
        kind = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[value.element_size()]
        value, expected = value.contiguous().view(kind), expected.contiguous().view(kind)
    return bool(torch.equal(value, expected))


#: How close two Python floats must be by default: a float is a float64, and two valid float64 formulas agree
#: to a few units in the last place, while a value computed in float32 and turned into a float does not.
FLOAT_RTOL, FLOAT_ATOL = 1e-9, 1e-12


def tensor_tolerance(expected: Output) -> dict[str, float | None]:
    """The tolerance a tensor is compared with: the reference's when it sent one, else its dtype's.

    ``torch.testing.assert_close``'s own default for ``float64`` (``rtol=atol=1e-7``) lets a result
    computed in ``float32`` and cast back pass (its rounding is at most about ``6e-8``), so a
    ``float64`` (or ``complex128``) tensor is held to :data:`FLOAT_RTOL`, as a Python float is.
    """
    import torch

    if expected.rtol is None and expected.value.dtype in (torch.float64, torch.complex128):
        return {"rtol": FLOAT_RTOL, "atol": FLOAT_ATOL}
    return {"rtol": expected.rtol, "atol": expected.atol}


def same_value(value: Any, expected: Any, rtol: float | None = None, atol: float | None = None) -> bool:
    """Equal with exact types (a tuple is not a list, an int not a float nor a bool) and dict keys in order;
    floats compared to float64's precision (:data:`FLOAT_RTOL`), or to the reference's tolerance when it sent one
    (a float computed in float32)."""
    if type(value) is not type(expected):
        return False
    if isinstance(expected, float):
        if not math.isfinite(expected):
            return math.isnan(value) if math.isnan(expected) else value == expected
        return math.isclose(value, expected, rel_tol=FLOAT_RTOL if rtol is None else rtol,
                            abs_tol=FLOAT_ATOL if atol is None else atol)
    if isinstance(expected, Pairs):  # keys exactly, as values: True, 1 and 1.0 are one key to Python, not to us
        return len(value) == len(expected) and all(
            same_value(key, expected_key, 0.0, 0.0) and same_value(item, expected_item, rtol, atol)
            for (key, item), (expected_key, expected_item) in zip(value, expected))
    if isinstance(expected, (list, tuple)):
        return len(value) == len(expected) and all(same_value(v, e, rtol, atol) for v, e in zip(value, expected))
    return value == expected
