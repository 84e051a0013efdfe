"""Encode constraints with UF calls as isl sets, and decode isl results back.

Each distinct UF call gets its own isl set dimension, placed right after the last
dimension its arguments use (calls whose arguments are constants or symbolic constants go
first).  isl then does all affine work; the side table maps those dimensions back to the
calls.  Projecting out a dimension therefore projects out every call that depends on it.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import islpy as isl

from ..concurrency import symbolic
from ..errors import SpecError
from .terms import Aff, Constraint, FloorDiv, UFCall

_CTX = isl.DEFAULT_CONTEXT
ISL_MAX_OPERATIONS = 20_000_000     # per top-level operation
ISL_MAX_OPERATIONS_ENV = "SPF_ISL_MAX_OPERATIONS"
_active = False                     # inside a top-level operation


def isl_max_operations() -> int:
    """The isl operations one top-level operation may take: ``$SPF_ISL_MAX_OPERATIONS``
    (0: no limit), else :data:`ISL_MAX_OPERATIONS`."""
    text = os.environ.get(ISL_MAX_OPERATIONS_ENV, "").strip()
    if not text:
        return ISL_MAX_OPERATIONS
    if not text.isdigit():
        raise SpecError(f"{ISL_MAX_OPERATIONS_ENV} must be a non-negative integer (0: no "
                        f"limit), got {text!r}")
    return int(text)


@contextmanager
def isl_limit(what: str, source: str = "<string>") -> Iterator[None]:
    """Bound the isl work of one top-level operation (``what`` names it in the error, which
    ``source`` locates): the outermost ``isl_limit`` resets isl's operation counter and turns
    an exceeded limit into a SpecError; nested ones run within its budget.  Outside, isl is
    not limited."""
    global _active
    with symbolic:      # isl's context and its operation budget are shared by all threads
        if _active:
            yield
            return
        limit = isl_max_operations()
        _CTX.set_max_operations(limit)
        _CTX.reset_operations()
        _active = True
        try:
            yield
        except isl.Error:
            if not _exhausted():
                raise
            raise SpecError(f"isl exceeded {limit} operations while {what}; simplify the "
                            f"relation or raise {ISL_MAX_OPERATIONS_ENV}", source) from None
        finally:
            _active = False
            _CTX.set_max_operations(0)


def _exhausted() -> bool:
    """Whether isl has spent its operations (the error it raised may name another cause: its
    parser reports one as a syntax error)."""
    try:
        isl.Set("{ [i] : 0 <= i <= 1 }", context=_CTX)
    except isl.Error:
        return True
    return False


def _dim_name(obj: isl.Aff | isl.BasicSet, k: int) -> str:
    """The name of parameter ``k`` (spf names every parameter it makes)."""
    name = obj.get_dim_name(isl.dim_type.param, k)
    assert name is not None, "an unnamed isl parameter"
    return name


def _safe(name: str) -> str:
    """An isl identifier for ``name``, one to one: never an isl keyword (``nan``, ``min``,
    ``exists``: names start with ``_``), ``.`` and ``'`` spelled out."""
    return "_" + name.replace("_", "__").replace(".", "_d").replace("'", "_p")


