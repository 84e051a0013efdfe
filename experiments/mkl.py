"""Intel MKL's inspector-executor sparse BLAS through ctypes (the ``mkl`` wheel's libmkl_rt).

MKL is a contender only where it is installed (``pip install -e ".[experiments]"`` brings the
``mkl`` wheel); :func:`load` returns None otherwise and experiments skip it, saying so.  MKL runs
with the GNU OpenMP threading layer (the one spf's kernels use) and 32-bit indices (LP64).
CSR handles, ``mv`` and ``mm`` come in double (``mkl_sparse_d_*``, the default) and single
precision (``mkl_sparse_s_*``: ``csr(m, np.float32)``); the rest is double only.
Handles are released when their Python object is collected, so a timed call that builds a new
matrix frees the previous one first, as the other contenders' outputs are.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

os.environ.setdefault("MKL_THREADING_LAYER", "GNU")
os.environ.setdefault("MKL_INTERFACE_LAYER", "LP64")

INDEX_BASE_ZERO = 0
OPERATION_NON_TRANSPOSE = 10
OPERATION_TRANSPOSE = 11
MATRIX_TYPE_GENERAL = 20
DIAG_NON_UNIT = 50
LAYOUT_ROW_MAJOR = 101
CBLAS_LOWER = 122
CBLAS_NO_TRANS = 111
CBLAS_NON_UNIT = 131
_PTR = ctypes.c_void_p
_INT = ctypes.c_int32


class MatrixDescr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("mode", ctypes.c_int), ("diag", ctypes.c_int)]


GENERAL = MatrixDescr(MATRIX_TYPE_GENERAL, 0, DIAG_NON_UNIT)


class MklError(RuntimeError):
    pass


# value type -> (the letter of MKL's routines, the C type of their scalars)
_PRECISION: dict[np.dtype, tuple[str, type]] = {
    np.dtype(np.float64): ("d", ctypes.c_double), np.dtype(np.float32): ("s", ctypes.c_float)}


def _precision(dtype) -> tuple[str, type]:
    try:
        return _PRECISION[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"MKL routines here take float64 or float32 values, not "
                         f"{np.dtype(dtype)}") from None


def _library_path() -> str | None:
    for root in {sys.prefix, sys.base_prefix}:
        found = sorted(glob.glob(str(Path(root) / "lib" / "libmkl_rt.so*")))
        if found:
            return found[-1]
    return None


_LIB: ctypes.CDLL | bool | None = False


def load() -> ctypes.CDLL | None:
    """libmkl_rt, or None when the ``mkl`` wheel is not installed (cached)."""
    global _LIB
    if _LIB is False:
        path = _library_path()
        _LIB = None
        if path is not None:
            try:
                _LIB = ctypes.CDLL(path)
            except OSError:
                _LIB = None
    return _LIB


def version() -> str:
    """MKL's version string ("" when it is not installed)."""
    lib = load()
    if lib is None:
        return ""
    buf = ctypes.create_string_buffer(256)
    lib.MKL_Get_Version_String(buf, 256)
    return buf.value.decode().strip()


def set_threads(n: int) -> None:
    lib = load()
    if lib is not None:
        lib.MKL_Set_Num_Threads(ctypes.c_int(n))


def _check(status: int, what: str) -> None:
    if status != 0:
        raise MklError(f"MKL {what} failed with sparse_status_t {status}")


class Handle:
    """An MKL ``sparse_matrix_t`` of ``dtype`` values; ``keep`` holds the arrays MKL
    borrows."""

    def __init__(self, keep: tuple = (), dtype=np.float64):
        self.ptr = _PTR()
        self.keep = keep
        self.dtype = np.dtype(dtype)

    def __del__(self):
        if self.ptr and load() is not None:
            load().mkl_sparse_destroy(self.ptr)
            self.ptr = _PTR()


def _i32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.int32)


def coo(m: sp.coo_matrix) -> Handle:
    """An MKL COO handle borrowing ``m``'s arrays (entries in ``m``'s order)."""
    row, col, val = _i32(m.row), _i32(m.col), np.ascontiguousarray(m.data, np.float64)
    h = Handle((row, col, val))
    _check(load().mkl_sparse_d_create_coo(
        ctypes.byref(h.ptr), INDEX_BASE_ZERO, _INT(m.shape[0]), _INT(m.shape[1]), _INT(m.nnz),
        _PTR(row.ctypes.data), _PTR(col.ctypes.data), _PTR(val.ctypes.data)), "create_coo")
    return h


