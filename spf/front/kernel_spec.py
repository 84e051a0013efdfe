"""Kernel specs: tensor index notation (``y(i) = A(i,j) * x(j)``) and kernel spec files.

A kernel spec file is TOML::

    expr = "y(i) = A(i,j) * x(j)"
    bounds = "j <= i"          # optional dense iteration-space bounds (Sec. 4)
    order = ["A.pi", "A.pj"]   # optional loop order
    [layouts]
    A = "CSR"
    [params.A]                 # optional layout parameters per tensor
    B = 4
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .rhs import (
    Apply,
    Call,
    Coefficient,
    Node,
    accesses,
    children,
    index_guards,
    index_refs,
    number_text,
    parse_rhs,
    renamed,
    sum_of_products,
    text,
)
from .rhs import Ref as RefNode
from .syntax import Parser, parse_constraints
from .terms import Aff, Constraint
from .toml_source import TomlSource, is_file

Range = tuple[str, str, int]    # (index, tensor, dimension): the index ranges over its extent

# offsets, strides and what index arithmetic reaches stay under this: generated C computes
# them in int64, with room to combine a few (:mod:`spf.runtime.shapes` checks each call)
ARITHMETIC_LIMIT = 2 ** 62


@dataclass(frozen=True)
class Access:
    """``tensor(indices...)``; ``indices`` is empty for a scalar.  A ``pattern`` access (a
    structural mask) restricts the iteration to the tensor's entries; its values are not read."""

    tensor: str
    indices: tuple[str, ...]
    line: int = 0
    column: int = 0
    pattern: bool = False
    value: Node | None = None     # the expression of its value (``abs(A(i,j))``), if any
    in_value: bool = False        # read only by the preceding factor's expression
    arithmetic: tuple[tuple[str, Aff], ...] = ()    # (derived index, its affine expression)
    floor: tuple[Node, ...] = ()    # sums whose type the product takes at least (rhs.Factor)
    subtracted: bool = False        # the product's sign is the sum's, in its type (rhs.Term)

    def __str__(self) -> str:
        if self.value is not None:
            return text(self.value)
        exprs = dict(self.arithmetic)
        shown = [str(exprs.get(i, i)).replace(" ", "") for i in self.indices]
        return f"{self.tensor}({','.join(shown)})" if self.indices else self.tensor

    def renamed(self, names: Mapping[str, str]) -> Access:
        """This access with the tensors and indices in ``names`` renamed (in its value's
        expression too)."""
        value = _renamed_node(self.value, names) if self.value is not None else None
        return replace(self, tensor=names.get(self.tensor, self.tensor),
                       indices=tuple(names.get(i, i) for i in self.indices), value=value,
                       floor=tuple(_renamed_node(n, names) for n in self.floor),
                       arithmetic=tuple((d, a.rename(names)) for d, a in self.arithmetic))

    @property
    def index_names(self) -> set[str]:
        """The kernel indices this access reads: its plain indices and the names inside its
        affine ones (``I(i+k, j)``: i, k, j)."""
        exprs = dict(self.arithmetic)
        return {n for i in self.indices
                for n in (exprs[i].names() if i in exprs else (i,))}


