"""Every bad-input path of issue 2: the exception type and what its message says.

- malformed layout files and kernel specs raise ``spf.SpecError`` naming the file (or
  ``<string>``), the line and column, and what was expected;
- wrong data passed to a compiled kernel (or to a Tensor constructor) raises
  ``spf.ArgumentError`` before any C runs.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf

# A self-contained copy of CSR (no packer), so these tests do not depend on layouts/.
BASE = """\
name = "MyCSR"
description = "test copy of CSR"
relation = "{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pj < rowPtr(pi + 1) \
and gi = pi and gj = colIdx(pj)}"
value = "data[pj]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
rowPtr = "int[numRows + 1]"
colIdx = "int[rowPtr(numRows)]"
data = "double[rowPtr(numRows)]"

[[properties]]
kind = "monotonic"
uf = "rowPtr"
order = "<="

[[properties]]
kind = "range"
uf = "colIdx"
min = "0"
max = "numCols - 1"
"""


def position(text: str, needle: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based line and column of the ``occurrence``-th ``needle`` in ``text``."""
    pos = -1
    for _ in range(occurrence + 1):
        pos = text.index(needle, pos + 1)
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def line_of(text: str, needle: str, occurrence: int = 0) -> int:
    return position(text, needle, occurrence)[0]


@pytest.fixture
def write_layout(tmp_path):
    def write(text: str, name: str = "Bad.toml") -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return write


def layout_error(path: str, *fragments: str, line: int | None = None,
                 column: int | None = None) -> spf.SpecError:
    with pytest.raises(spf.SpecError) as info:
        spf.load_layout(path)
    err = info.value
    assert err.source == path
    assert str(err).startswith(path)
    for frag in fragments:
        assert frag in str(err), f"{frag!r} not in {str(err)!r}"
    if line is not None:
        assert err.line == line, str(err)
        assert f"{path}:{line}:" in str(err)
    if column is not None:
        assert err.column == column, str(err)
    return err


# ---------------------------------------------------------------------------------------
# malformed layout files
def test_base_layout_is_valid(write_layout):
    lay = spf.load_layout(write_layout(BASE))
    assert lay.name == "MyCSR" and lay.indices == ("pi", "pj") and lay.order == 2


def test_toml_syntax_error(write_layout):
    text = BASE.replace('value = "data[pj]"', 'value = "data[pj]')
    path = write_layout(text)
    layout_error(path, "invalid TOML", line=line_of(text, 'value = "data'))


def test_missing_relation(write_layout):
    text = "\n".join(ln for ln in BASE.splitlines() if not ln.startswith("relation"))
    layout_error(write_layout(text), "missing required key 'relation'")


def test_missing_fields(write_layout):
    text = BASE.split("[fields]")[0]
    layout_error(write_layout(text), "missing [fields] table")


def test_unknown_top_level_key(write_layout):
    text = BASE.replace('value = "data[pj]"', 'value = "data[pj]"\nvalues = "x"')
    layout_error(write_layout(text), "unknown key 'values'", "expected one of",
                 line=line_of(text, "values ="))


def test_relation_syntax_error_points_into_the_file(write_layout):
    text = BASE.replace("rowPtr(pi) <= pj", "rowPtr(pi) <= <= pj")
    path = write_layout(text)
    line, col = position(text, "<= <=")
    err = layout_error(path, "expected a number, name, call or '('", "found '<='", line=line)
    assert err.column == col + 3  # the second '<='


def test_relation_syntax_error_in_multiline_string(write_layout):
    rel = BASE.splitlines()[2]
    multi = ('relation = """\n{[pi, pj] -> [gi, gj] :\n   0 <= pi < numRows and\n'
             '   rowPtr(pi) <= pj < rowPtr(pi + 1) and gi = pi and gj = colIdx(pj) ]"""')
    text = BASE.replace(rel, multi)
    layout_error(write_layout(text), "expected", line=line_of(text, "gj = colIdx(pj) ]"),
                 column=position(text, ']"""')[1])


