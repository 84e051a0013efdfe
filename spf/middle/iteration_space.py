"""The combined iteration space of a kernel (paper Sec. 4).

For each tensor X with layout relation R_X (p -> g) and access map A_X (I -> g),
Q_X = A_X^-1 ∘ R_X maps layout indices to the logical iteration space.  Products intersect
the Q_X with the layout indices kept as set variables:
``IS = {[p(A), p(B), ..., I] : Q_A ∧ Q_B ∧ ... ∧ IS_dense}``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..errors import SpecError
from ..front.kernel_spec import Expr
from ..front.layout import Layout
from ..front.properties import Range
from ..front.relation import Relation
from ..front.terms import Aff, Constraint, UFCall


@dataclass(frozen=True)
class TensorUse:
    """One tensor of a kernel: its layout and how its names appear in the iteration space."""

    name: str
    layout: Layout
    indices: tuple[str, ...]        # logical index per dimension
    is_output: bool
    shares: str | None = None       # a tensor whose same-named fields this one uses
    shared: frozenset[str] = frozenset()
    aliases: tuple[tuple[str, str], ...] = ()   # layout index -> the source's variable
    sized: bool = False             # read only for its extents (:attr:`Expr.sized`)

    def var(self, layout_index: str) -> str:
        """Name of a layout index in the iteration space (``A_pi``); a position of a shared
        index array is the source tensor's variable."""
        for p, v in self.aliases:
            if p == layout_index:
                return v
        return f"{self.name}_{layout_index}"

    @property
    def vars(self) -> tuple[str, ...]:
        """This tensor's own layout-index variables (not those it shares)."""
        if self.sized:
            return ()
        own = {p for p, _ in self.aliases}
        return tuple(self.var(p) for p in self.layout.indices if p not in own)

    def global_call(self, call: UFCall) -> UFCall:
        """A read of this tensor's index array (``colIdx(p)``) as the space names it
        (``A.colIdx(p)``); other calls as they are."""
        if call.name in self.layout.index_arrays:
            return UFCall(self.symbol(call.name), call.args)
        return call

    def symbol(self, field: str) -> str:
        """Name of a scalar field or index array in the iteration space (``A.numRows``);
        a shared field is named after the tensor that owns it."""
        return f"{self.shares if field in self.shared else self.name}.{field}"

    @property
    def is_sparse(self) -> bool:
        """A tensor whose layout reads index arrays."""
        return bool(self.layout.relation.calls())

    def relation(self) -> Relation:
        """The layout relation with this tensor's names (``A.rowPtr(A_pi)``)."""
        lay = self.layout
        mapping = {p: self.var(p) for p in lay.indices}
        mapping.update({f: self.symbol(f) for f in lay.fields})
        return lay.relation.rename(mapping)

    def extents(self) -> list[Aff]:
        mapping = {f: Aff.var(self.symbol(f)) for f in self.layout.scalar_fields}
        return [s.substitute(mapping) for s in self.layout.shape]

    def owner_of(self, call: UFCall) -> bool:
        return call.name.startswith(self.name + ".")


