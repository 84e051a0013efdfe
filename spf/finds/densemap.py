"""DenseMap: a dense position map, an int array over the found coordinate's extent (the
GraphBLAS / Gustavson workspace).  Filled with ``position + 1`` for the searched range,
cleared (only the entries it set) when the range changes, so a lookup is one load.

Valid when a search matches at most one position (Z3), the coordinate has an extent from the
shape or a loop bound (the map's size), the range and its keys are fixed between builds
(Algorithm 3, as for HashMap) and, when it is rebuilt, the keys over a previous build's range
are the same at the next build (the clear reads them then).  Works on unsorted operands.
Keys that Z3 cannot prove (from the searched array's properties) to lie in ``[0, extent)``
are tested before they index the map (a key outside can match nothing); the target is always
tested: the conditions that bound it (an ELL row's padding, say) may be checked only after
the lookup.
"""
from __future__ import annotations

import z3

from ..back import ctree as t
from ..front.terms import Aff
from ..middle.scan import LevelKind, LoopNest
from .base import CostTerms, FindContext, FindLowering, MapAlgorithm
from .checks import extent_of, failed, rejection, trip_counts
from .model import Choice, Find


class DenseMap(MapAlgorithm):
    name = "densemap"
    title = "DenseMap"
    preference = 1
    parallel_rank = 0
    sized = True

    def check(self, ctx: FindContext) -> Choice | str:
        find, chk = ctx.find, ctx.checker
        if len(find.keys) != 1:
            return f"DenseMap keys are single coordinates; this find compares {len(find.keys)}"
        if not ctx.unique:
            return "a search can match several positions; a dense map holds one per coordinate"
        target = find.keys[0][1]
        extent = _extent(ctx.nest, find, target)
        if extent is None:
            return (f"the coordinate {target} has no extent from the shape or a loop bound "
                    "to size the map")
        built = self.built_state(ctx)
        if isinstance(built, str):
            return built
        state, init = built
        if state:       # a rebuild clears the previous range by the keys it reads now
            ok, why = chk.same_keys([])
            if not ok:
                return rejection([("", failed("the keys over a previous build's range change "
                                              "by the next build, which clears its entries by "
                                              "them", why))])
        keys_ok = _keys_in_extent(chk, extent)
        detail = f"map over [0, {extent})" + ("" if keys_ok else ", keys tested against it")
        return Choice("densemap", 1, "<", state, True, init, stateful=True, detail=detail,
                      extra={"extent": extent, "keys_bounded": keys_ok})

    def cost(self, nest: LoopNest, find: Find, choice: Choice) -> CostTerms | None:
        resets = trip_counts(nest, choice)
        return None if resets is None else CostTerms(4, 8, resets, choice.extra["extent"])

    # lowering ---------------------------------------------------------------------------
    @staticmethod
    def _map(f: FindLowering) -> str:
        return f"spf_dmap_{f.var}"

    def declare(self, f: FindLowering) -> list[t.Node]:
        return [t.Declare("spf_index_t", f"*{self._map(f)}", "NULL"),
                t.Declare("spf_index_t", f"spf_dlo_{f.var}", "0"),
                t.Declare("spf_index_t", f"spf_dend_{f.var}", "0")]

    def _allocate(self, f: FindLowering) -> t.If:
        """The map, zeroed, at its first build (not before: Auto may not run this find)."""
        f.names.helpers.add("spf_max")
        extent = f.names.aff(f.choice.extra["extent"])
        return t.If(f"!{self._map(f)}", [
            t.Assign(self._map(f), f"calloc((size_t)spf_max(1, {extent}), sizeof(spf_index_t))"),
            t.If(f"!{self._map(f)}", [t.Goto("spf_out_of_memory")], braces=False)])

    def _store(self, f: FindLowering, key: str, value: str) -> str:
        store = f"{self._map(f)}[{key}] = {value};"
        if f.choice.extra["keys_bounded"]:
            return store
        return f"if ({key} >= 0 && {key} < {f.names.aff(f.choice.extra['extent'])}) {store}"

    def init(self, f: FindLowering) -> list[t.Node]:
        q = f"spf_q_{f.var}"
        key = f.key_at(q)[0]
        return [self._allocate(f), f.snippet("find_densemap_build.c", q=q, lo=f.lo(), end=f.end(),
                          old_lo=f"spf_dlo_{f.var}", old_end=f"spf_dend_{f.var}",
                          clear=self._store(f, key, "0"), fill=self._store(f, key, f"{q} + 1"),
                          comment=f"DenseMap for the find of {f.var}: coordinate -> position "
                                  f"+ 1 in [{f.lo()}, {f.hi()}] (0: none)")]

    def open(self, f: FindLowering, b: t.Builder) -> None:
        b.add(t.Comment("\n".join(f.comment_lines())))
        target, pos = f.targets()[0], f"spf_hit_{f.var}"
        extent = f.names.aff(f.choice.extra["extent"])
        lookup = f"({target} >= 0 && {target} < {extent}) ? {self._map(f)}[{target}] - 1 : -1"
        b.add(t.Declare("spf_index_t", pos, lookup, const=True))
        b.nest(t.If(f"{pos} >= 0"))
        f.bind(b, pos)

    def release(self, f: FindLowering) -> list[t.Node]:
        return [t.Call(f"free({self._map(f)})")]

    def what(self, c: Choice) -> str:
        return "DenseMap: reads the position from a map indexed by the coordinate"

    def why(self, c: Choice) -> str:
        bounds = ("Z3 proved the keys within the map" if c.extra["keys_bounded"] else
                  "keys outside the map are skipped")
        clear = "; a rebuild clears the previous range by its keys, which Z3 proved " \
            "unchanged" if c.state else ""
        return "valid because a search matches at most one position and the searched " \
               f"range and its keys are fixed between builds{clear}; {bounds}"


def _extent(nest: LoopNest, find: Find, target: Aff) -> Aff | None:
    """The extent of the coordinate ``target``: of the index it is, or that an enclosing
    assignment gives it (``j = A_pl + A.colIdx(A_pj)``)."""
    var = next(iter(target.names()), None)
    if var is not None and target == Aff.var(var):
        return extent_of(nest, var)
    for lv in nest.levels[:find.level]:
        if lv.kind is LevelKind.ASSIGN and lv.expr == target:
            return extent_of(nest, lv.var)
    return None


def _keys_in_extent(chk, extent: Aff) -> bool:
    """Whether Z3 proves every key of the searched range within [0, extent)."""
    e = chk.enc
    e.begin(1)
    q = e.position(1)
    key, size = e.key(q, 1)[0], e.aff(extent, 1)
    ok, _ = e.unsat(e.in_range(q, 1), z3.Or(key < 0, key >= size),
                    query=f"whether the keys of {chk.lookup} lie in [0, {extent})",
                    fallback="assumed not: keys are tested before they index the map")
    return ok


ALGORITHM = DenseMap()
