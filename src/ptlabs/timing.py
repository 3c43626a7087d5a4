"""Timing through ``torch.utils.benchmark``, the way the book measures every speed claim.

``benchmark.Timer`` warms up, synchronises CUDA, picks the number of runs and reports a
median with its spread; a hand-written ``time.time()`` loop does none of that. These helpers
only save the boilerplate of building several timers and comparing their medians.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch.utils import benchmark

__all__ = ["measure", "compare", "speedup", "noise_note"]


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
    return timer.blocked_autorange(min_run_time=min_run_time)


def compare(
    candidates: Mapping[str, Callable[[], object]],
    *,
    label: str,
    sub_label: str = "",
    min_run_time: float = 0.5,
) -> dict[str, benchmark.Measurement]:
    """Time each candidate and print ``benchmark.Compare``'s table; return the measurements by name."""
    if not candidates:
        raise ValueError("compare() needs at least one candidate to time")
    results = {
        name: measure(fn, label=label, sub_label=sub_label, description=name, min_run_time=min_run_time)
        for name, fn in candidates.items()
    }
    comparison = benchmark.Compare(list(results.values()))
    comparison.trim_significant_figures()
    comparison.print()
    return results


def speedup(baseline: benchmark.Measurement, candidate: benchmark.Measurement) -> float:
    """How many times faster ``candidate`` is than ``baseline``, from their medians."""
    return baseline.median / candidate.median


def noise_note(measurements: Mapping[str, benchmark.Measurement], spread: float = 0.25) -> str:
    """A line warning that a timing is unreliable when its spread (IQR) exceeds ``spread`` of its median.

    A verdict computed from medians is only as good as the medians: on a busy machine (another
    program, a test run) one candidate can be inflated several times, and the spread shows it.
    Returns "" when every measurement is steady, else the warning on a line of its own.
    """
    if any(m.iqr > spread * m.median for m in measurements.values()):
        return f"\n(noisy: the spread is over {spread:.0%} of the median; rerun when idle)"
    return ""
