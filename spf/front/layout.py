"""Layout specs: a physical-to-logical relation with UFs, fields, value expression, properties.

A layout file is TOML (see docs/layouts.md).  Everything format-specific lives in
those files; this module only reads and checks them.
"""
from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache, cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..concurrency import symbolic
from ..errors import SpecError
from . import index_expr as ie
from .properties import KEYS, KINDS, Property, PropertyKind, PropertyTable
from .relation import Relation
from .syntax import (
    C_KEYWORDS,
    MAX_INT,
    is_file,
    key_position,
    locate,
    parse_aff,
    parse_toml,
    read_spec,
)
from .terms import Aff, Constraint, UFCall

LAYOUT_DIR = Path(str(resources.files("spf.layouts")))   # installed inside the spf namespace
INDEX_TYPE = "int"
VALUE_TYPE = "double"
INDEX_WIDTHS = ("int32", "int64")   # what ``int`` fields are in C and numpy


@dataclass(frozen=True)
class FieldSpec:
    """A struct field: a scalar (``dims == ()``) or an array with extents ``dims``."""

    name: str
    ctype: str  # "int" (index type) or "double" (value type)
    dims: tuple[ie.IExpr, ...] = ()

    @property
    def is_array(self) -> bool:
        return bool(self.dims)


@dataclass(frozen=True, eq=False)
class Layout:
    """A parsed layout spec with its parameters bound (equal when name, file and params are)."""

    name: str
    source: str
    description: str
    relation: Relation
    value: ie.ArrayRef
    shape: tuple[Aff, ...]
    fields: Mapping[str, FieldSpec]
    params: Mapping[str, int]
    properties: tuple[Property, ...]
    packer: str | None = None
    dense_array: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    index_type: str = "int32"
    part: int | None = None     # which disjunct of a union layout's relation (see parts())

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
    def scalar_fields(self) -> list[str]:
        return [f.name for f in self.fields.values() if not f.is_array]

    @property
    def index_arrays(self) -> list[str]:
        return [f.name for f in self.fields.values() if f.is_array and f.ctype == INDEX_TYPE]

    @cached_property
    def key(self) -> str:
        """Identity for caching: name, file and bound parameters."""
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        width = "" if self.index_type == "int32" else f":{self.index_type}"
        part = "" if self.part is None else f"#{self.part}"
        return f"{self.name}[{params}]{width}{part}@{self.source}"

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
            _check_param(self.name, k, v, self.source)
        loaded = _load_file(self.source, tuple(sorted({**self.params, **params}.items())))
        return _params_fit(loaded.with_index_type(self.index_type))

    def with_index_type(self, index_type: str) -> Layout:
        """The same layout with its ``int`` fields (index arrays, sizes) of width
        ``index_type``: ``"int32"`` (the default) or ``"int64"``."""
        if index_type not in INDEX_WIDTHS:
            raise SpecError(f"index_type must be one of {', '.join(map(repr, INDEX_WIDTHS))}, "
                            f"got {index_type!r}")
        if index_type == self.index_type:
            return self
        return _params_fit(replace(self, index_type=index_type))

    def range_constraints(self, call: UFCall) -> list[Constraint]:
        """Range facts that hold for ``call`` (a call of one of this layout's UFs)."""
        return [c for prop in self.properties for c in prop.facts(call)]

    def __str__(self) -> str:
        return f"{self.name} ({self.source})"


# ---------------------------------------------------------------------------------------
def layout_dirs() -> list[Path]:
    """Search path for layout names: ``$SPF_LAYOUT_PATH`` entries, then the shipped ``layouts/``."""
    extra = [Path(p) for p in os.environ.get("SPF_LAYOUT_PATH", "").split(os.pathsep) if p]
    return extra + [LAYOUT_DIR]


