"""SpMSpM C(i,j) = A(i,k) * B(k,j) (paper Table 5): spf's generated kernels with a dense and
an assembled CSR output vs scipy and SuiteSparse:GraphBLAS, and spf over pairs of input layouts.

    python -m experiments.spmspm [--quick] [--matrix path.mtx ...] [--max-products N]

Contenders of the main table (all single-threaded, inputs prebuilt in each contender's native
format, conversions not timed):

- ``spf_csr``: ``spf.Kernel(EXPR, {"A": "CSR", "B": "CSR", "C": "CSR"})``, C of unknown
  sparsity assembled by the kernel (Gustavson: the rows of C come out in order, Z3 proves it,
  and a dense workspace over j gathers each row).  Timed: the public call ``f(A=..., B=...)``
  on prebuilt spf Tensors, which counts the products (the generated ``_bound`` pass) to size
  the output's numpy arrays, runs the kernel, which appends each row in column order to
  them, and trims them: a canonical CSR (sorted column indices).
- ``spf_unsorted``: the same with C in ``CSR_unsorted`` (a layout that orders no column within a
  row): each row is appended in the order its columns were first touched, as scipy does.
- ``spf_dense``: the same with C in ``DenseMatrix``, called with prebuilt argument structs on a
  preallocated C (the kernel zeroes it); only where C takes at most 256 MB.
- ``scipy``: ``A @ B`` on CSR inputs.  scipy's SpGEMM returns CSR with *unsorted* column
  indices (``has_sorted_indices`` is recorded); ``scipy_sorted`` times ``A @ B`` followed by
  ``sort_indices()``, the same output spf and GraphBLAS produce.
- ``graphblas``: python-graphblas (SuiteSparse:GraphBLAS, ``nthreads = 1``),
  ``A.mxm(B, plus_times).new()`` on FP64 matrices built with ``gb.io.from_scipy_sparse``,
  followed by ``wait()`` (python-graphblas runs in non-blocking mode; ``wait`` finishes any
  deferred work such as sorting a jumbled result).  Skipped with a note when the package is
  not installed (``pip install python-graphblas``).

The pair table (paper Table 5) times spf with A and B each in COO, CSR, DCSR and BCSR (4 x 4
blocks) and C in CSR, on the paper's random matrices and on the block-structured matrix; A in
BCSR a second time as ``BCSR_rows``, generated with ``order=["A_pi", "A_pk", "A_pj", "A_pl"]``
(the rows of a block row outside its blocks, so that rows of C come out in order and the
output is gathered in a workspace rather than sorted).
Layouts stored in spf's order: COO as given (row-major here, but the layout promises no
order), BCSR by its reference packer (greedy unaligned blocks; the blocks' explicit zeros are
multiplied like any stored entry, so those outputs hold more stored entries than scipy's).
A pair is skipped when its number of products (over stored entries) exceeds the mode's budget:
pairs whose output is assembled from every product (sorted or scattered) are limited more
tightly.

Inputs: ``C = A A`` for the square matrices of ``experiments/matrices.py`` (quick: its quick
scale; full: medium and full scales, a matrix being skipped when A A takes more products than
the mode's budget), plus TACO's random matrices: ``taco::util::fillTensor(T, FillMethod::Sparse,
0.1)`` as in the paper, which fills ``ceil(0.1 n)`` random rows with ``ceil(0.1 n)`` random
columns each (10% of the rows are nonempty and hold 10% of the columns, 1% of the entries),
with A and B drawn independently (5000 x 5000, 250k nonzeros each, in the full mode; 1000 x
1000 in the quick mode).  ``--matrix`` runs on Matrix Market files instead (``C = A A`` for a
square A, ``A A^T`` otherwise) and writes ``results/spmspm_user.quick.csv``.

Every contender frees its previous output before it runs again (a contender's time otherwise
depended on which outputs the others kept alive: on this machine, a sparse output written to
freshly mapped memory took up to 2.4x longer in some allocation states, the time going to the
kernel clearing new huge pages).  Ratios compare outputs of the same kind: scipy (unsorted)
against spf_unsorted, the others against spf_csr (sorted).  Each contender is warmed up once per
input, then timed as the median of at least 5 runs
(more for short calls), interleaved in rounds.  Every output is checked against scipy's
``A @ B``: values (rtol 1e-9) and structure (spf and GraphBLAS: exactly the entries of the
product of the stored patterns, in sorted order; scipy: its own reference, which drops
entries that cancel to zero).
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

import spf

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
    time_interleaved,
    write_csv,
)
from .matrices import _canonical, dense_lower, matrices, suite

EXPR = "C(i,j) = A(i,k) * B(k,j)"
MAIN = ("spf_csr", "spf_unsorted", "spf_dense", "scipy", "scipy_sorted", "graphblas")
# each contender is compared with the spf kernel producing the same kind of output
PEER = {"spf_unsorted": "spf_csr", "spf_dense": "spf_csr", "scipy": "spf_unsorted",
        "scipy_sorted": "spf_csr", "graphblas": "spf_csr"}
PAIR_LAYOUTS = ("COO", "CSR", "DCSR", "BCSR", "LowerTri")
BLOCK = 4                                   # BCSR block size of the pair table
# A in BCSR once more with the rows of a block row outside its blocks: i then never decreases
ROWS_FIRST = "BCSR_rows"
ROWS_ORDER = ["A_pi", "A_pk", "A_pj", "A_pl"]
PAIR_A = PAIR_LAYOUTS + (ROWS_FIRST,)
DENSE_MAX_BYTES = 256 * 2 ** 20             # spf_dense only where C fits in this
TACO_FILL = 0.1
FIELDS = ("table", "scale", "matrix", "rows", "cols", "nnz_A", "nnz_B", "products", "nnz_C",
          "contender", "A_layout", "B_layout", "C_layout", "assembly", "median_s", "runs",
          "ratio_vs_spf", "sorted_output", "status", "build_s", "loadavg")


@dataclass(frozen=True)
class Mode:
    scales: tuple[str, ...]     # suite scales of the main table
    taco_n: int                 # size of the TACO random matrices
    pair_block: str             # scale of the block-structured matrix of the pair table
    lower_n: int                # size of the dense lower-triangular matrix of the pair table
    max_products: float         # main table: skip an input whose A B takes more products
    sort_products: float        # pair table: budget of pairs assembled by sorting
    ws_products: float          # pair table: budget of the other pairs
    target_s: float             # timed seconds aimed at per contender
    min_runs: int
    max_runs: int


MODES = {
    "quick": Mode(("quick",), 1000, "quick", 96, 3e6, 2e6, 1e7, 0.005, 5, 20),
    "full": Mode(("medium", "full"), 5000, "medium", 512, 6e7, 1.5e7, 2e8, 0.3, 5, 200),
}


# --- inputs ----------------------------------------------------------------------------------
def taco_sparse(n: int, fill: float, seed: int) -> sp.csr_matrix:
    """TACO's ``fillMatrix(T, FillMethod::Sparse, fill)``: ``ceil(fill * n)`` random rows, each
    with ``ceil(fill * n)`` random columns (a fresh shuffle per row); values in [0.5, 1.5)."""
    rng = np.random.default_rng(seed)
    count = math.ceil(fill * n)
    rows = rng.permutation(n)[:count]
    cols = rng.permuted(np.tile(np.arange(n), (count, 1)), axis=1)[:, :count]
    a = sp.csr_matrix((rng.uniform(0.5, 1.5, count * count),
                       (np.repeat(rows, count), cols.reshape(-1))), shape=(n, n))
    return _canonical(a)


def inputs(mode: Mode, files: list[str]) -> list[tuple[str, str, sp.csr_matrix, sp.csr_matrix]]:
    """(scale, name, A, B) of the main table."""
    if files:
        out = []
        for name, a in matrices("user", files):
            out.append(("user", name, a, a if a.shape[0] == a.shape[1] else _canonical(a.T)))
        return out
    n = mode.taco_n
    out = [("taco", f"random{n}_fill{TACO_FILL:g}", taco_sparse(n, TACO_FILL, 1),
            taco_sparse(n, TACO_FILL, 2))]
    for scale in mode.scales:
        out += [(scale, name, a, a) for name, a in suite(scale) if a.shape[0] == a.shape[1]]
    return out


def products(a: sp.csr_matrix, b: sp.csr_matrix) -> int:
    """Multiplications of the row-by-row product over stored entries (sum over k of the stored
    entries of column k of A times those of row k of B)."""
    return int(np.dot(np.bincount(a.indices, minlength=a.shape[1]).astype(np.int64),
                      np.diff(b.indptr).astype(np.int64)))


def pattern(a: sp.csr_matrix) -> sp.csr_matrix:
    """The stored entries of ``a`` (explicit zeros included) with value 1."""
    return sp.csr_matrix((np.ones(len(a.indices)), a.indices, a.indptr), shape=a.shape)


def stored(t: spf.Tensor) -> sp.csr_matrix:
    """The entries an spf matrix stores, explicit zeros included (BCSR: every slot of its
    blocks inside the matrix), as canonical-order CSR."""
    if t.layout.name.startswith("BCSR"):
        b = int(dict(t.layout.params)["B"])
        n_rows, n_cols = t.shape
        ptr, col = t["rowPtr"], t["colIdx"]
        block_row = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
        r = (b * block_row[:, None, None] + np.arange(b)[None, :, None]) \
            + np.zeros((1, 1, b), dtype=np.int64)
        c = (col[:, None, None] + np.arange(b)[None, None, :]) + np.zeros((1, b, 1), dtype=np.int64)
        keep = (r < n_rows) & (c < n_cols)
        v = t["data"][:len(col) * b * b].reshape(-1, b, b)
        m = sp.coo_matrix((v[keep], (r[keep], c[keep])), shape=t.shape).tocsr()
        m.sort_indices()       # blocks never overlap: no duplicates to merge
        return m
    m = t.to_scipy().tocsr()
    m.sort_indices()
    return m


def check(label: str, got: sp.csr_matrix, reference: sp.csr_matrix,
          structure: sp.csr_matrix) -> None:
    """``got`` (sorted CSR) has exactly ``structure``'s entries and ``reference``'s values
    (entries of ``structure`` missing from ``reference`` must be 0)."""
    if not (np.array_equal(got.indptr, structure.indptr)
            and np.array_equal(got.indices, structure.indices)):
        raise AssertionError(f"{label}: structure differs from the product of the stored "
                             f"patterns ({got.nnz} vs {structure.nnz} entries)")
    n_cols = got.shape[1]
    rows = np.repeat(np.arange(got.shape[0], dtype=np.int64), np.diff(got.indptr))
    keys = rows * n_cols + got.indices
    ref_rows = np.repeat(np.arange(reference.shape[0], dtype=np.int64), np.diff(reference.indptr))
    ref_keys = ref_rows * n_cols + reference.indices
    at = np.searchsorted(keys, ref_keys)
    if len(ref_keys) and (at.max() >= len(keys) or not np.array_equal(keys[at], ref_keys)):
        raise AssertionError(f"{label}: scipy's product has entries outside the output")
    expected = np.zeros(len(keys))
    expected[at] = reference.data
    np.testing.assert_allclose(got.data, expected, rtol=1e-9,
                               atol=1e-12 * (np.abs(expected).max(initial=0.0) + 1.0),
                               err_msg=label)


# --- contenders ------------------------------------------------------------------------------
@dataclass
class Contenders:
    csr: Any                                            # CompiledKernel, C in CSR
    unsorted: Any                                       # CompiledKernel, C in CSR_unsorted
    dense: Any                                          # CompiledKernel, C in DenseMatrix
    pairs: dict = field(default_factory=dict)           # (A layout, B layout) -> CompiledKernel
    missing: dict = field(default_factory=dict)         # (A layout, B layout) -> why
    build_s: dict = field(default_factory=dict)         # label -> seconds to generate + compile
    gb: Any = None

    @classmethod
    def build(cls, with_pairs: bool) -> Contenders:
        build_s: dict[str, float] = {}

        def compile_(label: str, layouts: dict, params: dict | None = None, name: str = "",
                     order: list[str] | None = None):
            t0 = time.perf_counter()
            f = spf.Kernel(EXPR, layouts, params=params, name=name, order=order).compile()
            build_s[label] = time.perf_counter() - t0
            return f
        con = cls(compile_("CSR x CSR -> CSR", {"A": "CSR", "B": "CSR", "C": "CSR"},
                           name="spmspm_csr"),
                  compile_("CSR x CSR -> CSR_unsorted", {"A": "CSR", "B": "CSR",
                                                         "C": "CSR_unsorted"},
                           name="spmspm_csr_unsorted"),
                  compile_("CSR x CSR -> DenseMatrix", {"A": "CSR", "B": "CSR",
                                                        "C": "DenseMatrix"}, name="spmspm_dense"),
                  build_s=build_s, gb=graphblas())
        for la in PAIR_A if with_pairs else ():
            for lb in PAIR_LAYOUTS:
                lay_a = "BCSR" if la == ROWS_FIRST else la
                params = {t: {"B": BLOCK} for t, lay in (("A", lay_a), ("B", lb))
                          if lay == "BCSR"}
                try:
                    con.pairs[la, lb] = compile_(f"{la} x {lb} -> CSR",
                                                 {"A": lay_a, "B": lb, "C": "CSR"}, params,
                                                 f"spmspm_{la}_{lb}".lower(),
                                                 ROWS_ORDER if la == ROWS_FIRST else None)
                except spf.SpfError as exc:
                    con.missing[la, lb] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                    print(f"  spf {la} x {lb}: not available ({con.missing[la, lb]})")
        return con


def _spf_call(compiled, result: dict, **tensors: spf.Tensor) -> Callable[[], None]:
    def run() -> None:
        result.pop("C", None)       # free the previous output first (module docstring)
        result["C"] = compiled(**tensors)
    return run


# --- the main table --------------------------------------------------------------------------
def run_main(scale: str, name: str, A: sp.csr_matrix, B: sp.csr_matrix, con: Contenders,
             mode: Mode, max_products: float) -> list[dict]:
    work = products(A, B)
    base = {"table": "main", "scale": scale, "matrix": name, "rows": A.shape[0],
            "cols": B.shape[1], "nnz_A": A.nnz, "nnz_B": B.nnz, "products": work,
            "A_layout": "CSR", "B_layout": "CSR", "loadavg": round(os.getloadavg()[0], 2)}
    rows = {c: {**base, "contender": c, "C_layout": "", "nnz_C": "", "median_s": "",
                "runs": 0, "sorted_output": "", "assembly": "", "status": "ok",
                "build_s": ""} for c in MAIN}
    if work > max_products:
        for r in rows.values():
            r["status"] = f"skipped: {work:.3g} products > budget {max_products:.3g}"
        print(f"  {scale:6s} {name:22s} skipped ({work:.3g} products)", flush=True)
        return list(rows.values())
    reference = A @ B
    reference.sort_indices()
    structure = pattern(A) @ pattern(B)
    structure.sort_indices()
    At, Bt = spf.Tensor.from_scipy("CSR", A), spf.Tensor.from_scipy("CSR", B)
    fns: dict[str, Callable[[], None]] = {}
    results: dict[str, dict] = {c: {} for c in MAIN}
    fns["spf_csr"] = _spf_call(con.csr, results["spf_csr"], A=At, B=Bt)
    fns["spf_unsorted"] = _spf_call(con.unsorted, results["spf_unsorted"], A=At, B=Bt)
    dense_bytes = 8 * A.shape[0] * B.shape[1]
    C = None
    if dense_bytes <= DENSE_MAX_BYTES:
        C = np.full((A.shape[0], B.shape[1]), np.nan)
        fns["spf_dense"] = prepared_call(con.dense, C, A=At, B=Bt)
    else:
        rows["spf_dense"]["status"] = (f"skipped: dense C takes {dense_bytes / 2 ** 20:.0f} MB "
                                       f"> {DENSE_MAX_BYTES / 2 ** 20:.0f} MB")

    def scipy_call(result: dict, sort: bool) -> Callable[[], None]:
        def run() -> None:
            result.pop("C", None)
            result["C"] = A @ B
            if sort:
                result["C"].sort_indices()
        return run
    fns["scipy"] = scipy_call(results["scipy"], False)
    fns["scipy_sorted"] = scipy_call(results["scipy_sorted"], True)
    gb = con.gb
    if gb is not None:
        GA, GB = gb.io.from_scipy_sparse(A), gb.io.from_scipy_sparse(B)

        def grb(result=results["graphblas"]) -> None:
            result.pop("C", None)
            out = GA.mxm(GB, gb.semiring.plus_times).new()
            out.wait()
            result["C"] = out
        fns["graphblas"] = grb
    else:
        rows["graphblas"]["status"] = "skipped: python-graphblas is not installed"
    timed = time_interleaved(fns, mode.target_s, mode.min_runs, mode.max_runs)
    for c, (median, runs) in timed.items():
        rows[c].update(median_s=median, runs=runs)
    # correctness of the last run of every contender
    label = f"{{}} on {scale} {name}"
    out = results["spf_csr"]["C"]
    rows["spf_csr"].update(C_layout="CSR", nnz_C=out.values.size, sorted_output="yes",
                           assembly=con.csr.kernel.assembly.mode,
                           build_s=con.build_s["CSR x CSR -> CSR"])
    check(label.format("spf_csr"), out.to_scipy().tocsr(), reference, structure)
    out = results["spf_unsorted"]["C"]
    got = out.to_scipy().tocsr()
    rows["spf_unsorted"].update(C_layout="CSR_unsorted", nnz_C=out.values.size,
                                sorted_output="yes" if got.has_sorted_indices else "no",
                                assembly=con.unsorted.kernel.assembly.mode,
                                build_s=con.build_s["CSR x CSR -> CSR_unsorted"])
    got.sort_indices()
    check(label.format("spf_unsorted"), got, reference, structure)
    if C is not None:
        np.testing.assert_allclose(C, reference.toarray(), rtol=1e-9, atol=1e-12,
                                   err_msg=label.format("spf_dense"))
        rows["spf_dense"].update(C_layout="DenseMatrix", nnz_C=C.size,
                                 build_s=con.build_s["CSR x CSR -> DenseMatrix"])
    for c in ("scipy", "scipy_sorted"):
        got = results[c]["C"]
        rows[c].update(C_layout="CSR", nnz_C=got.nnz,
                       sorted_output="yes" if got.has_sorted_indices else "no")
        got = got.copy()
        got.sort_indices()
        check(label.format(c), got, reference, reference)
    if gb is not None:
        got = results["graphblas"]["C"]
        exported = got.ss.export("csr", sort=False)
        rows["graphblas"].update(C_layout=f"GrB {exported['format']}", nnz_C=got.nvals,
                                 sorted_output="yes" if exported.get("sorted_cols") else "no")
        check(label.format("graphblas"), gb.io.to_scipy_sparse(got, "csr").tocsr(),
              reference, structure)
    for c, r in rows.items():
        if r["median_s"] != "" and c in PEER:
            r["ratio_vs_spf"] = r["median_s"] / timed[PEER[c]][0]
    summary = "  ".join(f"{c}={timed[c][0] * 1e3:.3g}ms" for c in MAIN
                        if c in timed)
    print(f"  {scale:6s} {name:22s} {summary}", flush=True)
    return list(rows.values())


# --- the pair table --------------------------------------------------------------------------
def pack(layout: str, m: sp.csr_matrix) -> spf.Tensor | None:
    """m in ``layout`` (None: LowerTri and a matrix that is not square lower-triangular)."""
    if layout == "LowerTri":
        lower = m.shape[0] == m.shape[1] and sp.triu(m, 1).nnz == 0
        return spf.Tensor.from_scipy("LowerTri", m) if lower else None
    if layout == "BCSR":
        return spf.Tensor.from_scipy("BCSR", m, B=BLOCK)
    if layout == "CSR":
        return spf.Tensor.from_arrays("CSR", m.shape, {
            "numRows": m.shape[0], "numCols": m.shape[1], "rowPtr": m.indptr,
            "colIdx": m.indices, "data": m.data})
    return spf.Tensor.from_scipy(layout, m)


def run_pairs(scale: str, name: str, A: sp.csr_matrix, B: sp.csr_matrix, con: Contenders,
              mode: Mode) -> list[dict]:
    reference = A @ B
    reference.sort_indices()
    packed = {lay: (pack(lay, A), pack(lay, B)) for lay in PAIR_LAYOUTS}
    packed[ROWS_FIRST] = packed["BCSR"]
    kept = {lay: (a and stored(a), b and stored(b)) for lay, (a, b) in packed.items()}
    base = {"table": "pairs", "scale": scale, "matrix": name, "rows": A.shape[0],
            "cols": B.shape[1], "nnz_A": A.nnz, "nnz_B": B.nnz, "C_layout": "CSR",
            "loadavg": round(os.getloadavg()[0], 2)}
    rows, fns, results = {}, {}, {}
    for la in PAIR_A:
        for lb in PAIR_LAYOUTS:
            sa, sb = kept[la][0], kept[lb][1]
            if sa is None or sb is None:
                rows[la, lb] = {**base, "contender": f"spf {la} x {lb}", "A_layout": la,
                                "B_layout": lb, "median_s": "", "runs": 0,
                                "status": "skipped: LowerTri stores square lower-triangular "
                                          "matrices only"}
                continue
            row = {**base, "contender": f"spf {la} x {lb}", "A_layout": la, "B_layout": lb,
                   "nnz_A": sa.nnz, "nnz_B": sb.nnz, "products": products(sa, sb),
                   "nnz_C": "", "median_s": "", "runs": 0, "sorted_output": "", "assembly": "",
                   "status": "ok", "build_s": con.build_s.get(f"{la} x {lb} -> CSR", "")}
            rows[la, lb] = row
            if (la, lb) in con.missing:
                row["status"] = "invalid: " + con.missing[la, lb]
                continue
            f = con.pairs[la, lb]
            row["assembly"] = f.kernel.assembly.mode
            budget = mode.sort_products if row["assembly"] in ("sort", "bucket") \
                else mode.ws_products
            if row["products"] > budget:
                row["status"] = (f"skipped: {row['products']:.3g} products > budget "
                                 f"{budget:.3g} ({row['assembly']} assembly)")
                continue
            results[la, lb] = {}
            fns[la, lb] = _spf_call(f, results[la, lb], A=packed[la][0], B=packed[lb][1])
    timed = time_interleaved(fns, mode.target_s, mode.min_runs, mode.max_runs)
    structures: dict[tuple[bool, bool], sp.csr_matrix] = {}
    for (la, lb), (median, runs) in timed.items():
        key = (la in ("BCSR", ROWS_FIRST), lb == "BCSR")   # only BCSR stores zeros
        if key not in structures:
            structures[key] = pattern(kept[la][0]) @ pattern(kept[lb][1])
            structures[key].sort_indices()
        out = results[la, lb]["C"]
        check(f"spf {la} x {lb} on {name}", out.to_scipy().tocsr(), reference, structures[key])
        rows[la, lb].update(median_s=median, runs=runs, nnz_C=out.values.size,
                            sorted_output="yes")
    csr = timed.get(("CSR", "CSR"))
    for r in rows.values():
        r["ratio_vs_spf"] = r["median_s"] / csr[0] if csr and r["median_s"] != "" else ""
    for la in PAIR_A:
        cells = "  ".join(f"{lb}={timed[la, lb][0] * 1e3:.3g}ms" if (la, lb) in timed
                          else f"{lb}=skip" for lb in PAIR_LAYOUTS)
        print(f"  pairs {name:22s} A {la:9s}: {cells}", flush=True)
    return list(rows.values())


# --- driver ----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> list[dict]:
    parser = experiment_parser(__doc__)
    parser.add_argument("--max-products", type=float, default=None,
                        help="skip inputs whose product takes more multiplications")
    args = parser.parse_args(argv)
    mode = MODES["quick" if args.quick else "full"]
    max_products = args.max_products or mode.max_products
    t_start = time.perf_counter()
    print("compiling spf kernels", flush=True)
    con = Contenders.build(with_pairs=not args.matrix)
    if con.gb is None:
        print("  python-graphblas is not installed: no GraphBLAS column "
              "(pip install python-graphblas)", flush=True)
    rows: list[dict] = []
    cells = inputs(mode, args.matrix)
    for scale, name, A, B in progress(cells, "spmspm", args.quick):
        print(f"{scale} {name}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros "
              f"[{time.perf_counter() - t_start:.0f} s]", flush=True)
        rows += run_main(scale, name, A, B, con, mode, max_products)
    if not args.matrix:     # the pair table: the paper's random matrices and block8
        taco = cells[0]
        block8 = next(a for n, a in suite(mode.pair_block, ["block8"]))
        lower = dense_lower(mode.lower_n)
        for scale, name, A, B in (taco, (mode.pair_block, "block8", block8, block8),
                                  (mode.pair_block, f"dense_lower{mode.lower_n}", lower, lower)):
            print(f"pairs {scale} {name} [{time.perf_counter() - t_start:.0f} s]", flush=True)
            rows += run_pairs(scale, name, A, B, con, mode)
    rows = [{k: r.get(k, "") for k in FIELDS} for r in rows]
    columns = ["table", "scale", "matrix", "contender", "median_s", "runs", "ratio_vs_spf",
               "status"]
    print_table([{c: r[c] if c != "status" else str(r[c])[:40] for c in columns} for r in rows],
                columns)
    path = write_csv("spmspm_user" if args.matrix else "spmspm", rows,
                     args.quick or bool(args.matrix))
    print("wrote", path)
    if not args.matrix:
        plot(rows, args.quick)
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return rows


def plot(rows: list[dict], quick: bool = False) -> list:
    """Speedup of spf (C in CSR) over each peer per matrix of the main table."""
    groups: dict[str, dict[str, float]] = {}
    for r in rows:
        ratio = _num(r["ratio_vs_spf"])
        if r["table"] == "main" and ratio and r["contender"] != "spf_csr":
            groups.setdefault(r["matrix"], {})[r["contender"]] = ratio
    return bar_chart(groups, plot_path("spmspm", "speedup", quick),
                     f"SpMSpM C = A B, A and B in CSR: contender time / spf_csr time "
                     f"(> 1: spf faster; {machine_note(rows)})", "speedup of spf_csr",
                     log=True, reference=1.0)


# --- reporting -------------------------------------------------------------------------------
def _num(v: object) -> float | None:
    try:
        return float(v) if v not in ("", None) else None
    except ValueError:
        return None


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def _main_cells(rows: list[dict]) -> dict[tuple[str, str], dict[str, dict]]:
    """(scale, matrix) -> contender -> row, for the main table's inputs that ran."""
    cells: dict[tuple[str, str], dict[str, dict]] = {}
    for r in rows:
        if r["table"] == "main":
            cells.setdefault((r["scale"], r["matrix"]), {})[r["contender"]] = r
    return {k: v for k, v in cells.items() if _num(v.get("spf_csr", {}).get("median_s"))}


