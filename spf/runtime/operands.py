"""Kernel operands as users hold them: spf Tensors, numpy arrays, scipy.sparse, pydata sparse.

A foreign sparse object is wrapped without a copy where the layout's storage levels
(:mod:`spf.front.storage`, derived from its relation) have the object's shape: a dense level with
a compressed level under it (scipy CSR when rows are outer, CSC when columns are), or one
compressed level holding every coordinate (scipy COO, pydata COO).  scipy's canonical-format
flag proves the ordering and uniqueness properties that storage order gives; everything
else the layout declares is checked, on every call (the object's arrays stay the caller's).
An object whose arrays break a property (unsorted indices for a sorted layout, duplicates)
and any other object go through the layout's packer or a generated conversion (a copy; the
first with a ConvertedOperandWarning).  An spf Tensor is never converted: it holds its
layout's properties from the day it was built.
Which fields hold which of scipy's arrays is :mod:`spf.runtime.scipy_io`'s.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ArgumentError, ConvertedOperandWarning, SpfError, warn_user
from ..front.layout import Layout
from ..front.storage import storage_or_none
from ..front.value_types import ValueType, can_cast, held_type
from . import build as runtime
from .fields import check_cast, check_integers, implicit_values, index_max, shown
from .memory import address
from .scipy_io import canonical, coordinate_fields, fields_of, proven_by_order, scipy_order
from .stored import StoredTensor, tensor_class


class DenseStruct:
    """The struct of a dense layout filled straight from a C-contiguous array of its value
    type: its scalar fields are the extents of the dimensions, its array field the data
    pointer."""

    def __init__(self, layout: Layout, plan: list[int | None]):
        self.layout = layout
        self.plan = plan                  # per struct field: dimension, or None for the data
        self.in_order = plan == [*range(layout.order), None]
        self.cls = runtime.struct_type(layout)
        self.order = layout.order
        self.top = index_max(layout)
        self.dtype = layout.value_type.dtype

    @staticmethod
    def of(layout: Layout) -> DenseStruct | None:
        """None unless ``layout`` is dense and its fields are exactly its extents and data."""
        if layout.dense_array is None:
            return None
        extent = {}
        for d, aff in enumerate(layout.shape):
            if len(aff.terms) == 1 and aff.const == 0 and aff.terms[0][1] == 1:
                extent[aff.terms[0][0]] = d
        dims = layout.fields[layout.dense_array].dims
        if [getattr(e, "name", None) for e in dims] != [
                next((n for n, d in extent.items() if d == k), None) for k in range(layout.order)]:
            return None
        plan: list[int | None] = []
        for f in layout.fields.values():
            if f.name == layout.dense_array:
                plan.append(None)
            elif not f.is_array and f.name in extent:
                plan.append(extent[f.name])
            else:
                return None
        return DenseStruct(layout, plan)

    def fresh(self, array: np.ndarray, shape: tuple[int, ...]) -> ctypes.Structure:
        """The struct over an array spf just allocated: C-contiguous float64 of ``shape``,
        whose extents came from checked inputs (so they fit the index type); fields in the
        usual order (:attr:`in_order`)."""
        return self.cls(*shape, address(array))

    def struct(self, array: np.ndarray) -> ctypes.Structure | None:
        """The struct over ``array``, or None when it is not a C-contiguous float64 array of
        the layout's order whose extents fit the index type (the general path explains)."""
        if array.dtype != self.dtype or array.ndim != self.order \
                or not array.flags.c_contiguous \
                or (array.size > self.top and max(array.shape) > self.top):
            return None
        if self.in_order:       # the extents in order, then the data: the usual dense struct
            return self.cls(*array.shape, address(array))
        shape = array.shape
        return self.cls(*[address(array) if d is None else shape[d] for d in self.plan])


class Operand:
    """One tensor argument of a compiled kernel: how a value becomes a struct address."""

    def __init__(self, name: str, layout: Layout, pattern: bool = False):
        self.name = name
        self.layout = layout
        self.pattern = pattern          # a mask: its values are never read
        self.dense = DenseStruct.of(layout)

    def bind(self, value: Any) -> tuple[int, tuple[int, ...], Any]:
        """(struct address, logical shape, what must stay alive during the call)."""
        if isinstance(value, StoredTensor) and value.layout is self.layout:   # common, fast
            return value.address, value.shape, value
        if type(value) is np.ndarray and self.dense is not None:
            struct = self.dense.struct(value)
            if struct is not None:
                return ctypes.addressof(struct), value.shape, (struct, value)
        t = self.tensor(value)
        return t.address, t.shape, t

    def tensor(self, value: Any) -> StoredTensor:
        """``value`` as a checked Tensor in this operand's layout."""
        if isinstance(value, StoredTensor):
            if value.layout is not self.layout and value.layout != self.layout:
                want = value.layout.with_value_type(self.layout.value_type)
                if want != self.layout:
                    raise ArgumentError(_layout_mismatch(self.name, self.layout, value.layout))
                return retyped(self.name, value, self.layout, self.pattern)
            return value
        return as_tensor(self.name, value, self.layout, self.pattern)


