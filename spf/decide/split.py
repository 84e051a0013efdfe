"""Statement splitting (paper Sec. 4): a sum, or a product reading a union layout, becomes one
product statement per term and per part of each union input; each is planned on its own."""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..front.kernel_spec import Access, Expr, alias_name
from ..front.layout import Layout
from ..front.rhs import Node, Ref, operands, renamed
from ..front.terms import Constraint
from .vanishing import vanishing


@dataclass(frozen=True)
class Term:
    """One product statement: its expression, the layout (part) of each tensor, the
    constraints and finds of the whole kernel that apply to it."""

    product: Expr
    layouts: dict[str, Layout]
    bounds: list[Constraint] | None
    find: str | dict[str, str]


def split_terms(expr: Expr, layouts: Mapping[str, Layout], bounds: list[Constraint],
                find: str | Mapping[str, str], accumulate: bool) -> list[Term]:
    """The product statements of ``expr`` (``accumulate``: each adds into the output, which
    the kernel zeroes once)."""
    terms = []
    for product in expr.products():
        out = product.output.tensor
        choices = [[(t, part) for part in (layouts[t].parts() if t != out else [layouts[t]])]
                   for t in dict.fromkeys(a.tensor for a in (product.output, *product.factors)
                                          if a.indices)]
        if accumulate:
            product = replace(product, accumulate=True)
        fits = all(c.names() <= set(product.indices) for c in bounds)
        for combo in itertools.product(*choices):
            mine = dict(combo) | {a.tensor: layouts[a.tensor] for a in product.sized}
            terms.append(Term(product, mine, list(bounds) if fits else None,
                              find if isinstance(find, str)
                              else {t: a for t, a in find.items() if t in mine}))
    return terms


def split_dense_reads(expr: Expr, layouts: Mapping[str, Layout]) -> tuple[Expr, dict[str, str]]:
    """``expr`` with each sparse operand that one term reads densely (its value expression
    is not 0 where it stores nothing: ``exp(A(i,j))``) and another by its entries
    (``A(i,j) * x(j)``) read under an alias in the terms that read it densely: the kernel
    takes the operand once in each form (the alias as a dense array), each term the form it
    was compiled for.  Also returns each alias made and the operand it reads."""
    if not expr.is_sum:
        return expr, {}
    dense = [_read_densely(factors, layouts) for _, factors in expr.terms]
    entries = [{a.tensor for a in factors if a.indices} - d
               for (_, factors), d in zip(expr.terms, dense)]
    mixed = set().union(*dense) & set().union(*entries)
    if not mixed:
        return expr, {}
    taken = set(expr.tensors) | {a.tensor for _, factors in expr.terms for a in factors}
    aliases: dict[str, str] = {}
    for name in sorted(mixed):
        tensor, k = expr.original(name), 2
        while alias_name(tensor, k) in taken:
            k += 1
        aliases[name] = alias_name(tensor, k)
        taken.add(aliases[name])
    terms = tuple((coef, tuple(_renamed(a, {n: aliases[n] for n in d & mixed})
                               for a in factors))
                  for (coef, factors), d in zip(expr.terms, dense))
    first: dict[str, Access] = {}      # a sum's factors: each operand's first access
    for _, fs in terms:
        for a in fs:
            first.setdefault(a.tensor, a)
    new = tuple((aliases[n], expr.original(n)) for n in sorted(mixed))
    return replace(expr, factors=tuple(first.values()), terms=terms,
                   aliases=tuple(sorted(expr.aliases + new))), aliases


def _read_densely(factors: tuple[Access, ...], layouts: Mapping[str, Layout]) -> set[str]:
    """The sparse operands a product's value expressions read densely (Z3: the expression
    is not 0 where the operand stores nothing)."""
    return {name for a in factors if a.value is not None for name in operands(a.value)
            if layouts[name].dense_array is None and not vanishing(a.value, name).zero}


def _renamed(acc: Access, names: Mapping[str, str]) -> Access:
    """``acc`` with the operands in ``names`` renamed, in its tensor and its value."""
    def ref(r: Ref) -> Ref:
        return replace(r, name=names.get(r.name, r.name))
    value: Node | None = renamed(acc.value, ref) if acc.value is not None else None
    return replace(acc, tensor=names.get(acc.tensor, acc.tensor), value=value)
