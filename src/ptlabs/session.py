"""The one call after a chapter picks its device: seed, print options, plot style."""

from __future__ import annotations

import torch

from .device import seed_everything
from .plotting import use_book_style
from .printing import set_print_options

__all__ = ["setup"]


def setup(device: torch.device, seed: int = 0) -> None:
    """Seed everything, set print options and plot style, and name the notebook's device.

    The device is chosen in the notebook, where the reader sees the torch call that picks it;
    the printed line says at once where the notebook runs.
    """
    seed_everything(seed)
    set_print_options()
    use_book_style()
    print(f"torch {torch.__version__} · device: {torch.device(device).type} · seed {seed}")
