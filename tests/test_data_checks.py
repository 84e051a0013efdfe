"""No silently wrong data, and errors that say what is wrong where.

Arrays are checked against their declared extents dimension by dimension; conversions of
user data that would lose information are refused (an ArgumentError naming the operand, the
field, the position and the value); and no raw Python exception escapes spf's own checks:
``Tensor.from_arrays`` over every shipped layout, and a compiled kernel's operands, are
fuzzed with wrong dtypes, shapes and values (hypothesis) and may only succeed or raise an
spf error.
"""
from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spf
from spf.front.layout_path import LAYOUT_DIR

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = int(os.environ.get("SPF_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def examples(n: int) -> settings:
    """``n`` examples (``$SPF_FUZZ_EXAMPLES`` overrides it for longer local runs)."""
    return settings(FUZZ, max_examples=EXAMPLES or n)


def raises(error: type, call: Callable[[], Any]) -> str:
    with pytest.raises(error) as info:
        call()
    return str(info.value)


# --- per-dimension extents ------------------------------------------------------------
def test_a_value_array_of_another_shape_is_refused():
    """DIA data declared [numDiags][numRows], given as [numRows][numDiags] (same size)."""
    data = np.arange(6.0).reshape(3, 2)
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "DIA", (3, 3), {"offset": [0, 1], "data": data})) == (
        "DIA tensor: 'data' has shape (3, 2) but its extents [numDiags][numRows] are (2, 3)")
    right = spf.Tensor.from_arrays("DIA", (3, 3), {"offset": [0, 1], "data": data.T})
    flat = spf.Tensor.from_arrays("DIA", (3, 3), {"offset": [0, 1], "data": data.T.ravel()})
    dense = np.array([[0.0, 1, 0], [0, 2, 3], [0, 0, 4]])
    np.testing.assert_array_equal(right.to_dense(), dense)
    np.testing.assert_array_equal(flat.to_dense(), dense)    # a 1-D array is the flat layout


def test_index_and_value_arrays_go_through_one_check():
    ell = {"colIdx": [[0, 1], [2, -1]], "data": np.ones((2, 2))}
    t = spf.Tensor.from_arrays("ELL", (2, 3), ell)
    np.testing.assert_array_equal(t.to_dense(), [[1, 1, 0], [0, 0, 1]])
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "ELL", (2, 3), {**ell, "data": np.ones((2, 1))})) == (
        "ELL tensor: 'data' has shape (2, 1) but its extents [numRows][width] are (2, 2)")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "ELL", (2, 3), {**ell, "width": 2, "colIdx": [[0], [2]]})) == (
        "ELL tensor: width = 2 was given, but dimension 1 of 'colIdx' (1) gives width = 1")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "CSR", (2, 3), {"rowPtr": [0, 1, 2], "colIdx": [[0, 2]], "data": [1.0, 2.0]})) == (
        "CSR tensor: 'colIdx' has shape (1, 2) but its extent [rowPtr(numRows)] is 2")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "CSR", (2, 3), {"rowPtr": [0, 1, 2], "colIdx": 0, "data": [1.0, 2.0]})) == (
        "CSR tensor: 'colIdx' is an array field; got 0")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "CSR", (2, 3), {"rowPtr": [0, 1, 2], "colIdx": [[0], [1, 2]], "data": [1.0, 2.0]})
    ).startswith("CSR tensor: 'colIdx' cannot be read as an array: ")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "CSR", (2, 3), {"rowPtr": [0, 1, 2], "colIdx": [0, 2], "data": [1.0, 2.0],
                        "numRows": np.arange(2)})) == (
        "CSR tensor: scalar field 'numRows' must be an integer, got an array of shape (2,) "
        "and dtype int64")


# --- conversions that would lose information -------------------------------------------
BIG = 2 ** 53 + 1
ROUNDED = (f"{BIG} (int64) is not exactly a float64, the type spf computes in (it would "
           f"become 9007199254740992.0); convert the values to float64 first to accept the "
           "rounding")


