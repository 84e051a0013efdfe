"""Trust in the write paths (issue 52): a layout that cannot hold an entry refuses it on every
path, a union told apart by an index is written by its relation, a range never hides a
condition of the relation from the data check, a packer is read back through its relation,
a bitmap's markers are written, and mistakes in layout files are spf errors at the file's
line and column.  Every result is compared with numpy; every refusal's text is checked.

Layouts here are the shipped files with one change each (``_variant``), written next to
copies of the shipped packers.  ``test_mutated_layouts_are_right_or_refused`` is a small
harness over such changes: each path (``from_dense``, ``from_coords``, ``from_scipy``,
``convert``, a kernel's output) gives the right tensor or an spf error, never a raw Python
exception or a different tensor."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.errors import ArgumentError, SpecError
from spf.front.layout_file import blamed_on
from spf.front.layout_path import LAYOUT_DIR

SQUARE = np.array([[1.0, 2.0], [3.0, 4.0]])
SYMMETRIC = np.array([[1.0, 2.0], [2.0, 3.0]])
LOWER = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [5.0, 0.0, 6.0], [0.0, 7.0, 0.0]])


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> Path:
    """A directory of layout files, with the shipped packers beside them."""
    directory = tmp_path_factory.mktemp("trust_layouts")
    for packer in LAYOUT_DIR.glob("*.py"):
        shutil.copy(packer, directory)
    return directory


def _variant(directory: Path, base: str, name: str, *changes: tuple[str, str]) -> str:
    """The shipped layout ``base`` renamed ``name`` with each (old, new) text replaced."""
    text = (LAYOUT_DIR / f"{base}.toml").read_text()
    text = text.replace(f'name = "{base}"', f'name = "{name}"')
    for old, new in changes:
        assert old in text, (base, old)
        text = text.replace(old, new)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return str(path)


def _paths(layout: str, a: np.ndarray) -> dict[str, object]:
    """Every way of writing ``a`` into ``layout``, each a thunk."""
    nz = np.nonzero(a)
    return {
        "from_dense": lambda: spf.Tensor.from_dense(layout, a),
        "from_coords": lambda: spf.Tensor.from_coords(layout, a.shape, nz, a[nz]),
        "from_scipy": lambda: spf.Tensor.from_scipy(layout, sp.csr_matrix(a)),
        "convert": lambda: spf.Tensor.from_dense("CSR", a).convert(layout, allow_padding=True),
        "output": lambda: spf.evaluate("C(i,j) = A(i,j)", A=sp.csr_matrix(a),
                                       layouts={"C": layout}),
    }


# -- item 5: a layout that cannot hold an entry refuses it on every path ----------------------
@pytest.mark.slow
def test_an_entry_the_relation_excludes_is_refused_on_every_path(layouts):
    low = _variant(layouts, "CSR", "LowCSR", ("gj = colIdx(pj)}", "gj = colIdx(pj) and gj <= gi}"),
                   ('packer = "CSR.py"\n', ""))
    packed = _variant(layouts, "CSR", "LowCSRPacked",
                      ("gj = colIdx(pj)}", "gj = colIdx(pj) and gj <= gi}"))
    for layout, name in ((low, "LowCSR"), (packed, "LowCSRPacked")):
        for path, build in _paths(layout, SQUARE).items():
            with pytest.raises(ArgumentError) as err:
                build()
            assert str(err.value) == (f"entry (0, 1) cannot be stored in {name}: its relation "
                                      "requires gj <= gi"), path
        for a in (LOWER, np.zeros((3, 2)), np.array([[0.0, 0.0], [4.0, 0.0]])):
            for path, build in _paths(layout, a).items():
                t = build()
                np.testing.assert_array_equal(t.to_dense(), a, err_msg=path)
        x = np.arange(1.0, 4.0)
        t = spf.Tensor.from_dense(layout, LOWER)
        np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), LOWER @ x)


# -- item 6: a union told apart by an index ---------------------------------------------------
def _sym_by_index(layouts: Path, name: str, *changes: tuple[str, str]) -> str:
    """SymCSR whose parts are told apart by a layout index ``pa`` (0: stored, 1: mirrored)."""
    return _variant(layouts, "SymCSR", name,
                    ("{[pi, pk] -> [gi, gj] : (0 <= pi", "{[pa, pi, pk] -> [gi, gj] : (pa = 0 "
                     "and 0 <= pi"),
                    (" or (0 <= pi", " or (pa = 1 and 0 <= pi"), *changes)


def test_a_union_told_apart_by_an_index_is_written_by_its_relation(layouts):
    sym = _sym_by_index(layouts, "SymByIndex")
    band = np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 5.0], [0.0, 5.0, 7.0]])
    for a in (SYMMETRIC, band, np.zeros((3, 3)), np.array([[0.0, 0.0], [0.0, 4.0]])):
        for path, build in _paths(sym, a).items():
            t = build()
            np.testing.assert_array_equal(t.to_dense(), a, err_msg=path)
    t = spf.Tensor.from_dense(sym, band)
    assert list(t["colIdx"]) == [0, 1, 2, 2]            # the upper triangle only
    x = np.arange(1.0, 4.0)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), band @ x)
    with pytest.raises(ArgumentError, match=re.escape(
            "SymByIndex cannot hold these entries: (1, 0): value 3.0, read back 2.0 through "
            "part 2 of its relation (entries read through two parts of the relation differ)")):
        spf.Tensor.from_dense("CSR", SQUARE).convert(sym)


@pytest.mark.slow
def test_parts_that_read_an_entry_twice_are_refused_not_added(layouts):
    """Both parts read (1, 0): written into the first part and mirrored by the second, it
    would read 4.0 (the old writer checked the second part only where the first wrote)."""
    both = _sym_by_index(layouts, "SymTwice", (" and colIdx(pk) >= pi)", ")"),
                         ('min = "pi"', 'min = "0"'))
    plain = _variant(layouts, "SymCSR", "SymTwicePlain", (" and colIdx(pk) >= pi)", ")"),
                     ('min = "pi"', 'min = "0"'))       # no part index: was a StopIteration
    for layout, name in ((both, "SymTwice"), (plain, "SymTwicePlain")):
        for build in _paths(layout, SYMMETRIC).values():
            with pytest.raises(ArgumentError, match=re.escape(
                    f"{name} cannot hold these entries: (1, 0) would be read through parts 1 "
                    "and 2 of its relation (values 2.0 and 2.0, which a kernel would add)")):
                build()
        diagonal = np.diag([1.0, 0.0, 2.0])             # what both parts can hold
        for build in _paths(layout, diagonal).values():
            np.testing.assert_array_equal(build().to_dense(), diagonal)


# -- item 8: a range never hides a condition of the relation from the data check -------------
BYTEMAP = '''name = "ByteMap"
description = "Finch's SparseByteMap: a marker per slot, the sorted marked columns of each row."
relation = """{[pi, pk] -> [gi, gj] : 0 <= pi < numRows and ptr(pi) <= pk < ptr(pi + 1)
              and gi = pi and gj = srt(pk) and 1 <= tbl(pi, srt(pk))}"""
value = "data[pi][srt(pk)]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
ptr = "int[numRows + 1]"
srt = "int[ptr(numRows)]"
tbl = "int[numRows][numCols]"
data = "double[numRows][numCols]"

[[properties]]
kind = "monotonic"
uf = "ptr"
order = "<="

[[properties]]
kind = "range"
uf = "srt"
min = "0"
max = "numCols - 1"

[[properties]]
kind = "periodic_monotonic"
uf = "srt"
period = "pi"
order = "<"

[[properties]]
kind = "range"
uf = "tbl"
min = "1"
max = "1"
'''


def test_a_range_does_not_hide_a_condition_from_the_data_check(layouts):
    path = layouts / "ByteMap.toml"
    path.write_text(BYTEMAP)
    fields = {"ptr": [0, 1, 1], "srt": [1], "data": [[0.0, 5.0], [0.0, 0.0]]}
    with pytest.raises(ArgumentError) as err:       # a 0 marker at a slot the relation reads
        spf.Tensor.from_arrays(str(path), (2, 2), {**fields, "tbl": [[0, 0], [0, 0]]})
    assert str(err.value) == ("ByteMap tensor: 'tbl' violates range (1 <= tbl(a) <= 1) at the "
                              "read tbl[pi][srt[pk]] = tbl[0][1]: 0 < 1")
    t = spf.Tensor.from_arrays(str(path), (2, 2), {**fields, "tbl": [[1, 1], [1, 1]]})
    np.testing.assert_array_equal(t.to_dense(), [[0.0, 5.0], [0.0, 0.0]])
    for a in (LOWER, np.zeros((2, 3)), SQUARE):
        for how, build in _paths(str(path), a).items():
            out = build()
            np.testing.assert_array_equal(out.to_dense(), a, err_msg=how)
    t = spf.Tensor.from_dense(str(path), LOWER)
    assert t["srt"].tolist() == [0, 0, 2, 1]
    x = np.arange(1.0, 4.0)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), LOWER @ x)


# -- item 10: a packer is read back through its relation --------------------------------------
def test_a_packer_that_disagrees_with_its_relation_is_refused(layouts):
    """Rows stored bottom up by the relation, top down by the packer: neither assembled nor
    placed, so the packer stores it; before, the tensor came back upside down."""
    flipped = _variant(layouts, "CSR", "FlippedCSR", ("gi = pi and", "gi = numRows - 1 - pi and"))
    line = next(k for k, text in enumerate(Path(flipped).read_text().splitlines(), 1)
                if text.startswith("packer"))
    for how in ("from_dense", "from_coords", "from_scipy"):
        with pytest.raises(SpecError) as err:
            _paths(flipped, SQUARE)[how]()
        assert str(err.value) == (
            f"{flipped}:{line}:10: layout FlippedCSR: its packer CSR.py stores fields that its "
            "relation does not read back as the entries it was given (4 entries given, 4 read "
            "back; (0, 0): value 1.0, read back 3.0): the packer and the relation disagree"), how
    same = np.array([[1.0, 2.0], [1.0, 2.0]])           # the same both ways: they agree
    np.testing.assert_array_equal(spf.Tensor.from_dense(flipped, same).to_dense(), same)
    flipped_dense = _variant(layouts, "DenseMatrix", "FlippedDense",
                             ("g0 = p0 and", "g0 = n0 - 1 - p0 and"),
                             ('dense_array = "data"\n', ""))
    with pytest.raises(SpecError, match=re.escape(
            "layout FlippedDense: its packer dense.py stores fields that its relation does not "
            "read back as the entries it was given (entry (0, 0): value 1.0, read back 3.0)")):
        spf.Tensor.from_dense(flipped_dense, SQUARE)


def test_a_dense_array_must_be_the_relation(layouts):
    """``dense_array`` says the field is the tensor in row-major order: kernels write their
    dense outputs straight into it, so the relation must say the same (before, a dense
    output in a relation reading every row as row 0 came back wrong)."""
    swapped = _variant(layouts, "DenseMatrix", "SwappedDense",
                       ("g0 = p0 and g1 = p1", "g0 = p1 and g1 = p0"))
    at = next(k for k, text in enumerate(Path(swapped).read_text().splitlines(), 1)
              if text.startswith("dense_array"))
    with pytest.raises(SpecError) as err:
        spf.load_layout(swapped)
    assert str(err.value) == (
        f"{swapped}:{at}:15: dense_array 'data' says the field holds the whole tensor in "
        "row-major order, but the relation is not g_k = p_k over 0 <= p_k < shape_k with the "
        "value at data[p_0]...[p_n]")
    for n in (1, 2, 3, 5):
        assert spf.load_layout("DenseTensor", N=n).dense_array == "data"


def test_a_packer_that_raises_is_named(layouts):
    broken = _variant(layouts, "CSR", "PackerRaises",
                      ('packer = "CSR.py"', 'packer = "CSR.py:nope"'))
    with pytest.raises(SpecError, match=re.escape(
            "layout PackerRaises: its packer CSR.py failed in nope: AttributeError")):
        spf.Tensor.from_coords(broken, (2, 2), ([0], [1]), [1.0])


# -- item 16: a bitmap's markers are written ---------------------------------------------------
BITMAP = '''name = "Bitmap"
description = "Finch's SparseBitmap: dense rows and columns, a marker per slot."
relation = """{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and 0 <= pj < numCols
              and 1 <= tbl(pi, pj) and gi = pi and gj = pj}"""
value = "data[pi][pj]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
tbl = "int[numRows][numCols]"
data = "double[numRows][numCols]"

[[properties]]
kind = "range"
uf = "tbl"
min = "0"
max = "1"
'''


def test_a_bitmaps_markers_are_written(layouts):
    path = layouts / "Bitmap.toml"
    path.write_text(BITMAP)
    for a in (LOWER, np.zeros((2, 3)), np.zeros((0, 4)), np.array([[0.0, 0.0], [0.0, -1.5]])):
        for how, build in _paths(str(path), a).items():
            t = build()
            np.testing.assert_array_equal(t.to_dense(), a, err_msg=how)
            np.testing.assert_array_equal(np.ravel(t["tbl"]), np.ravel(a != 0), err_msg=how)
    report = spf.Conversion("CSR", str(path)).report().splitlines()[-1]
    assert report.endswith("tbl(pi, pj) = 1 at each entry, 0 elsewhere (it marks the entries)")
    t = spf.Tensor.from_dense(str(path), LOWER)
    x = np.arange(1.0, 4.0)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), LOWER @ x)


# -- items 18, 19: mistakes in layout files are spf errors at the file ------------------------
def test_layout_mistakes_are_spf_errors_at_the_file(layouts):
    sell = _variant(layouts, "SELL", "ShortPtr", ('slicePtr = "int[numSlices + 1]"',
                                                  'slicePtr = "int[numSlices * 1]"'))
    lines = Path(sell).read_text().splitlines()
    at = next(k for k, text in enumerate(lines, 1) if text.startswith("slicePtr"))
    with pytest.raises(SpecError) as err:
        spf.Tensor.from_dense("CSR", LOWER).convert(sell, allow_padding=True)
    assert str(err.value) == (f"{sell}:{at}:12: layout ShortPtr: slicePtr = prefix_sum(4 * "
                              "sliceWidth) has 2 entries here, but its declared extents give "
                              "it 1")
    late = _variant(layouts, "CSR4", "LateExtent", ('rowEnd = "int[numRows]"',
                                                    'rowEnd = "int[slots]"'))
    at = next(k for k, text in enumerate(Path(late).read_text().splitlines(), 1)
              if text.startswith("rowEnd"))
    with pytest.raises(SpecError) as err:
        spf.Tensor.from_dense(late, LOWER)
    assert str(err.value) == (f"{late}:{at}:10: layout LateExtent: the extent of rowEnd cannot "
                              "be computed when it is written (slots is not known yet)")
    pointers = _variant(layouts, "HiCOO", "ShortBPtr", ('bPtr = "int[numBlocks + 1]"',
                                                        'bPtr = "int[numBlocks + numBlocks]"'))
    at = next(k for k, text in enumerate(Path(pointers).read_text().splitlines(), 1)
              if text.startswith("bPtr"))
    with pytest.raises(SpecError) as err:       # no entries: no blocks, and no pointer
        spf.Tensor.from_dense("COO3", np.zeros((2, 2, 2))).convert(pointers)
    assert str(err.value) == (f"{pointers}:{at}:8: layout ShortBPtr: the pointer array bPtr "
                              "has no entries here (its declared extents give 0); it holds one "
                              "more entry than the groups it bounds")
    at_len = _variant(layouts, "SV", "AtLen", ("0 <= p < len and i = idx(p)",
                                               "0 <= p < len = i = idx(p)"))
    vector = np.array([0.0, 3.0, 0.0, 5.0])
    for build in (lambda: spf.Tensor.from_dense(at_len, vector),        # was a KeyError
                  lambda: spf.Tensor.from_dense("SV", vector).convert(at_len)):
        with pytest.raises(spf.SpfError, match=re.escape("(1,) of the source (value 3.0) is not "
                                                         "read back") + "|" + re.escape(
                "entry (1,) cannot be stored in AtLen: its relation requires i = len")):
            build()
    fixed = _variant(layouts, "CSR_unsorted", "FixedCols", ('shape = ["numRows", "numCols"]',
                                                           'shape = ["numRows", "0"]'))
    for how in ("from_dense", "from_coords", "from_scipy"):   # the packer is not reached
        with pytest.raises(ArgumentError, match=re.escape(
                "layout FixedCols stores tensors of shape (numRows, 0); got shape (4, 3)")):
            _paths(fixed, LOWER)[how]()
    with pytest.raises(SpecError, match=re.escape("cannot convert into layout FixedCols")):
        _paths(fixed, LOWER)["convert"]()
    nested = _variant(layouts, "CSC", "OutsideIn", ("0 <= pj < numCols", "0 <= pj < pi"))
    rel = next(k for k, text in enumerate(Path(nested).read_text().splitlines(), 1)
               if text.startswith("relation"))
    for how in ("from_dense", "from_coords", "from_scipy"):     # the read check's own kernel
        with pytest.raises(SpecError) as err:
            _paths(nested, SQUARE)[how]()
        assert str(err.value) == (f"{nested}:{rel}:12: layout OutsideIn: loop order: pj cannot "
                                  "run outside pi: its upper bound depends on pi; place pi "
                                  "before pj"), how
    csr = spf.load_layout("CSR")
    with pytest.raises(SpecError) as err, blamed_on(spf.load_layout(nested), "B", {"A": csr}):
        raise SpecError("loop over A.pi is unbounded: B.p0 = A_pj")
    assert str(err.value) == (f"{nested}:{rel}:12: layout OutsideIn: loop over CSR.pi is "
                              "unbounded: p0 = CSR.pj")
    unwritable = _variant(layouts, "SELL", "SELLConstCols", ('shape = ["numRows", "numCols"]',
                                                            'shape = ["numRows", "C"]'))
    with pytest.raises(SpecError) as err:
        spf.evaluate("C(i,j) = A(i,j)", A=sp.csr_matrix(LOWER), layouts={"C": unwritable})
    assert str(err.value).startswith(f"{unwritable}:"), str(err.value)
    assert "output 'C': layout SELLConstCols cannot be assembled" in str(err.value)


def test_refusals_print_no_internal_reprs(layouts):
    path = layouts / "ByteMapTwo.toml"
    path.write_text(BYTEMAP.replace('name = "ByteMap"', 'name = "ByteMapTwo"').replace(
        "1 <= tbl(pi, srt(pk))", "1 <= tbl(pi, srt(pk)) + tbl(pi, 0)"))
    with pytest.raises(SpecError) as err:
        spf.Conversion("CSR", str(path))
    assert "the array tbl is given neither by an equality of the relation" in str(err.value)
    assert "ArrayRef" not in str(err.value)


# -- a harness over mutated layout files -------------------------------------------------------
MUTATIONS = [
    ("ELL", ("gj = colIdx(pi, pk)}", "gj = colIdx(pi, pk) and gi <= gj}")),
    ("DIA", ("0 <= gj < numCols", "pi <= gj < numCols")),
    ("DIA", ("0 <= pi < numRows", "0 <= numCols < numRows")),
    ("CSR_unsorted", ('max = "numCols - 1"', 'max = "pj - 1"')),
    ("CSR4", ('min = "0"', 'min = "pi"')),
    ("BlockedELL", ("data[bi][bk][ri][rj]", "data[bi][bk][bk][rj]")),
    ("LowerTri", ("gi = pi and gj = pj", "gi = gj and gj = pj")),
    ("DCSR", ("gj = colIdx(pj)}", "gj = colIdx(pj) and gj <= gi}")),
    ("DenseMatrix", ("g0 = p0 and", "g0 = 0 and")),
    ("ELL", ('data = "double[numRows][width]"', 'data = "double[numRows][numRows]"')),
    ("DIA", ('shape = ["numRows", "numCols"]', 'shape = ["numDiags", "numCols"]')),
    ("CSB", ('blkStart = "int[numBlockRows][numBlockCols]"',
             'blkStart = "int[numBlockRows][numRows]"')),
    ("CSR", ('shape = ["numRows", "numCols"]', 'shape = ["numRows", "numRows"]')),
]
MATRICES = [LOWER, np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 3.0], [0.0, 3.0, 4.0]]),
            np.array([[0.0, 0.0, 0.0], [0.0, 7.0, 0.0], [0.0, 0.0, 0.0]])]


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(MUTATIONS)))
def test_mutated_layouts_are_right_or_refused(layouts, k):
    """Each mutation once gave a different tensor on some path (wrong values, lost or added
    entries); every path now gives ``a`` or an spf error, a SpecError at the file."""
    base, change = MUTATIONS[k]
    layout = _variant(layouts, base, f"Mutated{k}", change)
    for a in MATRICES:
        for how, build in _paths(layout, a).items():
            try:
                t = build()
            except SpecError as err:
                assert str(err).startswith(layout), (how, str(err))
                continue
            except spf.SpfError:
                continue
            dense = t.to_dense() if isinstance(t, spf.Tensor) else np.asarray(t)
            np.testing.assert_array_equal(dense, a, err_msg=f"{base} {how}")


# -- round 2: what the adversarial suite found in the write paths -----------------------------
def _line_of(path: str, start: str) -> int:
    return next(k for k, text in enumerate(Path(path).read_text().splitlines(), 1)
                if text.startswith(start))


def test_a_layout_named_like_a_shipped_one_has_its_own_struct(layouts):
    """A copy of DenseMatrix.toml keeping its name, its fields reordered (n0, data, n1): the
    C of a kernel reading it beside the shipped DenseMatrix (``to_dense``'s output) declared
    one struct for both, so the copy's fields were read at the shipped one's offsets and
    ``to_dense`` gave zeros."""
    path = layouts / "ReorderedDense.toml"
    path.write_text((LAYOUT_DIR / "DenseMatrix.toml").read_text().replace(
        'n1 = "int"\ndata = "double[n0][n1]"', 'data = "double[n0][n1]"\nn1 = "int"'))
    m = np.arange(1.0, 7.0).reshape(2, 3)
    for how, build in _paths(str(path), m).items():
        t = build()
        dense = t.to_dense() if isinstance(t, spf.Tensor) else t    # a dense output: an array
        np.testing.assert_array_equal(dense, m, err_msg=how)
    t = spf.Tensor.from_dense(str(path), m)
    assert list(t.fields) == ["n0", "data", "n1"]
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=np.ones(3)),
                               m.sum(axis=1))
    for empty in (np.zeros((0, 3)), np.zeros((2, 0))):
        np.testing.assert_array_equal(spf.Tensor.from_dense(str(path), empty).to_dense(), empty)


def test_a_coordinate_defined_twice_is_refused_or_right(layouts):
    """SV_unsorted with ``and p = i`` added: coordinate i is both p and idx(p).  The storage
    analysis sorted ``(0, None)`` against ``(0, 'idx')`` (a raw TypeError); now every way of
    writing it gives the vector or an spf error naming the layout."""
    sv = _variant(layouts, "SV_unsorted", "SVAtP", ("i = idx(p)}", "i = idx(p) and p = i}"))
    full = np.array([1.0, 2.0, 3.0])
    for how in ("from_dense", "from_coords"):
        build = {"from_dense": lambda: spf.Tensor.from_dense(sv, full),
                 "from_coords": lambda: spf.Tensor.from_coords(sv, (3,), ([0, 1, 2],), full)}
        np.testing.assert_array_equal(build[how]().to_dense(), full, err_msg=how)
    gap = np.array([0.0, 2.0, 0.0])
    for build in (lambda: spf.Tensor.from_dense(sv, gap),      # written, as a conversion
                  lambda: spf.Tensor.from_dense("SV", gap).convert(sv)):
        with pytest.raises(ArgumentError) as err:   # slot 0 unwritten: idx 0 there twice
            build()
        assert str(err.value) == (
            "SVAtP cannot hold these entries: the fields its relation gives them fail its own "
            "checks (SVAtP tensor: 'idx' violates injective (a != a' -> (idx(a)) != "
            "(idx(a'))): position 2 repeats position 0 (idx[2] = 0))")


def test_a_property_order_that_is_not_a_string_is_a_spec_error(layouts):
    path = layouts / "SortedList.toml"
    path.write_text((LAYOUT_DIR / "ELLPACK_R.toml").read_text().replace(
        'name = "ELLPACK_R"', 'name = "SortedList"')
        + '\n[[properties]]\nkind = "sorted"\nuf = "colIdx"\norder = []\nalong = 1\n')
    lines = path.read_text().splitlines()
    at = max(k for k, text in enumerate(lines, 1) if text.startswith("order"))
    count = sum(text == "[[properties]]" for text in lines)
    with pytest.raises(SpecError) as err:           # was a TypeError: unhashable list
        spf.load_layout(str(path))
    assert str(err.value) == (f"{path}:{at}:9: property #{count} (sorted): order must be one "
                              "of ['<', '<=', '>', '>='], got []")


CSF_MIXED = ("ptr2(p1) <= p2 < ptr2(p1 + 1)", "idx2(p1) <= p2 < ptr2(p1 + 1)")


def test_a_periodic_array_read_twice_is_checked_at_every_read(layouts):
    """CSF whose p2 starts at idx2(p1): idx2 is read at p1 and at p2.  The data check tested
    the order of one read, chosen by set order (so by the hash seed): the packer's fields
    passed with some seeds and a conversion's counting and writing passes then disagreed
    (a raw RuntimeError "'B' outgrew the arrays sized by spf_convert_bound")."""
    mixed = _variant(layouts, "CSF", "CSFMixed", CSF_MIXED)
    a = np.array([[[-3.0, -1.0, -3.0, 3.0]], [[0.0, 0.0, 2.0, 0.0]], [[0.0, 2.0, 0.0, 0.0]],
                  [[3.0, -3.0, 0.0, 4.0]]])
    with pytest.raises(SpecError) as err:
        spf.Tensor.from_dense(mixed, a)
    assert str(err.value) == (
        f"{mixed}:{_line_of(mixed, 'packer')}:10: layout CSFMixed: its packer CSF.py stores "
        "fields that fail the layout's own checks (CSFMixed tensor: 'idx2' violates "
        "periodic_monotonic (p1 = p1' and a < a' -> idx2(a) < idx2(a'), period p1) at "
        "position 4: idx2[4] = 2 is out of order): the packer and the layout file disagree")
    fields = dict(spf.Tensor.from_dense("CSF", a).fields)
    with pytest.raises(ArgumentError, match=re.escape("idx2[4] = 2 is out of order")):
        spf.Tensor.from_arrays(mixed, a.shape, fields)
    one = np.zeros((2, 2, 2))
    one[1, 0, 0] = 5.0                              # what both readings agree on
    np.testing.assert_array_equal(spf.Tensor.from_dense(mixed, one).to_dense(), one)


@pytest.mark.slow
def test_the_check_of_a_periodic_array_read_twice_does_not_depend_on_the_hash_seed(layouts):
    mixed = _variant(layouts, "CSF", "CSFSeeded", CSF_MIXED)
    script = ("import numpy as np, spf\n"
              "a = np.array([[[-3.0, -1, -3, 3]], [[0.0, 0, 2, 0]], [[0.0, 2, 0, 0]], "
              "[[3.0, -3, 0, 4]]])\n"
              "f = dict(spf.Tensor.from_dense('CSF', a).fields)\n"
              "try:\n"
              f"    spf.Tensor.from_arrays({mixed!r}, a.shape, f)\n"
              "except spf.ArgumentError as e:\n"
              "    print(e)\n")
    for seed in ("0", "2", "5"):                    # 2 and 5 passed the fields before
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=300)
        assert "idx2[4] = 2 is out of order" in out.stdout, (seed, out.stdout, out.stderr)


def test_writer_refusals_name_the_layout(layouts):
    transposed = _variant(layouts, "CSR", "TransposedCSR",
                          ("gi = pi and gj = colIdx(pj)", "gj = pi and gi = colIdx(pj)"))
    a = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 4.0]])
    with pytest.raises(ArgumentError) as err:
        spf.Tensor.from_dense("CSR", a).convert(transposed)
    assert str(err.value) == ("entry (1, 2) cannot be stored in TransposedCSR: its relation "
                              "requires pi < numRows")
    with pytest.raises(ArgumentError) as err:       # written by the relation, not the packer
        spf.Tensor.from_dense(transposed, a.T.copy())
    assert str(err.value) == (
        "TransposedCSR cannot hold these entries: the fields its relation gives them fail its "
        "own checks (TransposedCSR tensor: 'colIdx' violates range (0 <= colIdx(a) <= numCols "
        "- 1) at the read colIdx[pj] = colIdx[3]: 2 > 1)")
    square = np.array([[1.0, 2.0], [0.0, 3.0]])
    t = spf.Tensor.from_dense("CSR", square).convert(transposed)
    np.testing.assert_array_equal(t.to_dense(), square)


@pytest.mark.slow
def test_bool_entries_stored_twice_are_refused(layouts):
    """A bool tensor whose fields store one coordinate twice: to_dense reads True there
    (True + True is True), a kernel counted the entry twice.  Now refused, on every layout
    that can store a coordinate twice; scipy's non-canonical bool matrices likewise."""
    fields = {"numRows": 2, "numCols": 2, "numBlockRows": 1, "numBlockCols": 1, "nnz": 2,
              "blkStart": [[0]], "blkEnd": [[2]], "lowRow": [0, 0], "lowCol": [1, 1],
              "data": np.array([True, True])}
    with pytest.raises(ArgumentError) as err:
        spf.Tensor.from_arrays("CSB", (2, 2), fields, params={"B": 2}, dtype="bool")
    assert str(err.value) == (
        "CSB tensor: a bool tensor cannot store a coordinate twice (kernels would count both "
        "entries, where the sum of True and True is True): its 2 stored entries have 1 "
        "distinct coordinates (an entry is stored twice)")
    w = np.array([1.0, 2.0])
    twice = sp.csr_matrix((np.array([True, True]), np.array([1, 1]), np.array([0, 2, 2])),
                          shape=(2, 2))
    with pytest.raises(ArgumentError, match="a bool tensor cannot store a coordinate twice"):
        spf.evaluate("y(i) = A(i,j) * w(j)", A=twice, w=w)
    twice.sum_duplicates()
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,j) * w(j)", A=twice, w=w), [2.0, 0.0])
    once = {**fields, "lowCol": [0, 1]}
    t = spf.Tensor.from_arrays("CSB", (2, 2), once, params={"B": 2}, dtype="bool")
    np.testing.assert_array_equal(t.to_dense(), [[True, True], [False, False]])
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,j) * w(j)", A=t, w=w), [3.0, 0.0])
    pattern = np.array([[True, False, False], [False, True, True], [False, False, False]])
    for layout in ("COO", "CSR_unsorted", "DenseMatrix", "ELL", "DIA"):
        t = spf.Tensor.from_dense(layout, pattern)
        np.testing.assert_array_equal(t.to_dense(), pattern, err_msg=layout)
    empty = spf.Tensor.from_dense("COO", np.zeros((0, 2), bool))
    assert empty.to_dense().shape == (0, 2)


