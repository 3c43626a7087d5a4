"""Make runs repeatable: one call seeds every random generator a notebook uses.

The device itself is chosen in each notebook with ``torch.accelerator``, where the reader sees it.
"""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["seed_everything"]


def seed_everything(seed: int = 0) -> None:
    """Seed Python's ``random``, NumPy and torch (every accelerator too).

    Seeding all three matters: a data pipeline that shuffles with ``random`` and a model that
    initialises with torch are only reproducible together.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA / MPS device
