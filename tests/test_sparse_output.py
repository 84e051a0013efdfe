"""Assembled sparse outputs (outputs of unknown sparsity) checked against numpy/scipy.

Every output is decoded here from its arrays, independently of spf's validator: coordinates
sorted strictly in the direction the layout states, no duplicates, pointer arrays starting
at 0 and non-decreasing, and the stored pattern equal to the symbolic pattern of the
computation (scipy products of the inputs' stored patterns).  Values are positive, so no
entry cancels.  Each distinct kernel is compiled once (``kernel`` is cached) and reused
across inputs.  The last section tests ``Tensor.to_scipy``.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import covering, lanes
from hypothesis import given, settings
from hypothesis import strategies as st

import spf
from spf.front.layout_path import LAYOUT_DIR
from spf.front.storage import storage_of

SPMSPM = "C(i,j) = A(i,k) * B(k,j)"
SPMSPV = "y(i) = A(i,j) * x(j)"
ELTWISE = "C(i,j) = A(i,j) * B(i,j)"
ELTWISE3 = "C(i,j,k) = A(i,j,k) * B(i,j,k)"
TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
DENSE = ("DenseMatrix", "DenseVector")


# ---------------------------------------------------------------------------------------
# kernels and inputs

def split(spec: str) -> tuple[str, dict[str, int]]:
    """Layout spec of these tests: "BCSR2" is BCSR with parameter B=2."""
    if spec.startswith("BCSR") and spec[4:].isdigit():
        return "BCSR", {"B": int(spec[4:])}
    return spec, {}


@functools.cache
def kernel(expr: str, layouts: tuple[tuple[str, str], ...], parallel: bool = False):
    """(Kernel, CompiledKernel) for ``expr`` with layout specs per tensor; compiled once."""
    lays, params = {}, {}
    for tensor, spec in layouts:
        lays[tensor], p = split(spec)
        if p:
            params[tensor] = p
    k = spf.Kernel(expr, lays, params=params, parallel=parallel)
    return k, k.compile()


def pack(spec: str, m):
    """Pack a scipy matrix / 1-D or 3-D numpy array in a layout spec (dense ones unpacked)."""
    name, params = split(spec)
    if name in DENSE:
        return m.toarray() if sp.issparse(m) else np.asarray(m, dtype=float)
    if sp.issparse(m):
        return spf.Tensor.from_scipy(name, m, **params)
    return spf.Tensor.from_dense(name, m, **params)


def stored(spec: str, m, packed) -> np.ndarray:
    """Boolean pattern of the entries the packed input stores (what its loops visit)."""
    dense = m.toarray() if sp.issparse(m) else np.asarray(m)
    if split(spec)[0] in DENSE:
        return np.ones(dense.shape, dtype=bool)
    if split(spec)[0] == "BCSR":            # whole B x B blocks, clipped to the shape
        b, f = packed.layout.params["B"], packed.fields
        pat = np.zeros(dense.shape, dtype=bool)
        for pi in range(f["numBlockRows"]):
            for pj in range(f["rowPtr"][pi], f["rowPtr"][pi + 1]):
                c = f["colIdx"][pj]
                pat[b * pi:b * pi + b, c:c + b] = True
        return pat
    return dense != 0


def bool_product(pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
    """Symbolic pattern of a matrix product, with scipy boolean matrices."""
    a, b = sp.csr_matrix(pa, dtype=bool), sp.csr_matrix(pb, dtype=bool)
    return (a.astype(np.int64) @ b.astype(np.int64)).toarray() > 0


def rand(shape, density, seed, empty_rows=(), empty_cols=()) -> sp.csr_matrix:
    """Random matrix with values in [0.5, 1.5) and the given rows/columns emptied."""
    rng = np.random.default_rng(seed)
    m = sp.random(*shape, density=density, format="lil", random_state=seed,
                  data_rvs=lambda n: rng.uniform(0.5, 1.5, n))
    for r in empty_rows:
        m[r, :] = 0
    for c in empty_cols:
        m[:, c] = 0
    m = m.tocsr()
    m.eliminate_zeros()
    return m


def single(shape, r, c, v=1.25) -> sp.csr_matrix:
    return sp.csr_matrix(([v], ([r], [c])), shape=shape)


# (id, A, B) with A @ B defined
MATMUL_CASES = [
    ("random", rand((7, 9), 0.35, 1), rand((9, 6), 0.35, 2)),
    ("empty_rows_cols", rand((8, 8), 0.5, 3, empty_rows=(0, 3, 7), empty_cols=(2, 5)),
     rand((8, 10), 0.4, 4, empty_rows=(1, 6), empty_cols=(0, 9))),
    ("A_nnz0", sp.csr_matrix((5, 4)), rand((4, 6), 0.5, 5)),
    ("B_nnz0", rand((5, 4), 0.5, 6), sp.csr_matrix((4, 6))),
    ("one_nonzero", single((4, 5), 2, 3), single((5, 3), 3, 1)),
    ("one_nonzero_no_product", single((4, 5), 2, 3), single((5, 3), 1, 1)),
    ("outer_product", rand((12, 2), 0.6, 7), rand((2, 15), 0.6, 8)),
    ("row_times_column", rand((1, 9), 0.7, 9), rand((9, 1), 0.7, 10)),
    ("larger", rand((40, 30), 0.12, 11), rand((30, 50), 0.12, 12)),
    ("dense_operands", rand((6, 5), 1.0, 13), rand((5, 7), 1.0, 14)),
    ("no_rows", sp.csr_matrix((0, 4)), rand((4, 3), 0.5, 15)),
    ("inner_extent_0", sp.csr_matrix((3, 0)), sp.csr_matrix((0, 5))),
    # rows of ~30 entries spread over 40000 columns: a workspace group sorts its list
    ("wide_sparse_rows", rand((3, 2), 1.0, 16), rand((2, 40000), 15 / 40000, 17)),
]

# (id, A, B) with equal shapes
ELTWISE_CASES = [
    ("random", rand((7, 9), 0.4, 21), rand((7, 9), 0.4, 22)),
    ("empty_rows_cols", rand((8, 6), 0.6, 23, empty_rows=(1, 4), empty_cols=(0,)),
     rand((8, 6), 0.6, 24, empty_rows=(2,), empty_cols=(5,))),
    ("disjoint", single((5, 5), 1, 1), single((5, 5), 1, 2)),
    ("one_nonzero", single((3, 8), 2, 7), rand((3, 8), 0.9, 25) + single((3, 8), 2, 7)),
    ("A_nnz0", sp.csr_matrix((4, 3)), rand((4, 3), 0.5, 26)),
    ("same_pattern", rand((30, 40), 0.2, 27), None),       # B: A's pattern, other values
    ("no_columns", sp.csr_matrix((3, 0)), sp.csr_matrix((3, 0))),
]


def eltwise_case(a, b):
    if b is None:
        b = a.copy()
        b.data = 2.0 - b.data / 2
    return a, b


# ---------------------------------------------------------------------------------------
# decoding an output, with structural checks independent of spf's validator

def check_pointer(ptr, parents: int, children: int, nonempty: bool) -> np.ndarray:
    """Pointer array: one entry per parent plus one, from 0 to the children, non-decreasing
    (increasing when every parent must have a child)."""
    ptr = np.asarray(ptr)
    assert ptr.dtype == np.int32
    assert len(ptr) == parents + 1, (len(ptr), parents)
    assert ptr[0] == 0 and ptr[-1] == children, ptr
    d = np.diff(ptr)
    assert np.all(d > 0) if nonempty else np.all(d >= 0), ptr
    return np.repeat(np.arange(parents), d)             # parent of each child


def check_sorted(crd, parent=None, descending: bool = False) -> None:
    """Coordinates strictly increasing (decreasing) among children of the same parent."""
    crd = np.asarray(crd, dtype=np.int64)
    if len(crd) < 2:
        return
    d = np.diff(crd)
    same = np.ones(len(d), dtype=bool) if parent is None else parent[1:] == parent[:-1]
    ok = (d < 0) if descending else (d > 0)
    assert np.all(ok[same]), f"not strictly {'de' if descending else 'in'}creasing: {crd}"


def decode(t: spf.Tensor) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Logical coordinates and values of every stored entry of an assembled output."""
    f, name = t.fields, t.layout.name
    if name in ("CSR", "CSC", "CSR_desc", "CSR_unsorted"):
        rows = name != "CSC"
        outer, inner = ("rowPtr", "colIdx") if rows else ("colPtr", "rowIdx")
        parent = check_pointer(f[outer], t.shape[0 if rows else 1], len(f[inner]),
                               nonempty=False)
        if name != "CSR_unsorted":
            check_sorted(f[inner], parent, descending=name == "CSR_desc")
        coords = (parent, f[inner]) if rows else (f[inner], parent)
    elif name in ("DCSR", "DCSC"):
        rows = name == "DCSR"
        outer, ptr, inner, count = (("rowIdx", "rowPtr", "colIdx", "numNZRows") if rows
                                    else ("colIdx", "colPtr", "rowIdx", "numNZCols"))
        assert len(f[outer]) == f[count]
        check_sorted(f[outer])
        parent = check_pointer(f[ptr], f[count], len(f[inner]), nonempty=True)
        check_sorted(f[inner], parent)
        coords = (f[outer][parent], f[inner]) if rows else (f[inner], f[outer][parent])
    elif name in ("COO", "SortedCOO"):
        assert len(f["rowIdx"]) == len(f["colIdx"]) == f["numNNZ"]
        if name == "SortedCOO":
            check_sorted(f["rowIdx"].astype(np.int64) * max(t.shape[1], 1) + f["colIdx"])
        coords = (f["rowIdx"], f["colIdx"])
    elif name in ("SV", "SV_decreasing", "SV_unsorted"):
        assert len(f["idx"]) == f["len"]
        if name != "SV_unsorted":
            check_sorted(f["idx"], descending=name == "SV_decreasing")
        coords = (f["idx"],)
    elif name == "CSF":
        assert len(f["idx0"]) == f["n0"]
        check_sorted(f["idx0"])
        p1 = check_pointer(f["ptr1"], f["n0"], len(f["idx1"]), nonempty=True)
        check_sorted(f["idx1"], p1)
        p2 = check_pointer(f["ptr2"], len(f["idx1"]), len(f["idx2"]), nonempty=True)
        check_sorted(f["idx2"], p2)
        coords = (f["idx0"][p1[p2]], f["idx1"][p2], f["idx2"])
    elif name == "CSF_CCD":
        assert len(f["idx0"]) == f["n0"]
        check_sorted(f["idx0"])
        p1 = check_pointer(f["ptr1"], f["n0"], len(f["idx1"]), nonempty=True)
        check_sorted(f["idx1"], p1)
        w = f["width"]
        fibre = np.repeat(np.arange(len(f["idx1"])), w)
        coords = (f["idx0"][p1[fibre]], f["idx1"][fibre], np.tile(np.arange(w), len(f["idx1"])))
    else:
        raise AssertionError(f"no decoder for {name}")
    coords = tuple(np.asarray(c, dtype=np.int64) for c in coords)
    values = t.values
    assert all(len(c) == len(values) for c in coords), "coordinate and value counts differ"
    for d, (c, n) in enumerate(zip(coords, t.shape)):
        assert np.all((c >= 0) & (c < n)), f"dimension {d} coordinate outside 0..{n - 1}"
    if len(values):
        keys = np.ravel_multi_index(coords, t.shape)
        assert len(np.unique(keys)) == len(keys), "duplicate coordinates"
    return coords, values


