"""What a kernel is made from, resolved once: the statement (with a structural mask appended),
the options, each tensor's Layout (sparse operands swapped for dense ones under fill values),
a complemented mask's layout, the index width and whether the kernel assembles its output.

:func:`resolve` turns what :class:`spf.Kernel` is given (a statement or a kernel file,
layouts, parameters, options) into a :class:`Setup`, checking each piece where it is read;
:mod:`spf.product_kernel` and :mod:`spf.sum_kernel` are built from it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .assembly.merge import same_levels
from .back.names import c_identifiers, name_suffixes
from .decide.options import (
    NAMES,
    KernelOptions,
    Table,
    check_complement,
    check_given,
    check_names,
    check_semiring_scope,
)
from .decide.split import split_dense_reads
from .decide.vanishing import Vanishing, divides_by_absent, vanishing, vanishing_jointly
from .errors import SpecError
from .front.functions import function
from .front.kernel_spec import (
    ARITHMETIC_LIMIT,
    FILE_KEYS,
    Access,
    Expr,
    KernelFile,
    layout_params,
    load_kernel_file,
    parse_expr,
    tensor_layouts,
)
from .front.layout import INDEX_WIDTHS, Layout
from .front.layout_file import layout_error
from .front.layout_path import default_layout, load_for_order, load_layout
from .front.rhs import Coefficient, called, index_refs, is_sign, operands
from .front.stand_ins import coordinate_layout
from .front.storage import storage_of, storage_or_none
from .front.terms import Aff
from .front.toml_source import is_file
from .front.value_exprs import check_coefficient, check_folded_steps, type_of
from .front.value_types import (
    FLOAT64,
    FLOAT64_TYPING,
    Kind,
    Typing,
    ValueType,
    can_cast,
    result_type,
    value_type,
)
from .front.writing import write_plan, write_plan_or_none
from .middle.iteration_space import shared_fields
from .middle.z3limit import z3_timeout


@dataclass(frozen=True)
class Setup:
    """A kernel's statement, options and layouts, resolved and checked (see the module
    docstring); ``layouts`` and ``read_densely`` are read-only."""

    expr: Expr                          # with a structural mask appended as a factor
    options: KernelOptions
    layouts: Mapping[str, Layout]       # every tensor with indices; a complemented mask not
    read_densely: Mapping[str, Layout]  # fill values: the operands read densely, as given
    mask_layout: Layout | None          # a complemented mask's layout
    index_type: str
    assembled: bool                     # the kernel builds the output's index arrays
    written: Layout | None = None       # the output's layout when assembled as an entry list
                                        # and then written as that layout's relation says
    typing: Typing = FLOAT64_TYPING     # each tensor's value type, the output's, the sums'
    values: tuple[Vanishing, ...] = ()  # each value expression's decision (Z3)
    union: Vanishing | None = None      # an expression iterated over its operands' union
    dense_instead: tuple[Mapping[str, Layout], Mapping[str, Layout]] | None = None
    #                                   # (layouts, read_densely) reading them densely instead

    def without_union(self) -> Setup:
        """The statement with the union's operands read densely (when their storage turns
        out not to be the sorted runs a merge needs)."""
        assert self.dense_instead is not None and self.union is not None
        layouts, dense = self.dense_instead
        kept = tuple(v for v in self.values if v is not self.union)
        return replace(self, layouts=Table(layouts), read_densely=Table(dense), union=None,
                       dense_instead=None, values=kept)

    def c_names(self) -> dict[str, str]:
        """The tensors, scalars and indices that generated C cannot name as they are, and
        the identifiers it gives them (:func:`~spf.back.names.c_identifiers`)."""
        expr = self.expr
        accesses = [expr.output, *(a for p in expr.products() for a in p.factors)]
        suffixes = {a.tensor: name_suffixes(self.layouts.get(a.tensor)) for a in accesses}
        suffixes.update({i: name_suffixes(None) for i in expr.indices})
        return c_identifiers(suffixes, self.name, set(suffixes))

    def in_c(self, names: Mapping[str, str]) -> Setup:
        """This setup with the tensors, scalars and indices in ``names`` renamed (the
        statement, the layouts, the value types and the options naming them): what the
        iteration space, the plan and the C are built from."""
        if not names:
            return self
        typing = replace(self.typing, tensors=tuple((names.get(t, t), vt)
                                                    for t, vt in self.typing.tensors))
        return replace(self, expr=self.expr.renamed(names),
                       options=_options_in_c(self.options, names),
                       layouts=_keys_in_c(self.layouts, names),
                       read_densely=_keys_in_c(self.read_densely, names), typing=typing)

    @property
    def name(self) -> str:
        return self.options.name

    @property
    def mask(self) -> str | None:
        """The mask tensor, if any."""
        return self.options.mask[1] if self.options.mask else None

    @property
    def z3_timeout_ms(self) -> int:
        """The time limit of each Z3 query (:meth:`KernelOptions.resolved` filled it in)."""
        return z3_timeout(self.options.z3_timeout_ms, self.expr.source)

    @property
    def splits(self) -> bool:
        """The statement runs as several product statements: a sum, or an input stored in a
        union layout (one statement per part)."""
        out = self.expr.output.tensor
        return self.expr.is_sum or self.union is not None or any(
            len(lay.parts()) > 1 for t, lay in self.layouts.items() if t != out)

    def complement_note(self) -> str:
        """What a complemented mask does (it is not part of the plan; "" without one)."""
        if self.mask_layout is None:
            return ""
        reset = ("removed (the output is rebuilt without them)" if self.assembled else
                 "reset ('=': to the semiring's zero, '+=': to their values before the call)")
        return (f"complement of {self.mask} ({self.mask_layout.name}): the product is "
                f"computed for every element, then {self.mask}'s entries of "
                f"{self.expr.output.tensor} are {reset}; the iteration is not pruned")

    def fill_note(self) -> str:
        """What absent entries mean for this kernel (a report line)."""
        semiring = self.options.semiring
        zero = semiring.zero_text()
        if not self.options.fill_values:
            same = ("reading absent entries as zero would give the same result (it "
                    "annihilates mul)" if semiring.annihilates else
                    "zero does not annihilate mul, so reading absent entries as zero "
                    "(fill_values=True) would give another result")
            return ("structural: products run over the entries the operands store, combined "
                    f"by add; an output element no product reaches holds zero ({zero}); "
                    + same)
        absent = ("fill values: an operand's absent entries are its fill (0 for data from "
                  "numpy, scipy or pydata; a Tensor's own fill)")
        if not self.read_densely:
            return (f"{absent}; 0 is the semiring's zero, which annihilates mul, so "
                    "iterating over the stored entries gives the same result (an operand "
                    "with another fill is refused)")
        why = ("0 is not the semiring's zero" if semiring.zero != 0 else
               "the semiring's zero does not annihilate mul")
        read = ", ".join(f"{name} ({lay.name})" for name, lay in sorted(self.read_densely.items()))
        return (f"{absent}; {why} ({zero}), so every element takes part: {read} "
                + ("is" if len(self.read_densely) == 1 else "are")
                + " read as dense arrays holding the fill where nothing is stored (the "
                "iteration space is dense)")

    def notes(self) -> list[tuple[str, str]]:
        """The mask and absent-entry notes, as (title, text) pairs for a file header or a
        report."""
        notes = [("mask", self.complement_note())] if self.options.complement else []
        if self.written is not None:
            out = self.expr.output.tensor
            notes.append(("output", f"{out} is assembled as an entry list "
                          f"({self.layouts[out].name}), then written into "
                          f"{self.written.name} as its relation says where each entry goes "
                          "(its storage levels cannot be appended to in order)"))
        if not self.options.semiring.is_plus_times or self.options.fill_values:
            notes.append(("absent entries", self.fill_note()))
        if not self.typing.is_float64:
            notes.append(("value types", self.typing.describe(self.expr.output.tensor)))
        notes += [("values", f"{v.expression}: {v.why}") for v in self.values]
        if self.expr.derived:
            notes.append(("index arithmetic", "; ".join(
                f"{name} = {aff}" for name, aff in self.expr.derived.items()) +
                " (an affine access index is one more variable of the iteration space, equal "
                "to its expression; a point where an access falls outside its tensor is not "
                "in the space; loop variables and sizes are int64_t, so offsets, strides and "
                "their products with extents never wrap)"))
        guards = dict.fromkeys(str(g) for p in self.expr.products()
                               for g in self.options.space_bounds(p)
                               if g not in self.options.bounds)
        if guards:
            notes.append(("index comparisons", f"{', '.join(guards)} (a comparison of "
                          "indices multiplying a product is 0 where it is false: the product's "
                          "iteration space holds only the points where it is true, so nothing "
                          "is read, computed or stored elsewhere)"))
        if ranges := self.expr.ranges_text(self.assembled):
            notes.append(("ranges", ranges))
        return notes

    def header(self) -> list[str]:
        """The first lines of the generated file's header comment."""
        return [f"Generated by spf: {self.expr}"] + [
            f"{title[0].upper()}{title[1:]}: {text}" for title, text in self.notes()]


