"""The plan of one product kernel: every decision, made once, as data.

:func:`make_plan` scans the iteration space in the loop order, asks synthesis for the finds,
plans the assembly of a sparse output, chooses the parallel loop (analysis) and adapts the
finds to it, and works out the tile-skipping conditions.  The report prints the plan;
lowering (:mod:`spf.back.lower`) consumes it and decides nothing.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..assembly import AssemblyPlan, Mode, for_stream, plan_assembly, strategy
from ..assembly.rows import row_shaped
from ..concurrency import symbolic
from ..errors import SpecError, SynthesisError
from ..front.semiring import PLUS_TIMES, Semiring
from ..front.terms import Aff
from ..front.value_types import FLOAT64_TYPING, Typing
from ..middle.iteration_space import IterationSpace, TensorUse
from ..middle.order import inner_extents_stored_counts, output_order
from ..middle.scan import LevelKind, LoopNest, scan
from ..middle.z3limit import Z3Limit
from .analysis import Analysis, VectorLoop, analyze, rows_owned, tiling_legal, vector_loop
from .options import Table
from .synthesis import Decision, TileSkip, for_parallel, synthesize, tile_skips

_NO_SKIPS: Mapping[str, tuple[TileSkip, ...]] = Table({})


@dataclass(frozen=True)
class Plan:
    """Loop order (``nest``), finds with their proofs (``decisions``), the parallel loop and
    its reason (``analysis``), tiling (``skips`` per tile loop) and the output's assembly."""

    nest: LoopNest
    decisions: tuple[Decision, ...]
    assembly: AssemblyPlan | None
    parallel_wanted: bool
    parallel_loop: str | None = None
    skips: Mapping[str, tuple[TileSkip, ...]] = _NO_SKIPS
    notes: tuple[str, ...] = ()          # what planning changed, and why
    vector: VectorLoop | None = None     # the innermost loop run as SIMD lanes
    no_simd: str = ""                    # why a dependence-free innermost loop stays scalar
    privatized: bool = False             # the parallel loop sums into per-thread copies
    counting: Plan | None = None         # the nest counting the output's entries, if another
    order_why: str = ""                  # why planning changed the default loop order
    semiring: Semiring = PLUS_TIMES      # the statement's add and mul
    planned: Analysis | None = None      # the analysis planning made (a parallel loop asked)
    typing: Typing = FLOAT64_TYPING      # the value types of the tensors, output and sums
    serial_assembly: str = ""            # why parallel=True builds the output on one thread
    unrolled: tuple[str, int] | None = None  # the innermost loop specialized per trip count

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

    def guard_loop_warnings(self) -> list[str]:
        """Why each lookup spf was free to replace stays a guard loop (no template valid)."""
        out = []
        for d in self.decisions:
            if d.chosen is not None or d.requested == "loop":
                continue
            outside = [lv.var for lv in self.nest.levels[:d.find.level]
                       if lv.kind is LevelKind.LOOP]
            why = "; ".join(f"{name}: {text.split(chr(10))[0].split('; ')[0]}"
                            for name, text in d.rejected.items())
            out.append(f"the lookup of {d.find.use.name} at {d.find.describe()} stays a guard "
                       f"loop, scanning every position of {d.find.use.name} "
                       + (f"for each iteration of {', '.join(outside)}" if outside
                          else "once")
                       + f": no find template is valid ({why})")
        return out

    def analysis(self) -> Analysis:
        """Dependences, the parallel loop with its reason, tiling and the notes: the analysis
        planning made, else a new one (Z3 queries: its owner keeps it)."""
        if self.planned is not None:
            return self.planned
        out = self.space.expr.output
        return analyze(self.nest, self.parallel_wanted and self.assembly is None,
                       finds=bool(self.decisions),
                       private_ok=not self.decisions and bool(out.indices))


