"""Operands as users hold them: scipy.sparse and pydata sparse objects passed straight to
compiled kernels, checked, wrapped without a copy where the layout's storage matches; every
result compared with numpy."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.runtime.operands import as_tensor

sparse = pytest.importorskip("sparse")

SPMV = "y(i) = A(i,j) * x(j)"


@pytest.fixture(scope="module")
def spmv():
    layouts = ["CSR", "CSR_unsorted", "CSC", "COO", "SortedCOO", "DCSR", "ELL", "DIA", "BCSR"]
    return {lay: spf.Kernel(SPMV, {"A": lay}).compile() for lay in layouts}


def matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(3)
    one = sp.csr_matrix(([2.5], ([3], [1])), shape=(5, 4))
    empty_rows = sp.random(9, 7, density=0.3, format="lil", random_state=4)
    empty_rows[[0, 4, 8], :] = 0
    empty_rows = empty_rows.tocsr()
    return {"random": sp.random(30, 20, density=0.2, format="csr", random_state=1),
            "empty": sp.csr_matrix((6, 3)),
            "one": one,
            "empty_rows": empty_rows,
            "thin": sp.random(1, 50, density=0.5, format="csr", random_state=2),
            "tall": sp.csr_matrix(rng.random((40, 1)) * (rng.random((40, 1)) < 0.5))}


def unsorted_rows(m: sp.csr_matrix) -> sp.csr_matrix:
    """The same matrix with the entries of every row reversed (not canonical)."""
    out = m.copy()
    for i in range(m.shape[0]):
        s, e = m.indptr[i], m.indptr[i + 1]
        out.indices[s:e] = m.indices[s:e][::-1]
        out.data[s:e] = m.data[s:e][::-1]
    out.has_sorted_indices = False
    return out


@pytest.mark.parametrize("name", list(matrices()))
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dia", "bsr", "lil", "dok"])
@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "SortedCOO", "DCSR"])
def test_scipy_operand_spmv(spmv, name, fmt, layout):
    m = matrices()[name]
    x = np.arange(1.0, m.shape[1] + 1)
    for kind in (sp.csr_matrix, sp.csr_array):
        a = kind(m).asformat(fmt)
        np.testing.assert_allclose(spmv[layout](A=a, x=x), m.toarray() @ x, atol=1e-12)


@pytest.mark.parametrize("layout", ["ELL", "DIA", "BCSR"])
def test_scipy_operand_into_placed_layouts(spmv, layout):
    m = matrices()["random"]
    x = np.linspace(-1, 1, m.shape[1])
    for fmt in ("csr", "coo", "csc"):
        np.testing.assert_allclose(spmv[layout](A=m.asformat(fmt), x=x), m @ x, atol=1e-12)


def test_zero_copy_where_dtypes_match():
    m = matrices()["random"]
    t = as_tensor("A", m, spf.load_layout("CSR"))
    assert np.shares_memory(t["colIdx"], m.indices) and np.shares_memory(t["data"], m.data)
    assert np.shares_memory(t["rowPtr"], m.indptr)
    coo = m.tocoo()
    t = as_tensor("A", coo, spf.load_layout("COO"))
    assert np.shares_memory(t["rowIdx"], coo.row) and np.shares_memory(t["data"], coo.data)
    csc = m.tocsc()
    t = as_tensor("A", csc, spf.load_layout("CSC"))
    assert np.shares_memory(t["rowIdx"], csc.indices)
    wide = m.copy()
    wide.indices, wide.indptr = m.indices.astype(np.int64), m.indptr.astype(np.int64)
    t = as_tensor("A", wide, spf.load_layout("CSR"))           # int64 -> int32: a copy
    assert t["colIdx"].dtype == np.int32 and not np.shares_memory(t["colIdx"], wide.indices)
    t = as_tensor("A", wide, spf.load_layout("CSR", "int64"))  # int64 layout: no copy
    assert np.shares_memory(t["colIdx"], wide.indices)
    assert not t["colIdx"].flags.writeable and wide.indices.flags.writeable


def test_canonical_flag_proves_storage_order(monkeypatch):
    from spf.runtime import fields
    skipped = []
    real = fields._check_properties
    monkeypatch.setattr(fields, "_check_properties",
                        lambda lay, s, a, proven: skipped.append(
                            sorted(p.kind for p in proven)) or real(lay, s, a, proven))
    m = matrices()["random"]
    assert m.has_canonical_format
    as_tensor("A", m.tocoo(), spf.load_layout("SortedCOO"))   # sorted, unique: proven
    assert skipped[-1] == ["covary_monotonic", "injective", "monotonic"]
    as_tensor("A", m, spf.load_layout("CSR"))
    assert skipped[-1] == ["periodic_monotonic"]    # (still checked by the generated pass)
    m2 = m.tocoo()
    m2.has_canonical_format = False                 # not proven: every property is checked
    as_tensor("A", m2, spf.load_layout("SortedCOO"))
    assert skipped[-1] == []


def _calls(kernel, **args):
    """The kernel's result and the ConvertedOperandWarnings of the call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = kernel(**args)
    return out, [w for w in caught if issubclass(w.category, spf.ConvertedOperandWarning)]


