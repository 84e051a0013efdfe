"""Reference packer for CSC: columns dense, rows sorted within each column."""
import numpy as np


def pack(shape, coords, values, params):
    rows, cols = coords
    order = np.lexsort((rows, cols))
    counts = np.bincount(cols, minlength=shape[1])
    col_ptr = np.zeros(shape[1] + 1, dtype=np.int64)
    np.cumsum(counts, out=col_ptr[1:])
    return {"numRows": shape[0], "numCols": shape[1], "colPtr": col_ptr,
            "rowIdx": rows[order], "data": values[order]}
