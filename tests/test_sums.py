"""Sums by statement splitting (paper Sec. 4): dense, scalar and assembled sparse outputs."""
import itertools
from functools import cache

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import covering, lanes

import spf


@cache
def compiled(expr, layouts=(), parallel=False):
    return spf.Kernel(expr, dict(layouts), parallel=parallel).compile()


def matrices(shape, seed):
    """Random operands with partly overlapping patterns, an empty row and an empty column."""
    rng = np.random.default_rng(seed)
    out = []
    for _k in range(3):
        m = sp.random(*shape, density=0.25, format="lil", random_state=rng)
        if shape[0] > 2:
            m[1, :] = 0
        if shape[1] > 3:
            m[:, 3] = 0
        m = sp.csr_matrix(m)
        m.data = rng.uniform(1, 2, m.nnz)   # positive: no cancellation in A + B
        out.append(m)
    return out


def stored_pattern(t: spf.Tensor) -> np.ndarray:
    """Dense boolean mask of the stored coordinates, read from the fields."""
    mask = np.zeros(t.shape, dtype=bool)
    scipy_form = t.to_scipy().tocoo()
    mask[scipy_form.row, scipy_form.col] = True
    return mask


@pytest.mark.parametrize("la", ["CSR", "COO", "CSC", "DCSR"])
@pytest.mark.parametrize("shape", [(7, 5), (1, 6), (6, 1)])
def test_spmv_plus_vector(la, shape):
    A, _, _ = matrices(shape, 1)
    rng = np.random.default_rng(2)
    x, b = rng.random(shape[1]), rng.random(shape[0])
    f = compiled("y(i) = A(i,j) * x(j) + b(i)", (("A", la),))
    np.testing.assert_allclose(f(A=spf.Tensor.from_scipy(la, A), x=x, b=b), A @ x + b,
                               rtol=1e-12)
    g = compiled("y(i) = A(i,j) * x(j) - b(i)", (("A", la),), parallel=True)
    np.testing.assert_allclose(g(A=spf.Tensor.from_scipy(la, A), x=x, b=b), A @ x - b,
                               rtol=1e-12)


def test_accumulating_sum_and_scalar_sum():
    A, B, _ = matrices((6, 5), 3)
    x = np.arange(5.0)
    y0 = np.ones(6)
    f = compiled("y(i) += A(i,j) * x(j) + B(i,j) * x(j)", (("A", "CSR"), ("B", "COO")))
    y = y0.copy()
    f(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("COO", B), x=x, y=y)
    np.testing.assert_allclose(y, y0 + A @ x + B @ x, rtol=1e-12)
    s = compiled("s = A(i,j) * B(i,j) - A(i,j)", (("A", "CSR"), ("B", "CSR")))
    got = s(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("CSR", B))
    assert got == pytest.approx(A.multiply(B).sum() - A.sum(), rel=1e-12)


def test_terms_do_not_read_implicit_zeros():
    """x is infinite where A has no nonzero: reading A's implicit zeros there gives NaN."""
    A = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 3]]))
    x = np.array([1.0, np.inf, 2.0])
    b = np.array([5.0, 7.0])
    for la in ("CSR", "COO"):
        y = compiled("y(i) = A(i,j) * x(j) + b(i)", (("A", la),))(
            A=spf.Tensor.from_scipy(la, A), x=x, b=b)
        np.testing.assert_array_equal(y, [10.0, 13.0])


SPARSE = ["CSR", "COO", "DCSR"]
OUTPUTS = SPARSE + ["SortedCOO", "CSC"]


@pytest.mark.parametrize("la,lb,lc", lanes(
    [p for p in itertools.product(SPARSE, SPARSE, OUTPUTS) if p[0] <= p[1] or p[2] == "CSR"],
    covering(SPARSE, SPARSE, OUTPUTS) | covering(SPARSE[::-1], SPARSE, OUTPUTS), "-".join))
def test_sparse_sum_is_the_union(la, lb, lc):
    f = compiled("C(i,j) = A(i,j) + B(i,j)", (("A", la), ("B", lb), ("C", lc)))
    for shape, seed in [((8, 6), 4), ((1, 9), 5), ((9, 1), 6)]:
        A, B, _ = matrices(shape, seed)
        C = f(A=spf.Tensor.from_scipy(la, A), B=spf.Tensor.from_scipy(lb, B))
        assert C.layout.name == lc
        ref = (A + B).toarray()
        np.testing.assert_allclose(C.to_dense(), ref, rtol=1e-12)
        # the stored pattern is exactly the union: no entry that neither operand has
        np.testing.assert_array_equal(stored_pattern(C), (A != 0).toarray() | (B != 0).toarray())
        spf.Tensor(C.layout, C.shape, C.fields, check=True)


