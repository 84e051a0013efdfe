"""Threads and processes: kernels, conversions, evaluate and tensors built from many threads at
once (every result against scipy), two processes compiling one kernel into one empty cache,
and kernels, tensors and conversions pickled into spawn-start pools."""
from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.concurrency import symbolic

THREADS = 8
SPMV = "y(i) = A(i,j) * x(j)"
SPGEMM = "C(i,j) = A(i,k) * B(k,j)"

# a layout no other test loads: parsing it and generating its read check run in a thread
MY_LAYOUT = """\
name = "MyDCSC"
relation = "{[pc, pj] -> [gi, gj] : 0 <= pc < nzCols and colPtr(pc) <= pj < colPtr(pc + 1) \
and gj = cols(pc) and gi = rowIdx(pj)}"
value = "data[pj]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
nzCols = "int"
cols = "int[nzCols]"
colPtr = "int[nzCols + 1]"
rowIdx = "int[colPtr(nzCols)]"
data = "double[colPtr(nzCols)]"

[[properties]]
kind = "monotonic"
uf = "cols"
order = "<"

[[properties]]
kind = "monotonic"
uf = "colPtr"
order = "<="

[[properties]]
kind = "range"
uf = "rowIdx"
min = "0"
max = "numRows - 1"
"""


def _matrix(seed: int, shape=(40, 30)) -> sp.csr_matrix:
    M = sp.random(*shape, density=0.15, format="csr", random_state=seed)
    keep = np.ones(shape[0])
    keep[3] = 0.0           # an empty row
    return sp.csr_matrix(sp.diags(keep) @ M)


def _tasks(layout_file: str) -> list:
    """One piece of work per thread, each building what no other thread builds; every task
    returns (what it computed, the scipy reference)."""
    M, N = _matrix(1), _matrix(2, (30, 25))
    x = np.linspace(-1.0, 1.0, 30)
    xs = np.zeros(30)
    xs[[2, 7, 19]] = [1.5, -2.0, 0.5]

    def spmspv():
        f = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"}).compile()
        return f(A=spf.Tensor.from_scipy("CSR", M), x=spf.Tensor.from_dense("SV", xs)), M @ xs

    def spgemm():
        f = spf.Kernel(SPGEMM, {"A": "DCSR", "B": "CSR", "C": "CSR"}).compile()
        C = f(A=spf.Tensor.from_scipy("DCSR", M), B=spf.Tensor.from_scipy("CSR", N))
        return C.to_dense(), (M @ N).toarray()

    def evaluate_csc():
        return spf.evaluate(SPMV, A=M.tocsc(), x=x), M @ x

    def evaluate_spgemm():
        return spf.evaluate(SPGEMM, A=M, B=N.tocoo()).toarray(), (M @ N).toarray()

    def ell_to_dense():
        return spf.Tensor.from_scipy("ELL", M).to_dense(), M.toarray()

    def conversion():
        t = spf.Conversion("COO", "CSC").compile()(spf.Tensor.from_scipy("COO", M))
        return t.to_scipy().toarray(), M.toarray()

    def semiring():
        sr = spf.Semiring(add="min(a, b)", mul="a + b", zero=np.inf, one=0.0)
        k = spf.Kernel(SPMV, {"A": "COO"}, semiring=sr, parallel=True)
        assert k.report() and k.analysis().loops
        A = spf.Tensor.from_scipy("COO", M)
        ref = np.where(M.getnnz(axis=1) > 0, 0.0, np.inf)
        dense = M.toarray()
        for i in range(M.shape[0]):
            row = [dense[i, j] + x[j] for j in M[i].indices]
            ref[i] = min(row) if row else np.inf
        return k.compile()(A=A, x=x), ref

    def own_layout():
        lay = spf.load_layout(layout_file)
        t = spf.Tensor.from_scipy(lay, M)
        f = spf.Kernel(SPMV, {"A": lay}).compile()
        return np.concatenate([f(A=t, x=x), t.to_dense().ravel()]), \
            np.concatenate([M @ x, M.toarray().ravel()])

    return [spmspv, spgemm, evaluate_csc, evaluate_spgemm, ell_to_dense, conversion, semiring,
            own_layout]


def run_threads(layout_file: str) -> int:
    """Run every task in its own thread, all released at once; the number checked."""
    tasks = _tasks(layout_file)
    start = threading.Barrier(len(tasks))

    def run(task):
        start.wait()
        return task()

    with ThreadPoolExecutor(len(tasks)) as pool:
        results = list(pool.map(run, tasks))
    for task, (got, want) in zip(tasks, results):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=task.__name__)
    return len(results)


@pytest.mark.slow
def test_threads_build_and_evaluate_at_once(tmp_path, monkeypatch):
    """Each round in a fresh spawned process (nothing built yet in it, an empty cache):
    eight threads generate, compile and run different kernels, conversions and tensors."""
    assert len(_tasks("")) == THREADS
    layout_file = tmp_path / "MyDCSC.toml"
    layout_file.write_text(MY_LAYOUT)
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(2):
        monkeypatch.setenv("SPF_CACHE_DIR", str(tmp_path / f"cache{round_}"))
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            assert pool.submit(run_threads, str(layout_file)).result(timeout=600) == THREADS


