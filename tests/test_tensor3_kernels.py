"""Order-3 kernels on CSF and DenseTensor3, against numpy einsum on the original input.

TTV ``y(i,j) = A(i,j,k) * x(k)`` and TTM ``C(i,j,l) = A(i,j,k) * B(k,l)`` (dense x and B);
empty tensor, one nonzero, empty slices and fibers, random tensors; CSF packing from
shuffled coordinates and its round trip through the relation.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import assert_compiles_clean

import spf

TTV = "y(i,j) = A(i,j,k) * x(k)"
TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
LAYOUTS = ["CSF", "DenseTensor3"]


@functools.cache
def compiled(expr: str, layout: str):
    k = spf.Kernel(expr, {"A": layout})
    assert_compiles_clean(k.c_source())
    return k.compile()


def tensor(kind: str, shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "empty":
        return np.zeros(shape)
    if kind == "one":
        a = np.zeros(shape)
        a[shape[0] - 1, 0, shape[2] - 1] = 1.5
        return a
    a = rng.uniform(-1, 1, shape) * (rng.random(shape) < (0.3 if kind == "random" else 1.0))
    if kind == "holes":      # empty slices i, empty fibers (i, j)
        a[1::3] = 0.0
        a[:, ::2] = 0.0
        a[0, 1] = 0.0
    return a


def pack(layout: str, dense: np.ndarray, seed: int = 0) -> spf.Tensor:
    if layout == "DenseTensor3":
        return spf.Tensor.from_dense(layout, dense)
    coords = np.nonzero(dense)
    perm = np.random.default_rng(seed + 50).permutation(len(coords[0]))
    coords = tuple(c[perm] for c in coords)
    return spf.Tensor.from_coords(layout, dense.shape, coords, dense[coords])


CASES = [("empty", (4, 5, 6), 0), ("one", (4, 5, 6), 0), ("holes", (7, 6, 5), 1),
         ("random", (6, 7, 8), 0), ("random", (6, 7, 8), 1), ("random", (3, 9, 4), 2),
         ("full", (3, 4, 5), 3), ("random", (1, 1, 1), 4), ("empty", (0, 3, 4), 0)]
IDS = [f"{k}-{'x'.join(map(str, s))}-{seed}" for k, s, seed in CASES]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind,shape,seed", CASES, ids=IDS)
def test_ttv(layout, kind, shape, seed):
    a = tensor(kind, shape, seed)
    x = np.random.default_rng(seed + 9).uniform(-1, 1, shape[2])
    y = compiled(TTV, layout)(A=pack(layout, a, seed), x=x)
    np.testing.assert_allclose(y, np.einsum("ijk,k->ij", a, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind,shape,seed", CASES, ids=IDS)
def test_ttm(layout, kind, shape, seed):
    a = tensor(kind, shape, seed)
    b = np.random.default_rng(seed + 19).uniform(-1, 1, (shape[2], 3))
    c = compiled(TTM, layout)(A=pack(layout, a, seed), B=b)
    np.testing.assert_allclose(c, np.einsum("ijk,kl->ijl", a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind,shape,seed", CASES, ids=IDS)
def test_csf_round_trip(kind, shape, seed):
    a = tensor(kind, shape, seed)
    T = pack("CSF", a, seed)
    assert T.shape == shape
    np.testing.assert_array_equal(T.to_dense(), a)
    assert_compiles_clean(spf.Kernel("D(i,j,k) = T(i,j,k)", {"T": "CSF"}).c_source())


def test_csf_arrays():
    """Fibers of a small tensor: root i in {0, 2}; (0,1), (0,3), (2,0); sorted per level."""
    coords = ([2, 0, 0, 0, 2], [0, 3, 1, 1, 0], [1, 0, 2, 0, 0])
    T = spf.Tensor.from_coords("CSF", (3, 4, 3), coords, [5.0, 4.0, 3.0, 2.0, 6.0])
    assert T["n0"] == 2
    assert T["idx0"].tolist() == [0, 2]
    assert T["ptr1"].tolist() == [0, 2, 3]
    assert T["idx1"].tolist() == [1, 3, 0]
    assert T["ptr2"].tolist() == [0, 2, 3, 5]
    assert T["idx2"].tolist() == [0, 2, 0, 0, 1]
    assert T["data"].tolist() == [2.0, 3.0, 4.0, 6.0, 5.0]


def test_csf_rejects_unsorted_roots():
    fields = {"dim0": 3, "dim1": 2, "dim2": 2, "n0": 2, "idx0": [2, 0], "ptr1": [0, 1, 2],
              "idx1": [0, 0], "ptr2": [0, 1, 2], "idx2": [0, 0], "data": [1.0, 2.0]}
    with pytest.raises(spf.ArgumentError, match="idx0"):
        spf.Tensor.from_arrays("CSF", (3, 2, 2), fields)
