"""Register blocking of a dense output (a slice's or block's sums kept in a local array across
the loop they do not depend on) and ``unroll`` (the innermost loop unrolled per trip count):
results equal scipy's on awkward shapes, and the generated C compiles without warnings."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf
from spf.tensor import Tensor

SPMV = "y(i) = A(i,j) * x(j)"
SLOTS_OUTER = ("A.s", "A.k", "A.r")        # SELL: a slice's rows inside its slots

# layout, parameters, options: each makes a kernel whose output is register-blocked
BLOCKED = [
    ("SELL", {"C": 4}, {"order": SLOTS_OUTER}),
    ("SELL", {"C": 8}, {"order": SLOTS_OUTER, "parallel": True}),
    ("SELL_sigma", {"C": 4, "sigma": 8}, {"order": SLOTS_OUTER}),
    ("BCSR", {"B": 3}, {}),
    ("BlockedELL", {"B": 2}, {}),
]


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(7)
    rows = np.repeat(np.arange(10), np.arange(1, 11))[:55]    # 1 to 10 entries; row 10 empty
    lengths = sp.csr_matrix((np.arange(1.0, 56.0), (rows, rng.integers(0, 13, 55))),
                            shape=(11, 13))
    one = sp.csr_matrix(([2.5], ([6], [4])), shape=(9, 5))
    return {
        "random_rect": sp.random(37, 23, density=0.2, format="csr", random_state=3),
        "uneven_rows": lengths,
        "one_entry": one,
        "empty": sp.csr_matrix((7, 6)),
    }


MATRICES = _matrices()


def _spmv(layout: str, params: dict, options: dict, matrix: sp.csr_matrix,
          **more) -> tuple[np.ndarray, str]:
    lay = spf.load_layout(layout, **params)
    kernel = spf.Kernel(SPMV, {"A": lay}, **options, **more).compile()
    x = np.linspace(-2.0, 3.0, matrix.shape[1])
    tensor = Tensor.from_scipy("CSR", matrix).convert(lay, allow_padding=True)
    return np.asarray(kernel(A=tensor, x=x)), kernel.source


@pytest.mark.parametrize("matrix", MATRICES, ids=list(MATRICES))
@pytest.mark.parametrize("layout,params,options", BLOCKED,
                         ids=[f"{b[0]}-{'-'.join(b[2])}" for b in BLOCKED])
def test_register_blocked_spmv_equals_scipy(layout, params, options, matrix):
    m = MATRICES[matrix]
    y, source = _spmv(layout, params, options, m)
    assert "spf_block[" in source and "summed in spf_block across" in source
    np.testing.assert_allclose(y, m @ np.linspace(-2.0, 3.0, m.shape[1]), atol=1e-12)


def test_register_block_adds_into_the_output_and_keeps_the_semiring():
    m = MATRICES["random_rect"]
    lay = spf.load_layout("SELL", C=4)
    tensor = Tensor.from_scipy("CSR", m).convert(lay)
    x = np.linspace(-2.0, 3.0, m.shape[1])
    y0 = np.arange(m.shape[0], dtype=float)
    acc = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": lay}, order=SLOTS_OUTER).compile()
    y = y0.copy()
    acc(y=y, A=tensor, x=x)
    np.testing.assert_allclose(y, y0 + m @ x, atol=1e-12)
    tropical = spf.Kernel(SPMV, {"A": lay}, order=SLOTS_OUTER, semiring="min_plus").compile()
    assert "spf_block[" in tropical.source
    dense, present = m.toarray(), m.toarray() != 0
    expect = np.where(present, dense + x, np.inf).min(axis=1)
    np.testing.assert_allclose(np.asarray(tropical(A=tensor, x=x)), expect)


def test_no_block_where_the_output_depends_on_every_loop():
    csr = spf.Kernel(SPMV, {"A": "CSR"}).c_source()
    rows_inner = spf.Kernel(SPMV, {"A": spf.load_layout("SELL", C=4)}).c_source()
    assert "spf_block" not in csr and "spf_block" not in rows_inner


@pytest.mark.parametrize("matrix", MATRICES, ids=list(MATRICES))
@pytest.mark.parametrize("options", [{"unroll": 3}, {"unroll": 8, "parallel": True},
                                     {"unroll": 16, "reassociate": True}],
                         ids=["3", "8-parallel", "16-reassociate"])
def test_unrolled_rows_equal_scipy(options, matrix):
    m = MATRICES[matrix]
    y, source = _spmv("CSR", {}, options, m)
    np.testing.assert_allclose(y, m @ np.linspace(-2.0, 3.0, m.shape[1]), atol=1e-12)
    if not options.get("reassociate"):
        assert f"unrolled for the trip counts 1 to {options['unroll']}" in source


def test_unroll_keeps_the_order_of_the_sum_and_says_where_it_does_not_apply():
    rng = np.random.default_rng(1)
    m = sp.random(60, 60, density=0.15, format="csr", random_state=2)
    m.data = rng.standard_normal(m.nnz) * 10.0 ** rng.integers(-8, 8, m.nnz)
    plain, _ = _spmv("CSR", {}, {}, m)
    unrolled, _ = _spmv("CSR", {}, {"unroll": 8}, m)
    # the same sums in the same order: within the rounding of the compiler's contractions
    np.testing.assert_allclose(unrolled, plain, rtol=1e-14, atol=0)
    dense = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "DenseMatrix"}, unroll=4)
    assert any("unroll=4 not applied" in n and "without reading index arrays" in n
               for n in dense.plan.notes)
    simd = spf.Kernel(SPMV, {"A": "CSR"}, unroll=4, reassociate=True)
    assert any("runs in parallel or as SIMD lanes" in n for n in simd.plan.notes)
    with pytest.raises(spf.SpecError, match="unroll must be an integer from 0 to 16"):
        spf.Kernel(SPMV, {"A": "CSR"}, unroll=17)


@pytest.mark.parametrize("layout,params,options", [*BLOCKED, ("CSR", {}, {"unroll": 8})],
                         ids=[*(b[0] for b in BLOCKED), "CSR-unroll"])
def test_generated_c_is_warning_free(layout, params, options):
    kernel = spf.Kernel(SPMV, {"A": spf.load_layout(layout, **params)}, **options)
    assert_compiles_clean(kernel.c_source(), ("-fopenmp", "-Wextra"))
