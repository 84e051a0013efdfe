"""Parallel speedup (issue 4): generated kernels with parallel=True on 2 threads vs the same
kernel on 1 thread — CSR SpMV over the matrix suite and TTM mode-1 (R = 16) on CSF over the
tensor suite.  scipy (single-threaded) is timed for reference.

    python -m experiments.parallel [--quick] [--matrix path.mtx] [--tensor path.tns]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import spf

from .common import prepared_call, print_table, time_interleaved, write_csv
from .matrices import matrices
from .tensors import load_frostt, suite

R = 16
MODES = {"quick": ("quick", "quick", 0.005, 3, 20), "full": ("full", "full", 0.5, 5, 200)}


def _threads_rows(label: str, name: str, size: dict, compiled, run, reference, out,
                  extra: dict, mode) -> list[dict]:
    _, _, target_s, min_runs, max_runs = mode
    times = {}
    for threads in (1, 2):
        compiled.set_num_threads(threads)
        out[...] = np.nan
        times[threads] = time_interleaved({"spf": run}, target_s, min_runs, max_runs)["spf"]
        np.testing.assert_allclose(out, reference, rtol=1e-9, atol=1e-9,
                                   err_msg=f"{label} on {name}, {threads} threads")
    row = {"kernel": label, "input": name, **size,
           "t1_s": times[1][0], "t2_s": times[2][0], "speedup_2_threads": times[1][0] / times[2][0],
           "runs": times[1][1], **extra}
    print(f"  {label:10s} {name:18s} 1 thread {row['t1_s'] * 1e3:8.3f} ms   2 threads "
          f"{row['t2_s'] * 1e3:8.3f} ms   speedup {row['speedup_2_threads']:.2f}x", flush=True)
    return [row]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs (seconds)")
    parser.add_argument("--matrix", action="append", help="a Matrix Market file (repeatable)")
    parser.add_argument("--tensor", action="append", help="a FROSTT .tns file (repeatable)")
    args = parser.parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    rows: list[dict] = []

    spmv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, parallel=True,
                      name="spmv_parallel").compile()
    for name, A in matrices(mode[0], args.matrix):
        At = spf.Tensor.from_arrays("CSR", A.shape, {"numRows": A.shape[0], "numCols": A.shape[1],
                                                     "rowPtr": A.indptr, "colIdx": A.indices,
                                                     "data": A.data})
        x = np.random.default_rng(1).random(A.shape[1])
        y = np.empty(A.shape[0])
        run = prepared_call(spmv, y, A=At, x=x)
        ref = A @ x
        scipy_t = time_interleaved({"scipy": lambda: A @ x}, mode[2], mode[3], mode[4])["scipy"][0]
        rows += _threads_rows("SpMV(CSR)", name, {"rows": A.shape[0], "nnz": A.nnz}, spmv, run,
                              ref, y, {"scipy_s": scipy_t}, mode)

    ttm = spf.Kernel("C(i,j,l) = A(i,j,k) * B(k,l)", {"A": "CSF"}, parallel=True,
                     name="ttm_parallel").compile()
    ttm_shared = spf.Kernel("C(i,j,l) = A(i,j,k) * B(k,l)", {"A": "CSF", "C": "CSF_CCD"},
                            share={"C": "A"}, parallel=True, name="ttm_shared").compile()
    tensors = list(suite(mode[1])) + [load_frostt(p) for p in (args.tensor or [])]
    for name, shape, coords, vals in tensors:
        At = spf.Tensor.from_coords("CSF", shape, tuple(coords), vals)
        B = np.random.default_rng(2).random((shape[2], R))
        C = np.empty((shape[0], shape[1], R))
        run = prepared_call(ttm, C, A=At, B=B)
        ref = np.zeros_like(C)
        np.add.at(ref, (coords[0], coords[1]), vals[:, None] * B[coords[2]])
        rows += _threads_rows("TTM(CSF)", name, {"rows": shape[0], "nnz": len(vals)}, ttm, run,
                              ref, C, {"scipy_s": ""}, mode)
        # the paper's form (Table 6): the output shares A's (i, j) fibres, last level dense
        Cs = ttm_shared.allocate_output(A=At, B=B)
        run = prepared_call(ttm_shared, Cs, A=At, B=B)
        fibres = Cs["ptr1"][-1]
        view = Cs.fields["data"].reshape(fibres, R)
        ij = np.repeat(np.arange(Cs["n0"]), np.diff(Cs["ptr1"]))
        ref_shared = ref[Cs["idx0"][ij], Cs["idx1"]]
        rows += _threads_rows("TTM(CSF->CSF_CCD)", name, {"rows": shape[0], "nnz": len(vals)},
                              ttm_shared, run, ref_shared, view, {"scipy_s": ""}, mode)
    print_table(rows, ["kernel", "input", "nnz", "t1_s", "t2_s", "speedup_2_threads"])
    print("wrote", write_csv("parallel", rows, args.quick))
    return rows


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    import math
    lines = ["Generated kernels with `parallel=True` (OpenMP, `schedule(dynamic,32)` on the "
             "outermost loop free of carried dependences: CSR rows, CSF root fibres; "
             "TTM with a dense I x J x 16 output and with the output sharing A's fibres, "
             "`share={\"C\": \"A\"}`, as in the paper's Table 6), "
             "timed on 2 threads against the same compiled kernel on 1 thread "
             "(`set_num_threads`), median of repeated calls on prebuilt arguments, outputs "
             "checked against numpy/scipy. Issue 4 target: >= 1.7x for the compute-heavy TTM.",
             "", "| kernel | input | nnz | 1 thread (ms) | 2 threads (ms) | speedup | "
                 "scipy 1 thread (ms) |", "|---|---|---|---|---|---|---|"]
    by_kernel: dict[str, list[float]] = {}
    for r in rows:
        sp_ = float(r["speedup_2_threads"])
        by_kernel.setdefault(r["kernel"], []).append(sp_)
        scipy_ms = f"{float(r['scipy_s']) * 1e3:.3f}" if r["scipy_s"] else "-"
        lines.append(f"| {r['kernel']} | {r['input']} | {r['nnz']} | "
                     f"{float(r['t1_s']) * 1e3:.3f} | {float(r['t2_s']) * 1e3:.3f} | "
                     f"{sp_:.2f}x | {scipy_ms} |")
    lines.append("")
    for kernel, values in by_kernel.items():
        gm = math.exp(sum(math.log(v) for v in values) / len(values))
        lines.append(f"- {kernel}: geometric-mean speedup on 2 threads {gm:.2f}x "
                     f"({len(values)} inputs).")
    lines.append("")
    lines.append("SpMV streams the matrix once and is limited by memory bandwidth, which the "
                 "two cores of this machine share; on the Laplacians and the banded matrix "
                 "(about 5-9 nonzeros per row, 262k rows) one dynamic chunk of 32 rows is "
                 "about a microsecond of work, so OpenMP's per-chunk scheduling costs as much "
                 "as it saves and 2 threads are slower (the issue prescribes "
                 "`schedule(dynamic,32)`). TTM does R = 16 multiply-adds per nonzero and "
                 "scales better; its dense output (I x J x 16) is zeroed by all threads.")
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("OMP_PROC_BIND", "false")
    main()