def _why(c: dict[str, dict], spf: str, loser_to: list[str]) -> str:
    """Why the spf kernel ``spf`` is slower than ``loser_to`` on one input (from its numbers)."""
    spf_s = float(c[spf]["median_s"])
    work = int(float(c[spf]["products"]))
    nnz_c = int(float(c[spf]["nnz_C"] or 0))
    parts = [f"{spf_s / max(work, 1) * 1e9:.1f} ns per product, "
             f"{spf_s / max(nnz_c, 1) * 1e9:.1f} ns per entry of C"]
    if spf == "spf_csr":
        parts.append("spf emits every row of C in column order (a bitmap walk over the "
                     "row's workspace words, or a sort of a short row)")
    rows = int(float(c[spf]["rows"]))
    if nnz_c < 20 * rows:
        parts.append(f"short rows ({nnz_c / max(rows, 1):.1f} entries of C per row): spf's "
                     "work per row (a call flushing the row's workspace group, clearing its "
                     "bits, opening the row) weighs more than in the library")
    if spf_s < 3e-3:
        parts.append("at this size the fixed cost of a call (argument checks, the bound pass, "
                     "output allocation, a workspace of numCols entries) weighs in")
    return "; ".join(parts)


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md: times, ratios (contender / spf), geomeans, losses and why."""
    cells = _main_cells(rows)
    others = [c for c in MAIN if c != "spf_csr"]
    unsorted = sorted({r["matrix"] for r in rows if r["contender"] == "scipy"
                       and r.get("sorted_output") == "no"})
    grb_missing = any(str(r["status"]).startswith("skipped: python-graphblas") for r in rows)
    lines = [
        "SpMSpM `C(i,j) = A(i,k) * B(k,j)`, single thread, inputs in each contender's native "
        "format built beforehand. `spf_csr`: the generated kernel with A, B and C in CSR, C "
        "assembled by the kernel (rows of C proven in order by Z3, a dense workspace gathers "
        "each row and appends it, in column order, to the CSR arrays, which a first pass "
        "counting the products sized), timed as the public call "
        "`f(A=..., B=...)` returning an spf Tensor with sorted columns. `spf_unsorted`: the "
        "same kernel with C in `CSR_unsorted`, a layout that orders no column within a row, "
        "so each row is appended in the order its columns were first touched (like scipy). "
        "`spf_dense`: C in "
        "`DenseMatrix`, preallocated, zeroed by the kernel (only where C fits in 256 MB). "
        "`scipy`: `A @ B`, whose columns come out unsorted"
        + (f" (on {len(unsorted)} of {len(cells)} inputs here)" if cells else "")
        + "; `scipy_sorted`: `A @ B` then `sort_indices()`. `graphblas`: SuiteSparse:GraphBLAS "
        "through python-graphblas with 1 thread, `A.mxm(B, plus_times).new()` then `wait()` "
        "(its output is sorted). Median of >= 5 runs after a warm-up, every output checked "
        "against scipy (values and structure). Inputs: `C = A A` over the matrix suite (all "
        "square) and TACO's random 5000 x 5000 matrices of the paper "
        "(`fillTensor(FillMethod::Sparse, 0.1)`: 10% of the rows nonempty, each with 10% of "
        "the columns, A and B independent). Ratio = contender time / time of the spf kernel "
        "with the same kind of output (scipy: spf_unsorted; the others: spf_csr): > 1 means "
        "spf is faster.",
        ""]
    if grb_missing:
        lines += ["python-graphblas was not installed for this run: no GraphBLAS column.", ""]
    head = ["scale", "matrix", "rows", "nnz(A)", "products", "nnz(C)", "spf_csr (ms)"] + [
        f"{c} (ms, vs {PEER[c]})" for c in others]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (scale, matrix), c in cells.items():
        s = c["spf_csr"]
        vals = [scale, matrix, s["rows"], s["nnz_A"], s["products"], s["nnz_C"],
                _ms(float(s["median_s"]))]
        for o in others:
            t, peer = _num(c.get(o, {}).get("median_s")), _num(c.get(PEER[o], {}).get("median_s"))
            vals.append(f"{_ms(t)} ({t / peer:.2f}x)" if t is not None and peer else "-")
        lines.append("| " + " | ".join(str(v) for v in vals) + " |")
    scales = list(dict.fromkeys(k[0] for k in cells))
    lines += ["", "Geometric means of the ratios (contender time / time of the spf kernel with "
              "the same kind of output, in parentheses; > 1: spf faster), per scale and over "
              "all inputs:", "",
              "| scale | inputs | " + " | ".join(f"{o} (vs {PEER[o]})" for o in others) + " |",
              "|---|---|" + "---|" * len(others)]
    for scale in scales + [None]:
        group = [c for k, c in cells.items() if scale is None or k[0] == scale]
        vals = []
        for o in others:
            ratios = [float(c[o]["median_s"]) / float(c[PEER[o]]["median_s"])
                      for c in group if _num(c.get(o, {}).get("median_s"))
                      and _num(c.get(PEER[o], {}).get("median_s"))]
            vals.append(f"{geomean(ratios):.2f}x ({len(ratios)})" if ratios else "-")
        label = [scale or "**all**", str(len(group))]
        lines.append("| " + " | ".join(label + vals) + " |")

    cross = [float(c["scipy"]["median_s"]) / float(c["spf_csr"]["median_s"])
             for c in cells.values() if _num(c.get("scipy", {}).get("median_s"))]
    if cross:
        lines += ["", f"scipy's unsorted `A @ B` against spf_csr's sorted output (not the same "
                  f"output; for reference): geomean {geomean(cross):.2f}x over {len(cross)} "
                  f"inputs, {min(cross):.2f}x-{max(cross):.2f}x."]

    # where spf loses against a library producing the same kind of output
    losses = []
    for (scale, matrix), c in cells.items():
        for spf_kind in ("spf_unsorted", "spf_csr"):
            mine = _num(c.get(spf_kind, {}).get("median_s"))
            faster = [o for o in ("scipy", "scipy_sorted", "graphblas")
                      if PEER[o] == spf_kind and mine
                      and _num(c.get(o, {}).get("median_s"))
                      and float(c[o]["median_s"]) < 0.95 * mine]
            if faster:
                losses.append((scale, matrix, c, spf_kind, faster))
    lines += ["", "### Where spf is slower than a library with the same output (ratio < 0.95)",
              ""]
    if not losses:
        lines.append("Nowhere.")
    else:
        lines += ["| scale | matrix | spf kernel | faster | why |", "|---|---|---|---|---|"]
        for scale, matrix, c, spf_kind, faster in losses:
            mine = float(c[spf_kind]["median_s"])
            who = ", ".join(f"{o} {float(c[o]['median_s']) / mine:.2f}x" for o in faster)
            lines.append(f"| {scale} | {matrix} | {spf_kind} | {who} | "
                         f"{_why(c, spf_kind, faster)} |")
    lines += _interleaving_notes(rows, cells)
    lines += ["", _analysis(cells)]
    skipped = sorted({(r["scale"], r["matrix"], r["status"]) for r in rows
                      if r["table"] == "main" and r["contender"] == "spf_csr"
                      and str(r["status"]).startswith("skipped")})
    if skipped:
        lines += ["", "Inputs left out of the main table (their product would take too long "
                  "or too much memory for this run): "
                  + "; ".join(f"{s} {m} ({why.removeprefix('skipped: ')})"
                              for s, m, why in skipped) + "."]
    lines += ["", _pairs(rows, cells)]
    builds = {r["contender"]: _num(r["build_s"]) for r in rows
              if r["table"] == "main" and _num(r.get("build_s"))}
    if builds:
        lines += ["", "Generating and compiling the kernels took " + ", ".join(
            f"{c} {t:.2f} s" for c, t in builds.items()) + " (C compiles are cached)."]
    return "\n".join(lines)


def _interleaving_notes(rows: list[dict], cells: dict[tuple[str, str], dict[str, dict]]
                        ) -> list[str]:
    """Inputs where the pair table's CSR x CSR cell (the same kernel and input, timed without
    the other contenders interleaved) differs from the main table's spf_csr by over 1.3x."""
    out = []
    for r in rows:
        if r["table"] != "pairs" or (r["A_layout"], r["B_layout"]) != ("CSR", "CSR"):
            continue
        main = cells.get((r["scale"], r["matrix"]), {}).get("spf_csr")
        alone, mixed = _num(r["median_s"]), _num(main["median_s"]) if main else None
        if alone and mixed and max(alone, mixed) > 1.3 * min(alone, mixed):
            ratios = ", ".join(f"{o} {float(c['median_s']) / alone:.2f}x" for o in
                               ("scipy", "scipy_sorted", "graphblas")
                               if _num((c := cells[(r["scale"], r["matrix"])].get(o, {}))
                                       .get("median_s")))
            out.append(f"- {r['scale']} {r['matrix']}: the same spf kernel on the same input "
                       f"took {_ms(alone)} ms in the pair table (spf runs only) against "
                       f"{_ms(mixed)} ms here, where its runs alternate with the other "
                       "contenders; with the "
                       f"pair-table time the ratios would be {ratios}.")
    if out:
        out = ["", "Timing caveat:", ""] + out
    return out


