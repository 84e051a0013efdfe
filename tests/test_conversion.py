"""Conversions generated from layout relations (issue 6): every supported pair against the
dense matrix it stores, on edge cases, with the destination's declared properties checked by
spf's own property checks."""
from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import covering, lanes
from hypothesis import given, settings
from hypothesis import strategies as st

import spf

SOURCES = ["COO", "SortedCOO", "CSR", "CSC", "DCSR", "CSR_unsorted", "DenseMatrix", "DIA", "ELL",
           "BCSR", "LowerTri"]
DESTINATIONS = ["CSR", "CSC", "DCSR", "COO", "SortedCOO", "CSR_unsorted", "DenseMatrix"]
PARAMS = {"BCSR": {"B": 3}}


def matrix(shape, density, seed, empty_rows=(), empty_cols=(), zeros=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = np.where(rng.random(shape) < density, rng.uniform(0.5, 2.0, shape), 0.0)
    d[list(empty_rows), :] = 0.0
    d[:, list(empty_cols)] = 0.0
    return d


CASES = {
    "random": matrix((23, 17), 0.2, 1),
    "empty_rows_cols": matrix((20, 20), 0.3, 2, empty_rows=(0, 5, 19), empty_cols=(3, 19)),
    "empty": np.zeros((7, 9)),
    "one": np.pad(np.array([[2.5]]), ((4, 2), (1, 6))),
    "dense_row": np.vstack([np.zeros((3, 11)), np.arange(1.0, 12.0)[None, :], np.zeros((2, 11))]),
    "square": matrix((16, 16), 0.25, 3),
}


def pack(layout: str, dense: np.ndarray) -> spf.Tensor:
    if layout == "LowerTri":
        dense = np.tril(dense[:, :dense.shape[0]] if dense.shape[1] >= dense.shape[0]
                        else np.pad(dense, ((0, 0), (0, dense.shape[0] - dense.shape[1]))))
    return spf.Tensor.from_dense(layout, dense, **PARAMS.get(layout, {}))


def check(out: spf.Tensor, dst: str, want: np.ndarray, keep_zeros: bool = False) -> None:
    assert isinstance(out, spf.Tensor) and out.layout.name == dst
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.to_dense(), want)
    spf.Tensor(out.layout, out.shape, out.fields, check=True)   # declared properties hold
    if dst != "DenseMatrix" and not keep_zeros:
        assert np.count_nonzero(out.values) == out.values.size == np.count_nonzero(want)


@pytest.mark.parametrize("src,dst,case", lanes(
    itertools.product(SOURCES, DESTINATIONS, CASES), covering(SOURCES, DESTINATIONS, list(CASES)),
    "-".join))
def test_conversion(src, dst, case):
    t = pack(src, CASES[case])
    want = t.to_dense()
    out = spf.Conversion(src, dst, **PARAMS.get(src, {})).compile()(t)
    check(out, dst, want)


def test_unsorted_coo_input_with_explicit_zeros():
    rows = np.array([4, 0, 4, 2, 0, 3, 1])
    cols = np.array([1, 5, 0, 2, 1, 3, 3])
    vals = np.array([1.0, 2.0, 3.0, 0.0, 5.0, 6.0, 0.0])      # two explicit zeros
    coo = spf.Tensor.from_arrays("COO", (5, 6), {
        "numRows": 5, "numCols": 6, "numNNZ": 7, "rowIdx": rows, "colIdx": cols, "data": vals})
    want = np.zeros((5, 6))
    want[rows, cols] = vals
    for dst in ("CSR", "CSC", "DCSR", "SortedCOO"):
        kept = coo.convert(dst)                   # COO does not pad: its entries are kept
        check(kept, dst, want, keep_zeros=True)
        assert kept.values.size == 7
        check(coo.convert(dst, keep_zeros=False), dst, want)
    csr = coo.convert("CSR", keep_zeros=False)
    assert csr["rowPtr"].tolist() == [0, 2, 2, 2, 3, 5]
    assert csr["colIdx"].tolist() == [1, 5, 3, 0, 1]


