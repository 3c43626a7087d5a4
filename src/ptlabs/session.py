"""The one call at the top of every chapter: device, seed, print options, plot style."""

from __future__ import annotations

import torch

from .device import pick_device, seed_everything
from .plotting import use_book_style
from .printing import set_print_options

__all__ = ["setup"]


def setup(seed: int = 0, device: str | None = None) -> torch.device:
    """Seed everything, set print options and plot style; return the notebook's device.

    Prints one line naming the device so a reader sees at once where the notebook runs.
    """
    seed_everything(seed)
    set_print_options()
    use_book_style()
    chosen = pick_device(device)
    print(f"torch {torch.__version__} · device: {chosen.type} · seed {seed}")
    return chosen
