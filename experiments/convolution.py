"""Convolution (issue 40, index arithmetic): a sparse image convolved with a small dense filter,
spf's kernel against scipy's three convolutions and hand-written C, on 1 and 2 threads.

    python -m experiments.convolution [--quick] [--part image ...]

Parts (``--part``, repeatable; default all):

- ``image``: the full 2-D convolution ``O(i,j) = I(i-k,j-l) * F(k,l)`` of an n x n image with
  uniformly random nonzeros (values uniform in [-1, 1)) and a K x K dense filter; O is the
  full (n+K-1) x (n+K-1) convolution, ``scipy.signal.convolve2d(image, F)`` (mode 'full').
  Contenders, each on its input built beforehand in its own format, its output preallocated
  where the API allows it:

  - ``spf``: ``spf.Kernel(expr, {"I": "CSR", "F": "DenseMatrix", "O": "DenseMatrix"})``
    compiled once, its C called on prebuilt argument structs into a preallocated output (1
    thread: the kernel built without ``parallel``; 2 threads: built with ``parallel=True``,
    the loop spf chooses);
  - ``spf_call`` (1 thread): the same compiled kernel called from Python, ``f(I=tensor,
    F=filter)``, as a user calls it (argument checks, the output allocated per call);
  - ``spf_rows``: the same statement with ``order="i,k"`` (output rows outermost: each output
    row gathers image rows i-k; with ``parallel=True`` the output-row loop is the OpenMP loop);
  - ``spf_coo``: the default kernel with the image in ``COO``;
  - ``hand_c`` (1 thread): experiments/baselines/convolution.c ``conv_scatter``, the textbook
    scatter of each stored entry times the filter, compiled with spf's flags (-O3
    -march=native ...); ``hand_c_rows``: its ``conv_rows``, the same products by output row
    with an OpenMP loop over the rows (1 and 2 threads);
  - ``convolve2d`` (1 thread: scipy's is single-threaded): ``scipy.signal.convolve2d(image,
    F)`` on the dense image;
  - ``ndimage`` (1 thread, single-threaded too): ``scipy.ndimage.convolve(P, F,
    mode="constant", output=...)`` on the image zero-padded beforehand to the full size
    (K//2 rows and columns before, K-1-K//2 after), which makes its 'same'-size, centred
    output exactly the full convolution (the same work and output as the others; padding
    not timed);
  - ``fftconvolve``: ``scipy.signal.fftconvolve(image, F)`` (mode 'full'), its FFTs under
    ``scipy.fft.set_workers(threads)``;
  - ``convert_csr`` / ``convert_coo`` (1 thread, not a contender): ``spf.Tensor.from_dense``
    of the dense image, the conversion spf's kernel needs first, reported on its own (not in
    the kernel's time).

  Every contender's output is checked against ``convolve2d``'s with
  ``np.testing.assert_allclose`` on every configuration before timing (fftconvolve within
  1e-9 of the output's scale, its rounding being the FFT's).  Ratio = contender time / spf
  time at the same thread count (> 1: spf faster).

Each contender is warmed up once and timed as the median of repeated calls, all of one
contender's calls back to back after a pause (experiments/common.py ``time_blocked``: the
OpenMP contenders' idle threads spin for a while after a call).  Threads: spf's kernels and
the C baseline through ``omp_set_num_threads`` (one libgomp for all), scipy.fft through its
``workers``.  glibc's mmap threshold is raised to its ceiling before timing
(:func:`settle_allocator`), so that whether per-call temporaries cost page faults does not
depend on what ran before.  A parallel kernel whose OpenMP loop sits inside the loop over
stored entries (a barrier per entry) is skipped on 2 threads, with the reason in the CSV,
when a probe predicts its calls would take more than the mode's budget (2 s quick, 120 s
full; on a machine where another process holds a core each barrier waits for a time slice)
and, in quick mode, above 3000 stored entries.
Full run (2000 x 2000, 3x3 and 7x7 filters, six densities): about 7 minutes (estimated from
the quick run); ``--quick`` (500 x 500, 3x3, two densities): about 10 seconds on a quiet
machine, most of it compiling.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import time
from collections.abc import Callable, Container
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.fft
import scipy.ndimage as ndimage
import scipy.signal as signal

import spf
from spf.runtime.build import build_library, compile_flags, load_library
from spf.runtime.memory import aligned_zeros

from .common import (
    experiment_parser,
    machine_note,
    plot_path,
    prepared_call,
    print_table,
    progress,
    pyplot,
    time_blocked,
    write_csv,
)

NAME = "convolution"
CONV = "O(i,j) = I(i-k,j-l) * F(k,l)"
THREADS = (1, 2)
BASELINE = Path(__file__).resolve().parent / "baselines" / "convolution.c"
COLUMNS_OUT = ("part", "scale", "size", "filter", "density", "nnz", "threads", "contender",
               "median_s", "runs", "ratio_vs_spf", "parallel_loop", "loadavg", "status")
# contenders of part "image" in table order (hand_c, convolve2d, ndimage and spf_call: 1 thread)
IMAGE_CONTENDERS = ("spf", "spf_call", "spf_rows", "spf_coo", "hand_c", "hand_c_rows",
                    "convolve2d", "ndimage", "fftconvolve")
CONVERSIONS = ("convert_csr", "convert_coo")


@dataclass(frozen=True)
class Mode:
    scale: str
    sizes: tuple[int, ...]
    filters: tuple[int, ...]
    densities: tuple[float, ...]
    target_s: float                 # timed seconds per contender and cell
    min_runs: int
    max_runs: int
    pause_s: float                  # idle time before each contender's block of calls
    budget_s: float                 # most seconds predicted for a barrier-per-entry kernel
    entry_cap: int | None           # and the most stored entries it is timed on


MODES = {"quick": Mode("quick", (500,), (3,), (0.01, 0.2), 0.005, 3, 10, 0.0, 2.0, 3000),
         "full": Mode("full", (2000,), (3, 7), (0.001, 0.01, 0.05, 0.1, 0.2, 0.5), 0.4, 7,
                      200, 0.3, 120.0, None)}


def _row(**values: object) -> dict[str, object]:
    """A CSV row with every column (empty where the part does not measure it)."""
    return {c: values.get(c, "") for c in COLUMNS_OUT}


def _threads(n: int) -> str:
    return f"{n} thread{'s' if n > 1 else ''}"


# --- part "image": a sparse image convolved with a dense filter ----------------------------------
_P = ctypes.c_void_p
_I32 = ctypes.c_int32


def baseline() -> ctypes.CDLL:
    """experiments/baselines/convolution.c, built with spf's flags plus -fopenmp."""
    lib = load_library(str(build_library(BASELINE.read_text(), ("-fopenmp",))))
    lib.conv_scatter.argtypes = [_I32, _P, _P, _P, _I32, _I32, _P, _I32, _P, ctypes.c_int64]
    lib.conv_rows.argtypes = [_I32, _P, _P, _P, _I32, _I32, _P, _I32, _I32, _P]
    lib.conv_scatter.restype = lib.conv_rows.restype = None
    return lib


