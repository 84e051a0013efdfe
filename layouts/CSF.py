"""Reference packer for CSF of order 3: coordinates sorted lexicographically, one fiber per
distinct prefix (i) and (i, j)."""
import numpy as np


def pack(shape, coords, values, params):
    c0, c1, c2 = coords
    order = np.lexsort((c2, c1, c0))
    c0, c1, c2, values = c0[order], c1[order], c2[order], values[order]
    nnz = len(values)
    # a new (i, j) fiber starts where i or j changes; a new root fiber where i changes
    new1 = np.ones(nnz, dtype=bool)
    new0 = np.ones(nnz, dtype=bool)
    if nnz:
        new0[1:] = c0[1:] != c0[:-1]
        new1[1:] = new0[1:] | (c1[1:] != c1[:-1])
    starts1 = np.flatnonzero(new1)           # first nonzero of each (i, j) fiber
    ptr2 = np.append(starts1, nnz).astype(np.int64)
    idx1 = c1[starts1]
    root_of_fiber = new0[starts1]            # fiber p1 starts a new root fiber
    starts0 = np.flatnonzero(root_of_fiber)
    ptr1 = np.append(starts0, len(starts1)).astype(np.int64)
    idx0 = c0[starts1][starts0]
    return {"dim0": shape[0], "dim1": shape[1], "dim2": shape[2], "n0": len(starts0),
            "idx0": idx0, "ptr1": ptr1, "idx1": idx1, "ptr2": ptr2, "idx2": c2,
            "data": values}
