"""The right-hand side of tensor index notation as a tree, and its sum of products.

Grammar (``not``, ``and``, ``or`` and the comparisons bind loosest, as in Python)::

    rhs     := disj
    disj    := conj {'or' conj}
    conj    := neg {'and' neg}
    neg     := 'not' neg | cmp
    cmp     := sum [('<' | '<=' | '>' | '>=' | '==' | '!=') sum]
    sum     := product {('+' | '-') product}
    product := unary {('*' | '/') unary}
    unary   := ('-' | '+') unary | atom
    atom    := NUMBER | FUNCTION '(' rhs {',' rhs} ')' | name ['(' [index {',' index}] ')']
             | '(' rhs ')'
    index   := sum                          (an index name, or an affine expression of
                                             index names and integers: ``i+k``, ``2*j-1``)

:func:`parse_rhs` builds the tree; :func:`sum_of_products` expands it into terms
``coefficient * factor * ...`` (literals, unary minus, parentheses and divisions distribute;
each term is summed over its own indices that the output lacks), and names the first
construct it cannot express that way, at its line and column.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import SpecError
from .functions import FUNCTIONS, function
from .syntax import Parser, Token
from .terms import Aff, Constraint


class Op(Enum):
    """The operators of the expression language."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    NEG = "neg"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="
    AND = "and"
    OR = "or"
    NOT = "not"


COMPARISONS = (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE)

# numpy's operator of each Op (on arrays and numpy scalars)
UFUNCS = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
          Op.NEG: np.negative, Op.LT: np.less, Op.LE: np.less_equal, Op.GT: np.greater,
          Op.GE: np.greater_equal, Op.EQ: np.equal, Op.NE: np.not_equal,
          Op.AND: np.logical_and, Op.OR: np.logical_or, Op.NOT: np.logical_not}
# Python's, on Python numbers (as a Python expression of literals computes)
_PYTHON_OPS: dict[Op, Callable[..., Any]] = {
    Op.ADD: operator.add, Op.SUB: operator.sub, Op.MUL: operator.mul, Op.DIV: operator.truediv,
    Op.NEG: operator.neg, Op.LT: operator.lt, Op.LE: operator.le, Op.GT: operator.gt,
    Op.GE: operator.ge, Op.EQ: operator.eq, Op.NE: operator.ne}


MAX_TERMS = 64      # products of a right-hand side once parentheses are expanded

# names that are numbers (float64, as numpy's np.inf and np.nan): reserved, no tensor's
NUMBER_NAMES = {"inf": math.inf, "nan": math.nan}


@dataclass(frozen=True)
class Node:
    """A node of the right-hand side, at ``line``:``column`` of its source."""

    line: int
    column: int


@dataclass(frozen=True)
class Number(Node):
    value: int | float


@dataclass(frozen=True)
class Ref(Node):
    """``tensor(indices...)``; ``indices`` is None for a bare name (a scalar or an index).
    An index that is an affine expression (``I(i+k, j)``) is named by :func:`derived_name`
    and ``arithmetic`` holds (name, expression) for each such index."""

    name: str
    indices: tuple[str, ...] | None
    arithmetic: tuple[tuple[str, Aff], ...] = ()


@dataclass(frozen=True)
class Apply(Node):
    """An operator applied to its operands (one for ``neg``/``not``, two otherwise)."""

    op: Op
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Call(Node):
    function: str
    args: tuple[Node, ...]


def parse_rhs(p: Parser) -> Node:
    """The right-hand side at ``p``'s cursor (the caller checks what follows)."""
    return _disj(p)


def _binary(p: Parser, ops: tuple[Op, ...], operand) -> Node:
    left = operand(p)
    while True:
        tok = p.tok
        op = next((o for o in ops if p.peek(o.value)), None)
        if op is None:
            return left
        p.i += 1
        left = Apply(tok.line, tok.column, op, (left, operand(p)))


def _disj(p: Parser) -> Node:
    return _binary(p, (Op.OR,), _conj)


def _conj(p: Parser) -> Node:
    return _binary(p, (Op.AND,), _neg)


def _neg(p: Parser) -> Node:
    tok = p.tok
    if tok.kind == "name" and tok.text == "not":
        p.i += 1
        with p.nested():
            return Apply(tok.line, tok.column, Op.NOT, (_neg(p),))
    return _cmp(p)


def _cmp(p: Parser) -> Node:
    left = _sum(p)
    tok = p.tok
    op = next((o for o in COMPARISONS if p.peek(o.value)), None)
    if op is None:
        return left
    p.i += 1
    return Apply(tok.line, tok.column, op, (left, _sum(p)))


def _sum(p: Parser) -> Node:
    return _binary(p, (Op.ADD, Op.SUB), _product)


def _product(p: Parser) -> Node:
    return _binary(p, (Op.MUL, Op.DIV), _unary)


def _unary(p: Parser) -> Node:
    tok = p.tok
    if p.accept("-"):
        with p.nested():
            return Apply(tok.line, tok.column, Op.NEG, (_unary(p),))
    if p.accept("+"):
        with p.nested():
            return _unary(p)
    return _atom(p)


