"""Reference packer for ELL: width = the largest row count; each row's nonzeros sorted by
column and left-justified, the remaining slots padded with column -1 and value 0."""
import numpy as np


def pack(shape, coords, values, params):
    n_rows, n_cols = shape
    rows, cols = coords
    order = np.lexsort((cols, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    counts = np.bincount(rows, minlength=n_rows) if n_rows else np.zeros(0, dtype=np.int64)
    width = int(counts.max()) if len(values) else 0
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    slot = np.arange(len(values)) - starts[rows]
    col_idx = np.full((n_rows, width), -1, dtype=np.int64)
    data = np.zeros((n_rows, width), dtype=np.float64)
    col_idx[rows, slot] = cols
    data[rows, slot] = values
    return {"numRows": n_rows, "numCols": n_cols, "width": width, "colIdx": col_idx,
            "data": data}
