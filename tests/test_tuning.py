"""``spf.tune`` (issue 41, first part): candidates converted, pruned with their reasons,
measured; the tuned result equals the untuned one; the decision cached per structure."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf
import spf.tuning as tuning

SPMV = "y(i) = A(i,j) * x(j)"
TRIED = ["CSR", "CSC", "DIA", "SELL", "BCSR", "LowerTri", "DenseMatrix", "NoSuchLayout"]


@pytest.fixture(autouse=True)
def own_decisions(tmp_path, monkeypatch):
    """Decisions kept in a directory of this test (compiled kernels stay shared)."""
    monkeypatch.setattr(tuning, "_path", lambda key: tmp_path / "tune" / f"{key}.json")


def _laplace(n: int) -> sp.csr_matrix:
    return sp.diags([4.0, -1.0, -1.0, -1.0, -1.0], [0, 1, -1, n, -n], shape=(n * n, n * n),
                    format="csr")


def _random(n: int, seed: int) -> sp.csr_matrix:
    return sp.random(n, n, density=0.02, format="csr", random_state=seed)


@pytest.mark.parametrize("matrix", [_laplace(12), _random(150, 1)], ids=["laplace", "random"])
def test_tuned_equals_untuned_and_says_why(matrix):
    x = np.linspace(-1, 1, matrix.shape[1])
    tuned = spf.tune(SPMV, candidates=TRIED, A=matrix, x=x)
    np.testing.assert_allclose(tuned(A=matrix, x=x), matrix @ x, atol=1e-12)
    status = {r.layout: r.status for r in tuned.report}
    assert sum(r.status == "chosen" for r in tuned.report) == 1
    assert tuned.layouts["A"].name == next(r.layout for r in tuned.report if r.status == "chosen")
    assert status["LowerTri"].startswith("pruned: entry") and "gj <= gi" in status["LowerTri"]
    assert status["DenseMatrix"] == "pruned: a dense layout"
    assert status["NoSuchLayout"].startswith("pruned:") and "unknown layout" in \
        status["NoSuchLayout"]
    measured = [r for r in tuned.report if r.kernel_s is not None]
    assert measured and all(r.kernel_s > 0 and r.convert_s is not None for r in measured)
    if matrix.shape[0] == 150:         # DIA of a random matrix: mostly padding, refused
        assert "padding, over 75%" in status["DIA"]
    own = next(r for r in tuned.report if r.layout == "CSR")
    assert own.convert_s == 0.0 and own.break_even_calls is None
    assert "A: " in tuned.describe()


def test_the_decision_is_cached_per_structure():
    A, B = _random(150, 1), _random(150, 2)     # the same family, different entries
    x = np.ones(150)
    first = spf.tune(SPMV, candidates=TRIED, A=A, x=x)
    assert not first.cached
    second = spf.tune(SPMV, candidates=TRIED, A=B, x=x)
    assert second.cached and len(second.report) == 1 and second.decision_s > 0
    assert second.layouts["A"] == first.layouts["A"]
    np.testing.assert_allclose(second(A=B, x=x), B @ x)
    other = spf.tune(SPMV, candidates=TRIED, A=_laplace(12), x=np.ones(144))
    assert not other.cached                     # another structure: measured again


def test_calls_weigh_the_conversion():
    A, x = _random(150, 3), np.ones(150)
    once = spf.tune(SPMV, candidates=["CSR", "SELL", "CSC"], calls=1, A=A, x=x)
    assert once.layouts["A"].name == "CSR"       # no conversion pays off in one call


def test_evaluate_with_tune_and_reuse_of_converted_operands():
    A, x = _laplace(10), np.arange(100.0)
    np.testing.assert_allclose(spf.evaluate(SPMV, A=A, x=x, tune=True), A @ x)
    tuned = spf.tune(SPMV, candidates=["CSR", "DIA"], A=A, x=x)
    converted = tuned.operands["A"]
    assert converted.layout == tuned.layouts["A"]
    np.testing.assert_allclose(tuned(A=A, x=2 * x), A @ (2 * x))      # the same A: reused
    np.testing.assert_allclose(tuned(A=2 * A, x=x), 2 * (A @ x))      # another: converted


def test_refusals():
    x = np.ones(4)
    with pytest.raises(spf.ArgumentError, match="needs exactly one sparse operand"):
        spf.tune(SPMV, A=np.eye(4), x=x)
    with pytest.raises(spf.ArgumentError, match="threads must be a positive integer"):
        spf.tune(SPMV, threads=0, A=sp.eye(4, format="csr"), x=x)
    with pytest.raises(spf.ArgumentError, match="tune=True chooses the layouts and options"):
        spf.evaluate(SPMV, A=sp.eye(4, format="csr"), x=x, tune=True, parallel=True)


def test_threads_build_parallel_candidates():
    A, x = _random(200, 4), np.ones(200)
    tuned = spf.tune(SPMV, candidates=["CSR", "SELL"], threads=2, A=A, x=x)
    measured = [dict(r.options) for r in tuned.report if r.kernel_s is not None]
    assert sum(o.get("parallel", False) for o in measured) >= 2      # CSR and SELL
    assert bool(tuned.kernel.kernel.parallel_loop) == bool(tuned.options.get("parallel"))
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x, atol=1e-12)


def test_a_new_operand_is_never_taken_for_the_tuned_one():
    """The tuned object is held: another matrix is converted, never mistaken for it."""
    A, x = _random(150, 5), np.ones(150)
    tuned = spf.tune(SPMV, candidates=["CSR", "SELL"], A=A, x=x)
    for seed in range(6, 9):
        B = _random(150, seed)
        np.testing.assert_allclose(tuned(A=B, x=x), B @ x, atol=1e-12)


def test_leading_rows_sample_the_tensor():
    A = sp.tril(_random(60, 7), format="csr")
    t = spf.Tensor.from_scipy("CSR", A)
    part = t.leading(20)
    assert part.shape == (20, 60) and part.layout == t.layout
    np.testing.assert_array_equal(part.to_scipy().toarray(), A[:20].toarray())
    square = t.leading(20, trim=True)      # lower triangular: its sample stays square
    assert square.shape == (20, 20)
    np.testing.assert_array_equal(square.to_scipy().toarray(), A[:20, :20].toarray())
    assert t.leading(0).shape == (0, 60)
    with pytest.raises(spf.ArgumentError, match=r"m must be an integer in 0\.\.60"):
        t.leading(61)


def test_storage_estimated_on_samples(monkeypatch):
    """Above SAMPLED_ABOVE entries, candidates are converted on two leading samples; the
    estimate extrapolates them, and a layout storing far more than the operand's own is
    pruned before it is converted whole."""
    monkeypatch.setattr(tuning, "SAMPLED_ABOVE", 500)
    A = _laplace(40)                                # 7,840 entries, 1,600 rows
    x = np.ones(A.shape[0])
    tuned = spf.tune(SPMV, candidates=["CSR", "DIA", "CSB", "SELL", "LowerTri"], A=A, x=x)
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)
    rows = {(r.layout, r.params): r for r in tuned.report if not r.options
            or r.options == ()}
    csb = rows[("CSB", (("B", 2),))]
    assert "over 8x the operand's own layout (estimated on its first" in csb.status
    assert "a sample of its first" in rows[("LowerTri", ())].status   # not lower triangular
    exact = tuning._nbytes(spf.Tensor.from_scipy("CSR", A))
    assert rows[("CSR", ())].bytes == exact
    sell = spf.Tensor.from_scipy("CSR", A).convert(spf.load_layout("SELL", C=4))
    estimate = tuning._Sampled.of(spf.Tensor.from_scipy("CSR", A)).estimate(
        sell.layout, float("inf"))
    assert abs(estimate - tuning._nbytes(sell)) < 0.1 * tuning._nbytes(sell)


def test_options_tried_on_the_fastest_layout():
    A, x = _random(300, 8), np.ones(300)
    tuned = spf.tune(SPMV, candidates=["CSR", "SELL"], threads=2, A=A, x=x)
    options = [dict(r.options) for r in tuned.report if r.kernel_s is not None]
    assert {"parallel": True} in options and {"parallel": True, "reassociate": True} in options
    assert {"parallel": False} in options           # one thread tried too
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x, atol=1e-12)
    exact = spf.tune(SPMV, candidates=["CSR"], reassociate=False, A=A, x=x)
    assert all("reassociate" not in dict(r.options) for r in exact.report)
    assert "reassociate" not in exact.options


def test_allocations_over_a_limit_are_refused_before_they_are_made():
    """A conversion whose arrays would exceed the allocation limit in force (or the
    machine's memory) is refused with the array's name, before it is allocated."""
    from spf.runtime.memory import allocation_limit, reserve
    t = spf.Tensor.from_scipy("CSR", sp.eye(4000, format="csr"))
    refused = r"CSB's blkStart would take 32 MB, over the 1\.049 MB allowed \(a test's limit\)"
    with allocation_limit(1 << 20, "a test's limit"), \
            pytest.raises(spf.ArgumentError, match=refused):
        t.convert(spf.load_layout("CSB", B=2))
    assert t.convert(spf.load_layout("CSB", B=2)).shape == (4000, 4000)   # no limit: built
    with pytest.raises(spf.ArgumentError, match="more than this machine's memory"):
        reserve(1 << 62, "an absurd array")


def test_a_cached_decision_that_cannot_hold_the_operand_is_measured_again(monkeypatch):
    monkeypatch.setattr(tuning, "_cached", lambda key: {"layout": "LowerTri", "params": [],
                                                        "options": {}})
    A, x = _random(150, 9), np.ones(150)           # not lower triangular
    tuned = spf.tune(SPMV, candidates=["CSR", "SELL"], A=A, x=x)
    assert not tuned.cached and tuned.layouts["A"].name in ("CSR", "SELL")
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x, atol=1e-12)


def test_the_signature_tells_triangular_banded_and_blocked_apart():
    n = 400
    full = spf.Tensor.from_scipy("CSR", _random(n, 10))
    lower = spf.Tensor.from_scipy("CSR", sp.tril(_random(n, 10) + _random(n, 11), format="csr"))
    assert tuning.signature(full)["lower"] != tuning.signature(lower)["lower"]
    band = spf.Tensor.from_scipy("CSR", sp.diags([1.0] * 9, range(-4, 5), shape=(n, n),
                                                 format="csr"))
    blocks = spf.Tensor.from_scipy("CSR", sp.kron(sp.random(50, 50, density=0.07,
                                                            random_state=1), np.ones((8, 8)),
                                                  format="csr"))
    assert tuning.signature(band)["per_diagonal"] > tuning.signature(full)["per_diagonal"]
    assert tuning.signature(blocks)["per_block"] > tuning.signature(full)["per_block"]


def test_a_nest_sweeping_its_output_per_diagonal_is_tried_cache_blocked():
    A, x = _laplace(60), np.arange(3600.0)
    tuned = spf.tune(SPMV, candidates=["DIA"], A=A, x=x)
    tiled = [r for r in tuned.report if "tile" in dict(r.options)]
    assert len(tiled) == 1 and tiled[0].kernel_s is not None
    assert dict(tiled[0].options)["order"] == ["A.pi_tile", "A.pd", "A.pi"]
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)
    csr = spf.tune(SPMV, candidates=["CSR"], A=A, x=x)    # rows outermost: nothing to block
    assert not any("tile" in dict(r.options) for r in csr.report)


def test_slices_tried_with_their_rows_innermost_and_rows_unrolled():
    A, x = _laplace(40), np.linspace(0.0, 1.0, 1600)
    tuned = spf.tune(SPMV, candidates=["SELL"], A=A, x=x)
    measured = [dict(r.options) for r in tuned.report if r.kernel_s is not None]
    assert {"order": ["A.s", "A.k", "A.r"]} in measured     # the slice's sums in registers
    assert {"unroll": tuning.UNROLL} in measured
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x, atol=1e-12)
    csr = spf.tune(SPMV, candidates=["CSR"], A=A, x=x)     # no loop of constant extent
    assert not any("order" in dict(r.options) for r in csr.report)
    assert {"unroll": tuning.UNROLL} in [dict(r.options) for r in csr.report
                                        if r.kernel_s is not None]


def test_decisions_depend_on_the_other_operands_and_measure_the_own_layout():
    """A sparse x makes another kernel than a dense one: its decision is not reused; the
    operand's own layout is always among those measured (the break-even baseline)."""
    A = _random(150, 12)
    dense = spf.tune(SPMV, candidates=["SELL", "CSR", "CSC"], A=A, x=np.ones(150))
    x = spf.Tensor.from_coords("SV", (150,), (np.array([3, 70], np.int32),),
                               np.array([1.0, -2.0]))
    sparse = spf.tune(SPMV, candidates=["SELL", "CSR", "CSC"], layouts={"x": "SV"}, A=A, x=x)
    assert not dense.cached and not sparse.cached
    np.testing.assert_allclose(sparse(A=A, x=x), A[:, 3].toarray().ravel()
                               - 2 * A[:, 70].toarray().ravel())
    few = spf.tune(SPMV, candidates=1, A=_random(150, 13), x=np.ones(150))
    assert next(r.layout for r in few.report if r.kernel_s is not None) == "CSR"


@pytest.mark.parametrize("layout", ["CSC", "COO", "DCSR"])
def test_the_signature_is_the_same_read_from_any_storage(layout):
    """From a pointer and a coordinate array (CSR, CSC) or from the entries (others), the
    same matrix has the same structure (CSC's outer segments are its columns)."""
    A = sp.tril(_random(300, 14), format="csr") + sp.eye(300, format="csr")
    own = tuning.signature(spf.Tensor.from_scipy("CSR", A))
    other = tuning.signature(spf.Tensor.from_scipy("CSR", A).convert(layout))
    if layout == "CSC":
        other["rows"] = own["rows"] = None
    assert other == own
