"""Distributed runs on a local Dask cluster of two worker processes, against the local call
and scipy: row blocks (no dependence), nonzero parts with a tree reduction (COO, CSC), sparse
outputs, a conversion, semirings, scalars, operand reuse and bad input."""
from __future__ import annotations

import itertools
import os
import tempfile

import numpy as np
import pytest
import scipy.sparse as sp

import spf

distributed = pytest.importorskip("distributed")

SPMV = "y(i) = A(i,j) * x(j)"
SPGEMM = "C(i,j) = A(i,k) * B(k,j)"


def matrix(m: int, n: int, density: float, seed: int) -> sp.csr_matrix:
    return sp.random(m, n, density, format="csr", random_state=seed)


@pytest.mark.parametrize("layout, mode", [("CSR", "rows"), ("DCSR", "rows"), ("COO", "nonzeros"),
                                          ("CSC", "nonzeros"), ("ELL", "nonzeros")])
@pytest.mark.parametrize("parts", [None, 3])
def test_spmv_matches_the_local_call(client, layout, mode, parts):
    client.wait_for_workers(2, timeout=60)     # a worker another test restarted is back
    A, x = matrix(300, 200, 0.03, 1), np.random.default_rng(2).random(200)
    f = spf.Kernel(SPMV, {"A": layout}).compile()
    d = f.distributed(client, parts=parts)
    assert d.partition.mode == mode and d.partition.operand == "A"
    assert d.parts == (parts or 2)
    T = spf.Tensor.from_scipy(layout, A)
    np.testing.assert_allclose(d(A=T, x=x), f(A=T, x=x), rtol=1e-13)
    futures = d._parts(T)
    np.testing.assert_allclose(d(A=T, x=2 * x), A @ (2 * x), rtol=1e-13)
    assert d._parts(T) is futures            # cut and scattered once per Tensor
    np.testing.assert_allclose(d(A=A, x=x), A @ x, rtol=1e-13)    # scipy as users hold it


@pytest.mark.parametrize("shape, density", [((5, 4), 0.0), ((1, 1), 1.0), ((3, 7), 0.2),
                                            ((40, 1), 0.5)])
@pytest.mark.parametrize("layout", ["CSR", "COO"])
def test_small_and_empty_inputs_with_more_parts_than_rows(client, shape, density, layout):
    A = matrix(*shape, density, seed=shape[0])
    x = np.arange(1.0, shape[1] + 1)
    d = spf.Kernel(SPMV, {"A": layout}).compile().distributed(client, parts=6)
    np.testing.assert_allclose(d(A=A, x=x), A @ x, rtol=1e-13)


@pytest.mark.parametrize("a_layout, mode", [("CSR", "rows"), ("COO", "nonzeros")])
@pytest.mark.parametrize("out", ["CSR", "COO"])
def test_spgemm_sparse_output(client, a_layout, mode, out):
    A, B = matrix(120, 80, 0.05, 3), matrix(80, 90, 0.05, 4)
    f = spf.Kernel(SPGEMM, {"A": a_layout, "B": "CSR", "C": out}).compile()
    d = f.distributed(client)
    assert d.partition.mode == mode
    C = d(A=A, B=B)
    assert isinstance(C, spf.Tensor) and C.layout.name == out
    np.testing.assert_allclose(C.to_dense(), (A @ B).toarray(), rtol=1e-13)
    assert C.values.size == f(A=A, B=B).values.size


@pytest.mark.parametrize("src, dst", [("COO", "CSR"), ("CSR", "DCSR"), ("CSR", "CSC")])
def test_a_conversion(client, src, dst):
    A = matrix(200, 150, 0.04, 5)
    T = spf.Tensor.from_scipy(src, A)
    convert = spf.Conversion(src, dst).compile().distributed(client)
    got = convert(T)
    assert got.layout.name == dst
    np.testing.assert_array_equal(got.to_dense(), A.toarray())
    local = T.convert(dst)               # the same arrays as the local conversion
    assert all(np.array_equal(got.fields[f], local.fields[f]) for f in local.fields)


