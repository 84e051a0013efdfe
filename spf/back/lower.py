"""Lowering: one generated function as a C tree, from the scanned nest and the decisions.

:class:`KernelLowering` is the driver: the signature, the declarations, the statement, the
loop nest with its hooks and parallel annotations, the exits.  A reduction whose output
element is fixed across the inner loops is accumulated in a local scalar.  The policies are
modules of their own: finds are lowered by their algorithm (:mod:`spf.finds`), Auto's
run-time choice between them by :mod:`.auto_choice`, a privatized parallel loop by
:mod:`.privatize`, the levels of the nest by :mod:`.levels`; an assembled output's side of
each function (its parameter, state, statement, exits; the counting passes) comes from
:mod:`spf.assembly.lowering`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

from ..assembly import FunctionRole
from ..assembly import lowering as assembly_c
from ..decide.plan import Plan
from ..finds import REGISTRY
from ..finds.base import FindLowering
from ..finds.model import Decision
from ..front.kernel_spec import Access
from ..front.layout import Layout
from ..front.rhs import Coefficient, Node, index_refs, is_sign, operands
from ..front.terms import Aff
from ..front.value_exprs import type_of
from ..front.value_types import Kind, ValueType, result_type
from ..middle.iteration_space import TensorUse
from ..middle.scan import LevelKind, LoopNest
from . import auto_choice
from . import ctree as t
from .coalesce import coalesce
from .levels import Hook, is_key_guard, lower_levels, tile_condition
from .names import CNames, scalar_param, scalar_value, struct_name, used_names, value_names
from .privatize import private_region, redirect
from .register_block import BLOCK, find_block, open_block
from .status import VALUE_STATUS, Status, value_status_declaration
from .value_c import helpers_of, negated_c, number_c, scaled_c, sets_status, value_c


@dataclass
class KernelCode:
    """The pieces of one generated function, before they are put into a file."""

    signature: t.Signature
    body: list[t.Node]
    helpers: set[str]
    layouts: dict[str, Layout]
    runtimes: set[str]      # C helper files from templates/ the code calls
    assembly: bool          # uses templates/assembly.c
    storage: list[t.Definition]    # the output's storage functions, put before the kernel
    prologue: int = 0               # the body's first statements: the fields read once


def kernel_code(plan: Plan, name: str, role: FunctionRole = FunctionRole.OUTPUT
                ) -> KernelCode:
    """The signature and body of one kernel function of ``plan`` (returns a
    :class:`~spf.back.status.Status`: 0, 1 when out of memory, 2 when an assembled output
    outgrows its arrays, the one its values set); ``role`` says which function of
    a kernel (see :class:`~spf.assembly.model.FunctionRole`)."""
    return KernelLowering(plan, name, role).code()


class KernelLowering:
    """Builds the tree of one kernel function (see :func:`kernel_code`)."""

    def __init__(self, plan: Plan, name: str, role: FunctionRole):
        assert not role.counts or plan.assembly is not None, \
            f"a {role.name} pass counting the entries of an output that is not assembled"
        self.plan = plan
        self.nest, self.space, self.expr = plan.nest, plan.space, plan.space.expr
        self.name, self.decisions = name, list(plan.decisions)
        self.level_notes = plan.guard_notes()
        # the functions counting an assembled output's entries run serially
        self.parallel_loop = None if role.serial else plan.parallel_loop
        self.assembly, self.role = plan.assembly, role
        self.helpers: set[str] = set()
        direct = frozenset({self.expr.output.tensor}) \
            if plan.assembly is not None else frozenset()
        self.names = CNames(self.space, self.helpers, hoist=True, direct=direct)
        if plan.assembly is not None and role is not FunctionRole.OUTPUT:   # no output struct
            out = plan.assembly.output.name
            self.names.redirect.update({(out, f): c for f, c in
                                        assembly_c.extents_read(plan.assembly).items()})
        # a scatter loop in parallel: every thread adds into its own copy of the output
        self.privatized = plan.privatized and bool(self.parallel_loop)
        if self.privatized:
            redirect(self.names, self.space.use(self.expr.output.tensor))
        self.layouts: dict[str, Layout] = {}
        self.b = t.Builder()
        self.semiring = plan.semiring
        if not self.semiring.is_plus_times:
            self.helpers.add("spf_math")
        self.building = plan.assembly is not None and not role.serial \
            and role is not FunctionRole.ROW_COUNTS     # a first pass builds nothing
        self.use_acc = False       # the statement sums into the local spf_acc

    def code(self) -> KernelCode:
        """The function: its signature, then its body after the hoisted field reads."""
        signature = self.signature()
        self.body()
        hoisted: list[t.Node] = [t.Declare(h.ctype, h.local, h.member, const=h.const)
                                 for h in self.names.hoisted()]
        if hoisted:
            hoisted.insert(0, t.Comment("the tensors' fields, read once (restrict: no output "
                                        "overlaps an input)"))
        if sets_status(self.helpers):
            hoisted.append(value_status_declaration())
        runtimes = {REGISTRY[c.algorithm].runtime for d in self.decisions for c in d.candidates
                    if REGISTRY[c.algorithm].runtime}
        a = self.assembly
        storage = assembly_c.storage(a, self.name, self.role) if a is not None else []
        return KernelCode(signature, hoisted + self.b.root, self.helpers, self.layouts,
                          runtimes, self.building, storage, len(hoisted))

    # signature ------------------------------------------------------------------------
    def signature(self) -> t.Signature:
        """``int <name>(<the output's parameters>, <each factor's>, <each tensor read for
        its extents only>)``."""
        params = [p for acc in (self.expr.output, *self.expr.factors, *self.expr.sized)
                  for p in self._params(acc)]
        return t.Signature("int", self.name, tuple(params))

    def _params(self, acc: Access) -> list[t.Param]:
        """The C parameters of one access (recording the layouts whose structs they use)."""
        output = acc is self.expr.output
        if not acc.indices:
            return [scalar_param(acc.tensor, self.plan.typing.of(acc.tensor), output)]
        if self.assembly is not None and output:
            lay = self.assembly.output.layout
            self.layouts.setdefault(lay.key, lay)
            return assembly_c.param(self.assembly, acc.tensor, self.role)
        use = self.space.use(acc.tensor)
        self.layouts.setdefault(use.layout.key, use.layout)
        const = "" if use.is_output else "const "
        return [t.Param(f"{const}{struct_name(use.layout)} *restrict", use.name)]

    # statement ------------------------------------------------------------------------
    def operand_names(self) -> set[str]:
        """The layout indices the factors' values read."""
        read = set().union(*(value_names(self.space.use(acc.tensor))
                             for acc in self.expr.factors if acc.indices and not acc.pattern))
        return read | {r.name for acc in self.expr.factors if acc.value is not None
                       for r in index_refs(acc.value)}      # index values in expressions

    def product(self) -> str:
        """The product of the factors (C); a mask's value is not a factor.  The product is
        computed in numpy's promotion of the factors' types: a factor of another type is
        cast to it first (C's own promotion differs: int64 * float is float there, uint32 *
        int32 unsigned), and an integer product is wrapped in it (C computes int8 * int8 in
        int)."""
        accs = [acc for acc in self.expr.factors if not (acc.pattern or acc.in_value)]
        stored = [self.plan.typing.of(acc.tensor) for acc in accs]
        types = [vt if acc.value is None else type_of(acc.value, self._types(acc.value))
                 for acc, vt in zip(accs, stored)]
        coef = self.expr.coefficient
        if not accs:                 # a number broadcast over the output, in its type
            out = self.plan.typing.output
            return f"({out.c}){number_c(coef, out)}"
        size = -coef if coef < 0 else coef      # the sign is a negation of the product
        weak = () if is_sign(coef) else (float(size) if isinstance(size, Fraction) else size,)
        floors = [type_of(n, self._types(n)) for acc in accs for n in acc.floor]
        ptype = result_type(*types, *floors, weak=weak)
        acc_type = self.plan.typing.accumulate
        if self.semiring.is_plus_times and any(acc.subtracted for acc in accs) and \
                ptype != acc_type and \
                ptype.kind is not Kind.BOOL and result_type(ptype, acc_type) == acc_type:
            # subtracted by the sum: numpy negates the product in the sum's type
            # (``D(i) - A(i)`` of int32 D, int8 A: -(-128) is 128 there, not -128)
            inner = self._product(accs, stored, types, -coef, ptype)
            return negated_c(f"(({acc_type.c})({inner}))", acc_type)
        return self._product(accs, stored, types, coef, ptype)

    def _product(self, accs: list[Access], stored: list[ValueType], types: list[ValueType],
                 coef: Coefficient, ptype: ValueType) -> str:
        """The factors' product in ``ptype`` times ``coef`` (its sign numpy's negative in
        ``ptype``)."""
        factors = [self._factor(acc, vt) for acc, vt in zip(accs, stored)]
        factors = [f if vt == ptype else f"(({ptype.c}){f})" for f, vt in zip(factors, types)]
        if ptype.kind is Kind.BOOL and self.semiring.is_plus_times:
            rhs = " && ".join(factors) if len(factors) > 1 else factors[0]
            # booleans: times is and; a product subtracted (a sum of other types negated,
            # numpy refuses '-' of booleans) is negated in the sums' type
            return f"-({self.plan.typing.accumulate.c})({rhs})" if coef == -1 else rhs
        rhs = self.semiring.mul_c(factors)
        if coef not in (1, -1):
            rhs = scaled_c(rhs if len(factors) == 1 else f"({rhs})", coef, ptype)
        if ptype.kind in (Kind.INT, Kind.UINT, Kind.BOOL) and (len(factors) > 1 or
                                                               coef not in (1, -1)):
            rhs = f"({ptype.c})({rhs})"   # wrapped in the type first, as numpy's product
        return negated_c(rhs, ptype) if coef == -1 else rhs   # numpy's negative, in the type

    def _factor(self, acc: Access, vt: ValueType) -> str:
        """A factor's value in C: the tensor's value, a scalar or a value expression."""
        if acc.value is None:
            return scalar_value(acc.tensor, vt) if not acc.indices else \
                self.names.value(self.space.use(acc.tensor))
        self.helpers |= helpers_of(acc.value, self._types(acc.value))
        reads = {n: self.names.value(self.space.use(n)) for n in operands(acc.value)}
        reads.update({n: scalar_value(n, self.plan.typing.of(n)) for n in self._scalars()})
        return value_c(acc.value, reads, self._types(acc.value))   # a scalar's: ``s * j``

    def _scalars(self) -> set[str]:
        """The scalar operands: a value expression reads one as a bare name (``s * j``, an
        index value folded into a scalar factor)."""
        return {acc.tensor for acc in self.expr.factors if not acc.indices}

    def _types(self, tree: Node) -> dict[str, ValueType]:
        names = operands(tree) + [r.name for r in index_refs(tree) if r.name in self._scalars()]
        return {n: self.plan.typing.of(n) for n in names}

    def add_into(self, target: str, value: str) -> t.Node:
        """``target`` combined with ``value`` by the semiring's add (``+=`` for plus)."""
        if self.semiring.omp == "+":
            return t.Assign(target, value, "+=")
        return t.Assign(target, self.semiring.add_c(target, value))

    def output_target(self) -> tuple[TensorUse | None, str, set[str]]:
        """The dense output's use (None otherwise), the C of the element the statement adds
        into, and the indices that select it."""
        if self.assembly is not None:
            return None, "", set(self.assembly.key)
        if not self.expr.output.indices:
            return None, f"*{self.expr.output.tensor}", set()
        out_use = self.space.use(self.expr.output.tensor)
        return out_use, self.names.value(out_use), value_names(out_use)

    def statement_names(self, out_vars: set[str]) -> set[str]:
        """The names the statement reads (``out_vars``: the indices selecting its element)."""
        operands = self.operand_names()
        if self.assembly is not None:
            return assembly_c.reads(self.assembly, self.role, operands)
        return operands | out_vars

    def statement(self, value: Callable[[], str], target: str, use_acc: bool,
                  store: bool = False) -> list[t.Node]:
        """The statement for the product ``value()`` (printed only where it is used: the
        fields a value reads are declared only then); ``store``: each instance writes its own
        element, whose value it is."""
        if self.assembly is not None:
            return assembly_c.statement(self.assembly, value, self.name, self.role)
        if store and not use_acc:
            return [t.Assign(target, value())]
        return [self.add_into("spf_acc" if use_acc else target, value())]

    def used(self, stmt_names: set[str], nest: LoopNest | None = None) -> set[str]:
        """The names the lowered code reads: the statement's, the nest's bounds and guards,
        the finds' keys and ranges (a template reads its keys at its own positions, not at
        the matched one)."""
        keys = [k for d in self.decisions if d.chosen is not None for k in d.find.keys]
        read = set(stmt_names)      # with the finds': a level they read reads its own too
        for d in self.decisions:
            own = {d.find.var} if d.chosen is not None else set()
            for c, e in d.find.keys:
                read |= e.names() | (Aff.var(c).names() - own)
            read |= d.find.lo.names() | d.find.hi.names()
            read |= {c.array_key for c in d.candidates if c.array_key}
        return used_names(nest or self.nest, read,
                          lambda g: not any(is_key_guard(g, c, e) for c, e in keys))

    # body -----------------------------------------------------------------------------
    def body(self) -> None:
        """Declarations, the loop nest (one version per run-time choice), the exits."""
        out_use, target, out_vars = self.output_target()
        stmt_names = self.statement_names(out_vars)
        if not self.parallel_loop:
            self.nest, notes = coalesce(self.nest, self.space,
                                        lambda nest: self.used(stmt_names, nest),
                                        self._fixed_levels())
            self.level_notes = {**self.level_notes, **notes}
        used = self.used(stmt_names)
        versions, runtime = auto_choice.versions(self.decisions, self.names, used)
        stateful = auto_choice.stateful(versions)
        self._declare(stateful)
        positions = [i for i, lv in enumerate(self.nest.levels) if lv.var in out_vars]
        acc_level = max(positions) if positions else -1
        plain = self.assembly is None       # an update of a dense output
        use_acc = plain and \
            any(lv.kind is LevelKind.LOOP for lv in self.nest.levels[acc_level + 1:])
        block = find_block(self.nest, out_vars, self.decisions, self.parallel_loop) \
            if plain and out_use is not None and not self.privatized else None
        # each element written once, by a store of its whole sum (or, with no sum, of its
        # value: -0.0 stays -0.0, as numpy's copy): no zeroing pass, no re-read
        store = plain and block is None and out_use is not None and \
            not self.expr.accumulate and (use_acc or not self.nest.statement_guards) and \
            _stores_every_element(self.nest, self.decisions,
                                  acc_level if use_acc else len(self.nest.levels) - 1)
        if plain and not self.expr.accumulate and not store and not self.privatized:
            self.b.add(*self._zero_output(out_use))
        if block is not None:
            opened = open_block(block, self.nest, self.names, self.semiring.zero_c(),
                                self.add_into, target, self.expr.output.tensor)
            target = f"{BLOCK}[{self.names.aff(block.index())}]"
            used = self.used(self.statement_names(block.lane_vars))
        hooks = self._hooks(acc_level, target if use_acc else None, store)
        if block is not None:
            _chain(hooks, block.carried - 1, opened)
        statement = self.statement(self.product, target, use_acc, store)
        self.use_acc = use_acc
        reduction = ["spf_acc"] if use_acc and acc_level == -1 else []
        auto_choice.lower_versions(
            self.b, self.nest, self.names, versions, runtime,
            lambda finds: self._nest(finds, used, statement, hooks, reduction))
        self._exits(stateful)

    def _declare(self, stateful: list[FindLowering]) -> None:
        """The finds' state, the assembled output's (before anything that can fail: the exits
        release it), the allocations, what runs before the loops."""
        b, a = self.b, self.assembly
        for f in stateful:
            b.add(*f.algorithm.declare(f))
        if a is not None:
            b.add(*assembly_c.declare(a, self.names, self.name, self.role))
        for f in stateful:
            b.add(*f.algorithm.allocate(f))
        if a is not None:
            inputs = [acc.tensor if not acc.indices else self.space.use(acc.tensor).name
                      for acc in self.expr.factors]
            b.add(*assembly_c.start(a, self.name, self.role, inputs))

    def _fixed_levels(self) -> set[int]:
        """Levels a loop transformation must leave in place: the finds' (their loops, key
        reads and state resets) and those where code is hooked in (groups, tiles)."""
        fixed: set[int] = set()
        for d in self.decisions:
            fixed |= {d.find.level, *d.find.key_levels}
            fixed |= {c.init_level for c in d.candidates if c.init_level is not None}
        if self.assembly is not None and self.assembly.group_level is not None:
            fixed.add(self.assembly.group_level)
        names = [lv.var for lv in self.nest.levels]
        fixed |= {names.index(tile) for tile in self.space.tiles if tile in names}
        return fixed

    def _zero_output(self, out_use: TensorUse | None) -> list[t.Node]:
        """The output set to the semiring's zero before the loops add into it."""
        out, zero = self.expr.output.tensor, self.semiring.zero_c()
        if out_use is None:
            return [t.Assign(f"*{out}", zero)]
        arr = out_use.layout.value_ref.array
        size, data = self.names.extent_product(out_use, arr), self.names.field(out_use, arr)
        if self.parallel_loop or zero != "0.0":   # with all threads (it can be large), or a fill
            fill: list[t.Node] = [] if zero == "0.0" else [t.Comment(
                f"elements no product reaches hold {self.semiring.name}'s zero, {zero}")]
            return fill + [t.For("size_t spf_z = 0", f"spf_z < {size}", "++spf_z",
                                 [t.Assign(f"{data}[spf_z]", zero)],
                                 braces=False, parallel=t.Parallel(t.Schedule.STATIC)
                                 if self.parallel_loop else None)]
        return [t.Call(f"memset({data}, 0, sizeof(spf_value_t) * {size})")]

    def _hooks(self, acc_level: int, acc_target: str | None, store: bool) -> dict[int, Hook]:
        """What runs where a level opens: the accumulator, the assembly's group code, the
        tile-skipping guards."""
        hooks: dict[int, Hook] = {}
        if acc_target is not None:
            def open_acc(b: t.Builder) -> None:
                b.add(t.Declare("spf_acc_t", "spf_acc", self.semiring.zero_c()))
                b.defer(t.Assign(acc_target, "spf_acc") if store
                        else self.add_into(acc_target, "spf_acc"))
            hooks[acc_level] = open_acc
        order = [lv.var for lv in self.nest.levels]
        a = self.assembly
        more = assembly_c.hooks(a, self.name, self.role, order) if a is not None else []
        for level, hook in more + self._tile_skips(order):
            _chain(hooks, level, hook)
        return hooks

    def _tile_skips(self, order: list[str]) -> list[tuple[int, Hook]]:
        """An ``if`` at each tile loop that skips the tiles no match can be in."""
        out: list[tuple[int, Hook]] = []
        for tile in self.space.tiles:
            conds = [tile_condition(self.nest, skip, self.names)
                     for skip in self.plan.skips.get(tile, [])]
            if conds:
                def skip(b: t.Builder, conds: list[str] = conds) -> None:
                    b.add(t.Comment("skip tiles that cannot hold a match (the keys are sorted)"))
                    b.nest(t.If(" && ".join(conds)))
                out.append((order.index(tile), skip))
        return out

    # the nest -------------------------------------------------------------------------
    def _nest(self, finds: list[FindLowering], used: set[str], statement: list[t.Node],
              hooks: dict[int, Hook], reduction: list[str]) -> None:
        """One version of the nest around ``statement``, in parallel as planned."""
        parallel, team = self._parallel(finds, reduction)
        if self.privatized and self.parallel_loop:
            loop = self.parallel_loop

            def loops(annotation: t.Parallel) -> None:
                self._levels(finds, used, statement, hooks, {**parallel, loop: annotation}, None)
            private_region(self.b, self.names, self.space.use(self.expr.output.tensor),
                           self.semiring, self.expr.accumulate, self.add_into, parallel[loop],
                           loops)
            return
        a = self.assembly
        if a is not None and self.parallel_loop and assembly_c.in_region(a):
            self._assembly_region(finds, used, statement, hooks, parallel)
            return
        depth = self.b.depth
        self._levels(finds, used, statement, hooks, parallel, team)
        self.b.close_to(depth)
        self.b.flush()

    def _assembly_region(self, finds: list[FindLowering], used: set[str],
                         statement: list[t.Node], hooks: dict[int, Hook],
                         parallel: dict[str, t.Parallel]) -> None:
        """The nest in a parallel region whose threads each hold their own assembly state
        (set up before the shared loop, finished after it: the rows strategy)."""
        a, b, loop = self.assembly, self.b, self.parallel_loop
        assert a is not None and loop is not None
        self.helpers.add("spf_omp")
        depth = b.depth
        b.nest(t.Team())
        b.nest(t.Block())
        b.add(*assembly_c.region_start(a, self.role))
        self._levels(finds, used, statement, hooks,
                     {**parallel, loop: replace(parallel[loop], team=False)}, None)
        b.close_to(depth + 2)
        b.flush()
        b.add(*assembly_c.region_end(a, self.name, self.role))
        b.close_to(depth)
        b.flush()

    def _levels(self, finds: list[FindLowering], used: set[str], statement: list[t.Node],
                hooks: dict[int, Hook], parallel: dict[str, t.Parallel],
                team: str | None) -> None:
        """The nest's levels around ``statement`` (see :func:`.levels.lower_levels`)."""
        lower_levels(self.b, self.nest, self.names, used, finds, statement, hooks,
                     self.level_notes, parallel, team, self._simd(), self.plan.unrolled)

    def _parallel(self, finds: list[FindLowering],
                  reduction: list[str]) -> tuple[dict[str, t.Parallel], str | None]:
        """The parallel loop's annotation, and the loop a team of threads runs when the
        parallel loop is an inner one (every thread runs the outer loops; the iterations
        of this one are shared)."""
        loop = self.parallel_loop
        if not loop:
            return {}, None
        loops = [lv.var for lv in self.nest.levels if lv.kind is LevelKind.LOOP]
        par = [lv.var for lv in self.nest.levels].index(loop)
        private = [v for f in finds for v in f.algorithm.thread_private(f, par)]
        outer = loop == loops[0]
        even = not outer or self._even_iterations(par)
        annotation = t.Parallel(t.Schedule.STATIC if even else t.Schedule.GUIDED, team=outer,
                                private=private, reduction=reduction,
                                reduction_op=self.semiring.omp or "+")
        return {loop: annotation}, None if outer else loops[0]

    def _even_iterations(self, par: int) -> bool:
        """Whether every iteration of level ``par`` does the same work: each loop inside it
        runs a fixed number of times (bounds of sizes and constants only: no index array, no
        enclosing index) and no find runs inside it.  Then equal contiguous shares (a static
        schedule) balance the threads; otherwise guided."""
        indices = {lv.var for lv in self.nest.levels}
        inner = self.nest.levels[par + 1:]
        return not any(aff.calls() or aff.names() & indices
                       for lv in inner if lv.kind is LevelKind.LOOP
                       for aff, _ in lv.lower + lv.upper) \
            and not any(d.find.level > par for d in self.decisions)

    def _simd(self) -> dict[str, t.Simd]:
        """The plan's SIMD loop (a sum kept in ``spf_acc`` as the lanes' partial sums), unless
        the statement is not a plain update (an assembled output)."""
        v = self.plan.vector
        if v is None or self.assembly is not None:
            return {}
        if v.reduction:
            return {v.var: t.Simd(["spf_acc"], self.semiring.omp or "+")} if self.use_acc else {}
        return {v.var: t.Simd()}

    # exits ----------------------------------------------------------------------------
    def _exits(self, stateful: list[FindLowering]) -> None:
        """The epilogue, the output finished, the releases and ``return``; with a label for
        each way out that a failure jumps to."""
        b, a, role = self.b, self.assembly, self.role
        if a is not None:
            b.add(*assembly_c.finish(a, self.name, role))
        releases = [n for f in stateful for n in f.algorithm.release(f)]
        if a is not None:
            releases += assembly_c.release(a, role)
        # completed: 0, or the status its values set (the output is then not complete)
        done = t.Return(VALUE_STATUS if sets_status(self.helpers) else str(Status.OK.value))
        if not releases and not self.building:
            b.add(done)
            return
        b.add(*releases, done)
        failing = self.building and role is FunctionRole.OUTPUT
        oom = str(Status.OUT_OF_MEMORY.value)
        if t.jumps_to(b.root, "spf_out_of_memory"):
            b.add(t.Label("spf_out_of_memory"))
            if failing:
                b.add(t.Assign("spf_status", oom))
        if failing:
            b.add(t.Label("spf_fail"), *releases, t.Return("spf_status"))
        else:
            b.add(*releases, t.Return(oom))


