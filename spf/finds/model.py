"""What find synthesis decides: a guard loop that looks a coordinate up (:class:`Find`), a valid
template with its arguments (:class:`Choice`) and the decision for one find
(:class:`Decision`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..front.terms import Aff, UFCall
from ..middle.iteration_space import TensorUse


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class StateArray:
    """A find's state kept per value of one state index: ``key``, ``0 <= key < extent``."""

    key: str
    extent: Aff


@dataclass(frozen=True)
class Choice:
    """A valid template (``algorithm``: a name in :data:`spf.finds.REGISTRY`, or ``"loop"``
    for the guard loop) with its synthesized arguments."""

    algorithm: str
    direction: int = 1                  # +1: positions visited upwards, -1: downwards
    compare: str = "<"                  # scan/search advances while key <compare> target
    state: list[str] = field(default_factory=list)
    unique: bool = True                 # at most one match per search
    init_level: int | None = None       # state (re)initialised just above this level
    array: StateArray | None = None     # an array of states (None: one scalar state)
    why: str = ""
    stateful: bool = False              # has state initialised at init_level
    in_order: bool = True               # matches of one search visited in position order
    detail: str = ""                    # the algorithm's arguments, for reports
    extra: dict = field(default_factory=dict)   # further arguments of its algorithm

    @property
    def array_key(self) -> str | None:
        """The state index keying the array of states (None: a scalar state)."""
        return self.array.key if self.array is not None else None

    def describe(self) -> str:
        parts = [self.algorithm] + ([self.detail] if self.detail else [])
        if self.stateful:
            parts.append(f"state indices {{{', '.join(self.state)}}}")
        parts.append("unique match" if self.unique else "several matches")
        return ", ".join(parts)


@dataclass(frozen=True)
class Decision:
    """What synthesis decided for one find: the chosen template (None: the guard loop stays),
    every valid one, why the others were rejected, and the alternatives Auto picks between
    at run time."""

    find: Find
    chosen: Choice | None                       # None: keep the guard loop
    valid: dict[str, Choice] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    alternatives: list[Choice] = field(default_factory=list)   # chosen at run time (Auto)
    requested: str = "auto"

    @property
    def candidates(self) -> list[Choice]:
        """The choices the generated code picks from at run time (the chosen one last)."""
        return self.alternatives + ([self.chosen] if self.chosen is not None else [])
