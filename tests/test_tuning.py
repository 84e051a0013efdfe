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
    assert second.cached and len(second.report) == 1
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
    assert tuned.options == {"parallel": True} and tuned.kernel.kernel.parallel_loop
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x, atol=1e-12)


def test_a_new_operand_is_never_taken_for_the_tuned_one():
    """The tuned object is held: another matrix is converted, never mistaken for it."""
    A, x = _random(150, 5), np.ones(150)
    tuned = spf.tune(SPMV, candidates=["CSR", "SELL"], A=A, x=x)
    for seed in range(6, 9):
        B = _random(150, seed)
        np.testing.assert_allclose(tuned(A=B, x=x), B @ x, atol=1e-12)
