"""What runs on the Dask workers: the shipped kernel compiled once per process, a part's
call, the combination of two partial results, a block's gather and call, the fold of a row of
blocks (every function here is submitted by :mod:`.kernel` or :mod:`.arrays`)."""
from __future__ import annotations

import hashlib
import pickle
from typing import Any

import numpy as np

from ..front.semiring import Semiring

try:
    from distributed import WorkerPlugin as _Plugin
except ImportError:          # without the distributed extra: defined, never registered
    _Plugin = object         # type: ignore[assignment,misc]

_COMPILED: dict[str, Any] = {}
STATIC: dict[str, dict[Any, Any]] = {}     # what a Static plugin put on this worker, by name


class Static(_Plugin):
    """A Dask worker plugin holding data every task of a call needs and no task computes
    (the pickled kernel, the positions blocks gather): set up on every worker, those that
    join or restart later too, so tasks name it instead of depending on scattered data that
    Dask's memory manager may drop and fetch again."""

    def __init__(self, name: str, data: dict[Any, Any]):
        super().__init__()
        self.name, self.data = name, data

    def setup(self, worker: Any) -> None:
        STATIC[self.name] = self.data

    def teardown(self, worker: Any) -> None:
        STATIC.pop(self.name, None)


def static(name: str, key: Any) -> Any:
    """The data ``key`` of the plugin ``name`` on this worker."""
    return STATIC[name][key]


def compiled_on_worker(blob: bytes) -> Any:
    """The kernel in ``blob`` compiled from its shipped C source, once per process."""
    key = hashlib.sha256(blob).hexdigest()
    if key not in _COMPILED:
        _COMPILED[key] = pickle.loads(blob).compile()
    return _COMPILED[key]


def run_part(blob: bytes, args: dict[str, Any], span: tuple, axis: int | None) -> Any:
    """The kernel run on one part's ``args``: for rows, only the part's ``span`` of output
    dimension ``axis`` is returned (``axis`` None: nonzeros, the whole partial output)."""
    out = compiled_on_worker(blob)(**args)
    if axis is not None and span and isinstance(out, np.ndarray):   # only its slice travels
        index = [slice(None)] * out.ndim
        index[axis] = slice(*span)
        return out[tuple(index)]
    return out


def combine_pair(blob: bytes | None, semiring: Any, a: Any, b: Any) -> Any:
    if blob is None:                              # scalar outputs
        return semiring.add_value(a, b)
    return compiled_on_worker(blob)(P=a, Q=b)


def take(chunk: np.ndarray, plugin: str, key: Any) -> np.ndarray:
    """The elements of ``chunk`` at the positions the plugin holds under ``key``."""
    return np.ascontiguousarray(chunk[static(plugin, key)])


def run_block(plugin: str, k: int, cut: str, part: Any, name: str, tail: tuple[int, ...],
              dtype: Any, pieces: list[np.ndarray]) -> np.ndarray:
    """Block ``k``'s kernel call (the kernel from the plugin): its entries and its local X
    (the gathered pieces in order); in a 2-D grid only the rows its entries reach (the
    plugin's ``("rows", k)``), the part of the partial output the fold needs."""
    x = np.concatenate(pieces) if pieces else np.zeros((0, *tail), dtype)
    y = compiled_on_worker(static(plugin, "kernel"))(**{cut: part, name: x})
    rows = STATIC[plugin].get(("rows", k))
    return y if rows is None else np.ascontiguousarray(y[rows])


def fold(semiring: Semiring, plugin: str, blocks: list[int], partials: list[np.ndarray]
         ) -> np.ndarray:
    """A row of blocks' partial outputs (each over the rows its entries reach, the plugin's
    ``("rows", k)``; a 1-D block: all its rows) added by the semiring into the row block's
    output, the semiring's zero where no block reaches."""
    if len(partials) == 1 and ("rows", blocks[0]) not in STATIC[plugin]:
        return partials[0]
    size, tail = STATIC[plugin][("size", blocks[0])], partials[0].shape[1:]
    out = np.full((size, *tail), semiring.zero, dtype=partials[0].dtype)
    add = np.add if semiring.is_plus_times else np.frompyfunc(semiring.add_value, 2, 1)
    for k, p in zip(blocks, partials):
        rows = STATIC[plugin][("rows", k)]
        out[rows] = np.asarray(add(out[rows], p), dtype=out.dtype)
    return out
