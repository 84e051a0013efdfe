"""The plan of one product kernel: every decision, made once, as data.

:func:`make_plan` scans the iteration space in the loop order, asks synthesis for the finds,
plans the assembly of a sparse output, chooses the parallel loop (analysis) and adapts the
finds to it, and works out the tile-skipping conditions.  The report prints the plan;
lowering (:mod:`spf.back.lower`) consumes it and decides nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..assembly import AssemblyPlan, Mode, plan_assembly
from ..concurrency import symbolic
from ..errors import SpecError, SynthesisError
from ..front.semiring import PLUS_TIMES, Semiring
from ..front.terms import Aff
from ..middle.iteration_space import IterationSpace
from ..middle.order import inner_extents_stored_counts, output_order
from ..middle.scan import LevelKind, LoopNest, scan
from ..middle.z3limit import Z3Limit
from .analysis import Analysis, VectorLoop, analyze, tiling_legal, vector_loop
from .synthesis import Decision, TileSkip, for_parallel, synthesize, tile_skips


@dataclass
class Plan:
    """Loop order (``nest``), finds with their proofs (``decisions``), the parallel loop and
    its reason (``analysis``), tiling (``skips`` per tile loop) and the output's assembly."""

    nest: LoopNest
    decisions: list[Decision]
    assembly: AssemblyPlan | None
    parallel_wanted: bool
    parallel_loop: str | None = None
    skips: dict[str, list[TileSkip]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)      # what planning changed, and why
    vector: VectorLoop | None = None     # the innermost loop run as SIMD lanes
    no_simd: str = ""                    # why a dependence-free innermost loop stays scalar
    privatized: bool = False             # the parallel loop sums into per-thread copies
    counting: Plan | None = None       # the nest counting the output's entries, if another
    order_why: str = ""                  # why planning changed the default loop order
    semiring: Semiring = PLUS_TIMES      # the statement's add and mul
    _analysis: Analysis | None = None

    @property
    def count_plan(self) -> Plan:
        """The plan whose loops count the statement instances (``<name>_bound``): the
        default order's when the loops were reordered for the output (any order counts)."""
        return self.counting or self

    @property
    def space(self) -> IterationSpace:
        return self.nest.space

    def guard_notes(self) -> dict[str, str]:
        """The comment on each find that stays a guard loop."""
        return {d.find.var: "guard loop: scans every position and tests it (no find "
                            "template applies; see kernel.report())"
                for d in self.decisions if d.chosen is None}

    def analysis(self) -> Analysis:
        """Dependences, the parallel loop with its reason, tiling and the notes (computed on
        first use when no parallel loop was asked for: it costs Z3 queries)."""
        if self._analysis is None:
            out = self.space.expr.output
            self._analysis = analyze(self.nest, self.parallel_wanted and self.assembly is None,
                                     finds=bool(self.decisions),
                                     private_ok=not self.decisions and bool(out.indices))
        return self._analysis


@symbolic
def make_plan(space: IterationSpace, order: list[str], find, *, parallel: bool,
              assemble: bool, drop_zeros: bool, z3_timeout_ms: int,
              tile: dict[str, int], reassociate: bool = False, reorder: bool = False,
              semiring: Semiring = PLUS_TIMES) -> Plan:
    """Every decision for the product kernel over ``space`` (see the module docstring).
    ``reorder``: ``order`` is the default one, which an assembled output may change
    (:func:`_output_ordered`)."""
    nest = scan(space, order)
    nest.z3 = Z3Limit(z3_timeout_ms)
    _check_tiling(nest, tile)
    decisions = synthesize(nest, find)
    assembly = None
    if assemble:
        assembly = replace(plan_assembly(nest, space.assembled, decisions),
                           drop_zeros=drop_zeros, semiring=semiring)
    elif drop_zeros:
        raise SpecError("drop_zeros applies to an output assembled by the kernel (a sparse "
                        "layout without share=); this output is dense or shared",
                        space.expr.source)
    plan = Plan(nest, decisions, assembly, parallel, semiring=semiring)
    if assembly is not None and reorder and not tile and assembly.mode is not Mode.APPEND:
        plan = _output_ordered(plan, order, find, z3_timeout_ms) or plan
    if parallel and not assemble:
        plan.parallel_loop = plan.analysis().parallel_loop
        plan.privatized = any(lp.private_output for lp in plan.analysis().loops)
        _unordered_reduction(plan)
        if plan.parallel_loop is not None:
            _adapt_finds_to_parallel(plan)
    plan.skips = {t: tile_skips(nest, plan.decisions, t) for t in space.tiles}
    if assembly is None:
        known = plan._analysis.loops[-1] if plan._analysis and plan._analysis.loops else None
        if reassociate and semiring.omp is None:
            plan.notes.append(f"reassociate=True ignored: {semiring.name}'s add has no OpenMP "
                              "reduction operator")
            reassociate = False
        vector = vector_loop(nest, [d.find.level for d in plan.decisions], reassociate, known)
        if vector is not None and not vector.lanes:
            plan.no_simd = vector.why
        elif vector is not None and vector.var != plan.parallel_loop:
            plan.vector = vector
    return plan