def test_int64_values_beyond_2_53_stay_exact_or_are_refused_where_converted():
    """int64 data keeps its type (numpy's promotion: int64 with int64 stays int64, with
    float64 rounds as numpy rounds); a value a kernel must convert to float64 (its declared
    type) is refused when float64 does not hold it."""
    assert spf.evaluate("v = a(i) * b(i)", a=np.array([BIG, 1]), b=np.array([1, 0])) == BIG
    m = sp.csr_matrix(np.array([[0, BIG], [3, 0]], dtype=np.int64))
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,j) * x(j)", A=m, x=np.ones(2)),
                                  m @ np.ones(2))
    spmv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile()      # float64
    assert raises(spf.ArgumentError, lambda: spmv(A=m, x=np.ones(2))) == (
        f"'A': a scipy.sparse csr_matrix (csr): data[0] = {ROUNDED}")
    assert raises(spf.ArgumentError, lambda: spmv(A=spf.Tensor.from_scipy("CSR", m),
                                                  x=np.ones(2))) == f"'A': data[0] = {ROUNDED}"
    assert raises(spf.ArgumentError, lambda: spmv(A=spf.Tensor.from_scipy("CSR", sp.eye(2)),
                                                  x=np.array([1, BIG]))) == (
        f"'x': data[1] = {ROUNDED}")
    t = spf.Tensor.from_arrays("SV", (3,), {"idx": [0, 2], "val": np.array([1, -BIG])})
    assert t.dtype == np.int64 and list(t.values) == [1, -BIG]
    u = spf.Tensor.from_coords("SV", (3,), ([0, 2],), np.array([1, BIG], dtype=np.uint64))
    assert u.dtype == np.uint64 and list(u.values) == [1, BIG]
    asked = spf.Tensor.from_dense("CSR", np.array([[BIG]]), dtype="float64")
    assert asked.values[0] == float(BIG)          # dtype= asks for the rounding
    dot = spf.Kernel("v = a(i) * b(i) * s", {}).compile()
    assert raises(spf.ArgumentError, lambda: dot(a=np.ones(2), b=np.ones(2), s=BIG)) == (
        f"'s' = {BIG} is not exactly a float64, the type spf computes in (it would become "
        "9007199254740992.0); pass float(s) to accept the rounding")
    assert raises(spf.ArgumentError, lambda: dot(a=np.ones(2), b=np.ones(2), s=10 ** 400)) \
        == f"'s' = {10 ** 400} is beyond the range of float64, the type spf computes in"


def test_exact_conversions_stay_silent():
    """Integers that float64 holds exactly (2**60 is one), bools, float32 and small ints."""
    ints = np.array([2 ** 60, -(2 ** 53), 3], dtype=np.int64)
    np.testing.assert_array_equal(
        spf.evaluate("v(i) = a(i) * b(i)", a=ints, b=np.ones(3, dtype=np.float32)),
        ints.astype(np.float64))
    np.testing.assert_array_equal(
        spf.evaluate("v(i) = a(i) * b(i)", a=np.array([True, False]),
                     b=np.array([3, 4], dtype=np.int8)), [3.0, 0.0])
    m = sp.csr_matrix(np.array([[0, 2 ** 60], [3, 0]], dtype=np.int64))
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,j) * x(j)", A=m, x=np.ones(2)),
                                  [2.0 ** 60, 3.0])


def test_extended_precision_values_are_refused():
    third = np.array([1, 1], dtype=np.longdouble) / 3
    if third[0] == np.float64(third[0]):
        pytest.skip("long double is float64 here")
    message = raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "SV", (3,), {"idx": [0, 2], "val": third}))
    assert message.startswith(f"SV tensor: val[0] = {third[0]} (float128) is not exactly a "
                              "float64")


