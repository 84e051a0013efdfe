"""Distributed spf on Dask: strong scaling of one SpMV from 1 to 2 workers, the time and the
bytes of a CG iteration on the cluster, and a model of what 100 and 1,000 nodes would move.

    python -m experiments.distributed [--quick] [--matrix path.mtx ...]

One CSV, its ``kind`` column telling the three parts apart (``spmv``, ``cg``, ``model``).
Every worker has 1 thread (``threads_per_worker=1``, ``OMP_NUM_THREADS=1``), like the local
kernel; the clusters are ``LocalCluster`` s of W = 1 and 2 worker processes, each serving
the SpMV and the CG part.  Needs ``dask[distributed]``.

**SpMV** (``kind`` spmv).  ``y(i) = A(i,j) * x(j)`` with A in CSR (``rows`` partition:
nnz-balanced row blocks, the slices concatenated) and in COO (``nonzeros`` partition: equal
shares of the entries, the partial y tree-reduced on the cluster).  Contenders, timed per call
with x fixed:

- ``spf_local``: the serial compiled kernel called directly, ``f(A=T, x=x)``, in the client
  process (1 thread; ``workers`` = 0);
- ``spf_dask_W``: ``f.distributed(client)(A=T, x=x)`` on W worker processes, one part per
  worker; A is an ``spf.Tensor`` built beforehand, so its parts are cut and scattered once,
  before timing (x, numpy, is scattered to every part on every call, y gathered through the
  client);
- ``dask_array_W``: ``da.from_array(A_csr, chunks=(ceil(rows / W), cols), asarray=False)``
  persisted on the cluster once (one row block per worker), and per call
  ``dA.map_blocks(lambda b, v: b @ v, x, drop_axis=1)`` computed by the client (x travels in
  the task graph).  It holds scipy CSR blocks whichever layout spf's rows use, so it is run
  once per matrix and listed with CSR.

Each contender is warmed up once and timed as the median of repeated calls, its calls back to
back; every contender's y is checked against scipy's ``A @ x`` before and after timing.
Matrices: the 3 of the full suite with the most nonzeros (``--quick``: the 2 largest quick
matrices).  ``speedup_vs_local`` = spf_local time (CSR for dask_array) / contender time;
``scaling`` = the contender's 1-worker time / its 2-worker time.

**CG per iteration** (``kind`` cg).  The same conjugate-gradient loop (x0 = 0; per
iteration q = A p, alpha = rr / p.q, x += alpha p, r -= alpha q, rr' = r.r,
p = r + (rr' / rr) p) run for a fixed count (``tol`` 0: no early stop), on the 2-D 5-point
Laplacian (``--quick``: 100 x 100 grid, 10k rows; full: 500 x 500, 250k rows, 1.25M nonzeros,
and the suite's 3-D Laplacian, 64^3 rows, 1.8M nonzeros; also with ``--matrix``, CG needing
a symmetric positive definite matrix), b uniform in [0.5, 1.5).  Each
contender runs ``warm-up + iterations`` iterations (quick: 2 + 8, full: 3 + 30), ``rounds``
times (quick 1, full 3; the contenders' order rotating between rounds); a callback takes a
timestamp after every iteration, and the time of an iteration is the difference of two
stamps (warm-up iterations dropped); reported: the median over the rounds' iterations.
Contenders:

- ``local``: the loop in numpy in the client process around the local compiled kernel,
  ``f(A=T, x=p)``; its SpMV calls are timed on their own too (``spmv_seconds``: the local
  SpMV time of the goal);
- ``spf_dask_halo_W``: ``spf.distributed.solvers.cg(T, b, client, tol=0, maxiter=...,
  callback=...)`` itself: vectors are dask.arrays chunked like A's row blocks
  (``DistributedKernel.plan(A=T).row_chunks``), each SpMV a distributed call on a dask.array
  that gathers only the halo, then ``dask.persist`` of x, r and r.r and one scalar computed by
  the client (its copy of x every 25 iterations, for restarts, is one more gather; the median
  hides it);
- ``spf_broadcast_W``: the numpy loop on the client calling the in-memory distributed call
  ``d(A=T, x=p)`` (p scattered to every part, q gathered through the client each iteration);
- ``dask_array_W``: the loop of ``solvers.cg`` written with dask.array around the usual Dask
  SpMV: A as ``da.from_array(A_csr, chunks=(ceil(rows / W), cols), asarray=False)``
  persisted, vectors chunked like its row blocks, ``q = dA.map_blocks(lambda b, v: b @ v, p,
  drop_axis=1)`` (Dask aligns p with A's single column chunk: every block reads all of p);
- ``dask_floor_W``: Dask's floor, the same dask.array loop (``solvers.cg``'s chunks) with the
  SpMV replaced by an element-wise stand-in, ``q = p * d`` (d = 1 + 999 (b - 0.5), derived
  from b chunk by chunk so it lives with b): what the loop costs on this cluster with nothing
  to compute or move but the vector operations and the scalars.

Every contender's x after the last iteration is checked against the local loop's (the floor's
against the same loop in numpy with ``q = p * d``).  Goal (issue 42): spf_dask_halo_W's
iteration at most 1.5 x (dask_floor_W + the local SpMV), ``goal_ratio`` = spf_dask_halo_W /
(dask_floor_W + local SpMV).

**Bytes per CG iteration** (columns of the cg rows).  Measured: the bytes the workers fetched
from each other (their ``transfer_incoming_log``: the entries added between the callback
after the last warm-up iteration and the callback after the last iteration; both looks at the
logs fall outside the timed iterations), divided by the timed iterations and averaged over
the rounds, split by what was moved: ``bytes_halo``, the gathers' pieces (keys
``spf-gather-...``, or ``take-...`` when submitted as tasks); ``bytes_scalars``, transfers of
at most 64 bytes (the dot products' partial sums, alpha); ``bytes_chunks``, whole chunks of a
dask collection (a vector chunk combined with one on another worker, or the chunks a
``compute()`` joins on a worker: spf_dask_halo's copy of x every 25 iterations,
spf_broadcast's y); ``bytes_scattered``, data the client scattered (the pickled kernel, the
gathers' positions) fetched again after Dask's active memory manager dropped a replica (every
2 s: so per iteration it grows with the iteration's time); ``bytes_other``, the rest.  Client
<-> worker traffic (scatter, gather: spf_broadcast's x and y) is not in those logs.  Model:
``d.plan(A=T, x=x).bytes_per_call()``, its ``total`` (halo + fold, one SpMV per iteration) for
the spf_dask_halo rows, its ``broadcast`` for spf_broadcast.  Goal: measured within 1.2 x the
model (``bytes_ratio``), W >= 2 (one worker moves nothing).

**Model at scale** (``kind`` model, no cluster).  For P nodes (full: 100 and 1,000; quick: 16
and 64), every matrix of the suite (quick: laplace2d and rmat of the quick suite; or the
``--matrix`` files) cut like ``spf.distributed.plan_blocks(T, 0, grid, local=False)`` cuts it,
in 1-D, grid (P, 1), and in 2-D, grid (a, P / a) with a the largest divisor of P up to sqrt(P)
((10, 10) for 100, (25, 40) for 1,000); the dense operand is chunked like the output's row
blocks (an iteration's result), block k on node k, a row block folded (and its chunk kept) on
the node of its row's first block (``HaloPlan.chunk_worker``).  Per node: the halo elements
the block there gathers from chunks on other nodes plus, in 2-D, the partial output rows
(those a block's entries reach) folded into the row blocks that node holds, 8 bytes each
(``mean_node_bytes`` = total / P, ``max_node_bytes`` the most one node receives); the
partition ``chosen`` moves fewer bytes in all (ties: the smaller maximum per node), as
``DistributedKernel`` chooses the grid.  Rather
than ``plan_blocks`` itself (a pass over all entries per block, about P x nnz work: 5 s for
the 10 x 10 grid of a 6M-entry matrix of the full suite, so about a minute per grid at
P = 1,000), the figures are computed the same way from the CSR arrays, in one sort of the
distinct (block, column) pairs (half a second there); ``--quick`` checks them against
``plan_blocks(...).bytes_per_call()`` (halo and fold, exactly).

Plus, analytically (``source`` analytic, no data), the 3-D 7-point Laplacian on an
n x n x n grid with n = 522 (n^3 = 142M rows, 7 n^3 - 6 n^2 = 0.99e9 nonzeros) cut into P
contiguous row blocks of m = n^3 / P rows.  Rows r of a block read columns r + s,
s in {+-1, +-n, +-n^2}; a block's halo on each side is the union of the shifted ranges
outside its own, h(m) = |union over s in {1, n, n^2} of [max(s, m), m + s)|:

    h(m) = n^2              if m >= n^2    (a block holds at least a plane)
         = min(m + n, n^2)  if n <= m < n^2
         = 2 m + 1          if m < n,

so an inner node receives 2 h(m) elements (16 n^2 bytes while a block holds a plane: 4.4 MB
for n = 522, reached up to P = n = 522; at P = 1,000, m = 142k < n^2 = 272k: 2 (m + n)
elements, 2.3 MB), the total is 2 (P - 1) h(m) elements.  Rows at the grid's faces, which
lack some neighbours, are ignored, as is the nnz balance of the cuts (rows differ by at most
one entry).  Against the numpy model above on generated 3-D Laplacians (n = 30, 40), the
formula's maximum per node is within 0.5% while a block holds a plane or many lines of the
grid (P = 16, 64; with n = 522, a block at P = 1,000 holds 272 lines), and within 20% when a
block holds a few rows (P = 1,000 and 5,000 there).
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
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
from .matrices import laplacian_2d, matrices, suite

SPMV = "y(i) = A(i,j) * x(j)"
LAYOUTS = ("CSR", "COO")
WORKERS = (1, 2)
# mode -> (suite scale, matrices, seconds of timed calls per contender, min runs, max runs,
# pause before each contender's block of calls)
MODES = {"quick": ("quick", 2, 0.05, 3, 20, 0.0), "full": ("full", 3, 1.0, 7, 100, 0.3)}
# CG: mode -> (warm-up iterations, timed iterations, rounds)
CG_MODES = {"quick": (2, 8, 1), "full": (3, 30, 3)}
CG_FAMILIES = ("spf_dask_halo", "spf_broadcast", "dask_array", "dask_floor")
GOAL_TIME = 1.5        # spf_dask_halo per iteration <= GOAL_TIME x (dask_floor + local SpMV)
GOAL_BYTES = 1.2       # bytes moved per iteration <= GOAL_BYTES x the model's
SCALAR_BYTES = 64      # a transfer this small is a scalar (partial sums, alpha)
BYTE_KINDS = ("halo", "scalars", "chunks", "scattered", "other")
# model: mode -> nodes; the quick run's matrices
MODEL_NODES = {"quick": (16, 64), "full": (100, 1000)}
MODEL_QUICK = ("laplace2d", "rmat")
WORD = 8               # bytes per vector element
LAPLACE3D_N = 522      # the analytic 3-D Laplacian: n^3 rows, about 1e9 nonzeros
COLUMNS = ("kind", "matrix", "rows", "nnz", "layout", "contender", "workers", "seconds", "runs",
           "speedup_vs_local", "scaling", "spmv_seconds", "floor_plus_spmv_seconds",
           "goal_ratio", "bytes_measured", "bytes_halo", "bytes_scalars", "bytes_chunks",
           "bytes_scattered", "bytes_other",
           "bytes_model", "bytes_broadcast_model", "bytes_ratio", "nodes", "partition", "grid",
           "halo_bytes", "fold_bytes", "total_bytes", "mean_node_bytes", "max_node_bytes",
           "chosen", "source")


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


def persisted_row_blocks(client: Any, A: sp.csr_matrix, workers: int) -> Any:
    """``A`` as a dask.array of scipy CSR row blocks persisted on the cluster, one per worker
    (balanced by rows; spread over the workers if they landed on one)."""
    import dask.array as da
    import distributed
    rows_per_block = max(1, math.ceil(A.shape[0] / workers))
    dA = client.persist(da.from_array(A, chunks=(rows_per_block, A.shape[1]), asarray=False))
    distributed.wait(dA)
    held = client.who_has(dA)
    if len({w for ws in held.values() for w in ws}) < min(workers, len(held)):
        client.rebalance(distributed.futures_of(dA))    # blocks on one worker: spread them
    return dA


def dask_array_call(client: Any, A: sp.csr_matrix, x: np.ndarray, workers: int
                    ) -> Callable[[], np.ndarray]:
    """SpMV the usual Dask way: scipy CSR row blocks persisted on the cluster, one per worker
    (balanced by rows), ``map_blocks`` per call (the call holds the persisted array)."""
    dA = persisted_row_blocks(client, A, workers)
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


def time_spmv_cluster(client: Any, workers: int, inputs: list[dict], kernels: dict[str, Any],
                      mode: tuple, quick: bool) -> dict:
    """(matrix, layout, contender, workers) -> (seconds, runs) of one SpMV on ``client``'s
    cluster of ``workers``."""
    out = {}
    for case in progress(inputs, f"SpMV, {workers} worker(s)", quick):
        x, expect = case["x"], case["expect"]
        for layout in LAYOUTS:
            d = kernels[layout].distributed(client)
            T = case["tensors"][layout]
            out[case["name"], layout, f"spf_dask_{workers}", workers] = timed_checked(
                f"spf_dask_{workers} {layout}", lambda: d(A=T, x=x), expect, mode)
        d = None                      # frees A's parts on the workers
        out[case["name"], "CSR", f"dask_array_{workers}", workers] = timed_checked(
            f"dask_array_{workers}", dask_array_call(client, case["A"], x, workers), expect,
            mode)                     # the call, holding the persisted blocks, is dropped
        print(f"  SpMV {case['name']}: {workers} worker(s) done", flush=True)
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
        rows.append({"kind": "spmv", "matrix": matrix, "rows": size[matrix].shape[0],
                     "nnz": size[matrix].nnz, "layout": layout, "contender": contender,
                     "workers": workers, "seconds": seconds, "runs": runs,
                     "speedup_vs_local": local / seconds, "scaling": scaling})
    order = {c: k for k, c in enumerate(["spf_local", "spf_dask_1", "spf_dask_2",
                                         "dask_array_1", "dask_array_2"])}
    return sorted(rows, key=lambda r: ([c["name"] for c in inputs].index(r["matrix"]),
                                       LAYOUTS.index(r["layout"]), order[r["contender"]]))


# --- CG per iteration ------------------------------------------------------------------------
def cg_matrices(quick: bool) -> list[tuple[str, sp.csr_matrix]]:
    """The symmetric positive definite matrices the CG part runs on."""
    if quick:
        return [("laplace2d_100", laplacian_2d(100))]
    return [("laplace2d_500", laplacian_2d(500)), *suite("full", ["laplace3d"])]


class Stamps:
    """A CG callback: the time after every iteration and, given a client, the workers'
    transfer logs as they stand after iteration ``warmup`` (taken before that iteration's
    stamp) and the bytes fetched since, after iteration ``last`` (taken after its stamp), so
    neither look at the logs falls inside a timed iteration."""

    def __init__(self, client: Any = None, warmup: int = 1, last: int = 0) -> None:
        self.client, self.warmup, self.last = client, warmup, last
        self.perf: list[float] = []
        self.seen: dict[str, list] = {}
        self.moved: dict[str, int] = dict.fromkeys(BYTE_KINDS, 0)

    def __call__(self, k: int, *_: Any) -> None:
        if self.client is not None and k == self.warmup:
            self.seen = self.client.run(_log_entries())
        self.perf.append(time.perf_counter())
        if self.client is not None and k == self.last:
            self.moved = transfers_since(self.client, self.seen)

    def durations(self) -> list[float]:
        """Seconds of every iteration after the first ``warmup`` (at least 1)."""
        return [float(d) for d in np.diff(self.perf)[self.warmup - 1:]]


def _log_entries() -> Callable[..., list[tuple]]:
    """A function for ``client.run``: what identifies the entries of a worker's transfer log
    (it keeps the last 1000).  Made here, so the workers receive it by value."""
    def entries(dask_worker: Any) -> list[tuple]:
        return [(e["start"], e["stop"], e["who"], e["total"])
                for e in list(dask_worker.transfer_incoming_log)]
    return entries


def byte_kind(key: Any, nbytes: int) -> str:
    """What a transferred key is: ``halo`` (a gather's piece: ``spf-gather-...`` in the
    graph of a distributed call, ``take-...`` when submitted as a task), ``scalars``
    (<= 64 bytes), ``chunks`` (a chunk of a dask collection: vector chunks, y's parts),
    ``scattered`` (data the client scattered, fetched again), or ``other``."""
    name = str(key[0] if isinstance(key, tuple) else key)
    if name.startswith(("spf-gather-", "take-")):
        return "halo"
    if nbytes <= SCALAR_BYTES:
        return "scalars"
    if isinstance(key, tuple):
        return "chunks"
    head, _, tail = name.rpartition("-")      # scattered: type name - uuid4 hex
    if head and head not in ("finalize", "original-array") and len(tail) == 32 \
            and all(ch in "0123456789abcdef" for ch in tail):
        return "scattered"
    return "other"


def transfers_since(client: Any, seen: dict[str, list]) -> dict[str, int]:
    """Bytes the workers fetched from each other since their logs stood at ``seen``
    (worker -> :func:`_log_entries`), by :func:`byte_kind`."""
    def moved(dask_worker: Any) -> list[tuple[Any, int]]:
        old = set(seen.get(dask_worker.address, ()))
        return [(key, int(nbytes)) for e in list(dask_worker.transfer_incoming_log)
                if (e["start"], e["stop"], e["who"], e["total"]) not in old
                for key, nbytes in e["keys"].items()]
    total = dict.fromkeys(BYTE_KINDS, 0)
    for per in client.run(moved).values():
        for key, nbytes in per:
            total[byte_kind(key, nbytes)] += nbytes
    return total


def numpy_cg(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray, iterations: int,
             callback: Callable[[int], None]) -> np.ndarray:
    """CG in numpy on the client around ``matvec`` (x0 = 0), ``iterations`` iterations."""
    x = np.zeros_like(b)
    r = b.copy()
    p, rr = r.copy(), float(r @ r)
    for k in range(1, iterations + 1):
        q = np.asarray(matvec(p))
        alpha = rr / float(p @ q)
        x += alpha * p
        r -= alpha * q
        rr_next = float(r @ r)
        p = r + (rr_next / rr) * p
        rr = rr_next
        callback(k)
    return x


def dask_cg(client: Any, matvec: Callable[[Any], Any], b: Any, iterations: int,
            callback: Callable[[int], None]) -> Any:
    """CG with dask.array, the loop of ``spf.distributed.solvers.cg`` (x0 = 0, b a persisted
    dask.array; no checkpoints) around ``matvec`` (dask.array -> dask.array)."""
    import dask
    import dask.array as da
    x = client.persist(da.from_array(np.zeros(b.shape[0]), chunks=b.chunks))
    r = client.persist(b - matvec(x))
    p, rr = r, float((r * r).sum().compute())
    for k in range(1, iterations + 1):
        q = matvec(p)
        alpha = rr / (p * q).sum()
        x, r = x + alpha * p, r - alpha * q
        x, r, rr_new = dask.persist(x, r, (r * r).sum())
        rr_next = float(rr_new.compute())
        p = client.persist(r + (rr_next / rr) * p)
        rr = rr_next
        callback(k)
    return x


def checked_x(name: str, x: np.ndarray, expect: np.ndarray) -> None:
    """CG's x after the same iterations as the reference loop, within rounding."""
    scale = float(np.abs(expect).max()) or 1.0
    if x.shape != expect.shape or not np.allclose(x, expect, rtol=1e-6, atol=1e-9 * scale):
        raise AssertionError(f"{name}: CG's x differs from the local loop's")


def time_cg_local(cases: list[dict], kernel: Any, cg_mode: tuple) -> None:
    """The local loop of every case: its iterations' and its SpMVs' seconds, and its x (the
    reference the cluster's contenders are checked against), stored in the case."""
    warmup, iterations, rounds = cg_mode
    for case in cases:
        T, b = case["T"], case["b"]
        spmvs: list[float] = []

        def matvec(p: np.ndarray) -> np.ndarray:
            t0 = time.perf_counter()
            q = kernel(A=T, x=p)
            spmvs.append(time.perf_counter() - t0)
            return q
        seconds, spmv_seconds = [], []
        for _ in range(rounds):
            stamps = Stamps(warmup=warmup)
            spmvs.clear()
            case["x_ref"] = numpy_cg(matvec, b, warmup + iterations, stamps)
            seconds += stamps.durations()
            spmv_seconds += spmvs[warmup:]
        case["cg"]["local", 0] = {"seconds": seconds, "spmv": spmv_seconds}
        print(f"  CG {case['name']}: local done", flush=True)


def time_cg_cluster(client: Any, workers: int, cases: list[dict], kernel: Any,
                    cg_mode: tuple, quick: bool) -> None:
    """The CG contenders on ``client``'s cluster of ``workers``: per iteration seconds and
    bytes moved between workers, stored in the case with the model's bytes."""
    import dask.array as da

    from spf.distributed import solvers
    warmup, iterations, rounds = cg_mode
    total = warmup + iterations
    for case in progress(cases, f"CG, {workers} worker(s)", quick):
        A, T, b = case["A"], case["T"], case["b"]
        planner = solvers.spmv(T, client)              # for the chunks and the model
        chunks = planner.plan(A=T).row_chunks
        model = planner.plan(A=T, x=da.zeros(sum(chunks), chunks=(chunks,))).bytes_per_call()
        held = {"broadcast": kernel.distributed(client),
                "dA": persisted_row_blocks(client, A, workers)}
        meta = np.empty(0, dtype=A.dtype)
        diag = 1.0 + 999.0 * (b - 0.5)
        floor_ref = numpy_cg(lambda p: p * diag, b, total, lambda k: None)

        def run_halo(stamps: Stamps) -> np.ndarray:
            sol = solvers.cg(T, b, client, tol=0.0, maxiter=total, callback=stamps)
            if sol.iterations != total:
                raise AssertionError(f"spf_dask_halo: {sol.iterations} iterations run, "
                                     f"{total} asked")
            return np.asarray(sol.x.compute())

        def run_broadcast(stamps: Stamps) -> np.ndarray:
            return numpy_cg(lambda p: held["broadcast"](A=T, x=p), b, total, stamps)

        def run_dask_array(stamps: Stamps) -> np.ndarray:
            dA = held["dA"]
            vb = client.persist(da.from_array(b, chunks=(dA.chunks[0],)))

            def matvec(v: Any) -> Any:
                return dA.map_blocks(lambda blk, w: blk @ w, v, dtype=A.dtype, drop_axis=1,
                                     meta=meta)
            return np.asarray(dask_cg(client, matvec, vb, total, stamps).compute())

        def run_floor(stamps: Stamps) -> np.ndarray:
            vb = client.persist(da.from_array(b, chunks=(chunks,)))
            vd = client.persist(1.0 + 999.0 * (vb - 0.5))     # lives with b, chunk by chunk
            return np.asarray(dask_cg(client, lambda v: v * vd, vb, total, stamps).compute())
        runs = {"spf_dask_halo": run_halo, "dask_floor": run_floor,
                "dask_array": run_dask_array, "spf_broadcast": run_broadcast}
        for family in runs:
            case["cg"][family, workers] = {"seconds": [], "bytes": []}
        for rnd in range(rounds):
            order = list(runs)[rnd % len(runs):] + list(runs)[:rnd % len(runs)]
            for family in order:
                stamps = Stamps(client, warmup, total)
                x = runs[family](stamps)
                checked_x(f"{family}_{workers}", x,
                          floor_ref if family == "dask_floor" else case["x_ref"])
                entry = case["cg"][family, workers]
                entry["seconds"] += stamps.durations()
                entry["bytes"].append({k: v / iterations for k, v in stamps.moved.items()})
        case["model", workers] = model
        held.clear()                      # frees A's blocks and parts on the workers
        print(f"  CG {case['name']}: {workers} worker(s) done", flush=True)


def cg_rows(cases: list[dict]) -> list[dict]:
    """One row per matrix and contender: median seconds per iteration, bytes per iteration
    (measured, model), and for spf_dask_halo the goal's ratio."""
    rows = []
    for case in cases:
        A, cg = case["A"], case["cg"]
        local = statistics.median(cg["local", 0]["seconds"])
        spmv = statistics.median(cg["local", 0]["spmv"])
        base = {"kind": "cg", "matrix": case["name"], "rows": A.shape[0], "nnz": A.nnz,
                "layout": "CSR"}
        rows.append({**base, "contender": "local", "workers": 0, "seconds": local,
                     "runs": len(cg["local", 0]["seconds"]), "speedup_vs_local": 1.0,
                     "spmv_seconds": spmv})
        for family in CG_FAMILIES:
            for workers in WORKERS:
                entry = cg.get((family, workers))
                if entry is None:
                    continue
                seconds = statistics.median(entry["seconds"])
                moved = {k: float(np.mean([b[k] for b in entry["bytes"]])) for k in BYTE_KINDS}
                row = {**base, "contender": f"{family}_{workers}", "workers": workers,
                       "seconds": seconds, "runs": len(entry["seconds"]),
                       "speedup_vs_local": local / seconds,
                       "bytes_measured": sum(moved.values()),
                       **{f"bytes_{k}": v for k, v in moved.items()}}
                one = cg.get((family, 1))
                if workers == 2 and one is not None:
                    row["scaling"] = statistics.median(one["seconds"]) / seconds
                model = case["model", workers]
                if family == "spf_dask_halo":
                    floor = statistics.median(cg["dask_floor", workers]["seconds"])
                    row.update({"floor_plus_spmv_seconds": floor + spmv,
                                "goal_ratio": seconds / (floor + spmv),
                                "bytes_model": model["total"],
                                "bytes_broadcast_model": model["broadcast"],
                                "bytes_ratio": row["bytes_measured"] / model["total"]
                                if model["total"] else ""})
                elif family == "spf_broadcast":
                    row["bytes_model"] = model["broadcast"]
                rows.append(row)
    return rows


def run_cg_local(quick: bool, kernel: Any) -> tuple[list[dict], tuple]:
    """The CG cases (matrix, its Tensor, b) with the local loop timed."""
    cg_mode = CG_MODES["quick" if quick else "full"]
    cases = []
    for name, A in cg_matrices(quick):
        b = np.random.default_rng(11).uniform(0.5, 1.5, A.shape[0])
        cases.append({"name": name, "A": A, "T": spf.Tensor.from_scipy("CSR", A), "b": b,
                      "cg": {}})
        print(f"CG {name}: {A.shape[0]} rows, {A.nnz} nonzeros", flush=True)
    time_cg_local(cases, kernel, cg_mode)
    return cases, cg_mode


# --- the model at scale ----------------------------------------------------------------------
def balanced_cuts(ends: np.ndarray, parts: int) -> np.ndarray:
    """``parts + 1`` cut points over ``len(ends)`` rows (or columns) with about equal entries
    between, ``ends`` the running entry count: the cuts of ``spf.distributed.plan_blocks``."""
    extent = len(ends)
    total = int(ends[-1]) if extent else 0
    cuts = np.searchsorted(ends, [total * k / parts for k in range(1, parts)], side="left") + 1
    cuts = np.concatenate([[0], np.minimum(cuts, extent), [extent]])
    return np.maximum.accumulate(cuts).astype(np.int64)


def grid_of(nodes: int) -> tuple[int, int]:
    """The 2-D grid of ``nodes`` blocks: (a, nodes / a), a the largest divisor <= sqrt."""
    a = max(d for d in range(1, math.isqrt(nodes) + 1) if nodes % d == 0)
    return a, nodes // a


def chunk_edges(A: sp.csr_matrix, parts: int) -> np.ndarray:
    """Edges of the dense operand's chunks: like the output's row blocks (``parts`` of them,
    balanced by entries; an iteration's result, square A), else equal pieces (as
    ``plan_blocks`` chunks it)."""
    n_rows, n_cols = A.shape
    if n_rows == n_cols:
        return balanced_cuts(A.indptr[1:].astype(np.int64), parts)
    return np.linspace(0, n_cols, parts + 1).astype(np.int64)


def _distinct(keys: np.ndarray) -> np.ndarray:
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def block_model(A: sp.csr_matrix, grid: tuple[int, int], edges: np.ndarray) -> dict[str, float]:
    """``plan_blocks``' model of ``A`` cut into ``grid`` with the dense operand in chunks at
    ``edges``, from the CSR arrays (``HaloPlan.chunk_worker``'s placement: block k on worker
    k, a chunk chunked like the output's row blocks on the worker folding that row block,
    the first of its row): halo and fold bytes in all, and received per node (mean, max)."""
    n_rows, n_cols = A.shape
    g1, g2 = grid
    nodes = g1 * g2
    ptr = A.indptr.astype(np.int64)
    cols = A.indices.astype(np.int64)
    row_cuts = balanced_cuts(ptr[1:], g1)
    block = np.repeat(np.arange(g1, dtype=np.int64), np.diff(ptr[row_cuts]))
    if g2 > 1:
        col_cuts = balanced_cuts(np.cumsum(np.bincount(cols, minlength=n_cols)), g2)
        block = block * g2 + np.searchsorted(col_cuts, cols, side="right") - 1
    pairs = _distinct(block * n_cols + cols)
    k, c = pairs // n_cols, pairs % n_cols
    chunk = np.searchsorted(edges, c, side="right") - 1
    worker = chunk * g2 if len(edges) - 1 == g1 else chunk % nodes
    far = worker != k
    received = WORD * np.bincount(k[far], minlength=nodes).astype(np.float64)
    halo = float(received.sum())
    fold = 0.0
    if g2 > 1:              # the rows a block's entries reach, sent to its row's first block
        rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(ptr))
        touched = _distinct(block * n_rows + rows) // n_rows
        senders = touched[touched % g2 != 0]
        folded = WORD * np.bincount(senders // g2 * g2, minlength=nodes).astype(np.float64)
        received += folded
        fold = float(folded.sum())
    return {"halo": halo, "fold": fold, "total": halo + fold,
            "mean": (halo + fold) / nodes, "max": float(received.max())}


def checked_model(T: Any, grid: tuple[int, int], edges: np.ndarray, fast: dict) -> None:
    """The fast model's halo and fold equal ``plan_blocks``' own (quick runs)."""
    from spf.distributed import plan_blocks
    plan = plan_blocks(T, 0, grid, chunks=tuple(int(d) for d in np.diff(edges)), local=False)
    model = plan.bytes_per_call()
    if (model["halo"], model["fold"]) != (fast["halo"], fast["fold"]):
        raise AssertionError(f"model at grid {grid}: plan_blocks says {model}, the CSR "
                             f"arrays {fast}")


def laplace3d_halo(n: int, nodes: int) -> dict[str, float]:
    """The analytic 1-D model of the n^3-row 3-D 7-point Laplacian in ``nodes`` row blocks
    (see the module docstring): bytes per inner node and in all."""
    m = n ** 3 // nodes
    spans = sorted((max(s, m), m + s) for s in (1, n, n * n))
    side, end = 0, 0                     # length of the union of the spans beyond a block
    for lo, hi in spans:
        side += max(0, hi - max(lo, end))
        end = max(end, hi)
    total = 2 * (nodes - 1) * side * WORD
    return {"halo": float(total), "fold": 0.0, "total": float(total),
            "mean": total / nodes, "max": float(2 * side * WORD)}


def model_rows(quick: bool, files: list[str]) -> list[dict]:
    """The model at scale: 1-D against 2-D per matrix and node count, and the analytic 3-D
    Laplacian."""
    nodes_set = MODEL_NODES["quick" if quick else "full"]
    found = matrices("quick", files) if files else \
        suite("quick", list(MODEL_QUICK)) if quick else suite("full")
    rows = []
    for name, A in found:
        t0 = time.perf_counter()
        A = sp.csr_matrix(A)
        T = spf.Tensor.from_scipy("CSR", A) if quick else None
        for nodes in nodes_set:
            figures = {}
            for partition, grid in (("1d", (nodes, 1)), ("2d", grid_of(nodes))):
                edges = chunk_edges(A, grid[0])
                figures[partition, grid] = block_model(A, grid, edges)
                if T is not None:
                    checked_model(T, grid, edges, figures[partition, grid])
            chosen = min(figures, key=lambda g: (figures[g]["total"], figures[g]["max"]))
            for (partition, grid), fig in figures.items():
                rows.append(_model_row(name, A.shape[0], A.nnz, nodes, partition, grid, fig,
                                       (partition, grid) == chosen, "csr"))
        print(f"  model {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    n = LAPLACE3D_N
    for nodes in nodes_set:
        rows.append(_model_row(f"laplace3d_{n}", n ** 3, 7 * n ** 3 - 6 * n ** 2, nodes, "1d",
                               (nodes, 1), laplace3d_halo(n, nodes), True, "analytic"))
    return rows


def _model_row(name: str, n_rows: int, nnz: int, nodes: int, partition: str,
               grid: tuple[int, int], fig: dict, chosen: bool, source: str) -> dict:
    return {"kind": "model", "matrix": name, "rows": n_rows, "nnz": nnz, "layout": "CSR",
            "nodes": nodes, "partition": partition, "grid": f"{grid[0]}x{grid[1]}",
            "halo_bytes": fig["halo"], "fold_bytes": fig["fold"],
            "total_bytes": fig["total"], "mean_node_bytes": fig["mean"],
            "max_node_bytes": fig["max"], "chosen": "yes" if chosen else "", "source": source}


# --- the run ---------------------------------------------------------------------------------
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
    cases, cg_mode = run_cg_local(quick, kernels["CSR"])
    for workers in WORKERS:
        c, client = cluster(workers)
        try:
            times.update(time_spmv_cluster(client, workers, inputs, kernels, mode, quick))
            time_cg_cluster(client, workers, cases, kernels["CSR"], cg_mode, quick)
        finally:
            client.close()
            c.close()
    rows = to_rows(times, inputs) + cg_rows(cases) + model_rows(quick, files)
    return [{c: r.get(c, "") for c in COLUMNS} for r in rows]


# --- plots and RESULTS.md --------------------------------------------------------------------
def _kind(r: dict) -> str:
    return r.get("kind") or "spmv"          # CSVs from before the CG and model parts


def _f(value: Any) -> float:
    return float(value) if value not in ("", None) else float("nan")


def _kb(value: Any) -> float:
    """Bytes in KB for a log axis (NaN, so no bar, for none)."""
    v = _f(value)
    return v / 1e3 if v > 0 else float("nan")


def plot(rows: list[dict], quick: bool = False) -> list[Path]:
    """The SpMV speedups, CG's time per iteration, its bytes against the model, and the
    model's bytes per node at scale."""
    described: list[Mapping[str, object]] = list(rows)
    note = machine_note(described)
    note = f"; {note}" if note else ""
    spmv = [r for r in rows if _kind(r) == "spmv"]
    groups: dict[str, dict[str, float]] = {}
    for r in spmv:
        if r["contender"] != "spf_local":
            groups.setdefault(f"{r['matrix']} {r['layout']}", {})[r["contender"]] = \
                _f(r["speedup_vs_local"])
    paths = bar_chart(groups, plot_path("distributed", "speedup", quick),
                      f"SpMV on 1 and 2 Dask workers: local spf time / contender time "
                      f"(> 1: faster than the local kernel{note})",
                      "speedup vs spf_local", log=True, reference=1.0) if groups else []
    cg = [r for r in rows if _kind(r) == "cg"]
    times: dict[str, dict[str, float]] = {}
    moved: dict[str, dict[str, float]] = {}
    for r in cg:
        if r["contender"] == "local":
            continue
        group = f"{r['matrix']} W={r['workers']}"
        family = r["contender"].rsplit("_", 1)[0]
        local = next((q for q in cg if q["matrix"] == r["matrix"]
                      and q["contender"] == "local"), {"seconds": ""})
        times.setdefault(group, {"local": _f(local["seconds"]) * 1e3})[family] = \
            _f(r["seconds"]) * 1e3
        if family == "spf_dask_halo":
            times[group]["goal: 1.5 x (floor + local SpMV)"] = \
                GOAL_TIME * _f(r["floor_plus_spmv_seconds"]) * 1e3
            if _f(r["bytes_model"]) > 0:
                moved.setdefault(group, {}).update({
                    "spf_dask_halo measured": _kb(r["bytes_measured"]),
                    "of it halo": _kb(r["bytes_halo"]),
                    "model (halo + fold)": _kb(r["bytes_model"]),
                    "broadcast model": _kb(r["bytes_broadcast_model"])})
        elif family == "dask_array" and int(r["workers"]) > 1:
            moved.setdefault(group, {})["dask_array measured"] = _kb(r["bytes_measured"])
    paths += bar_chart(times, plot_path("distributed", "cg_iteration", quick),
                       f"CG: median ms per iteration (log){note}", "ms per iteration", log=True)
    paths += bar_chart(moved, plot_path("distributed", "cg_bytes", quick),
                       f"CG: KB moved per iteration, measured between workers vs the model "
                       f"(log){note}", "KB per iteration", log=True)
    per_node: dict[str, dict[str, float]] = {}
    for r in rows:
        if _kind(r) == "model":
            per_node.setdefault(f"{r['matrix']} P={r['nodes']}", {})[
                f"{r['partition']} max/node"] = _kb(r["max_node_bytes"])
    paths += bar_chart(per_node, plot_path("distributed", "model", quick),
                       f"Model: most KB one node receives per SpMV, 1-D vs 2-D blocks (log)"
                       f"{note}", "KB per node", log=True)
    return paths


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md: the SpMV times, CG per iteration and its bytes, the model at
    scale, and the issue's goals."""
    spmv = [r for r in rows if _kind(r) == "spmv"]
    parts = []
    if spmv:
        parts.append(_describe_spmv(spmv))
    cg = [r for r in rows if _kind(r) == "cg"]
    if cg:
        parts.append(_describe_cg(cg))
    model = [r for r in rows if _kind(r) == "model"]
    if model:
        parts.append(_describe_model(model))
    if cg or model:
        parts.append(_goals(cg, model))
    return "\n\n".join(parts)


def _describe_spmv(rows: list[dict]) -> str:
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


def _bytes(value: Any) -> str:
    """Bytes as B, KB or MB (1000s)."""
    v = _f(value)
    if v != v:
        return ""
    for unit, size in (("MB", 1e6), ("KB", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.3g} {unit}"
    return f"{v:.3g} B"


def _describe_cg(rows: list[dict]) -> str:
    lines = ["### CG per iteration", "",
             "The same CG loop, a fixed number of iterations (`tol` 0), median seconds per "
             "iteration after the warm-up (see the module docstring for each contender). "
             "`vs local` = local time / contender time. Bytes: moved between workers per "
             "iteration (the workers' transfer logs; client <-> worker traffic, all of "
             "spf_broadcast's x and y, is not in them), split into the halo gathers, scalars "
             "(<= 64 B: partial sums, alpha), whole chunks of dask collections (vector chunks "
             "combined on another worker, the chunks a `compute()` joins on a worker), "
             "scattered data fetched again (the kernel, gather positions: replicas Dask's "
             "active memory manager dropped) and other; model: halo + fold of one SpMV "
             "(`HaloPlan.bytes_per_call`), for spf_broadcast its broadcast figure.", "",
             "| matrix | contender | workers | ms / iteration | vs local | moved / iteration "
             "| halo | scalars | chunks | scattered | other | model | measured / model |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "" if _f(r["bytes_ratio"]) != _f(r["bytes_ratio"]) else \
            f"{_f(r['bytes_ratio']):.2f}"
        kinds = " | ".join(_bytes(r.get(f"bytes_{k}")) for k in BYTE_KINDS)
        lines.append(f"| {r['matrix']} | {r['contender']} | {r['workers']} | "
                     f"{_f(r['seconds']) * 1e3:.3g} | {_f(r['speedup_vs_local']):.3g} | "
                     f"{_bytes(r['bytes_measured'])} | {kinds} | "
                     f"{_bytes(r['bytes_model'])} | {ratio} |")
    spmv = {r["matrix"]: _f(r["spmv_seconds"]) for r in rows if r["contender"] == "local"}
    lines += ["", "Local SpMV inside the local loop (the goal's SpMV time): "
              + ", ".join(f"{m} {s * 1e3:.3g} ms" for m, s in spmv.items()) + "."]
    return "\n".join(lines)


def _describe_model(rows: list[dict]) -> str:
    lines = ["### Model at scale", "",
             "What one SpMV would move on P nodes, `plan_blocks`' model computed from the CSR "
             "arrays (1-D: P row blocks; 2-D: an a x P/a grid; the dense operand chunked like "
             "the output's row blocks, block k on node k, a row block folded on the node of "
             "its row's first block; per node: the halo its block gathers plus, in 2-D, the "
             "partial rows (those a block's entries reach) folded into it; 8 bytes per "
             "element). `analytic`: the 3-D 7-point Laplacian with n = 522 (0.99e9 nonzeros) "
             "in P contiguous row blocks, by the formula in the module docstring. The chosen "
             "partition moves fewer bytes in all (ties: the smaller maximum per node), as "
             "DistributedKernel chooses.", "",
             "| matrix | nnz | nodes | 1-D max / node | 1-D mean / node | 2-D grid | "
             "2-D max / node | 2-D mean / node | chosen |", "|---|---|---|---|---|---|---|---|---|"]
    for (matrix, nodes), group in _by_matrix_nodes(rows).items():
        one = group.get("1d", {})
        two = group.get("2d", {})
        chosen = next((r["partition"] for r in group.values() if r["chosen"] == "yes"), "")
        lines.append(f"| {matrix} | {(one or two)['nnz']} | {nodes} | "
                     f"{_bytes(one.get('max_node_bytes'))} | "
                     f"{_bytes(one.get('mean_node_bytes'))} | {two.get('grid', '-')} | "
                     f"{_bytes(two.get('max_node_bytes')) or '-'} | "
                     f"{_bytes(two.get('mean_node_bytes')) or '-'} | {chosen.upper()} |")
    return "\n".join(lines)


def _by_matrix_nodes(rows: list[dict]) -> dict[tuple[str, int], dict[str, dict]]:
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for r in rows:
        out.setdefault((r["matrix"], int(r["nodes"])), {})[r["partition"]] = r
    return out


def _goals(cg: list[dict], model: list[dict]) -> str:
    """The goals of issue 42, met or missed, with the numbers."""
    lines = ["### Goals (issue 42)", ""]
    halo = [r for r in cg if r["contender"].startswith("spf_dask_halo")]
    if halo:
        items = []
        for r in halo:
            ratio = _f(r["goal_ratio"])
            items.append(f"{r['matrix']} W={r['workers']}: {_f(r['seconds']) * 1e3:.3g} ms vs "
                         f"{GOAL_TIME} x {_f(r['floor_plus_spmv_seconds']) * 1e3:.3g} ms, "
                         f"ratio {ratio:.2f} ({'met' if ratio <= GOAL_TIME else 'missed'})")
        verdict = "met" if all(_f(r["goal_ratio"]) <= GOAL_TIME for r in halo) else "missed"
        lines.append(f"- (a) spf_dask_halo per iteration <= {GOAL_TIME} x (dask_floor + local "
                     f"SpMV): **{verdict}**; " + "; ".join(items) + ".")
        items, ratios = [], []
        for r in halo:
            if _f(r["bytes_model"]) > 0:
                ratio = _f(r["bytes_measured"]) / _f(r["bytes_model"])
                ratios.append(ratio)
                split = ", ".join(f"{k} {_bytes(r.get(f'bytes_{k}'))}" for k in BYTE_KINDS
                                  if _f(r.get(f"bytes_{k}")) > 0)
                gathers = _f(r.get("bytes_halo")) / _f(r["bytes_model"])
                items.append(f"{r['matrix']} W={r['workers']}: {_bytes(r['bytes_measured'])}"
                             f" per iteration ({split}) vs model "
                             f"{_bytes(r['bytes_model'])}, {ratio:.2f}x "
                             f"({'met' if ratio <= GOAL_BYTES else 'missed'}; the halo "
                             f"gathers alone {gathers:.2f}x; broadcast would move "
                             f"{_bytes(r['bytes_broadcast_model'])})")
            else:
                items.append(f"{r['matrix']} W={r['workers']}: model 0 (one block), measured "
                             f"{_bytes(r['bytes_measured']) or '0 B'}")
        verdict = "not measured (no run with 2 workers)" if not ratios else \
            "**met**" if max(ratios) <= GOAL_BYTES else "**missed**"
        lines.append(f"- (b) bytes per iteration within {GOAL_BYTES}x the model's halo + "
                     f"fold: {verdict}; " + "; ".join(items) + ".")
    if model:
        groups = _by_matrix_nodes(model)
        nodes = sorted({n for _, n in groups})
        items = []
        for matrix in dict.fromkeys(m for m, _ in groups):
            figures = []
            for n in nodes:
                group = groups.get((matrix, n), {})
                pick = next((r for r in group.values() if r["chosen"] == "yes"), None)
                if pick is not None:
                    figures.append(f"{n} nodes {pick['partition'].upper()} "
                                   f"{_bytes(pick['max_node_bytes'])} max/node")
            items.append(f"{matrix}: " + ", ".join(figures))
        complete = {100, 1000} <= set(nodes)
        verdict = "**met**" if complete else \
            f"not for 100 and 1,000 nodes in this run (nodes {', '.join(map(str, nodes))})"
        lines.append(f"- (c) the model's 100- and 1,000-node figures for every matrix, with "
                     f"the partition chosen: {verdict}; " + "; ".join(items) + ".")
    return "\n".join(lines)


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
    for kind, columns in (("spmv", ["matrix", "layout", "contender", "workers", "seconds",
                                    "runs", "speedup_vs_local", "scaling"]),
                          ("cg", ["matrix", "contender", "workers", "seconds", "runs",
                                  "goal_ratio", "bytes_measured", "bytes_halo",
                                  "bytes_chunks", "bytes_scattered", "bytes_model",
                                  "bytes_ratio"]),
                          ("model", ["matrix", "nodes", "partition", "grid", "total_bytes",
                                     "mean_node_bytes", "max_node_bytes", "chosen"])):
        print_table([r for r in rows if r["kind"] == kind], columns)
    print("wrote", write_csv("distributed", rows, args.quick))
    for p in plot(rows, args.quick):
        print("wrote", p)
    return rows


if __name__ == "__main__":
    main()
