"""Reference packer for CUDAmma16x16: a 16x16 matrix with at most one nonzero in each aligned
pair of columns (2*pj, 2*pj + 1) of each row.  A pair without a nonzero keeps value 0 at
offset 0."""
import numpy as np


def pack(shape, coords, values, params):
    if tuple(shape) != (16, 16):
        raise ValueError(f"CUDAmma16x16 stores 16x16 matrices only; got shape {tuple(shape)}")
    rows, cols = coords
    pairs = rows * 8 + cols // 2
    uniq, counts = np.unique(pairs, return_counts=True)
    if (counts > 1).any():
        p = int(uniq[np.argmax(counts > 1)])
        r, pj = divmod(p, 8)
        raise ValueError(f"CUDAmma16x16 keeps at most one nonzero per aligned column pair; row {r} "
                         f"has nonzeros in both columns {2 * pj} and {2 * pj + 1}")
    data = np.zeros((16, 8), dtype=values.dtype)
    offset = np.zeros(512, dtype=np.int64)
    data[rows, cols // 2] = values
    offset[32 * rows + 4 * (cols // 2) + 1] = cols % 2
    return {"data": data, "offset": offset}
