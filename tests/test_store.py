"""The write path in C (spf.store): limits and edge cases (the C of each conversion called
from a C driver: tests/test_conversion_c_driver.py)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
import spf.store
from spf.back import ctree as t
from spf.front.layout_path import load_layout
from spf.front.properties import Permutation
from spf.front.terms import Aff, FloorDiv
from spf.front.writing import slots_disjoint, write_plan
from spf.runtime.memory import allocation_limit
from spf.runtime.writer import write
from spf.store.lower import _recovers


def test_the_byte_limit_is_checked_before_the_c_allocates():
    t = spf.Tensor.from_scipy("CSR", sp.eye(3000, format="csr"))
    with allocation_limit(1 << 12, "a test's limit"), \
            pytest.raises(spf.ArgumentError, match=r"SELL_sigma's .* would take .* MB, over"):
        t.convert("SELL_sigma")


@pytest.mark.parametrize("shape", [(0, 0), (4, 3), (1, 1)])
def test_empty_and_one_entry_tensors_are_written(shape):
    a = np.zeros(shape)
    if a.size:
        a[-1, -1] = 2.5
    for dst in ("SELL_sigma", "JDS", "ELLPACK_R", "CSR4"):
        out = spf.Tensor.from_dense("CSR", a).convert(dst, allow_padding=True)
        np.testing.assert_array_equal(out.to_dense(), a, err_msg=dst)


def _listed_writer(layout: str) -> str:
    """The writer's C given an entry list (kernel outputs, tensors built from entries)."""
    return spf.store.writer_source(write_plan(load_layout(layout)), "w").definition


def test_the_writer_skips_copies_fills_and_narrowing_it_does_not_need():
    """Issue 53 (speed): an index array stored per entry is written in its own width (no
    int64 array narrowed afterwards), arrays every slot of which the entries write are not
    filled first, and coordinates arriving in key order are ranked without int64 copies."""
    text = spf.Conversion("CSR", "CSR4").c_source()
    visiting = text[text.index("int spf_convert_write("):text.index("int spf_convert(")]
    # the source's loops visit the entries in key order (Z3): no rank vector, no sort at all
    assert "Z3 proved that the source's loops visit the entries in this order" in visiting
    assert "spf_st_ranks(" not in visiting and "spf_st_vector(n)" not in visiting
    writer = _listed_writer("CSR4")         # given a list: ranked in order where it is
    assert "spf_index_t * spf_colIdx_" in writer and "spf_out_colIdx" not in writer
    assert "spf_st_values(spf_data_" in writer and ", !(" in writer     # zeroed only if padded
    in_order, out_of_order = writer.split("if (!spf_in_order_")
    assert "spf_st_vector(n);" not in in_order.split("ranks of the keys within their groups")[1]
    assert "spf_st_ranks(" in out_of_order and "spf_st_ranks(" not in in_order


def test_the_writer_tests_only_what_its_passes_do_not_establish():
    """Issue 53 (speed): the constraints over the coordinates alone (and the shape) are tested
    in one first pass; a key stored at the slot its rank gives (CSR4's colIdx(pj), ELL's
    colIdx(pi, pk)), a rank's bounds, an extent set from the coordinates, a constraint true at
    every integer point (BCSR's pk <= 7 for pk = gi - 8*floor(gi/8)) and a group the first pass
    keeps inside its pointer array are not tested again; entries in key order, one per key,
    sit at their own numbers (no rank vector).  Reading a source that keeps its entries within
    its shape (a CSR), the first pass only counts them: none is tested against the shape or
    against a constraint every coordinate within it meets."""
    writers = {}
    for dst in ("ELL", "ELLPACK_R", "BlockedELL", "BCSR", "CSR4"):
        assert _listed_writer(dst).count("the constraints over the coordinates alone, in one "
                                         "pass") == 1
        text = spf.Conversion("CSR", dst).c_source()
        writers[dst] = text[text.index("int spf_convert_write("):text.index("int spf_convert(")]
        assert "the entries counted (n): the source keeps them within its shape" in writers[dst]
        assert "outside the shape" not in text and "relation requires" not in text, dst
        assert "every constraint of the relation, at every entry" not in writers[dst], dst
    assert "each entry's group, checked" not in writers["CSR4"]
    in_order, out_of_order = _listed_writer("CSR4").split("if (!spf_in_order_")
    rank = re.search(r"(spf_rank_\d+) = spf_st_vector\(n\);", out_of_order)
    assert rank and f"{rank[1]} = spf" not in in_order and f"{rank[1]}[" not in in_order


