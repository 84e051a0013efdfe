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
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from functools import cache
from typing import Any

import numpy as np

from .assembly import FunctionRole
from .assembly.append import unique_keys
from .assembly.entry_c import extents_fit
from .back import ctree as t
from .back.c_printer import CPrinter
from .back.lower import kernel_code
from .back.names import struct_name, struct_typedef
from .back.source import assembled_entry, extent_c, render_file
from .back.status import Status, c_enum, c_name
from .back.templates import text as template_text
from .back.value_c import literal_c
from .concurrency import symbolic
from .errors import ArgumentError, SpecError
from .front import index_expr as ie
from .front.established import keeps_within_shape
from .front.layout import Layout
from .front.layout_file import blamed_on, layout_error
from .front.layout_path import for_order, load_layout
from .front.stand_ins import compressed_rows_layout, coordinate_layout, dense_layout
from .front.storage import storage_of, storage_or_none
from .front.terms import Aff
from .front.writing import WritePlan, write_plan
from .kernel import Kernel
from .runtime import build as runtime
from .runtime import writer
from .runtime.compiled import CompiledKernel
from .runtime.fields import implicit_values
from .runtime.memory import byte_limit
from .runtime.stored import StoredTensor, check_built_ranges, tensor_class
from .store import Refusal, Visit, WriterSource, visitable, writer_file, writer_source

_INDICES = "ijklmnop"


class Conversion:
    """The generated conversion from ``src`` to ``dst`` (layout names, paths or Layouts).

    ``params`` bind layout parameters (``B=4`` for BCSR); each goes to the layouts that
    declare it.  ``keep_zeros``: store entries equal to 0.0 (default: unless the source pads,
    see :func:`pads_with_zeros`).  Destinations written by their relations (DIA, ELL, SELL:
    see :mod:`spf.store`) refuse to store more than 3 padding slots per entry (75%) unless
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
                                f"constant); {dst_lay.name} stores values (in "
                                f"{dst_lay.value_array})")
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
        self.writing: WritePlan | None = None
        out = self.dst
        if not dense_dst and (storage_or_none(self.dst) is None or self.dst.mixed_widths):
            # not assembled level by level: the kernel reads the source into an entry list,
            # the writer (spf.store) writes it, one function calls both
            self.writing = _written_plan(self.dst)
            out = _entry_list(self.dst, width).with_value_type(self.src.value_type)
        with self._blamed():
            self.kernel = Kernel(f"B({idx}) = A({idx})", {"A": self.src, "B": out},
                                 name=f"{name}_entries" if self.writing else
                                 f"{name}_fill",
                                 drop_zeros=not self.keep_zeros and not dense_dst,
                                 index_type=width,
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
            if self._source is None:
                self._source = _written_source(self, self.writing)[1] if self.writing \
                    else _assembled_source(self)[1] if self.kernel.assembly is not None \
                    else _dense_source(self)[1]
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
        return text

    def compile(self) -> Callable[[StoredTensor], StoredTensor]:
        """A callable converting a Tensor in ``src`` to a new Tensor in ``dst``."""
        with self._blamed():
            run: _Written | _Assembled | _Compiled = _Written(self, self.writing) \
                if self.writing is not None else _Assembled(self, _assembled_source) \
                if self.kernel.assembly is not None else _Assembled(self, _dense_source)
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


def _entry_list(layout: Layout, width: str) -> Layout:
    """The coordinate layout a conversion written by its relation reads entries into."""
    out = coordinate_layout(layout.order)
    if out is None:
        raise SpecError(f"cannot convert into layout {layout.name}: its entries are written "
                        "from an entry list, and no coordinate layout of order "
                        f"{layout.order} is on the layout search path", layout.source)
    return out.with_index_type(width)


def _written_plan(layout: Layout) -> WritePlan:
    """How entries are written into ``layout`` when it is not assembled in storage order;
    SpecError naming why neither way works."""
    try:
        return write_plan(layout)
    except SpecError as written:
        reasons = []
        try:
            storage_of(layout)
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
        if tensor.fill != 0 and conv.dst.dense_array is not None:   # parts hold 0 there
            raise ArgumentError(f"a distributed conversion into {conv.dst.name} of a tensor "
                                f"whose fill is {tensor.fill} is not supported (its elements "
                                "without an entry would hold 0): convert it here "
                                "(Tensor.convert), which puts the fill there")
        out = fn(A=tensor)
        if isinstance(out, StoredTensor):
            return out
        return tensor_class().from_dense(conv.dst, np.asarray(out).reshape(tensor.shape))


def _entry_signature(conv: Conversion) -> t.Signature:
    """``int <name>(B, spf_err, spf_sizes, spf_max_bytes, A)``: a conversion's C entry."""
    return t.Signature("int", conv.name, (
        t.Param(f"{struct_name(conv.dst)} *restrict", "B"),
        t.Param("int64_t *restrict", "spf_err"), t.Param("int64_t *restrict", "spf_sizes"),
        t.Param("int64_t", "spf_max_bytes"),
        t.Param(f"const {struct_name(conv.src)} *restrict", "A")))


