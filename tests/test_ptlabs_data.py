"""`ptlabs.data`: the small datasets chapter 03 runs with DataLoader workers."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import ptlabs
from ptlabs.data import NumpyNoise, SlowSquares


def test_exported_from_the_package() -> None:
    assert ptlabs.SlowSquares is SlowSquares
    assert ptlabs.NumpyNoise is NumpyNoise


def test_slow_squares_items_and_length() -> None:
    data = SlowSquares(5)
    assert len(data) == 5
    assert torch.equal(data[3], torch.tensor([3.0, 9.0]))
    assert data[0].dtype == torch.float32
    with pytest.raises(IndexError):
        data[5]
    with pytest.raises(ValueError):
        SlowSquares(3, delay_s=-1.0)


def test_slow_squares_sleeps() -> None:
    data = SlowSquares(2, delay_s=0.02)
    start = time.perf_counter()
    data[0]
    assert time.perf_counter() - start >= 0.02


def test_slow_squares_batches_in_a_loader() -> None:
    batches = list(DataLoader(SlowSquares(5), batch_size=2))
    assert [tuple(b.shape) for b in batches] == [(2, 2), (2, 2), (1, 2)]


def test_numpy_noise_global_rng_follows_np_seed() -> None:
    data = NumpyNoise(3)
    np.random.seed(1)
    first = [data[i] for i in range(3)]
    np.random.seed(1)
    again = [data[i] for i in range(3)]
    assert first == again
    assert all(worker == -1 for worker, _ in first)


def test_numpy_noise_own_generator_is_seeded() -> None:
    a, b = NumpyNoise(4, seed=7), NumpyNoise(4, seed=7)
    assert [a[i] for i in range(4)] == [b[i] for i in range(4)]
    assert isinstance(a.rng, np.random.Generator)
    with pytest.raises(IndexError):
        a[4]
