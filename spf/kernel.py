"""The public Kernel API: spec -> iteration space -> loop nest -> C -> compiled callable."""
from __future__ import annotations

import inspect
import keyword
from collections.abc import Mapping
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from .assembly import AssemblyPlan, FunctionRole, for_stream
from .assembly.merge import Run, operand_run
from .back.lower import kernel_code, tile_condition
from .back.names import CNames
from .back.source import emit_kernel, emit_merged, emit_sum, header_lines
from .concurrency import symbolic
from .decide.analysis import Analysis, TileReport
from .decide.options import C_RESERVED, NAMES, OPTIONS, KernelOptions, check_given
from .decide.plan import Plan, make_plan
from .decide.report import plan_report
from .decide.split import split_terms
from .decide.synthesis import Decision
from .errors import SpecError
from .front.kernel_spec import (
    FILE_KEYS,
    Expr,
    layout_params,
    load_kernel_file,
    parse_expr,
    tensor_layouts,
)
from .front.layout import Layout, default_layout, load_layout
from .front.semiring import Semiring
from .front.storage import storage_of
from .front.syntax import is_file
from .middle.iteration_space import IterationSpace, build, shared_fields
from .middle.order import default_order
from .middle.scan import LoopNest
from .runtime.compiled import CompiledKernel
from .runtime.tensor import register_generated


