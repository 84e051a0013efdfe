"""Merge assembly of sums: when every term is an operand stored in the output's storage order,
the kernel merges the operands level by level (spf/assembly/merge*.py).  Every result is
compared with scipy or numpy; the general path (sorted runs) must give the same answers."""
import itertools
from functools import cache

import numpy as np
import pytest
import scipy.sparse as sp

import spf


@cache
def kernel(expr, layouts):
    return spf.Kernel(expr, dict(layouts))


def operands(shape, seed, count=3, density=0.3):
    """Random matrices with overlapping patterns, an empty row and an empty column (where the
    shape has them); values of both signs (so sums may cancel to a stored 0.0)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        m = sp.random(*shape, density=density, format="lil", random_state=rng)
        if shape[0] > 2:
            m[1, :] = 0
        if shape[1] > 3:
            m[:, 3] = 0
        m = sp.csr_matrix(m)
        m.data = rng.choice([-2.0, -1.0, 0.5, 1.0, 3.0], m.nnz)
        out.append(m)
    return out


def pattern(t: spf.Tensor) -> set:
    coo = t.to_scipy().tocoo()
    return set(zip(coo.row.tolist(), coo.col.tolist()))


SHAPES = [((9, 7), 1), ((1, 12), 2), ((12, 1), 3), ((0, 5), 4), ((6, 0), 5)]
MERGED = ["CSR", "CSC", "DCSR", "SortedCOO"]


@pytest.mark.parametrize("layout", MERGED)
@pytest.mark.parametrize("expr,combine", [
    ("C(i,j) = A(i,j) + B(i,j)", lambda a, b, d: a + b),
    ("C(i,j) = A(i,j) - B(i,j)", lambda a, b, d: a - b),
    ("C(i,j) = -A(i,j) + B(i,j) + D(i,j)", lambda a, b, d: -a + b + d),
])
def test_merge_is_the_union(layout, expr, combine, compiles_clean):
    names = [n for n in "ABD" if f"{n}(i,j)" in expr] + ["C"]
    k = kernel(expr, tuple((n, layout) for n in names))
    assert k.runs is not None, k.report()
    src = k.c_source()
    assert "spf_kernel_merge(" in src and "spf_stream" not in src
    compiles_clean(src)
    f = k.compile()
    for shape, seed in SHAPES:
        A, B, D = operands(shape, seed)
        args = {n: spf.Tensor.from_scipy(layout, m) for n, m in (("A", A), ("B", B), ("D", D))
                if n in names}
        C = f(**args)
        ref = combine(A, B, D)
        np.testing.assert_array_equal(C.to_dense(), ref.toarray())
        union = set()
        for n, m in (("A", A), ("B", B), ("D", D)):
            if n in args:
                union |= set(zip(*m.nonzero()))
        assert pattern(C) == union       # exactly the union, cancellations kept as 0.0
        spf.Tensor(C.layout, C.shape, C.fields, check=True)


@pytest.mark.parametrize("layout", MERGED)
def test_merge_edge_cases(layout):
    f = kernel("C(i,j) = A(i,j) + B(i,j)", (("A", layout), ("B", layout), ("C", layout))).compile()
    empty = sp.csr_matrix((5, 8))
    one = sp.csr_matrix(([3.0], ([2], [6])), shape=(5, 8))
    other = sp.csr_matrix(([-1.0, 4.0], ([2, 4], [6, 0])), shape=(5, 8))
    for a, b in [(empty, empty), (one, empty), (empty, one), (one, one), (one, other),
                 (other, one)]:
        C = f(A=spf.Tensor.from_scipy(layout, a), B=spf.Tensor.from_scipy(layout, b))
        np.testing.assert_array_equal(C.to_dense(), (a + b).toarray())
        assert len(C.values) == len(set(zip(*a.nonzero())) | set(zip(*b.nonzero())))


def test_same_operand_twice_and_scipy_inputs():
    k = kernel("C(i,j) = A(i,j) + A(i,j) - B(i,j)", (("A", "CSR"), ("B", "CSR"), ("C", "CSR")))
    assert k.runs is not None and [r.operand for r in k.runs] == ["A", "A", "B"]
    A, B, _ = operands((30, 20), 8)
    C = k.compile()(A=A, B=B)
    np.testing.assert_array_equal(C.to_dense(), (2 * A - B).toarray())


def test_three_dimensional_csf():
    k = kernel("C(i,j,k) = A(i,j,k) + B(i,j,k)", (("A", "CSF"), ("B", "CSF"), ("C", "CSF")))
    assert k.runs is not None
    rng = np.random.default_rng(3)
    for shape in [(4, 5, 6), (1, 1, 3), (3, 0, 2)]:
        a = rng.choice([0.0, 0.0, 0.0, 1.0, -2.0], shape)
        b = rng.choice([0.0, 0.0, 0.0, 1.5, 2.0], shape)
        C = k.compile()(A=spf.Tensor.from_dense("CSF", a), B=spf.Tensor.from_dense("CSF", b))
        np.testing.assert_array_equal(C.to_dense(), a + b)
        assert len(C.values) == np.count_nonzero((a != 0) | (b != 0))


def test_decreasing_sparse_vectors():
    k = kernel("z(i) = x(i) - y(i)", (("x", "SV_decreasing"), ("y", "SV_decreasing"),
                                      ("z", "SV_decreasing")))
    assert k.runs is not None
    rng = np.random.default_rng(4)
    for n in (0, 1, 17):
        x = rng.choice([0.0, 0.0, 1.0, 2.0], n)
        y = rng.choice([0.0, 0.0, 1.0, -3.0], n)
        z = k.compile()(x=spf.Tensor.from_dense("SV_decreasing", x),
                        y=spf.Tensor.from_dense("SV_decreasing", y))
        np.testing.assert_array_equal(z.to_dense(), x - y)
        idx = z.fields["idx"]
        assert all(idx[:-1] > idx[1:])          # the layout's order is kept


USER_CSR = """
name = "RowsCSR"
relation = "{[r, q] -> [gi, gj] : 0 <= r < rows and start(r) <= q < start(r + 1) and gi = r \
and gj = col(q)}"
value = "v[q]"
shape = ["rows", "cols"]

