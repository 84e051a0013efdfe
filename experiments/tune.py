"""``spf.tune`` (issue 41): the layout spf chooses for each matrix of the SpMV suite against
spf's plain CSR kernel, MKL's inspector-executor, scipy and SuiteSparse:GraphBLAS, on 1 and 2
threads; what tuning costs, and what a cached decision costs; then the same contest for SpMM
with 64 dense columns and for SpMSpV (x a sparse vector).

    python -m experiments.tune [--quick] [--matrix path.mtx ...] [--candidates CSR,DIA,...|default]

Per matrix of the SpMV suite (experiments/matrices.py; ``--quick``: three small ones) and
thread count t (1 and 2):

- **Tuning.** The decision cache (``spf.runtime.build.cache_dir() / "tune"``) is emptied at
  the start of a run, so the first ``spf.tune("y(i) = A(i,j) * x(j)", A=A, x=x, threads=t)``
  (default candidates: every matrix layout on the search path, its storage estimated on
  samples of the matrix; measured: CSR, the operand's own, and the smallest by bytes, with
  the option variants, 8 in all)
  estimates, converts and measures;
  its wall time is ``tune_s`` and ``tune_compiles`` counts the shared libraries it compiled
  (conversions and kernels not yet in the compile cache; 0 when an earlier run left them
  there). Then ``spf.tune`` on a *sibling*, another matrix of
  the same family (the suite's generator with another seed for the random, R-MAT, block and
  lower-triangular matrices; the same pattern with new values for the Laplacians, the banded
  matrix and ``--matrix`` files, whose structure the size fixes): ``cached_s`` is its wall
  time, ``cached_hit`` whether the decision came from the cache (``Tuned.cached``),
  ``cached_decision_s`` the part of it spf.tune reports as deciding (``Tuned.decision_s``:
  the signature, the lookup, the kernel; not the sibling's conversion), and its
  parts are timed again on their own: ``cached_build_s`` (``spf.Kernel(...).compile()`` of
  the chosen layouts: code generation, the library itself comes from the compile cache) and
  ``cached_convert_s`` (the sibling converted to the chosen layout).
- **Contenders**, each with its input prebuilt in its own format, the same thread count for
  every one (scipy is single-threaded: 1-thread rows only):
  ``spf_tuned``: the tuned kernel (``tuned.kernel``) on the converted operands
  (``tuned.operands``), its C called on argument structs built once (as every other
  experiment times spf); ``spf_tuned_call``: the same, called from Python as a user calls
  it, ``tuned.kernel(**tuned.operands)`` (argument checks, y allocated per call);
  ``spf_csr``: ``spf.Kernel(..., {"A": "CSR"}, parallel=t > 1).compile()`` (threads by
  ``set_num_threads``), called like ``spf_tuned``; ``mkl_csr_opt``: ``mkl_sparse_d_mv`` on a
  CSR handle after ``mkl_sparse_set_mv_hint`` + ``mkl_sparse_optimize`` (MKL's
  inspector-executor, experiments/mkl.py; threads by ``MKL_Set_Num_Threads``);
  ``scipy_csr``: ``A @ x`` (1 thread); ``graphblas``: python-graphblas ``mxv`` under
  ``plus_times`` into a preallocated vector (``nthreads`` = t).
  The chosen layout, its conversion time and the calls after which it pays off against CSR
  come from ``tuned.report``.

Two more parts follow (the CSV's ``kernel`` column: ``spmv``, ``spmm64``, ``spmspv``), with
the same thread counts, timing and checks, and the tuning columns of the first spf.tune (no
sibling: the cached path is the SpMV part's). The decision cache is emptied before each part,
so that each part's first spf.tune measures.

- **SpMM** ``C(i,k) = A(i,j) * B(j,k)``, B a dense m x 64 numpy array (C-contiguous, values
  from a fixed seed): ``spf.tune(..., A=A, B=B, threads=t)`` tunes A, the one sparse operand
  (B and C stay dense row-major). Contenders: ``spf_tuned``, ``spf_tuned_call``, ``spf_csr``
  (``spf.Kernel(..., {"A": "CSR"}, parallel=t > 1)``), ``mkl_csr_opt`` (``mkl_sparse_d_mm``,
  row-major, after ``mkl_sparse_set_mm_hint`` for 64 columns + ``mkl_sparse_optimize``),
  ``scipy_csr`` (``A @ B``, 1 thread), ``graphblas`` (``mxm`` under ``plus_times``, B a full
  Matrix, into a preallocated C). Goal: tuned SpMM at least 1.0x MKL's time (geometric mean).
- **SpMSpV** ``y(i) = A(i,j) * x(j)``, x an spf Tensor in SV storing 1% of A's columns (at
  least one; positions and values from a fixed seed), y dense:
  ``spf.tune(..., A=A, x=x, layouts={"x": "SV"}, threads=t)``. Contenders: ``spf_tuned``,
  ``spf_tuned_call``, ``spf_csr`` (``{"A": "CSR", "x": "SV"}``, ``find`` left at ``auto``),
  ``scipy_csr`` (``A @ x`` with A in CSC and x an m x 1 CSC matrix: scipy's SpGEMM reading
  only x's columns of A, a sparse y; 1 thread), ``graphblas`` (``mxv`` with x a sparse
  Vector, into a preallocated y, A held by column): both libraries in their best format for
  a sparse x. MKL has no sparse matrix times
  sparse vector product (``mkl_sparse_d_mv`` takes a dense x): a skipped row says so. This
  is SpMV's statement; spf.tune's cache key holds x's layout too, so SpMV's decisions (made
  for a dense x) are not reused here.

Matrices: ``--quick``: three small ones (laplace2d, rmat, block8) for SpMV, block8 for SpMM
and rmat for SpMSpV (the quick mode runs in the tests);
``--matrix`` files: every part on them. Full run: SpMV on the whole suite at the ``full``
scale (25k-500k rows); SpMM and SpMSpV on the whole suite at the ``medium`` scale (5k-60k
rows). At the full scale one SpMM matrix took 40-105 s for both thread counts (measured on
laplace2d and block8: 64 times SpMV's work per call, through spf.tune's 8 measured candidates
and 6 contenders), over 12 minutes for the suite; SpMSpV's kernels take microseconds to a
millisecond there while spf.tune converts A to its candidates as in SpMV (16-50 s a matrix).
At the medium scale B and C (n x 64 doubles) take 16-61 MB together (5 MB for random_1e-2)
against a 32 MB L3: SpMM still streams most of its dense operands from memory.

Every y (the tuned one, the sibling's, every contender's) is checked against scipy's
(``np.testing.assert_allclose``) before timing, and every contender's again after. Each
contender is warmed up once and timed as the median of repeated calls, each contender's calls
back to back after a pause (experiments/common.py ``time_blocked``: MKL and GraphBLAS bring
OpenMP runtimes whose idle threads would spin on the next contender's cores). Ratio =
contender time / ``spf_tuned`` time (> 1: spf faster). The goals (issue 41): tuned SpMV at
least 1.2x MKL's time in the geometric mean, at least 1.0x the fastest library on every
matrix, at least 60% of STREAM on the matrices that leave the cache (the ``bytes`` of the
``spf_tuned`` row: the chosen layout's arrays, x and y, at least 50 MB; STREAM triad,
``baselines/stream_triad.c`` with spf's flags, measured at the start of the run on 1 and 2
threads: the ``stream_triad`` rows), a cached decision reused in under 10 ms.
Full run: about 11-12 minutes on 2 cores, an estimate: the SpMV part took 16 s (laplace2d)
and 50 s (block8) per full-scale matrix for both thread counts, about 6 minutes for the suite;
SpMM and SpMSpV took 10-16 s and 7-12 s per medium matrix (all ten measured), about 2.5 and
1.5 minutes. ``--quick``: about 20 s with a warm compile cache, about 45 s with a cold one.
"""
from __future__ import annotations

