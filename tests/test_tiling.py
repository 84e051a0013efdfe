"""Tiling as a relation on the iteration space (issue 4, paper Sec. 5.2, Fig. 1(d)-(f), Fig. 8).

- Fig. 8: ``v = A(i) * B(i)``, SV x SV with the guard-loop find, ``tile={"B.p": 8}``: the tile
  loop ``B_p_tile`` and the tile-skipping guard ``B->idx[8*B_p_tile] <= i && B->idx[min(..)-1]
  >= i`` (reversed for SV_decreasing, absent for SV_unsorted); results for many random inputs.
- Fig. 1(d)-(f): the dense dot product tiled by 8; 2-D tiling of dense SpMV.
- CSR SpMV rows tiled by 4, 1 and more than the row count; tiling with ``parallel=True`` makes
  the tile loop the parallel one (1, 2, 4 threads); TTM on CSF tiled and parallel.
- Legality: an order that runs two updates of one output element in the opposite order is
  refused with SynthesisError ("is not legal"); each refused case is shown illegal on a
  concrete input by enumerating the instances in both orders, and the sorted variant of the
  same case (where the layout's order property keeps the updates in order) is accepted and
  gives correct results.
- Errors: unknown variable, size 0 / non-integer, tiling a variable that is not a loop.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from conftest import assert_compiles_clean

import spf

DOT = "v = A(i) * B(i)"
SPMV = "y(i) = A(i,j) * x(j)"
SPMSPM = "C(i,j) = A(i,k) * B(k,j)"
TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
PRAGMA = "#pragma omp parallel for schedule(guided,32)"
THREADS = (1, 2, 4)


@functools.cache
def build(expr: str, layouts: tuple, tile: tuple, order: tuple | None = None,
          find: str = "auto", parallel: bool = False):
    k = spf.Kernel(expr, dict(layouts), tile=dict(tile), order=list(order) if order else None,
                   find=find, parallel=parallel)
    assert_compiles_clean(k.c_source(), ("-fopenmp",) if k.parallel_loop else ())
    return k, k.compile()


def vector(n: int, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, n)
    a[rng.random(n) >= density] = 0.0
    return a


def matrix(shape, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, shape) * (rng.random(shape) < density)
    if shape[0] > 5:
        a[::5] = 0.0
    return a


def pack(layout: str, dense: np.ndarray, seed: int = 0):
    if layout.startswith("Dense"):
        return dense if dense.ndim < 3 else spf.Tensor.from_dense(layout, dense)
    coords = np.nonzero(dense)
    perm = np.random.default_rng(seed + 99).permutation(len(coords[0]))
    coords = tuple(c[perm] for c in coords)
    return spf.Tensor.from_coords(layout, dense.shape, coords, dense[coords])


# -- Fig. 8 -----------------------------------------------------------------------------------
FIG8_GUARD = ("B->idx[(8*B_p_tile)] <= i && "
              "B->idx[(spf_min(8*B_p_tile + 8, B->len) - 1)] >= i")
FIG8_GUARD_C = FIG8_GUARD.replace("B->", "B_")    # the kernel reads fields through locals


def dot_inputs():
    """Lengths around multiples of 8, empty vectors, one nonzero, random densities."""
    out = []
    for n, seed in itertools.product([0, 1, 7, 8, 9, 15, 16, 17, 23, 64, 100, 333], [0, 1, 2]):
        for da, db in ((0.5, 0.5), (0.1, 0.9), (1.0, 0.3)):
            out.append((vector(n, da, seed), vector(n, db, seed + 50)))
    out.append((np.zeros(40), vector(40, 0.5, 3)))
    out.append((vector(40, 0.5, 3), np.zeros(40)))
    one = np.zeros(41)
    one[40] = 2.0
    out.append((one, vector(41, 1.0, 4)))
    return out


def test_fig8_code():
    k, _ = build(DOT, (("A", "SV"), ("B", "SV")), (("B.p", 8),), find="loop")
    assert k.nest.schedule == ["A_p", "i", "B_p_tile", "B_p"]
    src = k.c_source()
    assert ("for (spf_index_t B_p_tile = 0; B_p_tile < spf_floord(B_len - 1, 8) + 1; "
            "++B_p_tile)") in src
    assert FIG8_GUARD_C in src
    assert "for (spf_index_t B_p = 8*B_p_tile; B_p < spf_min(8*B_p_tile + 8, B_len); ++B_p)" in src
    # Fig. 8(c) line order: tile loop, guard, point loop, the original test f[i] == k
    order = [src.index(s) for s in ("for (spf_index_t B_p_tile", FIG8_GUARD_C,
                                    "for (spf_index_t B_p =", "if (i == B_idx[B_p])")]
    assert order == sorted(order)
    (tile,) = k.analysis().tiles
    assert (tile.var, tile.size, tile.tile_var) == ("B_p", 8, "B_p_tile")
    assert len(tile.guards) == 1 and FIG8_GUARD in tile.guards[0]
    text = str(k.analysis())
    assert "tile B_p by 8 (tile loop B_p_tile)" in text
    assert "tile-skipping guard: " in text


@pytest.mark.parametrize("lb,guarded,compare", [("SV", True, ("<=", ">=")),
                                                ("SV_decreasing", True, (">=", "<=")),
                                                ("SV_unsorted", False, None)])
def test_fig8_results(lb, guarded, compare):
    """The guard needs keys sorted over the tile (either direction); unsorted: no guard."""
    k, f = build(DOT, (("A", "SV"), ("B", lb)), (("B.p", 8),), find="loop")
    src = k.c_source()
    assert ("skip tiles that cannot hold a match" in src) == guarded
    if guarded:
        lo, hi = compare
        assert f"B_idx[(8*B_p_tile)] {lo} i && B_idx[(spf_min(8*B_p_tile + 8, B_len) - 1)] " \
               f"{hi} i" in src
    else:
        assert k.analysis().tiles[0].guards == ()
    for n, (a, b) in enumerate(dot_inputs()):
        got = f(A=pack("SV", a, n), B=pack(lb, b, n + 1))
        np.testing.assert_allclose(got, np.dot(a, b), rtol=1e-12, atol=1e-12,
                                   err_msg=f"input {n}, length {len(a)}")


@pytest.mark.parametrize("size", [1, 3, 8, 50])
def test_fig8_tile_sizes(size):
    _, f = build(DOT, (("A", "SV"), ("B", "SV")), (("B.p", size),), find="loop")
    for _n, (a, b) in enumerate(dot_inputs()[::5]):
        np.testing.assert_allclose(f(A=pack("SV", a), B=pack("SV", b)), np.dot(a, b),
                                   rtol=1e-12, atol=1e-12)


def test_guard_in_spmspv_find_loop():
    """CSR x SV with the x_p loop tiled: the search loop gets the Fig. 8 guard on j."""
    k, f = build(SPMV, (("A", "CSR"), ("x", "SV")), (("x.p", 8),))
    assert k.nest.schedule[-2:] == ["x_p_tile", "x_p"]
    assert "x_idx[(8*x_p_tile)] <= j && " in k.c_source()
    a = matrix((60, 90), 0.1, 1)
    for seed, density in ((0, 0.0), (1, 0.2), (2, 1.0)):
        x = vector(90, density, seed)
        np.testing.assert_allclose(f(A=pack("CSR", a), x=pack("SV", x)), a @ x,
                                   rtol=1e-12, atol=1e-12)


# -- Fig. 1(d)-(f) and dense tiling ---------------------------------------------------------------
def test_fig1_dense_dot_tiled_by_8():
    k, f = build(DOT, (), (("A.p0", 8),))
    src = k.c_source()
    assert ("for (spf_index_t A_p0_tile = 0; A_p0_tile < spf_floord(A_n0 - 1, 8) + 1; "
            "++A_p0_tile)") in src
    assert ("for (spf_index_t A_p0 = 8*A_p0_tile; A_p0 < spf_min(A_n0, 8*A_p0_tile + 8); "
            "++A_p0)") in src
    assert "8*A_p0_tile <= A_p0 <= 8*A_p0_tile + 7" in str(k.space)     # Fig. 1(e)
    for n in (0, 1, 7, 8, 9, 100):
        a, b = vector(n, 1.0, n), vector(n, 1.0, n + 1)
        np.testing.assert_allclose(f(A=a, B=b), np.dot(a, b), rtol=1e-12, atol=1e-12)


def test_dense_spmv_2d_tiles_parallel():
    k, f = build(SPMV, (("A", "DenseMatrix"),), (("A.p0", 4), ("A.p1", 8)),
                 ("A.p0_tile", "A.p1_tile", "A.p0", "A.p1"), parallel=True)
    assert k.nest.schedule[:3] == ["A_p0_tile", "A_p1_tile", "A_p0"]
    assert k.parallel_loop == "A_p0_tile"
    assert f"{PRAGMA}\n    for (spf_index_t A_p0_tile = 0;" in k.c_source()
    for shape in ((0, 0), (1, 1), (13, 17), (300, 21)):
        a, x = matrix(shape, 0.7, 5), vector(shape[1], 1.0, 6)
        for n in THREADS:
            f.set_num_threads(n)
            np.testing.assert_allclose(f(A=a, x=x), a @ x, rtol=1e-12, atol=1e-12)


# -- CSR SpMV rows -----------------------------------------------------------------------------
SPMV_MATRICES = [(300, 200, 0.03, 0), (7, 5, 0.5, 1), (1, 1, 1.0, 2), (0, 4, 0.0, 3),
                 (4, 0, 0.0, 4), (33, 40, 0.0, 5)]


@pytest.mark.parametrize("size", [1, 4, 32, 1000])
def test_csr_rows_tiled(size):
    k, f = build(SPMV, (("A", "CSR"),), (("A.pi", size),))
    assert k.nest.schedule[0] == "A_pi_tile"
    src = k.c_source()
    if size == 1:     # tiles of one row: the tile loop runs the rows, A_pi = A_pi_tile
        assert "for (spf_index_t A_pi_tile = 0; A_pi_tile < A_numRows; ++A_pi_tile)" in src
        assert "const spf_index_t A_pi = A_pi_tile;" in src
    else:
        assert (f"for (spf_index_t A_pi = {size}*A_pi_tile; "
                f"A_pi < spf_min({size}*A_pi_tile + {size}, A_numRows); ++A_pi)") in src
    for m, n, density, seed in SPMV_MATRICES:
        a, x = matrix((m, n), density, seed), vector(n, 1.0, seed)
        np.testing.assert_allclose(f(A=pack("CSR", a, seed), x=x), a @ x,
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [1, 4, 256])
def test_csr_rows_tiled_parallel(size):
    k, f = build(SPMV, (("A", "CSR"),), (("A.pi", size),), parallel=True)
    a = k.analysis()
    assert k.parallel_loop == a.parallel_loop == "A_pi_tile"
    assert [lp.var for lp in a.loops if lp.parallel] == ["A_pi_tile"]
    src = k.c_source()
    assert f"{PRAGMA}\n    for (spf_index_t A_pi_tile = 0;" in src and src.count(PRAGMA) == 1
    for m, n, density, seed in SPMV_MATRICES:
        dense, x = matrix((m, n), density, seed), vector(n, 1.0, seed)
        A = pack("CSR", dense, seed)
        for t in THREADS:
            f.set_num_threads(t)
            np.testing.assert_allclose(f(A=A, x=x), dense @ x, rtol=1e-12, atol=1e-12)


def test_spmspv_tiled_rows_parallel_with_find_state():
    """CSR x SV, rows tiled: the SeqIter state (if chosen) is reset per row and private."""
    k, f = build(SPMV, (("A", "CSR"), ("x", "SV")), (("A.pi", 16),), parallel=True)
    assert k.parallel_loop == "A_pi_tile"
    src = k.c_source()
    for line in src.splitlines():
        if "#pragma omp" in line and "spf_pos_x_p" in src:
            assert "private(spf_pos_x_p)" in line
    a = matrix((300, 120), 0.05, 7)
    for x in (vector(120, 0.02, 1), vector(120, 0.6, 2), np.zeros(120)):
        X = pack("SV", x)
        for t in THREADS:
            f.set_num_threads(t)
            np.testing.assert_allclose(f(A=pack("CSR", a), x=X), a @ x, rtol=1e-12, atol=1e-12)


def test_ttm_csf_tiled_parallel():
    k, f = build(TTM, (("A", "CSF"),), (("A.p0", 8),), parallel=True)
    assert k.parallel_loop == "A_p0_tile"
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (200, 6, 9)) * (rng.random((200, 6, 9)) < 0.1)
    a[::3] = 0.0
    b = rng.uniform(-1, 1, (9, 5))
    A = pack("CSF", a)
    for t in THREADS:
        f.set_num_threads(t)
        np.testing.assert_allclose(f(A=A, B=b), np.einsum("ijk,kl->ijl", a, b),
                                   rtol=1e-12, atol=1e-12)


def test_tile_loop_of_a_scatter_runs_with_private_copies():
    k, f = build(SPMV, (("A", "CSC"),), (("A.pj", 8),), parallel=True)
    assert k.nest.schedule[0] == "A_pj_tile" == k.parallel_loop and k.plan.privatized
    assert "carries a dependence only through the output y" in k.analysis().parallel_reason
    a, x = matrix((50, 70), 0.1, 8), vector(70, 1.0, 9)
    np.testing.assert_allclose(f(A=pack("CSC", a), x=x), a @ x, rtol=1e-12, atol=1e-12)


# -- legality ----------------------------------------------------------------------------------
def write_order(instances: list[dict], out: tuple[str, ...], order: list[str]) -> dict:
    """Run ``instances`` (loop values) in lexicographic ``order``; per output element, the
    sequence of instances (by their index in ``instances``) that update it."""
    seq: dict = {}
    for n in sorted(range(len(instances)), key=lambda n: [instances[n][v] for v in order]):
        seq.setdefault(tuple(instances[n][o] for o in out), []).append(n)
    return seq


def reversed_pair(instances, out, original, new) -> bool:
    """Whether some output element sees two of its updates in the opposite order."""
    before, after = write_order(instances, out, original), write_order(instances, out, new)
    for key, seq in before.items():
        rank = {n: r for r, n in enumerate(after[key])}
        if any(rank[a] > rank[b] for a, b in itertools.pairwise(seq)):
            return True
    return False


def dot_instances(a_idx, b_idx, tile):
    """Instances (A_p, B_p, B_p_tile) of v = A(i) * B(i) with the guard-loop find."""
    return [{"A_p": pa, "B_p": pb, "B_p_tile": pb // tile, "v": 0}
            for pa, ia in enumerate(a_idx) for pb, ib in enumerate(b_idx) if ia == ib]


@pytest.mark.parametrize("lb", ["SV_unsorted", "SV_decreasing"])
def test_dot_tile_outermost_is_illegal(lb):
    """order B.p_tile, A.p, B.p: B's tiles now come first.  A is sorted, B is not sorted
    increasingly, so two matches (A_p 0, B_p 8) and (A_p 1, B_p 0) that both update v run
    in the opposite order (A_p order before, B tile order after)."""
    with pytest.raises(spf.SynthesisError, match="is not legal") as exc:
        spf.Kernel(DOT, {"A": "SV", "B": lb}, find="loop", tile={"B.p": 8},
                   order=["B.p_tile", "A.p", "B.p"])
    assert "update the same element of v in the opposite order" in str(exc.value)
    # a concrete witness: A.idx = [0, 1]; B holds 1 at position 0 and 0 at position 8
    b_idx = [1, 2, 3, 4, 5, 6, 7, 8, 0] if lb == "SV_unsorted" else [8, 7, 6, 5, 4, 3, 2, 1, 0]
    inst = dot_instances([0, 1], b_idx, 8)
    assert reversed_pair(inst, ("v",), ["A_p", "B_p"], ["B_p_tile", "A_p", "B_p"])


def test_dot_tile_outermost_is_legal_when_sorted():
    """With B sorted, matches come in the same order in A and B (both increasing), so B's
    tile order agrees with A's order: accepted, and correct."""
    k, f = build(DOT, (("A", "SV"), ("B", "SV")), (("B.p", 8),), ("B.p_tile", "A.p", "B.p"),
                 find="loop")
    assert k.nest.schedule[0] == "B_p_tile"
    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(0, 80))
        a, b = vector(n, 0.5, trial), vector(n, 0.6, trial + 100)
        ai, bi = np.flatnonzero(a), np.flatnonzero(b)
        inst = dot_instances(list(ai), list(bi), 8)
        assert not reversed_pair(inst, ("v",), ["A_p", "B_p"], ["B_p_tile", "A_p", "B_p"])
        np.testing.assert_allclose(f(A=pack("SV", a), B=pack("SV", b)), np.dot(a, b),
                                   rtol=1e-12, atol=1e-12)