def check_output(t: spf.Tensor, layout: str, want: np.ndarray, pattern: np.ndarray) -> None:
    """The assembled output against the dense result and the symbolic pattern."""
    assert isinstance(t, spf.Tensor) and t.layout.name == layout
    assert t.shape == want.shape
    for spec in t.layout.fields.values():
        if spec.is_array:
            assert t.fields[spec.name].dtype == (np.float64 if spec.ctype == "double"
                                                 else np.int32), spec.name
    coords, values = decode(t)
    got = np.zeros(want.shape, dtype=bool)
    got[coords] = True
    extra, missing = np.argwhere(got & ~pattern), np.argwhere(pattern & ~got)
    assert not len(extra) and not len(missing), (
        f"stored pattern differs from the symbolic one: extra {extra[:5].tolist()}, "
        f"missing {missing[:5].tolist()}")
    dense = np.zeros(want.shape)
    dense[coords] = values
    np.testing.assert_allclose(dense, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t.to_dense(), want, rtol=1e-12, atol=1e-12)
    spf.Tensor(t.layout, t.shape, t.fields, check=True)      # spf's own checks agree


# ---------------------------------------------------------------------------------------
# SpMSpM

OUTPUTS = ("CSR", "DCSR", "COO", "SortedCOO", "CSC", "CSR_unsorted")
FULL_PAIRS = [("CSR", "CSR"), ("COO", "CSR"), ("DCSR", "CSC"), ("BCSR2", "DenseMatrix")]
MORE_PAIRS = [("CSC", "COO", "CSR"), ("CSC", "COO", "SortedCOO"),
              ("CSR", "BCSR4", "DCSR"), ("CSR", "BCSR4", "CSC"),
              ("DenseMatrix", "CSR", "CSR"), ("DenseMatrix", "CSR", "COO"),
              ("DCSR", "DCSR", "DCSR"), ("DCSR", "DCSR", "SortedCOO"),
              ("CSC", "CSC", "CSC"), ("COO", "COO", "CSR"), ("BCSR4", "BCSR2", "CSR"),
              ("CSR", "DCSR", "CSR"), ("COO", "COO", "CSR_unsorted"),
              ("CSR_unsorted", "CSR_unsorted", "CSR"), ("CSR", "CSR_unsorted", "DCSR")]