import os
import shutil
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

import spf
from spf.runtime.build import cache_dir

from . import matrices as suite_matrices
from . import mkl
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

NAME = "tune"
SPMV = "y(i) = A(i,j) * x(j)"
SPMM = "C(i,k) = A(i,j) * B(j,k)"
SPMSPV = SPMV               # the same statement, x in SV (given with layouts={"x": "SV"})
SPMM_COLUMNS = 64           # B: n x 64, dense, row-major
X_DENSITY = 0.01            # SpMSpV: x stores 1% of A's columns
X_SEED = 41                 # x's positions and values (and B's values) from this seed
THREADS = (1, 2)
MKL_GOAL = 1.2          # tuned SpMV: at least 1.2x MKL's time, geometric mean over the suite
MKL_SPMM_GOAL = 1.0     # tuned SpMM (64 columns): at least MKL's speed, geometric mean
LIBRARY_GOAL = 1.0      # and at least the fastest library's speed on every matrix
CACHED_GOAL_S = 0.010   # a cached decision reused in under 10 ms
STREAM_GOAL = 0.6       # tuned SpMV out of cache: at least 60% of STREAM triad
OUT_OF_CACHE = 50e6     # bytes a call reads at least, to count as out of the 32 MB L3
LIBRARIES = ("mkl_csr_opt", "scipy_csr", "graphblas")
PEERS = ("spf_csr", "mkl_csr_opt", "scipy_csr", "graphblas", "spf_tuned_call")
LABELS = {"spf_tuned": "spf tuned", "spf_tuned_call": "spf tuned (Python call)",
          "spf_csr": "spf CSR", "mkl_csr_opt": "MKL IE (optimized)",
          "scipy_csr": "scipy (1 thread)", "graphblas": "GraphBLAS"}
KERNELS = {"spmv": "SpMV", "spmm64": f"SpMM ({SPMM_COLUMNS} dense columns)",
           "spmspv": f"SpMSpV (x {X_DENSITY:.0%} dense, SV)"}
COLUMNS_OUT = ("scale", "kernel", "matrix", "rows", "cols", "nnz", "threads", "contender", "layout",
               "parallel", "time_s", "runs", "vs_tuned", "status", "tune_s", "tune_compiles",
               "first_cached", "measured", "pruned", "not_measured", "convert_s",
               "break_even_calls", "sibling", "sibling_nnz", "cached_s", "cached_hit",
               "cached_layout", "cached_decision_s", "cached_build_s", "cached_convert_s",
               "tried", "candidates", "bytes", "GBps")


@dataclass(frozen=True)
class Mode:
    scale: str
    names: tuple[str, ...] | None       # the suite's matrices (None: all of them)
    candidates: tuple[str, ...] | None  # spf.tune's candidates= (None: its default)
    target_s: float                     # timed seconds per contender and cell
    min_runs: int
    max_runs: int
    pause_s: float                      # idle time before each contender's block of calls
    spmm: tuple[str, tuple[str, ...] | None] = ("quick", None)     # SpMM: scale, matrices
    spmspv: tuple[str, tuple[str, ...] | None] = ("quick", None)   # SpMSpV: scale, matrices
    stream: tuple[int, int] = (1_000_000, 3)    # STREAM triad: elements, repetitions


QUICK = ("laplace2d", "rmat", "block8")
# full: SpMM and SpMSpV on the medium suite (full-scale SpMM: 40-105 s a matrix; docstring)
MODES = {"quick": Mode("quick", QUICK, None, 0.003, 3, 20, 0.0, ("quick", ("block8",)),
                       ("quick", ("rmat",))),
         "full": Mode("full", None, None, 0.4, 9, 500, 0.3, ("medium", None),
                      ("medium", None), (20_000_000, 20))}


def _row(**values: object) -> dict[str, object]:
    """A CSV row with every column (empty where it does not apply)."""
    return {c: values.get(c, "") for c in COLUMNS_OUT}


# --- inputs ------------------------------------------------------------------------------------
def sibling(name: str, A: sp.csr_matrix, scale: str, from_suite: bool
            ) -> tuple[sp.csr_matrix, str]:
    """Another matrix of A's family and how it was made: the suite's generator with another
    seed where the structure is random, else A's pattern with new values."""
    rng = np.random.default_rng(zlib.crc32(f"spf-experiments/tune-sibling/{name}/{scale}"
                                           .encode()))
    size = suite_matrices._SIZES.get(name, {}).get(scale) if from_suite else None
    if size is not None:
        if name.startswith("random_"):
            return suite_matrices.random_uniform(size[0], float(name.split("_")[1]), rng), \
                "another seed"
        if name == "rmat":
            return suite_matrices.rmat(size[0], 16, rng), "another seed"
        if name == "block8":
            return suite_matrices.block_structured(size[0], 3, rng), "another seed"
        if name == "lower_triangular":
            return suite_matrices.lower_triangular(size[0], 16, rng), "another seed"
    B = A.copy()
    B.data = rng.uniform(0.5, 1.5, A.nnz)
    return B, "new values"


def _label(layout: str, params: tuple, options: tuple = ()) -> str:
    """The layout with its parameters and options (``parallel=True``, implied by 2 threads,
    left out)."""
    return layout + "".join(f" {k}={v}" for k, v in params) + "".join(
        f" {k}={v}" for k, v in options if (k, v) != ("parallel", True))


def _libraries() -> int:
    """The shared libraries in the compile cache (compiles are counted by difference)."""
    try:
        return sum(1 for _ in cache_dir().glob("spf_*.so"))
    except OSError:
        return 0


def _check(got: Any, reference: np.ndarray, what: str) -> None:
    np.testing.assert_allclose(np.asarray(got), reference, rtol=1e-9,
                               atol=1e-12 * (np.abs(reference).max(initial=0) + 1),
                               err_msg=what)


# --- tuning ------------------------------------------------------------------------------------
@dataclass
class Tuning:
    tuned: Any                          # spf.Tuned
    values: dict[str, object]           # the tuning columns of the spf_tuned row


