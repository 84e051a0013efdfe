"""Binary search over a range whose keys Z3 proves sorted (increasing or decreasing): no
state, O(log L) per search."""
from __future__ import annotations

from ..back import ctree as t
from .base import FindAlgorithm, FindContext, FindLowering
from .checks import failed, missing_order_hint, rejection
from .model import Choice


class BinarySearch(FindAlgorithm):
    name = "binsearch"
    title = "BinarySearch"
    preference = 3
    stateless = True

    def check(self, ctx: FindContext) -> Choice | str:
        reasons = []
        for compare in ("<", ">"):
            ok, why = ctx.checker.sorted(compare)
            if ok:
                return Choice("binsearch", 1, compare, [], ctx.unique,
                              detail="over increasing keys" if compare == "<" else
                              "over decreasing keys")
            reasons.append((f"{'increasing' if compare == '<' else 'decreasing'} keys",
                            failed("the range is not sorted", why)))
        return rejection(reasons, missing_order_hint(ctx.find))

    def open(self, f: FindLowering, b: t.Builder) -> None:
        low, high, mid = f"spf_low_{f.var}", f"spf_high_{f.var}", f"spf_mid_{f.var}"
        # lower bound: the first position whose key does not come before the target
        b.add(f.snippet("find_binsearch.c", low=low, high=high, mid=mid, lo=f.lo(),
                        end=f.end(), advance_mid=f.advance(mid)))
        f.match(b, low, forward=True)

    def what(self, c: Choice) -> str:
        return "BinarySearch over the sorted range"

    def why(self, c: Choice) -> str:
        return "valid because Z3 proved the range sorted"


ALGORITHM = BinarySearch()
