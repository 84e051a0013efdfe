"""The C function merging a sum's operand runs (:mod:`.merge`) into the output, level by level.

Generated from the :class:`~spf.front.storage.Storage` of the output and of each run alone:

- a **dense** level loops over its extent; every run has the position, unless the run has no
  entry at an enclosing compressed level (its flag is 0);
- a **compressed** level walks the runs' segments under their parent positions together:
  each step takes the smallest head key (the level's coordinates in storage order), opens one
  output position for it, and advances the runs whose head has it (a two-pointer merge for
  two terms);
- at the last level the value is the signed sum of the runs that have the entry.

Runs are unique and sorted (proved per term), so every output position is opened once, in
storage order; the output arrays were sized by the caller from the terms' entry counts
(capacity ``size[k]`` per level, 2 returned if exceeded) and ``size`` receives the positions
used.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, auto
from fractions import Fraction

from ..back import ctree as t
from ..back.names import field_ctype
from ..back.status import VALUE_STATUS, Status, value_status_declaration
from ..back.value_c import (
    helpers_of,
    implicit_c,
    negated_c,
    negation_wraps,
    scaled_c,
    sets_status,
    value_c,
)
from ..front.rhs import Coefficient, Node, is_sign
from ..front.semiring import PLUS_TIMES, Semiring
from ..front.storage import Storage, StorageKind
from ..front.value_exprs import type_of
from ..front.value_types import Kind, ValueType, result_type
from .base import CAPACITY
from .merge import Run

_NONE = "INT64_MAX"      # the head key of an exhausted run


class _Pass(Enum):
    """What a merge pass does: the whole merge (one thread), or, for a row-shaped output built
    in parallel, the rows' entry counts or their entries at the counted segments."""

    SERIAL = auto()
    COUNT = auto()
    FILL = auto()


@dataclass(frozen=True)
class Leaf:
    """The value of an entry of a union iterated by the merge (``C = max(A, B)``): the
    expression of the runs' values (0 for a run without the entry), times ``coefficient``;
    ``types``: the operands' value types."""

    tree: Node
    coefficient: Coefficient
    types: Mapping[str, ValueType]


@dataclass(frozen=True)
class _Place:
    """Where a run stands at a level: its position (C expression) and whether it has one
    (None: always)."""

    pos: str
    has: str | None


