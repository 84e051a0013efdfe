"""Polyhedral scanning of an iteration space into a loop nest (Algorithm 1 without SMT).

1. Schedule: variables are taken in loop order; after each, every variable that an
   equality now determines becomes an assignment (``i = A.idx(pA)``).
2. Encode with one isl dimension per UF call, right after its last argument.
3. Per dimension k: bounds and guards from the projection onto dimensions 0..k, gisted
   against the projection onto 0..k-1.  UF-call dimensions are reads; their constraints
   become guards (``x.idx(x_p) = j``).
4. Guards that the rest of the nest already implies (e.g. "this loop is non-empty") are
   dropped: a guard goes when the executed set stays inside the iteration space without it.
5. Each index-array read comes after the constraints of its tensor's relation that the levels
   before it can test, as the layout's own scan makes it (:meth:`Scanner._guard_reads`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial

import islpy as isl

from ..concurrency import require
from ..errors import SpecError
from ..front.isl_bridge import Encoding, encode, isl_limit
from ..front.terms import Aff, Constraint, FloorDiv, UFCall
from .iteration_space import IterationSpace
from .z3limit import Z3Limit


class LevelKind(StrEnum):
    """What a level of the nest is: a loop, an assignment ``var = expr``, or the read of an
    index-array value (``var = f(...)``) that guards test."""

    LOOP = "loop"
    ASSIGN = "assign"
    READ = "read"


@dataclass
class Level:
    """One dimension of the loop nest."""

    var: str
    kind: LevelKind
    expr: Aff | None = None                    # assign: var = expr
    call: UFCall | None = None                 # read: the index-array read this dim stands for
    lower: list[tuple[Aff, int]] = field(default_factory=list)  # var >= ceil(aff / den)
    upper: list[tuple[Aff, int]] = field(default_factory=list)  # var <= floor(aff / den)
    guards: list[Constraint] = field(default_factory=list)
    dropped: list[Constraint] = field(default_factory=list)     # guards proven redundant

    @property
    def assigned(self) -> Aff:
        """The value an assignment level gives its variable."""
        if self.kind is not LevelKind.ASSIGN or self.expr is None:
            raise ValueError(f"level {self.var} ({self.kind}) is not an assignment")
        return self.expr

    @property
    def read_call(self) -> UFCall:
        """The index-array read a read level stands for."""
        if self.kind is not LevelKind.READ or self.call is None:
            raise ValueError(f"level {self.var} ({self.kind}) is not an index-array read")
        return self.call

    def constant_span(self) -> tuple[int, int] | None:
        """A loop's constant lower bound and the constant its extent is at most (a SELL
        slice's C rows: ``r < min(C, numRows - C*s)``); None unless both are constants."""
        lows = [-((-a.const) // den) for a, den in self.lower if a.is_const]
        highs = [a.const // den for a, den in self.upper if a.is_const]
        if len(lows) != len(self.lower) or not lows or not highs:
            return None
        return max(lows), min(highs) - max(lows) + 1

    def bound_constraints(self) -> list[Constraint]:
        v = Aff.var(self.var)
        out = [Constraint.ge(v * den, aff) for aff, den in self.lower]
        out += [Constraint.ge(aff, v * den) for aff, den in self.upper]
        if self.kind is LevelKind.ASSIGN:
            out.append(Constraint.eq(v, self.assigned))
        return out


@dataclass
class LoopNest:
    """The scanned nest of one statement."""

    space: IterationSpace
    levels: list[Level]
    statement_guards: list[Constraint]
    schedule: list[str]
    z3: Z3Limit = field(default_factory=Z3Limit)    # time limit of queries about this nest
    empty: bool = False         # the space holds no point: every loop runs no iteration

    def level(self, var: str) -> Level:
        for lv in self.levels:
            if lv.var == var:
                return lv
        raise KeyError(var)


def _transitive_deps(enc: Encoding, base: set[str]) -> dict[str, set[str]]:
    """The base variables each call depends on, through nested calls too (``names()``
    looks inside them)."""
    return {var: set().union(*(a.names() for a in call.args)) & base
            for var, call in enc.call_of.items()}


class Scanner:
    """Schedules and scans one iteration space."""

    def __init__(self, space: IterationSpace):
        self.space = space
        self.base = list(space.variables)
        self.enc = encode(self.base, space.all_constraints)
        self.full = self.enc.isl_set([space.all_constraints])
        self.empty = self.full.is_empty()     # no point: every loop runs no iteration
        # what the relation (not the properties) says: definitions come from it alone, so
        # that no index-array read is placed before the levels that make its position one of
        # the array's (a range of ``rowPtr`` in 0..1 implies ``pk = 0``, but ``colIdx[0]``
        # exists only where some row holds position 0)
        self.relation = self.enc.isl_set([space.constraints])
        self.deps = _transitive_deps(self.enc, set(self.base))

    # -- scheduling ---------------------------------------------------------------
    def _restricted(self, keep: set[str]) -> tuple[isl.Set, Encoding]:
        kept = [d for d in self.enc.dims
                if (d in keep) or (d in self.enc.call_of and self.deps[d] <= keep)]
        s = self.relation
        for pos in range(len(self.enc.dims) - 1, -1, -1):
            if self.enc.dims[pos] not in kept:
                s = s.project_out(isl.dim_type.set, pos, 1)
        sub = Encoding(dims=kept, call_of={d: c for d, c in self.enc.call_of.items() if d in kept},
                       var_of={c: d for d, c in self.enc.call_of.items() if d in kept},
                       params=self.enc.params)
        return s, sub

    def _definition(self, var: str, placed: list[str]) -> Aff | None:
        """An affine definition ``var = expr(placed)`` if the space implies one."""
        s, sub = self._restricted(set(placed) | {var})
        hull = s.affine_hull()
        for c in sub.decode_basic_set(hull):
            if not c.is_eq:
                continue
            k = c.aff.coeff(var)
            rest = c.aff - Aff.var(var, k)
            if k == 0 or var in rest.names() or any(
                    isinstance(a, FloorDiv) for a in rest.atoms()):
                continue
            if abs(k) == 1:
                return rest * -k
            if self.space.expr.derived:
                # k*var = -rest, as a strided access gives (``A(i, 2*j)``): var =
                # floor(-rest/k), the equality stays a guard (where k divides -rest); only
                # with index arithmetic (a layout's own strides keep their loops)
                return Aff.var(FloorDiv(rest * (-1 if k > 0 else 1), abs(k)))
        return None

    def schedule(self, order: list[str]) -> tuple[list[str], dict[str, Aff]]:
        placed: list[str] = []
        defs: dict[str, Aff] = {}
        logical = [v for v in self.base if v in self.space.indices]
        others = [v for v in self.base if v not in self.space.indices]

        def close() -> None:
            changed = True
            while changed:
                changed = False
                for v in logical + others:
                    if v in placed:
                        continue
                    d = self._definition(v, placed)
                    if d is not None:
                        placed.append(v)
                        defs[v] = d
                        changed = True
                        break

        close()
        for v in order:
            if v not in placed:
                placed.append(v)
                close()
        for v in self.base:
            if v not in placed:
                placed.append(v)
                close()
        return placed, defs

    # -- scanning -----------------------------------------------------------------
    def scan(self, order: list[str]) -> LoopNest:
        require("scanning a loop nest")
        schedule, defs = self.schedule(order)
        enc = encode(schedule, self.space.all_constraints)
        full = enc.isl_set([self.space.all_constraints])
        facts = enc.isl_set([self.space.facts])
        n = len(enc.dims)
        proj = [full] * n
        for k in range(n - 2, -1, -1):
            proj[k] = proj[k + 1].project_out(isl.dim_type.set, k + 1, 1)
        params_only = proj[0].project_out(isl.dim_type.set, 0, 1) if n else full
        levels: list[Level] = []
        for k, var in enumerate(enc.dims):
            ctx = (proj[k - 1] if k else params_only).add_dims(isl.dim_type.set, 1)
            here = proj[k]
            if here.n_basic_set() > 1:
                here = here.coalesce()
            if here.n_basic_set() > 1:
                here = isl.Set.from_basic_set(here.simple_hull())
            gist = _gist(here, ctx)
            sub = Encoding(dims=enc.dims[:k + 1],
                           call_of={d: c for d, c in enc.call_of.items() if d in enc.dims[:k + 1]},
                           var_of={}, params=enc.params)
            cons = _decoded(gist, sub)
            atom = enc.call_of.get(var, var)
            mine = [c for c in cons if c.aff.coeff(atom) or _in_floor(c.aff, atom)]
            if var in enc.call_of:
                levels.append(Level(var, LevelKind.READ, call=enc.call_of[var], guards=mine))
            elif var in defs:
                expr = defs[var]
                defining = Constraint.eq(Aff.var(var), expr)
                levels.append(Level(var, LevelKind.ASSIGN, expr=expr,
                                    guards=[c for c in mine if c != defining]))
            else:
                levels.append(self._loop_level(var, mine, enc.dims[k + 1:],
                                               partial(_relaxed, here, ctx, sub)))
        nest = LoopNest(self.space, levels, [], schedule, empty=self.empty)
        self._prune(nest, enc, full, facts)
        self._guard_reads(nest, enc)
        _prefer_named(nest)
        return nest

    def _loop_level(self, var: str, cons: list[Constraint], inner: list[str],
                    relaxed: Callable[[], list[Constraint]]) -> Level:
        """The loop over ``var`` bounded by ``cons``.  A constraint with ``var`` inside a
        floor division (``3*ceil(pi/3) < numRows``: a stride's multiple of pi must be a row)
        cannot bound it, as its bound would read ``var`` itself: it is tested inside the loop,
        and a side left without a bound takes the bound of the level without existential
        variables (``relaxed()``, Fourier-Motzkin: ``pi < numRows``).  In a space without
        a point (``R(i,j) = A(i+1, -j-1)``: ``-j-1`` is never a column) a loop left unbounded
        runs no iteration."""
        lv = Level(var, LevelKind.LOOP)
        for c in cons:
            if _in_floor(c.aff, var):
                lv.guards.append(c)
            else:
                _bound(lv, c)
        for c in [g for g in lv.guards if g.is_eq and not _in_floor(g.aff, var)]:
            if not lv.lower or not lv.upper:     # var = e: one trip (none where e is not
                lv.guards.remove(c)              # a multiple of var's coefficient)
                _bound(lv, Constraint.ge(c.aff, Aff.num(0)))
                _bound(lv, Constraint.ge(c.aff * -1, Aff.num(0)))
        if not lv.lower or not lv.upper:
            missing = (not lv.lower, not lv.upper)
            for c in relaxed():
                k = c.aff.coeff(var)
                if c.is_eq or not k or _in_floor(c.aff, var) or not missing[k < 0]:
                    continue
                _bound(lv, c)
        if (not lv.lower or not lv.upper) and self.empty:
            lv.lower, lv.upper = [(Aff.num(0), 1)], [(Aff.num(-1), 1)]   # no point: no trip
        if not lv.lower or not lv.upper:
            self._unbounded(var, "lower" if not lv.lower else "upper", inner)
        return lv

    def _unbounded(self, var: str, side: str, inner: list[str]) -> None:
        """SpecError for a loop without a ``side`` bound: the variables its bounds need when
        the loop order puts them inside it, else that nothing bounds it."""
        sign = 1 if side == "lower" else -1
        needs = {n for c in self.space.all_constraints
                 if not c.is_eq and c.aff.coeff(var) * sign > 0 for n in c.names()}
        culprits = [v for v in inner if v in needs]
        def shown(v: str) -> str:
            return v if v in self.space.indices else v.replace("_", ".", 1)
        if not culprits:
            raise SpecError(f"loop over {shown(var)} is unbounded: the layouts and bounds give "
                            f"no {side} bound")
        names = ", ".join(shown(v) for v in culprits)
        raise SpecError(f"loop order: {shown(var)} cannot run outside {names}: its {side} bound "
                        f"depends on {names}; place {names} before {shown(var)}")

    def _prune(self, nest: LoopNest, enc: Encoding, full: isl.Set, facts: isl.Set) -> None:
        """Drop guards implied by the rest of the nest plus the facts; add what is missing.

        A guard at or above the level that selects a dense output's element is kept when
        without it the levels up to there no longer keep the element inside the output:
        the element is written there (a sum's accumulator) whether or not the finds and
        loops below match, so a bound that only a find below implies (``R(i,j,k) =
        T(i-k, j, k-c) * T(i,j,k)``: the find of ``T(i,j,k)`` bounds ``i``) would let it
        write past the output."""
        def executed(skip: Constraint | None = None, skip_level: Level | None = None,
                     upto: int | None = None) -> isl.Set:
            cons: list[Constraint] = []
            for lv in nest.levels[:upto]:
                cons.extend(lv.bound_constraints())
                cons.extend(g for g in lv.guards if not (lv is skip_level and g == skip))
            return enc.isl_set([cons]).intersect(facts)

        written, bounds = _output_bounds(nest)
        inside = enc.isl_set([bounds])
        keep = bool(bounds) and executed(upto=written + 1).is_subset(inside)
        for k in range(len(nest.levels) - 1, -1, -1):
            lv = nest.levels[k]
            for g in list(lv.guards):
                if executed(g, lv).is_subset(full) and not (
                        keep and k <= written and
                        not executed(g, lv, written + 1).is_subset(inside)):
                    lv.guards.remove(g)
                    lv.dropped.append(g)
        rest = full.gist(executed())
        if not rest.plain_is_universe():
            for b in rest.get_basic_sets():
                nest.statement_guards.extend(enc.decode_basic_set(b))
            if rest.n_basic_set() > 1:
                raise SpecError("the iteration space is a union that the scanner cannot yet "
                                "express as one guard")

    def _guard_reads(self, nest: LoopNest, enc: Encoding) -> None:
        """Test before each index-array read the constraints of its tensor's relation that
        the levels before it can test.  A tensor that passed validation reads in bounds under
        those constraints (:mod:`spf.read_check`), but the scanner may leave one to an inner
        level that implies it with the layout's facts about values read only there, or to
        the context of parameters under which the space has a point (``A(i + 3, j)`` over
        SymCSR: ``3 <= pi <= colIdx(pk) < numRows`` bounds ``pi`` only through ``colIdx``);
        the read would then come first, past the array's end (a 0x0 operand's ``rowPtr[4]``).
        Each such constraint becomes a bound of its last variable's loop, or a guard there."""
        at = {d: k for k, d in enumerate(enc.dims)}
        read_at = {call: at[v] for v, call in enc.call_of.items()}

        def level(c: Constraint) -> int:
            """The last level defining an atom of ``c`` (-1: parameters only)."""
            return max([at.get(n, -1) for n in c.names()]
                       + [read_at.get(call, len(at)) for call in c.calls()], default=-1)

        owned = {u.name: {*u.vars, *(u.symbol(f) for f in u.layout.fields)}
                 for u in self.space.uses}
        for k, lv in enumerate(nest.levels):
            if lv.kind is not LevelKind.READ or k == 0:    # nothing runs before level 0
                continue
            tensor = lv.read_call.name.split(".", 1)[0]
            mine = owned.get(tensor, set())
            needed = [c for c in self.space.constraints if level(c) < k and (
                c.names() & mine or any(f.name in mine for f in c.calls()))]
            if not needed:
                continue
            known = [c for prior in nest.levels[:k]
                     for c in prior.bound_constraints() + prior.guards]
            known += [c for c in self.space.facts if level(c) < k]
            executed = enc.isl_set([known])
            if executed.is_subset(enc.isl_set([needed])):
                continue
            for c in needed:
                if not executed.is_subset(enc.isl_set([[c]])):
                    _place(nest.levels[max(level(c), 0)], c)
                    executed = executed.intersect(enc.isl_set([[c]]))


def _place(lv: Level, c: Constraint) -> None:
    """``c`` tested at ``lv``: a bound of its loop where it bounds the loop's variable,
    else a guard."""
    if lv.kind is LevelKind.LOOP and not c.is_eq and c.aff.coeff(lv.var) \
            and not _in_floor(c.aff, lv.var):
        _bound(lv, c)
    else:
        lv.guards.append(c)


def _output_bounds(nest: LoopNest) -> tuple[int, list[Constraint]]:
    """The last level defining a variable that selects a dense output's element (-1: none)
    and the constraints that keep that element inside the output (``0 <= R_p0 < R.n0``)."""
    space = nest.space
    out = space.expr.output
    if not out.indices or space.assembled is not None:
        return -1, []
    names = set(space.use(out.tensor).vars)
    bounds = [c for c in space.constraints if c.names() & names and not c.calls()
              and not c.names() & (set(space.variables) - names)]
    return max((k for k, lv in enumerate(nest.levels) if lv.var in names), default=-1), bounds


def _bound(lv: Level, c: Constraint) -> None:
    """``c`` (affine in ``lv``'s variable) as a bound of the loop, or an equality as a
    guard."""
    k = c.aff.coeff(lv.var)
    rest = c.aff - Aff.var(lv.var, k)
    if c.is_eq:
        lv.guards.append(c)
    elif k > 0:      # k*var + rest >= 0  ->  var >= ceil(-rest / k)
        lv.lower.append((-rest, k))
    else:            # var <= floor(rest / -k)
        lv.upper.append((rest, -k))


def _in_floor(aff: Aff, atom: str | UFCall) -> bool:
    """Whether ``atom`` (a variable or an index-array read) occurs inside a floor division
    of ``aff``."""
    return any(isinstance(a, FloorDiv) and (bool(a.num.coeff(atom)) or _in_floor(a.num, atom))
               for a in aff.atoms())


def _decoded(s: isl.Set, enc: Encoding) -> list[Constraint]:
    """The constraints of ``s`` (one basic set, or none)."""
    return [c for b in s.get_basic_sets() for c in enc.decode_basic_set(b)]


def _relaxed(here: isl.Set, ctx: isl.Set, enc: Encoding) -> list[Constraint]:
    """The constraints of ``here`` without its existential variables (eliminated: a larger
    set), simplified in ``ctx``, as one basic set."""
    s = here.remove_divs().gist(ctx).coalesce()
    if s.n_basic_set() > 1:
        s = isl.Set.from_basic_set(s.simple_hull())
    return _decoded(s, enc)


def _gist(here: isl.Set, ctx: isl.Set) -> isl.Set:
    """``here`` (one basic set) simplified in the context ``ctx``, as one basic set: its
    constraints are conjoined into bounds and guards.  isl's gist may split it into a union
    (``y(i) = B(i,2*j) * x(j)`` over DIA: ``offset <= 0``, or ``0 < offset`` with a parity
    condition), whose pieces' constraints conjoined would contradict; then the level keeps
    the constraints without existential variables (a larger set: what it leaves out, the
    inner levels or the statement's guards test, :meth:`Scanner._prune`)."""
    gist = here.gist(ctx)
    if gist.n_basic_set() > 1:
        gist = gist.coalesce()
    if gist.n_basic_set() > 1:
        gist = here.remove_divs().gist(ctx).coalesce()
    if gist.n_basic_set() > 1:
        gist = isl.Set.from_basic_set(gist.simple_hull())
    return gist


def _prefer_named(nest: LoopNest) -> None:
    """Write index-array reads that an assignment names by that name (``x.idx(p) = j``)."""
    names: dict[UFCall, Aff] = {}
    for lv in nest.levels:
        if lv.kind is LevelKind.ASSIGN and lv.expr is not None:
            lv.expr = lv.expr.substitute(names)
            if len(lv.expr.terms) == 1 and lv.expr.const == 0 and lv.expr.terms[0][1] == 1 \
                    and isinstance(lv.expr.terms[0][0], UFCall):
                names.setdefault(lv.expr.terms[0][0], Aff.var(lv.var))
        lv.guards = [g.substitute(names) for g in lv.guards]
        lv.lower = [(a.substitute(names), d) for a, d in lv.lower]
        lv.upper = [(a.substitute(names), d) for a, d in lv.upper]
    nest.statement_guards = [g.substitute(names) for g in nest.statement_guards]


def scan(space: IterationSpace, order: list[str], z3: Z3Limit | None = None) -> LoopNest:
    """Scan ``space`` with loops in ``order`` (remaining variables follow); ``z3``: the time
    limit of later queries about the nest (default :data:`~spf.middle.z3limit.Z3_TIMEOUT_MS`)."""
    with isl_limit(f"scanning the iteration space of {space.expr}", space.expr.source):
        nest = Scanner(space).scan(order)
    return nest if z3 is None else replace(nest, z3=z3)
