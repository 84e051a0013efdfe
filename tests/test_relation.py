"""SPF relations with UFs: parsing, printing and operations, checked against brute-force
enumeration of points with concrete index arrays (an independent reference)."""
import itertools

import pytest

from spf import Relation, SpecError
from spf.front.terms import Aff, UFCall

CSR_TEXT = ("{[pi,pj] -> [gi,gj] : 0 <= pi < numRows and rowPtr(pi) <= pj < rowPtr(pi+1) "
            "and gi = pi and gj = colIdx(pj)}")

# a concrete 3x4 CSR matrix: rows {0: [1, 3], 1: [], 2: [0, 2, 3]}
ENV = {"numRows": 3, "numCols": 4}
ARRAYS = {"rowPtr": [0, 2, 2, 5], "colIdx": [1, 3, 0, 2, 3]}
BOX = range(-1, 7)


def call(name, args):
    arr = ARRAYS[name]
    (a,) = args
    return arr[a] if 0 <= a < len(arr) else -99


def holds(rel: Relation, point: dict) -> bool:
    env = {**ENV, **point}
    ex = list(rel.exists)
    for values in itertools.product(BOX, repeat=len(ex)):
        full = {**env, **dict(zip(ex, values))}
        for conj in rel.disjuncts:
            ok = True
            for c in conj:
                v = c.aff.evaluate(full, call)
                if (c.is_eq and v != 0) or (not c.is_eq and v < 0):
                    ok = False
                    break
            if ok:
                return True
    return False


def points(rel: Relation, box=BOX) -> set:
    vs = rel.vars
    return {vals for vals in itertools.product(box, repeat=len(vs))
            if holds(rel, dict(zip(vs, vals)))}


def test_parse_and_print_round_trip():
    r = Relation.parse(CSR_TEXT)
    text = str(r)
    assert text == ("{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pj < "
                    "rowPtr(pi + 1) and gi = pi and gj = colIdx(pj)}")
    assert str(Relation.parse(text)) == text


def test_uf_calls_are_exact_terms():
    r = Relation.parse(CSR_TEXT)
    calls = {str(c) for c in r.calls()}
    assert calls == {"rowPtr(pi)", "rowPtr(pi + 1)", "colIdx(pj)"}
    same = Relation.parse("{[a] : f(a + 1) <= 3 and f(1 + a) >= 3}").simplify()
    # f(a+1) and f(1+a) are one term: the conjunction pins it to 3
    (conj,) = same.disjuncts
    assert any(c.is_eq for c in conj)


def test_uf_arguments_may_be_affine_nested_and_symbolic():
    r = Relation.parse("{[i] -> [j] : 0 <= i < n and j = g(f(i) + 2*n - 1)}")
    (call_g,) = [c for c in r.calls() if c.name == "g"]
    assert str(call_g) == "g(2*n + f(i) - 1)"
    assert r.symbols() == {"n"}


def test_csr_relation_points_match_the_matrix():
    r = Relation.parse(CSR_TEXT)
    expected = {(0, 0, 0, 1), (0, 1, 0, 3), (2, 2, 2, 0), (2, 3, 2, 2), (2, 4, 2, 3)}
    assert points(r) == expected


def test_compose_inverse_range_domain_against_enumeration():
    r = Relation.parse(CSR_TEXT)
    access = Relation.parse("{[i, k, j] -> [gi, gj] : gi = i and gj = k}")
    q = access.inverse().compose(r)
    assert q.in_vars == ("pi", "pj") and q.out_vars == ("i", "k", "j")
    got = points(q.flatten(), range(-1, 6))
    expected = {(pi, pj, gi, gj, j) for (pi, pj, gi, gj) in points(r) for j in range(-1, 6)}
    assert got == expected
    rng = points(r.range())
    assert rng == {(gi, gj) for (_, _, gi, gj) in points(r)}
    assert points(r.domain()) == {(pi, pj) for (pi, pj, _, _) in points(r)}
    assert points(r.inverse()) == {(gi, gj, pi, pj) for (pi, pj, gi, gj) in points(r)}


