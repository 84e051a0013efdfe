"""A layout's :class:`~spf.front.writing.WritePlan` lowered to one C function.

``<name>(B, spf_err, spf_sizes, n, g, v, shape, allow_padding)`` writes the ``n`` entries
(coordinates ``g[k][e]``, no coordinate twice, values ``v[e]``) of a tensor of ``shape`` into
``*B``: it allocates every array of ``B`` with ``malloc`` (the caller frees them with
``free``), sets every scalar field, and returns 0; or a status (:class:`~spf.back.status.Status`)
with ``B`` untouched: ``SPF_OUT_OF_MEMORY``, or ``SPF_REFUSED`` when an entry cannot be
written (``spf_err``: the refusal's number, the entry's coordinates, up to three numbers and
another entry's coordinates; the file's header lists the refusals).  ``spf_sizes`` (or NULL)
receives the extents of each array, in declaration order, then the number of entries written;
an array over ``spf_max_bytes`` (when positive) is refused before it is allocated.  Given a
:class:`Visit` (a conversion's source loops), the function takes the source struct instead of
``n``, ``g`` and ``v``, and each pass over the entries runs inside those loops (the first one
counts them).

The passes follow the plan (see :mod:`spf.front.writing`): the part's share of the entries
and the constraints over the coordinates alone (once the solved indices and the keys stored at
their rank's slot are replaced by the entry's values), in one first pass;
permutations chosen by entry counts; the solved atoms per entry; the extents of coordinate
indices; each position index in layout order (ranks of its keys within its group by a stable
sort, which is skipped where the entries already arrive in key order; counts and prefix sums
into its pointer arrays; runs; derived fields); scalar fields that size arrays or that a
``linear`` property pins; the padding check; then every index array, marker and the values are
stored, and every constraint of the part that the passes do not establish is checked per
entry.  Index arrays the writer
computes (pointers, bounds) are built in int64 and narrowed into the layout's widths; those
only stored per entry are written in their own width; each value is checked.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction
from functools import partial

from ..back import ctree as t
from ..back.c_printer import CPrinter
from ..back.names import field_ctype, struct_name, struct_typedef
from ..back.status import Status, c_enum, c_name
from ..back.templates import text as template_text
from ..errors import SpecError
from ..front import index_expr as ie
from ..front.established import implied, within_shape
from ..front.isl_bridge import isl_limit
from ..front.layout import Layout, wider_hint
from ..front.layout_file import layout_error
from ..front.properties import Linear, Ordering, Permutation, Property
from ..front.terms import Aff, Atom, Constraint, FloorDiv, UFCall, format_constraint
from ..front.writing import (
    ENTRY,
    Cover,
    Marker,
    PartWrite,
    Permuted,
    Position,
    Run,
    Solved,
    Start,
    WritePlan,
    slots_disjoint,
)

E = "e"                         # the entry index of every per-entry loop
_WIDTH_MAX = {"int8_t": 127, "int16_t": 32767, "int32_t": 2 ** 31 - 1, "int64_t": 2 ** 63 - 1}


@dataclass(frozen=True)
class Refusal:
    """One way the written entries can be refused: ``text`` formatted with ``at`` (the entry's
    coordinates), ``x0``..``x2`` (numbers the C reports) and ``other`` (another entry);
    ``spec``: the field of the layout file at fault (SpecError), else None: the entries are
    (ArgumentError)."""

    text: str
    spec: str | None = None         # the layout field a fault of the layout file is blamed on
    memory: str | None = None       # the array over the byte limit (x0: its bytes)
    values: bool = False            # {given} and {read}: two values' bytes after other entry


@dataclass(frozen=True)
class WriterSource:
    """The C writing entries into ``layout``: the function ``name`` (:attr:`definition`) and
    what its statuses mean."""

    layout: Layout
    name: str
    signature: t.Signature
    body: tuple[t.Node, ...]
    refusals: tuple[Refusal, ...]
    arrays: tuple[tuple[str, int], ...]     # array fields in declaration order, their ranks
    proven: tuple[Property, ...] = ()       # the layout's properties its C checks
    notes: tuple[str, ...] = ()             # decisions the header states (runs of one value)
    visits: bool = False                    # reads the source in its own loops (a Visit)
    helpers: tuple[t.Function, ...] = ()    # static functions it calls, defined before it

    @property
    def definition(self) -> str:
        """The function as C text."""
        return CPrinter().definitions([*self.helpers, t.Function(
            self.signature, list(self.body), f"Entries written into {self.layout.name} "
            "(spf.store).")])

    @property
    def err_size(self) -> int:
        return self.values_at + (4 if any(r.values for r in self.refusals) else 0)

    @property
    def values_at(self) -> int:
        """Where ``spf_err`` holds two values' bytes (16 each), for refusals that name them."""
        return 4 + 2 * self.layout.order

    def header(self) -> list[str]:
        """The file header's lines: what the function does and its refusals."""
        lines = [f"{self.name}: entries written into {self.layout.name} as its relation solves "
                 "for each entry's place (spf.store); every array of B is malloc'd here",
                 "  (the caller frees them), every scalar field set.  Returns 0, "
                 f"{c_name(Status.OUT_OF_MEMORY)}, or {c_name(Status.REFUSED)} with spf_err = "
                 "{refusal, entry coordinates, x0, x1, x2, other entry"
                 + (", the value given, the value read (each in 2 int64s, as its bytes)"
                    if any(r.values for r in self.refusals) else "") + "}:"]
        lines += [f"  {k}: {r.text}" for k, r in enumerate(self.refusals)]
        return lines + list(self.notes)


_REPORTS = (t.Param("int64_t *restrict", "spf_err"), t.Param("int64_t *restrict", "spf_sizes"))


@dataclass(frozen=True)
class Visit:
    """A source's own loops over its entries (a conversion's, :class:`~spf.assembly.
    FunctionRole` ``VISIT``), which feed the writer's passes instead of an entry list: each
    pass over the entries runs inside them (at their :class:`~spf.back.ctree.Hole`), entry
    ``e`` counted as they arrive (the first pass sets ``n``).  The loops must visit every
    entry once, in any order (:attr:`ordered`: the order Z3 proved, if any), and declare none
    of the names the writer's passes use (:data:`WRITER_NAMES`)."""

    param: t.Param                  # the source's struct, which the loops read
    fields: tuple[t.Node, ...]      # its fields read once, before every pass
    loops: tuple[t.Node, ...]       # the loops, with a hole for the statement
    coords: tuple[str, ...]         # each logical coordinate's C name inside them
    ordered: tuple[tuple[int, bool], ...] = ()  # coordinates (decreasing?) whose order the
    #                                 loops follow (Z3 proved: non-decreasing lexicographically)
    helpers: frozenset[str] = frozenset()       # the C helpers the loops call (spf_floord)
    within: bool = False            # every entry they visit lies within the source's shape
    #                                 (a valid tensor of a layout whose relation keeps them there)

    @property
    def outer(self) -> frozenset[int]:
        """The coordinates fixed for a whole run of the innermost loop (declared outside it,
        :func:`~spf.back.ctree.declared_outside`): a CSR source's row."""
        fixed = t.declared_outside(list(self.loops), self.coords)
        return frozenset(k for k, c in enumerate(self.coords) if c in fixed)

    @property
    def value(self) -> str:
        """The entry's value in C, inside the loops."""
        return next(n.value for n in t.walk(list(self.loops)) if isinstance(n, t.Hole))


# names the writer's passes read, which loops visiting the entries must not declare
WRITER_NAMES = frozenset({"e", "n", "r", "c"})


def visitable(plan: WritePlan) -> bool:
    """Whether the writer of ``plan`` can run in a source's loops: not a union's (its parts)
    nor runs of one value (they re-read the entries they keep)."""
    return not (plan.others or plan.first.covers)


class _NeedsListError(Exception):
    """A pass reads an entry other than the one visited (or the one before): the entries
    must be listed."""


def c_ident(name: str) -> str:
    """``name`` as a C identifier (characters outside [A-Za-z0-9_] spelled by code point)."""
    return re.sub(r"[^A-Za-z0-9_]", lambda m: f"_u{ord(m.group()):x}_", name)


def writer_source(plan: WritePlan, name: str, visit: Visit | None = None) -> WriterSource:
    """The C function writing entries into ``plan.layout`` (see the module docstring); with
    ``visit``, the entries of the source those loops visit (:attr:`WriterSource.visits`),
    where every pass can read them there, else the listed entries."""
    if visit is not None and (not visitable(plan) or set(visit.coords) & WRITER_NAMES):
        visit = None
    try:
        w = _Writer(plan, name, visit)
        body = w.lower()
    except _NeedsListError:
        visit = None
        w = _Writer(plan, name)
        body = w.lower()
    lay = plan.layout
    given = (t.Param("int64_t", "spf_n"), t.Param("const spf_index_t *const *", "spf_g"),
             t.Param("const spf_value_t *restrict", "spf_v")) if visit is None \
        else (visit.param,)
    signature = t.Signature("int", name, (
        t.Param(f"{struct_name(lay)} *restrict", "B"), *_REPORTS, *given,
        t.Param("const spf_value_t *restrict", "spf_fill"),
        t.Param("const int64_t *restrict", "spf_shape"), t.Param("int", "spf_allow_padding"),
        t.Param("int64_t", "spf_max_bytes")))
    arrays = tuple((f, len(spec.dims)) for f, spec in lay.fields.items() if spec.is_array)
    notes = tuple(f"  {c.index}: one value covers a run of consecutive {c.coordinate}; equal "
                  "values at consecutive coordinates share a run (maximal runs: the fewest); "
                  f"{c.end} = {_run_end(plan, c)}" + ("; runs abut, gaps are runs of the fill"
                                                      if c.dense else "")
                  for c in plan.first.covers)
    helpers = (_entry_lookup(visit, name),) if visit is not None and w.looked_up else ()
    return WriterSource(lay, name, signature, tuple(body), tuple(w.refusals), arrays,
                        tuple(w.proven), notes, visit is not None, helpers)


def _entry_lookup(visit: Visit, name: str) -> t.Function:
    """``<name>_entry(A, entry, k)``: coordinate ``k`` of the ``entry``-th entry the source's
    loops visit (-1 past the last), for a refusal naming another entry than the one visited:
    the loops run again, only when the write fails."""
    fields = [n.name for n in visit.fields if isinstance(n, t.Declare)]
    *picked, last = visit.coords
    found = " : ".join([*(f"spf_k == {k} ? (int64_t){c}" for k, c in enumerate(picked)),
                        f"(int64_t){last}"])
    return t.Function(
        "static " + str(t.Signature("int64_t", f"{name}_entry", (
            visit.param, t.Param("int64_t", "spf_entry"), t.Param("int", "spf_k")))),
        [*visit.fields,
         *([t.Call(", ".join(f"(void){f}" for f in fields), note="the loops may read only "
                   "some of them")] if fields else []),
         t.Declare("int64_t", E, "0"),
         *t.fill(list(visit.loops), [t.If(f"{E} == spf_entry", [t.Return(found)]),
                                     t.Call(f"++{E}")]),
         *([] if picked else [t.Call("(void)spf_k")]),
         t.Return("-1")],
        "Coordinate spf_k of entry spf_entry of A, in the order A's loops visit them (-1 "
        "past the last): the other entry a refusal names, found only when the write fails.")


def writer_file(src: WriterSource, before: str = "") -> str:
    """The writer's definitions as a block of a C file: the store primitives, the layout's
    struct and the function (``before``: text that already defines the struct)."""
    struct = "" if f"}} {struct_name(src.layout)};" in before \
        else struct_typedef(src.layout) + "\n\n"
    return (c_enum() + "\n\n" + template_text("store.c").rstrip() + "\n\n" + struct
            + src.definition)


@dataclass(frozen=True)
class _Store:
    """One store per entry: its statements, the array written and the arrays it reads."""

    node: t.Node
    array: str
    reads: frozenset[str]
    running: frozenset[str] = frozenset()   # running ranks it reads
    build: Callable[[], _Store] | None = None   # builds it again (another rank mode)


@dataclass(frozen=True)
class _Running:
    """A rank kept as a running count while the entries arrive in key order (its vector
    only out of order): the flag, the C variable of the count, the columns compared with
    the entry before (groups first), the largest rank plus one."""

    ordered: str
    var: str
    cols: tuple[tuple[str, bool], ...]
    ngroups: int
    top: str
    distinct: bool = False      # no two entries share a key: one more at each entry
    fresh: str = ""             # the flag of a new group, set where a run of the innermost
    #                             loop starts (groups fixed for it, :meth:`_Writer.hoisted`)
    fixed: bool = False         # Z3 proved the order: the running count is the only mode


@dataclass(frozen=True)
class _Table:
    """Ranks read from a table over the columns' joint range (entries out of order, in a
    source's loops, where the range holds at most 4n + 64 ids): the flag set when it was
    built, the table (each id's rank), the columns and each one's lowest value, highest
    value and width (C variables)."""

    flag: str
    table: str
    cols: tuple[tuple[str, bool], ...]
    bounds: tuple[tuple[str, str, str], ...]


class _Mode(Enum):
    """How a pass reads a rank that arrives in order or not, as the first passes found: a
    pass is printed once per mode (:meth:`_Writer.write_passes`), so that each loop reads it
    one way (a choice inside the loop keeps gcc from keeping the loop's values in
    registers)."""

    RUNNING = "the running count"
    TABLE = "the table over the keys"
    VECTOR = "the rank vector"


class _ElsewhereError(Exception):
    """A running rank printed at another entry than the loop's (it has no vector in order)."""


