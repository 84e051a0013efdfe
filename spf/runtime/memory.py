"""Arrays spf allocates for kernels to write: aligned to a cache line."""
from __future__ import annotations

import math

import numpy as np

ALIGNMENT = 64   # bytes: a cache line, and one AVX-512 vector


def aligned_zeros(shape: int | tuple[int, ...], dtype: "np.typing.DTypeLike" = np.float64
                  ) -> np.ndarray:
    """Zeros whose data starts on a :data:`ALIGNMENT`-byte boundary (lazily zeroed pages,
    like ``np.zeros``).  numpy aligns only to 16 bytes; a vectorized loop over an output row
    whose start is not on a cache line splits every vector load and store over two lines
    (measured: TTM into per-fibre rows of 16 doubles ran 1.13-1.22x slower)."""
    dtype = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = math.prod(dims) * dtype.itemsize
    raw = np.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(dims)
