"""A tensor as kernels see it: a layout, a shape and checked read-only fields, with its C struct.

:class:`StoredTensor` holds the data; :class:`spf.Tensor` (``spf/tensor.py``, in the api layer)
extends it with what takes generated code: the check of every read generated code makes, the
constructors that convert, and conversion and unpacking.  Every tensor is an ``spf.Tensor``:
the runtime builds the ones it returns (a kernel's output, an operand it wraps) with
:func:`tensor_class`, and the methods of ``spf.Tensor`` it calls are declared here.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Self

import numpy as np

from ..errors import ArgumentError
from ..front.established import coordinate_ranges, keeps_within_shape
from ..front.layout import Layout
from ..front.properties import Property, Range
from . import build as runtime
from .fields import as_shape, check_fields

_STRUCT_LOCK = threading.Lock()


def tensor_class() -> type[StoredTensor]:
    """:class:`spf.Tensor`, the class every tensor is.  Named through the package, which imports
    the API on first use: nothing here imports the layer above."""
    from .. import Tensor
    return Tensor


class StoredTensor:
    """A tensor's layout, shape and fields, checked when it is built and read-only since
    (``fields`` is a read-only mapping of read-only arrays), what the elements it does not
    store hold (``fill``), and its C struct, built once.  Not built directly: see the module
    docstring."""

    fill: float = 0.0
    _address: int

    def __init__(self, layout: Layout, shape: Sequence[int], fields: Mapping[str, Any],
                 check: bool = True, proven: frozenset[Property] = frozenset()):
        """Types, extents and shape checked; with ``check``, every property the layout
        declares but those in ``proven`` (which hold by construction of ``fields``)."""
        self.layout = layout
        self.shape = as_shape(shape)
        self._store(check_fields(layout, self.shape, fields, check_properties=check,
                                 proven=proven))

    def _store(self, fields: Mapping[str, Any]) -> None:
        self.fields = _frozen(fields)
        self.fill = self.layout.fill      # the layout's default (its file's ``fill`` key)
        self._struct: Any = None
        self.source_entries: int | None = None   # entries spf packed it from (None: as given)

    @classmethod
    def _built(cls, layout: Layout, shape: tuple[int, ...], fields: Mapping[str, Any]) -> Self:
        """A tensor whose fields spf itself just built (exact sizes): not rechecked; an index
        array declared narrower or wider than the index type it was built in is cast to its
        own width (its values fit: the builder sized them)."""
        t = cls.__new__(cls)
        t.layout, t.shape = layout, shape
        t._store({f: _as_declared(layout, f, v) for f, v in fields.items()})
        return t

    @property
    def struct(self) -> Any:
        """The C struct of this tensor (ctypes), built once: what kernels are called with."""
        if self._struct is None:
            with _STRUCT_LOCK:      # one struct per tensor: a call may hold its address
                if self._struct is None:
                    struct = runtime.make_struct(self.layout, self.fields)
                    self._address = ctypes.addressof(struct)
                    self._struct = struct
        return self._struct

    @property
    def address(self) -> int:
        """The address of :attr:`struct` (kernels take it)."""
        if self._struct is None:
            return ctypes.addressof(self.struct)
        return self._address

    def with_index_type(self, index_type: str) -> Self:
        """This tensor with index arrays and sizes of width ``index_type`` (``"int32"`` or
        ``"int64"``; copies of the index arrays, the values shared); ArgumentError naming a
        value that does not fit."""
        if index_type == self.layout.index_type:
            return self
        t = type(self)(self.layout.with_index_type(index_type), self.shape, self.fields,
                       check=False)     # the properties hold: only the width changes
        t.fill, t.source_entries = self.fill, self.source_entries
        return t

    def with_fill(self, fill: float) -> Self:
        """This tensor (its arrays shared) holding ``fill`` where it stores nothing: what its
        absent entries are to a kernel with ``fill_values=True`` and to :meth:`to_dense`."""
        t = type(self)(self.layout, self.shape, self.fields, check=False)
        t.fill, t.source_entries = float(fill), self.source_entries
        return t

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    @property
    def values(self) -> np.ndarray:
        """The value array; for a pattern layout (no value array), its constant once per
        stored entry (read-only)."""
        if self.layout.value_array is not None:
            return self.fields[self.layout.value_array]
        out = np.full(self.stored_entries(), self.layout.implicit, self.dtype)
        out.flags.writeable = False
        return out

    @property
    def dtype(self) -> np.dtype:
        """The type of its values (its layout's value type)."""
        return self.layout.value_type.dtype

    def __repr__(self) -> str:
        fill = f", fill={self.fill}" if self.fill != 0.0 else ""
        return f"Tensor({self.layout.name}, shape={self.shape}{fill})"

    # implemented by spf.Tensor: the constructors and the methods the runtime calls -----
    @classmethod
    def from_arrays(cls, layout: str | Layout, shape: Sequence[int],
                    arrays: Mapping[str, Any], params: Mapping[str, int] | None = None,
                    check: bool = True, index_type: str | None = None) -> StoredTensor:
        """:meth:`spf.Tensor.from_arrays`."""
        raise NotImplementedError

    @classmethod
    def from_coords(cls, layout: str | Layout, shape: Sequence[int], coords: Any, values: Any,
                    index_type: str | None = None, *, structure: bool = False,
                    **params: int) -> StoredTensor:
        """:meth:`spf.Tensor.from_coords`."""
        raise NotImplementedError

    @classmethod
    def from_scipy(cls, layout: str | Layout, matrix: Any, index_type: str | None = None,
                   *, structure: bool = False, **params: int) -> StoredTensor:
        """:meth:`spf.Tensor.from_scipy`."""
        raise NotImplementedError

    @classmethod
    def from_dense(cls, layout: str | Layout, array: Any, index_type: str | None = None,
                   *, structure: bool = False, **params: int) -> StoredTensor:
        """:meth:`spf.Tensor.from_dense`."""
        raise NotImplementedError

    def padding(self) -> int:
        """:meth:`spf.Tensor.padding`."""
        raise NotImplementedError

    def stored_entries(self) -> int:
        """:meth:`spf.Tensor.stored_entries`."""
        raise NotImplementedError

    def to_dense(self, fill: float | None = None) -> np.ndarray:
        """:meth:`spf.Tensor.to_dense`."""
        raise NotImplementedError

    def entries(self) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """:meth:`spf.Tensor.entries`."""
        raise NotImplementedError

    def with_entries(self, coords: Sequence[np.ndarray], values: np.ndarray) -> StoredTensor:
        """:meth:`spf.Tensor.with_entries`."""
        raise NotImplementedError

    def check_fill_placeable(self, fill: float, what: str) -> None:
        """ArgumentError (naming ``what``) where ``fill`` is not 0 and the tensor stores
        padding slots spf added: they cannot be told from entries holding 0, so nothing marks
        where the fill goes."""
        padding = self.padding() if fill != 0 else 0
        if padding:
            raise ArgumentError(f"{what}: this {self.layout.name} tensor stores {padding} "
                                "padding slots that spf added, which cannot be told from "
                                "entries, so nothing marks where the fill goes; convert it to "
                                "a layout without padding first")

    def _entry_counts(self) -> np.ndarray:
        """How many entries the layout's relation yields at each coordinate, as a dense array
        (nonzero where the tensor has an entry), by a generated kernel."""
        raise NotImplementedError

    @staticmethod
    def check_reads(layout: Layout, fields: Mapping[str, Any]) -> None:
        """ArgumentError when generated code would read ``fields`` out of bounds or they
        violate a property checked at the relation's reads (:mod:`spf.read_check`)."""
        raise NotImplementedError


def check_built_ranges(layout: Layout, fields: Mapping[str, Any], what: str,
                       within: bool = False) -> None:
    """ArgumentError when a tensor spf built (``what``: a kernel's assembled output, a
    conversion's result) stores a coordinate outside a range its layout declares (a layout
    whose range is narrower than its shape cannot store that entry) or a slot, padding
    included, outside the shape (the generated read check, for a layout whose relation and
    ranges do not keep every slot within it).  Sorted assembly and the writer
    establish the other properties; ranges they cannot (checked here, O(entries); a range
    relative to layout indices, ``colIdx(pk) >= pi``, by the generated read check).
    ``within``: the entries were within the shape (a conversion's, from a valid source that
    keeps them there), so an array holding their coordinates meets a range containing the
    shape's extent (:func:`~spf.front.established.coordinate_ranges`; not checked)."""
    proven = coordinate_ranges(layout) if within else frozenset()
    ranges = [p for p in layout.properties if isinstance(p, Range) and p not in proven]
    try:
        if any(p.relative for p in ranges) or not keeps_within_shape(layout):
            tensor_class().check_reads(layout, fields)
        scalars = {f: int(fields[f]) for f in layout.scalar_fields}
        arrays = {f: np.asarray(fields[f]).reshape(-1) for f in layout.index_arrays}
        for prop in ranges:
            prop.check(arrays, scalars, layout.name)
    except ArgumentError as exc:
        raise ArgumentError(f"{what}: {exc} (the layout cannot store that entry)") from None


def _as_declared(layout: Layout, field: str, value: Any) -> Any:
    spec = layout.fields.get(field)
    if spec is None or spec.width is None or not isinstance(value, np.ndarray):
        return value
    return np.ascontiguousarray(value, dtype=spec.width)


def _frozen(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only mapping of read-only arrays (views: the memory is shared)."""
    out = {}
    for name, value in fields.items():
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        out[name] = value
    return MappingProxyType(out)
