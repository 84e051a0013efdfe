"""A representative run of generated kernels, executed under AddressSanitizer and
UndefinedBehaviorSanitizer by tests/test_sanitizers.py (it must not be collected by pytest).

``python representative.py CASE...`` runs the named cases (all of them without arguments);
the test runs one case per subprocess, so xdist spreads them over its workers.
"""
import itertools
import sys
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

import spf

MATRIX_LAYOUTS = ["CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "ELL", "DIA", "LowerTri"]


def matrix(m, n, density, seed):
    return sp.random(m, n, density=density, format="csr", random_state=seed)


def vector(n, density, seed):
    return sp.random(n, 1, density=density, random_state=seed).toarray().ravel()


def rectangular():
    """37 x 45 with an empty row."""
    A = matrix(37, 45, 0.15, 1)
    A[3, :] = 0
    A.eliminate_zeros()
    return A


def lower():
    return sp.tril(matrix(40, 40, 0.2, 2)).tocsr()


def square_with_empty_row():
    M = matrix(40, 40, 0.2, 11)
    M[5, :] = 0
    M.eliminate_zeros()
    return M


def spmv(lay: str) -> None:
    """SpMV over ``lay`` with a dense and every sparse vector and every find, serial or
    parallel in turn (shifted per layout: each layout runs both, and so does each vector
    and find over the layouts)."""
    M = lower() if lay == "LowerTri" else rectangular()
    t = spf.Tensor.from_scipy(lay, M)
    assert np.allclose(t.to_dense(), M.toarray()), lay
    xx = vector(M.shape[1], 0.3, 4)
    shift = MATRIX_LAYOUTS.index(lay)
    for k, (xl, find) in enumerate(itertools.product(
            ["DenseVector", "SV", "SV_unsorted", "SV_decreasing"],
            ["auto", "seqiter", "hashmap", "binsearch"])):
        if xl == "DenseVector" and find != "auto":
            continue            # no find with a dense vector
        xt = xx if xl == "DenseVector" else spf.Tensor.from_dense(xl, xx)
        try:
            kernel = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": lay, "x": xl}, find=find,
                                parallel=(k + shift) % 2 == 1)
        except spf.SynthesisError:      # no such find here, or its state cannot be private
            continue
        assert np.allclose(kernel.compile()(A=t, x=xt), M @ xx), (lay, xl, find)


def spmspm() -> None:
    """SpMSpM into a dense output over pairs with finds, under each find."""
    for a, b in [("CSR", "DCSR"), ("DCSR", "DCSR"), ("COO", "COO"), ("BCSR", "COO"),
                 ("SortedCOO", "SortedCOO"), ("LowerTri", "CSR"), ("CSR", "CSC")]:
        M1 = lower() if a == "LowerTri" else matrix(40, 40, 0.2, 6)
        M2 = matrix(40, 30, 0.2, 7)
        for find in ("auto", "hashmap", "binsearch"):
            try:
                k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": a, "B": b}, find=find)
            except spf.SynthesisError:
                continue
            C = k.compile()(A=spf.Tensor.from_scipy(a, M1), B=spf.Tensor.from_scipy(b, M2))
            assert np.allclose(C, (M1 @ M2).toarray()), (a, b, find)


def dots_and_tensors() -> None:
    """The three-way dot of Fig. 11, TTM on CSF (serial and parallel), a tiled dot."""
    u, v, w = vector(60, 0.4, 8), vector(60, 0.4, 9), vector(60, 0.4, 10)
    k = spf.Kernel("s = A(i) * B(i) * C(i)",
                   {"A": "SV", "B": "SV_decreasing", "C": "SV_unsorted"})
    assert np.isclose(k.compile()(A=spf.Tensor.from_dense("SV", u),
                                  B=spf.Tensor.from_dense("SV_decreasing", v),
                                  C=spf.Tensor.from_dense("SV_unsorted", w)), np.sum(u * v * w))
    rng = np.random.default_rng(5)
    T = np.zeros((6, 7, 8))
    T[rng.random(T.shape) < 0.2] = 1.5
    Bm = rng.random((8, 5))
    for parallel in (False, True):
        k = spf.Kernel("C(i,j,l) = A(i,j,k) * B(k,l)", {"A": "CSF"}, parallel=parallel)
        assert np.allclose(k.compile()(A=spf.Tensor.from_dense("CSF", T), B=Bm),
                           np.einsum("ijk,kl->ijl", T, Bm))
    k = spf.Kernel("s = A(i) * B(i)", {"A": "SV", "B": "SV"}, find="loop", tile={"B.p": 8})
    assert np.isclose(k.compile()(A=spf.Tensor.from_dense("SV", u),
                                  B=spf.Tensor.from_dense("SV", v)), u @ v)


