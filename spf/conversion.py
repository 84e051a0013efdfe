"""Format conversion generated from layout relations (paper 000; Popoola et al., CGO 2023).

A conversion from layout ``src`` to layout ``dst`` is the identity kernel
``B(i,j,...) = A(i,j,...)`` with A in ``src`` and B in ``dst``: composing A's relation with
the access gives the loops over A's stored entries, and B is assembled from its own relation
by :mod:`spf.assembly` (storage levels, the order Z3 proves, then a workspace, a bucket
scatter or a sort).  Nothing is specific to a pair of formats; no intermediate format is
built.  A source whose innermost layout index is itself a logical coordinate (a dense
level: DenseMatrix, DIA's rows, BCSR's block columns, LowerTri) stores values for coordinates
that hold no entry; its zeros are padding and are not stored in a sparse destination (unless
``keep_zeros=True``).  Other sources' stored entries are all kept, explicit zeros included,
as scipy does (``keep_zeros=False`` drops those too).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from functools import lru_cache

from .errors import ArgumentError, SpecError
from .kernel import CompiledKernel, Kernel
from .layout import Layout, layout_names, load_layout
from .storage import Storage, storage_of
from .tensor import Tensor

_INDICES = "ijklmnop"


class Conversion:
    """The generated conversion from ``src`` to ``dst`` (layout names, paths or Layouts).

    ``params`` bind layout parameters (``B=4`` for BCSR); each goes to the layouts that
    declare it.  ``keep_zeros``: store entries equal to 0.0 (default: unless the source pads,
    see :func:`pads_with_zeros`).  ``.c_source()`` is the C, ``.compile()`` a callable Tensor -> Tensor.
    """

    def __init__(self, src: "str | Layout", dst: "str | Layout", *, name: str = "spf_convert",
                 keep_zeros: "bool | None" = None, **params: int):
        self.src, self.dst = _bind(src, dst, params)
        if self.src.order != self.dst.order:
            raise SpecError(f"cannot convert {self.src.name} (order {self.src.order}) to "
                            f"{self.dst.name} (order {self.dst.order}): the orders differ",
                            self.dst.source)
        if self.src.order > len(_INDICES):
            raise SpecError(f"conversions support order up to {len(_INDICES)}", self.src.source)
        idx = ",".join(_INDICES[:self.src.order])
        self.keep_zeros = not pads_with_zeros(self.src) if keep_zeros is None else keep_zeros
        dense_dst = self.dst.dense_array is not None
        self.kernel = Kernel(f"B({idx}) = A({idx})", {"A": self.src, "B": self.dst}, name=name,
                             drop_zeros=not self.keep_zeros and not dense_dst)

    def c_source(self) -> str:
        """The generated C (struct typedefs, the conversion function and its helpers)."""
        return self.kernel.c_source()

    def report(self) -> str:
        """How the destination is assembled and why (the kernel's report)."""
        return self.kernel.report()

    def compile(self) -> Callable[[Tensor], Tensor]:
        """A callable converting a Tensor in ``src`` to a new Tensor in ``dst``."""
        return _Compiled(self, self.kernel.compile())


def pads_with_zeros(layout: Layout) -> bool:
    """Whether ``layout``'s innermost index is a logical coordinate up to a constant shift or
    scale (an equality with a logical variable names it outside any index array): a dense
    level, whose positions exist whether or not they hold an entry."""
    rel = layout.relation
    inner = layout.indices[-1] if layout.indices else None
    outs = set(rel.out_vars or ())
    return inner is not None and any(
        c.is_eq and c.aff.coeff(inner) and any(c.aff.coeff(g) for g in outs)
        for conj in rel.disjuncts for c in conj)


class _Compiled:
    def __init__(self, conversion: Conversion, fn: CompiledKernel):
        self.conversion = conversion
        self.fn = fn

    def __call__(self, tensor: Tensor) -> Tensor:
        conv = self.conversion
        if not isinstance(tensor, Tensor):
            raise ArgumentError(f"a conversion from {conv.src.name} takes an spf.Tensor, got "
                                f"{type(tensor).__name__}")
        out = self.fn(A=tensor)
        if isinstance(out, Tensor):
            return out
        return Tensor.from_dense(conv.dst, np.asarray(out).reshape(tensor.shape))


def _bind(src: "str | Layout", dst: "str | Layout",
          params: Mapping[str, int]) -> tuple[Layout, Layout]:
    """Load both layouts, each with the parameters it declares; a parameter neither declares
    is an error naming both layouts' parameters."""
    a, b = load_layout(src), load_layout(dst)
    unknown = [p for p in params if p not in a.params and p not in b.params]
    if unknown:
        raise SpecError(f"unknown layout parameter(s) {unknown}: {a.name} takes "
                        f"{sorted(a.params) or 'none'}, {b.name} takes "
                        f"{sorted(b.params) or 'none'}", b.source)
    return (a.with_params(**{k: v for k, v in params.items() if k in a.params}),
            b.with_params(**{k: v for k, v in params.items() if k in b.params}))


def convert(tensor: Tensor, dst: "str | Layout", **params: Any) -> Tensor:
    """``tensor`` in layout ``dst`` (see :class:`Conversion`; compiled kernels are cached)."""
    keep = params.pop("keep_zeros", None)
    return _cached(tensor.layout, dst, keep, tuple(sorted(params.items())))(tensor)


_COMPILED: dict[tuple, _Compiled] = {}


def _cached(src: Layout, dst: "str | Layout", keep: bool, params: tuple) -> _Compiled:
    key = (src, dst if isinstance(dst, Layout) else str(dst), keep, params)
    if key not in _COMPILED:
        _COMPILED[key] = Conversion(src, dst, keep_zeros=keep, **dict(params)).compile()
    return _COMPILED[key]


def storage_or_none(layout: Layout) -> "Storage | None":
    """The layout's storage levels, or None when spf cannot assemble it."""
    try:
        return storage_of(layout)
    except SpecError:
        return None


@lru_cache(maxsize=None)
def compressed_rows_layout() -> "Layout | None":
    """A layout on the search path that holds scipy's CSR arrays as they are: a dense level of
    rows over a compressed level of columns (a pointer array, one index array) with no
    ordering or injectivity property, so unsorted rows and duplicates are allowed."""
    for name in layout_names():
        lay = load_layout(name)
        st = storage_or_none(lay) if lay.order == 2 and not lay.params else None
        if st is not None and st.order == (0, 1) and len(st.levels) == 2 \
                and st.levels[0].kind == "dense" and st.levels[1].pointer \
                and len(st.levels[1].coords) == 1 and st.free_tail == 1 \
                and not any(p.kind == "injective" for p in lay.properties):
            return lay
    return None


@lru_cache(maxsize=None)
def dense_layout(order: int) -> "Layout | None":
    """A layout on the search path storing an order-``order`` array row-major, all levels
    dense."""
    for name in layout_names():
        lay = load_layout(name)
        st = storage_or_none(lay) if lay.order == order and not lay.params else None
        if st is not None and lay.dense_array is not None and st.order == tuple(range(order)) \
                and all(lv.kind == "dense" for lv in st.levels):
            return lay
    return None
