"""Distributed kernels on ``dask.array`` operands (issue 42): results stay dask arrays on the
workers, each block gathers only the halo it reads, 1-D and 2-D blocks, CG and power
iteration against scipy and numpy, and a worker lost mid-solve."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import spf

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from spf.distributed import plan_blocks, solvers  # noqa: E402

SPMV = "y(i) = A(i,j) * x(j)"


def laplace(n: int) -> sp.csr_matrix:
    return sp.diags([4.0, -1.0, -1.0, -1.0, -1.0], [0, 1, -1, n, -n], shape=(n * n, n * n),
                    format="csr")


def received(client) -> int:
    """Bytes the workers have received from each other so far."""
    return sum(client.run(lambda dask_worker: sum(
        d.get("total", 0) for d in dask_worker.transfer_incoming_log)).values())


@pytest.mark.parametrize("layout, grid", [("CSR", None), ("CSR", (2, 2)), ("COO", (2, 1)),
                                          ("CSC", (3, 2)), ("SELL", None), ("DIA", (1, 3))])
def test_dask_vectors_in_and_out_equal_the_local_call(client, layout, grid):
    client.wait_for_workers(2, timeout=60)
    A = sp.random(90, 70, 0.08, format="csr", random_state=4)
    A[5] = 0                                               # an empty row
    x = np.random.default_rng(1).random(70)
    T = spf.Tensor.from_scipy(layout, A)
    d = spf.Kernel(SPMV, {"A": layout}).compile().distributed(client, grid=grid)
    y = d(A=T, x=da.from_array(x, chunks=25))              # any chunking of x
    assert isinstance(y, da.Array)
    assert y.chunks[0] == d.plan(A=T).row_chunks           # the output's row blocks
    np.testing.assert_allclose(y.compute(), A @ x, rtol=1e-13)
    y2 = d(A=T, x=2 * y[:70])                              # a result fed back lazily
    np.testing.assert_allclose(y2.compute(), A @ (2 * (A @ x)[:70]), rtol=1e-12)


def test_dense_matrix_operand_and_empty_and_one_entry(client):
    A = sp.random(40, 30, 0.1, format="csr", random_state=2)
    B = np.random.default_rng(3).random((30, 5))
    d = spf.Kernel("C(i,k) = A(i,j) * B(j,k)", {"A": "CSR"}).compile().distributed(
        client, grid=(2, 2))
    C = d(A=spf.Tensor.from_scipy("CSR", A), B=da.from_array(B, chunks=(7, 2)))
    assert C.shape == (40, 5)
    np.testing.assert_allclose(C.compute(), A @ B, rtol=1e-13)
    f = spf.Kernel(SPMV, {"A": "CSR"}).compile().distributed(client, parts=3)
    for M in (sp.csr_matrix((6, 4)), sp.csr_matrix(([2.0], ([5], [1])), shape=(6, 4))):
        y = f(A=spf.Tensor.from_scipy("CSR", M), x=da.ones(4, chunks=2))
        np.testing.assert_allclose(y.compute(), M @ np.ones(4))


def test_halo_is_what_blocks_read_outside_their_rows():
    A = laplace(30)                                         # 900 rows, bandwidth 30
    plan = plan_blocks(spf.Tensor.from_scipy("CSR", A), 0, (3, 1))
    assert plan.row_spans[0][0] == 0 and plan.row_spans[-1][1] == 900
    model = plan.bytes_per_call()
    # each inner boundary: 30 rows of x read across it in each direction
    assert model["halo"] == 2 * 2 * 30 * 8 and model["fold"] == 0
    assert model["broadcast"] == 3 * (900 + 900) * 8
    two = plan_blocks(spf.Tensor.from_scipy("CSR", A), 0, (2, 2))
    assert len(two.blocks) == 4 and two.bytes_per_call()["fold"] > 0


def test_the_model_chooses_2d_blocks_where_columns_spread(client):
    spread = sp.random(4000, 4000, density=0.002, format="csr", random_state=1)
    f = spf.Kernel(SPMV, {"A": "CSR"}).compile()
    d = f.distributed(client, parts=4)
    for A, grid in ((spread, (2, 2)), (laplace(60), (4, 1))):
        T = spf.Tensor.from_scipy("CSR", A)
        plan = d.plan(A=T)
        assert plan.grid == grid
        other = plan_blocks(T, 0, (4, 1) if grid == (2, 2) else (2, 2), local=False)
        assert plan.bytes_per_call()["total"] < other.bytes_per_call()["total"]
    x = np.linspace(0.0, 1.0, 4000)
    T = spf.Tensor.from_scipy("CSR", spread)
    np.testing.assert_allclose(d(A=T, x=da.from_array(x, chunks=1000)).compute(), spread @ x,
                               rtol=1e-13)


def test_bytes_moved_per_call_are_the_halo(client):
    A = laplace(200)                                        # 40,000 rows
    T = spf.Tensor.from_scipy("CSR", A)
    d = spf.Kernel(SPMV, {"A": "CSR"}).compile().distributed(client, grid=(2, 1))
    chunks = d.plan(A=T).row_chunks
    x = client.persist(da.from_array(np.ones(A.shape[0]), chunks=(chunks,)))
    y = client.persist(d(A=T, x=x))                          # parts and positions scattered
    distributed.wait(y)
    before = received(client)
    for _ in range(3):
        y = client.persist(d(A=T, x=y))
        distributed.wait(y)
    moved = (received(client) - before) / 3
    model = d.plan(A=T, x=x).bytes_per_call()
    assert model["halo"] == 2 * 200 * 8
    assert moved <= 1.2 * model["halo"] + 4096, (moved, model)   # + Dask's own messages
    np.testing.assert_allclose(y.compute(), (A @ (A @ (A @ (A @ np.ones(A.shape[0]))))))


def test_cg_and_power_iteration_match_scipy_and_numpy(client):
    A = laplace(8)
    b = np.random.default_rng(5).random(A.shape[0])
    T = spf.Tensor.from_scipy("CSR", A)
    sol = solvers.cg(T, b, client, tol=1e-10)
    assert sol.converged and sol.iterations > 5
    ref, info = spla.cg(A, b, rtol=1e-10)
    assert info == 0
    np.testing.assert_allclose(sol.x.compute(), ref, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(A @ sol.x.compute(), b, atol=1e-7)
    S = sp.random(60, 60, 0.1, format="csr", random_state=8)
    d = np.arange(60.0)
    d[17] = 150.0                                          # a dominant eigenvalue
    S = (S + S.T + sp.diags(d)).tocsr()                    # symmetric
    top = solvers.power_iteration(spf.Tensor.from_scipy("COO", S), client, tol=1e-9)
    w = np.linalg.eigvalsh(S.toarray())
    assert top.converged and top.iterations < 60
    np.testing.assert_allclose(top.value, w[np.argmax(np.abs(w))], rtol=1e-6)


def test_a_worker_lost_mid_solve_is_recovered(client):
    """A worker killed while CG runs: Dask or the solver's restart from its last copy of x
    recovers (the right answer, never a hang); the kernel call itself reports the loss and
    the next call scatters A's blocks again."""
    import os
    import signal
    import time
    client.wait_for_workers(2, timeout=60)
    A = laplace(12)
    T = spf.Tensor.from_scipy("CSR", A)
    b = np.random.default_rng(2).random(A.shape[0])

    def kill_one(k: int, x) -> None:
        if k == 3:                          # mid-solve
            victim = next(iter(client.scheduler_info()["workers"]))
            os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    sol = solvers.cg(T, b, client, tol=1e-10, callback=kill_one)
    assert sol.converged                    # Dask recomputed, or cg restarted from its copy
    np.testing.assert_allclose(A @ sol.x.compute(), b, atol=1e-7)
    client.wait_for_workers(2, timeout=60)
    d = solvers.spmv(T, client)
    x = da.from_array(b, chunks=(d.plan(A=T).row_chunks,))
    y = client.persist(d(A=T, x=x))
    distributed.wait(y)
    victim = next(iter(client.scheduler_info()["workers"]))
    os.kill(client.run(os.getpid, workers=[victim])[victim], signal.SIGKILL)
    client.wait_for_workers(2, timeout=60)
    deadline = time.monotonic() + 30
    while True:
        try:
            np.testing.assert_allclose(d(A=T, x=x).compute(), A @ b)
            break
        except distributed.client.FutureCancelledError:            # reported
            assert time.monotonic() < deadline
            d.forget()                                             # scattered again
            time.sleep(0.2)


