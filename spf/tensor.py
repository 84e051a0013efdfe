"""The public Tensor: a layout and the arrays and scalars of its struct, checked against it.

A Tensor's data and the checks of its fields are the runtime's (:mod:`spf.runtime.stored`,
:mod:`spf.runtime.fields`); here are what takes generated code: the check of every read generated
code makes (:mod:`spf.read_check`), the constructors that convert (:mod:`spf.conversion`) and
the conversions and unpacking (:mod:`spf.conversion`, the built-in kernels of :mod:`spf.kernel`).
Packing from coordinates goes through the layout's packer (:mod:`spf.runtime.packing`).
"""
from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .conversion import (
    compressed_rows_layout,
    convert,
    coordinate_layout,
    dense_layout,
)
from .errors import ArgumentError
from .front.layout import Layout
from .front.layout_file import blamed_on
from .front.layout_path import load_for_order
from .front.properties import Property, Unique
from .front.storage import storage_or_none
from .front.value_types import Kind, held_type, value_type
from .front.writing import write_plan_or_none
from .kernel import dense_copy_kernel, entry_count_kernel, pattern_kernel
from .read_check import check_structure
from .runtime.fields import (
    as_array,
    as_shape,
    check_cast,
    implicit_values,
    shown,
    with_derived,
)
from .runtime.memory import reserve
from .runtime.packing import packed, packed_dense
from .runtime.scalar_fields import derive_scalar_fields
from .runtime.scipy_io import compressed_fields, matrix_of
from .runtime.stored import StoredTensor


class _Counting(threading.local):
    """The tensors whose stored entries the current thread is counting (:meth:`Tensor.padding`)."""

    tensors: tuple[Tensor, ...] = ()


_counting = _Counting()