def test_relation_must_be_a_relation(write_layout):
    text = BASE.replace("[pi, pj] -> [gi, gj] :", "[pi, pj] :").replace(
        " and gi = pi and gj = colIdx(pj)", "")
    layout_error(write_layout(text), "must map layout indices to logical indices",
                 line=line_of(text, "relation ="))


def test_unknown_uf(write_layout):
    text = BASE.replace("gj = colIdx(pj)}", "gj = colIdz(pj)}")
    line, col = position(text, "colIdz(")
    layout_error(write_layout(text), "'colIdz'", "not an int array field", line=line, column=col)


def test_uf_arity_mismatch(write_layout):
    text = BASE.replace("gj = colIdx(pj)}", "gj = colIdx(pj, pi)}")
    line, col = position(text, "colIdx(pj, pi)")
    layout_error(write_layout(text), "'colIdx' has 1 dimension(s)", "called with 2 argument(s)",
                 line=line, column=col)


def test_unknown_symbol_in_relation(write_layout):
    text = BASE.replace("0 <= pi < numRows", "0 <= pi < numRowz")
    line, col = position(text, "numRowz")
    layout_error(write_layout(text), "'numRowz'", "not a variable, a scalar field or a parameter",
                 line=line, column=col)


def test_bad_property_kind(write_layout):
    text = BASE.replace('kind = "range"', 'kind = "ascending"')
    layout_error(write_layout(text), "property #2", "kind must be one of", "'ascending'",
                 line=line_of(text, 'kind = "ascending"'))


def test_bad_property_order(write_layout):
    text = BASE.replace('order = "<="', 'order = "=<"')
    layout_error(write_layout(text), "property #1 (monotonic)", "order must be one of", "'=<'",
                 line=line_of(text, 'order = "=<"'))


def test_property_of_unknown_index_array(write_layout):
    text = BASE.replace('uf = "colIdx"', 'uf = "colIdy"')
    layout_error(write_layout(text), "property #2 (range)", "'colIdy' is not an index array",
                 line=line_of(text, 'uf = "colIdy"'))


def test_unknown_property_key(write_layout):
    text = BASE.replace('max = "numCols - 1"', 'max = "numCols - 1"\nmaximum = "3"')
    layout_error(write_layout(text), "property #2", "unknown key(s) ['maximum']",
                 line=line_of(text, "maximum ="))


def test_bad_field_type(write_layout):
    text = BASE.replace('numCols = "int"', 'numCols = "long"')
    layout_error(write_layout(text), "field 'numCols'", "'long'", "int, int32, int64 or double",
                 line=line_of(text, 'numCols = "long"'))


def test_field_extent_uses_unknown_name(write_layout):
    text = BASE.replace('rowPtr = "int[numRows + 1]"', 'rowPtr = "int[nRows + 1]"')
    layout_error(write_layout(text), "field 'rowPtr'", "['nRows']", "not scalar fields",
                 line=line_of(text, "rowPtr = "))


def test_shape_arity_mismatch(write_layout):
    text = BASE.replace('shape = ["numRows", "numCols"]', 'shape = ["numRows"]')
    layout_error(write_layout(text), "'shape' has 1 entries", "2 logical dimensions",
                 line=line_of(text, "shape ="))


def test_shape_entry_not_affine_in_scalars(write_layout):
    text = BASE.replace('shape = ["numRows", "numCols"]', 'shape = ["numRows", "rowPtr(0)"]')
    layout_error(write_layout(text), "shape entry 'rowPtr(0)'", "affine in scalar fields",
                 line=line_of(text, "shape ="), column=position(text, "rowPtr(0)")[1])


def test_value_subscript_count_mismatch(write_layout):
    text = BASE.replace('value = "data[pj]"', 'value = "data[pi][pj]"')
    layout_error(write_layout(text), "'data' has 1 dimension(s)", "2 subscript(s)",
                 line=line_of(text, "value ="), column=position(text, "data[pi]")[1])


def test_value_array_not_a_double_field(write_layout):
    text = BASE.replace('value = "data[pj]"', 'value = "colIdx[pj]"')
    layout_error(write_layout(text), "'colIdx' is not a double array field",
                 line=line_of(text, "value ="))