@pytest.mark.parametrize("name", list(matrices()))
def test_unsorted_scipy_is_converted_into_a_sorted_layout(spmv, name):
    """A scipy operand whose rows are unsorted, for a layout that sorts them, is converted
    by the generated conversion (a warning says so), and its arrays are left as they were;
    the layout that allows unsorted rows takes them as they are (issue 53)."""
    m = matrices()[name]
    u = unsorted_rows(m)
    x = np.arange(1.0, m.shape[1] + 1)
    before = [a.copy() for a in (u.indptr, u.indices, u.data)]
    y, told = _calls(spmv["CSC"], A=unsorted_rows(m.T.tocsr()).T, x=x)   # columns unsorted
    np.testing.assert_allclose(y, m @ x, atol=1e-12)
    assert len(told) == (np.diff(m.tocsc().indptr) > 1).any()
    y, told = _calls(spmv["CSR"], A=u, x=x)
    np.testing.assert_allclose(y, m @ x, atol=1e-12)
    assert len(told) == (np.diff(m.indptr) > 1).any()        # a row of two entries or more
    if told:
        assert re.match(r"'A': the scipy.sparse csr_matrix \(csr\) does not satisfy layout "
                        r"CSR \(CSR tensor: 'colIdx' violates periodic_monotonic .*\); converted "
                        r"into CSR by generated code, a copy on every call", str(told[0].message))
    y, told = _calls(spmv["CSR_unsorted"], A=u, x=x)
    np.testing.assert_allclose(y, m @ x, atol=1e-12)
    assert not told
    for a, b in zip((u.indptr, u.indices, u.data), before):
        np.testing.assert_array_equal(a, b)
        assert a.flags.writeable


def test_duplicates_are_converted_and_summed(spmv):
    """A coordinate stored twice (scipy adds duplicates up): wrapped as it is where the
    layout allows it, converted (the duplicates added) where it does not."""
    coo = sp.coo_matrix(([1.0, 2.0, 4.0], ([0, 0, 2], [1, 1, 0])), shape=(3, 2))
    x = np.array([1.0, 10.0])
    # CSR_unsorted stores duplicates as they are; SpMV adds them up as scipy does
    y, told = _calls(spmv["CSR_unsorted"], A=coo.tocsr(copy=False), x=x)
    np.testing.assert_allclose(y, coo @ x)
    assert not told
    for layout in ("COO", "SortedCOO"):
        y, told = _calls(spmv[layout], A=coo, x=x)
        np.testing.assert_allclose(y, coo @ x)
        assert len(told) == 1 and re.search(r"violates (injective|covary_monotonic) .* "
                                            r"converted into", str(told[0].message)), layout


