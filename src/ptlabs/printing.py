"""Print options that make tensors print the same on every machine.

nbval compares printed outputs with the committed ones, so printed numbers are rounded to
fewer digits than float32 rounding noise between CPUs can change.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["set_print_options", "PRECISION"]

PRECISION = 4


def set_print_options(precision: int = PRECISION) -> None:
    """Round printed tensors and arrays to ``precision`` digits, no scientific notation."""
    torch.set_printoptions(precision=precision, sci_mode=False, linewidth=80)
    np.set_printoptions(precision=precision, suppress=True, linewidth=80)
