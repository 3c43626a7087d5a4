"""The in-kernel half of the grader: strict checks, the ledger, canaries that notice tampering, the token.

Tampering tests patch torch or ptlabs for real (inside ``monkeypatch``, which puts everything back),
because that is exactly what a cheating solution cell does.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Generator

import pytest
import torch

import ptlabs
import ptchecks as grading
from ptlabs import ExerciseError
from ptlabs.checks import LEDGER


@pytest.fixture(autouse=True)
def _fresh_ledger() -> Generator[None, None, None]:
    """``begin`` turns on the graded cells' keep-going mode: no test leaves it on for the next."""
    yield
    LEDGER.reset("")


@pytest.mark.parametrize(
    ("actual", "expected", "message"),
    [
        ([1, 2], (1, 2), "value is a list"),
        ((1, True), (1, 1), r"\[1\] is a bool"),
        (torch.Size([2]), (2,), "value is a Size"),
        ({"b": 1, "a": 2}, {"a": 2, "b": 1}, r"keys \['b', 'a'\], expected \['a', 'b'\] \(in this order\)"),
        ({"a": [1]}, {"a": [2]}, r"\['a'\]\[0\] is 1, expected 2"),
        ((1, 2, 3), (1, 2), "has 3 items, expected 2"),
    ],
)
def test_check_equal_is_strict_about_types_order_and_values(actual: object, expected: object, message: str) -> None:
    with pytest.raises(ExerciseError, match=message):
        grading.check_equal(actual, expected, name="ex")


def test_check_close_refuses_a_tensor_subclass() -> None:
    class Agreeable(torch.Tensor):
        pass

    with pytest.raises(ExerciseError, match="got the subclass Agreeable"):
        grading.check_close(torch.ones(2).as_subclass(Agreeable), torch.ones(2), name="ex")
    grading.check_close(torch.nn.Parameter(torch.ones(2)), torch.ones(2), name="ex")


def test_check_true_needs_exactly_true() -> None:
    with pytest.raises(ExerciseError, match="ex: it was 1"):
        grading.check_true(1, name="ex", why="it was 1")
    grading.check_true(True, name="ex", why="")


def test_check_raises_wants_that_exception_to_propagate() -> None:
    def swallow() -> None:
        return None

    with pytest.raises(ExerciseError, match="no exception; expected ValueError to propagate"):
        grading.check_raises(ValueError, swallow, name="ex")
    with pytest.raises(ExerciseError, match="raised KeyError .*expected ValueError"):
        grading.check_raises(ValueError, {}.__getitem__, "k", name="ex")
    assert isinstance(grading.check_raises(ValueError, int, "x", name="ex"), ValueError)


def test_check_same_storage_rejects_a_copy() -> None:
    base = torch.arange(6.0)
    grading.check_same_storage(base[2:], base, name="ex")
    with pytest.raises(ExerciseError, match="different storage"):
        grading.check_same_storage(base.clone(), base, name="ex")


def test_call_counter_counts_by_substring() -> None:
    with grading.TorchCallCounter() as calls:
        torch.nn.functional.scaled_dot_product_attention(torch.ones(1, 2, 4), torch.ones(1, 2, 4), torch.ones(1, 2, 4))
    assert calls.count("DOT_PRODUCT") == 1


def test_count_hooks_by_kind() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    handle = model[0].register_forward_hook(lambda *args: None)
    model.register_forward_pre_hook(lambda *args: None)
    assert (grading.count_hooks(model, "forward"), grading.count_hooks(model, "forward_pre")) == (1, 1)
    handle.remove()
    assert grading.count_hooks(model, "forward") == 0
    with pytest.raises(ValueError, match="kind must be one of"):
        grading.count_hooks(model, "sideways")


