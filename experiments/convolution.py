"""Convolution (issue 40, index arithmetic): a sparse image convolved with a small dense filter,
spf's kernel against scipy's three convolutions and hand-written C; and spf's parallel assembly
of sparse outputs (SpGEMM, sparse add) against its serial one, scipy, MKL and GraphBLAS; on 1
and 2 threads.

    python -m experiments.convolution [--quick] [--part image|assembly ...]

Parts (``--part``, repeatable; default all):

- ``image``: the full 2-D convolution ``O(i,j) = I(i-k,j-l) * F(k,l)`` of an n x n image with
  uniformly random nonzeros (values uniform in [-1, 1)) and a K x K dense filter; O is the
  full (n+K-1) x (n+K-1) convolution, ``scipy.signal.convolve2d(image, F)`` (mode 'full').
  Contenders, each on its input built beforehand in its own format, its output preallocated
  where the API allows it:

  - ``spf``: ``spf.Kernel(expr, {"I": "CSR", "F": "DenseMatrix", "O": "DenseMatrix"})``
    compiled once, its C called on prebuilt argument structs into a preallocated output (1
    thread: the kernel built without ``parallel``; 2 threads: built with ``parallel=True``,
    the loop spf chooses: the outer loop over image rows, ``I_pi``, each thread adding into a
    private copy of O, the copies summed into O at the end);
  - ``spf_call`` (1 thread): the same compiled kernel called from Python, ``f(I=tensor,
    F=filter)``, as a user calls it (argument checks, the output allocated per call);
  - ``spf_rows``: the same statement with ``order="i,k"`` (output rows outermost: each output
    row gathers image rows i-k; with ``parallel=True`` the output-row loop is the OpenMP loop);
  - ``spf_coo``: the default kernel with the image in ``COO`` (1 thread only: with
    ``parallel=True`` spf shares out the filter-row loop ``F_p0`` inside the loop over all
    stored entries, a barrier per entry, which on a shared machine waits for a time slice
    each; a kernel whose parallel loop is not its outermost loop is not timed on 2 threads,
    the reason in the CSV);
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

- ``assembly``: sparse outputs spf assembles, built by one thread (``parallel=False``) or by
  the threads (``parallel=True``: each row's distinct entries counted per thread, a prefix
  sum, each row filled by its thread; docs/outputs.md "Parallel assembly"), all in CSR:
  SpGEMM ``C(i,j) = A(i,k) * B(k,j)`` with ``C = A A`` and sparse add ``C(i,j) = A(i,j) +
  B(i,j)`` with ``C = A + A^T``, on matrices of experiments/matrices.py's structures
  (2-D Laplacian, uniformly random at densities 1e-3 and 1e-2, R-MAT), sized so that
  SpGEMM takes 10 ms to 1 s (``--quick``: tiny ones).  Contenders, each timed as a user
  calls it, the output allocated by the call (inputs built beforehand):

  - ``spf_serial`` (1 thread): ``spf.Kernel(expr, CSR everywhere)`` compiled once, called
    as ``f(A=..., B=...)`` on ``spf.Tensor.from_scipy("CSR", m)`` tensors (the size pass,
    the allocation, the kernel, the trim);
  - ``spf_parallel`` (1 and 2 threads): the same built with ``parallel=True``, its threads
    set with ``set_num_threads``;
  - ``scipy`` (1 thread: scipy's sparse products and sums are single-threaded): ``A @ B``,
    ``A + B``;
  - ``mkl`` (sparse add only, 1 and 2 threads): ``mkl_sparse_d_add`` on handles built
    beforehand (experiments/mkl.py; it wraps no SpGEMM, so MKL is not in the SpGEMM rows);
  - ``graphblas`` (1 and 2 threads, ``nthreads``): python-graphblas, ``A.mxm(B,
    plus_times).new()`` / ``A.ewise_add(B, plus).new()``, then ``wait()``.

  Every output is checked against scipy's before timing: the same stored pattern once
  entries within 1e-12 of the largest value are dropped on both sides (explicit zeros),
  values within rtol 1e-12; spf's rows must also be sorted.  Ratio = contender time / spf
  time at the same thread count: ``spf_serial`` on 1 thread, ``spf_parallel`` on 2 (> 1:
  spf faster; ``spf_parallel`` on 1 thread: its time / the serial build's).

Each contender is warmed up once and timed as the median of repeated calls, all of one
contender's calls back to back after a pause (experiments/common.py ``time_blocked``: the
OpenMP contenders' idle threads spin for a while after a call).  Threads: spf's kernels and
the C baseline through ``omp_set_num_threads`` (one libgomp for all), scipy.fft through its
``workers``, MKL through ``MKL_Set_Num_Threads``, GraphBLAS through its ``nthreads``.
glibc's mmap threshold is raised to its ceiling before timing (:func:`settle_allocator`),
so that whether per-call temporaries cost page faults does not depend on what ran before.

Full run: image (2000 x 2000, 3x3 and 7x7 filters, six densities) about 7 minutes, assembly
(laplace2d on a 512 x 512 grid, random 1e-3 at n = 16000, random 1e-2 at n = 4000, R-MAT
scale 13: scipy's SpGEMM takes 47, 135, about 200 and 308 ms on them) about 2 minutes
(estimated from scipy's times and the quick run's ratios); ``--quick``: about 12 seconds on
a quiet machine, most of it compiling.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from collections.abc import Callable, Container
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.fft
import scipy.ndimage as ndimage
import scipy.signal as signal
import scipy.sparse as sp

import spf
from spf.runtime.build import build_library, compile_flags, load_library
from spf.runtime.memory import aligned_zeros

from . import matrices, mkl
from .common import (
    experiment_parser,
    geomean,
    graphblas,
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
COLUMNS_OUT = ("part", "scale", "kernel", "matrix", "size", "filter", "density", "nnz", "nnz_C",
               "products", "threads", "contender", "median_s", "runs", "ratio_vs_spf",
               "parallel_loop", "loadavg", "status")
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
    matrices: tuple[tuple[str, int], ...]   # part assembly: (structure, size parameter)


MODES = {"quick": Mode("quick", (500,), (3,), (0.01, 0.2), 0.005, 3, 10, 0.0,
                      (("laplace2d", 45), ("random_1e-3", 2048), ("random_1e-2", 512),
                       ("rmat", 8))),
         "full": Mode("full", (2000,), (3, 7), (0.001, 0.01, 0.05, 0.1, 0.2, 0.5), 0.4, 7,
                      200, 0.3, (("laplace2d", 512), ("random_1e-3", 16_000),
                                 ("random_1e-2", 4000), ("rmat", 13)))}


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
    not_parallel: dict[str, str]    # why a parallel build is not timed on 2 threads ("": it is)
    lib: ctypes.CDLL

    @classmethod
    def build(cls) -> ImageKernels:
        specs = {"spf": ({"I": "CSR"}, {}), "spf_rows": ({"I": "CSR"}, {"order": "i,k"}),
                 "spf_coo": ({"I": "COO"}, {})}
        compiled, loops, not_parallel = {}, {}, {}
        for c, (layouts, options) in specs.items():
            layouts = {**layouts, "F": "DenseMatrix", "O": "DenseMatrix"}
            serial = spf.Kernel(CONV, layouts, name=f"convexp_{c}", **options)
            omp = spf.Kernel(CONV, layouts, name=f"convexp_{c}_omp", parallel=True, **options)
            loops[c] = omp.parallel_loop or ""
            outer = omp.analysis().loops[0].var
            # an inner loop shared out: a barrier ends each instance of the loops outside it
            # (COO: one per stored entry; while another process holds a core each barrier
            # waits for a time slice, measured 4 ms, 10 s per call at 500 x 500, density 0.01)
            not_parallel[c] = "" if loops[c] in ("", outer) else (
                f"parallel loop {loops[c]} is shared out inside loop {outer}: a barrier per "
                f"iteration of {outer}")
            compiled[c, 1] = serial.compile()
            compiled[c, 2] = omp.compile() if omp.parallel_loop else compiled[c, 1]
        return cls(compiled, loops, not_parallel, baseline())

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
        skipped = {c: why for c, why in ks.not_parallel.items() if why and threads > 1}
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


# --- part "assembly": sparse outputs built by one thread or by all -------------------------------
ASSEMBLY = {"spgemm": "C(i,j) = A(i,k) * B(k,j)", "add": "C(i,j) = A(i,j) + B(i,j)"}
# contenders of part "assembly" in table order (spf_serial and scipy: 1 thread; mkl: add only)
ASSEMBLY_CONTENDERS = ("spf_serial", "spf_parallel", "scipy", "mkl", "graphblas")


def assembly_matrix(name: str, size: int) -> sp.csr_matrix:
    """A canonical CSR matrix of experiments/matrices.py's structure ``name``: ``laplace2d``
    (a size x size grid), ``random_<density>`` (size x size) or ``rmat`` (scale ``size``,
    edge factor 16), seeded by name and size."""
    rng = matrices._rng(name, f"assembly{size}")
    if name == "laplace2d":
        return matrices.laplacian_2d(size)
    if name.startswith("random_"):
        return matrices.random_uniform(size, float(name.split("_")[1]), rng)
    if name == "rmat":
        return matrices.rmat(size, 16, rng)
    raise KeyError(name)


def _transpose(A: sp.csr_matrix) -> sp.csr_matrix:
    """A^T as canonical CSR with int32 indices."""
    B = sp.csr_matrix(A.T)
    B.sort_indices()
    B.indices, B.indptr = B.indices.astype(np.int32), B.indptr.astype(np.int32)
    return B


def _as_csr(got: object, shape: tuple[int, int]) -> sp.csr_matrix:
    """A contender's output as scipy CSR."""
    if isinstance(got, spf.Tensor):
        return got.to_scipy().tocsr()
    if isinstance(got, mkl.Handle):
        return mkl.export_csr(got)
    if sp.issparse(got):
        return sp.csr_matrix(got)
    r, c, v = got.to_coo()                  # a graphblas Matrix
    return sp.csr_matrix((v, (r, c)), shape=shape)


