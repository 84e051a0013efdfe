"""Value types (issue 39): float32 SpMV and SpMM and a BFS on bool values, spf's kernels
against MKL, scipy, torch.sparse and SuiteSparse:GraphBLAS on 1 and 2 threads.

    python -m experiments.float32 [--quick] [--matrix path.mtx ...]

Three parts, every contender with its input built beforehand in its own format, its output
preallocated where the API allows it, and the same thread count as spf's kernel:

- **SpMV** ``y(i) = A(i,j) * x(j)``, A in CSR, everything float32 (the SpMV suite's matrices,
  experiments/matrices.py, their values rounded to float32; x uniform in [-1, 1)).
  ``spf_f32``: ``spf.Kernel(..., dtype="float32")`` called on prebuilt argument structs
  (1 thread: the serial kernel; 2 threads: the kernel built with ``parallel=True``);
  ``spf_f64``: the same kernel in float64 on the same (float32-valued) matrix and x;
  ``mkl_s`` / ``mkl_d``: ``mkl_sparse_s_mv`` / ``mkl_sparse_d_mv`` on a CSR handle optimized
  with an mv hint; ``scipy_f32``: ``A @ x`` (single-threaded: 1-thread rows only);
  ``torch_f32``: ``torch.mv`` on a ``torch.sparse_csr_tensor`` on the CPU (where torch is
  installed; it is no dependency of spf); ``graphblas_f32``: python-graphblas ``mxv`` under
  ``plus_times`` on FP32 into a preallocated vector.  GB/s counts the bytes a CSR SpMV moves
  at least, at the value type's width: values, column indices and row pointers (int32),
  x and y, each once; against the machine's STREAM triad (experiments/spmv.py).
- **SpMM** ``Y(i,k) = A(i,j) * X(j,k)`` with 64 dense columns, X and Y row-major float32:
  ``spf_f32`` (as above), ``mkl_s`` (``mkl_sparse_s_mm``, ``SPARSE_LAYOUT_ROW_MAJOR``, after
  ``mkl_sparse_optimize`` with an mm hint), ``scipy_f32`` (1 thread), ``torch_f32``
  (``torch.mm`` on the CSR tensor).
- **BFS** levels from vertex 0 on experiments/graphs.py's graphs, all values bool:
  ``spf_bool``: push ``q(j) = f(i) * A(i,j)`` under ``any_pair`` with ``dtype="bool"``, the
  frontier f a sparse vector (``SV``) and the visited vertices v a complemented structural
  mask (``mask={"q": "v"}, complement=True``), the next frontier the true elements of the
  dense q; ``spf_bool_nomask``: the same push on bool without the mask, the unvisited
  vertices picked by numpy; ``spf_f64``: that in float64 (graphs.py's BFS);
  ``graphblas_bool``: ``q(~v.S, replace=True) << q.vxm(A,
  any_pair)`` on BOOL (GraphBLAS's BFS; it picks push or pull itself).  Each whole BFS is
  timed.

Every result is checked before timing: SpMV and SpMM against scipy's float32 product, within
twice the error bound of a float32 sum over the row (``2 (len + 2) eps |A| |x|``); BFS levels
against scipy's ``breadth_first_order`` exactly.  Each contender is warmed up once and timed
as the median of repeated calls, all of one contender's calls back to back after a pause
(experiments/common.py ``time_blocked``: MKL, torch and GraphBLAS bring OpenMP runtimes whose
idle threads would spin on the cores of the next contender).
Full run: about 6 minutes; ``--quick``: seconds.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

import spf

from . import graphs, mkl
from .common import (
    bar_chart,
    experiment_parser,
    geomean,
    graphblas,
    machine_note,
    plot_path,
    prepared_call,
    print_table,
    progress,
    time_blocked,
    write_csv,
)
from .matrices import matrices, suite
from .spmv import stream_triad

SPMV = "y(i) = A(i,j) * x(j)"
SPMM = "Y(i,k) = A(i,j) * X(j,k)"
BFS_MASKED = "q(j) = f(i) * A(i,j)"
BFS_PUSH = "y(j) = f(i) * A(i,j)"
THREADS = (1, 2)
COLUMNS = 64                    # SpMM's dense columns
CACHE_BYTES = 32 << 20          # the last-level cache: a working set above it leaves the cache
EPS32 = float(np.finfo(np.float32).eps)
COLUMNS_OUT = ("part", "scale", "matrix", "rows", "cols", "nnz", "threads", "contender",
               "dtype", "parallel", "time_s", "runs", "bytes", "bytes_per_nnz", "GBps",
               "GFLOPs", "stream_fraction", "vs_spf", "levels", "status")


@dataclass(frozen=True)
class Mode:
    scale: str
    names: tuple[str, ...] | None       # the suite's matrices (None: all of them)
    target_s: float                     # timed seconds per SpMV contender and cell
    min_runs: int
    max_runs: int
    spmm_target_s: float
    spmm_min_runs: int
    bfs_target_s: float
    bfs_min_runs: int
    bfs_max_runs: int
    pause_s: float                      # idle time before each contender's block of calls
    stream_elements: int
    stream_reps: int
    graphs: tuple[tuple[str, int], ...]


MODES = {"quick": Mode("quick", ("laplace2d", "rmat"), 0.003, 3, 20, 0.003, 3, 0.005, 1, 3,
                       0.0, 1_000_000, 3, graphs.MODES["quick"][0]),
         "full": Mode("full", None, 0.4, 9, 500, 1.0, 5, 1.0, 3, 20, 0.3, 20_000_000, 20,
                      graphs.MODES["full"][0])}


def _row(**values: object) -> dict[str, object]:
    """A CSV row with every column (empty where the part does not measure it)."""
    return {c: values.get(c, "") for c in COLUMNS_OUT}


# --- optional contenders -------------------------------------------------------------------
def load_torch() -> tuple[Any, str]:
    """torch (or None) and why it is missing."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed (no dependency of spf: pip install torch)"
    return torch, ""


