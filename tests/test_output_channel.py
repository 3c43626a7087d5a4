"""Outputs sent out of the kernel (ptchecks.emit) and compared by the grader (ptgrader.channel).

The worked end-to-end example, a forged in-kernel verdict that still scores 0, is in
tests/test_autograde_guard.py; the labs' own hostile case is in tests/hostile.py. These tests pin
the rules each half applies on its own.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import signal
import time

import pytest
import torch
from safetensors.torch import save

import ptchecks
from ptgrader import channel
from ptgrader.channel import Output


def sent(monkeypatch: pytest.MonkeyPatch, name: str, value: object, **tolerance: float) -> Output:
    """What the grader decodes from one emit in a graded kernel."""
    shown: list[dict] = []
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data))
    ptchecks.emit(name, value, **tolerance)
    ptchecks._flush()  # what the end of the cell's run does (already done here, where no IPython shell runs)
    (batch,) = [data[ptchecks.OUTPUT_MIME] for data in shown]
    (payload,) = channel.payloads(batch)
    decoded_name, output = channel.decode(payload)
    assert decoded_name == name
    return output


def test_a_tensor_arrives_detached_on_the_cpu_with_its_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    value = torch.arange(6.0, requires_grad=True).reshape(2, 3).t() * 2
    output = sent(monkeypatch, "doubled", value)
    assert output.value.dtype == torch.float32 and output.value.shape == (3, 2)
    assert torch.equal(output.value, value.detach()) and output.rtol is None and output.device == "cpu"


def test_outside_grading_nothing_is_sent_but_the_value_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[object] = []
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr("IPython.display.display", lambda *args, **kwargs: shown.append(args))
    ptchecks.emit("outside: plain", [1, 2.5, "three"])
    assert shown == []
    with pytest.raises(ptchecks.ExerciseError, match="cannot be sent as JSON"):
        ptchecks.emit("outside: an object", object())
    ptchecks.emit("outside: nan", [math.nan, -math.inf])  # not JSON, but tagged: a loss that diverged


def test_a_name_twice_in_one_run_of_a_cell_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    ptchecks.emit("twice: case", 1)
    with pytest.raises(ValueError, match="already used in this cell"):
        ptchecks.emit("twice: case", 2)


def test_a_tensor_subclass_is_refused() -> None:
    class Agreeable(torch.Tensor):
        pass

    with pytest.raises(ptchecks.ExerciseError):
        ptchecks.emit("subclass", torch.zeros(2).as_subclass(Agreeable))


def test_tolerances_come_from_the_reference_never_from_the_student(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = {"loss": sent(monkeypatch, "loss", torch.tensor(1.0), rtol=1e-2, atol=1e-3)}
    close = Output(torch.tensor(1.005), device="cpu")
    assert channel.differences({"loss": close}, reference) == []
    lenient_student = Output(torch.tensor(1.5), rtol=0.9, atol=0.9, device="cpu")
    assert channel.differences({"loss": lenient_student}, reference) != []
    strict = {"loss": Output(torch.tensor(1.0), device="cpu")}
    assert channel.differences({"loss": close}, strict) != []  # default float32 tolerance


def test_a_float64_tensor_rounded_through_float32_is_not_the_float64_result() -> None:
    """assert_close's own float64 default (1e-7) would let float32 rounding pass; float64 rounding still does."""
    exact = torch.tensor([0.1, 1 / 3, 2.0**0.5, 1e-3 / 3], dtype=torch.float64)
    reference = {"result": Output(exact, device="cpu")}
    through_float32 = Output(exact.float().double(), device="cpu")
    assert channel.differences({"result": through_float32}, reference) != []
    reordered = Output(exact * (1 + 4e-16), device="cpu")
    assert channel.differences({"result": reordered}, reference) == []
    lenient = {"result": Output(exact, rtol=1e-6, atol=1e-9, device="cpu")}  # the reference's own tolerance wins
    assert channel.differences({"result": through_float32}, lenient) == []


