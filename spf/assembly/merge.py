"""Merge assembly of a sum: when every term of ``C = A + B - ...`` is one operand read in the
output's storage order, the operands' own arrays are already the sorted runs of the union.

A term is such a run when (Z3, with the operand layout's properties) its nest produces the
output's whole storage-order key non-decreasing and no two of its statement instances share a
key, and the operand's storage levels are the output's levels (same kinds, the same logical
indices per level, the same directions).  The sum then merges the operands level by level
(:mod:`.merge_c`), like a hand-written two-pointer merge of two CSR matrices: no term copies
its entries into a run first.  Any other term keeps the general path (sorted runs of keys).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..decide.synthesis import Decision
from ..front.kernel_spec import Expr
from ..front.layout import Layout
from ..front.rhs import is_sign
from ..front.storage import Storage, storage_or_none
from ..middle.scan import LoopNest
from .model import AssemblyPlan
from .order import non_decreasing, unordered_loops


@dataclass(frozen=True)
class Run:
    """A term whose entries are an operand's stored entries in the output's storage order."""

    operand: str            # the tensor, also its C parameter
    layout: Layout
    storage: Storage
    sign: int               # -1: the term is subtracted
    why: str                # the proof, for reports
    subtracted: bool = False    # its sign (or part of it) is the sum's: numpy's in the sum's
    #                             type (``D(i,j) - A(i,j)``), not the operand's


def operand_run(expr: Expr, layouts: Mapping[str, Layout], nest: LoopNest,
                decisions: Sequence[Decision], assembly: AssemblyPlan) -> Run | None:
    """The run a term reads directly from its operand, or None when it needs one built."""
    tensors = [a for a in expr.factors if a.indices]
    if len(tensors) != 1 or len(expr.factors) != 1 or decisions or \
            not is_sign(expr.coefficient) or tensors[0].value is not None:
        return None         # a product, a scalar factor, a coefficient or a find
    acc = tensors[0]
    layout = layouts[acc.tensor]
    storage = storage_or_none(layout)
    if storage is None or layout.part is not None or \
            not same_levels(storage, acc.indices, assembly.storage, expr.output.indices):
        return None
    if assembly.ordered < len(assembly.key):
        return None
    unique = non_decreasing(nest, len(nest.levels), (), (), unordered_loops(decisions),
                            statements_only=True, equal=assembly.key,
                            fallback="assumed not: the term builds a run")
    if unique.result != "unsat":
        return None
    proof = "; ".join(unique.used) if unique.used else "affine constraints"
    same = f" ({proof})" if proof not in assembly.why else ""
    return Run(acc.tensor, layout, storage, int(expr.coefficient),
               f"{assembly.why}, and no two entries share coordinates{same}", acc.subtracted)


def same_levels(storage: Storage, indices: tuple[str, ...], out: Storage,
                out_indices: tuple[str, ...]) -> bool:
    """Whether ``storage`` (read with ``indices``) has the levels of ``out``: the same kind,
    the same logical indices and directions at every level."""
    if len(storage.levels) != len(out.levels) or storage.descending != out.descending:
        return False
    for mine, theirs in zip(storage.levels, out.levels):
        if mine.kind is not theirs.kind or (mine.count is None) != (theirs.count is None):
            return False
        if [indices[d] for d, _ in mine.coords] != [out_indices[d] for d, _ in theirs.coords]:
            return False
    return True
