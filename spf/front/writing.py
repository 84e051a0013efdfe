"""Writing entries into a layout, solved from its relation (paper 000: remap, analysis,
assembly; here derived from any relation that says where each entry goes).

The relation of one part (disjunct) is read as equations for its unknowns, given an entry's
logical coordinates ``g``:

- an **equality** with one unknown (a layout index or an index array read) gives it as an
  affine function of ``g`` (``gi = pi``; ``gj = colIdx(pk)``; ``offset(pd) = gj - gi``); one
  whose other unknowns are multiples of ``c`` and whose last unknown lies in ``[0, c)`` splits
  into that unknown, ``T mod c``, and the rest, ``c * floor(T / c)`` (aligned tiles:
  ``gi = B*bi + ri``; ``gj = B*blockCol(bi, k) + rj``; ``gi = B*bI(b) + eI(k)``, the range of
  ``eI`` stated by the relation or a ``range`` property);
- a layout index no equality gives is a **position**: entries whose earlier layout indices and
  whose index-array reads at it (its **keys**) are equal share it; distinct keys get
  consecutive positions in key order (decreasing where an ordering property says so).  Its
  bounds say where the positions of a group start: ``ptr(a) <= p < ptr(a + 1)`` (a pointer
  array, its prefix sums), ``start(a) <= p < end(a)`` (two arrays), or ``0 <= p < U`` (ranks
  within the group: ``U`` a constant, a scalar field set to the largest group, or an array over
  the group's indices set to each group's size).  With several keys, those an ordering
  property orders over the group come first, in the order the properties are declared;
- an equality left with a position, its group's start or end bound (opposite signs) and at most
  one array read at the group's indices places the position in a **run** of consecutive
  coordinates (:class:`Run`: skyline, Finch's band); a position before a run with no keys of its
  own numbers the maximal runs (where the run's free array is read at it: block lists) or
  spreads the entries sharing a slot by rank (where the run is pinned: JDS).

Every field the relation reads is then determined: scalar extents from the shape, pointers and
bounds from the counts, index arrays from the keys, the value array from its subscripts, and
an array the part only compares with constants where it reads it (a bitmap's ``1 <= tbl(pi,
pj)``) marks the entries' slots (a **marker**).  Every constraint of the part is checked per
entry after writing (an entry the layout cannot hold is an error naming the entry and the
constraint).  A part whose fields the first does not determine is left empty.  The other parts
of a union must then give exactly the entries the first leaves: the generated writer finds
each such entry's place in them (solved as above where a part says, searched where it does
not) and scans their points for any other (:mod:`spf.store.lower`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from functools import cache
from typing import NoReturn

from ..errors import SpecError
from . import index_expr as ie
from .established import implied, within_shape
from .isl_bridge import isl_limit
from .layout import Layout
from .properties import Linear, Monotonic, Ordering, PeriodicMonotonic, Permutation, Range
from .relation import Conj
from .terms import Aff, Atom, Constraint, FloorDiv, UFCall


class Start(Enum):
    """Where a position index's group of positions starts."""

    POINTER = "pointer"     # ptr(a) <= p < ptr(a + 1): prefix sums of the groups' sizes
    RANGE = "range"         # start(a) <= p < end(a): two arrays
    RANK = "rank"           # 0 <= p < U: the rank within its group
    NESTED = "nested"       # O(a) + P(a, b) <= p < O(a) + P(a, b + 1): pointers over two levels


ENTRY = "#entry"     # an entry's number among those written (a value permutation's choice)


@dataclass(frozen=True)
class Solved:
    """``atom`` (a layout index or an index array read) ``= value / divisor`` for an entry,
    ``value`` over the logical coordinates (and floor divisions of them)."""

    atom: Atom
    value: Aff
    divisor: int = 1


@dataclass(frozen=True)
class Permuted:
    """A permutation array read at unknown layout indices (``gi = perm(C*s + r)``): spf
    chooses it by its property's order (positions by the entry count of their values,
    within windows), and solves the indices through its inverse, ``perm⁻¹(gi)``."""

    array: str
    value: Aff                          # the logical coordinate it gives, over ``g``
    descending: bool | None             # None: the identity
    window: int | None                  # None: the whole array

    @property
    def inverse(self) -> str:
        return self.array + INVERSE


INVERSE = "⁻¹"      # suffix of an inverse permutation's name (no field can have it)


@dataclass(frozen=True)
class Run:
    """A position whose entries lie in runs of consecutive slots by their coordinates (skyline:
    ``gj = pi + pk - rowPtr(pi + 1) + 1``; Finch's bands and block lists): the equality gives
    ``p - anchor = offset + sign * free``, ``anchor`` the group's start or (exclusive) end bound,
    ``offset`` over the logical coordinates and ``free`` an array read at the group's indices
    that spf chooses (None: the relation pins the run's start or end).  Each group's run covers
    its entries from the least offset to the largest (explicit zeros between): from the pinned
    start (offset 0) or to the pinned end (offset -1), else exactly its entries' span."""

    anchor: UFCall
    at_end: bool                        # anchored at the group's end bound
    offset: Aff                         # over the logical coordinates (and perm⁻¹ reads)
    free: UFCall | None = None
    sign: int = 1                       # of ``free`` in ``p - anchor``


@dataclass(frozen=True)
class Cover:
    """A layout index the value subscripts do not read, bounded below by 0 and above by an
    array read or a scalar field (Finch's run-length lists: ``0 <= q and left(p) + q <=
    right(p) and gi = left(p) + q``, value ``data[p]``; its interval, ``lo + q < hi``, value
    ``val[0]``): one value slot covers a run of consecutive ``coordinate``.  Entries equal in
    every other coordinate, at consecutive ``coordinate`` and holding equal values share one
    run (the fewest runs: maximal ones); each run is written as one entry at its first
    coordinate (``index`` = 0), ``end`` (bounding the run) set from ``last``, the run's last
    coordinate.  Where the next run starts one past where this one ends (``gi = ends(p) + q``,
    ``ends(p) + q < ends(p + 1)``: Finch's dense run list), runs abut: every coordinate is
    covered, the gaps by runs of the layout's fill.  Where no position numbers the runs
    (``one_run``: an interval), the other coordinates hold one run each."""

    index: str
    coordinate: str                     # the logical coordinate it places
    start: Atom                         # the array read or scalar field where the run starts
    end: Atom                           # the one bounding the run
    last: str                           # per run, its last coordinate (a name of the plan)
    empty: tuple[int, int]              # an empty run's start and end (no entries)
    dense: bool = False                 # the next run starts where this one ends: no gaps
    one_run: bool = False               # one run per group of the other coordinates


@dataclass(frozen=True)
class Position:
    """A layout index whose value is the position of its keys within its group."""

    index: str
    keys: tuple[UFCall, ...]            # solved index-array reads at this index
    descending: tuple[bool, ...]        # per key
    group: tuple[str, ...]              # the layout indices before it
    start: Start
    lower: UFCall | None                # POINTER, RANGE: where its group starts
    upper: Aff                          # the exclusive upper bound as written
    tight: bool                         # every position below ``upper`` holds an entry (a
                                        # run's: checked, nothing marks an unused slot)
    also: tuple[str, ...] = ()          # scalar fields bounding it too: the largest group
    outer: UFCall | None = None         # NESTED: the outer pointer array read O(a)
    run: Run | None = None              # POINTER, RANGE: placed by coordinate, not ranked
    inner: Run | None = None            # no keys of its own: the next index's run places it
    one_value: bool = False             # with ``inner``: the run's slots share one value slot,
                                        # so a run also ends where the entries' values change

    @property
    def bound_field(self) -> str | None:
        """The scalar field or array a RANK position's upper bound names, or None."""
        if self.start is not Start.RANK:
            return None
        name = self.upper.as_name()
        if name is not None:
            return name
        call = _single_call(self.upper)
        return call.name if call else None