def tune(name: str, A: sp.csr_matrix, B: sp.csr_matrix, how: str, x: np.ndarray,
         reference: np.ndarray, threads: int, mode: Mode) -> Tuning:
    """spf.tune on A (measured), then on its sibling B (the decision cached), each checked."""
    options: dict[str, Any] = {"threads": threads}
    if mode.candidates:
        options["candidates"] = list(mode.candidates)
    before = _libraries()
    t0 = time.perf_counter()
    tuned = spf.tune(SPMV, A=A, x=x, **options)
    tune_s = time.perf_counter() - t0
    compiles = _libraries() - before
    _check(tuned(A=A, x=x), reference, f"spf.tune on {name}, {threads} threads")
    _check(tuned.kernel(**tuned.operands), reference,
           f"tuned.kernel(**tuned.operands) on {name}, {threads} threads")
    t0 = time.perf_counter()
    second = spf.tune(SPMV, A=B, x=x, **options)
    cached_s = time.perf_counter() - t0
    _check(second(A=B, x=x), B @ x, f"spf.tune on the sibling of {name}, {threads} threads")
    t0 = time.perf_counter()        # the cached path's parts, each on its own
    spf.Kernel(SPMV, dict(second.layouts), **second.options).compile()
    build_s = time.perf_counter() - t0
    tb = spf.Tensor.from_scipy("CSR", B)
    t0 = time.perf_counter()
    tb.convert(second.layouts["A"])
    convert_s = time.perf_counter() - t0
    values = {**_tuning_values(tuned, tune_s, compiles, mode),
              "sibling": how, "sibling_nnz": B.nnz, "cached_s": cached_s,
              "cached_hit": second.cached,
              "cached_layout": _label(second.layouts["A"].name,
                                      tuple((second.layouts["A"].params or {}).items()),
                                      tuple(second.options.items())),
              "cached_decision_s": second.decision_s, "cached_build_s": build_s,
              "cached_convert_s": convert_s,
              # what one call reads and writes at least: the chosen layout's arrays, x, y
              "bytes": _chosen(tuned).bytes + x.nbytes + 8 * A.shape[0]}
    return Tuning(tuned, values)


def _chosen(tuned: Any) -> Any:
    return next(r for r in tuned.report if r.status.startswith("chosen"))


def _tuning_values(tuned: Any, tune_s: float, compiles: int, mode: Mode) -> dict[str, object]:
    """The tuning columns of a spf_tuned row from spf.tune's report (the chosen layout, its
    conversion and break-even, the candidates measured with their kernel times in us)."""
    rows = tuned.report
    chosen = _chosen(tuned)
    measured = sorted((r for r in rows if r.kernel_s is not None), key=lambda r: r.kernel_s)
    return {"layout": _label(chosen.layout, chosen.params, chosen.options),
            "tune_s": tune_s,
            "tune_compiles": compiles, "first_cached": tuned.cached,
            "measured": len(measured),
            "pruned": sum(r.status.startswith("pruned") for r in rows),
            "not_measured": sum(r.status.startswith("not measured") for r in rows),
            "convert_s": chosen.convert_s if chosen.convert_s is not None else "",
            "break_even_calls": "" if chosen.break_even_calls is None
            else chosen.break_even_calls,
            "tried": ",".join(mode.candidates) if mode.candidates else "default",
            "candidates": "; ".join(f"{_label(r.layout, r.params, r.options)} "
                                    f"{r.kernel_s * 1e6:.3g}"
                                    for r in measured)}


def tune_once(kernel: str, expr: str, name: str, A: sp.csr_matrix, others: dict[str, Any],
              layouts: dict[str, str] | None, reference: np.ndarray, threads: int,
              mode: Mode) -> Tuning:
    """spf.tune of ``expr`` on A with the other operands ``others`` (their layouts fixed by
    ``layouts`` where given), measured (no sibling: the cached path is the SpMV part's),
    its result checked through ``tuned(...)`` and ``tuned.kernel(**tuned.operands)``."""
    options: dict[str, Any] = {"threads": threads}
    if mode.candidates:
        options["candidates"] = list(mode.candidates)
    if layouts:
        options["layouts"] = layouts
    before = _libraries()
    t0 = time.perf_counter()
    tuned = spf.tune(expr, A=A, **others, **options)
    tune_s = time.perf_counter() - t0
    compiles = _libraries() - before
    what = f"{KERNELS[kernel]} on {name}, {threads} threads"
    _check(tuned(A=A, **others), reference, f"spf.tune: {what}")
    _check(tuned.kernel(**tuned.operands), reference,
           f"tuned.kernel(**tuned.operands): {what}")
    return Tuning(tuned, _tuning_values(tuned, tune_s, compiles, mode))


# --- contenders --------------------------------------------------------------------------------
@dataclass
class Contender:
    fn: Callable[[], object]
    result: Callable[[], np.ndarray]
    layout: str
    parallel: str = ""


def _parallel(compiled: Any, threads: int) -> str:
    """"yes" when the kernel runs on ``threads`` threads (its thread count set), else "no"."""
    if threads == 1:
        return "yes"
    if compiled.kernel.parallel_loop is None:
        return "no"
    compiled.set_num_threads(threads)
    return "yes"


def contenders(A: sp.csr_matrix, x: np.ndarray, tuned: Any, csr: dict[int, Any],
               threads: int, gb: Any) -> dict[str, Contender]:
    n = A.shape[0]
    out = _tuned_contenders(tuned, np.empty(n), threads)
    box: dict[str, Any] = {}
    y_csr = np.empty(n)
    out["spf_csr"] = Contender(prepared_call(csr[threads], y_csr,
                                             A=spf.Tensor.from_scipy("CSR", A), x=x),
                               lambda: y_csr, "CSR", _parallel(csr[threads], threads))
    if mkl.load() is not None and A.nnz:
        mkl.set_threads(threads)
        h = mkl.csr(A)
        mkl.optimize_mv(h)
        y_mkl = np.empty(n)

        def mkl_run() -> None:
            mkl.mv(h, x, y_mkl)
        out["mkl_csr_opt"] = Contender(mkl_run, lambda: y_mkl, "CSR (MKL optimized)")
    if threads == 1:
        def scipy_run() -> None:
            box["scipy"] = A @ x
        out["scipy_csr"] = Contender(scipy_run, lambda: box["scipy"], "CSR")
    if gb is not None:
        gb.ss.config["nthreads"] = threads
        GA = gb.io.from_scipy_sparse(A)
        gx = gb.Vector.from_dense(x)
        gy = gb.Vector(float, n)

        def grb() -> None:
            gy << GA.mxv(gx, gb.semiring.plus_times)
        out["graphblas"] = Contender(grb, lambda: gy.to_dense(fill_value=0.0), "CSR")
    return out


def run_matrix(name: str, A: sp.csr_matrix, csr: dict[int, Any], mode: Mode, gb: Any,
               from_suite: bool) -> list[dict]:
    n, m = A.shape
    x = np.random.default_rng(7).uniform(-1.0, 1.0, m)
    reference = A @ x
    B, how = sibling(name, A, mode.scale, from_suite)
    base = {"scale": mode.scale, "kernel": "spmv", "matrix": name, "rows": n, "cols": m,
            "nnz": A.nnz}
    rows = []
    for threads in THREADS:
        time.sleep(mode.pause_s)         # other runtimes' threads idle before spf measures
        tuning = tune(name, A, B, how, x, reference, threads, mode)
        cons = contenders(A, x, tuning.tuned, csr, threads, gb)
        times = _measure(cons, tuning, reference, f"on {name}, {threads} threads", base,
                         threads, mode, rows)
        v = tuning.values
        line = "  ".join(f"{c} {times[c][0] * 1e6:.3g}" for c in cons)
        print(f"  {name:16s} {threads} thread{'s' if threads > 1 else ' '}: chose {v['layout']} "
              f"(tune {float(v['tune_s']):.2f} s, {v['tune_compiles']} compiles; sibling "
              f"{'cached' if v['cached_hit'] else 'NOT cached'} "
              f"{float(v['cached_s']) * 1e3:.3g} ms); us: {line}", flush=True)
    return rows