def test_spmspm_coo_tile_outermost_is_illegal():
    """C(i,j) = A(i,k) * B(k,j), A CSR, B COO (any order), B's positions tiled outermost.
    For one C(i,j) the updates run in increasing k (A's columns are sorted per row); COO
    may store (k=1, j) before (k=0, j) in another tile, which then runs first."""
    with pytest.raises(spf.SynthesisError, match="is not legal") as exc:
        spf.Kernel(SPMSPM, {"A": "CSR", "B": "COO"}, tile={"B.p": 4},
                   order=["B.p_tile", "A.pi", "A.pj", "B.p"])
    assert "same element of C(i,j) in the opposite order" in str(exc.value)
    a_cols = [0, 1]                          # row 0 of A: columns 0 and 1
    b = [(1, 0), (2, 2), (2, 3), (2, 4), (0, 0)]   # (k, j): B(1,0) at 0, B(0,0) at 4
    inst = [{"A_pi": 0, "A_pj": pj, "B_p": pb, "B_p_tile": pb // 4, "i": 0, "j": bj}
            for pj, k in enumerate(a_cols) for pb, (bk, bj) in enumerate(b) if bk == k]
    assert reversed_pair(inst, ("i", "j"), ["A_pi", "A_pj", "B_p"],
                         ["B_p_tile", "A_pi", "A_pj", "B_p"])


def test_spmspm_sorted_coo_tile_outermost_is_legal():
    k, f = build(SPMSPM, (("A", "CSR"), ("B", "SortedCOO")), (("B.p", 4),),
                 ("B.p_tile", "A.pi", "A.pj", "B.p"))
    assert k.nest.schedule[0] == "B_p_tile"
    for seed in range(3):
        a, b = matrix((20, 15), 0.2, seed), matrix((15, 18), 0.2, seed + 10)
        np.testing.assert_allclose(f(A=pack("CSR", a), B=pack("SortedCOO", b)), a @ b,
                                   rtol=1e-12, atol=1e-12)


def test_spmspv_unsorted_search_tile_outermost_is_illegal():
    with pytest.raises(spf.SynthesisError, match="is not legal"):
        spf.Kernel(SPMV, {"A": "CSR", "x": "SV_unsorted"}, find="loop", tile={"x.p": 8},
                   order=["x.p_tile", "A.pi", "A.pj", "x.p"])
    _k, f = build(SPMV, (("A", "CSR"), ("x", "SV")), (("x.p", 8),),
                 ("x.p_tile", "A.pi", "A.pj", "x.p"), find="loop")
    a, x = matrix((30, 40), 0.2, 1), vector(40, 0.5, 2)
    np.testing.assert_allclose(f(A=pack("CSR", a), x=pack("SV", x)), a @ x,
                               rtol=1e-12, atol=1e-12)


# -- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("tile,message", [
    ({"A.pq": 4}, "tile names 'A.pq', which is not a variable of the iteration space"),
    ({"q": 4}, "tile names 'q'"),
    ({"A.pi": 0}, "tile size of 'A.pi' must be a positive integer, got 0"),
    ({"A.pi": -2}, "must be a positive integer"),
    ({"A.pi": 2.0}, "must be a positive integer, got 2.0"),
    ({"A.pi": True}, "must be a positive integer, got True"),
    ({"A.pi": "8"}, "must be a positive integer"),
    ([("A.pi", 4)], "tile must map loop variables to sizes"),
    ({"i": 4}, "cannot tile i: it is not a loop"),
    ({"j": 4}, "cannot tile j: it is not a loop"),
])
def test_tile_errors(tile, message):
    with pytest.raises(spf.SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        spf.Kernel(SPMV, {"A": "CSR"}, tile=tile)


def test_tile_of_an_assigned_layout_index_is_refused():
    """B.pi of CSR x CSR SpMSpM is defined by the find (B.pi = k), not a loop."""
    with pytest.raises(spf.SpecError, match="cannot tile B_pi: it is not a loop"):
        spf.Kernel(SPMSPM, {"A": "CSR", "B": "CSR"}, tile={"B.pi": 4})
