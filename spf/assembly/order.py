"""What Z3 proves about the order in which a nest produces an output's coordinates."""
from __future__ import annotations

from collections.abc import Sequence

import z3

from ..decide.smt import InstanceEncoder, Verdict
from ..decide.synthesis import Decision
from ..middle.scan import LevelKind, LoopNest


def unordered_loops(decisions: Sequence[Decision]) -> set[str]:
    """Find loops whose matches may run out of position order (hash chains, backward scans)."""
    out = set()
    for d in decisions:
        if any(not c.in_order for c in d.candidates):
            out.add(d.find.var)
    return out


def ordered_prefix(nest: LoopNest, key: tuple[str, ...], descending: tuple[bool, ...],
                    decisions: Sequence[Decision]) -> tuple[int, str]:
    """Longest prefix of ``key`` that is lexicographically non-decreasing in execution order."""
    if not any(lv.kind is LevelKind.LOOP for lv in nest.levels):
        return len(key), "the nest has no loop"
    unordered = unordered_loops(decisions)
    undecided = ""
    for s in range(len(key), 0, -1):
        verdict = non_decreasing(nest, len(nest.levels), key[:s], descending, unordered,
                                  statements_only=True,
                                  fallback="assumed not: " + ("a shorter prefix is tried" if s > 1
                                                              else "no prefix is ordered"))
        if verdict.result == "unsat":
            proof = "; ".join(verdict.used) if verdict.used else "affine constraints"
            return s, f"Z3 proved ({', '.join(key[:s])}) non-decreasing ({proof})"
        undecided = undecided or verdict.why
    if undecided:
        return 0, (f"no prefix of the storage order is proven non-decreasing ({undecided} on "
                   "some: assumed unordered, the safe choice)")
    return 0, "Z3 found executions where every prefix of the storage order decreases"


def group_level(nest: LoopNest, group: tuple[str, ...], descending: tuple[bool, ...],
                 decisions: Sequence[Decision]) -> int | None:
    """The level after which the group's coordinates are all known, if the group is
    non-decreasing over that level's iterations, statement or not (then checking it once per
    iteration there, not per statement instance, never splits a group)."""
    order = [lv.var for lv in nest.levels]
    if not all(g in order for g in group):
        return None
    level = max(order.index(g) for g in group)
    if not any(lv.kind is LevelKind.LOOP for lv in nest.levels[:level + 1]) or \
            not any(lv.kind is LevelKind.LOOP for lv in nest.levels[level + 1:]):
        return None     # no loop to hoist it out of
    verdict = non_decreasing(nest, level + 1, group, descending,
                              unordered_loops(decisions), statements_only=False,
                              fallback="assumed not: the group is checked per statement "
                                       "instance")
    return level if verdict.result == "unsat" else None


def non_decreasing(nest: LoopNest, depth: int, key: tuple[str, ...],
                    descending: tuple[bool, ...], unordered: set[str],
                    statements_only: bool, fallback: str, equal: tuple[str, ...] = ()
                    ) -> Verdict:
    """Z3 decides whether ``key`` never decreases (lexicographically) from one iteration of
    the first ``depth`` levels to a later one (only statement instances: ``statements_only``;
    only between iterations with the same values of ``equal``): unsat if it never does.  An
    unknown is no proof; ``fallback`` says what the caller does then."""
    loops = [lv.var for lv in nest.levels[:depth] if lv.kind is LevelKind.LOOP]
    enc = InstanceEncoder(nest, depth)
    enc.terms = []
    parts = enc.context(1) + enc.context(2)
    if statements_only:
        for k in (1, 2):
            parts += [enc.constraint(g, k) for g in nest.statement_guards]
    cases = []
    for n, v in enumerate(loops):
        same = [enc.var(u, 1) == enc.var(u, 2) for u in loops[:n]]
        step = enc.var(v, 1) != enc.var(v, 2) if v in unordered \
            else enc.var(v, 1) < enc.var(v, 2)
        cases.append(z3.And(*same, step))
    parts.append(z3.Or(*cases))
    parts += [enc.var(v, 1) == enc.var(v, 2) for v in equal]
    # the later instance (2) has a smaller key than the earlier one (1)
    smaller = []
    for n in range(len(key)):
        same = [enc.var(key[m], 1) == enc.var(key[m], 2) for m in range(n)]
        a, b = enc.var(key[n], 2), enc.var(key[n], 1)
        smaller.append(z3.And(*same, b < a if descending[n] else a < b))
    if smaller:     # without a key: can two iterations agree on ``equal`` at all?
        parts.append(z3.Or(*smaller))
    if key:
        query = f"whether ({', '.join(key)}) never decreases in execution order" \
            + (f" for equal ({', '.join(equal)})" if equal else "")
    else:
        query = f"whether no two statement instances have the same ({', '.join(equal)})"
    return enc.prove_empty(parts, query, fallback)
