"""Scalar fields that a tensor's shape and its arrays' lengths determine.

A layout's shape (``["numRows", "numCols"]``) and its array extents (``idx = "int[len]"``,
``rowPtr = "int[numRows + 1]"``, ``colIdx = "int[numRows][K]"``) are equations between scalar
fields and numbers the caller already gave: the logical shape and the arrays.  Each equation
with one unknown scalar, in which that scalar appears linearly and outside index-array
reads, is solved; solving repeats until nothing new follows.  Nothing here knows a format.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..front import index_expr as ie
from ..front.layout import Layout
from ..front.terms import Aff


@dataclass(frozen=True)
class _Equation:
    unknowns: frozenset[str]        # scalar fields the left side uses (outside array reads)
    value: Callable[[Mapping[str, int]], int]
    target: int
    source: str                     # what fixes the target, for messages


def derive_scalar_fields(layout: Layout, shape: Sequence[int],
                         fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` with every scalar field the shape or an array length determines filled in;
    ArgumentError naming both values when a given scalar disagrees with a derived one."""
    equations = _shape_equations(layout, shape) + _length_equations(layout, fields)
    derived: dict[str, tuple[int, str]] = {}
    progress = True
    while progress:
        progress = False
        for eq in equations:
            open_ = eq.unknowns - derived.keys()
            if len(open_) != 1:
                continue
            (name,) = open_
            value = _solve(eq, name, {k: v for k, (v, _) in derived.items()})
            if value is not None:
                derived[name] = (value, eq.source)
                progress = True
    out = dict(fields)
    for name, (value, source) in derived.items():
        if name not in fields:
            out[name] = value
            continue
        given = fields[name]
        if isinstance(given, (int, np.integer)) and not isinstance(given, (bool, np.bool_)) \
                and int(given) != value:
            raise ArgumentError(f"{layout.name} tensor: {name} = {int(given)} was given, but "
                                f"{source} gives {name} = {value}")
    return out


def _shape_equations(layout: Layout, shape: Sequence[int]) -> list[_Equation]:
    if len(shape) != len(layout.shape):
        return []
    scalars = set(layout.scalar_fields)
    out = []
    for d, (aff, n) in enumerate(zip(layout.shape, shape)):
        names = {atom for atom, _ in aff.terms if isinstance(atom, str)} & scalars
        out.append(_Equation(frozenset(names), _aff_value(aff), int(n),
                             f"the shape (dimension {d} is {int(n)})"))
    return out


def _aff_value(aff: Aff) -> Callable[[Mapping[str, int]], int]:
    return lambda env: aff.evaluate(env)


def _length_equations(layout: Layout, fields: Mapping[str, Any]) -> list[_Equation]:
    scalars = set(layout.scalar_fields)
    out = []
    for spec in layout.fields.values():
        value = fields.get(spec.name)
        if not spec.is_array or value is None or isinstance(value, (int, float)):
            continue
        try:
            arr_shape = np.shape(value)
        except (ValueError, TypeError):     # not an array: validation says so
            continue
        if len(arr_shape) == len(spec.dims) > 1:
            parts = [(d, n, f"dimension {k} of {spec.name!r} ({n})")
                     for k, (d, n) in enumerate(zip(spec.dims, arr_shape))]
        else:
            total = spec.dims[0]
            for d in spec.dims[1:]:
                total = ie.BinOp("*", total, d)
            size = int(np.prod(arr_shape))
            parts = [(total, size, f"the length of {spec.name!r} ({size})")]
        for expr, n, source in parts:
            inside_reads = set().union(*(ie.names(a) for c in ie.calls(expr) for a in c.args))
            names = (ie.names(expr) & scalars) - inside_reads
            if names:
                out.append(_Equation(frozenset(names), _iexpr_value(expr), int(n), source))
    return out


def _iexpr_value(expr: ie.IExpr) -> Callable[[Mapping[str, int]], int]:
    return lambda env: ie.evaluate(expr, env, {})


def _solve(eq: _Equation, name: str, known: Mapping[str, int]) -> int | None:
    """The value of ``name`` making ``eq`` hold when the left side is linear in it (probed at
    four points), else None."""
    try:
        f = [eq.value({**known, name: v}) for v in range(4)]
    except (KeyError, IndexError, ValueError):
        return None
    slope = f[1] - f[0]
    if slope == 0 or any(f[v] != f[0] + v * slope for v in range(4)):
        return None
    value, rest = divmod(eq.target - f[0], slope)
    return value if rest == 0 and value >= 0 else None
