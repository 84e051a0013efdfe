"""How a kernel assembles a sparse output of unknown sparsity (paper Sec. 4, 8.5).

The output's storage order comes from its layout (:mod:`spf.storage`).  Z3 decides how much
of it the loop nest already produces in order: the longest prefix of the storage-order
coordinates that never decreases from one statement instance to the next (with the input
layouts' properties; a find that may enumerate matches out of position order counts as
unordered, and so does a prefix Z3 leaves undecided within its time limit).  Entries are then appended group by group (one group per prefix value), the
rest of the coordinates gathered in a dense workspace (or, when the whole key arrives in
order, appended directly); with no ordered prefix, a vector output uses one workspace over
the whole vector, a dense level over a compressed one is filled by a counting scatter
(bucket) and other outputs sort all entries.
"""
from __future__ import annotations

from enum import StrEnum
from dataclasses import dataclass

import z3

from .iteration_space import TensorUse
from .scan import LevelKind, LoopNest
from .smt import InstanceEncoder, Verdict
from .storage import Storage, StorageKind, storage_of
from .synthesis import Decision
from .terms import Aff


class Mode(StrEnum):
    """How an assembled output receives its entries: appended in storage order (APPEND),
    gathered per group in a dense workspace (WORKSPACE), counted then scattered into the
    buckets of a dense level (BUCKET), or collected and sorted (SORT)."""

    APPEND = "append"
    WORKSPACE = "workspace"
    BUCKET = "bucket"
    SORT = "sort"


@dataclass(frozen=True)
class AssemblyPlan:
    """Storage of the output and how the nest feeds it."""

    output: TensorUse
    storage: Storage
    key: tuple[str, ...]          # kernel indices in storage order
    descending: tuple[bool, ...]
    extents: tuple[Aff, ...]      # per key index, over input fields
    ordered: int                  # length of the prefix the loops produce in order
    mode: Mode
    why: str                      # the proof or the reason, for reports
    group_level: int | None = None  # nest level where the group is checked (None: per instance)
    group_var: str = ""             # that level's variable
    bucket_sorted: bool = False     # bucket: each bucket's entries arrive in order (Z3)
    unique: bool = False            # Z3: no two statement instances have the same key
    drop_zeros: bool = False        # entries whose value is 0.0 are not stored

    @property
    def any_order(self) -> bool:
        """A workspace group may be emitted in the order its slots were first touched: the
        coordinates it gathers are ones the output layout keeps in no particular order."""
        n = len(self.key)
        return self.mode is Mode.WORKSPACE and self.ordered < n \
            and self.ordered >= n - self.storage.free_tail

    @property
    def last_only(self) -> bool:
        """A workspace slot is exactly the one coordinate of the output's last level."""
        last = self.storage.levels[-1]
        return self.mode is Mode.WORKSPACE and self.ordered == len(self.key) - 1 \
            and last.kind is StorageKind.COMPRESSED and len(last.coords) == 1

    def describe(self) -> str:
        lay = self.storage.layout
        if self.mode is Mode.SORT:
            how = "all entries are collected, sorted and combined (no ordered prefix)"
        elif self.mode is Mode.BUCKET:
            inner = self.key[1]
            done = "complete" if self.bucket_sorted and self.unique else (
                "combined where coordinates repeat" if self.bucket_sorted else
                f"sorted by {inner}" + ("" if self.unique else " and combined"))
            proofs = [p for p, ok in ((f"{inner} non-decreasing within a segment",
                                       self.bucket_sorted),
                                      ("no two entries with the same coordinates", self.unique))
                      if ok]
            how = (f"no ordered prefix: a first pass counts the entries of each {self.key[0]} "
                   f"(the pointer array), a second scatters them to their {self.key[0]}'s "
                   f"segment, which is then {done}"
                   + (f" (Z3 proved {'; '.join(proofs)})" if proofs else ""))
        elif self.mode is Mode.APPEND:
            how = "entries arrive in storage order; equal neighbours are added"
        else:
            rest = ", ".join(self.key[self.ordered:])
            how = (f"a dense workspace over ({rest}) gathers each group"
                   + ("" if self.ordered else " (the whole vector)")
                   + (f" and emits it in the order first touched ({lay.name} keeps ({rest}) "
                      "unordered)" if self.any_order else " and emits it in order"))
        pre = ", ".join(self.key[:self.ordered]) or "none"
        where = ""
        if self.mode is Mode.WORKSPACE and self.ordered:
            where = ("; the group changes only between statement instances" if
                     self.group_level is None else
                     f"; the group is checked once where {self.group_var} is defined, not per "
                     "instance (Z3 proved it non-decreasing over those iterations)")
        zeros = "; entries equal to 0.0 are not stored" if self.drop_zeros else ""
        return (f"output {self.output.name} ({lay.name}) assembled in storage order "
                f"({', '.join(self.key)}); ordered by the loops: ({pre}); {how}; {self.why}"
                f"{where}{zeros}")


