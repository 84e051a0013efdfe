"""Layout files: the TOML text of a layout parsed and checked into a
:class:`~spf.front.layout.Layout` (the file format: docs/layouts.md).

Everything format-specific lives in those files; this module only reads and checks them.  Every
mistake is a :class:`spf.SpecError` at the key, value or name it is about.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from ..concurrency import symbolic
from ..errors import SpecError
from . import index_expr as ie
from .c_reserved import macro_in_c
from .derived import Derived, parse_derived
from .dims import expand as expand_dims
from .established import holds_densely
from .layout import INDEX_TYPE, INDEX_WIDTHS, VALUE_TYPE, FieldSpec, Implicit, Layout, check_param
from .properties import KEYS, KINDS, Property, PropertyKind, PropertyTable
from .relation import Relation
from .syntax import C_KEYWORDS, MAX_INT, parse_aff, parse_constraints
from .terms import Aff, Constraint
from .toml_source import TomlSource, is_file, name_position, read_spec

_KEYS = ("name", "description", "relation", "value", "shape", "fields", "params", "properties",
         "packer", "dense_array", "order", "derived", "fill")
MAX_GENERIC_ORDER = 16      # a file for every order: orders 1 .. 16


@lru_cache(maxsize=256)
def load_file(path: str, param_items: tuple[tuple[str, int], ...]) -> Layout:
    """The layout file at ``path`` with the parameters ``param_items`` bound (cached)."""
    return parse_layout(read_spec(path, "layout file"), path, dict(param_items))


@dataclass(frozen=True)
class _Names:
    """What the formulas of a layout file may name: its parameters (bound to their values) and
    its fields, of which the scalars and the index arrays."""

    params: dict[str, int]
    fields: dict[str, FieldSpec]

    @cached_property
    def scalars(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields.values() if not f.is_array)

    @cached_property
    def index_arrays(self) -> dict[str, FieldSpec]:
        return {f.name: f for f in self.fields.values() if f.is_index_array}


@symbolic
def parse_layout(text: str, source: str = "<string>",
                 params: Mapping[str, int] | None = None) -> Layout:
    """Parse the TOML text of a layout file."""
    file = TomlSource(text, source)
    table = file.parse()
    for key in table:
        if key not in _KEYS:
            raise file.error(f"unknown key {key!r}; expected one of {sorted(_KEYS)}", key,
                             at_key=True)
    name = file.string(table, "name") or ""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        raise file.error(f"layout name {name!r} must be an identifier", "name")
    bound = _parse_params(table, file, name, params)
    order_param = _order_param(table, file, name, bound)
    if order_param is not None:
        try:
            table = expand_dims(table, bound[order_param])
        except ValueError as exc:
            raise SpecError(f"layout {name}: {exc}", file.source) from None
    names = _parse_fields(table, file, bound)
    rel_text = file.string(table, "relation") or ""
    line, col = file.value_position(rel_text, "relation")
    relation = _parse_relation(rel_text, file, line, col, names)
    shape = _parse_shape(table, file, names, relation)
    value = _parse_value(table, file, names, relation)
    properties = tuple(_parse_property(p, k, file, names, relation)
                       for k, p in enumerate(_tables(table, "properties", file)))
    layout = Layout(name=name, source=source, description=str(table.get("description", "")),
                    relation=relation, value=value, shape=shape, fields=names.fields,
                    params=names.params, properties=properties, loader=load_file,
                    packer=_packer(table, file), dense_array=_dense_array(table, file, names),
                    raw=table, order_param=order_param,
                    derived=_parse_derived(table, file, names),
                    index_type=_widest(names.fields), fill=_fill(table, file))
    _check_has_entries(layout, line, col)
    if layout.dense_array is not None and not holds_densely(layout, layout.dense_array):
        raise file.error(f"dense_array {layout.dense_array!r} says the field holds the whole "
                         "tensor in row-major order, but the relation is not g_k = p_k over "
                         "0 <= p_k < shape_k with the value at "
                         f"{layout.dense_array}[p_0]...[p_n]",
                         "dense_array")
    return layout


def _widest(fields: Mapping[str, FieldSpec]) -> str:
    """The layout's index type: int32, or int64 when an index array is declared int64 (the
    loops over its positions run in 64 bits)."""
    return "int64" if any(f.width == "int64" for f in fields.values()) else "int32"


def _parse_derived(table: dict, file: TomlSource, names: _Names) -> dict[str, Derived]:
    """The ``[derived]`` table: index arrays computed from others (``prefix_sum``)."""
    raw = table.get("derived", {})
    if not isinstance(raw, dict):
        raise file.error("'derived' must be a table of field = expression", "derived")
    start = file.table_start("derived")
    out: dict[str, Derived] = {}
    for fname, text in raw.items():
        if not isinstance(text, str):
            raise file.error(f"derived field {fname!r} must be a string such as "
                             '"prefix_sum(rowLen)"', fname, start)
        try:
            d = parse_derived(fname, text, dict(names.params))
        except ValueError as exc:
            raise file.error(str(exc), fname, start) from None
        for what, name in (("field", d.field), ("source", d.source)):
            spec = names.fields.get(name)
            if spec is None or not spec.is_index_array or len(spec.dims) != 1:
                raise file.error(f"derived field {fname!r}: its {what} {name!r} must be a "
                                 "one-dimensional int array of [fields]", fname, start)
        if d.source == d.field or d.source in raw:
            raise file.error(f"derived field {fname!r}: its source {d.source!r} must be a "
                             "field that is not derived", fname, start)
        out[fname] = d
    return out


def _parse_params(table: dict, file: TomlSource, name: str,
                  params: Mapping[str, int] | None) -> dict[str, int]:
    """Parameters (compile-time constants): the file's defaults, overridden by ``params``."""
    raw_params = table.get("params", {})
    if not isinstance(raw_params, dict):
        raise file.error("'params' must be a table of integer defaults", "params")
    bound: dict[str, int] = {}
    pstart = file.table_start("params")
    for k, v in raw_params.items():
        if not _is_c_name(k):
            raise file.error(f"parameter name {k!r} must be an identifier and not a C keyword",
                             k, pstart, at_key=True)
        if not isinstance(v, int) or isinstance(v, bool) or abs(v) > MAX_INT:
            raise file.error(f"parameter {k!r} must have an integer default that fits in 64 "
                             "bits", k)
        bound[k] = v
    for k, v in (params or {}).items():
        if k not in bound:
            raise SpecError(f"layout {name} has no parameter {k!r}", file.source)
        check_param(name, k, v, file.source)
        bound[k] = v
    return bound


