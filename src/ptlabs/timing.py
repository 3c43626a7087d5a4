"""Timing through ``torch.utils.benchmark``, the way the book measures every speed claim.

``benchmark.Timer`` warms up, synchronises CUDA, picks the number of runs and reports a
median with its spread; a hand-written ``time.time()`` loop does none of that.

One median per candidate, measured one after the other, is not enough for a verdict: on a busy
machine (another program, a test run) the load changes between the two measurements, and the
ratio of two medians then says more about the load than about the code. :func:`compare` therefore
*interleaves* its candidates: each round times every candidate once (in a rotating order), the
ratio to the baseline is taken per round, and the verdict comes from the median of those ratios
and where their interquartile range lies. Only when the whole range is past the threshold (by
default 10 %: the first quartile at 1.1 or more, or the third at 1/1.1 or less) is a candidate
called slower or faster; otherwise the verdict is "no clear difference on this machine", however
wide or narrow the range is. This is the one place the rule is written; every chapter's timing
verdict comes from here.

Interleaving cannot help against one kind of load: when other programs keep the cores busy,
OpenMP's threads stall at every parallel region, adding a fixed 10-20 ms to each multi-threaded
kernel. That compresses every ratio towards 1, or inverts it. Two defences: :func:`compare` times
with **one thread** unless told otherwise (a ratio between two pieces of code rarely needs more),
and every round also runs a *machine check*, a 256x256 and a 512x512 matmul at the candidates'
thread count. The larger does 8x the work; on a quiet machine it takes 4-9x the time. When it takes
under 3x (both stalled) or over 20x (only the larger stalled) in more than a quarter of the rounds,
the table says the machine was busy and gives no verdict.
"""

from __future__ import annotations

import os
import statistics
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.utils import benchmark

__all__ = ["BUSY", "Comparison", "compare", "machine_check", "measure"]

#: Fewer rounds than this give no usable spread (the quartiles of 4 numbers are two of them).
MIN_ROUNDS = 5

#: The machine check's two matmul sizes: the larger does 8x the work of the smaller.
CHECK_SIZES = (256, 512)
#: On a quiet machine the larger check takes 4-9x the time of the smaller. Outside this band a stall hit one
#: of the two: both stalled (the fixed delay swamps the work, about 1x), or only the larger (tens of x).
QUIET_BAND = (3.0, 20.0)
#: The words a busy machine's verdicts carry; `make refresh` refuses a notebook whose outputs hold them.
BUSY = "the machine was busy"

#: Set to "smoke" by the book's validation (tests/kernels.py), where every timing output is ignored
#: (``nbval-ignore-output``) and only that the timing cells run is checked: each measurement then lasts
#: :data:`_SMOKE_RUN_TIME` instead of its usual tenths of a second, with the same rounds and the same table.
#: Verdicts are measured where it is never set: by a reader, `make refresh` and `make check-timings`.
_SMOKE_VARIABLE = "PTLABS_TIMING"
_SMOKE_RUN_TIME = 0.002


def _run_time(wanted: float) -> float:
    """``wanted`` seconds of measurement, or :data:`_SMOKE_RUN_TIME` where the validation set :data:`_SMOKE_VARIABLE`."""
    return min(wanted, _SMOKE_RUN_TIME) if os.environ.get(_SMOKE_VARIABLE) == "smoke" else wanted


def measure(
    fn: Callable[[], object],
    *,
    label: str = "",
    sub_label: str = "",
    description: str = "",
    min_run_time: float = 0.5,
    num_threads: int | None = None,
) -> benchmark.Measurement:
    """Time ``fn()`` with ``benchmark.Timer.blocked_autorange`` and return the Measurement.

    For showing one time, not for comparing two: a comparison goes through :func:`compare`.
    ``num_threads`` defaults to what torch uses now (``benchmark.Timer`` alone would use one
    thread, which understates what the reader's machine does).
    """
    timer = benchmark.Timer(
        stmt="fn()",
        globals={"fn": fn},
        label=label,
        sub_label=sub_label or "median time",
        description=description,
        num_threads=num_threads or torch.get_num_threads(),
    )
    return timer.blocked_autorange(min_run_time=_run_time(min_run_time))


