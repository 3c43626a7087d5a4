"""The contract harness (ptchecks.call) and the seeded domains (ptchecks.Domain) that every hidden test uses.

Each promise the harness observes is shown to be seen on a function that breaks it, and not on
one that keeps it; each domain is shown to cover every family it declares, and to give the
reference's run and a student's the same inputs.
"""

from __future__ import annotations

import collections
import functools
import itertools
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import ptchecks
from ptchecks import contract
from ptchecks import domain as domains


def contract_of(function: Callable[..., Any], *args: Any, monkeypatch: pytest.MonkeyPatch, later_case: bool = False,
                **kwargs: Any) -> dict[str, Any]:
    """What ptchecks.call sends as the contract of ``function`` on these inputs, as its first case (``later_case``:
    as a case after others, which may not grow its state in its first call either)."""
    if not later_case:
        monkeypatch.setattr(contract, "_CALLED", set())
    # torch registers kernels as this process imports its modules: the baseline is what the call starts from
    monkeypatch.setattr(contract, "_REGISTERED", [contract._core_kernels()])
    sent: dict[str, Any] = {}
    monkeypatch.setattr(ptchecks, "emit", lambda name, value, **_: sent.__setitem__(name, value))
    ptchecks.call("f", function, *args, **kwargs)
    return sent["f: contract"]


def test_a_function_that_keeps_every_promise_shows_none_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(3, 4)
    contract = contract_of(lambda t: t.t().reshape(2, 6), x, monkeypatch=monkeypatch)
    assert contract == {"returns": "Tensor(float32, cpu)", "inputs changed": [], "aliases": [],
                        "state kept by the function": False, "state grows at each call": False,
                        "second call": "same result", "modes changed": [], "global RNG drawn": False}


@pytest.mark.parametrize(
    ("function", "key", "seen"),
    [
        (lambda t: t.add_(1), "inputs changed", ["argument 0"]),
        (lambda t: t.unsqueeze_(0).squeeze(0), "inputs changed", ["argument 0"]),  # version and shape
        (lambda t: t.requires_grad_(), "inputs changed", ["argument 0"]),
        (lambda t: t.view(-1), "aliases", ["shares memory with argument 0"]),
        (lambda t: t, "aliases", ["is argument 0"]),
        (lambda t: (t.sum(),), "returns", {"tuple": ["Tensor(float32, cpu)"]}),
        (lambda t: [t.sum()], "returns", {"list": ["Tensor(float32, cpu)"]}),
        (lambda t: t.sum().item(), "returns", "float"),
        (lambda t: t.to(torch.float64), "returns", "Tensor(float64, cpu)"),
        (lambda t: t + torch.rand(()), "global RNG drawn", True),
        (lambda t: torch.set_grad_enabled(False) and t, "modes changed", ["grad mode"]),
        (lambda t: torch.set_default_dtype(torch.float64) or t * 2, "modes changed", ["default dtype"]),
        # Settings that change no number on a CPU grader (round 7): only the harness can see them left changed.
        (lambda t: torch.set_float32_matmul_precision("high") or t * 2, "modes changed",
         ["CUDA matmul", "float32 matmul precision"]),
        (lambda t: torch.autograd.set_detect_anomaly(True) and t * 2, "modes changed", ["anomaly detection"]),
        (lambda t: setattr(torch.backends.cudnn, "benchmark", True) or t * 2, "modes changed", ["cuDNN"]),
        # round 60: every later compile of an argument named x made dynamic
        (lambda t: setattr(torch.compiler.config, "dynamic_sources", "L['x']") or t * 2, "modes changed",
         ["torch's configuration modules"]),
        # round 86: .item() captured in the graph, so a block that kept its graph break showed none
        (lambda t: setattr(torch._dynamo.config, "capture_scalar_outputs", True) or t * 2, "modes changed",
         ["torch's configuration modules"]),
        (lambda t: setattr(torch.fx.experimental._config, "backed_size_oblivious", True) or t * 2, "modes changed",
         ["torch's configuration modules"]),
        # round 87: the setting's own table changed, no override set
        (lambda t: setattr(torch._dynamo.config._config["capture_scalar_outputs"], "default", True) or t * 2,
         "modes changed", ["torch's configuration modules"]),
    ],
)
def test_each_broken_promise_is_seen(function: Callable[..., Any], key: str, seen: object,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        contract = contract_of(function, torch.ones(2, 3), monkeypatch=monkeypatch)
    finally:
        torch.set_grad_enabled(True)
        torch.set_default_dtype(torch.float32)
        torch.set_float32_matmul_precision("highest")
        torch.autograd.set_detect_anomaly(False)
        torch.backends.cudnn.benchmark = False
        torch.compiler.config.dynamic_sources = ""
        torch._dynamo.config.capture_scalar_outputs = False
        torch.fx.experimental._config.backed_size_oblivious = False
        torch._dynamo.config._config["capture_scalar_outputs"].default = False
    assert contract[key] == seen
    assert not torch._dynamo.config.capture_scalar_outputs  # the harness put the table back


def test_an_operator_registered_through_torch_library_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 88: a solution cell replaced aten::dropout's CPU kernel for the whole kernel (a model exported in training
    mode then served what it serves in evaluation mode). The registry is process-wide: the call that registers it,
    and every later one (against the baseline taken right after the set-up cell), show it."""
    libraries = []

    def registers(t: torch.Tensor) -> torch.Tensor:
        if not libraries:
            libraries.append(torch.library.Library("aten", "IMPL"))
            libraries[0].impl("dropout", lambda x, p, train: x.clone(), "CPU")
        return torch.nn.functional.dropout(t, 0.5, training=True)

    try:
        seen = contract_of(registers, torch.ones(4), monkeypatch=monkeypatch)["modes changed"]
    finally:
        for library in libraries:
            library._destroy()
    assert seen == ["torch's operator registrations"]
    assert contract_of(lambda t: t * 2, torch.ones(2), monkeypatch=monkeypatch)["modes changed"] == []


def _with_item(x: torch.Tensor) -> torch.Tensor:
    return x * x.max().item()


def test_a_configuration_changed_before_the_first_test_cell_is_put_back_at_its_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 86: a solution cell above lab 05's first test cell set ``capture_scalar_outputs``, which then was the
    baseline every test cell started from, and a block that kept its ``.item()`` showed no graph break. The baseline
    is taken at the grader's hold, before any student code; each test cell starts from it."""
    monkeypatch.setattr(contract, "_BASELINE", {})
    monkeypatch.setattr(contract, "_TABLES", {})
    ptchecks.hold_baseline()  # right after the set-up cell
    torch._dynamo.config.capture_scalar_outputs = True  # a solution cell
    torch._inductor.config.max_autotune = True
    entries = torch._dynamo.config._config
    entries["capture_dynamic_output_shape_ops"].env_value_force = True  # round 87: the table itself
    torch.fx.experimental._config._config["translation_validation"].default = True
    try:
        assert [name for name, _ in contract._torch_config()] == [
            "torch._dynamo.config.capture_scalar_outputs", "torch._inductor.config.max_autotune"]
        assert [module.__name__ for module in contract._tables_changed()] == [
            "torch.fx.experimental._config", "torch._dynamo.config"]
        contract.put_back_quiet_settings()  # what ptchecks.begin does first
        assert contract._put_back_tables()
        assert not torch._dynamo.config.capture_scalar_outputs and not torch._inductor.config.max_autotune
        assert not torch._dynamo.config.capture_dynamic_output_shape_ops
        assert not torch.fx.experimental._config.translation_validation
        assert contract._torch_config() == () and contract._tables_changed() == []
        assert torch._dynamo.explain(_with_item)(torch.ones(3)).graph_break_count == 1
        assert contract._tables_changed() == []  # torch's own work leaves the tables as they were
    finally:
        torch._dynamo.config.capture_scalar_outputs = False
        torch._inductor.config.max_autotune = False
        entries["capture_dynamic_output_shape_ops"].env_value_force = contract._UNSET_SENTINEL
        torch.fx.experimental._config._config["translation_validation"].default = False


def _seeded_and_put_back(n: int) -> list[int]:
    """Round 39: the global generator seeded and drawn from, then its state put back."""
    state = torch.get_rng_state()
    torch.default_generator.manual_seed(n)
    order = torch.randperm(n).tolist()
    torch.set_rng_state(state)
    return order


def _global_by_name(n: int) -> list[int]:
    return torch.randperm(n, generator=torch.default_generator).tolist()


def _own_generator(n: int) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(n)).tolist()


def _traced_under_inference_mode(n: int) -> list[int]:
    """Round 65: torch.export under torch.inference_mode() traces a dropout over fake tensors, which draws nothing."""
    with torch.inference_mode():
        program = torch.export.export(torch.nn.Dropout(0.5).eval(), (torch.zeros(2, n),))
    return [len(program.graph.nodes), int(torch.rand(n, device="meta").shape[0])]  # a meta tensor has no values


@pytest.mark.parametrize(("function", "drew"), [(_seeded_and_put_back, True), (_global_by_name, True),
                                                (_own_generator, False), (lambda n: list(range(n)), False),
                                                (_traced_under_inference_mode, False)])
