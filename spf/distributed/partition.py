"""How a kernel is cut for a distributed run, from its own dependence analysis, and how the
parts of an operand and of a result are cut and joined through the layout's storage arrays
(or its entries and generated conversions): no format is named."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from ..front.storage import Storage, StorageLevel, storage_or_none
from ..kernel import Kernel
from ..tensor import Tensor

ROWS, NONZEROS = "rows", "nonzeros"


@dataclass(frozen=True)
class Partition:
    """How a kernel is cut: the operand whose entries are split, the mode (``rows`` or
    ``nonzeros``), for ``rows`` the operand's dimension cut into ranges and the output
    dimension they are, and why (from the dependence analysis)."""

    operand: str
    mode: str
    dim: int | None
    out_axis: int | None
    why: str

    def cut_axes(self) -> tuple[int, int]:
        """``rows``: the operand's dimension cut into ranges and the output dimension they are."""
        if self.dim is None or self.out_axis is None:
            raise ValueError(f"a {self.mode} partition cuts no dimension")
        return self.dim, self.out_axis


def partition_of(kernel: Kernel) -> Partition:
    """The partition of ``kernel`` (a :class:`spf.Kernel` with one product)."""
    expr = kernel.expr
    if kernel.terms:
        raise SpecError(f"distributed: {expr} is a sum of terms; a distributed run "
                        "partitions one product (run each term's kernel)", expr.source)
    if expr.accumulate:
        raise SpecError(f"distributed: {expr} accumulates ('+='); a distributed run computes "
                        "the output ('=')", expr.source)
    outer = kernel.analysis().loops[0]
    written = {c: name for name, c in kernel.c_names.items()}   # the space's names: the C's
    owner = next((written.get(u.name, u.name) for u in kernel.space.uses
                  if outer.var in u.vars), None)
    access = next((a for a in expr.factors if a.tensor == owner), None)
    if access is None:
        raise SpecError(f"distributed: the outermost loop {outer.var} runs over no sparse "
                        "operand's storage, so there are no entries to partition", expr.source)
    owner = access.tensor
    storage = storage_or_none(kernel.layouts[owner])
    if not outer.carried and storage is not None:
        dim = storage.order[0]
        index = access.indices[dim]
        if index in expr.output.indices:
            return Partition(owner, ROWS, dim, expr.output.indices.index(index), (
                f"loop {outer.var} carries no dependence "
                f"({', '.join(outer.disproved_by) or 'none'}), "
                f"so ranges of {owner}'s {index} write disjoint slices of "
                f"{expr.output.tensor}: {owner}'s entries are cut into {index} ranges balanced "
                "by entry count and the slices concatenated"))
    if owner in kernel.read_densely:
        raise SpecError(f"distributed: fill_values=True reads {owner} densely (zero does not "
                        f"annihilate mul), so its absent entries take part in every partial "
                        f"{expr.output.tensor}: its entries cannot be split into partial "
                        "outputs", expr.source)
    carried = f"carries {outer.dependence}" if outer.carried else "is not over an output index"
    return Partition(owner, NONZEROS, None, None, (
        f"loop {outer.var} {carried}, so {owner}'s entries are cut into parts of equal size, "
        f"each part computes a partial {expr.output.tensor} and the partials are combined by "
        f"{kernel.semiring.name}'s add in a tree on the cluster"))


def cut(tensor: Tensor, partition: Partition, parts: int) -> list[tuple[Tensor, tuple]]:
    """``tensor`` cut into ``parts`` tensors in its layout and shape (each with a subset of
    its entries, balanced by their count) and, for ``rows``, the coordinate range of
    ``partition.dim`` each covers (the ranges tile the dimension).  Through the layout's own
    storage arrays where it has a storage description whose root is ordered (rows) or any
    (nonzeros); otherwise through its entries and generated conversions."""
    storage = storage_or_none(tensor.layout)
    if storage is not None and (partition.mode == NONZEROS or _ordered_root(storage)):
        return _cut_storage(tensor, storage, partition, parts)
    return _cut_entries(tensor, partition, parts)


