"""Loop coalescing (spf/back/coalesce.py): an outer loop that only bounds an inner loop over a
non-decreasing index array's segments is merged into one loop; results against scipy/numpy."""
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf

ROOT = Path(__file__).resolve().parents[1]
COALESCED = "coalesced: no code reads"


def matrices():
    rng = np.random.default_rng(7)
    empty_rows = sp.random(30, 20, density=0.15, format="csr", random_state=1)
    empty_rows = sp.csr_matrix(empty_rows.multiply(
        (rng.random((30, 1)) < 0.5).astype(float)))          # about half the rows empty
    one = sp.csr_matrix(([2.5], ([3], [4])), shape=(5, 7))
    return {"irregular rows": sp.random(200, 150, density=0.05, format="csr", random_state=2),
            "empty rows": empty_rows, "one nonzero": one,
            "no nonzero": sp.csr_matrix((6, 4)), "no rows": sp.csr_matrix((0, 5)),
            "one column": sp.random(40, 1, density=0.5, format="csr", random_state=3)}


@pytest.mark.parametrize("name", list(matrices()))
def test_csr_to_csc_histogram_is_one_loop(name):
    a = matrices()[name]
    a.eliminate_zeros()
    conv = spf.Conversion("CSR", "CSC")
    src = conv.c_source()
    hist = src[src.index("spf_convert_fill_histogram(spf_index_t"):]
    hist = hist[:hist.index("\n}\n")]
    assert COALESCED in hist and "A_pi <" not in hist
    assert "for (spf_index_t A_pj = A_rowPtr[0]; A_pj < A_rowPtr[A_numRows]; ++A_pj)" in hist
    got = conv.compile()(spf.Tensor.from_scipy("CSR", a)).to_scipy()
    want = a.tocsc()
    assert got.shape == want.shape
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data)


@pytest.mark.parametrize("name", list(matrices()))
def test_sum_of_all_entries(name):
    a = matrices()[name]
    k = spf.Kernel("s = A(i,j)", {"A": "CSR"})
    assert COALESCED in k.c_source()
    assert k.compile()(A=spf.Tensor.from_scipy("CSR", a)) == pytest.approx(a.sum())


def test_three_levels_merge_twice():
    rng = np.random.default_rng(3)
    dense = rng.random((6, 5, 7)) * (rng.random((6, 5, 7)) < 0.2)
    dense[2] = 0.0                                          # an empty slice
    dense[4, 1] = 0.0                                       # an empty fibre
    k = spf.Kernel("s = A(i,j,k) * w(k)", {"A": "CSF", "w": "DenseVector"})
    src = k.c_source()
    assert src.count(COALESCED) == 2
    w = rng.random(7)
    got = k.compile()(A=spf.Tensor.from_dense("CSF", dense), w=w)
    assert got == pytest.approx(np.einsum("ijk,k->", dense, w))


def test_not_when_the_outer_index_is_read():
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"})
    assert "coalesced" not in k.c_source()


def test_parallel_kernels_keep_their_loops():
    k = spf.Kernel("s = A(i,j)", {"A": "CSR"}, parallel=True)
    assert "coalesced" not in k.c_source()


def csr_without_monotonic_rowptr(tmp_path: Path) -> Path:
    text = (ROOT / "layouts" / "CSR.toml").read_text()
    prop = '[[properties]]\nkind = "monotonic"\nuf = "rowPtr"\norder = "<="\n\n'
    assert prop in text
    text = text.replace(prop, "").replace('name = "CSR"', 'name = "CSR_any_ptr"')
    packer = (ROOT / "layouts" / "CSR.py").as_posix()
    text = text.replace('packer = "CSR.py"', f'packer = "{packer}"')
    path = tmp_path / "CSR_any_ptr.toml"
    path.write_text(text)
    return path


def test_not_without_a_declared_monotonic_pointer(tmp_path):
    """Without ``monotonic rowPtr`` the segments may overlap or go backwards: the nested
    loops visit what the relation says, one loop over [rowPtr(0), rowPtr(n)) would not."""
    path = str(csr_without_monotonic_rowptr(tmp_path))
    k = spf.Kernel("s = A(i,j)", {"A": path})
    assert "coalesced" not in k.c_source()
    a = matrices()["irregular rows"]
    assert k.compile()(A=spf.Tensor.from_scipy(path, a)) == pytest.approx(a.sum())