def _order_param(table: dict, file: TomlSource, name: str, bound: dict[str, int]) -> str | None:
    """The parameter that is the order of a file written for every order (``order = "N"``),
    checked to be a parameter bound to an order spf supports; None for other files."""
    if "order" not in table:
        return None
    param = table["order"]
    if not isinstance(param, str) or param not in bound:
        raise file.error(f"'order' must name one of the layout's parameters "
                         f"({sorted(bound) or 'it has none'}), got {param!r}", "order")
    if not 1 <= bound[param] <= MAX_GENERIC_ORDER:
        raise SpecError(f"layout {name}: its order {param} = {bound[param]} must be between 1 "
                        f"and {MAX_GENERIC_ORDER}", file.source)
    return param


def _parse_fields(table: dict, file: TomlSource, bound: dict[str, int]) -> _Names:
    """The struct fields: scalars and arrays with extents over scalars and index arrays."""
    raw_fields = table.get("fields")
    if not isinstance(raw_fields, dict) or not raw_fields:
        raise file.error("missing [fields] table (struct fields and their types)")
    fstart = file.table_start("fields")
    fields = {fname: _parse_field(fname, ftype, file, bound, fstart)
              for fname, ftype in raw_fields.items()}
    names = _Names(bound, fields)
    for f in fields.values():
        for d in f.dims:
            bad = ie.names(d) - names.scalars
            if bad:
                raise file.error(f"field {f.name!r}: extent uses {sorted(bad)}, which are not "
                                 "scalar fields or parameters", f.name, fstart)
            for c in ie.calls(d):
                if c.name not in names.index_arrays:
                    raise file.error(f"field {f.name!r}: extent reads {c.name!r}, not an index "
                                     "array", f.name, fstart)
    return names