def test_a_watched_call_sees_draws_from_the_global_generator_even_put_back(
        function: Callable[..., Any], drew: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    state = torch.get_rng_state()
    contract = contract_of(function, 6, monkeypatch=monkeypatch, draws_watched=True)
    assert contract["drew from the global generator"] is drew
    assert contract["global RNG drawn"] is (function is _global_by_name)  # the state alone sees only this one
    if function is not _global_by_name:  # the watcher's own test (_is_global) puts the generator back
        assert torch.equal(torch.get_rng_state(), state)
    assert "drew from the global generator" not in contract_of(function, 6, monkeypatch=monkeypatch)


def test_a_quiet_setting_left_changed_by_an_earlier_call_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A visible test calls the function unchecked first: a setting that changes no number on the CPU (round 7:
    float32 matmul precision left at "high") then is already changed when the harness calls it, before and
    after alike. It is seen against the settings the kernel had when the checks were imported."""
    def leaks(t: torch.Tensor) -> torch.Tensor:
        torch.set_float32_matmul_precision("high")
        return t * 2

    try:
        leaks(torch.ones(2))  # the unchecked call of a visible test
        contract = contract_of(leaks, torch.ones(2), monkeypatch=monkeypatch)
        put_back = torch.get_float32_matmul_precision()  # so that later code does not find it changed
    finally:
        torch.set_float32_matmul_precision("highest")
    assert contract["modes changed"] == ["CUDA matmul", "float32 matmul precision"]
    assert put_back == "highest"
    assert contract_of(lambda t: t * 2, torch.ones(2), monkeypatch=monkeypatch)["modes changed"] == []


def test_state_kept_between_calls_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def remembers(t: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return t * len(calls)

    assert contract_of(remembers, torch.ones(2), monkeypatch=monkeypatch)["second call"] == "a different result"


def _usual_caller() -> bool:
    """What a function can see of its caller: the second call comes with deterministic algorithms on."""
    return not torch.are_deterministic_algorithms_enabled()


_LOG: list[int] = []
_MEMO: dict[tuple[float, ...], torch.Tensor] = {}


def _logs_for_usual_callers(t: torch.Tensor) -> torch.Tensor:
    if _usual_caller():
        _LOG.append(1)
    return t * 2


def _memo_for_usual_callers(t: torch.Tensor) -> torch.Tensor:
    key = tuple(t.tolist())
    if _usual_caller() and key in _MEMO:
        return _MEMO[key]
    result = _MEMO[key] = t * 2
    return result


def _draws_for_unusual_callers(t: torch.Tensor) -> torch.Tensor:
    return t + torch.rand(()) * 0 if not _usual_caller() else t.clone()


def _a_view_for_usual_callers(t: torch.Tensor) -> torch.Tensor:
    return t.view(-1) if _usual_caller() and _LOG else t.clone()


def _returns_a_list_on_usual_later_calls(t: torch.Tensor) -> object:
    _LOG.append(1)
    return [t * 2] if len(_LOG) > 1 and _usual_caller() else (t * 2,)


@pytest.mark.parametrize(("function", "key", "seen"), [
    (_logs_for_usual_callers, "state kept by the function", True),
    (_memo_for_usual_callers, "second call", "the first call's result again"),
    (_draws_for_unusual_callers, "global RNG drawn", True),
    (_a_view_for_usual_callers, "aliases", ["shares memory with argument 0"]),
    (_returns_a_list_on_usual_later_calls, "second call", "a different result"),
])
def test_what_a_function_does_for_one_kind_of_caller_only_is_seen(
        function: Callable[..., Any], key: str, seen: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 27: the second call's caller can be told apart, so a function kept a log, handed back a cached
    result or drew only for the usual caller (or only for the unusual one); a third, usual call sees it."""
    _LOG[:] = [1] if function is _a_view_for_usual_callers else []
    _MEMO.clear()
    assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)[key] == seen


def test_nan_in_a_result_is_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.tensor([float("nan"), 1.0])
    assert contract_of(lambda t: t * 2, x, monkeypatch=monkeypatch)["second call"] == "same result"


def test_hooks_and_attributes_left_on_a_parameter_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    for leave, part in ((lambda p: p.register_post_accumulate_grad_hook(lambda q: None), "hooks"),
                        (lambda p: p.register_hook(lambda g: g), "hooks"),
                        (lambda p: setattr(p, "old_grad", p.grad), "parameters")):
        model = torch.nn.Linear(2, 2)
        assert contract_of(lambda m, f=leave: (f(m.weight), None)[1], model,
                           monkeypatch=monkeypatch)["inputs changed"] == [f"argument 0 ({part})"]


def test_gradients_left_by_a_step_are_seen_apart_from_the_values_unless_the_part_leaves_them_free(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A step skipped after an overflow changes no value, only ``.grad``; where the text leaves ``.grad``
    free (``grads_free``), a step that clears it afterwards keeps the same contract as one that does not."""
    def backward_only(m: torch.nn.Module) -> None:
        m(torch.ones(1, 2)).sum().backward()

    def backward_then_clear(m: torch.nn.Module) -> None:
        backward_only(m)
        m.zero_grad()

    for grads_free, expected in ((False, ["argument 0 (gradients)"]), (True, [])):
        for step in (backward_only, backward_then_clear):
            model = torch.nn.Linear(2, 2)
            seen = contract_of(step, model, grads_free=grads_free, grad_needed=True,
                               monkeypatch=monkeypatch)["inputs changed"]
            assert seen == (expected if step is backward_only else []), (step.__name__, grads_free)
    model = torch.nn.Linear(2, 2)
    assert contract_of(lambda m: (m.weight.requires_grad_(False), None)[1], model, grads_free=True,
                       monkeypatch=monkeypatch)["inputs changed"] == ["argument 0 (parameters)"]


def test_the_marks_torch_cond_leaves_on_parameters_are_not_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.cond, run eagerly, marks every parameter of the module it runs (a round's correct answer lost its
    points for it); an attribute a function sets itself is still seen."""
    def routed(m: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: m(t) * 2, lambda t: m(t), (x,)).detach()

    model, x = torch.nn.Linear(3, 2), torch.ones(4, 3)
    assert contract_of(routed, model, x, monkeypatch=monkeypatch)["inputs changed"] == []
    assert all("_dynamo_static_input_type" in vars(p) for p in model.parameters())  # the mark is there
    for name, value in (("kept", 1), ("_dynamo_keep", torch.zeros(4)), ("_dynamo_static_input_type", "guarded")):
        # a round's attack kept 16 MB on the caller's input under a `_dynamo_` name
        changed = contract_of(lambda m, n=name, v=value: setattr(m.weight, n, v), torch.nn.Linear(3, 2),
                              monkeypatch=monkeypatch)["inputs changed"]
        assert changed == ["argument 0 (parameters)"], name


def test_no_class_passes_for_a_plain_type_by_its_name() -> None:
    impostor = type("tuple", (tuple,), {"__module__": "builtins"})  # a round's lead: a subclass named tuple
    assert contract.type_tree((1, 2.0, True)) == {"tuple": ["int", "float", "bool"]}
    assert contract.type_tree(impostor((1,))) == {"builtins.tuple": ["int"]}
    pair = collections.namedtuple("Pair", "a b")
    assert contract.type_tree(pair(torch.zeros(1), None)) == {f"{__name__}.Pair": ["Tensor(float32, cpu)", "NoneType"]}


def test_a_list_changed_in_place_and_a_module_changed_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    items = [torch.ones(1)]
    assert contract_of(lambda xs: xs.append(torch.zeros(1)) or len(xs), items,
                       monkeypatch=monkeypatch)["inputs changed"] == ["argument 0"]
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model[1].register_buffer("scratch", torch.zeros(1), persistent=False)
    for change, part in ((lambda m: m.eval(), "training flags"), (lambda m: m[1].scratch.add_(1), "buffers"),
                         (lambda m: m[0].weight.requires_grad_(False), "parameters"),
                         (lambda m: m.register_forward_hook(lambda *a: None), "hooks")):
        model.train()
        assert contract_of(lambda m, c=change: (c(m), None)[1], model,
                           monkeypatch=monkeypatch)["inputs changed"] == [f"argument 0 ({part})"]


def sent_by(function: Callable[..., Any], *args: Any, monkeypatch: pytest.MonkeyPatch,
            **options: Any) -> dict[str, Any]:
    """Every output ptchecks.call sends for ``function`` on these inputs (and ``options``), by name."""
    sent: dict[str, Any] = {}
    monkeypatch.setattr(ptchecks, "emit", lambda name, value, **_: sent.__setitem__(name, value))
    ptchecks.call("f", function, *args, **options)
    return sent


def test_how_a_changed_argument_changed_is_sent_for_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 26: a training step whose scaler never grew changed the same arguments as the reference's step."""
    def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
             grow: bool) -> None:
        optimizer.zero_grad()
        scaler.scale(model(torch.ones(1, 2)).sum()).backward()
        scaler.step(optimizer)
        scaler.update(None if grow else scaler.get_scale())  # a new scale given: the scale never grows

    def afterwards(grow: bool) -> dict[str, Any]:
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler("cpu", growth_interval=1)
        sent = sent_by(step, model, optimizer, scaler, grow, monkeypatch=monkeypatch, grad_needed=True)
        assert sent["f: contract"]["inputs changed"][-1] == "argument 2"
        return {name: value for name, value in sent.items() if "afterwards" in name}

    grown, kept = afterwards(True), afterwards(False)
    assert grown["f: arguments afterwards"]["argument 2"]["scale"] == 2.0 ** 19  # 2 ** 16, grown at all 3 steps
    assert kept["f: arguments afterwards"]["argument 2"]["scale"] == 2.0 ** 16
    assert grown["f: arguments afterwards"]["argument 0"]["parameters"]["weight"] == {
        "tensor": ["torch.float32", [1, 2], "cpu"]}
    assert grown["f: arguments afterwards"]["argument 1"]["state"]["0"]["momentum_buffer"]["tensor"][1] == [1, 2]
    # each dtype's values in one tensor: the weight, its gradient and momentum, the bias ...
    assert set(grown) == {"f: arguments afterwards", "f: arguments afterwards (torch.float32)"}
    assert torch.equal(grown["f: arguments afterwards (torch.float32)"], kept["f: arguments afterwards (torch.float32)"])
    added = sent_by(lambda t: t.add_(1), torch.zeros(2), monkeypatch=monkeypatch)
    assert added["f: arguments afterwards (torch.float32)"].tolist() == [3.0, 3.0]  # three calls
    assert not [name for name in sent_by(torch.sin, torch.zeros(2), monkeypatch=monkeypatch) if "afterwards" in name]


