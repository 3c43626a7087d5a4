"""The checks the labs' test cells call inside a kernel, and the in-kernel half of the grader.

The book has three rooms: the learners' helpers (``ptlabs``), these checks (``ptchecks``, installed
with ``ptlabs`` because the labs' visible tests call them too, and imported by neither), and the
grading service (``ptgrader``, in the repository only), which names this module but never imports it.

nbgrader runs a student's code in the same Python process as the tests that grade it, so any
checker a solution cell can reach, it can replace. This module is imported by every lab's locked
setup cell, before any student code runs, and the hidden tests call it by full name
(``ptchecks.check_close``), never through a name defined in the notebook. At import it
records what the checks rely on (torch's and Python's built-in functions, the checkers
themselves, IPython's code transformers); :func:`canaries`, the last line of every hidden block,
proves that the checkers still reject known-wrong values, that the call counter still sees calls,
and that nothing recorded has been replaced since.

:func:`begin` and :func:`complete` are not written in notebooks: the autograder
(``ptgrader``) wraps each graded test cell in them, with a one-time token, and gives a cell all its
points only when the token is printed, i.e. when the cell's last line ran after as many successful
checks as the reference solution made and no failure. From :func:`begin` on, a failed check is
recorded and the cell goes on (``ptlabs.checks.graded_check``): what only the kernel sees costs a
part whose outputs are right a quarter of its points (``ptgrader.score``), not all of them.

:func:`emit` is how a hidden test leaves the verdict to the grader: it sends the student's output
out of the kernel, and the grader compares it with what the reference solution sent on the same
inputs, outside the kernel (``ptgrader.channel``). A hidden test that emits keeps no reference
values in the kernel, so code that rewrote anything in the kernel still has to compute them.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import json
import itertools
import math
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ptlabs import checks as _checks
from ptlabs.checks import LEDGER, ExerciseError, graded_check, verdict

__all__ = [
    "Domain",
    "TorchCallCounter",
    "begin",
    "call",
    "canaries",
    "check_close",
    "check_equal",
    "check_raises",
    "check_same_storage",
    "check_tensor",
    "check_true",
    "complete",
    "count_hooks",
    "emit",
    "emit_elsewhere",
    "emit_tree",
    "hold_baseline",
]

#: The line the autograder looks for at the end of a graded test cell.
COMPLETION_FORMAT = "ptlabs-grading: {test_id} complete {token}"


# ------------------------------------------------------------------------------------------- checks


def _quote_fx_names() -> None:
    """Make torch.fx quote the attribute names it writes into the code it generates.

    ``ExportedProgram.module()`` (lab 06) rebuilds a module through torch.fx, which writes each buffer,
    parameter and submodule name into Python source that it then runs; a name that is not an identifier
    goes in as ``getattr(self, "<name>")``, unescaped (torch 2.13), so a buffer registered under the name
    ``q") if exec(...) else (...`` ran a student's string as code past the grader's code policy. Written
    with ``repr``, every name stays a string.
    """
    from torch.fx import graph as fx_graph

    def format_target(base: str, target: str) -> str:
        path = base
        for name in target.split("."):
            path = f"{path}.{name}" if name.isidentifier() else f"getattr({path}, {name!r})"
        return path

    fx_graph._format_target = format_target


_quote_fx_names()


def _failed(check: str, name: str, message: str) -> None:
    """A check failed in a graded cell and the cell goes on: the grader sees that as what the check saw."""
    _observe(check, name, f"failed: {message}"[:300])


#: How every check below behaves in a graded test cell: it records a failure and the cell goes on.
_graded = graded_check(on_failure=_failed)

#: The tensor types a graded answer may have: a subclass could override the methods a comparison calls.
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)


def _plain_tensor(actual: object, name: str) -> None:
    if isinstance(actual, torch.Tensor) and type(actual) not in _PLAIN_TENSORS:
        raise ExerciseError(f"{name}: expected a torch.Tensor, got the subclass {type(actual).__name__}")


@graded_check(returns_input=True, on_failure=_failed)
def check_tensor(actual: object, *, name: str, **expected: Any) -> torch.Tensor:
    """:func:`ptlabs.check_tensor` (shape, dtype, device) that also refuses tensor subclasses."""
    _plain_tensor(actual, name)
    checked = _checks.check_tensor(actual, name=name, **expected)
    _observe("check_tensor", name, True)
    return checked


@_graded
def check_close(
    actual: object, expected: torch.Tensor, *, name: str, rtol: float | None = None, atol: float | None = None
) -> None:
    """:func:`ptlabs.check_close` (metadata, then values) that also refuses tensor subclasses."""
    _plain_tensor(actual, name)
    _checks.check_close(actual, expected, name=name, rtol=rtol, atol=atol)
    _observe("check_close", name, True)



def _describe_type_mismatch(actual: object, expected: object, path: str) -> str | None:
    """Where ``actual`` differs from ``expected`` in exact type, key order or value (None if equal)."""
    if type(actual) is not type(expected):
        return f"{path or 'value'} is a {type(actual).__name__} ({actual!r}), expected a {type(expected).__name__}"
    if isinstance(expected, dict):
        if list(actual) != list(expected):
            return f"{path or 'dict'} has keys {list(actual)!r}, expected {list(expected)!r} (in this order)"
        for key in expected:
            problem = _describe_type_mismatch(actual[key], expected[key], f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return f"{path or 'value'} has {len(actual)} items, expected {len(expected)}: {actual!r} vs {expected!r}"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            problem = _describe_type_mismatch(a, e, f"{path}[{index}]")
            if problem:
                return problem
        return None
    if actual != expected:
        return f"{path or 'value'} is {actual!r}, expected {expected!r}"
    return None


@_graded
def check_equal(actual: object, expected: object, *, name: str) -> None:
    """Strict equality: exact types all the way down (a list is not a tuple, a bool not an int), key order."""
    problem = _describe_type_mismatch(actual, expected, "")
    if problem:
        raise ExerciseError(f"{name}: {problem}")
    _observe("check_equal", name, True)
    verdict(name, repr(expected) if len(repr(expected)) <= 60 else f"{type(expected).__name__} matches")


@_graded
def check_true(condition: object, *, name: str, why: str) -> None:
    """Pass only when ``condition is True``; ``why`` says what is wrong otherwise."""
    if condition is not True:
        raise ExerciseError(f"{name}: {why}")
    _observe("check_true", name, True)
    verdict(name)


@_graded
def check_raises(
    exception_type: type[BaseException], function: Callable[..., Any], *args: Any, name: str, **kwargs: Any
) -> BaseException:
    """Call ``function(*args, **kwargs)``; pass only if it raises ``exception_type``. Return the exception.

    What reaches the caller is also sent as an output (``"<name>: what reaches the caller"``), compared
    outside the kernel with the reference run's: an answer that swallows the exception loses its part
    there, whatever happened to this check in the kernel.
    """
    expected = exception_type.__name__
    outcome = _unused_name(f"{name}: what reaches the caller")
    try:
        function(*args, **kwargs)
    except exception_type as exc:
        _send_outcome(outcome, f"a {expected}")
        _observe("check_raises", name, contract.type_name(type(exc)))  # a class renamed KeyError is not KeyError
        verdict(name, f"raises {type(exc).__name__}")
        return exc
    except Exception as exc:  # noqa: BLE001  (any other exception is the wrong answer, reported as such)
        _send_outcome(outcome, f"{type(exc).__name__}, not a {expected}")
        raise ExerciseError(f"{name}: raised {type(exc).__name__} ({exc}), expected {expected}") from None
    _send_outcome(outcome, "no exception")
    raise ExerciseError(f"{name}: no exception; expected {expected} to propagate to the caller")


@_graded
def check_same_storage(view: object, base: torch.Tensor, *, name: str) -> None:
    """``view`` is a tensor over ``base``'s storage: no element was copied."""
    if not isinstance(view, torch.Tensor):
        raise ExerciseError(f"{name}: expected a torch.Tensor, got {type(view).__name__}")
    if view.untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
        raise ExerciseError(f"{name}: the result lives in a different storage than its input, so it is a copy")
    _observe("check_same_storage", name, True)
    verdict(name, "same storage as the input")


