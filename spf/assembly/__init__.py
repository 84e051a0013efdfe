"""How a kernel assembles a sparse output of unknown sparsity (paper Sec. 4, 8.5).

The output's storage order comes from its layout (:mod:`spf.front.storage`).  Z3 decides how much
of it the loop nest already produces in order (:mod:`.order`): the longest prefix of the
storage-order coordinates that never decreases from one statement instance to the next (with
the input layouts' properties; a find that may enumerate matches out of position order counts
as unordered, and so does a prefix Z3 leaves undecided within its time limit).  The first
strategy that applies then assembles it, one module each: ``append`` (the whole key in
order), ``workspace`` (a group per ordered prefix, the rest gathered in a dense workspace; a
vector output with no ordered prefix uses one over the whole vector), ``bucket`` (a dense
level over a compressed one filled by a counting scatter) and ``sort`` (every entry sorted).
Every module defining ``STRATEGY`` is found by :data:`STRATEGIES`: adding a strategy touches
no other module.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace

from ..decide.synthesis import Decision
from ..front.storage import storage_of
from ..middle.iteration_space import TensorUse
from ..middle.scan import LoopNest
from .base import AssemblyStrategy
from .model import AssemblyPlan, FunctionRole, Mode
from .order import ordered_prefix

__all__ = [
    "STRATEGIES",
    "AssemblyPlan",
    "FunctionRole",
    "Mode",
    "for_stream",
    "plan_assembly",
    "strategy",
]

_SUPPORT = {"base", "model", "order", "storage_c", "lowering", "merge", "merge_c", "entry_c"}


def _discover() -> dict[Mode, AssemblyStrategy]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _SUPPORT:
            continue
        s = getattr(importlib.import_module(f"{__name__}.{info.name}"), "STRATEGY", None)
        if isinstance(s, AssemblyStrategy):
            found.append(s)
    return {s.mode: s for s in sorted(found, key=lambda s: s.preference)}


STRATEGIES: dict[Mode, AssemblyStrategy] = _discover()


def strategy(plan: AssemblyPlan) -> AssemblyStrategy:
    return STRATEGIES[plan.mode]


def plan_assembly(nest: LoopNest, output: TensorUse, decisions: list[Decision]) -> AssemblyPlan:
    """The first strategy that applies to what Z3 proves about the nest's order."""
    storage = storage_of(output.layout)
    key = tuple(output.indices[d] for d in storage.order)
    extents = tuple(nest.space.extent[i] for i in key)
    ordered, why = ordered_prefix(nest, key, storage.descending, decisions)
    chosen = next(s for s in STRATEGIES.values() if s.applies(ordered, len(key), storage))
    ranged = any(t == output.name for _, t, _ in nest.space.expr.ranges) or \
        _state_spans_output(output, decisions)
    plan = AssemblyPlan(output, storage, key, storage.descending, extents, ordered,
                        chosen.mode, why, ranged=ranged)
    plan = chosen.specialize(nest, plan, decisions)
    return replace(plan, how=chosen.how(plan))


def _state_spans_output(output: TensorUse, decisions: list[Decision]) -> bool:
    """Whether a find keeps its state in an array as long as one of the output's extents
    (a key ranging over an output index, ``B(-i+2, j)`` read by ``R(i)``): the nest reads
    that extent, which a function without the output's struct takes as ``spf_ext``."""
    fields = {output.symbol(f) for f in output.layout.scalar_fields}
    return any(c.array is not None and c.array.extent.names() & fields
               for d in decisions for c in d.candidates)


def for_stream(plan: AssemblyPlan) -> AssemblyPlan:
    """The plan of a term of a sum, which produces a sorted, combined run for the union."""
    mode = STRATEGIES[plan.mode].stream_mode
    if mode is plan.mode:
        return plan
    plan = replace(plan, bucket_sorted=False, unique=False, mode=mode)
    return replace(plan, how=STRATEGIES[mode].how(plan))
