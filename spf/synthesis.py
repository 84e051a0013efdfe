"""Find synthesis (paper Sec. 6.2-6.3, Appendix A): replace guard loops by find templates.

A *find* is a loop over positions ``p`` of one tensor whose index-array reads ``f(p)`` are
compared for equality with values ``e`` fixed by the enclosing loops (``x.idx(x_p) = j``).
For each template the assumptions are checked with Z3 over two instances of the enclosing
loops (unprimed ``@1`` executes before primed ``@2``):

- C  = C1 (lexicographic order of the instances) ∧ C2 (loop bounds) ∧ C3 (other conditions:
  assignments, guards) ∧ P5 (properties of the index arrays read by the enclosing loops);
- C4 = the find condition ``f(q) = e`` at a position ``q``; P6 = the properties of the
  searched index array, instantiated at the positions involved (quantifier-free);
- A7 = the state indices are equal in both instances; A8 = the direction positions are
  visited in; A9 = the stop condition ``f(q) < e`` (SeqIter advances while it holds);
  A10 = exclusivity: a position skipped by one instance is not a match of it.

SeqIter applies iff both are UNSAT:

- Eq. 3 (no match is skipped across instances): C ∧ A7 ∧ P6 ∧ A8/A9 (instance 1 advanced past
  ``q``: ``f(q) < e@1``, which is A10 for instance 1) ∧ C4 (``q`` matches instance 2);
- Eq. 4 (no match after the stop point): C ∧ P6 ∧ A8 (``q`` before ``r``) ∧ ¬A9 at ``q``
  (the scan stops there) ∧ ``f(q) != e`` ∧ C4 at ``r``.

and the instances sharing a state search the same range.  State indices are found by
Algorithm 3: start from all enclosing loop indices and reduced indices, drop them innermost
first (loop indices before reduced indices) while the assumptions still hold.  A query Z3
leaves undecided (its time limit) proves nothing: the assumption counts as failed, so at
worst the guard loop stays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import z3

from .errors import SynthesisError
from .iteration_space import IterationSpace, TensorUse
from .scan import LoopNest
from .smt import InstanceEncoder, symbols_of as _symbols
from .terms import Aff, Constraint, UFCall

ALGORITHMS = ("seqiter", "hashmap", "binsearch", "loop")


@dataclass
class Find:
    """A guard loop that looks up positions of one tensor by coordinate."""

    level: int                          # index of the loop level in nest.levels
    var: str                            # the position variable (loop index)
    use: TensorUse
    keys: list[tuple[UFCall, Aff]]      # f(p) == e, one per searched coordinate
    key_levels: list[int]               # read levels holding the key guards
    lo: Aff                             # the first lower bound
    hi: Aff                             # the first upper bound (inclusive)
    lows: list[Aff] = field(default_factory=list)    # all lower bounds (max of them)
    highs: list[Aff] = field(default_factory=list)   # all upper bounds (min of them)

    @property
    def exact(self) -> bool:
        """One lower and one upper bound: the templates take the range [lo, hi]."""
        return len(self.lows) <= 1 and len(self.highs) <= 1

    def describe(self) -> str:
        conds = " and ".join(f"{c} = {e}" for c, e in self.keys)
        return f"{self.var} in [{self.lo}, {self.hi}] with {conds}"


@dataclass
class Choice:
    """A valid template with its synthesized arguments."""

    algorithm: str
    direction: int = 1                  # +1: positions visited upwards, -1: downwards
    compare: str = "<"                  # scan/search advances while key <compare> target
    state: list[str] = field(default_factory=list)
    unique: bool = True                 # at most one match per search
    init_level: int | None = None       # state (re)initialised just above this level
    array_key: str | None = None        # state index keying an array of states
    key_extent: Aff | None = None       # 0 <= array_key < key_extent
    why: str = ""

    def describe(self) -> str:
        parts = [self.algorithm]
        if self.algorithm == "seqiter":
            parts.append(f"{'forward' if self.direction > 0 else 'backward'}, advancing while "
                         f"key {self.compare} target")
        if self.algorithm == "binsearch":
            parts.append("over increasing keys" if self.compare == "<" else
                         "over decreasing keys")
        if self.algorithm in ("seqiter", "hashmap"):
            parts.append(f"state indices {{{', '.join(self.state)}}}")
        parts.append("unique match" if self.unique else "several matches")
        return ", ".join(parts)


@dataclass
class Decision:
    find: Find
    chosen: Choice | None                       # None: keep the guard loop
    valid: dict[str, Choice] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    runtime_alternative: Choice | None = None   # "auto": chosen at run time against chosen
    requested: str = "auto"


# ---------------------------------------------------------------------------------------
def detect_finds(nest: LoopNest) -> list[Find]:
    """Loops whose index-array reads are compared with values of the enclosing loops."""
    finds = []
    levels = nest.levels
    for k, lv in enumerate(levels):
        if lv.kind != "loop":
            continue
        outer = {v.var for v in levels[:k] if v.kind != "read"}
        use = _owner(nest.space, lv.var)
        if use is None:
            continue
        keys: list[tuple[UFCall, Aff]] = []
        key_levels = []
        for j in range(k + 1, len(levels)):
            rl = levels[j]
            if rl.kind == "loop":
                break
            if rl.kind != "read":
                continue
            for g in rl.guards:
                key = _key_of(g, rl.call, lv.var, outer)
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


# ---------------------------------------------------------------------------------------
class _Encoder(InstanceEncoder):
    """Instances of the loops enclosing one find, plus the find's template arguments."""

    def __init__(self, nest: LoopNest, find: Find):
        super().__init__(nest, find.level)
        self.find = find

    def key(self, q: z3.ArithRef, k: int) -> list[z3.ArithRef]:
        return [self.aff(Aff.var(call), k, {self.find.var: q}) for call, _ in self.find.keys]

    def target(self, k: int) -> list[z3.ArithRef]:
        return [self.aff(e, k) for _, e in self.find.keys]

    def in_range(self, q: z3.ArithRef, k: int) -> z3.BoolRef:
        lows = self.find.lows or [self.find.lo]
        highs = self.find.highs or [self.find.hi]
        return z3.And(*[self.aff(lo, k) <= q for lo in lows], *[q <= self.aff(hi, k) for hi in highs])