class Kernel:
    """A kernel in tensor index notation with a layout per tensor.

    ``expr`` is the statement (``"y(i) = A(i,j) * x(j)"``) or the path of a kernel spec file
    (``.toml``).  ``layouts`` maps tensor names to layout names, paths or :class:`Layout`
    objects; tensors not named are dense.  ``params`` maps tensor names to layout parameters
    (``{"A": {"B": 4}}``).  The other keywords are the options of :class:`KernelOptions`
    (listed below); ``options`` gives them as one :class:`KernelOptions`, whose fields left
    at their defaults do not count as given.  Options given in the call override a kernel
    file's.

    A sum (``C(i,j) = A(i,j) + B(i,j)``, ``y(i) = A(i,j) * x(j) - b(i)``) is split into one
    statement per term (``terms``: a product Kernel each, with the same options; ``order``
    names apply to the terms that have them).  ``space``, ``nest`` and ``decisions`` are
    those of the first term.
    """

    @symbolic
    def __init__(self, expr: str | Expr, layouts: Mapping[str, str | Layout] | None = None,
                 *, params: Mapping[str, Mapping[str, int]] | None = None,
                 options: KernelOptions | None = None, **keywords: Any):
        layouts = given_layouts = tensor_layouts(layouts)
        params = layout_params(params)
        from_file: dict[str, Any] = {}
        spec = None
        if isinstance(expr, str) and expr.endswith(".toml"):
            spec = load_kernel_file(expr)
            self.expr: Expr = spec.expr
            layouts = {**spec.layouts, **layouts}
            params = {**spec.params, **params}
            from_file = check_given(spec.options, spec.source, spec.position, FILE_KEYS)
        elif isinstance(expr, Expr):
            self.expr = expr
        else:
            self.expr = parse_expr(expr)
        called = {**_differing(options), **check_given(keywords, self.expr.source)}
        where = None if spec is None else \
            (lambda name: None if name in called else spec.position(name))
        self.options = opts = KernelOptions(**{**from_file, **called}).resolved(self.expr, where)
        self.mask = opts.mask[1] if opts.mask else None
        self.complement = opts.complement
        if self.mask and not self.complement:
            self.expr = self.expr.with_mask(self.mask)
        self._check_names()
        self.name, self.find, self.parallel = opts.name, opts.find, opts.parallel
        self.z3_timeout_ms, self.share = opts.z3_timeout_ms, opts.share
        self.semiring = opts.semiring
        order = list(opts.order) if opts.order else None
        self.index_type = opts.index_type or _width_of_given(layouts)
        self.mask_layout = self._complement_layout(layouts, params)
        in_file = {} if spec is None else {t: spec.entry_position("layouts", t)
                                           for t in spec.layouts if t not in given_layouts}
        self.layouts = self._resolve_layouts(layouts, params, in_file)
        self.read_densely = self._read_densely(opts.fill_values)
        self.assembled = self._needs_assembly()
        self.bounds = list(opts.bounds)
        self.terms: list[Kernel] = []
        self.order_why: list[str] = []     # why the default order moved a loop
        self.plan: Plan | None = None
        self._analysis: Analysis | None = None
        self._source: str | None = None
        out = self.expr.output.tensor
        self._check_semiring_scope()
        self._check_complement()
        if self.expr.is_sum or any(len(lay.parts()) > 1 for t, lay in self.layouts.items()
                                   if t != out):
            if opts.drop_zeros:
                raise SpecError(f"drop_zeros is not supported {self._split_reason()}",
                                self.expr.source)
            self._split_terms(order, opts.tile)
            return
        self.space: IterationSpace = build(self.expr, self.layouts, self.bounds, self.share,
                                           assemble=self.assembled)
        self.tile = self._check_tile(opts.tile)
        if self.tile:
            self.space = self.space.tiled(self.tile)
        self.order = self._loop_order(order)
        self.plan: Plan = make_plan(self.space, self.order, self.find, parallel=self.parallel,
                                    assemble=self.assembled, drop_zeros=opts.drop_zeros,
                                    reassociate=opts.reassociate,
                                    z3_timeout_ms=self.z3_timeout_ms, tile=self.tile,
                                    reorder=order is None, semiring=self.semiring)
        placed = set(self.order)        # planning may reorder them (Plan.order_why)
        self.order = [v for v in self.plan.nest.schedule if v in placed]

    # the plan's decisions, as the kernel's attributes ------------------------------------
    @property
    def nest(self) -> LoopNest:
        return self.plan.nest if self.plan else self.terms[0].nest

    @property
    def decisions(self) -> list[Decision]:
        if self.plan is None:
            return [d for t in self.terms for d in t.decisions]
        return self.plan.decisions

    @property
    def assembly(self) -> AssemblyPlan | None:
        return self.plan.assembly if self.plan else self.terms[0].assembly

    @property
    def parallel_loop(self) -> str | None:
        if self.plan is None:
            return next((t.parallel_loop for t in self.terms if t.parallel_loop), None)
        return self.plan.parallel_loop

    def _split_terms(self, order: list[str] | None, tile) -> None:
        """Statement splitting: one product kernel per term, adding into the output."""
        for option, given in (("tile", tile), ("share", self.share)):
            if given:
                raise SpecError(f"{option} is not supported {self._split_reason()}",
                                self.expr.source)
        for k, term in enumerate(split_terms(self.expr, self.layouts, self.bounds, self.find,
                                             accumulate=not self.assembled)):
            variables = build(term.product, term.layouts, term.bounds or [],
                              assemble=self.assembled).variables
            mine = None if order is None else [
                v for v in order if v.replace(".", "_", 1) in variables]
            self.terms.append(Kernel(term.product, term.layouts, options=KernelOptions(
                order=tuple(mine) if mine else None, find=term.find, parallel=self.parallel,
                bounds=tuple(term.bounds or ()), name=f"{self.name}_term{k}",
                index_type=self.index_type, reassociate=self.options.reassociate,
                z3_timeout_ms=self.z3_timeout_ms, semiring=self.semiring)))
        if order:
            used = {v for t in self.terms for v in t.order}
            unknown = [v for v in order if v.replace(".", "_", 1) not in used]
            if unknown:
                raise SpecError(f"order names {unknown}, which no term of the sum has as a loop "
                                "variable", self.expr.source)
        for t in self.terms:    # a term feeds a sorted, combined run to the union
            if t.plan.assembly is not None:
                t.plan.assembly = for_stream(t.plan.assembly)
        first = self.terms[0]
        self.space, self.order = first.space, first.order
        self.tile = {}

    def _split_reason(self) -> str:
        """The end of an "OPTION is not supported ..." message: what makes the kernel run as
        several product statements (a sum, or inputs in union layouts)."""
        if self.expr.is_sum:
            return "for sums yet"
        out = self.expr.output.tensor
        unions = [f"{t!r} ({lay.name}) has {len(lay.parts())} parts"
                  for t, lay in self.layouts.items() if t != out and len(lay.parts()) > 1]
        return (f"for union layouts yet: {', '.join(unions)}, each run as its own product "
                "statement")

    # construction helpers ----------------------------------------------------------
    def _complement_layout(self, layouts: dict[str, Any],
                           params: dict[str, Any]) -> Layout | None:
        """A complemented mask is not an operand of the product: its layout is taken out of
        ``layouts`` (and ``params``) and resolved here."""
        if not self.complement:
            return None
        name, out = self.mask, self.expr.output
        lay = layouts.pop(name, None)
        lay = load_layout(default_layout(len(out.indices)) if lay is None else lay,
                          **dict(params.pop(name, {}))).with_index_type(self.index_type)
        if lay.order != len(out.indices):
            raise SpecError(f"mask {name!r}: its layout {lay.name} has {lay.order} indices, "
                            f"the output {out} {len(out.indices)}", self.expr.source)
        return lay

    def _check_complement(self) -> None:
        """A complemented mask resets the mask's entries of a dense output, or removes them
        from an assembled one, after the product (no pruning of the iteration); an output
        sharing an input's structure keeps that structure, so it takes none."""
        if not self.complement:
            return
        out = self.expr.output.tensor
        if self.layouts[out].dense_array is None and not self.assembled:
            raise SpecError(f"complement=True: the output {out!r} shares {self.share[1]!r}'s "
                            "structure, which a complemented mask would have to change; use "
                            "a dense output or one the kernel assembles", self.expr.source)

    def _check_semiring_scope(self) -> None:
        """A sum's terms combine by the semiring's add (the union of their entries), as do
        an assembled output's entries with equal coordinates; nothing is subtracted."""
        if self.semiring.is_plus_times:
            return
        if self.assembled and not self.semiring.reorderable:
            raise SpecError(f"semiring={self.semiring.name}: the output "
                            f"{self.expr.output.tensor!r} is assembled by the kernel, which "
                            "combines entries with equal coordinates in an order it chooses "
                            "(sorting, buckets), and add is not proven associative and "
                            "commutative; use a dense output", self.expr.source)
        if self.expr.sign < 0 or any(sign < 0 for sign, _ in self.expr.terms):
            raise SpecError(f"semiring={self.semiring.name}: a subtracted product has no "
                            "meaning in a semiring (terms are combined by add)",
                            self.expr.source)

    def _check_tile(self, tile: Mapping[str, int] | None) -> dict[str, int]:
        """The tiled loop variables (``A_pi``) and sizes (checked by the options schema)."""
        out = {}
        variables = self.space.variables
        for name, size in (tile or {}).items():
            var = name.replace(".", "_", 1)
            if var not in variables:
                raise SpecError(f"tile names {name!r}, which is not a variable of the "
                                f"iteration space", self.expr.source)
            out[var] = size
        return out

    def analyses(self) -> list[Analysis]:
        """One analysis per statement (per term of a sum)."""
        return [t.analysis() for t in self.terms] if self.terms else [self.analysis()]

    @symbolic
    def analysis(self) -> Analysis:
        """Dependences carried by each loop, the parallel loop, tiling (paper Sec. 5); for a
        sum, that of the first term (see :meth:`analyses`)."""
        if self.terms:
            return self.terms[0].analysis()
        if self._analysis is None:
            ana = self.plan.analysis()
            if self.assembled:
                if self.parallel:    # the reason says why parallel=True was not followed
                    why = (f"not parallelized: the output {self.expr.output.tensor} is "
                           "assembled in storage order by one thread")
                    ana.notes.append(why)
                    ana.parallel_reason = ana.parallel_reason.removesuffix(
                        "; parallel=False") + f"; {why}"
                ana.notes.append(self.assembly.describe())
            names = CNames(self.space, set())
            for t, (var, size) in self.space.tiles.items():
                ana.tiles.append(TileReport(var, size, t, [
                    tile_condition(self.nest, skip, names) for skip in self.plan.skips[t]]))
            ana.notes.extend(self.nest.z3.undecided)
            ana.notes.extend(self.plan.notes)
            self._analysis = ana
        return self._analysis


    def _check_names(self) -> None:
        for name in self.expr.tensors + self.expr.indices:
            if name in C_RESERVED or keyword.iskeyword(name) or name.startswith("spf_"):
                raise SpecError(f"name {name!r} is reserved (C keyword or spf_ prefix)",
                                self.expr.source)

    def _resolve_layouts(self, layouts: Mapping[str, Any],
                         params: Mapping[str, Mapping[str, int]],
                         in_file: Mapping[str, tuple[int, int]]) -> dict[str, Layout]:
        """Each tensor's Layout; ``in_file``: where a kernel file names a tensor's layout."""
        accesses = {a.tensor: a for a in (self.expr.output, *self.expr.factors)}
        for tname in list(layouts) + list(params):
            if tname not in accesses:
                raise SpecError(f"layout given for {tname!r}, which is not a tensor of "
                                f"{self.expr.text!r}", self.expr.source,
                                *in_file.get(tname, (None, None)))
        resolved: dict[str, Layout] = {}
        for tname, acc in accesses.items():
            at = in_file.get(tname, (None, None))
            if not acc.indices:
                if tname in layouts:
                    raise SpecError(f"{tname!r} is a scalar and takes no layout",
                                    self.expr.source, *at)
                continue
            lay = layouts.get(tname)
            lay = default_layout(len(acc.indices)) if lay is None else lay
            try:
                resolved[tname] = load_layout(lay, **dict(params.get(tname, {}))) \
                    .with_index_type(self.index_type)
            except SpecError as exc:
                if tname not in in_file or exc.line is not None or is_file(Path(exc.source)):
                    raise       # given in the call, or an error of the layout's own file
                raise SpecError(f"the layout of {tname!r}: {exc}", self.expr.source,
                                *at) from None
        return resolved

    def _read_densely(self, fill_values: bool) -> dict[str, Layout]:
        """With ``fill_values`` and a mul that zero does not annihilate, an absent entry
        changes the product, so no operand may skip it: each sparse operand is read from a
        dense array holding the semiring's zero where it stores nothing (the runtime makes
        it).  Its layout becomes the dense one; the returned map keeps the given ones."""
        self.fill_values = fill_values
        if not fill_values or self.semiring.annihilates:
            return {}
        given: dict[str, Layout] = {}
        for a in self.expr.factors:
            lay = self.layouts.get(a.tensor)
            if a.pattern or lay is None or lay.dense_array is not None or a.tensor in given:
                continue
            if self.share and a.tensor == self.share[1]:
                raise SpecError(f"fill_values=True: {a.tensor!r} would be read densely (zero "
                                f"does not annihilate {self.semiring.name}'s mul), so it cannot "
                                "also give the output's structure (share=)", self.expr.source)
            given[a.tensor] = lay
            self.layouts[a.tensor] = default_layout(len(a.indices)) \
                .with_index_type(self.index_type)
        return given

    def fill_note(self) -> str:
        """What absent entries mean for this kernel (a report line)."""
        zero = self.semiring.zero_c()
        if not self.fill_values:
            same = ("reading absent entries as zero would give the same result (it "
                    "annihilates mul)" if self.semiring.annihilates else
                    "zero does not annihilate mul, so reading absent entries as zero "
                    "(fill_values=True) would give another result")
            return ("structural: products run over the entries the operands store, combined "
                    f"by add; an output element no product reaches holds zero ({zero}); "
                    + same)
        if not self.read_densely:
            return (f"fill values: absent entries are {zero}, which annihilates mul, so "
                    "iterating over the stored entries gives the same result")
        read = ", ".join(f"{name} ({lay.name})" for name, lay in sorted(self.read_densely.items()))
        return (f"fill values: absent entries are {zero}, which does not annihilate mul, so "
                f"every element takes part: {read} "
                + ("is" if len(self.read_densely) == 1 else "are")
                + f" read as dense arrays holding {zero} where nothing is stored (the "
                "iteration space is dense)")

    def _needs_assembly(self) -> bool:
        """A sparse output whose index arrays no input provides is assembled by the kernel."""
        out = self.expr.output
        lay = self.layouts.get(out.tensor)
        if not out.indices or lay.dense_array is not None:
            return False
        missing = [f.name for f in lay.fields.values() if f.is_array and f.ctype == "int"]
        if self.share is not None:
            missing = [f for f in missing
                       if f not in shared_fields(lay, self.layouts[self.share[1]])]
            if missing:
                raise SpecError(f"output {out.tensor!r} ({lay.name}) cannot share index arrays "
                                f"{missing} with {self.share[1]!r}", self.expr.source)
            return False
        if self.expr.accumulate:
            raise SpecError(f"'+=' into the sparse output {out.tensor!r} ({lay.name}): its "
                            "structure is assembled by the kernel; use '='", self.expr.source)
        try:
            storage_of(lay)
        except SpecError as exc:
            raise SpecError(f"output {out.tensor!r}: {exc.detail}", self.expr.source) from None
        return True

    def _loop_order(self, order: list[str] | None) -> list[str]:
        variables = self.space.variables
        if order is None:
            order, self.order_why = default_order(self.space)
            return self._with_tiles(order)
        result = []
        for item in order:
            var = item.replace(".", "_", 1) if "." in item else item
            if var not in variables:
                raise SpecError(f"order names {item!r}, which is not a loop variable; choose "
                                f"from {[_written(v, self.space.indices) for v in variables]}",
                                self.expr.source)
            result.append(var)
        return self._with_tiles(result)

    def _with_tiles(self, order: list[str]) -> list[str]:
        """Tile loops the order does not place go right before their loop."""
        order = list(order)
        for t, (var, _) in self.space.tiles.items():
            if t not in order and var in order:
                order.insert(order.index(var), t)
        return order

    # products -------------------------------------------------------------------------
    @symbolic
    def c_source(self) -> str:
        """The generated C: struct typedefs and the kernel function (for a sum, one static
        function per term before it; for an assembled output, its storage functions after)."""
        if self._source is None:
            header = [f"Generated by spf: {self.expr}"]
            if self.complement:
                header.append(f"Mask: {self.complement_note()}")
            if not self.semiring.is_plus_times or self.fill_values:
                header.append(f"Absent entries: {self.fill_note()}")
            if not self.terms:
                header += self._header_lines()
                self._source = emit_kernel(self.plan, self.name, header)
                return self._source
            if self.runs:
                self._source = self._merged_source(header)
                return self._source
            codes, args = [], []
            for k, t in enumerate(self.terms):
                header.append(f"Term {k} ({t.name}): {t.expr}")
                header += ["  " + h for h in t._header_lines()]
                codes.append(kernel_code(t.plan, t.name, FunctionRole.STREAM))
                args.append([a.tensor for a in (t.expr.output, *t.expr.factors)])
            bounds = [kernel_code(t.plan.count_plan, f"{t.name}_bound", FunctionRole.BOUND)
                      for t in self.terms] if self.assembly else []
            self._source = emit_sum(self.name, header, self.expr, self.layouts, codes,
                                           args, self.space, self.parallel_loop is not None,
                                           self.assembly, bounds, self.semiring)
        return self._source

    @cached_property
    @symbolic
    def runs(self) -> list[Run] | None:
        """For an assembled sum whose every term is an operand stored in the output's storage
        order (proved by Z3 per term): the runs the kernel merges level by level."""
        if not self.terms or not self.assembled:
            return None
        runs = []
        for t in self.terms:    # stop at the first term that is not a run: no more Z3 queries
            run = operand_run(t.expr, t.layouts, t.plan.nest, t.plan.decisions, t.assembly)
            if run is None:
                return None
            runs.append(run)
        return runs

    def _merged_source(self, header: list[str]) -> str:
        header.append(f"Output {self.expr.output.tensor}: assembled in "
                      f"{self.assembly.storage.layout.name} by {self.name}_merge, which merges "
                      "the operands level by level (no term copies its entries first):")
        header += [f"  {run.operand} ({run.layout.name}): {run.why}" for run in self.runs]
        bounds = [kernel_code(t.plan.count_plan, f"{t.name}_bound", FunctionRole.BOUND)
                  for t in self.terms]
        args = [[a.tensor for a in (t.expr.output, *t.expr.factors)] for t in self.terms]
        return emit_merged(self.name, header, self.expr, self.layouts, self.runs,
                           self.assembly, bounds, args, self.semiring)

    def _header_lines(self) -> list[str]:
        return header_lines(self.plan, self.name)

    def compile(self) -> CompiledKernel:
        """Compile (or fetch from the cache) and return a callable."""
        return CompiledKernel(self)

    @symbolic
    def report(self) -> str:
        """Iteration space, loop order and per-level decisions, as text."""
        note = [f"mask: {self.complement_note()}"] if self.complement else []
        if not self.semiring.is_plus_times or self.fill_values:
            note.append(f"absent entries: {self.fill_note()}")
        if self.terms:
            merged = [f"union: {self.name}_merge merges the operands' storage level by level "
                      f"({run.operand}: {run.why}); the terms below only count entries"
                      for run in self.runs or ()]
            return "\n".join([f"kernel: {self.expr} (statement splitting: one loop nest per "
                              "term)"] + note + merged + [f"--- term {k}\n{t.report()}"
                                                          for k, t in enumerate(self.terms)])
        return "\n".join([plan_report(self.plan, self.z3_timeout_ms, self.order_why)] + note)

    def complement_note(self) -> str:
        """What a complemented mask does (it is not part of the plan)."""
        reset = ("removed (the output is rebuilt without them)" if self.assembled else
                 "reset ('=': to the semiring's zero, '+=': to their values before the call)")
        return (f"complement of {self.mask} ({self.mask_layout.name}): the product is "
                f"computed for every element, then {self.mask}'s entries of "
                f"{self.expr.output.tensor} are {reset}; the iteration is not pruned")

