"""The C of a value expression (``abs(A(i,j))``, ``A(i,j) / B(i,j)``): each node computed in
numpy's type for it (:func:`spf.front.value_exprs.type_of`), its operands cast to that type
where C's promotion would differ."""
from __future__ import annotations

from collections.abc import Mapping

from ..front.functions import FUNCTIONS
from ..front.rhs import COMPARISONS, LOGIC, Apply, Call, Node, Number, Op, Ref, number_text
from ..front.value_exprs import type_of
from ..front.value_types import Kind, ValueType, result_type


def value_c(tree: Node, reads: Mapping[str, str], types: Mapping[str, ValueType]) -> str:
    """``tree`` in C: ``reads`` the C of each operand's value (by name), ``types`` their
    value types."""
    if isinstance(tree, Number):
        return number_text(tree.value)
    if isinstance(tree, Ref):
        return reads[tree.name] if tree.indices is not None else tree.name   # an index
    mine = type_of(tree, types)
    if isinstance(tree, Call):
        args = [_in(a, reads, types, mine) for a in tree.args]
        return f"(({mine.c}){FUNCTIONS[tree.function].c(args, mine)})"
    assert isinstance(tree, Apply)
    if tree.op in LOGIC:         # truth values: nonzero is true
        truths = [f"({value_c(o, reads, types)} != 0)" for o in tree.operands]
        return f"(!{truths[0]})" if tree.op is Op.NOT else \
            f"({truths[0]} {'&&' if tree.op is Op.AND else '||'} {truths[1]})"
    if tree.op in COMPARISONS:   # compared in the operands' common type, as numpy's
        common = result_type(*(type_of(o, types) for o in tree.operands
                               if not isinstance(o, Number)))
        args = [_in(o, reads, types, common) for o in tree.operands]
        return f"(({mine.c})({args[0]} {tree.op.value} {args[1]}))"
    args = [_in(o, reads, types, mine) for o in tree.operands]
    if tree.op is Op.NEG:
        return f"(-{args[0]})"
    return f"({args[0]} {tree.op.value} {args[1]})"


def _in(n: Node, reads: Mapping[str, str], types: Mapping[str, ValueType],
        parent: ValueType) -> str:
    """Operand ``n`` of a node of type ``parent``: cast to it when its own type differs
    (an integer argument of sqrt computes in double, as numpy's), except a complex value
    under a real result (abs of a complex number)."""
    code = value_c(n, reads, types)
    if isinstance(n, Number):
        return code
    own = type_of(n, types)
    if own == parent or (own.kind is Kind.COMPLEX and parent.kind is not Kind.COMPLEX):
        return code
    return f"(({parent.c}){code})"
