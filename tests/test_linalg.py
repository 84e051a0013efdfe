"""spf.aslinearoperator: scipy's solvers run on the spf operator and on the scipy matrix give the
same answers; every product compared with numpy on the dense matrix."""
from __future__ import annotations

import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import spf
from spf.linear_operator import Product

sparse = pytest.importorskip("sparse")


def laplacian(n: int) -> sp.csr_array:
    """The 5-point Laplacian of an n x n grid (symmetric positive definite)."""
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
    return sp.csr_array(sp.kronsum(T, T))


def iterations(solver, A, b, **kwargs) -> tuple[np.ndarray, int, int]:
    """(solution, info, callbacks) of ``solver`` on A and b."""
    calls = []
    x, info = solver(A, b, callback=lambda _: calls.append(1), **kwargs)
    return x, info, len(calls)


def agree(got: np.ndarray, want: np.ndarray, atol: float = 1e-12) -> None:
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=atol)


# ---------------------------------------------------------------------------------------
# solvers: the same solver on the scipy matrix is the reference
def test_cg_on_laplacian():
    M = laplacian(30)
    b = np.random.default_rng(0).random(M.shape[0])
    x, info, its = iterations(sla.cg, spf.aslinearoperator(M), b, rtol=1e-10)
    x_ref, info_ref, its_ref = iterations(sla.cg, M, b, rtol=1e-10)
    assert info == info_ref == 0 and abs(its - its_ref) <= 1 and its > 30
    np.testing.assert_allclose(x, x_ref, rtol=1e-8)
    assert np.linalg.norm(M @ x - b) <= 1e-9 * np.linalg.norm(b)


def test_gmres_on_nonsymmetric_matrix():
    R = sp.random(500, 500, density=0.01, format="csr", random_state=4)
    M = sp.csr_array(R + sp.diags_array(np.asarray(abs(R).sum(axis=1)).ravel() + 1.0))  # dominant
    b = np.random.default_rng(1).random(500)
    kwargs = {"rtol": 1e-10, "restart": 20, "callback_type": "pr_norm"}
    x, info, its = iterations(sla.gmres, spf.aslinearoperator(M.tocsc()), b, **kwargs)
    x_ref, info_ref, its_ref = iterations(sla.gmres, M, b, **kwargs)
    assert info == info_ref == 0 and abs(its - its_ref) <= 1 and its > 5
    np.testing.assert_allclose(x, x_ref, rtol=1e-8)


def test_lsqr_on_rectangular_matrix():
    M = sp.csr_array(sp.vstack([sp.random(200, 80, density=0.05, random_state=5),
                                sp.eye_array(80)]))          # 280 x 80, full column rank
    b = np.random.default_rng(2).random(280)
    kwargs = {"atol": 1e-12, "btol": 1e-12}
    x, istop, itn = sla.lsqr(spf.aslinearoperator(M), b, **kwargs)[:3]
    x_ref, istop_ref, itn_ref = sla.lsqr(M, b, **kwargs)[:3]
    assert istop == istop_ref and abs(itn - itn_ref) <= 1 and itn > 5
    np.testing.assert_allclose(x, x_ref, rtol=1e-8)
    np.testing.assert_allclose(x, np.linalg.lstsq(M.toarray(), b, rcond=None)[0], rtol=1e-8)


def test_eigsh_largest_eigenvalues():
    M = laplacian(20)
    v0 = np.random.default_rng(3).random(M.shape[0])
    w, v = sla.eigsh(spf.aslinearoperator(M.tocoo()), k=3, which="LM", v0=v0, tol=1e-10)
    w_ref = sla.eigsh(M, k=3, which="LM", v0=v0, tol=1e-10, return_eigenvectors=False)
    np.testing.assert_allclose(np.sort(w), np.sort(w_ref), rtol=1e-9)
    assert np.abs(M @ v - v * w).max() <= 1e-7


# ---------------------------------------------------------------------------------------
# products on every kind of operand
def matrix() -> np.ndarray:
    """7 x 5 with an empty row (2) and an empty column (4)."""
    D = np.random.default_rng(6).random((7, 5)) * (np.random.default_rng(7).random((7, 5)) < 0.5)
    D[2, :] = 0.0
    D[:, 4] = 0.0
    D[0, 0] = 3.0
    return D


