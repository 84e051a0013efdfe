"""Value expressions (``abs(A(i,j))``, ``A(i,j) / B(i,j)``) computed by numpy: the reference
values and numpy's result type of each node."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import SpecError
from .functions import function
from .rhs import Apply, Call, Coefficient, Node, Number, Op, Ref, children, text
from .value_types import ValueType, held_type, result_type


def evaluate(tree: Node, values: Mapping[str, Any]) -> Any:
    """``tree`` computed by numpy with ``values`` (arrays or scalars, by operand name) in
    place of its accesses; an index's value is int64, as numpy's ``np.indices``."""
    if isinstance(tree, Number):
        return tree.value
    if isinstance(tree, Ref):
        if tree.indices is not None:
            return values[tree.name]
        return np.ones(np.shape(next(iter(values.values()), 1)), np.int64)
    if isinstance(tree, Call):
        return function(tree.function).numpy(*(evaluate(a, values) for a in tree.args))
    assert isinstance(tree, Apply)
    return UFUNCS[tree.op](*(evaluate(o, values) for o in tree.operands))


UFUNCS = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
          Op.NEG: np.negative, Op.LT: np.less, Op.LE: np.less_equal, Op.GT: np.greater,
          Op.GE: np.greater_equal, Op.EQ: np.equal, Op.NE: np.not_equal,
          Op.AND: np.logical_and, Op.OR: np.logical_or, Op.NOT: np.logical_not}


def type_of(tree: Node, types: Mapping[str, ValueType], source: str = "<string>") -> ValueType:
    """numpy's type of ``tree`` computed on values of ``types`` (by operand name; float16
    held as float32); SpecError at the first node numpy refuses (``pow`` of an integer to a
    negative literal power, ``-`` of booleans, an integer literal beyond its type)."""
    with np.errstate(all="ignore"):
        out = _checked(tree, {name: np.ones((1,), vt.dtype) for name, vt in types.items()},
                       source)
    return held_type(np.asarray(out).dtype, text(tree))


def _checked(tree: Node, values: Mapping[str, Any], source: str) -> Any:
    """:func:`evaluate`, numpy's refusal of a node raised as a SpecError at it."""
    if isinstance(tree, (Number, Ref)):
        return evaluate(tree, values)
    args = [_checked(c, values, source) for c in children(tree)]
    assert isinstance(tree, (Call, Apply))
    ufunc = function(tree.function).numpy if isinstance(tree, Call) else UFUNCS[tree.op]
    try:
        return ufunc(*args)
    except (TypeError, ValueError, OverflowError, ArithmeticError) as e:
        raise SpecError(f"{text(tree)}: {_refusal(tree, args, e)}", source, tree.line,
                        tree.column) from None


def _refusal(tree: Node, args: list[Any], e: Exception) -> str:
    """Why numpy refuses ``tree`` on values of the types of ``args``."""
    typed = [a.dtype.name for a in args if isinstance(a, np.ndarray)]
    big = next((c.value for c in children(tree) if isinstance(c, Number)
                and isinstance(c.value, int) and isinstance(e, OverflowError)), None)
    if big is not None:
        kind = "a float" if any(np.dtype(t).kind in "fc" for t in typed) else \
            " and ".join(dict.fromkeys(typed)) or "int64"
        return (f"the integer {big} does not fit {kind}, the type numpy computes it in "
                f"(numpy raises OverflowError: {e})")
    on = f" on {' and '.join(dict.fromkeys(typed))} values" if typed else ""
    return f"numpy refuses it{on} ({type(e).__name__}: {e})"


def check_coefficient(coefficient: Coefficient, types: Sequence[ValueType], what: str,
                      source: str) -> None:
    """SpecError when numpy refuses the literal ``coefficient`` of the product ``what`` of
    values of ``types``: an integer beyond the product's integer type (numpy's
    OverflowError), or beyond float64 (a division by an integer multiplies by its numerator
    and divides by its denominator, as written)."""
    steps = ((np.multiply, coefficient.numerator), (np.true_divide, coefficient.denominator)) \
        if isinstance(coefficient, Fraction) else ((np.multiply, coefficient),)
    ones = np.ones((1,), result_type(*types).dtype)
    for ufunc, part in steps:
        if part == 1:
            continue
        try:
            with np.errstate(all="ignore"):
                ufunc(ones, part)
        except (OverflowError, TypeError, ValueError) as e:
            kind = "float64" if ones.dtype.kind in "fc" else ones.dtype.name
            raise SpecError(f"{what}: the integer {part} does not fit {kind}, the type numpy "
                            f"computes it in (numpy raises {type(e).__name__}: {e})",
                            source) from None