def test_padding_of_dense_levels_is_dropped_unless_kept():
    a = np.array([[1.0, 0, 0], [0, 0, 2.0], [0, 3.0, 0]])
    dia = spf.Tensor.from_dense("DIA", a)                   # diagonals -1, 0, 1: 7 slots
    assert dia.values.size > 3
    assert dia.convert("CSR").values.size == 3
    padded = dia.convert("COO", keep_zeros=True)
    assert padded.values.size == 7 and np.count_nonzero(padded.values) == 3
    np.testing.assert_array_equal(padded.to_dense(), a)
    assert spf.Conversion("DIA", "CSC").keep_zeros is False
    assert spf.Conversion("COO", "CSC").keep_zeros is True


def test_coo_to_csf_order_3():
    rng = np.random.default_rng(5)
    d = np.where(rng.random((6, 5, 7)) < 0.15, rng.uniform(1, 2, (6, 5, 7)), 0.0)
    d[2] = 0.0
    coo = spf.Tensor.from_dense("COO3", d)
    perm = rng.permutation(coo.values.size)                  # unsorted input
    coo = spf.Tensor.from_arrays("COO3", d.shape, {
        **{k: v for k, v in coo.fields.items() if not isinstance(v, np.ndarray)},
        **{k: v[perm] for k, v in coo.fields.items() if isinstance(v, np.ndarray)}})
    for dst in ("CSF", "DenseTensor3"):
        out = coo.convert(dst)
        np.testing.assert_array_equal(out.to_dense(), d)
        spf.Tensor(out.layout, out.shape, out.fields, check=True)
    np.testing.assert_array_equal(spf.Tensor.from_dense("CSF", d).convert("COO3").to_dense(), d)


def test_plans_follow_the_relations():
    """CSR -> CSC is a bucket scatter whose segments Z3 proves sorted; COO -> CSR must sort
    its segments; CSR -> DCSR appends in order; none builds an intermediate format."""
    plans = {(s, d): spf.Conversion(s, d).kernel.assembly
             for s, d in [("CSR", "CSC"), ("COO", "CSR"), ("CSR", "DCSR"), ("SortedCOO", "CSR")]}
    assert plans["CSR", "CSC"].mode == "bucket" and plans["CSR", "CSC"].bucket_sorted
    assert plans["COO", "CSR"].mode == "bucket" and not plans["COO", "CSR"].bucket_sorted
    assert plans["CSR", "DCSR"].mode == "append" and plans["CSR", "DCSR"].ordered == 2
    assert plans["SortedCOO", "CSR"].ordered == 2
    src = spf.Conversion("COO", "CSR").c_source()
    assert "spf_convert_fill_histogram" in src and "zeros are not stored" not in src
    assert "zeros are not stored" in spf.Conversion("DIA", "CSR").c_source()
    assert "rowPtr" in src and "spf_CSC" not in src        # straight into CSR


def test_conversion_errors():
    with pytest.raises(spf.SpecError, match="orders differ"):
        spf.Conversion("CSR", "CSF")
    with pytest.raises(spf.SpecError, match="unknown layout parameter"):
        spf.Conversion("CSR", "BCSR", X=3)
    with pytest.raises(spf.ArgumentError, match=r"CUDAmma16x16 cannot hold both entries "
                                                r"\(0, 0\) and \(0, 1\)"):
        spf.Tensor.from_dense("CSR", np.ones((16, 16))).convert("CUDAmma16x16")
    f = spf.Conversion("CSR", "CSC").compile()
    with pytest.raises(spf.ArgumentError, match=r"takes an spf.Tensor"):
        f(np.eye(3))
    with pytest.raises(spf.ArgumentError, match="layout"):
        f(spf.Tensor.from_dense("COO", np.eye(3)))


def test_cli_convert(tmp_path):
    out = tmp_path / "coo_csr.c"
    proc = subprocess.run([sys.executable, "-m", "spf", "convert", "COO", "CSR", "-o", str(out),
                           "--report"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "int spf_convert(" in out.read_text() and "assembly:" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "spf", "convert", "CSR", "NoSuchLayout"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "NoSuchLayout" in bad.stderr


def test_generated_conversions_compile_clean(compiles_clean):
    for s, d in [("COO", "CSR"), ("CSR", "CSC"), ("DenseMatrix", "DCSR"), ("DIA", "COO"),
                 ("CSR", "DIA"), ("COO", "ELL"), ("DenseMatrix", "DIA"), ("COO", "BCSR"),
                 ("CSR", "BCSR")]:
        compiles_clean(spf.Conversion(s, d).c_source())


@pytest.mark.fuzz
@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 12), n=st.integers(0, 12), density=st.floats(0, 1),
       seed=st.integers(0, 2 ** 16), src=st.sampled_from(["COO", "CSR", "CSC", "DIA"]),
       dst=st.sampled_from(["CSR", "CSC", "DCSR", "SortedCOO"]))