@dataclass(frozen=True)
class Expr:
    """A parsed statement ``output (=|+=) term (+|-) term ...``, each term a product of
    factors.  For a single product, ``factors`` is that product; for a sum, ``factors``
    lists each input once and :meth:`products` gives one product statement per term."""

    output: Access
    factors: tuple[Access, ...]
    accumulate: bool
    text: str
    source: str = "<string>"
    coefficient: Coefficient = 1                       # the product is multiplied by it
    terms: tuple[tuple[Coefficient, tuple[Access, ...]], ...] = ()  # (coefficient, factors)
    aliases: tuple[tuple[str, str], ...] = ()   # (alias, tensor): a tensor read again
                                                # in one product (``A(i,j) * A(i,j)``)
    sized_by_output: tuple[str, ...] = ()       # a term of a sum: the sum's
                                                # :attr:`free_extents`
    rhs: Node | None = field(default=None, compare=False, repr=False)   # as written
                                                # (the statement's; a term's is None)
    ranges: tuple[Range, ...] = ()      # a term of a sum: the statement's range of each index
                                        # it uses without reading it plainly (:meth:`products`)
    sized: tuple[Access, ...] = ()      # a term of a sum: tensors of other terms whose
                                        # extents give its ranges (never iterated)

    def renamed(self, names: Mapping[str, str]) -> Expr:
        """The statement with the tensors, scalars and indices in ``names`` renamed (the
        identifiers generated C gives them); its text stays as written."""
        if not names:
            return self
        return replace(self, output=self.output.renamed(names),
                       factors=tuple(a.renamed(names) for a in self.factors),
                       terms=tuple((c, tuple(a.renamed(names) for a in fs))
                                   for c, fs in self.terms),
                       aliases=tuple((a, names.get(t, t)) for a, t in self.aliases),
                       ranges=tuple((names.get(i, i), names.get(t, t), d)
                                    for i, t, d in self.ranges),
                       sized=tuple(a.renamed(names) for a in self.sized))

    def original(self, name: str) -> str:
        """The tensor an operand name reads (itself, or the tensor an alias reads again)."""
        return dict(self.aliases).get(name, name)

    @property
    def is_sum(self) -> bool:
        return len(self.terms) > 1

    def products(self) -> list[Expr]:
        """One product statement per term (the statement itself for a product), each with
        the statement's range of the indices it uses without reading them plainly
        (:meth:`ranges_of`)."""
        if not self.is_sum:
            return [self]
        free = self.free_extents
        out = []
        for coef, factors in self.terms:
            ranges = self.ranges_of(factors)
            present = {a.tensor for a in factors} | {self.output.tensor}
            sized = tuple(dict.fromkeys(
                self.plain_access(t) for _, t, _ in ranges if t not in present))
            out.append(Expr(self.output, factors, self.accumulate, self.text, self.source,
                            coef, aliases=self.aliases, sized_by_output=free, ranges=ranges,
                            sized=sized))
        return out

    def ranges_of(self, factors: tuple[Access, ...]) -> tuple[Range, ...]:
        """One range per index for the whole statement: each index a term (its ``factors``)
        uses only inside index arithmetic or as a value (``x(i+1)`` in ``s = x(i+1) -
        x(i)``; ``k`` in ``F(k)*B(i,j) + B(i,j)*k``) ranges as the statement says, given as
        ``(index, tensor, dimension)``: a reduction index over a tensor reading it plainly
        (the term's own when it reads that tensor), an output index over the output's extent
        (which a term reaching further widens, :mod:`spf.runtime.shapes`)."""
        plain = {i for a in factors for i in a.indices if i not in dict(a.arithmetic)}
        used = {n for a in factors for _, aff in a.arithmetic for n in aff.names()}
        used |= {r.name for a in factors if a.value is not None
                 for r in index_refs(a.value)} & set(self.indices)
        present = {self.original(a.tensor): a.tensor for a in reversed(factors)}
        out: list[Range] = []
        for i in [i for i in self.indices if i in used - plain]:
            if i in self.output.indices:
                out.append((i, self.output.tensor, self.output.indices.index(i)))
                continue
            slots = self.plain_slots(i)
            if slots:
                mine = [(present[self.original(t)], d) for t, d in slots
                        if self.original(t) in present]
                out.append((i, *(mine or slots)[0]))
        return tuple(out)

    def ranges_text(self, assembled: bool) -> str:
        """What :attr:`ranges` say, for a header or a report ('' if nothing): those over the
        output only when it is ``assembled`` (a dense output's own relation bounds them)."""
        shown = [f"{i} over {t}'s dimension {d + 1}" for i, t, d in self.ranges
                 if assembled or t != self.output.tensor]
        return "; ".join(shown) + (" (one range per index for the whole statement: this "
                                   "term uses it only inside index arithmetic or as a "
                                   "value)") if shown else ""

    def rhs_text(self) -> str:
        """The right-hand side as :meth:`__str__` prints it."""
        return str(self).split("= ", 1)[1]

    def plain_slots(self, index: str) -> list[tuple[str, int]]:
        """Every (operand, dimension) that reads ``index`` plainly, in any term."""
        terms = [f for _, f in self.terms] if self.is_sum else [self.factors]
        return list(dict.fromkeys((a.tensor, d) for factors in terms for a in factors
                                  for d, i in enumerate(a.indices) if i == index))

    def plain_access(self, operand: str) -> Access:
        """The first access of ``operand`` in the statement."""
        terms = [f for _, f in self.terms] if self.is_sum else [self.factors]
        return next(a for factors in terms for a in factors if a.tensor == operand)

    def reaches_beyond(self, k: int, index: str) -> bool:
        """Whether term ``k`` may reach points of the output index ``index`` beyond the
        extent of the tensors that read it plainly: it uses ``index`` only inside index
        arithmetic, and does not stay on the coordinates of other terms (some tensor it
        reads is not read with every index plain by another term reading other accesses:
        ``x(i+1)`` in ``x(i) + x(i+1)`` stays on x's; a term without ``index`` is the same
        along it: it fills the extent the others set)."""
        terms = [f for _, f in self.terms] if self.is_sum else [self.factors]
        factors = terms[k]
        if any(index in a.indices for a in factors) or not any(
                index in aff.names() for a in factors for _, aff in a.arithmetic):
            return False
        mine = {self.original(a.tensor) for a in factors if a.indices}
        reads = self._reads(factors)
        plain = {self.original(a.tensor) for j, fs in enumerate(terms)
                 if j != k and self._reads(fs) != reads    # other coordinates than its own
                 for a in fs if a.indices and not a.arithmetic}
        return not mine <= plain

    def _reads(self, factors: Sequence[Access]) -> frozenset[tuple[str, tuple[str, ...]]]:
        """The accesses of a term as written (tensor, index expressions)."""
        return frozenset((self.original(a.tensor), tuple(
            str(dict(a.arithmetic).get(n, n)) for n in a.indices)) for a in factors)

    @property
    def free_extents(self) -> tuple[str, ...]:
        """The output indices some term reads only inside index arithmetic (``C(i) = A(i) +
        B(i-10)``: the second term): the output's own extent bounds them, which a passed
        output may choose (:mod:`spf.runtime.shapes` computes the default)."""
        terms = [f for _, f in self.terms] if self.is_sum else [self.factors]
        own = [i for i in self.output.indices if any(
            not any(i in a.indices for a in factors)
            and any(i in aff.names() for a in factors for _, aff in a.arithmetic)
            for factors in terms)]
        return tuple(dict.fromkeys([*self.sized_by_output, *own]))

    @property
    def tensors(self) -> list[str]:
        return [self.output.tensor] + [f.tensor for f in self.factors]

    @property
    def written_tensors(self) -> list[str]:
        """The tensors as the statement names them (a tensor read again once, not by its
        :func:`alias_name`)."""
        return list(dict.fromkeys(self.original(t) for t in self.tensors))

    def as_written(self, message: str) -> str:
        """``message`` with each name spf gave a tensor read again (:func:`alias_name`, in
        this statement or in one derived from it) written as the tensor's own."""
        for tensor in self.written_tensors:
            message = re.sub(rf"\bspf_{re.escape(tensor)}_\d+\b", tensor, message)
        return message

    @property
    def mask(self) -> str | None:
        """The structural mask's tensor (see :meth:`with_mask`), if any."""
        return next((f.tensor for f in self.factors if f.pattern), None)

    def with_mask(self, tensor: str) -> Expr:
        """The statement restricted to the entries of ``tensor`` (a structural mask with the
        output's indices): one more operand of every product, intersected like the others,
        whose values are not read."""
        out = self.output
        if not out.indices:
            raise SpecError(f"mask {tensor!r}: the output {out.tensor!r} is a scalar; a mask "
                            "has the output's indices", self.source, out.line, out.column)
        if tensor in self.tensors or tensor in self.indices:
            raise SpecError(f"mask {tensor!r} is already a name in {self.text!r}; give the "
                            "mask its own name (the same array may be passed for both)",
                            self.source, out.line, out.column)
        mask = Access(tensor, out.indices, out.line, out.column, pattern=True)
        terms = tuple((coef, factors + (mask,)) for coef, factors in self.terms)
        return Expr(out, self.factors + (mask,), self.accumulate, self.text, self.source,
                    self.coefficient, terms, self.aliases, rhs=self.rhs)

    def with_old_output(self) -> Expr:
        """``C(i,j) += rhs`` as ``C(i,j) = C_old(i,j) + rhs``: the output's old entries read as
        one more term (an alias of the output, :func:`alias_name`), for an output the kernel
        assembles (a new tensor: the old one stays as it was)."""
        out = self.output
        alias = alias_name(out.tensor, 2)
        old = Access(alias, out.indices, out.line, out.column)
        terms = self.terms if self.is_sum else ((self.coefficient, self.factors),)
        return Expr(out, (old, *self.factors), False, self.text, self.source, 1,
                    ((1, (old,)), *terms), self.aliases + ((alias, out.tensor),), rhs=self.rhs)

    @property
    def indices(self) -> list[str]:
        """Logical indices in order of first appearance (output first): the kernel's and
        each affine access index's derived name (after the names it is made of)."""
        seen: dict[str, None] = {}
        for acc in self._accesses():
            exprs = dict(acc.arithmetic)
            for i in acc.indices:
                if i in exprs:
                    seen.update(dict.fromkeys(sorted(exprs[i].names())))
                seen.setdefault(i, None)
        seen.update(dict.fromkeys(i for i, _, _ in self.ranges))   # a value's (``B(i,j)*k``)
        return list(seen)

    @property
    def derived(self) -> dict[str, Aff]:
        """Each affine access index's name and expression (``spf_i_p_k``: ``i + k``)."""
        return {n: a for acc in self._accesses() for n, a in acc.arithmetic}

    @property
    def guards(self) -> tuple[Constraint, ...]:
        """The comparisons of indices multiplying this product statement (``A(i,j) * (i ==
        j)``, :func:`~.rhs.index_guards`), as constraints: where one is false the product is
        0, so its iteration space need not hold the point (nor an output store an entry);
        none for a sum (each of its :meth:`products` has its own)."""
        if self.is_sum:
            return ()
        indices = set(self.indices)
        return tuple(dict.fromkeys(g for a in self.factors
                                   for g in index_guards(a.value, indices)))

    def _accesses(self) -> list[Access]:
        """Every access: the output's, then each term's (a tensor of several terms once per
        term: ``x(i-1) + x(i+1)`` reads it at two derived indices)."""
        terms = [f for _, factors in self.terms for f in factors] if self.is_sum else []
        return [self.output, *self.factors, *terms]

    def broadcast(self) -> list[str]:
        """The output indices this product statement's factors do not use: its value is
        the same along them (``C(i,j) = A(i,j) + b(j)``: the term ``b(j)`` along i); an
        index used as a value (``i * x(j)``) is used."""
        used = {i for acc in self.factors for i in acc.index_names}
        used |= {r.name for acc in self.factors if acc.value is not None
                 for r in index_refs(acc.value)}
        return [i for i in self.output.indices if i not in used]

    @property
    def reduction_indices(self) -> list[str]:
        return [i for i in self.indices if i not in self.output.indices]

    def __str__(self) -> str:
        op = "+=" if self.accumulate else "="
        terms = self.terms if self.is_sum else ((self.coefficient, self.factors),)
        rhs = ""
        for n, (coef, factors) in enumerate(terms):
            size = -coef if coef < 0 else coef
            shown = [str(f) for f in factors if not (f.pattern or f.in_value)]
            product = " * ".join([number_text(size)] * bool(size != 1 or not shown) + shown)
            rhs += (f" {'-' if coef < 0 else '+'} " if n else ("-" if coef < 0 else "")) + product
        mask = f"<{self.mask}>" if self.mask else ""
        return f"{self.output}{mask} {op} {rhs}"


