"""Writing into layouts that are not stored level by level, as their relations solve for each
entry's position (spf.front.writing, spf.runtime.writer): conversions into them, tensors
built in them, kernel outputs in them, checked against scipy and numpy."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import covering, lanes

import spf
from spf.errors import ArgumentError, SpecError
from spf.front.layout_path import load_layout
from spf.front.writing import Start, write_plan

NEW_2D = ["ELLPACK_R", "CSR4", "BlockedELL", "CSB", "SymCSR", "SELL_sigma"]


def _matrix(kind: str, shape: tuple[int, int], symmetric: bool, seed: int = 0) -> sp.csr_matrix:
    """Random test matrices: empty rows, one nonzero, the empty matrix, dense rows."""
    rng = np.random.default_rng(seed)
    if kind == "empty":
        m = sp.csr_matrix(shape)
    elif kind == "one":
        m = sp.csr_matrix(([2.5], ([shape[0] - 1], [0])), shape=shape)
    else:
        d = rng.random(shape) * (rng.random(shape) < 0.3)
        d[min(1, shape[0] - 1)] = 0.0                  # an empty row
        m = sp.csr_matrix(d)
    if symmetric:
        m = sp.csr_matrix(m + m.T)
    return m


SHAPES = [(13, 11), (8, 8), (1, 9), (17, 4)]
KINDS = ["random", "empty", "one"]
CASES = [(lay, kind, shape) for lay in NEW_2D for kind in KINDS for shape in SHAPES]
FAST = covering(NEW_2D, KINDS, SHAPES)


@pytest.mark.parametrize("layout,kind,shape", lanes(CASES, FAST))
def test_conversion_into_new_layouts_matches_scipy(layout, kind, shape):
    symmetric = layout == "SymCSR"
    if symmetric:
        shape = (shape[0], shape[0])
    m = _matrix(kind, shape, symmetric)
    for src in ("CSR", "COO"):          # COO: unsorted entries (from_scipy keeps its order)
        coo = m.tocoo()
        perm = np.random.default_rng(1).permutation(coo.nnz)
        unsorted = sp.coo_matrix((coo.data[perm], (coo.row[perm], coo.col[perm])), shape)
        t = spf.Tensor.from_scipy(src, unsorted if src == "COO" else m)
        out = t.convert(layout, allow_padding=True)
        assert out.layout.name == layout
        np.testing.assert_array_equal(out.to_dense(), m.toarray())
        back = out.convert("CSR")
        np.testing.assert_array_equal(back.to_dense(), m.toarray())


@pytest.mark.parametrize("layout", NEW_2D)
def test_kernels_read_the_new_layouts(layout):
    m = _matrix("random", (12, 12), layout == "SymCSR", seed=3)
    t = spf.Tensor.from_scipy(layout, m)
    x = np.arange(12, dtype=float)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), m @ x)
    X = np.random.default_rng(0).random((12, 3))
    np.testing.assert_allclose(spf.evaluate("Y(i,k) = A(i,j) * X(j,k)", A=t, X=X), m @ X)


@pytest.mark.parametrize("layout", ["ELLPACK_R", "CSR4", "BlockedELL", "CSB", "ELL", "DIA",
                                    "HYB"])
def test_spgemm_output_in_a_written_layout(layout):
    a = _matrix("random", (14, 9), False, seed=4)
    b = _matrix("random", (9, 10), False, seed=5)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": layout})
    assert k.written is not None and k.written.name == layout
    assert "written into" in k.c_source().split("*/")[0]
    c = k.compile()(A=spf.Tensor.from_scipy("CSR", a), B=spf.Tensor.from_scipy("CSR", b))
    assert c.layout.name == layout
    np.testing.assert_allclose(c.to_dense(), (a @ b).toarray())


def test_symmetric_output_and_refusal_of_an_unsymmetric_result():
    s = _matrix("random", (10, 10), True, seed=6)
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "SymCSR"})
    fn = k.compile()
    c = fn(A=spf.Tensor.from_scipy("CSR", s), B=spf.Tensor.from_scipy("CSR", 2 * s))
    np.testing.assert_allclose(c.to_dense(), 3 * s.toarray())
    u = sp.csr_matrix(np.triu(s.toarray(), 1))        # no mirror: not symmetric
    with pytest.raises(ArgumentError, match=r"SymCSR cannot hold these entries.*would be "
                                            r"read back through part 2 of its relation, but "
                                            r"the source has no entry there"):
        fn(A=spf.Tensor.from_scipy("CSR", u), B=spf.Tensor.from_scipy("CSR", u))
    d = s.toarray()
    d[2, 5] += 1.0                                    # mirrored values differ
    with pytest.raises(ArgumentError, match=r"\(5, 2\): value .* read back .* through two "
                                            "parts of the relation differ"):
        spf.Tensor.from_dense("CSR", d).convert("SymCSR")


def test_hicoo_order_3_against_numpy():
    rng = np.random.default_rng(7)
    d = rng.random((9, 6, 11)) * (rng.random((9, 6, 11)) < 0.2)
    t = spf.Tensor.from_dense("COO3", d).convert("HiCOO")
    np.testing.assert_array_equal(t.to_dense(), d)
    assert t["numBlocks"] == len({(i // 4, j // 4, k // 4) for i, j, k in zip(*np.nonzero(d))})
    v = rng.random(11)
    np.testing.assert_allclose(spf.evaluate("y(i,j) = T(i,j,k) * v(k)", T=t, v=v),
                               np.einsum("ijk,k->ij", d, v))
    two = spf.Tensor.from_dense("COO3", d).convert("HiCOO", B=2)
    np.testing.assert_array_equal(two.to_dense(), d)
    empty = spf.Tensor.from_dense("COO3", np.zeros((3, 0, 2))).convert("HiCOO")
    assert empty["numBlocks"] == 0 and empty.to_dense().shape == (3, 0, 2)


def test_write_plans_name_each_decision():
    plan = write_plan(load_layout("CSB"))
    assert [p.start for p in plan.first.positions] == [Start.RANGE]
    text = spf.Conversion("CSR", "CSB").report()
    assert "written into CSB" in text and "lowRow(k) = i - 4*floor((i)/4)" in text
    assert "numBlockRows = the extent of its coordinate" in text
    ell_r = write_plan(load_layout("ELLPACK_R"))
    (pk,) = ell_r.first.positions
    assert pk.start is Start.RANK and pk.tight and pk.also == ("width",)
    assert write_plan(load_layout("BlockedELL")).first.fills == (("blockCol", -1),)


def test_entries_a_layout_cannot_hold_are_refused_by_name():
    d = np.zeros((16, 16))
    d[4, 0] = d[4, 1] = 1.0                 # one value per aligned pair of columns
    with pytest.raises(ArgumentError, match=r"cannot hold both entries \(4, 0\) and \(4, 1\)"):
        spf.Tensor.from_dense("CSR", d).convert("CUDAmma16x16", allow_padding=True)


def test_a_users_layout_outside_the_package(tmp_path, monkeypatch):
    """The concepts work on a layout file the user writes: aligned tiles, start/end arrays
    over a block grid, a row-length bound, a union part left empty."""
    text = """name = "MyTiles"
