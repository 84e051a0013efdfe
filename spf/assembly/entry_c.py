"""The self-contained entry point of an assembled output: one C function that sizes, allocates,
fills and trims the output, so that a C caller passes only the inputs (issue 53: "a C caller
needs nothing else").

``int <entry>(B, spf_err, spf_sizes, spf_max_bytes, inputs...)`` follows the convention of
the writer (:mod:`spf.store`): every array of ``B`` is allocated here with ``malloc`` (the
caller frees each with ``free``), every scalar field is set, and it returns 0; or a status
(:class:`~spf.back.status.Status`) with ``B`` untouched: ``SPF_OUT_OF_MEMORY``,
``SPF_NEGATIVE_POWER`` (a value numpy refuses), or ``SPF_REFUSED`` with ``spf_err`` = {the
refusal's number, -1 per coordinate, x0, x1, x2, ...} (:attr:`Entry.refusals`, listed in the
file's header).  ``spf_sizes`` (or NULL) receives each array's length in declaration order,
then the positions of the last level.  Its passes are the ones the runtime runs from Python
(:func:`spf.runtime.assembled.run_assembling`): count the statement instances (the
``_bound`` functions), size each storage level from that bound, refuse what the index width
or ``spf_max_bytes`` (when positive) cannot hold, allocate (pointer arrays zeroed: the
levels count into them), run the kernel, set each level's count field and trim the arrays.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..back import ctree as t
from ..back.status import Status, c_name
from ..errors import SpecError
from ..front.layout import Layout
from ..front.storage import DerivedPass, Storage, StorageKind

# An output whose zeros are dropped is sized by counting its statement instances without
# reading values (``<kernel>_bound_slots``) when that bound is at most this many entries (about
# 200 MB of int32 indices and doubles, mostly never touched, trimmed after the kernel), as
# scipy sizes DIA -> CSR; above it, by counting the nonzero values (``<kernel>_bound``), so a
# mostly-zero dense input does not reserve memory for all of its slots.  The runtime
# (spf.runtime.assembled) chooses so too.
SLOTS_ENTRIES = 1 << 24
_INDEX_MAX = {"int32": 2 ** 31 - 1, "int64": 2 ** 63 - 1}


@dataclass(frozen=True)
class Entry:
    """The entry point (:attr:`function`) and what its refusals and passes say (the file's
    header)."""

    function: t.Function
    refusals: tuple[str, ...]
    passes: tuple[str, ...]
    memory: int                 # the refusal of an allocation over spf_max_bytes
    arrays: tuple[str, ...]     # the array fields spf_sizes reports, in declaration order

    def header(self, name: str) -> list[str]:
        """The file header's lines: what ``name`` does, its refusals and passes."""
        lines = [f"{name}(out, spf_err, spf_sizes, spf_max_bytes, inputs): the output sized, "
                 "allocated (malloc: free each array with free), filled and trimmed from the "
                 "inputs alone, every field set; spf_sizes (or NULL): each array's length, then "
                 "the positions stored; spf_max_bytes: 0 or a limit on the arrays' bytes.",
                 f"  Returns 0, {c_name(Status.OUT_OF_MEMORY)}, "
                 f"{c_name(Status.NEGATIVE_POWER)} or {c_name(Status.REFUSED)} with spf_err = "
                 "{refusal, -1 per coordinate, x0, x1, x2}; the output untouched unless it "
                 "returns 0:"]
        lines += [f"  {k}: {r}" for k, r in enumerate(self.refusals)]
        return lines + [f"  pass {k + 1}: {p}" for k, p in enumerate(self.passes)]


@dataclass(frozen=True)
class _Array:
    name: str
    capacity: str       # C: elements allocated, over spf_cap
    used: str           # C: elements used, over spf_size
    zeroed: bool