def layout_names() -> list[str]:
    """Names of all layouts on the search path."""
    names: set[str] = set()
    for d in layout_dirs():
        if d.is_dir():
            names |= {p.stem for p in d.glob("*.toml") if p.stem != "defaults"}
    return sorted(names)


def resolve_layout_path(name_or_path: str | os.PathLike) -> Path:
    text = os.fspath(name_or_path)
    path = Path(text)
    if path.suffix == ".toml" or os.sep in text or "/" in text:
        if not is_file(path):
            raise SpecError(f"layout file not found: {text}", text)
        return path.resolve()
    for d in layout_dirs():
        cand = d / f"{text}.toml"
        if is_file(cand):
            return cand.resolve()
    for d in layout_dirs():      # a file named otherwise whose ``name`` key is ``text``
        for cand in sorted(d.glob("*.toml")) if d.is_dir() else []:
            if _name_key(cand) == text:
                return cand.resolve()
    raise SpecError(f"unknown layout {text!r}; known layouts: {', '.join(layout_names())}", text)


def _name_key(path: Path) -> str | None:
    """The ``name`` a layout file declares (None when it cannot be read)."""
    try:
        name = tomllib.loads(path.read_text()).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) else None


def load_layout(name_or_path: str | os.PathLike | Layout, index_type: str | None = None,
                **params: int) -> Layout:
    """Load a layout by name (from the search path) or by path, binding ``params``;
    ``index_type`` ("int32" or "int64") sets the width of its index fields (a Layout
    object keeps its own when None; files load as int32)."""
    if isinstance(name_or_path, Layout):
        lay = name_or_path.with_params(**params)
        return lay if index_type is None else lay.with_index_type(index_type)
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise SpecError(f"a layout is given by name, path or Layout object, not "
                        f"{type(name_or_path).__name__} {name_or_path!r}")
    path = resolve_layout_path(name_or_path)
    layout = _load_file(str(path), ())
    if params:
        unknown = set(params) - set(layout.params)
        if unknown:
            raise SpecError(f"layout {layout.name} has no parameter(s) {sorted(unknown)}; "
                            f"its parameters: {sorted(layout.params) or 'none'}", str(path))
        layout = layout.with_params(**params)
    return layout if index_type is None else layout.with_index_type(index_type)


def default_layout(order: int) -> Layout:
    """The layout used for a tensor of ``order`` dimensions that was given no layout."""
    return load_layout(_default_names("dense", str(order)))


@cache
def default_layouts(table: str, key: str) -> tuple[str, ...]:
    """Layout names listed in ``layouts/defaults.toml`` under ``[table] key`` (a name or a
    list of names; empty when not listed): e.g. the layouts to try for a scipy matrix."""
    try:
        names = _default_names(table, key)
    except SpecError:
        return ()
    return (names,) if isinstance(names, str) else tuple(names)


def _default_names(table: str, key: str) -> Any:
    path = LAYOUT_DIR / "defaults.toml"
    try:
        data = _defaults(path)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"cannot read default layouts: {exc}", str(path)) from exc
    names = data.get(table, {}).get(key)
    if names is None:
        what = f"order {key}" if table == "dense" else f"[{table}] {key}"
        raise SpecError(f"no default layout for {what}", str(path))
    return names


