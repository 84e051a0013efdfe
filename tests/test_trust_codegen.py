"""Issue 52, generated C: a sum gives each term its operands in the form the term was compiled
for (item 13), and the C compiles whatever the user names things (item 17: C's macros and
reserved names, spf's own identifiers, a run-length layout's sizing pass, a stencil into a
sparse output).  Each case is compared with numpy or checks the exact error message."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf

ROOT = Path(__file__).resolve().parent.parent
CSR_TEXT = (ROOT / "layouts" / "CSR.toml").read_text()


def _csr_variant(directory: Path, name: str, **renamed: str) -> str:
    """A copy of CSR.toml named ``name`` with fields renamed (its packer next to it)."""
    text = CSR_TEXT.replace('name = "CSR"', f'name = "{name}"')
    for old, new in renamed.items():
        text = re.sub(rf"\b{old}\b", new, text)
    path = directory / f"{name}.toml"
    path.write_text(text)
    (directory / "CSR.py").write_text((ROOT / "layouts" / "CSR.py").read_text())
    return str(path)


# -- item 13: a sum reading one operand by its entries and densely ---------------------------

# run in a subprocess: the old code passed the CSR struct where a term read a dense array
# (SIGSEGV or garbage); each line prints the largest difference from numpy
_BOTH_FORMS = textwrap.dedent("""
    import json
    import numpy as np, scipy.sparse as sp, spf

    def dense(t):
        return t.to_dense() if hasattr(t, "to_dense") else t.toarray()

    out = {}
    A = sp.random(3000, 3000, density=0.0005, format="csr", random_state=0)
    x = np.ones(3000)
    D = A.toarray()
    ref = D @ x + np.exp(D) @ x
    expr = "y(i) = A(i,j) * x(j) + exp(A(i,j)) * x(j)"
    for layout, parallel in [("CSR", False), ("CSR", True), ("COO", False)]:
        y = spf.evaluate(expr, A=A, x=x, layouts={"A": layout}, parallel=parallel)
        out[f"{layout} parallel={parallel}"] = float(np.abs(y - ref).max())
    S = sp.random(40, 40, density=0.1, random_state=1)
    S = (S + S.T).toarray()
    v = np.arange(40.0)
    y = spf.evaluate(expr, A=spf.Tensor.from_dense("SymCSR", S), x=v)
    out["SymCSR"] = float(np.abs(y - (S @ v + np.exp(S) @ v)).max())
    rng = np.random.default_rng(0)
    T = np.where(rng.random((5, 6, 7)) < 0.2, rng.random((5, 6, 7)), 0.0)
    z = np.arange(7.0)
    y = spf.evaluate("y(i,j) = B(i,j,k) * z(k) + cos(B(i,j,k)) * z(k)",
                     B=spf.Tensor.from_dense("CSF", T), z=z)
    out["CSF"] = float(np.abs(y - (T @ z + np.cos(T) @ z)).max())
    # the dense read first, and an operand read densely only inside another's expression
    B = sp.random(6, 6, density=0.4, format="csr", random_state=2)
    C = sp.random(6, 6, density=0.4, format="csr", random_state=3)
    Bd, Cd, w = B.toarray(), C.toarray(), np.arange(1.0, 7.0)
    y = spf.evaluate("y(i) = exp(B(i,j)) * w(j) + B(i,j) * w(j)", B=B, w=w)
    out["dense first"] = float(np.abs(y - (np.exp(Bd) @ w + Bd @ w)).max())
    y = spf.evaluate("y(i) = exp(B(i,j)) * w(j) + max(B(i,j), C(i,j)) * w(j)", B=B, C=C, w=w)
    out["max"] = float(np.abs(y - (np.exp(Bd) @ w + np.maximum(Bd, Cd) @ w)).max())
    y = spf.evaluate("C2(i,j) = B(i,j) + cos(B(i,j))", B=B, layouts={"C2": "CSR"})
    out["sparse output"] = float(np.abs(dense(y) - (Bd + np.cos(Bd))).max())
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_sum_gives_each_term_its_form_of_an_operand():
    """A term reading A densely got the CSR (COO, SymCSR, CSF) struct the kernel was passed."""
    proc = subprocess.run([sys.executable, "-c", _BOTH_FORMS], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stderr[-3000:]}"
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {case: err for case, err in errors.items() if not err < 1e-9} == {}


