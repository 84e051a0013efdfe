"""What the assembly of a sparse output is: its strategy (:class:`Mode`) and the facts the
nest gives it (:class:`AssemblyPlan`)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum, auto

from ..front.semiring import PLUS_TIMES, Semiring
from ..front.storage import Storage, StorageKind
from ..front.terms import Aff
from ..middle.iteration_space import TensorUse


class Mode(StrEnum):
    """How an assembled output receives its entries: appended in storage order (APPEND),
    gathered per group in a dense workspace (WORKSPACE), counted then scattered into the
    buckets of a dense level (BUCKET), collected and sorted (SORT), or counted and filled
    row by row by the threads of a parallel loop (ROWS)."""

    APPEND = "append"
    WORKSPACE = "workspace"
    BUCKET = "bucket"
    SORT = "sort"
    ROWS = "rows"


class FunctionRole(Enum):
    """Which generated function of a kernel is lowered: the kernel itself or, for an
    assembled output, a term of a sum or one of the counting passes (``<name>``: the
    kernel's name)."""

    OUTPUT = auto()         # ``<name>``: writes the output (an assembled one through its
    #                         storage functions, :mod:`.storage_c`)
    STREAM = auto()         # a term of a sum: writes a sorted (key, value) run the sum merges
    BOUND = auto()          # ``<name>_bound``: counts statement instances (an upper bound on
    #                         the entries)
    BOUND_SLOTS = auto()    # ``<name>_bound_slots``: counts them without testing their values
    HISTOGRAM = auto()      # ``<name>_histogram``: counts each bucket's entries (bucket mode)
    ROW_COUNTS = auto()     # ``<name>_rows``: counts each row's distinct entries, in parallel
    #                         (rows mode; a pass of the strategy's own, like OUTPUT)
    VISIT = auto()          # the loops alone, the statement a hole (:class:`~spf.back.ctree.
    #                         Hole`) that a writer fills with each of its passes over the
    #                         entries: a conversion reading its source without an entry list

    @property
    def serial(self) -> bool:
        """A pass that runs serially: a counting pass, or a visit (the writer's passes)."""
        return self.counts or self is FunctionRole.VISIT

    @property
    def counts(self) -> bool:
        """A counting pass: it writes no entry and runs serially."""
        return self in (FunctionRole.BOUND, FunctionRole.BOUND_SLOTS, FunctionRole.HISTOGRAM)

    @property
    def suffix(self) -> str:
        """The function's name after the kernel's (``_bound``, ...)."""
        return "" if self is FunctionRole.OUTPUT else "_" + {
            FunctionRole.ROW_COUNTS: "rows"}.get(self, self.name.lower())


@dataclass(frozen=True)
class AssemblyPlan:
    """Storage of the output and how the nest feeds it."""

    output: TensorUse
    storage: Storage
    key: tuple[str, ...]          # kernel indices in storage order
    descending: tuple[bool, ...]
    extents: tuple[Aff, ...]      # per key index, over input fields
    ordered: int                  # length of the prefix the loops produce in order
    mode: Mode
    why: str                      # the proof or the reason, for reports
    group_level: int | None = None  # nest level where the group is checked (None: per instance)
    group_var: str = ""             # that level's variable
    bucket_sorted: bool = False     # bucket: each bucket's entries arrive in order (Z3)
    unique: bool = False            # Z3: no two statement instances have the same key
    drop_zeros: bool = False        # entries equal to the semiring's zero are not stored
    semiring: Semiring = PLUS_TIMES  # equal coordinates combine by its add
    ranged: bool = False            # the nest reads the output's extents (a term of a sum
                                    # bounded by the statement's range of an output index,
                                    # Expr.ranges_of, or a find's state array as long as
                                    # one): each of its functions takes them; a sum's: some
                                    # term's do, so its _bound takes them too
    how: str = ""                   # the strategy's account of itself, for reports

    @property
    def any_order(self) -> bool:
        """A workspace group may be emitted in the order its slots were first touched: the
        coordinates it gathers are ones the output layout keeps in no particular order."""
        n = len(self.key)
        return self.mode is Mode.WORKSPACE and self.ordered < n \
            and self.ordered >= n - self.storage.free_tail

    @property
    def direct_shape(self) -> bool:
        """Every level above the last is dense over one coordinate, the last compressed over
        one: an entry's position follows from its coordinates without decoding a key."""
        *upper, last = self.storage.levels
        return last.kind is StorageKind.COMPRESSED and len(last.coords) == 1 \
            and all(lv.kind is StorageKind.DENSE and len(lv.coords) == 1 for lv in upper)

    @property
    def direct(self) -> bool:
        """Append straight to the last level (:mod:`.append`): keys in order and unique."""
        return self.mode is Mode.APPEND and self.unique and self.direct_shape

    @property
    def last_only(self) -> bool:
        """A workspace slot is exactly the one coordinate of the output's last level."""
        last = self.storage.levels[-1]
        return self.mode is Mode.WORKSPACE and self.ordered == len(self.key) - 1 \
            and last.kind is StorageKind.COMPRESSED and len(last.coords) == 1

    def describe(self) -> str:
        lay = self.storage.layout
        pre = ", ".join(self.key[:self.ordered]) or "none"
        where = ""
        if self.mode is Mode.WORKSPACE and self.ordered:
            where = ("; the group changes only between statement instances" if
                     self.group_level is None else
                     f"; the group is checked once where {self.group_var} is defined, not per "
                     "instance (Z3 proved it non-decreasing over those iterations)")
        zeros = (f"; entries equal to {self.semiring.zero_text()} are not stored"
                 if self.drop_zeros else "")
        if not self.semiring.is_plus_times:
            zeros += f"; entries with equal coordinates combine by {self.semiring.add}"
        if lay.implicit is not None:
            zeros += (f"; {lay.name} is a pattern layout: each entry's position is stored, no "
                      f"value (every entry holds {lay.value})")
        return (f"output {self.output.name} ({lay.name}) assembled in storage order "
                f"({', '.join(self.key)}); ordered by the loops: ({pre}); {self.how}; {self.why}"
                f"{where}{zeros}")
