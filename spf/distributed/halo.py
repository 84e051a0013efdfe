"""The blocks of a distributed matrix-times-dense kernel and what each reads: a 1-D partition
(row blocks) or a 2-D one (row blocks x column blocks), each block's entries renumbered to its
own rows and to the distinct columns it reads (its local x), and, for a chunking of the dense
operand, the positions each block gathers from each chunk.  Everything comes from the
operand's entries, read through its layout (no format named); the bytes a call moves follow
from it (the halo: what a block gathers from chunks on other workers, and in 2-D the partial
output rows folded into another block's rows).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..tensor import Tensor

WORD = 8        # bytes of a float64 vector element, the unit of the model


@dataclass(frozen=True)
class Block:
    """One block: the output rows ``rows`` (a span of the cut dimension), the global
    columns it reads (sorted, distinct), its entries with rows from 0 and columns numbered
    by their place in ``columns`` (``local``: in the operand's layout; None in a model-only
    plan), its grid place, and the rows its entries reach (``touched``, from 0: what its
    partial output sends to the fold in a 2-D grid)."""

    place: tuple[int, int]
    rows: tuple[int, int]
    columns: np.ndarray = field(repr=False)
    entries: int
    local: Tensor | None = field(repr=False)
    touched: np.ndarray = field(repr=False)     # its rows with an entry (from 0)


@dataclass(frozen=True)
class Gather:
    """What one block reads from one chunk of the dense operand: the chunk and the positions
    in it (in the order of the block's columns)."""

    chunk: int
    positions: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class HaloPlan:
    """The blocks (row-major over the ``grid``), the output's chunks (the row blocks' spans),
    and per block, for the dense operand's chunks ``chunks`` (their lengths), the gathers."""

    grid: tuple[int, int]
    blocks: tuple[Block, ...]
    row_spans: tuple[tuple[int, int], ...]
    chunks: tuple[int, ...]
    gathers: tuple[tuple[Gather, ...], ...]

    @property
    def row_chunks(self) -> tuple[int, ...]:
        return tuple(hi - lo for lo, hi in self.row_spans)

    def chunk_worker(self, c: int) -> int:
        """The worker of chunk ``c`` in the model's placement: block k runs on worker k, the
        output's row block I is folded on the worker of its row's first block, and a chunk
        of the dense operand chunked like the output (an iteration's result) stays where it
        was folded; another chunking: chunk c on worker c (mod the blocks)."""
        if len(self.chunks) == self.grid[0]:
            return c * self.grid[1]
        return c % len(self.blocks)

    def bytes_per_call(self, itemsize: int = WORD) -> dict[str, int]:
        """The model (placement: :meth:`chunk_worker`): ``halo``, the elements blocks gather
        from chunks on other workers; ``fold``, in a 2-D grid the partial output rows (those
        a block's entries reach) sent to the worker folding their row block; ``max_node``,
        the most one worker receives; ``broadcast``, what sending the whole dense operand to
        every block and its whole output back would move."""
        received = [0] * len(self.blocks)
        for k, gs in enumerate(self.gathers):
            received[k] += sum(len(g.positions) for g in gs
                               if self.chunk_worker(g.chunk) != k) * itemsize
        halo = sum(received)
        fold = 0
        if self.grid[1] > 1:
            for k, b in enumerate(self.blocks):
                home = b.place[0] * self.grid[1]
                if k != home:
                    received[home] += len(b.touched) * itemsize
                    fold += len(b.touched) * itemsize
        n = sum(self.chunks)
        total_rows = self.row_spans[-1][1] if self.row_spans else 0
        return {"halo": halo, "fold": fold, "total": halo + fold,
                "max_node": max(received, default=0),
                "broadcast": len(self.blocks) * (n + total_rows) * itemsize}

    def for_chunks(self, chunks: tuple[int, ...]) -> HaloPlan:
        """The plan for another chunking of the dense operand."""
        return HaloPlan(self.grid, self.blocks, self.row_spans, chunks,
                        tuple(gathers(b.columns, chunks) for b in self.blocks))


def plan_blocks(tensor: Tensor, row_dim: int, grid: tuple[int, int],
                chunks: tuple[int, ...] | None = None, local: bool = True) -> HaloPlan:
    """``tensor`` (order 2, cut along ``row_dim``) cut into ``grid`` = (row blocks, column
    blocks), both balanced by entry count; ``chunks``: the dense operand's chunk lengths
    (default: the row blocks' lengths for a square operand, else as many equal pieces); ``local``
    False: the model only (the blocks' tensors are not built: ``Block.local`` is None)."""
    (r0, r1), values = _coordinates(tensor, row_dim)
    n_rows, n_cols = tensor.shape[row_dim], tensor.shape[1 - row_dim]
    row_cuts = _balanced(r0, n_rows, grid[0])
    col_cuts = _balanced(r1, n_cols, grid[1])
    blocks = []
    for (i, (lo, hi)), (j, (clo, chi)) in itertools.product(
            enumerate(itertools.pairwise(row_cuts)), enumerate(itertools.pairwise(col_cuts))):
        keep = (r0 >= lo) & (r0 < hi) & (r1 >= clo) & (r1 < chi)
        rows, cols = r0[keep], r1[keep]
        columns = np.unique(cols)
        local_cols = np.searchsorted(columns, cols)
        coords = [rows - lo, local_cols] if row_dim == 0 else [local_cols, rows - lo]
        shape = (hi - lo, len(columns)) if row_dim == 0 else (len(columns), hi - lo)
        part = tensor.with_entries(coords, values[keep], shape) if local else None
        blocks.append(Block((i, j), (int(lo), int(hi)), columns, int(keep.sum()), part,
                            np.unique(rows - lo)))
    spans = tuple((int(a), int(b)) for a, b in itertools.pairwise(row_cuts))
    if chunks is None:              # like the output (an iteration's result), or even
        chunks = tuple(b - a for a, b in spans) if n_cols == n_rows \
            else _even(n_cols, grid[0])
    return HaloPlan(grid, tuple(blocks), spans, chunks,
                    tuple(gathers(b.columns, chunks) for b in blocks))


def gathers(columns: np.ndarray, chunks: tuple[int, ...]) -> tuple[Gather, ...]:
    """The positions ``columns`` (sorted) fall at in each chunk they touch."""
    edges = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
    which = np.searchsorted(edges, columns, side="right") - 1
    return tuple(Gather(int(c), (columns[which == c] - edges[c]).astype(np.int64))
                 for c in np.unique(which))


def _coordinates(tensor: Tensor, row_dim: int) -> tuple[tuple[np.ndarray, np.ndarray],
                                                         np.ndarray]:
    coords, values = tensor.entries()
    rows = np.asarray(coords[row_dim], dtype=np.int64)
    cols = np.asarray(coords[1 - row_dim], dtype=np.int64)
    return (rows, cols), np.asarray(values)


def _balanced(index: np.ndarray, extent: int, parts: int) -> np.ndarray:
    """``parts + 1`` cut points of ``range(extent)`` with about equal entries between."""
    ends = np.cumsum(np.bincount(index, minlength=extent))
    total = int(ends[-1]) if extent else 0
    cuts = np.searchsorted(ends, [total * k / parts for k in range(1, parts)], side="left") + 1
    cuts = np.concatenate([[0], np.minimum(cuts, extent), [extent]])
    return np.maximum.accumulate(cuts).astype(np.int64)


def _even(n: int, parts: int) -> tuple[int, ...]:
    return tuple(int(b - a) for a, b in itertools.pairwise(np.linspace(0, n, parts + 1)
                                                             .astype(np.int64)))