def _measure(cons: dict[str, Contender], tuning: Tuning, reference: np.ndarray, where: str,
             base: dict[str, object], threads: int, mode: Mode, rows: list[dict]
             ) -> dict[str, tuple[float, int]]:
    """Check every contender's result against scipy's, time them (``time_blocked``), check
    again, and append one row per contender to ``rows``; the times by contender."""
    for c, con in cons.items():     # checked before timing
        con.fn()
        _check(con.result(), reference, f"{c} {where}")
    times = time_blocked({c: v.fn for c, v in cons.items()}, mode.target_s,
                         mode.min_runs, mode.max_runs, mode.pause_s)
    for c, con in cons.items():     # and after (the last call's result)
        _check(con.result(), reference, f"{c} {where}")
    spf_t = times["spf_tuned"][0]
    for c, con in cons.items():
        t, runs = times[c]
        extra = tuning.values if c == "spf_tuned" else {"layout": con.layout}
        rows.append(_row(**base, **extra, threads=threads, contender=c,
                         parallel=con.parallel, time_s=t, runs=runs, vs_tuned=t / spf_t,
                         status="ok"))
    return times


def _tuned_contenders(tuned: Any, out: np.ndarray, threads: int) -> dict[str, Contender]:
    """``spf_tuned`` (its C on argument structs built once, writing ``out``) and
    ``spf_tuned_call`` (``tuned.kernel(**tuned.operands)``, as a user calls it)."""
    chosen = _label(tuned.layouts["A"].name, tuple((tuned.layouts["A"].params or {}).items()))
    par = _parallel(tuned.kernel, threads)
    box: dict[str, Any] = {}
    kernel, operands = tuned.kernel, dict(tuned.operands)

    def call() -> None:
        box["tuned"] = kernel(**operands)
    return {"spf_tuned": Contender(prepared_call(tuned.kernel, out, **tuned.operands),
                                   lambda: out, chosen, par),
            "spf_tuned_call": Contender(call, lambda: box["tuned"], chosen, par)}


# --- SpMM: C = A B, B dense with 64 columns ----------------------------------------------------
def spmm_contenders(A: sp.csr_matrix, B: np.ndarray, tuned: Any, csr: dict[int, Any],
                    threads: int, gb: Any) -> dict[str, Contender]:
    n, k = A.shape[0], B.shape[1]
    out = _tuned_contenders(tuned, np.empty((n, k)), threads)
    box: dict[str, Any] = {}
    c_csr = np.empty((n, k))
    out["spf_csr"] = Contender(prepared_call(csr[threads], c_csr,
                                             A=spf.Tensor.from_scipy("CSR", A), B=B),
                               lambda: c_csr, "CSR", _parallel(csr[threads], threads))
    if mkl.load() is not None and A.nnz:
        mkl.set_threads(threads)
        h = mkl.csr(A)
        mkl.optimize_mm(h, k)
        c_mkl = np.empty((n, k))

        def mkl_run() -> None:
            mkl.mm(h, B, c_mkl)
        out["mkl_csr_opt"] = Contender(mkl_run, lambda: c_mkl, "CSR (MKL optimized)")
    if threads == 1:
        def scipy_run() -> None:
            box["scipy"] = A @ B
        out["scipy_csr"] = Contender(scipy_run, lambda: box["scipy"], "CSR")
    if gb is not None:
        gb.ss.config["nthreads"] = threads
        GA = gb.io.from_scipy_sparse(A)
        GB = gb.Matrix.from_dense(B)
        GC = gb.Matrix(float, n, k)

        def grb() -> None:
            GC << GA.mxm(GB, gb.semiring.plus_times)
        out["graphblas"] = Contender(grb, lambda: GC.to_dense(fill_value=0.0), "CSR")
    return out


def run_spmm(name: str, A: sp.csr_matrix, csr: dict[int, Any], scale: str, mode: Mode,
             gb: Any) -> list[dict]:
    n, m = A.shape
    B = np.random.default_rng(X_SEED).uniform(-1.0, 1.0, (m, SPMM_COLUMNS))   # C-contiguous
    reference = A @ B
    base = {"scale": scale, "kernel": "spmm64", "matrix": name, "rows": n, "cols": m,
            "nnz": A.nnz}
    rows: list[dict] = []
    for threads in THREADS:
        time.sleep(mode.pause_s)
        tuning = tune_once("spmm64", SPMM, name, A, {"B": B}, None, reference, threads, mode)
        cons = spmm_contenders(A, B, tuning.tuned, csr, threads, gb)
        times = _measure(cons, tuning, reference, f"(SpMM) on {name}, {threads} threads",
                         base, threads, mode, rows)
        _say(name, threads, tuning, times)
    return rows


# --- SpMSpV: y = A x, x a sparse vector (SV) -----------------------------------------------------
def sparse_x(n: int) -> tuple[np.ndarray, np.ndarray]:
    """x's sorted positions (int32) and values: X_DENSITY of n, at least one (as
    experiments/spmspv.py draws them)."""
    rng = np.random.default_rng(X_SEED)
    k = max(1, round(X_DENSITY * n))
    return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int32), \
        rng.uniform(-1.0, 1.0, k)


def spmspv_contenders(A: sp.csr_matrix, x: Any, idx: np.ndarray, val: np.ndarray, tuned: Any,
                      csr: dict[int, Any], threads: int, gb: Any) -> dict[str, Contender]:
    n, m = A.shape
    out = _tuned_contenders(tuned, np.empty(n), threads)
    box: dict[str, Any] = {}
    y_csr = np.empty(n)
    out["spf_csr"] = Contender(prepared_call(csr[threads], y_csr,
                                             A=spf.Tensor.from_scipy("CSR", A), x=x),
                               lambda: y_csr, "CSR", _parallel(csr[threads], threads))
    A_csc = A.tocsc()              # the libraries' best format here: only x's columns read
    if threads == 1:                # x an m x 1 CSC matrix: scipy's SpGEMM, a sparse y
        x_scipy = sp.csc_matrix((val, idx.astype(np.int32), np.array([0, len(idx)])),
                                shape=(m, 1))

        def scipy_run() -> None:
            box["scipy"] = A_csc @ x_scipy
        out["scipy_csr"] = Contender(scipy_run, lambda: box["scipy"].toarray().ravel(),
                                     "CSC, x m x 1 CSC")
    if gb is not None:
        gb.ss.config["nthreads"] = threads
        GA = gb.io.from_scipy_sparse(A_csc)         # held by column
        gx = gb.Vector.from_coo(idx, val, size=m)
        gy = gb.Vector(float, n)

        def grb() -> None:
            gy << GA.mxv(gx, gb.semiring.plus_times)
        out["graphblas"] = Contender(grb, lambda: gy.to_dense(fill_value=0.0),
                                     "CSC, x sparse Vector")
    return out


