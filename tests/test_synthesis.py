"""Find synthesis (paper Sec. 6.2-7.2, Appendix A): templates, Z3 validity, state indices.

- Fig. 2(d): sorted SV . sorted SV is one loop over A with a SeqIter scan on B whose state
  is initialised once, before the loop.
- Fig. 11: v = A(i) * B(i) * C(i) with B decreasing and C unsorted: SeqIter backwards on B,
  HashMap on C; forcing SeqIter / BinarySearch on C fails and says no order is declared.
- A validity matrix for SpMSpV over seven matrix layouts, three vector layouts and every
  ``find=`` option: each combination either matches numpy or raises SynthesisError, with
  the certain cases asserted (unsorted x: no SeqIter / BinarySearch; sorted x: all valid).
- Auto: both templates emitted with a run-time choice; both branches are executed.
- State indices (Algorithm 3), including the reduced-index choice for SortedCOO and BCSR
  block exclusivity (A10) from the ``gap`` of its column order.
- SpMSpM with a dense output for pairs with a find, under every valid forced algorithm.
- Loop permutation (Sec. 7.2): iterate x, find in A's rows.
- Linear time: the generated C is instrumented *here* with step counters.

References are numpy results on the original dense inputs.  Kernels are built once per
combination (module caches) and every distinct generated source is compiled with -Werror.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_compiles_clean, covering, lanes

import spf
import spf.runtime.build
from spf.concurrency import symbolic
from spf.finds.checks import Checker as _Checker

ROOT = Path(__file__).resolve().parent.parent
SPMV = "y(i) = A(i,j) * x(j)"
SPMSPM = "C(i,j) = A(i,k) * B(k,j)"
DOT = "v = A(i) * B(i)"
FIG11 = "v = A(i) * B(i) * C(i)"
FINDS = ("auto", "seqiter", "densemap", "hashmap", "binsearch", "loop")
PERMUTED = ["x.p", "A.pi", "A.pj"]     # Sec. 7.2: iterate x, find in A
TOL = {"rtol": 1e-12, "atol": 1e-12}


# -- building (cached) --------------------------------------------------------------------
_CLEAN: set[str] = set()
_CLEAN_LOCK = threading.Lock()
_POOL = ThreadPoolExecutor(max_workers=1)


def _compile_checked(kernel: spf.Kernel) -> spf.CompiledKernel:
    """Compile, and check the same source with -Werror in parallel (once per source)."""
    src = kernel.c_source()
    digest = hashlib.sha256(src.encode()).hexdigest()
    with _CLEAN_LOCK:
        fresh = digest not in _CLEAN
        _CLEAN.add(digest)
    check = _POOL.submit(assert_compiles_clean, src) if fresh else None
    try:
        compiled = kernel.compile()
    finally:
        if check is not None:
            check.result()
    return compiled


def _freeze(d: dict | None) -> tuple:
    return tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
                        for k, v in (d or {}).items()))


@functools.cache
def _build(expr: str, layouts: tuple, find, params: tuple, order: tuple | None):
    try:
        k = spf.Kernel(expr, dict(layouts), find=dict(find) if isinstance(find, tuple) else find,
                       params={t: dict(p) for t, p in params}, order=list(order) if order else None)
    except spf.SynthesisError as exc:
        return None, None, exc
    return k, _compile_checked(k), None


def build(expr: str, layouts: dict, find="auto", params: dict | None = None,
          order: list | None = None):
    """(Kernel, CompiledKernel, None) or (None, None, SynthesisError), once per combination."""
    f = _freeze(find) if isinstance(find, dict) else find
    return _build(expr, _freeze(layouts), f, _freeze(params), tuple(order) if order else None)


def kernel_ok(expr: str, layouts: dict, find="auto", params: dict | None = None,
              order: list | None = None):
    k, f, err = build(expr, layouts, find, params, order)
    if err is not None:
        raise err
    return k, f


def fresh_source(expr: str, layouts: dict, find="auto", params: dict | None = None) -> spf.Kernel:
    """A new (uncached) Kernel, for instrumenting its C."""
    return spf.Kernel(expr, layouts, find=find, params=params)


def run_instrumented(kernel: spf.Kernel, src: str, counters: list[str], **args):
    """Compile ``src`` as ``kernel``'s C, run it, return (result, {counter: value})."""
    f = spf.CompiledKernel(kernel, src)
    lib = spf.runtime.build.load_library(str(spf.runtime.build.build_library(src)))
    cells = {c: ctypes.c_longlong.in_dll(lib, c) for c in counters}
    for cell in cells.values():
        cell.value = 0
    out = f(**args)
    return out, {c: cell.value for c, cell in cells.items()}


