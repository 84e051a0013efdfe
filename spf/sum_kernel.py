"""A sum kernel (paper Sec. 4, statement splitting): a sum, or a product reading an input
stored in a union layout, runs as one product kernel per term and per part, each adding
into the output; an assembled output is built from the terms' sorted runs, or merged level
by level from the operands when every term is one stored in the output's order (``runs``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from .assembly import AssemblyPlan, FunctionRole
from .assembly.lowering import stream_reads_extents
from .assembly.merge import Run, operand_run
from .assembly.merge_c import Leaf
from .assembly.rows import row_shaped
from .back.lower import kernel_code
from .back.source import emit_merged, emit_sum
from .concurrency import symbolic
from .decide.analysis import Analysis
from .decide.options import Table
from .decide.plan import Plan
from .decide.split import Term, split_terms
from .decide.synthesis import Decision
from .errors import SpecError
from .front.kernel_spec import Expr
from .front.rhs import operands
from .front.terms import Aff
from .kernel_setup import Setup, resolve
from .middle.iteration_space import IterationSpace, build
from .middle.scan import LoopNest
from .product_kernel import ProductKernel


@dataclass(frozen=True, eq=False)
class SumKernel:
    """The product kernels (``terms``) of ``setup``'s statement; the loop nest, space, order
    and assembly shown for the whole are the first term's."""

    setup: Setup
    terms: tuple[ProductKernel, ...]
    names: Mapping[str, str]    # a user's name to its identifier in the C, where they differ

    @classmethod
    @symbolic
    def build(cls, setup: Setup) -> SumKernel:
        """One product kernel per term of ``setup``'s statement and per part of its union
        inputs, the options' loop order given to the terms that have its variables."""
        _check_supported(setup)
        order = setup.options.order
        expr = _union_operands(setup.expr) if setup.union is not None else setup.expr
        split = split_terms(expr, setup.layouts, list(setup.options.bounds),
                            setup.options.find, accumulate=not setup.assembled)
        # a part of a union the bounds leave empty (SymCSR's mirrored half under i <= j)
        # contributes nothing: its term is left out
        names = Table(setup.c_names())      # one C identifier per name, in every term
        named = setup.in_c(names)
        kept = [t for t in split if not _term_space(t, setup, names).relation().is_empty()] \
            or split[:1]
        terms = tuple(_term_kernel(setup, k, term, names, named.options.order)
                      for k, term in enumerate(kept))
        if order:
            used = {v for t in terms for v in t.order}
            unknown = [v for v, c in zip(order, named.options.order or ())
                       if c.replace(".", "_", 1) not in used]
            if unknown:
                raise SpecError(f"order names {unknown}, which no term of the sum has as a "
                                "loop variable", setup.expr.source)
        return cls(setup, terms, names)

    @cached_property
    def named(self) -> Setup:
        """The setup in the identifiers of generated C (:meth:`Setup.in_c`)."""
        return self.setup.in_c(self.names)

    # the first term's, or every term's ---------------------------------------------------
    @property
    def name(self) -> str:
        return self.setup.name

    @property
    def space(self) -> IterationSpace:
        return self.terms[0].space

    @property
    def order(self) -> tuple[str, ...]:
        return self.terms[0].order

    @property
    def order_why(self) -> tuple[str, ...]:
        return ()

    @property
    def nest(self) -> LoopNest:
        return self.terms[0].nest

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return tuple(d for t in self.terms for d in t.decisions)

    @property
    def assembly(self) -> AssemblyPlan | None:
        """The first term's, ``ranged`` when any term's is (the sum's ``_bound`` then takes
        the output's extents)."""
        a = self.terms[0].assembly
        ranged = any(t.assembly is not None and t.assembly.ranged for t in self.terms)
        return replace(a, ranged=True) if a is not None and ranged else a

    @property
    def parallel_loop(self) -> str | None:
        """A term's parallel loop, or the output's rows when the merge runs in parallel."""
        if self.parallel_merge:
            assert self.assembly is not None
            return self.assembly.key[0]
        return next((t.parallel_loop for t in self.terms if t.parallel_loop), None)

    @property
    def parallel_merge(self) -> bool:
        """``parallel=True``, the operands are the runs and the output is row-shaped: the
        merge counts each row's union in parallel, prefix-sums, then merges the rows in
        parallel."""
        a = self.assembly
        return bool(self.setup.options.parallel and a is not None and self.runs
                    and row_shaped(a.storage))

    @property
    def plan(self) -> Plan:
        raise AttributeError("a sum has no single plan: each of its terms has one "
                             "(kernel.terms[k].plan)")

    @property
    def analysis(self) -> Analysis:
        """The first term's analysis."""
        return self.analyses[0]

    @property
    def analyses(self) -> tuple[Analysis, ...]:
        """One analysis per term; with the merge in parallel, each says so (the terms only
        count entries there)."""
        if not self.parallel_merge:
            return tuple(t.analysis for t in self.terms)
        rows = self.parallel_loop
        why = (f"the merge of the operands runs in parallel over {rows}: each row's union "
               "is counted, a prefix sum makes the pointer array, each row is merged at its "
               "segment (the terms' own loops only count entries)")
        return tuple(replace(t.analysis, parallel_loop=rows, parallel_reason=why,
                             notes=tuple(n for n in t.analysis.notes
                                         if not n.startswith("not parallelized")))
                     for t in self.terms)

    # derived on first use --------------------------------------------------------------
    @cached_property
    @symbolic
    def runs(self) -> tuple[Run, ...] | None:
        """For an assembled sum whose every term is an operand stored in the output's storage
        order (proved by Z3 per term): the runs the kernel merges level by level."""
        runs = []
        for t in self.terms:    # stop at the first term that is not a run: no more Z3 queries
            a = t.assembly
            run = None if a is None else operand_run(t.named.expr, t.named.layouts, t.nest,
                                                     t.decisions, a)
            if run is None:
                return None
            runs.append(run)
        return tuple(runs)

    @cached_property
    @symbolic
    def source(self) -> str:
        """The kernel function calling one static function per term before it (an assembled
        output: merging their runs), or the level-by-level merge of the operands."""
        header = self.setup.header()
        if self.runs and self.assembly is not None:
            return self._merged_source(header, self.runs, self.assembly)
        codes, args = [], []
        for k, t in enumerate(self.terms):
            header.append(f"Term {k} ({t.name}): {t.setup.expr}")
            header += ["  " + h for h in t.header_lines()]
            if ranges := t.setup.expr.ranges_text(t.assembly is not None):
                header.append(f"  Ranges: {ranges}")
            codes.append(kernel_code(t.plan, t.name, FunctionRole.STREAM))
            args.append(_arguments(t, stream=True))
        bounds = [kernel_code(t.plan.count_plan, f"{t.name}_bound", FunctionRole.BOUND)
                  for t in self.terms] if self.assembly else []
        named = self.named
        return emit_sum(self.name, header, named.expr, named.layouts, codes, args,
                        self.space, self.parallel_loop is not None, self.assembly, bounds,
                        named.options.semiring, named.typing,
                        [_bound_arguments(t) for t in self.terms])

    def _merged_source(self, header: list[str], runs: tuple[Run, ...],
                       assembly: AssemblyPlan) -> str:
        header.append(f"Output {self.setup.expr.output.tensor}: assembled in "
                      f"{assembly.storage.layout.name} by {self.name}_merge, which merges "
                      "the operands level by level (no term copies its entries first)"
                      + (f", in parallel over {assembly.key[0]}: each row's union counted, a "
                         "prefix sum, each row merged at its segment"
                         if self.parallel_merge else "") + ":")
        header += [f"  {run.operand} ({run.layout.name}): {run.why}" for run in runs]
        bounds = [kernel_code(t.plan.count_plan, f"{t.name}_bound", FunctionRole.BOUND)
                  for t in self.terms]
        named = self.named
        return emit_merged(self.name, header, named.expr, named.layouts, list(runs),
                           assembly, bounds, [_bound_arguments(t) for t in self.terms],
                           named.options.semiring, named.typing, self.parallel_merge,
                           self._leaf())

    def _leaf(self) -> Leaf | None:
        """The value of a union's entry: its expression of the runs' values (0 for a run
        without the entry), times the statement's number."""
        if self.setup.union is None:
            return None
        expr = self.named.expr
        tree = next(a.value for a in expr.factors if a.value is not None)
        assert tree is not None
        return Leaf(tree, expr.coefficient, {n: self.named.typing.of(n) for n in operands(tree)})

    @symbolic
    def report(self) -> str:
        """The notes, the merge if any, and each term's report."""
        notes = [f"{title}: {text}" for title, text in self.setup.notes()]
        rows = " in parallel over the output's rows (counted, prefix-summed, merged)" \
            if self.parallel_merge else ""
        merged = [f"union: {self.name}_merge merges the operands' storage level by level"
                  f"{rows} ({run.operand}: {run.why}); the terms below only count entries"
                  for run in self.runs or ()]
        return "\n".join([f"kernel: {self.setup.expr} (statement splitting: one loop nest "
                          "per term)"] + notes + merged
                         + [f"--- term {k}\n{t.report()}" for k, t in enumerate(self.terms)])


