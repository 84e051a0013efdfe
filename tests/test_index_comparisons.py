"""Issue 53, item 7: a comparison of indices multiplying a product (``A(i,j) * (i == j)``,
``i >= j``, ``i <= j``, a band through ``and``) restricts the product's iteration space: only
the points where it holds are visited and an assembled output stores only those entries
(Finch's diagmask, lotrimask, uptrimask and bandmask).  Every value is numpy's on the dense
arrays, except that the product is 0 where the comparison is false whatever its other
factors (inf and nan included, docs/expressions.md)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf

MASKS = {
    "(i == j)": lambda i, j: i == j,
    "(i >= j)": lambda i, j: i >= j,
    "(i <= j)": lambda i, j: i <= j,
    "(j < i)": lambda i, j: j < i,
    "((j >= i - 1) and (j <= i + 1))": lambda i, j: (j >= i - 1) & (j <= i + 1),
    "(2*i == j + 1)": lambda i, j: 2 * i == j + 1,
}
MATRICES = {
    "random": sp.random(7, 5, density=0.6, format="csr", random_state=3),
    "empty": sp.csr_matrix((4, 6)),
    "one entry": sp.csr_matrix(([2.5], ([2], [2])), shape=(3, 4)),
    "empty rows": sp.csr_matrix(np.array([[0, 0, 0], [1.0, 2, 3], [0, 0, 0], [4, 0, 5]])),
}


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("out", ["CSR", "COO"])
def test_the_output_stores_only_where_the_comparison_holds(mask, out):
    for name, A in MATRICES.items():
        got = spf.evaluate(f"B(i,j) = A(i,j) * {mask}", A=A, layouts={"B": out})
        coo = A.tocoo()
        keep = MASKS[mask](coo.row, coo.col)
        want = sp.coo_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])),
                             shape=A.shape).toarray()
        np.testing.assert_array_equal(got.to_dense(), want, err_msg=name)
        assert got.to_scipy().nnz == int(keep.sum()), name        # no explicit zeros


def test_a_dense_output_is_zero_where_the_comparison_is_false():
    x = np.arange(1.0, 7.0)
    np.testing.assert_array_equal(spf.evaluate("y(i) = x(i) * (i >= 2)", x=x),
                                  x * (np.arange(6) >= 2))
    A = sp.random(6, 6, density=0.5, format="csc", random_state=1)
    rows, cols = np.indices(A.shape)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * (j > i) * x(j)", A=A, x=x),
                               (A.toarray() * (cols > rows)) @ x)


def test_a_find_replaces_the_scan_of_a_row_for_the_diagonal():
    """``i == j`` makes the column of A a row's key: Z3 picks a find (a binary search over
    the sorted columns) instead of scanning the row, and the C header says why."""
    k = spf.Kernel("B(i,j) = A(i,j) * (i == j)", {"A": "CSR", "B": "CSR"})
    src = k.c_source()
    assert "Find A_pj in A: binsearch" in src
    assert "Index comparisons: i = j (a comparison of indices multiplying a product" in src


def test_values_where_the_comparison_is_false_are_not_read():
    """numpy's ``inf * 0`` is nan; the restricted product is 0 there (the documented rule)."""
    A = np.array([[1.0, np.inf, 0.0], [0.0, 2.0, 0.0], [np.nan, 0.0, 3.0]])
    got = spf.evaluate("C(i,j) = A(i,j) * (i == j)", A=sp.csr_matrix(A), layouts={"C": "CSR"})
    np.testing.assert_array_equal(got.to_dense(), np.diag(np.diag(A)))
    with np.errstate(invalid="ignore"):
        lower = spf.evaluate("C(i,j) = A(i,j) * (i >= j) * 2", A=A, out=np.zeros((3, 3)))
    np.testing.assert_array_equal(lower, np.where(np.tril(np.ones((3, 3))) > 0, 2 * A, 0))


def test_a_sum_restricts_each_term_by_its_own_comparison():
    A = sp.random(5, 5, density=0.7, format="csr", random_state=4)
    C = sp.random(5, 5, density=0.7, format="csr", random_state=5)
    rows, cols = np.indices(A.shape)
    got = spf.evaluate("B(i,j) = A(i,j) * (i == j) + C(i,j) * (j < i)", A=A, C=C,
                       layouts={"B": "CSR"})
    want = A.toarray() * (rows == cols) + C.toarray() * (cols < rows)
    np.testing.assert_allclose(got.to_dense(), want)
    assert got.to_scipy().nnz == np.count_nonzero(want)


@pytest.mark.parametrize("expr", ["B(i,j) = A(i,j) * (i != j)",
                                  "B(i,j) = A(i,j) * (i * j == 2)",
                                  "B(i,j) = exp(A(i,j) * (i == j))"])
def test_what_is_no_restriction_stays_a_value(expr):
    """``!=`` (no convex set), a non-affine comparison and one inside a function are values
    computed at every point, as numpy."""
    A = sp.random(4, 4, density=0.6, format="csr", random_state=2)
    D = A.toarray()
    rows, cols = np.indices(D.shape)
    want = {"(i != j)": D * (rows != cols), "(i * j == 2)": D * (rows * cols == 2)}
    got = spf.evaluate(expr, A=D, out=np.zeros((4, 4)))
    ref = np.exp(D * (rows == cols)) if "exp" in expr else want[expr.split("* ", 1)[1]]
    np.testing.assert_allclose(got, ref)
    assert "Index comparisons" not in spf.Kernel(expr, {"A": "CSR"}).c_source()


def test_a_comparison_under_another_semiring_is_refused():
    """Under min_plus a product of 0 is no semiring zero, so a comparison could not restrict
    the space: a value expression is refused there (KernelOptions.space_bounds restricts
    under plus_times only, should semirings take values one day)."""
    with pytest.raises(spf.SpecError, match="not supported under a semiring yet"):
        spf.Kernel("y(i) = A(i,j) * (i >= j) * x(j)", {"A": "CSR"}, semiring="min_plus")
