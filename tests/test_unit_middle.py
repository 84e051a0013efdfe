"""Unit tests of ``spf/middle``: the iteration space, the default loop order and scanning,
against nests derived by hand from the layouts' relations (paper Sec. 4 and Algorithm 1).

No C is compiled (the ``unit`` marker makes compiling fail the test): kernels are built up
to their decisions, which is all of the middle and decision layers and none of the C.
"""
from __future__ import annotations

import pytest

import spf
from spf.middle.scan import LevelKind, LoopNest

pytestmark = pytest.mark.unit
SPMV = "y(i) = A(i,j) * x(j)"


def nest_text(nest: LoopNest) -> list[str]:
    """The nest as lines: loops with their bounds (several: max/min), assignments and the
    guards left in it (index-array reads are implied by the terms that use them)."""
    def bound(terms: list, pick: str, rounding: str) -> str:
        texts = [str(a) if d == 1 else f"{rounding}(({a})/{d})" for a, d in terms]
        return texts[0] if len(texts) == 1 else f"{pick}({', '.join(texts)})"

    out = []
    for lv in nest.levels:
        if lv.kind is LevelKind.LOOP:
            out.append(f"for {lv.var} in [{bound(lv.lower, 'max', 'ceil')}, "
                       f"{bound(lv.upper, 'min', 'floor')}]")
        elif lv.kind is LevelKind.ASSIGN:
            out.append(f"{lv.var} = {lv.expr}")
        out += [f"if {g}" for g in lv.guards]
    return out + [f"if {g}" for g in nest.statement_guards]


# -- the iteration space ------------------------------------------------------------------
def test_csr_spmv_space_is_the_composition_of_the_layouts_with_the_accesses():
    """IS = {[A_pi, A_pj, x_p0, y_p0, i, j] : R_A(A_pi, A_pj) -> (i, j) ∧ R_x(x_p0) -> j ∧
    R_y(y_p0) -> i}: CSR's relation with its fields named after the tensor, and the dense
    vectors' extents replaced by A's (the first tensor using an index defines it)."""
    space = spf.Kernel(SPMV, {"A": "CSR"}).space
    assert space.variables == ["A_pi", "A_pj", "x_p0", "y_p0", "i", "j"]
    assert [str(c) for c in space.constraints] == [
        "A_pi >= 0", "A_pi < A.numRows", "A.rowPtr(A_pi) <= A_pj", "A_pj < A.rowPtr(A_pi + 1)",
        "A_pi = i", "j = A.colIdx(A_pj)",
        "x_p0 >= 0", "x_p0 < A.numCols", "j = x_p0",
        "y_p0 >= 0", "y_p0 < A.numRows", "i = y_p0"]
    assert {i: str(e) for i, e in space.extent.items()} == {"i": "A.numRows", "j": "A.numCols"}
    # the declared ranges of every index-array read are facts, not constraints
    assert sorted(map(str, space.facts)) == [
        "A.colIdx(A_pj) < A.numCols", "A.colIdx(A_pj) >= 0",
        "A.rowPtr(A_pi + 1) >= 0", "A.rowPtr(A_pi) >= 0"]
    assert [(u.name, u.vars, u.is_output, u.is_sparse) for u in space.uses] == [
        ("A", ("A_pi", "A_pj"), False, True), ("x", ("x_p0",), False, False),
        ("y", ("y_p0",), True, False)]


def test_a_sparse_vector_brings_its_positions_and_its_index_array():
    space = spf.Kernel("v = A(i) * B(i)", {"A": "SV", "B": "SV_unsorted"}).space
    assert space.variables == ["A_p", "B_p", "i"]
    assert [str(c) for c in space.constraints] == [
        "A_p >= 0", "A_p < A.len", "i = A.idx(A_p)", "B_p >= 0", "B_p < B.len", "i = B.idx(B_p)"]
    # B's extent of i is A's: B.size is replaced by A.size, in B's declared range too
    assert [str(c) for c in space.facts] == ["A.idx(A_p) >= 0", "A.idx(A_p) < A.size",
                                             "B.idx(B_p) >= 0", "B.idx(B_p) < A.size"]


