"""Value types: what a tensor's values are (the layout file says where they are).

One :class:`ValueType` per supported numpy dtype: its C type, its kind and what generated
code needs of it.  A layout instance carries one (:attr:`spf.front.layout.Layout.value_type`,
float64 unless a tensor or a kernel says otherwise); nothing else names a dtype.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from ..errors import ArgumentError


class Kind(Enum):
    """numpy's kinds of the supported types."""

    BOOL = "b"
    INT = "i"
    UINT = "u"
    FLOAT = "f"
    COMPLEX = "c"


@dataclass(frozen=True)
class ValueType:
    """A supported value type: the numpy dtype ``name`` and its C type ``c``."""

    name: str
    c: str

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.name)

    @property
    def kind(self) -> Kind:
        return Kind(self.dtype.kind)

    @property
    def is_float64(self) -> bool:
        return self.name == "float64"

    def infinity_c(self, positive: bool) -> str:
        """What an infinite semiring zero is in this type, in C: infinity for floats, the
        type's largest or smallest value for integers, 1 or 0 for booleans."""
        if self.kind is Kind.FLOAT:
            return f"({self.c})__builtin_inf()" if positive else f"(-({self.c})__builtin_inf())"
        if self.kind is Kind.BOOL:
            return "1" if positive else "0"
        if self.kind is Kind.UINT:
            return f"{self.name.upper()}_MAX" if positive else "0"
        return f"{self.name.upper()}_{'MAX' if positive else 'MIN'}"

    def holds(self, x: float) -> bool:
        """Whether the number ``x`` is a value of this type (an integer type's within its
        range; ``inf`` and ``nan`` only a float's or complex's)."""
        if self.kind in (Kind.FLOAT, Kind.COMPLEX):
            return True
        if not math.isfinite(x) or x != int(x):
            return False
        if self.kind is Kind.BOOL:
            return x in (0, 1)
        info = np.iinfo(self.dtype)
        return info.min <= x <= info.max

    def value_of(self, x: float) -> Any:
        """The number ``x`` (a semiring's zero) in this type, infinities as
        :meth:`infinity_c` makes them."""
        if math.isinf(x) and self.kind is not Kind.FLOAT:
            if self.kind is Kind.BOOL:
                return np.bool_(x > 0)
            info = np.iinfo(self.dtype)
            return self.dtype.type(info.max if x > 0 else info.min)
        return self.dtype.type(x)


VALUE_TYPES: dict[str, ValueType] = {t.name: t for t in (
    ValueType("bool", "_Bool"),
    ValueType("int8", "int8_t"), ValueType("int16", "int16_t"),
    ValueType("int32", "int32_t"), ValueType("int64", "int64_t"),
    ValueType("uint8", "uint8_t"), ValueType("uint16", "uint16_t"),
    ValueType("uint32", "uint32_t"), ValueType("uint64", "uint64_t"),
    ValueType("float32", "float"), ValueType("float64", "double"),
    ValueType("complex64", "float _Complex"), ValueType("complex128", "double _Complex"))}
FLOAT64 = VALUE_TYPES["float64"]


def value_type(dtype: Any, what: str = "values") -> ValueType:
    """The supported type of ``dtype`` (a numpy dtype, its name or a Python type);
    ArgumentError naming ``what`` and listing the supported types otherwise."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = repr(dtype)
    if name not in VALUE_TYPES:
        raise ArgumentError(f"{what}: dtype {name} is not supported; spf computes with "
                            f"{', '.join(VALUE_TYPES)}")
    return VALUE_TYPES[name]


def held_type(dtype: np.dtype, what: str) -> ValueType:
    """The value type data of ``dtype`` keeps: its own when supported, float16 as float32,
    extended precision as float64 or complex128 (whose checks then refuse a value they do
    not hold); ArgumentError naming ``what`` and listing the supported types otherwise."""
    if dtype.name in VALUE_TYPES:
        return VALUE_TYPES[dtype.name]
    if dtype.kind == "f":
        return VALUE_TYPES["float32" if dtype.itemsize < 4 else "float64"]
    if dtype.kind == "c":
        return VALUE_TYPES["complex128"]
    return value_type(dtype, what)


def result_type(*types: ValueType, weak: tuple[Any, ...] = ()) -> ValueType:
    """numpy's promotion of ``types`` and of the numbers ``weak`` (Python numbers promote
    weakly, as literals: ``2.5 * float32`` is float32; numpy scalars by their type; alone,
    an integer is int64, one beyond int64 a float, as numpy's Python int next to a float);
    float64 for neither; float16 held as float32."""
    if not types and not weak:
        return FLOAT64
    dtype = np.result_type(*(t.dtype for t in types), *weak)
    return FLOAT64 if dtype.kind == "O" else held_type(dtype, "a number")


def can_cast(src: ValueType, dst: ValueType) -> bool:
    """Whether numpy's ``same_kind`` casting allows ``src`` to ``dst``."""
    return bool(np.can_cast(src.dtype, dst.dtype, "same_kind"))


@dataclass(frozen=True)
class Typing:
    """A kernel's value types: each tensor's (scalars included), the output's and the
    accumulator's (the output's unless ``accumulate=`` names a wider one)."""

    tensors: tuple[tuple[str, ValueType], ...]
    output: ValueType = FLOAT64
    accumulate: ValueType = FLOAT64

    def of(self, tensor: str) -> ValueType:
        return dict(self.tensors).get(tensor, self.output)

    @property
    def is_float64(self) -> bool:
        return all(t.is_float64 for _, t in self.tensors) and self.output.is_float64 \
            and self.accumulate.is_float64

    def describe(self, output: str) -> str:
        """One line for a report or a C header: each tensor's type, the output's, the sums'."""
        inputs = ", ".join(f"{t} {vt.name}" for t, vt in self.tensors if t != output)
        sums = "" if self.accumulate == self.output else \
            f", summed in {self.accumulate.name}"
        return f"{inputs} -> {output} {self.output.name}{sums}"

    @property
    def wraps(self) -> bool:
        """Whether integers are computed (their overflow must wrap, as numpy's; C computes
        uint8 and uint16 products in signed int)."""
        return any(t.kind in (Kind.INT, Kind.UINT) for t in (self.output, self.accumulate,
                                                *(t for _, t in self.tensors)))


FLOAT64_TYPING = Typing(())
