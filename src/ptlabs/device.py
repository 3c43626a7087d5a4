"""Pick one device for the whole notebook and make runs repeatable.

The book is device-first: a notebook asks for its device once and passes it around, so the
same code runs on a laptop CPU, a CUDA or ROCm GPU, or Apple's MPS without edits.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["pick_device", "seed_everything"]


def pick_device(prefer: str | None = None) -> torch.device:
    """Return the best available device, or the one named by ``prefer`` / ``$PTLABS_DEVICE``.

    Order: CUDA (also ROCm builds, which answer to ``cuda``), then MPS, then CPU. Naming a
    device that is not available raises instead of silently falling back, because a silent
    fallback is how a "GPU run" turns out to have been a CPU run.
    """
    name = prefer or os.environ.get("PTLABS_DEVICE")
    if name is not None:
        device = torch.device(name)
        if not _is_available(device):
            raise RuntimeError(f"device {name!r} was requested but is not available on this machine")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _is_available(device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index is None or device.index < torch.cuda.device_count())
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return False


def seed_everything(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and torch (every CUDA device too).

    Seeding all three matters: a data pipeline that shuffles with ``random`` and a model that
    initialises with torch are only reproducible together.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