def csr(m: sp.csr_matrix, dtype=np.float64) -> Handle:
    """An MKL CSR handle of ``dtype`` values (float64: ``mkl_sparse_d_create_csr``, float32:
    ``mkl_sparse_s_create_csr``) borrowing ``m``'s arrays (copies where their types differ)."""
    letter, _ = _precision(dtype)
    ptr, ind, val = _i32(m.indptr), _i32(m.indices), np.ascontiguousarray(m.data, dtype)
    h = Handle((ptr, ind, val), dtype)
    _check(getattr(load(), f"mkl_sparse_{letter}_create_csr")(
        ctypes.byref(h.ptr), INDEX_BASE_ZERO, _INT(m.shape[0]), _INT(m.shape[1]),
        _PTR(ptr.ctypes.data), _PTR(ptr.ctypes.data + 4), _PTR(ind.ctypes.data),
        _PTR(val.ctypes.data)), f"{letter}_create_csr")
    return h


def bsr(m: sp.bsr_matrix) -> Handle:
    """An MKL BSR handle (row-major square blocks) borrowing ``m``'s arrays."""
    b = m.blocksize[0]
    if m.blocksize != (b, b) or m.shape[0] % b or m.shape[1] % b:
        raise ValueError(f"MKL BSR needs square blocks dividing the shape, got {m.blocksize} "
                         f"for {m.shape}")
    ptr, ind = _i32(m.indptr), _i32(m.indices)
    val = np.ascontiguousarray(m.data, np.float64)
    h = Handle((ptr, ind, val))
    _check(load().mkl_sparse_d_create_bsr(
        ctypes.byref(h.ptr), INDEX_BASE_ZERO, LAYOUT_ROW_MAJOR, _INT(m.shape[0] // b),
        _INT(m.shape[1] // b), _INT(b), _PTR(ptr.ctypes.data), _PTR(ptr.ctypes.data + 4),
        _PTR(ind.ctypes.data), _PTR(val.ctypes.data)), "create_bsr")
    return h


def tpmv_lower(n: int, packed: np.ndarray, x: np.ndarray) -> None:
    """x = L x for a lower-triangular L packed by rows (``cblas_dtpmv``, row-major, the
    layout of spf's LowerTri), in place."""
    load().cblas_dtpmv(LAYOUT_ROW_MAJOR, CBLAS_LOWER, CBLAS_NO_TRANS, CBLAS_NON_UNIT,
                       _INT(n), _PTR(packed.ctypes.data), _PTR(x.ctypes.data), _INT(1))


def to_csr(src: Handle, transpose: bool = False) -> Handle:
    """``mkl_sparse_convert_csr``: a new CSR handle (of the transpose: CSC of ``src``)."""
    h = Handle(src.keep, src.dtype)
    _check(load().mkl_sparse_convert_csr(
        src.ptr, OPERATION_TRANSPOSE if transpose else OPERATION_NON_TRANSPOSE,
        ctypes.byref(h.ptr)), "convert_csr")
    return h


def to_bsr(src: Handle, block: int) -> Handle:
    """``mkl_sparse_convert_bsr``: a new BSR handle, ``block`` x ``block`` row-major blocks."""
    h = Handle(src.keep, src.dtype)
    _check(load().mkl_sparse_convert_bsr(
        src.ptr, _INT(block), LAYOUT_ROW_MAJOR, OPERATION_NON_TRANSPOSE, ctypes.byref(h.ptr)),
        "convert_bsr")
    return h


def _rows(start: _PTR, end: _PTR, n: int) -> tuple[np.ndarray, np.ndarray]:
    """MKL's per-row [start, end) positions (4-array CSR/BSR): the pointer array of the rows
    packed one after the other, and the position (from the first) each packed item is read
    from."""
    s = np.ctypeslib.as_array(ctypes.cast(start, ctypes.POINTER(_INT)), (n,)).astype(np.int64) \
        if n else np.zeros(0, np.int64)
    e = np.ctypeslib.as_array(ctypes.cast(end, ctypes.POINTER(_INT)), (n,)).astype(np.int64) \
        if n else np.zeros(0, np.int64)
    lengths = e - s
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    first = int(s.min()) if n else 0
    source = np.arange(indptr[-1]) + np.repeat(s - first - indptr[:-1], lengths)
    return indptr, source


def _read(p: _PTR, ctype, count: int) -> np.ndarray:
    return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctype)), (count,)).copy() \
        if count else np.zeros(0, np.int32 if ctype is _INT else np.float64)


def export_csr(h: Handle) -> sp.csr_matrix:
    """A scipy copy of a CSR handle (for checking results)."""
    base, rows, cols = _INT(), _INT(), _INT()
    start, end, ind, val = _PTR(), _PTR(), _PTR(), _PTR()
    _check(load().mkl_sparse_d_export_csr(
        h.ptr, ctypes.byref(base), ctypes.byref(rows), ctypes.byref(cols), ctypes.byref(start),
        ctypes.byref(end), ctypes.byref(ind), ctypes.byref(val)), "export_csr")
    indptr, source = _rows(start, end, rows.value)
    size = int(source.max()) + 1 if source.size else 0
    return sp.csr_matrix((_read(val, ctypes.c_double, size)[source],
                          _read(ind, _INT, size)[source], indptr),
                         shape=(rows.value, cols.value))