def test_conversion_property(m, n, density, seed, src, dst):
    want = matrix((m, n), density, seed)
    out = spf.Tensor.from_dense(src, want).convert(dst)
    check(out, dst, want)
    np.testing.assert_array_equal(out.to_scipy().toarray(), sp.csr_matrix(want).toarray())


def test_from_scipy_and_from_dense_go_through_generated_conversions():
    """Unsorted indices and duplicates of a scipy matrix are sorted and added by the
    generated code; out-of-range indices are rejected before any C runs."""
    m = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 4.0]), np.array([2, 0, 2, 1]),
                       np.array([0, 3, 3, 4])), shape=(3, 3))    # row 0: 2, 0, 2 (dup)
    want = np.array([[2.0, 0, 4.0], [0, 0, 0], [0, 4.0, 0]])
    csr = spf.Tensor.from_scipy("CSR", m)
    assert csr["colIdx"].tolist() == [0, 2, 1] and csr["rowPtr"].tolist() == [0, 2, 2, 3]
    np.testing.assert_array_equal(csr.to_dense(), want)
    for dst in ("CSC", "DCSR", "SortedCOO", "COO"):
        check(spf.Tensor.from_scipy(dst, m), dst, want)
    assert spf.Tensor.from_scipy("CSR_unsorted", m).values.size == 4   # kept as given
    bad = sp.csr_matrix((np.ones(2), np.array([0, 1]), np.array([0, 1, 2])), shape=(2, 2))
    bad.indices[1] = 7
    with pytest.raises(spf.ArgumentError, match="colIdx"):
        spf.Tensor.from_scipy("CSC", bad)
    d = np.array([[0.0, 1.5], [2.5, 0.0], [0.0, 0.0]])
    for dst in ("CSR", "CSC", "COO", "DCSR"):
        check(spf.Tensor.from_dense(dst, d), dst, d)
    sv = spf.Tensor.from_dense("SV", np.array([0.0, 3.0, 0.0, 1.0]))
    assert sv["idx"].tolist() == [1, 3] and sv["val"].tolist() == [3.0, 1.0]


PLACED = ["DIA", "ELL", "BCSR"]


@pytest.mark.parametrize("src,dst,case", lanes(
    itertools.product(SOURCES, PLACED, CASES), covering(SOURCES, PLACED, list(CASES)), "-".join))
