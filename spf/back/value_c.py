"""The C of a value expression (``abs(A(i,j))``, ``A(i,j) / B(i,j)``): each node computed in
numpy's type for it (:func:`spf.front.value_exprs.type_of`), its operands cast to that type
where C's promotion would differ, its numbers written in it.

What C would do differently from numpy, and what is printed instead: ``/`` divides in the
node's float or complex type, never C's integer division (``1 / 0`` is ``inf``, ``7 / 2``
is 3.5, as numpy's true division); an integer sum or product narrower than ``int`` is
wrapped in its type (C computes ``uint8 + uint8`` in ``int``); a float operand is not
converted to an integer node's type (a ``where`` condition of 0.5 is true, a NaN is not cast);
``<`` on complex numbers orders them as numpy does (real parts, then imaginary parts); an
integer literal beyond the type it is compared in makes the comparison constant."""
from __future__ import annotations

import math
import operator
from collections.abc import Collection, Mapping
from fractions import Fraction

import numpy as np

from ..front.functions import function
from ..front.rhs import (
    COMPARISONS,
    LOGIC,
    Apply,
    Call,
    Coefficient,
    Node,
    Number,
    Op,
    Ref,
    children,
    is_python_number,
    number_value,
    numbers_only,
    text,
)
from ..front.value_exprs import number_type, type_of
from ..front.value_types import Kind, ValueType, can_cast, result_type

INTEGERS = (Kind.INT, Kind.UINT, Kind.BOOL)


def value_c(tree: Node, reads: Mapping[str, str], types: Mapping[str, ValueType]) -> str:
    """``tree`` in C: ``reads`` the C of each operand's value (by name), ``types`` their
    value types.  An expression of numbers only is its value, computed as numpy does
    (:func:`~spf.front.rhs.number_value`): C never computes what numpy folds."""
    if isinstance(tree, Number):
        return literal_c(tree.value, None)
    if numbers_only(tree):
        value = number_value(tree, "<string>")
        return literal_c(value, number_type(value, text(tree)))
    if isinstance(tree, Ref):
        return reads[tree.name] if tree.indices is not None else \
            reads.get(tree.name, tree.name)        # an index, or a scalar operand's value
    mine = type_of(tree, types)
    if isinstance(tree, Call):
        args = [_in(a, reads, types, mine) for a in tree.args]
        return f"(({mine.c}){function(tree.function).c(args, mine)})"
    assert isinstance(tree, Apply)
    if tree.op in LOGIC:         # truth values: nonzero is true
        truths = [_truth(o, reads, types) for o in tree.operands]
        return f"(!{truths[0]})" if tree.op is Op.NOT else \
            f"({truths[0]} {'&&' if tree.op is Op.AND else '||'} {truths[1]})"
    if tree.op in COMPARISONS:
        return f"(({mine.c}){_comparison(tree, reads, types)})"
    weak = [_weak_number(o) for o in tree.operands]
    args = [literal_c(w, mine, real=tree.op is Op.DIV) if w is not None
            else _in(o, reads, types, mine) for o, w in zip(tree.operands, weak)]
    code = f"(-{args[0]})" if tree.op is Op.NEG else f"({args[0]} {tree.op.value} {args[1]})"
    if tree.op is Op.DIV and mine.kind is Kind.COMPLEX and weak[1] is None:
        code = f"spf_cdiv(({mine.c})({args[0]}), ({mine.c})({args[1]}))"   # numpy's method
    if tree.op is not Op.DIV and mine.kind in INTEGERS and mine.dtype.itemsize < 4:
        code = f"(({mine.c}){code})"     # C computes it in int: wrapped in its type, as numpy
    return code


def helpers_of(tree: Node, types: Mapping[str, ValueType]) -> set[str]:
    """The helpers (:data:`spf.back.names.HELPERS`) the C of ``tree`` needs: <tgmath.h>,
    and the integer power when ``tree`` raises integers to a power (``spf_ipow_signed``
    for signed ones, whose negative exponents set the function's status: it needs
    :func:`spf.back.status.value_status_declaration`, see :func:`sets_status`)."""
    def pows(n: Node) -> set[str]:
        kind = type_of(n, types).kind if isinstance(n, Call) and n.function == "pow" \
            and not numbers_only(n) else None       # numbers: folded, no C computes them
        own = {"spf_ipow"} if kind in INTEGERS else set()
        own |= {"spf_ipow_signed"} if kind is Kind.INT else set()
        if isinstance(n, Apply) and n.op is Op.DIV and not numbers_only(n) and \
                type_of(n, types).kind is Kind.COMPLEX:
            own.add("spf_cdiv")
        return own.union(*map(pows, children(n)))
    return {"spf_tgmath"} | pows(tree)


