"""SPF sets and relations: Presburger formulas with uninterpreted-function calls.

A :class:`Relation` ``{[in] -> [out] : d1 or d2 ...}`` holds disjuncts, each a conjunction
of :class:`~spf.front.terms.Constraint`.  Names that are neither tuple variables nor declared
existentials are symbolic constants.  Composition eliminates the intermediate variables
by substitution (also inside UF arguments, so calls stay exact); isl does the rest
(simplification, projection of plain variables, emptiness and subset tests).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

from .isl_bridge import encode, isl_limit
from .syntax import parse_relation_text
from .terms import Aff, Constraint, UFCall, format_constraint

Conj = tuple[Constraint, ...]
_fresh = itertools.count()


class Relation:
    """An SPF relation (``out_vars`` is ``None`` for a set)."""

    def __init__(self, in_vars: Sequence[str], out_vars: Sequence[str] | None,
                 disjuncts: Iterable[Iterable[Constraint]], exists: Sequence[str] = ()):
        self.in_vars = tuple(in_vars)
        self.out_vars = None if out_vars is None else tuple(out_vars)
        kept: list[Conj] = []
        for conj in disjuncts:
            conj = tuple(dict.fromkeys(c for c in conj if not c.is_trivial))
            if any(c.is_false for c in conj):
                continue
            kept.append(conj)
        self.disjuncts: tuple[Conj, ...] = tuple(kept)
        self.exists = tuple(exists)

    # construction ---------------------------------------------------------------------
    @staticmethod
    def parse(text: str, source: str = "<string>", line0: int = 1, col0: int = 1,
              constants: Mapping[str, int] | None = None) -> Relation:
        """Parse SPF syntax, e.g. ``{[p] -> [i] : 0 <= p < len and i = idx(p)}``."""
        parsed = parse_relation_text(text, source, line0, col0, constants)
        return Relation(parsed.in_vars, parsed.out_vars, parsed.disjuncts)

    @property
    def is_set(self) -> bool:
        return self.out_vars is None

    @property
    def vars(self) -> tuple[str, ...]:
        return self.in_vars + (self.out_vars or ())

    def symbols(self) -> set[str]:
        """Symbolic constants used (names that are not variables)."""
        names: set[str] = set()
        for conj in self.disjuncts:
            for c in conj:
                names |= c.names()
        return names - set(self.vars) - set(self.exists)

    def calls(self) -> set[UFCall]:
        out: set[UFCall] = set()
        for conj in self.disjuncts:
            for c in conj:
                out |= c.calls()
        return out

    # renaming -------------------------------------------------------------------------
    def rename(self, mapping: Mapping[str, str]) -> Relation:
        """Rename variables or symbols; UF names are renamed when ``mapping`` names them."""
        sub = {k: Aff.var(v) for k, v in mapping.items()}

        def fix_call(call: UFCall) -> UFCall:
            return UFCall(mapping.get(call.name, call.name), call.args)

        def ren(c: Constraint) -> Constraint:
            return c.substitute(sub).map_calls(fix_call)

        def r(names: Iterable[str]) -> tuple[str, ...]:
            return tuple(mapping.get(n, n) for n in names)
        return Relation(r(self.in_vars), None if self.out_vars is None else r(self.out_vars),
                        ([ren(c) for c in conj] for conj in self.disjuncts), r(self.exists))

    def _freshen(self, avoid: set[str], only: Iterable[str] | None = None) -> Relation:
        """Rename variables and existentials (or just ``only``) that clash with ``avoid``."""
        mapping = {}
        for v in (self.vars + self.exists if only is None else tuple(only)):
            if v in avoid:
                mapping[v] = f"{v}_{next(_fresh)}"
        return self.rename(mapping) if mapping else self

    # algebra ----------------------------------------------------------------------------
    def inverse(self) -> Relation:
        assert self.out_vars is not None, "inverse of a set"
        return Relation(self.out_vars, self.in_vars, self.disjuncts, self.exists)

    def compose(self, inner: Relation) -> Relation:
        """``self ∘ inner``: x -> o such that x -> i in ``inner`` and i -> o in ``self``."""
        assert inner.out_vars is not None and self.out_vars is not None
        if len(inner.out_vars) != len(self.in_vars):
            raise ValueError(f"cannot compose: {len(inner.out_vars)} outputs into "
                             f"{len(self.in_vars)} inputs")
        mids = [f"_m{next(_fresh)}" for _ in self.in_vars]
        outer = self.rename(dict(zip(self.in_vars, mids)))
        inner = inner.rename(dict(zip(inner.out_vars, mids)))
        # names bound on one side must not capture names of the other side
        inner = inner._freshen((set(outer.out_vars or ()) | set(outer.exists) | outer.symbols())
                               - set(mids), only=inner.exists)
        outer = outer._freshen((set(inner.vars) | set(inner.exists) | inner.symbols())
                               - set(mids))
        disj = [a + b for a in inner.disjuncts for b in outer.disjuncts]
        rel = Relation(inner.in_vars, outer.out_vars, disj,
                       inner.exists + outer.exists + tuple(mids))
        return rel._eliminate(mids)

    def intersect(self, other: Relation) -> Relation:
        other = other._align(self)
        disj = [a + b for a in self.disjuncts for b in other.disjuncts]
        return Relation(self.in_vars, self.out_vars, disj, self.exists + other.exists)

    def union(self, other: Relation) -> Relation:
        other = other._align(self)
        return Relation(self.in_vars, self.out_vars, self.disjuncts + other.disjuncts,
                        self.exists + other.exists)

    def _align(self, like: Relation) -> Relation:
        if (self.is_set != like.is_set or len(self.in_vars) != len(like.in_vars)
                or len(self.out_vars or ()) != len(like.out_vars or ())):
            raise ValueError("relations of different arity")
        other = self._freshen(set(like.exists))
        mapping = dict(zip(other.vars, like.vars))
        tmp = {v: f"_t{next(_fresh)}" for v in other.vars}
        return other.rename(tmp).rename({tmp[k]: v for k, v in mapping.items()})

    def domain(self) -> Relation:
        return Relation(self.in_vars, None, self.disjuncts,
                        self.exists + (self.out_vars or ()))._eliminate(self.out_vars or ())

    def range(self) -> Relation:
        assert self.out_vars is not None
        return Relation(self.out_vars, None, self.disjuncts,
                        self.exists + self.in_vars)._eliminate(self.in_vars)

    def flatten(self) -> Relation:
        """The set over ``in_vars + out_vars`` (keeps layout indices as set variables)."""
        return Relation(self.vars, None, self.disjuncts, self.exists)

    def project_out(self, names: Iterable[str]) -> Relation:
        names = tuple(names)
        def keep(vs: Iterable[str]) -> tuple[str, ...]:
            return tuple(v for v in vs if v not in names)
        rel = Relation(keep(self.in_vars), None if self.out_vars is None else keep(self.out_vars),
                       self.disjuncts, self.exists + names)
        return rel._eliminate(names)

    def _eliminate(self, names: Iterable[str]) -> Relation:
        """Substitute away existential ``names`` that an equality defines (inside calls too)."""
        result = []
        for disjunct in self.disjuncts:
            conj = list(disjunct)
            for name in names:
                for c in conj:
                    if not c.is_eq or abs(c.aff.coeff(name)) != 1:
                        continue
                    rest = c.aff - Aff.var(name, c.aff.coeff(name))
                    if name in rest.names():
                        continue
                    value = rest * -c.aff.coeff(name)  # name = -rest / coeff
                    conj = [d.substitute({name: value}) for d in conj if d is not c]
                    break
            result.append(conj)
        used: set[str] = set()
        for kept in result:
            for c in kept:
                used |= c.names()
        exists = tuple(e for e in self.exists if e in used)
        return Relation(self.in_vars, self.out_vars, result, exists)

    # isl-backed queries -------------------------------------------------------------------
    def _encoding(self):
        dims = list(self.vars) + [e for e in self.exists if self._in_call_args(e)]
        return encode(dims, [list(c) for c in self.disjuncts], params=sorted(self.symbols()))

    def _in_call_args(self, name: str) -> bool:
        return any(name in a.names() for call in self.calls() for a in call.args)

    def to_isl(self):
        """The isl set of this relation (flattened) and its
        :class:`~spf.front.isl_bridge.Encoding`."""
        enc = self._encoding()
        return enc.isl_set([list(c) for c in self.disjuncts], self.exists), enc

    @isl_limit("simplifying a relation")
    def simplify(self) -> Relation:
        """Let isl remove redundant constraints, eliminate plain existentials and merge
        disjuncts."""
        s, enc = self.to_isl()
        s = s.coalesce()
        s = s.remove_redundancies() if hasattr(s, "remove_redundancies") else s
        kept_exists = tuple(d for d in enc.dims if d in self.exists)
        return Relation(self.in_vars, self.out_vars, enc.decode_set(s), kept_exists)

    @isl_limit("testing a relation for emptiness")
    def is_empty(self) -> bool:
        return self.to_isl()[0].is_empty()

    @isl_limit("testing a relation for inclusion")
    def is_subset(self, other: Relation) -> bool:
        other = other._align(self)
        both = Relation(self.vars, None, self.disjuncts + other.disjuncts,
                        self.exists + other.exists)
        enc = both._encoding()
        a = enc.isl_set([list(c) for c in self.disjuncts], self.exists)
        b = enc.isl_set([list(c) for c in other.disjuncts], other.exists)
        return a.is_subset(b)

    # printing ------------------------------------------------------------------------------
    def __str__(self) -> str:
        head = f"[{', '.join(self.in_vars)}]"
        if self.out_vars is not None:
            head += f" -> [{', '.join(self.out_vars)}]"
        if not self.disjuncts:
            return f"{{{head} : false}}"
        bodies = []
        for conj in self.disjuncts:
            text = " and ".join(_format_conjunction(conj, self.vars))
            used = [e for e in self.exists if any(e in c.names() for c in conj)]
            if used:
                text = f"exists {', '.join(used)} : {text}" if text else "true"
            bodies.append(text)
        if bodies == [""]:
            return f"{{{head}}}"
        body = " or ".join(f"({b})" if len(bodies) > 1 else b for b in bodies)
        return f"{{{head} : {body}}}"

    def __repr__(self) -> str:
        return f"Relation({self})"


def _format_conjunction(conj: Sequence[Constraint], variables: Sequence[str]) -> list[str]:
    """Constraints as text, a variable's lower and upper bound joined (``0 <= pi < n``)."""
    rest = list(conj)
    parts: list[str] = []
    for v in variables:
        lower = next((c for c in rest if not c.is_eq and c.aff.coeff(v) == 1), None)
        upper = next((c for c in rest if not c.is_eq and c.aff.coeff(v) == -1), None)
        if lower is None or upper is None:
            continue
        rest.remove(lower)
        rest.remove(upper)
        lo = -(lower.aff - Aff.var(v))          # v >= lo
        hi = upper.aff + Aff.var(v)             # v <= hi
        high = f"< {hi + 1}" if hi.const < 0 else f"<= {hi}"
        parts.append(f"{lo} <= {v} {high}")
    return parts + [format_constraint(c) for c in rest]