@pytest.mark.parametrize(("layout", "rows", "cols", "why"), [
    ("CSR4", [0, 3], [1, 1], "entry (3, 1) cannot be stored in CSR4: its relation requires "
                             "pi < numRows"),
    ("CSR4", [0, -1], [1, 1], "entry (-1, 1) cannot be stored in CSR4: its relation requires "
                              "gi >= 0"),
    ("ELL", [0, 1], [1, -2], "entry (1, -2) cannot be stored in ELL: its relation requires "
                             "gj >= 0"),
    ("ELL", [0, 1], [1, 4], "entry (1, 4) cannot be stored in ELL: it lies outside the shape "
                            "(numRows, numCols)"),
    ("BCSR", [0, 1], [1, -3], "entry (1, -3) cannot be stored in BCSR: it lies outside the "
                              "shape (numRows, numCols)")])
def test_the_first_pass_refuses_coordinates_the_relation_excludes(layout, rows, cols, why):
    """The C writer alone (no Python check of the coordinates first) refuses an entry its
    relation excludes, naming the constraint, before any slot is computed from it."""
    with pytest.raises(spf.ArgumentError, match=re.escape(why)):
        write(write_plan(load_layout(layout)), (3, 4), [np.array(rows), np.array(cols)],
              np.array([1.0, 2.0]))


@pytest.mark.parametrize("src", ["CSR", "CSC"])      # entries in key order, and not
def test_written_layouts_match_scipy_from_ordered_and_unordered_entries(src):
    a = sp.random(37, 23, density=0.2, format="csr", random_state=3)
    a[5, :] = 0                                      # an empty row
    a.eliminate_zeros()
    t = spf.Tensor.from_scipy(src, a if src == "CSR" else a.tocsc())
    for dst in ("ELL", "CSR4", "JDS"):
        out = t.convert(dst, allow_padding=True)
        np.testing.assert_array_equal(out.to_dense(), a.toarray(), err_msg=f"{src}->{dst}")


def _visiting(dst: str) -> str:
    text = spf.Conversion("CSR", dst).c_source()
    return text[text.index("int spf_convert_write("):text.index("int spf_convert(")]


def test_a_head_runs_once_per_run_of_the_innermost_loop_around_the_entries():
    """ctree: ``fill``'s head goes just before the innermost loop around each hole, and the
    names declared outside that loop are fixed for a whole run of it (none where a hole lies
    in no loop, or one hole sees a name declared inside)."""
    inner = t.For("int pj = 0", "pj < 3", "++pj", [t.Declare("int", "j", "pj"), t.Hole("v")])
    nest = [t.For("int pi = 0", "pi < 2", "++pi", [t.Declare("int", "i", "pi"), inner])]
    filled = t.fill(nest, [t.Call("body")], [t.Call("head")])
    assert [type(n).__name__ for n in filled[0].body] == ["Declare", "Call", "For"]
    assert filled[0].body[1].expr == "head" and filled[0].body[2].body[1].expr == "body"
    assert t.declared_outside(nest, ["i", "j"]) == {"i"}
    assert t.declared_outside([t.Declare("int", "i", "0"), t.Hole("v")], ["i"]) == set()
    flat = t.For("int p = 0", "p < 3", "++p", [t.Declare("int", "i", "p"), t.Hole("v")])
    assert t.declared_outside([*nest, flat], ["i"]) == set()


@pytest.mark.parametrize("src", ["CSR", "DCSR"])
def test_groups_fixed_per_run_of_the_inner_loop_are_compared_once_per_run(src):
    """Issue 53 (speed): a row's entries arrive in one run of the source's inner loop, so
    ELLPACK_R's ranks reset where a run starts (the row compared once per run, with the entry
    before, however many rows are empty in between), not at every entry; the result is
    scipy's."""
    text = spf.Conversion(src, "ELLPACK_R").c_source()
    assert re.search(r"spf_fresh_\d+ = e == 0 \|\| spf_prev0 != \(int64_t\)i;", text)
    a = sp.random(41, 17, density=0.3, format="csr", random_state=5)
    for r in (0, 6, 7, 8, 40):
        a[r, :] = 0                                  # empty rows, first, together and last
    a.eliminate_zeros()
    t_ = spf.Tensor.from_scipy("CSR", a)
    out = (t_ if src == "CSR" else t_.convert(src)).convert("ELLPACK_R", allow_padding=True)
    np.testing.assert_array_equal(out.to_dense(), a.toarray())
    np.testing.assert_array_equal(out.fields["rowLen"], np.diff(a.indptr))


