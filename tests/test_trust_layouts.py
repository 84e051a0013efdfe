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

import re
import shutil
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
            "SymByIndex cannot hold these entries: its relation reads 4 entries back from "
            "what was written, the source has 4; (1, 0): value 3.0, read back 2.0 (entries "
            "read through two parts of the relation differ)")):
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
                    f"{name} cannot hold these entries: its relation reads 4 entries back from "
                    "what was written, the source has 4; (1, 0): value 2.0, read back 4.0")):
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
        with pytest.raises(spf.SpfError, match=re.escape("(1,) of the source (value 3.0) is "
                                                         "not read back")):
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
    assert "value data[pi][srt(pk)] is not subscripted by every layout index" in str(err.value)
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
