"""Workspace: the loops produce a prefix of the key in order (a group); the rest of each
group's coordinates are gathered in a dense workspace and emitted when the group changes
(in key order, or in the order first touched where the layout keeps them unordered)."""
from __future__ import annotations

from dataclasses import replace

from ..back import ctree as t
from ..decide.synthesis import Decision
from ..front.storage import Storage
from ..middle.scan import LoopNest
from .base import AssemblyStrategy, linear, linear_needs_extents, on_failure
from .model import AssemblyPlan, FunctionRole, Mode
from .order import group_level


class Workspace(AssemblyStrategy):
    mode = Mode.WORKSPACE
    preference = 1
    stream_mode = Mode.WORKSPACE
    flushes = True

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        return ordered > 0 or n == 1

    def specialize(self, nest: LoopNest, plan: AssemblyPlan,
                   decisions: list[Decision]) -> AssemblyPlan:
        if not plan.ordered:
            return plan
        level = group_level(nest, plan.key[:plan.ordered], plan.storage.descending, decisions)
        if level is None:
            return plan
        return replace(plan, group_level=level, group_var=nest.levels[level].var)

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        return f"entries gathered per group, appended in storage order by {kernel}_append"

    def how(self, plan: AssemblyPlan) -> str:
        rest = ", ".join(plan.key[plan.ordered:])
        lay = plan.storage.layout
        return (f"a dense workspace over ({rest}) gathers each group"
                + ("" if plan.ordered else " (the whole vector)")
                + (f" and emits it in the order first touched ({lay.name} keeps ({rest}) "
                   "unordered)" if plan.any_order else " and emits it in order"))

    def needs_extents(self, plan: AssemblyPlan) -> bool:
        n, k = len(plan.key), plan.ordered
        return k < n or linear_needs_extents(plan, range(k, n)) or (
            k > 0 and linear_needs_extents(plan, range(k)))

    @staticmethod
    def size(plan: AssemblyPlan) -> str:
        return " * ".join(f"spf_ext[{m}]" for m in range(plan.ordered, len(plan.key))) or "1"

    def declare(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        out: list[t.Node] = [
            t.Declare("spf_workspace", "spf_ws"),
            on_failure(f"spf_ws_init(&spf_ws, {self.size(plan)}, "
                       f"{'-1' if plan.ordered else '0'})", "spf_out_of_memory")]
        if plan.ordered:
            out.append(t.Declare("int64_t", "spf_prefix", "-1",
                                 note="the group gathered in the workspace"))
        return out

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  role: FunctionRole) -> list[t.Node]:
        n = len(plan.key)
        nodes = self.group_check(plan, kernel, role) if plan.group_level is None else []
        nodes.append(t.Call(f"spf_ws_add(&spf_ws, {linear(plan, range(plan.ordered, n))}, "
                            f"{rhs})"))
        return nodes

    def group_check(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        """Flush the workspace when the ordered coordinates (the group) change: per
        statement instance, or once per iteration of ``plan.group_level``."""
        if not plan.ordered:
            return []
        out = plan.output.name
        flush = on_failure(f"(spf_status = {kernel}_flush(&spf_ws, &spf_cur, {out}, "
                           "spf_group))", "spf_fail") if role is FunctionRole.OUTPUT else \
            on_failure(f"spf_ws_flush(&spf_ws, {out}, spf_group)", "spf_out_of_memory")
        return [t.Declare("int64_t", "spf_group", linear(plan, range(plan.ordered)), const=True),
                t.If("spf_group != spf_prefix", [flush, t.Assign("spf_prefix", "spf_group")])]

    def finish(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        out = plan.output.name
        if role is FunctionRole.STREAM:
            return [on_failure(f"spf_ws.prefix >= 0 && spf_ws_flush(&spf_ws, {out}, -1)",
                               "spf_out_of_memory")]
        return [on_failure(f"spf_ws.prefix >= 0 && (spf_status = {kernel}_flush("
                           f"&spf_ws, &spf_cur, {out}, -1))", "spf_fail"),
                t.Call(f"{kernel}_finish(&spf_cur, {out}, {out}_size)")]

    def release(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        return [t.Call("spf_ws_free(&spf_ws)")]


STRATEGY = Workspace()