relation = "RELATION"
value = "v[k]"
shape = ["nr", "nc"]

[params]
T = 3

[fields]
nr = "int"
nc = "int"
nbr = "int"
n = "int"
tStart = "int[nbr]"
tEnd = "int[nbr]"
off = "int[n]"
col = "int[n]"
v = "double[n]"
"""
    relation = ("{[bi, k] -> [gi, gj] : 0 <= bi < nbr and tStart(bi) <= k < tEnd(bi) and "
                "0 <= off(k) < T and gi = T*bi + off(k) and gj = col(k)}")
    path = tmp_path / "MyTiles.toml"
    path.write_text(text.replace("RELATION", relation))
    m = _matrix("random", (10, 7), False, seed=8)
    t = spf.Tensor.from_scipy("CSR", m).convert(str(path))
    np.testing.assert_array_equal(t.to_dense(), m.toarray())
    assert t["nbr"] == 4 and list(t["tEnd"] - t["tStart"]) == [
        m[3 * b:3 * b + 3].nnz for b in range(4)]
    monkeypatch.setenv("SPF_LAYOUT_PATH", str(tmp_path))
    shutil.copy(load_layout("ELLPACK_R").source, tmp_path / "MyELLR.toml")
    (tmp_path / "MyELLR.toml").write_text(
        (tmp_path / "MyELLR.toml").read_text().replace('"ELLPACK_R"', '"MyELLR"'))
    u = spf.Tensor.from_scipy("MyELLR", m)
    np.testing.assert_array_equal(u.to_dense(), m.toarray())
    assert list(u["rowLen"]) == list(np.diff(m.indptr))


def test_what_the_relation_leaves_open_is_named(tmp_path):
    path = tmp_path / "Loose.toml"
    path.write_text("""name = "Loose"
relation = "{[p] -> [gi, gj] : 0 <= p < n and gi = r(p) and gj = c(p)}"
value = "v[p]"
shape = ["nr", "nc"]

[fields]
nr = "int"
nc = "int"
n = "int"
extra = "int"
r = "int[n]"
c = "int[n]"
v = "double[n]"
""")
    with pytest.raises(SpecError, match=r"Loose cannot be written: the scalar field\(s\) "
                                        "extra are given neither"):
        write_plan(load_layout(str(path)))
    padded = tmp_path / "Padded.toml"
    padded.write_text("""name = "Padded"
relation = "{[pi, pk] -> [gi, gj] : 0 <= pi < nr and 0 <= pk < w and gi = pi and gj = c(pi, pk)}"
value = "v[pi][pk]"
shape = ["nr", "nc"]

[fields]
nr = "int"
nc = "int"
w = "int"
c = "int[nr][w]"
v = "double[nr][w]"
""")
    with pytest.raises(SpecError, match="unused slots of c cannot be marked"):
        write_plan(load_layout(str(padded)))
    with pytest.raises(SpecError, match=r"cannot convert into layout Padded: .*unused slots"):
        spf.Conversion("CSR", str(padded))


def test_padding_policy_applies_to_written_destinations():
    d = np.zeros((40, 40))
    d[np.arange(40), (5 * np.arange(40)) % 40] = 1.0    # one entry per 4x4 block
    t = spf.Tensor.from_dense("CSR", d)
    with pytest.raises(ArgumentError, match="padding, over 75%"):
        t.convert("BlockedELL")
    np.testing.assert_array_equal(t.convert("BlockedELL", allow_padding=True).to_dense(), d)


def test_sell_slices_with_derived_slice_pointers():
    """SELL-C: slot k of row C*s + r at slicePtr(s) + C*k + r, slicePtr derived as
    prefix_sum(C * sliceWidth); written, read, and a kernel's output."""
    m = _matrix("random", (13, 9), False, seed=9)
    for c in (1, 4, 8):
        t = spf.Tensor.from_scipy("CSR", m).convert("SELL", C=c, allow_padding=True)
        np.testing.assert_array_equal(t.to_dense(), m.toarray())
        rows = np.diff(m.indptr)
        widths = [rows[c * s:c * s + c].max(initial=0) for s in range(-(-13 // c))]
        assert list(t["sliceWidth"]) == widths
        assert list(t["slicePtr"]) == list(np.concatenate([[0], np.cumsum(widths) * c]))
        x = np.arange(9.0)
        np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), m @ x)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "SELL"})
    c = k.compile()(A=spf.Tensor.from_scipy("CSR", m),
                    B=spf.Tensor.from_scipy("CSR", sp.csr_matrix(m.T)))
    np.testing.assert_allclose(c.to_dense(), (m @ m.T).toarray())