def _lex_less(a: list, b: list):
    """Lexicographic a < b on tuples of Z3 terms."""
    cases = []
    for n in range(len(a)):
        cases.append(z3.And(*[a[m] == b[m] for m in range(n)], a[n] < b[n]))
    return z3.Or(*cases)


def _tuple_eq(a: list, b: list):
    return z3.And(*[x == y for x, y in zip(a, b)])


# ---------------------------------------------------------------------------------------
class _Checker:
    """The assumption tests of each template for one find."""

    def __init__(self, nest: LoopNest, find: Find):
        self.enc = _Encoder(nest, find)
        self.find = find
        self._memo: dict[tuple, tuple[bool, str]] = {}
        self.lookup = f"the lookup of {find.use.name} ({find.var})"

    def _cached(self, key: tuple, run) -> tuple[bool, str]:
        if key not in self._memo:
            self._memo[key] = run()
        return self._memo[key]

    @staticmethod
    def _advance(key: list, target: list, compare: str):
        """A9 not yet met: the scan moves past a position whose key is ``key``."""
        return _lex_less(key, target) if compare == "<" else _lex_less(target, key)

    def same_range(self, state: list[str]) -> tuple[bool, str]:
        return self._cached(("range", tuple(sorted(state))), lambda: self._same_range(state))

    def _same_range(self, state: list[str]) -> tuple[bool, str]:
        e = self.enc
        e.begin(2)
        differ = z3.Or(e.aff(self.find.lo, 1) != e.aff(self.find.lo, 2),
                       e.aff(self.find.hi, 1) != e.aff(self.find.hi, 2))
        return e.unsat(*e.same_state(state), differ,
                       query=f"the searched range of {self.lookup} with state "
                             f"{{{', '.join(state)}}}",
                       fallback="assumed to differ: the state keeps more indices or the "
                                "template is not used")

    def determines(self, var: str, loops: list[str]) -> tuple[bool, str]:
        """Two instances with equal ``var`` have equal ``loops``."""
        e = self.enc
        e.begin(2)
        return e.unsat(e.var(var, 1) == e.var(var, 2),
                       z3.Or(*[e.var(v, 1) != e.var(v, 2) for v in loops]),
                       query=f"whether {var} determines {', '.join(loops)} in {self.lookup}",
                       fallback=f"assumed not: the state keeps {var}")

    def eq3(self, state: list[str], compare: str) -> tuple[bool, str]:
        return self._cached(("eq3", tuple(sorted(state)), compare),
                            lambda: self._eq3(state, compare))

    def _eq3(self, state: list[str], compare: str) -> tuple[bool, str]:
        e = self.enc
        e.begin(2)
        q = e.position(1)
        return e.unsat(*e.same_state(state), e.in_range(q, 1), e.in_range(q, 2),
                       self._advance(e.key(q, 1), e.target(1), compare),
                       _tuple_eq(e.key(q, 2), e.target(2)),
                       query=f"Eq. 3 of SeqIter (while key {compare} target) for "
                             f"{self.lookup} with state {{{', '.join(state)}}}",
                       fallback="assumed satisfiable: the state keeps more indices or SeqIter "
                                "is not used")

    def eq4(self, direction: int, compare: str) -> tuple[bool, str]:
        e = self.enc
        e.begin(1)
        q, r = e.position(1), e.position(1)
        key_q, target = e.key(q, 1), e.target(1)
        label = f"{'forward' if direction > 0 else 'backward'} while key {compare} target"
        return e.unsat(e.in_range(q, 1), e.in_range(r, 1),
                       (q < r) if direction > 0 else (q > r),
                       z3.Not(self._advance(key_q, target, compare)),
                       z3.Not(_tuple_eq(key_q, target)),
                       _tuple_eq(e.key(r, 1), target),
                       query=f"Eq. 4 of SeqIter ({label}) for {self.lookup}",
                       fallback=f"assumed satisfiable: SeqIter {label} is not used")

    def unique(self) -> bool:
        e = self.enc
        e.begin(1)
        q, r = e.position(1), e.position(1)
        ok, _ = e.unsat(e.in_range(q, 1), e.in_range(r, 1), q != r,
                        _tuple_eq(e.key(q, 1), e.target(1)), _tuple_eq(e.key(r, 1), e.target(1)),
                        query=f"the uniqueness of the match in {self.lookup}",
                        fallback="assumed several matches")
        return ok

    def contiguous(self) -> tuple[bool, str]:
        e = self.enc
        e.begin(1)
        q, r, s = e.position(1), e.position(1), e.position(1)
        t = e.target(1)
        return e.unsat(e.in_range(q, 1), e.in_range(s, 1), q < r, r < s,
                       _tuple_eq(e.key(q, 1), t), _tuple_eq(e.key(s, 1), t),
                       z3.Not(_tuple_eq(e.key(r, 1), t)),
                       query=f"the contiguity of the matches in {self.lookup}",
                       fallback="assumed not contiguous: SeqIter is not used")

    def sorted(self, compare: str) -> tuple[bool, str]:
        e = self.enc
        e.begin(1)
        q, r = e.position(1), e.position(1)
        kq, kr = e.key(q, 1), e.key(r, 1)
        bad = _lex_less(kr, kq) if compare == "<" else _lex_less(kq, kr)
        order = "increasing" if compare == "<" else "decreasing"
        return e.unsat(e.in_range(q, 1), e.in_range(r, 1), q < r, bad,
                       query=f"whether the keys are {order} in {self.lookup}",
                       fallback=f"assumed not: no binary search or tile-skipping guard over "
                                f"{order} keys")


