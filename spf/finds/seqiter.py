"""SeqIter (paper Sec. 6.2): scan forward or backward from where the previous search stopped.

Valid when Z3 proves Eq. 3 (no later search needs a position an earlier one skipped) and
Eq. 4 (no match after the stop point) unsatisfiable; the state indices (when the scan
restarts) come from Algorithm 3.
"""
from __future__ import annotations

from ..back import ctree as t
from ..front.terms import Aff
from ..middle.scan import LoopNest
from .base import CostTerms, FindAlgorithm, FindContext, FindLowering
from .checks import (
    Failure,
    algorithm3,
    failed,
    missing_order_hint,
    place_state,
    prefer_loops,
    rejection,
    state_candidates,
    trip_counts,
)
from .model import Choice, Decision, Find, StateArray

_ORDERS = ((1, "<"), (-1, "<"), (1, ">"), (-1, ">"))
# an entry of an array of states that no search has left yet: no state a search leaves is
# below -1 (positions of a tensor that passed validation, and one before the first)
_UNSEARCHED = "INT32_MIN"


def _label(direction: int, compare: str) -> str:
    return f"{'forward' if direction > 0 else 'backward'} while key {compare} target"


class SeqIter(FindAlgorithm):
    name = "seqiter"
    title = "SeqIter"
    preference = 0
    parallel_rank = 2

    def check(self, ctx: FindContext) -> Choice | str:
        chk, nest, find = ctx.checker, ctx.nest, ctx.find
        reasons: list[tuple[str, Failure]] = []
        for direction, compare in _ORDERS:    # Algorithm 2: direction and comparison
            label = _label(direction, compare)
            ok4, why4 = chk.eq4(direction, compare)
            if not ok4:
                reasons.append((label, failed("Eq. 4 (no match after the stop point) "
                                              "is satisfiable", why4)))
                continue
            if not ctx.unique:
                okc, whyc = chk.contiguous()
                if not okc:
                    reasons.append((label, failed("matches are not contiguous", whyc)))
                    continue

            def test(state, c=compare):
                ok, why = chk.same_range(state)
                if not ok:
                    return False, failed("instances sharing the state search different "
                                         "ranges", why)
                ok, why = chk.eq3(state, c)
                return ok, ("" if ok else failed("Eq. 3 (a later search finds a position an "
                                                 "earlier one skipped) is satisfiable", why))

            state, why = algorithm3(state_candidates(nest, find, with_reduced=True), test)
            if state is None:
                reasons.append((label, why))
                continue
            state = prefer_loops(nest, chk, state, test)
            state, init, array = place_state(nest, find, state, self.init_reads(find))
            return self.choice(direction, compare, state, ctx.unique, init, array)
        return rejection(reasons, missing_order_hint(find))

    @staticmethod
    def choice(direction: int, compare: str, state: list[str], unique: bool, init: int,
               array: StateArray | None = None, why: str = "") -> Choice:
        detail = f"{'forward' if direction > 0 else 'backward'}, advancing while key " \
                 f"{compare} target"
        return Choice("seqiter", direction, compare, state, unique, init, array, why,
                      stateful=True, in_order=direction > 0 or unique, detail=detail)

    def cost(self, nest: LoopNest, find: Find, choice: Choice) -> CostTerms | None:
        resets = trip_counts(nest, choice)
        return None if resets is None else CostTerms(4, 1, resets)

    def private(self, nest: LoopNest, d: Decision, c: Choice, par: int) -> Choice | None:
        if c.array is not None:
            shared_ok = c.init_level is not None and c.init_level <= par \
                and c.array.key == nest.levels[par].var
            return c if shared_ok else None
        if c.init_level is not None and c.init_level > par:
            return c
        # a scalar state shared by the parallel iterations: reset it in each iteration
        return self.choice(c.direction, c.compare, c.state + [nest.levels[par].var], c.unique,
                           par + 1, why="re-initialised in every parallel iteration")

    # lowering ---------------------------------------------------------------------------
    @staticmethod
    def state(f: FindLowering) -> str:
        return f"spf_pos_{f.var}"

    @staticmethod
    def start(f: FindLowering) -> Aff:
        """Where a search starts afresh: its range's first (or last) position."""
        return f.find.lo if f.choice.direction > 0 else f.find.hi

    def declare(self, f: FindLowering) -> list[t.Node]:
        if f.choice.array is not None:
            return [t.Declare("spf_index_t", f"*{self.state(f)}", "NULL")]
        return [t.Declare("spf_index_t", self.state(f), "0")]

    def thread_private(self, f: FindLowering, par: int) -> list[str]:
        c = f.choice
        reset_inside = c.init_level is not None and c.init_level > par
        return [self.state(f)] if c.array is None and reset_inside else []

    def allocate(self, f: FindLowering) -> list[t.Node]:
        array = f.choice.array
        if array is None:
            return []
        extent = f.names.aff(array.extent)
        f.names.helpers.add("spf_max")
        return [t.Assign(self.state(f), f"malloc(sizeof(spf_index_t) * (size_t)spf_max(1, "
                                        f"{extent}))"),
                t.If(f"!{self.state(f)}", [t.Goto("spf_out_of_memory")], braces=False)]

    def init(self, f: FindLowering) -> list[t.Node]:
        array, start = f.choice.array, self.start(f)
        if array is None:
            return [t.Assign(self.state(f), f.names.aff(start))]
        note: list[t.Node] = []
        if start.calls():       # read only when a key's first search runs
            entry = _UNSEARCHED
            note = [t.Comment(f"{_UNSEARCHED}: not searched yet; a key's first search starts "
                              f"at {f.names.aff(start)}, read only then (the array also covers "
                              "keys that no search reaches, where that read could fall outside "
                              "its array)")]
        else:
            entry = f.names.aff(start.substitute({array.key: Aff.var("spf_t")}))
        return note + [t.For("spf_index_t spf_t = 0", f"spf_t < {f.names.aff(array.extent)}",
                             "++spf_t", [t.Assign(f"{self.state(f)}[spf_t]", entry)],
                             braces=False)]

    def open(self, f: FindLowering, b: t.Builder) -> None:
        c, array = f.choice, f.choice.array
        cur = self.state(f)
        if array is not None:
            cur = f"spf_cur_{f.var}"
            # a value that no match can have (e.g. ELL padding) must not index the array
            b.nest(t.If(f"{array.key} >= 0 && {array.key} < {f.names.aff(array.extent)}"))
            b.add(t.Declare("spf_index_t", cur, f"{self.state(f)}[{array.key}]"))
            if self.start(f).calls():
                b.add(t.If(f"{cur} == {_UNSEARCHED}",
                           [t.Assign(cur, f.names.aff(self.start(f)))], braces=False))
        step = "++" if c.direction > 0 else "--"
        b.add(f.snippet("find_seqiter.c", in_range=f.in_range(cur, c.direction > 0),
                        advance=f.advance(cur), step=f"{step}{cur}"))
        if array is not None:
            b.add(t.Assign(f"{self.state(f)}[{array.key}]", cur))
        f.match(b, cur, c.direction > 0)

    def release(self, f: FindLowering) -> list[t.Node]:
        return [t.Call(f"free({self.state(f)})")] if f.choice.array is not None else []

    def what(self, c: Choice) -> str:
        return (f"SeqIter: scans {'forward' if c.direction > 0 else 'backward'} "
                "from the position the previous search stopped at")

    def why(self, c: Choice) -> str:
        return "valid because Z3 proved Eq. 3 and Eq. 4 unsatisfiable"


ALGORITHM = SeqIter()