def test_index_arrays_take_integers_that_fit():
    ell = {"colIdx": np.array([[0, 2 ** 40], [1, 2]]), "data": np.ones((2, 2))}
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays("ELL", (2, 3), ell)) == (
        "ELL tensor: colIdx[0][1] = 1099511627776 does not fit index_type='int32' (at most "
        "2147483647); use index_type='int64'")
    padded = {**ell, "colIdx": np.array([[0, -1], [1, 2]]).astype(np.uint64)}
    unsigned = ("colIdx[0][1] = 18446744073709551615 does not fit index_type='{}' (at most "
                "{}) (as a signed 64-bit integer it is -1: a negative value stored in an "
                "unsigned array? pass signed integers)")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays("ELL", (2, 3), padded)) \
        == "ELL tensor: " + unsigned.format("int32", 2 ** 31 - 1)
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "ELL", (2, 3), padded, index_type="int64")) \
        == "ELL tensor: " + unsigned.format("int64", 2 ** 63 - 1)
    csr = {"rowPtr": [0, 1, 2], "colIdx": [0.0, 1.5], "data": [1.0, 2.0]}
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays("CSR", (2, 3), csr)) == (
        "CSR tensor: index array 'colIdx' must hold integers, got dtype float64: colIdx[1] = "
        "1.5 is not an integer")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "CSR", (2, 3), {**csr, "colIdx": [0.0, 1.0]})) == (
        "CSR tensor: index array 'colIdx' must hold integers, got dtype float64; convert it "
        "with .astype(np.int64)")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_coords(
        "SV", (3,), ([0.5],), [1.0])) == (
        "SV tensor: coordinate array 0 must hold integers, got dtype float64: coords[0][0] = "
        "0.5 is not an integer")


def test_a_scipy_matrix_with_negative_unsigned_indices_is_refused_by_name():
    m = sp.csr_matrix(np.eye(3))
    bad = sp.csr_matrix((m.data, m.indices.astype(np.int64), m.indptr), shape=m.shape)
    bad.indices[1] = -1
    bad.indices = bad.indices.astype(np.uint64)
    spmv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile()
    assert raises(spf.ArgumentError, lambda: spmv(A=bad, x=np.ones(3))) == (
        "'A': CSR tensor: colIdx[1] = 18446744073709551615 does not fit index_type='int32' "
        "(at most 2147483647) (as a signed 64-bit integer it is -1: a negative value stored "
        "in an unsigned array? pass signed integers)")


# --- messages that name the field, the position and the value ---------------------------
def test_a_coordinate_outside_the_shape_names_the_entry():
    csr = {"rowPtr": [0, 1, 2, 2, 3, 6], "colIdx": [0, 1, 4, 0, 2, 7],
           "data": np.ones(6)}
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "CSR", (5, 5), csr, check=False)) == (
        "CSR tensor: colIdx[5] = 7 is outside 0..numCols - 1 = 0..4 (logical coordinate 1)")
    bcsr = {"rowPtr": [0, 1], "colIdx": [-1], "data": np.ones(4)}
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "BCSR", (2, 7), bcsr, params={"B": 2}, check=False)) == (
        "BCSR tensor: logical coordinate 1 = pl + colIdx[pj] = -1 at pi = 0, pj = 0, pk = 0, "
        "pl = 0 is outside 0..numCols - 1 = 0..6")


@pytest.mark.parametrize("name", spf.layout_names())
def test_the_generated_checks_compile_clean(name):
    """The read checks store the values their messages name; the C stays warning-free."""
    from spf.read_check import _checker
    lay = spf.load_layout(name, **PARAMS.get(name, {}))
    for part in lay.parts():
        assert_compiles_clean(_checker(part).source)


def test_property_violations_name_the_values():
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "SV_unsorted", (5,), {"idx": [4, 0, 4], "val": [1.0, 2.0, 3.0]})) == (
        "SV_unsorted tensor: 'idx' violates injective (a != a' -> (idx(a)) != (idx(a'))): "
        "position 2 repeats position 0 (idx[2] = 4)")
    assert raises(spf.ArgumentError, lambda: spf.Tensor.from_arrays(
        "COO", (3, 3), {"rowIdx": [1, 0, 1], "colIdx": [2, 0, 2], "data": [1.0] * 3})) == (
        "COO tensor: 'rowIdx' violates injective (a != a' -> (rowIdx(a), colIdx(a)) != "
        "(rowIdx(a'), colIdx(a'))): position 2 repeats position 0 (rowIdx[2] = 1, "
        "colIdx[2] = 2)")