def test_placed_conversion(src, dst, case):
    """Destinations placed by position: the analysis pass finds the diagonals (DIA: offsets
    -(M-1)..N-1 on rectangular shapes), the widest row (ELL) or the occupied blocks of each
    block row (BCSR), the fill pass the slots."""
    t = pack(src, CASES[case])
    want = t.to_dense()
    params = {**PARAMS.get(src, {}), **PARAMS.get(dst, {})}
    out = spf.Conversion(src, dst, allow_padding=True, **params).compile()(t)
    assert out.layout.name == dst and out.shape == want.shape
    np.testing.assert_array_equal(out.to_dense(), want)
    spf.Tensor(out.layout, out.shape, out.fields, check=True)
    if dst == "DIA":
        rows, cols = np.nonzero(want)
        assert out["offset"].tolist() == sorted(set((cols - rows).tolist()))
    elif dst == "BCSR":           # B = 3: blocks aligned to multiples of 3, sorted per block row
        rows, cols = np.nonzero(want)
        blocks = sorted(set(zip((rows // 3).tolist(), (cols // 3 * 3).tolist())))
        assert out["numBlockRows"] == -(-want.shape[0] // 3)
        assert out["colIdx"].tolist() == [c for _, c in blocks]
        assert np.diff(out["rowPtr"]).tolist() == np.bincount(
            [r for r, _ in blocks], minlength=out["numBlockRows"]).tolist()
    else:
        assert out["width"] == (np.count_nonzero(want, axis=1).max() if want.size else 0)
        used = out["colIdx"].reshape(want.shape[0], -1) >= 0
        assert used.sum() == np.count_nonzero(want)


def test_written_padding_policy_and_report():
    a = np.zeros((50, 50))
    a[0, 49] = a[49, 0] = a[10, 10] = 1.0          # 3 entries on 3 diagonals: 150 slots
    t = spf.Tensor.from_dense("CSR", a)
    with pytest.raises(spf.ArgumentError, match="padding"):
        t.convert("DIA")
    np.testing.assert_array_equal(t.convert("DIA", allow_padding=True).to_dense(), a)
    lines = spf.Conversion("CSR", "DIA").report()
    assert "offset(pd) = -i + j" in lines and "pd = position of (offset(pd)) increasing" in lines
    src = spf.Conversion("COO", "ELL").c_source()
    assert "int spf_convert_write(" in src and "int spf_convert(" in src
    assert "unused colIdx = -1" in src             # the header states each pass


TILED = """
name = "Tiled2"
description = "Dense 2 x 2 tiles, row-major tiles of row-major entries (no index arrays)."
relation = "{[pi, pj, pk, pl] -> [gi, gj] : 0 <= pi < tileRows and 0 <= pj < tileCols \
and 0 <= pk < 2 and 0 <= pl < 2 and gi = 2*pi + pk and gj = 2*pj + pl and gi < numRows \
and gj < numCols}"
value = "data[pi][pj][pk][pl]"
shape = ["numRows", "numCols"]
[fields]
numRows = "int"
numCols = "int"
tileRows = "int"
tileCols = "int"
data = "double[tileRows][tileCols][2][2]"
"""


def test_writer_splits_coordinates_into_tiles_and_ranks_keys_per_group(tmp_path):
    """Layouts spf has never seen: dense tiles (every index a tile or an offset of a
    coordinate) and BCSR whose block columns decrease within a block row."""
    want = matrix((7, 5), 0.4, 9)
    tiled = tmp_path / "Tiled2.toml"
    tiled.write_text(TILED)
    out = spf.Tensor.from_dense("COO", want).convert(str(tiled), allow_padding=True)
    assert out["tileRows"] == 4 and out["tileCols"] == 3 and out.values.size == 48
    np.testing.assert_array_equal(out.to_dense(), want)
    text = (Path(spf.front.layout_path.load_layout("BCSR").source).read_text()
            .replace('name = "BCSR"', 'name = "BCSR_desc"')
            .replace('packer = "BCSR.py"\n', "")
            .replace('period = "pi"\norder = "<="', 'period = "pi"\norder = ">="'))
    desc = tmp_path / "BCSR_desc.toml"
    desc.write_text(text)
    out = spf.Conversion("CSR", str(desc), B=2, allow_padding=True).compile()(
        spf.Tensor.from_dense("CSR", want))
    np.testing.assert_array_equal(out.to_dense(), want)
    for b in range(out["numBlockRows"]):
        cols = out["colIdx"][out["rowPtr"][b]:out["rowPtr"][b + 1]].tolist()
        assert cols == sorted(cols, reverse=True) and all(c % 2 == 0 for c in cols)


def test_bcsr_written_report_padding_and_c():
    conv = spf.Conversion("COO", "BCSR", B=4)
    report = conv.report()
    assert "pi = floor((i)/4)" in report and "pk = i - 4*floor((i)/4)" in report
    assert "colIdx(pj) = 4*floor((j)/4)" in report
    assert "pj = position of (colIdx(pj)) increasing, from rowPtr(pi)" in report
    assert "spf_st_ranks(" in conv.c_source()
    a = np.zeros((8, 8))
    a[0, 0] = a[5, 7] = 1.0                       # 2 entries in 2 blocks of 16 slots
    with pytest.raises(spf.ArgumentError, match="94% padding"):
        spf.Tensor.from_dense("CSR", a).convert("BCSR", B=4)
    blocky = np.kron(np.eye(3), np.ones((4, 4)))  # full blocks: no padding
    out = spf.Tensor.from_dense("COO", blocky).convert("BCSR", B=4)
    assert out["colIdx"].tolist() == [0, 4, 8]
    np.testing.assert_array_equal(out.to_dense(), blocky)


@pytest.mark.parametrize("dst", ["BCSR", "ELL", "DIA"])
def test_writing_unordered_entries_and_duplicates(dst):
    """COO entries in no order: groups are bucketed before their keys are ranked (BCSR), slots
    counted per row (ELL); CSR_unsorted rows holding a column three times: duplicates added
    (DIA, BCSR) or given a slot each (ELL)."""
    rng = np.random.default_rng(5)
    flat = rng.choice(29 * 31, 200, replace=False)
    rows, cols = flat // 31, flat % 31
    vals = rng.uniform(0.5, 2.0, 200)
    want = np.zeros((29, 31))
    want[rows, cols] = vals
    coo = spf.Tensor.from_arrays("COO", (29, 31), {
        "numRows": 29, "numCols": 31, "numNNZ": 200, "rowIdx": rows, "colIdx": cols,
        "data": vals})
    out = coo.convert(dst, allow_padding=True, **PARAMS.get(dst, {}))
    np.testing.assert_array_equal(out.to_dense(), want)
    spf.Tensor(out.layout, out.shape, out.fields, check=True)
    dup = sp.csr_matrix((np.array([1.0, 2.0, 4.0, 8.0]), np.array([5, 2, 5, 5]),
                         np.array([0, 0, 4, 4])), shape=(3, 7))     # row 1: 5, 2, 5, 5
    t = spf.Tensor.from_arrays("CSR_unsorted", dup.shape, {
        "numRows": 3, "numCols": 7, "rowPtr": dup.indptr, "colIdx": dup.indices,
        "data": dup.data})
    out = t.convert(dst, allow_padding=True, **PARAMS.get(dst, {}))
    np.testing.assert_array_equal(out.to_dense(), dup.toarray())
    spf.Tensor(out.layout, out.shape, out.fields, check=True)


def _narrowed(tmp_path, layout: str, uf: str, bound: str, value: str) -> str:
    """``layout``'s file with the range of ``uf`` narrowed (``bound``: min or max), saved."""
    text = Path(spf.load_layout(layout).source).read_text()
    text = text.replace(f'name = "{layout}"', f'name = "{layout}Narrow"')
    text = "\n".join(line for line in text.splitlines() if not line.startswith("packer"))
    head, sep, rest = text.partition(f'kind = "range"\nuf = "{uf}"\n')
    assert sep, f"{layout} declares no range of {uf}"
    rest = "\n".join(f'{bound} = "{value}"' if line.startswith(f"{bound} =") else line
                     for line in rest.split("\n"))
    path = tmp_path / f"{layout}Narrow.toml"
    path.write_text(head + sep + rest + "\n")
    return str(path)


def test_coordinate_arrays_built_from_a_valid_source_are_not_range_checked(tmp_path,
                                                                           monkeypatch):
    """An array the relation reads only as a logical coordinate (CSC's rowIdx: ``gi =
    rowIdx(pi)``), assembled from a source that keeps its entries within its shape, holds
    coordinates inside a range containing the shape's extent: Python does not check it again
    (O(entries)); a narrowed range is still checked, and padded arrays are not such arrays."""
    from spf.front.established import coordinate_ranges
    from spf.front.properties import Range
    assert {p.uf for p in coordinate_ranges(spf.load_layout("CSC"))} == {"rowIdx"}
    assert {p.uf for p in coordinate_ranges(spf.load_layout("COO"))} == {"rowIdx", "colIdx"}
    assert not coordinate_ranges(spf.load_layout("ELL"))           # -1 marks padding
    assert not coordinate_ranges(spf.load_layout(_narrowed(tmp_path, "CSR", "colIdx", "min",
                                                           "1")))
    checked: list[str] = []
    check = Range.check
    monkeypatch.setattr(Range, "check", lambda self, *args: (checked.append(self.uf),
                                                             check(self, *args)))
    a = sp.random(30, 20, density=0.2, format="csr", random_state=2)
    out = spf.Tensor.from_scipy("CSR", a).convert("CSC")
    np.testing.assert_array_equal(out.to_dense(), a.toarray())
    assert "rowIdx" not in checked and "colPtr" in checked


def test_an_entry_a_narrowed_range_excludes_is_refused(tmp_path):
    """A layout whose range is narrower than its shape cannot store every entry: a conversion
    or a kernel writing one there is an ArgumentError (it built a tensor that broke the
    layout's own property without a word); entries inside the range are written."""
    csr1 = _narrowed(tmp_path, "CSR", "colIdx", "min", "1")
    ell = _narrowed(tmp_path, "ELL", "colIdx", "max", "numCols - 2")
    outside = spf.Tensor.from_dense("CSR", np.array([[1.0, 0, 2], [0, 3, 0]]))
    inside = spf.Tensor.from_dense("CSR", np.array([[0, 1.0, 0], [0, 3, 0]]))   # column 1
    want = ("CSRNarrow tensor: 'colIdx' violates range (1 <= colIdx(a) <= numCols - 1) at "
            "position 0: 0 < 1 (the layout cannot store that entry)")
    with pytest.raises(spf.ArgumentError) as err:
        outside.convert(csr1)
    assert str(err.value) == "output 'B' of kernel spf_convert_fill: " + want
    spgemm = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": csr1}).compile()
    with pytest.raises(spf.ArgumentError) as err:
        spgemm(A=outside, B=outside)
    assert str(err.value) == "output 'C' of kernel spf_kernel: " + want
    with pytest.raises(spf.ArgumentError, match=r"ELLNarrow cannot hold these entries: the "
                       r"fields its relation gives them fail its own checks \(ELLNarrow tensor: "
                       r"'colIdx' violates range \(-1 <= colIdx\(a\) <= numCols - 2\) at the "
                       r"read colIdx\[pi\]\[pk\] = colIdx\[0\]\[1\]: 2 > 1\)"):
        outside.convert(ell)
    for dst in (csr1, ell):
        np.testing.assert_array_equal(inside.convert(dst).to_dense(), inside.to_dense())
    np.testing.assert_array_equal(spgemm(A=inside, B=inside).to_dense(), inside.to_dense() ** 2)


VISITED = [("CSR", "ELL"), ("COO", "SELL_sigma"), ("CSC", "JDS"), ("DCSR", "CSR4"),
           ("DIA", "BCSR"), ("BCSR", "DIA")]


@pytest.mark.parametrize("src,dst", VISITED)
def test_a_written_conversion_reads_the_source_in_its_own_loops(src, dst):
    """Where the source's loops visit each entry once (Z3 proves no two share coordinates;
    a padded source's zeros skipped), the writer's passes run inside them and no entry list
    is built; every case against numpy."""
    conv = spf.Conversion(src, dst, allow_padding=True, **PARAMS.get(src, {}))
    text = conv.c_source()
    assert "no entry list is built" in text and "spf_convert_entries(&spf_list" not in text
    f = conv.compile()
    for name, dense in CASES.items():
        out = f(pack(src, dense))
        assert out.layout.name == dst and out.shape == dense.shape, name
        np.testing.assert_array_equal(out.to_dense(), dense, err_msg=name)
        spf.Tensor(out.layout, out.shape, out.fields, check=True)


def test_a_union_source_is_read_into_an_entry_list():
    """A union source (its parts read in turn) gives no single visit of its entries."""
    text = spf.Conversion("SymCSR", "ELL").c_source()
    assert "no entry list is built" not in text and "spf_convert_entries(&spf_list" in text


def test_a_refusal_naming_another_visited_entry_finds_it_again(tmp_path):
    """Two entries that one value slot cannot hold: the writer visiting the source names
    both (the other one found by visiting the source again, only on failure)."""
    csr = (Path(spf.__file__).parent.parent / "layouts" / "CSR.toml").read_text()
    text = csr.replace('name = "CSR"', 'name = "RowValue"').replace(
        'value = "data[pj]"', 'value = "data[pi]"').replace(
        'data = "double[rowPtr(numRows)]"', 'data = "double[numRows]"').replace(
        'packer = "CSR.py"\n', "")
    assert text.count("RowValue") == 1 and 'value = "data[pi]"' in text \
        and 'data = "double[numRows]"' in text and "packer" not in text
    path = tmp_path / "RowValue.toml"
    path.write_text(text)
    conv = spf.Conversion("CSR", str(path))
    assert "no entry list is built" in conv.c_source()
    dense = np.zeros((3, 4))
    dense[1, 0], dense[2, 3] = 2.0, 5.0
    out = conv.compile()(spf.Tensor.from_dense("CSR", dense))
    np.testing.assert_array_equal(out.to_dense(), dense)
    dense[1, 2] = 3.0
    with pytest.raises(spf.ArgumentError, match=r"RowValue cannot hold both entries \(1, 0\) "
                                                r"and \(1, 2\): they would share the value "
                                                r"slot data\[1\]"):
        conv.compile()(spf.Tensor.from_dense("CSR", dense))
