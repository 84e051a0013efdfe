"""A small tree of C statements: what lowering builds and the printers print.

Expressions stay C expression text (built by :class:`spf.back.names.CNames` from terms);
statements and their nesting are nodes, so no one has to count braces or search generated
text.  A :class:`Builder` appends nodes at an insertion point, like an IR builder: ``add``
appends, ``nest`` opens a node whose body becomes the insertion point until the matching
``close``, ``defer`` registers a statement that goes at the end of the current body.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum


class Schedule(Enum):
    """How the iterations of a parallel loop are shared (OpenMP ``schedule``)."""

    STATIC = "static"
    GUIDED = "guided,32"


@dataclass
class Parallel:
    """A loop whose iterations run on several threads.  ``team=False``: the loop is shared by
    the threads of an enclosing :class:`Team` (``omp for``); ``private`` and ``reduction``
    name variables with per-thread copies."""

    schedule: Schedule = Schedule.STATIC
    team: bool = True
    private: list[str] = field(default_factory=list)
    reduction: list[str] = field(default_factory=list)    # variables combined by reduction_op
    reduction_op: str = "+"                               # an OpenMP reduction identifier


@dataclass
class Simd:
    """``#pragma omp simd``: the loop's iterations run as SIMD lanes; ``reduction``: variables
    combined by ``reduction_op`` in partial results per lane."""

    reduction: list[str] = field(default_factory=list)
    reduction_op: str = "+"


@dataclass
class Comment:
    text: str                   # may hold several lines


@dataclass
class Declare:
    """``[const] ctype name [= init];``"""

    ctype: str
    name: str
    init: str | None = None
    const: bool = False
    note: str = ""              # a comment after the declaration


@dataclass
class Assign:
    """``target op value;`` (``op``: ``=``, ``+=``, ...)."""

    target: str
    value: str
    op: str = "="
    note: str = ""              # a comment after the statement


@dataclass
class Call:
    """An expression evaluated for its effect: ``free(p);``, ``++n;``, ``(void)x;``."""

    expr: str
    note: str = ""              # a comment after the statement


@dataclass
class Return:
    value: str = "0"


@dataclass
class Goto:
    label: str


@dataclass
class Label:
    name: str


@dataclass
class Snippet:
    """A filled template from ``templates/`` (balanced C statements, printed as they are)."""

    name: str
    lines: list[str]
    jumps: tuple[str, ...] = ()     # labels its code may jump to


@dataclass
class Hole:
    """Where another generator's statements go: the statement of a nest that visits a
    tensor's entries (:attr:`value`: the entry's value in C), filled by :func:`fill` with
    each pass of the code that reads the entries (the writer of a conversion).  Never
    printed."""

    value: str


@dataclass
class Block:
    body: list[Node] = field(default_factory=list)
    note: str = ""              # a comment after the opening brace


@dataclass
class For:
    """``for (init; cond; step)`` with an optional parallel or simd annotation; ``braces``
    false prints a one-statement body without braces."""

    init: str
    cond: str
    step: str
    body: list[Node] = field(default_factory=list)
    parallel: Parallel | None = None
    simd: Simd | None = None
    braces: bool = True


@dataclass
class While:
    cond: str
    body: list[Node] = field(default_factory=list)
    braces: bool = True


@dataclass
class If:
    cond: str
    body: list[Node] = field(default_factory=list)
    orelse: list[Node] | None = None
    braces: bool = True
    note: str = ""              # a comment after the condition
    else_note: str = ""         # a comment after ``else``


@dataclass
class Team:
    """``#pragma omp parallel`` around a statement: the threads that run the ``For`` inside
    with ``Parallel(team=False)``."""

    body: list[Node] = field(default_factory=list)


@dataclass(frozen=True)
class Param:
    """One C parameter: its declarator before the name (``const spf_CSR *restrict``) and
    its name."""

    decl: str
    name: str

    def __str__(self) -> str:
        return f"{self.decl}{'' if self.decl.endswith('*') else ' '}{self.name}"


@dataclass(frozen=True)
class Signature:
    """A function's return type, name and parameters (``int f(int64_t n, ...)``)."""

    ret: str
    name: str
    params: tuple[Param, ...]

    def __str__(self) -> str:
        return f"{self.ret} {self.name}({', '.join(map(str, self.params))})"


@dataclass
class Function:
    """A function definition at file level: ``comment``, ``signature`` (with its storage
    class: ``static inline int f(...)``) and ``body``."""

    signature: str | Signature
    body: list[Node] = field(default_factory=list)
    comment: str = ""