def _source_extent(src: Layout, e: Aff) -> str:
    """An extent of the source's shape in C, over the fields of its struct ``A``."""
    text = extent_c(e.rename({n: f"A.{n}" for n in e.names()}))
    if text is None:
        raise layout_error(src, f"layout {src.name}: its shape's extent {e} is not over its "
                           "scalar fields", "shape")
    return text


def _written_source(conv: Conversion, plan: WritePlan) -> tuple[WriterSource, str]:
    """C of a conversion into a destination written by its relation: the kernel reading the
    source into an entry list (``<name>_entries``), the writer (``<name>_write``, see
    :mod:`spf.store`) and ``<name>``, which runs both."""
    k = conv.kernel
    visit = _visit(conv) if visitable(plan) else None
    src = writer_source(plan, f"{conv.name}_write", visit)
    if visit is not None and src.visits:
        structs = {struct_name(lay): struct_typedef(lay) for lay in (conv.src, conv.dst)}
        writer = writer_file(src, "\n\n".join(structs.values()))
        return src, _visited_source(conv, plan, src, writer, visit.helpers)
    read = k.c_source()
    writer = writer_file(src, before=read)
    entries = k.layouts["B"]
    storage = storage_of(entries)
    (level,) = storage.levels
    coords = dict(level.coords)
    shape = [_source_extent(conv.src, e) for e in conv.src.shape]
    plans = [term.plan for term in k.terms] if k.terms else [k.plan]
    ranged = any(p.assembly is not None and p.assembly.ranged for p in plans)
    lst = struct_name(entries)
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
        body.append(t.Assign(f"spf_list.{a}", f"spf_st_alloc(sizeof(spf_index_t) * {count})"))
    value = entries.value_ref.array
    body.append(t.Assign(f"spf_list.{value}", f"spf_st_alloc(sizeof(spf_value_t) * {count})"))
    ok = " && ".join(f"spf_list.{a}" for a in [*arrays, value])
    body += [
        t.Declare("int64_t", "spf_size[1]", "{spf_bound}"),
        t.Assign("spf_status", f"!({ok}) ? {c_name(Status.OUT_OF_MEMORY)} : "
                 f"{conv.name}_entries(&spf_list, spf_size, A)"),
        t.If("!spf_status", [
            t.Declare("const spf_index_t *const", f"spf_g[{max(order, 1)}]",
                      "{" + ", ".join(f"spf_list.{a}" for a in arrays) + "}"),
            t.Assign("spf_status", f"{conv.name}_write(B, spf_err, spf_sizes, spf_size[0], "
                     f"spf_g, spf_list.{value}, spf_fill, spf_shape, {int(conv.allow_padding)}, "
                     "spf_max_bytes)")]),
        *[t.Call(f"free(spf_list.{a})") for a in [*arrays, value]],
        t.Return("spf_status")]
    glue, wrapper = _entries(conv, body, f"{conv.src.name} -> {conv.dst.name}: the "
                             "source's entries read into an entry list by "
                             f"{conv.name}_entries, then written by {conv.name}_write")
    header = "\n".join(f" * {line}" for line in [
        f"Conversion {conv.src.name} -> {conv.dst.name}, generated by spf.",
        f"{conv.name}(B, spf_err, spf_sizes, spf_max_bytes, A) is the whole conversion; "
        "it calls:",
        *src.header(), "the writer's passes: " + plan.describe(tuple(_INDICES[:order]))])
    text = (f"/*\n{header}\n */\n" + read + "\n\n" + writer + "\n\n"
            + CPrinter().definitions([glue, wrapper]) + "\n")
    return src, text


