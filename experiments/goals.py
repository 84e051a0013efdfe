"""The performance goals (issues 22 and 23), computed from the other experiments' CSVs.

    python -m experiments.goals [--quick]

Reads ``results/<experiment>.csv`` (``.quick.csv`` with ``--quick``) of spmv, spmspv,
spmspv_push, ttm, sparse_add, conversion, graphs, codegen_time and import_time, and writes one
row per goal: what was measured
(geometric means over the suite's matrices/tensors unless said), the goal, whether it is met.
Nothing here is measured anew; a goal whose experiment has not run says so.
"""
from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Callable
from typing import NamedTuple

from .common import RESULTS_DIR, print_table, write_csv

Rows = list[dict]


class Goal(NamedTuple):
    what: str
    now: float
    op: str                     # ">=" or "<="
    target: float
    hand: float = float("nan")  # the same measure for the hand-written C of the same algorithm


def _read(name: str, quick: bool) -> Rows:
    path = RESULTS_DIR / f"{name}{'.quick' if quick else ''}.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def _times(rows: Rows, key: Callable[[dict], tuple], value: str) -> dict[tuple, float]:
    return {key(r): float(r[value]) for r in rows if r.get(value) and r.get("status", "ok") == "ok"}


def _spmv(rows: Rows) -> list[Goal]:
    t = _times(rows, lambda r: (r["matrix"], r["threads"], r["contender"]), "time_s")
    mats = sorted({m for m, _, c in t if c == "spf_CSR"})

    def ratio(other: str, mine: str, threads: str, where=mats) -> float:
        return _geomean([t[m, threads, other] / t[m, threads, mine] for m in where
                         if (m, threads, other) in t and (m, threads, mine) in t])
    big = [r["matrix"] for r in rows if r["contender"] == "spf_CSR" and r.get("bytes")
           and float(r["bytes"]) >= 5e7 and r["threads"] == "1"]
    def stream(contender: str) -> float:
        shares = sorted(float(r["stream_fraction"]) for r in rows if r["contender"] == contender
                        and r["matrix"] in big and r.get("stream_fraction")
                        and r["threads"] == "1")
        return shares[len(shares) // 2] if shares else float("nan")
    coo = _geomean([t[m, "1", "spf_COO"] / t[m, "2", "spf_COO"] for m in mats
                    if (m, "1", "spf_COO") in t and (m, "2", "spf_COO") in t])
    long_rows = [m for m in mats if m == "dense_lower"]
    return [
        Goal("SpMV CSR vs MKL, 1 thread", ratio("mkl_csr", "spf_CSR", "1"), ">=", 1.0,
             ratio("mkl_csr", "hand_csr", "1")),
        Goal("SpMV CSR vs MKL, 2 threads", ratio("mkl_csr", "spf_CSR", "2"), ">=", 1.0,
             ratio("mkl_csr", "hand_csr", "2")),
        Goal("SpMV CSR vs scipy, 1 thread", ratio("scipy_csr", "spf_CSR", "1"), ">=", 1.1,
             ratio("scipy_csr", "hand_csr", "1")),
        Goal("SpMV CSR share of STREAM, matrices >= 50 MB (median, 1 thread)",
             stream("spf_CSR"), ">=", 0.6, stream("hand_csr")),
        Goal("SpMV CSR long rows (dense_lower), reassociate=True vs MKL, 1 thread",
             ratio("mkl_csr", "spf_CSR_reassoc", "1", long_rows), ">=", 0.95),
        Goal("SpMV COO, 2 threads vs 1 thread", coo, ">=", 1.6),
        Goal("SpMV COO vs MKL COO, 2 threads", ratio("mkl_coo", "spf_COO", "2"), ">=", 1.0,
             ratio("mkl_coo", "hand_coo", "2")),
        Goal("SpMV ELL vs scipy CSR, 1 thread", ratio("scipy_csr", "spf_ELL", "1"), ">=", 1.0,
             ratio("scipy_csr", "hand_ell", "1")),
        Goal("SpMV CSR vs hand-written C, 1 thread", ratio("hand_csr", "spf_CSR", "1"), ">=", 1.0),
        Goal("SpMV CSR vs hand-written C, 2 threads", ratio("hand_csr", "spf_CSR", "2"), ">=", 1.0),
        Goal("SpMV COO vs hand-written C, 1 thread", ratio("hand_coo", "spf_COO", "1"), ">=", 1.0),
        Goal("SpMV COO vs hand-written C, 2 threads", ratio("hand_coo", "spf_COO", "2"), ">=", 1.0),
        Goal("SpMV ELL vs hand-written C, 1 thread", ratio("hand_ell", "spf_ELL", "1"), ">=", 1.0),
        Goal("SpMV ELL vs hand-written C, 2 threads", ratio("hand_ell", "spf_ELL", "2"), ">=", 1.0),
        Goal("SpMV DIA vs hand-written C, 1 thread", ratio("hand_dia", "spf_DIA", "1"), ">=", 1.0),
        Goal("SpMV DIA vs hand-written C, 2 threads", ratio("hand_dia", "spf_DIA", "2"), ">=", 1.0),
    ]


def _spmspv(rows: Rows) -> list[Goal]:
    t = _times(rows, lambda r: (r["matrix"], r["x_density"], r["contender"]), "median_s")
    cells = sorted({(m, d) for m, d, c in t if c == "auto"})
    per_density: dict[str, list[float]] = {}
    for m, d in cells:
        if (m, d, "scipy") in t:
            per_density.setdefault(d, []).append(t[m, d, "scipy"] / t[m, d, "auto"])
    worst = min((_geomean(v) for v in per_density.values()), default=float("nan"))
    gb = _geomean([t[m, d, "graphblas"] / t[m, d, "auto"] for m, d in cells
                   if (m, d, "graphblas") in t])
    return [Goal("SpMSpV CSR x sparse x, Auto vs scipy (worst density, geomean)", worst, ">=",
                 1.0),
            Goal("SpMSpV Auto vs GraphBLAS (all cells, A in CSR: pull)", gb, ">=", 1.0)]


def _spmspv_push(rows: Rows) -> list[Goal]:
    def ratio(contender: str) -> list[float]:
        return [float(r["ratio_vs_spf"]) for r in rows if r["contender"] == contender
                and r.get("ratio_vs_spf")]
    densities = {r["x_density"] for r in rows}
    worst = min((_geomean([float(r["ratio_vs_spf"]) for r in rows if r["contender"] == "scipy"
                           and r["x_density"] == d and r.get("ratio_vs_spf")])
                 for d in densities), default=float("nan"))
    return [Goal("SpMSpV push, A in CSC, vs scipy (worst density, geomean)", worst, ">=", 1.0),
            Goal("SpMSpV push, A in CSC, vs GraphBLAS by column (all cells)",
                 _geomean(ratio("graphblas")), ">=", 1.0),
            Goal("SpMSpV push, A in CSC, vs hand-written C push (all cells)",
                 _geomean(ratio("hand_c")), ">=", 1.0)]


def _ttm(rows: Rows) -> list[Goal]:
    t = _times(rows, lambda r: (r["tensor"], r["output"], r["threads"], r["contender"]), "time_s")
    out = []
    for output in ("dense", "fibres"):
        for threads, mine in (("1", "spf_serial"), ("2", "spf_parallel")):
            out.append(Goal(f"TTM mode-1 CSF R=16, {output} output, vs hand-written C, "
                            f"{threads} thread" + ("s" if threads == "2" else ""),
                            _geomean([t[k[0], output, threads, "baseline"] / t[k] for k in t
                                      if k[1:] == (output, threads, mine)
                                      and (k[0], output, threads, "baseline") in t]), ">=", 1.0))
    for threads, mine in (("1", "spf_serial"), ("2", "spf_parallel")):
        def vs_taco(who: str) -> float:
            return _geomean([t[k[0], "dense", threads, "taco"] / t[k] for k in t
                             if k[1:] == ("dense", threads, who)
                             and (k[0], "dense", threads, "taco") in t])
        out.append(Goal(f"TTM mode-1 CSF R=16, dense output, vs TACO, {threads} thread"
                        + ("s" if threads == "2" else ""), vs_taco(mine), ">=", 1.0,
                        vs_taco("baseline")))
    return out


def _conversion(rows: Rows) -> list[Goal]:
    t = _times(rows, lambda r: (r["matrix"], r["pair"], r["contender"]), "median_s")
    out = []
    for pair in ("DIA->CSR", "CSR->CSC", "CSC->CSR"):
        mine = [float(r["ratio_vs_spf"]) for r in rows if r["pair"] == pair
                and r["contender"] == "scipy" and r.get("ratio_vs_spf")]
        hand = [t[m, p, "scipy"] / t[m, p, "C baseline"] for m, p, c in t
                if p == pair and c == "scipy" and (m, p, "C baseline") in t]
        out.append(Goal(f"conversion {pair} vs scipy", _geomean(mine), ">=", 1.0,
                        _geomean(hand)))
    for pair in ("DIA->CSR", "CSR->CSC", "CSC->CSR"):
        mine = [float(r["ratio_vs_spf"]) for r in rows if r["pair"] == pair
                and r["contender"] == "C baseline" and r.get("ratio_vs_spf")]
        out.append(Goal(f"conversion {pair} vs hand-written C", _geomean(mine), ">=", 1.0))
    return out


def _sparse_add(rows: Rows) -> list[Goal]:
    big = [float(r["ratio_vs_spf"]) for r in rows if r["contender"] == "scipy"
           and r.get("ratio_vs_spf") and r["scale"] in ("full", "quick")]
    return [Goal("sparse add C = A + A^T, CSR, vs scipy (largest scale)", _geomean(big), ">=",
                 1.0)]


def _graphs(rows: Rows) -> list[Goal]:
    def ratio(algo: str, threads: str, contender: str) -> float:
        return _geomean([float(r["vs_graphblas"]) for r in rows if r["algorithm"] == algo
                         and r["threads"] == threads and r["contender"] == contender
                         and r.get("vs_graphblas") not in (None, "", "nan")])
    out = []
    for algo, what in (("triangles", "masked triangle counting"), ("sssp", "SSSP")):
        for threads in ("1", "2"):
            out.append(Goal(f"{what} vs GraphBLAS, {threads} thread"
                            + ("s" if threads == "2" else ""), ratio(algo, threads, "spf"),
                            ">=", 1.0, ratio(algo, threads, "hand")))
    return out


def _codegen(codegen: Rows, imports: Rows) -> list[Goal]:
    bcsr = [float(r["codegen_s"]) for r in codegen if r["kernel"] == "SpMSpM(BCSR,COO)"]
    imp = [float(r["median_s"]) for r in imports if r["what"] == "import spf"]
    return [Goal("codegen BCSR x COO SpMSpM (s)", bcsr[0] if bcsr else float("nan"), "<=",
                 0.091),
            Goal("import spf (s)", imp[0] if imp else float("nan"), "<=", 0.2)]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="from the quick-mode CSVs")
    args = parser.parse_args(argv)
    q = args.quick
    goals = (_spmv(_read("spmv", q)) + _spmspv(_read("spmspv", q))
             + _spmspv_push(_read("spmspv_push", q)) + _ttm(_read("ttm", q))
             + _sparse_add(_read("sparse_add", q)) + _conversion(_read("conversion", q))
             + _graphs(_read("graphs", q))
             + _codegen(_read("codegen_time", q), _read("import_time", q)))
    rows = []
    for g in goals:
        known = not math.isnan(g.now)
        met = known and (g.now >= g.target if g.op == ">=" else g.now <= g.target)
        rows.append({"goal": g.what, "now": f"{g.now:.3g}" if known else "",
                     "target": f"{g.op} {g.target}", "met": ("yes" if met else "no") if known
                     else "not measured",
                     "hand_written_c": "" if math.isnan(g.hand) else f"{g.hand:.3g}"})
    print_table(rows, ["goal", "now", "target", "met", "hand_written_c"])
    print("wrote", write_csv("goals", rows, q))
    return rows


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    lines = ["Issues 22 and 23's goals, computed from the CSVs of the sections below (ratios: "
             "contender time / spf time, > 1: spf faster; geometric means over the suite "
             "unless said). Where a goal is missed, the section of that experiment says why. "
             "Column *hand-written C*, for goals against a library: the same measure for the "
             "experiment's hand-written C loop of the textbook algorithm in the same layout "
             "(what a performance engineer writes; same flags, same threads), i.e. how far "
             "that algorithm itself gets against the library.",
             "", "| goal | now | target | met | hand-written C |", "|---|---|---|---|---|"]
    lines += [f"| {r['goal']} | {r['now'] or '-'} | {r['target']} | {r['met']} | "
              f"{r.get('hand_written_c') or '-'} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
