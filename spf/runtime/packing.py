"""Packing entries with a layout's reference packer: the Python file a layout names.

A packer is ``pack(shape, coords, values, params)`` returning the layout's fields (optionally
``pack_dense(array, params)`` too); it is loaded once per file.  The entries it gets are
checked first (integer coordinates within the shape, values exactly float64) and their
duplicates summed, so a packer only arranges them.  The fields it returns are checked like any
others when the tensor is built, then read back through the layout's relation (generated code,
O(entries)): a packer that disagrees with its relation is refused, never trusted.
"""
from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError, SpecError
from ..front import index_expr as ie
from ..front.layout import Layout
from ..front.layout_file import layout_error
from ..front.value_types import ValueType
from ..front.writing import entry_filters, write_plan
from .fields import (
    as_array,
    check_cast,
    check_integers,
    implicit_values,
    index_max,
    position,
    shown,
    wider_hint,
)
from .stored import StoredTensor, tensor_class
from .writer import check_shape, read_back, refuse_excluded, written

_INT64_MAX = int(np.iinfo(np.int64).max)


@cache
def _packer(spec: str) -> tuple[ModuleType, str]:
    """The module of the packer ``path[:function]``, loaded once, and its function's name."""
    path, _, func = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location(f"spf_packer_{abs(hash(path))}", path)
    if module_spec is None or module_spec.loader is None:
        raise ArgumentError(f"packer {path!r} is not a Python file (a .py file defining "
                            f"{func or 'pack'})")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:        # a packer file that does not load
        raise SpecError(f"packer file cannot be loaded: {type(exc).__name__}: {exc}",
                        path) from exc
    return module, func or "pack"


def packed(layout: Layout, shape: tuple[int, ...], coords: Any, values: Any,
           structure: bool = False) -> StoredTensor:
    """A tensor of ``shape`` in ``layout`` holding the entries (coordinate arrays, one per
    dimension, in any order, and their values; duplicates are summed first), stored by the
    layout's packer or, without one, written as its relation says, checked, and read back
    through its relation.  ArgumentError for entries that are not coordinates and values
    within ``shape`` or that the layout cannot hold (a value other than a pattern layout's
    constant, unless ``structure``: see :func:`~.fields.implicit_values`); SpecError (at
    the layout file's ``packer``) when the packer stores something its relation does not
    read back as given."""
    if len(shape) != layout.order:
        raise ArgumentError(f"layout {layout.name} stores order-{layout.order} tensors, "
                            f"got shape {shape}")
    if any(n > index_max(layout) for n in shape):
        raise ArgumentError(f"shape {shape} does not fit index_type={layout.index_type!r} "
                            f"(at most {index_max(layout)}){wider_hint(layout.index_type)}")
    check_shape(layout, shape)
    arrays, data = _sum_duplicates(*_entries(f"{layout.name} tensor: ", shape, coords, values,
                                             layout.value_type), shape)
    data = implicit_values(layout, arrays, data, structure, f"{layout.name} tensor")
    refuse_excluded(layout, shape, arrays)
    if not layout.packer:
        t = _written(layout, shape, arrays, data)
    else:
        module, func = _packer(layout.packer)
        try:
            fields = getattr(module, func)(shape, tuple(arrays), data, dict(layout.params))
        except ValueError as exc:   # the packer cannot store this tensor
            raise ArgumentError(f"layout {layout.name} cannot store this tensor: {exc}") \
                from None
        except Exception as exc:    # the packer is the layout's code
            raise _failed(layout, func, exc) from exc
        t = _checked(layout, shape, fields)
        diff, read, given = read_back(t, arrays, data)
        if diff is not None:
            raise _disagreement(layout, f"{given} entries given, {read} read back; {diff}")
    t.source_entries = len(data)
    return t


def _checked(layout: Layout, shape: tuple[int, ...], fields: Any) -> StoredTensor:
    """The tensor of the fields a packer returned, checked like any; fields that fail the
    checks of the packer's own layout are the packer's and its relation's disagreement
    (values beyond the index type stay the caller's: a wider one stores them)."""
    try:
        return tensor_class()(layout, shape, fields)   # its read check: within the shape
    except ArgumentError as exc:
        if "index_type=" in str(exc):
            raise
        assert layout.packer is not None
        raise layout_error(layout, f"layout {layout.name}: its packer "
                           f"{Path(layout.packer.split(':')[0]).name} stores fields that fail "
                           f"the layout's own checks ({exc}): the packer and the layout file "
                           "disagree", "packer") from None


def _failed(layout: Layout, func: str, exc: BaseException) -> SpecError:
    """The error of a packer that raised (its own bug, or one its layout file's keys cause)."""
    assert layout.packer is not None
    return layout_error(layout, f"layout {layout.name}: its packer "
                        f"{Path(layout.packer.split(':')[0]).name} failed in {func}: "
                        f"{type(exc).__name__}: {exc}", "packer")


def _disagreement(layout: Layout, what: str) -> SpecError:
    """The error of a packer whose fields its layout's relation reads differently."""
    assert layout.packer is not None
    return layout_error(layout, f"layout {layout.name}: its packer "
                        f"{Path(layout.packer.split(':')[0]).name} "
                        "stores fields that its relation does not read back as the entries "
                        f"it was given ({what}): the packer and the relation disagree",
                        "packer")


