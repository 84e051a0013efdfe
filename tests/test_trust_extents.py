"""Issue 52, extents and allocations: index arithmetic never wraps (item 1), an output wider
than the index type is refused before anything is allocated (item 14), a concatenation's
output holds every point a term reaches (item 7), evaluate's output choice and each
operand's own fill value (item 20), and every allocation sized by the data checked first
and refused with the tensor, its shape and its size named (what to build, 4).  References:
numpy, scipy and python-graphblas."""
from __future__ import annotations

import json
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
    refusals = [
        (2048, "output 'y' of kernel spf_kernel (shape (300,), float64) would take 0.0024 MB",
         lambda: spf.evaluate("y(i) = A(i,j) * x(j)", A=A, x=np.ones(200))),
        (2048, "the dense array of this CSR tensor of shape (300, 200) would take 0.48 MB",
         T.to_dense),
        (2048, "'A' read as a dense array (shape (300, 200)) would take 0.48 MB",
         lambda: spf.evaluate("s = A(i,j)", A=A, semiring="min_plus", fill_values=True)),
        (2048, "output 'C' of shape (300, 300) (CSR's arrays for 47804 entries) would take "
         "0.5749 MB", lambda: spf.evaluate("C(i,k) = A(i,j) * B(j,k)", A=A, B=A.T.tocsr())),
        (2048, "ELL's colIdx would take 0.0228 MB", lambda: T.convert("ELL")),   # int32
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


# -- round 2: one range per index for the whole statement ---------------------------------
def test_a_reduction_index_has_one_range_for_the_whole_statement():
    """``i`` is read plainly by x in one term, so ``x(i+1)`` ranges over x's extent too:
    (2+3+4) - (1+2+3+4), as ``y(i) = x(i+1) - x(i)`` summed."""
    x = np.arange(1.0, 5.0)
    assert spf.evaluate("s = x(i+1) - x(i)", x=x) == x[1:].sum() - x.sum() == -1.0
    assert spf.evaluate("s = x(i+1) - x(i)", x=x[:1]) == -1.0          # x(1) is not there
    assert spf.evaluate("s = x(i+1) - x(i)", x=np.zeros(0)) == 0.0
    np.testing.assert_array_equal(spf.evaluate("y(i) = x(i+1) - x(i)", x=x),
                                  np.append(np.diff(x), -x[-1]))
    B = np.array([[0.0, 3.0], [3.0, 0.0]])             # i over B's rows in both terms
    np.testing.assert_array_equal(
        spf.evaluate("R(j) = B(i,j) - B(i-2,j)", B=sp.csr_matrix(B)), B.sum(axis=0))
    B3 = np.arange(1.0, 13.0).reshape(4, 3)
    np.testing.assert_array_equal(spf.evaluate("R(j) = B(i,j) - B(i-2,j)", B=sp.csr_matrix(B3)),
                                  B3.sum(axis=0) - B3[:2].sum(axis=0))
    # a tensor of another term gives the range: i over x's extent in y(i+1)'s term
    y = np.arange(10.0, 17.0)
    assert spf.evaluate("s = x(i) + y(i+1)", x=x, y=y) == x.sum() + y[1:5].sum()


def test_an_index_used_only_as_a_value_takes_the_statements_range():
    """``k`` in ``B(i,j) * k`` ranges over F's extent (it was 'k' undeclared in C)."""
    Bd = np.array([[1.0, 2.0], [0.0, 3.0], [4.0, 0.0]])
    B = sp.csr_matrix(Bd)
    for F in (np.ones(2), np.arange(1.0, 5.0), np.zeros(0)):
        k = np.arange(len(F))
        got = spf.evaluate("R(j) = F(k)*B(i,j) + B(i,j)*k", B=B, F=F)
        np.testing.assert_array_equal(got, F.sum() * Bd.sum(axis=0) + k.sum() * Bd.sum(axis=0))
    S = np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 4.0], [0.0, 4.0, 5.0]])    # a union operand
    got = spf.evaluate("y(j) = A(i,j)*k + x(k)*A(i,j)", A=spf.Tensor.from_dense("SymCSR", S),
                       x=np.ones(4))
    np.testing.assert_array_equal(got, (0 + 1 + 2 + 3) * S.sum(axis=0) + 4 * S.sum(axis=0))
    src = spf.Kernel("R(j) = F(k)*B(i,j) + B(i,j)*k", {"B": "CSR"}).c_source()
    assert "Ranges: k over F's dimension 1" in src     # F passed to the term for its extent
    assert_compiles_clean(src)


