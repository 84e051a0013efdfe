"""Which operands of a product a value expression lets the iteration skip (issue 40).

``abs(A(i,j)) * x(j)`` is 0 wherever A stores nothing exactly when ``abs(0) = 0``; then
the product iterates A's entries as before.  ``exp(A(i,j))`` is 1 there, so every element
of A takes part: A is read densely.  An expression of several operands is decided per
operand, whatever the others hold (``where(B > 0, A, 0)``: both keep their entries;
``max(A, B)``: neither).  Z3 decides from each function's registered facts
(:mod:`spf.front.functions`), so a function of your own needs only its facts; a division by
an operand's absent entries is found the same way (:func:`divides_by_absent`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..concurrency import share_z3_context, symbolic
from ..errors import SpecError
from ..front.functions import function
from ..front.rhs import (
    Apply,
    Call,
    Node,
    Op,
    Ref,
    children,
    is_finite,
    number_value,
    numbers_only,
    operands,
    text,
)


@dataclass(frozen=True)
class Vanishing:
    """The decision for one operand of a value expression: ``zero`` when the expression is
    0 wherever ``operand`` stores nothing, whatever the others hold (its entries suffice);
    ``why``: the proof or the counterexample, for reports."""

    expression: str
    operand: str
    zero: bool
    why: str


def vanishing(tree: Node, operand: str) -> Vanishing:
    """Whether ``tree`` is 0 when ``operand``'s value is 0, for every value of the other
    operands and indices (Z3 over the reals, functions by their facts)."""
    import z3
    shown = text(tree)
    where = f"where {operand} stores nothing"
    if not_finite(tree):
        return Vanishing(shown, operand, False, f"{shown} holds the number inf or nan, which "
                         f"Z3's reals do not model (0 * inf is nan): every element of "
                         f"{operand} takes part (it is read densely)")
    with symbolic:
        share_z3_context()
        s, value = _solver(tree, [operand], z3)
        s.push()
        s.add(value != 0)
        result = s.check()
        if result == z3.unsat:
            return Vanishing(shown, operand, True, f"Z3 proved {shown} = 0 {where} (0), so "
                             f"{operand}'s entries suffice")
        why = f"Z3 cannot prove {shown} = 0 {where} (no fact determines it)"
        if result == z3.sat:
            model = s.model()
            got = model.eval(value, model_completion=True)
            others = ", ".join(f"{d.name()[4:]} = {model[d]}" for d in model.decls()
                               if d.name().startswith("spf_") and d.arity() == 0
                               and d.name()[4:] != operand)
            s.pop()                  # is that value forced, whatever the others hold?
            s.add(value != got)
            if s.check() == z3.unsat:
                why = f"Z3 proved {shown} = {got} {where}"
            elif others:
                why = f"Z3 found {shown} = {got} {where} ({others})"
    return Vanishing(shown, operand, False, f"{why}: every element of {operand} takes part "
                     "(it is read densely)")


def vanishing_jointly(tree: Node, names: list[str]) -> Vanishing | None:
    """The decision that ``tree`` is 0 where every operand in ``names`` stores nothing (Z3:
    then the union of their entries suffices, ``max(A, B)``); None when Z3 cannot prove it."""
    import z3
    shown = text(tree)
    listed = ("both " if len(names) == 2 else "all of ") + \
        (", ".join(names[:-1]) + " and " + names[-1])
    if not_finite(tree):
        return None
    with symbolic:
        share_z3_context()
        s, value = _solver(tree, names, z3)
        s.add(value != 0)
        if s.check() != z3.unsat:
            return None
    return Vanishing(shown, " and ".join(names), True, f"Z3 proved {shown} = 0 where "
                     f"{listed} store nothing, so the union of their entries suffices "
                     "(iterated by a merge of their storage)")


def _operand(name: str, z3: Any) -> Any:
    return z3.Real(f"spf_{name}")


def _solver(tree: Node, zeroed: list[str], z3: Any) -> tuple[Any, Any]:
    """A solver knowing the functions' facts and the operands ``zeroed`` at 0, and the Z3
    term of ``tree`` (under the :data:`symbolic` lock)."""
    facts: list[Any] = []
    value = _z3(tree, z3, facts)
    s = z3.Solver()
    s.set("timeout", 2000)
    s.add(*facts, *[_operand(name, z3) == 0 for name in zeroed])
    return s, value


def not_finite(n: Node) -> bool:
    """Whether ``n`` holds the number inf or nan (``A(i,j) * inf``), or an expression of
    numbers whose value is (``A(i,j) * log(0)``)."""
    if numbers_only(n):
        return not is_finite(_number(n))
    return any(not_finite(c) for c in children(n))


def _number(n: Node) -> Any:
    """The value of ``n``, an expression of numbers; nan where numpy refuses it (the typing
    of the statement reports that at its line and column)."""
    try:
        return number_value(n, "<string>")
    except SpecError:
        return math.nan


def _z3(n: Node, z3: Any, facts: list[Any]) -> Any:
    if numbers_only(n):       # its value; inf or nan: any real (a divisor may be 0)
        value = _number(n)
        if not is_finite(value):
            return z3.FreshReal("spf_nf")
        exact = value.item() if isinstance(value, np.generic) else value
        return z3.RealVal(str(int(exact) if isinstance(exact, (bool, int)) else exact))
    if isinstance(n, Ref):           # an operand's value, or an index's (another variable)
        return _operand(n.name, z3) if n.indices is not None else z3.Real(f"index_{n.name}")
    if isinstance(n, Call):
        term, more = function(n.function).z3([_z3(x, z3, facts) for x in n.args], z3)
        facts.extend(more)
        return term
    assert isinstance(n, Apply)
    args = [_z3(o, z3, facts) for o in n.operands]
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


def divides_by_absent(tree: Node, dense: set[str]) -> str:
    """Why ``tree`` may divide by 0 where the operands in ``dense`` (read densely) store
    nothing ("" when no division's divisor can be 0 there: ``2 / (A(i,j) - 3)``)."""
    import z3
    for n in _divisions(tree):
        divisor = n.operands[1]
        absent = [name for name in operands(divisor) if name in dense]
        if not absent:
            continue
        with symbolic:
            share_z3_context()
            s, value = _solver(divisor, absent, z3)
            s.add(value == 0)
            if s.check() != z3.unsat:
                return (f"it divides by {text(divisor)}, which is 0 where "
                        f"{' and '.join(absent)} store{'s' if len(absent) == 1 else ''} "
                        "nothing")
    return ""


def _divisions(n: Node) -> list[Apply]:
    mine = [n] if isinstance(n, Apply) and n.op is Op.DIV else []
    return mine + [d for c in children(n) for d in _divisions(c)]