def _atom(p: Parser) -> Node:
    tok = p.tok
    if tok.kind == "num":
        p.i += 1
        return Number(tok.line, tok.column, _number(p, tok))
    if p.accept("("):
        with p.nested():
            inner = _disj(p)
        p.expect(")", "')' closing the parenthesis")
        return inner
    if tok.kind == "name" and tok.text == "not":
        raise p.error("'not' binds more loosely than '*' and '+' (as in Python): write "
                      "(not ...)")
    if tok.kind != "name":
        found = "end of input" if tok.kind == "end" else repr(tok.text)
        raise p.error(f"expected a tensor, a number, a function or '(', found {found}")
    p.i += 1
    if tok.text in NUMBER_NAMES:
        if p.peek("("):
            raise p.error(f"{tok.text!r} is the number {tok.text} (numpy's np.{tok.text}), "
                          "not a tensor or a function", tok)
        return Number(tok.line, tok.column, NUMBER_NAMES[tok.text])
    if "." in tok.text or "'" in tok.text:
        raise p.error(f"name {tok.text!r} must be an identifier", tok)
    if tok.text in FUNCTIONS and p.peek("("):
        p.i += 1
        with p.nested():
            args = [_disj(p)]
            while p.accept(","):
                args.append(_disj(p))
        p.expect(")", f"',' or ')' closing the arguments of {tok.text}()")
        return Call(tok.line, tok.column, tok.text, tuple(args))
    if not p.accept("("):
        return Ref(tok.line, tok.column, tok.text, None)
    indices: list[str] = []
    arithmetic: dict[str, Aff] = {}
    if not p.peek(")"):
        while True:
            aff = _affine(p, _sum(p), tok.text, len(indices) + 1)
            name = _named(p, aff)
            if name is None:
                indices.append(str(aff))
            else:
                indices.append(name)
                arithmetic[name] = aff
            if not p.accept(","):
                break
    p.expect(")", "',' or ')' closing the index list")
    return Ref(tok.line, tok.column, tok.text, tuple(indices), tuple(arithmetic.items()))


def derived_name(aff: Aff) -> str | None:
    """The index name an affine access index stands for: None for a plain index name, else
    ``spf_`` and the expression spelled as an identifier (``i+k``: ``spf_i_p_k``, ``2*j-1``:
    ``spf_2j_m_1``); the same expression is the same name everywhere."""
    if len(aff.terms) == 1 and aff.const == 0 and aff.terms[0][1] == 1:
        return None
    parts: list[str] = []
    for atom, coeff in aff.terms:
        size = abs(coeff)
        parts.append(("m_" if coeff < 0 else "p_" if parts else "") +
                     (str(size) if size != 1 else "") + str(atom))
    if aff.const:
        parts.append(("m_" if aff.const < 0 else "p_" if parts else "") + str(abs(aff.const)))
    return "spf_" + "_".join(parts)


def _named(p: Parser, aff: Aff) -> str | None:
    """:func:`derived_name`, made unique in the statement (``a_p + b`` and ``a + p_b`` would
    both spell ``spf_a_p_p_b``: the second gets a number)."""
    name = p.affine_names.get(aff) or derived_name(aff)
    if name is None or p.affine_names.get(aff) == name:
        return name
    taken = set(p.affine_names.values())
    unique, k = name, 2
    while unique in taken:
        unique, k = f"{name}_{k}", k + 1
    p.affine_names[aff] = unique
    return unique


def _affine(p: Parser, n: Node, tensor: str, position: int) -> Aff:
    """The affine expression of index names and integers an access index is."""
    aff = affine_of(n, lambda name: True)
    if isinstance(aff, Aff):
        return aff
    what, at = aff
    raise SpecError(f"{tensor}'s index {position}: {what}; an index is an affine expression "
                    "of index names and integers (i, i+k, 2*j-1)", p.source, at.line, at.column)


def affine_of(n: Node, is_index: Callable[[str], bool]) -> Aff | tuple[str, Node]:
    """``n`` as an affine expression of index names (the bare names ``is_index`` accepts)
    and integers, or what keeps it from being one and where."""
    if isinstance(n, Number):
        whole = isinstance(n.value, (int, np.integer)) and not isinstance(n.value, bool)
        return Aff.num(int(n.value)) if whole else (f"{n.value!r} is not an integer", n)
    if isinstance(n, Ref):
        if n.indices is not None:
            return (f"the access {text(n)} inside an index (indirect indexing) is not "
                    "supported", n)
        return Aff.var(n.name) if is_index(n.name) else (f"{n.name} is no index", n)
    if not (isinstance(n, Apply) and n.op in (Op.ADD, Op.SUB, Op.NEG, Op.MUL)):
        what = f"the call {n.function}()" if isinstance(n, Call) else \
            f"the operator {n.op.value!r}" if isinstance(n, Apply) else "this construct"
        return (f"{what} is not supported in an index", n)
    parts: list[Aff] = []
    for o in n.operands:
        part = affine_of(o, is_index)
        if not isinstance(part, Aff):
            return part
        parts.append(part)
    if n.op is Op.NEG:
        return -parts[0]
    if n.op is not Op.MUL:
        return parts[0] + parts[1] if n.op is Op.ADD else parts[0] - parts[1]
    const = next((q for q in parts if q.is_const), None)
    if const is None:
        return (f"{text(n)} multiplies two indices (not affine)", n)
    return (parts[1] if const is parts[0] else parts[0]) * const.const


def _number(p: Parser, tok: Token) -> int | float:
    if tok.text.isdigit():
        return int(tok.text)
    value = float(tok.text)
    if value != value or value in (float("inf"), float("-inf")):
        raise p.error(f"number {tok.text} is not finite", tok)
    return value


def text(n: Node) -> str:
    """``n`` written back in the notation (fully parenthesized where it nests)."""
    if isinstance(n, Number):
        return repr(n.value)
    if isinstance(n, Ref):
        return n.name if n.indices is None else \
            f"{n.name}({','.join(_index_text(i, n.arithmetic) for i in n.indices)})"
    if isinstance(n, Call):
        return f"{n.function}({', '.join(text(a) for a in n.args)})"
    assert isinstance(n, Apply)
    if n.op is Op.NEG:
        return f"-{_grouped(n.operands[0])}"
    if n.op is Op.NOT:
        return f"not {_grouped(n.operands[0])}"
    return f" {n.op.value} ".join(_grouped(o) for o in n.operands)


def _index_text(index: str, arithmetic: tuple[tuple[str, Aff], ...]) -> str:
    """An access index as written: its name, or its affine expression."""
    return str(dict(arithmetic).get(index, index)).replace(" ", "")


