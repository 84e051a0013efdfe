"""Issue 52, extents and allocations: index arithmetic never wraps (item 1), an output wider
than the index type is refused before anything is allocated (item 14), a concatenation's
output holds every point a term reaches (item 7), evaluate's output choice and each
operand's own fill value (item 20), and every allocation sized by the data checked first
and refused with the tensor, its shape and its size named (what to build, 4).  References:
numpy, scipy and python-graphblas."""
from __future__ import annotations

import subprocess
import sys
from functools import cache

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf
from spf.runtime.memory import allocation_limit

BIG = 4294967296        # 2**32: wraps to 0 in int32


def shifted(x: np.ndarray, n: int, access) -> np.ndarray:
    """``y(i) = x(access(i))`` for i < n, 0 where the access falls outside x."""
    out = np.zeros(n)
    for i in range(n):
        a = access(i)
        if 0 <= a < len(x):
            out[i] = x[a]
    return out


@pytest.mark.parametrize("index_type", ["int32", pytest.param("int64", marks=pytest.mark.slow)])
def test_offsets_and_strides_beyond_the_index_type_never_wrap(index_type):
    x = np.arange(1.0, 9.0)
    cases = {f"x(i + {BIG})": lambda i: i + BIG, f"x(i - {BIG})": lambda i: i - BIG,
             f"x({BIG} - i)": lambda i: BIG - i, f"x({BIG}*i)": lambda i: BIG * i,
             f"x(-{BIG}*i + 3)": lambda i: -BIG * i + 3,
             f"x(3*i - {BIG} + 6)": lambda i: 3 * i - BIG + 6}
    for access, at in cases.items():
        got = spf.evaluate(f"y(i) = {access}", x=x, out=np.zeros(8), index_type=index_type)
        np.testing.assert_array_equal(got, shifted(x, 8, at), err_msg=access)
    # no output given: the extent holds every point reached (none)
    assert spf.evaluate(f"y(i) = x(i + {BIG})", x=x, index_type=index_type).shape == (0,)
    # two indices: every k leaves x(i + k - 2**32) out of range
    got = spf.evaluate(f"y(i) = x(i + k - {BIG}) * z(k)", x=x, z=np.ones(5), out=np.zeros(4),
                       index_type=index_type)
    np.testing.assert_array_equal(got, np.zeros(4))


def test_index_arithmetic_is_computed_in_64_bits():
    k = spf.Kernel(f"y(i) = x(3*i - {BIG})", {"x": "DenseVector", "y": "DenseVector"})
    src = k.c_source()
    assert "for (int64_t x_p0 = " in src and "const int64_t y_n0 = y->n0;" in src
    assert "loop variables and sizes are int64_t" in src
    assert_compiles_clean(src)


def test_index_arithmetic_beyond_64_bits_is_refused():
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel("y(i) = x(i + 99999999999999999999)")
    assert str(err.value) == (
        "<string>:1:8: x(i+99999999999999999999): the index arithmetic's "
        "99999999999999999999 is beyond 2^62 in size, which generated C cannot offset or "
        "stride by (it computes index arithmetic in 64 bits)")
    with pytest.raises(spf.ArgumentError) as err:
        spf.evaluate("y(i) = x(i + 4611686018427387903)", x=np.ones(8), out=np.zeros(8))
    assert str(err.value) == (
        "the index arithmetic of 'y(i) = x(i + 4611686018427387903)' may reach "
        "18446744073709551648 with extents up to 8, beyond 2^62, the most its generated C "
        "computes (in int64, with room to combine bounds); 'y' is not computed: use smaller "
        "offsets, strides or extents")


def test_an_output_wider_than_the_index_type_is_refused_before_allocation():
    with pytest.raises(spf.ArgumentError) as err:
        spf.evaluate("y(i) = x(i - 2200000000)", x=np.arange(8.0))
    assert str(err.value) == (
        "the output 'y' would have extent 2200000008 along 'i' (the points its terms "
        "reach), more than index_type='int32' holds (at most 2147483647); it needs "
        "index_type='int64'")
    with allocation_limit(1 << 20, "a test's limit"), \
            pytest.raises(spf.ArgumentError) as err:
        spf.evaluate("y(i) = x(i - 2200000000)", x=np.arange(8.0), index_type="int64")
    assert str(err.value) == (
        "output 'y' of kernel spf_kernel (shape (2200000008,), float64) would take "
        "1.76e+04 MB, over the 1.049 MB allowed (a test's limit)")
    y = spf.evaluate("y(i) = x(i - 2200000000)", x=np.arange(8.0), out=np.zeros(3),
                     index_type="int64")                         # only the points it holds
    np.testing.assert_array_equal(y, np.zeros(3))


# -- item 7: concatenation ------------------------------------------------------------------
CONCAT = "C(i) = A(i) + B(i - 10)"


