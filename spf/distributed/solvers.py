"""Iterative methods on a Dask cluster, written with ``dask.array`` operations around a
distributed spf kernel: the matrix is cut and scattered once, the vectors stay on the workers
(chunked like the matrix's row blocks), each product moves only the halo, and the client
receives one scalar per iteration (the residual it tests).  They are examples as much as
tools: a user's own method is written the same way.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import ArgumentError, SpfError
from ..kernel import Kernel
from ..tensor import Tensor
from .kernel import DistributedKernel

SPMV = "y(i) = A(i,j) * x(j)"


@dataclass(frozen=True)
class Solution:
    """A solver's result: ``x`` (a persisted dask.array), the iterations run, the last
    residual norm (CG: ``||b - A x||`` as recurred; power iteration: ``||A x - value x||``),
    whether it met the tolerance, the eigenvalue (power iteration), and how many times it
    restarted from the client's copy of x after the cluster lost data."""

    x: Any
    iterations: int
    residual: float
    converged: bool
    value: float | None = None
    restarts: int = 0


def spmv(A: Tensor, client: Any, parts: int | None = None,
         grid: tuple[int, int] | None = None) -> DistributedKernel:
    """The distributed ``y = A x`` for ``A`` in its own layout."""
    if not isinstance(A, Tensor) or A.layout.order != 2:
        raise ArgumentError(f"A must be an spf.Tensor of order 2 (build it once with "
                            f"spf.Tensor.from_scipy), got {type(A).__name__}")
    return Kernel(SPMV, {"A": A.layout}).compile().distributed(client, parts=parts, grid=grid)


def _vector(client: Any, value: Any, chunks: tuple[int, ...], what: str) -> Any:
    """``value`` (numpy or dask.array) as a float64 dask.array in ``chunks``, persisted."""
    import dask.array as da
    if hasattr(value, "chunks") and hasattr(value, "dask"):
        arr = value.astype(np.float64).rechunk((chunks,))
    else:
        data = np.asarray(value, dtype=np.float64)
        if data.shape != (sum(chunks),):
            raise ArgumentError(f"{what} must have shape ({sum(chunks)},), got {data.shape}")
        arr = da.from_array(data, chunks=(chunks,), name=False)   # a new key: not a lost one
    return client.persist(arr)


CHECKPOINT = 25    # iterations between copies of the iterate kept by the client (recovery)
RETRIES = 3        # restarts from the last copy after the cluster lost data
BACKOFF_S = 0.5    # the wait before the first restart (doubled before each next one)


@dataclass
class _Saved:
    """The client's last copy of the iterate and the iterations done when it was taken."""

    x: Any
    iterations: int