def test_three_terms_with_subtraction_and_empty_operands():
    f = compiled("C(i,j) = A(i,j) - B(i,j) + D(i,j)",
                 (("A", "CSR"), ("B", "COO"), ("D", "DCSR"), ("C", "CSR")))
    A, B, D = matrices((7, 8), 7)
    empty = sp.csr_matrix((7, 8))
    for a, b, d in [(A, B, D), (empty, B, D), (A, empty, empty), (empty, empty, empty)]:
        C = f(A=spf.Tensor.from_scipy("CSR", a), B=spf.Tensor.from_scipy("COO", b),
              D=spf.Tensor.from_scipy("DCSR", d))
        np.testing.assert_allclose(C.to_dense(), (a - b + d).toarray(), rtol=1e-12)
        assert C.fields["rowPtr"][-1] == len(C.values)
    one = sp.csr_matrix(([3.0], ([2], [5])), shape=(7, 8))
    C = f(A=spf.Tensor.from_scipy("CSR", one), B=spf.Tensor.from_scipy("COO", empty),
          D=spf.Tensor.from_scipy("DCSR", empty))
    assert list(C.fields["colIdx"]) == [5] and list(C.values) == [3.0]


def test_sum_with_dense_and_parallel_output():
    A, B, _ = matrices((9, 7), 8)
    f = compiled("C(i,j) = A(i,j) + B(i,j)", (("A", "CSR"), ("B", "COO")), parallel=True)
    C = f(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("COO", B))
    np.testing.assert_allclose(C, (A + B).toarray(), rtol=1e-12)


def test_sum_source_report_and_analyses(compiles_clean):
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "COO", "C": "CSR"})
    src = k.c_source()
    compiles_clean(src)
    assert ("static int spf_kernel_term0(spf_stream *restrict C, const int64_t *restrict "
            "spf_ext, const spf_CSR *restrict A)") in src     # keyed by the caller's extents
    assert "spf_stream_merge(&spf_union, spf_runs, 2)" in src
    assert len(k.terms) == 2 and len(k.analyses()) == 2
    assert "--- term 1" in k.report()
    assert str(k.expr) == "C(i,j) = A(i,j) + B(i,j)"
    dense = spf.Kernel("y(i) = A(i,j) * x(j) - b(i)", {"A": "CSR"})
    compiles_clean(dense.c_source())
    assert "-(b_data[b_p0])" in dense.c_source()


def test_sum_errors():
    with pytest.raises(spf.SpecError, match="tile is not supported for sums"):
        spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR"}, tile={"A.pi": 4})
    with pytest.raises(spf.SpecError, match=r"order names \['k'\]"):
        spf.Kernel("y(i) = A(i,j) * x(j) + b(i)", {"A": "CSR"}, order=["i", "k"])
    with pytest.raises(spf.SpecError, match="used with 2 and 1 indices"):
        spf.Kernel("y(i) = A(i,j) * x(j) + A(i)")
    with pytest.raises(spf.SpecError, match=r"term b\(i\) does not use the output index"):
        spf.Kernel("C(i,j) = A(i,j) + b(i)", {"C": "CSR"})      # broadcast: dense outputs
    f = compiled("y(i) = A(i,j) * x(j) + B(i,j) * z(j)")
    ones = np.ones
    # one range per index for the whole statement: j has one extent in both terms
    np.testing.assert_allclose(f(A=ones((3, 4)), x=ones(4), B=ones((3, 4)), z=ones(4)), 8.0)
    with pytest.raises(spf.ArgumentError, match=r"index 'j' has extent 4 in A \(shape \(3, "
                                                r"4\)\) but 5 in B \(dimension 1\)"):
        f(A=ones((3, 4)), x=ones(4), B=ones((3, 5)), z=ones(5))
    with pytest.raises(spf.ArgumentError, match="index 'i' has extent 3"):
        f(A=ones((3, 4)), x=ones(4), B=ones((4, 5)), z=ones(5))
