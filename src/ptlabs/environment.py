"""A short report of the software and devices a notebook runs on.

Paste it into a bug report or compare it with a classmate's: most "works on my machine"
problems are a difference in one of these lines.
"""

from __future__ import annotations

import platform

import numpy
import torch

__all__ = ["environment_report", "format_report"]


def environment_report() -> dict[str, str]:
    """Collect versions and devices as strings (``"none"`` where a component is absent)."""
    report = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "cuda runtime (bundled)": torch.version.cuda or "none",
        "rocm/hip": torch.version.hip or "none",
        "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none",
        "cuda available": str(torch.cuda.is_available()),
        "mps available": str(torch.backends.mps.is_available()),
        "cpu threads": str(torch.get_num_threads()),
    }
    for index in range(torch.cuda.device_count()):
        report[f"cuda:{index}"] = torch.cuda.get_device_name(index)
    report["numpy"] = numpy.__version__
    return report


def format_report(report: dict[str, str] | None = None) -> str:
    """Render a report as aligned ``key : value`` lines."""
    report = environment_report() if report is None else report
    width = max(map(len, report))
    return "\n".join(f"{key:<{width}} : {value}" for key, value in report.items())