def _keys_in_c(table: Mapping[str, Any], names: Mapping[str, str]) -> Table:
    return Table({names.get(t, t): v for t, v in table.items()})


def _options_in_c(o: KernelOptions, names: Mapping[str, str]) -> KernelOptions:
    """The options with the tensors and indices they name renamed as in ``names``."""
    def var(v: str) -> str:             # a loop variable: i, A.pi, i_tile, A.pi_tile
        head, dot, rest = v.partition(".")
        base = head.removesuffix("_tile")
        if dot or head in names:
            return f"{names.get(head, head)}{dot}{rest}"
        return f"{names[base]}_tile" if base in names else v

    def pair(p: tuple[str, str] | None) -> tuple[str, str] | None:
        return None if p is None else (names.get(p[0], p[0]), names.get(p[1], p[1]))

    renaming = {n: Aff.var(c) for n, c in names.items()}
    return replace(
        o, order=None if o.order is None else tuple(var(v) for v in o.order),
        tile=None if o.tile is None else {var(v): n for v, n in o.tile.items()},
        find=o.find if isinstance(o.find, str) else _keys_in_c(o.find, names),
        dtype=o.dtype if o.dtype is None or isinstance(o.dtype, str)
        else _keys_in_c(o.dtype, names),
        bounds=tuple(c.substitute(renaming) for c in o.bounds),
        share=pair(o.share), mask=pair(o.mask))


