"""Storage levels of a layout, derived from its relation: what assembling a tensor in it means.

Each layout index (in storage order) is one level.  Its bounds and the logical coordinates
that equalities give it decide its kind:

- **dense**: ``0 <= p < E`` and ``g = p`` (every coordinate of dimension g has a position,
  ``parent_position * E + g``);
- **compressed**: positions ``ptr(parent) <= p < ptr(parent + 1)`` under the enclosing level,
  or ``0 <= p < N`` at the root with a scalar field ``N``; each coordinate is an index array
  read ``g = crd(p)``.

The logical coordinates in level order give the **storage order**: entries sorted by it
(descending for a coordinate whose array is declared decreasing) and without duplicates
satisfy every ordering property the layout can declare for such levels.  Coordinates of a
compressed last level that no property orders (``free_tail``) may be stored in any order
within their parent's segment.  Layouts outside
this shape (blocked, diagonal, padded) are rejected with the reason.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import NoReturn

from ..errors import SpecError
from . import index_expr as ie
from .derived import Derived
from .established import unestablished
from .layout import Layout
from .properties import Property, StorageOrder
from .terms import Aff, Constraint, UFCall


class StorageKind(StrEnum):
    """How a storage level holds its positions: every coordinate of its extent (dense) or
    only those with entries, appended behind a pointer or a count (compressed)."""

    DENSE = "dense"
    COMPRESSED = "compressed"


@dataclass(frozen=True)
class StorageLevel:
    """One level: layout index ``index`` and the logical dimensions it fixes."""

    index: str
    kind: StorageKind
    coords: tuple[tuple[int, str | None], ...]  # (logical dim, index array or None = index)
    parent: str | None = None                   # the enclosing level's index
    pointer: str | None = None                  # ptr(parent) <= index < ptr(parent + 1)
    count: str | None = None                    # root: scalar field = number of positions
    extent: str | None = None                   # dense: scalar field = number of coordinates

    @property
    def arrays(self) -> tuple[str, ...]:
        """The index arrays holding a compressed level's coordinates, in order (one each)."""
        arrays = tuple(a for _, a in self.coords if a is not None)
        if len(arrays) != len(self.coords):
            raise ValueError(f"level {self.index} ({self.kind}) holds a coordinate in no array")
        return arrays


@dataclass(frozen=True)
class DerivedPass:
    """A ``[derived]`` pair of which the levels write one array (``written``): the other
    (``computed``) follows from it once the levels are complete, so that assembly writes
    every field: the source as the field's differences divided by the scale, or the field
    as the prefix sum of the scaled source."""

    derived: Derived
    to_source: bool     # the levels write the derived field, and its source follows
    level: int          # the written array holds one element per position of this level,
    pointer: bool       # and one more when it is a pointer array over them

    @property
    def written(self) -> str:
        return self.derived.field if self.to_source else self.derived.source

    @property
    def computed(self) -> str:
        return self.derived.source if self.to_source else self.derived.field

    def computed_length(self, positions: Sequence[int]) -> int:
        """The computed array's length, given the positions each level holds."""
        written = int(positions[self.level]) + self.pointer
        return max(written - 1, 0) if self.to_source else written + 1


