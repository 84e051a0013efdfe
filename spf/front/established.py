"""Whether a way of writing a layout accounts for every constraint of its relation.

Assembling by storage levels (:mod:`spf.front.storage`) establishes some constraints of the
relation by construction (a dense level's bounds, a pointer pair).  Every other constraint must
follow from those and from the shape (each logical coordinate within its extent); one that does
not (``gj <= gi`` added to CSR, ``1 <= tbl(pi, pj)``) decides which entries the layout holds or
what an array must contain, which assembly does not write: the layout is then written by its
relation's solution (:mod:`spf.front.writing`), which checks every constraint per entry.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

from . import index_expr as ie
from .isl_bridge import encode, isl_limit
from .layout import Layout
from .properties import Range
from .relation import Relation
from .terms import Aff, Constraint, UFCall


def unestablished(layout: Layout, conj: Sequence[Constraint],
                  used: Iterable[Constraint]) -> Constraint | None:
    """The first constraint of ``conj`` that neither the constraints ``used`` (which the way
    of writing establishes) nor the shape implies; None when there is none."""
    outs = list(layout.relation.out_vars or ())
    known = list(used)
    taken = set(known)
    known += within_shape(layout)
    with isl_limit(f"checking the relation of layout {layout.name}", layout.source):
        for c in conj:
            if c not in taken and not implied(known, c, list(layout.indices) + outs):
                return c
    return None


def within_shape(layout: Layout) -> list[Constraint]:
    """Every logical coordinate within its extent: ``0 <= g_k <= shape_k - 1``."""
    outs = list(layout.relation.out_vars or ())
    return [c for g, extent in zip(outs, layout.shape)
            for c in (Constraint.ge(Aff.var(g), Aff.num(0)), Constraint.ge(extent - 1, Aff.var(g)))]


@lru_cache(maxsize=256)
def keeps_within_shape(layout: Layout) -> bool:
    """Whether every entry the relation gives lies within the shape, whatever the index
    arrays hold beyond the ranges the layout declares (a padding slot of a relation that
    does not bound its coordinates, ``gj = pi + offset(pd)`` without ``0 <= gj``, may not)."""
    rel = layout.relation
    dims = list(layout.indices) + list(rel.out_vars or ()) + list(rel.exists)
    box = within_shape(layout)
    with isl_limit(f"checking the relation of layout {layout.name}", layout.source):
        for conj in rel.disjuncts:
            known = list(conj) + [f for c in conj for call in c.calls()
                                  for f in layout.range_constraints(call)]
            if not all(implied(known, c, dims) for c in box):
                return False
    return True


@lru_cache(maxsize=256)
def coordinate_ranges(layout: Layout) -> frozenset[Range]:
    """The ranges of index arrays that every part of the relation reads as a logical
    coordinate (``gi = rowIdx(pi)``, the array read nowhere else) and whose bounds contain that
    coordinate's extent: arrays built to hold only entries' coordinates satisfy them wherever
    every entry lies within the shape."""
    outs = list(layout.relation.out_vars or ())
    out = set()
    for prop in layout.properties:
        if not isinstance(prop, Range) or prop.relative:
            continue
        coords = {_coordinate_read(conj, prop.uf, outs) for conj in layout.relation.disjuncts}
        if len(coords) != 1 or None in coords:
            continue
        (k,) = coords
        assert k is not None
        low = None if prop.lower is None else Aff.num(0) - prop.lower
        high = None if prop.upper is None else prop.upper - (layout.shape[k] - 1)
        if all(d is None or (not d.terms and d.const >= 0) for d in (low, high)):
            out.add(prop)
    return frozenset(out)


def _coordinate_read(conj: Sequence[Constraint], uf: str, outs: list[str]) -> int | None:
    """The logical coordinate ``k`` where ``conj`` reads ``uf`` only as ``g_k = uf(...)``."""
    found = None
    for c in conj:
        calls = [a for a, _ in c.aff.terms if isinstance(a, UFCall) and a.name == uf]
        nested = [call for a, _ in c.aff.terms if isinstance(a, UFCall)
                  for arg in a.args for call in arg.calls() if call.name == uf]
        if nested:
            return None
        if not calls:
            continue
        (call,) = calls
        rest = c.aff - Aff.var(call, c.aff.coeff(call))
        name = rest.as_name()
        if not c.is_eq or abs(c.aff.coeff(call)) != 1 or name is None or name not in outs or \
                rest.coeff(name) != -c.aff.coeff(call) or found not in (None, outs.index(name)):
            return None
        found = outs.index(name)
    return found


def implied(known: list[Constraint], c: Constraint, dims: list[str]) -> bool:
    """Whether ``known`` implies ``c`` for every value of the other names (index-array reads
    are free values: nothing is assumed of the arrays)."""
    negations = [Constraint.ge(Aff.num(-1), c.aff)]             # aff <= -1
    if c.is_eq:
        negations.append(Constraint.ge(c.aff, Aff.num(1)))      # aff >= 1
    for negation in negations:
        conj = [*known, negation]
        if not encode(dims, conj).isl_set([conj]).is_empty():
            return False
    return True


def holds_densely(layout: Layout, array: str) -> bool:
    """Whether the field ``array`` holds the whole tensor in row-major order, as a layout's
    ``dense_array`` says: the relation is ``g_k = p_k`` over ``0 <= p_k < shape_k`` (no more,
    no less) and the value is ``array[p_0]...[p_n]``."""
    rel = layout.relation
    outs = list(rel.out_vars or ())
    indices = list(layout.indices)
    if rel.exists or rel.calls() or len(indices) != len(outs) \
            or layout.value_array != array \
            or layout.value_ref.subscripts != tuple(ie.Name(p) for p in indices):
        return False
    identity = Relation(indices, outs, [[c for p, g, e in zip(indices, outs, layout.shape)
                                         for c in (Constraint.eq(Aff.var(g), Aff.var(p)),
                                                   Constraint.ge(Aff.var(p), Aff.num(0)),
                                                   Constraint.ge(e - 1, Aff.var(p)))]])
    with isl_limit(f"checking the dense layout {layout.name}", layout.source):
        return rel.is_subset(identity) and identity.is_subset(rel)