def sets_status(helpers: Collection[str]) -> bool:
    """Whether C using ``helpers`` sets its function's value status
    (:data:`spf.back.status.VALUE_STATUS`)."""
    return "spf_ipow_signed" in helpers


def _truth(n: Node, reads: Mapping[str, str], types: Mapping[str, ValueType]) -> str:
    """``n`` as a truth value (``and``, ``or``, ``not``): nonzero is true, NaN included."""
    if numbers_only(n):
        return str(int(bool(number_value(n, "<string>") != 0)))
    return f"({value_c(n, reads, types)} != 0)"


def _weak_number(n: Node) -> int | float | None:
    """The value of ``n`` when it is a Python number numpy promotes weakly (a literal, or an
    expression of literals Python computes: ``2 - 1``); None otherwise (a function's value
    is a numpy scalar of its own type)."""
    if isinstance(n, Number):
        return n.value
    if not numbers_only(n):
        return None
    value = number_value(n, "<string>")
    return value if is_python_number(value) else None


_PY_COMPARE = {Op.LT: operator.lt, Op.LE: operator.le, Op.GT: operator.gt,
               Op.GE: operator.ge, Op.EQ: operator.eq, Op.NE: operator.ne}


def _comparison(tree: Apply, reads: Mapping[str, str], types: Mapping[str, ValueType]) -> str:
    """A comparison in the operands' common type, as numpy's: numbers promote weakly
    (``int8 < 2.5`` compares in float64, ``bool < 2`` in int64); an integer number beyond
    that type decides it alone (``int8 < 300`` is true, as numpy 2 compares); complex
    numbers are ordered by real parts, then imaginary parts (a NaN part: false)."""
    left, right = tree.operands
    weak = [_weak_number(o) for o in tree.operands]
    typed = [type_of(o, types) for o, w in zip(tree.operands, weak) if w is None]
    numbers = tuple(w for w in weak if w is not None)
    common = result_type(*typed, weak=numbers)
    compare = _PY_COMPARE[tree.op]
    for k, w in enumerate(weak):
        if w is not None and typed and not fits(w, common):
            other = value_c(tree.operands[1 - k], reads, types)
            beyond = [w, 0] if k == 0 else [0, w]   # any value of the type
            return f"((void){other}, {int(compare(*beyond))})"
    a, b = (_in(o, reads, types, common) for o in (left, right))
    if common.kind is not Kind.COMPLEX or tree.op in (Op.EQ, Op.NE):
        return f"({a} {tree.op.value} {b})"
    strict = {Op.LT: "<", Op.LE: "<", Op.GT: ">", Op.GE: ">"}[tree.op]
    imag = tree.op.value
    # numpy's order of complex numbers: real parts, then imaginary parts; a NaN is unordered
    return (f"((creal({a}) {strict} creal({b}) && cimag({a}) == cimag({a}) && "
            f"cimag({b}) == cimag({b})) || (creal({a}) == creal({b}) && "
            f"cimag({a}) {imag} cimag({b})))")


def fits(value: int | float, vt: ValueType) -> bool:
    """Whether the number ``value`` is one of ``vt``'s (an integer within an integer type's
    range; any number in a float or complex type)."""
    if vt.kind not in INTEGERS:
        return True
    if isinstance(value, float):
        return False
    if vt.kind is Kind.BOOL:
        return value in (0, 1)
    info = np.iinfo(vt.dtype)
    return int(info.min) <= value <= int(info.max)


