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


@pytest.mark.parametrize("ta,tx", [("uint32", "int32"), ("int64", "float32"),
                                   ("uint16", "uint16"), ("int8", "uint8"),
                                   ("complex64", "float64"), ("bool", "int16")])
def test_mixed_products_are_computed_in_numpys_promotion(ta, tx):
    """C promotes differently from numpy (uint32 * int32 is unsigned, int64 * float is
    float, uint16 * uint16 is signed int and overflows): each factor is cast first."""
    rng = np.random.default_rng(3)
    dense = np.zeros((5, 4), ta)
    if np.dtype(ta).kind == "b":
        dense[rng.random((5, 4)) < 0.5] = True
    else:
        dense[:] = rng.integers(1, 60000 if ta in ("uint32", "uint16", "int64", "complex64")
                                else 100, (5, 4)).astype(ta)
        dense[2] = 0
        if ta == "int64":
            dense[dense != 0] += 2 ** 40        # not exact in float32
    x = (rng.integers(-3, 3, 4) if np.dtype(tx).kind in "if" else
         rng.integers(50000, 65535, 4) if tx == "uint16" else rng.integers(1, 255, 4)).astype(tx)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=spf.Tensor.from_dense("CSR", dense), x=x)
    want = dense @ x
    assert y.dtype == want.dtype
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(y, want, rtol=1e-12)
    else:
        np.testing.assert_array_equal(y, want)


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
    src = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus",
                     dtype="int64").c_source()
    assert "#define SPF_POS_INF INT64_MAX" in src
    assert_compiles_clean(src)


def test_user_semirings_on_bool_are_proven_in_cs_bool():
    """On bool a user's semiring is proven in C's _Bool arithmetic (Z3 over 0 and 1, any
    nonzero result true): parity (a + b - 2ab) is xor there and runs; a zero that is true
    on bool but not add's identity, and a division, are refused with the reason."""
    parity = spf.Semiring(add="a + b - 2*a*b", mul="a * b", zero=0, one=1, name="parity")
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=parity, dtype="bool")
    rng = np.random.default_rng(4)
    dense = rng.random((9, 6)) < 0.5
    dense[3] = False
    x = rng.random(6) < 0.7
    y = k.compile()(A=spf.Tensor.from_dense("CSR", dense), x=x)
    np.testing.assert_array_equal(y, (dense & x).sum(axis=1) % 2 == 1)
    land = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus",
                      dtype="bool").compile()       # and-or: the zero (inf) is true
    got = land(A=spf.Tensor.from_dense("CSR", dense), x=x)
    want = np.array([all(dense[i, j] or x[j] for j in np.flatnonzero(dense[i]))
                     for i in range(9)])
    np.testing.assert_array_equal(got, want)
    shifted = spf.Semiring(add="max(a, b)", mul="a * b", zero=-5, one=1, name="shifted")
    spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=shifted)     # reals: fine
    with pytest.raises(spf.SpecError, match=r"semiring=shifted is not defined for bool values "
                                            r"\(the output 'y'\): add='max\(a, b\)' has not "
                                            r"zero=-5.0 \(true when nonzero\) as its identity "
                                            r"on bool \(C's _Bool\) \(Z3 found a = 0\)"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=shifted, dtype="bool")
    ratio = spf.Semiring(add="max(a, b)", mul="a / b", zero=0, one=1, name="ratio")
    with pytest.raises(spf.SpecError, match="division is not defined on bool"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, semiring=ratio, dtype="bool")


def test_complex_scalars_in_and_out():
    """Complex scalar operands (passed by pointer) and outputs, in products and sums."""
    z = np.array([[1 + 1j, 2, 0], [0, 0, 0], [0, 3j, -1]])
    a = spf.Tensor.from_dense("CSR", z)
    x = np.array([1, 2 - 1j, 0.5])
    y = spf.evaluate("y(i) = a * A(i,j) * x(j)", a=2 - 1j, A=a, x=x)
    np.testing.assert_allclose(y, (2 - 1j) * (z @ x))
    s = spf.evaluate("s = a * A(i,j) * B(i,j) + c", a=1j, A=a, B=a, c=1 + 1j)
    assert isinstance(s, np.complex128)
    np.testing.assert_allclose(s, 1j * (z * z).sum() + 1 + 1j)
    f = spf.evaluate("s = a * x(i)", a=np.complex64(1j), x=np.ones(3, np.complex64))
    assert f.dtype == np.complex64 and f == 3j
    c = spf.Kernel("C(i,j) = a * A(i,j)", {"A": "CSR", "C": "CSR"}, dtype="complex128")
    np.testing.assert_allclose(c.compile()(a=2j, A=a).to_dense(), 2j * z)


