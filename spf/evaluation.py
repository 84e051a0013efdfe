"""``spf.evaluate``: one call from tensor index notation and data as users hold it to a result.

Layouts come from the operands (a Tensor's own, the first of the layouts that
``layouts/defaults.toml`` lists for a scipy or pydata object that can store it, the dense
layout of a numpy array's order) unless ``layouts`` names them.  Kernels are built once per
expression, layouts and options and kept in this process (and compiled C in the disk cache),
as are those of :func:`spf.aslinearoperator`.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from .decide.options import NAMES
from .errors import ArgumentError, SpfError
from .front.kernel_spec import Expr, parse_expr
from .front.layout import Layout
from .front.layout_path import default_layout, default_layouts, for_order, load_layout
from .front.value_types import VALUE_TYPES, ValueType, held_type
from .kernel import Kernel
from .runtime.compiled import CompiledKernel
from .runtime.fields import as_array
from .runtime.operands import as_tensor, check_arrays, is_pydata, is_scipy
from .tensor import Tensor

KEYWORDS = ("params",) + NAMES     # besides the operands: layout parameters, kernel options

_kernels: dict[tuple, CompiledKernel] = {}
_exprs: dict[str, Expr] = {}


def evaluate(expr: str, out: Any = None, layouts: Mapping[str, str | Layout] | None = None,
             **operands_and_options: Any) -> Any:
    """Evaluate ``expr`` (``"y(i) = A(i,j) * x(j)"``) on the operands given by name.

    Operands are spf Tensors, numpy arrays, scipy.sparse matrices or arrays, pydata sparse
    arrays, or numbers for scalars.  ``layouts`` overrides the inferred layout of any tensor,
    the output's included; ``params`` gives layout parameters, as to :class:`spf.Kernel`;
    the other keywords are kernel options (:class:`spf.KernelOptions`: ``order``, ``find``,
    ``parallel``, ``reassociate``, ``index_type``, ...); ``tune=True`` lets :func:`spf.tune`
    choose the sparse operand's layout instead (its decision cached per structure).
    ``out``: an array to write (``=``) or add (``+=``) the result into.  Returns a float for
    a scalar output, numpy for a dense one, a ``scipy.sparse.csr_array`` for an order-2
    output whose operands are all sparse, and a Tensor when ``layouts`` names a sparse
    layout for the output.
    """
    if operands_and_options.pop("tune", False):
        return _tuned(expr, out, layouts, operands_and_options)
    parsed = _parse(expr)
    mask = operands_and_options.get("mask")
    with_mask = parsed    # the mask is bound like an input (the Kernel adds it to the product)
    if isinstance(mask, Mapping) and len(mask) == 1 and isinstance(next(iter(mask.values())),
                                                                   str):
        with_mask = parsed.with_mask(next(iter(mask.values())))
    names = set(with_mask.tensors)
    options = {k: v for k, v in operands_and_options.items() if k not in names}
    unknown = sorted(set(options) - set(KEYWORDS))
    if unknown:
        raise ArgumentError(f"evaluate: {unknown} are neither tensors of {parsed.text!r} "
                            f"({sorted(names)}) nor params or kernel options "
                            f"({', '.join(NAMES)})")
    operands = {k: v for k, v in operands_and_options.items() if k in names}
    asked = dict(layouts or {})
    width = index_width(options.get("index_type"), operands.values())
    bound, chosen = _bind_operands(with_mask, operands, asked, width)
    output = parsed.output
    if output.indices and output.tensor not in asked:
        sparse_out = _sparse_output_layout(parsed, chosen)
        if sparse_out is not None:
            chosen[output.tensor] = sparse_out
    elif output.tensor in asked:
        chosen[output.tensor] = asked[output.tensor]
    if "dtype" not in options:
        types = {n: t.name for n, v in operands.items() if (t := _operand_type(v)) is not None}
        if any(not VALUE_TYPES[t].is_float64 for t in types.values()):
            options = {**options, "dtype": types}
    kernel = _kernel(parsed, chosen, options)
    if out is not None:
        bound[output.tensor] = out
    elif parsed.accumulate and output.indices \
            and kernel.kernel.layouts[output.tensor].dense_array is not None:
        raise ArgumentError(f"'+=' accumulates into {output.tensor!r}: pass it as out=array")
    result = kernel(**bound)
    if isinstance(result, Tensor) and output.tensor not in asked:
        import scipy.sparse as sp
        return sp.csr_array(result.to_scipy())
    return result


def _tuned(expr: str, out: Any, layouts: Mapping[str, Any] | None,
           operands: Mapping[str, Any]) -> Any:
    """``evaluate(..., tune=True)``: the layouts :func:`spf.tune` chooses (its decision
    cached on disk for matrices of the same structure), then the call."""
    from .tuning import tune
    names = set(_parse(expr).tensors)
    options = sorted(set(operands) - names)
    if options or out is not None:
        raise ArgumentError(f"evaluate: tune=True chooses the layouts and options itself; "
                            f"do not pass {options or ['out']} with it")
    tuned = tune(expr, layouts=layouts, **operands)
    return tuned(**operands)


def _operand_type(value: Any) -> ValueType | None:
    """The value type an operand brings (a Tensor's, an array's or a sparse matrix's), or
    None (a number: numpy's weak promotion; or a type the operand's check will refuse)."""
    if isinstance(value, Tensor):
        return value.layout.value_type
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, np.dtype) or np.ndim(value) == 0:
        return None
    try:
        return held_type(dtype, "")
    except ArgumentError:
        return None


def clear_cache() -> None:
    """Forget the kernels :func:`evaluate` and :func:`spf.aslinearoperator` built in this
    process."""
    _kernels.clear()
    _exprs.clear()


def compiled_kernel(expr: str, layouts: Mapping[str, Any], options: Mapping[str, Any]
                    ) -> CompiledKernel:
    """The kernel of ``expr`` with these layouts and :class:`spf.Kernel` options, built and
    compiled once per process (the kernels of :func:`evaluate` are kept the same way)."""
    return _kernel(_parse(expr), layouts, options)


def _parse(expr: str) -> Expr:
    if not isinstance(expr, str):
        raise ArgumentError(f"evaluate: the expression must be a string such as "
                            f"'y(i) = A(i,j) * x(j)', got {type(expr).__name__}")
    if expr not in _exprs:
        _exprs[expr] = parse_expr(expr)
    return _exprs[expr]


def index_width(index_type: str | None, operands: Iterable[Any]) -> str | None:
    """The index width of a kernel over ``operands``: ``index_type`` when given, else that of
    the first Tensor among them that is not int32, else None (the layouts' own)."""
    return index_type or next((v.layout.index_type for v in operands if isinstance(v, Tensor)
                               and v.layout.index_type != "int32"), None)


def _bind_operands(parsed: Expr, operands: Mapping[str, Any], asked: Mapping[str, Any],
                   width: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the values to call the kernel with, the layout of each tensor input)."""
    bound: dict[str, Any] = {}
    chosen: dict[str, Any] = {}
    for acc in parsed.factors:
        name = acc.tensor
        if name in bound or name != parsed.original(name):
            continue                    # bound, or a tensor read again (its alias)
        if name not in operands:
            raise ArgumentError(f"evaluate: missing operand {name!r}")
        value = operands[name]
        if not acc.indices:
            bound[name] = value
            continue
        if name in asked:
            chosen[name] = asked[name]
            bound[name] = value
            continue
        bound[name], chosen[name] = infer_operand(name, value, width, "evaluate",
                                                  f"layouts={{{name!r}: ...}}")
    return bound, chosen


def infer_operand(name: str, value: Any, width: str | None, caller: str,
                  override: str) -> tuple[Any, Layout]:
    """The value to pass for operand ``name`` and the layout inferred for it: a Tensor's own,
    the dense layout of a numpy array's order, the first layout ``layouts/defaults.toml``
    lists for a scipy or pydata object that can store it (the object wrapped or converted
    into it, as a Tensor).  Errors start with ``caller`` and suggest ``override`` (how the
    caller names a layout)."""
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
        raise ArgumentError(f"evaluate: {name!r}: {exc}") from None
    if not candidates:
        raise ArgumentError(f"{caller}: {name!r}: no layout is listed for a {what} in "
                            f"layouts/defaults.toml; pass {override}")
    reasons = []
    for candidate in candidates:
        try:
            lay = _layout(candidate, value.ndim, width, _search_path())
            t = as_tensor(name, value, lay.with_value_type(_operand_type(value) or
                                                           lay.value_type))
        except SpfError as exc:
            reasons.append(f"{candidate}: {exc}")
            continue
        return t, t.layout
    raise ArgumentError(f"{caller}: {name!r}: no layout listed for a {what} can store it ("
                        + "; ".join(reasons) + f"); pass {override}")


def _search_path() -> str:
    return os.environ.get("SPF_LAYOUT_PATH", "")


@lru_cache(maxsize=256)
def _layout(name: str | None, order: int, width: str | None, search_path: str) -> Layout:
    """Layout ``name`` (the dense one of ``order`` when None; a file written for every order
    bound to ``order``) of index width ``width``, looked up
    once per layout search path (name lookups touch the file system)."""
    lay = default_layout(order) if name is None else for_order(load_layout(name), order)
    return lay if width is None else lay.with_index_type(width)


def _sparse_output_layout(parsed: Expr, chosen: Mapping[str, Any]) -> Any:
    """The layout of an order-2 output whose operands are all sparse, else None (dense)."""
    if len(parsed.output.indices) != 2 or not chosen:
        return None
    layouts = [lay if isinstance(lay, Layout) else load_layout(lay) for lay in chosen.values()]
    if any(lay.dense_array is not None for lay in layouts):
        return None
    names = default_layouts("sparse_output", "2")
    return names[0] if names else None


def _kernel(parsed: Expr, layouts: Mapping[str, Any], options: Mapping[str, Any]
            ) -> CompiledKernel:
    key = (parsed.text, tuple(sorted((n, _layout_key(lay)) for n, lay in layouts.items())),
           repr(sorted(options.items())))
    if key not in _kernels:
        _kernels[key] = Kernel(parsed, dict(layouts), **options).compile()
    return _kernels[key]


def _layout_key(layout: Any) -> str:
    return layout.key if isinstance(layout, Layout) else str(layout)
