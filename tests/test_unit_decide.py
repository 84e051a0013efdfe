"""Unit tests of ``spf/decide``: find synthesis, dependence analysis, statement splitting and
the options schema, against decisions derived by hand (paper Fig. 2, Fig. 7, Fig. 11,
Sec. 5-7).

No C is compiled (the ``unit`` marker makes compiling fail the test): kernels are built up
to their decisions only.
"""
from __future__ import annotations

import pickle

import pytest

import spf
from spf.concurrency import symbolic
from spf.decide.options import NAMES, check_given, option
from spf.decide.synthesis import cost_model
from spf.front.kernel_spec import parse_expr
from spf.middle.z3limit import Z3_TIMEOUT_ENV, Z3_TIMEOUT_MS

pytestmark = pytest.mark.unit
SPMV = "y(i) = A(i,j) * x(j)"
DOT = "v = A(i) * B(i)"
UNSORTED = "layout SV_unsorted declares no order property"


def algorithm(decision) -> str:
    return decision.chosen.algorithm if decision.chosen else "loop"


# -- find synthesis -----------------------------------------------------------------------
def test_fig2d_sorted_dot_scans_b_once():
    """Fig. 2(d): A's loop drives; B is searched with SeqIter, its position kept across the
    whole loop (state over no index: initialised once, before the loop)."""
    (d,) = spf.Kernel(DOT, {"A": "SV", "B": "SV"}).decisions
    assert (d.find.use.name, d.find.var) == ("B", "B_p")
    assert [(str(call), str(key)) for call, key in d.find.keys] == [("B.idx(B_p)", "i")]
    assert algorithm(d) == "seqiter" and d.chosen.direction == 1
    assert d.chosen.state == [] and d.chosen.init_level == 0
    assert set(d.valid) == {"seqiter", "densemap", "hashmap", "binsearch", "loop"}
    assert d.rejected == {} and d.alternatives == []


def test_fig2_unsorted_b_has_no_ordered_search():
    """B unsorted: SeqIter and BinarySearch are refused with the reason; Auto keeps a dense
    position map and the hash map as the run-time alternative."""
    (d,) = spf.Kernel(DOT, {"A": "SV", "B": "SV_unsorted"}).decisions
    assert set(d.rejected) == {"seqiter", "binsearch"}
    assert all(UNSORTED in why for why in d.rejected.values())
    assert algorithm(d) == "densemap" and [c.algorithm for c in d.alternatives] == ["hashmap"]


def test_fig11_decreasing_b_and_unsorted_c():
    ds = spf.Kernel("v = A(i) * B(i) * C(i)",
                    {"A": "SV", "B": "SV_decreasing", "C": "SV_unsorted"}).decisions
    by = {d.find.use.name: d for d in ds}
    assert set(by) == {"B", "C"}
    assert algorithm(by["B"]) == "seqiter" and by["B"].chosen.direction == -1   # backwards
    assert algorithm(by["C"]) == "densemap" and set(by["C"].rejected) == {"seqiter", "binsearch"}


def test_forcing_an_ordered_search_on_unsorted_data_is_refused():
    with pytest.raises(spf.SynthesisError) as err:
        spf.Kernel(DOT, {"A": "SV", "B": "SV_unsorted"}, find={"B": "seqiter"})
    assert str(err.value).startswith(
        "find='seqiter' is not valid for the lookup of B (B_p in [0, B.len - 1] with "
        "B.idx(B_p) = i): ")
    assert UNSORTED in str(err.value)


@pytest.mark.parametrize("find", ["seqiter", "densemap", "hashmap", "binsearch"])
def test_a_forced_valid_find_is_taken(find):
    (d,) = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find=find).decisions
    assert algorithm(d) == find and d.requested == find


def test_find_loop_keeps_the_guard_loop_without_proving_anything():
    (d,) = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find="loop").decisions
    assert d.chosen is None and set(d.valid) == {"loop"} and d.rejected == {}


