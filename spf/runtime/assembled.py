"""The output a kernel assembles, from Python's side: its statement instances counted (a
bound on its entries), its layout's arrays allocated for that many level by level, the kernel
run into them and the arrays trimmed to what it used."""
from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..assembly import AssemblyPlan, strategy
from ..assembly.entry_c import SLOTS_ENTRIES
from ..back.status import Status
from ..errors import ArgumentError, OutOfMemoryError
from ..front.layout import wider_hint
from ..front.storage import Storage, StorageKind
from . import build as runtime
from .fields import index_max
from .memory import reserve

# An output whose zeros are dropped is sized by counting its statement instances without
# reading values (``<name>_bound_slots``) when that bound is at most SLOTS_ENTRIES entries
# (see spf.assembly.entry_c, whose C entry point chooses so too).


def run_assembling(assembly: AssemblyPlan, fn: Callable[..., int],
                   sizers: Sequence[Callable[..., int]], inputs: Sequence[Any],
                   shape: tuple[int, ...], name: str, output: str) -> dict[str, Any]:
    """The fields of ``output`` (of ``shape``) built by the kernel function ``fn`` on
    ``inputs``: counted by the first of ``sizers`` (``<name>_bound_slots``, then
    ``<name>_bound``) whose bound is small enough, allocated, filled and trimmed.  ``kernel``
    is the kernel's name."""
    storage = assembly.storage
    ext = [shape[d] for d in storage.order]
    width = storage.layout.index_type
    if math.prod(max(n, 1) for n in ext) >= 2 ** 63:
        raise ArgumentError(f"output {output!r} of shape {shape} has more than 2^63 "
                            "coordinates; its keys would overflow int64")
    bound = ctypes.c_int64(0)
    extents = np.array(ext, dtype=np.int64)     # a nest the output's extents bound reads them
    counted = [runtime.address(extents), *inputs] if assembly.ranged else list(inputs)
    for sizer in sizers:        # counting without reading values suffices if it sizes little
        status = sizer(ctypes.addressof(bound), *counted)
        if status != Status.OK:
            check_values(status, name)
            raise OutOfMemoryError(f"kernel {name}: its C code could not allocate the state "
                                   f"of its finds while sizing output {output!r} (malloc "
                                   "returned NULL): out of memory")
        if bound.value <= SLOTS_ENTRIES:
            break
    top = index_max(storage.layout)
    counts_first = strategy(assembly).counts_first     # it scatters every instance
    if counts_first and bound.value > top:
        raise ArgumentError(f"output {output!r} would be scattered from {bound.value} entries, "
                            f"more than index_type={width!r} can address" + wider_hint(width))
    caps = _level_capacities(storage, ext, bound.value, top, counts_first)
    _check_narrow_fields(storage, shape, caps, output)
    fields = _storage_fields(storage, shape, caps, output)
    size = np.array(caps, dtype=np.int64)
    struct = runtime.make_struct(storage.layout, fields)
    status = fn(ctypes.addressof(struct), runtime.address(size), *inputs)
    check_values(status, name)
    if status == Status.OUT_OF_MEMORY:
        raise OutOfMemoryError(f"kernel {name}: its C code could not allocate what it "
                               f"assembles output {output!r} of shape {shape} with (its "
                               "workspace, entry streams or find state; malloc returned "
                               "NULL): out of memory")
    if status != 0:
        if max(caps) == top:
            raise ArgumentError(f"output {output!r} has more stored positions than "
                                f"index_type={width!r} can address" + wider_hint(width))
        raise RuntimeError(f"kernel {name}: {output!r} outgrew the arrays sized by {name}_bound "
                           "(a bug in spf; please report it)")
    _trim(storage, fields, size)
    return fields


def check_values(status: int, name: str) -> None:
    """ArgumentError when kernel ``name``'s C returned the status of a value numpy refuses
    (:class:`~spf.back.status.Status`), computed anyway (as 0) to complete the call."""
    if status == Status.NEGATIVE_POWER:
        raise ArgumentError(f"kernel {name}: an integer was raised to a negative integer power "
                            "(pow), which numpy refuses (Integers to negative integer powers "
                            "are not allowed); the output is not complete. Make the base or "
                            "the exponent a float")