def test_unsorted_pydata_is_converted():
    a = sparse.random((6, 5), density=0.4, random_state=1)
    x = np.arange(1.0, 6.0)
    want = a.todense() @ x
    a.coords = np.ascontiguousarray(a.coords[:, ::-1])      # the entries in reverse order
    a.data = np.ascontiguousarray(a.data[::-1])
    kernel = spf.Kernel(SPMV, {"A": "SortedCOO"}).compile()
    y, told = _calls(kernel, A=a, x=x)
    np.testing.assert_allclose(y, want, atol=1e-12)
    assert len(told) == 1 and "the pydata sparse COO does not satisfy layout SortedCOO (" \
        "SortedCOO tensor: 'rowIdx' violates monotonic" in str(told[0].message)


def test_a_tensor_is_never_converted(spmv):
    """An spf Tensor is its own layout's: one in another layout is refused, not converted;
    a scipy operand whose arrays a conversion cannot take either is refused with what its
    own arrays break."""
    u = unsorted_rows(matrices()["random"])
    x = np.ones(u.shape[1])
    t = spf.Tensor.from_scipy("CSR_unsorted", u)
    with pytest.raises(spf.ArgumentError, match="the kernel was generated for layout CSR but "
                                                "got a tensor in layout CSR_unsorted"):
        spmv["CSR"](A=t, x=x)
    bad = u.copy()
    bad.indices[0] = 99                                    # outside the 20 columns
    with pytest.raises(spf.ArgumentError, match=r"'A': CSR tensor: 'colIdx' violates .* not in "
                                                r"scipy's canonical format: .sum_duplicates\(\)"):
        spmv["CSR"](A=bad, x=x)


def test_bad_scipy_operands(spmv):
    m = matrices()["random"]
    x = np.ones(m.shape[1])
    with pytest.raises(spf.ArgumentError, match=r"'A': a scipy.sparse csr_matrix \(csr\) of "
                                                "dtype complex128 cannot be used: the kernel "
                                                r"computes it as float64 \(layout CSR\)"):
        spmv["CSR"](A=m.astype(complex), x=x)
    np.testing.assert_allclose(spmv["CSR"](A=(m * 10).astype(np.int64), x=x),
                               (m * 10).astype(np.int64) @ x)
    huge = sp.csr_matrix((np.ones(1), np.array([3_000_000_000]), np.array([0, 1])),
                         shape=(1, 3_000_000_001))
    with pytest.raises(spf.ArgumentError, match=r"'A': CSR tensor: numCols = 3000000001 is "
                                                r"outside 0..2147483647 \(index_type='int32'\); "
                                                r"use index_type='int64'"):
        spmv["CSR"](A=huge, x=np.ones(4))
    sv = spf.Kernel("s = a(i) * b(i)", {"a": "SV"}).compile()
    with pytest.raises(spf.ArgumentError, match=r"'a': a scipy.sparse csr_matrix \(csr\) of "
                                                r"shape \(30, 20\) has order 2, but layout SV "
                                                "stores order-1 tensors"):
        sv(a=m, b=np.ones(20))
    mma = spf.Kernel(SPMV, {"A": "CUDAmma16x16"}).compile()
    with pytest.raises(spf.ArgumentError, match=r"'A': layout CUDAmma16x16 cannot take a "
                                                r"scipy.sparse csr_matrix \(csr\)"):
        mma(A=m, x=x)


def test_scipy_operand_in_assembled_and_sum_kernels():
    a = matrices()["random"]
    b = sp.random(20, 15, density=0.3, format="csc", random_state=7)
    spgemm = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"}).compile()
    c = spgemm(A=a, B=b)
    np.testing.assert_allclose(c.to_dense(), (a @ b).toarray(), atol=1e-12)
    add = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "COO", "C": "CSR"}).compile()
    b2 = sp.random(30, 20, density=0.1, format="coo", random_state=8)
    np.testing.assert_allclose(add(A=a, B=b2).to_dense(), (a + b2).toarray(), atol=1e-12)