def _access(p: Parser) -> Access:
    tok = p.name("a tensor name")
    if "." in tok.text or "'" in tok.text:
        raise p.error(f"tensor name {tok.text!r} must be an identifier", tok)
    indices: list[str] = []
    if p.accept("("):
        if not p.peek(")"):
            while True:
                idx = p.name("an index name")
                if "." in idx.text or "'" in idx.text:
                    raise p.error(f"index name {idx.text!r} must be an identifier", idx)
                indices.append(idx.text)
                if not p.accept(","):
                    break
        p.expect(")", "',' or ')' closing the index list")
    return Access(tok.text, tuple(indices), tok.line, tok.column)


def _terms(p: Parser, out: Access, source: str
           ) -> tuple[list[tuple[Coefficient, tuple[Access, ...]]], Node]:
    """The right-hand side as (coefficient, factors) per product (:mod:`.rhs`), and as
    written."""
    tree = parse_rhs(p)
    p.expect_end()
    indices = set(out.indices)

    for ref in accesses(tree):
        indices.update(ref.indices or ())
        indices.update(n for _, aff in ref.arithmetic for n in aff.names())
    terms = sum_of_products(tree, source, frozenset(indices), frozenset(out.indices))
    for ref in (f.ref for t in terms for f in t.factors):   # spf's own: spf_A_2 (A again)
        if ref.name.startswith("spf_"):
            raise SpecError(f"name {ref.name!r} is reserved (C keyword or spf_ prefix)",
                            source, ref.line, ref.column)
    return [(t.coefficient, _aliased(tuple(
        Access(f.ref.name, f.ref.indices or (), f.ref.line, f.ref.column, value=f.value,
               in_value=f.in_value, arithmetic=f.ref.arithmetic, floor=f.floor,
               subtracted=t.subtracted and k == 0) for k, f in enumerate(t.factors)), source))
            for t in terms], tree


