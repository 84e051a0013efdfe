"""A tensor's fields checked against its layout: types, extents, shape, properties.

What a layout says about its fields is checked here, array by array, with numpy (a property
by its kind, :meth:`spf.front.properties.Property.check`); what only the layout's relation
says (every read generated code makes is in bounds, periodic monotonicity) is checked by
generated code, :mod:`spf.read_check`.  The checks of single values that tensors and operands
share (integers, values exactly a float64, index widths) are here too.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..front import index_expr as ie
from ..front.layout import INDEX_TYPE, Layout, wider_hint
from ..front.properties import Property, Range
from ..front.value_types import ValueType
from .scalar_fields import derive_scalar_fields

VALUE_DTYPE = np.float64
_VALUE = np.dtype(VALUE_DTYPE)


def index_max(layout: Layout) -> int:
    """The largest value of ``layout``'s index type (``int32`` or ``int64``)."""
    return _INDEX_MAX[layout.index_type]


_INDEX_MAX = {width: int(np.iinfo(width).max) for width in ("int32", "int64")}


def as_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints; ArgumentError when it is not one."""
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
            for n in shape):
        raise ArgumentError(f"a shape is a tuple of integers, got {shown(shape)}")
    if any(n < 0 for n in shape):
        raise ArgumentError(f"shape {tuple(shape)} has a negative extent")
    return tuple(int(n) for n in shape)


def shown(value: Any) -> str:
    """``value`` for a message: an array by its shape and dtype, anything else by repr (cut)."""
    if isinstance(value, np.ndarray) and value.ndim:
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_array(where: str, name: str, value: Any) -> np.ndarray:
    """``value`` as a numpy array; ArgumentError when numpy cannot read it as one (ragged
    nested lists, say)."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ArgumentError(f"{where}{name!r} cannot be read as an array: {exc}") from None


def position(name: str, flat: int, shape: tuple[int, ...]) -> str:
    """``name[i][j]``: the element at row-major position ``flat`` of an array of ``shape``."""
    index = np.unravel_index(flat, shape) if len(shape) > 1 else (flat,)
    return name + "".join(f"[{int(k)}]" for k in index)


def check_integers(where: str, what: str, name: str, arr: np.ndarray) -> None:
    """Index and coordinate arrays hold integers of an integer dtype, as numpy's own index
    arrays do: a float array is refused even when its values are whole (the message names
    the first one that is not)."""
    if not arr.size or arr.dtype.kind in "iu":
        return
    detail = ""
    if arr.dtype.kind == "f":
        flat = arr.reshape(-1)
        with np.errstate(invalid="ignore"):
            fraction = ~np.isfinite(flat) | (flat != np.round(flat))
        if fraction.any():
            k = int(np.flatnonzero(fraction)[0])
            detail = f": {position(name, k, arr.shape)} = {flat[k]} is not an integer"
        else:
            detail = "; convert it with .astype(np.int64)"
    raise ArgumentError(f"{where}{what} must hold integers, got dtype {arr.dtype}{detail}")


def _check_fits(layout: Layout, field: str, arr: np.ndarray) -> None:
    """Every value of the integer array ``arr`` fits the field's index type."""
    width = layout.dtype_of(field) if field in layout.fields else layout.index_type
    top = _INDEX_MAX[width]
    if not arr.size or np.can_cast(arr.dtype, np.dtype(width), "safe"):
        return
    flat = arr.reshape(-1)
    if int(flat.max()) <= top and (arr.dtype.kind == "u" or int(flat.min()) >= -top - 1):
        return
    bad = flat > top if arr.dtype.kind == "u" else (flat < -top - 1) | (flat > top)
    k = int(np.flatnonzero(bad)[0])
    value = int(flat[k])
    hint = wider_hint(width)
    if value > _INDEX_MAX["int64"]:    # only an unsigned array gets here
        hint = (f" (as a signed 64-bit integer it is {value - 2 ** 64}: a negative value "
                "stored in an unsigned array? pass signed integers)")
    raise ArgumentError(f"{layout.name} tensor: {position(field, k, arr.shape)} = {value} "
                        f"does not fit index_type={width!r} (at most {top}){hint}")