def as_tensor(name: str, value: Any, layout: Layout, pattern: bool = False,
              converting: bool = True) -> StoredTensor:
    """A numpy array (dense layouts), scipy.sparse matrix or array, or pydata sparse array
    as a checked Tensor in ``layout`` (``pattern``: a mask, of any value type); ArgumentError
    naming ``name`` when it cannot be.  A sparse object whose own arrays break a property of
    the layout is converted into it (``converting``; else refused), with a
    :class:`~spf.errors.ConvertedOperandWarning`."""
    if isinstance(value, StoredTensor):
        return Operand(name, layout, pattern).tensor(value)
    if isinstance(value, (np.ndarray, list, tuple)) and layout.dense_array is None:
        raise ArgumentError(f"{name!r} is in layout {layout.name}; pack it first with "
                            f"spf.Tensor.from_dense/from_scipy('{layout.name}', ...)")
    try:
        t = None
        if isinstance(value, (np.ndarray, list, tuple)):
            t = tensor_class().from_dense(layout, value)
        elif is_scipy(value):
            t = _from_scipy(value, layout, name if converting else None, pattern)
        elif is_pydata(value):
            t = _from_pydata(value, layout, name if converting else None, pattern)
    except ArgumentError as exc:
        raise ArgumentError(f"{name!r}: {exc}") from None
    if t is not None:       # the data's own type, converted to the kernel's if it may be
        return t if t.layout == layout else Operand(name, layout, pattern).tensor(t)
    raise ArgumentError(f"{name!r}: expected an spf.Tensor, a numpy array, a scipy.sparse "
                        f"matrix or array or a pydata sparse array, got {type(value).__name__}")


def _check_implicit(value: Any, layout: Layout) -> None:
    """ArgumentError naming the first entry of a scipy or pydata object (duplicates added)
    whose value is not the pattern ``layout``'s constant: its arrays are wrapped without
    their values."""
    coo = value.tocoo().copy()
    coo.sum_duplicates()
    coords = coo.coords
    implicit_values(layout, tuple(np.asarray(c) for c in coords), np.asarray(coo.data), False,
                    f"{layout.name} tensor")


def retyped(name: str, t: StoredTensor, layout: Layout, pattern: bool = False) -> StoredTensor:
    """``t`` with its values converted to ``layout``'s value type (numpy's ``same_kind``
    casting, no value changed; a ``pattern``'s values are never read: any type converts);
    ArgumentError naming ``name`` otherwise."""
    src, dst = t.layout.value_type, layout.value_type
    if not pattern:
        _check_retype(name, t, src, dst)
    fields = dict(t.fields)
    if t.layout.value_array is not None:    # a pattern layout: its constant, in any type
        values = np.asarray(t.values)
        fields[t.layout.value_array] = np.ones(values.shape, dst.dtype) if pattern else \
            values.astype(dst.dtype)
    out = tensor_class()(layout, t.shape, fields, check=False)
    out.fill, out.source_entries = t.fill, t.source_entries     # padding stays known
    return out


def _check_retype(name: str, t: StoredTensor, src: ValueType, dst: ValueType) -> None:
    if not can_cast(src, dst):
        raise ArgumentError(f"{name!r} holds {src.name} values; the kernel computes it as "
                            f"{dst.name}, which numpy's same_kind casting does not allow; "
                            f"convert it first, or build the kernel with dtype={src.name!r}")
    check_cast(f"{name!r}: ", t.layout.value_array or "values", np.asarray(t.values), dst)


def _layout_mismatch(name: str, want: Layout, got: Layout) -> str:
    def describe(lay: Layout, other: Layout) -> str:
        text = f"{lay.name} {dict(lay.params)}" if lay.params else lay.name
        if lay.name == other.name and lay.source != other.source:
            text += f" (from {lay.source})"
        if lay.index_type != other.index_type:
            text += f" (index_type={lay.index_type!r})"
        return text
    hint = ""
    if want.index_type != got.index_type and (want.name, want.source, dict(want.params)) == \
            (got.name, got.source, dict(got.params)):
        hint = (f"; one kernel runs in one index width: build the tensor with index_type="
                f"{want.index_type!r} (spf.Tensor.from_scipy/from_arrays/from_dense take it), "
                "or give every layout the same width")
    return (f"{name!r}: the kernel was generated for layout {describe(want, got)} but got a "
            f"tensor in layout {describe(got, want)}{hint}")


