"""The interface of a find algorithm and the C pieces all of them share.

A find algorithm is one module in :mod:`spf.finds` defining ``ALGORITHM``, an instance of a
:class:`FindAlgorithm` subclass: its Z3 validity conditions (:meth:`FindAlgorithm.check`), its
cost-model terms (:meth:`FindAlgorithm.cost`), how it behaves inside a parallel loop
(:meth:`FindAlgorithm.private`), what its state initialisation reads
(:meth:`FindAlgorithm.init_reads`: it is placed below the definition of each) and its lowering
to the C tree (``declare``, ``allocate``, ``init``, ``open``, ``release``), usually from a
template in ``templates/``; a map built over the searched range subclasses
:class:`MapAlgorithm`.  The registry (:data:`spf.finds.REGISTRY`) finds the modules by
themselves: adding a find touches no other module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..back import ctree as t
from ..back.names import CNames
from ..back.templates import render
from ..front.terms import Aff
from ..middle.scan import LoopNest
from .checks import Checker, algorithm3, place_state, rejection, state_candidates
from .model import Choice, Decision, Find


@dataclass
class FindContext:
    """What an algorithm's validity check looks at: the nest, the find, the Z3 checker and
    whether a search matches at most one position."""

    nest: LoopNest
    find: Find
    checker: Checker
    unique: bool


@dataclass
class CostTerms:
    """cost = per_search * W + per_element * R * L (+ X), in quarter SeqIter steps: W
    searches, L the searched range's length, R the product of ``resets`` (how often the state
    is (re)initialised), X = ``fixed`` (e.g. the size of a map to zero)."""

    per_search: int
    per_element: int
    resets: list[Aff]
    fixed: Aff | None = None


class FindAlgorithm:
    """One find template.  Subclasses set the class attributes and override what applies."""

    name: ClassVar[str]                 # the find= option value
    title: ClassVar[str]                # as comments and reports name it
    preference: ClassVar[int]           # Auto's order among valid choices (lower first)
    stateless: ClassVar[bool] = False   # no state: never reset per search (binary search)
    parallel_rank: ClassVar[int] = 1    # preference inside a parallel loop (lower first)
    sized: ClassVar[bool] = False       # its memory grows with the coordinate's extent
    runtime: ClassVar[str] = ""         # C helper file from templates/ the code needs

    def check(self, ctx: FindContext) -> Choice | str:
        """A valid :class:`Choice` for ``ctx.find``, or why the template does not apply."""
        raise NotImplementedError

    def cost(self, nest: LoopNest, find: Find, choice: Choice) -> CostTerms | None:
        """Cost terms for Auto's run-time choice; None: not part of it."""
        return None

    def init_reads(self, find: Find) -> list[Aff]:
        """What ``init`` reads besides the searched position it ranges over (where the state
        may be initialised follows from it): the range bounds."""
        return [find.lo, find.hi]

    def private(self, nest: LoopNest, d: Decision, c: Choice, par: int) -> Choice | None:
        """``c`` usable inside the parallel loop at level ``par`` (possibly re-initialised per
        iteration), or None."""
        return c

    # lowering ---------------------------------------------------------------------------
    def declare(self, f: FindLowering) -> list[t.Node]:
        return []

    def thread_private(self, f: FindLowering, par: int) -> list[str]:
        """State variables each thread of the parallel loop at level ``par`` needs its own
        copy of."""
        return []

    def allocate(self, f: FindLowering) -> list[t.Node]:
        return []

    def init(self, f: FindLowering) -> list[t.Node]:
        return []

    def open(self, f: FindLowering, b: t.Builder) -> None:
        """Append the search and open the scope(s) in which ``f.var`` is a match."""
        raise NotImplementedError

    def release(self, f: FindLowering) -> list[t.Node]:
        return []

    def what(self, c: Choice) -> str:
        """How the template searches (the comment on the generated code)."""
        raise NotImplementedError

    def why(self, c: Choice) -> str:
        """Why it is valid (the comment on the generated code)."""
        raise NotImplementedError