def test_sum_reads_the_dense_form_under_an_alias():
    """The term reading A by its entries keeps CSR; the dense read is its own operand."""
    k = spf.Kernel("y(i) = A(i,j) * x(j) + exp(A(i,j)) * x(j)", {"A": "CSR"})
    assert dict(k.expr.aliases) == {"spf_A_2": "A"}
    assert list(k.read_densely) == ["spf_A_2"] and k.read_densely["spf_A_2"].name == "CSR"
    assert [t.layouts["A"].name if "A" in t.layouts else t.layouts["spf_A_2"].name
            for t in k.terms] == ["CSR", "DenseMatrix"]
    assert k.compile().inputs == ["A", "x"]      # A is passed once


def test_sum_type_sees_every_term():
    """The output's type came from each operand's first read only: int64 + sqrt(int64) was
    int64 (sqrt truncated)."""
    x = np.array([1, 2, 3], np.int64)
    y = spf.evaluate("y(i) = x(i) + sqrt(x(i))", x=x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, x + np.sqrt(x))


# -- item 17: names the generated C cannot take as they are ----------------------------------

@pytest.mark.parametrize("expr, operands", [
    ("y(i) = linux(i) * NULL(i)", {"linux": np.arange(1.0, 3.0), "NULL": np.array([3.0, 5.0])}),
    ("y(i) = INT32_MAX(i) + A_data(i)", {"INT32_MAX": np.arange(1.0, 3.0),
                                         "A_data": np.array([3.0, 5.0])}),
])
def test_tensors_named_like_c_macros(expr, operands):
    a, b = operands.values()
    y = spf.evaluate(expr, **operands)
    np.testing.assert_array_equal(y, a * b if "*" in expr else a + b)


def test_scalar_named_like_a_loop_variable():
    """The scalar A_pj was A's loop variable A_pj in the C: a wrong result, no error."""
    A = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 5]]))
    x = np.arange(1.0, 4.0)
    y = spf.evaluate("y(i) = A(i,j) * x(j) * A_pj", A=A, x=x, A_pj=2.0)
    np.testing.assert_allclose(y, 2 * (A @ x))


def test_reserved_names_everywhere(compiles_clean):
    """Tensors, scalars and indices named like C's macros, types and functions, like spf's
    locals (y_data) and like another tensor's loop variable (A_pj), in a sum reading A in both
    forms; ordinary names stay as written in the C."""
    A = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 5]]))
    D = A.toarray()
    u, v = np.arange(1.0, 4.0), np.array([2.0, -1.0, 0.5])
    expr = ("y(I) = A(I,linux) * NULL(linux) * A_pj * y_data "
            "+ exp(A(I,linux)) * INT32_MAX(linux) * exp + A(I,linux) * x(linux)")
    k = spf.Kernel(expr, {"A": "CSR"})
    src = k.c_source()
    compiles_clean(src)
    assert "const spf_CSR *restrict A," in src and "const spf_DenseVector *restrict x" in src
    assert "spf_u_NULL" in src and "spf_u_linux" in src and "double spf_u_exp" in src
    y = k.compile()(A=A, NULL=u, A_pj=2.0, y_data=3.0, INT32_MAX=v, exp=0.5, x=u + v)
    np.testing.assert_allclose(y, 6 * D @ u + 0.5 * np.exp(D) @ v + D @ (u + v))


def test_reserved_names_in_an_assembled_output():
    A = sp.random(5, 4, density=0.5, format="csr", random_state=4)
    B = sp.random(5, 4, density=0.5, format="coo", random_state=5)
    C = spf.evaluate("C(i,j) = NULL(i,j) * memset(i,j) + C_size(i,j)", NULL=A, memset=B,
                     C_size=A, layouts={"memset": "COO", "C": "CSR"})
    np.testing.assert_allclose(C.to_dense(), (A.multiply(B) + A).toarray())


def test_spf_prefix_is_refused_where_written():
    """A scalar spf_kernel was taken for a tensor read again (an alias): 'missing argument'."""
    with pytest.raises(spf.SpecError) as info:
        spf.Kernel("y(i) = x(i) * spf_kernel")
    assert str(info.value) == ("<string>:1:15: name 'spf_kernel' is reserved (C keyword or "
                               "spf_ prefix)")


def test_kernel_name_reserved_in_c():
    with pytest.raises(spf.SpecError) as info:
        spf.Kernel("y(i) = x(i)", name="linux")
    assert str(info.value) == (
        "<string>: kernel name 'linux' is a name the C it is compiled with defines or reserves "
        "(a macro, a type or a function of its headers); choose another")