@_graded
def check_inputs_unchanged(function: Callable[..., Any], *args: Any, name: str, **kwargs: Any) -> Any:
    """Call ``function(*args, **kwargs)``; pass only if its arguments are as they were; return the result.

    As the contract harness sees them: a tensor's values, shape, strides, version, ``requires_grad`` and
    gradient; a module's parameters, buffers, flags and hooks; a list's or a dict's items.
    """
    before = contract._records(args, kwargs)
    result = function(*args, **kwargs)
    changed = contract._changed(before, contract._records(args, kwargs))
    if changed:
        raise ExerciseError(
            f"{name}: the call changed {', '.join(changed)}; leave the caller's tensors as they were (values, "
            "strides, version, requires_grad, .grad): no in-place operation on them, such as transpose_, -= or "
            "requires_grad_()"
        )
    _observe("check_inputs_unchanged", name, True)
    verdict(name, "the arguments are as they were")
    return result


class TorchCallCounter(TorchFunctionMode):
    """Records the name of every torch function and tensor method called inside a ``with`` block."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001  (torch's protocol)
        self.names.append(getattr(func, "__name__", repr(func)))
        return func(*args, **(kwargs or {}))

    def count(self, substring: str) -> int:
        """How many recorded calls have ``substring`` in their name (case-insensitive)."""
        needle = substring.lower()
        return sum(needle in name.lower() for name in self.names)


_HOOK_ATTRIBUTES = {
    "forward": "_forward_hooks",
    "forward_pre": "_forward_pre_hooks",
    "backward": "_backward_hooks",
    "backward_pre": "_backward_pre_hooks",
    "state_dict": "_state_dict_hooks",
}
#: Every registry of hooks a module keeps, as torch makes them (forward, pre-forward, backward, state-dict and load
#: hooks; not the sets that say which hooks take keyword arguments), and those of a tensor (its parameters', its
#: buffers'): "every" hook counts them all.
_MODULE_REGISTRIES = tuple(name for name, value in vars(torch.nn.Module()).items()
                           if name.endswith("_hooks") and isinstance(value, dict))
_TENSOR_REGISTRIES = ("_backward_hooks", "_post_accumulate_grad_hooks")


def count_hooks(module: torch.nn.Module, kind: str = "every") -> int:
    """How many hooks of ``kind`` are registered on ``module`` and all its sub-modules; ``"every"``: every kind, the
    hooks on their parameters and buffers included.

    Why every kind by default: "no hook stays behind" is about any hook (round 116: an extractor that cleared its
    record in a forward pre-hook, never removed, kept its marks while only forward hooks were counted).
    """
    if kind == "every":
        tensors = itertools.chain(module.parameters(), module.buffers())
        return (sum(len(getattr(sub, name)) for sub in module.modules() for name in _MODULE_REGISTRIES)
                + sum(len(getattr(tensor, name) or ()) for tensor in tensors for name in _TENSOR_REGISTRIES))
    if kind not in _HOOK_ATTRIBUTES:
        raise ValueError(f"kind must be one of {sorted(['every', *_HOOK_ATTRIBUTES])}, got {kind!r}")
    return sum(len(getattr(sub, _HOOK_ATTRIBUTES[kind])) for sub in module.modules())


# ------------------------------------------------------------------------------------ tamper evidence


def _namespaces() -> Iterator[tuple[str, dict[str, Any]]]:
    """The namespaces whose contents the checks trust: torch's, Python's and ptlabs's own."""
    import ptlabs  # the package object, as imported by the setup cell

    yield "builtins", vars(builtins)
    yield "torch", vars(torch)
    yield "torch.Tensor", vars(torch.Tensor)
    yield "torch._C.TensorBase", vars(torch._C.TensorBase)
    yield "torch.nn.functional", vars(torch.nn.functional)
    yield "torch.nn.Module", vars(torch.nn.Module)
    yield "torch.testing", vars(torch.testing)
    # assert_close compares through these: replacing one pair's method would make every comparison lenient.
    from torch.testing import _comparison

    yield "torch.testing._comparison", vars(_comparison)
    for pair in _COMPARISON_PAIRS:
        yield f"torch.testing._comparison.{pair}", vars(getattr(_comparison, pair))
    yield "torch.overrides", vars(torch.overrides)
    yield "ptlabs", vars(ptlabs)
    yield "ptlabs.checks", vars(_checks)
    yield "ptchecks", vars(sys.modules[__name__])
    yield "ptchecks.domain", vars(domain)
    yield "ptchecks.domain.Domain", vars(Domain)
    yield "ptchecks.contract", vars(contract)


