"""scipy.sparse matrices and a layout's fields, both ways, through the layout's storage levels.

Where a layout's storage (:mod:`spf.front.storage`, derived from its relation) has the shape of
a scipy format, the two share arrays: a dense level over a compressed level
(:meth:`~spf.front.storage.Storage.is_dense_over_compressed`) is scipy's CSR when its dense
level is the rows, CSC when it is the columns; a coordinate list
(:meth:`~spf.front.storage.Storage.is_coordinate_list`) is scipy's COO.  Nothing here names a
layout: the storage levels say which fields hold which array.  scipy's canonical-format flag
(sorted, no duplicates) proves the properties that storage order gives.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from ..front.layout import Layout
from ..front.properties import Property
from ..front.storage import Storage, storage_or_none

_COMPRESSED = {"csr": (0, 1), "csc": (1, 0)}     # scipy format -> its order of dimensions


def scipy_order(m: Any) -> tuple[int, ...]:
    """The order scipy's canonical format sorts entries in: columns outer for CSC."""
    return _COMPRESSED.get(m.format, tuple(range(len(m.shape))))


def canonical(m: Any) -> bool | None:
    """scipy's canonical-format flag (sorted, no duplicates); None when scipy cannot tell:
    its test for CSR and CSC runs on index arrays of one of its index types only."""
    if m.format in _COMPRESSED and not (m.indptr.dtype == m.indices.dtype
                                        and m.indices.dtype in (np.int32, np.int64)):
        return None
    return bool(getattr(m, "has_canonical_format", False))


@cache
def proven_by_order(layout: Layout) -> frozenset[Property]:
    """The properties a canonical scipy object stored in ``layout``'s storage order satisfies
    (:meth:`~spf.front.storage.Storage.order_properties`), unless one of its coordinates is
    declared decreasing (scipy sorts increasing)."""
    storage = storage_or_none(layout)
    if storage is None or any(storage.descending):
        return frozenset()
    return frozenset(storage.order_properties())


# scipy -> fields ---------------------------------------------------------------------------
def fields_of(m: Any, storage: Storage) -> dict[str, Any] | None:
    """The fields of ``storage``'s layout over the CSR, CSC or COO object ``m``'s own arrays
    (no copy), or None when its storage is not of ``m``'s shape and order."""
    if m.format in _COMPRESSED:
        if not storage.is_dense_over_compressed() or storage.order != scipy_order(m):
            return None
        return compressed_fields(m, storage)
    if m.format == "coo":
        return coordinate_fields(storage, m.coords, m.data,
                                 dict(zip(storage.shape_fields, m.shape)))
    return None


def compressed_fields(m: Any, storage: Storage) -> dict[str, Any]:
    """The fields of a dense-over-compressed ``storage`` in the order of the CSR or CSC
    object ``m`` (the caller knows they agree) over its own arrays."""
    pointer, array = _compressed(storage)
    nnz = int(m.indptr[-1]) if len(m.indptr) else 0
    out = {**dict(zip(storage.shape_fields, m.shape)), pointer: m.indptr,
           array: m.indices[:nnz]}
    if storage.value_array is not None:     # else a pattern layout: the caller checked
        out[storage.value_array] = m.data[:nnz]
    return out


def coordinate_fields(storage: Storage, coords: Any, data: np.ndarray,
                      fields: dict[str, Any]) -> dict[str, Any] | None:
    """``fields`` with the coordinate arrays ``coords`` (one per dimension), their count and
    the values ``data`` of a coordinate-list storage; None for any other storage."""
    if not storage.is_coordinate_list():
        return None
    count, arrays = _listed(storage)
    fields[count] = len(data)
    for dim, array in arrays.items():
        fields[array] = coords[dim]
    if storage.value_array is not None:     # else a pattern layout: the caller checked
        fields[storage.value_array] = data
    return fields


# fields -> scipy ---------------------------------------------------------------------------
def matrix_of(layout: Layout, shape: tuple[int, ...], fields: Mapping[str, Any]) -> Any:
    """The CSR, CSC or COO matrix over copies of an order-2 tensor's arrays (stored entries
    included), or None when its storage is of none of those shapes (or its pointer array
    is not one scipy accepts)."""
    import scipy.sparse as sp
    storage = storage_or_none(layout)
    if storage is None:
        return None
    held = storage.value_array
    values = fields[held] if held is not None else None    # None: a pattern layout's

    def copied(n: int) -> np.ndarray:
        if values is None:
            return np.full(n, layout.implicit, layout.value_type.dtype)
        return values[:n].copy()
    if storage.is_dense_over_compressed():
        formats: dict[tuple[int, ...], Any] = {(0, 1): sp.csr_matrix, (1, 0): sp.csc_matrix}
        fmt = formats.get(storage.order)
        pointer, array = _compressed(storage)
        outer = shape[storage.order[0]]
        ptr = fields[pointer][:outer + 1]
        crd = fields[array]
        if fmt is None or len(ptr) != outer + 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0) \
                or ptr[-1] > min(len(crd), len(crd if values is None else values)):
            return None
        n = int(ptr[-1])
        return fmt((copied(n), crd[:n].copy(), ptr.copy()), shape=shape)
    if storage.is_coordinate_list():
        count, arrays = _listed(storage)
        n = fields[count]
        rows, cols = fields[arrays[0]][:n], fields[arrays[1]][:n]
        return sp.coo_matrix((copied(n), (rows.copy(), cols.copy())), shape=shape)
    return None


def _compressed(storage: Storage) -> tuple[str, str]:
    """The pointer array and the coordinate array of a dense-over-compressed storage."""
    inner = storage.levels[1]
    pointer, array = inner.pointer, inner.coords[0][1]
    assert pointer is not None and array is not None    # is_dense_over_compressed()
    return pointer, array


def _listed(storage: Storage) -> tuple[str, dict[int, str]]:
    """The count field and the coordinate array of each dimension of a coordinate list."""
    (level,) = storage.levels
    arrays = {dim: array for dim, array in level.coords if array is not None}
    assert level.count is not None and len(arrays) == len(level.coords)  # is_coordinate_list()
    return level.count, arrays
