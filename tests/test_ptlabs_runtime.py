"""Device choice, seeding, printing, timing and the environment report."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import ptlabs


def test_pick_device_prefers_what_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTLABS_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert ptlabs.pick_device().type == expected


def test_pick_device_honours_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTLABS_DEVICE", "cpu")
    assert ptlabs.pick_device() == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_pick_device_refuses_an_unavailable_device() -> None:
    with pytest.raises(RuntimeError, match=r"device 'cuda' was requested but is not available"):
        ptlabs.pick_device("cuda")


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


def test_setup_returns_device_and_announces_it(capsys: pytest.CaptureFixture[str]) -> None:
    device = ptlabs.setup(seed=3, device="cpu")
    torch.set_printoptions(profile="default")
    assert device == torch.device("cpu")
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
