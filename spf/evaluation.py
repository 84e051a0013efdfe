"""``spf.evaluate``: one call from tensor index notation and data as users hold it to a result.

Layouts come from the operands (a Tensor's own, the first of the layouts that
``layouts/defaults.toml`` lists for a scipy or pydata object that can store it, the dense
layout of a numpy array's order) unless ``layouts`` names them.  Kernels are built once per
expression, layouts and options and kept in this process (and compiled C in the disk cache),
as are those of :func:`spf.aslinearoperator`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .assembly.merge import same_levels
from .binding import (
    bind_operands,
    clear_parsed,
    index_width,
    parsed_statement,
    split_keywords,
    typed_options,
)
from .decide.options import NAMES
from .errors import ArgumentError
from .front.functions import definitions
from .front.kernel_spec import Expr
from .front.layout import Layout
from .front.layout_path import default_layouts, load_layout
from .front.rhs import operands as value_operands
from .front.storage import storage_or_none
from .kernel import Kernel
from .runtime.compiled import CompiledKernel
from .tensor import Tensor

KEYWORDS = ("params",) + NAMES     # besides the operands: layout parameters, kernel options

_kernels: dict[tuple, CompiledKernel] = {}


def evaluate(expr: str, out: Any = None, layouts: Mapping[str, str | Layout] | None = None,
             **operands_and_options: Any) -> Any:
    """Evaluate ``expr`` (``"y(i) = A(i,j) * x(j)"``) on the operands given by name.

    Operands are spf Tensors, numpy arrays, scipy.sparse matrices or arrays, pydata sparse
    arrays, or numbers for scalars.  ``layouts`` overrides the inferred layout of any tensor,
    the output's included; ``params`` gives layout parameters, as to :class:`spf.Kernel`;
    the other keywords are kernel options (:class:`spf.KernelOptions`: ``order``, ``find``,
    ``parallel``, ``reassociate``, ``index_type``, ...); ``tune=True`` lets :func:`spf.tune`
    choose the sparse operand's layout instead (its decision cached per structure).
    ``out``: an array to write (``=``) or add (``+=``) the result into (a numpy array: a
    dense output).
    Returns a float for a scalar output, numpy for a dense one, a ``scipy.sparse.csr_array``
    for an order-2 output whose operands are all sparse (no ``out``), and a Tensor when
    ``layouts`` names a sparse layout for the output.
    """
    if operands_and_options.pop("tune", False):
        return _tuned(expr, out, layouts, operands_and_options)
    parsed = parsed_statement(expr)
    mask = operands_and_options.get("mask")
    with_mask = parsed    # the mask is bound like an input (the Kernel adds it to the product)
    if isinstance(mask, Mapping) and len(mask) == 1 and isinstance(next(iter(mask.values())),
                                                                   str):
        with_mask = parsed.with_mask(next(iter(mask.values())))
    options, operands = split_keywords("evaluate", parsed.text, set(with_mask.written_tensors),
                                       operands_and_options, KEYWORDS)
    asked = dict(layouts or {})
    width = index_width(options.get("index_type"), operands.values())
    bound, chosen = bind_operands(with_mask, operands, asked, width, "evaluate")
    output = parsed.output
    if output.indices and output.tensor not in asked:
        # a numpy array passed as out= is the dense output; else all-sparse operands give
        # a sparse one
        sparse_out = None if isinstance(out, np.ndarray) \
            else _sparse_output_layout(parsed, chosen)
        if sparse_out is not None:
            chosen[output.tensor] = sparse_out
            converted = _in_output_order(parsed, bound, chosen, sparse_out)
            if converted and isinstance(options.get("params"), Mapping):   # now in CSR's
                options["params"] = {t: p for t, p in options["params"].items()
                                     if t not in converted}
    elif output.tensor in asked:
        chosen[output.tensor] = asked[output.tensor]
    options = typed_options(options, operands)
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
    names = set(parsed_statement(expr).tensors)
    options = sorted(set(operands) - names)
    if options or out is not None:
        raise ArgumentError(f"evaluate: tune=True chooses the layouts and options itself; "
                            f"do not pass {options or ['out']} with it")
    tuned = tune(expr, layouts=layouts, **operands)
    return tuned(**operands)


def clear_cache() -> None:
    """Forget the kernels :func:`evaluate` and :func:`spf.aslinearoperator` built in this
    process."""
    _kernels.clear()
    clear_parsed()


def compiled_kernel(expr: str, layouts: Mapping[str, Any], options: Mapping[str, Any]
                    ) -> CompiledKernel:
    """The kernel of ``expr`` with these layouts and :class:`spf.Kernel` options, built and
    compiled once per process (the kernels of :func:`evaluate` are kept the same way)."""
    return _kernel(parsed_statement(expr), layouts, options)


def _sparse_output_layout(parsed: Expr, chosen: Mapping[str, Any]) -> Any:
    """The layout of an order-2 output whose operands are all sparse, else None (dense; so
    also when a term leaves out an output index, ``C(i,j) = beta + A(i,j)``: broadcast along
    it, it fills every element)."""
    if len(parsed.output.indices) != 2 or not chosen \
            or any(p.broadcast() for p in parsed.products()):
        return None
    layouts = [lay if isinstance(lay, Layout) else load_layout(lay) for lay in chosen.values()]
    if any(lay.dense_array is not None for lay in layouts):
        return None
    names = default_layouts("sparse_output", "2")
    return names[0] if names else None


def _in_output_order(parsed: Expr, bound: dict[str, Any], chosen: dict[str, Any],
                     out: str) -> set[str]:
    """An expression of several sparse operands' values (``min(A(i,j), B(i,j))``) into the
    sparse output chosen (``out``) runs over their union by a merge of their storage, which
    needs each stored in the output's levels: an operand stored in another order (a CSC
    beside a CSR output) is converted to the output's layout first (generated code), as
    scipy's ``A.minimum(B)`` converts B to A's format.  Only an operand read at the output's
    indices is (``exp(T(i,j,k))`` reads an order-3 tensor: no merge).  Returns the operands
    converted (the layout parameters given for them were their old layout's)."""
    valued = [a for a in parsed.factors if a.value is not None]
    if parsed.is_sum or len(valued) != 1:
        return set()
    tree = valued[0].value
    assert tree is not None
    target = load_layout(out)
    out_storage = storage_or_none(target)
    accesses = {a.tensor: a for a in parsed.factors}
    converted: set[str] = set()
    for name in value_operands(tree):
        value, lay = bound.get(name), chosen.get(name)
        if out_storage is None or not isinstance(value, Tensor) \
                or not isinstance(lay, Layout) or lay.dense_array is not None \
                or sorted(accesses[name].indices) != sorted(parsed.output.indices):
            continue
        storage = storage_or_none(lay)
        if storage is not None and same_levels(storage, accesses[name].indices, out_storage,
                                               parsed.output.indices):
            continue
        new = value.convert(target.with_index_type(lay.index_type)
                            .with_value_type(lay.value_type))
        bound[name], chosen[name] = new, new.layout
        converted.add(name)
    return converted


def _kernel(parsed: Expr, layouts: Mapping[str, Any], options: Mapping[str, Any]
            ) -> CompiledKernel:
    key = (parsed.text, tuple(sorted((n, _layout_key(lay)) for n, lay in layouts.items())),
           repr(sorted(options.items())), definitions(parsed.text))
    if key not in _kernels:
        _kernels[key] = Kernel(parsed, dict(layouts), **options).compile()
    return _kernels[key]


def _layout_key(layout: Any) -> str:
    return layout.key if isinstance(layout, Layout) else str(layout)
