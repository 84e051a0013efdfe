"""Statement splitting (paper Sec. 4): a sum, or a product reading a union layout, becomes one
product statement per term and per part of each union input; each is planned on its own."""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..front.kernel_spec import Expr
from ..front.layout import Layout
from ..front.terms import Constraint


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
            mine = dict(combo)
            terms.append(Term(product, mine, list(bounds) if fits else None,
                              find if isinstance(find, str)
                              else {t: a for t, a in find.items() if t in mine}))
    return terms