#: The classes through which torch.testing.assert_close compares values.
_COMPARISON_PAIRS = ("Pair", "TensorLikePair", "NumberPair", "BooleanPair", "NonePair", "ObjectPair")
#: Namespaces of classes: unlike a module's, they gain no entries on their own.
_CLASSES = {"torch.Tensor", "torch._C.TensorBase", "torch.nn.Module", "ptchecks.domain.Domain",
            *(f"torch.testing._comparison.{pair}" for pair in _COMPARISON_PAIRS)}

# Names that the runtime itself rebinds between cells: IPython's builtin trap swaps these in and out,
# and ipykernel installs an `input` of its own for each execution.
_VOLATILE = {"builtins": {"exit", "quit", "get_ipython", "input", "_", "__", "___"}}
#: Flags torch sets on its own classes: the first torch.compile call marks nn.Module as patched.
_TORCH_FLAGS = {"torch.nn.Module": {"___needs_generation_tag_patch"}}


def _same_function(recorded: object, now: object) -> bool:
    """``now`` is ``recorded``, or one of torch's own wrappers around it.

    Importing ``torch._dynamo`` (an optimizer step does) rebinds ``torch.manual_seed`` to a
    dynamo-disabling wrapper (torch/_compile.py, ``__wrapped__`` names the original); the first
    ``torch.compile`` call wraps ``nn.Module.__init__`` and ``__setstate__`` to tag new modules
    (torch/_dynamo/mutation_guard.py, the original in the wrapper's closure). A wrapper made
    anywhere else, or around anything but the recorded function, is a replacement.
    """
    if now is recorded:
        return True
    code = getattr(now, "__code__", None)
    if code is None:
        return False
    source = code.co_filename.replace("\\", "/")
    if source.endswith("torch/_compile.py"):
        return getattr(now, "__wrapped__", None) is recorded
    if source.endswith("torch/_dynamo/mutation_guard.py") and code.co_name in ("patched_init", "patched_setstate"):
        closure = dict(zip(code.co_freevars, getattr(now, "__closure__", None) or ()))
        original = closure.get("init") or closure.get("setstate")
        return original is not None and original.cell_contents is recorded
    return False


