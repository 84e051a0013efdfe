"""Property-based tests: random sparse operands for every kernel x layout pair, against numpy.

Hypothesis draws the shapes (empty, one row or column, long thin, square), the stored
coordinates (none, one, many, the whole matrix), the values (explicit zeros included) and, for
layouts that allow it, the storage order (shuffled COO, SV_unsorted, CSR_unsorted rows) and
duplicate coordinates (CSR_unsorted may repeat a column within a row: the kernel must add
them).  Each kernel is generated and compiled once per layout combination; every example runs
the compiled C and compares with a dense numpy product of the same operands.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import assert_compiles_clean, covering, lanes, pairwise
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spf

pytestmark = pytest.mark.fuzz
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPMV = "y(i) = A(i,j) * x(j)"
SPMSPM = "C(i,j) = A(i,k) * B(k,j)"
DOT = "v = a(i) * b(i)"
TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
PARAMS = {"BCSR": {"B": 3}}
MATRIX_LAYOUTS = ["CSR", "CSR_unsorted", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "DIA",
                  "ELL", "LowerTri", "DenseMatrix"]
VECTOR_LAYOUTS = ["SV", "SV_unsorted", "SV_decreasing"]
UNORDERED = {"COO", "SV_unsorted", "CSR_unsorted"}      # any storage order is valid
MULTIPLE = {"COO", "SortedCOO"}     # a search by one coordinate matches several entries


@functools.cache
def compiled(expr: str, layouts: tuple, find: str = "auto") -> spf.kernel.CompiledKernel:
    lay = dict(layouts)
    params = {t: PARAMS[name] for t, name in lay.items() if name in PARAMS}
    k = spf.Kernel(expr, lay, params=params, find=find)
    assert_compiles_clean(k.c_source())
    return k.compile()


# --- strategies -----------------------------------------------------------------------------
EXTENTS = st.sampled_from([0, 1, 2, 3, 5, 8, 13, 40])
VALUES = st.one_of(st.just(0.0), st.integers(-8, 8).map(float),
                   st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False))


@st.composite
def coords_in(draw, shape: tuple[int, ...], lower: bool = False) -> list[tuple[int, ...]]:
    """Unique coordinates inside ``shape``: none, one, some, or every position."""
    if 0 in shape:
        return []
    cells = [tuple(int(v) for v in c) for c in np.ndindex(*shape)
             if not lower or c[0] >= c[1]]
    kind = draw(st.sampled_from(["some", "some", "some", "none", "one", "all"]))
    if kind == "none":
        return []
    if kind == "all":
        return cells
    if kind == "one":
        return [draw(st.sampled_from(cells))]
    return draw(st.lists(st.sampled_from(cells), unique=True, max_size=min(len(cells), 60)))


class Operand(np.ndarray):
    """A dense array that remembers its stored entries (``coords``, ``values``): explicit
    zeros included, in the drawn order."""
    coords: tuple[np.ndarray, ...]
    values: np.ndarray


@st.composite
def dense_operand(draw, shape: tuple[int, ...], lower: bool = False) -> Operand:
    """A dense array with entries (some of them explicit zeros) at drawn coordinates."""
    cells = draw(coords_in(shape, lower))
    values = np.array([draw(VALUES) for _ in cells], dtype=np.float64)
    a = np.zeros(shape).view(Operand)
    coords = tuple(np.array([c[d] for c in cells], dtype=np.int64) for d in range(len(shape)))
    a[coords] = values
    a.coords, a.values = coords, values
    return a


@st.composite
def stored(draw, layout: str, a: Operand) -> spf.Tensor:
    """``a``'s entries in ``layout``, given in a drawn order; unordered layouts keep that
    order and CSR_unsorted may split an entry into two with the same column (duplicates are
    added by kernels)."""
    if layout.startswith("Dense"):
        return spf.Tensor.from_dense(layout, np.asarray(a))
    coords, values = a.coords, a.values
    perm = np.array(draw(st.permutations(range(len(values)))), dtype=np.int64)
    coords, values = tuple(c[perm] for c in coords), values[perm]
    if layout in ("COO", "SV_unsorted"):
        fields = {"COO": lambda: {"numRows": a.shape[0], "numCols": a.shape[1],
                                  "numNNZ": len(values), "rowIdx": coords[0],
                                  "colIdx": coords[1], "data": values},
                  "SV_unsorted": lambda: {"size": a.shape[0], "len": len(values),
                                          "idx": coords[0], "val": values}}[layout]()
        return spf.Tensor.from_arrays(layout, a.shape, fields)
    if layout == "CSR_unsorted":
        rows, cols = coords
        split = draw(st.booleans()) and len(values) > 0
        if split:      # one entry stored twice with halves of its value
            rows, cols = np.append(rows, rows[0]), np.append(cols, cols[0])
            values = np.append(values, values[0] / 2)
            values[0] /= 2
        order = np.argsort(rows, kind="stable")          # rows grouped, columns as drawn
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=a.shape[0]))])
        return spf.Tensor.from_arrays(layout, a.shape, {
            "numRows": a.shape[0], "numCols": a.shape[1], "rowPtr": ptr,
            "colIdx": cols[order], "data": values[order]})
    return spf.Tensor.from_coords(layout, a.shape, coords, values, **PARAMS.get(layout, {}))


def matrix_shape(layout: str):
    if layout == "LowerTri":
        return EXTENTS.map(lambda n: (n, n))
    return st.tuples(EXTENTS, EXTENTS)


def close(got, want) -> None:
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * (1 + np.abs(want).max(initial=0)))


# --- SpMV and SpMSpV ------------------------------------------------------------------------
FINDS = ["auto", "seqiter", "densemap", "hashmap", "binsearch", "loop"]
MATRICES = MATRIX_LAYOUTS + ["CUDAmma16x16"]
MATRIX_VECTOR = [(a, "DenseVector", "auto") for a in MATRICES] + \
    [(a, x, f) for a in MATRICES for x in VECTOR_LAYOUTS for f in FINDS]


def ids(case: tuple) -> str:
    return "-".join(map(str, case))


def refused(find: str, layouts: tuple[str, ...]) -> bool:
    """The only forced finds Z3 may refuse: an ordered search in an unordered operand (a
    kernel whose loops need no lookup, e.g. a dense matrix times a sparse vector, takes any),
    and a dense position map where a search matches several entries (a coordinate layout's
    row k holds many)."""
    return (find in ("seqiter", "binsearch") and bool(UNORDERED & set(layouts))) or \
        (find == "densemap" and bool(MULTIPLE & set(layouts)))


@st.composite
def mma_operand(draw) -> Operand:
    """A 16x16 matrix with at most one entry per aligned column pair of a row (CUDAmma16x16)."""
    pairs = draw(st.lists(st.tuples(st.integers(0, 15), st.integers(0, 7)), unique=True,
                          max_size=128))
    cells = [(r, 2 * p + draw(st.integers(0, 1))) for r, p in pairs]
    values = np.array([draw(VALUES) for _ in cells], dtype=np.float64)
    a = np.zeros((16, 16)).view(Operand)
    a.coords = tuple(np.array([c[d] for c in cells], dtype=np.int64) for d in range(2))
    a.values = values
    a[a.coords] = values
    return a


# every matrix layout with a dense x, and with every vector layout and every find (a
# pairwise covering of their product); the fast lane: every layout and find once, a dense x
# with every fourth matrix layout
FAST_MV = covering(MATRICES, VECTOR_LAYOUTS, FINDS) \
    | {(a, "DenseVector", "auto") for a in MATRICES[::4]}


@pytest.mark.parametrize("a_layout,x_layout,find", lanes(
    MATRIX_VECTOR[:len(MATRICES)] + pairwise(MATRIX_VECTOR[len(MATRICES):],
                                             sorted(FAST_MV - set(MATRIX_VECTOR[:len(MATRICES)]))),
    FAST_MV, ids))
@SETTINGS
@given(data=st.data())
def test_matrix_vector(a_layout, x_layout, find, data):
    try:
        f = compiled(SPMV, (("A", a_layout), ("x", x_layout)), find)
    except spf.SynthesisError:
        assert refused(find, (x_layout,))
        return
    if a_layout == "CUDAmma16x16":
        a = data.draw(mma_operand())
    else:
        a = data.draw(dense_operand(data.draw(matrix_shape(a_layout)),
                                    lower=a_layout == "LowerTri"))
    x = data.draw(dense_operand((a.shape[1],)))
    xt = x if x_layout == "DenseVector" else data.draw(stored(x_layout, x))
    close(f(A=data.draw(stored(a_layout, a)), x=xt), a @ x)


# --- sparse dot product under every find choice ---------------------------------------------
DOTS = [(a, b, f) for a in VECTOR_LAYOUTS for b in VECTOR_LAYOUTS for f in FINDS]


@pytest.mark.parametrize("a_layout,b_layout,find", lanes(
    DOTS, covering(VECTOR_LAYOUTS, VECTOR_LAYOUTS, FINDS), ids))
@SETTINGS
@given(data=st.data())
def test_dot_product(a_layout, b_layout, find, data):
    try:
        f = compiled(DOT, (("a", a_layout), ("b", b_layout)), find)
    except spf.SynthesisError:
        assert refused(find, (a_layout, b_layout))
        return
    n = data.draw(EXTENTS)
    a, b = data.draw(dense_operand((n,))), data.draw(dense_operand((n,)))
    got = f(a=data.draw(stored(a_layout, a)), b=data.draw(stored(b_layout, b)))
    close(got, a @ b)


# --- SpMSpM: dense and assembled outputs ----------------------------------------------------
LEFT = ("CSR", "DCSR", "COO", "BCSR", "CSR_unsorted")
RIGHT = ("CSR", "CSC", "SortedCOO", "CSR_unsorted", "DIA")
SPMSPM_DENSE = [(x, y, f) for x in LEFT for y in RIGHT for f in FINDS]


@pytest.mark.parametrize("a_layout,b_layout,find", lanes(
    SPMSPM_DENSE, covering(LEFT, RIGHT, FINDS), ids))
@settings(SETTINGS, max_examples=15)
@given(data=st.data())
def test_spmspm_dense_output(a_layout, b_layout, find, data):
    try:
        f = compiled(SPMSPM, (("A", a_layout), ("B", b_layout)), find)
    except spf.SynthesisError:
        assert refused(find, (b_layout,))
        return
    m, k, n = data.draw(EXTENTS), data.draw(EXTENTS), data.draw(EXTENTS)
    a, b = data.draw(dense_operand((m, k))), data.draw(dense_operand((k, n)))
    got = f(A=data.draw(stored(a_layout, a)), B=data.draw(stored(b_layout, b)))
    close(got, a @ b)


SPARSE_PAIRS = [("CSR", "CSR"), ("CSR_unsorted", "CSC"), ("COO", "CSR")]
SPARSE_OUTPUTS = ["CSR", "CSR_unsorted", "CSC", "DCSR", "COO", "SortedCOO"]


@pytest.mark.parametrize("a_layout,b_layout,c_layout", lanes(
    [(*p, c) for p in SPARSE_PAIRS for c in SPARSE_OUTPUTS],
    {(*p, c) for p, c in covering(SPARSE_PAIRS, SPARSE_OUTPUTS)}, ids))
@SETTINGS
@given(data=st.data())
def test_spmspm_sparse_output(a_layout, b_layout, c_layout, data):
    m, k, n = data.draw(EXTENTS), data.draw(EXTENTS), data.draw(EXTENTS)
    a, b = data.draw(dense_operand((m, k))), data.draw(dense_operand((k, n)))
    f = compiled(SPMSPM, (("A", a_layout), ("B", b_layout), ("C", c_layout)))
    c = f(A=data.draw(stored(a_layout, a)), B=data.draw(stored(b_layout, b)))
    assert c.layout.name == c_layout
    close(c.to_dense(), a @ b)


# --- element-wise products and sums into sparse outputs -------------------------------------
ELEMENTWISE = [("C(i,j) = A(i,j) * B(i,j)", np.multiply), ("C(i,j) = A(i,j) + B(i,j)", np.add),
               ("C(i,j) = A(i,j) - B(i,j)", np.subtract)]
ELEMENTWISE_LAYOUTS = [("CSR", "CSR", "CSR"), ("COO", "CSR_unsorted", "CSR"),
                       ("DCSR", "CSC", "COO")]


@pytest.mark.parametrize("a_layout,b_layout,c_layout,expr,op", lanes(
    [(*lay, *e) for lay in ELEMENTWISE_LAYOUTS for e in ELEMENTWISE],
    {(*lay, *e) for lay, e in covering(ELEMENTWISE_LAYOUTS, ELEMENTWISE)},
    lambda case: "-".join([*case[:4], case[4].__name__])))
@SETTINGS
@given(data=st.data())
def test_elementwise(expr, op, a_layout, b_layout, c_layout, data):
    shape = data.draw(st.tuples(EXTENTS, EXTENTS))
    a, b = data.draw(dense_operand(shape)), data.draw(dense_operand(shape))
    f = compiled(expr, (("A", a_layout), ("B", b_layout), ("C", c_layout)))
    c = f(A=data.draw(stored(a_layout, a)), B=data.draw(stored(b_layout, b)))
    close(c.to_dense(), op(a, b))


# --- order 3: TTM on CSF ---------------------------------------------------------------------
@pytest.mark.parametrize("a_layout", ["CSF", "DenseTensor3"])
@settings(SETTINGS, max_examples=20)
@given(data=st.data())
def test_ttm(a_layout, data):
    shape = data.draw(st.tuples(*[st.sampled_from([0, 1, 2, 4, 7])] * 3))
    r = data.draw(st.sampled_from([0, 1, 3]))
    a = data.draw(dense_operand(shape))
    b = np.random.default_rng(data.draw(st.integers(0, 9))).uniform(-1, 1, (shape[2], r))
    f = compiled(TTM, (("A", a_layout),))
    close(f(A=data.draw(stored(a_layout, a)), B=b), np.einsum("ijk,kl->ijl", a, b))


# --- value types: a random dtype for every example --------------------------------------------
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "complex64", "complex128"]
TYPED_KERNELS = [(SPMV, (("A", "CSR"),)), (SPMV, (("A", "COO"),)),
                 (SPMSPM, (("A", "CSR"), ("B", "CSC"), ("C", "CSR"))),
                 ("C(i,j) = A(i,j) + B(i,j)", (("A", "COO"), ("B", "CSR"), ("C", "CSR")))]


@functools.cache
def typed(expr: str, layouts: tuple, dtype: str) -> spf.kernel.CompiledKernel:
    return spf.Kernel(expr, dict(layouts), dtype=dtype).compile()


def typed_values(dtype: str):
    """Values of ``dtype`` over its whole range (integer sums and products wrap)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return st.integers(int(info.min), int(info.max))
    real = st.floats(-1e3, 1e3, allow_nan=False, width=32 if dt.itemsize <= 8 else 64)
    if dt.kind == "c":
        return st.builds(complex, real, real)
    return real


