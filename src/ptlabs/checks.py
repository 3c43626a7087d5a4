"""Exercise checks: one verdict line when the answer is right, a precise error when it is not.

A learner's wrong answer should be met with *what* is wrong (shape, dtype, device, which
element and by how much) and a hint at *why*, not a bare ``AssertionError``. Each check
raises :class:`ExerciseError` (an ``AssertionError``, so nbgrader and pytest count it as a
failed test) and prints exactly one line on success, which nbval then validates.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

__all__ = ["ExerciseError", "check_close", "check_tensor", "check_equal", "check_function", "graded_check", "verdict"]


# Captured when ptlabs is imported (a lab's locked setup cell, before any student code runs), so a
# solution cell that replaces torch.testing.assert_close cannot turn the comparison into a no-op.
_assert_close = torch.testing.assert_close


class Ledger:
    """What the checks did since the grader last reset it: successes counted, failures recorded.

    The autograder compares the count with the reference solution's and refuses a test cell with a
    recorded failure, so a failure that a student's code catches and hides still costs the points.
    In a graded test cell (``keep_going``, set by the grader's ``begin``) a failed check does not
    stop the cell: see :func:`graded_check`.
    """

    def __init__(self) -> None:
        self.depth = 0  # > 0 while a check (or the grader's canaries) runs: checks inside raise as usual
        self.reset("")

    def reset(self, test_id: str, *, keep_going: bool = False) -> None:
        """Start counting for one test cell."""
        self.test_id = test_id
        self.keep_going = keep_going
        self.passes = 0
        self.failures: list[str] = []

    @contextmanager
    def inside_check(self) -> Iterator[None]:
        """A check runs: the checks it calls raise, and their failure is its own."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


LEDGER = Ledger()
#: Called with (check, name, message) when a check fails in a graded cell and the cell goes on.
FailureHook = Callable[[str, str, str], None]
Check = TypeVar("Check", bound=Callable[..., Any])


def graded_check(*, returns_input: bool = False, on_failure: FailureHook | None = None) -> Callable[[Check], Check]:
    """A check that, in a graded test cell, records its failure and lets the cell go on.

    In a learner's run a failed check raises :class:`ExerciseError`: the message is the lesson.
    In a graded cell, a raised check would stop the cell, and with it every output its later lines
    send to the grader: a rule seen inside the kernel (an input left unchanged) would then decide
    the whole part. So there a failure prints one ``❌`` line, is recorded in the ledger (the cell
    then earns only the share of its points that the grader decides outside the kernel), calls
    ``on_failure``, and the check returns what it would have (its input for ``returns_input``,
    else None). A check called by another check, or by the canaries, raises as usual.
    """

    def wrap(check: Check) -> Check:
        @functools.wraps(check)
        def run(*args: Any, **kwargs: Any) -> Any:
            if LEDGER.depth:
                return check(*args, **kwargs)
            with LEDGER.inside_check():
                try:
                    return check(*args, **kwargs)
                except ExerciseError as failure:
                    if not LEDGER.keep_going:
                        raise
                    message = str(failure)
                    print(textwrap.fill(f"❌ {message}", width=80, subsequent_indent="   "))
                    if on_failure is not None:
                        on_failure(check.__name__, str(kwargs.get("name", "")), message)
                    return (args[0] if args else kwargs.get("actual")) if returns_input else None

        return run  # type: ignore[return-value]

    return wrap


class ExerciseError(AssertionError):
    """A learner's answer is wrong; the message says what and why (recorded in the ledger)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        LEDGER.failures.append(str(args[0]) if args else "")


def verdict(name: str, detail: str = "") -> None:
    """Print the single success line every check ends with (and count it in the ledger)."""
    LEDGER.passes += 1
    line = f"✅ {name}: correct" + (f" ({detail})" if detail else "")
    print(textwrap.fill(line, width=80, subsequent_indent="   "))  # fits the website's column


@graded_check()
def check_function(namespace: Mapping[str, Any], name: str) -> Callable[..., Any]:
    """Return the callable ``name`` from ``namespace`` (usually ``globals()``), or explain its absence."""
    if name not in namespace:
        raise ExerciseError(f"{name}: no function named {name!r} is defined; run the cell that defines it first")
    candidate = namespace[name]
    if not callable(candidate):
        raise ExerciseError(f"{name}: {name!r} is a {type(candidate).__name__}, not a function")
    return candidate


@graded_check(returns_input=True)
def check_tensor(
    actual: object,
    *,
    name: str,
    shape: tuple[int, ...] | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    announce: bool = True,
) -> torch.Tensor:
    """Check that ``actual`` is a tensor with the given shape, dtype and device.

    Checks run in that order because a wrong shape usually explains everything after it.
    ``announce=False`` suppresses the verdict line when another check follows.
    """
    if not isinstance(actual, torch.Tensor):
        raise ExerciseError(f"{name}: expected a torch.Tensor, got {type(actual).__name__}")
    if shape is not None and tuple(actual.shape) != tuple(shape):
        hint = ""
        if actual.numel() == torch.Size(shape).numel():
            hint = "; same number of elements, so a reshape, view or transpose is probably in the wrong order"
        raise ExerciseError(f"{name}: shape is {tuple(actual.shape)}, expected {tuple(shape)}{hint}")
    if dtype is not None and actual.dtype != dtype:
        raise ExerciseError(
            f"{name}: dtype is {actual.dtype}, expected {dtype}; "
            "integer inputs make int64 tensors and float64 doubles memory, so convert explicitly"
        )
    if device is not None and not _same_device(actual.device, torch.device(device)):
        raise ExerciseError(
            f"{name}: tensor is on {actual.device}, expected {torch.device(device)}; "
            "results must stay on the device of the inputs (create tensors with device=...)"
        )
    if announce:
        # The device is not named: a verdict must read the same on the CPU and the GPU runner.
        where = ", on the expected device" if device is not None else ""
        verdict(name, f"shape {tuple(actual.shape)}, {actual.dtype}{where}")
    return actual


@graded_check()
def check_close(
    actual: object,
    expected: torch.Tensor,
    *,
    name: str,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Check shape, dtype and device against ``expected``, then the values within tolerance.

    Tolerances default to ``torch.testing.assert_close``'s for the dtype. On failure the
    message names how many elements are off and the worst one: its index, both values and
    the difference. A tensor subclass is refused: it can override the very methods the
    comparison calls (``__eq__``, ``__torch_function__``), so its values prove nothing.
    """
    refuse_tensor_subclass(actual, name)
    tensor = check_tensor(
        actual, name=name, shape=tuple(expected.shape), dtype=expected.dtype, device=expected.device, announce=False
    )
    try:
        _assert_close(tensor, expected, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError:
        raise ExerciseError(f"{name}: {_describe_mismatch(tensor, expected, rtol, atol)}") from None
    verdict(name, f"shape {tuple(tensor.shape)}, {tensor.dtype}, values match")


#: The tensor types an answer may have: a subclass could override the methods a comparison calls.
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)


def refuse_tensor_subclass(actual: object, name: str) -> None:
    """Raise when ``actual`` is a tensor of a subclass (``nn.Parameter`` and ``nn.Buffer`` are fine)."""
    if isinstance(actual, torch.Tensor) and type(actual) not in PLAIN_TENSOR_TYPES:
        raise ExerciseError(
            f"{name}: expected a torch.Tensor, got the subclass {type(actual).__name__}; "
            "return a plain tensor (a subclass can change how it compares)"
        )


@graded_check()
def check_equal(actual: object, expected: object, *, name: str) -> None:
    """Check a plain Python value (a stride tuple, a label, a count) for equality."""
    if isinstance(expected, tuple) and isinstance(actual, (list, torch.Size)):
        actual = tuple(actual)
    if type(actual) is not type(expected) and not (isinstance(actual, int) and isinstance(expected, int)):
        raise ExerciseError(f"{name}: expected a {type(expected).__name__}, got {type(actual).__name__} ({actual!r})")
    if actual != expected:
        raise ExerciseError(f"{name}: got {actual!r}, expected {expected!r}")
    verdict(name, repr(expected))


def _same_device(a: torch.device, b: torch.device) -> bool:
    if a.type != b.type:
        return False
    return a.index is None or b.index is None or a.index == b.index


def _describe_mismatch(actual: torch.Tensor, expected: torch.Tensor, rtol: float | None, atol: float | None) -> str:
    """Say how many elements are beyond tolerance and which one is worst."""
    if rtol is None or atol is None:
        rtol, atol = _default_tolerances(expected.dtype)
    got = actual.detach().cpu().to(torch.float64)
    want = expected.detach().cpu().to(torch.float64)
    diff = (got - want).abs()
    nan_mismatch = got.isnan() != want.isnan()
    diff = torch.where(nan_mismatch, torch.full_like(diff, float("inf")), diff.nan_to_num(0.0))
    bad = diff > atol + rtol * want.abs().nan_to_num(0.0)
    worst = int(diff.argmax()) if diff.numel() else 0
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), diff.shape)) if diff.dim() else ()
    return (
        f"{int(bad.sum())} of {diff.numel()} values differ beyond tolerance (rtol={rtol:g}, atol={atol:g}); "
        f"worst at index {index}: got {got[index].item():.6g}, expected {want[index].item():.6g} "
        f"(difference {diff[index].item():.3g})"
    )


def _default_tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """The defaults ``torch.testing.assert_close`` documents for each dtype (exact for integers)."""
    table = {
        torch.float16: (1e-3, 1e-5),
        torch.bfloat16: (1.6e-2, 1e-5),
        torch.float32: (1.3e-6, 1e-5),
        torch.float64: (1e-7, 1e-7),
        torch.complex64: (1.3e-6, 1e-5),
        torch.complex128: (1e-7, 1e-7),
    }
    return table.get(dtype, (0.0, 0.0))
