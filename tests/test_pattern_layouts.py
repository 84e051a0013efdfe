"""Pattern layouts: a layout file whose ``value`` is a constant (``value = "1"``) stores no
value array, and every entry it stores holds that constant (scipy's and GraphBLAS's
structure-only matrices, Finch's Pattern level).  Kernels read the constant; constructors,
conversions and kernel outputs into a pattern layout accept values equal to it (else an
ArgumentError naming the first entry that differs) or, with ``structure=True``, store the
entries' positions.  References: scipy (``A.astype(bool)``, ``(A != 0)``)."""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf

ROOT = Path(__file__).resolve().parents[1]
PATTERN = "CSR_pattern"


def matrix(m: int, n: int, density: float, seed: int) -> sp.csr_matrix:
    """A random CSR matrix with an empty row (where it has one) and values in 2..9."""
    a = sp.random(m, n, density, format="csr", random_state=seed)
    a.data = np.random.default_rng(seed).integers(2, 10, a.nnz).astype(float)
    if m > 2:
        a = sp.csr_matrix(a.multiply(np.arange(m)[:, None] != 2))   # row 2 empty
        a.eliminate_zeros()
    return a


SHAPES = [((7, 5), 0.4), ((5, 9), 0.3), ((4, 6), 0.0), ((1, 1), 1.0), ((6, 3), 0.05)]


def structure(a: sp.spmatrix) -> np.ndarray:
    """The stored entries of ``a`` (explicit zeros too: GraphBLAS's structure) as 1.0s."""
    s = sp.csr_matrix(a, copy=True)
    s.data[:] = 1.0
    return s.toarray()


@cache
def spmv() -> spf.CompiledKernel:
    return spf.Kernel("y(i) = A(i,j) * x(j)", {"A": PATTERN}).compile()


def test_the_layout_stores_no_value_array():
    lay = spf.load_layout(PATTERN)
    assert lay.implicit == 1.0 and lay.value_array is None
    assert "data" not in lay.fields
    src = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": PATTERN}).c_source()
    struct = src.split("typedef struct spf_CSR_pattern", 1)[1].split("}", 1)[0]
    assert "double" not in struct       # rowPtr and colIdx only
    assert "spf_acc += ((double)1) * x_data[x_p0];" in src     # the literal, no array read
    assert_compiles_clean(src)


@pytest.mark.parametrize("shape,density", SHAPES)
def test_spmv_reads_the_constant(shape, density):
    a = matrix(*shape, density, seed=shape[0])
    A = spf.Tensor.from_scipy(PATTERN, a, structure=True)
    assert set(A.fields) == {"numRows", "numCols", "rowPtr", "colIdx"}
    x = np.random.default_rng(1).random(shape[1])
    np.testing.assert_allclose(spmv()(A=A, x=x), a.astype(bool).astype(float) @ x)


def test_values_to_scipy_and_to_dense_give_the_constant():
    a = matrix(7, 5, 0.4, seed=3)
    A = spf.Tensor.from_scipy(PATTERN, a, structure=True)
    np.testing.assert_array_equal(A.values, np.ones(a.nnz))
    assert not A.values.flags.writeable
    s = A.to_scipy()
    assert s.format == "csr" and (s != a.astype(bool).astype(float)).nnz == 0
    np.testing.assert_array_equal(A.to_dense(), structure(a))
    coords, values = A.entries()
    np.testing.assert_array_equal(values, np.ones(a.nnz))
    np.testing.assert_array_equal(coords[1], a.indices)