def _chain(hooks: dict[int, Hook], level: int, hook: Hook) -> None:
    """Run ``hook`` at ``level`` after what is already there."""
    previous = hooks.get(level)

    def both(b: t.Builder) -> None:
        if previous:
            previous(b)
        hook(b)
    hooks[level] = both


def _stores_every_element(nest: LoopNest, decisions: list[Decision], acc_level: int) -> bool:
    """Whether the loops down to the accumulator's level run every output coordinate exactly
    once (each output index is one of those loops, over its whole extent, with no guard or
    find on the way): then the accumulated sum is stored, and the output needs no zeroing."""
    space = nest.space
    head = nest.levels[:acc_level + 1]
    loops = {lv.var: lv for lv in head if lv.kind is LevelKind.LOOP}
    indices = space.expr.output.indices
    if len(loops) != len(indices) or any(lv.guards for lv in head) \
            or any(d.find.level <= acc_level for d in decisions):
        return False
    assigned = {lv.var: lv.expr for lv in head if lv.kind is LevelKind.ASSIGN}
    covered = set()
    for idx in indices:
        expr = Aff.var(idx) if idx in loops else assigned.get(idx)
        var = next(iter(expr.names()), None) if expr is not None else None
        if var not in loops or expr != Aff.var(var) or var in covered:
            return False
        lv = loops[var]
        if lv.lower != [(Aff.num(0), 1)] or lv.upper != [(space.extent[idx] - 1, 1)]:
            return False
        covered.add(var)
    return True