def test_a_flag_flipped_beside_an_allowed_buffer_update_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A training BatchNorm updates its buffers in any forward; a flag flipped on the way must still show."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2))

    def forward(m: torch.nn.Sequential) -> torch.Tensor:
        return m(torch.randn(4, 2, generator=torch.Generator().manual_seed(0)))

    def forward_then_reset_modes(m: torch.nn.Sequential) -> torch.Tensor:
        out = forward(m)
        m.train(True)  # the caller's eval-mode BatchNorm comes back in training mode
        return out

    model.train()
    model[2].eval()
    assert contract_of(forward, model, monkeypatch=monkeypatch)["inputs changed"] == ["argument 0 (buffers)"]
    assert contract_of(forward_then_reset_modes, model, monkeypatch=monkeypatch)["inputs changed"] == [
        "argument 0 (buffers)", "argument 0 (training flags)"]


def test_a_statistic_kept_on_a_module_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain attribute set by a call is state kept between calls, as a changed buffer is."""

    class Router(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = torch.nn.Linear(2, 1)
            self.threshold = 0.5  # set by the constructor: a call must leave it alone

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.gate(x)

    def keeps_a_statistic(m: Router) -> torch.Tensor:
        out = m(torch.ones(3, 2))
        m.gate.routed = (out > 0).float().mean().detach()
        return out

    def changes_a_setting(m: Router) -> torch.Tensor:
        m.threshold = 0.25
        return m(torch.ones(3, 2))

    for function in (keeps_a_statistic, changes_a_setting):
        assert contract_of(function, Router(), monkeypatch=monkeypatch)["inputs changed"] == ["argument 0 (attributes)"]
    assert contract_of(lambda m: m(torch.ones(3, 2)), Router(), monkeypatch=monkeypatch)["inputs changed"] == []


def test_an_inference_tensor_is_not_an_ordinary_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    def evaluate(t: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return t * 2

    def evaluate_no_grad(t: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return t * 2

    assert contract_of(evaluate, torch.ones(2), monkeypatch=monkeypatch)["returns"] == "Tensor(float32, cpu, inference)"
    assert contract_of(evaluate_no_grad, torch.ones(2), monkeypatch=monkeypatch)["returns"] == "Tensor(float32, cpu)"


def test_a_result_that_keeps_its_graph_is_not_a_detached_one(monkeypatch: pytest.MonkeyPatch) -> None:
    weight = torch.ones(2, requires_grad=True)
    assert contract_of(lambda t: t * weight, torch.ones(2), monkeypatch=monkeypatch)["returns"] == \
        "Tensor(float32, cpu, requires_grad)"
    assert contract_of(lambda t: (t * weight).detach(), torch.ones(2), monkeypatch=monkeypatch)["returns"] == \
        "Tensor(float32, cpu)"


def test_state_restored_only_on_exception_is_seen_after_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))

    def evaluate_sloppily(m: torch.nn.Module) -> torch.Tensor:
        m.eval()
        try:
            with torch.no_grad():
                out = m(torch.ones(1, 2))
        except Exception:
            m.train()
            raise
        m.train()
        return out

    def evaluate(m: torch.nn.Module) -> torch.Tensor:
        m.eval()
        try:
            with torch.no_grad():
                return m(torch.ones(1, 2))
        finally:
            m.train()

    def evaluate_listing(m: torch.nn.Module) -> torch.Tensor:  # round 60: every other BaseException left out
        m.eval()
        try:
            with torch.no_grad():
                out = m(torch.ones(1, 2))
        except (Exception, KeyboardInterrupt):
            m.train()
            raise
        m.train()
        return out

    sloppy = contract_of(evaluate_sloppily, model, interrupt=model[0], interrupt_root=model, monkeypatch=monkeypatch)
    model.train()
    listing = contract_of(evaluate_listing, model, interrupt=model[0], interrupt_root=model, monkeypatch=monkeypatch)
    model.train()
    careful = contract_of(evaluate, model, interrupt=model[0], interrupt_root=model, monkeypatch=monkeypatch)
    assert sloppy["after an interrupt"]["training flags changed"] is True
    assert listing["after an interrupt"]["training flags changed"] is False
    assert listing["after an interrupt"]["training flags changed (another BaseException)"] is True
    untouched = {"interrupt reached the caller": True, "modes changed": [], "training flags changed": False,
                 "requires_grad changed": False, "hooks left behind": 0}
    assert careful["after an interrupt"] == {**untouched, **{f"{key} (another BaseException)": value
                                                             for key, value in untouched.items()}}


def test_a_result_holding_tensors_goes_item_by_item_and_meta_as_its_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: dict[str, Any] = {}
    monkeypatch.setattr(ptchecks, "emit", lambda name, value, **_: sent.__setitem__(name, value))
    ptchecks.emit_tree("r", (torch.ones(1), [torch.empty(2, 3, device="meta")], 4))
    assert set(sent) == {"r[0]", "r[1][0]", "r[2]"}
    assert sent["r[1][0]"] == {"meta tensor": [[2, 3], "torch.float32"]} and sent["r[2]"] == 4


def test_a_tolerance_reaches_every_output_of_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: dict[str, Any] = {}
    monkeypatch.setattr(ptchecks, "emit", lambda name, value, **kw: sent.__setitem__(name, kw))
    ptchecks.emit_tree("r", (torch.ones(1), 0.5), rtol=1e-5, atol=1e-6)
    ptchecks.emit_tree("plain", 0.25, rtol=1e-5, atol=1e-6)
    assert sent == {name: {"rtol": 1e-5, "atol": 1e-6} for name in ("r[0]", "r[1]", "plain")}



def test_a_dict_s_key_order_is_graded_unless_the_part_leaves_it_free(monkeypatch: pytest.MonkeyPatch) -> None:
    def groups(order: list[str]) -> Callable[[torch.Tensor], list[dict[str, object]]]:
        return lambda t: [{key: {"params": [t], "decay": 0.0}[key] for key in order}]

    forward, backward = groups(["params", "decay"]), groups(["decay", "params"])
    x = torch.ones(2)
    assert contract_of(forward, x, monkeypatch=monkeypatch)["returns"] != \
        contract_of(backward, x, monkeypatch=monkeypatch)["returns"]
    assert contract_of(forward, x, key_order=False, monkeypatch=monkeypatch)["returns"] == \
        contract_of(backward, x, key_order=False, monkeypatch=monkeypatch)["returns"]
    kept = collections.OrderedDict(b=1, a=2)  # a subclass keeps its order: its exact type is graded
    assert list(contract.keys_sorted({"b": [{"d": 1, "c": 2}], "a": kept})) == ["a", "b"]
    assert list(contract.keys_sorted({"b": [{"d": 1, "c": 2}]})["b"][0]) == ["c", "d"]
    assert list(contract.keys_sorted(kept)) == ["b", "a"]


NOTEBOOK_CODE = """
def by_the_input(x):
    return torch.zeros(x.shape, device=x.device) + x


def on_the_default_device(x):
    return torch.where(x > 0, x, torch.zeros(x.shape))


def on_the_notebook_device(x):
    return x.to(device) * 2


def resets_the_default_device(x):
    torch.set_default_device(x.device)
    try:
        return torch.zeros(x.shape) + x
    finally:
        torch.set_default_device(None)  # the CPU's, not what the caller had
"""


def test_a_call_from_elsewhere_shows_tensors_made_on_the_wrong_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the default device (the CPU) and the notebook's device differ from the input's; meta stands in
    for both, and the notebook's own ``device`` is back afterwards."""
    notebook = {"torch": torch, "device": torch.device("cpu")}
    exec(NOTEBOOK_CODE, notebook)  # noqa: S102  (a notebook's globals)
    sent: dict[str, Any] = {}
    monkeypatch.setattr(ptchecks, "emit", lambda name, value, **_: sent.__setitem__(name, value))
    x = torch.tensor([1.0, -2.0])
    for name in ("by_the_input", "on_the_default_device", "on_the_notebook_device"):
        ptchecks.emit_elsewhere(name, notebook[name], x)
    assert torch.equal(sent["by_the_input"], x)
    assert sent["on_the_default_device"] == "raised RuntimeError"
    assert sent["on_the_notebook_device"] == {"meta tensor": [[2], "torch.float32"]}
    assert notebook["device"] == torch.device("cpu") and torch.empty(1).device.type == "cpu"
    left = "the caller's default device afterwards"
    assert sent[f"by_the_input: {left}"] == "meta"
    ptchecks.emit_elsewhere("resets", notebook["resets_the_default_device"], x)
    assert torch.equal(sent["resets"], x) and sent[f"resets: {left}"] == "cpu"
    assert torch.empty(1).device.type == "cpu"
    # The notebook's device only: what follows the default device, as torch's own functions do, stays right.
    for name in ("on_the_default_device", "on_the_notebook_device"):
        ptchecks.emit_elsewhere(name, notebook[name], x, default_device=False)
    assert torch.equal(sent["on_the_default_device"], torch.tensor([1.0, 0.0]))
    assert sent["on_the_notebook_device"] == {"meta tensor": [[2], "torch.float32"]}
    assert notebook["device"] == torch.device("cpu")