@pytest.mark.parametrize("build", ["from_scipy", "from_dense", "from_coords"])
def test_constructors_take_only_the_constant(build):
    a = matrix(6, 4, 0.5, seed=4)
    ones = a.copy()
    ones.data[:] = 1.0
    coo = a.tocoo()
    make = {"from_scipy": lambda m, **kw: spf.Tensor.from_scipy(PATTERN, m, **kw),
            "from_dense": lambda m, **kw: spf.Tensor.from_dense(PATTERN, m.toarray(), **kw),
            "from_coords": lambda m, **kw: spf.Tensor.from_coords(
                PATTERN, m.shape, (m.tocoo().row, m.tocoo().col), m.tocoo().data, **kw)}[build]
    np.testing.assert_array_equal(make(ones).to_dense(), structure(a))
    first = np.lexsort((coo.col, coo.row))[0]
    at, value = (coo.row[first], coo.col[first]), coo.data[first]
    with pytest.raises(spf.ArgumentError, match=re.escape(
            f"CSR_pattern tensor: entry ({at[0]}, {at[1]}) holds {value.item()!r}, but "
            "CSR_pattern is a pattern layout: every entry it stores holds 1 (it stores no "
            "values); pass "
            "structure=True to store the entries' positions only")):
        make(a)
    np.testing.assert_array_equal(make(a, structure=True).to_dense(), structure(a))


def test_structure_keeps_explicit_zeros_as_scipy_does():
    a = sp.csr_matrix((np.array([0.0, 2.0, 0.0]), np.array([1, 0, 2]), np.array([0, 1, 1, 3])),
                      shape=(3, 3))
    A = spf.Tensor.from_scipy(PATTERN, a, structure=True)
    np.testing.assert_array_equal(A.to_dense(), structure(a))
    with pytest.raises(spf.ArgumentError, match=r"entry \(0, 1\) holds 0.0"):
        spf.Tensor.from_scipy(PATTERN, a)       # an explicit zero is an entry, not the 1


def test_structure_is_refused_for_a_valued_layout():
    with pytest.raises(spf.ArgumentError, match="structure=True stores only the entries' "
                       "positions, in a pattern layout; CSR stores values"):
        spf.Tensor.from_coords("CSR", (2, 2), ([0], [1]), [2.0], structure=True)


@pytest.mark.parametrize("dst", ["CSR", "COO", "CSC", "DenseMatrix"])
def test_conversion_out_of_a_pattern_gives_the_constant(dst):
    for shape, density in SHAPES[:4]:
        a = matrix(*shape, density, seed=7)
        out = spf.Tensor.from_scipy(PATTERN, a, structure=True).convert(dst)
        assert out.layout.value_array is not None
        np.testing.assert_array_equal(out.to_dense(), structure(a))


def test_conversion_into_a_pattern_checks_every_value():
    a = matrix(7, 5, 0.4, seed=8)
    valued = spf.Tensor.from_scipy("CSR", a)
    with pytest.raises(spf.ArgumentError, match=re.escape(
            "converting a CSR tensor to CSR_pattern: entry (0, ")):
        valued.convert(PATTERN)
    np.testing.assert_array_equal(valued.convert(PATTERN, structure=True).to_dense(),
                                  structure(a))
    ones = a.copy()
    ones.data[:] = 1.0
    out = spf.Tensor.from_scipy("CSR", ones).convert(PATTERN)
    assert set(out.fields) == {"numRows", "numCols", "rowPtr", "colIdx"}
    np.testing.assert_array_equal(out["colIdx"], a.indices)
    for shape, density in SHAPES[2:4]:          # empty, one entry
        b = matrix(*shape, density, seed=9)
        b.data[:] = 1.0
        np.testing.assert_array_equal(
            spf.Tensor.from_scipy("COO", b).convert(PATTERN).to_dense(), structure(b))


def test_the_conversion_c_writes_no_values():
    src = spf.Conversion("CSR", PATTERN).c_source()
    body = src.split("int spf_convert_fill(", 1)[1]
    assert "->data" not in body.split("{", 1)[1] and "A_data" not in body
    assert_compiles_clean(src)


