"""Deterministic matrix suite for the experiments (seeded; the same matrices on every run).

    from experiments.matrices import suite, load_matrix_market
    for name, A in suite("quick"): ...        # scipy CSR, float64 values, int32 indices

Structures (issue 7): 2D Laplacian (5-point), 3D Laplacian (7-point), banded with a few dense
diagonals, random uniform at densities 1e-5, 1e-4, 1e-3 and 1e-2 (1e-5: mostly empty rows,
hypersparse), R-MAT power-law graphs with Graph500
parameters (a=0.57, b=0.19, c=0.19, d=0.05), block-structured (dense 8x8 blocks) and lower
triangular.  Sizes:

- ``quick``: about 2k rows (a few thousand nonzeros per matrix; the test suite uses these),
- ``medium``: about 16k-32k rows (nonzeros and vectors mostly inside the last-level cache),
- ``full``: 25k-500k rows and 1.3M-6.4M nonzeros (15-77 MB per matrix; outside a 32 MB L3).

Every matrix is canonical CSR (sorted column indices, no duplicates, no explicit zeros) with
values drawn uniformly from [0.5, 1.5) unless the structure prescribes them (Laplacians).
``--matrix path.mtx`` in the experiments reads user data with :func:`load_matrix_market`.

    python -m experiments.matrices [quick|medium|full]     # prints the suite's statistics
"""
from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

SCALES = ("quick", "medium", "full")


def _rng(name: str, scale: str) -> np.random.Generator:
    """A generator seeded from the matrix's name and scale (stable across runs and machines)."""
    return np.random.default_rng(zlib.crc32(f"spf-experiments/{name}/{scale}".encode()))


def _canonical(a: sp.spmatrix) -> sp.csr_matrix:
    a = sp.csr_matrix(a, dtype=np.float64)
    a.sum_duplicates()
    a.eliminate_zeros()
    a.sort_indices()
    a.indices = a.indices.astype(np.int32, copy=False)
    a.indptr = a.indptr.astype(np.int32, copy=False)
    return a


def _unique(a: np.ndarray) -> np.ndarray:
    """Sorted unique values (np.unique is several times slower on large int64 arrays in
    numpy 2.4)."""
    s = np.sort(a)
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if len(s) else s


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(0.5, 1.5, n)


def _from_coords(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int],
                 rng: np.random.Generator) -> sp.csr_matrix:
    """CSR with random values at the given (possibly repeated) positions; repeats are merged."""
    a = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
    a.sum_duplicates()
    a.data = _values(rng, a.nnz)
    return _canonical(a)


# --- structures ----------------------------------------------------------------------------
def laplacian_2d(k: int) -> sp.csr_matrix:
    """5-point Laplacian on a k x k grid (n = k^2, about 5 nonzeros per row)."""
    t = sp.diags([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], [-1, 0, 1])
    eye = sp.identity(k)
    return _canonical(sp.kron(eye, t) + sp.kron(t, eye))


def laplacian_3d(k: int) -> sp.csr_matrix:
    """7-point Laplacian on a k x k x k grid (n = k^3, about 7 nonzeros per row)."""
    t = sp.diags([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], [-1, 0, 1])
    eye = sp.identity(k)
    return _canonical(sp.kron(sp.kron(eye, eye), t) + sp.kron(sp.kron(eye, t), eye)
                      + sp.kron(sp.kron(t, eye), eye))


def banded(n: int, offsets: tuple[int, ...], rng: np.random.Generator) -> sp.csr_matrix:
    """Dense diagonals at ``offsets`` (the main band plus a few far ones)."""
    diags = [_values(rng, n - abs(o)) for o in offsets]
    return _canonical(sp.diags(diags, list(offsets), shape=(n, n)))


def random_uniform(n: int, density: float, rng: np.random.Generator) -> sp.csr_matrix:
    """Uniformly random positions, ``density * n^2`` nonzeros (sampled without replacement,
    vectorised: draw 5% extra linear positions, drop repeats, then drop random extras)."""
    target = round(density * n * n)
    picked = np.empty(0, dtype=np.int64)
    while len(picked) < target:
        extra = rng.integers(0, n * n, size=int(target * 1.05) + 16, dtype=np.int64)
        picked = _unique(np.concatenate([picked, extra]))
    picked = np.delete(picked, rng.choice(len(picked), len(picked) - target, replace=False))
    rows = picked // n
    indptr = np.searchsorted(rows, np.arange(n + 1)).astype(np.int32)
    return _canonical(sp.csr_matrix((_values(rng, target), (picked % n).astype(np.int32), indptr),
                                    shape=(n, n)))


def rmat(scale: int, edge_factor: int, rng: np.random.Generator,
         a: float = 0.57, b: float = 0.19, c: float = 0.19) -> sp.csr_matrix:
    """R-MAT power-law graph (Graph500 parameters), 2^scale vertices, edge_factor * 2^scale
    edges before merging repeats; vectorised over edges, one quadrant draw per bit.  Vertex
    labels are permuted randomly (as Graph500 does), so hubs are spread over the rows."""
    n = 1 << scale
    m = edge_factor * n
    rows = np.zeros(m, dtype=np.int64)
    cols = np.zeros(m, dtype=np.int64)
    ab, abc = a + b, a + b + c
    for bit in range(scale):
        u = rng.random(m)
        down = u >= ab                       # quadrants c or d: row bit set
        right = ((u >= a) & (u < ab)) | (u >= abc)   # quadrants b or d: column bit set
        rows |= down.astype(np.int64) << bit
        cols |= right.astype(np.int64) << bit
    perm = rng.permutation(n)
    return _from_coords(perm[rows], perm[cols], (n, n), rng)


