"""Reference packer for HYB: each row's first ``width`` nonzeros (by column) in the ELL part,
the rest in the COO part; width = the median row count (at least 1), so that long rows do
not pad every other row."""
import numpy as np
from spf.layouts.ELL import row_slots


def pack(shape, coords, values, params):
    n_rows, n_cols = shape
    rows, cols, values, slot, counts = row_slots(n_rows, coords, values)
    width = max(1, int(np.median(counts))) if n_rows else 1
    in_ell = slot < width
    col_idx = np.full((n_rows, width), -1, dtype=np.int64)
    ell = np.zeros((n_rows, width), dtype=values.dtype)
    col_idx[rows[in_ell], slot[in_ell]] = cols[in_ell]
    ell[rows[in_ell], slot[in_ell]] = values[in_ell]
    coo = ~in_ell
    return {"numRows": n_rows, "numCols": n_cols, "width": width, "nnz": int(coo.sum()),
            "colIdx": col_idx, "rowIdx": rows[coo], "cooCol": cols[coo],
            "data": np.concatenate([ell.reshape(-1), values[coo]])}
