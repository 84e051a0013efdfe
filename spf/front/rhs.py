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
    index   := sum                          (a plain index name; arithmetic is parsed)

:func:`parse_rhs` builds the tree; :func:`sum_of_products` expands it into terms
``coefficient * factor * ...`` (literals, unary minus and parentheses distribute), and
names the first construct it cannot express that way, at its line and column.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import SpecError
from .syntax import Parser, Token


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
# the functions of the language (their names are reserved: no tensor takes one)
FUNCTIONS = {"abs": 1, "sqrt": 1, "exp": 1, "log": 1, "sin": 1, "cos": 1, "tanh": 1,
             "sign": 1, "pow": 2, "min": 2, "max": 2, "where": 3}


MAX_TERMS = 64      # products of a right-hand side once parentheses are expanded


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
    """``tensor(indices...)``; ``indices`` is None for a bare name (a scalar or an index)
    and holds None at a position whose index is not a plain name (index arithmetic)."""

    name: str
    indices: tuple[str | None, ...] | None


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
    if tok.kind != "name":
        found = "end of input" if tok.kind == "end" else repr(tok.text)
        raise p.error(f"expected a tensor, a number, a function or '(', found {found}")
    p.i += 1
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
    indices: list[str | None] = []
    if not p.peek(")"):
        while True:
            indices.append(_index(p))
            if not p.accept(","):
                break
    p.expect(")", "',' or ')' closing the index list")
    return Ref(tok.line, tok.column, tok.text, tuple(indices))


def _index(p: Parser) -> str | None:
    """One index of an access: its name, or None for an expression of indices."""
    node = _sum(p)
    return node.name if isinstance(node, Ref) and node.indices is None else None


def _number(p: Parser, tok: Token) -> int | float:
    if tok.text.isdigit():
        return int(tok.text)
    value = float(tok.text)
    if value != value or value in (float("inf"), float("-inf")):
        raise p.error(f"number {tok.text} is not finite", tok)
    return value


@dataclass(frozen=True)
class Term:
    """``coefficient * factors[0] * factors[1] ...`` (``at``: where it starts)."""

    coefficient: int | float
    factors: tuple[Ref, ...]
    at: Node


def sum_of_products(node: Node, source: str, indices: frozenset[str]) -> list[Term]:
    """``node`` expanded into a sum of products of accesses with numeric coefficients;
    SpecError at the first construct that is not a sum of products (``indices``: the
    statement's index names, which cannot be factors yet)."""
    def unsupported(what: str, at: Node) -> SpecError:
        return SpecError(f"{what} is not supported yet: the right-hand side is a sum of "
                         "products of tensors and numbers (with parentheses and '-')",
                         source, at.line, at.column)

    def expand(n: Node) -> list[Term]:
        if isinstance(n, Number):
            return [Term(n.value, (), n)]
        if isinstance(n, Ref):
            if n.indices is None and n.name in indices:
                raise unsupported(f"the index {n.name!r} as a value", n)
            if n.indices is not None and None in n.indices:
                k = n.indices.index(None)
                raise unsupported(f"index arithmetic in an access ({n.name}'s index {k + 1})",
                                  n)
            return [Term(1, (n,), n)]
        if isinstance(n, Call):
            raise unsupported(f"the function {n.function}() ({n.function} names a function of "
                              "the expression language, not a tensor)", n)
        assert isinstance(n, Apply)
        if n.op is Op.NEG:
            return [Term(-t.coefficient, t.factors, t.at) for t in expand(n.operands[0])]
        if n.op in (Op.ADD, Op.SUB):
            left, right = (expand(o) for o in n.operands)
            if n.op is Op.SUB:
                right = [Term(-t.coefficient, t.factors, t.at) for t in right]
            return left + right
        if n.op is Op.MUL:
            left, right = (expand(o) for o in n.operands)
            if len(left) * len(right) > MAX_TERMS:
                raise SpecError(f"the right-hand side expands to more than {MAX_TERMS} "
                                "products", source, n.line, n.column)
            return [Term(a.coefficient * b.coefficient, a.factors + b.factors, a.at)
                    for a in left for b in right]
        what = {Op.DIV: "division ('/')", Op.AND: "'and'", Op.OR: "'or'",
                Op.NOT: "'not'"}.get(n.op, f"the comparison '{n.op.value}'")
        raise unsupported(what, n)

    terms = expand(node)
    for t in terms:
        if not t.factors:
            raise SpecError(f"the constant term {t.coefficient} is not supported yet: every "
                            "term of a sum reads a tensor (broadcasting a number is not "
                            "supported)", source, t.at.line, t.at.column)
    return terms
