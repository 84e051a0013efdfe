"""Every find algorithm with every shipped layout as the searched operand (issue 36).

For each layout of ``spf.layout_names()`` and each algorithm of ``spf.finds.REGISTRY`` plus
"auto" and "loop", kernels in which an operand in that layout is searched (its loops run
inside the driver's, by ``order=``): a product with a sparse driver (order 1: a sparse-vector
and a dense driver; order 2: CSR, serial into a scalar and parallel into a row vector;
order 3: CSF) and the layout as a structural mask.  A forced algorithm whose assumptions fail
raises SynthesisError and nothing else; "auto" and "loop" always build.  Every kernel that
builds compiles with -Wall -Werror (so hoisted code — a find's state, a map's build — never
reads a variable above its definition) and agrees with numpy on dense arrays: random
entries with an empty row, one entry, no entry.  Each kernel is built once per (layout,
kernel, algorithm).

Data are made so that the layout stores exactly their nonzeros (no padding slot: DIA whole
diagonals, BCSR whole blocks, CUDAmma16x16 one entry per column pair, CSF_CCD whole fibers,
dense layouts every element), so a mask's structure is the reference's nonzero pattern.
"""
from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import assert_compiles_clean, covering, lanes, pairwise

import spf
from spf.errors import SynthesisError
from spf.finds import REGISTRY

ALGORITHMS = [*REGISTRY, "auto", "loop"]
# small blocks, so the small shapes below hold several
PARAMS = {"BCSR": {"B": 2}, "BlockedELL": {"B": 2}}

# Layouts whose operand no find searches, whatever the order: the algorithm option has
# nothing to apply to, and the kernel must still build, compile and compute.
NOT_SEARCHED = {
    "DenseVector": "a dense level's position is its coordinate: located, not searched",
    "DenseMatrix": "a dense level's position is its coordinate: located, not searched",
    "DenseTensor3": "a dense level's position is its coordinate: located, not searched",
    "LowerTri": "a row's position is its column: located, not searched",
    "CUDAmma16x16": "its column 2*pj + offset(32*pi + 4*pj + 1) is no index-array read equal "
                    "to the target (pj is also outside the read): the guard loop stays",
    "BlockedELL": "its column B*blockCol(bi, bk) + rj is a multiple of an index-array read: "
                  "the guard loop stays",
}
# layouts holding only data of a shape of their own, tested in test_writing.py
SPECIAL_DATA = {"SymCSR": "symmetric matrices only"}
# The searched operand's own variables placed before its searched one: BCSR's column is
# colIdx(pj) + pl, a find on colIdx(pj) = j - pl only when pl runs outside pj.
INNER_FIRST = {"BCSR": ["pi", "pk", "pl"]}


# -- data a layout stores exactly -----------------------------------------------------------
def layout_of(name: str) -> spf.Layout:
    return spf.load_layout(name, **PARAMS.get(name, {}))


def shape_of(lay, default: tuple[int, ...]) -> tuple[int, ...]:
    """``default``, except where the layout fixes an extent (a number) or ties two (one field
    for both: a square matrix)."""
    out, tied = [], {}
    for dim, size in zip(lay.shape, default):
        text = str(dim)
        out.append(int(text) if text.isdigit() else tied.setdefault(text, size))
    return tuple(out)


def _values(rng, shape) -> np.ndarray:
    return rng.integers(1, 9, shape).astype(float)


def _whole_diagonals(shape, kind: str, rng) -> np.ndarray:
    m, n = shape
    a = np.zeros(shape)
    offsets = {"random": [-2, 0, 1, 3], "one": [n - 1], "empty": []}[kind]
    for d in offsets:
        for i in range(max(0, -d), min(m, n - d)):
            a[i, i + d] = rng.integers(1, 9)
    return a