@pytest.mark.parametrize("layout, params, state, key", [
    ("CSR", {}, ["A_pi"], None),            # restarted for every row
    ("SortedCOO", {}, ["i"], "i"),          # one position per row value, not per entry
    ("BCSR", {"B": 4}, ["A_pi", "A_pk"], "A_pk"),   # A10: blocks of a block row exclusive
])
def test_seqiter_state_indices(layout, params, state, key):
    """Algorithm 3: the loops a SeqIter state depends on, and the index of its array."""
    (d,) = spf.Kernel(SPMV, {"A": layout, "x": "SV"}, find="seqiter", params={"A": params}
                      ).decisions
    assert d.chosen.state == state and d.chosen.array_key == key


def test_auto_chooses_at_run_time_from_the_cost_model():
    """CSR x SV: SeqIter restarts in every row, so Auto keeps both maps as alternatives and
    the cost model's terms: SeqIter 4 W + A.numRows * L, DenseMap 4 W + 8 L plus the map's
    size, HashMap 12 W + 4 L (W searches over A's entries, L = x.len)."""
    k = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"})
    (d,) = k.decisions
    assert algorithm(d) == "seqiter" and d.chosen.state == ["A_pi"]
    assert [c.algorithm for c in d.alternatives] == ["densemap", "hashmap"]
    with symbolic:
        model = cost_model(k.nest, d.find, [d.chosen, *d.alternatives])
    assert model.searches.name == "A" and str(model.length) == "x.len"
    terms = {name: (t.per_search, t.per_element, [str(r) for r in t.resets],
                    None if t.fixed is None else str(t.fixed)) for name, t in model.terms.items()}
    assert terms == {"seqiter": (4, 1, ["A.numRows"], None),
                     "densemap": (4, 8, [], "A.numCols"), "hashmap": (12, 4, [], None)}


def test_a_shared_state_is_replaced_inside_a_parallel_loop():
    """A parallel dot: SeqIter's one position would be shared by the threads; the map built
    before the loop is only read, so it replaces it."""
    (d,) = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, parallel=True).decisions
    assert algorithm(d) == "densemap" and d.chosen.init_level == 0


def test_tile_skipping_of_a_sorted_guard_loop():
    """Fig. 8: a tile of B's positions runs only if its first and last keys bracket i."""
    k = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find="loop", tile={"B.p": 8})
    (skip,) = k.plan.skips["B_p_tile"]
    assert (skip.var, str(skip.call), str(skip.target), skip.compare) == (
        "B_p", "B.idx(B_p)", "i", "<")


# -- dependence analysis ------------------------------------------------------------------
def loops(kernel: spf.Kernel) -> list[tuple[str, bool, list[str]]]:
    return [(lp.var, lp.carried, list(lp.disproved_by)) for lp in kernel.analysis().loops]


def test_csr_rows_carry_nothing_by_isl():
    k = spf.Kernel(SPMV, {"A": "CSR"}, parallel=True)
    assert loops(k) == [("A_pi", False, ["isl (affine constraints)"]), ("A_pj", True, [])]
    assert k.analysis().parallel_loop == "A_pi" == k.parallel_loop


def test_without_parallel_the_free_loop_is_named_and_not_taken():
    a = spf.Kernel(SPMV, {"A": "CSR"}).analysis()
    assert a.parallel_loop is None
    assert a.parallel_reason == ("loop A_pi carries no dependence (isl (affine constraints)); "
                                 "parallel=False")


def test_fig7_dcsr_rows_carry_nothing_by_the_monotonic_row_indices():
    """isl cannot tell two rowIdx reads apart; Z3 with rowIdx strictly increasing can."""
    k = spf.Kernel(SPMV, {"A": "DCSR"}, parallel=True)
    assert loops(k) == [("A_pi", False, ["A: monotonic a < a' -> rowIdx(a) < rowIdx(a')"]),
                        ("A_pj", True, [])]
    assert k.parallel_loop == "A_pi"


def test_coo_entries_scatter_into_y():
    """Two COO entries may share a row: the loop over entries carries a dependence; in
    parallel each thread sums into a private copy of y."""
    serial = spf.Kernel(SPMV, {"A": "COO"}).analysis()
    assert [(lp.var, lp.carried) for lp in serial.loops] == [("A_p", True)]
    assert serial.parallel_loop is None
    assert serial.parallel_reason == "the outermost loop A_p carries a dependence on y"
    parallel = spf.Kernel(SPMV, {"A": "COO"}, parallel=True).analysis()
    assert parallel.parallel_loop == "A_p"
    assert parallel.loops[0].parallel and parallel.loops[0].private_output