def test_layout_field_named_like_a_macro(tmp_path):
    path = _csr_variant(tmp_path, "CSRnull", colIdx="NULL")
    line = Path(path).read_text().splitlines().index('NULL = "int[rowPtr(numRows)]"') + 1
    with pytest.raises(spf.SpecError) as info:
        spf.load_layout(path)
    assert str(info.value) == (
        f"{path}:{line}:1: field name 'NULL' is a macro of generated C (its headers or the "
        "compiler define NULL, INT32_MAX, linux, ...), which would replace the member of the C "
        "struct it names; choose another name")


def test_layout_fields_and_names_like_c_and_spf_names(tmp_path):
    """Fields named like a function (exp) and like complex.h's I (undefined by spf's C) are
    members as any; layouts named like spf's own types (spf_index_t, spf_stream) clashed with
    them."""
    fields = _csr_variant(tmp_path, "CSRfields", colIdx="I", rowPtr="exp")
    index_t = _csr_variant(tmp_path, "index_t")
    stream = _csr_variant(tmp_path, "stream")
    A = sp.random(6, 5, density=0.4, format="csr", random_state=6)
    B = sp.random(6, 5, density=0.4, format="csr", random_state=7)
    C = spf.evaluate("C(i,j) = A(i,j) * E(i,j) + B(i,j)", A=spf.Tensor.from_scipy(index_t, A),
                     B=spf.Tensor.from_scipy(stream, B), E=spf.Tensor.from_scipy(fields, B),
                     layouts={"C": "CSR"})
    np.testing.assert_allclose(C.to_dense(), (A.multiply(B) + B).toarray())


_RLE_RELATION = ("{[pi, pk, pj] -> [gi, gj] : 0 <= pi < numRows and ptr(pi) <= pk < "
                 "ptr(pi + 1) and left(pk) <= pj <= right(pk) and gi = pi and gj = pj}")
_RLE = f"""\
name = "RLE"
description = "Rows as sorted runs [left, right] holding one value each (Finch's SparseRLE)."
relation = "{_RLE_RELATION}"
value = "data[pk]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
ptr = "int[numRows + 1]"
left = "int[ptr(numRows)]"
right = "int[ptr(numRows)]"
data = "double[ptr(numRows)]"

[[properties]]
kind = "monotonic"
uf = "ptr"
order = "<="

[[properties]]
kind = "range"
uf = "left"
min = "0"
max = "numCols - 1"

[[properties]]
kind = "range"
uf = "right"
min = "0"
max = "numCols - 1"
"""


def test_run_length_times_csr_into_sparse_output(tmp_path):
    """The sizing pass looked B up with a hash map whose helpers the file did not include
    (unknown type name 'spf_hash')."""
    path = tmp_path / "RLE.toml"
    path.write_text(_RLE)
    R = spf.Tensor.from_arrays(str(path), (3, 4), {
        "ptr": np.array([0, 2, 3, 3], np.int32), "left": np.array([0, 3, 1], np.int32),
        "right": np.array([1, 3, 3], np.int32), "data": np.array([1.0, 2.0, 3.0])})
    B = sp.random(3, 4, density=0.6, format="csr", random_state=2)
    C = spf.evaluate("C(i,j) = R(i,j) * B(i,j)", R=R, B=B, layouts={"C": "CSR"})
    np.testing.assert_allclose(C.to_dense(), R.to_dense() * B.toarray())


@pytest.mark.parametrize("out", ["CSR", "DCSR"])
def test_stencil_into_sparse_output(out):
    """Each term's run was keyed by the output's extents read from its stream (no such
    member): the caller passes them."""
    A = sp.random(6, 5, density=0.4, format="csr", random_state=1)
    D = A.toarray()
    y = spf.evaluate("y(i,j) = A(i-1,j) + A(i+1,j)", A=A, layouts={"y": out})
    got = y.to_dense() if hasattr(y, "to_dense") else y.toarray()
    ref = np.zeros(got.shape)
    for i in range(got.shape[0]):
        for k in (i - 1, i + 1):
            if 0 <= k < D.shape[0]:
                ref[i] += D[k]
    assert got.shape[1] == 5 and got.shape[0] >= 6
    np.testing.assert_allclose(got, ref)


def test_partition_names_the_operand_as_written():
    """The space names a tensor as the C does (spf_u_NULL); a distributed run's partition
    names the operand as the user wrote it."""
    from spf.distributed.partition import partition_of
    k = spf.Kernel("y(i) = NULL(i,j) * x(j)", {"NULL": "CSR"})
    assert k.c_names == {"NULL": "spf_u_NULL"}
    assert (partition_of(k).operand, partition_of(k).mode) == ("NULL", "rows")


