"""The analysis and fill passes of a placed conversion (see :mod:`spf.front.placement`) as
code-tree statements, put into the source's loops by :func:`spf.back.lower.kernel_code`.

The **analysis pass** marks the keys that occur (or records each entry's key within its
group) and counts each slot group's entries; the **fill pass** puts every value (and slot
coordinate) at its position.
"""
from __future__ import annotations

from collections.abc import Callable

from ..front.placement import Placement, logical_dim
from ..front.terms import Aff, Atom, FloorDiv
from . import ctree as t
from .lower import CustomStatement

ANALYSIS_PARAMS = ["uint8_t *restrict spf_present", "spf_index_t *restrict spf_count",
                   "int64_t *restrict spf_entries", "int64_t *restrict spf_keys",
                   "int64_t spf_capacity", "int64_t spf_kmin", "int64_t spf_stride",
                   "const int64_t *restrict spf_bound"]
FILL_PARAMS = ["spf_value_t *restrict spf_data", "spf_index_t *restrict spf_slot",
               "spf_index_t *restrict spf_next", "const spf_index_t *restrict spf_rank",
               "const int64_t *restrict spf_pos", "int64_t spf_kmin",
               "const int64_t *restrict spf_bound"]


def aff_text(a: Aff, names: list[str], cast: bool = False) -> str:
    """``a`` over logical atoms (``d<k>``: ``names[k]``) as text, or as C (``cast``: each
    coordinate as int64_t)."""
    def atom(x: Atom) -> str:
        name = f"(int64_t){names[logical_dim(x)]}" if cast else names[logical_dim(x)]
        return f"({name} / {x.den})" if isinstance(x, FloorDiv) else name
    parts = [atom(x) if k == 1 else f"-{atom(x)}" if k == -1 else f"{k} * {atom(x)}"
             for x, k in a.terms]
    if a.const or not parts:
        parts.append(str(a.const))
    text = " + ".join(parts).replace("+ -", "- ")
    m = _offset_of(a)
    if m:    # d - c * floor(d / c): the offset in the tile
        text = f"({atom(m[0])} % {m[1]})"
    return text


def _offset_of(a: Aff) -> tuple[Atom, int] | None:
    """``(d, c)`` when ``a`` is ``d - c * floor(d / c)``."""
    if len(a.terms) == 2 and a.const == 0:
        (x, k), (y, n) = a.terms
        if isinstance(y, FloorDiv) and k == 1 and n == -y.den and y.num == Aff.var(x):
            return x, y.den
    return None


class _Coords(dict):
    """Coordinate expressions by layout index, recording the logical indices of those read."""

    def __init__(self, texts: dict[str, str], reads: dict[str, set[str]]):
        super().__init__(texts)
        self.reads = dict(reads)
        self.used: set[str] = set()

    def __getitem__(self, p: str) -> str:
        self.used |= self.reads.get(p, set())
        return super().__getitem__(p)

    def __setitem__(self, p: str, text: str) -> None:   # a local variable: reads nothing
        self.reads[p] = set()
        super().__setitem__(p, text)


def _aff_names(a: Aff, names: list[str]) -> set[str]:
    """The logical indices ``a`` reads (its atoms are ``d<k>``, floor divisions of them)."""
    return {names[logical_dim(x)] for x, _ in a.terms}


def _linear(pl: Placement, indices: tuple[str, ...], value_of: dict[str, str]) -> str:
    """Row-major position of ``indices`` over their bounds (``spf_bound[k]``)."""
    order = list(pl.layout.indices)
    text = ""
    for p in indices:
        text = value_of[p] if not text else \
            f"({text}) * spf_bound[{order.index(p)}] + {value_of[p]}"
    return text or "0"


Value = Callable[[], str]


def _unless_zero(drop_zeros: bool, body: Callable[[Value], list[t.Node]]
                 ) -> Callable[[Value], list[t.Node]]:
    """The statement for a value: ``body`` itself, or (``drop_zeros``) guarded by the value
    being nonzero."""
    if not drop_zeros:
        return body
    return lambda value: [t.Declare("spf_value_t", "spf_v", value(), const=True),
                          t.If("spf_v != 0.0", body(lambda: "spf_v"),
                               note="zeros are not stored")]


