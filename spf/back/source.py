"""C source files: a kernel function (with the functions it calls) put into
``templates/kernel.c`` with its struct typedefs and helpers, printed from the C tree."""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ..assembly import AssemblyPlan, FunctionRole, storage_c, strategy
from ..assembly.entry_c import Entry, entry
from ..assembly.merge import Run
from ..assembly.merge_c import Leaf, merge_function
from ..decide.plan import Plan
from ..errors import SpecError
from ..front.layout import Layout
from ..front.semiring import PLUS_TIMES, Semiring
from ..front.terms import Aff
from ..front.value_types import FLOAT64_TYPING, Typing
from ..middle.iteration_space import IterationSpace
from . import ctree as t
from .c_printer import CPrinter
from .lower import KernelCode, kernel_code
from .names import HELPERS, CNames, scalar_param, struct_name, struct_typedef
from .status import Status, c_enum
from .templates import template, text
from .value_c import helpers_of


def function(code: KernelCode, static: bool = False) -> str:
    """One function's C text."""
    body = "\n".join(CPrinter().lines(code.body))
    return f"{'static ' if static else ''}{code.signature}\n{{\n" + body + "\n}"


def header_lines(plan: Plan, name: str) -> list[str]:
    """The file header's account of the plan (layouts, loop order, finds, parallel loop,
    assembly)."""
    header = []
    for use in plan.space.uses:
        header.append(f"  {use.name}: {use.layout.name}"
                      + (f" {dict(use.layout.params)}" if use.layout.params else ""))
    header.append(f"Loop order: {', '.join(plan.nest.schedule)}")
    if plan.nest.empty:
        header.append("  (the iteration space holds no point, as no access is ever in range: "
                      "every loop runs no iteration)")
    if plan.order_why:
        header.append(f"  ({plan.order_why})")
    for d in plan.decisions:
        algo = d.chosen.algorithm if d.chosen else "guard loop"
        alt = (f", or {' or '.join(c.algorithm for c in d.alternatives)} chosen at run "
               "time" if d.alternatives else "")
        header.append(f"Find {d.find.var} in {d.find.use.name}: {algo}{alt}")
    if plan.parallel_loop:
        header.append(f"Parallel (OpenMP): loop {plan.parallel_loop}"
                      + (f", each thread summing into a private copy of "
                         f"{plan.space.expr.output.tensor}" if plan.privatized else ""))
    if plan.vector:
        header.append(f"SIMD (omp simd): {plan.vector.why}")
    elif plan.no_simd:
        header.append(f"SIMD: {plan.no_simd}")
    a = plan.assembly
    if a:
        header.append(f"Output {plan.space.expr.output.tensor}: assembled in "
                      f"{a.storage.layout.name} ({strategy(a).summary(a, name)}; "
                      f"arrays sized by {name}_bound)")
        for dp in a.storage.derived_passes():
            header.append(f"  then {dp.computed} from {dp.written}, as [derived] "
                          f"{dp.derived.field} = {dp.derived.text()} (the levels write "
                          f"{dp.written} only)")
    return header


def emit_kernel(plan: Plan, name: str, header_lines: list[str]) -> str:
    """The C source of the kernel function of ``plan`` (returns a
    :class:`~spf.back.status.Status`); with an assembled output, the file also
    defines ``<name>_bound`` (sizes the output) and the functions that store entries in the
    output layout."""
    code = kernel_code(plan, name)
    before = CPrinter().definitions(code.storage)
    assembly = plan.assembly
    others: list[KernelCode] = []   # the functions it calls: their loops may be another
    if assembly is not None:        # order's, with other finds (helpers, runtimes)
        bound = kernel_code(plan.count_plan, f"{name}_bound", FunctionRole.BOUND)
        others.append(bound)
        before += ("\n\n" if before else "") + BOUND_COMMENT + function(bound)
        if assembly.drop_zeros:
            slots = kernel_code(plan.count_plan, f"{name}_bound_slots",
                                FunctionRole.BOUND_SLOTS)
            others.append(slots)
            before += "\n\n" + SLOTS_COMMENT + function(slots)
        first = strategy(assembly).first_pass
        if first is not None:
            pass1 = kernel_code(plan, f"{name}{first.suffix}", first)
            others.append(pass1)
            before += (f"\n\n/* {strategy(assembly).first_pass_note(assembly)} */\n"
                       + function(pass1, static=True))
    helpers = set(code.helpers).union(*(c.helpers for c in others))
    runtimes = set(code.runtimes).union(*(c.runtimes for c in others))
    main = None if assembly is None else \
        assembled_entry(assembly, code.signature, assembly.ranged, assembly.drop_zeros)
    return render_file(header_lines, helpers, _layouts([code, *others]), code.signature,
                       code.body, runtimes, assembly=code.assembly, before=before,
                       semiring=plan.semiring, typing=plan.typing, entry=main)