def _union_operands(expr: Expr) -> Expr:
    """``C(i,j) = f(A(i,j), B(i,j))`` iterated over the union of A's and B's entries as the
    sum ``C(i,j) = A(i,j) + B(i,j)``: one run per operand, which the merge combines by the
    expression instead of adding (:func:`~spf.back.source.emit_merged`)."""
    plain = tuple(replace(a, value=None, in_value=False) for a in expr.factors)
    return Expr(expr.output, plain, False, expr.text, expr.source, 1,
                tuple((1, (a,)) for a in plain), expr.aliases)


# How a term's kernel takes the statement's options (:class:`KernelOptions`): each is the
# statement's, but those its term sets (order, find, bounds: the term's share of them; its
# name; the statement's index width and value types, in the term's names), those applied
# once to the whole statement (below: their defaults in every term) and those a split
# statement refuses (:data:`UNSUPPORTED`).
STATEMENT_ONLY: dict[str, Any] = {
    "mask": None,           # every product reads the mask already (Expr.with_mask)
    "complement": False,    # the sum's own kernel resets or removes what the mask leaves
    "fill_values": False,   # the statement chose the operands read densely; calls fill them
}
UNSUPPORTED = ("drop_zeros", "tile", "share")


def _check_supported(setup: Setup) -> None:
    """SpecError for the options a statement split into products does not support."""
    opts = setup.options
    for option in UNSUPPORTED:
        # a union's parts hold disjoint entries: each part drops its own zeros
        if option == "drop_zeros" and not setup.expr.is_sum:
            continue
        if getattr(opts, option):
            raise SpecError(f"{option} is not supported {_split_reason(setup)}",
                            setup.expr.source)