class _Passes:
    """Builds both passes of one placement for a source whose logical indices are ``names``."""

    def __init__(self, pl: Placement, names: list[str]):
        self.pl, self.names = pl, names
        self.texts = {p: aff_text(a, names, cast=True) for p, a in pl.coordinates.items()}
        self.reads = {p: _aff_names(a, names) for p, a in pl.coordinates.items()}
        rk = pl.ranked
        self.key = f"{aff_text(rk.key, names, cast=True)} - spf_kmin" if rk else ""
        self.key_reads = _aff_names(rk.key, names) if rk else set()

    def coords(self) -> _Coords:
        return _Coords(self.texts, self.reads)

    def analysis(self, drop_zeros: bool) -> CustomStatement:
        pl, rk, coord = self.pl, self.pl.ranked, self.coords()
        body: list[t.Node] = []
        if rk and rk.pointer:
            body.append(t.If("spf_e < spf_capacity", [t.Assign(
                "spf_keys[spf_e]", f"({_linear(pl, rk.group, coord)}) * spf_stride + {self.key}")],
                braces=False, note=f"its (({', '.join(rk.group)}), key)"))
        elif rk:
            body.append(t.Assign(f"spf_present[{self.key}]", "1", note=f"{rk.uf} holds this key"))
        if pl.slot:
            body.append(t.Call(f"++spf_count[{_linear(pl, pl.group(), coord)}]",
                               note=f"entries per {', '.join(pl.group()) or 'tensor'}"))
        body.append(t.Call("++spf_e"))
        return CustomStatement(
            ANALYSIS_PARAMS, _unless_zero(drop_zeros, lambda value: list(body)),
            self.key_reads | coord.used, prologue=[_counter()],
            epilogue=[t.Assign("*spf_entries", "spf_e")])

    def fill(self, drop_zeros: bool, group_level: int | None) -> CustomStatement:
        pl, rk, names = self.pl, self.pl.ranked, self.names
        fill_coord, value_of = self.coords(), self.coords()
        body: list[t.Node] = []
        reads: set[str] = set()
        for p in pl.layout.indices:
            if rk and p == rk.index and rk.pointer:
                init = "spf_pos[spf_e++]"
                note = f"where its (({', '.join(rk.group)}), key) is among those present"
            elif rk and p == rk.index:
                init, note = f"spf_rank[{self.key}]", f"rank of the key in {rk.uf}"
                reads |= self.key_reads
            elif pl.slot and p == pl.slot.index and group_level is not None:
                init, note = "spf_k++", "the group's next slot"
            elif pl.slot and p == pl.slot.index:
                init = f"spf_next[{_linear(pl, pl.group(), fill_coord)}]++"
                note = "the group's next slot"
            else:
                continue
            body.append(t.Declare("int64_t", f"spf_{p}", init, const=True, note=note))
            value_of[p] = f"spf_{p}"
        if pl.slot:
            body.append(t.Assign(f"spf_slot[{_linear(pl, pl.slot.args, value_of)}]",
                                 f"(spf_index_t){names[pl.slot.dim]}", note=pl.slot.uf))
            reads.add(names[pl.slot.dim])
        # a slot is one entry's own; other positions add up duplicate coordinates
        data = f"spf_data[{_linear(pl, pl.value, value_of)}]"
        op = "=" if pl.slot else "+="
        prologue: list[t.Node] = [_counter()] if rk and rk.pointer else []
        at: tuple[int, list[t.Node]] | None = None
        if pl.slot and group_level is not None:
            prologue += [t.Declare("int64_t", "spf_group", "-1",
                                   note="the group's slot counter (its entries arrive together)"),
                         t.Declare("int64_t", "spf_k", "0")]
            group = _linear(pl, pl.group(), self.coords())
            at = (group_level, [t.If(f"{group} != spf_group", [t.Assign("spf_group", group),
                                                                t.Assign("spf_k", "0")])])
        return CustomStatement(
            FILL_PARAMS,
            _unless_zero(drop_zeros, lambda value: [*body, t.Assign(data, value(), op)]),
            reads | fill_coord.used | value_of.used, prologue=prologue, at=at)


def _counter() -> t.Declare:
    return t.Declare("int64_t", "spf_e", "0", note="entries visited")


def placement_passes(pl: Placement, names: list[str], drop_zeros: bool,
                     group_level: int | None = None) -> tuple[CustomStatement, CustomStatement]:
    """The analysis and the fill pass for a source whose logical indices are ``names``;
    ``group_level``: the nest level where the slot group is known and after which its
    entries arrive one group after the other (the slot counter is then a local, reset there
    when the group changes)."""
    passes = _Passes(pl, names)
    return passes.analysis(drop_zeros), passes.fill(drop_zeros, group_level)