def _shell() -> Any:
    """The running IPython shell, or None outside IPython."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def _ipython_transformers() -> tuple[Any, ...]:
    """IPython's code transformers, which can rewrite every later cell (empty outside IPython)."""
    shell = _shell()
    if shell is None:
        return ()
    return (
        tuple(shell.ast_transformers),
        tuple(shell.input_transformers_cleanup),
        tuple(shell.input_transformers_post),
        shell.input_transformer_manager,
    )


#: The name under which every graded test cell sends :func:`left_hooks` (a deciding output: the reference has 0).
LEFT_HOOKS = "hooks on every module or optimizer, or hooks and modes left open, before this cell"


def left_hooks() -> int:
    """Hooks of the student's on every nn.Module or every optimizer, registered now (torch's own left out), and the
    process-wide hooks and modes entered and left open since the baseline (``contract.stacks_left_open``: a
    saved-tensors hook, a torch function or dispatch mode, a forward AD level, the profiler).

    Sent at the start of every graded test cell (:func:`begin`), where the reference solution has none: a hook left
    registered runs inside every later call, the answers' included, and a rule about how an answer is written cannot
    see it (round 103: a Python loop in a global forward hook answered for ``last_valid_token``, whose own code
    only called ``nn.Identity()``; round 108: ``backward`` in a saved-tensors pack hook, for ``r1_penalty``)."""
    return (_global_module_hooks() + _students_hooks("torch.optim.optimizer") + len(contract.stacks_left_open()))


def _students_hooks(module_name: str) -> int:
    """The hooks in the module's registries of hooks for every instance (its ``_global_*hooks`` dicts) that are not
    torch's own (:func:`_defined_in_torch`)."""
    module = sys.modules[module_name]
    names = [name for name in vars(module) if name.startswith("_global_") and name.endswith("hooks")]
    return sum(not _defined_in_torch(hook) for name in names for hook in getattr(module, name).values())


def _global_module_hooks() -> int:
    """Hooks registered for every nn.Module at once (``register_module_forward_hook`` and friends),
    torch's own left out.

    Why torch's own are left out: a torch build may leave hooks of its own behind, and an honest
    answer must not read as tampering. torch 2.11's ``torch.export`` left one buffer-registration
    hook per export (a function of ``torch._functorch``), seen on a GPU machine; 2.13 leaves none
    on a CPU. A student cannot make a function whose code lives in torch's files: the code policy
    refuses dunders and code built from strings.
    """
    return _students_hooks("torch.nn.modules.module")


def _defined_in_torch(hook: object, depth: int = 0) -> bool:
    """Whether ``hook`` is a plain function whose code is in one of the installed torch's files, and which holds
    nothing callable of anyone else's: ``torch.enable_grad()(f)`` is torch's ``decorate_context``, which calls ``f``
    (round 103), so what its closure and defaults hold is looked at too, a few wrappers deep, containers included.
    Anything callable there that is not such a function (a ``functools.partial``, an object with ``__call__``, a
    bound method, a class) makes the hook someone else's (round 107: ``torch.enable_grad()(partial(loop))``)."""
    if type(hook) is not types.FunctionType:  # a builtin, a bound method or a callable object: not exempt
        return False
    if not os.path.abspath(hook.__code__.co_filename).startswith(_TORCH_FOLDER):
        return False
    held = [*(hook.__defaults__ or ()), *(hook.__kwdefaults__ or {}).values()]
    for cell in hook.__closure__ or ():
        with contextlib.suppress(ValueError):  # an empty cell
            held.append(cell.cell_contents)
    return depth < 4 and all(_holds_only_torch(value, depth + 1) for value in held)


def _holds_only_torch(value: object, depth: int) -> bool:
    """Whether ``value`` is not callable and holds nothing callable (in a list, tuple, set or dict), or is a function
    of torch's own (:func:`_defined_in_torch`). A subclass of a container is someone else's: its own methods could
    hide what it holds."""
    if callable(value):
        return _defined_in_torch(value, depth)
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if type(value) not in (list, tuple, set, frozenset, dict):
            return False
        items = [*dict.keys(value), *dict.values(value)] if type(value) is dict else list(value)
        return depth < 4 and all(_holds_only_torch(item, depth + 1) for item in items)
    return True


_TORCH_FOLDER = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