# ------------------------------------------------------------------------------------------ domains

EVERYTHING = {"dtypes": (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.uint8),
              "layouts": domains.LAYOUTS, "sizes": domains.SIZES, "values": domains.VALUES, "devices": domains.DEVICES}


def test_cases_cover_every_declared_family_and_every_pair_of_levels() -> None:
    domain = ptchecks.Domain(seed=3, device="cpu", **EVERYTHING)
    cases = domain.cases((2, 3, 4))
    assert set().union(*(case.families for case in cases)) == domain.families
    seen = {(case.dtype, case.layout, case.size) for case in cases}
    for dtype, layout in itertools.product(EVERYTHING["dtypes"], ("contiguous", *domains.LAYOUTS)):
        assert any(d == dtype and lay == layout for d, lay, _ in seen)
    assert len({case.label for case in cases}) == len(cases)


def test_pairs_of_value_families_are_covered_by_inputs_that_have_values() -> None:
    """An empty or meta input covers its size class or device, never a (dtype, values) or (dtype, layout) pair."""
    domain = ptchecks.Domain(seed=3, device="cpu", **EVERYTHING)
    with_values = [case for case in domain.cases((2, 3, 4)) if case.size[0] != "empty" and case.device != "meta"]
    levels = {"dtype": EVERYTHING["dtypes"], "layout": ("contiguous", *domains.LAYOUTS), "values": ("random", *domains.VALUES)}
    for first, second in itertools.combinations(levels, 2):
        for a, b in itertools.product(levels[first], levels[second]):
            if "inf/nan" in (a, b) and torch.uint8 in (a, b) or "inf/nan" in (a, b) and torch.int32 in (a, b):
                continue  # special values need a floating dtype
            assert any(getattr(case, first) == a and getattr(case, second) == b for case in with_values), (a, b)


def test_nothing_undeclared_is_generated() -> None:
    domain = ptchecks.Domain(seed=3, device="cpu", dtypes=(torch.float32,), sizes=("size-1",))
    cases = domain.cases((2, 3))
    assert {case.label for case in cases} == {"float32", "float32, size-1 dim 0", "float32, size-1 dim 1"}
    with pytest.raises(ValueError, match="unknown layout"):
        ptchecks.Domain(seed=1, device="cpu", dtypes=(torch.float32,), layouts=("sparse",))


def test_fixed_dimensions_keep_their_size() -> None:
    domain = ptchecks.Domain(seed=3, device="cpu", dtypes=(torch.float32,), sizes=("empty",))
    assert {case.shape((2, 3, 4)) for case in domain.cases((2, 3, 4), fixed_dims=(-1,))} == {
        (2, 3, 4), (0, 3, 4), (2, 0, 4)}


@pytest.mark.parametrize(("layout", "contiguous"), [("contiguous", True), ("non-contiguous", False), ("permuted", False)])
def test_made_tensors_have_the_case_s_layout_dtype_and_values(layout: str, contiguous: bool) -> None:
    domain = ptchecks.Domain(seed=5, device="cpu", dtypes=(torch.float16,), values=("inf/nan",),
                             layouts=tuple(x for x in domains.LAYOUTS if x == layout))
    case = next(c for c in domain.cases((3, 4)) if c.layout == layout and c.values == "inf/nan")
    tensor = domain.make(case, (3, 4))
    assert (tensor.shape, tensor.dtype, tensor.is_contiguous()) == ((3, 4), torch.float16, contiguous)
    assert tensor.isinf().sum() == 2 and tensor.isnan().sum() == 1
    assert ((tensor == 0) & tensor.signbit()).sum() == 1  # a -0.0, which only a bitwise comparison tells from 0.0


def test_a_case_s_tensors_take_the_same_layout_and_mixed_ones() -> None:
    """Round 28: every case gave all of its tensors one layout, so a fast path for a contiguous input that
    assumed its index tensor contiguous too never met a sliced index, and kept its marks."""
    domain = ptchecks.Domain(seed=7, device="cpu", dtypes=(torch.float32, torch.float64),
                             layouts=("non-contiguous", "permuted"))
    cases = domain.cases((4, 3))
    assert {(case.layout, case.others) for case in cases} == set(
        itertools.product(("contiguous", *domains.LAYOUTS), domains.OTHERS))
    seen = set()
    for case in cases:
        first, index = domain.make(case, (4, 3)), domain.make(case, (4,), dtype=torch.int64, index=True)
        seen.add((case.others, first.is_contiguous(), index.is_contiguous()))
    assert {("mixed", True, False), ("mixed", False, True), ("same", False, False), ("same", True, True)} <= seen
    assert domain.make(cases[0], (2,)).is_contiguous() == (cases[0].layout == "contiguous")  # a third tensor


def test_ties_are_small_integers_with_zeros_of_both_signs_and_meta_has_no_values() -> None:
    domain = ptchecks.Domain(seed=5, device="cpu", dtypes=(torch.float32, torch.int16), values=("ties",),
                             devices=("meta",))
    cases = domain.cases((50,))
    ties = domain.make(next(c for c in cases if c.values == "ties" and c.dtype.is_floating_point), (50,))
    assert set(ties.tolist()) <= {-2, -1, 0, 1, 2} and len(set(ties.tolist())) > 2
    zeros = ties[ties == 0]
    assert zeros.signbit().any() and not zeros.signbit().all()  # round 26: -0.0 rewritten to 0.0 went unseen
    assert domain.make(next(c for c in cases if c.device == "meta"), (4,)).is_meta


def test_bfloat16_values_reach_past_float16_s_range_unless_bounded() -> None:
    """Round 57: bfloat16 computed in float16 kept its marks, every generated value and result staying below 65504.
    bfloat16's unbounded draws are scaled by a power of two: past float16's range, rounded as the draws were."""
    domain = ptchecks.Domain(seed=5, device="cpu", dtypes=(torch.bfloat16, torch.float32))
    cases = {case.dtype: case for case in domain.cases((6, 8))}
    drawn = domain.make(cases[torch.bfloat16], (6, 8))
    assert drawn.abs().max() > torch.finfo(torch.float16).max
    assert drawn.half().isinf().any() and (drawn.float() / 2**16).abs().max() <= 9  # the draws, scaled
    assert domain.make(cases[torch.bfloat16], (6, 8), low=-9, high=9).abs().max() <= 9
    assert domain.make(cases[torch.float32], (6, 8)).abs().max() <= 9


def test_the_same_seed_and_order_give_the_same_inputs_and_leave_the_global_generator_alone() -> None:
    state = torch.get_rng_state()
    runs = []
    for _ in range(2):
        domain = ptchecks.Domain(seed=9, device="cpu", dtypes=(torch.float32, torch.int32))
        runs.append([domain.make(case, (3,)) for case in domain.cases((3,)) for _ in range(2)])
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))
    assert not torch.equal(runs[0][0], runs[0][1])  # two inputs of one case differ
    assert torch.equal(torch.get_rng_state(), state)


def test_a_structure_is_named_only_when_declared() -> None:
    domain = ptchecks.Domain(seed=1, device="cpu", dtypes=(torch.float32,), structures=("tied weight",))
    assert domain.structure("tied weight") == "tied weight" and "tied weight" in domain.families
    with pytest.raises(ValueError, match="not a module structure this Domain declares"):
        domain.structure("shared module")
    with pytest.raises(ValueError, match="unknown module structure"):
        ptchecks.Domain(seed=1, device="cpu", dtypes=(torch.float32,), structures=("a forest",))


def test_nonempty_dimensions_may_be_one_but_never_zero_and_index_tensors_keep_their_range() -> None:
    domain = ptchecks.Domain(seed=3, device="cpu", dtypes=(torch.float32,), sizes=("empty", "size-1"),
                             values=("ties", "inf/nan"))
    cases = domain.cases((2, 3), nonempty_dims=(1,))
    assert {case.shape((2, 3)) for case in cases} == {(2, 3), (0, 3), (1, 3), (2, 1)}
    for case in cases:
        lengths = domain.make(case, (40,), dtype=torch.int64, low=1, high=4, index=True)
        assert lengths.min() >= 1 and lengths.max() <= 3
    with pytest.raises(ValueError, match="no tensor cases"):
        ptchecks.Domain(seed=3, device="cpu", dtypes=(), sizes=("empty",)).cases((2,))


def test_a_non_leaf_input_is_recorded_without_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    leaf = torch.ones(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        contract = contract_of(lambda t: t * 2, leaf * 3, monkeypatch=monkeypatch)
    assert contract["inputs changed"] == []


def _resets_to_defaults(t: torch.Tensor) -> torch.Tensor:
    """Switches modes for its work, then sets them to their defaults instead of to what it found."""
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True)
    out = t * 2
    torch.set_grad_enabled(True)
    torch.use_deterministic_algorithms(False)
    return out