@dataclass
class Encoding:
    """How a list of named dimensions plus UF calls maps to isl set dimensions."""

    dims: list[str]                      # isl dimension order: base names and UF vars
    call_of: dict[str, UFCall] = field(default_factory=dict)
    var_of: dict[UFCall, str] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)

    def position(self, name: str) -> int:
        return self.dims.index(name)

    def is_call_dim(self, name: str) -> bool:
        return name in self.call_of

    # -- encoding -------------------------------------------------------------------
    def encode_aff(self, aff: Aff) -> str:
        parts = []
        for atom, coeff in aff.terms:
            if isinstance(atom, UFCall):
                text = _safe(self.var_of[atom])
            elif isinstance(atom, FloorDiv):
                text = f"floor(({self.encode_aff(atom.num)})/{atom.den})"
            else:
                text = _safe(atom)
            parts.append(f"{coeff}*{text}")
        parts.append(str(aff.const))
        return " + ".join(parts)

    def encode_constraint(self, c: Constraint) -> str:
        return f"{self.encode_aff(c.aff)} {'=' if c.is_eq else '>='} 0"

    def isl_set(self, disjuncts: Sequence[Sequence[Constraint]],
                exists: Sequence[str] = ()) -> isl.Set:
        ex = [_safe(e) for e in exists if e not in self.dims]
        texts = []
        for conj in disjuncts:
            body = " and ".join(self.encode_constraint(c) for c in conj) or "true"
            texts.append(f"exists ({', '.join(ex)} : {body})" if ex else body)
        formula = " or ".join(f"({t})" for t in texts) if texts else "false"
        params = ", ".join(_safe(p) for p in self.params)
        dims = ", ".join(_safe(d) for d in self.dims)
        return isl.Set(f"[{params}] -> {{ [{dims}] : {formula} }}", context=_CTX)

    # -- decoding -------------------------------------------------------------------
    def atom_of_dim(self, pos: int):
        name = self.dims[pos]
        return self.call_of.get(name, name)

    def decode_aff_obj(self, aff: isl.Aff) -> tuple[Aff, int]:
        """Decode an isl.Aff (over this encoding's set space) as ``(numerator, denominator)``."""
        den_val = aff.get_denominator_val()

        def scaled(v: isl.Val) -> int:   # coefficients may be rational: scale them first
            return int(v.mul(den_val).to_python())

        num = Aff.num(scaled(aff.get_constant_val()))
        for k in range(aff.dim(isl.dim_type.in_)):
            c = scaled(aff.get_coefficient_val(isl.dim_type.in_, k))
            if c:
                num = num + Aff.var(self.atom_of_dim(k), c)
        for k in range(aff.dim(isl.dim_type.param)):
            c = scaled(aff.get_coefficient_val(isl.dim_type.param, k))
            if c:
                num = num + Aff.var(self.param_name(_dim_name(aff, k)), c)
        for k in range(aff.dim(isl.dim_type.div)):
            c = scaled(aff.get_coefficient_val(isl.dim_type.div, k))
            if c:
                inner, d = self.decode_aff_obj(aff.get_div(k))
                num = num + Aff.var(FloorDiv(inner, d), c)
        return num, int(den_val.to_python())

    def param_name(self, safe: str) -> str:
        for p in self.params:
            if _safe(p) == safe:
                return p
        return safe

    def decode_basic_set(self, bset: isl.BasicSet) -> list[Constraint]:
        divs = []
        for k in range(bset.dim(isl.dim_type.div)):
            num, den = self.decode_aff_obj(bset.get_div(k))
            divs.append(FloorDiv(num, den))
        out: list[Constraint] = []
        for c in bset.get_constraints():
            aff = Aff.num(int(c.get_constant_val().to_python()))
            for k in range(len(self.dims)):
                v = int(c.get_coefficient_val(isl.dim_type.set, k).to_python())
                if v:
                    aff = aff + Aff.var(self.atom_of_dim(k), v)
            for k in range(bset.dim(isl.dim_type.param)):
                v = int(c.get_coefficient_val(isl.dim_type.param, k).to_python())
                if v:
                    name = self.param_name(_dim_name(bset, k))
                    aff = aff + Aff.var(name, v)
            for k, div in enumerate(divs):
                v = int(c.get_coefficient_val(isl.dim_type.div, k).to_python())
                if v:
                    aff = aff + Aff.var(div, v)
            out.append(Constraint.make(aff, c.is_equality()))
        return out

    def decode_set(self, s: isl.Set) -> list[list[Constraint]]:
        return [self.decode_basic_set(b) for b in s.get_basic_sets()]


def _arg_names(call: UFCall) -> set[str]:
    out: set[str] = set()
    for a in call.args:
        out |= a.names()
    return out


def encode(base_dims: Sequence[str],
           constraints: Sequence[Constraint] | Sequence[Sequence[Constraint]],
           extra_calls: Sequence[UFCall] = (), params: Sequence[str] | None = None) -> Encoding:
    """Build the encoding for ``base_dims`` and every UF call occurring in ``constraints``.

    ``constraints`` is a conjunction or a list of disjuncts.  Names that are neither
    base dimensions nor call dimensions become isl parameters.
    """
    flat: list[Constraint] = []
    for item in constraints:
        flat.extend([item] if isinstance(item, Constraint) else item)
    calls: set[UFCall] = set(extra_calls)
    names: set[str] = set()
    for c in flat:
        calls |= c.calls()
        names |= c.names()
    for call in list(calls):
        names |= _arg_names(call)
    # nested calls: inner ones first; stable order by text
    ordered = sorted(calls, key=lambda c: (len(str(c)), str(c)))
    enc = Encoding(dims=list(base_dims))
    base = set(base_dims)
    pending = list(ordered)
    while pending:
        progressed = False
        for call in list(pending):
            inner = set(_calls_in_args(call))
            if any(ic not in enc.var_of for ic in inner):
                continue
            deps = [_pos for _pos, d in enumerate(enc.dims)
                    if d in (_arg_names(call) & base) or
                    (d in enc.call_of and enc.call_of[d] in inner)]
            var = f"_uf{len(enc.call_of)}"
            enc.call_of[var] = call
            enc.var_of[call] = var
            enc.dims.insert(max(deps) + 1 if deps else 0, var)
            pending.remove(call)
            progressed = True
        assert progressed, "cyclic UF nesting"
    if params is None:
        params = sorted(names - base)
    enc.params = list(params)
    return enc


def _calls_in_args(call: UFCall) -> set[UFCall]:
    out: set[UFCall] = set()
    for a in call.args:
        out |= a.calls()
    return out