def test_csc_inner_loop_is_free_but_too_short_to_share_out():
    """CSC: a column's rows are distinct (sorted), but a column is a few entries; in
    parallel the columns scatter into private copies of y instead."""
    a = spf.Kernel(SPMV, {"A": "CSC"}).analysis()
    assert [(lp.var, lp.carried) for lp in a.loops] == [("A_pj", True), ("A_pi", False)]
    assert a.loops[1].disproved_by == (
        "A: periodic_monotonic pj = pj' and a < a' -> rowIdx(a) < rowIdx(a')",)
    assert a.parallel_loop is None
    assert "runs over one segment of a pointer array" in a.loops[0].why
    parallel = spf.Kernel(SPMV, {"A": "CSC"}, parallel=True).analysis()
    assert parallel.parallel_loop == "A_pj" and parallel.loops[0].private_output


def test_dia_shares_out_the_rows_of_each_diagonal():
    a = spf.Kernel(SPMV, {"A": "DIA"}, parallel=True).analysis()
    assert [(lp.var, lp.carried, lp.parallel) for lp in a.loops] == [
        ("A_pd", True, False), ("A_pi", False, True)]
    assert a.parallel_loop == "A_pi"


def test_a_dot_product_is_a_scalar_reduction():
    a = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, parallel=True).analysis()
    assert a.loops[0].reduction and a.loops[0].parallel and a.parallel_loop == "A_p"
    assert a.to_dict()["version"] == 1


@pytest.mark.parametrize("layout, options, vector, no_simd", [
    ("CSR", {}, None, ""),                     # the row's loop sums into y(i): not free
    ("CSR", {"reassociate": True}, ("A_pj", True), ""),
    ("COO", {}, None, ""),
    ("CSC", {}, None, "not used on loop A_pi, which carries no dependence: it scatters into "
                      "y through A.rowIdx"),
    ("DIA", {}, ("A_pi", False), ""),
])
def test_simd_loop(layout, options, vector, no_simd):
    plan = spf.Kernel(SPMV, {"A": layout}, **options).plan
    assert (plan.vector and (plan.vector.var, plan.vector.reduction)) == vector
    assert plan.no_simd.startswith(no_simd) and bool(plan.no_simd) == bool(no_simd)


# -- statement splitting ------------------------------------------------------------------
def terms(kernel: spf.Kernel) -> list[tuple[str, dict[str, str]]]:
    return [(str(t.expr), {n: lay.name for n, lay in t.layouts.items()}) for t in kernel.terms]


def test_a_sum_into_a_dense_output_is_accumulated_term_by_term():
    k = spf.Kernel("y(i) = A(i,j) * x(j) - b(i)", {"A": "CSR"})
    assert terms(k) == [("y(i) += A(i,j) * x(j)", {"y": "DenseVector", "A": "CSR",
                                                   "x": "DenseVector"}),
                        ("y(i) += -b(i)", {"y": "DenseVector", "b": "DenseVector"})]
    assert [t.expr.coefficient for t in k.terms] == [1, -1]


def test_a_sum_into_an_assembled_output_is_merged_not_accumulated():
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "COO", "C": "CSR"})
    assert terms(k) == [("C(i,j) = A(i,j)", {"C": "CSR", "A": "CSR"}),
                        ("C(i,j) = B(i,j)", {"C": "CSR", "B": "COO"})]
    assert not any(t.expr.accumulate for t in k.terms)


def test_a_union_layout_runs_one_statement_per_part():
    k = spf.Kernel(SPMV, {"A": "HYB"})
    assert [str(t.expr) for t in k.terms] == ["y(i) += A(i,j) * x(j)"] * 2
    assert [t.layouts["A"].part for t in k.terms] == [0, 1]          # ELL, then COO


def test_options_given_to_a_sum_go_to_its_terms():
    k = spf.Kernel("y(i) = A(i,j) * x(j) + B(i,j) * x(j)", {"A": "CSR", "B": "COO"},
                   bounds="j <= i", name="two")
    assert [t.name for t in k.terms] == ["two_term0", "two_term1"]
    assert [[str(c) for c in t.options.bounds] for t in k.terms] == [["j <= i"], ["j <= i"]]


