"""Reference packers for coordinate (COO) layouts: order 2, order 3 and any order."""
import numpy as np


def _coo(shape, rows, cols, values):
    return {"numRows": shape[0], "numCols": shape[1], "numNNZ": len(values),
            "rowIdx": rows, "colIdx": cols, "data": values}


def pack_as_given(shape, coords, values, params):
    return _coo(shape, coords[0], coords[1], values)


def pack_sorted(shape, coords, values, params):
    order = np.lexsort((coords[1], coords[0]))
    return _coo(shape, coords[0][order], coords[1][order], values[order])


def pack3_as_given(shape, coords, values, params):
    return {"dim0": shape[0], "dim1": shape[1], "dim2": shape[2], "nnz": len(values),
            "idx0": coords[0], "idx1": coords[1], "idx2": coords[2], "data": values}


def pack_any_order(shape, coords, values, params):
    """COOTensor: one coordinate array per dimension (``idx0`` ..), in the order given."""
    fields = {f"dim{d}": n for d, n in enumerate(shape)}
    fields.update({f"idx{d}": c for d, c in enumerate(coords)})
    return {**fields, "nnz": len(values), "data": values}