OPERANDS = {
    "csr": (sp.csr_array, "CSR"),
    "csc": (sp.csc_matrix, "CSC"),
    "coo": (sp.coo_array, "SortedCOO"),
    "pydata": (sparse.COO.from_numpy, "SortedCOO"),
    "dcsr": (lambda D: spf.Tensor.from_dense("DCSR", D), "DCSR"),
    "ell": (lambda D: spf.Tensor.from_dense("ELL", D), "ELL"),
    "dense": (lambda D: D, "DenseMatrix"),
}


def check_products(op, D: np.ndarray) -> None:
    """Every product of ``op`` against D's, for (n,), (n, 1) and (n, k) operands."""
    rng = np.random.default_rng(8)
    m, n = D.shape
    x, y, X, Y = rng.random(n), rng.random(m), rng.random((n, 3)), rng.random((m, 2))
    assert op.shape == (m, n) and op.dtype == np.float64
    agree(op.matvec(x), D @ x)
    agree(op.matvec(x[:, None]), D @ x[:, None])
    agree(op @ x, D @ x)
    agree(op @ x[:, None], D @ x[:, None])
    agree(op(X), D @ X)
    agree(op.matmat(X), D @ X)
    agree(op.matmat(x[:, None]), D @ x[:, None])
    agree(op.rmatmat(y[:, None]), D.T @ y[:, None])
    agree(op.rmatvec(y), D.T @ y)
    agree(op.rmatvec(y[:, None]), D.T @ y[:, None])
    agree(op.rmatmat(Y), D.T @ Y)
    agree(op.H @ y, D.T @ y)
    agree(op.T @ Y, D.T @ Y)
    agree(op.H.rmatvec(x), D @ x)
    agree(op.H.rmatmat(X), D @ X)


@pytest.mark.parametrize("kind", OPERANDS)
def test_products(kind):
    make, layout = OPERANDS[kind]
    D = matrix()
    op = spf.aslinearoperator(make(D))
    assert op.A.layout.name == layout           # inferred as spf.evaluate infers it
    check_products(op, D)


@pytest.mark.parametrize("shape,entries", [((0, 5), 0), ((5, 0), 0), ((0, 0), 0), ((4, 3), 0),
                                           ((4, 3), 1)], ids=str)
@pytest.mark.parametrize("kind", ["csr", "dcsr"])
def test_empty_and_one_nonzero(kind, shape, entries):
    D = np.zeros(shape)
    if entries:
        D[2, 1] = 5.0
    op = spf.aslinearoperator(OPERANDS[kind][0](D))
    check_products(op, D)
    agree(op.matmat(np.ones((shape[1], 0))), np.zeros((shape[0], 0)))


def test_inputs_are_converted_as_kernels_convert_them():
    D = matrix()
    op = spf.aslinearoperator(sp.csr_array(D))
    x = np.arange(10.0)
    agree(op @ x[::2], D @ x[::2])                                  # not contiguous
    agree(op @ np.arange(5), D @ np.arange(5.0))                    # integers
    agree(op @ np.arange(5, dtype=np.float32), D @ np.arange(5.0))
    X = np.asfortranarray(np.arange(15.0).reshape(5, 3))
    agree(op @ X, D @ X)
    agree(op.H @ np.ones(7, dtype=bool), D.T @ np.ones(7))
    agree(op.matvec([1, 2, 3, 4, 5]), D @ np.arange(1.0, 6.0))      # a list


def test_parallel_kernels():
    M = sp.random(300, 200, density=0.05, format="csr", random_state=9)
    op = spf.aslinearoperator(M, parallel=True)
    check_products(op, M.toarray())
    assert op.products.compiled(Product.MATVEC).kernel.parallel_loop is not None
    assert op.products.compiled(Product.MATMAT).kernel.parallel_loop is not None


