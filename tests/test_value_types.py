"""Value types (issue 39, first part): tensors keep their values' type, kernels compute in
the types numpy's promotion gives, the generated C is typed; checked against numpy and
scipy in the same types."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean, covering, lanes

import spf

TYPES = ["bool", "int8", "int32", "int64", "uint16", "uint64", "float32", "float64",
         "complex64", "complex128"]
LAYOUTS = ["CSR", "COO", "CSC", "DCSR", "DIA", "ELL", "BCSR", "SELL_sigma", "CSR4",
           "DenseMatrix"]
SHAPES = [(13, 9), (6, 6), (1, 5)]


def _values(rng: np.random.Generator, n: int, dtype: str) -> np.ndarray:
    """Random values of ``dtype`` (no zeros: a stored zero and an absent entry agree)."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        return np.ones(n, bool)
    if kind in "iu":
        top = min(int(np.iinfo(dtype).max), 1000)
        return rng.integers(1, top, n).astype(dtype)
    if kind == "c":
        return (rng.random(n) + 0.5 + 1j * (rng.random(n) - 0.5)).astype(dtype)
    return (rng.random(n) + 0.5).astype(dtype)


def _matrix(shape: tuple[int, int], dtype: str, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    mask = rng.random(shape) < 0.35
    mask[min(1, shape[0] - 1)] = False                    # an empty row
    dense = np.zeros(shape, dtype)
    dense[mask] = _values(rng, int(mask.sum()), dtype)
    return sp.csr_matrix(dense)


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    if np.dtype(dtype).kind in "fc":
        rtol = 1e-5 if np.dtype(dtype).itemsize <= 8 and dtype != "float64" else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(got, want)


CASES = [(t, lay, s) for t in TYPES for lay in LAYOUTS for s in SHAPES]


@pytest.mark.parametrize("dtype,layout,shape", lanes(CASES, covering(TYPES, LAYOUTS, SHAPES)))
def test_spmv_in_every_type_and_layout(dtype, layout, shape):
    m = _matrix(shape, dtype)
    a = spf.Tensor.from_scipy(layout, m)
    assert a.dtype == np.dtype(dtype)
    _close(a.to_dense(), m.toarray(), dtype)
    x = _values(np.random.default_rng(1), shape[1], dtype)
    y = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": a.layout}, dtype=dtype).compile()(A=a, x=x)
    _close(y, m.toarray() @ x, dtype)


@pytest.mark.parametrize("dtype", ["int32", "float32", "complex128", "uint8"])
def test_spmm_and_spgemm(dtype):
    m = _matrix((11, 7), dtype, seed=2)
    b = _matrix((7, 5), dtype, seed=3)
    a = spf.Tensor.from_scipy("CSR", m)
    dense = _values(np.random.default_rng(4), 35, dtype).reshape(7, 5)
    c = spf.evaluate("C(i,j) = A(i,k) * B(k,j)", A=a, B=dense)
    _close(c, m.toarray() @ dense, dtype)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   dtype=dtype)
    out = k.compile()(A=a, B=spf.Tensor.from_scipy("CSR", b))
    assert out.dtype == np.dtype(dtype)
    _close(out.to_dense(), m.toarray() @ b.toarray(), dtype)
    _close(out.to_scipy().toarray(), (m @ b).toarray(), dtype)


@pytest.mark.parametrize("dtype", ["int16", "float32", "complex64", "bool"])
@pytest.mark.parametrize("dst", ["CSC", "COO", "DIA", "ELLPACK_R", "HiCOO"])
def test_conversions_keep_the_type(dtype, dst):
    if dst == "HiCOO":
        rng = np.random.default_rng(5)
        d = np.zeros((4, 5, 3), dtype)
        mask = rng.random(d.shape) < 0.3
        d[mask] = _values(rng, int(mask.sum()), dtype)
        t = spf.Tensor.from_dense("COO3", d).convert(dst)
        assert t.dtype == np.dtype(dtype)
        _close(t.to_dense(), d, dtype)
        return
    m = _matrix((9, 8), dtype, seed=6)
    t = spf.Tensor.from_scipy("CSR", m).convert(dst, allow_padding=True)
    assert t.dtype == np.dtype(dtype) and t.values.dtype == np.dtype(dtype)
    _close(t.to_dense(), m.toarray(), dtype)


