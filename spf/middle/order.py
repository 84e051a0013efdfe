"""The default loop order of a kernel.

The sparse inputs' layout indices, operand by operand (a structural mask's first: only its
entries are computed), with one refinement: **locate before find**.  A layout index ``v``
that equals a logical index (``A_pj = j``: a dense level, where the position is the
coordinate) can be *located* from any loop that produces that index.  When
a later operand's loop ``w`` reads the index from its index array (``j = x.idx(x_p)``) and its
bounds need nothing placed after ``v``, ``w`` is moved before ``v``: the nest then runs over
``w``'s entries and assigns ``v``, instead of running ``v`` over its whole extent with a find
for ``w`` inside (TACO's "iterate the compressed level, locate into the dense one").  This is
push SpMSpV with a column-major matrix: ``x``'s nonzeros drive the loop over columns.

For an assembled output, :func:`output_order` offers a second order: the layout indices that
locate the output's coordinates, hoisted outermost in the output's storage order, so that
the loops may produce entries in that order (the plan takes it only if Z3 proves they do).
"""
from __future__ import annotations

from ..front.terms import Constraint, UFCall
from .iteration_space import IterationSpace
from .scan import LevelKind, LoopNest


def default_order(space: IterationSpace) -> tuple[list[str], list[str]]:
    """(loop order, one sentence per variable moved by locate-before-find)."""
    inputs = [u for u in space.uses if not u.is_output]
    sparse = [u for u in inputs if u.is_sparse] or inputs
    why: list[str] = []
    mask = next((u for u in sparse if u.name == space.expr.mask), None)
    if mask is not None and sparse[0] is not mask:
        sparse = [mask] + [u for u in sparse if u is not mask]
        why.append(f"the mask {mask.name}'s loops placed first: its entries are the only "
                   "output elements computed (no product is formed and then dropped)")
    order = [v for u in sparse for v in u.vars]
    owner = {v: u.name for u in sparse for v in u.vars}
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


def output_order(space: IterationSpace, order: list[str], key: tuple[str, ...]
                 ) -> tuple[list[str], list[str], str] | None:
    """``order`` with the variables locating the output's leading storage coordinates
    ``key`` (``i = 8*pi + pk``: an affine function of loop variables, no index array) moved
    outermost, in key order; the variables that moved inside them; and why.  None when that
    moves nothing (the first coordinate is not located, or already leads)."""
    hoisted: list[str] = []
    located: list[str] = []
    for index in key:
        by = _locating_vars(space, order, index)
        if by is None:
            break
        hoisted += [v for v in by if v not in hoisted]
        located.append(f"{index} from {', '.join(by)}")
    if not hoisted or order[:len(hoisted)] == hoisted:
        return None
    new = hoisted + [v for v in order if v not in hoisted]
    moved = [w for w in order if any(order.index(w) < order.index(h)
                                     and new.index(w) > new.index(h) for h in hoisted)]
    return new, moved, (f"{', '.join(hoisted)} placed outermost (locating "
                        f"{'; '.join(located)}): the output's storage order starts with "
                        f"{', '.join(key[:len(located)])}, so the loops can produce entries "
                        "in that order")


def _locating_vars(space: IterationSpace, order: list[str], index: str) -> list[str] | None:
    """The loop variables (in ``order``'s order) that give logical index ``index`` through
    an affine equality without an index-array read, if one does."""
    for c in space.constraints:
        if not c.is_eq or c.calls() or index not in c.names():
            continue
        rest = c.names() - {index}
        if rest and rest <= set(order) and abs(c.aff.coeff(index)) == 1:
            return [v for v in order if v in rest]
    return None


def inner_extents_stored_counts(nest: LoopNest, moved: list[str]) -> str | None:
    """Why the loops ``moved`` inside may stay there: each runs over a count of stored parts
    (a layout field that is no extent of any tensor, e.g. a number of diagonals), not over a
    dimension, so the nest keeps a few input streams open; None (with nothing said) when
    one runs over a dimension (an extent), which would walk a large input across its
    storage order."""
    extents = set().union(*(e.names() for e in nest.space.extent.values()))
    for v in moved:
        lv = nest.level(v)
        if lv.kind is not LevelKind.LOOP:
            continue
        names = set().union(*(aff.names() for aff, _ in lv.lower + lv.upper))
        if names & extents:
            return None
    return (f"the loops moved inside ({', '.join(moved)}) run over counts of stored parts, "
            "not over a dimension")


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