class _Writer:
    """Builds the write function's body pass by pass (the order of
    :func:`spf.runtime.writer.write`, which this replaces)."""

    def __init__(self, plan: WritePlan, name: str, visit: Visit | None = None):
        self.plan, self.lay, self.name = plan, plan.layout, name
        self.visit = visit                  # the source's loops, which give the entries
        self.outer = visit.outer if visit else frozenset()  # coordinates fixed per inner run
        self.before: set[int] = set()       # coordinates of the entry before the visited
        #                                     one read since the last pass over the entries
        self.looked_up = False              # a refusal names another visited entry
        self.part: PartWrite = plan.first
        self.outs = list(self.lay.relation.out_vars or ())
        self.b = t.Builder()
        self.refusals: list[Refusal] = []
        self.env: dict[str, str] = {}           # per-entry names -> their int64 vector
        self.inline: dict[str, Aff | int | Callable[[], str]] = {}  # per-entry names
        #   computed where read: a value, the logical coordinate k, or C printed at the entry
        self.totals: dict[str, str] = {}        # position -> the positions it fills (its
        #                                         ranks from 0 per group, groups one after
        #                                         another): its largest value plus one
        self.built: set[Constraint] = set()     # constraints the passes establish
        self.entry = E                          # the entry whose values are printed
        self.arrays: dict[str, tuple[str, list[str]]] = {}    # field -> (C var, dim vars)
        self.narrow: dict[str, str] = {}        # arrays written in their own C type, not int64
        self.known: set[str] = set()            # scalar fields set so far
        self.owned: list[str] = []              # vectors freed at the end
        self.injective: set[str] = set()        # arrays built here holding no value twice
        self.decls: list[t.Node] = []
        self.temp = 0
        self.final = False          # names read as the fields hold them (the checks)
        self.keep: str | None = None    # a union's first part: the entries kept, compacted
        self.dropped: str | None = None     # and the entries it leaves to the other parts
        self.proven: list[Property] = []        # properties checked here, on what is written
        self.local: dict[str, str] = {}     # names bound to C variables (a union's checks)
        self.screened: dict[Constraint, Constraint] = {}   # constraints over the coordinates
        #   alone once the solved indices are replaced (their reduced form): tested first
        self.keyed: set[UFCall] = set()     # arrays stored at a position ranked by them
        self.box: list[Constraint] = []     # the shape's bounds the screened ones leave out
        self.orders: dict[str, str] = {}    # a lazy rank vector -> its in-order flag
        self.fill_read = False              # spf_absent declared (what no entry holds)
        self.given = ("spf_g", "spf_v")         # the entries as given (before runs)
        self.running: dict[str, _Running] = {}  # rank vector -> its running count in order
        self.tables: dict[str, _Table] = {}     # rank vector -> its table out of order
        self.read_running: set[str] = set()     # running ranks printed since the last loop
        self.forced: dict[str, _Mode] = {}      # rank vector -> the one way it is read now
        self.kept_as: dict[str, Aff] = {}       # vectors of per-entry values: the values
        self.reads_within: set[UFCall] = set()  # inverse reads proven inside their extent
        self.placed: dict[str, Aff] = {}        # run positions: their value (JDS's pp =
        #                                         jdPtr(pd) + perm⁻¹(gi)), for what is proven
        self.run_values: dict[str, tuple[str, str]] = {}    # per-entry names fixed per run
        #   of the source's innermost loop, printed since the last pass: (C variable, value)

    # ---- names and expressions ----------------------------------------------------------
    def fresh(self, what: str) -> str:
        self.temp += 1
        return f"spf_{c_ident(what)}_{self.temp}"

    def at(self, name: str, entry: str | None = None) -> str:
        """A per-entry name's value at ``entry`` (default: the entry being printed, ``e``)."""
        if name in self.env:
            return f"{self.env[name]}[{entry or self.entry}]"
        outer, self.entry = self.entry, entry or self.entry
        try:
            value = self.inline[name]
            if isinstance(value, int):
                return self.given_at(value, self.entry)
            if isinstance(value, Aff) and self.entry == E and self.per_run(value):
                return self.run_value(name, value)
            return self.aff(value) if isinstance(value, Aff) else value()
        finally:
            self.entry = outer

    def per_run(self, a: Aff) -> bool:
        """Whether ``a`` is fixed for a whole run of the source's innermost loop: it reads
        only coordinates the loops fix for the run (a CSR source's row), scalars, and arrays
        no entry stores into (built before the passes that read them: perm⁻¹, slicePtr)."""
        if self.visit is None or not self.outer:
            return False
        stored = {s.atom.name for s in self.part.solved if isinstance(s.atom, UFCall)}
        for atom, _ in a.terms:
            if isinstance(atom, FloorDiv):
                ok = self.per_run(atom.num)
            elif isinstance(atom, UFCall):
                ok = atom.name not in stored and atom.name in self.arrays and \
                    all(self.per_run(x) for x in atom.args)
            else:
                value = self.inline.get(atom)
                ok = atom not in self.env and (
                    value in self.outer if isinstance(value, int) else
                    self.per_run(value) if isinstance(value, Aff) else
                    value is None and (atom in self.lay.params or atom in self.known))
            if not ok:
                return False
        return True

    def run_value(self, name: str, value: Aff) -> str:
        """A constant computed once per run of the source's innermost loop, where the run
        starts (:meth:`over_entries` declares it in the head), holding per-entry name
        ``name``."""
        if name not in self.run_values:
            var = f"spf_run_{c_ident(name)}"
            self.run_values[name] = (var, self.aff(value))
        return self.run_values[name][0]

    def given_at(self, k: int, entry: str) -> str:
        """Coordinate ``k`` of the entry ``entry`` as given (-1: its value): listed, or
        visited (``e``, or ``e - 1``: the one before)."""
        if self.visit is None:
            return f"spf_v[{entry}]" if k < 0 else f"(int64_t)spf_g{k}[{entry}]"
        if entry == E:
            return self.visit.value if k < 0 else f"(int64_t){self.visit.coords[k]}"
        if entry == f"{E} - 1" and k >= 0:
            self.before.add(k)
            return f"spf_prev{k}"
        raise _NeedsListError(entry)

    def column(self, name: str) -> str:
        """A per-entry name as a vector (computed now if it is computed where read)."""
        if name not in self.env:
            var = self.vector(name)
            self.each(t.Assign(f"{var}[{E}]", self.at(name)))
            value = self.inline.pop(name)
            if isinstance(value, Aff):
                self.kept_as[var] = value
            self.env[name] = var
        return self.env[name]

    def buffer(self, ctype: str, what: str, init: str) -> str:
        """A buffer of this function: NULL until ``init`` allocates it (out of memory
        checked), freed at the end."""
        var = self.fresh(what)
        self.decls.append(t.Declare(f"{ctype} *", var, "NULL"))
        self.b.add(t.Assign(var, init))
        self.oom_check(var)
        self.owned.append(var)
        return var

    def vector(self, what: str, size: str = "n", fill: str | None = None) -> str:
        """A new int64 vector (freed at the end)."""
        return self.buffer("int64_t", what, f"spf_st_filled({size}, {fill})" if fill is not None
                           else f"spf_st_vector({size})")

    def oom_check(self, var: str) -> None:
        self.b.add(t.If(f"!{var}", [t.Assign("spf_status", c_name(Status.OUT_OF_MEMORY)),
                                    t.Goto("spf_done")], braces=True))

    def scalar(self, name: str) -> str:
        return f"f_{c_ident(name)}"

    def name_text(self, name: str) -> str:
        if name in self.local:
            return self.local[name]
        if self.final and name in self.known:       # a scalar field solved per entry too
            return self.scalar(name)
        if name in self.env or name in self.inline:
            return self.at(name)
        if name in self.lay.params:
            return f"INT64_C({self.lay.params[name]})"
        if name in self.lay.fields and not self.lay.fields[name].is_array:
            return self.scalar(name)
        raise SpecError(f"layout {self.lay.name}: {name} is read before the writer determines "
                        "it", self.lay.source)

    def aff(self, a: Aff) -> str:
        """``a`` for entry ``e`` (int64)."""
        parts = []
        for atom, k in a.terms:
            if isinstance(atom, str):
                x = self.name_text(atom)
            elif isinstance(atom, FloorDiv):
                x = f"spf_st_fdiv({self.aff(atom.num)}, {atom.den})"
            else:
                x = self.read(atom)
            parts.append(x if k == 1 else f"-{x}" if k == -1 else f"INT64_C({k}) * {x}")
        if a.const or not parts:
            parts.append(f"INT64_C({a.const})")
        return "(" + " + ".join(parts) + ")"

    def read(self, call: UFCall) -> str:
        if call.name not in self.arrays:
            raise SpecError(f"layout {self.lay.name}: {call} is read before the writer "
                            f"determines {call.name}", self.lay.source)
        return self.read_at(call.name, self.offset(call.name, [self.aff(x) for x in call.args]))

    def read_at(self, array: str, off: str) -> str:
        """``array`` read at offset ``off`` (int64; outside: below every bound)."""
        var = self.arrays[array][0]
        read = "SPF_ST_READ_NARROW" if array in self.narrow else "spf_st_read"
        return f"{read}({var}, {off})"

    def offset(self, array: str, args: list[str]) -> str:
        """The row-major offset of ``array[args]``, -1 outside its extents."""
        return self.offset_tested(array, args)[0]

    def offset_tested(self, array: str, args: list[str],
                      proven: Sequence[Aff | None] = ()) -> tuple[str, bool]:
        """:meth:`offset`, but an argument whose Aff (``proven``, where given) lies within its
        extent at every entry that reaches the passes (:meth:`in_extent`) is not tested;
        and whether some argument is (else the offset is never -1)."""
        _, dims = self.arrays[array]
        if len(args) != len(dims):
            raise layout_error(self.lay, f"layout {self.lay.name}: {array} is read with "
                               f"{len(args)} arguments; it has {len(dims)} extents", array)
        spec = self.lay.fields.get(array)      # None: a vector of the writer's own
        known = [*proven, *[None] * (len(args) - len(proven))]
        tested = [spec is None or a is None or not self.in_extent(a, spec.dims[k])
                  for k, a in enumerate(known)]
        if len(args) == 1:
            return (f"spf_st_off1({args[0]}, {dims[0]})" if tested[0] else args[0]), tested[0]
        inside = " && ".join(f"{a} >= 0 && {a} < {d}"
                             for a, d, test in zip(args, dims, tested) if test)
        flat = args[0]
        for a, d in zip(args[1:], dims[1:]):
            flat = f"({flat}) * {d} + {a}"
        return (f"({inside} ? {flat} : -1)" if inside else flat), bool(inside)

    def in_extent(self, a: Aff, extent: ie.IExpr) -> bool:
        """Whether ``0 <= a < extent`` at every entry the first pass lets through: a layout
        index the passes keep below the extent (a rank below the largest group plus one), or
        as :meth:`within` proves."""
        bound = ie.affine(extent)
        if bound is None:
            return False
        if {Constraint.make(a, False), Constraint.make(bound - a - 1, False)} <= self.built:
            return True
        return self.within(a, extent)

    def ie_text(self, e: ie.IExpr, per_entry: bool = False) -> str:
        """An index expression in C: a declared extent (over scalar fields and arrays), or
        with ``per_entry`` a value subscript (entry ``e``'s names first)."""
        def call(name: str, args: list[ie.IExpr]) -> str:
            if name not in self.arrays:
                raise KeyError(name)
            return self.read_at(name, self.offset(name, [self.ie_text(a, per_entry)
                                                         for a in args]))

        def name_text(name: str) -> str:
            if name in self.local:
                return self.local[name]
            if per_entry and (name in self.env or name in self.inline):
                return self.at(name)
            if name in self.lay.params:
                return f"INT64_C({self.lay.params[name]})"
            if name not in self.known:
                raise KeyError(name)
            return self.scalar(name)
        return ie.to_c_with(e, name_text, call, wide=True)

    # ---- statements ---------------------------------------------------------------------
    def each(self, *body: t.Node, count: str = "n", running: set[str] | None = None,
             counting: bool = False) -> None:
        """``for e in [0, count)``: body; over the entries, each running rank the body reads
        (``running``, default: those read since the last loop) computed first; ``counting``:
        the entries' number set in ``n`` (the first visit of a source's entries)."""
        reads = self.take_running() if running is None else running
        if count != "n":
            self.b.add(t.For(f"int64_t {E} = 0", f"{E} < {count}", f"++{E}", list(body)))
            return
        before: list[t.Node] = []
        prelude: list[t.Node] = []
        head: list[t.Node] = []
        for rank in sorted(reads):
            r = self.running[rank]
            before.append(t.Declare("int64_t", r.var, "0"))
            prelude.append(t.If(f"{r.ordered} && {E} > 0", self.rank_step(r)))
            if r.fresh:     # the groups compared once per run of the innermost loop
                before.append(t.Declare("int", r.fresh, "0"))
                head.append(t.Assign(r.fresh, self.differ(r.cols[:r.ngroups])))
                prelude.append(t.Assign(r.fresh, "0"))
        loop = self.over_entries([*prelude, *body], counting, head)
        self.b.add(t.Block([*before, *loop]) if before else loop[0] if len(loop) == 1
                   else t.Block(loop))

    def over_entries(self, body: list[t.Node], counting: bool = False,
                     head: list[t.Node] | None = None) -> list[t.Node]:
        """``body`` run for each entry ``e`` in turn: a loop over the listed entries, or
        the source's loops (:class:`Visit`), where ``body`` reads the visited entry's
        coordinates and value as those loops name them, and the previous entry's
        coordinates as ``spf_prev<k>``; ``head`` (in a source's loops only) before each run
        of their innermost loop, where it reads the coordinates fixed for that run."""
        if self.visit is None:
            return [t.For(f"int64_t {E} = 0", f"{E} < n", f"++{E}", body)]
        before, self.before = self.before, set()
        runs, self.run_values = self.run_values, {}     # each pass declares what it read
        head = [*(t.Declare("int64_t", var, value, const=True) for var, value in runs.values()),
                *(head or [])]
        v = self.visit
        named: list[t.Node] = [t.Call(", ".join(f"(void){c}" for c in v.coords),
                                      note="a pass may read only some coordinates")]
        after = [t.Assign(f"spf_prev{k}", f"(int64_t){v.coords[k]}") for k in sorted(before)]
        return [t.Declare("int64_t", E, "0", note="the entries visited so far"),
                *(t.Declare("int64_t", f"spf_prev{k}", "0") for k in sorted(before)),
                *t.fill(list(v.loops), [*named, *body, *after, t.Call(f"++{E}")], head),
                *([t.Assign("n", E, note="every entry visited")] if counting else [])]

    def take_running(self) -> set[str]:
        """The running ranks printed since the last call."""
        out, self.read_running = self.read_running, set()
        return out

    def rank_at(self, rank: str) -> str:
        """Entry ``e``'s rank at a position ranked by :meth:`ranks` with ``running``: in
        order, the running count its loop keeps (:meth:`each`); else the rank vector."""
        r = self.running[rank]
        if self.entry != E:
            raise _ElsewhereError(rank)
        mode = self.forced.get(rank)
        table = self.tables.get(rank)
        if mode is _Mode.TABLE and table is not None:
            return f"{table.table}[{self.table_id(table)}]"
        if mode is _Mode.VECTOR:
            return f"{rank}[{E}]"
        self.read_running.add(rank)
        if mode is _Mode.RUNNING:
            return r.var
        if table is not None:
            return (f"({r.ordered} ? {r.var} : {table.flag} ? {table.table}[{self.table_id(table)}]"
                    f" : {rank}[{E}])")
        return f"({r.ordered} ? {r.var} : {rank}[{E}])"

    def table_id(self, table: _Table) -> str:
        """Entry ``e``'s id in ``table``: row-major over the columns' ranges (a decreasing
        column reversed)."""
        out = ""
        for (c, down), (lo, hi, width) in zip(table.cols, table.bounds):
            at = self.col_at(c, E)
            term = f"({hi} - {at})" if down else f"({at} - {lo})"
            out = f"({out}) * {width} + {term}" if out else term
        return out

    def rank_step(self, r: _Running) -> list[t.Node]:
        """Entry ``e``'s running rank from entry ``e - 1``'s (in order): 0 in a new group,
        one more at a new key, the same at the same key."""
        step = t.Assign(r.var, "1", "+=")
        key: list[t.Node] = [step] if r.distinct else [
            t.If(self.differ(r.cols[r.ngroups:]), [step])]
        if not r.ngroups:
            return key
        return [t.If(r.fresh or self.differ(r.cols[:r.ngroups]), [t.Assign(r.var, "0")], key)]

    def differ(self, cols: Iterable[tuple[str, bool]]) -> str:
        """Whether entry ``e`` differs from entry ``e - 1`` in one of the columns."""
        return " || ".join(f"{self.col_at(c, f'{E} - 1')} != {self.col_at(c, E)}"
                           for c, _ in cols)

    def hoisted(self, groups: list[tuple[str, bool]]) -> bool:
        """Whether the group columns are coordinates a source's loops fix for a whole run of
        their innermost loop (a CSR source's row): then entries of one run share a group,
        and the group is compared with the entry before once per run, not per entry."""
        given = self.visit_columns(groups)
        return bool(groups) and given is not None and all(k in self.outer for k, _ in given)

    def refuse(self, text: str, x: tuple[str, ...] = (), entry: bool = True,
               other: str | None = None, spec: str | None = None,
               memory: str | None = None, at: list[str] | None = None,
               values: tuple[str, str] | None = None) -> list[t.Node]:
        """Statements refusing the write (entry ``e`` when ``entry``; ``at``: the coordinates
        named instead; ``values``: the given and read values named, C lvalues)."""
        refusal = Refusal(text, spec, memory, values is not None)
        if refusal not in self.refusals:
            self.refusals.append(refusal)
        order = self.lay.order
        out: list[t.Node] = [t.Assign("spf_err[0]", str(self.refusals.index(refusal)))]
        for k in range(order):
            out.append(t.Assign(f"spf_err[{1 + k}]", at[k] if at is not None
                                else self.at(self.outs[k]) if entry else "-1"))
        for k, v in enumerate(values or ()):
            out.append(t.Call(f"memcpy(&spf_err[{4 + 2 * order + 2 * k}], &{v}, sizeof({v}))"))
        for k, v in enumerate(x):
            out.append(t.Assign(f"spf_err[{1 + order + k}]", v))
        if other is not None:
            for k in range(order):
                out.append(t.Assign(f"spf_err[{4 + order + k}]", self.elsewhere(k, other)))
        return out + [t.Assign("spf_status", c_name(Status.REFUSED)), t.Goto("spf_done")]

    def elsewhere(self, k: int, entry: str) -> str:
        """Coordinate ``k`` of another entry than the one a pass is at, which a refusal names:
        listed, or found by visiting the source's entries again (:func:`_entry_lookup`;
        only when the write fails)."""
        if self.visit is None:
            return self.at(self.outs[k], entry)
        self.looked_up = True
        return f"{self.name}_entry(A, {entry}, {k})"

    def refuse_if(self, cond: str, text: str, x: tuple[str, ...] = (), entry: bool = True,
                  other: str | None = None, spec: str | None = None,
                  at: list[str] | None = None, values: tuple[str, str] | None = None) -> t.If:
        return t.If(cond, self.refuse(text, x, entry, other, spec, at=at, values=values))

    def entry_refusal(self, why: str) -> str:
        return f"entry {{at}} cannot be written into {self.lay.name}: {why}"

    # ---- the passes -----------------------------------------------------------------------
    def lower(self) -> list[t.Node]:
        b, part, plan = self.b, self.part, self.plan
        self.start()
        shared = bool(part.covers and plan.others)
        if shared:      # a union: its runs are of the entries the first part holds
            self.share()
        if part.covers:         # the entries holding values, before runs replace them
            b.add(t.Declare("int64_t", "spf_given", "0"))
            self.each(t.Assign("spf_given", f"!{self.same(self.value_of(E), self.absent())}",
                               "+="))
        for c in part.covers:
            self.cover(c)
        if not shared:
            self.share()
        for q in part.permuted:
            self.permute(q)
        self.solve()
        for c in part.covers:       # an interval's scalar bounds: its run's (none: an empty run)
            for s in part.solved:
                if isinstance(s.atom, str) and s.atom in (c.start, c.end):
                    self.set_scalar(s.atom, str(c.empty[s.atom == c.end]))
                    self.each(t.Assign(self.scalar(s.atom), self.aff(s.value)))
        boxed = self.box_tested()
        for field, value in part.extents:
            hi = self.range_hi(value)
            self.set_scalar(field, f"{hi} + 1 > 0 ? {hi} + 1 : 0")
            if boxed:       # above the value at every coordinate in the shape
                self.built.add(Constraint.make(Aff.var(field) - value - 1, False))
        for field in plan.emptied:
            self.set_scalar(field, "0")
        for p in part.positions:
            self.place(p)
            self.derive()
        self.sized()
        for pin in plan.pinned:
            least = [f"-spf_st_fdiv(-{self.aff(bd)}, {k})" for k, bd in pin.bounds]
            top = least[0]
            for more in least[1:]:
                top = f"({top}) > ({more}) ? ({top}) : ({more})"
            self.set_scalar(pin.field, top)
        slots = self.check_padding()
        self.write_passes([*self.store_fields(), *self.store_values(slots)])
        self.final = True
        self.checks()
        if not self.plan.others and not self.plan.reads_back_by_construction:
            self.count_first()      # no tuple but the entries' reads a nonzero value
        self.union_check(slots)
        self.property_checks()
        self.finish()
        if not self.fill_read:
            self.decls.append(t.Call("(void)spf_fill", note="no slot here holds the fill"))
        return [*self.source_fields(), *self.decls, *b.root]

    def source_fields(self) -> list[t.Node]:
        """With :class:`Visit`: the source's fields its loops read, once, before anything
        can fail (each pass may read only some)."""
        if self.visit is None:
            return []
        names = [n.name for n in self.visit.fields if isinstance(n, t.Declare)]
        return [*self.visit.fields,
                t.Call(", ".join(f"(void){n}" for n in names), note="a pass may read only "
                       "some of them")] if names else []

    def start(self) -> None:
        """The shape's scalar fields, the entry count and each coordinate as int64."""
        lay, b = self.lay, self.b
        b.add(t.Declare("int", "spf_status", "0"),
              t.Declare("int64_t", "n", "spf_n" if self.visit is None else "0",
                        note="" if self.visit is None else "the entries: counted by the "
                        "first visit"))
        for f, spec in lay.fields.items():
            if not spec.is_array:
                self.decls.append(t.Declare("int64_t", self.scalar(f), "0"))
        for k, (extent, g) in enumerate(zip(lay.shape, self.outs)):
            name = extent.as_name()
            if name is None and extent.names():     # such as -numRows: no shape gives it
                raise layout_error(lay, f"layout {lay.name}: a tensor's shape does not give "
                                   f"{sorted(extent.names())[0]}, which its shape ("
                                   f"{', '.join(map(str, lay.shape))}) reads (each extent is a "
                                   "scalar field or a constant)", "shape")
            if name is None:
                value = extent.evaluate({})
                b.add(self.refuse_if(f"spf_shape[{k}] != {value}", f"layout {lay.name} stores "
                                     f"tensors of shape ({', '.join(map(str, lay.shape))}); got "
                                     "an extent {x0} at dimension " + str(k),
                                     (f"spf_shape[{k}]",), entry=False))
            elif name in self.known:
                b.add(self.refuse_if(f"{self.scalar(name)} != spf_shape[{k}]",
                                     f"layout {lay.name} stores tensors of shape ("
                                     f"{', '.join(map(str, lay.shape))}); the extents of its "
                                     f"{name} differ", entry=False))
            else:
                self.set_scalar(name, f"spf_shape[{k}]")
            if self.visit is None:
                self.decls.append(t.Declare("const spf_index_t *", f"spf_g{k}", f"spf_g[{k}]"))
            self.inline[g] = k
        self.inline[ENTRY] = lambda: self.entry

    def cover(self, c: Cover) -> None:
        """One value slot covers a run of consecutive ``c.coordinate``: the entries in the
        order of their other coordinates, then ``c.coordinate``; an entry one past the run
        before it (its other coordinates the same) holding the same value extends that run,
        else starts one.  So the runs are maximal (the fewest the layout can hold); each
        becomes one entry at its first coordinate, its last coordinate in ``c.last``.  Where
        runs abut (``c.dense``), each group's gaps, from 0 to the extent, are runs of the
        layout's fill (:meth:`cover_dense`)."""
        k = self.outs.index(c.coordinate)
        self.b.add(t.Comment(f"layout index {c.index}: one value covers a run of consecutive "
                             f"{c.coordinate} (the value subscripts do not read {c.index}); "
                             "equal values at consecutive coordinates merge into maximal runs "
                             "(the fewest runs)" + ("; runs abut, so every gap is a run of the "
                                                    "fill" if c.dense else "")))
        cols = []
        for j, g in enumerate(self.outs):
            col = self.vector(f"coordinate_{j}")
            self.each(t.Assign(f"{col}[{E}]", self.at(g)))
            cols.append(col)
        others = [j for j, _ in enumerate(self.outs) if j != k]
        order = self.vector("order")
        self.sort_into(order, "n", [(cols[j], False) for j in others] + [(cols[k], False)])
        groups = " * ".join(f"spf_shape[{j}]" for j in others) or "1"
        size = f"2 * n + {groups} + 1" if c.dense else "n > 0 ? n : 1"
        alloc = f"spf_st_alloc(sizeof({{}}) * (size_t)({size}))"
        runs = [self.buffer("spf_index_t", f"run_{j}", alloc.format("spf_index_t"))
                for j, _ in enumerate(self.outs)]
        values = self.buffer("spf_value_t", "run_values", alloc.format("spf_value_t"))
        last = self.buffer("int64_t", f"{c.coordinate}_last", alloc.format("int64_t"))
        count = self.fresh("runs")
        self.b.add(t.Declare("int64_t", count, "0"))
        if c.dense:
            self.cover_dense(k, cols, order, groups, (runs, values, last, count))
        else:
            same = " && ".join([f"{count} > 0", f"{cols[k]}[spf_x] == {last}[{count} - 1] + 1",
                                *(f"{cols[j]}[spf_x] == {runs[j]}[{count} - 1]"
                                  for j in others),
                                f"{self.value_of('spf_x')} == {values}[{count} - 1]"])
            self.each(t.Declare("const int64_t", "spf_x", f"{order}[{E}]"),
                      t.If(same, [t.Assign(f"{last}[{count} - 1]", f"{cols[k]}[spf_x]",
                                           note="one past the run, the same value: extends it")],
                           self.add_run([f"{col}[spf_x]" for col in cols],
                                        k, f"{cols[k]}[spf_x]", self.value_of("spf_x"),
                                        (runs, values, last, count))))
        if c.one_run:
            self.one_run(k, runs, count)
        if self.dropped is not None:    # the entries the first part leaves, as given
            self.given = ("spf_given_g", "spf_given_v")
            self.b.add(t.Declare("const spf_value_t *", "spf_given_v", "spf_v"),
                       *(t.Declare("const spf_index_t *", f"spf_given_g{j}", f"spf_g{j}")
                         for j, _ in enumerate(self.outs)))
        self.b.add(t.Comment("the runs are the entries from here"), t.Assign("n", count),
                   t.Assign("spf_v", values),
                   *(t.Assign(f"spf_g{j}", runs[j]) for j, _ in enumerate(self.outs)))
        for j, g in enumerate(self.outs):       # read from the runs again
            self.env.pop(g, None)
            self.inline[g] = j
        self.keep = None
        self.env[c.last] = last

    def one_run(self, k: int, runs: list[str], count: str) -> None:
        """An interval: one run per group of the other coordinates; the first group holding
        more is refused, naming it (up to two coordinates) and its runs."""
        others = [j for j, _ in enumerate(self.outs) if j != k]
        named = others if len(others) <= 2 else []
        many, bad = self.fresh("many"), self.fresh("bad")
        same = " && ".join(f"{runs[j]}[{E}] == {runs[j]}[{{}}]" for j in others) or "1"
        self.b.add(t.Declare("int64_t", many, "0"), t.Declare("int64_t", bad, "0"))
        self.each(t.If(f"{E} > 0 && {same.format(f'{E} - 1')} && ({many} == 0 || "
                       f"{same.format(bad)})", [t.Assign(many, f"{many} ? {many} + 1 : 2"),
                                                t.Assign(bad, E)]), count=count)
        per = f" per {', '.join(self.outs[j] for j in others)}" if others else ""
        at = " at " + ", ".join(f"{self.outs[j]} = {{x{i}}}" for i, j in enumerate(named)) \
            if named else ""
        self.b.add(self.refuse_if(f"{many} > 0", f"{self.lay.name} holds one interval of one "
                                  f"value{per}; the entries{at} form {{x{len(named)}}} runs",
                                  (*(f"{runs[j]}[{bad}]" for j in named), many), entry=False))

    def add_run(self, at: list[str], k: int, hi: str, value: str,
                out: tuple[list[str], str, str, str]) -> list[t.Node]:
        """A new run at coordinates ``at`` ending at ``hi`` (coordinate ``k``) holding
        ``value``."""
        runs, values, last, count = out
        return [*(t.Assign(f"{runs[j]}[{count}]", f"(spf_index_t)({x})")
                  for j, x in enumerate(at)),
                t.Assign(f"{last}[{count}]", hi), t.Assign(f"{values}[{count}++]", value)]

    def cover_dense(self, k: int, cols: list[str], order: str, groups: str,
                    out: tuple[list[str], str, str, str]) -> None:
        """Abutting runs: every group (the other coordinates, row-major over the shape) covered
        from 0 to its extent less one; an entry, or a gap (the fill), holding the value of
        the run before it in its group extends that run."""
        _, values, last, count = out
        lay, others = self.lay, [j for j, _ in enumerate(self.outs) if j != k]
        fill = self.absent()
        at = [f"spf_o{j}" if j != k else "spf_next" for j, _ in enumerate(self.outs)]
        twice = (f"{lay.name}: an entry lies outside the tensor's shape or twice at one "
                 "coordinate")

        def put(hi: str, value: str) -> t.Node:
            return t.If(f"spf_next > 0 && {self.same(value, f'{values}[{count} - 1]')}",
                        [t.Assign(f"{last}[{count} - 1]", hi)],
                        self.add_run(at, k, hi, value, out))
        decode: list[t.Node] = [t.Declare("int64_t", "spf_rest", "spf_grp")] if others else []
        for j in reversed(others):
            decode += [t.Declare("const int64_t", f"spf_o{j}", f"spf_rest % spf_shape[{j}]"),
                       t.Assign("spf_rest", f"spf_shape[{j}]", "/=")]
        in_group = " && ".join(["spf_at < n"] + [f"{cols[j]}[{order}[spf_at]] == spf_o{j}"
                                                 for j in others])
        self.b.add(t.Comment("gap runs hold the fill (spf_fill: what the tensor holds where "
                             "no entry is)"),
                   t.Declare("int64_t", "spf_at", "0"),
                   t.For("int64_t spf_grp = 0", f"spf_grp < {groups}", "++spf_grp", [
                       *decode, t.Declare("int64_t", "spf_next", "0",
                                          note="the group's first coordinate not yet covered"),
                       t.While(in_group, [
                           t.Declare("const int64_t", "spf_x", f"{order}[spf_at++]"),
                           t.Declare("const int64_t", "spf_c", f"{cols[k]}[spf_x]"),
                           self.refuse_if("spf_c < spf_next || spf_c >= spf_shape[" + str(k)
                                          + "]", twice, entry=False),
                           t.If("spf_c > spf_next", [put("spf_c - 1", fill),
                                                     t.Assign("spf_next", "spf_c")],
                                note="a gap: a run of the fill"),
                           put("spf_c", self.value_of("spf_x")),
                           t.Assign("spf_next", "spf_c + 1")]),
                       t.If(f"spf_next < spf_shape[{k}]", [put(f"spf_shape[{k}] - 1", fill)])]))
        self.b.add(self.refuse_if("spf_at < n", twice, entry=False))

    def set_scalar(self, name: str, value: str) -> None:
        self.b.add(t.Assign(self.scalar(name), value))
        self.known.add(name)

    def share(self) -> None:
        """The entries the written part holds: the others are refused, or (a union) left to
        the other parts (:meth:`union_check`)."""
        filters = self.part.filters
        if not self.plan.others:        # every filter and coordinate constraint in one pass
            self.screen()
            tests = [*(self.refuse_if(f"{self.aff(f)} < 0", f"entry {{at}} cannot be stored "
                                      f"in {self.lay.name}: its relation requires "
                                      f"{format_constraint(Constraint(f, False))}")
                       for f in filters if not self.sourced(Constraint(f, False))),
                     *(self.refuse_if(f"{self.aff(r.aff)} {'!=' if r.is_eq else '<'} 0",
                                      f"entry {{at}} cannot be stored in {self.lay.name}: its "
                                      f"relation requires {format_constraint(c)}")
                       for c, r in self.screened.items()
                       if Constraint.make(r.aff, r.is_eq) not in
                       {Constraint.make(f, False) for f in filters} and not self.sourced(r)),
                     *(self.refuse_if(f"{self.aff(c.aff)} < 0", f"entry {{at}} cannot be "
                                      f"stored in {self.lay.name}: it lies outside the shape "
                                      f"({', '.join(map(str, self.lay.shape))})")
                       for c in self.box if not self.given_within())]
            if self.visit is not None:      # the first visit counts the entries too
                self.b.add(t.Comment("the entries counted (n) and the constraints over the "
                                     "coordinates alone, in one pass" if tests else
                                     "the entries counted (n): the source keeps them within "
                                     "its shape, where they meet every constraint over the "
                                     "coordinates alone"))
                self.each(*tests, counting=True)
            elif tests:
                self.b.add(t.Comment("the constraints over the coordinates alone, in one pass"))
                self.each(*tests)
            return
        if not filters:
            return
        fails = " || ".join(f"{self.aff(f)} < 0" for f in filters)
        for g in self.outs:
            self.column(g)
        self.b.add(t.Comment("the entries the first part holds; the other parts give the rest"),
                   t.Declare("int64_t", "spf_kept", "0"))
        moves: list[t.Node] = [t.Assign(f"{v}[spf_kept]", f"{v}[{E}]") for v in self.env.values()]
        self.keep = self.vector("keep")
        moves.append(t.Assign(f"{self.keep}[spf_kept++]", E))
        self.dropped = self.vector("dropped")
        self.b.add(t.Declare("int64_t", "spf_dropped", "0"))
        self.each(t.If(f"!({fails})", moves,
                       [t.Assign(f"{self.dropped}[spf_dropped++]", E)]))
        self.b.add(t.Assign("n", "spf_kept"))

    def plain(self) -> dict[str, Aff]:
        """The layout indices solved as values of the coordinates (``pi = gi``)."""
        return {str(s.atom): s.value for s in self.part.solved
                if isinstance(s.atom, str) and s.divisor == 1 and s.atom not in self.known}

    def screen(self) -> None:
        """The part's constraints that name only logical coordinates and the fields known
        now (the shape's) once the solved indices are replaced: :meth:`share` tests them
        first, and the later passes rely on them (:meth:`within`)."""
        self.keyed = self.stored_by_rank()
        plain, allowed = self.own_values(), set(self.outs) | self.known | set(self.lay.params)
        for c in self.part.conj:
            r = Constraint.make(c.aff.substitute(plain), c.is_eq)
            if r.aff.terms and not r.calls() and r.names() <= allowed:
                with isl_limit(f"writing layout {self.lay.name}", self.lay.source):
                    always = implied([], r, sorted(self.outs))
                if always:      # such as pk <= 7 for pk = gi - 8*floor(gi/8)
                    self.built.add(Constraint.make(c.aff, c.is_eq))
                else:
                    self.screened[c] = r
        known = list(self.screened.values())
        with isl_limit(f"writing layout {self.lay.name}", self.lay.source):
            self.box = [c for c in within_shape(self.lay)
                        if not implied(known, c, sorted(self.outs))]

    def given_within(self) -> bool:
        """Whether the visited source's entries lie within the shape it gives (which
        :meth:`start` made this layout's): the first pass need not test them."""
        return self.visit is not None and self.visit.within and not self.plan.others

    def sourced(self, r: Constraint) -> bool:
        """Whether a screened constraint holds at every coordinate within the shape, so at
        every entry of a source that keeps its entries there (:meth:`given_within`)."""
        if not self.given_within():
            return False
        with isl_limit(f"writing layout {self.lay.name}", self.lay.source):
            return implied(within_shape(self.lay), r, sorted(self.outs))

    def box_tested(self) -> bool:
        """Whether the first pass tests every coordinate within the shape (not for a union,
        whose parts share the entries)."""
        return not self.plan.others

    def within(self, a: Aff, extent: ie.IExpr, slack: int = 1) -> bool:
        """Whether ``0 <= a <= extent - slack`` for every entry the first pass lets through
        (the screened constraints and the shape's box; ``a`` over solved indices, ``extent``
        a declared extent)."""
        bound = ie.affine(extent)
        if bound is None:
            return False
        value = a.substitute(self.plain())
        known, dims = self.facts(), sorted(self.outs)
        with isl_limit(f"writing layout {self.lay.name}", self.lay.source):
            return implied(known, Constraint.ge(value, Aff.num(0)), dims) and \
                implied(known, Constraint.ge(bound - slack, value), dims)

    def facts(self) -> list[Constraint]:
        """What holds at every entry the first pass lets through, over the coordinates, the
        layout indices and the fields known then: the screened constraints, the shape's box,
        and what the passes set (such as numBlockRows > floor(gi / 8), a rank below the
        largest group: 0 <= pd < numDiags)."""
        plain = self.plain()
        known = list(self.screened.values()) + (self.box if self.box_tested() else [])
        allowed = set(self.outs) | self.known | set(self.lay.params) | set(self.lay.indices)
        for c in self.built:
            r = Constraint.make(c.aff.substitute(plain), c.is_eq)
            if not r.calls() and r.names() <= allowed:
                known.append(r)
        return known

    def established(self, c: Constraint) -> bool:
        """Whether ``c`` (over the coordinates, the entry's own values substituted) holds at
        every entry by what the passes build: every inverse permutation is read within its
        extent, where it lies in ``0 .. n - 1`` (a permutation of the positions) and the
        permutation read at it gives its argument back (``perm(perm⁻¹(gi)) = gi``: both are
        built so), a run position is its anchor plus its offset (``placed``); then the
        facts (:meth:`facts`) imply ``c`` (isl)."""
        inverses = {q.inverse: q for q in self.part.permuted}
        if not inverses or not c.calls():
            return False
        c = Constraint.make(c.aff.substitute(self.placed), c.is_eq)
        known, dims = self.facts(), sorted(self.outs)
        back: dict[Atom, Aff] = {}
        fresh: dict[Atom, Aff] = {}
        for call in sorted(c.calls(), key=lambda x: len(str(x))):     # inner reads first
            if call in back or call in fresh:
                continue
            q = inverses.get(call.name)
            if q is not None:
                extent = ie.affine(self.lay.fields[q.array].dims[0])
                if extent is None or len(call.args) != 1 or not self.read_within(
                        call, extent, known, dims):
                    return False
                fresh[call] = Aff.var(f"spf_inverse{len(fresh)}")
                known += [Constraint.ge(fresh[call], Aff.num(0)),
                          Constraint.ge(extent - 1, fresh[call])]
            elif len(call.args) == 1 and len(call.args[0].terms) == 1 and \
                    not call.args[0].const and call.args[0].terms[0][1] == 1:
                inner = call.args[0].terms[0][0]
                if isinstance(inner, UFCall) and inner.name in inverses and \
                        inverses[inner.name].array == call.name:
                    back[call] = inner.args[0]      # perm(perm⁻¹(x)) = x
        reduced = Constraint.make(c.aff.substitute(back).substitute(fresh), c.is_eq)
        if reduced.calls():
            return False
        with isl_limit(f"writing layout {self.lay.name}", self.lay.source):
            return implied(known, reduced, [*dims, *(str(v) for v in fresh.values())])

    def read_within(self, call: UFCall, extent: Aff, known: list[Constraint],
                    dims: list[str]) -> bool:
        """Whether ``call``'s one argument (no read in it) lies in ``0 .. extent - 1`` at
        every entry (isl, over ``known``); a proof is kept (the facts only grow)."""
        if call in self.reads_within:
            return True
        arg = call.args[0]
        with isl_limit(f"writing layout {self.lay.name}", self.lay.source):
            if arg.calls() or not (implied(known, Constraint.ge(arg, Aff.num(0)), dims) and
                                   implied(known, Constraint.ge(extent - 1, arg), dims)):
                return False
        self.reads_within.add(call)
        return True

    def permute(self, q: Permuted) -> None:
        """``q.array``: positions ordered by the entry count of their values (within windows),
        stably; and its inverse."""
        perm = self.allocate(q.array)
        size = self.arrays[q.array][1][0]
        if self.within(q.value, self.lay.fields[q.array].dims[0]):
            value = self.aff(q.value)       # inside, as the first pass established
        else:
            value = f"{self.vector(f'{q.array}_at')}[{E}]"
            self.each(t.Assign(value, self.aff(q.value)),
                      self.refuse_if(f"{value} < 0 || {value} >= {size}", self.entry_refusal(
                          f"{q.value} is outside the {{x0}} values of the permutation "
                          f"{q.array}"), (size,)))
        inverse = self.vector(q.inverse, size)
        if q.descending is None:
            self.each(t.Assign(f"{perm}[{E}]", E), count=size)
        else:
            counts = self.vector(f"{q.array}_count", size, "0")
            window = self.vector(f"{q.array}_window", size)
            self.each(t.Assign(f"{counts}[{value}]", "1", "+="))
            self.each(t.Assign(f"{window}[{E}]", f"{E} / {q.window}" if q.window else "0"),
                      count=size)
            self.sort_into(perm, size, [(window, False), (counts, q.descending)])
        self.each(t.Assign(f"{inverse}[{perm}[{E}]]", E), count=size)
        self.arrays[q.inverse] = (inverse, [size])
        self.injective.add(q.inverse)       # a permutation's inverse: no value twice

    def sort_into(self, order: str, count: str, cols: list[tuple[str, bool]]) -> None:
        """``order`` = the stable order of ``count`` items by the columns."""
        arr, desc = self.fresh("cols"), self.fresh("desc")
        self.b.add(t.Block([
            t.Declare("const int64_t *const", f"{arr}[{len(cols)}]",
                      "{" + ", ".join(c for c, _ in cols) + "}"),
            t.Declare("const int", f"{desc}[{len(cols)}]",
                      "{" + ", ".join(str(int(d)) for _, d in cols) + "}"),
            t.If(f"spf_st_order({count}, {len(cols)}, {arr}, {desc}, {order})",
                 [t.Assign("spf_status", c_name(Status.OUT_OF_MEMORY)), t.Goto("spf_done")])]))

    def ranks(self, groups: list[str], keys: list[tuple[str, bool]], marks: bool = False,
              counts: tuple[str, str] | None = None, lazy: bool = False,
              running: bool = False, top: bool = False) -> tuple[str, str]:
        """Per entry, the rank of its key among its group's distinct keys, and (``marks``) a
        uint8 vector marking the first entry of each distinct key (else "NULL"); with
        ``counts`` (a zeroed vector, the number of groups), each group's distinct keys
        counted into ``counts[g + 1]`` (``g`` the first group column).  A column is a vector
        of this function or a per-entry name, read where it is: entries that arrive in the
        columns' order are ranked (and counted) in one pass that stops at the first entry
        out of order; else through ``spf_st_ranks`` (a stable sort, or runs of whole
        groups) over int64 copies.  ``lazy``: the rank vector is allocated and filled only
        out of order (in order, the caller computes each rank; ``self.orders`` names the flag).
        ``running``: likewise, and in order each loop reading a rank counts it as the pass
        does (:meth:`rank_at`; ``self.running``); ``top``: the largest plus one kept."""
        first = self.buffer("uint8_t", "first", "malloc((size_t)(n > 0 ? n : 1))") \
            if marks else "NULL"
        rank = self.fresh("rank") if lazy or running else self.vector("rank")
        # a column is printed where it is read where that is cheap (a vector, a logical
        # coordinate, an affine sum of them, and in a source's loops anything computed from
        # the coordinates: the previous entry's are kept); one that reads an array or
        # divides over a list, or reads a running rank (kept by loops over the entries),
        # becomes a vector (once, shared by every later read)
        prefix = self.group_prefix(groups, keys) if counts is None else None
        if prefix is not None:      # a group's entries arrive together: compared as given
            groups = prefix
        cols = [(self.column(c) if (self.costly(c) and self.visit is None)
                 or self.reads_running(c) else c, d)
                for c, d in [(g, False) for g in groups] + keys]
        ordered = self.fresh("in_order")
        largest = self.fresh("top") if top else None
        given = self.visit_columns(cols)
        proven = given is not None and self.visit is not None and \
            tuple(given) == self.visit.ordered[:len(given)]
        # proven, and the columns name every coordinate: no two entries share a key
        distinct = proven and {k for k, _ in given or ()} == set(range(self.lay.order))
        counted = self.rank_pass(cols, len(groups), ordered, None if lazy or running else rank,
                                 first, counts[0] if counts else None, largest,
                                 checked=not proven, distinct=distinct)
        self.b.add(t.Comment("ranks of the keys within their groups, in one pass while the "
                             "entries arrive in key order" if counted else "ranks of the keys "
                             "within their groups, counted where they are read"
                             + (" (each group's entries arrive together)" if prefix else "")),
                   t.Declare("int", ordered, "1", note="Z3 proved that the source's loops visit "
                             "the entries in this order" if proven else ""))
        if largest:
            self.decls.append(t.Declare("int64_t", largest, "0"))
        if counted:
            self.b.add(t.Block(counted))
        if lazy or running:         # allocated only out of order
            self.decls.append(t.Declare("int64_t *", rank, "NULL", note="read only out of "
                                        "order, which cannot be" if proven else ""))
        if lazy:
            self.orders[rank] = ordered
        if running:
            self.running[rank] = _Running(
                ordered, f"{rank}_run", tuple(cols), len(groups), largest or "", distinct,
                self.fresh("fresh") if self.hoisted(cols[:len(groups)]) else "", proven)
        if not proven:          # proven: never out of order, no rank vector, no sort
            self.sorted_ranks(cols, len(groups), ordered, rank, first, counts, largest,
                              allocate=lazy or running)
        return rank, "NULL" if counts is not None else first

    def sorted_ranks(self, cols: list[tuple[str, bool]], ngroups: int, ordered: str, rank: str,
                     first: str, counts: tuple[str, str] | None, largest: str | None,
                     allocate: bool) -> None:
        """The ranks of :meth:`ranks` where the entries came out of order (``allocate``: the
        rank vector too): in a source's loops, a running rank through a table where the
        columns' range is narrow (:meth:`table_ranks`); else through ``spf_st_ranks`` over
        int64 copies of the columns."""
        table = self.visit is not None and counts is None and first == "NULL" and \
            rank in self.running
        self.b.nest(t.If(f"!{ordered}", [], note="out of order" + (
            "" if table else ": the columns copied as int64, ranked through a stable sort")))
        if table:
            flag = self.table_ranks(cols, rank, ngroups, largest)
            self.b.nest(t.If(f"!{flag}", [], note="a range too wide for a table: the columns "
                             "copied as int64, ranked through a stable sort"))
        if allocate:
            self.b.add(t.Assign(rank, "spf_st_vector(n)"))
            self.oom_check(rank)
            self.owned.append(rank)
        if counts is not None:      # what the pass counted before it stopped
            self.each(t.Assign(f"{counts[0]}[{E}]", "0"), count=f"{counts[1]} + 1")
            first = self.buffer("uint8_t", "first", "malloc((size_t)(n > 0 ? n : 1))")
        vectors = [(self.copy_of(c), d) for c, d in cols]
        arr, desc = self.fresh("cols"), self.fresh("desc")
        self.b.add(
            t.Declare("const int64_t *const", f"{arr}[{len(cols)}]",
                      "{" + ", ".join(c for c, _ in vectors) + "}"),
            t.Declare("const int", f"{desc}[{len(cols)}]",
                      "{" + ", ".join(str(int(d)) for _, d in vectors) + "}"),
            t.If(f"spf_st_ranks(n, {ngroups}, {len(cols)}, {arr}, {desc}, {rank}, {first})",
                 [t.Assign("spf_status", c_name(Status.OUT_OF_MEMORY)), t.Goto("spf_done")]))
        if counts is not None:
            self.each(t.Assign(f"{counts[0]}[{self.col_at(cols[0][0], E)} + 1]",
                               f"{first}[{E}]", "+="))
        if largest:
            self.b.add(t.Assign(largest, f"spf_st_top(n, {rank})"))
        if table:
            self.b.close()
        self.b.close()

    def table_ranks(self, cols: list[tuple[str, bool]], rank: str, ngroups: int,
                    largest: str | None) -> str:
        """Ranks through a table over the columns' joint range, read per entry where they
        are used (:meth:`rank_at`; no rank vector, no copies, no sort): the columns' ranges
        (a visit), and where they hold at most 4n + 64 ids, each entry's id marked (a
        visit), the marks turned into ranks along each group's ids.  Returns the flag set
        when the table was built."""
        flag, table = self.fresh("tabled"), self.fresh("table")
        bounds = tuple((self.fresh("lo"), self.fresh("hi"), self.fresh("width")) for _ in cols)
        self.decls += [t.Declare("int", flag, "0"), t.Declare("int64_t *", table, "NULL")]
        self.owned.append(table)
        for lo, hi, width in bounds:
            self.decls += [t.Declare("int64_t", lo, "INT64_MAX"),
                           t.Declare("int64_t", hi, "INT64_MIN"), t.Declare("int64_t", width, "1")]
        self.tables[rank] = tab = _Table(flag, table, tuple(cols), bounds)
        self.b.add(t.Comment("each rank read from a table over the columns' joint range where "
                             "it holds at most 4n + 64 ids: their ranges first"))
        values = [self.col_at(c, E) for c, _ in cols]
        self.each(*(t.Assign(lo, f"{v} < {lo} ? {v} : {lo}") for v, (lo, _, _) in
                    zip(values, bounds)),
                  *(t.Assign(hi, f"{v} > {hi} ? {v} : {hi}") for v, (_, hi, _) in
                    zip(values, bounds)))
        span, keys = self.fresh("span"), self.fresh("keys")
        self.b.add(t.Declare("int64_t", span, "n > 0", note="0: no table"),
                   t.Declare("int64_t", keys, "1", note="the ids of one group"))
        for k, (lo, hi, width) in enumerate(bounds):
            self.b.add(t.If(f"{span} > 0", [
                t.Assign(width, f"{hi} - {lo} + 1"),
                t.Assign(span, f"{width} > (4 * n + 64) / {span} ? 0 : {span} * {width}"),
                *([t.Assign(keys, width, "*=")] if k >= ngroups else [])]))
        self.b.nest(t.If(f"{span} > 0", []))
        self.b.add(t.Assign(table, f"calloc((size_t){span}, sizeof(int64_t))"))
        self.oom_check(table)
        self.each(t.Assign(f"{table}[{self.table_id(tab)}]", "1"))
        if largest:
            self.b.add(t.Assign(largest, "0"))
        self.b.add(t.For("int64_t spf_g = 0", f"spf_g < {span}", f"spf_g += {keys}", [
            t.Declare("int64_t", "spf_k", "0", note="a group's keys ranked from 0"),
            t.For("int64_t spf_id = spf_g", f"spf_id < spf_g + {keys}", "++spf_id", [
                t.Declare("const int64_t", "spf_mark", f"{table}[spf_id]"),
                t.Assign(f"{table}[spf_id]", "spf_k"),
                t.Assign("spf_k", "spf_mark", "+=")]),
            *([t.If(f"spf_k > {largest}", [t.Assign(largest, "spf_k")])] if largest else [])]),
            t.Assign(flag, "1"))
        self.b.close()
        return flag

    def visit_columns(self, cols: list[tuple[str, bool]]) -> list[tuple[int, bool]] | None:
        """Each column as the coordinate it is (its number, decreasing?) where the writer
        visits a source's loops and every column is a given coordinate; else None."""
        if self.visit is None:
            return None
        given: list[tuple[int, bool]] = []
        for c, down in cols:
            value = None if c in self.owned else self.inline.get(c)
            for _ in range(len(self.inline)):       # a name for a name: followed
                if not isinstance(value, Aff) or value.as_name() is None:
                    break
                value = self.inline.get(str(value.as_name()))
            if not isinstance(value, int):
                return None
            given.append((value, down))
        return given

    def group_prefix(self, groups: list[str], keys: list[tuple[str, bool]]) -> list[str] | None:
        """Where a source's loops visit the entries in the order of a coordinate ``c`` and then
        of the keys (Z3), and the groups are a one-to-one function of ``c`` (of ``c`` itself or
        of an inverse permutation read at it, such as SELL's ``s = floor(perm⁻¹(gi)/4)`` and
        ``r = perm⁻¹(gi) - 4*s``, which give ``perm⁻¹(gi) = 4*s + r``): ``[c]``, which
        separates the groups as they do (each group's entries arrive together, in key order,
        and never again), so ranks are counted in one pass.  Else None."""
        given = self.visit_columns(keys)
        if not groups or given is None or self.visit is None or \
                len(self.visit.ordered) < 1 + len(given) or \
                tuple(given) != self.visit.ordered[1:1 + len(given)]:
            return None
        c = self.outs[self.visit.ordered[0][0]]
        values = [self.kept_as.get(self.env.get(g, g), self.inline.get(g)) for g in groups]
        if not all(isinstance(v, Aff) for v in values):
            return None
        for base in (Aff.var(c), *(Aff.var(UFCall(name, (Aff.var(c),)))
                                   for name in sorted(self.injective))):
            if _recovers(base, [v for v in values if isinstance(v, Aff)]):
                return [c]
        return None

    def costly(self, name: str) -> bool:
        """Whether a per-entry name is computed where read by reading an array or dividing."""
        value = self.inline.get(name)
        return isinstance(value, Aff) and any(not isinstance(a, str) for a, _ in value.terms)

    def reads_running(self, name: str) -> bool:
        """Whether ``name`` is printed from a running rank (:meth:`rank_at`)."""
        if name in self.owned or not self.running:
            return False
        before = self.take_running()
        self.at(name)
        reads = bool(self.take_running())
        self.read_running = before
        return reads

    def rank_pass(self, cols: list[tuple[str, bool]], ngroups: int, ordered: str,
                  rank: str | None, first: str, counts: str | None,
                  top: str | None = None, checked: bool = True,
                  distinct: bool = False) -> list[t.Node]:
        """The in-order pass of :meth:`ranks`: each entry compared with the one before, column
        by column; ``ordered`` cleared at the first entry out of order (``rank`` None: no rank
        stored; ``top``: the largest rank plus one kept; not ``checked``: the entries are
        known to arrive in order; ``distinct``: and no two share a key, so only the group
        columns are compared)."""
        number = rank is not None or top is not None
        keyed = number or first != "NULL" or counts is not None    # spf_new_key read
        # out of order: the pass stops (out of the source's loops too, when they visit)
        stop = t.Call("break") if self.visit is None else t.Goto(self.fresh("out_of_order"))
        # in order, no two entries sharing a key, and the groups fixed per run of the source's
        # innermost loop: they are compared once per run
        fresh = self.fresh("fresh") if distinct and not checked and number and \
            self.hoisted(cols[:ngroups]) else None
        chain: list[t.Node] = []
        for k in reversed(range(0 if fresh else ngroups if distinct else len(cols))):
            c, down = cols[k]
            a, b = f"spf_a{k}", f"spf_b{k}"
            differs: list[t.Node] = [
                *([t.If(f"{a} {'<' if down else '>'} {b}", [t.Assign(ordered, "0"), stop])]
                  if checked else []),
                *([t.Assign("spf_new_key", "1")] if keyed and not distinct else []),
                *([t.Assign("spf_new_group", "1")] if k < ngroups and number else [])]
            if not differs and not chain:       # nothing follows from this column
                continue
            chain = [t.Declare("const int64_t", a, self.col_at(c, f"{E} - 1")),
                     t.Declare("const int64_t", b, self.col_at(c, E)),
                     t.If(f"{a} != {b}", differs, chain or None)]
        numbered: list[t.Node] = [     # each entry's key numbered, from 0 in its group
            t.Assign("spf_key", "spf_new_key", "+="),
            t.If("spf_new_group", [t.Assign("spf_group_start", "spf_key")]),
            *([t.Assign(f"{rank}[{E}]", "spf_key - spf_group_start")] if rank else []),
            *([t.If(f"spf_key - spf_group_start >= {top}",
                    [t.Assign(top, "spf_key - spf_group_start + 1")])] if top else [])
        ] if number else []
        body = [
            *([t.Declare("const int" if distinct else "int", "spf_new_key",
                         "1" if distinct else f"{E} == 0",
                         note="every entry its own key" if distinct else "")] if keyed else []),
            *([t.Declare("int", "spf_new_group", fresh or f"{E} == 0")] if number else []),
            *([t.Assign(fresh, "0")] if fresh else []),
            *([t.If(f"{E} > 0", chain)] if chain else []),
            *numbered,
            *([t.Assign(f"{first}[{E}]", "(uint8_t)spf_new_key")] if first != "NULL" else []),
            *([t.Assign(f"{counts}[{self.col_at(cols[0][0], E)} + 1]", "spf_new_key", "+=")]
              if counts is not None else [])]
        left: list[t.Node] = [t.Label(stop.label), t.Call(
            "(void)0", note="left at the first entry out of order")] \
            if isinstance(stop, t.Goto) and checked else []
        if not body:        # nothing to count here: ranks are counted where read
            return []
        head: list[t.Node] = [t.Assign(fresh, f"{E} == 0 || {self.differ(cols[:ngroups])}")] \
            if fresh else []
        return [
            *([t.Declare("int64_t", "spf_key", "-1"),
               t.Declare("int64_t", "spf_group_start", "0")] if number else []),
            *([t.Declare("int", fresh, "1")] if fresh else []),
            *self.over_entries(body, head=head), *left]

    def col_at(self, col: str, entry: str) -> str:
        """A column of :meth:`ranks` at ``entry``: a vector's element, or a per-entry name's
        value."""
        return f"{col}[{entry}]" if col in self.owned else self.at(col, entry)

    def copy_of(self, col: str) -> str:
        """A column of :meth:`ranks` as an int64 vector (a per-entry name copied into one)."""
        if col in self.owned:
            return col
        var = self.vector(col)
        self.each(t.Assign(f"{var}[{E}]", self.at(col)))
        return var

    def solve(self) -> None:
        """Each solved atom per entry, in one pass (checked where it is a quotient); an atom
        equal to a name already held per entry (``pi = gi``) shares its vector."""
        body: list[t.Node] = []
        for s in self.part.solved:
            if s.divisor == 1:          # computed where it is read
                self.b.add(t.Comment(f"{s.atom} = " + ("the entry's number (the slot of its "
                                                        "value)" if s.value == Aff.var(ENTRY)
                                                        else str(s.value))))
                name = s.value.as_name()    # a name held per entry: read as it is
                if name is not None and name in self.env:
                    self.env[str(s.atom)] = self.env[name]
                elif name is not None and isinstance(self.inline.get(name), int):
                    self.inline[str(s.atom)] = self.inline[name]
                else:
                    self.inline[str(s.atom)] = s.value
                continue
            var = self.vector(str(s.atom))
            value = self.aff(s.value)
            body.append(t.Comment(f"{s.atom} = {s.value}"
                                  + (f" / {s.divisor}" if s.divisor != 1 else "")))
            if s.divisor == 1:
                body.append(t.Assign(f"{var}[{E}]", value))
            else:
                body.append(t.Block([
                    t.Declare("const int64_t", "spf_x", value),
                    self.refuse_if(f"spf_x % {s.divisor} != 0", self.entry_refusal(
                        f"{s.atom} = ({s.value}) / {s.divisor} is not an integer")),
                    t.Assign(f"{var}[{E}]", f"spf_x / {s.divisor}")]))
            self.env[str(s.atom)] = var
        if body:
            self.each(*body)

    def range_hi(self, a: Aff) -> str:
        """The largest value of ``a`` over the shape (logical coordinates in [0, extent),
        inverse permutations over their positions)."""
        return self._range(a)[1]

    def _range(self, a: Aff) -> tuple[str, str]:
        lo, hi = f"INT64_C({a.const})", f"INT64_C({a.const})"
        for atom, k in a.terms:
            if isinstance(atom, FloorDiv):
                nlo, nhi = self._range(atom.num)
                alo, ahi = f"spf_st_fdiv({nlo}, {atom.den})", f"spf_st_fdiv({nhi}, {atom.den})"
            elif isinstance(atom, UFCall):
                alo, ahi = "0", f"({self.arrays[atom.name][1][0]} - 1)"
            else:
                k_dim = self.outs.index(str(atom))
                alo, ahi = "0", f"(spf_shape[{k_dim}] - 1)"
            if k < 0:
                lo, hi = f"{lo} + {k} * {ahi}", f"{hi} + {k} * {alo}"
            else:
                lo, hi = f"{lo} + {k} * {alo}", f"{hi} + {k} * {ahi}"
        return f"({lo})", f"({hi})"

    # ---- allocation -----------------------------------------------------------------------
    def allocate(self, name: str, fill: int = 0, ctype: str = "int64_t",
                 covered: str | None = None) -> str:
        """``name`` sized by its declared extents: the value array, or an index array of
        ``ctype`` (int64 unless it is written in its own type), filled with ``fill`` (zeros
        for values) unless ``covered``, a C condition under which the writes that follow
        set every slot."""
        lay = self.lay
        dims = []
        for k, d in enumerate(lay.fields[name].dims):
            try:
                text = self.ie_text(d)
            except KeyError as exc:
                raise layout_error(lay, f"layout {lay.name}: the extent of {name} cannot be "
                                   f"computed when it is written ({exc.args[0]} is not known "
                                   "yet)", name) from None
            dim = f"{self.fresh(name)}_d{k}"
            self.decls.append(t.Declare("int64_t", dim, "0"))
            self.b.add(t.Assign(dim, text))
            dims.append(dim)
        extents = ", ".join(f"{{x{k}}}" for k in range(min(len(dims), 3)))
        self.b.add(self.refuse_if(" || ".join(f"{d} < 0" for d in dims) or "0",
                                  f"{lay.name}: {name} would have extents ({extents})",
                                  tuple(dims[:3]), entry=False))
        size = " * ".join(dims) or "1"
        item = f"sizeof({'spf_value_t' if name == lay.value_array else ctype})"
        self.b.add(t.If(f"spf_max_bytes > 0 && {size} > spf_max_bytes / (int64_t){item}",
                        self.refuse(f"{lay.name}'s {name} would take {{x0}} bytes, over the "
                                    "limit", (f"{size} * (int64_t){item}",), entry=False,
                                    memory=name)))
        zero = "1" if covered is None else f"!({covered})"
        if name != lay.value_array and abs(fill) > _WIDTH_MAX[_ctype(ctype, lay)]:
            self.b.add(self.refuse_if(f"{size} > 0 && {zero}", self.beyond(name), entry=False))
        if name == lay.value_array:
            var = self.buffer("spf_value_t", name,
                              f"spf_st_values({size}, {zero}, {self.absent()})")
        elif ctype == "int64_t" and covered is None:
            var = self.buffer("int64_t", name, f"spf_st_filled({size}, INT64_C({fill}))")
        else:
            var = self.buffer(ctype, name, f"spf_st_alloc(sizeof({ctype}) * (size_t)({size}))")
            loop = t.For(f"int64_t {E} = 0", f"{E} < {size}", f"++{E}", [
                t.Assign(f"{var}[{E}]", f"({ctype})INT64_C({fill})")])
            self.b.add(loop if covered is None else t.If(zero, [loop], note=(
                "the entries write every slot when they are as many as the slots")))
        self.arrays[name] = (var, dims)
        return var

    def size(self, name: str) -> str:
        return " * ".join(self.arrays[name][1]) or "1"

    # ---- positions --------------------------------------------------------------------------
    def place(self, p: Position) -> None:
        """The position of every entry at layout index ``p`` and the arrays bounding it."""
        self.b.add(t.Comment(f"layout index {p.index}: the position of its keys in its group"))
        # the earlier layout indices group the ranks of a RANK position or a block key;
        # POINTER, RANGE and NESTED positions group by the pointer array they read
        groups = list(p.group) if p.start is Start.RANK or (p.inner and p.inner.free) else []
        given = [(self.value_blocks if p.one_value else self.block_key)(p.inner, groups)] \
            if p.inner and p.inner.free else [str(k) for k in p.keys]
        keys = list(zip(given, p.descending))
        if p.start is Start.RANK:
            if p.inner is not None and p.inner.free is None:   # spread over the run's slots
                spread = self.vector("offset")
                self.each(t.Assign(f"{spread}[{E}]", self.aff(p.inner.offset)))
                self.kept_as[spread] = p.inner.offset
                groups = groups + [spread]
            rank = self.ranks(groups, keys, running=True, top=self.sets_largest(p))[0]
            self.inline[p.index] = lambda: self.rank_at(rank)
            self.rank_bound(p, rank)
            return
        if p.start is Start.NESTED:
            self.place_nested(p, keys)
            return
        self.place_grouped(p, keys)

    def place_grouped(self, p: Position, keys: list[tuple[str, bool]]) -> None:
        """POINTER and RANGE positions: counts per group, prefix sums, the entry's slot."""
        assert p.lower is not None
        lay = self.lay
        starts = self.allocate(p.lower.name)
        dims = self.arrays[p.lower.name][1]
        size = self.fresh("groups")
        if p.start is Start.POINTER:
            width = dims[-1]
            self.b.add(self.refuse_if(
                f"{width} < 1", f"layout {lay.name}: the pointer array {p.lower.name} has no "
                "entries here (its declared extents give 0); it holds one more entry than the "
                "groups it bounds", entry=False, spec=p.lower.name))
            self.b.add(t.Declare("const int64_t", size,
                                 f"{self.size(p.lower.name)} / {width} * ({width} - 1)"))
        else:
            self.b.add(t.Declare("const int64_t", size, self.size(p.lower.name)))
        group = self.fresh("group")         # each entry's group, printed where it is read
        within = self.groups_within(p)
        self.inline[group] = p.lower.args[0] if within and len(p.lower.args) == 1 \
            else lambda: self.group_of(p, dims, within)     # one argument: the group is it
        if not within:
            self.b.add(t.Comment("each entry's group, checked, in one pass"))
            self.each(self.refuse_if(
                f"{self.at(group)} < 0 || {self.at(group)} >= {size}",
                self.entry_refusal(f"{p.lower} is outside {p.lower.name}'s {{x0}} groups"),
                (size,)))
        counts = self.vector("count", f"{size} + 1", "0")
        if p.run is None:
            own = self.entry_per_key(p)
            rank = self.ranks([group], keys, counts=(counts, size), lazy=own, running=not own)[0]
        else:
            at = self.column(group)
            rank = self.run_slots(p, p.run, at, size, counts)
            # each group's run spans its entries' offsets from its pinned start or end
            self.built.update(self.bounds_of(p))
            if p.run.free is None:
                self.placed[p.index] = Aff.var(p.run.anchor) + p.run.offset
        self.each(t.Assign(f"{counts}[{E} + 1]", f"{counts}[{E}]", "+="), count=size)
        if p.start is Start.POINTER:     # a row's last pointer: where the next row starts
            width = dims[-1]
            self.each(t.Assign(f"{starts}[{E}]",
                               f"{counts}[{E} / {width} * ({width} - 1) + {E} % {width}]"),
                      count=self.size(p.lower.name))
        else:
            end = _single_name(p.upper)
            ends = self.allocate(end)
            self.b.add(self.refuse_if(
                f"{self.size(end)} != {size}", f"layout {lay.name}: {p.index} runs from "
                f"{p.lower.name} to {end}, whose extents differ ({{x0}} and {{x1}} entries): a "
                "group's start and end are read at the same arguments", (size, self.size(end)),
                entry=False, spec=end))
            self.each(t.Assign(f"{starts}[{E}]", f"{counts}[{E}]"),
                      t.Assign(f"{ends}[{E}]", f"{counts}[{E} + 1]"), count=size)
        self.b.add(t.Comment(f"{p.index}: its group's start plus its rank there, computed "
                             "where it is read"))
        def start() -> str:     # the entry's group, checked above (or known inside)
            return f"{counts}[{self.group_of(p, dims, True)}]"
        if rank in self.orders:     # in order, one entry per key: the entry's own number
            self.inline[p.index] = lambda: (f"({self.orders[rank]} ? {self.entry} : "
                                            f"{rank}[{self.entry}] + {start()})")
        elif rank in self.running:
            self.inline[p.index] = lambda: f"({self.rank_at(rank)} + {start()})"
        else:
            self.inline[p.index] = lambda: f"({rank}[{self.entry}] + {start()})"
        if p.run is None:           # ranks from 0 in each group, the groups one after another
            self.totals[p.index] = f"{counts}[{size}]"
            self.built.update(self.bounds_of(p))

    def groups_within(self, p: Position) -> bool:
        """Whether the screened constraints keep every entry's group inside the array
        ``p`` starts at (a pointer array: its last argument below its last extent less 1)."""
        assert p.lower is not None
        extents = self.lay.fields[p.lower.name].dims
        last = len(p.lower.args) - 1
        return len(extents) == len(p.lower.args) and all(
            self.within(a, d, 2 if p.start is Start.POINTER and k == last else 1)
            for k, (a, d) in enumerate(zip(p.lower.args, extents)))

    def entry_per_key(self, p: Position) -> bool:
        """Whether the group and keys of ``p`` give every logical coordinate (no two entries
        share them): entries in key order then sit at their own numbers."""
        given = {s.value.as_name() for s in self.part.solved
                 if s.divisor == 1 and (s.atom in p.keys or str(s.atom) in p.group)}
        assert p.lower is not None
        given |= {a.substitute(self.plain()).as_name() for a in p.lower.args}
        return not self.plan.others and set(self.outs) <= given

    def stored_by_rank(self) -> set[UFCall]:
        """The keys of ranked positions stored at the slot their rank gives and by no other
        atom (``colIdx(pj)`` of CSR, read at ``pj``; ``colIdx(pi, pk)`` of ELL, at its group and
        ``pk``): distinct keys of a group get distinct slots, so each slot holds what its
        entry stores there, and a constraint reading it reads the entry's own value."""
        atoms = [s.atom.name for s in self.part.solved if isinstance(s.atom, UFCall)]
        out = set()
        for p in self.part.positions:
            if p.start is Start.RANK and p.inner is None:
                slot = (*(Aff.var(g) for g in p.group), Aff.var(p.index))
            elif p.start in (Start.POINTER, Start.RANGE) and p.run is None and p.inner is None:
                slot = (Aff.var(p.index),)
            else:
                continue
            out |= {k for k in p.keys if k.args == slot and atoms.count(k.name) == 1
                    and all(m.call.name != k.name for m in self.part.markers)}
        if not self.plan.others and self.lay.value_array is not None and \
                len(self.lay.value_ref.subscripts) == 1 and \
                slots_disjoint(self.lay, self.part.conj):   # SELL's colIdx(slicePtr(s) + 4*k + r)
            value = ie.affine(self.lay.value_ref.subscripts[0], reads=True)
            out |= {s.atom for s in self.part.solved if isinstance(s.atom, UFCall)
                    and s.atom.args == (value,) and atoms.count(s.atom.name) == 1
                    and all(m.call.name != s.atom.name for m in self.part.markers)}
        return out

    def own_values(self) -> dict:
        """The layout indices solved as coordinates and the keys :meth:`stored_by_rank`,
        each as its entry's value."""
        return {**self.plain(), **{s.atom: s.value for s in self.part.solved
                                   if s.atom in self.keyed and s.divisor == 1}}

    def group_of(self, p: Position, dims: list[str], within: bool = False) -> str:
        """The group of the entry being printed at a POINTER or RANGE position (-1 outside
        the pointer array; ``within``: known inside, not tested)."""
        assert p.lower is not None
        width = dims[-1]
        if within:
            args = [self.aff(x) for x in p.lower.args]
            flat = args[0]
            for a, d in zip(args[1:], dims[1:]):
                flat = f"({flat}) * {d} + {a}"
            if p.start is Start.POINTER and len(args) > 1:
                return f"({flat}) / {width} * ({width} - 1) + {args[-1]} % {width}"
            return flat
        if p.start is not Start.POINTER:
            return self.offset(p.lower.name, [self.aff(x) for x in p.lower.args])
        first = self.offset(p.lower.name, [self.aff(x) for x in p.lower.args[:-1]] + ["0"])
        last = self.aff(p.lower.args[-1])
        return (f"({first} >= 0 && {last} >= 0 && {last} < {width} - 1 ? {first} / {width} * "
                f"({width} - 1) + {last} : -1)")

    def bounds_of(self, p: Position) -> set[Constraint]:
        """The constraints bounding a grouped position, which its counts establish: each
        entry's rank within its group's count, after its group's start."""
        assert p.lower is not None
        index = Aff.var(p.index)
        return {Constraint.make(index - Aff.var(p.lower), False),
                Constraint.make(p.upper - index - 1, False)}

    def block_key(self, run: Run, groups: list[str]) -> str:
        """Per entry, which maximal run of consecutive offsets it lies in within its group:
        its offset less its rank."""
        offset = self.vector("offset")
        self.each(t.Assign(f"{offset}[{E}]", self.aff(run.offset)))
        rank = self.ranks(groups, [(offset, False)])[0]
        self.each(t.Assign(f"{rank}[{E}]", f"{offset}[{E}] - {rank}[{E}]"))
        return rank

    def value_blocks(self, run: Run, groups: list[str]) -> str:
        """Per entry, which maximal run of consecutive offsets holding one value it lies in
        within its group (numbered from 0 in offset order): the entries in (group, offset)
        order, a run ending where the group changes, an offset is skipped or the value
        changes."""
        offset = self.vector("offset")
        self.each(t.Assign(f"{offset}[{E}]", self.aff(run.offset)))
        cols = [(self.column(g) if g not in self.owned else g, False) for g in groups]
        order = self.vector("order")
        self.sort_into(order, "n", [*cols, (offset, False)])
        block = self.vector("block")
        value = self.value_of
        same_group = " && ".join(f"{c}[spf_e] == {c}[spf_f]" for c, _ in cols) or "1"
        self.b.add(t.Comment("runs of consecutive offsets holding one value, in offset order"),
                   t.Block([t.Declare("int64_t", "spf_run", "0"), t.For(
                       "int64_t spf_s = 0", "spf_s < n", "++spf_s", [
                           t.Declare("const int64_t", "spf_e", f"{order}[spf_s]"),
                           t.If("spf_s > 0", [
                               t.Declare("const int64_t", "spf_f", f"{order}[spf_s - 1]"),
                               t.If(f"!({same_group})", [t.Assign("spf_run", "0")], [
                                   t.If(f"{offset}[spf_e] != {offset}[spf_f] + 1 || "
                                        f"!{self.same(value('spf_e'), value('spf_f'))}",
                                        [t.Assign("spf_run", "1", "+=")])])]),
                           t.Assign(f"{block}[spf_e]", "spf_run")])]))
        return block

    def run_slots(self, p: Position, run: Run, at: str, size: str, counts: str) -> str:
        """A run position: each group's slot count (into ``counts[g + 1]``) and each entry's
        slot in its group; the array the run leaves free set per group."""
        off = self.vector("offset")
        lo = self.vector("lo", size, "INT64_MAX")
        hi = self.vector("hi", size, "INT64_MIN")
        held = self.vector("held", size, "0")
        self.each(t.Assign(f"{off}[{E}]", self.aff(run.offset)),
                  t.Declare("const int64_t", "spf_a", f"{at}[{E}]"),
                  t.If(f"{off}[{E}] < {lo}[spf_a]", [t.Assign(f"{lo}[spf_a]", f"{off}[{E}]")]),
                  t.If(f"{off}[{E}] > {hi}[spf_a]", [t.Assign(f"{hi}[spf_a]", f"{off}[{E}]")]),
                  t.Assign(f"{held}[spf_a]", "1", "+="))
        if run.free is None:        # the relation pins the run's end (offset -1) or start (0)
            bound = f"{p.index} < {run.anchor}" if run.at_end else f"{run.anchor} <= {p.index}"
            self.each(self.refuse_if(f"{off}[{E}] > -1" if run.at_end else f"{off}[{E}] < 0",
                                     self.entry_refusal(
                                         f"its relation puts it at {p.index} = {run.anchor} + "
                                         f"({run.offset}) = {run.anchor} + {{x0}}, but requires "
                                         f"{bound}"), (f"{off}[{E}]",)))
            pinned = hi if run.at_end else lo
            self.each(t.If(f"{held}[{E}]", [t.Assign(f"{pinned}[{E}]",
                                                     "-1" if run.at_end else "0")]), count=size)
        else:                       # the free array moves each group's run onto its entries
            if run.free.name not in self.arrays:
                self.allocate(run.free.name)
            free = self.arrays[run.free.name][0]
            chosen = f"(-1 - {hi}[spf_a])" if run.at_end else f"(-{lo}[spf_a])"
            where = self.offset(run.free.name, [self.aff(x) for x in run.free.args])
            self.each(t.Declare("const int64_t", "spf_a", f"{at}[{E}]"),
                      t.Declare("const int64_t", "spf_w", where),
                      self.refuse_if("spf_w < 0", self.entry_refusal(
                          f"it would be written outside {run.free.name}")),
                      t.Assign(f"{free}[spf_w]", f"{chosen} * {run.sign}"))
        self.each(t.Assign(f"{counts}[{E} + 1]", f"{held}[{E}] ? {hi}[{E}] - {lo}[{E}] + 1 : 0"),
                  count=size)
        if p.tight:                 # what is read at it has no value marking an unused slot
            self.each(self.refuse_if(
                f"{counts}[{at}[{E}] + 1] > {held}[{at}[{E}]]", self.entry_refusal(
                    f"its group's run at {p.index} would have a slot without an entry, and "
                    "nothing in the relation marks an unused slot of what is read there")))
        rank = self.vector("slot")
        self.each(t.Assign(f"{rank}[{E}]", f"{off}[{E}] - {lo}[{at}[{E}]]"))
        return rank

    def place_nested(self, p: Position, keys: list[tuple[str, bool]]) -> None:
        """``O(a) + P(a, b) <= p < O(a) + P(a, b + 1)``: ``P(a, :)`` the prefix sums of the
        groups' sizes within ``a`` (a group's size: its largest rank plus one), ``O`` the
        prefix sums of the outer groups' sizes; the ranks are running counts (no rank vector
        where the entries arrive in order) and each entry's position one vector."""
        assert p.lower is not None and p.outer is not None
        lower = p.lower
        inner = self.allocate(lower.name)
        rows, width = self.arrays[lower.name][1]

        def args() -> list[str]:
            return [self.aff(x) for x in lower.args]
        self.each(self.refuse_if(
            f"{self.offset(lower.name, args())} < 0 || "
            + self.offset(lower.name, [args()[0], f"{args()[1]} + 1"]) + " < 0",
            self.entry_refusal(f"{lower} is outside {lower.name}'s {{x0}} x {{x1}} pointers"),
            (rows, width)))
        groups = []
        for x in lower.args:        # the group's arguments, each computed where read
            groups.append(self.fresh("arg"))
            self.inline[groups[-1]] = x
        rank = self.ranks(groups, keys, running=True)[0]
        size = f"{self.rank_at(rank)} + 1"
        self.each(t.Declare("const int64_t", "spf_w", self.offset(lower.name, args())),
                  t.If(f"spf_w >= 0 && {size} > {inner}[spf_w]",       # >= 0: checked above
                       [t.Assign(f"{inner}[spf_w]", size)]))
        outer = self.allocate(p.outer.name)
        outer_n = self.size(p.outer.name)
        self.b.add(self.refuse_if(
            f"{outer_n} != {rows} && {outer_n} != {rows} + 1",
            f"{self.lay.name}: {p.outer.name} has {{x0}} entries, {lower.name} {{x1}} rows; "
            "pointers over two levels need {x1} or {x1} + 1", (outer_n, rows), entry=False))
        begin = self.vector("begin", f"{rows} + 1", "0")
        self.b.add(t.Comment("each row's prefix sums within it, and the rows'"))
        self.b.add(t.For("int64_t r = 0", f"r < {rows}", "++r", [
            t.Declare("int64_t", "spf_s", "0"),
            t.For("int64_t c = 0", f"c < {width}", "++c", [
                t.Declare("const int64_t", "spf_c", f"{inner}[r * {width} + c]"),
                t.Assign(f"{inner}[r * {width} + c]", "spf_s"),
                t.If(f"c < {width} - 1", [t.Assign("spf_s", "spf_c", "+=")])]),
            t.Assign(f"{begin}[r + 1]", f"{begin}[r] + {inner}[r * {width} + {width} - 1]")]))
        self.each(t.Assign(f"{outer}[{E}]", f"{begin}[{E}]"), count=outer_n)
        self.b.add(t.Comment(f"{p.index}: its row's and its group's start plus its rank there "
                             "(a vector: a refusal may read another entry's)"))
        position = self.vector(p.index)
        self.each(t.Assign(f"{position}[{E}]",
                           f"spf_st_read({begin}, spf_st_off1({args()[0]}, {rows} + 1)) + "
                           f"spf_st_read({inner}, {self.offset(lower.name, args())}) + "
                           f"{self.rank_at(rank)}"))
        self.env[p.index] = position

    def sets_largest(self, p: Position) -> bool:
        """Whether :meth:`rank_bound` sets a scalar field to the largest rank plus one."""
        name = p.upper.as_name()
        return bool(p.also) or (name is not None and name not in self.known)

    def rank_bound(self, p: Position, rank: str) -> None:
        """The upper bound of a RANK position: checked (a constant, a given scalar), or set
        to the largest group (a scalar field) or to each group's size (an array)."""
        self.built.update({Constraint.make(Aff.var(p.index), False),      # from 0, below it
                           Constraint.make(p.upper - Aff.var(p.index) - 1, False)},
                          {Constraint.make(Aff.var(f) - Aff.var(p.index) - 1, False)
                           for f in p.also})         # and below the largest group
        largest = self.running[rank].top       # kept where sets_largest(p)
        for field in p.also:
            self.set_scalar(field, largest)
        name = p.upper.as_name()
        call = next((a for a, _ in p.upper.terms if isinstance(a, UFCall)), None) \
            if len(p.upper.terms) == 1 and not p.upper.const else None
        if call is not None and name is None:
            bound = self.allocate(call.name)
            where, tested = self.offset_tested(call.name, [self.aff(x) for x in call.args],
                                               call.args)
            self.each(t.Declare("const int64_t", "spf_w", where),
                      *([self.refuse_if("spf_w < 0", self.entry_refusal(
                          f"it would be written outside {call.name}"))] if tested else []),
                      t.If(f"{self.rank_at(rank)} + 1 > {bound}[spf_w]",
                           [t.Assign(f"{bound}[spf_w]", f"{self.rank_at(rank)} + 1")]))
            return
        if name is not None and name not in self.known:
            self.set_scalar(name, largest)
            return
        limit = self.aff(p.upper)
        self.each(self.refuse_if(f"{self.rank_at(rank)} >= {limit}", self.entry_refusal(
            f"its group has more than {p.upper} = {{x0}} entries (layout index {p.index})"),
            (limit,)))

    def derive(self) -> None:
        """Derived fields whose source is written (or sources whose field is), once."""
        lay = self.lay
        for d in lay.derived.values():
            if d.source in self.arrays and d.field not in self.arrays:
                src = self.arrays[d.source][0]
                field = self.allocate(d.field)
                n_src = self.size(d.source)
                self.b.add(self.refuse_if(
                    f"{self.size(d.field)} != {n_src} + 1",
                    f"layout {lay.name}: {d.field} = {d.text()} has {{x0}} entries here, but "
                    "its declared extents give it {x1}", (f"{n_src} + 1", self.size(d.field)),
                    entry=False, spec=d.field))
                self.b.add(t.Assign(f"{field}[0]", "0"))
                self.each(t.Assign(f"{field}[{E} + 1]", f"{field}[{E}] + {d.scale} * "
                                   f"{src}[{E}]"), count=n_src)
            elif d.field in self.arrays and d.source not in self.arrays:
                field = self.arrays[d.field][0]
                n_field = self.size(d.field)
                src = self.allocate(d.source)
                self.b.add(self.refuse_if(
                    f"{self.size(d.source)} + 1 != {n_field}",
                    f"layout {lay.name}: {d.source}, from which {d.field} = {d.text()}, has "
                    "{x0} entries here, but its declared extents give it {x1}",
                    (f"{n_field} - 1", self.size(d.source)), entry=False, spec=d.source))
                self.b.add(self.refuse_if(f"{n_field} < 1 || {field}[0] != 0",
                                          f"layout {lay.name}: the pointers written into "
                                          f"{d.field} are not {d.text()} of any {d.source}",
                                          entry=False, spec=d.field))
                self.each(self.refuse_if(f"({field}[{E} + 1] - {field}[{E}]) % {d.scale}",
                                         f"layout {lay.name}: the pointers written into "
                                         f"{d.field} are not {d.text()} of any {d.source}",
                                         entry=False, spec=d.field),
                          t.Assign(f"{src}[{E}]", f"({field}[{E} + 1] - {field}[{E}]) / "
                                   f"{d.scale}"), count=self.size(d.source))

    def sized(self) -> None:
        """Scalar fields that only size arrays: the largest subscript written there, plus
        one; every such maximum in one pass over the entries."""
        lay = self.lay
        body: list[t.Node] = []
        maxima: list[tuple[str, str]] = []
        for field in self.plan.sized:
            value = self.fresh(field)
            self.b.add(t.Declare("int64_t", value, "0"))
            seen: set[str] = set()
            for name, spec in lay.fields.items():
                for k, d in enumerate(spec.dims):
                    if not (isinstance(d, ie.Name) and d.name == field):
                        continue
                    if name == lay.value_array:
                        sub = lay.value_ref.subscripts[k]
                        key = ie.text(sub)      # an array the plan solves: its value
                        at = self.at(key) if key in self.inline or key in self.env \
                            else self.ie_text(sub, per_entry=True)
                    else:
                        call = next((s.atom for s in self.part.solved
                                     if isinstance(s.atom, UFCall) and s.atom.name == name), None)
                        if call is None:
                            continue
                        key, at = str(call.args[k]), self.aff(call.args[k])
                    if key in seen:         # one subscript read by two arrays: once
                        continue
                    seen.add(key)
                    if key in self.totals:      # a grouped position: its total, no pass
                        self.b.add(t.If(f"{self.totals[key]} > {value}",
                                        [t.Assign(value, self.totals[key])]))
                    else:
                        body.append(t.If(f"{at} + 1 > {value}", [t.Assign(value, f"{at} + 1")]))
            maxima.append((field, value))
        if body:
            self.each(*body)
        for field, value in maxima:
            self.set_scalar(field, value)

    def check_padding(self) -> str:
        """The value array's size, known before it is allocated: at most 4 slots per entry
        unless padding is allowed, and at most what the index type addresses."""
        lay = self.lay
        if lay.value_array is None:         # a pattern layout: no value slots
            return "n"
        ref = lay.value_ref
        dims = []
        for d in lay.fields[ref.array].dims:
            try:
                dims.append(f"({self.ie_text(d)})")
            except KeyError as exc:
                raise layout_error(lay, f"layout {lay.name}: the extent of {ref.array} "
                                   f"cannot be computed when it is written ({exc.args[0]} is "
                                   "not known yet)", ref.array) from None
        slots = self.fresh("slots")
        self.b.add(t.Declare("const int64_t", slots, " * ".join(dims) or "1"))
        top = _WIDTH_MAX["int64_t" if lay.index_type == "int64" else "int32_t"]
        self.b.add(self.refuse_if(
            f"{slots} > INT64_C({top})", f"{lay.name} would need {{x0}} slots, more than "
            f"index_type={lay.index_type!r} can address{wider_hint(lay.index_type)}", (slots,),
            entry=False))
        self.b.add(self.refuse_if(
            f"!spf_allow_padding && {slots} > 4 * (n > 1 ? n : 1) && {slots} > n",
            f"{lay.name} would store {{x0}} entries in {{x1}} slots ({{x2}}% padding, over "
            "75%); pass allow_padding=True to convert anyway",
            ("n", slots, f"(int64_t)(100.0 * (1.0 - (double)n / (double){slots}) + 0.5)"),
            entry=False))
        return slots

    def store_fields(self) -> list[_Store]:
        """The index arrays the plan solves and markers allocated, then every other array
        (zeros); the stores of each entry into them (for the one pass over the entries that
        writes every array).  The arrays allocated here are written only by these stores: in
        their own C type (each value checked against it), not int64 narrowed later."""
        fills = dict(self.part.fills)
        for s in self.part.solved:
            if isinstance(s.atom, UFCall) and s.atom.name not in self.arrays:
                self.allocate(s.atom.name, fills.get(s.atom.name, 0), self.own_type(s.atom.name),
                              self.covered(s.atom))
        solved = [s for s in self.part.solved if isinstance(s.atom, UFCall) and not self.rebuilt(s)]
        stores = [self.kept(partial(self.solved_store, s)) for s in solved]
        for q in self.part.permuted:       # built whole, and no entry writes into it
            if all(s.atom.name != q.array for s in solved if isinstance(s.atom, UFCall)):
                self.proven += [p for p in self.lay.properties
                                if isinstance(p, Permutation) and p.uf == q.array]
        stores += [self.kept(partial(self.marker, m)) for m in self.part.markers]
        for name, spec in self.lay.fields.items():
            if spec.is_array and name not in self.arrays and name != self.lay.value_array:
                self.allocate(name)
        return stores

    def rebuilt(self, s: Solved) -> bool:
        """Whether an entry's store of ``s`` would write what its array holds already: a
        permutation, built whole (:meth:`permute`), at the position its inverse gives the
        entry (``perm(perm⁻¹(gi)) = gi``, :meth:`established`)."""
        if not isinstance(s.atom, UFCall) or s.divisor != 1 or \
                s.atom.name not in {q.array for q in self.part.permuted}:
            return False
        return self.established(Constraint.make(
            (Aff.var(s.atom) - s.value).substitute(self.plain()), True))

    def solved_store(self, s: Solved) -> _Store:
        """The store of an index array the relation solves per entry."""
        assert isinstance(s.atom, UFCall)
        # a coordinate of a visited source, which holds it in the layouts' index type
        given = self.visit_columns([(str(s.atom), False)]) is not None
        return self.store(s.atom, self.at(str(s.atom)), self.reads(s.value),
                          _WIDTH_MAX[f"{self.lay.index_type}_t"] if given else None)

    def kept(self, build: Callable[[], _Store]) -> _Store:
        """The store ``build`` makes, with the running ranks it reads."""
        self.take_running()
        store = build()
        return replace(store, running=frozenset(self.take_running()), build=build)

    def write_passes(self, stores: list[_Store]) -> None:
        """The stores in as few passes over the entries as they allow: one, unless a store
        reads an array that an earlier store of the pass writes (another entry's write could
        come later)."""
        passes: list[list[_Store]] = []
        for s in stores:
            if not passes or any(s.reads & {w.array} for w in passes[-1]):
                passes.append([])
            passes[-1].append(s)
        for group in passes:
            self.b.add(t.Comment("stored per entry: " + ", ".join(s.array for s in group)))
            running = set().union(*(s.running for s in group))
            choices = [r for r in running if not self.running[r].fixed]
            if len(choices) == 1 and all(s.build is not None for s in group):
                self.b.add(self.by_mode(choices[0], group))
            else:
                self.each(*(s.node for s in group), running=running)

    def by_mode(self, rank: str, group: list[_Store]) -> t.Node:
        """The pass of ``group``'s stores once per way its rank can be read (in order, from
        the table, from the vector), the one the first passes found chosen at run time."""
        def printed(mode: _Mode) -> list[t.Node]:
            outer, self.b = self.b, t.Builder()
            self.forced[rank] = mode
            try:
                self.take_running()
                stores = [s.build() for s in group if s.build is not None]
                self.b.add(t.Comment(f"the ranks read as {mode.value}"))
                self.each(*(s.node for s in stores), running=self.take_running())
                return self.b.root
            finally:
                self.b = outer
                del self.forced[rank]
        r, table = self.running[rank], self.tables.get(rank)
        fallback = printed(_Mode.VECTOR)
        if table is not None:
            fallback = [t.If(table.flag, printed(_Mode.TABLE), fallback)]
        return t.If(r.ordered, printed(_Mode.RUNNING), fallback)

    def own_type(self, name: str) -> str:
        """``name``'s C type, in which it is written from now on (reads widen it)."""
        self.narrow[name] = field_ctype(self.lay.fields[name], self.lay)
        return self.narrow[name]

    def covered(self, call: UFCall) -> str | None:
        """When a store at ``call`` sets every slot of its array: where it is stored at the
        value's own subscripts, in an array of the value array's extents, and the entries are
        as many as the slots (each entry's value slot is its own: checked, or by
        construction); else None."""
        lay = self.lay
        if lay.value_array is None:
            return None
        same_slots = [str(a) for a in call.args] == [ie.text(x) for x in lay.value_ref.subscripts]
        same_dims = list(map(ie.text, lay.fields[call.name].dims)) == \
            list(map(ie.text, lay.fields[lay.value_array].dims))
        return f"{' * '.join(f'({self.ie_text(d)})' for d in lay.fields[call.name].dims)} == n" \
            if same_slots and same_dims and lay.fields[call.name].dims else None

    def reads(self, a: Aff) -> set[str]:
        """The arrays ``a`` reads at an entry (through the per-entry names it reads too)."""
        out = {c.name for c in a.calls()}
        for name in a.names():
            value = self.inline.get(name)
            if isinstance(value, Aff):
                out |= self.reads(value)
        return out

    def store(self, call: UFCall, value: str, reads: Iterable[str] = (),
              bound: int | None = None) -> _Store:
        """The store of entry ``e``'s ``value`` (which reads ``reads``; ``bound``: known to
        lie within +-bound) at ``call``, checked where the array's type is narrower."""
        var = self.arrays[call.name][0]
        where, tested = self.offset_tested(call.name, [self.aff(x) for x in call.args],
                                           call.args)
        body: list[t.Node] = [t.Comment(f"{call}"), t.Declare("const int64_t", "spf_w", where)]
        if tested:
            body.append(self.refuse_if("spf_w < 0", self.entry_refusal(
                f"it would be written outside {call.name}")))
        ctype = self.narrow.get(call.name, "int64_t")
        top = _WIDTH_MAX[_ctype(ctype, self.lay)]
        if top < (_WIDTH_MAX["int64_t"] if bound is None else bound):
            body += [t.Declare("const int64_t", "spf_x", value),
                     self.refuse_if(f"spf_x > INT64_C({top}) || spf_x < -INT64_C({top})",
                                    self.beyond(call.name), entry=False)]
            value = "spf_x"
        return _Store(t.Block([*body, t.Assign(f"{var}[spf_w]", f"({ctype}){value}")]),
                      call.name, frozenset(set(reads).union(*(self.reads(x) for x in call.args))))

    def beyond(self, name: str) -> str:
        """The refusal of a value of ``name`` beyond its declared type."""
        dtype = self.lay.dtype_of(name)
        return f"{self.lay.name}: {name} holds values beyond {dtype}" + wider_hint(dtype)

    def marker(self, m: Marker) -> _Store:
        self.allocate(m.call.name, m.unused, self.own_type(m.call.name), self.covered(m.call))
        return self.store(m.call, f"INT64_C({m.mark})")

    def store_values(self, slots: str) -> list[_Store]:
        """The value array allocated; the store of each entry's value at its slot (two
        entries sharing a slot are refused; where the value subscripts determine every layout
        index, distinct entries have distinct slots)."""
        lay = self.lay
        if lay.value_array is None:         # a pattern layout stores no values
            if self.visit is None:
                self.b.add(t.Call("(void)spf_v", note="a pattern layout: every entry holds "
                                  f"{lay.implicit}"))
            return []
        data = self.allocate(lay.value_ref.array, covered=f"{slots} == n")
        owner = None if self.plan.reads_back_by_construction else \
            self.vector("owner", slots, "-1")
        return [self.kept(partial(self.value_store, data, owner))]

    def value_store(self, data: str, owner: str | None) -> _Store:
        """The store of each entry's value into ``data`` (:meth:`store_values`); ``owner``:
        the vector of the entry holding each slot, where two entries could share one."""
        lay = self.lay
        ref = lay.value_ref
        subs = [self.ie_text(s, per_entry=True) for s in ref.subscripts]
        where, tested = self.offset_tested(ref.array, subs, [ie.affine(s) for s in ref.subscripts])
        values = self.value_of(E)
        body: list[t.Node] = [
            t.Comment(f"the value at {ref.array}[{', '.join(map(ie.text, ref.subscripts))}]"),
            t.Declare("const int64_t", "spf_w", where),
            *([self.refuse_if("spf_w < 0", self.entry_refusal(
                f"its value would be written outside {ref.array}"))] if tested else [])]
        if owner is not None:
            # a run of one value: its entries share its value slot, holding that value
            shared = f" && !{self.same(self.value_of(f'{owner}[spf_w]'), values)}" \
                if any(p.one_value for p in self.part.positions) else ""
            body += [self.refuse_if(f"{owner}[spf_w] >= 0{shared}",
                                    f"{lay.name} cannot hold both entries {{other}} and {{at}}: "
                                    f"they would share the value slot "
                                    f"{ref.array}[{{x0}}]", ("spf_w",),
                                    other=f"{owner}[spf_w]"),
                     t.Assign(f"{owner}[spf_w]", E)]
        reads = {c.name for x in ref.subscripts for c in ie.calls(x)}
        for x in ref.subscripts:
            reads |= {r for name in ie.names(x) if isinstance(self.inline.get(name), Aff)
                      for r in self.reads(Aff.var(name))}
        return _Store(t.Block([*body, t.Assign(f"{data}[spf_w]", values)]), ref.array,
                      frozenset(reads))

    def collision(self) -> list[t.Node]:
        """Where values were stored without a check of their slots (the subscripts determine
        every layout index): the other entry whose value shares entry ``e``'s slot, if one
        does, which explains a failed constraint better."""
        if not self.plan.reads_back_by_construction:
            return []
        lay = self.lay
        ref = lay.value_ref

        def slot() -> str:
            return self.offset(ref.array, [self.ie_text(s, per_entry=True) for s in ref.subscripts])
        where = slot()
        self.entry = "spf_f"                # the same slot, at another entry
        try:
            other = slot()
        except _ElsewhereError:      # a rank counted as the entries arrive: no other entry's
            return []
        finally:
            self.entry = E
        text = (f"{lay.name} cannot hold both entries {{other}} and {{at}}: they would share "
                f"the value slot {ref.array}[{{x0}}]")
        return [t.Declare("const int64_t", "spf_w0", where),
                t.For("int64_t spf_f = 0", "spf_f < n", "++spf_f", [
                    t.If(f"spf_f != {E} && {other} == spf_w0",
                         self.refuse(text, ("spf_w0",), other="spf_f"))])]

    def checks(self) -> None:
        """Every constraint of the part holds at every entry, in one pass, over the fields
        as written (a scalar field the relation solves per entry, ``len = i``, holds one
        value); a constraint the solved layout indices make trivially true (``pi = gi``
        solved as ``pi``), or that the passes establish (a grouped position's bounds: its
        counts and prefix sums; what a permutation and its inverse give,
        :meth:`established`), is not tested."""
        plain = self.own_values()
        body: list[t.Node] = []
        for c in self.part.conj:
            reduced = c.aff.substitute(plain)
            if {Constraint.make(c.aff, c.is_eq), Constraint.make(reduced, c.is_eq)} & \
                    self.built or c in self.screened:
                continue
            if not reduced.terms and (reduced.const == 0 if c.is_eq else reduced.const >= 0):
                continue
            if self.established(Constraint.make(reduced, c.is_eq)):
                continue
            value = self.aff(c.aff)
            body.append(t.If(f"{value} != 0" if c.is_eq else f"{value} < 0", [
                *self.collision(),
                *self.refuse(f"entry {{at}} cannot be stored in {self.lay.name}: its relation "
                             f"requires {format_constraint(c)}")]))
        if body:
            self.b.add(t.Comment("every constraint of the relation, at every entry"))
            self.each(*body)

    # ---- a union's other parts, checked -------------------------------------------------
    def union_check(self, slots: str) -> None:
        """A union's other parts give exactly the entries its first part leaves (what the
        tensor read back through its whole relation must show): each entry left, unless it
        holds the fill, is found in an other part (:meth:`locate`) with its value, and counted
        at its value slot; then every point of the other parts holding another value must be
        one of those counted (else it is named: read through two parts where the first part
        holds it too, or no entry of the source); and where the first part could read a slot
        its entries did not write, its points holding other values than the fill are as many
        as the entries it holds (the fill: ``spf_fill``, what the tensor holds where no entry
        is)."""
        plan, lay = self.plan, self.lay
        if not plan.others:
            return
        valued = lay.value_array is not None
        self.b.add(t.Comment(f"the other parts of {lay.name}'s relation give exactly the "
                             "entries its first part leaves"))
        counts = [self.vector(f"part{k + 2}_given", slots if valued else "1", "0")
                  for k in range(len(plan.others))]
        if self.dropped is not None:
            self.find_dropped(counts)
        if not _first_by_construction(plan):
            self.count_first()
        for k, conj in enumerate(plan.others):
            self.b.add(t.Comment(f"every point of part {k + 2} holding a value is an entry "
                                 "found there above (each slot as often as found)"),
                       *self.over_points(conj, partial(self.extra, k, counts[k])))
        if not valued:              # a pattern layout: the points of each part as counted
            self.b.add(*[self.refuse_if(f"{c}[0] != 0", f"{lay.name} cannot hold these "
                                        f"entries: part {k + 2} of its relation reads "
                                        "entries the source does not have", entry=False)
                         for k, c in enumerate(counts)])

    def value_at(self, where: str) -> str:
        """The value read at value slot ``where`` (the layout's constant in a pattern)."""
        lay = self.lay
        if lay.value_array is None:
            return f"(spf_value_t){lay.implicit}"
        return f"{self.arrays[lay.value_array][0]}[{where}]"

    def slot_here(self) -> str:
        """The value slot of the point whose names are bound (-1 outside; 0: a pattern)."""
        if self.lay.value_array is None:
            return "0"
        ref = self.lay.value_ref
        return self.offset(ref.array, [self.ie_text(s, per_entry=True) for s in ref.subscripts])

    def value_of(self, entry: str) -> str:
        """C: the value of ``entry`` (a union's first part: of its kept entries)."""
        return f"spf_v[{self.keep}[{entry}]]" if self.keep else self.given_at(-1, entry)

    def absent(self) -> str:
        """C: what the tensor holds where no entry is (``spf_fill``), declared where read."""
        if not self.fill_read:
            self.fill_read = True
            self.decls.append(t.Declare("const spf_value_t", "spf_absent", "*spf_fill",
                                        note="what the tensor holds where no entry is"))
        return "spf_absent"

    def same(self, a: str, b: str) -> str:
        """C: values ``a`` and ``b`` equal (NaN equal to NaN, as the read-back compares)."""
        if self.lay.value_type.kind.value in "fc":
            return f"({a} == {b} || ({a} != {a} && {b} != {b}))"
        return f"({a} == {b})"

    def find_dropped(self, counts: list[str]) -> None:
        """Each entry the first part leaves, unless it holds the fill, found in an other part with
        its value (its slot counted there); else refused, naming it."""
        lay, order = self.lay, self.lay.order
        d = "spf_d"
        g, v = self.given
        coords = [f"(int64_t){g}{k}[{d}]" for k in range(order)]
        for g, c in zip(self.outs, coords):
            self.local[g] = c
        body: list[t.Node] = [t.Declare("const int64_t", d, f"{self.dropped}[spf_l]"),
                              t.Declare("spf_value_t", "spf_given", f"{v}[{d}]"),
                              t.If(self.same("spf_given", self.absent()), [t.Call("continue")],
                                   note="the fill reads as no entry either way"),
                              t.Declare("int", "spf_found", "0")]
        for k, conj in enumerate(self.plan.others):
            def hit(k: int = k) -> list[t.Node]:
                return [t.Declare("const int64_t", "spf_w", self.slot_here()),
                        t.If("spf_w >= 0", [
                        t.Declare("spf_value_t", "spf_read", self.value_at("spf_w")),
                        self.refuse_if(f"!{self.same('spf_given', 'spf_read')}",
                                       f"{lay.name} cannot hold these entries: {{at}}: value "
                                       f"{{given}}, read back {{read}} through part {k + 2} "
                                       "of its relation (entries read through two parts of "
                                       "the relation differ)", at=coords,
                                       values=("spf_given", "spf_read")),
                        t.Assign(f"{counts[k]}[{'spf_w' if lay.value_array else '0'}]", "1",
                                 "+="),
                        t.Assign("spf_found", "1")])]
            body.append(t.If("!spf_found", self.locate(conj, self.plan.found[k], hit)))
        body.append(self.refuse_if("!spf_found", f"{lay.name} cannot hold these entries: "
                                   "{at} of the source (value {given}) is not read back: part "
                                   "1 of its relation does not hold it and no other part reads "
                                   "it", at=coords, values=("spf_given", "spf_given")))
        self.b.add(t.Comment("each entry the first part leaves, found in another part"),
                   t.For("int64_t spf_l = 0", "spf_l < spf_dropped", "++spf_l", body))
        for g in self.outs:
            del self.local[g]

    def locate(self, conj: tuple[Constraint, ...], part: PartWrite | None,
               hit: Callable[[], list[t.Node]]) -> list[t.Node]:
        """Statements finding the point of ``conj`` that gives the logical coordinates bound
        in :attr:`local` and running ``hit()`` there: where ``part`` solves it, its layout
        indices from the coordinates and each position searched in its group (binary where
        an ordering property sorts its first key there, else in turn); otherwise (runs of one
        value among them: their ends are the written runs', not the entry's) every point of
        the part tried (a scan per entry)."""
        if part is None or part.permuted or part.markers or part.covers or any(
                s.divisor != 1 for s in part.solved) or any(
                p.run or p.inner or p.start is Start.NESTED for p in part.positions):
            targets = {g: self.local[g] for g in self.outs}
            label = self.fresh("found")
            return [t.Block([*self.over_points(conj, lambda: [t.If(" && ".join(
                f"{self.local[g]} == {targets[g]}" for g in self.outs) or "1",
                [*hit(), t.Goto(label)])]), t.Label(label), t.Call("(void)0")])]
        saved = dict(self.local)
        out: list[t.Node] = []
        for s in part.solved:
            if isinstance(s.atom, str):
                var = self.fresh(s.atom)
                out.append(t.Declare("const int64_t", var, self.aff(s.value)))
                self.local[s.atom] = var
        for p in part.positions:
            out += self.search(part, p)
        checks = " && ".join(f"{self.aff(c.aff)} {'==' if c.is_eq else '>='} 0" for c in conj)
        out.append(t.If(checks or "1", hit()))
        self.local = saved
        return [t.Block(out)]

    def search(self, part: PartWrite, p: Position) -> list[t.Node]:
        """``p``'s place in its group whose keys are the entry's (its group's end where none
        is): a lower bound by binary search where an ordering property sorts its first key
        within the group, else the first match in turn."""
        lo, hi, var = self.fresh(f"{p.index}_lo"), self.fresh(f"{p.index}_hi"), self.fresh(p.index)
        first = self.aff(Aff.var(p.lower)) if p.lower is not None else "INT64_C(0)"
        out: list[t.Node] = [t.Declare("int64_t", lo, first),
                             t.Declare("int64_t", hi, self.aff(p.upper))]
        targets = []
        for key in p.keys:
            solved = part.solution(key)
            assert solved is not None       # a position's keys are solved reads
            targets.append(self.aff(solved.value))
        self.local[p.index] = var
        keys = [self.read(k) for k in p.keys]
        self.local[p.index] = lo
        sorted_by = p.keys and any(isinstance(prop, Ordering) and prop.uf == p.keys[0].name
                                   and prop.orders_within(p.group)
                                   for prop in self.lay.properties)
        matches = " && ".join(f"{k} == {v}" for k, v in zip(keys, targets)) or "1"
        if sorted_by:
            before = ">" if p.descending[0] else "<"
            self.local[p.index] = "spf_mid"
            key0 = self.read(p.keys[0])
            out.append(t.While(f"{lo} < {hi}", [
                t.Declare("const int64_t", "spf_mid", f"{lo} + ({hi} - {lo}) / 2"),
                t.If(f"{key0} {before} {targets[0]}", [t.Assign(lo, "spf_mid + 1")],
                     [t.Assign(hi, "spf_mid")])]))
            out.append(t.Declare("int64_t", var, lo))
            self.local[p.index] = var
            return out
        out.append(t.Declare("int64_t", var, lo))
        self.local[p.index] = var
        out.append(t.While(f"{var} < {hi} && !({matches})", [t.Call(f"++{var}")]))
        return out

    def point_coords(self, conj: tuple[Constraint, ...]) -> list[tuple[str, str]]:
        """Per logical coordinate, its value at the point whose layout indices are bound (an
        equality of ``conj`` giving it from them and the fields)."""
        out = []
        logical = set(self.outs)
        for g in self.outs:
            eq = next((c for c in conj if c.is_eq and abs(c.aff.coeff(g)) == 1
                       and not (c.names() - {g}) & logical), None)
            if eq is None:
                raise layout_error(self.lay, f"layout {self.lay.name} cannot be written: part "
                                   f"{self.plan.others.index(conj) + 2} of its relation does "
                                   f"not give {g} by an equality, so the entries it reads "
                                   "cannot be checked", "relation")
            k = eq.aff.coeff(g)
            out.append((g, self.aff((eq.aff - Aff.var(g, k)) * -k)))
        return out

    def over_points(self, conj: tuple[Constraint, ...], inner: Callable[[], list[t.Node]]
                    ) -> list[t.Node]:
        """Loops over the points of ``conj`` on the fields as written: each layout index in
        layout order given by an equality over the earlier ones and the fields, or looping
        from its greatest lower bound to its least upper bound; its logical coordinates bound
        (:meth:`point_coords`), every constraint tested, then ``inner()`` (statements run at
        each point; ``continue`` leaves the point)."""
        saved = dict(self.local)
        earlier: set[str] = set()
        fields = set(self.lay.fields) | set(self.lay.params)
        heads: list[tuple[str, list[str], list[str]]] = []      # index, lower, upper bounds
        for p in self.lay.indices:
            var = self.fresh(p)
            lows, highs = [], []
            for c in conj:
                k = c.aff.coeff(p)
                rest = c.aff - Aff.var(p, k)
                if abs(k) != 1 or not rest.names() <= earlier | fields \
                        or not {a.name for a in rest.calls()} <= set(self.arrays):
                    continue
                bound = self.aff(rest * -k)         # p = bound (an equality), p >= / <= it
                if c.is_eq:
                    lows, highs = [bound], [bound]
                    break
                (lows if k > 0 else highs).append(bound)
            if not lows or not highs:
                raise layout_error(self.lay, f"layout {self.lay.name} cannot be written: {p} "
                                   "has no lower or upper bound in a part of its relation, so "
                                   "the entries that part reads cannot be checked", "relation")
            heads.append((var, lows, highs))
            self.local[p] = var
            earlier.add(p)
        body: list[t.Node] = []
        for g, value in self.point_coords(conj):
            var = self.fresh(g)
            body.append(t.Declare("const int64_t", var, value))
            self.local[g] = var
        fails = " || ".join(f"{self.aff(c.aff)} {'!=' if c.is_eq else '<'} 0" for c in conj)
        body += [t.If(fails, [t.Call("continue")]), *inner()]
        for var, lows, highs in reversed(heads):
            lo, hi = lows[0], highs[0]
            for more in lows[1:]:
                lo = f"({lo} > {more} ? {lo} : {more})"
            for more in highs[1:]:
                hi = f"({hi} < {more} ? {hi} : {more})"
            body = [t.For(f"int64_t {var} = {lo}", f"{var} <= {hi}", f"++{var}", body)]
        self.local = saved
        return body

    def extra(self, k: int, count: str) -> list[t.Node]:
        """At a point of other part ``k``: unless it holds the fill, one of the entries found there
        (its slot's count taken); else refused, naming it and the part 1 value it adds to,
        if any."""
        lay = self.lay
        valued = lay.value_array is not None
        at = [self.local[g] for g in self.outs]
        out: list[t.Node] = [t.Declare("const int64_t", "spf_w", self.slot_here()),
                             self.refuse_if("spf_w < 0", f"{lay.name} cannot hold these "
                                            f"entries: part {k + 2} of its relation would read "
                                            f"{{at}} outside {lay.value_array}", at=at),
                             t.Declare("spf_value_t", "spf_read", self.value_at("spf_w")),
                             t.If(self.same("spf_read", self.absent()), [t.Call("continue")])]
        if not valued:
            return [*out, t.Assign(f"{count}[0]", "1", "-=")]

        def twice() -> list[t.Node]:
            return [t.Declare("const int64_t", "spf_w1", self.slot_here()),
                    t.If(f"spf_w1 >= 0 && "
                         f"!{self.same(self.value_at('spf_w1'), self.absent())}", [
                        t.Declare("spf_value_t", "spf_given", self.value_at("spf_w1")),
                        *self.refuse(f"{lay.name} cannot hold these entries: {{at}} would be read "
                                 f"through parts 1 and {k + 2} of its relation (values "
                                 "{given} and {read}, which a kernel would add)", at=at,
                                 values=("spf_given", "spf_read"))])]
        return [*out, t.If(f"{count}[spf_w] == 0", [
            *self.locate(self.part.conj, self.plan.first, twice),
            *self.refuse(f"{lay.name} cannot hold these entries: {{at}} would be read back "
                         f"through part {k + 2} of its relation, but the source has no entry "
                         "there (read back: {read})", at=at, values=("spf_read", "spf_read"))]),
            t.Assign(f"{count}[spf_w]", "1", "-=")]

    def count_first(self) -> None:
        """Where the first part could read a slot its entries did not write: its points
        holding values other than the fill are as many as its entries holding them (before
        runs of one value replaced them)."""
        lay = self.lay
        values = self.value_of(E)
        self.b.add(t.Declare("int64_t", "spf_points", "0"))
        if self.part.covers:        # each run holds the entries it covers
            self.b.add(t.Declare("int64_t", "spf_held", "spf_given"))
        else:
            self.b.add(t.Declare("int64_t", "spf_held", "0"))
            self.each(t.Assign("spf_held", f"!{self.same(values, self.absent())}", "+="))

        def point() -> list[t.Node]:
            return [t.Declare("const int64_t", "spf_w", self.slot_here()),
                    t.Assign("spf_points", f"spf_w >= 0 && "
                             f"!{self.same(self.value_at('spf_w'), self.absent())}", "+=")]
        self.b.add(*self.over_points(self.part.conj, point))
        self.b.add(self.refuse_if("spf_points != spf_held", f"{lay.name} cannot hold these "
                                  "entries: part 1 of its relation reads {x0} entries other than "
                                  "the fill back from what was written, the source gives it {x1}",
                                  ("spf_points", "spf_held"), entry=False))

    def property_checks(self) -> None:
        """The layout's linear properties over arrays this function writes, checked in C on
        the arrays as written (over their boxes, as :class:`Linear` checks a given tensor), so
        that a C caller gets them checked and Python need not check them again."""
        for prop in self.lay.properties:
            if isinstance(prop, Linear) and all(a in self.arrays for a in prop.ufs):
                self.check_linear(prop)
                self.proven.append(prop)

    def check_linear(self, prop: Linear) -> None:
        """Loops over ``prop``'s box (each variable's bounds from the ``for`` constraints
        naming it alone, the others tested inside), each ``holds`` constraint tested."""
        lay = self.lay
        saved = dict(self.local)
        loops: list[tuple[str, str, str]] = []
        used: set[Constraint] = set()
        for v in prop.variables:
            var = self.fresh(v)
            lo: list[str] = []
            hi: list[str] = []
            for c in prop.domain:
                coeff = c.aff.coeff(v)
                if c.is_eq or not coeff or c.aff.names() & set(prop.variables) != {v}:
                    continue
                rest = self.aff(c.aff - Aff.var(v, coeff))
                if abs(coeff) == 1:     # coeff * v + rest >= 0
                    (lo if coeff > 0 else hi).append(f"-{rest}" if coeff > 0 else rest)
                else:
                    (lo if coeff > 0 else hi).append(f"-spf_st_fdiv({rest}, {coeff})"
                                                     if coeff > 0 else
                                                     f"spf_st_fdiv({rest}, {-coeff})")
                used.add(c)
            loops.append((var, _extreme(lo, ">"), _extreme(hi, "<")))
            self.local[v] = var
        guard = " && ".join(f"{self.aff(c.aff)} {'==' if c.is_eq else '>='} 0"
                            for c in prop.domain if c not in used) or "1"
        shown = ", ".join(f"{v} = {{x{k}}}" for k, v in enumerate(prop.variables[:3]))
        body: list[t.Node] = []
        for c in prop.holds:
            text = (f"{lay.name} cannot hold these entries: the fields its relation gives them "
                    f"fail its own checks ({_literal(prop.violated(lay.name))} at {shown}: "
                    f"{_literal(format_constraint(c))} fails)")
            body.append(self.refuse_if(f"{self.aff(c.aff)} {'!=' if c.is_eq else '<'} 0", text,
                                       tuple(var for var, _, _ in loops[:3]), entry=False))
        node: t.Node = t.If(guard, body) if guard != "1" else t.Block(body)
        for var, first, last in reversed(loops):
            node = t.For(f"int64_t {var} = {first}", f"{var} <= {last}", f"++{var}", [node])
        self.b.add(t.Comment(f"{prop.text()}, on the arrays as written"), node)
        self.local = saved

    def finish(self) -> None:
        """Every index array narrowed into ``B``'s width (each value checked), the values and
        scalar fields handed over; then everything of this function freed."""
        lay, b = self.lay, self.b
        outputs: list[tuple[str, str]] = []
        for name, spec in lay.fields.items():
            if not spec.is_array:
                top = _WIDTH_MAX[_ctype(field_ctype(spec, lay), lay)]
                b.add(self.refuse_if(f"{self.scalar(name)} > INT64_C({top})",
                                     f"{lay.name}: {name} = {{x0}} is beyond "
                                     f"{lay.dtype_of(name)}{wider_hint(lay.dtype_of(name))}",
                                     (self.scalar(name),), entry=False))
                continue
            if name == lay.value_array or name in self.narrow:
                continue
            ctype = field_ctype(spec, lay)
            top = _WIDTH_MAX[_ctype(ctype, lay)]
            var, size = self.arrays[name][0], self.size(name)
            out = self.fresh(f"out_{name}")
            self.decls.append(t.Declare(f"{ctype} *", out, "NULL"))
            b.add(t.Assign(out, f"spf_st_alloc(sizeof({ctype}) * (size_t)({size} > 0 ? {size} "
                                ": 0))"))
            self.oom_check(out)
            b.add(t.For(f"int64_t {E} = 0", f"{E} < {size}", f"++{E}", [
                self.refuse_if(f"{var}[{E}] > INT64_C({top}) || {var}[{E}] < -INT64_C({top})",
                               self.beyond(name), entry=False),
                t.Assign(f"{out}[{E}]", f"({ctype}){var}[{E}]")]))
            outputs.append((name, out))
        b.add(t.Comment("every check passed: the fields handed over"))
        for name, spec in lay.fields.items():
            if not spec.is_array:
                b.add(t.Assign(f"B->{name}", f"({field_ctype(spec, lay)}){self.scalar(name)}"))
        for name, out in outputs:
            b.add(t.Assign(f"B->{name}", out), t.Assign(out, "NULL"))
        for name in [*self.narrow, *([lay.value_array] if lay.value_array else [])]:
            data = self.arrays[name][0]             # written in B's own type
            b.add(t.Assign(f"B->{name}", data), t.Assign(data, "NULL"))
        dims = [d for name, spec in lay.fields.items() if spec.is_array
                for d in self.arrays[name][1]]
        report: list[t.Node] = [t.Assign(f"spf_sizes[{k}]", d) for k, d in enumerate(dims)]
        b.add(t.If("spf_sizes", [*report, t.Assign(f"spf_sizes[{len(dims)}]", "n")]))
        b.add(t.Label("spf_done"))
        for var in self.owned:
            b.add(t.Call(f"free({var})"))
        for _, out in outputs:
            b.add(t.Call(f"free({out})"))
        b.add(t.Return("spf_status"))