def _grouped(n: Node) -> str:
    return f"({text(n)})" if isinstance(n, Apply) else text(n)


def accesses(n: Node) -> list[Ref]:
    """The tensor accesses (names with indices) in ``n``, left to right."""
    if isinstance(n, Ref):
        return [n] if n.indices is not None else []
    return [r for c in children(n) for r in accesses(c)]


def called(n: Node) -> list[str]:
    """The functions ``n`` calls."""
    return ([n.function] if isinstance(n, Call) else []) + [f for c in children(n)
                                                           for f in called(c)]


def operands(n: Node) -> list[str]:
    """The operand names ``n`` reads, once each, in order."""
    return list(dict.fromkeys(r.name for r in accesses(n)))


def index_refs(n: Node) -> list[Ref]:
    """The bare names in ``n`` (in a value expression: index values)."""
    if isinstance(n, Ref):
        return [n] if n.indices is None else []
    return [r for c in children(n) for r in index_refs(c)]


def is_python_number(v: Any) -> bool:
    """A Python int or float: numpy promotes it weakly, as a literal (``2.5 * float32`` is
    float32); a bool (a comparison's truth) and a numpy scalar (a function's value) are
    numpy's own types."""
    return isinstance(v, (int, float)) and not isinstance(v, (bool, np.generic))


def apply_op(op: Op, args: Sequence[Any]) -> Any:
    """``op`` on ``args`` as a Python expression computes it: on Python numbers, ``+ - *``,
    ``-``, ``/`` and comparisons are Python's (the result is a Python number, weak as a
    literal is: ``x(i) - (2 - 1)`` is ``x(i) - 1``; a division by zero is numpy's inf or
    nan as a Python float, so ``max(x(i), 1 / 0)`` of float32 is float32); anything else
    is numpy's ufunc."""
    if op in _PYTHON_OPS and all(is_python_number(a) for a in args):
        if op is Op.DIV and args[1] == 0:
            with np.errstate(all="ignore"):
                return float(np.true_divide(float(args[0]), 0.0))
        return _PYTHON_OPS[op](*args)
    return UFUNCS[op](*args)


def numbers_only(n: Node) -> bool:
    """Whether ``n`` is an expression of numbers (no tensor, scalar or index)."""
    return not isinstance(n, Ref) and all(numbers_only(c) for c in children(n))


def number_value(n: Node, source: str) -> Any:
    """The value of ``n``, an expression of numbers only, as numpy computes it with Python
    numbers for the literals (:func:`apply_op`; a function's value is numpy's scalar, whose
    type is strong: ``x(i) * log(2)`` of float32 ``x`` is float64); SpecError at the node
    numpy (or Python) refuses."""
    if isinstance(n, Number):
        return n.value
    args = [number_value(c, source) for c in children(n)]
    try:
        with np.errstate(all="ignore"):
            out = function(n.function).numpy(*args) if isinstance(n, Call) else \
                apply_op(n.op, args) if isinstance(n, Apply) else None
    except (TypeError, ValueError, ArithmeticError) as e:
        raise SpecError(f"{text(n)}: numpy refuses it ({type(e).__name__}: {e})", source,
                        n.line, n.column) from None
    return out[()] if isinstance(out, np.ndarray) else out


@dataclass(frozen=True)
class Factor:
    """A factor of a product: an access, and the expression of its value when it is not
    the value itself (``abs(A(i,j))``, ``A(i,j) / B(i,j)``: a tree of accesses, this one
    the first).  ``in_value``: an access only read by the preceding factor's expression."""

    ref: Ref
    value: Node | None = None
    in_value: bool = False
    floor: tuple[Node, ...] = ()    # sums it passed before a product: numpy computes the
    #                                 product in their type at least (``(D(i) - A(i)) * B(i)``)


Exact = int | float | Fraction      # a Fraction: divided by an integer (exactly)
# a numpy scalar: the value of an expression of numbers that calls a function (``log(2)``,
# strongly typed, as numpy's), made once the expansion is done
Coefficient = Exact | np.number[Any]


class UnitLiteral(int):
    """The literal 1 or -1 as written (``1 * b(i)``): numpy promotes it weakly, so a product
    of booleans times it is int64, as numpy's; a sign alone (``b(i)``, ``-x(i)``) is a
    plain int."""


def times(a: Coefficient, b: Coefficient) -> Exact:
    """The product of two coefficients of the expansion (exact: Python numbers and
    Fractions; numpy's numbers are made at its end only); a literal 1 or -1 stays one."""
    assert not isinstance(a, np.number) and not isinstance(b, np.number)
    out = a * b
    if isinstance(a, UnitLiteral) or isinstance(b, UnitLiteral):
        return UnitLiteral(out) if type(out) is int and out in (1, -1) else out
    return out


def is_sign(c: Coefficient) -> bool:
    """Whether the coefficient ``c`` is only a sign, no literal (``x(i)``, ``-x(i)``, ``x(i) *
    1``: the Python int 1 or -1, which keeps the product's type); any other number is a
    literal numpy promotes (``x(i) * 1.0`` and ``x(i) / 1`` of an int32 ``x`` are float64)."""
    return type(c) is int and c in (1, -1)


def number_text(c: Coefficient) -> str:
    """A coefficient as the notation writes it (``2``, ``2.5``, ``1/3``; a truth as 1 or 0)."""
    if isinstance(c, Fraction):
        return str(c.numerator) if c.denominator == 1 else f"{c.numerator}/{c.denominator}"
    value = c.item() if isinstance(c, np.generic) else c
    return repr(int(value) if isinstance(value, bool) else value)