_EXACT = 2 ** 53     # every integer of at most this magnitude is a float64


def check_exact(where: str, name: str, arr: np.ndarray) -> None:
    """ArgumentError unless ``arr`` holds real numbers that convert to float64, the type spf
    computes in, without change (integers beyond 2**53 and extended-precision floats may
    not); ``where`` starts the message, ``name`` is the array's."""
    if arr.size and arr.dtype.kind not in "biuf":
        raise ArgumentError(f"{where}value array {name!r} must be real numbers, got dtype "
                            f"{arr.dtype}")
    if not arr.size or arr.dtype.itemsize < 8 or arr.dtype == _VALUE or arr.dtype.kind == "b":
        return
    flat = arr.reshape(-1)
    if arr.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            lossy = (flat.astype(_VALUE).astype(arr.dtype) != flat) & ~np.isnan(flat)
    else:
        lossy = _inexact_integers(flat)
    if lossy.any():
        k = int(np.flatnonzero(lossy)[0])
        raise ArgumentError(f"{where}{position(name, k, arr.shape)} = {flat[k]} "
                            f"({arr.dtype}) is not exactly a float64, the type spf computes "
                            f"in (it would become {float(flat[k])!r}); convert the values to "
                            "float64 first to accept the rounding")


def implicit_values(layout: Layout, coords: Sequence[np.ndarray], values: np.ndarray,
                    structure: bool, what: str) -> np.ndarray:
    """The values a tensor in ``layout`` holds for entries at ``coords`` given ``values``:
    as given for a valued layout; a pattern layout's constant where every given value is it
    (or ``structure``: the entries' positions are what is asked for), else ArgumentError
    naming the first entry (row-major) that differs (``what``: where they come from)."""
    constant = layout.implicit
    if constant is None:
        if structure:
            raise ArgumentError(f"{what}: structure=True stores only the entries' positions, "
                                f"in a pattern layout; {layout.name} stores values "
                                f"({layout.value})")
        return values
    ones = np.full(len(values), constant, layout.value_type.dtype)
    if structure:
        return ones
    differ = np.flatnonzero(~(np.asarray(values) == constant))      # nan differs too
    if len(differ):
        first = differ[np.lexsort([np.asarray(c)[differ] for c in reversed(coords)])[0]] \
            if len(coords) else differ[0]
        at = ", ".join(str(int(c[first])) for c in coords)
        raise ArgumentError(f"{what}: entry ({at}) holds {values[first].item()!r}, but "
                            f"{layout.name} is a pattern layout: every entry it stores holds "
                            f"{layout.value} (it stores no values); pass structure=True to "
                            "store the entries' positions only")
    return ones


def check_cast(where: str, name: str, arr: np.ndarray, vt: ValueType) -> None:
    """ArgumentError unless ``arr`` converts to ``vt`` without change (numpy's ``same_kind``
    casting, and every value kept: no integer beyond what a float holds exactly, no float
    rounded to a narrower one); float64 keeps :func:`check_exact`'s messages."""
    if vt.is_float64:
        check_exact(where, name, arr)
        return
    if arr.dtype == vt.dtype or not arr.size:
        return
    if arr.dtype.kind not in "biufc" or not np.can_cast(arr.dtype, vt.dtype, "same_kind"):
        raise ArgumentError(f"{where}value array {name!r} has dtype {arr.dtype}, which does not "
                            f"convert to {vt.name} (numpy's same_kind casting); convert it "
                            "first, or give dtype=")
    flat = arr.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        back = flat.astype(vt.dtype).astype(arr.dtype)
        lossy = (back != flat) & (flat == flat)
    if lossy.any():
        k = int(np.flatnonzero(lossy)[0])
        raise ArgumentError(f"{where}{position(name, k, arr.shape)} = {flat[k]} ({arr.dtype}) "
                            f"is not exactly a {vt.name}; convert the values first to accept "
                            "the change")