def torch_csr(torch: Any, A: sp.csr_matrix) -> Any:
    """A ``torch.sparse_csr_tensor`` on A's arrays (int32 indices, A's values; no copy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # "sparse CSR support is in beta"
        return torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                       torch.from_numpy(A.data), size=A.shape)


# --- kernels ---------------------------------------------------------------------------------
@dataclass
class Kernels:
    """spf's compiled kernels per (what, threads); ``parallel`` says whether the 2-thread
    build has a parallel loop."""

    compiled: dict[tuple[str, int], Any]
    parallel: dict[str, bool]

    @classmethod
    def build(cls) -> Kernels:
        specs: dict[str, tuple[str, dict, dict]] = {
            "spmv32": (SPMV, {"A": "CSR"}, {"dtype": "float32"}),
            "spmv64": (SPMV, {"A": "CSR"}, {}),
            "spmm32": (SPMM, {"A": "CSR"}, {"dtype": "float32"}),
            "bfs_bool": (BFS_MASKED, {"A": "CSR", "f": "SV", "v": "SV"},
                         {"dtype": "bool", "semiring": "any_pair", "mask": {"q": "v"},
                          "complement": True}),
            "bfs_bool_push": (BFS_PUSH, {"A": "CSR", "f": "SV"},
                              {"dtype": "bool", "semiring": "any_pair"}),
            "bfs_f64": (BFS_PUSH, {"A": "CSR", "f": "SV"}, {"semiring": "any_pair"})}
        compiled, parallel = {}, {}
        for what, (expr, layouts, options) in specs.items():
            serial = spf.Kernel(expr, layouts, name=f"f32exp_{what}", **options)
            omp = spf.Kernel(expr, layouts, name=f"f32exp_{what}_omp", parallel=True, **options)
            parallel[what] = omp.parallel_loop is not None
            compiled[what, 1] = serial.compile()
            compiled[what, 2] = omp.compile() if parallel[what] else compiled[what, 1]
        for what, ctype in (("spmv32", "float"), ("spmm32", "float"), ("bfs_bool", "_Bool")):
            src = compiled[what, 1].kernel.c_source()    # spf computes in the type asked for
            assert f"typedef {ctype} spf_value_t;" in src, f"{what}: not computed in {ctype}"
        return cls(compiled, parallel)

    def get(self, what: str, threads: int) -> Any:
        k = self.compiled[what, threads]
        if threads > 1 and self.parallel[what]:
            k.set_num_threads(threads)
        return k


# --- checks ----------------------------------------------------------------------------------
def check_close(got: np.ndarray, reference: np.ndarray, bound: np.ndarray, what: str) -> None:
    """``got`` within ``bound`` of the float32 ``reference`` (both computed from the same
    float32 operands, in any order of the sums)."""
    err = np.abs(np.asarray(got, np.float64) - reference)
    bad = np.flatnonzero(~(err <= bound).reshape(-1))
    if len(bad):
        k = bad[0]
        raise AssertionError(f"{what}: {len(bad)} elements off, e.g. element {k}: "
                             f"{np.asarray(got).reshape(-1)[k]} against "
                             f"{reference.reshape(-1)[k]} (bound {bound.reshape(-1)[k]:.3g})")


def error_bound(A: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    """Twice the error bound of float32 sums over A's rows: 2 (len + 2) eps |A| |x| (two
    results of the same float32 sum in different orders differ at most by this)."""
    lengths = np.diff(A.indptr).astype(np.float64)
    scale = abs(A.astype(np.float64)) @ np.abs(np.asarray(x, np.float64))
    factor = 2 * (lengths + 2) * EPS32
    return (factor[:, None] * scale if scale.ndim == 2 else factor * scale) + 1e-30


# --- SpMV ------------------------------------------------------------------------------------
def spmv_bytes(A: sp.csr_matrix, itemsize: int) -> int:
    """What a CSR SpMV moves at least: values, int32 column indices and row pointers, x and y,
    each once, the values and vectors ``itemsize`` bytes wide."""
    n, m = A.shape
    return itemsize * (A.nnz + m + n) + 4 * A.nnz + 4 * (n + 1)


@dataclass
class Contender:
    fn: Callable[[], object]
    result: Callable[[], np.ndarray]
    dtype: str
    parallel: str = ""


def _returns(a: np.ndarray) -> Callable[[], np.ndarray]:
    """A result getter for an output written in place."""
    return lambda: a


def spmv_contenders(A32: sp.csr_matrix, A64: sp.csr_matrix, x32: np.ndarray, ks: Kernels,
                    threads: int, gb: Any, torch: Any) -> dict[str, Contender]:
    n = A32.shape[0]
    x64 = x32.astype(np.float64)
    out: dict[str, Contender] = {}
    par = "yes" if threads == 1 else ("yes" if ks.parallel["spmv32"] else "no")
    for name, what, A, x, dtype in (("spf_f32", "spmv32", A32, x32, np.float32),
                                    ("spf_f64", "spmv64", A64, x64, np.float64)):
        y = np.empty(n, dtype)
        t = spf.Tensor.from_scipy("CSR", A)
        assert t.dtype == dtype
        out[name] = Contender(prepared_call(ks.get(what, threads), y, A=t, x=x), _returns(y),
                              np.dtype(dtype).name, par)
    if threads == 1:
        box: dict[str, np.ndarray] = {}

        def scipy_run() -> None:
            box["y"] = A32 @ x32
        out["scipy_f32"] = Contender(scipy_run, lambda: box["y"], "float32")
    if mkl.load() is not None and A32.nnz:
        mkl.set_threads(threads)
        for name, A, x, dtype in (("mkl_s", A32, x32, np.float32), ("mkl_d", A64, x64,
                                                                      np.float64)):
            h = mkl.csr(A, dtype)
            mkl.optimize_mv(h)
            y = np.empty(n, dtype)

            def mkl_run(h=h, x=x, y=y) -> None:
                mkl.mv(h, x, y)
            out[name] = Contender(mkl_run, _returns(y), np.dtype(dtype).name)
    if torch is not None:
        torch.set_num_threads(threads)
        tA, tx = torch_csr(torch, A32), torch.from_numpy(x32)
        ty = torch.empty(n, dtype=torch.float32)

        def torch_run() -> None:
            torch.mv(tA, tx, out=ty)
        out["torch_f32"] = Contender(torch_run, lambda: ty.numpy(), "float32")
    if gb is not None:
        gb.ss.config["nthreads"] = threads
        GA = gb.io.from_scipy_sparse(A32)
        gx = gb.Vector.from_dense(x32)
        gy = gb.Vector(gb.dtypes.FP32, n)
        assert GA.dtype == gb.dtypes.FP32 and gx.dtype == gb.dtypes.FP32

        def grb_run() -> None:
            gy << GA.mxv(gx, gb.semiring.plus_times)
        out["graphblas_f32"] = Contender(grb_run, lambda: gy.to_dense(fill_value=0.0),
                                         "float32")
    return out


def run_spmv(name: str, A32: sp.csr_matrix, A64: sp.csr_matrix, ks: Kernels, mode: Mode,
             gb: Any, torch: Any, stream: dict[int, float]) -> list[dict]:
    n, m = A32.shape
    x32 = np.random.default_rng(7).uniform(-1.0, 1.0, m).astype(np.float32)
    reference = (A32 @ x32).astype(np.float64)
    bound = error_bound(A32, x32)
    base = {"part": "spmv", "scale": mode.scale, "matrix": name, "rows": n, "cols": m,
            "nnz": A32.nnz}
    rows = []
    for threads in THREADS:
        cons = spmv_contenders(A32, A64, x32, ks, threads, gb, torch)
        for c, con in cons.items():                 # checked before timing
            con.fn()
            check_close(con.result(), reference, bound, f"SpMV {c} on {name}, {threads} "
                                                        "threads")
        times = time_blocked({c: v.fn for c, v in cons.items()}, mode.target_s,
                             mode.min_runs, mode.max_runs, mode.pause_s)
        for c, con in cons.items():                 # and after (the last call's y)
            check_close(con.result(), reference, bound, f"SpMV {c} on {name}, {threads} "
                                                        "threads")
        spf_t = times["spf_f32"][0]
        for c, con in cons.items():
            t, runs = times[c]
            nbytes = spmv_bytes(A32, np.dtype(con.dtype).itemsize)
            gbps = nbytes / t / 1e9
            rows.append(_row(**base, threads=threads, contender=c, dtype=con.dtype,
                             parallel=con.parallel, time_s=t, runs=runs, bytes=nbytes,
                             bytes_per_nnz=nbytes / max(A32.nnz, 1), GBps=gbps,
                             stream_fraction=gbps / stream[threads], vs_spf=t / spf_t,
                             status="ok"))
        line = "  ".join(f"{c} {times[c][0] * 1e3:.3g}" for c in cons)
        print(f"  SpMV {name:16s} {threads} thread{'s' if threads > 1 else ' '} (ms): {line}",
              flush=True)
    return rows


# --- SpMM ------------------------------------------------------------------------------------
def spmm_contenders(A32: sp.csr_matrix, X: np.ndarray, ks: Kernels, threads: int,
                    torch: Any) -> dict[str, Contender]:
    n = A32.shape[0]
    out: dict[str, Contender] = {}
    Y = np.empty((n, COLUMNS), np.float32)
    t = spf.Tensor.from_scipy("CSR", A32)
    out["spf_f32"] = Contender(prepared_call(ks.get("spmm32", threads), Y, A=t, X=X),
                               lambda: Y, "float32",
                               "yes" if threads == 1 or ks.parallel["spmm32"] else "no")
    if threads == 1:
        box: dict[str, np.ndarray] = {}

        def scipy_run() -> None:
            box["Y"] = A32 @ X
        out["scipy_f32"] = Contender(scipy_run, lambda: box["Y"], "float32")
    if mkl.load() is not None and A32.nnz:
        mkl.set_threads(threads)
        h = mkl.csr(A32, np.float32)
        mkl.optimize_mm(h, COLUMNS)
        Ym = np.empty((n, COLUMNS), np.float32)

        def mkl_run() -> None:
            mkl.mm(h, X, Ym)
        out["mkl_s"] = Contender(mkl_run, lambda: Ym, "float32")
    if torch is not None:
        torch.set_num_threads(threads)
        tA, tX = torch_csr(torch, A32), torch.from_numpy(X)
        tY = torch.empty((n, COLUMNS), dtype=torch.float32)

        def torch_run() -> None:
            torch.mm(tA, tX, out=tY)
        out["torch_f32"] = Contender(torch_run, lambda: tY.numpy(), "float32")
    return out


def run_spmm(name: str, A32: sp.csr_matrix, ks: Kernels, mode: Mode, torch: Any) -> list[dict]:
    n, m = A32.shape
    X = np.random.default_rng(8).uniform(-1.0, 1.0, (m, COLUMNS)).astype(np.float32)
    reference = (A32 @ X).astype(np.float64)
    bound = error_bound(A32, X)
    base = {"part": "spmm", "scale": mode.scale, "matrix": name, "rows": n, "cols": m,
            "nnz": A32.nnz}
    nbytes = spmv_bytes(A32, 4) + 4 * (m + n) * (COLUMNS - 1)     # A once, X and Y once
    rows = []
    for threads in THREADS:
        cons = spmm_contenders(A32, X, ks, threads, torch)
        for c, con in cons.items():
            con.fn()
            check_close(con.result(), reference, bound, f"SpMM {c} on {name}, {threads} "
                                                        "threads")
        times = time_blocked({c: v.fn for c, v in cons.items()}, mode.spmm_target_s,
                             mode.spmm_min_runs, mode.max_runs, mode.pause_s)
        spf_t = times["spf_f32"][0]
        for c, con in cons.items():
            t, runs = times[c]
            rows.append(_row(**base, threads=threads, contender=c, dtype=con.dtype,
                             parallel=con.parallel, time_s=t, runs=runs, bytes=nbytes,
                             GBps=nbytes / t / 1e9, GFLOPs=2 * A32.nnz * COLUMNS / t / 1e9,
                             vs_spf=t / spf_t, status="ok"))
        line = "  ".join(f"{c} {times[c][0] * 1e3:.3g}" for c in cons)
        print(f"  SpMM {name:16s} {threads} thread{'s' if threads > 1 else ' '} (ms): {line}",
              flush=True)
    return rows


# --- BFS -------------------------------------------------------------------------------------
def bfs_levels(g: sp.csr_matrix) -> np.ndarray:
    """Each vertex's level from vertex 0 (-1: not reached), by scipy's BFS."""
    order, pred = csgraph.breadth_first_order(g, 0, return_predecessors=True)
    level = np.full(g.shape[0], -1)
    level[order[0]] = 0
    for v in order[1:]:
        level[v] = level[pred[v]] + 1
    return level


def bfs_contenders(g: sp.csr_matrix, ks: Kernels, threads: int, gb: Any
                   ) -> dict[str, Callable[[], np.ndarray]]:
    n = g.shape[0]
    gbool = g.astype(bool)
    A = spf.Tensor.from_scipy("CSR", gbool)
    assert A.dtype == np.bool_
    trues = np.ones(n, bool)
    masked = ks.get("bfs_bool", threads)

    def spf_bool() -> np.ndarray:
        level = np.full(n, -1)
        level[0] = 0
        frontier, depth = np.zeros(1, np.int32), 0
        while len(frontier):
            depth += 1
            visited = np.flatnonzero(level >= 0).astype(np.int32)
            f = spf.Tensor.from_arrays("SV", (n,), {"idx": frontier,
                                                    "val": trues[:len(frontier)]})
            v = spf.Tensor.from_arrays("SV", (n,), {"idx": visited, "val": trues[:len(visited)]})
            q = masked(A=A, f=f, v=v)       # q(j) = any_pair over the frontier, not visited
            frontier = np.flatnonzero(q).astype(np.int32)
            level[frontier] = depth
        return level
    fns = {"spf_bool": spf_bool}

    def unmasked(A: spf.Tensor, push: Any, values: np.ndarray) -> Callable[[], np.ndarray]:
        """experiments/graphs.py's BFS: the push without a mask, numpy drops the visited."""
        def bfs() -> np.ndarray:
            level = np.full(n, -1)
            level[0] = 0
            frontier, depth = np.zeros(1, np.int32), 0
            while len(frontier):
                depth += 1
                f = spf.Tensor.from_arrays("SV", (n,), {"idx": frontier,
                                                        "val": values[:len(frontier)]})
                y = push(A=A, f=f)
                frontier = np.flatnonzero((y != 0) & (level < 0)).astype(np.int32)
                level[frontier] = depth
            return level
        return bfs
    fns["spf_bool_nomask"] = unmasked(A, ks.get("bfs_bool_push", threads), trues)
    fns["spf_f64"] = unmasked(spf.Tensor.from_scipy("CSR", g), ks.get("bfs_f64", threads),
                              np.ones(n))
    if gb is not None:
        ga = gb.io.from_scipy_sparse(gbool)
        assert ga.dtype == gb.dtypes.BOOL

        fns["graphblas_bool"] = lambda: graphs.graphblas_levels(gb, ga, n)
    return fns