def resolve(expr: str | Expr, layouts: Any, params: Any, options: KernelOptions | None,
            keywords: Mapping[str, Any]) -> Setup:
    """The :class:`Setup` of ``Kernel(expr, layouts, params=, options=, **keywords)``."""
    given, params = tensor_layouts(layouts), layout_params(params)
    spec = load_kernel_file(expr) if isinstance(expr, str) and expr.endswith(".toml") else None
    if spec is not None:
        statement, named = spec.expr, {**spec.layouts, **given}
        params = {**spec.params, **params}
        in_file = {t: spec.entry_position("layouts", t) for t in spec.layouts if t not in given}
    else:
        statement = expr if isinstance(expr, Expr) else parse_expr(expr)
        named, in_file = dict(given), {}
    try:
        return _resolve(statement, spec, named, params, in_file, options, keywords)
    except SpecError as e:      # as the user wrote it: no name spf gave a tensor read again
        raise SpecError(statement.as_written(e.detail), e.source, e.line, e.column) from None


def _resolve(statement: Expr, spec: KernelFile | None, named: dict[str, Any],
             params: dict[str, Any], in_file: dict[str, tuple[int, int]],
             options: KernelOptions | None, keywords: Mapping[str, Any]) -> Setup:
    """:func:`resolve` once the statement is parsed (``named``: the layouts given or in the
    kernel file, ``in_file``: where the file names each)."""
    opts = _options(statement, spec, options, keywords)
    mask = opts.mask[1] if opts.mask else None
    if mask and not opts.complement:
        statement = statement.with_mask(mask)
    check_names(statement)
    _check_index_arithmetic(statement)
    for alias, tensor in statement.aliases:     # a tensor read again: its layout, params
        if alias not in statement.tensors:
            continue                            # read by another term of the sum
        if tensor in named:
            named.setdefault(alias, named[tensor])
        if tensor in params:
            params.setdefault(alias, params[tensor])
    index_type = opts.index_type or _width_of_given(named)
    mask_layout = _complement_layout(statement, mask, named, params, index_type) \
        if opts.complement and mask else None
    resolved = _resolve_layouts(statement, named, params, in_file, index_type)
    out = statement.output.tensor
    if statement.accumulate and opts.share is None and out in resolved \
            and resolved[out].dense_array is None:    # '+=' into an output it assembles
        statement = statement.with_old_output()
        resolved = {**resolved, statement.aliases[-1][0]: resolved[out]}
    if not (opts.fill_values and not opts.semiring.annihilates):    # else all read densely
        statement, split = split_dense_reads(statement, resolved)
        resolved = {**resolved, **{alias: resolved[name] for name, alias in split.items()}}
    values = _value_expressions(statement, opts, resolved)
    typing = _typing(statement, opts, named, resolved)
    _check_semiring_types(opts, typing, statement)
    resolved = {t: lay.with_value_type(typing.of(t)) for t, lay in resolved.items()}
    if mask_layout is not None and mask is not None:
        mask_layout = mask_layout.with_value_type(typing.of(mask))
    written = _written_output(statement, resolved, opts.share, opts.structure)
    _check_pattern_output(statement, resolved, opts.structure, written)
    if written is not None:
        resolved = {**resolved, statement.output.tensor: _entry_list(written)}
    valued = {v.operand for v in values if not v.zero}
    union = _union(statement, opts, resolved, values)
    dense_instead = None
    if union is not None:
        fallback = dict(resolved)
        dense_instead = (fallback, _read_densely(statement, opts, fallback, index_type, valued))
        valued = set()              # the expression's operands: its only sparse ones
        values = [v for v in values if v.zero] + [union]
    read_densely = _read_densely(statement, opts, resolved, index_type, valued)
    assembled = _needs_assembly(statement, resolved, opts.share)
    _check_broadcast(statement, assembled or opts.share is not None)
    check_semiring_scope(opts.semiring, statement, assembled)
    check_complement(opts, statement, resolved.get(statement.output.tensor), assembled)
    _check_value_types(statement, typing)
    return Setup(statement, opts, Table(resolved), Table(read_densely), mask_layout,
                 index_type, assembled, written, typing, tuple(values), union, dense_instead)


