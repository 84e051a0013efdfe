"""Shapes at a call: which input extents must agree, and the output's extents.

An output index that every term reads plainly takes that input's extent.  One that some
term reads only inside affine access indices (``O(i) = I(i-k) * F(k)``, ``C(i) = A(i) +
B(i-10)``) takes the smallest extent holding every point a term can reach: ``0 <= i - k <
n_I`` and ``0 <= k < n_F`` give ``i <= n_I + n_F - 2`` (the full convolution); a passed
output may be smaller or larger (the points outside it are not in the iteration space).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from ..errors import ArgumentError
from ..front.kernel_spec import ARITHMETIC_LIMIT, Expr

Slot = tuple[str, int]   # (tensor, dimension)
Shapes = Mapping[str, tuple[int, ...]]
INF = math.inf
_ROUNDS = 64        # interval propagation stops here if it has not settled (a larger box)


@dataclass(frozen=True)
class Dim:
    """``0 <= sum(c*v) + const < extent(slot)``: one dimension of one access."""

    terms: tuple[tuple[str, int], ...]
    const: int
    slot: Slot


@dataclass(frozen=True)
class TermReach:
    """The points of one term: each access dimension (``dims``) in range, each index in
    ``ranges`` in ``[0, extent(slot))`` (an index read plainly anywhere: one range per index
    for the whole statement) or ``[0, inf)`` (``None``: another output index no tensor reads
    plainly), any other index free but for the accesses."""

    dims: tuple[Dim, ...]
    ranges: tuple[tuple[str, Slot | None], ...]

    @property
    def slots(self) -> tuple[Slot, ...]:
        """The input dimensions whose extents its points depend on."""
        return tuple(sorted({d.slot for d in self.dims} |
                            {s for _, s in self.ranges if s is not None}))

    def largest(self, index: str, shapes: Shapes) -> int | None:
        """The largest value of ``index`` at a point of the term (-1: the term has no point;
        None: its accesses do not bound it): the largest ``v`` for which the points with
        ``index >= v`` are not found empty, by binary search over interval propagation (a
        full convolution ``O(i) = I(i-k) * F(k)`` reaches ``n_I + n_F - 2``;
        ``v(i+k) * w(k-i)`` reaches ``(n_v - 1) // 2``); kept per extents (calls repeat
        them)."""
        return _largest(self, index, tuple(shapes[t][d] for t, d in self.slots))

    def bounds(self, index: str) -> bool:
        """Whether the term's accesses bound ``index`` above whatever the extents: a
        property of the statement, never of the data (``R(i) = B(i-k, j)`` leaves ``i``
        unbounded, also where B is empty)."""
        return _bounds(self, index)

    def search(self, index: str, shapes: Shapes) -> int | None:
        """:meth:`largest`, computed."""
        if not self.bounds(index):
            return None
        box = self._box(shapes, index, None)
        if box is None:
            return -1
        lo, hi = box
        if hi == INF:
            return None
        a, b = int(lo), int(hi)
        while a < b:
            m = (a + b + 1) // 2
            if self._box(shapes, index, m) is None:
                b = m - 1
            else:
                a = m
        return a

    def _box(self, shapes: Shapes, index: str, at_least: int | None
             ) -> tuple[float, float] | None:
        """The interval of ``index`` over the term's points with ``index >= at_least``, by
        interval propagation (None: found empty)."""
        lo: dict[str, float] = {}
        hi: dict[str, float] = {}
        for name, slot in self.ranges:
            lo[name], hi[name] = 0, INF if slot is None else shapes[slot[0]][slot[1]] - 1
        for d in self.dims:
            for name, _ in d.terms:
                lo.setdefault(name, -INF)
                hi.setdefault(name, INF)
        lo[index], hi[index] = at_least or 0, INF     # an output index: its own extent open
        for _ in range(_ROUNDS):
            before = (dict(lo), dict(hi))
            for d in self.dims:
                top = shapes[d.slot[0]][d.slot[1]] - 1
                for name, c in d.terms:
                    rest_lo: float = d.const
                    rest_hi: float = d.const
                    for other, e in d.terms:
                        if other != name:
                            ends = (e * lo[other], e * hi[other])
                            rest_lo, rest_hi = rest_lo + min(ends), rest_hi + max(ends)
                    _tighten(lo, hi, name, c, -rest_hi, top - rest_lo)
            if any(lo[n] > hi[n] for n in lo):
                return None
            if (lo, hi) == before:
                break
        return lo[index], hi[index]


@lru_cache(maxsize=4096)
def _bounds(term: TermReach, index: str) -> bool:
    """:meth:`TermReach.bounds`: the interval propagation of :meth:`TermReach._box` on
    which ends are finite only (every extent is finite), to its fixed point."""
    low = {name: True for name, _ in term.ranges}           # each from 0
    high = {name: slot is not None for name, slot in term.ranges}
    for d in term.dims:
        for name, _ in d.terms:
            low.setdefault(name, False)
            high.setdefault(name, False)
    low[index], high[index] = True, False
    changed = True
    while changed:
        changed = False
        for d in term.dims:
            for name, c in d.terms:     # -rest_hi <= c*name <= top - rest_lo
                rest_lo = all((low if e > 0 else high)[o] for o, e in d.terms if o != name)
                rest_hi = all((high if e > 0 else low)[o] for o, e in d.terms if o != name)
                lo, hi = (rest_hi, rest_lo) if c > 0 else (rest_lo, rest_hi)
                if (lo and not low[name]) or (hi and not high[name]):
                    low[name], high[name] = low[name] or lo, high[name] or hi
                    changed = True
    return high[index]


@lru_cache(maxsize=4096)
def _largest(term: TermReach, index: str, extents: tuple[int, ...]) -> int | None:
    shapes: dict[str, list[int]] = {}
    for (t, d), n in zip(term.slots, extents):
        dims = shapes.setdefault(t, [])
        dims.extend([0] * (d + 1 - len(dims)))
        dims[d] = n
    return term.search(index, {t: tuple(v) for t, v in shapes.items()})


def _tighten(lo: dict[str, float], hi: dict[str, float], name: str, c: int, a: float,
             b: float) -> None:
    """``name``'s interval within ``a <= c*name <= b`` (integers; an infinite end bounds
    nothing)."""
    if c < 0:
        a, b, c = -b, -a, -c
    if a != -INF:
        lo[name] = max(lo[name], -(int(-a) // c))
    if b != INF:
        hi[name] = min(hi[name], int(b) // c)


@dataclass(frozen=True)
class ArithmeticExtent:
    """An output index some term reads only inside affine access indices: the extent of the
    tensors that read it plainly (``plain``, None if none does), and the terms that reach
    further (:meth:`~spf.front.kernel_spec.Expr.reaches_beyond`)."""

    index: str
    terms: tuple[TermReach, ...]
    plain: Slot | None = None

    def extent(self, shapes: Shapes) -> int | None:
        """The extent (None: the accesses of a term do not bound the index, or nothing
        reads it): the largest point a term reaches (a term without a point reaches
        none), at least the plain extent."""
        reach = []
        for t in self.terms:
            top = t.largest(self.index, shapes)
            if top is None:
                return None
            reach.append(top + 1)
        if self.plain is not None:
            reach.append(shapes[self.plain[0]][self.plain[1]])
        return max(0, *reach) if reach else None


Source = Slot | ArithmeticExtent


@dataclass(frozen=True)
class ShapePlan:
    """Worked out once per kernel: pairs of input dimensions that must be equal, where
    each output extent comes from, the index type (whose largest value bounds an output
    extent) and how far the index arithmetic reaches."""

    agree: tuple[tuple[str, int, str, int], ...]
    out: tuple[Source, ...]
    index_type: str = "int32"
    reach: ArithmeticReach | None = None

    def disagree(self, shapes: Shapes) -> bool:
        return any(shapes[a][da] != shapes[b][db] for a, da, b, db in self.agree)

    def output_shape(self, shapes: Shapes, given: tuple[int, ...] | None = None,
                     output: str = "") -> tuple[int, ...]:
        """The output's extents (``given``: a passed output's shape, which sets those that
        some term reads only inside affine access indices); ArgumentError when one does not
        fit the index type."""
        shape = []
        for k, src in enumerate(self.out):
            if isinstance(src, ArithmeticExtent):
                n = given[k] if given is not None and k < len(given) else src.extent(shapes)
                if n is None:
                    why = f"{src.index!r} appears only inside index arithmetic whose " \
                        "accesses do not bound it" if src.terms else \
                        f"no tensor reads {src.index!r} plainly, and no term reading it " \
                        "inside index arithmetic reaches past the coordinates other terms read"
                    raise ArgumentError(
                        f"the extent of {output!r} along {src.index!r} is set by no input "
                        f"({why}): pass the output ({output}=array to a compiled kernel, "
                        "out=array to spf.evaluate)")
                if n > _INDEX_MAX[self.index_type]:
                    raise ArgumentError(
                        f"the output {output!r} would have extent {n} along {src.index!r} "
                        f"(the points its terms reach), more than index_type="
                        f"{self.index_type!r} holds (at most {_INDEX_MAX[self.index_type]})"
                        + ("; it needs index_type='int64'" if self.index_type == "int32"
                           else ""))
                shape.append(n)
            else:
                shape.append(shapes[src[0]][src[1]])
        if self.reach is not None:
            self.reach.check([*shape, *(n for s in shapes.values() for n in s)], output)
        return tuple(shape)

    def free(self) -> tuple[int, ...]:
        """The output dimensions whose extent a passed output may choose."""
        return tuple(k for k, s in enumerate(self.out) if isinstance(s, ArithmeticExtent))


_INDEX_MAX = {"int32": 2 ** 31 - 1, "int64": 2 ** 63 - 1}


@dataclass(frozen=True)
class ArithmeticReach:
    """How far a kernel's index arithmetic may reach, estimated with a wide margin as a
    multiple of the largest extent: its C computes loop bounds from the affine access
    indices in int64 (``3*y_n0 - 4294967298``), combining pairs of them (their coefficients
    multiply, and their number adds: ``growth``) with the extents and offsets (``offsets``:
    their sum); :meth:`check` refuses a call where that could pass
    :data:`~spf.front.kernel_spec.ARITHMETIC_LIMIT`."""

    growth: int
    offsets: int
    text: str

    def check(self, extents: Iterable[int], output: str) -> None:
        top = max(extents, default=0)
        reach = self.growth * (top + self.offsets + 1)
        if reach >= ARITHMETIC_LIMIT:
            raise ArgumentError(
                f"the index arithmetic of {self.text!r} may reach {reach} with extents up "
                f"to {top}, beyond 2^62, the most its generated C computes (in int64, with "
                f"room to combine bounds); {output!r} is not computed: use smaller offsets, "
                "strides or extents")


def arithmetic_reach(expr: Expr) -> ArithmeticReach | None:
    """The reach of ``expr``'s affine access indices (None without index arithmetic)."""
    affs = list(expr.derived.values())
    if not affs:
        return None
    strides = sorted((1 + sum(abs(c) for _, c in aff.terms) for aff in affs), reverse=True)
    return ArithmeticReach(math.prod(strides[:2]) * (len(affs) + 1),
                           sum(abs(a.const) for a in affs), expr.text)


