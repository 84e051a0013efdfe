"""Parallel assembly of sparse outputs and '+=' into assembled outputs (issue 40, item 5):
rows a CSR-shaped output's parallel loop owns are counted, prefix-summed and filled by the
threads; '+=' merges the old entries with the new ones.  Against scipy and numpy."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf

SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def _rand(shape, density, seed, dtype=np.float64, empty_rows=()):
    m = sp.random(*shape, density=density, format="lil", random_state=seed,
                  data_rvs=lambda n: np.random.default_rng(seed).integers(1, 9, n))
    for r in empty_rows:
        m[r, :] = 0
    return sp.csr_matrix(m, dtype=dtype)


def _same_csr(got: spf.Tensor, ref) -> None:
    """Equal arrays, entry for entry (sorted rows, no explicit zeros from cancellation)."""
    ref = sp.csr_matrix(ref)
    ref.sort_indices()
    assert got.fields["rowPtr"].tolist() == ref.indptr.tolist()
    assert got.fields["colIdx"].tolist() == ref.indices.tolist()
    np.testing.assert_allclose(got.values, ref.data)


CASES = [("random", (60, 40, 50), 0.08), ("empty", (5, 4, 6), 0.0), ("one_row", (1, 30, 20), 0.3),
         ("wide", (8, 6, 3000), 0.02)]


@pytest.mark.parametrize("name, shape, density", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("a_layout", ["CSR", "DCSR"])
def test_spgemm_rows_in_parallel(name, shape, density, a_layout):
    m, n, p = shape
    A, B = _rand((m, n), density, 1, empty_rows=(0,) if m > 2 else ()), _rand((n, p), density, 2)
    k = spf.Kernel(SPGEMM, {"A": a_layout, "B": "CSR", "C": "CSR"}, parallel=True)
    assert k.parallel_loop is not None and "Rows mode, first pass" in k.c_source()
    got = k.compile()(A=spf.Tensor.from_scipy(a_layout, A), B=spf.Tensor.from_scipy("CSR", B))
    _same_csr(got, A @ B)


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.complex128])
def test_typed_rows_and_warning_free_c(dtype):
    A, B = _rand((30, 20), 0.1, 3, dtype), _rand((20, 25), 0.1, 4, dtype)
    k = spf.Kernel(SPGEMM, {"A": "CSR", "B": "CSR", "C": "CSR"}, parallel=True,
                   dtype=np.dtype(dtype).name)
    assert_compiles_clean(k.c_source(), ("-fopenmp",))
    assert_compiles_clean(k.c_source())                       # also without OpenMP
    got = k.compile()(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("CSR", B))
    assert got.values.dtype == dtype
    _same_csr(got, A @ B)


def test_finds_masks_and_semirings_in_parallel_rows():
    A, B = _rand((40, 30), 0.2, 5), _rand((40, 30), 0.2, 6)
    a, b = spf.Tensor.from_scipy("CSR", A), spf.Tensor.from_scipy("CSR", B)
    eltwise = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                         parallel=True)
    assert eltwise.parallel_loop is not None
    _same_csr(eltwise.compile()(A=a, B=b), A.multiply(B))
    M = _rand((40, 40), 0.3, 7)
    masked = spf.evaluate("C(i,j) = A(i,k) * B(k,j)", A=A, B=B.T.tocsr(), mask={"C": "M"},
                          M=M, layouts={"C": "CSR"}, parallel=True)
    ref = (A @ B.T).multiply(M != 0)
    ref.eliminate_zeros()
    np.testing.assert_allclose(masked.to_dense(), ref.toarray())
    tropical = spf.evaluate(SPGEMM, A=a, B=spf.Tensor.from_scipy("CSR", B.T.tocsr()),
                            layouts={"C": "CSR"}, semiring="min_plus", parallel=True)
    Ad, Bd = A.toarray(), B.T.toarray()
    inf = np.where(Ad[:, :, None] != 0, Ad[:, :, None], np.inf) + \
        np.where(Bd[None] != 0, Bd[None], np.inf)
    best = inf.min(axis=1)
    dense = tropical.to_dense()
    stored = np.isfinite(best)
    np.testing.assert_allclose(dense[stored], best[stored])


def test_serial_when_rows_are_not_owned_and_why():
    conv = spf.Kernel("O(i,j) = I(i-k,j-l) * F(k,l)", {"I": "CSR", "F": "CSR", "O": "CSR"},
                      parallel=True)
    assert conv.parallel_loop is None
    assert "assembled by one thread (the loops do not produce i in order)" in \
        conv.analysis().parallel_reason
    zeros = spf.Kernel(SPGEMM, {"A": "CSR", "B": "CSR", "C": "CSR"}, parallel=True,
                       drop_zeros=True)
    assert "drop_zeros=True" in zeros.analysis().parallel_reason


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("out", ["CSR", "DCSR", "COO"])
def test_accumulate_into_an_assembled_output(out, parallel):
    A, B, C0 = _rand((30, 20), 0.1, 1), _rand((20, 25), 0.1, 2), _rand((30, 25), 0.1, 3)
    k = spf.Kernel("C(i,j) += A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": out},
                   parallel=parallel).compile()
    old = spf.Tensor.from_scipy(out, C0)
    before = old.to_dense().copy()
    new = k(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("CSR", B), C=old)
    np.testing.assert_allclose(new.to_dense(), (C0 + A @ B).toarray())
    np.testing.assert_array_equal(old.to_dense(), before)       # the old tensor is unchanged
    with pytest.raises(spf.ArgumentError, match="'\\+=' adds into 'C': pass its old value"):
        k(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("CSR", B))


def test_accumulate_through_evaluate_with_a_mask_and_a_semiring():
    A, C0 = _rand((12, 9), 0.3, 8), _rand((12, 9), 0.3, 9)
    got = spf.evaluate("C(i,j) += 2 * A(i,j)", A=A, out=C0)
    np.testing.assert_allclose(got.toarray(), (C0 + 2 * A).toarray())
    M = _rand((12, 9), 0.5, 10)
    masked = spf.evaluate("C(i,j) += A(i,j)", A=A, out=C0, mask={"C": "M"}, M=M)
    # GraphBLAS's accumulate under a mask: entries outside the mask keep their old values
    np.testing.assert_allclose(masked.toarray(), (C0 + A.multiply(M != 0)).toarray())
    big = spf.evaluate("C(i,j) += A(i,j)", A=A, out=C0, semiring="max_plus")
    Ad, Cd = A.toarray(), C0.toarray()
    ref = np.where((Ad != 0) & (Cd != 0), np.maximum(Ad, Cd), Ad + Cd)
    np.testing.assert_allclose(big.toarray(), ref)


@pytest.mark.parametrize("layout", ["CSR", "CSC"])
def test_sparse_add_merged_by_rows_in_parallel(layout):
    A, B = _rand((80, 50), 0.05, 11), _rand((80, 50), 0.05, 12)
    D = _rand((80, 50), 0.1, 13, empty_rows=(5, 6))       # rows one run lacks
    for expr, ops, ref in [("C(i,j) = A(i,j) + B(i,j)", {"A": A, "B": B}, A + B),
                           ("C(i,j) = A(i,j) - B(i,j) + D(i,j)", {"A": A, "B": B, "D": D},
                            A - B + D)]:
        k = spf.Kernel(expr, {**dict.fromkeys(ops, layout), "C": layout}, parallel=True)
        assert k.parallel_loop == ("i" if layout == "CSR" else "j")
        assert "in parallel over the output's rows" in k.report()
        assert_compiles_clean(k.c_source(), ("-fopenmp",))
        got = k.compile()(**{n: spf.Tensor.from_scipy(layout, m) for n, m in ops.items()})
        np.testing.assert_allclose(got.to_dense(), ref.toarray())
        serial = spf.Kernel(expr, {**dict.fromkeys(ops, layout), "C": layout}).compile()
        same = serial(**{n: spf.Tensor.from_scipy(layout, m) for n, m in ops.items()})
        for f in got.fields:
            np.testing.assert_array_equal(np.asarray(got.fields[f]),
                                          np.asarray(same.fields[f]))


def test_parallel_merge_of_empty_and_one_row_operands():
    for shape in ((0, 4), (1, 9), (6, 0)):
        A, B = _rand(shape, 0.5, 1), _rand(shape, 0.5, 2)
        got = spf.evaluate("C(i,j) = A(i,j) + B(i,j)", A=spf.Tensor.from_scipy("CSR", A),
                           B=spf.Tensor.from_scipy("CSR", B), layouts={"C": "CSR"},
                           parallel=True)
        assert got.shape == shape
        np.testing.assert_allclose(got.to_dense(), (A + B).toarray())
