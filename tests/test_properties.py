"""Index-array property kinds (spf.front.properties): each kind's class parses its keys, prints
its formula and short text, checks arrays with its exact messages, gives Z3 instances that
capture exactly its formula, and says what sorted storage establishes of it."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import z3

import spf
from spf.front.layout_path import LAYOUT_DIR
from spf.front.properties import (
    KINDS,
    CovaryMonotonic,
    Injective,
    Linear,
    Monotonic,
    Ordering,
    PeriodicMonotonic,
    Permutation,
    PropertyKind,
    Range,
    ordering_kinds,
)
from spf.front.syntax import parse_constraints
from spf.front.terms import Aff


def prop_of(layout: str, kind: PropertyKind, uf: str, **params: int):
    (prop,) = [p for p in spf.load_layout(layout, **params).properties
               if p.kind is kind and p.uf == uf]
    return prop


def check(prop, scalars=None, **arrays) -> None:
    prop.check({k: np.asarray(v) for k, v in arrays.items()}, scalars or {}, "L")


def message(prop, scalars=None, **arrays) -> str:
    with pytest.raises(spf.ArgumentError) as err:
        check(prop, scalars, **arrays)
    return str(err.value)


# --- one class per kind, with its formula and text ------------------------------------------
def test_every_kind_has_one_class():
    assert list(KINDS) == list(PropertyKind)
    assert all(cls.kind is kind for kind, cls in KINDS.items())
    assert ordering_kinds() == [PropertyKind.MONOTONIC, PropertyKind.PERIODIC_MONOTONIC,
                                PropertyKind.COVARY_MONOTONIC]


@pytest.mark.parametrize("layout, kind, uf, cls, formula, text", [
    ("CSR", PropertyKind.RANGE, "colIdx", Range, "0 <= colIdx(a) <= numCols - 1",
     "range(colIdx: 0..numCols - 1)"),
    ("CSR", PropertyKind.RANGE, "rowPtr", Range, "0 <= rowPtr(a)", "range(rowPtr: 0..)"),
    ("COO", PropertyKind.INJECTIVE, "rowIdx", Injective,
     "a != a' -> (rowIdx(a), colIdx(a)) != (rowIdx(a'), colIdx(a'))",
     "injective(rowIdx, colIdx)"),
    ("CSR", PropertyKind.MONOTONIC, "rowPtr", Monotonic, "a < a' -> rowPtr(a) <= rowPtr(a')",
     "monotonic(rowPtr <=)"),
    ("SV_decreasing", PropertyKind.MONOTONIC, "idx", Monotonic, "a < a' -> idx(a) > idx(a')",
     "monotonic(idx >)"),
    ("CSR", PropertyKind.PERIODIC_MONOTONIC, "colIdx", PeriodicMonotonic,
     "pi = pi' and a < a' -> colIdx(a) < colIdx(a')", "periodic_monotonic(colIdx <, period pi)"),
    ("SortedCOO", PropertyKind.COVARY_MONOTONIC, "colIdx", CovaryMonotonic,
     "rowIdx(a) = rowIdx(a') and a < a' -> colIdx(a) < colIdx(a')",
     "covary_monotonic(colIdx <, with rowIdx)"),
])
def test_kind_class_formula_and_text(layout, kind, uf, cls, formula, text):
    prop = prop_of(layout, kind, uf)
    assert type(prop) is cls and prop.kind == kind.value
    assert prop.formula() == formula
    assert prop.text() == text


def test_gap_is_in_formula_and_text():
    prop = prop_of("BCSR", PropertyKind.PERIODIC_MONOTONIC, "colIdx", B=4)
    assert prop.formula() == "pi = pi' and a < a' -> colIdx(a) + 4 <= colIdx(a')"
    assert prop.text() == "periodic_monotonic(colIdx <=, period pi, gap 4)"


def test_layouts_command_prints_each_property_text(capsys):
    from spf import cli
    assert cli.main(["layouts"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("properties: monotonic(idx <); range(idx: 0..size - 1)" in out)
    assert ("properties: monotonic(rowIdx <=); covary_monotonic(colIdx <, with rowIdx); "
            "range(rowIdx: 0..numRows - 1); range(colIdx: 0..numCols - 1); "
            "injective(rowIdx, colIdx)" in out)
    assert "periodic_monotonic(colIdx <=, period pi, gap 8)" in out


# --- each kind's check: valid arrays pass, a violation names the first one ------------------
def test_range_check():
    prop = prop_of("CSR", PropertyKind.RANGE, "colIdx")
    for ok in ([], [0], [3, 0, 2, 3]):
        check(prop, {"numCols": 4}, colIdx=ok)
    assert message(prop, {"numCols": 4}, colIdx=[0, 4, 5]) == (
        "L tensor: 'colIdx' violates range (0 <= colIdx(a) <= numCols - 1) at position 1: "
        "4 > 3")
    assert message(prop, {"numCols": 4}, colIdx=[0, -1]) == (
        "L tensor: 'colIdx' violates range (0 <= colIdx(a) <= numCols - 1) at position 1: "
        "-1 < 0")
    lower_only = prop_of("CSR", PropertyKind.RANGE, "rowPtr")
    check(lower_only, {}, rowPtr=[0, 2**40])
    assert message(lower_only, {}, rowPtr=[-3]).endswith("at position 0: -3 < 0")


def test_injective_check():
    prop = prop_of("COO", PropertyKind.INJECTIVE, "rowIdx")
    for rows, cols in (([], []), ([1], [1]), ([0, 0, 1], [0, 1, 0])):
        check(prop, rowIdx=rows, colIdx=cols)
    assert message(prop, rowIdx=[0, 1, 0, 1], colIdx=[2, 2, 3, 2]) == (
        "L tensor: 'rowIdx' violates injective (a != a' -> (rowIdx(a), colIdx(a)) != "
        "(rowIdx(a'), colIdx(a'))): position 3 repeats position 1 (rowIdx[3] = 1, "
        "colIdx[3] = 2)")


@pytest.mark.parametrize("layout, ok, bad, where", [
    ("CSR", [0, 0, 2, 5], [0, 3, 2, 5], "at positions 1, 2: 3, 2"),
    ("SV", [0, 1, 7], [0, 1, 1], "at positions 1, 2: 1, 1"),
    ("SV_decreasing", [9, 4, 0], [9, 4, 5], "at positions 1, 2: 4, 5"),
])
def test_monotonic_check(layout, ok, bad, where):
    uf = "rowPtr" if layout == "CSR" else "idx"
    prop = prop_of(layout, PropertyKind.MONOTONIC, uf)
    for arr in ([], [7], ok):
        check(prop, **{uf: arr})
    assert message(prop, **{uf: bad}) == f"L tensor: {prop.uf!r} violates monotonic " \
        f"({prop.formula()}) {where}"


def test_monotonic_gap_check():
    prop = Monotonic(("x",), "<=", 2)
    check(prop, x=[0, 2, 4, 9])
    assert message(prop, x=[0, 2, 3]) == (
        "L tensor: 'x' violates monotonic (a < a' -> x(a) + 2 <= x(a')) at positions 1, 2: "
        "2, 3")


def test_covary_monotonic_check():
    prop = prop_of("SortedCOO", PropertyKind.COVARY_MONOTONIC, "colIdx")
    for rows, cols in (([], []), ([3], [3]), ([1, 0, 1], [0, 5, 3]), ([0, 0, 1], [4, 5, 0])):
        check(prop, rowIdx=rows, colIdx=cols)
    assert message(prop, rowIdx=[2, 0, 2, 0], colIdx=[1, 3, 4, 3]) == (
        "L tensor: 'colIdx' violates covary_monotonic (rowIdx(a) = rowIdx(a') and a < a' -> "
        "colIdx(a) < colIdx(a')) at positions 1, 3: rowIdx[1] = rowIdx[3] = 0, "
        "colIdx[1] = 3, colIdx[3] = 3")


def test_periodic_monotonic_is_checked_by_generated_code():
    prop = prop_of("CSR", PropertyKind.PERIODIC_MONOTONIC, "colIdx")
    check(prop, colIdx=[2, 0, 1])       # the arrays alone do not say where periods start
    arrays = {"rowPtr": [0, 2, 3], "data": [1.0, 2.0, 3.0]}
    spf.Tensor.from_arrays("CSR", (2, 3), {**arrays, "colIdx": [0, 2, 1]})
    with pytest.raises(spf.ArgumentError) as err:
        spf.Tensor.from_arrays("CSR", (2, 3), {**arrays, "colIdx": [2, 0, 1]})
    assert str(err.value) == (
        "CSR tensor: 'colIdx' violates periodic_monotonic (pi = pi' and a < a' -> colIdx(a) < "
        "colIdx(a'), period pi) at position 1: colIdx[1] = 0 is out of order")


# --- Z3 instances: exactly the formula, over the reads of a query ---------------------------
class StubReads:
    """Reads of arrays ``f`` and ``g`` at positions ``x`` (instance 1) and ``y`` (instance 2);
    layout index ``p`` at instances 1 and 2."""

    def __init__(self):
        self.x, self.y = z3.Int("x"), z3.Int("y")
        self.funcs = {n: z3.Function(n, z3.IntSort(), z3.IntSort()) for n in ("f", "g")}

    def reads(self, array):
        return [(self.funcs[array](self.x), 1), (self.funcs[array](self.y), 2)]

    def pairs(self, arrays):
        return [((self.x, 1), (self.y, 2))]

    def function(self, array):
        return self.funcs[array]

    def function_of(self, array, arity):
        return self.funcs[array]

    def arguments(self, array, arity):
        return [((self.x,), 1), ((self.y,), 2)]

    def bound(self, a, k):
        return z3.IntVal(a.evaluate({"n": 10}))

    def enclosing(self, indices):
        return True

    def index(self, name, k):
        return z3.Int(f"{name}@{k}")


def holds(prop, reads: StubReads, claim) -> bool:
    """Whether the instances prove ``claim`` (their conjunction and not claim is unsat)."""
    s = z3.Solver()
    s.add(*prop.instances(reads), z3.Not(claim))
    return s.check() == z3.unsat


@pytest.mark.parametrize("prop, claim, not_claim", [
    (Range(("f",), Aff.num(0), Aff.var("n") - 1),
     lambda r: z3.And(r.funcs["f"](r.x) >= 0, r.funcs["f"](r.y) <= 9),
     lambda r: r.funcs["f"](r.x) <= 8),
    (Injective(("f", "g")),
     lambda r: z3.Implies(r.x != r.y, z3.Or(r.funcs["f"](r.x) != r.funcs["f"](r.y),
                                            r.funcs["g"](r.x) != r.funcs["g"](r.y))),
     lambda r: z3.Implies(r.x != r.y, r.funcs["f"](r.x) != r.funcs["f"](r.y))),
    (Monotonic(("f",), "<", 2),
     lambda r: z3.Implies(r.x < r.y, r.funcs["f"](r.x) + 2 < r.funcs["f"](r.y)),
     lambda r: z3.Implies(r.x < r.y, r.funcs["f"](r.x) + 3 < r.funcs["f"](r.y))),
    (PeriodicMonotonic(("f",), ">=", period=("p",)),
     lambda r: z3.Implies(z3.And(z3.Int("p@1") == z3.Int("p@2"), r.y < r.x),
                          r.funcs["f"](r.y) >= r.funcs["f"](r.x)),
     lambda r: z3.Implies(r.x < r.y, r.funcs["f"](r.x) >= r.funcs["f"](r.y))),
    (CovaryMonotonic(("f",), "<=", with_="g"),
     lambda r: z3.Implies(z3.And(r.funcs["g"](r.x) == r.funcs["g"](r.y), r.x < r.y),
                          r.funcs["f"](r.x) <= r.funcs["f"](r.y)),
     lambda r: z3.Implies(r.x < r.y, r.funcs["f"](r.x) <= r.funcs["f"](r.y))),
    (Permutation(("f",), Aff.var("n")),
     lambda r: z3.And(z3.Implies(r.x != r.y, r.funcs["f"](r.x) != r.funcs["f"](r.y)),
                      r.funcs["f"](r.x) >= 0, r.funcs["f"](r.y) <= 9),
     lambda r: r.funcs["f"](r.x) <= 8),
    (Linear(("f", "g"), tuple(parse_constraints("f(s + 1) - f(s) = 2 * g(s)")),
            tuple(parse_constraints("0 <= s < n")), ("s",)),
     lambda r: z3.And(z3.Implies(z3.And(r.x >= 0, r.x < 10), r.funcs["f"](r.x + 1)
                                 == r.funcs["f"](r.x) + 2 * r.funcs["g"](r.x)),
                      z3.Implies(z3.And(r.y >= 1, r.y < 11), r.funcs["f"](r.y)
                                 == r.funcs["f"](r.y - 1) + 2 * r.funcs["g"](r.y - 1))),
     lambda r: z3.Implies(r.x == 10, r.funcs["f"](r.x + 1) == r.funcs["f"](r.x)
                          + 2 * r.funcs["g"](r.x))),
])
def test_instances_prove_the_formula_and_no_more(prop, claim, not_claim):
    reads = StubReads()
    assert holds(prop, reads, claim(reads))
    assert not holds(prop, reads, not_claim(reads))


def test_periodic_instances_need_the_period_in_the_loops():
    class Outside(StubReads):
        def enclosing(self, indices):
            return False
    assert PeriodicMonotonic(("f",), "<", period=("p",)).instances(Outside()) == []


# --- what sorted storage establishes, placement and coalescing ask -------------------------
def test_ordering_facts_per_kind():
    mono = prop_of("CSR", PropertyKind.MONOTONIC, "rowPtr")
    down = prop_of("SV_decreasing", PropertyKind.MONOTONIC, "idx")
    periodic = prop_of("CSR", PropertyKind.PERIODIC_MONOTONIC, "colIdx")
    covary = prop_of("SortedCOO", PropertyKind.COVARY_MONOTONIC, "colIdx")
    rng = prop_of("CSR", PropertyKind.RANGE, "colIdx")
    inj = prop_of("COO", PropertyKind.INJECTIVE, "rowIdx")
    assert [p.non_decreasing() for p in (mono, down, periodic, covary, rng, inj)] == [
        True, False, False, False, False, False]
    assert (down.descending("idx"), down.descending("other"), mono.descending("rowPtr"),
            rng.descending("colIdx")) == (True, None, False, None)
    assert (covary.descending("colIdx"), covary.descending("rowIdx")) == (False, None)
    assert covary.ordered_arrays() == {"colIdx", "rowIdx"} and rng.ordered_arrays() == set()
    assert (mono.orders_within(()), mono.orders_within(("pi",)),
            periodic.orders_within(("pi",)), periodic.orders_within(()),
            covary.orders_within(())) == (True, False, True, False, False)
    assert [isinstance(p, Ordering) for p in (mono, periodic, covary, rng, inj)] == [
        True, True, True, False, False]
    assert (periodic.spacing, mono.spacing, Monotonic(("x",), "<", 3).spacing) == (1, 0, 4)
    assert [p.by_storage_order for p in (mono, rng, inj)] == [True, False, True]


def variant(tmp_path, shipped: str, name: str, old: str, new: str):
    """A copy of a shipped layout under another name, ``old`` replaced by ``new``, no packer."""
    text = (LAYOUT_DIR / f"{shipped}.toml").read_text()
    assert old in text
    text = text.replace(old, new).replace(f'name = "{shipped}"', f'name = "{name}"')
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("packer")))
    return spf.load_layout(str(path))


def test_decreasing_covary_order_is_assembled_decreasing(tmp_path):
    from spf.front.storage import storage_of
    from spf.runtime.operands import as_tensor
    lay = variant(tmp_path, "SortedCOO", "DownCOO", 'with = "rowIdx"\norder = "<"',
                  'with = "rowIdx"\norder = ">"')
    assert storage_of(lay).descending == (False, True)
    m = sp.random(7, 6, density=0.5, format="csr", random_state=3)
    t = spf.Tensor.from_scipy("CSR", m).convert(lay)
    rows, cols = np.asarray(t["rowIdx"]), np.asarray(t["colIdx"])
    assert all(np.all(np.diff(cols[rows == i]) < 0) for i in range(7))
    spf.Tensor(lay, t.shape, dict(t.fields))                 # its own check passes
    np.testing.assert_array_equal(t.to_dense(), m.toarray())
    with pytest.raises(spf.ArgumentError, match=r"'A': DownCOO tensor: 'colIdx' violates "
                       r"covary_monotonic .* at positions \d+, \d+: rowIdx"):
        as_tensor("A", m.tocoo(), lay, converting=False)    # scipy sorts rising: checked
    with pytest.warns(spf.ConvertedOperandWarning):         # an operand: converted
        np.testing.assert_array_equal(as_tensor("A", m.tocoo(), lay).to_dense(), m.toarray())


def test_injective_is_established_by_the_root_level_only(tmp_path):
    from spf.front.storage import storage_of, storage_or_none
    from spf.runtime.operands import as_tensor
    rows = variant(tmp_path, "COO", "RowCOO", 'ufs = ["rowIdx", "colIdx"]', 'ufs = ["rowIdx"]')
    with pytest.raises(spf.SpecError) as err:
        storage_of(rows)
    assert err.value.detail == (
        "layout RowCOO cannot be assembled: property injective a != a' -> (rowIdx(a)) != "
        "(rowIdx(a')) is not established by sorted assembly")
    m = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))
    with pytest.raises(spf.ArgumentError, match="'A': layout RowCOO cannot take"):
        as_tensor("A", m.tocoo(), rows)        # no longer taken as proven by scipy's flag
    dcsr = variant(tmp_path, "DCSR", "UniqueRowsDCSR", '[[properties]]\nkind = "range"\n'
                   'uf = "rowIdx"', '[[properties]]\nkind = "injective"\nufs = ["rowIdx"]\n\n'
                   '[[properties]]\nkind = "range"\nuf = "rowIdx"')
    assert storage_or_none(dcsr) is not None          # the root level's rows are distinct
    cols = variant(tmp_path, "DCSR", "UniqueColsDCSR", '[[properties]]\nkind = "range"\n'
                   'uf = "colIdx"', '[[properties]]\nkind = "injective"\nufs = ["colIdx"]\n\n'
                   '[[properties]]\nkind = "range"\nuf = "colIdx"')
    assert storage_or_none(cols) is None
