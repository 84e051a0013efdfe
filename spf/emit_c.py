"""C emission: one self-contained function (plus struct typedefs) from a scanned loop nest.

Index-array reads are printed inline (``A->colIdx[A_pj]``); assignments become
``const int`` locals; a reduction whose output element is fixed across the inner loops is
accumulated in a local scalar.  The file skeleton is ``templates/kernel.c``.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Callable

from . import emit_assembly
from . import index_expr as ie
from .assembly import AssemblyPlan
from .errors import SpecError
from .iteration_space import IterationSpace, TensorUse
from .layout import Layout
from .scan import LoopNest
from .synthesis import Choice, Decision, cost_model
from .terms import Aff, Constraint, FloorDiv, UFCall, format_constraint, format_sum

TEMPLATE_DIR = Path(str(resources.files("spf.templates")))   # installed inside the spf namespace
C_TYPES = {"int": "spf_index_t", "double": "double"}

_HELPERS = {
    "spf_min": "static inline int64_t spf_min(int64_t a, int64_t b) { return a < b ? a : b; }",
    "spf_max": "static inline int64_t spf_max(int64_t a, int64_t b) { return a > b ? a : b; }",
    "spf_floord": "static inline int64_t spf_floord(int64_t n, int64_t d) "
                  "{ return n >= 0 ? n / d : -((-n + d - 1) / d); }",
    "spf_ceild": "static inline int64_t spf_ceild(int64_t n, int64_t d) "
                 "{ return n >= 0 ? (n + d - 1) / d : -((-n) / d); }",
}


def template(name: str) -> Template:
    return Template((TEMPLATE_DIR / name).read_text())


def struct_name(layout: Layout) -> str:
    suffix = "".join(f"_{k}{v}" for k, v in sorted(layout.params.items()))
    return f"spf_{layout.name}{suffix}"


def struct_typedef(layout: Layout) -> str:
    lines = [f"/* {layout.name}: {layout.description} */" if layout.description else
             f"/* {layout.name} */",
             f"typedef struct {struct_name(layout)} {{"]
    for f in layout.fields.values():
        ctype = C_TYPES[f.ctype]
        if f.is_array:
            extents = "][".join(ie.to_c(d, str, lambda n, a: f"{n}({', '.join(a)})") for d in f.dims)
            lines.append(f"    {ctype} *restrict {f.name};  /* [{extents}] */")
        else:
            lines.append(f"    {ctype} {f.name};")
    lines.append(f"}} {struct_name(layout)};")
    return "\n".join(lines)


@dataclass
class CNames:
    """Prints terms of one iteration space as C."""

    space: IterationSpace
    helpers: set

    def tensor_of(self, qualified: str) -> tuple[TensorUse, str]:
        tensor, _, fld = qualified.partition(".")
        return self.space.use(tensor), fld

    def atom(self, atom: object) -> str:
        if isinstance(atom, UFCall):
            use, fld = self.tensor_of(atom.name)
            return self.array_read(use, fld, [self.aff(a) for a in atom.args])
        if isinstance(atom, FloorDiv):
            self.helpers.add("spf_floord")
            return f"spf_floord({self.aff(atom.num)}, {atom.den})"
        if "." in atom:
            use, fld = self.tensor_of(atom)
            return f"{use.name}->{fld}"
        return atom

    def aff(self, a: Aff) -> str:
        return format_sum(a.terms, a.const, self.atom)

    def condition(self, c: Constraint) -> str:
        return format_constraint(c, self.atom, eq_op="==")

    def array_read(self, use: TensorUse, fld: str, args: list[str]) -> str:
        spec = use.layout.fields[fld]
        index = args[0]
        for dim, arg in zip(spec.dims[1:], args[1:]):
            extent = ie.to_c(dim, lambda n: f"{use.name}->{n}",
                             lambda n, a: self.array_read(use, n, a))
            index = f"(int64_t)({index}) * {extent} + {arg}"
        return f"{use.name}->{fld}[{index}]"

    def value(self, use: TensorUse) -> str:
        """The value expression of ``use`` at the current layout indices."""
        ref = use.layout.value
        local = set(use.layout.indices)

        def name(n: str) -> str:
            return use.var(n) if n in local else f"{use.name}->{n}"

        subs = [ie.to_c(s, name, lambda n, a: self.array_read(use, n, a), wide=True)
                for s in ref.subscripts]
        return self.array_read(use, ref.array, subs)

    def extent_product(self, use: TensorUse, fld: str) -> str:
        spec = use.layout.fields[fld]
        return " * ".join(f"(size_t)({ie.to_c(d, lambda n: f'{use.name}->{n}', lambda n, a: self.array_read(use, n, a))})"
                          for d in spec.dims)


def _value_names(use: TensorUse) -> set[str]:
    out: set[str] = set()
    local = set(use.layout.indices)
    for s in use.layout.value.subscripts:
        out |= {use.var(n) for n in ie.names(s) if n in local}
    return out


def _bound(names: CNames, bounds: list[tuple[Aff, int]], upper: bool) -> str:
    parts = []
    for aff, den in bounds:
        if den == 1:
            parts.append(names.aff(aff + 1 if upper else aff))
        else:
            fn = "spf_floord" if upper else "spf_ceild"
            names.helpers.add(fn)
            text = f"{fn}({names.aff(aff)}, {den})"
            parts.append(f"{text} + 1" if upper else text)
    text = parts[0]
    for p in parts[1:]:
        fn = "spf_min" if upper else "spf_max"
        names.helpers.add(fn)
        text = f"{fn}({text}, {p})"
    return text


def _used_names(nest: LoopNest, statement_names: set[str]) -> set[str]:
    used = set(statement_names)
    for lv in nest.levels:
        for g in lv.guards:
            used |= g.names()
        for a, _ in lv.lower + lv.upper:
            used |= a.names()
    for g in nest.statement_guards:
        used |= g.names()
    changed = True
    while changed:
        changed = False
        for lv in nest.levels:
            if lv.kind == "assign" and lv.var in used:
                new = lv.expr.names() - used
                if new:
                    used |= new
                    changed = True
    return used


class _Writer:
    """Indented lines with a stack of scopes to close."""

    def __init__(self, indent: int = 1):
        self.lines: list[str] = []
        self.indent = indent
        self.closers: list[tuple[int, str]] = []

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text if text else "")

    def block(self, text: str) -> None:
        """Several lines (a filled template); a last line ending in '{' opens a scope."""
        rows = text.rstrip("\n").split("\n")
        for row in rows:
            self.line(row)
        for _ in range(text.count("{") - text.count("}")):
            self.closers.append((self.indent, "}"))
            self.indent += 1

    def open(self, text: str) -> None:
        self.line(text)
        self.closers.append((self.indent, "}"))
        self.indent += 1

    def mark(self, text_before_close: str) -> None:
        """Emit ``text_before_close`` when the scopes opened after this point are closed."""
        self.closers.append((self.indent, text_before_close))

    def close_to(self, depth: int) -> None:
        while len(self.closers) > depth:
            ind, text = self.closers.pop()
            self.indent = ind
            self.line(text)


def _render(name: str, **args: str) -> str:
    return template(name).substitute(**args)


@dataclass
class _FindCode:
    """C text pieces of one find decision."""

    decision: Decision
    choice: Choice
    names: CNames

    @property
    def var(self) -> str:
        return self.decision.find.var

    @property
    def state(self) -> str:
        return f"spf_pos_{self.var}"

    @property
    def table(self) -> str:
        return f"spf_map_{self.var}"

    def key_at(self, pos: str) -> list[str]:
        sub = {self.var: Aff.var(pos)}
        return [self.names.aff(Aff.var(c).substitute(sub)) for c, _ in self.decision.find.keys]

    def targets(self) -> list[str]:
        return [self.names.aff(e) for _, e in self.decision.find.keys]

    def lo(self) -> str:
        return self.names.aff(self.decision.find.lo)

    def end(self) -> str:
        return self.names.aff(self.decision.find.hi + 1)

    def hi(self) -> str:
        return self.names.aff(self.decision.find.hi)

    def advance(self, pos: str) -> str:
        """Lexicographic key(pos) < target (increasing) or > target (decreasing)."""
        keys, tgts = self.key_at(pos), self.targets()
        op = self.choice.compare
        cases = []
        for n in range(len(keys)):
            eqs = [f"{keys[m]} == {tgts[m]}" for m in range(n)]
            cases.append(" && ".join(eqs + [f"{keys[n]} {op} {tgts[n]}"]))
        return cases[0] if len(cases) == 1 else "(" + " || ".join(f"({c})" for c in cases) + ")"

    def is_match(self, pos: str) -> str:
        return " && ".join(f"{k} == {t}" for k, t in zip(self.key_at(pos), self.targets()))

    def in_range(self, pos: str) -> str:
        return f"{pos} < {self.end()}" if self.choice.direction > 0 else f"{pos} >= {self.lo()}"

    def comment(self) -> str:
        d = self.decision
        f = d.find
        conds = " && ".join(f"{self.names.aff(Aff.var(c))} == {self.names.aff(e)}"
                            for c, e in f.keys)
        c = self.choice
        what = {"seqiter": f"SeqIter: scans {'forward' if c.direction > 0 else 'backward'} "
                           "from the position the previous search stopped at",
                "hashmap": "HashMap: looks the coordinate up in a map built over the range",
                "binsearch": "BinarySearch over the sorted range"}[c.algorithm]
        why = {"seqiter": "valid because Z3 proved Eq. 3 and Eq. 4 unsatisfiable",
               "hashmap": "valid because the searched range is fixed between builds",
               "binsearch": "valid because Z3 proved the range sorted"}[c.algorithm]
        state = f"; state indices {{{', '.join(c.state)}}}" if c.algorithm != "binsearch" else ""
        return (f"find {f.var} in [{self.lo()}, {self.hi()}] with {conds}\n"
                f" * {what};\n * {why}{state}.")

    # pieces ---------------------------------------------------------------------------
    def declare(self, w: _Writer, space: IterationSpace) -> None:
        c = self.choice
        if c.algorithm == "seqiter":
            if c.array_key:
                w.line(f"spf_index_t *{self.state} = NULL;")
            else:
                w.line(f"spf_index_t {self.state} = 0;")
        elif c.algorithm == "hashmap":
            w.line(f"spf_hash {self.table} = {{0}};")

    def allocate(self, w: _Writer, space: IterationSpace) -> None:
        if self.choice.algorithm == "seqiter" and self.choice.array_key:
            extent = self.names.aff(self.choice.key_extent)
            self.names.helpers.add("spf_max")
            w.line(f"{self.state} = malloc(sizeof(spf_index_t) * (size_t)spf_max(1, {extent}));")
            w.line(f"if (!{self.state})")
            w.line("    goto spf_out_of_memory;")

    def release(self, w: _Writer) -> None:
        if self.choice.algorithm == "seqiter" and self.choice.array_key:
            w.line(f"free({self.state});")
        elif self.choice.algorithm == "hashmap":
            w.line(f"spf_hash_free(&{self.table});")

    def init(self, w: _Writer, space: IterationSpace) -> None:
        c = self.choice
        start = self.lo() if c.direction > 0 else self.hi()
        if c.algorithm == "seqiter":
            if c.array_key:
                extent = self.names.aff(c.key_extent)
                bound = self.decision.find.lo if c.direction > 0 else self.decision.find.hi
                first = self.names.aff(bound.substitute({c.array_key: Aff.var("spf_t")}))
                w.line(f"for (spf_index_t spf_t = 0; spf_t < {extent}; ++spf_t)")
                w.line(f"    {self.state}[spf_t] = {first};")
            else:
                w.line(f"{self.state} = {start};")
        elif c.algorithm == "hashmap":
            q = f"spf_q_{self.var}"
            key = self.key_at(q)[0]
            w.block(_render("find_hashmap_build.c", table=self.table, lo=self.lo(),
                            end=self.end(), q=q, key_q=key,
                            comment=f"HashMap for the find of {self.var}: "
                                    f"coordinate -> positions in [{self.lo()}, {self.hi()}]"))

    def open(self, w: _Writer) -> None:
        c = self.choice
        comment = self.comment()
        step = "++" if c.direction > 0 else "--"
        if c.algorithm == "seqiter":
            cur = self.state
            if c.array_key:
                cur = f"spf_cur_{self.var}"
                # a value that no match can have (e.g. ELL padding) must not index the array
                w.open(f"if ({c.array_key} >= 0 && {c.array_key} < "
                       f"{self.names.aff(c.key_extent)}) {{")
                w.line(f"spf_index_t {cur} = {self.state}[{c.array_key}];")
            w.block(_render("find_seqiter.c", comment=comment, in_range=self.in_range(cur),
                            advance=self.advance(cur), step=f"{step}{cur}"))
            if c.array_key:
                w.line(f"{self.state}[{c.array_key}] = {cur};")
            self._match(w, cur)
        elif c.algorithm == "binsearch":
            low, high, mid = (f"spf_low_{self.var}", f"spf_high_{self.var}",
                              f"spf_mid_{self.var}")
            # lower bound: the first position whose key does not come before the target
            w.block(_render("find_binsearch.c", comment=comment, low=low, high=high, mid=mid,
                            lo=self.lo(), end=self.end(), advance_mid=self.advance(mid)))
            self._match(w, low, forward=True)
        else:
            w.block(f"/* {comment} */")
            pos = f"spf_hit_{self.var}"
            target = self.targets()[0]
            if c.unique:
                w.block(_render("match_hash_one.c", pos=pos, table=self.table, target=target,
                                var=self.var))
            else:
                w.block(_render("match_hash_all.c", table=self.table, target=target,
                                var=self.var))

    def _match(self, w: _Writer, pos: str, forward: bool = False) -> None:
        c = self.choice
        fwd = forward or c.direction > 0
        in_range = (lambda p: f"{p} < {self.end()}") if fwd else (lambda p: f"{p} >= {self.lo()}")
        if c.unique:
            w.block(_render("match_one.c", in_range=in_range(pos),
                            is_match=self.is_match(pos), var=self.var, pos=pos))
        else:
            w.block(_render("match_all.c", var=self.var, pos=pos,
                            in_range_var=in_range(self.var), is_match_var=self.is_match(self.var),
                            step_var=f"{'++' if fwd else '--'}{self.var}"))


def _cost_c(decision: Decision, names: CNames, nest: LoopNest) -> tuple[str, str]:
    """C expressions of cost(SeqIter) and cost(HashMap) (see :class:`CostModel`)."""
    model = cost_model(nest, decision.find, decision.chosen, decision.runtime_alternative)
    owner = model.searches
    searches = f"(int64_t)({names.extent_product(owner, owner.layout.value.array)})"
    length = f"(int64_t)({names.aff(model.length)})"

    def product(terms: list[Aff]) -> str:
        return " * ".join([f"(int64_t)({names.aff(t)})" for t in terms] + [length])

    return (f"4 * {searches} + {product(model.resets_seqiter)}",
            f"12 * {searches} + 4 * {product(model.resets_hashmap)}")


def _params_only(a: Aff) -> bool:
    return all("." in n for n in a.names())


class CustomStatement:
    """A statement of its own in place of the output's (a generated conversion pass):
    ``params`` replace the output's parameters, ``lines`` are the statement (``$value``: the
    product of the factors), ``names`` the logical indices it reads; ``prologue`` and
    ``epilogue`` go before and after the loops, ``at = (level, lines)`` right after that nest
    level opens."""

    def __init__(self, params: list[str], lines: list[str], names: set[str],
                 prologue: list[str] = (), epilogue: list[str] = (),
                 at: "tuple[int, list[str]] | None" = None):
        self.params, self.lines, self.names = params, lines, names
        self.prologue, self.epilogue = list(prologue), list(epilogue)
        self.at = at


@dataclass
class KernelCode:
    """The pieces of one generated function, before they are put into a file."""

    signature: str
    body: list[str]
    helpers: set[str]
    layouts: dict[str, Layout]
    hashmap: bool
    assembly: bool          # uses templates/assembly.c
    storage: str            # the output's storage functions, put before the kernel


def emit_kernel(nest: LoopNest, name: str, header_lines: list[str],
                decisions: list[Decision] = (), level_notes: dict[str, str] | None = None,
                parallel_loop: str | None = None, assembly: AssemblyPlan | None = None) -> str:
    """The C source of one kernel function (returns 0, 1 when out of memory, 2 when an
    assembled output outgrows its arrays); with an ``assembly`` plan, the file also defines
    ``<name>_bound`` (sizes the output) and the functions that store entries in the output
    layout."""
    code = kernel_code(nest, name, decisions, level_notes, parallel_loop, assembly)
    before = code.storage
    if assembly is not None:
        bound = kernel_code(nest, f"{name}_bound", decisions, level_notes, None, assembly,
                            count=True)
        before += "\n\n" + _bound_comment() + _function(bound)
        if assembly.mode == "bucket":
            hist = kernel_code(nest, f"{name}_histogram", decisions, level_notes, None,
                               assembly, count=True, histogram=True)
            before += ("\n\n/* Bucket mode, first pass: the entries of each "
                       f"{assembly.key[0]} (an upper bound: equal coordinates are added "
                       "later). */\n" + _function(hist, static=True))
    return render_file(header_lines, code.helpers, list(code.layouts.values()), code.signature,
                       code.body, code.hashmap, assembly=code.assembly, before=before)


def _bound_comment() -> str:
    return ("/* The number of statement instances: an upper bound on the output's entries, "
            "which sizes its\n * arrays before the kernel runs (the loops without the "
            "statement's work). */\n")


def _function(code: KernelCode, static: bool = False) -> str:
    return f"{'static ' if static else ''}{code.signature}\n{{\n" + "\n".join(code.body) + "\n}"


def emit_sum(name: str, header_lines: list[str], expr, tensor_layouts: dict[str, Layout],
             terms: list[KernelCode], term_args: list[list[str]], out_space: IterationSpace,
             parallel: bool, assembly: AssemblyPlan | None = None,
             bounds: list[KernelCode] = ()) -> str:
    """A sum by statement splitting (paper Sec. 4): one static function per product term,
    each adding into the output (a dense array or scalar), or each producing a sorted run of
    the assembled output's entries (``bounds``: the terms' instance counters); the kernel
    zeroes the output, or merges the runs and appends their union to the output."""
    helpers: set[str] = set()
    layouts: dict[str, Layout] = {}
    for t in terms:
        helpers |= t.helpers
        for lay in t.layouts.values():      # the parts of a union layout share one struct
            layouts.setdefault(struct_name(lay), lay)
    out = expr.output.tensor
    assembled = assembly is not None
    names = CNames(out_space, helpers)
    params = []
    for acc in (expr.output, *expr.factors):
        if not acc.indices:
            params.append(f"{'double *restrict' if acc is expr.output else 'double'} {acc.tensor}")
        elif acc is expr.output and assembled:
            lay = assembly.output.layout
            layouts.setdefault(struct_name(lay), lay)
            params.append(f"{struct_name(lay)} *restrict {out}, int64_t *restrict {out}_size")
        else:
            const = "" if acc is expr.output else "const "
            lay = tensor_layouts[acc.tensor]
            layouts.setdefault(struct_name(lay), lay)
            params.append(f"{const}{struct_name(lay)} *restrict {acc.tensor}")
    signature = f"int {name}({', '.join(params)})"
    w = _Writer()
    w.line(f"/* {expr}: statement splitting, one function per term; no term reads the")
    w.line(" * implicit zeros of another term's operands */")
    extra = ""
    if assembled:
        n = len(terms)
        w.line(f"spf_stream spf_runs[{n}] = {{{{0}}}};   /* one sorted run per term */")
        w.line("spf_stream spf_union = {0};")
        w.line("int spf_status =")
        for k, args in enumerate(term_args):
            args = [f"&spf_runs[{k}]" if a == out else a for a in args]
            w.line(f"    {name}_term{k}({', '.join(args)}) ||")
        w.line(f"    spf_stream_merge(&spf_union, spf_runs, {n});")
        w.line(f"for (int k = 0; k < {n}; ++k)")
        w.line("    spf_stream_free(&spf_runs[k]);")
        w.open("if (!spf_status) {")
        exts = ", ".join(names.aff(e) for e in assembly.extents)
        w.line(f"const int64_t spf_ext[{len(assembly.extents)}] = {{{exts}}};")
        w.line(f"{name}_cursor spf_cur;")
        w.line(f"{name}_cursor_init(&spf_cur, spf_ext, {out}_size);")
        w.line("for (int64_t spf_e = 0; spf_e < spf_union.n && !spf_status; ++spf_e)")
        w.line(f"    spf_status = {name}_append(&spf_cur, {out}, spf_union.key[spf_e], "
               "spf_union.val[spf_e]);")
        w.line("if (!spf_status)")
        w.line(f"    {name}_finish(&spf_cur, {out}, {out}_size);")
        w.close_to(len(w.closers) - 1)
        w.line("spf_stream_free(&spf_union);")
        w.line("return spf_status;")
        count_calls = []
        for k, args in enumerate(term_args):
            args = ["&spf_n" if a == out else a for a in args]
            count_calls.append(f"    if ({name}_term{k}_bound({', '.join(args)}))")
            count_calls.append("        return 1;")
            count_calls.append("    *spf_bound += spf_n;")
        bound_params = params[1:]      # the inputs
        extra = "\n\n".join(
            [emit_assembly.functions(assembly.storage, name, struct_name(assembly.output.layout),
                                     False)]
            + [_function(b, static=True) for b in bounds]
            + [_bound_comment() + f"int {name}_bound(int64_t *restrict spf_bound, "
               f"{', '.join(bound_params)})\n{{\n    int64_t spf_n = 0;\n"
               "    *spf_bound = 0;\n" + "\n".join(count_calls) + "\n    return 0;\n}"])
    else:
        if not expr.accumulate:
            if not expr.output.indices:
                w.line(f"*{out} = 0.0;")
            else:
                use = out_space.use(out)
                arr = use.layout.value.array
                size = names.extent_product(use, arr)
                if parallel:
                    w.line("#pragma omp parallel for schedule(static)")
                    w.line(f"for (size_t spf_z = 0; spf_z < {size}; ++spf_z)")
                    w.line(f"    {out}->{arr}[spf_z] = 0.0;")
                else:
                    w.line(f"memset({out}->{arr}, 0, sizeof(double) * {size});")
        for k, args in enumerate(term_args):
            w.line(f"if ({name}_term{k}({', '.join(args)}))")
            w.line("    return 1;")
        w.line("return 0;")
    functions = "\n\n".join(_function(t, static=True) for t in terms)
    return render_file(header_lines, helpers, list(layouts.values()), signature, w.lines,
                       any(t.hashmap for t in terms), assembly=assembled,
                       before=functions + ("\n\n" + extra if extra else ""), merge=assembled)


def kernel_code(nest: LoopNest, name: str, decisions: list[Decision] = (),
                level_notes: dict[str, str] | None = None, parallel_loop: str | None = None,
                assembly: AssemblyPlan | None = None, target: str = "output",
                count: bool = False, histogram: bool = False,
                custom: "CustomStatement | None" = None) -> KernelCode:
    """The signature and body of one kernel function (see :func:`emit_kernel`).  An
    assembled output goes to its layout's arrays (``target="output"``) or to a sorted run
    (``"stream"``, a term of a sum); ``count=True`` gives the function that counts the
    statement instances instead (``<name>_bound``), and ``histogram=True`` with it the
    function counting the entries of each bucket (``<name>_histogram``, bucket mode)."""
    space = nest.space
    expr = space.expr
    helpers: set[str] = set()
    names = CNames(space, helpers)
    level_notes = level_notes or {}

    # signature and structs (one typedef per distinct layout)
    layouts: dict[str, Layout] = {}
    params = []
    out_name = expr.output.tensor
    for acc in (expr.output, *expr.factors):
        if custom is not None and acc is expr.output:
            params += custom.params
            continue
        if not acc.indices:
            ctype = "double *restrict" if acc is expr.output else "double"
            params.append(f"{ctype} {acc.tensor}")
            continue
        if assembly is not None and acc is expr.output:
            layouts.setdefault(assembly.output.layout.key, assembly.output.layout)
            if histogram:
                params.append("spf_index_t *restrict spf_hist")
            elif count:
                params.append("int64_t *restrict spf_bound")
            elif target == "stream":
                params.append(f"spf_stream *restrict {acc.tensor}")
            else:
                params.append(f"{struct_name(assembly.output.layout)} *restrict {acc.tensor}, "
                              f"int64_t *restrict {acc.tensor}_size")
            continue
        use = space.use(acc.tensor)
        layouts.setdefault(use.layout.key, use.layout)
        const = "" if use.is_output else "const "
        params.append(f"{const}{struct_name(use.layout)} *restrict {use.name}")
    signature = f"int {name}({', '.join(params)})"

    # statement
    factors = []
    stmt_names: set[str] = set()
    for acc in expr.factors:
        if not acc.indices:
            factors.append(acc.tensor)
            continue
        use = space.use(acc.tensor)
        factors.append(names.value(use))
        stmt_names |= _value_names(use)
    rhs = " * ".join(factors)
    if expr.sign < 0:
        rhs = f"-({rhs})"
    out_use = None if not expr.output.indices or assembly or custom else space.use(out_name)
    if custom is not None:
        out_vars = set(custom.names)
        stmt_names |= out_vars
    elif assembly is not None and count:
        out_vars = set()
        stmt_names = stmt_names if assembly.drop_zeros else set()
        if histogram:
            stmt_names |= {assembly.key[0]}
    elif assembly is not None:
        out_vars = set(assembly.key)
        stmt_names |= out_vars
    elif out_use is not None:
        target = names.value(out_use)
        out_vars = _value_names(out_use)
        stmt_names |= out_vars
    else:
        target = f"*{out_name}"
        out_vars = set()
    used = _used_names(nest, stmt_names)
    for d in decisions:
        for c, e in d.find.keys:
            used |= e.names() | Aff.var(c).names()
        used |= d.find.lo.names() | d.find.hi.names()
        for c in (d.chosen, d.runtime_alternative):
            if c is not None and c.array_key:
                used.add(c.array_key)

    w = _Writer()
    finds = [_FindCode(d, d.chosen, names) for d in decisions if d.chosen is not None]
    alternative = next((d for d in decisions if d.runtime_alternative is not None), None)
    costs = _cost_c(alternative, names, nest) if alternative else None
    alt_finds = []
    if costs:
        alt_finds = [_FindCode(d, d.runtime_alternative if d is alternative else d.chosen, names)
                     for d in decisions if d.chosen is not None]
    stateful = finds + [a for a in alt_finds if a.choice is not a.decision.chosen]
    for f in stateful:
        f.declare(w, space)
    if assembly is not None and count:
        if not histogram:
            w.line("int64_t spf_n = 0;")
    elif assembly is not None:    # before anything that can fail: the exits release it
        emit_assembly.declare(w, assembly, names, name, target)
    for f in stateful:
        f.allocate(w, space)
    if assembly is not None and not count and assembly.mode == "bucket":
        inputs = [acc.tensor if not acc.indices else space.use(acc.tensor).name
                  for acc in expr.factors]
        for text in emit_assembly.bucket_start(assembly, name, inputs):
            w.line(text)
    for text in custom.prologue if custom is not None else ():
        w.line(text)
    positions = [k for k, lv in enumerate(nest.levels) if lv.var in out_vars]
    acc_level = max(positions) if positions else -1
    use_acc = assembly is None and custom is None and \
        any(lv.kind == "loop" for lv in nest.levels[acc_level + 1:])
    # each element written once, by a store of its whole sum: no zeroing pass, no re-read
    store = use_acc and out_use is not None and not expr.accumulate and \
        _stores_every_element(nest, decisions, acc_level)
    if assembly is None and custom is None and not expr.accumulate and not store:
        if out_use is None:
            w.line(f"*{out_name} = 0.0;")
        else:
            arr = out_use.layout.value.array
            size = names.extent_product(out_use, arr)
            if parallel_loop:      # zero the output with all threads (it can be large)
                w.line("#pragma omp parallel for schedule(static)")
                w.line(f"for (size_t spf_z = 0; spf_z < {size}; ++spf_z)")
                w.line(f"    {out_name}->{arr}[spf_z] = 0.0;")
            else:
                w.line(f"memset({out_name}->{arr}, 0, sizeof(double) * {size});")

    hooks: dict[int, Callable[[_Writer], None]] = {}
    if use_acc:
        def open_acc(w: _Writer) -> None:
            w.line("double spf_acc = 0.0;")
            w.mark(f"{target} {'=' if store else '+='} spf_acc;")
        hooks[acc_level] = open_acc
    if custom is not None:
        statement = [line.replace("$value", rhs) for line in custom.lines]
    elif assembly is None:
        statement = [f"{'spf_acc' if use_acc else target} += {rhs};"]
    elif count:   # a find's matched position is not needed to count the match
        statement = [f"(void){d.find.var};" for d in decisions if d.chosen is not None]
        statement += emit_assembly.histogram_statement(assembly) if histogram else ["++spf_n;"]
    else:
        statement = emit_assembly.statement(
            assembly, "spf_v" if assembly.drop_zeros else rhs, name, target)
    if assembly is not None and assembly.drop_zeros:
        statement = [f"const double spf_v = {rhs};", "if (spf_v != 0.0) {   /* zeros are not stored */",
                     *("    " + t for t in statement), "}"]

    if assembly is not None and not count and assembly.group_level is not None:
        level, previous = assembly.group_level, hooks.get(assembly.group_level)

        def check_group(w: _Writer, previous=previous) -> None:
            if previous:
                previous(w)
            for text in emit_assembly.group_check(assembly, name, target):
                w.line(text)
        hooks[level] = check_group

    if custom is not None and custom.at is not None:
        level, previous = custom.at[0], hooks.get(custom.at[0])

        def at_level(w: _Writer, previous=previous) -> None:
            if previous:
                previous(w)
            for text in custom.at[1]:
                w.line(text)
        hooks[level] = at_level

    for t in nest.space.tiles:
        conds = tile_guards(nest, decisions, t, names)
        if conds:
            k = [lv.var for lv in nest.levels].index(t)
            previous = hooks.get(k)

            def skip(w: _Writer, conds=conds, previous=previous) -> None:
                if previous:
                    previous(w)
                w.line("/* skip tiles that cannot hold a match (the keys are sorted) */")
                w.open(f"if ({' && '.join(conds)}) {{")
            hooks[k] = skip

    def write_nest(codes: list[_FindCode]) -> None:
        depth = len(w.closers)
        pragmas: dict[str, str] = {}
        if parallel_loop:
            loops = [lv.var for lv in nest.levels if lv.kind == "loop"]
            par = [lv.var for lv in nest.levels].index(parallel_loop)
            private = [c.state for c in codes if c.choice.algorithm == "seqiter"
                       and not c.choice.array_key and c.choice.init_level > par]
            if parallel_loop == loops[0]:
                pragma = "#pragma omp parallel for schedule(guided,32)"
            else:     # every thread runs the outer loops; this one's iterations are shared
                pragmas[loops[0]] = "#pragma omp parallel"
                pragma = "#pragma omp for schedule(static)"
            if private:
                pragma += f" private({', '.join(private)})"
            if use_acc and acc_level == -1:
                pragma += " reduction(+:spf_acc)"
            pragmas[parallel_loop] = pragma
        write_levels(w, nest, names, used, codes, statement, hooks, level_notes, pragmas)
        w.close_to(depth)

    if costs:
        w.line("/* Auto: SeqIter and HashMap are both valid; pick the cheaper from the operand")
        w.line(" * sizes: cost(SeqIter) = 4 * W + R_s * L, cost(HashMap) = 12 * W + 4 * R_h * L")
        w.line(" * (W searches, L range length, R_s / R_h state resets; see CostModel). */")
        w.line(f"const int64_t spf_cost_seqiter = {costs[0]};")
        w.line(f"const int64_t spf_cost_hashmap = {costs[1]};")
        w.open("if (spf_cost_hashmap < spf_cost_seqiter) {")
        write_nest(alt_finds)
        w.close_to(len(w.closers) - 1)
        w.open("else {")
        write_nest(finds)
        w.close_to(len(w.closers) - 1)
    else:
        write_nest(finds)
    building = assembly is not None and not count
    for text in custom.epilogue if custom is not None else ():
        w.line(text)
    if count and not histogram:
        w.line("*spf_bound = spf_n;")
    elif building:
        emit_assembly.finish(w, assembly, name, target)
    releases = [f for f in stateful if f.choice.algorithm == "hashmap" or f.choice.array_key]

    def release_all() -> None:
        for f in releases:
            f.release(w)
        if building:
            emit_assembly.release(w, assembly, target)

    if releases or building:
        release_all()
        w.line("return 0;")
        if any("goto spf_out_of_memory" in line for line in w.lines):
            w.lines.append("spf_out_of_memory:")
            if building and target == "output":
                w.line("spf_status = 1;")
        if building and target == "output":
            w.lines.append("spf_fail:")
            release_all()
            w.line("return spf_status;")
        else:
            release_all()
            w.line("return 1;")
    else:
        w.line("return 0;")

    hashmap = any(f.choice.algorithm == "hashmap" for f in finds + alt_finds)
    storage = ""
    if building and target == "output" and assembly.mode != "bucket":
        storage = emit_assembly.functions(assembly.storage, name,
                                          struct_name(assembly.output.layout),
                                          assembly.mode == "workspace", assembly.any_order,
                                          assembly.last_only)
    return KernelCode(signature, w.lines, helpers, layouts, hashmap, building, storage)


def render_file(header_lines: list[str], helpers: set[str], layouts: list[Layout],
                signature: str, body: list[str], hashmap: bool = False,
                assembly: bool = False, before: str = "", merge: bool = False) -> str:
    """The whole C file from ``templates/kernel.c`` (``assembly``: the kernel assembles a
    sparse output; ``before``: functions the kernel calls; ``merge``: the helper merging
    sorted runs)."""
    structs = "\n\n".join(struct_typedef(lay) for lay in layouts)
    helper_text = "\n".join(_HELPERS[h] for h in sorted(helpers))
    if before:
        structs = (structs + "\n\n" if structs else "") + before + "\n"
    for used, file in ((hashmap, "hashmap.c"), (assembly, "assembly.c"),
                       (merge, "assembly_merge.c")):
        if used:
            helper_text = (helper_text + "\n\n" if helper_text else "") + \
                (TEMPLATE_DIR / file).read_text().rstrip()
    text = template("kernel.c").substitute(
        header="\n".join(f" * {h}" if h else " *" for h in header_lines),
        index_type=index_type_of(layouts),
        helpers=("\n" + helper_text + "\n") if helper_text else "",
        structs=structs + ("\n" if structs else ""),
        signature=signature,
        body="\n".join(body))
    return text


def index_type_of(layouts: list[Layout]) -> str:
    """The one index width of ``layouts`` (``"int32"`` when there are none)."""
    widths = {lay.index_type for lay in layouts} or {"int32"}
    if len(widths) > 1:
        raise SpecError("layouts of one kernel must share an index_type, got "
                        + ", ".join(f"{lay.name}: {lay.index_type}" for lay in layouts))
    return widths.pop()


def _stores_every_element(nest: LoopNest, decisions: list[Decision], acc_level: int) -> bool:
    """Whether the loops down to the accumulator's level run every output coordinate exactly
    once (each output index is one of those loops, over its whole extent, with no guard or
    find on the way): then the accumulated sum is stored, and the output needs no zeroing."""
    space = nest.space
    head = nest.levels[:acc_level + 1]
    loops = {lv.var: lv for lv in head if lv.kind == "loop"}
    indices = space.expr.output.indices
    if len(loops) != len(indices) or any(lv.guards for lv in head) \
            or any(d.find.level <= acc_level for d in decisions):
        return False
    assigned = {lv.var: lv.expr for lv in head if lv.kind == "assign"}
    covered = set()
    for idx in indices:
        expr = Aff.var(idx) if idx in loops else assigned.get(idx)
        var = next(iter(expr.names()), None) if expr is not None else None
        if var not in loops or expr != Aff.var(var) or var in covered:
            return False
        lv = loops[var]
        if lv.lower != [(Aff.num(0), 1)] or lv.upper != [(space.extent[idx] - 1, 1)]:
            return False
        covered.add(var)
    return True


def write_levels(w: _Writer, nest: LoopNest, names: CNames, used: set[str],
                 codes: list["_FindCode"], statement: list[str],
                 hooks: dict[int, Callable[[_Writer], None]],
                 level_notes: dict[str, str] | None = None,
                 pragmas: dict[str, str] | None = None) -> None:
    """Loops, assignments, guards and finds of ``nest`` around ``statement``; ``hooks[k]``
    runs right after level k opens (``hooks[-1]`` before the first level); ``pragmas`` maps a
    loop variable to the OpenMP line put right before that loop."""
    pragmas = pragmas or {}
    level_notes = level_notes or {}
    by_level = {c.decision.find.level: c for c in codes}
    key_guards: dict[int, list] = {k: [] for k in range(len(nest.levels))}
    for c in codes:
        for lvl, (call, e) in zip(c.decision.find.key_levels, c.decision.find.keys):
            key_guards[lvl].append((call, e))
    inits: dict[int, list[_FindCode]] = {}
    for c in codes:
        if c.choice.algorithm in ("seqiter", "hashmap"):
            inits.setdefault(c.choice.init_level, []).append(c)
    if -1 in hooks:
        hooks[-1](w)
    for k, lv in enumerate(nest.levels):
        for c in inits.get(k, []):
            c.init(w, nest.space)
        note = level_notes.get(lv.var)
        if note and k not in by_level:
            w.line(f"/* {note} */")
        if lv.kind == "loop":
            if k in by_level:
                by_level[k].open(w)
            else:
                lo = _bound(names, lv.lower, upper=False)
                hi = _bound(names, lv.upper, upper=True)
                if lv.var in pragmas:
                    w.line(pragmas[lv.var])
                w.open(f"for (spf_index_t {lv.var} = {lo}; {lv.var} < {hi}; ++{lv.var}) {{")
        elif lv.kind == "assign" and lv.var in used:
            w.line(f"const spf_index_t {lv.var} = {names.aff(lv.expr)};")
        guards = [g for g in lv.guards
                  if not any(_is_key_guard(g, call, e) for call, e in key_guards[k])]
        if guards:
            w.open(f"if ({' && '.join(names.condition(g) for g in guards)}) {{")
        if k in hooks:
            hooks[k](w)
    if nest.statement_guards:
        w.open(f"if ({' && '.join(names.condition(g) for g in nest.statement_guards)}) {{")
    for text in statement:
        w.line(text)


def tile_guards(nest: LoopNest, decisions: list[Decision], tile_var: str,
                names: CNames | None = None) -> list[str]:
    """Tile-skipping conditions (paper Fig. 8) for the tile loop ``tile_var``: when the tiled
    loop is a guard loop searching ``f(v) = e`` and Z3 proves the keys sorted over its range,
    a tile runs only if ``f(first) <= e <= f(last)`` for its first and last position."""
    var, _ = nest.space.tiles[tile_var]
    names = names or CNames(nest.space, set())
    order = [lv.var for lv in nest.levels]
    out = []
    for d in decisions:
        f = d.find
        if f.var != var or d.chosen is not None or len(f.keys) != 1:
            continue
        call, e = f.keys[0]
        defined = set(order[:order.index(tile_var)])
        if not e.names() <= defined | {n for n in e.names() if "." in n}:
            continue
        from .synthesis import _Checker
        chk = _Checker(nest, f)
        compare = next((c for c in ("<", ">") if chk.sorted(c)[0]), None)
        if compare is None:
            continue
        lv = nest.level(var)
        first = _bound(names, lv.lower, upper=False)
        last = f"{_bound(names, lv.upper, upper=True)} - 1"
        key_first = names.aff(Aff.var(call).substitute({var: Aff.var("spf_POS")})) \
            .replace("spf_POS", f"({first})")
        key_last = names.aff(Aff.var(call).substitute({var: Aff.var("spf_POS")})) \
            .replace("spf_POS", f"({last})")
        target = names.aff(e)
        lo_op, hi_op = ("<=", ">=") if compare == "<" else (">=", "<=")
        out.append(f"{first} <= {last} && {key_first} {lo_op} {target} && "
                   f"{key_last} {hi_op} {target}")
    return out


def _is_key_guard(g: Constraint, call: UFCall, e: Aff) -> bool:
    k = g.aff.coeff(call)
    return g.is_eq and abs(k) == 1 and (g.aff - Aff.var(call, k)) * -k == e