PATTERN_CSC = """name = "CSC_pattern"
relation = '''{[pj, pi] -> [gi, gj] : 0 <= pj < numCols and colPtr(pj) <= pi < colPtr(pj + 1)
              and gi = rowIdx(pi) and gj = pj}'''
value = "1"
shape = ["numRows", "numCols"]
[fields]
numRows = "int"
numCols = "int"
colPtr = "int[numCols + 1]"
rowIdx = "int[colPtr(numCols)]"
[[properties]]
kind = "periodic_monotonic"
uf = "rowIdx"
period = "pj"
order = "<"
"""


def test_a_scattered_pattern_output_sorts_without_a_value_array(tmp_path):
    """CSR_unsorted -> a pattern CSC: a bucket scatter whose segments are sorted (with the
    kernel's own scratch values: spf_bucket_finish moves pairs) and nothing else."""
    path = tmp_path / "CSC_pattern.toml"
    path.write_text(PATTERN_CSC)
    a = matrix(9, 6, 0.4, seed=10)
    a.data[:] = 1.0
    rng = np.random.default_rng(0)
    for r in range(a.shape[0]):                 # each row's columns out of order
        s, e = a.indptr[r], a.indptr[r + 1]
        a.indices[s:e] = rng.permutation(a.indices[s:e])
    t = spf.Tensor.from_arrays("CSR_unsorted", a.shape, {
        "rowPtr": a.indptr, "colIdx": a.indices, "data": a.data})
    conv = spf.Conversion("CSR_unsorted", str(path))
    assert "spf_vals" in conv.c_source()
    assert_compiles_clean(conv.c_source())
    out = t.convert(str(path))
    np.testing.assert_array_equal(out["rowIdx"], a.tocsc().indices)
    np.testing.assert_array_equal(out.to_dense(), structure(a))


def test_kernel_outputs_in_a_pattern_layout():
    a, b = matrix(6, 5, 0.4, seed=11), matrix(5, 4, 0.4, seed=12)
    A, B = spf.Tensor.from_scipy("CSR", a), spf.Tensor.from_scipy("CSR", b)
    layouts = {"A": "CSR", "B": "CSR", "C": PATTERN}
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", layouts, structure=True)
    np.testing.assert_array_equal(k.compile()(A=A, B=B).to_dense(), structure(a @ b))
    assert_compiles_clean(k.c_source())
    with pytest.raises(spf.ArgumentError, match=r"CSR_pattern tensor: entry \(\d+, \d+\) "
                       r"holds [0-9.]+, but CSR_pattern is a pattern layout"):
        spf.Kernel("C(i,j) = A(i,k) * B(k,j)", layouts).compile()(A=A, B=B)
    P = spf.Tensor.from_scipy(PATTERN, a, structure=True)
    hadamard = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": PATTERN, "B": PATTERN,
                                                       "C": PATTERN}).compile()
    np.testing.assert_array_equal(hadamard(A=P, B=P).to_dense(), structure(a))


def test_a_pattern_output_whose_values_cannot_be_checked_needs_structure():
    with pytest.raises(spf.SpecError, match="output 'C' is in CSR_pattern, a pattern layout: "
                       "every entry it stores holds 1, and the values this kernel computes "
                       "cannot be checked"):
        spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": PATTERN},
                   share={"C": "A"})


def test_structure_on_an_output_that_stores_values_is_refused():
    """structure=True means "store the positions" only for a pattern output; on any other
    output (valued, dense, scalar) it was silently ignored: it is a SpecError naming the
    option and the output's layout; the same kernel without it runs (compared with scipy)."""
    want = ("structure=True stores the positions of the entries of an output in a pattern "
            "layout (whose value is a constant); output {} is {}, so it has no meaning here: "
            "drop structure=True")
    for lay, what in [("CSR", "in CSR, which stores its values (in data)"),
                      ("DenseMatrix", "in DenseMatrix, which stores its values (in data)")]:
        with pytest.raises(spf.SpecError) as err:
            spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": lay},
                       structure=True)
        assert err.value.detail == want.format("'C'", what)
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel("s = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR"}, structure=True)
    assert err.value.detail == want.format("'s'", "a scalar")
    with pytest.raises(spf.ArgumentError, match=r"CSC stores values \(in data\)$"):
        spf.Conversion("CSR", "CSC", structure=True)
    a = matrix(5, 4, 0.5, seed=13)
    A = spf.Tensor.from_scipy("CSR", a)
    k = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"})
    np.testing.assert_array_equal(k.compile()(A=A, B=A).to_dense(), a.multiply(a).toarray())


