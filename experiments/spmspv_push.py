"""SpMSpV push: y = A x with A in CSC (column-major) and x a sparse vector, against scipy,
GraphBLAS and the column-wise saxpy written in C; spf's pull kernel (A in CSR) on the same
matrix shows where each direction wins.

    python -m experiments.spmspv_push [--quick] [--matrix path.mtx ...] [--densities 0.01,0.1]

spf's kernel is ``spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSC", "x": "SV"})`` with its
default loop order: A's column level is located from j, which x's index array gives, so x's
entries drive the loop over columns and each matched column is scattered into y (push; the
report says why, see spf/middle/order.py).  Contenders, single-threaded, inputs prebuilt in each
one's native format:

- ``spf_push``: that kernel, the C function called through ctypes on argument structs built
  once (it zeroes y itself).
- ``spf_pull``: ``{"A": "CSR", "x": "SV"}``, ``find="auto"``: rows outermost, a find of each
  entry's column in x (the SpMSpV experiment's kernel), on the same matrix in CSR.
- ``hand_c``: experiments/baselines/spmspv_push.c (zero y, scatter x(j) * A(:, j) for each
  nonzero of x), compiled with spf's flags and called the same way.
- ``scipy``: ``A_csc @ x`` with x an n x 1 CSC matrix (a sparse result).
- ``graphblas``: SuiteSparse:GraphBLAS, A held by column, ``A.mxv(x, plus_times).new()`` with
  x a sparse Vector, one thread (a sparse result).

Median of >= 5 runs after a warm-up, contenders interleaved in rounds; every output is checked
against scipy's ``A @ x_dense``.  Ratios: contender time / spf_push time (> 1: spf faster).
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

from .common import (
    experiment_parser,
    geomean,
    graphblas,
    line_chart,
    machine_note,
    plot_path,
    prepared_call,
    print_table,
    progress,
    time_interleaved,
    write_csv,
)
from .matrices import matrices
from .spmspv import DENSITIES, sparse_vector

EXPR = "y(i) = A(i,j) * x(j)"
CONTENDERS = ("spf_push", "spf_pull", "hand_c", "scipy", "graphblas")
BASELINE = Path(__file__).resolve().parent / "baselines" / "spmspv_push.c"
MODES = {"quick": (("quick",), 0.005, 5, 50), "full": (("medium", "full"), 0.2, 5, 300)}


def hand_c():
    fn = load_library(str(build_library(BASELINE.read_text()))).spmspv_push
    fn.restype = None
    fn.argtypes = [ctypes.c_int32] + [ctypes.c_void_p] * 3 + [ctypes.c_int32] + \
        [ctypes.c_void_p] * 3
    return fn


def build_kernels() -> dict:
    push = spf.Kernel(EXPR, {"A": "CSC", "x": "SV"}, name="spmspv_push")
    if push.order[0] != "x_p":
        raise RuntimeError(f"the CSC kernel does not run x's entries outermost: {push.order}")
    pull = spf.Kernel(EXPR, {"A": "CSR", "x": "SV"}, name="spmspv_pull")
    return {"spf_push": push.compile(), "spf_pull": pull.compile()}


def _tensor(layout: str, m) -> spf.Tensor:
    ptr, idx = ("colPtr", "rowIdx") if layout == "CSC" else ("rowPtr", "colIdx")
    return spf.Tensor.from_arrays(layout, m.shape, {
        "numRows": m.shape[0], "numCols": m.shape[1], ptr: m.indptr, idx: m.indices,
        "data": m.data})


def run_matrix(scale: str, name: str, A_csr: sp.csr_matrix, densities, kernels: dict, fn,
               mode) -> list[dict]:
    _, target_s, min_runs, max_runs = mode
    n_rows, n_cols = A_csr.shape
    A_csc = sp.csc_matrix(A_csr)
    A_csc.sort_indices()
    A_csc.indices, A_csc.indptr = A_csc.indices.astype(np.int32), A_csc.indptr.astype(np.int32)
    t_csc, t_csr = _tensor("CSC", A_csc), _tensor("CSR", A_csr)
    gb = graphblas(1)
    gA = gb.io.from_scipy_sparse(A_csc) if gb is not None else None
    rows = []
    for di, density in enumerate(densities):
        x_idx, x_val = sparse_vector(n_cols, density, seed=1000 * di + len(name) + n_cols)
        x = spf.Tensor.from_arrays("SV", (n_cols,), {"size": n_cols, "len": len(x_idx),
                                                       "idx": x_idx, "val": x_val})
        x_dense = np.zeros(n_cols)
        x_dense[x_idx] = x_val
        reference = A_csr @ x_dense
        x_col = sp.csc_matrix((x_val, x_idx, np.array([0, len(x_idx)], np.int32)),
                              shape=(n_cols, 1))
        ys = {c: np.full(n_rows, np.nan) for c in ("spf_push", "spf_pull", "hand_c")}
        hand_args = (n_rows, A_csc.indptr.ctypes.data, A_csc.indices.ctypes.data,
                     A_csc.data.ctypes.data, len(x_idx), x_idx.ctypes.data,
                     x_val.ctypes.data, ys["hand_c"].ctypes.data)
        result: dict = {}
        calls = {"spf_push": prepared_call(kernels["spf_push"], ys["spf_push"], A=t_csc, x=x),
                 "spf_pull": prepared_call(kernels["spf_pull"], ys["spf_pull"], A=t_csr, x=x),
                 "hand_c": lambda: fn(*hand_args),
                 "scipy": lambda: result.__setitem__("scipy", A_csc @ x_col)}
        outputs = {c: (lambda c=c: ys[c]) for c in ys}
        outputs["scipy"] = lambda: result["scipy"].toarray().ravel()
        if gA is not None:
            gx = gb.Vector.from_coo(x_idx, x_val, size=n_cols)
            calls["graphblas"] = lambda: result.__setitem__(
                "graphblas", gA.mxv(gx, gb.semiring.plus_times).new())
            outputs["graphblas"] = lambda: result["graphblas"].to_dense(fill_value=0.0)
        timed = time_interleaved(calls, target_s, min_runs, max_runs)
        for c in timed:
            np.testing.assert_allclose(outputs[c](), reference, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{c} on {name}, x density {density}")
        base = {"scale": scale, "matrix": name, "rows": n_rows, "nnz": A_csr.nnz,
                "x_density": density, "x_nnz": len(x_idx),
                "loadavg": round(os.getloadavg()[0], 2)}
        for c in CONTENDERS:
            if c not in timed:
                rows.append({**base, "contender": c, "median_s": "", "runs": 0,
                             "ratio_vs_spf": "", "status": "skipped: not installed"})
                continue
            median, runs = timed[c]
            rows.append({**base, "contender": c, "median_s": median, "runs": runs,
                         "ratio_vs_spf": median / timed["spf_push"][0], "status": "ok"})
        print(f"  {scale:6s} {name:18s} x density {density:<6g} " + "  ".join(
            f"{c}={timed[c][0] * 1e3:.3g}ms" for c in CONTENDERS if c in timed), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = experiment_parser(__doc__)
    parser.add_argument("--densities", default=",".join(str(d) for d in DENSITIES),
                        help="comma-separated densities of x")
    args = parser.parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    densities = [float(d) for d in args.densities.split(",") if d.strip()]
    t_start = time.perf_counter()
    print(f"compiling spf's kernels and the C baseline ({' '.join(compile_flags())})", flush=True)
    kernels, fn = build_kernels(), hand_c()
    rows: list[dict] = []
    for scale in (("user",) if args.matrix else mode[0]):
        for name, A in progress(list(matrices(scale, args.matrix or None)),
                                f"spmspv_push {scale}", args.quick):
            print(f"{scale} {name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros "
                  f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
            rows.extend(run_matrix(scale, name, A, densities, kernels, fn, mode))
    print_table([r for r in rows if r["median_s"] != ""],
                ["scale", "matrix", "x_density", "contender", "median_s", "ratio_vs_spf"])
    path = write_csv("spmspv_push_user" if args.matrix else "spmspv_push", rows,
                     args.quick or bool(args.matrix))
    print("wrote", path)
    if not args.matrix:
        plot(rows, args.quick)
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return rows


# --- reporting -------------------------------------------------------------------------------
def ratios(rows: list[dict], contender: str, density: float | None = None,
           scale: str | None = None) -> list[float]:
    """contender time / spf_push time over the cells where both ran."""
    return [float(r["ratio_vs_spf"]) for r in rows if r["contender"] == contender
            and r.get("ratio_vs_spf") not in ("", None)
            and (density is None or float(r["x_density"]) == density)
            and (scale is None or r["scale"] == scale)]


def _densities(rows: list[dict]) -> list[float]:
    return sorted({float(r["x_density"]) for r in rows})


def plot(rows: list[dict], quick: bool = False) -> list:
    series = {c: [(d, geomean(s)) for d in _densities(rows) if (s := ratios(rows, c, d))]
              for c in CONTENDERS if c != "spf_push"}
    return line_chart({c: pts for c, pts in series.items() if pts},
                      plot_path("spmspv_push", "speedup", quick),
                      f"SpMSpV push (A in CSC): contender time / spf time\n(geomean over "
                      f"the suite; > 1: spf faster; {machine_note(rows)})", "density of x",
                      "speedup of spf push", logx=True, logy=True,
                      reference=1.0)


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    others = [c for c in CONTENDERS if c != "spf_push"]
    lines = [__doc__.split("\n\n", 2)[2].strip(), "",
             "Geometric mean of contender time / spf_push time over the matrices (> 1: spf's "
             "push faster):", "",
             "| scale | x density | " + " | ".join(others) + " |",
             "|---|---|" + "---|" * len(others)]
    for scale in dict.fromkeys(r["scale"] for r in rows):
        for d in _densities(rows):
            lines.append(f"| {scale} | {d:g} | " + " | ".join(
                f"{geomean(s):.2f}" if (s := ratios(rows, c, d, scale)) else "-"
                for c in others) + " |")
    pull = {d: geomean(s) for d in _densities(rows) if (s := ratios(rows, "spf_pull", d))}
    if pull:
        wins = [f"{d:g}" for d, g in pull.items() if g < 1.0]
        lines += ["", "Pull (A in CSR) against push: " + ", ".join(
            f"{g:.2f}x at density {d:g}" for d, g in pull.items()) + " (time of pull / time "
            "of push). " + (f"Pull is faster at density {', '.join(wins)}." if wins else
                            "Push is faster at every density measured.")]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