def test_missing_packer_file(write_layout):
    text = BASE.replace('value = "data[pj]"', 'value = "data[pj]"\npacker = "nope.py"')
    layout_error(write_layout(text), "packer file 'nope.py' not found",
                 line=line_of(text, "packer ="))


def test_packer_not_python(write_layout, tmp_path):
    (tmp_path / "pack.txt").write_text("def pack(shape, coords, values, params): pass\n")
    path = write_layout(BASE.replace('value = "data[pj]"', 'value = "data[pj]"\n'
                                     'packer = "pack.txt:pack"'))
    with pytest.raises(spf.ArgumentError, match=r"^packer '.*pack\.txt' is not a Python file "
                                                r"\(a \.py file defining pack\)$"):
        spf.Tensor.from_coords(path, (2, 2), ([0], [1]), [1.0])


def test_unknown_layout_name():
    with pytest.raises(spf.SpecError) as info:
        spf.load_layout("NoSuchLayout")
    assert "unknown layout 'NoSuchLayout'" in str(info.value)
    assert "CSR" in str(info.value)  # lists the known layouts


def test_layout_file_not_found():
    with pytest.raises(spf.SpecError) as info:
        spf.load_layout("path/that/does/not/exist.toml")
    assert "layout file not found" in str(info.value)
    assert "path/that/does/not/exist.toml" in str(info.value)


def test_layout_given_as_wrong_type():
    with pytest.raises(spf.SpecError, match="name, path or Layout object"):
        spf.load_layout(3)


def test_unknown_layout_parameter():
    with pytest.raises(spf.SpecError, match=r"has no parameter\(s\) \['B'\]"):
        spf.load_layout("CSR", B=4)


def test_bad_layout_parameter_value():
    with pytest.raises(spf.SpecError, match="must be a positive integer"):
        spf.load_layout("BCSR", B=0)


# ---------------------------------------------------------------------------------------
# malformed kernel expressions and options
def kernel_error(*fragments: str, line: int | None = None, column: int | None = None,
                 source: str = "<string>", args=(), **kwargs) -> spf.SpecError:
    with pytest.raises(spf.SpecError) as info:
        spf.Kernel(*args, **kwargs)
    err = info.value
    assert err.source == source
    assert str(err).startswith(source)
    for frag in fragments:
        assert frag in str(err), f"{frag!r} not in {str(err)!r}"
    if line is not None:
        assert (err.line, err.column) == (line, column), str(err)
        assert str(err).startswith(f"{source}:{line}:{column}: ")
    return err


def test_trailing_operator():
    kernel_error("expected a tensor, a number, a function or", "found end of input", line=1,
                 column=16,
                 args=("y(i) = A(i,j) *", {"A": "CSR"}))


def test_error_position_on_second_line():
    kernel_error("expected a tensor, a number, a function or", line=2, column=10,
                 args=("y(i) = A(i,j)\n * x(j) *", {"A": "CSR"}))


def test_sum_term_without_an_output_index():
    kernel_error("term x(j) does not use the output index(es) ['i']", "must be dense",
                 args=("C(i,j) = A(i,j) + x(j)", {"A": "CSR", "C": "CSR"}))


def test_missing_assignment():
    kernel_error("expected '=' or '+='", line=1, column=6, args=("y(i) A(i,j) * x(j)",))


def test_unexpected_character():
    kernel_error("unexpected character '@'", line=1, column=15, args=("y(i) = A(i,j) @ x(j)",))


def test_unknown_tensor_in_layouts():
    kernel_error("layout given for 'B'", "not a tensor of 'y(i) = A(i,j) * x(j)'",
                 args=("y(i) = A(i,j) * x(j)", {"B": "CSR"}))