def _unordered_reduction(plan: Plan) -> None:
    """A parallel loop that reorders a reduction (per-thread copies of the output, or a
    scalar accumulator) stays serial when the semiring's add is not associative and
    commutative; the analysis then says so."""
    sr, analysis = plan.semiring, plan.analysis()
    loop = next((lp for lp in analysis.loops if lp.var == plan.parallel_loop), None)
    if loop is None or not (loop.reduction or loop.private_output) \
            or (sr.reorderable and (sr.omp or not loop.reduction)):
        return
    why = (f"loop {loop.var} is not run in parallel: its iterations reduce into the output "
           f"with {sr.name}'s add ({sr.add}), " + (
               "which is not proven associative and commutative" if not sr.reorderable else
               "which has no OpenMP reduction operator"))
    plan.notes.append(why)
    loop.parallel = loop.private_output = False
    loop.why = why
    analysis.parallel_loop, analysis.parallel_reason = None, why
    plan.parallel_loop, plan.privatized = None, False


def _output_ordered(plan: Plan, order: list[str], find, z3_timeout_ms: int) -> Plan | None:
    """The plan over :func:`output_order`'s loops when Z3 proves they append the output in
    storage order and the loops moved inside run over counts of stored parts (not over a
    dimension); the original loops still count the entries (``counting``)."""
    space, a = plan.space, plan.assembly
    other = output_order(space, order, a.key)
    if other is None:
        return None
    new_order, moved, why = other
    nest = scan(space, new_order)
    nest.z3 = Z3Limit(z3_timeout_ms)
    inside = inner_extents_stored_counts(nest, moved)
    if inside is None:
        return None
    decisions = synthesize(nest, find)
    assembly = plan_assembly(nest, space.assembled, decisions)
    if assembly.mode is not Mode.APPEND:
        return None
    assembly = replace(assembly, drop_zeros=a.drop_zeros, semiring=a.semiring)
    return Plan(nest, decisions, assembly, plan.parallel_wanted, counting=plan,
                semiring=plan.semiring, order_why=(
        f"{why}, and Z3 proved they do (no {a.mode} pass); {inside}; the bound pass counts "
        f"the entries in the order {', '.join(plan.nest.schedule)}"))


def _adapt_finds_to_parallel(plan: Plan) -> None:
    """Find states private to the threads (:func:`for_parallel`); notes say what changed."""
    serial = plan.decisions
    plan.decisions = for_parallel(plan.nest, serial, plan.parallel_loop)
    for before, after in zip(serial, plan.decisions):
        old = before.chosen.describe() if before.chosen else "guard loop"
        new = after.chosen.describe() if after.chosen else "guard loop"
        if old != new:
            plan.notes.append(f"find of {after.find.use.name} ({after.find.var}): {old} became "
                              f"{new} so that no find state is shared by parallel iterations")


def _check_tiling(nest: LoopNest, tile: dict[str, int]) -> None:
    """Tiled variables must be loops, and the tiled order legal (paper Sec. 5)."""
    if not tile:
        return
    for var, size in tile.items():
        lv = nest.level(var)
        if size == 1 and lv.kind is LevelKind.ASSIGN and lv.expr == Aff.var(f"{var}_tile"):
            continue        # tiles of one: the tile loop runs the loop's values itself
        if lv.kind is not LevelKind.LOOP:
            raise SpecError(f"cannot tile {var}: it is not a loop (the iteration space "
                            f"defines it as {lv.expr})", nest.space.expr.source)
    original = [lv.var for lv in nest.levels
                if lv.kind is LevelKind.LOOP and lv.var not in nest.space.tiles]
    ok, why = tiling_legal(nest, original)
    if not ok:
        raise SynthesisError(f"tiling {tile} with loop order {', '.join(nest.schedule)} is not "
                             f"legal: {why}")