def test_derived_fields_are_computed_inverted_and_checked():
    m = _matrix("random", (6, 5), False, seed=10)
    lengths = np.diff(m.indptr)
    t = spf.Tensor.from_arrays("CSR_lengths", m.shape, {"rowLen": lengths,
                                                        "colIdx": m.indices, "data": m.data})
    np.testing.assert_array_equal(t["rowPtr"], m.indptr)
    np.testing.assert_array_equal(t.to_dense(), m.toarray())
    u = spf.Tensor.from_arrays("CSR_lengths", m.shape, {"rowPtr": m.indptr,
                                                        "colIdx": m.indices, "data": m.data})
    np.testing.assert_array_equal(u["rowLen"], lengths)
    with pytest.raises(ArgumentError, match=r"rowPtr must be prefix_sum\(rowLen\) \(derived\); "
                                            "it differs at 0"):
        spf.Tensor.from_arrays("CSR_lengths", m.shape, {
            "rowLen": lengths, "rowPtr": m.indptr + 1, "colIdx": m.indices, "data": m.data})
    with pytest.raises(ArgumentError, match=r"rowPtr is derived as prefix_sum\(rowLen\), so it "
                                            "starts at 0"):
        spf.Tensor.from_arrays("CSR_lengths", m.shape, {
            "rowPtr": m.indptr + 1, "colIdx": m.indices, "data": m.data})
    # written by a conversion (the pointer array, then its source) and as a kernel output
    w = spf.Tensor.from_scipy("COO", m).convert("CSR_lengths")
    np.testing.assert_array_equal(w["rowLen"], lengths)
    y = spf.evaluate("C(i,j) = A(i,j) * B(i,j)", A=w, B=w, layouts={"C": "CSR_lengths"})
    np.testing.assert_allclose(y.to_dense(), m.multiply(m).toarray())


@pytest.mark.parametrize("text,message", [
    ('rowPtr = "sum(rowLen)"', "must be prefix_sum"),
    ('rowPtr = "prefix_sum(K * rowLen)"', "the factor 'K' must be"),
    ('rowPtr = "prefix_sum(numRows)"', "its source 'numRows' must be a one-dimensional int"),
    ('data = "prefix_sum(rowLen)"', "its field 'data' must be a one-dimensional int"),
    ("rowPtr = 3", "must be a string"),
])
def test_derived_field_errors_name_the_file(tmp_path, text, message):
    source = load_layout("CSR_lengths").source
    with open(source) as f:
        body = f.read().replace('rowPtr = "prefix_sum(rowLen)"', text)
    path = tmp_path / "Bad.toml"
    path.write_text(body)
    with pytest.raises(SpecError, match=rf"Bad.toml:\d+:\d+: .*{message}"):
        load_layout(str(path))


def test_ranges_hold_on_the_slots_the_relation_reads():
    """Four-array CSR may leave gaps between rows: a range is checked on the slots the
    relation reads, so garbage in a gap is accepted and a bad read slot is not (issue 38)."""
    fields = {"rowStart": [0, 4], "rowEnd": [2, 5], "colIdx": [1, 2, -7, 99, 0],
              "data": [1.0, 2.0, 0.0, 0.0, 3.0]}
    t = spf.Tensor.from_arrays("CSR4", (2, 3), fields)
    np.testing.assert_array_equal(t.to_dense(), [[0, 1, 2], [3, 0, 0]])
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=np.ones(3)),
                               [3, 3])
    with pytest.raises(ArgumentError, match=r"CSR4 tensor: 'colIdx' violates range .* at the "
                                            r"read colIdx\[pj\] = colIdx\[4\]: 5 > 2"):
        spf.Tensor.from_arrays("CSR4", (2, 3), {**fields, "colIdx": [1, 2, -7, 99, 5]})
    # unchecked properties: the read's bounds are still checked, its range not
    u = spf.Tensor.from_arrays("CSR4", (2, 3), {**fields, "colIdx": [1, 2, -7, 99, 2]},
                               check=False)
    assert u["colIdx"][4] == 2


def test_a_composite_coordinate_stored_twice_is_refused():
    """HiCOO's coordinate is a block's coordinate times B plus an offset: two blocks with
    the same block coordinates may repeat an entry, which `unique` refuses (it was summed)."""
    fields = {"numBlocks": 2, "bPtr": [0, 1, 2], "bI": [0, 0], "bJ": [0, 0], "bK": [0, 0],
              "eI": [1, 1], "eJ": [2, 2], "eK": [3, 3], "data": [1.0, 2.0]}
    with pytest.raises(ArgumentError, match=r"HiCOO tensor: its entries violate unique .*: its "
                                            r"2 stored entries have 1 distinct coordinates"):
        spf.Tensor.from_arrays("HiCOO", (4, 4, 4), fields)
    ok = {**fields, "bK": [0, 1]}
    t = spf.Tensor.from_arrays("HiCOO", (8, 8, 8), ok)
    assert t.to_dense()[1, 2, 3] == 1.0 and t.to_dense()[1, 2, 7] == 2.0