def entry(storage: Storage, name: str, kernel: str, struct: str, inputs: list[str],
          args: list[str], shape: list[str], ranged: bool, slots: bool,
          counts_first: bool, output: str = "B") -> Entry:
    """``name``: the entry point assembling ``storage``'s layout (C struct ``struct``, the
    parameter ``output``) by
    ``kernel`` (``kernel(B, B_size, args...)``, sized by ``kernel_bound`` and, when
    ``slots``, ``kernel_bound_slots``; ``ranged``: they take the extents in storage order).
    ``inputs``: the kernel's input parameters; ``shape``: the output's extents in C over them,
    in logical order; ``counts_first``: the kernel scatters every statement instance."""
    lay = storage.layout
    top = _INDEX_MAX[lay.index_type]
    order = len(storage.order)
    refusals: list[str] = []

    def refuse(text: str, x0: str) -> list[t.Node]:
        refusals.append(text)
        return [t.Assign("spf_err[0]", str(len(refusals) - 1)),
                *(t.Assign(f"spf_err[{1 + k}]", "-1") for k in range(order)),
                t.Assign(f"spf_err[{1 + order}]", x0), t.Return(c_name(Status.REFUSED))]

    levels = len(storage.levels)
    counted = ", ".join(["spf_ext" if ranged else "", *args]).lstrip(", ")
    body: list[t.Node] = [
        t.Declare("int64_t", f"spf_shape[{max(order, 1)}]", "{" + ", ".join(shape) + "}",
                  const=True, note="the output's extents"),
        t.Declare("int64_t", f"spf_ext[{max(order, 1)}]",
                  "{" + ", ".join(f"spf_shape[{d}]" for d in storage.order) + "}", const=True,
                  note="in storage order"),
        t.Declare("int64_t", "spf_bound", "0"),
        t.Declare("int", "spf_status", "0"),
        *extents_fit(lay, order, output, refuse),
        t.Comment("pass 1: count the statement instances (a bound on the entries)")]
    if slots:
        body += [_passed_on(f"{kernel}_bound_slots(&spf_bound, {counted})"),
                 t.If(f"spf_bound > {SLOTS_ENTRIES}", [_passed_on(
                     f"{kernel}_bound(&spf_bound, {counted})")],
                      note="large: count only the nonzero values")]
    else:
        body.append(_passed_on(f"{kernel}_bound(&spf_bound, {counted})"))
    if counts_first:
        body.append(t.If(f"spf_bound > INT64_C({top})", refuse(
            f"{lay.name}: the output would be scattered from {{x0}} entries, more than "
            f"index_type={lay.index_type!r} can address", "spf_bound")))
    body += _capacities(storage, top)
    arrays = _arrays(storage)
    bytes_ = " + ".join(f"(double)({a.capacity}) * (double)sizeof(*spf_B.{a.name})"
                        for a in arrays) or "0.0"
    over = refuse(f"{lay.name}'s arrays would take {{x0}} bytes, over the limit",
                  "(int64_t)spf_bytes")
    memory = len(refusals) - 1
    body += [
        t.Declare(struct, "spf_B", "{0}"),
        t.Declare("double", "spf_bytes", bytes_, const=True),
        t.If("spf_max_bytes > 0 && spf_bytes > (double)spf_max_bytes", over),
        t.Comment("pass 2: allocate every array (pointer arrays zeroed: the levels count "
                  "into them; the others in huge pages where large, as numpy does)"),
        *(t.Assign(f"spf_B.{f}", f"spf_shape[{d}]") for d, f in enumerate(storage.shape_fields)),
        *(t.Assign(f"spf_B.{a.name}", f"calloc((size_t)({a.capacity}) + 1, "
                   f"sizeof(*spf_B.{a.name}))" if a.zeroed else
                   f"spf_realloc(NULL, sizeof(*spf_B.{a.name}) * ((size_t)({a.capacity}) + 1))")
          for a in arrays)]
    free = [t.Call(f"free(spf_B.{a.name})") for a in arrays]
    missing = " || ".join(f"!spf_B.{a.name}" for a in arrays) or "0"
    body += [
        t.If(missing, [*free, t.Return(c_name(Status.OUT_OF_MEMORY))]),
        t.Comment("pass 3: the kernel fills the levels; spf_size: positions per level"),
        t.Declare("int64_t", f"spf_size[{levels}]",
                  "{" + ", ".join(f"spf_cap[{k}]" for k in range(levels)) + "}"),
        t.Assign("spf_status", f"{kernel}({', '.join(['&spf_B', 'spf_size', *args])})"),
        t.If("spf_status", [*free, t.If(
            f"spf_status == {c_name(Status.CAPACITY)} && spf_top", refuse(
                f"{lay.name}: the output has more stored positions than "
                f"index_type={lay.index_type!r} can address", f"INT64_C({top})")),
            t.Return("spf_status")]),
        *_trimmed(storage, arrays, output)]
    signature = (f"int {name}({struct} *restrict {output}, int64_t *restrict spf_err, "
                 f"int64_t *restrict spf_sizes, int64_t spf_max_bytes, {', '.join(inputs)})")
    passes = (
        f"{kernel}_bound" + (f"_slots (then {kernel}_bound above {SLOTS_ENTRIES} instances)"
                             if slots else "")
        + ": the statement instances, a bound on the entries, which sizes each level",
        "each array allocated for that bound (dense levels: their extents), pointer arrays "
        "zeroed, after the index width and spf_max_bytes are checked",
        f"{kernel}: the entries stored level by level (as the Output line above says)",
        "each level's count field set from the positions it used; the arrays trimmed")
    return Entry(t.Function(signature, body, f"Output {lay.name} assembled from the inputs "
                            "alone: sized, allocated, filled and trimmed (every array of the "
                            "output malloc'd here; free each with free)."), tuple(refusals),
                 passes, memory, tuple(a.name for a in _declared(lay, arrays)))


