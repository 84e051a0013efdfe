"""``spf.tune`` (issue 41): the layout spf chooses for each matrix of the SpMV suite against
spf's plain CSR kernel, MKL's inspector-executor, scipy and SuiteSparse:GraphBLAS, on 1 and 2
threads; what tuning costs, and what a cached decision costs.

    python -m experiments.tune [--quick] [--matrix path.mtx ...] [--candidates CSR,DIA,...|default]

Per matrix of the SpMV suite (experiments/matrices.py; ``--quick``: three small ones) and
thread count t (1 and 2):

- **Tuning.** The decision cache (``spf.runtime.build.cache_dir() / "tune"``) is emptied at
  the start of a run, so the first ``spf.tune("y(i) = A(i,j) * x(j)", A=A, x=x, threads=t)``
  (default candidates: every matrix layout on the search path, its storage estimated on
  samples of the matrix, the 7 storing the fewest bytes and one option variant measured)
  estimates, converts and measures;
  its wall time is ``tune_s`` and ``tune_compiles`` counts the shared libraries it compiled
  (conversions and kernels not yet in the compile cache; 0 when an earlier run left them
  there). Then ``spf.tune`` on a *sibling*, another matrix of
  the same family (the suite's generator with another seed for the random, R-MAT, block and
  lower-triangular matrices; the same pattern with new values for the Laplacians, the banded
  matrix and ``--matrix`` files, whose structure the size fixes): ``cached_s`` is its wall
  time, ``cached_hit`` whether the decision came from the cache (``Tuned.cached``), and its
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

Every y (the tuned one, the sibling's, every contender's) is checked against scipy's
(``np.testing.assert_allclose``) before timing, and every contender's again after. Each
contender is warmed up once and timed as the median of repeated calls, each contender's calls
back to back after a pause (experiments/common.py ``time_blocked``: MKL and GraphBLAS bring
OpenMP runtimes whose idle threads would spin on the next contender's cores). Ratio =
contender time / ``spf_tuned`` time (> 1: spf faster). The goals (issue 41): tuned SpMV at
least 1.2x MKL's time in the geometric mean, at least 1.0x the fastest library on every
matrix, a cached decision reused in under 10 ms.
Full run: about 40-90 minutes on 2 cores, an estimate from the conversion times at the
medium scale (spf.tune converts every candidate twice per matrix and thread count, and some
conversions grow faster than the matrix); ``--quick``: about 20 s (25 s with a cold compile
cache).
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

NAME = "tune"
SPMV = "y(i) = A(i,j) * x(j)"
THREADS = (1, 2)
MKL_GOAL = 1.2          # tuned SpMV: at least 1.2x MKL's time, geometric mean over the suite
LIBRARY_GOAL = 1.0      # and at least the fastest library's speed on every matrix
CACHED_GOAL_S = 0.010   # a cached decision reused in under 10 ms
LIBRARIES = ("mkl_csr_opt", "scipy_csr", "graphblas")
PEERS = ("spf_csr", "mkl_csr_opt", "scipy_csr", "graphblas", "spf_tuned_call")
LABELS = {"spf_tuned": "spf tuned", "spf_tuned_call": "spf tuned (Python call)",
          "spf_csr": "spf CSR", "mkl_csr_opt": "MKL IE (optimized)",
          "scipy_csr": "scipy (1 thread)", "graphblas": "GraphBLAS"}
COLUMNS_OUT = ("scale", "matrix", "rows", "cols", "nnz", "threads", "contender", "layout",
               "parallel", "time_s", "runs", "vs_tuned", "status", "tune_s", "tune_compiles",
               "first_cached", "measured", "pruned", "not_measured", "convert_s",
               "break_even_calls", "sibling", "sibling_nnz", "cached_s", "cached_hit",
               "cached_layout", "cached_build_s", "cached_convert_s", "tried", "candidates")


@dataclass(frozen=True)
class Mode:
    scale: str
    names: tuple[str, ...] | None       # the suite's matrices (None: all of them)
    candidates: tuple[str, ...] | None  # spf.tune's candidates= (None: its default)
    target_s: float                     # timed seconds per contender and cell
    min_runs: int
    max_runs: int
    pause_s: float                      # idle time before each contender's block of calls


MODES = {"quick": Mode("quick", ("laplace2d", "rmat", "block8"), None, 0.003, 3, 20, 0.0),
         "full": Mode("full", None, None, 0.4, 9, 500, 0.3)}


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
    """The layout with its parameters and the options that are not the thread count's."""
    return layout + "".join(f" {k}={v}" for k, v in params) + "".join(
        f" {k}={v}" for k, v in options if k != "parallel")


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
    rows = tuned.report
    chosen = next(r for r in rows if r.status == "chosen")
    measured = sorted((r for r in rows if r.kernel_s is not None), key=lambda r: r.kernel_s)
    values = {"layout": _label(chosen.layout, chosen.params, chosen.options),
              "tune_s": tune_s,
              "tune_compiles": compiles, "first_cached": tuned.cached,
              "measured": len(measured),
              "pruned": sum(r.status.startswith("pruned") for r in rows),
              "not_measured": sum(r.status.startswith("not measured") for r in rows),
              "convert_s": chosen.convert_s if chosen.convert_s is not None else "",
              "break_even_calls": "" if chosen.break_even_calls is None
              else chosen.break_even_calls,
              "sibling": how, "sibling_nnz": B.nnz, "cached_s": cached_s,
              "cached_hit": second.cached,
              "cached_layout": _label(second.layouts["A"].name,
                                      tuple((second.layouts["A"].params or {}).items()),
                                      tuple(second.options.items())),
              "cached_build_s": build_s, "cached_convert_s": convert_s,
              "tried": ",".join(mode.candidates) if mode.candidates else "default",
              "candidates": "; ".join(f"{_label(r.layout, r.params, r.options)} "
                                      f"{r.kernel_s * 1e6:.3g}"
                                      for r in measured)}
    return Tuning(tuned, values)


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
    out: dict[str, Contender] = {}
    chosen = _label(tuned.layouts["A"].name, tuple((tuned.layouts["A"].params or {}).items()))
    y_tuned = np.empty(n)
    par = _parallel(tuned.kernel, threads)
    out["spf_tuned"] = Contender(prepared_call(tuned.kernel, y_tuned, **tuned.operands),
                                 lambda: y_tuned, chosen, par)
    box: dict[str, Any] = {}
    kernel, operands = tuned.kernel, dict(tuned.operands)

    def call() -> None:
        box["tuned"] = kernel(**operands)
    out["spf_tuned_call"] = Contender(call, lambda: box["tuned"], chosen, par)
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
    base = {"scale": mode.scale, "matrix": name, "rows": n, "cols": m, "nnz": A.nnz}
    rows = []
    for threads in THREADS:
        time.sleep(mode.pause_s)         # other runtimes' threads idle before spf measures
        tuning = tune(name, A, B, how, x, reference, threads, mode)
        cons = contenders(A, x, tuning.tuned, csr, threads, gb)
        for c, con in cons.items():     # checked before timing
            con.fn()
            _check(con.result(), reference, f"{c} on {name}, {threads} threads")
        times = time_blocked({c: v.fn for c, v in cons.items()}, mode.target_s,
                             mode.min_runs, mode.max_runs, mode.pause_s)
        for c, con in cons.items():     # and after (the last call's y)
            _check(con.result(), reference, f"{c} on {name}, {threads} threads")
        spf_t = times["spf_tuned"][0]
        for c, con in cons.items():
            t, runs = times[c]
            extra = tuning.values if c == "spf_tuned" else {"layout": con.layout}
            rows.append(_row(**base, **extra, threads=threads, contender=c,
                             parallel=con.parallel, time_s=t, runs=runs, vs_tuned=t / spf_t,
                             status="ok"))
        v = tuning.values
        line = "  ".join(f"{c} {times[c][0] * 1e6:.3g}" for c in cons)
        print(f"  {name:16s} {threads} thread{'s' if threads > 1 else ' '}: chose {v['layout']} "
              f"(tune {float(v['tune_s']):.2f} s, {v['tune_compiles']} compiles; sibling "
              f"{'cached' if v['cached_hit'] else 'NOT cached'} "
              f"{float(v['cached_s']) * 1e3:.3g} ms); us: {line}", flush=True)
    return rows


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
    rows: list[dict] = []
    if mkl.load() is None:
        print("  the mkl wheel is not installed: MKL skipped", flush=True)
        rows.append(_row(scale=mode.scale, contender="mkl_csr_opt",
                         status="skipped: the mkl wheel is not installed"))
    gb = graphblas()
    if gb is None:
        print("  python-graphblas is not installed: GraphBLAS skipped", flush=True)
        rows.append(_row(scale=mode.scale, contender="graphblas",
                         status="skipped: python-graphblas is not installed"))
    csr = {1: spf.Kernel(SPMV, {"A": "CSR"}, name="tune_csr").compile(),
           2: spf.Kernel(SPMV, {"A": "CSR"}, parallel=True, name="tune_csr_omp").compile()}
    inputs = list(matrices(mode.scale, args.matrix)) if args.matrix or mode.names is None \
        else list(suite(mode.scale, list(mode.names)))
    for k, (name, A) in enumerate(progress(inputs, NAME, args.quick), 1):
        print(f"[{k}/{len(inputs)}] {name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros",
              flush=True)
        rows += run_matrix(name, A, csr, mode, gb, not args.matrix)
    print_table(_ok(rows), ["matrix", "threads", "contender", "layout", "time_s", "vs_tuned"])
    print("wrote", write_csv(NAME, rows, args.quick))
    for p in plot(rows, args.quick):
        print("wrote", p)
    return rows