@dataclass(frozen=True)
class Marker:
    """An index array the relation only compares with constants where it reads it (Finch's
    bitmap, ``1 <= tbl(pi, pj)``): it marks the slots that hold entries.  Each entry's slot
    gets ``mark``, the least value the comparisons (and a constant ``range``) allow; every
    other slot ``unused``, a value they exclude where the range has one (else ``mark``: a slot
    the relation reads then holds 0.0, like padding)."""

    call: UFCall
    mark: int
    unused: int


@dataclass(frozen=True)
class PartWrite:
    """How one part of a relation places an entry: solved atoms in order, positions, the
    scalar extents of coordinate indices, and what unused slots of index arrays hold."""

    conj: Conj
    solved: tuple[Solved, ...]
    positions: tuple[Position, ...]
    extents: tuple[tuple[str, Aff], ...]        # scalar field, coordinate index value (+1 = it)
    filters: tuple[Aff, ...]                    # >= 0 over logical coordinates: the part's share
    fills: tuple[tuple[str, int], ...]          # index array -> value of an unused slot
    permuted: tuple[Permuted, ...] = ()
    markers: tuple[Marker, ...] = ()
    covers: tuple[Cover, ...] = ()

    def solution(self, atom: Atom) -> Solved | None:
        return next((s for s in self.solved if s.atom == atom), None)


@dataclass(frozen=True)
class Pinned:
    """A scalar field a ``linear`` property pins (``numCols <= C*numBlockCols < numCols +
    C``): the least value with ``coeff * field >= bound`` for each lower bound (an equality
    gives one), ``bound`` over fields the plan determines first; the property is checked on the
    written tensor as on any other."""

    field: str
    bounds: tuple[tuple[int, Aff], ...]     # (coeff > 0, bound)


@dataclass(frozen=True)
class WritePlan:
    """How entries are written into ``layout``: its first part writes them, the other parts
    (``others``) give the rest, checked by the generated writer (each entry the first part
    leaves found in another part, with its value, and no other entry there)."""

    layout: Layout
    first: PartWrite
    others: tuple[Conj, ...]
    produced: frozenset[str]            # fields the first part determines
    emptied: tuple[str, ...]            # scalar fields set to 0 (parts left empty)
    sized: tuple[str, ...] = ()         # scalar fields only sizing arrays: what is written
    pinned: tuple[Pinned, ...] = ()     # scalar fields a ``linear`` property pins
    found: tuple[PartWrite | None, ...] = ()    # per other part: how an entry's place there is
    #                                             solved from its coordinates (None: searched)

    @property
    def reads_back_by_construction(self) -> bool:
        """Whether a tensor this plan writes, with every constraint of its part checked per
        entry, reads back exactly its entries: one part, and the value array's subscripts are
        distinct layout indices that determine every other one (a POINTER, RANGE or NESTED
        position determines its group: the writer gives groups disjoint ranges), or its one
        subscript gives each point of the part its own slot (:func:`slots_disjoint`).  Else
        two index tuples could read one slot, and the written tensor is read back."""
        if self.others or self.layout.value_array is None:     # a pattern: no slots
            return False
        subs = self.layout.value_ref.subscripts
        if len(subs) == 1 and slots_disjoint(self.layout, self.first.conj):
            return True
        names = [s.name for s in subs if isinstance(s, ie.Name)]
        if len(names) != len(subs) or len(set(names)) != len(names):
            return False
        seen = set(names)
        for p in reversed(self.first.positions):
            if p.index in seen and p.start is not Start.RANK:
                seen |= set(p.group)
        return seen >= set(self.layout.indices)

    def describe(self, names: tuple[str, ...]) -> str:
        """One line per decision, for the conversion's report."""
        logical = dict(zip(self.layout.relation.out_vars or (), names))
        logical |= {c.last: f"last({logical.get(c.coordinate)})" for c in self.first.covers}
        text = [f"{c.index} = 0 at each maximal run of consecutive {logical.get(c.coordinate)} "
                "holding one value (the fewest runs)"
                + ("; runs abut: the gaps are runs of the fill" if c.dense else "")
                for c in self.first.covers]
        for q in self.first.permuted:
            text.append(f"{q.array} = positions ordered by their entry count "
                        + ("(identity)" if q.descending is None else
                           f"{'decreasing' if q.descending else 'increasing'}"
                           + (f" within windows of {q.window}" if q.window else ""))
                        + f", {q.inverse} its inverse")
        for s in self.first.solved:
            if s.value == Aff.var(ENTRY):
                text.append(f"{s.atom} = the entry's number (the values in the order the "
                            "entries arrive)")
                continue
            value = s.value.rename(logical)
            text.append(f"{s.atom} = {value}" + (f" / {s.divisor}" if s.divisor != 1 else ""))
        text += [_describe_position(p, logical) for p in self.first.positions]
        for field, _ in self.first.extents:
            text.append(f"{field} = the extent of its coordinate")
        for pin in self.pinned:
            text.append(f"{pin.field} = the least value its linear property allows")
        for uf, fill in self.first.fills:
            text.append(f"unused {uf} = {fill}")
        for m in self.first.markers:
            text.append(f"{m.call} = {m.mark} at each entry, {m.unused} elsewhere (it marks "
                        "the entries)")
        if self.others:
            text.append(f"parts 2-{len(self.others) + 1} checked to give exactly the entries "
                        "part 1 leaves"
                        + (f" ({', '.join(self.emptied)} = 0)" if self.emptied else ""))
        return "; ".join(text)


@cache
def slots_disjoint(layout: Layout, conj: Conj) -> bool:
    """Whether the value array's one subscript reads a distinct slot at each point of
    ``conj``, as ``D(g) + inner``: ``D`` a derived prefix sum ``prefix_sum(c * F)`` read at a
    layout index ``g``, ``F`` declared non-negative (a range), and ``inner`` an affine
    expression of the other layout indices that, ``g`` fixed, is one-to-one and within
    ``0 .. c * F(g) - 1`` on the part's constraints over them (SELL's ``slicePtr(s) + C*k +
    r``): each group's slots lie in ``[D(g), D(g + 1))``, which do not overlap (isl)."""
    value = ie.affine(layout.value_ref.subscripts[0], reads=True)
    if value is None:
        return False
    for atom, coeff in value.terms:
        if not isinstance(atom, UFCall) or atom.name not in layout.derived or coeff != 1 \
                or len(atom.args) != 1:
            continue
        derived, group = layout.derived[atom.name], atom.args[0].as_name()
        if group is None or group not in layout.indices or \
                not _non_negative(layout, derived.source):
            continue
        size = UFCall(derived.source, atom.args)
        with isl_limit(f"checking the value slots of layout {layout.name}", layout.source):
            if _inner_one_to_one(layout, conj, group, size, derived.scale,
                                 value - Aff.var(atom)):
                return True
    return False