def export_bsr(h: Handle, shape: tuple[int, int]) -> sp.csr_matrix:
    """A scipy CSR copy of a BSR handle with row-major blocks, cut to ``shape`` (for checking
    results)."""
    base, layout, rows, cols, block = _INT(), _INT(), _INT(), _INT(), _INT()
    start, end, ind, val = _PTR(), _PTR(), _PTR(), _PTR()
    _check(load().mkl_sparse_d_export_bsr(
        h.ptr, ctypes.byref(base), ctypes.byref(layout), ctypes.byref(rows), ctypes.byref(cols),
        ctypes.byref(block), ctypes.byref(start), ctypes.byref(end), ctypes.byref(ind),
        ctypes.byref(val)), "export_bsr")
    b = block.value
    indptr, source = _rows(start, end, rows.value)
    size = int(source.max()) + 1 if source.size else 0
    blocks = _read(val, ctypes.c_double, size * b * b).reshape(size, b, b)[source]
    return sp.bsr_matrix((blocks, _read(ind, _INT, size)[source], indptr),
                         shape=(rows.value * b, cols.value * b)).tocsr()[:shape[0], :shape[1]]


def _operands(h: Handle, *arrays: np.ndarray) -> tuple[str, type]:
    """The handle's routine letter and scalar type, once its operands are of its type."""
    for a in arrays:
        if a.dtype != h.dtype or not a.flags.c_contiguous:
            raise ValueError(f"MKL on {h.dtype} values needs contiguous {h.dtype} operands, "
                             f"got {a.dtype}")
    return _precision(h.dtype)


def mv(h: Handle, x: np.ndarray, y: np.ndarray) -> None:
    """y = A x (``mkl_sparse_d_mv`` or ``mkl_sparse_s_mv`` by the handle's type, general
    matrix)."""
    letter, scalar = _operands(h, x, y)
    _check(getattr(load(), f"mkl_sparse_{letter}_mv")(
        OPERATION_NON_TRANSPOSE, scalar(1.0), h.ptr, GENERAL, _PTR(x.ctypes.data),
        scalar(0.0), _PTR(y.ctypes.data)), f"{letter}_mv")


def mm(h: Handle, x: np.ndarray, y: np.ndarray) -> None:
    """Y = A X for row-major dense X and Y (``mkl_sparse_d_mm`` or ``mkl_sparse_s_mm`` by the
    handle's type, ``LAYOUT_ROW_MAJOR``, general matrix)."""
    letter, scalar = _operands(h, x, y)
    columns = x.shape[1]
    if y.shape[1] != columns:
        raise ValueError(f"mm: X has {columns} columns, Y {y.shape[1]}")
    _check(getattr(load(), f"mkl_sparse_{letter}_mm")(
        OPERATION_NON_TRANSPOSE, scalar(1.0), h.ptr, GENERAL, LAYOUT_ROW_MAJOR,
        _PTR(x.ctypes.data), _INT(columns), _INT(columns), scalar(0.0), _PTR(y.ctypes.data),
        _INT(columns)), f"{letter}_mm")


def optimize_mv(h: Handle, calls: int = 1000) -> None:
    """The inspector step for repeated SpMV (``mkl_sparse_set_mv_hint`` + ``optimize``)."""
    lib = load()
    _check(lib.mkl_sparse_set_mv_hint(h.ptr, OPERATION_NON_TRANSPOSE, GENERAL, _INT(calls)),
           "set_mv_hint")
    _check(lib.mkl_sparse_optimize(h.ptr), "optimize")


def optimize_mm(h: Handle, columns: int, calls: int = 1000) -> None:
    """The inspector step for repeated SpMM with ``columns`` row-major dense columns
    (``mkl_sparse_set_mm_hint`` + ``optimize``)."""
    lib = load()
    _check(lib.mkl_sparse_set_mm_hint(h.ptr, OPERATION_NON_TRANSPOSE, GENERAL,
                                      LAYOUT_ROW_MAJOR, _INT(columns), _INT(calls)),
           "set_mm_hint")
    _check(lib.mkl_sparse_optimize(h.ptr), "optimize")


def add(a: Handle, b: Handle) -> Handle:
    """C = A + B (``mkl_sparse_d_add``, both general CSR): a new handle."""
    h = Handle(a.keep + b.keep)
    _check(load().mkl_sparse_d_add(OPERATION_NON_TRANSPOSE, a.ptr, ctypes.c_double(1.0), b.ptr,
                                   ctypes.byref(h.ptr)), "d_add")
    return h
