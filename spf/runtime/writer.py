"""Entries written into a layout by its generated writer (:mod:`spf.store`), and the
read-back check of what packers build.

:func:`write` runs the layout's writer (one C function per layout, compiled once) on an entry
list (coordinates and values, no coordinate twice); its arrays become the tensor's.  The writer
itself checks that the relation reads back exactly the entries (every constraint at every
entry, the tuples reading nonzero values counted where a slot could be read twice, a union's
other parts); :func:`read_back` reads a tensor back through its relation by generated code, for
the packers (:mod:`spf.runtime.packing`).  Errors name the entry and what it violates.
"""
from __future__ import annotations

import ctypes
import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NoReturn

import numpy as np

from ..back.source import render_file
from ..back.status import Status, c_enum
from ..errors import ArgumentError, OutOfMemoryError
from ..front.layout import Layout, wider_hint
from ..front.layout_file import layout_error
from ..front.properties import Property
from ..front.storage import storage_of, storage_or_none
from ..front.terms import Aff, FloorDiv, format_constraint
from ..front.value_types import Typing
from ..front.writing import WritePlan, entry_filters, write_plan
from ..store import WriterSource, writer_source
from . import build
from .fields import implicit_values
from .memory import byte_limit, reserve
from .stored import StoredTensor, tensor_class

Vec = np.ndarray


def rewritten(t: StoredTensor, layout: Layout, allow_padding: bool = True,
              structure: bool = False, fill: Any = None) -> StoredTensor:
    """``t`` (in a coordinate-list layout: one compressed level) written into ``layout``;
    into a pattern layout, its values must be the constant unless ``structure``; ``fill``:
    what the tensor holds where it has no entry (default: ``t``'s fill)."""
    (level,) = storage_of(t.layout).levels
    arrays = {d: a for d, a in level.coords if a is not None}
    coords = [np.asarray(t.fields[arrays[d]], np.int64) for d in range(layout.order)]
    values = implicit_values(layout, coords, np.asarray(t.values),
                             structure and layout.implicit is not None, f"{layout.name} tensor")
    return written(write_plan(layout), tuple(t.shape), coords, values, allow_padding,
                   t.fill if fill is None else fill)


def written(plan: WritePlan, shape: tuple[int, ...], coords: Sequence[np.ndarray],
            values: np.ndarray, allow_padding: bool = True, fill: Any = None) -> StoredTensor:
    """A tensor of ``shape`` in ``plan.layout`` holding the entries (unique coordinates),
    checked like any tensor; its writer checked that its relation reads back exactly the
    entries (every constraint at every entry; where a slot could be read by another tuple, the
    tuples reading values other than the fill counted; a union's other parts give exactly
    the entries its first part leaves, symmetric storage the mirror images), else an
    ArgumentError names the first entry that differs (:mod:`spf.store`).  ``fill``: what the
    tensor holds where it has no entry (default: the layout's), which gaps that runs cover
    hold; the tensor gets it."""
    fields, slots = write(plan, shape, coords, values, allow_padding, fill)
    out = checked(plan, shape, fields, _library(plan.layout).source.proven)
    out.fill = plan.layout.fill if fill is None else fill
    n = len(values)
    out.source_entries = n if slots > n else None
    return out


def checked(plan: WritePlan, shape: tuple[int, ...], fields: dict[str, Any],
            proven: Sequence[Property] = ()) -> StoredTensor:
    """The tensor of the written ``fields``, validated like any tensor but for the
    properties ``proven`` (the writer's C checked them)."""
    lay = plan.layout
    try:
        # its read check tests every coordinate against the shape too
        out = tensor_class()(lay, shape, fields, proven=frozenset(proven))
    except ArgumentError as exc:    # what the relation solves for breaks a property
        if "index_type=" in str(exc):
            raise                   # a wider index type holds it
        raise ArgumentError(f"{lay.name} cannot hold these entries: the fields its relation "
                            f"gives them fail its own checks ({exc})") from None
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