@dataclass
class ImageKernels:
    """spf's compiled convolutions per (contender, threads) and the C baseline."""

    compiled: dict[tuple[str, int], spf.CompiledKernel]
    parallel_loop: dict[str, str]
    per_entry: dict[str, bool]      # the parallel build's worksharing loop is inside the
    lib: ctypes.CDLL                # loop over stored entries (a barrier per entry)

    @classmethod
    def build(cls) -> ImageKernels:
        specs = {"spf": ({"I": "CSR"}, {}), "spf_rows": ({"I": "CSR"}, {"order": "i,k"}),
                 "spf_coo": ({"I": "COO"}, {})}
        compiled, loops, per_entry = {}, {}, {}
        for c, (layouts, options) in specs.items():
            layouts = {**layouts, "F": "DenseMatrix", "O": "DenseMatrix"}
            serial = spf.Kernel(CONV, layouts, name=f"convexp_{c}", **options)
            omp = spf.Kernel(CONV, layouts, name=f"convexp_{c}_omp", parallel=True, **options)
            loops[c] = omp.parallel_loop or ""
            per_entry[c] = "#pragma omp for" in omp.c_source()
            compiled[c, 1] = serial.compile()
            compiled[c, 2] = omp.compile() if omp.parallel_loop else compiled[c, 1]
        return cls(compiled, loops, per_entry, baseline())

    def get(self, contender: str, threads: int) -> spf.CompiledKernel:
        k = self.compiled[contender, threads]
        if threads > 1 and self.parallel_loop[contender]:
            k.set_num_threads(threads)
        return k


