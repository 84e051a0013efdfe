"""Shared helpers for experiments: timing, machine description, CSV output."""
from __future__ import annotations

import argparse
import csv
import ctypes
import datetime as _dt
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def geomean(values: Iterable[float]) -> float:
    """Geometric mean (NaN for no values)."""
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def graphblas(threads: int = 1):
    """The ``graphblas`` module set to ``threads`` threads, or None when it is not installed."""
    try:
        import graphblas as gb
    except ImportError:
        return None
    gb.ss.config["nthreads"] = threads
    return gb


def median_time(fn: Callable[[], object], runs: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``runs`` runs after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    import islpy
    import numpy
    import scipy
    import z3
    cc = os.environ.get("CC", "cc")
    try:
        cc_version = subprocess.run([cc, "--version"], capture_output=True,
                                    text=True).stdout.split("\n")[0]
    except OSError:
        cc_version = "unknown"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version(),
            "numpy": numpy.__version__, "scipy": scipy.__version__, "islpy": islpy.__version__,
            "z3": z3.get_version_string(), "mkl": _mkl_version(),
            "graphblas": _graphblas_version(), "cc": cc_version,
            "date": _dt.date.today().isoformat()}


def _graphblas_version() -> str:
    """python-graphblas and SuiteSparse:GraphBLAS versions ("" when not installed)."""
    try:
        import graphblas
        import suitesparse_graphblas
    except ImportError:
        return ""
    return f"python-graphblas {graphblas.__version__}, SuiteSparse:GraphBLAS " \
           f"{suitesparse_graphblas.__version__}"


def _mkl_version() -> str:
    from . import mkl
    return mkl.version()


def write_csv(name: str, rows: Iterable[Mapping[str, object]], quick: bool) -> Path:
    """Write rows (plus machine columns) to ``results/NAME.csv`` (``NAME.quick.csv`` in quick
    mode)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}{'.quick' if quick else ''}.csv"
    rows = list(rows)
    info = machine()
    fields = list(rows[0].keys()) + list(info.keys()) if rows else list(info.keys())
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **info})
    return path


def print_table(rows: list[Mapping[str, object]], columns: list[str]) -> None:
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(_fmt(r[c]).ljust(w) for c, w in zip(columns, widths)))


def _fmt(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def prepared_call(compiled, out, **inputs) -> Callable[[], None]:
    """A zero-argument callable running a compiled kernel's C on structs built once (what the
    experiments time: no Python-side checks per call).  ``out`` is the dense output array (or
    an output Tensor of known sparsity), written in place; ``inputs`` are spf Tensors or numpy
    arrays for dense operands."""
    import spf
    from spf.runtime.build import make_struct
    kernel = compiled.kernel
    expr = kernel.expr
    if isinstance(out, spf.Tensor):          # an output of known sparsity, built by the caller
        tensors = {expr.output.tensor: out}
    else:
        tensors = {expr.output.tensor: spf.Tensor.from_dense(kernel.layouts[expr.output.tensor],
                                                             out)}
        first = tensors[expr.output.tensor].fields[kernel.layouts[expr.output.tensor].dense_array]
        if first.ctypes.data != out.ctypes.data:
            raise RuntimeError("the output tensor does not share the result array")
    for acc in expr.factors:
        value = inputs[acc.tensor]
        tensors[acc.tensor] = value if isinstance(value, spf.Tensor) else \
            spf.Tensor.from_dense(kernel.layouts[acc.tensor], value)
    structs = [make_struct(tensors[a.tensor].layout, tensors[a.tensor].fields)
               for a in (expr.output, *expr.factors)]       # the C parameters' order
    args = [ctypes.byref(st) for st in structs]
    fn = compiled._fn

    def run() -> None:
        if fn(*args) != 0:
            raise MemoryError(f"{kernel.name}: out of memory")
    run.keep = (structs, tensors)        # keep the structs and arrays alive
    return run


def time_interleaved(fns: Mapping[str, Callable[[], object]], target_s: float, min_runs: int,
                     max_runs: int) -> dict[str, tuple[float, int]]:
    """Warm every contender up once, give each as many runs as fill ``target_s`` (within
    bounds), and run them in rounds (one call of each contender still due per round, the
    order rotating from round to round), so that load from elsewhere on the machine hits all
    contenders alike.  Returns
    contender -> (median seconds, runs)."""
    runs = {}
    for c, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        runs[c] = int(min(max_runs, max(min_runs, math.ceil(target_s / max(first, 1e-7)))))
    times: dict[str, list[float]] = {c: [] for c in fns}
    names = list(fns)
    for k in range(max(runs.values(), default=0)):
        # rotate the order: no contender always runs right after the same other one (what
        # one leaves behind, e.g. freed or fresh memory, can cost the next one)
        for c in names[k % len(names):] + names[:k % len(names)]:
            fn = fns[c]
            if k < runs[c]:
                t0 = time.perf_counter()
                fn()
                times[c].append(time.perf_counter() - t0)
    return {c: (statistics.median(times[c]), runs[c]) for c in fns}


def time_blocked(fns: Mapping[str, Callable[[], object]], target_s: float, min_runs: int,
                 max_runs: int, pause_s: float = 0.3) -> dict[str, tuple[float, int]]:
    """Like :func:`time_interleaved`, but each contender's runs back to back after a pause of
    ``pause_s``: for multithreaded contenders from different OpenMP runtimes (MKL's keeps its
    threads spinning 200 ms after a call, GraphBLAS ships its own libgomp), whose idle
    threads would otherwise spin on the cores the next contender runs on."""
    out = {}
    for c, fn in fns.items():
        time.sleep(pause_s)
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        runs = int(min(max_runs, max(min_runs, math.ceil(target_s / max(first, 1e-7)))))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[c] = (statistics.median(times), runs)
    return out


def experiment_parser(doc: str) -> argparse.ArgumentParser:
    """The options every experiment takes: ``--quick`` and ``--matrix PATH.mtx`` (repeatable)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small matrices (seconds)")
    parser.add_argument("--matrix", action="append", default=[], metavar="PATH.mtx",
                        help="run on Matrix Market files instead of the suite (repeatable)")
    return parser