def test_every_hook_counts_by_default() -> None:
    """Round 116: a forward pre-hook left behind was invisible to a count of forward hooks."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    model.register_forward_pre_hook(lambda *args: None)
    model[0].register_full_backward_pre_hook(lambda *args: None)
    model[1].register_state_dict_post_hook(lambda *args: None)
    model.register_load_state_dict_post_hook(lambda *args: None)
    model[0].weight.register_hook(lambda grad: grad)
    model[0].bias.register_post_accumulate_grad_hook(lambda param: None)
    assert grading.count_hooks(model) == 6
    assert grading.count_hooks(model, "forward") == 0


def test_a_learners_failed_check_raises_with_its_message() -> None:
    with pytest.raises(ExerciseError, match="b: the reason"):
        grading.check_true(False, name="b", why="the reason")


def test_in_a_graded_cell_a_failed_check_is_recorded_and_the_cell_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    grading.begin("test_x")
    grading.check_true(True, name="a", why="")
    assert grading.check_true(False, name="b", why="the input changed") is None  # no raise: the cell goes on
    wrong = torch.zeros(2, dtype=torch.int64)
    assert grading.check_tensor(wrong, name="c", dtype=torch.float32) is wrong  # what the next line uses
    assert ptlabs.check_close(torch.zeros(2), torch.ones(2), name="d") is None
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("✅ a") and [line[:3] for line in printed if line[0] == "❌"] == ["❌ b", "❌ c", "❌ d"]
    assert LEDGER.passes == 1 and [f.split(":")[0] for f in LEDGER.failures] == ["b", "c", "d"]
    with pytest.raises(ExerciseError, match="3 check\\(s\\) failed"):
        grading.complete("test_x", "tok", 1)


def test_a_check_inside_a_check_fails_as_one(capsys: pytest.CaptureFixture[str]) -> None:
    grading.begin("test_x")
    # check_close calls check_tensor, which fails on the dtype: one failure, one line, from check_close
    grading.check_close(torch.zeros(2, dtype=torch.int64), torch.zeros(2), name="e")
    assert capsys.readouterr().out.count("❌") == 1 and len(LEDGER.failures) == 1


def test_a_failed_check_in_a_graded_kernel_sends_what_it_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    sent = []
    monkeypatch.setattr(grading, "_send", lambda name, value, **kw: sent.append((name, value, kw)))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    grading.begin("test_x")
    grading.check_true(True, name="a", why="")
    grading.check_true(False, name="b", why="the input changed")
    assert [(name, value) for name, value, _ in sent] == [
        (grading.LEFT_HOOKS, 0), ("check_true #1: a", True), ("check_true #2: b", "failed: b: the input changed")]
    assert all(kw == {"observation": True} for _, _, kw in sent[1:])  # the hooks' count decides: no observation


def test_canaries_still_see_known_wrong_values_rejected_in_a_graded_cell(capsys: pytest.CaptureFixture[str]) -> None:
    grading.begin("test_x")
    grading.canaries()
    assert "❌" not in capsys.readouterr().out and LEDGER.failures == [] and LEDGER.passes == 1


def test_complete_prints_the_token_only_after_a_clean_full_run(capsys: pytest.CaptureFixture[str]) -> None:
    grading.begin("test_x")
    grading.check_true(True, name="a", why="")
    grading.complete("test_x", "tok", 1)
    assert capsys.readouterr().out.splitlines()[-1] == "ptlabs-grading: test_x complete tok"
    grading.begin("test_x")
    with pytest.raises(ExerciseError, match="0 check\\(s\\) passed, the reference solution passes 1"):
        grading.complete("test_x", "tok", 1)
    grading.begin("test_x")
    LEDGER.keep_going = False  # a student's code that turned keep-going off, and caught the failure
    with pytest.raises(ExerciseError, match="1 check\\(s\\) failed in this cell"):
        try:
            grading.check_true(False, name="b", why="hidden")
        except ExerciseError:
            pass
        grading.complete("test_x", "tok", 0)
    grading.begin("test_y")
    with pytest.raises(grading.GraderTampered, match="start-of-cell marker did not run"):
        grading.complete("test_x", "tok", 0)


def test_canaries_pass_untouched(capsys: pytest.CaptureFixture[str]) -> None:
    grading.canaries()
    assert capsys.readouterr().out.startswith("✅ grader canaries: correct")


@pytest.mark.parametrize(
    ("target", "name", "replacement", "evidence"),
    [
        (torch.testing, "assert_close", lambda *a, **k: None, "torch.testing: assert_close replaced"),
        (torch, "allclose", lambda *a, **k: True, "torch: allclose replaced"),
        (ptlabs, "check_close", print, "ptlabs: check_close replaced"),
        (grading, "check_equal", lambda *a, **k: None, "check_equal accepted a known-wrong value"),
        (grading, "TorchCallCounter", object, "the torch call counter does not work"),
        (torch.Tensor, "__eq__", lambda self, other: True, r"torch.Tensor: __eq__ replaced"),
        # A red team's lenient comparison: every assert_close between int64 vectors passed.
        (torch.testing._comparison.TensorLikePair, "_compare_values", lambda *a: None,
         "torch.testing._comparison.TensorLikePair: _compare_values replaced"),
    ],
)
def test_canaries_notice_a_replaced_function(
    monkeypatch: pytest.MonkeyPatch, target: object, name: str, replacement: object, evidence: str
) -> None:
    monkeypatch.setattr(target, name, replacement)
    with pytest.raises(grading.GraderTampered, match=evidence):
        grading.canaries()


class _PassThrough(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        return func(*args, **(kwargs or {}))


def test_canaries_notice_a_function_mode_left_on() -> None:
    mode = _PassThrough()
    mode.__enter__()
    try:
        with pytest.raises(grading.GraderTampered, match="a TorchFunctionMode is active"):
            grading.canaries()
    finally:
        mode.__exit__(None, None, None)


def test_canaries_notice_a_global_module_hook() -> None:
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *args: None)
    try:
        with pytest.raises(grading.GraderTampered, match="a global nn.Module hook was registered"):
            grading.canaries()
    finally:
        handle.remove()


def test_canaries_leave_out_a_global_hook_torch_left_behind() -> None:
    """torch 2.11's export left a buffer-registration hook of torch._functorch behind (seen on an H200)."""
    torch_file = os.path.join(os.path.dirname(torch.__file__), "_functorch", "left_behind.py")
    namespace: dict[str, object] = {}
    exec(compile("def left_behind(module, name, buffer):\n    return buffer", torch_file, "exec"), namespace)
    torchs_own = torch.nn.modules.module.register_module_buffer_registration_hook(namespace["left_behind"])
    try:
        grading.canaries()
        students = torch.nn.modules.module.register_module_buffer_registration_hook(lambda *args: None)
        try:
            with pytest.raises(grading.GraderTampered, match="a global nn.Module hook was registered"):
                grading.canaries()
        finally:
            students.remove()
    finally:
        torchs_own.remove()


