"""``spf.aslinearoperator``: a matrix as a ``scipy.sparse.linalg.LinearOperator`` whose products
are spf kernels, for scipy's iterative solvers and eigensolvers (``cg``, ``gmres``, ``lsqr``,
``eigsh``, ...).

The matrix is wrapped or converted once, into the layout :func:`spf.evaluate` would infer for it
or the one named; each kernel is built on first use and kept in the process, as evaluate keeps
its kernels (:mod:`spf.linear_operator`, which imports scipy.sparse.linalg, is imported only
when an operator is made).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .binding import index_width, infer_operand
from .decide.options import check_given
from .errors import ArgumentError
from .front.layout import Layout
from .front.layout_path import load_layout
from .runtime.operands import as_tensor, is_pydata, is_scipy
from .tensor import Tensor, tensor_of


def aslinearoperator(A: Any, layout: str | Layout | None = None, **options: Any) -> Any:
    """A ``scipy.sparse.linalg.LinearOperator`` of A's shape and dtype float64 whose ``matvec``,
    ``rmatvec``, ``matmat`` and ``rmatmat`` (and so ``op @ x``, ``op.H @ x``, ``op.T``) run spf
    kernels over A; ``x`` may be ``(n,)``, ``(n, 1)`` or ``(n, k)``.

    ``A``: an spf Tensor, a scipy.sparse matrix or array, a pydata sparse array or a 2-D numpy
    array (what :func:`spf.evaluate` takes, of order 2).  ``layout``: A's layout, inferred as
    :func:`spf.evaluate` infers it when None; A is wrapped or converted into it here, once (a
    scipy CSR, CSC or COO matrix is read in place: do not change its arrays afterwards).  The
    other keywords are :class:`spf.Kernel` options (``parallel``, ``index_type``,
    ``reassociate``, ``find``, ...: :class:`spf.KernelOptions`), checked here and given to
    every kernel; the kernels name A's indices
    ``i`` and ``j`` (``order``, ``tile``, ``bounds`` refer to them).  Each kernel is built
    when first used and kept in the process, as :func:`spf.evaluate` keeps its kernels.
    ``op.A`` is the Tensor.
    """
    check_given(options)        # names and values, before anything is built
    A = _array_if_list(A)
    shape = _shape(A)
    if len(shape) != 2:
        raise ArgumentError(f"aslinearoperator: A must be a matrix (order 2), got shape "
                            f"{shape} ({type(A).__name__})")
    dtype = getattr(A, "dtype", None)      # a Tensor's values are float64
    if dtype is not None and np.dtype(dtype).kind not in "biuf":
        raise ArgumentError(f"aslinearoperator: A has dtype {dtype}, but spf computes with real "
                            "float64 values")
    width = index_width(options.get("index_type"), [A])
    if isinstance(A, Tensor) and width is not None and width != A.layout.index_type:
        raise ArgumentError(f"aslinearoperator: A is a {A.layout.name} tensor with index_type "
                            f"{A.layout.index_type!r} but index_type={width!r} was asked; build "
                            f"the tensor with index_type={width!r}")
    from .linear_operator import Products, SpfLinearOperator
    return SpfLinearOperator(Products(_matrix(A, layout, width), options))


def _array_if_list(A: Any) -> Any:
    if not isinstance(A, (list, tuple)):
        return A
    try:
        return np.asarray(A)
    except ValueError as exc:
        raise ArgumentError(f"aslinearoperator: A is a {type(A).__name__} that is no array: "
                            f"{exc}") from None


def _shape(A: Any) -> tuple[int, ...]:
    if isinstance(A, (Tensor, np.ndarray)) or is_scipy(A) or is_pydata(A):
        return tuple(A.shape)
    raise ArgumentError("aslinearoperator: A must be an spf.Tensor, a numpy array, a "
                        "scipy.sparse matrix or array or a pydata sparse array, got "
                        f"{type(A).__name__}")


def _matrix(A: Any, layout: str | Layout | None, width: str | None) -> Tensor:
    """A as a checked Tensor in ``layout`` (inferred when None)."""
    if layout is None:
        A, lay = infer_operand("A", A, width, "aslinearoperator", "layout=...")
    else:
        lay = layout if isinstance(layout, Layout) else load_layout(layout)
        lay = lay if width is None else lay.with_index_type(width)
        if lay.order != 2:
            raise ArgumentError(f"aslinearoperator: layout {lay.name} stores order-{lay.order} "
                                "tensors; A is a matrix")
    if isinstance(A, Tensor) and A.layout != lay:
        A = A.convert(lay)
    elif isinstance(A, np.ndarray) and lay.dense_array is None:
        A = Tensor.from_dense(lay, A)
    return tensor_of(as_tensor("A", A, lay))