def extents_fit(lay: Layout, order: int, output: str,
                refuse: Callable[[str, str], list[t.Node]]) -> list[t.Node]:
    """The output's extents (``spf_shape``, from the inputs' fields, possibly scaled or
    shifted) must fit the type of each index array, which stores coordinates below them, and
    of the scalar fields, which hold them: refused before anything is read or written, in the
    words of the runtime's own check (:func:`spf.runtime.assembled.run_assembling`)."""
    if not order:
        return []
    need = "spf_shape[0]" if order == 1 else "spf_need"
    nodes: list[t.Node] = [t.Comment("the extents fit the index types of the output's fields "
                                     "(an index array stores coordinates below them)")]
    if order > 1:
        nodes.append(t.Declare("int64_t", "spf_need", "spf_shape[0]"))
        nodes += [t.If(f"spf_shape[{d}] > spf_need", [t.Assign("spf_need", f"spf_shape[{d}]")],
                       braces=False) for d in range(1, order)]
    first = {lay.dtype_of(f): f for f in reversed(lay.index_arrays or lay.scalar_fields[:1])}
    for name in sorted(first.values(), key=list(lay.fields).index):     # as the runtime's
        width = lay.dtype_of(name)
        nodes.append(t.If(f"{need} > INT64_C({_INDEX_MAX[width]})", refuse(
            f"output {output!r}: {lay.name}'s {name} is {width}, which cannot hold {{x0}} (the "
            "output's extents and positions)", need)))
    return nodes


def _trimmed(storage: Storage, arrays: list[_Array], output: str) -> list[t.Node]:
    """Pass 4: each level's count field, the arrays shrunk to the positions used (realloc),
    ``spf_sizes`` reported, the fields handed to ``output``."""
    levels = len(storage.levels)
    body: list[t.Node] = [t.Comment("pass 4: each level's count of positions; the arrays "
                                    "trimmed to what they use")]
    body += [t.Assign(f"spf_B.{lv.count}", f"spf_size[{k}]")
             for k, lv in enumerate(storage.levels) if lv.count]
    for a in arrays:
        body.append(t.If(f"({a.used}) < ({a.capacity})", [
            t.Declare("void *", "spf_p", f"realloc(spf_B.{a.name}, sizeof(*spf_B.{a.name}) * "
                      f"((size_t)({a.used}) + 1))"),
            t.If("spf_p", [t.Assign(f"spf_B.{a.name}", "spf_p")], braces=False,
                 note="else the larger block is kept")]))
    declared = _declared(storage.layout, arrays)
    report = [t.Assign(f"spf_sizes[{k}]", a.used) for k, a in enumerate(declared)]
    return body + [t.If("spf_sizes", [*report, t.Assign(f"spf_sizes[{len(report)}]",
                                                        f"spf_size[{levels - 1}]")]),
                   t.Assign(f"*{output}", "spf_B"), t.Return(c_name(Status.OK))]