def _lost() -> tuple[type[BaseException], ...]:
    """What Dask raises when data a computation needs was lost with a worker."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    return (CancelledError, KilledWorker)


def _restarting(what: str, f: DistributedKernel, run: Callable[[_Saved], Solution],
                saved: _Saved) -> Solution:
    """``run(saved)``, run again from ``saved`` (which ``run`` keeps up to date) when the
    cluster lost data it needed (``f`` scattering its operands again), at most
    :data:`RETRIES` times."""
    for attempt in range(RETRIES + 1):
        try:
            return replace(run(saved), restarts=attempt)
        except _lost() as exc:
            f.forget()
            if attempt < RETRIES:       # until the scheduler has removed the dead worker
                time.sleep(BACKOFF_S * 2 ** attempt)
                continue
            raise SpfError(f"{what}: the cluster lost data {RETRIES + 1} times in a row "
                           f"(a worker died): {exc}") from exc
    raise AssertionError("unreachable")


def cg(A: Tensor, b: Any, client: Any, *, x0: Any = None, tol: float = 1e-8,
       maxiter: int | None = None, callback: Callable[[int, Any], None] | None = None,
       parts: int | None = None, grid: tuple[int, int] | None = None) -> Solution:
    """Conjugate gradients for ``A x = b`` (A symmetric positive definite, an
    :class:`spf.Tensor`), until ``||r|| <= tol * ||b||`` or ``maxiter`` iterations (default
    ``10 n``), as :func:`scipy.sparse.linalg.cg` does; ``callback(k, x)`` after iteration k.
    Every :data:`CHECKPOINT` iterations the client keeps a copy of x; when a worker is lost
    with data the solve needs, A's blocks are scattered again and CG restarts from that copy
    (at most :data:`RETRIES` times, then the loss is raised)."""
    import dask
    f = spmv(A, client, parts, grid)
    n = A.shape[0]
    chunks = f.plan(A=A).row_chunks
    limit = 10 * n if maxiter is None else maxiter
    source = b

    def run(saved: _Saved) -> Solution:
        b = _vector(client, source, chunks, "b")        # again after a loss
        bnorm = float(np.sqrt((b * b).sum().compute()))
        goal = tol * (bnorm if bnorm > 0 else 1.0)
        x, k = _vector(client, saved.x, chunks, "x0"), saved.iterations
        r = client.persist(b - f(A=A, x=x))
        p, rr = r, float((r * r).sum().compute())
        while math.sqrt(rr) > goal and k < limit:
            q = f(A=A, x=p)
            alpha = rr / (p * q).sum()
            x, r = x + alpha * p, r - alpha * q
            x, r, rr_new = dask.persist(x, r, (r * r).sum())
            rr_next = float(rr_new.compute())
            p = client.persist(r + (rr_next / rr) * p)
            rr, k = rr_next, k + 1
            if k % CHECKPOINT == 0:
                saved.x, saved.iterations = _to_client(x), k
            if callback is not None:
                callback(k, x)
        return Solution(x, k, math.sqrt(rr), math.sqrt(rr) <= goal)
    return _restarting("cg", f, run, _Saved(np.zeros(n) if x0 is None else x0, 0))


def power_iteration(A: Tensor, client: Any, *, x0: Any = None, tol: float = 1e-8,
                    maxiter: int = 1000, callback: Callable[[int, Any], None] | None = None,
                    parts: int | None = None, grid: tuple[int, int] | None = None) -> Solution:
    """The dominant eigenpair of ``A`` by power iteration: ``x <- A x / ||A x||`` until
    ``||A x - value x|| <= tol * |value|`` (value: the Rayleigh quotient ``x . A x``); a
    loss of data restarts from the client's last copy of x, as in :func:`cg`."""
    import dask
    f = spmv(A, client, parts, grid)
    n = A.shape[0]
    if A.shape[1] != n:
        raise ArgumentError(f"power_iteration: A must be square, got shape {A.shape}")
    chunks = f.plan(A=A).row_chunks

    def run(saved: _Saved) -> Solution:
        x, k = _vector(client, saved.x, chunks, "x0"), saved.iterations
        x = client.persist(x / da_norm(x))
        value, residual = 0.0, math.inf
        while k < maxiter:
            y = f(A=A, x=x)
            lam = (x * y).sum()
            y, lam, res, norm = dask.persist(y, lam, da_norm(y - lam * x), da_norm(y))
            value, residual, size = (float(v) for v in dask.compute(lam, res, norm))
            k += 1
            if residual <= tol * abs(value) or size == 0.0:
                break
            x = client.persist(y / size)
            if k % CHECKPOINT == 0:
                saved.x, saved.iterations = _to_client(x), k
            if callback is not None:
                callback(k, x)
        return Solution(x, k, residual, residual <= tol * abs(value), value)
    start = np.ones(n) / math.sqrt(n) if x0 is None else x0
    return _restarting("power_iteration", f, run, _Saved(start, 0))


def _to_client(v: Any) -> np.ndarray:
    """A dask.array vector on the client: each chunk sent straight from its worker (not
    joined on one worker first)."""
    import dask
    return np.concatenate(dask.compute(*v.to_delayed().ravel()))


def da_norm(v: Any) -> Any:
    """The 2-norm of a dask.array vector, lazily."""
    return (v * v).sum() ** 0.5