def _run_end(plan: WritePlan, c: Cover) -> str:
    """What a cover's end array holds per run, over its first and last coordinate."""
    solved = plan.first.solution(c.end)
    assert solved is not None
    return str(solved.value.rename({c.last: f"last_{c.coordinate}",
                                    c.coordinate: f"first_{c.coordinate}"}))


def _first_by_construction(plan: WritePlan) -> bool:
    """Whether the first part reads back exactly the entries it holds by construction (as
    :attr:`WritePlan.reads_back_by_construction` for it alone)."""
    return replace(plan, others=()).reads_back_by_construction


def _ctype(ctype: str, lay: Layout) -> str:
    return f"{lay.index_type}_t" if ctype == "spf_index_t" else ctype


def _literal(text: str) -> str:
    """``text`` as literal text of a refusal (which is formatted)."""
    return text.replace("{", "{{").replace("}", "}}")


def _extreme(values: list[str], side: str) -> str:
    """The largest (``side`` ">") or least ("<") of C values."""
    out = values[0]
    for v in values[1:]:
        out = f"(({out}) {side} ({v}) ? ({out}) : ({v}))"
    return out


def _single_name(a: Aff) -> str:
    atom = a.terms[0][0]
    return atom.name if isinstance(atom, UFCall) else str(atom)