def _check_narrow_fields(storage: Storage, shape: tuple[int, ...], caps: list[int],
                         output: str) -> None:
    """An index array declared narrower than the layout (``int32`` in an ``int64`` layout)
    must hold every coordinate of the shape and every position allocated."""
    lay = storage.layout
    need = max([*shape, *caps, 0])
    for name in lay.index_arrays:
        top = int(np.iinfo(lay.dtype_of(name)).max)
        if need > top:
            raise ArgumentError(f"output {output!r}: {lay.name}'s {name} is "
                                f"{lay.dtype_of(name)}, which cannot hold {need} (the output's "
                                "extents and positions)")


def _level_capacities(storage: Storage, ext: list[int], bound: int, top: int,
                      scatter: bool = False) -> list[int]:
    """Positions to allocate per level: exact for dense levels; for a compressed level at
    most one per entry (``bound``) and per distinct coordinate prefix (``scatter``: one per
    statement instance, combined only afterwards); at most ``top`` (the index type's
    largest value)."""
    caps: list[int] = []
    coords = 0
    for k, lv in enumerate(storage.levels):
        coords += len(lv.coords)
        if lv.kind is StorageKind.DENSE:
            cap = (caps[-1] if k else 1) * ext[coords - 1]
        else:
            cap = bound if scatter else min(bound, math.prod(ext[:coords]))
        caps.append(min(cap, top))
    return caps


def _storage_fields(storage: Storage, shape: tuple[int, ...], caps: list[int],
                    output: str) -> dict[str, Any]:
    """The output layout's fields with room for ``caps`` positions per level (pointer
    arrays zeroed; values zeroed when the last level is dense, as it has no entry for
    every position), and for the ``[derived]`` arrays the kernel computes from them."""
    fields: dict[str, Any] = {f: int(n) for f, n in zip(storage.shape_fields, shape)}
    reserve(_bytes(storage, caps), f"output {output!r} of shape {shape} ("
            f"{storage.layout.name}'s arrays for {caps[-1]} entries)")
    for k, lv in enumerate(storage.levels):
        if lv.count:
            fields[lv.count] = 0
        if lv.pointer:
            fields[lv.pointer] = np.zeros(caps[k - 1] + 1,
                                          dtype=storage.layout.dtype_of(lv.pointer))
        for _, arr in lv.coords:
            if arr:
                fields[arr] = np.empty(caps[k], dtype=storage.layout.dtype_of(arr))
    for dp in storage.derived_passes():     # written by the kernel from the levels' arrays
        fields[dp.computed] = np.empty(dp.computed_length(caps),
                                       dtype=storage.layout.dtype_of(dp.computed))
    alloc = np.zeros if storage.levels[-1].kind is StorageKind.DENSE else np.empty
    if storage.value_array is not None:     # a pattern layout stores no values
        fields[storage.value_array] = alloc(caps[-1], dtype=storage.layout.value_type.dtype)
    return fields


def _bytes(storage: Storage, caps: list[int]) -> int:
    """What :func:`_storage_fields` allocates for ``caps`` positions per level, in bytes."""
    lay = storage.layout

    def width(name: str) -> int:
        return np.dtype(lay.dtype_of(name)).itemsize
    total = caps[-1] * lay.value_type.dtype.itemsize if storage.value_array else 0
    for k, lv in enumerate(storage.levels):
        total += (caps[k - 1] + 1) * width(lv.pointer) if lv.pointer else 0
        total += sum(caps[k] * width(a) for _, a in lv.coords if a)
    return total + sum(dp.computed_length(caps) * width(dp.computed)
                       for dp in storage.derived_passes())


def _trim(storage: Storage, fields: dict[str, Any], size: np.ndarray) -> None:
    """Shrink the arrays (in place: realloc) to the positions each level used."""
    for k, lv in enumerate(storage.levels):
        if lv.count:
            fields[lv.count] = int(size[k])
        if lv.pointer:
            fields[lv.pointer].resize(int(size[k - 1]) + 1, refcheck=False)
        for _, arr in lv.coords:
            if arr:
                fields[arr].resize(int(size[k]), refcheck=False)
    for dp in storage.derived_passes():
        fields[dp.computed].resize(dp.computed_length(size.tolist()), refcheck=False)
    if storage.value_array is not None:
        fields[storage.value_array].resize(int(size[-1]), refcheck=False)