def block_structured(block_rows: int, blocks_per_row: int, rng: np.random.Generator,
                     bs: int = 8) -> sp.csr_matrix:
    """Dense ``bs x bs`` blocks: each block row holds ``blocks_per_row`` blocks at random block
    columns (one always on the diagonal)."""
    nb = block_rows
    brow = np.repeat(np.arange(nb), blocks_per_row)
    bcol = rng.integers(0, nb, size=nb * blocks_per_row)
    bcol[::blocks_per_row] = np.arange(nb)
    pairs = _unique(brow * nb + bcol)
    brow, bcol = pairs // nb, pairs % nb
    r = (brow[:, None] * bs + np.arange(bs)[None, :]).repeat(bs, axis=1).reshape(-1)
    c = np.tile(bcol[:, None] * bs + np.arange(bs)[None, :], (1, bs)).reshape(-1)
    return _from_coords(r, c, (nb * bs, nb * bs), rng)


def lower_triangular(n: int, per_row: int, rng: np.random.Generator) -> sp.csr_matrix:
    """Lower triangular with a full diagonal and about ``per_row`` random entries left of it
    (columns drawn uniformly from [0, i))."""
    rows = np.repeat(np.arange(1, n), per_row)
    cols = (rng.random(len(rows)) * rows).astype(np.int64)
    diag = np.arange(n)
    return _from_coords(np.concatenate([rows, diag]), np.concatenate([cols, diag]), (n, n), rng)


# --- the suite -------------------------------------------------------------------------------
# name -> size parameters per scale
_SIZES: dict[str, dict[str, tuple]] = {
    "laplace2d":      {"quick": (45,), "medium": (160,), "full": (512,)},
    "laplace3d":      {"quick": (13,), "medium": (30,), "full": (64,)},
    "banded":         {"quick": (2048,), "medium": (25_000,), "full": (262_144,)},
    "random_1e-5":    {"quick": (8192,), "medium": (60_000,), "full": (500_000,)},
    "random_1e-4":    {"quick": (2048,), "medium": (25_000,), "full": (250_000,)},
    "random_1e-3":    {"quick": (2048,), "medium": (16_000,), "full": (70_000,)},
    "random_1e-2":    {"quick": (512,), "medium": (5_000,), "full": (25_000,)},
    "rmat":           {"quick": (11,), "medium": (14,), "full": (18,)},
    "block8":         {"quick": (256,), "medium": (3_000,), "full": (32_768,)},
    "lower_triangular": {"quick": (2048,), "medium": (25_000,), "full": (262_144,)},
}


def dense_lower(n: int) -> sp.csr_matrix:
    """An n x n lower-triangular matrix with every entry on and below the diagonal stored (what
    the packed LowerTri layout is for; not in the suite: its nonzeros grow as n^2 / 2)."""
    rng = _rng("dense_lower", str(n))
    rows, cols = np.tril_indices(n)
    a = sp.csr_matrix((_values(rng, len(rows)), (rows, cols)), shape=(n, n))
    return _canonical(a)


def _build(name: str, scale: str) -> sp.csr_matrix:
    p = _SIZES[name][scale]
    rng = _rng(name, scale)
    if name == "laplace2d":
        return laplacian_2d(*p)
    if name == "laplace3d":
        return laplacian_3d(*p)
    if name == "banded":
        n = p[0]
        far = max(n // 100, 3)
        return banded(n, (-far, -3, -2, -1, 0, 1, 2, 3, far), rng)
    if name.startswith("random_"):
        return random_uniform(p[0], float(name.split("_")[1]), rng)
    if name == "rmat":
        return rmat(p[0], 16, rng)
    if name == "block8":
        return block_structured(p[0], 3, rng)
    if name == "lower_triangular":
        return lower_triangular(p[0], 16, rng)
    raise KeyError(name)


NAMES = tuple(_SIZES)


def suite(scale: str = "quick", names: list[str] | None = None
          ) -> Iterator[tuple[str, sp.csr_matrix]]:
    """Yield ``(name, csr)`` for every matrix of the suite at ``scale`` (built lazily)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    for name in names or NAMES:
        yield name, _build(name, scale)


def load_matrix_market(path: str | Path) -> tuple[str, sp.csr_matrix]:
    """Read a Matrix Market file into canonical CSR (pattern matrices get value 1; symmetric
    files are expanded by scipy).  Returns ``(file stem, matrix)``."""
    a = scipy.io.mmread(str(path))
    a = sp.csr_matrix(a)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{path}: only real/integer/pattern matrices are supported "
                         f"(got dtype {a.dtype})")
    return Path(path).stem, _canonical(a)


def matrices(scale: str, matrix_files: list[str] | None = None
             ) -> Iterator[tuple[str, sp.csr_matrix]]:
    """The user's Matrix Market files when given, otherwise the suite at ``scale``."""
    if matrix_files:
        for path in matrix_files:
            yield load_matrix_market(path)
    else:
        yield from suite(scale)


def describe_matrix(a: sp.csr_matrix) -> dict[str, object]:
    lens = np.diff(a.indptr)
    return {"rows": a.shape[0], "cols": a.shape[1], "nnz": a.nnz,
            "max_row": int(lens.max()) if len(lens) else 0,
            "empty_rows": int((lens == 0).sum()),
            "MB": round((a.nnz * 12 + (a.shape[0] + 1) * 4) / 1e6, 1)}


if __name__ == "__main__":
    import time
    which = sys.argv[1] if len(sys.argv) > 1 else "quick"
    for name in NAMES:
        t0 = time.perf_counter()
        a = _build(name, which)
        print(f"{name:18s} {describe_matrix(a)}  built in {time.perf_counter() - t0:.2f} s")