# ---------------------------------------------------------------------------------------
def _state_candidates(nest: LoopNest, find: Find, with_reduced: bool) -> list[str]:
    """M of Algorithm 3 in removal order: loop indices innermost first, then reduced indices."""
    outer = nest.levels[:find.level]
    loops = [lv.var for lv in outer if lv.kind == "loop"]
    reduced = [lv.var for lv in outer if lv.kind == "assign" and lv.var in nest.space.indices]
    return list(reversed(loops)) + (list(reversed(reduced)) if with_reduced else [])


def _algorithm3(candidates: list[str], test) -> tuple[list[str] | None, str]:
    state = list(candidates)
    ok, why = test(state)
    if not ok:
        return None, why
    for idx in candidates:
        trial = [s for s in state if s != idx]
        if test(trial)[0]:
            state = trial
    return state, ""


def _prefer_loops(nest: LoopNest, chk: "_Checker", state: list[str], test) -> list[str]:
    """Replace a reduced index by the loop indices it is computed from when it determines
    them (``i = A_pi``, or ``i = rowIdx(A_pi)`` with rowIdx injective): the same
    granularity, but a scalar state instead of an array."""
    for var in list(state):
        lv = nest.level(var)
        if lv.kind != "assign":
            continue
        loops = _loops_of(nest, lv.expr)
        trial = [s for s in state if s != var] + [n for n in loops if n not in state]
        if not loops or not test(trial)[0]:
            continue
        if lv.expr.calls() and not chk.determines(var, loops)[0]:
            continue
        state = trial
    return state