def run_bfs(mode: Mode, ks: Kernels, gb_threads: Callable[[int], Any]) -> list[dict]:
    rows = []
    for kind, size in mode.graphs:
        g = graphs.rmat(size) if kind == "rmat" else graphs.grid(size)
        name = f"rmat{size}" if kind == "rmat" else f"grid{size}x{size}"
        expect = bfs_levels(g)
        for threads in THREADS:
            fns = bfs_contenders(g, ks, threads, gb_threads(threads))
            for c, fn in fns.items():
                got = fn()
                assert np.array_equal(got, expect), f"BFS {c} on {name}: levels differ " \
                                                    f"from scipy's"
            times = time_blocked(fns, mode.bfs_target_s, mode.bfs_min_runs,
                                 mode.bfs_max_runs, mode.pause_s)
            par = {"spf_bool": "bfs_bool", "spf_bool_nomask": "bfs_bool_push",
                   "spf_f64": "bfs_f64"}
            for c, (t, runs) in times.items():
                rows.append(_row(part="bfs", scale=mode.scale, matrix=name, rows=g.shape[0],
                                 cols=g.shape[1], nnz=g.nnz, threads=threads, contender=c,
                                 dtype="float64" if c == "spf_f64" else "bool",
                                 parallel=("yes" if threads == 1 or ks.parallel[par[c]]
                                           else "no") if c in par else "",
                                 time_s=t, runs=runs, vs_spf=t / times["spf_bool"][0],
                                 levels=int(expect.max()) + 1, status="ok"))
            line = "  ".join(f"{c} {times[c][0] * 1e3:.3g}" for c in times)
            print(f"  BFS  {name:16s} {threads} thread{'s' if threads > 1 else ' '} (ms): "
                  f"{line}", flush=True)
    return rows