def test_a_dense_conversion_of_a_tensor_with_a_fill_is_refused(client):
    """The workers' parts hold 0 where no entry is: a fill other than 0 is refused, naming
    the local conversion, which puts it there."""
    T = spf.Tensor.from_scipy("CSR", matrix(20, 15, 0.1, 5)).with_fill(2.0)
    run = spf.Conversion("CSR", "DenseMatrix").compile().distributed(client)
    with pytest.raises(spf.ArgumentError, match=r"whose fill is 2\.0 is not supported"):
        run(T)
    assert T.convert("DenseMatrix").to_dense().max() == 2.0


@pytest.mark.parametrize("dst", ["SELL_sigma", "DIA"])
def test_a_conversion_into_a_written_layout(client, dst):
    """The source's row blocks read into entry lists on the workers, written on the client
    by the generated writer: the same tensor as the local conversion."""
    A = matrix(200, 150, 0.04, 5)
    T = spf.Tensor.from_scipy("CSR", A)
    got = spf.Conversion("CSR", dst, allow_padding=True).compile().distributed(client)(T)
    np.testing.assert_array_equal(got.to_dense(), A.toarray())
    local = T.convert(dst, allow_padding=True)
    assert all(np.array_equal(got.fields[f], local.fields[f]) for f in local.fields)


def test_semiring_reduction_and_scalar_output(client):
    A, x = matrix(100, 60, 0.05, 6), np.random.default_rng(7).random(60)
    d = spf.Kernel(SPMV, {"A": "COO"}, semiring="min_plus").compile().distributed(client, 4)
    assert "min_plus's add" in d.partition.why
    Ad = A.toarray()
    np.testing.assert_array_equal(d(A=A, x=x), np.where(Ad != 0, Ad + x, np.inf).min(axis=1))
    a = sp.random(1, 500, 0.1, format="csr", random_state=8).toarray()[0]
    b = np.random.default_rng(9).random(500)
    s = spf.Kernel("s = a(i) * b(i)", {"a": "SV"}).compile().distributed(client, parts=3)
    assert s.partition.mode == "nonzeros"
    assert s(a=spf.Tensor.from_dense("SV", a), b=b) == pytest.approx(float(a @ b), rel=1e-13)


def test_a_worker_that_cannot_compile_reports_back(client):
    before = client.run(lambda: (os.environ.get("CC"), os.environ.get("SPF_CACHE_DIR")))

    def broken(cache: str) -> None:
        os.environ["CC"] = "/nonexistent/cc"
        os.environ["SPF_CACHE_DIR"] = cache

    client.run(broken, tempfile.mkdtemp())
    try:
        d = spf.Kernel(SPMV, {"A": "CSR"}, name="spf_never_built").compile().distributed(client)
        with pytest.raises(spf.CompileError, match="cannot run the C compiler"):
            d(A=matrix(10, 10, 0.3, 10), x=np.ones(10))
    finally:
        def restore(cc: str | None, cache: str | None) -> None:
            for key, value in (("CC", cc), ("SPF_CACHE_DIR", cache)):
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        client.run(restore, *next(iter(before.values())))    # the workers share one env


def test_bad_input(client):
    f = spf.Kernel(SPMV, {"A": "CSR"}).compile()
    with pytest.raises(spf.ArgumentError, match="parts must be a positive integer"):
        f.distributed(client, parts=0)
    with pytest.raises(spf.ArgumentError, match=r"must be a dask.distributed.Client"):
        f.distributed(object())
    d = f.distributed(client)
    with pytest.raises(spf.ArgumentError, match="missing argument 'A'"):
        d(x=np.ones(3))
    with pytest.raises(spf.ArgumentError, match="do not pass the output"):
        d(A=matrix(3, 3, 0.5, 1), x=np.ones(3), y=np.zeros(3))
    with pytest.raises(spf.ArgumentError, match="shape"):
        d(A=matrix(3, 3, 0.5, 1), x=np.ones(4))
    with pytest.raises(spf.SpecError, match="sum of terms"):
        spf.Kernel("y(i) = A(i,j) * x(j) + B(i,j) * x(j)", {"A": "CSR", "B": "CSR"}) \
            .compile().distributed(client)
    with pytest.raises(spf.SpecError, match="accumulates"):
        spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}).compile().distributed(client)