def _loops_of(nest: LoopNest, a: Aff) -> list[str]:
    out: list[str] = []
    for name in sorted(a.names()):
        if not _is_var(nest, name):
            continue
        lv = nest.level(name)
        if lv.kind == "loop":
            out.append(name)
        elif lv.kind == "assign":
            out.extend(n for n in _loops_of(nest, lv.expr) if n not in out)
    return out


def _is_var(nest: LoopNest, name: str) -> bool:
    try:
        nest.level(name)
        return True
    except KeyError:
        return False


def _place_state(nest: LoopNest, find: Find, state: list[str], allow_array: bool = True
                 ) -> tuple[list[str], int, str | None, Aff | None]:
    """Make ``state`` implementable (paper A.3): a scalar initialised directly above the first
    enclosing loop not in the state, or an array of states over the one remaining state index
    (an inner loop index or a reduced index with a known extent).  Returns (state, init
    level, array key, key extent); init level -1 when it cannot be stored."""
    outer = nest.levels[:find.level]
    loops = [k for k, lv in enumerate(outer) if lv.kind == "loop"]
    prefix: list[str] = []
    for k in loops:
        if outer[k].var not in state:
            break
        prefix.append(outer[k].var)
    init = next((k for k in loops if outer[k].var not in prefix), find.level)
    rest = [s for s in state if s not in prefix]
    key, extent = (rest[0], _extent(nest, rest[0])) if len(rest) == 1 and allow_array \
        else (None, None)
    if rest and (key is None or extent is None):
        # no array can hold it: keep every enclosing loop up to the deepest state index
        deepest = max(k for k, lv in enumerate(outer) if lv.var in state)
        prefix = [outer[k].var for k in loops if k <= deepest]
        init = next((k for k in loops if k > deepest), find.level)
        key = extent = None
    # the range must be computable where the state is initialised (an array of states may
    # start each entry at the range of its own key: the row's first position, say)
    need = (find.lo.names() | find.hi.names()) - _symbols(find.lo) - _symbols(find.hi) - {key}
    while not need <= {lv.var for lv in outer[:init] if lv.kind != "read"} and init < find.level:
        prefix.append(outer[init].var)
        init = next((k for k in loops if k > init), find.level)
        if key is not None and key in prefix:
            key = extent = None
    return prefix + ([key] if key else []), init, key, extent