@symbolic
def make_plan(space: IterationSpace, order: list[str], find, *, parallel: bool,
              drop_zeros: bool, z3_timeout_ms: int,
              tile: Mapping[str, int], reassociate: bool = False, reorder: bool = False,
              semiring: Semiring = PLUS_TIMES, stream: bool = False,
              typing: Typing = FLOAT64_TYPING, unroll: int = 0) -> Plan:
    """Every decision for the product kernel over ``space`` (see the module docstring).
    The output is assembled when ``space`` has it as ``assembled``; ``reorder``: ``order``
    is the default one, which an assembled output may change (:func:`_output_ordered`);
    ``stream``: the product is a term of a sum, whose assembled output is a sorted, combined
    run the union merges (:func:`~spf.assembly.for_stream`)."""
    nest = scan(space, order, Z3Limit(z3_timeout_ms))
    _check_tiling(nest, tile)
    decisions = tuple(synthesize(nest, find))
    assembly = None
    if space.assembled is not None:
        assembly = _assembly(nest, space.assembled, decisions, drop_zeros, semiring)
    elif drop_zeros:
        raise SpecError("drop_zeros applies to an output assembled by the kernel (a sparse "
                        "layout without share=); this output is dense or shared",
                        space.expr.source)
    plan = Plan(nest, decisions, assembly, parallel, semiring=semiring, typing=typing)
    if assembly is not None and reorder and not tile and assembly.mode is not Mode.APPEND:
        plan = _output_ordered(plan, assembly, order, find, z3_timeout_ms) or plan
    if parallel and assembly is None:
        plan = _parallel(plan)
        if plan.privatized and reorder and not tile:
            plan = _rows_outermost(plan, order, find, z3_timeout_ms) or plan
    elif parallel and not stream and plan.assembly is not None:
        plan = _parallel_rows(plan, plan.assembly)
    plan = replace(plan, skips=Table({t: tuple(tile_skips(nest, plan.decisions, t))
                                      for t in space.tiles}))
    if assembly is None:
        plan = _simd(plan, reassociate)
    if unroll:
        plan = _unroll(plan, unroll)
    if stream and plan.assembly is not None:
        plan = replace(plan, assembly=for_stream(plan.assembly))
    return plan


def _assembly(nest: LoopNest, output: TensorUse, decisions: Sequence[Decision],
              drop_zeros: bool, semiring: Semiring) -> AssemblyPlan:
    """How the nest assembles the output (with the statement's semiring and zeros)."""
    return replace(plan_assembly(nest, output, list(decisions)), drop_zeros=drop_zeros,
                   semiring=semiring)


def _parallel(plan: Plan) -> Plan:
    """``plan`` with the parallel loop of its analysis, unless the semiring forbids the
    reordered reduction (:func:`_unordered_reduction`), and the finds adapted to it."""
    analysis, notes = _unordered_reduction(plan.analysis(), plan.semiring)
    loop = analysis.parallel_loop
    decisions = plan.decisions
    if loop is not None:
        decisions, adapted = _adapt_finds_to_parallel(plan.nest, decisions, loop)
        notes += adapted
    return replace(plan, decisions=decisions, parallel_loop=loop, planned=analysis,
                   privatized=any(lp.private_output for lp in analysis.loops),
                   notes=plan.notes + notes)


def _rows_outermost(plan: Plan, order: list[str], find, z3_timeout_ms: int) -> Plan | None:
    """The plan with the output's first index outermost when the default order's parallel loop
    scatters into private copies of the output (a copy per thread, zeroed and summed: the
    whole output for every call): taken when its outermost loop then carries no dependence
    (each thread writes its own elements) and it needs no more finds (a convolution's
    output rows gathering image rows; not CSC SpMV, whose rows would be searched)."""
    space = plan.space
    outer = [i for i in space.expr.output.indices[:1] if i in space.variables]
    if not outer:       # the first only: every output index outside would gather per element
        return None
    nest = scan(space, outer + [v for v in order if v not in outer], Z3Limit(z3_timeout_ms))
    decisions = tuple(synthesize(nest, find))
    if len(decisions) > len(plan.decisions) or any(d.chosen is None for d in decisions):
        return None
    other = _parallel(Plan(nest, decisions, None, True, semiring=plan.semiring,
                           typing=plan.typing))
    loops = [lv.var for lv in nest.levels if lv.kind is LevelKind.LOOP]
    if other.privatized or other.parallel_loop is None or other.parallel_loop != loops[0]:
        return None
    return replace(other, notes=other.notes + (
        f"loop order {', '.join(nest.schedule)}: the output's first index outermost, so that "
        f"loop {other.parallel_loop}'s threads write their own elements (the default order "
        f"{', '.join(plan.nest.schedule)} scatters into a private copy of "
        f"{space.expr.output.tensor} per thread)",))


