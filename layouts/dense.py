"""Reference packer for the dense layouts (row-major value array named ``data``)."""
import numpy as np


def pack(shape, coords, values, params):
    data = np.zeros(shape, dtype=values.dtype)
    data[tuple(coords)] = values
    return pack_dense(data, params)


def pack_dense(array, params):
    out = {f"n{k}": int(n) for k, n in enumerate(array.shape)}
    out["data"] = np.ascontiguousarray(array).reshape(-1)
    return out