SPMSPM_COMBOS = [(a, b, c) for a, b in FULL_PAIRS for c in OUTPUTS] + MORE_PAIRS
FAST_SPMSPM = {(*p, c) for p, c in covering(FULL_PAIRS, OUTPUTS)} | set(MORE_PAIRS[::3])


def run_spmspm(a_spec, b_spec, c_spec, A, B, parallel=False):
    _, f = kernel(SPMSPM, (("A", a_spec), ("B", b_spec), ("C", c_spec)), parallel)
    At, Bt = pack(a_spec, A), pack(b_spec, B)
    C = f(A=At, B=Bt)
    pattern = bool_product(stored(a_spec, A, At), stored(b_spec, B, Bt))
    check_output(C, c_spec, (A @ B).toarray(), pattern)
    return C


@pytest.mark.parametrize("case", MATMUL_CASES, ids=[c[0] for c in MATMUL_CASES])
@pytest.mark.parametrize("a_spec,b_spec,c_spec", lanes(SPMSPM_COMBOS, FAST_SPMSPM, "-".join))
def test_spmspm(a_spec, b_spec, c_spec, case):
    _, A, B = case
    run_spmspm(a_spec, b_spec, c_spec, A, B)


def test_spmspm_stores_padding_products_of_bcsr_blocks():
    """A BCSR block stores zeros; their products are entries the kernel produces."""
    A = single((5, 6), 0, 0)                  # one 2x2 block at rows 0-1, columns 0-1
    B = single((6, 4), 1, 3)                  # meets only the block's padding column 1
    C = run_spmspm("BCSR2", "CSR", "CSR", A, B)
    assert C.fields["colIdx"].tolist() == [3, 3] and np.all(C.values == 0)


def corrupted(t: spf.Tensor, **fields) -> spf.Tensor:
    return spf.Tensor(t.layout, t.shape, {**t.fields, **fields}, check=False)