def _in(n: Node, reads: Mapping[str, str], types: Mapping[str, ValueType],
        parent: ValueType) -> str:
    """Operand ``n`` of a node of type ``parent``: a number written in that type (numpy
    promotes it weakly); a value cast to it when its own type differs and numpy's
    same_kind casting allows it (an integer argument of sqrt computes in double, as
    numpy's), not otherwise (a complex number under a real result: abs of it; a float
    condition of an integer where: its truth, not its truncation)."""
    weak = _weak_number(n)
    if weak is not None:
        return literal_c(weak, parent)
    code = value_c(n, reads, types)
    own = type_of(n, types)
    if own == parent or not can_cast(own, parent):
        return code
    return f"(({parent.c}){code})"


def literal_c(value: int | float | np.generic, vt: ValueType | None, real: bool = False) -> str:
    """The number ``value`` in C, in the type ``vt`` as numpy converts a Python number to
    it (None: as written, an integer or a double); ``real``: a float literal (a division's
    operand: C divides integers otherwise).  An integer beyond ``int`` is cast to an integer
    ``vt``; inf and nan are GCC's builtins; a numpy scalar is its number, a truth 1 or 0."""
    if isinstance(value, (np.generic, bool)):
        value = int(value) if isinstance(value, (bool, np.bool_)) else value.item()
    if vt is None or vt.kind in INTEGERS:
        code = _double(float(value)) if real or isinstance(value, float) else _integer(value)
        small = isinstance(value, float) or -2 ** 31 <= value < 2 ** 31
        return code if vt is None or small else f"(({vt.c}){code})"
    single = vt.dtype.itemsize * (2 if vt.kind is Kind.FLOAT else 1) == 8   # float, complex64
    if isinstance(value, int) and abs(value) < 2 ** 24 and not real:
        return _integer(value)          # exact in every float type
    # an integer rounded once to float (as numpy's), a Python float converted to vt
    code = f"{value}.0f" if isinstance(value, int) and single else _double(float(value))
    return code if vt.is_float64 else f"(({vt.c}){code})"


def implicit_c(constant: float, vt: ValueType) -> str:
    """A pattern layout's value (the constant every stored entry holds) in C, in ``vt``."""
    return f"(({vt.c}){literal_c(int(constant) if constant.is_integer() else constant, vt)})"


def number_c(coefficient: Coefficient, vt: ValueType) -> str:
    """A coefficient on its own (a number broadcast over the output) in C, in ``vt``."""
    if isinstance(coefficient, Fraction):
        return (f"({literal_c(coefficient.numerator, vt, real=True)} / "
                f"{literal_c(coefficient.denominator, vt, real=True)})")
    return literal_c(coefficient, vt)


def negation_wraps(vt: ValueType) -> bool:
    """Whether C's negative of a ``vt`` value needs a cast to be numpy's: C negates an integer
    narrower than ``int`` in ``int`` (-(-128) of int8 is 128 there), numpy wraps it in the
    type (-128)."""
    return vt.kind in (Kind.INT, Kind.UINT) and vt.dtype.itemsize < 4


def negated_c(code: str, vt: ValueType) -> str:
    """numpy's negative of ``code``, a value of type ``vt``, in C (wrapped in the type)."""
    return f"(({vt.c})-({code}))" if negation_wraps(vt) else f"-({code})"


def scaled_c(code: str, coefficient: Coefficient, vt: ValueType) -> str:
    """``coefficient * code`` in C, the coefficient written in the product's type ``vt``; a
    Fraction divides exactly as written (``(rhs) / 3``: ``vt`` is a float type)."""
    if isinstance(coefficient, Fraction):
        num = "" if coefficient.numerator == 1 else \
            f"{literal_c(coefficient.numerator, vt)} * "
        return f"{num}{code} / {literal_c(coefficient.denominator, vt)}"
    return f"{literal_c(coefficient, vt)} * {code}"


def _integer(value: int) -> str:
    """An integer literal of C (``long long`` or ``unsigned long long`` beyond ``int``)."""
    if -2 ** 31 <= value < 2 ** 31:
        return str(value)
    if value == -2 ** 63:
        return "(-9223372036854775807LL - 1)"
    return f"{value}LL" if -2 ** 63 < value < 2 ** 63 else f"{value}ULL"


def _double(value: float) -> str:
    """A double literal; inf and nan as GCC's builtins."""
    if math.isnan(value):
        return '__builtin_nan("")'
    if math.isinf(value):
        return "__builtin_inf()" if value > 0 else "(-__builtin_inf())"
    return repr(value)
