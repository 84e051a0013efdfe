"""Rows: the output built in parallel by the threads of the outermost loop, when Z3 proves
that two of its iterations never write the same row (the output's first coordinate, a dense
level over a compressed one with a pointer array: the shape of CSR and CSC).  The structure
TACO and MLIR use: a first pass counts each row's distinct coordinates (every thread with
its own workspace), a prefix sum makes the pointer array, and a second pass gathers each
row's entries in the thread's workspace and writes them, in order, at the row's segment.
The planner chooses it (:func:`spf.decide.plan.make_plan`); it never applies on its own."""
from __future__ import annotations

from ..back import ctree as t
from ..back.names import field_ctype
from ..front.storage import Storage, StorageKind
from .base import CAPACITY, AssemblyStrategy, on_failure
from .model import AssemblyPlan, FunctionRole, Mode

STATE = "spf_wss"           # the threads' workspaces, allocated before the region
MINE = "spf_w"              # the thread's own


def row_shaped(storage: Storage) -> bool:
    """A dense level over one coordinate above a compressed one with a pointer array."""
    levels = storage.levels
    return len(levels) == 2 and levels[0].kind is StorageKind.DENSE \
        and len(levels[0].coords) == 1 and levels[1].pointer is not None \
        and len(levels[1].coords) == 1