def _parallel_rows(plan: Plan, a: AssemblyPlan) -> Plan:
    """``plan`` building its assembled output in parallel over the outermost loop (the rows
    strategy, :mod:`spf.assembly.rows`) when Z3 proves the loop's iterations own their rows;
    otherwise serial, with a note saying why."""
    why = _rows_refused(plan, a)
    if why:
        return replace(plan, serial_assembly=why)
    loop = next(lv.var for lv in plan.nest.levels if lv.kind is LevelKind.LOOP)
    decisions, adapted = _adapt_finds_to_parallel(plan.nest, plan.decisions, loop)
    rows = replace(a, mode=Mode.ROWS, why=(
        f"Z3 proved that two iterations of loop {loop} never write the same {a.key[0]}"))
    return replace(plan, assembly=replace(rows, how=strategy(rows).how(rows)),
                   decisions=decisions, parallel_loop=loop, notes=plan.notes + adapted)


def _rows_refused(plan: Plan, a: AssemblyPlan) -> str:
    """Why the output cannot be built in parallel row by row ("" when it can)."""
    name = a.storage.layout.name
    if not row_shaped(a.storage):
        return (f"its layout {name} is not a dense level over a compressed one with a "
                "pointer array (rows that threads can fill independently)")
    if a.drop_zeros:
        return "drop_zeros=True: a row's count would depend on its values"
    if a.ordered < 1:
        return f"the loops do not produce {a.key[0]} in order"
    if plan.space.tiles:
        return "the loops are tiled"
    if any(a.output.name + "." in str(e) for e in a.extents):
        return "its extents are the call's (an index only index arithmetic bounds)"
    if not any(lv.kind is LevelKind.LOOP for lv in plan.nest.levels):
        return "there is no loop"
    verdict = rows_owned(plan.nest, [a.key[0]])
    if verdict.result != "unsat":
        return (f"Z3 did not prove that two iterations of the outermost loop never write the "
                f"same {a.key[0]}" + (f" ({verdict.why})" if verdict.why else ""))
    return ""


def _unordered_reduction(analysis: Analysis, sr: Semiring) -> tuple[Analysis, tuple[str, ...]]:
    """A parallel loop that reorders a reduction (per-thread copies of the output, or a
    scalar accumulator) stays serial when the semiring's add is not associative and
    commutative; the analysis then says so (the note says it too)."""
    loop = next((lp for lp in analysis.loops if lp.var == analysis.parallel_loop), None)
    if loop is None or not (loop.reduction or loop.private_output) \
            or (sr.reorderable and (sr.omp or not loop.reduction)):
        return analysis, ()
    why = (f"loop {loop.var} is not run in parallel: its iterations reduce into the output "
           f"with {sr.name}'s add ({sr.add}), " + (
               "which is not proven associative and commutative" if not sr.reorderable else
               "which has no OpenMP reduction operator"))
    serial = replace(loop, parallel=False, private_output=False, why=why)
    loops = tuple(serial if lp is loop else lp for lp in analysis.loops)
    return replace(analysis, loops=loops, parallel_loop=None, parallel_reason=why), (why,)