def plan_assembly(nest: LoopNest, output: TensorUse, decisions: list[Decision]) -> AssemblyPlan:
    storage = storage_of(output.layout)
    key = tuple(output.indices[d] for d in storage.order)
    extents = tuple(nest.space.extent[i] for i in key)
    ordered, why = _ordered_prefix(nest, key, storage.descending, decisions)
    mode = Mode.SORT if ordered == 0 and len(key) > 1 else \
        Mode.APPEND if ordered == len(key) else Mode.WORKSPACE
    bucket_sorted = unique = False
    if mode is Mode.SORT and _bucketable(storage):
        mode = Mode.BUCKET
        bucket_sorted = _non_decreasing(nest, len(nest.levels), key[1:], storage.descending[1:],
                                        _unordered_loops(decisions), statements_only=True,
                                        equal=key[:1],
                                        fallback="assumed not: each bucket is sorted"
                                        ).result == "unsat"
        unique = _non_decreasing(nest, len(nest.levels), (), (), _unordered_loops(decisions),
                                 statements_only=True, equal=key,
                                 fallback="assumed not: entries with equal coordinates are "
                                          "combined").result == "unsat"
    group_level = None
    if mode is Mode.WORKSPACE and ordered:
        group_level = _group_level(nest, key[:ordered], storage.descending, decisions)
    return AssemblyPlan(output, storage, key, storage.descending, extents, ordered, mode, why,
                        group_level,
                        nest.levels[group_level].var if group_level is not None else "",
                        bucket_sorted, unique)


def _bucketable(storage: Storage) -> bool:
    """A dense level over one coordinate above a compressed level with a pointer array and
    one coordinate (the shape of CSR and CSC): entries can be counted per dense position and
    scattered to its segment."""
    levels = storage.levels
    return len(levels) == 2 and levels[0].kind is StorageKind.DENSE and len(levels[0].coords) == 1 \
        and levels[1].pointer is not None and len(levels[1].coords) == 1


def _unordered_loops(decisions: list[Decision]) -> set[str]:
    """Find loops whose matches may run out of position order (hash chains, backward scans)."""
    out = set()
    for d in decisions:
        if any(not c.in_order for c in d.candidates):
            out.add(d.find.var)
    return out


def _ordered_prefix(nest: LoopNest, key: tuple[str, ...], descending: tuple[bool, ...],
                    decisions: list[Decision]) -> tuple[int, str]:
    """Longest prefix of ``key`` that is lexicographically non-decreasing in execution order."""
    if not any(lv.kind is LevelKind.LOOP for lv in nest.levels):
        return len(key), "the nest has no loop"
    unordered = _unordered_loops(decisions)
    undecided = ""
    for s in range(len(key), 0, -1):
        verdict = _non_decreasing(nest, len(nest.levels), key[:s], descending, unordered,
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


def contiguous_group_level(nest: LoopNest, group: tuple[str, ...],
                           decisions: list[Decision]) -> int | None:
    """The nest level after which the logical indices ``group`` are all known, when Z3
    proves them non-decreasing over that level's iterations: entries of one group then arrive
    one after the other, and a check there, once per iteration, sees every group change."""
    return _group_level(nest, group, (False,) * len(group), decisions)


def _group_level(nest: LoopNest, group: tuple[str, ...], descending: tuple[bool, ...],
                 decisions: list[Decision]) -> int | None:
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
    verdict = _non_decreasing(nest, level + 1, group, descending,
                              _unordered_loops(decisions), statements_only=False,
                              fallback="assumed not: the group is checked per statement "
                                       "instance")
    return level if verdict.result == "unsat" else None


def _non_decreasing(nest: LoopNest, depth: int, key: tuple[str, ...],
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
