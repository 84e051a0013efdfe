"""Privatization of a parallel loop's output: a loop that scatters into a dense output (the
planner's ``privatized``, :attr:`~spf.decide.analysis.LoopReport.private_output`) runs in a
parallel region where every thread adds into its own copy of the output, zeroed by that
thread (in parallel, and in the cache of the core that uses it); after the loop the threads
share out the elements, summing the team's copies into the output (cf. loopy's
``transform/privatize.py``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..front.semiring import Semiring
from ..middle.iteration_space import TensorUse
from . import ctree as t
from .names import CNames

MINE = "spf_mine"       # the thread's copy of the output's values


def redirect(names: CNames, out: TensorUse) -> None:
    """Make the statement read and write the thread's copy of ``out``'s values."""
    names.redirect[out.name, out.layout.value_ref.array] = MINE


def private_region(b: t.Builder, names: CNames, out: TensorUse, semiring: Semiring,
                   accumulate: bool, add: Callable[[str, str], t.Node], parallel: t.Parallel,
                   loops: Callable[[t.Parallel], None]) -> None:
    """The region around the nest (``loops(annotation)`` lowers it, the parallel loop
    annotated so: shared by the region's team); ``add(target, value)`` combines by the
    semiring's add; ``accumulate``: the output's own values are added to."""
    depth = b.depth
    arr = out.layout.value_ref.array
    size, data = names.extent_product(out, arr), names.field(out, arr, own=True)
    names.helpers.add("spf_omp")
    b.add(t.Comment(f"a private copy of {out.name} per thread, zeroed by its thread, added "
                    f"into {out.name} after the loop (+ 1: malloc(0) may return NULL)"),
          t.Declare("size_t", "spf_size", size, const=True),
          t.Declare("int", "spf_threads", "spf_max_threads()", const=True),
          t.If("spf_size > (SIZE_MAX / sizeof(spf_acc_t) - 1) / (size_t)spf_threads",
               [t.Return("1")], braces=False),
          t.Declare("spf_acc_t", "*spf_priv",
                    "malloc(((size_t)spf_threads * spf_size + 1) * sizeof(spf_acc_t))"),
          t.If("!spf_priv", [t.Return("1")], braces=False))
    b.nest(t.Team())
    b.nest(t.Block())
    b.add(t.Declare("int", "spf_team", "spf_team_size()", const=True),
          t.Declare("spf_acc_t *restrict", MINE, "spf_priv + (size_t)spf_thread() * spf_size"),
          t.For("size_t spf_z = 0", "spf_z < spf_size", "++spf_z",
                [t.Assign(f"{MINE}[spf_z]", semiring.zero_c())], braces=False))
    loops(replace(parallel, team=False))
    b.close_to(depth + 2)
    b.flush()
    total = [add("spf_s", "spf_priv[(size_t)spf_t * spf_size + spf_z]")]
    b.add(t.For("size_t spf_z = 0", "spf_z < spf_size", "++spf_z", [
        t.Declare("spf_acc_t", "spf_s", f"{data}[spf_z]" if accumulate else semiring.zero_c()),
        t.For("int spf_t = 0", "spf_t < spf_team", "++spf_t", total, braces=False),
        t.Assign(f"{data}[spf_z]", "spf_s")], parallel=t.Parallel(t.Schedule.STATIC, team=False)))
    b.close_to(depth)
    b.add(t.Call("free(spf_priv)"))
