"""How a kernel assembles a sparse output of unknown sparsity (paper Sec. 4, 8.5).

The output's storage order comes from its layout (:mod:`spf.storage`).  Z3 decides how much
of it the loop nest already produces in order: the longest prefix of the storage-order
coordinates that never decreases from one statement instance to the next (with the input
layouts' properties; a find that may enumerate matches out of position order counts as
unordered).  Entries are then appended group by group (one group per prefix value), the
rest of the coordinates gathered in a dense workspace; with no ordered prefix, a vector
output uses one workspace over the whole vector and other outputs sort all entries.
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from .iteration_space import TensorUse
from .scan import LoopNest
from .smt import InstanceEncoder
from .storage import Storage, storage_of
from .synthesis import Decision
from .terms import Aff


@dataclass(frozen=True)
class AssemblyPlan:
    """Storage of the output and how the nest feeds it."""

    output: TensorUse
    storage: Storage
    key: tuple[str, ...]          # kernel indices in storage order
    descending: tuple[bool, ...]
    extents: tuple[Aff, ...]      # per key index, over input fields
    ordered: int                  # length of the prefix the loops produce in order
    mode: str                     # "workspace" | "sort"
    why: str                      # the proof or the reason, for reports

    def describe(self) -> str:
        lay = self.storage.layout
        if self.mode == "sort":
            how = "all entries are collected, sorted and combined (no ordered prefix)"
        elif self.ordered == len(self.key):
            how = "entries arrive in storage order; equal neighbours are added"
        else:
            rest = ", ".join(self.key[self.ordered:])
            how = (f"a dense workspace over ({rest}) gathers each group"
                   + ("" if self.ordered else " (the whole vector)"))
        pre = ", ".join(self.key[:self.ordered]) or "none"
        return (f"output {self.output.name} ({lay.name}) assembled in storage order "
                f"({', '.join(self.key)}); ordered by the loops: ({pre}); {how}; {self.why}")


def plan_assembly(nest: LoopNest, output: TensorUse, decisions: list[Decision]) -> AssemblyPlan:
    storage = storage_of(output.layout)
    key = tuple(output.indices[d] for d in storage.order)
    extents = tuple(nest.space.extent[i] for i in key)
    ordered, why = _ordered_prefix(nest, key, storage.descending, decisions)
    if ordered == 0 and len(key) > 1:
        mode = "sort"
    else:
        mode = "workspace"
    return AssemblyPlan(output, storage, key, storage.descending, extents, ordered, mode, why)


def _unordered_loops(decisions: list[Decision]) -> set[str]:
    """Find loops whose matches may run out of position order (hash chains, backward scans)."""
    out = set()
    for d in decisions:
        for c in (d.chosen, d.runtime_alternative):
            if c is None:
                continue
            if (c.algorithm == "hashmap" and not c.unique) or \
                    (c.algorithm == "seqiter" and c.direction < 0 and not c.unique):
                out.add(d.find.var)
    return out


def _ordered_prefix(nest: LoopNest, key: tuple[str, ...], descending: tuple[bool, ...],
                    decisions: list[Decision]) -> tuple[int, str]:
    """Longest prefix of ``key`` that is lexicographically non-decreasing in execution order."""
    loops = [lv.var for lv in nest.levels if lv.kind == "loop"]
    unordered = _unordered_loops(decisions)
    for s in range(len(key), 0, -1):
        enc = InstanceEncoder(nest, len(nest.levels))
        enc.terms = []
        parts = enc.context(1) + enc.context(2)
        for k in (1, 2):
            parts += [enc.constraint(g, k) for g in nest.statement_guards]
        cases = []
        for n, v in enumerate(loops):
            same = [enc.var(u, 1) == enc.var(u, 2) for u in loops[:n]]
            step = enc.var(v, 1) != enc.var(v, 2) if v in unordered \
                else enc.var(v, 1) < enc.var(v, 2)
            cases.append(z3.And(*same, step))
        if not cases:
            return len(key), "the nest has no loop"
        parts.append(z3.Or(*cases))
        # the later instance (2) has a smaller prefix than the earlier one (1)
        smaller = []
        for n in range(s):
            same = [enc.var(key[m], 1) == enc.var(key[m], 2) for m in range(n)]
            a, b = enc.var(key[n], 2), enc.var(key[n], 1)
            smaller.append(z3.And(*same, b < a if descending[n] else a < b))
        parts.append(z3.Or(*smaller))
        result, used = enc.prove_empty(parts)
        if result == "unsat":
            proof = "; ".join(used) if used else "affine constraints"
            return s, f"Z3 proved ({', '.join(key[:s])}) non-decreasing ({proof})"
    return 0, "Z3 found executions where every prefix of the storage order decreases"