def _renamed_node(n: Node, names: Mapping[str, str]) -> Node:
    """``n`` with the tensors and indices in ``names`` renamed (accesses, their indices and
    affine indices, bare names)."""
    if isinstance(n, RefNode):
        indices = None if n.indices is None else tuple(names.get(i, i) for i in n.indices)
        return replace(n, name=names.get(n.name, n.name), indices=indices,
                       arithmetic=tuple((d, a.rename(names)) for d, a in n.arithmetic))
    kids = tuple(_renamed_node(c, names) for c in children(n))
    if isinstance(n, Apply):
        return replace(n, operands=kids)
    if isinstance(n, Call):
        return replace(n, args=kids)
    return n


def alias_name(tensor: str, k: int) -> str:
    """The operand name of the ``k``-th read (from 2) of ``tensor`` in one product (the
    spf_ prefix is reserved: no user name clashes)."""
    return f"spf_{tensor}_{k}"


def _aliased(factors: tuple[Access, ...], source: str) -> tuple[Access, ...]:
    """``factors`` with a tensor read again in the product renamed (:func:`alias_name`)."""
    seen: dict[str, Access] = {}
    reads: dict[str, int] = {}
    out = []
    for acc in factors:
        first = seen.get(acc.tensor)
        if first is None:
            seen[acc.tensor] = acc
            out.append(acc)
            continue
        if len(first.indices) != len(acc.indices):
            raise SpecError(f"tensor {acc.tensor!r} is used with {len(first.indices)} and "
                            f"{len(acc.indices)} indices", source, acc.line, acc.column)
        reads[acc.tensor] = reads.get(acc.tensor, 1) + 1
        alias = alias_name(acc.tensor, reads[acc.tensor])
        out.append(replace(acc, tensor=alias))
        owner = next(k for k in range(len(out) - 1, -1, -1) if out[k].value is not None) \
            if acc.value is not None or acc.in_value else None
        tree = out[owner].value if owner is not None else None
        if owner is not None and tree is not None:     # the expression reads the new name
            out[owner] = replace(out[owner], value=_read_as(tree, acc, alias))
    return tuple(out)