def test_options_a_sum_cannot_take():
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel("y(i) = A(i,j) * x(j) + b(i)", {"A": "CSR"}, tile={"A.pi": 8})
    assert str(err.value) == "<string>: tile is not supported for sums yet"


# -- the options schema -------------------------------------------------------------------
def test_every_option_accepts_its_documented_example():
    for name in NAMES:
        checked = spf.KernelOptions(**{name: option(name).example})
        assert spf.KernelOptions(**{name: getattr(checked, name)}) == checked   # idempotent


def test_values_are_normalised_by_their_form():
    o = spf.KernelOptions(order="A.pi, A.pj", tile={"A.pi": 8}, find={"B": "hashmap"},
                          share={"C": "A"}, semiring="min_plus", bounds="j <= i")
    assert o.order == ("A.pi", "A.pj") and o.share == ("C", "A")
    assert dict(o.tile) == {"A.pi": 8} and dict(o.find) == {"B": "hashmap"}
    assert o.semiring.name == "min_plus" and [str(c) for c in o.bounds] == ["j <= i"]
    assert not hasattr(o.tile, "__setitem__")          # read-only, hashable, picklable
    assert hash(o) == hash(pickle.loads(pickle.dumps(o)))


@pytest.mark.parametrize("options, message", [
    ({"parallel": 1}, "parallel must be True or False, got 1"),
    ({"name": "int"}, "kernel name 'int' is not a valid C identifier"),
    ({"index_type": "int16"}, "index_type must be one of 'int32', 'int64', got 'int16'"),
    ({"find": "fast"}, "find='fast' is not a find algorithm; choose from ('auto', 'seqiter', "
                       "'densemap', 'hashmap', 'binsearch', 'loop')"),
    ({"tile": {"A.pi": 0}}, "tile size of 'A.pi' must be a positive integer, got 0"),
    ({"tile": [1]}, "tile must map loop variables to sizes such as {'A.pi': 256}, got [1]"),
    ({"order": 5}, "order must be a list of loop variables such as ['A.pi', 'A.pj'] or a "
                   "comma-separated string, got 5"),
    ({"share": {"C": "A", "D": "B"}},
     "share must map the output to one tensor, such as {'C': 'A'}, got {'C': 'A', 'D': 'B'}"),
    ({"mask": {"C": "1M"}}, "mask: '1M' is not a tensor name"),
    ({"semiring": {"add": "max"}}, "a semiring table needs add, mul and zero (and may give "
                                   "one, associative, commutative); got ['add']"),
    ({"z3_timeout_ms": True}, "z3_timeout_ms must be an integer number of milliseconds from "
                              "1 to 3600000 (one hour), got True"),
])
def test_a_value_of_the_wrong_form_is_refused(options, message):
    with pytest.raises(spf.SpecError) as err:
        spf.KernelOptions(**options)
    assert str(err.value) == f"<string>: {message}"


def test_an_unknown_option_is_named_with_the_closest_one():
    with pytest.raises(spf.SpecError) as err:
        check_given({"paralel": True})
    assert str(err.value).startswith("<string>: unknown option 'paralel' (did you mean "
                                     "'parallel'?); the options are name, order, find, ")


@pytest.mark.parametrize("options, message", [
    ({"complement": True}, "complement=True needs a mask (mask={output: tensor})"),
    ({"share": {"A": "B"}}, "share names 'A', but the output is 'C'"),
    ({"share": {"C": "Q"}}, "share: 'Q' is not an input tensor of the kernel"),
    ({"find": {"Q": "loop"}}, "find names 'Q', which is not a tensor of the kernel"),
])
def test_names_are_checked_against_the_statement(options, message):
    with pytest.raises(spf.SpecError) as err:
        spf.KernelOptions(**options).resolved(parse_expr("C(i,j) = A(i,j) * B(i,j)"))
    assert str(err.value) == f"<string>: {message}"


def test_the_z3_time_limit_defaults_when_resolved(monkeypatch):
    monkeypatch.delenv(Z3_TIMEOUT_ENV, raising=False)
    assert spf.KernelOptions().z3_timeout_ms is None
    assert spf.KernelOptions().resolved(parse_expr(DOT)).z3_timeout_ms == Z3_TIMEOUT_MS
