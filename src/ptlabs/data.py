"""Small datasets for the DataLoader lessons, kept in an importable module.

With the ``spawn`` and ``forkserver`` start methods (the defaults on macOS and Windows, and on
Linux from Python 3.14), every DataLoader worker is a fresh interpreter that *imports* the
dataset's class by name. A class defined in a notebook cell lives in ``__main__`` and cannot be
imported that way, so the datasets that chapters run with ``num_workers > 0`` live here.
They are infrastructure for the experiments (a slow item, a random item), not the lesson.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

__all__ = ["NumpyNoise", "SlowSquares"]


class SlowSquares(Dataset):
    """Item ``i`` is the float32 tensor ``[i, i**2]``, returned after sleeping ``delay_s`` seconds.

    The sleep stands for slow loading (disk, decoding, augmentation) and releases the GIL, so
    worker processes can overlap it: a loader with two workers should take about half as long.
    """

    def __init__(self, n: int, delay_s: float = 0.0) -> None:
        if n < 0 or delay_s < 0:
            raise ValueError("n and delay_s must be non-negative")
        self.n = n
        self.delay_s = delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for SlowSquares({self.n})")
        if self.delay_s:
            time.sleep(self.delay_s)
        return torch.tensor([index, index * index], dtype=torch.float32)


class NumpyNoise(Dataset):
    """Item ``i`` is ``(worker id, a NumPy random float)``; the worker id is -1 in the main process.

    ``seed=None`` draws from NumPy's *global* RNG (``np.random.random``). An integer seed gives
    the dataset its *own* ``np.random.Generator`` in ``self.rng``: a forked worker inherits a copy
    of it, so every worker draws the same stream unless a ``worker_init_fn`` reseeds it.
    """

    def __init__(self, n: int, seed: int | None = None) -> None:
        self.n = n
        self.rng = None if seed is None else np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[int, float]:
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for NumpyNoise({self.n})")
        info = get_worker_info()
        worker = -1 if info is None else info.id
        value = np.random.random() if self.rng is None else self.rng.random()
        return worker, float(value)
