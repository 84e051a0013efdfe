"""The options of a kernel: one schema (:class:`KernelOptions`, public as ``spf.KernelOptions``)
from which :class:`spf.Kernel`'s keywords, the kernel-file keys, :func:`spf.evaluate`'s
keywords, the command line's flags, their validation and the documentation's table are all
derived.  Each field's :class:`Option` says how the option is written (its :class:`Form`),
what it means and how a value is checked; :func:`check_given` checks what one entry point
was given (:class:`spf.Kernel` lays the call's options over a kernel file's), and
:meth:`KernelOptions.resolved` checks the names they use against the statement.
"""
from __future__ import annotations

import difflib
import enum
import keyword
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import ArgumentError, SpecError
from ..finds import NAMES as ALGORITHMS
from ..front.c_reserved import reserved_in_c
from ..front.kernel_spec import Expr, parse_bounds, parse_order
from ..front.layout import INDEX_WIDTHS, Layout
from ..front.rhs import NUMBER_NAMES, Node, Number, children, is_sign
from ..front.semiring import BUILTINS, PLUS_TIMES, Semiring, semiring_of
from ..front.syntax import C_KEYWORDS
from ..front.terms import Constraint
from ..front.value_types import VALUE_TYPES, value_type
from ..middle.z3limit import Z3_TIMEOUT_ENV, Z3_TIMEOUT_MS, z3_timeout

FIND_CHOICES = ("auto",) + ALGORITHMS
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


class Table(Mapping[str, Any]):
    """A read-only, hashable mapping of names (unlike ``MappingProxyType``, it pickles: kernels
    travel to other processes with their options)."""

    def __init__(self, items: Mapping[str, Any]):
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items())))

    def __repr__(self) -> str:
        return repr(self._items)


class Form(enum.Enum):
    """How an option's value is written in Python, in a kernel file and on the command line."""

    FLAG = "true or false"
    NAME = "a C identifier"
    CHOICE = "one of the choices"
    INTEGER = "an integer"
    TEXT = "a string"
    NAMES = "a list of names, or one comma-separated string"
    SIZES = "a table of names and positive integers"
    PAIR = "a table of one output and one tensor"
    FIND = "an algorithm, or a table of tensors and algorithms"
    SEMIRING = "a built-in's name, or a table of add, mul, zero (one, associative, commutative)"
    DTYPE = "a numpy dtype name, or a table of tensors and dtype names"


@dataclass(frozen=True)
class Option:
    """One option of :class:`KernelOptions`: its form, meaning and check."""

    form: Form
    help: str
    example: Any                                    # a valid value, for the documentation
    choices: Callable[[], tuple[str, ...]] | None = None
    metavar: str = "VALUE"
    check: Callable[[Any, str], Any] | None = None  # instead of the form's (value, source)
    name: str = ""                                  # filled from the field

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--" + self.name.replace("_", "-")


MAX_UNROLL = 16       # unrolled copies of a loop: 1 + 2 + ... + 16 bodies at most