def sparse_image(n: int, density: float, seed: int) -> np.ndarray:
    """An n x n dense array with about ``density`` n^2 nonzeros at uniformly random places,
    their values uniform in [-1, 1) (none exactly 0)."""
    rng = np.random.default_rng(seed)
    image = np.zeros((n, n))
    where = rng.random((n, n)) < density
    values = rng.uniform(-1.0, 1.0, int(where.sum()))
    values[values == 0.0] = 0.5
    image[where] = values
    return image


@dataclass
class Contender:
    fn: Callable[[], object]
    result: Callable[[], np.ndarray]


def _kept(box: dict[str, np.ndarray], key: str, fn: Callable[[], np.ndarray]
          ) -> Callable[[], None]:
    """``fn`` with its result kept in ``box[key]`` (for the check)."""
    def run() -> None:
        box[key] = fn()
    return run


def image_contenders(image: np.ndarray, filt: np.ndarray, ks: ImageKernels, threads: int,
                     skip: Container[str] = ()) -> dict[str, Contender]:
    n, K = image.shape[0], filt.shape[0]
    full = (n + K - 1, n + K - 1)
    out: dict[str, Contender] = {}
    box: dict[str, np.ndarray] = {}
    tensors = {"CSR": spf.Tensor.from_dense("CSR", image),
               "COO": spf.Tensor.from_dense("COO", image)}
    for c, layout in (("spf", "CSR"), ("spf_rows", "CSR"), ("spf_coo", "COO")):
        if c in skip:
            continue
        O = aligned_zeros(full)
        out[c] = Contender(prepared_call(ks.get(c, threads), O, I=tensors[layout], F=filt),
                           lambda O=O: O)
    if threads == 1:        # as a user calls it (the parallel build: the same kernel)
        kernel = ks.get("spf", threads)
        out["spf_call"] = Contender(_kept(box, "spf_call",
                                          lambda: kernel(I=tensors["CSR"], F=filt)),
                                    lambda: box["spf_call"])
    t = tensors["CSR"]
    ptr, idx, val = (t.fields[f] for f in ("rowPtr", "colIdx", "data"))
    lib = ks.lib
    lib.omp_set_num_threads(threads)
    if threads == 1:
        Os = aligned_zeros(full)
        args = (n, ptr.ctypes.data, idx.ctypes.data, val.ctypes.data, K, K, filt.ctypes.data,
                full[1], Os.ctypes.data, Os.size)
        out["hand_c"] = Contender(lambda: lib.conv_scatter(*args), lambda: Os)
    Or = aligned_zeros(full)
    rargs = (n, ptr.ctypes.data, idx.ctypes.data, val.ctypes.data, K, K, filt.ctypes.data,
             full[0], full[1], Or.ctypes.data)
    out["hand_c_rows"] = Contender(lambda: lib.conv_rows(*rargs), lambda: Or)
    if threads == 1:
        out["convolve2d"] = Contender(
            _kept(box, "convolve2d", lambda: signal.convolve2d(image, filt)),
            lambda: box["convolve2d"])
        padded = np.pad(image, ((K // 2, K - 1 - K // 2),) * 2)
        On = np.empty(full)
        out["ndimage"] = Contender(
            lambda: ndimage.convolve(padded, filt, output=On, mode="constant", cval=0.0),
            lambda: On)

    def fft() -> np.ndarray:
        with scipy.fft.set_workers(threads):
            return signal.fftconvolve(image, filt)
    out["fftconvolve"] = Contender(_kept(box, "fftconvolve", fft), lambda: box["fftconvolve"])
    return out


def check_image(got: np.ndarray, reference: np.ndarray, contender: str, what: str) -> None:
    scale = float(np.abs(reference).max()) or 1.0
    if contender == "fftconvolve":      # the FFT's rounding, relative to the output's scale
        np.testing.assert_allclose(got, reference, rtol=1e-9, atol=1e-9 * scale,
                                   err_msg=f"{contender}, {what}")
    else:
        np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-12 * scale,
                                   err_msg=f"{contender}, {what}")


def over_budget(ks: ImageKernels, threads: int, filt: np.ndarray, nnz: int, mode: Mode
                ) -> dict[str, str]:
    """The parallel kernels with a barrier per stored entry not to time in this cell, with the
    reason: above ``mode.entry_cap`` entries, or when their calls are predicted to take more
    than ``mode.budget_s`` (the most a probe on a small image costs per entry, times nnz,
    times the calls a cell makes).  On a quiet machine a barrier costs about a microsecond;
    while another process holds a core each one waits for a scheduler time slice (measured:
    4 ms per barrier, 10 s per call at 500 x 500, density 0.01).  The probe's output is
    checked too."""
    if threads == 1:
        return {}
    out = {}
    probe = sparse_image(64, 0.05, seed=64)
    reference = signal.convolve2d(probe, filt)
    tensors = {"CSR": spf.Tensor.from_dense("CSR", probe),
               "COO": spf.Tensor.from_dense("COO", probe)}
    entries = int(np.count_nonzero(probe))
    for c, layout in (("spf", "CSR"), ("spf_coo", "COO")):
        if not ks.per_entry[c]:
            continue
        if mode.entry_cap is not None and nnz > mode.entry_cap:
            out[c] = (f"a barrier per stored entry (parallel loop {ks.parallel_loop[c]}): "
                      f"{mode.scale} mode times it on at most {mode.entry_cap} entries")
            continue
        k = ks.get(c, threads)
        check_image(k(I=tensors[layout], F=filt), reference, c, "probe, 64x64")
        costs = []
        for _ in range(2):
            t0 = time.perf_counter()
            k(I=tensors[layout], F=filt)
            costs.append((time.perf_counter() - t0) / entries)
        predicted = max(costs) * nnz * (mode.min_runs + 3)
        if predicted > mode.budget_s:
            out[c] = (f"a barrier per stored entry (parallel loop {ks.parallel_loop[c]}), "
                      f"{max(costs) * 1e6:.0f} us each in a probe: {predicted:.0f} s "
                      f"predicted (load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")
    return out


def run_image_cell(n: int, K: int, density: float, ks: ImageKernels, mode: Mode
                   ) -> list[dict]:
    image = sparse_image(n, density, seed=round(1e6 * density) + n)
    filt = np.random.default_rng(K).uniform(-1.0, 1.0, (K, K))
    reference = signal.convolve2d(image, filt)
    nnz = int(np.count_nonzero(image))
    what = f"{n}x{n}, {K}x{K} filter, density {density}"
    base = {"part": "image", "scale": mode.scale, "size": n, "filter": f"{K}x{K}",
            "density": density, "nnz": nnz}
    rows = []
    for threads in THREADS:
        skipped = over_budget(ks, threads, filt, nnz, mode)
        for c, why in skipped.items():
            print(f"  {what}, {_threads(threads)}: {c} skipped: {why}", flush=True)
            rows.append(_row(**base, threads=threads, contender=c,
                             parallel_loop=ks.parallel_loop[c], status=f"skipped: {why}"))
        cons = image_contenders(image, filt, ks, threads, skipped)
        for c, con in cons.items():                 # checked before timing
            con.fn()
            check_image(con.result(), reference, c, f"{what}, {_threads(threads)}")
        fns = {c: v.fn for c, v in cons.items()}
        if threads == 1:
            fns["convert_csr"] = lambda: spf.Tensor.from_dense("CSR", image)
            fns["convert_coo"] = lambda: spf.Tensor.from_dense("COO", image)
        ks.lib.omp_set_num_threads(threads)
        for c in ("spf", "spf_rows", "spf_coo"):    # the thread count of every OpenMP kernel
            ks.get(c, threads)
        times = time_blocked(fns, mode.target_s, mode.min_runs, mode.max_runs, mode.pause_s)
        for c, con in cons.items():                 # and after (the last call's output)
            check_image(con.result(), reference, c, f"{what}, {_threads(threads)}, timed")
        spf_t = times["spf"][0] if "spf" in times else float("nan")
        load = round(os.getloadavg()[0], 2)
        for c, (t, runs) in times.items():
            rows.append(_row(**base, threads=threads, contender=c, median_s=t, runs=runs,
                             ratio_vs_spf=t / spf_t if spf_t == spf_t else "",
                             parallel_loop=ks.parallel_loop.get(c, "") if threads > 1 else "",
                             loadavg=load, status="ok"))
        line = "  ".join(f"{c} {times[c][0] * 1e3:.3g}" for c in times)
        print(f"  {what}, nnz {nnz}, {_threads(threads)} (ms): {line}", flush=True)
    return rows


def settle_allocator() -> None:
    """Raise glibc's mmap threshold to its ceiling (32 MiB) now, as a long-running process has
    it after its first large free: until then every allocation above 128 KiB is a fresh
    mapping, and a contender that allocates temporaries per call (fftconvolve, convolve2d)
    pays page faults on all of them or none depending on what ran before (measured:
    fftconvolve on 500 x 500 took 22 ms with 3000 page faults per call, 11 ms with none).
    Allocating and freeing one block just under the ceiling makes it the same for everyone."""
    block = np.empty((31 << 20) // 8)
    block[::512] = 0.0
    del block


def run_image(mode: Mode) -> list[dict]:
    settle_allocator()
    print(f"part image: compiling spf's kernels and the C baseline "
          f"({' '.join(compile_flags())} -fopenmp)", flush=True)
    ks = ImageKernels.build()
    print("  parallel loops (parallel=True): " + ", ".join(
        f"{c} {loop or 'none'}" for c, loop in ks.parallel_loop.items()), flush=True)
    cells = [(n, K, d) for n in mode.sizes for K in mode.filters for d in mode.densities]
    rows: list[dict] = []
    for n, K, d in progress(cells, "convolution", mode.scale == "quick"):
        rows += run_image_cell(n, K, d, ks, mode)
    return rows


# --- run -------------------------------------------------------------------------------------
# A part is a function of the mode returning CSV rows (``_row``: its own "part" value, the
# columns it measures); ``plot`` and ``describe`` pick its rows by "part" (``_ok``) and add
# a plot and a ``### ...`` subsection of RESULTS.md for it.  Mode takes the part's grid.
PARTS: dict[str, Callable[[Mode], list[dict]]] = {"image": run_image}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = experiment_parser(__doc__)
    parser.add_argument("--part", action="append", choices=list(PARTS), default=[],
                        help="run only this part (repeatable; default: all)")
    args = parser.parse_args(argv)
    if args.matrix:
        parser.error("--matrix: this experiment builds its own inputs")
    mode = MODES["quick" if args.quick else "full"]
    rows: list[dict] = []
    for part in args.part or list(PARTS):
        rows += PARTS[part](mode)
    print_table([r for r in rows if r["status"] == "ok"],
                ["part", "size", "filter", "density", "threads", "contender", "median_s",
                 "ratio_vs_spf"])
    print("wrote", write_csv(NAME, rows, args.quick))
    for p in plot(rows, args.quick):
        print("wrote", p)
    return rows


# --- plots and RESULTS.md --------------------------------------------------------------------
def _ok(rows: list[dict], part: str) -> list[dict]:
    return [r for r in rows if r["part"] == part and r["status"] == "ok"
            and r["median_s"] not in ("", None)]


def plot(rows: list[dict], quick: bool = False) -> list[Path]:
    """Part image: median time against density, one plot per image size and filter; a colour
    per contender, solid on 1 thread and dashed on 2, the conversions grey and dotted."""
    plt = pyplot()
    groups: dict[tuple[str, str], dict[tuple[str, int], list[tuple[float, float]]]] = {}
    for r in _ok(rows, "image"):
        groups.setdefault((str(r["size"]), str(r["filter"])), {}).setdefault(
            (str(r["contender"]), int(r["threads"])), []).append(
            (float(r["density"]), float(r["median_s"]) * 1e3))
    if plt is None or not groups:
        return []
    note = machine_note(rows)
    colors = {c: f"C{k}" for k, c in enumerate(IMAGE_CONTENDERS)}
    out = []
    for (size, filt), series in groups.items():
        fig, ax = plt.subplots(figsize=(8.5, 4.8))
        for (c, threads), points in sorted(series.items(), key=lambda kv: (
                (*IMAGE_CONTENDERS, *CONVERSIONS).index(kv[0][0]), kv[0][1])):
            style = {"color": "gray", "ls": ":", "marker": "x" if c == "convert_csr" else "+"} \
                if c in CONVERSIONS else \
                {"color": colors[c], "ls": "-" if threads == 1 else "--", "marker": "o"}
            ax.plot(*zip(*sorted(points)), label=f"{c} {threads}t", **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("density of the image (stored entries / n^2)")
        ax.set_ylabel("median time (ms)")
        ax.set_title(f"Full convolution of a {size}x{size} sparse image with a {filt} filter"
                     + (f"\n{note}" if note else ""), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        path = plot_path(NAME, f"time_{size}_{filt}", quick)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md: one subsection per part measured."""
    out: list[str] = []
    if _ok(rows, "image"):
        out += _describe_image(rows)
    return "\n".join(out)


def _ratio(r: dict) -> float:
    return float(r["ratio_vs_spf"])


def _crossover(points: list[tuple[float, float]]) -> str:
    """Where contender time / spf time crosses 1 over the densities measured: the bracketing
    densities and, between them, the density of ratio 1 interpolated on log-log axes."""
    points = sorted(points)
    if all(r > 1 for _, r in points):
        return f"spf faster at every density ({_span([r for _, r in points])})"
    if all(r < 1 for _, r in points):
        return f"spf slower at every density ({_span([r for _, r in points])})"
    found = []
    for (d0, r0), (d1, r1) in itertools.pairwise(points):
        if (r0 - 1) * (r1 - 1) < 0:
            x0, x1, y0, y1 = np.log(d0), np.log(d1), np.log(r0), np.log(r1)
            d = float(np.exp(x0 + (x1 - x0) * (0 - y0) / (y1 - y0)))
            who = "spf faster below" if r0 > 1 else "spf slower below"
            found.append(f"{who} ~{d:.2g} (between {d0:g} and {d1:g})")
    return "; ".join(found) or "ratio 1 at a measured density"


def _describe_image(rows: list[dict]) -> list[str]:
    ok = _ok(rows, "image")
    cells: dict[tuple[str, str, float, int], dict[str, dict]] = {}
    for r in ok:
        cells.setdefault((str(r["size"]), str(r["filter"]), float(r["density"]),
                          int(r["threads"])), {})[str(r["contender"])] = r
    date = rows[0].get("date", "") if rows else ""
    loops = {str(r["contender"]): str(r["parallel_loop"]) for r in ok
             if int(r["threads"]) > 1 and r["parallel_loop"]}
    out = [f"### Convolution of a sparse image{f' (measured {date})' if date else ''}", "",
           "Full 2-D convolution `O(i,j) = I(i-k,j-l) * F(k,l)` of an n x n image with "
           "uniformly random nonzeros and a dense K x K filter; O is (n+K-1) x (n+K-1), what "
           "`scipy.signal.convolve2d(image, F)` returns (mode 'full'). `spf`: the kernel with "
           '`{"I": "CSR"}` called on prebuilt structs into a preallocated output (1 '
           "thread: built without `parallel`; 2 threads: `parallel=True`); `spf_call`: the "
           "same called from Python (`f(I=..., F=...)`, output allocated per call); "
           '`spf_rows`: `order="i,k"` (output rows outermost); `spf_coo`: the image in COO; '
           "`hand_c`: the textbook scatter in C, spf's flags; `hand_c_rows`: the same "
           "products by output row, an OpenMP loop over them; `ndimage`: "
           "`scipy.ndimage.convolve` on the image zero-padded beforehand so that its 'same' "
           "output is the full convolution (the same work); `fftconvolve`: its FFTs under "
           "`scipy.fft.set_workers(threads)`. `convolve2d`, `ndimage` and `hand_c` are "
           "single-threaded (1-thread rows only). The conversion of the dense image to "
           "spf's CSR (`convert_csr`, `spf.Tensor.from_dense`) is timed on its own, not in "
           "spf's time. Every output checked against `convolve2d`'s before timing; medians "
           "of repeated calls. Ratio = contender time / spf time at the same thread count "
           "(> 1: spf faster)."
           + (" Parallel loops spf chose with `parallel=True`: " + ", ".join(
               f"{c} `{loop}`" for c, loop in loops.items()) + "." if loops else ""), ""]
    for threads in THREADS:
        peers = [c for c in (*IMAGE_CONTENDERS, *CONVERSIONS) if c != "spf"
                 and any(c in v for (_, _, _, t), v in cells.items() if t == threads)]
        if not peers:
            continue
        out += [f"**{_threads(threads)}**: spf's time (ms) and each contender's time / "
                "spf's", "",
                "| image | filter | density | nnz | spf (ms) | " + " | ".join(peers) + " |",
                "|---|---|---|---|---|" + "---|" * len(peers)]
        for (size, filt, density, t), c in cells.items():
            if t != threads or "spf" not in c:
                continue
            s = c["spf"]
            out.append(f"| {size}x{size} | {filt} | {density:g} | {s['nnz']} | "
                       f"{float(s['median_s']) * 1e3:.3g} | " + " | ".join(
                           f"{_ratio(c[p]):.2f}" if p in c else "-" for p in peers) + " |")
        out.append("")
    skipped = [f"{r['contender']} on {_threads(int(r['threads']))} at {r['size']}x{r['size']}, "
               f"{r['filter']}, density {r['density']} "
               f"({str(r['status']).removeprefix('skipped: ')})" for r in rows
               if r.get("part") == "image" and str(r.get("status", "")).startswith("skipped")]
    if skipped:
        out += ["Not measured: " + "; ".join(skipped) + ".", ""]
    out += ["**Crossover density** (contender time / spf time = 1, from the densities "
            "measured):", ""]
    series: dict[tuple[str, str, int, str], list[tuple[float, float]]] = {}
    for (size, filt, density, threads), c in cells.items():
        for p, r in c.items():
            if "spf" in c and p != "spf" and p not in CONVERSIONS:
                series.setdefault((size, filt, threads, p), []).append((density, _ratio(r)))
    for (size, filt, threads, p), points in series.items():
        if p in ("convolve2d", "ndimage", "fftconvolve"):
            out.append(f"- {size}x{size}, {filt}, {_threads(threads)}, vs `{p}`: "
                       f"{_crossover(points)}.")
    return out + [""] + _image_observations(cells, loops)


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return f"{low:.3g}x" if f"{low:.3g}" == f"{high:.3g}" else f"{low:.3g}-{high:.3g}x"


def _image_observations(cells: dict[tuple[str, str, float, int], dict[str, dict]],
                        loops: dict[str, str]) -> list[str]:
    """What the numbers say about spf's own kernels, computed from them."""
    def t(c: dict, p: str) -> float:
        return float(c[p]["median_s"])

    def speedup(p: str) -> list[float]:
        """p's 1-thread time / its 2-thread time per cell."""
        return [t(one, p) / t(two, p) for (sz, f, d, th), one in cells.items() if th == 1
                for two in [cells.get((sz, f, d, 2), {})] if p in one and p in two]
    out = ["**spf's kernels:**", ""]
    sp_spf, sp_rows = speedup("spf"), speedup("spf_rows")
    if loops.get("spf", "").startswith("F_"):
        out.append(f"- With `parallel=True` spf parallelizes `{loops['spf']}`, the filter-row "
                   "loop inside the loop over the image's stored entries (the loops over "
                   "image rows and entries carry a dependence: image rows i and i+1 add into "
                   "overlapping output rows): one `omp for`, and its implicit barrier, per "
                   f"stored entry. 1-thread / 2-thread time of that kernel: {_span(sp_spf)}.")
    elif sp_spf:
        out.append(f"- 1-thread / 2-thread time of spf's kernel: {_span(sp_spf)}.")
    if sp_rows:
        out.append('- `spf_rows` (`order="i,k"`: output rows outermost, each gathering '
                   f"image rows i-k; parallel loop `{loops.get('spf_rows', '-')}`): "
                   f"1-thread / 2-thread time {_span(sp_rows)}.")
    conv = [t(c, "convert_csr") / t(c, "spf") for c in cells.values()
            if "convert_csr" in c and "spf" in c]
    call = [t(c, "spf_call") / t(c, "spf") for (_, _, _, th), c in cells.items()
            if th == 1 and "spf_call" in c and "spf" in c]
    if conv:
        out.append("- Converting the dense image to CSR (`spf.Tensor.from_dense`, a pass over "
                   f"all n^2 elements) takes {_span(conv)} the kernel's 1-thread time.")
    if call:
        out.append("- Called from Python with the output allocated per call (`spf_call`), "
                   f"spf's 1-thread kernel takes {_span(call)} its time on prebuilt structs.")
    return out + [""]


if __name__ == "__main__":
    os.environ.setdefault("OMP_PROC_BIND", "false")
    main()