def _analysis(cells: dict[tuple[str, str], dict[str, dict]]) -> str:
    """Per-product and per-entry costs over all inputs (medians), to read the table."""
    def per(c: dict, who: str, what: str) -> float | None:
        t = _num(c.get(who, {}).get("median_s"))
        n = _num(c["spf_csr"].get(what))
        return t / n * 1e9 if t and n else None
    big = [c for c in cells.values() if float(c["spf_csr"]["median_s"]) >= 1e-3]
    if not big:
        return ""
    out = []
    for who in ("spf_csr", "spf_unsorted", "scipy", "scipy_sorted", "graphblas", "spf_dense"):
        v = [x for c in big if (x := per(c, who, "products")) is not None]
        if v:
            out.append(f"{who} {float(np.median(v)):.1f}")
    return ("Median time per product (ns, over the inputs where spf_csr takes >= 1 ms): "
            + ", ".join(out) + ". `spf_dense` skips assembly altogether (a dense row-major C, "
            "`C[i][j] += ...`), so where it runs it shows what the assembly costs; it loses "
            "where C is very sparse, because it zeroes all of the rows x cols array.")


def _pairs(rows: list[dict], cells: dict[tuple[str, str], dict[str, dict]]) -> str:
    pairs = [r for r in rows if r["table"] == "pairs"]
    if not pairs:
        return ""
    lines = ["### Layout pairs (paper Table 5)", "",
             "spf with A and B in COO, CSR, DCSR, BCSR (4 x 4 blocks) and LowerTri (packed "
             "lower triangle by rows; only on the dense lower-triangular matrix, the one it "
             "stores) and C in CSR; cells: "
             "median ms and, in parentheses, time / time of CSR x CSR. `*`: the loops do not "
             "produce the rows of C in order (COO promises no order, and BCSR's default loop "
             "order visits the 4 rows of a block inside each block), so every product is "
             "scattered to its row's segment (bucket assembly: a first pass counts each row's "
             "products) and each segment is sorted and combined; the other pairs gather rows "
             "in a workspace. "
             f'`{ROWS_FIRST}`: A in BCSR generated with `order=["A_pi", "A_pk", "A_pj", '
             '"A_pl"]`, which puts the rows of a block row outside its blocks, so Z3 proves '
             "the rows of C ordered and the workspace is used. BCSR multiplies the explicit "
             "zeros of its blocks too (products are counted over stored entries).", ""]
    for (scale, matrix) in dict.fromkeys((r["scale"], r["matrix"]) for r in pairs):
        group = {(r["A_layout"], r["B_layout"]): r for r in pairs
                 if r["scale"] == scale and r["matrix"] == matrix
                 and not str(r["status"]).startswith("skipped: LowerTri")}
        logical = cells.get((scale, matrix), {}).get("spf_csr", {}).get("products")
        ref = cells.get((scale, matrix), {})
        ref_text = ", ".join(f"{o} {_ms(float(ref[o]['median_s']))} ms" for o in
                             ("scipy", "scipy_sorted", "graphblas")
                             if _num(ref.get(o, {}).get("median_s")))
        a_labels = list(dict.fromkeys(k[0] for k in group))
        b_labels = list(dict.fromkeys(k[1] for k in group))
        lines += [f"**{scale} {matrix}**" + (f" (main table, same input: {ref_text})"
                                              if ref_text else ""), "",
                  "| A \\ B | " + " | ".join(b_labels) + " |",
                  "|---|" + "---|" * len(b_labels)]
        for la in a_labels:
            vals = []
            for lb in b_labels:
                r = group[la, lb]
                star = "*" if r["assembly"] in ("sort", "bucket") else ""
                t, ratio = _num(r["median_s"]), _num(r["ratio_vs_spf"])
                if t is None:
                    status = str(r["status"])
                    vals.append("skipped" + star if status.startswith("skipped") else "n/a")
                else:
                    vals.append(f"{_ms(t)}{star} ({ratio:.2f}x)" if ratio else _ms(t) + star)
            lines.append(f"| {la} | " + " | ".join(vals) + " |")
        skipped = [r for r in group.values() if str(r["status"]).startswith("skipped")]
        if skipped:
            lines += ["", "Skipped: " + "; ".join(
                f"{r['A_layout']} x {r['B_layout']} ({r['status'].removeprefix('skipped: ')}"
                + (f", {float(r['products']) / float(logical):.1f}x the logical product's"
                   if logical else "") + ")" for r in skipped) + "."]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