def unroll_count(value: Any, src: str) -> int:
    """``unroll``: an integer from 0 to :data:`MAX_UNROLL`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UNROLL:
        raise SpecError(f"unroll must be an integer from 0 to {MAX_UNROLL}, got {value!r}", src)
    return value


def _option(default: Any, form: Form, help: str, example: Any, **more: Any) -> Any:
    return field(default=default, metadata={"option": Option(form, help, example, **more)})


@dataclass(frozen=True)
class KernelOptions:
    """The options of :class:`spf.Kernel` besides the expression, the layouts and their
    parameters, as checked values (mappings read-only): each value is checked by its form
    when made (:func:`check_given` checks what an entry point was given first); every entry
    point (Python keywords, kernel files, :func:`spf.evaluate`, the ``spf`` command) goes
    through it."""

    name: str = _option("spf_kernel", Form.NAME, "the name of the generated C function",
                        "my_spmv", metavar="NAME")
    order: tuple[str, ...] | None = _option(
        None, Form.NAMES, "loop variables outermost first: logical indices (i) or layout "
        "indices (A.pi); default: an order spf chooses and explains", ("A.pi", "A.pj"),
        metavar="VARS")
    find: str | Mapping[str, str] = _option(
        "auto", Form.FIND, "the find algorithm of every guard loop, or per searched tensor; "
        "auto: the cheapest one Z3 proves valid, loop: keep the guard loop", "binsearch",
        choices=lambda: FIND_CHOICES, metavar="[TENSOR=]ALGORITHM")
    parallel: bool = _option(False, Form.FLAG, "run the outermost loop that carries no "
                             "dependence with OpenMP (an inner one as a worksharing loop)", True)
    bounds: tuple[Constraint, ...] = _option(
        (), Form.TEXT, "affine bounds restricting the dense iteration space", "j <= i",
        metavar="CONSTRAINTS")
    tile: Mapping[str, int] | None = _option(
        None, Form.SIZES, "strip-mine loops into tiles of the given sizes (a tile loop "
        "VAR_tile, e.g. A.pi_tile, is placed right before each, or where order names it)",
        {"A.pi": 256}, metavar="VAR=SIZE")
    share: tuple[str, str] | None = _option(
        None, Form.PAIR, "the output takes this input's structure (its index arrays); only "
        "values are computed", {"C": "A"}, metavar="OUT=TENSOR")
    drop_zeros: bool = _option(False, Form.FLAG, "an output the kernel assembles stores no "
                               "entry whose value is the semiring's zero", True)
    structure: bool = _option(
        False, Form.FLAG, "an output in a pattern layout (whose value is a constant) stores "
        "the positions of the entries the kernel computes, whatever their values; else each "
        "value must be that constant (refused for any other output)", True)
    reassociate: bool = _option(
        False, Form.FLAG, "a sum into one output element may run in another order (SIMD "
        "partial sums): faster on long rows, but the rounding differs from the sequential "
        "sum", True)
    unroll: int = _option(
        0, Form.INTEGER, "the innermost loop, where its trip count is data (a row's length), "
        f"gets a fully unrolled copy for each count from 1 to this (at most {MAX_UNROLL}: "
        "short rows without loop overhead), the loop for longer ones; 0: none", 8,
        metavar="N", check=unroll_count)
    index_type: str | None = _option(
        None, Form.CHOICE, "the width of index arrays, sizes and loop indices (default: the "
        "Layout objects' own, else int32; tensors must be built with the same)", "int64",
        choices=lambda: INDEX_WIDTHS, metavar="WIDTH")
    z3_timeout_ms: int | None = _option(
        None, Form.INTEGER, f"the time limit of each Z3 query in milliseconds (default "
        f"${Z3_TIMEOUT_ENV}, else {Z3_TIMEOUT_MS}); an undecided query keeps the safe choice, "
        "named in the report", 5000, metavar="MS", check=z3_timeout)
    dtype: str | Mapping[str, str] | None = _option(
        None, Form.DTYPE, "the value type of every tensor, or per tensor (bool, int8-64, "
        "uint8-64, float32, float64, complex64, complex128); default: the Layout objects' own, "
        "else float64; the output's follows numpy's promotion of the inputs'", "float32",
        metavar="[TENSOR=]DTYPE")
    accumulate: str | None = _option(
        None, Form.CHOICE, "the type sums are accumulated in, when wider than the output's "
        "(float32 data summed in float64)", "float64", choices=lambda: tuple(VALUE_TYPES),
        metavar="DTYPE")
    semiring: Semiring = _option(
        PLUS_TIMES, Form.SEMIRING, "the statement's add and mul: a built-in's name or "
        "spf.Semiring(add=, mul=, zero=, one=)", "min_plus",
        choices=lambda: tuple(BUILTINS), metavar="SEMIRING")
    mask: tuple[str, str] | None = _option(
        None, Form.PAIR, "a structural mask: only the entries tensor M stores of the output "
        "are computed (M is one more argument)", {"C": "M"}, metavar="OUT=M")
    complement: bool = _option(False, Form.FLAG, "with mask: the output keeps the elements "
                               "outside the mask's entries", True)
    fill_values: bool = _option(
        False, Form.FLAG, "absent entries are each operand's fill value (0 for numpy, scipy "
        "and pydata data; a Tensor's fill), as in TACO and Finch, instead of not taking part "
        "(GraphBLAS's structural semantics)", True)
    def __post_init__(self) -> None:
        """Each value checked by its form (idempotent: checked values pass unchanged)."""
        for o in OPTIONS:
            value = getattr(self, o.name)
            if value is not None:
                object.__setattr__(self, o.name, _check(o, value, "<string>"))

    def resolved(self, expr: Expr,
                 where: Callable[[str], tuple[int, int] | None] | None = None
                 ) -> KernelOptions:
        """The options checked against ``expr`` (the tensors that find, share and mask name),
        with the Z3 time limit's default filled in; ``where(name)`` locates an option a kernel
        file gave (None: the call gave it)."""
        def error(name: str, message: str) -> SpecError:
            return SpecError(message, expr.source, *((where and where(name)) or (None, None)))

        if self.complement and not self.mask:
            raise error("complement", "complement=True needs a mask (mask={output: tensor})")
        named = expr
        if self.mask:
            _is_output(self.mask[0], "mask", expr, error)
            masked = expr.with_mask(self.mask[1])   # checks the name against the statement's
            named = expr if self.complement else masked     # share and find may name it
        if self.share:
            _is_output(self.share[0], "share", expr, error)
            if self.share[1] not in [a.tensor for a in named.factors if a.indices]:
                raise error("share", f"share: {self.share[1]!r} is not an input tensor of "
                            "the kernel")
        if isinstance(self.find, Mapping):
            for tname in self.find:
                if tname not in named.tensors:
                    raise error("find", f"find names {tname!r}, which is not a tensor of the "
                                "kernel")
        return replace(self, z3_timeout_ms=z3_timeout(self.z3_timeout_ms, expr.source))

    def space_bounds(self, expr: Expr) -> tuple[Constraint, ...]:
        """What restricts the iteration space of the product statement ``expr``: the given
        ``bounds`` and, where a product of 0 adds nothing (plus_times), the comparisons of
        indices multiplying it (:attr:`Expr.guards`: ``A(i,j) * (i == j)`` runs over the
        diagonal only and stores nothing elsewhere)."""
        guards = expr.guards if self.semiring.is_plus_times else ()
        return tuple(dict.fromkeys((*self.bounds, *guards)))


OPTIONS: tuple[Option, ...] = tuple(replace(f.metadata["option"], name=f.name)
                                    for f in fields(KernelOptions) if "option" in f.metadata)
NAMES: tuple[str, ...] = tuple(o.name for o in OPTIONS)


def check_given(values: Mapping[str, Any], source: str = "<string>",
                where: Callable[..., tuple[int, int]] | None = None,
                file_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """The options ``values`` names (None counts as not given), each checked by its form;
    SpecError for an unknown name or a bad value, located by ``where(name)`` (the line and
    column of a kernel file's value; ``where(name, True)``: of its key; the file's other keys
    are ``file_keys``) when given."""
    known = {o.name: o for o in OPTIONS}
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name not in known:
            position = where(name, True) if where else (None, None)
            close = difflib.get_close_matches(str(name), [*file_keys, *known], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            what = (f"a kernel file has {', '.join(file_keys)} and the options"
                    if file_keys else "the options are")
            raise SpecError(f"unknown {'key' if file_keys else 'option'} {name!r}{hint}; "
                            f"{what} {', '.join(known)}", source, *position)
        if value is None:
            continue
        try:
            checked[name] = _check(known[name], value, source)
        except SpecError as exc:
            if where is None or exc.line is not None:
                raise
            raise SpecError(exc.detail, source, *where(name)) from None
    return checked


def check_names(expr: Expr) -> None:
    """SpecError when a tensor or index of ``expr`` is a C keyword or in spf's namespace
    (``spf_``); other names C reserves (``NULL``, ``linux``) take another identifier in
    the generated C (:func:`spf.back.names.c_identifiers`)."""
    own = set(dict(expr.aliases)) | set(expr.derived)
    for name in expr.tensors + expr.indices:
        if name in own:
            continue     # spf's own name for a tensor read again or an affine access index
        if name in C_KEYWORDS or keyword.iskeyword(name) or name.startswith("spf_"):
            raise SpecError(f"name {name!r} is reserved (C keyword or spf_ prefix)",
                            expr.source)
        if name in NUMBER_NAMES:
            raise SpecError(f"name {name!r} is reserved: it is the number {name} (numpy's "
                            f"np.{name}) in an expression", expr.source)


def check_semiring_scope(semiring: Semiring, expr: Expr, assembled: bool) -> None:
    """A sum's terms combine by the semiring's add (the union of their entries), as do
    an assembled output's entries with equal coordinates; nothing is subtracted."""
    if semiring.is_plus_times:
        return
    if assembled and not semiring.reorderable:
        raise SpecError(f"semiring={semiring.name}: the output {expr.output.tensor!r} is "
                        "assembled by the kernel, which combines entries with equal "
                        "coordinates in an order it chooses (sorting, buckets), and add is "
                        "not proven associative and commutative; use a dense output",
                        expr.source)
    if any(not is_sign(coef) or coef != 1       # 1.0 and 1/1 are literals numpy promotes
           for coef in (expr.coefficient, *(c for c, _ in expr.terms))) or \
            (expr.rhs is not None and _has_number(expr.rhs)):     # ``* 1`` folded away
        raise SpecError(f"semiring={semiring.name}: a subtracted product or a numeric "
                        "coefficient has no meaning in a semiring (terms are combined by add, "
                        "factors by mul)", expr.source)


