"""Loop coalescing: an outer loop whose only role is to bound an inner loop over one index
array's consecutive segments is dropped, and the inner loop runs over all the segments at once.

``for p in [L, U]: for q in [f(p + c), f(p + c + 1))`` visits the positions
``[f(L + c), f(U + c + 1))``, each once and in the same order, when ``f`` is non-decreasing
(a ``monotonic`` property with order ``<=`` or ``<`` that the layout declares and validation
checks).  When nothing else reads ``p`` (the statement, guards, finds, later bounds), the
single loop saves the outer loop's per-segment exit, a mispredicted branch per segment for
segments of irregular length (e.g. a CSR input's rows in a histogram pass).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..front.terms import Aff, Constraint, UFCall
from ..middle.iteration_space import IterationSpace
from ..middle.scan import Level, LevelKind, LoopNest


def coalesce(nest: LoopNest, space: IterationSpace, needed: Callable[[LoopNest], set[str]],
             fixed: set[int]) -> tuple[LoopNest, dict[str, str]]:
    """``nest`` with every coalescible pair of loops merged (the outer level becomes an
    unused assignment guarded by its loop being non-empty, so level positions do not move),
    and a note per merged inner loop; ``needed(nest)``: the names the lowered code reads;
    ``fixed``: levels that must stay as they are (finds, hooks, parallel loops)."""
    notes: dict[str, str] = {}
    k = 0
    while k < len(nest.levels):
        merged = _merge_at(nest, space, needed, fixed, k)
        if merged is not None:
            nest, inner, why = merged
            notes[inner] = why
        k += 1
    return nest, notes


def _merge_at(nest: LoopNest, space: IterationSpace, needed: Callable[[LoopNest], set[str]],
              fixed: set[int], k: int) -> tuple[LoopNest, str, str] | None:
    levels = nest.levels
    outer = levels[k]
    if outer.kind is not LevelKind.LOOP or k in fixed or outer.guards \
            or len(outer.lower) != 1 or len(outer.upper) != 1 \
            or outer.lower[0][1] != 1 or outer.upper[0][1] != 1:
        return None
    inner_at = next((m for m in range(k + 1, len(levels))
                     if levels[m].kind is LevelKind.LOOP), None)
    if inner_at is None or inner_at in fixed or any(
            levels[m].guards or m in fixed for m in range(k + 1, inner_at + 1)):
        return None
    p = outer.var
    segment = _segment(levels[inner_at], p)
    if segment is None or not _non_decreasing(space, segment[0]):
        return None
    f, c = segment
    lo, hi = outer.lower[0][0], outer.upper[0][0]
    first = Aff.var(UFCall(f, (lo + c,)))
    last = Aff.var(UFCall(f, (hi + c + 1,)))
    inner = replace(levels[inner_at], lower=[(first, 1)], upper=[(last - 1, 1)])
    stand_in = Level(p, LevelKind.ASSIGN, expr=lo, guards=[Constraint.ge(hi, lo)])
    new = replace(nest, levels=[*levels[:k], stand_in, *levels[k + 1:inner_at], inner,
                                *levels[inner_at + 1:]])
    if _derived(new, p) & needed(new):
        return None
    seg = f"[{f}({Aff.var(p) + c}), {f}({Aff.var(p) + c + 1}))"
    why = (f"loops {p} and {inner.var} coalesced: no code reads {p}, and {f} is declared "
           f"non-decreasing, so the segments {seg} follow one another")
    return new, inner.var, why


def _segment(inner: Level, p: str) -> tuple[str, Aff] | None:
    """``(f, c)`` when ``inner`` runs over ``[f(p + c), f(p + c + 1))``."""
    if len(inner.lower) != 1 or len(inner.upper) != 1 \
            or inner.lower[0][1] != 1 or inner.upper[0][1] != 1:
        return None
    lo, hi = _call_of(inner.lower[0][0]), _call_of(inner.upper[0][0] + 1)
    if lo is None or hi is None or lo.name != hi.name:
        return None
    arg_lo, arg_hi = lo.args[0], hi.args[0]
    if arg_hi - arg_lo != Aff.num(1) or arg_lo.coeff(p) != 1:
        return None
    c = arg_lo - Aff.var(p)
    if p in c.names():
        return None
    return lo.name, c


def _call_of(a: Aff) -> UFCall | None:
    """The call when ``a`` is exactly one single-argument UF call."""
    terms = list(a.terms)
    if a.const != 0 or len(terms) != 1:
        return None
    atom, coeff = terms[0]
    if coeff != 1 or not isinstance(atom, UFCall) or len(atom.args) != 1:
        return None
    return atom


def _non_decreasing(space: IterationSpace, array: str) -> bool:
    """Whether a tensor's layout declares ``array`` (``A.rowPtr``) monotonic ``<=``/``<``."""
    for use in space.uses:
        for prop in use.layout.properties:
            if prop.non_decreasing() and use.symbol(prop.uf) == array:
                return True
    return False


def _derived(nest: LoopNest, p: str) -> set[str]:
    """``p`` and the assigned variables computed from it (transitively)."""
    out = {p}
    changed = True
    while changed:
        changed = False
        for lv in nest.levels:
            if lv.kind is LevelKind.ASSIGN and lv.var not in out and lv.var != p \
                    and lv.assigned.names() & out:
                out.add(lv.var)
                changed = True
            if lv.kind is LevelKind.READ and lv.var not in out \
                    and any(a.names() & out for a in lv.read_call.args):
                out.add(lv.var)
                changed = True
    return out