@st.composite
def typed_operand(draw, shape: tuple[int, ...], dtype: str) -> Operand:
    cells = draw(coords_in(shape))
    values = np.array([draw(typed_values(dtype)) for _ in cells], dtype=dtype)
    a = np.zeros(shape, dtype).view(Operand)
    coords = tuple(np.array([c[d] for c in cells], dtype=np.int64) for d in range(len(shape)))
    a[coords] = values
    a.coords, a.values = coords, values
    return a


def typed_close(got: np.ndarray, want: np.ndarray, scale: np.ndarray, dtype: str) -> None:
    """Equal for integers and bool (wrapping alike), within the type's rounding otherwise
    (``scale``: the sums of the products' magnitudes)."""
    assert got.dtype == np.dtype(dtype)
    if np.dtype(dtype).kind in "fc":
        eps = np.finfo(np.dtype(dtype)).eps
        assert np.all(np.abs(got - want) <= 64 * eps * (1 + scale)), (got, want)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("expr,layouts", lanes(TYPED_KERNELS, lambda case: True,
                                               lambda case: "-".join(t for _, t in case[1])))
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_random_value_types(expr, layouts, data):
    """A random dtype (each kernel draws from half of them, each dtype meets two kernels:
    a compile per pair), values over its whole range: equal to numpy in the same type."""
    half = TYPED_KERNELS.index((expr, layouts)) % 2
    dtype = data.draw(st.sampled_from(DTYPES[half::2]))
    f = typed(expr, layouts, dtype)
    lay = dict(layouts)
    m, k = data.draw(EXTENTS), data.draw(EXTENTS)
    a = data.draw(typed_operand((m, k), dtype))
    A = spf.Tensor.from_coords(lay["A"], a.shape, a.coords, a.values)
    with np.errstate(over="ignore"):
        if expr == SPMV:
            x = data.draw(typed_operand((k,), dtype))
            got, want, scale = f(A=A, x=np.asarray(x)), a @ x, np.abs(a) @ np.abs(x)
        else:
            shape = (k, data.draw(EXTENTS)) if expr == SPMSPM else (m, k)
            b = data.draw(typed_operand(shape, dtype))
            B = spf.Tensor.from_coords(lay["B"], b.shape, b.coords, b.values)
            got = f(A=A, B=B).to_dense()
            want = a @ b if expr == SPMSPM else a + b
            scale = np.abs(a) @ np.abs(b) if expr == SPMSPM else np.abs(a) + np.abs(b)
    typed_close(got, np.asarray(want), np.asarray(scale, dtype=float), dtype)