def assembled_entry(assembly: AssemblyPlan, signature: t.Signature, ranged: bool,
                    slots: bool) -> Entry | str:
    """``<name>_new``, the kernel (``signature``: the output, its size, then the inputs)
    with its output sized, allocated, filled and trimmed from the inputs alone
    (:mod:`spf.assembly.entry_c`; ``ranged``: its ``_bound`` takes the extents, ``slots``: a
    ``_bound_slots`` comes first); or why there is none: the output's extents are not fields
    of its inputs."""
    output, _, *inputs = signature.params
    name = signature.name
    storage = assembly.storage
    shape = [extent_c(assembly.extents[storage.order.index(d)])
             for d in range(len(storage.order))]
    if any(e is None for e in shape):
        return (f"no {name}_new: the output's extents are not fields of its inputs (pass them "
                f"to {name}_bound and size the arrays as its comment says)")
    return entry(storage, f"{name}_new", name, struct_name(assembly.output.layout),
                 [str(p) for p in inputs], [p.name for p in inputs],
                 [e for e in shape if e is not None], ranged, slots,
                 strategy(assembly).counts_first, output.name)


def extent_c(extent: Aff) -> str | None:
    """An extent over the inputs' scalar fields (``A.numRows``) in C, as int64 (the struct
    pointer ``A``'s field); None when it reads anything else."""
    parts = []
    for atom, k in extent.terms:
        tensor, dot, field = str(atom).partition(".")
        if not dot or not tensor.isidentifier() or not field.isidentifier():
            return None
        parts.append(f"{'' if k == 1 else f'{k} * '}(int64_t){tensor}->{field}")
    return " + ".join([*parts, *([str(extent.const)] if extent.const else [])]) or "0"


def _layouts(codes: Sequence[KernelCode]) -> list[Layout]:
    """The layouts whose structs ``codes`` use, each once (the parts of a union layout
    share one struct)."""
    layouts: dict[str, Layout] = {}
    for code in codes:
        for lay in code.layouts.values():
            layouts.setdefault(struct_name(lay), lay)
    return list(layouts.values())


BOUND_COMMENT = ("/* The number of statement instances: an upper bound on the output's "
                 "entries, which sizes its\n * arrays before the kernel runs (the loops "
                 "without the statement's work). */\n")


SLOTS_COMMENT = ("/* The statement instances, zeros included: a looser bound that reads no "
                 "value (the caller\n * uses it when the arrays it sizes are small, and "
                 "trims them afterwards). */\n")