@pytest.mark.parametrize("layout, mode", [("CSR", "rows"), ("DCSR", "rows"), ("CSC", "nonzeros"),
                                          ("COO", "nonzeros"), ("ELL", "rows"), ("CSF", "rows")])
def test_cut_is_balanced_and_loses_nothing(layout, mode):
    """Parts cut through the storage arrays (or, for ELL, the entries) hold every entry once,
    within one row's length of an equal share; row spans tile the dimension."""
    from spf.distributed import Partition, concatenate_storage, cut
    if layout == "CSF":
        rng = np.random.default_rng(12)
        coords = [rng.integers(0, n, 300) for n in (30, 8, 9)]
        T = spf.Tensor.from_coords("CSF", (30, 8, 9), coords, rng.random(300))
    else:
        T = spf.Tensor.from_scipy(layout, matrix(90, 70, 0.08, 11))
    dense = T.to_dense()
    pieces = cut(T, Partition("A", mode, 0 if mode == "rows" else None, 0, ""), 4)
    np.testing.assert_allclose(sum(p.to_dense() for p, _ in pieces), dense, rtol=1e-15)
    sizes = [np.count_nonzero(p.to_dense()) for p, _ in pieces]
    widest = max(np.count_nonzero(dense.reshape(dense.shape[0], -1), axis=1).max(),
                 np.count_nonzero(dense.reshape(-1, dense.shape[-1]), axis=0).max())
    assert max(sizes) - min(sizes) <= 2 * widest
    if mode == "rows":
        spans = [s for _, s in pieces]
        assert spans[0][0] == 0 and spans[-1][1] == T.shape[0]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        joined = concatenate_storage([p for p, _ in pieces], spans, 0)
        if layout != "ELL":
            assert joined.layout == T.layout
            np.testing.assert_array_equal(joined.to_dense(), dense)


def test_one_tensor_in_several_roles_and_shared_structure(client):
    """A Tensor passed as two operands (parts of one, whole for the other); an output that
    shares the structure of an operand that is not cut (each part holds all of it)."""
    A = matrix(60, 60, 0.08, 13)
    T = spf.Tensor.from_scipy("CSR", A)
    d = spf.Kernel(SPGEMM, {"A": "CSR", "B": "CSR", "C": "CSR"}).compile().distributed(client)
    np.testing.assert_allclose(d(A=T, B=T).to_dense(), (A @ A).toarray(), rtol=1e-13)
    np.testing.assert_allclose(d(A=T, B=T).to_dense(), (A @ A).toarray(), rtol=1e-13)
    for layout in ("CSR", "DCSR", "COO"):
        k = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": layout, "B": layout, "C": layout},
                       share={"C": "B"}).compile()
        got = k.distributed(client, parts=3)(A=A, B=A)
        assert got.values.size == A.nnz
        np.testing.assert_allclose(got.to_dense(), A.multiply(A).toarray(), rtol=1e-13)


def test_dense_operand_and_fill_values(client):
    A = matrix(40, 30, 0.2, 14)
    x = np.random.default_rng(15).integers(1, 5, 30).astype(float)
    dense = spf.Kernel(SPMV, {"A": "DenseMatrix"}).compile().distributed(client, parts=3)
    assert dense.partition.mode == "rows"
    np.testing.assert_allclose(dense(A=A.toarray(), x=x), A @ x, rtol=1e-13)
    plus_plus = spf.Semiring(add="a + b", mul="a + b", zero=0, one=0)
    k = spf.Kernel(SPMV, {"A": "COO"}, semiring=plus_plus, fill_values=True).compile()
    d = k.distributed(client, parts=3)
    assert d.partition.mode == "rows"      # A is read densely: its rows are independent
    T = spf.Tensor.from_scipy("COO", A)
    np.testing.assert_allclose(d(A=T, x=x), k(A=T, x=x), rtol=1e-13)
    with pytest.raises(spf.SpecError, match="fill_values=True reads A densely"):
        spf.Kernel("s = A(i,j) * B(i,j)", {"A": "COO", "B": "COO"}, semiring=plus_plus,
                   fill_values=True).compile().distributed(client)