def _check_index_arithmetic(expr: Expr) -> None:
    """An offset or stride of index arithmetic at most 2^62 in size: the C computes it, its
    products with extents and their sums in int64 (``x(i + 2**70)`` is refused, not
    wrapped)."""
    for acc in (f for product in expr.products() for f in product.factors):
        for _, aff in acc.arithmetic:
            big = [n for n in (aff.const, *(c for _, c in aff.terms))
                   if abs(n) >= ARITHMETIC_LIMIT]
            if big:
                raise SpecError(f"{acc}: the index arithmetic's {big[0]} is beyond 2^62 in "
                                "size, which generated C cannot offset or stride by (it "
                                "computes index arithmetic in 64 bits)", expr.source,
                                acc.line, acc.column)


def _union(expr: Expr, opts: KernelOptions, layouts: Mapping[str, Layout],
           values: list[Vanishing]) -> Vanishing | None:
    """The union of a value expression's operands' entries, when it suffices (Z3: the
    expression is 0 where they all store nothing, not where any one does: ``max(A, B)``)
    and a merge of their storage can iterate it: the statement is that one expression
    (times a number) into a sparse output, and each operand is stored in the output's
    levels."""
    tensors = [a for a in expr.factors if a.indices]
    valued = [a for a in tensors if a.value is not None]
    if expr.is_sum or expr.accumulate or opts.fill_values or not opts.semiring.is_plus_times \
            or len(valued) != 1 or len(tensors) != len(expr.factors) \
            or any(a.pattern or (a is not valued[0] and not a.in_value) for a in tensors):
        return None
    tree = valued[0].value
    assert tree is not None
    names = operands(tree)
    out = layouts.get(expr.output.tensor)
    out_storage = storage_or_none(out) if out is not None and out.dense_array is None \
        else None
    if len(names) < 2 or out_storage is None or index_refs(tree) \
            or all(v.zero for v in values if v.operand in names):
        return None
    for a in tensors:
        storage = storage_or_none(layouts[a.tensor])
        if storage is None or layouts[a.tensor].dense_array is not None or not same_levels(
                storage, a.indices, out_storage, expr.output.indices):
            return None
    return vanishing_jointly(tree, names)


def _check_broadcast(expr: Expr, sparse_output: bool) -> None:
    """A term whose factors leave out an output index is the same along it (numpy's
    broadcasting): the kernel writes it over the output's whole extent there, which a dense
    output has; a sparse output would store every element, so it is refused."""
    for product in expr.products():
        missing = product.broadcast()
        if missing and sparse_output:
            factors = " * ".join(map(str, product.factors)) or "a number"
            raise SpecError(f"term {factors} does not use the output index(es) {missing}: "
                            f"broadcast along them it fills every element, so the output "
                            f"{expr.output.tensor!r} must be dense", expr.source)