def emit_sum(name: str, header_lines: list[str], expr, tensor_layouts: Mapping[str, Layout],
             terms: list[KernelCode], term_args: list[list[str]], out_space: IterationSpace,
             parallel: bool, assembly: AssemblyPlan | None = None,
             bounds: Sequence[KernelCode] = (), semiring: Semiring = PLUS_TIMES,
             typing: Typing = FLOAT64_TYPING,
             bound_args: Sequence[list[str]] = ()) -> str:
    """A sum by statement splitting (paper Sec. 4): one static function per product term,
    each adding into the output (a dense array or scalar), or each producing a sorted run of
    the assembled output's entries (``bounds``: the terms' instance counters, taking
    ``bound_args``); the kernel
    sets the output to the semiring's zero, or merges the runs (combining equal coordinates
    by its add) and appends their union to the output."""
    helpers: set[str] = set().union(*(c.helpers for c in [*terms, *bounds]))
    layouts = {struct_name(lay): lay for lay in _layouts([*terms, *bounds])}
    names = CNames(out_space, helpers)
    params = _sum_params(expr, tensor_layouts, assembly, layouts, typing)
    body: list[t.Node] = [t.Comment(f"{expr}: statement splitting, one function per term; "
                                    "no term reads the\nimplicit zeros of another term's "
                                    "operands")]
    extra = ""
    if assembly is not None:
        body += _merge_runs(name, expr.output.tensor, term_args, assembly, names)
        extra = "\n\n".join(
            [CPrinter().definitions(storage_c.functions(
                assembly.storage, name, struct_name(assembly.output.layout), False))]
            + [function(b, static=True) for b in bounds]
            + [_sum_bound(name, expr.output.tensor, bound_args, params[2:])])
    else:
        body += _add_terms(name, expr, term_args, out_space, names, parallel,
                           semiring.zero_c())
    functions = "\n\n".join(function(term, static=True) for term in terms)
    runtimes = set().union(*(c.runtimes for c in [*terms, *bounds]))
    signature = t.Signature("int", name, tuple(params))
    main = None if assembly is None else assembled_entry(
        assembly, signature, any("spf_ext" in a for a in bound_args), False)
    return render_file(header_lines, helpers, list(layouts.values()), signature, body,
                       runtimes, assembly=assembly is not None,
                       before=functions + ("\n\n" + extra if extra else ""),
                       merge=assembly is not None, semiring=semiring, typing=typing,
                       entry=main)


def emit_merged(name: str, header_lines: list[str], expr, tensor_layouts: Mapping[str, Layout],
                runs: list[Run], assembly: AssemblyPlan, bounds: list[KernelCode],
                bound_args: list[list[str]], semiring: Semiring = PLUS_TIMES,
                typing: Typing = FLOAT64_TYPING, parallel: bool = False,
                leaf: Leaf | None = None) -> str:
    """A sum whose every term is an operand already stored in the output's storage order
    (:mod:`spf.assembly.merge`): the kernel merges the operands level by level into the
    output (``parallel``: row by row, by the threads); ``bounds`` (the terms' entry
    counters, taking ``bound_args``) size it."""
    layouts: dict[str, Layout] = {}
    params = _sum_params(expr, tensor_layouts, assembly, layouts, typing)
    out = expr.output.tensor
    merge = merge_function(name, assembly.storage, struct_name(assembly.output.layout), runs,
                           [struct_name(run.layout) for run in runs], semiring, parallel,
                           leaf)
    extra = "\n\n".join([CPrinter().definitions([merge])]
                         + [function(b, static=True) for b in bounds]
                         + [_sum_bound(name, out, bound_args, params[2:])])
    args = ", ".join(run.operand for run in runs)
    body: list[t.Node] = [t.Comment(f"{expr}: the operands are the sorted runs of the union"),
                          t.Return(f"{name}_merge({out}, {out}_size, {args})")]
    helpers = set().union(*(b.helpers for b in bounds)) | \
        (helpers_of(leaf.tree, leaf.types) if leaf else set())
    runtimes = set().union(*(b.runtimes for b in bounds))
    signature = t.Signature("int", name, tuple(params))
    main = assembled_entry(assembly, signature, any("spf_ext" in a for a in bound_args), False)
    return render_file(header_lines, helpers, list(layouts.values()), signature, body,
                       runtimes, before=extra, semiring=semiring, typing=typing, entry=main)


def _sum_params(expr, tensor_layouts: Mapping[str, Layout], assembly: AssemblyPlan | None,
                layouts: dict[str, Layout], typing: Typing) -> list[t.Param]:
    params: list[t.Param] = []
    out = expr.output.tensor
    for acc in (expr.output, *expr.factors):
        if not acc.indices:
            params.append(scalar_param(acc.tensor, typing.of(acc.tensor), acc is expr.output))
        elif acc is expr.output and assembly is not None:
            lay = assembly.output.layout
            layouts.setdefault(struct_name(lay), lay)
            params += [t.Param(f"{struct_name(lay)} *restrict", out),
                       t.Param("int64_t *restrict", f"{out}_size")]
        else:
            const = "" if acc is expr.output else "const "
            lay = tensor_layouts[acc.tensor]
            layouts.setdefault(struct_name(lay), lay)
            params.append(t.Param(f"{const}{struct_name(lay)} *restrict", acc.tensor))
    return params


