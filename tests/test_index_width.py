"""64-bit indices (``index_type="int64"``) and the errors of data that overflows a width.

Extents beyond 2**31 - 1 are exercised with sparse vectors of length 5e9 (a few nonzeros), whose
results are compared with a plain-Python dictionary reference; everything else with scipy.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf

BIG = 5_000_000_000                      # > 2**32: no 32-bit index can address it
INT32_MAX = 2 ** 31 - 1


def big_vector(layout: str, coords: list[int], seed: int) -> tuple[spf.Tensor, dict[int, float]]:
    vals = np.random.default_rng(seed).uniform(0.5, 2.0, len(coords))
    t = spf.Tensor.from_coords(layout, (BIG,), (coords,), vals, index_type="int64")
    return t, dict(zip(coords, vals.tolist()))


A_COORDS = [0, 7, INT32_MAX, INT32_MAX + 1, 3_000_000_000, BIG - 1]
B_COORDS = [7, 12, INT32_MAX + 1, 4_000_000_000, BIG - 1]


@pytest.mark.parametrize("b_layout", ["SV", "SV_unsorted"])
def test_dot_product_beyond_int32(b_layout):
    a, da = big_vector("SV", A_COORDS, 1)
    b, db = big_vector(b_layout, B_COORDS, 2)
    assert a["idx"].dtype == np.int64 and a["len"] == len(A_COORDS)
    k = spf.Kernel("v = a(i) * b(i)", {"a": "SV", "b": b_layout}, index_type="int64")
    src = k.c_source()
    assert "typedef int64_t spf_index_t;" in src
    assert_compiles_clean(src)
    want = sum(da[i] * db[i] for i in da.keys() & db.keys())
    assert k.compile()(a=a, b=b) == pytest.approx(want)


def test_elementwise_product_into_a_sparse_output_beyond_int32():
    a, da = big_vector("SV", A_COORDS, 3)
    b, db = big_vector("SV", B_COORDS, 4)
    f = spf.Kernel("c(i) = a(i) * b(i)", {"a": "SV", "b": "SV", "c": "SV"},
                   index_type="int64").compile()
    c = f(a=a, b=b)
    common = sorted(da.keys() & db.keys())
    assert c.layout.index_type == "int64" and c["idx"].dtype == np.int64
    assert c["idx"].tolist() == common
    np.testing.assert_allclose(c["val"], [da[i] * db[i] for i in common])


def test_big_sparse_vector_converts_and_keeps_its_width():
    """SV -> SV_unsorted appends in order (an unordered source would gather in a dense
    workspace as long as the vector: 5e9 slots)."""
    a, da = big_vector("SV", A_COORDS, 5)
    s = a.convert("SV_unsorted")
    assert s.layout.index_type == "int64" and s["idx"].tolist() == sorted(da)
    np.testing.assert_allclose(s["val"], [da[i] for i in sorted(da)])


MATRIX = sp.random(40, 30, density=0.15, format="csr", random_state=7)
X = np.random.default_rng(8).uniform(-1, 1, 30)


@pytest.mark.parametrize("layout", ["CSR", "COO", "DCSR", "CSC", "BCSR", "DIA", "ELL"])
def test_spmv_int64_matches_scipy(layout):
    params = {"B": 4} if layout == "BCSR" else {}
    A = spf.Tensor.from_scipy(layout, MATRIX, index_type="int64", **params)
    assert A.layout.index_type == "int64"
    assert all(A[f].dtype == np.int64 for f, spec in A.layout.fields.items()
               if spec.is_array and spec.ctype == "int")
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout}, params={"A": params},
                   index_type="int64", parallel=True)
    assert_compiles_clean(k.c_source(), ("-fopenmp",))
    np.testing.assert_allclose(k.compile()(A=A, x=X), MATRIX @ X)
    np.testing.assert_array_equal(A.to_dense(), MATRIX.toarray())


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (13, 7), (7, 13)])
def test_spmspm_into_csr_int64(shape):
    a = sp.random(shape[0], shape[1], density=0.3, format="csr", random_state=1)
    b = sp.random(shape[1], shape[0], density=0.3, format="csr", random_state=2)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   index_type="int64")
    C = k.compile()(A=spf.Tensor.from_scipy("CSR", a, index_type="int64"),
                    B=spf.Tensor.from_scipy("CSR", b, index_type="int64"))
    assert C["rowPtr"].dtype == np.int64 and C["colIdx"].dtype == np.int64
    np.testing.assert_allclose(C.to_dense(), (a @ b).toarray())
    assert C.to_scipy().has_sorted_indices


def test_conversion_int64_matches_input():
    coo = spf.Tensor.from_scipy("COO", MATRIX.tocoo(), index_type="int64")
    conv = spf.Conversion("COO", "CSR", index_type="int64")
    assert "typedef int64_t spf_index_t;" in conv.c_source()
    csr = conv.compile()(coo)
    assert csr["rowPtr"].dtype == np.int64
    assert (csr.to_scipy() != MATRIX).nnz == 0
    dia = csr.convert("DIA", allow_padding=True)
    assert dia["offset"].dtype == np.int64
    np.testing.assert_array_equal(dia.to_dense(), MATRIX.toarray())


def test_kernel_takes_the_width_of_layout_objects():
    lay = spf.load_layout("CSR", index_type="int64")
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": lay})
    assert k.index_type == "int64"
    with pytest.raises(spf.SpecError, match="must share an index_type"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": lay, "x": spf.load_layout("SV")})


def test_kernel_file_index_type(tmp_path):
    f = tmp_path / "k.toml"
    f.write_text('expr = "y(i) = A(i,j) * x(j)"\nindex_type = "int64"\n[layouts]\nA = "CSR"\n')
    k = spf.Kernel(str(f))
    assert k.index_type == "int64"
    A = spf.Tensor.from_scipy("CSR", MATRIX, index_type="int64")
    np.testing.assert_allclose(k.compile()(A=A, x=X), MATRIX @ X)
    f.write_text('expr = "y(i) = A(i,j) * x(j)"\nindex_type = "int16"\n')
    with pytest.raises(spf.SpecError,
                       match="index_type must be one of 'int32', 'int64', got 'int16'"):
        spf.Kernel(str(f))


def test_bad_index_type_names_the_choices():
    with pytest.raises(spf.SpecError, match="index_type must be one of 'int32', 'int64', "
                                             "got 'int16'"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, index_type="int16")
    with pytest.raises(spf.SpecError, match="got 'uint64'"):
        spf.Tensor.from_scipy("CSR", MATRIX, index_type="uint64")


# --- overflow of the chosen width ---------------------------------------------------------------
def test_int32_shape_overflow_is_refused_with_the_fix():
    with pytest.raises(spf.ArgumentError, match=r"shape \(5000000000,\) does not fit "
                                                r"index_type='int32'.*use index_type='int64'"):
        spf.Tensor.from_coords("SV", (BIG,), ([3],), [1.0])


def test_int32_index_array_overflow_names_array_and_position():
    with pytest.raises(spf.ArgumentError, match=r"^SV tensor: idx\[1\] = 2147483648 does not "
                                                r"fit index_type='int32' \(at most 2147483647\); "
                                                r"use index_type='int64'$"):
        spf.Tensor.from_arrays("SV", (10,), {"size": 10, "len": 2,
                                             "idx": np.array([1, 2 ** 31], np.int64),
                                             "val": [1.0, 2.0]})


def test_int32_scalar_overflow():
    with pytest.raises(spf.ArgumentError, match=r"SV tensor: size = 3000000000 is outside "
                                                r"0\.\.2147483647 \(index_type='int32'\)"):
        spf.Tensor.from_arrays("SV", (3_000_000_000,), {"size": 3_000_000_000, "len": 0,
                                                        "idx": [], "val": []})


def test_tensor_of_other_width_is_refused_before_any_c_runs():
    f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile()
    A64 = spf.Tensor.from_scipy("CSR", MATRIX, index_type="int64")
    with pytest.raises(spf.ArgumentError, match=r"generated for layout CSR \(index_type='int32'\)"
                                                r" but got a tensor in layout CSR "
                                                r"\(index_type='int64'\)"):
        f(A=A64, x=X)


def test_assembled_output_beyond_the_width_is_an_error(monkeypatch):
    """An output needing more positions than the index type holds is refused, not wrapped:
    the width's largest value is lowered to 5 so that the path runs on small data."""
    import spf.runtime.assembled as kernel_module
    a = sp.random(6, 6, density=0.6, format="csr", random_state=3)
    f = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"}).compile()
    A = spf.Tensor.from_scipy("CSR", a)
    monkeypatch.setattr(kernel_module, "index_max", lambda layout: 5)
    with pytest.raises(spf.ArgumentError, match="more stored positions than index_type='int32' "
                                                "can address; use index_type='int64'"):
        f(A=A, B=A)


