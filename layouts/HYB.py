"""Reference packer for HYB: each row's first ``width`` nonzeros (by column) in the ELL part,
the rest in the COO part; width = the median row count (at least 1), so that long rows do
not pad every other row."""
import numpy as np


def pack(shape, coords, values, params):
    n_rows, n_cols = shape
    rows, cols = coords
    order = np.lexsort((cols, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    counts = np.bincount(rows, minlength=n_rows) if n_rows else np.zeros(0, dtype=np.int64)
    width = max(1, int(np.median(counts))) if n_rows else 1
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    slot = np.arange(len(values)) - starts[rows]
    in_ell = slot < width
    col_idx = np.full((n_rows, width), -1, dtype=np.int64)
    ell = np.zeros((n_rows, width), dtype=np.float64)
    col_idx[rows[in_ell], slot[in_ell]] = cols[in_ell]
    ell[rows[in_ell], slot[in_ell]] = values[in_ell]
    coo = ~in_ell
    return {"numRows": n_rows, "numCols": n_cols, "width": width, "nnz": int(coo.sum()),
            "colIdx": col_idx, "rowIdx": rows[coo], "cooCol": cols[coo],
            "data": np.concatenate([ell.reshape(-1), values[coo]])}