# --- plots and RESULTS.md ----------------------------------------------------------------------
def _ok(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok" and r["time_s"] not in ("", None)]


def _cells(rows: list[dict]) -> dict[tuple[str, int], dict[str, dict]]:
    """(matrix, threads) -> contender -> row, in the order measured."""
    cells: dict[tuple[str, int], dict[str, dict]] = {}
    for r in _ok(rows):
        cells.setdefault((str(r["matrix"]), int(r["threads"])), {})[str(r["contender"])] = r
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
    return out


def _gm(values: list[float]) -> str:
    return f"{geomean(values):.2f}x ({len(values)})" if values else "-"


def _us(r: Mapping[str, object]) -> str:
    return f"{_t(r) * 1e6:.3g}"


def _x(r: float) -> str:
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    cells = _cells(rows)
    quick = any(str(r.get("scale")) == "quick" for r in rows)
    skipped = [f"{r['contender']} ({str(r['status']).removeprefix('skipped: ')})" for r in rows
               if str(r["status"]).startswith("skipped")]
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
            "pays off after (calls) | first spf.tune (s, compiles) | cached spf.tune (ms) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[tuple[int, str], list[float]] = {}
    mkl_call: dict[int, list[float]] = {}      # MKL time / the tuned kernel's Python call
    fastest: dict[int, list[tuple[str, float, str]]] = {}
    cached: list[tuple[str, int, float, float, bool]] = []
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
                 f"{_f(s, 'cached_s') * 1e3:.3g}"
                 + ("" if _yes(s.get("cached_hit")) else " (not cached)")]
        cached.append((matrix, threads, _f(s, "cached_s"),
                       _f(s, "cached_build_s") + _f(s, "cached_convert_s"),
                       _yes(s.get("cached_hit"))))
        out.append("| " + " | ".join(line) + " |")
    out += ["", "`pays off after`: the calls after which the chosen layout's conversion is "
            "repaid by its faster kernel against CSR, from `tuned.report` (`-`: CSR itself, "
            "not faster, or CSR not among the candidates spf.tune measured), in parentheses "
            "from this experiment's spf CSR and spf tuned times; "
            "`first spf.tune`: its wall time and the shared libraries it compiled (0 when "
            "the compile cache already held them); `cached spf.tune`: spf.tune on a sibling "
            "(another matrix of the same family), its decision from the cache.", "",
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
    if cached:
        worst = max(cached, key=lambda c: c[2])
        misses = [f"{m} {t}t" for m, t, _, _, hit in cached if not hit]
        under = sum(s < CACHED_GOAL_S and hit for _, _, s, _, hit in cached)
        rest = [s - parts for _, _, s, parts, hit in cached if hit]
        out.append(f"- A cached decision reused in under {CACHED_GOAL_S * 1e3:.0f} ms: "
                   f"{under} of {len(cached)} calls ({_met(under == len(cached))}); the "
                   f"slowest {worst[2] * 1e3:.3g} ms ({worst[0]}, {worst[1]} "
                   f"thread{'s' if worst[1] > 1 else ''})"
                   + (f"; without building the kernel (`spf.Kernel(...).compile()`: code "
                      f"generation, the library from the compile cache) and converting the "
                      f"sibling, the rest of the call takes {np.median(rest) * 1e3:.2g} ms "
                      f"(median)" if rest else "")
                   + (f"; the decision was not reused (another signature) on "
                      f"{', '.join(misses)}" if misses else "") + ".")
    out += ["", "Candidates measured by the first spf.tune (kernel time in us, fastest "
            "first):", "", "| matrix | threads | measured | pruned | not measured | kernels |",
            "|---|---|---|---|---|---|"]
    for (matrix, threads), c in cells.items():
        if "spf_tuned" in c:
            s = c["spf_tuned"]
            out.append(f"| {matrix} | {threads} | {s['measured']} | {s['pruned']} | "
                       f"{s['not_measured']} | {s['candidates']} |")
    return "\n".join(out)


if __name__ == "__main__":
    os.environ.setdefault("OMP_PROC_BIND", "false")
    main()
