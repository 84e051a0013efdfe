"""Auto's run-time choice between find algorithms, lowered: one version of the nest per
alternative of the decision Auto left open, and the chain of ``if`` statements that runs the
version whose cost (:func:`~spf.decide.synthesis.cost_model`, evaluated on the operand
sizes at entry) is least.  Without such a decision there is one version, the chosen
templates'.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..decide.synthesis import cost_model
from ..finds import REGISTRY
from ..finds.base import FindLowering
from ..finds.model import Choice, Decision
from ..middle.scan import LoopNest
from . import ctree as t
from .names import CNames

Version = list[FindLowering]      # the find lowerings of one version of the nest


def versions(decisions: Sequence[Decision], names: CNames,
             used: set[str]) -> tuple[list[Version], Decision | None]:
    """One list of find lowerings per version of the nest: for Auto's run-time choice one
    version per alternative of its decision (returned second), then the chosen templates'
    (``used``: the names the code reads)."""
    def lowering(d: Decision, c: Choice) -> FindLowering:
        return FindLowering(d, c, names, REGISTRY[c.algorithm], d.find.var in used)
    chosen = [lowering(d, d.chosen) for d in decisions if d.chosen is not None]
    runtime = next((d for d in decisions if d.alternatives), None)
    if runtime is None:
        return [chosen], None
    alternatives = [[lowering(d, alt if d is runtime else d.chosen)
                     for d in decisions if d.chosen is not None]
                    for alt in runtime.alternatives]
    return alternatives + [chosen], runtime


def stateful(versions: list[Version]) -> list[FindLowering]:
    """The finds whose state is declared: every chosen one and each alternative once."""
    out = list(versions[-1])
    for version in versions[:-1]:
        out += [f for f in version if f.choice is not f.decision.chosen]
    return out


def lower_versions(b: t.Builder, nest: LoopNest, names: CNames, versions: list[Version],
                   runtime: Decision | None, lower_nest: Callable[[Version], None]) -> None:
    """The nest (``lower_nest`` lowers one version), or with a run-time choice the costs and
    ``if (cost of alternative 1 is least) {nest 1} else if ... else {nest}``."""
    if runtime is None:
        lower_nest(versions[0])
        return
    b.add(*cost_nodes(nest, names, runtime))
    chosen = f"spf_cost_{_chosen(runtime).algorithm}"
    alts = [f"spf_cost_{c.algorithm}" for c in runtime.alternatives]
    for i, (version, cost) in enumerate(zip(versions, alts)):
        cond = " && ".join([f"{cost} < {chosen}"] + [f"{cost} <= {later}"
                                                     for later in alts[i + 1:]])
        node = t.If(cond)
        b.nest(node)
        lower_nest(version)
        b.close()
        b.nest_else(node)
    lower_nest(versions[-1])
    b.close_to(b.depth - len(alts))


def cost_nodes(nest: LoopNest, names: CNames, d: Decision) -> list[t.Node]:
    """The comment and the constants of Auto's run-time choice for ``d``."""
    model = cost_model(nest, d.find, d.candidates)
    assert model is not None, "Auto chose at run time without a cost model"
    owner = model.searches
    # the entries searched: its value array's extent (a pattern layout's last index array's)
    lay = owner.layout
    counted = lay.value_array or lay.index_arrays[-1]
    searches = f"(int64_t)({names.extent_product(owner, counted)})"
    length = f"(int64_t)({names.aff(model.length)})"
    nodes: list[t.Node] = []
    formula = []
    choices = [_chosen(d)] + d.alternatives
    for c in choices:
        cost = model.terms[c.algorithm]
        product = " * ".join([f"(int64_t)({names.aff(r)})" for r in cost.resets] + [length])
        per = "" if cost.per_element == 1 else f"{cost.per_element} * "
        fixed = f" + (int64_t)({names.aff(cost.fixed)})" if cost.fixed is not None else ""
        nodes.append(t.Declare("int64_t", f"spf_cost_{c.algorithm}",
                               f"{cost.per_search} * {searches} + {per}{product}{fixed}",
                               const=True))
        formula.append(f"cost({REGISTRY[c.algorithm].title}) = {cost.per_search} * W + "
                       f"{per}R_{c.algorithm} * L" + (" + X" if fixed else ""))
    titles = [REGISTRY[c.algorithm].title for c in choices]
    both = len(titles) == 2
    sized = any(model.terms[c.algorithm].fixed is not None for c in d.candidates)
    comment = (f"Auto: {', '.join(titles[:-1])} and {titles[-1]} are "
               f"{'both' if both else 'all'} valid; pick the "
               f"{'cheaper' if both else 'cheapest'} from the operand sizes:\n"
               + ",\n".join(formula)
               + f"\n(W searches, L range length, R state resets{', X map size' if sized else ''}"
               "; see CostModel).")
    return [t.Comment(comment)] + nodes


def _chosen(d: Decision) -> Choice:
    """The template Auto chose at compile time (a decision with alternatives has one)."""
    assert d.chosen is not None, "run-time alternatives to a guard loop"
    return d.chosen
