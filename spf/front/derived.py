"""Derived fields: an index array defined by an expression of another (``[derived]`` in a
layout file), computed when a tensor is built and read by the relation like any field.

``rowPtr = "prefix_sum(rowLen)"``: ``rowPtr[0] = 0``, ``rowPtr[k + 1] = rowPtr[k] + rowLen[k]``
(one longer than ``rowLen``); ``slicePtr = "prefix_sum(C * sliceWidth)"`` scales each term by a
constant or a parameter.  Given the source, the field is computed; given the field alone (a
tensor written by its relation, or built from the pointer array), the source is its
differences divided by the scale; given both, they must agree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

import numpy as np


class DerivedKind(Enum):
    """How a derived field follows from its source."""

    PREFIX_SUM = "prefix_sum"


@dataclass(frozen=True)
class Derived:
    """``field = kind(scale * source)``."""

    field: str
    kind: DerivedKind
    source: str
    scale: int = 1

    def text(self) -> str:
        inner = self.source if self.scale == 1 else f"{self.scale} * {self.source}"
        return f"{self.kind.value}({inner})"

    def compute(self, source: np.ndarray) -> np.ndarray:
        """The field from its source (int64)."""
        out = np.zeros(len(source) + 1, np.int64)
        np.cumsum(np.asarray(source, np.int64) * self.scale, out=out[1:])
        return out

    def invert(self, field: np.ndarray) -> np.ndarray | None:
        """The source the field was computed from, or None when none was (a first entry
        other than 0, a difference that is not a multiple of the scale)."""
        arr = np.asarray(field, np.int64).reshape(-1)
        if arr.size == 0 or arr[0] != 0:
            return None
        steps = np.diff(arr)
        if (steps % self.scale).any():
            return None
        return steps // self.scale


_FORM = re.compile(r"\s*(\w+)\s*\(\s*(?:(\w+)\s*\*\s*)?(\w+)\s*(?:\*\s*(\w+)\s*)?\)\s*")


def parse_derived(field: str, text: str, params: dict[str, int]) -> Derived:
    """``field = text``; ValueError saying what is wrong (the caller adds where)."""
    m = _FORM.fullmatch(text)
    kinds = {k.value: k for k in DerivedKind}
    if not m or m.group(1) not in kinds or (m.group(2) and m.group(4)):
        raise ValueError(f"derived field {field!r}: {text!r} must be "
                         "prefix_sum(X) or prefix_sum(K * X), X an index array and K an "
                         "integer or a parameter")
    left, source, right = m.group(2), m.group(3), m.group(4)
    if left is not None and not _is_scale(left, params) and _is_scale(source, params):
        left, source = source, left           # prefix_sum(X * K)
    factor = left or right
    scale = 1
    if factor is not None:
        if not _is_scale(factor, params):
            raise ValueError(f"derived field {field!r}: the factor {factor!r} must be a "
                             "positive integer or a parameter")
        scale = int(factor) if factor.isdigit() else params[factor]
    if scale < 1:
        raise ValueError(f"derived field {field!r}: the factor must be positive, got {scale}")
    return Derived(field, kinds[m.group(1)], source, scale)


def _is_scale(word: str, params: dict[str, int]) -> bool:
    return word.isdigit() or word in params