def test_a_bound_in_terms_of_another_coordinate():
    """SymCSR stores the upper triangle: `colIdx(pk) >= pi` is a range naming a layout index.
    A stored lower-triangle entry was read by neither part and silently lost; now it is
    refused when the tensor is built, and the guard it equals is dropped from kernels."""
    m = _matrix("random", (9, 9), True, seed=11)
    t = spf.Tensor.from_scipy("CSR", m).convert("SymCSR")
    fields = dict(t.fields)
    col = fields["colIdx"].copy()
    row = 4
    col[fields["rowPtr"][row]] = 1                  # column 1 in row 4: below the diagonal
    with pytest.raises(ArgumentError, match=r"SymCSR tensor: 'colIdx' violates range "
                                            r"\(pi <= colIdx\(a\) <= numRows - 1\) at the read "
                                            r"colIdx\[pk\] = colIdx\[\d+\]: 1 < 4"):
        spf.Tensor.from_arrays("SymCSR", (9, 9), {**fields, "colIdx": col})
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "SymCSR"})
    assert "dropped: A_pi <= A.colIdx(A_pk)" in k.report()
    x = np.arange(9.0)
    np.testing.assert_allclose(k.compile()(A=t, x=x), m @ x)


def test_floor_division_in_a_range_bound():
    """BlockedELL's block columns lie in 0..(numCols - 1) / B (floor division): checked at
    the reads, and used by Z3 (the guard 4*blockCol < numCols is dropped)."""
    m = _matrix("random", (13, 11), False, seed=12)
    t = spf.Tensor.from_scipy("CSR", m).convert("BlockedELL", allow_padding=True)
    (prop,) = t.layout.properties
    assert str(prop.upper) == "floor((numCols - 1)/4)"
    fields = dict(t.fields)
    bad = fields["blockCol"].copy()
    bad.reshape(-1)[0] = 3
    with pytest.raises(ArgumentError, match=r"'blockCol' violates range \(-1 <= blockCol\(a\) "
                                            r"<= floor\(\(numCols - 1\)/4\)\) .*: 3 > 2"):
        spf.Tensor.from_arrays("BlockedELL", (13, 11), {**fields, "blockCol": bad})
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "BlockedELL"})
    assert "dropped: 4*A.blockCol(A_bi, A_bk) < A.numCols" in k.report()
    np.testing.assert_allclose(k.compile()(A=t, x=np.ones(11)), m @ np.ones(11))


def test_sorted_along_a_dimension_enables_ordered_lookups():
    """ELLPACK-R's columns are sorted along each row (`sorted`, along dimension 1) on the
    slots the relation reads: a lookup into its rows gets an ordered search, unsorted rows
    are refused, and slots past a row's length may hold anything."""
    m = _matrix("random", (12, 10), False, seed=13)
    t = spf.Tensor.from_scipy("CSR", m).convert("ELLPACK_R")
    a = spf.Tensor.from_scipy("CSR", m)
    for find in ("binsearch", "seqiter", "auto"):
        k = spf.Kernel("v = A(i,j) * B(i,j)", {"A": "CSR", "B": "ELLPACK_R"}, find=find)
        chosen = next(line for line in k.report().splitlines() if "chosen:" in line)
        assert "guard loop" not in chosen, chosen
        np.testing.assert_allclose(k.compile()(A=a, B=t), m.multiply(m).sum())
    fields = dict(t.fields)
    col = fields["colIdx"].copy().reshape(12, -1)
    row = int(np.argmax(fields["rowLen"]))
    col[row, [0, 1]] = col[row, [1, 0]]
    with pytest.raises(ArgumentError, match=r"ELLPACK_R tensor: 'colIdx' violates sorted "
                                            r"\(colIdx < along dimension 1, the others "
                                            r"fixed\): the read at 1 along dimension 1"):
        spf.Tensor.from_arrays("ELLPACK_R", (12, 10), {**fields, "colIdx": col})
    tail = fields["colIdx"].copy().reshape(12, -1)
    short = int(np.argmin(fields["rowLen"]))
    tail[short, -1] = 0                                 # past the row's length: not read
    u = spf.Tensor.from_arrays("ELLPACK_R", (12, 10), {**fields, "colIdx": tail})
    np.testing.assert_array_equal(u.to_dense(), m.toarray())


