"""Packing entries with a layout's reference packer: the Python file a layout names.

A packer is ``pack(shape, coords, values, params)`` returning the layout's fields (optionally
``pack_dense(array, params)`` too); it is loaded once per file.  The entries it gets are
checked first (integer coordinates within the shape, values exactly float64) and their
duplicates summed, so a packer only arranges them.  The fields it returns are checked like any
others when the tensor is built.
"""
from __future__ import annotations

import importlib.util
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ArgumentError, SpecError
from ..front.layout import Layout
from ..front.value_types import ValueType
from ..front.writing import write_plan
from .fields import (
    as_array,
    check_cast,
    check_integers,
    index_max,
    position,
    shown,
    wider_hint,
)
from .writer import write

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
    module_spec.loader.exec_module(module)
    return module, func or "pack"


def pack_coords(layout: Layout, shape: tuple[int, ...], coords: Any,
                values: Any) -> tuple[dict[str, Any], int]:
    """(the fields ``layout``'s packer stores the entries in, how many entries it got):
    coordinate arrays, one per dimension, in any order, and their values; duplicates are
    summed first.  ArgumentError for entries that are not coordinates and values within
    ``shape``, a layout without a packer, or one that cannot store them."""
    if len(shape) != layout.order:
        raise ArgumentError(f"layout {layout.name} stores order-{layout.order} tensors, "
                            f"got shape {shape}")
    if any(n > index_max(layout) for n in shape):
        raise ArgumentError(f"shape {shape} does not fit index_type={layout.index_type!r} "
                            f"(at most {index_max(layout)}){wider_hint(layout.index_type)}")
    arrays, data = _sum_duplicates(*_entries(f"{layout.name} tensor: ", shape, coords, values,
                                             layout.value_type), shape)
    if not layout.packer:
        return _written(layout, shape, arrays, data), len(data)
    module, func = _packer(layout.packer)
    try:
        fields = getattr(module, func)(shape, tuple(arrays), data, dict(layout.params))
    except ValueError as exc:   # the packer cannot store this tensor
        raise ArgumentError(f"layout {layout.name} cannot store this tensor: {exc}") from None
    return fields, len(data)


def _written(layout: Layout, shape: tuple[int, ...], arrays: Any, data: np.ndarray
             ) -> dict[str, Any]:
    """The fields of a layout without a packer, written as its relation says."""
    try:
        plan = write_plan(layout)
    except SpecError as e:
        raise ArgumentError(f"layout {layout.name} has no packer and {e.detail}; build it "
                            "with from_arrays") from None
    return write(plan, shape, arrays, data)[0]


def pack_dense(layout: Layout, array: np.ndarray) -> dict[str, Any] | None:
    """The fields ``layout``'s packer stores a dense array in (its ``pack_dense``), or None
    when it has none."""
    if not layout.packer:
        return None
    module, _ = _packer(layout.packer)
    if not hasattr(module, "pack_dense"):
        return None
    return module.pack_dense(array, dict(layout.params))


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