# --- run -------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> list[dict]:
    parser = experiment_parser(__doc__)
    args = parser.parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    print(f"float32 / bool, {mode.scale} suite; STREAM triad ...", flush=True)
    stream = {t: stream_triad(t, mode.stream_elements, mode.stream_reps) for t in THREADS}
    print("  STREAM triad: " + ", ".join(f"{t} thread{'s' if t > 1 else ''} {bw:.1f} GB/s"
                                         for t, bw in stream.items()), flush=True)
    rows = [_row(part="stream", scale=mode.scale, threads=t, contender="stream_triad",
                 dtype="float64", runs=mode.stream_reps, bytes=24 * mode.stream_elements,
                 GBps=bw, stream_fraction=1.0, status="ok") for t, bw in stream.items()]
    torch, why_not_torch = load_torch()
    skipped = {}
    if torch is None:
        skipped["torch_f32"] = why_not_torch
    if mkl.load() is None:
        skipped["mkl_s"] = "the mkl wheel is not installed"
    gb = graphblas()
    if gb is None:
        skipped["graphblas"] = "python-graphblas is not installed"
    for c, why in skipped.items():
        print(f"  {c} skipped: {why}", flush=True)
        rows.append(_row(part="all", scale=mode.scale, contender=c, status=f"skipped: {why}"))
    ks = Kernels.build()
    inputs = list(matrices(mode.scale, args.matrix)) if args.matrix or mode.names is None \
        else list(suite(mode.scale, list(mode.names)))
    for k, (name, A) in enumerate(progress(inputs, "float32", args.quick), 1):
        A32 = A.astype(np.float32)
        A64 = A32.astype(np.float64)             # the same values in float64
        print(f"[{k}/{len(inputs)}] {name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros",
              flush=True)
        rows += run_spmv(name, A32, A64, ks, mode, gb, torch, stream)
        rows += run_spmm(name, A32, ks, mode, torch)
    if not args.matrix:
        rows += run_bfs(mode, ks, lambda threads: graphblas(threads))
    done: list[Mapping[str, object]] = [r for r in rows if r["status"] == "ok"
                                        and r["part"] != "stream"]
    print_table(done, ["part", "matrix", "threads", "contender", "time_s", "GBps", "vs_spf"])
    print("wrote", write_csv("float32", rows, args.quick))
    for p in plot(rows, args.quick):
        print("wrote", p)
    return rows


