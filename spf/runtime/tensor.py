"""Tensors: a layout plus the arrays and scalars of its struct, checked against the layout.

Packing from coordinates goes through the layout's packer (a Python file named in the
layout spec); checking uses only the layout's declared extents and properties.
"""
from __future__ import annotations

import ctypes
import importlib.util
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..front import index_expr as ie
from ..front.layout import INDEX_TYPE, Layout
from ..front.layout_path import load_layout
from ..front.properties import Property
from ..front.storage import storage_or_none
from . import build as runtime
from .scalar_fields import derive_scalar_fields
from .scipy_io import compressed_fields, matrix_of
from .validate import check_structure

VALUE_DTYPE = np.float64
_VALUE = np.dtype(VALUE_DTYPE)


def index_max(layout: Layout) -> int:
    """The largest value of ``layout``'s index type (``int32`` or ``int64``)."""
    return _INDEX_MAX[layout.index_type]


_INDEX_MAX = {width: int(np.iinfo(width).max) for width in ("int32", "int64")}


def wider_hint(index_type: str) -> str:
    """The end of an overflow message: what to do about it."""
    return "; use index_type='int64'" if index_type == "int32" else ""


@cache
def _packer(spec: str):
    path, _, func = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location(f"spf_packer_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module, func or "pack"


def _as_layout(layout: str | Layout, params: Mapping[str, int],
               index_type: str | None = None) -> Layout:
    return load_layout(layout, index_type, **params)



# Generated code a Tensor uses to convert and unpack itself.  The modules that generate it
# (spf.conversion, spf.kernel) sit above this one and register their functions here when
# they are imported (spf/__init__.py imports both), so this module never imports them.
_GENERATED: dict[str, Callable[..., Any]] = {}


def register_generated(**functions: Callable[..., Any]) -> None:
    """Make ``functions`` (by name) available to tensors: ``convert``, ``dense_layout``,
    ``compressed_rows_layout`` (spf.conversion), ``dense_copy_kernel`` and
    ``entry_count_kernel`` (spf.kernel)."""
    _GENERATED.update(functions)


def generated(name: str) -> Callable[..., Any]:
    """The function ``name`` registered by the modules above (imported on first need: the
    package loads its API lazily, see ``spf/__init__.py``)."""
    if name not in _GENERATED:
        importlib.import_module("spf")._load_api()
    return _GENERATED[name]

class _Counting(threading.local):
    """The tensors whose stored entries the current thread is counting (:meth:`Tensor.padding`)."""

    tensors: tuple[Tensor, ...] = ()


_counting = _Counting()
_STRUCT_LOCK = threading.Lock()


class Tensor:
    """A tensor stored in a layout; fields are reachable as ``t["rowPtr"]`` or ``t.fields``.

    What was checked stays true: ``fields`` is a read-only mapping and its arrays are
    read-only views (of the arrays given, when their dtype already matched) or copies.
    Writing to an array you passed in, through your own reference, bypasses this.

    ``fill`` is the value of the elements the tensor does not store: 0.0, or for the output
    of a kernel under a semiring, that semiring's zero (``inf`` for min_plus)."""

    fill: float = 0.0

    def __init__(self, layout: Layout, shape: Sequence[int], fields: Mapping[str, Any],
                 check: bool = True, proven: frozenset[Property] = frozenset()):
        """``proven``: properties that hold by construction of ``fields`` (not checked)."""
        self.layout = layout
        self.shape = as_shape(shape)
        self.fields = _frozen(validate(layout, self.shape, fields, check_properties=check,
                                       proven=proven))
        self._struct: Any = None
        self.source_entries: int | None = None   # entries spf packed it from (None: as given)
        self._stored: int | None = None

    @classmethod
    def _built(cls, layout: Layout, shape: tuple[int, ...], fields: dict[str, Any]) -> Tensor:
        """A tensor whose fields spf itself just built (exact dtypes and sizes): not rechecked."""
        t = cls.__new__(cls)
        t.layout, t.shape, t.fields, t._struct = layout, shape, _frozen(fields), None
        t.source_entries, t._stored = None, None
        return t

    def padding(self) -> int:
        """Entries the layout stores that spf added while packing or converting the tensor
        (a DIA diagonal's or a BCSR block's slots with no source entry, holding 0.0): 0 for
        a tensor wrapped from arrays as given, whose stored entries are all entries."""
        if self.source_entries is None or self in _counting.tensors:
            return 0              # the counting kernel's own check of this tensor sees none
        if self._stored is None:
            _counting.tensors += (self,)
            try:
                stored = int(generated("entry_count_kernel")(self.layout)(T=self, one=1.0))
            finally:
                _counting.tensors = _counting.tensors[:-1]
            self._stored = stored
        return max(0, self._stored - self.source_entries)

    def __reduce__(self) -> tuple:
        """Pickled as its layout, shape, fields and fill (a worker rebuilds its struct)."""
        return (_unpickled, (self.layout, self.shape, dict(self.fields), self.fill,
                             self.source_entries))

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

    # constructors -------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, layout: str | Layout, shape: Sequence[int],
                    arrays: Mapping[str, Any], params: Mapping[str, int] | None = None,
                    check: bool = True, index_type: str | None = None) -> Tensor:
        """Wrap existing arrays (converted to the index type, int32 unless ``index_type=
        "int64"``, and float64 when needed) after checking their sizes and, with ``check``,
        every property the layout declares.  Scalar fields that the shape or an array's
        length determines (``numRows``, ``len``, ``nnz``) may be left out; given ones must
        agree with them."""
        lay = _as_layout(layout, params or {}, index_type)
        shape = as_shape(shape)
        if not isinstance(arrays, Mapping):
            raise ArgumentError(f"{lay.name} tensor: the fields must be a mapping of field names "
                                f"to arrays and integers, got {shown(arrays)}")
        return cls(lay, shape, derive_scalar_fields(lay, shape, arrays), check)

    @classmethod
    def from_coords(cls, layout: str | Layout, shape: Sequence[int],
                    coords: Sequence[Sequence[int]], values: Sequence[float],
                    index_type: str | None = None, **params: int) -> Tensor:
        """Pack nonzeros given as coordinate arrays (any order; duplicates are summed) with
        the layout's reference packer."""
        lay = _as_layout(layout, params, index_type)
        shape = as_shape(shape)
        if len(shape) != lay.order:
            raise ArgumentError(f"layout {lay.name} stores order-{lay.order} tensors, "
                                f"got shape {shape}")
        if any(n > index_max(lay) for n in shape):
            raise ArgumentError(f"shape {shape} does not fit index_type={lay.index_type!r} "
                                f"(at most {index_max(lay)}){wider_hint(lay.index_type)}")
        where = f"{lay.name} tensor: "
        if not isinstance(coords, (list, tuple, np.ndarray)):
            raise ArgumentError(f"{where}coords must be one coordinate array per dimension, "
                                f"got {shown(coords)}")
        coords = [_coordinate_array(where, d, c) for d, c in enumerate(coords)]
        values = as_array(where, "values", values)
        check_exact(where, "values", values)
        values = np.asarray(values, dtype=VALUE_DTYPE).reshape(-1)
        if len(coords) != len(shape) or any(len(c) != len(values) for c in coords):
            raise ArgumentError("need one coordinate array per dimension, each as long as values")
        for d, (c, n) in enumerate(zip(coords, shape)):
            if len(c) and (c.min() < 0 or c.max() >= n):
                bad = int(np.flatnonzero((c < 0) | (c >= n))[0])
                raise ArgumentError(f"coordinate {int(c[bad])} of entry {bad} in dimension {d} "
                                    f"is outside 0..{n - 1}")
        coords, values = _sum_duplicates(coords, values, shape)
        module, func = _packer(lay.packer) if lay.packer else (None, None)
        if module is None:
            raise ArgumentError(f"layout {lay.name} has no packer; build it with from_arrays")
        try:
            fields = getattr(module, func)(shape, tuple(coords), values, dict(lay.params))
        except ValueError as exc:   # the packer cannot store this tensor
            raise ArgumentError(f"layout {lay.name} cannot store this tensor: {exc}") from None
        t = cls(lay, shape, fields)
        t.source_entries = len(values)
        return t

    @classmethod
    def from_scipy(cls, layout: str | Layout, matrix: Any, index_type: str | None = None,
                   **params: int) -> Tensor:
        """A scipy.sparse matrix's stored entries (duplicates added, explicit zeros kept).

        Where spf can assemble or place ``layout``, the matrix's CSR arrays are wrapped as they
        are in a layout found by its shape (:func:`spf.conversion.compressed_rows_layout`),
        checked, and converted by generated code; otherwise the layout's reference packer
        stores them (in the matrix's order).  Padding is stored as the layout needs it (the
        conversions' padding policy does not apply: the layout was asked for)."""
        import scipy.sparse as sp

        if not sp.issparse(matrix):
            raise ArgumentError("from_scipy expects a scipy.sparse matrix, got "
                                f"{type(matrix).__name__}")
        lay = _as_layout(layout, params, index_type)
        src = generated("compressed_rows_layout")()
        if lay.order == 2 and src is not None and _generated(lay):
            src = src.with_index_type(lay.index_type)
            csr = sp.csr_matrix(matrix)
            storage = storage_or_none(src)
            assert storage is not None      # compressed_rows_layout found src by its storage
            given = cls(src, csr.shape, compressed_fields(csr, storage))
            return given if lay == src else given.convert(lay, allow_padding=True)
        coo = matrix.tocoo()
        return cls.from_coords(lay, coo.shape, (coo.row, coo.col), coo.data)

    @classmethod
    def from_dense(cls, layout: str | Layout, array: Any, index_type: str | None = None,
                   **params: int) -> Tensor:
        """The nonzeros of a dense array (all of it for a dense layout): converted by generated
        code from a dense layout found by its shape where spf can assemble or place
        ``layout``, otherwise stored by the layout's reference packer."""
        lay = _as_layout(layout, params, index_type)
        array = as_array("", "array", array)
        if array.dtype.kind not in "biuf":
            raise ArgumentError(f"expected a real numeric array, got dtype {array.dtype}")
        check_exact(f"{lay.name} tensor: ", "array", array)
        if array.ndim != lay.order:
            raise ArgumentError(f"layout {lay.name} stores order-{lay.order} tensors, got shape "
                                f"{array.shape}")
        src = generated("dense_layout")(array.ndim)
        if lay.dense_array is None and src is not None and _generated(lay):
            return cls.from_dense(src.with_index_type(lay.index_type), array).convert(
                lay, allow_padding=True)
        if lay.packer:
            module, _ = _packer(lay.packer)
            if hasattr(module, "pack_dense"):
                return cls(lay, array.shape, module.pack_dense(array, dict(lay.params)))
        nz = np.nonzero(array)
        return cls.from_coords(lay, array.shape, nz, array[nz])

    # conversion ----------------------------------------------------------------------
    def convert(self, dst: str | Layout, **params: Any) -> Tensor:
        """This tensor in layout ``dst``, by generated code (:class:`spf.Conversion`;
        ``keep_zeros=True`` keeps entries equal to 0.0; other keywords are layout
        parameters)."""
        out = generated("convert")(self, dst, **params)
        out.fill = self.fill
        return out

    def with_index_type(self, index_type: str) -> Tensor:
        """This tensor with index arrays and sizes of width ``index_type`` (``"int32"`` or
        ``"int64"``; copies of the index arrays, the values shared); ArgumentError naming a
        value that does not fit."""
        if index_type == self.layout.index_type:
            return self
        t = Tensor(self.layout.with_index_type(index_type), self.shape, self.fields,
                   check=False)     # the properties hold: only the width changes
        t.fill, t.source_entries = self.fill, self.source_entries
        return t

    # access --------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    @property
    def values(self) -> np.ndarray:
        return self.fields[self.layout.value.array]

    def to_dense(self, fill: float | None = None) -> np.ndarray:
        """The logical tensor as a dense array (computed by a generated kernel), with
        ``fill`` (default: the tensor's) where it stores no entry."""
        fill = self.fill if fill is None else fill
        if fill != 0.0 and self.padding():
            raise ArgumentError(f"to_dense(fill={fill}): this {self.layout.name} tensor stores "
                                f"{self.padding()} padding slots (0.0) that spf added, which "
                                "cannot be told from entries, so nothing marks where the fill "
                                "goes; convert it to a layout without padding first")
        dense = generated("dense_copy_kernel")(self.layout)(T=self)
        if fill != 0.0:
            dense[generated("pattern_kernel")(self.layout)(T=self, one=1.0) == 0] = fill
        return dense

    def to_scipy(self):
        """The order-2 tensor as a scipy.sparse matrix.

        Where the layout's storage levels (:func:`spf.front.storage.storage_of`) map onto a scipy
        format, the matrix is built from copies of the tensor's arrays, stored entries
        included: a dense level over one dimension with a compressed level (pointer and one
        coordinate array) over the other gives CSR (rows outer) or CSC (columns outer); one
        compressed root level with both coordinate arrays gives COO.  Any other layout is
        converted to COO by generated code first (its nonzeros: padding and explicit zeros
        are not kept).  scipy reads the entries it does not store as 0, whatever ``fill``
        is: the structure is what carries a semiring result's meaning.
        """
        if self.layout.order != 2:
            raise ArgumentError(f"to_scipy needs an order-2 tensor; layout {self.layout.name} "
                                f"stores order-{self.layout.order} tensors")
        direct = matrix_of(self.layout, self.shape, self.fields)
        if direct is not None:
            return direct
        coo = self.convert(coordinate_layout(2, self.layout.index_type))
        return matrix_of(coo.layout, coo.shape, coo.fields)

    def with_entries(self, coords: Sequence[np.ndarray], values: np.ndarray) -> Tensor:
        """A tensor in this one's layout, shape and fill holding the given entries (unique
        coordinates), built through the coordinate layout and a generated conversion;
        explicit zeros are kept, and padding the layout needs is allowed."""
        coo = coordinate_layout(self.layout.order, self.layout.index_type)
        out = Tensor.from_coords(coo, self.shape, coords, values) \
            .convert(self.layout, keep_zeros=True, allow_padding=True)
        out.fill = self.fill
        return out

    def entries(self) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The stored entries: one coordinate array per dimension and the values, read
        through a generated conversion to a coordinate layout (explicit zeros kept, padding
        spf added not)."""
        coo = self.convert(coordinate_layout(self.layout.order, self.layout.index_type))
        (level,) = storage_or_none(coo.layout).levels
        coords = dict(level.coords)
        return (tuple(np.asarray(coo.fields[coords[d]], np.int64)
                      for d in range(self.layout.order)), np.asarray(coo.values))

    def __repr__(self) -> str:
        fill = f", fill={self.fill}" if self.fill != 0.0 else ""
        return f"Tensor({self.layout.name}, shape={self.shape}{fill})"


def as_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints; ArgumentError when it is not one."""
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
            for n in shape):
        raise ArgumentError(f"a shape is a tuple of integers, got {shown(shape)}")
    if any(n < 0 for n in shape):
        raise ArgumentError(f"shape {tuple(shape)} has a negative extent")
    return tuple(int(n) for n in shape)