@dataclass
class Struct:
    """``typedef struct name { members; } name;`` at file level (``members``: declarations
    without the semicolon)."""

    name: str
    members: list[str]
    comment: str = ""


Definition = Function | Struct

Node = (Comment | Declare | Assign | Call | Return | Goto | Label | Snippet | Hole | Block
        | For | While | If | Team)
Nested = Block | For | While | If | Team   # nodes with a body
_NESTED = (Block, For, While, If, Team)


def walk(nodes: list[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and of their bodies, outermost first."""
    for n in nodes:
        yield n
        if isinstance(n, _NESTED):
            yield from walk(n.body)
        if isinstance(n, If) and n.orelse:
            yield from walk(n.orelse)


def fill(nodes: list[Node], body: list[Node], head: list[Node] | None = None) -> list[Node]:
    """A copy of ``nodes`` with each :class:`Hole` replaced by ``body``, and ``head`` placed
    just before the innermost loop around each hole (run once per iteration of the loops
    outside it, before the statements of that iteration)."""
    return _filled(nodes, body, head or [])[0]


def _filled(nodes: list[Node], body: list[Node], head: list[Node]) -> tuple[list[Node], bool]:
    """:func:`fill`, and whether a hole of ``nodes`` lies in a loop (its head placed)."""
    out: list[Node] = []
    looped = False
    for n in nodes:
        if isinstance(n, Hole):
            out.extend(body)
            continue
        if not isinstance(n, _NESTED) or not any(isinstance(m, Hole) for m in walk([n])):
            out.append(n)
            continue
        inner, looped_in = _filled(n.body, body, head)
        if isinstance(n, If):
            orelse, looped_else = _filled(n.orelse or [], body, head)
            out.append(replace(n, body=inner, orelse=orelse if n.orelse is not None else None))
            looped = looped or looped_in or looped_else
            continue
        if isinstance(n, For) and not looped_in:       # the innermost loop around a hole
            out.extend(head)
            looped_in = True
        out.append(replace(n, body=inner))
        looped = looped or looped_in
    return out, looped


def declared_outside(nodes: list[Node], names: Iterable[str]) -> frozenset[str]:
    """Those of ``names`` declared, on the way to every :class:`Hole` of ``nodes``, outside
    the innermost loop around it (fixed for a whole run of that loop); none where a hole
    lies in no loop."""
    found: list[frozenset[str]] = []

    def visit(nodes: list[Node], declared: list[str], outside: frozenset[str] | None) -> None:
        declared = list(declared)
        for n in nodes:
            if isinstance(n, Declare):
                declared.append(n.name)
            elif isinstance(n, Hole):
                found.append(outside or frozenset())
            elif isinstance(n, _NESTED):
                here = frozenset(declared) if isinstance(n, For) else outside
                visit(n.body, declared, here)
                if isinstance(n, If) and n.orelse:
                    visit(n.orelse, declared, here)
    visit(list(nodes), [], None)
    return frozenset(names) & frozenset.intersection(*found) if found else frozenset()


def jumps_to(nodes: list[Node], label: str) -> bool:
    """Whether some statement of ``nodes`` may jump to ``label``."""
    return any((isinstance(n, Goto) and n.label == label)
               or (isinstance(n, Snippet) and label in n.jumps) for n in walk(nodes))


class Builder:
    """Appends nodes at an insertion point (see the module docstring)."""

    def __init__(self) -> None:
        self.root: list[Node] = []
        self._stack: list[tuple[list[Node], list[Node]]] = []   # (body, deferred)
        self._body = self.root
        self._deferred: list[Node] = []

    @property
    def depth(self) -> int:
        return len(self._stack)

    def add(self, *nodes: Node) -> None:
        self._body.extend(nodes)

    def nest(self, node: Nested) -> Nested:
        """Append ``node`` and make its body the insertion point."""
        self._body.append(node)
        self._stack.append((self._body, self._deferred))
        self._body, self._deferred = node.body, []
        return node

    def defer(self, node: Node) -> None:
        """``node`` goes at the end of the current body when it is closed."""
        self._deferred.insert(0, node)

    def close(self) -> None:
        self._body.extend(self._deferred)
        self._body, self._deferred = self._stack.pop()

    def close_to(self, depth: int) -> None:
        while self.depth > depth:
            self.close()

    def flush(self) -> None:
        """Append the statements deferred at the current depth now."""
        self._body.extend(self._deferred)
        self._deferred = []

    def nest_else(self, node: If) -> None:
        """Make the ``else`` branch of ``node`` (already closed) the insertion point."""
        node.orelse = []
        self._stack.append((self._body, self._deferred))
        self._body, self._deferred = node.orelse, []
