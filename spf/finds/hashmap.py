"""HashMap: a map from coordinate to positions built over the searched range, rebuilt when the
range or its keys change (Algorithm 3 without reduced indices gives when).  Single-coordinate
keys."""
from __future__ import annotations

from ..back import ctree as t
from ..middle.scan import LoopNest
from .base import CostTerms, FindContext, FindLowering, MapAlgorithm
from .checks import trip_counts
from .model import Choice, Find


class HashMap(MapAlgorithm):
    name = "hashmap"
    title = "HashMap"
    preference = 2
    parallel_rank = 0
    runtime = "hashmap.c"

    def check(self, ctx: FindContext) -> Choice | str:
        if len(ctx.find.keys) != 1:
            return ("HashMap keys are single coordinates; this find compares "
                    f"{len(ctx.find.keys)}")
        built = self.built_state(ctx)
        if isinstance(built, str):
            return built
        state, init = built
        return Choice("hashmap", 1, "<", state, ctx.unique, init, stateful=True,
                      in_order=ctx.unique)

    def cost(self, nest: LoopNest, find: Find, choice: Choice) -> CostTerms | None:
        resets = trip_counts(nest, choice)
        return None if resets is None else CostTerms(12, 4, resets)

    # lowering ---------------------------------------------------------------------------
    @staticmethod
    def table(f: FindLowering) -> str:
        return f"spf_map_{f.var}"

    def declare(self, f: FindLowering) -> list[t.Node]:
        return [t.Declare("spf_hash", self.table(f), "{0}")]

    def init(self, f: FindLowering) -> list[t.Node]:
        q = f"spf_q_{f.var}"
        return [f.snippet("find_hashmap_build.c", ("spf_out_of_memory",), table=self.table(f),
                          lo=f.lo(), end=f.end(),
                          q=q, key_q=f.key_at(q)[0],
                          comment=f"HashMap for the find of {f.var}: coordinate -> positions "
                                  f"in [{f.lo()}, {f.hi()}]")]

    def open(self, f: FindLowering, b: t.Builder) -> None:
        b.add(t.Comment("\n".join(f.comment_lines())))
        target, table = f.targets()[0], self.table(f)
        if f.choice.unique:
            pos = f"spf_hit_{f.var}"
            b.add(t.Declare("spf_index_t", pos, f"spf_hash_find(&{table}, {target})",
                            const=True))
            b.nest(t.If(f"{pos} >= 0"))
            f.bind(b, pos)
        else:
            b.nest(t.For(f"spf_index_t {f.var} = spf_hash_find(&{table}, {target})",
                         f"{f.var} >= 0", f"{f.var} = spf_hash_next(&{table}, {f.var})"))

    def release(self, f: FindLowering) -> list[t.Node]:
        return [t.Call(f"spf_hash_free(&{self.table(f)})")]

    def what(self, c: Choice) -> str:
        return "HashMap: looks the coordinate up in a map built over the range"

    def why(self, c: Choice) -> str:
        return "valid because the searched range and its keys are fixed between builds"


ALGORITHM = HashMap()