def _entries(conv: Conversion, body: list[t.Node], what: str) -> tuple[t.Function, t.Function]:
    """``<name>_with_fill`` (``body``, which ``what`` describes) and ``<name>``, which
    passes it the source layout's fill."""
    main = _entry_signature(conv)
    filled = t.Signature("int", f"{conv.name}_with_fill", (
        *main.params, t.Param("const spf_value_t *restrict", "spf_fill")))
    glue = t.Function(
        filled, body,
        f"{what} (every array of B malloc'd there; free each with free); *spf_fill: what A "
        "holds where it has no entry (gaps that runs cover hold it).  spf_err, spf_sizes (or "
        "NULL), spf_max_bytes (0: no limit): see the file's header.")
    fill = literal_c(conv.src.fill, conv.src.value_type)
    wrapper = t.Function(main, [
        t.Declare("const spf_value_t", "spf_fill", f"(spf_value_t){fill}",
                  note="A's layout's fill: what A holds where it has no entry"),
        t.Return(f"{conv.name}_with_fill(B, spf_err, spf_sizes, spf_max_bytes, A, &spf_fill)")],
        f"{conv.src.name} -> {conv.dst.name} for a source holding its layout's fill where it "
        f"has no entry ({conv.name}_with_fill).")
    return glue, wrapper


@symbolic
def _visit(conv: Conversion) -> Visit | None:
    """The source's loops over its entries, for the writer's passes (no entry list): where
    the kernel reading it visits each entry once (no two statement instances with the same
    coordinates, which Z3 proves; zeros a padded source holds skipped), in whatever order,
    with no find."""
    k = conv.kernel
    if k.terms:
        return None
    a = k.plan.assembly
    if a is None or a.ranged or k.plan.decisions or conv.src.index_type != conv.dst.index_type \
            or not (a.unique or unique_keys(k.plan.nest, a, [])):
        return None
    code = kernel_code(k.plan, f"{conv.name}_visit", FunctionRole.VISIT)
    *loops, done = code.body[code.prologue:]
    if not isinstance(done, t.Return) or len(code.signature.params) != 1:
        return None
    indices = list(a.output.indices)
    ordered = tuple((indices.index(a.key[m]), a.descending[m]) for m in range(a.ordered))
    return Visit(code.signature.params[0], tuple(code.body[:code.prologue]), tuple(loops),
                 tuple(indices), ordered, frozenset(code.helpers), keeps_within_shape(conv.src))


def _visited_source(conv: Conversion, plan: WritePlan, src: WriterSource, writer: str,
                    helpers: frozenset[str]) -> str:
    """C of a conversion whose writer reads the source in its own loops: the two layouts'
    structs, the helpers those loops call, the writer, and ``<name>``, which calls
    ``<name>_write`` on the source (no entry kernel: nothing else is called)."""
    order = conv.src.order
    shape = [_source_extent(conv.src, e) for e in conv.src.shape]
    body: list[t.Node] = [
        t.Declare("const int64_t", f"spf_shape[{max(order, 1)}]", "{" + ", ".join(shape) + "}"),
        t.Return(f"{conv.name}_write(B, spf_err, spf_sizes, A, spf_fill, spf_shape, "
                 f"{int(conv.allow_padding)}, spf_max_bytes)")]
    glue, wrapper = _entries(conv, body, f"{conv.src.name} -> {conv.dst.name}: "
                             f"{conv.name}_write reads A's entries in A's own loops, each pass "
                             "of it one visit of them (no entry list)")
    lines = [
        f"Conversion {conv.src.name} -> {conv.dst.name}, generated by spf.",
        f"{conv.name}(B, spf_err, spf_sizes, spf_max_bytes, A) is the whole conversion; "
        "it calls:", *src.header(),
        "the writer reads A's entries where A's loops visit them (the loops of the kernel B "
        "= A: Z3 proved that no two entries share coordinates), once per pass, the first "
        "pass counting them; no entry list is built",
        *([f"A must be a valid {conv.src.name} tensor (as spf.Tensor checks): its relation "
           "and ranges keep its entries within its shape, so the writer does not test them "
           "against the shape"] if keeps_within_shape(conv.src) else []),
        "the writer's passes: " + plan.describe(tuple(_INDICES[:order])),
        f"{conv.name}_with_fill: {glue.comment}"]
    layouts = {struct_name(lay): lay for lay in (conv.src, conv.dst)}
    signature = glue.signature
    assert isinstance(signature, t.Signature)
    return (render_file(lines, set(helpers), list(layouts.values()), signature, glue.body,
                        before=writer, typing=conv.kernel.plan.typing)
            + "\n\n" + CPrinter().definitions([wrapper]) + "\n")


