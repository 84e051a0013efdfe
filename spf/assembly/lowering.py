"""The C tree of an assembled output's side of each generated function: what every strategy
shares (the parameter, the extents, the cursor, the stream of a term of a sum, the counting
passes' statements) around what the strategy's own module adds; :mod:`spf.back.lower` asks
for each piece by the function's role.

The statement hands each entry to one of two targets, by the function's role
(:class:`~.model.FunctionRole`): ``OUTPUT`` (the kernel writes the output tensor: entries
reach its arrays through ``<kernel>_append``, see :mod:`.storage_c`) or ``STREAM`` (a term
of a sum: a sorted (key, value) run the sum merges with the other terms' runs).  Keys are
the output coordinates linearized row-major in storage order (``spf_ext[m]``: extent of
coordinate m; one stored decreasing is flipped).  The counting passes write no entry:
``BOUND`` counts the statement instances into ``spf_n`` (only the nonzero ones when zeros
are not stored), ``BOUND_SLOTS`` counts them all without reading a value, ``HISTOGRAM``
counts each bucket's entries (the strategy's :meth:`~.base.AssemblyStrategy.count_statement`).
"""
from __future__ import annotations

from collections.abc import Callable

from ..back import ctree as t
from ..back.levels import Hook
from ..back.names import CNames, struct_name
from . import storage_c, strategy
from .model import AssemblyPlan, FunctionRole


def param(plan: AssemblyPlan, tensor: str, role: FunctionRole) -> list[t.Param]:
    """The C parameters through which the function hands over what it produces."""
    ext = [t.Param("const int64_t *restrict", "spf_ext")]
    if role is FunctionRole.HISTOGRAM:
        return [t.Param("spf_index_t *restrict", "spf_hist"), *(ext if plan.ranged else [])]
    if role is FunctionRole.VISIT:
        return []
    if role is FunctionRole.ROW_COUNTS:
        return [t.Param("spf_index_t *restrict", "spf_count"),
                t.Param("spf_workspace *restrict", "spf_wss")]
    if role.counts:
        return [t.Param("int64_t *restrict", "spf_bound"), *(ext if plan.ranged else [])]
    if role is FunctionRole.STREAM:
        return [t.Param("spf_stream *restrict", tensor),
                *(ext if stream_reads_extents(plan) else [])]
    return [t.Param(f"{struct_name(plan.output.layout)} *restrict", tensor),
            t.Param("int64_t *restrict", f"{tensor}_size")]


def stream_reads_extents(plan: AssemblyPlan) -> bool:
    """Whether a term of a sum reads the output's extents, which its caller passes
    (``spf_ext``): to linearize its keys (they may be the output's own, ``y(i) = A(i-1) +
    A(i+1)``: i ranges over y, and every run must be keyed as the caller decodes the union),
    or as the range of an output index (:attr:`AssemblyPlan.ranged`)."""
    return strategy(plan).needs_extents(plan) or plan.ranged


def extents_read(plan: AssemblyPlan) -> dict[str, str]:
    """Where a term's functions read the output's extents: each shape field of the output
    (``R.numCols``) as its element of ``spf_ext`` (the extents in storage order), for a
    nest bounded by the statement's range of an output index (:attr:`AssemblyPlan.ranged`);
    the kernel writing the output reads them from it."""
    if not plan.ranged:
        return {}
    out = plan.output
    fields = [s.as_name() for s in out.layout.shape]
    return {f: f"spf_ext[{plan.key.index(i)}]" for f, i in zip(fields, out.indices)
            if f is not None}


def reads(plan: AssemblyPlan, role: FunctionRole, operands: set[str]) -> set[str]:
    """The names the statement reads, given those the factors' values read: the key's; a
    counting pass reads the values only to skip zeros, the histogram its bucket's
    coordinate; a pattern output's statement reads values only to skip zeros."""
    if role is FunctionRole.ROW_COUNTS:
        return set(plan.key)
    if not role.counts:
        stored = plan.drop_zeros or plan.storage.value_array is not None
        return (operands if stored else set()) | set(plan.key)
    bucket = {plan.key[0]} if role is FunctionRole.HISTOGRAM else set()
    values = plan.drop_zeros and role is not FunctionRole.BOUND_SLOTS   # it counts slots
    return (operands if values else set()) | bucket


def declare(plan: AssemblyPlan, names: CNames, kernel: str, role: FunctionRole) -> list[t.Node]:
    """The count (a counting pass); else the extents of the key coordinates, the cursor
    (output), the strategy's state."""
    if role is FunctionRole.VISIT:
        return []
    if role.counts:
        return [] if role is FunctionRole.HISTOGRAM else [t.Declare("int64_t", "spf_n", "0")]
    s = strategy(plan)
    out: list[t.Node] = [t.Comment(f"{plan.describe()}.")]
    passed = role is FunctionRole.STREAM        # by the caller (:func:`param`)
    if role is FunctionRole.OUTPUT or (s.needs_extents(plan) and not passed):
        exts = ", ".join(names.aff(e) for e in plan.extents)
        out.append(t.Declare("int64_t", f"spf_ext[{len(plan.extents)}]", f"{{{exts}}}",
                             const=True, note=f"extents of {', '.join(plan.key)}"))
    if role is FunctionRole.OUTPUT and s.cursor:
        name = plan.output.name
        out += [t.Declare(f"{kernel}_cursor", "spf_cur"),
                t.Call(f"{kernel}_cursor_init(&spf_cur, spf_ext, {name}_size)"),
                t.Declare("int", "spf_status", "0")]
    out += s.declare(plan, role)
    if role is FunctionRole.STREAM:
        out.append(t.Assign(f"{plan.output.name}->n", "0"))
    return out


