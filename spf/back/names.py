"""C names of one iteration space: terms, index-array reads, values, loop bounds, structs."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..front import index_expr as ie
from ..front.layout import INDEX_TYPE, FieldSpec, Layout
from ..front.terms import Aff, Atom, Constraint, FloorDiv, UFCall, format_constraint, format_sum
from ..front.value_types import Kind, ValueType
from ..middle.iteration_space import IterationSpace, TensorUse
from ..middle.scan import LevelKind, LoopNest

WIDTH_C_TYPES = {"int32": "int32_t", "int64": "int64_t"}


def field_ctype(spec: FieldSpec, layout: Layout) -> str:
    """The C type of a field's elements: an index array's own width, else the layout's index
    type (``spf_index_t``); a value array's, the layout's value type."""
    if spec.ctype == INDEX_TYPE:
        return WIDTH_C_TYPES[spec.width] if spec.width else "spf_index_t"
    return layout.value_type.c

def scalar_param(name: str, vt: ValueType, output: bool) -> str:
    """A scalar operand's C parameter: by value, but a complex input by a const pointer
    (ctypes passes no complex numbers by value); an output always by pointer."""
    if output:
        return f"{vt.c} *restrict {name}"
    if vt.kind is Kind.COMPLEX:
        return f"const {vt.c} *restrict {name}"
    return f"{vt.c} {name}"


def scalar_value(name: str, vt: ValueType) -> str:
    """The value of a scalar input parameter (:func:`scalar_param`)."""
    return f"(*{name})" if vt.kind is Kind.COMPLEX else name


HELPERS = {
    "spf_math": "#include <math.h>",
    # <tgmath.h> brings <complex.h>, whose macro I would rename a tensor called I
    "spf_tgmath": "#include <tgmath.h>\n#undef I",
    "spf_min": "static inline int64_t spf_min(int64_t a, int64_t b) { return a < b ? a : b; }",
    "spf_max": "static inline int64_t spf_max(int64_t a, int64_t b) { return a > b ? a : b; }",
    "spf_floord": "static inline int64_t spf_floord(int64_t n, int64_t d) "
                  "{ return n >= 0 ? n / d : -((-n + d - 1) / d); }",
    "spf_ceild": "static inline int64_t spf_ceild(int64_t n, int64_t d) "
                 "{ return n >= 0 ? (n + d - 1) / d : -((-n) / d); }",
    "spf_omp": "#ifdef _OPENMP\n#include <omp.h>\n"
               "static inline int spf_max_threads(void) { return omp_get_max_threads(); }\n"
               "static inline int spf_thread(void) { return omp_get_thread_num(); }\n"
               "static inline int spf_team_size(void) { return omp_get_num_threads(); }\n#else\n"
               "static inline int spf_max_threads(void) { return 1; }\n"
               "static inline int spf_thread(void) { return 0; }\n"
               "static inline int spf_team_size(void) { return 1; }\n#endif",
}


def struct_name(layout: Layout) -> str:
    suffix = "".join(f"_{k}{v}" for k, v in sorted(layout.params.items()))
    values = "" if layout.value_type.is_float64 else f"_{layout.value_type.name}"
    return f"spf_{layout.name}{suffix}{values}"


def struct_typedef(layout: Layout) -> str:
    lines = [f"/* {layout.name}: {layout.description} */" if layout.description else
             f"/* {layout.name} */",
             f"typedef struct {struct_name(layout)} {{"]
    for f in layout.fields.values():
        ctype = field_ctype(f, layout)
        if f.is_array:
            extents = "][".join(ie.to_c(d, str, lambda n, a: f"{n}({', '.join(a)})")
                                for d in f.dims)
            lines.append(f"    {ctype} *restrict {f.name};  /* [{extents}] */")
        else:
            lines.append(f"    {ctype} {f.name};")
    lines.append(f"}} {struct_name(layout)};")
    return "\n".join(lines)


@dataclass
class CNames:
    """Prints terms of one iteration space as C.

    With ``hoist``, a tensor's fields are read through locals declared once at the top of
    the function (:meth:`hoisted`): ``const int32_t *restrict A_rowPtr = A->rowPtr;``.  The
    ``restrict`` locals tell the compiler that the output's array overlaps no input (spf
    refuses aliased operands), so it keeps loads and address arithmetic out of inner loops
    and vectorizes them; struct members behind a ``restrict`` struct pointer do not say that.
    Tensors in ``direct`` (an output written by assembly code) keep ``T->field``."""

    space: IterationSpace
    helpers: set
    hoist: bool = False
    direct: frozenset = frozenset()
    fields: dict = field(default_factory=dict)      # (tensor, field) -> local name
    redirect: dict = field(default_factory=dict)    # (tensor, field) -> C read instead

    def field(self, use: TensorUse, fld: str, own: bool = False) -> str:
        """``use``'s field ``fld`` as C (``own``: the field itself, not what it is redirected
        to)."""
        if (use.name, fld) in self.redirect and not own:
            return self.redirect[use.name, fld]
        if not self.hoist or use.name in self.direct:
            return f"{use.name}->{fld}"
        key = (use.name, fld)
        if key not in self.fields:
            taken = set(self.fields.values()) | {u.name for u in self.space.uses} \
                | {u.var(p) for u in self.space.uses for p in u.layout.indices}
            local = f"{use.name}_{fld}"
            while local in taken:
                local += "_"
            self.fields[key] = local
        return self.fields[key]

    def hoisted(self) -> list[Hoisted]:
        """``(ctype, local, member, const)`` of every field read through a local."""
        out = []
        order = [u.name for u in self.space.uses]
        for (tensor, fld), local in sorted(self.fields.items(), key=lambda kv: (
                order.index(kv[0][0]), list(self.space.use(kv[0][0]).layout.fields).index(
                    kv[0][1]))):
            use = self.space.use(tensor)
            spec = use.layout.fields[fld]
            ctype = field_ctype(spec, use.layout)
            writes = use.is_output and fld == use.layout.value.array
            out.append(Hoisted(f"{ctype} *restrict" if spec.is_array else ctype, local,
                               f"{tensor}->{fld}", const=not writes))
        return out

    def tensor_of(self, qualified: str) -> tuple[TensorUse, str]:
        tensor, _, fld = qualified.partition(".")
        out = self.space.assembled
        if out is not None and out.name == tensor:      # its extents: the call's shape
            return out, fld
        return self.space.use(tensor), fld

    def atom(self, atom: Atom) -> str:
        if isinstance(atom, UFCall):
            use, fld = self.tensor_of(atom.name)
            return self.array_read(use, fld, [self.aff(a) for a in atom.args])
        if isinstance(atom, FloorDiv):
            self.helpers.add("spf_floord")
            return f"spf_floord({self.aff(atom.num)}, {atom.den})"
        if "." in atom:
            use, fld = self.tensor_of(atom)
            return self.field(use, fld)
        return atom

    def aff(self, a: Aff) -> str:
        return format_sum(a.terms, a.const, self.atom)

    def condition(self, c: Constraint) -> str:
        return format_constraint(c, self.atom, eq_op="==")

    def array_read(self, use: TensorUse, fld: str, args: list[str]) -> str:
        spec = use.layout.fields[fld]
        index = args[0]
        for dim, arg in zip(spec.dims[1:], args[1:]):
            extent = ie.to_c(dim, lambda n: self.field(use, n),
                             lambda n, a: self.array_read(use, n, a))
            index = f"(int64_t)({index}) * {extent} + {arg}"
        return f"{self.field(use, fld)}[{index}]"

    def value(self, use: TensorUse) -> str:
        """The value expression of ``use`` at the current layout indices."""
        ref = use.layout.value
        local = set(use.layout.indices)

        def name(n: str) -> str:
            return use.var(n) if n in local else self.field(use, n)

        subs = [ie.to_c(s, name, lambda n, a: self.array_read(use, n, a), wide=True)
                for s in ref.subscripts]
        return self.array_read(use, ref.array, subs)

    def extent_product(self, use: TensorUse, fld: str) -> str:
        spec = use.layout.fields[fld]

        def extent(d: ie.IExpr) -> str:
            return ie.to_c(d, lambda n: self.field(use, n),
                           lambda n, a: self.array_read(use, n, a))
        return " * ".join(f"(size_t)({extent(d)})"
                          for d in spec.dims)


@dataclass(frozen=True)
class Hoisted:
    """A field read through a local: ``[const] ctype local = member;``."""

    ctype: str
    local: str
    member: str
    const: bool


def value_names(use: TensorUse) -> set[str]:
    out: set[str] = set()
    local = set(use.layout.indices)
    for s in use.layout.value.subscripts:
        out |= {use.var(n) for n in ie.names(s) if n in local}
    return out


def loop_bound(names: CNames, bounds: list[tuple[Aff, int]], upper: bool) -> str:
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


def used_names(nest: LoopNest, statement_names: set[str],
               printed: Callable[[Constraint], bool] = lambda g: True) -> set[str]:
    """The names the code of ``nest`` around a statement reading ``statement_names`` reads
    (``printed``: whether a guard is printed as an ``if``; a find's key guards are not)."""
    used = set(statement_names)
    for lv in nest.levels:
        for g in lv.guards:
            if printed(g):
                used |= g.names()
        for a, _ in lv.lower + lv.upper:
            used |= a.names()
    for g in nest.statement_guards:
        used |= g.names()
    changed = True
    while changed:
        changed = False
        for lv in nest.levels:
            if lv.kind is LevelKind.ASSIGN and lv.var in used and lv.expr is not None:
                new = lv.expr.names() - used
                if new:
                    used |= new
                    changed = True
    return used