def test_the_checks_reject_corrupted_outputs():
    """The structural and pattern checks above fail on outputs that are wrong."""
    _, A, B = MATMUL_CASES[0]
    C = run_spmspm("CSR", "CSR", "CSR", A, B)
    want = (A @ B).toarray()
    pattern = want != 0
    f = C.fields
    row = int(np.argmax(np.diff(f["rowPtr"]) >= 2))           # a row with two entries
    lo = f["rowPtr"][row]
    swapped = f["colIdx"].copy()
    swapped[[lo, lo + 1]] = swapped[[lo + 1, lo]]
    data = f["data"].copy()
    data[[lo, lo + 1]] = data[[lo + 1, lo]]
    missing = int(np.flatnonzero(~pattern[row])[0])           # a column the row cannot get
    at = lo + int(np.searchsorted(f["colIdx"][lo:f["rowPtr"][row + 1]], missing))
    ptr_plus = f["rowPtr"] + (np.arange(len(f["rowPtr"])) > row)
    bad = [(corrupted(C, colIdx=swapped, data=data), "not strictly increasing"),
           (corrupted(C, colIdx=np.insert(f["colIdx"], at, missing),     # a stored zero
                      data=np.insert(f["data"], at, 0.0), rowPtr=ptr_plus), "extra"),
           (corrupted(C, rowPtr=np.r_[0, f["rowPtr"][-1], f["rowPtr"][2:]]), None)]  # decreases
    for t, why in bad:
        with pytest.raises(AssertionError, match=why):
            check_output(t, "CSR", want, pattern)
    coo = run_spmspm("CSR", "CSR", "COO", A, B)
    g = coo.fields
    dup = corrupted(coo, numNNZ=g["numNNZ"] + 1, rowIdx=np.append(g["rowIdx"], g["rowIdx"][0]),
                    colIdx=np.append(g["colIdx"], g["colIdx"][0]), data=np.append(g["data"], 0.0))
    with pytest.raises(AssertionError, match="duplicate coordinates"):
        check_output(dup, "COO", want, pattern)
    _, fv = kernel(SPMSPV, (("A", "CSR"), ("x", "SV"), ("y", "SV_decreasing")))
    _, M, x = SPMSPV_CASES[0]
    y = fv(A=pack("CSR", M), x=pack("SV", x))
    assert len(y.values) > 1
    with pytest.raises(AssertionError, match="not strictly decreasing"):
        decode(corrupted(y, idx=y.fields["idx"][::-1].copy(), val=y.values[::-1].copy()))


@pytest.mark.parametrize("src", [(("A", "CSR"), ("B", "CSR"), ("C", "CSR")),
                                 (("A", "COO"), ("B", "CSR"), ("C", "DCSR")),
                                 (("A", "DCSR"), ("B", "CSC"), ("C", "CSC"))])
def test_spmspm_source_compiles_clean(src, compiles_clean):
    compiles_clean(kernel(SPMSPM, src)[0].c_source())


def test_assembly_plans_with_known_answers():
    csr = kernel(SPMSPM, (("A", "CSR"), ("B", "CSR"), ("C", "CSR")))[0].assembly
    assert (csr.mode, csr.ordered) == ("workspace", 1)
    coo = kernel(SPMSPM, (("A", "COO"), ("B", "CSR"), ("C", "CSR")))[0].assembly
    assert coo.mode == "bucket" and coo.ordered == 0 and not coo.bucket_sorted
    assert kernel(SPMSPM, (("A", "COO"), ("B", "CSR"), ("C", "DCSR")))[0].assembly.mode == "sort"
    elt = kernel(ELTWISE, (("A", "CSR"), ("B", "CSR"), ("C", "CSR")))[0].assembly
    assert elt.ordered == 2 and elt.key == ("i", "j")
    spmv = kernel(SPMSPV, (("A", "CSR"), ("x", "SV"), ("y", "SV")))[0].assembly
    assert (spmv.mode, spmv.ordered) == ("append", 1)      # the whole key arrives in order
    down = kernel(SPMSPV, (("A", "CSR"), ("x", "SV"), ("y", "SV_decreasing")))[0].assembly
    assert (down.mode, down.ordered, down.descending) == ("workspace", 0, (True,))
    # SortedCOO's declared order (rows non-decreasing, columns increasing within a row)
    # gives the same prefixes as CSR; plain COO gives none
    for expr, ordered in [(SPMSPM, 1), (ELTWISE, 2)]:
        plan = spf.Kernel(expr, {"A": "SortedCOO", "B": "CSR", "C": "CSR"}).assembly
        assert (plan.mode, plan.ordered) == ("append" if ordered == 2 else "workspace", ordered)
    assert spf.Kernel(ELTWISE, {"A": "COO", "B": "CSR", "C": "CSR"}).assembly.mode == "bucket"
    assert spf.Kernel(ELTWISE, {"A": "COO", "B": "CSR", "C": "COO"}).assembly.mode == "sort"
    k = kernel(SPMSPM, (("A", "CSR"), ("B", "CSR"), ("C", "CSR")))[0]
    assert "assembly:" in k.report() and "workspace" in k.assembly.describe()
    # the group (row i) is known once per iteration of the row loop: checked there
    assert csr.group_level is not None and csr.group_var in ("A_pi", "i")
    assert not csr.any_order