# --- errors of the API ------------------------------------------------------------------
def test_output_arrays_say_what_they_got():
    spmv = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}).compile()
    a = spf.Tensor.from_scipy("CSR", sp.random(50, 4, density=0.3, random_state=0))
    x = np.ones(4)
    want = "output 'y' must be a writeable C-contiguous float64 array of shape (50,); got "
    read_only = np.zeros(50)
    read_only.flags.writeable = False
    for y, got in [(np.zeros(49), "an array of shape (49,)"),
                   (np.zeros(50, dtype=np.float32), "dtype float32"),
                   (np.zeros(100)[::2], "a strided view (not C-contiguous)"),
                   (read_only, "a read-only array"), ([0.0] * 50, "list")]:
        assert raises(spf.ArgumentError, lambda: spmv(A=a, x=x, y=y)) == want + got
    spmm = spf.Kernel("C(i,k) += A(i,j) * B(j,k)", {"A": "CSR"}).compile()
    assert raises(spf.ArgumentError, lambda: spmm(A=a, B=np.ones((4, 2)),
                                                  C=np.zeros((50, 2), order="F"))) == (
        "output 'C' must be a writeable C-contiguous float64 array of shape (50, 2); got a "
        "Fortran-ordered (not C-contiguous) array")


def test_accumulating_advice_names_the_argument_of_the_call():
    m = sp.random(5, 4, density=0.5, format="csr", random_state=0)
    assert raises(spf.ArgumentError, lambda: spf.evaluate(
        "y(i) += A(i,j) * x(j)", A=m, x=np.ones(4))) == (
        "'+=' accumulates into 'y': pass it as out=array")
    y = np.ones(5)
    np.testing.assert_allclose(spf.evaluate("y(i) += A(i,j) * x(j)", A=m, x=np.ones(4),
                                            out=y), 1 + m @ np.ones(4))
    spmv = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}).compile()
    assert raises(spf.ArgumentError, lambda: spmv(A=m, x=np.ones(4))) == (
        "'+=' accumulates into 'y': pass it as y=array")


def test_share_and_tile_on_a_union_layout_name_the_union():
    for option, out in (({"share": {"C": "A"}}, "HYB"), ({"tile": {"A.pi": 4}}, "CSR")):
        name = next(iter(option))
        assert raises(spf.SpecError, lambda: spf.Kernel(
            "C(i,j) = A(i,j) * B(i,j)", {"A": "HYB", "B": "DenseMatrix", "C": out},
            **option)) == (
            f"<string>: {name} is not supported for union layouts yet: 'A' (HYB) has 2 parts, "
            "each run as its own product statement")
    assert raises(spf.SpecError, lambda: spf.Kernel(
        "C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
        share={"C": "A"})) == "<string>: share is not supported for sums yet"


def test_drop_zeros_on_a_union_input_drops_each_parts_zeros():
    """A union's parts hold disjoint entries, so each part's statement drops its own zeros
    (a sum's terms could cancel, so a sum still refuses drop_zeros)."""
    m = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 3], [2, 3, 4]]))
    f = spf.Tensor.from_scipy("SymCSR", m).fields
    data = np.where(f["data"] == 3, 0.0, f["data"])     # explicit zeros in both parts' reads
    a = spf.Tensor.from_arrays("SymCSR", m.shape, {**f, "data": data})
    k = spf.Kernel("C(i,j) = A(i,j) * 2", {"A": "SymCSR", "C": "CSR"}, drop_zeros=True)
    c = k.compile()(A=a)
    want = 2 * np.where(m.toarray() == 3, 0, m.toarray())
    np.testing.assert_array_equal(c.to_dense(), want)
    assert c.stored_entries() == np.count_nonzero(want)
    assert raises(spf.SpecError, lambda: spf.Kernel(
        "C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
        drop_zeros=True)) == "<string>: drop_zeros is not supported for sums yet"


