"""The ``scipy.sparse.linalg.LinearOperator`` that :func:`spf.aslinearoperator` returns.

Its four products are kernels over the one stored A (``A^T x`` reads A as stored: no
transposed copy), each built and compiled when first used and kept in the process with the
kernels of :func:`spf.evaluate`; an operator and its adjoint (``op.H``, ``op.T``) share them.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .errors import ArgumentError
from .evaluation import compiled_kernel
from .runtime.compiled import CompiledKernel
from .runtime.operands import is_pydata, is_scipy
from .tensor import Tensor


class Product(enum.Enum):
    """A product with A, as the kernel's tensor index notation (x: a vector or k columns)."""

    MATVEC = "y(i) = A(i,j) * x(j)"
    RMATVEC = "y(j) = A(i,j) * x(i)"
    MATMAT = "y(i,k) = A(i,j) * x(j,k)"
    RMATMAT = "y(j,k) = A(i,j) * x(i,k)"

    @staticmethod
    def of(forward: bool, columns: bool) -> Product:
        """The product with A (``forward``) or with A^T, of a vector or of columns."""
        if forward:
            return Product.MATMAT if columns else Product.MATVEC
        return Product.RMATMAT if columns else Product.RMATVEC


class Products:
    """The kernels over one Tensor ``A`` with one set of :class:`spf.Kernel` options, each
    compiled on first use (kept per process, so operators over tensors of one layout share
    them) and then held here."""

    def __init__(self, A: Tensor, options: Mapping[str, Any]):
        self.A = A
        self.options = dict(options)
        self._compiled: dict[Product, CompiledKernel] = {}

    def __reduce__(self) -> tuple:
        return Products, (self.A, self.options)     # the kernels are looked up again on use

    def __call__(self, product: Product, x: np.ndarray) -> np.ndarray:
        return self.compiled(product)(A=self.A, x=x)

    def compiled(self, product: Product) -> CompiledKernel:
        """The kernel of ``product``, built and compiled now if it has not been."""
        fn = self._compiled.get(product)
        if fn is None:
            options = {"name": f"spf_{product.name.lower()}", **self.options}
            fn = compiled_kernel(product.value, {"A": self.A.layout}, options)
            self._compiled[product] = fn
        return fn


class SpfLinearOperator(LinearOperator):
    """A (or A^T when ``transposed``) as a LinearOperator of dtype float64 whose products run
    the kernels of ``products``.  ``x`` is checked before scipy sees it: a wrong shape or a
    non-real dtype is an :class:`spf.ArgumentError` (a ``ValueError``)."""

    def __init__(self, products: Products, transposed: bool = False):
        shape = products.A.shape
        super().__init__(np.float64, shape[::-1] if transposed else shape)
        self.products = products
        self.transposed = transposed

    @property
    def A(self) -> Tensor:  # noqa: N802 (the matrix's usual name, as scipy's operators use)
        """The operand, as the Tensor the kernels read."""
        return self.products.A

    def dot(self, x: Any) -> Any:
        if isinstance(x, (np.ndarray, list, tuple)) and np.ndim(x) > 2:
            raise ArgumentError(f"this {self.shape[0]}x{self.shape[1]} operator multiplies a "
                                f"vector or a matrix, got an array of shape {np.shape(x)}")
        return super().dot(x)

    def matvec(self, x: Any) -> Any:
        self._check(x, "matvec", self.shape[1], columns=False)
        return super().matvec(x)

    def rmatvec(self, x: Any) -> Any:
        self._check(x, "rmatvec", self.shape[0], columns=False)
        return super().rmatvec(x)

    def matmat(self, X: Any) -> Any:
        self._check(X, "matmat", self.shape[1], columns=True)
        return super().matmat(X)

    def rmatmat(self, X: Any) -> Any:
        self._check(X, "rmatmat", self.shape[0], columns=True)
        return super().rmatmat(X)

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._apply(x, adjoint=False)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return self._apply(X, adjoint=False)

    def _rmatvec(self, x: np.ndarray) -> np.ndarray:
        return self._apply(x, adjoint=True)

    def _rmatmat(self, X: np.ndarray) -> np.ndarray:
        return self._apply(X, adjoint=True)

    def _adjoint(self) -> SpfLinearOperator:
        return SpfLinearOperator(self.products, not self.transposed)

    def _transpose(self) -> SpfLinearOperator:
        return self._adjoint()      # real values: the transpose is the adjoint

    def _apply(self, x: np.ndarray, adjoint: bool) -> np.ndarray:
        """The product of x ((n,), (n, 1) or (n, k)) with A, or with A^T when ``adjoint``
        differs from ``transposed``; one column goes through the matrix-vector kernel."""
        x = np.asarray(x)
        forward = adjoint == self.transposed
        if x.ndim == 2 and x.shape[1] == 1:
            return self.products(Product.of(forward, False), x.reshape(-1)).reshape(-1, 1)
        return self.products(Product.of(forward, x.ndim == 2), x)

    def _check(self, x: Any, what: str, rows: int, columns: bool) -> None:
        """ArgumentError unless ``x`` is a real dense array of ``rows`` rows: (rows,) or
        (rows, 1) for a vector, (rows, k) for ``columns``."""
        if is_scipy(x) or is_pydata(x):
            raise ArgumentError(f"{what}: x must be a dense array, got a {type(x).__name__}; "
                                "spf's operator multiplies dense vectors and matrices")
        array = np.asanyarray(x)
        if array.dtype.kind not in "biuf":
            hint = " (apply it to x.real and x.imag)" if array.dtype.kind == "c" else ""
            raise ArgumentError(f"{what}: x has dtype {array.dtype}, but this operator "
                                f"computes with real float64 values{hint}")
        if columns:
            fits, wanted = array.ndim == 2 and array.shape[0] == rows, f"({rows}, k)"
        else:
            fits, wanted = array.shape in ((rows,), (rows, 1)), f"({rows},) or ({rows}, 1)"
        if not fits:
            raise ArgumentError(f"{what}: this {self.shape[0]}x{self.shape[1]} operator takes "
                                f"x of shape {wanted}, got shape {array.shape}")