def _inexact_integers(flat: np.ndarray) -> np.ndarray:
    """Which of the 64-bit integers ``flat`` float64 does not hold exactly: some beyond
    2**53 in magnitude (2**60 is exact, 2**53 + 1 is not)."""
    if int(flat.max()) <= _EXACT and int(flat.min()) >= -_EXACT:
        return np.zeros(0, dtype=bool)
    far = flat > _EXACT if flat.dtype.kind == "u" else (flat > _EXACT) | (flat < -_EXACT)
    at = np.flatnonzero(far)
    near = flat[at].astype(_VALUE)
    fits = near < float(np.iinfo(flat.dtype).max) + 1.0     # 2**63 or 2**64: exact
    fits[fits] = near[fits].astype(flat.dtype) == flat[at][fits]
    far[at[fits]] = False
    return far


@dataclass(frozen=True)
class _ArrayField:
    """One array field of a layout, as checking needs it."""

    name: str
    is_index: bool
    dims: tuple[ie.IExpr, ...]
    extents: tuple[ie.Evaluator, ...]     # each dimension's extent from scalars and arrays

    def declared(self) -> str:
        """The extents as the layout writes them: ``rowPtr(numRows)][2``."""
        return "][".join(ie.text(d) for d in self.dims)


@dataclass(frozen=True)
class _Plan:
    """What checking a layout's fields needs, worked out once per layout."""

    scalars: tuple[str, ...]
    arrays: tuple[_ArrayField, ...]


@cache
def _plan(layout: Layout) -> _Plan:
    arrays = tuple(_ArrayField(spec.name, spec.ctype == INDEX_TYPE, spec.dims,
                               tuple(ie.compiled(d) for d in spec.dims))
                   for spec in layout.fields.values() if spec.is_array)
    return _Plan(tuple(layout.scalar_fields), arrays)


def check_fields(layout: Layout, shape: tuple[int, ...], fields: Mapping[str, Any],
                 check_properties: bool = True,
                 proven: frozenset[Property] = frozenset()) -> dict[str, Any]:
    """``fields`` converted and checked against the layout: types, extents (dimension by
    dimension), shape and properties (but those in ``proven``; none without
    ``check_properties``).  The bounds of the reads generated code makes are checked by
    generated code (:mod:`spf.read_check`), on what this returns."""
    plan = _plan(layout)
    fields = with_derived(layout, fields)
    if any(f not in fields for f in plan.scalars):
        fields = derive_scalar_fields(layout, shape, fields)
    if len(fields) != len(layout.fields) or any(f not in fields for f in layout.fields):
        _missing_or_extra(layout, fields)
    scalars = {f: _scalar(layout, f, fields[f]) for f in plan.scalars}
    given = {a.name: _array(layout, a.name, a.is_index, fields[a.name]) for a in plan.arrays}
    arrays = {name: arr.reshape(-1) for name, arr in given.items()}
    for a in plan.arrays:
        _check_extents(layout, a, given[a.name].shape, scalars, arrays)
    logical = tuple(s.evaluate(scalars) for s in layout.shape)
    if logical != tuple(shape):
        raise ArgumentError(f"{layout.name} tensor: fields describe shape {logical}, expected "
                            f"{shape}")
    out = {f: scalars[f] if f in scalars else arrays[f] for f in layout.fields}
    if check_properties:
        _check_properties(layout, scalars, arrays, proven)
    return out