def _assembled_source(conv: Conversion) -> tuple[WriterSource, str]:
    """C of a conversion into a destination assembled level by level: the kernel's file
    (``<name>_fill``, the functions sizing it and ``<name>_fill_new``, which sizes, allocates,
    fills and trims ``B``: :mod:`spf.assembly.entry_c`) and ``<name>``, which is
    ``<name>_fill_new``: the same convention, statuses and ``spf_err`` as a written
    destination's (its :class:`WriterSource`)."""
    k = conv.kernel
    assembly = k.assembly
    assert assembly is not None
    kernel = t.Signature("int", k.name, (
        t.Param(f"{struct_name(conv.dst)} *restrict", "B"), t.Param("int64_t *restrict", "B_size"),
        t.Param(f"const {struct_name(conv.src)} *restrict", "A")))
    main = assembled_entry(assembly, kernel, assembly.ranged, assembly.drop_zeros)
    if isinstance(main, str):
        raise layout_error(conv.src, f"cannot convert {conv.src.name}: {main}")
    signature = _entry_signature(conv)
    body: list[t.Node] = [
        t.Return(f"{k.name}_new(B, spf_err, spf_sizes, spf_max_bytes, A)")]
    glue = t.Function(signature, body, f"{conv.src.name} -> {conv.dst.name}: {k.name}_new "
                      "(B = A, its output sized, allocated, filled and trimmed) under the "
                      "conversion's name.")
    lines = [f"Conversion {conv.src.name} -> {conv.dst.name}, generated by spf.",
             f"{conv.name}(B, spf_err, spf_sizes, spf_max_bytes, A) is the whole conversion: "
             f"{k.name}_new, whose passes and refusals the header below lists."]
    header = "\n".join(f" * {line}" for line in lines)
    text = (f"/*\n{header}\n */\n" + k.c_source() + "\n"
            + CPrinter().definitions([glue]) + "\n")
    refusals = tuple(Refusal(r, memory="arrays" if i == main.memory else None)
                     for i, r in enumerate(main.refusals))
    return WriterSource(conv.dst, conv.name, signature, tuple(body), refusals,
                        tuple((a, 1) for a in main.arrays)), text