# --- plots and RESULTS.md --------------------------------------------------------------------
def _ok(rows: list[dict], part: str) -> list[dict]:
    return [r for r in rows if r["part"] == part and r["status"] == "ok"
            and r["time_s"] not in ("", None)]


def _cells(rows: list[dict], part: str) -> dict[tuple[str, int], dict[str, dict]]:
    """(matrix, threads) -> contender -> row, in the order measured."""
    cells: dict[tuple[str, int], dict[str, dict]] = {}
    for r in _ok(rows, part):
        cells.setdefault((str(r["matrix"]), int(r["threads"])), {})[str(r["contender"])] = r
    return cells


def _t(r: dict) -> float:
    return float(r["time_s"])


SPMV_PEERS = ("mkl_s", "scipy_f32", "torch_f32", "graphblas_f32", "mkl_d", "spf_f64")
SPMM_PEERS = ("mkl_s", "scipy_f32", "torch_f32")
BFS_PEERS = ("graphblas_bool", "spf_bool_nomask", "spf_f64")


def plot(rows: list[dict], quick: bool = False) -> list[Path]:
    """Contender time / spf time per matrix: SpMV at 1 and 2 threads, SpMM, BFS."""
    out: list[Path] = []
    note = machine_note(list[Mapping[str, object]](rows))
    note = f"; {note}" if note else ""
    spmv = _cells(rows, "spmv")
    for threads in THREADS:
        groups = {m: {p: _t(c[p]) / _t(c["spf_f32"]) for p in SPMV_PEERS if p in c}
                  for (m, t), c in spmv.items() if t == threads and "spf_f32" in c}
        out += bar_chart(groups, plot_path("float32", f"spmv_{threads}t", quick),
                         f"float32 SpMV, CSR, {threads} thread{'s' if threads > 1 else ''}: "
                         f"contender time / spf float32 time (> 1: spf faster{note})",
                         "time / spf_f32 time", reference=1.0)
    for part, peers, ref in (("spmm", SPMM_PEERS, "spf_f32"), ("bfs", BFS_PEERS, "spf_bool")):
        groups = {}
        for (m, t), c in _cells(rows, part).items():
            if ref in c:
                groups.setdefault(m, {}).update(
                    {f"{p} {t}t": _t(c[p]) / _t(c[ref]) for p in peers if p in c})
        what = {"spmm": f"float32 SpMM, {COLUMNS} dense columns", "bfs": "BFS on bool"}[part]
        out += bar_chart(groups, plot_path("float32", part, quick),
                         f"{what}: contender time / {ref} time (> 1: spf faster{note})",
                         f"time / {ref} time", log=part == "bfs", reference=1.0)
    return out