def test_an_index_only_a_value_and_read_plainly_nowhere_is_refused():
    B = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))
    with pytest.raises(spf.SpecError) as err:
        spf.evaluate("R(j) = F(k+1)*B(i,j) + B(i,j)*k", B=B, F=np.ones(3))
    assert str(err.value) == (
        "<string>:1:31: index 'k' is only a value in the term B(i,j) * k and no tensor of the "
        "statement reads it plainly (only inside index arithmetic), so its range there is "
        "unknown: read it plainly in some tensor ('k' then ranges over that tensor's extent "
        "in every term)")
    # an access of the term bounds it: i + k in B's rows, i over B's rows (term 1)
    np.testing.assert_array_equal(
        spf.evaluate("R(j) = F(k+1)*B(i,j) + B(i+k,j)*k", B=B, F=np.ones(3)), [2.0, 16.0])


def test_an_index_read_plainly_has_one_extent_across_the_terms():
    with pytest.raises(spf.ArgumentError) as err:
        spf.evaluate("s = x(i) - y(i)", x=np.ones(3), y=np.ones(4))
    assert str(err.value) == ("index 'i' has extent 3 in x (shape (3,)) but 4 in y "
                              "(dimension 0); shapes must agree")
    # indices computed by index arithmetic need not agree: i + 1 in both (i from -1 to 1)
    assert spf.evaluate("s = x(i+1) * z(i+1)", x=np.ones(3), z=np.ones(5)) == 3.0