def test_pydata_order3_operands():
    t = sparse.random((6, 5, 7), density=0.25, random_state=0)
    m = np.random.default_rng(0).random((7, 3))
    want = np.einsum("ijk,kr->ijr", t.todense(), m)
    for layout in ("COO3", "CSF"):
        ttm = spf.Kernel("Y(i,j,r) = T(i,j,k) * M(k,r)", {"T": layout}).compile()
        for value in (t, sparse.GCXS(t), sparse.GCXS(t, compressed_axes=(2,))):
            np.testing.assert_allclose(ttm(T=value, M=m), want, atol=1e-12)
    coo3 = as_tensor("T", t, spf.load_layout("COO3", "int64"))
    assert np.shares_memory(coo3["idx1"], t.coords) and np.shares_memory(coo3["data"], t.data)
    empty = sparse.COO(np.zeros((3, 0), dtype=np.int64), np.zeros(0), shape=(2, 3, 7))
    ttm = spf.Kernel("Y(i,j,r) = T(i,j,k) * M(k,r)", {"T": "COO3"}).compile()
    np.testing.assert_array_equal(ttm(T=empty, M=m), np.zeros((2, 3, 3)))


def test_bad_pydata_operands():
    ttm = spf.Kernel("Y(i,j,r) = T(i,j,k) * M(k,r)", {"T": "COO3"}).compile()
    t = sparse.random((4, 4, 4), density=0.3, random_state=1, fill_value=1.0)
    with pytest.raises(spf.ArgumentError, match=r"'T': a pydata sparse COO with fill_value 1.0 "
                                                r"cannot be used: absent entries of spf tensors "
                                                r"are 0"):
        ttm(T=t, M=np.ones((4, 2)))
    with pytest.raises(spf.ArgumentError, match=r"'T': a pydata sparse COO of shape \(4, 4\) has "
                                                "order 2, but layout COO3 stores order-3"):
        ttm(T=sparse.random((4, 4), density=0.3, random_state=1), M=np.ones((4, 2)))
    with pytest.raises(spf.ArgumentError, match="'T': a pydata sparse COO of dtype complex128"):
        ttm(T=sparse.random((4, 4, 4), density=0.3, random_state=1).astype(complex),
            M=np.ones((4, 2)))


def test_scipy_operand_checked_on_every_call(spmv):
    """The matrix's arrays stay the caller's: a change between calls is caught, not read."""
    m = matrices()["random"].copy()
    x = np.ones(m.shape[1])
    np.testing.assert_allclose(spmv["CSR"](A=m, x=x), m.toarray() @ x)
    m.indices[3] = 10_000                      # past the last column
    with pytest.raises(spf.ArgumentError, match=r"'A': CSR tensor: 'colIdx' violates range .* "
                                                r"at the read colIdx\[pj\] = colIdx\[3\]: "
                                                r"10000 > 19"):
        spmv["CSR"](A=m, x=x)
    m = matrices()["random"].copy()
    m.indptr[5] = m.indptr[6] + 1              # a row that ends before it starts
    with pytest.raises(spf.ArgumentError, match=r"^'A': a scipy.sparse csr_matrix \(csr\): "
                                                rf"indptr\[6\] = {m.indptr[6]} is less than "
                                                rf"indptr\[5\] = {m.indptr[5]}$"):
        spmv["CSR"](A=m, x=x)
    m = matrices()["random"].copy()
    m.indptr[-1] += 5                          # more entries claimed than stored
    with pytest.raises(spf.ArgumentError, match=r"^'A': a scipy.sparse csr_matrix \(csr\): "
                                                r"indptr\[30\] = 125 is beyond the 120 stored "
                                                "entries$"):
        spmv["CSR"](A=m, x=x)
