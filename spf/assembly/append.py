"""Append: the whole key arrives in storage order; entries go straight to the output's
arrays, equal neighbours added."""
from __future__ import annotations

from ..back import ctree as t
from ..front.storage import Storage
from .base import AssemblyStrategy, linear, linear_needs_extents, on_failure
from .model import AssemblyPlan, Mode


class Append(AssemblyStrategy):
    mode = Mode.APPEND
    preference = 0
    stream_mode = Mode.WORKSPACE

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        return ordered == n

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        return f"entries appended in storage order by {kernel}_append"

    def how(self, plan: AssemblyPlan) -> str:
        return "entries arrive in storage order; equal neighbours are added"

    def needs_extents(self, plan: AssemblyPlan) -> bool:
        return linear_needs_extents(plan, range(len(plan.key)))

    def declare(self, plan: AssemblyPlan, target: str) -> list[t.Node]:
        return [t.Declare("int64_t", "spf_last", "-1", note="key of the entry appended last")]

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  target: str) -> list[t.Node]:
        out = plan.output.name
        last = len(plan.storage.levels) - 1
        return [t.Declare("int64_t", "spf_key", linear(plan, range(len(plan.key))), const=True),
                t.If("spf_key != spf_last",
                     [on_failure(f"(spf_status = {kernel}_append(&spf_cur, {out}, spf_key, "
                                 f"{rhs}))", "spf_fail"),
                      t.Assign("spf_last", "spf_key")],
                     orelse=[t.Assign(f"{out}->{plan.storage.value_array}[spf_cur.pos{last}]",
                                      rhs, "+=")],
                     else_note="the same coordinates again")]

    def finish(self, plan: AssemblyPlan, kernel: str, target: str) -> list[t.Node]:
        out = plan.output.name
        return [t.Call(f"{kernel}_finish(&spf_cur, {out}, {out}_size)")]


STRATEGY = Append()