def test_integers_beyond_2_53_stay_exact_and_overflow_wraps():
    big = 2 ** 60 + 1
    a = spf.Tensor.from_coords("COO", (2, 2), ([0, 1], [1, 0]), np.array([big, 3], np.int64))
    x = np.array([5, 1], np.int64)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=x)
    assert y.dtype == np.int64 and list(y) == [big, 15]
    wrap = spf.Tensor.from_coords("COO", (1, 2), ([0, 0], [0, 1]),
                                  np.array([2 ** 62, 2 ** 62], np.int64))
    got = spf.evaluate("y(i) = A(i,j) * x(j)", A=wrap, x=np.array([2, 2], np.int64))
    want = np.array([[2 ** 62, 2 ** 62]], np.int64) @ np.array([2, 2], np.int64)
    assert list(got) == list(want)                  # wrapped, as numpy does
    small = spf.Tensor.from_dense("CSR", np.array([[100, 100]], np.int8))
    assert spf.evaluate("y(i) = A(i,j) * x(j)", A=small, x=np.array([1, 1], np.int8))[0] \
        == np.array([[100, 100]], np.int8) @ np.array([1, 1], np.int8)


def test_promotion_of_mixed_operands_and_accumulate():
    m = _matrix((8, 6), "int32", seed=7)
    a = spf.Tensor.from_scipy("CSR", m)
    x = np.linspace(0.5, 2.0, 6)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=a, x=x)
    assert y.dtype == np.float64                     # int32 x float64 -> float64
    np.testing.assert_allclose(y, m.toarray() @ x)
    f = _matrix((8, 6), "float32", seed=8)
    t = spf.Tensor.from_scipy("CSR", f)
    xs = np.linspace(0.5, 2.0, 6).astype(np.float32)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype="float32",
                   accumulate="float64")
    assert "typedef float spf_value_t;\ntypedef double spf_acc_t;" in k.c_source()
    line = "alue types: A float32, x float32 -> y float32, summed in float64"
    assert f" * V{line}\n" in k.c_source() and f"v{line}" in k.report()
    got = k.compile()(A=t, x=xs)
    assert got.dtype == np.float32
    want = (f.toarray().astype(np.float64) @ xs.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(spf.SpecError, match="accumulate=float32: the output 'y' is float64"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, accumulate="float32")


def test_operands_convert_only_by_same_kind_casting():
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile()     # float64
    ints = spf.Tensor.from_scipy("CSR", _matrix((4, 3), "int32"))
    np.testing.assert_allclose(k(A=ints, x=np.ones(3)), ints.to_dense() @ np.ones(3))
    cplx = spf.Tensor.from_scipy("CSR", _matrix((4, 3), "complex128"))
    with pytest.raises(spf.ArgumentError, match="'A' holds complex128 values; the kernel "
                                                "computes it as float64"):
        k(A=cplx, x=np.ones(3))
    k32 = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype="int32").compile()
    big = spf.Tensor.from_coords("COO", (1, 1), ([0], [0]), np.array([2 ** 40]))
    with pytest.raises(spf.ArgumentError, match=r"'A': data\[0\] = 1099511627776 \(int64\) is "
                                                "not exactly a int32"):
        k32(A=big.convert("CSR"), x=np.ones(1, np.int32))


def test_tensor_dtype_given_and_refused():
    d = np.array([[1.5, 0], [0, 2.5]])
    t = spf.Tensor.from_dense("CSR", d, dtype="float32")
    assert t.dtype == np.float32 and t.values.dtype == np.float32
    asked = spf.Tensor.from_dense("CSR", d, dtype="int64")          # asked for: truncated
    assert list(asked.values) == [1, 2]
    with pytest.raises(spf.ArgumentError, match="dtype: dtype object is not supported; spf "
                                                "computes with bool, int8"):
        spf.Tensor.from_dense("CSR", d, dtype=object)
    with pytest.raises(spf.ArgumentError, match="expected a numeric array, got dtype <U1"):
        spf.Tensor.from_dense("CSR", np.array([["a"]]))
    with pytest.raises(spf.SpecError, match="dtype names 'Q', which is not a tensor of "):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype={"Q": "int8"})
    with pytest.raises(spf.SpecError, match="dtype: dtype float16 is not supported"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype="float16")
    half = spf.Tensor.from_dense("CSR", d.astype(np.float16))
    assert half.dtype == np.float32                   # float16 is held as float32
    with pytest.raises(spf.SpecError, match="semiring=min_plus is not defined for complex128 "
                                            "values \\(the output 'y'\\): complex numbers"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype="complex128",
                   semiring="min_plus")


