"""Index arithmetic in accesses (issue 40, item 3): an access index may be an affine
expression of the kernel's indices (``I(i+k, j+l)``, ``x(j+2)``, ``A(i, 2*j)``).  Convolution,
correlation, stencils, offsets and strides on sparse and dense layouts, against scipy.signal,
scipy.ndimage and numpy."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
import scipy.signal as signal
from conftest import assert_compiles_clean

import spf

CONV = "O(i,j) = I(i-k,j-l) * F(k,l)"        # a full convolution (default extents)
CORR = "O(i,j) = I(i+k,j+l) * F(k,l)"        # a correlation (valid into a smaller O)


def _image(shape=(9, 7), density=0.3, seed=0, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 9, shape).astype(dtype)
    a[rng.random(shape) > density] = 0
    if shape[0] > 2:
        a[2] = 0                                       # an empty row
    return a


def _dense(r) -> np.ndarray:
    return r.to_dense() if isinstance(r, spf.Tensor) else np.asarray(r)


def _operand(layout: str, a: np.ndarray):
    return a if layout.startswith("Dense") else spf.Tensor.from_dense(layout, a)


@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "DenseMatrix"])
def test_convolution_of_an_image_in_any_layout(layout):
    image, filt = _image(), np.arange(1.0, 7.0).reshape(3, 2)
    k = spf.Kernel(CONV, {"I": layout, "F": "DenseMatrix", "O": "DenseMatrix"}).compile()
    got = k(I=_operand(layout, image), F=filt)
    np.testing.assert_array_equal(got, signal.convolve2d(image, filt))     # shape (11, 8)
    corr = spf.Kernel(CORR, {"I": layout, "F": "DenseMatrix", "O": "DenseMatrix"}).compile()
    valid = np.zeros((7, 6))                      # a passed output chooses its extents
    corr(I=_operand(layout, image), F=filt, O=valid)
    np.testing.assert_array_equal(valid, signal.correlate2d(image, filt, mode="valid"))


@pytest.mark.parametrize("layout", ["CSR", "COO"])
def test_a_sparse_filter_over_a_dense_image(layout):
    image, filt = _image(density=1.0), _image((3, 3), 0.5, seed=4)
    got = spf.evaluate(CORR, I=image, F=_operand(layout, filt),
                       layouts={"I": "DenseMatrix", "F": layout, "O": "DenseMatrix"})
    # O(i,j) for i, j from 0: the full correlation from its (2, 2) corner on
    np.testing.assert_array_equal(got, signal.correlate2d(image, filt, mode="full")[2:, 2:])


@pytest.mark.parametrize("out", ["CSR", "DCSR", "COO"])
def test_sparse_image_and_filter_into_a_sparse_output(out):
    image, filt = _image(), _image((3, 2), 0.6, seed=3)
    got = spf.evaluate(CONV, I=_operand("CSR", image), F=_operand("COO", filt),
                       layouts={"I": "CSR", "F": "COO", "O": out})
    assert isinstance(got, spf.Tensor) and got.shape == (11, 8)
    np.testing.assert_array_equal(got.to_dense(), signal.convolve2d(image, filt))
    corr = spf.evaluate(CORR, I=_operand("CSR", image), F=_operand("COO", filt),
                        layouts={"I": "CSR", "F": "COO", "O": out})   # i = a - k >= 0 only
    np.testing.assert_array_equal(corr.to_dense(),
                                  signal.correlate2d(image, filt, mode="full")[2:, 1:])


@pytest.mark.parametrize("x_layout, f_layout, y_layout", [
    ("SV", "DenseVector", "DenseVector"), ("DenseVector", "SV", "DenseVector"),
    ("SV", "SV", "SV")])
def test_convolution_1d(x_layout, f_layout, y_layout):
    x, f = _image((1, 40), 0.2)[0], np.array([1.0, 0.0, -2.0, 3.0])
    got = spf.evaluate("y(i) = x(i-k) * f(k)", x=_operand(x_layout, x), f=_operand(f_layout, f),
                       layouts={"x": x_layout, "f": f_layout, "y": y_layout})
    np.testing.assert_array_equal(_dense(got), signal.convolve(x, f))


def test_convolution_3d_of_a_csf_tensor():
    rng = np.random.default_rng(5)
    image = rng.integers(1, 5, (5, 4, 6)).astype(float)
    image[rng.random(image.shape) > 0.3] = 0
    filt = rng.integers(-2, 3, (2, 3, 2)).astype(float)
    got = spf.evaluate("O(i,j,k) = I(i-a,j-b,k-c) * F(a,b,c)",
                       I=spf.Tensor.from_dense("CSF", image), F=filt,
                       layouts={"I": "CSF", "F": "DenseTensor3", "O": "DenseTensor3"})
    np.testing.assert_array_equal(got, signal.convolve(image, filt))


@pytest.mark.parametrize("layout", ["DenseMatrix", "CSR"])
def test_five_point_stencil(layout):
    u = _image((8, 6), 0.6, seed=7)
    got = spf.evaluate("O(i,j) = 4*U(i,j) - U(i-1,j) - U(i+1,j) - U(i,j-1) - U(i,j+1)",
                       U=_operand(layout, u), layouts={"U": layout, "O": "DenseMatrix"})
    laplace = np.array([[0, -1, 0], [-1, 4, -1], [0, -1, 0]], float)
    np.testing.assert_array_equal(got, ndi.convolve(u, laplace, mode="constant"))


@pytest.mark.parametrize("layout", ["SV", "DenseVector"])
def test_three_point_stencil_and_its_extents(layout):
    x = _image((1, 12), 0.5)[0]
    got = spf.evaluate("y(i) = x(i-1) - 2*x(i) + x(i+1)", x=_operand(layout, x),
                       layouts={"x": layout, "y": "DenseVector"})
    np.testing.assert_array_equal(got, np.convolve(x, [1.0, -2.0, 1.0])[1:-1])
    # i read only shifted: its extent holds every point a term reaches (x(i-1) at i = 12)
    both = spf.evaluate("y(i) = x(i-1) + x(i+1)", x=_operand(layout, x),
                        layouts={"x": layout, "y": "SV"})
    np.testing.assert_array_equal(both.to_dense(), np.convolve(x, [1.0, 0.0, 1.0])[1:])


@pytest.mark.parametrize("layout", ["CSR", "COO", "DenseMatrix"])
def test_offsets_strides_and_diagonals(layout):
    A = _image((6, 9), 0.6, seed=2)
    a = _operand(layout, A)
    x = np.arange(1.0, 13.0)
    lay = {"A": layout, "x": "DenseVector"}
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,j) * x(j+2)", A=a, x=x,
                                               layouts=lay), A @ x[2:11])
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,2*j) * x(j)", A=a, x=x[:5],
                                               layouts=lay), A[:, ::2] @ x[:5])
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,j) * x(2*j+1)", A=a, x=x,
                                               layouts=lay), A[:, :6] @ x[1::2])
    np.testing.assert_array_equal(spf.evaluate("y(i) = A(i,i+1)", A=a, layouts=lay),
                                  np.diagonal(A, 1))
    assert spf.evaluate("s = x(i) * x(i+1)", x=x) == x[:-1] @ x[1:]


def test_a_shifted_lookup_is_a_find():
    k = spf.Kernel("C(i,j) = A(i,j) * B(i,j+1)", {"A": "CSR", "B": "CSR", "C": "DenseMatrix"})
    report = k.report()        # Z3 proves the shifted key j + 1 advances with j, as j would
    assert "with B.colIdx(B_pj) = j + 1" in report and "chosen: seqiter, forward" in report
    A, B = _image((6, 8), 0.5, seed=1), _image((6, 9), 0.5, seed=2)
    got = k.compile()(A=spf.Tensor.from_dense("CSR", A), B=spf.Tensor.from_dense("CSR", B))
    np.testing.assert_array_equal(got, A * B[:, 1:])


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_typed_and_parallel_convolution(dtype):
    image, filt = _image(dtype=dtype), np.arange(1, 7, dtype=dtype).reshape(2, 3)
    for parallel in (False, True):
        got = spf.evaluate(CONV, I=spf.Tensor.from_dense("CSR", image), F=filt,
                           layouts={"I": "CSR", "F": "DenseMatrix", "O": "DenseMatrix"},
                           parallel=parallel)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, signal.convolve2d(image, filt))


def test_edge_cases():
    filt = np.ones((3, 2))
    k = spf.Kernel(CONV, {"I": "CSR", "F": "DenseMatrix", "O": "DenseMatrix"}).compile()
    for image in (np.zeros((4, 5)), np.zeros((0, 5)), np.eye(1), _image((1, 9), 0.3)):
        got = k(I=spf.Tensor.from_dense("CSR", image), F=filt)
        # an image without a point reaches none: the smallest extent holding its points is 0
        assert got.shape == ((image.shape[0] + 2, image.shape[1] + 1) if image.size
                             else (0, 0))
        if image.size:
            np.testing.assert_array_equal(got, signal.convolve2d(image, filt))
        else:
            assert not got.any()
    one = np.zeros((5, 5))
    one[4, 0] = 2.0                                    # one nonzero, at the image's edge
    np.testing.assert_array_equal(k(I=spf.Tensor.from_dense("CSR", one), F=filt),
                                  signal.convolve2d(one, filt))


def test_an_extent_no_input_sets_needs_the_output():
    x = np.arange(5.0)
    with pytest.raises(spf.ArgumentError, match=r"extent of 'y' along 'i' is set by no "
                                                r"input.*pass the output"):
        spf.evaluate("y(i) = x(i+k)", x=x)
    y = np.zeros(3)
    spf.evaluate("y(i) = x(i+k)", x=x, out=y)
    # k, read by no tensor plainly, ranges over every integer keeping x(i+k) in range
    np.testing.assert_array_equal(y, [x.sum()] * 3)


def test_the_c_and_the_report_say_what_the_arithmetic_is():
    k = spf.Kernel("y(i) = A(i,2*j) * x(j)", {"A": "CSR", "x": "DenseVector"})
    src = k.c_source()
    assert "Index arithmetic: spf_2j = 2*j" in src
    assert "2*spf_floord(" in src                   # the stride's guard: 2 divides the column
    assert_compiles_clean(src)
    conv = spf.Kernel("O(i,j) = abs(I(i-k,j-l)) * F(k,l)", {"I": "CSR", "F": "DenseMatrix",
                                                            "O": "DenseMatrix"})
    assert_compiles_clean(conv.c_source())          # a tensor named I beside <tgmath.h>
    image = _image()
    np.testing.assert_array_equal(conv.compile()(I=spf.Tensor.from_dense("CSR", -image),
                                                 F=np.ones((2, 2))),
                                  signal.convolve2d(image, np.ones((2, 2))))


def test_derived_names_never_collide():
    """Two different expressions that would spell the same name get different ones (one
    variable for both would force a_p + b = a + p_b)."""
    from spf.front.kernel_spec import parse_expr
    expr = "s = x(a_p + b) * z(a + p_b) * p(a_p) * q(b) * r(a) * t(p_b)"
    assert len(set(parse_expr(expr).derived.values())) == 2
    rng = np.random.default_rng(3)
    x, z = rng.random(7), rng.random(7)
    p, q, r, t = rng.random(3), rng.random(4), rng.random(3), rng.random(4)
    want = sum(x[i + j] * z[k + m] * p[i] * q[j] * r[k] * t[m]
               for i in range(3) for j in range(4) for k in range(3) for m in range(4))
    got = spf.evaluate(expr, x=x, z=z, p=p, q=q, r=r, t=t)
    assert got == pytest.approx(want)
