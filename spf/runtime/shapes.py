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

from ..errors import ArgumentError
from ..front.kernel_spec import ARITHMETIC_LIMIT, Expr

Slot = tuple[str, int]   # (tensor, dimension)
Shapes = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class Bound:
    """``0 <= coeff*i + sum(c*v) + const < extent(slot)`` for one affine access index, each
    other index ``v`` in ``[0, extent(its slot))``."""

    slot: Slot
    coeff: int
    rest: tuple[tuple[int, Slot], ...]
    const: int

    def largest(self, shapes: Shapes) -> int:
        """The largest ``i`` the bound allows, by interval arithmetic on ``[0, extent - 1]``
        (the usual sizes when a range is empty: a full convolution of n and 0 elements has
        n - 1)."""
        lo = -self.const
        hi = shapes[self.slot[0]][self.slot[1]] - 1 - self.const
        for c, (tensor, dim) in self.rest:
            top = c * (shapes[tensor][dim] - 1)
            lo, hi = lo - max(top, 0), hi - min(top, 0)
        return hi // self.coeff if self.coeff > 0 else lo // self.coeff


@dataclass(frozen=True)
class ArithmeticExtent:
    """An output index some term reads only inside affine access indices: the extent of the
    tensors that read it plainly (``plain``, None if none does), and per term that reaches
    further, the bounds its accesses give (``None``: a term no input bounds)."""

    index: str
    terms: tuple[tuple[Bound, ...] | None, ...]
    plain: Slot | None = None

    def extent(self, shapes: Shapes) -> int | None:
        if any(t is None for t in self.terms):
            return None
        reach = [min(b.largest(shapes) for b in t) + 1 for t in self.terms if t is not None]
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
                    raise ArgumentError(
                        f"the extent of {output!r} along {src.index!r} is set by no input "
                        f"({src.index!r} appears only inside index arithmetic with indices "
                        f"no input bounds): pass the output ({output}=array to a compiled "
                        "kernel, out=array to spf.evaluate)")
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
    """Which input dimensions must have equal extents (an output index across the whole
    kernel, another index within one term of a sum) and where each output extent comes
    from: a tensor reading the index plainly; for an index some term reads only inside
    index arithmetic (:attr:`~spf.front.kernel_spec.Expr.free_extents`), the smallest
    extent holding every point a term reaches (``C(i) = A(i) + B(i-10)``: 20 for A and B of
    10), where a term reading only tensors that another term reads plainly stays on their
    coordinates (a stencil ``x(i-1) - 2*x(i) + x(i+1)`` keeps x's extent)."""
    out_idx = expr.output.indices
    groups: dict[object, list[Slot]] = {}
    for k, product in enumerate(expr.products()):
        for acc in product.factors:
            for dim, idx in enumerate(acc.indices):
                key = idx if idx in out_idx else (k, idx)
                groups.setdefault(key, []).append((acc.tensor, dim))
    agree = tuple((*slots[0], *other) for slots in groups.values() for other in slots[1:])
    free = expr.free_extents
    out: list[Source] = []
    for i in out_idx:
        if i in groups and i not in free:
            out.append(groups[i][0])
            continue
        plain = {expr.original(t) for t, _ in groups.get(i, [])}
        out.append(ArithmeticExtent(i, tuple(
            _term_bounds(expr, k, product, i, groups) for k, product in
            enumerate(expr.products()) if _extends(expr, product, i, plain)),
            groups[i][0] if i in groups else None))
    return ShapePlan(agree, tuple(out), index_type, arithmetic_reach(expr))


def _extends(expr: Expr, product: Expr, index: str, plain: set[str]) -> bool:
    """Whether the term ``product`` may reach points of ``index`` beyond the extent of the
    tensors that read it plainly (``plain``): it reads ``index`` only inside index
    arithmetic, and of tensors no term reads plainly (a term without ``index`` is the same
    along it: it fills the extent the others set)."""
    reading = [a for a in product.factors
               if any(index in aff.names() for _, aff in a.arithmetic)]
    return bool(reading) and not any(index in a.indices for a in product.factors) \
        and not any(expr.original(a.tensor) in plain for a in reading)


def _term_bounds(expr: Expr, k: int, product: Expr, index: str,
                 groups: Mapping[object, list[Slot]]) -> tuple[Bound, ...] | None:
    """The bounds one term's affine access indices put on ``index`` (None: none that the
    inputs' extents bound)."""
    bounds = []
    for acc in product.factors:
        for dim, name in enumerate(acc.indices):
            aff = dict(acc.arithmetic).get(name)
            if aff is None or aff.coeff(index) == 0:
                continue
            rest = []
            for atom, c in aff.terms:
                if atom == index:
                    continue
                slots = groups.get(atom if atom in expr.output.indices else (k, atom))
                if not slots:
                    break
                rest.append((c, slots[0]))
            else:
                bounds.append(Bound((acc.tensor, dim), aff.coeff(index), tuple(rest),
                                    aff.const))
    return tuple(bounds) or None