def test_index_named_like_a_loop_variable():
    """It was refused (a clash with A's loop variable A_pi); the C names it spf_u_A_pi."""
    A = sp.random(5, 5, density=0.5, format="csr", random_state=0)
    x = np.arange(5.0)
    y = spf.evaluate("y(A_pi) = A(A_pi,j) * x(j) + x(A_pi)", A=A, x=x)
    np.testing.assert_allclose(y, A @ x + x)


# -- an offset added to an index array's read in a guard -------------------------------------

# run in a subprocess: the old code computed `idx[p] + 2147483647 < n` in the array's int32,
# which wraps negative, so the guard let a read 2^31 elements past the array through (SIGSEGV)
_WIDE_GUARD = textwrap.dedent("""
    import json
    import numpy as np, spf
    v = spf.Tensor.from_dense("SV", np.array([0.0, 0.0, 0.25, 1.75, 0.0]))
    out = {}
    for expr in ["R(i) = where((v(-i + 2) or 2) + (v(i + 2147483647) - i), -v(i), v(i))",
                 "R(i) = v(i) * exp(v(i + 2147483647))"]:
        k = spf.Kernel(expr, {"v": "SV"}, dtype={"v": "float64", "R": "float64"}).compile()
        out[expr] = k(v=v).tolist()
    # a row 2^32 past the output's: its pointer was written at rowPtr[i + 1] all the same
    c = spf.Tensor.from_dense("SortedCOO", np.array([[0.75], [1.0]]))
    k = spf.Kernel("R(i,j) = not (not (C(i - 4294967296, j) * C(i, j)))",
                   {"C": "SortedCOO", "R": "CSR"}, dtype={"C": "float64", "R": "bool"}).compile()
    out["rows"] = k(C=c).to_dense().tolist()
    print(json.dumps(out))
""")


def test_offset_added_to_an_index_array_read_never_wraps():
    run = subprocess.run([sys.executable, "-c", _WIDE_GUARD], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    # every access reaching 2^31 - 1 past i falls outside v: no term has a point
    got = json.loads(run.stdout.splitlines()[-1])
    assert got.pop("rows") == [[False], [False]]
    assert len(got) == 2 and all(r == [0.0] * 5 for r in got.values()), got


def test_a_state_array_as_long_as_the_output_in_a_sparse_output_term():
    """A SeqIter state array keyed by ``i`` (``B(-i+2, j)``, ``R(i)``) is as long as R's
    extent; the term streaming its run into R and its sizing pass read ``R->size``, a
    member the stream has not and a name the sizing pass has not: they take R's extents."""
    d = np.array([[1, 0, 2], [0, -2, 3], [4, -3, 0]], np.int8)
    k = spf.Kernel("R(i) = (B(i, -j + 1) - (B(-i + 2, 2*j + 1) / 0.001)) * B(-i + 2, j)",
                   {"B": "CSC", "R": "SV"}, dtype={"B": "int8", "R": "float64"}).compile()

    def at(a: int, b: int) -> float | None:
        return float(d[a, b]) if 0 <= a < 3 and 0 <= b < 3 else None

    want = np.zeros(3)
    for i, j in np.ndindex(3, 3):       # a term sums where each of its accesses is in range
        for a, b, c in ((at(i, 1 - j), at(2 - i, j), 1.0),
                        (at(2 - i, 2 * j + 1), at(2 - i, j), -1000.0)):
            if a is not None and b is not None:
                want[i] += c * a * b
    np.testing.assert_allclose(k(B=spf.Tensor.from_dense("CSC", d)).to_dense(), want)


def test_a_find_reading_a_level_in_a_counting_pass_declares_it():
    """The hash find of ``B(i, 3*j)`` (ELL) reads ``B_pi = i``; the passes counting a CSC
    output's entries read no value and so declared no ``i`` (``'i' undeclared``)."""
    rng = np.random.default_rng(0)
    t = (rng.random((4, 3, 5)) < 0.4) * rng.integers(-3, 4, (4, 3, 5))
    b = (rng.random((4, 9)) < 0.5) * rng.integers(-3, 4, (4, 9))
    k = spf.Kernel("R(i,j) = T(i, j, k + 1) and sign(B(i, 3*j))",
                   {"B": "ELL", "T": "CSF", "R": "CSC"},
                   dtype={"B": "int64", "T": "int64", "R": "bool"}).compile()
    got = k(T=spf.Tensor.from_dense("CSF", t), B=spf.Tensor.from_dense("ELL", b)).to_dense()
    # k + 1 ranges over T's last dimension (k from -1): any k of T's row and the sign
    want = np.logical_and(t, np.sign(b[:, ::3])[:, :, None]).any(2)
    np.testing.assert_array_equal(got, want)
