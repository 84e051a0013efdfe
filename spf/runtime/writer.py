"""Entries written into a layout by its :class:`~spf.front.writing.WritePlan`, vectorized.

Given an entry list (coordinates and values, no coordinate twice), the solved atoms are
evaluated, each position index is ranked (sorted keys, groups, prefix sums), every field the
plan determines is filled (markers included), and every constraint of the written part is
checked per entry.  The tensor is then read back through its whole relation by generated code
(every part of a union, every position) and must give exactly the entries
(:func:`written`, :func:`read_back`, which also verifies what packers build).  Errors name the
entry and what it violates.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, SpecError
from ..front import index_expr as ie
from ..front.layout import Layout
from ..front.layout_file import layout_error
from ..front.storage import storage_of, storage_or_none
from ..front.terms import Aff, Constraint, FloorDiv, UFCall, format_constraint
from ..front.writing import (
    PartWrite,
    Permuted,
    Position,
    Run,
    Start,
    WritePlan,
    entry_filters,
    write_plan,
)
from .fields import implicit_values, index_max, wider_hint
from .memory import aligned_zeros, reserve
from .stored import StoredTensor, check_within_shape, tensor_class

Vec = np.ndarray
Env = dict[str, Any]                 # names -> int or int64 vector (one value per entry)


class _Arrays:
    """The arrays written so far, flat, with their extents."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.flat: dict[str, np.ndarray] = {}
        self.dims: dict[str, tuple[int, ...]] = {}

    def allocate(self, name: str, scalars: Mapping[str, int], fill: int = 0) -> np.ndarray:
        """``name`` sized by its extents: the value array zeroed (64-byte aligned), an
        index array filled with ``fill`` in int64 (cast to its width at the end)."""
        dims = tuple(self.extent(name, d, scalars) for d in self.layout.fields[name].dims)
        if any(d < 0 for d in dims):
            raise ArgumentError(f"{self.layout.name}: {name} would have extents {dims}")
        size = math.prod(dims)
        what = f"{self.layout.name}'s {name}"
        if name == self.layout.value_array:
            arr = aligned_zeros(max(size, 1), self.layout.value_type.dtype, what)[:size]
        else:
            reserve(8 * size, what)
            arr = np.full(size, fill, np.int64)
        self.flat[name], self.dims[name] = arr, dims
        return arr

    def extent(self, name: str, dim: ie.IExpr, scalars: Mapping[str, int]) -> int:
        """An extent of ``name`` as declared, from what is written so far; SpecError at its
        declaration when it needs a field the writer has not determined yet (or cannot
        evaluate)."""
        try:
            return ie.evaluate(dim, scalars, self.flat)
        except (KeyError, IndexError, ValueError) as exc:
            what = f"{exc.args[0]} is not known yet" if isinstance(exc, KeyError) else exc
            raise layout_error(self.layout, f"layout {self.layout.name}: the extent of {name} "
                               f"cannot be computed when it is written ({what})", name) from None

    def offset(self, name: str, args: Sequence[Any]) -> Vec:
        """Row-major offsets of ``name[args...]``; -1 where out of bounds."""
        dims = self.dims[name]
        flat = np.zeros(np.broadcast(*args, 0).shape, np.int64)
        inside = np.ones(flat.shape, bool)
        for a, n in zip(args, dims):
            inside &= (a >= 0) & (a < n)
            flat = flat * n + a
        return np.where(inside, flat, -1)


def vec(a: Aff, env: Env, arrays: _Arrays | None = None) -> Any:
    """``a`` per entry (names from ``env``, index-array reads from ``arrays``; a read out of
    bounds gives a value below every bound: the constraint reading it fails)."""
    total: Any = np.int64(a.const)
    for atom, k in a.terms:
        if isinstance(atom, str):
            value = env[atom]
        elif isinstance(atom, FloorDiv):
            value = np.floor_divide(vec(atom.num, env, arrays), atom.den)
        else:
            value = _read(atom, env, arrays)
        total = total + np.int64(k) * value
    return total