def test_modes_set_back_to_their_defaults_are_seen_from_an_unusual_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second call comes with grad mode off and deterministic algorithms on: a reset to the defaults shows."""
    try:
        seen = contract_of(_resets_to_defaults, torch.ones(2), monkeypatch=monkeypatch)["modes changed"]
    finally:
        torch.set_grad_enabled(True)
        torch.use_deterministic_algorithms(False)
    # torch mirrors deterministic algorithms in torch._inductor.config.deterministic: seen there too
    assert seen == ["deterministic algorithms", "grad mode", "torch's configuration modules"]
    threads = torch.get_num_threads()
    try:
        pinned = contract_of(lambda t: torch.set_num_threads(1) or t * 2, torch.ones(2), monkeypatch=monkeypatch)
    finally:
        torch.set_num_threads(threads)
    assert pinned["modes changed"] == ["threads"]


def test_the_unusual_caller_keeps_grad_mode_for_a_part_that_computes_gradients(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A function that calls backward works from both calls, and the modes are the caller's again after."""
    w = torch.ones(2, requires_grad=True)

    def gradient(x: torch.Tensor) -> torch.Tensor:
        (w * x).sum().backward()
        return w.grad.clone()

    contract = contract_of(gradient, torch.ones(2), grad_needed=True, monkeypatch=monkeypatch)
    assert contract["modes changed"] == [] and contract["second call"] == "a different result"  # grads add up
    assert torch.is_grad_enabled() and not torch.are_deterministic_algorithms_enabled()


