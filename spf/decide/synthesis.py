"""Find synthesis (paper Sec. 6.2-6.3, Appendix A): replace guard loops by find templates.

A *find* is a loop over positions ``p`` of one tensor whose index-array reads ``f(p)`` are
compared for equality with values ``e`` fixed by the enclosing loops (``x.idx(x_p) = j``).
Every find algorithm of :mod:`spf.finds` checks its own assumptions with Z3
(:mod:`spf.finds.checks`); this module detects the finds, asks each algorithm, and chooses:
a requested one, or Auto's (lowest complexity first, the run-time cost model between the
linear ones whose state restarts).  A query Z3 leaves undecided proves nothing: at worst the
guard loop stays.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..concurrency import symbolic
from ..errors import SynthesisError
from ..finds import NAMES as ALGORITHMS
from ..finds import REGISTRY
from ..finds.base import CostTerms, FindContext
from ..finds.checks import Checker, params_only
from ..finds.model import Choice, Decision, Find
from ..front.terms import Aff, Constraint, UFCall
from ..middle.iteration_space import IterationSpace, TensorUse
from ..middle.scan import LevelKind, LoopNest
from .smt import symbols_of as _symbols

__all__ = [
    "ALGORITHMS",
    "Choice",
    "CostModel",
    "Decision",
    "Find",
    "TileSkip",
    "cost_model",
    "decide",
    "detect_finds",
    "for_parallel",
    "synthesize",
    "tile_skips",
]


# ---------------------------------------------------------------------------------------
def detect_finds(nest: LoopNest) -> list[Find]:
    """Loops whose index-array reads are compared with values of the enclosing loops."""
    finds = []
    levels = nest.levels
    for k, lv in enumerate(levels):
        if lv.kind is not LevelKind.LOOP:
            continue
        outer = {v.var for v in levels[:k] if v.kind is not LevelKind.READ}
        use = _owner(nest.space, lv.var)
        if use is None:
            continue
        keys: list[tuple[UFCall, Aff]] = []
        key_levels = []
        for j in range(k + 1, len(levels)):
            rl = levels[j]
            if rl.kind is LevelKind.LOOP:
                break
            if rl.kind is not LevelKind.READ:
                continue
            for g in rl.guards:
                key = _key_of(g, rl.read_call, lv.var, outer)
                if key is not None:
                    keys.append(key)
                    key_levels.append(j)
        if not keys:
            continue
        if any(d != 1 for _, d in lv.lower + lv.upper):
            continue
        lows, highs = [a for a, _ in lv.lower], [a for a, _ in lv.upper]
        finds.append(Find(k, lv.var, use, keys, key_levels, lows[0], highs[0], lows, highs))
    return finds


def _owner(space: IterationSpace, var: str) -> TensorUse | None:
    for use in space.uses:
        if var in use.vars:
            return use
    return None


def _key_of(g: Constraint, call: UFCall, var: str, outer: set[str]) -> tuple[UFCall, Aff] | None:
    """``call = e`` with ``e`` over outer names only, if ``g`` says so."""
    if not g.is_eq or abs(g.aff.coeff(call)) != 1 or var not in Aff.var(call).names():
        return None
    k = g.aff.coeff(call)
    e = (g.aff - Aff.var(call, k)) * -k
    if not e.names() <= outer | _symbols(e) or var in e.names():
        return None
    for c in e.calls():
        if var in Aff.var(c).names():
            return None
    return call, e


def decide(nest: LoopNest, find: Find, requested: str) -> Decision:
    """Check every find algorithm for ``find`` and choose one (``requested`` may force it)."""
    if requested == "loop":     # the guard loop is always valid: nothing to prove
        return Decision(find, None, {"loop": Choice("loop")}, requested=requested)
    if not find.exact:
        why = ("the searched range has several bounds (a max/min, e.g. inside a tile); the "
               "templates take one of each")
        if requested != "auto":
            raise SynthesisError(f"find={requested!r} is not valid for the lookup of "
                                 f"{find.use.name} ({find.describe()}): {why}")
        return Decision(find, None, {"loop": Choice("loop")},
                        dict.fromkeys(REGISTRY, why), requested=requested)
    chk = Checker(nest, find)
    ctx = FindContext(nest, find, chk, chk.unique())
    valid: dict[str, Choice] = {}
    rejected: dict[str, str] = {}
    for name, algorithm in REGISTRY.items():
        result = algorithm.check(ctx)
        if isinstance(result, Choice):
            valid[name] = result
        else:
            rejected[name] = result
    valid["loop"] = Choice("loop")
    alternatives: list[Choice] = []
    if requested != "auto":
        if requested not in valid:
            raise SynthesisError(
                f"find={requested!r} is not valid for the lookup of {find.use.name} "
                f"({find.describe()}): {rejected.get(requested, 'not applicable')}")
        chosen = valid[requested]
    else:
        chosen, alternatives = _auto(nest, find, valid)
    return Decision(find, None if chosen.algorithm == "loop" else chosen, valid, rejected,
                    alternatives, requested)


def _auto(nest: LoopNest, find: Find, valid: dict[str, Choice]) -> tuple[Choice, list[Choice]]:
    """Lowest complexity first: a linear template (SeqIter, a map) > BinarySearch > guard
    loop.  A state reset before every search (it holds every enclosing loop index) makes a
    linear template O(L) per search: a stateless one (BinarySearch, O(log L)) beats it.  When
    the preferred template restarts its state and others are valid with computable costs, the
    generated code picks the cheapest from the operand sizes (see :func:`cost_model`), and
    so it does when the preferred one needs memory over the coordinate's extent (DenseMap);
    when costs are not computable, a template built once, of a size independent of the
    extent, beats those."""
    choices = [c for n, c in valid.items() if n != "loop"]
    if any(REGISTRY[c.algorithm].stateless for c in choices):
        choices = [c for c in choices if not (c.stateful and _per_search(find, c))]
    if not choices:
        return valid["loop"], []
    first, rest = choices[0], choices[1:]
    linear = [c for c in rest if c.stateful]
    if first.stateful and linear and (first.state or REGISTRY[first.algorithm].sized):
        if cost_model(nest, find, [first] + linear) is not None:
            return first, linear
        once = next((c for c in [first] + linear
                     if not c.state and not REGISTRY[c.algorithm].sized), None)
        if once is not None:
            return once, []
    return first, []


def _per_search(find: Find, choice: Choice) -> bool:
    """The state of ``choice`` is re-initialised before every search."""
    return choice.init_level is None or choice.init_level >= find.level


@dataclass
class CostModel:
    """Operand-size terms of Auto's run-time choice between linear templates.

    cost(T) = a_T * W + b_T * R_T * L, where W is the number of searches (the stored entries
    of the tensor iterated by the enclosing loop), L the length of the searched range and
    R_T how often T's state is (re)initialised (products of loop trip counts and array-state
    extents), plus a fixed term (DenseMap: the map's size); a_T and b_T come from each
    algorithm (:meth:`~spf.finds.base.FindAlgorithm.cost`).  In units of
    a quarter SeqIter step: SeqIter 4 * W + R * L (a restarted scan stops, on average, a
    quarter of the way through the range), HashMap 12 * W + 4 * R * L (a probe costs about
    three steps, an insertion one).  Calibrated on experiments/spmspv.py."""

    searches: TensorUse
    length: Aff
    terms: dict[str, CostTerms]      # per algorithm


def cost_model(nest: LoopNest, find: Find, choices: list[Choice]) -> CostModel | None:
    """The cost terms of ``choices`` when all are computable from scalar fields at entry."""
    if not (params_only(find.lo) and params_only(find.hi)):
        return None
    terms = {}
    for c in choices:
        cost = REGISTRY[c.algorithm].cost(nest, find, c)
        if cost is None:
            return None
        terms[c.algorithm] = cost
    loops = [lv for lv in nest.levels[:find.level] if lv.kind is LevelKind.LOOP]
    owner = _owner(nest.space, loops[-1].var) if loops else None
    if owner is None:
        return None
    return CostModel(owner, find.hi - find.lo + 1, terms)


@symbolic
def synthesize(nest: LoopNest, find_option: str | Mapping[str, str]) -> list[Decision]:
    """Decisions for every find of ``nest``; ``find_option`` is a name or per-tensor names."""
    decisions = []
    for f in detect_finds(nest):
        if isinstance(find_option, Mapping):
            requested = find_option.get(f.use.name, "auto")
        else:
            requested = find_option
        decisions.append(decide(nest, f, requested))
    return decisions


def for_parallel(nest: LoopNest, decisions: Sequence[Decision], par_var: str
                 ) -> list[Decision]:
    """Adapt find choices to a parallel loop ``par_var``: a state initialised inside the
    parallel loop is private to the thread (SeqIter re-initialised per iteration); a map
    built before it is only read; a state shared across iterations is not allowed, so such a
    choice is replaced by the best choice that needs no shared mutable state."""
    par = next(k for k, lv in enumerate(nest.levels) if lv.var == par_var)
    out = []
    for d in decisions:
        chosen = d.chosen
        if chosen is not None and d.requested != "auto":     # forced: keep it if possible
            kept = _private(nest, d, chosen, par)
            if kept is None:
                raise SynthesisError(
                    f"find={d.requested!r} for {d.find.use.name} cannot run inside the "
                    f"parallel loop {par_var}: its state would be shared by the iterations "
                    "(use find='auto' or parallel=False)")
            out.append(Decision(d.find, kept, d.valid, d.rejected, [], d.requested))
            continue
        if chosen is not None and _private(nest, d, chosen, par) is not chosen:
            # the choice needs a change (a reset per parallel iteration, or is impossible):
            # prefer a template that works as it is, then one re-initialised per iteration
            candidates = sorted((c for n, c in d.valid.items() if n != "loop"),
                                key=lambda c: REGISTRY[c.algorithm].parallel_rank)
            usable = [c for c in candidates if _private(nest, d, c, par) is c]
            chosen = usable[0] if usable else next(
                (p for p in (_private(nest, d, c, par) for c in candidates) if p), None)
        alts = [p for p in (_private(nest, d, a, par) for a in d.alternatives) if p]
        if chosen is None or d.chosen is None or chosen.algorithm != d.chosen.algorithm:
            alts = []       # the run-time choice is between the original candidates
        out.append(Decision(d.find, chosen, d.valid, d.rejected, alts, d.requested))
    return out


def _private(nest: LoopNest, d: Decision, c: Choice, par: int) -> Choice | None:
    if c.algorithm == "loop":
        return c
    return REGISTRY[c.algorithm].private(nest, d, c, par)


@dataclass(frozen=True)
class TileSkip:
    """Tile skipping (paper Fig. 8) for a tile loop: the tiled loop is a guard loop searching
    ``call = target`` and Z3 proves the keys sorted (``compare``) over its range, so a tile
    runs only if its first and last keys bracket the target."""

    var: str            # the tiled position loop
    call: UFCall
    target: Aff
    compare: str        # "<": increasing keys, ">": decreasing


def tile_skips(nest: LoopNest, decisions: Sequence[Decision], tile_var: str
               ) -> list[TileSkip]:
    """The tile-skipping conditions that apply to the tile loop ``tile_var``."""
    var, _ = nest.space.tiles[tile_var]
    order = [lv.var for lv in nest.levels]
    out = []
    for d in decisions:
        f = d.find
        if f.var != var or d.chosen is not None or len(f.keys) != 1:
            continue
        call, e = f.keys[0]
        defined = set(order[:order.index(tile_var)])
        if not e.names() <= defined | {n for n in e.names() if "." in n}:
            continue
        chk = Checker(nest, f)
        compare = next((c for c in ("<", ">") if chk.sorted(c)[0]), None)
        if compare is not None:
            out.append(TileSkip(var, call, e, compare))
    return out
