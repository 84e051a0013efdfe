"""Operands bound to a statement's tensors as users hold them, for :func:`spf.evaluate` and
:func:`spf.tune` alike: the statement parsed once (per the definitions of the functions it
calls), keywords told apart into options and operands, each operand's layout inferred (a
Tensor's own, the dense layout of a numpy array's order, the first layout
``layouts/defaults.toml`` lists for a scipy or pydata object that can store it) and the
kernel typed by numpy's promotion of the operands' value types.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from .decide.options import NAMES
from .errors import SCALAR_OPERAND, ArgumentError, SpfError
from .front.functions import definitions
from .front.kernel_spec import Expr, parse_expr
from .front.layout import Layout
from .front.layout_path import default_layout, default_layouts, for_order, load_layout
from .front.value_types import VALUE_TYPES, ValueType, held_type
from .runtime.fields import as_array
from .runtime.operands import as_tensor, check_arrays, is_pydata, is_scipy
from .tensor import Tensor

_exprs: dict[tuple, Expr] = {}      # by the text and the definitions of the functions it calls


def clear_parsed() -> None:
    """Forget the statements parsed in this process."""
    _exprs.clear()


def parsed_statement(expr: str) -> Expr:
    """``expr`` parsed, once per text and definitions of the functions it calls."""
    if not isinstance(expr, str):
        raise ArgumentError(f"evaluate: the expression must be a string such as "
                            f"'y(i) = A(i,j) * x(j)', got {type(expr).__name__}")
    key = (expr, definitions(expr))
    if key not in _exprs:
        _exprs[key] = parse_expr(expr)
    return _exprs[key]


def split_keywords(caller: str, text: str, names: set[str], given: Mapping[str, Any],
                   keywords: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the options, the operands) among the keywords ``given`` to ``caller``: those not
    ``names`` (the tensors of statement ``text``) must be among ``keywords``."""
    options = {k: v for k, v in given.items() if k not in names}
    unknown = sorted(set(options) - set(keywords))
    if unknown and keywords:
        raise ArgumentError(f"{caller}: {unknown} are neither tensors of {text!r} "
                            f"({sorted(names)}) nor params or kernel options "
                            f"({', '.join(NAMES)})")
    if unknown:
        raise ArgumentError(f"{caller}: {unknown} are not tensors of {text!r} "
                            f"({sorted(names)})")
    return options, {k: v for k, v in given.items() if k in names}


def index_width(index_type: str | None, operands: Iterable[Any]) -> str | None:
    """The index width of a kernel over ``operands``: ``index_type`` when given, else that of
    the first Tensor among them that is not int32, else None (the layouts' own)."""
    return index_type or next((v.layout.index_type for v in operands if isinstance(v, Tensor)
                               and v.layout.index_type != "int32"), None)


