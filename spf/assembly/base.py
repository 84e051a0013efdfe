"""The interface of an assembly strategy and the C pieces the strategies share.

A strategy is one module of :mod:`spf.assembly` defining ``STRATEGY``, an instance of an
:class:`AssemblyStrategy` subclass: when it applies (:meth:`applies`, given the ordered
prefix Z3 proved), the facts it needs from the nest (:meth:`specialize`), how it describes
itself, and its lowering to the C tree (the state it declares, the statement handing it an
entry, how it finishes and what it releases).
"""
from __future__ import annotations

from typing import ClassVar

from ..back import ctree as t
from ..back.status import Status
from ..decide.synthesis import Decision
from ..front.storage import Storage
from ..middle.scan import LoopNest
from .model import AssemblyPlan, FunctionRole, Mode

CAPACITY = Status.CAPACITY.value    # the caller's bound was too small (never expected)


class AssemblyStrategy:
    """One way of assembling an output.  Subclasses set the class attributes."""

    mode: ClassVar[Mode]
    preference: ClassVar[int]           # the first that applies is used
    cursor: ClassVar[bool] = True       # appends through <kernel>_append (the cursor)
    counts_first: ClassVar[bool] = False   # scatters every statement instance before
    #                                          combining (one slot per instance)
    first_pass: ClassVar[FunctionRole | None] = None    # that pass's function, if any
    in_region: ClassVar[bool] = False   # runs its parallel loop inside a region of its own
    flushes: ClassVar[bool] = False     # hands groups to <kernel>_flush (a workspace)
    stream_mode: ClassVar[Mode]         # the mode a term of a sum uses (a sorted run)

    def applies(self, ordered: int, n: int, storage: Storage) -> bool:
        raise NotImplementedError

    def specialize(self, nest: LoopNest, plan: AssemblyPlan,
                   decisions: list[Decision]) -> AssemblyPlan:
        """``plan`` with the facts this strategy needs (Z3 proofs) filled in."""
        return plan

    def how(self, plan: AssemblyPlan) -> str:
        raise NotImplementedError

    def summary(self, plan: AssemblyPlan, kernel: str) -> str:
        """One line for the generated file's header."""
        raise NotImplementedError

    def needs_extents(self, plan: AssemblyPlan) -> bool:
        """Whether its code for a sorted run (a term of a sum) reads ``spf_ext``."""
        return False

    # lowering ---------------------------------------------------------------------------
    def declare(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        return []

    def statement(self, plan: AssemblyPlan, rhs: str, kernel: str,
                  role: FunctionRole) -> list[t.Node]:
        raise NotImplementedError

    def finish(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        raise NotImplementedError

    def release(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        return []

    def start(self, plan: AssemblyPlan, kernel: str, inputs: list[str]) -> list[t.Node]:
        """Before the loops (a strategy that counts first: its first pass)."""
        return []

    def group_check(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        """Where the ordered group is known (``plan.group_level``): hand over a finished
        group."""
        return []

    def group_end(self, plan: AssemblyPlan) -> list[t.Node]:
        """At the end of the body of the level defining the output's coordinates above its
        last level (once per value of them): e.g. a pointer moved past the group."""
        return []

    def count_statement(self, plan: AssemblyPlan) -> list[t.Node]:
        """The statement of the counting pass (``counts_first``)."""
        return []

    def first_pass_note(self, plan: AssemblyPlan) -> str:
        """The comment above the first pass's function (``first_pass``)."""
        return ""

    def functions(self, plan: AssemblyPlan, kernel: str, struct: str) -> list[t.Function]:
        """Static functions of its own the kernel calls (defined before it)."""
        return []

    def region_start(self, plan: AssemblyPlan, role: FunctionRole) -> list[t.Node]:
        """Inside the parallel region, before the loops (``in_region``): the thread's state."""
        return []

    def region_end(self, plan: AssemblyPlan, kernel: str, role: FunctionRole) -> list[t.Node]:
        """Inside the parallel region, after the thread's share of the loop."""
        return []


def linear(plan: AssemblyPlan, parts: range, flip: bool = True) -> str:
    """Row-major linearization of the key coordinates ``parts`` (descending ones flipped,
    unless not ``flip``: the position of a dense level, indexed by the coordinate itself)."""
    text = ""
    for m in parts:
        coord = plan.key[m]
        if flip and plan.descending[m]:
            coord = f"(spf_ext[{m}] - 1 - {coord})"
        text = f"(int64_t){coord}" if not text else f"({text}) * spf_ext[{m}] + {coord}"
    return text or "0"


def linear_needs_extents(plan: AssemblyPlan, parts: range) -> bool:
    return len(parts) > 1 or any(plan.descending[m] for m in parts)


def on_failure(call: str, label: str) -> t.If:
    """``if (call) goto label;``"""
    return t.If(call, [t.Goto(label)], braces=False)