def test_index_widths_per_field(compiles_clean):
    """CSR_wideptr: rowPtr int64 (more than 2^31 entries), colIdx int32. The layout's loops
    run in 64 bits; each array keeps its own width in numpy, in the C struct and in every
    output spf writes (issue 38, item 4)."""
    lay = load_layout("CSR_wideptr")
    assert lay.index_type == "int64"
    assert (lay.dtype_of("rowPtr"), lay.dtype_of("colIdx")) == ("int64", "int32")
    a = _matrix("random", (14, 9), False, seed=14)
    b = _matrix("random", (9, 11), False, seed=15)
    t = spf.Tensor.from_scipy("CSR_wideptr", a)
    assert (t["rowPtr"].dtype, t["colIdx"].dtype) == (np.int64, np.int32)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR_wideptr"})
    assert "int64_t *restrict rowPtr;" in k.c_source()
    assert "int32_t *restrict colIdx;" in k.c_source()
    compiles_clean(k.c_source())
    np.testing.assert_allclose(k.compile()(A=t, x=np.arange(9.0)), a @ np.arange(9.0))
    prod = spf.Kernel("C(i,j) = A(i,k) * B(k,j)",
                      {"A": "CSR_wideptr", "B": "CSR_wideptr", "C": "CSR_wideptr"})
    compiles_clean(prod.c_source())
    c = prod.compile()(A=t, B=spf.Tensor.from_scipy("CSR_wideptr", b))
    assert (c["rowPtr"].dtype, c["colIdx"].dtype) == (np.int64, np.int32)
    np.testing.assert_allclose(c.to_dense(), (a @ b).toarray())
    for dst in ("CSC", "ELL", "SELL", "COO"):           # out of it, every way of writing
        np.testing.assert_array_equal(t.convert(dst, allow_padding=True).to_dense(),
                                      a.toarray())
    back = spf.Tensor.from_scipy("COO", a, index_type="int64").convert("CSR_wideptr")
    assert back["colIdx"].dtype == np.int32
    np.testing.assert_array_equal(back.to_dense(), a.toarray())
    with pytest.raises(SpecError, match="declares rowPtr int64: its loops run in 64 bits"):
        lay.with_index_type("int32")
    with pytest.raises(ArgumentError, match=r"colIdx\[0\] = 4294967296 does not fit "
                                            "index_type='int32'"):
        spf.Tensor.from_arrays("CSR_wideptr", (1, 3), {
            "rowPtr": [0, 1], "colIdx": np.array([2 ** 32]), "data": [1.0]})


def test_a_width_on_a_scalar_field_is_refused(tmp_path):
    with open(load_layout("CSR_wideptr").source) as f:
        body = f.read().replace('numCols = "int"', 'numCols = "int64"')
    path = tmp_path / "W.toml"
    path.write_text(body)
    with pytest.raises(SpecError, match=r"W.toml:\d+:\d+: field 'numCols': a width \(int64\) "
                                        "is given to index arrays"):
        load_layout(str(path))


@pytest.mark.parametrize("bounds,mask", [("i <= j", lambda d: np.triu(d)),
                                         ("j <= i", lambda d: np.tril(d)),
                                         ("i < j", lambda d: np.triu(d, 1))])
def test_bounds_that_empty_a_part_of_a_union(bounds, mask):
    """Under i <= j, SymCSR's mirrored part holds nothing: its term is left out (it was
    refused as 'unbounded')."""
    m = _matrix("random", (9, 9), True, seed=16)
    t = spf.Tensor.from_scipy("CSR", m).convert("SymCSR")
    x = np.arange(9.0)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x, bounds=bounds)
    np.testing.assert_allclose(y, mask(m.toarray()) @ x)


def _sigma_order(lengths: np.ndarray, window: int) -> np.ndarray:
    """Rows by decreasing length, stably, within windows of ``window`` rows (numpy)."""
    out = []
    for w in range(0, len(lengths), window):
        block = lengths[w:w + window]
        out.extend(w + np.argsort(-block, kind="stable"))
    return np.asarray(out, np.int64)