def test_only_identical_tensors_skip_assert_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path (torch.equal) takes a tensor equal in dtype, shape and values; anything else is assert_close's."""
    asked = []
    monkeypatch.setattr(torch.testing, "assert_close", lambda actual, expected, **_: asked.append(actual))
    values = torch.tensor([[1.0, -2.5], [0.0, 3.0]])
    reference = {"t": Output(values, device="cpu")}
    assert channel.differences({"t": Output(values.t().contiguous().t(), device="cpu")}, reference) == []
    assert asked == []  # equal values in another layout of strides: no tolerance needed
    for other in (values.double(), values.reshape(4), values + 1e-6, torch.tensor([[1.0, -2.5], [math.nan, 3.0]])):
        channel.differences({"t": Output(other, device="cpu")}, reference)
        assert asked.pop() is other
    assert not channel.identical(torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))  # torch.equal alone would say equal


def test_differences_name_what_is_wrong() -> None:
    reference = {
        "values": Output(torch.tensor([1.0, math.nan]), device="cpu"),
        "dtype": Output(torch.tensor([1, 2]), device="cpu"),
        "count": Output(3),
        "losses": Output([0.5, 0.25]),
        "float32 losses": Output([0.5, 0.25], rtol=1e-5, atol=1e-8),  # the reference says: computed in float32
        "missing": Output("here"),
        "device": Output(torch.zeros(2), device="cuda"),
    }
    student = {
        "values": Output(torch.tensor([1.0, math.nan]), device="cpu"),  # NaN in the same place matches
        "dtype": Output(torch.tensor([1.0, 2.0]), device="cpu"),  # float where the reference is int64
        "count": Output(3.0),  # a float is not the int 3
        "losses": Output([0.5 * (1 + 1e-7), 0.25]),  # a float is a float64: float32 rounding differs
        "float32 losses": Output([0.5 * (1 + 1e-7), 0.25], rtol=0.5, atol=0.5),  # the student's own tolerance: ignored
        "missing": None,  # malformed or never sent
        "device": Output(torch.zeros(2), device="cpu"),  # right values, left on the CPU
    }
    problems = channel.differences(student, reference)
    assert [problem.split(":")[0] for problem in problems] == ["dtype", "count", "losses", "missing", "device"]
    assert channel.same_value([0.5 * (1 + 1e-12), math.nan], [0.5, math.nan])  # float64 rounding; nan is nan


def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = {"list": [value]}
    return value


def test_exact_types_and_key_order_travel(monkeypatch: pytest.MonkeyPatch) -> None:
    value = {"b": (1, 2.0, True, None), "a": [torch.Size([2, 3]), "s"], 3: {"nested": ()}}
    output = sent(monkeypatch, "typed", value)
    assert output.value == as_pairs({"b": (1, 2.0, True, None), "a": [(2, 3), "s"], 3: {"nested": ()}})
    assert [key for key, _ in output.value] == ["b", "a", 3] and type(output.value[1][1][0]) is tuple
    assert channel.differences({"typed": output}, {"typed": Output(output.value)}) == []


def test_nan_and_infinities_travel_as_floats_and_compare_as_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    output = sent(monkeypatch, "losses", [1.5, math.nan, math.inf, -math.inf])
    assert output.value[1] != output.value[1] and output.value[2:] == [math.inf, -math.inf]
    reference = {"losses": Output([1.5, math.nan, math.inf, -math.inf])}
    assert channel.differences({"losses": output}, reference) == []
    for wrong in ([1.5, 0.0, math.inf, -math.inf], [1.5, math.nan, -math.inf, -math.inf]):
        assert channel.differences({"losses": Output(wrong)}, reference)
    with pytest.raises(ValueError, match="unknown tag"):
        channel.untyped({"float": ["1e308"]})