def test_compose_keeps_uf_calls_exact_through_substitution():
    shift = Relation.parse("{[a] -> [b] : b = a + 1}")
    f = Relation.parse("{[b] -> [c] : c = rowPtr(b)}")
    comp = f.compose(shift)
    assert str(comp) == "{[a] -> [c] : c = rowPtr(a + 1)}"


def test_intersect_union_project_and_isl_queries():
    a = Relation.parse("{[i] : 0 <= i < numRows and colIdx(i) >= 2}")
    b = Relation.parse("{[k] : 1 <= k <= 3}")
    inter = a.intersect(b)
    assert points(inter) == {(i,) for i in range(1, 3) if ARRAYS["colIdx"][i] >= 2}
    uni = a.union(b)
    assert points(uni) == points(a) | points(b)
    r = Relation.parse(CSR_TEXT)
    proj = r.project_out(["gi"])
    assert proj.in_vars == ("pi", "pj") and proj.out_vars == ("gj",)
    assert points(proj) == {(pi, pj, gj) for (pi, pj, _, gj) in points(r)}
    assert not r.is_empty()
    assert Relation.parse("{[i] : 0 <= i < 3 and i > 5}").is_empty()
    assert inter.is_subset(a) and not a.is_subset(inter)
    simple = Relation.parse("{[i] : 0 <= i and i < 10 and i < 20}").simplify()
    assert str(simple) == "{[i] : 0 <= i <= 9}"


def test_projection_of_plain_variable_uses_isl():
    # j is not a UF argument: isl eliminates it exactly (here: 2 <= i)
    r = Relation.parse("{[i, j] : 0 <= j < 5 and j + 2 <= i and i < 7}")
    assert str(r.project_out(["j"]).simplify()) == "{[i] : 2 <= i <= 6}"


def test_projection_of_uf_argument_keeps_an_existential():
    r = Relation.parse("{[p] -> [i] : 0 <= p < len and i = idx(p)}")
    rng = r.range()
    assert rng.exists == ("p",)
    assert "idx(p)" in str(rng)


def test_floor_divisions_come_back_from_isl():
    r = Relation.parse("{[i, j] : 0 <= i < 20 and 0 <= j < 4 and i = 4*k + j}")
    # k is a symbol here; projecting j leaves i - 4k in range: no division needed
    assert not r.project_out(["j"]).simplify().is_empty()
    t = Relation.parse("{[i] -> [t] : 0 <= i < n and 8*t <= i < 8*t + 8}")
    dom = t.range().simplify()
    assert "n" in str(dom)


@pytest.mark.parametrize("text, message", [
    ("{[i] : 0 <= i < }", "expected a number"),
    ("{[i] -> [j] : i * j = 0}", "non-affine product"),
    ("{[i, i] : i = 0}", "appears twice"),
    ("{[i] : i != 0}", "'!=' is not supported"),
    ("[i] : i = 0", "expected '{'"),
    ("{[i] : i = 0", "expected '}'"),
    ("{[i] : i @ 0}", "unexpected character"),
])
def test_malformed_relations_raise_spec_error_with_position(text, message):
    with pytest.raises(SpecError) as err:
        Relation.parse(text)
    assert message in str(err.value)
    assert err.value.line == 1 and err.value.column >= 1
    assert str(err.value).startswith("<string>:1:")


def test_aff_algebra():
    a = Aff.var("x") * 2 + 3
    b = Aff.var(UFCall("f", (Aff.var("x"),)))
    assert str(a - b) == "2*x - f(x) + 3"
    assert (a - a).is_const and (a - a).const == 0
    assert a.substitute({"x": Aff.num(5)}).const == 13
    assert b.evaluate({"x": 1}, lambda n, args: 10 * args[0]) == 10