def test_cg_restarts_from_its_copy_when_data_is_lost(client, monkeypatch):
    """The restart path, deterministically: the 6th product raises what Dask raises for
    data lost with a worker; cg scatters again and goes on from its last copy of x."""
    from concurrent.futures import CancelledError

    from spf.distributed import DistributedKernel
    monkeypatch.setattr(solvers, "CHECKPOINT", 2)
    monkeypatch.setattr(solvers, "BACKOFF_S", 0.0)
    calls, real = [], DistributedKernel.__call__

    def flaky(self, **args):
        calls.append(1)
        if len(calls) == 6:
            raise CancelledError("lost dependencies")
        return real(self, **args)
    monkeypatch.setattr(DistributedKernel, "__call__", flaky)
    A = laplace(8)
    b = np.linspace(1.0, 2.0, A.shape[0])
    sol = solvers.cg(spf.Tensor.from_scipy("CSR", A), b, client, tol=1e-10)
    assert sol.restarts == 1 and sol.converged
    np.testing.assert_allclose(A @ sol.x.compute(), b, atol=1e-8)


def test_a_plugin_is_removed_without_waiting_on_the_client(client):
    """A kernel's static-data plugin is removed by a finalizer when its blocks' futures are
    freed, which the garbage collector may do inside a client call holding the client's
    locks: the finalizer waited there for the client's loop, itself waiting on such a lock
    (CI hung in ``cg``).  It hands the removal to the loop and returns at once."""
    import threading
    import time

    from spf.distributed.kernel import _unregister
    name = "spf-test-plugin"
    client.register_plugin(distributed.WorkerPlugin(), name=name)
    busy, release = threading.Event(), threading.Event()

    def block() -> None:            # the loop waits, as on a lock the finalizer's caller holds
        busy.set()
        release.wait(30)
    client.loop.add_callback(block)
    assert busy.wait(10)
    call = threading.Thread(target=_unregister, args=(client, name))
    call.start()
    call.join(5)
    waited = call.is_alive()
    release.set()
    call.join()
    assert not waited
    deadline = time.monotonic() + 30
    while any(client.run(lambda dask_worker: name in dask_worker.plugins).values()):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_bad_input(client):
    f = spf.Kernel(SPMV, {"A": "CSR"}).compile()
    with pytest.raises(spf.ArgumentError, match="grid must be"):
        f.distributed(client, grid=(0, 2))
    d = f.distributed(client)
    T = spf.Tensor.from_scipy("CSR", sp.random(10, 8, 0.3, format="csr", random_state=1))
    with pytest.raises(spf.ArgumentError, match="x has 9 rows, A 8 columns"):
        d(A=T, x=da.ones(9, chunks=3))
    with pytest.raises(spf.ArgumentError, match=r"pass A as an spf\.Tensor"):
        d(A=T.to_scipy(), x=da.ones(8, chunks=3))
    dot = spf.Kernel("s = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR"}).compile().distributed(
        client)
    with pytest.raises(spf.ArgumentError, match=r"dask\.array operands need"):
        dot(A=T, B=da.ones((10, 8), chunks=5))
    with pytest.raises(spf.ArgumentError, match=r"A must be an spf\.Tensor"):
        solvers.cg(np.eye(3), np.ones(3), client)


@pytest.mark.parametrize("layout", ["CSR", "COO"])
def test_sparse_results_as_a_dask_collection_of_parts(client, layout):
    import dask
    A = sp.random(50, 40, 0.1, format="csr", random_state=3)
    B = sp.random(40, 30, 0.1, format="csr", random_state=4)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": layout, "B": "CSR", "C": "CSR"}).compile()
    d = k.distributed(client, parts=3)
    TA, TB = spf.Tensor.from_scipy(layout, A), spf.Tensor.from_scipy("CSR", B)
    parts = d.submit(A=TA, B=TB)
    assert dask.is_dask_collection(parts)
    assert len(parts) == (3 if d.partition.mode == "rows" else 1)
    kept = parts.persist()                                   # held on the workers
    C, = dask.compute(kept)                                  # the local call's type
    assert isinstance(C, spf.Tensor)
    np.testing.assert_allclose(C.to_scipy().toarray(), (A @ B).toarray(), rtol=1e-13)
    np.testing.assert_allclose(d(A=TA, B=TB).to_scipy().toarray(), (A @ B).toarray(),
                               rtol=1e-13)
