"""Affine terms whose atoms may be uninterpreted-function (UF) calls.

An :class:`Aff` is ``sum(coeff * atom) + const`` where an atom is a variable or symbolic
constant (a ``str``), a :class:`UFCall` such as ``rowPtr(pi + 1)`` or a :class:`FloorDiv`.
Terms are immutable and compared by value, so the same call written twice is the same
term, while ``rowPtr(pi)`` and ``rowPtr(pi + 1)`` are different terms.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from math import gcd
from typing import Any


@dataclass(frozen=True)
class UFCall:
    """A call ``name(args...)`` of an uninterpreted function (an index array)."""

    name: str
    args: tuple[Aff, ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"

    def map_args(self, fn: Callable[[Aff], Aff]) -> UFCall:
        return UFCall(self.name, tuple(fn(a) for a in self.args))


@dataclass(frozen=True)
class FloorDiv:
    """``floor(num / den)`` for a positive integer ``den`` (arises from isl projections)."""

    num: Aff
    den: int

    def __str__(self) -> str:
        return f"floor(({self.num})/{self.den})"


Atom = str | UFCall | FloorDiv
# atoms to affine terms: keyed by names, calls or floor divisions (a Mapping is invariant in its
# key type, so a dict of names alone must be accepted too)
Substitution = Mapping[Any, "Aff"]


@lru_cache(maxsize=1 << 16)
def _atom_key(atom: Atom) -> tuple:
    """The order of atoms in an Aff (names, then UF calls, then floor divisions, by text);
    cached: printing a UF call for every Aff built was a tenth of code generation."""
    if isinstance(atom, str):
        return (0, atom)
    return (1 if isinstance(atom, UFCall) else 2, str(atom))


class Aff:
    """An integer affine combination of atoms plus a constant."""

    __slots__ = ("_hash", "const", "terms")

    def __init__(self, terms: Mapping[Atom, int] | Iterable[tuple[Atom, int]] = (),
                 const: int = 0):
        items = terms.items() if isinstance(terms, Mapping) else terms
        acc: dict[Atom, int] = {}
        for atom, coeff in items:
            acc[atom] = acc.get(atom, 0) + coeff
        kept = [(a, c) for a, c in acc.items() if c != 0]
        if len(kept) > 1:
            kept.sort(key=lambda t: _atom_key(t[0]))
        self.terms: tuple[tuple[Atom, int], ...] = tuple(kept)
        self.const = int(const)
        self._hash = hash((self.terms, self.const))

    # construction -----------------------------------------------------------------
    @staticmethod
    def var(name: Atom, coeff: int = 1) -> Aff:
        return Aff({name: coeff})

    @staticmethod
    def num(value: int) -> Aff:
        return Aff((), value)

    # algebra ----------------------------------------------------------------------
    def __add__(self, other: Aff | int) -> Aff:
        other = _lift(other)
        return Aff(self.terms + other.terms, self.const + other.const)

    __radd__ = __add__

    def __sub__(self, other: Aff | int) -> Aff:
        return self + (-_lift(other))

    def __rsub__(self, other: Aff | int) -> Aff:
        return _lift(other) - self

    def __neg__(self) -> Aff:
        return self * -1

    def __mul__(self, k: int) -> Aff:
        return Aff(((a, c * k) for a, c in self.terms), self.const * k)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Aff) and self.terms == other.terms and self.const == other.const

    def __hash__(self) -> int:
        return self._hash

    # queries ----------------------------------------------------------------------
    def coeff(self, atom: Atom) -> int:
        for a, c in self.terms:
            if a == atom:
                return c
        return 0

    @property
    def is_const(self) -> bool:
        return not self.terms

    def atoms(self) -> Iterator[Atom]:
        return (a for a, _ in self.terms)

    def as_name(self) -> str | None:
        """The plain name this Aff is (``1 * name`` and nothing else), or None."""
        if self.const != 0 or len(self.terms) != 1:
            return None
        atom, coeff = self.terms[0]
        return atom if coeff == 1 and isinstance(atom, str) else None

    def names(self) -> set[str]:
        """All plain names used, including inside UF arguments and floor divisions."""
        out: set[str] = set()
        for a in self.atoms():
            if isinstance(a, str):
                out.add(a)
            elif isinstance(a, UFCall):
                for arg in a.args:
                    out |= arg.names()
            else:
                out |= a.num.names()
        return out

    def calls(self) -> set[UFCall]:
        """All UF calls, nested ones included."""
        out: set[UFCall] = set()
        for a in self.atoms():
            if isinstance(a, UFCall):
                out.add(a)
                for arg in a.args:
                    out |= arg.calls()
            elif isinstance(a, FloorDiv):
                out |= a.num.calls()
        return out

    def substitute(self, mapping: Substitution) -> Aff:
        """Replace atoms (also inside UF arguments) by affine terms."""
        result = Aff.num(self.const)
        for atom, coeff in self.terms:
            if atom in mapping:
                result = result + mapping[atom] * coeff
                continue
            if isinstance(atom, UFCall):
                new = atom.map_args(lambda a: a.substitute(mapping))
                atom = new
                if atom in mapping:
                    result = result + mapping[atom] * coeff
                    continue
            elif isinstance(atom, FloorDiv):
                atom = FloorDiv(atom.num.substitute(mapping), atom.den)
            result = result + Aff.var(atom, coeff)
        return result

    def rename(self, mapping: Mapping[str, str]) -> Aff:
        return self.substitute({k: Aff.var(v) for k, v in mapping.items()})

    def map_calls(self, fn: Callable[[UFCall], UFCall]) -> Aff:
        """Rewrite every UF call (inner calls first)."""
        terms = []
        for atom, coeff in self.terms:
            if isinstance(atom, UFCall):
                atom = fn(atom.map_args(lambda a: a.map_calls(fn)))
            elif isinstance(atom, FloorDiv):
                atom = FloorDiv(atom.num.map_calls(fn), atom.den)
            terms.append((atom, coeff))
        return Aff(terms, self.const)

    def evaluate(self, env: Mapping[str, int],
                 call: Callable[[str, list[int]], int] | None = None) -> int:
        """Integer value given scalar ``env`` and a ``call(name, args)`` for UF reads."""
        total = self.const
        for atom, coeff in self.terms:
            if isinstance(atom, str):
                if atom not in env:
                    raise KeyError(atom)
                value = int(env[atom])
            elif isinstance(atom, UFCall):
                if call is None:
                    raise KeyError(atom.name)
                value = call(atom.name, [a.evaluate(env, call) for a in atom.args])
            else:
                value = atom.num.evaluate(env, call) // atom.den
            total += coeff * value
        return total

    def __str__(self) -> str:
        return format_sum(self.terms, self.const)

    def __repr__(self) -> str:
        return f"Aff({self})"


def _lift(x: Aff | int) -> Aff:
    return x if isinstance(x, Aff) else Aff.num(x)


def format_sum(terms: Iterable[tuple[Atom, int]], const: int,
               atom_text: Callable[[Atom], str] = str,
               compound_text: Callable[[Atom], str] | None = None) -> str:
    """Format ``sum(c*a) + const`` readably: ``pi + 1``, ``2*pj - k``, ``0``; an atom of a
    sum of several parts or with a coefficient other than 1 by ``compound_text`` (where
    given: C widens a narrow index array's read there, so the sum cannot wrap)."""
    terms = list(terms)
    if compound_text is not None and (len(terms) > 1 or const or
                                      any(abs(k) != 1 for _, k in terms)):
        atom_text = compound_text
    parts: list[str] = []
    for atom, coeff in terms:
        text = atom_text(atom)
        mag = abs(coeff)
        body = text if mag == 1 else f"{mag}*{text}"
        if not parts:
            parts.append(body if coeff > 0 else f"-{body}")
        else:
            parts.append(f"+ {body}" if coeff > 0 else f"- {body}")
    if const or not parts:
        if not parts:
            parts.append(str(const))
        else:
            parts.append(f"+ {const}" if const > 0 else f"- {-const}")
    return " ".join(parts)


@dataclass(frozen=True)
class Constraint:
    """``aff == 0`` (``is_eq``) or ``aff >= 0``, normalised by the gcd of coefficients."""

    aff: Aff
    is_eq: bool

    @staticmethod
    def make(aff: Aff, is_eq: bool) -> Constraint:
        g = 0
        for _, c in aff.terms:
            g = gcd(g, c)
        if g > 1:
            if is_eq:
                if aff.const % g == 0:
                    aff = Aff(((a, c // g) for a, c in aff.terms), aff.const // g)
            else:
                aff = Aff(((a, c // g) for a, c in aff.terms), aff.const // g)  # floor
        if is_eq and aff.terms and aff.terms[0][1] < 0:  # canonical sign: first coeff. positive
            aff = -aff
        return Constraint(aff, is_eq)

    @staticmethod
    def ge(lhs: Aff, rhs: Aff) -> Constraint:
        """``lhs >= rhs``."""
        return Constraint.make(lhs - rhs, False)

    @staticmethod
    def eq(lhs: Aff, rhs: Aff) -> Constraint:
        return Constraint.make(lhs - rhs, True)

    def substitute(self, mapping: Substitution) -> Constraint:
        return Constraint.make(self.aff.substitute(mapping), self.is_eq)

    def map_calls(self, fn: Callable[[UFCall], UFCall]) -> Constraint:
        return Constraint.make(self.aff.map_calls(fn), self.is_eq)

    def names(self) -> set[str]:
        return self.aff.names()

    def calls(self) -> set[UFCall]:
        return self.aff.calls()

    @property
    def is_trivial(self) -> bool:
        """True for constant constraints that always hold."""
        return self.aff.is_const and (self.aff.const == 0 if self.is_eq else self.aff.const >= 0)

    @property
    def is_false(self) -> bool:
        return self.aff.is_const and not self.is_trivial

    def __str__(self) -> str:
        return format_constraint(self)


def format_constraint(c: Constraint, atom_text: Callable[[Atom], str] = str,
                      eq_op: str = "=",
                      compound_text: Callable[[Atom], str] | None = None) -> str:
    """SPF-style text: positive terms on the right (``rowPtr(pi) <= pj``,
    ``pj < rowPtr(pi + 1)``); ``compound_text`` as :func:`format_sum`'s, side by side."""
    def side(terms: list[tuple[Atom, int]], const: int) -> str:
        return format_sum(terms, const, atom_text, compound_text)

    pos = [(a, k) for a, k in c.aff.terms if k > 0]
    neg = [(a, -k) for a, k in c.aff.terms if k < 0]
    const = c.aff.const
    if c.is_eq:
        if not neg and const:   # a + 3 = 0  ->  a = -3
            return f"{side(pos, 0)} {eq_op} {-const}"
        return f"{side(pos, 0)} {eq_op} {side(neg, -const)}"
    # sum(pos) + const >= sum(neg)  ->  neg <= pos + const ; strict form when const == -1
    if const <= -1 and neg:
        return f"{side(neg, -const - 1)} < {side(pos, 0)}"
    if const <= -1:
        return f"{-const - 1} < {side(pos, 0)}"
    if not neg:
        return f"{side(pos, const)} >= 0" if pos else f"{const} >= 0"
    return f"{side(neg, 0)} <= {side(pos, const)}"
