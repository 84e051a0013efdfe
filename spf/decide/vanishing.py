"""Which operands of a product a value expression lets the iteration skip (issue 40).

``abs(A(i,j)) * x(j)`` is 0 wherever A stores nothing exactly when ``abs(0) = 0``; then
the product iterates A's entries as before.  ``exp(A(i,j))`` is 1 there, so every element
of A takes part: A is read densely.  Z3 decides from each function's registered facts
(:mod:`spf.front.functions`), so a function of your own needs only its facts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..concurrency import share_z3_context, symbolic
from ..front.functions import FUNCTIONS
from ..front.rhs import Apply, Call, Node, Number, Op, Ref, text


@dataclass(frozen=True)
class Vanishing:
    """The decision for one value expression: ``zero`` when it is 0 where its tensor is
    absent (its entries suffice); ``why``: the proof or the counterexample, for reports."""

    expression: str
    zero: bool
    why: str


def vanishing(tree: Node) -> Vanishing:
    """Whether ``tree`` is 0 when its access is 0 (Z3 over the reals, functions by their
    facts)."""
    import z3
    shown = text(tree)
    with symbolic:
        share_z3_context()
        facts: list[Any] = []
        a = z3.Real("a")
        value = _z3(tree, a, z3, facts)
        s = z3.Solver()
        s.set("timeout", 2000)
        s.add(*facts, a == 0, value != 0)
        result = s.check()
        if result == z3.unsat:
            return Vanishing(shown, True, f"Z3 proved {shown} = 0 where the tensor stores "
                             "nothing (0), so its entries suffice")
        why = f"Z3 cannot prove {shown} = 0 at 0 (the functions' facts do not say)"
        if result == z3.sat:
            got = s.model().eval(value, model_completion=True)
            s.add(value != got)
            if s.check() == z3.unsat:
                why = f"Z3 proved {shown} = {got} at 0"
    return Vanishing(shown, False, f"{why}: every element takes part, the tensor is read "
                     "densely")


def _z3(n: Node, a: Any, z3: Any, facts: list[Any]) -> Any:
    if isinstance(n, Number):
        return z3.RealVal(str(n.value))
    if isinstance(n, Ref):
        return a if n.indices is not None else z3.Real(f"index_{n.name}")
    if isinstance(n, Call):
        term, more = FUNCTIONS[n.function].z3([_z3(x, a, z3, facts) for x in n.args], z3)
        facts.extend(more)
        return term
    assert isinstance(n, Apply)
    args = [_z3(o, a, z3, facts) for o in n.operands]
    if n.op is Op.NEG:
        return -args[0]
    one, zero = z3.RealVal(1), z3.RealVal(0)
    if n.op is Op.NOT:
        return z3.If(args[0] == 0, one, zero)
    x, y = args
    truth = {Op.LT: lambda: x < y, Op.LE: lambda: x <= y, Op.GT: lambda: x > y,
             Op.GE: lambda: x >= y, Op.EQ: lambda: x == y, Op.NE: lambda: x != y,
             Op.AND: lambda: z3.And(x != 0, y != 0), Op.OR: lambda: z3.Or(x != 0, y != 0)}
    if n.op in truth:
        return z3.If(truth[n.op](), one, zero)      # true is 1, false 0 (numpy's bool)
    return {Op.ADD: lambda: x + y, Op.SUB: lambda: x - y, Op.MUL: lambda: x * y,
            Op.DIV: lambda: x / y}[n.op]()