def is_scipy(value: Any) -> bool:
    """Whether ``value`` is a scipy.sparse matrix or array."""
    return type(value).__module__.startswith("scipy.sparse") and hasattr(value, "format")


def is_pydata(value: Any) -> bool:
    """Whether ``value`` is a pydata ``sparse`` array (COO, GCXS, ...)."""
    module = type(value).__module__
    return (module == "sparse" or module.startswith("sparse.")) and hasattr(value, "fill_value")


def check_arrays(kind: str, value: Any, layout: Layout | None = None) -> None:
    """ArgumentError unless the scipy.sparse or pydata ``value`` (a ``kind``) holds values
    that convert to ``layout``'s value type (its own type without a layout) unchanged and,
    for scipy's CSR, CSC and COO, index arrays that scipy's own routines may index with
    (they check nothing: an object built from arrays, or whose arrays were replaced, may
    hold anything)."""
    data = getattr(value, "data", None)     # lil and dok keep theirs otherwise: checked later
    if is_scipy(value) and value.format in ("csr", "csc", "coo"):
        _check_scipy_arrays(f"a {kind}: ", value)
    if layout is None:
        held_type(value.dtype, f"a {kind}")
        return
    vt = layout.value_type
    if value.dtype.kind not in "biufc" or not can_cast(held_type(value.dtype, f"a {kind}"), vt):
        raise ArgumentError(f"a {kind} of dtype {value.dtype} cannot be used: the kernel "
                            f"computes it as {vt.name} (layout {layout.name}), which numpy's "
                            "same_kind casting does not allow")
    if isinstance(data, np.ndarray) and data.dtype.kind in "biufc":
        check_cast(f"a {kind}: ", "data", data, vt)


def _check_scipy_arrays(where: str, m: Any) -> None:
    """The arrays of a scipy CSR, CSC or COO object: 1-D, integer index arrays, a pointer
    array of one more than the outer extent rising from 0 or more to at most the entries
    stored, coordinates as many as the values."""
    arrays = {"data": m.data}
    if m.format == "coo":
        coords = m.coords
        arrays.update({f"coords[{d}]": c for d, c in enumerate(coords)})
    else:
        arrays.update(indptr=m.indptr, indices=m.indices)
    for name, arr in arrays.items():
        if not isinstance(arr, np.ndarray) or arr.ndim != 1:
            raise ArgumentError(f"{where}its {name} must be a 1-D numpy array, got {shown(arr)}")
        if name != "data":
            check_integers(where, f"its {name}", name, arr)
    if m.format == "coo":
        for d, c in enumerate(coords):
            if len(c) != len(m.data):
                raise ArgumentError(f"{where}coords[{d}] has {len(c)} elements for "
                                    f"{len(m.data)} values")
        return
    ptr, outer = m.indptr, m.shape[0 if m.format == "csr" else 1]
    if len(ptr) != outer + 1:
        raise ArgumentError(f"{where}indptr has {len(ptr)} elements, not {outer + 1} (one more "
                            f"than the {'rows' if m.format == 'csr' else 'columns'})")
    stored = min(len(m.indices), len(m.data))
    falls = ptr[1:] < ptr[:-1]
    if ptr[0] >= 0 and ptr[-1] <= stored and not falls.any():     # rising from 0.. to ..stored
        return
    bad = np.flatnonzero((ptr < 0) | (ptr > stored) | np.concatenate([[False], falls]))
    if len(bad):
        k = int(bad[0])
        why = ("negative" if ptr[k] < 0 else f"beyond the {stored} stored entries"
               if ptr[k] > stored else f"less than indptr[{k - 1}] = {ptr[k - 1]}")
        raise ArgumentError(f"{where}indptr[{k}] = {ptr[k]} is {why}")


def _check_coordinates(where: str, m: Any) -> None:
    """The coordinates of a scipy COO object are within its shape."""
    for d, (c, n) in enumerate(zip(m.coords, m.shape)):
        bad = np.flatnonzero((c < 0) | (c >= n))
        if len(bad):
            raise ArgumentError(f"{where}coords[{d}][{bad[0]}] = {c[bad[0]]} is outside "
                                f"0..{n - 1}")


