"""Matrix kernels on the order-2 layouts, against numpy on the original dense input.

- SpMV ``y(i) = A(i,j) * x(j)`` (dense x) for DCSR, LowerTri, DIA, ELL, CUDAmma16x16 and BCSR
  (B = 8 and B = 3), plus the packer round trip through the layout relation (``to_dense``).
- SpMSpM with a dense output ``C(i,j) = A(i,k) * B(k,j)`` for every ordered pair of
  {COO, CSR, DCSR, BCSR, LowerTri}.
- The dense iteration-space bound ``j <= i`` on SpMV.
- Padding slots (ELL, DIA) are never read; packers reject what their layout cannot store.

Inputs are packed from coordinates in a shuffled order (packers take any order).  Every
kernel is built once (module cache) and its C is compiled with -Wall -Werror.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from conftest import assert_compiles_clean, covering, lanes

import spf

SPMV = "y(i) = A(i,j) * x(j)"
SPMSPM = "C(i,j) = A(i,k) * B(k,j)"


# -- helpers ------------------------------------------------------------------------------
@functools.cache
def compiled(expr: str, layouts: tuple, params: tuple = (), bounds: str | None = None):
    """Build, check (-Werror) and compile a kernel once per layout combination."""
    k = spf.Kernel(expr, dict(layouts), params={t: dict(p) for t, p in params}, bounds=bounds)
    assert_compiles_clean(k.c_source())
    return k.compile()


def pack(layout: str, dense: np.ndarray, params: dict | None = None, seed: int = 0) -> spf.Tensor:
    """Pack the nonzeros of ``dense`` given in a shuffled order."""
    coords = np.nonzero(dense)
    perm = np.random.default_rng(seed + 1000).permutation(len(coords[0]))
    coords = tuple(c[perm] for c in coords)
    return spf.Tensor.from_coords(layout, dense.shape, coords, dense[coords], **(params or {}))


def matrix(kind: str, shape: tuple[int, int], seed: int = 0, lower: bool = False) -> np.ndarray:
    """A test matrix; ``lower`` keeps only the lower triangle (for LowerTri)."""
    rng = np.random.default_rng(seed)
    m, n = shape
    if kind == "empty":
        a = np.zeros(shape)
    elif kind == "one":
        a = np.zeros(shape)
        if m and n:
            a[m - 1, 0 if lower else n - 1] = 2.5
    elif kind == "empty_rows":
        a = rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.3)
        a[::3] = 0.0          # empty rows, including the first and (often) the last
        a[:, 1::4] = 0.0      # and empty columns
    elif kind == "random":
        a = rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.2)
    elif kind == "dense_row":  # one full row: ELL width = numCols, DIA with many diagonals
        a = rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.1)
        if m:
            a[m // 2] = rng.uniform(0.5, 1, n)
    elif kind == "full":
        a = rng.uniform(0.5, 1, shape)
    else:
        raise ValueError(kind)
    return np.tril(a) if lower else a


# -- SpMV ---------------------------------------------------------------------------------
GENERAL = [("DCSR", {}), ("DIA", {}), ("ELL", {}), ("BCSR", {"B": 8}), ("BCSR", {"B": 3})]
GENERAL_CASES = [
    ("empty", (20, 30), 0), ("one", (20, 30), 0), ("empty_rows", (20, 30), 1),
    ("random", (20, 30), 0), ("random", (30, 20), 1), ("random", (17, 23), 2),
    ("dense_row", (20, 30), 3), ("full", (7, 5), 4), ("random", (1, 1), 5),
    ("empty", (0, 5), 0), ("empty", (5, 0), 0),
]
LOWER_CASES = [("empty", (12, 12), 0), ("one", (12, 12), 0), ("empty_rows", (20, 20), 1),
               ("random", (20, 20), 0), ("random", (20, 20), 1), ("full", (9, 9), 2),
               ("empty", (0, 0), 0)]


def mma_matrix(kind: str, seed: int = 0) -> np.ndarray:
    """16x16 with at most one nonzero per aligned column pair of each row."""
    rng = np.random.default_rng(seed)
    a = np.zeros((16, 16))
    if kind == "one":
        a[15, 15] = -3.0
    elif kind in ("random", "full"):
        keep = rng.random((16, 8)) < (1.0 if kind == "full" else 0.6)
        which = rng.integers(0, 2, (16, 8))
        r, pj = np.nonzero(keep)
        a[r, 2 * pj + which[r, pj]] = rng.uniform(-1, 1, len(r))
    elif kind == "odd_columns":
        a[:, 1::2] = rng.uniform(0.5, 1, (16, 8))
    return a


MMA_CASES = [("empty", 0), ("one", 0), ("random", 0), ("random", 1), ("random", 2),
             ("full", 3), ("odd_columns", 4)]

SPMV_CASES = (
    [pytest.param(lay, prm, matrix(k, s, seed),
                  id=f"{lay}{prm.get('B', '')}-{k}-{s[0]}x{s[1]}-{seed}")
     for lay, prm in GENERAL for k, s, seed in GENERAL_CASES]
    + [pytest.param("LowerTri", {}, matrix(k, s, seed, lower=True),
                    id=f"LowerTri-{k}-{s[0]}x{s[1]}-{seed}") for k, s, seed in LOWER_CASES]
    + [pytest.param("CUDAmma16x16", {}, mma_matrix(k, seed), id=f"CUDAmma16x16-{k}-{seed}")
       for k, seed in MMA_CASES]
)


@pytest.mark.parametrize("layout,params,dense", SPMV_CASES)
def test_spmv(layout, params, dense):
    A = pack(layout, dense, params)
    x = np.random.default_rng(7).uniform(-1, 1, dense.shape[1])
    f = compiled(SPMV, (("A", layout),), (("A", tuple(params.items())),))
    np.testing.assert_allclose(f(A=A, x=x), dense @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout,params,dense", SPMV_CASES)
def test_round_trip(layout, params, dense):
    """Packer + relation: the generated unpacking kernel gives back the input."""
    A = pack(layout, dense, params, seed=3)
    assert A.shape == dense.shape
    np.testing.assert_array_equal(A.to_dense(), dense)


@pytest.mark.parametrize("layout,params", GENERAL + [("LowerTri", {}), ("CUDAmma16x16", {})],
                         ids=lambda v: v if isinstance(v, str) else str(v.get("B", "")))
def test_unpack_kernel_compiles_clean(layout, params):
    k = spf.Kernel("D(i,j) = T(i,j)", {"T": layout}, params={"T": params})
    assert_compiles_clean(k.c_source())


# -- dense iteration-space bound ----------------------------------------------------------
BOUND_LAYOUTS = [("DenseMatrix", {}), ("CSR", {}), ("DCSR", {}), ("DIA", {}), ("ELL", {}),
                 ("BCSR", {"B": 3}), ("LowerTri", {})]


@pytest.mark.parametrize("layout,params", BOUND_LAYOUTS,
                         ids=[f"{lay}{p.get('B', '')}" for lay, p in BOUND_LAYOUTS])
@pytest.mark.parametrize("kind,shape,seed", [("random", (20, 30), 0), ("random", (30, 20), 1),
                                             ("empty_rows", (20, 20), 2), ("one", (20, 20), 0),
                                             ("empty", (20, 20), 0)])
def test_spmv_lower_bound(layout, params, kind, shape, seed):
    if layout == "LowerTri":
        shape = (shape[0], shape[0])
    dense = matrix(kind, shape, seed, lower=layout == "LowerTri")
    A = (spf.Tensor.from_dense(layout, dense) if layout == "DenseMatrix"
         else pack(layout, dense, params))
    x = np.random.default_rng(seed).uniform(-1, 1, shape[1])
    f = compiled(SPMV, (("A", layout),), (("A", tuple(params.items())),), bounds="j <= i")
    np.testing.assert_allclose(f(A=A, x=x), np.tril(dense) @ x, rtol=1e-12, atol=1e-12)


# -- SpMSpM, dense output -----------------------------------------------------------------
SPMSPM_LAYOUTS = ["COO", "CSR", "DCSR", "BCSR", "LowerTri"]
SPMSPM_CASES = [("empty", "random", 0), ("random", "empty", 0), ("one", "one", 0),
                ("one", "random", 1), ("empty_rows", "empty_rows", 2),
                ("random", "random", 3), ("random", "random", 4), ("random", "random", 5)]


def spmspm_case(la: str, lb: str, ka: str, kb: str, seed: int, b_param: int = 8):
    square = "LowerTri" in (la, lb)
    m, k, n = (16, 16, 16) if square else (20, 17, 25)
    a = matrix(ka, (m, k), seed, lower=la == "LowerTri")
    b = matrix(kb, (k, n), seed + 100, lower=lb == "LowerTri")
    pa = {"B": b_param} if la == "BCSR" else {}
    pb = {"B": b_param} if lb == "BCSR" else {}
    f = compiled(SPMSPM, (("A", la), ("B", lb)), (("A", tuple(pa.items())),
                                                   ("B", tuple(pb.items()))))
    C = f(A=pack(la, a, pa, seed), B=pack(lb, b, pb, seed + 1))
    np.testing.assert_allclose(C, a @ b, rtol=1e-12, atol=1e-12)


SPMSPM_PAIRS = list(itertools.product(SPMSPM_LAYOUTS, repeat=2))


@pytest.mark.parametrize("la,lb,ka,kb,seed", lanes(
    [(*pair, *case) for pair in SPMSPM_PAIRS for case in SPMSPM_CASES],
    {(*pair, *case) for pair, case in covering(SPMSPM_PAIRS, SPMSPM_CASES)},
    lambda c: "-".join(map(str, c))))
def test_spmspm_dense_output(la, lb, ka, kb, seed):
    spmspm_case(la, lb, ka, kb, seed)


@pytest.mark.parametrize("la,lb", [("BCSR", "BCSR"), ("BCSR", "COO"), ("LowerTri", "BCSR")])
@pytest.mark.parametrize("seed", [0, 1])
def test_spmspm_bcsr3(la, lb, seed):
    spmspm_case(la, lb, "random", "random", seed, b_param=3)


def test_spmspm_mma_tiles():
    a, b = mma_matrix("random", 1), mma_matrix("full", 2)
    f = compiled(SPMSPM, (("A", "CUDAmma16x16"), ("B", "CUDAmma16x16")))
    C = f(A=pack("CUDAmma16x16", a), B=pack("CUDAmma16x16", b))
    np.testing.assert_allclose(C, a @ b, rtol=1e-12, atol=1e-12)
    # a sparse operand of another size must agree with the constant 16
    c = matrix("random", (16, 9), 3)
    f = compiled(SPMSPM, (("A", "CUDAmma16x16"), ("B", "CSR")))
    np.testing.assert_allclose(f(A=pack("CUDAmma16x16", a), B=pack("CSR", c)), a @ c,
                               rtol=1e-12, atol=1e-12)
    d = matrix("random", (5, 16), 4)
    f = compiled(SPMSPM, (("A", "DCSR"), ("B", "CUDAmma16x16")))
    np.testing.assert_allclose(f(A=pack("DCSR", d), B=pack("CUDAmma16x16", b)), d @ b,
                               rtol=1e-12, atol=1e-12)


# -- padding is never read ----------------------------------------------------------------
def test_ell_padding_is_never_read():
    # row 0 is full; rows 1.. have padding slots (column -1) holding garbage values
    col_idx = np.array([[0, 1, 2], [2, -1, -1], [-1, -1, -1], [0, 2, -1]])
    data = np.array([[1.0, 2.0, 3.0], [4.0, 1e300, 1e300], [1e300, 1e300, 1e300],
                     [5.0, 6.0, 1e300]])
    T = spf.Tensor.from_arrays("ELL", (4, 3), {"numRows": 4, "numCols": 3, "width": 3,
                                               "colIdx": col_idx, "data": data})
    expected = np.array([[1.0, 2.0, 3.0], [0, 0, 4.0], [0, 0, 0], [5.0, 0, 6.0]])
    np.testing.assert_array_equal(T.to_dense(), expected)
    x = np.array([1.0, -1.0, 0.5])
    f = compiled(SPMV, (("A", "ELL"),))
    np.testing.assert_allclose(f(A=T, x=x), expected @ x)


def test_dia_padding_is_never_read():
    # offsets -2, 0, 3 on a 4x5 matrix; slots outside the matrix hold garbage
    offset = np.array([-2, 0, 3])
    data = np.array([[1e300, 1e300, 1.0, 2.0],
                     [3.0, 4.0, 5.0, 6.0],
                     [7.0, 8.0, 1e300, 1e300]])
    T = spf.Tensor.from_arrays("DIA", (4, 5), {"numRows": 4, "numCols": 5, "numDiags": 3,
                                               "offset": offset, "data": data})
    expected = np.zeros((4, 5))
    for d, off in enumerate(offset):
        for i in range(4):
            if 0 <= i + off < 5:
                expected[i, i + off] = data[d, i]
    np.testing.assert_array_equal(T.to_dense(), expected)
    x = np.arange(1.0, 6.0)
    f = compiled(SPMV, (("A", "DIA"),))
    np.testing.assert_allclose(f(A=T, x=x), expected @ x)


# -- packers and validation -----------------------------------------------------------------
def test_lowertri_rejects_upper_entries():
    a = np.tril(np.ones((4, 4)))
    a[1, 3] = 7.0
    with pytest.raises(ValueError, match=r"entry \(1, 3\) cannot be stored in LowerTri: its "
                                         r"relation requires gj <= gi"):
        spf.Tensor.from_dense("LowerTri", a)
    with pytest.raises(ValueError, match=r"stores tensors of shape \(numRows, numRows\)"):
        spf.Tensor.from_dense("LowerTri", np.tril(np.ones((4, 5))))


def test_cudamma_rejects_what_it_cannot_store():
    a = np.zeros((16, 16))
    a[3, 4] = a[3, 5] = 1.0
    with pytest.raises(ValueError, match=r"cannot hold both entries \(3, 4\) and \(3, 5\)"):
        spf.Tensor.from_dense("CUDAmma16x16", a)
    with pytest.raises(ValueError, match=r"16x16"):
        spf.Tensor.from_dense("CUDAmma16x16", np.eye(8))


def test_cudamma_packing_positions():
    """data[pi][pj] holds the kept value of columns 2*pj, 2*pj+1; offset[32*pi+4*pj+1] which."""
    T = pack("CUDAmma16x16", mma_matrix("one"))
    assert T.shape == (16, 16)
    assert T["offset"][32 * 15 + 4 * 7 + 1] == 1 and T["data"][15 * 8 + 7] == -3.0
    assert np.count_nonzero(T["offset"]) == 1 and np.count_nonzero(T["data"]) == 1


def test_level_format_fixture():
    """The 9x12 fixture of the level-format notes: DCSR rowIdx 0 1 2 3 5 6 8, DIA offsets
    -1 0 3 6."""
    rows = [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3, 5, 5, 5, 5, 6, 6, 6, 8, 8]
    cols = [0, 3, 6, 0, 1, 4, 1, 2, 2, 3, 6, 9, 4, 5, 8, 11, 5, 6, 9, 8, 11]
    vals = np.arange(1.0, 22.0)
    perm = np.random.default_rng(0).permutation(21)
    T = spf.Tensor.from_coords("DCSR", (9, 12), (np.array(rows)[perm], np.array(cols)[perm]),
                               vals[perm])
    assert T["rowIdx"].tolist() == [0, 1, 2, 3, 5, 6, 8]
    assert T["rowPtr"].tolist() == [0, 3, 6, 8, 12, 16, 19, 21]
    assert T["colIdx"].tolist() == cols
    D = spf.Tensor.from_coords("DIA", (9, 12), (rows, cols), vals)
    assert D["offset"].tolist() == [-1, 0, 3, 6]
    E = spf.Tensor.from_coords("ELL", (9, 12), (rows, cols), vals)
    assert E["width"] == 4
    dense = np.zeros((9, 12))
    dense[rows, cols] = vals
    for t in (T, D, E):
        np.testing.assert_array_equal(t.to_dense(), dense)


@pytest.mark.parametrize("layout,fields,message", [
    ("DIA", {"numRows": 3, "numCols": 3, "numDiags": 2, "offset": [1, 0],
             "data": np.zeros(6)}, "monotonic"),
    ("DIA", {"numRows": 3, "numCols": 3, "numDiags": 1, "offset": [3],
             "data": np.zeros(3)}, "range"),
    ("ELL", {"numRows": 2, "numCols": 3, "width": 1, "colIdx": [[-2], [0]],
             "data": np.zeros(2)}, "range"),
    ("DCSR", {"numRows": 4, "numCols": 3, "numNZRows": 2, "rowIdx": [2, 1],
              "rowPtr": [0, 1, 2], "colIdx": [0, 0], "data": np.zeros(2)}, "monotonic"),
    ("CUDAmma16x16", {"data": np.zeros(128), "offset": np.full(512, 2)}, "range"),
])
def test_invalid_arrays_are_rejected(layout, fields, message):
    lay = spf.load_layout(layout)
    shape = tuple(s.evaluate({k: v for k, v in fields.items() if isinstance(v, int)})
                  for s in lay.shape)
    with pytest.raises(spf.ArgumentError, match=message):
        spf.Tensor.from_arrays(layout, shape, fields)