def machine_check(num_threads: int = 1, *, min_run_time: float = 0.02) -> dict[str, float]:
    """One round of the machine check: the median seconds of a 256x256 and a 512x512 float32 matmul.

    Run it beside the candidates, at their thread count, in every round; :class:`Comparison`
    reads a busy machine from it. Public so that a worker process timing its own rounds (chapter
    06) can report it with its times.
    """
    times = {}
    for size in CHECK_SIZES:
        matrix = torch.full((size, size), 0.5)
        timer = benchmark.Timer(stmt="m @ m", globals={"m": matrix}, num_threads=num_threads)
        times[str(size)] = timer.blocked_autorange(min_run_time=_run_time(min_run_time)).median
    return times


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile), interpolated as ``statistics.quantiles`` does."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def _ratio(value: float) -> str:
    """A ratio for the table: two decimals below 10, then fewer digits, never an exponent."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _factor(value: float) -> str:
    """A factor for a verdict ("2.4x", "23x", "5,229x"): what a reader can say aloud."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _format_seconds(seconds: float) -> str:
    """Three significant digits in the largest unit that keeps the number at least 1 (999.6 us is 1 ms)."""
    if seconds >= 1000:
        return f"{seconds:,.0f} s"  # .3g would print an exponent
    seconds = float(f"{seconds:.3g}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@dataclass(frozen=True)
class Comparison:
    """Per-round times of interleaved candidates, the machine check beside them, and the verdicts.

    ``times[name][k]`` is the median time of ``name`` in round ``k`` (seconds); ``baseline`` is
    the candidate every ratio is taken against; ``threshold`` is the smallest ratio that counts as
    a difference (1.1: ten per cent). ``checks[k]`` is round ``k``'s :func:`machine_check`, and
    ``num_threads`` the thread count both ran with. A Comparison without checks has no evidence
    that the machine was quiet: its table says so, and the book's tests refuse it.
    """

    label: str
    baseline: str
    times: Mapping[str, list[float]]
    threshold: float = 1.1
    checks: Sequence[Mapping[str, float]] = ()
    num_threads: int = 1

    @property
    def rounds(self) -> int:
        return len(self.times[self.baseline])

    def median_time(self, name: str) -> float:
        """The median over rounds of ``name``'s per-round median time, in seconds."""
        return statistics.median(self.times[name])

    def ratios(self, name: str) -> list[float]:
        """``time(name) / time(baseline)`` in each round: above 1, ``name`` is slower."""
        return [t / b for t, b in zip(self.times[name], self.times[self.baseline], strict=True)]

    def ratio(self, name: str) -> tuple[float, float, float]:
        """(first quartile, median, third quartile) of the per-round ratios of ``name``."""
        return _quartiles(self.ratios(name))

    def speedup(self, name: str) -> float:
        """How many times faster ``name`` is than the baseline (the median ratio, inverted)."""
        return 1.0 / self.ratio(name)[1]

    def check_ratios(self) -> list[float]:
        """Per round, the machine check's larger matmul time over its smaller (8x the work)."""
        small, large = (str(size) for size in CHECK_SIZES)
        return [check[large] / check[small] for check in self.checks]

    @property
    def stalled_rounds(self) -> int:
        """Rounds whose machine check took under 3x or over 20x the time for 8x the work: stalled threads."""
        low, high = QUIET_BAND
        return sum(not low <= ratio <= high for ratio in self.check_ratios())

    @property
    def busy(self) -> bool:
        """More than a quarter of the rounds stalled: enough to move the quartiles of every ratio."""
        return self.stalled_rounds > self.rounds // 4

    def clear(self, name: str) -> str:
        """"slower", "faster", "unclear" (the spread straddles the band), or "busy" (no verdict)."""
        if self.busy:
            return "busy"
        low, _, high = self.ratio(name)
        if low >= self.threshold:
            return "slower"
        if high <= 1.0 / self.threshold:
            return "faster"
        return "unclear"

    def verdict(self, name: str) -> str:
        """One line: ``name`` against the baseline, in words a reader can trust on this machine."""
        low, median, high = self.ratio(name)
        kind = self.clear(name)
        if kind == "busy":
            return f"{name} vs {self.baseline}: no verdict, {BUSY}; time it again when it is quiet"
        if kind == "slower":
            return f"{name}: {_factor(median)}x the time of {self.baseline} (slower)"
        if kind == "faster":
            return f"{name}: {_factor(1 / median)}x faster than {self.baseline}"
        return (f"{name} vs {self.baseline}: no clear difference on this machine "
                f"(middle rounds' ratio {_ratio(low)}-{_ratio(high)})")

    def machine_line(self) -> str:
        """The machine check in one line: quiet, busy, or not run."""
        if not self.checks:
            return "machine check: not run, so a busy machine cannot be told apart"
        if self.busy:
            return f"machine check: {BUSY}, {self.stalled_rounds} of {self.rounds} rounds stalled"
        median = statistics.median(self.check_ratios())
        return f"machine check: 8x the matmul work took {median:.1f}x the time: quiet"

    def table(self) -> str:
        """Median time per candidate, its ratio to the baseline with the spread, and the verdict."""
        width = max(len(name) for name in self.times)
        threads = f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}"
        lines = [f"{self.label}: {self.rounds} interleaved rounds, {threads}",
                 f"  {'':{width}}  {'median':>9}  {'x baseline (IQR)':>20}"]
        for name in self.times:
            low, median, high = self.ratio(name)
            spread = "baseline" if name == self.baseline else f"{_ratio(median)} ({_ratio(low)}-{_ratio(high)})"
            lines.append(f"  {name:{width}}  {_format_seconds(self.median_time(name)):>9}  {spread:>20}")
        lines.append(self.machine_line())
        lines += [textwrap.fill(self.verdict(name), width=80, subsequent_indent="  ")
                  for name in self.times if name != self.baseline]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def compare(
    candidates: Mapping[str, Callable[[], object]],
    *,
    label: str,
    baseline: str | None = None,
    rounds: int = 7,
    min_run_time: float = 0.1,
    threshold: float = 1.1,
    num_threads: int = 1,
    show: bool = True,
) -> Comparison:
    """Time the candidates in interleaved rounds and print the verdict table; return the Comparison.

    Each round runs ``benchmark.Timer.blocked_autorange`` once per candidate, in an order that
    rotates from round to round, so a burst of load costs every candidate alike, then the
    :func:`machine_check`. ``baseline`` (default: the first candidate) is what every ratio is
    taken against. ``num_threads`` is 1 unless threads are what the comparison is about: pass
    ``torch.get_num_threads()`` then, and say why in the text.
    """
    if len(candidates) < 2:
        raise ValueError(f"compare() needs at least two candidates to compare, got {list(candidates)}")
    if rounds < MIN_ROUNDS:
        raise ValueError(f"compare() needs at least {MIN_ROUNDS} rounds for a spread, got {rounds}")
    if threshold <= 1.0:
        raise ValueError(f"threshold is a ratio above 1 (1.1 means ten per cent), got {threshold}")
    if num_threads < 1:
        raise ValueError(f"num_threads is a thread count of at least 1, got {num_threads}")
    names = list(candidates)
    baseline = names[0] if baseline is None else baseline
    if baseline not in candidates:
        raise ValueError(f"baseline {baseline!r} is not one of the candidates {names}")
    timers = {
        name: benchmark.Timer(stmt="fn()", globals={"fn": fn}, label=label, description=name,
                              num_threads=num_threads)
        for name, fn in candidates.items()
    }
    times: dict[str, list[float]] = {name: [] for name in names}
    checks = []
    for round_index in range(rounds):
        start = round_index % len(names)
        for name in names[start:] + names[:start]:
            times[name].append(timers[name].blocked_autorange(min_run_time=_run_time(min_run_time)).median)
        checks.append(machine_check(num_threads))
    result = Comparison(label=label, baseline=baseline, times=times, threshold=threshold,
                        checks=checks, num_threads=num_threads)
    if show:
        print(result.table())
    return result
