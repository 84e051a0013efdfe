"""Lowering: one kernel function as a C tree, from the scanned nest and the decisions.

A reduction whose output element is fixed across the inner loops is accumulated in a local
scalar; finds are lowered by their algorithm (:mod:`spf.finds`); an assembled output's
statement and bookkeeping come from its strategy (:mod:`spf.assembly`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..assembly import FunctionRole, storage_c, strategy
from ..assembly import lowering as assembly_c
from ..decide.plan import Plan
from ..decide.synthesis import TileSkip, cost_model
from ..finds import REGISTRY
from ..finds.base import FindLowering
from ..finds.model import Choice, Decision
from ..front.layout import Layout
from ..front.terms import Aff
from ..middle.iteration_space import TensorUse
from ..middle.scan import LevelKind, LoopNest
from . import ctree as t
from .coalesce import coalesce
from .levels import Hook, is_key_guard, lower_levels
from .names import CNames, loop_bound, struct_name, used_names, value_names


class CustomStatement:
    """A statement of its own in place of the output's (a generated conversion pass):
    ``params`` replace the output's parameters, ``statement(value)`` builds it for the value
    (``value()``: the product of the factors, printed where it is used), ``names`` are the
    logical indices it reads; ``prologue`` and ``epilogue`` go before and after the loops,
    ``at = (level, nodes)`` right after that nest level opens."""

    def __init__(self, params: list[str],
                 statement: Callable[[Callable[[], str]], list[t.Node]],
                 names: set[str], prologue: list[t.Node] = (), epilogue: list[t.Node] = (),
                 at: tuple[int, list[t.Node]] | None = None):
        self.params, self.statement, self.names = params, statement, names
        self.prologue, self.epilogue = list(prologue), list(epilogue)
        self.at = at


@dataclass
class KernelCode:
    """The pieces of one generated function, before they are put into a file."""

    signature: str
    body: list[t.Node]
    helpers: set[str]
    layouts: dict[str, Layout]
    runtimes: set[str]      # C helper files from templates/ the code calls
    assembly: bool          # uses templates/assembly.c
    storage: list[t.Definition]    # the output's storage functions, put before the kernel


class KernelLowering:
    """Builds the tree of one kernel function (see :func:`kernel_code`)."""

    def __init__(self, plan: Plan, name: str, role: FunctionRole,
                 custom: CustomStatement | None):
        self.plan = plan
        self.nest, self.space, self.expr = plan.nest, plan.space, plan.space.expr
        self.name, self.decisions = name, list(plan.decisions)
        self.level_notes = plan.guard_notes()
        # the functions counting an assembled output's entries run serially
        self.parallel_loop = None if role.counts else plan.parallel_loop
        self.assembly, self.role, self.custom = plan.assembly, role, custom
        self.helpers: set[str] = set()
        direct = frozenset({self.expr.output.tensor}) \
            if plan.assembly is not None or custom is not None else frozenset()
        self.names = CNames(self.space, self.helpers, hoist=True, direct=direct)
        # a scatter loop in parallel: every thread adds into its own copy of the output
        self.privatized = plan.privatized and bool(self.parallel_loop) and custom is None
        if self.privatized:
            out = self.space.use(self.expr.output.tensor)
            self.names.redirect[out.name, out.layout.value.array] = "spf_mine"
        self.layouts: dict[str, Layout] = {}
        self.b = t.Builder()
        self.semiring = plan.semiring
        if not self.semiring.is_plus_times:
            self.helpers.add("spf_math")
        self.building = plan.assembly is not None and not role.counts
        self.use_acc = False       # the statement sums into the local spf_acc

    # signature ------------------------------------------------------------------------
    def signature(self) -> str:
        params = []
        for acc in (self.expr.output, *self.expr.factors):
            if self.custom is not None and acc is self.expr.output:
                params += self.custom.params
            elif not acc.indices:
                ctype = "double *restrict" if acc is self.expr.output else "double"
                params.append(f"{ctype} {acc.tensor}")
            elif self.assembly is not None and acc is self.expr.output:
                params.append(self._assembled_param(acc.tensor))
            else:
                use = self.space.use(acc.tensor)
                self.layouts.setdefault(use.layout.key, use.layout)
                const = "" if use.is_output else "const "
                params.append(f"{const}{struct_name(use.layout)} *restrict {use.name}")
        return f"int {self.name}({', '.join(params)})"

    def _assembled_param(self, tensor: str) -> str:
        lay = self.assembly.output.layout
        self.layouts.setdefault(lay.key, lay)
        if self.role is FunctionRole.HISTOGRAM:
            return "spf_index_t *restrict spf_hist"
        if self.role.counts:
            return "int64_t *restrict spf_bound"
        if self.role is FunctionRole.STREAM:
            return f"spf_stream *restrict {tensor}"
        return f"{struct_name(lay)} *restrict {tensor}, int64_t *restrict {tensor}_size"

    # statement ------------------------------------------------------------------------
    def operand_names(self) -> set[str]:
        """The layout indices the factors' values read."""
        return set().union(*(value_names(self.space.use(acc.tensor))
                             for acc in self.expr.factors if acc.indices and not acc.pattern))

    def product(self) -> str:
        """The product of the factors (C); a mask's value is not a factor."""
        factors = [self.names.value(self.space.use(acc.tensor)) if acc.indices else acc.tensor
                   for acc in self.expr.factors if not acc.pattern]
        rhs = self.semiring.mul_c(factors)
        return f"-({rhs})" if self.expr.sign < 0 else rhs

    def add_into(self, target: str, value: str) -> t.Node:
        """``target`` combined with ``value`` by the semiring's add (``+=`` for plus)."""
        if self.semiring.omp == "+":
            return t.Assign(target, value, "+=")
        return t.Assign(target, self.semiring.add_c(target, value))

    def output_target(self) -> tuple[TensorUse | None, str, set[str]]:
        """The dense output's use (None otherwise), the C of the element the statement adds
        into, and the indices that select it."""
        a, role = self.assembly, self.role
        out_use = None if not self.expr.output.indices or a or self.custom \
            else self.space.use(self.expr.output.tensor)
        if self.custom is not None:
            return None, "", set(self.custom.names)
        if a is not None:
            return None, "", (set() if role.counts else set(a.key))
        if out_use is not None:
            return out_use, self.names.value(out_use), value_names(out_use)
        return None, f"*{self.expr.output.tensor}", set()

    def statement(self, value: Callable[[], str], target: str, use_acc: bool) -> list[t.Node]:
        """The statement for the product ``value()`` (printed only where it is used: the
        fields a value reads are declared only then)."""
        a, role = self.assembly, self.role
        if self.custom is not None:
            return self.custom.statement(value)
        if a is None:
            return [self.add_into("spf_acc" if use_acc else target, value())]
        if role.counts:   # a find's matched position is not needed to count the match
            if role is FunctionRole.BOUND_SLOTS:
                return [t.Call("++spf_n")]
            if role is FunctionRole.BOUND and a.drop_zeros:   # no branch on the data
                return [t.Assign("spf_n", f"({value()}) != {a.semiring.zero_c()}", "+=",
                                 note="zeros are not stored")]
            nodes = strategy(a).count_statement(a) if role is FunctionRole.HISTOGRAM \
                else [t.Call("++spf_n")]
        else:
            nodes = strategy(a).statement(a, "spf_v" if a.drop_zeros else value(), self.name,
                                            role)
        if a.drop_zeros:
            nodes = [t.Declare("double", "spf_v", value(), const=True),
                     t.If(f"spf_v != {a.semiring.zero_c()}", nodes, note="zeros are not stored")]
        return nodes

    def used(self, stmt_names: set[str], nest: LoopNest | None = None) -> set[str]:
        """The names the lowered code reads: the statement's, the nest's bounds and guards,
        the finds' keys and ranges (a template reads its keys at its own positions, not at
        the matched one)."""
        keys = [k for d in self.decisions if d.chosen is not None for k in d.find.keys]
        used = used_names(nest or self.nest, stmt_names,
                          lambda g: not any(is_key_guard(g, c, e) for c, e in keys))
        for d in self.decisions:
            own = {d.find.var} if d.chosen is not None else set()
            for c, e in d.find.keys:
                used |= e.names() | (Aff.var(c).names() - own)
            used |= d.find.lo.names() | d.find.hi.names()
            used |= {c.array_key for c in d.candidates if c.array_key}
        return used

    # finds ----------------------------------------------------------------------------
    def lowering(self, d: Decision, c: Choice, used: set[str]) -> FindLowering:
        return FindLowering(d, c, self.names, REGISTRY[c.algorithm], d.find.var in used)

    def versions(self, used: set[str]) -> tuple[list[list[FindLowering]], Decision | None]:
        """One list of find lowerings per version of the nest: the chosen templates, and
        for Auto's run-time choice one version per alternative of its decision (first);
        ``used``: the names the code reads."""
        chosen = [self.lowering(d, d.chosen, used) for d in self.decisions
                  if d.chosen is not None]
        runtime = next((d for d in self.decisions if d.alternatives), None)
        if runtime is None:
            return [chosen], None
        versions = [[self.lowering(d, alt if d is runtime else d.chosen, used)
                     for d in self.decisions if d.chosen is not None]
                    for alt in runtime.alternatives]
        return versions + [chosen], runtime


