"""One re-entrant lock around spf's symbolic work, so that any number of threads may build
kernels, conversions and tensors at once.

Z3 has one global context whose C calls release the GIL, isl one context whose operation
budget is set per top-level operation, and kernels and layouts fill parts of themselves
lazily: none of that is safe from two threads.  spf takes :data:`symbolic` while it works
symbolically (a kernel's, a conversion's or a layout's analyses and code, a tensor's read
checks); compiling (the C compiler runs as a subprocess) and calling compiled kernels (ctypes
releases the GIL) happen outside it, so threads overlap there.  One lock rather than a Z3
and an isl context per thread: Z3's solver is the only symbolic work that runs without the
GIL, about a tenth of the time a kernel takes to generate (measured on the SpMV and SpGEMM
kernels of the shipped layouts), so per-thread contexts could gain at most that while every
formula would have to carry its context.

The lowest symbolic layers call :func:`require`: symbolic work reached from a path that does
not hold the lock is a bug in spf, caught in one thread instead of racing in two.
"""
from __future__ import annotations

import threading
from contextlib import ContextDecorator
from typing import Any


class SymbolicLock(ContextDecorator):
    """A re-entrant lock that knows whether the current thread holds it; usable as a
    context manager and as a decorator."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()

    def __enter__(self) -> SymbolicLock:
        self._lock.acquire()
        self._local.depth = self.depth + 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self._local.depth -= 1
        self._lock.release()

    @property
    def depth(self) -> int:
        """How many times the current thread holds the lock (0: not at all)."""
        return getattr(self._local, "depth", 0)


symbolic = SymbolicLock()


def require(what: str) -> None:
    """RuntimeError unless the current thread holds :data:`symbolic` (``what`` names the
    symbolic work that was about to start)."""
    if not symbolic.depth:
        raise RuntimeError(f"spf internal error: {what} outside spf.concurrency.symbolic "
                           "(please report it)")


_z3_shared = threading.Event()


def share_z3_context() -> None:
    """Tell Z3's global context, once, that its objects may be freed from any thread: Python
    frees a formula where its last reference goes, which may be another thread than the one
    working in Z3 (Z3 then queues the release instead of racing with that work)."""
    if _z3_shared.is_set():
        return
    import z3
    z3.Z3_enable_concurrent_dec_ref(z3.main_ctx().ref())
    _z3_shared.set()
