"""Calls of a distributed kernel on ``dask.array`` operands: ``Y(i, ...) = A(i, j) * X(j, ...)``
with A cut into the blocks of a :class:`~spf.distributed.halo.HaloPlan`.  X is persisted on
the cluster in its chunks; for each block a small task on the worker holding a chunk takes
the elements the block reads from it (the halo), the block's task runs the kernel on its
entries and those pieces, and the blocks of a row (one in 1-D) are added by the semiring.
The result is a ``dask.array`` over futures: its chunks stay where they were computed, so an
iterative method written with ``dask.array`` operations never moves a vector through the
client.  The scheduler places each task (Dask's own placement: next to its largest input).
"""
from __future__ import annotations

import uuid
from typing import Any

from ..errors import ArgumentError
from ..front.semiring import Semiring
from ..kernel import Kernel
from . import worker
from .halo import HaloPlan


def dense_operand(kernel: Kernel, cut: str, row_dim: int) -> str:
    """The dense operand of ``Y(i, ...) = A(i, j) * X(j, ...)`` (``cut``: A, cut along
    ``row_dim``), checked to have that shape; else an ArgumentError saying which shape
    dask.array operands need."""
    expr = kernel.expr
    need = (f"distributed: dask.array operands need a product Y(i, ...) = A(i, j) * X(j, ...) "
            f"with A the cut operand and X dense; {expr.text!r} is not")
    factors = {a.tensor: a for a in expr.factors}
    cut_access = factors.get(cut)
    if cut_access is None or len(cut_access.indices) != 2 or len(factors) != 2:
        raise ArgumentError(need)
    row, col = cut_access.indices[row_dim], cut_access.indices[1 - row_dim]
    (other,) = [a for a in expr.factors if a.tensor != cut]
    out = expr.output.indices
    if not other.indices or other.indices[0] != col or not out or out[0] != row \
            or tuple(out[1:]) != tuple(other.indices[1:]) or other.tensor not in kernel.layouts \
            or kernel.layouts[other.tensor].dense_array is None:
        raise ArgumentError(need)
    return other.tensor


def call(plan: HaloPlan, plugin: str, cut: str, parts: list[Any], homes: list[str],
         name: str, x: Any, output: str, semiring: Semiring, dtype: Any) -> Any:
    """``Y`` as a lazy dask.array (see the module docstring): its graph gathers from ``x``'s
    chunks and runs the blocks; ``parts[k]`` (a future, held by worker ``homes[k]``) holds
    block k's entries of the operand ``cut``; the worker plugin ``plugin``
    (:func:`static_data`) the kernel and the positions.  Block k's task prefers its part's
    worker and, where ``x`` is chunked like the output (an iteration's result), a gather
    prefers the worker that computed its chunk: Dask's scheduler then moves only the halo.
    Nothing runs until the result (or what is built on it) is persisted or computed."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

    token = uuid.uuid4().hex
    key, gather, block = f"spf-{output}-{token}", f"spf-gather-{token}", f"spf-block-{token}"
    tail = (0,) * (x.ndim - 1)
    columns = plan.grid[1]
    aligned = tuple(x.chunks[0]) == plan.row_chunks
    gathers: dict[str, dict[Any, Any]] = {}      # by the worker preferred ("": any)
    blocks: dict[str, dict[Any, Any]] = {}
    for k, gs in enumerate(plan.gathers):
        for g in gs:
            home = homes[g.chunk * columns] if aligned else ""
            gathers.setdefault(home, {})[(gather, k, g.chunk)] = (
                worker.take, (x.name, g.chunk, *tail), plugin, (k, g.chunk))
        blocks.setdefault(homes[k], {})[(block, k)] = (
            worker.run_block, plugin, k, cut, parts[k], name, x.shape[1:], x.dtype,
            [(gather, k, g.chunk) for g in gs])
    folds = {}
    for i in range(plan.grid[0]):
        mine = list(range(i * columns, (i + 1) * columns))
        folds[(key, i, *tail)] = (worker.fold, semiring, plugin, mine, [(block, k) for k in mine])
    graph = x.__dask_graph__()
    layers, deps = dict(graph.layers), {n: set(d) for n, d in graph.dependencies.items()}
    below = set(x.__dask_layers__())
    for stage, by_worker in ((gather, gathers), (block, blocks)):
        names = set()
        for n, (w, tasks) in enumerate(by_worker.items()):
            where = {"workers": [w], "allow_other_workers": True} if w else None
            layers[f"{stage}-{n}"] = MaterializedLayer(tasks, annotations=where)
            deps[f"{stage}-{n}"] = set(below)
            names.add(f"{stage}-{n}")
        below = names or below
    layers[key] = MaterializedLayer(folds)
    deps[key] = set(below)
    chunks = (plan.row_chunks, *((s,) for s in x.shape[1:]))
    return da.Array(HighLevelGraph(layers, deps), key, chunks, dtype=dtype)


def static_data(plan: HaloPlan, blob: bytes) -> dict[Any, Any]:
    """What the worker plugin of a call holds: the pickled kernel; under (block, chunk) the
    positions the block gathers from the chunk; in a 2-D grid, per block, the rows of its
    row block its entries reach and that row block's size (the fold's)."""
    data: dict[Any, Any] = {"kernel": blob}
    for k, gs in enumerate(plan.gathers):
        data.update({(k, g.chunk): g.positions for g in gs})
    if plan.grid[1] > 1:                # 2-D: the rows each block's partial output reaches
        for k, b in enumerate(plan.blocks):
            data[("rows", k)] = b.touched
            data[("size", k)] = b.rows[1] - b.rows[0]
    return data


def single_chunked(x: Any) -> Any:
    """``x`` rechunked to one chunk along every axis but the first (once, lazily)."""
    return x.rechunk(dict.fromkeys(range(1, x.ndim), -1)) if x.ndim > 1 else x
