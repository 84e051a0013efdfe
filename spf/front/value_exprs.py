"""Value expressions (``abs(A(i,j))``, ``A(i,j) / B(i,j)``) computed by numpy: the reference
values and numpy's result type of each node."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .functions import FUNCTIONS
from .rhs import Apply, Call, Node, Number, Op, Ref, text
from .value_types import ValueType, held_type


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
        return FUNCTIONS[tree.function].numpy(*(evaluate(a, values) for a in tree.args))
    assert isinstance(tree, Apply)
    return UFUNCS[tree.op](*(evaluate(o, values) for o in tree.operands))


UFUNCS = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
          Op.NEG: np.negative, Op.LT: np.less, Op.LE: np.less_equal, Op.GT: np.greater,
          Op.GE: np.greater_equal, Op.EQ: np.equal, Op.NE: np.not_equal,
          Op.AND: np.logical_and, Op.OR: np.logical_or, Op.NOT: np.logical_not}


def type_of(tree: Node, types: Mapping[str, ValueType]) -> ValueType:
    """numpy's type of ``tree`` computed on values of ``types`` (by operand name; float16
    held as float32)."""
    with np.errstate(all="ignore"):
        out = evaluate(tree, {name: np.ones((1,), vt.dtype) for name, vt in types.items()})
    return held_type(np.asarray(out).dtype, text(tree))