def declare(src: str, counters: list[str], function: str = "int spf_kernel(") -> str:
    assert src.count(function) == 1
    decl = "".join(f"long long {c} = 0;\n" for c in counters)
    return src.replace(function, decl + "\n" + function)


def body(src: str) -> str:
    """The generated function (after the struct typedefs and helpers)."""
    return src[src.index("int spf_kernel("):]


# -- inputs -------------------------------------------------------------------------------
def matrix(kind: str, shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m, n = shape
    a = np.zeros(shape)
    if kind == "one":
        if m and n:
            a[m - 1, n - 1] = 2.5
    elif kind == "empty_rows":
        a = rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.3)
        a[::3] = 0.0
        a[:, 1::4] = 0.0
    elif kind == "random":
        a = rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.2)
    elif kind == "dense_row":
        a = rng.uniform(-1, 1, shape) * (rng.random(shape) < 0.1)
        if m:
            a[m // 2] = rng.uniform(0.5, 1, n)
    elif kind == "full":
        a = rng.uniform(0.5, 1, shape)
    elif kind != "empty":
        raise ValueError(kind)
    return a


def vector(kind: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + 100)
    x = np.zeros(n)
    if n == 0 or kind == "empty":
        return x
    if kind == "one":
        x[n - 1] = -1.5
    elif kind == "very_sparse":     # one or two entries: SeqIter branch of auto
        x[rng.choice(n, size=min(n, 2), replace=False)] = rng.uniform(0.5, 1, min(n, 2))
    elif kind == "sparse":
        x = rng.uniform(-1, 1, n) * (rng.random(n) < 0.3)
    elif kind == "dense":           # nearly dense: HashMap branch of auto
        x = rng.uniform(0.5, 1, n)
        x[rng.integers(0, n)] = 0.0
    elif kind == "full":
        x = rng.uniform(0.5, 1, n)
    else:
        raise ValueError(kind)
    return x


def pack(layout, dense: np.ndarray, params: dict | None = None, seed: int = 0) -> spf.Tensor:
    """Pack the nonzeros of ``dense`` given in a shuffled order (as_given packers keep it)."""
    coords = np.nonzero(dense)
    perm = np.random.default_rng(seed + 1000).permutation(len(coords[0]))
    coords = tuple(c[perm] for c in coords)
    return spf.Tensor.from_coords(layout, dense.shape, coords, dense[coords], **(params or {}))


def pack_vector(layout: str, x: np.ndarray, seed: int = 0) -> spf.Tensor:
    t = pack(layout, x, seed=seed)
    idx = np.asarray(t["idx"])
    if layout == "SV_unsorted" and len(idx) >= 3:
        assert not np.all(np.diff(idx) > 0) and not np.all(np.diff(idx) < 0), \
            "test input for SV_unsorted should be unsorted"
    return t


@functools.cache
def packed_matrix(layout: str, params: tuple, kind: str, shape: tuple, seed: int):
    dense = matrix(kind, shape, seed)
    return dense, pack(layout, dense, dict(params), seed)


@functools.cache
def packed_vector(layout: str, kind: str, n: int, seed: int):
    x = vector(kind, n, seed)
    return x, pack_vector(layout, x, seed)


# =========================================================================================
# 1. Fig. 2(d): sorted SV . sorted SV
# =========================================================================================
DOT_CASES = [("random", 0), ("random", 1), ("random", 2), ("empty_a", 0), ("empty_b", 0),
             ("empty", 0), ("one", 0), ("one_miss", 0), ("full", 0), ("size0", 0)]


def dot_inputs(kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 0 if kind == "size0" else 40
    a = rng.uniform(-1, 1, n) * (rng.random(n) < 0.4)
    b = rng.uniform(-1, 1, n) * (rng.random(n) < 0.4)
    if kind in ("empty_a", "empty"):
        a[:] = 0
    if kind in ("empty_b", "empty"):
        b[:] = 0
    if kind == "one":
        a[:] = 0
        b[:] = 0
        a[17] = 2.0
        b[17] = -3.0
    if kind == "one_miss":
        a[:] = 0
        b[:] = 0
        a[17] = 2.0
        b[18] = -3.0
    if kind == "full":
        a = rng.uniform(0.5, 1, n)
        b = rng.uniform(0.5, 1, n)
    return a, b


def test_fig2d_structure():
    k, _ = kernel_ok(DOT, {"A": "SV", "B": "SV"})
    (d,) = k.decisions
    assert d.find.use.name == "B" and d.chosen.algorithm == "seqiter"
    assert d.chosen.state == [] and d.alternatives == []
    src = body(k.c_source())
    assert src.count("for (") == 1, src
    loop = src.index("for (spf_index_t A_p = 0; A_p < A_len; ++A_p)")
    assert src.count("while (") == 1
    scan = src.index("while (spf_pos_B_p < B_len && B_idx[spf_pos_B_p] < i)")
    assert scan > loop
    # the state is (re)initialised once, before the loop over A
    inits = [n for n, line in enumerate(src.splitlines()) if line.strip() == "spf_pos_B_p = 0;"]
    assert len(inits) == 1
    assert src.index("    spf_pos_B_p = 0;") < loop
    assert "spf_hash" not in src


@pytest.mark.parametrize("kind,seed", DOT_CASES, ids=[f"{k}-{s}" for k, s in DOT_CASES])
@pytest.mark.parametrize("find", FINDS)
def test_fig2d_results(find, kind, seed):
    _, f = kernel_ok(DOT, {"A": "SV", "B": "SV"}, find)
    a, b = dot_inputs(kind, seed)
    v = f(A=pack("SV", a, seed=seed), B=pack("SV", b, seed=seed + 1))
    np.testing.assert_allclose(v, a @ b, **TOL)


# =========================================================================================
# 2. Fig. 11: increasing A, decreasing B, unsorted C
# =========================================================================================
FIG11_LAYOUTS = {"A": "SV", "B": "SV_decreasing", "C": "SV_unsorted"}


def fig11_inputs(kind: str, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    n = 50
    vs = [rng.uniform(-1, 1, n) * (rng.random(n) < dens) for dens in (0.6, 0.6, 0.6)]
    if kind == "empty_c":
        vs[2][:] = 0
    elif kind == "one":
        for v in vs:
            v[:] = 0
            v[33] = 1.5
    elif kind == "full":
        vs = [rng.uniform(0.5, 1, n) for _ in range(3)]
    return tuple(vs)


def test_fig11_decisions():
    k, _ = kernel_ok(FIG11, FIG11_LAYOUTS)
    by = {d.find.use.name: d for d in k.decisions}
    assert set(by) == {"B", "C"}
    assert by["B"].chosen.algorithm == "seqiter"
    assert by["B"].chosen.direction == -1
    # unsorted C: a dense position map, or the hash map when the map's size costs more
    assert by["C"].chosen.algorithm == "densemap"
    assert [c.algorithm for c in by["C"].alternatives] == ["hashmap"]
    assert "seqiter" in by["C"].rejected and "binsearch" in by["C"].rejected
    assert "--spf_pos_B_p;" in k.c_source()


@pytest.mark.parametrize("kind,seed", [("random", 0), ("random", 1), ("random", 2),
                                       ("empty_c", 0), ("one", 0), ("full", 0)])
@pytest.mark.parametrize("find", ["auto", {"B": "binsearch"}, {"B": "hashmap", "C": "loop"},
                                  "hashmap", "loop"], ids=str)
def test_fig11_results(find, kind, seed):
    _, f = kernel_ok(FIG11, FIG11_LAYOUTS, find)
    a, b, c = fig11_inputs(kind, seed)
    v = f(A=pack("SV", a, seed=seed), B=pack("SV_decreasing", b, seed=seed),
          C=pack_vector("SV_unsorted", c, seed=seed))
    np.testing.assert_allclose(v, np.sum(a * b * c), **TOL)


@pytest.mark.parametrize("algo", ["seqiter", "binsearch"])
def test_fig11_forcing_order_template_on_unsorted_fails(algo):
    with pytest.raises(spf.SynthesisError) as info:
        spf.Kernel(FIG11, FIG11_LAYOUTS, find={"C": algo})
    msg = str(info.value)
    assert f"find={algo!r}" in msg
    assert "lookup of C" in msg
    assert "SV_unsorted declares no order property" in msg
    assert "for idx" in msg
    # the same algorithm is fine on the sorted operand
    assert kernel_ok(FIG11, FIG11_LAYOUTS, {"B": algo})[0].decisions[0].chosen.algorithm == algo


# =========================================================================================
# 3. SpMSpV validity matrix
# =========================================================================================
MATRIX_LAYOUTS = [("CSR", {}), ("DCSR", {}), ("COO", {}), ("SortedCOO", {}), ("BCSR", {"B": 8}),
                  ("BCSR", {"B": 3}), ("CSC", {})]
VECTOR_LAYOUTS = ["SV", "SV_unsorted", "SV_decreasing"]
# (matrix kind, shape, seed, vector kind)
SPMSPV_CASES = [
    ("random", (20, 30), 0, "sparse"),
    ("empty_rows", (20, 30), 1, "dense"),
    ("random", (30, 20), 2, "very_sparse"),
    ("random", (17, 23), 3, "empty"),
    ("one", (20, 30), 0, "one"),
    ("empty", (20, 30), 0, "sparse"),
    ("dense_row", (20, 30), 4, "full"),
    ("random", (23, 17), 5, "dense"),
    ("empty_rows", (25, 19), 6, "very_sparse"),
    ("empty", (0, 5), 0, "sparse"),
    ("empty", (5, 0), 0, "empty"),
    ("full", (1, 1), 0, "full"),
    ("random", (70, 90), 7, "sparse"),
]


def lid(layout: str, params: dict) -> str:
    return f"{layout}{params.get('B', '')}"


def expected_valid(x_layout: str, find: str) -> bool | None:
    """Validity where it is certain (None: not asserted)."""
    if x_layout == "SV_unsorted":
        return find not in ("seqiter", "binsearch")
    if x_layout in ("SV", "SV_decreasing"):
        return True
    return None


# the fast lane: the whole validity row of CSR, and every layout with one x and find
FAST_MATRIX = covering([lid(a, p) for a, p in MATRIX_LAYOUTS], VECTOR_LAYOUTS, FINDS) | {
    ("CSR", x, f) for x in VECTOR_LAYOUTS for f in FINDS}
MATRIX = lanes([(a, p, x, f) for a, p in MATRIX_LAYOUTS for x in VECTOR_LAYOUTS for f in FINDS],
               lambda c: (lid(c[0], c[1]), c[2], c[3]) in FAST_MATRIX,
               lambda c: f"{lid(c[0], c[1])}-{c[2]}-{c[3]}")


@pytest.mark.parametrize("a_layout,a_params,x_layout,find", MATRIX)
def test_spmspv_matrix(a_layout, a_params, x_layout, find):
    # CSC's default order runs x's entries outermost (no find, see test_order.py); the
    # column-outer order keeps a find of each column in x, hoisted above the column's entries
    order = ["A.pj", "x.p", "A.pi"] if a_layout == "CSC" else None
    k, f, err = build(SPMV, {"A": a_layout, "x": x_layout}, find, {"A": a_params}, order)
    want = expected_valid(x_layout, find)
    if err is not None:
        assert want is not True, f"{find} should be valid here: {err}"
        assert "lookup of x" in str(err)
        if x_layout == "SV_unsorted":
            assert "SV_unsorted declares no order property" in str(err)
        return
    assert want is not False, f"{find} must be rejected for unsorted x:\n{k.report()}"
    # exactly one find, on x; the requested algorithm is what runs
    (d,) = k.decisions
    assert d.find.use.name == "x"
    algo = d.chosen.algorithm if d.chosen else "loop"
    if find != "auto":
        assert algo == find
    if x_layout == "SV_unsorted":
        assert algo in ("densemap", "hashmap", "loop")
    for kind, shape, seed, xkind in SPMSPV_CASES:
        dense, A = packed_matrix(a_layout, _freeze(a_params), kind, shape, seed)
        x, X = packed_vector(x_layout, xkind, shape[1], seed)
        np.testing.assert_allclose(f(A=A, x=X), dense @ x, **TOL,
                                   err_msg=f"{kind} {shape} seed {seed}, x {xkind}")


# =========================================================================================
# 4. Auto: both templates with a run-time choice
# =========================================================================================
AUTO_LAYOUTS = [("CSR", {}), ("DCSR", {}), ("COO", {}), ("SortedCOO", {}), ("BCSR", {"B": 8}),
                ("BCSR", {"B": 3})]


def test_auto_source_has_every_linear_template():
    k, _ = kernel_ok(SPMV, {"A": "CSR", "x": "SV"})
    (d,) = k.decisions
    assert d.chosen.algorithm == "seqiter"
    assert [c.algorithm for c in d.alternatives] == ["densemap", "hashmap"]
    src = body(k.c_source())
    assert "spf_hash_find" in src and "while (" in src and "spf_dmap_x_p[j]" in src
    assert ("if (spf_cost_densemap < spf_cost_seqiter && spf_cost_densemap <= "
            "spf_cost_hashmap) {") in src
    assert "} else if (spf_cost_hashmap < spf_cost_seqiter) {" in src
    assert "run-time alternative: densemap" in k.report()
    assert "run-time alternative: hashmap" in k.report()


BRANCHES = {"densemap": "if (spf_cost_densemap < spf_cost_seqiter && spf_cost_densemap <= "
                        "spf_cost_hashmap) {",
            "hashmap": "} else if (spf_cost_hashmap < spf_cost_seqiter) {",
            "seqiter": "} else {"}


@pytest.mark.parametrize("a_layout,a_params", AUTO_LAYOUTS,
                         ids=[lid(a, p) for a, p in AUTO_LAYOUTS])
def test_auto_runs_every_branch(a_layout, a_params):
    """Instrumented: a very sparse x takes the SeqIter branch; a dense x the DenseMap branch
    when A has many entries, the HashMap branch when A has so few that zeroing the map and
    filling it costs more (cost model: DenseMap 4 W + 8 L + n, HashMap 12 W + 4 L); every
    branch gives numpy's result."""
    k = fresh_source(SPMV, {"A": a_layout, "x": "SV"}, params={"A": a_params})
    src = k.c_source()
    counters = [f"spf_runs_{name}" for name in BRANCHES]
    for name, cond in BRANCHES.items():
        assert src.count(cond) == 1, cond
        src = src.replace(cond, f"{cond} ++spf_runs_{name};")
    src = declare(src, counters)
    many = np.zeros((200, 400))
    many[:, :8] = matrix("random", (200, 8), 11) + 2.0      # 1600 entries in 8 columns
    few = np.zeros((200, 400))
    few[:8, :8] = matrix("random", (8, 8), 12) + 2.0        # 64: one BCSR block
    taken = {}
    for case, dense, xkind in (("seqiter", many, "very_sparse"), ("densemap", many, "dense"),
                               ("hashmap", few, "dense")):
        x = vector(xkind, 400, 3)
        y, n = run_instrumented(k, src, counters, A=pack(a_layout, dense, a_params),
                                x=pack("SV", x))
        np.testing.assert_allclose(y, dense @ x, **TOL)
        taken[case] = [name for name in BRANCHES if n[f"spf_runs_{name}"]]
    # unsorted COO keeps one SeqIter position per row value (R_s = rows): the map is cheaper
    sparse_x = ["densemap"] if a_layout == "COO" else ["seqiter"]
    assert taken == {"seqiter": sparse_x, "densemap": ["densemap"], "hashmap": ["hashmap"]}


def test_auto_keeps_one_state_per_row_when_the_range_depends_on_it():
    """Sec. 7.2: when the searched range is a row of A (or a column of B), SeqIter keeps an
    array of states, one per row, each starting at its row's first position, instead of
    restarting before every search."""
    cases = [(SPMSPM, {"A": "CSR", "B": "CSC"}, None, "B_pj"),
             (SPMV, {"A": "CSR", "x": "SV"}, PERMUTED, "A_pi")]
    for expr, layouts, order, key in cases:
        k, _ = kernel_ok(expr, layouts, order=order)
        (d,) = k.decisions
        assert d.chosen.algorithm == "seqiter", k.report()
        assert d.chosen.array_key == key and d.chosen.init_level < d.find.level, k.report()
        assert "[spf_t] = " in k.c_source()


def test_auto_prefers_binsearch_to_a_per_search_state():
    """A SeqIter / HashMap state reset before every search costs O(L) per search: auto takes
    BinarySearch (O(log L)) instead.  An unsorted outer operand: SeqIter restarts per search,
    HashMap is built once and wins."""
    k, _ = kernel_ok(DOT, {"A": "SV_unsorted", "B": "SV"})
    (d,) = k.decisions
    assert d.chosen.algorithm == "densemap" and d.chosen.state == []
    assert [(c.algorithm, c.state) for c in d.alternatives] == [("hashmap", [])]
    assert d.valid["seqiter"].state == ["A_p"]
    from spf.decide.synthesis import Choice, _auto
    valid = {"seqiter": Choice("seqiter", state=["A_p"], init_level=d.find.level, stateful=True),
             "binsearch": Choice("binsearch"), "loop": Choice("loop")}
    with symbolic:
        assert _auto(k.nest, d.find, valid)[0].algorithm == "binsearch"


@pytest.mark.parametrize("find", FINDS)
@pytest.mark.parametrize("kind,seed", DOT_CASES[:7], ids=[f"{k}-{s}" for k, s in DOT_CASES[:7]])
def test_unsorted_outer_dot(kind, seed, find):
    _, f = kernel_ok(DOT, {"A": "SV_unsorted", "B": "SV"}, find)
    a, b = dot_inputs(kind, seed)
    v = f(A=pack_vector("SV_unsorted", a, seed=seed), B=pack("SV", b, seed=seed))
    np.testing.assert_allclose(v, a @ b, **TOL)


# =========================================================================================
# 5. State indices (Algorithm 3)
# =========================================================================================
def seqiter_choice(a_layout: str, a_params: dict | None = None, x_layout: str = "SV"):
    k, _ = kernel_ok(SPMV, {"A": a_layout, "x": x_layout}, "seqiter", {"A": a_params or {}})
    (d,) = k.decisions
    return k, d.chosen


def test_state_csr_reset_per_row():
    k, c = seqiter_choice("CSR")
    assert c.state == ["A_pi"] and c.array_key is None
    src = body(k.c_source())
    # reset inside the row loop, before the loop over the row's nonzeros
    row = src.index("for (spf_index_t A_pi = 0;")
    reset = src.index("spf_pos_x_p = 0;", row)
    assert row < reset < src.index("for (spf_index_t A_pj = ")


def test_state_sorted_coo_per_row():
    """The reduced-index choice: one state per row i (an array keyed by i), not per nonzero."""
    k, c = seqiter_choice("SortedCOO")
    assert c.state == ["i"] and c.array_key == "i"
    assert "spf_pos_x_p[i]" in k.c_source()


def test_state_dot_is_empty():
    k, _ = kernel_ok(DOT, {"A": "SV", "B": "SV"}, "seqiter")
    assert k.decisions[0].chosen.state == []


@pytest.mark.parametrize("b", [8, 3])
def test_state_bcsr_blocks_exclusive(b):
    """A10: colIdx(pj) + B <= colIdx(pj') makes the blocks of a block row exclusive, so one
    state per (block row, row in block) suffices."""
    k, c = seqiter_choice("BCSR", {"B": b})
    assert c.state == ["A_pi", "A_pk"] and c.array_key == "A_pk"
    assert "spf_pos_x_p[A_pk]" in k.c_source()


def nogap_bcsr(tmp: Path) -> Path:
    """BCSR whose column order has no gap: blocks of a row may overlap as far as the
    declared properties know (the packer still writes exclusive blocks)."""
    text = (ROOT / "layouts" / "BCSR.toml").read_text()
    prop = 'order = "<="\ngap = "B"'
    assert text.count(prop) == 1 and text.count('name = "BCSR"') == 1
    text = text.replace(prop, 'order = "<"').replace('name = "BCSR"', 'name = "BCSRnogap"')
    shutil.copy(ROOT / "layouts" / "BCSR.py", tmp / "BCSR.py")
    path = tmp / "BCSRnogap.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("b", [8, 3])
def test_state_bcsr_without_gap(tmp_path, b):
    path = nogap_bcsr(tmp_path)
    lay = spf.load_layout(str(path), B=b)
    k = spf.Kernel(SPMV, {"A": lay, "x": "SV"}, find="seqiter")
    (d,) = k.decisions
    state = d.chosen.state
    # the row-wise state of the gapped layout is no longer valid ...
    assert state != ["A_pi", "A_pk"]
    gap_k, _ = seqiter_choice("BCSR", {"B": b})
    with symbolic:      # Z3 work outside spf's own entry points
        assert _Checker(gap_k.nest, gap_k.decisions[0].find).eq3(["A_pi", "A_pk"], "<")[0]
        ok, why = _Checker(k.nest, d.find).eq3(["A_pi", "A_pk"], "<")
    assert not ok and "counterexample" in why
    # ... so Algorithm 3 keeps an index that separates overlapping blocks: the block (A_pj)
    # or, as it drops loop indices first, the column (j: one state per column)
    assert "A_pj" in state or "j" in state
    # ... and the results stay correct
    f = _compile_checked(k)
    for kind, shape, seed, xkind in SPMSPV_CASES:
        dense = matrix(kind, shape, seed)
        x = vector(xkind, shape[1], seed)
        np.testing.assert_allclose(f(A=pack(lay, dense, seed=seed), x=pack("SV", x)), dense @ x,
                                   **TOL)


# =========================================================================================
# 6. SpMSpM with a dense output
# =========================================================================================
SPMSPM_PAIRS = [("CSR", {}, "DCSR", {}), ("DCSR", {}, "DCSR", {}), ("COO", {}, "COO", {}),
                ("SortedCOO", {}, "SortedCOO", {}), ("COO", {}, "DCSR", {}),
                ("BCSR", {"B": 3}, "DCSR", {}), ("CSR", {}, "CSC", {}),
                ("CSC", {}, "SortedCOO", {}), ("BCSR", {"B": 8}, "SortedCOO", {}),
                ("DCSR", {}, "COO", {}), ("SortedCOO", {}, "DCSR", {}), ("CSC", {}, "CSC", {}),
                ("COO", {}, "CSC", {})]
SPMSPM_CASES = [("random", "random", (12, 15, 10), 0),
                ("empty_rows", "empty_rows", (15, 12, 14), 1), ("random", "random", (7, 20, 4), 2),
                ("one", "one", (9, 9, 9), 0),
                ("empty", "random", (10, 8, 6), 0), ("random", "empty", (10, 8, 6), 3),
                ("random", "full", (6, 5, 7), 4), ("full", "full", (1, 1, 1), 0)]


def pair_id(a: str, pa: dict, b: str, pb: dict) -> str:
    return f"{lid(a, pa)}x{lid(b, pb)}"


FAST_SPMSPM = covering([pair_id(*pair) for pair in SPMSPM_PAIRS], FINDS)    # the fast lane
SPMSPM_ITEMS = lanes([(*pair, f) for pair in SPMSPM_PAIRS for f in FINDS],
                     lambda c: (pair_id(*c[:4]), c[4]) in FAST_SPMSPM,
                     lambda c: f"{pair_id(*c[:4])}-{c[4]}")


@pytest.mark.parametrize("a,pa,b,pb,find", SPMSPM_ITEMS)
def test_spmspm(a, pa, b, pb, find):
    # with A in CSC the default order runs B's entries outermost and locates A's column (no
    # find, see test_order.py); A's loops outermost keep a find in B
    order = ["A.pj", "A.pi", "B.p"] if (a, b) == ("CSC", "SortedCOO") else None
    k, f, err = build(SPMSPM, {"A": a, "B": b}, find, {"A": pa, "B": pb}, order)
    unsorted = b == "COO"
    if err is not None and find == "densemap":    # B's rows hold several entries per k
        assert "a search can match several positions" in str(err)
        return
    if err is not None:
        assert unsorted and find in ("seqiter", "binsearch"), str(err)
        assert "COO declares no order property" in str(err)
        return
    assert not (unsorted and find in ("seqiter", "binsearch"))
    assert k.decisions, "expected a find for this pair"
    assert all(d.find.use.name == "B" for d in k.decisions)
    if find != "auto":
        assert {d.chosen.algorithm if d.chosen else "loop" for d in k.decisions} == {find}
    for ka, kb, (m, kk, n), seed in SPMSPM_CASES:
        da, A = packed_matrix(a, _freeze(pa), ka, (m, kk), seed)
        db, B = packed_matrix(b, _freeze(pb), kb, (kk, n), seed + 50)
        np.testing.assert_allclose(f(A=A, B=B), da @ db, **TOL,
                                   err_msg=f"{ka}x{kb} {(m, kk, n)} seed {seed}")


# =========================================================================================
# 7. Loop permutation (Sec. 7.2): iterate x, find in A
# =========================================================================================
@pytest.mark.parametrize("find", FINDS)
def test_permuted_find_in_a(find):
    k, f, err = build(SPMV, {"A": "CSR", "x": "SV"}, find, order=PERMUTED)
    assert err is None, str(err)
    (d,) = k.decisions
    assert d.find.use.name == "A" and d.find.var == "A_pj"
    assert [str(c) for c, _ in d.find.keys] == ["A.colIdx(A_pj)"]
    assert k.nest.schedule[0] == "x_p"
    if find != "auto":
        assert (d.chosen.algorithm if d.chosen else "loop") == find
    for kind, shape, seed, xkind in SPMSPV_CASES:
        dense, A = packed_matrix("CSR", (), kind, shape, seed)
        x, X = packed_vector("SV", xkind, shape[1], seed)
        np.testing.assert_allclose(f(A=A, x=X), dense @ x, **TOL)


# =========================================================================================
# 8. Linear time (instrumented generated C)
# =========================================================================================
def dot_operands(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    size = 10 * n
    a, b = np.zeros(size), np.zeros(size)
    a[rng.choice(size, n, replace=False)] = rng.uniform(0.5, 1, n)
    b[rng.choice(size, n, replace=False)] = rng.uniform(0.5, 1, n)
    return a, b


def count_dot(find: str, edit, n: int, counters: list[str]):
    k = fresh_source(DOT, {"A": "SV", "B": "SV"}, find)
    src = k.c_source()
    new = declare(edit(src), counters)
    assert new.count("++spf_") > src.count("++spf_")
    a, b = dot_operands(n)
    v, steps = run_instrumented(k, new, counters, A=pack("SV", a), B=pack("SV", b))
    np.testing.assert_allclose(v, a @ b, **TOL)
    return steps


def seqiter_edit(src: str) -> str:
    assert src.count("++spf_pos_B_p;") == 1
    return src.replace("++spf_pos_B_p;", "{ ++spf_pos_B_p; ++spf_steps; }")


def guard_edit(src: str) -> str:
    head = "for (spf_index_t B_p = 0; B_p < B_len; ++B_p) {"
    assert src.count(head) == 1
    return src.replace(head, "for (spf_index_t B_p = 0; B_p < B_len; ++B_p, ++spf_steps) {")


def hashmap_edit(src: str) -> str:
    look, ins = "spf_hash_find(&spf_map_B_p, i)", "spf_hash_insert(&spf_map_B_p, "
    assert src.count(look) == 1 and src.count(ins) == 1
    src = src.replace(look, f"(++spf_steps, {look})")
    return src.replace(ins, "++spf_inserts, " + ins)


N = 1000


def test_linear_seqiter():
    small = count_dot("seqiter", seqiter_edit, N, ["spf_steps"])["spf_steps"]
    large = count_dot("seqiter", seqiter_edit, 4 * N, ["spf_steps"])["spf_steps"]
    assert N // 2 <= small <= N            # at most one step per entry of B, in total
    assert 2 * N <= large <= 4 * N
    assert large / small <= 4.5


def test_quadratic_guard_loop():
    small = count_dot("loop", guard_edit, N, ["spf_steps"])["spf_steps"]
    large = count_dot("loop", guard_edit, 4 * N, ["spf_steps"])["spf_steps"]
    assert small == N * N and large == 16 * N * N
    assert large / small >= 15


def test_linear_hashmap():
    for n in (N, 4 * N):
        steps = count_dot("hashmap", hashmap_edit, n, ["spf_steps", "spf_inserts"])
        assert steps == {"spf_steps": n, "spf_inserts": n}   # one probe per entry of A


# =========================================================================================
# 9. report()
# =========================================================================================
def test_report_fig11():
    k, _ = kernel_ok(FIG11, FIG11_LAYOUTS)
    text = k.report()
    assert "find B at B_p" in text and "find C at C_p" in text
    assert "chosen: seqiter, backward" in text
    assert "chosen: densemap, map over [0, A.size)" in text
    assert "run-time alternative: hashmap" in text
    assert "state indices" in text
    assert "template arguments" in text
    c_part = text[text.index("find C at C_p"):]
    rejected = [line for line in c_part.splitlines() if line.strip().startswith("rejected seqiter")]
    assert len(rejected) == 1 and "Eq. 4" in rejected[0]
    assert "declares no order property" in rejected[0]
    assert any(line.strip().startswith("rejected binsearch") for line in c_part.splitlines())


def test_report_chosen_seqiter():
    k, _ = kernel_ok(DOT, {"A": "SV", "B": "SV"})
    text = k.report()
    assert "chosen: seqiter" in text and "state indices {}" in text
    assert "template arguments: range [0, B.len - 1], key (B.idx(B_p)), target (i)" in text


# =========================================================================================
# 10. Bad input
# =========================================================================================
def test_bad_find_name():
    with pytest.raises(spf.SpecError, match="magic"):
        spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find="magic")
    with pytest.raises(spf.SpecError, match="magic"):
        spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find={"B": "magic"})


def test_bad_find_tensor():
    with pytest.raises(spf.SpecError, match="'z'"):
        spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find={"z": "hashmap"})