def _gm(values: list[float]) -> str:
    return f"{geomean(values):.2f}x ({len(values)})" if values else "-"


def _ms(r: dict) -> str:
    return f"{_t(r) * 1e3:.3g}"


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    stream = {int(r["threads"]): float(r["GBps"]) for r in rows if r["part"] == "stream"}
    skipped = [f"{r['contender']} ({str(r['status']).removeprefix('skipped: ')})" for r in rows
               if str(r["status"]).startswith("skipped")]
    out = ["spf's kernels in float32 (SpMV, SpMM) and bool (BFS) against MKL's single-precision "
           "routines, scipy, torch.sparse (CPU) and SuiteSparse:GraphBLAS, each with its input "
           "prebuilt in its own format, the same thread count for every contender (scipy is "
           "single-threaded: 1-thread rows only), median of repeated calls after a warm-up, "
           "each contender's calls back to back after a pause; every result checked against "
           "scipy's float32 product (within twice the error bound of a float32 row sum) or "
           "scipy's BFS levels (exactly) before timing. Ratio = contender time / spf time "
           "(> 1: spf faster). STREAM triad: " + (", ".join(
               f"{t} thread{'s' if t > 1 else ''} {bw:.1f} GB/s"
               for t, bw in sorted(stream.items())) or "-") + "."
           + (f" Not measured: {'; '.join(skipped)}." if skipped else ""), ""]
    out += _describe_spmv(rows, stream)
    out += _describe_spmm(rows)
    out += _describe_bfs(rows)
    out += ["", WHY]
    return "\n".join(out)


