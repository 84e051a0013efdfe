"""Checks of a tensor that depend on its layout's structure, by generated code.

spf scans the layout's own relation (``v = T(i, j)``: loops over T's layout indices) into C in
which **every array read is checked** against the extent the layout declares for that array
(``colIdx[pj]`` needs ``0 <= pj < rowPtr(numRows)``; the extents were compared with the
arrays' lengths before), every logical coordinate against the shape, and the value
expression's subscripts against the value array's extents.  This is exactly the set of reads
that generated kernels and conversions make, so a tensor that passes never makes them read out
of bounds, whatever properties its layout declares (none included).  In the same pass,
periodic monotonicity (``colIdx`` sorted within each row ``pi``), which cannot be checked array
by array, compares each index-array read with the previous one of its period.  A failing test
stores the values its message names: the position read and the array's extents
(``colIdx[pj] = colIdx[7] falls outside colIdx, whose extent ... is 5``), or the index array
entry that gives a logical coordinate (``colIdx[5] = 7 is outside 0..numCols - 1 = 0..4``).
A :class:`spf.Tensor` runs the check when it is built, after its fields passed
:func:`spf.runtime.fields.check_fields`.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, TypeVar

from .back import ctree as t
from .back.levels import lower_levels
from .back.names import CNames, struct_name, used_names
from .back.source import render_file
from .concurrency import symbolic
from .errors import ArgumentError
from .front import index_expr as ie
from .front.kernel_spec import parse_expr
from .front.layout import Layout
from .front.layout_file import blamed_on
from .front.properties import PeriodicMonotonic, Range, Sorted
from .front.terms import Aff, Atom, UFCall, format_sum
from .middle.iteration_space import TensorUse, build
from .middle.scan import LevelKind, LoopNest, scan
from .runtime import build as runtime

_OPS = {"<": "<", "<=": "<=", ">": ">", ">=": ">="}
_Ordered = TypeVar("_Ordered", PeriodicMonotonic, Sorted)


@dataclass
class _AsWritten(CNames):
    """Terms as the layout file writes them, for messages: ``colIdx[slicePtr[ps] + pk]``
    (layout indices and fields without the tensor's prefix, reads with brackets)."""

    def atom(self, atom: Atom) -> str:
        if isinstance(atom, UFCall):
            _, fld = self.tensor_of(atom.name)
            return f"{fld}[{']['.join(self.aff(a) for a in atom.args)}]"
        if isinstance(atom, str) and "." in atom:
            return atom.split(".", 1)[1]
        if isinstance(atom, str):
            prefix = f"{self.space.uses[0].name}_"
            return atom[len(prefix):] if atom.startswith(prefix) else atom
        return super().atom(atom)

    def index_expr(self, e: ie.IExpr) -> str:
        return ie.to_c(e, lambda n: n, lambda n, a: f"{n}[{']['.join(a)}]")


@dataclass(frozen=True)
class _Test:
    """One generated test: what it guards (as the layout writes it), the C expressions whose
    values it stores when it fails, and the message written from those values."""

    what: str
    stored: tuple[str, ...]
    message: Callable[[list[int]], str]
    is_property: bool = False           # a declared property (range), not a bound


@dataclass
class _CheckedNames(CNames):
    """C names whose array reads first test their index against the array's extent; a read
    out of bounds stores its number (1-based, into ``spf_bad``) and the values its message
    names (into ``spf_at``), and leaves the function."""

    reads: list[_Test] = field(default_factory=list)
    extents: dict[str, str] = field(default_factory=dict)   # C variable -> its value
    ranges: bool = True             # test the value of each read against its declared range

    def __post_init__(self) -> None:
        self.written = _AsWritten(self.space, set())

    def atom(self, atom: Atom) -> str:
        if isinstance(atom, UFCall):
            use, fld = self.tensor_of(atom.name)
            return self.checked_read(use, fld, [self.aff(a) for a in atom.args],
                                     [self.written.aff(a) for a in atom.args])
        return super().atom(atom)

    def checked_read(self, use: TensorUse, fld: str, args: list[str],
                     shown: list[str]) -> str:
        """The read of ``fld`` at ``args`` (written ``fld[shown]``), leaving when out of
        bounds."""
        read = self.array_read(use, fld, args)
        tests = self._range_tests(use, fld, args, shown) if self.ranges else []
        if not tests:
            return f"({{ {self.guard(use, fld, args, shown)} {read}; }})"
        value = "spf_value"
        checks = " ".join(self.leave(cond.replace("@", value), test) for cond, test in tests)
        return (f"({{ {self.guard(use, fld, args, shown)} const int64_t {value} = {read}; "
                f"{checks} {value}; }})")

    def _range_tests(self, use: TensorUse, fld: str, args: list[str],
                     shown: list[str]) -> list[tuple[str, _Test]]:
        """The tests of a read's value against the ranges declared for ``fld`` (``@``
        stands for the value): ranges hold on the slots the relation reads, not on others."""
        out = []
        what = f"{fld}[{']['.join(shown)}]"
        for prop in use.layout.properties:
            if not isinstance(prop, Range) or prop.uf != fld:
                continue
            for bound, op in ((prop.lower, "<"), (prop.upper, ">")):
                if bound is None:
                    continue
                names = {p: Aff.var(use.var(p)) for p in use.layout.indices}
                names.update({f: Aff.var(use.symbol(f)) for f in use.layout.scalar_fields})
                limit = self.aff(bound.substitute(names))
                out.append((f"@ {op} {limit}", _Test(
                    what, ("spf_value", limit, *args), _range_message(prop, what, op),
                    is_property=True)))
        return out

    def guard(self, use: TensorUse, fld: str, args: list[str], shown: list[str]) -> str:
        """``if (an index is outside its extent) leave;`` for a read of ``fld`` at ``args``
        (text: it goes inside the expression that reads)."""
        return self.leave(*self._bounds(use, fld, args, shown))

    def guard_node(self, use: TensorUse, fld: str, args: list[str],
                   shown: list[str]) -> t.If:
        """:meth:`guard` as a statement of the tree."""
        return self.leave_node(*self._bounds(use, fld, args, shown))

    def _bounds(self, use: TensorUse, fld: str, args: list[str],
                shown: list[str]) -> tuple[str, _Test]:
        """(the condition of a read out of bounds, its test)."""
        dims = use.layout.fields[fld].dims
        extents = [self.extent(use, fld, k, dim) for k, dim in enumerate(dims)]
        tests = [f"(int64_t)({arg}) < 0 || (int64_t)({arg}) >= {extent}"
                 for arg, extent in zip(args, extents)]
        what = f"{fld}[{']['.join(shown)}]"
        declared = "][".join(self.written.index_expr(d) for d in dims)

        def message(values: list[int]) -> str:
            at, ext = values[:len(args)], values[len(args):]
            many = len(ext) > 1
            return (f"the read {what} = {fld}{''.join(f'[{v}]' for v in at)} falls outside "
                    f"{fld}, whose extent{'s' if many else ''} [{declared}] "
                    f"{'are' if many else 'is'} {']['.join(map(str, ext))}, for these index "
                    "arrays: generated code would read out of bounds")
        return " || ".join(tests), _Test(what, (*args, *extents), message)

    def index_expr(self, use: TensorUse, e: ie.IExpr, wide: bool = False) -> str:
        """An index expression of ``use``'s layout (fields, reads) with its reads checked."""
        local = set(use.layout.indices)

        def read(n: str, a: list[ie.IExpr]) -> str:
            return self.checked_read(use, n, [self.index_expr(use, x) for x in a],
                                     [self.written.index_expr(x) for x in a])
        return ie.to_c_with(e, lambda n: use.var(n) if n in local else f"{use.name}->{n}",
                            read, wide)

    def extent(self, use: TensorUse, fld: str, k: int, dim: ie.IExpr) -> str:
        """A variable holding extent ``k`` of ``fld``, computed once before the loops."""
        var = f"spf_extent_{fld}_{k}"
        if var not in self.extents:
            self.extents[var] = self.index_expr(use, dim)
        return var

    def leave(self, condition: str, test: _Test) -> str:
        """Leave with the number of ``test`` and its values when ``condition`` holds (text,
        for the statement expression of a checked read)."""
        stores = " ".join(f"{target} = {value};" for target, value in self._stores(test))
        return (f"if ({condition}) {{ *spf_bad = {len(self.reads)}; {stores} "
                "goto spf_out_of_bounds; }")

    def leave_node(self, condition: str, test: _Test) -> t.If:
        """:meth:`leave` as a statement of the tree."""
        stores = [t.Assign(target, value) for target, value in self._stores(test)]
        return t.If(condition, [t.Assign("*spf_bad", str(len(self.reads))), *stores,
                                t.Goto("spf_out_of_bounds")])

    def _stores(self, test: _Test) -> list[tuple[str, str]]:
        self.reads.append(test)
        return [(f"spf_at[{k}]", f"(int64_t)({value})") for k, value in enumerate(test.stored)]


def _range_message(prop: Range, what: str, op: str) -> Callable[[list[int]], str]:
    """The message of a read whose value ``v[0]`` is beyond the bound ``v[1]`` (the read's
    position in ``v[2:]``)."""
    return lambda v: (f"{prop.uf!r} violates {prop.kind} ({prop.formula()}) at the read "
                      f"{what} = {prop.uf}{''.join(f'[{x}]' for x in v[2:])}: "
                      f"{v[0]} {op} {v[1]}")


@dataclass
class _Checker:
    function: Callable[..., int]
    properties: list[PeriodicMonotonic | Sorted]
    reads: list[_Test]
    source: str
    width: int           # the most values a failing test stores


@cache
def _checker(layout: Layout, ranges: bool = True) -> _Checker:
    with blamed_on(layout, "T"):
        source, checked, reads = _checker_source(layout, ranges)
    lib = runtime.load_library(str(runtime.build_library(source)))
    fn = lib.spf_check
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return _Checker(fn, checked, reads, source, max([1, *(len(r.stored) for r in reads)]))


@symbolic
def _checker_source(layout: Layout, ranges: bool = True
                    ) -> tuple[str, list[PeriodicMonotonic | Sorted], list[_Test]]:
    """The C of ``layout``'s check, the periodic properties it checks and its reads (with
    ``ranges``, each read's value against its declared range too)."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    # scanned without the facts the properties give: a condition of the relation that a
    # range makes redundant (``1 <= tbl(pi, srt(pk))`` beside ``range tbl 1..1``) is still
    # tested here, and its read checked against that range, which kernels rely on
    space = replace(build(parse_expr(f"v = T({idx})"), {"T": layout}), facts=[])
    use = space.use("T")
    nest = scan(space, list(use.vars))
    names = _CheckedNames(space, set(), bounds_once=True, ranges=ranges)
    hooks: dict[int, list[t.Node]] = {}
    statement, checked, used = _periodic(layout, use, nest, names, hooks)
    more, sorted_checked, sorted_used = _sorted_along(layout, use, nest, names, hooks,
                                                      len(checked))
    statement += more
    all_checked: list[PeriodicMonotonic | Sorted] = [*checked, *sorted_checked]
    used |= sorted_used
    statement += _coordinates(layout, use, nest, names, idx.split(","))
    value = _value_check(use, names)
    statement += [value] if value is not None else []
    used |= set(idx.split(",")) | set(use.vars)
    b = t.Builder()
    for n in range(len(all_checked)):
        b.add(t.Declare("int64_t", f"spf_prev{n}", "-1"),
              t.Declare("int64_t", f"spf_last{n}", "0"))
    lower_levels(b, nest, names, used_names(nest, used), [], statement,
                 {k: (lambda nodes: lambda bl: bl.add(*nodes))(v) for k, v in hooks.items()})
    b.close_to(0)
    b.add(t.Return("0"), t.Label("spf_out_of_bounds"), t.Return("-1"))
    extents = [t.Declare("int64_t", var, value, const=True)
               for var, value in names.extents.items()]
    signature = t.Signature("int", "spf_check", (
        t.Param(f"const {struct_name(layout)} *restrict", "T"),
        t.Param("int64_t *restrict", "spf_bad"), t.Param("int64_t *restrict", "spf_at")))
    source = render_file([f"Generated by spf: read bounds and periodic-monotonicity check of "
                          f"layout {layout.name}"], names.helpers, [layout], signature,
                         extents + b.root)
    return source, all_checked, names.reads


def _periodic(layout: Layout, use: TensorUse, nest: LoopNest, names: _CheckedNames,
              hooks: dict[int, list[t.Node]]
              ) -> tuple[list[t.Node], list[PeriodicMonotonic], set[str]]:
    """Statements comparing each periodic-monotonic read with the previous one of its
    period (reset where the period's innermost index advances)."""
    level_of = {lv.var: k for k, lv in enumerate(nest.levels)}
    statement: list[t.Node] = []
    checked: list[PeriodicMonotonic] = []
    used: set[str] = set()
    for prop, call in _reads_of(layout, use, PeriodicMonotonic, lambda p: 1):
        periods = [use.var(p) for p in prop.period]
        if not all(p in level_of for p in periods):
            continue
        n = len(checked)
        checked.append(prop)
        position = names.aff(call.args[0])
        used |= call.args[0].names() | set(periods)
        shown = names.written.aff(call.args[0])
        prev = f"spf_prev{n}"
        hooks.setdefault(max(level_of[p] for p in periods), []).append(t.Assign(prev, "-1"))
        gap = f" + {prop.gap}" if prop.gap else ""
        now = names.checked_read(use, prop.uf, [position], [shown])
        statement.append(_compared(n, position, now, gap, _OPS[prop.order]))
    return statement, checked, used


def _compared(n: int, position: str, now: str, gap: str, op: str) -> t.If:
    """Where ``position`` moves on from ``spf_prev{n}``: the read there (``now``) compared
    with the one before (kept in ``spf_last{n}``, not read again); out of order, return
    ``n + 1`` with the position in ``*spf_bad``."""
    prev, last = f"spf_prev{n}", f"spf_last{n}"
    return t.If(f"{position} != {prev}", [
        t.Declare("int64_t", "spf_now", now, const=True),
        t.If(f"{prev} >= 0 && !({last}{gap} {op} spf_now)",
             [t.Assign("*spf_bad", position), t.Return(str(n + 1))]),
        t.Assign(prev, position), t.Assign(last, "spf_now")])


def _reads_of(layout: Layout, use: TensorUse, kind: type[_Ordered],
              arity: Callable[[_Ordered], int]) -> list[tuple[_Ordered, UFCall]]:
    """Each property of ``kind`` with each distinct read of its array in the relation (of
    ``arity`` arguments), in a fixed order: every read is checked, each along its own
    positions (a relation may read the array at two, ``idx2(p1) <= p2`` and ``idx2(p2)``)."""
    out = []
    for prop in (p for p in layout.properties if isinstance(p, kind)):
        calls = {str(c): c for c in use.relation().calls()
                 if c.name == use.symbol(prop.uf) and len(c.args) == arity(prop)}
        out += [(prop, calls[k]) for k in sorted(calls)]
    return out


def _sorted_along(layout: Layout, use: TensorUse, nest: LoopNest, names: _CheckedNames,
                  hooks: dict[int, list[t.Node]], first: int
                  ) -> tuple[list[t.Node], list[Sorted], set[str]]:
    """Statements comparing each read of a ``sorted`` array with the previous read along
    its dimension, the other arguments fixed (reset where they advance)."""
    level_of = {lv.var: k for k, lv in enumerate(nest.levels)}
    statement: list[t.Node] = []
    checked: list[Sorted] = []
    used: set[str] = set()
    for prop, call in _reads_of(layout, use, Sorted, lambda p: p.rank):
        args = call.args
        others = {n for k, a in enumerate(args) if k != prop.along for n in a.names()}
        if not others <= set(level_of) or not args[prop.along].names() <= set(level_of):
            continue
        n = first + len(checked)
        checked.append(prop)
        position = names.aff(args[prop.along])
        used |= {n for a in args for n in a.names()}
        shown = [names.written.aff(a) for a in args]
        prev = f"spf_prev{n}"
        hooks.setdefault(max(level_of[v] for v in others), []).append(t.Assign(prev, "-1"))
        now = names.checked_read(use, prop.uf, [names.aff(a) for a in args], shown)
        statement.append(_compared(n, position, now, "", _OPS[prop.order]))
    return statement, checked, used


def _coordinates(layout: Layout, use: TensorUse, nest: LoopNest, names: _CheckedNames,
                 indices: list[str]) -> list[t.Node]:
    """A test per logical coordinate: within the tensor's shape."""
    nodes: list[t.Node] = []
    for d, (i, extent) in enumerate(zip(indices, layout.shape)):
        shape = format_sum(extent.terms, extent.const, lambda a: f"{use.name}->{a}")
        nodes.append(names.leave_node(f"{i} < 0 || {i} >= {shape}",
                                      _coordinate_test(use, nest, names, d, i, shape, extent)))
    return nodes


def _coordinate_test(use: TensorUse, nest: LoopNest, names: _CheckedNames, d: int, i: str,
                     shape: str, extent: object) -> _Test:
    """The test of logical coordinate ``d`` (C variable ``i``): its message names the index
    array read that gives it (``colIdx[5] = 7``), or its expression and the layout indices."""
    level = next((lv for lv in nest.levels if lv.var == i), None)
    expr = level.expr if level is not None and level.kind is LevelKind.ASSIGN else None
    within = f"0..{extent} - 1"
    what = f"logical coordinate {d} in {within}"
    if expr is not None and expr.const == 0 and len(expr.terms) == 1 \
            and isinstance(expr.terms[0][0], UFCall) and expr.terms[0][1] == 1:
        call = expr.terms[0][0]
        fld = names.tensor_of(call.name)[1]
        args = [names.aff(a) for a in call.args]
        return _Test(what, (i, shape, *args), lambda v: (
            f"{fld}{''.join(f'[{p}]' for p in v[2:])} = {v[0]} is outside {within} = "
            f"0..{v[1] - 1} (logical coordinate {d})"))
    written = "" if expr is None else f" = {names.written.aff(expr)}"
    shown = [names.written.atom(var) for var in use.vars]
    return _Test(what, (i, shape, *use.vars), lambda v: (
        f"logical coordinate {d}{written} = {v[0]} at "
        f"{', '.join(f'{n} = {x}' for n, x in zip(shown, v[2:]))} is outside {within} = "
        f"0..{v[1] - 1}"))


def _value_check(use: TensorUse, names: _CheckedNames) -> t.If | None:
    """The test of the value expression's subscripts (no value is loaded); None for a
    pattern layout (it reads no value array)."""
    if use.layout.implicit is not None:
        return None
    ref = use.layout.value_ref
    return names.guard_node(use, ref.array,
                            [names.index_expr(use, s, wide=True) for s in ref.subscripts],
                            [names.written.index_expr(s) for s in ref.subscripts])


def check_structure(layout: Layout, fields: Mapping[str, Any], properties: bool = True) -> None:
    """Raise :class:`ArgumentError` if generated code would read one of ``fields``' arrays
    out of bounds (or make a logical coordinate outside the shape), or (with ``properties``)
    if they violate a periodic-monotonicity property the layout declares."""
    struct = runtime.make_struct(layout, fields)
    for part in layout.parts():      # a union layout part by part: each scans as one nest
        _check_part(_checker(part, properties), layout, struct, fields, properties)


def _check_part(checker: _Checker, layout: Layout, struct: ctypes.Structure,
                fields: Mapping[str, Any], properties: bool) -> None:
    bad = ctypes.c_int64(-1)
    at = (ctypes.c_int64 * checker.width)()
    result = checker.function(ctypes.addressof(struct), ctypes.addressof(bad),
                              ctypes.addressof(at))
    if result < 0:
        test = checker.reads[bad.value - 1]
        raise ArgumentError(f"{layout.name} tensor: "
                            f"{test.message(list(at)[:len(test.stored)])}")
    if result and properties:
        prop = checker.properties[result - 1]
        if isinstance(prop, Sorted):
            raise ArgumentError(f"{prop.violated(layout.name)}: the read at {bad.value} along "
                                f"dimension {prop.along} is out of order with the one before")
        raise ArgumentError(f"{layout.name} tensor: {prop.uf!r} violates {prop.kind} "
                            f"({prop.formula()}, period {', '.join(prop.period)}) at position "
                            f"{bad.value}: {prop.uf}[{bad.value}] = "
                            f"{int(fields[prop.uf][bad.value])} is out of order")


def checked_reads(layout: Layout) -> list[tuple[int | None, list[str]]]:
    """Per part of the layout (one unless its relation is a union): the distinct reads the
    generated check tests for every tensor (none is taken as proven by a property)."""
    return [(part.part, [w for w in dict.fromkeys(r.what for r in _checker(part).reads
                                                  if not r.is_property)
                         if "spf_" not in w]) for part in layout.parts()]