@pytest.mark.parametrize(
    ("student", "reference"),
    [
        ([1, 2], (1, 2)),  # a list where the reference returns a tuple
        ((1, 2), [1, 2]),
        (1, True),  # an int is not a bool
        (True, 1),
        (1, 1.0),  # nor a float
        ({"b": 1, "a": 2}, {"a": 2, "b": 1}),  # the same items in another order
        ({"a": [1, (2,)]}, {"a": [1, [2]]}),  # deep inside
        ({True: "x", 2.0: "y"}, {1: "x", 2: "y"}),  # keys Python finds equal, of other types
        ({(1, True): 0}, {(1, 1): 0}),
        ({0.1 + 0.2: 0}, {0.3: 0}),  # a float key is compared exactly, not within a tolerance
    ],
)
def test_types_and_orders_that_differ_are_told_apart(student: object, reference: object) -> None:
    assert channel.differences({"v": Output(as_received(student))}, {"v": Output(as_received(reference))}) != []
    assert channel.differences({"v": Output(as_received(reference))}, {"v": Output(as_received(reference))}) == []


def as_received(value: object) -> object:
    """``value`` as the grader receives it: encoded by ptchecks, through JSON, decoded."""
    return channel.untyped(json.loads(json.dumps(ptchecks._typed(value))))