def _dense_source(conv: Conversion) -> tuple[WriterSource, str]:
    """C of a conversion into a dense destination: the kernel (``<name>_fill``, which fills
    a ``B`` whose fields are set) and ``<name>``, which sets ``B``'s scalar fields from the
    source's extents, allocates its dense array (refused over ``spf_max_bytes``) and calls
    it: the convention of the other destinations (:class:`WriterSource`)."""
    dst, k = conv.dst, conv.kernel
    order = dst.order
    err = [t.Assign(f"spf_err[{1 + d}]", "-1") for d in range(order)]
    refusals: list[Refusal] = []

    def refuse(text: str, x0: str, memory: str | None = None) -> list[t.Node]:
        refusals.append(Refusal(text, memory=memory))
        return [t.Assign("spf_err[0]", str(len(refusals) - 1)), *err,
                t.Assign(f"spf_err[{1 + order}]", x0), t.Return(c_name(Status.REFUSED))]
    body: list[t.Node] = [
        t.Declare("const int64_t", f"spf_shape[{max(order, 1)}]",
                  "{" + ", ".join(_source_extent(conv.src, e) for e in conv.src.shape) + "}"),
        *extents_fit(dst, order, "B", refuse),
        t.Declare(struct_name(dst), "spf_B", "{0}")]
    scalars = {}
    for d, extent in enumerate(dst.shape):
        field = extent.as_name()
        if field is None or field not in dst.fields:
            raise layout_error(dst, f"layout {dst.name}: its shape's extent {extent} is not a "
                               "scalar field, which a conversion into it sets", "shape")
        scalars[field] = f"spf_shape[{d}]"
        body.append(t.Assign(f"spf_B.{field}", f"spf_shape[{d}]"))
    array = dst.dense_array
    assert array is not None
    others = [f for f, s in dst.fields.items() if f != array and f not in scalars]
    if others:
        raise layout_error(dst, f"layout {dst.name}: {others[0]} is neither its dense array "
                           "nor a field its shape gives, so a conversion cannot set it", others[0])
    dims = [f"({ie.to_c_with(x, lambda n: scalars[n], _no_call, wide=True)})"
            for x in dst.fields[array].dims]
    bytes_ = " * ".join([*(f"(double){d}" for d in dims), "(double)sizeof(spf_value_t)"])
    body += [
        t.Declare("const double", "spf_bytes", bytes_, note="in double: no overflow"),
        t.If("spf_bytes > 9.2e18 || (spf_max_bytes > 0 && spf_bytes > (double)spf_max_bytes)",
             refuse(f"{dst.name}'s {array} would take {{x0}} bytes, over the limit",
                    "spf_bytes > 9.2e18 ? INT64_MAX : (int64_t)spf_bytes", array)),
        t.Declare("const int64_t", "spf_slots", " * ".join(dims) or "1"),
        t.Assign(f"spf_B.{array}", "spf_realloc(NULL, sizeof(spf_value_t) * "
                 "(size_t)(spf_slots > 0 ? spf_slots : 1))"),
        t.If(f"!spf_B.{array}", [t.Return(c_name(Status.OUT_OF_MEMORY))]),
        t.Declare("int", "spf_status", f"{k.name}(&spf_B, A)"),
        t.If("spf_status", [t.Call(f"free(spf_B.{array})"), t.Return("spf_status")]),
        *_fill_gaps(conv, array, refuse),
        t.Assign("*B", "spf_B"),
        t.If("spf_sizes", [t.Assign("spf_sizes[0]", "spf_slots"),
                           t.Assign("spf_sizes[1]", "spf_slots")]),
        t.Return("0")]
    glue, wrapper = _entries(conv, body, f"{conv.src.name} -> {dst.name}: B's extents set "
                             f"from A's, its {array} filled by {k.name}, the elements where A "
                             f"has no entry then set to *spf_fill where it is not 0 (the "
                             f"entries counted by {k.name} on A with 1 as every value)")
    lines = [f"Conversion {conv.src.name} -> {dst.name}, generated by spf.",
             f"{conv.name}(B, spf_err, spf_sizes, spf_max_bytes, A) is the whole conversion: "
             f"B's scalar fields from A's extents, its {array} allocated, then filled by "
             f"{k.name}; {conv.name}_with_fill(..., A, &fill) for a source holding fill where "
             f"it has no entry (the elements no entry reaches, counted by {k.name} on A with "
             f"1 as every value, get it); spf_sizes: the {array}'s length, then the slots "
             "written.  Returns 0, "
             f"{c_name(Status.OUT_OF_MEMORY)} or {c_name(Status.REFUSED)} with spf_err = "
             "{refusal, -1 per coordinate, x0}:",
             *(f"  {n}: {r.text}" for n, r in enumerate(refusals))]
    header = "\n".join(f" * {line}" for line in lines)
    text = (f"/*\n{header}\n */\n" + k.c_source() + "\n" + template_text("huge.c").rstrip()
            + "\n\n" + c_enum() + "\n\n" + CPrinter().definitions([glue, wrapper]) + "\n")
    signature = glue.signature
    assert isinstance(signature, t.Signature)
    return WriterSource(dst, conv.name, signature, tuple(body), tuple(refusals),
                        ((array, 1),)), text