def kernel_code(plan: Plan, name: str, role: FunctionRole = FunctionRole.OUTPUT,
                custom: CustomStatement | None = None) -> KernelCode:
    """The signature and body of one kernel function of ``plan`` (returns 0, 1 when out of
    memory, 2 when an assembled output outgrows its arrays); ``role`` says which function of
    a kernel (see :class:`~spf.assembly.model.FunctionRole`); ``custom`` replaces the
    statement."""
    assembly = plan.assembly
    k = KernelLowering(plan, name, role, custom)
    signature = k.signature()
    lower_body(k)
    hoisted = [t.Declare(h.ctype, h.local, h.member, const=h.const) for h in k.names.hoisted()]
    if hoisted:
        hoisted.insert(0, t.Comment("the tensors' fields, read once (restrict: no output "
                                    "overlaps an input)"))
    runtimes = {REGISTRY[c.algorithm].runtime for d in k.decisions for c in d.candidates
                if REGISTRY[c.algorithm].runtime}
    storage: list[t.Definition] = []
    if k.building and role is FunctionRole.OUTPUT and strategy(assembly).cursor:
        storage = storage_c.functions(assembly.storage, name,
                                      struct_name(assembly.output.layout),
                                      strategy(assembly).flushes, assembly.any_order,
                                      assembly.last_only)
    return KernelCode(signature, hoisted + k.b.root, k.helpers, k.layouts, runtimes, k.building,
                      storage)


