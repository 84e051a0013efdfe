"""Layouts: a physical-to-logical relation with UFs, the struct fields, the value
expression, the properties of the index arrays, the parameters and the index width.

A layout is read from a file by :mod:`spf.front.layout_file`, found by name by
:mod:`spf.front.layout_path`; everything format-specific lives in those files.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..errors import SpecError
from . import index_expr as ie
from .derived import Derived
from .properties import Property
from .relation import Relation
from .syntax import MAX_INT
from .terms import Aff, Constraint, UFCall
from .value_types import FLOAT64, ValueType

INDEX_TYPE = "int"
VALUE_TYPE = "double"
INDEX_WIDTHS = ("int32", "int64")   # what ``int`` fields are in C and numpy



def wider_hint(index_type: str) -> str:
    """The end of an overflow message: what to do about it."""
    return "; use index_type='int64'" if index_type == "int32" else ""

@dataclass(frozen=True)
class FieldSpec:
    """A struct field: a scalar (``dims == ()``) or an array with extents ``dims``."""

    name: str
    ctype: str  # "int" (index type) or "double" (value type)
    dims: tuple[ie.IExpr, ...] = ()
    width: str | None = None    # an index array's own width ("int32", "int64"), else the layout's

    @property
    def is_array(self) -> bool:
        return bool(self.dims)

    @property
    def is_index_array(self) -> bool:
        """An ``int`` array: an index array, which the relation and properties may read."""
        return self.is_array and self.ctype == INDEX_TYPE


@dataclass(frozen=True)
class Implicit:
    """The value of a pattern layout (``value = "1"``): every stored entry holds
    ``constant``; the layout stores no value array (scipy's and GraphBLAS's structure-only
    matrices, Finch's Pattern level)."""

    constant: float
    text: str       # as the file writes it

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class Layout:
    """A parsed layout spec with its parameters bound (equal when name, file and params are)."""

    name: str
    source: str
    description: str
    relation: Relation
    value: ie.ArrayRef | Implicit     # where each entry's value is, or the one it holds
    shape: tuple[Aff, ...]
    fields: Mapping[str, FieldSpec]
    params: Mapping[str, int]
    properties: tuple[Property, ...]
    # loads the layout's file with other parameters (layout_file.load_file, given by the
    # parser, which this model does not import)
    loader: Callable[[str, tuple[tuple[str, int], ...]], Layout] = field(repr=False)
    packer: str | None = None
    dense_array: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    index_type: str = "int32"
    part: int | None = None     # which disjunct of a union layout's relation (see parts())
    order_param: str | None = None  # the parameter that is the order (a file for every order)
    derived: Mapping[str, Derived] = field(default_factory=dict, compare=False)  # [derived]
    value_type: ValueType = FLOAT64     # what the values are (a tensor's or kernel's choice)
    fill: float = 0.0       # what its tensors' absent elements hold by default (``fill``)

    def __post_init__(self) -> None:
        """A ``fill`` and an implicit value its value type holds (``inf`` is no integer,
        2.5 no bool)."""
        if self.fill != 0 and not self.value_type.holds(self.fill):
            raise SpecError(f"layout {self.name}: its fill {self.fill!r} is no "
                            f"{self.value_type.name} value (the type its values have here)",
                            self.source)
        if self.implicit is not None and not self.value_type.holds(self.implicit):
            raise SpecError(f"layout {self.name}: its value {self.value} is no "
                            f"{self.value_type.name} value (the type its values have here)",
                            self.source)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def indices(self) -> tuple[str, ...]:
        """The layout (physical) indices, in storage order."""
        return self.relation.in_vars

    @property
    def order(self) -> int:
        """Number of logical dimensions."""
        return len(self.relation.out_vars or ())

    @property
    def implicit(self) -> float | None:
        """The value every stored entry holds in a pattern layout (its ``value`` key is a
        constant; it stores no value array), else None."""
        return self.value.constant if isinstance(self.value, Implicit) else None

    @property
    def value_ref(self) -> ie.ArrayRef:
        """Where each entry's value is stored (a valued layout: callers check
        :attr:`implicit` first)."""
        assert isinstance(self.value, ie.ArrayRef), f"{self.name} stores no value array"
        return self.value

    @property
    def value_array(self) -> str | None:
        """The value array field, None for a pattern layout."""
        return self.value.array if isinstance(self.value, ie.ArrayRef) else None

    @property
    def scalar_fields(self) -> list[str]:
        return [f.name for f in self.fields.values() if not f.is_array]

    @property
    def index_arrays(self) -> list[str]:
        return [f.name for f in self.fields.values() if f.is_index_array]

    @cached_property
    def key(self) -> str:
        """Identity for caching: name, file and bound parameters."""
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        width = "" if self.index_type == "int32" else f":{self.index_type}"
        values = "" if self.value_type.is_float64 else f"<{self.value_type.name}>"
        part = "" if self.part is None else f"#{self.part}"
        return f"{self.name}[{params}]{width}{values}{part}@{self.source}"

    @cached_property
    def read_arrays(self) -> frozenset[str]:
        """The index arrays the relation (any part) or the value subscripts read."""
        names = {c.name for c in self.relation.calls()}
        if isinstance(self.value, ie.ArrayRef):
            names |= {c.name for s in self.value.subscripts for c in ie.calls(s)}
        return frozenset(names)

    def written_as_one_conjunction(self) -> str | None:
        """Why spf cannot write entries into this layout's relation (an output or a
        conversion destination must be one conjunction without existentials), or None."""
        rel = self.relation
        if len(rel.disjuncts) > 1:
            return (f"its relation is a union of {len(rel.disjuncts)} parts: spf reads, "
                    "checks and converts from a union layout but does not write into one")
        if rel.exists:
            return "its relation has existential variables"
        return None

    def parts(self) -> list[Layout]:
        """One layout per disjunct of the relation (``[self]`` for one): the parts of a union
        layout (an ELL part and a COO part, say) share its fields and struct; a kernel runs
        one statement per part, and a tensor is checked part by part."""
        rel = self.relation
        if len(rel.disjuncts) < 2:
            return [self]
        return [replace(self, relation=Relation(rel.in_vars, rel.out_vars, [conj], rel.exists),
                        part=k) for k, conj in enumerate(rel.disjuncts)]

    def with_params(self, **params: int) -> Layout:
        """The same layout file loaded with other parameter values."""
        if not params:
            return self
        for k, v in params.items():
            check_param(self.name, k, v, self.source)
        loaded = self.loader(self.source, tuple(sorted({**self.params, **params}.items())))
        return _params_fit(loaded.with_index_type(self.index_type)
                           ).with_value_type(self.value_type)

    def with_value_type(self, value_type: ValueType) -> Layout:
        """The same layout holding values of ``value_type``."""
        if value_type == self.value_type:
            return self
        return replace(self, value_type=value_type)

    def with_index_type(self, index_type: str) -> Layout:
        """The same layout with its ``int`` fields (index arrays, sizes) of width
        ``index_type``: ``"int32"`` (the default) or ``"int64"``."""
        if index_type not in INDEX_WIDTHS:
            raise SpecError(f"index_type must be one of {', '.join(map(repr, INDEX_WIDTHS))}, "
                            f"got {index_type!r}")
        if index_type == self.index_type:
            return self
        if index_type == "int32" and self.int64_arrays:
            raise SpecError(f"layout {self.name} declares {', '.join(self.int64_arrays)} int64: "
                            "its loops run in 64 bits, so its index type cannot be 'int32'",
                            self.source)
        return _params_fit(replace(self, index_type=index_type))

    @property
    def int64_arrays(self) -> tuple[str, ...]:
        """The index arrays declared ``int64`` (the layout's loops then run in 64 bits)."""
        return tuple(f.name for f in self.fields.values() if f.width == "int64")

    @property
    def mixed_widths(self) -> bool:
        """Whether an index array has a width other than the layout's index type (the
        generated assembly templates work in one width: such a layout is written from an
        entry list, :mod:`spf.front.writing`)."""
        return any(f.width not in (None, self.index_type) for f in self.fields.values())

    def dtype_of(self, field: str) -> str:
        """The numpy dtype of an ``int`` field: its own width, else the layout's index type."""
        return self.fields[field].width or self.index_type

    def range_constraints(self, call: UFCall) -> list[Constraint]:
        """Range facts that hold for ``call`` (a call of one of this layout's UFs)."""
        return [c for prop in self.properties for c in prop.facts(call)]

    def __str__(self) -> str:
        return f"{self.name} ({self.source})"


def check_param(layout: str, name: str, value: Any, source: str) -> None:
    """A parameter value given when loading: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_INT:
        raise SpecError(f"parameter {name} of layout {layout} must be a positive integer of "
                        f"at most 64 bits, got {value!r}", source)


def _params_fit(layout: Layout) -> Layout:
    """``layout``, or SpecError when a parameter does not fit its index type (parameters are
    constants of the index arithmetic in generated C and in the packers' arrays)."""
    top = 2 ** (31 if layout.index_type == "int32" else 63) - 1
    for name, value in layout.params.items():
        if value > top:
            hint = "; use index_type='int64'" if layout.index_type == "int32" else ""
            raise SpecError(f"parameter {name} = {value} of layout {layout.name} does not fit "
                            f"index_type={layout.index_type!r} (at most {top}){hint}",
                            layout.source)
    return layout
