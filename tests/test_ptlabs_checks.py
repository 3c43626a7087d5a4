"""Every failure message of the exercise checks, and the one-line verdict on success."""

from __future__ import annotations

import pytest
import torch

from ptlabs import ExerciseError, check_close, check_equal, check_function, check_tensor, verdict


def test_success_prints_exactly_one_verdict_line(capsys: pytest.CaptureFixture[str]) -> None:
    check_close(torch.ones(2, 3), torch.ones(2, 3), name="ex")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["✅ ex: correct (shape (2, 3), torch.float32, values match)"]


def test_exercise_error_is_an_assertion_error() -> None:
    # nbgrader and pytest count AssertionError as a failed check, not a crash in the test itself.
    assert issubclass(ExerciseError, AssertionError)


def test_not_a_tensor_names_the_type() -> None:
    with pytest.raises(ExerciseError, match=r"ex: expected a torch.Tensor, got list"):
        check_close([1.0, 2.0], torch.ones(2), name="ex")


def test_wrong_shape_names_both_shapes_and_hints_at_reordering() -> None:
    with pytest.raises(ExerciseError, match=r"shape is \(3, 2\), expected \(2, 3\); same number of elements"):
        check_close(torch.ones(3, 2), torch.ones(2, 3), name="ex")


def test_wrong_shape_with_other_size_has_no_reorder_hint() -> None:
    with pytest.raises(ExerciseError) as info:
        check_tensor(torch.ones(4), name="ex", shape=(5,))
    assert str(info.value) == "ex: shape is (4,), expected (5,)"


def test_wrong_dtype_names_both_dtypes_and_why() -> None:
    with pytest.raises(ExerciseError, match=r"dtype is torch.int64, expected torch.float32; integer inputs"):
        check_close(torch.ones(2, dtype=torch.int64), torch.ones(2), name="ex")


def test_wrong_device_names_both_devices() -> None:
    meta = torch.ones(2, device="meta")
    with pytest.raises(ExerciseError, match=r"tensor is on cpu, expected meta; results must stay on the device"):
        check_tensor(torch.ones(2), name="ex", device=meta.device)


def test_values_beyond_tolerance_report_the_worst_element() -> None:
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 5.0
    actual[0, 0] = 0.5
    with pytest.raises(ExerciseError) as info:
        check_close(actual, expected, name="ex")
    message = str(info.value)
    assert "2 of 6 values differ beyond tolerance" in message
    assert "worst at index (1, 2): got 5, expected 0 (difference 5)" in message


def test_explicit_tolerance_is_used_and_reported() -> None:
    check_close(torch.tensor([1.05]), torch.tensor([1.0]), name="ex", rtol=0.0, atol=0.1)
    with pytest.raises(ExerciseError, match=r"rtol=0, atol=0.01"):
        check_close(torch.tensor([1.05]), torch.tensor([1.0]), name="ex", rtol=0.0, atol=0.01)


def test_nan_where_a_number_is_expected_is_the_worst_element() -> None:
    with pytest.raises(ExerciseError, match=r"worst at index \(1,\): got nan, expected 2"):
        check_close(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), name="ex")


def test_integers_compare_exactly() -> None:
    with pytest.raises(ExerciseError, match=r"1 of 3 values differ"):
        check_close(torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]), name="ex")


def test_check_tensor_verdict_and_silence(capsys: pytest.CaptureFixture[str]) -> None:
    check_tensor(torch.ones(2), name="ex", shape=(2,), dtype=torch.float32, device="cpu")
    check_tensor(torch.ones(2), name="quiet", announce=False)
    assert capsys.readouterr().out == "✅ ex: correct (shape (2,), torch.float32, on the expected device)\n"


def test_check_equal_accepts_sequences_for_tuples(capsys: pytest.CaptureFixture[str]) -> None:
    check_equal(torch.ones(2, 3).stride(), (3, 1), name="strides")
    check_equal([3, 1], (3, 1), name="strides")
    assert capsys.readouterr().out.count("✅ strides: correct ((3, 1))") == 2


def test_check_equal_wrong_value_and_wrong_type() -> None:
    with pytest.raises(ExerciseError, match=r"strides: got \(1, 3\), expected \(3, 1\)"):
        check_equal((1, 3), (3, 1), name="strides")
    with pytest.raises(ExerciseError, match=r"label: expected a str, got int \(3\)"):
        check_equal(3, "framework", name="label")


def test_check_function_missing_and_not_callable() -> None:
    with pytest.raises(ExerciseError, match=r"no function named 'solve' is defined; run the cell"):
        check_function({}, "solve")
    with pytest.raises(ExerciseError, match=r"'solve' is a int, not a function"):
        check_function({"solve": 3}, "solve")
    assert check_function({"solve": len}, "solve") is len


def test_verdict_without_detail(capsys: pytest.CaptureFixture[str]) -> None:
    verdict("ex")
    assert capsys.readouterr().out == "✅ ex: correct\n"


def test_check_close_refuses_a_tensor_subclass() -> None:
    # A subclass can override __eq__ or __torch_function__ so that any comparison agrees:
    # the visible check refuses it, as the hidden ptchecks checks do.
    class Agreeable(torch.Tensor):
        pass

    with pytest.raises(ExerciseError, match=r"ex: expected a torch.Tensor, got the subclass Agreeable; return a plain"):
        check_close(torch.ones(2).as_subclass(Agreeable), torch.ones(2), name="ex")


def test_check_close_accepts_parameters_and_buffers(capsys: pytest.CaptureFixture[str]) -> None:
    check_close(torch.nn.Parameter(torch.ones(2)), torch.ones(2), name="param")
    check_close(torch.nn.Buffer(torch.ones(2)), torch.ones(2), name="buffer")
    assert capsys.readouterr().out.count("✅") == 2
