"""Loops ordered for an assembled output, and the direct append.

When the default loop order would scatter an output (bucket) but hoisting the layout index
that locates the output's first storage coordinate makes the loops produce entries in
storage order (Z3 proves it), the plan takes that order; the entries are still counted in
the default order.  It is not taken when the loops moved inside would run over a dimension
(a dense matrix walked column by column), nor when Z3 cannot prove the order (a layout that
declares no properties).  Entries that arrive in order with unique coordinates go straight
to the last level of a CSR-shaped output (direct append)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf

LAYOUTS = Path(__file__).resolve().parent.parent / "layouts"


def without_packer(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("packer")) + "\n"


def dia(shape, offsets, seed=0, zeros=0.0) -> spf.Tensor:
    """A DIA tensor with the given diagonals; ``zeros``: share of stored slots set to 0.0."""
    rng = np.random.default_rng(seed)
    data = rng.uniform(0.5, 2.0, (len(offsets), shape[0]))
    data[rng.random(data.shape) < zeros] = 0.0
    return spf.Tensor.from_arrays("DIA", shape, {"offset": np.array(offsets, np.int32),
                                                 "data": data})


def dense_of_dia(t: spf.Tensor) -> np.ndarray:
    f = t.fields
    out = np.zeros(t.shape)
    for d, off in enumerate(f["offset"]):
        for i in range(t.shape[0]):
            if 0 <= i + off < t.shape[1]:
                out[i, i + off] += f["data"][d][i] if f["data"].ndim == 2 \
                    else f["data"][d * t.shape[0] + i]
    return out


def test_dia_to_csr_runs_rows_outer_and_appends_directly():
    conv = spf.Conversion("DIA", "CSR")
    a = conv.kernel.assembly
    assert a.mode == "append" and a.direct and a.unique
    assert conv.kernel.order[0] == "A_pi"
    report = conv.report()
    assert "A_pi placed outermost (locating i from A_pi)" in report
    assert "no bucket pass" in report
    src = conv.c_source()
    assert "spf_convert_fill_histogram" not in src and "direct append" in src
    # the bound pass keeps the layout's order (diagonals outer: its inner loop is counted)
    bound = src[src.index("int spf_convert_fill_bound"):src.index("int spf_convert_fill(")]
    assert bound.index("A_pd = 0") < bound.index("A_pi = ")


@pytest.mark.parametrize("shape, offsets", [
    ((9, 9), [-2, 0, 1]),
    ((6, 11), [-3, 0, 4, 10]),          # wide, a diagonal with one slot
    ((12, 5), [-11, -4, 0, 2]),         # tall
    ((7, 7), [0]),
    ((5, 8), []),                       # no diagonal: an empty matrix
    ((1, 1), [0]),
    ((4, 4), [-3, 3]),                  # one entry each
])
@pytest.mark.parametrize("zeros", [0.0, 0.4, 1.0])
def test_dia_to_csr_matches_scipy(shape, offsets, zeros):
    t = dia(shape, offsets, seed=len(offsets), zeros=zeros)
    want = sp.csr_matrix(dense_of_dia(t))
    out = spf.Conversion("DIA", "CSR").compile()(t)
    f = out.fields
    got = sp.csr_matrix((f["data"], f["colIdx"], f["rowPtr"]), shape=shape)
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data)
    spf.Tensor(out.layout, out.shape, out.fields, check=True)


def test_bcsr_to_csr_runs_each_row_across_its_blocks():
    """i = B*pi + pk: both hoisted; the block loop moves inside (it runs over stored blocks),
    and the gap the layout declares between a row's blocks proves the columns increasing."""
    conv = spf.Conversion("BCSR", "CSR", B=3)
    assert conv.kernel.order == ("A_pi", "A_pk", "A_pj", "A_pl")
    assert conv.kernel.assembly.direct
    assert "placed outermost (locating i from A_pi, A_pk)" in conv.report()
    rng = np.random.default_rng(11)
    for shape in [(10, 7), (9, 9), (1, 4), (5, 5)]:
        a = np.where(rng.random(shape) < 0.3, rng.uniform(0.5, 2.0, shape), 0.0)
        if shape == (5, 5):
            a[:] = 0.0
        out = conv.compile()(spf.Tensor.from_dense("BCSR", a, B=3))
        want = sp.csr_matrix(a)
        assert out.fields["rowPtr"].tolist() == want.indptr.tolist()
        assert out.fields["colIdx"].tolist() == want.indices.tolist()
        np.testing.assert_array_equal(out.fields["data"], want.data)


def test_dense_to_csc_keeps_the_row_major_walk():
    """Hoisting the dense column index would walk the rows inside: a dimension, not a count
    of stored parts, so the scatter stays."""
    conv = spf.Conversion("DenseMatrix", "CSC")
    assert conv.kernel.assembly.mode == "bucket"
    assert "placed outermost" not in conv.report()
    a = np.where(np.random.default_rng(3).random((13, 7)) < 0.3, 1.5, 0.0)
    out = conv.compile()(spf.Tensor.from_dense("DenseMatrix", a))
    np.testing.assert_array_equal(out.to_dense(), a)