def test_a_misspelled_kernel_file_is_named_as_a_file(tmp_path):
    message = ("'spmv.tom' is neither tensor index notation (it has no '=') nor an existing "
               "kernel file (.toml)")
    assert raises(spf.SpecError, lambda: spf.Kernel("spmv.tom")) == f"<string>: {message}"
    proc = subprocess.run([sys.executable, "-m", "spf", "generate", "spmv.tom"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"spf: error: <string>: {message}"
    assert raises(spf.SpecError, lambda: spf.Kernel("kernels/spmv")) == (
        "<string>: 'kernels/spmv' is neither tensor index notation (it has no '=') nor an "
        "existing kernel file (.toml)")
    assert raises(spf.SpecError, lambda: spf.Kernel("y")) == (
        "<string>:1:2: expected '=' or '+=' after the output y, found end of input")


def test_a_synthesis_error_starts_with_what_to_do():
    message = raises(spf.SynthesisError, lambda: spf.Kernel(
        "v = a(i) * b(i)", {"a": "SV", "b": "SV_unsorted"}, find={"b": "binsearch"}))
    first, second = message.split("\n")
    assert first == (
        "find='binsearch' is not valid for the lookup of b (b_p in [0, b.len - 1] with "
        "b.idx(b_p) = i): the range is not sorted (increasing keys, decreasing keys); layout "
        "SV_unsorted declares no order property (monotonic, periodic_monotonic or "
        "covary_monotonic) for idx, which an ordered search needs")
    assert second.startswith("counterexample: increasing keys: ")
    assert second.count(" = ") <= 8 and len(message) < 600
    report = spf.Kernel("v = a(i) * b(i)", {"a": "SV", "b": "SV_unsorted"}).report()
    lines = report.splitlines()
    k = next(n for n, line in enumerate(lines) if line.startswith("  rejected binsearch: "))
    assert lines[k] == "  rejected binsearch: " + first.split("): ", 1)[1]
    assert lines[k + 1].startswith("    counterexample: increasing keys: ")


# --- SpecErrors of files name file:line:col ---------------------------------------------
KERNEL_FILES = [
    ('expr = "y(i) = A(i,j) * x(j)"\norder = 3\n',
     "2:9: order must be a list of loop variables such as ['A.pi', 'A.pj'] or a "
     "comma-separated string, got 3"),
    ('expr = "y(i) = A(i,j) * x(j)"\n  colour = 1\n',
     "2:3: unknown key 'colour'; a kernel file has expr, layouts, params and the options name, "
     "order, find, parallel, bounds, tile, share, drop_zeros, structure, reassociate, unroll, "
     "index_type, z3_timeout_ms, dtype, accumulate, semiring, mask, complement, fill_values"),
    ('layouts = {A = "CSR"}\n',
     "1:1: missing 'expr' (tensor index notation, e.g. \"y(i) = A(i,j) * x(j)\")"),
    ('expr = "y(i) = A(i,j) * x(j)"\nparallel = "yes"\n',
     "2:12: parallel must be True or False, got 'yes'"),
]


@pytest.mark.parametrize("text,message", KERNEL_FILES)
def test_kernel_file_errors_name_line_and_column(tmp_path, text, message):
    path = tmp_path / "k.toml"
    path.write_text(text)
    assert raises(spf.SpecError, lambda: spf.Kernel(str(path))) == f"{path}:{message}"


CSR_TEXT = LAYOUT_DIR / "CSR.toml"
LAYOUT_FILES = [
    (lambda t: t.split("[fields]")[0],
     "1:1: missing [fields] table (struct fields and their types)"),
    (lambda t: t.replace('name = "CSR"\n', ""), "1:1: missing required key 'name'"),
    (lambda t: t.replace('numCols = "int"', 'numCols = "float"'),
     "10:11: field 'numCols': type 'float' must be int, int32, int64 or double with optional "
     "[extent] suffixes"),
    (lambda t: t.replace('shape = ["numRows", "numCols"]', 'shape = "numRows"'),
     "5:9: 'shape' must be a list of strings (the logical extent of each dimension)"),
    (lambda t: t.replace('kind = "monotonic"', 'kind = "ascending"'),
     "16:8: property #1: kind must be one of ['range', 'injective', 'monotonic', "
     "'periodic_monotonic', 'covary_monotonic', 'unique', 'sorted', 'permutation', "
     "'linear'], got 'ascending'"),
    (lambda t: t.replace('order = "<="', 'order = "<="\n  extra = 1'),
     "19:3: property #1: unknown key(s) ['extra']; property keys are kind, uf, ufs, order, "
     "min, max, period, with, gap, along, window, holds, for"),
    (lambda t: t.replace('min = "0"\nmax = "numCols - 1"', 'min = "rowPtr(0)"'),
     "28:7: property #3 (range): min must be affine in scalar fields, parameters and layout "
     "indices, got 'rowPtr(0)'"),
    (lambda t: t.replace('packer = "CSR.py"', 'packer = "CSR.py"\ncolour = 1'),
     "7:1: unknown key 'colour'; expected one of ['dense_array', 'derived', 'description', "
     "'fields', 'fill', 'name', 'order', 'packer', 'params', 'properties', 'relation', 'shape', "
     "'value']"),
]


@pytest.mark.parametrize("edit,message", LAYOUT_FILES)
def test_layout_file_errors_name_line_and_column(tmp_path, edit, message):
    path = tmp_path / "CSR.toml"
    path.write_text(edit(CSR_TEXT.read_text()))
    (tmp_path / "CSR.py").write_text("")
    assert raises(spf.SpecError, lambda: spf.load_layout(str(path))) == f"{path}:{message}"


# --- fuzz: Tensor.from_arrays over every shipped layout ---------------------------------
PARAMS = {"BCSR": {"B": 2}}


def _dense(name: str, order: int) -> np.ndarray:
    """A small dense tensor the layout can store (with zeros, an empty row)."""
    rng = np.random.default_rng(0)
    if name == "CUDAmma16x16":      # at most one nonzero per aligned column pair of a row
        return np.diag(np.arange(16.0))
    if name == "LowerTri":
        return np.tril(np.arange(1.0, 17.0).reshape(4, 4))
    if name == "SymCSR":            # symmetric
        upper = np.triu(np.round(rng.random((5, 5)) * 3))
        return upper + np.triu(upper, 1).T
    shape = {1: (7,), 2: (4, 6), 3: (3, 2, 4), 4: (2, 3, 1, 4)}[order]
    values = np.round(rng.random(shape) * 4)
    values[values < 2] = 0
    values[0] = 0
    return values


@functools.cache
def valid(name: str) -> spf.Tensor:
    """A tensor in layout ``name`` whose fields the fuzz makes wrong."""
    lay = spf.load_layout(name, **PARAMS.get(name, {}))
    return spf.Tensor.from_dense(lay, _dense(name, lay.order), structure=lay.implicit is not None)


BAD_ARRAYS: list[Callable[[np.ndarray], Any]] = [
    lambda a: a + 0.5,                                  # floats with fractions
    lambda a: a.astype(np.float64),                     # integral floats
    lambda a: a.astype(np.complex128),
    lambda a: a.astype(object),
    lambda a: a.astype(str),
    lambda a: a.astype(bool),
    lambda a: a.astype(np.int64).astype(np.uint64),     # negatives wrap to huge
    lambda a: a.astype(np.int64) + 2 ** 53 + 1,         # inexact as float64
    lambda a: a.astype(np.int64) + 2 ** 40,             # beyond int32
    lambda a: np.full(a.shape, 2 ** 64 - 1, dtype=np.uint64),
    lambda a: -a - 1,                                   # negative
    lambda a: a[::-1].copy(),                           # unsorted
    lambda a: a.reshape(1, -1),                         # 2-D of another shape
    lambda a: a.reshape(-1, 1)[:, :0],                  # empty, 2-D
    lambda a: a[:0],                                    # empty
    lambda a: a[:-1] if a.size else a,                  # too short
    lambda a: np.concatenate([a.reshape(-1), a.reshape(-1)[:1]]),  # too long
    lambda a: np.asarray(a.reshape(-1)[0]) if a.size else a,       # 0-d
    lambda a: int(a.reshape(-1)[0]) if a.size else 0,   # a scalar for an array
    lambda a: [[1, 2], [3]],                            # ragged
    lambda a: None,
    lambda a: {"x": 1},
    lambda a: "colIdx",
    lambda a: a.T.copy() if a.ndim > 1 else a.astype(np.float32),
    lambda a: a.reshape(-1).astype(np.int64) * 3 + 1,   # out of range
]
BAD_SCALARS: list[Callable[[int], Any]] = [
    lambda v: -1, lambda v: v + 1, lambda v: v - 1, lambda v: 2 ** 40, lambda v: 2 ** 70,
    lambda v: float(v), lambda v: True, lambda v: np.int64(v), lambda v: np.uint64(v),
    lambda v: np.arange(3), lambda v: None, lambda v: "3", lambda v: 0, lambda v: v * 1000,
]
BAD_SHAPES: list[Callable[[tuple], Any]] = [
    lambda s: s[:-1], lambda s: (*s, 1), lambda s: tuple(n + 1 for n in s),
    lambda s: tuple(-n for n in s), lambda s: (2.5,) * len(s), lambda s: ("a",) * len(s),
    lambda s: None, lambda s: 3, lambda s: (2 ** 40,) * len(s), lambda s: (0,) * len(s),
]
ALLOWED = (spf.SpfError,)


def _mutate(data: st.DataObject, t: spf.Tensor) -> tuple[Any, dict[str, Any]]:
    """The tensor's shape and fields with one to three things made wrong."""
    shape: Any = t.shape
    fields: dict[str, Any] = dict(t.fields)
    scalars = sorted(t.layout.scalar_fields)
    arrays = sorted(set(t.layout.fields) - set(scalars))
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["array", "array", "entry", "scalar", "shape",
                                          "missing", "extra"]))
        if kind == "shape":
            shape = data.draw(st.sampled_from(BAD_SHAPES))(t.shape)
        elif kind == "missing":
            fields.pop(data.draw(st.sampled_from(sorted(t.layout.fields))), None)
        elif kind == "extra":
            fields["colour"] = data.draw(st.sampled_from([1, np.zeros(2)]))
        elif kind == "scalar" and scalars:
            name = data.draw(st.sampled_from(scalars))
            fields[name] = data.draw(st.sampled_from(BAD_SCALARS))(int(t.fields[name]))
        elif kind == "entry" and t.fields[arrays[0]].size:
            name = data.draw(st.sampled_from([f for f in arrays if t.fields[f].size]))
            arr = np.array(t.fields[name])
            k = data.draw(st.integers(0, arr.size - 1))
            arr.reshape(-1)[k] = data.draw(st.sampled_from(
                [-1, 2 ** 31 - 1, arr.size, arr.reshape(-1)[k] + 1, 10 ** 6]))
            fields[name] = arr
        else:
            name = data.draw(st.sampled_from(arrays))
            fields[name] = data.draw(st.sampled_from(BAD_ARRAYS))(np.array(t.fields[name]))
    return shape, fields


