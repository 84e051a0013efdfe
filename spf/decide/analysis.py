"""Dependence analysis on the scanned nest (paper Sec. 5): which loops carry dependences,
which loop runs in parallel, and whether a tiling keeps every dependence in order.

The dependences of a tensor kernel are those of its output: two statement instances that
write the same output element (``y(i) += ...``; reads of inputs never conflict).  They are
derived from the logical access and expressed in the layout indices of the generated loops.
Loop ``v`` carries a dependence when two such instances agree on the loops outside ``v`` and
differ in ``v``.  isl decides the affine part (UF reads as free variables); when isl cannot
rule a dependence out, Z3 decides it with the layouts' properties instantiated, and its
unsat core names the properties that disproved it (DCSR: ``rowIdx`` strictly increasing).
A query Z3 leaves undecided (its time limit) disproves nothing: the loop carries the
dependence and a tiling is not legal.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import z3

from ..front.isl_bridge import isl_limit
from ..front.relation import Relation
from ..front.terms import Aff, Constraint
from ..middle.scan import Level, LevelKind, LoopNest
from .smt import InstanceEncoder, Verdict


@dataclass(frozen=True)
class LoopReport:
    """What one loop of the nest carries and whether it runs in parallel."""

    var: str
    carried: bool
    dependence: str                 # the carried dependence relation, SPF syntax ("" if none)
    disproved_by: tuple[str, ...]   # "isl (affine constraints)" or the properties Z3 used
    parallel: bool = False
    reduction: bool = False    # carried dependences only through a scalar accumulator
    private_output: bool = False   # parallel with a private copy of the output per thread
    why: str = ""


@dataclass(frozen=True)
class TileReport:
    """A tile loop and its tile-skipping conditions (paper Fig. 8), as C."""

    var: str
    size: int
    tile_var: str
    guards: tuple[str, ...] = ()


@dataclass(frozen=True)
class Analysis:
    """Result of :func:`analyze`; ``to_json()`` is the stable machine-readable form."""

    kernel: str
    output: str
    loops: tuple[LoopReport, ...]
    parallel_loop: str | None
    parallel_reason: str
    tiles: tuple[TileReport, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The analysis as JSON's types (sequences as lists)."""
        return {"version": 1, **_as_lists(asdict(self))}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def __str__(self) -> str:
        lines = [f"kernel: {self.kernel}", f"writes: {self.output}"]
        for lp in self.loops:
            state = "carries a dependence" if lp.carried else "carries no dependence"
            lines.append(f"loop {lp.var}: {state}"
                         + (" (parallel)" if lp.parallel else ""))
            if lp.carried:
                lines.append(f"  dependence: {lp.dependence}")
            elif lp.disproved_by:
                lines.append(f"  disproved by: {'; '.join(lp.disproved_by)}")
            if lp.why:
                lines.append(f"  {lp.why}")
        lines.append(f"parallel: {self.parallel_loop or 'none'} — {self.parallel_reason}")
        for t in self.tiles:
            lines.append(f"tile {t.var} by {t.size} (tile loop {t.tile_var})")
            for g in t.guards:
                lines.append(f"  tile-skipping guard: {g}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _as_lists(value: Any) -> Any:
    """``value`` with every tuple inside it a list (JSON's arrays)."""
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_lists(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------
class _Dependences:
    """Both instances of the whole nest, writing the same output element."""

    def __init__(self, nest: LoopNest):
        self.nest = nest
        self.enc = InstanceEncoder(nest, len(nest.levels))
        self.loops = [lv.var for lv in nest.levels if lv.kind is LevelKind.LOOP]
        out = nest.space.expr.output
        self.out_indices = list(out.indices)

    def same_element(self) -> list[z3.BoolRef]:
        e = self.enc
        return [e.var(i, 1) == e.var(i, 2) for i in self.out_indices]

    def carried_at(self, k: int) -> Verdict:
        """Unsat (with the properties used) when loop ``loops[k]`` carries no dependence."""
        e = self.enc
        e.terms = []
        parts = e.context(1) + e.context(2) + self.same_element()
        parts += [e.var(v, 1) == e.var(v, 2) for v in self.loops[:k]]
        parts.append(e.var(self.loops[k], 1) < e.var(self.loops[k], 2))
        var = self.loops[k]
        return e.prove_empty(parts, f"whether loop {var} carries a dependence",
                             f"assumed carried: loop {var} is not parallel")

    def relation(self, k: int) -> Relation:
        """The dependence carried by loop k as an SPF relation over the loop indices."""
        nest = self.nest
        defs = {lv.var: lv.assigned for lv in nest.levels if lv.kind is LevelKind.ASSIGN}
        cons: list[Constraint] = []
        for lv in nest.levels:
            if lv.kind is LevelKind.ASSIGN:
                continue
            cons.extend(lv.bound_constraints() + lv.guards)
        cons.extend(nest.statement_guards)

        def resolve(c: Constraint) -> Constraint:
            for _ in range(len(defs) + 1):
                c = c.substitute(dict(defs.items()))
            return c

        base = [resolve(c) for c in cons]
        primed = {v: f"{v}'" for v in self.loops}
        second = [c.substitute({v: Aff.var(p) for v, p in primed.items()}) for c in base]
        link = []
        for i in self.out_indices:
            a = resolve(Constraint.eq(Aff.var(i), Aff.num(0))).aff
            link.append(Constraint.eq(a, a.substitute({v: Aff.var(p) for v, p in primed.items()})))
        order = [Constraint.eq(Aff.var(v), Aff.var(primed[v])) for v in self.loops[:k]]
        order.append(Constraint.ge(Aff.var(primed[self.loops[k]]), Aff.var(self.loops[k]) + 1))
        rel = Relation(self.loops, [primed[v] for v in self.loops], [base + second + link + order])
        try:
            return rel.simplify()
        except Exception:  # isl cannot simplify every formula with divisions: print it as is
            return rel


def rows_owned(nest: LoopNest, coords: list[str]) -> Verdict:
    """Unsat (with the properties used) when no two iterations of the outermost loop write
    an output element with the same ``coords`` (a row of an assembled output): each
    iteration's rows are its own."""
    deps = _Dependences(nest)
    deps.out_indices = list(coords)
    return deps.carried_at(0)


def analyze(nest: LoopNest, parallel: bool = False, finds: bool = False,
            private_ok: bool = False) -> Analysis:
    """Dependences carried by each loop and the parallel loop: the outermost one carrying no
    dependence (an inner one is shared out among threads that all run the loops outside it,
    unless its instances are short, a pointer-array segment or a constant trip count, or the
    nest has ``finds``, whose state the threads running the outer loops would share); with
    ``private_ok`` (a dense output, no finds), an outermost loop that scatters into the output
    runs in parallel with a private copy of the output per thread."""
    expr = nest.space.expr
    deps = _Dependences(nest)
    output = str(expr.output) + (" (accumulated with +=)" if expr.accumulate else
                                 " (a sum over the reduction indices)")
    found = [_loop_report(deps, k) for k in range(len(deps.loops))]
    loops, chosen, reason = _choose_parallel(nest, found, parallel, private_ok)
    analysis = Analysis(str(expr), output, tuple(loops), chosen, reason)
    if chosen is not None and chosen != loops[0].var and finds:
        return _keep_serial_for_finds(analysis, expr.output.tensor)
    return analysis


def _loop_report(deps: _Dependences, k: int) -> LoopReport:
    """Whether loop ``deps.loops[k]`` carries a dependence: isl on the affine relation first,
    then Z3 with the layouts' properties."""
    expr, var = deps.nest.space.expr, deps.loops[k]
    if not deps.out_indices:
        return LoopReport(var, True, f"every instance updates the scalar {expr.output.tensor}",
                          (), reduction=True)
    with isl_limit(f"deciding whether loop {var} of {expr} carries a dependence", expr.source):
        rel = deps.relation(k)
        empty = rel.is_empty()
    if empty:
        return LoopReport(var, False, "", ("isl (affine constraints)",))
    verdict = deps.carried_at(k)
    if verdict.result == "unsat":
        return LoopReport(var, False, "", tuple(verdict.used or ["Z3 (affine and UF terms)"]))
    why = "" if verdict.result == "sat" else \
        f"{verdict.why}: assumed to carry it (the safe choice)"
    return LoopReport(var, True, str(rel), (), why=why)


def _keep_serial_for_finds(ana: Analysis, out: str) -> Analysis:
    """An inner parallel loop under finds: their states outside it would be shared by the
    threads running the outer loops, so nothing is parallel."""
    first, *rest = (replace(lp, parallel=False) for lp in ana.loops)
    first = replace(first, why=("not parallelized: iterations scatter into the shared "
                                f"output {out} (privatization and atomics are not used)"))
    note = (f"not parallelized: loop {ana.parallel_loop} carries no dependence, but it is an "
            "inner loop and the nest has finds, whose state the threads running the outer "
            "loops would share")
    reason = (f"the outermost loop {first.var} carries a dependence on {out}; the inner free "
              f"loop {ana.parallel_loop} is not shared out because the nest has finds")
    return replace(ana, loops=(first, *rest), notes=(*ana.notes, note), parallel_reason=reason,
                   parallel_loop=None)


@dataclass(frozen=True)
class VectorLoop:
    """The innermost loop, run as SIMD lanes (``#pragma omp simd``): it carries no dependence
    (``reduction`` False), or (``reassociate=True``) only the sum into one output element,
    which lowering keeps in an accumulator (``reduction``: ``simd reduction(+:...)``)."""

    var: str
    reduction: bool
    why: str
    lanes: bool = True      # False: the loop could run as lanes but does not (``why``)


def scatter_store(nest: LoopNest, level: int) -> str | None:
    """Why the loop at ``level`` stores through an index array (a scatter: the output's
    position inside it comes from an index-array read inside it), or None.  Such a loop is
    left scalar: as SIMD lanes gcc emits gather/scatter instructions, measured slower than
    the scalar loop on the suite's largest matrices (push SpMSpV with A in CSC: 1.0-1.26x the
    scalar time; CSC SpMV: 0.91-1.33x, geomean 1.09x)."""
    out = nest.space.expr.output
    if not out.indices:
        return None
    out_vars = set(nest.space.use(out.tensor).vars)
    indirect: dict[str, str] = {}      # variable -> the index array it comes from
    for lv in nest.levels[level + 1:]:
        if lv.kind is LevelKind.ASSIGN:
            source = next((c.name for c in sorted(lv.assigned.calls(), key=str)), None) or next(
                (indirect[n] for n in sorted(lv.assigned.names()) if n in indirect), None)
            if source is not None:
                indirect[lv.var] = source
    hit = sorted(out_vars & indirect.keys())
    if not hit:
        return None
    return (f"it scatters into {out.tensor} through {indirect[hit[0]]} (as SIMD lanes that is "
            "gather/scatter instructions, measured slower than the scalar loop)")


def vector_loop(nest: LoopNest, find_levels: list[int], reassociate: bool,
                known: LoopReport | None = None) -> VectorLoop | None:
    """The innermost loop of ``nest`` when its iterations can run as SIMD lanes; never when a
    find (``find_levels``) runs at or inside it: its state and branches run in order.
    ``known``: that loop's report from an analysis already made (its queries are not
    repeated)."""
    deps = _Dependences(nest)
    if not deps.loops:
        return None
    var = deps.loops[-1]
    level = [lv.var for lv in nest.levels].index(var)
    if any(f >= level for f in find_levels):
        return None
    report = known if known is not None else _loop_report(deps, len(deps.loops) - 1)
    if not report.carried:
        scatter = scatter_store(nest, level)
        if scatter:
            return VectorLoop(var, False, f"not used on loop {var}, which carries no "
                                          f"dependence: {scatter}", lanes=False)
        return VectorLoop(var, False, f"loop {var} carries no dependence "
                                      f"({'; '.join(report.disproved_by)})")
    if not reassociate:
        return None
    out = nest.space.expr.output
    out_vars = set(nest.space.use(out.tensor).vars) if out.indices else set()
    if any(lv.var in out_vars for lv in nest.levels[level + 1:]):
        return None
    return VectorLoop(var, True, f"loop {var} only sums into one element of {out.tensor} "
                                 "(reassociate=True: partial sums per lane)")


def _choose_parallel(nest: LoopNest, found: list[LoopReport], wanted: bool,
                     private_ok: bool = False) -> tuple[list[LoopReport], str | None, str]:
    """The loop reports with the parallel loop marked and explained, that loop (None: none)
    and the reason."""
    if not found:
        return found, None, "the nest has no loop"
    loops = list(found)
    outer, out = loops[0], nest.space.expr.output.tensor
    off = "" if wanted else "; parallel=False"
    if not outer.carried:
        loops[0] = replace(outer, parallel=wanted)
        return loops, (outer.var if wanted else None), (
            f"loop {outer.var} carries no dependence ({'; '.join(outer.disproved_by)}){off}")
    if outer.reduction:
        loops[0] = replace(outer, parallel=wanted, why="a scalar reduction: each thread "
                           "accumulates privately (reduction(+:...))")
        return loops, (outer.var if wanted else None), (
            f"loop {outer.var} carries only the reduction into the scalar {out}{off}")
    k, inner = next(((k, lp) for k, lp in enumerate(loops) if k and not lp.carried),
                    (0, None))
    short = (_short(nest.level(inner.var)) or _per_entry(nest, inner.var)) \
        if inner is not None else ""
    if (inner is None or short) and wanted and private_ok:
        loops[0], reason = _privatize(out, outer, inner, short)
        return loops, outer.var, reason
    carried = f"the outermost loop {outer.var} carries a dependence on {out}"
    if short and inner is not None:
        loops[0] = _explained(outer, f"not parallelized: iterations scatter into the shared "
                              f"output {out}; loop {inner.var} carries no dependence but "
                              f"{short}, too short to share out among threads")
        return loops, None, carried
    if inner is not None:
        # the loops outside it carry the dependence: every thread runs them, and the
        # iterations of this loop are shared out (a barrier ends each of its instances)
        loops[k] = replace(inner, parallel=wanted)
        if wanted:
            loops[0] = _explained(outer, f"runs in every thread of the parallel region; loop "
                                  f"{inner.var} inside it is shared out")
        return loops, (inner.var if wanted else None), (
            f"the outer loop {outer.var} carries a dependence on {out}; loop {inner.var} "
            f"carries none ({'; '.join(inner.disproved_by)}), so its iterations are shared "
            f"out among the threads, which all run the loops outside it{off}")
    loops[0] = _explained(outer, "not parallelized: iterations scatter into the shared output "
                          f"{out} (privatization and atomics are not used)")
    return loops, None, carried


def _privatize(out: str, outer: LoopReport, inner: LoopReport | None,
               short: str) -> tuple[LoopReport, str]:
    """The scatter loop ``outer`` in parallel: each thread adds into its own zeroed copy of
    the output ``out``, and the copies are summed into the output after the loop."""
    loop = _explained(replace(outer, parallel=True, private_output=True),
                      f"a scatter into {out}: each thread sums into a private copy of {out}, "
                      f"the copies are added into {out} after the loop (one copy of {out} per "
                      "thread; the rounding may differ from the serial kernel)")
    also = f"; loop {inner.var} carries none but {short}" if inner is not None else ""
    return loop, (f"the outermost loop {outer.var} carries a dependence only through the "
                  f"output {out}{also}: it runs in parallel with a private copy of {out} "
                  "per thread, added into it at the end")


def _explained(loop: LoopReport, text: str) -> LoopReport:
    """``loop`` with ``text`` added to what the analysis says about it (after a Z3 time-out,
    say)."""
    return replace(loop, why=f"{loop.why}; {text}" if loop.why else text)


def _per_entry(nest: LoopNest, var: str) -> str:
    """Why sharing out loop ``var`` would cost a barrier per stored entry ("" if it would
    not): a loop outside it runs over a segment of an index array (the entries of a row)."""
    for lv in nest.levels[:[lv.var for lv in nest.levels].index(var)]:
        if lv.kind is LevelKind.LOOP and any(a.calls() for a, _ in lv.lower + lv.upper):
            return (f"runs once per stored entry of loop {lv.var} outside it (sharing it out "
                    "would cost a barrier per entry)")
    return ""


def _short(level: Level) -> str:
    """Why the instances of a loop are short ("" if they are not): a segment
    ``f(a) <= v < f(b)`` of one index array (the entries of one row or fibre), or bounds a
    constant apart (a block's offsets, the tiles a coordinate falls in)."""
    lower = {c.name: c.args for aff, _ in level.lower for c in aff.calls()}
    upper = {c.name: c.args for aff, _ in level.upper for c in aff.calls()}
    if any(name in upper and upper[name] != args for name, args in lower.items()):
        return "runs over one segment of a pointer array, a few entries per instance"
    for lo, dl in level.lower:
        for hi, du in level.upper:
            if (hi * dl - lo * du).is_const:
                return "has a constant trip count"
    return ""


def tiling_legal(nest: LoopNest, original: list[str]) -> tuple[bool, str]:
    """Whether the tiled nest keeps every dependence in order: no two instances writing the
    same element run in the opposite order to ``original`` (the untiled loop order)."""
    deps = _Dependences(nest)
    e = deps.enc
    e.terms = []
    new = list(deps.loops)

    def before(order: list[str], a: int, b: int) -> z3.BoolRef:
        cases = []
        for n, v in enumerate(order):
            cases.append(z3.And(*[e.var(u, a) == e.var(u, b) for u in order[:n]],
                                e.var(v, a) < e.var(v, b)))
        return z3.Or(*cases) if cases else z3.BoolVal(False)

    parts = e.context(1) + e.context(2) + deps.same_element()
    parts += [before(original, 1, 2), before(new, 2, 1)]
    verdict = e.prove_empty(parts, f"the legality of the loop order {', '.join(new)}",
                            "assumed illegal: the tiling is refused")
    if verdict.result == "unsat":
        return True, ""
    return False, ("the new loop order runs two instances that update the same element of "
                   f"{nest.space.expr.output} in the opposite order"
                   + ("" if verdict.result == "sat" else f" (assumed: {verdict.why})"))
