"""The default loop order of a kernel.

The sparse inputs' layout indices, operand by operand, with one refinement: **locate before
find**.  A layout index ``v`` that equals a logical index (``A_pj = j``: a dense level, where
the position is the coordinate) can be *located* from any loop that produces that index.  When
a later operand's loop ``w`` reads the index from its index array (``j = x.idx(x_p)``) and its
bounds need nothing placed after ``v``, ``w`` is moved before ``v``: the nest then runs over
``w``'s entries and assigns ``v``, instead of running ``v`` over its whole extent with a find
for ``w`` inside (TACO's "iterate the compressed level, locate into the dense one").  This is
push SpMSpV with a column-major matrix: ``x``'s nonzeros drive the loop over columns.
"""
from __future__ import annotations

from ..front.terms import Constraint, UFCall
from .iteration_space import IterationSpace


def default_order(space: IterationSpace) -> tuple[list[str], list[str]]:
    """(loop order, one sentence per variable moved by locate-before-find)."""
    inputs = [u for u in space.uses if not u.is_output]
    sparse = [u for u in inputs if u.is_sparse] or inputs
    order = [v for u in sparse for v in u.vars]
    owner = {v: u.name for u in sparse for v in u.vars}
    why: list[str] = []
    moved = True
    while moved:
        moved = False
        for k, v in enumerate(order):
            index = _located_index(space, v)
            if index is None:
                continue
            w = _driver(space, order, k, index, owner)
            if w is not None:
                order.remove(w)
                order.insert(k, w)
                why.append(f"{w} placed before {v}: {v} is located from {index}, which "
                           f"{owner[w]}'s index array gives at {w} (iterate {owner[w]}'s "
                           f"entries, locate into {owner[v]})")
                moved = True
                break
    return order, why


def _located_index(space: IterationSpace, v: str) -> str | None:
    """The logical index ``v`` equals (``v = i``), if a constraint says so."""
    for c in space.constraints:
        if not c.is_eq or c.calls() or c.names() != {v} | (c.names() & set(space.indices)):
            continue
        rest = c.names() - {v}
        if len(rest) == 1 and c.aff.const == 0 and abs(c.aff.coeff(v)) == 1 \
                and c.aff.coeff(v) == -c.aff.coeff(next(iter(rest))):
            return next(iter(rest))
    return None


def _driver(space: IterationSpace, order: list[str], k: int, index: str,
            owner: dict[str, str]) -> str | None:
    """A variable after ``order[k]``, of another operand, whose index-array read gives
    ``index`` and whose other constraints need only variables before ``order[k]`` (or give
    other logical indices from ``w``'s index arrays)."""
    v = order[k]
    before = set(order[:k])
    for w in order[k + 1:]:
        if owner[w] == owner[v]:
            continue
        binding = [c for c in space.constraints if _gives(c, {index, v}, w)]
        if binding and all(_needs_only(c, w, before) or _gives(c, set(space.indices), w)
                           for c in space.constraints if w in c.names()):
            return w
    return None


def _gives(c: Constraint, located: set[str], w: str) -> bool:
    """``c`` is ``i = X.array(w)`` for ``i`` the located index or variable: an equality
    whose only other variable is ``w``, inside the call."""
    plain = {a for a in c.aff.atoms() if isinstance(a, str) and "." not in a}
    calls = [a for a in c.aff.atoms() if not isinstance(a, str)]
    return c.is_eq and len(plain) == 1 and plain <= located \
        and abs(c.aff.coeff(next(iter(plain)))) == 1 and len(calls) == 1 \
        and isinstance(calls[0], UFCall) and all(a.names() == {w} for a in calls[0].args)


def _needs_only(c: Constraint, w: str, before: set[str]) -> bool:
    """``c`` mentions, besides ``w`` and scalar fields, only variables in ``before``."""
    return all("." in n or n == w or n in before for n in c.names())