def _read_as(tree: Node, acc: Access, alias: str) -> Node:
    """``tree`` reading the access ``acc`` as operand ``alias``."""
    def rename(r: RefNode) -> RefNode:
        same = r.name == acc.tensor and r.indices == acc.indices
        return RefNode(r.line, r.column, alias, r.indices) if same else r
    return renamed(tree, rename)


_PATH = re.compile(r"[\w.~-]*[./\\][\w./\\~-]*")    # a token with a '.' or a '/': a file name


def parse_expr(text: str, source: str = "<string>", line0: int = 1, col0: int = 1) -> Expr:
    """Parse tensor index notation; checks index counts and name clashes."""
    if not isinstance(text, str):
        raise SpecError(f"a kernel is a string in tensor index notation such as "
                        f"'y(i) = A(i,j) * x(j)', got {text!r}", source)
    if "=" not in text and _PATH.fullmatch(text.strip()):
        raise SpecError(f"{text.strip()!r} is neither tensor index notation (it has no '=') "
                        "nor an existing kernel file (.toml)", source)
    p = Parser(text, source, line0, col0)
    out = _access(p)
    if p.accept("+="):
        accumulate = True
    elif p.accept("="):
        accumulate = False
    else:
        found = "end of input" if p.tok.kind == "end" else repr(p.tok.text)
        raise p.error(f"expected '=' or '+=' after the output {out}, found {found}")
    terms, tree = _terms(p, out, source)
    aliases = tuple(sorted({(a.tensor, a.tensor[4:].rsplit("_", 1)[0])    # spf_<A>_<k>
                            for _, factors in terms for a in factors
                            if a.tensor.startswith("spf_")}))
    if len(terms) == 1:
        expr = Expr(out, terms[0][1], accumulate, text, source, terms[0][0], aliases=aliases,
                    rhs=tree)
        _check(expr, source)
        _check_output_indices(expr, source)
        return expr
    inputs: dict[str, Access] = {}
    for _, factors in terms:
        for acc in factors:
            first = inputs.setdefault(acc.tensor, acc)
            if len(first.indices) != len(acc.indices):
                raise SpecError(f"tensor {acc.tensor!r} is used with {len(first.indices)} and "
                                f"{len(acc.indices)} indices", source, acc.line, acc.column)
    expr = Expr(out, tuple(inputs.values()), accumulate, text, source, 1, tuple(terms),
                aliases, rhs=tree)
    for product in expr.products():
        _check(product, source)
        _check_value_indices(expr, product, source)
    _check_output_indices(expr, source)
    clash = set(inputs) & set(expr.indices)
    if clash:
        raise SpecError(f"name(s) {sorted(clash)} used both as tensor and as index", source,
                        out.line, out.column)
    return expr