@pytest.mark.fuzz
@pytest.mark.parametrize("name", spf.layout_names())
@examples(50)
@given(data=st.data())
def test_from_arrays_raises_only_spf_errors(name, data):
    t = valid(name)
    shape, fields = _mutate(data, t)
    check = data.draw(st.booleans())
    index_type = data.draw(st.sampled_from([None, "int64"]))
    with contextlib.suppress(ALLOWED):      # anything else fails the test
        spf.Tensor.from_arrays(t.layout.name, shape, fields, params=PARAMS.get(name),
                               check=check, index_type=index_type)


@pytest.fixture(scope="module")
def spmv():
    return spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile()


@pytest.mark.fuzz
@examples(100)
@given(data=st.data())
def test_kernel_operands_raise_only_spf_errors(spmv, data):
    """A compiled SpMV, or ``spf.evaluate``, given scipy matrices and numpy vectors with
    wrong dtypes, shapes and values (built without scipy's own checks)."""
    m = sp.csr_matrix(_dense("CSR", 2))
    parts = {"data": m.data, "indices": m.indices, "indptr": m.indptr}
    part = data.draw(st.sampled_from([None, "data", "indices", "indptr"]))
    if part is not None:
        parts[part] = data.draw(st.sampled_from(BAD_ARRAYS))(parts[part])
    a: Any = sp.csr_matrix(m.shape)
    for key, value in parts.items():
        setattr(a, key, value)        # scipy checks nothing here; spf must
    if data.draw(st.booleans()):
        a = sp.csr_array(m)
        a.data = data.draw(st.sampled_from(BAD_ARRAYS))(a.data)
    x = np.ones(m.shape[1])
    if data.draw(st.booleans()):
        x = data.draw(st.sampled_from(BAD_ARRAYS))(x)
    try:
        if data.draw(st.booleans()):
            spmv(A=a, x=x)
        else:
            spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=x)
    except ALLOWED:
        pass