def test_unordered_outputs_skip_ordering_only_where_the_layout_allows():
    """A layout that orders no coordinate of its last level (CSR_unsorted, SV_unsorted) gets
    each group in the order first touched; ordered layouts keep the ordering pass."""
    assert spf.load_layout("CSR_unsorted") is not None
    free = {name: storage_of(spf.load_layout(name)).free_tail
            for name in ("CSR", "CSR_unsorted", "SV", "SV_unsorted", "COO", "DCSR")}
    assert free == {"CSR": 0, "CSR_unsorted": 1, "SV": 0, "SV_unsorted": 1, "COO": 2,
                    "DCSR": 0}
    plans = {c: kernel(SPMSPM, (("A", "CSR"), ("B", "CSR"), ("C", c)))[0].assembly
             for c in ("CSR", "CSR_unsorted")}
    assert not plans["CSR"].any_order and plans["CSR_unsorted"].any_order
    src = {c: spf.Kernel(SPMSPM, {"A": "CSR", "B": "CSR", "C": c}).c_source()
           for c in plans}
    flush = {c: s[s.index("static int spf_kernel_flush("):].split("\n}")[0]
             for c, s in src.items()}
    assert "spf_ws_order(ws)" in flush["CSR"] and "spf_ws_release" not in flush["CSR"]
    assert "spf_ws_release(ws)" in flush["CSR_unsorted"]
    assert "spf_ws_order" not in flush["CSR_unsorted"]
    # unsorted columns within rows, as first touched by the row of A: row 0 of A A is
    # A[0,2] * row 2 (columns 3, 1) then A[0,0] * row 0 (columns 2, 0)
    A = sp.csr_matrix(np.array([[1., 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4], [5, 0, 0, 0]]))
    At = spf.Tensor.from_scipy("CSR_unsorted", sp.csr_matrix(
        (A.data[[1, 0, 3, 2, 4]], A.indices[[1, 0, 3, 2, 4]], A.indptr), shape=A.shape))
    assert At.fields["colIdx"][:2].tolist() == [2, 0]     # packed as given within rows
    C = kernel(SPMSPM, (("A", "CSR_unsorted"), ("B", "CSR_unsorted"), ("C", "CSR_unsorted")))[1](
        A=At, B=At)
    assert C.fields["colIdx"][:C.fields["rowPtr"][1]].tolist() == [3, 1, 2, 0]
    check_output(C, "CSR_unsorted", (A @ A).toarray(), (A @ A).toarray() != 0)
    np.testing.assert_allclose(C.to_scipy().toarray(), (A @ A).toarray())


def test_assembled_output_argument_errors():
    _, f = kernel(SPMSPM, (("A", "CSR"), ("B", "CSR"), ("C", "CSR")))
    _, A, B = MATMUL_CASES[0]
    At, Bt = pack("CSR", A), pack("CSR", B)
    C = f(A=At, B=Bt)
    with pytest.raises(spf.ArgumentError, match="do not pass the output 'C'"):
        f(A=At, B=Bt, C=C)
    with pytest.raises(spf.ArgumentError, match="assembled by the kernel"):
        f.allocate_output(A=At, B=Bt)


@pytest.mark.parametrize("c_spec", ["BCSR", "ELL", "DIA"])
def test_outputs_not_assembled_in_order_are_written(c_spec):
    """An output whose levels cannot be appended to in order is assembled as an entry list
    and written as its relation says (spf.front.writing)."""
    k = spf.Kernel(SPMSPM, {"A": "CSR", "B": "CSR", "C": c_spec})
    assert k.written.name == c_spec and k.layouts["C"].name == "COO"
    a = sp.random(9, 7, density=0.3, format="csr", random_state=1)
    b = sp.random(7, 11, density=0.3, format="csr", random_state=2)
    c = k.compile()(A=spf.Tensor.from_scipy("CSR", a), B=spf.Tensor.from_scipy("CSR", b))
    assert c.layout.name == c_spec
    np.testing.assert_allclose(c.to_dense(), (a @ b).toarray())


@pytest.mark.parametrize("a_spec, c_spec", [("CSR", "CSR"), ("CSR", "CSR_unsorted"),
                                             ("DCSR", "CSR"), ("CSR", "COO"), ("COO", "CSR"),
                                             ("SortedCOO", "CSR")])
def test_parallel_kernel_with_assembled_output(a_spec, c_spec):
    """Rows of a CSR-shaped output that the outermost loop's iterations own are built in
    parallel (count, prefix sum, fill); any other output by one thread, saying why."""
    k, _ = kernel(SPMSPM, (("A", a_spec), ("B", "CSR"), ("C", c_spec)), True)
    rows = c_spec.startswith("CSR") and "COO" not in a_spec
    assert (k.parallel_loop is not None) == rows
    assert ("omp parallel" in k.c_source()) == rows
    reason = k.analysis().parallel_reason
    if rows:
        assert "never write the same i, so each thread builds the rows of C" in reason
        assert "Rows mode, first pass" in k.c_source()
    else:
        assert "not parallelized: the output C is assembled by one thread (" in reason
        assert ("is not a dense level over a compressed one" in reason) == (c_spec == "COO")
        assert ("do not produce i in order" in reason) == (a_spec == "COO")
        assert ("Z3 did not prove that two iterations" in reason) == (a_spec == "SortedCOO")
    for _, A, B in MATMUL_CASES:
        run_spmspm(a_spec, "CSR", c_spec, A, B, parallel=True)


@pytest.mark.fuzz
@settings(max_examples=60, deadline=None)
@given(m=st.integers(0, 9), n=st.integers(0, 9), p=st.integers(0, 9),
       da=st.floats(0, 1), db=st.floats(0, 1), seed=st.integers(0, 2 ** 16),
       a_spec=st.sampled_from(["CSR", "COO", "DCSR", "CSC"]))
