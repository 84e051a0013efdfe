"""C emission: one self-contained function (plus struct typedefs) from a scanned loop nest.

Index-array reads are printed inline (``A->colIdx[A_pj]``); assignments become
``const int`` locals; a reduction whose output element is fixed across the inner loops is
accumulated in a local scalar.  The file skeleton is ``templates/kernel.c``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

from . import index_expr as ie
from .iteration_space import IterationSpace, TensorUse
from .layout import Layout
from .scan import Level, LoopNest
from .terms import Aff, Constraint, FloorDiv, UFCall, format_constraint, format_sum

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"
C_TYPES = {"int": "int32_t", "double": "double"}

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


def emit_kernel(nest: LoopNest, name: str, header_lines: list[str],
                level_notes: dict[str, str] | None = None) -> str:
    """The C source of one kernel function."""
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
        if not acc.indices:
            ctype = "double *restrict" if acc is expr.output else "double"
            params.append(f"{ctype} {acc.tensor}")
            continue
        use = space.use(acc.tensor)
        layouts.setdefault(use.layout.key, use.layout)
        const = "" if use.is_output else "const "
        params.append(f"{const}{struct_name(use.layout)} *restrict {use.name}")
    signature = f"void {name}({', '.join(params)})"

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
    out_use = None if not expr.output.indices else space.use(out_name)
    if out_use is not None:
        target = names.value(out_use)
        out_vars = _value_names(out_use)
        stmt_names |= out_vars
    else:
        target = f"*{out_name}"
        out_vars = set()
    used = _used_names(nest, stmt_names)

    body: list[str] = []
    indent = 1

    def line(text: str) -> None:
        body.append("    " * indent + text)

    if not expr.accumulate:
        if out_use is None:
            line(f"*{out_name} = 0.0;")
        else:
            arr = out_use.layout.value.array
            line(f"memset({out_name}->{arr}, 0, sizeof(double) * "
                 f"{names.extent_product(out_use, arr)});")

    # where the output element is fixed: accumulate in a local scalar below that level
    positions = [k for k, lv in enumerate(nest.levels) if lv.var in out_vars]
    acc_level = max(positions) if positions else -1
    inner_loops = any(lv.kind == "loop" for lv in nest.levels[acc_level + 1:])
    use_acc = inner_loops
    closers: list[tuple[int, str | None]] = []   # (indent, text before closing)

    def open_acc() -> None:
        line("double spf_acc = 0.0;")

    if use_acc and acc_level == -1:
        open_acc()
    for k, lv in enumerate(nest.levels):
        note = level_notes.get(lv.var)
        if note:
            line(f"/* {note} */")
        if lv.kind == "loop":
            lo = _bound(names, lv.lower, upper=False)
            hi = _bound(names, lv.upper, upper=True)
            line(f"for (int {lv.var} = {lo}; {lv.var} < {hi}; ++{lv.var}) {{")
            closers.append((indent, None))
            indent += 1
        elif lv.kind == "assign" and lv.var in used:
            line(f"const int {lv.var} = {names.aff(lv.expr)};")
        if lv.guards:
            line(f"if ({' && '.join(names.condition(g) for g in lv.guards)}) {{")
            closers.append((indent, None))
            indent += 1
        if use_acc and k == acc_level:
            open_acc()
            closers.append((indent, f"{target} += spf_acc;"))
    if nest.statement_guards:
        line(f"if ({' && '.join(names.condition(g) for g in nest.statement_guards)}) {{")
        closers.append((indent, None))
        indent += 1
    line(f"{'spf_acc' if use_acc else target} += {rhs};")
    for ind, before in reversed(closers):
        if before is not None:
            indent = ind
            line(before)
        else:
            indent = ind
            line("}")
    if use_acc and acc_level == -1:
        line(f"{target} += spf_acc;")

    structs = "\n\n".join(struct_typedef(lay) for lay in layouts.values())
    helper_text = "\n".join(_HELPERS[h] for h in sorted(helpers))
    return template("kernel.c").substitute(
        header="\n".join(f" * {h}" if h else " *" for h in header_lines),
        helpers=("\n" + helper_text + "\n") if helper_text else "",
        structs=structs + ("\n" if structs else ""),
        signature=signature,
        body="\n".join(body))
