"""C names of one iteration space: terms, index-array reads, values, loop bounds, structs."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..front import index_expr as ie
from ..front.c_reserved import reserved_in_c
from ..front.layout import INDEX_TYPE, FieldSpec, Layout
from ..front.layout_path import LAYOUT_DIR
from ..front.terms import Aff, Atom, Constraint, FloorDiv, UFCall, format_constraint, format_sum
from ..front.value_types import Kind, ValueType
from ..middle.iteration_space import IterationSpace, TensorUse
from ..middle.scan import LevelKind, LoopNest
from . import ctree as t
from .status import Status, c_enum, c_name
from .value_c import implicit_c

WIDTH_C_TYPES = {"int32": "int32_t", "int64": "int64_t"}
USER_PREFIX = "spf_u_"      # a user's name generated C cannot use as it is: spf_u_NULL


def name_suffixes(layout: Layout | None) -> frozenset[str]:
    """What generated C appends to a tensor's name to name its own things: a field's local
    (``A_rowPtr``), a layout index's loop variable (``A_pi``) and its tile's (``A_pi_tile``),
    an assembled output's sizes (``C_size``); or, for an index or a scalar (no ``layout``),
    a tile loop (``i_tile``)."""
    if layout is None:
        return frozenset({"tile"})
    return frozenset({*layout.fields, *layout.indices, *(f"{p}_tile" for p in layout.indices),
                      "size"})


def c_identifiers(suffixes: Mapping[str, frozenset[str]], kernel: str,
                  taken: Collection[str]) -> dict[str, str]:
    """The C identifier of each user-given name (the tensors, scalars and indices of a
    kernel: the keys of ``suffixes``, with :func:`name_suffixes`) that generated C cannot use
    as it is, by :data:`USER_PREFIX` (``NULL``: ``spf_u_NULL``); the others are themselves.
    A name cannot be itself when C reserves it (:func:`~spf.front.c_reserved.reserved_in_c`:
    ``linux``, ``INT32_MAX``, ``exp``), when it starts like the kernel's own functions
    (``<kernel>_bound``), or when it or a name made from it could be one made from another
    (a scalar ``A_pj`` and A's loop variable; ``y_data`` and the output's values).  spf's own
    names (``spf_``: a tensor read again, an affine index) are themselves; the new ones
    avoid ``taken`` (every name of the kernel)."""
    used = set(taken)
    out: dict[str, str] = {}
    for name in sorted(suffixes):
        if name.startswith("spf_") or _plain(name, suffixes, kernel):
            continue
        ident = USER_PREFIX + name
        while ident in used:
            ident += "_"
        used.add(ident)
        out[name] = ident
    return out


def _plain(name: str, suffixes: Mapping[str, frozenset[str]], kernel: str) -> bool:
    """Whether generated C can use the user's ``name`` as it is (see :func:`c_identifiers`)."""
    if reserved_in_c(name) or name == kernel or name.startswith(kernel + "_"):
        return False
    for other, ends in suffixes.items():
        if other != name and name.startswith(other + "_"):
            rest = name[len(other) + 1:]           # name_x == other_end, or name == other_end
            if any(end == rest or end.startswith(rest + "_") for end in ends):
                return False
    return True


def field_ctype(spec: FieldSpec, layout: Layout) -> str:
    """The C type of a field's elements: an index array's own width, else the layout's index
    type (``spf_index_t``); a value array's, the layout's value type."""
    if spec.ctype == INDEX_TYPE:
        return WIDTH_C_TYPES[spec.width] if spec.width else "spf_index_t"
    return layout.value_type.c

