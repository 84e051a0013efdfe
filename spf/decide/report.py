"""The report of a plan: the iteration space, the loop nest level by level, the assembly,
every find with the chosen template, its arguments, the other valid ones and why the rest were
rejected, and the Z3 queries left undecided (``Kernel.report()``)."""
from __future__ import annotations

from collections.abc import Sequence

from ..middle.scan import LevelKind, LoopNest
from .plan import Plan


def plan_report(plan: Plan, z3_timeout_ms: int, order_why: Sequence[str] = ()) -> str:
    """The plan of one product kernel, as text (``order_why``: why the default loop order
    moved loops)."""
    space, nest = plan.space, plan.nest
    lines = [f"kernel: {space.expr}"]
    for use in space.uses:
        lines.append(f"  {use.name}: {use.layout.name} {use.relation()}")
    lines += [f"warning: {w}" for w in plan.guard_loop_warnings()]
    lines.append(f"iteration space: {space}")
    if space.expr.mask:
        lines.append(f"mask: {space.expr.mask} (structural): one more operand, intersected; "
                     f"only its entries of {space.expr.output.tensor} are computed, its values "
                     "are not read")
    if not plan.semiring.is_plus_times:
        lines.append(f"semiring: {plan.semiring.describe()}")
    lines.append(f"loop order: {', '.join(nest.schedule)}")
    lines.extend(f"  order: {why}" for why in order_why)
    if plan.order_why:
        lines.append(f"  order: {plan.order_why}")
    lines += _levels(nest)
    if plan.assembly:
        lines.append(f"assembly: {plan.assembly.describe()}")
    if plan.vector or plan.no_simd:
        lines.append(f"simd: {plan.vector.why if plan.vector else plan.no_simd}")
    for d in plan.decisions:
        lines += _decision(nest, d)
    if nest.z3.undecided:
        lines.append(f"Z3 queries left undecided (limit {z3_timeout_ms} ms per query; "
                     "z3_timeout_ms raises it), the safe choice kept:")
        lines.extend(f"  {entry}" for entry in nest.z3.undecided)
    return "\n".join(lines)


def _levels(nest: LoopNest) -> list[str]:
    lines = []
    for lv in nest.levels:
        if lv.kind is LevelKind.LOOP:
            lo = ", ".join(f"{a}" if d == 1 else f"ceil(({a})/{d})" for a, d in lv.lower)
            hi = ", ".join(f"{a}" if d == 1 else f"floor(({a})/{d})" for a, d in lv.upper)
            lines.append(f"  loop {lv.var}: max({lo}) <= {lv.var} <= min({hi})")
        elif lv.kind is LevelKind.ASSIGN:
            lines.append(f"  assign {lv.var} = {lv.expr}")
        else:
            lines.append(f"  read {lv.call}")
        for g in lv.guards:
            lines.append(f"    guard: {g}"
                         + ("  (find: guard loop)" if lv.kind is LevelKind.READ and g.is_eq
                            else ""))
        for g in lv.dropped:
            lines.append(f"    dropped: {g}  (implied by inner bounds and layout properties)")
    lines += [f"  statement guard: {g}" for g in nest.statement_guards]
    return lines


def _decision(nest: LoopNest, d) -> list[str]:
    lines = [f"find {d.find.use.name} at {d.find.describe()} (requested: {d.requested})"]
    if d.chosen:
        c = d.chosen
        lines.append(f"  chosen: {c.describe()}")
        if c.stateful:
            where = (f"above loop {nest.levels[c.init_level].var}"
                     if c.init_level is not None and c.init_level < d.find.level
                     else "before each search")
            lines.append(f"  state initialised {where}"
                         + (f", one per value of {c.array_key}" if c.array_key else ""))
        lines.append(f"  template arguments: range [{d.find.lo}, {d.find.hi}], "
                     f"key ({', '.join(str(k) for k, _ in d.find.keys)}), "
                     f"target ({', '.join(str(e) for _, e in d.find.keys)})")
    else:
        lines.append("  chosen: guard loop")
    for c in d.alternatives:
        lines.append(f"  run-time alternative: {c.describe()} (cost model in the generated C)")
    for name, choice in d.valid.items():
        if choice is not d.chosen and choice not in d.alternatives and name != "loop":
            lines.append(f"  also valid: {choice.describe()}")
    for name, why in d.rejected.items():
        lines.append(f"  rejected {name}: {why}".replace("\n", "\n    "))
    return lines
