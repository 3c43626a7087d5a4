"""`ptlabs.expect_error` and `ptlabs.show_states`: what chapters use to stay runnable with Run All."""

from __future__ import annotations

import pytest
import torch

import ptlabs


def test_expected_error_is_printed_as_type_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    with ptlabs.expect_error(RuntimeError) as caught:
        torch.ones(2, 3).t().view(-1)
    out = capsys.readouterr().out
    assert out.startswith("RuntimeError: view size is not compatible")
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert isinstance(caught.error, RuntimeError)


def test_nothing_raised_fails_loudly() -> None:
    with pytest.raises(AssertionError, match="expected RuntimeError or TypeError, but the block raised nothing"):
        with ptlabs.expect_error(RuntimeError, TypeError):
            torch.ones(2).view(-1)


def test_another_exception_type_propagates_untouched() -> None:
    with pytest.raises(KeyError, match="surprise"):
        with ptlabs.expect_error(RuntimeError):
            raise KeyError("surprise")


def test_match_must_be_found_in_the_message() -> None:
    with pytest.raises(AssertionError, match="matching 'stride'") as info:
        with ptlabs.expect_error(ValueError, match="stride"):
            raise ValueError("shape mismatch")
    assert isinstance(info.value.__cause__, ValueError)
    with ptlabs.expect_error(ValueError, match="shape"):
        raise ValueError("shape mismatch")


def test_long_messages_are_cut(capsys: pytest.CaptureFixture[str]) -> None:
    with ptlabs.expect_error(RuntimeError):
        raise RuntimeError("\n".join(f"line {i}" for i in range(20)))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "RuntimeError: line 0"
    assert lines[-1] == "  [... 14 more lines]" and len(lines) == 7


def test_terminal_styles_are_removed(capsys: pytest.CaptureFixture[str]) -> None:
    with ptlabs.expect_error(RuntimeError):
        raise RuntimeError("do this \x1b[1monly if you trust it\x1b[0m.")  # as torch.load's message does
    assert capsys.readouterr().out == "RuntimeError: do this only if you trust it.\n"


def test_expect_error_refuses_a_non_exception() -> None:
    with pytest.raises(TypeError, match="exception classes"):
        ptlabs.expect_error("RuntimeError")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exception classes"):
        ptlabs.expect_error()


def test_show_states_renders_static_html_and_text() -> None:
    view = ptlabs.show_states({"x.t()": "stride (1, 3)", "<b>": "a & b"})
    page = view._repr_html_()
    assert page.count("type='radio'") == 2 and page.count(" checked") == 1, "one choice per state, the first chosen"
    assert page.count("class='ptlabs-state'") == 2 and ":checked ~" in page, "CSS shows the chosen state only"
    assert "&lt;b&gt;" in page and "a &amp; b" in page and "<script" not in page
    assert repr(view).startswith("--- x.t()\nstride (1, 3)")
    assert page == ptlabs.show_states({"x.t()": "stride (1, 3)", "<b>": "a & b"})._repr_html_(), (
        "the HTML is compared by nbval: it must not change from run to run"
    )
    with pytest.raises(ValueError, match="at least one state"):
        ptlabs.show_states({})


def test_show_states_embeds_each_state_figure() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(2, 1))
    plt.plot([1, 2, 3])
    view = ptlabs.show_states({"lr=0.1": "diverges", "lr=0.01": "learns"}, figures={"lr=0.1": figure})
    page = view._repr_html_()
    assert page.count("data:image/png;base64,") == 1 and "alt='lr=0.1: the figure" in page
    assert "(with a figure)" in repr(view)
    assert not plt.fignum_exists(figure.number), "the figure was left open: Jupyter would draw it again"
    with pytest.raises(ValueError, match=r"figures for states that do not exist: \['lr=1'\]"):
        ptlabs.show_states({"lr=0.1": "x"}, figures={"lr=1": plt.figure()})