def start(plan: AssemblyPlan, kernel: str, role: FunctionRole,
          inputs: list[str]) -> list[t.Node]:
    """Before the loops of the kernel or a term: the first pass of a strategy that counts
    first (``inputs``: the arguments it passes on)."""
    s = strategy(plan)
    return s.start(plan, kernel, inputs) if s.first_pass and role is FunctionRole.OUTPUT else []


def statement(plan: AssemblyPlan, value: Callable[[], str], kernel: str,
              role: FunctionRole) -> list[t.Node]:
    """The statement for the product ``value()`` (printed only where it is used); a
    counting pass does not need a find's matched position to count the match."""
    zero = plan.semiring.zero_c()
    nodes: list[t.Node]
    if role is FunctionRole.BOUND_SLOTS:
        return [t.Call("++spf_n")]
    if role is FunctionRole.ROW_COUNTS:      # reads no value
        return strategy(plan).statement(plan, "", kernel, role)
    if role is FunctionRole.VISIT and plan.drop_zeros:
        return [t.Declare("spf_value_t", "spf_v", value(), const=True),
                t.If(f"spf_v != {zero}", [t.Hole("spf_v")], note="zeros are not entries")]
    if role is FunctionRole.VISIT:
        return [t.Hole(value())]
    if role is FunctionRole.BOUND and plan.drop_zeros:   # no branch on the data
        return [t.Assign("spf_n", f"({value()}) != {zero}", "+=", note="zeros are not stored")]
    if role is FunctionRole.BOUND:
        nodes = [t.Call("++spf_n")]
    elif role is FunctionRole.HISTOGRAM:
        nodes = strategy(plan).count_statement(plan)
    else:       # a pattern output stores no value: it is computed only to drop zeros
        rhs = "spf_v" if plan.drop_zeros else value() if plan.storage.value_array else "0"
        nodes = strategy(plan).statement(plan, rhs, kernel, role)
    if plan.drop_zeros:
        nodes = [t.Declare("spf_value_t", "spf_v", value(), const=True),
                 t.If(f"spf_v != {zero}", nodes, note="zeros are not stored")]
    return nodes


def hooks(plan: AssemblyPlan, kernel: str, role: FunctionRole,
          order: list[str]) -> list[tuple[int, Hook]]:
    """Code run where a nest level opens (``order``: the levels' variables): the strategy's
    check of a finished group where the ordered group is known, and what ends a group of
    the coordinates above the output's last level."""
    if role.serial:
        return []
    s = strategy(plan)
    out: list[tuple[int, Hook]] = []
    if plan.group_level is not None:
        out.append((plan.group_level, lambda b: b.add(*s.group_check(plan, kernel, role))))
    ends = s.group_end(plan) if len(plan.key) > 1 else []
    if ends:
        def end_group(b: t.Builder) -> None:
            for n in reversed(ends):
                b.defer(n)
        out.append((max(order.index(c) for c in plan.key[:-1]), end_group))
    return out


def in_region(plan: AssemblyPlan) -> bool:
    """Whether the parallel loop runs inside a region of the strategy's own (its state per
    thread: :meth:`region_start`, :meth:`region_end`)."""
    return strategy(plan).in_region


def region_start(plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
    return strategy(plan).region_start(plan, role)


def region_end(plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
    return strategy(plan).region_end(plan, kernel, role)


def finish(plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
    """After the loops: a bound pass stores its count; the kernel or a term finishes its
    output, and the kernel writes the output's ``[derived]`` arrays the levels do not."""
    if role in (FunctionRole.HISTOGRAM, FunctionRole.VISIT):
        return []
    if role.counts:
        return [t.Assign("*spf_bound", "spf_n")]
    nodes = strategy(plan).finish(plan, kernel, role)
    if role is FunctionRole.OUTPUT:
        nodes += storage_c.derived_passes(plan.storage, plan.output.name)
    return nodes


def release(plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
    """What the strategy's state releases on every exit."""
    return [] if role.serial else strategy(plan).release(plan, role)


def storage(plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Definition]:
    """The output's storage functions the kernel calls, defined before it."""
    s = strategy(plan)
    if role is not FunctionRole.OUTPUT:
        return []
    struct = struct_name(plan.output.layout)
    own: list[t.Definition] = list(s.functions(plan, kernel, struct))
    if not s.cursor:
        return own
    return storage_c.functions(plan.storage, kernel, struct, s.flushes, plan.any_order,
                               plan.last_only) + own