class _Snapshot:
    """Identity of everything the checks trust, recorded before student code runs."""

    def __init__(self) -> None:
        self.namespaces = {label: dict(space) for label, space in _namespaces()}
        self.modules = {name: sys.modules.get(name) for name in ("builtins", "torch", "ptlabs", __name__)}
        self.transformers = _ipython_transformers()
        self.global_hooks = _global_module_hooks()
        self.hooks = (sys.gettrace(), sys.getprofile(), tuple(sys.meta_path))

    def differences(self) -> list[str]:
        """What was replaced, removed or installed since the snapshot."""
        found = []
        for label, space in _namespaces():
            recorded = self.namespaces[label]
            volatile = _VOLATILE.get(label, set())
            changed = [
                key for key, value in recorded.items() if key not in volatile and not _same_function(value, space.get(key))
            ]
            if label in _CLASSES:  # a new entry in a class shadows what it inherits (Tensor.__eq__)
                flags = _TORCH_FLAGS.get(label, set())
                changed += [key for key in space if key not in recorded and not (key in flags and space[key] is False)]
            if changed:
                found.append(f"{label}: {', '.join(sorted(changed)[:5])} replaced or removed")
        changed_modules = [name for name, module in self.modules.items() if sys.modules.get(name) is not module]
        if changed_modules:
            found.append(f"sys.modules entries replaced: {', '.join(changed_modules)}")
        if _ipython_transformers() != self.transformers:
            found.append("an IPython code transformer was installed or removed")
        if _global_module_hooks() != self.global_hooks:
            found.append("a global nn.Module hook was registered")
        if (sys.gettrace(), sys.getprofile(), tuple(sys.meta_path)) != self.hooks:
            found.append("a trace/profile function or an import hook was installed")
        if torch._C._len_torch_function_stack() != 0:
            found.append("a TorchFunctionMode is active")
        return found



class GraderTampered(ExerciseError):
    """The grader's own machinery no longer works as recorded: the cell earns nothing."""


def _canary_problems() -> list[str]:
    """Known-wrong values the checkers must reject, a known call the counter must see, the snapshot."""
    problems = _SNAPSHOT.differences()
    saved = (LEDGER.passes, list(LEDGER.failures))
    _IN_CANARIES[:] = [True]
    try:
        wrong_values: list[tuple[str, Callable[[], object]]] = [
            ("check_close", lambda: check_close(torch.zeros(3), torch.ones(3), name="canary")),
            ("check_close (dtype)", lambda: check_close(torch.zeros(2), torch.zeros(2, dtype=torch.int64), name="c")),
            ("check_equal", lambda: check_equal([1, 2], (1, 2), name="canary")),
            ("check_true", lambda: check_true(1, name="canary", why="1 is not True")),
            ("check_raises", lambda: check_raises(ValueError, int, "7", name="canary")),
        ]
        for label, attempt in wrong_values:
            try:
                with LEDGER.inside_check():  # raise, even in a graded cell that goes on after a failure
                    attempt()
            except ExerciseError:
                continue
            except Exception as exc:  # noqa: BLE001  (a checker that crashes has been replaced)
                problems.append(f"{label} crashed on a known-wrong value ({type(exc).__name__})")
                continue
            problems.append(f"{label} accepted a known-wrong value")
        try:
            with TorchCallCounter() as calls:
                torch.add(torch.zeros(1), 1)
            if calls.count("add") < 1:
                problems.append("the torch call counter did not see torch.add")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"the torch call counter does not work ({type(exc).__name__})")
    finally:
        LEDGER.passes, LEDGER.failures = saved
        _IN_CANARIES.clear()
    return problems


#: Non-empty while the canaries try the checks on known-wrong values: their attempts are no outputs of the cell.
_IN_CANARIES: list[bool] = []


def canaries() -> None:
    """The last line of every hidden block: prove the grader still works, or fail the cell."""
    problems = _canary_problems()
    if problems:
        raise GraderTampered("the grader was tampered with: " + "; ".join(problems))
    _observe("canaries", "grader canaries", True)
    verdict("grader canaries", "checkers reject wrong values; nothing patched")


def hold_baseline() -> None:
    """Called by the grader's hold, right after the lab's set-up cell and before any student code: the quiet settings
    and torch's tables of configuration settings as they are now are what every graded test cell starts from
    (``contract._quiet_baseline``, ``contract._tables_baseline``), and no hook or mode is open
    (``contract.stacks_baseline``)."""
    contract._quiet_baseline()
    contract._tables_baseline()
    contract.stacks_baseline()


def begin(test_id: str) -> None:
    """Start a graded test cell (inserted by the autograder as the cell's first line).

    From here a failed check records its failure and the cell goes on (:func:`ptlabs.checks.graded_check`),
    so that the outputs its later lines send reach the grader.
    """
    LEDGER.reset(test_id, keep_going=True)
    contract.put_back_quiet_settings()  # what an earlier part left changed is that part's
    contract._put_back_tables()
    contract.mark_cell_start()
    _SENT.pop(LEFT_HOOKS, None)  # once per run of a cell: begin() is its first line (the grader refuses a repeat)
    _send(LEFT_HOOKS, left_hooks())