def _non_negative(layout: Layout, uf: str) -> bool:
    """Whether a range property keeps every value of ``uf`` at 0 or more."""
    return any(isinstance(p, Range) and p.uf == uf and p.lower is not None
               and p.lower.is_const and p.lower.const >= 0 for p in layout.properties)


def _inner_one_to_one(layout: Layout, conj: Conj, group: str, size: UFCall, scale: int,
                      inner: Aff) -> bool:
    """:func:`slots_disjoint`'s test of ``inner`` for one group ``g`` (``size``: ``F(g)``,
    a free value): over the constraints of ``conj`` on the other layout indices that read no
    array but ``F(g)``, ``0 <= inner <= scale * F(g) - 1``, and two points with one ``inner``
    are one point."""
    others = [p for p in layout.indices if p != group]
    width = "spf_width"

    def plain(a: Aff) -> Aff | None:
        if any(isinstance(x, UFCall) and x != size for x, _ in a.terms):
            return None
        return a.substitute({size: Aff.var(width)})
    inner_plain = plain(inner)
    if inner_plain is None or inner_plain.names() & {group}:
        return False
    known = [Constraint.make(a, c.is_eq) for c in conj
             if (a := plain(c.aff)) is not None and a.names() & set(others)]
    bounds = [Constraint.ge(inner_plain, Aff.num(0)),
              Constraint.ge(Aff.var(width) * scale - 1, inner_plain)]
    if not all(implied(known, b, others) for b in bounds):
        return False
    twin = {p: Aff.var(f"{p}_spf_twin") for p in others}
    both = [*known, *(Constraint.make(c.aff.substitute(twin), c.is_eq) for c in known),
            Constraint.eq(inner_plain, inner_plain.substitute(twin))]
    dims = [*others, *(f"{p}_spf_twin" for p in others)]
    return all(implied(both, Constraint.eq(Aff.var(p), twin[p]), dims) for p in others)


def _describe_position(p: Position, logical: dict[str, str]) -> str:
    """A position's line in the report."""
    if p.run is not None:
        return _describe_run(p, p.run, logical)
    keys = f"({', '.join(map(str, p.keys))})"
    if p.inner is not None and p.inner.free is not None:
        keys = f"(the maximal run of consecutive {p.inner.offset.rename(logical)}" + \
            (" holding one value: the run's value slot)" if p.one_value else ")")
    elif p.inner is not None:
        keys += f" among the entries at the same {p.inner.offset.rename(logical)}"
    where = {Start.POINTER: f"from {p.lower} (prefix sums of the groups' sizes)",
             Start.NESTED: f"from {p.outer} + {p.lower} (prefix sums of the outer "
                           "groups' sizes, plus of the groups' sizes within each)",
             Start.RANGE: f"from {p.lower} to {p.upper} (each group's start and end)",
             Start.RANK: f"the rank within ({', '.join(p.group)}), below {p.upper}"}
    return (f"{p.index} = position of {keys} "
            f"{'decreasing' if any(p.descending) else 'increasing'}, " + where[p.start])


def _describe_run(p: Position, run: Run, logical: dict[str, str]) -> str:
    """A run position's line in the report."""
    offset = run.offset.rename(logical)
    if run.free is not None:
        offset = offset + Aff.var(run.free, run.sign)
        chosen = (f", {run.free} chosen so that each group's run spans its entries' "
                  "coordinates exactly")
    else:
        chosen = ", each group's run " + ("ending at offset -1" if run.at_end else
                                          "starting at offset 0")
    return (f"{p.index} = {run.anchor} + ({offset}) (a run of consecutive coordinates per "
            f"({', '.join(p.group)}){chosen}, any gap stored as explicit zeros)")


@cache
def write_plan_or_none(layout: Layout) -> WritePlan | None:
    """How entries are written into ``layout``, or None when its relation does not say."""
    try:
        return write_plan(layout)
    except SpecError:
        return None


def write_plan(layout: Layout) -> WritePlan:
    """How entries are written into ``layout``; SpecError naming what its relation leaves
    open."""
    rel = layout.relation
    if rel.exists:
        _fail(layout, "its relation has existential variables")
    first = _value_runs(layout, _value_permutation(layout,
                                                   _Solver(layout, rel.disjuncts[0]).run()))
    produced = shape_fields(layout) | _produced(first, layout)
    for d in layout.derived.values():       # a derived field and its source give each other
        if d.field in produced or d.source in produced:
            produced |= {d.field, d.source}
    _check_nested(layout, first, produced)
    emptied: list[str] = []
    for conj in rel.disjuncts[1:]:
        for c in conj:
            field = _root_count(c, layout, produced)
            if field is not None and field not in produced:
                emptied.append(field)
                produced.add(field)
    _check_arrays(layout, produced, emptied)
    sized = tuple(f for f, spec in layout.fields.items() if f not in produced
                  and not spec.is_array and _sizes_an_array(layout, f))
    pinned = _pinned(layout, produced | set(sized))
    missing = [f for f, spec in layout.fields.items() if f not in produced and f not in sized
               and not spec.is_array and f not in {p.field for p in pinned}]
    if missing:
        _fail(layout, f"the scalar field(s) {', '.join(missing)} are given neither by the "
              "shape, nor by a bound of a layout index, nor as an extent of an array, nor by "
              'a linear property: a property kind = "linear" whose holds bounds '
              f"{missing[0]} below and above (or equates it) by given fields and parameters "
              "would pin it")
    return WritePlan(layout, first, tuple(rel.disjuncts[1:]), frozenset(produced),
                     tuple(emptied), sized, pinned,
                     tuple(_part_or_none(layout, conj) for conj in rel.disjuncts[1:]))


def _value_runs(layout: Layout, part: PartWrite) -> PartWrite:
    """A position numbering the runs of the next one (a block list's ``p`` of ``gi = q +
    idx(p) - ofs(p)``) where the value is read at the run, not at its slots (``data[p]``:
    run-length encoding, Finch's SparseRLE): one value covers the run, so the runs are the
    maximal ones of consecutive coordinates holding equal values."""
    if layout.value_array is None:
        return part
    read = {n for x in layout.value_ref.subscripts for n in ie.names(x)}
    positions = []
    for p in part.positions:
        run = next((q for q in part.positions if p.inner is not None and q.run == p.inner), None)
        if run is not None and p.inner is not None and p.inner.free is not None \
                and run.index not in read:
            p = replace(p, one_value=True)
        positions.append(p)
    return replace(part, positions=tuple(positions))


def _value_permutation(layout: Layout, part: PartWrite) -> PartWrite:
    """An index array the relation does not read, read as a value subscript at layout indices
    the part determines (``val[perm(pk)]``: a frozen dictionary's values in insertion order)
    is a value permutation: nothing chooses it, so each entry's value gets a slot of its own,
    its number among the entries written (the order they arrive in), which the array holds at
    the entry's position (:data:`ENTRY`), unless a ``monotonic`` or ``periodic_monotonic``
    property pins it (:func:`_pinned_permutation`)."""
    if layout.value_array is None:
        return part
    determined = {str(s.atom) for s in part.solved if isinstance(s.atom, str)} | \
        {p.index for p in part.positions}
    taken = _produced(part, layout) | {c.name for x in part.conj for c in x.calls()}
    added = []
    for x in layout.value_ref.subscripts:
        if isinstance(x, ie.Call) and x.name not in taken \
                and layout.fields[x.name].is_index_array \
                and all(isinstance(a, ie.Name) and a.name in determined for a in x.args):
            call = UFCall(x.name, tuple(Aff.var(a.name) for a in x.args
                                        if isinstance(a, ie.Name)))
            pinned = _pinned_permutation(layout, part.conj, call)
            added.append(Solved(call, Aff.var(ENTRY) if pinned is None else pinned))
            taken.add(x.name)
    return replace(part, solved=part.solved + tuple(added)) if added else part