def _value_expressions(expr: Expr, opts: KernelOptions,
                       layouts: Mapping[str, Layout]) -> list[Vanishing]:
    """For each sparse operand of each expression of values (``abs(A(i,j))``, ``A(i,j) /
    B(i,j)``), Z3's decision whether the expression is 0 where that operand stores nothing
    (a dense operand stores every element); refused under a semiring (its add and mul are
    the operators there), and a division by a sparse operand's absent entries refused
    unless ``fill_values`` asks for it."""
    found = [a for a in _every_factor(expr) if a.value is not None]
    if found and not opts.semiring.is_plus_times:
        raise SpecError(f"semiring={opts.semiring.name}: functions and divisions of values "
                        f"({found[0]}) are not supported under a semiring yet", expr.source,
                        found[0].line, found[0].column)
    decisions = []
    for acc in found:
        assert acc.value is not None
        mine = [vanishing(acc.value, name) for name in operands(acc.value)
                if layouts[name].dense_array is None]
        dense = {v.operand for v in mine if not v.zero}
        why = divides_by_absent(acc.value, dense)
        if why and not opts.fill_values:
            raise SpecError(f"{acc}: {why}; pass fill_values=True to compute it densely, as "
                            "numpy does (inf or nan where nothing is stored)", expr.source,
                            acc.line, acc.column)
        decisions += [v for v in mine if v not in decisions]    # a sum's terms may repeat it
    return decisions


def _every_factor(expr: Expr) -> list[Access]:
    """Every factor of every term (a sum's ``factors`` hold each operand's first access
    only; its other terms may read it in other expressions)."""
    return [a for product in expr.products() for a in product.factors]


def _check_value_types(expr: Expr, typing: Typing) -> None:
    """Functions defined on real values only (min, max, sign) refused on complex ones."""
    for acc in _every_factor(expr):
        if acc.value is None:
            continue
        for name in operands(acc.value):
            vt = typing.of(name)
            bad = [f for f in called(acc.value) if function(f).real_only]
            if bad and vt.kind is Kind.COMPLEX:
                raise SpecError(f"{bad[0]}() is not defined on complex values ({name} is "
                                f"{vt.name}): complex numbers have no order", expr.source,
                                acc.line, acc.column)


def _check_semiring_types(opts: KernelOptions, typing: Typing, expr: Expr) -> None:
    """Semirings on the output's and the sums' types: any on real floats; on integers, an
    infinite zero is the type's limit and a user's add must keep its laws in the type's
    wrapping arithmetic (Z3, bit-vectors); on bool, in C's ``_Bool`` arithmetic (Z3 over 0
    and 1); none on complex numbers (min and max have no order there)."""
    semiring = opts.semiring
    if semiring.is_plus_times:
        return
    out = expr.output.tensor
    for vt in (typing.output, typing.accumulate):
        if vt.kind is Kind.COMPLEX:
            why = "complex numbers have no order for min and max and no infinities"
        else:
            why = semiring.laws_in(vt)
        if why:
            raise SpecError(f"semiring={semiring.name} is not defined for {vt.name} values (the "
                            f"output {out!r}): {why}", expr.source)


def _typing(expr: Expr, opts: KernelOptions, named: Mapping[str, Any],
            layouts: Mapping[str, Layout]) -> Typing:
    """Each tensor's value type (``dtype=``, per tensor or for all, else a Layout object's
    own, else float64; scalars take the output's unless named), the output's (given, else
    numpy's promotion of the inputs' with layouts) and the accumulator's."""
    given = opts.dtype
    out = expr.output.tensor
    mask = opts.mask[1] if opts.mask else None

    def declared(operand: str) -> ValueType | None:
        tensor = expr.original(operand)
        if isinstance(given, str):
            return value_type(given)
        named_in = next((n for n in (operand, tensor) if given is not None and n in given),
                        None)          # a sum's term names a tensor read again by its alias
        if given is not None and named_in is not None:
            return value_type(given[named_in])
        lay = named.get(tensor)
        return lay.value_type if isinstance(lay, Layout) else None

    if given is not None and not isinstance(given, str):
        tensors = {a.tensor for a in (expr.output, *expr.factors)} | {mask}
        for name in given:
            if name not in tensors:
                raise SpecError(f"dtype names {name!r}, which is not a tensor of "
                                f"{expr.text!r}", expr.source)
    types = {a.tensor: t for a in expr.factors if (t := declared(a.tensor)) is not None}
    products, numbers = _product_types(expr, types, layouts, mask)
    given_out = declared(out)
    # numbers only (a sum's number term): weak next to the output's type, as numpy adds it
    computed = result_type(*(products or ([given_out] if given_out is not None else [])),
                           weak=numbers)
    if expr.rhs is not None:    # numpy's type of the statement as written, and what numpy
        written = {n: types.get(n, FLOAT64) for n in operands(expr.rhs)}   # refuses there
        written.update({a.tensor: types.get(a.tensor, given_out or computed)
                        for a in expr.factors if not a.indices})   # a scalar: the output's
        computed = type_of(expr.rhs, written, expr.source)
        check_folded_steps(expr.rhs, written, expr.source)
    # the expansion's numbers after the statement as written: a step numpy wraps before a
    # type change is the reason for a coefficient the expansion makes (``(128 - k) * (T *
    # 128)``: ``T * 128`` wraps in uint8, then 16384 * T would not fit it)
    _check_coefficients(expr, types, mask)
    output = given_out or computed
    # a product of a statement's expansion (no ``rhs``) computes in the statement's type,
    # which was checked against the output there; its own product type is not numpy's
    if expr.rhs is not None and opts.semiring.is_plus_times and \
            not can_cast(computed, output):
        raise SpecError(f"dtype: the output {out!r} is {output.name}, and numpy computes "
                        f"{expr.text.split('=', 1)[1].strip()!r} in {computed.name}, which "
                        "numpy's same_kind casting does not allow into it (a fraction, an inf "
                        "or a NaN has no integer; an imaginary part no real)", expr.source)
    # a number broadcast: weak next to numpy's type of the statement as written (an output
    # of another type is a cast at the store), then added in the output's
    fits = dict.fromkeys((computed, output) if expr.rhs is not None else (output,))
    for product in expr.products():
        if not product.factors:
            for vt in fits:
                check_coefficient(product.coefficient, [vt], str(product), expr.source)
    acc = value_type(opts.accumulate) if opts.accumulate else output
    if opts.accumulate and not np.can_cast(output.dtype, acc.dtype, "safe"):
        raise SpecError(f"accumulate={acc.name}: the output {out!r} is {output.name}; the "
                        "sums are accumulated in a type at least as wide", expr.source)
    every = {a.tensor: types.get(a.tensor, output if a.tensor not in layouts else FLOAT64)
             for a in expr.factors}
    every[out] = output
    if mask is not None and mask not in every:          # complemented: not a factor
        every[mask] = declared(mask) or FLOAT64
    return Typing(tuple(sorted(every.items())), output, acc)


