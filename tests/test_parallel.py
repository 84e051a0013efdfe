"""``parallel=True`` (issue 4): every kernel x layout family of the core tests, run with 1, 2
and 4 OpenMP threads, equals the serial kernel and numpy.

- Families: sparse dot and three-way dot (SV variants and DenseVector), SpMV over every matrix
  layout, SpMSpV with every SV variant, SpMSpM over every pair of {COO, CSR, DCSR, BCSR,
  LowerTri}, TTV/TTM on CSF and DenseTensor3 (three-way dots are sampled).
- Inputs are large enough for several ``schedule(guided,32)`` chunks (300 rows, vectors of
  3000) plus empty / one-nonzero / zero-size edge cases; SpMSpV gets a vector with a handful of
  nonzeros and a dense-ish one, so both branches of the run-time SeqIter / HashMap choice run.
- The generated C: the expected loop carries ``#pragma omp parallel for schedule(guided,32)``,
  scalar outputs add ``reduction(+:spf_acc)``, every SeqIter state used inside a parallel loop
  and declared outside it is ``private(...)``, hash maps are built before the parallel region
  (never inside it), and scatter kernels (CSC, COO SpMV ...) get no pragma; DIA SpMV shares out
  the rows of each diagonal (`omp for` inside a `parallel` region over the diagonals).
- Row-parallel kernels are bit-for-bit equal to the serial kernel (each output element is
  still accumulated by one thread in the serial order); reductions agree to rounding.

Kernels are built once per combination (module cache); serial and parallel C compile with
-Wall -Werror (the parallel one with -fopenmp).
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean, covering, lanes

import spf

DOT = "v = A(i) * B(i)"
DOT3 = "v = A(i) * B(i) * C(i)"
SPMV = "y(i) = A(i,j) * x(j)"
SPMSPM = "C(i,j) = A(i,k) * B(k,j)"
TTV = "y(i,j) = A(i,j,k) * x(k)"
TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"

THREADS = (1, 2, 4)
PRAGMA = "#pragma omp parallel for schedule(guided,32)"     # iterations of uneven work
STATIC = "#pragma omp parallel for schedule(static)"          # iterations of the same work
VECTORS = ["SV", "SV_unsorted", "SV_decreasing", "DenseVector"]
SPARSE_VECTORS = ["SV", "SV_unsorted", "SV_decreasing"]
MATRICES = ["CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "ELL", "DIA", "LowerTri",
            "DenseMatrix", "CUDAmma16x16"]
SPMSPM_LAYOUTS = ["COO", "CSR", "DCSR", "BCSR", "LowerTri"]
DENSE = {"DenseVector", "DenseMatrix"}
ROW_PARALLEL = {"CSR", "DCSR", "BCSR", "ELL", "CUDAmma16x16"}   # SpMV/SpMSpV parallel on rows


# -- kernels ------------------------------------------------------------------------------
@functools.cache
def kernels(expr: str, layouts: tuple, params: tuple = ()):
    """(parallel Kernel, compiled parallel, compiled serial); one build per combination."""
    prm = {t: dict(p) for t, p in params}
    par = spf.Kernel(expr, dict(layouts), params=prm, parallel=True)
    if par.parallel_loop is None:
        serial = par           # nothing parallel: the same C as the serial kernel
    else:
        serial = spf.Kernel(expr, dict(layouts), params=prm)
        assert_compiles_clean(par.c_source(), ("-fopenmp",))
        assert "#pragma omp parallel" not in serial.c_source()
    assert_compiles_clean(serial.c_source())
    return par, par.compile(), serial.compile()


def expected_private(expr: str, lay: dict) -> bool:
    """Whether the parallel loop scatters into the output, each thread into a private copy
    (an outermost loop that carries a dependence only through a dense output, no finds)."""
    if expr == SPMV:    # with a sparse x and A in CSC, x's entries drive (locate into A)
        return lay["A"] == "CSC" or ("x" not in lay and lay["A"] in ("COO", "SortedCOO"))
    if expr == SPMSPM:
        return lay["A"] == "COO" and lay["B"] in ("CSR", "BCSR")
    return False


def expected_parallel(expr: str, lay: dict) -> str | None:
    """The loop parallel=True must pick (None: scatter into the output, not parallelized)."""
    if expected_private(expr, lay):
        if "x" in lay:
            return "x_p"
        return {"COO": "A_p", "SortedCOO": "A_p", "CSC": "A_pj"}[lay["A"]]
    if expr == SPMSPM and lay["A"] == "LowerTri" and lay["B"] in ("CSR", "DCSR", "BCSR"):
        return "i"      # B's rows outermost would scatter: C's rows outermost instead
    if expr in (DOT, DOT3):
        sparse = [t for t in "ABC" if t in lay and lay[t] not in DENSE]
        return f"{sparse[0]}_p" if sparse else "A_p0"
    if expr == SPMV:
        a = lay["A"]
        if "x" in lay:
            if a in ("LowerTri", "DenseMatrix"):   # x's loop outermost: the rows inside it
                return "A_pi" if a == "LowerTri" else "A_p0"      # are shared out
            return "A_pi" if a in ROW_PARALLEL else None
        if a == "DenseMatrix":
            return "A_p0"
        if a == "DIA":
            return "A_pi"       # inner: every thread runs the diagonals, rows shared out
        return "A_pi" if a in ROW_PARALLEL | {"LowerTri"} else None
    if expr == SPMSPM:
        if lay["A"] in ("CSR", "DCSR", "BCSR") or (lay["A"], lay["B"]) == ("LowerTri", "LowerTri"):
            return "A_pi"
        # COO's entries outermost scatter into C; LowerTri's long row / column loop inside
        # each entry is shared out
        return {("COO", "LowerTri"): "B_pj", ("LowerTri", "COO"): "A_pi"}.get(
            (lay["A"], lay["B"]))
    return "A_p0"           # TTV, TTM


# -- generated C ----------------------------------------------------------------------------
def parallel_regions(src: str) -> list[tuple[str, str, str]]:
    """(pragma line, the parallel loop's text, the text before the pragma) for each pragma
    of the parallel loop (not the one that zeroes a dense output)."""
    lines = src.splitlines()
    out = []
    for k, line in enumerate(lines):
        if "#pragma omp" not in line or "omp simd" in line \
                or lines[k + 1].lstrip().startswith("for (size_t spf_z = 0;"):
            continue
        depth, body = 0, []
        for ln in lines[k + 1:]:
            body.append(ln)
            depth += ln.count("{") - ln.count("}")
            if depth <= 0 and "{" in "".join(body):
                break
        out.append((line.strip(), "\n".join(body), "\n".join(lines[:k])))
    return out


def check_c(kernel: spf.Kernel, expr: str, lay: dict) -> None:
    src = kernel.c_source()
    want = expected_parallel(expr, lay)
    assert kernel.parallel_loop == want, kernel.analysis()
    analysis = kernel.analysis()
    assert analysis.parallel_loop == want
    if want is None:
        assert "omp parallel" not in src
        out = kernel.expr.output.tensor
        assert f"carries a dependence on {out}" in analysis.parallel_reason
        assert any(f"scatter into the shared output {out}" in lp.why for lp in analysis.loops)
        return
    loops = [lv.var for lv in kernel.nest.levels if lv.kind == "loop"]
    assert kernel.plan.privatized == expected_private(expr, lay)
    if kernel.plan.privatized:  # threads share out the scatter loop, each into its own copy
        assert not kernel.decisions and want == loops[0]
        assert "#pragma omp parallel\n    {\n        const int spf_team = spf_team_size();\n" \
            "        spf_acc_t *restrict spf_mine = " in src, src
        assert re.search(rf"#pragma omp for schedule\((guided,32|static)\)\n\s*"
                         rf"for \(spf_index_t {want} = ", src)
        assert "private copy" in analysis.parallel_reason
        return
    if want != loops[0]:    # an inner loop: a worksharing loop inside a parallel region
        assert not kernel.decisions
        assert f"#pragma omp parallel\n    for (spf_index_t {loops[0]} = " in src, src
        assert re.search(rf"#pragma omp for schedule\(static\)\n\s*for \(spf_index_t {want} = ",
                         src)
        return
    regions = parallel_regions(src)
    assert regions, src
    for pragma, body, before in regions:
        assert pragma.startswith((PRAGMA, STATIC)), pragma
        assert body.lstrip().startswith(f"for (spf_index_t {want} = "), (pragma, body)
        # scalar outputs: the accumulator is a reduction variable
        assert ("reduction(+:spf_acc)" in pragma) == (not kernel.expr.output.indices), pragma
        # SeqIter states used inside the region and declared outside it are private
        private = re.search(r"private\(([^)]*)\)", pragma)
        private = {p.strip() for p in private.group(1).split(",")} if private else set()
        declared_inside = set(re.findall(r"\bint\s+(spf_pos_\w+)", body))
        for state in set(re.findall(r"\bspf_pos_\w+", body)) - declared_inside:
            assert state in private, f"{state} is shared by the threads:\n{src}"
        assert private <= set(re.findall(r"\bspf_pos_\w+", body))
        # hash maps: built (reset + inserts) before the region, only looked up inside
        assert "spf_hash_reset(" not in body and "spf_hash_insert(" not in body, src
        for m in set(re.findall(r"spf_hash_find\(&(spf_map_\w+)", body)):
            assert f"spf_hash_insert(&{m}," in before, f"{m} is not built before the region"
    for d in kernel.decisions:
        if d.chosen is not None and d.chosen.algorithm == "seqiter":
            par_level = [lv.var for lv in kernel.nest.levels].index(want)
            assert d.chosen.init_level > par_level   # state re-initialised inside the loop


def run_all(expr: str, layouts: dict, cases, params: dict | None = None) -> None:
    """Check the C, then every case: serial == numpy, parallel (1/2/4 threads) == serial."""
    key = tuple(sorted(layouts.items()))
    prm = tuple(sorted((t, tuple(sorted(p.items()))) for t, p in (params or {}).items()))
    kernel, par, serial = kernels(expr, key, prm)
    check_c(kernel, expr, layouts)
    # no reduction across threads (nor private copies summed): bitwise equal
    exact = bool(kernel.expr.output.indices) and not kernel.plan.privatized
    for name, args, reference in cases:
        want = serial(**args)
        np.testing.assert_allclose(want, reference, rtol=1e-12, atol=1e-12, err_msg=name)
        if kernel.parallel_loop is None:
            with pytest.raises(spf.ArgumentError):
                par.set_num_threads(2)
            continue
        for n in THREADS:
            par.set_num_threads(n)
            assert par._lib.omp_get_max_threads() == n
            got = par(**args)
            if exact:
                np.testing.assert_array_equal(got, want, err_msg=f"{name}, {n} threads")
            else:
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10,
                                           err_msg=f"{name}, {n} threads")


# -- data -----------------------------------------------------------------------------------
def vector(n: int, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, n)
    a[rng.random(n) >= density] = 0.0
    return a


def few(n: int, count: int, seed: int) -> np.ndarray:
    """A vector with ``count`` nonzeros (makes the SeqIter branch of 'auto' the cheaper)."""
    a = np.zeros(n)
    if n:
        at = np.random.default_rng(seed).choice(n, size=min(count, n), replace=False)
        a[at] = np.arange(1.0, len(at) + 1.0)
    return a


def matrix(shape, density: float, seed: int, lower: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, shape) * (rng.random(shape) < density)
    if shape[0] > 6:
        a[::7] = 0.0        # empty rows
    return np.tril(a) if lower else a


def mma(seed: int, keep: float = 0.6) -> np.ndarray:
    """16x16 with at most one nonzero per aligned column pair of a row (CUDAmma16x16)."""
    rng = np.random.default_rng(seed)
    a = np.zeros((16, 16))
    r, pj = np.nonzero(rng.random((16, 8)) < keep)
    a[r, 2 * pj + rng.integers(0, 2, len(r))] = rng.uniform(-1, 1, len(r))
    return a


def pack(layout: str, dense: np.ndarray, params: dict | None = None, seed: int = 0):
    """Dense layouts take the numpy array; others are packed from shuffled coordinates."""
    if layout in DENSE:
        return dense
    if layout == "DenseTensor3":
        return spf.Tensor.from_dense(layout, dense)
    coords = np.nonzero(dense)
    perm = np.random.default_rng(seed + 77).permutation(len(coords[0]))
    coords = tuple(c[perm] for c in coords)
    return spf.Tensor.from_coords(layout, dense.shape, coords, dense[coords], **(params or {}))


def _id(expr_name: str, layouts: dict) -> str:
    return f"{expr_name}-{'-'.join(layouts.values())}"


def _specs(expr_name: str, names: str, *dims: list[str]) -> list:
    """Every combination of layouts of ``dims`` for the tensors ``names`` as parameters; the
    fast lane keeps a :func:`covering` sample."""
    return lanes([dict(zip(names, c)) for c in itertools.product(*dims)],
                 lambda spec: tuple(spec.values()) in covering(*dims),
                 lambda spec: _id(expr_name, spec))


# -- dot products ---------------------------------------------------------------------------
N = 3000


def dot_inputs(count: int):
    """Tuples of ``count`` vectors: large random, sparse, empty, one nonzero, size 0 and 1."""
    big = [vector(N, d, s) for d, s in ((0.5, 1), (0.7, 2), (0.9, 3))]
    return [
        ("big", big[:count]),
        ("sparse", [vector(N, 0.02, 4)] + big[1:count]),
        ("overlap_few", [few(N, 40, 5)] + [few(N, 40, 5) * (k + 2) for k in range(count - 1)]),
        ("empty", [np.zeros(N)] + big[1:count]),
        ("one", [few(N, 1, 6)] * count),
        ("size0", [np.zeros(0)] * count),
        ("size1", [np.array([2.0])] * count),
    ]


def dot_cases(layouts: dict):
    names = list(layouts)
    cases = []
    for label, vecs in dot_inputs(len(names)):
        args = {t: pack(layouts[t], v, seed=k) for k, (t, v) in enumerate(zip(names, vecs))}
        cases.append((label, args, float(np.sum(np.prod(vecs, axis=0)))))
    return cases


DOT3_SPECS = [{"A": a, "B": b, "C": c} for a, b, c in [
    ("SV", "SV", "SV"), ("SV", "SV_decreasing", "SV_unsorted"),            # Fig. 11
    ("SV_unsorted", "SV", "SV_decreasing"), ("SV_decreasing", "SV_decreasing", "SV"),
    ("DenseVector", "SV", "SV_unsorted"), ("SV", "DenseVector", "SV"),
    ("DenseVector", "DenseVector", "SV_decreasing"), ("DenseVector",) * 3]]


@pytest.mark.parametrize("layouts", _specs("dot", "AB", VECTORS, VECTORS))
def test_dot(layouts):
    run_all(DOT, layouts, dot_cases(layouts))


@pytest.mark.parametrize("layouts", lanes(DOT3_SPECS, lambda s: s in DOT3_SPECS[:2],
                                         lambda s: _id("dot3", s)))
def test_dot3(layouts):
    run_all(DOT3, layouts, dot_cases(layouts))


# -- SpMV and SpMSpV ------------------------------------------------------------------------
def spmv_matrices(layout: str):
    """(label, dense matrix, packing params) for SpMV/SpMSpV on ``layout``."""
    if layout == "CUDAmma16x16":     # the only shape it stores: a single 16-row chunk
        return [("mma", mma(1)), ("mma_full", mma(2, 1.0)), ("empty", np.zeros((16, 16)))]
    if layout == "LowerTri":
        return [("big", matrix((300, 300), 0.03, 11, lower=True)),
                ("empty", np.zeros((40, 40))), ("size0", np.zeros((0, 0)))]
    return [("big", matrix((300, 200), 0.03, 12)), ("wide", matrix((70, 400), 0.05, 13)),
            ("empty", np.zeros((40, 30))), ("no_rows", np.zeros((0, 5))),
            ("no_cols", np.zeros((5, 0)))]


SPMV_PARAMS = {"BCSR": {"B": 3}}     # 100 block rows of the 300-row matrix: several chunks


def spmv_cases(la: str, lx: str | None):
    params = SPMV_PARAMS.get(la)
    cases = []
    for label, a in spmv_matrices(la):
        A = pack(la, a, params, seed=1)
        n = a.shape[1]
        xs = [("dense_x", vector(n, 1.0, 2))] if lx is None else [
            ("x_few", few(n, 3, 3)), ("x_half", vector(n, 0.5, 4)), ("x_empty", np.zeros(n))]
        for xlabel, x in xs:
            X = x if lx is None else pack(lx, x, seed=5)
            cases.append((f"{label}/{xlabel}", {"A": A, "x": X}, a @ x))
    return cases


SPMV_SPECS = [{"A": la} for la in MATRICES]


@pytest.mark.parametrize("layouts", SPMV_SPECS, ids=[_id("spmv", s) for s in SPMV_SPECS])
def test_spmv(layouts):
    la = layouts["A"]
    params = {"A": SPMV_PARAMS[la]} if la in SPMV_PARAMS else None
    run_all(SPMV, layouts, spmv_cases(la, None), params)


@pytest.mark.parametrize("layouts", _specs("spmspv", "Ax", MATRICES, SPARSE_VECTORS))
def test_spmspv(layouts):
    la = layouts["A"]
    params = {"A": SPMV_PARAMS[la]} if la in SPMV_PARAMS else None
    run_all(SPMV, layouts, spmv_cases(la, layouts["x"]), params)


# -- SpMSpM ---------------------------------------------------------------------------------
def spmspm_cases(la: str, lb: str):
    square = "LowerTri" in (la, lb)
    m, k, n = (200, 200, 200) if square else (300, 60, 80)
    a = matrix((m, k), 0.03, 21, lower=la == "LowerTri")
    b = matrix((k, n), 0.05, 22, lower=lb == "LowerTri")
    one = np.zeros((m, k))
    one[m - 1, 0] = 2.0
    cases = []
    for label, x, y in (("big", a, b), ("empty_A", np.zeros((m, k)), b), ("one", one, b),
                        ("empty_B", a, np.zeros((k, n)))):
        cases.append((label, {"A": pack(la, x, seed=1), "B": pack(lb, y, seed=2)}, x @ y))
    return cases


@pytest.mark.parametrize("layouts", _specs("spmspm", "AB", SPMSPM_LAYOUTS, SPMSPM_LAYOUTS))
def test_spmspm(layouts):
    run_all(SPMSPM, layouts, spmspm_cases(layouts["A"], layouts["B"]))


# -- TTV and TTM ----------------------------------------------------------------------------
def tensor3(shape, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, shape) * (rng.random(shape) < density)
    if shape[0] > 3:
        a[1::5] = 0.0          # empty slices
        a[:, ::4] = 0.0        # empty fibres
    return a


TENSOR_CASES = [("big", (300, 12, 20), 0.05), ("empty", (30, 4, 5), 0.0),
                ("size0", (0, 3, 4), 0.0), ("tiny", (1, 1, 1), 1.0)]


@pytest.mark.parametrize("layout", ["CSF", "DenseTensor3"])
@pytest.mark.parametrize("expr", [TTV, TTM], ids=["ttv", "ttm"])
def test_tensor3(expr, layout):
    cases = []
    for k, (label, shape, density) in enumerate(TENSOR_CASES):
        a = tensor3(shape, density, k)
        A = pack(layout, a, seed=k)
        if expr == TTV:
            x = vector(shape[2], 1.0, k + 10)
            cases.append((label, {"A": A, "x": x}, np.einsum("ijk,k->ij", a, x)))
        else:
            b = np.random.default_rng(k + 20).uniform(-1, 1, (shape[2], 4))
            cases.append((label, {"A": A, "B": b}, np.einsum("ijk,kl->ijl", a, b)))
    run_all(expr, {"A": layout}, cases)


# -- find state and the run-time choice -----------------------------------------------------
def test_spmspv_both_runtime_branches_run():
    """CSR x SV with find='auto' keeps SeqIter with DenseMap and HashMap alternatives; x_few
    takes the SeqIter branch (private state), x_half a map branch (built before the
    region)."""
    kernel, par, _ = kernels(SPMV, (("A", "CSR"), ("x", "SV")))
    (d,) = kernel.decisions
    assert d.chosen.algorithm == "seqiter"
    assert [c.algorithm for c in d.alternatives] == ["densemap", "hashmap"]
    src = kernel.c_source()
    assert src.count(PRAGMA) == 3
    assert f"{PRAGMA} private(spf_pos_x_p)" in src
    a = matrix((300, 2000), 0.003, 12)
    nnz, rows = np.count_nonzero(a), a.shape[0]
    for x, branch in ((few(2000, 3, 3), "seqiter"), (vector(2000, 0.5, 4), "densemap")):
        seq = 4 * nnz + rows * np.count_nonzero(x)
        dense = 4 * nnz + 8 * np.count_nonzero(x) + a.shape[1]
        hsh = 12 * nnz + 4 * np.count_nonzero(x)
        pick = "densemap" if dense < seq and dense <= hsh else \
            "hashmap" if hsh < seq else "seqiter"
        assert pick == branch
        par.set_num_threads(2)
        np.testing.assert_allclose(par(A=pack("CSR", a), x=pack("SV", x)), a @ x,
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layouts,algorithm", [
    ({"A": "CSR", "x": "SV"}, "seqiter"), ({"A": "DCSR", "x": "SV_decreasing"}, "seqiter"),
    ({"A": "CSR", "x": "SV"}, "hashmap"), ({"A": "BCSR", "x": "SV"}, "binsearch"),
    ({"A": "ELL", "x": "SV_unsorted"}, "hashmap"), ({"A": "CSR", "x": "SV"}, "densemap"),
    ({"A": "ELL", "x": "SV_unsorted"}, "densemap")])
def test_forced_find_in_parallel_loop(layouts, algorithm):
    la = layouts["A"]
    params = {"A": SPMV_PARAMS[la]} if la in SPMV_PARAMS else None
    k = spf.Kernel(SPMV, layouts, find=algorithm, parallel=True, params=params)
    assert k.parallel_loop == "A_pi"
    (d,) = k.decisions
    assert d.chosen.algorithm == algorithm and d.alternatives == []
    check_c(k, SPMV, layouts)
    assert_compiles_clean(k.c_source(), ("-fopenmp",))
    f = k.compile()
    serial = spf.Kernel(SPMV, layouts, find=algorithm, params=params).compile()
    for label, args, ref in spmv_cases(la, layouts["x"]):
        want = serial(**args)
        np.testing.assert_allclose(want, ref, rtol=1e-12, atol=1e-12)
        for n in THREADS:
            f.set_num_threads(n)
            np.testing.assert_array_equal(f(**args), want, err_msg=f"{label}, {n} threads")


def test_seqiter_shared_by_dot_iterations_is_replaced():
    """SV . SV: the SeqIter state would be shared by all A_p iterations; in a parallel loop
    it would race, so parallel=True uses a template without shared mutable state."""
    serial = spf.Kernel(DOT, {"A": "SV", "B": "SV"})
    assert serial.decisions[0].chosen.algorithm == "seqiter"
    par = spf.Kernel(DOT, {"A": "SV", "B": "SV"}, parallel=True)
    assert par.decisions[0].chosen.algorithm in ("densemap", "hashmap", "binsearch")
    assert "spf_pos_" not in par.c_source()


# -- API --------------------------------------------------------------------------------------
def test_set_num_threads_errors():
    _, par, serial = kernels(SPMV, (("A", "CSR"),))
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(spf.ArgumentError, match="positive integer"):
            par.set_num_threads(bad)
    with pytest.raises(spf.ArgumentError, match="no parallel loop"):
        serial.set_num_threads(2)


def test_parallel_must_be_bool():
    with pytest.raises(spf.SpecError, match="parallel must be True or False"):
        spf.Kernel(SPMV, {"A": "CSR"}, parallel="yes")


def test_omp_num_threads_environment(tmp_path):
    """Without set_num_threads, OMP_NUM_THREADS decides (checked in a fresh process)."""
    code = (
        "import numpy as np, scipy.sparse as sp, spf\n"
        "A = sp.random(500, 300, density=0.02, format='csr', random_state=3)\n"
        "x = np.random.default_rng(0).uniform(size=300)\n"
        "f = spf.Kernel('y(i) = A(i,j) * x(j)', {'A': 'CSR'}, parallel=True).compile()\n"
        "y = f(A=spf.Tensor.from_scipy('CSR', A), x=x)\n"
        "assert np.allclose(y, A @ x, rtol=1e-12, atol=1e-12)\n"
        "print(f._lib.omp_get_max_threads())\n")
    env = {**os.environ, "OMP_NUM_THREADS": "3"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3"


@pytest.mark.parametrize("layout", ["CSR", "DCSR"])
def test_parallel_kernel_zeroes_a_passed_output(layout):
    """'=' overwrites: a parallel kernel zeroes the whole output (with all threads) where some
    rows are not written (DCSR stores only nonempty rows); CSR's row loop runs every row once
    and stores each row's whole sum, so it needs no zeroing pass."""
    m = sp.random(500, 300, density=0.01, format="csr", random_state=3)
    m = sp.csr_matrix(m.toarray() * (np.arange(500) % 3 != 0)[:, None])   # empty rows
    x = np.random.default_rng(4).random(300)
    f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout}, parallel=True).compile()
    zeroes = "#pragma omp parallel for schedule(static)" in f.source
    assert zeroes == (layout == "DCSR")
    assert ("y_data[y_p0] = spf_acc;" in f.source) == (layout == "CSR")
    for threads in (1, 2, 4):
        f.set_num_threads(threads)
        y = np.full(500, np.nan)
        f(A=spf.Tensor.from_scipy(layout, m), x=x, y=y)
        np.testing.assert_allclose(y, m @ x, rtol=1e-12, atol=0)