# --- progress and plots ------------------------------------------------------------------------
def progress(items: Iterable, desc: str, quick: bool) -> Iterable:
    """``items`` with a tqdm progress bar on full runs (as they are in quick runs, or when tqdm
    is not installed)."""
    if quick:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(list(items), desc=desc, unit="case")


def plot_path(name: str, what: str, quick: bool) -> Path:
    """``results/NAME_WHAT.png`` (``NAME_WHAT.quick.png`` in quick mode, not committed)."""
    return RESULTS_DIR / f"{name}_{what}{'.quick' if quick else ''}.png"


def pyplot():
    """matplotlib's pyplot on the Agg backend, or None (with a notice) when not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install matplotlib)")
        return None
    return plt


def machine_note(rows: list[Mapping[str, object]]) -> str:
    """``cpu, N cores, date`` of the rows' machine columns, for plot titles."""
    if not rows or "cpu" not in rows[0]:
        return ""
    r = rows[0]
    return f"{r['cpu']}, {r['cores']} cores, {r['date']}"


def bar_chart(groups: Mapping[str, Mapping[str, float]], path: Path, title: str, ylabel: str,
              *, log: bool = False, reference: float | None = None) -> list[Path]:
    """Grouped bars: one group per key of ``groups`` (a matrix, a kernel), one bar per series
    in it; a horizontal line at ``reference`` (1.0 for ratios)."""
    plt = pyplot()
    groups = {g: {s: v for s, v in bars.items() if v == v} for g, bars in groups.items() if bars}
    if plt is None or not groups:
        return []
    series = list(dict.fromkeys(s for bars in groups.values() for s in bars))
    colors = {s: f"C{k % 10}" for k, s in enumerate(series)}
    most = max(len(bars) for bars in groups.values())
    width = 0.8 / most
    fig, ax = plt.subplots(figsize=(min(16.0, max(6.0, 0.4 * len(groups) * most + 2.5)), 4.8))
    labelled: set[str] = set()
    for i, bars in enumerate(groups.values()):    # the bars a group has, side by side
        for k, (s, value) in enumerate(bars.items()):
            ax.bar(i + (k - (len(bars) - 1) / 2) * width, value, width, color=colors[s],
                   label=None if s in labelled else s)
            labelled.add(s)
    ax.set_xticks(range(len(groups)), list(groups), rotation=35, ha="right", fontsize=8)
    if reference is not None:
        ax.axhline(reference, color="gray", lw=0.9)
    if log:
        _log_axis(ax, "y")
    return _finish(plt, fig, ax, path, title, ylabel)


def line_chart(series: Mapping[str, list[tuple[float, float]]], path: Path, title: str,
               xlabel: str, ylabel: str, *, logx: bool = False, logy: bool = False,
               reference: float | None = None) -> list[Path]:
    """One line per series of (x, y) points."""
    plt = pyplot()
    series = {s: sorted(p) for s, p in series.items() if p}
    if plt is None or not series:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    for s, pts in series.items():
        ax.plot(*zip(*pts), marker="o", label=s)
    if reference is not None:
        ax.axhline(reference, color="gray", lw=0.9)
    if logx:
        _log_axis(ax, "x")
    if logy:
        _log_axis(ax, "y")
    ax.set_xlabel(xlabel)
    return _finish(plt, fig, ax, path, title, ylabel)


def _log_axis(ax, which: str) -> None:
    """A log scale on axis ``which`` ("x" or "y") labelled in plain numbers (1, 2, 3, 5 of
    each decade on y, the decades on x)."""
    from matplotlib.ticker import FuncFormatter
    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")

    def label(value: float, _: int) -> str:
        mantissa = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0
        return f"{value:g}" if round(mantissa, 6) in (1, 2, 3, 5) else ""
    axis.set_major_formatter(FuncFormatter(label))
    if which == "y":    # x labels of every 2, 3, 5 would run into each other
        axis.set_minor_formatter(FuncFormatter(label))


def _finish(plt, fig, ax, path: Path, title: str, ylabel: str) -> list[Path]:
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