@pytest.mark.parametrize("c,sigma", [(1, 1), (4, 1), (4, 8), (2, 64), (8, 16)])
def test_sell_c_sigma_sorts_rows_within_windows(c, sigma):
    """SELL-C-sigma: perm orders the rows by length within windows of sigma, the slices of C
    positions are padded to their longest row; written, read, a kernel's input and output."""
    m = _matrix("random", (37, 23), False, seed=11)
    m = sp.csr_matrix(m + sp.diags(np.arange(1.0, 24.0), 14, shape=(37, 23)))  # uneven rows
    t = spf.Tensor.from_scipy("CSR", m).convert("SELL_sigma", C=c, sigma=sigma,
                                                allow_padding=True)
    np.testing.assert_array_equal(t.to_dense(), m.toarray())
    lengths = np.diff(m.indptr)
    perm = _sigma_order(lengths, sigma)
    np.testing.assert_array_equal(t["perm"], perm)
    by_position = lengths[perm]
    widths = [by_position[c * s:c * s + c].max(initial=0) for s in range(-(-37 // c))]
    np.testing.assert_array_equal(t["sliceWidth"], widths)
    x = np.arange(23.0)
    for parallel in (False, True):
        f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": t.layout}, parallel=parallel).compile()
        np.testing.assert_allclose(f(A=t, x=x), m @ x)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": t.layout})
    out = k.compile()(A=spf.Tensor.from_scipy("CSR", m),
                      B=spf.Tensor.from_scipy("CSR", sp.csr_matrix(m.T)))
    np.testing.assert_allclose(out.to_dense(), (m @ m.T).toarray())


def test_sell_sigma_padding_shrinks_with_sigma():
    """Sorting within larger windows stores fewer padding slots on rows of uneven length."""
    rng = np.random.default_rng(12)
    lengths = rng.integers(0, 30, 200)
    rows = np.repeat(np.arange(200), lengths)
    cols = np.concatenate([rng.choice(40, n, replace=False) for n in lengths])
    m = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(200, 40))
    slots = [spf.Tensor.from_scipy("CSR", m).convert("SELL_sigma", C=8, sigma=s,
                                                     allow_padding=True)["slicePtr"][-1]
             for s in (1, 32, 200)]
    assert slots[0] > slots[1] > slots[2] >= m.nnz


def test_a_permutation_is_checked_and_proves_parallel_writes(tmp_path):
    """A user's row-permuted CSR (rows ordered by decreasing length over the whole matrix):
    written and read; a perm that is not a permutation is refused; without the property the
    kernel's writes through perm cannot be proven distinct (each thread sums into a copy) and
    the layout is written as a list of the rows that have entries."""
    text = """name = "PermCSR"
relation = "{[p, q] -> [gi, gj] : 0 <= p < nr and gi = perm(p) and ptr(p) <= q < ptr(p + 1) \
and gj = col(q)}"
value = "v[q]"
shape = ["nr", "nc"]

[fields]
nr = "int"
nc = "int"
perm = "int[nr]"
ptr = "int[nr + 1]"
col = "int[ptr(nr)]"
v = "double[ptr(nr)]"
PROPERTY"""
    prop = '\n[[properties]]\nkind = "permutation"\nuf = "perm"\norder = ">="\n'
    path = tmp_path / "PermCSR.toml"
    path.write_text(text.replace("PROPERTY", prop))
    m = _matrix("random", (11, 6), False, seed=13)
    t = spf.Tensor.from_scipy("CSR", m).convert(str(path))
    np.testing.assert_array_equal(t.to_dense(), m.toarray())
    np.testing.assert_array_equal(t["perm"], np.argsort(-np.diff(m.indptr), kind="stable"))
    x = np.arange(6.0)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": str(path)}, parallel=True)
    assert " * Parallel (OpenMP): loop A_p\n" in k.c_source()     # rows written once
    np.testing.assert_allclose(k.compile()(A=t, x=x), m @ x)
    fields = {k: t[k] for k in ("ptr", "col", "v")}
    for perm, message in [([0] * 11, "position 1 repeats the value 0 of position 0"),
                          (list(range(1, 12)), "at position 10: 11 is outside 0..10")]:
        with pytest.raises(ArgumentError, match=message):
            spf.Tensor.from_arrays(str(path), m.shape, {**fields, "perm": perm})
    bare = tmp_path / "BarePermCSR.toml"
    bare.write_text(text.replace("PROPERTY", "").replace('"PermCSR"', '"BarePermCSR"'))
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": str(bare)}, parallel=True)
    assert "loop A_p, each thread summing into a private copy of y" in k.c_source()
    u = spf.Tensor.from_scipy("CSR", m).convert(str(bare))     # rows with entries first
    np.testing.assert_array_equal(u.to_dense(), m.toarray())
    np.testing.assert_allclose(k.compile()(A=u, x=x), m @ x)


SELL_LINEAR = """name = "SELLx"
relation = "{[s, r, k] -> [gi, gj] : 0 <= s < numSlices and 0 <= r < C and 0 <= k < \
sliceWidth(s) and gi = C*s + r and gi < numRows and gj = colIdx(slicePtr(s) + C*k + r) and \
0 <= colIdx(slicePtr(s) + C*k + r)}"
value = "data[slicePtr(s) + C*k + r]"
shape = ["numRows", "numCols"]

[params]
C = 2

[fields]
numRows = "int"
numCols = "int"
numSlices = "int"
sliceWidth = "int[numSlices]"
slicePtr = "int[numSlices + 1]"
colIdx = "int[slicePtr(numSlices)]"
data = "double[slicePtr(numSlices)]"

[[properties]]
kind = "range"
uf = "colIdx"
min = "-1"
max = "numCols - 1"

[[properties]]
kind = "linear"
HOLDS
"""


def test_a_linear_constraint_between_arrays(tmp_path):
    """A SELL whose slice pointers are a field, not derived: the constraint between the two
    arrays is checked when a tensor is built, so a slice width that overruns its slice (and
    would read the next slice's slots) is refused, naming the slice and the values."""
    path = tmp_path / "SELLx.toml"
    path.write_text(SELL_LINEAR.replace("HOLDS", 'holds = "slicePtr(0) = 0 and slicePtr(s + 1) '
                                        '- slicePtr(s) = C * sliceWidth(s)"\n'
                                        'for = "0 <= s < numSlices"'))
    d = np.array([[1, 0, 2.], [0, 0, 3], [4, 5, 6], [0, 0, 0], [7, 0, 0.]])
    good = {"sliceWidth": [2, 3, 1], "slicePtr": [0, 4, 10, 12],
            "colIdx": [0, 2, 2, -1, 0, -1, 1, -1, 2, -1, 0, -1],
            "data": [1, 3, 2, 0, 4, 0, 5, 0, 6, 0, 7, 0.]}
    t = spf.Tensor.from_arrays(str(path), d.shape, good)
    np.testing.assert_array_equal(t.to_dense(), d)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=np.ones(3)),
                               d.sum(axis=1))
    with pytest.raises(ArgumentError) as err:
        spf.Tensor.from_arrays(str(path), d.shape, {**good, "slicePtr": [0, 4, 8, 12]})
    assert str(err.value) == (
        "SELLx tensor: its arrays violate linear (slicePtr(0) = 0 and slicePtr(s + 1) = "
        "slicePtr(s) + 2*sliceWidth(s) for s >= 0 and s < numSlices) at s = 1: slicePtr(s + 1) "
        "= slicePtr(s) + 2*sliceWidth(s) fails (slicePtr(s + 1) = 8, slicePtr(s) = 4, "
        "sliceWidth(s) = 3)")
    with pytest.raises(ArgumentError, match=r"slicePtr\(0\) = 0 fails \(slicePtr\(0\) = 1\)"):
        spf.Tensor.from_arrays(str(path), d.shape, {**good, "slicePtr": [1, 5, 11, 13],
                                                    "colIdx": good["colIdx"] + [-1],
                                                    "data": good["data"] + [0.0]})
    csr4 = {"rowStart": [0, 3], "rowEnd": [2, 2], "colIdx": [0, 1, 0], "data": [1.0, 2, 3]}
    with pytest.raises(ArgumentError, match=r"CSR4 tensor: its arrays violate linear "
                                            r"\(rowStart\(i\) <= rowEnd\(i\) .* at i = 1: "):
        spf.Tensor.from_arrays("CSR4", (2, 2), csr4)