def test_spmspm_csr_property(m, n, p, da, db, seed, a_spec):
    """CSR output of any small product equals scipy's, arrays and all."""
    A, B = rand((m, n), da, seed), rand((n, p), db, seed + 1)
    C = run_spmspm(a_spec, "CSR", "CSR", A, B)
    ref = (A @ B).tocsr()
    ref.sort_indices()
    assert C.fields["rowPtr"].tolist() == ref.indptr.tolist()   # no cancellation: same nnz
    assert C.fields["colIdx"].tolist() == ref.indices.tolist()


# ---------------------------------------------------------------------------------------
# SpMSpV

VEC_OUTPUTS = ("SV", "SV_decreasing", "SV_unsorted")
SPMSPV_COMBOS = [(a, "SV", y) for a in ("CSR", "CSC", "COO", "DCSR") for y in VEC_OUTPUTS] + \
    [(a, "DenseVector", y) for a, y in zip(("CSR", "CSC", "COO", "DCSR"),
                                           VEC_OUTPUTS + ("SV_decreasing",))]


def vec(n, density, seed, empty=()) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(n) < density, rng.uniform(0.5, 1.5, n), 0.0)
    x[list(empty)] = 0.0
    return x


SPMSPV_CASES = [
    ("random", rand((9, 11), 0.3, 31), vec(11, 0.5, 32)),
    ("empty_rows_cols", rand((10, 8), 0.5, 33, empty_rows=(0, 5, 9), empty_cols=(3,)),
     vec(8, 0.8, 34, empty=(1,))),
    ("x_nnz0", rand((6, 4), 0.5, 35), np.zeros(4)),
    ("A_nnz0", sp.csr_matrix((6, 4)), vec(4, 1.0, 36)),
    ("one_nonzero", single((7, 3), 6, 2), vec(3, 1.0, 37)),
    ("no_product", single((7, 3), 6, 2), np.array([1.0, 1.0, 0.0])),
    ("wide", rand((3, 60), 0.3, 38), vec(60, 0.3, 39)),
    ("tall", rand((80, 5), 0.2, 40), vec(5, 0.6, 41)),
    ("single_column", rand((12, 1), 0.5, 42), np.array([2.0])),
]


@pytest.mark.parametrize("a_spec,x_spec,y_spec,case", lanes(
    [(*combo, case) for combo in SPMSPV_COMBOS for case in SPMSPV_CASES],
    lambda c: (c[:3], c[3][0]) in covering(SPMSPV_COMBOS, [name for name, *_ in SPMSPV_CASES]),
    lambda c: "-".join([*c[:3], c[3][0]])))
def test_spmspv(a_spec, x_spec, y_spec, case):
    _, A, x = case
    _, f = kernel(SPMSPV, (("A", a_spec), ("x", x_spec), ("y", y_spec)))
    At, xt = pack(a_spec, A), pack(x_spec, x)
    y = f(A=At, x=xt)
    pattern = bool_product(stored(a_spec, A, At), stored(x_spec, x, xt)[:, None])[:, 0]
    check_output(y, y_spec, A @ x, pattern)


@pytest.mark.parametrize("y_spec", VEC_OUTPUTS)
def test_spmspv_source_compiles_clean(y_spec, compiles_clean):
    compiles_clean(kernel(SPMSPV, (("A", "CSC"), ("x", "SV"), ("y", y_spec)))[0].c_source())


# ---------------------------------------------------------------------------------------
# element-wise products

ELT = ("CSR", "COO", "DCSR")
ELTWISE_COMBOS = [(a, b, c) for a, b in [("CSR", "CSR"), ("COO", "CSR"), ("DCSR", "COO")]
                  for c in ELT] + [("COO", "COO", "DCSR"), ("DCSR", "DCSR", "COO"),
                                   ("CSR", "DCSR", "CSR"), ("COO", "COO", "CSR_unsorted"),
              ("CSR_unsorted", "CSR_unsorted", "CSR"), ("CSR", "CSR_unsorted", "DCSR")]


@pytest.mark.parametrize("case", ELTWISE_CASES, ids=[c[0] for c in ELTWISE_CASES])
@pytest.mark.parametrize("a_spec,b_spec,c_spec", ELTWISE_COMBOS,
                         ids=["-".join(c) for c in ELTWISE_COMBOS])
def test_eltwise(a_spec, b_spec, c_spec, case):
    A, B = eltwise_case(case[1], case[2])
    _, f = kernel(ELTWISE, (("A", a_spec), ("B", b_spec), ("C", c_spec)))
    At, Bt = pack(a_spec, A), pack(b_spec, B)
    C = f(A=At, B=Bt)
    pattern = stored(a_spec, A, At) & stored(b_spec, B, Bt)
    check_output(C, c_spec, A.multiply(B).toarray(), pattern)


# ---------------------------------------------------------------------------------------
# order 3: element-wise CSF and TTM into CSF_CCD

