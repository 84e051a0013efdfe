"""Storage shapes (``Storage.is_dense_over_compressed``/``is_coordinate_list``/``is_all_dense``,
``order_properties``) over every shipped layout, and scipy.sparse <-> fields
(spf.runtime.scipy_io) both ways: CSR, CSC and COO wrapped without a copy where the storage
has their shape, read back as copies, compared with the scipy objects they came from."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf import conversion
from spf.front.storage import storage_or_none
from spf.runtime.scipy_io import coordinate_fields, fields_of, matrix_of, proven_by_order

SHAPES = {   # predicate -> the shipped layouts whose storage has that shape
    "is_dense_over_compressed": {"CSR", "CSR_lengths", "CSR_pattern", "CSR_unsorted",
                                 "CSR_wideptr", "CSC"},
    "is_coordinate_list": {"COO", "COO3", "COOTensor", "SortedCOO", "SV", "SV_decreasing",
                           "SV_unsorted"},
    "is_all_dense": {"DenseMatrix", "DenseTensor", "DenseTensor3", "DenseVector"},
}
ASSEMBLED = {"COO", "COO3", "COOTensor", "CSC", "CSF", "CSF_CCD", "CSR", "CSR_lengths",
             "CSR_pattern", "CSR_unsorted", "CSR_wideptr", "DCSR",
             "DenseMatrix", "DenseTensor", "DenseTensor3", "DenseVector", "SV", "SV_decreasing",
             "SV_unsorted", "SortedCOO"}


def storages() -> dict[str, object]:
    return {n: storage_or_none(spf.load_layout(n)) for n in spf.layout_names()}


@pytest.mark.parametrize("predicate", sorted(SHAPES))
def test_storage_shape_predicates_over_shipped_layouts(predicate):
    found = storages()
    assert {n for n, st in found.items() if st is not None} == ASSEMBLED
    assert {n for n, st in found.items() if st is not None and getattr(st, predicate)()} \
        == SHAPES[predicate]


def test_shapes_come_from_the_relation_not_the_name(tmp_path):
    for name in ("CSC", "SortedCOO", "DenseMatrix", "DCSR"):
        text = (spf.front.layout_path.LAYOUT_DIR / f"{name}.toml").read_text()
        text = text.replace(f'name = "{name}"', 'name = "Mine"')
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith("packer"))
        (tmp_path / f"{name}.toml").write_text(text)
        mine = storage_or_none(spf.load_layout(str(tmp_path / f"{name}.toml")))
        shipped = storage_or_none(spf.load_layout(name))
        assert [getattr(mine, p)() for p in sorted(SHAPES)] == \
            [getattr(shipped, p)() for p in sorted(SHAPES)]


def test_order_properties():
    kinds = {n: sorted(p.text() for p in st.order_properties())
             for n, st in storages().items() if st is not None}
    assert kinds["CSR"] == ["periodic_monotonic(colIdx <, period pi)"]    # not rowPtr's
    assert kinds["CSR_unsorted"] == kinds["DenseMatrix"] == []
    assert kinds["COO"] == ["injective(rowIdx, colIdx)"]
    assert kinds["SortedCOO"] == ["covary_monotonic(colIdx <, with rowIdx)",
                                  "injective(rowIdx, colIdx)", "monotonic(rowIdx <=)"]
    assert proven_by_order(spf.load_layout("SV_decreasing")) == frozenset()   # scipy: rising
    assert proven_by_order(spf.load_layout("SV")) == frozenset(
        storage_or_none(spf.load_layout("SV")).order_properties())
    assert proven_by_order(spf.load_layout("ELL")) == frozenset()


def test_layouts_found_by_shape():
    assert conversion.compressed_rows_layout().name == "CSR_unsorted"
    assert [conversion.coordinate_layout(k).name for k in (1, 2, 3)] == [
        "SV_unsorted", "COO", "COO3"]
    assert [conversion.dense_layout(k).name for k in (1, 2, 3)] == [
        "DenseVector", "DenseMatrix", "DenseTensor3"]


# --- scipy <-> fields ------------------------------------------------------------------------
def matrices() -> dict[str, sp.csr_matrix]:
    empty_rows = sp.random(9, 7, density=0.3, format="lil", random_state=4)
    empty_rows[[0, 4, 8], :] = 0
    return {"random": sp.random(12, 8, density=0.3, format="csr", random_state=1),
            "empty": sp.csr_matrix((6, 3)),
            "zero_rows": sp.csr_matrix((0, 4)),
            "one": sp.csr_matrix(([2.5], ([3], [1])), shape=(5, 4)),
            "empty_rows": empty_rows.tocsr(),
            "wide": sp.random(2, 40, density=0.4, format="csr", random_state=2)}


@pytest.mark.parametrize("fmt, layout", [("csr", "CSR"), ("csc", "CSC"), ("coo", "COO")])
@pytest.mark.parametrize("name", sorted(matrices()))
def test_scipy_round_trip(fmt, layout, name):
    m = matrices()[name].asformat(fmt)
    lay = spf.load_layout(layout)
    t = spf.Tensor(lay, m.shape, fields_of(m, storage_or_none(lay)))
    assert np.shares_memory(t.values, m.data) or not m.nnz       # wrapped, not copied
    back = matrix_of(t.layout, t.shape, t.fields)
    assert back.format == fmt and back.shape == m.shape
    np.testing.assert_array_equal(back.toarray(), m.toarray())
    assert not np.shares_memory(back.data, t.values) or not m.nnz
    np.testing.assert_array_equal(t.to_scipy().toarray(), m.toarray())


def test_unsorted_where_allowed():
    m = sp.random(10, 9, density=0.4, format="csr", random_state=5)
    rev = m.copy()
    for i in range(m.shape[0]):
        lo, hi = m.indptr[i], m.indptr[i + 1]
        rev.indices[lo:hi], rev.data[lo:hi] = m.indices[lo:hi][::-1], m.data[lo:hi][::-1]
    rev.has_sorted_indices = False
    t = spf.Tensor(spf.load_layout("CSR_unsorted"), rev.shape,
                   fields_of(rev, storage_or_none(spf.load_layout("CSR_unsorted"))))
    back = t.to_scipy()
    np.testing.assert_array_equal(back.indices, rev.indices)    # in the order given
    np.testing.assert_array_equal(back.toarray(), m.toarray())
    with pytest.raises(spf.ArgumentError, match="violates periodic_monotonic"):
        spf.Tensor(spf.load_layout("CSR"), rev.shape,
                   fields_of(rev, storage_or_none(spf.load_layout("CSR"))))
    coo = m.tocoo()
    order = np.arange(coo.nnz)[::-1]
    shuffled = sp.coo_matrix((coo.data[order], (coo.row[order], coo.col[order])), coo.shape)
    t = spf.Tensor(spf.load_layout("COO"), coo.shape,
                   fields_of(shuffled, storage_or_none(spf.load_layout("COO"))))
    np.testing.assert_array_equal(t["rowIdx"], coo.row[order])
    np.testing.assert_array_equal(t.to_scipy().toarray(), m.toarray())


def test_fields_only_where_the_storage_has_the_shape():
    m = sp.random(6, 5, density=0.5, format="csr", random_state=3)
    st = {n: storage_or_none(spf.load_layout(n)) for n in ("CSR", "CSC", "COO", "DCSR")}
    assert fields_of(m, st["CSC"]) is None and fields_of(m.tocsc(), st["CSR"]) is None
    assert fields_of(m, st["COO"]) is None and fields_of(m.tocoo(), st["CSR"]) is None
    assert fields_of(m, st["DCSR"]) is None and fields_of(m.tolil(), st["CSR"]) is None
    assert coordinate_fields(st["CSR"], (m.tocoo().row, m.tocoo().col), m.data, {}) is None
    assert set(fields_of(m, st["CSR"])) == {"numRows", "numCols", "rowPtr", "colIdx", "data"}


def test_matrix_of_other_storage_goes_through_coordinates():
    dcsr = spf.Tensor.from_scipy("DCSR", matrices()["empty_rows"])
    assert matrix_of(dcsr.layout, dcsr.shape, dcsr.fields) is None
    assert dcsr.to_scipy().format == "coo"
    np.testing.assert_array_equal(dcsr.to_scipy().toarray(), matrices()["empty_rows"].toarray())
    # a valid CSR tensor whose first entry is unused: not scipy's pointer array
    t = spf.Tensor.from_arrays("CSR", (2, 2), {"rowPtr": [1, 2, 3], "colIdx": [0, 1, 0],
                                               "data": [9.0, 1.0, 2.0]})
    assert matrix_of(t.layout, t.shape, t.fields) is None
    np.testing.assert_array_equal(t.to_scipy().toarray(), [[0.0, 1.0], [2.0, 0.0]])


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_from_scipy_adds_duplicates_and_keeps_zeros(fmt):
    m = sp.coo_matrix(([1.0, 2.0, 0.0, 4.0], ([0, 0, 1, 2], [3, 3, 0, 1])), shape=(3, 4))
    t = spf.Tensor.from_scipy("CSR", m.asformat(fmt) if fmt != "coo" else m)
    np.testing.assert_array_equal(t["rowPtr"], [0, 1, 2, 3])
    np.testing.assert_array_equal(t["colIdx"], [3, 0, 1])
    np.testing.assert_array_equal(t.values, [3.0, 0.0, 4.0])