[fields]
rows = "int"
cols = "int"
start = "int[rows + 1]"
col = "int[start(rows)]"
v = "double[start(rows)]"

[[properties]]
kind = "monotonic"
uf = "start"
order = "<="

[[properties]]
kind = "range"
uf = "col"
min = "0"
max = "cols - 1"

[[properties]]
kind = "periodic_monotonic"
uf = "col"
period = "r"
order = "<"
"""


def test_user_layout_with_other_field_names(tmp_path):
    """A run is read through its own layout's fields: RowsCSR + CSR into CSR."""
    path = tmp_path / "RowsCSR.toml"
    path.write_text(USER_CSR)
    rows = spf.load_layout(str(path))
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": rows, "B": "CSR", "C": "CSR"})
    assert k.runs is not None
    src = k.c_source()
    assert "r0->start" in src and "r1->rowPtr" in src
    A, B, _ = operands((10, 9), 9)
    a = spf.Tensor(rows, A.shape, {"rows": 10, "cols": 9, "start": A.indptr.astype(np.int32),
                                   "col": A.indices.astype(np.int32), "v": A.data.copy()})
    C = k.compile()(A=a, B=spf.Tensor.from_scipy("CSR", B))
    np.testing.assert_array_equal(C.to_dense(), (A + B).toarray())


@pytest.mark.parametrize("layouts,why", [
    ((("A", "CSR"), ("B", "COO"), ("C", "CSR")), "levels differ"),
    ((("A", "COO"), ("B", "COO"), ("C", "SortedCOO")), "COO is neither sorted nor unique"),
    ((("A", "CSR_unsorted"), ("B", "CSR"), ("C", "CSR")), "columns unsorted"),
    ((("A", "CSR"), ("B", "CSR"), ("C", "CSC")), "the output's order is another"),
])
def test_general_path_when_a_term_is_no_run(layouts, why):
    k = kernel("C(i,j) = A(i,j) + B(i,j)", layouts)
    assert k.runs is None, why
    assert "spf_stream_merge" in k.c_source()
    A, B, _ = operands((8, 11), 10)
    lay = dict(layouts)
    C = k.compile()(A=spf.Tensor.from_scipy(lay["A"], A), B=spf.Tensor.from_scipy(lay["B"], B))
    np.testing.assert_allclose(C.to_dense(), (A + B).toarray(), rtol=1e-15)


def test_products_and_scalars_keep_the_general_path():
    k = kernel("C(i,j) = A(i,j) * B(i,j) + D(i,j)", (("A", "CSR"), ("B", "CSR"), ("D", "CSR"),
                                                     ("C", "CSR")))
    assert k.runs is None
    s = spf.Kernel("C(i,j) = alpha * A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"})
    assert s.runs is None
    A, B, _D = operands((7, 7), 11)
    C = s.compile()(alpha=2.5, A=A, B=B)
    np.testing.assert_allclose(C.to_dense(), (2.5 * A + B).toarray(), rtol=1e-15)


def test_report_and_header_name_the_merge():
    k = kernel("C(i,j) = A(i,j) + B(i,j)", (("A", "DCSR"), ("B", "DCSR"), ("C", "DCSR")))
    assert "spf_kernel_merge merges the operands' storage level by level" in k.report()
    assert "no two entries share coordinates" in k.report()
    assert "merges the operands level by level" in k.c_source()


def test_matches_scipy_on_a_larger_random_pair():
    rng = np.random.default_rng(12)
    for m, n in itertools.product((1, 300), (1, 257)):
        A = sp.random(m, n, density=0.05, format="csr", random_state=rng)
        B = sp.random(m, n, density=0.05, format="csr", random_state=rng)
        C = kernel("C(i,j) = A(i,j) + B(i,j)", (("A", "CSR"), ("B", "CSR"),
                                                ("C", "CSR"))).compile()(A=A, B=B)
        np.testing.assert_allclose(C.to_dense(), (A + B).toarray(), rtol=1e-15)


def test_transposed_operand_is_a_run_when_its_levels_match():
    """A CSC operand read as A(j,i) stores A^T row by row: the levels of a CSR output."""
    k = kernel("C(i,j) = A(j,i) + B(i,j)", (("A", "CSC"), ("B", "CSR"), ("C", "CSR")))
    assert k.runs is not None
    A, _, _ = operands((6, 9), 13)
    _, B, _ = operands((9, 6), 14)
    C = k.compile()(A=spf.Tensor.from_scipy("CSC", A), B=spf.Tensor.from_scipy("CSR", B))
    np.testing.assert_array_equal(C.to_dense(), (A.T + B).toarray())


def test_int64_indices():
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   index_type="int64")
    assert k.runs is not None
    A, B, _ = operands((20, 30), 15)
    C = k.compile()(A=spf.Tensor.from_scipy("CSR", A, index_type="int64"),
                    B=spf.Tensor.from_scipy("CSR", B, index_type="int64"))
    assert C.fields["colIdx"].dtype == np.int64
    np.testing.assert_array_equal(C.to_dense(), (A + B).toarray())
