"""Arrays spf allocates for kernels to write (aligned to a cache line), the check every large
allocation passes first (:func:`reserve`: never more than the machine's memory, nor than an
:func:`allocation_limit` in force), and the address of an array's data as cheaply as Python
can read it."""
from __future__ import annotations

import contextvars
import ctypes
import math
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import ArgumentError

ALIGNMENT = 64   # bytes: a cache line, and one AVX-512 vector
# below this many bytes numpy's own alignment (16 bytes) is kept: a loop over so small an
# output (128 doubles) takes about as long as aligning it (0.3-0.4 us of a 3 us call)
SMALL = 1024
_FLOAT64 = np.dtype(np.float64)


_LIMIT: contextvars.ContextVar[tuple[int, str] | None] = \
    contextvars.ContextVar("spf_allocation_limit", default=None)


def _physical() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):     # no sysconf (Windows): not checked
        return None


PHYSICAL = _physical()


@contextmanager
def allocation_limit(nbytes: int, why: str) -> Iterator[None]:
    """Within the block (this thread or task), :func:`reserve` refuses any array over
    ``nbytes``, saying ``why`` the limit is there."""
    token = _LIMIT.set((nbytes, why))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def byte_limit() -> int:
    """The most bytes one array may take now (the :func:`allocation_limit` in force, the
    machine's memory), or 0 when nothing limits it: what generated C checks before it
    allocates (then :func:`reserve` gives the error)."""
    limit = _LIMIT.get()
    bounds = [b for b in (limit[0] if limit else None, PHYSICAL) if b is not None]
    return min(bounds) if bounds else 0


def reserve(nbytes: int, what: str) -> None:
    """ArgumentError before an array of ``nbytes`` for ``what`` is allocated when it would
    exceed the machine's physical memory (better than being killed once its pages are
    touched) or the :func:`allocation_limit` in force."""
    limit = _LIMIT.get()
    if limit is not None and nbytes > limit[0]:
        raise ArgumentError(f"{what} would take {nbytes / 1e6:.4g} MB, over the "
                            f"{limit[0] / 1e6:.4g} MB allowed ({limit[1]})")
    if PHYSICAL is not None and nbytes > PHYSICAL:
        raise ArgumentError(f"{what} would take {nbytes / 1e9:.4g} GB, more than this "
                            f"machine's memory ({PHYSICAL / 1e9:.4g} GB)")


def aligned_zeros(shape: int | tuple[int, ...], dtype: np.typing.DTypeLike = _FLOAT64,
                  what: str = "an array") -> np.ndarray:
    """Zeros whose data starts on a :data:`ALIGNMENT`-byte boundary (lazily zeroed pages,
    like ``np.zeros``).  numpy aligns only to 16 bytes; a vectorized loop over an output row
    whose start is not on a cache line splits every vector load and store over two lines
    (measured: TTM into per-fibre rows of 16 doubles ran 1.13-1.22x slower); outputs under
    :data:`SMALL` bytes are left as numpy aligns them.  Allocated in
    ``dtype`` with one cache line to spare and sliced (this runs on every kernel call that
    returns a dense array: a few hundred nanoseconds)."""
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = dtype if dtype is _FLOAT64 else np.dtype(dtype)
    size = dtype.itemsize
    n = math.prod(dims)
    if n * size < SMALL:
        return np.zeros(dims, dtype)
    reserve(n * size, f"{what} (shape {dims}, {dtype})")
    if ALIGNMENT % size:        # an item size that does not divide a cache line: by bytes
        raw = np.zeros(n * size + ALIGNMENT, dtype=np.uint8)
        start = -address(raw) % ALIGNMENT
        return raw[start:start + n * size].view(dtype).reshape(dims)
    raw = np.zeros(n + ALIGNMENT // size, dtype=dtype)
    start = -address(raw) % ALIGNMENT // size      # numpy aligns data to its item size
    out = raw[start:start + n]
    return out if len(dims) == 1 else out.reshape(dims)


def _data_pointer_offset() -> int | None:
    """Where CPython's numpy array object keeps its data pointer (``PyArrayObject_fields.data``,
    right after the object header), verified on probe arrays; None where that does not hold
    (another interpreter or header size), and :func:`address` asks numpy instead."""
    if platform.python_implementation() != "CPython":
        return None
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    base = np.arange(8.0)
    for probe in (base, base[3:], np.zeros((2, 3), dtype=np.int32), np.empty(0)):
        if ctypes.c_void_p.from_address(id(probe) + offset).value != probe.ctypes.data:
            return None
    return offset


_DATA_OFFSET = _data_pointer_offset()


def address(array: np.ndarray) -> int:
    """The address of ``array``'s first element (read from the array object, not through
    ``array.ctypes``, which costs a microsecond or two per call)."""
    if _DATA_OFFSET is None:
        return array.ctypes.data
    return _read_pointer(id(array) + _DATA_OFFSET).value or 0


_read_pointer = ctypes.c_void_p.from_address
