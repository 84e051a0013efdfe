"""Strong scaling of SpMV from 1 to 2 Dask workers: spf's distributed call
(``CompiledKernel.distributed``) against the local kernel and against the usual Dask way,
a ``dask.array`` of scipy CSR row blocks.

    python -m experiments.distributed [--quick] [--matrix path.mtx ...]

``y(i) = A(i,j) * x(j)`` with A in CSR (``rows`` partition: nnz-balanced row blocks, the
slices concatenated) and in COO (``nonzeros`` partition: equal shares of the entries, the
partial y tree-reduced on the cluster).  Contenders, timed per call with x fixed:

- ``spf_local``: the serial compiled kernel called directly, ``f(A=T, x=x)``, in the client
  process (1 thread; ``workers`` = 0);
- ``spf_dask_W``: ``f.distributed(client)(A=T, x=x)`` on a ``LocalCluster`` of W worker
  processes (W = 1, 2), one part per worker; A is an ``spf.Tensor`` built beforehand, so its
  parts are cut and scattered once, before timing (x is scattered on every call);
- ``dask_array_W``: ``da.from_array(A_csr, chunks=(ceil(rows / W), cols), asarray=False)``
  persisted on the cluster once (one row block per worker), and per call
  ``dA.map_blocks(lambda b, v: b @ v, x, drop_axis=1)`` computed by the client (x travels in
  the task graph).  It holds scipy CSR blocks whichever layout spf's rows use, so it is run
  once per matrix and listed with CSR.

Every worker has 1 thread (``threads_per_worker=1``, ``OMP_NUM_THREADS=1``), like the local
kernel.  Each contender is warmed up once and timed as the median of repeated calls, its
calls back to back; every contender's y is checked against scipy's ``A @ x`` before and after
timing.  Matrices: the 3 of the full suite with the most nonzeros (``--quick``: the 2 largest
quick matrices, seconds).  ``speedup_vs_local`` = spf_local time (CSR for dask_array) /
contender time; ``scaling`` = the contender's 1-worker time / its 2-worker time.
Needs ``dask[distributed]``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

import spf

from .common import (
    bar_chart,
    experiment_parser,
    machine_note,
    plot_path,
    print_table,
    progress,
    time_blocked,
    write_csv,
)
from .matrices import matrices

SPMV = "y(i) = A(i,j) * x(j)"
LAYOUTS = ("CSR", "COO")
WORKERS = (1, 2)
# mode -> (suite scale, matrices, seconds of timed calls per contender, min runs, max runs,
# pause before each contender's block of calls)
MODES = {"quick": ("quick", 2, 0.05, 3, 20, 0.0), "full": ("full", 3, 1.0, 7, 100, 0.3)}


def largest(scale: str, count: int, files: list[str]) -> list[tuple[str, sp.csr_matrix]]:
    """The ``count`` matrices of the suite with the most nonzeros (every file given instead)."""
    if files:
        return list(matrices(scale, files))
    kept: list[tuple[str, sp.csr_matrix]] = []
    for name, A in matrices(scale):
        kept = sorted(kept + [(name, A)], key=lambda item: -item[1].nnz)[:count]
    return kept


def cluster(workers: int) -> tuple[Any, Any]:
    """A local cluster of ``workers`` single-threaded worker processes and its client."""
    import distributed
    c = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                 dashboard_address=None, env={"OMP_NUM_THREADS": "1"})
    return c, distributed.Client(c)


def timed_checked(name: str, call: Callable[[], np.ndarray], expect: np.ndarray,
                  mode: tuple) -> tuple[float, int]:
    """(median seconds, runs) of ``call``, whose y is checked against ``expect`` before timing
    and again on the last timed call."""
    _, _, target, low, high, pause = mode
    last: dict[str, np.ndarray] = {}

    def check(y: np.ndarray) -> None:
        y = np.asarray(y)
        if y.shape != expect.shape or not np.allclose(y, expect):
            raise AssertionError(f"{name}: y differs from scipy's A @ x")

    def timed() -> None:
        last["y"] = call()
    check(call())
    seconds_runs = time_blocked({name: timed}, target, low, high, pause)[name]
    check(last["y"])
    return seconds_runs


def dask_array_call(client: Any, A: sp.csr_matrix, x: np.ndarray, workers: int
                    ) -> Callable[[], np.ndarray]:
    """SpMV the usual Dask way: scipy CSR row blocks persisted on the cluster, one per worker
    (balanced by rows), ``map_blocks`` per call (the call holds the persisted array)."""
    import dask.array as da
    import distributed
    rows_per_block = max(1, math.ceil(A.shape[0] / workers))
    dA = client.persist(da.from_array(A, chunks=(rows_per_block, A.shape[1]), asarray=False))
    distributed.wait(dA)
    held = client.who_has(dA)
    if len({w for ws in held.values() for w in ws}) < min(workers, len(held)):
        client.rebalance(distributed.futures_of(dA))    # blocks on one worker: spread them
    meta = np.empty(0, dtype=A.dtype)

    def call() -> np.ndarray:
        y = dA.map_blocks(lambda b, v: b @ v, x, dtype=A.dtype, drop_axis=1, meta=meta)
        return client.compute(y).result()
    return call


def time_local(inputs: list[dict], kernels: dict[str, Any], mode: tuple) -> dict:
    """(matrix, layout, contender, workers) -> (seconds, runs) of the local kernel."""
    out = {}
    for case in inputs:
        for layout in LAYOUTS:
            f, T, x = kernels[layout], case["tensors"][layout], case["x"]
            out[case["name"], layout, "spf_local", 0] = timed_checked(
                f"spf_local {layout}", lambda: f(A=T, x=x), case["expect"], mode)
    return out


def time_cluster(workers: int, inputs: list[dict], kernels: dict[str, Any], mode: tuple,
                 quick: bool) -> dict:
    """(matrix, layout, contender, workers) -> (seconds, runs) on a cluster of ``workers``."""
    c, client = cluster(workers)
    out = {}
    try:
        for case in progress(inputs, f"{workers} worker(s)", quick):
            x, expect = case["x"], case["expect"]
            for layout in LAYOUTS:
                d = kernels[layout].distributed(client)
                T = case["tensors"][layout]
                out[case["name"], layout, f"spf_dask_{workers}", workers] = timed_checked(
                    f"spf_dask_{workers} {layout}", lambda: d(A=T, x=x), expect, mode)
            d = None                      # frees A's parts on the workers
            call = dask_array_call(client, case["A"], x, workers)
            out[case["name"], "CSR", f"dask_array_{workers}", workers] = timed_checked(
                f"dask_array_{workers}", call, expect, mode)
            call = None                   # frees the persisted blocks
            print(f"  {case['name']}: {workers} worker(s) done", flush=True)
    finally:
        client.close()
        c.close()
    return out


def to_rows(times: dict, inputs: list[dict]) -> list[dict]:
    """One row per timed contender, with its speedup over the local kernel and its scaling."""
    size = {case["name"]: case["A"] for case in inputs}
    rows = []
    for (matrix, layout, contender, workers), (seconds, runs) in times.items():
        local = times[matrix, layout, "spf_local", 0][0]
        family = contender.rsplit("_", 1)[0]
        scaling = ""
        if workers == 2 and (matrix, layout, f"{family}_1", 1) in times:
            scaling = times[matrix, layout, f"{family}_1", 1][0] / seconds
        rows.append({"matrix": matrix, "rows": size[matrix].shape[0], "nnz": size[matrix].nnz,
                     "layout": layout, "contender": contender, "workers": workers,
                     "seconds": seconds, "runs": runs, "speedup_vs_local": local / seconds,
                     "scaling": scaling})
    order = {c: k for k, c in enumerate(["spf_local", "spf_dask_1", "spf_dask_2",
                                         "dask_array_1", "dask_array_2"])}
    return sorted(rows, key=lambda r: ([c["name"] for c in inputs].index(r["matrix"]),
                                       LAYOUTS.index(r["layout"]), order[r["contender"]]))


def run(quick: bool, files: list[str]) -> list[dict]:
    mode = MODES["quick" if quick else "full"]
    inputs = []
    for name, A in largest(mode[0], mode[1], files):
        x = np.random.default_rng(7).uniform(0.5, 1.5, A.shape[1])
        inputs.append({"name": name, "A": A, "x": x, "expect": A @ x,
                       "tensors": {lay: spf.Tensor.from_scipy(lay, A) for lay in LAYOUTS}})
        print(f"{name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros", flush=True)
    kernels = {lay: spf.Kernel(SPMV, {"A": lay}).compile() for lay in LAYOUTS}
    times = time_local(inputs, kernels, mode)
    for workers in WORKERS:
        times.update(time_cluster(workers, inputs, kernels, mode, quick))
    return to_rows(times, inputs)


def plot(rows: list[dict], quick: bool = False) -> list[Path]:
    """Speedup over the local kernel per matrix and layout (log scale; < 1: slower)."""
    groups: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["contender"] != "spf_local":
            groups.setdefault(f"{r['matrix']} {r['layout']}", {})[r["contender"]] = \
                float(r["speedup_vs_local"])
    note = machine_note(rows)
    return bar_chart(groups, plot_path("distributed", "speedup", quick),
                     f"SpMV on 1 and 2 Dask workers: local spf time / contender time "
                     f"(> 1: faster than the local kernel{'; ' + note if note else ''})",
                     "speedup vs spf_local", log=True, reference=1.0)


def _f(value: Any) -> float:
    return float(value) if value not in ("", None) else float("nan")


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md: the times, and what they show."""
    lines = ["SpMV `y(i) = A(i,j) * x(j)`, median seconds per call with A already on the "
             "workers; `speedup` = spf_local time / contender time (dask_array: against "
             "spf_local CSR), `scaling` = 1-worker time / 2-worker time. Workers and the "
             "local kernel run 1 thread each.", "",
             "| matrix | nnz | layout | contender | workers | ms | speedup vs local | "
             "scaling 1 -> 2 |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        scaling = "" if _f(r["scaling"]) != _f(r["scaling"]) else f"{_f(r['scaling']):.2f}"
        lines.append(f"| {r['matrix']} | {r['nnz']} | {r['layout']} | {r['contender']} | "
                     f"{r['workers']} | {_f(r['seconds']) * 1e3:.3g} | "
                     f"{_f(r['speedup_vs_local']):.3g} | {scaling} |")
    return "\n".join(lines + ["", _summary(rows)])


def _summary(rows: list[dict]) -> str:
    """Four sentences on what the numbers show, computed from them."""
    t = {(r["matrix"], r["layout"], r["contender"]): _f(r["seconds"]) for r in rows}
    cases = [c for c in dict.fromkeys((r["matrix"], r["layout"]) for r in rows)
             if all((*c, k) in t for k in ("spf_local", "spf_dask_1", "spf_dask_2"))]
    if not cases:
        return ""
    local = np.median([t[(*c, "spf_local")] for c in cases])
    extra = np.median([t[(*c, "spf_dask_1")] - t[(*c, "spf_local")] for c in cases])
    scal = {c: t[(*c, "spf_dask_1")] / t[(*c, "spf_dask_2")] for c in cases}
    best = max(cases, key=lambda c: t[(*c, "spf_local")] / t[(*c, "spf_dask_2")])
    speedup = t[(*best, "spf_local")] / t[(*best, "spf_dask_2")]
    vs_da = [t[(m, "CSR", f"dask_array_{w}")] / t[(m, "CSR", f"spf_dask_{w}")]
             for m, lay in cases if lay == "CSR" for w in WORKERS
             if (m, "CSR", f"dask_array_{w}") in t]
    coo = [v for c, v in scal.items() if c[1] == "COO"]
    verdict = "slower than the local kernel in every case here" if speedup < 1 else \
        "faster than the local kernel there"
    text = (f"On 1 worker spf's distributed call costs {extra * 1e3:.3g} ms more than the "
            f"local call (median), {extra / local:.3g}x the local SpMV's {local * 1e3:.3g} ms: "
            "a round trip through the scheduler per task, x scattered to the workers and y "
            "gathered, none of which shrinks with more workers. "
            f"So 1 -> 2 workers divides only the compute part: spf_dask's scaling is "
            f"{min(scal.values()):.2f}x-{max(scal.values()):.2f}x (COO, whose partial y are "
            f"also tree-reduced on the cluster, {min(coo, default=float('nan')):.2f}x-"
            f"{max(coo, default=float('nan')):.2f}x; below 1, 2 workers are slower than 1), "
            f"and its best 2-worker run is {speedup:.3g}x the local kernel "
            f"({best[0]} {best[1]}): {verdict}. ")
    if vs_da:
        same = min(vs_da) >= 0.8 and max(vs_da) <= 1.25
        text += (f"Against the usual dask.array route on row blocks, dask_array time / spf_dask "
                 f"time is {min(vs_da):.2f}-{max(vs_da):.2f} (> 1: spf faster)"
                 + (": both pay about the same per-call cost. " if same else ". "))
    cores = rows[0].get("cores", "")
    return text + (f"The machine has {cores} cores: with 2 workers the client, the scheduler "
                   "and both workers share them, which also caps the scaling.")


def main(argv: list[str] | None = None) -> list[dict]:
    args = experiment_parser(__doc__).parse_args(argv)
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as err:
        raise SystemExit(f"distributed: needs dask and dask.distributed ({err}); "
                         "pip install 'dask[distributed]'") from err
    rows = run(args.quick, args.matrix)
    print_table(rows, ["matrix", "layout", "contender", "workers", "seconds", "runs",
                       "speedup_vs_local", "scaling"])
    print("wrote", write_csv("distributed", rows, args.quick))
    for p in plot(rows, args.quick):
        print("wrote", p)
    return rows


if __name__ == "__main__":
    main()