def test_a_concatenation_holds_both_halves():
    A, B = np.arange(1.0, 11.0), np.arange(11.0, 21.0)
    whole = np.concatenate([A, B])
    np.testing.assert_array_equal(spf.evaluate(CONCAT, A=A, B=B), whole)
    for n in (0, 5, 20, 25):                  # a given output of any extent keeps its points
        out = np.zeros(n)
        spf.evaluate(CONCAT, A=A, B=B, out=out)
        np.testing.assert_array_equal(out, np.concatenate([whole, np.zeros(5)])[:n])
    kernel = spf.Kernel(CONCAT).compile()
    assert kernel.allocate_output(A=A, B=B).shape == (20,)
    got = spf.evaluate(CONCAT, A=spf.Tensor.from_dense("SV", A),
                       B=spf.Tensor.from_dense("SV", B), layouts={"C": "SV"})
    assert isinstance(got, spf.Tensor) and got.shape == (20,)
    np.testing.assert_array_equal(got.to_dense(), whole)
    # edge cases: an empty first half, one nonzero, a second half shorter than the offset
    np.testing.assert_array_equal(spf.evaluate(CONCAT, A=np.zeros(0), B=np.ones(3)),
                                  np.concatenate([np.zeros(10), np.ones(3)]))
    one = np.zeros(10)
    one[9] = 5.0
    np.testing.assert_array_equal(spf.evaluate(CONCAT, A=np.ones(4), B=one),
                                  np.concatenate([np.ones(4), np.zeros(6), one]))


def test_a_matrix_concatenation_along_either_axis():
    M = np.arange(1.0, 7.0).reshape(2, 3)
    N = -np.arange(1.0, 7.0).reshape(2, 3)
    N[0, 1] = 0.0
    Ms, Ns = sp.csr_matrix(M), sp.csr_matrix(N)
    side = spf.evaluate("C(i,j) = M(i,j) + N(i,j-3)", M=Ms, N=Ns)      # a sparse output
    assert isinstance(side, sp.csr_array)
    np.testing.assert_array_equal(side.toarray(), np.hstack([M, N]))
    below = spf.evaluate("C(i,j) = M(i,j) + N(i-2,j)", M=M, N=N)
    np.testing.assert_array_equal(below, np.vstack([M, N]))


# -- item 20: evaluate's output and fill values -------------------------------------------
def test_a_broadcast_term_gives_a_dense_output():
    A = sp.random(5, 4, density=0.4, format="csc", random_state=2)
    got = spf.evaluate("C(i,j) = beta + A(i,j)", A=A, beta=2.0)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, A.toarray() + 2.0)
    empty = spf.evaluate("C(i,j) = beta + A(i,j)", A=sp.csc_matrix((3, 2)), beta=-1.0)
    np.testing.assert_array_equal(empty, np.full((3, 2), -1.0))


def _pattern(m) -> set[tuple[int, int]]:
    c = sp.coo_matrix(m)
    return set(zip(c.row.tolist(), c.col.tolist()))


@pytest.mark.parametrize("fn", ["min", "max"])
def test_min_and_max_of_csr_and_csc_run_over_the_union(fn):
    rng = np.random.default_rng(3)
    for shape, da, db in [((6, 5), 0.3, 0.4), ((4, 7), 0.0, 0.3), ((1, 1), 1.0, 0.0)]:
        A = sp.random(*shape, density=da, format="csr", random_state=rng)
        B = sp.random(*shape, density=db, format="csc", random_state=rng)
        A.data -= 0.5
        B.data -= 0.5
        got = spf.evaluate(f"C(i,j) = {fn}(A(i,j), B(i,j))", A=A, B=B)
        want = A.minimum(B) if fn == "min" else A.maximum(B)
        assert isinstance(got, sp.csr_array)
        np.testing.assert_array_equal(got.toarray(), want.toarray())
        assert _pattern(got) == _pattern(A) | _pattern(B)     # not every element


def test_a_reduction_sees_absent_entries_as_the_operands_fill():
    """Finch's ``x_min = min(X)`` over [1, 0, 0, 3, 0, 2, 0] is 0: fill_values=True reads
    each absent entry as the operand's fill (0 here); without it, the structural (GraphBLAS)
    minimum over the entries is 1."""
    x = np.array([1.0, 0.0, 0.0, 3.0, 0.0, 2.0, 0.0])
    X = spf.Tensor.from_dense("SV", x)
    assert spf.evaluate("s = X(i)", X=X, semiring="min_plus", fill_values=True) == x.min()
    assert spf.evaluate("s = X(i)", X=X, semiring="min_plus") == 1.0
    assert spf.evaluate("s = X(i)", X=-X.to_dense(), semiring="max_plus",
                        fill_values=True) == (-x).max()
    neg = spf.Tensor.from_dense("SV", -x)
    assert spf.evaluate("s = X(i)", X=neg, semiring="max_plus", fill_values=True) == 0.0
    assert spf.evaluate("s = X(i)", X=neg.with_fill(-np.inf), semiring="max_plus",
                        fill_values=True) == -1.0
    assert spf.evaluate("s = X(i)", X=X.with_fill(np.inf), semiring="min_plus",
                        fill_values=True) == 1.0
    empty = spf.Tensor.from_dense("SV", np.zeros(4))
    assert spf.evaluate("s = X(i)", X=empty, semiring="min_plus", fill_values=True) == 0.0
    A = sp.random(6, 5, density=0.4, format="csr", random_state=4)
    A.data += 1.0
    rows = spf.evaluate("y(i) = A(i,j)", A=A, semiring="min_plus", fill_values=True)
    np.testing.assert_array_equal(rows, A.toarray().min(axis=1))