@dataclass
class IterationSpace:
    """The iteration space of one statement: variables and a conjunction of constraints."""

    expr: Expr
    uses: list[TensorUse]
    indices: list[str]
    constraints: list[Constraint]
    facts: list[Constraint]                # known to hold for valid tensors (properties, extents)
    extent: dict[str, Aff]                 # logical index -> its extent (canonical)
    tiles: dict[str, tuple[str, int]] = field(default_factory=dict)  # tile var -> (var, size)
    assembled: TensorUse | None = None     # a sparse output built by the kernel (not in uses)

    @property
    def variables(self) -> list[str]:
        out: list[str] = []
        for use in self.uses:
            out.extend(use.vars)
        out += self.indices
        for t, (var, _) in self.tiles.items():   # a tile variable comes right before its variable
            out.insert(out.index(var), t)
        return out

    def tiled(self, sizes: dict[str, int]) -> IterationSpace:
        """Tiling as a relation (paper Fig. 1(d)): each ``var`` gets a tile variable
        ``var_tile`` with ``size*var_tile <= var < size*var_tile + size``."""
        tiles = dict(self.tiles)
        constraints = list(self.constraints)
        for var, size in sizes.items():
            t = f"{var}_tile"
            tiles[t] = (var, size)
            constraints.append(Constraint.ge(Aff.var(var), Aff.var(t, size)))
            constraints.append(Constraint.ge(Aff.var(t, size) + (size - 1), Aff.var(var)))
        return replace(self, constraints=constraints, tiles=tiles)

    def use(self, name: str) -> TensorUse:
        for u in self.uses:
            if u.name == name:
                return u
        raise KeyError(name)

    def relation(self) -> Relation:
        return Relation(self.variables, None, [self.constraints])

    @property
    def all_constraints(self) -> list[Constraint]:
        return self.constraints + self.facts

    def __str__(self) -> str:
        return str(self.relation().simplify())


def shared_fields(out: Layout, source: Layout) -> frozenset[str]:
    """Fields of ``out`` that a tensor in ``source`` provides (same name, kind and extents)."""
    same = set()
    for name, spec in out.fields.items():
        other = source.fields.get(name)
        if other is not None and spec.ctype == other.ctype and spec.dims == other.dims \
                and name != out.value_array:
            same.add(name)
    return frozenset(same)


def build(expr: Expr, layouts: Mapping[str, Layout], bounds: Sequence[Constraint] = (),
          share: tuple[str, str] | None = None, assemble: bool = False) -> IterationSpace:
    """Compose each tensor's layout with its access map and intersect (products).

    ``share = (output, source)``: the output uses the source's index arrays and scalars
    of the same names, and the positions of those arrays (known output sparsity).
    ``assemble``: the output's index arrays are built by the kernel, so its relation does not
    constrain the iteration space (it is kept as ``assembled``)."""
    indices = expr.indices
    uses = _uses(expr, layouts, share)
    # inputs first (their order is the default loop order), then the output
    assembled = next((u for u in uses if u.is_output), None) if assemble else None
    pattern = next((u for u in uses if u.is_output and u.layout.implicit is not None), None)
    if pattern is not None and not assemble:
        raise SpecError(f"output {pattern.name!r} is in {pattern.layout.name}, a pattern layout "
                        f"(every entry holds its value {pattern.layout.value}; it stores no "
                        "value array): a kernel writes one only by assembling it (an output "
                        "without share=)", expr.source)
    uses = [u for u in uses if not u.is_output] + \
        [u for u in uses if u.is_output and not assemble]
    names = {v for u in uses for v in u.vars}
    clash = names & set(indices)
    if clash:
        raise SpecError(f"index name(s) {sorted(clash)} clash with layout index names", expr.source)
    constraints = [c for use in uses if not use.sized for c in _composed(use, indices)]
    # an affine access index (``I(i+k, j)``) is one more variable, equal to its expression:
    # the access map becomes affine, and the scanner solves for whichever side it iterates
    constraints += [Constraint.eq(Aff.var(name), aff) for name, aff in expr.derived.items()
                    if name in indices]
    free = set(expr.free_extents)
    extent, substitution, facts = _extents(uses, free, set(expr.derived))
    constraints += _ranges(expr, uses, assembled, extent)
    if assembled is not None:
        constraints += _output_bounds(assembled, extent, free)
    # No "0 <= idx < extent" facts for the logical indices: they hold on the points of each
    # layout relation, not on the points where the scanner tests that relation's guards
    # (e.g. a padding test ``0 <= colIdx(pi, pk)`` must not be pruned by ``0 <= j``).
    constraints.extend(bounds)
    for c in bounds:
        bad = c.names() - set(indices)
        if bad or c.calls():
            raise SpecError(f"bound {c} may only use the kernel's indices {indices}", expr.source)
    facts += _range_facts(uses, constraints)
    if substitution:
        constraints = [c.substitute(substitution) for c in constraints]
        facts = [c.substitute(substitution) for c in facts]
    constraints = list(dict.fromkeys(c for c in constraints if not c.is_trivial))
    facts = [c for c in dict.fromkeys(facts) if not c.is_trivial]   # a fact may be a guard:
    # it holds for the data, so the guard it equals can be dropped
    return IterationSpace(expr, uses, indices, constraints, facts, extent, assembled=assembled)