def scalar_param(name: str, vt: ValueType, output: bool) -> t.Param:
    """A scalar operand's C parameter: by value, but a complex input by a const pointer
    (ctypes passes no complex numbers by value); an output always by pointer."""
    if output:
        return t.Param(f"{vt.c} *restrict", name)
    if vt.kind is Kind.COMPLEX:
        return t.Param(f"const {vt.c} *restrict", name)
    return t.Param(vt.c, name)


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
    # pow of integers as numpy computes it: exact, wrapping in the result's type (square
    # and multiply in unsigned 64-bit arithmetic, truncated to the type by the caller)
    "spf_ipow": "static inline uint64_t spf_ipow(uint64_t base, uint64_t exp) {\n"
                "    uint64_t r = 1;\n"
                "    for (; exp; exp >>= 1, base *= base)\n"
                "        if (exp & 1)\n"
                "            r *= base;\n"
                "    return r;\n}",
    # a signed exponent: a negative one, which numpy refuses, gives 0 and sets the calling
    # function's status (its own local, set atomically: threads of its parallel loop may
    # set it at once), which the function returns and the runtime raises
    "spf_ipow_signed": f"{c_enum()}\n"
                       "static inline uint64_t spf_ipow_signed(uint64_t base, int64_t exp, "
                       "int *status) {\n"
                       "    if (exp < 0) {\n"
                       f"        __atomic_store_n(status, {c_name(Status.NEGATIVE_POWER)}, "
                       "__ATOMIC_RELAXED);\n"
                       "        return 0;\n    }\n"
                       "    return spf_ipow(base, (uint64_t)exp);\n}",
    # numpy's complex division (Smith's method, no C99 Annex G recovery: 1 / (inf + nan i)
    # is nan + nan i, and x / 0 is inf or nan in each part, as numpy's); needs <complex.h>
    "spf_cdiv": "".join(
        f"static inline {z} spf_cdiv{s}({z} a, {z} b) {{\n"
        f"    const {r} ar = creal{s}(a), ai = cimag{s}(a), br = creal{s}(b), "
        f"bi = cimag{s}(b);\n"
        f"    union {{ {r} part[2]; {z} z; }} q;   /* a complex is its two parts */\n"
        f"    if (fabs{s}(br) >= fabs{s}(bi) && br == 0 && bi == 0) {{\n"
        f"        q.part[0] = ar / fabs{s}(br);\n"
        f"        q.part[1] = ai / fabs{s}(br);\n"
        f"    }} else if (fabs{s}(br) >= fabs{s}(bi)) {{\n"
        f"        const {r} rat = bi / br, scl = 1 / (br + bi * rat);\n"
        f"        q.part[0] = (ar + ai * rat) * scl;\n"
        f"        q.part[1] = (ai - ar * rat) * scl;\n"
        f"    }} else {{\n"
        f"        const {r} rat = br / bi, scl = 1 / (bi + br * rat);\n"
        f"        q.part[0] = (ar * rat + ai) * scl;\n"
        f"        q.part[1] = (ai * rat - ar) * scl;\n"
        f"    }}\n"
        f"    return q.z;\n}}\n"
        for z, r, s in (("double _Complex", "double", ""), ("float _Complex", "float", "f")))
        + "#define spf_cdiv(a, b) _Generic((a) / (b), float _Complex: spf_cdivf, "
          "default: spf_cdiv)((a), (b))",
    # a semiring's '/': C's division in floats; in integers numpy's results where C traps
    # (x / 0 is 0, MIN / -1 wraps to MIN), truncating otherwise (as Z3 proved its laws)
    "spf_div": "static inline int64_t spf_div_i64(int64_t a, int64_t b) "
               "{ return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }\n"
               "static inline uint64_t spf_div_u64(uint64_t a, uint64_t b) "
               "{ return b == 0 ? 0 : a / b; }\n"
               "#define spf_div(a, b) _Generic((a) / (b), float: (a) / (b), double: (a) / (b), "
               "long double: (a) / (b), \\\n"
               "    unsigned long: spf_div_u64((a), (b)), unsigned long long: "
               "spf_div_u64((a), (b)), \\\n"
               "    default: spf_div_i64((a), (b)))",
    "spf_omp": "#ifdef _OPENMP\n#include <omp.h>\n"
               "static inline int spf_max_threads(void) { return omp_get_max_threads(); }\n"
               "static inline int spf_thread(void) { return omp_get_thread_num(); }\n"
               "static inline int spf_team_size(void) { return omp_get_num_threads(); }\n#else\n"
               "static inline int spf_max_threads(void) { return 1; }\n"
               "static inline int spf_thread(void) { return 0; }\n"
               "static inline int spf_team_size(void) { return 1; }\n#endif",
}