def _differing(options: KernelOptions | None) -> dict[str, Any]:
    """The fields of ``options`` that differ from the defaults (what it gives)."""
    if options is None:
        return {}
    if not isinstance(options, KernelOptions):
        raise SpecError(f"options must be an spf.KernelOptions, got {type(options).__name__}")
    default = _DEFAULT_OPTIONS
    return {name: getattr(options, name) for name in NAMES
            if getattr(options, name) != getattr(default, name)}


_DEFAULT_OPTIONS = KernelOptions()


def _signature_and_doc() -> None:
    """``Kernel``'s signature and the options part of its docstring, from the schema."""
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("expr", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("layouts", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=None),
              inspect.Parameter("params", kw, default=None),
              inspect.Parameter("options", kw, default=None)]
    params += [inspect.Parameter(o.name, kw, default=_shown(getattr(_DEFAULT_OPTIONS, o.name)))
               for o in OPTIONS]
    Kernel.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    lines = [f"    ``{o.name}`` ({o.form.value}): {o.help}." for o in OPTIONS]
    Kernel.__doc__ = (Kernel.__doc__ or "") + "\n    Options:\n\n" + "\n".join(lines) + "\n"


def _shown(default: Any) -> Any:
    """An option's default as a user writes it (a semiring by its name)."""
    return default.name if isinstance(default, Semiring) else default


