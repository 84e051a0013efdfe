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
from .back import ctree as t
from .back.c_printer import CPrinter
from .back.lower import kernel_code
from .back.names import struct_name
from .back.placement_passes import aff_text, placement_passes
from .back.source import function, render_file
from .back.status import Status, c_name
from .back.templates import text as template_text
from .concurrency import symbolic
from .errors import ArgumentError, OutOfMemoryError, SpecError
from .front.layout import Layout
from .front.layout_file import blamed_on, layout_error
from .front.layout_path import for_order, load_layout
from .front.placement import Placement, aff_range, placement_of, placement_or_none
from .front.stand_ins import compressed_rows_layout, coordinate_layout, dense_layout
from .front.storage import storage_of, storage_or_none
from .front.terms import Aff
from .front.writing import WritePlan, write_plan
from .kernel import Kernel
from .runtime import build as runtime
from .runtime import writer
from .runtime.compiled import CompiledKernel
from .runtime.fields import index_max, wider_hint, with_derived
from .runtime.memory import aligned_zeros, byte_limit, reserve
from .runtime.stored import StoredTensor, check_built_ranges, tensor_class
from .store.lower import WriterSource, writer_file

_INDICES = "ijklmnop"


class Conversion:
    """The generated conversion from ``src`` to ``dst`` (layout names, paths or Layouts).

    ``params`` bind layout parameters (``B=4`` for BCSR); each goes to the layouts that
    declare it.  ``keep_zeros``: store entries equal to 0.0 (default: unless the source pads,
    see :func:`pads_with_zeros`).  Destinations placed by position (DIA, ELL: see
    :mod:`spf.front.placement`) refuse to store more than 3 padding slots per entry (75%) unless
    ``allow_padding``.  ``.c_source()`` is the C, ``.compile()`` a callable Tensor -> Tensor.
    """

    @symbolic
    def __init__(self, src: str | Layout, dst: str | Layout, *, name: str = "spf_convert",
                 keep_zeros: bool | None = None, allow_padding: bool = False,
                 index_type: str | None = None, **params: int):
        src_lay, dst_lay = bind_layouts(src, dst, params)
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
            # a written destination: the kernel reads the source into an entry list, the
            # writer (spf.store) writes it, one function calls both
            self.kernel = Kernel(f"B({idx}) = A({idx})", {"A": self.src, "B": out},
                                 name=f"{name}_entries" if self.writing else name,
                                 drop_zeros=not self.keep_zeros and not dense_dst
                                 and self.placement is None, index_type=width)
        self._source: str | None = None

    def _blamed(self) -> AbstractContextManager[None]:
        """Errors of this conversion's kernel located in the destination's layout file (the
        source's relation alone scans: its tensor passed the read check)."""
        return blamed_on(self.dst, "B", {"A": self.src})

    @symbolic
    def c_source(self) -> str:
        """The generated C (struct typedefs, the conversion function and its helpers)."""
        with self._blamed():
            if self.placement is None and self.writing is None:
                return self.kernel.c_source()
            if self._source is None and self.placement is not None:
                self._source = _placement_source(self, self.placement)
            elif self._source is None and self.writing is not None:
                self._source = _written_source(self, self.writing)[1]
            assert self._source is not None
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
            if self.placement is not None:
                return _Placed(self, self.placement)
            if self.writing is not None:
                return _Written(self, self.writing, self.kernel.compile())
            return _Compiled(self, self.kernel.compile())


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
        capacity = tensor.fields[conv.src.value.array].size if pl.grouped else 0
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
        fields[lay.value.array] = data[:slots]
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


def _field_text(a: Aff) -> str:
    """An extent of the source's shape (over its scalar fields) in C."""
    parts = [f"{k} * (int64_t)A->{atom}" for atom, k in a.terms]
    return " + ".join([*parts, str(a.const)]) if parts else str(a.const)