@dataclass(frozen=True)
class Storage:
    """The levels of a layout and its storage order."""

    layout: Layout
    levels: tuple[StorageLevel, ...]
    order: tuple[int, ...]              # logical dimensions, outermost level first
    descending: tuple[bool, ...]        # per entry of ``order``
    shape_fields: tuple[str, ...]       # scalar field holding each logical extent
    free_tail: int = 0                  # trailing coordinates of ``order`` no property orders

    @property
    def value_array(self) -> str | None:
        """The values' array; None for a pattern layout, whose assembly writes no values."""
        return self.layout.value_array

    def written_arrays(self) -> dict[str, tuple[int, bool]]:
        """The index arrays the levels write: each with the level whose positions it holds
        one element per (the parent's, for a pointer array) and whether it holds one more
        (a pointer array)."""
        out: dict[str, tuple[int, bool]] = {}
        for k, lv in enumerate(self.levels):
            if lv.pointer:
                out[lv.pointer] = (k - 1, True)
            out.update((arr, (k, False)) for _, arr in lv.coords if arr)
        return out

    def derived_passes(self) -> tuple[DerivedPass, ...]:
        """The layout's ``[derived]`` pairs of which the levels write exactly one side."""
        written = self.written_arrays()
        out = []
        for d in self.layout.derived.values():
            if (d.field in written) != (d.source in written):
                side = d.field if d.field in written else d.source
                out.append(DerivedPass(d, d.field in written, *written[side]))
        return tuple(out)

    def level_of(self, dim: int) -> int:
        return next(k for k, lv in enumerate(self.levels) if any(d == dim for d, _ in lv.coords))

    # shapes: asked of the storage once, not re-derived by each caller ----------------------
    def is_dense_over_compressed(self) -> bool:
        """Two levels: a dense level over a compressed one whose positions run between a
        pointer array's entries and give one coordinate through one index array (the
        dense level's dimension is ``order[0]``)."""
        if len(self.levels) != 2:
            return False
        outer, inner = self.levels
        return outer.kind is StorageKind.DENSE and inner.pointer is not None \
            and len(inner.coords) == 1

    def is_coordinate_list(self) -> bool:
        """One compressed level holding every coordinate in an index array, as many
        positions as a scalar field says."""
        return len(self.levels) == 1 and self.levels[0].kind is StorageKind.COMPRESSED

    def is_all_dense(self) -> bool:
        """Every level dense: a position for every coordinate."""
        return all(lv.kind is StorageKind.DENSE for lv in self.levels)

    def order_properties(self) -> tuple[Property, ...]:
        """The properties that entries sorted in storage order without duplicates satisfy
        (:func:`storage_of` checked it of each): those of kinds sorting can establish whose
        arrays are all coordinate arrays.  None: any order, repeats allowed."""
        coordinates = {a for lv in self.levels for _, a in lv.coords if a}
        return tuple(p for p in self.layout.properties
                     if p.by_storage_order and p.arrays() <= coordinates)


def storage_of(layout: Layout) -> Storage:
    """The storage levels of ``layout``; SpecError naming what does not fit."""
    return _Deriver(layout).run()


@cache
def storage_or_none(layout: Layout) -> Storage | None:
    """The storage levels of ``layout``, or None when spf cannot assemble it (cached)."""
    try:
        return storage_of(layout)
    except SpecError:
        return None