def cost_nodes(k: KernelLowering, d: Decision) -> list[t.Node]:
    """The comment and the constants of Auto's run-time choice for ``d``."""
    model = cost_model(k.nest, d.find, d.candidates)
    owner = model.searches
    names = k.names
    searches = f"(int64_t)({names.extent_product(owner, owner.layout.value.array)})"
    length = f"(int64_t)({names.aff(model.length)})"
    nodes: list[t.Node] = []
    formula = []
    for c in [d.chosen] + d.alternatives:
        cost = model.terms[c.algorithm]
        product = " * ".join([f"(int64_t)({names.aff(r)})" for r in cost.resets] + [length])
        per = "" if cost.per_element == 1 else f"{cost.per_element} * "
        fixed = f" + (int64_t)({names.aff(cost.fixed)})" if cost.fixed is not None else ""
        nodes.append(t.Declare("int64_t", f"spf_cost_{c.algorithm}",
                               f"{cost.per_search} * {searches} + {per}{product}{fixed}",
                               const=True))
        formula.append(f"cost({REGISTRY[c.algorithm].title}) = {cost.per_search} * W + "
                       f"{per}R_{c.algorithm} * L" + (" + X" if fixed else ""))
    titles = [REGISTRY[c.algorithm].title for c in [d.chosen] + d.alternatives]
    both = len(titles) == 2
    sized = any(model.terms[c.algorithm].fixed is not None for c in d.candidates)
    comment = (f"Auto: {', '.join(titles[:-1])} and {titles[-1]} are "
               f"{'both' if both else 'all'} valid; pick the "
               f"{'cheaper' if both else 'cheapest'} from the operand sizes:\n"
               + ",\n".join(formula)
               + f"\n(W searches, L range length, R state resets{', X map size' if sized else ''}"
               "; see CostModel).")
    return [t.Comment(comment)] + nodes


