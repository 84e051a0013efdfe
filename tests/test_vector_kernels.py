"""Vector kernels: sparse dot, three-way dot, SpMV and SpMSpV over the vector and matrix layouts.

Every result is compared with numpy on the original dense data (never with spf output).
Kernels are generated and compiled once per layout combination (module-level cache).
"""
from __future__ import annotations

import itertools
from functools import cache

import numpy as np
import pytest
from conftest import assert_compiles_clean, covering, lanes

import spf

VECTORS = ["SV", "SV_unsorted", "SV_decreasing", "DenseVector"]
SPARSE_VECTORS = ["SV", "SV_unsorted", "SV_decreasing"]
# Matrix layouts for SpMV/SpMSpV; names without a layout file are skipped.
MATRICES = ["CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "ELL", "DIA", "LowerTri",
            "DenseMatrix"]
# Layouts that must store every matrix; others (LowerTri) may refuse a case, which is skipped.
GENERAL = {"CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "ELL", "DIA", "DenseMatrix"}
KNOWN = set(spf.layout_names())

DOT = "v = A(i) * B(i)"
DOT_ACC = "v += A(i) * B(i)"
DOT3 = "v = A(i) * B(i) * C(i)"
SPMV = "y(i) = A(i,j) * x(j)"
SPMV_ACC = "y(i) += A(i,j) * x(j)"


def _need(*layouts):
    missing = [n for n in layouts if n not in KNOWN]
    if missing:
        pytest.skip(f"layout(s) {missing} not present")


@cache
def _kernel(expr: str, layouts: tuple) -> spf.Kernel:
    return spf.Kernel(expr, dict(layouts))


@cache
def _compiled(expr: str, layouts: tuple):
    return _kernel(expr, layouts).compile()


def run(expr: str, layouts: dict, **args):
    return _compiled(expr, tuple(sorted(layouts.items())))(**args)


# ------------------------------------------------------------------------------ data
def _sparse(n, density, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2.0, 2.0, size=n)
    a[rng.random(n) >= density] = 0.0
    return a


def _one(n, at, value=2.5):
    a = np.zeros(n)
    a[at] = value
    return a


N = 23
VECTOR_CASES = {
    "empty": np.zeros(N),
    "one_first": _one(N, 0),
    "one_last": _one(N, N - 1, -1.25),
    "one_mid": _one(N, 11, 4.0),
    "full": np.arange(1.0, N + 1.0),
    "random0": _sparse(N, 0.3, 0),
    "random1": _sparse(N, 0.5, 1),
    "random2": _sparse(N, 0.7, 2),
}
# pairs (and triples) of cases: every case against a random one, some against each other
PAIRS = [(c, "random1") for c in VECTOR_CASES] + [
    ("random0", "random2"), ("one_mid", "one_mid"), ("one_first", "one_last"),
    ("empty", "empty"), ("full", "random0")]
TRIPLES = [("random0", "random1", "random2"), ("random1", "full", "random2"),
           ("empty", "random1", "random2"), ("one_mid", "full", "random1"),
           ("random2", "random2", "random2"), ("one_first", "one_first", "full")]


def pack_vector(layout: str, a: np.ndarray, seed: int = 0) -> spf.Tensor:
    """Pack ``a`` from its nonzeros in random order (so SV_unsorted really is unsorted)."""
    rng = np.random.default_rng(seed)
    nz = np.flatnonzero(a)
    perm = rng.permutation(len(nz))
    return spf.Tensor.from_coords(layout, a.shape, (nz[perm],), a[nz[perm]])


def _random_matrix(shape, density, seed, lower=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2.0, 2.0, size=shape)
    a[rng.random(shape) >= density] = 0.0
    return np.tril(a) if lower else a


def _empty_rows():
    a = _random_matrix((9, 8), 0.6, 30)
    a[[0, 3, 4, 8], :] = 0.0
    return a


def _one_matrix(shape, at):
    a = np.zeros(shape)
    a[at] = -3.0
    return a


MATRIX_CASES = {
    "empty": np.zeros((6, 5)),
    "empty_rows": _empty_rows(),
    "empty_cols": _empty_rows().T.copy(),
    "one": _one_matrix((5, 7), (3, 6)),
    "rect_7x13": _random_matrix((7, 13), 0.3, 31),
    "rect_13x7": _random_matrix((13, 7), 0.3, 32),
    "square": _random_matrix((20, 20), 0.2, 33),
    "lower": _random_matrix((11, 11), 0.4, 34, lower=True),
    "lower_one": _one_matrix((6, 6), (5, 0)),
}


def pack_matrix(layout: str, a: np.ndarray, seed: int = 0) -> spf.Tensor:
    """Pack ``a`` from shuffled coordinates; a layout outside GENERAL may refuse (skip)."""
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(a)
    perm = rng.permutation(len(rows))
    try:
        return spf.Tensor.from_coords(layout, a.shape, (rows[perm], cols[perm]),
                                      a[rows[perm], cols[perm]])
    except (spf.ArgumentError, ValueError) as exc:
        if layout in GENERAL:
            raise
        pytest.skip(f"{layout} cannot store this matrix: {exc}")


def _vector_for(layout: str, n: int, density: float, seed: int) -> tuple[np.ndarray, object]:
    x = _sparse(n, density, seed)
    if layout == "DenseVector":
        return x, x
    return x, pack_vector(layout, x, seed)


def _close(got, expected):
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ dot products
@pytest.mark.parametrize("la,lb", list(itertools.product(VECTORS, VECTORS)))
@pytest.mark.parametrize("ca,cb", PAIRS)
def test_dot(la, lb, ca, cb):
    a, b = VECTOR_CASES[ca], VECTOR_CASES[cb]
    got = run(DOT, {"A": la, "B": lb}, A=pack_vector(la, a, 1), B=pack_vector(lb, b, 2))
    assert isinstance(got, float)
    _close(got, np.dot(a, b))


@pytest.mark.parametrize("la,lb", [("SV", "SV"), ("SV_unsorted", "SV_decreasing"),
                                   ("DenseVector", "SV_unsorted"), ("SV_decreasing", "SV")])
def test_dot_accumulate(la, lb):
    a, b = VECTOR_CASES["random0"], VECTOR_CASES["random2"]
    A, B = pack_vector(la, a, 3), pack_vector(lb, b, 4)
    _close(run(DOT_ACC, {"A": la, "B": lb}, A=A, B=B, v=2.5), 2.5 + np.dot(a, b))
    _close(run(DOT_ACC, {"A": la, "B": lb}, A=A, B=B, v=0.0), np.dot(a, b))
    # plain '=' ignores nothing: it starts from zero and refuses an initial value
    _close(run(DOT, {"A": la, "B": lb}, A=A, B=B), np.dot(a, b))
    with pytest.raises(spf.ArgumentError):
        run(DOT, {"A": la, "B": lb}, A=A, B=B, v=1.0)


def test_dot_size_zero_and_one():
    for la, lb in [("SV", "SV_unsorted"), ("SV_decreasing", "DenseVector")]:
        for a, b in [(np.zeros(0), np.zeros(0)), (np.array([3.0]), np.array([-2.0])),
                     (np.array([0.0]), np.array([5.0]))]:
            got = run(DOT, {"A": la, "B": lb}, A=pack_vector(la, a), B=pack_vector(lb, b))
            _close(got, np.dot(a, b))


def test_dot_shape_mismatch():
    A = pack_vector("SV", VECTOR_CASES["random0"])
    B = pack_vector("SV_unsorted", np.zeros(N + 1))
    with pytest.raises(spf.ArgumentError):
        run(DOT, {"A": "SV", "B": "SV_unsorted"}, A=A, B=B)


@pytest.mark.parametrize("la,lb,lc", lanes(itertools.product(VECTORS, VECTORS, VECTORS),
                                           covering(VECTORS, VECTORS, VECTORS), "-".join))
def test_dot3(la, lb, lc):
    layouts = {"A": la, "B": lb, "C": lc}
    for k, (ca, cb, cc) in enumerate(TRIPLES):
        a, b, c = VECTOR_CASES[ca], VECTOR_CASES[cb], VECTOR_CASES[cc]
        got = run(DOT3, layouts, A=pack_vector(la, a, k), B=pack_vector(lb, b, k + 1),
                  C=pack_vector(lc, c, k + 2))
        _close(got, np.sum(a * b * c))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_dot3_fig11(seed):
    """Fig. 11: A sorted increasingly, B sorted decreasingly, C unsorted."""
    n = 200
    a, b, c = _sparse(n, 0.4, seed), _sparse(n, 0.5, seed + 10), _sparse(n, 0.6, seed + 20)
    layouts = {"A": "SV", "B": "SV_decreasing", "C": "SV_unsorted"}
    C = pack_vector("SV_unsorted", c, seed)
    assert len(C["idx"]) < 2 or not np.all(np.diff(C["idx"]) > 0)
    got = run(DOT3, layouts, A=pack_vector("SV", a), B=pack_vector("SV_decreasing", b), C=C)
    _close(got, np.sum(a * b * c))


# ------------------------------------------------------------------------------ SpMV, SpMSpV
@pytest.mark.parametrize("la", MATRICES)
@pytest.mark.parametrize("case", list(MATRIX_CASES))
def test_spmv(la, case):
    _need(la)
    a = MATRIX_CASES[case]
    A = pack_matrix(la, a, 5)
    for seed in (0, 1):
        x = np.random.default_rng(seed).uniform(-1, 1, a.shape[1])
        y = run(SPMV, {"A": la}, A=A, x=x)
        assert y.shape == (a.shape[0],)
        _close(y, a @ x)


@pytest.mark.parametrize("la,lx,case", lanes(
    itertools.product(MATRICES, SPARSE_VECTORS, MATRIX_CASES),
    covering(MATRICES, SPARSE_VECTORS, list(MATRIX_CASES)), "-".join))
def test_spmspv(la, lx, case):
    _need(la, lx)
    a = MATRIX_CASES[case]
    A = pack_matrix(la, a, 6)
    for seed, density in ((0, 0.0), (1, 0.3), (2, 1.0)):
        x, X = _vector_for(lx, a.shape[1], density, seed)
        y = run(SPMV, {"A": la, "x": lx}, A=A, x=X)
        _close(y, a @ x)
    if a.shape[1]:
        x = _one(a.shape[1], a.shape[1] - 1)
        _close(run(SPMV, {"A": la, "x": lx}, A=A, x=pack_vector(lx, x)), a @ x)


@pytest.mark.parametrize("la,lx", lanes(
    itertools.product(MATRICES, ["DenseVector", "SV", "SV_unsorted"]),
    covering(MATRICES, ["DenseVector", "SV", "SV_unsorted"]), "-".join))
def test_spmv_accumulate(la, lx):
    _need(la, lx)
    for case in ("rect_7x13", "rect_13x7", "empty_rows", "lower"):
        a = MATRIX_CASES[case]
        try:
            A = pack_matrix(la, a, 7)
        except pytest.skip.Exception:
            continue
        x, X = _vector_for(lx, a.shape[1], 0.5, 8)
        y0 = np.random.default_rng(9).uniform(-1, 1, a.shape[0])
        y = run(SPMV_ACC, {"A": la, "x": lx}, A=A, x=X, y=y0.copy())
        _close(y, y0 + a @ x)
        with pytest.raises(spf.ArgumentError):   # '+=' needs the output passed in
            run(SPMV_ACC, {"A": la, "x": lx}, A=A, x=X)


@pytest.mark.parametrize("la", ["CSR", "CSC", "COO", "SortedCOO"])
def test_spmv_random_large(la):
    for seed in range(3):
        a = _random_matrix((60 + seed, 45 - seed), 0.08, 100 + seed)
        A = pack_matrix(la, a, seed)
        x, X = _vector_for("SV_unsorted", a.shape[1], 0.4, seed)
        _close(run(SPMV, {"A": la, "x": "SV_unsorted"}, A=A, x=X), a @ x)
        _close(run(SPMV, {"A": la}, A=A, x=x), a @ x)


# ------------------------------------------------------------------------------ generated C
def _all_specs():
    specs = [(DOT, {"A": a, "B": b}) for a, b in itertools.product(VECTORS, VECTORS)]
    specs += [(DOT_ACC, {"A": "SV", "B": "SV_unsorted"})]
    specs += [(DOT3, {"A": a, "B": b, "C": c})
              for a, b, c in itertools.product(VECTORS, VECTORS, VECTORS)]
    for la in MATRICES:
        specs.append((SPMV, {"A": la}))
        specs.append((SPMV_ACC, {"A": la}))
        specs += [(SPMV, {"A": la, "x": lx}) for lx in SPARSE_VECTORS]
    return specs


_SPEC_NAMES = {DOT: "dot", DOT_ACC: "dot_acc", DOT3: "dot3", SPMV: "spmv", SPMV_ACC: "spmv_acc"}


def _spec_id(spec: tuple[str, dict[str, str]]) -> str:
    return f"{_SPEC_NAMES[spec[0]]}-{'-'.join(spec[1].values())}"


# the fast lane: every kernel once and every layout in each role of the other kernels
_FAST_SPECS = {_spec_id(s) for s in _all_specs()
               if s[0] == DOT_ACC or len(set(s[1].values())) == 1}
_FAST_SPECS |= {_spec_id((SPMV, {"A": a, "x": x})) for a, x in covering(MATRICES, SPARSE_VECTORS)}


@pytest.mark.parametrize("expr,layouts", lanes(_all_specs(), lambda s: _spec_id(s) in _FAST_SPECS,
                                               _spec_id))
def test_generated_c_compiles_clean(expr, layouts):
    _need(*layouts.values())
    assert_compiles_clean(_kernel(expr, tuple(sorted(layouts.items()))).c_source())


def test_sorted_sv_dot_is_fig2c():
    """Sorted SV . sorted SV with the guard-loop find: one loop over A, a guard loop over B."""
    src = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find="loop").c_source()
    assert "for (spf_index_t A_p" in src
    assert "if (i == B_idx[B_p])" in src
    assert src.count("for (") == 2
    assert src.index("for (spf_index_t A_p") < src.index("for (spf_index_t B_p") \
        < src.index("if (i == B_idx[B_p])")