def run_spmspv(name: str, A: sp.csr_matrix, csr: dict[int, Any], scale: str, mode: Mode,
               gb: Any) -> list[dict]:
    n, m = A.shape
    idx, val = sparse_x(m)
    x = spf.Tensor.from_arrays("SV", (m,), {"size": m, "len": len(idx), "idx": idx,
                                             "val": val})
    dense = np.zeros(m)
    dense[idx] = val
    reference = A @ dense
    base = {"scale": scale, "kernel": "spmspv", "matrix": name, "rows": n, "cols": m,
            "nnz": A.nnz}
    rows: list[dict] = []
    for threads in THREADS:
        time.sleep(mode.pause_s)
        tuning = tune_once("spmspv", SPMSPV, name, A, {"x": x}, {"x": "SV"}, reference,
                           threads, mode)
        cons = spmspv_contenders(A, x, idx, val, tuning.tuned, csr, threads, gb)
        times = _measure(cons, tuning, reference, f"(SpMSpV) on {name}, {threads} threads",
                         base, threads, mode, rows)
        _say(name, threads, tuning, times)
    return rows


def _say(name: str, threads: int, tuning: Tuning, times: Mapping[str, tuple[float, int]]
         ) -> None:
    v = tuning.values
    line = "  ".join(f"{c} {t * 1e6:.3g}" for c, (t, _) in times.items())
    print(f"  {name:16s} {threads} thread{'s' if threads > 1 else ' '}: chose {v['layout']} "
          f"(tune {float(v['tune_s']):.2f} s, {v['tune_compiles']} compiles"
          f"{'; decision CACHED' if v['first_cached'] else ''}); us: {line}", flush=True)


def _skips(scale: str, kernel: str, gb: Any) -> list[dict]:
    """The rows of the contenders a part cannot run (once per part, with the reason)."""
    out = []
    if kernel == "spmspv":
        out.append(_row(scale=scale, kernel=kernel, contender="mkl_csr_opt",
                        status="skipped: MKL has no sparse matrix times sparse vector "
                               "(mkl_sparse_d_mv takes a dense x)"))
    elif mkl.load() is None:
        out.append(_row(scale=scale, kernel=kernel, contender="mkl_csr_opt",
                        status="skipped: the mkl wheel is not installed"))
    if gb is None:
        out.append(_row(scale=scale, kernel=kernel, contender="graphblas",
                        status="skipped: python-graphblas is not installed"))
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    parser = experiment_parser(__doc__)
    parser.add_argument("--candidates", metavar="CSR,DIA,...",
                        help="the layouts spf.tune tries (default: its own choice)")
    args = parser.parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    if args.candidates:
        mode = replace(mode, candidates=None if args.candidates == "default"
                       else tuple(args.candidates.split(",")))
    decisions = cache_dir() / "tune"
    shutil.rmtree(decisions, ignore_errors=True)    # the first spf.tune of a run measures
    print(f"spf.tune, {mode.scale} suite; decision cache {decisions} emptied", flush=True)
    start = time.perf_counter()
    if mkl.load() is None:
        print("  the mkl wheel is not installed: MKL skipped", flush=True)
    gb = graphblas()
    if gb is None:
        print("  python-graphblas is not installed: GraphBLAS skipped", flush=True)
    rows: list[dict] = _skips(mode.scale, "spmv", gb)
    stream = {t: stream_triad(t, *mode.stream) for t in THREADS}
    print("  STREAM triad: " + ", ".join(f"{t} thread{'s' if t > 1 else ''} {bw:.1f} GB/s"
                                         for t, bw in stream.items()), flush=True)
    rows += [_row(scale=mode.scale, kernel="spmv", threads=t, contender="stream_triad",
                  runs=mode.stream[1], bytes=24 * mode.stream[0], GBps=bw, status="ok")
             for t, bw in stream.items()]
    csr = {1: spf.Kernel(SPMV, {"A": "CSR"}, name="tune_csr").compile(),
           2: spf.Kernel(SPMV, {"A": "CSR"}, parallel=True, name="tune_csr_omp").compile()}
    inputs = list(matrices(mode.scale, args.matrix)) if args.matrix or mode.names is None \
        else list(suite(mode.scale, list(mode.names)))
    for k, (name, A) in enumerate(progress(inputs, NAME, args.quick), 1):
        print(f"[{k}/{len(inputs)}] {name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros",
              flush=True)
        rows += run_matrix(name, A, csr, mode, gb, not args.matrix)
    print(f"SpMV done [{time.perf_counter() - start:.0f} s]", flush=True)
    parts = (("spmm64", SPMM, {"A": "CSR"}, mode.spmm, run_spmm),
             ("spmspv", SPMSPV, {"A": "CSR", "x": "SV"}, mode.spmspv, run_spmspv))
    for kernel, expr, layouts, (scale, names), run in parts:
        # SpMSpV is SpMV's statement, and spf.tune's cache key holds neither the other
        # operands' layouts nor their values: SpMV's decisions would be reused for it
        shutil.rmtree(decisions, ignore_errors=True)
        scale = mode.scale if args.matrix else scale
        if args.matrix or (scale, names) == (mode.scale, mode.names):
            part_inputs = inputs
        else:
            part_inputs = list(suite(scale, list(names) if names else None))
        print(f"{KERNELS[kernel]}, {scale} suite ({len(part_inputs)} matrices); decision "
              f"cache emptied", flush=True)
        rows += _skips(scale, kernel, gb)
        part_csr = {1: spf.Kernel(expr, layouts, name=f"tune_{kernel}_csr").compile(),
                    2: spf.Kernel(expr, layouts, parallel=True,
                                  name=f"tune_{kernel}_csr_omp").compile()}
        for k, (name, A) in enumerate(progress(part_inputs, f"{NAME} {kernel}", args.quick), 1):
            print(f"[{k}/{len(part_inputs)}] {name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} "
                  f"nonzeros", flush=True)
            rows += run(name, A, part_csr, scale, mode, gb)
        print(f"{KERNELS[kernel]} done [{time.perf_counter() - start:.0f} s]", flush=True)
    print_table(_ok(rows), ["kernel", "matrix", "threads", "contender", "layout", "time_s",
                            "vs_tuned"])
    print("wrote", write_csv(NAME, rows, args.quick))
    for p in plot(rows, args.quick):
        print("wrote", p)
    return rows


# --- plots and RESULTS.md ----------------------------------------------------------------------
def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok" and r["time_s"] not in ("", None)]


def _kernel(r: Mapping[str, object]) -> str:
    """The row's kernel (rows written before the column existed are SpMV's)."""
    return str(r.get("kernel") or "spmv")


def _cells(rows: list[dict], kernel: str = "spmv") -> dict[tuple[str, int], dict[str, dict]]:
    """(matrix, threads) -> contender -> row, in the order measured, of one kernel."""
    cells: dict[tuple[str, int], dict[str, dict]] = {}
    for r in _ok(rows):
        if _kernel(r) == kernel:
                cells.setdefault((str(r["matrix"]), int(r["threads"])), {})[
                str(r["contender"])] = r
    return cells


def _t(r: Mapping[str, object]) -> float:
    return float(str(r["time_s"]))


def _f(r: Mapping[str, object], key: str) -> float:
    v = r.get(key, "")
    return float(str(v)) if v not in ("", None) else float("nan")


def _yes(v: object) -> bool:
    return str(v) == "True"