def test_unknown_layout_in_kernel():
    with pytest.raises(spf.SpecError, match="unknown layout 'CRS'"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CRS"})


def test_index_count_mismatch_with_layout():
    kernel_error("tensor 'A' is used with 1 indices", "layout CSR has 2 dimensions",
                 line=1, column=8, args=("y(i) = A(i) * x(i)", {"A": "CSR"}))


def test_index_count_mismatch_between_uses():
    kernel_error("'A'", line=1, column=17, args=("y(i) = A(i,j) * A(j)",))


def test_output_index_missing_on_rhs():
    kernel_error("output index 'k' does not appear on the right-hand side", line=1, column=1,
                 args=("y(k) = A(i,j) * x(j)", {"A": "CSR"}))


def test_output_on_rhs():
    kernel_error("the output 'y' also appears on the right-hand side", line=1, column=17,
                 args=("y(i) = A(i,j) * y(j)", {"A": "CSR"}))


def test_order_names_unknown_variable():
    err = kernel_error("order names 'A.pz'", "not a loop variable",
                       args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}), order=["A.pz"])
    assert "'A.pi'" in str(err) and "'A.pj'" in str(err)  # lists the choices


def test_unknown_find_option():
    kernel_error("find='z3magic'", "'auto'", args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}),
                 find="z3magic")


def test_find_names_unknown_tensor():
    kernel_error("find names 'Q'", args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}),
                 find={"Q": "loop"})


def test_bounds_with_unknown_index():
    kernel_error("bound k <= i", "kernel's indices", args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}),
                 bounds="k <= i")


def test_bounds_syntax_error():
    kernel_error("expected", line=1, column=6, args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}),
                 bounds="j <= ")


def test_accumulate_into_an_output_written_by_its_relation():
    """'+=' into a sparse output reads its old entries as one more term: also into DIA,
    which an entry list is written into by its relation."""
    A = spf.Tensor.from_dense("CSR", np.array([[1.0, 0, 2], [0, 3, 0], [4, 0, 0]]))
    old = spf.Tensor.from_dense("DIA", np.diag([1.0, 2.0, 3.0]))
    k = spf.Kernel("Y(i,j) += A(i,j) * 2", {"A": "CSR", "Y": "DIA"}).compile()
    new = k(A=A, Y=old)
    assert new.layout.name == "DIA"
    np.testing.assert_array_equal(new.to_dense(), np.diag([1.0, 2.0, 3.0]) + 2 * A.to_dense())


def test_scalar_takes_no_layout():
    kernel_error("'s' is a scalar and takes no layout", args=("y(i) = s * x(i)", {"s": "SV"}))


def test_reserved_and_invalid_names():
    kernel_error("'int' is reserved", args=("int(i) = x(i)",))
    kernel_error("not a valid C identifier", args=("y(i) = x(i)",), name="1abc")


def test_parallel_must_be_a_boolean():
    kernel_error("parallel must be True or False", args=("y(i) = x(i)",), parallel="yes")


def test_tile_errors():
    kernel_error("not a variable of the iteration space",
                 args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}), tile={"A.pz": 4})
    kernel_error("must be a positive integer",
                 args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}), tile={"A.pi": 0})
    kernel_error("cannot tile j: it is not a loop",
                 args=("y(i) = A(i,j) * x(j)", {"A": "CSR"}), tile={"j": 4})


def test_layout_parameter_for_unknown_tensor():
    kernel_error("'Q'", args=("y(i) = A(i,j) * x(j)", {"A": "BCSR"}), params={"Q": {"B": 2}})


KERNEL_FILE = """\
expr = "y(i) = A(i,j) * x(j)"
order = ["A.pi", "A.pj"]

[layouts]
A = "CSR"
"""


def test_kernel_file_with_bad_key(tmp_path):
    text = KERNEL_FILE.replace("[layouts]", "[layout]")
    path = tmp_path / "k.toml"
    path.write_text(text)
    kernel_error("unknown key 'layout' (did you mean 'layouts'?); a kernel file has expr, "
                 "layouts, params and the options name, order,", source=str(path),
                 line=line_of(text, "[layout]"), column=2, args=(str(path),))   # the key


def test_kernel_file_with_bad_expr_points_into_the_file(tmp_path):
    text = KERNEL_FILE.replace("A(i,j) * x(j)", "A(i,j) * * x(j)")
    path = tmp_path / "k.toml"
    path.write_text(text)
    line, col = position(text, "* x(j)")
    kernel_error("expected a tensor, a number, a function or", "found '*'", source=str(path),
                 line=line,
                 column=col, args=(str(path),))