def lower_body(k: KernelLowering) -> None:
    """Declarations, the loop nest (one version per run-time choice), the exits."""
    b, a, role = k.b, k.assembly, k.role
    stmt_names = k.operand_names()
    out_use, target, out_vars = k.output_target()
    stmt_names |= out_vars
    if a is not None and role.counts:
        stmt_names = (stmt_names if a.drop_zeros else set()) | (
            {a.key[0]} if role is FunctionRole.HISTOGRAM else set())
    if not k.parallel_loop:
        k.nest, notes = coalesce(k.nest, k.space, lambda nest: k.used(stmt_names, nest),
                                 _fixed_levels(k))
        k.level_notes = {**k.level_notes, **notes}
    used = k.used(stmt_names)
    versions, runtime = k.versions(used)
    stateful = _stateful(versions)
    for f in stateful:
        b.add(*f.algorithm.declare(f))
    if a is not None and role.counts:
        if role is not FunctionRole.HISTOGRAM:
            b.add(t.Declare("int64_t", "spf_n", "0"))
    elif a is not None:    # before anything that can fail: the exits release it
        b.add(*assembly_c.declare(a, k.names, k.name, role))
    for f in stateful:
        b.add(*f.algorithm.allocate(f))
    if k.building and strategy(a).counts_first:
        inputs = [acc.tensor if not acc.indices else k.space.use(acc.tensor).name
                  for acc in k.expr.factors]
        b.add(*strategy(a).start(a, k.name, inputs))
    if k.custom is not None and k.custom.prologue:
        b.add(*k.custom.prologue)
    positions = [i for i, lv in enumerate(k.nest.levels) if lv.var in out_vars]
    acc_level = max(positions) if positions else -1
    use_acc = a is None and k.custom is None and \
        any(lv.kind is LevelKind.LOOP for lv in k.nest.levels[acc_level + 1:])
    # each element written once, by a store of its whole sum: no zeroing pass, no re-read
    store = use_acc and out_use is not None and not k.expr.accumulate and \
        _stores_every_element(k.nest, k.decisions, acc_level)
    if a is None and k.custom is None and not k.expr.accumulate and not store \
            and not k.privatized:
        b.add(*_zero_output(k, out_use))
    hooks = _hooks(k, acc_level, target if use_acc else None, store)
    statement = k.statement(k.product, target, use_acc)
    k.use_acc = use_acc
    reduction = ["spf_acc"] if use_acc and acc_level == -1 else []
    if runtime is None:
        _nest(k, versions[0], used, statement, hooks, reduction)
    else:
        b.add(*cost_nodes(k, runtime))
        _runtime_choice(k, runtime, versions, used, statement, hooks, reduction)
    _exits(k, stateful)


def _fixed_levels(k: KernelLowering) -> set[int]:
    """Levels a loop transformation must leave in place: the finds' (their loops, key
    reads and state resets) and those where code is hooked in (groups, tiles, custom)."""
    fixed: set[int] = set()
    for d in k.decisions:
        fixed |= {d.find.level, *d.find.key_levels}
        fixed |= {c.init_level for c in d.candidates if c.init_level is not None}
    if k.assembly is not None and k.assembly.group_level is not None:
        fixed.add(k.assembly.group_level)
    if k.custom is not None and k.custom.at is not None:
        fixed.add(k.custom.at[0])
    names = [lv.var for lv in k.nest.levels]
    fixed |= {names.index(tile) for tile in k.space.tiles if tile in names}
    return fixed


def _stateful(versions: list[list[FindLowering]]) -> list[FindLowering]:
    """The finds whose state is declared: every chosen one and each alternative once."""
    out = list(versions[-1])
    for version in versions[:-1]:
        out += [f for f in version if f.choice is not f.decision.chosen]
    return out


def _zero_output(k: KernelLowering, out_use: TensorUse | None) -> list[t.Node]:
    out, zero = k.expr.output.tensor, k.semiring.zero_c()
    if out_use is None:
        return [t.Assign(f"*{out}", zero)]
    arr = out_use.layout.value.array
    size = k.names.extent_product(out_use, arr)
    if k.parallel_loop or zero != "0.0":   # with all threads (it can be large), or a fill
        fill = [] if zero == "0.0" else [t.Comment(f"elements no product reaches hold "
                                                   f"{k.semiring.name}'s zero, {zero}")]
        return fill + [t.For("size_t spf_z = 0", f"spf_z < {size}", "++spf_z",
                             [t.Assign(f"{k.names.field(out_use, arr)}[spf_z]", zero)],
                             braces=False, parallel=t.Parallel(t.Schedule.STATIC)
                             if k.parallel_loop else None)]
    return [t.Call(f"memset({k.names.field(out_use, arr)}, 0, sizeof(double) * {size})")]


def _chain(hooks: dict[int, Hook], level: int, hook: Hook) -> None:
    """Run ``hook`` at ``level`` after what is already there."""
    previous = hooks.get(level)

    def both(b: t.Builder) -> None:
        if previous:
            previous(b)
        hook(b)
    hooks[level] = both