def _parse_field(fname: str, ftype: Any, file: TomlSource, bound: dict[str, int],
                 fstart: int) -> FieldSpec:
    """The field ``fname = ftype`` of the table ``[fields]`` (at offset ``fstart``)."""
    if not _is_c_name(fname):
        raise file.error(f"field name {fname!r} must be an identifier and not a C keyword "
                         "(it names a member of the C struct)", fname, fstart, at_key=True)
    if macro_in_c(fname):
        raise file.error(f"field name {fname!r} is a macro of generated C (its headers or the "
                         "compiler define NULL, INT32_MAX, linux, ...), which would replace the "
                         "member of the C struct it names; choose another name", fname, fstart,
                         at_key=True)
    if not isinstance(ftype, str):
        raise file.error(f'type of field {fname!r} must be a string such as "int[numRows + 1]"',
                         fname, fstart)
    if fname in bound:
        raise file.error(f"{fname!r} is both a field and a parameter", fname, fstart,
                         at_key=True)
    m = re.fullmatch(r"\s*(int32|int64|int|double)\s*((?:\[[^\]]*\]\s*)*)", ftype)
    if not m:
        raise file.error(f"field {fname!r}: type {ftype!r} must be int, int32, int64 or double "
                         "with optional [extent] suffixes", fname, fstart)
    pnum = {k: ie.Num(v) for k, v in bound.items()}
    dims = []
    for dm in re.finditer(r"\[([^\]]*)\]", m.group(2)):
        if not dm.group(1).strip():
            raise file.error(f"field {fname!r}: empty extent '[]'", fname, fstart)
        line, col = file.value_position(dm.group(1), fname, fstart)
        dims.append(ie.substitute(ie.parse_index_expr(dm.group(1), file.source, line, col),
                                  pnum))
    if m.group(1) == VALUE_TYPE and not dims:
        raise file.error(f"field {fname!r}: a double field must be an array", fname, fstart)
    width = m.group(1) if m.group(1) in INDEX_WIDTHS else None
    if width is not None and not dims:
        raise file.error(f"field {fname!r}: a width ({width}) is given to index arrays; a "
                         "scalar field has the layout's index type (int)", fname, fstart)
    return FieldSpec(fname, INDEX_TYPE if width else m.group(1), tuple(dims), width)


def _parse_relation(rel_text: str, file: TomlSource, line: int, col: int,
                    names: _Names) -> Relation:
    """The relation from layout indices to logical indices, every logical index determined."""
    source = file.source
    relation = Relation.parse(rel_text, source, line, col, names.params)
    if relation.is_set:
        raise SpecError("the relation must map layout indices to logical indices: "
                        "{[p...] -> [g...] : ...}", source, line, col)
    for var in relation.vars:
        if var in names.fields or var in names.params:
            raise SpecError(f"relation variable {var!r} has the name of a "
                            f"{'field' if var in names.fields else 'parameter'}; rename one "
                            "of them", source, *name_position(rel_text, line, col, var, False))
    for sym in relation.symbols():
        if sym not in names.scalars:
            raise SpecError(f"relation uses {sym!r}, which is not a variable, a scalar field "
                            "or a parameter", source,
                            *name_position(rel_text, line, col, sym, False))
    for call in relation.calls():
        _check_call(call.name, len(call.args), names, source,
                    *name_position(rel_text, line, col, call.name, True))
    for g in _undetermined(relation, names.scalars):
        raise SpecError(f"logical index {g!r} is not determined by the layout indices and index "
                        f"arrays: give it an equality such as {g} = p or {g} = idx(p) (a "
                        "relation must say which coordinate each entry has)",
                        source, *name_position(rel_text, line, col, g, False))
    return relation