def _describe_spmv(rows: list[dict], stream: dict[int, float]) -> list[str]:
    cells = _cells(rows, "spmv")
    out = ["### SpMV, float32", "",
           '`y(i) = A(i,j) * x(j)`, A in CSR (`spf.Kernel(..., dtype="float32")`), the SpMV '
           "suite's matrices with their values rounded to float32. `spf_f64`: the same kernel "
           "in float64 on the same values. Bytes: values, int32 indices and row pointers, x "
           "and y once each at the value type's width (a lower bound of the traffic); "
           f"*leaves the cache*: the float32 working set is at least {CACHE_BYTES >> 20} MiB "
           "(the L3).", "",
           "| matrix | nnz | MB (f32) | threads | spf_f32 (ms) | GB/s | of STREAM | "
           "bytes/nnz f32 / f64 | spf_f64 | mkl_s | mkl_d | scipy_f32 | torch_f32 | "
           "graphblas_f32 |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[tuple[int, str, bool], list[float]] = {}
    bytes_ratio: list[float] = []
    fractions: dict[tuple[int, bool], list[float]] = {}
    for (matrix, threads), c in cells.items():
        if "spf_f32" not in c:
            continue
        s = c["spf_f32"]
        big = float(s["bytes"]) >= CACHE_BYTES
        fractions.setdefault((threads, big), []).append(float(s["stream_fraction"]))
        b32 = float(s["bytes_per_nnz"])
        b64 = float(c["spf_f64"]["bytes_per_nnz"]) if "spf_f64" in c else float("nan")
        if threads == 1 and b64 == b64:
            bytes_ratio.append(b32 / b64)
        line = [matrix, s["nnz"], f"{float(s['bytes']) / 1e6:.1f}", str(threads), _ms(s),
                f"{float(s['GBps']):.1f}", f"{float(s['stream_fraction']) * 100:.0f}%",
                f"{b32:.2f} / {b64:.2f}"]
        for p in ("spf_f64", "mkl_s", "mkl_d", "scipy_f32", "torch_f32", "graphblas_f32"):
            if p in c:
                r = _t(c[p]) / _t(s)
                ratios.setdefault((threads, p, big), []).append(r)
                line.append(f"{_ms(c[p])} ({r:.2f}x)")
            else:
                line.append("-")
        out.append("| " + " | ".join(line) + " |")
    out += ["", "Geometric means of contender time / spf_f32 time (number of matrices), all "
            "matrices and those that leave the cache; `spf_f64` is the float64/float32 time "
            "ratio of spf's own kernel.", "",
            "| threads | matrices | spf_f64 | mkl_s | mkl_d | scipy_f32 | torch_f32 | "
            "graphblas_f32 | spf_f32 share of STREAM (median) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for threads in THREADS:
        for only_big, label in ((False, "all"), (True, "leave the cache")):
            def pick(p: str, only_big: bool = only_big) -> list[float]:
                return [v for (t, q, b), vs in ratios.items() if t == threads and q == p
                        and (b or not only_big) for v in vs]
            fr = [v for (t, b), vs in fractions.items() if t == threads
                  and (b or not only_big) for v in vs]
            out.append(f"| {threads} | {label} | " + " | ".join(
                _gm(pick(p)) for p in ("spf_f64", "mkl_s", "mkl_d", "scipy_f32", "torch_f32",
                                       "graphblas_f32"))
                + (f" | {np.median(fr) * 100:.0f}% |" if fr else " | - |"))
    goal = {t: [v for (tt, p, b), vs in ratios.items() if tt == t and p == "mkl_s" and b
                for v in vs] for t in THREADS}
    f64 = {t: [v for (tt, p, b), vs in ratios.items() if tt == t and p == "spf_f64" and b
               for v in vs] for t in THREADS}
    out += ["", "**Goal:** float32 SpMV vs MKL `mkl_sparse_s_mv` on the matrices that leave "
            "the cache (>= 32 MiB working set), geometric mean of MKL time / spf time: "
            + "; ".join(f"{t} thread{'s' if t > 1 else ''} {_gm(goal[t])}" for t in THREADS)
            + f". Bytes per nonzero: float32 / float64 = {_gm(bytes_ratio)} of the matrices "
            "(goal about 2/3: 8 instead of 12 bytes per stored entry, plus the vectors); "
            "measured time float64 / float32 of spf's kernel on the matrices that leave the "
            "cache: " + "; ".join(f"{t} thread{'s' if t > 1 else ''} {_gm(f64[t])}"
                                   for t in THREADS)
            + " (1.5x if the time follows the bytes).", ""]
    return out


def _describe_spmm(rows: list[dict]) -> list[str]:
    cells = _cells(rows, "spmm")
    out = ["### SpMM, float32, 64 dense columns", "",
           f"`Y(i,k) = A(i,j) * X(j,k)`, A in CSR, X ({COLUMNS} columns) and Y row-major "
           "float32. MKL: `mkl_sparse_s_mm` with `SPARSE_LAYOUT_ROW_MAJOR` after "
           "`mkl_sparse_optimize` with an mm hint; torch: `torch.mm` on a sparse CSR tensor. "
           "GFLOP/s = 2 nnz 64 / time.", "",
           "| matrix | nnz | threads | spf_f32 (ms) | GFLOP/s | mkl_s | scipy_f32 | "
           "torch_f32 |", "|---|---|---|---|---|---|---|---|"]
    ratios: dict[tuple[int, str], list[float]] = {}
    for (matrix, threads), c in cells.items():
        if "spf_f32" not in c:
            continue
        s = c["spf_f32"]
        line = [matrix, s["nnz"], str(threads), _ms(s), f"{float(s['GFLOPs']):.1f}"]
        out.append(_ratio_row(line, c, s, SPMM_PEERS, threads, ratios))
    return out + ["", _geomeans(ratios, SPMM_PEERS), ""]


def _ratio_row(line: list, c: dict, s: dict, peers: tuple, threads: int,
               ratios: dict[tuple[int, str], list[float]]) -> str:
    """``line`` with each peer's time and ratio to ``s`` (recorded in ``ratios``)."""
    for p in peers:
        if p in c:
            r = _t(c[p]) / _t(s)
            ratios.setdefault((threads, p), []).append(r)
            line.append(f"{_ms(c[p])} ({r:.2f}x)")
        else:
            line.append("-")
    return "| " + " | ".join(map(str, line)) + " |"


def _geomeans(ratios: dict[tuple[int, str], list[float]], peers: tuple) -> str:
    return "Geometric means: " + "; ".join(
        f"{t} thread{'s' if t > 1 else ''}: " + ", ".join(
            f"vs {p} {_gm(ratios.get((t, p), []))}" for p in peers
            if ratios.get((t, p))) for t in THREADS) + "."


def _describe_bfs(rows: list[dict]) -> list[str]:
    cells = _cells(rows, "bfs")
    out = ["### BFS on bool", "",
           "Levels from vertex 0, the whole BFS timed. `spf_bool`: `q(j) = f(i) * A(i,j)` "
           'under `any_pair` with `dtype="bool"`, f the frontier (`SV`), the visited '
           'vertices a complemented structural mask (`mask={"q": "v"}, complement=True`); '
           "one call from Python per level. `spf_bool_nomask`: the same push on bool without "
           "the mask, numpy drops the visited vertices; `spf_f64`: that in float64 "
           "(experiments/graphs.py's BFS). `graphblas_bool`: "
           "`q(~v.S, replace=True) << q.vxm(A, any_pair)` on BOOL.", "",
           "| graph | vertices | edges | levels | threads | spf_bool (ms) | us per level | "
           "graphblas_bool | spf_bool_nomask | spf_f64 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[tuple[int, str], list[float]] = {}
    for (graph, threads), c in cells.items():
        if "spf_bool" not in c:
            continue
        s = c["spf_bool"]
        levels = int(s["levels"])
        line = [graph, s["rows"], str(int(s["nnz"]) // 2), str(levels), str(threads), _ms(s),
                f"{_t(s) * 1e6 / levels:.0f}"]
        out.append(_ratio_row(line, c, s, BFS_PEERS, threads, ratios))
    out += ["", _geomeans(ratios, BFS_PEERS)]
    return out



# what the full run of 2026-11-27 showed and why (kept with the code that produces it)
WHY = """**What the numbers show.**

- *Conditions.* The full run had the machine's 2 cores to itself; this VM's timings still
  vary by up to 1.5x between runs of the same kernel (a shared host), most on 2 threads.
  torch was 2.14.1 (its CPU kernels).
- *Bytes per nonzero.* float32 moves 8.05-10.4 bytes per stored entry against 12.1-16.0 in
  float64 (0.66x: 8 instead of 12 bytes per entry plus the vectors, which weigh most on the
  short-row matrices). spf's float32 kernel is 1.22x faster than its float64 one on the
  matrices that leave the cache on 1 thread and 1.39x on 2, not 1.5x: at 18-53% of STREAM
  the row loop is bound, as in float64 (the SpMV section), by each row's chain of dependent
  adds and the gathers of x, which float32 does not shorten. One cost is float32's own: gcc
  vectorizes the float32 row loop (not the float64 one) with `vgatherdps` and an in-order
  chain of scalar adds, which only adds work on rows of a few entries.
- *Against MKL.* `mkl_sparse_s_mv` is 2.4-2.8x faster than spf on the Laplacians and the
  banded matrix (working sets of 13.6-22 MB, inside the L3), as in float64. On the matrices
  that leave the cache spf is 0.81x MKL on 1 thread (1.01x on the two sparsest random
  matrices, 1.42x on rmat, 0.49x on random_1e-2 and 0.62x on block8, whose rows MKL's
  optimized handle processes in blocks) and 0.96x on 2 threads; 1.04x scipy and 1.22x
  GraphBLAS there. The goal (at least MKL's speed there) is not met; closing the gap is
  the layout and code choice of `spf.tune` (issue 41), as in float64.
- *SpMM.* spf's kernel runs the 64 columns as a unit-stride `omp simd` loop per stored entry
  of A (row-major X and Y): 1.09x MKL's `s_mm`, 1.69x scipy, 1.84x torch on 1 thread; 0.95x
  MKL on 2.
- *BFS.* spf's masked bool BFS is 0.30x GraphBLAS on 1 thread, 1.4-3.2 ms per level:
  `complement=True` is applied in Python after the call (the mask converted and checked, its
  entries counted over all n vertices, those elements of q reset), while the kernel itself
  zeroes all of q and pushes to visited neighbours too, so the masked BFS takes about twice
  the time of the unmasked bool push (`spf_bool_nomask`). A level's cost is the call from
  Python and the passes over all n vertices, not the values' bytes (bool is no faster than
  float64 here). On the 599-level grid GraphBLAS (112 ms) is 10x faster; a mask applied in
  the generated C, and a BFS loop that stays in C, would be needed to close that."""


if __name__ == "__main__":
    os.environ.setdefault("OMP_PROC_BIND", "false")
    main()
