"""Reference packer for DIA: one stored diagonal per distinct offset (column - row) present."""
import numpy as np


def pack(shape, coords, values, params):
    n_rows, n_cols = shape
    rows, cols = coords
    offsets = np.unique(cols - rows)
    data = np.zeros((len(offsets), n_rows), dtype=values.dtype)
    data[np.searchsorted(offsets, cols - rows), rows] = values
    return {"numRows": n_rows, "numCols": n_cols, "numDiags": len(offsets),
            "offset": offsets.astype(np.int64), "data": data}
