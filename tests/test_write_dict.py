"""A value permutation (issue 53, item 3): a layout whose values are read through an index array
the relation does not read (``val[perm(pk)]``, a frozen dictionary: Finch's SparseDict) is
written with each value at the entry's number in the order the entries arrive (insertion
order), ``perm`` mapping each position to it; checked against scipy."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf

MATRICES = {
    "random": sp.random(9, 7, 0.35, format="csr", random_state=11),
    "empty_rows": sp.csr_matrix(np.array([[0, 0, 0], [1.5, 0, 2.0], [0, 0, 0], [0, 3.0, 0]])),
    "one": sp.csr_matrix(([2.5], ([2], [4])), shape=(3, 5)),
    "empty": sp.csr_matrix((4, 6)),
    "wide": sp.random(2, 30, 0.3, format="csr", random_state=3),
}


@pytest.mark.parametrize("src", ["CSR", "CSC", "COO"])
def test_every_source_converts_into_a_value_permutation(src):
    conv = spf.Conversion(src, "CSRDict").compile()
    for name, m in MATRICES.items():
        out = conv(spf.Tensor.from_scipy(src, m.asformat(src.lower())))
        np.testing.assert_array_equal(out.to_dense(), m.toarray(), err_msg=name)
        perm = np.asarray(out.fields["perm"])
        np.testing.assert_array_equal(np.sort(perm), np.arange(m.nnz), err_msg=name)
        back = out.convert("CSR").to_scipy()
        assert (back != m).nnz == 0, name


def test_values_are_kept_in_insertion_order():
    """Entries given out of order keep their values in the order given; perm maps each
    sorted position to its value's slot."""
    rows, cols = np.array([2, 0, 1, 0]), np.array([1, 2, 0, 0])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    t = spf.Tensor.from_coords("CSRDict", (3, 3), [rows, cols], vals)
    np.testing.assert_array_equal(t.fields["val"], vals)
    np.testing.assert_array_equal(t.fields["idx"], [0, 2, 0, 1])
    np.testing.assert_array_equal(t.fields["perm"], [3, 1, 2, 0])
    np.testing.assert_array_equal(t.to_dense(), sp.coo_matrix((vals, (rows, cols)),
                                                              shape=(3, 3)).toarray())


def test_a_value_permutation_as_a_kernel_output_and_operand():
    a = MATRICES["random"]
    csc = spf.Tensor.from_scipy("CSC", a.tocsc())
    k = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSC", "B": "CSC", "C": "CSRDict"})
    c = k.compile()(A=csc, B=csc)
    np.testing.assert_allclose(c.to_dense(), a.multiply(a).toarray())
    x = np.arange(a.shape[1], dtype=float)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=c, x=x)
    np.testing.assert_allclose(y, a.multiply(a) @ x)


def test_the_report_says_what_chose_perm():
    report = spf.Conversion("CSR", "CSRDict").report()
    assert "perm(pk) = the entry's number (the values in the order the entries arrive)" in report
