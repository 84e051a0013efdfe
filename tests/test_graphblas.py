"""spf's semirings, sums and masks against SuiteSparse:GraphBLAS (python-graphblas) on the
same random graphs: the same structural semantics, entry for entry."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf

gb = pytest.importorskip("graphblas")

SEMIRINGS = {"min_plus": gb.semiring.min_plus, "max_plus": gb.semiring.max_plus,
             "max_times": gb.semiring.max_times, "min_times": gb.semiring.min_times,
             "plus_times": gb.semiring.plus_times, "plus_pair": gb.semiring.plus_pair,
             "or_and": gb.semiring.lor_land}
FILL = {"min_plus": np.inf, "max_plus": -np.inf, "max_times": -np.inf, "min_times": np.inf}


def graph(n: int, density: float, seed: int, boolean: bool = False) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(n, n, density, format="csr", random_state=seed)
    m.data = np.ones(m.nnz) if boolean else rng.integers(-5, 10, m.nnz).astype(float)
    m.sort_indices()
    return m


def dense_of(v: gb.Vector | gb.Matrix, fill: float) -> np.ndarray:
    """A GraphBLAS result with its absent entries set to ``fill`` (spf's dense outputs hold
    the semiring's zero there)."""
    if isinstance(v, gb.Vector):
        out = np.full(v.size, fill)
        idx, vals = v.to_coo()
        out[idx] = vals
        return out
    out = np.full((v.nrows, v.ncols), fill)
    r, c, vals = v.to_coo()
    out[r, c] = vals
    return out


@pytest.mark.parametrize("name", sorted(SEMIRINGS))
@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO"])
def test_mxv_matches_graphblas(name, layout):
    boolean = name == "or_and"
    A = graph(60, 0.08, 1, boolean)
    x = np.random.default_rng(2).integers(-3, 6, 60).astype(float)
    if boolean:
        x = (x > 0).astype(float)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout}, semiring=name, parallel=True).compile()
    got = k(A=A, x=x)
    ga = gb.io.from_scipy_sparse(A)
    gx = gb.Vector.from_dense(x.astype(bool) if boolean else x)
    gy = ga.mxv(gx, SEMIRINGS[name]).new()
    np.testing.assert_array_equal(got, dense_of(gy, FILL.get(name, 0.0)))


@pytest.mark.parametrize("name", ["min_plus", "max_times", "plus_times"])
def test_masked_mxm_matches_graphblas(name):
    A, B, M = graph(40, 0.1, 3), graph(40, 0.1, 4), graph(40, 0.2, 5)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "M": "CSR"},
                   mask={"C": "M"}, semiring=name).compile()
    got = k(A=A, B=B, M=M)
    ga, gbb, gm = (gb.io.from_scipy_sparse(m) for m in (A, B, M))
    gc = gb.Matrix(float, 40, 40)
    gc(mask=gm.S) << ga.mxm(gbb, SEMIRINGS[name])
    np.testing.assert_array_equal(got, dense_of(gc, FILL.get(name, 0.0)))
    comp = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "M": "CSR"},
                      mask={"C": "M"}, complement=True, semiring=name).compile()
    gc = gb.Matrix(float, 40, 40)
    gc(mask=~gm.S) << ga.mxm(gbb, SEMIRINGS[name])
    np.testing.assert_array_equal(comp(A=A, B=B, M=M), dense_of(gc, FILL.get(name, 0.0)))


@pytest.mark.parametrize("op, name", [("min", "min_plus"), ("max", "max_plus"),
                                      ("plus", "plus_times")])
def test_ewise_add_matches_graphblas(op, name):
    A, B = graph(30, 0.1, 6), graph(30, 0.1, 7)
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "COO"}, semiring=name).compile()
    ga, gbb = gb.io.from_scipy_sparse(A), gb.io.from_scipy_sparse(B)
    gc = ga.ewise_add(gbb, getattr(gb.binary, op)).new()
    np.testing.assert_array_equal(k(A=A, B=B), dense_of(gc, FILL.get(name, 0.0)))


def test_triangle_count_matches_graphblas():
    upper = sp.triu(sp.random(120, 120, 0.08, random_state=8), 1)
    g = ((upper + upper.T) != 0).astype(float).tocsr()
    L = sp.tril(g, -1).tocsr()
    L.sort_indices()
    k = spf.Kernel("C(i,j) = A(i,k) * B(j,k)", {"A": "CSR", "B": "CSR", "L": "CSR", "C": "CSR"},
                   mask={"C": "L"}, share={"C": "L"}, semiring="plus_pair",
                   parallel=True).compile()
    gl = gb.io.from_scipy_sparse(L)
    gc = gb.Matrix(float, 120, 120)
    gc(mask=gl.S) << gl.mxm(gl.T, gb.semiring.plus_pair)
    expect = gc.reduce_scalar(gb.monoid.plus).new().value
    assert k(A=L, B=L, L=L).values.sum() == expect > 0