class _MergeWriter:
    def __init__(self, out: Storage, runs: list[Run], semiring: Semiring,
                 leaf: Leaf | None = None):
        self.out, self.runs, self.semiring, self.leaf = out, runs, semiring, leaf
        self.pass_ = _Pass.SERIAL

    # names of the hoisted fields ----------------------------------------------------------
    @staticmethod
    def field(owner: str, name: str) -> str:
        return f"{owner}_{name}"

    @staticmethod
    def _elem(storage: Storage, name: str) -> str:
        """The C type of an index array's elements (its own width or spf_index_t)."""
        return field_ctype(storage.layout.fields[name], storage.layout)

    def hoisted(self) -> list[t.Node]:
        nodes: list[t.Node] = []
        for k, lv in enumerate(self.out.levels):
            for _, arr in lv.coords:
                if arr:
                    nodes.append(t.Declare(f"{self._elem(self.out, arr)} *restrict",
                                           self.field("out", arr), f"out->{arr}"))
            if lv.pointer:
                nodes.append(t.Declare(f"{self._elem(self.out, lv.pointer)} *restrict",
                                       self.field("out", lv.pointer), f"out->{lv.pointer}"))
            if lv.kind is StorageKind.DENSE:
                nodes.append(t.Declare("int64_t", f"ext{k}", f"out->{lv.extent}", const=True))
            else:
                nodes.append(t.Declare("int64_t", f"cap{k}", f"size[{k}]", const=True))
                if self.pass_ is _Pass.SERIAL:      # else one per row, in the row's loop
                    nodes.append(t.Declare("int64_t", f"next{k}", "0"))
        if self.out.value_array:        # else a pattern layout: no values stored
            nodes.append(t.Declare("spf_value_t *restrict", "out_val",
                                   f"out->{self.out.value_array}"))
        nodes += [t.Declare("int64_t", f"dim{d}", f"out->{f}", const=True)
                  for d, f in enumerate(self.out.shape_fields) if self._dim_used(d)]
        for r, run in enumerate(self.runs):
            for lv in run.storage.levels:
                names = [arr for _, arr in lv.coords if arr] + ([lv.pointer] if lv.pointer else [])
                nodes += [t.Declare(f"{self._elem(run.storage, a)} *restrict",
                                    self.field(f"r{r}", a), f"r{r}->{a}", const=True)
                          for a in names]
            if run.storage.value_array:     # else a pattern layout: its constant is read
                nodes.append(t.Declare(f"{run.storage.layout.value_type.c} *restrict",
                                       f"r{r}_val", f"r{r}->{run.storage.value_array}",
                                       const=True))
        return nodes

    def _dim_used(self, dim: int) -> bool:
        """Whether a level's key (:meth:`_key`) reads the extent of logical dimension ``dim``:
        a coordinate after the first of a level with several, or a descending one there."""
        for k, lv in enumerate(self.out.levels):
            dims = [d for d, _ in lv.coords]
            if len(dims) > 1 and dim in dims:
                m = dims.index(dim)
                return m > 0 or self.out.descending[self.first(k) + m]
        return False

    def first(self, k: int) -> int:
        """The position in storage order of level ``k``'s first coordinate."""
        return sum(len(lv.coords) for lv in self.out.levels[:k])

    # levels -------------------------------------------------------------------------------
    def level(self, k: int, parent: str | None, places: list[_Place | None]) -> list[t.Node]:
        lv = self.out.levels[k]
        if lv.kind is StorageKind.DENSE:
            return self._dense(k, parent, places)
        return self._compressed(k, parent, places)

    def _inner(self, k: int, here: str, places: list[_Place | None]) -> list[t.Node]:
        """Under output position ``here`` of level ``k``: the next level, or the value (the
        signed sum of the runs that have the entry; ``None``: a run without it for sure)."""
        if k + 1 < len(self.out.levels):
            return self.level(k + 1, here, places)
        present = [(r, p) for r, p in enumerate(places) if p is not None]
        if self.out.value_array is None:
            return []           # a pattern layout: the entry's position is all it stores
        if self.leaf is not None:
            return [t.Assign(f"out_val[{here}]", self._leaf_value(present))]
        if all(place.has is None for _, place in present) and self.semiring.is_plus_times:
            text = ""
            for r, place in present:
                read = self._read(r, place.pos)
                if self._minus(r):
                    text = f"{text} - {read}" if text else f"-{read}"
                else:
                    text = f"{text} + {read}" if text else read
            return [t.Assign(f"out_val[{here}]", text)]
        note = ("the sum of the runs that have the entry" if self.semiring.is_plus_times else
                f"the runs that have the entry, combined by {self.semiring.add}")
        nodes: list[t.Node] = [t.Declare("spf_value_t", "v", self.semiring.zero_c(), note=note)]
        for r, place in present:
            add = self._add_into("v", r, self._read(r, place.pos))
            nodes.append(add if place.has is None else t.If(place.has, [add], braces=False))
        nodes.append(t.Assign(f"out_val[{here}]", "v"))
        return nodes

    def _leaf_value(self, present: list[tuple[int, _Place]]) -> str:
        """The union's expression of the runs' values, 0 for a run without the entry."""
        assert self.leaf is not None
        reads = {run.operand: "0" for run in self.runs}
        for r, place in present:
            read = self._value(r, place.pos)
            reads[self.runs[r].operand] = read if place.has is None else \
                f"({place.has} ? {read} : 0)"
        value = value_c(self.leaf.tree, reads, self.leaf.types)
        coef = self.leaf.coefficient
        if not is_sign(coef):       # in numpy's type of the product (a Fraction: a float)
            own = type_of(self.leaf.tree, self.leaf.types)
            weak = float(coef) if isinstance(coef, Fraction) else coef
            product = result_type(own, weak=(weak,))
            cast = "" if product == own else f"({product.c})"
            value = scaled_c(f"{cast}{value}", coef, product)
        elif coef == -1:
            value = negated_c(value, type_of(self.leaf.tree, self.leaf.types))
        return f"(spf_value_t)({value})"

    def _value(self, r: int, pos: str) -> str:
        """Run ``r``'s stored value at ``pos``: its value array's, or a pattern layout's
        constant (in its type)."""
        lay = self.runs[r].layout
        if lay.implicit is None:
            return f"r{r}_val[{pos}]"
        return implicit_c(lay.implicit, lay.value_type)

    def _wraps(self, r: int) -> bool:
        """Whether run ``r`` is negated in its own type, numpy's (-(-128) of int8 is -128),
        before the sum: a sign not the sum's (``-A(i,j) + D(i,j)``, ``D(i,j) - (-A(i,j))``)
        on an integer narrower than C's ``int`` (C negates it in ``int``) or than the
        output's type (the sum's)."""
        run = self.runs[r]
        vt = run.layout.value_type
        return (run.sign < 0) != run.subtracted and (negation_wraps(vt) or (
            vt.kind in (Kind.INT, Kind.UINT) and vt != self.out.layout.value_type))

    def _minus(self, r: int) -> bool:
        """Whether the sum subtracts run ``r``'s value as :meth:`_read` gives it (the sum's
        own sign where the run was negated in its own type first)."""
        run = self.runs[r]
        return run.subtracted if self._wraps(r) else run.sign < 0

    def _read(self, r: int, pos: str) -> str:
        """Run ``r``'s value at ``pos`` (its negative when :meth:`_wraps`); in the output's
        type when the runs' types differ (C's promotion is not numpy's: uint32 + int32 is
        unsigned in C) or it is negated."""
        read = self._value(r, pos)
        if self._wraps(r):
            return f"((spf_value_t){negated_c(read, self.runs[r].layout.value_type)})"
        mixed = len({run.layout.value_type for run in self.runs}) > 1
        return f"((spf_value_t){read})" if mixed else read

    def _add_into(self, target: str, r: int, read: str) -> t.Node:
        """``target`` combined with run ``r``'s value (no run is subtracted under a
        semiring: one add per run, not a nested expression)."""
        if not self.semiring.is_plus_times:
            return t.Assign(target, self.semiring.add_c(target, read))
        return t.Assign(target, read, "-=" if self._minus(r) else "+=")

    def _dense(self, k: int, parent: str | None, places: list[_Place | None]) -> list[t.Node]:
        c = f"c{k}"
        body: list[t.Node] = [] if self.pass_ is _Pass.FILL else [   # FILL: no pointer to set
            t.Declare("int64_t", f"o{k}", f"{parent} * ext{k} + {c}" if parent else c,
                      const=True)]
        inner: list[_Place | None] = []
        for r, place in enumerate(places):
            if place is None:
                inner.append(None)
                continue
            pos = f"p{r}_{k}"
            body.append(t.Declare("int64_t", pos, f"{place.pos} * ext{k} + {c}" if parent
                                  else c, const=True))
            inner.append(_Place(pos, place.has))
        if self.pass_ is not _Pass.SERIAL:      # the row's own position counter
            ptr = self.field("out", self.out.levels[k + 1].pointer or "")
            body.append(t.Declare("int64_t", f"next{k + 1}",
                                  "0" if self.pass_ is _Pass.COUNT else f"{ptr}[{c}]"))
        body += self._inner(k, f"o{k}", inner)
        parallel = None if self.pass_ is _Pass.SERIAL else t.Parallel(t.Schedule.GUIDED)
        return [t.For(f"int64_t {c} = 0", f"{c} < ext{k}", f"++{c}", body, parallel=parallel)]

    def _compressed(self, k: int, parent: str | None,
                    places: list[_Place | None]) -> list[t.Node]:
        """Three phases: while every run has entries left (no exhaustion checks), while at
        least two have (more than two runs), then the one run left alone (a copy)."""
        out_lv = self.out.levels[k]
        present = [r for r, place in enumerate(places) if place is not None]
        nodes: list[t.Node] = []
        for r, place in enumerate(places):
            if place is None:
                continue
            lv = self.runs[r].storage.levels[k]
            if lv.pointer:
                ptr = self.field(f"r{r}", lv.pointer)
                start, stop = f"{ptr}[{place.pos}]", f"{ptr}[{place.pos} + 1]"
            else:
                start, stop = "0", f"r{r}->{lv.count}"
            if place.has is not None:
                start, stop = f"{place.has} ? {start} : 0", f"{place.has} ? {stop} : 0"
            nodes += [t.Declare("int64_t", f"q{r}_{k}", start),
                      t.Declare("int64_t", f"e{r}_{k}", stop, const=True)]
        live = [f"q{r}_{k} < e{r}_{k}" for r in present]
        if len(present) > 1:
            nodes += [t.Comment("while every run has entries left"),
                      t.While(" && ".join(live), self._step(k, present, checked=False))]
        if len(present) > 2:
            nodes += [t.Comment("while two or more have"),
                      t.While(" + ".join(f"({c})" for c in live) + " >= 2",
                              self._step(k, present, checked=True))]
        for r, cond in zip(present, live):
            if self.pass_ is _Pass.COUNT:       # the run left alone: its entries, counted
                nodes.append(t.Assign(f"next{k}", f"e{r}_{k} - q{r}_{k}", "+="))
            else:
                nodes.append(t.While(cond, self._step(k, [r], checked=False)))
        if out_lv.pointer and self.pass_ is not _Pass.FILL:
            nodes.append(t.Assign(f"{self.field('out', out_lv.pointer)}[{parent} + 1]",
                                  f"(spf_index_t)next{k}"))
        note = f"level {out_lv.index}: merge the runs' entries" if len(present) > 1 \
            else f"level {out_lv.index}: the entries of the one run"
        return [t.Block(nodes, note=note)]

    def _step(self, k: int, alive: list[int], checked: bool) -> list[t.Node]:
        """One output position of compressed level ``k`` from runs ``alive``: the smallest
        head key (``checked``: an exhausted run's head is INT64_MAX), the runs that have it,
        the entry (or the levels under it), those runs advanced.  A lone run always has it."""
        key = f"key{k}"
        step: list[t.Node] = []
        if len(alive) == 1:     # the key only names the coordinate, when there is one
            if len(self.out.levels[k].coords) == 1:
                step.append(t.Declare("int64_t", key, self._key(alive[0], k, f"q{alive[0]}_{k}"),
                                      const=True))
        else:
            heads = {r: f"k{r}_{k}" for r in alive}
            for r, head in heads.items():
                q, e = f"q{r}_{k}", f"e{r}_{k}"
                value = f"{q} < {e} ? {self._key(r, k, q)} : {_NONE}" if checked \
                    else self._key(r, k, q)
                step.append(t.Declare("int64_t", head, value, const=True))
            first, *rest = heads.values()
            smallest = first
            for h in rest:
                smallest = f"{h} < {smallest} ? {h} : {smallest}" if smallest == first \
                    else f"{h} < ({smallest}) ? {h} : ({smallest})"
            step.append(t.Declare("int64_t", key, smallest, const=True))
        has: dict[int, str | None] = dict.fromkeys(alive)
        if len(alive) > 1:
            flags = {r: f"h{r}_{k}" for r in alive}
            step += [t.Declare("int", flag, f"k{r}_{k} == {key}", const=True)
                     for r, flag in flags.items()]
            has.update(flags)
        if self.pass_ is _Pass.COUNT:
            step.append(t.Call(f"++next{k}"))
        else:
            if self.pass_ is _Pass.SERIAL:      # FILL: the counts were checked before
                step.append(t.If(f"next{k} >= cap{k}", [t.Return(str(CAPACITY))],
                                 braces=False))
            step.append(t.Declare("int64_t", f"o{k}", f"next{k}++", const=True))
            for m, arr in enumerate(self.out.levels[k].arrays):
                step.append(t.Assign(f"{self.field('out', arr)}[o{k}]",
                                     self._pick(k, m, has)))
            places = [_Place(f"q{r}_{k}", has[r]) if r in has else None
                      for r in range(len(self.runs))]
            step += self._inner(k, f"o{k}", places)
        step += [t.If(h, [t.Call(f"++q{r}_{k}")], braces=False) if h else
                 t.Call(f"++q{r}_{k}") for r, h in has.items()]
        return step

    def _key(self, r: int, k: int, q: str) -> str:
        """The head's level-``k`` coordinates as one number increasing in storage order."""
        lv = self.runs[r].storage.levels[k]
        first = self.first(k)
        out_dims = [d for d, _ in self.out.levels[k].coords]
        text = ""
        for m, arr in enumerate(lv.arrays):
            c = f"(int64_t){self.field(f'r{r}', arr)}[{q}]"
            down = self.out.descending[first + m]
            if len(lv.coords) == 1:
                return f"-{c}" if down else c
            if down:
                c = f"(dim{out_dims[m]} - 1 - {c})"
            text = c if not text else f"({text}) * dim{out_dims[m]} + {c}"
        return text

    def _pick(self, k: int, m: int, has: dict[int, str | None]) -> str:
        """The level's ``m``-th coordinate of the entry: the key itself for a level of one
        coordinate, else read from the first run that has it."""
        if len(self.out.levels[k].coords) == 1:
            first = self.first(k)
            return f"(spf_index_t){'-' if self.out.descending[first] else ''}key{k}"
        runs = list(has)
        reads = [f"{self.field(f'r{r}', self.runs[r].storage.levels[k].arrays[m])}[q{r}_{k}]"
                 for r in runs]
        text = reads[-1]
        for n in range(len(runs) - 2, -1, -1):
            text = f"{has[runs[n]]} ? {reads[n]} : {text}"
        return text

    def sizes(self) -> list[t.Node]:
        nodes: list[t.Node] = []
        for k, lv in enumerate(self.out.levels):
            if lv.kind is StorageKind.DENSE:
                nodes.append(t.Assign(f"size[{k}]", f"size[{k - 1}] * ext{k}" if k else f"ext{k}"))
            else:
                nodes.append(t.Assign(f"size[{k}]", f"next{k}"))
        return nodes