class Rows(AssemblyStrategy):
    mode = Mode.ROWS
    preference = 9
    cursor = False
    first_pass = FunctionRole.ROW_COUNTS
    in_region = True
    stream_mode = Mode.SORT

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        return False            # chosen by the planner of a parallel loop, with its proof

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        return (f"in parallel: each {plan.key[0]}'s distinct entries counted by {kernel}_rows, "
                f"then each {plan.key[0]} filled by its thread")

    def how(self, plan: AssemblyPlan) -> str:
        row, col = plan.key
        return (f"in parallel over the outermost loop: a first pass counts the distinct {col} "
                f"of each {row} (each thread in its own workspace), a prefix sum makes the "
                f"pointer array, a second pass gathers each {row}'s entries in the thread's "
                f"workspace and writes them in order at the {row}'s segment")

    def needs_extents(self, plan: AssemblyPlan) -> bool:
        return plan.descending[1]       # the counting pass's slots (the kernel has them)

    def _pointer(self, plan: AssemblyPlan) -> str:
        return f"{plan.output.name}->{plan.storage.levels[1].pointer}"

    def declare(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        if role is FunctionRole.ROW_COUNTS:
            return []               # the caller's workspaces and counts
        return [t.Declare("int", "spf_status", "0"),
                t.Declare("int", "spf_threads", "spf_max_threads()", const=True),
                t.Declare("spf_workspace", f"*{STATE}", "spf_wss_init(spf_threads, spf_ext[1])",
                          note=f"one workspace over {plan.key[1]} per thread"),
                on_failure(f"!{STATE}", "spf_out_of_memory"),
                t.Declare("spf_index_t *restrict", "spf_ptr", self._pointer(plan),
                          note="(zeroed) counts, then the pointer array")]

    def start(self, plan: AssemblyPlan, kernel: str, inputs: list[str]) -> list[t.Node]:
        """The counting pass, the prefix sum, the capacity check."""
        out = plan.output.name
        args = "".join(", " + a for a in inputs)
        return [t.Comment(f"first pass (parallel): the distinct {plan.key[1]} of each "
                          f"{plan.key[0]}, into spf_ptr[{plan.key[0]} + 1]"),
                on_failure(f"{kernel}_rows(spf_ptr + 1, {STATE}{args})", "spf_out_of_memory"),
                t.For("int64_t spf_b = 0", "spf_b < spf_ext[0]", "++spf_b",
                      [t.Assign("spf_ptr[spf_b + 1]", "spf_ptr[spf_b]", "+=")], braces=False),
                t.If(f"spf_ptr[spf_ext[0]] > {out}_size[1]",
                     [t.Assign("spf_status", str(CAPACITY)), t.Goto("spf_fail")]),
                t.Comment(f"second pass (parallel): each {plan.key[0]} gathered and written at "
                          "its segment")]

    def region_start(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        return [t.Declare("spf_workspace", "spf_local", f"{STATE}[spf_thread()]",
                          note="a copy on the thread's stack: its counters share no cache "
                               "line with another thread's"),
                t.Declare("spf_workspace *restrict", MINE, "&spf_local"),
                t.Declare("int64_t", "spf_prefix", "-1",
                          note=f"the {plan.key[0]} gathered in the workspace")]

    def _slot(self, plan: AssemblyPlan) -> str:
        col = plan.key[1]
        return f"(spf_ext[1] - 1 - {col})" if plan.descending[1] else f"(int64_t){col}"

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  role: FunctionRole) -> list[t.Node]:
        nodes = self.group_check(plan, kernel, role) if plan.group_level is None else []
        if role is FunctionRole.ROW_COUNTS:
            return nodes + [t.Call(f"spf_ws_mark({MINE}, {self._slot(plan)})")]
        return nodes + [t.Call(f"spf_ws_add({MINE}, {self._slot(plan)}, {rhs})")]

    def _done(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> t.Node:
        """The row in the workspace, counted or written."""
        if role is FunctionRole.ROW_COUNTS:
            return t.Assign("spf_count[spf_prefix]", "(spf_index_t)spf_ws_count(spf_w)")
        return t.Call(f"{kernel}_fill({MINE}, {plan.output.name}, spf_prefix)")

    def group_check(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        return [t.Declare("int64_t", "spf_group", f"(int64_t){plan.key[0]}", const=True),
                t.If("spf_group != spf_prefix", [
                    t.If("spf_prefix >= 0", [self._done(plan, kernel, role)], braces=False),
                    t.Assign("spf_prefix", "spf_group")])]

    def region_end(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        return [t.If("spf_prefix >= 0", [self._done(plan, kernel, role)], braces=False,
                     note="the thread's last row")]

    def finish(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        if role is FunctionRole.ROW_COUNTS:
            return []
        out = plan.output.name
        return [t.Assign(f"{out}_size[0]", "spf_ext[0]"),
                t.Assign(f"{out}_size[1]", "spf_ptr[spf_ext[0]]")]

    def release(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        if role is FunctionRole.ROW_COUNTS:
            return []
        return [t.Call(f"spf_wss_free({STATE}, spf_threads)")]

    def first_pass_note(self, plan: AssemblyPlan) -> str:
        return (f"Rows mode, first pass (parallel over the outermost loop): the distinct "
                f"{plan.key[1]} of each {plan.key[0]}, counted in the thread's workspace.")

    def functions(self, plan: AssemblyPlan, kernel: str, struct: str) -> list[t.Function]:
        """``<kernel>_fill``: a row's entries, in coordinate order, at its segment."""
        storage, level = plan.storage, plan.storage.levels[1]
        crd = level.arrays[0]
        ctype = field_ctype(storage.layout.fields[crd], storage.layout)
        coord = "ws->size - 1 - list[t]" if plan.descending[1] else "list[t]"
        body: list[t.Node] = [
            t.Declare("int64_t", "n", "spf_ws_order(ws)", const=True),
            t.Declare("int64_t", "at", f"out->{level.pointer}[row]", const=True),
            t.Declare("const int64_t *restrict", "list", "ws->list"),
            t.Declare(f"{ctype} *restrict", "crd", f"out->{crd} + at"),
            *([t.Declare("spf_value_t *restrict", "val", f"out->{storage.value_array} + at")]
              if storage.value_array else []),    # a pattern layout stores no values
            t.For("int64_t t = 0", "t < n", "++t", [
                t.Assign("crd[t]", f"({ctype})({coord})"),
                *([t.Assign("val[t]", "ws->val[list[t]]")] if storage.value_array else [])]),
            t.Assign("ws->n", "0")]
        return [t.Function(f"static void {kernel}_fill(spf_workspace *restrict ws, {struct} "
                           "*restrict out, int64_t row)", body,
                           "write the workspace's row at its segment, in coordinate order")]


STRATEGY = Rows()