def test_bounds_and_tiles_are_constraints_of_the_space():
    bounded = spf.Kernel(SPMV, {"A": "CSR"}, bounds="j <= i").space
    assert str(bounded.constraints[-1]) == "j <= i"
    tiled = spf.Kernel(SPMV, {"A": "CSR"}, tile={"A.pi": 8}).space
    assert tiled.variables[:2] == ["A_pi_tile", "A_pi"]      # right before its variable
    assert tiled.tiles == {"A_pi_tile": ("A_pi", 8)}
    assert [str(c) for c in tiled.constraints[-2:]] == ["8*A_pi_tile <= A_pi",
                                                         "A_pi <= 8*A_pi_tile + 7"]


def test_space_refuses_an_index_named_like_a_loop_variable():
    """A kernel's space names such an index otherwise (spf_u_A_pi, as its C does); the space
    itself refuses the clash."""
    from spf.front.kernel_spec import parse_expr
    from spf.middle.iteration_space import build
    dense = spf.load_layout("DenseVector")
    with pytest.raises(spf.SpecError) as err:
        build(parse_expr("y(A_pi) = A(A_pi,j) * x(j)"),
              {"A": spf.load_layout("CSR"), "x": dense, "y": dense}, [])
    assert str(err.value) == "<string>: index name(s) ['A_pi'] clash with layout index names"


@pytest.mark.parametrize("expr, layouts, options, message", [
    ("y(i) = A(i) * x(i)", {"A": "CSR"}, {},
     "<string>:1:8: tensor 'A' is used with 1 indices but its layout CSR has 2 dimensions"),
    (SPMV, {"A": "CSR"}, {"bounds": "j <= n"},
     "<string>: bound j <= n may only use the kernel's indices ['i', 'j']"),
])
def test_spaces_that_cannot_be_built(expr, layouts, options, message):
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel(expr, layouts, **options)
    assert str(err.value) == message


# -- the default loop order ---------------------------------------------------------------
@pytest.mark.parametrize("expr, layouts, order", [
    (SPMV, {"A": "CSR"}, ["A_pi", "A_pj"]),
    (SPMV, {"A": "COO"}, ["A_p"]),
    (SPMV, {"A": "CSR", "x": "SV"}, ["A_pi", "A_pj", "x_p"]),       # x is searched: a find
    ("v = A(i) * B(i)", {"A": "SV", "B": "SV"}, ["A_p", "B_p"]),
    ("C(i,j,l) = A(i,j,k) * B(k,l)", {"A": "CSF"}, ["A_p0", "A_p1", "A_p2"]),
])
def test_default_order_is_operand_by_operand(expr, layouts, order):
    k = spf.Kernel(expr, layouts)
    assert list(k.order) == order and k.order_why == ()


def test_locate_before_find_iterates_x_and_locates_the_csc_column():
    """Push SpMSpV: A_pj = j is a dense level, located from the j that x's index array
    gives, so x's loop moves before it (no find)."""
    k = spf.Kernel(SPMV, {"A": "CSC", "x": "SV"})
    assert k.order == ("x_p", "A_pj", "A_pi")
    assert k.order_why == ("x_p placed before A_pj: A_pj is located from j, which x's index "
                           "array gives at x_p (iterate x's entries, locate into A)",)
    assert k.decisions == ()


def test_a_mask_drives_the_loops():
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR", "M": "CSR"},
                   mask={"C": "M"})
    assert k.order[:2] == ("M_pi", "A_pi")
    assert k.order_why == ("the mask M's loops placed first: its entries are the only output "
                           "elements computed (no product is formed and then dropped)",)


def test_a_given_order_is_kept():
    k = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"}, order=["x.p", "A.pi", "A.pj"])
    assert k.order == ("x_p", "A_pi", "A_pj") and k.order_why == ()