def test_threads_share_one_kernel_and_one_tensor():
    """Calls of one compiled kernel on one tensor from many threads (its struct is built
    once, by whichever thread comes first) and to_dense of one fresh tensor."""
    M = _matrix(3)
    A = spf.Tensor.from_scipy("CSR", M)
    f = spf.Kernel(SPMV, {"A": "CSR"}).compile()
    xs = [np.full(30, float(k)) for k in range(64)]
    with ThreadPoolExecutor(THREADS) as pool:
        ys = list(pool.map(lambda x: f(A=A, x=x), xs))
        dense = list(pool.map(lambda _: A.to_dense(), range(THREADS)))
    for x, y in zip(xs, ys):
        np.testing.assert_allclose(y, M @ x, rtol=1e-12)
    for d in dense:
        np.testing.assert_array_equal(d, M.toarray())


def _compile_at_once(barrier, cache: str, n: int) -> tuple[str, list[float]]:
    """(the library the kernel loaded, its result)."""
    os.environ["SPF_CACHE_DIR"] = cache
    k = spf.Kernel(SPGEMM, {"A": "CSR", "B": "CSR", "C": "COO"}, name="same_kernel")
    M = spf.Tensor.from_scipy("CSR", sp.random(n, n, density=0.1, format="csr",
                                               random_state=4))
    barrier.wait()              # both processes start the compiler together
    f = k.compile()
    return f._lib._name, f(A=M, B=M).to_dense().ravel().tolist()


@pytest.mark.slow
def test_two_processes_compile_one_kernel_into_one_cache(tmp_path):
    cache = tmp_path / "cache"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Manager().Barrier(2)
    with ProcessPoolExecutor(2, mp_context=ctx) as pool:
        futures = [pool.submit(_compile_at_once, barrier, str(cache), 20) for _ in range(2)]
        results = [fut.result(timeout=600) for fut in futures]
    M = sp.random(20, 20, density=0.1, format="csr", random_state=4)
    (lib1, got1), (lib2, got2) = results
    assert lib1 == lib2 and Path(lib1).parent == cache and Path(lib1).with_suffix(".c").is_file()
    for got in (got1, got2):
        np.testing.assert_allclose(got, (M @ M).toarray().ravel(), rtol=1e-12)
    names = [p.name for p in cache.iterdir()]
    assert not [n for n in names if n.startswith(spf.runtime.build.BUILD_PREFIX)], names


# -- pickling ------------------------------------------------------------------------------
def _pickled_work(payload: bytes, cache: str | None) -> list[np.ndarray]:
    """In another process: unpickle (kernel, compiled kernel, tensor, conversions) and run."""
    if cache is not None:
        os.environ["SPF_CACHE_DIR"] = cache
    kernel, compiled, tensor, assembled, placed, x = pickle.loads(payload)
    return [compiled(A=tensor, x=x), kernel.compile()(A=tensor, x=x),
            assembled(tensor).to_dense(), placed(tensor).to_dense()]


def _payload() -> tuple[bytes, sp.csr_matrix, np.ndarray]:
    M = _matrix(5)
    x = np.arange(30.0)
    kernel = spf.Kernel(SPMV, {"A": "CSR"}, name="pickled_spmv")
    objects = (kernel, kernel.compile(), spf.Tensor.from_scipy("CSR", M),
               spf.Conversion("CSR", "CSC").compile(), spf.Conversion("CSR", "ELL").compile(), x)
    return pickle.dumps(objects), M, x


def _check_pickled(results: list[np.ndarray], M: sp.csr_matrix, x: np.ndarray) -> None:
    y1, y2, csc, ell = results
    np.testing.assert_allclose(y1, M @ x, rtol=1e-12)
    np.testing.assert_allclose(y2, M @ x, rtol=1e-12)
    np.testing.assert_array_equal(csc, M.toarray())
    np.testing.assert_array_equal(ell, M.toarray())


@pytest.mark.slow
def test_pickled_into_a_spawn_pool(tmp_path):
    """A spawn-start multiprocessing.Pool: one worker finds the libraries in the shared
    cache, one compiles them again from the C carried in the pickle (an empty cache)."""
    payload, M, x = _payload()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for cache in (None, str(tmp_path / "empty")):
            _check_pickled(pool.apply(_pickled_work, (payload, cache)), M, x)
    assert any(p.suffix == ".so" for p in (tmp_path / "empty").iterdir())


def test_pickled_into_a_process_pool_executor():
    payload, M, x = _payload()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:
        _check_pickled(pool.submit(_pickled_work, payload, None).result(timeout=600), M, x)


def test_compiled_objects_pickle_round_trip():
    payload, M, x = _payload()
    _check_pickled(_pickled_work(payload, None), M, x)


# -- the lock's guard ----------------------------------------------------------------------
def test_symbolic_work_outside_the_lock_is_refused():
    """The Z3 encoder refuses to start unless the current thread holds the lock (a path into
    symbolic work that skips it is a bug, caught without a second thread)."""
    from spf.decide.smt import InstanceEncoder
    k = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"})
    with pytest.raises(RuntimeError, match=r"a Z3 encoding outside spf.concurrency.symbolic"):
        InstanceEncoder(k.nest, 1)
    with symbolic:
        InstanceEncoder(k.nest, 1)
    assert symbolic.depth == 0