def _pinned_permutation(layout: Layout, conj: Conj, call: UFCall) -> Aff | None:
    """``perm(pk)`` where a ``monotonic`` property pins the value permutation ``perm``: a
    permutation of its positions increasing over them is the identity (``pk``), decreasing the
    reverse (``n - 1 - pk``, ``n`` its extent, a scalar field); None where none pins it.  A
    ``periodic_monotonic`` one pins it so where one period holds every position (an equality
    gives each period index one value: ``s = 0``); else it orders each period only, and which
    slots each period's values take is left open (refused, naming it)."""
    props = [q for q in layout.properties if isinstance(q, (Monotonic, PeriodicMonotonic))
             and q.uf == call.name]
    prop = min(props, key=lambda q: isinstance(q, PeriodicMonotonic), default=None)
    if prop is None or len(call.args) != 1:
        return None
    at = call.args[0]
    if isinstance(prop, PeriodicMonotonic):
        spread = [i for i in prop.period if not _one_value(conj, i)]
        if spread:
            each = ", ".join(spread)
            _fail(layout, f"its {prop.kind} property ({call.name} {prop.order}, period "
                          f"{', '.join(prop.period)}) orders the value permutation {call.name} "
                          f"only within each {each}: it leaves open which slots of "
                          f"{layout.value_array} the entries of each {each} take; a monotonic "
                          f"property of {call.name} (order < or >, over the whole array) would "
                          "pin it")
    if prop.order in ("<", "<="):
        return at
    extent = layout.fields[call.name].dims[0]
    if not isinstance(extent, ie.Name):
        _fail(layout, f"its {prop.kind} property ({call.name} {prop.order}) makes the value "
                      f"permutation {call.name} the reverse, {call.name}({at}) = n - 1 - {at}, "
                      f"but its extent {ie.text(extent)} is not a scalar field")
    return Aff.var(extent.name) - at - 1


def _one_value(conj: Conj, index: str) -> bool:
    """Whether an equality of the part gives layout index ``index`` one value (``s = 0``)."""
    return any(c.is_eq and c.aff.terms == ((index, c.aff.coeff(index)),) for c in conj)


def _part_or_none(layout: Layout, conj: Conj) -> PartWrite | None:
    """How ``conj`` (another part of a union) places an entry, or None when its relation does
    not say (its points are then searched for an entry's coordinates)."""
    try:
        return _Solver(layout, conj).run()
    except SpecError:
        return None


def _pinned(layout: Layout, known: set[str]) -> tuple[Pinned, ...]:
    """Scalar fields not otherwise given that a ``linear`` property over scalars bounds above
    and below (or equates) by fields in ``known`` and parameters."""
    facts = [c for prop in layout.properties if isinstance(prop, Linear) and not prop.variables
             for c in prop.holds if not c.calls()]
    out = []
    for f, spec in layout.fields.items():
        if f in known or spec.is_array:
            continue
        lower: list[tuple[int, Aff]] = []
        upper = False
        for c in facts:
            k = c.aff.coeff(f)
            rest = c.aff - Aff.var(f, k)
            if k == 0 or not set(rest.names()) <= known | set(layout.params):
                continue
            if c.is_eq or k > 0:        # k*f + rest >= 0: k*f >= -rest
                lower.append((abs(k), -rest if k > 0 else rest))
            upper = upper or c.is_eq or k < 0
        if lower and upper:
            out.append(Pinned(f, tuple(lower)))
    return tuple(out)


def _check_nested(layout: Layout, part: PartWrite, produced: set[str]) -> None:
    """Index arrays read inside the arguments of the arrays written must be determined."""
    for s in part.solved:
        if isinstance(s.atom, UFCall):
            for a in s.atom.args:
                for call in a.calls():
                    if call.name not in produced:
                        _fail(layout, f"{s.atom} is read at a position computed from "
                              f"{call.name}, which nothing determines")


def _check_arrays(layout: Layout, produced: set[str], emptied: list[str]) -> None:
    """Every array is determined, or belongs to a part left empty (an extent is emptied)."""
    for f, spec in layout.fields.items():
        if f in produced or not spec.is_array:
            continue
        if any(n in emptied for d in spec.dims for n in ie.names(d)):
            continue
        _fail(layout, f"the array {f} is given neither by an equality of the relation nor as "
              "a bound of a layout index (spf would have to choose its contents)")


def _sizes_an_array(layout: Layout, field: str) -> bool:
    """Whether ``field`` is an extent of an array (``int[nnzSlots]``), as it is written."""
    return any(isinstance(d, ie.Name) and d.name == field
               for spec in layout.fields.values() for d in spec.dims)


@cache
def entry_filters(layout: Layout) -> tuple[Constraint, ...]:
    """The constraints of a one-part relation that decide, from an entry's logical coordinates
    and the shape alone, whether the layout holds it (``gj <= gi`` added to CSR, or
    ``colIdx(pj) <= pi``, which its equalities make the same): the relation's constraints with
    every layout index or array read that an equality makes a logical coordinate replaced by
    it, those left naming only logical coordinates and the shape's fields that the shape
    alone does not imply (``0 <= gi`` does not count)."""
    rel = layout.relation
    if len(rel.disjuncts) != 1:
        return ()
    outs = set(rel.out_vars or ())
    mapping: dict[Atom, Aff] = {}
    for c in rel.disjuncts[0]:
        gs = [g for g in outs if c.aff.coeff(g)]
        if not c.is_eq or len(gs) != 1 or abs(c.aff.coeff(gs[0])) != 1:
            continue
        value = (c.aff - Aff.var(gs[0], c.aff.coeff(gs[0]))) * -c.aff.coeff(gs[0])
        if value.const == 0 and len(value.terms) == 1 and abs(value.terms[0][1]) == 1:
            atom, k = value.terms[0]
            mapping.setdefault(atom, Aff.var(gs[0], k))
    allowed = outs | shape_fields(layout)
    box = within_shape(layout)
    with isl_limit(f"checking the relation of layout {layout.name}", layout.source):
        return tuple(f for c in rel.disjuncts[0]
                     if not (f := c.substitute(mapping)).calls() and f.names() & outs
                     and f.names() <= allowed and not implied(box, f, sorted(outs)))


def shape_fields(layout: Layout) -> set[str]:
    """The scalar fields naming the logical extents."""
    return {name for e in layout.shape if (name := e.as_name()) is not None}


def _fail(layout: Layout, why: str) -> NoReturn:
    raise SpecError(f"layout {layout.name} cannot be written: {why}", layout.source)