@dataclass(frozen=True)
class Term:
    """``coefficient * factors[0] * factors[1] ... * index_values...`` (``at``: where it
    starts; an index value is folded into a factor's value expression at the end)."""

    coefficient: Coefficient
    factors: tuple[Factor, ...]
    at: Node
    index_values: tuple[Node, ...] = ()       # expressions of indices (``i``, ``i == j``)
    subtracted: bool = False    # negated by a sum (``D(i) - A(i)``, ``-(D(i) - A(i))``): that
    #                             sign is numpy's in the sum's type, the rest in the product's

    def scaled(self, by: Coefficient) -> Term:
        return replace(self, coefficient=times(self.coefficient, by))

    def subtracted_by_sum(self) -> Term:
        """This term negated where a sum combines it (a binary minus, a minus of a sum)."""
        return replace(self, coefficient=times(self.coefficient, -1),
                       subtracted=not self.subtracted)

    def floored(self, sum_node: Node | None) -> Term:
        """This term as a factor of a product taken after the sum ``sum_node`` (None: none):
        its factors promote to the sum's type, and the sum's sign becomes the product's."""
        if sum_node is None:
            return replace(self, subtracted=False)
        return replace(self, subtracted=False, factors=tuple(
            replace(f, floor=f.floor + (sum_node,)) for f in self.factors))


def is_finite(v: Coefficient) -> bool:
    """Whether the number ``v`` is finite (an integer, a Fraction or a truth always is)."""
    if isinstance(v, (int, Fraction, np.integer, np.bool_)):
        return True
    return bool(np.isfinite(v))


def _folded(t: Term, infinite: bool) -> Term:
    """``t`` with its index values multiplied into its first tensor factor's value
    (``A(i,j) * i`` is one factor: the value ``A(i,j) * i``); a product whose numbers are
    not all finite (``infinite``: ``A(i,j) * x(j) * inf``, ``* log(0)``) is one value, the
    product of its factors times them, as numpy computes it at every point (inf, -inf or
    nan where an operand is 0 too: every sparse operand is read densely)."""
    c = t.coefficient
    if not t.index_values and not infinite:
        return t
    first = t.factors[0]
    if not infinite or all(f.ref.indices is None for f in t.factors):   # scalars: C's inf
        if not t.index_values:
            return t
        value: Node = first.value or first.ref
        for index_value in t.index_values:
            value = Apply(index_value.line, index_value.column, Op.MUL, (value, index_value))
        return replace(t, factors=(replace(first, value=value),) + t.factors[1:],
                       index_values=())
    scalars = tuple(f for f in t.factors if f.ref.indices is None)     # factors still
    parts = [f.value or f.ref for f in t.factors if not f.in_value and f not in scalars] \
        + list(t.index_values)
    if not is_finite(c) or c != 1:
        parts.append(Number(t.at.line, t.at.column, c if isinstance(c, int) else float(c)))
    product = parts[0]
    for part in parts[1:]:
        product = Apply(t.at.line, t.at.column, Op.MUL, (product, part))
    firsts: dict[tuple, Ref] = {}
    for r in accesses(product):                     # an access read twice is one read
        firsts.setdefault((r.name, r.indices), r)
    refs = list(firsts.values())
    return Term(1, (Factor(refs[0], _positioned(product, firsts)),)
                + tuple(Factor(r, in_value=True) for r in refs[1:]) + scalars, t.at)


def index_guards(value: Node | None, indices: Collection[str]) -> list[Constraint]:
    """The comparisons of ``indices`` that multiply ``value`` at its top, as affine
    constraints (``A(i,j) * (i == j)``: ``i - j == 0``; ``x(i) * (j <= i) * (i < 3)``):
    the value is 0 wherever one is false, so the product needs no point there; through
    ``and`` too (a band: ``(j >= i - 1) and (j <= i + 1)``).  A comparison inside a function
    or a quotient, ``!=`` or a non-affine one stays a value."""
    if isinstance(value, Apply) and value.op in (Op.MUL, Op.AND):
        return [g for o in value.operands for g in index_guards(o, indices)]
    if not (isinstance(value, Apply) and value.op in _GUARDS):
        return []
    left, right = (affine_of(o, indices.__contains__) for o in value.operands)
    if not (isinstance(left, Aff) and isinstance(right, Aff)):
        return []
    is_eq, lhs, rhs = _GUARDS[value.op](left, right)
    return [Constraint.make(lhs - rhs, is_eq)]


# each comparison as (is_eq, lhs, rhs) of ``lhs == rhs`` or ``lhs >= rhs``
_GUARDS: dict[Op, Callable[[Aff, Aff], tuple[bool, Aff, Aff]]] = {
    Op.EQ: lambda a, b: (True, a, b), Op.GE: lambda a, b: (False, a, b),
    Op.LE: lambda a, b: (False, b, a), Op.GT: lambda a, b: (False, a, b + Aff.num(1)),
    Op.LT: lambda a, b: (False, b, a + Aff.num(1))}


LOGIC = (Op.AND, Op.OR, Op.NOT)


def sum_of_products(node: Node, source: str, indices: frozenset[str],
                    outputs: frozenset[str]) -> list[Term]:
    """``node`` expanded into a sum of products of accesses with numeric coefficients (an
    expression of accesses or of index values being one factor); SpecError at the first
    construct that is not such a sum (``indices``: the statement's index names;
    ``outputs``: the output's, which no term sums over)."""
    in_arithmetic = frozenset(name for r in accesses(node) for _, aff in r.arithmetic
                              for name in aff.names())
    expander = _Expander(source, indices, outputs & in_arithmetic)
    terms = [d for t in expander.expand(node) for d in expander.distributed(t, outputs)]
    if len(terms) > MAX_TERMS:
        raise SpecError(f"the right-hand side expands to more than {MAX_TERMS} products",
                        source, node.line, node.column)
    for t in terms:
        indexed = next((v for v in t.index_values if not numbers_only(v)), None)
        if not t.factors and indexed is not None:
            raise expander.unsupported(f"a term of index values only ({text(indexed)})", t.at)
    return [_folded(t, expander.not_finite(t)) if t.factors else expander.number_term(t)
            for t in terms]


