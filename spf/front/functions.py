"""The functions of the expression language: each with its numpy reference, its C and its
algebraic facts for Z3.

A function applied to a tensor's value (``abs(A(i,j))``) keeps the iteration over the
tensor's entries only when it yields 0 where the tensor is absent (0); Z3 decides that from
the facts registered here (``exp(0) = 1``, ``sqrt(0) = 0``, ``abs`` and ``max`` defined
exactly).  :func:`register` adds a function of your own.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .value_types import Kind, ValueType

# the C of a call: the arguments (already in the call's value type) and that type
CPrinter = Callable[[Sequence[str], ValueType], str]
# the Z3 term of a call and the facts it brings: arguments (Z3 reals) and the z3 module
Z3Model = Callable[[Sequence[Any], Any], tuple[Any, list[Any]]]


@dataclass(frozen=True)
class Function:
    """``name`` of ``arity`` arguments: ``numpy`` computes it (and gives numpy's result
    type), ``c`` prints it, ``z3`` models it; ``real_only``: refused on complex values."""

    name: str
    arity: int
    numpy: Callable[..., Any] = field(compare=False)
    c: CPrinter = field(compare=False)
    z3: Z3Model = field(compare=False)
    real_only: bool = False


def uninterpreted(name: str, at_zero: float | None) -> Z3Model:
    """A function Z3 knows only by its value at 0 (``None``: not even that)."""
    def model(args: Sequence[Any], z3: Any) -> tuple[Any, list[Any]]:
        f = z3.Function(f"spf_{name}", *[z3.RealSort()] * (len(args) + 1))
        term = f(*args)
        facts = [] if at_zero is None else [z3.Implies(args[0] == 0, term == at_zero)]
        return term, facts
    return model


def _math(name: str) -> CPrinter:
    """A <tgmath.h> function: the float, double or complex variant by its argument."""
    return lambda args, vt: f"{name}({', '.join(args)})"


def _abs_c(args: Sequence[str], vt: ValueType) -> str:
    if vt.kind in (Kind.FLOAT, Kind.COMPLEX):
        return f"fabs({args[0]})"
    return f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"


def _sign_c(args: Sequence[str], vt: ValueType) -> str:
    x = args[0]
    sign = f"((({x}) > 0) - (({x}) < 0))"
    # numpy's sign of NaN is NaN (both comparisons are false for it)
    return f"(({x}) != ({x}) ? ({x}) : {sign})" if vt.kind is Kind.FLOAT else sign


# the local of a generated function that a value's helper sets when numpy would refuse the
# value (spf.back.status): the function returns it
VALUE_STATUS = "spf_value_status"


def _pow_c(args: Sequence[str], vt: ValueType) -> str:
    """C's pow in floats (a complex number to the power 0 is 1, as numpy's); integers
    exactly, wrapping in their type as numpy's (spf_ipow: square and multiply in unsigned
    64-bit arithmetic; a signed exponent below 0, which numpy refuses, sets the function's
    :data:`VALUE_STATUS`, which it returns)."""
    if vt.kind is Kind.COMPLEX:     # numpy's z ** 0 is 1 (C's cpow: exp(0 * log z), nan at 0)
        return f"(({args[1]}) == 0 ? ({vt.c})1 : pow({args[0]}, {args[1]}))"
    if vt.kind is Kind.FLOAT:
        return f"pow({args[0]}, {args[1]})"
    if vt.kind is Kind.INT:
        return (f"spf_ipow_signed((uint64_t)({args[0]}), (int64_t)({args[1]}), "
                f"&{VALUE_STATUS})")
    return f"spf_ipow((uint64_t)({args[0]}), (uint64_t)({args[1]}))"


def _minmax_c(less: bool) -> CPrinter:
    op = "<" if less else ">"
    # numpy's minimum/maximum propagate a NaN: (a op b || a != a) ? a : b
    return lambda args, vt: (f"((({args[0]}) {op} ({args[1]}) || ({args[0]}) != ({args[0]})) "
                             f"? ({args[0]}) : ({args[1]}))")


def _minmax_z3(less: bool) -> Z3Model:
    def model(args: Sequence[Any], z3: Any) -> tuple[Any, list[Any]]:
        a, b = args
        return z3.If(a <= b if less else a >= b, a, b), []
    return model


def _pow_z3(args: Sequence[Any], z3: Any) -> tuple[Any, list[Any]]:
    f = z3.Function("spf_pow", z3.RealSort(), z3.RealSort(), z3.RealSort())
    term = f(*args)
    return term, [z3.Implies(z3.And(args[0] == 0, args[1] > 0), term == 0),
                  z3.Implies(args[1] == 0, term == 1)]


FUNCTIONS: dict[str, Function] = {}
SERIALS: dict[str, int] = {}        # name -> the registration its definition came from
_registrations = itertools.count(1)
_kept: ContextVar[Mapping[str, Function] | None] = ContextVar("spf_functions", default=None)
_CALLED = re.compile(r"([A-Za-z_]\w*)\s*\(")


def register(function: Function) -> Function:
    """Add ``function`` to the language (its name is then reserved in kernels).  Registering
    a name again replaces its definition for what is built from then on: a Kernel keeps the
    definitions it was built with (:func:`keeping`), and caches keyed by an expression's
    text key by :func:`definitions` too."""
    FUNCTIONS[function.name] = function
    SERIALS[function.name] = next(_registrations)
    return function


def definitions(text: str) -> tuple[tuple[str, int], ...]:
    """The registered functions ``text`` may call (a name followed by '('), each with the
    serial of its current definition: what the text means besides itself."""
    return tuple((name, SERIALS[name]) for name in sorted(set(_CALLED.findall(text)))
                 if name in SERIALS)


def function(name: str) -> Function:
    """``name``'s definition: the one kept by the Kernel being worked on (:func:`keeping`),
    else the registered one."""
    kept = _kept.get()
    return kept[name] if kept is not None and name in kept else FUNCTIONS[name]


@contextmanager
def keeping(table: Mapping[str, Function]) -> Iterator[None]:
    """Within: :func:`function` gives ``table``'s definitions (a Kernel's, taken when it was
    built)."""
    token = _kept.set(table)
    try:
        yield
    finally:
        _kept.reset(token)


for _f in (
    Function("abs", 1, np.abs, _abs_c,
             lambda a, z3: (z3.If(a[0] >= 0, a[0], -a[0]), [])),
    Function("sign", 1, np.sign, _sign_c,
             lambda a, z3: (z3.If(a[0] > 0, 1, z3.If(a[0] < 0, -1, 0)), []), real_only=True),
    Function("sqrt", 1, np.sqrt, _math("sqrt"), uninterpreted("sqrt", 0)),
    Function("exp", 1, np.exp, _math("exp"), uninterpreted("exp", 1)),
    Function("log", 1, np.log, _math("log"), uninterpreted("log", None)),
    Function("sin", 1, np.sin, _math("sin"), uninterpreted("sin", 0)),
    Function("cos", 1, np.cos, _math("cos"), uninterpreted("cos", 1)),
    Function("tanh", 1, np.tanh, _math("tanh"), uninterpreted("tanh", 0)),
    Function("pow", 2, np.power, _pow_c, _pow_z3),
    Function("where", 3, np.where, lambda a, vt: f"(({a[0]}) ? ({a[1]}) : ({a[2]}))",
             lambda a, z3: (z3.If(a[0] != 0, a[1], a[2]), [])),
    Function("min", 2, np.minimum, _minmax_c(True), _minmax_z3(True), real_only=True),
    Function("max", 2, np.maximum, _minmax_c(False), _minmax_z3(False), real_only=True),
):
    register(_f)