def test_kernel_file_with_bad_option_type(tmp_path):
    text = KERNEL_FILE.replace('order = ["A.pi", "A.pj"]', "order = 3")
    path = tmp_path / "k.toml"
    path.write_text(text)
    kernel_error("order must be a list of loop variables such as ['A.pi', 'A.pj'] or a "
                 "comma-separated string, got 3", source=str(path),
                 line=line_of(text, "order ="), column=len("order = ") + 1,   # the value
                 args=(str(path),))


def test_kernel_file_toml_error(tmp_path):
    text = KERNEL_FILE.replace('A = "CSR"', "A = CSR")
    path = tmp_path / "k.toml"
    path.write_text(text)
    err = kernel_error("invalid TOML", source=str(path), args=(str(path),))
    assert err.line == line_of(text, "A = CSR")


def test_kernel_file_missing_expr(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('[layouts]\nA = "CSR"\n')
    kernel_error("missing 'expr'", source=str(path), args=(str(path),))


def test_kernel_file_not_found():
    kernel_error("cannot read kernel file", source="no/such/kernel.toml",
                 args=("no/such/kernel.toml",))


# ---------------------------------------------------------------------------------------
# wrong data passed to a compiled kernel: ArgumentError before any C runs
MAT = sp.random(6, 5, density=0.4, format="csr", random_state=1)


@pytest.fixture(scope="module")
def kernels():
    return {
        "spmv": spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile(),
        "spmspv": spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR", "x": "SV"}).compile(),
        "acc": spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}).compile(),
        "scale": spf.Kernel("y(i) = s * x(i)").compile(),
    }


@pytest.fixture
def no_c(kernels, monkeypatch):
    """The kernels, with their C entry points replaced by a function that fails the test."""
    def boom(*args):
        raise AssertionError("the C kernel ran on bad input")
    for fn in kernels.values():
        monkeypatch.setattr(fn, "_fn", boom)
    return kernels


def a_csr():
    return spf.Tensor.from_scipy("CSR", MAT)


def test_good_call_works(kernels):
    x = np.arange(5.0)
    np.testing.assert_allclose(kernels["spmv"](A=a_csr(), x=x), MAT @ x)


def test_tensor_in_wrong_layout(no_c):
    with pytest.raises(spf.ArgumentError,
                       match="'A': the kernel was generated for layout CSR but got a tensor "
                             "in layout COO"):
        no_c["spmv"](A=spf.Tensor.from_scipy("COO", MAT), x=np.ones(5))


def test_tensor_with_wrong_layout_parameters():
    f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "BCSR"}, params={"A": {"B": 2}}).compile()
    f._fn = None  # calling it would raise TypeError, not ArgumentError
    with pytest.raises(spf.ArgumentError, match=r"BCSR \{'B': 2\}.*BCSR \{'B': 8\}"):
        f(A=spf.Tensor.from_scipy("BCSR", MAT), x=np.ones(5))


def test_index_extent_mismatch(no_c):
    with pytest.raises(spf.ArgumentError, match=r"index 'j' has extent 5 in A \(shape \(6, 5\)\) "
                                                r"but 4 in x"):
        no_c["spmv"](A=a_csr(), x=np.ones(4))
    with pytest.raises(spf.ArgumentError, match="index 'j' has extent 5"):
        no_c["spmspv"](A=a_csr(), x=spf.Tensor.from_dense("SV", np.ones(4)))


def test_dense_array_of_wrong_order(no_c):
    with pytest.raises(spf.ArgumentError, match=r"order-1 tensors.*shape \(5, 1\)"):
        no_c["spmv"](A=a_csr(), x=np.ones((5, 1)))


def test_numpy_array_for_sparse_layout(no_c):
    with pytest.raises(spf.ArgumentError, match=r"'A' is in layout CSR; pack it first with "
                                                r"spf.Tensor.from_dense/from_scipy"):
        no_c["spmv"](A=MAT.toarray(), x=np.ones(5))
    with pytest.raises(spf.ArgumentError, match="'x' is in layout SV"):
        no_c["spmspv"](A=a_csr(), x=np.ones(5))