class Tensor(StoredTensor):
    """A tensor stored in a layout; fields are reachable as ``t["rowPtr"]`` or ``t.fields``.

    What was checked stays true: ``fields`` is a read-only mapping and its arrays are
    read-only views (of the arrays given, when their dtype already matched) or copies.
    Writing to an array you passed in, through your own reference, bypasses this.

    ``fill`` is the value of the elements the tensor does not store: 0.0, or for the output
    of a kernel under a semiring, that semiring's zero (``inf`` for min_plus); ``with_fill``
    gives the tensor with another (what a kernel with ``fill_values=True`` reads there)."""

    _stored: int | None = None      # the entries its layout's relation yields, once counted

    def __init__(self, layout: Layout, shape: Sequence[int], fields: Mapping[str, Any],
                 check: bool = True, proven: frozenset[Property] = frozenset()):
        """``proven``: properties that hold by construction of ``fields`` (not checked)."""
        super().__init__(layout, shape, fields, check, proven)
        check_structure(layout, self.fields, check)   # every read in bounds; periodic order
        unique = next((p for p in layout.properties if isinstance(p, Unique)), None)
        if check and unique is not None and unique not in proven:
            self._check_unique(unique.violated(layout.name))
        elif check and unique is None and layout.value_type.kind is Kind.BOOL:
            self._check_unique(f"{layout.name} tensor: a bool tensor cannot store a coordinate "
                               "twice (kernels would count both entries, where the sum of "
                               "True and True is True)")

    def _check_unique(self, violated: str) -> None:
        """The entries the relation reads have distinct coordinates (a ``unique``
        property, or bool values): as many stored entries as distinct coordinates among
        them; else ArgumentError, ``violated`` and the counts."""
        with blamed_on(self.layout, "T"):
            stored = int(entry_count_kernel(self.layout)(T=self, one=1.0))
        if stored == 0:
            return
        coo = _coordinate_layout(self.layout.order, self.layout.index_type)
        distinct = len(self.convert(coo, keep_zeros=True).values)   # equal ones added
        if stored != distinct:
            raise ArgumentError(f"{violated}: its {stored} stored entries have {distinct} "
                                "distinct coordinates (an entry is stored twice)")

    @staticmethod
    def check_reads(layout: Layout, fields: Mapping[str, Any]) -> None:
        """:func:`spf.read_check.check_structure` of ``fields`` in ``layout``, properties
        included (a built tensor whose layout declares a range relative to its indices)."""
        check_structure(layout, fields, True)

    def __reduce__(self) -> tuple:
        """Pickled as its layout, shape, fields and fill (a worker rebuilds its struct)."""
        return (_unpickled, (self.layout, self.shape, dict(self.fields), self.fill,
                             self.source_entries))

    def padding(self) -> int:
        """Entries the layout stores that spf added while packing or converting the tensor
        (a DIA diagonal's or a BCSR block's slots with no source entry, holding 0.0): 0 for
        a tensor wrapped from arrays as given, whose stored entries are all entries."""
        if self.source_entries is None or self in _counting.tensors:
            return 0              # the counting kernel's own check of this tensor sees none
        _counting.tensors += (self,)
        try:
            stored = self.stored_entries()
        finally:
            _counting.tensors = _counting.tensors[:-1]
        return max(0, stored - self.source_entries)

    def stored_entries(self) -> int:
        """How many entries the layout's relation reads from this tensor, padding included
        (counted once, by a generated kernel)."""
        if self._stored is None:
            with blamed_on(self.layout, "T"):
                self._stored = int(entry_count_kernel(self.layout)(T=self, one=1.0))
        return self._stored

    # constructors -------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, layout: str | Layout, shape: Sequence[int],
                    arrays: Mapping[str, Any], params: Mapping[str, int] | None = None,
                    check: bool = True, index_type: str | None = None,
                    dtype: Any = None) -> Tensor:
        """Wrap existing arrays (converted to the index type, int32 unless ``index_type=
        "int64"``) after checking their sizes and, with ``check``, every property the layout
        declares.  The values keep their type unless ``dtype`` is given (see
        :func:`typed`).  Scalar fields that the shape or an array's length determines
        (``numRows``, ``len``, ``nnz``) may be left out; given ones must agree with them."""
        extents = as_shape(shape)
        lay = load_for_order(layout, len(extents), index_type, **(params or {}))
        if not isinstance(arrays, Mapping):
            raise ArgumentError(f"{lay.name} tensor: the fields must be a mapping of field names "
                                f"to arrays and integers, got {shown(arrays)}")
        held = lay.value_array          # None: a pattern layout, which stores no values
        given = arrays.get(held) if held else None
        lay, values = typed(lay, dtype, None if given is None or held is None else
                            as_array(f"{lay.name} tensor: ", held, given), held or "values")
        if values is not None and held is not None:
            arrays = {**arrays, held: values}
        return cls(lay, extents, derive_scalar_fields(lay, extents, with_derived(lay, arrays)),
                   check)

    @classmethod
    def from_coords(cls, layout: str | Layout, shape: Sequence[int], coords: Any, values: Any,
                    index_type: str | None = None, dtype: Any = None,
                    *, structure: bool = False, **params: int) -> Tensor:
        """Pack nonzeros given as coordinate arrays (any order; duplicates are summed) with
        the layout's reference packer (or, without one, as its relation says where each entry
        goes), read back through the layout's relation; the values keep their type unless
        ``dtype`` is given.  Into a pattern layout, every value must be its constant, or
        ``structure=True`` stores the entries' positions whatever their values."""
        extents = as_shape(shape)
        lay = load_for_order(layout, len(extents), index_type, **params)
        lay, values = typed(lay, dtype, as_array(f"{lay.name} tensor: ", "values", values))
        return tensor_of(packed(lay, extents, coords, values, structure))

    @classmethod
    def from_scipy(cls, layout: str | Layout, matrix: Any, index_type: str | None = None,
                   dtype: Any = None, *, structure: bool = False, **params: int) -> Tensor:
        """A scipy.sparse matrix's stored entries (duplicates added, explicit zeros kept).
        Into a pattern layout every value must be its constant, or ``structure=True`` stores
        the entries' positions (scipy's ``A.astype(bool)`` structure, explicit zeros included).

        Where spf can assemble or place ``layout``, the matrix's CSR arrays are wrapped as they
        are in a layout found by its shape (:func:`spf.conversion.compressed_rows_layout`),
        checked, and converted by generated code; otherwise the layout's reference packer
        stores them (in the matrix's order).  Padding is stored as the layout needs it (the
        conversions' padding policy does not apply: the layout was asked for)."""
        import scipy.sparse as sp

        if not sp.issparse(matrix):
            raise ArgumentError("from_scipy expects a scipy.sparse matrix, got "
                                f"{type(matrix).__name__}")
        lay = load_for_order(layout, 2, index_type, **params)
        if lay.implicit is not None:        # a pattern layout: the values are not stored
            lay, _ = typed(lay, dtype, None)
            matrix, structure = _structure_of(matrix, lay, structure), True
        lay, _ = typed(lay, dtype, np.zeros(0, matrix.dtype))
        if matrix.dtype != lay.value_type.dtype:
            if dtype is None:       # a Layout object's type: the values must keep theirs
                check_cast(f"{lay.name} tensor: ", "values", matrix.tocoo().data,
                           lay.value_type)
            matrix = matrix.astype(lay.value_type.dtype)
        src = compressed_rows_layout()
        if lay.order == 2 and src is not None and _generated(lay):
            src = src.with_index_type(lay.index_type).with_value_type(lay.value_type)
            csr = sp.csr_matrix(matrix)
            storage = storage_or_none(src)
            assert storage is not None      # compressed_rows_layout found src by its storage
            given = cls(src, csr.shape, compressed_fields(csr, storage))
            if lay == src:
                return given
            out = given.convert(lay, allow_padding=True, structure=structure)
            out.fill = lay.fill         # the matrix's absent entries: the layout's fill
            return out
        coo = matrix.tocoo()
        return cls.from_coords(lay, coo.shape, (coo.row, coo.col), coo.data,
                               structure=structure)

    @classmethod
    def from_dense(cls, layout: str | Layout, array: Any, index_type: str | None = None,
                   dtype: Any = None, *, structure: bool = False, **params: int) -> Tensor:
        """The nonzeros of a dense array (all of it for a dense layout): converted by generated
        code from a dense layout found by its shape where spf can assemble or place
        ``layout``, otherwise stored by the layout's reference packer.  The values keep the
        array's type unless ``dtype`` is given.  Into a pattern layout every nonzero must be
        its constant, or ``structure=True`` stores where the nonzeros are."""
        data = as_array("", "array", array)
        lay = load_for_order(layout, data.ndim, index_type, **params)
        if data.dtype.kind not in "biufc":
            raise ArgumentError(f"expected a numeric array, got dtype {data.dtype}")
        lay, typed_data = typed(lay, dtype, data, "array")
        assert typed_data is not None
        data = typed_data
        if data.ndim != lay.order:
            raise ArgumentError(f"layout {lay.name} stores order-{lay.order} tensors, got shape "
                                f"{data.shape}")
        if lay.implicit is not None and not structure:     # checked here, named by entry
            nz = np.nonzero(data)
            implicit_values(lay, nz, data[nz], False, f"{lay.name} tensor")
            structure = True        # every nonzero holds the constant: store where they are
        if lay.fill != 0.0 and lay.dense_array is None:
            return cls._from_dense_filled(lay, data, structure)
        src = dense_layout(data.ndim)
        if lay.dense_array is None and src is not None and _generated(lay):
            return cls.from_dense(src.with_index_type(lay.index_type).with_value_type(
                lay.value_type), data).convert(
                lay, allow_padding=True, structure=structure)
        t = packed_dense(lay, data) if lay.implicit is None else None
        if t is not None:
            return tensor_of(t)
        nz = np.nonzero(data)
        return cls.from_coords(lay, data.shape, nz, data[nz], structure=structure)

    @classmethod
    def _from_dense_filled(cls, lay: Layout, data: np.ndarray, structure: bool) -> Tensor:
        """The elements of ``data`` other than ``lay``'s fill (a layout whose file sets
        ``fill``), zeros included, through the coordinate layout and a generated conversion
        (or the layout's packer); the tensor's fill is the layout's."""
        absent = np.isnan(data) if math.isnan(lay.fill) else data == lay.fill
        at = np.nonzero(~absent)
        if lay.packer is not None or not _generated(lay):
            return cls.from_coords(lay, data.shape, at, data[at], structure=structure)
        coo = _coordinate_layout(lay.order, lay.index_type).with_value_type(lay.value_type)
        return Tensor.from_coords(coo, data.shape, at, data[at]).with_fill(lay.fill).convert(
            lay, keep_zeros=True, allow_padding=True, structure=structure)

    # conversion ----------------------------------------------------------------------
    def convert(self, dst: str | Layout, **params: Any) -> Tensor:
        """This tensor in layout ``dst``, by generated code (:class:`spf.Conversion`;
        ``keep_zeros=True`` keeps entries equal to 0.0, the default for a tensor whose
        fill is not 0, where a 0 is a value; ``structure=True`` into a pattern layout stores
        the entries' positions whatever their values, which must otherwise all be its
        constant; other keywords are layout parameters).  The
        tensor keeps its fill (the logical tensor is the same), whatever ``dst``'s fill."""
        if self.fill != 0.0:
            params.setdefault("keep_zeros", True)
        out = convert(self, dst, **params)     # a dense layout gets the fill in C
        out.fill = self.fill
        return tensor_of(out)

    # access --------------------------------------------------------------------------
    def to_dense(self, fill: float | None = None) -> np.ndarray:
        """The logical tensor as a dense array (computed by a generated kernel), with
        ``fill`` (default: the tensor's) where it stores no entry."""
        fill = self.fill if fill is None else fill
        self.check_fill_placeable(fill, f"to_dense(fill={fill})")
        self._reserve_dense("the dense array", self.layout.value_type.dtype.itemsize)
        with blamed_on(self.layout, "T"):
            dense = dense_copy_kernel(self.layout)(T=self)
        if fill != 0.0:
            dense[self._entry_counts() == 0] = fill
        return dense

    def _entry_counts(self) -> np.ndarray:
        self._reserve_dense("the entry counts (a dense array)", 8)
        with blamed_on(self.layout, "T"):
            return pattern_kernel(self.layout)(T=self, one=1.0)

    def _reserve_dense(self, what: str, itemsize: int) -> None:
        """ArgumentError before a dense array of this tensor's shape is allocated, naming
        it (``what``), when it would not fit (:func:`spf.runtime.memory.reserve`)."""
        reserve(math.prod(self.shape) * itemsize,
                f"{what} of this {self.layout.name} tensor of shape {self.shape}")

    def to_scipy(self) -> Any:
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
        coo = self.convert(_coordinate_layout(2, self.layout.index_type))
        return matrix_of(coo.layout, coo.shape, coo.fields)

    def with_entries(self, coords: Sequence[np.ndarray], values: np.ndarray,
                     shape: Sequence[int] | None = None) -> Tensor:
        """A tensor in this one's layout, shape (or ``shape``) and fill holding the given
        entries (unique coordinates), built through the coordinate layout and a generated
        conversion; explicit zeros are kept, and padding the layout needs is allowed."""
        coo = _coordinate_layout(self.layout.order, self.layout.index_type)
        out = Tensor.from_coords(coo, self.shape if shape is None else shape, coords, values) \
            .convert(self.layout, keep_zeros=True, allow_padding=True)
        out.fill = self.fill
        return out

    def leading(self, m: int, trim: bool = False) -> Tensor:
        """The first ``m`` slices along the first dimension (rows of a matrix) in this
        tensor's layout, of shape ``(m, ...)``: a sample whose coordinates, and so its
        diagonals, blocks and row lengths, are the tensor's own (explicit zeros kept).  With
        ``trim``, each other extent is the smallest holding the sample's entries and at least
        ``m`` (so the sample of a lower-triangular matrix is square, as a layout of square
        matrices needs)."""
        if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m <= self.shape[0]:
            raise ArgumentError(f"leading: m must be an integer in 0..{self.shape[0]}, got "
                                f"{m!r}")
        coords, values = self.entries()
        keep = coords[0] < m
        coords = tuple(c[keep] for c in coords)
        rest = tuple(min(e, max(m, int(c.max(initial=-1)) + 1)) if trim else e
                     for e, c in zip(self.shape[1:], coords[1:]))
        coo = _coordinate_layout(self.layout.order, self.layout.index_type)
        out = Tensor.from_coords(coo, (m, *rest), coords, values[keep]).convert(
            self.layout, keep_zeros=True, allow_padding=True)
        out.fill = self.fill
        return out

    def entries(self) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """The stored entries: one coordinate array per dimension and the values, read
        through a generated conversion to a coordinate layout (explicit zeros kept, padding
        spf added not)."""
        coo = self.convert(_coordinate_layout(self.layout.order, self.layout.index_type))
        storage = storage_or_none(coo.layout)
        assert storage is not None      # coordinate_layout found the layout by its storage
        (level,) = storage.levels
        coords = {d: array for d, array in level.coords if array is not None}
        return (tuple(np.asarray(coo.fields[coords[d]], np.int64)
                      for d in range(self.layout.order)), np.asarray(coo.values))