def coordinate_layout(order: int, index_type: str) -> Layout:
    """The layout on the search path storing order-``order`` tensors as coordinate lists
    (:func:`spf.conversion.coordinate_layout`), at ``index_type``."""
    lay = generated("coordinate_layout")(order)
    if lay is None:
        raise ArgumentError(f"no layout on the search path stores order-{order} tensors as "
                            "coordinate lists with a packer")
    return lay.with_index_type(index_type)


def _generated(layout: Layout) -> bool:
    """Whether spf converts into ``layout`` by generated code (assembled or placed)."""
    from ..front.placement import placement_or_none
    return storage_or_none(layout) is not None or placement_or_none(layout) is not None


def _unpickled(layout: Layout, shape: tuple[int, ...], fields: dict[str, Any], fill: float,
               source_entries: int | None) -> Tensor:
    t = Tensor._built(layout, shape, fields)
    t.fill, t.source_entries = fill, source_entries
    return t


def _frozen(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only mapping of read-only arrays (views: the memory is shared)."""
    out = {}
    for name, value in fields.items():
        if isinstance(value, np.ndarray) and value.flags.writeable:
            value = value.view()
            value.flags.writeable = False
        out[name] = value
    return MappingProxyType(out)


def _sum_duplicates(coords: list[np.ndarray], values: np.ndarray,
                    shape: tuple[int, ...]) -> tuple[list[np.ndarray], np.ndarray]:
    """Sum entries with equal coordinates, keeping first-occurrence order."""
    if len(values) < 2:
        return coords, values
    key = np.ravel_multi_index(coords, shape) if shape else np.zeros(len(values), np.int64)
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(uniq) == len(key):
        return coords, values
    sums = np.zeros(len(uniq), dtype=VALUE_DTYPE)
    np.add.at(sums, inverse, values)
    order = np.argsort(first, kind="stable")
    return [c[first[order]] for c in coords], sums[order]


@dataclass(frozen=True)
class _ArrayField:
    """One array field of a layout, as checking needs it."""

    name: str
    is_index: bool
    dims: tuple[ie.IExpr, ...]
    extents: tuple[ie.Evaluator, ...]     # each dimension's extent from scalars and arrays

    def declared(self) -> str:
        """The extents as the layout writes them: ``rowPtr(numRows)][2``."""
        return "][".join(ie.to_c(d, str, lambda n, a: f"{n}({', '.join(a)})")
                         for d in self.dims)


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


def validate(layout: Layout, shape: tuple[int, ...], fields: Mapping[str, Any],
             check_properties: bool = True,
             proven: frozenset[Property] = frozenset()) -> dict[str, Any]:
    """Convert and check fields against the layout: types, extents (dimension by dimension),
    shape, properties (but those in ``proven``; none without ``check_properties``) and the
    bounds of every read that generated code makes (:mod:`spf.runtime.validate`, always)."""
    plan = _plan(layout)
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
    check_structure(layout, out, check_properties)   # every read in bounds; periodic order
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


def _scalar(layout: Layout, field: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{layout.name} tensor: scalar field {field!r} must be an integer, "
                            f"got {shown(value)}")
    top = index_max(layout)
    if not 0 <= int(value) <= top:
        raise ArgumentError(f"{layout.name} tensor: {field} = {value} is outside 0..{top} "
                            f"(index_type={layout.index_type!r}){wider_hint(layout.index_type)}")
    return int(value)


def shown(value: Any) -> str:
    """``value`` for a message: an array by its shape and dtype, anything else by repr (cut)."""
    if isinstance(value, np.ndarray) and value.ndim:
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _array(layout: Layout, field: str, is_index: bool, value: Any) -> np.ndarray:
    """``value`` as a C-contiguous array of the field's type in the shape given (a copy only
    if needed); ArgumentError when that conversion would change a value."""
    where = f"{layout.name} tensor: "
    arr = as_array(where, field, value)
    if arr.ndim == 0:
        raise ArgumentError(f"{where}{field!r} is an array field; got {shown(value)}")
    if is_index:
        dtype = np.dtype(layout.index_type)
        check_integers(where, f"index array {field!r}", field, arr)
        _check_fits(layout, field, arr)
    else:
        dtype = _VALUE
        check_exact(where, field, arr)
    if arr.dtype != dtype or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr, dtype=dtype)
    return arr


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
    """Every value of the integer array ``arr`` fits the layout's index type."""
    top = index_max(layout)
    if not arr.size or np.can_cast(arr.dtype, np.dtype(layout.index_type), "safe"):
        return
    flat = arr.reshape(-1)
    if int(flat.max()) <= top and (arr.dtype.kind == "u" or int(flat.min()) >= -top - 1):
        return
    bad = flat > top if arr.dtype.kind == "u" else (flat < -top - 1) | (flat > top)
    k = int(np.flatnonzero(bad)[0])
    value = int(flat[k])
    hint = wider_hint(layout.index_type)
    if value > _INDEX_MAX["int64"]:    # only an unsigned array gets here
        hint = (f" (as a signed 64-bit integer it is {value - 2 ** 64}: a negative value "
                "stored in an unsigned array? pass signed integers)")
    raise ArgumentError(f"{layout.name} tensor: {position(field, k, arr.shape)} = {value} "
                        f"does not fit index_type={layout.index_type!r} (at most {top}){hint}")


def _coordinate_array(where: str, d: int, value: Any) -> np.ndarray:
    """Coordinate array ``d`` of ``from_coords`` as flat int64 (integers only, none lost)."""
    name = f"coords[{d}]"
    arr = as_array(where, name, value)
    check_integers(where, f"coordinate array {d}", name, arr)
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > _INDEX_MAX["int64"]:
        k = int(np.argmax(arr.reshape(-1)))
        raise ArgumentError(f"{where}{position(name, k, arr.shape)} = {int(arr.reshape(-1)[k])}"
                            " is not a coordinate (beyond int64)")
    return arr.astype(np.int64).reshape(-1)


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


def _check_properties(layout: Layout, scalars: Mapping[str, int],
                      arrays: Mapping[str, np.ndarray], proven: frozenset[Property]) -> None:
    """Check the properties but those ``proven``, each by its kind
    (:meth:`spf.front.properties.Property.check`; periodic monotonicity is checked by
    generated code, :mod:`spf.runtime.validate`)."""
    for prop in layout.properties:
        if not (proven and prop in proven):
            prop.check(arrays, scalars, layout.name)