def _uses(expr: Expr, layouts: Mapping[str, Layout],
          share: tuple[str, str] | None) -> list[TensorUse]:
    """One use per tensor access with indices (output first)."""
    uses: list[TensorUse] = []
    for acc, is_out in [(expr.output, True)] + [(f, False) for f in expr.factors]:
        if not acc.indices:
            continue  # scalars have no layout
        lay = layouts[acc.tensor]
        if lay.order != len(acc.indices):
            raise SpecError(f"tensor {acc.tensor!r} is used with {len(acc.indices)} indices but "
                            f"its layout {lay.name} has {lay.order} dimensions",
                            expr.source, acc.line, acc.column)
        if is_out and share is not None:
            source = layouts[share[1]]
            shared = shared_fields(lay, source)
            aliases = set()     # positions of shared index arrays are the source's positions
            for call in lay.relation.calls():
                if call.name in shared:
                    for a in call.args:
                        aliases |= a.names() & set(lay.indices) & set(source.indices)
            uses.append(TensorUse(acc.tensor, lay, acc.indices, is_out, share[1], shared,
                                  tuple((p, f"{share[1]}_{p}") for p in sorted(aliases))))
        else:
            uses.append(TensorUse(acc.tensor, lay, acc.indices, is_out))
    uses += [TensorUse(a.tensor, layouts[a.tensor], a.indices, False, sized=True)
             for a in expr.sized]
    return uses


def _composed(use: TensorUse, indices: list[str]) -> list[Constraint]:
    """The use's layout relation composed with its access: constraints over layout indices
    and the kernel's indices."""
    access = Relation(indices, [f"_g{k}" for k in range(len(use.indices))],
                      [[Constraint.eq(Aff.var(f"_g{k}"), Aff.var(i))
                        for k, i in enumerate(use.indices)]])
    flat = access.inverse().compose(use.relation()).flatten()  # p -> I
    if len(flat.disjuncts) != 1:
        raise SpecError(f"layout {use.layout.name}: disjunctive relations are not supported "
                        "in products yet", use.layout.source)
    if flat.exists:
        raise SpecError(f"layout {use.layout.name}: logical coordinates of tensor "
                        f"{use.name} are not defined by equalities of its layout indices",
                        use.layout.source)
    return list(flat.disjuncts[0])


def _ranges(expr: Expr, uses: list[TensorUse], assembled: TensorUse | None,
            extent: dict[str, Aff]) -> list[Constraint]:
    """``0 <= i < extent`` for each index the statement gives its range (a term of a sum
    using ``i`` without reading it plainly, :meth:`Expr.ranges_of`): a tensor's extent, or
    the output's (bounding a dense output's points already; an assembled output's extents
    are the call's, ``extent`` keeps those)."""
    out: list[Constraint] = []
    for idx, tensor, dim in expr.ranges:
        if tensor == expr.output.tensor and assembled is None:
            continue
        use = assembled if tensor == expr.output.tensor and assembled is not None \
            else next(u for u in uses if u.name == tensor)
        ext = use.extents()[dim]
        if use is not assembled:
            extent.setdefault(idx, ext)
        out += [Constraint.ge(Aff.var(idx), Aff.num(0)), Constraint.ge(ext - 1, Aff.var(idx))]
    return out


