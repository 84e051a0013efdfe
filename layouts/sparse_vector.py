"""Reference packers for sparse vectors.

``pack`` sorts coordinates increasingly; ``pack_decreasing`` sorts them decreasingly;
``pack_as_given`` keeps the caller's order (for layouts without an order property).
"""
import numpy as np


def _vector(shape, idx, values):
    return {"size": shape[0], "len": len(idx), "idx": idx, "val": values}


def pack(shape, coords, values, params):
    order = np.argsort(coords[0], kind="stable")
    return _vector(shape, coords[0][order], values[order])


def pack_decreasing(shape, coords, values, params):
    order = np.argsort(-coords[0], kind="stable")
    return _vector(shape, coords[0][order], values[order])


def pack_as_given(shape, coords, values, params):
    return _vector(shape, coords[0], values)