def complete(test_id: str, token: str, expected_checks: int) -> None:
    """End a graded test cell (inserted as its last line): print the token only for a clean, full run.

    ``expected_checks`` is the number of checks the reference solution passes in this cell
    (negative when the grader does not know it).
    """
    failures, passes = list(LEDGER.failures), LEDGER.passes
    if LEDGER.test_id != test_id:
        raise GraderTampered(f"{test_id}: the grader's start-of-cell marker did not run")
    problems = _canary_problems()
    if problems:
        raise GraderTampered(f"{test_id}: the grader was tampered with: " + "; ".join(problems))
    if failures:
        raise ExerciseError(f"{test_id}: {len(failures)} check(s) failed in this cell (the first: {failures[0]})")
    if expected_checks >= 0 and passes != expected_checks:
        raise ExerciseError(f"{test_id}: {passes} check(s) passed, the reference solution passes {expected_checks}")
    print(COMPLETION_FORMAT.format(test_id=test_id, token=token))


# ------------------------------------------------------------------------ outputs sent to the grader

#: The display type of an output sent to the grader; ``ptgrader.channel.MIME`` (a test holds them equal).
OUTPUT_MIME = "application/vnd.ptgrader.output+json"
#: Set by nbgrader in the kernels it grades with (and by the grading service's jail).
_GRADING = ("NBGRADER_EXECUTION", "autograde")
#: name -> the execution request that sent it (a name twice in one run of a cell is a mistake).
_SENT: dict[str, str] = {}


def _execution_id() -> str:
    """The id of the kernel's current execute request ("" outside a kernel): one per run of a cell."""
    from IPython import get_ipython

    parent = getattr(get_ipython(), "parent_header", None) or {}
    return str(parent.get("header", {}).get("msg_id", ""))


def _send_outcome(name: str, outcome: str) -> None:
    """:func:`emit` what a check saw, but for the canaries' attempts on known-wrong values (no output of the cell)."""
    if not _IN_CANARIES:
        emit(name, outcome)


def _unused_name(name: str) -> str:
    """``name``, else ``name (2)``, ``name (3)``...: the first not sent yet in this run of the cell (a check
    repeated under one name, in a visible test and again in the hidden one, sends each outcome)."""
    execution = _execution_id()
    return next(candidate for candidate in itertools.chain([name], (f"{name} ({k})" for k in itertools.count(2)))
                if _SENT.get(candidate) != execution)