@pytest.mark.parametrize("holds,message", [
    ('holds = "slicePtr(s + 1) <= slicePtr(s) + 9"',
     "'s' is neither a scalar field nor a variable bounded below and above by 'for'"),
    ('holds = "data(s) <= 1"\nfor = "0 <= s < 2"', "'data', which is not an index array"),
    ('holds = "slicePtr(s, s) >= 0"\nfor = "0 <= s < 2"', "it has 1 dimensions"),
    ('holds = "slicePtr(s) >= 0"\nfor = "0 <= s < sliceWidth(0)"',
     "'for' bounds its variables by scalar fields and constants only"),
    ('for = "0 <= s < 2"', 'give holds = "<comparisons joined by and>"'),
    ('uf = "slicePtr"\nholds = "slicePtr(0) = 0"', "a linear property names its arrays"),
])
def test_linear_property_errors_name_the_key(tmp_path, holds, message):
    path = tmp_path / "SELLx.toml"
    path.write_text(SELL_LINEAR.replace("HOLDS", holds))
    with pytest.raises(SpecError, match=re.escape(message)):
        load_layout(str(path))


@pytest.mark.parametrize("kind", ["random", "empty", "one", "empty_slice"])
def test_csr_slices_pointers_over_two_levels(kind):
    """An order-3 tensor as a list of CSR slices: slicePtr(t) + rowPtr(t, i) <= p <
    slicePtr(t) + rowPtr(t, i + 1); written (each slice's row pointers from 0), read by TTV,
    converted on, and a kernel's output; a slice pointer that overlaps is refused."""
    rng = np.random.default_rng(14)
    d = rng.random((4, 6, 5)) * (rng.random((4, 6, 5)) < 0.3)
    if kind == "empty":
        d[:] = 0.0
    elif kind == "one":
        d[:] = 0.0
        d[3, 5, 0] = 2.5
    elif kind == "empty_slice":
        d[1] = 0.0
        d[:, 2] = 0.0
    t = spf.Tensor.from_dense("COO3", d).convert("CSRSlices")
    np.testing.assert_array_equal(t.to_dense(), d)
    per_slice = (d != 0).sum(axis=(1, 2))
    np.testing.assert_array_equal(t["slicePtr"], np.concatenate([[0], np.cumsum(per_slice)]))
    rows = (d != 0).sum(axis=2)
    np.testing.assert_array_equal(np.reshape(t["rowPtr"], (4, 7)), np.concatenate(
        [np.zeros((4, 1), int), np.cumsum(rows, axis=1)], axis=1))
    x = rng.random(5)
    np.testing.assert_allclose(spf.evaluate("y(t,i) = A(t,i,j) * x(j)", A=t, x=x), d @ x)
    np.testing.assert_array_equal(t.convert("CSF").to_dense(), d)
    k = spf.Kernel("C(t,i,j) = A(t,i,j) * B(t,i,j)", {"A": "CSF", "B": "CSF", "C": "CSRSlices"})
    csf = spf.Tensor.from_dense("CSF", d)
    np.testing.assert_allclose(k.compile()(A=csf, B=csf).to_dense(), d * d)


def test_two_level_pointers_in_a_users_layout_and_their_refusals(tmp_path):
    text = """name = "Batched"
relation = "{[t, i, p] -> [gt, gi, gj] : 0 <= t < nb and 0 <= i < nr and \
base(t) + ptr(t, i) <= p < base(t) + ptr(t, i + 1) and gt = t and gi = i and gj = col(p)}"
value = "v[p]"
shape = ["nb", "nr", "nc"]

[fields]
nb = "int"
nr = "int"
nc = "int"
base = "int[nb]"
ptr = "int[nb][nr + 1]"
col = "int[n]"
v = "double[n]"
n = "int"
"""
    path = tmp_path / "Batched.toml"
    path.write_text(text)
    d = np.zeros((3, 2, 4))
    d[0, 1, 2], d[2, 0, 0], d[2, 0, 3] = 1.0, 2.0, 3.0
    t = spf.Tensor.from_dense("COO3", d).convert(str(path))
    np.testing.assert_array_equal(t.to_dense(), d)
    assert list(t["base"]) == [0, 1, 1] and t["n"] == 3
    wrong = tmp_path / "Wrong.toml"
    wrong.write_text(text.replace("base(t) + ptr(t, i) <= p < base(t) + ptr(t, i + 1)",
                                  "base(i) + ptr(t, i) <= p < base(i) + ptr(t, i + 1)")
                     .replace('"Batched"', '"Wrong"').replace("int[nb]", "int[nr]"))
    with pytest.raises(SpecError, match=r"Wrong cannot be written: layout index p runs from "
                                        r".*: pointers over two levels are O\(a\) \+ P\(a, b\)"):
        write_plan(load_layout(str(wrong)))