def _whole_blocks(shape, kind: str, rng, b: int) -> np.ndarray:
    """Blocks of b x b at aligned columns (cut at the last row and column)."""
    m, n = shape
    a = np.zeros(shape)
    if kind == "one":       # the corner block, cut to one element (odd shape)
        a[m - 1, n - 1] = 4.0
    elif kind == "random":
        for bi in range(1, -(-m // b)):          # block row 0 stays empty
            for bj in range(0, n, b):
                if rng.random() < 0.5:
                    a[bi * b:(bi + 1) * b, bj:bj + b] = _values(rng, (b, b))[:m - bi * b, :n - bj]
    return a


def _one_per_pair(shape, rng) -> np.ndarray:
    a = np.zeros(shape)
    rows, pairs = np.indices((shape[0], shape[1] // 2))
    a[rows, 2 * pairs + rng.integers(0, 2, pairs.shape)] = _values(rng, pairs.shape)
    return a


def _whole_fibers(shape, kind: str, rng) -> np.ndarray:
    a = np.zeros(shape)
    keep = {"random": rng.random(shape[:2]) < 0.5, "one": np.zeros(shape[:2], bool),
            "empty": np.zeros(shape[:2], bool)}[kind]
    keep[0] = False                              # an empty slice
    if kind == "one":
        keep[-1, -1] = True
    a[keep] = _values(rng, (int(keep.sum()), shape[2]))
    return a


def _sparse(shape, kind: str, rng) -> np.ndarray:
    a = np.zeros(shape)
    if kind == "one":
        a[tuple(s - 1 for s in shape)] = 3.0
    elif kind == "random":
        a = _values(rng, shape) * (rng.random(shape) < 0.45)
        if len(shape) > 1:
            a[1] = 0.0                           # an empty row (slice)
    return a


def stored(name: str, shape: tuple[int, ...], kind: str, rng) -> np.ndarray:
    """A dense array whose nonzeros the layout ``name`` stores exactly."""
    if name in ("DenseVector", "DenseMatrix", "DenseTensor3"):
        return _values(rng, shape)
    if name == "LowerTri":
        return np.tril(_values(rng, shape))
    if name == "CUDAmma16x16":
        return _one_per_pair(shape, rng)
    if name == "DIA":
        return _whole_diagonals(shape, kind, rng)
    if name in ("BCSR", "BlockedELL"):
        return _whole_blocks(shape, kind, rng, PARAMS[name]["B"])
    if name == "CSF_CCD":
        return _whole_fibers(shape, kind, rng)
    if layout_of(name).implicit is not None:     # a pattern layout: every entry holds 1
        return (_sparse(shape, kind, rng) != 0) * 1.0
    return _sparse(shape, kind, rng)


def kinds(name: str) -> tuple[str, ...]:
    """Data cases: layouts that store every element of their structure hold no other."""
    full = ("DenseVector", "DenseMatrix", "DenseTensor3", "LowerTri", "CUDAmma16x16")
    return ("random",) if name in full else ("random", "one", "empty")


def pack(name: str, dense: np.ndarray, seed: int,
         index_type: str = "int32") -> spf.Tensor | np.ndarray:
    """``dense`` in layout ``name``, packed from coordinates in a shuffled order."""
    if name in ("DenseVector", "DenseMatrix", "DenseTensor3"):
        return dense
    coords = np.nonzero(dense)
    perm = np.random.default_rng(seed).permutation(len(coords[0]))
    coords = tuple(c[perm] for c in coords)
    return spf.Tensor.from_coords(name, dense.shape, coords, dense[coords],
                                  index_type=index_type, **PARAMS.get(name, {}))


def driver(shape: tuple[int, ...], rng) -> np.ndarray:
    """The searching operand: random entries, its second row (slice) empty."""
    return _sparse(shape, "random", rng)


# -- kernels --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """A kernel in which ``target`` (the layout under test) is searched."""

    name: str
    expr: str
    layouts: tuple[tuple[str, str], ...]     # the other operands' layouts
    target: str
    order: tuple[str, ...]                  # the driver's loops, outermost
    mask: str | None = None                 # the masked output
    parallel: bool = False


ORDER1 = [Case("dot-sv", "v = a(i) * b(i)", (("a", "SV"),), "b", ("a.p",)),
          Case("dot-dense", "v = a(i) * b(i)", (("a", "DenseVector"),), "b", ("a.p0",)),
          Case("mask", "y(i) = A(i,j) * x(j)", (("A", "CSR"),), "m", ("A.pi", "A.pj"), "y")]
ORDER2 = [Case("dot", "v = A(i,j) * B(i,j)", (("A", "CSR"),), "B", ("A.pi", "A.pj")),
          Case("rows-parallel", "y(i) = A(i,j) * B(i,j)", (("A", "CSR"),), "B",
               ("A.pi", "A.pj"), parallel=True),
          Case("mask", "C(i,j) = A(i,k) * B(k,j)", (("A", "CSR"), ("B", "CSR")), "M",
               ("A.pi", "A.pj", "B.pj"), "C")]
ORDER3 = [Case("dot", "v = A(i,j,k) * B(i,j,k)", (("A", "CSF"),), "B", ("A.p0", "A.p1", "A.p2")),
          Case("mask", "Y(i,j,k) = A(i,j,l) * U(l,k)", (("A", "CSF"),), "M",
               ("A.p0", "A.p1", "A.p2", "k"), "Y")]
CASES = {1: ORDER1, 2: ORDER2, 3: ORDER3}


def _inputs(case: Case, name: str, kind: str, seed: int) -> tuple[dict, np.ndarray]:
    """The operands of ``case`` with the layout ``name`` under test, and numpy's answer."""
    rng = np.random.default_rng(seed)
    lay = layout_of(name)
    width = lay.index_type          # the kernel's: every operand packed in it
    t = stored(name, shape_of(lay, {1: (9,), 2: (7, 5), 3: (4, 3, 5)}[lay.order]), kind, rng)
    pattern = t != 0
    args = {case.target: pack(name, t, seed, width)}
    if case.expr.startswith("v = a(i)"):
        a = driver(t.shape, rng)
        args["a"] = a if case.layouts[0][1] == "DenseVector" else pack("SV", a, seed, width)
        return args, np.sum(a * t)
    if case.name == "mask" and lay.order == 1:
        a, x = driver((t.shape[0], 6), rng), rng.uniform(-1, 1, 6)
        return {**args, "A": pack("CSR", a, seed, width), "x": x}, (a @ x) * pattern
    if case.name == "mask" and lay.order == 2:
        a, b = driver((t.shape[0], 4), rng), driver((4, t.shape[1]), rng)
        return ({**args, "A": pack("CSR", a, seed, width), "B": pack("CSR", b, seed, width)},
                (a @ b) * pattern)
    if case.name == "mask":
        a, u = driver(t.shape[:2] + (3,), rng), rng.uniform(-1, 1, (3, t.shape[2]))
        return ({**args, "A": pack("CSF", a, seed, width), "U": u},
                np.einsum("ijl,lk->ijk", a, u) * pattern)
    a = driver(t.shape, rng)
    args["A"] = pack(case.layouts[0][1], a, seed, width)
    return args, (a * t).sum(axis=1) if case.parallel else np.sum(a * t)


@functools.cache
def _compiles_clean(source: str, parallel: bool) -> None:
    """-Wall -Werror (with -fopenmp for a parallel kernel), once per distinct source (an
    operand no find searches gives the same C whatever the algorithm)."""
    assert_compiles_clean(source, ("-fopenmp",) if parallel else ())


@functools.cache
def _build(case: Case, name: str, algorithm: str) -> tuple[spf.Kernel, Callable] | str:
    """The kernel with ``name`` under test and ``algorithm`` forced for it, compiled; or the
    SynthesisError's message."""
    inner = [f"{case.target}.{v}" for v in INNER_FIRST.get(name, [])]
    try:
        k = spf.Kernel(case.expr, {**dict(case.layouts), case.target: layout_of(name)},
                       order=[*case.order, *inner], find={case.target: algorithm},
                       mask={case.mask: case.target} if case.mask else None,
                       parallel=case.parallel)
    except SynthesisError as e:
        return str(e)
    _compiles_clean(k.c_source(), case.parallel)
    return k, k.compile()


PAIRS = [(case, name) for name in spf.layout_names() if name not in SPECIAL_DATA
         for case in CASES.get(layout_of(name).order, ())]    # the orders the cases cover


# every kernel with every layout, every layout with every algorithm and every kernel with
# every algorithm (a pairwise covering of their product); the fast lane: each (kernel,
# layout) pair with one algorithm, every algorithm in turn
FAST = {(*pair, a) for pair, a in covering(PAIRS, ALGORITHMS)}


@pytest.mark.parametrize("case,name,algorithm", lanes(
    pairwise([(*pair, a) for pair in PAIRS for a in ALGORITHMS], sorted(FAST, key=str)),
    FAST, lambda c: f"{c[1]}-{c[0].name}-{c[2]}"))
def test_find_over_layout(case: Case, name: str, algorithm: str) -> None:
    built = _build(case, name, algorithm)
    if isinstance(built, str):
        assert algorithm not in ("auto", "loop"), built
        assert re.match(rf"find='{algorithm}' (is not valid for the lookup of {case.target} "
                        rf"|for {case.target} cannot run inside the parallel loop)", built), built
        return
    k, f = built
    searched = [d for d in k.decisions if d.find.use.name == case.target]
    if name in NOT_SEARCHED:
        assert not searched, NOT_SEARCHED[name]
    else:
        assert searched, f"no find searches {case.target} ({name}) in {k.order}"
    if algorithm not in ("auto", "loop"):
        assert all(d.chosen is not None and d.chosen.algorithm == algorithm for d in searched)
    for kind in kinds(name):
        for seed in (0, 1):
            args, want = _inputs(case, name, kind, seed)
            np.testing.assert_allclose(f(**args), want, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{kind} data, seed {seed}")


# -- what the decision says ---------------------------------------------------------------
def test_map_over_ell_rows_is_built_per_row() -> None:
    """An ELL row's keys colIdx(B_pi, q) differ per row: the map is built in each row, below
    the definition of B_pi, and the report and the C say why (issue 36)."""
    k = spf.Kernel("v = A(i,j) * B(i,j)", {"A": "CSR", "B": "ELL"})
    report = k.report()
    assert "chosen: hashmap, state indices {A_pi}" in report, report
    assert "state initialised above loop A_pj" in report, report
    assert "valid because the searched range and its keys are fixed between builds; " \
           "state indices {A_pi}." in k.c_source()
    forced = spf.Kernel("v = A(i,j) * B(i,j)", {"A": "CSR", "B": "ELL"}, find="hashmap",
                        order=["A.pi", "A.pj"])
    assert forced.decisions[0].chosen.state == ["A_pi"]


ROWS3 = """name = "Rows3"
description = "Every row stores exactly W entries, at increasing columns colIdx[W*pi + pk]."
relation = "{[pi, pk] -> [gi, gj] : 0 <= pi < numRows and 0 <= pk < W and gi = pi \
and gj = colIdx(W*pi + pk)}"
value = "data[W*pi + pk]"
shape = ["numRows", "numCols"]

[params]
W = 3

[fields]
numRows = "int"
numCols = "int"
colIdx = "int[W*numRows]"
data = "double[W*numRows]"

[[properties]]
kind = "range"
uf = "colIdx"
min = "0"
max = "numCols - 1"

[[properties]]
kind = "periodic_monotonic"
uf = "colIdx"
period = "pi"
order = "<"
"""


def test_dense_map_refused_when_a_rebuild_reads_other_keys(tmp_path) -> None:
    """Keys colIdx(3*B_pi + q) are unique in a row but differ between rows: a DenseMap rebuilt
    per row would clear the previous row's entries by this row's keys (stale entries, wrong
    sums), so it is refused; HashMap, which empties its table, is valid per row."""
    path = tmp_path / "Rows3.toml"
    path.write_text(ROWS3)
    lay = spf.load_layout(path)
    rng = np.random.default_rng(3)
    n, m = 6, 8
    cols = np.stack([np.sort(rng.choice(m, 3, replace=False)) for _ in range(n)])
    vals = _values(rng, (n, 3))
    B = spf.Tensor(lay, (n, m), {"numRows": n, "numCols": m, "data": vals.ravel(),
                                 "colIdx": cols.ravel().astype(np.int32)})
    dense = np.zeros((n, m))
    np.put_along_axis(dense, cols, vals, axis=1)
    a = driver((n, m), rng)
    expr, layouts = "v = A(i,j) * B(i,j)", {"A": "CSR", "B": lay}
    with pytest.raises(SynthesisError, match=r"find='densemap' is not valid for the lookup of B "
                       r".*: the keys over a previous build's range change by the next build, "
                       r"which clears its entries by them\ncounterexample: "):
        spf.Kernel(expr, layouts, order=["A.pi", "A.pj"], find={"B": "densemap"})
    for algorithm in ("hashmap", "auto"):
        k = spf.Kernel(expr, layouts, order=["A.pi", "A.pj"], find={"B": algorithm})
        assert all(d.chosen.state == ["A_pi"] for d in k.decisions), k.report()
        assert_compiles_clean(k.c_source())
        assert k.compile()(A=pack("CSR", a, 0), B=B) == pytest.approx(np.sum(a * dense),
                                                                       rel=1e-12)


def test_a_lookup_left_a_guard_loop_warns_with_the_reason() -> None:
    """Issue 38: an order-4 COO dot product looks B up by four coordinates, which no template
    can; the kernel says so as a GuardLoopWarning and in its report, with each reason."""
    with pytest.warns(spf.GuardLoopWarning, match=r"the lookup of B at B_p .* stays a guard "
                                                  r"loop, scanning every position of B for "
                                                  r"each iteration of A_p: no find template "
                                                  r"is valid \(.*hashmap: HashMap keys are "
                                                  "single coordinates"):
        k = spf.Kernel("v = A(i,j,k,l) * B(i,j,k,l)", {"A": "COOTensor", "B": "COOTensor"})
    assert "\nwarning: the lookup of B" in k.report()
    rng = np.random.default_rng(0)
    a = rng.random((3, 2, 4, 2)) * (rng.random((3, 2, 4, 2)) < 0.5)
    b = rng.random((3, 2, 4, 2)) * (rng.random((3, 2, 4, 2)) < 0.5)
    got = k.compile()(A=spf.Tensor.from_dense("COOTensor", a),
                      B=spf.Tensor.from_dense("COOTensor", b))
    np.testing.assert_allclose(got, np.sum(a * b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # asked for, or a template found: silent
        spf.Kernel("v = A(i,j,k,l) * B(i,j,k,l)", {"A": "COOTensor", "B": "COOTensor"},
                   find="loop")
        assert "warning:" not in spf.Kernel("v = A(i,j) * B(i,j)",
                                            {"A": "CSR", "B": "CSR"}).report()