def check_assembled(got: object, reference: sp.csr_matrix, contender: str, what: str) -> None:
    """The same stored pattern as scipy's (entries within 1e-12 of the largest value dropped
    on both sides: explicit zeros, cancellations) and values within rtol 1e-12; spf's rows
    sorted."""
    if isinstance(got, spf.Tensor):
        t = got.to_scipy().tocsr()
        starts = np.zeros(t.nnz, bool)
        starts[t.indptr[:-1][np.diff(t.indptr) > 0]] = True
        if not np.all((np.diff(t.indices.astype(np.int64)) > 0) | starts[1:]):
            raise AssertionError(f"{contender}, {what}: the rows of C are not sorted")
    g, r = _as_csr(got, reference.shape), reference.copy()
    if g.shape != r.shape:
        raise AssertionError(f"{contender}, {what}: C is {g.shape}, scipy's {r.shape}")
    tiny = 1e-12 * max(1.0, float(abs(r).max()) if r.nnz else 1.0)
    for m in (g, r):
        m.sum_duplicates()
        m.data[np.abs(m.data) <= tiny] = 0.0
        m.eliminate_zeros()
        m.sort_indices()
    if not (np.array_equal(g.indptr, r.indptr) and np.array_equal(g.indices, r.indices)):
        raise AssertionError(f"{contender}, {what}: {g.nnz} stored entries, scipy's {r.nnz}, "
                             "not the same pattern")
    np.testing.assert_allclose(g.data, r.data, rtol=1e-12, atol=tiny,
                               err_msg=f"{contender}, {what}")