def test_torchs_own_dynamo_wrapper_is_not_tampering() -> None:
    import torch._dynamo  # noqa: F401  (rebinds torch.manual_seed to a dynamo-disabling wrapper)

    grading.canaries()


def test_torch_compile_patching_nn_module_is_not_tampering() -> None:
    """The first torch.compile call wraps nn.Module.__init__/__setstate__ to tag modules: torch's own doing."""
    compiled = torch.compile(lambda x: x + 1, backend="eager")
    compiled(torch.ones(2))
    torch.nn.Linear(2, 2)  # built through the wrapped __init__
    grading.canaries()


def test_a_wrapper_of_nn_module_init_made_elsewhere_is_tampering(monkeypatch: pytest.MonkeyPatch) -> None:
    original = torch.nn.Module.__init__

    def patched_init(self, *args, **kwargs):  # noqa: ANN001, ANN202  (same name as torch's wrapper, other file)
        original(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "__init__", patched_init)
    with pytest.raises(grading.GraderTampered, match="torch.nn.Module: __init__ replaced"):
        grading.canaries()


def test_a_module_name_is_never_code_in_what_torch_fx_generates() -> None:
    """A buffer named like code ran as code when ExportedProgram.module() regenerated the module (torch 2.13)."""
    import builtins

    class Shelf(torch.nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.register_buffer(name, torch.ones(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + next(self.buffers())

    code = "import builtins; builtins.ptchecks_fx_ran = True"
    name = 'q") if exec(bytes(' + repr(list(code.encode())) + ")) else next(getattr(self,'buffers')())#"
    module = torch.export.export(Shelf(name), (torch.zeros(1),)).module()
    assert module(torch.ones(1)).tolist() == [2.0]
    assert not getattr(builtins, "ptchecks_fx_ran", False)


def test_hooks_on_every_module_or_optimizer_are_counted_even_through_torchs_own_wrappers() -> None:
    """Round 103: a loop in a global forward hook answered for a part whose own code only called a module, and
    ``torch.enable_grad()(hook)`` made it torch's own function, which the count left out."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    def hook(module, args, output):
        return output

    class Hook:
        def __call__(self, module, args, output):
            return output

        def run(self, module, args, output):
            return output

    assert grading.left_hooks() == 0
    for register in (lambda: torch.nn.modules.module.register_module_forward_hook(hook),
                     lambda: torch.nn.modules.module.register_module_forward_hook(torch.enable_grad()(hook)),
                     lambda: torch.nn.modules.module.register_module_forward_pre_hook(torch.no_grad()(lambda *a: None)),
                     lambda: register_optimizer_step_pre_hook(lambda *a: None),
                     # round 107: what torch's wrapper holds is a partial, a callable object, a bound method, a list
                     lambda: torch.nn.modules.module.register_module_forward_hook(
                         torch.enable_grad()(functools.partial(hook))),
                     lambda: torch.nn.modules.module.register_module_forward_hook(torch.enable_grad()(Hook())),
                     lambda: torch.nn.modules.module.register_module_forward_hook(torch.enable_grad()(Hook().run)),
                     lambda: register_optimizer_step_pre_hook(torch.no_grad()(functools.partial(hook, None)))):
        registered = register()
        assert grading.left_hooks() == 1
        registered.remove()
    assert grading.left_hooks() == 0
    torch_own = torch.nn.modules.module.register_module_forward_hook(torch.nn.functional.relu)  # torch's own code
    assert grading.left_hooks() == 0
    torch_own.remove()


def test_hooks_and_modes_left_open_are_counted() -> None:
    """Round 108: a generator stopped inside ``with saved_tensors_hooks(...)`` left a pack hook on, which called
    ``backward`` inside an answer that never names it; a test cell that starts with it on saw nothing change."""
    assert grading.left_hooks() == 0

    def open_block(block):
        with block:
            yield

    for block in (torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t),
                  torch.autograd.graph.disable_saved_tensors_hooks("no"), torch.autograd.forward_ad.dual_level(),
                  torch.overrides.TorchFunctionMode()):
        held = open_block(block)
        next(held)
        assert grading.left_hooks() == 1, block
        next(held, None)
        assert grading.left_hooks() == 0


def test_no_garbage_collection_runs_student_code_inside_a_call() -> None:
    """Round 109: a generator left in a reference cycle ran its ``finally`` at each collection, inside the answer's
    call, where it registered a hook on every module that did the answer's work."""
    inside, ran_inside = [False], []

    def plant():
        def finalizer():
            try:
                yield
            finally:
                ran_inside.append(inside[0])

        held = finalizer()
        next(held)
        cycle = [held]
        cycle.append(cycle)

    def allocate(x):
        inside[0] = True
        plant()
        junk = [[] for _ in range(10 * gc.get_threshold()[0])]  # enough new objects to start a collection
        inside[0] = False
        return x + len(junk)

    grading.contract.call("allocate", allocate, torch.ones(2))
    gc.collect()
    assert ran_inside and not any(ran_inside), f"finalizers ran inside the call: {ran_inside}"


def test_every_graded_test_cell_sends_the_hooks_left_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[dict] = []
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data))
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *args: None)
    try:
        grading.begin("test_x")
    finally:
        handle.remove()
    grading._flush()
    sent = [payload for data in shown for payload in data[grading.OUTPUT_MIME]]
    assert any("hooks on every module or optimizer" in str(payload) for payload in sent), sent


@pytest.mark.parametrize(("rtol", "atol"), [(1e-5, 10.0), (1.0, 0.0), (-1e-9, 1e-9)])
def test_a_tolerance_the_grader_refuses_is_refused_where_it_is_emitted(rtol: float, atol: float) -> None:
    """The grader refuses a tolerance outside [0, 1) (ptgrader.channel), and with it every output of the submission:
    a hidden test that asks for one fails in the lab's own run, not first in grading (round 116's atol of 10)."""
    with pytest.raises(ValueError, match=r"rtol and atol must both be in \[0, 1\)"):
        grading.emit(f"a tolerance of {rtol} and {atol}", torch.ones(2), rtol=rtol, atol=atol)