def test_ranks_out_of_the_source_order_need_no_sort_where_a_table_or_the_groups_give_them():
    """Issue 53 (speed): in the source's loops, SELL-C-sigma's groups (s, r) are a one-to-one
    function of the row (perm⁻¹(gi) = 4*s + r), so each group's entries arrive together in
    column order: ranks are counted where read, no vector, no sort (JDS's too: its group is
    the row's slot perm⁻¹(gi)); DIA's diagonals arrive out
    of order: each rank is read from a table over the offsets (no copy of them, no sort), a
    sort only where that range is too wide for a table."""
    sell = _visiting("SELL_sigma")
    assert "counted where they are read (each group's entries arrive together)" in sell
    assert "spf_st_ranks(" not in sell and "spf_st_vector(n)" not in sell
    jds = _visiting("JDS")     # its rows' slots perm⁻¹(gi), kept as a vector: the row again
    assert "spf_st_ranks(" not in jds and "Z3 proved that the source's loops" in jds
    dia = _visiting("DIA")
    assert "each rank read from a table over the columns' joint range" in dia
    assert dia.index("calloc((size_t)spf_span") < dia.index("spf_st_ranks(")


@pytest.mark.parametrize(("shape", "coords"), [
    ((40, 30), None),                                   # offsets within 4n + 64: a table
    ((3000, 3000), ([0, 1, 2999], [2999, 0, 5])),       # 3 entries, far apart: the sort
    ((30, 40), (list(range(30)), list(range(5, 35))))])     # one diagonal: in order
def test_dia_from_a_table_or_a_sort_matches_scipy(shape, coords):
    """Each way the store pass reads the diagonals' ranks (in order, from the table, from
    the sorted vector; one loop printed per way, chosen at run time) matches scipy."""
    text = _visiting("DIA")
    for mode in ("the running count", "the table over the keys", "the rank vector"):
        assert f"the ranks read as {mode}" in text
    if coords is None:
        a = sp.random(*shape, density=0.3, format="csr", random_state=7)
    else:
        a = sp.csr_matrix((np.arange(1.0, len(coords[0]) + 1), coords), shape=shape)
    out = spf.Tensor.from_scipy("CSR", a).convert("DIA", allow_padding=True)
    want = a.todia()
    assert out["offset"].tolist() == sorted(want.offsets.tolist())
    np.testing.assert_array_equal(out.to_dense(), a.toarray())


@pytest.mark.parametrize(("shape", "density"), [
    ((64, 48), 0.3),            # block columns within 4n + 64: a workspace over them
    ((16, 4000), 0.001)])       # few entries, wide: each block row's run sorted
def test_bcsr_block_ranks_from_a_workspace_or_a_sort_match_scipy(shape, density):
    a = sp.random(*shape, density=density, format="csr", random_state=11) + \
        sp.csr_matrix(([1.0], ([0], [0])), shape=shape)      # one entry at least
    out = spf.Tensor.from_scipy("CSR", a).convert("BCSR", allow_padding=True)
    want = a.tobsr((8, 8))
    want.sort_indices()
    assert out["colIdx"].tolist() == (want.indices * 8).tolist()
    np.testing.assert_array_equal(out.to_dense(), a.toarray())


def test_a_source_not_kept_within_its_shape_has_its_entries_tested(tmp_path):
    """A visited source whose relation and ranges do not keep its entries within its shape
    (a CSR without colIdx's range) gets the shape's tests in the writer's first pass; one
    that keeps them (the shipped CSR) gets none (its C says the source must be valid)."""
    text = load_layout("CSR").source
    loose = tmp_path / "CSR_loose.toml"
    loose.write_text(Path(text).read_text().replace('name = "CSR"', 'name = "CSR_loose"')
                     .replace('packer = "CSR.py"\n', "")
                     .replace('[[properties]]\nkind = "range"\nuf = "colIdx"\nmin = "0"\n'
                              'max = "numCols - 1"\n\n', ""))
    conv = spf.Conversion(str(loose), "CSR4")
    c = conv.c_source()
    assert "no entry list is built" in c and "lies outside the shape" in c
    assert "must be a valid" not in c
    assert "must be a valid" in spf.Conversion("CSR", "CSR4").c_source()
    a = sp.random(9, 7, density=0.4, format="csr", random_state=5)
    t = spf.Tensor(conv.src, a.shape, {"numRows": 9, "numCols": 7, "rowPtr": a.indptr,
                                        "colIdx": a.indices, "data": a.data})
    np.testing.assert_array_equal(conv.compile()(t).to_dense(), a.toarray())