def _written(layout: Layout, shape: tuple[int, ...], arrays: Any, data: np.ndarray
             ) -> StoredTensor:
    """A tensor of a layout without a packer, written as its relation says."""
    try:
        plan = write_plan(layout)
    except SpecError as e:
        raise ArgumentError(f"layout {layout.name} has no packer and {e.detail}; build it "
                            "with from_arrays") from None
    return written(plan, shape, arrays, data)


def packed_dense(layout: Layout, array: np.ndarray) -> StoredTensor | None:
    """A tensor of ``array`` stored by ``layout``'s packer's ``pack_dense``, checked and read
    back through the layout's relation; None when the packer has none."""
    if not layout.packer:
        return None
    module, _ = _packer(layout.packer)
    if not hasattr(module, "pack_dense"):
        return None
    check_shape(layout, array.shape)
    if entry_filters(layout):
        refuse_excluded(layout, array.shape, np.nonzero(array))
    try:
        fields = module.pack_dense(array, dict(layout.params))
    except Exception as exc:        # the packer is the layout's code
        raise _failed(layout, "pack_dense", exc) from exc
    t = _checked(layout, array.shape, fields)
    read = _densely(t)
    if _same_memory(read, array):
        return t            # the packer stored the array itself where the relation reads it
    if read.shape != array.shape or not np.array_equal(read, array, equal_nan=True):
        at = np.argwhere(~((read == array) | ((read != read) & (array != array))))[0] \
            if read.shape == array.shape else None
        raise _disagreement(layout, f"shape {array.shape} read back as {read.shape}"
                            if at is None else f"entry {tuple(int(x) for x in at)}: value "
                            f"{array[tuple(at)].item()!r}, read back {read[tuple(at)].item()!r}")
    return t


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same elements (same buffer, shape, strides, type)."""
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype \
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def _densely(t: StoredTensor) -> np.ndarray:
    """``t`` as a dense array, as its relation reads it: the field a ``dense_array`` names when
    its declared extents are the shape (the layout file's check made the relation say the
    field is the tensor in row-major order), else by the generated dense copy."""
    lay = t.layout
    if lay.dense_array is not None:
        scalars = {f: int(t.fields[f]) for f in lay.scalar_fields}
        arrays = {f: np.asarray(t.fields[f]).reshape(-1) for f in lay.index_arrays}
        dims = tuple(ie.evaluate(d, scalars, arrays) for d in lay.fields[lay.dense_array].dims)
        if dims == tuple(t.shape):
            return np.asarray(t.fields[lay.dense_array]).reshape(dims)
    return t.to_dense()


def _entries(where: str, shape: tuple[int, ...], coords: Any, values: Any,
             vt: ValueType) -> tuple[list[np.ndarray], np.ndarray]:
    """The coordinate arrays as flat int64 arrays and the values as flat ``vt``, checked:
    one coordinate array per dimension, each as long as the values and within the shape."""
    if not isinstance(coords, (list, tuple, np.ndarray)):
        raise ArgumentError(f"{where}coords must be one coordinate array per dimension, "
                            f"got {shown(coords)}")
    arrays = [_coordinate_array(where, d, c) for d, c in enumerate(coords)]
    given = as_array(where, "values", values)
    check_cast(where, "values", given, vt)
    data = np.asarray(given, dtype=vt.dtype).reshape(-1)
    if len(arrays) != len(shape) or any(len(c) != len(data) for c in arrays):
        raise ArgumentError("need one coordinate array per dimension, each as long as values")
    for d, (c, n) in enumerate(zip(arrays, shape)):
        if len(c) and (c.min() < 0 or c.max() >= n):
            bad = int(np.flatnonzero((c < 0) | (c >= n))[0])
            raise ArgumentError(f"coordinate {int(c[bad])} of entry {bad} in dimension {d} "
                                f"is outside 0..{n - 1}")
    return arrays, data


def _coordinate_array(where: str, d: int, value: Any) -> np.ndarray:
    """Coordinate array ``d`` of ``from_coords`` as flat int64 (integers only, none lost)."""
    name = f"coords[{d}]"
    arr = as_array(where, name, value)
    check_integers(where, f"coordinate array {d}", name, arr)
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > _INT64_MAX:
        k = int(np.argmax(arr.reshape(-1)))
        raise ArgumentError(f"{where}{position(name, k, arr.shape)} = {int(arr.reshape(-1)[k])}"
                            " is not a coordinate (beyond int64)")
    return arr.astype(np.int64).reshape(-1)


def _sum_duplicates(coords: list[np.ndarray], values: np.ndarray,
                    shape: tuple[int, ...]) -> tuple[list[np.ndarray], np.ndarray]:
    """Sum entries with equal coordinates, keeping first-occurrence order."""
    if len(values) < 2:
        return coords, values
    key = np.ravel_multi_index(coords, shape) if shape else np.zeros(len(values), np.int64)
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(uniq) == len(key):
        return coords, values
    sums = np.zeros(len(uniq), dtype=values.dtype)
    np.add.at(sums, inverse, values)
    order = np.argsort(first, kind="stable")
    return [c[first[order]] for c in coords], sums[order]