def _extent(nest: LoopNest, var: str) -> Aff | None:
    """A bound on the values of ``var`` (0 <= var < extent) computable at function entry."""
    if var in nest.space.extent:
        return nest.space.extent[var]
    lv = nest.level(var)
    if lv.kind != "loop" or not any(a.is_const and a.const == 0 for a, _ in lv.lower):
        return None
    for a, den in lv.upper:
        if den == 1 and _params_only(a):
            return a + 1
    return None


def decide(nest: LoopNest, find: Find, requested: str) -> Decision:
    """Check every template for ``find`` and choose one (``requested`` may force it)."""
    if requested == "loop":     # the guard loop is always valid: nothing to prove
        return Decision(find, None, {"loop": Choice("loop")}, requested=requested)
    if not find.exact:
        why = ("the searched range has several bounds (a max/min, e.g. inside a tile); the "
               "templates take one of each")
        if requested != "auto":
            raise SynthesisError(f"find={requested!r} is not valid for the lookup of "
                                 f"{find.use.name} ({find.describe()}): {why}")
        return Decision(find, None, {"loop": Choice("loop")},
                        {a: why for a in ALGORITHMS if a != "loop"}, requested=requested)
    chk = _Checker(nest, find)
    valid: dict[str, Choice] = {}
    rejected: dict[str, str] = {}
    unique = chk.unique()
    tensor = find.use.name

    # SeqIter: enumerate the direction and the comparison (Algorithm 2), construct the state
    reasons = []
    for direction, compare in ((1, "<"), (-1, "<"), (1, ">"), (-1, ">")):
        label = f"{'forward' if direction > 0 else 'backward'} while key {compare} target"
        ok4, why4 = chk.eq4(direction, compare)
        if not ok4:
            reasons.append(f"{label}: " + _failed("Eq. 4 (no match after the stop point) is "
                                                  "satisfiable", why4))
            continue
        if not unique:
            okc, whyc = chk.contiguous()
            if not okc:
                reasons.append(f"{label}: " + _failed("matches are not contiguous", whyc))
                continue

        def test(state, c=compare):
            ok, why = chk.same_range(state)
            if not ok:
                return False, _failed("instances sharing the state search different ranges",
                                      why)
            ok, why = chk.eq3(state, c)
            return ok, ("" if ok else _failed("Eq. 3 (a later search finds a position an "
                                              "earlier one skipped) is satisfiable", why))

        cands = _state_candidates(nest, find, with_reduced=True)
        state, why = _algorithm3(cands, test)
        if state is None:
            reasons.append(f"{label}: {why}")
            continue
        state = _prefer_loops(nest, chk, state, test)
        state, init, key, extent = _place_state(nest, find, state)
        valid["seqiter"] = Choice("seqiter", direction, compare, state, unique, init, key,
                                  extent)
        break
    if "seqiter" not in valid:
        rejected["seqiter"] = "; ".join(reasons) + _missing_order_hint(find)

    # HashMap: equality finds on one coordinate; rebuilt whenever its range changes
    if len(find.keys) != 1:
        rejected["hashmap"] = "HashMap keys are single coordinates; this find compares " \
                              f"{len(find.keys)}"
    else:
        cands = _state_candidates(nest, find, with_reduced=False)
        state, why = _algorithm3(cands, chk.same_range)
        if state is None:
            rejected["hashmap"] = _failed("the searched range is not fixed between builds",
                                          why)
        else:
            state, init, _, _ = _place_state(nest, find, state, allow_array=False)
            valid["hashmap"] = Choice("hashmap", 1, "<", state, unique, init)

    # BinarySearch over a sorted range
    reasons = []
    for compare in ("<", ">"):
        ok, why = chk.sorted(compare)
        if ok:
            valid["binsearch"] = Choice("binsearch", 1, compare, [], unique)
            break
        reasons.append(f"{'increasing' if compare == '<' else 'decreasing'} keys: "
                       + _failed("the range is not sorted", why))
    if "binsearch" not in valid:
        rejected["binsearch"] = "; ".join(reasons) + _missing_order_hint(find)
    valid["loop"] = Choice("loop")

    decision = Decision(find, None, valid, rejected, requested=requested)
    if requested != "auto":
        if requested not in valid:
            raise SynthesisError(
                f"find={requested!r} is not valid for the lookup of {tensor} "
                f"({find.describe()}): {rejected.get(requested, 'not applicable')}")
        decision.chosen = valid[requested]
    else:
        decision.chosen, decision.runtime_alternative = _auto(nest, find, valid)
    if decision.chosen.algorithm == "loop":
        decision.chosen = None
    return decision


