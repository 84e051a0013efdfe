"""Format conversion generated from layout relations (paper 000; Popoola et al., CGO 2023).

A conversion from layout ``src`` to layout ``dst`` is the identity kernel
``B(i,j,...) = A(i,j,...)`` with A in ``src`` and B in ``dst``: composing A's relation with
the access gives the loops over A's stored entries, and B is assembled from its own relation
by :mod:`spf.assembly` (storage levels, the order Z3 proves, then a workspace, a bucket
scatter or a sort).  Nothing is specific to a pair of formats; no intermediate format is
built.  A source whose innermost layout index is itself a logical coordinate (a dense
level: DenseMatrix, DIA's rows, BCSR's block columns, LowerTri) stores values for coordinates
that hold no entry; its zeros are padding and are not stored in a sparse destination (unless
``keep_zeros=True``).  Other sources' stored entries are all kept, explicit zeros included,
as scipy does (``keep_zeros=False`` drops those too).
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

import numpy as np

from .assembly import contiguous_group_level
from .back.lower import kernel_code
from .back.placement_passes import aff_text, placement_passes
from .back.source import function, render_file
from .back.templates import text as template_text
from .concurrency import symbolic
from .errors import ArgumentError, OutOfMemoryError, SpecError
from .front.layout import Layout
from .front.layout_file import blamed_on, layout_error
from .front.layout_path import for_order, load_layout
from .front.placement import Placement, aff_range, placement_of, placement_or_none
from .front.stand_ins import compressed_rows_layout, coordinate_layout, dense_layout
from .front.storage import storage_of, storage_or_none
from .front.writing import WritePlan, write_plan
from .kernel import Kernel
from .runtime import build as runtime
from .runtime import writer
from .runtime.compiled import CompiledKernel
from .runtime.fields import implicit_values, index_max, wider_hint, with_derived
from .runtime.memory import aligned_zeros, reserve
from .runtime.stored import StoredTensor, check_built_ranges, tensor_class

_INDICES = "ijklmnop"


class Conversion:
    """The generated conversion from ``src`` to ``dst`` (layout names, paths or Layouts).

    ``params`` bind layout parameters (``B=4`` for BCSR); each goes to the layouts that
    declare it.  ``keep_zeros``: store entries equal to 0.0 (default: unless the source pads,
    see :func:`pads_with_zeros`).  Destinations placed by position (DIA, ELL: see
    :mod:`spf.front.placement`) refuse to store more than 3 padding slots per entry (75%) unless
    ``allow_padding``.  Into a pattern layout (a constant value, no value array) every
    entry's value must be its constant, checked on the source's entries before the
    conversion runs, unless ``structure`` (the entries' positions are what is asked for).
    ``.c_source()`` is the C, ``.compile()`` a callable Tensor -> Tensor.
    """

    @symbolic
    def __init__(self, src: str | Layout, dst: str | Layout, *, name: str = "spf_convert",
                 keep_zeros: bool | None = None, allow_padding: bool = False,
                 index_type: str | None = None, structure: bool = False, **params: int):
        src_lay, dst_lay = bind_layouts(src, dst, params)
        if structure and dst_lay.implicit is None:
            raise ArgumentError(f"structure=True converts into a pattern layout (its value a "
                                f"constant); {dst_lay.name} stores values ({dst_lay.value})")
        self.structure = structure
        widths = {lay.index_type for lay in (src, dst) if isinstance(lay, Layout)}
        if index_type is None and len(widths) > 1:
            raise SpecError(f"cannot convert {src_lay.name} ({src_lay.index_type}) to "
                            f"{dst_lay.name} ({dst_lay.index_type}): a conversion runs in one "
                            "index width; pass index_type=, or convert the tensor with "
                            "Tensor.convert, which widens or narrows the result", dst_lay.source)
        # a Layout object brings its own width; a layout declaring int64 arrays needs int64
        wide = "int64" if "int64" in (src_lay.index_type, dst_lay.index_type) \
            and not widths else None
        width = index_type or wide or src_lay.index_type
        # a conversion keeps the values' type (the source's)
        self.src = src_lay.with_index_type(width)
        self.dst = dst_lay.with_index_type(width).with_value_type(self.src.value_type)
        self.index_type = width
        if self.src.order != self.dst.order:
            raise SpecError(f"cannot convert {self.src.name} (order {self.src.order}) to "
                            f"{self.dst.name} (order {self.dst.order}): the orders differ",
                            self.dst.source)
        if self.src.order > len(_INDICES):
            raise SpecError(f"conversions support order up to {len(_INDICES)}", self.src.source)
        idx = ",".join(_INDICES[:self.src.order])
        self.keep_zeros = not pads_with_zeros(self.src) if keep_zeros is None else keep_zeros
        self.allow_padding = allow_padding
        self.name = name
        dense_dst = self.dst.dense_array is not None
        self.placement: Placement | None = None
        self.writing: WritePlan | None = None
        out = self.dst
        if not dense_dst and (storage_or_none(self.dst) is None or self.dst.mixed_widths):
            # the placement passes run over one loop nest: a union source (one nest per
            # part) is read into an entry list and written instead
            self.placement, self.writing = _placed_or_written(
                self.dst, placeable=len(self.src.relation.disjuncts) == 1)
            # the loops only (a stand-in output): placed entries by the placement's passes,
            # written ones read into a coordinate list first
            out = (_stand_in(self.dst) if self.placement else _entry_list(self.dst, width)
                   ).with_value_type(self.src.value_type)
        with self._blamed():
            self.kernel = Kernel(f"B({idx}) = A({idx})", {"A": self.src, "B": out},
                                 name=name, drop_zeros=not self.keep_zeros and not dense_dst
                                 and self.placement is None, index_type=width,
                                 # a pattern destination's values: checked by _ValuesChecked
                                 structure=out.implicit is not None)
        self._source: str | None = None

    def _blamed(self) -> AbstractContextManager[None]:
        """Errors of this conversion's kernel located in the destination's layout file (the
        source's relation alone scans: its tensor passed the read check)."""
        return blamed_on(self.dst, "B", {"A": self.src})

    @symbolic
    def c_source(self) -> str:
        """The generated C (struct typedefs, the conversion function and its helpers)."""
        with self._blamed():
            if self.placement is None:
                return self.kernel.c_source()
            if self._source is None:
                self._source = _placement_source(self, self.placement)
            return self._source

    @symbolic
    def report(self) -> str:
        """How the destination is assembled and why (the kernel's report)."""
        with self._blamed():
            text = self.kernel.report()
        if self.writing is not None:
            return (text + f"\nwritten into {self.dst.name} from the entry list, as its "
                    "relation solves for each entry's position: "
                    + self.writing.describe(tuple(_INDICES[:self.dst.order])))
        if self.placement is not None:
            pl = self.placement
            names = list(_INDICES[:self.dst.order])
            parts = [f"{p} = {aff_text(pl.coordinates[p], names)}" for p in self.dst.indices
                     if p in pl.coordinates]
            rk = pl.ranked
            if rk:
                key = aff_text(rk.key * rk.unit, names)
                order = f"{'de' if rk.descending else 'in'}creasing"
                if rk.pointer:
                    parts.append(f"{rk.index} = position of the key {key} among the keys "
                                 f"present in its ({', '.join(rk.group)}), {rk.uf} = those "
                                 f"keys ({order}), {rk.pointer} = where each "
                                 f"({', '.join(rk.group)}) starts")
                else:
                    parts.append(f"{rk.index} = rank of {key} among the keys present, "
                                 f"{rk.uf} = the keys ({order}), {pl.bounds[rk.index]} = "
                                 "their number")
            if pl.slot:
                parts.append(f"{pl.slot.index} = next slot of its "
                             f"({', '.join(pl.group())}), {pl.bounds[pl.slot.index]} = the "
                             f"largest group, unused {pl.slot.uf} = {pl.slot.fill}")
            text = text.split("\nassembly:")[0] + (
                f"\nplacement into {pl.layout.name} (analysis pass, then fill pass): "
                + "; ".join(parts))
        return text

    def compile(self) -> Callable[[StoredTensor], StoredTensor]:
        """A callable converting a Tensor in ``src`` to a new Tensor in ``dst``."""
        with self._blamed():
            run: _Placed | _Written | _Compiled
            if self.placement is not None:
                run = _Placed(self, self.placement)
            elif self.writing is not None:
                run = _Written(self, self.writing, self.kernel.compile())
            else:
                run = _Compiled(self, self.kernel.compile())
        if self.dst.implicit is None or self.structure or self.src.implicit == self.dst.implicit:
            return run
        return _ValuesChecked(self, run)


def pads_with_zeros(layout: Layout) -> bool:
    """Whether ``layout``'s innermost index is a logical coordinate up to a constant shift or
    scale (an equality with a logical variable names it outside any index array): a dense
    level, whose positions exist whether or not they hold an entry."""
    rel = layout.relation
    inner = layout.indices[-1] if layout.indices else None
    outs = set(rel.out_vars or ())
    return inner is not None and any(
        c.is_eq and c.aff.coeff(inner) and any(c.aff.coeff(g) for g in outs)
        for conj in rel.disjuncts for c in conj)


def _stand_in(layout: Layout) -> Layout:
    """The dense output a conversion placed into ``layout`` runs its loops into (its
    statement is replaced by the placement's passes)."""
    out = dense_layout(layout.order)
    if out is None:
        raise SpecError(f"cannot convert into layout {layout.name}: its entries are placed by "
                        "position from the loops of a conversion into a dense layout, and "
                        f"no dense layout of order {layout.order} is on the layout search path",
                        layout.source)
    return out


def _entry_list(layout: Layout, width: str) -> Layout:
    """The coordinate layout a conversion written by its relation reads entries into."""
    out = coordinate_layout(layout.order)
    if out is None:
        raise SpecError(f"cannot convert into layout {layout.name}: its entries are written "
                        "from an entry list, and no coordinate layout of order "
                        f"{layout.order} is on the layout search path", layout.source)
    return out.with_index_type(width)


def _placed_or_written(layout: Layout, placeable: bool
                       ) -> tuple[Placement | None, WritePlan | None]:
    """How entries go into ``layout`` when it is not assembled in storage order: placed by
    position (generated passes), else written by its relation's solution; SpecError naming
    why each way fails."""
    placement = placement_or_none(layout) \
        if placeable and layout.written_as_one_conjunction() is None else None
    if placement is not None:
        return placement, None
    try:
        return None, write_plan(layout)
    except SpecError as written:
        reasons = []
        for attempt in (storage_of, placement_of):
            try:
                attempt(layout)
            except SpecError as e:
                reasons.append(e.detail)
        reasons.append(written.detail)
        raise layout_error(layout, f"cannot convert into layout {layout.name}: "
                           + "; and ".join(reasons)) from None


class _Compiled:
    def __init__(self, conversion: Conversion, fn: CompiledKernel):
        self.conversion = conversion
        self.fn = fn

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        return self._run(self.fn, tensor)

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        """This conversion run in parts on a Dask cluster: its kernel's
        :meth:`CompiledKernel.distributed` (row blocks of the source, joined in ``dst``)."""
        run = self.fn.distributed(client, parts)
        return lambda tensor: self._run(run, tensor)

    def _run(self, fn: Callable[..., Any], tensor: StoredTensor) -> StoredTensor:
        conv = self.conversion
        if not isinstance(tensor, StoredTensor):
            raise ArgumentError(f"a conversion from {conv.src.name} takes an spf.Tensor, got "
                                f"{type(tensor).__name__}")
        out = fn(A=tensor)
        if isinstance(out, StoredTensor):
            return out
        return tensor_class().from_dense(conv.dst, np.asarray(out).reshape(tensor.shape))


def _placement_source(conv: Conversion, pl: Placement) -> str:
    """C of a conversion placed by ``pl``: ``<name>_analysis`` and ``<name>`` (the fill
    pass), both over the source's loops."""
    k = conv.kernel
    names = list(_INDICES[:conv.src.order])
    dims = pl.monotone_group_dims() if pl.slot else None
    level = contiguous_group_level(k.nest, tuple(names[d] for d in dims), k.decisions) \
        if dims else None
    passes = placement_passes(pl, names, not conv.keep_zeros, level)
    pieces = [kernel_code(k.plan, f"{conv.name}{suffix}", custom=custom)
              for suffix, custom in zip(("_analysis", ""), passes)]
    header = [f"Generated by spf: conversion {conv.src.name} -> {conv.dst.name}",
              f"  {k.space.uses[0].name}: {k.space.uses[0].layout.name} "
              f"{k.space.uses[0].relation()}"]
    first, code = pieces
    before = ("/* Analysis pass: which keys occur and how many entries each group holds. */\n"
              + function(first))
    if pl.grouped:
        before = template_text("placement.c") + "\n\n" + before
    return render_file(header, code.helpers | first.helpers,
                              list(code.layouts.values()), code.signature, code.body,
                              code.runtimes | first.runtimes, before=before,
                              typing=k.plan.typing)


class _Placed:
    """Runs a conversion placed by ``pl``: analysis, sizes and index arrays, fill, checked
    result."""

    def __init__(self, conv: Conversion, pl: Placement):
        self.conversion, self.placement = conv, pl
        self.lib = runtime.load_library(str(runtime.build_library(conv.c_source())))
        self.analysis = getattr(self.lib, f"{conv.name}_analysis")
        self.fill = getattr(self.lib, conv.name)

    def __reduce__(self) -> tuple:
        """Pickled as its conversion, which carries its C source (see
        :meth:`CompiledKernel.__reduce__`)."""
        return (_Placed, (self.conversion, self.placement))

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        raise SpecError(f"a conversion into {self.conversion.dst.name} places entries by "
                        "position (an analysis pass over the whole source, then a fill pass); "
                        "it is not distributed", self.conversion.dst.source)

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        conv, pl = self.conversion, self.placement
        width = conv.index_type
        _check_source(conv, tensor)
        shape = tuple(tensor.shape)
        order = list(pl.layout.indices)
        rk = pl.ranked
        bound: dict[str, int] = {}
        for p, a in pl.coordinates.items():
            given = pl.bounds[p]
            bound[p] = given if isinstance(given, int) else aff_range(a, shape)[1] + 1
        kmin, kmax = aff_range(rk.key, shape) if rk else (0, -1)
        span = max(kmax - kmin + 1, 0)
        groups = math.prod(bound[p] for p in pl.group()) if pl.slot else 0
        src = runtime.make_struct(tensor.layout, tensor.fields)
        bounds = np.array([bound.get(p, 0) for p in order], np.int64)
        # entries <= stored values: each source position is visited once
        capacity = _value_slots(tensor) if pl.grouped else 0
        stride = 1 << max(span - 1, 0).bit_length()      # group * stride + key: shifts, no division
        item = np.dtype(width).itemsize
        what = f"converting a {conv.src.name} tensor of shape {shape} to {pl.layout.name}"
        while True:     # present, count, keys; rank, and the C's marks (a power of two)
            reserve(max(span, 1) * (1 + item) + stride * item + 2 * max(groups, 1) * item
                    + 8 * capacity, f"the analysis of positions {what}")
            present = np.zeros(max(span, 1) if rk and not pl.grouped else 1, np.uint8)
            count = np.zeros(max(groups, 1), width)
            entries = np.zeros(1, np.int64)
            keys = np.empty(max(capacity, 1), np.int64)
            if self.analysis(_ptr(present), _ptr(count), _ptr(entries), _ptr(keys),
                             ctypes.c_int64(capacity), ctypes.c_int64(kmin),
                             ctypes.c_int64(stride), _ptr(bounds), ctypes.byref(src)):
                raise OutOfMemoryError(f"{conv.name}: its C code could not allocate its "
                                       "analysis pass's state (malloc returned NULL): out "
                                       "of memory")
            n = int(entries[0])
            if n <= capacity or not pl.grouped:
                break
            capacity = n
        fields: dict[str, Any] = {}
        rank = np.empty(max(span, 1), width)      # read only at the keys present
        pos = np.zeros(1, np.int64)
        if rk and rk.pointer:
            n_groups = math.prod(bound[p] for p in rk.group)
            ptr = np.zeros(n_groups + 1, width)
            values = np.empty(max(n, 1), width)
            pos = np.empty(max(n, 1), np.int64)
            if self.lib.spf_rank_in_groups(
                    ctypes.c_int64(n), _ptr(keys), ctypes.c_int64(n_groups),
                    ctypes.c_int(stride.bit_length() - 1), ctypes.c_int(rk.descending),
                    _ptr(ptr), _ptr(values), _ptr(pos)):
                raise OutOfMemoryError(f"{conv.name}: its C code could not allocate the "
                                       f"marks ranking {rk.uf}'s {n} keys (malloc returned "
                                       "NULL): out of memory")
            values = values[:ptr[-1]]
            fields[rk.pointer] = ptr
            fields[rk.uf] = ((values + kmin) * rk.unit).astype(width)
            bound[rk.index] = int(ptr[-1])
        elif rk:
            found = np.flatnonzero(present[:span])
            found = found[::-1] if rk.descending else found
            rank[found] = np.arange(len(found), dtype=width)
            bound[rk.index] = len(found)
            fields[rk.uf] = ((found + kmin) * rk.unit).astype(width)
        if pl.slot:
            bound[pl.slot.index] = int(count.max()) if groups else 0
        slots = math.prod(bound[p] for p in pl.value)
        if slots > index_max(pl.layout):
            raise ArgumentError(f"{pl.layout.name} would need {slots} slots, more than "
                                f"index_type={width!r} can address"
                                + wider_hint(width))
        if slots > 4 * n and not conv.allow_padding:
            raise ArgumentError(
                f"{pl.layout.name} would store {n} entries in {slots} slots "
                f"({100 * (1 - n / slots):.0f}% padding, over 75%); pass allow_padding=True "
                "to convert anyway")
        lay = pl.layout
        fields.update(_shape_fields(lay, shape))
        for p in order:
            field = pl.bounds[p]
            if isinstance(field, str):
                fields[field] = bound[p]
        slot_arr = np.zeros(1, width)
        if pl.slot:
            slot_count = max(math.prod(bound[a] for a in pl.slot.args), 1)
            reserve(slot_count * item, f"{pl.layout.name}'s {pl.slot.uf} {what}")
            slot_arr = np.full(slot_count, pl.slot.fill, width)
            fields[pl.slot.uf] = slot_arr[:math.prod(bound[a] for a in pl.slot.args)]
        data = aligned_zeros(max(slots, 1), lay.value_type.dtype, f"{lay.name}'s values {what}")
        fields[lay.value_ref.array] = data[:slots]   # placement refuses pattern layouts
        bounds = np.array([bound[p] for p in order], np.int64)
        nxt = np.zeros_like(count)
        self.fill(_ptr(data), _ptr(slot_arr), _ptr(nxt), _ptr(rank), _ptr(pos),
                  ctypes.c_int64(kmin), _ptr(bounds), ctypes.byref(src))
        # exact dtypes and sizes, properties established by construction (the tests check
        # them): not re-validated, as kernels' assembled outputs are not
        fields = dict(with_derived(lay, fields))
        check_built_ranges(lay, fields, f"conversion {conv.name} into {lay.name}")
        t = tensor_class()._built(lay, shape, fields)
        t.source_entries = n if slots > n else None
        return t


class _Written:
    """Runs a conversion written by its destination's relation: the source read into an
    entry list by generated code, then :func:`spf.runtime.writer.write`."""

    def __init__(self, conv: Conversion, plan: WritePlan, read: CompiledKernel):
        self.conversion, self.plan, self.read = conv, plan, read

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        raise SpecError(f"a conversion into {self.conversion.dst.name} is written from the "
                        "whole entry list; it is not distributed", self.conversion.dst.source)

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        conv = self.conversion
        _check_source(conv, tensor)
        # into a pattern layout: its values were checked (_ValuesChecked) or not asked for
        out = writer.rewritten(self.read(A=tensor), conv.dst, conv.allow_padding,
                               structure=True)
        return out


class _ValuesChecked:
    """Runs a conversion into a pattern layout: the source's entries (as the conversion
    keeps them) read into a coordinate list by generated code and their values checked to
    be the destination's constant (:func:`~spf.runtime.fields.implicit_values`), then the
    conversion, which stores their positions."""

    def __init__(self, conv: Conversion, run: _Placed | _Written | _Compiled):
        self.conversion, self.run = conv, run

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        self.check(tensor)
        return self.run(tensor)

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        run = self.run.distributed(client, parts)

        def checked(tensor: StoredTensor) -> StoredTensor:
            self.check(tensor)
            return run(tensor)
        return checked

    def check(self, tensor: StoredTensor) -> None:
        conv = self.conversion
        _check_source(conv, tensor)
        coo = coordinate_layout(conv.src.order)
        if coo is None:
            raise SpecError(f"cannot convert into layout {conv.dst.name}: the values of the "
                            "entries are checked through a coordinate layout, and none of "
                            f"order {conv.src.order} is on the layout search path",
                            conv.dst.source)
        listed = convert(tensor, coo.with_index_type(tensor.layout.index_type),
                         keep_zeros=conv.keep_zeros)
        (level,) = storage_of(listed.layout).levels
        coords = [np.asarray(listed.fields[a]) for _, a in sorted(level.coords) if a]
        implicit_values(conv.dst, coords, np.asarray(listed.values), False,
                        f"converting a {conv.src.name} tensor to {conv.dst.name}")


def _value_slots(tensor: StoredTensor) -> int:
    """The size of ``tensor``'s value array: 0 for a pattern layout (it has none; a first
    guess, which the placed conversion's analysis grows)."""
    held = tensor.layout.value_array
    return tensor.fields[held].size if held is not None else 0


def _check_source(conv: Conversion, tensor: Any) -> None:
    """ArgumentError unless ``tensor`` is an spf.Tensor in the conversion's source layout."""
    if not isinstance(tensor, StoredTensor) or tensor.layout != conv.src:
        raise ArgumentError(f"a conversion from {conv.src.name} takes an spf.Tensor in "
                            f"{conv.src.name}, got "
                            + (tensor.layout.name if isinstance(tensor, StoredTensor)
                               else type(tensor).__name__))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _shape_fields(layout: Layout, shape: tuple[int, ...]) -> dict[str, int]:
    """The scalar fields ``layout``'s shape names, at ``shape``; ArgumentError when a constant
    extent (or one ``placement_of`` admits) differs from the tensor's."""
    out: dict[str, int] = {}
    for d, (extent, n) in enumerate(zip(layout.shape, shape)):
        name = extent.as_name()
        if name is not None and name not in out:
            out[name] = n
        elif extent.evaluate(out) != n:
            raise ArgumentError(f"layout {layout.name} stores tensors of shape "
                                f"({', '.join(map(str, layout.shape))}); got shape {shape} "
                                f"(dimension {d})")
    return out


def bind_layouts(src: str | Layout, dst: str | Layout,
                 params: Mapping[str, int]) -> tuple[Layout, Layout]:
    """Load both layouts, each with the parameters it declares; a parameter neither declares
    is an error naming both layouts' parameters."""
    a, b = load_layout(src), load_layout(dst)
    unknown = [p for p in params if p not in a.params and p not in b.params]
    if unknown:
        raise SpecError(f"unknown layout parameter(s) {unknown}: {a.name} takes "
                        f"{sorted(a.params) or 'none'}, {b.name} takes "
                        f"{sorted(b.params) or 'none'}", b.source)
    a = a.with_params(**{k: v for k, v in params.items() if k in a.params})
    b = b.with_params(**{k: v for k, v in params.items() if k in b.params})
    if a.order_param is not None and b.order_param is None:
        a = for_order(a, b.order, params)       # a file for every order takes the other's
    return a, for_order(b, a.order, params)


def convert(tensor: StoredTensor, dst: str | Layout, **params: Any) -> StoredTensor:
    """``tensor`` in layout ``dst`` (see :class:`Conversion`; compiled kernels are cached).
    A ``dst`` Layout of another index width gets the tensor's entries in that width: the
    conversion runs in the tensor's, then the index arrays are widened or narrowed (an
    ArgumentError names a value that does not fit)."""
    keep = params.pop("keep_zeros", None)
    width = tensor.layout.index_type
    if width == "int32" and _declares_int64(dst):
        # it declares int64 arrays: its loops run in 64 bits, so the tensor is widened
        return convert(tensor.with_index_type("int64"), dst, keep_zeros=keep, **params)
    if isinstance(dst, Layout) and dst.index_type != width:
        out = convert(tensor, dst.with_index_type(width), keep_zeros=keep, **params)
        return out.with_index_type(dst.index_type)
    return _cached(tensor.layout, dst, keep, tuple(sorted(params.items())))(tensor)


_COMPILED: dict[tuple, Callable[[StoredTensor], StoredTensor]] = {}


def _declares_int64(dst: str | Layout) -> bool:
    """Whether ``dst`` declares an int64 index array (its loops run in 64 bits); a name is
    looked up once, as the compiled conversions are."""
    if isinstance(dst, Layout):
        return bool(dst.int64_arrays)
    return _name_declares_int64(str(dst))


@cache
def _name_declares_int64(name: str) -> bool:
    return _declares_int64(load_layout(name))


def _cached(src: Layout, dst: str | Layout, keep: bool | None,
            params: tuple) -> Callable[[StoredTensor], StoredTensor]:
    key = (src, dst if isinstance(dst, Layout) else str(dst), keep, params)
    if key not in _COMPILED:
        _COMPILED[key] = Conversion(src, dst, keep_zeros=keep, **dict(params)).compile()
    return _COMPILED[key]


__all__ = ["Conversion", "compressed_rows_layout", "convert", "coordinate_layout",
           "dense_layout", "pads_with_zeros"]
