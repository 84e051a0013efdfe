"""Placement: destinations whose positions are computed from coordinates (paper 000, Sec. 4-5).

Some layouts are not stored level by level (:mod:`spf.storage` rejects them): DIA, ELL.  Their
relation still says where each entry goes.  Every layout index is one of:

- a **coordinate**: an equality ``g = p`` (DIA's and ELL's rows);
- a **ranked** index: the argument of an index array whose value the relation gives through
  logical coordinates, ``g = ... + f(p)``, so ``f(p)`` is an affine key of the coordinates (DIA:
  ``offset(pd) = gj - gi``).  The array holds the distinct keys in the order its monotonic
  property states, its length field is their number, and ``p`` is a key's rank;
- a **slot**: an index appearing only inside an index array whose value is a coordinate,
  ``g = f(q, p)`` (ELL: ``colIdx(pi, pk) = gj``): entries sharing the other arguments take
  consecutive slots, the bound field is the largest such group, and unused slots get a value
  the relation excludes (``0 <= colIdx(pi, pk)``: -1).

A generated **analysis pass** over the source collects what the destination needs (which
keys occur, how many entries each group has); Python turns those into the index arrays and
sizes; a generated **fill pass** puts every value (and slot coordinate) at its position.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import SpecError
from .layout import Layout
from .terms import Aff, UFCall


@dataclass(frozen=True)
class Ranked:
    index: str
    uf: str
    key: Aff            # over logical dimension names d0, d1, ...
    descending: bool


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
    coordinates: dict          # layout index -> logical dimension
    ranked: Ranked | None
    slot: Slot | None
    bounds: dict               # layout index -> scalar field bounding it
    value: tuple[str, ...]     # layout indices subscripting the value array

    def group(self) -> tuple[str, ...]:
        """The layout indices (coordinates) whose values share a slot counter."""
        return tuple(a for a in self.slot.args if a != self.slot.index) if self.slot else ()


def placement_of(layout: Layout) -> Placement:
    """How entries are placed in ``layout``; SpecError naming what does not fit."""
    def fail(why: str):
        raise SpecError(f"layout {layout.name} cannot be placed: {why}", layout.source)

    rel = layout.relation
    if len(rel.disjuncts) != 1 or rel.exists:
        fail("its relation is not a single conjunction without existentials")
    conj = rel.disjuncts[0]
    outs = list(rel.out_vars or ())
    indices = list(layout.indices)
    coordinates: dict[str, int] = {}
    defs: list[tuple[int, Aff]] = []           # g = value
    for c in conj:
        gs = [g for g in outs if c.aff.coeff(g)]
        if not c.is_eq or not gs:
            continue
        if len(gs) != 1 or abs(c.aff.coeff(gs[0])) != 1:
            fail(f"constraint {c} does not define one logical coordinate")
        k = c.aff.coeff(gs[0])
        value = (c.aff - Aff.var(gs[0], k)) * -k
        if value.const == 0 and len(value.terms) == 1 and value.terms[0] == (value.terms[0][0], 1) \
                and value.terms[0][0] in indices:
            coordinates[value.terms[0][0]] = outs.index(gs[0])
        else:
            defs.append((outs.index(gs[0]), value))
    logical = {p: Aff.var(f"d{d}") for p, d in coordinates.items()}
    ranked = slot = None
    for dim, value in defs:
        calls = [(a, k) for a, k in value.terms if isinstance(a, UFCall)]
        plain = [a for a, k in value.terms if isinstance(a, str)]
        if len(calls) != 1 or calls[0][1] != 1 or any(a not in coordinates for a in plain):
            fail(f"coordinate {outs[dim]} = {value} is not an index array read plus coordinates")
        call = calls[0][0]
        args = []
        for a in call.args:
            if not (a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1
                    and a.terms[0][0] in indices):
                fail(f"{call} is not read at layout indices")
            args.append(a.terms[0][0])
        free = [a for a in args if a not in coordinates]
        if len(free) != 1:
            fail(f"{call} has {len(free)} arguments that are not coordinates (one is needed)")
        rest = value - Aff.var(call)
        if len(args) == 1 and ranked is None:
            key = Aff.var(f"d{dim}") - rest.substitute(logical)
            order = next((p.order for p in layout.properties
                          if p.kind == "monotonic" and p.uf == call.name), "<")
            if order not in ("<", ">"):
                fail(f"{call.name} must be strictly monotonic to rank its keys")
            ranked = Ranked(free[0], call.name, key, order == ">")
        elif rest == Aff.num(0) and slot is None:
            slot = Slot(free[0], call.name, tuple(args), dim, _fill(layout, conj, call, fail))
        else:
            fail(f"coordinate {outs[dim]} = {value}: only one ranked and one slot array are "
                 "supported")
    bounds = {}
    for p in indices:
        if p not in coordinates and not (ranked and ranked.index == p) \
                and not (slot and slot.index == p):
            fail(f"layout index {p} is neither a coordinate, a ranked nor a slot index")
        bounds[p] = _upper_field(layout, conj, p, fail)
    sub = layout.value.subscripts
    names = tuple(getattr(s, "name", "?") for s in sub)
    if sorted(names) != sorted(indices):
        fail(f"value {layout.value} is not subscripted by every layout index")
    return Placement(layout, coordinates, ranked, slot, bounds, names)


def _upper_field(layout: Layout, conj, p: str, fail) -> str:
    for c in conj:
        if c.is_eq or c.aff.coeff(p) != -1:
            continue
        rest = c.aff + Aff.var(p) + Aff.num(1)       # field - 1 - p >= 0
        if rest.const == 0 and len(rest.terms) == 1 and rest.terms[0][1] == 1 \
                and rest.terms[0][0] in layout.scalar_fields:
            return rest.terms[0][0]
    fail(f"layout index {p} is not bounded by a scalar field (p < field)")


def _fill(layout: Layout, conj, call: UFCall, fail) -> int:
    """A value of ``call``'s array that the relation excludes (an unused slot)."""
    for c in conj:
        if not c.is_eq and c.aff.coeff(call) == 1 and len(c.aff.terms) == 1:
            return -c.aff.const - 1          # call + k >= 0 excludes -k - 1
    fail(f"nothing in the relation excludes a value of {call.name}: unused slots cannot be "
         "marked")