def _failed(claim: str, why: str) -> str:
    """Why an assumption does not hold: ``claim`` with Z3's counterexample, or, when Z3 gave
    no answer, ``claim`` assumed (the safe choice) and why."""
    return f"{claim}, {why}" if why.startswith("counterexample") else \
        f"{claim} (assumed: {why})"


def _auto(nest: LoopNest, find: Find, valid: dict[str, Choice]) -> tuple[Choice, Choice | None]:
    """Lowest complexity first: SeqIter or HashMap (linear) > BinarySearch > guard loop.
    When SeqIter restarts its scan more often than HashMap rebuilds its map, both are kept
    and the generated code picks one from the operand sizes (see :func:`cost_model`).
    A state reset before every search (it holds every enclosing loop index) makes SeqIter a
    scan and HashMap a build per search, O(L) each: BinarySearch (O(log L)) beats them."""
    valid = dict(valid)
    if "binsearch" in valid:
        for name in ("seqiter", "hashmap"):
            if name in valid and _per_search(find, valid[name]):
                del valid[name]
    seq, hsh = valid.get("seqiter"), valid.get("hashmap")
    if seq and hsh and seq.state and cost_model(nest, find, seq, hsh) is not None:
        return seq, hsh
    if seq and hsh and seq.state and not hsh.state:
        return hsh, None      # SeqIter restarts, the map is built once: HashMap is linear
    for name in ("seqiter", "hashmap", "binsearch"):
        if name in valid:
            return valid[name], None
    return valid["loop"], None


def _per_search(find: Find, choice: Choice) -> bool:
    """The state of ``choice`` is re-initialised before every search."""
    return choice.init_level is None or choice.init_level >= find.level


@dataclass
class CostModel:
    """Operand-size terms of the run-time choice between SeqIter and HashMap.

    cost(SeqIter) = 4 * W + R_s * L and cost(HashMap) = 12 * W + 4 * R_h * L, where W is
    the number of searches (the stored entries of the tensor iterated by the enclosing loop),
    L the length of the searched range and R_s / R_h how often the SeqIter state and the
    map are (re)initialised (products of loop trip counts and array-state extents).  In
    units of a quarter SeqIter step: a restarted scan stops, on average, a quarter of the
    way through the range (at the last coordinate it searches), a probe costs about three
    steps and an insertion one.  Calibrated on experiments/spmspv.py (48 cells: the choice
    is within 1.5% of the better of the two in geometric mean)."""

    searches: TensorUse
    length: Aff
    resets_seqiter: list[Aff]
    resets_hashmap: list[Aff]