@pytest.mark.parametrize("dtype", ["float32", "int64", "complex128", "bool", "uint8"])
def test_generated_c_is_typed_and_warning_free(dtype):
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   dtype=dtype)
    src = k.c_source()
    ctype = spf.front.value_types.VALUE_TYPES[dtype].c
    assert f"typedef {ctype} spf_value_t;" in src
    assert f"{ctype} *restrict data;" in src
    assert_compiles_clean(src)


def _semiring_reference(dense: np.ndarray, x: np.ndarray, add, mul, zero) -> np.ndarray:
    """y(i) = add over the stored j of mul(A(i,j), x(j)); zero where a row stores nothing."""
    out = np.full(dense.shape[0], zero, dtype=dense.dtype)
    for i, row in enumerate(dense):
        for j in np.flatnonzero(row):
            out[i] = add(out[i], mul(row[j], x[j]))
    return out


@pytest.mark.parametrize("dtype,semiring", [
    ("int64", "min_plus"), ("int32", "max_plus"), ("uint16", "min_times"),
    ("int8", "max_times"), ("bool", "or_and"), ("bool", "any_pair"), ("float32", "min_plus")])
@pytest.mark.parametrize("layout", ["CSR", "COO", "ELL"])
def test_semirings_on_integer_and_boolean_types(dtype, semiring, layout):
    """A semiring's infinite zero is the type's limit (INT64_MAX for min_plus on int64);
    results equal numpy's in the same type, empty rows holding the zero."""
    m = _matrix((9, 7), dtype, seed=9)
    a = spf.Tensor.from_scipy(layout, m)
    x = _values(np.random.default_rng(10), 7, dtype)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": a.layout}, dtype=dtype, semiring=semiring)
    y = k.compile()(A=a, x=x)
    s = spf.front.semiring.BUILTINS[semiring]
    vt = spf.front.value_types.VALUE_TYPES[dtype]
    ops = {"min": np.minimum, "max": np.maximum, "lor": np.logical_or,
           "plus": np.add}
    add = {"min_plus": ops["min"], "max_plus": ops["max"], "min_times": ops["min"],
           "max_times": ops["max"], "or_and": ops["lor"], "any_pair": ops["max"]}[semiring]
    mul = {"min_plus": np.add, "max_plus": np.add, "min_times": np.multiply,
           "max_times": np.multiply, "or_and": np.logical_and,
           "any_pair": lambda p, q: np.ones((), bool)}[semiring]
    with np.errstate(over="ignore"):
        want = _semiring_reference(m.toarray(), x, add, mul, vt.value_of(s.zero))
    _close(y, want, dtype)


def test_semiring_laws_are_proven_in_the_integer_type():
    """An add that is associative over the reals but not in wrapping int32 arithmetic is
    refused on int32 (Z3 over bit-vectors), and still accepted on float64."""
    odd = spf.Semiring(add="(a * 2 + b * 2) / 2", mul="a * b", zero=0, one=1)
    assert odd.reorderable                      # over the reals: it is a + b
    spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=odd)
    with pytest.raises(spf.SpecError, match=r"is not defined for int32 values .*: add='\(a \* 2 "
                                            r"\+ b \* 2\) / 2' is associative over the reals "
                                            "but not in 32-bit integers"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=odd, dtype="int32")
    with pytest.raises(spf.SpecError, match="on bool the semirings are plus_times, or_and"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus", dtype="bool")
    src = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus",
                     dtype="int64").c_source()
    assert "#define SPF_POS_INF INT64_MAX" in src
    assert_compiles_clean(src)
