"""Reference packer for LowerTri: row-packed lower triangle of a square matrix."""
import numpy as np


def pack(shape, coords, values, params):
    n_rows, n_cols = shape
    if n_rows != n_cols:
        raise ValueError(f"LowerTri stores square matrices; got shape {tuple(shape)}")
    rows, cols = coords
    above = np.flatnonzero(cols > rows)
    if above.size:
        k = int(above[0])
        raise ValueError(f"LowerTri cannot store entry ({int(rows[k])}, {int(cols[k])}) above "
                         f"the diagonal ({above.size} such entries)")
    data = np.zeros(n_rows * (n_rows + 1) // 2, dtype=values.dtype)
    data[rows * (rows + 1) // 2 + cols] = values
    return {"numRows": n_rows, "data": data}
