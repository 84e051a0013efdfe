"""Semirings: the ``add`` and ``mul`` a kernel's statement uses instead of ``+`` and ``*``.

A kernel ``y(i) = A(i,j) * x(j)`` under a semiring computes ``y(i) = add over j of
mul(A(i,j), x(j))`` over the stored entries (GraphBLAS's structural semantics): an output
element no product reaches holds the semiring's ``zero``.  Operators are written in spf's
expression language over ``a`` and ``b`` (integers, ``+ - * /``, parentheses, ``min``,
``max``, ``lor``, ``land``: logical or/and, a nonzero value is true, the result 1 or 0), so
no C text from the user reaches the compiler; ``zero`` and ``one`` are numbers or
``inf``/``-inf``.  Whether ``add`` is associative and commutative (needed to reorder a
reduction: parallel sums into private copies, ``reassociate=True``) is declared or proven by
Z3 over the reals.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..concurrency import share_z3_context, symbolic
from ..errors import SpecError
from .index_expr import BinOp, Call, IExpr, Name, Num, names, parse_index_expr
from .value_types import Kind, ValueType

OPERANDS = ("a", "b")
FUNCTIONS = {"min": 2, "max": 2, "lor": 2, "land": 2}


@dataclass(frozen=True)
class Semiring:
    """``add`` and ``mul`` (expressions over ``a`` and ``b``), ``zero`` (the identity of
    ``add``: the value of absent entries) and ``one`` (the identity of ``mul``).
    ``associative``/``commutative`` of ``add``: None = prove with Z3."""

    add: str
    mul: str
    zero: float = 0.0           # a number, or text such as "inf" (made a float)
    one: float = 1.0
    associative: bool | None = None
    commutative: bool | None = None
    name: str = "user-defined"
    omp: str | None = None      # OpenMP reduction identifier of add (built-ins only)
    _builtin: bool = field(default=False, repr=False, compare=False)   # laws known
    _add: IExpr = field(init=False, repr=False, compare=False)
    _mul: IExpr = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "_add", _operator(self.add, "add"))
        set_(self, "_mul", _operator(self.mul, "mul"))
        set_(self, "zero", _number(self.zero, "zero"))
        set_(self, "one", _number(self.one, "one"))
        for v in {self.zero, self.one, 0.0, 1.0}:
            got = _evaluate(self._add, self.zero, v)
            if not (got == v or (math.isnan(got) and math.isnan(v))):
                raise SpecError(f"semiring {self.name}: zero={self.zero} is not the identity of "
                                f"add={self.add!r}: add({self.zero}, {v}) = {got}")
        if self._builtin:
            return
        for law, declared in (("associative", self.associative),
                              ("commutative", self.commutative)):
            proven, example = _prove(self._add, law)
            if declared and example:
                raise SpecError(f"semiring {self.name}: add={self.add!r} is declared {law} but "
                                f"is not: {example}")
            if declared is None:
                set_(self, law, proven)

    @property
    def is_plus_times(self) -> bool:
        return self._add == BinOp("+", Name("a"), Name("b")) \
            and self._mul == BinOp("*", Name("a"), Name("b")) and self.zero == 0.0

    @property
    def divides(self) -> bool:
        """Whether ``add`` or ``mul`` divides (its C then needs the helper ``spf_div``)."""
        return "/" in f"{self.add} {self.mul}"

    @property
    def reorderable(self) -> bool:
        """Whether a reduction with ``add`` may run in any order and grouping."""
        return bool(self.associative and self.commutative)

    @property
    def annihilates(self) -> bool:
        """Whether ``zero`` annihilates ``mul`` (``mul(zero, x) = mul(x, zero) = zero``, checked
        on finite sample values: ``min_plus`` counts, though ``inf + -inf`` is NaN): then a
        product over the operands' stored entries (an intersection) equals the product over
        every coordinate with absent entries read as ``zero`` (TACO's fill values).
        Otherwise (``pair``) only the structural definition holds."""
        for v in {self.zero, self.one, 0.0, 1.0, 2.5, -3.0}:
            for got in (_evaluate(self._mul, self.zero, v), _evaluate(self._mul, v, self.zero)):
                if got != self.zero:
                    return False
        return True

    def add_value(self, a: Any, b: Any) -> Any:
        """``add(a, b)`` on two numbers of one type, in that type as the generated C computes
        it (numpy scalars: integers wrap, complex numbers stay complex)."""
        if not isinstance(a, np.generic):
            return _evaluate(self._add, float(a), float(b))
        with np.errstate(over="ignore", invalid="ignore"):
            return type(a)(_evaluate(self._add, a, b))

    def zero_c(self) -> str:
        """``zero`` in C (infinities as ``SPF_POS_INF``/``SPF_NEG_INF``, which the file
        defines in the output's type: the limits of an integer type)."""
        return _c_number(self.zero)

    def zero_text(self) -> str:
        """``zero`` as a report shows it (``inf``, ``-inf``, ``0.0``)."""
        return repr(self.zero)

    @property
    def infinite(self) -> bool:
        """Whether ``zero`` or ``one`` is infinite (the file defines the infinities)."""
        return math.isinf(self.zero) or math.isinf(self.one)

    def laws_in(self, vt: ValueType) -> str:
        """"" when ``add``'s laws (associativity and commutativity as :attr:`reorderable`
        says; on bool also ``zero`` as its identity) hold in ``vt``'s arithmetic as C computes
        it: wrapping bit-vectors for integers, C's ``_Bool`` (arithmetic on 0 and 1, any
        nonzero result true) for bool; else why not."""
        if self._builtin or vt.kind not in (Kind.INT, Kind.UINT, Kind.BOOL):
            return ""
        boolean = vt.kind is Kind.BOOL
        if boolean and self.divides:
            return "division is not defined on bool (a zero divisor is undefined in C)"
        if not self.reorderable:
            return ""
        width = 8 * vt.dtype.itemsize
        bits = None if boolean else (width, vt.kind is Kind.INT)
        where = "on bool (C's _Bool)" if boolean else f"in {width}-bit integers"
        laws = ("associative", "commutative") + (("identity",) if boolean else ())
        for law in laws:
            proven, example = _prove(self._add, law, bits, self.zero if boolean else None)
            if not proven:
                what = f"add={self.add!r} " + (
                    f"has not zero={self.zero} (true when nonzero) as its identity"
                    if law == "identity" else f"is {law} over the reals but not")
                return f"{what} {where}" + (f" ({example})" if example else "")
        return ""

    def add_c(self, x: str, y: str) -> str:
        """C for ``add(x, y)``."""
        return _to_c(self._add, {"a": x, "b": y})

    def mul_c(self, factors: list[str]) -> str:
        """C for the product of ``factors``, left to right."""
        if self.is_plus_times:
            return " * ".join(factors)
        used = names(self._mul)
        out = factors[0]
        for f in factors[1:]:
            ignored = [f"(void)({x})" for n, x in (("a", out), ("b", f)) if n not in used]
            out = _to_c(self._mul, {"a": out, "b": f})
            if ignored:      # pair: the operands are read for their structure only
                out = f"({', '.join(ignored)}, {out})"
        return out

    def describe(self) -> str:
        return (f"{self.name} (add: {self.add}, mul: {self.mul}, zero: {self.zero}, one: "
                f"{self.one})")


def _operator(text: Any, what: str) -> IExpr:
    if not isinstance(text, str):
        raise SpecError(f"semiring {what} must be an expression over a and b, got {text!r}")
    e = parse_index_expr(text, f"<semiring {what}>")
    _check(e, what, text)
    return e


def _check(e: IExpr, what: str, text: str) -> None:
    if isinstance(e, Name) and e.name not in OPERANDS:
        raise SpecError(f"semiring {what}={text!r}: unknown name {e.name!r} (operands are a "
                        "and b)")
    if isinstance(e, Call):
        if FUNCTIONS.get(e.name) != len(e.args):
            raise SpecError(f"semiring {what}={text!r}: {e.name}() with {len(e.args)} "
                            f"argument(s) is not an operator; use {sorted(FUNCTIONS)} (two "
                            "arguments), + - * / and numbers")
        for arg in e.args:
            _check(arg, what, text)
    if isinstance(e, BinOp):
        _check(e.lhs, what, text)
        _check(e.rhs, what, text)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise SpecError(f"semiring {what} must be a number or inf/-inf, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"semiring {what} must be a number or inf/-inf, got {value!r}") from None
    if math.isnan(out):
        raise SpecError(f"semiring {what} must not be NaN")
    return out


def _c_number(v: float) -> str:
    if math.isinf(v):
        return "SPF_POS_INF" if v > 0 else "SPF_NEG_INF"
    return repr(float(v))


_C_FUNCTIONS: dict[str, Callable[[str, str], str]] = {
    # not fmin/fmax: gcc calls libm for those unless math is finite-only; a NaN in y is
    # skipped, like fmin's
    "min": lambda x, y: f"(({y}) < ({x}) ? ({y}) : ({x}))",
    "max": lambda x, y: f"(({y}) > ({x}) ? ({y}) : ({x}))",
    "lor": lambda x, y: f"(spf_acc_t)(({x}) != 0 || ({y}) != 0)",
    "land": lambda x, y: f"(spf_acc_t)(({x}) != 0 && ({y}) != 0)",
}


def _to_c(e: IExpr, env: dict[str, str]) -> str:
    if isinstance(e, Num):
        return _c_number(float(e.value))
    if isinstance(e, Name):
        return env[e.name]
    if isinstance(e, Call):
        return _C_FUNCTIONS[e.name](*(_to_c(a, env) for a in e.args))
    if e.op == "/":         # spf_div: no trap in integers (x / 0 is 0, as numpy's)
        return f"spf_div({_to_c(e.lhs, env)}, {_to_c(e.rhs, env)})"
    return f"({_to_c(e.lhs, env)} {e.op} {_to_c(e.rhs, env)})"


def _evaluate(e: IExpr, a: Any, b: Any) -> Any:
    if isinstance(e, Num):
        return float(e.value)
    if isinstance(e, Name):
        return a if e.name == "a" else b
    if isinstance(e, Call):
        x, y = (_evaluate(arg, a, b) for arg in e.args)
        return {"min": min, "max": max}.get(e.name, lambda x, y: float(
            (x != 0 or y != 0) if e.name == "lor" else (x != 0 and y != 0)))(x, y)
    x, y = _evaluate(e.lhs, a, b), _evaluate(e.rhs, a, b)
    with_nan = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                "/": lambda: x / y if y else math.copysign(math.inf, x) if x else math.nan}
    try:
        return with_nan[e.op]()
    except (ArithmeticError, ValueError):
        return math.nan


def _prove(e: IExpr, law: str, bits: tuple[int, bool] | None = None,
           boolean: float | None = None) -> tuple[bool, str]:
    """Whether Z3 proves ``law`` (associative, commutative; identity with ``boolean``) of the
    operator ``e`` over the reals, in ``bits`` = (width, signed) integer arithmetic, or,
    with ``boolean`` = the semiring's zero, on C's ``_Bool`` (operands 0 or 1, computed as
    numbers, a nonzero result true); and a counterexample when it finds one ("" else)."""
    import z3
    with symbolic:
        share_z3_context()
        return _prove_locked(e, law, z3, bits, boolean)


def _prove_locked(e: IExpr, law: str, z3: Any, bits: tuple[int, bool] | None,
                  boolean: float | None) -> tuple[bool, str]:
    a, b, c = z3.Reals("a b c") if bits is None else z3.BitVecs("a b c", bits[0])

    def op(x, y):
        v = _to_z3(e, {"a": x, "b": y}, z3, bits)
        return v if boolean is None else z3.If(v != 0, z3.RealVal(1), z3.RealVal(0))
    s = z3.Solver()
    s.set("timeout", 2000)
    if boolean is not None:
        s.add(*[z3.Or(v == 0, v == 1) for v in (a, b, c)])
    if law == "identity":
        claim = op(z3.RealVal(int(boolean != 0)), a) == a
    elif law == "associative":
        claim = op(op(a, b), c) == op(a, op(b, c))
    else:
        claim = op(a, b) == op(b, a)
    s.add(z3.Not(claim))
    result = s.check()
    if result == z3.unsat:
        return True, ""
    if result == z3.sat:
        m = s.model()
        used = (a,) if law == "identity" else (a, b) if law == "commutative" else (a, b, c)
        vals = ", ".join(f"{v} = {m.eval(v, model_completion=True)}" for v in used)
        return False, f"Z3 found {vals}"
    return False, ""


def _to_z3(e: IExpr, env: dict, z3: Any, bits: tuple[int, bool] | None = None) -> Any:
    """``e`` in Z3: over the reals, or in ``bits`` = (width, signed) bit-vectors (wrapping
    arithmetic, C's truncating division)."""
    def num(v: int) -> Any:
        return z3.RealVal(v) if bits is None else z3.BitVecVal(v, bits[0])
    signed = bits is None or bits[1]
    if isinstance(e, Num):
        return num(e.value)
    if isinstance(e, Name):
        return env[e.name]
    if isinstance(e, Call):
        x, y = (_to_z3(arg, env, z3, bits) for arg in e.args)
        le = (lambda p, q: p <= q) if signed else z3.ULE
        if e.name == "min":
            return z3.If(le(x, y), x, y)
        if e.name == "max":
            return z3.If(le(y, x), x, y)
        truth = z3.Or(x != 0, y != 0) if e.name == "lor" else z3.And(x != 0, y != 0)
        return z3.If(truth, num(1), num(0))
    x, y = _to_z3(e.lhs, env, z3, bits), _to_z3(e.rhs, env, z3, bits)
    div = (lambda: x / y) if signed else (lambda: z3.UDiv(x, y))
    return {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": div}[e.op]()


def _known(name: str, add: str, mul: str, zero: float, one: float,
             omp: str | None) -> Semiring:
    return Semiring(add, mul, zero, one, True, True, name, omp, True)


INF = math.inf
BUILTINS = {s.name: s for s in (
    _known("plus_times", "a + b", "a * b", 0.0, 1.0, "+"),
    _known("min_plus", "min(a, b)", "a + b", INF, 0.0, "min"),
    _known("max_plus", "max(a, b)", "a + b", -INF, 0.0, "max"),
    _known("max_times", "max(a, b)", "a * b", -INF, 1.0, "max"),
    _known("min_times", "min(a, b)", "a * b", INF, 1.0, "min"),
    _known("or_and", "lor(a, b)", "land(a, b)", 0.0, 1.0, None),
    _known("plus_pair", "a + b", "1", 0.0, 1.0, "+"),
    _known("any_pair", "max(a, b)", "1", 0.0, 1.0, "max"),
)}
PLUS_TIMES = BUILTINS["plus_times"]


def semiring_of(value: Any, source: str = "<kernel>") -> Semiring:
    """A built-in semiring by name, or a :class:`Semiring` as given; None: plus_times."""
    if value is None:
        return PLUS_TIMES
    if isinstance(value, Semiring):
        return value
    if isinstance(value, str) and value in BUILTINS:
        return BUILTINS[value]
    raise SpecError(f"unknown semiring {value!r}; the built-ins are {sorted(BUILTINS)}, or "
                    "pass spf.Semiring(add=..., mul=..., zero=..., one=...)", source)
