"""Integer index expressions that need not be affine (``pi*(pi+1)/2 + pj``).

They appear in a layout's value expression (``data[pj][pk][pl]``) and array extents
(``double[rowPtr(numRows)][B][B]``).  They are printed as C and evaluated in Python.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .syntax import Parser
from .terms import Aff, UFCall


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Call:
    """An index-array read ``f(args)``."""

    name: str
    args: tuple[IExpr, ...]


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * /
    lhs: IExpr
    rhs: IExpr


IExpr = Num | Name | Call | BinOp


@dataclass(frozen=True)
class ArrayRef:
    """``array[sub0][sub1]...`` (a value expression)."""

    array: str
    subscripts: tuple[IExpr, ...]


MAX_OPERATORS = 256   # per expression: trees are walked recursively, so their depth is bounded


class _Parser(Parser):
    operators = 0

    def operator(self) -> str:
        """Consume a binary operator, at most :data:`MAX_OPERATORS` in one expression."""
        if self.operators == MAX_OPERATORS:
            raise self.error(f"more than {MAX_OPERATORS} operators in one index expression")
        self.operators += 1
        self.i += 1
        return self.tokens[self.i - 1].text


def _parse_expr(p: _Parser) -> IExpr:
    lhs = _parse_term(p)
    while p.peek("+") or p.peek("-"):
        lhs = BinOp(p.operator(), lhs, _parse_term(p))
    return lhs


def _parse_term(p: _Parser) -> IExpr:
    lhs = _parse_factor(p)
    while p.peek("*") or p.peek("/"):
        tok = p.tok
        lhs = BinOp(p.operator(), lhs, _parse_factor(p))
        if lhs.op == "/" and lhs.rhs == Num(0):
            raise p.error("division by zero", tok)
    return lhs


def _parse_factor(p: _Parser) -> IExpr:
    tok = p.tok
    if tok.kind == "num":
        return Num(p.number())
    if p.accept("-"):
        with p.nested():
            return BinOp("-", Num(0), _parse_factor(p))
    if p.accept("("):
        with p.nested():
            inner = _parse_expr(p)
        p.expect(")")
        return inner
    if tok.kind == "name":
        p.i += 1
        if p.accept("("):
            with p.nested():
                args = [_parse_expr(p)]
                while p.accept(","):
                    args.append(_parse_expr(p))
            p.expect(")", "')' closing the call")
            return Call(tok.text, tuple(args))
        return Name(tok.text)
    found = "end of input" if tok.kind == "end" else repr(tok.text)
    raise p.error(f"expected a number, name, call or '(', found {found}")


def parse_index_expr(text: str, source: str = "<string>", line0: int = 1, col0: int = 1) -> IExpr:
    p = _Parser(text, source, line0, col0)
    e = _parse_expr(p)
    p.expect_end()
    return e


def parse_array_ref(text: str, source: str = "<string>", line0: int = 1,
                    col0: int = 1) -> ArrayRef:
    """Parse ``data[pj]`` / ``data[pj][pk][pl]``."""
    p = _Parser(text, source, line0, col0)
    name = p.name("the name of the value array").text
    subs = []
    while p.accept("["):
        subs.append(_parse_expr(p))
        p.expect("]", "']' closing the subscript")
    if not subs:
        raise p.error("expected '[' after the value array name")
    p.expect_end()
    return ArrayRef(name, tuple(subs))


def names(e: IExpr) -> set[str]:
    """Plain names used (not call names)."""
    if isinstance(e, Name):
        return {e.name}
    if isinstance(e, Call):
        return set().union(*(names(a) for a in e.args))
    if isinstance(e, BinOp):
        return names(e.lhs) | names(e.rhs)
    return set()


def affine(e: IExpr, reads: bool = False) -> Aff | None:
    """``e`` as an affine expression of names (with ``reads``, of array reads too, as calls of
    uninterpreted functions: ``slicePtr(s) + 4*k + r``); None for a product or quotient of
    names (or a read, without ``reads``)."""
    if isinstance(e, Num):
        return Aff.num(e.value)
    if isinstance(e, Name):
        return Aff.var(e.name)
    if isinstance(e, Call):
        args = [affine(a, reads) for a in e.args]
        if not reads or any(a is None for a in args):
            return None
        return Aff.var(UFCall(e.name, tuple(a for a in args if a is not None)))
    if not isinstance(e, BinOp) or e.op not in "+-*":
        return None
    lhs, rhs = affine(e.lhs, reads), affine(e.rhs, reads)
    if lhs is None or rhs is None:
        return None
    if e.op == "+":
        return lhs + rhs
    if e.op == "-":
        return lhs - rhs
    if lhs.is_const or rhs.is_const:
        return lhs * rhs.const if rhs.is_const else rhs * lhs.const
    return None


def calls(e: IExpr) -> list[Call]:
    if isinstance(e, Call):
        return [e] + [c for a in e.args for c in calls(a)]
    if isinstance(e, BinOp):
        return calls(e.lhs) + calls(e.rhs)
    return []


def substitute(e: IExpr, mapping: Mapping[str, IExpr]) -> IExpr:
    if isinstance(e, Name):
        return mapping.get(e.name, e)
    if isinstance(e, Call):
        return Call(e.name, tuple(substitute(a, mapping) for a in e.args))
    if isinstance(e, BinOp):
        return BinOp(e.op, substitute(e.lhs, mapping), substitute(e.rhs, mapping))
    return e


def text(e: IExpr) -> str:
    """``e`` as a layout file writes it (``rowPtr(numRows) / 2``), for messages and comments."""
    if isinstance(e, Num):
        return str(e.value)
    if isinstance(e, Name):
        return e.name
    if isinstance(e, Call):
        return f"{e.name}({', '.join(text(a) for a in e.args)})"
    if isinstance(e.lhs, Num) and e.lhs.value == 0 and e.op == "-":
        return f"(-{text(e.rhs)})"
    return f"({text(e.lhs)} {e.op} {text(e.rhs)})"


def to_c(e: IExpr, name_text: Callable[[str], str], call_text: Callable[[str, list[str]], str],
         wide: bool = False) -> str:
    """C text; ``/`` is C integer division (operands are non-negative in layouts; a divisor
    that is not a number gives 0 where it is 0, as numpy's ``//``, never a trap).

    With ``wide``, products are computed in 64 bits (positions in large value arrays)."""
    def call(name: str, args: list[IExpr]) -> str:
        return call_text(name, [to_c(a, name_text, call_text) for a in args])
    return to_c_with(e, name_text, call, wide)


def to_c_with(e: IExpr, name_text: Callable[[str], str],
              call_expr: Callable[[str, list[IExpr]], str], wide: bool = False) -> str:
    """As :func:`to_c`, but a read is printed from its argument expressions (not their
    text), so the caller can print them more than one way."""
    if isinstance(e, Num):
        return str(e.value)
    if isinstance(e, Name):
        return name_text(e.name)
    if isinstance(e, Call):
        return call_expr(e.name, list(e.args))
    lhs = to_c_with(e.lhs, name_text, call_expr, wide)
    rhs = to_c_with(e.rhs, name_text, call_expr, wide)
    if isinstance(e.lhs, Num) and e.lhs.value == 0 and e.op == "-":
        return f"(-{rhs})"
    if wide and e.op == "*" and not isinstance(e.lhs, Num):
        return f"((int64_t){lhs} * {rhs})"
    if e.op == "/" and not isinstance(e.rhs, Num):    # a divisor known at run time only:
        return f"({rhs} ? {lhs} / {rhs} : 0)"         # 0 gives 0 (numpy's x // 0), no trap
    return f"({lhs} {e.op} {rhs})"


def evaluate(e: IExpr, env: Mapping[str, int], arrays: Mapping[str, Any] | None = None) -> int:
    """Evaluate with scalar ``env`` and index ``arrays`` (numpy arrays, flat)."""
    if isinstance(e, Num):
        return e.value
    if isinstance(e, Name):
        if e.name not in env:
            raise KeyError(e.name)
        return int(env[e.name])
    if isinstance(e, Call):
        arr = (arrays or {})[e.name]
        args = [evaluate(a, env, arrays) for a in e.args]
        if len(args) != 1:
            raise ValueError(f"cannot evaluate multi-argument call {e.name}")
        if not 0 <= args[0] < len(arr):
            raise IndexError(f"{e.name}({args[0]}) is out of bounds (length {len(arr)})")
        return int(arr[args[0]])
    lhs, rhs = evaluate(e.lhs, env, arrays), evaluate(e.rhs, env, arrays)
    if e.op == "+":
        return lhs + rhs
    if e.op == "-":
        return lhs - rhs
    if e.op == "*":
        return lhs * rhs
    if rhs == 0:
        raise ValueError(f"division by zero in {text(e)}")
    return lhs // rhs


Evaluator = Callable[[Mapping[str, int], Mapping[str, Any]], int]   # (scalars, arrays)


def compiled(e: IExpr) -> Evaluator:
    """``lambda env, arrays: evaluate(e, env, arrays)`` without walking the tree on each call
    (same errors), for expressions evaluated once per tensor built."""
    if isinstance(e, Num):
        value = e.value
        return lambda env, arrays: value
    if isinstance(e, Name):
        name = e.name
        return lambda env, arrays: int(env[name])
    if isinstance(e, Call):
        if len(e.args) != 1:
            return lambda env, arrays: evaluate(e, env, arrays)
        arg, name = compiled(e.args[0]), e.name

        def read(env: Mapping[str, int], arrays: Mapping[str, Any]) -> int:
            arr, k = arrays[name], arg(env, arrays)
            if not 0 <= k < len(arr):
                raise IndexError(f"{name}({k}) is out of bounds (length {len(arr)})")
            return int(arr[k])
        return read
    lhs, rhs = compiled(e.lhs), compiled(e.rhs)
    if e.op == "+":
        return lambda env, arrays: lhs(env, arrays) + rhs(env, arrays)
    if e.op == "-":
        return lambda env, arrays: lhs(env, arrays) - rhs(env, arrays)
    if e.op == "*":
        return lambda env, arrays: lhs(env, arrays) * rhs(env, arrays)
    return lambda env, arrays: evaluate(e, env, arrays)     # division: its zero check
