"""The adversarial suite's references, written from the documentation alone (no spf code is
used): expressions of the language evaluated by numpy on the dense arrays, and a layout's
relation read by brute force to decode a tensor's fields.

Expressions (docs/expressions.md, docs/value-types.md, and the lead's decisions of issue 52):
the right-hand side is expanded into a sum of products (``*`` distributed over ``+`` and
``-``, a division over the sum it divides: ``(A(i,j)*x(j) + b(i)) / c(i)`` is
``A*x/c + b/c``); each product is evaluated by numpy with numpy's promotion (a number is a
Python number: weak; float16 is held as float32) over the points of its indices where every
access lies inside its tensor, each index having one range for the whole statement (an
index read plainly anywhere: that extent; an output index: the output's extent, widened by
the terms that reach further except those on other terms' coordinates); the products are
added in the output's type, each once into every element along the output
indices it leaves out (a number term is added once into every element); inf and nan are
never distributed over a sum (one product plus numbers divided by zero or times inf is one
value at every point). What the docs say is refused raises :class:`RefusedError` (a sum of
several products divided by zero or times inf or nan; a sum inside a function, a comparison
or a divisor whose terms differ in a summed index; an index read plainly nowhere that a term
uses only as a value; an output index no input gives an extent); the output's type is
numpy's type of the statement as written; :func:`as_written_refusal` is what numpy refuses
in the expression as written. Two readings of the arithmetic are computed, since the docs
say both that each product is computed in its own type and that every node has numpy's type:
``expanded`` computes each product, its coefficient and its sign in the product's type;
``grouped`` evaluates a sum as written wherever all its products have the same points
(numpy's type at every node: ``(a - b) * c`` of uint8 wraps ``a - b``, ``(a + b) / c`` is
numpy's ``inf`` where the expansion's ``a/c + b/c`` is ``nan``) and subtracts a term in the
output's type (``u(i) - (not b(i))``). Each reading has a ``structural`` variant for
non-finite values: a product over stored entries skips the points where a sparse operand
stores nothing (as its fields say, read by the relation: a DIA's padding is stored) and the
product, in real arithmetic, is 0 there (``0 * inf`` and ``0 * nan`` are 0: the documented
convention; numpy's dense arithmetic gives ``nan``).
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

# -- the expression tree ---------------------------------------------------------------------
Aff = tuple[tuple[tuple[str, int], ...], int]       # ((index, coefficient), ...), constant


@dataclass(frozen=True)
class Num:
    value: int | float          # >= 0 (a negative number is Op("neg", Num)); inf and nan too


@dataclass(frozen=True)
class Index:
    name: str                   # an index's value


@dataclass(frozen=True)
class Scalar:
    name: str                   # an order-0 operand


@dataclass(frozen=True)
class Access:
    tensor: str
    position: tuple[Aff, ...]


@dataclass(frozen=True)
class Op:
    op: str                     # + - * / neg < <= > >= == != and or not
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple[Node, ...]


Node = Num | Index | Scalar | Access | Op | Call
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": np.abs, "sign": np.sign, "sqrt": np.sqrt, "sin": np.sin, "tanh": np.tanh,
    "exp": np.exp, "cos": np.cos, "log": np.log, "pow": np.power, "min": np.minimum,
    "max": np.maximum, "where": np.where}
UFUNCS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
          "==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or}


def aff_text(aff: Aff) -> str:
    terms, const = aff
    out = ""
    for name, c in terms:
        size = abs(c)
        word = name if size == 1 else f"{size}*{name}"
        out += (f"-{word}" if c < 0 else word) if not out else \
            (f" - {word}" if c < 0 else f" + {word}")
    if not out:
        return str(const)
    return out + (f" + {const}" if const > 0 else f" - {-const}" if const < 0 else "")


def text(n: Node, names: dict[str, str] | None = None) -> str:
    """``n`` in the notation, every operation parenthesized (``names``: the names tensors
    and scalars are printed with)."""
    names = names or {}
    if isinstance(n, Num):
        v = n.value
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        if isinstance(v, float) and math.isinf(v):
            return "inf"
        return repr(v)
    if isinstance(n, Index):
        return n.name
    if isinstance(n, Scalar):
        return names.get(n.name, n.name)
    if isinstance(n, Access):
        return f"{names.get(n.tensor, n.tensor)}({', '.join(aff_text(a) for a in n.position)})"
    args = [text(a, names) for a in n.args]
    if isinstance(n, Call):
        return f"{n.fn}({', '.join(args)})"
    if n.op == "neg":
        return f"(-{args[0]})"
    if n.op == "not":
        return f"(not {args[0]})"
    return f"({args[0]} {n.op} {args[1]})"


def walk(n: Node) -> Iterator[Node]:
    yield n
    if isinstance(n, (Op, Call)):
        for a in n.args:
            yield from walk(a)


def aff_indices(aff: Aff) -> set[str]:
    return {name for name, c in aff[0] if c}


def indices_of(nodes: tuple[Node, ...]) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        for n in walk(node):
            if isinstance(n, Access):
                for a in n.position:
                    out |= aff_indices(a)
            elif isinstance(n, Index):
                out.add(n.name)
    return out


def accesses(nodes: tuple[Node, ...]) -> list[Access]:
    return [n for node in nodes for n in walk(node) if isinstance(n, Access)]


def number_only(n: Node) -> bool:
    return all(isinstance(m, (Num, Op, Call)) for m in walk(n))


# -- terms: the two readings ---------------------------------------------------------------
class NumpyError(Exception):
    """numpy raises for this expression (an spf error is then the expected outcome)."""


class RefusedError(NumpyError):
    """The documentation says spf refuses this statement (an spf error is expected)."""


class SumByZeroError(RefusedError):
    """A sum of several products divided by zero or times inf or nan: refused
    (docs/expressions.md), or numpy's value of that quotient as one value (the ``zero
    whole`` reading)."""


class ValueIndexError(RefusedError):
    """An index no tensor reads plainly, used by a term only as a value: refused
    (docs/expressions.md, "One range per index for the whole statement")."""


class NoExtentError(RefusedError):
    """An output index no tensor reads plainly and only terms on other terms' coordinates
    read: it has no extent (docs/expressions.md, "The output's extent": refused)."""


class TooLargeError(Exception):
    """The reference would enumerate or allocate too much."""


class UnboundedError(NumpyError):
    """An index no access bounds: the statement has no finite result."""


@dataclass(frozen=True)
class Term:
    """``sign * coefficient * factors[0] * factors[1] ...`` (no factor: a number term); a
    quotient by a tensor is one factor (``(A*x + b) / c`` gives ``(A*x)/c`` and ``b/c``)."""

    sign: int
    coefficient: Fraction | float
    factors: tuple[Node, ...]
    divided: bool = False       # a true division is in the coefficient: a float, whatever
    #                             its value (``x(i) * 5 / 5`` of int32 is float64)

    def nodes(self) -> tuple[Node, ...]:
        return self.factors


def _zero(n: Node) -> bool:
    return isinstance(n, Num) and n.value == 0


def _nan(n: Node) -> bool:
    return isinstance(n, Num) and isinstance(n.value, float) and math.isnan(n.value)


def expanded(n: Node, strict: bool = True, quotients: bool = True) -> list[Term]:
    """``+ - neg`` split, ``*`` distributed, a division distributed over the sum it divides
    (``(a + b) / c`` is ``a / c + b / c``), a division by a nonzero number a coefficient
    (docs/expressions.md: spf expands the right-hand side into a sum of products, each
    computed in its factors' type, the coefficient and the sign applied there).  inf and nan
    are never distributed over a sum: one product plus numbers divided by zero or times inf
    or nan is one factor computed at every point; ``strict``: a sum of several products so
    divided or multiplied is a SumByZeroError (documented), else it is distributed.  Each
    product's quotient by a tensor is one factor, numpy's ``product / divisor`` (its type
    numpy's at that node); ``quotients`` False: a quotient by a tensor is not distributed
    (the product as written, before its numerator is split)."""
    if isinstance(n, Num):
        v = n.value
        return [Term(1, Fraction(v) if isinstance(v, int) else v, ())]
    if isinstance(n, Op) and n.op == "neg":
        return [replace(t, sign=-t.sign) for t in expanded(n.args[0], strict, quotients)]
    if isinstance(n, Op) and n.op in ("+", "-"):
        right = expanded(n.args[1], strict, quotients)
        if n.op == "-":
            right = [replace(t, sign=-t.sign) for t in right]
        return expanded(n.args[0], strict, quotients) + right
    if isinstance(n, Op) and n.op == "*":
        sides = [expanded(n.args[0], strict, quotients), expanded(n.args[1], strict, quotients)]
        for k in (0, 1):       # a sum times a not finite term: one value (one product)
            number, other = sides[1 - k], sides[k]
            if len(other) > 1 and any(map(_times_not_finite, number)):
                if one_product(n.args[k]):
                    sides[k] = [Term(1, Fraction(1), (n.args[k],))]
                elif strict:
                    raise SumByZeroError("a sum of products times inf or nan "
                                         "(docs/expressions.md)")
        left, right = sides
        return [Term(a.sign * b.sign, a.coefficient * b.coefficient, a.factors + b.factors,
                     a.divided or b.divided) for a in left for b in right]
    if isinstance(n, Op) and n.op == "/":
        top, d = expanded(n.args[0], strict, quotients), n.args[1]
        if _zero(d) and len(top) > 1 and one_product(n.args[0]):
            return [Term(1, Fraction(1), (n,))]
        if strict and _zero(d) and len(top) > 1:
            raise SumByZeroError("a sum of products divided by zero (docs/expressions.md)")
        if _nan(d) and len(top) > 1:          # a / nan is a * nan: never distributed
            if one_product(n.args[0]):
                return [Term(1, Fraction(1), (n,))]
            if strict:
                raise SumByZeroError("a sum of products divided by nan (docs/expressions.md)")
        if isinstance(d, Num) and d.value and not math.isnan(d.value):
            c = Fraction(d.value) if isinstance(d.value, int) else d.value
            return [replace(t, coefficient=t.coefficient / c, divided=True) for t in top]
        if not quotients:
            return [Term(1, Fraction(1), (n,))]
        return [_quotient(t, d) for t in top]
    return [Term(1, Fraction(1), (n,))]


def _quotient(t: Term, d: Node) -> Term:
    """``t / d`` with the quotient one factor: its factors' product divided by ``d`` (a
    number term's number, its coefficient then 1)."""
    if not t.factors:
        value = _coefficient_value(t.coefficient, t.divided)
        return Term(t.sign, Fraction(1), (Op("/", (Num(value), d)),))
    top = t.factors[0]
    for f in t.factors[1:]:
        top = Op("*", (top, f))
    return replace(t, factors=(Op("/", (top, d)),))


def _not_finite(t: Term) -> bool:
    """``t`` is a number (numbers only) that is inf or nan."""
    if not all(number_only(f) for f in t.nodes()):
        return False
    try:
        with np.errstate(all="ignore"):
            return not bool(np.all(np.isfinite(_value(t, Env({}, {}, {})))))
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        return False


def _times_not_finite(t: Term) -> bool:
    """``t``'s numbers (its coefficient, its factors of numbers only) hold an inf or nan, or
    a factor is divided by zero (docs/expressions.md: a product divided by zero is the
    product times inf)."""
    c = t.coefficient
    return (isinstance(c, float) and not math.isfinite(c)) or _not_finite(
        replace(t, factors=tuple(f for f in t.factors if number_only(f)))) or any(
        map(_holds_infinite, t.factors))


def _holds_infinite(n: Node) -> bool:
    """The arithmetic of ``n`` (``+ - *``, a quotient's numerator; not inside a function, a
    comparison or a divisor) holds a division by zero or a number that is not finite
    (docs/expressions.md: ``(A(i,j) / 0) / B(i,j)`` times a sum is refused like ``inf``)."""
    if isinstance(n, Op) and n.op == "/" and _zero(n.args[1]):
        return True
    if isinstance(n, Num):
        return isinstance(n.value, float) and not math.isfinite(n.value)
    return isinstance(n, Op) and n.op in ("+", "-", "*", "neg", "/") and any(
        map(_holds_infinite, n.args[:1] if n.op == "/" else n.args))


def one_product(n: Node) -> bool:
    """``n`` is one product plus numbers (``A(i,j) + 1``, ``B(i,j) / C(i,j) + 2``): one term
    of its expansion not of numbers only, no scalar (docs/expressions.md: divided by zero or
    times inf or nan it is one value, computed at every point)."""
    if any(isinstance(m, Scalar) for m in walk(n)):
        return False
    terms = expanded(n, strict=False)
    return len([t for t in terms if not all(number_only(f) for f in t.nodes())]) == 1


def _not_distributed(n: Node) -> bool:
    """``n`` divides by the number zero or multiplies by an inf or nan number."""
    if isinstance(n, Op) and n.op == "/":
        return _zero(n.args[1])
    return isinstance(n, Op) and n.op == "*" and any(
        len(e) == 1 and _not_finite(e[0]) for e in (expanded(a, False) for a in n.args))


def _signature(t: Term, plain: dict[str, int], outputs: frozenset[str]
               ) -> tuple[frozenset, frozenset]:
    """What sets a product's points apart: its summed indices and the range conditions of
    its accesses (a plain read of an index read plainly anywhere being that index's extent;
    an output index read plainly or as a value is the output's: a product without it is
    broadcast along it, docs/expressions.md)."""
    conditions = set()
    for a in accesses(t.nodes()):
        for axis, (terms, const) in enumerate(a.position):
            if const == 0 and len(terms) == 1 and terms[0][1] == 1 and terms[0][0] in plain:
                if terms[0][0] not in outputs:
                    conditions.add(("plain", terms[0][0]))
            else:
                conditions.add((a.tensor, axis, (terms, const)))
    return frozenset(indices_of(t.nodes()) - outputs), frozenset(conditions)


def grouped(n: Node, plain: dict[str, int], outputs: frozenset[str], strict: bool = True,
            zero_whole: bool = False) -> list[Term]:
    """numpy's grouping wherever the documented expansion cannot tell: a sum (or a product
    of sums, a quotient of one) all of whose products have the same summed indices and the
    same points (they may differ in the ``outputs`` indices they read plainly: broadcast) is
    one term evaluated as written (numpy's type at every node: ``(a - b) * c`` of uint8
    ``a, b`` wraps ``a - b`` in uint8, ``(a + b) / c`` and ``(x(i) - B(i,j)) / c(i)`` are
    numpy's ``inf`` where the expansion's ``a/0 + b/0`` is ``nan``); elsewhere the terms are
    split as :func:`expanded` splits them, and a subtracted term is subtracted in the output's
    type (as numpy computes ``a - b``).  ``strict``: as for :func:`expanded`; ``zero_whole``:
    a quotient by the number zero is one group, whatever its products (numpy's ``(a + b) /
    0``, an alternative to the documented refusal)."""
    expanded(n, strict)                 # a sum divided by zero: refused
    if len({_signature(t, plain, outputs) for t in expanded(n, strict=False)}) <= 1 or (
            zero_whole and _not_distributed(n)):
        return [Term(1, Fraction(1), (n,))]
    again = lambda m: grouped(m, plain, outputs, strict, zero_whole)     # noqa: E731
    if isinstance(n, Op) and n.op == "neg":
        return [replace(t, sign=-t.sign) for t in again(n.args[0])]
    if isinstance(n, Op) and n.op in ("+", "-"):
        right = again(n.args[1])
        if n.op == "-":
            right = [replace(t, sign=-t.sign) for t in right]
        return again(n.args[0]) + right
    if isinstance(n, Op) and n.op == "*":
        return [Term(a.sign * b.sign, Fraction(1), (Op("*", (a.factors[0], b.factors[0])),))
                for a in again(n.args[0]) for b in again(n.args[1])]
    assert isinstance(n, Op) and n.op == "/", n      # a single product is always one group
    return [Term(t.sign, Fraction(1), (Op("/", (t.factors[0], n.args[1])),))
            for t in again(n.args[0])]


def _value_roots(n: Node) -> Iterator[Node]:
    """The subexpressions of ``n`` in a function's, a comparison's or a divisor's place (a
    sum there is computed at every point, not split into terms)."""
    if isinstance(n, Call) or (isinstance(n, Op) and (n.op in COMPARISONS or
                                                      n.op in ("and", "or", "not"))):
        for a in n.args:
            yield a
            yield from _value_roots(a)
    elif isinstance(n, Op) and n.op == "/":
        yield from _value_roots(n.args[0])
        yield n.args[1]
        yield from _value_roots(n.args[1])
    elif isinstance(n, Op):
        for a in n.args:
            yield from _value_roots(a)


def _indices_but(nodes: tuple[Node, ...], skip: Node) -> set[str]:
    """The indices ``nodes`` read outside the subtree ``skip`` (by identity)."""
    out: set[str] = set()

    def visit(n: Node) -> None:
        if n is skip:
            return
        out.update(indices_of((n,)) if isinstance(n, (Access, Index)) else ())
        if isinstance(n, (Op, Call)):
            for a in n.args:
                visit(a)
    for n in nodes:
        visit(n)
    return out


def ambiguous_sum(rhs: Node, out_indices: tuple[str, ...]) -> str | None:
    """A sum inside a function, a comparison or a divisor whose terms differ in an index
    that is summed and that nothing else in the product reads (docs/expressions.md,
    "Broadcasting": refused, since the sum over that index could be inside or outside)."""
    for t in expanded(rhs, strict=False):     # a quotient by a tensor: distributed too
        roots = [r for f in t.nodes() for r in _value_roots(f)]
        for root in roots:
            sets = [indices_of(u.nodes()) for u in expanded(root, strict=False)]
            differ = set().union(*sets) - set.intersection(*sets) - set(out_indices)
            alone = differ - _indices_but(t.nodes(), root)
            if alone:
                return f"{text(root)} inside the product, summed over {sorted(alone)}"
    return None


# -- evaluation ------------------------------------------------------------------------------
REAL_NAN, REAL_INF = 0.625, 3.5      # finite stand-ins: real arithmetic, as Z3 reasons


@dataclass
class Env:
    points: dict[str, np.ndarray]
    tensors: dict[str, np.ndarray]
    scalars: dict[str, Any]
    reals: bool = False             # non-finite values replaced (the structural check)
    zero: Access | None = None      # this access read as 0
    narrow: bool = False            # set when a value was computed in float32 or less


def _real(v: Any) -> Any:
    if isinstance(v, float):
        return REAL_NAN if math.isnan(v) else (math.copysign(REAL_INF, v) if math.isinf(v)
                                                else v)
    a = np.asarray(v)
    if a.dtype.kind in "fc":
        return np.nan_to_num(v, nan=REAL_NAN, posinf=REAL_INF, neginf=-REAL_INF)
    return v


def _python(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, (bool, np.generic))


def ev(n: Node, env: Env) -> Any:
    """``n`` at every point of ``env`` (numpy arrays, numpy scalars or Python numbers)."""
    out = _ev(n, env)
    if not _python(out) and np.asarray(out).dtype in (np.float32, np.complex64):
        env.narrow = True
    return _real(out) if env.reals else out


def _ev(n: Node, env: Env) -> Any:
    if isinstance(n, Num):
        return n.value
    if isinstance(n, Index):
        return env.points[n.name]
    if isinstance(n, Scalar):
        return env.scalars[n.name]
    if isinstance(n, Access):
        t = env.tensors[n.tensor]
        n_points = len(next(iter(env.points.values()))) if env.points else 1
        if env.zero == n:
            return np.zeros(n_points, t.dtype)
        where = tuple(_aff_value(a, env.points, n_points) for a in n.position)
        return t[where]
    args = [ev(a, env) for a in n.args]
    if isinstance(n, Call):
        if n.fn == "pow" and _python(args[1]) and isinstance(args[1], int) and args[1] < 0 \
                and np.asarray(args[0]).dtype.kind in "iub":
            raise ValueError("Integers to negative integer powers are not allowed.")
        out = FUNCTIONS[n.fn](*args)
        if np.asarray(out).dtype == np.float16:       # spf holds float16 as float32
            out = FUNCTIONS[n.fn](*[np.asarray(a).astype(np.float32) if not _python(a)
                                    else a for a in args])
        return out
    if n.op == "neg":
        return -args[0] if _python(args[0]) else np.negative(args[0])
    if n.op == "not":
        return np.logical_not(args[0])
    a, b = args
    if _python(a) and _python(b) and n.op in ("+", "-", "*"):
        return {"+": a + b, "-": a - b, "*": a * b}[n.op]
    if _python(a) and _python(b) and n.op in COMPARISONS:
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                "!=": a != b}[n.op]
    if n.op == "/":
        return _divided(a, b)
    return UFUNCS[n.op](a, b)


def _divided(a: Any, b: Any) -> Any:
    """numpy's true division; of two Python numbers a Python float (weak, as spf folds a
    number's arithmetic: ``x(i) * (1 / 0)`` of float32 is float32)."""
    if _python(a) and _python(b):
        return a / b if b else float(np.true_divide(float(a), b))
    return np.true_divide(a, b)


def _aff_value(aff: Aff, points: dict[str, np.ndarray], n_points: int) -> np.ndarray:
    terms, const = aff
    v = np.full(n_points, const, dtype=np.int64)
    for name, c in terms:
        v = v + c * points[name]
    return v


# -- domains ---------------------------------------------------------------------------------
MAX_POINTS = 200_000


def domain(nodes: tuple[Node, ...], bounds: dict[str, tuple[int, int | None]],
           shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray] | None:
    """The points of the indices of ``nodes`` where every access is inside its tensor and
    each index inside ``bounds`` (``(lo, hi)`` inclusive, ``hi`` None: unbounded above;
    indices without an entry are unbounded); None if some index stays unbounded."""
    names = sorted(indices_of(nodes))
    lo: dict[str, float] = dict.fromkeys(names, -math.inf)
    hi: dict[str, float] = dict.fromkeys(names, math.inf)
    for k in names:
        if k in bounds:
            lo[k] = bounds[k][0]
            hi[k] = math.inf if bounds[k][1] is None else bounds[k][1]
    constraints = [(a, shapes[acc.tensor][d] - 1) for acc in accesses(nodes)
                   for d, a in enumerate(acc.position)]
    rows = [(dict(terms), const, 0, top) for (terms, const), top in constraints]
    for (t1, c1, b1, u1), (t2, c2, b2, u2) in itertools.combinations(list(rows), 2):
        for sign in (1, -1):         # sums and differences that cancel an index: i+j, j-i
            terms = dict(t1)
            for name, c in t2.items():
                terms[name] = terms.get(name, 0) + sign * c
            if any(v == 0 for v in terms.values()):
                rows.append(({k: v for k, v in terms.items() if v}, c1 + sign * c2,
                              b1 + (b2 if sign > 0 else -u2), u1 + (u2 if sign > 0 else -b2)))
    if any(not terms and const < bottom for terms, const, bottom, _ in rows):
        return {k: np.zeros(0, np.int64) for k in names}     # no point whatever the extents:
        # two accesses contradict (``T(i-j-2, j-i)``: i-j-2 >= 0 and j-i >= 0)
    for _ in range(4):               # interval propagation: bottom <= sum c*k + const <= top
        for terms, const, bottom, top in rows:
            for name, c in terms.items():
                rest_lo, rest_hi = const, const
                for other, d in terms.items():
                    if other == name:
                        continue
                    ends = (d * lo[other], d * hi[other])
                    rest_lo += min(ends)
                    rest_hi += max(ends)
                # bottom - rest_hi <= c*name <= top - rest_lo
                a, b = bottom - rest_hi, top - rest_lo
                if c > 0:
                    lo[name] = max(lo[name], math.ceil(a / c) if math.isfinite(a) else a)
                    hi[name] = min(hi[name], math.floor(b / c) if math.isfinite(b) else b)
                else:
                    lo[name] = max(lo[name], math.ceil(b / c) if math.isfinite(b) else -b)
                    hi[name] = min(hi[name], math.floor(a / c) if math.isfinite(a) else -a)
    if any(not (math.isfinite(lo[k]) and math.isfinite(hi[k])) for k in names):
        return None
    sizes = [max(0, int(hi[k]) - int(lo[k]) + 1) for k in names]
    if 0 in sizes:
        return {k: np.zeros(0, np.int64) for k in names}
    if math.prod(sizes) > MAX_POINTS:
        raise TooLargeError(f"{math.prod(sizes)} points")
    grids = np.meshgrid(*[np.arange(int(lo[k]), int(lo[k]) + s, dtype=np.int64)
                          for k, s in zip(names, sizes)], indexing="ij")
    points = {k: g.reshape(-1) for k, g in zip(names, grids)}
    n_points = math.prod(sizes)
    keep = np.ones(n_points, bool)
    for (terms, const), top in constraints:
        v = _aff_value((terms, const), points, n_points)
        keep &= (v >= 0) & (v <= top)
    return {k: p[keep] for k, p in points.items()}


# -- the reference ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    """``output(out_indices) = rhs`` with its operands' dense values."""

    output: str
    out_indices: tuple[str, ...]
    rhs: Node
    tensors: dict[str, np.ndarray]      # dense, order >= 1
    scalars: dict[str, Any]             # numpy scalars
    sparse: frozenset[str]              # operands stored sparse (absent entries skipped)
    out_shape: tuple[int, ...] | None = None    # given (out=), else derived
    names: dict[str, str] | None = None         # operands and output as the text names them

    def name(self, operand: str) -> str:
        return (self.names or {}).get(operand, operand)

    def text(self) -> str:
        lhs = self.name(self.output) + (f"({','.join(self.out_indices)})"
                                        if self.out_indices else "")
        body = text(self.rhs, self.names)
        return f"{lhs} = {body[1:-1] if body.startswith('(') and _balanced(body) else body}"


def _balanced(s: str) -> bool:
    """``s`` is one parenthesized group (its outer parentheses may go)."""
    depth = 0
    for k, ch in enumerate(s):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and k < len(s) - 1:
            return False
    return True


def plain_extents(st: Statement) -> dict[str, int]:
    """Each index read plainly (``x(j)``) with the extent of that axis: its one range in
    every term of the statement (the lead's decision, docs/expressions.md)."""
    out: dict[str, int] = {}
    for acc in accesses((st.rhs,)):
        for d, (terms, const) in enumerate(acc.position):
            if const == 0 and len(terms) == 1 and terms[0][1] == 1:
                out.setdefault(terms[0][0], st.tensors[acc.tensor].shape[d])
    return out


@dataclass(frozen=True)
class Expected:
    """One reading's result: the array and its numpy type, the sum of the magnitudes added
    into each element (for the tolerance)."""

    reading: str
    value: np.ndarray
    scale: np.ndarray
    empty: bool = False         # no term reaches any point (only the shape is in question)
    narrow: bool = False        # some value was computed in float32: its rounding
    base: np.ndarray = field(default_factory=lambda: np.zeros(1))   # number terms only


def _plain(aff: Aff) -> bool:
    terms, const = aff
    return const == 0 and len(terms) == 1 and terms[0][1] == 1


def on_coordinates(terms: list[Term], k: int) -> bool:
    """Term ``k``'s every tensor another term reading other accesses reads plainly (every
    index plain): it stays on their coordinates (docs/expressions.md, "The output's
    extent")."""
    mine_read = set(accesses(terms[k].nodes()))
    others = [a for j, t in enumerate(terms) if j != k and set(accesses(t.nodes())) != mine_read
              for a in accesses(t.nodes())]
    mine = {a.tensor for a in accesses(terms[k].nodes())}
    whole = {a.tensor for a in others if all(_plain(p) for p in a.position)}
    return bool(mine) and mine <= whole


def output_shape(st: Statement) -> tuple[int, ...]:
    """``out_shape``, or each output index's extent (docs/expressions.md, "The output's
    extent"): its plain extent, widened to hold every point a term reaches (all its
    accesses together, each index read plainly anywhere in its one range, another output
    index from 0 up), except the terms that stay on the coordinates of tensors read plainly
    elsewhere."""
    if st.out_shape is not None:
        return st.out_shape
    return _output_shape(st)


def _output_shape(st: Statement) -> tuple[int, ...]:
    plain = plain_extents(st)
    shapes = {t: a.shape for t, a in st.tensors.items()}
    terms = expanded(st.rhs, strict=False)
    shape = []
    for o in st.out_indices:
        ext, reaching = plain.get(o, 0), False
        for k, t in enumerate(terms):
            if o not in indices_of(tuple(accesses(t.nodes()))) or \
                    on_coordinates(terms, k):
                continue        # as a value only, a term's index ranges as the rest says
            reaching = True
            bounds = {i: (0, plain[i] - 1) for i in plain if i != o}
            bounds[o] = (0, None)
            bounds |= {i: (0, None) for i in st.out_indices if i not in bounds}
            read = indices_of(tuple(accesses(t.nodes())))
            bounds |= dict.fromkeys(indices_of(t.nodes()) - read, (0, 0))  # values: no reach
            pts = domain(t.nodes(), bounds, shapes)
            if pts is None:
                raise UnboundedError(f"the accesses of a term reading {sorted(read)} do not "
                                     f"bound them all (the output's {o!r} included)")
            if len(pts[o]):
                ext = max(ext, int(pts[o].max()) + 1)
        if o not in plain and not reaching:
            raise NoExtentError(f"output index {o!r} is read plainly by no tensor and "
                                "only by terms on other terms' coordinates")
        shape.append(ext)
    return tuple(shape)


MAX_OUTPUT = 1_000_000
MAX_WORK = 4_000_000
"""The oracle's bound on what it holds at once: the elements of an output (MAX_OUTPUT), the
points of a term (MAX_POINTS), a term's points times the elements it is broadcast over
(MAX_WORK); beyond one it raises TooLargeError (the suite then judges only spf's refusal of
an output too large for memory, or counts the example unchecked), so that no generated case
can use unbounded memory (an output of shape (2^31, 0) once took 24 GB)."""


def as_written_refusal(st: Statement) -> str | None:
    """What numpy raises for the right-hand side evaluated as written, node by node, on no
    points (the types' rules only: ``-`` of booleans, ``-(-x)`` of booleans, a number that
    does not fit its neighbour's type, an integer to a negative power): docs/expressions.md,
    "whatever numpy refuses is a SpecError"."""
    env = Env({k: np.zeros(0, np.int64) for k in indices_of((st.rhs,))}, st.tensors,
              st.scalars)
    try:
        with np.errstate(all="ignore"):
            ev(st.rhs, env)
    except (TypeError, ValueError, OverflowError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def _as_written(st: Statement, n: Node) -> tuple[bool, Any]:
    """(whether numpy computes ``n`` as written, on no points; its value)."""
    env = Env({k: np.zeros(0, np.int64) for k in indices_of((st.rhs,))}, st.tensors,
              st.scalars)
    try:
        with np.errstate(all="ignore"):
            return True, ev(n, env)
    except (TypeError, ValueError, OverflowError):
        return False, None


def value_kind(st: Statement, n: Node) -> str | None:
    """numpy's kind of ``n``'s type as written (``"i"``, ``"f"``, ...; None where numpy
    refuses it)."""
    ok, v = _as_written(st, n)
    if not ok:
        return None
    return "i" if isinstance(v, int) and not isinstance(v, bool) else \
        "f" if isinstance(v, float) else np.asarray(v).dtype.kind


def value_dtype(st: Statement, n: Node) -> np.dtype | None:
    """numpy's type of ``n`` as written (None for a Python number or where numpy refuses
    it)."""
    ok, v = _as_written(st, n)
    return None if not ok or _python(v) else np.asarray(v).dtype


def value_only_indices(st: Statement) -> set[str]:
    """The indices no tensor reads plainly and no output has that some term uses only as a
    value: they have no range there (docs/expressions.md: refused)."""
    ranged = set(plain_extents(st)) | set(st.out_indices)
    return {k for t in expanded(st.rhs, strict=False)
            for k in indices_of(t.nodes()) - indices_of(tuple(accesses(t.nodes()))) - ranged}


def reading_terms(st: Statement, reading: str, refuse: bool = True) -> list[Term]:
    """The statement's terms under ``reading`` (``expanded``, ``grouped`` or ``zero
    whole``); ``refuse``: RefusedError for what the documentation refuses."""
    if reading == "zero whole":
        return grouped(st.rhs, plain_extents(st), frozenset(st.out_indices), False,
                       zero_whole=True)
    expanded(st.rhs, refuse)
    if refuse and (lone := value_only_indices(st)):
        raise ValueIndexError(f"index {sorted(lone)} is read plainly by no tensor and used "
                              "by a term only as a value (docs/expressions.md)")
    if refuse and (why := ambiguous_sum(st.rhs, st.out_indices)):
        raise RefusedError(f"a sum inside a function, a comparison or a divisor whose terms "
                           f"differ in a summed index: {why} (docs/expressions.md)")
    return expanded(st.rhs, refuse) if reading.startswith("expanded") else \
        grouped(st.rhs, plain_extents(st), frozenset(st.out_indices), refuse)


BOOL_COUNTED = "expanded, a bool product subtracted in the output's type"
"""A reading the docs leave open: numpy or's ``a + b`` of booleans and refuses ``-a``, while
the expansion makes ``x - (a + b)`` into ``x - a - b``, whose products of bool are counted
(docs/expressions.md: "what the expansion makes is not refused")."""


def reference(st: Statement, reading: str, structural: frozenset[str] = frozenset(),
              refuse: bool = True, stored: dict[str, np.ndarray] | None = None) -> Expected:
    """The statement's result under ``reading`` (``expanded`` or ``grouped``); ``refuse``:
    as for :func:`reading_terms`; the products over the entries of the ``structural``
    operands skip the points where they store nothing (where ``stored`` says, by operand;
    else where they are 0)."""
    terms = reading_terms(st, reading, refuse)
    shape = output_shape(st)
    if math.prod(shape) > MAX_OUTPUT:
        raise TooLargeError(f"an output of shape {shape}")
    plain = plain_extents(st)
    shapes = {t: a.shape for t, a in st.tensors.items()}
    bounds = {k: (0, plain[k] - 1) for k in plain if k not in st.out_indices}
    bounds |= {o: (0, n - 1) for o, n in zip(st.out_indices, shape)}
    parts = []
    narrow = [False]
    with np.errstate(all="ignore"):
        for t in terms:
            part = _term(st, t, bounds, shapes, structural, narrow, stored or {})
            counted = reading == BOOL_COUNTED and np.asarray(part[1]).dtype == np.bool_
            if reading.startswith("expanded") and part[2] < 0 and not counted:
                parts.append((part[0], _negated(part[1]), 1))   # -1 * product, in its type
            else:
                parts.append(part)
    written = value_dtype(st, st.rhs)      # numpy's type of the statement as written
    try:
        dtype = written if written is not None else np.result_type(
            *[v for _, v, _ in parts]) if parts else np.dtype(np.float64)
    except TypeError as err:
        raise NumpyError(str(err)) from err
    if dtype == np.float16:                 # spf holds float16 as float32
        dtype = np.dtype(np.float32)
    out = np.zeros(shape, dtype)
    scale = np.zeros(shape, np.float64)
    with np.errstate(all="ignore"):
        for where, v, sign in parts:
            _accumulate(st, out, scale, where, v, sign, shape)
    empty = all(where is None or not len(v) for where, v, _ in parts)
    base = np.zeros(1, dtype)           # an element no term with points reaches
    with np.errstate(all="ignore"):
        for where, v, sign in parts:
            if where is None:
                _accumulate(st, base.reshape(()), np.zeros(()), None, v, sign, ())
    over = f" over the entries of {sorted(structural)}" if structural else ""
    return Expected(reading + over, out, scale, empty,
                    narrow[0], base)


def _term(st: Statement, t: Term, bounds: dict, shapes: dict, structural: frozenset[str],
          narrow: list[bool], stored: dict[str, np.ndarray]
          ) -> tuple[dict[str, np.ndarray] | None, Any, int]:
    """(the term's points, or None for a number term; its values; its sign); ``narrow[0]``
    set when a value was computed in float32."""
    if all(number_only(f) for f in t.nodes()):     # numbers only: every element
        try:
            return None, _value(t, Env({}, st.tensors, st.scalars)), t.sign
        except (TypeError, OverflowError, ValueError) as err:
            raise NumpyError(f"{type(err).__name__}: {err}") from err
    points = domain(t.nodes(), bounds, shapes)
    if points is None:
        raise UnboundedError("an index no access bounds")
    env = Env(points, st.tensors, st.scalars)
    try:
        v = _value(t, env)
    except (TypeError, OverflowError, ValueError) as err:
        raise NumpyError(f"{type(err).__name__}: {err}") from err
    narrow[0] |= env.narrow
    n_points = len(next(iter(points.values()))) if points else 1
    v = np.broadcast_to(np.asarray(v), (n_points,)) if np.ndim(v) == 0 else v
    for g in (g for f in t.factors for g in guards(f)):      # no point where one is false
        holds = np.broadcast_to(np.asarray(ev(g, env), bool), (n_points,))
        v = np.where(holds, v, np.zeros((), np.asarray(v).dtype))
    if structural:
        v = np.where(_skipped(st, t, points, n_points, structural, stored),
                     np.zeros((), np.asarray(v).dtype), v)
    return points, v, t.sign


def _skipped(st: Statement, t: Term, points: dict, n_points: int,
             iterated: frozenset[str], stored: dict[str, np.ndarray]) -> np.ndarray:
    """Points where an ``iterated`` operand of the term stores nothing and a factor of it, in
    real arithmetic with that operand 0, is 0 (a product over stored entries: 0 * inf and
    0 * nan are 0 there, the documented structural convention; a coefficient inf or nan
    reads the operand densely, a divisor 0 is no factor 0)."""
    skip = np.zeros(n_points, bool)
    c = t.coefficient
    if isinstance(c, float) and not math.isfinite(c):
        return skip
    env = Env(points, st.tensors, st.scalars)
    for acc in accesses(t.nodes()):
        if acc.tensor not in iterated:
            continue
        if acc.tensor in stored:
            absent = ~stored[acc.tensor][tuple(_aff_value(a, points, n_points)
                                               for a in acc.position)]
        else:
            absent = _ev(acc, env) == 0
        zeroed = Env(points, st.tensors, st.scalars, reals=True, zero=acc)
        for f in t.factors:
            if acc not in accesses((f,)):
                continue            # a factor of the others' values: 0 there is no skip
            v = np.broadcast_to(np.asarray(ev(f, zeroed)), (n_points,))
            skip |= absent & (v == 0)
    return skip


def guards(n: Node) -> list[Node]:
    """The comparisons of indices multiplying the factor ``n`` at its top, through ``*`` and
    ``and`` (docs/expressions.md: the product is 0 where one is false, whatever its other
    factors, inf and nan included: its iteration space holds only the points where they
    hold); ``!=`` and a comparison with a non-affine side stay values."""
    if isinstance(n, Op) and n.op in ("*", "and"):
        return [g for a in n.args for g in guards(a)]
    if isinstance(n, Op) and n.op in COMPARISONS and n.op != "!=" and \
            all(map(_index_affine, n.args)):
        return [n]
    return []


def _index_affine(n: Node) -> bool:
    """``n`` is an affine expression of indices and integers (``2*i - j + 1``)."""
    if isinstance(n, Num):
        return isinstance(n.value, int) and not isinstance(n.value, bool)
    if isinstance(n, Index):
        return True
    if not (isinstance(n, Op) and n.op in ("+", "-", "neg", "*")) or \
            not all(map(_index_affine, n.args)):
        return False
    return n.op != "*" or any(not any(isinstance(m, Index) for m in walk(a)) for a in n.args)


def _negated(v: Any) -> Any:
    if _python(v):
        return -v
    try:
        return np.negative(v)
    except TypeError as err:
        raise NumpyError(f"{type(err).__name__}: {err}") from err


def _value(t: Term, env: Env) -> Any:
    """The product's factors multiplied, then scaled by its coefficient."""
    v: Any = None
    for f in t.factors:
        x = ev(f, env)
        v = x if v is None else (v * x if _python(v) and _python(x) else np.multiply(v, x))
        if env.reals:
            v = _real(v)
    c, divided = t.coefficient, t.divided
    if v is None:
        v, c, divided = _coefficient_value(c, divided), Fraction(1), False
    return _scaled(v, c, divided)


def _coefficient_value(c: Fraction | float, divided: bool) -> int | float:
    """The coefficient as a Python number (a float where it holds a true division)."""
    if isinstance(c, Fraction):
        return c.numerator if c.denominator == 1 and not divided else \
            c.numerator / c.denominator
    return c


def _scaled(v: Any, c: Fraction | float, divided: bool) -> Any:
    """``v`` times the coefficient as numpy computes ``v * p / q`` (Python numbers weak; a
    true division, ``divided``, even by 1: numpy's ``/`` of integers is float64)."""
    if isinstance(c, Fraction):
        if c.numerator != 1:
            v = v * c.numerator if _python(v) else np.multiply(v, c.numerator)
        if c.denominator != 1 or divided:
            v = v / c.denominator if _python(v) else np.true_divide(v, c.denominator)
        return v
    return v * c if _python(v) else np.multiply(v, c)


def _accumulate(st: Statement, out: np.ndarray, scale: np.ndarray,
                where: dict[str, np.ndarray] | None, v: Any, sign: int,
                shape: tuple[int, ...]) -> None:
    """Add (``sign`` -1: subtract) the term into ``out``, broadcast along the output
    indices it does not use; its magnitudes into ``scale``."""
    try:
        v = np.asarray(v).astype(out.dtype) if not _python(v) else np.asarray(v, out.dtype)
    except (OverflowError, ValueError, TypeError) as err:
        raise NumpyError(f"{type(err).__name__}: {err}") from err
    magnitude = np.abs(v.astype(np.complex128) if v.dtype.kind == "c" else
                       v.astype(np.float64))
    op = np.add if sign > 0 else np.subtract
    if where is None:                       # a number: every element
        try:
            out[...] = op(out, v)
        except TypeError as err:
            raise NumpyError(f"{type(err).__name__}: {err}") from err
        scale += magnitude
        return
    n_points = len(v)
    index = []
    for o in st.out_indices:
        if o in where:
            index.append(where[o])
        else:                               # broadcast: every element along o
            index.append(None)
    broadcast = [n for n, w in zip(shape, index) if w is None]
    if n_points == 0 or 0 in shape:
        return                              # nothing to add (an extent may be 2^31)
    if n_points * math.prod(broadcast) > MAX_WORK:
        raise TooLargeError(f"{n_points} points broadcast over {broadcast}")
    grids = [np.arange(n) for n in broadcast]
    if grids:
        mesh = [g.reshape(-1) for g in np.meshgrid(*grids, indexing="ij")]
        reps = len(mesh[0])
        v = np.repeat(v, reps)
        magnitude = np.repeat(magnitude, reps)
        full, k = [], 0
        for w in index:
            if w is None:
                full.append(np.tile(mesh[k], n_points))
                k += 1
            else:
                full.append(np.repeat(w, reps))
        index = full
    target = tuple(index) if index else (np.zeros(len(v), np.int64),)
    flat_out = out.reshape(-1) if not st.out_indices else out
    flat_scale = scale.reshape(-1) if not st.out_indices else scale
    try:
        op.at(flat_out, target, v)
    except TypeError as err:
        raise NumpyError(f"{type(err).__name__}: {err}") from err
    np.add.at(flat_scale, target, magnitude)


# -- a layout's relation read by brute force -------------------------------------------------
class InvalidFieldsError(Exception):
    """The fields do not describe a tensor of the layout (a read out of an array's bounds,
    an entry outside the shape, an array of the wrong size, a value that is no index)."""


class UndecidedError(Exception):
    """The decoder cannot say (an index array of integral floats, a construct it does not
    read)."""


MAX_RANGE = 100_000
_ASSIGN = re.compile(r"(?<![<>=!])=(?!=)")


def _split_top(s: str, word: str) -> list[str]:
    parts, depth, start, k = [], 0, 0, 0
    pat = f" {word} "
    while k < len(s):
        ch = s[k]
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and s.startswith(pat, k):
            parts.append(s[start:k])
            k += len(pat)
            start = k
            continue
        k += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _strip_parens(s: str) -> str:
    s = s.strip()
    while s.startswith("(") and s.endswith(")") and _balanced(s):
        s = s[1:-1].strip()
    return s


def _names(expr: str) -> set[str]:
    return set(re.findall(r"\b[A-Za-z_]\w*\b", expr)) - {"and", "or", "not"}


class _Reader:
    """The fields of one tensor and lookups into them."""

    def __init__(self, arrays: dict[str, np.ndarray], scalars: dict[str, int]) -> None:
        self.arrays, self.scalars = arrays, scalars

    def lookup(self, name: str) -> Callable[..., int]:
        def read(*args: int) -> int:
            a = self.arrays[name]
            if len(args) != a.ndim:
                raise InvalidFieldsError(f"{name} read with {len(args)} subscripts, "
                                         f"it has {a.ndim}")
            for d, k in enumerate(args):
                if not 0 <= k < a.shape[d]:
                    raise InvalidFieldsError(f"{name}{list(args)} is outside its shape {a.shape}")
            return int(a[tuple(args)])
        return read

    def namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = {"__builtins__": {}}
        ns.update(self.scalars)
        ns.update({k: self.lookup(k) for k in self.arrays})
        return ns


def _compile(expr: str) -> Any:
    py = _ASSIGN.sub("==", expr.strip()).replace("/", "//")
    try:
        return compile(py, "<relation>", "eval")
    except SyntaxError as err:
        raise UndecidedError(f"cannot read {expr!r}") from err


def _eval(code: Any, ns: dict[str, Any]) -> Any:
    try:
        return eval(code, ns)        # the relation's own text, from a layout file
    except (InvalidFieldsError, UndecidedError):
        raise
    except Exception as err:
        raise UndecidedError(f"{type(err).__name__}: {err}") from err


def _as_index_array(name: str, value: Any) -> np.ndarray:
    try:
        a = np.asarray(value) if not isinstance(value, np.ndarray) else value
    except ValueError as err:
        raise InvalidFieldsError(f"{name} is ragged") from err
    if a.dtype.kind in "OSU":       # objects or text: what they hold, if integers
        try:
            ints = a.astype(np.int64)
        except (ValueError, TypeError, OverflowError) as err:
            raise InvalidFieldsError(f"{name} holds no integers ({a.dtype})") from err
        if a.dtype.kind == "O" and not all(isinstance(v, (int, np.integer))
                                           for v in a.reshape(-1)):
            raise UndecidedError(f"{name} holds {a.dtype}")
        return ints
    if a.dtype.kind in "iu":
        if a.size and a.dtype.kind == "u" and int(a.max()) >= 2**63:
            raise InvalidFieldsError(f"{name} holds {int(a.max())}")
        return a.astype(np.int64)
    if a.dtype.kind in "fcb":
        raise UndecidedError(f"{name} is {a.dtype}")
    raise InvalidFieldsError(f"{name} is not numeric ({a.dtype})")


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise UndecidedError(f"{name} = {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        raise UndecidedError(f"{name} = {value!r}")
    raise InvalidFieldsError(f"{name} = {value!r} is not an integer")


def decode(raw: dict, params: dict[str, int], fields: dict[str, Any],
           shape: tuple[int, ...]) -> np.ndarray:
    """The dense tensor that ``fields`` describe under the layout ``raw`` (the TOML table,
    templates expanded); InvalidFieldsError or UndecidedError."""
    return decoded(raw, params, fields, shape)[0]


def stored_mask(raw: dict, params: dict[str, int], fields: dict[str, Any],
                shape: tuple[int, ...]) -> np.ndarray:
    """Where ``fields`` store an entry under the layout ``raw`` (explicit zeros too: a
    diagonal's or a block's padding)."""
    return decoded(raw, params, fields, shape)[1]


def decoded(raw: dict, params: dict[str, int], fields: dict[str, Any],
            shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decode`'s tensor and :func:`stored_mask`'s mask."""
    specs: dict[str, str] = raw["fields"]
    value_text: str = raw["value"]
    # a number: a pattern layout, every entry holds it (docs/layouts.md, "Pattern layouts")
    constant = float(value_text) if re.fullmatch(r"\s*[+-]?[\d.]+([eE][+-]?\d+)?\s*",
                                                 value_text) else None
    value_array = value_text.split("[", 1)[0].strip()
    scalars: dict[str, int] = {k: int(v) for k, v in params.items()}
    arrays: dict[str, np.ndarray] = {}
    for name, spec in specs.items():
        if "[" in spec:
            continue
        if name in fields:
            scalars[name] = _as_int(name, fields[name])
    for k, expr in enumerate(raw["shape"]):       # shape fields from the shape given
        if k >= len(shape):
            raise InvalidFieldsError("the shape has fewer axes than the layout")
        if re.fullmatch(r"[A-Za-z_]\w*", expr) and expr not in scalars:
            scalars[expr] = int(shape[k])
    if len(raw["shape"]) != len(shape):
        raise InvalidFieldsError("the shape has another number of axes")
    derived = raw.get("derived", {}) or {}
    for name, spec in specs.items():
        if "[" not in spec or name in derived:
            continue
        if name not in fields:
            raise InvalidFieldsError(f"{name} is missing")
        v = fields[name]
        if name == value_array:
            try:
                a = np.asarray(v)
            except ValueError as err:
                raise InvalidFieldsError(f"{name} is ragged") from err
            if a.dtype.kind not in "biufc":
                raise InvalidFieldsError(f"{name} is not numeric ({a.dtype})")
            arrays[name] = a
        else:
            arrays[name] = _as_index_array(name, v)
    for name, expr in derived.items():
        m = re.fullmatch(r"prefix_sum\(\s*(?:(\w+)\s*\*\s*)?(\w+)\s*\)", expr.strip())
        if not m:
            raise UndecidedError(f"derived {expr!r}")
        k = scalars[m.group(1)] if m.group(1) else 1
        src = arrays[m.group(2)]
        arrays[name] = np.concatenate([[0], np.cumsum(k * src.reshape(-1))]).astype(np.int64)
    reader = _Reader(arrays, scalars)
    ns = reader.namespace()
    for name, spec in specs.items():       # scalars no one gave: from an array's length
        if "[" not in spec and name not in scalars:
            for other, s in specs.items():
                dims = re.findall(r"\[([^\]]*)\]", s)
                if dims and dims[0].strip() == name and other in arrays:
                    scalars[name] = ns[name] = int(np.shape(arrays[other])[0]) if \
                        np.ndim(arrays[other]) else 0
                    break
            else:
                raise UndecidedError(f"scalar {name} not given")
    for name, spec in specs.items():       # every array of its declared extents
        if "[" not in spec or name not in arrays:
            continue
        dims = tuple(_eval(_compile(d), ns) for d in re.findall(r"\[([^\]]*)\]", spec))
        if any(d >= 2**62 for d in dims):
            raise InvalidFieldsError(f"{name} would have extents {dims}")
        if any(d < 0 for d in dims):
            raise InvalidFieldsError(f"{name} has negative extents {dims}")
        got = np.shape(arrays[name])
        if got != dims and len(got) == 1 and got[0] == math.prod(dims):
            arrays[name] = arrays[name].reshape(dims)       # given flat, in C order
        elif got != dims:
            if math.prod(got) == math.prod(dims):
                raise UndecidedError(f"{name} of shape {got} for {dims}")
            raise InvalidFieldsError(f"{name} has shape {got}, declared {dims}")
    for k, expr in enumerate(raw["shape"]):
        if _eval(_compile(expr), ns) != shape[k]:
            raise InvalidFieldsError(f"shape {expr} is not {shape[k]}")
    data = np.full((), constant) if constant is not None else arrays[value_array]
    return _entries(raw["relation"], value_text, reader, ns, data, shape)


def _entries(relation: str, value_text: str, reader: _Reader, ns: dict[str, Any],
             data: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    m = re.fullmatch(r"\s*\{\s*\[([^\]]*)\]\s*->\s*\[([^\]]*)\]\s*:(.*)\}\s*", relation, re.S)
    if not m:
        raise UndecidedError("relation not read")
    pvars = [v.strip() for v in m.group(1).split(",") if v.strip()]
    gvars = [v.strip() for v in m.group(2).split(",") if v.strip()]
    subscripts = [_compile(s) for s in re.findall(r"\[([^\]]*)\]", value_text)]
    pairs: dict[tuple, tuple] = {}
    for disjunct in _split_top(_strip_parens(m.group(3)), "or"):
        conjuncts = [link for c in _split_top(_strip_parens(disjunct), "and")
                     for link in _unchain(_strip_parens(c))]
        for p, g in _points(conjuncts, pvars, gvars, ns):
            pairs[(p, g)] = p
    dense = np.zeros(shape, data.dtype if data.dtype.kind in "biufc" else np.float64)
    stored = np.zeros(shape, bool)
    for (p, g), _ in pairs.items():
        if any(not 0 <= c < n for c, n in zip(g, shape)):
            raise InvalidFieldsError(f"entry {g} is outside the shape {shape}")
        local = dict(ns, **dict(zip(pvars, p)))
        where = tuple(_eval(s, local) for s in subscripts)
        for d, k in enumerate(where):
            if d >= data.ndim or not 0 <= k < data.shape[d]:
                raise InvalidFieldsError(f"value {where} is outside the values' shape {data.shape}")
        dense[g] += data[where]
        stored[g] = True
    return dense, stored


def _unchain(conjunct: str) -> list[str]:
    """A chain of comparisons as its links (``gj = pi = offset(pd)``: ``gj = pi`` and ``pi =
    offset(pd)``), as spf reads it."""
    parts = re.split(r"(<=|>=|<|>|(?<![<>=!])=(?!=))", conjunct)
    if len(parts) <= 3:
        return [conjunct]
    return [f"{parts[k].strip()} {parts[k + 1]} {parts[k + 2].strip()}"
            for k in range(0, len(parts) - 2, 2)]


def _bounds(conjunct: str, var: str) -> list[tuple[str, str]]:
    """(op, the other side) for each comparison of the bare ``var`` in a chain."""
    parts = re.split(r"(<=|>=|<|>|(?<![<>=!])=(?!=))", conjunct)
    out = []
    for k in range(0, len(parts), 2):
        if parts[k].strip() != var:
            continue
        if k >= 2:
            out.append((_flip(parts[k - 1]), parts[k - 2]))
        if k + 2 < len(parts):
            out.append((parts[k + 1], parts[k + 2]))
    return out


def _flip(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]


def _points(conjuncts: list[str], pvars: list[str], gvars: list[str],
            ns: dict[str, Any]) -> Iterator[tuple[tuple, tuple]]:
    """(physical point, logical coordinates) of one disjunct."""
    codes = [_compile(c) for c in conjuncts]
    names = [_names(c) for c in conjuncts]
    level = [max([pvars.index(v) for v in ns_ if v in pvars], default=-1) for ns_ in names]
    has_g = [bool(ns_ & set(gvars)) for ns_ in names]
    defs: dict[str, Any] = {}
    for c in conjuncts:
        m = re.fullmatch(r"(\w+)\s*=\s*(.+)", c)
        if m and m.group(1) in gvars and not (_names(m.group(2)) & set(gvars)):
            defs.setdefault(m.group(1), _compile(m.group(2)))
    if set(defs) != set(gvars):
        raise UndecidedError("a logical index without a definition")

    if not all(_eval(code, ns) for code, lv, hg in zip(codes, level, has_g)
               if lv < 0 and not hg):
        return

    def rec(d: int, local: dict[str, Any]) -> Iterator[tuple[tuple, tuple]]:
        if d == len(pvars):
            g = {v: _eval(defs[v], local) for v in gvars}
            full = dict(local, **g)
            for code, hg in zip(codes, has_g):
                if hg and not _eval(code, full):
                    return
            yield tuple(local[v] for v in pvars), tuple(g[v] for v in gvars)
            return
        var = pvars[d]
        lo, hi = -math.inf, math.inf
        for c, lv, hg in zip(conjuncts, level, has_g):
            if lv != d or hg:
                continue
            for op, other in _bounds(c, var):
                if _names(other) & set(pvars[d:]):
                    continue
                v = _eval(_compile(other), local)
                if op in ("<", "<="):
                    hi = min(hi, v - (op == "<"))
                elif op in (">", ">="):
                    lo = max(lo, v + (op == ">"))
                else:
                    lo, hi = max(lo, v), min(hi, v)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise UndecidedError(f"no bounds on {var}")
        if hi - lo > MAX_RANGE:
            raise UndecidedError(f"{var} ranges over {hi - lo} values")
        for value in range(int(lo), int(hi) + 1):
            inner = dict(local, **{var: value})
            if all(_eval(code, inner) for code, lv, hg in zip(codes, level, has_g)
                   if lv == d and not hg):
                yield from rec(d + 1, inner)

    yield from rec(0, dict(ns))