def struct_name(layout: Layout) -> str:
    """``spf_CSR``: spf's own identifiers are ``spf_`` and a lower-case word (``spf_stream``,
    ``spf_index_t``), so a layout named so (``stream``) is ``spf__stream``."""
    suffix = "".join(f"_{k}{v}" for k, v in sorted(layout.params.items()))
    values = "" if layout.value_type.is_float64 else f"_{layout.value_type.name}"
    sep = "_" if layout.name[:1].isupper() else "__"
    return f"spf{sep}{layout.name}{suffix}{values}{_members_digest(layout)}"


def _members_digest(layout: Layout) -> str:
    """``''`` for a shipped layout; for any other, ``_`` and 8 hex digits of its struct's
    members: a layout file named like another (a copy of DenseMatrix.toml with its fields
    reordered) never shares a typedef with it in one C file."""
    if Path(layout.source).resolve().parent == LAYOUT_DIR.resolve():   # links resolved
        return ""
    members = ";".join(f"{f.name}:{field_ctype(f, layout)}:{f.is_array}"
                       for f in layout.fields.values())
    return "_" + hashlib.sha256(members.encode()).hexdigest()[:8]


def struct_typedef(layout: Layout) -> str:
    lines = [f"/* {layout.name}: {layout.description} */" if layout.description else
             f"/* {layout.name} */",
             f"typedef struct {struct_name(layout)} {{"]
    for f in layout.fields.values():
        ctype = field_ctype(f, layout)
        if f.is_array:
            extents = "][".join(ie.text(d) for d in f.dims)
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
    Tensors in ``direct`` (an output written by assembly code) keep ``T->field``.  With
    ``bounds_once``, a loop's bounds are computed into constants before it (a bound whose
    reads are tested, as in :mod:`spf.read_check`, is not moved out of the loop by gcc)."""

    space: IterationSpace
    helpers: set
    hoist: bool = False
    bounds_once: bool = False
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

    @property
    def index_ctype(self) -> str:
        """The C type of loop and assigned variables and of scalar sizes read into locals:
        ``spf_index_t``, but ``int64_t`` in a kernel with index arithmetic, whose offsets,
        strides and their products with extents may leave the index type (``x(i +
        4294967296)``): C computes them exactly in 64 bits, and the call checks that they
        fit there (:class:`spf.runtime.shapes.ArithmeticReach`)."""
        return "int64_t" if self.space.expr.derived else "spf_index_t"

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
            if ctype == "spf_index_t" and not spec.is_array:
                ctype = self.index_ctype
            writes = use.is_output and fld == use.layout.value_array
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
        return format_sum(a.terms, a.const, self.atom, self._widened)

    def condition(self, c: Constraint) -> str:
        return format_constraint(c, self.atom, eq_op="==", compound_text=self._widened)

    def _widened(self, atom: Atom) -> str:
        """``atom`` inside a sum: in a kernel with index arithmetic (int64_t loop
        variables), a narrower index array's read is widened first, so that an offset added
        to it (``idx[p] + 2147483647``) or a product never wraps in the array's type."""
        text = self.atom(atom)
        if not isinstance(atom, UFCall) or self.index_ctype != "int64_t":
            return text
        use, fld = self.tensor_of(atom.name)
        spec = use.layout.fields.get(fld)
        if spec is None or field_ctype(spec, use.layout) == "int64_t":
            return text
        return f"(int64_t){text}"

    def array_read(self, use: TensorUse, fld: str, args: list[str]) -> str:
        spec = use.layout.fields[fld]
        index = args[0]
        for dim, arg in zip(spec.dims[1:], args[1:]):
            extent = ie.to_c(dim, lambda n: self.field(use, n),
                             lambda n, a: self.array_read(use, n, a))
            index = f"(int64_t)({index}) * {extent} + {arg}"
        return f"{self.field(use, fld)}[{index}]"

    def value(self, use: TensorUse) -> str:
        """The value expression of ``use`` at the current layout indices (a pattern
        layout's constant, in its value type: no array is read)."""
        if use.layout.implicit is not None:
            return implicit_c(use.layout.implicit, use.layout.value_type)
        ref = use.layout.value_ref
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
    if use.layout.implicit is not None:
        return out      # a pattern layout's constant reads no index
    for s in use.layout.value_ref.subscripts:
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