def plot(rows: list[dict], quick: bool = False) -> list[Path]:
    """Contender time / tuned time per matrix (1 and 2 threads); the cost of tuning."""
    out: list[Path] = []
    note = machine_note(list[Mapping[str, object]](rows))
    note = f"; {note}" if note else ""
    cells = _cells(rows)
    for threads in THREADS:
        groups = {m: {LABELS[p]: _t(c[p]) / _t(c["spf_tuned"]) for p in PEERS if p in c}
                  for (m, t), c in cells.items() if t == threads and "spf_tuned" in c}
        out += bar_chart(groups, plot_path(NAME, f"vs_tuned_{threads}t", quick),
                         f"SpMV, spf.tune's layout, {threads} thread{'s' if threads > 1 else ''}"
                         f": contender time / tuned time (> 1: spf faster{note})",
                         "time / spf tuned time", log=True, reference=1.0)
    groups = {}
    for (m, t), c in cells.items():
        if "spf_tuned" in c:
            s = c["spf_tuned"]
            groups.setdefault(m, {}).update({f"first spf.tune {t}t": _f(s, "tune_s"),
                                             f"cached spf.tune {t}t": _f(s, "cached_s")})
    out += bar_chart(groups, plot_path(NAME, "tuning_time", quick),
                     f"spf.tune wall time: first call (converts, compiles, measures) and a "
                     f"sibling's (cached decision){note}", "seconds", log=True,
                     reference=CACHED_GOAL_S)
    for kernel in ("spmm64", "spmspv"):     # one chart per part, both thread counts
        groups = {f"{m} {t}t": {LABELS[p]: _t(c[p]) / _t(c["spf_tuned"])
                                for p in PEERS if p in c}
                  for (m, t), c in _cells(rows, kernel).items() if "spf_tuned" in c}
        out += bar_chart(groups, plot_path(NAME, f"{kernel}_vs_tuned", quick),
                         f"{KERNELS[kernel]}, spf.tune's layout, 1 and 2 threads: contender "
                         f"time / tuned time (> 1: spf faster{note})",
                         "time / spf tuned time", log=True, reference=1.0)
    return out


def _gm(values: list[float]) -> str:
    return f"{geomean(values):.2f}x ({len(values)})" if values else "-"


def _us(r: Mapping[str, object]) -> str:
    return f"{_t(r) * 1e6:.3g}"


def _x(r: float) -> str:
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _csr_bytes(row: Mapping[str, object]) -> float:
    """CSR's arrays (values, column indices, row pointers: 32-bit indices), x and y."""
    nnz, n, m = _f(row, "nnz"), _f(row, "rows"), _f(row, "cols")
    return 12 * nnz + 4 * (n + 1) + 8 * m + 8 * n