def test_layout_file_errors(tmp_path):
    text = (ROOT / "layouts" / "CSR.toml").read_text().replace('value = "data[pj]"',
                                                                'value = "1"')
    path = tmp_path / "Bad.toml"
    path.write_text(text)
    with pytest.raises(spf.SpecError, match=re.escape(
            f"{path}:4:10: value '1' is a constant (a pattern layout, which stores no value "
            "array), but field 'data' is a double array that nothing would read")):
        spf.load_layout(str(path))
    path.write_text(text.replace('value = "1"', 'value = "true"'))
    with pytest.raises(spf.SpecError, match=re.escape(
            "Bad.toml:4:10: value 'true' is neither an array subscripted by the layout indices "
            '("data[pj]") nor a number ("1": a pattern layout, which stores no values)')):
        spf.load_layout(str(path))
    two = tmp_path / "Two.toml"
    two.write_text((ROOT / "layouts" / "CSR_pattern.toml").read_text()
                   .replace('value = "1"', 'value = "2"').replace('"CSR_pattern"', '"Two"'))
    lay = spf.load_layout(str(two))
    assert lay.implicit == 2.0
    with pytest.raises(spf.SpecError, match="layout Two: its value 2 is no bool value"):
        spf.Tensor.from_coords(lay, (2, 2), ([0], [1]), [True])


def test_a_pattern_layout_written_by_its_relation(tmp_path):
    """ELL without data: placement refuses it (its fill pass places values), the relation's
    solution writes it (no value array), for constructors, conversions and kernel outputs."""
    text = (ROOT / "layouts" / "ELL.toml").read_text()
    for old, new in (('value = "data[pi][pk]"', 'value = "1"'), ('packer = "ELL.py"\n', ""),
                     ('data = "double[numRows][width]"\n', ""),
                     ('name = "ELL"', 'name = "ELL_pattern"')):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "ELL_pattern.toml"
    path.write_text(text)
    a = matrix(7, 6, 0.3, seed=13)
    for t in (spf.Tensor.from_scipy(str(path), a, structure=True),
              spf.Tensor.from_scipy("CSR", a).convert(str(path), structure=True,
                                                       allow_padding=True)):
        assert sorted(t.fields) == ["colIdx", "numCols", "numRows", "width"]
        np.testing.assert_array_equal(t.to_dense(), structure(a))
    with pytest.raises(spf.ArgumentError, match="converting a CSR tensor to ELL_pattern: "
                       r"entry \(0, \d\) holds"):
        spf.Tensor.from_scipy("CSR", a).convert(str(path), allow_padding=True)
    P = spf.Tensor.from_scipy(PATTERN, a, structure=True)
    out = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": PATTERN, "B": PATTERN,
                                                  "C": str(path)}).compile()(A=P, B=P)
    np.testing.assert_array_equal(out.to_dense(), structure(a))


def test_a_scipy_operand_of_a_pattern_layout_is_checked():
    """A scipy matrix passed for a pattern operand is wrapped without its values: they must
    be the constant, as for the constructors."""
    a = matrix(5, 4, 0.5, seed=14)
    x = np.arange(1.0, 5.0)
    with pytest.raises(spf.ArgumentError, match=r"'A': CSR_pattern tensor: entry \(0, \d\) "
                       r"holds \d\.0, but CSR_pattern is a pattern layout"):
        spmv()(A=a, x=x)
    ones = a.copy()
    ones.data[:] = 1.0
    np.testing.assert_allclose(spmv()(A=ones, x=x), structure(a) @ x)