def test_parts_are_released_with_their_tensor_and_rescattered_when_lost(client):
    import gc
    d = spf.Kernel(SPMV, {"A": "CSR"}).compile().distributed(client)
    x = np.ones(50)
    for seed in range(3):
        d(A=spf.Tensor.from_scipy("CSR", matrix(50, 50, 0.1, seed)), x=x)
    gc.collect()
    assert not d._parts_cache._entries          # gone with their tensors
    T = spf.Tensor.from_scipy("CSR", matrix(50, 50, 0.1, 20))
    d(A=T, x=x)
    for future, _ in d._parts_cache._entries[(id(T), None)][1]:
        future.release()                        # as if a worker holding them died
        future.cancel()
    np.testing.assert_allclose(d(A=T, x=x), T.to_scipy() @ x, rtol=1e-13)


def test_value_types_travel_and_reduce_in_their_type(client):
    """Parts compute in the kernel's types and partial results combine in them: float32 row
    blocks, int64 beyond 2**53 summed over nonzero parts, complex scalars, bool, int32 SpGEMM
    (partial scalars were combined as Python floats: the imaginary part was lost)."""
    A = (sp.random(100, 60, 0.05, format="csr", random_state=6) * 10).astype(np.float32)
    x = (np.arange(60) % 7 + 1).astype(np.float32)
    d = spf.Kernel(SPMV, {"A": "CSR"}, dtype="float32").compile().distributed(client, 3)
    y = d(A=spf.Tensor.from_scipy("CSR", A), x=x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, A @ x, rtol=1e-5)
    big = sp.random(40, 30, 0.2, format="coo", random_state=3)
    big.data = 2 ** 60 + np.arange(big.nnz, dtype=np.int64)
    d = spf.Kernel(SPMV, {"A": "COO"}, dtype="int64").compile().distributed(client, 3)
    assert d.partition.mode == "nonzeros"
    xi = np.ones(30, np.int64)
    np.testing.assert_array_equal(d(A=spf.Tensor.from_scipy("COO", big), x=xi),
                                  big.tocsr().astype(np.int64) @ xi)
    a = np.zeros(50, np.complex64)
    a[::3] = 1 + 2j
    s = spf.Kernel("s = a(i) * b(i)", {"a": "SV"}, dtype="complex64").compile() \
        .distributed(client, parts=3)
    got = s(a=spf.Tensor.from_dense("SV", a), b=np.arange(50, dtype=np.complex64))
    assert got.dtype == np.complex64 and got == a @ np.arange(50, dtype=np.complex64)
    Ab = sp.random(80, 40, 0.05, format="csr", random_state=2).astype(bool)
    xb = np.arange(40) % 3 == 0
    d = spf.Kernel(SPMV, {"A": "COO"}, dtype="bool").compile().distributed(client, 3)
    np.testing.assert_array_equal(d(A=spf.Tensor.from_scipy("COO", Ab), x=xb),
                                  (Ab.astype(int) @ xb.astype(int)) > 0)
    Ai = (sp.random(50, 30, 0.1, format="csr", random_state=4) * 10).astype(np.int32)
    Bi = (sp.random(30, 40, 0.1, format="csr", random_state=5) * 10).astype(np.int32)
    d = spf.Kernel(SPGEMM, {"A": "CSR", "B": "CSR", "C": "CSR"}, dtype="int32").compile() \
        .distributed(client, 3)
    C = d(A=Ai, B=Bi)
    assert C.dtype == np.int32
    np.testing.assert_array_equal(C.to_dense(), (Ai @ Bi).toarray())