# --- generated passes ----------------------------------------------------------------------------
ANALYSIS_PARAMS = ["int32_t *restrict spf_present", "int32_t *restrict spf_count",
                   "int64_t *restrict spf_entries", "int64_t spf_kmin"]
FILL_PARAMS = ["double *restrict spf_data", "int32_t *restrict spf_slot",
               "int32_t *restrict spf_next", "const int32_t *restrict spf_rank",
               "int64_t spf_kmin", "const int64_t *restrict spf_bound"]


def _aff_c(a: Aff, names: list[str]) -> str:
    parts = [f"{k} * (int64_t){names[int(atom[1:])]}" if k != 1
             else f"(int64_t){names[int(atom[1:])]}" for atom, k in a.terms]
    if a.const or not parts:
        parts.append(str(a.const))
    return " + ".join(parts)


def _linear(pl: Placement, indices: tuple[str, ...], value_of: dict[str, str]) -> str:
    """Row-major position of ``indices`` over their bounds (``spf_bound[k]``)."""
    order = list(pl.layout.indices)
    text = ""
    for p in indices:
        text = value_of[p] if not text else \
            f"({text}) * spf_bound[{order.index(p)}] + {value_of[p]}"
    return text or "0"


def statements(pl: Placement, names: list[str], drop_zeros: bool) -> tuple[list[str], list[str]]:
    """The analysis and the fill statement for a source whose logical indices are ``names``."""
    coord = {p: f"(int64_t){names[d]}" for p, d in pl.coordinates.items()}
    key = f"({_aff_c(pl.ranked.key, names)}) - spf_kmin" if pl.ranked else ""
    analysis = ["++*spf_entries;"]
    if pl.ranked:
        analysis.append(f"spf_present[{key}] = 1;   /* {pl.ranked.uf} holds this key */")
    if pl.slot:
        analysis.append(f"++spf_count[{_linear(pl, pl.group(), coord)}];   "
                        f"/* entries per {', '.join(pl.group()) or 'tensor'} */")
    fill = []
    value_of = dict(coord)
    for p in pl.layout.indices:
        if pl.ranked and p == pl.ranked.index:
            fill.append(f"const int64_t spf_{p} = spf_rank[{key}];   /* rank of the key in "
                        f"{pl.ranked.uf} */")
            value_of[p] = f"spf_{p}"
        elif pl.slot and p == pl.slot.index:
            fill.append(f"const int64_t spf_{p} = spf_next[{_linear(pl, pl.group(), coord)}]++;"
                        "   /* the group's next slot */")
            value_of[p] = f"spf_{p}"
    if pl.slot:
        fill.append(f"spf_slot[{_linear(pl, pl.slot.args, value_of)}] = "
                    f"(int32_t){names[pl.slot.dim]};   /* {pl.slot.uf} */")
    fill.append(f"spf_data[{_linear(pl, pl.value, value_of)}] += $value;")
    if drop_zeros:
        analysis, fill = ([*["const double spf_v = $value;", "if (spf_v != 0.0) {   /* zeros are "
                             "not stored */"], *("    " + t.replace("$value", "spf_v")
                                                   for t in body), "}"]
                          for body in (analysis, fill))
    return analysis, fill