@dataclass(frozen=True)
class _Expander:
    """The expansion of :func:`sum_of_products` for one statement."""

    source: str
    indices: frozenset[str]
    reaching: frozenset[str] = frozenset()   # output indices read inside index arithmetic:
    #                                          a term may reach past a plain read's extent

    def restricted(self, n: Node) -> frozenset[tuple[str, tuple[str, ...]]]:
        """The accesses in ``n`` that may restrict its points more than the statement's one
        range per index does: one with index arithmetic (``x(i+1)``), one reading plainly an
        output index that a term may reach past its extent with (``B(i,j)`` where another
        term reads ``x(-j+2)``)."""
        if isinstance(n, Ref):
            reads = set(n.indices or ())
            return frozenset({(n.name, n.indices or ())}) \
                if n.arithmetic or reads & self.reaching else frozenset()
        return frozenset().union(*(self.restricted(c) for c in children(n)))

    def number_term(self, t: Term) -> Term:
        """A term of numbers only (``log(2)``, ``pow(2.5, -1)``) as one number: numpy's value
        of its expressions' product times its coefficient (the coefficient's size weakly, a
        Python number, then its sign by numpy's negative), as numpy computes it."""
        if not t.index_values:
            return t
        c = t.coefficient
        negative = bool(c < 0)
        size = -c if negative else c
        steps: list[tuple[Op, Any]] = [(Op.MUL, number_value(v, self.source))
                                       for v in t.index_values[1:]]
        if isinstance(size, Fraction):
            steps += [(Op.MUL, size.numerator)] * (size.numerator != 1) + \
                [(Op.DIV, size.denominator)] * (size.denominator != 1)
        elif size != 1:
            steps.append((Op.MUL, size))
        value = number_value(t.index_values[0], self.source)
        try:
            with np.errstate(all="ignore"):
                for op, by in steps:
                    value = apply_op(op, [value, by])
                if negative and isinstance(value, (bool, np.bool_)):
                    value = -int(value)     # a truth subtracted: 1 in the sum's type
                elif negative:
                    value = apply_op(Op.NEG, [value])
        except (TypeError, ValueError, ArithmeticError) as e:
            shown = "-" * negative + " * ".join([number_text(size)] * (size != 1) +
                                                [_grouped(v) for v in t.index_values])
            raise SpecError(f"{shown}: numpy refuses it ({type(e).__name__}: {e})",
                            self.source, t.at.line, t.at.column) from None
        return Term(bool(value) if isinstance(value, np.bool_) else value, (), t.at)

    def not_finite(self, t: Term) -> bool:
        """Whether the numbers of ``t`` (its coefficient, its expressions of numbers) are
        not all finite: inf and nan are never distributed over a sum (``(a + b) * inf`` is
        not ``a * inf + b * inf`` where ``a`` is 0)."""
        return not is_finite(t.coefficient) or any(
            numbers_only(v) and not is_finite(number_value(v, self.source))
            for v in t.index_values)

    def holds_not_finite(self, t: Term) -> bool:
        """Whether ``t`` is not finite by its numbers (:meth:`not_finite`) or by a number in
        its values' arithmetic (``x(i) + inf``, ``A(i,j) / 0``): either is inf or nan where
        what it multiplies is 0, so a sum it multiplies is never distributed."""
        return self.not_finite(t) or any(f.value is not None and _holds_infinite(f.value)
                                         for f in t.factors)

    def unsupported(self, what: str, at: Node) -> SpecError:
        return SpecError(f"{what} is not supported yet: the right-hand side is a sum of "
                         "products of tensors, numbers, index values and expressions of "
                         "tensors (functions, '/', comparisons, logic)", self.source, at.line,
                         at.column)

    def expand(self, n: Node) -> list[Term]:
        if isinstance(n, Number):
            unit = type(n.value) is int and n.value in (1, -1)
            return [Term(UnitLiteral(n.value) if unit else n.value, (), n)]
        if isinstance(n, Ref):
            if n.indices is None and n.name in self.indices:
                return [Term(1, (), n, (n,))]       # an index's value
            return [Term(1, (Factor(n),), n)]
        if isinstance(n, Apply) and n.op in (Op.NEG, Op.ADD, Op.SUB, Op.MUL, Op.DIV):
            return self.arithmetic(n)
        return self.value_factor(n)     # a function, comparison or logic

    def arithmetic(self, n: Apply) -> list[Term]:
        if n.op is Op.NEG:
            terms = self.expand(n.operands[0])
            if _sum_node(n.operands[0]) is not None:     # numpy negates the sum, in its type
                return [t.subtracted_by_sum() for t in terms]
            return [t.scaled(-1) for t in terms]
        if n.op is Op.DIV:
            if not isinstance(n.operands[1], Number):
                self.expand(n.operands[0])      # its sums by zero or times inf: refused
                return self.value_factor(n)
            den = n.operands[1].value
            terms = self.expand(n.operands[0])
            inverse = math.inf if den == 0 else Fraction(1, den) if isinstance(den, int) \
                else 1 / den                    # p / 0 = p * inf (inf, -inf or nan), as numpy
            if not is_finite(inverse) and _several(n.operands[0]):
                # inf*a + inf*b is not (a + b) / 0 where a is 0; a / nan is a * nan
                by, value, hint = ("zero", "inf or nan", " (or multiply it by inf)") \
                    if den == 0 else ("nan", "nan", "")
                raise SpecError(f"division of a sum of products by {by}: numpy's result is "
                                f"{value} at every element; divide each product by {by}"
                                f"{hint}", self.source, n.line, n.column)
            return [t.scaled(inverse) for t in self.whole(terms, n.operands[0], inverse)]
        left, right = (self.expand(o) for o in n.operands)
        if n.op is Op.MUL:
            for infinite, other in ((left, n.operands[1]), (right, n.operands[0])):
                if _several(other) and any(map(self.holds_not_finite, infinite)):
                    raise SpecError("a sum of products times a number that is not finite: "
                                    "numpy's result is inf or nan at every element where a "
                                    "product is 0; multiply each product by it", self.source,
                                    n.line, n.column)
            if any(map(self.holds_not_finite, left)):
                right = self.whole(right, n.operands[1], math.inf)
            if any(map(self.holds_not_finite, right)):
                left = self.whole(left, n.operands[0], math.inf)
            if len(left) * len(right) > MAX_TERMS:
                raise SpecError(f"the right-hand side expands to more than {MAX_TERMS} "
                                "products", self.source, n.line, n.column)
            left = [a.floored(_sum_node(n.operands[0])) for a in left]
            right = [b.floored(_sum_node(n.operands[1])) for b in right]
            return [Term(times(a.coefficient, b.coefficient), a.factors + b.factors, a.at,
                         a.index_values + b.index_values) for a in left for b in right]
        if n.op is Op.SUB:
            right = [t.subtracted_by_sum() for t in right]
        if any(not t.factors for t in left + right) and len(accesses(n)) == 1 \
                and not self.scalars(n):
            return self.value_factor(n)      # a number added to one tensor: A(i,j) - 3
        return left + right

    def whole(self, terms: list[Term], n: Node, by: Coefficient) -> list[Term]:
        """``n``'s ``terms``, or ``n`` as one value when the number ``by`` that multiplies it
        is not finite and ``n`` is one product plus numbers (``(B(i,j) / C(i,j) + 2) / 0``):
        inf and nan are never distributed over a sum, so the sum is computed at every point,
        as numpy computes it (``0 * inf + 2 * inf`` would be nan where it is inf)."""
        if len(terms) < 2 or is_finite(by):
            return terms
        return self.value_factor(n)

    def distributed(self, t: Term, outputs: frozenset[str]) -> list[Term]:
        """``t`` with each sum folded into a value whose products read different summed
        indices (``(A(i,j)*x(j) + b(i)) / c(i)``, ``A(i,j) + 1`` into ``y(i)``) distributed
        into terms of their own, each summed over its own indices as the broadcasting rule
        says (``A(i,j)*x(j) / c(i) + b(i) / c(i)``); such a sum inside a function, a
        comparison or a divisor, where no term can be split off, is a SpecError.  A number
        added to a tensor read with index arithmetic is a term of its own too (``x(i+1) -
        3``: -3 at every point, also where x(i+1) reads nothing); a term times inf or nan
        is never distributed (computed at every point), and a sum inside its functions is
        refused all the same (the refusal is the statement's, whatever its numbers)."""
        summed = self.indices - outputs
        for k, f in enumerate(t.factors):
            if f.value is None:
                continue
            end = k + 1
            while end < len(t.factors) and t.factors[end].in_value:
                end += 1
            others = [g for g in t.factors[:k] + t.factors[end:] if not g.in_value]
            outside = frozenset().union(*(index_reads(g.value or g.ref) for g in others),
                                        *map(index_reads, t.index_values))
            for root, within in _roots(f.value):
                differ = _spread(root, False).differ & summed - outside \
                    - _read_beside(f.value, root, within)
                if differ:
                    index = min(differ)
                    raise self.mixed(_mixed(root, index, False), within, index)
            if self.not_finite(t) or any(g.value is not None and _holds_infinite(g.value)
                                         for g in others):
                continue        # computed at every point: the value times inf or nan
            node = _split(f.value, outside, frozenset().union(
                *(_restricting(g.value or g.ref, self.restricted) for g in others)), summed,
                self.restricted)
            if node is None:
                continue
            # a subtracted operand: its term negated (the value is linear in it), not a
            # '-' node (numpy refuses '-' of booleans; the sum subtracts in its own type)
            parts = [(node.operands[0], 1), (node.operands[1], -1 if node.op is Op.SUB else 1)]
            return [d for part, sign in parts
                    for e in self.expand(_replaced(f.value, node, part))
                    for d in self.distributed(Term(
                        times(times(t.coefficient, e.coefficient), sign), t.factors[:k]
                        + e.factors + t.factors[end:], t.at, t.index_values + e.index_values,
                        t.subtracted != (sign == -1)), outputs)]
        return [t]

    def mixed(self, node: Apply, within: Node, index: str) -> SpecError:
        """The refusal of the sum ``node`` inside the function, comparison or divisor
        ``within``, one of whose operands reads the summed ``index`` and the other not."""
        has, lacks = node.operands if index in index_reads(node.operands[0]) \
            else node.operands[::-1]
        return SpecError(
            f"the sum {text(node)} inside {text(within)}: {text(has)} reads index {index!r} "
            f"and {text(lacks)} does not, and nothing else in the product reads {index!r}, "
            f"so whether {index!r} is summed inside ({text(has)} summed over {index!r} "
            f"first, as the sum means on its own) or outside (the value at every point "
            f"summed, {text(lacks)} the same along {index!r}) is ambiguous; for inside, "
            "compute the sum into a tensor of its own first; for outside, multiply by a "
            f"tensor of ones along {index!r}", self.source, node.line, node.column)

    def scalars(self, n: Node) -> list[Ref]:
        """The scalars ``n`` reads (bare names that are no index)."""
        return [r for r in index_refs(n) if r.name not in self.indices]

    def check_value(self, n: Node) -> None:
        """What an expression of values may hold: accesses, index values, numbers."""
        if isinstance(n, Ref):
            if n.indices is None and n.name not in self.indices:
                raise self.unsupported(f"the scalar {n.name!r} inside a function or a "
                                       "division", n)
        elif isinstance(n, Call):
            arity = FUNCTIONS[n.function].arity
            if len(n.args) != arity:
                raise SpecError(f"{n.function}() takes {arity} argument(s), got {len(n.args)}",
                                self.source, n.line, n.column)
        for child in children(n):
            self.check_value(child)

    def value_factor(self, n: Node) -> list[Term]:
        """An expression of accesses, index values and numbers as one factor: its first
        access carries the expression, the others follow it (``in_value``)."""
        self.check_value(n)
        firsts: dict[tuple, Ref] = {}
        for r in accesses(n):                          # an access read twice is one read
            firsts.setdefault((r.name, r.indices), r)
        if not firsts:
            return [Term(1, (), n, (n,))]           # an expression of indices and numbers
        tree = _positioned(n, firsts)
        refs = list(firsts.values())
        return [Term(1, (Factor(refs[0], tree),) + tuple(Factor(r, in_value=True)
                                                         for r in refs[1:]), n)]