def _ordered_root(storage: Storage) -> bool:
    """The root level's positions follow its coordinate (dense, or compressed and sorted)."""
    return storage.levels[0].kind.value == "dense" or storage.free_tail < len(storage.order)


def _cut_storage(tensor: Tensor, storage: Storage, partition: Partition,
                 parts: int) -> list[tuple[Tensor, tuple]]:
    """Root positions cut where the running count of entries below them (the composed
    pointer arrays) crosses each ``1/parts`` of the total."""
    root = storage.levels[0]
    dense = root.kind.value == "dense"
    count = _root_positions(tensor, root)
    starts = np.arange(count + 1)
    for level in storage.levels[1:]:
        starts = (np.asarray(tensor.fields[level.pointer])[starts] if level.pointer
                  else starts * tensor.shape[level.coords[0][0]])
    total = starts[-1] - starts[0]
    cuts = np.searchsorted(starts, [starts[0] + total * k / parts for k in range(1, parts)])
    cuts = np.concatenate([[0], np.minimum(cuts, count), [count]]).astype(np.int64)
    if dense or partition.mode == NONZEROS:
        spans = [(int(a), int(b)) for a, b in itertools.pairwise(cuts)]
    else:                                  # sorted compressed root: coordinate ranges
        crd = np.asarray(tensor.fields[root.arrays[0]])
        extent = tensor.shape[partition.cut_axes()[0]]
        edge = [0] + [int(crd[c]) if c < count else extent for c in cuts[1:-1]] + [extent]
        spans = list(itertools.pairwise(edge))
    return [(_slice(tensor, storage, int(a), int(b)),
             span if partition.mode == ROWS else ())
            for (a, b), span in zip(itertools.pairwise(cuts), spans)]


def _root_positions(tensor: Tensor, root: StorageLevel) -> int:
    """How many positions ``tensor``'s root level has: its coordinate's extent (dense) or
    its count field (compressed)."""
    if root.count is None:
        return tensor.shape[root.coords[0][0]]
    return int(tensor.fields[root.count])


def _slice(tensor: Tensor, storage: Storage, first: int, last: int) -> Tensor:
    """``tensor`` with only root positions ``first..last-1`` and the entries below them, in
    its layout and shape (a dense root keeps every position, the others empty)."""
    fields = tensor.fields
    arrays: dict[str, np.ndarray] = {}
    own = (first, last)
    full = storage.levels[0].kind.value == "dense"    # positions exist whether used or not
    for k, level in enumerate(storage.levels):
        s, e = own
        if k and level.pointer:
            ptr = np.asarray(fields[level.pointer])
            if full:                    # every position of the dense levels keeps a slot
                new = np.zeros_like(ptr)
                new[s + 1:e + 1] = ptr[s + 1:e + 1] - ptr[s]
                new[e + 1:] = ptr[e] - ptr[s]
                full = False
            else:
                new = ptr[s:e + 1] - ptr[s]
            arrays[level.pointer] = new
            own = (int(ptr[s]), int(ptr[e]))
        elif k:
            extent = tensor.shape[level.coords[0][0]]
            own = (s * extent, e * extent)
        for _, field in level.coords:
            if field is not None:
                arrays[field] = np.asarray(fields[field])[own[0]:own[1]]
    va = storage.value_array
    if va is None:                      # a pattern layout: no values to split
        return Tensor.from_arrays(tensor.layout, tensor.shape, arrays)
    values = np.asarray(tensor.values)
    if full:                            # dense all the way down: zeros outside the part
        arrays[va] = np.zeros_like(values)
        arrays[va][own[0]:own[1]] = values[own[0]:own[1]]
    else:
        arrays[va] = values[own[0]:own[1]]
    return Tensor.from_arrays(tensor.layout, tensor.shape, arrays)


