"""Z3 tests of find templates (paper Sec. 6.2-6.3, Appendix A) and the state construction
(Algorithm 3, A.3) shared by the find algorithms.

For each template the assumptions are checked with Z3 over two instances of the enclosing
loops (unprimed ``@1`` executes before primed ``@2``):

- C  = C1 (lexicographic order of the instances) ∧ C2 (loop bounds) ∧ C3 (other conditions:
  assignments, guards) ∧ P5 (properties of the index arrays read by the enclosing loops);
- C4 = the find condition ``f(q) = e`` at a position ``q``; P6 = the properties of the
  searched index array, instantiated at the positions involved (quantifier-free);
- A7 = the state indices are equal in both instances; A8 = the direction positions are
  visited in; A9 = the stop condition ``f(q) < e`` (SeqIter advances while it holds);
  A10 = exclusivity: a position skipped by one instance is not a match of it;
- a map built over the searched range (HashMap, DenseMap) is reused by every instance with
  the same state: the range and the key at each of its positions must be the same in both
  instances (:meth:`Checker.same_keys`).

A query Z3 leaves undecided (its time limit) proves nothing: the assumption counts as failed,
so at worst the guard loop stays.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import z3

from ..decide.smt import InstanceEncoder, symbols_of
from ..front.properties import Ordering, ordering_kinds
from ..front.terms import Aff
from ..middle.scan import LevelKind, LoopNest
from .model import Choice, Find, StateArray


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
        return z3.And(*[self.aff(lo, k) <= q for lo in lows],
                      *[q <= self.aff(hi, k) for hi in highs])


def _lex_less(a: list, b: list):
    """Lexicographic a < b on tuples of Z3 terms."""
    cases = []
    for n in range(len(a)):
        cases.append(z3.And(*[a[m] == b[m] for m in range(n)], a[n] < b[n]))
    return z3.Or(*cases)


def _tuple_eq(a: list, b: list):
    return z3.And(*[x == y for x, y in zip(a, b)])


class Checker:
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

    def same_keys(self, state: list[str]) -> tuple[bool, str]:
        return self._cached(("keys", tuple(sorted(state))), lambda: self._same_keys(state))

    def _same_keys(self, state: list[str]) -> tuple[bool, str]:
        """∀q in the range of @1: key(q, @1) = key(q, @2), for instances with equal
        ``state``: a map built by @1 holds the keys @2 would build."""
        e = self.enc
        e.begin(2)
        q = e.position(1)
        return e.unsat(*e.same_state(state), e.in_range(q, 1),
                       z3.Not(_tuple_eq(e.key(q, 1), e.key(q, 2))),
                       query=f"the keys over the searched range of {self.lookup} with state "
                             f"{{{', '.join(state)}}}",
                       fallback="assumed to differ: the map is rebuilt more often or not used")

    def fixed_between_builds(self, state: list[str]) -> tuple[bool, Failure | None]:
        """A map built over the range is valid for every instance with equal ``state``: the
        range and the key at each of its positions are the same (Algorithm 3's test for the
        maps)."""
        ok, why = self.same_range(state)
        if not ok:
            return False, failed("the searched range is not fixed between builds", why)
        ok, why = self.same_keys(state)
        if not ok:
            return False, failed("the keys over the searched range are not fixed between "
                                 "builds", why)
        return True, None

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


def state_candidates(nest: LoopNest, find: Find, with_reduced: bool) -> list[str]:
    """M of Algorithm 3 in removal order: loop indices innermost first, then reduced indices."""
    outer = nest.levels[:find.level]
    loops = [lv.var for lv in outer if lv.kind is LevelKind.LOOP]
    reduced = [lv.var for lv in outer
               if lv.kind is LevelKind.ASSIGN and lv.var in nest.space.indices]
    return list(reversed(loops)) + (list(reversed(reduced)) if with_reduced else [])


def algorithm3(candidates: list[str], test) -> tuple[list[str] | None, Any]:
    state = list(candidates)
    ok, why = test(state)
    if not ok:
        return None, why
    for idx in candidates:
        trial = [s for s in state if s != idx]
        if test(trial)[0]:
            state = trial
    return state, ""


def prefer_loops(nest: LoopNest, chk: Checker, state: list[str], test) -> list[str]:
    """Replace a reduced index by the loop indices it is computed from when it determines
    them (``i = A_pi``, or ``i = rowIdx(A_pi)`` with rowIdx injective): the same
    granularity, but a scalar state instead of an array."""
    for var in list(state):
        lv = nest.level(var)
        if lv.kind is not LevelKind.ASSIGN:
            continue
        loops = _loops_of(nest, lv.assigned)
        trial = [s for s in state if s != var] + [n for n in loops if n not in state]
        if not loops or not test(trial)[0]:
            continue
        if lv.assigned.calls() and not chk.determines(var, loops)[0]:
            continue
        state = trial
    return state


def _loops_of(nest: LoopNest, a: Aff) -> list[str]:
    out: list[str] = []
    for name in sorted(a.names()):
        if not _is_var(nest, name):
            continue
        lv = nest.level(name)
        if lv.kind is LevelKind.LOOP:
            out.append(name)
        elif lv.kind is LevelKind.ASSIGN:
            out.extend(n for n in _loops_of(nest, lv.assigned) if n not in out)
    return out


def _is_var(nest: LoopNest, name: str) -> bool:
    try:
        nest.level(name)
        return True
    except KeyError:
        return False


def place_state(nest: LoopNest, find: Find, state: list[str], reads: list[Aff],
                allow_array: bool = True) -> tuple[list[str], int, StateArray | None]:
    """Make ``state`` implementable (paper A.3): a scalar initialised directly above the first
    enclosing loop not in the state, or an array of states over the one remaining state index
    (an inner loop index or a reduced index with a known extent).  ``reads``: what the
    initialisation reads besides the searched position
    (:meth:`~spf.finds.base.FindAlgorithm.init_reads`);
    every variable in them is defined above it.  Returns (state, init level, the array of
    states or None); init level ``find.level`` when the state is initialised before each
    search."""
    outer = nest.levels[:find.level]
    loops = [k for k, lv in enumerate(outer) if lv.kind is LevelKind.LOOP]
    prefix: list[str] = []
    for k in loops:
        if outer[k].var not in state:
            break
        prefix.append(outer[k].var)
    init = next((k for k in loops if outer[k].var not in prefix), find.level)
    # a state index bound above the initialisation (read from an enclosing loop's position)
    # is fixed between two initialisations: it needs no array
    fixed = {lv.var for lv in outer[:init]}
    prefix += [s for s in state if s in fixed and s not in prefix]
    rest = [s for s in state if s not in prefix]
    extent = extent_of(nest, rest[0]) if len(rest) == 1 and allow_array else None
    array = StateArray(rest[0], extent) if extent is not None else None
    if rest and array is None:
        # no array can hold it: keep every enclosing loop up to the deepest state index
        deepest = max(k for k, lv in enumerate(outer) if lv.var in state)
        prefix = [outer[k].var for k in loops if k <= deepest]
        init = next((k for k in loops if k > deepest), find.level)
    # what the initialisation reads must be defined where it runs (an array of states may
    # start each entry at the range of its own key: the row's first position, say)
    need = _variables(reads) - {find.var} - ({array.key} if array else set())
    while init < find.level \
            and not need <= {lv.var for lv in outer[:init] if lv.kind is not LevelKind.READ}:
        prefix.append(outer[init].var)
        init = next((k for k in loops if k > init), find.level)
        if array is not None and array.key in prefix:
            array = None
    if array is not None and array.key in {lv.var for lv in outer[:init]}:
        prefix.append(array.key)      # the key is fixed between two initialisations: a scalar
        array = None
    return prefix + ([array.key] if array else []), init, array


def _variables(affs: list[Aff]) -> set[str]:
    """The loop-nest variables ``affs`` read (tensor fields are defined everywhere)."""
    return set().union(*(a.names() - symbols_of(a) for a in affs))


def extent_of(nest: LoopNest, var: str) -> Aff | None:
    """A bound on the values of ``var`` (0 <= var < extent) computable at function entry."""
    if var in nest.space.extent:
        return nest.space.extent[var]
    if all(lv.var != var for lv in nest.levels):
        return None         # a tensor's field (``i = A.len``, a layout says): no loop bounds it
    lv = nest.level(var)
    if lv.kind is not LevelKind.LOOP or not any(a.is_const and a.const == 0 for a, _ in lv.lower):
        return None
    for a, den in lv.upper:
        if den == 1 and params_only(a):
            return a + 1
    return None


@dataclass(frozen=True)
class Failure:
    """An assumption that does not hold: the claim, and Z3's counterexample or why Z3 gave no
    answer (then the claim is assumed: the safe choice)."""

    claim: str
    why: str

    @property
    def counterexample(self) -> str:
        """The model refuting the claim ("" when Z3 gave no answer)."""
        prefix = "counterexample: "
        return self.why[len(prefix):] if self.why.startswith(prefix) else ""

    def text(self) -> str:
        return self.claim if self.counterexample else f"{self.claim} (assumed: {self.why})"


def failed(claim: str, why: str) -> Failure:
    """Why an assumption does not hold: ``claim`` with Z3's answer ``why``."""
    return Failure(claim, why)


