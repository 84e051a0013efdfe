"""Index-array properties (paper Table 1): one class per kind, owning all that is kind-specific.

A property class holds its keys of a layout file's ``[[properties]]`` table (:meth:`parse`),
its formula and its short text, its check over a tensor's arrays (:meth:`check`), its Z3
instances over the index-array reads of a query (:meth:`instances`, through the
:class:`Reads` view the encoder of :mod:`spf.decide.smt` gives it), and what sorting a
tensor's entries in storage order without duplicates establishes of it (:meth:`unestablished`,
asked by :mod:`spf.front.storage`).  Adding a kind is one class here, one member of
:class:`PropertyKind`, its entry in :data:`KINDS` and any new key in :data:`KEYS`; nothing
else compares kinds.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from ..errors import ArgumentError, SpecError
from .index_expr import IExpr
from .terms import Aff, Constraint, UFCall

if TYPE_CHECKING:
    import z3

ORDERS = ("<", "<=", ">", ">=")
KEYS = ("kind", "uf", "ufs", "order", "min", "max", "period", "with", "gap",
        "along")   # of any kind
_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


class PropertyKind(StrEnum):
    """The kinds of index-array property a layout file may declare (its ``kind`` key)."""

    RANGE = "range"
    INJECTIVE = "injective"
    MONOTONIC = "monotonic"
    PERIODIC_MONOTONIC = "periodic_monotonic"
    COVARY_MONOTONIC = "covary_monotonic"
    UNIQUE = "unique"
    SORTED = "sorted"


@dataclass(frozen=True)
class PropertyTable:
    """One ``[[properties]]`` table being read: its keys, its index arrays ``ufs`` (checked
    to be index arrays), what it may name, and how a mistake in it is reported."""

    keys: Mapping[str, Any]
    ufs: tuple[str, ...]
    label: str                                   # "property #2 (monotonic)"
    arrays: Mapping[str, tuple[IExpr, ...]]      # index array -> its extents
    indices: tuple[str, ...]                     # the layout indices
    scalars: frozenset[str]                      # scalar fields
    error: Callable[..., SpecError]              # (message, key=None, at_key=False)
    affine: Callable[[str], Aff]                 # the value of a key, parsed as affine

    def key_of_ufs(self) -> str:
        return "ufs" if "ufs" in self.keys else "uf"


@dataclass(frozen=True)
class StorageOrder:
    """What entries sorted in storage order without duplicates give a layout's arrays (built
    by :func:`spf.front.storage.storage_of` from its levels)."""

    pointers: frozenset[str]                     # pointer arrays: filled non-decreasing
    place: Mapping[str, tuple[int, int]]         # coordinate array -> (level, slot in level)
    dim_of: Mapping[str, int]                    # coordinate array -> its logical dimension
    order: tuple[int, ...]                       # logical dimensions, outermost level first
    indices: tuple[str, ...]                     # each level's layout index
    parents: tuple[str | None, ...]              # each level's enclosing index


class Reads(Protocol):
    """One tensor's index-array reads in one Z3 query, as a property's instances need them
    (array names are the layout's; the view qualifies them)."""

    def reads(self, array: str) -> list[tuple[z3.ArithRef, int]]:
        """The new reads of ``array`` (any arity): (the read, its instance)."""
        ...

    def pairs(self, arrays: Sequence[str]) -> list[tuple[tuple[z3.ArithRef, int],
                                                         tuple[z3.ArithRef, int]]]:
        """The pairs of one-argument reads of ``arrays`` to relate, new with new and new with
        old: ((argument, instance), (argument, instance))."""
        ...

    def function(self, array: str) -> z3.FuncDeclRef:
        """The one-argument Z3 function of ``array``."""
        ...

    def tuple_pairs(self, array: str, arity: int) -> list[tuple[
            tuple[tuple[z3.ArithRef, ...], int], tuple[tuple[z3.ArithRef, ...], int]]]:
        """The pairs of ``arity``-argument reads of ``array``, new with new and new with old:
        ((arguments, instance), (arguments, instance))."""
        ...

    def function_of(self, array: str, arity: int) -> z3.FuncDeclRef:
        """The ``arity``-argument Z3 function of ``array``."""
        ...

    def bound(self, a: Aff, k: int) -> z3.ArithRef:
        """``a`` (over the tensor's scalar fields and index arrays) at instance ``k``."""
        ...

    def enclosing(self, indices: Sequence[str]) -> bool:
        """Whether the layout ``indices`` are all variables of the encoded loops."""
        ...

    def index(self, name: str, k: int) -> z3.ArithRef:
        """Layout index ``name`` at instance ``k`` (one of the encoded loops' variables)."""
        ...


@dataclass(frozen=True)
class Property:
    """An index-array property of index arrays ``ufs`` (argument ``a``, a second instance
    ``a'``); its kind is its class.  ``by_storage_order``: a property about the order or
    the uniqueness of entries, which entries sorted in storage order without duplicates
    satisfy when its arrays are coordinate arrays (:meth:`unestablished` says where not)."""

    kind: ClassVar[PropertyKind]
    by_storage_order: ClassVar[bool] = True
    ufs: tuple[str, ...]

    @property
    def uf(self) -> str:
        return self.ufs[0]

    @classmethod
    def parse(cls, table: PropertyTable) -> Property:
        """The property ``table`` declares; SpecError (``table.error``) naming a wrong key."""
        raise NotImplementedError

    def arrays(self) -> frozenset[str]:
        """The index arrays it relates."""
        return frozenset(self.ufs)

    def formula(self) -> str:
        raise NotImplementedError

    def text(self) -> str:
        """The short form ``spf layouts`` prints: ``monotonic(rowPtr <=)``."""
        raise NotImplementedError

    def facts(self, call: UFCall) -> list[Constraint]:
        """Affine facts it gives about ``call`` (a call of the layout's index arrays)."""
        return []

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        """ArgumentError naming the first violation in a tensor of layout ``layout`` with
        these (flat) ``arrays`` and ``scalars``."""
        raise NotImplementedError

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        """Its instances over the reads of one query (quantifier-free)."""
        raise NotImplementedError

    def unestablished(self, storage: StorageOrder) -> str | None:
        """Why entries sorted in storage order without duplicates may violate it (the end of
        a message after the property), or None when they satisfy it."""
        return None

    def ordered_arrays(self) -> frozenset[str]:
        """The arrays whose order it constrains."""
        return frozenset()

    def descending(self, array: str) -> bool | None:
        """Whether it asks for ``array`` decreasing in storage order (None: it does not
        order ``array``)."""
        return None

    def non_decreasing(self) -> bool:
        """Whether it makes its array non-decreasing over the whole array."""
        return False

    def violated(self, layout: str) -> str:
        """The start of a violation's message."""
        return f"{layout} tensor: {self.uf!r} violates {self.kind} ({self.formula()})"


def _no_gap(table: PropertyTable) -> None:
    if "gap" in table.keys:
        raise table.error(f"{table.label}: 'gap' applies to the monotonic kinds only", "gap")


@dataclass(frozen=True)
class Range(Property):
    """``lower <= uf(a) <= upper`` (either bound may be absent)."""

    kind: ClassVar[PropertyKind] = PropertyKind.RANGE
    by_storage_order: ClassVar[bool] = False
    lower: Aff | None = None
    upper: Aff | None = None
    relative: tuple[str, ...] = ()      # layout indices a bound names (colIdx(pk) >= pi)

    @classmethod
    def parse(cls, table: PropertyTable) -> Range:
        bounds: dict[str, Aff] = {}
        for key in ("min", "max"):
            if key in table.keys:
                a = table.affine(key)
                if a.names() - table.scalars - set(table.indices) or a.calls():
                    raise table.error(f"{table.label}: {key} must be affine in scalar fields, "
                                      "parameters and layout indices, got "
                                      f"{table.keys[key]!r}", key)
                bounds[key] = a
        if not bounds:
            raise table.error(f"{table.label}: give min and/or max")
        _no_gap(table)
        relative = tuple(sorted({n for b in bounds.values() for n in b.names()}
                                & set(table.indices)))
        return cls(table.ufs, bounds.get("min"), bounds.get("max"), relative)

    def formula(self) -> str:
        lo = "" if self.lower is None else f"{self.lower} <= "
        hi = "" if self.upper is None else f" <= {self.upper}"
        return f"{lo}{self.uf}(a){hi}"

    def text(self) -> str:
        lo = "" if self.lower is None else self.lower
        hi = "" if self.upper is None else self.upper
        return f"{self.kind}({', '.join(self.ufs)}: {lo}..{hi})"

    def bounds_of(self, call: UFCall) -> list[Constraint]:
        """``lower <= call <= upper`` as written (layout indices included)."""
        out = []
        if self.lower is not None:
            out.append(Constraint.ge(Aff.var(call), self.lower))
        if self.upper is not None:
            out.append(Constraint.ge(self.upper, Aff.var(call)))
        return out

    def facts(self, call: UFCall) -> list[Constraint]:
        """The bounds of any read of the array; none when they name layout indices (those
        hold only where the relation reads it: :mod:`spf.middle.iteration_space`)."""
        if call.name != self.uf or self.relative:
            return []
        return self.bounds_of(call)

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        arr = arrays[self.uf]
        if not arr.size or self.relative:       # relative: at the reads (spf.read_check)
            return
        if self.lower is not None:
            lo = self.lower.evaluate(scalars)
            if arr.min() < lo:
                bad = int(np.flatnonzero(arr < lo)[0])
                raise ArgumentError(f"{self.violated(layout)} at position {bad}: "
                                    f"{arr[bad]} < {lo}")
        if self.upper is not None:
            hi = self.upper.evaluate(scalars)
            if arr.max() > hi:
                bad = int(np.flatnonzero(arr > hi)[0])
                raise ArgumentError(f"{self.violated(layout)} at position {bad}: "
                                    f"{arr[bad]} > {hi}")

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        out = []
        for t, k in reads.reads(self.uf):
            if self.lower is not None:
                out.append(t >= reads.bound(self.lower, k))
            if self.upper is not None:
                out.append(t <= reads.bound(self.upper, k))
        return out


@dataclass(frozen=True)
class Injective(Property):
    """``a != a' -> (ufs(a)) != (ufs(a'))``: a tuple of one-dimensional index arrays of one
    extent, read at the same position, repeats no tuple."""

    kind: ClassVar[PropertyKind] = PropertyKind.INJECTIVE

    @classmethod
    def parse(cls, table: PropertyTable) -> Injective:
        dims = [table.arrays[u] for u in table.ufs]
        if len(set(dims)) != 1 or len(dims[0]) != 1:
            raise table.error(f"{table.label}: the index arrays must be one-dimensional, of "
                              "one extent", table.key_of_ufs())
        _no_gap(table)
        return cls(table.ufs)

    def formula(self) -> str:
        tup = ", ".join(f"{u}(a)" for u in self.ufs)
        tup2 = ", ".join(f"{u}(a')" for u in self.ufs)
        return f"a != a' -> ({tup}) != ({tup2})"

    def text(self) -> str:
        return f"{self.kind}({', '.join(self.ufs)})"

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        if arrays[self.uf].size <= 1:
            return
        cols = np.stack([arrays[u] for u in self.ufs], axis=1)
        uniq, first, inverse = np.unique(cols, axis=0, return_index=True, return_inverse=True)
        if len(uniq) != len(cols):
            dup = sorted(set(range(len(cols))) - set(first.tolist()))[0]
            same = int(first[inverse.reshape(-1)[dup]])
            values = ", ".join(f"{u}[{dup}] = {arrays[u][dup]}" for u in self.ufs)
            raise ArgumentError(f"{self.violated(layout)}: position {dup} repeats position "
                                f"{same} ({values})")

    def unestablished(self, storage: StorageOrder) -> str | None:
        # distinct entries have distinct coordinates at the root level only (below it, only
        # within their parent's segment): the arrays must be all of the root's
        root = {array for array, (level, _) in storage.place.items() if level == 0}
        if set(self.ufs) != root:
            return " is not established by sorted assembly"
        return None

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        import z3
        fs = [reads.function(u) for u in self.ufs]
        return [z3.Implies(a1 != a2, z3.Or(*[f(a1) != f(a2) for f in fs]))
                for (a1, _), (a2, _) in reads.pairs(self.ufs)]


@dataclass(frozen=True)
class Unique(Property):
    """No two stored entries have the same logical coordinates, however the relation
    composes them from ``ufs`` (HiCOO: a block's coordinates times the block size plus the
    offsets in it): a composite coordinate repeats no tuple.  Checked on a tensor's entries
    as the relation reads them (:meth:`spf.Tensor.__init__`), not array by array."""

    kind: ClassVar[PropertyKind] = PropertyKind.UNIQUE
    by_storage_order: ClassVar[bool] = False

    @classmethod
    def parse(cls, table: PropertyTable) -> Unique:
        _no_gap(table)
        return cls(table.ufs)

    def formula(self) -> str:
        return f"entries at distinct coordinates (composed from {', '.join(self.ufs)})"

    def text(self) -> str:
        return f"{self.kind}({', '.join(self.ufs)})"

    def violated(self, layout: str) -> str:
        return f"{layout} tensor: its entries violate {self.kind} ({self.formula()})"

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        return          # on the entries, by the tensor (it needs the relation's reads)

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        return []


@dataclass(frozen=True)
class Sorted(Property):
    """Along dimension ``along`` of a multi-dimensional index array, the others fixed,
    ``a < a' -> uf(..., a, ...) <order> uf(..., a', ...)``: ELLPACK-R's columns sorted
    within each row.  Holds on the slots the relation reads, and is checked there by
    generated code (:mod:`spf.read_check`), comparing consecutive reads."""

    kind: ClassVar[PropertyKind] = PropertyKind.SORTED
    by_storage_order: ClassVar[bool] = False
    order: str = "<"
    along: int = 0
    rank: int = 2                       # the array's number of dimensions

    @classmethod
    def parse(cls, table: PropertyTable) -> Sorted:
        order = table.keys.get("order")
        if order not in _CMP:
            raise table.error(f"{table.label}: order must be one of {list(_CMP)}", "order")
        dims = table.arrays[table.ufs[0]]
        along = table.keys.get("along")
        if isinstance(along, bool) or not isinstance(along, int) or not 0 <= along < len(dims) \
                or len(dims) < 2:
            raise table.error(f"{table.label}: along must be a dimension (0 to "
                              f"{len(dims) - 1}) of a multi-dimensional index array", "along")
        _no_gap(table)
        return cls(table.ufs, order, along, len(dims))

    def formula(self) -> str:
        return f"{self.uf} {self.order} along dimension {self.along}, the others fixed"

    def text(self) -> str:
        return f"{self.kind}({self.uf} {self.order}, along {self.along})"

    def ordered_arrays(self) -> frozenset[str]:
        return frozenset(self.ufs)

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        return None         # on the slots the relation reads (spf.read_check)

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        import z3
        out = []
        f = reads.function_of(self.uf, self.rank)
        for first, second in reads.tuple_pairs(self.uf, self.rank):
            for (x, _), (y, _) in ((first, second), (second, first)):
                same = [x[i] == y[i] for i in range(len(x)) if i != self.along]
                out.append(z3.Implies(z3.And(*same, x[self.along] < y[self.along]),
                                      _compare(self.order, f(*x), f(*y))))
        return out


@dataclass(frozen=True)
class Ordering(Property):
    """The monotonic kinds: ``<premise> and a < a' -> uf(a) + gap <order> uf(a')`` for one
    one-dimensional index array (``gap``: BCSR's blocks of one row do not overlap,
    ``colIdx(a) + B <= colIdx(a')``)."""

    order: str
    gap: int = 0

    @classmethod
    def parse(cls, table: PropertyTable) -> Ordering:
        order = table.keys.get("order")
        if order not in ORDERS:
            raise table.error(f"{table.label}: order must be one of {list(ORDERS)}, got "
                              f"{order!r}", "order")
        if len(table.ufs) != 1 or len(table.arrays[table.ufs[0]]) != 1:
            raise table.error(f"{table.label}: monotonicity is defined for one one-dimensional "
                              "index array")
        extra = cls._parse_extra(table)
        gap = 0
        if "gap" in table.keys:
            value = table.affine("gap")
            if not value.is_const or value.const < 0:
                raise table.error(f"{table.label}: gap must be a non-negative integer or "
                                  f"parameter, got {table.keys['gap']!r}", "gap")
            gap = value.const
        return cls(table.ufs, order, gap, **extra)

    @classmethod
    def _parse_extra(cls, table: PropertyTable) -> dict[str, Any]:
        """The keys of this monotonic kind beyond order and gap."""
        return {}

    @property
    def is_descending(self) -> bool:
        return self.order in (">", ">=")

    @property
    def spacing(self) -> int:
        """The least difference of two ordered values (``gap``, plus one when strict)."""
        return self.gap + (1 if self.order in ("<", ">") else 0)

    def premise(self) -> str:
        """What the formula assumes besides ``a < a'``."""
        return ""

    def formula(self) -> str:
        plus = f" + {self.gap}" if self.gap else ""
        return f"{self.premise()}a < a' -> {self.uf}(a){plus} {self.order} {self.uf}(a')"

    def text(self) -> str:
        gap = f", gap {self.gap}" if self.gap else ""
        return f"{self.kind}({self.uf} {self.order}{self.text_extra()}{gap})"

    def text_extra(self) -> str:
        return ""

    def ordered_arrays(self) -> frozenset[str]:
        return frozenset({self.uf})

    def descending(self, array: str) -> bool | None:
        return self.is_descending if array == self.uf else None

    def orders_within(self, group: tuple[str, ...]) -> bool:
        """Whether distinct keys ranked within each group of equal layout indices ``group``
        (over the whole tensor for ``()``) satisfy its scope."""
        return False

    def unestablished(self, storage: StorageOrder) -> str | None:
        if self.uf in storage.pointers:
            return None if self.fills_pointer() else ": pointer arrays are filled " \
                "non-decreasing (<=)"
        if self.gap or self.uf not in storage.place or not self.sorted_gives(storage):
            return " is not established by sorted assembly"
        return None

    def fills_pointer(self) -> bool:
        """Whether a pointer array filled non-decreasing satisfies it."""
        return False

    def sorted_gives(self, storage: StorageOrder) -> bool:
        """Whether sorting in storage order gives it (its array a coordinate array)."""
        raise NotImplementedError

    def check_pairs(self, arrays: Mapping[str, np.ndarray], layout: str) -> None:
        raise NotImplementedError

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        if arrays[self.uf].size > 1:
            self.check_pairs(arrays, layout)

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        import z3
        f = reads.function(self.uf)
        if not self.applies(reads):
            return []
        out = []
        for first, second in reads.pairs(self.ufs):
            for (x, k1), (y, k2) in ((first, second), (second, first)):
                rel = _compare(self.order, f(x) + self.gap if self.gap else f(x), f(y))
                out.append(z3.Implies(self.premise_z3(reads, x, y, k1, k2), rel))
        return out

    def applies(self, reads: Reads) -> bool:
        """Whether the query's loops give what its premise needs."""
        return True

    def premise_z3(self, reads: Reads, x: z3.ArithRef, y: z3.ArithRef, k1: int,
                   k2: int) -> z3.BoolRef:
        """Its premise for the reads at ``x`` (instance ``k1``) and ``y`` (``k2``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Monotonic(Ordering):
    """``a < a' -> uf(a) <order> uf(a')`` over the whole array."""

    kind: ClassVar[PropertyKind] = PropertyKind.MONOTONIC

    def non_decreasing(self) -> bool:
        return not self.is_descending and self.gap >= 0

    def orders_within(self, group: tuple[str, ...]) -> bool:
        return not group

    def fills_pointer(self) -> bool:
        return self.order == "<=" and not self.gap

    def sorted_gives(self, storage: StorageOrder) -> bool:
        return storage.order.index(storage.dim_of[self.uf]) == 0

    def check_pairs(self, arrays: Mapping[str, np.ndarray], layout: str) -> None:
        arr = arrays[self.uf]
        before = arr[:-1].astype(np.int64) + self.gap if self.gap else arr[:-1]
        ok = _CMP[self.order](before, arr[1:])
        if not ok.all():
            k = int(np.flatnonzero(~ok)[0])
            raise ArgumentError(f"{self.violated(layout)} at positions {k}, {k + 1}: "
                                f"{arr[k]}, {arr[k + 1]}")

    def premise_z3(self, reads: Reads, x: z3.ArithRef, y: z3.ArithRef, k1: int,
                   k2: int) -> z3.BoolRef:
        return x < y


@dataclass(frozen=True)
class PeriodicMonotonic(Ordering):
    """Within one period (the layout indices ``period`` equal) ``a < a' -> uf(a) <order>
    uf(a')``: CSR's columns sorted within each row.  Checked by generated code
    (:mod:`spf.read_check`), which walks the periods; :meth:`check` does nothing."""

    kind: ClassVar[PropertyKind] = PropertyKind.PERIODIC_MONOTONIC
    period: tuple[str, ...] = field(kw_only=True)

    @classmethod
    def _parse_extra(cls, table: PropertyTable) -> dict[str, Any]:
        raw = table.keys.get("period")
        raw = [raw] if isinstance(raw, str) else raw
        if not isinstance(raw, list) or not raw or any(v not in table.indices for v in raw):
            raise table.error(f"{table.label}: period must name layout indices of "
                              f"{list(table.indices)}", "period")
        return {"period": tuple(raw)}

    def premise(self) -> str:
        return " and ".join(f"{p} = {p}'" for p in self.period) + " and "

    def text_extra(self) -> str:
        return f", period {', '.join(self.period)}"

    def orders_within(self, group: tuple[str, ...]) -> bool:
        return self.period == group

    def sorted_gives(self, storage: StorageOrder) -> bool:
        k, n = storage.place[self.uf]
        return n == 0 and k > 0 and storage.parents[k] in self.period and all(
            p in storage.indices[:k] for p in self.period)

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        return None

    def applies(self, reads: Reads) -> bool:
        return reads.enclosing(self.period)

    def premise_z3(self, reads: Reads, x: z3.ArithRef, y: z3.ArithRef, k1: int,
                   k2: int) -> z3.BoolRef:
        import z3
        same = [reads.index(p, k1) == reads.index(p, k2) for p in self.period]
        return z3.And(*same, x < y)


@dataclass(frozen=True)
class CovaryMonotonic(Ordering):
    """``with_(a) = with_(a') and a < a' -> uf(a) <order> uf(a')``: sorted within equal
    values of another index array (a sorted COO's columns within a row)."""

    kind: ClassVar[PropertyKind] = PropertyKind.COVARY_MONOTONIC
    with_: str = field(kw_only=True)

    @classmethod
    def _parse_extra(cls, table: PropertyTable) -> dict[str, Any]:
        with_ = table.keys.get("with")
        if not isinstance(with_, str) or with_ not in table.arrays:
            raise table.error(f"{table.label}: 'with' must name an index array", "with")
        if table.arrays[with_] != table.arrays[table.ufs[0]]:
            raise table.error(f"{table.label}: 'with' must name an index array of the extent "
                              f"of {table.ufs[0]!r}", "with")
        return {"with_": with_}

    def arrays(self) -> frozenset[str]:
        return frozenset({*self.ufs, self.with_})

    def premise(self) -> str:
        return f"{self.with_}(a) = {self.with_}(a') and "

    def text_extra(self) -> str:
        return f", with {self.with_}"

    def ordered_arrays(self) -> frozenset[str]:
        return frozenset({self.uf, self.with_})

    def sorted_gives(self, storage: StorageOrder) -> bool:
        order, dim_of = storage.order, storage.dim_of
        return self.with_ in dim_of and \
            order[:order.index(dim_of[self.uf])] == (dim_of[self.with_],)

    def check_pairs(self, arrays: Mapping[str, np.ndarray], layout: str) -> None:
        arr, g = arrays[self.uf], arrays[self.with_]
        perm = np.argsort(g, kind="stable")
        same = g[perm][:-1] == g[perm][1:]
        ok = _CMP[self.order](arr[perm][:-1].astype(np.int64) + self.gap, arr[perm][1:]) | ~same
        if not ok.all():
            k = int(np.flatnonzero(~ok)[0])
            a, b = int(perm[k]), int(perm[k + 1])
            raise ArgumentError(f"{self.violated(layout)} at positions {a}, {b}: "
                                f"{self.with_}[{a}] = {self.with_}[{b}] = {g[a]}, "
                                f"{self.uf}[{a}] = {arr[a]}, {self.uf}[{b}] = {arr[b]}")

    def premise_z3(self, reads: Reads, x: z3.ArithRef, y: z3.ArithRef, k1: int,
                   k2: int) -> z3.BoolRef:
        import z3
        g = reads.function(self.with_)
        return z3.And(g(x) == g(y), x < y)


KINDS: dict[PropertyKind, type[Property]] = {
    PropertyKind.RANGE: Range, PropertyKind.INJECTIVE: Injective,
    PropertyKind.MONOTONIC: Monotonic, PropertyKind.PERIODIC_MONOTONIC: PeriodicMonotonic,
    PropertyKind.COVARY_MONOTONIC: CovaryMonotonic, PropertyKind.UNIQUE: Unique,
    PropertyKind.SORTED: Sorted}


def ordering_kinds() -> list[PropertyKind]:
    """The kinds that order an array (the monotonic kinds), in declaration order."""
    return [k for k, cls in KINDS.items() if issubclass(cls, Ordering)]


def _compare(order: str, a: Any, b: Any) -> Any:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[order]