def _merge_runs(name: str, out: str, term_args: list[list[str]], assembly: AssemblyPlan,
                names: CNames) -> list[t.Node]:
    n = len(term_args)
    calls = [f"{name}_term{k}({', '.join(f'&spf_runs[{k}]' if a == out else a for a in args)})"
             for k, args in enumerate(term_args)]
    calls.append(f"spf_stream_merge(&spf_union, spf_runs, {n})")
    first, *rest = calls       # each runs while the status is 0, the first other one kept
    exts = ", ".join(names.aff(e) for e in assembly.extents)
    append = t.Assign("spf_status", f"{name}_append(&spf_cur, {out}, spf_union.key[spf_e], "
                                    "spf_union.val[spf_e])")
    finish = [t.Call(f"{name}_finish(&spf_cur, {out}, {out}_size)"),
              *storage_c.derived_passes(assembly.storage, out)]
    return [
        t.Declare("int64_t", f"spf_ext[{len(assembly.extents)}]", f"{{{exts}}}", const=True,
                  note="the output's extents: every run is keyed by them"),
        t.Declare("spf_stream", f"spf_runs[{n}]", "{{0}}", note="one sorted run per term"),
        t.Declare("spf_stream", "spf_union", "{0}"),
        t.Declare("int", "spf_status", first),
        *(t.If("!spf_status", [t.Assign("spf_status", c)], braces=False) for c in rest),
        t.For("int k = 0", f"k < {n}", "++k", [t.Call("spf_stream_free(&spf_runs[k])")],
              braces=False),
        t.If("!spf_status", [
            t.Declare(f"{name}_cursor", "spf_cur"),
            t.Call(f"{name}_cursor_init(&spf_cur, spf_ext, {out}_size)"),
            t.For("int64_t spf_e = 0", "spf_e < spf_union.n && !spf_status", "++spf_e",
                  [append], braces=False),
            t.If("!spf_status", finish, braces=len(finish) > 1)]),
        t.Call("spf_stream_free(&spf_union)"),
        t.Return("spf_status")]


def _sum_bound(name: str, out: str, bound_args: Sequence[list[str]],
               inputs: list[t.Param]) -> str:
    """The sum's ``<name>_bound``: its terms' counts added (``bound_args``: the arguments of
    each term's; one taking the output's extents, ``spf_ext``, makes the sum's take them
    after ``spf_bound``)."""
    body: list[t.Node] = [t.Declare("int64_t", "spf_n", "0"), t.Assign("*spf_bound", "0"),
                          t.Declare("int", "spf_status")]
    for k, args in enumerate(bound_args):
        args = ["&spf_n" if a == out else a for a in args]
        body += [_passed_on(f"{name}_term{k}_bound({', '.join(args)})"),
                 t.Assign("*spf_bound", "spf_n", "+=")]
    body.append(t.Return(str(Status.OK.value)))
    extents = [t.Param("const int64_t *restrict", "spf_ext")] \
        if any("spf_ext" in a for a in bound_args) else []
    params = (t.Param("int64_t *restrict", "spf_bound"), *extents, *inputs)
    return BOUND_COMMENT + function(KernelCode(
        t.Signature("int", f"{name}_bound", params), body, set(), {}, set(), False, []))


def _add_terms(name: str, expr, term_args: list[list[str]], out_space: IterationSpace,
               names: CNames, parallel: bool, zero: str) -> list[t.Node]:
    out = expr.output.tensor
    body: list[t.Node] = []
    if not expr.accumulate:
        if not expr.output.indices:
            body.append(t.Assign(f"*{out}", zero))
        else:
            use = out_space.use(out)
            arr = use.layout.value_ref.array
            size = names.extent_product(use, arr)
            if parallel or zero != "0.0":
                body.append(t.For("size_t spf_z = 0", f"spf_z < {size}", "++spf_z",
                                  [t.Assign(f"{out}->{arr}[spf_z]", zero)], braces=False,
                                  parallel=t.Parallel(t.Schedule.STATIC) if parallel else None))
            else:
                body.append(t.Call(f"memset({out}->{arr}, 0, sizeof(spf_value_t) * {size})"))
    body.append(t.Declare("int", "spf_status"))
    for k, args in enumerate(term_args):
        body.append(_passed_on(f"{name}_term{k}({', '.join(args)})"))
    return body + [t.Return(str(Status.OK.value))]


