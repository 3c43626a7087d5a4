"""Device choice, seeding, printing, timing and the environment report."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

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


def test_the_validations_smoke_mode_shortens_every_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/kernels.py sets PTLABS_TIMING=smoke for the book's validation, which ignores timing outputs: every
    measurement lasts milliseconds, with the same rounds and table; unset (a reader, `make refresh`), as asked."""
    from torch.utils import benchmark

    from ptlabs import timing
    from tests.kernels import SMOKE_TIMING

    asked: list[float] = []
    real = benchmark.Timer.blocked_autorange

    def recorded(self: benchmark.Timer, *args: object, min_run_time: float, **kwargs: object) -> object:
        asked.append(min_run_time)
        return real(self, *args, min_run_time=min_run_time, **kwargs)

    monkeypatch.setattr(benchmark.Timer, "blocked_autorange", recorded)
    fns = {"a": lambda: torch.ones(8).sum(), "b": lambda: torch.ones(8).mean()}
    ptlabs.compare(fns, label="plain", rounds=5, min_run_time=0.005, show=False)
    assert set(asked) == {0.005, 0.02}  # the candidates', and the machine check's own
    asked.clear()
    monkeypatch.setenv(*next(iter(SMOKE_TIMING.items())))
    result = ptlabs.compare(fns, label="smoke", min_run_time=0.05, show=False)
    ptlabs.measure(fns["a"])
    assert set(asked) == {timing._SMOKE_RUN_TIME} and len(result.times["a"]) == 7


def test_compare_interleaves_rounds_and_prints_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []

    def candidate(name: str, size: int):
        def run() -> None:
            if not calls or calls[-1] != name:
                calls.append(name)
            torch.ones(size).sum()
        return run

    result = ptlabs.compare({"small": candidate("small", 8), "big": candidate("big", 400_000)},
                            label="sums", rounds=5, min_run_time=0.01)
    assert isinstance(result, ptlabs.Comparison) and result.rounds == 5
    assert all(len(times) == 5 for times in result.times.values())
    # interleaved: the candidates alternate instead of running all rounds of one, then the other
    assert len(calls) >= 5, calls
    out = capsys.readouterr().out
    assert out.startswith("sums: 5 interleaved rounds") and "big" in out
    assert result.ratios("small") == [1.0] * 5


def _comparison(ratios: list[float], threshold: float = 1.1) -> ptlabs.Comparison:
    return ptlabs.Comparison(label="t", baseline="a", times={"a": [1.0] * len(ratios), "b": ratios},
                             threshold=threshold)


@pytest.mark.parametrize(
    ("ratios", "kind", "words"),
    [
        ([3.0, 3.1, 2.9, 3.2, 3.0], "slower", "b: 3.0x the time of a (slower)"),
        ([0.5, 0.48, 0.52, 0.5, 0.49], "faster", "b: 2.0x faster than a"),
        ([5229.4, 4405.2, 5720.1, 5000.0, 5100.0], "slower", "b: 5,100x the time of a (slower)"),
        ([1.3, 0.8, 1.0, 1.2, 0.9], "unclear", "no clear difference on this machine"),
        # a busy machine: most rounds say 1.25x, but one in four disagrees; the spread decides
        ([1.25, 1.25, 1.25, 1.02, 1.0, 1.25, 1.03], "unclear", "no clear difference"),
        ([1.05, 1.06, 1.04, 1.05, 1.07], "unclear", "no clear difference"),  # under the 10 % threshold
    ],
)
def test_verdict_comes_from_the_median_ratio_and_its_spread(ratios: list[float], kind: str, words: str) -> None:
    comparison = _comparison(ratios)
    assert comparison.clear("b") == kind
    assert words in comparison.verdict("b")
    assert words in comparison.table()


def test_threshold_sets_what_counts_as_a_difference() -> None:
    ratios = [1.05, 1.06, 1.04, 1.05, 1.07]
    assert _comparison(ratios, threshold=1.02).clear("b") == "slower"
    assert _comparison(ratios).speedup("b") == pytest.approx(1 / 1.05)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"candidates": {"a": lambda: None}}, "at least two candidates"),
        ({"rounds": 3}, "at least 5 rounds"),
        ({"baseline": "c"}, "baseline 'c' is not one of"),
        ({"threshold": 0.9}, "threshold is a ratio above 1"),
    ],
)
def test_compare_refuses_a_comparison_that_cannot_give_a_verdict(kwargs: dict, message: str) -> None:
    arguments = {"candidates": {"a": lambda: None, "b": lambda: None}, "label": "x", **kwargs}
    with pytest.raises(ValueError, match=message):
        ptlabs.compare(**arguments)


