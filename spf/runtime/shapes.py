"""Shapes at a call: which input extents must agree, and the output's extents.

An output index that some input reads plainly takes that input's extent.  One that the
inputs read only inside affine access indices (``O(i) = I(i-k) * F(k)``) takes the smallest
extent holding every point a term can reach: ``0 <= i - k < n_I`` and ``0 <= k < n_F`` give
``i <= n_I + n_F - 2`` (the full convolution); a passed output may be smaller or larger (the
points outside it are not in the iteration space).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ArgumentError
from ..front.kernel_spec import Expr

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
    """An output index the inputs read only inside affine access indices: per term, the
    bounds its accesses give (``None``: a term no input bounds)."""

    index: str
    terms: tuple[tuple[Bound, ...] | None, ...]

    def extent(self, shapes: Shapes) -> int | None:
        if any(t is None for t in self.terms):
            return None
        return max(0, max(min(b.largest(shapes) for b in t) + 1
                          for t in self.terms if t is not None))


Source = Slot | ArithmeticExtent


@dataclass(frozen=True)
class ShapePlan:
    """Worked out once per kernel: pairs of input dimensions that must be equal, and where
    each output extent comes from."""

    agree: tuple[tuple[str, int, str, int], ...]
    out: tuple[Source, ...]

    def disagree(self, shapes: Shapes) -> bool:
        return any(shapes[a][da] != shapes[b][db] for a, da, b, db in self.agree)

    def output_shape(self, shapes: Shapes, given: tuple[int, ...] | None = None,
                     output: str = "") -> tuple[int, ...]:
        """The output's extents (``given``: a passed output's shape, which sets those that
        only affine access indices bound)."""
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
                shape.append(n)
            else:
                shape.append(shapes[src[0]][src[1]])
        return tuple(shape)

    def free(self) -> tuple[int, ...]:
        """The output dimensions whose extent a passed output may choose."""
        return tuple(k for k, s in enumerate(self.out) if isinstance(s, ArithmeticExtent))


def shape_plan(expr: Expr) -> ShapePlan:
    """Which input dimensions must have equal extents (an output index across the whole
    kernel, another index within one term of a sum) and where each output extent comes
    from."""
    out_idx = expr.output.indices
    groups: dict[object, list[Slot]] = {}
    for k, product in enumerate(expr.products()):
        for acc in product.factors:
            for dim, idx in enumerate(acc.indices):
                key = idx if idx in out_idx else (k, idx)
                groups.setdefault(key, []).append((acc.tensor, dim))
    agree = tuple((*slots[0], *other) for slots in groups.values() for other in slots[1:])
    out: list[Source] = []
    for i in out_idx:
        if i in groups:
            out.append(groups[i][0])
        else:
            out.append(ArithmeticExtent(i, tuple(_term_bounds(expr, k, product, i, groups)
                                                  for k, product in
                                                  enumerate(expr.products()))))
    return ShapePlan(agree, tuple(out))


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