def tensor3(shape, density, seed, empty_fibres=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.where(rng.random(shape) < density, rng.uniform(0.5, 1.5, shape), 0.0)
    if empty_fibres and shape[0]:
        t[::empty_fibres] = 0.0                 # empty slices i
        t[:, ::empty_fibres] = 0.0              # and (i, j) fibres
    return t


TENSOR3_CASES = [
    ("random", (5, 6, 7), 0.25, 51, 0),
    ("empty_slices", (8, 5, 4), 0.5, 52, 3),
    ("nnz0", (3, 4, 5), 0.0, 53, 0),
    ("one_nonzero", (1, 1, 1), 1.0, 54, 0),
    ("flat", (20, 2, 30), 0.1, 55, 0),
]


@pytest.mark.parametrize("shape,density,seed,empty", [c[1:] for c in TENSOR3_CASES],
                         ids=[c[0] for c in TENSOR3_CASES])
def test_eltwise_csf(shape, density, seed, empty):
    A = tensor3(shape, density, seed, empty)
    B = tensor3(shape, max(density, 0.6), seed + 100)
    _, f = kernel(ELTWISE3, (("A", "CSF"), ("B", "CSF"), ("C", "CSF")))
    C = f(A=pack("CSF", A), B=pack("CSF", B))
    check_output(C, "CSF", A * B, (A != 0) & (B != 0))


@pytest.mark.parametrize("b_spec", ["DenseMatrix", "CSR"])
@pytest.mark.parametrize("shape,density,seed,empty", [c[1:] for c in TENSOR3_CASES],
                         ids=[c[0] for c in TENSOR3_CASES])
def test_ttm_into_csf_ccd(shape, density, seed, empty, b_spec):
    """The (i, j) fibres with a product are stored, each with its whole dense level l."""
    A = tensor3(shape, density, seed, empty)
    B = rand((shape[2], 6), 0.4, seed, empty_rows=range(0, shape[2], 2))
    _, f = kernel(TTM, (("A", "CSF"), ("B", b_spec), ("C", "CSF_CCD")))
    At, Bt = pack("CSF", A), pack(b_spec, B)
    C = f(A=At, B=Bt)
    rows = stored(b_spec, B, Bt).any(axis=1)            # k with some stored B(k, l)
    fibres = ((A != 0) & rows[None, None, :]).any(axis=2)
    pattern = np.repeat(fibres[:, :, None], B.shape[1], axis=2)
    check_output(C, "CSF_CCD", np.einsum("ijk,kl->ijl", A, B.toarray()), pattern)


@pytest.mark.parametrize("shape,density,seed,empty", [c[1:] for c in TENSOR3_CASES],
                         ids=[c[0] for c in TENSOR3_CASES])
def test_ttm_into_csf(shape, density, seed, empty):
    """Fully compressed output: only the (i, j, l) with a product are stored."""
    A = tensor3(shape, density, seed, empty)
    B = rand((shape[2], 9), 0.3, seed + 7)
    _, f = kernel(TTM, (("A", "CSF"), ("B", "CSR"), ("C", "CSF")))
    C = f(A=pack("CSF", A), B=pack("CSR", B))
    pattern = np.einsum("ijk,kl->ijl", (A != 0).astype(int), (B.toarray() != 0).astype(int)) > 0
    check_output(C, "CSF", np.einsum("ijk,kl->ijl", A, B.toarray()), pattern)


def test_order3_sources_compile_clean(compiles_clean):
    compiles_clean(kernel(ELTWISE3, (("A", "CSF"), ("B", "CSF"), ("C", "CSF")))[0].c_source())
    compiles_clean(kernel(TTM, (("A", "CSF"), ("B", "CSR"), ("C", "CSF_CCD")))[0].c_source())


# ---------------------------------------------------------------------------------------
# layouts defined here: storage order descending in a column, and column-major doubly
# compressed (assembly follows the relation, not a format name)

DCSC_TOML = """
name = "DCSC"
description = "Doubly compressed sparse column: only nonempty columns are stored."
relation = "{[pj, pi] -> [gi, gj] : 0 <= pj < numNZCols \
and colPtr(pj) <= pi < colPtr(pj + 1) and gi = rowIdx(pi) and gj = colIdx(pj)}"
value = "data[pi]"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
numNZCols = "int"
colIdx = "int[numNZCols]"
colPtr = "int[numNZCols + 1]"
rowIdx = "int[colPtr(numNZCols)]"
data = "double[colPtr(numNZCols)]"

[[properties]]
kind = "monotonic"
uf = "colIdx"
order = "<"

[[properties]]
kind = "monotonic"
uf = "colPtr"
order = "<="

[[properties]]
kind = "periodic_monotonic"
uf = "rowIdx"
period = "pj"
order = "<"
"""


@pytest.fixture(scope="module")
def own_layouts(tmp_path_factory) -> dict[str, str]:
    """Paths of CSR_desc (CSR with columns strictly decreasing per row) and DCSC."""
    root = tmp_path_factory.mktemp("layouts")
    csr = (LAYOUT_DIR / "CSR.toml").read_text()
    head, _, tail = csr.rpartition('order = "<"')
    desc = (head + 'order = ">"' + tail).replace('name = "CSR"', 'name = "CSR_desc"')
    paths = {}
    for name, text in [("CSR_desc", desc.replace('packer = "CSR.py"\n', "")),
                       ("DCSC", DCSC_TOML)]:
        paths[name] = str(root / f"{name}.toml")
        Path(paths[name]).write_text(text)
    return paths


@pytest.mark.parametrize("a_spec,b_spec", [("CSR", "CSR"), ("COO", "CSR"), ("CSC", "DCSR")])
@pytest.mark.parametrize("c_name", ["CSR_desc", "DCSC"])
def test_spmspm_into_layouts_defined_here(own_layouts, a_spec, b_spec, c_name):
    k, f = kernel(SPMSPM, (("A", a_spec), ("B", b_spec), ("C", own_layouts[c_name])))
    assert k.assembly.descending == ((False, True) if c_name == "CSR_desc" else (False, False))
    for _, A, B in MATMUL_CASES:
        At, Bt = pack(a_spec, A), pack(b_spec, B)
        pattern = bool_product(stored(a_spec, A, At), stored(b_spec, B, Bt))
        check_output(f(A=At, B=Bt), c_name, (A @ B).toarray(), pattern)


# ---------------------------------------------------------------------------------------
# Tensor.to_scipy

SCIPY_FORMAT = {"CSR": "csr", "CSC": "csc", "COO": "coo", "SortedCOO": "coo"}
TO_SCIPY_CASES = [("random", rand((7, 9), 0.3, 61)), ("empty_rows_cols",
                                                      rand((6, 6), 0.6, 62, (0, 5), (2,))),
                  ("nnz0", sp.csr_matrix((4, 3))), ("no_rows", sp.csr_matrix((0, 3))),
                  ("one_nonzero", single((3, 5), 2, 4))]


@pytest.mark.parametrize("case", TO_SCIPY_CASES, ids=[c[0] for c in TO_SCIPY_CASES])
@pytest.mark.parametrize("spec", ["CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR2", "BCSR4"])
def test_to_scipy(spec, case):
    m = case[1]
    name, params = split(spec)
    t = spf.Tensor.from_scipy(name, m, **params)
    s = t.to_scipy()
    assert sp.issparse(s) and s.shape == m.shape
    np.testing.assert_array_equal(s.toarray(), m.toarray())
    if spec in SCIPY_FORMAT:
        assert s.format == SCIPY_FORMAT[spec]
        assert s.nnz == len(t.values)                  # built from the stored entries
        assert not np.shares_memory(s.data, t.values)  # a copy: the tensor stays valid


def test_to_scipy_keeps_stored_zeros_and_reads_the_arrays():
    t = spf.Tensor.from_arrays("CSR", (2, 3), {"numRows": 2, "numCols": 3,
                                               "rowPtr": [0, 2, 3], "colIdx": [0, 2, 1],
                                               "data": [1.0, 0.0, 3.0]})
    s = t.to_scipy()
    assert s.format == "csr" and s.nnz == 3
    assert s.indptr.tolist() == [0, 2, 3] and s.indices.tolist() == [0, 2, 1]
    np.testing.assert_array_equal(s.toarray(), [[1, 0, 0], [0, 3, 0]])


def test_to_scipy_of_assembled_outputs():
    _, A, B = MATMUL_CASES[0]
    for c_spec, fmt in [("CSR", "csr"), ("CSC", "csc"), ("COO", "coo"), ("DCSR", "coo")]:
        C = run_spmspm("CSR", "CSR", c_spec, A, B)
        s = C.to_scipy()
        assert s.format == fmt
        np.testing.assert_allclose(s.toarray(), (A @ B).toarray(), rtol=1e-12)


def test_to_scipy_of_layouts_defined_here(own_layouts):
    _, A, B = MATMUL_CASES[1]
    want = (A @ B).toarray()
    for c_name, fmt in [("CSR_desc", "csr"), ("DCSC", "coo")]:
        _, f = kernel(SPMSPM, (("A", "CSR"), ("B", "CSR"), ("C", own_layouts[c_name])))
        C = f(A=pack("CSR", A), B=pack("CSR", B))
        s = C.to_scipy()
        assert s.format == fmt
        np.testing.assert_allclose(s.toarray(), want, rtol=1e-12)


def test_to_scipy_follows_the_storage_levels_not_the_name(tmp_path: Path):
    """A CSR-shaped layout under another name and other field names still gives CSR."""
    text = (LAYOUT_DIR / "CSR.toml").read_text()
    for old, new in [('name = "CSR"', 'name = "RowLists"'), ("rowPtr", "starts"),
                     ("colIdx", "cols"), ("data", "vals"), ('packer = "CSR.py"\n', "")]:
        text = text.replace(old, new)
    path = tmp_path / "RowLists.toml"
    path.write_text(text)
    t = spf.Tensor.from_arrays(str(path), (3, 4), {"numRows": 3, "numCols": 4,
                                                   "starts": [0, 1, 1, 3], "cols": [2, 0, 3],
                                                   "vals": [1.0, 2.0, 3.0]})
    s = t.to_scipy()
    assert s.format == "csr"
    np.testing.assert_array_equal(s.toarray(), [[0, 0, 1, 0], [0, 0, 0, 0], [2, 0, 0, 3]])


def test_to_scipy_dense_layout_and_errors():
    m = np.arange(6.0).reshape(2, 3)
    s = spf.Tensor.from_dense("DenseMatrix", m).to_scipy()
    np.testing.assert_array_equal(s.toarray(), m)
    with pytest.raises(spf.ArgumentError, match="order-2"):
        spf.Tensor.from_dense("CSF", tensor3((2, 2, 2), 0.5, 1)).to_scipy()
    with pytest.raises(spf.ArgumentError, match="order-2"):
        spf.Tensor.from_dense("SV", np.array([0.0, 1.0])).to_scipy()