def test_the_structural_minimum_is_graphblas_s():
    gb = pytest.importorskip("graphblas")
    A = sp.random(6, 5, density=0.4, format="csr", random_state=5)
    A.data += 1.0
    c = A.tocoo()
    M = gb.Matrix.from_coo(c.row, c.col, c.data, nrows=6, ncols=5)
    want = M.reduce_rowwise(gb.monoid.min).new()
    got = spf.evaluate("y(i) = A(i,j)", A=A, semiring="min_plus")
    idx, vals = want.to_coo()
    expect = np.full(6, np.inf)
    expect[idx] = vals
    np.testing.assert_array_equal(got, expect)


def test_an_operand_whose_fill_the_kernel_would_skip_is_refused():
    X = spf.Tensor.from_dense("SV", np.array([1.0, 0.0, 2.0]))
    with pytest.raises(spf.ArgumentError) as err:
        spf.evaluate("s = X(i) * Y(i)", X=X.with_fill(2.0), Y=X, fill_values=True)
    assert str(err.value) == (
        "'X' holds 2.0 where it stores nothing (its fill), and this kernel (fill_values=True) "
        "iterates over its stored entries, which is right only for a fill of 0 (the "
        "semiring's zero); pass X.with_fill(0.0), or its dense array")


# -- what to build 4: allocations checked before they are made ---------------------------
@cache
def _scatter() -> spf.CompiledKernel:
    """A parallel loop scattering into per-thread copies of y."""
    k = spf.Kernel("y(j) = A(i,j) * x(i)", {"A": "CSR"}, parallel=True)
    assert k.privatized
    return k.compile()


def test_every_allocation_sized_by_the_data_is_checked_first():
    A = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    T = spf.Tensor.from_scipy("CSR", A)
    scatter = _scatter()
    scatter.set_num_threads(2)
    converting = "converting a CSR tensor of shape (300, 200) to ELL would take"
    refusals = [
        (2048, "output 'y' of kernel spf_kernel (shape (300,), float64) would take 0.0024 MB",
         lambda: spf.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.ones(200))),
        (2048, "the dense array of this CSR tensor of shape (300, 200) would take 0.48 MB",
         T.to_dense),
        (2048, "'A' read as a dense array (shape (300, 200)) would take 0.48 MB",
         lambda: spf.evaluate("s = A(i,j)", A=A, semiring="min_plus", fill_values=True)),
        (2048, "output 'C' of shape (300, 300) (CSR's arrays for 47804 entries) would take "
         "0.5749 MB", lambda: spf.evaluate("C(i,k) = A(i,j) * B(j,k)", A=A, B=A.T.tocsr())),
        (2048, f"the analysis of positions {converting} 0.002409 MB", lambda: T.convert("ELL")),
        (4096, f"ELL's colIdx {converting} 0.0228 MB", lambda: T.convert("ELL")),
        (2048, "the per-thread copies of output 'y' of kernel spf_kernel (2 threads, shape "
         "(200,)) would take 0.0032 MB", lambda: scatter(A=T, x=np.ones(300))),
    ]
    for limit, message, call in refusals:
        with allocation_limit(limit, "a test's limit"), \
                pytest.raises(spf.ArgumentError) as err:
            call()
        assert str(err.value) == f"{message}, over the {limit / 1e6:.4g} MB allowed (a " \
                                 "test's limit)"
    np.testing.assert_allclose(scatter(A=T, x=np.ones(300)), A.T @ np.ones(300))


OOM = """
import resource
import numpy as np, scipy.sparse as sp
import spf
n = 2**31 - 1      # B's columns: the output's rows gather in a dense workspace of n slots
A = sp.csr_matrix(([1.0, 2.0], ([0, 1], [0, 1])), shape=(2, 3))
B = spf.Tensor.from_coords("CSR", (3, n), ([0, 2], [5, n - 1]), [3.0, 4.0])
k = spf.Kernel("C(i,k) = A(i,j) * B(j,k)", {"A": "CSR", "B": "CSR", "C": "CSR"}).compile()
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
try:
    k(A=A, B=B)
except spf.OutOfMemoryError as e:
    print(isinstance(e, MemoryError), e)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS")
def test_a_failed_malloc_in_generated_c_is_a_clear_error():
    run = subprocess.run([sys.executable, "-c", OOM], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == (
        "True kernel spf_kernel: its C code could not allocate what it assembles output 'C' "
        "of shape (2, 2147483647) with (its workspace, entry streams or find state; malloc "
        "returned NULL): out of memory")
