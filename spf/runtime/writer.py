"""Entries written into a layout by its :class:`~spf.front.writing.WritePlan`, vectorized.

Given an entry list (coordinates and values, no coordinate twice), the solved atoms are
evaluated, each position index is ranked (sorted keys, groups, prefix sums), every field the
plan determines is filled, and every constraint of the written part is checked per entry;
the other parts of a union are read back over the written positions and must give exactly the
entries the first part did not take.  Errors name the entry and what it violates.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..front import index_expr as ie
from ..front.layout import Layout
from ..front.relation import Conj
from ..front.storage import storage_of
from ..front.terms import Aff, Constraint, FloorDiv, UFCall, format_constraint
from ..front.writing import PartWrite, Permuted, Position, Start, WritePlan, write_plan
from .fields import index_max, wider_hint
from .memory import aligned_zeros, reserve
from .stored import StoredTensor, tensor_class

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
        dims = tuple(ie.evaluate(d, scalars, self.flat) for d in self.layout.fields[name].dims)
        if any(d < 0 for d in dims):
            raise ArgumentError(f"{self.layout.name}: {name} would have extents {dims}")
        size = math.prod(dims)
        what = f"{self.layout.name}'s {name}"
        if name == self.layout.value.array:
            arr = aligned_zeros(max(size, 1), self.layout.value_type.dtype, what)[:size]
        else:
            reserve(8 * size, what)
            arr = np.full(size, fill, np.int64)
        self.flat[name], self.dims[name] = arr, dims
        return arr

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
        raise KeyError(call.name)
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
    scalars: dict[str, int] = {name: n for e, n in zip(lay.shape, shape)
                               if (name := e.as_name()) is not None}
    fixed = tuple(e.evaluate(scalars) for e in lay.shape)
    if fixed != tuple(shape):
        raise ArgumentError(f"layout {lay.name} stores tensors of shape "
                            f"({', '.join(map(str, lay.shape))}); got shape {tuple(shape)}")
    part = plan.first
    taken = _taken(part, env, len(values))
    if plan.others:
        env_all, values_all = dict(env), values
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
    _check_padding(lay, scalars, arrays, len(values), allow_padding)
    fills = dict(part.fills)
    for s in part.solved:
        if isinstance(s.atom, UFCall) and s.atom.name not in arrays.flat:
            arrays.allocate(s.atom.name, scalars, fills.get(s.atom.name, 0))
    for s in part.solved:
        if isinstance(s.atom, UFCall):
            off = arrays.offset(s.atom.name, [vec(x, env, arrays) for x in s.atom.args])
            _store(lay, arrays.flat[s.atom.name], off, env[str(s.atom)], s.atom.name, env, outs)
    for name, spec in lay.fields.items():
        if spec.is_array and name not in arrays.flat and name != lay.value.array:
            arrays.allocate(name, scalars)
    data = arrays.allocate(lay.value.array, scalars)
    off = arrays.offset(lay.value.array, [_ie_vec(s, {**scalars, **env}, arrays)
                                          for s in lay.value.subscripts])
    _store_values(lay, data, off, values, env, outs)
    _check(part.conj, lay, env, arrays, scalars, outs)
    if plan.others:
        _read_back(plan, env, arrays, scalars, env_all, values_all, outs)
    fields: dict[str, Any] = dict(scalars)
    for name, arr in arrays.flat.items():
        if name not in lay.fields:
            continue            # an inverse permutation
        if name != lay.value.array:
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
    return fields, int(data.size)


def rewritten(t: StoredTensor, layout: Layout, allow_padding: bool = True) -> StoredTensor:
    """``t`` (in a coordinate-list layout: one compressed level) written into ``layout``."""
    (level,) = storage_of(t.layout).levels
    arrays = {d: a for d, a in level.coords if a is not None}
    coords = [np.asarray(t.fields[arrays[d]], np.int64) for d in range(layout.order)]
    fields, slots = write(write_plan(layout), tuple(t.shape), coords,
                          np.asarray(t.values), allow_padding)
    out = tensor_class()(layout, t.shape, fields)
    n = len(coords[0]) if coords else 1
    out.source_entries = n if slots > n else None
    return out


def _check_padding(lay: Layout, scalars: Mapping[str, int], arrays: _Arrays, n: int,
                   allow_padding: bool) -> None:
    """The value array's size, known before it is allocated: at most 4 slots per entry
    unless padding is allowed, and at most what the index type addresses."""
    dims = [ie.evaluate(d, scalars, arrays.flat) for d in lay.fields[lay.value.array].dims]
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
    perm = arrays.allocate(q.array, scalars)
    n = len(perm)
    at = np.broadcast_to(np.asarray(vec(q.value, env), np.int64), env[outs[0]].shape)
    outside = (at < 0) | (at >= n)
    if outside.any():
        _refuse_entry(env, int(np.flatnonzero(outside)[0]), outs,
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
    for s in part.solved:
        value = vec(s.value, env, arrays)
        value = np.broadcast_to(np.asarray(value, np.int64), env[outs[0]].shape if outs else ())
        if s.divisor != 1:
            bad = np.flatnonzero(value % s.divisor)
            if bad.size:
                _refuse_entry(env, int(bad[0]), outs,
                              f"{s.atom} = ({s.value}) / {s.divisor} is not an integer")
            value = value // s.divisor
        env[str(s.atom)] = value


def _place(p: Position, env: Env, scalars: dict[str, int], arrays: _Arrays,
           lay: Layout) -> None:
    """The position of every entry at layout index ``p`` and the arrays bounding it."""
    keys = [-env[str(k)] if down else env[str(k)] for k, down in zip(p.keys, p.descending)]
    n = len(keys[0])
    if p.start is Start.RANK:
        rank = _ranks([env[g] for g in p.group], keys, n)[0]
        env[p.index] = rank
        _rank_bound(p, env, scalars, arrays, lay, rank)
        return
    assert p.lower is not None
    if p.start is Start.NESTED:
        _place_nested(p, env, scalars, arrays, lay, keys)
        return
    starts = arrays.allocate(p.lower.name, scalars)
    if p.start is Start.POINTER:
        size = len(starts) - 1
        at = np.broadcast_to(vec(p.lower.args[0], env, arrays), (n,))
    else:
        size = len(starts)
        at = arrays.offset(p.lower.name, [vec(x, env, arrays) for x in p.lower.args])
        at = np.broadcast_to(at, (n,))
    rank, first_of_key, _ = _ranks([at], keys, n)
    if n and (at.min() < 0 or at.max() >= size):
        bad = int(np.flatnonzero((at < 0) | (at >= size))[0])
        _refuse_entry(env, bad, list(lay.relation.out_vars or ()),
                      f"{p.lower} is outside {p.lower.name}'s {size} groups")
    counts = np.bincount(at[first_of_key], minlength=size)[:size] if n \
        else np.zeros(size, np.int64)
    begin = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if p.start is Start.POINTER:
        starts[:] = begin
    else:
        starts[:] = begin[:-1]
        end = _single_name(p.upper)
        arrays.allocate(end, scalars)[:] = begin[1:]
    env[p.index] = begin[at] + rank if n else np.zeros(0, np.int64)


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
        _refuse_entry(env, int(bad[0]), outs, f"{p.lower} is outside {p.lower.name}'s "
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
            arrays.allocate(d.field, scalars)[:] = d.compute(arrays.flat[d.source])
        elif d.field in arrays.flat and d.source not in arrays.flat:
            source = d.invert(arrays.flat[d.field])
            assert source is not None       # the writer's pointers start at 0 and grow
            arrays.allocate(d.source, scalars)[:] = source


def _sized(plan: WritePlan, env: Env, arrays: _Arrays, scalars: dict[str, int]) -> None:
    """Scalar fields that only size arrays: the largest subscript written there, plus one."""
    lay = plan.layout
    for field in plan.sized:
        size = 0
        for name, spec in lay.fields.items():
            for k, d in enumerate(spec.dims):
                if not (isinstance(d, ie.Name) and d.name == field):
                    continue
                if name == lay.value.array:
                    at = _ie_vec(lay.value.subscripts[k], {**scalars, **env}, arrays)
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
        _refuse_entry(env, bad, list(lay.relation.out_vars or ()),
                      f"its group has more than {p.upper} = {limit} entries "
                      f"(layout index {p.index})")


def _store(lay: Layout, arr: np.ndarray, off: Vec, value: Vec, name: str, env: Env,
           outs: list[str]) -> None:
    if off.size and off.min() < 0:
        _refuse_entry(env, int(np.flatnonzero(off < 0)[0]), outs,
                      f"it would be written outside {name}")
    arr[off] = value


def _store_values(lay: Layout, data: np.ndarray, off: Vec, values: np.ndarray, env: Env,
                  outs: list[str]) -> None:
    off = np.broadcast_to(off, values.shape)
    if off.size and off.min() < 0:
        _refuse_entry(env, int(np.flatnonzero(off < 0)[0]), outs,
                      f"its value would be written outside {lay.value.array}")
    uniq, counts = np.unique(off, return_counts=True)
    if (counts > 1).any():
        twice = uniq[counts > 1][0]
        a, b = np.flatnonzero(off == twice)[:2]
        raise ArgumentError(f"{lay.name} cannot hold both entries {_at(env, a, outs)} and "
                            f"{_at(env, b, outs)}: they would share the value slot "
                            f"{lay.value.array}[{twice}]")
    data[off] = values


def _check(conj: Conj, lay: Layout, env: Env, arrays: _Arrays, scalars: Mapping[str, int],
           outs: list[str]) -> None:
    """Every constraint of the written part holds at every entry."""
    full: Env = {**scalars, **env}
    for c in conj:
        ok = _holds(c, full, arrays)
        if not ok.all():
            _refuse(lay, env, int(np.flatnonzero(~ok)[0]), outs, c.aff, c.is_eq)


def _holds(c: Constraint, env: Env, arrays: _Arrays) -> Vec:
    value = np.asarray(vec(c.aff, env, arrays))
    n = len(next(v for v in env.values() if isinstance(v, np.ndarray)))
    return np.broadcast_to(value == 0 if c.is_eq else value >= 0, (n,))


def _read_back(plan: WritePlan, env: Env, arrays: _Arrays, scalars: Mapping[str, int],
               env_all: Env, values_all: np.ndarray, outs: list[str]) -> None:
    """The other parts, read over the written positions, give exactly the entries the first
    part did not take, with their values (a union layout holds nothing else)."""
    lay = plan.layout
    points: Env = {**scalars, **{p: env[p] for p in lay.indices}}
    got = [np.stack([env[g] for g in outs]) if outs else np.zeros((0, 0), np.int64)]
    data = arrays.flat[lay.value.array]
    vals = [data[np.clip(arrays.offset(lay.value.array, [
        _ie_vec(s, points, arrays) for s in lay.value.subscripts]), 0, None)]]
    for conj in plan.others:
        logical = _logical_values(conj, outs, points, arrays, lay)
        here: Env = {**points, **logical}
        ok = np.ones(len(env[outs[0]]), bool)
        for c in conj:
            ok &= _holds(c, here, arrays)
        got.append(np.stack([np.broadcast_to(logical[g], ok.shape)[ok] for g in outs]))
        vals.append(vals[0][ok])
    coords = np.concatenate(got, axis=1)
    read = np.concatenate(vals)
    want = np.stack([env_all[g] for g in outs])
    a, b = np.lexsort(coords[::-1]), np.lexsort(want[::-1])
    coords, read, want, wanted = coords[:, a], read[a], want[:, b], values_all[b]
    same = coords.shape == want.shape and (coords == want).all() and (read == wanted).all()
    if not same:
        k = _first_difference(coords, want, read, wanted)
        raise ArgumentError(f"{lay.name} cannot hold these entries: its parts read "
                            f"{coords.shape[1]} entries back over the positions written, the "
                            f"source has {want.shape[1]}; {k}")


def _first_difference(coords: np.ndarray, want: np.ndarray, read: np.ndarray,
                      wanted: np.ndarray) -> str:
    """The first entry read back that the source lacks, or the first the source has that is
    not read back, or the first whose value differs (both sides sorted)."""
    got = {tuple(int(x) for x in c): v for c, v in zip(coords.T, read)}
    have = {tuple(int(x) for x in c): v for c, v in zip(want.T, wanted)}
    extra = next((c for c in got if c not in have), None)
    if extra is not None:
        return f"{extra} would be read back, but the source has no entry there"
    missing = next((c for c in have if c not in got), None)
    if missing is not None:
        return f"{missing} of the source is not read back"
    differs = next(c for c in have if got[c] != have[c])
    return (f"{differs}: value {float(have[differs])!r}, read back "
            f"{float(got[differs])!r} (entries read through two parts of the relation differ)")


def _logical_values(conj: Conj, outs: list[str], points: Env, arrays: _Arrays,
                    lay: Layout) -> Env:
    """The logical coordinates a part's equalities give at the written positions."""
    out: Env = {}
    for c in conj:
        gs = [g for g in outs if c.aff.coeff(g)]
        if c.is_eq and len(gs) == 1 and abs(c.aff.coeff(gs[0])) == 1:
            k = c.aff.coeff(gs[0])
            out[gs[0]] = vec((c.aff - Aff.var(gs[0], k)) * -k, {**points, **out}, arrays)
    missing = [g for g in outs if g not in out]
    if missing:
        raise ArgumentError(f"{lay.name}: a part of its relation does not give "
                            f"{', '.join(missing)} by an equality; it cannot be read back")
    return out


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


def _refuse_entry(env: Env, k: int, outs: list[str], why: str) -> None:
    raise ArgumentError(f"entry {_at(env, k, outs)} cannot be written: {why}")


def _refuse(lay: Layout, env: Env, k: int, outs: list[str], aff: Aff,
            is_eq: bool = False) -> None:
    shown = format_constraint(Constraint(aff, is_eq))
    raise ArgumentError(f"entry {_at(env, k, outs)} cannot be stored in {lay.name}: its "
                        f"relation requires {shown}")