def _fill_gaps(conv: Conversion, array: str,
               refuse: Callable[[str, str], list[t.Node]]) -> list[t.Node]:
    """Where ``*spf_fill`` is not 0 (bitwise: -0.0 and NaN are fills): the elements of
    ``spf_B`` that no entry of A reaches set to it.  The entries are counted per element by
    the same kernel run on A with 1 as every value (into a second array of B's shape); a
    pattern source's constant counts them as it is (where it is 0, nothing tells its entries
    from the elements without one: refused, ``refuse``)."""
    src, k = conv.src, conv.kernel
    test = "memcmp(spf_fill, &spf_zero, sizeof(spf_value_t)) != 0"
    if src.implicit == 0:
        return [t.Declare("const spf_value_t", "spf_zero", "0"), t.If(test, [
            t.Call(f"free(spf_B.{array})"),
            *refuse(f"{src.name}'s entries all hold 0, which a dense layout cannot tell from "
                    "elements without an entry, so nothing marks where A's fill goes",
                    "0")])]
    counts: list[t.Node] = [t.Declare(struct_name(conv.dst), "spf_C", "spf_B",
                                      note="B's extents, the counts in a second array")]
    ones: list[t.Node] = []
    source = "A"
    if src.implicit is None:
        ref = src.value_ref
        length = " * ".join(f"({_source_c(d)})" for d in src.fields[ref.array].dims) or "1"
        ctype = src.value_type.c
        ones = [t.Declare(struct_name(src), "spf_A1", "*A",
                          note="A with 1 as every value: the kernel counts its entries"),
                t.Declare("const int64_t", "spf_n", length),
                t.Declare(f"{ctype} *", "spf_ones", f"spf_realloc(NULL, sizeof({ctype}) * "
                          "(size_t)(spf_n > 0 ? spf_n : 1))"),
                t.For("int64_t spf_s = 0", "spf_ones && spf_s < spf_n", "++spf_s",
                      [t.Assign("spf_ones[spf_s]", f"({ctype})1")]),
                t.Assign(f"spf_A1.{ref.array}", "spf_ones")]
        source = "&spf_A1"
    alloc = t.Assign(f"spf_C.{array}", "spf_realloc(NULL, sizeof(spf_value_t) * "
                     "(size_t)(spf_slots > 0 ? spf_slots : 1))")
    got = f"spf_C.{array}" + (" && spf_ones" if ones else "")
    return [t.Declare("const spf_value_t", "spf_zero", "0"), t.If(test, [
        *counts, *ones, alloc,
        t.Assign("spf_status", f"{got} ? {k.name}(&spf_C, {source}) : "
                 f"{c_name(Status.OUT_OF_MEMORY)}"),
        t.For("int64_t spf_s = 0", "spf_s < spf_slots && !spf_status", "++spf_s", [
            t.If(f"spf_C.{array}[spf_s] == 0", [t.Assign(f"spf_B.{array}[spf_s]", "*spf_fill")])]),
        *([t.Call("free(spf_ones)")] if ones else []),
        t.Call(f"free(spf_C.{array})"),
        t.If("spf_status", [t.Call(f"free(spf_B.{array})"), t.Return("spf_status")])],
        note="A holds *spf_fill where it has no entry: so do those elements of B")]


def _source_c(x: ie.IExpr) -> str:
    """An extent over the source's fields in C, its reads through ``A``
    (``A->rowPtr[A->numRows]``)."""
    return ie.to_c_with(x, lambda n: f"(int64_t)A->{n}", lambda name, args: (
        f"(int64_t)A->{name}[{']['.join(_source_c(a) for a in args)}]"))


def _no_call(name: str, args: list[ie.IExpr]) -> str:
    raise KeyError(name)


class _Assembled:
    """Runs a conversion into a destination assembled level by level, or a dense one,
    through its C entry point, the function a C caller calls (``build``:
    :func:`_assembled_source` or :func:`_dense_source`): sized, allocated, filled and trimmed
    in C, its arrays then owned by numpy."""

    def __init__(self, conv: Conversion,
                 build: Callable[[Conversion], tuple[WriterSource, str]]):
        self.conversion, self.build = conv, build
        self.source, text = build(conv)
        self.dense = conv.dst.dense_array is not None   # takes the source's fill
        self.within = keeps_within_shape(conv.src)      # its entries within its shape
        self.fn = getattr(runtime.load_library(str(runtime.build_library(text))),
                          f"{conv.name}_with_fill" if self.dense else conv.name)
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_void_p] + \
            [ctypes.c_void_p] * self.dense

    def __reduce__(self) -> tuple:
        return (_Assembled, (self.conversion, self.build))

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        """This conversion in parts on a Dask cluster (:meth:`_Compiled.distributed`)."""
        conv = self.conversion
        return _Compiled(conv, conv.kernel.compile()).distributed(client, parts)

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        conv, src = self.conversion, self.source
        _check_source(conv, tensor)
        err, sizes = writer.buffers(src)
        out = runtime.struct_type(conv.dst)()
        given = runtime.make_struct(conv.src, tensor.fields)
        fill = np.array([tensor.fill], conv.dst.value_type.dtype)
        if self.dense:
            tensor.check_fill_placeable(tensor.fill, f"converting it into {conv.dst.name}")
        status = self.fn(ctypes.addressof(out), runtime.address(err), runtime.address(sizes),
                         byte_limit(), ctypes.addressof(given),
                         *([runtime.address(fill)] if self.dense else []))
        fields, _ = writer.finished(src, status, err, out, sizes)
        check_built_ranges(conv.dst, fields, f"output 'B' of kernel {conv.kernel.name}",
                           within=self.within)
        out_tensor = tensor_class()._built(conv.dst, tuple(tensor.shape), fields)
        out_tensor.fill = tensor.fill       # the same logical tensor
        return out_tensor


