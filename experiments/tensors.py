"""Deterministic order-3 tensor suite (seeded) for TTM/TTV, plus a FROSTT ``.tns`` reader.

Structures: power-law modes (coordinates drawn from Zipf-like distributions per mode, as in
real tensors such as NELL or Enron), uniform random, and a "fibre-heavy" tensor with long
mode-3 fibres.  Sizes: ``quick`` (thousands of nonzeros), ``full`` (about 1-2M nonzeros with
I x J small enough that the dense TTM output I x J x R stays under ~150 MB).
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

SIZES = {  # scale -> (I, J, K, nonzeros)
    "quick": (60, 50, 400, 6_000),
    "full": (700, 600, 20_000, 1_500_000),
}


def _rng(name: str, scale: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"spf-tensors/{name}/{scale}".encode()))


def _power_law(rng: np.random.Generator, n: int, size: int, alpha: float) -> np.ndarray:
    """Indices in [0, n) with P(k) ~ (k + 1)^-alpha, randomly permuted."""
    weights = 1.0 / np.arange(1, n + 1) ** alpha
    weights /= weights.sum()
    perm = rng.permutation(n)
    return perm[rng.choice(n, size=size, p=weights)]


def _unique(coords: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    key = np.ravel_multi_index(tuple(coords), shape)
    key = np.unique(key)
    return np.array(np.unravel_index(key, shape))


def build(name: str, scale: str) -> tuple[tuple[int, int, int], np.ndarray, np.ndarray]:
    """(shape, coords (3 x nnz, sorted, unique), values)."""
    I, J, K, nnz = SIZES[scale]
    rng = _rng(name, scale)
    if name == "powerlaw":
        coords = np.stack([_power_law(rng, I, nnz, 1.0), _power_law(rng, J, nnz, 1.0),
                           _power_law(rng, K, nnz, 1.2)])
    elif name == "uniform":
        coords = np.stack([rng.integers(0, n, nnz) for n in (I, J, K)])
    elif name == "long_fibres":
        fibres = nnz // 200
        ij = np.stack([rng.integers(0, I, fibres), rng.integers(0, J, fibres)])
        coords = np.concatenate([np.repeat(ij, 200, axis=1),
                                 rng.integers(0, K, (1, fibres * 200))])
    else:
        raise KeyError(name)
    coords = _unique(coords, (I, J, K))
    return (I, J, K), coords, rng.uniform(0.5, 1.5, coords.shape[1])


NAMES = ("powerlaw", "uniform", "long_fibres")


def suite(scale: str = "quick") -> Iterator[tuple[str, tuple, np.ndarray, np.ndarray]]:
    for name in NAMES:
        yield (name, *build(name, scale))


def load_frostt(path: str | Path) -> tuple[str, tuple, np.ndarray, np.ndarray]:
    """A FROSTT ``.tns`` file (1-based coordinates, value last) of order 3."""
    data = np.loadtxt(path, ndmin=2)
    if data.shape[1] != 4:
        raise ValueError(f"{path}: expected order-3 lines 'i j k value', got {data.shape[1]} "
                         "columns")
    coords = data[:, :3].astype(np.int64).T - 1
    shape = tuple(int(c.max()) + 1 for c in coords)
    return Path(path).stem, shape, coords, data[:, 3]
