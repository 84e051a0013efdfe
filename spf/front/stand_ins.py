"""Layouts found on the search path by the shape of their storage: the stand-ins spf reads
into or through (a coordinate list, a dense array, scipy's CSR arrays as they are)."""
from __future__ import annotations

from collections.abc import Callable
from functools import cache

from .layout import Layout
from .layout_path import for_order, layout_names, load_layout
from .storage import Storage, storage_or_none


def _first_layout(fits: Callable[[Layout, Storage], bool], order: int | None = None
                  ) -> Layout | None:
    """The first layout on the search path without parameters whose storage ``fits``; where
    none does, the first file written for every order (its order, its only parameter, bound
    to ``order``)."""
    def fitting(lay: Layout) -> bool:       # arrays as they are: none derived; values held
        st = storage_or_none(lay)
        return st is not None and not lay.derived and lay.implicit is None and fits(lay, st)

    generic = []
    for name in layout_names():
        lay = load_layout(name)
        if not lay.params and fitting(lay):
            return lay
        if order is not None and lay.order_param is not None \
                and set(lay.params) == {lay.order_param}:
            generic.append(for_order(lay, order))
    return next((lay for lay in generic if fitting(lay)), None)


@cache
def compressed_rows_layout() -> Layout | None:
    """A layout on the search path that holds scipy's CSR arrays as they are: a dense level of
    rows over a compressed level of columns (a pointer array, one index array) with no
    property that only sorted, duplicate-free entries satisfy, so unsorted rows and
    duplicates are allowed."""
    return _first_layout(lambda lay, st: (
        lay.order == 2 and st.order == (0, 1) and st.is_dense_over_compressed()
        and st.free_tail == 1 and not st.order_properties()))


@cache
def coordinate_layout(order: int) -> Layout | None:
    """A layout on the search path that stores an order-``order`` tensor as coordinate lists
    (one compressed level over every dimension, no pointer), in any order, with a packer:
    what any tensor is rebuilt from, entry by entry."""
    return _first_layout(lambda lay, st: (
        lay.order == order and st.is_coordinate_list() and st.free_tail == order
        and lay.packer is not None), order)


@cache
def dense_layout(order: int) -> Layout | None:
    """A layout on the search path storing an order-``order`` array row-major, all levels
    dense."""
    return _first_layout(lambda lay, st: (
        lay.order == order and lay.dense_array is not None
        and st.order == tuple(range(order)) and st.is_all_dense()), order)
