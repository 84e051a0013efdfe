"""Z3 encoding of loop-nest instances with uninterpreted functions and index-array properties.

Shared by find synthesis (paper Appendix A) and dependence analysis (Sec. 5.1): variables of
the levels of a scanned loop nest are copied per instance (``v@1``, ``v@2``), index-array reads
become Z3 functions, and each declared property (Table 1) is instantiated for the pairs of
reads that occur in a query, so no quantifiers reach the solver.
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import z3

from ..concurrency import require, share_z3_context
from ..front.terms import Aff, Constraint, FloorDiv, UFCall
from ..middle.iteration_space import TensorUse
from ..middle.scan import LevelKind, LoopNest

share_z3_context()


class Verdict(NamedTuple):
    """The answer to :meth:`InstanceEncoder.prove_empty`."""

    result: str                 # "unsat", "sat" or "unknown"
    used: list[str]             # unsat: the properties in the unsat core
    why: str = ""               # unknown: why Z3 gave no answer


def symbols_of(a: Aff) -> set[str]:
    """Names of tensor fields (``A.numRows``): the symbolic constants of an iteration space."""
    return {n for n in a.names() if "." in n}


class InstanceEncoder:
    """Z3 formulas over instances (``@1``, ``@2``) of the first ``depth`` levels of a loop nest:
    their variables, index-array reads as Z3 functions, and the layouts' properties
    instantiated over the reads that occur (quantifier-free)."""

    def __init__(self, nest: LoopNest, depth: int):
        require("a Z3 encoding")
        self.nest = nest
        self.limit = nest.z3
        self.space = nest.space
        self.outer = nest.levels[:depth]
        self.outer_vars = [lv.var for lv in self.outer if lv.kind is not LevelKind.READ]
        self.loop_vars = [lv.var for lv in self.outer if lv.kind is LevelKind.LOOP]
        self.funcs: dict[str, z3.FuncDeclRef] = {}
        self.terms: list[tuple[str, tuple, int]] = []   # (uf name, z3 args, instance)
        self.fresh = itertools.count()
        self._contexts: dict[int, tuple[list, list]] = {}
        self._solvers: dict[int, tuple[z3.Solver, list]] = {}
        self._current = 1

    # term construction ---------------------------------------------------------------
    def func(self, name: str, arity: int) -> z3.FuncDeclRef:
        if name not in self.funcs:
            self.funcs[name] = z3.Function(name, *([z3.IntSort()] * (arity + 1)))
        return self.funcs[name]

    def var(self, name: str, k: int) -> z3.ArithRef:
        return z3.Int(f"{name}@{k}") if name in self.outer_vars else z3.Int(name)

    def aff(self, a: Aff, k: int, extra: Mapping[str, z3.ArithRef] | None = None) -> z3.ArithRef:
        parts: list = [a.const] if a.const else []
        for atom, coeff in a.terms:
            if isinstance(atom, str):
                t = extra[atom] if extra and atom in extra else self.var(atom, k)
            elif isinstance(atom, UFCall):
                args = tuple(self.aff(x, k, extra) for x in atom.args)
                t = self.func(atom.name, len(args))(*args)
                self.terms.append((atom.name, args, k))
            else:
                assert isinstance(atom, FloorDiv)
                t = self.aff(atom.num, k, extra) / atom.den
            parts.append(t if coeff == 1 else coeff * t)
        if not parts:
            return z3.IntVal(0)
        return parts[0] if len(parts) == 1 and not isinstance(parts[0], int) else z3.Sum(
            [z3.IntVal(p) if isinstance(p, int) else p for p in parts])

    def constraint(self, c: Constraint, k: int, extra=None) -> z3.BoolRef:
        e = self.aff(c.aff, k, extra)
        return e == 0 if c.is_eq else e >= 0

    def position(self, k: int) -> z3.ArithRef:
        return z3.Int(f"q{next(self.fresh)}@{k}")

    # context -----------------------------------------------------------------------------
    def context(self, k: int) -> list[z3.BoolRef]:
        """C2 ∧ C3 for instance k: bounds, assignments, guards of the enclosing levels."""
        if k in self._contexts:
            cons, terms = self._contexts[k]
            self.terms.extend(terms)
            return cons
        start = len(self.terms)
        out = []
        known = set(self.outer_vars)
        for lv in self.outer:
            for c in lv.bound_constraints() + lv.guards + lv.dropped:
                out.append(self.constraint(c, k))
        for c in self.space.facts:
            if c.names() <= known | symbols_of(c.aff):
                out.append(self.constraint(c, k))
        self._contexts[k] = (out, self.terms[start:])
        return out

    def before(self) -> z3.BoolRef:
        """C1: instance 1 executes before instance 2 (lexicographic on loop indices)."""
        if not self.loop_vars:
            return z3.BoolVal(False)
        cases = []
        for n, v in enumerate(self.loop_vars):
            eq = [self.var(u, 1) == self.var(u, 2) for u in self.loop_vars[:n]]
            cases.append(z3.And(*eq, self.var(v, 1) < self.var(v, 2)))
        return z3.Or(*cases)

    def same_state(self, state: list[str]) -> list[z3.BoolRef]:
        """A7."""
        return [self.var(s, 1) == self.var(s, 2) for s in state]

    # properties (P5, P6), instantiated over pairs of call terms (quantifier-free) ------------
    def _distinct(self, terms: list) -> list[tuple[str, tuple, int]]:
        seen: set[tuple] = set()
        out = []
        for name, args, k in terms:
            ident = (name, k, tuple(a.get_id() for a in args))   # z3 terms are hash-consed
            if ident not in seen:
                seen.add(ident)
                out.append((name, args, k))
        return out

    def instances(self, new: list, old: list) -> list[z3.BoolRef]:
        """Property instances for the new terms and the pairs (new, new) and (new, old)."""
        return [c for _, group in self.grouped_instances(new, old) for c in group]

    def grouped_instances(self, new: list, old: list) -> list[tuple[str, list[z3.BoolRef]]]:
        """The same, grouped per property (labelled ``TENSOR: formula``)."""
        new = self._distinct(new)
        old_ids = {(n, k, tuple(a.get_id() for a in args)) for n, args, k in old}
        new = [t for t in new if (t[0], t[2], tuple(a.get_id() for a in t[1])) not in old_ids]
        out = []
        for use in self.space.uses:
            reads = _UseReads(self, use, new, old)
            for prop in use.layout.properties:
                group = prop.instances(reads)
                if group:
                    out.append((f"{use.name}: {prop.kind} {prop.formula()}", group))
        return out

    def local(self, a: Aff, use: TensorUse, k: int) -> z3.ArithRef:
        mapping = {f: Aff.var(use.symbol(f)) for f in use.layout.scalar_fields}
        qualified = a.substitute(mapping).map_calls(
            lambda c: UFCall(use.symbol(c.name), c.args) if c.name in use.layout.index_arrays
            else c)
        return self.aff(qualified, k)

    # solving -----------------------------------------------------------------------------------
    def begin(self, instances: int) -> None:
        """Start a query over 1 or 2 instances of the enclosing loops (C is asserted once
        per kind in a persistent solver; a query adds its own parts inside push/pop)."""
        if instances not in self._solvers:
            self.terms = []
            solver = z3.Solver()
            solver.set("timeout", self.limit.timeout_ms)
            parts = list(self.context(1))
            if instances == 2:
                parts += self.context(2) + [self.before()]
            solver.add(*parts)
            base_terms = self._distinct(self.terms)
            solver.add(*self.instances(base_terms, []))
            self._solvers[instances] = (solver, base_terms)
        self._current = instances
        self.terms = []

    def unsat(self, *parts: z3.BoolRef, query: str, fallback: str) -> tuple[bool, str]:
        """(True, "") when context ∧ parts ∧ properties is UNSAT; else (False, reason): a
        counterexample, or why Z3 gave no answer (then ``query`` and the ``fallback`` the
        caller takes are recorded in the nest's :class:`~spf.middle.z3limit.Z3Limit`)."""
        solver, base_terms = self._solvers[self._current]
        solver.push()
        try:
            solver.add(*parts)
            solver.add(*self.instances(self.terms, base_terms))
            result = solver.check()
            if result == z3.unsat:
                return True, ""
            if result == z3.unknown:
                return False, self.limit.gave_up(solver, query, fallback)
            model = solver.model()
            shown = sorted((str(d), model[d]) for d in model.decls() if d.arity() == 0)
            return False, "counterexample: " + ", ".join(f"{n} = {v}" for n, v in shown[:12])
        finally:
            solver.pop()
            self.terms = []

    def prove_empty(self, parts: list[z3.BoolRef], query: str, fallback: str) -> Verdict:
        """Decide ``parts`` (built since the last reset of ``terms``) with every property
        instance tracked: unsat with the properties used, sat, or unknown (recorded as in
        :meth:`unsat`)."""
        solver = z3.Solver()
        solver.set("timeout", self.limit.timeout_ms)
        solver.add(*parts)
        flags, labels = [], {}
        for n, (label, group) in enumerate(self.grouped_instances(self.terms, [])):
            flag = z3.Bool(f"spf_property_{n}")
            labels[str(flag)] = label
            solver.add(z3.Implies(flag, z3.And(*group)))
            flags.append(flag)
        self.terms = []
        result = solver.check(*flags)
        if result == z3.unsat:
            # Z3's own core depends on the solver's history; drop properties one by one in a
            # fixed order instead, so the same proof cites the same properties every time
            kept = list(flags)
            for flag in flags:
                trial = [f for f in kept if f is not flag]
                if solver.check(*trial) == z3.unsat:
                    kept = trial
            return Verdict("unsat", sorted(labels[str(f)] for f in kept))
        if result == z3.sat:
            return Verdict("sat", [])
        return Verdict("unknown", [], self.limit.gave_up(solver, query, fallback))


class _UseReads:
    """One tensor's reads in one query, as its properties' instances need them
    (:class:`spf.front.properties.Reads`): the encoder's terms of the tensor's arrays."""

    def __init__(self, enc: InstanceEncoder, use: TensorUse, new: list, old: list):
        self.enc, self.use, self.new, self.old = enc, use, new, old

    def reads(self, array: str) -> list[tuple[z3.ArithRef, int]]:
        name = self.use.symbol(array)
        return [(self.enc.funcs[name](*args), k) for n, args, k in self.new if n == name]

    def pairs(self, arrays: Sequence[str]) -> list[tuple[tuple[z3.ArithRef, int],
                                                         tuple[z3.ArithRef, int]]]:
        qual = [self.use.symbol(u) for u in arrays]
        mine_new = [(a[0], k) for n, a, k in self.new if n in qual and len(a) == 1]
        mine_old = [(a[0], k) for n, a, k in self.old if n in qual and len(a) == 1]
        return [(x, y) for i, x in enumerate(mine_new) for y in mine_new[i + 1:] + mine_old]

    def function(self, array: str) -> z3.FuncDeclRef:
        return self.enc.func(self.use.symbol(array), 1)

    def tuple_pairs(self, array: str, arity: int) -> list[tuple[
            tuple[tuple[z3.ArithRef, ...], int], tuple[tuple[z3.ArithRef, ...], int]]]:
        name = self.use.symbol(array)
        new = [(tuple(a), k) for n, a, k in self.new if n == name and len(a) == arity]
        old = [(tuple(a), k) for n, a, k in self.old if n == name and len(a) == arity]
        return [(x, y) for i, x in enumerate(new) for y in new[i + 1:] + old]

    def function_of(self, array: str, arity: int) -> z3.FuncDeclRef:
        return self.enc.func(self.use.symbol(array), arity)

    def arguments(self, array: str, arity: int) -> list[tuple[tuple[z3.ArithRef, ...], int]]:
        name = self.use.symbol(array)
        return [(tuple(a), k) for n, a, k in self.new if n == name and len(a) == arity]

    def bound(self, a: Aff, k: int) -> z3.ArithRef:
        return self.enc.local(a, self.use, k)

    def enclosing(self, indices: Sequence[str]) -> bool:
        return all(self.use.var(p) in self.enc.outer_vars for p in indices)

    def index(self, name: str, k: int) -> z3.ArithRef:
        return self.enc.var(self.use.var(name), k)
