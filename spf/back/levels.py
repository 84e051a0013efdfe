"""Lowering of a scanned loop nest's levels (loops, assignments, guards, finds) to the C tree,
and the condition under which a tile loop's tile can hold a match (tile skipping)."""
from __future__ import annotations

from collections.abc import Callable

from ..decide.synthesis import TileSkip
from ..front.terms import Aff, Constraint, UFCall
from ..middle.scan import LevelKind, LoopNest
from . import ctree as t
from .names import CNames, loop_bound

Hook = Callable[[t.Builder], None]


def lower_levels(b: t.Builder, nest: LoopNest, names: CNames, used: set[str],
                 finds: list, statement: list[t.Node], hooks: dict[int, Hook],
                 level_notes: dict[str, str] | None = None,
                 parallel: dict[str, t.Parallel] | None = None, team: str | None = None,
                 simd: dict[str, t.Simd] | None = None,
                 unroll: tuple[str, int] | None = None, start: int = 0) -> None:
    """Loops, assignments, guards and finds of ``nest`` around ``statement``; ``hooks[k]``
    runs right after level k opens (``hooks[-1]`` before the first level); ``parallel`` maps
    a loop variable to its parallel annotation, ``team`` names the loop run by a team of
    threads that share an inner loop, ``simd`` a loop variable to its SIMD annotation,
    ``unroll`` the innermost loop specialized per trip count up to a number (``finds``:
    :class:`~spf.finds.base.FindLowering` objects; ``start``: the levels from this one)."""
    parallel, simd = parallel or {}, simd or {}
    level_notes = level_notes or {}
    by_level = {f.find.level: f for f in finds}
    key_guards: dict[int, list] = {k: [] for k in range(len(nest.levels))}
    for f in finds:
        for lvl, (call, e) in zip(f.find.key_levels, f.find.keys):
            key_guards[lvl].append((call, e))
    inits: dict[int, list] = {}
    for f in finds:
        if f.choice.stateful:
            inits.setdefault(f.choice.init_level, []).append(f)
    if -1 in hooks and not start:
        hooks[-1](b)
    for k, lv in enumerate(nest.levels):
        if k < start:
            continue
        for f in inits.get(k, []):
            b.add(*f.algorithm.init(f))
        note = level_notes.get(lv.var)
        if note and k not in by_level:
            b.add(t.Comment(note))
        if lv.kind is LevelKind.LOOP:
            if k in by_level:
                f = by_level[k]
                f.algorithm.open(f, b)
            elif unroll is not None and lv.var == unroll[0]:
                body = t.Builder()
                _level_body(body, k, lv, key_guards, names, hooks)
                lower_levels(body, nest, names, used, finds, statement, hooks, level_notes,
                             parallel, team, simd, None, k + 1)
                body.close_to(0)
                body.flush()
                b.add(*_unrolled(lv, names, unroll[1], body.root))
                return
            else:
                if lv.var == team:
                    b.nest(t.Team())
                _open_loop(b, lv, names, parallel.get(lv.var), simd.get(lv.var))
        elif lv.kind is LevelKind.ASSIGN and lv.var in used:
            b.add(t.Declare(names.index_ctype, lv.var, names.aff(lv.assigned), const=True))
        _level_body(b, k, lv, key_guards, names, hooks)
    if nest.statement_guards:
        b.nest(t.If(" && ".join(names.condition(g) for g in nest.statement_guards)))
    b.add(*statement)


def _level_body(b: t.Builder, k: int, lv, key_guards: dict[int, list], names: CNames,
                hooks: dict[int, Hook]) -> None:
    """What opens inside level ``k``: its guards (but a find's key tests), its hook."""
    guards = [g for g in lv.guards
              if not any(is_key_guard(g, call, e) for call, e in key_guards[k])]
    if guards:
        b.nest(t.If(" && ".join(names.condition(g) for g in guards)))
    if k in hooks:
        hooks[k](b)


def _unrolled(lv, names: CNames, count: int, body: list[t.Node]) -> list[t.Node]:
    """Loop ``lv`` around ``body`` as one fully unrolled copy per trip count from 1 to
    ``count`` (each copy sets the loop variable, in order: the same sums as the loop), the
    loop for longer runs."""
    first = loop_bound(names, lv.lower, upper=False)
    end = loop_bound(names, lv.upper, upper=True)
    ctype = names.index_ctype
    loop = t.For(f"{ctype} {lv.var} = spf_first", f"{lv.var} < spf_first + spf_count",
                 f"++{lv.var}", body)
    chain: t.Node = loop
    for n in range(count, 0, -1):
        copies: list[t.Node] = [t.Block([t.Declare(ctype, lv.var, f"spf_first + {c}",
                                                    const=True), *body]) for c in range(n)]
        chain = t.If(f"spf_count == {n}", copies, [chain])
    return [t.Block([
        t.Comment(f"{lv.var} unrolled for the trip counts 1 to {count} (unroll={count}): a "
                  "short row runs its copies without the loop's test and branch"),
        t.Declare(ctype, "spf_first", first, const=True),
        t.Declare(ctype, "spf_count", f"{end} - spf_first", const=True),
        chain])]


def _open_loop(b: t.Builder, lv, names: CNames, parallel: t.Parallel | None,
               simd: t.Simd | None) -> None:
    lo = loop_bound(names, lv.lower, upper=False)
    hi = loop_bound(names, lv.upper, upper=True)
    if names.bounds_once:
        lo, hi = _once(b, f"spf_lo_{lv.var}", lo), _once(b, f"spf_hi_{lv.var}", hi)
    b.nest(t.For(f"{names.index_ctype} {lv.var} = {lo}", f"{lv.var} < {hi}", f"++{lv.var}",
                 parallel=parallel, simd=simd))


def _once(b: t.Builder, var: str, bound: str) -> str:
    """``bound`` as a constant ``var`` computed before the loop (a number stays as it is)."""
    if bound.lstrip("-").isdigit():
        return bound
    b.add(t.Declare("int64_t", var, bound, const=True))
    return var


def is_key_guard(g: Constraint, call: UFCall, e: Aff) -> bool:
    """``g`` is the find condition ``call = e`` (its template tests it, not an ``if``)."""
    k = g.aff.coeff(call)
    return g.is_eq and abs(k) == 1 and (g.aff - Aff.var(call, k)) * -k == e


def tile_condition(nest: LoopNest, skip: TileSkip, names: CNames) -> str:
    """``first <= last && key(first) <= target && key(last) >= target`` (increasing keys)."""
    lv = nest.level(skip.var)
    first = loop_bound(names, lv.lower, upper=False)
    last = f"{loop_bound(names, lv.upper, upper=True)} - 1"

    def key_at(pos: str) -> str:
        return names.aff(Aff.var(skip.call).substitute({skip.var: Aff.var(pos)}))
    lo_op, hi_op = ("<=", ">=") if skip.compare == "<" else (">=", "<=")
    target = names.aff(skip.target)
    return (f"{first} <= {last} && {key_at(f'({first})')} {lo_op} {target} && "
            f"{key_at(f'({last})')} {hi_op} {target}")