def _from_scipy(m: Any, layout: Layout, operand: str | None, mask: bool = False
                ) -> StoredTensor:
    """``m`` in ``layout``: its own arrays where the storage has its shape, else a copy;
    ``operand``: its name when arrays that break a property are converted (else refused);
    into a pattern layout its values must be the constant (unless a ``mask``'s)."""
    kind = f"scipy.sparse {type(m).__name__} ({m.format})"
    check_arrays(kind, m, layout)
    if len(m.shape) != layout.order:
        raise ArgumentError(f"a {kind} of shape {m.shape} has order {len(m.shape)}, but layout "
                            f"{layout.name} stores order-{layout.order} tensors")
    if layout.implicit is not None and not mask:
        if m.format == "coo":
            _check_coordinates(f"a {kind}: ", m)
        _check_implicit(m, layout)
    storage = storage_or_none(layout)
    fields = None if storage is None else fields_of(m, storage)
    if storage is None or fields is None:
        return _packed(kind, layout, lambda: _scipy_copy(kind, m, layout))
    is_canonical = canonical(m)
    proven = proven_by_order(layout) if is_canonical and scipy_order(m) == storage.order \
        else frozenset()
    try:
        return _wrapped_or_converted(
            lambda: tensor_class()(layout, m.shape, fields, proven=proven),
            lambda: _scipy_copy(kind, m, layout), operand, kind, layout)
    except ArgumentError as exc:
        if is_canonical is not False:
            raise
        raise ArgumentError(f"{exc} (the {kind} is not in scipy's canonical format: "
                            ".sum_duplicates() sorts its indices and adds up duplicates)") from None


def _scipy_copy(kind: str, m: Any, layout: Layout) -> StoredTensor:
    """``m`` copied into ``layout`` (:meth:`spf.Tensor.from_scipy`); scipy's conversions
    index with a COO object's coordinates unchecked: they are checked first."""
    if m.format == "coo":
        _check_coordinates(f"a {kind}: ", m)
    return tensor_class().from_scipy(layout, m)


def _from_pydata(a: Any, layout: Layout, operand: str | None, mask: bool = False
                 ) -> StoredTensor:
    """``a`` in ``layout``, as :func:`_from_scipy`."""
    kind = f"pydata sparse {type(a).__name__}"
    check_arrays(kind, a, layout)
    if a.fill_value != 0:
        raise ArgumentError(f"a {kind} with fill_value {a.fill_value} cannot be used: absent "
                            "entries of spf tensors are 0")
    if a.ndim != layout.order:
        raise ArgumentError(f"a {kind} of shape {a.shape} has order {a.ndim}, but layout "
                            f"{layout.name} stores order-{layout.order} tensors")
    if layout.implicit is not None and not mask:
        _check_implicit(a, layout)
    coo = a if type(a).__name__ == "COO" else a.tocoo()
    storage = storage_or_none(layout)
    fields = coordinate_fields(storage, coo.coords, coo.data, dict(zip(
        storage.shape_fields, coo.shape))) if storage is not None else None

    def copied() -> StoredTensor:
        return tensor_class().from_coords(layout, coo.shape, tuple(coo.coords), coo.data)
    if fields is None:
        return _packed(kind, layout, copied)
    return _wrapped_or_converted(lambda: tensor_class()(layout, coo.shape, fields), copied,
                                 operand, kind, layout)


def _wrapped_or_converted(wrap: Callable[[], StoredTensor], convert: Callable[[], StoredTensor],
                          operand: str | None, kind: str, layout: Layout) -> StoredTensor:
    """The object's own arrays as a tensor in ``layout`` (``wrap``).  Where they break the
    layout's properties (a row's indices unsorted, a coordinate stored twice), the object
    converted into the layout by generated code or its packer (``convert``, a copy: the
    caller's arrays are never changed) when ``operand`` (its name) is given and that
    succeeds, with a ConvertedOperandWarning saying so; else wrapping's ArgumentError."""
    try:
        return wrap()
    except ArgumentError as exc:
        if operand is None:
            raise
        refused = exc
    try:
        t = convert()
    except SpfError:
        raise refused from None         # what the object's arrays break, not the copy's
    warn_user(f"{operand!r}: the {kind} does not satisfy layout {layout.name} ({refused}); "
              f"converted into {layout.name} by generated code, a copy on every call (convert "
              "it once with spf.Tensor.from_scipy or from_coords, or use a layout that "
              "allows it)", ConvertedOperandWarning)
    return t


def _packed(kind: str, layout: Layout, build: Any) -> StoredTensor:
    """A copy in ``layout`` by its packer or a generated conversion."""
    try:
        return build()
    except ArgumentError as exc:
        raise ArgumentError(f"layout {layout.name} cannot take a {kind}: its storage is not "
                            f"that of the object and converting failed: {exc}") from None