def test_kernels_compiled_on_first_use_and_shared():
    op = spf.aslinearoperator(sp.random(6, 4, density=0.5, format="csr", random_state=1))
    assert op.products._compiled == {}
    op @ np.ones(4)
    op @ np.ones((4, 1))                  # one column: the matrix-vector kernel
    assert set(op.products._compiled) == {Product.MATVEC}
    assert op.H.products is op.products and op.H.shape == (4, 6)
    op.H @ np.ones(6)
    assert set(op.products._compiled) == {Product.MATVEC, Product.RMATVEC}
    other = spf.aslinearoperator(sp.random(9, 3, density=0.5, format="csr", random_state=2))
    assert other.products.compiled(Product.MATVEC) is op.products.compiled(Product.MATVEC)
    threaded = spf.aslinearoperator(sp.random(9, 3, density=0.5, format="csr", random_state=2),
                                  parallel=True)
    assert threaded.products.compiled(Product.MATVEC) is not op.products.compiled(Product.MATVEC)


def test_operand_wrapped_once():
    M = sp.random(6, 4, density=0.5, format="csr", random_state=1)
    op = spf.aslinearoperator(M)
    assert np.shares_memory(op.A.values, M.data)            # read in place
    T = spf.Tensor.from_scipy("DCSR", M)
    assert spf.aslinearoperator(T).A is T


@pytest.mark.parametrize("layout", ["ELL", "DCSR", "CSC"])
def test_named_layout(layout):
    D = matrix()
    for A in (sp.csr_array(D), spf.Tensor.from_dense("CSR", D)):   # converted once
        op = spf.aslinearoperator(A, layout=layout)
        assert op.A.layout.name == layout
        check_products(op, D)
    op = spf.aslinearoperator(D, layout=spf.load_layout("BCSR", B=2))
    assert op.A.layout.params == {"B": 2}
    check_products(op, D)


def test_index_type_int64():
    D = matrix()
    op = spf.aslinearoperator(sp.csr_array(D), index_type="int64")
    assert op.A.layout.index_type == "int64"
    agree(op @ np.arange(5.0), D @ np.arange(5.0))
    agree(op.H @ np.arange(7.0), D.T @ np.arange(7.0))
    T = spf.Tensor.from_dense("CSR", D, index_type="int64")
    assert spf.aslinearoperator(T).A.layout.index_type == "int64"
    with pytest.raises(spf.ArgumentError, match=r"aslinearoperator: A is a CSR tensor with "
                       r"index_type 'int32' but index_type='int64' was asked; build the tensor "
                       r"with index_type='int64'"):
        spf.aslinearoperator(spf.Tensor.from_dense("CSR", D), index_type="int64")


