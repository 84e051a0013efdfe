"""Reference packer for ELL: width = the largest row count; each row's nonzeros sorted by
column and left-justified, the remaining slots padded with column -1 and value 0."""
import numpy as np


def row_slots(n_rows, coords, values):
    """Entries sorted by (row, column), with each one's slot within its row and the count of
    every row: (rows, cols, values, slot, counts)."""
    rows, cols = coords
    order = np.lexsort((cols, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    counts = np.bincount(rows, minlength=n_rows) if n_rows else np.zeros(0, dtype=np.int64)
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return rows, cols, values, np.arange(len(values)) - starts[rows], counts


def pack(shape, coords, values, params):
    n_rows, n_cols = shape
    rows, cols, values, slot, counts = row_slots(n_rows, coords, values)
    width = int(counts.max()) if len(values) else 0
    col_idx = np.full((n_rows, width), -1, dtype=np.int64)
    data = np.zeros((n_rows, width), dtype=values.dtype)
    col_idx[rows, slot] = cols
    data[rows, slot] = values
    return {"numRows": n_rows, "numCols": n_cols, "width": width, "colIdx": col_idx,
            "data": data}