def test_a_second_call_with_other_threads_may_round_differently(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unusual caller's thread count can reorder a float sum: rounding is the same result, kept state is not."""
    rounding = iter([torch.tensor([1.0]), torch.tensor([1.0 + 2**-23]), torch.tensor([1.0])])
    assert contract_of(lambda t: next(rounding), torch.ones(1), monkeypatch=monkeypatch)["second call"] == "same result"
    drifting = iter([torch.tensor([1.0]), torch.tensor([1.001]), torch.tensor([1.0])])
    assert contract_of(lambda t: next(drifting), torch.ones(1),
                       monkeypatch=monkeypatch)["second call"] == "a different result"
    counts = iter([torch.tensor([4]), torch.tensor([5]), torch.tensor([4])])
    assert contract_of(lambda t: next(counts), torch.ones(1), monkeypatch=monkeypatch)["second call"] == "a different result"


def test_a_private_attribute_set_by_a_call_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """``self._last = ...`` is state kept between calls as much as ``self.last``; a module's own bookkeeping is not."""

    class Remembers(torch.nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = super().forward(x)
            self._last_routed = (out > 0).detach()
            return out

    model = Remembers(2, 1)
    assert contract_of(lambda m: m(torch.ones(3, 2)), model,
                       monkeypatch=monkeypatch)["inputs changed"] == ["argument 0 (attributes)"]
    plain = torch.nn.Linear(2, 1)
    hooked = contract_of(lambda m: m.register_forward_hook(lambda *a: None).remove() or m(torch.ones(3, 2)),
                         plain, monkeypatch=monkeypatch)
    assert hooked["inputs changed"] == []


class _Unguarded(str):
    """A round's attack: a ``str`` subclass equal to torch's mark, with a ``__dict__`` to keep state in."""


def test_state_kept_anywhere_a_callers_object_holds_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """State a call keeps one level down or more (round 18: a list inside a dict, a mark that is a subclass of
    ``str``) is a change, wherever it is kept: in a container, an object's fields or slots, a closure, a class
    attribute changed through ``self``, an attribute of a parameter; a structure too large to follow is one too."""

    class Holder:
        __slots__ = ("items",)

        def __init__(self) -> None:
            self.items: list[object] = []

    class Keeps(torch.nn.Linear):
        seen: list[object] = []  # changed through self: shared by every instance

        def __init__(self) -> None:
            super().__init__(2, 1)
            self.history = {"inputs": []}
            self.holder = Holder()
            self.weight.note = [0]
            cache: list[object] = []
            self.remember = cache.append  # a bound method of a list: the list is its __self__
            self.big = list(range(contract._RECORD_LIMIT + 1))

    def keeping(where: Callable[[Keeps, torch.Tensor], object]) -> Callable[[Keeps], torch.Tensor]:
        def forward(m: Keeps) -> torch.Tensor:
            x = torch.ones(3, 2)
            where(m, x)
            return m(x)
        return forward

    places = {
        "a nested list": lambda m, x: m.history["inputs"].append(x),
        "a slot": lambda m, x: m.holder.items.append(x),
        "a class attribute": lambda m, x: m.seen.append(x),
        "a parameter's attribute": lambda m, x: m.weight.note.append(x),
        "a bound method's object": lambda m, x: m.remember(x),
        "a mark that is a subclass of str": lambda m, x: setattr(m.weight, "_dynamo_static_input_type",
                                                                 _Unguarded("unguarded")),
    }
    for place, where in places.items():
        model = Keeps()
        del model.big
        changed = contract_of(keeping(where), model, monkeypatch=monkeypatch)["inputs changed"]
        assert changed and set(changed) <= {"argument 0 (attributes)", "argument 0 (parameters)"}, place
    assert contract_of(keeping(lambda m, x: None), Keeps(), monkeypatch=monkeypatch)["inputs changed"] == [
        "argument 0 (attributes)"], "a structure too large to follow counts as changed"
    unchanged = Keeps()
    del unchanged.big
    unchanged.history["inputs"].append(unchanged.history)  # a cycle ends
    assert contract_of(keeping(lambda m, x: None), unchanged, monkeypatch=monkeypatch)["inputs changed"] == []


_KEPT: list[object] = []  # a notebook's global, which a function below keeps its inputs in


def _keeps_in_a_global(t: torch.Tensor) -> torch.Tensor:
    _KEPT.append(t)
    return t * 2


def test_state_kept_outside_the_arguments_and_a_cached_result_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 19: a global list, a memo (``lru_cache``) and a generator kept inputs or memory between calls, and a
    memo handed the caller the first call's tensor again; the function's closure, defaults and the globals its
    code names are recorded like an argument's attributes, and a second result that is the first's is seen."""
    memo = functools.lru_cache(maxsize=None)(lambda t: t * 2)

    def counter() -> Iterator[int]:
        seen = []
        while True:
            seen.append((yield len(seen)))

    calls = counter()
    next(calls)
    ticks = itertools.count()
    for function in (_keeps_in_a_global, lambda t: calls.send(t) * 0 + t, lambda t: next(ticks) * 0 + t):
        assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"], function
    assert contract_of(memo, torch.ones(2), monkeypatch=monkeypatch)["second call"] == "the first call's result again"
    # What the first call alone sets is left free (round 21: a global generator seeded again at each call, a
    # constant built on the first call, both right answers)
    shuffler, table = torch.Generator(), {}

    def reseeded(t: torch.Tensor) -> torch.Tensor:
        shuffler.manual_seed(3)
        return t[torch.randperm(t.numel(), generator=shuffler)]

    def lazy_constant(t: torch.Tensor) -> torch.Tensor:
        table.setdefault("scale", torch.tensor(2.0))
        return t * table["scale"]

    for function in (reseeded, lazy_constant):
        assert not contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"]
    allowed = contract_of(lambda t: t[:1], torch.ones(2), view_allowed=True, monkeypatch=monkeypatch)
    assert allowed["second call"] == "same result"  # a view of the input each time: not a result kept


def test_state_in_a_meta_storage_s_size_and_a_generator_s_place_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 37: a meta tensor's storage grown by a byte at each call (no values, no version counter), and a
    generator without locals advanced at each call (thirty ``yield`` in a row), counted the calls unseen."""
    calls_seen = torch.empty(0, device="meta")

    def storage_counter(t: torch.Tensor) -> torch.Tensor:
        storage = calls_seen.untyped_storage()
        storage.resize_(storage.nbytes() + 1)
        return t * 2

    def numbers() -> Iterator[int]:
        yield 1
        yield 2
        yield 3
        yield 4
        yield 5

    ticks = numbers()

    def place_counter(t: torch.Tensor) -> torch.Tensor:
        next(ticks, None)
        return t * 2

    for function in (storage_counter, place_counter):
        assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"], function


def test_the_recorder_runs_no_method_of_a_value_s_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 19: a dict whose ``items()`` and a list whose ``__iter__`` showed nothing hid what was appended; a
    module held in a plain list (not a child) and a helper object's class attribute were recorded by identity."""

    class Quiet(dict):
        def items(self):  # noqa: ANN202
            return []

    class Silent(list):
        def __iter__(self):  # noqa: ANN204
            return iter(())

    class Store(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kept: list[object] = []

    class History:
        inputs: list[object] = []

    class Keeps(torch.nn.Linear):
        def __init__(self) -> None:
            super().__init__(2, 1)
            self.quiet, self.silent = Quiet(inputs=[]), Silent()
            self.stores, self.history = [Store()], History()

    places = {"a dict subclass": lambda m, x: m.quiet["inputs"].append(x),
              "a list subclass": lambda m, x: m.silent.append(x),
              "a module in a list": lambda m, x: m.stores[0].kept.append(x),
              "a helper's class attribute": lambda m, x: m.history.inputs.append(x)}
    for place, where in places.items():
        def forward(m: Keeps, where: Callable[[Keeps, torch.Tensor], object] = where) -> torch.Tensor:
            x = torch.ones(3, 2)
            where(m, x)
            return m(x)
        assert contract_of(forward, Keeps(), monkeypatch=monkeypatch)["inputs changed"] == [
            "argument 0 (attributes)"], place


def test_state_in_torch_objects_iterators_hooks_and_second_calls_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 20: state kept in a torch optimizer's ``state`` or a dataset (torch's objects were recorded by their
    type), in a hook on a global tensor, in an iterator's position, or only when called from the unusual
    caller; and the first result's memory handed back from another start (``from_numpy`` of a slice)."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)
    store = torch.utils.data.ConcatDataset([[0]])
    anchor = torch.zeros(1, requires_grad=True)
    position = iter(range(100))

    def hooked(t: torch.Tensor) -> torch.Tensor:
        anchor.register_hook(lambda g, kept=t: g)
        return t * 2

    def only_without_grad(t: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():
            _KEPT.append(t)
        return t * 2

    for function in (lambda t: optimizer.state.setdefault("kept", []).append(t) or t * 2,
                     lambda t: store.datasets.append(t) or t * 2, hooked,
                     lambda t: next(position) * 0 + t, only_without_grad):
        assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"], function
    base = torch.arange(5.0)
    calls = iter([torch.from_numpy(base.numpy()[1:]), base[1:], base[1:].clone()])  # the same bytes, two starts
    assert contract_of(lambda t: next(calls), torch.ones(2), monkeypatch=monkeypatch)["second call"] == (
        "the first call's result again")


class _KeepsTheLast:
    """Keeps its last result (a new tensor at each call): what it holds changes, and does not grow."""

    def __init__(self) -> None:
        self.last: torch.Tensor | None = None

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        self.last = t * 2
        return self.last


class _KeepsEvery(_KeepsTheLast):
    """Round 92: keeps every result, as a FeatureExtractor that kept each call's features did."""

    def __init__(self) -> None:
        super().__init__()
        self.every: list[torch.Tensor] = []

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        self.every.append(super().__call__(t))
        return self.last


class _KeepsEveryInOneTensor(_KeepsTheLast):
    """Round 93: every result concatenated into one tensor: one value, growing in elements."""

    def __init__(self) -> None:
        super().__init__()
        self.every = torch.empty(0)

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        self.every = torch.cat([self.every, super().__call__(t)])
        return self.last


class _KeepsEveryInOneString(_KeepsTheLast):
    """Round 93: a log of every call in one string."""

    def __init__(self) -> None:
        super().__init__()
        self.log = ""

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        self.log += f"{t.sum().item()};"
        return super().__call__(t)


class _KeepsEveryInOneInt(_KeepsTheLast):
    """Round 94: every result's bytes shifted into one Python int."""

    def __init__(self) -> None:
        super().__init__()
        self.history = 0

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        self.history = (self.history << 64) | 1
        return super().__call__(t)


def test_state_that_grows_at_each_call_is_told_from_a_last_result_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = contract_of(_KeepsTheLast(), torch.ones(2), monkeypatch=monkeypatch)
    assert kept["state kept by the function"] and not kept["state grows at each call"]
    for grows in (_KeepsEvery(), _KeepsEveryInOneTensor(), _KeepsEveryInOneString(), _KeepsEveryInOneInt()):
        grown = contract_of(grows, torch.ones(2), monkeypatch=monkeypatch)
        assert grown["state kept by the function"] and grown["state grows at each call"], type(grows).__name__


def test_torch_compile_s_own_bookkeeping_is_not_state_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile's wrapper names torch's compile counters and timings, which change as it compiles, whoever
    calls; a server compiled on its first call keeps no state of its own (round 20's lead)."""
    def backend(graph_module, example_inputs):  # noqa: ANN001, ANN202
        return graph_module.forward

    torch._dynamo.reset()
    server = torch.compile(lambda t: t * 2, backend=backend, dynamic=True)
    assert not contract_of(server, torch.ones(3), monkeypatch=monkeypatch)["state kept by the function"]
    torch._dynamo.reset()


def test_a_node_a_relabelled_function_stacks_and_denormals_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 22: state in a graph node held on its own, in a function relabelled as torch's own by
    ``functools.wraps`` (its globals were skipped), a saved-tensors hook left entered by an earlier unchecked
    call of the cell, and denormals left flushed to zero."""
    node = (torch.ones(1, requires_grad=True) * 2).grad_fn
    log: list[object] = []

    @functools.wraps(torch.broadcast_shapes)
    def relabelled(t: torch.Tensor) -> torch.Tensor:
        log.append(t)
        return t * 2

    for function in (lambda t: node.metadata.setdefault("kept", []).append(t) or t * 2, relabelled):
        assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"], function
    contract.mark_cell_start()
    hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    hooks.__enter__()  # left entered by the cell's earlier code
    try:
        assert "saved tensors hooks" in contract_of(lambda t: t * 2, torch.ones(2), monkeypatch=monkeypatch)[
            "modes changed"]
    finally:
        hooks.__exit__(None, None, None)
        contract._CELL_START.clear()
    try:
        flushed = contract_of(lambda t: torch.set_flush_denormal(True) and t * 2, torch.ones(2),
                              monkeypatch=monkeypatch)
        assert "flush denormals" in flushed["modes changed"]
    finally:
        torch.set_flush_denormal(False)


#: How a test flips each of torch's process-wide setters away from its default, by the setter's name. A new
#: setter in a new torch release fails ``test_every_torch_setting_a_call_can_leave_changed_is_seen`` until
#: it is here (and the contract sees it).
SETTING_FLIPS = {
    "torch.set_anomaly_enabled": "torch.set_anomaly_enabled(True)",
    "torch.set_autocast_cache_enabled": "torch.set_autocast_cache_enabled(False)",
    "torch.set_autocast_cpu_dtype": "torch.set_autocast_cpu_dtype(torch.float16)",
    "torch.set_autocast_cpu_enabled": "torch.set_autocast_cpu_enabled(True)",
    "torch.set_autocast_dtype": "torch.set_autocast_dtype('xla', torch.float16)",
    "torch.set_autocast_enabled": "torch.set_autocast_enabled('mps', True)",
    "torch.set_autocast_gpu_dtype": "torch.set_autocast_gpu_dtype(torch.bfloat16)",
    "torch.set_autocast_ipu_dtype": "torch.set_autocast_ipu_dtype(torch.bfloat16)",
    "torch.set_autocast_ipu_enabled": "torch.set_autocast_ipu_enabled(True)",
    "torch.set_autocast_xla_dtype": "torch.set_autocast_xla_dtype(torch.float16)",
    "torch.set_autocast_xla_enabled": "torch.set_autocast_xla_enabled(True)",
    "torch.set_default_device": "torch.set_default_device('meta')",
    "torch.set_default_dtype": "torch.set_default_dtype(torch.float64)",
    "torch.set_default_tensor_type": "torch.set_default_tensor_type(torch.FloatTensor)",
    "torch.set_deterministic_debug_mode": "torch.set_deterministic_debug_mode(1)",
    "torch.use_deterministic_algorithms": "torch.use_deterministic_algorithms(True)",
    "torch.set_float32_matmul_precision": "torch.set_float32_matmul_precision('medium')",
    "torch.set_flush_denormal": "torch.set_flush_denormal(True)",
    "torch.set_grad_enabled": "torch.set_grad_enabled(False)",
    "torch.set_num_threads": "torch.set_num_threads(torch.get_num_threads() + 1)",
    "torch.set_printoptions": "torch.set_printoptions(precision=9)",
    "torch.set_warn_always": "torch.set_warn_always(True)",
    "torch.autograd.set_detect_anomaly": "torch.autograd.set_detect_anomaly(True)",
    "torch.autograd.set_grad_enabled": "torch.autograd.set_grad_enabled(not torch.is_grad_enabled())",
    "torch.autograd.set_multithreading_enabled": "torch.autograd.set_multithreading_enabled(False)",
    "torch.backends.cudnn.allow_tf32": "torch.backends.cudnn.allow_tf32 = False",
    "torch.backends.cudnn.benchmark": "torch.backends.cudnn.benchmark = True",
    "torch.backends.cudnn.deterministic": "torch.backends.cudnn.deterministic = True",
    "torch.backends.cudnn.enabled": "torch.backends.cudnn.enabled = False",
    "torch.backends.cudnn.fp32_precision": "torch.backends.cudnn.fp32_precision = 'tf32'",
    "torch.backends.cudnn.depthwise_kernel": "torch.backends.cudnn.depthwise_kernel = 'cudnn'",
    "torch.backends.mkldnn.deterministic": "torch.backends.mkldnn.deterministic = True",
    "torch.backends.mkldnn.enabled": "torch.backends.mkldnn.enabled = False",
    "torch.backends.mkldnn.fp32_precision": "torch.backends.mkldnn.fp32_precision = 'bf16'",
    "torch.backends.miopen.immediate": "torch.backends.miopen.immediate = True",
    "torch.backends.fp32_precision": "torch.backends.fp32_precision = 'tf32'",
    "torch.backends.cuda.matmul": "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False",
    "torch.backends.cuda.enable_flash_sdp": "torch.backends.cuda.enable_flash_sdp(False)",
    "torch.backends.cuda.enable_mem_efficient_sdp": "torch.backends.cuda.enable_mem_efficient_sdp(False)",
    "torch.backends.cuda.enable_math_sdp": "torch.backends.cuda.enable_math_sdp(False)",
    "torch.backends.cuda.enable_cudnn_sdp": "torch.backends.cuda.enable_cudnn_sdp(False)",
    "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp":
        "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)",
    "torch.backends.cuda.preferred_linalg_library": "torch.backends.cuda.preferred_linalg_library('magma')",
    "torch.backends.cuda.preferred_blas_library": "torch.backends.cuda.preferred_blas_library('cublaslt')",
    "torch.backends.cuda.preferred_rocm_fa_library": "torch.backends.cuda.preferred_rocm_fa_library('ck')",
    "torch.backends.mha.set_fastpath_enabled": "torch.backends.mha.set_fastpath_enabled(False)",
    "torch.backends.nnpack.set_flags": "torch.backends.nnpack.set_flags(False)",
    "torch.backends.opt_einsum.enabled": "torch.backends.opt_einsum.enabled = False",
    "torch.backends.opt_einsum.strategy": "torch.backends.opt_einsum.strategy = 'greedy'",
    "torch.backends.quantized.engine": "torch.backends.quantized.engine = 'qnnpack'",
    "torch.utils.deterministic.fill_uninitialized_memory": "torch.utils.deterministic.fill_uninitialized_memory = False",
    "torch.compiler.set_stance": "torch.compiler.set_stance('force_eager')",
    "torch.compiler.set_default_backend": "torch.compiler.set_default_backend('eager')",
    "torch.jit.enable_onednn_fusion": "torch.jit.enable_onednn_fusion(True)",
    "torch.jit.set_fusion_strategy": "torch.jit.set_fusion_strategy([('STATIC', 5)])",
    "torch.sparse.check_sparse_tensor_invariants.enable": "torch.sparse.check_sparse_tensor_invariants.enable()",
    "torch.autograd.graph.disable_saved_tensors_hooks":
        "kept = torch.autograd.graph.disable_saved_tensors_hooks('no'); kept.__enter__()",
    "torch.overrides.TorchFunctionMode": "class Passing(torch.overrides.TorchFunctionMode):\n"
                                         "    def __torch_function__(self, f, types, args=(), kwargs=None):\n"
                                         "        return f(*args, **(kwargs or {}))\n"
                                         "Passing().__enter__()",
    "torch.autograd.profiler.profile": "torch.autograd.profiler.profile().__enter__()",
    **{f"torch.nn.modules.module.register_module_{kind}": f"torch.nn.modules.module.register_module_{kind}(lambda *a: None)"
       for kind in ("backward_hook", "buffer_registration_hook", "forward_hook", "forward_pre_hook",
                    "full_backward_hook", "full_backward_pre_hook", "module_registration_hook",
                    "parameter_registration_hook")},
    **{f"torch.optim.optimizer.register_optimizer_step_{kind}":
       f"sys.modules['torch.optim.optimizer'].register_optimizer_step_{kind}(lambda *a: None)"
       for kind in ("pre_hook", "post_hook")},
}

#: Setters the contract need not see, and why.
SETTINGS_NOT_COMPARED = {
    "torch.set_rng_state": "the global generator: the contract's own 'global RNG drawn'",
    "torch.set_num_interop_threads": "torch allows it once, before any inter-op work: a kernel's first cell",
    "torch.compiler.set_enable_guard_collectives": "acts only between the processes of a distributed job",
    "torch.jit.set_module": "sets a class's __module__, not a setting",
    "torch.backends.mkldnn.allow_tf32": "TF32 on oneDNN is for Intel GPUs: a CPU build ignores it (it stays None); "
                                        "it is in the contract's oneDNN flags all the same",
    **{f"torch.backends.python_native.{name}": "switches operations of GPU kernel languages (triton, CuTe DSL), "
       "none of which a CPU grader has (available_dsls is empty)" for name in ("enable_operations",
                                                                           "enable_dispatch_keys")},
}

_SETTINGS_SCRIPT = r"""
import json, os, sys, warnings
import torch, torch.jit, torch.backends.python_native
from ptchecks import contract
warnings.simplefilter("ignore")
flips = json.loads(sys.argv[1])

def setters():
    # every public setter torch offers: its process-wide set_* functions, the flags of torch.backends
    found = [f"torch.{n}" for n in dir(torch) if n.startswith("set_") or n == "use_deterministic_algorithms"]
    found += [f"torch.autograd.{n}" for n in dir(torch.autograd) if n.startswith("set_")]
    found += [f"torch.compiler.{n}" for n in dir(torch.compiler) if n.startswith("set_")]
    found += [f"torch.jit.{n}" for n in dir(torch.jit) if n.startswith(("set_", "enable_"))]
    found += [f"torch.nn.modules.module.{n}" for n in dir(torch.nn.modules.module) if n.startswith("register_module_")]
    found += [f"torch.optim.optimizer.{n}" for n in dir(sys.modules["torch.optim.optimizer"])
              if n.startswith("register_optimizer_")]
    for name in sorted(m for m in sys.modules if m.startswith("torch.backends.") and m.count(".") == 2):
        module = sys.modules[name]
        found += [f"{name}.{n}" for n in dir(module) if n.startswith(("set_", "enable_", "allow_", "preferred_"))
                  and callable(getattr(module, n))]
        found += [f"{name}.{n}" for n, item in vars(type(module)).items()
                  if isinstance(item, torch.backends.ContextProp)]
    found += [f"torch.backends.{n}" for n, item in vars(type(torch.backends)).items()
              if isinstance(item, torch.backends.ContextProp)]
    return sorted(set(found))

contract.put_back_quiet_settings()  # the baseline: the settings as found now
seen = {}
for name, flip in flips.items():
    before = contract._modes()
    try:
        exec(flip)
    except RuntimeError as refused:  # a setting this build cannot change (MAGMA's linear algebra on a CPU build)
        seen[name] = f"refused here: {refused}"[:100]
        continue
    seen[name] = contract._changed(before, contract._modes())
    contract.put_back_quiet_settings()
print(json.dumps({"setters": setters(), "seen": seen}), flush=True)
os._exit(0)  # the profiler left entered crashes an orderly exit
"""


def test_every_torch_setting_a_call_can_leave_changed_is_seen() -> None:
    """Round 23: a function left torch's print options, the attention fast path, ``warn_always`` and autograd's
    multithreading changed, which the contract did not compare. Every public setter torch offers is flipped
    here (in a process of its own: the flips are not undone) and must change what the contract compares; a
    setter torch adds in a later release fails here until it has a flip and the contract sees it."""
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _SETTINGS_SCRIPT, json.dumps(SETTING_FLIPS)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])
    unknown = sorted(set(found["setters"]) - set(SETTING_FLIPS) - set(SETTINGS_NOT_COMPARED))
    assert not unknown, f"torch setters with no flip here and maybe not seen by the contract: {unknown}"
    unseen = sorted(name for name, changed in found["seen"].items() if not changed)
    assert not unseen, f"flipped, and the contract saw nothing changed: {unseen}"


_LARGE = torch.zeros(500_000)[:1]  # a one-element view of a 2 MB storage


def _counts_in_a_library_dict(t: torch.Tensor) -> torch.Tensor:
    table = torch.ao.quantization.quantization_mappings.DEFAULT_STATIC_QUANT_MODULE_MAPPINGS
    calls = table.setdefault(0x5EED, {})
    calls[0] = calls.get(0, 0) + 1
    return t * 2


def _counts_through_an_import(t: torch.Tensor) -> torch.Tensor:
    import torch.ao.quantization.quantization_mappings as mappings

    calls = getattr(mappings, "DEFAULT_QAT_MODULE_MAPPINGS").setdefault(0x5EED, {})
    calls[0] = calls.get(0, 0) + 1
    return t * 2


def _counts_beyond_a_large_view(t: torch.Tensor) -> torch.Tensor:
    _LARGE.data.as_strided((1,), (1,), 499_999).add_(1)
    return t * 2


def test_state_in_a_library_module_a_large_storage_and_a_second_call_s_inputs_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 23: a count kept in a public dict of a torch module (reached by attribute, by ``getattr`` and by an
    import inside the function), in the last bytes of a storage past a megabyte (recorded by its size), and a
    caller's input changed by the second call only. A module's attributes that the code names are recorded;
    those it does not name, and the global generators (the contract's 'global RNG drawn'), are not."""
    try:
        for function in (_counts_in_a_library_dict, _counts_through_an_import, _counts_beyond_a_large_view):
            assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"], (
                function)
    finally:
        mappings = torch.ao.quantization.quantization_mappings
        mappings.DEFAULT_STATIC_QUANT_MODULE_MAPPINGS.pop(0x5EED, None)
        mappings.DEFAULT_QAT_MODULE_MAPPINGS.pop(0x5EED, None)
    seen: list[torch.Tensor] = []

    def wipes_on_the_second_call(a: torch.Tensor) -> torch.Tensor:
        result = a * 2
        if seen:
            a.zero_()
        seen.append(a)
        return result

    assert contract_of(wipes_on_the_second_call, torch.ones(2), monkeypatch=monkeypatch)["inputs changed"] == [
        "argument 0"]
    for honest in (lambda t: torch.nn.functional.relu(t) + torch.randn(2, generator=None) * 0,
                   lambda t: t * torch.random.default_generator.initial_seed() * 0 + t):
        assert not contract_of(honest, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"]


def test_settings_the_lab_sets_before_its_first_test_are_the_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 23: ``ptlabs.setup`` sets the print options after the checks are imported in a student's run and
    before in the reference's; against the settings of import, an honest answer lost its part."""
    monkeypatch.setattr(contract, "_BASELINE", {})
    options = torch._tensor_str.PRINT_OPTS.precision
    torch.set_printoptions(precision=options + 2)  # a lab cell, after the checks were imported
    try:
        assert contract_of(lambda t: t * 2, torch.ones(2), monkeypatch=monkeypatch)["modes changed"] == []
        assert contract_of(lambda t: torch.set_printoptions(precision=1) or t * 2, torch.ones(2),
                           monkeypatch=monkeypatch)["modes changed"] == ["print options"]
    finally:
        torch.set_printoptions(precision=options)


def test_private_torch_objects_parameter_objects_hooks_persistence_and_optimizers_are_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 24: a list kept in an object of a torch-private class (recorded by its type alone), a model's
    parameters replaced by equal copies, a ``state_dict`` pre-hook and a buffer made non-persistent left on the
    caller's model, and an optimizer argument left with another learning rate (not recorded at all)."""
    log = torch.utils.data.dataloader.ExceptionWrapper((None, None, None), where=[])
    assert contract_of(lambda t: log.where.append(1) or t * 2, torch.ones(2),
                       monkeypatch=monkeypatch)["state kept by the function"]

    def swaps(model: torch.nn.Module) -> torch.Tensor:
        old = model.weight
        model.weight = torch.nn.Parameter(old.detach().clone())
        return old.sum().detach()

    def hooks(model: torch.nn.Module) -> torch.Tensor:
        model.register_state_dict_pre_hook(lambda *args: None)
        return model.weight.sum().detach()

    def persistence(model: torch.nn.Module) -> torch.Tensor:
        model.register_buffer("running_mean", model.running_mean, persistent=False)
        return model.weight.sum().detach()

    for function, model in ((swaps, torch.nn.Linear(2, 1)), (hooks, torch.nn.Linear(2, 1)),
                            (persistence, torch.nn.BatchNorm1d(2))):
        changed = contract_of(function, model, monkeypatch=monkeypatch)["inputs changed"]
        assert changed, function
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)

    def slows(opt: torch.optim.Optimizer) -> float:
        opt.param_groups[0]["lr"] = 0.0
        return 1.0

    assert contract_of(slows, optimizer, monkeypatch=monkeypatch)["inputs changed"] == ["argument 0 (settings)"]
    assert contract_of(lambda opt: 1.0, optimizer, monkeypatch=monkeypatch)["inputs changed"] == []


def test_graphs_cache_statistics_classes_storage_around_a_slice_and_shared_memory_are_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 25: a count kept in a module-level tensor's autograd history (the tensor itself stays 0 at version 0),
    in an ``lru_cache``'s hit count, a caller's activation swapped for one of another class, a caller's base
    tensor zeroed around the slice passed in, and a result sharing the input's memory through a storage that
    starts at the slice (another address). Each is seen; the same functions without the trick are not."""
    trail = [torch.zeros((), requires_grad=True)]

    def grows_a_graph(t: torch.Tensor) -> torch.Tensor:
        kept = t.detach().sum().requires_grad_()
        trail[0] = trail[0] + kept * 0.0
        return t * 2

    tick = functools.lru_cache(maxsize=None)(lambda: None)
    tick()
    assert contract_of(grows_a_graph, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"]
    assert contract_of(lambda t: tick() or t * 2, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"]
    constant = torch.ones(()).requires_grad_() * 3  # a graph built once, read at each call: no state kept
    assert not contract_of(lambda t: t * constant.detach(), torch.ones(2),
                           monkeypatch=monkeypatch)["state kept by the function"]

    def swaps_the_activation(model: torch.nn.Sequential) -> torch.Tensor:
        model[1] = torch.nn.Sigmoid()
        return model[0].weight.sum().detach()

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    assert contract_of(swaps_the_activation, model, monkeypatch=monkeypatch)["inputs changed"] == [
        "argument 0 (classes)"]

    def zeroes_around(x: torch.Tensor) -> torch.Tensor:
        whole = torch.empty(0, dtype=torch.uint8).set_(x.untyped_storage())
        kept = x.clone()
        whole.zero_()
        torch.empty(0).set_(x.untyped_storage(), x.storage_offset(), x.shape, x.stride()).copy_(kept)
        return kept * 2

    base = torch.arange(1.0, 9.0).reshape(2, 4)
    assert contract_of(zeroes_around, base[:, ::2], monkeypatch=monkeypatch)["inputs changed"] == ["argument 0"]

    def aliases_through_a_sliced_storage(row: torch.Tensor) -> torch.Tensor:
        start = row.storage_offset() * row.element_size()
        return torch.empty(0).set_(row.untyped_storage()[start:], 0, row.shape, row.stride())

    row = torch.arange(10.0).reshape(2, 5)[1]
    assert contract_of(aliases_through_a_sliced_storage, row, monkeypatch=monkeypatch)["aliases"] == [
        "shares memory with argument 0"]
    assert contract_of(lambda r: r.clone(), row, monkeypatch=monkeypatch)["aliases"] == []


@pytest.mark.parametrize("tensor", [torch.empty(0, 5, 3), torch.empty(4, 5, 0), torch.empty(4, 5, 3, device="meta")],
                         ids=["no rows", "no features", "meta"])
def test_a_view_of_a_storage_of_no_bytes_is_an_alias(tensor: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 62: ``hidden[:, 0]`` of an empty ``hidden`` covers no bytes, so comparing the bytes storages cover
    found no alias; a new tensor of the same shape is none, and neither is a view of a second call's own result."""
    assert contract_of(lambda t: t[:, 0], tensor, monkeypatch=monkeypatch)["aliases"] == [
        "shares memory with argument 0"]
    assert contract_of(lambda t: t[:, 0].clone(), tensor, monkeypatch=monkeypatch)["aliases"] == []
    kept: list[torch.Tensor] = []

    def hands_back(t: torch.Tensor) -> torch.Tensor:
        kept.append(kept[0] if kept else t.sum(1))
        return kept[-1][:]

    assert contract_of(hands_back, tensor, monkeypatch=monkeypatch)["second call"] != "same result"


class _Tally(int):
    """A count kept as an int subclass, whose value no field or referent shows."""


def test_dict_order_c_fields_number_subclasses_storage_and_bits_are_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 26: counters kept in an OrderedDict's order, a defaultdict's ``default_factory`` and an int subclass;
    a caller's tensor given new memory (``a.data = a.data.clone()``), and its ``-0.0`` and ``inf`` rewritten
    through ``.data`` (``torch.equal`` with ``nan_to_num`` saw neither). Each is seen; an honest function that
    names ``torch.nan`` keeps no state (``nan == nan`` is False, and its record compared so)."""
    order = collections.OrderedDict(a=None, b=None)
    factory = collections.defaultdict(int)
    counts = [_Tally(0)]

    def in_the_order(t: torch.Tensor) -> torch.Tensor:
        order.move_to_end(next(iter(order)))
        return t * 2

    def in_the_factory(t: torch.Tensor) -> torch.Tensor:
        factory.default_factory = functools.partial(int, factory.default_factory() + 1)
        return t * 2

    def in_a_subclass(t: torch.Tensor) -> torch.Tensor:
        counts[0] = _Tally(counts[0] + 1)
        return t * 2

    for function in (in_the_order, in_the_factory, in_a_subclass):
        assert contract_of(function, torch.ones(2), monkeypatch=monkeypatch)["state kept by the function"], function
    assert not contract_of(lambda t: torch.where(t.isnan(), torch.nan, t), torch.ones(2),
                           monkeypatch=monkeypatch)["state kept by the function"]

    def new_memory(a: torch.Tensor) -> torch.Tensor:
        a.data = a.data.clone()
        return a * 2

    def rewrites_bits(a: torch.Tensor) -> torch.Tensor:
        result = a * 2
        a.data.nan_to_num_(nan=float("nan"))  # inf to the largest finite value
        a.data.add_(0.0)  # -0.0 to 0.0
        return result

    for function, given in ((new_memory, torch.ones(3)), (rewrites_bits, torch.tensor([-0.0, float("inf")])),
                            (rewrites_bits, torch.tensor([-0.0, 1.0]))):
        assert contract_of(function, given, monkeypatch=monkeypatch)["inputs changed"] == ["argument 0"], function


def test_a_first_call_that_grows_the_state_in_a_later_case_is_state_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 62: a memo keyed by the inputs grows only the first time it meets them, which the calls of one case
    never show. From a function's second case on, a first call that holds more than before it is state kept; a
    constant built once and a generator seeded again at each call are not."""
    memo: dict[int, torch.Tensor] = {}
    constant: list[torch.Tensor] = []
    shuffler = torch.Generator()

    def memoised(n: int) -> torch.Tensor:
        return memo.setdefault(n, torch.arange(n)).clone()

    def built_once(n: int) -> torch.Tensor:
        constant[:] = constant or [torch.arange(3)]
        return torch.arange(n) + constant[0].sum()

    def reseeded(n: int) -> torch.Tensor:
        return torch.randperm(n, generator=shuffler.manual_seed(n))

    for function in (memoised, built_once, reseeded):
        kept = [contract_of(function, n, monkeypatch=monkeypatch, later_case=n > 4)["state kept by the function"]
                for n in (4, 5, 6)]
        assert kept == [False, function is memoised, function is memoised], (function.__name__, kept)


@pytest.mark.parametrize("grad_needed", [False, True])
def test_the_unusual_caller_changes_no_quiet_setting_the_harness_does_not_read_again(grad_needed: bool) -> None:
    """The harness reads the quiet settings once between two calls of the function, and reads again inside the unusual
    caller only those it sets itself (contract._SET_BY_THE_UNUSUAL_CALLER): a torch that makes it set another one fails
    here, not as a change the function never made."""
    before = contract._quiet_settings()
    with contract._unusual_caller(grad_needed):
        inside = contract._quiet_settings()
    assert set(contract._changed(before, inside)) <= set(contract._SET_BY_THE_UNUSUAL_CALLER)
    assert contract._changed(before, contract._quiet_settings()) == []