_signature_and_doc()


def _written(var: str, indices: Any) -> str:
    """A loop variable as users write it: ``A.pi`` for the layout index ``A_pi``."""
    return var if var in indices else var.replace("_", ".", 1)


def _width_of_given(layouts: Mapping[str, Any]) -> str:
    """The index width of the Layout objects among ``layouts`` ("int32" when none is one);
    SpecError when they disagree."""
    given = {lay.index_type for lay in layouts.values() if isinstance(lay, Layout)}
    if len(given) > 1:
        raise SpecError("the layouts given to one kernel must share an index_type, got "
                        + ", ".join(f"{t}: {lay.index_type}" for t, lay in layouts.items()
                                    if isinstance(lay, Layout)))
    return given.pop() if given else "int32"


@cache
def dense_copy_kernel(layout: Layout) -> CompiledKernel:
    """``D(i...) = T(i...)`` with D dense: unpacks any layout through its own relation."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    return Kernel(f"D({idx}) = T({idx})", {"T": layout}, name="spf_to_dense").compile()


@cache
def entry_count_kernel(layout: Layout) -> CompiledKernel:
    """``n = T(i...) * one`` under plus_pair: the number of entries ``layout``'s relation
    yields for a tensor (stored slots outside it, such as ELL's padding, are not counted)."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    return Kernel(f"n = T({idx}) * one", {"T": layout}, semiring="plus_pair",
                  name="spf_entry_count").compile()


@cache
def pattern_kernel(layout: Layout) -> CompiledKernel:
    """``D(i...) = T(i...) * one`` under plus_pair, D dense: how many entries ``layout``'s
    relation yields at each coordinate (nonzero where the tensor has an entry)."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    return Kernel(f"D({idx}) = T({idx}) * one", {"T": layout}, semiring="plus_pair",
                  name="spf_pattern").compile()


register_generated(dense_copy_kernel=dense_copy_kernel, entry_count_kernel=entry_count_kernel,
                   pattern_kernel=pattern_kernel)