def _check_value_indices(expr: Expr, product: Expr, source: str) -> None:
    """An index a term uses only as a value (``k`` in ``B(i,j)*k``) ranges as the rest of
    the statement says: some tensor must read it plainly (``F(k)``), else its range in that
    term is unknown."""
    read = {i for a in product.factors for i in a.index_names}
    ranged = {i for i, _, _ in product.ranges} | set(expr.output.indices)
    for r in (r for a in product.factors if a.value is not None for r in index_refs(a.value)):
        if r.name in expr.indices and r.name not in read | ranged:
            raise SpecError(f"index {r.name!r} is only a value in the term {product.rhs_text()} "
                            f"and no tensor of the statement reads it plainly (only inside "
                            f"index arithmetic), so its range there is unknown: read it "
                            f"plainly in some tensor ({r.name!r} then ranges over that "
                            "tensor's extent in every term)", source, r.line, r.column)


def _check_output_indices(expr: Expr, source: str) -> None:
    """Every output index is some input's (a term may leave it out: it is broadcast); every
    term's reads count (:attr:`Expr.factors` holds a tensor read again by another term once:
    ``v(i-1) + v(i+j)`` reads ``j`` in its second term)."""
    used = {i for product in expr.products() for acc in product.factors
            for i in acc.index_names}
    for i in expr.output.indices:
        if i not in used:
            raise SpecError(f"output index {i!r} does not appear on the right-hand side (its "
                            "extent would be unknown)", source, expr.output.line,
                            expr.output.column)


def _check(expr: Expr, source: str) -> None:
    def err(msg: str, acc: Access) -> SpecError:
        return SpecError(msg, source, acc.line, acc.column)

    seen: dict[str, Access] = {expr.output.tensor: expr.output}
    for acc in expr.factors:
        if acc.tensor == expr.output.tensor:
            raise err(f"the output {acc.tensor!r} also appears on the right-hand side", acc)
        if acc.tensor in seen:
            first = seen[acc.tensor]
            if len(first.indices) != len(acc.indices):
                raise err(f"tensor {acc.tensor!r} is used with {len(first.indices)} and "
                          f"{len(acc.indices)} indices", acc)
            raise err(f"tensor {acc.tensor!r} appears twice; give the second use its own name", acc)
        seen[acc.tensor] = acc
    if len(set(expr.output.indices)) != len(expr.output.indices):
        raise err("an output index appears twice", expr.output)

    clash = set(seen) & set(expr.indices)
    if clash:
        raise err(f"name(s) {sorted(clash)} used both as tensor and as index", expr.output)


FILE_KEYS = ("expr", "layouts", "params")    # a kernel file's keys besides kernel options