def _hooks(k: KernelLowering, acc_level: int, acc_target: str | None,
           store: bool) -> dict[int, Hook]:
    hooks: dict[int, Hook] = {}
    a = k.assembly
    if acc_target is not None:
        def open_acc(b: t.Builder) -> None:
            b.add(t.Declare("double", "spf_acc", k.semiring.zero_c()))
            b.defer(t.Assign(acc_target, "spf_acc") if store
                    else k.add_into(acc_target, "spf_acc"))
        hooks[acc_level] = open_acc
    if k.building and a.group_level is not None:
        _chain(hooks, a.group_level,
               lambda b: b.add(*strategy(a).group_check(a, k.name, k.role)))
    ends = strategy(a).group_end(a) if k.building and len(a.key) > 1 else []
    if ends:
        order = [lv.var for lv in k.nest.levels]
        _chain(hooks, max(order.index(c) for c in a.key[:-1]),
               lambda b: [b.defer(n) for n in reversed(ends)])
    if k.custom is not None and k.custom.at is not None:
        level, nodes = k.custom.at
        _chain(hooks, level, lambda b: b.add(*nodes))
    for tile in k.space.tiles:
        conds = [tile_condition(k.nest, skip, k.names) for skip in k.plan.skips.get(tile, [])]
        if conds:
            def skip(b: t.Builder, conds=conds) -> None:
                b.add(t.Comment("skip tiles that cannot hold a match (the keys are sorted)"))
                b.nest(t.If(" && ".join(conds)))
            _chain(hooks, [lv.var for lv in k.nest.levels].index(tile), skip)
    return hooks


def _nest(k: KernelLowering, finds: list[FindLowering], used: set[str],
          statement: list[t.Node], hooks: dict[int, Hook], reduction: list[str]) -> None:
    b = k.b
    depth = b.depth
    parallel: dict[str, t.Parallel] = {}
    team = None
    if k.parallel_loop:
        loops = [lv.var for lv in k.nest.levels if lv.kind is LevelKind.LOOP]
        par = [lv.var for lv in k.nest.levels].index(k.parallel_loop)
        private = [v for f in finds for v in f.algorithm.thread_private(f, par)]
        outer = k.parallel_loop == loops[0]
        if not outer:     # every thread runs the outer loops; this one's iterations are shared
            team = loops[0]
        even = not outer or _even_iterations(k, par)
        parallel[k.parallel_loop] = t.Parallel(
            t.Schedule.STATIC if even else t.Schedule.GUIDED, team=outer, private=private,
            reduction=reduction, reduction_op=k.semiring.omp or "+")
    if k.privatized:
        _private_nest(k, finds, used, statement, hooks, parallel)
        return
    lower_levels(b, k.nest, k.names, used, finds, statement, hooks, k.level_notes, parallel,
                 team, _simd(k))
    b.close_to(depth)
    b.flush()


def _even_iterations(k: KernelLowering, par: int) -> bool:
    """Whether every iteration of level ``par`` does the same work: each loop inside it runs
    a fixed number of times (bounds of sizes and constants only: no index array, no enclosing
    index) and no find runs inside it.  Then equal contiguous shares (a static schedule)
    balance the threads; otherwise guided."""
    indices = {lv.var for lv in k.nest.levels}
    inner = k.nest.levels[par + 1:]
    return not any(aff.calls() or aff.names() & indices
                   for lv in inner if lv.kind is LevelKind.LOOP for aff, _ in lv.lower + lv.upper) \
        and not any(d.find.level > par for d in k.decisions)