def _check_extents(layout: Layout, a: _ArrayField, shape: tuple[int, ...],
                   scalars: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> None:
    """An array given with one dimension per declared extent must match them one by one; a
    1-D array is the same data flattened (row-major) and must match their product."""
    try:
        extents = tuple(extent(scalars, arrays) for extent in a.extents)
    except (IndexError, ValueError) as exc:
        raise ArgumentError(f"{layout.name} tensor: cannot size {a.name!r}: {exc}") from None
    if shape == extents:
        return
    total = math.prod(extents)
    if len(shape) == 1 and len(extents) > 1 and shape[0] == total:
        return
    if len(shape) == 1:
        raise ArgumentError(f"{layout.name} tensor: {a.name!r} has {shape[0]} elements but "
                            f"its extent [{a.declared()}] is {total}")
    many = len(extents) > 1
    raise ArgumentError(f"{layout.name} tensor: {a.name!r} has shape {shape} but its "
                        f"extent{'s' if many else ''} [{a.declared()}] "
                        f"{'are' if many else 'is'} {extents if many else extents[0]}")


def _missing_or_extra(layout: Layout, fields: Mapping[str, Any]) -> None:
    missing = [f for f in layout.fields if f not in fields]
    if missing:
        raise ArgumentError(f"{layout.name} tensor: missing field(s) {missing}")
    extra = [f for f in fields if f not in layout.fields]
    raise ArgumentError(f"{layout.name} tensor: unknown field(s) {extra}; fields are "
                        f"{list(layout.fields)}")


def with_derived(layout: Layout, fields: Mapping[str, Any]) -> Mapping[str, Any]:
    """``fields`` with the layout's derived fields (``[derived]``) computed from their sources,
    or the sources from the fields when only those are given; ArgumentError when both are
    given and disagree, or a field no source gives."""
    if not layout.derived or not all(d.field in fields or d.source in fields
                                     for d in layout.derived.values()):
        return fields
    out = dict(fields)
    where = f"{layout.name} tensor: "
    for d in layout.derived.values():
        given = _array(layout, d.field, True, out[d.field]).reshape(-1) \
            if d.field in out else None
        if d.source in out:
            made = d.compute(_array(layout, d.source, True, out[d.source]).reshape(-1))
            if given is None:
                out[d.field] = _narrowed(layout, d.field, made)
            elif given.shape != made.shape or (given != made).any():
                at = int(np.flatnonzero(given != made)[0]) if given.shape == made.shape \
                    else "its length"
                raise ArgumentError(f"{where}{d.field} must be {d.text()} (derived); it "
                                    f"differs at {at}")
        else:
            assert given is not None
            source = d.invert(given)
            if source is None:
                raise ArgumentError(f"{where}{d.field} is derived as {d.text()}, so it starts "
                                    f"at 0 and grows by multiples of {d.scale}; got "
                                    f"{shown(given)}")
            out[d.source] = _narrowed(layout, d.source, source)
    return out


def _narrowed(layout: Layout, field: str, arr: np.ndarray) -> np.ndarray:
    """A derived int64 array in the field's dtype (ArgumentError when a value does not fit)."""
    _check_fits(layout, field, arr)
    return arr.astype(layout.dtype_of(field))


def _scalar(layout: Layout, field: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{layout.name} tensor: scalar field {field!r} must be an integer, "
                            f"got {shown(value)}")
    top = index_max(layout)
    if not 0 <= int(value) <= top:
        raise ArgumentError(f"{layout.name} tensor: {field} = {value} is outside 0..{top} "
                            f"(index_type={layout.index_type!r}){wider_hint(layout.index_type)}")
    return int(value)


def _array(layout: Layout, field: str, is_index: bool, value: Any) -> np.ndarray:
    """``value`` as a C-contiguous array of the field's type in the shape given (a copy only
    if needed); ArgumentError when that conversion would change a value."""
    where = f"{layout.name} tensor: "
    arr = as_array(where, field, value)
    if arr.ndim == 0:
        raise ArgumentError(f"{where}{field!r} is an array field; got {shown(value)}")
    if is_index:
        dtype = np.dtype(layout.dtype_of(field) if field in layout.fields
                         else layout.index_type)
        check_integers(where, f"index array {field!r}", field, arr)
        _check_fits(layout, field, arr)
    else:
        dtype = layout.value_type.dtype
        check_cast(where, field, arr, layout.value_type)
    if arr.dtype != dtype or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr, dtype=dtype)
    return arr


def _check_properties(layout: Layout, scalars: Mapping[str, int],
                      arrays: Mapping[str, np.ndarray], proven: frozenset[Property]) -> None:
    """Check the properties but those ``proven``, each by its kind
    (:meth:`spf.front.properties.Property.check`; periodic monotonicity is checked by
    generated code, :mod:`spf.read_check`)."""
    read = layout.read_arrays
    for prop in layout.properties:
        if isinstance(prop, Range) and prop.uf in read:
            continue        # on the slots the relation reads, by spf.read_check
        if not (proven and prop in proven):
            prop.check(arrays, scalars, layout.name)
