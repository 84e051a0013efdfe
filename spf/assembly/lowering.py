"""The C tree of an assembled output's bookkeeping in a kernel: what every strategy shares
(the extents, the cursor, the stream of a term of a sum) around what its own module adds.

The statement hands each entry to one of two targets, by the function's role
(:class:`~.model.FunctionRole`): ``OUTPUT`` (the kernel writes the output tensor: entries
reach its arrays through ``<kernel>_append``, see :mod:`.storage_c`) or ``STREAM`` (a term
of a sum: a sorted (key, value) run the sum merges with the other terms' runs).  Keys are
the output coordinates linearized row-major in storage order (``spf_ext[m]``: extent of
coordinate m; one stored decreasing is flipped).
"""
from __future__ import annotations

from ..back import ctree as t
from . import strategy
from .model import AssemblyPlan, FunctionRole


def declare(plan: AssemblyPlan, names, kernel: str, role: FunctionRole) -> list[t.Node]:
    """Extents of the key coordinates, the cursor (output), the strategy's state."""
    s = strategy(plan)
    out: list[t.Node] = [t.Comment(f"{plan.describe()}.")]
    if role is FunctionRole.OUTPUT or s.needs_extents(plan):
        exts = ", ".join(names.aff(e) for e in plan.extents)
        out.append(t.Declare("int64_t", f"spf_ext[{len(plan.extents)}]", f"{{{exts}}}",
                             const=True, note=f"extents of {', '.join(plan.key)}"))
    if role is FunctionRole.OUTPUT and s.cursor:
        name = plan.output.name
        out += [t.Declare(f"{kernel}_cursor", "spf_cur"),
                t.Call(f"{kernel}_cursor_init(&spf_cur, spf_ext, {name}_size)"),
                t.Declare("int", "spf_status", "0")]
    out += s.declare(plan, role)
    if role is FunctionRole.STREAM:
        out.append(t.Assign(f"{plan.output.name}->n", "0"))
    return out