@pytest.mark.parametrize("layout", ["COO", "CSC"])
def test_private_copies_accumulate_into_the_output(layout):
    """``y += A x`` with a scatter loop: the private copies are added to y's old values."""
    k = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": layout}, parallel=True)
    assert k.plan.privatized and "spf_acc_t spf_s = y_data[spf_z];" in k.c_source()
    f = k.compile()
    rng = np.random.default_rng(11)
    for shape, density in (((50, 30), 0.2), ((1, 1), 1.0), ((0, 3), 0.0), ((7, 5), 0.0)):
        a = matrix(shape, density, 5)
        x, y0 = rng.uniform(-1, 1, shape[1]), rng.uniform(-1, 1, shape[0])
        A = spf.Tensor.from_dense(layout, a)
        for n in THREADS:
            f.set_num_threads(n)
            np.testing.assert_allclose(f(A=A, x=x, y=y0.copy()), y0 + a @ x, rtol=1e-12,
                                       atol=1e-12)


# -- the schedule -----------------------------------------------------------------------------
@pytest.mark.parametrize("expr, layouts, schedule", [
    (SPMV, {"A": "ELL"}, "static"),           # every row: width slots
    (SPMV, {"A": "DenseMatrix"}, "static"),
    (SPMV, {"A": "COO"}, "static"),           # one entry per iteration (private copies of y)
    (TTM, {"A": "DenseTensor3"}, "static"),
    (SPMV, {"A": "CSR"}, "guided,32"),        # rows of uneven length (rowPtr bounds the loop)
    (SPMV, {"A": "LowerTri"}, "guided,32"),   # row i has i + 1 entries
    (TTM, {"A": "CSF"}, "guided,32"),
    (SPMV, {"A": "CSR", "x": "SV"}, "guided,32"),    # a find inside the row
])
def test_schedule_follows_the_work_per_iteration(expr, layouts, schedule):
    k = spf.Kernel(expr, layouts, parallel=True)
    lines = k.c_source().splitlines()
    loop = [ln.strip() for ln, nxt in itertools.pairwise(lines)
            if "schedule(" in ln and f"for (spf_index_t {k.parallel_loop} =" in nxt]
    assert loop and all(f"schedule({schedule})" in p for p in loop), loop