@dataclass
class AssemblyKernels:
    """spf's compiled kernels per (kernel, parallel) and their parallel loops."""

    compiled: dict[tuple[str, bool], spf.CompiledKernel]
    parallel_loop: dict[str, str]

    @classmethod
    def build(cls) -> AssemblyKernels:
        layouts = {"A": "CSR", "B": "CSR", "C": "CSR"}
        compiled, loops = {}, {}
        for kernel, expr in ASSEMBLY.items():
            for parallel in (False, True):
                k = spf.Kernel(expr, layouts, name=f"convexp_{kernel}{'_omp' * parallel}",
                               parallel=parallel)
                compiled[kernel, parallel] = k.compile()
            loops[kernel] = k.parallel_loop or ""
            if not loops[kernel] or "in parallel" not in k.c_source():
                raise RuntimeError(f"{expr} with parallel=True is not assembled in parallel: "
                                   f"{k.analysis().parallel_reason}")
        return cls(compiled, loops)


def assembly_contenders(kernel: str, A: sp.csr_matrix, B: sp.csr_matrix, ks: AssemblyKernels,
                        threads: int) -> dict[str, Callable[[], object]]:
    """The calls timed on ``threads`` threads (their thread counts set here)."""
    tA, tB = spf.Tensor.from_scipy("CSR", A), spf.Tensor.from_scipy("CSR", B)
    omp = ks.compiled[kernel, True]
    omp.set_num_threads(threads)
    fns: dict[str, Callable[[], object]] = {}
    if threads == 1:
        serial = ks.compiled[kernel, False]
        fns["spf_serial"] = lambda: serial(A=tA, B=tB)
    fns["spf_parallel"] = lambda: omp(A=tA, B=tB)
    if threads == 1:
        fns["scipy"] = (lambda: A @ B) if kernel == "spgemm" else (lambda: A + B)
    if kernel == "add" and mkl.load() is not None:
        mkl.set_threads(threads)
        hA, hB = mkl.csr(A), mkl.csr(B)
        fns["mkl"] = lambda: mkl.add(hA, hB)
    gb = graphblas(threads)
    if gb is not None:
        gA, gB = gb.io.from_scipy_sparse(A), gb.io.from_scipy_sparse(B)

        def gb_call():
            c = gA.mxm(gB, gb.semiring.plus_times).new() if kernel == "spgemm" else \
                gA.ewise_add(gB, gb.binary.plus).new()
            c.wait()
            return c
        fns["graphblas"] = gb_call
    return fns