def _passed_on(call: str) -> t.If:
    return t.If(f"(spf_status = {call}) != 0", [t.Return("spf_status")], braces=False)


def _capacities(storage: Storage, top: int) -> list[t.Node]:
    """``spf_cap[k]``: positions allocated at level k (exact for a dense level; at most one
    per entry and per coordinate prefix for a compressed one; at most the index type's
    largest value); ``spf_top``: whether a level was cut to it."""
    levels = len(storage.levels)
    nodes: list[t.Node] = [
        t.Declare("int64_t", f"spf_cap[{levels}]", "{0}"),
        t.Declare("int64_t", "spf_prefix", "1", note="coordinates of the levels above"),
        t.Declare("int", "spf_top", "0")]
    coords = 0
    for k, lv in enumerate(storage.levels):
        for _ in lv.coords:
            nodes.append(t.Assign("spf_prefix", _capped("spf_prefix", f"spf_ext[{coords}]", top)))
            coords += 1
        if lv.kind is StorageKind.DENSE:
            cap = _capped(f"spf_cap[{k - 1}]", f"spf_ext[{coords - 1}]", top) if k \
                else f"spf_ext[{coords - 1}]"
        else:
            cap = "spf_bound < spf_prefix ? spf_bound : spf_prefix"
        nodes += [t.Assign(f"spf_cap[{k}]", cap),
                  t.If(f"spf_cap[{k}] >= INT64_C({top})",
                       [t.Assign(f"spf_cap[{k}]", f"INT64_C({top})"), t.Assign("spf_top", "1")])]
    return nodes


def _capped(a: str, b: str, top: int) -> str:
    """``a * b`` in C, at most ``top`` (no overflow)."""
    return f"({b} > 0 && {a} > INT64_C({top}) / {b}) ? INT64_C({top}) : {a} * {b}"


def _arrays(storage: Storage) -> list[_Array]:
    """The arrays the levels, the derived passes and the values fill, in level order."""
    out: list[_Array] = []
    for k, lv in enumerate(storage.levels):
        if lv.pointer:
            out.append(_Array(lv.pointer, f"spf_cap[{k - 1}] + 1", f"spf_size[{k - 1}] + 1",
                              True))
        out += [_Array(a, f"spf_cap[{k}]", f"spf_size[{k}]", False) for _, a in lv.coords if a]
    for dp in storage.derived_passes():
        out.append(_Array(dp.computed, _derived_length(dp, "spf_cap"),
                          _derived_length(dp, "spf_size"), False))
    if storage.value_array is not None:
        last = len(storage.levels) - 1
        out.append(_Array(storage.value_array, f"spf_cap[{last}]", f"spf_size[{last}]",
                          storage.levels[-1].kind is StorageKind.DENSE))
    return out


def _derived_length(dp: DerivedPass, positions: str) -> str:
    """C for :meth:`~spf.front.storage.DerivedPass.computed_length` over ``positions``."""
    written = f"{positions}[{dp.level}]" + (" + 1" if dp.pointer else "")
    return f"({written} > 1 ? {written} - 1 : 0)" if dp.to_source else f"{written} + 1"


def _declared(layout: Layout, arrays: list[_Array]) -> list[_Array]:
    """``arrays`` in the layout's declaration order (``spf_sizes`` reports them so); every
    array field of the layout is one of them."""
    by_name = {a.name: a for a in arrays}
    missing = [f for f, spec in layout.fields.items() if spec.is_array and f not in by_name]
    if missing:
        raise SpecError(f"layout {layout.name}: its arrays {', '.join(missing)} are written by "
                        "no storage level, so an output in it cannot be assembled",
                        layout.source)
    return [by_name[f] for f, spec in layout.fields.items() if spec.is_array]
