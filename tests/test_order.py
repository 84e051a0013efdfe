"""The default loop order's locate-before-find rule (spf/middle/order.py): a dense layout level
whose index another operand reads from its index array is located from that operand's
entries instead of being scanned with a find inside it.  Every kernel runs against numpy."""
import numpy as np
import pytest
import scipy.sparse as sp

import spf

SPMV = "y(i) = A(i,j) * x(j)"


def sparse_vector(layout: str, n: int, idx: list[int], seed: int = 0
                  ) -> tuple[spf.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    idx = np.array(idx, dtype=np.int32)
    val = rng.uniform(-1, 1, len(idx))
    dense = np.zeros(n)
    dense[idx] = val
    return spf.Tensor.from_arrays(layout, (n,), {"size": n, "len": len(idx), "idx": idx,
                                                  "val": val}), dense


def random_csc(shape, density, seed, empty_cols=()):
    m = sp.random(*shape, density=density, format="csc", random_state=seed)
    m = m.tolil()
    for c in empty_cols:
        m[:, c] = 0
    return sp.csc_matrix(m)


@pytest.mark.parametrize("x_layout", ["SV", "SV_unsorted", "SV_decreasing"])
def test_csc_spmspv_is_driven_by_x(x_layout):
    k = spf.Kernel(SPMV, {"A": "CSC", "x": x_layout})
    assert k.order[0] == "x_p"
    assert k.decisions == ()                       # no find: A's column is located
    assert "x_p placed before A_pj: A_pj is located from j" in k.report()
    src = k.c_source()
    assert src.index("for (spf_index_t x_p") < src.index("A_colPtr[A_pj]")


CASES = [  # (shape, density, x coordinates, empty columns)
    ((7, 5), 0.5, [0, 2, 4], ()),
    ((7, 5), 0.5, [], ()),                         # empty x
    ((7, 5), 0.0, [1, 3], ()),                     # empty A
    ((1, 1), 1.0, [0], ()),                        # one nonzero
    ((3, 9), 0.6, [8, 0, 5, 2], (5, 2)),           # rectangular, x hits empty columns
    ((40, 30), 0.1, list(range(0, 30, 3)), (0, 29)),
    ((0, 4), 0.0, [1], ()),                        # no rows
]


@pytest.mark.parametrize("x_layout", ["SV", "SV_unsorted", "SV_decreasing"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_csc_spmspv_push_against_numpy(x_layout, case):
    shape, density, idx, empty = CASES[case]
    if x_layout == "SV":
        idx = sorted(idx)
    elif x_layout == "SV_decreasing":
        idx = sorted(idx, reverse=True)
    A = random_csc(shape, density, case, empty)
    x, x_dense = sparse_vector(x_layout, shape[1], idx, case)
    f = spf.Kernel(SPMV, {"A": "CSC", "x": x_layout}, name=f"push_{x_layout}").compile()
    y = f(A=spf.Tensor.from_scipy("CSC", A), x=x)
    np.testing.assert_allclose(y, A.toarray() @ x_dense, rtol=1e-12, atol=1e-14)


def test_parallel_push_private_outputs():
    A = random_csc((300, 200), 0.05, 3)
    x, x_dense = sparse_vector("SV", 200, list(range(0, 200, 2)), 3)
    k = spf.Kernel(SPMV, {"A": "CSC", "x": "SV"}, parallel=True, name="push_par")
    assert k.parallel_loop == "x_p"
    y = k.compile()(A=spf.Tensor.from_scipy("CSC", A), x=x)
    np.testing.assert_allclose(y, A.toarray() @ x_dense, rtol=1e-12, atol=1e-14)


def test_outer_product_driven_by_coo_entries():
    """C = A B with A in CSC and B in COO: B's entries locate A's column k."""
    expr = "C(i,j) = A(i,k) * B(k,j)"
    k = spf.Kernel(expr, {"A": "CSC", "B": "COO"}, name="csc_coo")
    assert k.order[0] == "B_p" and k.decisions == ()
    A = random_csc((6, 8), 0.4, 1, empty_cols=(3,))
    B = sp.random(8, 5, density=0.3, format="coo", random_state=2)
    C = k.compile()(A=spf.Tensor.from_scipy("CSC", A), B=spf.Tensor.from_scipy("COO", B))
    np.testing.assert_allclose(C, A.toarray() @ B.toarray(), rtol=1e-12, atol=1e-14)


def test_given_order_is_kept():
    k = spf.Kernel(SPMV, {"A": "CSC", "x": "SV"}, order=["A.pj", "x.p", "A.pi"])
    assert k.order[:3] == ("A_pj", "x_p", "A_pi")
    assert "  order:" not in k.report() and k.order_why == ()
    assert len(k.decisions) == 1                   # the find of each column in x


def test_no_move_without_an_index_array_read():
    """CSR SpMSpV: x's index is compared with A's column array (a find), not located."""
    k = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"})
    assert k.order[:2] == ("A_pi", "A_pj") and k.order_why == ()