def entries_of(t: spf.Tensor | gb.Matrix | gb.Vector) -> dict[tuple, float]:
    """The stored entries, coordinates to value."""
    if isinstance(t, spf.Tensor):
        if t.layout.order == 1:
            return {(i,): v for i, v in enumerate(t.to_dense()) if v != t.fill}
        m = t.to_scipy().tocoo()
        return {(r, c): v for r, c, v in zip(m.row.tolist(), m.col.tolist(), m.data.tolist())}
    *coords, vals = t.to_coo()
    return dict(zip(zip(*(c.tolist() for c in coords)), vals.tolist()))


@pytest.mark.parametrize("name", ["min_plus", "max_times", "plus_pair", "plus_times"])
@pytest.mark.parametrize("out", ["CSR", "COO", "DCSR", "CSC"])
def test_sparse_mxm_output_matches_graphblas(name, out):
    """The output assembled by the kernel (workspace or bucket) combines equal coordinates
    by the semiring's add; its absent elements are the semiring's zero (Tensor.fill)."""
    A, B = graph(40, 0.1, 9), graph(40, 0.1, 10)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": out},
                   semiring=name)
    got = k.compile()(A=A, B=B)
    gc = gb.io.from_scipy_sparse(A).mxm(gb.io.from_scipy_sparse(B), SEMIRINGS[name]).new()
    assert entries_of(got) == entries_of(gc)
    assert got.fill == FILL.get(name, 0.0)
    np.testing.assert_array_equal(got.to_dense(), dense_of(gc, FILL.get(name, 0.0)))


@pytest.mark.parametrize("op, name", [("min", "min_plus"), ("max", "max_times")])
@pytest.mark.parametrize("layouts", [{"A": "CSR", "B": "CSR", "C": "CSR"},
                                     {"A": "CSR", "B": "COO", "C": "COO"}])
def test_sparse_ewise_add_output_matches_graphblas(op, name, layouts):
    """Operands stored in the output's order are merged level by level (CSR); otherwise
    each term's sorted run is merged; equal coordinates combine by add either way."""
    A, B = graph(30, 0.1, 11), graph(30, 0.1, 12)
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", layouts, semiring=name)
    assert bool(k.runs) == (layouts["B"] == "CSR")
    gc = gb.io.from_scipy_sparse(A).ewise_add(gb.io.from_scipy_sparse(B),
                                              getattr(gb.binary, op)).new()
    assert entries_of(k.compile()(A=A, B=B)) == entries_of(gc)


@pytest.mark.parametrize("name", ["min_plus", "max_times"])
@pytest.mark.parametrize("layout, mode", [("CSR", "append"), ("COO", "workspace")])
def test_sparse_mxv_output_matches_graphblas(name, layout, mode):
    A = graph(50, 0.05, 13)
    x = np.random.default_rng(14).integers(-3, 6, 50).astype(float)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout, "y": "SV"}, semiring=name)
    assert k.assembly.mode == mode
    assert "combine by" in k.report() and "spf_add" in k.c_source()
    gy = gb.io.from_scipy_sparse(A).mxv(gb.Vector.from_dense(x), SEMIRINGS[name]).new()
    got = k.compile()(A=A, x=x)
    np.testing.assert_array_equal(got.to_dense(), dense_of(gy, FILL[name]))
    assert got.values.size == gy.nvals


def test_drop_zeros_drops_the_semiring_zero():
    """Under min_plus the zero is inf: a product equal to inf is not stored, a product equal
    to 0.0 (an edge of weight 0) is."""
    A = sp.csr_matrix(np.array([[0.0, 2.0], [1.0, 0.0]]))
    A.data[:] = [np.inf, 0.0]          # row 0: inf, row 1: an explicit 0.0
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR", "y": "SV"}, semiring="min_plus",
                   drop_zeros=True)
    got = k.compile()(A=A, x=np.zeros(2))
    assert got.values.tolist() == [0.0] and got.to_dense().tolist() == [np.inf, 0.0]
    assert "entries equal to inf are not stored" in k.report()