# -- scanning -------------------------------------------------------------------------------
@pytest.mark.parametrize("layout, nest", [
    # paper Fig. 1(b): the CSR SpMV loop nest
    ("CSR", ["for A_pi in [0, A.numRows - 1]", "i = A_pi", "y_p0 = A_pi",
             "for A_pj in [A.rowPtr(A_pi), A.rowPtr(A_pi + 1) - 1]", "j = A.colIdx(A_pj)",
             "x_p0 = j"]),
    ("DCSR", ["for A_pi in [0, A.numNZRows - 1]", "i = A.rowIdx(A_pi)", "y_p0 = i",
              "for A_pj in [A.rowPtr(A_pi), A.rowPtr(A_pi + 1) - 1]", "j = A.colIdx(A_pj)",
              "x_p0 = j"]),
    ("COO", ["for A_p in [0, A.numNNZ - 1]", "i = A.rowIdx(A_p)", "j = A.colIdx(A_p)",
             "x_p0 = j", "y_p0 = i"]),
    # ELL pads rows with -1: the padding test is the one guard that stays
    ("ELL", ["for A_pi in [0, A.numRows - 1]", "i = A_pi", "y_p0 = A_pi",
             "for A_pk in [0, A.width - 1]", "if A.colIdx(A_pi, A_pk) >= 0",
             "j = A.colIdx(A_pi, A_pk)", "x_p0 = j"]),
    # a diagonal's rows: inside both the matrix's rows and its columns
    ("DIA", ["for A_pd in [0, A.numDiags - 1]",
             "for A_pi in [max(0, -A.offset(A_pd)), min(A.numRows - 1, "
             "A.numCols - A.offset(A_pd) - 1)]",
             "i = A_pi", "j = A_pi + A.offset(A_pd)", "x_p0 = A_pi + A.offset(A_pd)",
             "y_p0 = A_pi"]),
    ("LowerTri", ["for A_pi in [0, A.numRows - 1]", "i = A_pi", "y_p0 = A_pi",
                  "for A_pj in [0, A_pi]", "j = A_pj", "x_p0 = A_pj"]),
])
def test_spmv_nests(layout, nest):
    assert nest_text(spf.Kernel(SPMV, {"A": layout}).nest) == nest


def test_guards_the_nest_implies_are_dropped():
    """CSR: "row A_pi is non-empty" (rowPtr(A_pi) < rowPtr(A_pi + 1)) holds wherever the
    A_pj loop runs, and colIdx's declared range is a fact: neither is tested."""
    nest = spf.Kernel(SPMV, {"A": "CSR"}).nest
    dropped = {str(g) for lv in nest.levels for g in lv.dropped}
    assert {"A.rowPtr(A_pi) < A.rowPtr(A_pi + 1)", "A.colIdx(A_pj) >= 0",
            "A.colIdx(A_pj) < A.numCols"} <= dropped
    assert all(not lv.guards for lv in nest.levels) and nest.statement_guards == []


def test_a_bound_on_the_indices_becomes_a_guard():
    nest = spf.Kernel(SPMV, {"A": "CSR"}, bounds="j <= i").nest
    assert "if A.colIdx(A_pj) <= A_pi" in nest_text(nest)


def test_a_search_is_a_loop_with_an_equality_guard():
    """Sec. 7.2's permuted SpMSpV before find synthesis: the loop over A's row compares its
    column with x's (the guard a find replaces)."""
    nest = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"}, order=["x.p", "A.pi", "A.pj"],
                      find="loop").nest
    assert nest_text(nest) == [
        "for x_p in [0, x.len - 1]", "j = x.idx(x_p)", "for A_pi in [0, A.numRows - 1]",
        "i = A_pi", "y_p0 = A_pi", "for A_pj in [A.rowPtr(A_pi), A.rowPtr(A_pi + 1) - 1]",
        "if j = A.colIdx(A_pj)"]
    reads = [lv for lv in nest.levels if lv.kind is LevelKind.READ and lv.guards]
    assert [str(lv.call) for lv in reads] == ["A.colIdx(A_pj)"]


def test_csf_nest_follows_the_fibres():
    nest = spf.Kernel("C(i,j,l) = A(i,j,k) * B(k,l)", {"A": "CSF"}).nest
    loops = [line for line in nest_text(nest) if line.startswith("for")]
    assert loops == ["for A_p0 in [0, A.n0 - 1]",
                     "for A_p1 in [A.ptr1(A_p0), A.ptr1(A_p0 + 1) - 1]",
                     "for A_p2 in [A.ptr2(A_p1), A.ptr2(A_p1 + 1) - 1]",
                     "for B_p1 in [0, B.n1 - 1]"]


def test_an_order_against_the_bounds_is_refused():
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel(SPMV, {"A": "CSR"}, order=["A.pj", "A.pi"])
    assert str(err.value) == ("<string>: loop order: A.pj cannot run outside A.pi: its upper "
                              "bound depends on A.pi; place A.pi before A.pj")