def shape_plan(expr: Expr, index_type: str = "int32") -> ShapePlan:
    """Which input dimensions must have equal extents (every index read plainly, across the
    whole kernel: one range per index) and where each output extent comes
    from: a tensor reading the index plainly; for an index some term reads only inside
    index arithmetic (:attr:`~spf.front.kernel_spec.Expr.free_extents`), the smallest
    extent holding every point a term reaches (``C(i) = A(i) + B(i-10)``: 20 for A and B of
    10), where a term reading only tensors that other terms read plainly stays on their
    coordinates (a stencil ``x(i-1) - 2*x(i) + x(i+1)`` keeps x's extent)."""
    out_idx = expr.output.indices
    groups: dict[str, list[Slot]] = {}
    for product in expr.products():
        for acc in product.factors:
            derived = dict(acc.arithmetic)      # an access index computed: none to agree
            for dim, idx in enumerate(acc.indices):
                if idx not in derived:
                    groups.setdefault(idx, []).append((acc.tensor, dim))
    agree = tuple((*slots[0], *other) for slots in groups.values() for other in slots[1:])
    free = expr.free_extents
    out: list[Source] = []
    for i in out_idx:
        if i in groups and i not in free:
            out.append(groups[i][0])
            continue
        out.append(ArithmeticExtent(i, tuple(
            _term_reach(product, groups) for k, product in enumerate(expr.products())
            if expr.reaches_beyond(k, i)), groups[i][0] if i in groups else None))
    return ShapePlan(agree, tuple(out), index_type, arithmetic_reach(expr))


def _term_reach(product: Expr, groups: Mapping[str, list[Slot]]) -> TermReach:
    """The points of one term (``groups``: the slots reading each index plainly)."""
    dims = []
    for acc in product.factors:
        exprs = dict(acc.arithmetic)
        for dim, name in enumerate(acc.indices):
            aff = exprs.get(name)
            terms = ((name, 1),) if aff is None else \
                tuple((a, c) for a, c in aff.terms if isinstance(a, str))
            dims.append(Dim(terms, 0 if aff is None else aff.const, (acc.tensor, dim)))
    names = {n for d in dims for n, _ in d.terms}
    ranges = tuple((n, groups[n][0]) for n in sorted(names) if n in groups) + \
        tuple((n, None) for n in product.output.indices if n in names and n not in groups)
    return TermReach(tuple(dims), ranges)