@dataclass
class KernelFile:
    """A kernel spec file's contents: the statement, layouts and their parameters, and the
    other keys as written (kernel options, checked by :mod:`spf.decide.options`, which
    :meth:`position` locates)."""

    expr: Expr
    file: TomlSource
    layouts: dict[str, str] = field(default_factory=dict)
    params: dict[str, dict[str, int]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.file.source

    def entry_position(self, table: str, key: str) -> tuple[int, int]:
        """The line and column of ``key`` in the table ``[table]`` (1, 1 when not found)."""
        return self.file.position(key, self.file.table_start(table), at_key=True)

    def position(self, key: str, at_key: bool = False) -> tuple[int, int]:
        """The line and column of ``key``'s value (of the key itself with ``at_key``); 1, 1
        when it is not found."""
        return self.file.position(key, at_key=at_key)


def load_kernel_file(path: str | Path) -> KernelFile:
    """Read a kernel spec file (TOML): ``expr``, ``[layouts]``, ``[params.T]``; every other
    key is a kernel option (checked where the kernel is built)."""
    file = TomlSource.read(path, "kernel file")
    table = file.parse()
    if not isinstance(table.get("expr"), str):
        raise file.error("missing 'expr' (tensor index notation, e.g. \"y(i) = A(i,j) * x(j)\")",
                         "expr")
    line, col = file.value_position(table["expr"])
    spec = KernelFile(parse_expr(table["expr"], file.source, line, col), file)
    layouts = table.get("layouts", {})
    if not isinstance(layouts, dict) or not all(isinstance(v, str) for v in layouts.values()):
        raise file.error("[layouts] must map tensor names to layout names or paths", "layouts")
    # layout paths in a kernel file are relative to the file
    for name, lay in layouts.items():
        rel = Path(path).parent / lay
        spec.layouts[name] = str(rel) if (lay.endswith(".toml") and is_file(rel)) else lay
    params = table.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
        raise file.error("[params.T] tables must map parameter names to integers", "params")
    spec.params = params
    spec.options = {k: v for k, v in table.items() if k not in FILE_KEYS}
    if isinstance(spec.options.get("bounds"), str):      # parsed here, where its text is
        bl, bc = file.value_position(spec.options["bounds"])
        spec.options["bounds"] = parse_bounds(spec.options["bounds"], file.source, bl, bc)
    return spec


def parse_bounds(text: str | list[Constraint], source: str = "<string>", line0: int = 1,
                 col0: int = 1) -> list[Constraint]:
    """Dense iteration-space bounds such as ``"j <= i"`` (affine in indices)."""
    if isinstance(text, list) and all(isinstance(c, Constraint) for c in text):
        return text
    if not isinstance(text, str):
        raise SpecError(f"bounds must be a string such as 'j <= i', got {text!r}", source)
    return parse_constraints(text, source, line0, col0)


def parse_order(order: Any, source: str = "<string>") -> list[str] | None:
    """A loop order: a list of loop variables or one comma-separated string (None: default)."""
    if order is None:
        return None
    if isinstance(order, str):
        return [v.strip() for v in order.split(",") if v.strip()]
    if isinstance(order, (list, tuple)) and all(isinstance(v, str) for v in order):
        return list(order)
    raise SpecError(f"order must be a list of loop variables such as ['A.pi', 'A.pj'] or a "
                    f"comma-separated string, got {order!r}", source)


def tensor_layouts(layouts: Any) -> dict[str, Any]:
    """The ``layouts`` argument: tensor names to layouts (checked when they load)."""
    if layouts is None:
        return {}
    if not isinstance(layouts, Mapping) or not all(isinstance(t, str) for t in layouts):
        raise SpecError(f"layouts must map tensor names to layout names, paths or Layout "
                        f"objects, got {layouts!r}")
    return dict(layouts)


def layout_params(params: Any) -> dict[str, dict[str, Any]]:
    """The ``params`` argument: tensor names to ``{parameter: value}`` (values are checked
    when the layout loads)."""
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(
            isinstance(t, str) and isinstance(p, Mapping) and all(isinstance(k, str) for k in p)
            for t, p in params.items()):
        raise SpecError(f"params must map tensor names to tables of layout parameters such as "
                        f"{{'A': {{'B': 4}}}}, got {params!r}")
    return {t: dict(p) for t, p in params.items()}