def _product_types(expr: Expr, types: Mapping[str, ValueType], layouts: Mapping[str, Layout],
                   mask: str | None) -> tuple[list[ValueType], tuple[Any, ...]]:
    """numpy's type of each product with typed factors (its factors' types and its literal
    coefficient, weakly: ``1e300 * (x(i) < 0)`` is float64 before a float32 is added to
    it) and the numbers of the other products (numbers only, or times untyped scalars,
    which take the output's type): weak next to the sum's type."""
    products: list[ValueType] = []
    numbers: list[Any] = []
    for p in expr.products():
        factors = [type_of(a.value, {n: types.get(n, FLOAT64) for n in operands(a.value)},
                           expr.source) if a.value is not None else types.get(a.tensor, FLOAT64)
                   for a in p.factors
                   if (a.tensor in layouts or (not a.indices and a.tensor in types))
                   and a.tensor != mask and not a.in_value]     # a typed scalar promotes too
        literal = () if p.factors and is_sign(p.coefficient) else (_literal(p.coefficient),)
        if factors:
            products.append(result_type(*factors, weak=literal))    # bool stays bool
        else:           # numbers, or untyped scalars (the output's type): weak next to it
            numbers.extend(literal)
    return products, tuple(numbers)


def _literal(c: Coefficient) -> Any:
    """A coefficient as numpy promotes it: its size (its sign is numpy's negative of the
    product, ``-(256 * x(j))`` of uint32 is uint32), a Python number weakly (a Fraction as
    the float it divides into), a numpy scalar (a function's value) by its type."""
    if isinstance(c, (bool, np.generic)):
        return c
    return float(abs(c)) if isinstance(c, Fraction) else abs(c)


def _check_coefficients(expr: Expr, types: Mapping[str, ValueType], mask: str | None) -> None:
    """Each product's number in numpy's type of the product (SpecError for an integer beyond
    it: ``x(i) * 99999999999999999999999`` with int64 x, as numpy's OverflowError)."""
    for product in expr.products():
        factors = [a for a in product.factors if a.tensor != mask and not a.in_value]
        if factors and not is_sign(product.coefficient):
            check_coefficient(product.coefficient, [
                type_of(a.value, {n: types.get(n, FLOAT64) for n in operands(a.value)},
                        expr.source) if a.value is not None else types.get(a.tensor, FLOAT64)
                for a in factors], str(product).split("=", 1)[1].strip(), expr.source)