def _parse_shape(table: dict, file: TomlSource, names: _Names,
                 relation: Relation) -> tuple[Aff, ...]:
    """The logical extent of each dimension, affine in scalar fields and parameters."""
    raw_shape = table.get("shape")
    if not isinstance(raw_shape, list) or not all(isinstance(s, str) for s in raw_shape):
        raise file.error("'shape' must be a list of strings (the logical extent of each "
                         "dimension)", "shape" if "shape" in table else None)
    order = len(relation.out_vars or ())
    if len(raw_shape) != order:
        raise file.error(f"'shape' has {len(raw_shape)} entries but the relation has {order} "
                         "logical dimensions", "shape")
    shape = []
    for s in raw_shape:
        sl, sc = file.value_position(s, "shape")
        a = parse_aff(s, file.source, sl, sc, names.params)
        if a.names() - names.scalars or a.calls():
            raise SpecError(f"shape entry {s!r} must be affine in scalar fields and parameters",
                            file.source, sl, sc)
        shape.append(a)
    return tuple(shape)


def _parse_value(table: dict, file: TomlSource, names: _Names,
                 relation: Relation) -> ie.ArrayRef | Implicit:
    """The value expression: a double array subscripted by layout indices and reads, or a
    number (a pattern layout: every entry holds it, no value array is stored)."""
    source = file.source
    val_text = file.string(table, "value") or ""
    vl, vc = file.value_position(val_text, "value")
    if _NUMBER.fullmatch(val_text.strip()):
        unread = [f.name for f in names.fields.values() if f.ctype == VALUE_TYPE]
        if unread:
            raise SpecError(f"value {val_text.strip()!r} is a constant (a pattern layout, which "
                            f"stores no value array), but field {unread[0]!r} is a double "
                            "array that nothing would read; remove it, or subscript it in "
                            "value", source, vl, vc)
        return Implicit(float(val_text), val_text.strip())
    if "[" not in val_text:
        raise SpecError(f"value {val_text.strip()!r} is neither an array subscripted by the "
                        'layout indices ("data[pj]") nor a number ("1": a pattern layout, '
                        "which stores no values)", source, vl, vc)
    value = ie.parse_array_ref(val_text, source, vl, vc)
    vfield = names.fields.get(value.array)
    if vfield is None or vfield.ctype != VALUE_TYPE:
        raise SpecError(f"value array {value.array!r} is not a double array field (a number, "
                        'value = "1", makes a pattern layout, which stores no values)',
                        source, vl, vc)
    if len(value.subscripts) != len(vfield.dims):
        raise SpecError(f"value array {value.array!r} has {len(vfield.dims)} dimension(s) but "
                        f"{len(value.subscripts)} subscript(s) are given", source, vl, vc)
    pnum = {k: ie.Num(v) for k, v in names.params.items()}
    value = ie.ArrayRef(value.array, tuple(ie.substitute(s, pnum) for s in value.subscripts))
    allowed = set(relation.in_vars) | names.scalars
    for s in value.subscripts:
        bad = ie.names(s) - allowed
        if bad:
            raise SpecError(f"value subscript uses {sorted(bad)}, not layout indices or scalar "
                            "fields", source, vl, vc)
        for c in ie.calls(s):
            _check_call(c.name, len(c.args), names, source,
                        *name_position(val_text, vl, vc, c.name, True))
    return value


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")   # a constant value