class MapAlgorithm(FindAlgorithm):
    """A find that builds a map from the keys of the searched range: built once per value of
    its state indices, which must fix the range and the keys (Algorithm 3 with
    :meth:`Checker.fixed_between_builds`); threads of a parallel loop only read one built
    outside it."""

    def init_reads(self, find: Find) -> list[Aff]:
        """The build also reads the key at each position."""
        return super().init_reads(find) + [Aff.var(call) for call, _ in find.keys]

    def built_state(self, ctx: FindContext) -> tuple[list[str], int] | str:
        """The state indices (when the map is rebuilt) and the level it is built above, or
        why no state makes it valid."""
        cands = state_candidates(ctx.nest, ctx.find, with_reduced=False)
        state, why = algorithm3(cands, ctx.checker.fixed_between_builds)
        if state is None:
            return rejection([("", why)])
        state, init, _ = place_state(ctx.nest, ctx.find, state, self.init_reads(ctx.find),
                                     allow_array=False)
        return state, init

    def private(self, nest: LoopNest, d: Decision, c: Choice, par: int) -> Choice | None:
        return built_outside(c, par)


def built_outside(c: Choice, par: int) -> Choice | None:
    """``c`` when its state (a map) is built at or above the parallel loop at level ``par``,
    so the threads only read it; None otherwise."""
    return c if c.init_level is not None and c.init_level <= par else None


@dataclass
class FindLowering:
    """The C text pieces of one find (a decision with one of its candidate choices)."""

    decision: Decision
    choice: Choice
    names: CNames
    algorithm: FindAlgorithm
    read: bool = True       # code inside the match reads the position (a mask's does not)

    @property
    def find(self) -> Find:
        return self.decision.find

    @property
    def var(self) -> str:
        return self.find.var

    def key_at(self, pos: str) -> list[str]:
        sub = {self.var: Aff.var(pos)}
        return [self.names.aff(Aff.var(c).substitute(sub)) for c, _ in self.find.keys]

    def targets(self) -> list[str]:
        return [self.names.aff(e) for _, e in self.find.keys]

    def lo(self) -> str:
        return self.names.aff(self.find.lo)

    def end(self) -> str:
        return self.names.aff(self.find.hi + 1)

    def hi(self) -> str:
        return self.names.aff(self.find.hi)

    def advance(self, pos: str) -> str:
        """Lexicographic key(pos) < target (increasing) or > target (decreasing)."""
        keys, tgts = self.key_at(pos), self.targets()
        cases = []
        for n in range(len(keys)):
            eqs = [f"{keys[m]} == {tgts[m]}" for m in range(n)]
            cases.append(" && ".join(eqs + [f"{keys[n]} {self.choice.compare} {tgts[n]}"]))
        return cases[0] if len(cases) == 1 else "(" + " || ".join(f"({c})" for c in cases) + ")"

    def is_match(self, pos: str) -> str:
        return " && ".join(f"{k} == {g}" for k, g in zip(self.key_at(pos), self.targets()))

    def in_range(self, pos: str, forward: bool) -> str:
        return f"{pos} < {self.end()}" if forward else f"{pos} >= {self.lo()}"

    def comment_lines(self) -> list[str]:
        conds = " && ".join(f"{self.names.aff(Aff.var(c))} == {self.names.aff(e)}"
                            for c, e in self.find.keys)
        state = f"; state indices {{{', '.join(self.choice.state)}}}" \
            if self.choice.stateful else ""
        return [f"find {self.var} in [{self.lo()}, {self.hi()}] with {conds}",
                f"{self.algorithm.what(self.choice)};",
                f"{self.algorithm.why(self.choice)}{state}."]

    def snippet(self, name: str, jumps: tuple[str, ...] = (), **args: str) -> t.Snippet:
        """A find template filled with ``args`` (``comment`` filled in here); ``jumps``: the
        labels its code may jump to."""
        args.setdefault("comment", "\n * ".join(self.comment_lines()))
        text = render(name, **args)
        return t.Snippet(name, text.rstrip("\n").split("\n"), jumps)

    def bind(self, b: t.Builder, pos: str) -> None:
        """Declare the matched position ``var`` as ``pos`` where code inside reads it."""
        if self.read:
            b.add(t.Declare("spf_index_t", self.var, pos, const=True))

    def match(self, b: t.Builder, pos: str, forward: bool) -> None:
        """Open the scope of the match(es) starting at position ``pos``."""
        if self.choice.unique:
            b.nest(t.If(f"{self.in_range(pos, forward)} && {self.is_match(pos)}"))
            self.bind(b, pos)
        else:
            b.nest(t.For(f"spf_index_t {self.var} = {pos}",
                         f"{self.in_range(self.var, forward)} && {self.is_match(self.var)}",
                         f"{'++' if forward else '--'}{self.var}"))

