"""Reference packer for CSR: rows dense, columns sorted within each row."""
import numpy as np


def pack(shape, coords, values, params):
    rows, cols = coords
    order = np.lexsort((cols, rows))
    counts = np.bincount(rows, minlength=shape[0])
    row_ptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    return {"numRows": shape[0], "numCols": shape[1], "rowPtr": row_ptr,
            "colIdx": cols[order], "data": values[order]}


def pack_rows_as_given(shape, coords, values, params):
    """Rows grouped in order; within a row, the entries keep the order they were given in."""
    rows, cols = coords
    order = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=shape[0])
    row_ptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    return {"numRows": shape[0], "numCols": shape[1], "rowPtr": row_ptr,
            "colIdx": cols[order], "data": values[order]}