def bind_operands(parsed: Expr, operands: Mapping[str, Any], asked: Mapping[str, Any],
                  width: str | None, caller: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the values to call the kernel with, the layout of each tensor input); errors start
    with ``caller``."""
    bound: dict[str, Any] = {}
    chosen: dict[str, Any] = {}
    for acc in parsed.factors:
        name = acc.tensor
        if name in bound or name != parsed.original(name):
            continue                    # bound, or a tensor read again (its alias)
        if name not in operands:
            raise ArgumentError(f"{caller}: missing operand {name!r}"
                                + SCALAR_OPERAND * (not acc.indices))
        value = operands[name]
        if not acc.indices:
            bound[name] = value
            continue
        if name in asked:
            chosen[name] = asked[name]
            bound[name] = value
            continue
        bound[name], chosen[name] = infer_operand(name, value, width, caller,
                                                  f"layouts={{{name!r}: ...}}")
    return bound, chosen


def infer_operand(name: str, value: Any, width: str | None, caller: str,
                  override: str) -> tuple[Any, Layout]:
    """The value to pass for operand ``name`` and the layout inferred for it: a Tensor's own,
    the dense layout of a numpy array's order, the first layout ``layouts/defaults.toml``
    lists for a scipy or pydata object that can store it (the object wrapped or converted
    into it, as a Tensor; a layout that takes its arrays as they are comes before one it is
    converted into because they break a property).  Errors start with ``caller`` and suggest
    ``override`` (how the caller names a layout)."""
    if isinstance(value, Tensor):
        return value, value.layout
    if isinstance(value, (np.ndarray, list, tuple)):
        return value, _layout(None, as_array("evaluate: ", name, value).ndim, width,
                              _search_path())
    if is_scipy(value):
        candidates = default_layouts("scipy", value.format) or default_layouts("scipy", "other")
        what = f"scipy.sparse {type(value).__name__} ({value.format})"
    elif is_pydata(value):
        candidates = default_layouts("pydata", str(value.ndim))
        what = f"pydata sparse {type(value).__name__} of order {value.ndim}"
    else:
        raise ArgumentError(f"{caller}: {name!r}: expected an spf.Tensor, a numpy array, a "
                            f"scipy.sparse matrix or array, a pydata sparse array or a number, "
                            f"got {type(value).__name__}")
    try:
        check_arrays(what, value)
    except ArgumentError as exc:
        raise ArgumentError(f"{caller}: {name!r}: {exc}") from None
    if not candidates:
        raise ArgumentError(f"{caller}: {name!r}: no layout is listed for a {what} in "
                            f"layouts/defaults.toml; pass {override}")
    reasons = []
    # a layout that takes the object's arrays as they are, before one it is converted into
    for converting, candidate in [(c, n) for c in (False, True) for n in candidates]:
        try:
            lay = _layout(candidate, value.ndim, width, _search_path())
            t = as_tensor(name, value, lay.with_value_type(operand_type(value) or
                                                           lay.value_type),
                          converting=converting)
        except SpfError as exc:
            if not converting:
                reasons.append(f"{candidate}: {exc}")
            continue
        return t, t.layout
    raise ArgumentError(f"{caller}: {name!r}: no layout listed for a {what} can store it ("
                        + "; ".join(reasons) + f"); pass {override}")


def operand_type(value: Any) -> ValueType | None:
    """The value type an operand brings (a Tensor's, an array's, a sparse matrix's, a numpy
    scalar's: numpy 2 promotes a numpy scalar by its type, ``np.float32(3) * uint16`` is
    float32), or None (a Python number: numpy's weak promotion; or a type the operand's
    check will refuse)."""
    if isinstance(value, Tensor):
        return value.layout.value_type
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, np.dtype):
        return None
    try:
        return held_type(dtype, "")
    except ArgumentError:
        return None


def typed_options(options: Mapping[str, Any], operands: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``dtype=`` the operands' value types (numpy's promotion then gives the
    output's), unless given or all float64: how :func:`evaluate` and :func:`spf.tune` type
    a kernel."""
    if "dtype" in options:
        return dict(options)
    types = {n: t.name for n, v in operands.items() if (t := operand_type(v)) is not None}
    types.update(_weak_scalars(operands, types))
    if any(not VALUE_TYPES[t].is_float64 for t in types.values()):
        return {**options, "dtype": types}
    return dict(options)


def _weak_scalars(operands: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, str]:
    """The type of each Python number among ``operands`` that widens the arrays' kind, as
    numpy's weak promotion does (``(2 - 1j) * A`` is complex128 for a float64 ``A``, ``2.5 *
    x`` float64 for an int64 ``x``); the others take the kernel's type."""
    arrays = np.result_type(*(np.dtype(t) for t in types.values())) if types else \
        np.dtype(np.float64)
    weak = {}
    for name, value in operands.items():
        if isinstance(value, (bool, int, float, complex)):
            promoted = np.result_type(arrays, value)
            if promoted.kind != arrays.kind:
                weak[name] = held_type(promoted, name).name
    return weak


def _search_path() -> str:
    return os.environ.get("SPF_LAYOUT_PATH", "")


@lru_cache(maxsize=256)
def _layout(name: str | None, order: int, width: str | None, search_path: str) -> Layout:
    """Layout ``name`` (the dense one of ``order`` when None; a file written for every order
    bound to ``order``) of index width ``width``, looked up
    once per layout search path (name lookups touch the file system)."""
    lay = default_layout(order) if name is None else for_order(load_layout(name), order)
    return lay if width is None else lay.with_index_type(width)