def test_given_order_is_not_changed():
    k = spf.Kernel("B(i,j) = A(i,j)", {"A": "DIA", "B": "CSR"}, order=["A_pd", "A_pi"])
    assert k.order[:2] == ("A_pd", "A_pi") and k.assembly.mode == "bucket"
    assert "placed outermost" not in k.report()


def test_dia_without_properties_is_not_reordered(tmp_path):
    """Without a monotonic offset array Z3 cannot prove the rows-outer loops ordered: the
    bucket scatter stays, and unsorted (even repeated) offsets convert correctly."""
    text = without_packer((LAYOUTS / "DIA.toml").read_text())
    text = text[:text.index("[[properties]]")].replace('name = "DIA"', 'name = "DIA_any"')
    path = tmp_path / "DIA_any.toml"
    path.write_text(text)
    conv = spf.Conversion(str(path), "CSR")
    assert conv.kernel.assembly.mode == "bucket"
    assert "placed outermost" not in conv.report()
    offsets = np.array([2, -1, 0, 2], np.int32)
    data = np.arange(1.0, 1.0 + 4 * 6).reshape(4, 6)
    t = spf.Tensor.from_arrays(str(path), (6, 6), {"offset": offsets, "data": data})
    np.testing.assert_array_equal(conv.compile()(t).to_dense(), dense_of_dia(t))


def test_elementwise_product_appends_directly():
    rng = np.random.default_rng(5)
    a = sp.random(30, 20, 0.3, format="csr", random_state=rng)
    b = sp.random(30, 20, 0.3, format="csr", random_state=rng)
    k = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"})
    assert k.assembly.direct
    out = k.compile()(A=spf.Tensor.from_scipy("CSR", a), B=spf.Tensor.from_scipy("CSR", b))
    np.testing.assert_allclose(out.to_dense(), a.multiply(b).toarray())


def test_repeated_coordinates_in_order_are_added_through_the_cursor(tmp_path):
    """Sorted coordinates that may repeat: in order, but not unique, so no direct append;
    the cursor adds equal neighbours."""
    text = without_packer((LAYOUTS / "SortedCOO.toml").read_text())
    text = text.replace('name = "SortedCOO"', 'name = "SortedCOO_dups"')
    text = text[:text.index('[[properties]]\nkind = "covary_monotonic"')] + \
        '[[properties]]\nkind = "covary_monotonic"\nuf = "colIdx"\nwith = "rowIdx"\norder = "<="\n'
    path = tmp_path / "SortedCOO_dups.toml"
    path.write_text(text)
    conv = spf.Conversion(str(path), "CSR")
    a = conv.kernel.assembly
    assert a.mode == "append" and not a.unique and not a.direct
    rows = np.array([0, 0, 0, 2, 2, 3], np.int32)
    cols = np.array([1, 1, 4, 0, 0, 4], np.int32)
    vals = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    t = spf.Tensor.from_arrays(str(path), (4, 5), {"rowIdx": rows, "colIdx": cols, "data": vals})
    want = sp.coo_matrix((vals, (rows, cols)), shape=(4, 5)).toarray()
    out = conv.compile()(t)
    np.testing.assert_array_equal(out.to_dense(), want)
    assert out.fields["rowPtr"].tolist() == [0, 2, 2, 3, 4]


@pytest.mark.parametrize("slots_limit", [0, 1 << 24])
def test_sizing_without_reading_values_is_trimmed(monkeypatch, slots_limit):
    """Dropping zeros: the output is sized by counting slots (no value read) when that is
    small, else by counting nonzero values; either way the arrays end trimmed to the
    nonzeros, and the row pointers are written once per row."""
    from spf.runtime import assembled
    monkeypatch.setattr(assembled, "SLOTS_ENTRIES", slots_limit)
    conv = spf.Conversion("DIA", "CSR")
    src = conv.c_source()
    assert "int spf_convert_fill_bound_slots(" in src
    kernel = src[src.index("int spf_convert_fill(spf_CSR"):]
    assert kernel.count("rowPtr[") == 1 and "the group's entries are appended" in kernel
    t = dia((40, 30), [-39, -5, 0, 3, 29], seed=2, zeros=0.7)
    want = dense_of_dia(t)
    # the conversion's C entry point (its own threshold), and the kernel sized from Python
    for out in (conv.compile()(t), conv.kernel.compile()(A=t)):
        np.testing.assert_array_equal(out.to_dense(), want)
        assert out.fields["data"].size == out.fields["colIdx"].size == np.count_nonzero(want)
        spf.Tensor(out.layout, out.shape, out.fields, check=True)