def _typed(value: Any) -> Any:
    """``value`` as JSON that keeps what JSON loses: containers are tagged ``{"list"|"tuple"|"dict": ...}``.

    JSON already tells None, bools, ints, floats and strings apart, but has no ``nan`` or ``inf``: those
    floats are tagged ``{"float": ["nan"]}``. A tuple and a list both become an
    array, and an object's keys are strings in no promised order, so a part whose rule is "return a
    list" or "in this order" could only be checked inside the kernel. A dict becomes its items as
    ``[key, value]`` pairs, in order. A subclass travels as its base (``torch.Size`` is a tuple).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {"float": [repr(float(value))]}  # JSON has no nan
    if isinstance(value, tuple):
        return {"tuple": [_typed(item) for item in value]}
    if isinstance(value, list):
        return {"list": [_typed(item) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[_typed(key), _typed(item)] for key, item in value.items()]}
    raise TypeError(f"{type(value).__name__} is not one of None, bool, int, float, str, list, tuple, dict")


#: (execution request, how many checks passed in it so far): names each observation in its run of a cell.
_OBSERVED = ["", 0]


def _observe(check: str, name: str, observation: Any) -> None:
    """Send what a passing check saw to the grader too, numbered in the order the checks ran.

    The reference solution's run sends the same observations from the same test code, and the
    grader compares them outside the kernel: a check whose code was replaced or skipped, in a kernel
    that evaded the code policy, sends nothing, and its cell earns nothing. The observation itself
    is made in the kernel (book/instructors.md lists what that leaves to it).
    """
    if os.environ.get(_GRADING[0]) != _GRADING[1]:
        return
    execution = _execution_id()
    number = _OBSERVED[1] + 1 if _OBSERVED[0] == execution else 1
    _OBSERVED[:] = [execution, number]
    _send(f"{check} #{number}: {name}"[:200], observation, observation=True)


def emit(name: str, value: Any, *, rtol: float | None = None, atol: float | None = None) -> None:
    """Send one output of the student's code to the grader, which compares it outside the kernel.

    A tensor goes as safetensors bytes (detached, on the CPU, contiguous), with the type of device it
    was on, and is compared with ``torch.testing.assert_close`` (dtype, shape and device type included); anything else must be
    made of None, bools, ints, floats, strings, lists, tuples and dicts, and travels with its exact
    types (:func:`_typed`): a tuple is not a list, an int not a float nor a bool, and a dict's keys
    keep their order. It is compared exactly but for floats (to float64's precision: a float
    computed in float32 and sent as a Python float needs a tolerance of its own).
    ``rtol`` and ``atol`` (both or neither) widen a tensor's tolerance, or a plain value's floats';
    the grader takes them from the reference solution's run, never from the student's. A name is used once per run of a cell,
    so that a loop cannot overwrite an earlier output by mistake. A meta tensor has no values: send
    its shape and dtype as JSON instead. Outside grading (a learner's run, the book's tests) nothing
    is sent; the value is still checked, so a mistake shows up there first.
    """
    _send(name, value, rtol=rtol, atol=atol)


def _send(name: str, value: Any, *, rtol: float | None = None, atol: float | None = None,
          observation: bool = False) -> None:
    """:func:`emit`; an ``observation`` (what a check saw, from :func:`_observe`) is marked as one for the grader,
    which counts it among what the kernel decides (book/instructors.md says how much that weighs)."""
    _stop_point()
    if _SENT.get(name) == _execution_id():
        raise ValueError(f"emit: the output name {name!r} was already used in this cell")
    if isinstance(value, torch.Tensor):
        _plain_tensor(value, name)
        tensor = value.detach().to("cpu").contiguous()
        from safetensors.torch import save

        payload = {"name": name, "safetensors": base64.b64encode(save({"value": tensor})).decode(),
                   "device": value.device.type, "observation": observation}
    else:
        try:
            payload = {"name": name, "typed": json.loads(json.dumps(_typed(value), allow_nan=False)),
                       "observation": observation}
        except (TypeError, ValueError, RecursionError) as problem:
            raise ExerciseError(f"{name}: a {type(value).__name__} cannot be sent as JSON ({problem})") from None
    if (rtol is None) != (atol is None):
        raise ValueError(f"emit {name!r}: give both rtol and atol, or neither")
    if rtol is not None and not all(0 <= float(t) < 1 for t in (rtol, atol)):
        # the grader refuses the whole submission's outputs otherwise (ptgrader.channel.decode): say so here first
        raise ValueError(f"emit {name!r}: rtol and atol must both be in [0, 1), got {rtol!r} and {atol!r}")
    if rtol is not None:
        payload.update(rtol=float(rtol), atol=float(atol))
    _SENT[name] = _execution_id()
    if os.environ.get(_GRADING[0]) == _GRADING[1]:
        _listen_for_stop()
        if not _PENDING:
            _PENDING_SINCE[0] = time.monotonic()
        _PENDING.append(payload)
        shell = _shell()
        if shell is None or len(_PENDING) >= MAX_PENDING or _waited(FLUSH_AFTER_S):
            _flush()
        elif _flush not in shell.events.callbacks["post_execute"]:
            shell.events.register("post_execute", _flush)


#: Outputs waiting to leave the kernel: they go together, in one display message, once the first of them has waited
#: FLUSH_AFTER_S or when the cell's run ends (IPython's post_execute event, which runs after an error or an
#: interrupt too). A message per output
#: (hundreds per submission, most of them what the passing checks saw) cost a lab 02 submission 0.28 s more
#: CPU, grader and kernel together, than one per cell; a kernel that stops the flush only withholds its own
#: outputs, and the part earns nothing.
_PENDING: list[dict[str, Any]] = []
#: Sent at once when this many wait, so that a loop of checks does not hold a submission's outputs.
MAX_PENDING = 256
#: Sent once the first of them has waited this long (seconds), at the next output or call of the harness: the
#: grader compares them as they come, and stops the cell at its first difference (:func:`_stop_point`). At most
#: ten messages a second, where one per output cost a lab 02 submission 0.28 s.
FLUSH_AFTER_S = 0.1
#: When the first of the waiting outputs was sent (time.monotonic()).
_PENDING_SINCE = [0.0]


def _waited(seconds: float) -> bool:
    """Whether outputs wait, the first of them for ``seconds`` or more."""
    return bool(_PENDING) and time.monotonic() - _PENDING_SINCE[0] >= seconds


#: The signal by which the grader asks the running test cell to stop (``ptgrader.kernels.STOP_SIGNAL``; a test holds
#: them equal). Its default action is to ignore it, so a kernel that has no handler for it just goes on.
STOP_SIGNAL = signal.SIGWINCH
#: The run of a cell (its execute request's id) the grader asked to stop; "" while it asked none.
_STOP_ASKED = [""]


class StoppedByTheGrader(BaseException):  # noqa: N818  (not an error of the student's code: a message from the grader)
    """Raised where the grader asked the running test cell to stop: an output it sent differs from the reference's.

    A BaseException, so that no ``except Exception`` in a test cell or a check takes it for the answer's error.
    """


def _on_stop_signal(signum: int, frame: object) -> None:
    """The grader's :data:`STOP_SIGNAL`: note which run of a cell it stops, for :func:`_stop_point` to raise there.

    Only noted: raising here could interrupt the student's code anywhere, and leave its state half changed for the
    parts after it. Tagged with the run it arrived in, so that a stop meant for one cell never stops the next.
    """
    _STOP_ASKED[0] = _execution_id() or "outside a cell"


def _listen_for_stop() -> None:
    """Handle :data:`STOP_SIGNAL` from now on (in a graded kernel's main thread, where Python runs handlers)."""
    if signal.getsignal(STOP_SIGNAL) is not _on_stop_signal and threading.current_thread() is threading.main_thread():
        signal.signal(STOP_SIGNAL, _on_stop_signal)


def _stop_point() -> None:
    """Between two outputs, and before each call of the contract harness: send the outputs that have waited
    :data:`FLUSH_AFTER_S`, and stop this run of the cell where the grader asked it to.

    Why: once one output of a test cell differs from the reference solution's, the part earns nothing whatever
    the cell does next, so the grader asks the cell to stop (:data:`STOP_SIGNAL`) instead of letting it run every
    later case. Stopping here, between the student's calls, leaves nothing half done. A kernel that ignores the
    request only takes longer; the verdict is the grader's either way.
    """
    if _waited(FLUSH_AFTER_S):
        _flush()
    if _STOP_ASKED[0] and _STOP_ASKED[0] == _execution_id():
        raise StoppedByTheGrader("the grader found an output of this cell that differs from the reference solution's"
                                 " (the part earns nothing), and stopped the cell there: its later checks did not run")


def _flush() -> None:
    """Send the waiting outputs to the grader as one display message: a list of payloads."""
    if not _PENDING:
        return
    from IPython.display import display

    batch = list(_PENDING)
    _PENDING.clear()
    display({OUTPUT_MIME: batch}, raw=True)


def emit_tree(name: str, value: Any, *, rtol: float | None = None, atol: float | None = None) -> None:
    """:func:`emit` a result that may hold tensors: each tensor in a list, tuple or dict on its own.

    A tensor on the ``meta`` device has no values, so its shape and dtype go as JSON. The
    container's exact types travel with :func:`call`'s contract (``returns``).
    """
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            emit(name, {"meta tensor": [list(value.shape), str(value.dtype)]})
        else:
            emit(name, value, rtol=rtol, atol=atol)
    elif isinstance(value, (list, tuple, dict)) and any(
            isinstance(leaf, torch.Tensor) for _, leaf in contract._leaves(value, "")):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            emit_tree(f"{name}[{key!r}]", item, rtol=rtol, atol=atol)
    else:
        emit(name, value, rtol=rtol, atol=atol)  # a plain value's floats take the tolerance too


@contextlib.contextmanager
def _elsewhere(function: Callable[..., Any], default_device: bool = True) -> Iterator[None]:
    """The block runs for a caller whose default device (unless not ``default_device``), and whose notebook
    ``device``, are ``meta``.

    On a GPU the lab's ``device`` and the default device (the CPU) differ from each other, and a
    tensor made without ``device=x.device`` lands on the wrong one; a CPU grader sees neither
    mistake unless both point elsewhere. ``device`` is rebound in the student's own globals
    (``function.__globals__``, or its class's ``forward``'s for a module): a test cell runs in a copy
    of the notebook's globals, which the student's code never reads.
    """
    code = function if hasattr(function, "__globals__") else getattr(type(function), "forward", None)
    space = getattr(code, "__globals__", {})  # a callable object of torch's (no notebook globals): default only
    missing = object()
    saved = space.get("device", missing)
    space["device"] = torch.device("meta")
    found = torch.get_default_device()
    if default_device:  # as a caller sets it: a function that resets it to the CPU's default is seen
        torch.set_default_device("meta")
    try:
        yield
    finally:
        if default_device:
            torch.set_default_device(None if found.type == "cpu" else found)
        if saved is missing:
            space.pop("device", None)
        else:
            space["device"] = saved


def emit_elsewhere(name: str, function: Callable[..., Any], *args: Any, rtol: float | None = None,
                   atol: float | None = None, owner: Callable[..., Any] | None = None, default_device: bool = True,
                   **kwargs: Any) -> None:
    """:func:`emit_tree` what ``function(*args, **kwargs)`` returns when the caller's default device and
    the notebook's ``device`` are both ``meta`` (:func:`_elsewhere`), its inputs where they are; or the
    type of the error it raises, which is the answer then (a tensor made on the wrong device fails); and the
    caller's default device after the call (a function that set it back to the CPU's, not to what it found,
    leaves the caller elsewhere).
    ``owner``: the student's function whose notebook it is, when ``function`` is what that one returned.
    ``default_device=False``: the notebook's ``device`` only, for a part whose work stays on the CPU
    whatever the notebook's device (a CPU generator's draws, as ``DistributedSampler`` makes them), and
    which follows the default device as torch's own functions do."""
    left = None
    try:
        with _elsewhere(owner if owner is not None else function, default_device), contract.answer_running():
            try:
                result = function(*args, **kwargs)
            finally:
                left = str(torch.get_default_device())
    except Exception as error:  # noqa: BLE001  (the error is the answer)
        result = f"raised {type(error).__name__}"
    emit_tree(name, result, rtol=rtol, atol=atol)
    emit(f"{name}: the caller's default device afterwards", left)


# The seeded domains and the contract harness (imported here, after emit, which they call).
from ptchecks import contract, domain  # noqa: E402
from ptchecks.contract import call  # noqa: E402
from ptchecks.domain import Domain  # noqa: E402

# Last, so that the record includes every function above (and the record itself).
_SNAPSHOT = _Snapshot()