def _packer(table: dict, file: TomlSource) -> str | None:
    """The packer's path (``file.py`` or ``file.py:function`` next to the layout file)."""
    packer = file.string(table, "packer", required=False)
    if packer is None:
        return None
    directory = Path(file.source).parent
    if not is_file(directory / packer.split(":")[0]):
        raise file.error(f"packer file {packer.split(':')[0]!r} not found next to the layout "
                         "file", "packer")
    return str(directory / packer)


def _fill(table: dict, file: TomlSource) -> float:
    """The ``fill`` key: what the elements a tensor in the layout does not store hold unless
    it says otherwise (a number; TOML writes infinity ``inf``); 0.0 when absent."""
    fill = table.get("fill", 0.0)
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise file.error(f"'fill' must be a number (0, 1.0, inf, -inf, nan), got {fill!r}",
                         "fill")
    return float(fill)


def _dense_array(table: dict, file: TomlSource, names: _Names) -> str | None:
    """The double array field holding the tensor densely, if the layout is dense."""
    dense_array = file.string(table, "dense_array", required=False)
    if dense_array is not None and (dense_array not in names.fields
                                    or names.fields[dense_array].ctype != VALUE_TYPE):
        raise file.error(f"dense_array {dense_array!r} is not a double array field",
                         "dense_array")
    return dense_array


def _check_has_entries(layout: Layout, line: int, col: int) -> None:
    """A relation that holds for no entry whatever the fields' values (with the range
    properties) is a contradiction, not a layout."""
    rel = layout.relation
    facts = tuple(c for call in rel.calls() for c in layout.range_constraints(call))
    with_facts = Relation(rel.in_vars, rel.out_vars, [conj + facts for conj in rel.disjuncts])
    if not with_facts.is_empty():
        return
    why = ("its constraints contradict each other" if rel.is_empty()
           else "the range properties contradict it")
    raise SpecError(f"the relation holds for no entry whatever the values of the fields and "
                    f"parameters: {why}", layout.source, line, col)


def _is_c_name(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name)) and name not in C_KEYWORDS


def _undetermined(relation: Relation, scalars: frozenset[str]) -> list[str]:
    """Logical indices that some disjunct of ``relation`` does not fix as a function of the
    layout indices (through equalities whose other names are fixed: layout indices, scalar
    fields, parameters, already fixed logical or existential variables, reads of those)."""
    unknown = [*(relation.out_vars or ()), *relation.exists]
    for conj in relation.disjuncts:
        fixed = set(relation.in_vars) | scalars
        progress = True
        while progress:
            progress = False
            for c in conj:
                free = [v for v in unknown if v not in fixed and c.aff.coeff(v)]
                if c.is_eq and len(free) == 1 and c.names() - {free[0]} <= fixed:
                    fixed.add(free[0])
                    progress = True
        missing = [g for g in relation.out_vars or () if g not in fixed]
        if missing:
            return missing
    return []


def _check_call(name: str, nargs: int, names: _Names, source: str, line: int, col: int) -> None:
    """A call of an index array with as many arguments as it has dimensions."""
    if name not in names.index_arrays:
        raise SpecError(f"{name!r} is called like an index array but is not an int array field",
                        source, line, col)
    arity = len(names.index_arrays[name].dims)
    if arity != nargs:
        raise SpecError(f"index array {name!r} has {arity} dimension(s) but is called with "
                        f"{nargs} argument(s)", source, line, col)


def _tables(table: Mapping[str, Any], key: str, file: TomlSource) -> list[Mapping[str, Any]]:
    """The array of tables ``[[key]]`` (empty when absent)."""
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise file.error(f"{key!r} must be an array of tables ([[{key}]])", key)
    return value