def merge_function(name: str, out: Storage, out_struct: str, runs: list[Run],
                   run_structs: list[str], semiring: Semiring = PLUS_TIMES,
                   parallel: bool = False, leaf: Leaf | None = None) -> t.Function:
    """``<name>_merge(out, size, r0, r1, ...)``: the union of the runs (equal coordinates
    combined by ``semiring``'s add), appended to ``out`` in storage order (a
    :class:`~spf.back.status.Status`: 0; 2 when a level outgrows its capacity ``size[k]``;
    the one the leaf's values set).  ``parallel`` (a row-shaped output,
    :func:`~.rows.row_shaped`): the rows are merged by the threads, counted first;
    ``leaf``: an entry's value is that expression of the runs' (a union, ``max(A, B)``)."""
    w = _MergeWriter(out, runs, semiring, leaf)
    status = leaf is not None and sets_status(helpers_of(leaf.tree, leaf.types))
    params = [f"{out_struct} *restrict out", "int64_t *restrict size"]
    params += [f"const {s} *restrict r{r}" for r, s in enumerate(run_structs)]
    starts: list[_Place | None] = [_Place("0", None) for _ in runs]
    if parallel:
        w.pass_ = _Pass.COUNT
        body = w.hoisted()
        ptr = w.field("out", out.levels[1].pointer or "")
        body += [t.Comment("first pass (parallel over rows): each row's entries in the union"),
                 *w.level(0, None, starts),
                 t.For("int64_t c0 = 0", "c0 < ext0", "++c0",
                       [t.Assign(f"{ptr}[c0 + 1]", f"{ptr}[c0]", "+=")], braces=False),
                 t.If(f"{ptr}[ext0] > cap1", [t.Return(str(CAPACITY))], braces=False),
                 t.Comment("second pass (parallel over rows): each row merged at its segment")]
        w.pass_ = _Pass.FILL
        body += w.level(0, None, starts)
        body += [t.Assign("size[0]", "ext0"), t.Assign("size[1]", f"{ptr}[ext0]")]
    else:
        body = w.hoisted()
        body += w.level(0, None, starts)
        body += w.sizes()
    if status:          # the leaf's values set it; returned once the merge is complete
        body.insert(0, value_status_declaration())
    body.append(t.Return(VALUE_STATUS if status else str(Status.OK.value)))
    names = ", ".join(f"r{r} = {run.operand}" + (" (subtracted)" if run.sign < 0 else "")
                      for r, run in enumerate(runs))
    return t.Function(f"static int {name}_merge({', '.join(params)})", body,
                      f"The union of the sum's runs ({names}), level by level in storage order")