def index_reads(n: Node, skip: Node | None = None) -> frozenset[str]:
    """The index names ``n`` reads: an access's indices (the names in an affine one), an
    index value; not those of the subtree ``skip``."""
    if n is skip:
        return frozenset()
    if isinstance(n, Ref):
        if n.indices is None:
            return frozenset({n.name})
        arithmetic = dict(n.arithmetic)
        return frozenset(name for i in n.indices
                         for name in (arithmetic[i].names() if i in arithmetic else (i,)))
    return frozenset().union(*(index_reads(c, skip) for c in children(n)))


def _linear_in(n: Node) -> tuple[bool, ...]:
    """Per operand of ``n``, whether ``n`` is linear in it (a sum's, a product's, a
    negation's operands, a quotient's numerator): a sum there may be distributed."""
    if isinstance(n, Apply) and n.op in (Op.ADD, Op.SUB, Op.MUL, Op.NEG):
        return (True,) * len(n.operands)
    if isinstance(n, Apply) and n.op is Op.DIV:
        return (True, False)
    return (False,) * len(children(n))


def _read_beside(value: Node, root: Node, within: Node) -> frozenset[str]:
    """What the rest of each product reads beside ``root``: the value outside it; for a
    divisor, only what every product of the numerator reads (a division distributes over
    the numerator's sum: in ``(F(k) - v(i)) / (F(k) - v(i))`` the product ``F(k) / (...)``
    does not read ``i``)."""
    if isinstance(within, Apply) and within.op is Op.DIV and root is within.operands[1]:
        return index_reads(value, within) | _common_reads(within.operands[0])
    return index_reads(value, root)