def test_a_dcsr_of_blocks_written_outside_the_package(tmp_path):
    """Block coordinates plus in-block offsets over a doubly compressed list of block rows:
    the block row a rank among the block rows that have entries, the block column a position
    under the block row's pointer, the offsets aligned tiles; rectangular, not a multiple of
    the block size."""
    path = tmp_path / "DCSRBlocks.toml"
    path.write_text("""name = "DCSRBlocks"
relation = "{[pb, pk, ri, rj] -> [gi, gj] : 0 <= pb < nbr and blockPtr(pb) <= pk < \
blockPtr(pb + 1) and 0 <= ri < B and 0 <= rj < B and gi = B*blockRow(pb) + ri and \
gj = B*blockCol(pk) + rj and gi < nr and gj < nc}"
value = "data[pk][ri][rj]"
shape = ["nr", "nc"]

[params]
B = 3

[fields]
nr = "int"
nc = "int"
nbr = "int"
blockRow = "int[nbr]"
blockPtr = "int[nbr + 1]"
blockCol = "int[blockPtr(nbr)]"
data = "double[blockPtr(nbr)][B][B]"
""")
    for kind in ("random", "empty", "one"):
        m = _matrix(kind, (20, 14), False, seed=15)
        t = spf.Tensor.from_scipy("CSR", m).convert(str(path), allow_padding=True)
        np.testing.assert_array_equal(t.to_dense(), m.toarray())
        rows = sorted({i // 3 for i in m.nonzero()[0]})
        assert t["nbr"] == len(rows) and list(t["blockRow"]) == rows
        x = np.arange(14.0)
        np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), m @ x)


CSR4_AT_MOST = """name = "CSR4x"
relation = '''{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and rowStart(pi) <= pj < rowEnd(pi)
              and gi = pi and gj = colIdx(pj)}'''
value = "data[pj]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
slots = "int"
rowStart = "int[numRows]"
rowEnd = "int[numRows]"
colIdx = "int[slots]"
data = "double[slots]"

[[properties]]
kind = "linear"
holds = "rowEnd(i) - rowStart(i) <= 2 and rowStart(i) <= rowEnd(i)"
for = "0 <= i < numRows and 0 <= k < 2"
"""


def test_a_linear_property_is_checked_by_the_writers_c(tmp_path):
    """A linear property the relation does not imply (at most two entries a row) is checked
    by the generated writer on the arrays it wrote, over the property's box (two variables
    here): a conversion that keeps it matches scipy, one that breaks it is refused by the C
    (its message names the variables' values, not the reads Python's check names)."""
    path = tmp_path / "CSR4x.toml"
    path.write_text(CSR4_AT_MOST)
    conv = spf.Conversion("CSR", str(path)).compile()
    assert any(p.kind == "linear" for p in conv.source.proven)
    for a in [sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0], [0, 3, 0]])),
              sp.csr_matrix((0, 3)), sp.csr_matrix(np.array([[0, 0, 0, 4.0]]))]:
        out = conv(spf.Tensor.from_scipy("CSR", a))
        np.testing.assert_array_equal(out.to_dense(), a.toarray())
    three = sp.csr_matrix(np.array([[1.0, 0, 2], [5, 6, 7]]))
    with pytest.raises(ArgumentError) as err:
        conv(spf.Tensor.from_scipy("CSR", three))
    assert str(err.value) == (
        "CSR4x cannot hold these entries: the fields its relation gives them fail its own "
        "checks (CSR4x tensor: its arrays violate linear (rowEnd(i) <= rowStart(i) + 2 and "
        "rowStart(i) <= rowEnd(i) for i >= 0 and i < numRows and k >= 0 and k <= 1) at i = 1, "
        "k = 0: rowEnd(i) <= rowStart(i) + 2 fails)")


def _wide(rows: int, cols: int, entries: list[tuple[int, int, float]]) -> np.ndarray:
    out = np.zeros((rows, cols))
    for i, j, v in entries:
        out[i, j] = v
    return out


@pytest.mark.parametrize("dst,dense", [
    # each block row's entries arrive together, block columns out of order: run by run
    ("BCSR", _wide(2, 10, [(0, 9, 3.0), (1, 0, 1.0), (1, 9, 2.0)])),
    ("BCSR", _wide(2, 610, [(0, 9, 3.0), (0, 600, 4.0), (1, 0, 1.0)])),
    # DIA: offsets within range (a table), then offsets too far apart (a sort of all)
    ("DIA", _wide(3, 3, [(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0), (2, 0, 4.0), (2, 2, 5.0)])),
    ("DIA", _wide(2, 304, [(0, 303, 2.0), (1, 0, 1.0), (1, 1, 6.0)])),
])
def test_every_way_of_ranking_keys_gives_scipys_matrix(dst, dense):
    """The writer ranks keys out of entry order through a sort of each group's run (groups
    arriving whole), a table over their range (narrow) or a sort of all, whichever applies;
    each gives scipy's matrix."""
    a = sp.csr_matrix(np.asarray(dense, dtype=float))
    out = spf.Conversion("CSR", dst, allow_padding=True).compile()(
        spf.Tensor.from_scipy("CSR", a))
    np.testing.assert_array_equal(out.to_dense(), a.toarray())