def _options(expr: Expr, spec: KernelFile | None, options: KernelOptions | None,
             keywords: Mapping[str, Any]) -> KernelOptions:
    """The options: a kernel file's, overridden by those of the call (``options``, then the
    keywords), checked against the statement."""
    from_file = {} if spec is None else \
        check_given(spec.options, spec.source, spec.position, FILE_KEYS)
    called = {**_differing(options), **check_given(keywords, expr.source)}
    if spec is None:
        return KernelOptions(**called).resolved(expr)

    def where(name: str) -> tuple[int, int] | None:     # a mistake made in the call: no line
        return None if name in called else spec.position(name)

    return KernelOptions(**{**from_file, **called}).resolved(expr, where)


_DEFAULT_OPTIONS = KernelOptions()


def _differing(options: KernelOptions | None) -> dict[str, Any]:
    """The fields of ``options`` that differ from the defaults (what it gives)."""
    if options is None:
        return {}
    if not isinstance(options, KernelOptions):
        raise SpecError(f"options must be an spf.KernelOptions, got {type(options).__name__}")
    return {name: getattr(options, name) for name in NAMES
            if getattr(options, name) != getattr(_DEFAULT_OPTIONS, name)}


def _width_of_given(layouts: Mapping[str, Any]) -> str:
    """The index width of the Layout objects among ``layouts`` (the narrowest when none is
    one); SpecError when they disagree."""
    given = {lay.index_type for lay in layouts.values() if isinstance(lay, Layout)}
    if len(given) > 1:
        raise SpecError("the layouts given to one kernel must share an index_type, got "
                        + ", ".join(f"{t}: {lay.index_type}" for t, lay in layouts.items()
                                    if isinstance(lay, Layout)))
    if given:
        return given.pop()
    # a layout named whose index arrays are declared int64 runs the kernel in 64 bits
    wide = any(_own_width(lay) == "int64" for lay in layouts.values() if isinstance(lay, str))
    return "int64" if wide else INDEX_WIDTHS[0]


def _own_width(name: str) -> str:
    """The index type a layout file declares by its fields' widths (int32 when it cannot be
    loaded: resolving it reports why)."""
    try:
        return load_layout(name).index_type
    except SpecError:
        return INDEX_WIDTHS[0]


def _complement_layout(expr: Expr, mask: str, layouts: dict[str, Any],
                       params: dict[str, Any], index_type: str) -> Layout:
    """A complemented mask is not an operand of the product: its layout is taken out of
    ``layouts`` (and ``params``) and resolved here."""
    out = expr.output
    lay = layouts.pop(mask, None)
    lay = load_for_order(default_layout(len(out.indices)) if lay is None else lay,
                         len(out.indices), None, **dict(params.pop(mask, {}))
                         ).with_index_type(index_type)
    if lay.order != len(out.indices):
        raise SpecError(f"mask {mask!r}: its layout {lay.name} has {lay.order} indices, "
                        f"the output {out} {len(out.indices)}", expr.source)
    return lay


def _resolve_layouts(expr: Expr, layouts: Mapping[str, Any],
                     params: Mapping[str, Mapping[str, int]],
                     in_file: Mapping[str, tuple[int, int]], index_type: str
                     ) -> dict[str, Layout]:
    """Each tensor's Layout; ``in_file``: where a kernel file names a tensor's layout."""
    accesses = {a.tensor: a for a in (expr.output, *expr.factors)}
    for tname in list(layouts) + list(params):
        if tname not in accesses:
            raise SpecError(f"layout given for {tname!r}, which is not a tensor of "
                            f"{expr.text!r}", expr.source, *in_file.get(tname, (None, None)))
    resolved: dict[str, Layout] = {}
    for tname, acc in accesses.items():
        at = in_file.get(tname, (None, None))
        if not acc.indices:
            if tname in layouts:
                raise SpecError(f"{tname!r} is a scalar and takes no layout", expr.source, *at)
            continue
        lay = layouts.get(tname)
        lay = default_layout(len(acc.indices)) if lay is None else lay
        try:
            resolved[tname] = load_for_order(lay, len(acc.indices), None,
                                             **dict(params.get(tname, {}))
                                             ).with_index_type(index_type)
        except SpecError as exc:
            if tname not in in_file or exc.line is not None or is_file(Path(exc.source)):
                raise       # given in the call, or an error of the layout's own file
            raise SpecError(f"the layout of {tname!r}: {exc}", expr.source, *at) from None
    return resolved


