"""Reference packer for CSF_CCD: (i, j) fibres compressed as in CSF, the last level dense."""
import numpy as np


def pack(shape, coords, values, params):
    i, j, k = coords
    dim0, dim1, width = shape
    fibre = i.astype(np.int64) * dim1 + j
    fibres, where = np.unique(fibre, return_inverse=True)
    fi, fj = fibres // dim1, fibres % dim1
    roots, first = np.unique(fi, return_index=True)
    ptr1 = np.append(first, len(fibres))
    data = np.zeros((len(fibres), width), dtype=values.dtype)
    np.add.at(data, (where, k), values)
    return {"dim0": dim0, "dim1": dim1, "width": width, "n0": len(roots), "idx0": roots,
            "ptr1": ptr1, "idx1": fj, "data": data.reshape(-1)}