def _cut_entries(tensor: Tensor, partition: Partition,
                 parts: int) -> list[tuple[Tensor, tuple]]:
    coords, values = tensor.entries()
    n = values.size
    pieces: list[tuple[np.ndarray, tuple[int, ...]]] = []     # entries kept, span
    if partition.mode == ROWS:
        dim = partition.cut_axes()[0]
        extent = tensor.shape[dim]
        counts = np.bincount(coords[dim], minlength=extent)
        ends = np.searchsorted(np.cumsum(counts), [n * (k + 1) / parts for k in range(parts)],
                               side="left") + 1
        bounds = np.minimum(np.concatenate([[0], ends]), extent)
        bounds[-1] = extent
        for lo, hi in itertools.pairwise(bounds):
            keep = (coords[dim] >= lo) & (coords[dim] < hi)
            pieces.append((keep, (int(lo), int(hi))))
    else:
        edges = [n * k // parts for k in range(parts + 1)]
        for lo, hi in itertools.pairwise(edges):
            keep = np.zeros(n, bool)
            keep[lo:hi] = True
            pieces.append((keep, ()))
    return [(tensor.with_entries([c[keep] for c in coords], values[keep]), span)
            for keep, span in pieces]


def concatenate_storage(parts: list[Tensor], spans: list[tuple[int, int]],
                        axis: int) -> Tensor | None:
    """The parts (one layout, one shape, part k's entries within ``spans[k]`` of dimension
    ``axis``) joined array by array, level by level down the layout's storage, when ``axis``
    is its outermost storage dimension; None otherwise.  Each part contributes its own
    positions at every level: the root positions whose coordinate is in its span (the root
    must be ordered), and below, the children its pointer array gives those positions."""
    first = parts[0]
    storage = storage_or_none(first.layout)
    if storage is None or storage.order[0] != axis or not _ordered_root(storage):
        return None
    root = storage.levels[0]
    if root.kind.value == "dense":
        own = list(spans)
    else:                               # the root positions whose coordinate is in the span
        own = []
        for p, (lo, hi) in zip(parts, spans):
            crd = np.asarray(p.fields[root.arrays[0]])[:_root_positions(p, root)]
            own.append((int(np.searchsorted(crd, lo)), int(np.searchsorted(crd, hi))))
    arrays: dict[str, np.ndarray] = {}
    for k, level in enumerate(storage.levels):
        if k and level.pointer:
            ptrs = [p.fields[level.pointer] for p in parts]
            offsets = np.cumsum([0] + [int(q[e] - q[s]) for q, (s, e) in zip(ptrs, own)])
            arrays[level.pointer] = np.concatenate(
                [[0]] + [q[s + 1:e + 1] - q[s] + off for q, (s, e), off in
                         zip(ptrs, own, offsets)])
            own = [(int(q[s]), int(q[e])) for q, (s, e) in zip(ptrs, own)]
        elif k:                          # dense below a level: a full row per position
            extent = first.shape[level.coords[0][0]]
            own = [(s * extent, e * extent) for s, e in own]
        for _, field in level.coords:
            if field is not None:
                arrays[field] = np.concatenate([p.fields[field][s:e]
                                                for p, (s, e) in zip(parts, own)])
    if storage.value_array is not None:     # else a pattern layout: no values to join
        arrays[storage.value_array] = np.concatenate([p.values[s:e]
                                                      for p, (s, e) in zip(parts, own)])
    out = Tensor.from_arrays(first.layout, first.shape, arrays)
    out.fill = first.fill
    return out


def join_rows(results: list[Any], spans: list[tuple], axis: int) -> Any:
    """Row parts' results (part k's own rows: ``spans[k]`` of dimension ``axis``) joined:
    numpy slices concatenated; tensors array by array down the storage where ``axis`` is its
    outermost dimension, else through their entries."""
    if isinstance(results[0], np.ndarray):
        return np.concatenate(results, axis=axis)
    joined = concatenate_storage(results, spans, axis)
    if joined is not None:
        return joined
    first = results[0]
    entries = []
    for part, (lo, hi) in zip(results, spans):     # a part's own slice only
        coords, values = part.entries()
        own = (coords[axis] >= lo) & (coords[axis] < hi)
        entries.append(([c[own] for c in coords], values[own]))
    return first.with_entries(
        [np.concatenate([c[d] for c, _ in entries]) for d in range(first.layout.order)],
        np.concatenate([v for _, v in entries]))