def test_an_index_giving_two_coordinates_is_not_placed_by_one(layouts):
    """CSR with ``gj = pi and gi = pi``: placement took pi from one equality and counted the
    other as established, so from_dense and convert stored the whole matrix in fields that
    the relation reads as its diagonal (what to_dense, kernels and the oracle read)."""
    diagonal = _variant(layouts, "CSR", "DiagonalCSR", ("gi = pi and gj = colIdx(pj)",
                                                        "gj = pi and gi = pi and gj = colIdx(pj)"))
    a = np.array([[0.0, -2.0, 0.0, 0.0], [0.0, -1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    for how, build in _paths(diagonal, a).items():
        try:
            t = build()
        except spf.SpfError as err:
            assert "DiagonalCSR" in str(err), (how, str(err))
            continue
        dense = t.to_dense() if isinstance(t, spf.Tensor) else t
        np.testing.assert_array_equal(dense, a, err_msg=how)
    d = np.diag([1.0, 0.0, 3.0])
    for how, build in _paths(diagonal, d).items():
        t = build()
        dense = t.to_dense() if isinstance(t, spf.Tensor) else t
        np.testing.assert_array_equal(dense, d, err_msg=how)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=spf.Tensor.from_dense(
        diagonal, d), x=np.arange(1.0, 4.0)), d @ np.arange(1.0, 4.0))


def test_a_shape_extent_that_no_shape_gives_is_a_spec_error(layouts):
    negated = _variant(layouts, "DIA", "NegatedDIA", ('shape = ["numRows", "numCols"]',
                                                      'shape = ["-numRows", "numCols"]'))
    at = _line_of(negated, "shape")
    for build in (lambda: spf.Tensor.from_dense(negated, np.zeros((4, 1))),   # a KeyError
                  lambda: spf.Tensor.from_coords(negated, (2, 2), ([0], [0]), [1.0]),
                  lambda: spf.Tensor.from_dense("CSR", np.eye(2)).convert(negated)):
        with pytest.raises(SpecError) as err:
            build()
        assert str(err.value) == (f"{negated}:{at}:9: layout NegatedDIA: a tensor's shape "
                                  "does not give numRows, which its shape (-numRows, numCols) "
                                  "reads (each extent is a scalar field or a constant)")


def test_a_padding_slot_the_relation_places_outside_the_shape_is_refused(layouts):
    """DIA without ``0 <= gj < numCols``: the padding slot of diagonal -1 in row 0 is an entry
    at (0, -1) by the relation; every writer stored it, so the tensor's own fields failed its
    check (from_arrays refused them) while to_dense and kernels skipped it."""
    unbounded = _variant(layouts, "DIA", "UnboundedDIA",
                         (" and 0 <= gj < numCols}", "}"))
    lower = np.array([[0.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])
    outside = "logical coordinate 1 = pi + offset[pd] = -1 at pd = 0, pi = 0 is outside " \
        "0..numCols - 1 = 0..1"
    for path in _paths(unbounded, lower).values():
        with pytest.raises((ArgumentError, SpecError), match=re.escape(outside)):
            path()
    main = np.array([[1.0, 0.0], [0.0, 2.0]])      # no padding slot: stored as given
    np.testing.assert_array_equal(spf.Tensor.from_dense(unbounded, main).to_dense(), main)