@cache
def _defaults(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


# ---------------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _load_file(path: str, param_items: tuple[tuple[str, int], ...]) -> Layout:
    return parse_layout(read_spec(path, "layout file"), path, dict(param_items))


def _table_start(text: str, header: str, nth: int = 0) -> int:
    """Offset of the ``nth`` line ``[header]`` / ``[[header]]`` (0 when absent)."""
    found = list(re.finditer(rf"^[ \t]*\[\[?\s*{re.escape(header)}\s*\]\]?", text, re.MULTILINE))
    return found[nth].start() if nth < len(found) else 0


def _name_pos(snippet: str, line: int, col: int, name: str, call: bool) -> tuple[int, int]:
    """Position of ``name`` (a call ``name(`` when ``call``) inside ``snippet``, which
    starts at ``line``:``col``; the snippet's start when not found."""
    word = rf"(?<![\w.]){re.escape(name)}"
    pattern = rf"{word}\s*\(" if call else rf"{word}(?![\w(])"
    m = re.search(pattern, snippet)
    if not m:
        return line, col
    before = snippet[:m.start()]
    if "\n" not in before:
        return line, col + m.start()
    return line + before.count("\n"), m.start() - before.rfind("\n")


class _Reader:
    """Reads one layout table, raising SpecError positioned in the file."""

    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source

    def err(self, message: str, key: str | None = None, start: int = 0,
            end: int | None = None, at_key: bool = False) -> SpecError:
        """An error at the value of ``key =`` (at the key itself with ``at_key``) searched
        between offsets ``start`` and ``end``, else at the line of offset ``start`` (the
        file's first line when 0)."""
        found = key_position(self.text[:end], key, start) if key else None
        if found:
            line, key_col, value_col = found
            return SpecError(message, self.source, line, key_col if at_key else value_col)
        return SpecError(message, self.source, self.text.count("\n", 0, start) + 1, 1)

    def string(self, table: Mapping[str, Any], key: str, required: bool = True) -> str | None:
        if key not in table:
            if required:
                raise self.err(f"missing required key {key!r}")
            return None
        value = table[key]
        if not isinstance(value, str):
            raise self.err(f"{key!r} must be a string", key)
        return value

    def pos(self, snippet: str, key: str | None = None, start: int = 0) -> tuple[int, int]:
        """Position of ``snippet`` (the text of a TOML string), searched from the line of
        ``key =`` (itself searched from offset ``start``) when ``key`` is given."""
        if key is not None:
            m = re.compile(rf"^[ \t]*{re.escape(key)}\s*=", re.MULTILINE).search(self.text, start)
            start = m.start() if m else start
        return locate(self.text, snippet, start)


@symbolic
def parse_layout(text: str, source: str = "<string>",
                 params: Mapping[str, int] | None = None) -> Layout:
    """Parse the TOML text of a layout file."""
    table = parse_toml(text, source)
    rd = _Reader(text, source)
    known = {"name", "description", "relation", "value", "shape", "fields", "params",
             "properties", "packer", "dense_array"}
    for key in table:
        if key not in known:
            raise rd.err(f"unknown key {key!r}; expected one of {sorted(known)}", key, at_key=True)
    name = rd.string(table, "name") or ""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        raise rd.err(f"layout name {name!r} must be an identifier", "name")
    bound = _parse_params(table, rd, name, params)
    fields = _parse_fields(table, rd, bound)
    scalars = {f.name for f in fields.values() if not f.is_array}
    index_arrays = {f.name: f for f in fields.values() if f.is_array and f.ctype == INDEX_TYPE}
    rel_text = rd.string(table, "relation") or ""
    line, col = rd.pos(rel_text, "relation")
    relation = _parse_relation(rel_text, rd, line, col, bound, fields)
    shape = _parse_shape(table, rd, relation, bound, scalars)
    value = _parse_value(table, rd, fields, bound, relation, scalars)
    properties = tuple(_parse_property(p, k, rd, index_arrays, relation, scalars, bound)
                       for k, p in enumerate(_list(table, "properties", rd)))
    packer = rd.string(table, "packer", required=False)
    if packer is not None and not is_file(Path(source).parent / packer.split(":")[0]):
        raise rd.err(f"packer file {packer.split(':')[0]!r} not found next to the layout file",
                     "packer")
    dense_array = rd.string(table, "dense_array", required=False)
    if dense_array is not None and (dense_array not in fields
                                    or fields[dense_array].ctype != VALUE_TYPE):
        raise rd.err(f"dense_array {dense_array!r} is not a double array field", "dense_array")
    layout = Layout(name=name, source=source, description=str(table.get("description", "")),
                    relation=relation, value=value, shape=tuple(shape), fields=fields,
                    params=bound, properties=properties,
                    packer=str(Path(source).parent / packer) if packer else None,
                    dense_array=dense_array, raw=table)
    _check_has_entries(layout, line, col)
    return layout


def _parse_params(table: dict, rd: _Reader, name: str,
                  params: Mapping[str, int] | None) -> dict[str, int]:
    """Parameters (compile-time constants): the file's defaults, overridden by ``params``."""
    raw_params = table.get("params", {})
    if not isinstance(raw_params, dict):
        raise rd.err("'params' must be a table of integer defaults", "params")
    bound: dict[str, int] = {}
    pstart = _table_start(rd.text, "params")
    for k, v in raw_params.items():
        if not _is_c_name(k):
            raise rd.err(f"parameter name {k!r} must be an identifier and not a C keyword", k,
                         pstart, at_key=True)
        if not isinstance(v, int) or isinstance(v, bool) or abs(v) > MAX_INT:
            raise rd.err(f"parameter {k!r} must have an integer default that fits in 64 bits", k)
        bound[k] = v
    for k, v in (params or {}).items():
        if k not in bound:
            raise SpecError(f"layout {name} has no parameter {k!r}", rd.source)
        _check_param(name, k, v, rd.source)
        bound[k] = v
    return bound


def _parse_fields(table: dict, rd: _Reader, bound: dict[str, int]) -> dict[str, FieldSpec]:
    """The struct fields: scalars and arrays with extents over scalars and index arrays."""
    pnum = {k: ie.Num(v) for k, v in bound.items()}
    raw_fields = table.get("fields")
    if not isinstance(raw_fields, dict) or not raw_fields:
        raise rd.err("missing [fields] table (struct fields and their types)")
    fields: dict[str, FieldSpec] = {}
    fstart = _table_start(rd.text, "fields")
    for fname, ftype in raw_fields.items():
        if not _is_c_name(fname):
            raise rd.err(f"field name {fname!r} must be an identifier and not a C keyword "
                         "(it names a member of the C struct)", fname, fstart, at_key=True)
        if not isinstance(ftype, str):
            raise rd.err(f'type of field {fname!r} must be a string such as "int[numRows + 1]"',
                         fname, fstart)
        if fname in bound:
            raise rd.err(f"{fname!r} is both a field and a parameter", fname, fstart,
                         at_key=True)
        m = re.fullmatch(r"\s*(int|double)\s*((?:\[[^\]]*\]\s*)*)", ftype)
        if not m:
            raise rd.err(f"field {fname!r}: type {ftype!r} must be int or double with optional "
                         "[extent] suffixes", fname, fstart)
        dims = []
        for dm in re.finditer(r"\[([^\]]*)\]", m.group(2)):
            line, col = rd.pos(dm.group(1), fname, fstart) if dm.group(1).strip() else (None, None)
            if not dm.group(1).strip():
                raise rd.err(f"field {fname!r}: empty extent '[]'", fname, fstart)
            dims.append(ie.substitute(ie.parse_index_expr(dm.group(1), rd.source, line, col),
                                      pnum))
        if m.group(1) == VALUE_TYPE and not dims:
            raise rd.err(f"field {fname!r}: a double field must be an array", fname, fstart)
        fields[fname] = FieldSpec(fname, m.group(1), tuple(dims))
    scalars = {f.name for f in fields.values() if not f.is_array}
    index_arrays = {f.name: f for f in fields.values() if f.is_array and f.ctype == INDEX_TYPE}
    for f in fields.values():
        for d in f.dims:
            bad = ie.names(d) - scalars
            if bad:
                raise rd.err(f"field {f.name!r}: extent uses {sorted(bad)}, which are not scalar "
                             "fields or parameters", f.name, fstart)
            for c in ie.calls(d):
                if c.name not in index_arrays:
                    raise rd.err(f"field {f.name!r}: extent reads {c.name!r}, not an index array",
                                 f.name, fstart)
    return fields


def _parse_relation(rel_text: str, rd: _Reader, line: int, col: int, bound: dict[str, int],
                    fields: dict[str, FieldSpec]) -> Relation:
    """The relation from layout indices to logical indices, every logical index determined."""
    source = rd.source
    scalars = {f.name for f in fields.values() if not f.is_array}
    index_arrays = {f.name: f for f in fields.values() if f.is_array and f.ctype == INDEX_TYPE}
    relation = Relation.parse(rel_text, source, line, col, bound)
    if relation.is_set:
        raise SpecError("the relation must map layout indices to logical indices: "
                        "{[p...] -> [g...] : ...}", source, line, col)
    for var in relation.vars:
        if var in fields or var in bound:
            raise SpecError(f"relation variable {var!r} has the name of a "
                            f"{'field' if var in fields else 'parameter'}; rename one of them",
                            source, *_name_pos(rel_text, line, col, var, False))
    for sym in relation.symbols():
        if sym not in scalars:
            raise SpecError(f"relation uses {sym!r}, which is not a variable, a scalar field "
                            "or a parameter", source, *_name_pos(rel_text, line, col, sym, False))
    for call in relation.calls():
        _check_call(call.name, len(call.args), index_arrays, source,
                    *_name_pos(rel_text, line, col, call.name, True))
    for g in _undetermined(relation, scalars):
        raise SpecError(f"logical index {g!r} is not determined by the layout indices and index "
                        f"arrays: give it an equality such as {g} = p or {g} = idx(p) (a "
                        "relation must say which coordinate each entry has)",
                        source, *_name_pos(rel_text, line, col, g, False))
    return relation


def _parse_shape(table: dict, rd: _Reader, relation: Relation, bound: dict[str, int],
                 scalars: set[str]) -> list[Aff]:
    raw_shape = table.get("shape")
    if not isinstance(raw_shape, list) or not all(isinstance(s, str) for s in raw_shape):
        raise rd.err("'shape' must be a list of strings (the logical extent of each dimension)",
                     "shape" if "shape" in table else None)
    if len(raw_shape) != relation_order(relation):
        raise rd.err(f"'shape' has {len(raw_shape)} entries but the relation has "
                     f"{relation_order(relation)} logical dimensions", "shape")
    shape = []
    for s in raw_shape:
        sl, sc = rd.pos(s, "shape")
        a = parse_aff(s, rd.source, sl, sc, bound)
        bad = a.names() - scalars
        if bad or a.calls():
            raise SpecError(f"shape entry {s!r} must be affine in scalar fields and parameters",
                            rd.source, sl, sc)
        shape.append(a)
    return shape


def _parse_value(table: dict, rd: _Reader, fields: dict[str, FieldSpec],
                 bound: dict[str, int], relation: Relation, scalars: set[str]) -> ie.ArrayRef:
    """The value expression: a double array subscripted by layout indices and reads."""
    source = rd.source
    index_arrays = {f.name: f for f in fields.values() if f.is_array and f.ctype == INDEX_TYPE}
    val_text = rd.string(table, "value") or ""
    vl, vc = rd.pos(val_text, "value")
    value = ie.parse_array_ref(val_text, source, vl, vc)
    vfield = fields.get(value.array)
    if vfield is None or vfield.ctype != VALUE_TYPE:
        raise SpecError(f"value array {value.array!r} is not a double array field", source, vl, vc)
    if len(value.subscripts) != len(vfield.dims):
        raise SpecError(f"value array {value.array!r} has {len(vfield.dims)} dimension(s) but "
                        f"{len(value.subscripts)} subscript(s) are given", source, vl, vc)
    pnum = {k: ie.Num(v) for k, v in bound.items()}
    value = ie.ArrayRef(value.array, tuple(ie.substitute(s, pnum) for s in value.subscripts))
    allowed = set(relation.in_vars) | scalars
    for s in value.subscripts:
        bad = ie.names(s) - allowed
        if bad:
            raise SpecError(f"value subscript uses {sorted(bad)}, not layout indices or scalar "
                            "fields", source, vl, vc)
        for c in ie.calls(s):
            _check_call(c.name, len(c.args), index_arrays, source,
                        *_name_pos(val_text, vl, vc, c.name, True))
    return value


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


def _check_param(layout: str, name: str, value: Any, source: str) -> None:
    """A parameter value given when loading: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_INT:
        raise SpecError(f"parameter {name} of layout {layout} must be a positive integer of "
                        f"at most 64 bits, got {value!r}", source)


def _undetermined(relation: Relation, scalars: set[str]) -> list[str]:
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


def relation_order(relation: Relation) -> int:
    return len(relation.out_vars or ())


def _check_call(name: str, nargs: int, index_arrays: Mapping[str, FieldSpec], source: str,
                line: int, col: int) -> None:
    if name not in index_arrays:
        raise SpecError(f"{name!r} is called like an index array but is not an int array field",
                        source, line, col)
    arity = len(index_arrays[name].dims)
    if arity != nargs:
        raise SpecError(f"index array {name!r} has {arity} dimension(s) but is called with "
                        f"{nargs} argument(s)", source, line, col)


def _list(table: Mapping[str, Any], key: str, rd: _Reader) -> list[Mapping[str, Any]]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise rd.err(f"{key!r} must be an array of tables ([[{key}]])", key)
    return value


def _parse_property(p: Mapping[str, Any], k: int, rd: _Reader,
                    index_arrays: Mapping[str, FieldSpec],
                    relation: Relation, scalars: set[str], bound: Mapping[str, int]) -> Property:
    """Property #``k + 1``: its kind and index arrays here, the rest by its kind's class."""
    where = f"property #{k + 1}"
    start = _table_start(rd.text, "properties", k)
    end = _table_start(rd.text, "properties", k + 1) or len(rd.text)

    def err(message: str, key: str | None = None, at_key: bool = False) -> SpecError:
        # at this property's ``key =`` when it has one, else at its [[properties]] line
        return rd.err(message, key, start, end, at_key)

    kind = p.get("kind")
    kinds = [k.value for k in PropertyKind]
    if kind not in kinds:
        raise err(f"{where}: kind must be one of {kinds}, got {kind!r}", "kind")
    ufs = p.get("ufs", [p["uf"]] if "uf" in p else None)
    if not isinstance(ufs, list) or not ufs or not all(isinstance(u, str) for u in ufs):
        raise err(f'{where} ({kind}): give the index array as uf = "name" '
                  "(or ufs = [...] for injectivity of a tuple)", "ufs" if "ufs" in p else "uf")
    for u in ufs:
        if u not in index_arrays:
            raise err(f"{where} ({kind}): {u!r} is not an index array field",
                      "ufs" if "ufs" in p else "uf")

    def affine(key: str) -> Aff:
        """The value of ``key``: an integer, or a string affine in scalars and parameters."""
        value = p[key]
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise err(f"{where} ({kind}): {key} must be an integer or a string (an affine "
                      f"expression), got {value!r}", key)
        line, col = rd.pos(value, key, start) if isinstance(value, str) else (None, None)
        return parse_aff(str(value), rd.source, line or 1, col or 1, bound)

    prop = KINDS[PropertyKind(kind)].parse(PropertyTable(
        p, tuple(ufs), f"{where} ({kind})", {u: f.dims for u, f in index_arrays.items()},
        relation.in_vars, frozenset(scalars), err, affine))
    unknown = set(p) - set(KEYS)
    if unknown:
        raise err(f"{where}: unknown key(s) {sorted(unknown)}; property keys are "
                  f"{', '.join(KEYS)}", sorted(unknown)[0], at_key=True)
    return prop
