"""Sort: no ordered prefix; every entry is collected with its key, then sorted, combined
and appended (the fallback that always applies)."""
from __future__ import annotations

from ..back import ctree as t
from ..front.storage import Storage
from .base import AssemblyStrategy, linear, linear_needs_extents, on_failure
from .model import AssemblyPlan, FunctionRole, Mode


class Sort(AssemblyStrategy):
    mode = Mode.SORT
    preference = 3
    stream_mode = Mode.SORT

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        return True

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        return f"entries sorted, then appended by {kernel}_append"

    def how(self, plan: AssemblyPlan) -> str:
        return "all entries are collected, sorted and combined (no ordered prefix)"

    def needs_extents(self, plan: AssemblyPlan) -> bool:
        return linear_needs_extents(plan, range(len(plan.key)))

    def declare(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        if role is not FunctionRole.OUTPUT:
            return []
        return [t.Declare("spf_stream", "spf_entries", "{0}")]

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  role: FunctionRole) -> list[t.Node]:
        stream = "&spf_entries" if role is FunctionRole.OUTPUT else plan.output.name
        return [on_failure(f"spf_stream_push({stream}, {linear(plan, range(len(plan.key)))}, "
                           f"{rhs})", "spf_out_of_memory")]

    def finish(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        out = plan.output.name
        if role is FunctionRole.STREAM:
            return [t.Call(f"spf_stream_sort_combine({out})")]
        return [t.Call("spf_stream_sort_combine(&spf_entries)"),
                t.For("int64_t spf_e = 0", "spf_e < spf_entries.n", "++spf_e",
                      [on_failure(f"(spf_status = {kernel}_append(&spf_cur, {out}, "
                                  "spf_entries.key[spf_e], spf_entries.val[spf_e]))",
                                  "spf_fail")], braces=False),
                t.Call(f"{kernel}_finish(&spf_cur, {out}, {out}_size)")]

    def release(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        if role is not FunctionRole.OUTPUT:
            return []
        return [t.Call("spf_stream_free(&spf_entries)")]


STRATEGY = Sort()