def _has_number(n: Node) -> bool:
    """Whether the expression ``n`` as written holds a number."""
    return isinstance(n, Number) or any(_has_number(c) for c in children(n))


def check_complement(options: KernelOptions, expr: Expr, output: Layout | None,
                     assembled: bool) -> None:
    """A complemented mask resets the mask's entries of a dense output, or removes them
    from an assembled one, after the product (no pruning of the iteration); an output
    sharing an input's structure (``output``: its layout) keeps that structure, so it takes
    none."""
    if not options.complement or options.share is None:
        return
    if output is not None and output.dense_array is None and not assembled:
        raise SpecError(f"complement=True: the output {expr.output.tensor!r} shares "
                        f"{options.share[1]!r}'s structure, which a complemented mask would "
                        "have to change; use a dense output or one the kernel assembles",
                        expr.source)


def check_tile(tile: Mapping[str, int] | None, variables: list[str],
               source: str) -> dict[str, int]:
    """The tiled loop variables (``A_pi`` for ``A.pi``) and sizes (the sizes checked by the
    form): SpecError for a name that is not one of ``variables``."""
    out = {}
    for name, size in (tile or {}).items():
        var = name.replace(".", "_", 1)
        if var not in variables:
            raise SpecError(f"tile names {name!r}, which is not a variable of the iteration "
                            "space", source)
        out[var] = size
    return out