@pytest.mark.parametrize("out", ["CSR", "DCSR", "COO"])
@pytest.mark.parametrize("complement", [False, True])
def test_masked_sparse_mxm_output_matches_graphblas(out, complement):
    A, B, M = graph(40, 0.1, 15), graph(40, 0.1, 16), graph(40, 0.2, 17)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "M": "CSR", "C": out},
                   mask={"C": "M"}, complement=complement, semiring="min_plus")
    got = k.compile()(A=A, B=B, M=M)
    ga, gbb, gm = (gb.io.from_scipy_sparse(m) for m in (A, B, M))
    gc = gb.Matrix(float, 40, 40)
    gc(mask=~gm.S if complement else gm.S) << ga.mxm(gbb, gb.semiring.min_plus)
    assert entries_of(got) == entries_of(gc) and gc.nvals > 0


# --- value types: spf's semirings in GraphBLAS's own types ------------------------------
GB_TYPES = {"bool": "BOOL", "int8": "INT8", "int16": "INT16", "int32": "INT32",
            "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
            "uint64": "UINT64", "float32": "FP32", "float64": "FP64", "complex64": "FC32",
            "complex128": "FC64"}
TYPED = ["min_plus", "max_plus", "max_times", "min_times", "plus_times", "plus_pair",
         "any_pair", "or_and"]
# GraphBLAS names the boolean operators by their logic: min is land, max and plus are lor
ON_BOOL = {"min_plus": "land_lor", "max_plus": "lor_lor", "max_times": "lor_land",
           "min_times": "land_land", "plus_times": "lor_land", "plus_pair": "lor_pair",
           "any_pair": "any_pair", "or_and": "lor_land"}
ON_OTHERS = {**{s: s for s in TYPED}, "or_and": "lor_land"}
REAL = [t for t in GB_TYPES if not t.startswith("complex")]
TYPED_CASES = sorted({(t, TYPED[(k + shift) % len(TYPED)]) for k, t in enumerate(REAL)
                      for shift in (0, 3)} | {("complex64", "plus_times"),
                                              ("complex128", "plus_times")})


def typed_graph(shape: tuple[int, int], dtype: str, seed: int) -> sp.csr_matrix:
    """Random entries of ``dtype`` (integers large enough that int8 products and sums wrap,
    integral floats so that every summation order agrees), an empty row."""
    rng = np.random.default_rng(seed)
    m = sp.random(*shape, 0.15, format="csr", random_state=seed)
    kind = np.dtype(dtype).kind
    if kind == "b":
        values = np.ones(m.nnz, bool)
    elif kind == "c":
        values = rng.integers(-4, 5, m.nnz) + 1j * rng.integers(-4, 5, m.nnz)
    else:
        values = rng.integers(1 if kind == "u" else -40, 90, m.nnz)
    coo = m.tocoo()
    keep = coo.row != 2                                   # row 2 empty
    return sp.csr_matrix((values.astype(dtype)[keep], (coo.row[keep], coo.col[keep])), shape)


def gb_semiring(name: str, dtype: str):
    table = ON_BOOL if dtype == "bool" else ON_OTHERS
    return getattr(gb.semiring, table[name])[GB_TYPES[dtype]]


@pytest.mark.parametrize("dtype,name", TYPED_CASES)
def test_typed_mxv_matches_graphblas_in_its_type(dtype, name):
    """y = A x with A, x and y of one type: spf's result equals GraphBLAS's computed in the
    same GraphBLAS type (integers wrap alike); absent rows hold the zero in the type."""
    A = typed_graph((50, 40), dtype, 11)
    x = typed_graph((1, 40), dtype, 12).toarray().ravel()
    x[x == 0] = 1                                         # a full vector
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=name, dtype=dtype)
    got = k.compile()(A=spf.Tensor.from_scipy("CSR", A), x=x)
    assert got.dtype == np.dtype(dtype)
    gy = gb.io.from_scipy_sparse(A).mxv(gb.Vector.from_dense(x), gb_semiring(name, dtype)).new()
    zero = spf.front.value_types.VALUE_TYPES[dtype].value_of(
        spf.front.semiring.BUILTINS[name].zero)
    want = np.full(50, zero, dtype)
    idx, vals = gy.to_coo()
    want[idx] = vals
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype,name", [("int8", "plus_times"), ("bool", "or_and"),
                                        ("float32", "min_plus"), ("complex64", "plus_times"),
                                        ("uint16", "max_times")])
def test_typed_sparse_mxm_matches_graphblas_in_its_type(dtype, name):
    A, B = typed_graph((30, 25), dtype, 13), typed_graph((25, 35), dtype, 14)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   semiring=name, dtype=dtype)
    got = k.compile()(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("CSR", B))
    assert got.dtype == np.dtype(dtype)
    gc = gb.io.from_scipy_sparse(A).mxm(gb.io.from_scipy_sparse(B),
                                        gb_semiring(name, dtype)).new()
    assert entries_of(got) == entries_of(gc)
