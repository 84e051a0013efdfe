"""Semirings (issue 23, first part): kernels with another add and mul, for dense and scalar
outputs, on every matrix layout that stores no padding; checked against numpy references
computed entry by entry over the stored entries (GraphBLAS's structural semantics)."""
from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from conftest import covering, lanes

import spf
from spf.front.semiring import BUILTINS

SPMV = "y(i) = A(i,j) * x(j)"
LAYOUTS = ["CSR", "CSC", "COO", "DCSR", "ELL"]
REDUCE = {"plus_times": (np.sum, 0.0), "min_plus": (np.min, np.inf), "max_plus": (np.max, -np.inf),
          "max_times": (np.max, -np.inf), "min_times": (np.min, np.inf), "or_and": (np.max, 0.0),
          "plus_pair": (np.sum, 0.0), "any_pair": (np.max, 0.0)}


def products(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return {"plus_times": a * b, "min_plus": a + b, "max_plus": a + b, "max_times": a * b,
            "min_times": a * b, "or_and": ((a != 0) & (b != 0)).astype(float),
            "plus_pair": np.ones(len(a)), "any_pair": np.ones(len(a))}[name]


def reference_spmv(name: str, m: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    reduce, zero = REDUCE[name]
    out = np.full(m.shape[0], zero)
    for i in range(m.shape[0]):
        cols = m.indices[m.indptr[i]:m.indptr[i + 1]]
        if len(cols):
            out[i] = reduce(products(name, m.data[m.indptr[i]:m.indptr[i + 1]], x[cols]))
    return out


def matrix(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    m.data = rng.integers(-4, 9, m.nnz).astype(float)      # small integers: exact sums
    m.sort_indices()
    return m


CASES = [(matrix(40, 30, 0.15, 1), "random 40 x 30"), (matrix(1, 1, 1.0, 2), "one entry"),
         (sp.csr_matrix((5, 7)), "empty"), (matrix(60, 9, 0.05, 3), "empty rows, tall")]


@pytest.mark.parametrize("name,layout,parallel", lanes(
    itertools.product(sorted(BUILTINS), LAYOUTS, [False, True]),
    covering(sorted(BUILTINS), LAYOUTS, [False, True]), lambda c: f"{c[0]}-{c[1]}-{c[2]}"))
def test_spmv_every_builtin_semiring(name, layout, parallel):
    k = spf.Kernel(SPMV, {"A": layout}, semiring=name, parallel=parallel).compile()
    for m, what in CASES:
        x = np.random.default_rng(m.shape[1]).integers(-3, 5, m.shape[1]).astype(float)
        got = k(A=m, x=x)
        np.testing.assert_array_equal(got, reference_spmv(name, m, x), err_msg=what)


@pytest.mark.parametrize("name", ["min_plus", "max_times", "plus_pair"])
def test_scalar_and_dense_matrix_outputs(name):
    m = matrix(20, 20, 0.2, 4)
    x = np.random.default_rng(5).integers(0, 4, 20).astype(float)
    reduce, zero = REDUCE[name]
    dot = spf.Kernel("s = a(i) * b(i)", {"a": "SV"}, semiring=name, parallel=True).compile()
    a = sp.random(1, 20, density=0.3, random_state=6).toarray()[0].round(1) * 10
    present = np.flatnonzero(a)
    got = dot(a=spf.Tensor.from_dense("SV", a), b=x)
    expect = reduce(products(name, a[present], x[present])) if len(present) else zero
    assert got == expect
    B = np.random.default_rng(7).integers(0, 3, (20, 3)).astype(float)
    spmm = spf.Kernel("C(i,l) = A(i,k) * B(k,l)", {"A": "CSR"}, semiring=name).compile()
    C = spmm(A=m, B=B)
    for col in range(3):
        np.testing.assert_array_equal(C[:, col], reference_spmv(name, m, B[:, col]))


def test_bellman_ford_matches_scipy_csgraph():
    rng = np.random.default_rng(8)
    n = 60
    g = sp.random(n, n, density=0.06, format="csr", random_state=9)
    g.data = rng.integers(1, 10, g.nnz).astype(float)
    # relax: d(i) = min(d(i), min_j d(j) + w(j, i)), i.e. min_plus over the transpose
    relax = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus").compile()
    at = spf.Tensor.from_scipy("CSR", g.T.tocsr())
    d = np.full(n, np.inf)
    d[0] = 0.0
    for _ in range(n):
        new = np.minimum(d, relax(A=at, x=d))
        if np.array_equal(new, d):
            break
        d = new
    np.testing.assert_array_equal(d, csgraph.bellman_ford(g, indices=0))


def test_bfs_levels_with_or_and():
    g = sp.random(50, 50, density=0.05, format="csr", random_state=10)
    g.data[:] = 1.0
    step = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSC"}, semiring="or_and").compile()
    at = g.T.tocsr()
    level = np.full(50, -1)
    frontier = np.zeros(50)
    frontier[0], level[0] = 1.0, 0
    for depth in range(1, 50):
        reached = step(A=at, x=frontier)
        frontier = ((reached != 0) & (level < 0)).astype(float)
        if not frontier.any():
            break
        level[frontier != 0] = depth
    expect = csgraph.shortest_path(g, unweighted=True, indices=0)
    np.testing.assert_array_equal(level, np.where(np.isinf(expect), -1, expect).astype(int))


def test_reachability_with_or_and_into_csr():
    """The transitive closure R = I + R A + R A^2 + ..., every step a sparse output: the
    product assembled in CSR, the union merged by or."""
    g = sp.random(40, 40, density=0.04, format="csr", random_state=11)
    g.data[:] = 1.0
    step = spf.Kernel("C(i,j) = R(i,k) * A(k,j)", {"R": "CSR", "A": "CSR", "C": "CSR"},
                      semiring="or_and").compile()
    union = spf.Kernel("N(i,j) = R(i,j) + C(i,j)", {"R": "CSR", "C": "CSR", "N": "CSR"},
                       semiring="or_and").compile()
    reach = spf.Tensor.from_scipy("CSR", sp.eye(40, format="csr"))
    for _ in range(40):
        grown = union(R=reach, C=step(R=reach, A=g))
        if grown.values.size == reach.values.size:
            break
        reach = grown
    expect = np.isfinite(csgraph.shortest_path(g, unweighted=True))
    np.testing.assert_array_equal(reach.to_dense() != 0, expect)
    assert set(reach.values.tolist()) == {1.0}


def test_user_defined_semiring_and_kernel_file(tmp_path):
    sr = spf.Semiring(add="max(a, b)", mul="min(a, b)", zero="-inf", one="inf")
    assert sr.associative and sr.commutative        # proven by Z3
    m = matrix(30, 20, 0.2, 11)
    x = np.random.default_rng(12).integers(-2, 6, 20).astype(float)
    got = spf.Kernel(SPMV, {"A": "CSR"}, semiring=sr, parallel=True).compile()(A=m, x=x)
    expect = np.full(30, -np.inf)
    for i in range(30):
        s = slice(m.indptr[i], m.indptr[i + 1])
        if m.indptr[i] < m.indptr[i + 1]:
            expect[i] = np.max(np.minimum(m.data[s], x[m.indices[s]]))
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(spf.evaluate(SPMV, A=m, x=x, semiring="min_plus"),
                                  reference_spmv("min_plus", m, x))
    spec = tmp_path / "k.toml"
    spec.write_text('expr = "y(i) = A(i,j) * x(j)"\nsemiring = "min_plus"\n[layouts]\nA = "CSR"\n')
    np.testing.assert_array_equal(spf.Kernel(str(spec)).compile()(A=m, x=x),
                                  reference_spmv("min_plus", m, x))
    spec.write_text('expr = "y(i) = A(i,j) * x(j)"\n[semiring]\nadd = "min(a, b)"\n'
                    'mul = "a + b"\nzero = "inf"\none = 0\n[layouts]\nA = "CSR"\n')
    np.testing.assert_array_equal(spf.Kernel(str(spec)).compile()(A=m, x=x),
                                  reference_spmv("min_plus", m, x))


def test_cli_semiring_flag():
    out = subprocess.run([sys.executable, "-m", "spf", "generate", SPMV, "--layout", "A=CSR",
                          "--semiring", "min_plus"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "spf_acc = SPF_POS_INF" in out.stdout.replace("spf_acc_t ", "")


def test_non_associative_add_keeps_the_reduction_serial():
    sr = spf.Semiring(add="a + b - a*b*b", mul="a * b", zero=0)
    assert not sr.commutative
    k = spf.Kernel(SPMV, {"A": "COO"}, semiring=sr, parallel=True)
    assert k.parallel_loop is None and "semiring: user-defined" in k.report()
    assert "not proven associative" in k.analysis().parallel_reason
    assert "#pragma omp" not in k.c_source()
    assert spf.Kernel(SPMV, {"A": "CSR"}, semiring=sr, parallel=True).parallel_loop  # no reduction
    with pytest.raises(spf.SpecError, match="declared commutative but is not"):
        spf.Semiring(add="a + b - a*b*b", mul="a * b", commutative=True)


@pytest.mark.parametrize("kwargs, message", [
    ({"semiring": "min_max"}, "unknown semiring 'min_max'; the built-ins are"),
    ({"semiring": "min_plus", "expr": "y(i) = A(i,j) * x(j) - B(i,j) * x(j)"},
     "a subtracted product or a numeric coefficient has no meaning in a semiring"),
])
def test_bad_kernels(kwargs, message):
    layouts = kwargs.pop("layouts", {"A": "CSR"})
    with pytest.raises(spf.SpecError, match=message):
        spf.Kernel(kwargs.pop("expr", SPMV), layouts, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"add": "a + c", "mul": "a"}, "unknown name 'c'"),
    ({"add": "pow(a, b)", "mul": "a"}, "pow\\(\\) with 2 argument"),
    ({"add": "a + b", "mul": "a * b", "zero": "zero"}, "zero must be a number"),
    ({"add": "min(a, b)", "mul": "a + b", "zero": 0}, "not the identity of add"),
])
def test_bad_semirings(kwargs, message):
    with pytest.raises(spf.SpecError, match=message):
        spf.Semiring(**kwargs)


def test_padding_is_refused_under_a_semiring():
    m = matrix(12, 12, 0.3, 13)
    x = np.ones(12)
    for layout, params in (("DIA", {}), ("BCSR", {"B": 2})):
        t = spf.Tensor.from_scipy(layout, m, **params)
        assert t.padding() > 0
        k = spf.Kernel(SPMV, {"A": layout}, params={"A": params}, semiring="min_plus").compile()
        with pytest.raises(spf.ArgumentError, match="padding entries"):
            k(A=t, x=x)
        plain = spf.Kernel(SPMV, {"A": layout}, params={"A": params}).compile()
        np.testing.assert_allclose(plain(A=t, x=x), m @ x)


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_generated_c_compiles_without_warnings(name, tmp_path):
    from spf.runtime.build import compile_flags, compiler
    for layout in ("CSR", "COO"):
        c_file = tmp_path / f"{layout}.c"
        c_file.write_text(spf.Kernel(SPMV, {"A": layout}, semiring=name, parallel=True).c_source())
        flags = [f for f in compile_flags(("-fopenmp", "-Wextra", "-Werror")) if f != "-shared"]
        out = subprocess.run([compiler(), *flags, "-c", str(c_file), "-o",
                              str(tmp_path / "k.o")], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