def test_scalars_keep_their_own_type_in_a_sum():
    """A sum's kernel declares each scalar in its own type (an int32 scalar among float64
    tensors was declared double: the call crashed)."""
    a = spf.Tensor.from_dense("CSR", np.array([[1.0, 2], [0, 3]]))
    k = spf.Kernel("y(i) = s * A(i,j) * x(j) + b(i)", {"A": "CSR"}, dtype={"s": "int32"})
    assert "int32_t s," in k.c_source()
    y = k.compile()(s=np.int32(3), A=a, x=np.ones(2), b=np.ones(2))
    np.testing.assert_allclose(y, 3 * (a.to_dense() @ np.ones(2)) + 1)


@pytest.mark.parametrize("mask_type", ["bool", "int32", "float64"])
@pytest.mark.parametrize("complement", [False, True])
def test_masks_of_any_type_on_typed_kernels(mask_type, complement):
    """A mask's values are not read: a bool, integer or float mask restricts a float32
    kernel alike (evaluate and Kernel)."""
    m = _matrix((12, 9), "float32", seed=5)
    x = np.arange(1, 10, dtype=np.float32)
    hit = np.zeros(12, bool)
    hit[[0, 3, 5]] = True
    mask = spf.Tensor.from_coords("SV", (12,), [np.array([0, 3, 5])], np.ones(3, mask_type))
    want = np.where(hit != complement, m @ x, 0).astype(np.float32)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR", "m": "SV"}, mask={"y": "m"},
                   complement=complement, dtype={"A": "float32", "x": "float32",
                                                 "m": mask_type})
    got = k.compile()(A=spf.Tensor.from_scipy("CSR", m), x=x, m=mask)
    _close(got, want, "float32")
    got = spf.evaluate("y(i) = A(i,j) * x(j)", A=m, x=x, m=mask, mask={"y": "m"},
                       complement=complement)
    _close(got, want, "float32")


@pytest.mark.parametrize("dtype", ["float32", "int64", "complex128"])
def test_pydata_and_scipy_operands_keep_their_type_without_copies(dtype):
    sparse = pytest.importorskip("sparse")
    from spf.runtime.operands import as_tensor
    rng = np.random.default_rng(6)
    t = sparse.random((6, 5, 7), density=0.25, random_state=0)
    t = sparse.COO(t.coords, _values(rng, t.nnz, dtype), shape=t.shape)
    mat = _values(rng, 21, dtype).reshape(7, 3)
    want = np.einsum("ijk,kr->ijr", t.todense(), mat)
    for layout in ("COO3", "CSF"):
        got = spf.evaluate("Y(i,j,r) = T(i,j,k) * M(k,r)", T=t, M=mat, layouts={"T": layout})
        _close(got, want, dtype)
    held = as_tensor("T", t, spf.load_layout("COO3", "int64").with_value_type(
        spf.front.value_types.VALUE_TYPES[dtype]))
    assert np.shares_memory(held["data"], t.data)              # zero-copy: same dtype
    m = _matrix((7, 6), dtype, seed=2)
    csr = as_tensor("A", m, spf.load_layout("CSR").with_value_type(
        spf.front.value_types.VALUE_TYPES[dtype]))
    assert np.shares_memory(csr["data"], m.data)


def test_a_converted_operand_keeps_its_padding_known():
    """An int32 BCSR tensor converted for a float64 kernel still knows its padding: under
    min_plus, and as a mask, padded slots would be entries, so it is refused (it was read
    as 62 edges of weight 0)."""
    d = np.zeros((8, 8), np.int32)
    d[0, 0], d[3, 5] = 1, 2
    padded = spf.Tensor.from_dense("BCSR", d)
    assert padded.padding() == 62
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "BCSR"}, semiring="min_plus").compile()
    with pytest.raises(spf.ArgumentError, match="'A': this BCSR tensor stores 62 padding"):
        k(A=padded, x=np.ones(8))
    dense = spf.Tensor.from_dense("CSR", d.astype(float))
    m = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "m": "BCSR"},
                   mask={"C": "m"}, complement=True).compile()
    with pytest.raises(spf.ArgumentError, match="'m': this BCSR tensor stores 62 padding"):
        m(A=dense, B=dense, m=padded)