class _Written:
    """Runs a conversion written by its destination's relation: the source read into an
    entry list and written into the destination, all by generated C (:func:`_written_source`).
    Where two index tuples could read one value slot (the value subscripts do not determine
    every layout index), the writer counts in C the tuples the destination's relation reads
    a nonzero value at: as many as the entries holding one; a union destination's writer
    checks in C that its other parts give exactly the rest (:mod:`spf.store`)."""

    def __init__(self, conv: Conversion, plan: WritePlan):
        self.conversion, self.plan = conv, plan
        self.source, text = _written_source(conv, plan)
        self.fn = getattr(runtime.load_library(str(runtime.build_library(text))),
                          f"{conv.name}_with_fill")
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 2

    def __reduce__(self) -> tuple:
        return (_Written, (self.conversion, self.plan))

    def distributed(self, client: Any,
                    parts: int | None = None) -> Callable[[StoredTensor], StoredTensor]:
        """This conversion on a Dask cluster: the source read into entry lists on the
        workers (its reading kernel's :meth:`CompiledKernel.distributed`: row blocks, joined
        in a coordinate list), then written here by the generated writer and read back
        (:func:`spf.runtime.writer.rewritten`)."""
        conv = self.conversion
        read = conv.kernel.compile().distributed(client, parts)

        def run(tensor: StoredTensor) -> StoredTensor:
            _check_source(conv, tensor)
            # into a pattern layout: its values were checked (_ValuesChecked) or not asked for
            return writer.rewritten(read(A=tensor), conv.dst, conv.allow_padding,
                                    structure=conv.dst.implicit is not None, fill=tensor.fill)
        return run

    def __call__(self, tensor: StoredTensor) -> StoredTensor:
        conv, src = self.conversion, self.source
        _check_source(conv, tensor)
        writer.check_shape(conv.dst, tuple(tensor.shape))   # the C checks it too, tersely
        err, sizes = writer.buffers(src)
        out = runtime.struct_type(conv.dst)()
        given = runtime.make_struct(conv.src, tensor.fields)
        fill = np.array([tensor.fill], conv.src.value_type.dtype)
        status = self.fn(ctypes.addressof(out), runtime.address(err), runtime.address(sizes),
                         byte_limit(), ctypes.addressof(given), runtime.address(fill))
        fields, entries = writer.finished(src, status, err, out, sizes)
        t = writer.checked(self.plan, tuple(tensor.shape), fields, src.proven)
        t.fill = tensor.fill
        t.source_entries = entries if t.values.size > entries else None
        return t


class _ValuesChecked:
    """Runs a conversion into a pattern layout: the source's entries (as the conversion
    keeps them) read into a coordinate list by generated code and their values checked to
    be the destination's constant (:func:`~spf.runtime.fields.implicit_values`), then the
    conversion, which stores their positions."""

    def __init__(self, conv: Conversion, run: _Written | _Assembled | _Compiled):
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


def _check_source(conv: Conversion, tensor: Any) -> None:
    """ArgumentError unless ``tensor`` is an spf.Tensor in the conversion's source layout."""
    if not isinstance(tensor, StoredTensor) or tensor.layout != conv.src:
        def named(lay: Layout) -> str:     # parameters and width too where the names agree
            same = isinstance(tensor, StoredTensor) and tensor.layout.name == conv.src.name
            params = "".join(f"{k}={v}, " for k, v in sorted(lay.params.items()))
            return f"layout {lay.name}" + (f" ({params}index_type={lay.index_type!r})"
                                           if same else "")
        raise ArgumentError(f"a conversion from {conv.src.name} takes an spf.Tensor in "
                            f"{named(conv.src)}, got "
                            + (f"one in {named(tensor.layout)}"
                               if isinstance(tensor, StoredTensor) else type(tensor).__name__))


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
