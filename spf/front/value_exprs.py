"""Value expressions of one tensor (``abs(A(i,j))``, ``exp(A(i,j) / 2)``) computed by numpy:
the reference values and numpy's result type of each node."""
from __future__ import annotations

from typing import Any

import numpy as np

from .functions import FUNCTIONS
from .rhs import Apply, Call, Node, Number, Op, Ref, text
from .value_types import ValueType, held_type


def evaluate(tree: Node, value: Any) -> Any:
    """``tree`` computed by numpy with ``value`` (an array or scalar) in place of its
    access."""
    if isinstance(tree, Number):
        return tree.value
    if isinstance(tree, Ref):        # the access, or an index's value (int64, as numpy's)
        return value if tree.indices is not None else np.ones(np.shape(value), np.int64)
    if isinstance(tree, Call):
        return FUNCTIONS[tree.function].numpy(*(evaluate(a, value) for a in tree.args))
    assert isinstance(tree, Apply)
    args = [evaluate(o, value) for o in tree.operands]
    return UFUNCS[tree.op](*args)


UFUNCS = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
          Op.NEG: np.negative, Op.LT: np.less, Op.LE: np.less_equal, Op.GT: np.greater,
          Op.GE: np.greater_equal, Op.EQ: np.equal, Op.NE: np.not_equal,
          Op.AND: np.logical_and, Op.OR: np.logical_or, Op.NOT: np.logical_not}


def type_of(tree: Node, vt: ValueType) -> ValueType:
    """numpy's type of ``tree`` computed on values of type ``vt`` (float16 held as
    float32)."""
    with np.errstate(all="ignore"):
        out = evaluate(tree, np.ones((1,), vt.dtype))
    return held_type(np.asarray(out).dtype, text(tree))