def _read_densely(expr: Expr, opts: KernelOptions, layouts: dict[str, Layout],
                  index_type: str, valued: set[str]) -> dict[str, Layout]:
    """With ``fill_values`` an operand's absent entries are its fill: 0 for data from numpy,
    scipy or pydata (a Tensor's own fill, which the call checks or reads).  Unless 0 is the
    semiring's zero and annihilates mul, an absent entry changes the product, so no operand
    may skip it: each sparse operand is read from a dense array holding its fill where it
    stores nothing (the runtime makes it); so is each operand in ``valued`` (its value
    expression is not 0 at 0).  Its layout in ``layouts`` becomes the dense one; the
    returned map keeps the given ones."""
    semiring = opts.semiring
    every = opts.fill_values and not (semiring.annihilates and semiring.zero == 0)
    given: dict[str, Layout] = {}
    for a in expr.factors:
        lay = layouts.get(a.tensor)
        if a.pattern or lay is None or lay.dense_array is not None or a.tensor in given \
                or not (every or a.tensor in valued):
            continue
        if opts.share and a.tensor == opts.share[1]:
            raise SpecError(f"fill_values=True: {a.tensor!r} would be read densely (zero "
                            f"does not annihilate {opts.semiring.name}'s mul), so it cannot "
                            "also give the output's structure (share=)", expr.source)
        given[a.tensor] = lay
        layouts[a.tensor] = default_layout(len(a.indices)).with_index_type(index_type) \
            .with_value_type(lay.value_type)        # read densely, in its own type
    return given


def _written_output(expr: Expr, layouts: Mapping[str, Layout],
                    share: tuple[str, str] | None, structure: bool) -> Layout | None:
    """The output's layout when it is sparse, not assembled level by level, and written by
    its relation's solution from an entry list (:mod:`spf.front.writing`); a pattern layout
    is written so unless ``structure`` (the entry list's values are checked there)."""
    lay = layouts.get(expr.output.tensor)
    checked = lay is not None and lay.implicit is not None and not structure
    if lay is None or lay.dense_array is not None or share is not None or expr.accumulate \
            or (storage_or_none(lay) is not None and not lay.mixed_widths and not checked) \
            or write_plan_or_none(lay) is None:
        return None
    return lay


def _check_pattern_output(expr: Expr, layouts: Mapping[str, Layout], structure: bool,
                          written: Layout | None) -> None:
    """SpecError for an output in a pattern layout whose values cannot be checked (not
    written from an entry list) unless ``structure``; and for ``structure`` on any other
    output (it would be silently ignored)."""
    out = expr.output.tensor
    lay = layouts.get(out)
    if structure and (lay is None or lay.implicit is None):
        what = "a scalar" if lay is None else \
            f"in {lay.name}, which stores its values (in {lay.value_array})"
        raise SpecError(f"structure=True stores the positions of the entries of an output in a "
                        f"pattern layout (whose value is a constant); output {out!r} is {what}, "
                        "so it has no meaning here: drop structure=True", expr.source)
    if lay is None or lay.implicit is None:
        return
    if not structure and written is None:
        raise SpecError(f"output {out!r} is in {lay.name}, a pattern layout: every entry it "
                        f"stores holds {lay.value}, and the values this kernel computes "
                        "cannot be checked against it (they are checked in an entry list, "
                        "and an output with share= or one its relation does not say how to "
                        "write is not written from one); pass structure=True to store the "
                        "positions of the entries it computes", expr.source)


def _entry_list(layout: Layout) -> Layout:
    out = coordinate_layout(layout.order)
    if out is None:
        raise SpecError(f"an output in {layout.name} is assembled as an entry list, and no "
                        f"coordinate layout of order {layout.order} is on the layout search "
                        "path", layout.source)
    return out.with_index_type(layout.index_type).with_value_type(layout.value_type)


def _needs_assembly(expr: Expr, layouts: Mapping[str, Layout],
                    share: tuple[str, str] | None) -> bool:
    """A sparse output whose index arrays no input provides is assembled by the kernel."""
    out = expr.output
    lay = layouts.get(out.tensor)
    if lay is None or lay.dense_array is not None:
        return False
    missing = list(lay.index_arrays)
    if share is not None:
        missing = [f for f in missing if f not in shared_fields(lay, layouts[share[1]])]
        if missing:
            raise SpecError(f"output {out.tensor!r} ({lay.name}) cannot share index arrays "
                            f"{missing} with {share[1]!r}", expr.source)
        return False
    try:
        storage_of(lay)
    except SpecError as exc:
        try:        # the cause is in the layout's file: located there
            write_plan(lay)
        except SpecError as unwritten:
            raise layout_error(lay, f"output {out.tensor!r}: {exc.detail}; and "
                               f"{unwritten.detail}") from None
        raise layout_error(lay, f"output {out.tensor!r}: {exc.detail}") from None
    return True