def run_assembly_matrix(name: str, size: int, ks: AssemblyKernels, mode: Mode) -> list[dict]:
    A = assembly_matrix(name, size)
    rows: list[dict] = []
    for kernel in ASSEMBLY:
        B = A if kernel == "spgemm" else _transpose(A)
        reference = A @ B if kernel == "spgemm" else A + B
        products = int(np.dot(np.bincount(A.indices, minlength=A.shape[1]),
                              np.diff(B.indptr))) if kernel == "spgemm" else ""
        what = f"{kernel} on {name} ({A.shape[0]} rows, {A.nnz} entries)"
        base = {"part": "assembly", "scale": mode.scale, "kernel": kernel, "matrix": name,
                "size": A.shape[0], "nnz": A.nnz, "nnz_C": reference.nnz, "products": products}
        for threads in THREADS:
            fns = assembly_contenders(kernel, A, B, ks, threads)
            for c, fn in fns.items():                   # checked before timing
                check_assembled(fn(), reference, c, f"{what}, {_threads(threads)}")
            times = time_blocked(fns, mode.target_s, mode.min_runs, mode.max_runs,
                                 mode.pause_s)
            spf_t = times["spf_serial" if threads == 1 else "spf_parallel"][0]
            load = round(os.getloadavg()[0], 2)
            for c, (t, runs) in times.items():
                rows.append(_row(**base, threads=threads, contender=c, median_s=t, runs=runs,
                                 ratio_vs_spf=t / spf_t,
                                 parallel_loop=ks.parallel_loop[kernel]
                                 if c == "spf_parallel" else "",
                                 loadavg=load, status="ok"))
            line = "  ".join(f"{c} {times[c][0] * 1e3:.3g}" for c in times)
            print(f"  {what}, nnz(C) {reference.nnz}, {_threads(threads)} (ms): {line}",
                  flush=True)
    mkl.set_threads(1)
    graphblas(1)
    return rows


def run_assembly(mode: Mode) -> list[dict]:
    settle_allocator()
    print("part assembly: compiling spf's SpGEMM and sparse add, serial and parallel",
          flush=True)
    ks = AssemblyKernels.build()
    print("  parallel loops (parallel=True): " + ", ".join(
        f"{k} {loop}" for k, loop in ks.parallel_loop.items()), flush=True)
    rows: list[dict] = []
    for name, size in progress(mode.matrices, "assembly", mode.scale == "quick"):
        rows += run_assembly_matrix(name, size, ks, mode)
    return rows