def test_unsupported_object_for_sparse_layout(no_c):
    with pytest.raises(spf.ArgumentError, match=r"'A': expected an spf.Tensor, a numpy array, a "
                                                r"scipy.sparse matrix or array or a pydata "
                                                r"sparse array, got dict"):
        no_c["spmv"](A={"rowPtr": [0]}, x=np.ones(5))


def test_complex_dtype(no_c):
    """Complex data makes complex tensors; a real kernel refuses it (same_kind casting)."""
    with pytest.raises(spf.ArgumentError, match="'x' holds complex128 values; the kernel "
                                                "computes it as float64"):
        no_c["spmv"](A=a_csr(), x=np.ones(5) * 1j)
    assert spf.Tensor.from_dense("SV", np.ones(5) * 1j).dtype == np.complex128
    t = spf.Tensor.from_arrays("CSR", (1, 1), {"numRows": 1, "numCols": 1, "rowPtr": [0, 1],
                                               "colIdx": [0], "data": [1j]})
    assert t.dtype == np.complex128 and t.to_dense()[0, 0] == 1j


def test_string_dtype(no_c):
    with pytest.raises(spf.ArgumentError, match="dtype <U"):
        no_c["spmv"](A=a_csr(), x=np.array(["a"] * 5))


def test_missing_argument(no_c):
    with pytest.raises(spf.ArgumentError, match="missing argument 'x'"):
        no_c["spmv"](A=a_csr())


def test_unknown_argument(no_c):
    with pytest.raises(spf.ArgumentError, match=r"unknown argument\(s\) \['z'\]; the kernel "
                                                r"takes \['A', 'x'\]"):
        no_c["spmv"](A=a_csr(), x=np.ones(5), z=np.ones(5))


def test_accumulate_without_output(no_c):
    with pytest.raises(spf.ArgumentError, match=r"'\+=' accumulates into 'y': pass it as y=array"):
        no_c["acc"](A=a_csr(), x=np.ones(5))


def test_output_of_wrong_shape_or_dtype(no_c):
    with pytest.raises(spf.ArgumentError, match=r"output 'y' must be a writeable C-contiguous "
                                                r"float64 array of shape \(6,\)"):
        no_c["acc"](A=a_csr(), x=np.ones(5), y=np.zeros(5))
    with pytest.raises(spf.ArgumentError, match="float64"):
        no_c["acc"](A=a_csr(), x=np.ones(5), y=np.zeros(6, dtype=np.float32))


def test_scalar_argument_of_wrong_type(no_c):
    with pytest.raises(spf.ArgumentError, match="'s' is a scalar; got str"):
        no_c["scale"](s="2", x=np.ones(3))


def test_scalar_accumulate_semantics():
    f = spf.Kernel("v = a(i) * b(i)").compile()
    with pytest.raises(spf.ArgumentError, match="'v' is assigned with '='; do not pass it"):
        f(a=np.ones(3), b=np.ones(3), v=1.0)


CSR_OK = {"numRows": 2, "numCols": 3, "rowPtr": [0, 1, 2], "colIdx": [0, 2], "data": [1.0, 2.0]}


def csr_arrays(**changes):
    return spf.Tensor.from_arrays("CSR", (2, 3), {**CSR_OK, **changes})


def test_from_arrays_accepts_consistent_arrays():
    np.testing.assert_array_equal(csr_arrays().to_dense(), [[1, 0, 0], [0, 0, 2]])


def test_from_arrays_length_mismatch():
    with pytest.raises(spf.ArgumentError, match=r"'colIdx' has 1 elements but its extent "
                                                r"\[rowPtr\(numRows\)\] is 2"):
        csr_arrays(colIdx=[0])
    with pytest.raises(spf.ArgumentError, match="'data' has 3 elements"):
        csr_arrays(data=[1.0, 2.0, 3.0])


