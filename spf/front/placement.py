"""Placement: destinations whose positions are computed from coordinates (paper 000, Sec. 4-5).

Some layouts are not stored level by level (:mod:`spf.front.storage` rejects them): DIA, ELL, BCSR.
Their relation still says where each entry goes.  Every layout index is one of:

- a **coordinate**: it equals a logical coordinate ``g = p``, or a tile of one or the offset
  in that tile: ``g = c*p + q`` with constant bounds ``0 <= q < c`` gives ``p = g / c`` and
  ``q = g % c`` (BCSR's block rows);
- a **ranked** index: the argument of an index array whose value the relation gives through
  logical coordinates, ``g = f(p) + ...``, so ``f(p)`` is a key of the coordinates (DIA:
  ``offset(pd) = gj - gi``; BCSR: ``gj = colIdx(pj) + pl`` with ``0 <= pl < B``, so ``pl`` is
  gj's offset in its tile and the key is the tile's start ``B * (gj / B)``).  The array holds
  the distinct keys in the order its ordering property states, ``p`` is a key's rank; when
  ``p`` runs over ``ptr(q) <= p < ptr(q + 1)`` the keys are ranked within each group of equal
  coordinates ``q`` and ``ptr`` is where each group starts (BCSR's block rows);
- a **slot**: an index appearing only inside an index array whose value is a coordinate,
  ``g = f(q, p)`` (ELL: ``colIdx(pi, pk) = gj``): entries sharing the other arguments take
  consecutive slots, the bound field is the largest such group, and unused slots get a value
  the relation excludes (``0 <= colIdx(pi, pk)``: -1).

The generated **analysis pass** (:mod:`spf.back.placement_passes`) over the source collects
what the destination needs (which keys occur, how many entries each group has); Python turns
those into the index arrays and sizes; a generated **fill pass** puts every value (and slot
coordinate) at its position.
Keys ranked globally are marked in a dense array over their range (it is as long as the
shape's extents); keys ranked within groups are recorded per entry, ranked by numpy, and the
fill pass reads each entry's position back in the same loop order.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import NoReturn

from ..errors import SpecError
from . import index_expr as ie
from .established import unestablished
from .layout import Layout
from .properties import Ordering
from .relation import Conj
from .terms import Aff, Atom, Constraint, FloorDiv, UFCall

Fail = Callable[[str], NoReturn]


def _dim(d: int) -> Aff:
    return Aff.var(f"d{d}")


def _tile(d: int, size: int) -> Aff:
    return Aff.var(FloorDiv(_dim(d), size))


def logical_dim(atom: Atom) -> int:
    """The logical dimension ``k`` a logical atom (``d<k>`` or ``floor(d<k> / c)``) reads."""
    name = atom.num.as_name() if isinstance(atom, FloorDiv) else atom
    if not isinstance(name, str):
        raise ValueError(f"{atom} is not a logical atom")
    return int(name[1:])


@dataclass(frozen=True)
class Ranked:
    index: str
    uf: str
    key: Aff                    # over logical atoms, in units of ``unit``
    unit: int                   # the array holds unit * key
    descending: bool
    group: tuple[str, ...] = ()     # coordinates the keys are ranked within (via ``pointer``)
    pointer: str | None = None


@dataclass(frozen=True)
class Slot:
    index: str
    uf: str
    args: tuple[str, ...]     # layout indices, in the array's argument order
    dim: int                  # logical dimension the array stores
    fill: int                 # value of an unused slot


@dataclass(frozen=True)
class Placement:
    layout: Layout
    coordinates: dict[str, Aff]    # layout index -> Aff over logical atoms (d0, floor(d0/c))
    ranked: Ranked | None
    slot: Slot | None
    bounds: dict[str, str | int | None]   # layout index -> scalar field, constant, None (pointer)
    value: tuple[str, ...]     # layout indices subscripting the value array

    def group(self) -> tuple[str, ...]:
        """The layout indices (coordinates) whose values share a slot counter."""
        return tuple(a for a in self.slot.args if a != self.slot.index) if self.slot else ()

    def monotone_group_dims(self) -> tuple[int, ...] | None:
        """The logical dimensions the slot group is computed from, when it grows with them
        (every group index a coordinate or its tile, not an offset): None otherwise."""
        dims: list[int] = []
        for p in self.group():
            a = self.coordinates[p]
            if len(a.terms) != 1 or a.const or a.terms[0][1] != 1:
                return None
            dims.append(logical_dim(a.terms[0][0]))
        return tuple(dims)

    @property
    def grouped(self) -> bool:
        """Whether keys are ranked within groups (recorded per entry)."""
        return self.ranked is not None and self.ranked.pointer is not None


@cache
def placement_or_none(layout: Layout) -> Placement | None:
    """How entries are placed in ``layout``, or None when spf cannot place them (cached)."""
    try:
        return placement_of(layout)
    except SpecError:
        return None


def placement_of(layout: Layout) -> Placement:
    """How entries are placed in ``layout``; SpecError naming what does not fit."""
    def fail(why: str) -> NoReturn:
        raise SpecError(f"layout {layout.name} cannot be placed: {why}", layout.source)

    why = layout.written_as_one_conjunction()
    if why:
        fail(why)
    for d, extent in enumerate(layout.shape):
        if extent.as_name() is None and not extent.is_const:
            fail(f"the extent of dimension {d} ({extent}) is neither a scalar field nor a "
                 "constant")
    conj = layout.relation.disjuncts[0]
    outs = list(layout.relation.out_vars or ())
    indices = list(layout.indices)
    sizes = {p: n for p in indices if (n := _constant_extent(conj, p)) is not None}
    coordinates, offsets, defs, defining = _coordinates(conj, outs, indices, sizes, fail)
    ranked, slot = _arrays(layout, conj, outs, coordinates, defs, fail)
    bounds = _bounds(layout, conj, sizes, coordinates, ranked, slot, fail)
    names = _value_indices(layout, ranked, fail)
    _check_fields(layout, coordinates, ranked, bounds, names, fail)
    used = _established(conj, defining, offsets, ranked, slot, bounds)
    extra = unestablished(layout, conj, used)
    if extra is not None:
        fail(f"constraint {extra} of its relation does not follow from the positions "
             "placement computes and the shape (it decides which entries the layout holds)")
    return Placement(layout, coordinates, ranked, slot, bounds, names)


_Definition = tuple[int, Aff, int]      # g_dim = value (+ an offset in a tile of this size)


def _coordinates(conj: Conj, outs: list[str], indices: list[str], sizes: dict[str, int],
                 fail: Fail) -> tuple[dict[str, Aff], set[str], list[_Definition],
                                      list[Constraint]]:
    """The layout indices that are coordinates (or a tile of one, or the offset in that
    tile: ``0 <= q < c`` by construction), the definitions of the logical coordinates that
    read index arrays (for :func:`_arrays`), and the equalities placement establishes (a
    second coordinate of an index, ``gj = pi`` beside ``gi = pi``, is not one: it is left
    to the relation's check, :func:`~spf.front.established.unestablished`)."""
    coordinates: dict[str, Aff] = {}
    offsets: set[str] = set()
    defs: list[_Definition] = []
    defining: list[Constraint] = []
    for c in conj:
        gs = [g for g in outs if c.aff.coeff(g)]
        if not c.is_eq or not gs:
            continue
        if len(gs) != 1 or abs(c.aff.coeff(gs[0])) != 1:
            fail(f"constraint {c} does not define one logical coordinate")
        k = c.aff.coeff(gs[0])
        value = (c.aff - Aff.var(gs[0], k)) * -k
        dim = outs.index(gs[0])
        offset = next((a for a, n in value.terms if n == 1 and a in sizes), None) \
            if len(value.terms) > 1 else None
        size = 1 if offset is None else sizes[offset]
        rest = value if offset is None else value - Aff.var(offset)
        single = _single_index(rest, indices)
        single = single if single is not None and rest == Aff.var(single, size) else None
        if {offset, single} & set(coordinates):
            continue                # a coordinate already: this equality is checked
        defining.append(c)
        if offset is not None:
            offsets.add(offset)
            coordinates[offset] = _dim(dim) - _tile(dim, size) * size
        if single is not None:
            coordinates[single] = _dim(dim) if offset is None else _tile(dim, size)
        else:
            defs.append((dim, rest, size))
    return coordinates, offsets, defs, defining


def _arrays(layout: Layout, conj: Conj, outs: list[str], coordinates: dict[str, Aff],
            defs: list[_Definition], fail: Fail) -> tuple[Ranked | None, Slot | None]:
    """The ranked index and the slot index: one of each at most, from the coordinates
    defined by an index array read."""
    ranked: Ranked | None = None
    slot: Slot | None = None
    for dim, value, size in defs:
        call, args, free = _index_read(layout, outs[dim], value, coordinates, fail)
        rest = value - Aff.var(call)
        if len(args) == 1 and ranked is None:
            target = _dim(dim) if size == 1 else _tile(dim, size) * size
            ranked = _ranked(layout, conj, call, free, target - rest.substitute(coordinates),
                             coordinates, fail)
        elif rest == Aff.num(0) and size == 1 and slot is None:
            slot = Slot(free, call.name, tuple(args), dim, _fill(layout, conj, call, fail))
        else:
            fail(f"coordinate {outs[dim]} = {value}: only one ranked and one slot array are "
                 "supported")
    return ranked, slot


def _index_read(layout: Layout, out: str, value: Aff, coordinates: dict[str, Aff],
                fail: Fail) -> tuple[UFCall, list[str], str]:
    """``value`` (coordinate ``out``'s definition) as one index array read at layout indices
    plus coordinates: the read, its arguments, and the one argument not a coordinate."""
    indices = list(layout.indices)
    calls = [(a, k) for a, k in value.terms if isinstance(a, UFCall)]
    plain = [a for a, k in value.terms if isinstance(a, str)]
    if len(calls) != 1 or calls[0][1] != 1 or any(a not in coordinates for a in plain):
        fail(f"coordinate {out} = {value} is not an index array read plus coordinates")
    call = calls[0][0]
    args = []
    for a in call.args:
        index = _single_index(a, indices)
        if index is None or a != Aff.var(index):
            fail(f"{call} is not read at layout indices")
        args.append(index)
    free = [a for a in args if a not in coordinates]
    if len(free) != 1:
        fail(f"{call} has {len(free)} arguments that are not coordinates (one is needed)")
    return call, args, free[0]


def _ranked(layout: Layout, conj: Conj, call: UFCall, index: str, key: Aff,
            coordinates: dict[str, Aff], fail: Fail) -> Ranked:
    """The ranked index ``index`` of ``call``, whose values are ``key`` (over logical
    atoms), ranked within the groups of its pointer when it runs over one."""
    unit = math.gcd(key.const, *(k for _, k in key.terms)) or 1
    pointer = _pointer(conj, index)
    group: tuple[str, ...] = ()
    if pointer is not None:
        ptr, q = pointer
        if not isinstance(q, str) or q not in coordinates:
            fail(f"{index} runs over {ptr}({q}) but {q} is not a coordinate")
        group = (q,)
    return Ranked(index, call.name, Aff(((a, k // unit) for a, k in key.terms), key.const // unit),
                  unit, _descending(layout, call.name, group, unit, fail), group,
                  pointer[0] if pointer else None)


def _bounds(layout: Layout, conj: Conj, sizes: dict[str, int], coordinates: dict[str, Aff],
            ranked: Ranked | None, slot: Slot | None, fail: Fail
            ) -> dict[str, str | int | None]:
    """Each layout index's upper bound: a constant, a scalar field, or None (a ranked
    index within its pointer's groups)."""
    bounds: dict[str, str | int | None] = {}
    for p in layout.indices:
        if p not in coordinates and not (ranked and ranked.index == p) \
                and not (slot and slot.index == p):
            fail(f"layout index {p} is neither a coordinate, a ranked nor a slot index")
        if ranked and ranked.index == p and ranked.pointer:
            bounds[p] = None
        else:
            bounds[p] = sizes[p] if p in sizes else _upper_field(layout, conj, p, fail)
    return bounds


def _value_indices(layout: Layout, ranked: Ranked | None, fail: Fail) -> tuple[str, ...]:
    """The layout indices subscripting the value array: each once, all of them but the
    groups a pointer implies."""
    if layout.implicit is not None:
        fail(f"its value is the constant {layout.value} (a pattern layout), and the fill pass "
             "places values")
    indices = set(layout.indices)
    names = tuple(getattr(s, "name", "?") for s in layout.value_ref.subscripts)
    implied = set(ranked.group) if ranked and ranked.pointer else set()
    if len(set(names)) != len(names) or not set(names) <= indices \
            or indices - set(names) != implied:
        shown = "".join(f"[{ie.to_c(x, str, _call_text)}]" for x in layout.value_ref.subscripts)
        fail(f"value {layout.value_ref.array}{shown} is not subscripted by every layout index"
             + (f" but {', '.join(sorted(implied))}" if implied else ""))
    return names


def _check_fields(layout: Layout, coordinates: dict[str, Aff], ranked: Ranked | None,
                  bounds: dict[str, str | int | None], names: tuple[str, ...], fail: Fail) -> None:
    """Every scalar field is set once, by the shape or by a bound placement computes (a
    shape field bounding a layout index only as that dimension's coordinate: the same
    value), and the value array is laid out as the fill pass writes it: row-major over the
    bounds of its subscripts (a pointer-ranked index: the pointer at its group's bound)."""
    shape = {name: d for d, e in enumerate(layout.shape) if (name := e.as_name()) is not None}
    for p, field in bounds.items():
        if isinstance(field, str) and field in shape and coordinates.get(p) != _dim(shape[field]):
            fail(f"{field} is the extent of dimension {shape[field]} and also bounds layout "
                 f"index {p}, which placement sets to another value")
    given = set(shape) | {f for f in bounds.values() if isinstance(f, str)}
    missing = [f for f in layout.scalar_fields if f not in given]
    if missing:
        fail(f"the scalar field(s) {', '.join(missing)} are set neither by the shape nor by a "
             "bound placement computes")

    def extent(p: str) -> ie.IExpr:
        bound = bounds[p]
        if bound is None:           # ranked within its group, between pointers
            assert ranked is not None and ranked.pointer is not None
            return ie.Call(ranked.pointer, tuple(extent(q) for q in ranked.group))
        return ie.Name(bound) if isinstance(bound, str) else ie.Num(bound)
    dims = layout.fields[layout.value_ref.array].dims
    expected = tuple(extent(p) for p in names)
    if dims != expected:
        shown = "".join(f"[{ie.to_c(d, str, _call_text)}]" for d in expected)
        fail(f"the value array {layout.value_ref.array} is not declared with the extents "
             f"{shown} in which the fill pass lays out its values")


def _call_text(name: str, args: list[str]) -> str:
    return f"{name}({', '.join(args)})"


def _established(conj: Conj, defining: list[Constraint], offsets: set[str],
                 ranked: Ranked | None, slot: Slot | None, bounds: dict[str, str | int | None]
                 ) -> list[Constraint]:
    """The constraints placement makes hold by construction: the equalities giving the
    logical coordinates (``defining``), an offset's bounds in its tile, a ranked or slot
    index's bounds (its positions count from 0 to the number it sets, or between its group's
    pointers), a coordinate's bound by the scalar field it sets, and the mark of unused
    slots."""
    used = list(defining)
    counted = {x.index for x in (ranked, slot) if x is not None}
    for c in conj:
        if c.is_eq:
            continue
        for p, field in bounds.items():
            k = c.aff.coeff(p)
            rest = c.aff - Aff.var(p, k)
            starts = k == 1 and rest == Aff.num(0)                          # 0 <= p
            below = k == -1 and isinstance(field, str) and rest == Aff.var(field) - 1
            if (p in offsets and abs(k) == 1 and rest.is_const) \
                    or (p in counted and starts) or below:
                used.append(c)
    if ranked is not None and ranked.pointer is not None:
        used += [c for c in conj if not c.is_eq and c.aff.coeff(ranked.index)
                 and any(call.name == ranked.pointer for call in c.calls())]
    if slot is not None:
        used += [c for c in conj if not c.is_eq and len(c.aff.terms) == 1
                 and isinstance(c.aff.terms[0][0], UFCall) and c.aff.terms[0][0].name == slot.uf]
    return used


def _single_index(a: Aff, indices: list[str]) -> str | None:
    """The layout index ``a`` is a multiple of, if it is one."""
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][0] in indices:
        return a.terms[0][0]
    return None


def _constant_extent(conj: Conj, p: str) -> int | None:
    """``c`` when the relation bounds ``p`` by the constants ``0 <= p < c``."""
    lower = upper = None
    for c in conj:
        if c.is_eq or len(c.aff.terms) != 1 or c.aff.terms[0][0] != p:
            continue
        if c.aff.terms[0][1] == 1 and c.aff.const == 0:
            lower = 0
        elif c.aff.terms[0][1] == -1:
            upper = c.aff.const + 1
    return upper if lower == 0 and upper is not None and upper > 0 else None


def _pointer(conj: Conj, p: str) -> tuple[str, Atom] | None:
    """``(ptr, q)`` when the relation bounds ``p`` by ``ptr(q) <= p < ptr(q + 1)``."""
    for c in conj:
        if c.is_eq or c.aff.coeff(p) != 1 or len(c.aff.terms) != 2 or c.aff.const:
            continue
        call = next((a for a, k in c.aff.terms if isinstance(a, UFCall) and k == -1), None)
        if call is None or len(call.args) != 1 or len(call.args[0].terms) != 1:
            continue
        q = call.args[0].terms[0][0]
        upper = Aff.var(UFCall(call.name, (Aff.var(q) + 1,))) - Aff.var(p) - 1
        if call.args[0] == Aff.var(q) and any(not d.is_eq and d.aff == upper for d in conj):
            return call.name, q
    return None


def _descending(layout: Layout, uf: str, group: tuple[str, ...], unit: int, fail: Fail) -> bool:
    """Whether ``uf``'s ordering property asks for decreasing keys; SpecError when distinct
    keys ranked ``group``-wise (multiples of ``unit``) cannot satisfy it."""
    for p in layout.properties:
        if not isinstance(p, Ordering) or p.uf != uf:
            continue
        if not p.orders_within(group) or p.spacing > unit:
            fail(f"property {p.kind} {p.formula()} does not hold for distinct keys ranked "
                 + (f"within each ({', '.join(group)})" if group else "over the whole tensor")
                 + (f" in steps of {unit}" if unit > 1 else ""))
        return p.is_descending
    return False


def _upper_field(layout: Layout, conj: Conj, p: str, fail: Fail) -> str:
    for c in conj:
        if c.is_eq or c.aff.coeff(p) != -1:
            continue
        field = (c.aff + Aff.var(p) + Aff.num(1)).as_name()       # field - 1 - p >= 0
        if field is not None and field in layout.scalar_fields:
            return field
    fail(f"layout index {p} is not bounded by a scalar field (p < field) or a constant")


def _fill(layout: Layout, conj: Conj, call: UFCall, fail: Fail) -> int:
    """A value of ``call``'s array that the relation excludes (an unused slot)."""
    for c in conj:
        if not c.is_eq and c.aff.coeff(call) == 1 and len(c.aff.terms) == 1:
            return -c.aff.const - 1          # call + k >= 0 excludes -k - 1
    fail(f"nothing in the relation excludes a value of {call.name}: unused slots cannot be "
         "marked")


def _atom_range(atom: Atom, shape: tuple[int, ...]) -> tuple[int, int]:
    """Smallest and largest value of a logical atom (``d1``, ``floor(d1/4)``) over ``shape``
    (an empty range, hi < lo, when the dimension is empty)."""
    hi = shape[logical_dim(atom)] - 1
    return 0, hi // atom.den if isinstance(atom, FloorDiv) else hi


def aff_range(a: Aff, shape: tuple[int, ...]) -> tuple[int, int]:
    """Interval of ``a`` (an Aff over logical atoms) over ``shape``."""
    lo = hi = a.const
    for atom, k in a.terms:
        alo, ahi = _atom_range(atom, shape)
        lo, hi = (lo + k * ahi, hi + k * alo) if k < 0 else (lo + k * alo, hi + k * ahi)
    return lo, hi