def _private_nest(k: KernelLowering, finds: list[FindLowering], used: set[str],
                  statement: list[t.Node], hooks: dict[int, Hook],
                  parallel: dict[str, t.Parallel]) -> None:
    """The nest in a parallel region whose threads share out the outer loop, each adding into
    its own copy of the output (``spf_mine``, zeroed by that thread: in parallel, and in the
    cache of the core that uses it); after the loop the threads share out the elements,
    summing the team's copies into the output."""
    b, depth = k.b, k.b.depth
    out = k.space.use(k.expr.output.tensor)
    arr = out.layout.value.array
    size, data = k.names.extent_product(out, arr), k.names.field(out, arr, own=True)
    k.helpers.add("spf_omp")
    b.add(t.Comment(f"a private copy of {out.name} per thread, zeroed by its thread, added "
                    f"into {out.name} after the loop (+ 1: malloc(0) may return NULL)"),
          t.Declare("size_t", "spf_size", size, const=True),
          t.Declare("int", "spf_threads", "spf_max_threads()", const=True),
          t.If("spf_size > (SIZE_MAX / sizeof(double) - 1) / (size_t)spf_threads",
               [t.Return("1")], braces=False),
          t.Declare("double", "*spf_priv",
                    "malloc(((size_t)spf_threads * spf_size + 1) * sizeof(double))"),
          t.If("!spf_priv", [t.Return("1")], braces=False))
    b.nest(t.Team())
    b.nest(t.Block())
    b.add(t.Declare("int", "spf_team", "spf_team_size()", const=True),
          t.Declare("double *restrict", "spf_mine",
                    "spf_priv + (size_t)spf_thread() * spf_size"),
          t.For("size_t spf_z = 0", "spf_z < spf_size", "++spf_z",
                [t.Assign("spf_mine[spf_z]", k.semiring.zero_c())], braces=False))
    parallel[k.parallel_loop] = replace(parallel[k.parallel_loop], team=False)
    lower_levels(b, k.nest, k.names, used, finds, statement, hooks, k.level_notes, parallel,
                 None, _simd(k))
    b.close_to(depth + 2)
    b.flush()
    add = [k.add_into("spf_s", "spf_priv[(size_t)spf_t * spf_size + spf_z]")]
    b.add(t.For("size_t spf_z = 0", "spf_z < spf_size", "++spf_z", [
        t.Declare("double", "spf_s", f"{data}[spf_z]" if k.expr.accumulate
                  else k.semiring.zero_c()),
        t.For("int spf_t = 0", "spf_t < spf_team", "++spf_t", add, braces=False),
        t.Assign(f"{data}[spf_z]", "spf_s")], parallel=t.Parallel(t.Schedule.STATIC, team=False)))
    b.close_to(depth)
    b.add(t.Call("free(spf_priv)"))


def _simd(k: KernelLowering) -> dict[str, t.Simd]:
    """The plan's SIMD loop (a sum kept in ``spf_acc`` as the lanes' partial sums), unless
    the statement is not a plain update (a custom pass, an assembled output)."""
    v = k.plan.vector
    if v is None or k.custom is not None or k.assembly is not None:
        return {}
    if v.reduction:
        return {v.var: t.Simd(["spf_acc"], k.semiring.omp or "+")} if k.use_acc else {}
    return {v.var: t.Simd()}


def _runtime_choice(k: KernelLowering, d: Decision, versions: list[list[FindLowering]],
                    used: set[str], statement: list[t.Node], hooks: dict[int, Hook],
                    reduction: list[str]) -> None:
    """``if (cost of alternative 1 is least) {nest 1} else if ... else {nest}``."""
    b = k.b
    chosen = f"spf_cost_{d.chosen.algorithm}"
    alts = [f"spf_cost_{c.algorithm}" for c in d.alternatives]
    for i, (version, cost) in enumerate(zip(versions, alts)):
        cond = " && ".join([f"{cost} < {chosen}"] + [f"{cost} <= {later}"
                                                     for later in alts[i + 1:]])
        node = t.If(cond)
        b.nest(node)
        _nest(k, version, used, statement, hooks, reduction)
        b.close()
        b.nest_else(node)
    _nest(k, versions[-1], used, statement, hooks, reduction)
    b.close_to(b.depth - len(alts))


def _exits(k: KernelLowering, stateful: list[FindLowering]) -> None:
    b, a, role = k.b, k.assembly, k.role
    if k.custom is not None and k.custom.epilogue:
        b.add(*k.custom.epilogue)
    if role.counts and role is not FunctionRole.HISTOGRAM:
        b.add(t.Assign("*spf_bound", "spf_n"))
    elif k.building:
        b.add(*strategy(a).finish(a, k.name, role))
    releases = [n for f in stateful for n in f.algorithm.release(f)]
    if k.building:
        releases += strategy(a).release(a, role)
    if not releases and not k.building:
        b.add(t.Return("0"))
        return
    b.add(*releases, t.Return("0"))
    failing = k.building and role is FunctionRole.OUTPUT
    if t.jumps_to(b.root, "spf_out_of_memory"):
        b.add(t.Label("spf_out_of_memory"))
        if failing:
            b.add(t.Assign("spf_status", "1"))
    if failing:
        b.add(t.Label("spf_fail"), *releases, t.Return("spf_status"))
    else:
        b.add(*releases, t.Return("1"))


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