def assembled_outputs() -> None:
    """Assembled sparse outputs (workspace, sort and 1-D modes) and sums (merged runs)."""
    M1, M2 = square_with_empty_row(), matrix(40, 30, 0.2, 12)
    for a, b, c in [("CSR", "CSR", "CSR"), ("COO", "CSR", "DCSR"), ("DCSR", "COO", "COO"),
                    ("CSR", "CSR", "CSC"), ("CSR", "DCSR", "SortedCOO")]:
        k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": a, "B": b, "C": c})
        C = k.compile()(A=spf.Tensor.from_scipy(a, M1), B=spf.Tensor.from_scipy(b, M2))
        assert np.allclose(C.to_dense(), (M1 @ M2).toarray()), (a, b, c)
    A, x = rectangular(), vector(45, 0.3, 3)
    for ay, yl in [("CSC", "SV"), ("CSR", "SV_decreasing")]:
        k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": ay, "x": "SV", "y": yl})
        y = k.compile()(A=spf.Tensor.from_scipy(ay, A), x=spf.Tensor.from_dense("SV", x))
        assert np.allclose(y.to_dense(), A @ x), (ay, yl)
    M3, SQ = matrix(40, 40, 0.1, 13), lower()
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j) - D(i,j)",
                   {"A": "CSR", "B": "COO", "D": "DCSR", "C": "CSR"})
    C = k.compile()(A=spf.Tensor.from_scipy("CSR", M1), B=spf.Tensor.from_scipy("COO", M3),
                    D=spf.Tensor.from_scipy("DCSR", SQ))
    assert np.allclose(C.to_dense(), (M1 + M3 - SQ).toarray())
    k = spf.Kernel("y(i) = A(i,j) * x(j) + b(i)", {"A": "CSR"}, parallel=True)
    bb = vector(37, 1.0, 14)
    assert np.allclose(k.compile()(A=spf.Tensor.from_scipy("CSR", A), x=x, b=bb), A @ x + bb)


def conversions(width: str) -> None:
    """Conversions (assembled, bucket, placed), SpGEMM and the generated property check with
    ``width`` indices."""
    M1, M2 = square_with_empty_row(), matrix(40, 30, 0.2, 12)
    coo = spf.Tensor.from_scipy("COO", M1.tocoo(), index_type=width)
    for dst, params in [("CSR", {}), ("CSC", {}), ("DCSR", {}), ("DIA", {}), ("ELL", {}),
                        ("BCSR", {"B": 4}), ("SortedCOO", {})]:
        out = coo.convert(dst, allow_padding=True, **params)
        assert np.array_equal(out.to_dense(), M1.toarray()), (dst, width)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   index_type=width)
    C = k.compile()(A=spf.Tensor.from_scipy("CSR", M1, index_type=width),
                    B=spf.Tensor.from_scipy("CSR", M2, index_type=width))
    assert np.allclose(C.to_dense(), (M1 @ M2).toarray()), width
    bad = spf.Tensor.from_scipy("CSR", M1, index_type=width).fields
    cols = bad["colIdx"].copy()
    cols[[1, 2]] = cols[[2, 1]]                   # unsorted within row 0 (periodic check)
    try:
        spf.Tensor.from_arrays("CSR", M1.shape, {**bad, "colIdx": cols}, index_type=width)
        raise AssertionError("an unsorted row passed the generated check")
    except spf.ArgumentError:
        pass


CASES: dict[str, Callable[[], None]] = {
    **{f"spmv-{lay}": (lambda lay=lay: spmv(lay)) for lay in MATRIX_LAYOUTS},
    "spmspm": spmspm,
    "dots-and-tensors": dots_and_tensors,
    "assembled-outputs": assembled_outputs,
    **{f"conversions-{w}": (lambda w=w: conversions(w)) for w in ("int32", "int64")},
}


def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {unknown}; the cases are {list(CASES)}")
    for name in names or list(CASES):
        CASES[name]()
    print("SANITIZED RUN OK")


if __name__ == "__main__":
    main(sys.argv[1:])
