"""Reference packer for DCSR: only nonempty rows are stored (rowIdx), columns sorted per row."""
import numpy as np


def pack(shape, coords, values, params):
    rows, cols = coords
    order = np.lexsort((cols, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    row_idx, counts = np.unique(rows, return_counts=True)
    row_ptr = np.zeros(len(row_idx) + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    return {"numRows": shape[0], "numCols": shape[1], "numNZRows": len(row_idx),
            "rowIdx": row_idx.astype(np.int64), "rowPtr": row_ptr, "colIdx": cols,
            "data": values}