def _simd(plan: Plan, reassociate: bool) -> Plan:
    """``plan`` with its SIMD loop (or why the innermost loop stays scalar)."""
    note: tuple[str, ...] = ()
    if reassociate and plan.semiring.omp is None:
        note = (f"reassociate=True ignored: {plan.semiring.name}'s add has no OpenMP "
                "reduction operator",)
        reassociate = False
    known = plan.planned.loops[-1] if plan.planned and plan.planned.loops else None
    vector = vector_loop(plan.nest, [d.find.level for d in plan.decisions], reassociate, known)
    if vector is not None and not vector.lanes:
        return replace(plan, notes=plan.notes + note, no_simd=vector.why)
    if vector is not None and vector.var != plan.parallel_loop:
        return replace(plan, notes=plan.notes + note, vector=vector)
    return replace(plan, notes=plan.notes + note)


def _unroll(plan: Plan, count: int) -> Plan:
    """``plan`` with its innermost loop specialized for trip counts 1 to ``count`` when the
    count is data (its bounds read index arrays) and nothing else claims the loop (a find,
    the parallel or the SIMD loop); else with a note saying why not."""
    levels = plan.nest.levels
    loops = [k for k, lv in enumerate(levels) if lv.kind is LevelKind.LOOP]
    why = ""
    if not loops:
        why = "there is no loop"
    else:
        lv = levels[loops[-1]]
        if not any(a.calls() for a, _ in lv.lower + lv.upper):
            why = f"loop {lv.var} runs a number of times known without reading index arrays"
        elif any(d.find.level == loops[-1] for d in plan.decisions):
            why = f"loop {lv.var} is a find's"
        elif lv.var == plan.parallel_loop or (plan.vector and plan.vector.var == lv.var):
            why = f"loop {lv.var} runs in parallel or as SIMD lanes"
    if why:
        return replace(plan, notes=plan.notes + (f"unroll={count} not applied: {why}",))
    var = levels[loops[-1]].var
    return replace(plan, unrolled=(var, count), notes=plan.notes + (
        f"loop {var} unrolled for trip counts 1 to {count} (unroll={count}): short rows run "
        "without the loop's test and branch",))


def _output_ordered(plan: Plan, a: AssemblyPlan, order: list[str], find,
                    z3_timeout_ms: int) -> Plan | None:
    """The plan over :func:`output_order`'s loops when Z3 proves they append the output
    (``a``: the plan's assembly) in storage order and the loops moved inside run over counts
    of stored parts (not over a dimension); the original loops still count the entries
    (``counting``)."""
    space = plan.space
    other = output_order(space, order, a.key)
    if other is None:
        return None
    new_order, moved, why = other
    nest = scan(space, new_order, Z3Limit(z3_timeout_ms))
    inside = inner_extents_stored_counts(nest, moved)
    if inside is None:
        return None
    decisions = tuple(synthesize(nest, find))
    assembly = _assembly(nest, a.output, decisions, a.drop_zeros, a.semiring)
    if assembly.mode is not Mode.APPEND:
        return None
    return Plan(nest, decisions, assembly, plan.parallel_wanted, counting=plan,
                semiring=plan.semiring, typing=plan.typing, order_why=(
        f"{why}, and Z3 proved they do (no {a.mode} pass); {inside}; the bound pass counts "
        f"the entries in the order {', '.join(plan.nest.schedule)}"))


def _adapt_finds_to_parallel(nest: LoopNest, serial: tuple[Decision, ...], loop: str
                             ) -> tuple[tuple[Decision, ...], tuple[str, ...]]:
    """Find states private to the threads of the parallel ``loop`` (:func:`for_parallel`),
    and notes saying what changed."""
    adapted = tuple(for_parallel(nest, serial, loop))
    notes = []
    for before, after in zip(serial, adapted):
        old = before.chosen.describe() if before.chosen else "guard loop"
        new = after.chosen.describe() if after.chosen else "guard loop"
        if old != new:
            notes.append(f"find of {after.find.use.name} ({after.find.var}): {old} became "
                         f"{new} so that no find state is shared by parallel iterations")
    return adapted, tuple(notes)


def _check_tiling(nest: LoopNest, tile: Mapping[str, int]) -> None:
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