def _common_reads(n: Node) -> frozenset[str]:
    """What every product of ``n``'s expansion but its numbers reads (``B(i,j) + nan``:
    ``i`` and ``j``; a number adds no product that reads nothing)."""
    if isinstance(n, Apply) and n.op in (Op.ADD, Op.SUB) and not numbers_only(n):
        parts = [_common_reads(o) for o in n.operands if not numbers_only(o)]
        return frozenset.intersection(*parts)
    return _spread(n, True).common


def _sum_node(n: Node) -> Node | None:
    """The sum of products ``n`` is (under minus signs), None where it is none: numpy computes
    it in its own type, which its terms' signs and products take."""
    while isinstance(n, Apply) and n.op is Op.NEG:
        n = n.operands[0]
    if isinstance(n, Apply) and n.op in (Op.ADD, Op.SUB) and not numbers_only(n):
        return n
    return None


def _several(n: Node) -> bool:
    """Whether ``n`` is a sum of several products other than numbers (an index value is
    one: ``sign(j) + B(i,j)``, though computed as one value, is not one tensor plus numbers,
    which alone is one value at every point divided by zero or times inf)."""
    spread = _spread(n, True)
    return spread.products - spread.numbers > 1


def _roots(n: Node) -> list[tuple[Node, Node]]:
    """Each operand of a function, a comparison, logic or a divisor in ``n`` (at any depth),
    with that function, comparison or quotient: a sum there is computed at every point."""
    return [(child, n) for child, linear in zip(children(n), _linear_in(n)) if not linear] \
        + [r for c in children(n) for r in _roots(c)]


def _infinite(n: Node) -> bool:
    """Whether ``n`` multiplies or divides by a number that makes it inf or nan where its
    other operand is 0 (``(x(i+1) - 3) * inf``, ``(...) / 0``, ``(...) * log(0)``)."""
    if numbers_only(n):
        try:
            return not is_finite(number_value(n, "<string>"))
        except SpecError:
            return False        # numpy refuses it: the statement's typing says where
    if isinstance(n, Apply) and n.op is Op.DIV and numbers_only(n.operands[1]):
        try:
            return bool(number_value(n.operands[1], "<string>") == 0) or _infinite(n.operands[0])
        except SpecError:
            return False
    return isinstance(n, Apply) and n.op in (Op.MUL, Op.DIV, Op.NEG) \
        and any(_infinite(o) for o in n.operands)


def _holds_infinite(n: Node) -> bool:
    """Whether the arithmetic of ``n`` (``+ - *``, a quotient's numerator; not inside a
    function, a comparison or a divisor) holds a number that is not finite or a division
    by zero (``x(i) + inf``, ``2 * (A(i,j) / 0)``)."""
    if _infinite(n):
        return True
    return isinstance(n, Apply) and n.op in (Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.DIV) and any(
        map(_holds_infinite, n.operands[:1] if n.op is Op.DIV else n.operands))


Reads = Callable[[Node], frozenset[Any]]     # what a product reads (index names, accesses)


@dataclass(frozen=True)
class _Spread:
    """The products of an expression's expansion: what any of them reads (``union``: index
    names, or accesses with index arithmetic) and what all of them read (``common``), how
    many there are (``products``) and how many are numbers only (``numbers``)."""

    union: frozenset[Any]
    common: frozenset[Any]
    products: int = 1
    numbers: int = 0

    @property
    def differ(self) -> frozenset[Any]:
        """What some products read and others do not."""
        return self.union - self.common


