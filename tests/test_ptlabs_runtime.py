"""Device choice, seeding, printing, timing and the environment report."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import ptlabs


def test_seed_everything_repeats_all_three_generators() -> None:
    def draw() -> tuple[float, float, list[float]]:
        return random.random(), float(np.random.rand()), torch.rand(3).tolist()

    ptlabs.seed_everything(7)
    first = draw()
    ptlabs.seed_everything(7)
    assert draw() == first


def test_print_options_round_tensors() -> None:
    ptlabs.set_print_options()
    try:
        assert repr(torch.tensor([1 / 3])) == "tensor([0.3333])"
    finally:
        torch.set_printoptions(profile="default")


def test_setup_announces_the_notebook_device_and_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    ptlabs.setup(torch.device("cpu"), seed=3)
    torch.set_printoptions(profile="default")
    first = torch.rand(2)
    torch.manual_seed(3)
    assert torch.equal(first, torch.rand(2))
    assert capsys.readouterr().out == f"torch {torch.__version__} · device: cpu · seed 3\n"


def test_measure_uses_torch_benchmark() -> None:
    measurement = ptlabs.measure(lambda: torch.ones(8).sum(), label="sum", min_run_time=0.01)
    assert isinstance(measurement, torch.utils.benchmark.Measurement)
    assert measurement.median > 0


def test_compare_prints_a_table_and_speedup_is_a_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    results = ptlabs.compare({"small": lambda: torch.ones(8).sum(), "big": lambda: torch.ones(80_000).sum()},
                             label="sums", min_run_time=0.01)
    assert set(results) == {"small", "big"}
    assert "sums" in capsys.readouterr().out
    ratio = ptlabs.speedup(results["big"], results["small"])
    assert ratio == pytest.approx(results["big"].median / results["small"].median)


def test_compare_needs_candidates() -> None:
    with pytest.raises(ValueError, match="at least one candidate"):
        ptlabs.compare({}, label="nothing")


def test_environment_report_lists_versions_and_devices() -> None:
    report = ptlabs.environment_report()
    assert report["torch"] == torch.__version__
    assert report["cuda available"] == str(torch.cuda.is_available())
    text = ptlabs.format_report(report)
    assert text.splitlines()[0].startswith("python")
    assert len(text.splitlines()) == len(report)


def test_noise_note_flags_a_wide_spread_only() -> None:
    from types import SimpleNamespace

    steady = {"a": SimpleNamespace(median=1.0, iqr=0.1), "b": SimpleNamespace(median=2.0, iqr=0.4)}
    assert ptlabs.noise_note(steady) == ""
    busy = {**steady, "c": SimpleNamespace(median=1.0, iqr=0.3)}
    assert ptlabs.noise_note(busy) == "\n(noisy: the spread is over 25% of the median; rerun when idle)"
    assert ptlabs.noise_note(busy, spread=0.5) == ""