_ELL3 = '''name = "ELL3"
relation = """{[pi, pk] -> [gi, gj] : 0 <= pi < numRows and 0 <= pk < width and
    0 <= colIdx(pi, pk) and gi = pi and gj = colIdx(pi, pk)}"""
value = "data[pi][pk]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
width = "int"
colIdx = "int[numRows][3]"
data = "double[numRows][3]"

[[properties]]
kind = "range"
uf = "colIdx"
min = "-1"
max = "numCols - 1"
'''


def test_slots_proven_within_their_arrays_are_not_tested_and_others_are(tmp_path):
    """A store whose slot lies within the array at every entry (ELLPACK_R's row within the
    shape, its rank below the width the ranks set; the column, a coordinate the source holds
    in the index type) is not tested per entry; a slot an extent does not cover (an ELL whose
    arrays are declared 3 slots wide) is, and refused in words."""
    ell = spf.Conversion("CSR", "ELLPACK_R").c_source()
    assert "would be written outside" not in ell and "colIdx holds values beyond" not in ell
    short = tmp_path / "ELL3.toml"
    short.write_text(_ELL3)
    conv = spf.Conversion("CSR", str(short))
    assert "it would be written outside colIdx" in conv.c_source()
    with pytest.raises(spf.ArgumentError, match="written outside colIdx"):
        conv.compile()(spf.Tensor.from_scipy("CSR", sp.csr_matrix(np.ones((2, 4)))))
    three = sp.csr_matrix(np.triu(np.ones((4, 3))))
    np.testing.assert_array_equal(conv.compile()(spf.Tensor.from_scipy("CSR", three)).to_dense(),
                                  three.toarray())


_U = Aff.var("u")
_Q4, _Q2 = Aff.var(FloorDiv(_U, 4)), Aff.var(FloorDiv(_U, 2))


@pytest.mark.parametrize(("values", "one_to_one"), [
    ([_Q4, _U - _Q4 * 4], True),            # SELL's slice and row: u = 4*s + r
    ([_U], True), ([_U * 2 + 3], True),
    ([_Q4], False), ([_U - _Q4 * 4], False),
    ([_Q4, _Q2], False),                    # u = 0 and u = 1 agree on both
    ([_U + Aff.var("gj")], False)])         # another coordinate
def test_groups_are_taken_as_one_to_one_only_where_they_give_the_coordinate_back(values,
                                                                                 one_to_one):
    """The writer counts ranks as a group's entries arrive together only where the groups
    determine the visited coordinate (``_recovers``): a wrong yes would rank two groups'
    entries as one."""
    assert _recovers(_U, values) is one_to_one


_SELL = (Path(spf.__file__).parent.parent / "layouts" / "SELL_sigma.toml")