def _changes(cols: list[Vec], order: Vec) -> Vec:
    """Where the sorted columns change (the first entry included)."""
    out = np.zeros(len(order), bool)
    out[0] = True
    for c in cols:
        s = c[order]
        out[1:] |= s[1:] != s[:-1]
    return out


@dataclass(frozen=True)
class _Library:
    """A layout's compiled writer (:mod:`spf.store`)."""

    source: WriterSource
    text: str
    fn: Any


@cache
def _library(layout: Layout) -> _Library:
    src = writer_source(write_plan(layout), "spf_write")
    typing = Typing((), layout.value_type, layout.value_type)
    text = render_file([f"Generated by spf: entries written into {layout.name}", "",
                        *src.header()], set(), [layout], src.signature, list(src.body),
                       runtimes={"store.c"}, before=c_enum(), typing=typing)
    fn = getattr(build.load_library(str(build.build_library(text))), src.name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 4 \
        + [ctypes.c_int, ctypes.c_int64]
    return _Library(src, text, fn)


def write(plan: WritePlan, shape: tuple[int, ...], coords: Sequence[np.ndarray],
          values: np.ndarray, allow_padding: bool = True, fill: Any = None
          ) -> tuple[dict[str, Any], int]:
    """The fields of a tensor of ``shape`` in ``plan.layout`` holding the entries, written by
    the layout's generated writer, and how many value slots it stores (entries plus padding);
    without ``allow_padding``, more than 3 padding slots per entry is refused before anything
    that large is allocated; ``fill`` (default: the layout's): what the tensor holds where no
    entry is."""
    lay = plan.layout
    check_shape(lay, shape)
    lib = _library(lay)
    src = lib.source
    width = np.dtype(lay.index_type)
    n = len(values)
    g = []
    for k, c in enumerate(coords):
        c = np.asarray(c)
        if c.size and (int(c.min()) < np.iinfo(width).min or int(c.max()) > np.iinfo(width).max):
            raise ArgumentError(f"{lay.name}: coordinate {k} of the entries holds values beyond "
                                f"{lay.index_type}" + wider_hint(lay.index_type))
        g.append(np.ascontiguousarray(c, width))
    ptrs = (ctypes.c_void_p * max(len(g), 1))(*[build.address(x) for x in g])
    vals = np.ascontiguousarray(values, lay.value_type.dtype)
    absent = np.array([lay.fill if fill is None else fill], lay.value_type.dtype)
    extents = np.array(shape, np.int64)
    err, sizes = buffers(src)
    struct = build.struct_type(lay)()
    status = lib.fn(ctypes.addressof(struct), build.address(err), build.address(sizes), n,
                    ctypes.addressof(ptrs), build.address(vals), build.address(absent),
                    build.address(extents),
                    int(allow_padding), byte_limit())
    fields, entries = finished(src, status, err, struct, sizes)
    if lay.value_array is None:         # a pattern layout stores no values: its entries
        return fields, entries
    return fields, int(np.asarray(fields[lay.value_array]).size)


def buffers(src: WriterSource) -> tuple[np.ndarray, np.ndarray]:
    """What a writer reports into: ``spf_err`` and ``spf_sizes``."""
    return (np.zeros(src.err_size, np.int64),
            np.zeros(sum(r for _, r in src.arrays) + 1, np.int64))


def finished(src: WriterSource, status: int, err: np.ndarray, struct: ctypes.Structure,
             sizes: np.ndarray) -> tuple[dict[str, Any], int]:
    """The fields a writer returned in ``struct`` and its entry count; its error, if any."""
    if status == Status.OUT_OF_MEMORY:
        raise OutOfMemoryError(f"writing entries into {src.layout.name}: its C code could not "
                               "allocate (malloc returned NULL): out of memory")
    if status == Status.REFUSED:
        _refused(src, err)
    if status != Status.OK:
        raise ArgumentError(f"writing entries into {src.layout.name}: its C code returned "
                            f"status {status}")
    return _taken_over(src.layout, src, struct, sizes), int(sizes[-1])


def _refused(src: WriterSource, err: np.ndarray) -> NoReturn:
    """The error ``spf_err`` describes."""
    order = src.layout.order
    refusal = src.refusals[int(err[0])]
    at = tuple(int(x) for x in err[1:1 + order])
    other = tuple(int(x) for x in err[4 + order:4 + 2 * order])
    if "{other}" in refusal.text:           # the two entries in coordinate order
        other, at = sorted((other, at))
    x: dict[str, Any] = {f"x{k}": int(err[1 + order + k]) for k in range(3)}
    if refusal.memory is not None:      # the limit's own error, naming the array
        reserve(x["x0"], f"{src.layout.name}'s {refusal.memory}")
    if refusal.values:                  # two values, as their bytes
        dtype = src.layout.value_type.dtype
        for k, name in enumerate(("given", "read")):
            raw = err[src.values_at + 2 * k:src.values_at + 2 * k + 2].tobytes()
            x[name] = repr(np.frombuffer(raw[:dtype.itemsize], dtype)[0].item())
    text = refusal.text.format(at=at, other=other, **x)
    if refusal.spec is not None:
        raise layout_error(src.layout, text, refusal.spec)
    raise ArgumentError(text)


def _taken_over(lay: Layout, src: WriterSource, struct: ctypes.Structure, dims: np.ndarray
                ) -> dict[str, Any]:
    """The fields the writer set in ``struct``: its arrays owned by numpy from now on (freed
    with the last view)."""
    fields: dict[str, Any] = {f: int(getattr(struct, f)) for f, spec in lay.fields.items()
                              if not spec.is_array}
    k = 0
    for name, rank in src.arrays:
        shape = tuple(int(d) for d in dims[k:k + rank])
        k += rank
        dtype = lay.value_type.dtype if name == lay.value_array else np.dtype(lay.dtype_of(name))
        fields[name] = _owned(getattr(struct, name), shape, dtype)
    return fields


_free = ctypes.CDLL(None).free
_free.argtypes = [ctypes.c_void_p]


def _owned(address: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array over ``address`` (malloc'd by generated C) that frees it with its last
    view."""
    size = math.prod(shape)
    buf = (ctypes.c_char * max(size * np.dtype(dtype).itemsize, 1)).from_address(address)
    weakref.finalize(buf, _free, address)
    return np.frombuffer(buf, dtype, count=size).reshape(shape)


def refuse_excluded(lay: Layout, shape: tuple[int, ...], coords: Sequence[np.ndarray]) -> None:
    """ArgumentError naming the first entry that a constraint of ``lay``'s relation on the
    logical coordinates excludes (:func:`~spf.front.writing.entry_filters`: ``gj <= gi``),
    and that constraint; what every way of writing ``lay`` refuses alike."""
    filters = entry_filters(lay)
    if not filters:
        return
    outs = list(lay.relation.out_vars or ())
    env: dict[str, Any] = {**_shape_scalars(lay, shape),
                           **{g: np.asarray(c, np.int64) for g, c in zip(outs, coords)}}
    n = len(coords[0]) if len(coords) else 0
    for c in filters:
        ok = np.broadcast_to(np.asarray(_vec(c.aff, env) == 0 if c.is_eq
                                        else _vec(c.aff, env) >= 0), (n,))
        if not ok.all():
            k = int(np.flatnonzero(~ok)[0])
            raise ArgumentError(f"entry {tuple(int(env[g][k]) for g in outs)} cannot be stored "
                                f"in {lay.name}: its relation requires {format_constraint(c)}")


def _vec(a: Aff, env: Mapping[str, Any]) -> Any:
    """``a`` per entry, over logical coordinates and scalars (and floor divisions)."""
    total: Any = np.int64(a.const)
    for atom, k in a.terms:
        value = np.floor_divide(_vec(atom.num, env), atom.den) \
            if isinstance(atom, FloorDiv) else env[str(atom)]
        total = total + np.int64(k) * value
    return total


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