def _written_source(conv: Conversion, plan: WritePlan) -> tuple[WriterSource, str]:
    """C of a conversion into a destination written by its relation: the kernel reading the
    source into an entry list (``<name>_entries``), the writer (``<name>_write``, see
    :mod:`spf.store`) and ``<name>``, which runs both."""
    k = conv.kernel
    read = k.c_source()
    src, writer = writer_file(plan, f"{conv.name}_write", before=read)
    entries = k.layouts["B"]
    storage = storage_of(entries)
    (level,) = storage.levels
    coords = dict(level.coords)
    shape = [_field_text(e) for e in conv.src.shape]
    plans = [term.plan for term in k.terms] if k.terms else [k.plan]
    ranged = any(p.assembly is not None and p.assembly.ranged for p in plans)
    dst, lst = struct_name(conv.dst), struct_name(entries)
    order = conv.src.order
    body: list[t.Node] = [
        t.Declare("const int64_t", f"spf_shape[{max(order, 1)}]", "{" + ", ".join(shape) + "}"),
        t.Declare("int64_t", "spf_bound", "0"),
        t.Declare("int", "spf_status",
                  f"{conv.name}_entries_bound(&spf_bound, {'spf_shape, ' if ranged else ''}A)"),
        t.If("spf_status", [t.Return("spf_status")]),
        t.Declare(lst, "spf_list", "{0}"),
    ]
    for e, g in zip(entries.shape, range(order)):
        if (name := e.as_name()) is not None:
            body.append(t.Assign(f"spf_list.{name}", f"(spf_index_t)spf_shape[{g}]"))
    arrays = [coords[d] for d in range(order)]
    count = "(size_t)(spf_bound > 0 ? spf_bound : 1)"
    for a in arrays:
        body.append(t.Assign(f"spf_list.{a}", f"malloc(sizeof(spf_index_t) * {count})"))
    value = entries.value.array
    body.append(t.Assign(f"spf_list.{value}", f"malloc(sizeof(spf_value_t) * {count})"))
    ok = " && ".join(f"spf_list.{a}" for a in [*arrays, value])
    body += [
        t.Declare("int64_t", "spf_size[1]", "{spf_bound}"),
        t.Assign("spf_status", f"!({ok}) ? {c_name(Status.OUT_OF_MEMORY)} : "
                 f"{conv.name}_entries(&spf_list, spf_size, A)"),
        t.If("!spf_status", [
            t.Declare("const spf_index_t *const", f"spf_g[{max(order, 1)}]",
                      "{" + ", ".join(f"spf_list.{a}" for a in arrays) + "}"),
            t.Assign("spf_status", f"{conv.name}_write(B, spf_err, spf_sizes, spf_size[0], "
                     f"spf_g, spf_list.{value}, spf_shape, {int(conv.allow_padding)}, "
                     "spf_max_bytes)")]),
        *[t.Call(f"free(spf_list.{a})") for a in [*arrays, value]],
        t.Return("spf_status")]
    glue = t.Function(
        f"int {conv.name}({dst} *restrict B, int64_t *restrict spf_err, "
        f"int64_t *restrict spf_sizes, int64_t spf_max_bytes, "
        f"const {struct_name(conv.src)} *restrict A)", body,
        f"{conv.src.name} -> {conv.dst.name}: the source's entries read into an entry list by "
        f"{conv.name}_entries, then written by {conv.name}_write (every array of B malloc'd "
        "there; free each with free).  spf_err, spf_sizes (or NULL), spf_max_bytes (0: no "
        f"limit): see {conv.name}_write.")
    header = "\n".join(f" * {line}" for line in [
        f"Conversion {conv.src.name} -> {conv.dst.name}, generated by spf.",
        f"{conv.name}(B, spf_err, spf_sizes, spf_max_bytes, A) is the whole conversion; "
        "it calls:",
        *src.header(), "the writer's passes: " + plan.describe(tuple(_INDICES[:order]))])
    text = (f"/*\n{header}\n */\n" + read + "\n\n" + writer + "\n\n"
            + CPrinter().definitions([glue]) + "\n")
    return src, text


class _Written:
    """Runs a conversion written by its destination's relation: the source read into an
    entry list and written into the destination, all by generated C (:func:`_written_source`);
    a union destination is then read back (see :func:`spf.runtime.writer.written`)."""

    def __init__(self, conv: Conversion, plan: WritePlan, read: CompiledKernel):
        self.conversion, self.plan, self.read = conv, plan, read
        self.source, text = _written_source(conv, plan)
        self.fn = getattr(runtime.load_library(str(runtime.build_library(text))), conv.name)
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_void_p]

    def __reduce__(self) -> tuple:
        return (_Written, (self.conversion, self.plan, self.read))

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        raise SpecError(f"a conversion into {self.conversion.dst.name} is written from the "
                        "whole entry list; it is not distributed", self.conversion.dst.source)

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        conv, src = self.conversion, self.source
        _check_source(conv, tensor)
        err, sizes = writer.buffers(src)
        out = runtime.struct_type(conv.dst)()
        given = runtime.make_struct(conv.src, tensor.fields)
        status = self.fn(ctypes.addressof(out), runtime.address(err), runtime.address(sizes),
                         byte_limit(), ctypes.addressof(given))
        fields, entries = writer.finished(src, status, err, out, sizes)
        t = writer.checked(self.plan, tuple(tensor.shape), fields)
        if not self.plan.reads_back_by_construction:    # two tuples may read one slot
            coords, values = tensor.entries()
            writer.check_read_back(self.plan, t, coords, values)
        t.source_entries = entries if t.values.size > entries else None
        return t


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