def _parse_property(p: Mapping[str, Any], k: int, file: TomlSource, names: _Names,
                    relation: Relation) -> Property:
    """Property #``k + 1``: its kind and index arrays here, the rest by its kind's class."""
    where = f"property #{k + 1}"
    start = file.table_start("properties", k)
    end = file.table_start("properties", k + 1) or len(file.text)

    def err(message: str, key: str | None = None, at_key: bool = False) -> SpecError:
        # at this property's ``key =`` when it has one, else at its [[properties]] line
        return file.error(message, key, start, end, at_key)

    kind = p.get("kind")
    kinds = [k.value for k in PropertyKind]
    if kind not in kinds:
        raise err(f"{where}: kind must be one of {kinds}, got {kind!r}", "kind")
    ufs = p.get("ufs", [p["uf"]] if "uf" in p else None)
    if ufs is None and KINDS[PropertyKind(kind)].names_its_arrays:
        ufs = []
    elif not isinstance(ufs, list) or not ufs or not all(isinstance(u, str) for u in ufs):
        raise err(f'{where} ({kind}): give the index array as uf = "name" '
                  "(or ufs = [...] for injectivity of a tuple)", "ufs" if "ufs" in p else "uf")
    for u in ufs:
        if u not in names.index_arrays:
            raise err(f"{where} ({kind}): {u!r} is not an index array field",
                      "ufs" if "ufs" in p else "uf")

    def affine(key: str) -> Aff:
        """The value of ``key``: an integer, or a string affine in scalars and parameters."""
        value = p[key]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise err(f"{where} ({kind}): {key} must be an integer or a string (an affine "
                      f"expression), got {value!r}", key)
        line, col = file.value_position(value, key, start) if isinstance(value, str) else (1, 1)
        return parse_aff(str(value), file.source, line, col, names.params, divisions=True)

    def conjunction(key: str) -> list[Constraint]:
        """The value of ``key``: a string, a conjunction of comparisons."""
        value = p[key]
        if not isinstance(value, str):
            raise err(f"{where} ({kind}): {key} must be a string (comparisons joined by "
                      f"'and'), got {value!r}", key)
        line, col = file.value_position(value, key, start)
        return parse_constraints(value, file.source, line, col, names.params)

    prop = KINDS[PropertyKind(kind)].parse(PropertyTable(
        p, tuple(ufs), f"{where} ({kind})", {u: f.dims for u, f in names.index_arrays.items()},
        relation.in_vars, names.scalars, err, affine, conjunction))
    unknown = set(p) - set(KEYS)
    if unknown:
        raise err(f"{where}: unknown key(s) {sorted(unknown)}; property keys are "
                  f"{', '.join(KEYS)}", sorted(unknown)[0], at_key=True)
    return prop


def layout_error(layout: Layout, message: str, key: str = "relation") -> SpecError:
    """A SpecError about ``layout`` at the value of its ``key`` in its file (file:line:col),
    naming the file alone when it cannot be read again (a layout parsed from text)."""
    path = Path(layout.source)
    if not is_file(path):
        return SpecError(message, layout.source)
    try:
        file = TomlSource.read(path, "layout file")
    except SpecError:
        return SpecError(message, layout.source)
    return file.error(message, key)


@contextmanager
def blamed_on(layout: Layout, tensor: str, others: Mapping[str, Layout] | None = None
              ) -> Iterator[None]:
    """SpecErrors raised while spf builds its own kernel over ``layout`` (as tensor
    ``tensor``: the read check's ``v = T(i, j)``, the destination of a conversion
    ``B(i,j) = A(i,j)``), which name the kernel's expression (``<string>``) and its tensors'
    variables (``T.p0``), re-raised at ``layout``'s relation in its file, its variables in its
    own names and those of the ``others`` (tensor name -> layout) prefixed by their layout's
    name (``CSR.pi``)."""
    try:
        yield
    except SpecError as exc:
        if exc.source != "<string>" or exc.line is not None:
            raise           # already located
        detail = re.sub(rf"\b{tensor}[._](?=[A-Za-z_])", "", exc.detail)
        for name, other in (others or {}).items():
            detail = re.sub(rf"\b{name}[._](?=[A-Za-z_])", f"{other.name}.", detail)
        raise layout_error(layout, f"layout {layout.name}: {detail}") from None
