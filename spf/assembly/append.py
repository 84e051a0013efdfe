"""Append: the whole key arrives in storage order; entries go straight to the output's
arrays, equal neighbours added.

When Z3 proves the keys strictly increasing (no two statement instances share coordinates)
and every level above the last is dense, with the last one compressed over one coordinate
(the shape of CSR, or of a sparse vector), an entry needs no decoding: it goes to the next
free position of the last level, and its dense parent's pointer moves past it (*direct*
append; :attr:`AssemblyPlan.direct`).  Otherwise the linearized key goes through the cursor
(``<kernel>_append``), which opens a position at each level whose coordinates changed.
"""
from __future__ import annotations

from dataclasses import replace

from ..back import ctree as t
from ..decide.synthesis import Decision
from ..front.storage import Storage
from ..middle.scan import LoopNest
from .base import CAPACITY, AssemblyStrategy, linear, linear_needs_extents, on_failure
from .model import AssemblyPlan, FunctionRole, Mode
from .order import non_decreasing, unordered_loops


class Append(AssemblyStrategy):
    mode = Mode.APPEND
    preference = 0
    stream_mode = Mode.WORKSPACE

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        return ordered == n

    def specialize(self, nest: LoopNest, plan: AssemblyPlan,
                   decisions: list[Decision]) -> AssemblyPlan:
        if not plan.direct_shape:
            return plan
        return replace(plan, unique=unique_keys(nest, plan, decisions))

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        if plan.direct:
            return "entries appended in storage order, straight to the last level"
        return f"entries appended in storage order by {kernel}_append"

    def how(self, plan: AssemblyPlan) -> str:
        if plan.direct:
            last = plan.storage.levels[-1].index
            return ("entries arrive in storage order, no two with the same coordinates (Z3 "
                    f"proved), every level above {last} dense: each entry goes to the next "
                    f"position of level {last} (direct append, no key decoded)")
        return "entries arrive in storage order; equal neighbours are added"

    def needs_extents(self, plan: AssemblyPlan) -> bool:
        return linear_needs_extents(plan, range(len(plan.key)))

    def declare(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        if plan.direct:
            return []
        return [t.Declare("int64_t", "spf_last", "-1", note="key of the entry appended last")]

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  role: FunctionRole) -> list[t.Node]:
        if plan.direct:
            return _direct(plan, rhs)
        out = plan.output.name
        last = len(plan.storage.levels) - 1
        appended: list[t.Node] = [
            on_failure(f"(spf_status = {kernel}_append(&spf_cur, {out}, spf_key, {rhs}))",
                       "spf_fail"),
            t.Assign("spf_last", "spf_key")]
        key = t.Declare("int64_t", "spf_key", linear(plan, range(len(plan.key))), const=True)
        if plan.storage.value_array is None:    # a pattern layout: nothing to combine
            return [key, t.If("spf_key != spf_last", appended,
                              note="a new entry (the same coordinates again: stored already, "
                                   "a pattern layout holds no values to combine)")]
        return [key, t.If("spf_key != spf_last", appended,
                          orelse=[_combine(plan, f"{out}->{plan.storage.value_array}"
                                                 f"[spf_cur.pos{last}]", rhs)],
                          else_note="the same coordinates again")]

    def finish(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        out = plan.output.name
        return [t.Call(f"{kernel}_finish(&spf_cur, {out}, {out}_size)")]

    def group_end(self, plan: AssemblyPlan) -> list[t.Node]:
        if not plan.direct or len(plan.key) < 2:
            return []
        nodes = _pointer_past(plan, "the group's entries are appended")
        if not nodes:
            return nodes
        return [t.If(" && ".join(f"0 <= {plan.key[m]} && {plan.key[m]} < spf_ext[{m}]"
                                 for m in range(len(plan.key) - 1)), nodes,
                     note="a group without entries may lie outside the output's extent (a "
                          "loop over an operand's entries at an offset, x(i - 4294967296), "
                          "x(i + 4294967296)): it has no pointer")]


def unique_keys(nest: LoopNest, plan: AssemblyPlan, decisions: list[Decision]) -> bool:
    """Whether Z3 proves that no two statement instances have the same key."""
    return non_decreasing(
        nest, len(nest.levels), (), (), unordered_loops(decisions), statements_only=True,
        equal=plan.key, fallback="assumed not: equal neighbours are added").result == "unsat"


def _combine(plan: AssemblyPlan, target: str, value: str) -> t.Node:
    """``target`` combined with ``value`` by the semiring's add (``spf_add``, defined with
    the assembly helpers)."""
    if plan.semiring.is_plus_times:
        return t.Assign(target, value, "+=")
    return t.Assign(target, f"spf_add({target}, {value})")


def _direct(plan: AssemblyPlan, rhs: str) -> list[t.Node]:
    """The entry at the next position of the last level.  The cursor's ``next``/``cap`` of
    that level keep the count for ``<kernel>_finish``; the pointer of the dense parent moves
    past its entries where the parent's loops end (:meth:`Append.group_end`), or here when
    there is no dense level."""
    out, storage = plan.output.name, plan.storage
    k = len(storage.levels) - 1
    level = storage.levels[k]
    nodes: list[t.Node] = [
        t.If(f"spf_cur.next{k} >= spf_cur.cap{k}",
             [t.Assign("spf_status", str(CAPACITY)), t.Goto("spf_fail")]),
        t.Declare("int64_t", "spf_q", f"spf_cur.next{k}++", const=True),
        t.Assign(f"{out}->{level.coords[0][1]}[spf_q]", f"(spf_index_t){plan.key[-1]}")]
    if storage.value_array is not None:     # else a pattern layout: no values stored
        nodes.append(t.Assign(f"{out}->{storage.value_array}[spf_q]", rhs))
    if len(plan.key) < 2:
        nodes += _pointer_past(plan, "")
    return nodes


def _pointer_past(plan: AssemblyPlan, note: str) -> list[t.Node]:
    """The last level's pointer at the dense parent's position (row-major over the dense
    coordinates) set past the entries appended so far."""
    level = plan.storage.levels[-1]
    if not level.pointer:
        return []
    k = len(plan.storage.levels) - 1
    parent = linear(plan, range(len(plan.key) - 1), flip=False)
    return [t.Assign(f"{plan.output.name}->{level.pointer}[{parent} + 1]",
                     f"(spf_index_t)spf_cur.next{k}", note=note)]


STRATEGY = Append()