def _produced(part: PartWrite, layout: Layout) -> set[str]:
    out = {s.atom.name for s in part.solved if isinstance(s.atom, UFCall)}
    out |= {f for f, _ in part.extents}
    for p in part.positions:
        for c in (p.lower, p.outer):
            if c is not None:
                out.add(c.name)
        call = _single_call(p.upper)
        if call is not None:
            out.add(call.name)
        elif (name := p.upper.as_name()) is not None:
            out.add(name)
        out |= set(p.also)
        if p.run is not None and p.run.free is not None:
            out.add(p.run.free.name)
    out |= {m.call.name for m in part.markers}
    out |= {a for c in part.covers for a in (c.start, c.end) if isinstance(a, str)}
    if layout.value_array is not None:     # a pattern layout stores no values
        out.add(layout.value_array)
    return out


def _root_count(c: Constraint, layout: Layout, produced: set[str]) -> str | None:
    """The scalar field ``N`` of ``p < N`` in another part (setting it to 0 empties it)."""
    if c.is_eq:
        return None
    names = [a for a, k in c.aff.terms if isinstance(a, str) and k == 1]
    idx = [a for a, k in c.aff.terms if isinstance(a, str) and k == -1]
    if len(c.aff.terms) == 2 and len(names) == 1 and len(idx) == 1 and c.aff.const == -1 \
            and names[0] in layout.scalar_fields and idx[0] in layout.indices:
        return names[0]
    return None


def _next(eq: Aff, end: UFCall) -> bool:
    """Whether the run's start, the one array read in ``eq``, read one argument on is
    ``end``: the next run starts where this one ends."""
    starts = [a for a in eq.calls() if a.name == end.name and len(a.args) == len(end.args)]
    if len(starts) != 1:
        return False
    steps = [e - a for a, e in zip(starts[0].args, end.args)]
    return steps.count(Aff.num(1)) == 1 and steps.count(Aff.num(0)) == len(steps) - 1


def _empty_run(end: Atom, value: Aff, coord: str, last: str) -> tuple[int, int]:
    """The start and ``end`` (``value`` over the run's first and last coordinate) of an empty
    run: over [0, -1], or over [1, 0] where ``end`` is a scalar field that would be negative
    (``lo + q <= hi``: scalar fields hold no negative value)."""
    def at(first: int) -> int:
        return value.substitute({last: Aff.num(first - 1), coord: Aff.num(first)}).const
    first = 1 if isinstance(end, str) and at(0) < 0 else 0
    return first, at(first)


def _single_call(a: Aff) -> UFCall | None:
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1 \
            and isinstance(a.terms[0][0], UFCall):
        return a.terms[0][0]
    return None


