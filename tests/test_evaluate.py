"""spf.evaluate: layouts inferred from the operands, kernels cached per process, results
as numpy / scipy / Tensor; every result compared with numpy or scipy."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp

import spf

sparse = pytest.importorskip("sparse")
evaluation = importlib.import_module("spf.evaluation")   # spf imports it lazily


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    return {"A": sp.random(40, 30, density=0.15, format="csr", random_state=1),
            "B": sp.random(30, 25, density=0.15, format="csr", random_state=2),
            "x": rng.random(30), "D": rng.random((40, 30))}


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dia", "bsr", "lil", "dok"])
def test_spmv_any_scipy_format(data, fmt):
    a = data["A"].asformat(fmt)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=data["x"]),
                               data["A"] @ data["x"], atol=1e-12)


def test_inferred_layouts(data):
    a = data["A"]
    evaluation.clear_cache()
    spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=data["x"])
    spf.evaluate("y(i) = A(i,j) * x(j)", A=a.tocsc(), x=data["x"])
    spf.evaluate("y(i) = A(i,j) * x(j)", A=a.tocoo(), x=data["x"])
    u = a.copy()
    u.indices[:2] = u.indices[:2][::-1]     # row 0 has at least two entries: now unsorted
    assert a.indptr[1] >= 2
    u.has_sorted_indices = False
    spf.evaluate("y(i) = A(i,j) * x(j)", A=u, x=data["x"])
    used = [dict(key[1])["A"].split("[")[0] for key in evaluation._kernels]
    assert used == ["CSR", "CSC", "SortedCOO", "CSR_unsorted"]
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=u, x=data["x"]),
                               u @ data["x"])


def test_kernel_built_once(data, monkeypatch):
    evaluation.clear_cache()
    built = []
    real = spf.Kernel.compile
    monkeypatch.setattr(spf.Kernel, "compile", lambda self: built.append(1) or real(self))
    for _ in range(3):
        spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"], x=data["x"])
    spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"], x=data["x"], parallel=True)
    assert len(built) == 2


def test_sparse_output_is_csr_array(data):
    c = spf.evaluate("C(i,j) = A(i,k) * B(k,j)", A=data["A"], B=data["B"])
    assert isinstance(c, sp.csr_array)
    np.testing.assert_allclose(c.toarray(), (data["A"] @ data["B"]).toarray(), atol=1e-12)
    s = spf.evaluate("C(i,j) = A(i,j) + B(i,j)", A=data["A"], B=data["A"].tocoo() * 2)
    assert isinstance(s, sp.csr_array)
    np.testing.assert_allclose(s.toarray(), 3 * data["A"].toarray(), atol=1e-12)
    # a dense operand makes the output dense
    d = spf.evaluate("C(i,j) = A(i,j) * D(i,j)", A=data["A"], D=data["D"])
    np.testing.assert_allclose(d, data["A"].toarray() * data["D"])


def test_layouts_override(data):
    t = spf.evaluate("C(i,j) = A(i,k) * B(k,j)", layouts={"C": "CSC"}, A=data["A"], B=data["B"])
    assert isinstance(t, spf.Tensor) and t.layout.name == "CSC"
    np.testing.assert_allclose(t.to_dense(), (data["A"] @ data["B"]).toarray(), atol=1e-12)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", layouts={"A": "ELL"}, A=data["A"], x=data["x"])
    np.testing.assert_allclose(y, data["A"] @ data["x"])


def test_tensor_numpy_scalar_and_out(data):
    a = spf.Tensor.from_scipy("DCSR", data["A"])
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=data["x"]),
                               data["A"] @ data["x"])
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=data["D"], x=data["x"]),
                               data["D"] @ data["x"])
    y = np.ones(40)
    assert spf.evaluate("y(i) += a * A(i,j) * x(j)", out=y, a=2.0, A=data["A"], x=data["x"]) is y
    np.testing.assert_allclose(y, 1 + 2 * (data["A"] @ data["x"]))
    assert spf.evaluate("s = x(i) * z(i)", x=data["x"], z=data["x"]) == pytest.approx(
        data["x"] @ data["x"])


def test_pydata_operands():
    t = sparse.random((5, 6, 7), density=0.2, random_state=0)
    m = np.random.default_rng(1).random((7, 4))
    want = np.einsum("ijk,kr->ijr", t.todense(), m)
    for value in (t, sparse.GCXS(t)):
        np.testing.assert_allclose(spf.evaluate("Y(i,j,r) = T(i,j,k) * M(k,r)", T=value, M=m),
                                   want, atol=1e-12)
    a = sparse.random((6, 5), density=0.3, random_state=2)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=np.ones(5)),
                               a.todense() @ np.ones(5))


def test_index_type_option(data):
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"], x=data["x"], index_type="int64")
    np.testing.assert_allclose(y, data["A"] @ data["x"])
    a64 = spf.Tensor.from_scipy("CSR", data["A"], index_type="int64")
    c = spf.evaluate("C(i,j) = A(i,k) * B(k,j)", A=a64, B=data["B"])
    np.testing.assert_allclose(c.toarray(), (data["A"] @ data["B"]).toarray(), atol=1e-12)


def test_bad_input(data):
    with pytest.raises(spf.ArgumentError, match=r"evaluate: \['paralel'\] are neither tensors "
                                                r"of 'y\(i\) = A\(i,j\) \* x\(j\)' "
                                                r"\(\['A', 'x', 'y'\]\) "
                                                "nor params or kernel options"):
        spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"], x=data["x"], paralel=True)
    with pytest.raises(spf.ArgumentError, match="evaluate: missing operand 'x'"):
        spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"])
    with pytest.raises(spf.ArgumentError, match=r"evaluate: 'A': expected an spf.Tensor, a numpy "
                                                r"array, a scipy.sparse matrix or array, a pydata "
                                                r"sparse array or a number, got dict"):
        spf.evaluate("y(i) = A(i,j) * x(j)", A={}, x=data["x"])
    dup = sp.coo_matrix(([1.0, 2.0], ([0, 0], [1, 1])), shape=(2, 2))
    with pytest.warns(spf.ConvertedOperandWarning, match="does not satisfy layout SortedCOO"):
        y = spf.evaluate("y(i) = A(i,j) * x(j)", A=dup, x=np.ones(2))    # duplicates added
    np.testing.assert_array_equal(y, dup @ np.ones(2))
    dup.col[0] = 2                          # outside the shape: no layout can store it
    with pytest.raises(spf.ArgumentError, match=r"evaluate: 'A': no layout listed for a "
                                                r"scipy.sparse coo_matrix \(coo\) can store it "
                                                r"\(SortedCOO: .*; COO: .*violates range.*\); "
                                                r"pass layouts=\{'A': ...\}"):
        spf.evaluate("y(i) = A(i,j) * x(j)", A=dup, x=np.ones(2))
    with pytest.raises(spf.ArgumentError, match="'A' holds complex128 values; the kernel "
                                                "computes it as float64"):
        spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"].astype(complex), x=data["x"],
                     dtype="float64")
    with pytest.raises(spf.ArgumentError, match="index 'j' has extent 30 in A"):
        spf.evaluate("y(i) = A(i,j) * x(j)", A=data["A"], x=np.ones(4))
    with pytest.raises(spf.SpecError, match="unknown layout 'Nope'"):
        spf.evaluate("y(i) = A(i,j) * x(j)", layouts={"A": "Nope"}, A=data["A"], x=data["x"])
    with pytest.raises(spf.ArgumentError, match="the expression must be a string"):
        spf.evaluate(3, A=data["A"])
