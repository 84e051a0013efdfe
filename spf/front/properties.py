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
from . import index_expr as ie
from .index_expr import IExpr
from .terms import Aff, Constraint, FloorDiv, UFCall, format_constraint

if TYPE_CHECKING:
    import z3

ORDERS = ("<", "<=", ">", ">=")
KEYS = ("kind", "uf", "ufs", "order", "min", "max", "period", "with", "gap",
        "along", "window", "holds", "for")   # of any kind
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
    PERMUTATION = "permutation"
    LINEAR = "linear"


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
    conjunction: Callable[[str], list[Constraint]]  # ... parsed as comparisons joined by and

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

    def arguments(self, array: str, arity: int) -> list[tuple[tuple[z3.ArithRef, ...], int]]:
        """The new ``arity``-argument reads of ``array``: (arguments, instance)."""
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
    names_its_arrays: ClassVar[bool] = False     # its formula names its arrays (no uf key)
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
        cols = [np.asarray(arrays[u]) for u in self.ufs]
        order = np.lexsort(cols[::-1])           # stable: equal tuples keep their order
        equal = np.ones(len(order) - 1, bool)
        for c in cols:
            ordered = c[order]
            equal &= ordered[1:] == ordered[:-1]
        if equal.any():
            at = int(np.flatnonzero(equal)[np.argmin(order[1:][equal])]) + 1
            dup, start = int(order[at]), at
            while start > 0 and equal[start - 1]:
                start -= 1
            same = int(order[start])
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
        if order not in ORDERS:
            raise table.error(f"{table.label}: order must be one of {list(ORDERS)}, got "
                              f"{order!r}", "order")
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
class Permutation(Property):
    """``uf`` is a permutation of ``0 .. n - 1`` (``n`` its extent): injective, each value in
    range.  ``order`` (``>=`` or ``<=``) says how spf orders it when it writes a tensor:
    positions by the number of entries at their values (SELL-C-sigma: rows by length,
    longest first), stably within windows of ``window`` consecutive positions (the whole
    array when absent); without it, spf writes the identity.  Data read may hold any
    permutation: the order is a choice of the writer, not an invariant."""

    kind: ClassVar[PropertyKind] = PropertyKind.PERMUTATION
    by_storage_order: ClassVar[bool] = False
    extent: Aff | None = None           # n, when the extent is affine
    order: str | None = None
    window: Aff | None = None

    @classmethod
    def parse(cls, table: PropertyTable) -> Permutation:
        dims = table.arrays[table.ufs[0]]
        if len(table.ufs) != 1 or len(dims) != 1:
            raise table.error(f"{table.label}: a permutation is one one-dimensional index "
                              "array", table.key_of_ufs())
        order = table.keys.get("order")
        if order not in (None, ">=", "<="):
            raise table.error(f"{table.label}: order must be '>=' (positions by decreasing "
                              f"entry counts) or '<=', got {order!r}", "order")
        window = None
        if "window" in table.keys:
            window = table.affine("window")
            if not window.is_const or window.const < 1:
                raise table.error(f"{table.label}: window must be a positive integer or "
                                  f"parameter, got {table.keys['window']!r}", "window")
            if order is None:
                raise table.error(f"{table.label}: a window orders within it; give order too",
                                  "window")
        _no_gap(table)
        return cls(table.ufs, ie.affine(dims[0]), order, window)

    def formula(self) -> str:
        n = self.extent if self.extent is not None else "n"
        return f"{self.uf} is a permutation of 0..{n} - 1"

    def text(self) -> str:
        how = "" if self.order is None else f", entry counts {self.order}"
        win = "" if self.window is None else f" within {self.window}"
        return f"{self.kind}({self.uf}{how}{win})"

    def facts(self, call: UFCall) -> list[Constraint]:
        if call.name != self.uf or self.extent is None:
            return []
        return [Constraint.ge(Aff.var(call), Aff.num(0)),
                Constraint.ge(self.extent - 1, Aff.var(call))]

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        arr = arrays[self.uf]
        n = arr.size
        outside = (arr < 0) | (arr >= n)
        if outside.any():
            bad = int(np.flatnonzero(outside)[0])
            raise ArgumentError(f"{self.violated(layout)} at position {bad}: {arr[bad]} is "
                                f"outside 0..{n - 1}")
        seen = np.full(n, -1, np.int64)
        seen[arr[::-1]] = np.arange(n - 1, -1, -1)     # the first position of each value
        repeated = seen[arr] != np.arange(n)
        if repeated.any():
            bad = int(np.flatnonzero(repeated)[0])
            raise ArgumentError(f"{self.violated(layout)}: position {bad} repeats the value "
                                f"{arr[bad]} of position {seen[arr[bad]]}")

    def unestablished(self, storage: StorageOrder) -> str | None:
        return (": sorted assembly stores the coordinates that have entries, a permutation "
                "holds every value once")

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        import z3
        f = reads.function(self.uf)
        out = [z3.Implies(a1 != a2, f(a1) != f(a2)) for (a1, _), (a2, _) in reads.pairs(self.ufs)]
        if self.extent is not None:
            for t, k in reads.reads(self.uf):
                out += [t >= 0, t < reads.bound(self.extent, k)]
        return out