# --- run -------------------------------------------------------------------------------------
# A part is a function of the mode returning CSV rows (``_row``: its own "part" value, the
# columns it measures); ``plot`` and ``describe`` pick its rows by "part" (``_ok``) and add
# a plot and a ``### ...`` subsection of RESULTS.md for it.  Mode takes the part's grid.
PARTS: dict[str, Callable[[Mode], list[dict]]] = {"image": run_image,
                                                  "assembly": run_assembly}


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
    columns = {"image": ["size", "filter", "density"], "assembly": ["kernel", "matrix", "size"]}
    for part, what in columns.items():
        if _ok(rows, part):
            print_table(_ok(rows, part), ["part", *what, "threads", "contender", "median_s",
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
    """One plot per image size and filter (part image), one for part assembly."""
    return _plot_image(rows, quick) + _plot_assembly(rows, quick)


def _plot_image(rows: list[dict], quick: bool) -> list[Path]:
    """Part image: median time against density, one plot per image size and filter; a colour
    per contender, solid on 1 thread and dashed on 2, the conversions grey and dotted."""
    if not _ok(rows, "image"):
        return []
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


def _plot_assembly(rows: list[dict], quick: bool) -> list[Path]:
    """Part assembly: spf's serial time / each contender's time per matrix (> 1: faster than
    spf's serial build), SpGEMM and sparse add side by side; bars in table order, hatched on
    2 threads."""
    cells = _assembly_cells(rows)
    if not cells:
        return []
    plt = pyplot()
    if plt is None:
        return []
    kernels = [k for k in ASSEMBLY if any(kk == k for kk, _ in cells)]
    series = [(c, t) for c in ASSEMBLY_CONTENDERS for t in THREADS if (c, t) != ("spf_serial", 1)
              and any((c, t) in v for v in cells.values())]
    fig, axes = plt.subplots(1, len(kernels), figsize=(6.5 * len(kernels), 4.8), squeeze=False)
    width = 0.8 / len(series)
    for ax, kernel in zip(axes[0], kernels):
        names = [m for k, m in cells if k == kernel]
        for s_k, (c, t) in enumerate(series):
            xs, ys = [], []
            for x, m in enumerate(names):
                cell = cells[kernel, m]
                if (c, t) in cell and ("spf_serial", 1) in cell:
                    xs.append(x + (s_k - (len(series) - 1) / 2) * width)
                    ys.append(cell["spf_serial", 1] / cell[c, t])
            ax.bar(xs, ys, width, color=f"C{ASSEMBLY_CONTENDERS.index(c)}",
                   hatch="//" if t > 1 else None, edgecolor="white" if t > 1 else None,
                   label=f"{c} {t}t")
        ax.axhline(1.0, color="gray", lw=0.9)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("spf_serial time / contender time")
        ax.set_title(f"{kernel}: {ASSEMBLY[kernel]}, all CSR", fontsize=10)
        ax.grid(True, which="both", axis="y", alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    note = machine_note(rows)
    fig.suptitle("Assembled CSR outputs: speedup over spf's serial build (> 1: faster)"
                 + (f"\n{note}" if note else ""), fontsize=10)
    fig.tight_layout()
    path = plot_path(NAME, "assembly", quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md: one subsection per part measured."""
    out: list[str] = []
    if _ok(rows, "image"):
        out += _describe_image(rows)
    if _ok(rows, "assembly"):
        out += _describe_assembly(rows)
    return "\n".join(out)


def _assembly_cells(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """(kernel, matrix) -> {(contender, threads): median seconds, "rows": .., "nnz": ..,
    "nnz_C": ..}, in the rows' order."""
    cells: dict[tuple[str, str], dict] = {}
    for r in _ok(rows, "assembly"):
        cell = cells.setdefault((str(r["kernel"]), str(r["matrix"])), {
            "rows": r["size"], "nnz": r["nnz"], "nnz_C": r["nnz_C"]})
        cell[str(r["contender"]), int(r["threads"])] = float(r["median_s"])
    return cells


def _describe_assembly(rows: list[dict]) -> list[str]:
    cells = _assembly_cells(rows)
    date = rows[0].get("date", "") if rows else ""
    loops = {str(r["kernel"]): str(r["parallel_loop"]) for r in _ok(rows, "assembly")
             if r["parallel_loop"]}
    out = [f"### Parallel assembly{f' (measured {date})' if date else ''}", "",
           "Sparse outputs spf assembles, all in CSR: SpGEMM `C(i,j) = A(i,k) * B(k,j)` with "
           "C = A A, and sparse add `C(i,j) = A(i,j) + B(i,j)` with C = A + A^T. `spf_serial`: "
           "built with `parallel=False` (one thread builds C); `spf_parallel`: built with "
           "`parallel=True` (each row's distinct entries counted by the threads, a prefix "
           "sum, each row filled by its thread; sparse add merges rows the same way)"
           + (" on the loop " + ", ".join(f"`{loop}` ({k})" for k, loop in loops.items())
              if loops else "")
           + ", its threads set with `set_num_threads`. Both called as a user calls them, "
           '`f(A=..., B=...)` on prebuilt `spf.Tensor.from_scipy("CSR", m)` tensors: '
           "the time includes sizing and allocating C and trimming it. `scipy`: `A @ B` and "
           "`A + B`, **single-threaded** (scipy has no parallel sparse product or sum): its "
           "2-thread comparison below is scipy on 1 thread against spf on 2. `mkl` (add "
           "only; experiments/mkl.py wraps no SpGEMM): `mkl_sparse_d_add` on prebuilt "
           "handles. `graphblas`: python-graphblas `mxm` / `ewise_add` then `wait()`, "
           "`nthreads` set. Every output checked against scipy's (pattern up to explicit "
           "zeros, values rtol 1e-12) before timing; medians of repeated calls.", ""]
    for kernel in ASSEMBLY:
        names = [m for k, m in cells if k == kernel]
        if not names:
            continue
        peers = [(c, t) for c in ("graphblas", "mkl") for t in THREADS
                 if any((c, t) in cells[kernel, m] for m in names)]
        out += [f"**{kernel}** (`{ASSEMBLY[kernel]}`): spf's times (ms); parallel speedup = "
                "spf_serial (1 thread) / spf_parallel (2 threads); other columns: contender "
                "time / spf time (> 1: spf faster), spf being spf_serial on 1 thread and "
                "spf_parallel on 2", "",
                "| matrix | rows | nnz(A) | nnz(C) | serial 1t | parallel 1t | parallel 2t "
                "| parallel speedup | scipy (ms, 1t) | scipy / spf 1t | scipy 1t / spf 2t |"
                + "".join(f" {c} {t}t |" for c, t in peers),
                "|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(peers)]
        speedups = []
        for m in names:
            c = cells[kernel, m]
            serial, par1, par2 = (c.get(k) for k in (("spf_serial", 1), ("spf_parallel", 1),
                                                      ("spf_parallel", 2)))
            scipy_t = c.get(("scipy", 1))

            def ms(v: float | None) -> str:
                return f"{v * 1e3:.3g}" if v else "-"

            def ratio(a: float | None, b: float | None) -> str:
                return f"{a / b:.2f}" if a and b else "-"
            if serial and par2:
                speedups.append(serial / par2)
            out.append(f"| {m} | {c['rows']} | {c['nnz']} | {c['nnz_C']} | {ms(serial)} | "
                       f"{ms(par1)} | {ms(par2)} | {ratio(serial, par2)} | {ms(scipy_t)} | "
                       f"{ratio(scipy_t, serial)} | {ratio(scipy_t, par2)} |" + "".join(
                           f" {ratio(c.get((p, t)), serial if t == 1 else par2)} |"
                           for p, t in peers))
        out.append("")
        over1 = [cells[kernel, m][("spf_parallel", 1)] / cells[kernel, m][("spf_serial", 1)]
                 for m in names if {("spf_parallel", 1), ("spf_serial", 1)}
                 <= cells[kernel, m].keys()]
        if speedups:
            out += [f"- {kernel}: spf_serial's time / spf_parallel's on 2 threads: "
                    f"{_span(speedups)} (geometric mean {geomean(speedups):.2f}; > 1: the "
                    f"parallel build is faster); spf_parallel's time on 1 thread / "
                    f"spf_serial's: {_span(over1)}.", ""]
    loads = [float(r["loadavg"]) for r in _ok(rows, "assembly")
             if int(r["threads"]) > 1 and r["loadavg"] not in ("", None)]
    cores = rows[0].get("cores", "") if rows else ""
    if loads:
        out += [f"Load average (1 minute) at the 2-thread measurements: {min(loads):.2f}-"
                f"{max(loads):.2f}{f' on {cores} cores' if cores else ''}. Where other "
                "processes hold the cores, each parallel region of an OpenMP contender waits "
                "for a time slice (milliseconds), whatever its work.", ""]
    return out


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
    skipped: dict[tuple[str, str, str], list[str]] = {}     # one line per contender and reason
    for r in rows:
        if r.get("part") == "image" and str(r.get("status", "")).startswith("skipped"):
            key = (r["contender"], _threads(int(r["threads"])),
                   str(r["status"]).removeprefix("skipped: "))
            skipped.setdefault(key, []).append(f"{r['size']}x{r['size']} {r['filter']} "
                                               f"density {r['density']}")
    for (who, threads, why), where in skipped.items():
        out += [f"Not measured: {who} on {threads} ({why}), at {len(where)} configuration(s): "
                f"{', '.join(where)}.", ""]
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
    if loops.get("spf") == "I_pi" and sp_spf:
        out.append("- With `parallel=True` spf runs the loop over image rows (`I_pi`) in "
                   "parallel although it carries a dependence through O (image rows i and i+1 "
                   "add into overlapping output rows): each thread adds into a private copy of "
                   "O, the copies summed into O at the end (every thread zeroes and sums a "
                   f"whole (n+K-1)^2 copy). 1-thread / 2-thread time: {_span(sp_spf)}.")
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