def _output_bounds(out: TensorUse, extent: dict[str, Aff], free: set[str]) -> list[Constraint]:
    """``0 <= i`` for each index of an assembled output that the inputs read only inside
    affine access indices (``O(i) = I(i+k) * F(k)``: no input bounds ``i``); its extent is
    the output's, which the call computes as the largest ``i`` any point reaches (so
    ``i < extent`` holds already, and the counting passes, which see no output, need not
    read it); ``extent`` gets it, as it gets the output's extent of an index in ``free``
    (some term of the sum reads it only inside index arithmetic)."""
    out_bounds = []
    for idx, ext in zip(out.indices, out.extents()):
        if idx not in extent:
            out_bounds.append(Constraint.ge(Aff.var(idx), Aff.num(0)))
        if idx not in extent or idx in free:
            extent[idx] = ext
    return out_bounds


def _extents(uses: list[TensorUse], free: set[str], derived: set[str]
             ) -> tuple[dict[str, Aff], dict[str, Aff], list[Constraint]]:
    """Logical extents: the first tensor using an index defines it; others must agree (a
    scalar field equal to it is substituted, anything else becomes a fact).  An output index
    in ``free`` (some term of the sum reads it only inside index arithmetic) has the output's
    extent, which may differ from an input's, and an affine access index in ``derived``
    (``i+j-1`` in ``B(i+j-1, k) * A(i+j-1, j)``) need not have one extent in every tensor
    reading it (a call compares only the extents of indices read plainly,
    :mod:`spf.runtime.shapes`): nothing is substituted, each tensor's relation bounds it."""
    extent: dict[str, Aff] = {}
    substitution: dict[str, Aff] = {}
    facts: list[Constraint] = []
    for use in uses:
        if use.sized:
            continue            # its extents bound only the indices it gives a range
        for idx, ext in zip(use.indices, use.extents()):
            if idx in free or idx in derived:
                if use.is_output or idx not in extent:
                    extent[idx] = ext
                continue
            ext = ext.substitute(substitution)
            if idx not in extent:
                extent[idx] = ext
                continue
            if ext == extent[idx]:
                continue
            single = ext.terms[0][0] if len(ext.terms) == 1 and ext.const == 0 \
                and ext.terms[0][1] == 1 else None
            if isinstance(single, str) and single not in substitution:
                substitution[single] = extent[idx]
            else:
                facts.append(Constraint.eq(ext, extent[idx]))
    return extent, substitution, facts


def _range_facts(uses: list[TensorUse], constraints: list[Constraint]) -> list[Constraint]:
    """The range facts of every index-array read in ``constraints``."""
    calls: set[UFCall] = set()
    for c in constraints:
        calls |= c.calls()
    facts = []
    for call in sorted(calls, key=str):
        for use in uses:
            if use.owner_of(call):
                local = UFCall(call.name[len(use.name) + 1:], call.args)
                mapping = {f: Aff.var(use.symbol(f)) for f in use.layout.scalar_fields}
                for fact in [*use.layout.range_constraints(local), *_relative(use, local)]:
                    facts.append(Constraint.make(
                        fact.aff.substitute(mapping).map_calls(use.global_call), fact.is_eq))
    return facts


def _relative(use: TensorUse, local: UFCall) -> list[Constraint]:
    """The bounds of a range naming layout indices (``colIdx(pk) >= pi``), for a read the
    use's relation makes with those indices (``colIdx(A_pk) >= A_pi``): they hold there."""
    out: list[Constraint] = []
    indices = {p: Aff.var(use.var(p)) for p in use.layout.indices}
    for prop in use.layout.properties:
        if not isinstance(prop, Range) or not prop.relative or prop.uf != local.name:
            continue
        for call in use.layout.relation.calls():
            if call.name == local.name and call.map_args(lambda a: a.substitute(indices)) \
                    == local:
                out += [c.substitute(indices) for c in prop.bounds_of(local)]
    return out