def _sell_variant(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    text = _SELL.read_text().replace('name = "SELL_sigma"', f'name = "{name}"')
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_slots_a_prefix_sum_keeps_apart_are_proven_one_per_point(tmp_path):
    """Issue 53 (speed): SELL's value slot slicePtr(s) + 4*k + r, with slicePtr =
    prefix_sum(4 * sliceWidth) and sliceWidth non-negative, is a distinct slot at each point
    (isl: 4*k + r is one-to-one and within 0..4*sliceWidth(s) - 1), so the written tensor
    reads back its entries by construction: no owner per slot, no read-back pass, and the
    constraints a permutation and its inverse give (r, s from perm⁻¹(gi); gi = perm(4*s + r))
    are not tested per entry.  Slots that could meet (a slice's inner offset k + r, the
    prefix sum of sliceWidth alone, or a sliceWidth not declared non-negative) are not."""
    sell = load_layout("SELL_sigma")
    assert slots_disjoint(sell, write_plan(sell).first.conj)
    visiting = _visiting("SELL_sigma")
    assert "spf_owner" not in visiting and "spf_points" not in visiting
    assert "every constraint of the relation, at every entry" not in visiting
    overlapping = {
        "SellKR": [("slicePtr(s) + C*k + r)", "slicePtr(s) + k + r)"),
                   ('"data[slicePtr(s) + C*k + r]"', '"data[slicePtr(s) + k + r]"')],
        "SellScale": [('"prefix_sum(C * sliceWidth)"', '"prefix_sum(sliceWidth)"')],
        "SellSigned": [('uf = "sliceWidth"\nmin = "0"', 'uf = "sliceWidth"\nmin = "-1"')]}
    d = sp.random(41, 23, density=0.15, random_state=5).toarray()
    d[7, :] = 0                             # an empty row
    a = sp.csr_matrix(d)
    t = spf.Tensor.from_scipy("CSR", a)
    for name, edits in overlapping.items():
        lay = load_layout(str(_sell_variant(tmp_path, name, *edits)))
        assert not slots_disjoint(lay, write_plan(lay).first.conj), name
        text = spf.Conversion("CSR", lay).c_source()
        assert "spf_owner" in text or "spf_points" in text, name
    out = t.convert("SELL_sigma", allow_padding=True)
    np.testing.assert_array_equal(out.to_dense(), a.toarray())
    with pytest.raises(spf.ArgumentError, match=r"SellScale cannot hold both entries .* would "
                                                r"share the value slot data\["):
        t.convert(str(tmp_path / "SellScale.toml"), allow_padding=True)


@pytest.mark.parametrize("shape", [(0, 5), (9, 1), (1, 9), (37, 70)])
def test_sell_written_without_read_back_matches_scipy(shape):
    """Empty rows, one row, one column, rectangular: SELL (written by construction) and back."""
    rng = np.random.default_rng(sum(shape))
    d = sp.random(*shape, density=0.3, random_state=rng).toarray()
    if shape[0] > 3:
        d[[2, -1], :] = 0                   # empty rows, the last one too
    a = sp.csr_matrix(d)
    for src in ("CSR", "COO"):
        out = spf.Tensor.from_scipy(src, a).convert("SELL_sigma", allow_padding=True)
        np.testing.assert_array_equal(out.to_dense(), a.toarray(), err_msg=src)
        np.testing.assert_array_equal(out.convert("CSR").to_scipy().toarray(), a.toarray())


def test_values_fixed_per_run_are_computed_once_per_run_and_a_built_permutation_kept():
    """Issue 53 (speed): in a CSR source's loops, SELL's slice and row-in-slice (from
    perm⁻¹(gi)) are fixed for a whole row: computed where the row's run starts, not per entry;
    perm, built whole by its sort, is not stored again per entry (perm(perm⁻¹(gi)) = gi), so it
    is a permutation by construction and not checked again in Python."""
    sell = _visiting("SELL_sigma")
    store = sell[sell.index("/* stored per entry:"):]
    assert store.startswith("/* stored per entry: colIdx, data */")
    head, inner = store.split("for (spf_index_t A_pj", 1)
    assert "const int64_t spf_run_s =" in head and "const int64_t spf_run_r =" in head
    assert "spf_run_s" in inner.split("}\n    }\n")[0] and "perm⁻" not in inner.split("\n")[0]
    written = spf.Conversion("CSR", "SELL_sigma").compile()
    assert any(isinstance(p, Permutation) for p in written.source.proven)
    d = np.zeros((9, 6))
    d[[0, 3, 3, 8], [5, 0, 4, 2]] = [1.0, 2.0, 3.0, 4.0]
    out = spf.Tensor.from_dense("CSR", d).convert("SELL_sigma", allow_padding=True)
    assert sorted(out.fields["perm"]) == list(range(9))
    np.testing.assert_array_equal(out.to_dense(), d)


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (30, 17)])
def test_jds_run_positions_are_proven_within_their_groups(shape):
    """Issue 53 (speed): JDS's pp = jdPtr(pd) + perm⁻¹(gi) (a run pinned at its group's start)
    lies within its group by construction and gives gi = perm(pp - jdPtr(pd)) back through the
    inverse: neither is tested per entry, perm (built whole) is not stored again, and pd's
    group (a rank below numDiags) is not checked against jdPtr; only gj = colIdx(pp) is."""
    jds = _visiting("JDS")
    assert "each entry's group, checked" not in jds
    assert "/* stored per entry: colIdx, data */" in jds
    text = spf.Conversion("CSR", "JDS").c_source()
    header = text[:text.index("#include")]
    assert "relation requires gj = colIdx(pp)" in header
    assert "relation requires gi = perm" not in header and "requires pp < jdPtr" not in header
    d = sp.random(*shape, density=0.3, random_state=7).toarray()
    if shape[0] > 3:
        d[[0, 4, -1], :] = 0                # empty rows: first, inside, last
        d[5, :] = 1.0                       # a full row: the longest
    out = spf.Tensor.from_dense("CSR", d).convert("JDS")
    np.testing.assert_array_equal(out.to_dense(), d)
    assert sorted(out.fields["perm"]) == list(range(shape[0]))