def _read(call: UFCall, env: Env, arrays: _Arrays | None) -> Any:
    if arrays is None or call.name not in arrays.flat:
        where = "" if arrays is None else f"layout {arrays.layout.name}: "
        raise SpecError(f"{where}{call} is read before the writer determines "
                        f"{call.name}", "<string>" if arrays is None else arrays.layout.source)
    arr = arrays.flat[call.name]
    off = arrays.offset(call.name, [vec(x, env, arrays) for x in call.args])
    return np.where(off >= 0, arr[np.clip(off, 0, max(len(arr) - 1, 0))] if len(arr) else 0,
                    np.iinfo(np.int64).min // 4)


def _ie_vec(e: ie.IExpr, env: Env, arrays: _Arrays) -> Any:
    if isinstance(e, ie.Num):
        return np.int64(e.value)
    if isinstance(e, ie.Name):
        return env[e.name]
    if isinstance(e, ie.Call):
        off = arrays.offset(e.name, [_ie_vec(x, env, arrays) for x in e.args])
        return arrays.flat[e.name][np.clip(off, 0, None)]
    lhs, rhs = _ie_vec(e.lhs, env, arrays), _ie_vec(e.rhs, env, arrays)
    return {"+": np.add, "-": np.subtract, "*": np.multiply}.get(e.op, np.floor_divide)(lhs, rhs)


def write(plan: WritePlan, shape: tuple[int, ...], coords: Sequence[np.ndarray],
          values: np.ndarray, allow_padding: bool = True
          ) -> tuple[dict[str, Any], int]:
    """The fields of a tensor of ``shape`` in ``plan.layout`` holding the entries, and how
    many value slots it stores (entries plus padding); without ``allow_padding``, more than
    3 padding slots per entry is refused before anything that large is allocated."""
    lay = plan.layout
    outs = list(lay.relation.out_vars or ())
    env: Env = {g: np.asarray(c, np.int64) for g, c in zip(outs, coords)}
    values = np.asarray(values).astype(lay.value_type.dtype, copy=False)
    scalars = check_shape(lay, shape)
    part = plan.first
    taken = _taken(part, env, len(values))
    if plan.others:         # the other parts must read the rest back (see written)
        env = {g: v[taken] for g, v in env.items()}
        values = values[taken]
    elif not taken.all():
        for f in part.filters:
            ok = np.broadcast_to(vec(f, env) >= 0, taken.shape)
            if not ok.all():
                _refuse(lay, env, int(np.flatnonzero(~ok)[0]), outs, f)
    arrays = _Arrays(lay)
    for q in part.permuted:
        _permute(q, env, scalars, arrays, outs)
    _solve(part, env, outs, arrays)
    for field, value in part.extents:
        hi = _range(value, dict(zip(outs, shape)), arrays)[1]
        scalars[field] = max(hi + 1, 0)
    for field in plan.emptied:
        scalars[field] = 0
    for p in part.positions:
        _place(p, env, scalars, arrays, lay)
        _derive(lay, arrays, scalars)
    _sized(plan, env, arrays, scalars)
    for pin in plan.pinned:     # the least value its lower bounds allow (ceiling division)
        known = {**lay.params, **scalars}
        scalars[pin.field] = max(-(-int(vec(b, known)) // k) for k, b in pin.bounds)
    _check_padding(lay, scalars, arrays, len(values), allow_padding)
    fills = dict(part.fills)
    for s in part.solved:
        if isinstance(s.atom, UFCall) and s.atom.name not in arrays.flat:
            arrays.allocate(s.atom.name, scalars, fills.get(s.atom.name, 0))
    for s in part.solved:
        if isinstance(s.atom, UFCall):
            off = arrays.offset(s.atom.name, [vec(x, env, arrays) for x in s.atom.args])
            _store(lay, arrays.flat[s.atom.name], off, env[str(s.atom)], s.atom.name, env, outs)
    for m in part.markers:          # each entry's slot marked, the others not
        marks = arrays.allocate(m.call.name, scalars, m.unused)
        off = arrays.offset(m.call.name, [vec(x, env, arrays) for x in m.call.args])
        _store(lay, marks, np.broadcast_to(off, (len(values),)),
               np.full(len(values), m.mark, np.int64), m.call.name, env, outs)
    for name, spec in lay.fields.items():
        if spec.is_array and name not in arrays.flat and name != lay.value_array:
            arrays.allocate(name, scalars)
    slots = len(values)             # a pattern layout stores no values: its entries
    if lay.value_array is not None:
        ref = lay.value_ref
        data = arrays.allocate(ref.array, scalars)
        off = arrays.offset(ref.array, [_ie_vec(s, {**scalars, **env}, arrays)
                                        for s in ref.subscripts])
        _store_values(lay, data, off, values, env, outs)
        slots = int(data.size)
    _check(part.conj, lay, env, arrays, scalars, outs)
    fields: dict[str, Any] = dict(scalars)
    for name, arr in arrays.flat.items():
        if name not in lay.fields:
            continue            # an inverse permutation
        if name != lay.value_array:
            kind = lay.dtype_of(name)
            top = int(np.iinfo(kind).max)
            if arr.size and (arr.max() > top or arr.min() < -top):
                raise ArgumentError(f"{lay.name}: {name} holds values beyond {kind}"
                                    + wider_hint(kind))
            arr = arr.astype(kind)
        fields[name] = arr.reshape(arrays.dims[name])
    for name in list(fields):
        if name in scalars and name not in lay.fields:
            del fields[name]
    return fields, slots


def rewritten(t: StoredTensor, layout: Layout, allow_padding: bool = True,
              structure: bool = False) -> StoredTensor:
    """``t`` (in a coordinate-list layout: one compressed level) written into ``layout``;
    into a pattern layout, its values must be the constant unless ``structure``."""
    (level,) = storage_of(t.layout).levels
    arrays = {d: a for d, a in level.coords if a is not None}
    coords = [np.asarray(t.fields[arrays[d]], np.int64) for d in range(layout.order)]
    values = implicit_values(layout, coords, np.asarray(t.values),
                             structure and layout.implicit is not None, f"{layout.name} tensor")
    return written(write_plan(layout), tuple(t.shape), coords, values, allow_padding)


def written(plan: WritePlan, shape: tuple[int, ...], coords: Sequence[np.ndarray],
            values: np.ndarray, allow_padding: bool = True) -> StoredTensor:
    """A tensor of ``shape`` in ``plan.layout`` holding the entries (unique coordinates),
    checked like any tensor, then read back through its whole relation (every part, every
    position): it must give exactly the entries (a union's other parts the ones its first
    part leaves, symmetric storage the mirror images), else an ArgumentError names the first
    entry that differs."""
    lay = plan.layout
    fields, slots = write(plan, shape, coords, values, allow_padding)
    try:
        out = tensor_class()(lay, shape, fields)
        check_within_shape(lay, out.fields)
    except ArgumentError as exc:    # what the relation solves for breaks a property
        if "index_type=" in str(exc):
            raise                   # a wider index type holds it
        raise ArgumentError(f"{lay.name} cannot hold these entries: the fields its relation "
                            f"gives them fail its own checks ({exc})") from None
    n = len(values)
    out.source_entries = n if slots > n else None
    diff, read, given = read_back(out, coords, values)
    if diff is not None:
        two = " (entries read through two parts of the relation differ)" \
            if plan.others and diff.given is not None and diff.read is not None else ""
        raise ArgumentError(f"{lay.name} cannot hold these entries: its relation reads "
                            f"{read} entries back from what was written, the source has "
                            f"{given}; {diff}{two}")
    return out


@dataclass(frozen=True)
class Difference:
    """The first coordinate (in row-major order) where the entries a tensor's relation reads
    differ from those it was built from."""

    at: tuple[int, ...]
    given: Any = None           # the value given there (None: no entry)
    read: Any = None            # the value read back, summed where read twice (None: none)

    def __str__(self) -> str:
        if self.given is None:
            return (f"{self.at} would be read back, but the source has no entry there "
                    f"(read back: {self.read!r})")
        if self.read is None:
            return f"{self.at} of the source (value {self.given!r}) is not read back"
        return f"{self.at}: value {self.given!r}, read back {self.read!r}"


def read_back(t: StoredTensor, coords: Sequence[np.ndarray], values: np.ndarray
              ) -> tuple[Difference | None, int, int]:
    """(the first difference between the entries ``t``'s relation reads, by generated code
    over every part, and the given ones, or None; how many it reads; how many were given).
    Entries holding 0 are not compared on either side: padding a layout stores, explicit
    zeros a layout of dense levels does not keep."""
    read, read_values = _entries(t)
    given_values = np.asarray(values).astype(read_values.dtype, copy=False)
    keep, kept = given_values != 0, read_values != 0
    given = [np.asarray(c, np.int64)[keep] for c in coords]
    got = [np.asarray(c)[kept] for c in read]
    given_values, got_values = given_values[keep], read_values[kept]
    return (_difference(tuple(t.shape), given, given_values, got, got_values),
            len(got_values), len(given_values))


def _entries(t: StoredTensor) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The entries ``t``'s relation reads: a coordinate list's arrays as they are (its storage
    level accounts for every constraint of the relation), else by a generated conversion
    (:meth:`spf.Tensor.entries`), which would gather a coordinate list of one dimension in a
    workspace as large as its extent."""
    storage = storage_or_none(t.layout)
    if storage is None or not storage.is_coordinate_list():
        return t.entries()
    (level,) = storage.levels
    n = int(t.fields[level.count]) if level.count else len(t.values)
    arrays = {d: a for d, a in level.coords if a is not None}
    return (tuple(np.asarray(t.fields[arrays[d]]).reshape(-1)[:n] for d in range(len(t.shape))),
            np.asarray(t.values).reshape(-1)[:n])


def _difference(shape: tuple[int, ...], want: list[Vec], want_values: np.ndarray,
                got: list[Vec], got_values: np.ndarray) -> Difference | None:
    """The first difference of two entry lists, each with unique coordinates (a relation
    reading one coordinate twice is read back with the values added, as kernels add them)."""
    kw, kg = _keys(shape, want, got)
    ow, og = np.argsort(kw, kind="stable"), np.argsort(kg, kind="stable")
    kw, kg, wv, gv = kw[ow], kg[og], want_values[ow], got_values[og]
    if len(kw) == len(kg) and (kw == kg).all() and _same(wv, gv).all():
        return None
    first: list[tuple[int, Difference]] = []

    def at(k: int, coords: list[Vec], order: Vec) -> tuple[int, ...]:
        return tuple(int(c[order[k]]) for c in coords)
    where = np.searchsorted(kg, kw)
    found = where < len(kg)
    found[found] = kg[where[found]] == kw[found]
    if not found.all():
        k = int(np.flatnonzero(~found)[0])
        first.append((int(kw[k]), Difference(at(k, want, ow), given=wv[k].item())))
    differs = np.flatnonzero(found)
    differs = differs[~_same(wv[differs], gv[where[differs]])]
    if differs.size:
        k = int(differs[0])
        first.append((int(kw[k]), Difference(at(k, want, ow), wv[k].item(),
                                             gv[where[k]].item())))
    back = np.searchsorted(kw, kg)
    extra = back >= len(kw)
    extra[~extra] = kw[back[~extra]] != kg[~extra]
    if extra.any():
        k = int(np.flatnonzero(extra)[0])
        first.append((int(kg[k]), Difference(at(k, got, og), read=gv[k].item())))
    return min(first, key=lambda item: item[0])[1]


def _keys(shape: tuple[int, ...], a: list[Vec], b: list[Vec]) -> tuple[Vec, Vec]:
    """One int64 per coordinate tuple, equal for equal tuples and ordered as they are."""
    n = len(a[0]) if a else 0
    if not shape:
        return np.zeros(n, np.int64), np.zeros(len(b[0]) if b else 0, np.int64)
    if math.prod(max(e, 1) for e in shape) < 1 << 62:
        return (np.ravel_multi_index(a, shape).astype(np.int64),
                np.ravel_multi_index(b, shape).astype(np.int64))
    both = [np.concatenate([x, y]) for x, y in zip(a, b)]       # ranks of the tuples
    order = np.lexsort(both[::-1])
    rank = np.empty(len(order), np.int64)
    if len(order):
        rank[order] = np.cumsum(_changes(both, order)) - 1
    return rank[:n], rank[n:]


def _same(a: np.ndarray, b: np.ndarray) -> Vec:
    """Elementwise equality, NaN equal to NaN."""
    eq = a == b
    if a.dtype.kind in "fc":
        eq |= (a != a) & (b != b)
    return eq


def _check_padding(lay: Layout, scalars: Mapping[str, int], arrays: _Arrays, n: int,
                   allow_padding: bool) -> None:
    """The value array's size, known before it is allocated: at most 4 slots per entry
    unless padding is allowed, and at most what the index type addresses (a pattern layout
    has none)."""
    if lay.value_array is None:
        return
    dims = [arrays.extent(lay.value_ref.array, d, scalars)
            for d in lay.fields[lay.value_ref.array].dims]
    slots = math.prod(dims)
    if slots > index_max(lay):
        raise ArgumentError(f"{lay.name} would need {slots} slots, more than "
                            f"index_type={lay.index_type!r} can address"
                            + wider_hint(lay.index_type))
    if not allow_padding and slots > 4 * max(n, 1) and slots > n:
        raise ArgumentError(
            f"{lay.name} would store {n} entries in {slots} slots "
            f"({100 * (1 - n / slots):.0f}% padding, over 75%); pass allow_padding=True "
            "to convert anyway")


def _taken(part: PartWrite, env: Env, n: int) -> Vec:
    """Which entries the written part holds (its constraints on logical coordinates)."""
    taken = np.ones(n, bool)
    for f in part.filters:
        taken &= np.broadcast_to(vec(f, env) >= 0, (n,))
    return taken


def _permute(q: Permuted, env: Env, scalars: Mapping[str, int], arrays: _Arrays,
             outs: list[str]) -> None:
    """The permutation ``q.array`` (positions ordered by the entry count of their values,
    stably within windows) and its inverse."""
    lay = arrays.layout
    perm = arrays.allocate(q.array, scalars)
    n = len(perm)
    at = np.broadcast_to(np.asarray(vec(q.value, env), np.int64), env[outs[0]].shape)
    outside = (at < 0) | (at >= n)
    if outside.any():
        _refuse_entry(lay, env, int(np.flatnonzero(outside)[0]), outs,
                      f"{q.value} is outside the {n} values of the permutation {q.array}")
    if q.descending is None:
        perm[:] = np.arange(n)
    else:
        counts = np.bincount(at, minlength=n)
        window = np.arange(n) // (q.window or max(n, 1))
        perm[:] = np.lexsort((-counts if q.descending else counts, window))
    inverse = np.empty(n, np.int64)
    inverse[perm] = np.arange(n)
    arrays.flat[q.inverse], arrays.dims[q.inverse] = inverse, (n,)


def _solve(part: PartWrite, env: Env, outs: list[str], arrays: _Arrays) -> None:
    lay = arrays.layout
    for s in part.solved:
        value = vec(s.value, env, arrays)
        value = np.broadcast_to(np.asarray(value, np.int64), env[outs[0]].shape if outs else ())
        if s.divisor != 1:
            bad = np.flatnonzero(value % s.divisor)
            if bad.size:
                _refuse_entry(lay, env, int(bad[0]), outs,
                              f"{s.atom} = ({s.value}) / {s.divisor} is not an integer")
            value = value // s.divisor
        env[str(s.atom)] = value


def _place(p: Position, env: Env, scalars: dict[str, int], arrays: _Arrays,
           lay: Layout) -> None:
    """The position of every entry at layout index ``p`` and the arrays bounding it."""
    outs = list(lay.relation.out_vars or ())
    n = len(env[outs[0]])
    groups = [env[g] for g in p.group]
    given = [_block_key(p.inner, groups, env, arrays, n)] if p.inner and p.inner.free \
        else [env[str(k)] for k in p.keys]
    keys = [-key if down else key for key, down in zip(given, p.descending)]
    if p.start is Start.RANK:
        if p.inner is not None and p.inner.free is None:      # spread over the run's slots
            groups = groups + [np.broadcast_to(vec(p.inner.offset, env, arrays), (n,))]
        rank = _ranks(groups, keys, n)[0]
        env[p.index] = rank
        _rank_bound(p, env, scalars, arrays, lay, rank)
        return
    assert p.lower is not None
    if p.start is Start.NESTED:
        _place_nested(p, env, scalars, arrays, lay, keys)
        return
    starts = arrays.allocate(p.lower.name, scalars)
    if p.start is Start.POINTER:     # its rows (all dimensions but the last) in turn
        width = arrays.dims[p.lower.name][-1]
        size = len(starts) // max(width, 1) * (width - 1)
        if width < 1:
            raise layout_error(lay, f"layout {lay.name}: the pointer array {p.lower.name} has "
                               "no entries here (its declared extents give 0); it holds one "
                               "more entry than the groups it bounds", p.lower.name)
        first = arrays.offset(p.lower.name, [vec(x, env, arrays) for x in p.lower.args[:-1]]
                              + [0])
        last = vec(p.lower.args[-1], env, arrays)
        at = np.broadcast_to(np.where((first >= 0) & (last >= 0) & (last < width - 1),
                                      first // width * (width - 1) + last, -1), (n,))
    else:
        size = len(starts)
        at = arrays.offset(p.lower.name, [vec(x, env, arrays) for x in p.lower.args])
        at = np.broadcast_to(at, (n,))
    if n and (at.min() < 0 or at.max() >= size):
        bad = int(np.flatnonzero((at < 0) | (at >= size))[0])
        _refuse_entry(lay, env, bad, outs, f"{p.lower} is outside {p.lower.name}'s {size} "
                      "groups")
    if p.run is None:
        rank, first_of_key, _ = _ranks([at], keys, n)
        counts = np.bincount(at[first_of_key], minlength=size)[:size] if n \
            else np.zeros(size, np.int64)
    else:
        counts, rank = _run_slots(p, p.run, env, scalars, arrays, at, size)
    begin = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if p.start is Start.POINTER:     # a row's last pointer: where the next row starts
        rows = np.arange(len(starts) // width)[:, None] * (width - 1)
        starts[:] = begin[(rows + np.arange(width)).reshape(-1)]
    else:
        starts[:] = begin[:-1]
        end = _single_name(p.upper)
        ends = arrays.allocate(end, scalars)
        if ends.shape != starts.shape:
            raise layout_error(lay, f"layout {lay.name}: {p.index} runs from {p.lower.name} to "
                               f"{end}, whose extents differ ({starts.size} and {ends.size} "
                               "entries): a group's start and end are read at the same "
                               "arguments", end)
        ends[:] = begin[1:]
    env[p.index] = begin[at] + rank if n else np.zeros(0, np.int64)


def _block_key(run: Run, groups: list[Vec], env: Env, arrays: _Arrays, n: int) -> Vec:
    """Per entry, which maximal run of consecutive offsets of ``run`` it lies in within its
    group (equal along a run, increasing from one to the next): its offset less its rank."""
    offset = np.broadcast_to(np.asarray(vec(run.offset, env, arrays), np.int64), (n,))
    return offset - _ranks([np.broadcast_to(g, (n,)) for g in groups], [offset], n)[0]


def _run_slots(p: Position, run: Run, env: Env, scalars: Mapping[str, int], arrays: _Arrays,
               at: Vec, size: int) -> tuple[Vec, Vec]:
    """A run position (:class:`~spf.front.writing.Run`): each group's number of slots (its
    run, from its least offset to its largest, or from or to the end the relation pins) and
    each entry's slot in its group; the array the run leaves free set per group."""
    lay, outs = arrays.layout, list(arrays.layout.relation.out_vars or ())
    n = len(at)
    off = np.broadcast_to(np.asarray(vec(run.offset, env, arrays), np.int64), at.shape)
    lo = np.full(size, np.iinfo(np.int64).max)
    hi = np.full(size, np.iinfo(np.int64).min)
    np.minimum.at(lo, at, off)
    np.maximum.at(hi, at, off)
    held = np.bincount(at, minlength=size)[:size] > 0
    if run.free is None:        # the relation pins the run's end (offset -1) or start (0)
        bad = off > -1 if run.at_end else off < 0
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            bound = f"{p.index} < {run.anchor}" if run.at_end else f"{run.anchor} <= {p.index}"
            _refuse_entry(lay, env, k, outs, f"its relation puts it at {p.index} = {run.anchor}"
                          f" + ({run.offset}) = {run.anchor} + {off[k]}, but requires {bound}")
        (hi if run.at_end else lo)[held] = -1 if run.at_end else 0
    else:                       # the free array moves each group's run onto its entries
        chosen = np.where(held, (-1 - hi) if run.at_end else -lo, 0) * run.sign
        free = arrays.flat.get(run.free.name)
        if free is None:
            free = arrays.allocate(run.free.name, scalars)
        where = arrays.offset(run.free.name, [vec(x, env, arrays) for x in run.free.args])
        _store(lay, free, np.broadcast_to(where, at.shape), chosen[at], run.free.name, env,
               outs)
    counts = np.where(held, hi - lo + 1, 0)
    if p.tight and n:           # what is read at it has no value marking an unused slot
        short = np.flatnonzero(counts > np.bincount(at, minlength=size)[:size])
        if short.size:
            k = int(np.flatnonzero(at == short[0])[0])
            _refuse_entry(lay, env, k, outs, f"its group's run at {p.index} would have a slot "
                          "without an entry, and nothing in the relation marks an unused "
                          "slot of what is read there")
    return counts, off - lo[at] if at.size else np.zeros(0, np.int64)


def _place_nested(p: Position, env: Env, scalars: dict[str, int], arrays: _Arrays,
                  lay: Layout, keys: list[Vec]) -> None:
    """``O(a) + P(a, b) <= p < O(a) + P(a, b + 1)``: ``P(a, :)`` the prefix sums of the groups'
    sizes within ``a`` (from 0), ``O`` the prefix sums of the outer groups' sizes."""
    assert p.lower is not None and p.outer is not None
    outs = list(lay.relation.out_vars or ())
    inner = arrays.allocate(p.lower.name, scalars)
    rows, width = arrays.dims[p.lower.name]
    n = len(keys[0])
    args = [np.broadcast_to(vec(x, env, arrays), (n,)) for x in p.lower.args]
    at = arrays.offset(p.lower.name, args)
    after = arrays.offset(p.lower.name, [args[0], args[1] + 1])
    bad = np.flatnonzero((at < 0) | (after < 0))
    if bad.size:
        _refuse_entry(lay, env, int(bad[0]), outs, f"{p.lower} is outside {p.lower.name}'s "
                      f"{rows} x {width} pointers")
    rank, first_of_key, _ = _ranks([at], keys, n)
    counts = np.bincount(at[first_of_key], minlength=rows * width).reshape(rows, width) \
        if n else np.zeros((rows, width), np.int64)
    local = np.zeros((rows, width), np.int64)
    local[:, 1:] = np.cumsum(counts[:, :-1], axis=1)
    inner[:] = local.reshape(-1)
    outer = arrays.allocate(p.outer.name, scalars)
    if len(outer) not in (rows, rows + 1):
        raise ArgumentError(f"{lay.name}: {p.outer.name} has {len(outer)} entries, "
                            f"{p.lower.name} {rows} rows; pointers over two levels need "
                            f"{rows} or {rows + 1}")
    begin = np.concatenate([[0], np.cumsum(local[:, -1])]).astype(np.int64)
    outer[:] = begin[:len(outer)]
    env[p.index] = begin[args[0]] + local.reshape(-1)[at] + rank if n \
        else np.zeros(0, np.int64)


def _derive(lay: Layout, arrays: _Arrays, scalars: dict[str, int]) -> None:
    """Derived fields whose source is written (or sources whose field is), once."""
    for d in lay.derived.values():
        if d.source in arrays.flat and d.field not in arrays.flat:
            _fill_derived(lay, arrays, scalars, d.field, d.compute(arrays.flat[d.source]),
                          f"{d.field} = {d.text()}")
        elif d.field in arrays.flat and d.source not in arrays.flat:
            source = d.invert(arrays.flat[d.field])
            if source is None:
                raise layout_error(lay, f"layout {lay.name}: the pointers written into "
                                   f"{d.field} are not {d.text()} of any {d.source}", d.field)
            _fill_derived(lay, arrays, scalars, d.source, source, f"{d.source}, from which "
                          f"{d.field} = {d.text()}")


def _fill_derived(lay: Layout, arrays: _Arrays, scalars: dict[str, int], name: str,
                  values: np.ndarray, what: str) -> None:
    """``name`` allocated by its declared extents and set to ``values``; SpecError at its
    declaration when the extents and the derivation disagree on its length."""
    arr = arrays.allocate(name, scalars)
    if len(arr) != len(values):
        raise layout_error(lay, f"layout {lay.name}: {what} has {len(values)} entries here, but "
                           f"its declared extents give it {len(arr)}", name)
    arr[:] = values


def _sized(plan: WritePlan, env: Env, arrays: _Arrays, scalars: dict[str, int]) -> None:
    """Scalar fields that only size arrays: the largest subscript written there, plus one."""
    lay = plan.layout
    for field in plan.sized:
        size = 0
        for name, spec in lay.fields.items():
            for k, d in enumerate(spec.dims):
                if not (isinstance(d, ie.Name) and d.name == field):
                    continue
                if name == lay.value_array:
                    at = _ie_vec(lay.value_ref.subscripts[k], {**scalars, **env}, arrays)
                else:
                    call = next((s.atom for s in plan.first.solved
                                 if isinstance(s.atom, UFCall) and s.atom.name == name), None)
                    if call is None:
                        continue
                    at = vec(call.args[k], env, arrays)
                at = np.asarray(at)
                if at.size:
                    size = max(size, int(at.max()) + 1)
        scalars[field] = size


def _single_name(a: Aff) -> str:
    atom = a.terms[0][0]
    return atom.name if isinstance(atom, UFCall) else str(atom)


def _ranks(groups: list[Vec], keys: list[Vec], n: int) -> tuple[Vec, Vec, Vec]:
    """Per entry: the rank of its key within its group; the entries first with their key;
    each entry's group number."""
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty.astype(np.intp), empty
    packed = _packed(groups, keys)
    if packed is None:
        order = np.lexsort((groups + keys)[::-1])
        new_key = _changes(groups + keys, order)
        new_group = _changes(groups, order)
    else:
        key, span = packed          # stable sort: linear on entries already in order
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        new_key = np.ones(n, bool)
        new_key[1:] = sorted_key[1:] != sorted_key[:-1]
        group = sorted_key // span
        new_group = np.ones(n, bool)
        new_group[1:] = group[1:] != group[:-1]
    key_id = np.cumsum(new_key) - 1
    group_start = np.maximum.accumulate(np.where(new_group, key_id, 0))
    rank = np.empty(n, np.int64)
    rank[order] = key_id - group_start
    group_id = np.empty(n, np.int64)
    group_id[order] = np.cumsum(new_group) - 1
    return rank, order[new_key], group_id


def _packed(groups: list[Vec], keys: list[Vec]) -> tuple[Vec, int] | None:
    """The columns as one int64 (group columns most significant) and the span of the key
    part, or None when their ranges do not fit 62 bits."""
    total, key, span = 1, np.zeros(len(keys[0]), np.int64), 1
    for k, c in enumerate(groups + keys):
        lo, hi = int(c.min()), int(c.max())
        width = hi - lo + 1
        total *= width
        if total >= 1 << 62:
            return None
        key = key * width + (c - lo)
        if k >= len(groups):
            span *= width
    return key, span


def _changes(cols: list[Vec], order: Vec) -> Vec:
    """Where the sorted columns change (the first entry included)."""
    out = np.zeros(len(order), bool)
    out[0] = True
    for c in cols:
        s = c[order]
        out[1:] |= s[1:] != s[:-1]
    return out


def _rank_bound(p: Position, env: Env, scalars: dict[str, int], arrays: _Arrays,
                lay: Layout, rank: Vec) -> None:
    """The upper bound of a RANK position: checked (a constant, a given scalar), or set to
    the largest group (a scalar field) or to each group's size (an array)."""
    largest = int(rank.max()) + 1 if rank.size else 0
    for field in p.also:
        scalars[field] = largest
    name = p.upper.as_name()
    call = next((a for a, _ in p.upper.terms if isinstance(a, UFCall)), None) \
        if len(p.upper.terms) == 1 and not p.upper.const else None
    if call is not None and name is None:
        bound = arrays.allocate(call.name, scalars)
        off = arrays.offset(call.name, [vec(x, env, arrays) for x in call.args])
        if rank.size:
            np.maximum.at(bound, off, rank + 1)
        return
    if name is not None and name not in scalars:
        scalars[name] = largest
        return
    limit = p.upper.evaluate(scalars)
    if largest > limit:
        bad = int(np.argmax(rank))
        _refuse_entry(lay, env, bad, list(lay.relation.out_vars or ()),
                      f"its group has more than {p.upper} = {limit} entries "
                      f"(layout index {p.index})")


def _store(lay: Layout, arr: np.ndarray, off: Vec, value: Vec, name: str, env: Env,
           outs: list[str]) -> None:
    if off.size and off.min() < 0:
        _refuse_entry(lay, env, int(np.flatnonzero(off < 0)[0]), outs,
                      f"it would be written outside {name}")
    arr[off] = value


def _store_values(lay: Layout, data: np.ndarray, off: Vec, values: np.ndarray, env: Env,
                  outs: list[str]) -> None:
    off = np.broadcast_to(off, values.shape)
    if off.size and off.min() < 0:
        _refuse_entry(lay, env, int(np.flatnonzero(off < 0)[0]), outs,
                      f"its value would be written outside {lay.value_ref.array}")
    uniq, counts = np.unique(off, return_counts=True)
    if (counts > 1).any():
        twice = uniq[counts > 1][0]
        a, b = np.flatnonzero(off == twice)[:2]
        raise ArgumentError(f"{lay.name} cannot hold both entries {_at(env, a, outs)} and "
                            f"{_at(env, b, outs)}: they would share the value slot "
                            f"{lay.value_ref.array}[{twice}]")
    data[off] = values


def _check(conj: Sequence[Constraint], lay: Layout, env: Env, arrays: _Arrays,
           scalars: Mapping[str, int], outs: list[str]) -> None:
    """Every constraint of the written part holds at every entry."""
    full: Env = {**scalars, **env}
    n = len(env[outs[0]]) if outs else 1
    for c in conj:
        ok = _holds(c, full, arrays, n)
        if not ok.all():
            _refuse(lay, env, int(np.flatnonzero(~ok)[0]), outs, c.aff, c.is_eq)


def refuse_excluded(lay: Layout, shape: tuple[int, ...], coords: Sequence[np.ndarray]) -> None:
    """ArgumentError naming the first entry that a constraint of ``lay``'s relation on the
    logical coordinates excludes (:func:`~spf.front.writing.entry_filters`: ``gj <= gi``),
    and that constraint; what every way of writing ``lay`` refuses alike."""
    filters = entry_filters(lay)
    if not filters:
        return
    outs = list(lay.relation.out_vars or ())
    env: Env = {g: np.asarray(c, np.int64) for g, c in zip(outs, coords)}
    full: Env = {**_shape_scalars(lay, shape), **env}
    _check(filters, lay, full, _Arrays(lay), {}, outs)


def check_shape(lay: Layout, shape: tuple[int, ...]) -> dict[str, int]:
    """The scalar fields ``lay``'s shape names, at ``shape``; ArgumentError when its extents
    cannot describe ``shape`` (a constant extent, or one field for two extents that differ)."""
    scalars = _shape_scalars(lay, shape)
    try:
        fixed = tuple(e.evaluate(scalars) for e in lay.shape)
    except KeyError as exc:         # an extent such as -numRows: no shape gives numRows
        raise layout_error(lay, f"layout {lay.name}: a tensor's shape does not give "
                           f"{exc.args[0]}, which its shape ({', '.join(map(str, lay.shape))}) "
                           "reads (each extent is a scalar field or a constant)",
                           "shape") from None
    if fixed != tuple(shape):
        raise ArgumentError(f"layout {lay.name} stores tensors of shape "
                            f"({', '.join(map(str, lay.shape))}); got shape {tuple(shape)}")
    return scalars


def _shape_scalars(lay: Layout, shape: tuple[int, ...]) -> dict[str, int]:
    """The scalar fields the shape names, at ``shape``."""
    return {name: n for e, n in zip(lay.shape, shape) if (name := e.as_name()) is not None}


def _holds(c: Constraint, env: Env, arrays: _Arrays, n: int) -> Vec:
    value = np.asarray(vec(c.aff, env, arrays))
    return np.broadcast_to(value == 0 if c.is_eq else value >= 0, (n,))


def _range(a: Aff, extents: Mapping[str, int], arrays: _Arrays) -> tuple[int, int]:
    """Interval of ``a`` (over logical coordinates and inverse permutations) over the
    shape."""
    lo = hi = a.const
    for atom, k in a.terms:
        if isinstance(atom, FloorDiv):
            nlo, nhi = _range(atom.num, extents, arrays)
            alo, ahi = nlo // atom.den, nhi // atom.den
        elif isinstance(atom, UFCall):          # perm⁻¹(g): a position of the permutation
            alo, ahi = 0, arrays.dims[atom.name][0] - 1
        else:
            alo, ahi = 0, extents[str(atom)] - 1
        lo, hi = (lo + k * ahi, hi + k * alo) if k < 0 else (lo + k * alo, hi + k * ahi)
    return lo, hi


def _at(env: Env, k: int, outs: list[str]) -> tuple[int, ...]:
    return tuple(int(env[g][k]) for g in outs)


def _refuse_entry(lay: Layout, env: Env, k: int, outs: list[str], why: str) -> None:
    raise ArgumentError(f"entry {_at(env, k, outs)} cannot be written into {lay.name}: {why}")


def _refuse(lay: Layout, env: Env, k: int, outs: list[str], aff: Aff,
            is_eq: bool = False) -> None:
    shown = format_constraint(Constraint(aff, is_eq))
    raise ArgumentError(f"entry {_at(env, k, outs)} cannot be stored in {lay.name}: its "
                        f"relation requires {shown}")