def test_plot_comparison_draws_one_bar_per_candidate_with_whiskers() -> None:
    import matplotlib

    matplotlib.use("Agg")
    fig = ptlabs.plot_comparison(_comparison([2.0, 2.2, 1.9, 2.1, 2.0]))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert [round(p.get_width(), 3) for p in ax.patches] == [1000.0, 2000.0]  # medians in ms
    assert "5 rounds" in ax.get_xlabel()


def test_environment_report_lists_versions_and_devices() -> None:
    report = ptlabs.environment_report()
    assert report["torch"] == torch.__version__
    assert report["cuda available"] == str(torch.cuda.is_available())
    text = ptlabs.format_report(report)
    assert text.splitlines()[0].startswith("python")
    assert len(text.splitlines()) == len(report)


QUIET_CHECK = {"256": 1e-3, "512": 7.5e-3}
STALLED_CHECK = {"256": 20e-3, "512": 21e-3}  # a stall adds the same 20 ms to both sizes


@pytest.mark.parametrize(("stalled", "busy"), [(0, False), (1, False), (2, True), (7, True)])
def test_a_busy_machine_gives_no_verdict(stalled: int, busy: bool) -> None:
    """More than a quarter of 7 rounds with a stalled machine check: the table says busy instead of a verdict."""
    checks = [STALLED_CHECK] * stalled + [QUIET_CHECK] * (7 - stalled)
    comparison = ptlabs.Comparison(label="t", baseline="a", times={"a": [1.0] * 7, "b": [3.0] * 7}, checks=checks)
    assert comparison.busy is busy and comparison.stalled_rounds == stalled
    assert comparison.clear("b") == ("busy" if busy else "slower")
    table = comparison.table()
    assert ("the machine was busy" in table) is busy
    assert ("b: 3.0x the time of a (slower)" in table) is not busy
    assert table.count("machine check: ") == 1


def test_a_comparison_without_a_machine_check_says_so() -> None:
    assert "machine check: not run" in _comparison([2.0] * 5).table()


#: A process that keeps one core busy for up to 30 s; it says so once it spins (a sleep cannot know when
#: several new Pythons have started on a busy machine, and a round timed before they spin is a quiet one).
SPINNER = ("import time\nend = time.monotonic() + 30\nprint('spinning', flush=True)\n"
           "while time.monotonic() < end:\n    pass\n")


#: Tries under one load before the test gives up on the machine check. A continuous load sometimes stalls the
#: check's two matmuls evenly, and one round of five then reads quiet (1 run in 6 with one more busy process
#: beside the test); a check that never sees a load fails all three.
LOADED_TRIES = 3


def test_compare_reports_a_loaded_machine() -> None:
    """A real load: two spinning processes per core. The candidates' threads (one per core) stall at every
    parallel region, and compare() says the machine was busy instead of giving a verdict."""
    cores = os.cpu_count() or 1
    if cores < 2:
        pytest.skip("one core: no OpenMP threads to stall")
    matrix = torch.full((384, 384), 0.5)
    spinners = [subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True)
                for _ in range(2 * cores)]
    tables = []
    try:
        assert all(spinner.stdout.readline() == "spinning\n" for spinner in spinners)  # every one spins now
        for _ in range(LOADED_TRIES):
            result = ptlabs.compare({"a": lambda: matrix @ matrix, "b": lambda: matrix @ matrix + 1}, label="load",
                                    rounds=5, min_run_time=0.05, num_threads=cores, show=False)
            tables.append(result.table())
            if result.busy:
                break
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.communicate()  # waits, and closes its pipe
    assert result.busy, f"{LOADED_TRIES} tries under load, each read quiet:\n" + "\n".join(tables)
    assert "no verdict, the machine was busy" in result.table()


def test_compare_on_one_thread_by_default() -> None:
    result = ptlabs.compare({"a": lambda: None, "b": lambda: None}, label="x", rounds=5, min_run_time=0.01, show=False)
    assert result.num_threads == 1 and len(result.checks) == 5
    assert "x: 5 interleaved rounds, 1 thread\n" in result.table()