def option(name: str) -> Option:
    """The :class:`Option` called ``name``."""
    return next(o for o in OPTIONS if o.name == name)


# -- checks by form ------------------------------------------------------------------------
def _flag(o: Option, value: Any, src: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{o.name} must be True or False, got {value!r}", src)
    return value


def _name(o: Option, value: Any, src: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value) or value in C_KEYWORDS:
        raise SpecError(f"kernel {o.name} {value!r} is not a valid C identifier", src)
    if reserved_in_c(value):
        raise SpecError(f"kernel {o.name} {value!r} is a name the C it is compiled with "
                        "defines or reserves (a macro, a type or a function of its headers); "
                        "choose another", src)
    return value


def _choice(o: Option, value: Any, src: str) -> str:
    choices = o.choices() if o.choices else ()
    if value not in choices:
        raise SpecError(f"{o.name} must be one of {', '.join(map(repr, choices))}, got "
                        f"{value!r}", src)
    return value


def _integer(o: Option, value: Any, src: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{o.name} must be an integer, got {value!r}", src)
    return value


def _text(o: Option, value: Any, src: str) -> tuple[Constraint, ...]:
    if isinstance(value, (list, tuple)) and all(isinstance(c, Constraint) for c in value):
        return tuple(value)          # bounds already parsed (a kernel file's, a sum's terms)
    return tuple(parse_bounds(value, src))


def _names(o: Option, value: Any, src: str) -> tuple[str, ...] | None:
    names = parse_order(value, src)
    return tuple(names) if names else None


def _sizes(o: Option, value: Any, src: str) -> Mapping[str, int] | None:
    if not isinstance(value, Mapping):
        raise SpecError(f"{o.name} must map loop variables to sizes such as "
                        f"{o.example}, got {value!r}", src)
    for key, size in value.items():
        if not isinstance(key, str):
            raise SpecError(f"{o.name} names {key!r}, which is not a variable of the "
                            "iteration space", src)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SpecError(f"{o.name} size of {key!r} must be a positive integer, got "
                            f"{size!r}", src)
    return Table(value) if value else None


def _pair(o: Option, value: Any, src: str) -> tuple[str, str] | None:
    if not value:
        return None
    if isinstance(value, tuple) and len(value) == 2:      # already checked
        value = {value[0]: value[1]}
    if not isinstance(value, Mapping) or len(value) != 1:
        raise SpecError(f"{o.name} must map the output to one tensor, such as {o.example}, "
                        f"got {value!r}", src)
    (out, name), = value.items()
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise SpecError(f"{o.name}: {name!r} is not a tensor name", src)
    return out, name


def _find(o: Option, value: Any, src: str) -> str | Mapping[str, str]:
    choices = value.values() if isinstance(value, Mapping) else [value]
    for choice in choices:
        if choice not in FIND_CHOICES:
            raise SpecError(f"find={choice!r} is not a find algorithm; choose from "
                            f"{FIND_CHOICES}", src)
    return Table(value) if isinstance(value, Mapping) else value


def _dtype(o: Option, value: Any, src: str) -> str | Mapping[str, str]:
    names = value.values() if isinstance(value, Mapping) else [value]
    for name in names:
        try:
            value_type(name, f"{o.name}")
        except ArgumentError as exc:
            raise SpecError(str(exc), src) from None
    if isinstance(value, Mapping):
        return Table({k: value_type(v).name for k, v in value.items()})
    return value_type(value).name


def _semiring(o: Option, value: Any, src: str) -> Semiring:
    if isinstance(value, Mapping):
        allowed = {"add", "mul", "zero", "one", "associative", "commutative"}
        if set(value) - allowed or not {"add", "mul", "zero"} <= set(value):
            raise SpecError(f"a semiring table needs add, mul and zero (and may give one, "
                            f"associative, commutative); got {sorted(value)}", src)
        return Semiring(**value)
    return semiring_of(value, src)


_CHECKS: dict[Form, Callable[[Option, Any, str], Any]] = {
    Form.FLAG: _flag, Form.NAME: _name, Form.CHOICE: _choice, Form.INTEGER: _integer,
    Form.TEXT: _text, Form.NAMES: _names, Form.SIZES: _sizes, Form.PAIR: _pair,
    Form.FIND: _find, Form.SEMIRING: _semiring, Form.DTYPE: _dtype}


def _check(o: Option, value: Any, source: str) -> Any:
    """``value`` checked for option ``o`` (by its own check, else by its form's)."""
    return o.check(value, source) if o.check else _CHECKS[o.form](o, value, source)


def _is_output(name: str, what: str, expr: Expr,
               error: Callable[[str, str], SpecError]) -> None:
    if name != expr.output.tensor:
        raise error(what, f"{what} names {name!r}, but the output is {expr.output.tensor!r}")


# -- how each entry point writes a value (the documentation's table shows the examples) ----
def python_text(o: Option, value: Any) -> str:
    """``value`` as a :class:`spf.Kernel` or :func:`spf.evaluate` keyword."""
    shown = list(value) if isinstance(value, tuple) else value
    return f"{o.name}={shown!r}"


def toml_text(o: Option, value: Any) -> str:
    """``value`` as a kernel file's key."""
    return f"{o.name} = {_toml(value)}"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return f'"{value}"' if isinstance(value, str) else str(value)


def cli_args(o: Option, value: Any) -> list[str]:
    """``value`` as the arguments of ``spf generate`` and ``spf analyze``."""
    if o.form is Form.FLAG:
        return [o.flag] if value else []
    if isinstance(value, Mapping):
        return [a for k, v in value.items() for a in (o.flag, f"{k}={v}")]
    if isinstance(value, (list, tuple)):
        return [o.flag, ",".join(value)]
    return [o.flag, str(value)]


def markdown_table() -> str:
    """The options as a Markdown table: each entry point's spelling of an example, the
    default and the meaning."""
    rows = ["| Python keyword (also `spf.evaluate`) | Kernel file | Command line | Default | "
            "Meaning |", "|---|---|---|---|---|"]
    defaults = KernelOptions()
    for o in OPTIONS:
        default = getattr(defaults, o.name)
        shown = "none" if default in (None, ()) else f"`{_toml(getattr(default, 'name', default))}`"
        cells = [f"`{python_text(o, o.example)}`", f"`{toml_text(o, o.example)}`",
                 f"`{shlex.join(cli_args(o, o.example))}`", shown,
                 o.help[0].upper() + o.help[1:] + "."]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)
