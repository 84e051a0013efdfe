"""Bucket: no ordered prefix, and the output is a dense level over a compressed one with a
pointer array (the shape of CSR and CSC): a first pass counts the entries of each dense
position, the kernel scatters every entry to its position's segment, and the segments are
then sorted and combined in place where Z3 does not prove them already so."""
from __future__ import annotations

from dataclasses import replace

from ..back import ctree as t
from ..back.status import Status
from ..decide.synthesis import Decision
from ..front.storage import Storage, StorageKind
from ..middle.scan import LoopNest
from .base import CAPACITY, AssemblyStrategy
from .model import AssemblyPlan, FunctionRole, Mode
from .order import non_decreasing, unordered_loops


class Bucket(AssemblyStrategy):
    mode = Mode.BUCKET
    preference = 2
    cursor = False
    counts_first = True
    first_pass = FunctionRole.HISTOGRAM
    stream_mode = Mode.SORT

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        levels = storage.levels
        return len(levels) == 2 and levels[0].kind is StorageKind.DENSE \
            and len(levels[0].coords) == 1 and levels[1].pointer is not None \
            and len(levels[1].coords) == 1

    def specialize(self, nest: LoopNest, plan: AssemblyPlan,
                   decisions: list[Decision]) -> AssemblyPlan:
        unordered, depth, key = unordered_loops(decisions), len(nest.levels), plan.key
        bucket_sorted = non_decreasing(
            nest, depth, key[1:], plan.storage.descending[1:], unordered, statements_only=True,
            equal=key[:1], fallback="assumed not: each bucket is sorted").result == "unsat"
        unique = non_decreasing(
            nest, depth, (), (), unordered, statements_only=True, equal=key,
            fallback="assumed not: entries with equal coordinates are combined"
        ).result == "unsat"
        return replace(plan, bucket_sorted=bucket_sorted, unique=unique)

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        return f"entries counted per {plan.key[0]} by {kernel}_histogram, then scattered"

    def how(self, plan: AssemblyPlan) -> str:
        inner = plan.key[1]
        done = "complete" if plan.bucket_sorted and plan.unique else (
            "combined where coordinates repeat" if plan.bucket_sorted else
            f"sorted by {inner}" + ("" if plan.unique else " and combined"))
        proofs = [p for p, ok in ((f"{inner} non-decreasing within a segment",
                                   plan.bucket_sorted),
                                  ("no two entries with the same coordinates", plan.unique))
                  if ok]
        return (f"no ordered prefix: a first pass counts the entries of each {plan.key[0]} "
                f"(the pointer array), a second scatters them to their {plan.key[0]}'s "
                f"segment, which is then {done}"
                + (f" (Z3 proved {'; '.join(proofs)})" if proofs else ""))

    def declare(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        level = plan.storage.levels[1]
        scratch = [t.Declare("spf_value_t *restrict", _SCRATCH, "NULL",
                             note="a pattern layout stores no values: the segments' sort "
                                  "and combine move these")] \
            if _needs_scratch(plan) else []
        return [t.Declare("int", "spf_status", "0"),
                t.Declare("spf_index_t *restrict", "spf_next",
                          f"{plan.output.name}->{level.pointer}",
                          note="(zeroed) counts, then per bucket the next free position"),
                *scratch]

    def release(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        return [t.Call(f"free({_SCRATCH})")] if _needs_scratch(plan) else []

    def start(self, plan: AssemblyPlan, kernel: str, inputs: list[str]) -> list[t.Node]:
        """Before the scatter: count each bucket's entries (``<kernel>_histogram``) and turn
        the counts into the first position of each bucket."""
        out = plan.output.name
        args = ", spf_ext" * plan.ranged + "".join(", " + a for a in inputs)  # as param()
        return [t.If(f"(spf_status = {kernel}_histogram(spf_next + 1{args})) != 0",
                     [t.Goto("spf_fail")], braces=False,
                     note="out of memory, or a value numpy refuses"),
                t.For("int64_t spf_b = 0", "spf_b < spf_ext[0]", "++spf_b",
                      [t.Assign("spf_next[spf_b + 1]", "spf_next[spf_b]", "+=")], braces=False),
                t.If(f"spf_next[spf_ext[0]] > {out}_size[1]",
                     [t.Assign("spf_status", str(CAPACITY)), t.Goto("spf_fail")]),
                *_scratch_allocation(plan)]

    def first_pass_note(self, plan: AssemblyPlan) -> str:
        return (f"Bucket mode, first pass: the entries of each {plan.key[0]} (an upper bound: "
                "equal coordinates are added later).")

    def count_statement(self, plan: AssemblyPlan) -> list[t.Node]:
        return [t.Call(f"++spf_hist[{plan.key[0]}]")]

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  role: FunctionRole) -> list[t.Node]:
        out, level = plan.output.name, plan.storage.levels[1]
        nodes: list[t.Node] = [
            t.Declare("int64_t", "spf_q", f"spf_next[{plan.key[0]}]++", const=True),
            t.Assign(f"{out}->{level.coords[0][1]}[spf_q]", f"(spf_index_t){plan.key[1]}")]
        values = _values(plan)
        return nodes + ([t.Assign(f"{values}[spf_q]", rhs)] if values else [])

    def finish(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        out, level = plan.output.name, plan.storage.levels[1]
        nodes: list[t.Node] = [t.Assign(f"{out}_size[0]", "spf_ext[0]")]
        if plan.bucket_sorted and plan.unique:   # segments are final: only the pointers
            return nodes + [
                t.Assign(f"{out}_size[1]", "spf_next[spf_ext[0]]"),
                t.Comment("spf_next[b] is now where bucket b ends: shift to pointers"),
                t.Call("memmove(spf_next + 1, spf_next, sizeof(spf_index_t) * "
                       "(size_t)spf_ext[0])"),
                t.Assign("spf_next[0]", "0")]
        sort = "0" if plan.bucket_sorted else "1"
        return nodes + [t.Assign(f"{out}_size[1]", f"spf_bucket_finish(spf_ext[0], spf_next, "
                                 f"{out}->{level.coords[0][1]}, "
                                 f"{_values(plan)}, {sort}, "
                                 f"{int(not plan.unique)}, {int(plan.descending[1])})")]


_SCRATCH = "spf_vals"


def _needs_scratch(plan: AssemblyPlan) -> bool:
    """Whether a pattern output (no value array) needs values of the kernel's own for
    ``spf_bucket_finish``, which sorts and combines (coordinate, value) pairs."""
    return plan.storage.value_array is None and not (plan.bucket_sorted and plan.unique)


def _values(plan: AssemblyPlan) -> str | None:
    """Where the scatter writes values: the output's array, the kernel's scratch array for
    a pattern output that sorts or combines, or nowhere (None)."""
    if plan.storage.value_array is not None:
        return f"{plan.output.name}->{plan.storage.value_array}"
    return _SCRATCH if _needs_scratch(plan) else None


def _scratch_allocation(plan: AssemblyPlan) -> list[t.Node]:
    """The scratch values of a pattern output, one per entry the first pass counted
    (+ 1: malloc(0) may return NULL)."""
    if not _needs_scratch(plan):
        return []
    return [t.Assign(_SCRATCH, "malloc(sizeof(spf_value_t) * (size_t)(spf_next[spf_ext[0]] + 1))"),
            t.If(f"!{_SCRATCH}", [t.Assign("spf_status", str(Status.OUT_OF_MEMORY.value)),
                                  t.Goto("spf_fail")])]


STRATEGY = Bucket()