def _stream_goal(rows: list[dict], cells: Mapping[tuple[str, int], Any]) -> list[str]:
    """The goal line on the share of STREAM the tuned SpMV reaches on matrices whose arrays
    (the chosen layout's, x, y) leave the 32 MB L3 cache: at least OUT_OF_CACHE bytes."""
    stream = {int(r["threads"]): float(r["GBps"]) for r in rows
              if r.get("contender") == "stream_triad" and r.get("GBps")}
    out = []
    for threads in THREADS:
        shares = [(m, _f(c["spf_tuned"], "bytes") / _t(c["spf_tuned"]) / 1e9 / stream[threads])
                  for (m, t), c in cells.items() if t == threads and "spf_tuned" in c
                  and threads in stream and _f(c["spf_tuned"], "bytes") >= OUT_OF_CACHE]
        if not shares:
            continue
        ts = f"{threads} thread{'s' if threads > 1 else ''}"
        mid = float(np.median([v for _, v in shares]))
        libs = [min(_t(cells[(m, threads)][p]) for p in LIBRARIES if p in cells[(m, threads)])
                for m, _ in shares if any(p in cells[(m, threads)] for p in LIBRARIES)]
        csr = [_csr_bytes(cells[(m, threads)]["spf_tuned"]) for m, _ in shares]
        lib = float(np.median([b / t / 1e9 / stream[threads] for b, t in zip(csr, libs)])) \
            if libs and len(libs) == len(csr) else float("nan")
        out.append(f"- {ts}: tuned SpMV's bandwidth (the chosen layout's arrays, x and y "
                   f"once per call) as a share of STREAM triad ({stream[threads]:.1f} GB/s, "
                   f"same run) on the {len(shares)} matrices over {OUT_OF_CACHE / 1e6:.0f} "
                   f"MB: median {mid:.2f} (goal >= {STREAM_GOAL}: {_met(mid >= STREAM_GOAL)}); "
                   + ", ".join(f"{m} {v:.2f}" for m, v in shares)
                   + (f". The fastest library on each of them, counted with CSR's arrays, "
                      f"reaches a median {lib:.2f}, so no contender gets near the goal; "
                      f"likely all are bound by the scattered reads of x (on the random "
                      f"matrices a whole cache line for each double), which these bytes do "
                      f"not count"
                      if lib == lib else "") + ".")
    return out


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    cells = _cells(rows)
    quick = any(str(r.get("scale")) == "quick" for r in rows)
    skipped = [f"{r['contender']} ({str(r['status']).removeprefix('skipped: ')})" for r in rows
               if str(r["status"]).startswith("skipped") and _kernel(r) == "spmv"]
    dates = sorted({str(r["date"]) for r in rows if r.get("date")})
    tried = sorted({str(r["tried"]) for r in rows if r.get("tried")})
    out = [("**Quick mode: small matrices, noisy numbers.** " if quick else "")
           + '`spf.tune("y(i) = A(i,j) * x(j)", A=A, x=x, threads=t)` (candidates: '
           + ", ".join(tried or ["-"]) + ") on the SpMV suite's matrices, its kernel on "
           "the converted operands against spf's "
           "plain CSR kernel, MKL's inspector-executor (`mkl_sparse_d_mv` after "
           "`mkl_sparse_set_mv_hint` + `mkl_sparse_optimize`), scipy's `A @ x` "
           "(single-threaded: 1-thread rows only) and SuiteSparse:GraphBLAS (`mxv`), each "
           "with its input prebuilt in its own format, the same thread count for every "
           "contender, median of repeated calls after a warm-up, each contender's calls back "
           "to back after a pause; every y checked against scipy's (`assert_allclose`) "
           "before and after timing. `spf tuned` calls the tuned kernel's C on argument "
           "structs built once (as the other experiments time spf); `Python call` is "
           "`tuned.kernel(**tuned.operands)`. Ratio = contender time / spf tuned time "
           "(> 1: spf faster). Measured " + (", ".join(dates) or "-") + "."
           + (f" Not measured: {'; '.join(skipped)}." if skipped else ""), ""]
    out += ["| matrix | nnz | threads | chosen layout | spf tuned (us) | Python call | "
            "spf CSR | MKL IE | scipy | GraphBLAS | vs fastest library | conversion (ms) | "
            "pays off after (calls) | first spf.tune (s, compiles) | "
            "cached: decision / call (ms) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[tuple[int, str], list[float]] = {}
    mkl_call: dict[int, list[float]] = {}      # MKL time / the tuned kernel's Python call
    fastest: dict[int, list[tuple[str, float, str]]] = {}
    cached: list[tuple[str, int, float, float, bool, float]] = []
    for (matrix, threads), c in cells.items():
        if "spf_tuned" not in c:
            continue
        s = c["spf_tuned"]
        line = [matrix, str(s["nnz"]), str(threads), f"`{s['layout']}`", _us(s)]
        for p in ("spf_tuned_call", "spf_csr", "mkl_csr_opt", "scipy_csr", "graphblas"):
            if p in c:
                r = _t(c[p]) / _t(s)
                ratios.setdefault((threads, p), []).append(r)
                line.append(f"{_us(c[p])} ({_x(r)})")
            else:
                line.append("-")
        if "mkl_csr_opt" in c and "spf_tuned_call" in c:
            mkl_call.setdefault(threads, []).append(_t(c["mkl_csr_opt"])
                                                    / _t(c["spf_tuned_call"]))
        libs = [(p, _t(c[p]) / _t(s)) for p in LIBRARIES if p in c]
        if libs:
            best, r = min(libs, key=lambda pr: pr[1])
            fastest.setdefault(threads, []).append((matrix, r, best))
            line.append(f"{_x(r)} ({LABELS[best]})")
        else:
            line.append("-")
        even = _f(s, "break_even_calls")
        conv = _f(s, "convert_s")
        here = conv / (_t(c["spf_csr"]) - _t(s)) if "spf_csr" in c and conv > 0 \
            and _t(c["spf_csr"]) > _t(s) else float("nan")
        line += [f"{conv * 1e3:.3g}", (f"{even:.3g}" if even == even else "-")
                 + (f" ({here:.3g})" if here == here else ""),
                 f"{_f(s, 'tune_s'):.2f} ({s['tune_compiles']})"
                 + (" cached!" if _yes(s.get("first_cached")) else ""),
                 f"{_f(s, 'cached_decision_s') * 1e3:.3g} / {_f(s, 'cached_s') * 1e3:.3g}"
                 + ("" if _yes(s.get("cached_hit")) else " (not cached)")]
        cached.append((matrix, threads, _f(s, "cached_s"),
                       _f(s, "cached_build_s") + _f(s, "cached_convert_s"),
                       _yes(s.get("cached_hit")), _f(s, "cached_decision_s")))
        out.append("| " + " | ".join(line) + " |")
    out += ["", "`pays off after`: the calls after which the chosen layout's conversion is "
            "repaid by its faster kernel against CSR, from `tuned.report` (`-`: CSR itself, "
            "not faster, or CSR not among the candidates spf.tune measured), in parentheses "
            "from this experiment's spf CSR and spf tuned times; "
            "`first spf.tune`: its wall time and the shared libraries it compiled (0 when "
            "the compile cache already held them); `cached`: spf.tune on a sibling "
            "(another matrix of the same family), its decision from the cache: the time "
            "spf.tune reports as deciding (`Tuned.decision_s`: signature, lookup, kernel) and "
            "the whole call (with the sibling's conversion).", "",
            "Geometric means of contender time / spf tuned time (number of matrices):", "",
            "| threads | Python call | spf CSR | MKL IE | scipy | GraphBLAS |",
            "|---|---|---|---|---|---|"]
    for threads in THREADS:
        out.append(f"| {threads} | " + " | ".join(
            _gm(ratios.get((threads, p), [])) for p in ("spf_tuned_call", "spf_csr",
                                                        "mkl_csr_opt", "scipy_csr",
                                                        "graphblas")) + " |")
    out += ["", "**Goals (issue 41)**", ""]
    for threads in THREADS:
        mk = ratios.get((threads, "mkl_csr_opt"), [])
        mk_call = mkl_call.get(threads, [])
        losses = [(m, r, b) for m, r, b in fastest.get(threads, []) if r < LIBRARY_GOAL]
        n = len(fastest.get(threads, []))
        ts = f"{threads} thread{'s' if threads > 1 else ''}"
        if mk:
            out.append(f"- {ts}: tuned SpMV vs MKL's inspector-executor, geometric mean "
                       f"{geomean(mk):.2f}x (goal >= {MKL_GOAL}x): "
                       f"{_met(geomean(mk) >= MKL_GOAL)}"
                       + (f"; the tuned kernel called from Python "
                          f"(`tuned.kernel(**tuned.operands)`) {geomean(mk_call):.2f}x"
                          if mk_call else "")
                       + ".")
        else:
            out.append(f"- {ts}: tuned SpMV vs MKL: not measured (MKL not installed).")
        out.append(f"- {ts}: at least the fastest library (MKL, scipy on 1 thread, "
                   f"GraphBLAS) on every matrix: {n - len(losses)} of {n} "
                   f"({_met(not losses and n > 0)})"
                   + ("; slower on " + ", ".join(f"{m} ({_x(r)} {LABELS[b]})"
                                                  for m, r, b in losses) if losses else "")
                   + ".")
    out += _stream_goal(rows, cells)
    if cached:
        worst = max(cached, key=lambda c: c[5])
        misses = [f"{m} {t}t" for m, t, _, _, hit, _ in cached if not hit]
        under = sum(d < CACHED_GOAL_S and hit for _, _, _, _, hit, d in cached)
        out.append(f"- A cached decision reused in under {CACHED_GOAL_S * 1e3:.0f} ms "
                   f"(`Tuned.decision_s`: the signature, the lookup and the kernel; the "
                   f"sibling's conversion is not part of the decision): {under} of "
                   f"{len(cached)} calls ({_met(under == len(cached))}); the slowest "
                   f"{worst[5] * 1e3:.3g} ms ({worst[0]}, {worst[1]} "
                   f"thread{'s' if worst[1] > 1 else ''}); the whole call, with the "
                   f"conversion, {min(c[2] for c in cached) * 1e3:.3g}-"
                   f"{max(c[2] for c in cached) * 1e3:.3g} ms"
                   + (f"; the decision was not reused (another signature, or its layout "
                      f"could not hold the sibling) on {', '.join(misses)}" if misses else "")
                   + ".")
    out += ["", "Candidates measured by the first spf.tune (kernel time in us, fastest "
            "first):", "", "| matrix | threads | measured | pruned | not measured | kernels |",
            "|---|---|---|---|---|---|"]
    for (matrix, threads), c in cells.items():
        if "spf_tuned" in c:
            s = c["spf_tuned"]
            out.append(f"| {matrix} | {threads} | {s['measured']} | {s['pruned']} | "
                       f"{s['not_measured']} | {s['candidates']} |")
    out += _describe_part(rows, "spmm64") + _describe_part(rows, "spmspv")
    return "\n".join(out)


PART_PEERS = {"spmm64": ("spf_tuned_call", "spf_csr", "mkl_csr_opt", "scipy_csr", "graphblas"),
              "spmspv": ("spf_tuned_call", "spf_csr", "scipy_csr", "graphblas")}
PEER_HEADS = {"spf_tuned_call": "Python call", "spf_csr": "spf CSR", "mkl_csr_opt": "MKL IE",
              "scipy_csr": "scipy", "graphblas": "GraphBLAS"}


def _describe_part(rows: list[dict], kernel: str) -> list[str]:
    """The SpMM or SpMSpV part: per matrix and thread count the tuned kernel's time and each
    contender's ratio, their geometric means, and (SpMM) the goal against MKL."""
    cells = _cells(rows, kernel)
    if not cells:
        return []
    mine = [r for r in rows if _kernel(r) == kernel]
    peers = PART_PEERS[kernel]
    scales = sorted({str(r["scale"]) for r in mine if r.get("scale")})
    matrices_ = list(dict.fromkeys(m for m, _ in cells))
    skipped = [f"{r['contender']} ({str(r['status']).removeprefix('skipped: ')})" for r in mine
               if str(r["status"]).startswith("skipped")       # MKL in SpMSpV: said below
               and not (kernel == "spmspv" and r["contender"] == "mkl_csr_opt")]
    on = (f"on the {', '.join(scales)} suite's {', '.join(matrices_)} "
          f"({len(matrices_)} matrices)")
    if kernel == "spmm64":
        unit, scale_t = "ms", 1e3
        out = ["", f"### SpMM, {SPMM_COLUMNS} dense columns", "",
               f'`spf.tune("{SPMM}", A=A, B=B, threads=t)`, B a dense n x {SPMM_COLUMNS} '
               "numpy array (row-major; spf.tune tunes the one sparse operand, A: B and C "
               f"stay dense row-major), {on}: its kernel against spf's plain CSR kernel, "
               "MKL's inspector-executor (`mkl_sparse_d_mm` after `mkl_sparse_set_mm_hint` "
               f"for {SPMM_COLUMNS} row-major columns + `mkl_sparse_optimize`), scipy's "
               "`A @ B` (1 thread) and GraphBLAS (`mxm` under `plus_times`, B a full "
               "Matrix, into a preallocated C), timed and checked as above (every C against "
               "scipy's)."]
    else:
        unit, scale_t = "us", 1e6
        out = ["", f"### SpMSpV, x a sparse vector ({X_DENSITY:.0%} of the columns)", "",
               f'`spf.tune("{SPMSPV}", A=A, x=x, layouts={{"x": "SV"}}, threads=t)`, x an '
               f"spf Tensor in SV storing {X_DENSITY:.0%} of A's columns (positions and "
               f"values from seed {X_SEED}), y dense, {on}: its kernel against spf's CSR "
               "kernel with x in SV (`find` left at `auto`), scipy's `A @ x` with A in CSC "
               "and x an m x 1 CSC matrix (its SpGEMM reading only x's columns of A, "
               "returning a sparse y; 1 thread) and GraphBLAS (`mxv` under `plus_times`, A "
               "held by column, x a sparse Vector, into a preallocated y): both libraries in "
               "their best format for a sparse x; timed and checked as above. MKL is not a "
               "contender: it has no sparse matrix times sparse vector product "
               "(`mkl_sparse_d_mv` takes a dense x). The decision cache is emptied before "
               "this part, so that its first spf.tune measures."]
    if skipped:
        out[-1] += f" Not measured: {'; '.join(skipped)}."
    heads = [PEER_HEADS[p] for p in peers]
    out += ["", f"| matrix | nnz | threads | chosen layout | spf tuned ({unit}) | "
            + " | ".join(heads) + " | vs fastest library | conversion (ms) | "
            "pays off after (calls) | spf.tune (s, compiles) |",
            "|---|---|---|---|---|" + "---|" * len(heads) + "---|---|---|---|"]
    ratios: dict[tuple[int, str], list[float]] = {}
    fastest: list[tuple[str, int, float, str]] = []
    slower: list[str] = []          # where spf's own CSR kernel beat the tuned one
    for (matrix, threads), c in cells.items():
        if "spf_tuned" not in c:
            continue
        s = c["spf_tuned"]
        chosen = f"`{s['layout']}`" + (" (1 thread)" if threads > 1 and s["parallel"] == "no"
                                       else "")
        if "spf_csr" in c and _t(c["spf_csr"]) < _t(s):
            tried = {item.rsplit(" ", 1)[0] for item in str(s.get("candidates", "")).split("; ")}
            slower.append(f"{matrix} {threads}t ({_x(_t(c['spf_csr']) / _t(s))}, {chosen}"
                          f"; CSR {'among' if 'CSR' in tried else 'not among'} the layouts "
                          "spf.tune measured)")
        line = [matrix, str(s["nnz"]), str(threads), chosen, f"{_t(s) * scale_t:.3g}"]
        for p in peers:
            if p in c:
                r = _t(c[p]) / _t(s)
                ratios.setdefault((threads, p), []).append(r)
                line.append(f"{_t(c[p]) * scale_t:.3g} ({_x(r)})")
            else:
                line.append("-")
        libs = [(p, _t(c[p]) / _t(s)) for p in LIBRARIES if p in c]
        if libs:
            best, r = min(libs, key=lambda pr: pr[1])
            fastest.append((matrix, threads, r, best))
            line.append(f"{_x(r)} ({LABELS[best]})")
        else:
            line.append("-")
        even, conv = _f(s, "break_even_calls"), _f(s, "convert_s")
        line += [f"{conv * 1e3:.3g}" if conv == conv else "-",
                 f"{even:.3g}" if even == even else "-",
                 f"{_f(s, 'tune_s'):.2f} ({s['tune_compiles']})"
                 + (" cached!" if _yes(s.get("first_cached")) else "")]
        out.append("| " + " | ".join(line) + " |")
    out += ["", f"Times in {unit}, in parentheses contender time / spf tuned time (> 1: spf "
            "faster); `pays off after`: the calls after which the chosen layout's conversion "
            "is repaid against CSR, from `tuned.report`; `spf.tune`: its wall time and the "
            "shared libraries it compiled. Geometric means (number of matrices):", "",
            "| threads | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for threads in THREADS:
        out.append(f"| {threads} | " + " | ".join(
            _gm(ratios.get((threads, p), [])) for p in peers) + " |")
    losses = [f"{m} {t}t ({_x(r)} {LABELS[b]})" for m, t, r, b in fastest if r < LIBRARY_GOAL]
    out += ["", f"The tuned kernel is at least as fast as the fastest library on "
            f"{len(fastest) - len(losses)} of {len(fastest)} (matrix, threads) cells"
            + (f"; slower on {', '.join(losses)}" if losses else "") + ". "
            + ("Slower than spf's own CSR kernel on " + ", ".join(slower) + "."
               if slower else "Never slower than spf's own CSR kernel.")]
    if kernel == "spmm64":
        mk = {t: ratios.get((t, "mkl_csr_opt"), []) for t in THREADS}
        goal = f"Tuned SpMM ({SPMM_COLUMNS} columns): at least {MKL_SPMM_GOAL:.1f}x MKL " \
               "geometric mean"
        if any(mk.values()):
            ok = all(geomean(v) >= MKL_SPMM_GOAL for v in mk.values() if v)
            out += ["", "**Goal**", "",
                    f"- {goal}: " + ", ".join(
                        f"{t} thread{'s' if t > 1 else ''} {geomean(v):.2f}x ({len(v)})"
                        for t, v in mk.items() if v)
                    + f": {'**met**' if ok else '**not met**'}."]
        else:
            out += ["", "**Goal**", "", f"- {goal}: not measured (MKL not installed)."]
    out += ["", "Candidates measured by spf.tune (kernel time in us, fastest first):", "",
            "| matrix | threads | measured | pruned | not measured | kernels |",
            "|---|---|---|---|---|---|"]
    for (matrix, threads), c in cells.items():
        if "spf_tuned" in c:
            s = c["spf_tuned"]
            out.append(f"| {matrix} | {threads} | {s['measured']} | {s['pruned']} | "
                       f"{s['not_measured']} | {s['candidates']} |")
    return out


if __name__ == "__main__":
    os.environ.setdefault("OMP_PROC_BIND", "false")
    main()