def cost_model(nest: LoopNest, find: Find, seq: Choice, hsh: Choice) -> CostModel | None:
    """The cost terms when all are computable from scalar fields at function entry."""
    if not (_params_only(find.lo) and _params_only(find.hi)):
        return None

    def resets(choice: Choice) -> list[Aff] | None:
        out = []
        for var in choice.state:
            if var == choice.array_key:
                out.append(choice.key_extent)
                continue
            lv = nest.level(var)
            if lv.kind != "loop":
                return None
            trip = next((u - lo + 1 for u, du in lv.upper for lo, dl in lv.lower
                         if du == 1 and dl == 1 and _params_only(u - lo)), None)
            if trip is None:
                return None
            out.append(trip)
        return out

    r_seq, r_hash = resets(seq), resets(hsh)
    loops = [lv for lv in nest.levels[:find.level] if lv.kind == "loop"]
    owner = _owner(nest.space, loops[-1].var) if loops else None
    if r_seq is None or r_hash is None or owner is None:
        return None
    return CostModel(owner, find.hi - find.lo + 1, r_seq, r_hash)


def _params_only(a: Aff) -> bool:
    return a.names() <= _symbols(a)


def _missing_order_hint(find: Find) -> str:
    lay = find.use.layout
    names = {c.name.split(".", 1)[1] for c, _ in find.keys}
    ordered = {p.uf for p in lay.properties
               if p.kind in ("monotonic", "periodic_monotonic", "covary_monotonic")}
    missing = sorted(names - ordered)
    if missing:
        return (f" (layout {lay.name} declares no order property — monotonic, "
                f"periodic_monotonic or covary_monotonic — for {', '.join(missing)})")
    return ""


def synthesize(nest: LoopNest, find_option: "str | Mapping[str, str]") -> list[Decision]:
    """Decisions for every find of ``nest``; ``find_option`` is a name or per-tensor names."""
    decisions = []
    for f in detect_finds(nest):
        if isinstance(find_option, Mapping):
            requested = find_option.get(f.use.name, "auto")
        else:
            requested = find_option
        decisions.append(decide(nest, f, requested))
    return decisions


def for_parallel(nest: LoopNest, decisions: list[Decision], par_var: str) -> list[Decision]:
    """Adapt find choices to a parallel loop ``par_var``: a state initialised inside the
    parallel loop is private to the thread (SeqIter re-initialised per iteration); a hash map
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
            out.append(Decision(d.find, kept, d.valid, d.rejected, None, d.requested))
            continue
        if chosen is not None and _private(nest, d, chosen, par) is not chosen:
            # the choice needs a change (a reset per parallel iteration, or is impossible):
            # prefer a template that works as it is, then a SeqIter reset per iteration
            candidates = [d.valid[n] for n in ("hashmap", "binsearch", "seqiter") if n in d.valid]
            usable = [c for c in candidates if _private(nest, d, c, par) is c]
            chosen = usable[0] if usable else next(
                (p for p in (_private(nest, d, c, par) for c in candidates) if p), None)
        alt = _private(nest, d, d.runtime_alternative, par) if d.runtime_alternative else None
        if chosen is None or alt is None or chosen.algorithm != "seqiter":
            alt = None
        out.append(Decision(d.find, chosen, d.valid, d.rejected, alt, d.requested))
    return out


def _private(nest: LoopNest, d: Decision, c: Choice, par: int) -> Choice | None:
    """``c`` usable inside the parallel loop at level ``par`` (possibly re-initialised per
    iteration), or None."""
    if c.algorithm in ("binsearch", "loop"):
        return c
    if c.algorithm == "hashmap":
        return c if c.init_level is not None and c.init_level <= par else None
    if c.array_key:
        par_var = nest.levels[par].var
        shared_ok = c.init_level is not None and c.init_level <= par and c.array_key == par_var
        return c if shared_ok else None
    if c.init_level is not None and c.init_level > par:
        return c
    # a scalar SeqIter state shared by the parallel iterations: reset it in each iteration
    state = c.state + [nest.levels[par].var]
    return Choice(c.algorithm, c.direction, c.compare, state, c.unique, par + 1,
                  why="re-initialised in every parallel iteration")