def test_from_arrays_index_out_of_range():
    with pytest.raises(spf.ArgumentError, match=r"'colIdx' violates range .* at the read "
                                                r"colIdx\[pj\] = colIdx\[1\]: 3 > 2"):
        csr_arrays(colIdx=[0, 3])
    with pytest.raises(spf.ArgumentError, match="'colIdx' violates range"):
        csr_arrays(colIdx=[-1, 0])


def test_from_arrays_pointer_array_out_of_range():
    with pytest.raises(spf.ArgumentError, match="'colIdx' has 2 elements but its extent"):
        csr_arrays(rowPtr=[0, 1, 7])
    with pytest.raises(spf.ArgumentError, match="'rowPtr' violates"):
        csr_arrays(rowPtr=[0, 3, 2])


def test_from_arrays_missing_or_unknown_field():
    fields = dict(CSR_OK)
    del fields["data"]
    with pytest.raises(spf.ArgumentError, match=r"missing field\(s\) \['data'\]"):
        spf.Tensor.from_arrays("CSR", (2, 3), fields)
    with pytest.raises(spf.ArgumentError, match=r"unknown field\(s\) \['vals'\]"):
        csr_arrays(vals=[1.0])


def test_from_arrays_shape_mismatch():
    with pytest.raises(spf.ArgumentError, match=r"CSR tensor: numRows = 2 was given, but the "
                                                r"shape \(dimension 0 is 3\) gives numRows = 3"):
        spf.Tensor.from_arrays("CSR", (3, 3), CSR_OK)


def test_from_arrays_float_indices():
    with pytest.raises(spf.ArgumentError, match="index array 'colIdx' must hold integers"):
        csr_arrays(colIdx=[0.0, 2.0])


def test_from_arrays_bad_scalar_field():
    with pytest.raises(spf.ArgumentError, match="scalar field 'numRows' must be an integer"):
        csr_arrays(numRows=2.0)


def test_from_coords_errors():
    with pytest.raises(spf.ArgumentError, match=r"coordinate 2 of entry 1 in dimension 0 is "
                                                r"outside 0\.\.1"):
        spf.Tensor.from_coords("CSR", (2, 3), ([0, 2], [0, 1]), [1.0, 2.0])
    with pytest.raises(spf.ArgumentError, match="one coordinate array per dimension"):
        spf.Tensor.from_coords("CSR", (2, 3), ([0, 1], [0]), [1.0, 2.0])
    with pytest.raises(spf.ArgumentError, match=r"order-2 tensors, got shape \(2,\)"):
        spf.Tensor.from_coords("CSR", (2,), ([0],), [1.0])


def test_from_scipy_and_from_dense_errors():
    with pytest.raises(spf.ArgumentError, match=r"expects a scipy.sparse matrix, got ndarray"):
        spf.Tensor.from_scipy("CSR", MAT.toarray())
    with pytest.raises(spf.ArgumentError, match="order-2 tensors"):
        spf.Tensor.from_dense("CSR", np.ones(3))
    with pytest.raises(spf.ArgumentError, match="order-2 tensors"):
        spf.Tensor.from_dense("DenseMatrix", np.ones(3))


def test_kernel_options_merge_call_over_file_and_validate_once(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\nparallel = true\nfind = "hashmap"\n'
                    'name = "from_file"\nz3_timeout_ms = 7\n[layouts]\nA = "CSR"\n')
    opts = spf.Kernel(str(path)).options
    assert (opts.parallel, opts.find, opts.name, opts.z3_timeout_ms) == \
        (True, "hashmap", "from_file", 7)
    opts = spf.Kernel(str(path), find="binsearch", name="mine", parallel=False).options
    assert (opts.find, opts.name, opts.parallel) == ("binsearch", "mine", False)
    given = spf.KernelOptions(find="loop", parallel=True)
    opts = spf.Kernel(str(path), options=given, name="mine").options
    assert (opts.find, opts.name, opts.parallel, opts.z3_timeout_ms) == ("loop", "mine", True, 7)
    with pytest.raises(spf.SpecError, match="drop_zeros must be True or False, got 'yes'"):
        spf.KernelOptions(drop_zeros="yes")
    with pytest.raises(spf.SpecError, match="find='fast' is not a find algorithm"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, find="fast")