def as_pairs(value: object) -> object:
    """``value`` with every dict as the grader keeps a sent one: its pairs, in order (channel.Pairs)."""
    if isinstance(value, dict):
        return channel.Pairs((as_pairs(key), as_pairs(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return type(value)(as_pairs(item) for item in value)
    return value


def test_the_typed_encoding_round_trips_through_json(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ([], (), {}, [[]], ((),), {"": {}}, [1, [2, (3, {"k": None})]], -0.0, "", 2**62):
        received = as_received(value)
        assert received == as_pairs(value) and type(received) is type(as_pairs(value))


def test_no_tolerance_means_the_same_bits() -> None:
    """Round 29: ``x + 0.0`` in a part that only moves values turned each -0.0 into 0.0; assert_close holds the two
    zeros equal, so a reference that sends rtol=0, atol=0 asks for the same bits (a nan's payload included)."""
    moved = torch.tensor([-0.0, 1.5, float("nan")])
    reference = {"t": Output(moved, rtol=0.0, atol=0.0, device="cpu")}
    assert channel.differences({"t": Output(moved.clone(), device="cpu")}, reference) == []
    assert channel.differences({"t": Output(moved + 0.0, device="cpu")}, reference) != []
    assert channel.differences({"t": Output(moved + 0.0, device="cpu")}, {"t": Output(moved, device="cpu")}) == []
    assert channel.differences({"t": Output(moved.double(), device="cpu")}, reference) != []


def test_a_sent_dict_is_never_hashed_so_colliding_keys_cost_what_a_list_does() -> None:
    """Round 27: 40,000 int keys that are multiples of 2**61 - 1 (one hash for all) took 27 s to build as a dict."""
    colliding = {"dict": [[k * (2**61 - 1), None] for k in range(1, 40_001)]}
    started = time.process_time()
    received = channel.untyped(colliding)
    assert channel.same_value(received, received)
    assert time.process_time() - started < 2  # as a dict: 27 s (quadratic in the keys)
    assert repr(channel.untyped({"dict": [["a", 1], [2, {"list": []}]]})) == "{'a': 1, 2: []}"


def test_malformed_payloads_are_rejected_without_running_anything() -> None:
    tensor = base64.b64encode(save({"value": torch.zeros(1)})).decode()
    two = base64.b64encode(save({"value": torch.zeros(1), "extra": torch.ones(1)})).decode()
    for payload in (
        [],
        {"json": 1},
        {"name": "x", "json": [1, 2]},  # untyped JSON: a tuple and a list would look the same
        {"name": "x", "typed": [1, 2]},
        {"name": "x", "typed": {"list": [1], "tuple": [1]}},
        {"name": "x", "typed": {"set": [1]}},
        {"name": "x", "typed": {"dict": [[{"list": []}, 1]]}},  # a list cannot be a key
        {"name": "x", "typed": {"dict": [[1, 2, 3]]}},
        {"name": "x", "typed": _nested(channel.MAX_DEPTH + 2)},
        {"name": "x"},
        {"name": "x", "safetensors": two},
        {"name": "x", "safetensors": tensor, "rtol": 0.5},
        {"name": "x", "safetensors": tensor, "rtol": "1", "atol": 0.1},
        {"name": "x", "safetensors": tensor, "rtol": 5.0, "atol": 0.1},
        {"name": "x", "safetensors": "not base64!"},
        {"name": "x", "safetensors": tensor, "device": "cuda:0; rm"},
    ):
        with pytest.raises(ValueError):
            channel.decode(payload)


def test_a_tensor_header_over_its_limit_is_refused_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 39: a header declaring 400,000 empty tensors cost 6 s and 775 MB to load; a long one is refused
    before safetensors reads it, and the longest header one tensor of 64 dimensions needs is not."""
    def refuse(_: bytes) -> None:
        raise AssertionError("safetensors read a header over the limit")

    many = save({f"t{i}": torch.zeros(0) for i in range(2_000)})
    assert int.from_bytes(many[:8], "little") > channel.MAX_TENSOR_HEADER
    widest = torch.zeros((1,) * 63 + (0,))
    monkeypatch.setattr("safetensors.torch.load", refuse)
    for data in (many, b"", b"\x01"):
        with pytest.raises(ValueError, match="header"):
            channel.decode({"name": "x", "safetensors": base64.b64encode(data).decode()})
    monkeypatch.undo()
    _, output = channel.decode({"name": "x", "safetensors": base64.b64encode(save({"value": widest})).decode()})
    assert output.value.shape == widest.shape


def test_a_passing_check_sends_what_it_saw_numbered_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[dict] = []
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data[ptchecks.OUTPUT_MIME]))
    monkeypatch.setattr(ptchecks, "_execution_id", lambda: "run-1")
    monkeypatch.setattr(ptchecks, "_SENT", {})
    ptchecks.check_true(True, name="kept", why="")
    ptchecks.check_raises(ValueError, int, "x", name="bad literal")
    with pytest.raises(ptchecks.ExerciseError):
        ptchecks.check_equal([1], (1,), name="tuple")  # a failing check sends nothing: the cell fails anyway
    ptchecks._flush()
    decoded = dict(channel.decode(payload) for batch in shown for payload in channel.payloads(batch))
    assert {name: output.value for name, output in decoded.items()} == {
        "check_true #1: kept": True, "check_raises #2: bad literal": "builtins.ValueError",
        "bad literal: what reaches the caller": "a ValueError",
    }


def test_what_reaches_the_caller_is_an_output_whatever_the_check_does_in_the_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 18: an answer that swallowed the exception lost only the kernel's quarter of its part. What reaches
    the caller is now sent as an output, compared outside the kernel (a check repeated under one name in a
    cell, as a visible test and the hidden one may do, sends each outcome under a name of its own)."""
    shown: list[dict] = []
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data[ptchecks.OUTPUT_MIME]))
    monkeypatch.setattr(ptchecks, "_execution_id", lambda: "run-1")
    monkeypatch.setattr(ptchecks, "_SENT", {})

    def swallowed(text: str) -> None:
        try:
            int(text)
        except ValueError:
            pass

    for function in (int, swallowed, lambda text: {}[text]):
        with contextlib.suppress(ptchecks.ExerciseError):
            ptchecks.check_raises(ValueError, function, "x", name="bad literal")
    ptchecks._canary_problems()  # its attempts on known-wrong values are no outputs (the snapshot differs here)
    ptchecks._flush()
    decoded = dict(channel.decode(payload) for batch in shown for payload in channel.payloads(batch))
    assert {name: output.value for name, output in decoded.items() if "#" not in name} == {
        "bad literal: what reaches the caller": "a ValueError",
        "bad literal: what reaches the caller (2)": "no exception",
        "bad literal: what reaches the caller (3)": "KeyError, not a ValueError",
    }


def _graded_shell(monkeypatch: pytest.MonkeyPatch) -> tuple[object, list[list[dict]]]:
    """An IPython shell of its own (not the process's singleton) whose cells run as in a graded kernel."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell()
    shown: list[list[dict]] = []
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr("IPython.display.display", lambda data, raw: shown.append(data[ptchecks.OUTPUT_MIME]))
    monkeypatch.setattr(ptchecks, "_shell", lambda: shell)
    monkeypatch.setattr(ptchecks, "_SENT", {})
    shell.user_ns["ptchecks"] = ptchecks
    return shell, shown


def test_a_cells_outputs_leave_together_when_its_run_ends_even_after_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs sent within FLUSH_AFTER_S of each other leave together, as one display message (a list) sent by
    IPython's post_execute event: not one message per output."""
    shell, shown = _graded_shell(monkeypatch)
    shell.user_ns["shown"] = shown
    shell.run_cell("ptchecks.emit('a', 1)\nptchecks.emit('b', [2.5])\nduring_the_run = len(shown)", store_history=False)
    shell.run_cell("ptchecks.emit('c', 3)\nraise ValueError('a test that fails after sending')", store_history=False)
    assert shell.user_ns["during_the_run"] == 0, "an output left before its cell's run ended"
    assert [[payload["name"] for payload in batch] for batch in shown] == [["a", "b"], ["c"]]
    assert dict(channel.decode(payload) for payload in shown[0])["b"].value == [2.5]


def test_a_long_loop_of_outputs_leaves_in_bounded_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    shell, shown = _graded_shell(monkeypatch)
    shell.run_cell(f"for i in range({ptchecks.MAX_PENDING + 3}):\n    ptchecks.emit(f'o{{i}}', i)", store_history=False)
    assert [len(batch) for batch in shown] == [ptchecks.MAX_PENDING, 3]


def test_a_cell_the_grader_stops_ends_at_its_next_output_and_the_next_cell_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The grader's signal only notes the run it arrived in: the cell stops at its next output (or harness call),
    never inside the student's code, and a stop that arrives after its cell ended stops nothing later."""
    shell, shown = _graded_shell(monkeypatch)
    running = ["cell 1"]
    monkeypatch.setattr(ptchecks, "_execution_id", lambda: running[0])
    monkeypatch.setattr(ptchecks, "_STOP_ASKED", [""])
    previous = signal.getsignal(ptchecks.STOP_SIGNAL)
    try:
        stopped = shell.run_cell(
            "ptchecks.emit('a', 1)\nimport os, signal\nos.kill(os.getpid(), ptchecks.STOP_SIGNAL)\n"
            "reached = 'after the signal'\nptchecks.emit('b', 2)\nreached = 'past the stop'", store_history=False)
        assert isinstance(stopped.error_in_exec, ptchecks.StoppedByTheGrader)
        assert shell.user_ns["reached"] == "after the signal"
        assert [[payload["name"] for payload in batch] for batch in shown] == [["a"]]
        os.kill(os.getpid(), ptchecks.STOP_SIGNAL)  # late: between two cells, for the one that ended
        running[0] = "cell 2"
        assert shell.run_cell("ptchecks.emit('c', 3)\nptchecks.call('d', abs, -1)", store_history=False).success
        assert [payload["name"] for batch in shown[1:] for payload in batch] == ["c", "d", "d: contract"]
    finally:
        signal.signal(ptchecks.STOP_SIGNAL, previous)


def test_outputs_that_waited_leave_at_the_next_output_or_harness_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """So that the grader sees a wrong output before the cell's costly later cases run, not at its end."""
    shell, shown = _graded_shell(monkeypatch)
    clock = [100.0]
    monkeypatch.setattr(ptchecks.time, "monotonic", lambda: clock[0])
    shell.user_ns.update(clock=clock, shown=shown)
    shell.run_cell("ptchecks.emit('a', 1)\nclock[0] += 0.01\nptchecks.emit('b', 2)\nsoon = len(shown)\n"
                   f"clock[0] += {ptchecks.FLUSH_AFTER_S}\nptchecks.call('c', abs, -1)\nlater = len(shown)\n",
                   store_history=False)
    assert (shell.user_ns["soon"], shell.user_ns["later"]) == (0, 1)
    assert [[payload["name"] for payload in batch] for batch in shown] == [["a", "b"], ["c", "c: contract"]]