def test_written_conversion_beyond_the_width_is_an_error():
    """Three entries on three diagonals of a 2^30 x 2^30 matrix: DIA would need 3 * 2^30
    slots; the generated writer refuses before it allocates them."""
    n = 1 << 30
    t = spf.Tensor.from_arrays("COO", (n, n), {
        "numRows": n, "numCols": n, "numNNZ": 3, "rowIdx": np.array([0, 1, 5]),
        "colIdx": np.array([0, 0, 0]), "data": np.array([1.0, 2.0, 3.0])})
    with pytest.raises(spf.ArgumentError, match=r"DIA would need 3221225472 slots, more than "
                                                r"index_type='int32' can address; use "
                                                r"index_type='int64'"):
        t.convert("DIA", allow_padding=True)


def test_cli_generate_index_type(capsys):
    from spf import cli
    assert cli.main(["generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR",
                     "--index-type", "int64"]) == 0
    assert "typedef int64_t spf_index_t;" in capsys.readouterr().out


@pytest.mark.parametrize("dst", ["CSC", "COO", "ELL", "DCSR"])
def test_convert_into_a_layout_of_the_other_width(dst):
    """A destination Layout of another width gets the entries in that width (it was converted
    in the source's width without a word)."""
    for src_width, dst_width in (("int32", "int64"), ("int64", "int32")):
        t = spf.Tensor.from_scipy("CSR", MATRIX, index_type=src_width)
        out = t.convert(spf.load_layout(dst, index_type=dst_width))
        assert out.layout.index_type == dst_width
        assert all(out[f].dtype == np.dtype(dst_width) for f, spec in out.layout.fields.items()
                   if spec.is_array and spec.ctype == "int")
        np.testing.assert_array_equal(out.to_dense(), MATRIX.toarray())


def test_conversion_between_widths_needs_index_type():
    src, dst = spf.load_layout("CSR"), spf.load_layout("CSC", index_type="int64")
    with pytest.raises(spf.SpecError, match=r"cannot convert CSR \(int32\) to CSC \(int64\): a "
                       r"conversion runs in one index width; pass index_type=, or convert the "
                       r"tensor with Tensor.convert, which widens or narrows the result"):
        spf.Conversion(src, dst)
    conv = spf.Conversion(src, dst, index_type="int64")
    assert conv.dst.index_type == conv.src.index_type == "int64"