def _whole(n: Node, linear: bool) -> bool:
    """Whether ``n`` is one product of its expansion: no arithmetic (an access, an index
    value, a function, a comparison); or times inf or nan, or divided by 0, which is never
    distributed (computed at every point) at a ``linear`` position of a value, and inside
    a function where the rest is one tensor plus numbers (one value, as at the top)."""
    if not isinstance(n, Apply) or n.op not in (Op.ADD, Op.SUB, Op.NEG, Op.MUL, Op.DIV):
        return True
    if n.op in (Op.MUL, Op.DIV) and _infinite(n):
        if linear:
            return True
        spread = _spread(n, False, whole=False)
        return len(accesses(n)) == 1 and spread.products - spread.numbers == 1
    return False


def _spread(n: Node, linear: bool, reads: Reads = index_reads, whole: bool = True) -> _Spread:
    """:class:`_Spread` of ``n``'s expansion as the broadcasting rule splits a sum (``*``
    and a quotient distributed over it; a function, a comparison or a divisor one factor),
    of what ``reads`` says each product reads (``linear``, ``whole``: see :func:`_whole`,
    which ``whole`` False skips at ``n``)."""
    if numbers_only(n):
        return _Spread(frozenset(), frozenset(), 1, 1)
    if whole and _whole(n, linear):
        read = reads(n)
        return _Spread(read, read)
    assert isinstance(n, Apply)
    a = _spread(n.operands[0], linear, reads)
    if n.op is Op.NEG:
        return a
    if n.op is Op.DIV:          # each product divided: the divisor is one more factor
        bottom = n.operands[1]
        by = reads(bottom)
        return _Spread(a.union | by, a.common | by, a.products,
                       a.numbers if numbers_only(bottom) else 0)
    b = _spread(n.operands[1], linear, reads)
    if n.op is Op.MUL:
        return _Spread(a.union | b.union, a.common | b.common, a.products * b.products,
                       a.numbers * b.numbers)
    return _Spread(a.union | b.union, a.common & b.common, a.products + b.products,
                   a.numbers + b.numbers)


def _mixed(n: Node, read: Any, linear: bool, reads: Reads = index_reads) -> Apply:
    """The sum in ``n`` (whose products differ in reading ``read``: :func:`_spread`) to name
    or split: inside a function, the one with an operand that reads it in every product
    and one that reads it in none; at a ``linear`` position the first on the way (split
    there, the terms added to an inner sum would be in both parts)."""
    assert isinstance(n, Apply)
    if linear and n.op in (Op.ADD, Op.SUB):
        return n
    for o in n.operands[:1] if n.op is Op.DIV else n.operands:
        if read in _spread(o, linear, reads).differ:
            return _mixed(o, read, linear, reads)
    assert n.op in (Op.ADD, Op.SUB)
    return n


def _split(value: Node, outside: frozenset[str], bounded: frozenset[Any],
           summed: frozenset[str], restricted: Reads) -> Apply | None:
    """The sum at a linear position of ``value`` to distribute (None: none): one whose
    products read different summed indices that nothing else in the product reads
    (``outside``), or different accesses that may restrict their points (``restricted``)
    where nothing else in the product does (``bounded``; ``x(i+1) - 3``: the number is a
    term of its own, added at every point)."""
    differ = _spread(value, True).differ & summed - outside
    if differ:
        return _mixed(value, min(differ), True)
    apart = _spread(value, True, restricted).differ - bounded
    return _mixed(value, min(apart), True, restricted) if apart else None


def _restricting(n: Node, restricted: Reads) -> frozenset[Any]:
    """The accesses of ``restricted(n)`` that every product of the factor ``n``'s expansion
    reads (where one reads nothing, that product has no point): what a product's factors or
    a negation restrict, what every operand of a sum restricts, all a function, comparison
    or divisor reads (computed whole).  In ``(2 - x(i+1)) * (2 - x(i+1))`` neither factor
    restricts the other: its number 2 is there where x(i+1) reads nothing, so each sum is
    distributed (4 at every point)."""
    if not isinstance(n, Apply) or n.op not in (Op.MUL, Op.NEG, Op.DIV, Op.ADD, Op.SUB):
        return restricted(n)
    if n.op is Op.DIV:
        return _restricting(n.operands[0], restricted) | restricted(n.operands[1])
    parts = [_restricting(o, restricted) for o in n.operands]
    if n.op in (Op.ADD, Op.SUB):
        return frozenset.intersection(*parts)
    return frozenset().union(*parts)


def _replaced(n: Node, old: Node, new: Node) -> Node:
    """``n`` with its subtree ``old`` (by identity) replaced by ``new``."""
    if n is old:
        return new
    if isinstance(n, Apply):
        return Apply(n.line, n.column, n.op, tuple(_replaced(o, old, new) for o in n.operands))
    if isinstance(n, Call):
        return Call(n.line, n.column, n.function, tuple(_replaced(a, old, new) for a in n.args))
    return n


def children(n: Node) -> tuple[Node, ...]:
    """The operands of an operator, the arguments of a call, none of a leaf."""
    return n.operands if isinstance(n, Apply) else n.args if isinstance(n, Call) else ()


def _positioned(n: Node, firsts: dict[tuple, Ref]) -> Node:
    """``n`` with every read of an access replaced by its first read (``firsts``, by name
    and indices: one position per access)."""
    if isinstance(n, Ref):
        return firsts.get((n.name, n.indices), n)
    return renamed(n, lambda r: firsts.get((r.name, r.indices), r))


def renamed(n: Node, ref: Callable[[Ref], Ref]) -> Node:
    """``n`` with each access ``r`` replaced by ``ref(r)``."""
    if isinstance(n, Ref):
        return ref(n) if n.indices is not None else n
    if isinstance(n, Apply):
        return Apply(n.line, n.column, n.op, tuple(renamed(o, ref) for o in n.operands))
    if isinstance(n, Call):
        return Call(n.line, n.column, n.function, tuple(renamed(a, ref) for a in n.args))
    return n
