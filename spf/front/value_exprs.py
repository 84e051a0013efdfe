"""Value expressions (``abs(A(i,j))``, ``A(i,j) / B(i,j)``) computed by numpy: the reference
values and numpy's result type of each node."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import SpecError
from .functions import function
from .rhs import (
    Apply,
    Call,
    Coefficient,
    Node,
    Number,
    Op,
    Ref,
    apply_op,
    children,
    is_python_number,
    numbers_only,
    text,
)
from .value_types import Kind, ValueType, held_type, result_type


def evaluate(tree: Node, values: Mapping[str, Any]) -> Any:
    """``tree`` computed by numpy with ``values`` (arrays or scalars, by operand name) in
    place of its accesses and scalars; an index's value is int64, as numpy's
    ``np.indices``; literals are Python numbers (weak), as :func:`~.rhs.apply_op` says."""
    if isinstance(tree, (Number, Ref)):
        return _leaf(tree, values)
    args = [evaluate(c, values) for c in children(tree)]
    return _applied(tree, args)


def _leaf(tree: Number | Ref, values: Mapping[str, Any]) -> Any:
    if isinstance(tree, Number):
        return tree.value
    if tree.indices is not None or tree.name in values:
        return values[tree.name]
    return np.ones(np.shape(next(iter(values.values()), 1)), np.int64)


def _applied(tree: Node, args: list[Any]) -> Any:
    if isinstance(tree, Call):
        return function(tree.function).numpy(*args)
    assert isinstance(tree, Apply)
    return apply_op(tree.op, args)


def type_of(tree: Node, types: Mapping[str, ValueType], source: str = "<string>") -> ValueType:
    """numpy's type of ``tree`` computed on values of ``types`` (by operand name; float16
    held as float32); SpecError at the first node numpy refuses (``pow`` of an integer to a
    negative literal power, ``-`` of booleans, an integer literal beyond its type)."""
    with np.errstate(all="ignore"):
        out = _checked(tree, {name: np.ones((1,), vt.dtype) for name, vt in types.items()},
                       source)
    return number_type(out, text(tree))


def check_folded_steps(tree: Node, types: Mapping[str, ValueType], source: str) -> None:
    """SpecError where the expansion's product can differ from numpy's steps as written: a
    product's numbers are one coefficient and its factors are multiplied in the product's
    final type, so an integer product, negation or sum of them that numpy computes (and
    wraps) in its own type before a number, index value or factor of another type multiplies
    or divides it (``x(i) * x(i) * 2.0``, ``x(i) * 5 / 5``, ``-x(i) / 2`` of integers) is
    refused; nodes computed as written (functions, comparisons, a division by a tensor) are
    not expanded, nor checked, nor are numbers (numpy's value)."""
    if not isinstance(tree, Apply) or tree.op not in _FOLDED or numbers_only(tree) or \
            (tree.op is Op.DIV and not isinstance(tree.operands[1], Number)):
        return
    folded = tree.operands[:1] if tree.op is Op.DIV else tree.operands
    _check_truth_sums(tree, folded, types, source)
    if tree.op in (Op.MUL, Op.DIV):
        mine = type_of(tree, types, source)
        for o in (c for f in folded for c in _summands(f)):
            own = type_of(o, types, source) if _may_wrap(o) else mine
            if own != mine and own.kind in (Kind.INT, Kind.UINT):
                raise SpecError(
                    f"{text(o)} is {own.name} in numpy and may wrap there before "
                    f"{text(tree)} computes in {mine.name}; spf multiplies a product's "
                    f"numbers and factors in one type ({mine.name}), so the result could "
                    f"differ: put a {mine.name} operand leftmost ('2.0 * x(i) * x(i)': "
                    f"numpy computes every step in it) or compute {text(o)} into a tensor "
                    "of its own",
                    source, tree.line, tree.column)
    for o in folded:
        check_folded_steps(o, types, source)


_FOLDED = (Op.ADD, Op.SUB, Op.NEG, Op.MUL, Op.DIV)      # what the expansion distributes


def _check_truth_sums(tree: Apply, folded: Sequence[Node], types: Mapping[str, ValueType],
                      source: str) -> None:
    """SpecError for a sum of booleans inside arithmetic of another type (``x(i) - (a(i) +
    b(i))``): numpy's ``+`` of booleans is a logical or, the expansion adds its terms (2
    where both hold); inside arithmetic of booleans both are the same truth."""
    for o in folded:
        if not (isinstance(o, Apply) and o.op is Op.ADD and not numbers_only(o)):
            continue
        own = type_of(o, types, source)
        mine = type_of(tree, types, source)
        if own.kind is Kind.BOOL and mine.kind is not Kind.BOOL:
            a, b = (text(x) for x in o.operands)
            raise SpecError(
                f"{text(o)} is a sum of booleans, which numpy computes as a logical or "
                f"before {text(tree)} computes in {mine.name}; spf adds a sum's terms (2 where "
                f"both hold), so the result could differ: write ({a} or {b}) for numpy's, "
                f"or compute {text(o)} into a tensor of its own", source, o.line, o.column)


def _summands(n: Node) -> list[Node]:
    """The operands of the sum ``n`` (``n`` itself if it is none): each is a term of its own,
    multiplied by what multiplies the sum (``(x(i) * x(i) + 1.5) * 2.0``)."""
    if isinstance(n, Apply) and n.op in (Op.ADD, Op.SUB) and not numbers_only(n):
        return [s for o in n.operands for s in _summands(o)]
    return [n]


def _may_wrap(n: Node) -> bool:
    """Whether integer arithmetic of ``n`` may wrap (a product other than by 1, a negation,
    a sum holding one of them), before :func:`check_folded_steps`'s type change."""
    if not isinstance(n, Apply) or n.op not in (Op.ADD, Op.SUB, Op.NEG, Op.MUL) or \
            numbers_only(n):
        return False            # numbers: numpy's value, as numpy computes it
    if n.op is Op.NEG:
        return True
    unit = [isinstance(o, Number) and type(o.value) is int and o.value == 1 for o in n.operands]
    return (n.op is Op.MUL and not any(unit)) or any(map(_may_wrap, n.operands))


def number_type(value: Any, what: str) -> ValueType:
    """numpy's type of ``value`` (an array, a numpy scalar or a Python number: an integer
    beyond int64 is numpy's Python int, next to nothing else a float)."""
    if is_python_number(value) and isinstance(value, int) and not -2 ** 63 <= value < 2 ** 64:
        return result_type(weak=(float(value),))
    return held_type(np.asarray(value).dtype, what)


def _checked(tree: Node, values: Mapping[str, Any], source: str) -> Any:
    """:func:`evaluate`, numpy's refusal of a node raised as a SpecError at it."""
    if isinstance(tree, (Number, Ref)):
        return _leaf(tree, values)
    args = [_checked(c, values, source) for c in children(tree)]
    try:
        return _applied(tree, args)
    except (TypeError, ValueError, ArithmeticError) as e:
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
    and divides by its denominator, as written).  A coefficient's size is a literal: its
    sign may be numpy's negative of the product, which wraps in an unsigned type (``-(256 *
    x(j))``); a negative one that fits as it is may be the literal ``-N`` (``x(i) *
    -9223372036854775808`` of int64: the written expression's check refuses ``-(N * x(i))``
    where numpy does)."""
    size = -coefficient if coefficient < 0 else coefficient
    steps = ((np.multiply, size.numerator), (np.true_divide, size.denominator)) \
        if isinstance(size, Fraction) else ((np.multiply, size),)
    ones = np.ones((1,), result_type(*types).dtype)
    for ufunc, part in steps:
        signs = (1, -1) if coefficient < 0 and ufunc is np.multiply else (1,)
        refusals = [_refusal_of(ufunc, ones, sign * part) for sign in signs]
        if part == 1 or None in refusals:
            continue
        kind = "float64" if ones.dtype.kind in "fc" else ones.dtype.name
        e = refusals[0]
        raise SpecError(f"{what}: the integer {part} does not fit {kind}, the type numpy "
                        f"computes it in (numpy raises {type(e).__name__}: {e})", source)


def _refusal_of(ufunc: np.ufunc, ones: np.ndarray, number: Any) -> Exception | None:
    """numpy's refusal of ``ufunc`` on ``ones`` and the literal ``number``, None if none."""
    try:
        with np.errstate(all="ignore"):
            ufunc(ones, number)
    except (OverflowError, TypeError, ValueError) as e:
        return e
    return None