def test_api_loads_without_scipy_linalg():
    code = ("import sys, spf; spf.Kernel; assert 'scipy.sparse.linalg' not in sys.modules; "
            "spf.aslinearoperator([[1.0]]); assert 'scipy.sparse.linalg' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pickled_operator_rebuilds_its_kernels():
    D = matrix()
    op = spf.aslinearoperator(sp.csr_array(D), parallel=True)
    op @ np.ones(5)
    back = pickle.loads(pickle.dumps(op.H))
    assert back.transposed and back.products.options == {"parallel": True}
    agree(back @ np.ones(7), D.T @ np.ones(7))


# ---------------------------------------------------------------------------------------
# bad input
@pytest.fixture(scope="module")
def op():
    return spf.aslinearoperator(sp.csr_array(matrix()))


@pytest.mark.parametrize("call,message", [
    (lambda op: op.matvec(np.ones(4)),
     "matvec: this 7x5 operator takes x of shape (5,) or (5, 1), got shape (4,)"),
    (lambda op: op @ np.ones((5, 1, 1)),
     "this 7x5 operator multiplies a vector or a matrix, got an array of shape (5, 1, 1)"),
    (lambda op: op.matvec(np.ones((5, 2))),
     "matvec: this 7x5 operator takes x of shape (5,) or (5, 1), got shape (5, 2)"),
    (lambda op: op @ np.ones(7),
     "matvec: this 7x5 operator takes x of shape (5,) or (5, 1), got shape (7,)"),
    (lambda op: op.rmatvec(np.ones(5)),
     "rmatvec: this 7x5 operator takes x of shape (7,) or (7, 1), got shape (5,)"),
    (lambda op: op.H @ np.ones(5),
     "matvec: this 5x7 operator takes x of shape (7,) or (7, 1), got shape (5,)"),
    (lambda op: op.matmat(np.ones((7, 2))),
     "matmat: this 7x5 operator takes x of shape (5, k), got shape (7, 2)"),
    (lambda op: op.matmat(np.ones(5)),
     "matmat: this 7x5 operator takes x of shape (5, k), got shape (5,)"),
    (lambda op: op.rmatmat(np.ones((5, 3))),
     "rmatmat: this 7x5 operator takes x of shape (7, k), got shape (5, 3)"),
    (lambda op: op @ np.ones(5, dtype=complex),
     "matvec: x has dtype complex128, but this operator computes with real float64 values "
     "(apply it to x.real and x.imag)"),
    (lambda op: op.H @ np.array(["a"] * 7),
     "matvec: x has dtype <U1, but this operator computes with real float64 values"),
    (lambda op: op.matmat(sp.csr_array(np.ones((5, 2)))),
     "matmat: x must be a dense array, got a csr_array; spf's operator multiplies dense "
     "vectors and matrices"),
], ids=range(12))
def test_bad_vector(op, call, message):
    with pytest.raises(spf.ArgumentError) as err:
        call(op)
    assert str(err.value) == message


def _outside_its_shape() -> sp.coo_matrix:
    """A COO matrix whose column 2 is outside its 2 columns (no layout stores it; one that
    stores a coordinate twice is converted, the duplicates added up)."""
    m = sp.coo_matrix(([1.0, 2.0], ([0, 0], [1, 1])), shape=(2, 2))
    m.col[0] = 2
    return m


@pytest.mark.parametrize("make,error,message", [
    (lambda: spf.aslinearoperator(np.ones(3)), spf.ArgumentError,
     "aslinearoperator: A must be a matrix (order 2), got shape (3,) (ndarray)"),
    (lambda: spf.aslinearoperator(spf.Tensor.from_coords("COO3", (2, 3, 4), ([0], [1], [2]),
                                                         [1.0])), spf.ArgumentError,
     "aslinearoperator: A must be a matrix (order 2), got shape (2, 3, 4) (Tensor)"),
    (lambda: spf.aslinearoperator("A"), spf.ArgumentError,
     "aslinearoperator: A must be an spf.Tensor, a numpy array, a scipy.sparse matrix or "
     "array or a pydata sparse array, got str"),
    (lambda: spf.aslinearoperator([[1.0, 2.0], [3.0]]), spf.ArgumentError,
     "aslinearoperator: A is a list that is no array: ..."),
    (lambda: spf.aslinearoperator(sp.eye_array(3, dtype=complex)), spf.ArgumentError,
     "aslinearoperator: A has dtype complex128, but spf computes with real float64 values"),
    (lambda: spf.aslinearoperator(_outside_its_shape()),
     spf.ArgumentError, "aslinearoperator: 'A': no layout listed for a scipy.sparse coo_matrix "
     "(coo) can store it (SortedCOO: ...; COO: ...violates range...); pass layout=..."),
    (lambda: spf.aslinearoperator(sp.eye_array(3), layout="SV"), spf.ArgumentError,
     "aslinearoperator: layout SV stores order-1 tensors; A is a matrix"),
    (lambda: spf.aslinearoperator(sp.eye_array(3), layout="Nope"), spf.SpecError,
     "Nope: unknown layout 'Nope'; known layouts: ..."),
    (lambda: spf.aslinearoperator(sp.eye_array(3), paralel=True), spf.SpecError,
     "<string>: unknown option 'paralel' (did you mean 'parallel'?); the options are name, "
     "order, find, parallel, ..."),
    # option values are checked when the operator is made
    (lambda: spf.aslinearoperator(sp.eye_array(3), parallel="yes"), spf.SpecError,
     "<string>: parallel must be True or False, got 'yes'"),
    (lambda: spf.aslinearoperator(sp.eye_array(3), find="fastest"),
     spf.SpecError, "<string>: find='fastest' is not a find algorithm; choose from ..."),
], ids=range(11))
def test_bad_operator(make, error, message):
    with pytest.raises(error) as err:
        make()
    assert re.fullmatch(".*".join(map(re.escape, message.split("..."))), str(err.value), re.S)