def _recovers(base: Aff, values: list[Aff]) -> bool:
    """Whether ``values`` are functions of ``base`` alone (its atom and quotients of it) from
    which a linear combination gives ``base`` back (up to a constant): then no two values of
    ``base`` give the same ``values``."""
    (atom, _), = base.terms
    basis: list[Atom] = []
    for v in values:
        for a, _ in v.terms:
            if a != atom and not (isinstance(a, FloorDiv) and a.num == base):
                return False
            if a not in basis:
                basis.append(a)
    if atom not in basis:
        return False
    rows = [[Fraction(dict(v.terms).get(a, 0)) for v in values] + [Fraction(a == atom)]
            for a in basis]
    return _solvable(rows)


def _solvable(rows: list[list[Fraction]]) -> bool:
    """Whether the linear system of augmented ``rows`` (the last column the right-hand side)
    has a solution: Gaussian elimination over the rationals."""
    width = len(rows[0]) - 1
    pivot_row = 0
    for col in range(width):
        pivot = next((r for r in range(pivot_row, len(rows)) if rows[r][col]), None)
        if pivot is None:
            continue
        rows[pivot_row], rows[pivot] = rows[pivot], rows[pivot_row]
        for r in range(len(rows)):
            if r != pivot_row and rows[r][col]:
                factor = rows[r][col] / rows[pivot_row][col]
                rows[r] = [x - factor * y for x, y in zip(rows[r], rows[pivot_row])]
        pivot_row += 1
    return all(any(row[:width]) or not row[width] for row in rows)