def _passed_on(call: str) -> t.If:
    """``call`` of a function of the kernel; its status, when not 0, returned at once."""
    return t.If(f"(spf_status = {call}) != {Status.OK.value}", [t.Return("spf_status")],
                braces=False)


def render_file(header_lines: list[str], helpers: set[str], layouts: list[Layout],
                signature: t.Signature, body: list[t.Node],
                runtimes: Collection[str] = frozenset(),
                assembly: bool = False, before: str = "", merge: bool = False,
                semiring: Semiring = PLUS_TIMES, typing: Typing = FLOAT64_TYPING,
                entry: Entry | str | None = None) -> str:
    """The whole C file from ``templates/kernel.c`` (``runtimes``: helper files from
    ``templates/`` the code calls; ``assembly``: the kernel assembles a sparse output, whose
    entries with equal coordinates combine by ``semiring``'s add; ``before``: functions the
    kernel calls; ``merge``: the helper merging sorted runs; ``typing``: the value types;
    ``entry``: the function after the kernel sizing, allocating and filling its output, or
    why there is none, said in the header)."""
    if entry is not None:
        header_lines = [*header_lines, *([entry] if isinstance(entry, str) else
                                         entry.header(f"{signature.name}_new"))]
    structs = "\n\n".join(struct_typedef(lay) for lay in layouts)
    helpers = helpers | ({"spf_div"} if semiring.divides else set())
    helper_text = "\n".join(HELPERS[h] for h in sorted(helpers))
    if before:
        structs = (structs + "\n\n" if structs else "") + before + "\n"
    allocates = assembly or merge or (entry is not None and not isinstance(entry, str))
    files = (["huge.c"] if allocates else []) + sorted(runtimes) + \
        (["assembly.c"] if assembly else []) + (["assembly_merge.c"] if merge else [])
    if assembly or merge:
        helper_text = (helper_text + "\n\n" if helper_text else "") + _add_function(semiring)
    for file in files:
        helper_text = (helper_text + "\n\n" if helper_text else "") + text(file).rstrip()
    return template("kernel.c").substitute(
        header="\n".join(f" * {h}" if h else " *" for h in header_lines),
        index_type=index_type_of(layouts),
        value_type=typing.output.c, value_name=typing.output.name,
        acc_type=typing.accumulate.c, acc_name=typing.accumulate.name,
        infinities=_infinities(semiring, typing),
        helpers=("\n" + helper_text + "\n") if helper_text else "",
        structs=structs + ("\n" if structs else ""),
        signature=str(signature),
        body="\n".join(CPrinter().lines(body))) + (
            "" if entry is None or isinstance(entry, str) else
            "\n" + c_enum() + "\n\n" + CPrinter().definitions([entry.function]) + "\n")


def _infinities(semiring: Semiring, typing: Typing) -> str:
    """The semiring's infinite zero or one in the output's type (its limits for integers)."""
    if not semiring.infinite:
        return ""
    vt = typing.output
    return (f"/* {semiring.name}'s infinities in {vt.name} */\n"
            f"#define SPF_POS_INF {vt.infinity_c(True)}\n"
            f"#define SPF_NEG_INF {vt.infinity_c(False)}\n")


def _add_function(semiring: Semiring) -> str:
    """``spf_add``: how the assembly helpers combine two entries with equal coordinates."""
    return (f"/* Entries with equal coordinates combine by {semiring.name}'s add. */\n"
            "static inline spf_value_t spf_add(spf_value_t a, spf_value_t b)\n{\n"
            f"    return {semiring.add_c('a', 'b')};\n}}")


def index_type_of(layouts: list[Layout]) -> str:
    """The one index width of ``layouts`` (``"int32"`` when there are none)."""
    widths = {lay.index_type for lay in layouts} or {"int32"}
    if len(widths) > 1:
        raise SpecError("layouts of one kernel must share an index_type, got "
                        + ", ".join(f"{lay.name}: {lay.index_type}" for lay in layouts))
    return widths.pop()