@dataclass(frozen=True)
class Linear(Property):
    """Affine constraints between index arrays, for every value of their variables in a
    box: ``holds = "slicePtr(s + 1) - slicePtr(s) = C * sliceWidth(s)"`` ``for = "0 <= s <
    numSlices"``.  Checked on a tensor's arrays once, vectorized over the box; given to Z3
    as instances at the reads of a query (each read of an array the constraint reads at its
    variables, plus constants, fixes them)."""

    kind: ClassVar[PropertyKind] = PropertyKind.LINEAR
    by_storage_order: ClassVar[bool] = False
    names_its_arrays: ClassVar[bool] = True
    holds: tuple[Constraint, ...] = ()
    domain: tuple[Constraint, ...] = ()
    variables: tuple[str, ...] = ()
    dims: tuple[tuple[str, tuple[IExpr, ...]], ...] = ()     # each array read: its extents

    @classmethod
    def parse(cls, table: PropertyTable) -> Linear:
        if table.ufs:
            raise table.error(f"{table.label}: a linear property names its arrays in 'holds' "
                              "(no uf key)", table.key_of_ufs())
        if "holds" not in table.keys:
            raise table.error(f'{table.label}: give holds = "<comparisons joined by and>"')
        holds = table.conjunction("holds")
        domain = table.conjunction("for") if "for" in table.keys else []
        every = [*holds, *domain]
        calls = {c for x in every for c in x.calls()}
        for c in calls:
            if c.name not in table.arrays:
                raise table.error(f"{table.label}: {c} reads {c.name!r}, which is not an index "
                                  "array", "holds")
            if len(c.args) != len(table.arrays[c.name]):
                raise table.error(f"{table.label}: {c} reads {c.name!r} with {len(c.args)} "
                                  f"arguments; it has {len(table.arrays[c.name])} dimensions",
                                  "holds")
        if any(isinstance(a, FloorDiv) for x in every for a in x.aff.atoms()):
            raise table.error(f"{table.label}: floor division is not allowed here", "holds")
        names = {n for x in every for n in x.aff.names()}
        variables = tuple(sorted(names - table.scalars))
        for v in variables:
            lower = any(x.aff.coeff(v) > 0 for x in domain if not x.is_eq)
            upper = any(x.aff.coeff(v) < 0 for x in domain if not x.is_eq)
            if not (lower and upper):
                raise table.error(f"{table.label}: {v!r} is neither a scalar field nor a "
                                  "variable bounded below and above by 'for'",
                                  "for" if "for" in table.keys else "holds")
        if any(x.calls() for x in domain):
            raise table.error(f"{table.label}: 'for' bounds its variables by scalar fields and "
                              "constants only", "for")
        _no_gap(table)
        arrays = tuple(sorted({c.name for c in calls}))
        return cls(arrays, tuple(holds), tuple(domain), variables,
                   tuple((a, table.arrays[a]) for a in arrays))

    def formula(self) -> str:
        text = " and ".join(format_constraint(c) for c in self.holds)
        if self.domain:
            text += " for " + " and ".join(format_constraint(c) for c in self.domain)
        return text

    def text(self) -> str:
        return f"{self.kind}({self.formula()})"

    def violated(self, layout: str) -> str:
        return f"{layout} tensor: its arrays violate {self.kind} ({self.formula()})"

    def check(self, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, int],
              layout: str) -> None:
        points = self._box(scalars)
        if points is None:
            return
        n = len(next(iter(points.values()))) if points else 1
        extents = {a: tuple(ie.evaluate(d, scalars, arrays) for d in dims)
                   for a, dims in self.dims}
        box = _Box({**scalars, **points}, arrays, extents, self, layout, points)

        def at(a: Aff) -> np.ndarray:
            return np.broadcast_to(_np_value(a, box), (n,))

        for c in self.holds:
            value = at(c.aff)
            bad = np.flatnonzero(value != 0 if c.is_eq else value < 0)
            if bad.size:
                k = int(bad[0])
                reads = ", ".join(f"{call} = {at(Aff.var(call))[k]}"
                                  for call in sorted(c.calls(), key=str))
                raise ArgumentError(f"{self.violated(layout)}{box.where(k)}: "
                                    f"{format_constraint(c)} fails ({reads})")

    def _box(self, scalars: Mapping[str, int]) -> dict[str, np.ndarray] | None:
        """The variables' values over the box ``for`` bounds (None: the box is empty)."""
        ranges = []
        for v in self.variables:
            lo, hi = -(1 << 62), 1 << 62
            for c in self.domain:
                k = c.aff.coeff(v)
                if c.is_eq or not k or len(c.aff.names() - set(scalars)) != 1:
                    continue
                rest = (c.aff - Aff.var(v, k)).evaluate(scalars)
                if k > 0:
                    lo = max(lo, -(rest // k))
                else:
                    hi = min(hi, rest // -k)
            if hi < lo:
                return None
            ranges.append(np.arange(lo, hi + 1, dtype=np.int64))
        grids = np.meshgrid(*ranges, indexing="ij") if ranges else []
        points = {v: g.ravel() for v, g in zip(self.variables, grids)}
        env: dict[str, Any] = {**scalars, **points}
        keep = np.ones(len(grids[0].ravel()) if grids else 1, bool)
        for c in self.domain:
            value = np.asarray(c.aff.evaluate(env) if not points else _np_affine(c.aff, env))
            keep &= np.broadcast_to(value == 0 if c.is_eq else value >= 0, keep.shape)
        if not keep.any():
            return None
        return {v: x[keep] for v, x in points.items()}

    def instances(self, reads: Reads) -> list[z3.BoolRef]:
        import z3
        out = []
        for c in {c for h in self.holds for c in h.calls()}:
            shift = _shifts(c, self.variables)
            if shift is None:
                continue
            for args, k in reads.arguments(c.name, len(c.args)):
                env = {v: args[i] - shift[i][1] for i, v in
                       ((i, s[0]) for i, s in enumerate(shift)) if v is not None}
                if set(env) != set(self.variables):
                    continue
                where = [_z3_constraint(d, env, reads, k) for d in self.domain]
                what = [_z3_constraint(h, env, reads, k) for h in self.holds]
                out.append(z3.Implies(z3.And(*where), z3.And(*what)))
        return out


def _shifts(call: UFCall, variables: tuple[str, ...]) -> list[tuple[str | None, int]] | None:
    """Per argument of ``call``: ``(v, c)`` for an argument ``v + c`` (``None`` for a
    constant argument); None when an argument is anything else."""
    out: list[tuple[str | None, int]] = []
    for a in call.args:
        if a.is_const:
            out.append((None, a.const))
        elif len(a.terms) == 1 and a.terms[0][1] == 1 and a.terms[0][0] in variables:
            out.append((str(a.terms[0][0]), a.const))
        else:
            return None
    return out


def _z3_constraint(c: Constraint, env: Mapping[str, Any], reads: Reads, k: int) -> Any:
    value = _z3_value(c.aff, env, reads, k)
    return value == 0 if c.is_eq else value >= 0


def _z3_value(a: Aff, env: Mapping[str, Any], reads: Reads, k: int) -> Any:
    total: Any = a.const
    for atom, coeff in a.terms:
        if isinstance(atom, str):
            term = env[atom] if atom in env else reads.bound(Aff.var(atom), k)
        else:
            assert isinstance(atom, UFCall)
            f = reads.function_of(atom.name, len(atom.args))
            term = f(*[_z3_value(x, env, reads, k) for x in atom.args])
        total = total + coeff * term
    return total


def _np_affine(a: Aff, env: Mapping[str, Any]) -> Any:
    total: Any = np.int64(a.const)
    for atom, k in a.terms:
        total = total + np.int64(k) * env[str(atom)]
    return total


@dataclass(frozen=True)
class _Box:
    """A linear property's variables over its box, and the arrays it reads."""

    env: Mapping[str, Any]                      # scalars and the variables' values
    arrays: Mapping[str, np.ndarray]
    extents: Mapping[str, tuple[int, ...]]
    prop: Linear
    layout: str
    points: Mapping[str, np.ndarray]

    def where(self, k: int) -> str:
        at = ", ".join(f"{v} = {self.points[v][k]}" for v in self.prop.variables)
        return f" at {at}" if at else ""


def _np_value(a: Aff, box: _Box) -> Any:
    """``a`` over the box, reading the arrays; ArgumentError naming a read out of bounds."""
    total: Any = np.int64(a.const)
    for atom, k in a.terms:
        if isinstance(atom, str):
            value = box.env[atom]
        else:
            assert isinstance(atom, UFCall)
            dims = box.extents[atom.name]
            flat: Any = np.int64(0)
            inside: Any = True
            for x, n in zip((_np_value(x, box) for x in atom.args), dims):
                inside = inside & (x >= 0) & (x < n)
                flat = flat * n + x
            if not np.all(inside):
                bad = int(np.flatnonzero(np.broadcast_to(~inside, np.shape(flat) or (1,)))[0])
                raise ArgumentError(f"{box.prop.violated(box.layout)}: {atom} reads outside "
                                    f"{atom.name} (extents {list(dims)}){box.where(bad)}")
            value = np.asarray(box.arrays[atom.name]).reshape(-1)[flat].astype(np.int64)
        total = total + np.int64(k) * value
    return total


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
    PropertyKind.SORTED: Sorted, PropertyKind.PERMUTATION: Permutation,
    PropertyKind.LINEAR: Linear}


def ordering_kinds() -> list[PropertyKind]:
    """The kinds that order an array (the monotonic kinds), in declaration order."""
    return [k for k, cls in KINDS.items() if issubclass(cls, Ordering)]


def _compare(order: str, a: Any, b: Any) -> Any:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[order]