class _Deriver:
    def __init__(self, layout: Layout):
        self.layout = layout
        rel = layout.relation
        why = layout.written_as_one_conjunction()
        if why:
            self.fail(why)
        self.conj = rel.disjuncts[0]
        self.indices = list(layout.indices)
        self.out = list(rel.out_vars or ())
        self.used: list[Constraint] = []        # the constraints the levels establish

    def fail(self, why: str) -> NoReturn:
        raise SpecError(f"layout {self.layout.name} cannot be assembled: {why}",
                        self.layout.source)

    def run(self) -> Storage:
        lay = self.layout
        shape_fields = []
        for d, e in enumerate(lay.shape):
            field = e.as_name()
            if field is None:
                self.fail(f"the extent of dimension {d} ({e}) is not a scalar field")
            shape_fields.append(field)
        coords = self._coordinates()
        levels: list[StorageLevel] = []
        for k, p in enumerate(self.indices):
            parent = self.indices[k - 1] if k else None
            mine = tuple(sorted(coords.get(p, []), key=lambda c: (c[0], c[1] or "")))
            if not mine:
                self.fail(f"layout index {p} fixes no logical coordinate")
            lower, upper = self._bounds(p)
            levels.append(self._level(p, parent, mine, lower, upper, shape_fields))
        order = tuple(d for lv in levels for d, _ in lv.coords)
        if sorted(order) != list(range(len(self.out))):
            self.fail("every logical coordinate must be fixed by exactly one layout index")
        descending = tuple(self._descending(arr) for lv in levels for _, arr in lv.coords)
        given = set(shape_fields) | {f for lv in levels for f in (lv.count, lv.extent) if f}
        missing = [f for f in lay.scalar_fields if f not in given]
        if missing:
            self.fail(f"the scalar field(s) {', '.join(missing)} are given neither by the shape "
                      "nor by a level (a count of positions, a dense extent)")
        extra = unestablished(lay, self.conj, self.used)
        if extra is not None:
            self.fail(f"constraint {extra} of its relation does not follow from its storage "
                      "levels and its shape (it decides which entries the layout holds)")
        self._check_properties(levels, order)
        self._check_value(levels)
        storage = Storage(lay, tuple(levels), order, descending, tuple(shape_fields),
                          self._free_tail(levels[-1]))
        self._check_written(storage)
        return storage

    def _coordinates(self) -> dict[str, list[tuple[int, str | None]]]:
        out: dict[str, list[tuple[int, str | None]]] = {}
        for c in self.conj:
            gs = [g for g in self.out if c.aff.coeff(g)]
            if not gs:
                continue
            if not c.is_eq or len(gs) != 1 or abs(c.aff.coeff(gs[0])) != 1:
                self.fail(f"constraint {c} does not define one logical coordinate by an equality")
            self.used.append(c)
            g = gs[0]
            value = (c.aff - Aff.var(g, c.aff.coeff(g))) * -c.aff.coeff(g)
            dim = self.out.index(g)
            if value.const == 0 and len(value.terms) == 1 and value.terms[0][1] == 1:
                atom = value.terms[0][0]
                if isinstance(atom, str) and atom in self.indices:
                    out.setdefault(atom, []).append((dim, None))
                    continue
                if isinstance(atom, UFCall) and len(atom.args) == 1:
                    arg = atom.args[0].as_name()
                    if arg is not None and arg in self.indices:
                        out.setdefault(arg, []).append((dim, atom.name))
                        continue
            self.fail(f"coordinate {g} = {value} is neither a layout index nor an index "
                      "array read at one layout index")
        return out

    def _bounds(self, p: str) -> tuple[list[Aff], list[Aff]]:
        later = set(self.indices[self.indices.index(p) + 1:])
        lower: list[Aff] = []
        upper: list[Aff] = []
        for c in self.conj:
            k = c.aff.coeff(p)
            if not k or c.is_eq or any(g in c.names() for g in self.out):
                continue
            if c.names() & later:
                continue
            if abs(k) != 1:
                self.fail(f"bound {c} of {p} has a coefficient other than 1")
            rest = c.aff - Aff.var(p, k)
            (lower if k > 0 else upper).append(rest * -1 if k > 0 else rest)
            self.used.append(c)
        if len(lower) != 1 or len(upper) != 1:
            self.fail(f"layout index {p} needs exactly one lower and one upper bound")
        return lower, upper

    def _level(self, p: str, parent: str | None, coords: tuple[tuple[int, str | None], ...],
               lower: list[Aff], upper: list[Aff], shape_fields: list[str]) -> StorageLevel:
        lo, hi = lower[0], upper[0]
        scalar = (hi + 1).as_name()
        if lo == Aff.num(0) and scalar in self.layout.scalar_fields:
            if coords == ((coords[0][0], None),) and len(coords) == 1:
                if shape_fields[coords[0][0]] != scalar:
                    self.fail(f"dense level {p} runs to {scalar}, not to the extent of its "
                              f"coordinate ({shape_fields[coords[0][0]]})")
                return StorageLevel(p, StorageKind.DENSE, coords, parent, extent=scalar)
            if parent is None and all(arr for _, arr in coords):
                if scalar in shape_fields:
                    self.fail(f"compressed level {p} counts its positions in {scalar}, a "
                              "logical extent: storing only the coordinates that have "
                              "entries would change the shape")
                return StorageLevel(p, StorageKind.COMPRESSED, coords, None, count=scalar)
        if parent is not None and all(arr for _, arr in coords):
            ptr = next((a.terms[0][0] for a in [lo] if len(a.terms) == 1 and a.const == 0
                        and isinstance(a.terms[0][0], UFCall)), None)
            if ptr is not None and len(ptr.args) == 1 and ptr.args[0] == Aff.var(parent) \
                    and hi + 1 == Aff.var(UFCall(ptr.name, (Aff.var(parent) + 1,))):
                return StorageLevel(p, StorageKind.COMPRESSED, coords, parent, pointer=ptr.name)
        self.fail(f"layout index {p} (bounds {lo} <= {p} <= {hi}) is neither a dense level "
                  "nor a compressed level of its parent")

    def _check_written(self, storage: Storage) -> None:
        """Every array is written: by a level, as the values, or from one of those by its
        ``[derived]`` definition."""
        written = set(storage.written_arrays()) | {storage.value_array or ""} \
            | {p.computed for p in storage.derived_passes()}
        missing = [n for n, spec in self.layout.fields.items()
                   if spec.is_array and n not in written]
        if missing:
            self.fail(f"the array(s) {', '.join(missing)} are written by no level (neither a "
                      "pointer nor a coordinate array) and follow from none by [derived]")
        for p in storage.derived_passes():
            d = p.derived
            if p.to_source and d.scale != 1:
                self.fail(f"{d.field} is [derived] as {d.text()}, so it grows by multiples of "
                          f"{d.scale}, which the levels, one position per entry, do not give")

    def _descending(self, array: str | None) -> bool:
        for prop in self.layout.properties:
            down = prop.descending(array) if array else None
            if down is not None:
                return down
        return False

    def _check_properties(self, levels: list[StorageLevel], order: tuple[int, ...]) -> None:
        """Each ordering property must follow from sorted, duplicate-free storage order."""
        place: dict[str, tuple[int, int]] = {}     # array -> (level, position in the level)
        dim_of: dict[str, int] = {}
        for k, lv in enumerate(levels):
            for n, (d, arr) in enumerate(lv.coords):
                if arr:
                    place[arr], dim_of[arr] = (k, n), d
        facts = StorageOrder(frozenset(lv.pointer for lv in levels if lv.pointer), place,
                             dim_of, order, tuple(lv.index for lv in levels),
                             tuple(lv.parent for lv in levels))
        for prop in self.layout.properties:
            why = prop.unestablished(facts)
            if why:
                self.fail(f"property {prop.kind} {prop.formula()}{why}")

    def _free_tail(self, last: StorageLevel) -> int:
        """How many coordinates of a compressed last level no ordering property mentions."""
        if last.kind is not StorageKind.COMPRESSED:
            return 0
        ordered = {a for prop in self.layout.properties for a in prop.ordered_arrays()}
        free = 0
        for _, arr in reversed(last.coords):
            if arr in ordered:
                break
            free += 1
        return free

    def _check_value(self, levels: list[StorageLevel]) -> None:
        """Values must sit at the positions of the last level: ``data[p]`` below a compressed
        level, or ``data[p][q]...`` over it and the dense levels under it."""
        if self.layout.implicit is not None:
            return                      # a pattern layout: no values to place
        ref = self.layout.value_ref
        subs = [s.name if isinstance(s, ie.Name) else "?" for s in ref.subscripts]
        start = max((k for k, lv in enumerate(levels) if lv.kind is StorageKind.COMPRESSED),
                    default=0)
        chain = levels[start:]
        dims = self.layout.fields[ref.array].dims
        if subs == [lv.index for lv in chain] and all(
                lv.extent is not None and dims[m] == ie.Name(lv.extent)    # dense, that long
                for m, lv in enumerate(chain) if m > 0):
            return
        shown = "".join(f"[{ie.to_c(s, str, _call_text)}]" for s in ref.subscripts)
        self.fail(f"value {ref.array}{shown} is not stored at the positions of the last level "
                  f"{levels[-1].index} (spf fills a value array in the order of the levels)")


def _call_text(name: str, args: list[str]) -> str:
    return f"{name}({', '.join(args)})"
