"""Tensor fields: scalar fields derived from the shape and array lengths, read-only storage,
the C struct built once; results compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf


def spmv(layout: str):
    return spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout}).compile()


def test_sv_scalars_derived():
    t = spf.Tensor.from_arrays("SV", (10,), {"idx": [1, 4, 7], "val": [1.0, 2.0, 3.0]})
    assert t["size"] == 10 and t["len"] == 3
    dot = spf.Kernel("s = a(i) * b(i)", {"a": "SV"}).compile()
    b = np.arange(10.0)
    assert dot(a=t, b=b) == pytest.approx(1 * 1 + 2 * 4 + 3 * 7)
    empty = spf.Tensor.from_arrays("SV", (4,), {"idx": np.zeros(0, int), "val": []})
    assert empty["len"] == 0 and dot(a=empty, b=np.ones(4)) == 0.0


@pytest.mark.parametrize("layout", ["CSR", "CSR_unsorted", "CSC", "COO", "SortedCOO", "DCSR"])
def test_matrix_scalars_derived(layout):
    m = sp.random(7, 5, density=0.3, format="csr", random_state=3)
    full = spf.Tensor.from_scipy(layout, m)
    arrays = {k: v for k, v in full.fields.items() if not isinstance(v, int)}
    t = spf.Tensor.from_arrays(layout, m.shape, arrays)
    assert dict(t.fields.items()).keys() == dict(full.fields.items()).keys()
    assert all(t[k] == full[k] for k in full.layout.scalar_fields)
    x = np.arange(5.0)
    np.testing.assert_allclose(spmv(layout)(A=t, x=x), m @ x)


def test_ell_width_from_a_two_dimensional_array():
    col = np.array([[0, 2], [1, -1], [-1, -1]])
    data = np.array([[1.0, 2.0], [3.0, 0.0], [0.0, 0.0]])
    t = spf.Tensor.from_arrays("ELL", (3, 3), {"colIdx": col, "data": data})
    assert (t["numRows"], t["numCols"], t["width"]) == (3, 3, 2)
    dense = np.array([[1.0, 0, 2.0], [0, 3.0, 0], [0, 0, 0]])
    np.testing.assert_allclose(spmv("ELL")(A=t, x=np.arange(3.0)), dense @ np.arange(3.0))


def test_given_scalars_must_agree():
    with pytest.raises(spf.ArgumentError, match=r"SV tensor: size = 4 was given, but the shape "
                                                r"\(dimension 0 is 5\) gives size = 5"):
        spf.Tensor.from_arrays("SV", (5,), {"size": 4, "idx": [0], "val": [1.0]})
    with pytest.raises(spf.ArgumentError, match=r"SV tensor: len = 2 was given, but the length "
                                                r"of 'idx' \(1\) gives len = 1"):
        spf.Tensor.from_arrays("SV", (5,), {"len": 2, "idx": [0], "val": [1.0]})
    with pytest.raises(spf.ArgumentError, match=r"CSR tensor: numRows = 4 was given, but the "
                                                r"shape \(dimension 0 is 2\) gives numRows = 2"):
        spf.Tensor.from_arrays("CSR", (2, 2), {"numRows": 4, "rowPtr": [0, 1, 1],
                                               "colIdx": [1], "data": [1.0]})
    # the pointer array's length fixes numRows too, and disagrees with the shape
    with pytest.raises(spf.ArgumentError, match=r"CSR tensor: 'rowPtr' has 4 elements but its "
                                                r"extent \[\(numRows \+ 1\)\] is 3"):
        spf.Tensor.from_arrays("CSR", (2, 2), {"rowPtr": [0, 1, 1, 1], "colIdx": [1],
                                               "data": [1.0]})
    with pytest.raises(spf.ArgumentError, match=r"missing field\(s\) \['numCols'\]"):
        spf.Tensor.from_arrays("CSR", (2,), {"rowPtr": [0, 1, 1], "colIdx": [1], "data": [1.0]})


def test_fields_are_read_only():
    m = sp.random(6, 6, density=0.3, format="csr", random_state=1)
    rowptr = m.indptr.astype(np.int32).copy()
    t = spf.Tensor.from_arrays("CSR", m.shape, {"rowPtr": rowptr, "colIdx": m.indices,
                                                "data": m.data})
    with pytest.raises(ValueError, match="read-only"):
        t["colIdx"][0] = 5
    with pytest.raises(ValueError, match="read-only"):
        t.values[0] = 1.0
    with pytest.raises(TypeError):
        t.fields["colIdx"] = np.zeros(3, np.int32)
    assert rowptr.flags.writeable            # the caller's own array is left as it was
    assert t.struct is t.struct              # built once, reused by every call


def test_dense_output_returned_writeable():
    m = sp.random(6, 4, density=0.5, format="csr", random_state=2)
    y = spmv("CSR")(A=m, x=np.ones(4))
    again = spmv("CSR")(A=m, x=np.ones(4))
    assert y.flags.writeable and not np.shares_memory(y, again)   # a fresh array per call
    y[0] = 7.0
    np.testing.assert_allclose(again, m @ np.ones(4))
    acc = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}).compile()
    out = np.zeros(6)
    assert acc(A=m, x=np.ones(4), y=out) is out
    np.testing.assert_allclose(out, m @ np.ones(4))
    frozen = np.zeros(6)
    frozen.flags.writeable = False
    with pytest.raises(spf.ArgumentError, match="output 'y' must be a writeable"):
        acc(A=m, x=np.ones(4), y=frozen)


@pytest.mark.parametrize("x", [np.arange(4, dtype=np.int64), np.arange(4, dtype=np.float32),
                               [0.0, 1.0, 2.0, 3.0], np.arange(8.0)[::2]])
def test_dense_operands_of_other_kinds(x):
    m = sp.random(5, 4, density=0.5, format="csr", random_state=4)
    np.testing.assert_allclose(spmv("CSR")(A=m, x=x), m @ np.asarray(x, dtype=float))