def rejection(failures: Sequence[tuple[str, Failure]], hint: str = "") -> str:
    """Why a find algorithm does not apply, the actionable part first: on one line each
    failed claim (with the cases it failed in) and ``hint`` (what the layout lacks); then
    one shortened counterexample per claim."""
    cases: dict[str, list[str]] = {}
    examples: dict[str, str] = {}
    for label, failure in failures:
        claim = failure.text()
        cases.setdefault(claim, []).append(label)
        if failure.counterexample and claim not in examples:
            examples[claim] = (f"{label}: " if label else "") + _short(failure.counterexample)
    line = "; ".join(claim + (f" ({', '.join(labels)})" if all(labels) else "")
                     for claim, labels in cases.items())
    line += f"; {hint}" if hint else ""
    if not examples:
        return line
    return (f"{line}\ncounterexample{'s' if len(examples) > 1 else ''}: "
            + "; ".join(examples.values()))


def _short(model: str, keep: int = 8) -> str:
    """A model printed ``a = 1, b = 2, ...`` cut to ``keep`` values, those of the loop
    instances (``q@1``) first."""
    values = sorted(model.split(", "), key=lambda v: "@" not in v.split(" = ")[0])
    return ", ".join(values[:keep]) + (", ..." if len(values) > keep else "")


def params_only(a: Aff) -> bool:
    return a.names() <= symbols_of(a)


def missing_order_hint(find: Find) -> str:
    lay = find.use.layout
    names = {c.name.split(".", 1)[1] for c, _ in find.keys}
    ordered = {p.uf for p in lay.properties if isinstance(p, Ordering)}
    missing = sorted(names - ordered)
    if missing:
        *kinds, last = ordering_kinds()
        return (f"layout {lay.name} declares no order property ({', '.join(kinds)} or "
                f"{last}) for {', '.join(missing)}, which an ordered search needs")
    return ""


def trip_counts(nest: LoopNest, choice: Choice) -> list[Aff] | None:
    """How often ``choice``'s state is (re)initialised, as a product of loop trip counts and
    array-state extents computable at function entry; None when one is not."""
    out = []
    for var in choice.state:
        if choice.array is not None and var == choice.array.key:
            out.append(choice.array.extent)
            continue
        lv = nest.level(var)
        if lv.kind is not LevelKind.LOOP:
            return None
        trip = next((u - lo + 1 for u, du in lv.upper for lo, dl in lv.lower
                     if du == 1 and dl == 1 and params_only(u - lo)), None)
        if trip is None:
            return None
        out.append(trip)
    return out
