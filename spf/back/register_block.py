"""Register blocking of a dense output: where the output element a statement adds into does
not depend on a loop (the *carried* loop) but on loops inside it of small constant extent
(the *lanes*: a SELL slice's rows, a block's rows), the elements of one block are summed in a
local array across the carried loop and added into the output once after it.  Without it
every iteration of the carried loop reads and writes the output again (SELL-C with slots
outer: C loads and stores per slot); with it the lanes' sums stay in registers and the lane
loop vectorizes over them (cf. TACO's workspaces, MLIR's scalar replacement of reductions).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..finds.model import Decision
from ..front.terms import Aff, Constraint
from ..middle.scan import Level, LevelKind, LoopNest
from . import ctree as t
from .levels import Hook
from .names import CNames, loop_bound

BLOCK = "spf_block"     # the local array of the block's sums
MAX_LANES = 64          # elements of the block: it has to fit the registers (or L1)


@dataclass(frozen=True)
class RegisterBlock:
    """The carried loop's level, the lane loops (outermost first) with their constant lower
    bounds and extents, and the assignments the output's index needs (in level order)."""

    carried: int
    lanes: tuple[tuple[Level, int, int], ...]
    assigns: tuple[Level, ...]
    guards: tuple[Constraint, ...]

    @property
    def size(self) -> int:
        out = 1
        for _, _, extent in self.lanes:
            out *= extent
        return out

    @property
    def lane_vars(self) -> set[str]:
        return {lv.var for lv, _, _ in self.lanes}

    def index(self) -> Aff:
        """The block element of the current lanes (row-major)."""
        index, stride = Aff.num(0), 1
        for lv, lo, extent in reversed(self.lanes):
            index = index + (Aff.var(lv.var) - lo) * stride
            stride *= extent
        return index


def find_block(nest: LoopNest, out_vars: set[str], decisions: list[Decision],
               parallel_loop: str | None) -> RegisterBlock | None:
    """The outermost loop the output's element does not depend on while every loop inside
    it that the element does depend on has a constant extent (the product at most
    :data:`MAX_LANES`) and bounds known outside it; None if there is none."""
    levels = nest.levels
    deps, assigns = _dependencies(levels, out_vars)
    finds = {d.find.level for d in decisions} | {k for d in decisions for k in d.find.key_levels}
    par = [lv.var for lv in levels].index(parallel_loop) if parallel_loop else -1
    for m in range(max(par + 1, 1), len(levels)):
        carried = levels[m]
        if carried.kind is not LevelKind.LOOP or carried.var in deps:
            continue
        inner = levels[m:]
        lanes = _lanes([lv for lv in inner if lv.kind is LevelKind.LOOP and lv.var in deps],
                       {lv.var for lv in inner}, finds, levels)
        if lanes is None:
            return None     # an outer carried loop failed: an inner one would fail too
        if not lanes:
            continue
        block = RegisterBlock(m, tuple(lanes), tuple(a for a in assigns if
                                                     levels.index(a) > m),
                              _guards(inner, {lv.var for lv in levels[:m]} | deps))
        return block if 1 < block.size <= MAX_LANES else None
    return None


def _dependencies(levels: list[Level], out_vars: set[str]) -> tuple[set[str], list[Level]]:
    """The variables the output's element depends on (through assignments and index-array
    reads), and the assignments among them in level order."""
    by_var = {lv.var: lv for lv in levels}
    deps: set[str] = set()
    todo = list(out_vars)
    while todo:
        var = todo.pop()
        if var in deps or var not in by_var:
            continue
        deps.add(var)
        lv = by_var[var]
        if lv.kind is LevelKind.ASSIGN:
            todo += lv.assigned.names()
        elif lv.kind is LevelKind.READ:
            todo += [n for a in lv.read_call.args for n in a.names()]
    return deps, [lv for lv in levels if lv.kind is LevelKind.ASSIGN and lv.var in deps]


def _lanes(loops: list[Level], inner: set[str], finds: set[int],
           levels: list[Level]) -> list[tuple[Level, int, int]] | None:
    """Each lane loop with its constant lower bound and extent; None if one has no constant
    extent, is a find's, or has a bound reading a variable of the carried loop's body other
    than an outer lane."""
    out: list[tuple[Level, int, int]] = []
    for lv in loops:
        seen = {o.var for o, _, _ in out}
        span = lv.constant_span()
        if span is None or levels.index(lv) in finds \
                or any((a.names() & inner) - seen for a, _ in lv.lower + lv.upper):
            return None
        out.append((lv, *span))
    return out


def _guards(inner: list[Level], known: set[str]) -> tuple[Constraint, ...]:
    """The guards inside the carried loop that read only what is known outside it and the
    lanes (the store tests them: no element outside the output is written)."""
    return tuple(g for lv in inner for g in lv.guards if g.names() <= known)


def open_block(block: RegisterBlock, nest: LoopNest, names: CNames, zero: str,
               add: Callable[[str, str], t.Node], target: str, out: str) -> Hook:
    """The hook before the carried loop: the block zeroed, and after the loop each lane's
    sum added into ``target`` (the output's element)."""
    carried = nest.levels[block.carried].var
    lanes = ", ".join(lv.var for lv, _, _ in block.lanes)

    def hook(b: t.Builder) -> None:
        b.add(t.Comment(f"{out}'s {block.size} elements of these {lanes} summed in {BLOCK} "
                        f"across {carried} (they do not depend on it), added into {out} "
                        f"after it: one load and store each instead of one per {carried}"),
              t.Declare("spf_acc_t", f"{BLOCK}[{block.size}]"),
              t.For("int spf_z = 0", f"spf_z < {block.size}", "++spf_z",
                    [t.Assign(f"{BLOCK}[spf_z]", zero)], braces=False))
        body: list[t.Node] = [t.Declare(names.index_ctype, a.var, names.aff(a.assigned), const=True)
                              for a in block.assigns]
        store = add(target, f"{BLOCK}[{names.aff(block.index())}]")
        if block.guards:
            store = t.If(" && ".join(names.condition(g) for g in block.guards), [store])
        body.append(store)
        for lv, _, _ in reversed(block.lanes):
            lo = loop_bound(names, lv.lower, upper=False)
            hi = loop_bound(names, lv.upper, upper=True)
            body = [t.For(f"{names.index_ctype} {lv.var} = {lo}", f"{lv.var} < {hi}", f"++{lv.var}",
                          body)]
        b.defer(body[0])
    return hook
