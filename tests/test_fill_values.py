"""fill_values=True: an operand's absent entries are its fill (0 for scipy data, a Tensor's
own fill), as in TACO and Finch.  Where 0 is the semiring's zero and annihilates mul the
structural kernel is already that result; otherwise every element takes part and the sparse
operands are read densely.  References: numpy on dense arrays with the fill written into the
absent elements."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf

# mul(0, x) = x: zero does not annihilate it, and no inf or NaN clouds the comparison
PLUS_PLUS = spf.Semiring(add="a + b", mul="a + b", zero=0, one=0)


def matrix(m: int, n: int, density: float, seed: int) -> sp.csr_matrix:
    a = sp.random(m, n, density, format="csr", random_state=seed)
    a.data = np.random.default_rng(seed).integers(1, 9, a.nnz).astype(float)
    return a


def filled(a: sp.spmatrix, zero: float) -> np.ndarray:
    """``a`` dense, with ``zero`` where it stores nothing."""
    a = a.tocoo()
    out = np.full(a.shape, zero)
    out[a.row, a.col] = a.data
    return out


@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "ELL"])
@pytest.mark.parametrize("parallel", [False, True])
def test_spmv_with_absent_entries_taking_part(layout, parallel):
    for shape, density in [((7, 5), 0.3), ((4, 6), 0.0), ((1, 1), 1.0), ((5, 3), 0.1)]:
        A = matrix(*shape, density, seed=shape[0])
        x = np.random.default_rng(3).integers(-4, 5, shape[1]).astype(float)
        k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout}, semiring=PLUS_PLUS,
                       fill_values=True, parallel=parallel)
        assert list(k.read_densely) == ["A"] and k.read_densely["A"].name == layout
        got = k.compile()(A=A, x=x)
        np.testing.assert_array_equal(got, (filled(A, 0.0) + x).sum(axis=1))
        structural = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout},
                                semiring=PLUS_PLUS).compile()(A=A, x=x)
        Ad = A.toarray()
        np.testing.assert_array_equal(structural, np.where(Ad != 0, Ad + x, 0).sum(axis=1))


@pytest.mark.parametrize("out", ["DenseMatrix", "CSR", "COO"])
def test_spgemm_every_element_takes_part(out):
    A, B = matrix(6, 4, 0.3, 1), matrix(4, 5, 0.3, 2)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSC", "C": out},
                   semiring=PLUS_PLUS, fill_values=True)
    got = k.compile()(A=A, B=B)
    got = got.to_dense() if isinstance(got, spf.Tensor) else got
    expect = filled(A, 0.0).sum(axis=1)[:, None] + filled(B, 0.0).sum(axis=0)[None, :]
    np.testing.assert_array_equal(got, expect)
    assert "B (CSC) are read as dense arrays" in k.report()


def test_max_times_with_negative_values():
    """Absent entries of scipy data are 0: 0 * (a negative number) beats a negative product;
    of a Tensor with fill -inf, -inf * (a negative number) = +inf wins the max."""
    A = matrix(8, 6, 0.3, 4)
    x = np.random.default_rng(5).choice([-2.0, -1.0, 1.0, 3.0], 6)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "COO"}, semiring="max_times",
                   fill_values=True).compile()
    np.testing.assert_array_equal(k(A=A, x=x), (filled(A, 0.0) * x).max(axis=1))
    got = k(A=spf.Tensor.from_scipy("COO", A).with_fill(-np.inf), x=x)
    np.testing.assert_array_equal(got, (filled(A, -np.inf) * x).max(axis=1))
    assert np.isinf(got).any()


def test_annihilating_zero_keeps_the_structural_kernel():
    """0, the fill of scipy data, is plus_times's zero and annihilates mul: the structural
    kernel; min_plus's zero is inf, so scipy's absent entries (0) take part."""
    A, x = matrix(9, 7, 0.2, 6), np.arange(7.0)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, fill_values=True)
    plain = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"})
    assert k.read_densely == {} and k.layouts == plain.layouts
    assert "which annihilates mul, so iterating over the stored entries" in k.report()
    np.testing.assert_array_equal(k.compile()(A=A, x=x), A @ x)
    mp = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus",
                    fill_values=True)
    assert list(mp.read_densely) == ["A"]
    assert "structural: products run over the entries the operands store" in spf.Kernel(
        "y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus").report()
    mp = mp.compile()
    np.testing.assert_array_equal(mp(A=A, x=x), (filled(A, 0.0) + x).min(axis=1))
    At = spf.Tensor.from_scipy("CSR", A).with_fill(np.inf)
    np.testing.assert_array_equal(mp(A=At, x=x), (filled(A, np.inf) + x).min(axis=1))


def test_sum_of_terms_with_fill_values():
    A, B, x = matrix(5, 4, 0.3, 7), matrix(5, 4, 0.4, 8), np.arange(1.0, 5.0)
    got = spf.Kernel("y(i) = A(i,j) * x(j) + B(i,j) * x(j)", {"A": "CSR", "B": "COO"},
                     semiring=PLUS_PLUS, fill_values=True).compile()(A=A, B=B, x=x)
    np.testing.assert_array_equal(got, (filled(A, 0) + x).sum(1) + (filled(B, 0) + x).sum(1))


def test_fill_values_from_kernel_file_cli_and_evaluate(tmp_path):
    A, x = matrix(5, 4, 0.4, 9), np.array([1.0, -1.0, 2.0, -2.0])
    expect = (filled(A, 0.0) * x).max(axis=1)
    spec = tmp_path / "k.toml"
    spec.write_text('expr = "y(i) = A(i,j) * x(j)"\nsemiring = "max_times"\nfill_values = true\n'
                    '[layouts]\nA = "CSR"\n')
    np.testing.assert_array_equal(spf.Kernel(str(spec)).compile()(A=A, x=x), expect)
    np.testing.assert_array_equal(
        spf.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x, semiring="max_times", fill_values=True),
        expect)
    run = subprocess.run([sys.executable, "-m", "spf", "generate", "y(i) = A(i,j) * x(j)",
                          "--layout", "A=CSR", "--semiring", "max_times", "--fill-values"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "A (CSR) is read as dense arrays holding the fill" in run.stdout


def test_bad_fill_values():
    with pytest.raises(spf.SpecError, match="fill_values must be True or False"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, fill_values="yes")
    with pytest.raises(spf.SpecError, match="cannot also give the output's structure"):
        spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   share={"C": "A"}, semiring="plus_pair", fill_values=True)
    # the diagonal's middle slot is padding (0.0): read as the fill 0 it reads as what an
    # absent entry holds, but it is no absent entry (-inf) of a tensor whose fill is -inf
    csr = sp.csr_matrix(([1.0, 2.0], ([0, 2], [0, 2])), (3, 3))
    dia = spf.Tensor.from_scipy("DIA", csr)
    assert dia.padding() == 1
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "DIA"}, semiring="max_times",
                   fill_values=True).compile()
    x = np.array([-1.0, 2.0, 3.0])
    np.testing.assert_array_equal(k(A=dia, x=x), np.max(csr.toarray() * x, axis=1))
    with pytest.raises(spf.ArgumentError, match="padding"):
        k(A=dia.with_fill(-np.inf), x=np.ones(3))


def test_fill_follows_outputs_and_conversions():
    A = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [0.0, 3.0, 4.0]]))
    B = sp.csr_matrix(np.array([[5.0, 0.0, 0.0], [0.0, 0.0, 6.0]]))
    C = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   semiring="min_plus").compile()(A=A, B=sp.csr_matrix(np.ones((3, 2))))
    assert C.convert("COO").fill == np.inf
    np.testing.assert_array_equal(C.convert("COO").to_dense(), C.to_dense())
    # '+=' into a shared output: allocate_output starts from the zero, a given output says so
    acc = spf.Kernel("C(i,j) += A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                     share={"C": "A"}, semiring="min_plus").compile()
    At = spf.Tensor.from_scipy("CSR", A)
    out = acc.allocate_output(A=At, B=B)
    assert out.fill == np.inf and np.isinf(out.values).all()
    acc(A=At, B=B, C=out)
    np.testing.assert_array_equal(out.to_dense(), [[6.0, np.inf, np.inf], [np.inf, np.inf, 10.0]])
    dense = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}, semiring="max_plus").compile()
    y = dense.allocate_output(A=A, x=np.ones(3))
    assert y.fill == -np.inf and (y.values == -np.inf).all()


def test_padded_tensor_to_dense_with_a_fill_is_refused(tmp_path):
    """Padding slots spf added, or a pattern whose entries all hold 0, cannot be told from
    elements without an entry: a fill into a dense array is refused (to_dense, and the
    generated conversion, whose C refuses the pattern itself)."""
    dia = spf.Tensor.from_scipy("DIA", sp.csr_matrix(([1.0, 2.0], ([0, 2], [0, 2])), (3, 3)))
    with pytest.raises(spf.ArgumentError, match="stores 1 padding slots"):
        dia.to_dense(fill=-1.0)
    with pytest.raises(spf.ArgumentError, match="stores 1 padding slots"):
        dia.with_fill(-1.0).convert("DenseMatrix")
    pattern = spf.front.layout_path.load_layout("CSR_pattern")
    zeros = tmp_path / "Zeros.toml"
    zeros.write_text(Path(pattern.source).read_text()
                     .replace('name = "CSR_pattern"', 'name = "Zeros"')
                     .replace('value = "1"', 'value = "0"'))
    m = sp.csr_matrix(([1.0], ([0], [1])), shape=(2, 2))
    t = spf.Tensor(spf.front.layout_path.load_layout(str(zeros)), m.shape,
                   {"numRows": 2, "numCols": 2, "rowPtr": m.indptr, "colIdx": m.indices})
    np.testing.assert_array_equal(t.convert("DenseMatrix").to_dense(), np.zeros((2, 2)))
    with pytest.raises(spf.ArgumentError, match="entries all hold 0"):
        t.with_fill(3.0).convert("DenseMatrix")


def test_non_commutative_add_into_an_assembled_output_is_refused():
    last = spf.Semiring(add="b", mul="a * b", zero=0, one=1)
    with pytest.raises(spf.SpecError, match="not proven associative and commutative"):
        spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSC", "B": "CSR", "C": "CSR"},
                   semiring=last)


def test_layout_fill_key(tmp_path):
    """A layout file's ``fill`` (an inf-filled distance matrix): from_dense stores the
    elements other than inf (zeros included), to_dense, convert and a min-plus kernel with
    fill_values=True read inf where nothing is stored (numpy references)."""
    from pathlib import Path
    csr = (Path(__file__).parent.parent / "layouts" / "CSR.toml").read_text()
    path = tmp_path / "DistCSR.toml"
    path.write_text(csr.replace('name = "CSR"', 'name = "DistCSR"\nfill = inf')
                    .replace('packer = "CSR.py"\n', ""))
    inf = np.inf
    w = np.array([[0, 2, inf], [inf, 0, 1], [4, inf, inf], [inf, inf, inf]])
    t = spf.Tensor.from_dense(str(path), w)
    assert t.fill == inf and list(t.values) == [0, 2, 0, 1, 4]      # zeros are values
    assert np.array_equal(t.to_dense(), w)
    assert np.array_equal(t.convert("COO").to_dense(), w)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": str(path), "B": "DenseMatrix"},
                   semiring="min_plus", fill_values=True).compile()
    ref = np.min(w[:, :, None] + w[None, :3, :], axis=1)
    assert np.array_equal(k(A=t, B=w[:3]), ref)
    m = sp.random(5, 4, density=0.3, random_state=0, format="csr")
    dense = m.toarray()
    dense[dense == 0] = inf
    assert np.array_equal(spf.Tensor.from_scipy(str(path), m).to_dense(), dense)
    bad = tmp_path / "Bad.toml"
    bad.write_text(csr.replace('name = "CSR"', 'name = "Bad"\nfill = "x"')
                   .replace('packer = "CSR.py"\n', ""))
    with pytest.raises(spf.SpecError, match=r"Bad.toml:2:8: 'fill' must be a number"):
        spf.load_layout(str(bad))
    # a fill the values' type cannot hold is refused where that type is chosen, never a raw
    # numpy error when a dense copy is filled
    with pytest.raises(spf.SpecError, match=r"its fill inf is no int64 value"):
        spf.Tensor.from_dense(str(path), np.array([[1, 2], [3, 4]], np.int64))
    with pytest.raises(spf.SpecError, match=r"its fill inf is no int64 value"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": str(path)}, dtype="int64")


def test_a_dense_destination_holds_the_fill_where_no_entry_is():
    """A dense layout stores every element: converting a tensor whose fill is inf into one
    stores inf where the source holds no entry (it stored 0.0, silently), entries as they
    are (an explicit 0.0 included)."""
    m = sp.csr_matrix(([2.0, 0.0], ([0, 1], [1, 0])), shape=(2, 3))
    t = spf.Tensor.from_scipy("CSR", m).with_fill(np.inf)
    want = np.array([[np.inf, 2.0, np.inf], [0.0, np.inf, np.inf]])
    for dst in ("DenseMatrix", "CSC"):
        out = t.convert(dst)
        np.testing.assert_array_equal(out.to_dense(), want)
    np.testing.assert_array_equal(t.convert("DenseMatrix")["data"], want.ravel())