def typed(lay: Layout, dtype: Any, values: np.ndarray | None, name: str = "values"
          ) -> tuple[Layout, np.ndarray | None]:
    """``lay`` holding values of ``dtype`` when given (``values`` cast to it: asked for),
    else of a Layout object's own type when it is not float64, else of the values' type
    (float16 held as float32, extended precision as float64), and ``values`` in that type
    (ArgumentError when that would change one)."""
    if dtype is not None:
        vt = value_type(dtype, "dtype")
        return lay.with_value_type(vt), None if values is None else values.astype(vt.dtype)
    vt = lay.value_type if not lay.value_type.is_float64 or values is None \
        else held_type(values.dtype, f"{lay.name} tensor: {name}")
    lay = lay.with_value_type(vt)
    if values is None:
        return lay, None
    check_cast(f"{lay.name} tensor: ", name, values, vt)
    return lay, values.astype(vt.dtype, copy=False)


def _structure_of(matrix: Any, lay: Layout, structure: bool) -> Any:
    """The scipy ``matrix``'s stored entries (explicit zeros too) holding the pattern layout
    ``lay``'s constant; unless ``structure``, ArgumentError naming the first entry (its
    duplicates added) whose value is not that constant."""
    import scipy.sparse as sp
    if not structure:
        coo = sp.coo_matrix(matrix, copy=True)
        coo.sum_duplicates()
        implicit_values(lay, (coo.row, coo.col), coo.data, False, f"{lay.name} tensor")
    m = sp.csr_matrix(matrix)
    ones = np.full(len(m.data), lay.implicit, lay.value_type.dtype)
    return sp.csr_matrix((ones, m.indices, m.indptr), shape=m.shape)


def _coordinate_layout(order: int, index_type: str) -> Layout:
    """The layout on the search path storing order-``order`` tensors as coordinate lists
    (:func:`spf.conversion.coordinate_layout`), at ``index_type``."""
    lay = coordinate_layout(order)
    if lay is None:
        raise ArgumentError(f"no layout on the search path stores order-{order} tensors as "
                            "coordinate lists with a packer")
    return lay.with_index_type(index_type)


def _generated(layout: Layout) -> bool:
    """Whether spf converts into ``layout`` by generated code (assembled, or read into an
    entry list and written as its relation says: a layout's packer is used only where
    neither can write it)."""
    return storage_or_none(layout) is not None or write_plan_or_none(layout) is not None


def tensor_of(t: StoredTensor) -> Tensor:
    """``t``, built or wrapped below the api layer, as what it is: every tensor is a
    :class:`Tensor` (the runtime builds them with :func:`spf.runtime.stored.tensor_class`)."""
    assert isinstance(t, Tensor)
    return t


def _unpickled(layout: Layout, shape: tuple[int, ...], fields: dict[str, Any], fill: float,
               source_entries: int | None) -> Tensor:
    t = Tensor._built(layout, shape, fields)
    t.fill, t.source_entries = fill, source_entries
    return t