class _Solver:
    """Solves one part's equalities, then its position indices, in layout order."""

    def __init__(self, layout: Layout, conj: Conj):
        self.layout, self.conj = layout, conj
        self.logical = set(layout.relation.out_vars or ())
        self.indices = list(layout.indices)
        self.solved: dict[Atom, Solved] = {}
        self.permuted: list[Permuted] = []
        self.runs: dict[str, Run] = {}
        self.covers: list[Cover] = []

    def fail(self, why: str) -> NoReturn:
        _fail(self.layout, why)

    def run(self) -> PartWrite:
        self._covers()
        self._solve_equalities()
        positions = tuple(self._position(p) for p in self.indices if p not in self.solved)
        extents = tuple(self._extents())
        fills = tuple(self._fills(positions) + self._empty_runs())
        lasts = {c.last for c in self.covers}
        filters = tuple(a for c in self.conj if not c.is_eq
                        if self._logical_only(a := self._known(c.aff)) and not a.names() & lasts)
        covers = tuple(replace(c, one_run=self._one_run(positions)) for c in self.covers)
        return PartWrite(self.conj, tuple(self.solved.values()), positions, extents,
                         filters, fills, tuple(self.permuted), self._markers(positions),
                         covers)

    # one value covering a run of coordinates ---------------------------------------------
    def _covers(self) -> None:
        """The layout indices one value slot covers (:class:`Cover`): not read by the value
        subscripts, ``0 <= q``, one equality placing a logical coordinate at ``q`` past an
        array read or a scalar field (the run's start) and one bound ``... - q >= 0`` naming
        another, which then holds the run's last coordinate.  Each is solved as 0 (the run's
        first coordinate) before the equalities."""
        if self.layout.value_array is None:
            return
        read = {n for s in self.layout.value_ref.subscripts for n in ie.names(s)}
        for q in self.indices:
            eqs = [c.aff for c in self.conj if c.is_eq and c.aff.coeff(q)]
            ups = [c.aff for c in self.conj if not c.is_eq and c.aff.coeff(q) < 0
                   and self._run_bounds(c.aff)]
            if q in read or len(eqs) != 1 or abs(eqs[0].coeff(q)) != 1 \
                    or not self._run_bounds(eqs[0]) \
                    or not any(not c.is_eq and c.aff == Aff.var(q) for c in self.conj):
                continue
            coords = [g for g in self.logical if eqs[0].coeff(g)]
            if len(coords) != 1 or abs(eqs[0].coeff(coords[0])) != 1 or not ups:
                continue
            self.covers.append(self._cover(q, coords[0], eqs[0], ups))

    def _one_run(self, positions: tuple[Position, ...]) -> bool:
        """Whether no position the value subscripts read numbers a cover's runs (an interval:
        one run per group of the other coordinates)."""
        read = {n for x in self.layout.value_ref.subscripts for n in ie.names(x)}
        return not read & {p.index for p in positions}

    def _run_bounds(self, a: Aff) -> list[tuple[Atom, int]]:
        """The terms of ``a`` that can bound a run: array reads and scalar fields other than
        the shape's."""
        return [(x, k) for x, k in a.terms if isinstance(x, UFCall) or (
            x in self.layout.scalar_fields and x not in self._shape_fields())]

    def _empty_runs(self) -> list[tuple[str, int]]:
        """A slot no run reaches (a row of an interval layout without entries) holds an empty
        run: its start array 0 (unwritten), its end array what a run over [0, -1] gives."""
        return [(c.end.name, c.empty[1]) for c in self.covers if isinstance(c.end, UFCall)]

    def _cover(self, q: str, coord: str, eq: Aff, ups: list[Aff]) -> Cover:
        """The cover at ``q``.  A run is written at its first coordinate (``q = 0``, so
        ``eq`` gives its start from ``coord``); its bound ``up >= 0``, tight at its last
        coordinate (``q = last - coord``, the start replaced), must leave one array read or
        scalar field ``end`` over ``last`` and ``coord``: ``end`` is set to that (``right(p) =
        last``; a length ``len(p) = last - coord + 1``)."""
        last = f"{coord}'last"
        eq0 = eq - Aff.var(q, eq.coeff(q))
        starts = self._run_bounds(eq0)
        if len(starts) == 1 and abs(starts[0][1]) == 1:
            start, k = starts[0]
            at_first = {q: Aff.var(last) - Aff.var(coord),
                        start: (eq0 - Aff.var(start, k)) * -k}
            for up in ups:
                bound = up.substitute(at_first)
                ends = [a for a, kk in self._run_bounds(bound) if kk == 1]
                if up.coeff(q) != -1 or len(ends) != 1 \
                        or {a for a, _ in bound.terms} - {ends[0], last, coord}:
                    continue
                end = ends[0]
                value = Aff.var(end) - bound
                self.solved[q] = Solved(q, Aff.num(0))
                self.logical.add(last)
                self.solved[end] = Solved(end, value)
                return Cover(q, coord, start, end, last, _empty_run(end, value, coord, last),
                             value == Aff.var(last) + 1 and isinstance(end, UFCall)
                             and _next(eq, end))
        self.fail(f"layout index {q} places {coord} by one value slot for several coordinates "
                  "(the value subscripts do not read it), but the relation does not say where "
                  f"each run of {coord} starts and ends: it needs {coord} = start(...) + {q} "
                  f"with one index array or scalar field start, and a bound {q} <= ... naming one "
                  f"index array read or scalar field where the run ends (as left(p) + {q} <= "
                  f"right(p), {q} < len(p), or lo + {q} < hi)")

    # equalities ------------------------------------------------------------------------
    def _is_known(self, atom: Atom) -> bool:
        return (isinstance(atom, str) and atom in self.logical) \
            or isinstance(atom, FloorDiv) or atom in self.solved \
            or (isinstance(atom, UFCall) and atom.name.endswith(INVERSE))

    def _known(self, a: Aff) -> Aff:
        """``a`` with every solved atom replaced by its value (a plain substitution keyed by
        the atoms as written)."""
        out = Aff.num(a.const)
        for atom, k in a.terms:
            s = self.solved.get(atom)
            done = s is not None and s.divisor == 1
            out = out + (s.value * k if s is not None and done else Aff.var(atom, k))
        return out

    def _logical_only(self, a: Aff) -> bool:
        return all(self._is_known(atom) and atom not in self.solved for atom, _ in a.terms) \
            and bool(a.terms) and not a.calls()

    def _solve_equalities(self) -> None:
        pending = [c.aff for c in self.conj if c.is_eq]
        while pending:
            left = []
            for aff in pending:
                rest = self._step(aff)
                left.extend(rest)
            if len(left) == len(pending) and all(a in pending for a in left):
                runs = [a for a in left if self._run(a)]
                if not runs:
                    eq = " ; ".join(f"{a} = 0" for a in left)
                    self.fail(f"the equalities {eq} do not give their unknowns from the "
                              "logical coordinates (no unknown is alone, none lies in [0, c) "
                              "beside multiples of c, and none is a layout index beside the "
                              "bound of its group: a run of consecutive coordinates)")
                left = [a for a in left if a not in runs]
            pending = left

    def _step(self, aff: Aff) -> list[Aff]:
        """Solve what ``aff == 0`` gives; the equations left (itself when nothing)."""
        aff = self._known(aff)
        unknown = [(a, k) for a, k in aff.terms if not self._is_known(a)]
        if not unknown:
            return []
        known = Aff([(a, k) for a, k in aff.terms if self._is_known(a)], aff.const)
        if len(unknown) == 1:
            (atom, k), = unknown
            value = known * (-1 if k > 0 else 1)
            if all(c % k == 0 for _, c in value.terms) and value.const % k == 0:
                value, k = Aff(((a, c // abs(k)) for a, c in value.terms),
                               value.const // abs(k)), 1
            self._set(atom, value, abs(k))
            return self._through_inverse(atom, value, abs(k))
        for atom, _ in unknown:
            if self._constant_size(atom) == 1:          # 0 <= atom < 1
                self._set(atom, Aff.num(0), 1)
                return [self._known(aff)]
        for atom, k in unknown:
            size = self._constant_size(atom)
            if abs(k) != 1 or size is None or size < 2:
                continue
            sign = k
            target = known * -sign                  # atom + others = target
            tile = FloorDiv(target, size)
            self._set(atom, target - Aff.var(tile, size), 1)
            others = Aff([(a, kk * sign) for a, kk in unknown if a != atom])
            return [others - Aff.var(tile, size)]
        return [aff]

    def _run(self, aff: Aff) -> bool:
        """Whether ``aff == 0`` places a layout index in a run of its group (:class:`Run`):
        its unknowns are the index, the start or end bound of its group with the opposite
        sign, and at most one array read at the group's indices (recorded in ``runs``)."""
        aff = self._known(aff)
        unknown = [(a, k) for a, k in aff.terms if not self._is_known(a)]
        idx = [(a, k) for a, k in unknown if isinstance(a, str) and a in self.indices]
        if len(idx) != 1 or abs(idx[0][1]) != 1 or idx[0][0] in self.runs:
            return False
        p, k = idx[0]
        bounds = self._group_bounds(p)
        if bounds is None:
            return False
        group = set(self.indices[:self.indices.index(p)])
        anchors = [(a, a == bounds[1]) for a, kk in unknown if a in bounds and kk == -k]
        rest = [(a, kk) for a, kk in unknown if a != p and a not in dict(anchors)]
        if len(anchors) != 1 or len(rest) > 1 or any(
                not isinstance(a, UFCall) or abs(kk) != 1 or not Aff.var(a).names() <= group
                or a.name in (bounds[0].name, bounds[1].name) for a, kk in rest):
            return False
        (anchor, at_end), = anchors
        known = Aff([(a, kk) for a, kk in aff.terms if self._is_known(a)], aff.const)
        free, sign = (rest[0][0], -rest[0][1] * k) if rest else (None, 1)
        assert isinstance(anchor, UFCall) and (free is None or isinstance(free, UFCall))
        self.runs[p] = Run(anchor, at_end, known * -k, free, sign)
        return True

    def _through_inverse(self, atom: Atom, value: Aff, divisor: int) -> list[Aff]:
        """For ``perm(arg) = value`` with unknowns in ``arg`` and ``perm`` a permutation: the
        equation ``arg = perm⁻¹(value)`` (else nothing)."""
        if not isinstance(atom, UFCall) or len(atom.args) != 1 or divisor != 1 \
                or all(self._is_known(a) for a, _ in atom.args[0].terms):
            return []
        prop = next((p for p in self.layout.properties
                     if isinstance(p, Permutation) and p.uf == atom.name), None)
        if prop is None:
            return []
        descending = None if prop.order is None else prop.order == ">="
        window = None if prop.window is None else prop.window.const
        q = Permuted(atom.name, value, descending, window)
        self.permuted.append(q)
        return [atom.args[0] - Aff.var(UFCall(q.inverse, (value,)))]

    def _set(self, atom: Atom, value: Aff, divisor: int) -> None:
        if isinstance(atom, FloorDiv):
            self.fail(f"floor({atom.num} / {atom.den}) of layout indices cannot be solved for")
        self.solved[atom] = Solved(atom, value, divisor)

    def _constant_size(self, atom: Atom) -> int | None:
        """``c`` when ``0 <= atom < c`` (the relation's bounds, or a range property)."""
        facts = list(self.conj)
        if isinstance(atom, UFCall):
            facts += self.layout.range_constraints(atom)
        lower = upper = None
        for c in facts:
            if c.is_eq or len(c.aff.terms) != 1 or c.aff.terms[0][0] != atom:
                continue
            k = c.aff.terms[0][1]
            if k == 1 and c.aff.const == 0:
                lower = 0
            elif k == -1:
                upper = c.aff.const + 1
        return upper if lower == 0 and upper is not None else None

    # positions --------------------------------------------------------------------------
    def _position(self, p: str) -> Position:
        group = tuple(self.indices[:self.indices.index(p)]) + self._given_later(p)
        run = self.runs.get(p)
        keys, inner = self._keys(p, group, run)
        lower, upper, also = self._bounds(p)
        descending = (self._blocks_descending(inner),) if inner and inner.free \
            else tuple(self._descending(k.name) for k in keys)
        if lower == Aff.num(0):
            call = _single_call(upper)
            if upper.is_const or upper.as_name() in self.layout.scalar_fields:
                tight = not group and not upper.is_const
            elif call is not None and all(n in group for n in Aff.var(call).names()):
                tight = set(Aff.var(call).names()) == set(group)
            else:
                self.fail(f"layout index {p} < {upper}: the bound is neither a constant, a "
                          "scalar field nor an index array read at earlier layout indices")
            return Position(p, keys, descending, group, Start.RANK, None, upper, tight, also,
                            inner=inner)
        if inner is not None and inner.free is None:
            self.fail(f"layout index {p} spreads the entries sharing a slot of the runs at "
                      f"{self.indices[self.indices.index(p) + 1]} by rank: it needs the "
                      f"bounds 0 <= {p} < U (found {lower} <= {p} < {upper})")
        lo, hi = _single_call(lower), _single_call(upper)
        if (lo is None or hi is None) and len(lower.calls()) == 2:
            return replace(self._nested(p, keys, descending, group, lower, upper),
                           inner=inner)
        if lo is None or hi is None:
            self.fail(f"layout index {p} runs from {lower} to {upper}: neither 0 nor an "
                      "index array read at earlier layout indices")
        for call in (lo, hi):
            if not Aff.var(call).names() <= set(group):
                self.fail(f"{call} bounds {p} but reads layout indices after it")
        start = Start.POINTER if lo.name == hi.name else Start.RANGE
        if start is Start.POINTER and (lo.args[:-1] != hi.args[:-1]
                                       or hi.args[-1] != lo.args[-1] + 1):
            self.fail(f"{p} runs from {lo} to {hi}: a pointer array bounds a group by "
                      "two consecutive entries (of its last dimension)")
        if start is Start.RANGE and lo.args != hi.args:
            self.fail(f"{p} runs from {lo} to {hi}: start and end arrays are read at the same "
                      "arguments")
        tight = run is None or any(self._excluded(k) is None for k in self._reads_at(p))
        return Position(p, keys, descending, group, start, lo, upper, tight, run=run,
                        inner=inner)

    def _given_later(self, p: str) -> tuple[str, ...]:
        """The layout indices after ``p`` that the coordinates give and an index array read at
        ``p`` also reads (SELL's ``colIdx(slicePtr(s) + C*k + r)`` at ``[s, k, r]``): the
        entries at ``p`` are grouped by them too."""
        read = {n for k in self._reads_at(p) for n in Aff.var(k).names()}
        return tuple(i for i in self.indices[self.indices.index(p) + 1:]
                     if i in self.solved and i in read)

    def _reads_at(self, p: str) -> list[UFCall]:
        """The solved index-array reads at layout index ``p``, in the order solved."""
        return [s.atom for s in self.solved.values()
                if isinstance(s.atom, UFCall) and p in Aff.var(s.atom).names()]

    def _keys(self, p: str, group: tuple[str, ...], run: Run | None
              ) -> tuple[tuple[UFCall, ...], Run | None]:
        """The keys that rank the entries at ``p``, and the run at the next layout index that
        places them instead (:meth:`_inner`).  A read at a later run index
        (``perm(pp - jdPtr(pd))``) is placed by that run, not a key of ``p``; a run index has
        no keys (what is read at it is stored at the slot its coordinates give)."""
        later = set(self.indices[self.indices.index(p) + 1:]) - set(group)
        if run is not None:
            return (), None
        reads = [k for k in self._reads_at(p)
                 if not Aff.var(k).names() & later & set(self.runs)]
        keys = self._key_order(tuple(reads), group)
        ahead = [k for k in keys if Aff.var(k).names() & later]
        if ahead:
            self.fail(f"{ahead[0]} is read at a position that depends on a later layout index "
                      f"({', '.join(sorted(Aff.var(ahead[0]).names() & later))}): the "
                      f"relation does not say which position of {ahead[0].name} an entry "
                      f"takes at {p}")
        inner = self._inner(p) if not keys else None
        if inner is not None and inner.free is None:
            nxt = self.indices[self.indices.index(p) + 1]
            keys = self._key_order(tuple(
                k for k in self._reads_at(nxt) if not Aff.var(k).names() & (later - {nxt})
                and not all(a.coeff(nxt) == -a.coeff(inner.anchor) for a in k.args)), group)
        if not keys and inner is None:
            self.fail(f"layout index {p} is neither given by the logical coordinates nor the "
                      "position of an index array's entries (no index array read at "
                      f"{p} is given by the coordinates)")
        return keys, inner

    def _inner(self, p: str) -> Run | None:
        """The run at the next layout index when it places the entries at ``p`` (which has no
        keys of its own): one whose free array is read at ``p`` (Finch's block lists,
        ``gj = q + idx(pr) - ofs(pr + 1) + 1``: ``p`` numbers each group's maximal runs of
        consecutive offsets, so no explicit zeros are stored), or one pinned to its group's
        start or end (JDS, ``gi = perm(pp - jdPtr(pd))``: entries at the same offset share a
        slot of every group, so ``p`` is their rank by the next index's keys, the d-th entry
        of each row in jagged diagonal d)."""
        at = self.indices.index(p) + 1
        run = self.runs.get(self.indices[at]) if at < len(self.indices) else None
        if run is None or (run.free is not None and p not in Aff.var(run.free).names()):
            return None
        return run

    def _blocks_descending(self, run: Run) -> bool:
        """Whether blocks go by decreasing offsets: as an ordering property of the run's free
        array asks (it moves against the offsets where it enters ``p - anchor`` with ``+``),
        else increasing."""
        assert run.free is not None
        if not any(prop.descending(run.free.name) is not None
                   for prop in self.layout.properties):
            return False
        return self._descending(run.free.name) == (run.sign < 0)

    def _key_order(self, keys: tuple[UFCall, ...], group: tuple[str, ...]
                   ) -> tuple[UFCall, ...]:
        """The keys, most significant first: those an ordering property orders over the
        position's group (``monotonic diag <=`` over the whole tensor, ``periodic_monotonic``
        over its period) in the order the properties are declared, then the others as the
        equalities give them (sorting by a key first is what orders its array)."""
        props = self.layout.properties
        rank: dict[str, int] = {}
        for n, prop in enumerate(props):
            if isinstance(prop, Ordering) and prop.orders_within(group):
                rank.setdefault(prop.uf, n)
        return tuple(sorted(keys, key=lambda k: rank.get(k.name, len(props))))

    def _nested(self, p: str, keys: tuple[UFCall, ...], descending: tuple[bool, ...],
                group: tuple[str, ...], lower: Aff, upper: Aff) -> Position:
        """``O(a) + P(a, b) <= p < O(a) + P(a, b + 1)``: a list of compressed groups (an
        order-3 tensor as CSR slices: ``slicePtr(t) + rowPtr(t, i)``)."""
        calls = [a for a, k in lower.terms if isinstance(a, UFCall) and k == 1]
        inner = next((c for c in calls if len(c.args) == 2 and upper - lower == Aff.var(
            UFCall(c.name, (c.args[0], c.args[1] + 1))) - Aff.var(c)), None)
        outer = next((c for c in calls if c is not inner), None)
        if inner is None or outer is None or lower.const or len(lower.terms) != 2 \
                or outer.args != inner.args[:1]:
            self.fail(f"layout index {p} runs from {lower} to {upper}: pointers over two "
                      "levels are O(a) + P(a, b) <= p < O(a) + P(a, b + 1)")
        for call in (inner, outer):
            if not Aff.var(call).names() <= set(group):
                self.fail(f"{call} bounds {p} but reads layout indices after it")
        return Position(p, keys, descending, group, Start.NESTED, inner, upper, True,
                        outer=outer)

    def _group_bounds(self, p: str) -> tuple[UFCall, UFCall] | None:
        """The index-array reads bounding ``p``'s group (``rowPtr(pi) <= p < rowPtr(pi + 1)``,
        ``start(a) <= p < end(a)``), or None."""
        lower, upper, _ = self._bound_lists(p)
        if len(lower) != 1 or len(upper) != 1:
            return None
        lo, hi = _single_call(lower[0]), _single_call(upper[0])
        return (lo, hi) if lo is not None and hi is not None else None

    def _bounds(self, p: str) -> tuple[Aff, Aff, tuple[str, ...]]:
        """``(lower, exclusive upper, other upper scalar fields)`` of ``p`` as written, not
        involving the logical coordinates: where an array and scalar fields both bound it
        (``pk < rowLen(pi)`` and ``pk < width``), the array is its bound and the scalar fields
        are set to the largest group."""
        lower, upper, also = self._bound_lists(p)
        if len(lower) != 1 or len(upper) != 1:
            self.fail(f"layout index {p} needs one lower and one upper bound (found "
                      f"{len(lower)} and {len(upper)})")
        return lower[0], upper[0], also

    def _bound_lists(self, p: str) -> tuple[list[Aff], list[Aff], tuple[str, ...]]:
        """The lower and exclusive upper bounds of ``p`` (see :meth:`_bounds`)."""
        later = set(self.indices[self.indices.index(p) + 1:])
        lower: list[Aff] = []
        upper: list[Aff] = []
        for c in self.conj:
            k = c.aff.coeff(p)
            if c.is_eq or abs(k) != 1 or (c.names() - {p}) & (self.logical | later):
                continue
            rest = c.aff - Aff.var(p, k)
            (lower if k > 0 else upper).append(rest * -1 if k > 0 else rest + 1)
        also = tuple(n for u in upper if (n := u.as_name()) in self.layout.scalar_fields)
        if len(upper) > 1 and len(also) == len(upper) - 1:
            upper = [u for u in upper if u.as_name() not in also]
        else:
            also = ()
        return lower, upper, also

    def _descending(self, array: str) -> bool:
        for prop in self.layout.properties:
            down = prop.descending(array)
            if down is not None:
                return down
        return False

    # sizes and padding -------------------------------------------------------------------
    def _extents(self) -> list[tuple[str, Aff]]:
        """Scalar fields bounding a coordinate index (``p < F``): the index's largest
        value over the shape, plus one."""
        out = []
        for p in self.indices:
            s = self.solved.get(p)
            if s is None:
                continue
            for c in self.conj:
                if c.is_eq or c.aff.coeff(p) != -1 or len(c.aff.terms) != 2:
                    continue
                field = (c.aff + Aff.var(p) + Aff.num(1)).as_name()
                if field in self.layout.scalar_fields and field not in self._shape_fields():
                    if s.divisor != 1:
                        self.fail(f"the extent {field} of {p} = ({s.value}) / {s.divisor}")
                    out.append((field, s.value))
        return out

    def _shape_fields(self) -> set[str]:
        return shape_fields(self.layout)

    def _fills(self, positions: tuple[Position, ...]) -> list[tuple[str, int]]:
        """Unused slots below a bound no group fills must hold a value the relation
        excludes (``0 <= colIdx(pi, pk)``: -1)."""
        loose = {p.index for p in positions if not p.tight}
        out = []
        for s in self.solved.values():
            if not isinstance(s.atom, UFCall) or not Aff.var(s.atom).names() & loose:
                continue
            fill = self._excluded(s.atom)
            if fill is None:
                self.fail(f"unused slots of {s.atom.name} cannot be marked: nothing in the "
                          f"relation excludes a value of {s.atom} (as 0 <= {s.atom} would)")
            out.append((s.atom.name, fill))
        return out

    def _markers(self, positions: tuple[Position, ...]) -> tuple[Marker, ...]:
        """The index arrays nothing else determines that the part reads at one place, only
        compared with constants there (``1 <= tbl(pi, pj)``), at known layout indices."""
        given = {s.atom.name for s in self.solved.values() if isinstance(s.atom, UFCall)}
        for p in positions:
            given |= {c.name for c in (p.lower, p.outer, _single_call(p.upper)) if c}
        out = []
        for name in self.layout.index_arrays:
            reads = {c for con in self.conj for c in con.calls() if c.name == name}
            if name in given or len(reads) != 1:
                continue
            (call,) = reads
            uses = [c for c in self.conj if call in c.calls()]
            if any(c.is_eq or c.aff.terms != ((call, c.aff.coeff(call)),)
                   or abs(c.aff.coeff(call)) != 1 for c in uses) \
                    or any(n not in self.indices for n in Aff.var(call).names()) \
                    or any(inner.name not in given for a in call.args for inner in a.calls()):
                continue
            out.append(self._marker(call, uses))
        return tuple(out)

    def _marker(self, call: UFCall, uses: list[Constraint]) -> Marker:
        """The value marking an entry's slot and the one marking the others."""
        lows = [-c.aff.const for c in uses if c.aff.coeff(call) == 1]      # call >= -const
        highs = [c.aff.const for c in uses if c.aff.coeff(call) == -1]     # call <= const
        lo, hi = max(lows, default=None), min(highs, default=None)
        r_lo, r_hi = self._constant_range(call.name)
        least = max((b for b in (lo, r_lo) if b is not None), default=None)
        most = min((b for b in (hi, r_hi) if b is not None), default=None)
        mark = least if least is not None else most
        if mark is None or (most is not None and mark > most):
            self.fail(f"no value of {call} satisfies both the relation and the range of "
                      f"{call.name}")
        unused = [v for v in ((lo - 1) if lo is not None else None,
                              (hi + 1) if hi is not None else None)
                  if v is not None and (r_lo is None or v >= r_lo)
                  and (r_hi is None or v <= r_hi)]
        return Marker(call, mark, unused[0] if unused else mark)

    def _constant_range(self, array: str) -> tuple[int | None, int | None]:
        """The constant bounds a ``range`` property gives ``array`` (others: None)."""
        lo = hi = None
        for prop in self.layout.properties:
            if isinstance(prop, Range) and prop.uf == array:
                if prop.lower is not None and prop.lower.is_const:
                    lo = prop.lower.const if lo is None else max(lo, prop.lower.const)
                if prop.upper is not None and prop.upper.is_const:
                    hi = prop.upper.const if hi is None else min(hi, prop.upper.const)
        return lo, hi

    def _excluded(self, call: UFCall) -> int | None:
        for c in self.conj:
            if not c.is_eq and c.aff.coeff(call) == 1 and len(c.aff.terms) == 1:
                return -c.aff.const - 1
        return None
