"""A product kernel: one statement ``out = a * b * ...`` over the iteration space its layouts
compose, with its loop order and its :class:`~spf.decide.plan.Plan` (every decision, made
once).  Its analysis, C and report are derived from the plan on first use and kept.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property

from .assembly import AssemblyPlan
from .back.levels import tile_condition
from .back.names import CNames
from .back.source import emit_kernel, header_lines
from .concurrency import symbolic
from .decide.analysis import Analysis, TileReport
from .decide.options import Table, check_tile
from .decide.plan import Plan, make_plan
from .decide.report import plan_report
from .decide.synthesis import Decision
from .errors import GuardLoopWarning, SpecError, warn_user
from .kernel_setup import Setup
from .middle.iteration_space import IterationSpace, build
from .middle.order import default_order
from .middle.scan import LoopNest


@dataclass(frozen=True, eq=False)
class ProductKernel:
    """One product statement: its ``setup``, iteration ``space`` (tiled), loop ``order``
    (layout indices, outermost first), why the default order moved loops (``order_why``)
    and the ``plan``."""

    setup: Setup
    space: IterationSpace
    order: tuple[str, ...]
    order_why: tuple[str, ...]
    plan: Plan
    names: Mapping[str, str]    # a user's name to its identifier in the C, where they differ

    @classmethod
    @symbolic
    def build(cls, setup: Setup, stream: bool = False,
              names: Mapping[str, str] | None = None) -> ProductKernel:
        """Space, tiling, order and plan of ``setup``'s statement, its names those of
        generated C (``names``: a user's name to its C identifier, where they differ; by
        default :meth:`Setup.c_names`); ``stream``: it is a term of a sum, feeding the union
        a sorted, combined run."""
        names = Table(setup.c_names() if names is None else names)
        named = setup.in_c(names)
        opts, source = named.options, setup.expr.source
        space = build(named.expr, named.layouts, opts.space_bounds(named.expr), opts.share,
                      assemble=setup.assembled)
        tile = check_tile(opts.tile, space.variables, source)
        if tile:
            space = space.tiled(tile)
        order, why = _loop_order(space, opts.order, source)
        plan = make_plan(space, order, opts.find, parallel=opts.parallel,
                         drop_zeros=opts.drop_zeros, reassociate=opts.reassociate,
                         z3_timeout_ms=setup.z3_timeout_ms, tile=tile,
                         reorder=opts.order is None, semiring=opts.semiring, stream=stream,
                         typing=named.typing, unroll=opts.unroll)
        for warning in plan.guard_loop_warnings():
            warn_user(f"{setup.name}: {warning}", GuardLoopWarning)
        placed = set(order)         # planning may reorder them (Plan.order_why)
        return cls(setup, space, tuple(v for v in plan.nest.schedule if v in placed),
                   tuple(why), plan, names)

    @cached_property
    def named(self) -> Setup:
        """The setup in the identifiers of generated C (:meth:`Setup.in_c`), which the space,
        the plan and the C use."""
        return self.setup.in_c(self.names)

    # the plan's decisions ------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.setup.name

    @property
    def nest(self) -> LoopNest:
        return self.plan.nest

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return self.plan.decisions

    @property
    def assembly(self) -> AssemblyPlan | None:
        return self.plan.assembly

    @property
    def parallel_loop(self) -> str | None:
        return self.plan.parallel_loop

    @property
    def terms(self) -> tuple[ProductKernel, ...]:
        """A product is one statement: no terms."""
        return ()

    @property
    def runs(self) -> None:
        """Only a sum merges runs."""
        return None

    @property
    def analyses(self) -> tuple[Analysis, ...]:
        return (self.analysis,)

    # derived on first use --------------------------------------------------------------
    @cached_property
    @symbolic
    def analysis(self) -> Analysis:
        """The plan's analysis with what the kernel adds: why an assembled output is built
        by one thread, its assembly, the tiles' skipping conditions, the Z3 queries left
        undecided and what planning changed."""
        ana, plan = self.plan.analysis(), self.plan
        notes, reason = list(ana.notes), ana.parallel_reason
        if plan.assembly is not None:
            out = self.setup.expr.output.tensor
            if plan.parallel_loop is not None:      # built row by row by the loop's threads
                reason = (f"loop {plan.parallel_loop} in parallel: {plan.assembly.why}, so "
                          f"each thread builds the rows of {out} its iterations write")
                ana = replace(ana, parallel_loop=plan.parallel_loop)
            elif self.setup.options.parallel:    # the reason says why parallel=True was ignored
                why = (f"not parallelized: the output {out} is assembled by one thread"
                       + (f" ({plan.serial_assembly})" if plan.serial_assembly else ""))
                notes.append(why)
                reason = reason.removesuffix("; parallel=False") + f"; {why}"
            notes.append(plan.assembly.describe())
        names = CNames(self.space, set())
        tiles = tuple(TileReport(var, size, t, tuple(
            tile_condition(self.nest, skip, names) for skip in plan.skips[t]))
            for t, (var, size) in self.space.tiles.items())
        notes += [*self.nest.z3.undecided, *plan.notes]
        return replace(ana, parallel_reason=reason, tiles=tiles, notes=tuple(notes))

    @cached_property
    @symbolic
    def source(self) -> str:
        """The generated C (for an assembled output, its sizing and storage functions too)."""
        return emit_kernel(self.plan, self.name, self.setup.header() + self.header_lines())

    def header_lines(self) -> list[str]:
        """The file header's account of the plan."""
        return header_lines(self.plan, self.name)

    @symbolic
    def report(self) -> str:
        """Iteration space, loop order and per-level decisions, as text."""
        notes = [f"{title}: {text}" for title, text in self.setup.notes()]
        return "\n".join([plan_report(self.plan, self.setup.z3_timeout_ms, self.order_why)]
                         + notes)


def _loop_order(space: IterationSpace, order: Iterable[str] | None, source: str
                ) -> tuple[list[str], list[str]]:
    """The loop variables in ``order`` (``A.pi`` written for ``A_pi``; default: the order
    :func:`default_order` chooses) with the tile loops it leaves out, and why the default
    order moved loops."""
    why: list[str] = []
    if order is None:
        chosen, why = default_order(space)
        return _with_tiles(space, chosen), why
    variables, result = space.variables, []
    for item in order:
        var = item.replace(".", "_", 1) if "." in item else item
        if var not in variables:
            raise SpecError(f"order names {item!r}, which is not a loop variable; choose "
                            f"from {[_written(v, space.indices) for v in variables]}", source)
        result.append(var)
    return _with_tiles(space, result), why


def _with_tiles(space: IterationSpace, order: list[str]) -> list[str]:
    """Tile loops the order does not place go right before their loop."""
    order = list(order)
    for t, (var, _) in space.tiles.items():
        if t not in order and var in order:
            order.insert(order.index(var), t)
    return order


def _written(var: str, indices: list[str]) -> str:
    """A loop variable as users write it: ``A.pi`` for the layout index ``A_pi``."""
    return var if var in indices else var.replace("_", ".", 1)