def _split_reason(setup: Setup) -> str:
    """The end of an "OPTION is not supported ..." message: what makes the kernel run as
    several product statements (a sum, or inputs in union layouts)."""
    if setup.expr.is_sum:
        return "for sums yet"
    out = setup.expr.output.tensor
    unions = [f"{t!r} ({lay.name}) has {len(lay.parts())} parts"
              for t, lay in setup.layouts.items() if t != out and len(lay.parts()) > 1]
    return f"for union layouts yet: {', '.join(unions)}, each run as its own product statement"


def _term_space(term: Term, setup: Setup, names: Mapping[str, str]) -> IterationSpace:
    """``term``'s iteration space in the C's names (``names``), as its kernel builds it (a
    term whose constraints contradict holds no point)."""
    renaming = {n: Aff.var(c) for n, c in names.items()}
    product = term.product.renamed(names)
    bounds = replace(setup.options, bounds=tuple(c.substitute(renaming)
                                                 for c in term.bounds or []))
    return build(product, {names.get(t, t): lay for t, lay in term.layouts.items()},
                 bounds.space_bounds(product), assemble=setup.assembled)


def _term_kernel(setup: Setup, k: int, term: Term, names: Mapping[str, str],
                 c_order: tuple[str, ...] | None) -> ProductKernel:
    """The product kernel of ``term``, the ``k``-th, with the sum's options (the loop order
    restricted to the term's variables: ``c_order`` is the order in the C's names) and C
    identifiers (``names``), streaming its entries into the union."""
    opts = setup.options
    order = opts.order
    if order is not None:
        variables = _term_space(term, setup, names).variables
        order = tuple(v for v, c in zip(order, c_order or ())
                      if c.replace(".", "_", 1) in variables) or None
    # every other option is the statement's (a new one reaches the terms unless named here)
    options = replace(
        opts, **STATEMENT_ONLY, order=order, find=term.find, bounds=tuple(term.bounds or ()),
        name=f"{opts.name}_term{k}", index_type=setup.index_type,
        dtype={a.tensor: setup.typing.of(a.tensor).name
               for a in (term.product.output, *term.product.factors)})
    sized = {a.tensor for a in term.product.sized}     # read for their extents: as given
    own = resolve(term.product, {t: lay for t, lay in term.layouts.items() if t not in sized},
                  None, options, {})
    layouts = {**own.layouts, **{t: term.layouts[t] for t in sized}}
    return ProductKernel.build(replace(own, layouts=Table(layouts)), stream=True, names=names)


def _arguments(term: ProductKernel, stream: bool = False) -> list[str]:
    """The tensors a term's function takes, output first (``stream``: the function making
    its run, which may take the output's extents next, ``spf_ext``)."""
    expr, assembly = term.named.expr, term.assembly
    extents = ["spf_ext"] if stream and assembly is not None \
        and stream_reads_extents(assembly) else []
    return [expr.output.tensor, *extents, *(a.tensor for a in (*expr.factors, *expr.sized))]


def _bound_arguments(term: ProductKernel) -> list[str]:
    """The arguments of a term's ``_bound`` (its count first, then the output's extents
    where the statement's range of an output index bounds it)."""
    expr, assembly = term.named.expr, term.assembly
    extents = ["spf_ext"] if assembly is not None and assembly.ranged else []
    return [expr.output.tensor, *extents, *(a.tensor for a in (*expr.factors, *expr.sized))]