CROSSED_OUT = """
import json
import numpy as np
import spf
from spf import Tensor
out = {}
def dense(r):
    return r.toarray() if hasattr(r, "toarray") else r.to_dense()
def record(name, got, want):
    out[name] = [list(np.shape(got)), bool(np.array_equal(got, want))]
# a term reading A only inside index arithmetic stays on A's coordinates: its points past
# the output's extent are not in the statement's range (they overflowed the arrays)
A = np.array([[-3.0, 1.0], [0.0, 1.0]])
record("j-3", dense(spf.evaluate("R(i,j) = A(i, j-3) - A(i,j)", A=Tensor.from_dense("CSR", A))), -A)
A = np.array([[2.0, 3.0], [2.0, 0.0]])
want = -A.copy()
want[1] += A[1]
record("-i+2", dense(spf.evaluate("R(i,j) = A(-i+2, j) - A(i,j)", A=Tensor.from_dense("CSR", A))),
       want)
want = -A.copy()
want[:, 1:] += A[:, :1]
record("j-1", dense(spf.evaluate("R(i,j) = A(i, j-1) - A(i,j)", A=Tensor.from_dense("CSR", A))),
       want)
A = np.array([[0.0], [1.0], [0.0]])
record("2^32", dense(spf.evaluate("R(i,j) = A(i,j) + A(i, j - 4294967296)",
                                  A=Tensor.from_dense("CSR", A), layouts={"R": "CSR"})), A)
# strides over SymCSR's mirrored half (its loop bounds read their own variable)
S = np.array([[1.0, 2.0, 0.0, 5.0], [2.0, 0.0, 4.0, 0.0], [0.0, 4.0, 6.0, 7.0],
              [5.0, 0.0, 7.0, 8.0]])
record("3*j", dense(spf.evaluate("R(i,j) = A(i, 3*j)", A=Tensor.from_dense("SymCSR", S))),
       S[:, ::3])
record("3*i", dense(spf.evaluate("R(i,j) = A(3*i, j)", A=Tensor.from_dense("SymCSR", S))),
       S[::3])
record("eye", dense(spf.evaluate("R(i,j) = A(i, 3*j)",
                                 A=Tensor.from_dense("SymCSR", np.eye(3)))), np.eye(3)[:, ::3])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_terms_past_the_outputs_extent_and_strides_over_a_union_never_crash():
    """Each once overflowed a heap buffer, outgrew the arrays spf_kernel_bound sized (a
    RuntimeError) or crashed with SIGSEGV: run apart, compared with numpy."""
    run = subprocess.run([sys.executable, "-c", CROSSED_OUT], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, f"rc {run.returncode}\n{run.stderr[-3000:]}"
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got == {"j-3": [[2, 2], True], "-i+2": [[2, 2], True], "j-1": [[2, 2], True],
                   "2^32": [[3, 1], True], "3*j": [[4, 2], True], "3*i": [[2, 4], True],
                   "eye": [[3, 1], True]}


def test_the_sum_bound_reads_the_outputs_extents():
    """The kernel and its bound agree on the term's range: both read the output's extents."""
    k = spf.Kernel("R(i,j) = A(i, j-3) - A(i,j)", {"A": "CSR", "R": "CSR"})
    src = k.c_source()
    assert "int spf_kernel_bound(int64_t *restrict spf_bound, const int64_t *restrict " \
           "spf_ext, const spf_CSR *restrict A)" in src
    assert src.count("if ((int64_t)A_colIdx[A_pj] + 3 < spf_ext[1]) {") == 2   # kernel, bound
    assert "Ranges: j over R's dimension 2" in src
    assert_compiles_clean(src)


# -- strides: a loop's bounds and guards from isl's existential variables ------------------
@pytest.mark.parametrize("expr, sliced", [
    ("y(i) = B(i,2*j) * x(j)", lambda M: M[:, ::2]),
    ("y(i) = B(2*i,j) * x(j)", lambda M: M[::2]),
    ("y(i) = B(3*i,j) * x(j)", lambda M: M[::3])])
def test_a_stride_over_dias_computed_column_reads_its_entries(expr, sliced):
    """isl's gist split the offsets' level into a union (``offset <= 0`` or ``0 < offset``
    with a parity condition), whose constraints conjoined read nothing."""
    for M in (np.arange(1.0, 16.0).reshape(3, 5), np.arange(1.0, 16.0).reshape(5, 3),
              np.diag([1.0, 2.0, 3.0, 4.0]), np.zeros((2, 2))):
        want = sliced(M)
        x = np.arange(1.0, want.shape[1] + 1)
        got = spf.evaluate(expr, B=spf.Tensor.from_dense("DIA", M), x=x)
        np.testing.assert_array_equal(got, want @ x, err_msg=f"{expr} {M.shape}")


# -- evaluate: the output it builds -------------------------------------------------------
def test_an_array_passed_as_out_is_a_dense_output():
    A = sp.random(5, 4, density=0.4, format="csr", random_state=6)
    B = sp.random(5, 4, density=0.4, format="csc", random_state=7)
    out = np.full((5, 4), 7.0)
    got = spf.evaluate("R(i,j) = A(i,j) + B(i,j)", A=A, B=B, out=out)
    assert got is out
    np.testing.assert_array_equal(out, (A + B).toarray())
    spf.evaluate("R(i,j) += A(i,j) * B(i,j)", A=A, B=B, out=out)
    np.testing.assert_array_equal(out, (A + B).toarray() + A.multiply(B).toarray())
    got = spf.evaluate("R(i,j) = min(A(i,j), B(i,j))", A=A, B=B, out=np.zeros((5, 4)))
    np.testing.assert_array_equal(got, A.minimum(B).toarray())


def test_layout_parameters_of_an_operand_evaluate_converts_are_dropped():
    """min of a BCSR and a CSR merges over CSR storage: B converted, its BCSR parameter not
    given to CSR."""
    M = np.arange(16.0).reshape(4, 4) - 5.0
    A = spf.Tensor.from_dense("BCSR", M, B=2)
    C = sp.csr_matrix(M.T)
    for out in (None, np.zeros((4, 4))):
        got = spf.evaluate("R(i,j) = min(A(i,j), C(i,j))", A=A, C=C, params={"A": {"B": 2}},
                           out=out)
        np.testing.assert_array_equal(got if out is not None else got.toarray(),
                                      np.minimum(M, M.T))
    got = spf.evaluate("R(i,j) = A(i,j) * 2", A=A, params={"A": {"B": 2}}, out=np.zeros((4, 4)))
    np.testing.assert_array_equal(got, 2 * M)


@pytest.mark.parametrize("layout", ["CSF", "COO3"])
def test_an_operand_of_another_order_is_not_converted_to_the_output(layout):
    T = np.zeros((2, 3, 2))
    T[0, 1, 1], T[1, 2, 0] = 1.0, -2.0
    got = spf.evaluate("R(i,j) = exp(T(i,j,k))", T=spf.Tensor.from_dense(layout, T))
    np.testing.assert_allclose(got.toarray(), np.exp(T).sum(axis=2))


def test_an_empty_iteration_space_runs_no_iteration():
    """``-j-1`` is never a column: no point (the loop over A's rows had no bound)."""
    A = np.arange(1.0, 10.0).reshape(3, 3)
    for a in (A, sp.csr_matrix(A)):
        out = np.full((3, 3), 5.0)
        np.testing.assert_array_equal(
            spf.evaluate("R(i,j) = A(i+1, -j-1)", A=a, out=out), np.zeros((3, 3)))
    assert spf.evaluate("R(i,j) = A(i+1, -j-1)", A=sp.csr_matrix(A)).shape == (0, 0)
    assert "the iteration space holds no point" in spf.Kernel("R(i,j) = A(i+1, -j-1)").c_source()


def test_an_output_extent_bounded_through_another_output_index():
    """``j <= i`` by ``v(i-j)``, and ``i < len(v) - 1`` by ``v(i+1)``."""
    for v in (np.arange(1.0, 6.0), np.array([1.0, -1.0])):
        n = len(v)
        want = np.zeros((n - 1, n - 1))
        for i in range(n - 1):
            for j in range(i + 1):
                want[i, j] = v[i - j] * v[i + 1]
        np.testing.assert_array_equal(spf.evaluate("R(i,j) = v(i-j) * v(i+1)", v=v), want)
    assert spf.evaluate("R(i,j) = v(i-j) * v(i+1)", v=np.array([2.0])).size == 0


def test_output_extents_hold_exactly_the_points_the_terms_reach():
    """Interval propagation over each reaching term's accesses (indices read plainly
    anywhere in their one range, other output indices from 0), then the largest point
    (docs/expressions.md, "The output's extent")."""
    v = np.array([-2, -3, 0], dtype=np.int32)         # i, j bound only by each other
    got = spf.evaluate("R(i,j) = v(i + j - 2)", v=spf.Tensor.from_dense("SV", v))
    want = np.array([[v[i + j - 2] if 0 <= i + j - 2 < 3 else 0 for j in range(5)]
                     for i in range(5)])
    np.testing.assert_array_equal(got.toarray(), want)
    B = np.array([[4, 4, 0], [4, 7, 0], [0, 0, 0]], dtype=np.uint32)   # i: -i+2 in range
    got = spf.evaluate("R(j) = B(-i + 2, j + i)", B=spf.Tensor.from_dense("COO", B),
                       layouts={"R": "SV"})
    np.testing.assert_array_equal(got.to_dense(), [B[2, 0] + B[1, 1] + B[0, 2],
                                                   B[2, 1] + B[1, 2], B[2, 2]])
    w = np.arange(1.0, 8.0)                           # k >= i and i + k < 7: i <= 3
    got = spf.evaluate("O(i) = v(i+k) * w(k-i)", v=w, w=np.ones(7))
    np.testing.assert_array_equal(got, [sum(w[i + k] for k in range(i, 7 - i))
                                        for i in range(4)])
    A = np.array([[True]])                            # a term without a point reaches none
    empty = spf.Tensor.from_dense("COO3", np.zeros((1, 1, 0), dtype=bool))
    got = spf.evaluate("R(i,j) = U(i - 1, j, k) + A(i, j)", A=spf.Tensor.from_dense("CSC", A),
                       U=empty, layouts={"R": "CSR"})
    assert got.shape == (1, 1) and got.to_dense().tolist() == [[True]]


def test_a_term_with_a_tensor_no_other_term_reads_plainly_reaches_further():
    """``A(i-3) * B(i-10)`` does not stay on A's coordinates: B is read there only."""
    A, B = np.arange(1.0, 13.0), np.arange(1.0, 6.0)
    want = np.concatenate([A, np.zeros(3)])
    want[10:15] += A[7:12] * B
    np.testing.assert_array_equal(spf.evaluate("C(i) = A(i) + A(i-3)*B(i-10)", A=A, B=B), want)
    got = spf.evaluate("C(i) = A(i) + A(i-3)*B(i-10)", A=spf.Tensor.from_dense("SV", A),
                       B=spf.Tensor.from_dense("SV", B), layouts={"C": "SV"})
    np.testing.assert_array_equal(got.to_dense(), want)


# round 3: offsets near 2^31 and past an output's extent (sparse and dense outputs) --------

HALF = 2147483648       # 2**31: past int32, and the output extents it reaches


@pytest.mark.parametrize("shape", [(3, 2), (3, 0), (1, 1)])
def test_a_group_past_an_assembled_outputs_extent_writes_no_pointer(shape):
    """``j + 2`` reaches no column of B: the term has no point, R is (0, 0), and the loop
    over B's rows wrote ``R.rowPtr[i + 1]`` at ``i = 2**31 + row`` (SIGSEGV)."""
    B = spf.Tensor.from_dense("CSR", np.ones(shape))
    got = spf.evaluate(f"R(i,j) = B(i - {HALF}, j + 2)", B=B, layouts={"R": "CSR"},
                       fill_values=True)
    assert got.shape == (0, 0) and len(got.values) == 0


def test_the_group_pointer_is_guarded_by_the_outputs_extent():
    """Also through evaluate's own sparse output (a SymCSR operand), and warning-free."""
    A = spf.Tensor.from_dense("SymCSR", np.eye(1))
    got = spf.evaluate(f"R(i,j) = (A(i-{HALF}, j+8589934592) * 1) / 0", A=A)
    assert got.shape == (0, 0) and got.nnz == 0
    src = spf.Kernel(f"R(i,j) = B(i - {HALF}, j + 2)", {"B": "CSR", "R": "CSR"}).c_source()
    assert "if (0 <= i && i < spf_ext[0]) {   /* a group without entries may lie outside" \
        in src
    assert_compiles_clean(src)


def test_a_dense_output_bounded_only_by_a_find_is_not_written_past():
    """In ``T(i-k, j, k-c) * T(i,j,k)`` only the find of ``T(i,j,k)`` bounds ``i`` and
    ``k``; the sum over the finds is added into R where its indices are set, outside the
    finds, so their bounds must hold there too (R[2**31, 0, 2**31] was written)."""
    ones = spf.Tensor.from_dense("CSF", np.ones((1, 1, 1)))
    for fill in (False, True):
        got = spf.evaluate(f"R(i,j,k) = T(i - k, j, k - {HALF}) * T(i, j, k)", T=ones,
                           out=np.zeros((1, 1, 1)), fill_values=fill)
        np.testing.assert_array_equal(got, np.zeros((1, 1, 1)))
    rng = np.random.default_rng(3)
    d = rng.integers(-2, 3, (3, 2, 3)) * (rng.random((3, 2, 3)) < 0.6)
    want = np.zeros(d.shape)
    for i, j, k in np.ndindex(*d.shape):
        if i >= k and k >= 1:
            want[i, j, k] = d[i - k, j, k - 1] * d[i, j, k]
    got = spf.evaluate("R(i,j,k) = T(i - k, j, k - 1) * T(i, j, k)",
                       T=spf.Tensor.from_dense("CSF", d.astype(float)), out=np.zeros(d.shape))
    np.testing.assert_array_equal(got, want)


def test_an_index_used_as_a_value_is_no_broadcast():
    """``i * x(j-3) * x(j+3)`` uses i (as a value, over the output's rows): into a sparse
    output it was refused as a term that "does not use the output index 'i'".  int64 data:
    an int8 product times the int64 index value is refused (numpy's steps)."""
    x = np.array([True, False, True, True, False, True, True, False])
    B = np.zeros((3, 8), np.int64)
    B[0, 3], B[2, 5], B[1, 6] = 2, -1, 3
    want = np.zeros((3, 8), np.int64)
    for i, j in np.ndindex(*B.shape):
        if j >= 3:
            want[i, j] -= i * int(x[j - 3]) * int(B[i, j])
            if j + 3 < 8:
                want[i, j] += i * int(x[j - 3]) * int(x[j + 3])
    expr = "R(i,j) = i * (x(j - 3) * (x(j + 3) - B(i, j)))"
    for layout, out in [("DIA", "COO"), ("CSR", "CSR")]:
        k = spf.Kernel(expr, {"B": layout, "R": out},
                       dtype={"x": "bool", "B": "int64", "R": "int64"}).compile()
        got = k(x=x, B=spf.Tensor.from_dense(layout, B)).to_dense()
        np.testing.assert_array_equal(got, want)


def _left_and_reaching(v: np.ndarray) -> np.ndarray:
    """``R(i,j) = v(i-1) + v(i+j)``, 0 where an access falls outside v, over the smallest
    extents holding every point a term reaches (i up to len(v) from v(i-1); j up to
    len(v) - 1 from v(i+j) at i = 0)."""
    n = len(v)
    want = np.zeros((n + 1, n) if n else (0, 0))
    for i, j in np.ndindex(*want.shape):
        want[i, j] = (v[i - 1] if 0 <= i - 1 < n else 0) + (v[i + j] if i + j < n else 0)
    return want


def test_an_output_index_read_by_a_later_read_of_a_tensor():
    """``R(i,j) = v(i-1) + v(i+j)`` was refused ("output index 'j' does not appear on the
    right-hand side"): a tensor read again in a later term was looked at in its first read
    only; ``v(i+j) + v(i-1)`` worked."""
    for expr in ("R(i,j) = v(i - 1) + v(i + j)", "R(i,j) = v(i + j) + v(i - 1)"):
        for v in (np.array([1.0, 2.0]), np.array([3.0]), np.arange(1.0, 6.0)):
            got = spf.evaluate(expr, v=v)
            assert got.shape == _left_and_reaching(v).shape
            np.testing.assert_array_equal(got, _left_and_reaching(v))


def test_terms_with_the_same_accesses_do_not_stay_on_each_others_coordinates():
    """``x(j)/x(j+i) - 2*x(j)/x(j+i)``: each term read x plainly through the other, so each
    stayed on the other's coordinates and ``i`` had no extent (refused), while the same
    statement written as one term ran: a term with the same accesses sets no coordinates."""
    x = np.array([1.0, 2.0, 3.0])
    want = [-sum(x[j] / x[j + i] for j in range(3 - i)) for i in range(3)]
    np.testing.assert_allclose(spf.evaluate("R(i) = x(j)/x(j+i) - 2*x(j)/x(j+i)", x=x), want)
    np.testing.assert_allclose(spf.evaluate("R(i) = -(x(j)/x(j+i))", x=x), want)


def test_a_number_times_a_number_of_the_same_access_reaches_every_point():
    """``(2 - x(i+1)) * (2 - x(i+1))`` is ``4 - 4*x(i+1) + x(i+1)**2``: 4 at every point,
    also where x(i+1) reads nothing; each factor took the other, reading the same access,
    for a restriction to x(i+1)'s points and was not distributed (0 there)."""
    x = np.array([1.0, 2.0, 3.0])
    got = spf.evaluate("y(i) = (2 - x(i + 1)) * (2 - x(i + 1)) + 0 * x(i)", x=x)
    np.testing.assert_array_equal(got, [0.0, 1.0, 4.0])
    b = np.array([[-3, 4, 7, -1, 0], [2, -2, 4, 4, -2], [3, 3, 0, 0, 3]], np.int16)
    got = spf.evaluate("R(i,j) = (2 - B(i + j - 2, j)) * (2 - B(i + j - 2, j))",
                       B=spf.Tensor.from_dense("CSR_unsorted", b))
    want = np.full((5, 5), 4, np.int16)
    for i, j in np.ndindex(5, 5):
        if 0 <= i + j - 2 < 3:
            want[i, j] = (2 - b[i + j - 2, j]) ** 2
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int16
    # a factor that reads the access in every product of its expansion restricts the other
    np.testing.assert_array_equal(
        spf.evaluate("y(i) = (2 - x(i + 1)) * x(i + 1) + 0 * x(i)", x=x), [0.0, -3.0, 0.0])