@pytest.mark.parametrize("dtype", ["int16", "uint8", "float32"])
@pytest.mark.parametrize("layout", ["CSR", "COO"])
def test_fill_values_in_the_type(dtype, layout):
    """fill_values=True: absent entries are the semiring's zero in the kernel's type and
    take part (mul = a + b, which zero does not annihilate); uint8 sums wrap as numpy's."""
    plus_plus = spf.Semiring(add="a + b", mul="a + b", zero=0, one=0)
    m = _matrix((7, 5), dtype, seed=3)
    x = _values(np.random.default_rng(4), 5, dtype)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": layout}, semiring=plus_plus,
                   fill_values=True, dtype=dtype)
    got = k.compile()(A=spf.Tensor.from_scipy(layout, m), x=x)
    with np.errstate(over="ignore"):
        want = (m.toarray() + x[None, :]).sum(axis=1, dtype=dtype)
    _close(got, want, dtype)


# -- a sum's minus is numpy's in the sum's type --------------------------------------------
_SUB_OPS = {"A": np.array([-128, 5, 100], np.int8), "D": np.array([1, 1, 1], np.int32),
            "B": np.array([100, 3, 2], np.int8), "u": np.array([3, 5, 0], np.uint8),
            "f": np.array([1.0, 1.0, 2.0]), "U": np.array([2 ** 63, 5, 0], np.uint64)}


@pytest.mark.parametrize("rhs", [
    "D(i) - A(i)", "-A(i) + D(i)", "D(i) - (-A(i))", "-(D(i) - A(i))", "(D(i) - A(i))*B(i)",
    "(-(D(i) - A(i)))*B(i)", "f(i) - u(i)", "f(i) - U(i)", "D(i) - A(i)*B(i)",
    "f(i) - (u(i) - f(i))"])
def test_a_subtraction_negates_in_the_sums_type(rhs):
    """A binary minus (or the minus of a sum) negates in the sum's type, a unary minus in
    the term's own (int8 -128 subtracted from an int32 is +128 there; a uint8 subtracted
    from a float is negative), and a product of a sum takes the sum's type."""
    ops = {k: v for k, v in _SUB_OPS.items() if f"{k}(" in rhs}
    ref = eval(rhs.replace("(i)", ""), {}, ops)
    got = spf.evaluate(f"y(i) = {rhs}", **ops)
    assert got.dtype == ref.dtype and np.array_equal(got, ref), (got, ref)


@pytest.mark.parametrize("rhs,ref", [
    ("D(i,j) - A(i,j)", lambda d, a, f, u: d - a),
    ("D(i,j) - (-A(i,j))", lambda d, a, f, u: d - (-a)),
    ("-A(i,j) + D(i,j)", lambda d, a, f, u: -a + d),
    ("F(i,j) - u(i,j)", lambda d, a, f, u: f - u)])
def test_a_sparse_union_subtracts_in_the_sums_type(rhs, ref):
    """The merge of two operands' storage into a CSR output subtracts as numpy does."""
    d = np.array([[1, 0, 3], [0, 0, 1], [2, 2, 0]], np.int32)
    a = np.array([[-128, 0, 0], [5, 0, 1], [0, -128, 0]], np.int8)
    f = np.array([[1.0, 0, 0], [0, 0, 2], [0, 1, 0]])
    u = np.array([[3, 0, 0], [0, 7, 0], [0, 0, 1]], np.uint8)
    ops = {"D": sp.csr_matrix(d), "A": sp.csr_matrix(a), "F": sp.csr_matrix(f),
           "u": sp.csr_matrix(u)}
    ops = {k: v for k, v in ops.items() if f"{k}(" in rhs}
    out = spf.evaluate(f"C(i,j) = {rhs}", layouts={"C": "CSR"}, **ops).to_dense()
    want = ref(d, a, f, u)
    assert out.dtype == want.dtype and np.array_equal(out, want), (out, want)
