"""Issue 52, the expression language and value types: every value follows numpy on the dense
arrays (integer pow, literals beyond int64, NaN through sign, division by zero, inf and nan
literals, complex comparisons, bool outputs), and what numpy refuses is an spf error at its
line and column, never a trap of the generated C.

Each expression is one kernel, kept by ``spf.evaluate`` for the process: the cases of a test
run through it with several arrays."""
from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.front import index_expr as ie

EYE = sp.csr_matrix(np.eye(2))
SPECIAL = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 2.5, -3.0, 1.0])


def _same(got, want) -> None:
    """Equal values (NaN equal to NaN) of the same dtype."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


# integer pow (items 2 and 18) -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64", "uint64"])
def test_integer_pow_is_exact_and_wraps_as_numpy(dtype):
    """pow of integers went through C's double pow: 3037000499**2 was off by 41 and 3**41
    was INT64_MIN; numpy computes it exactly, wrapping in the type."""
    info = np.iinfo(dtype)
    x = np.array([3, 7, 0, 1, int(info.max), int(info.min), 2, 3037000499 % int(info.max)],
                 dtype)
    k = np.array([41, 5, 0, 60, 2, 3, 63, 2], dtype)
    with np.errstate(over="ignore"):
        want = np.power(x, k)
    _same(spf.evaluate("y(i) = pow(x(i), k(i))", x=x, k=k), want)


def test_integer_pow_by_a_literal():
    _same(spf.evaluate("y(i) = pow(x(i), 2)", x=np.array([3037000499, -5])),
          np.power(np.array([3037000499, -5]), 2))
    _same(spf.evaluate("y(i) = pow(x(i), 41)", x=np.array([3, -3])),
          np.power(np.array([3, -3]), 41))
    _same(spf.evaluate("y(i) = pow(x(i), 3)", x=np.array([7, -100], np.int8)),
          np.power(np.array([7, -100], np.int8), 3))


def test_integer_pow_to_a_negative_power_is_an_spf_error():
    """numpy refuses an integer to a negative integer power (ValueError); spf raised
    numpy's raw ValueError for a literal exponent."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:8: pow(x(i), -1): numpy refuses it on int64 values (ValueError: "
            "Integers to negative integer powers are not allowed.)")):
        spf.evaluate("y(i) = pow(x(i), -1)", x=np.array([3]))
    with pytest.raises(spf.ArgumentError, match="an integer was raised to a negative integer "
                       "power"):       # known at run time only: the kernel counts it
        spf.evaluate("y(i) = pow(x(i), k(i))", x=np.array([3, 2]), k=np.array([2, -1]))
    with np.errstate(divide="ignore"):          # floats: numpy's 0.25 and inf
        _same(spf.evaluate("y(i) = pow(x(i), -1)", x=np.array([4.0, 0.0])),
              np.power(np.array([4.0, 0.0]), -1))


# literals beyond int64 (item 3) ---------------------------------------------------------

def test_integer_literals_beyond_int64_are_numpys():
    """``99999999999999999999999`` was truncated to 2.0e17 by C; next to a float array
    numpy makes it the float 1e23, next to an int64 array it raises OverflowError."""
    x = np.array([1.0, -3.5])
    _same(spf.evaluate("y(i) = x(i) * 99999999999999999999999", x=x),
          x * 99999999999999999999999)
    _same(spf.evaluate("y(i) = exp(x(i) / 99999999999999999999999)", x=x),
          np.exp(x / 99999999999999999999999))
    _same(spf.evaluate("y(i) = x(i) / 99999999999999999999999", x=np.array([1, 7])),
          np.array([1, 7]) / 99999999999999999999999)
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:13: x(i) * 99999999999999999999999: the integer 99999999999999999999999 "
            "does not fit int64")):
        spf.evaluate("y(i) = x(i) * 99999999999999999999999", x=np.array([1]))
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:17: x(i) + 300: the integer 300 does not fit int8")):
        spf.evaluate("y(i) = abs(x(i) + 300)", x=np.array([1], np.int8))
    u = np.array([1, 2, 3], np.uint64)
    _same(spf.evaluate("y(i) = x(i) * 18446744073709551615", x=u), u * 18446744073709551615)


def test_comparisons_with_literals_beyond_the_type_are_numpys():
    """numpy 2 compares an int8 with 300 exactly (true for <); a bool with 2 in int64."""
    b = np.array([1, -128, 127], np.int8)
    _same(spf.evaluate("y(i) = where(b(i) < 300, 1, 0)", b=b), np.where(b < 300, 1, 0))
    t = np.array([True, False])
    _same(spf.evaluate("y(i) = where(t(i) < 2, 1, 0)", t=t), np.where(t < 2, 1, 0))


# NaN, inf and -0.0 through the functions (item 4) -----------------------------------------

@pytest.mark.parametrize("expr, ref", [
    ("y(i) = sign(x(i))", lambda x, w: np.sign(x)),
    ("y(i) = max(x(i), w(i))", np.maximum),
    ("y(i) = min(x(i), w(i))", np.minimum),
    ("y(i) = where(x(i), w(i), 7)", lambda x, w: np.where(x, w, 7)),
    ("y(i) = abs(x(i)) + (x(i) > w(i))", lambda x, w: np.abs(x) + (x > w)),
])
def test_special_values_as_numpy(expr, ref):
    """sign(NaN) was 0; numpy's is NaN. max and min propagate NaN, where takes NaN as true,
    comparisons with NaN are false, as numpy's."""
    x, w = SPECIAL, SPECIAL[::-1].copy()
    with np.errstate(invalid="ignore"):
        given = {k: v for k, v in {"x": x, "w": w}.items() if f"{k}(i)" in expr}
        _same(spf.evaluate(expr, **given), ref(x, w))


def test_a_float_condition_of_an_integer_where_is_its_truth():
    """where(0.5, 1, 2) was 2: the condition was cast to the integer result type (0)."""
    f = np.array([0.5, 0.0, np.nan, -np.inf])
    _same(spf.evaluate("y(i) = where(f(i), 1, 2)", f=f), np.where(f, 1, 2))


def test_narrow_integer_arithmetic_wraps_in_its_type():
    """C computes uint16 * uint16 and -uint16 in int: sqrt(u * v) saw 20000 where numpy
    wraps to its type first."""
    u, v = np.array([5, 300], np.uint16), np.array([3, 1000], np.uint16)
    _same(spf.evaluate("y(i) = sqrt(u(i) * v(i))", u=u, v=v), np.sqrt(u * v))
    _same(spf.evaluate("y(i) = sqrt(-u(i))", u=u), np.sqrt(-u))
    a, b = np.array([100, -100], np.int8), np.array([100, -100], np.int8)
    _same(spf.evaluate("y(i) = abs(a(i) + b(i))", a=a, b=b), np.abs(a + b))


def test_float32_literals_compute_in_float32():
    f = np.float32([3.3, 7.1, 1e-3, 123.456, 16777217])
    _same(spf.evaluate("y(i) = abs(f(i) * 0.1)", f=f), np.abs(f * 0.1))
    _same(spf.evaluate("y(i) = f(i) * 0.1", f=f), f * np.float32(0.1))


def test_operators_numpy_refuses_are_spf_errors():
    t = np.array([True])
    with pytest.raises(spf.SpecError, match=re.escape("<string>:1:17: b(i) - c(i): numpy "
                                                      "refuses it on bool values")):
        spf.evaluate("y(i) = abs(b(i) - c(i))", b=t, c=t)
    with pytest.raises(spf.SpecError, match=re.escape("<string>:1:8: sign(b(i)): numpy "
                                                      "refuses it on bool values")):
        spf.evaluate("y(i) = sign(b(i))", b=t)


# traps: division by zero (item 12, what to build 3) -------------------------------------

def test_division_by_a_literal_zero_is_numpys_not_a_trap():
    """An integer 1 / 0 inside a function or where killed the process (SIGILL); numpy's
    true division gives inf, and 7 / 2 is 3.5 (C's integer division gave 3)."""
    d = np.eye(2)
    _same(spf.evaluate("y(i) = max(A(i,j), 1 / 0)", A=EYE), np.maximum(d, np.inf).sum(1))
    _same(spf.evaluate("C(i,j) = where(B(i,j) == 0, 1/0, B(i,j))", B=EYE,
                       layouts={"C": "DenseMatrix"}), np.where(d == 0, np.inf, d))
    x = np.array([1.0, -2.0, 0.0, np.nan])
    _same(spf.evaluate("y(i) = max(x(i), 7 / 2)", x=x), np.maximum(x, 7 / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        _same(spf.evaluate("y(i) = A(i,j) * (1/0)", A=EYE), (d * np.inf).sum(1))
        _same(spf.evaluate("y(i) = x(i) / 0", x=np.array([1, -2, 0])),
              np.array([1, -2, 0]) / 0)
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:26: division of a sum of products by zero")):
        spf.evaluate("y(i) = (A(i,j) + B(i,j)) / 0", A=EYE, B=EYE)


def test_integer_division_in_a_semiring_does_not_trap():
    """A semiring dividing integers raised SIGFPE on a zero divisor; it now gives numpy's
    0 for x / 0 and wraps INT64_MIN / -1."""
    div = spf.Semiring(add="a + b", mul="a / b", zero=0, one=1)
    k = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype="int64", semiring=div)
    low = np.iinfo(np.int64).min
    a = sp.csr_matrix(np.array([[4, 2], [9, low], [7, 0]], np.int64))
    y = k.compile()(A=spf.Tensor.from_scipy("CSR", a), x=np.array([0, -1]))
    assert list(y) == [0 + -2, 0 + low, 0]     # 4 / 0 + 2 / -1, 9 / 0 + MIN / -1, 7 / 0


def test_a_divisor_read_at_run_time_in_an_index_expression_is_guarded():
    assert ie.to_c(ie.parse_index_expr("n / m"), str, lambda n, a: n) == "(m ? n / m : 0)"
    assert ie.to_c(ie.parse_index_expr("n / 2"), str, lambda n, a: n) == "(n / 2)"


def test_an_output_type_numpy_cannot_cast_into_is_refused():
    """A float product into an int64 output converted NaN to INT64_MIN in C (undefined);
    numpy's same_kind casting refuses it."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "dtype: the output 'y' is int64, and numpy computes 'A(i,j) * x(j)' in float64")):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, dtype={"y": "int64"})


# inf and nan (item 20) ------------------------------------------------------------------

def test_inf_and_nan_are_literals():
    d = np.eye(2)
    with np.errstate(invalid="ignore"):
        _same(spf.evaluate("y(i) = A(i,j) * inf", A=EYE), (d * np.inf).sum(1))
    x = np.array([1.0, -np.inf])
    _same(spf.evaluate("y(i) = max(x(i), nan)", x=x), np.maximum(x, np.nan))
    _same(spf.evaluate("y(i) = x(i) - inf", x=np.array([1.0])), np.array([-np.inf]))
    _same(spf.evaluate("y(i) = A(i,j) * x(j) + inf", A=EYE, x=np.ones(2)),
          d @ np.ones(2) + np.inf)
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:8: 'inf' is the number inf (numpy's np.inf), not a tensor")):
        spf.evaluate("y(i) = inf(i)", x=np.ones(2))
    with pytest.raises(spf.SpecError, match="name 'nan' is reserved: it is the number nan"):
        spf.evaluate("nan(i) = x(i)", x=np.ones(2))


# complex values and bool outputs (items 17 and 20) ----------------------------------------

@pytest.mark.parametrize("op, ref", [(">", np.greater), ("<=", np.less_equal),
                                     ("!=", np.not_equal)])
def test_complex_comparisons_order_as_numpy(op, ref):
    """A comparison of complex values printed C that did not compile; numpy orders them
    by real parts, then imaginary parts (a NaN part compares false)."""
    z = np.array([1 + 1j, 1 + np.nan * 1j, np.nan + 1j, 1 - 1j, 0j, 2 + 0j, -1 + 5j])
    with np.errstate(invalid="ignore"):
        _same(spf.evaluate(f"y(i) = z(i) {op} w(i)", z=z, w=z[::-1].copy()), ref(z, z[::-1]))
        _same(spf.evaluate(f"y(i) = z(i) {op} 1", z=z), ref(z, 1))


def test_complex_operands_read_densely_keep_their_type():
    a = EYE * (1 + 1j)
    _same(spf.evaluate("y(i) = exp(A(i,j)) * x(j)", A=a, x=np.ones(2)),
          np.exp(a.toarray()) @ np.ones(2))
    big = sp.csr_matrix(np.array([[2 ** 60 + 1, 0]]))      # int64 beyond 2**53: exact
    _same(spf.evaluate("y(i) = where(A(i,j) > 0, A(i,j), 1) * x(j)", A=big,
                       x=np.array([1, 1])), np.array([2 ** 60 + 2]))


def test_a_sum_reading_an_operand_densely_and_by_entries_keeps_its_type():
    """A sum's term reads a tensor again under an alias, and the term's dtype named the alias:
    the dense complex copy was declared double (a complex128 A gave garbage)."""
    for a, x in ((sp.csr_matrix(np.array([[1 + 1j, 0], [0, 2]])), np.array([1 + 0j, 2])),
                 (sp.csr_matrix(np.array([[2 ** 60 + 1, 0], [0, 2]])), np.array([1, 2]))):
        d = a.toarray()
        _same(spf.evaluate("y(i) = where(A(i,j) > 1, A(i,j), 3) * x(j) + A(i,j) * x(j)",
                           A=a, x=x), np.where(d > 1, d, 3) @ x + d @ x)


def test_python_scalars_promote_weakly_as_numpy():
    """The complex-scalar example of docs/value-types.md was refused ('a' is a scalar; got
    complex); numpy's ``(2 - 1j) * A`` is complex128, ``2.5 * x`` float64 for int64 x."""
    got = spf.evaluate("s = a * A(i,j) * B(i,j)", a=2 - 1j, A=EYE, B=EYE)
    _same(got, np.complex128((2 - 1j) * 2))
    _same(spf.evaluate("s = a * x(i)", a=2.5, x=np.array([1, 2])), np.float64(7.5))


def test_a_bool_scalar_output_is_einsums():
    """``s = x(i) > 0`` was refused ('s' = 0 does not convert to bool); a sum of bools into
    a bool is numpy's einsum (any); ask for int64 to count, as np.sum does."""
    for x in (np.array([1.0, -1.0, 2.0]), np.array([-1.0, -2.0]), np.zeros(0)):
        _same(spf.evaluate("s = x(i) > 0", x=x), np.einsum("i->", x > 0))
    count = spf.Kernel("s = x(i) > 0", {}, dtype={"s": "int64"}).compile()
    _same(count(x=np.array([1.0, -1.0, 2.0])), np.int64(2))


def test_a_union_divided_by_an_integer_divides_exactly():
    """The merged union printed its coefficient 1/3 as C's integer division (0)."""
    a = sp.random(6, 5, density=0.4, format="csr", random_state=1)
    b = sp.random(6, 5, density=0.4, format="csr", random_state=2)
    k = spf.Kernel("C(i,j) = max(A(i,j), B(i,j)) / 3", {"A": "CSR", "B": "CSR", "C": "CSR"})
    assert not k.read_densely and "union" in k.report()
    c = k.compile()(A=spf.Tensor.from_scipy("CSR", a), B=spf.Tensor.from_scipy("CSR", b))
    np.testing.assert_allclose(c.to_dense(), np.maximum(a.toarray(), b.toarray()) / 3)


def test_the_new_c_compiles_warning_free():
    """The integer pow, the semiring's division, complex comparisons and float literals in
    the generated C: no warning under -Wall -Wextra."""
    from conftest import assert_compiles_clean
    div = spf.Semiring(add="a + b", mul="a / b", zero=0, one=1)
    for expr, dtype, semiring in [
            ("y(i) = pow(A(i,j), 3) * x(j)", "int8", "plus_times"),
            ("y(i) = pow(A(i,j), x(j))", "uint64", "plus_times"),
            ("y(i) = A(i,j) * x(j)", "int32", div),
            ("y(i) = where(A(i,j) > 1, A(i,j), A(i,j) <= 2) * x(j)", "complex128",
             "plus_times"),
            ("y(i) = max(A(i,j) * 0.1, -inf) + nan * x(j) + 99999999999999999999999 / 7",
             "float32", "plus_times")]:
        k = spf.Kernel(expr, {"A": "CSR"}, dtype=dtype, semiring=semiring)
        assert_compiles_clean(k.c_source())


# follow-ups of issue 52 ----------------------------------------------------------------
# the status of a negative integer power is per call (1)

_NEGATIVE = re.escape("an integer was raised to a negative integer power")


@pytest.mark.parametrize("parallel", [False, True])
def test_a_negative_power_is_each_calls_own_across_threads(parallel):
    """The kernel counted negative powers in a counter its file shared, compared before and
    after a call: a thread whose powers were all fine raised the error another thread's
    call had met."""
    import threading
    n = 100_000
    x, good = np.full(n, 3, np.int64), np.ones(n, np.int64)
    bad = good.copy()
    bad[n // 2] = -1
    k = spf.Kernel("y(i) = pow(x(i), k(i))", {}, dtype="int64", parallel=parallel).compile()
    seen = {"good": 0, "bad": 0}

    def hammer(kind: str, exponents: np.ndarray) -> None:
        for _ in range(150):
            try:
                k(x=x, k=exponents)
            except spf.ArgumentError:
                seen[kind] += 1
    threads = [threading.Thread(target=hammer, args=a) for a in (("good", good), ("bad", bad))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"good": 0, "bad": 150}
    _same(k(x=x[:3], k=good[:3]), np.full(3, 3))


def _negative_power_kernels():
    """Kernels whose pow of integers runs in each kind of generated function: a sum's term,
    an assembled output with its bound (drop_zeros: the bound computes values too), a
    bucket-assembled one (its histogram pass), a union merged level by level."""
    csr = {"A": "CSR", "B": "CSR", "D": "CSR", "C": "CSR"}
    return [("sum", spf.Kernel("y(i) = pow(x(i), k(i)) + A(i,j) * x(j)", {"A": "CSR"},
                               dtype="int64")),
            ("assembled", spf.Kernel("C(i,j) = A(i,j) * pow(B(i,j), D(i,j))", csr,
                                     dtype="int64", drop_zeros=True)),
            ("bucket", spf.Kernel("C(i,j) = A(i,j) * pow(B(i,j), D(i,j))",
                                  {**csr, "A": "COO"}, dtype="int64", drop_zeros=True)),
            ("union", spf.Kernel("C(i,j) = where(A(i,j) > 0, pow(A(i,j), B(i,j)), B(i,j))",
                                 {"A": "CSR", "B": "CSR", "C": "CSR"}, dtype="int64"))]


def test_a_negative_power_is_reported_by_every_function():
    from conftest import assert_compiles_clean
    a = np.array([[2, 0], [0, 3]], np.int64)
    fine, negative = np.array([[1, 4], [0, 2]], np.int64), np.array([[1, 4], [0, -1]], np.int64)
    for what, kernel in _negative_power_kernels():
        assert_compiles_clean(kernel.c_source())
        if what == "union":
            assert "union" in kernel.report() and not kernel.read_densely
        fn = kernel.compile()
        if what == "sum":
            x = np.array([3, 2])
            _same(fn(x=x, k=np.array([2, 1]), A=sp.csr_matrix(a)), x ** [2, 1] + a @ x)
            with pytest.raises(spf.ArgumentError, match=_NEGATIVE):
                fn(x=x, k=np.array([2, -1]), A=sp.csr_matrix(a))
            continue
        if what == "union":
            args = {"A": a, "B": fine}
            want = np.where(a > 0, a ** np.where(a > 0, fine, 1), fine)
        else:
            args = {"A": a, "B": a, "D": fine}
            want = a * a ** fine
        layout = {"A": "COO" if what == "bucket" else "CSR", "B": "CSR", "D": "CSR"}
        stored = {n: spf.Tensor.from_dense(layout[n], v) for n, v in args.items()}
        np.testing.assert_array_equal(fn(**stored).to_dense(), want)
        last = "B" if what == "union" else "D"
        stored[last] = spf.Tensor.from_dense("CSR", negative)
        with pytest.raises(spf.ArgumentError, match=_NEGATIVE):
            fn(**stored)


# a sum in a value means what the broadcasting rule says (2) -----------------------------

_RNG = np.random.default_rng(52)
_D = _RNG.random((5, 4)) * (_RNG.random((5, 4)) < 0.6)
_D[2] = 0.0                                                     # an empty row
_X, _B, _C = _RNG.random(4), _RNG.random(5), _RNG.random(5) + 0.5
_C4, _B7 = _RNG.random(4) + 0.5, sp.random(5, 7, density=0.5, format="csr", random_state=3)


@pytest.mark.parametrize("expr, want", [
    ("y(i) = (A(i,j)*x(j) + b(i)) / c(i)", (_D @ _X + _B) / _C),
    ("y(i) = (b(i) - A(i,j)*x(j)) / c(i)", (_B - _D @ _X) / _C),
    ("y(i) = -(A(i,j)*x(j) + b(i)) / c(i) / c(i)", -(_D @ _X + _B) / _C / _C),
    ("y(i) = 2 * ((A(i,j)*x(j) + 1) / c(i))", 2 * (_D @ _X + 1) / _C),
    ("y(i) = (A(i,j)*x(j) + b(i)) / e(j)", (_D / _C4) @ _X + _B * np.sum(1 / _C4)),
    ("y(i) = (A(i,j) + B(i,k)) / c(i)", (_D.sum(1) + _B7.toarray().sum(1)) / _C),
    ("y(i) = A(i,j) + 1", _D.sum(1) + 1),
    ("y(i) = (A(i,j) + 1) * 2", 2 * _D.sum(1) + 2),
    ("y(i) = exp(A(i,j)) - 1", np.exp(_D).sum(1) - 1),
    ("y(i) = (A(i,j) - 3) * x(j)", (_D - 3) @ _X),
    ("y(i) = (cos(A(i,j)) - 1) * x(j)", (np.cos(_D) - 1) @ _X),
    ("y(i) = exp(A(i,j) + b(i)) * x(j)", np.exp(_D + _B[:, None]) @ _X),
    ("y(i) = abs(A(i,j) - b(i)) / x(j)", (np.abs(_D - _B[:, None]) / _X).sum(1)),
    ("s = (b(i) + 1) / 2", _B.sum() / 2 + 0.5),
    ("C(i,j) = (A(i,j) + b(i)) / e(j)", (_D + _B[:, None]) / _C4),
])
def test_a_sum_in_a_value_is_summed_term_by_term(expr, want):
    """``(A(i,j)*x(j) + b(i)) / c(i)`` was one value summed over j, b(i) with it: [3, 3]
    where numpy's (A @ x + b) / c is [2, 2]; ``A(i,j) + 1`` added 1 once per j."""
    operands = {"A": sp.csr_matrix(_D), "x": _X, "b": _B, "c": _C, "e": _C4, "B": _B7}
    got = spf.evaluate(expr, **{n: v for n, v in operands.items() if f"{n}(" in expr})
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_brief_example_of_a_sum_divided():
    got = spf.evaluate("y(i) = (A(i,j)*x(j) + b(i)) / c(i)", A=sp.csr_matrix(np.ones((2, 3))),
                       x=np.ones(3), b=np.ones(2), c=np.full(2, 2.0))
    _same(got, np.array([2.0, 2.0]))


@pytest.mark.parametrize("expr, where, index", [
    ("y(i) = exp(A(i,j)*x(j) + b(i))", "inside exp((A(i,j) * x(j)) + b(i))", "j"),
    ("y(i) = abs(A(i,j) - 5)", "inside abs(A(i,j) - 5)", "j"),
    ("y(i) = x(i) / (A(i,j) + b(i))", "inside x(i) / (A(i,j) + b(i))", "j"),
    ("y(i) = (A(i,j) + b(i) > 0) * 2", "inside (A(i,j) + b(i)) > 0", "j"),
    ("s = sqrt(b(i) + 1)", "inside sqrt(b(i) + 1)", "i"),
])
def test_a_sum_inside_a_function_with_a_summed_index_is_refused(expr, where, index):
    """Whether the sum over the index is inside the function or outside it is ambiguous:
    refused at the sum, never one of them silently."""
    operands = {"A": sp.csr_matrix(_D), "x": _X if "x(j)" in expr else _B, "b": _B}
    with pytest.raises(spf.SpecError, match=re.escape(where) + ".*" + re.escape(
            f"and nothing else in the product reads {index!r}, so whether {index!r} is "
            "summed inside")):
        spf.evaluate(expr, **{n: v for n, v in operands.items() if f"{n}(" in expr})


# -0.0 in a dense copy (3), absent entries annihilate (4) ---------------------------------

def test_a_dense_copy_keeps_negative_zero():
    """A dense output was zeroed and added into: -0.0 came back 0.0 (numpy's copy keeps
    it); an element each point writes once is now stored."""
    x = np.array([-0.0, 1.5, -0.0, 0.0])
    for expr, want in [("y(i) = x(i)", x), ("y(i) = -x(i)", -x), ("y(i) = x(i) * 2", x * 2)]:
        for parallel in (False, True):
            got = spf.evaluate(expr, x=x, parallel=parallel)
            _same(np.signbit(got), np.signbit(want))
            _same(got, want)
    d = np.array([[-0.0, 2.0], [3.0, -0.0]])
    _same(np.signbit(spf.evaluate("C(i,j) = A(i,j) * w(j)", A=d, w=np.ones(2))),
          np.signbit(d))
    out = np.full(4, 7.0)                 # a passed output: every element written
    _same(spf.evaluate("y(i) = x(i)", x=x, out=out), x)
    _same(spf.evaluate("y(i) = x(i)", x=np.zeros(0)), np.zeros(0))


def test_a_product_over_stored_entries_treats_absent_times_nan_as_zero():
    """The structural convention (scipy.sparse, TACO, GraphBLAS), as documented: both
    factors are 0 where their operand stores nothing, so the product iterates the common
    entries and sqrt(0) * sqrt(-1) never happens; numpy on the dense arrays gives nan."""
    a = sp.csr_matrix(np.array([[4.0, 0.0]]))
    b = sp.csr_matrix(np.array([[1.0, -1.0]]))
    _same(spf.evaluate("y(i) = sqrt(A(i,j)) * sqrt(B(i,j)) * x(j)", A=a, B=b, x=np.ones(2)),
          np.array([2.0]))
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.sqrt(a.toarray()) * np.sqrt(b.toarray()) @ np.ones(2)).all()


# padding read densely where it reads as 0 (5) ------------------------------------------

@pytest.mark.parametrize("layout", ["BCSR", "DIA", "ELL", "LowerTri"])
def test_padding_read_densely_is_not_refused_under_plus_times(layout):
    """exp(A(i,j)) of a padded tensor was refused ("its padding would read as entries");
    its padding holds 0.0, which is what it holds where it stores nothing."""
    d = np.array([[1.0, 0, 0, 2], [0, 0, 0, 0], [3, 4, 5, 0], [0, 0, 0, -1]])
    d = np.tril(d) if layout == "LowerTri" else d
    a = spf.Tensor.from_dense(layout, d)
    x = np.arange(1.0, 5.0)
    np.testing.assert_allclose(spf.evaluate("y(i) = exp(A(i,j)) * x(j)", A=a, x=x),
                               np.exp(d) @ x)
    np.testing.assert_allclose(
        spf.evaluate("y(i) = A(i,j) * x(j) + cos(A(i,j)) * x(j)", A=a, x=x),
        (d + np.cos(d)) @ x)
    if a.padding():          # a fill other than 0: the padding is not the fill, refused
        with pytest.raises(spf.ArgumentError, match=re.escape(
                "its padding would read as entries, not as 2.0")):
            spf.evaluate("y(i) = exp(A(i,j)) * x(j)", A=a.with_fill(2.0), x=x,
                         fill_values=True)


# round 2 of issue 52: the value language ------------------------------------------------
# a number term is added into every element, also where index arithmetic reads nothing

_X4 = np.arange(1.0, 5.0)


@pytest.mark.parametrize("expr, out, want", [
    ("y(i) = x(i+1) - 3", np.zeros(4), [-1.0, 0.0, 1.0, -3.0]),
    ("y(i) = x(i+1) - 3", None, [-1.0, 0.0, 1.0]),
    ("y(i) = x(i+1) - 3", np.zeros(6), [-1.0, 0.0, 1.0, -3.0, -3.0, -3.0]),
    ("y(i) = (x(i+1) - 3) * 2", np.zeros(4), [-2.0, 0.0, 2.0, -6.0]),
    ("y(i) = x(i-1) - 3", None, [-3.0, -2.0, -1.0, 0.0, 1.0]),
    ("y(i) = x(i) + (x(i+1) - 3)", None, [0.0, 2.0, 4.0, 1.0]),
    ("y(i) = (x(i+1) - 3) * x(i)", None, [-1.0, 0.0, 3.0, -12.0]),
    ("y(i) = abs(x(i+1) - 3)", np.zeros(4), [1.0, 0.0, 1.0, 0.0]),    # a function: no term
])
def test_a_number_term_is_added_into_every_element(expr, out, want):
    """``y(i) = x(i+1) - 3`` was one value, x(i+1) - 3, computed only where x(i+1) lies in
    x: the last element of a 4-long output stayed 0, numpy's broadcasting gives -3 there."""
    x = spf.Tensor.from_dense("SV", _X4) if "*" in expr else _X4
    _same(spf.evaluate(expr, x=x, out=out), np.array(want))


# a product subtracted whose type is bool (a negated sum of a truth and numbers)

def test_a_truth_subtracted_in_an_unsigned_sum_keeps_its_sign():
    """``-((not F(k)) + F(k)*F(k))`` of uint32 dropped the sign of the bool term (a bool
    product was never negated): 4294967282, numpy's 4294967278."""
    f = np.array([0, 4, 0], np.uint32)
    want = np.negative(np.logical_not(f) + f * f).sum(dtype=np.uint32)
    _same(spf.evaluate("R = -((not F(k)) + F(k)*F(k))", F=f), want)
    u, b = np.array([0, 5, 200], np.uint8), np.array([1.0, 0.0, 2.0])
    _same(spf.evaluate("y(i) = u(i) - (not b(i))", u=u, b=b), u - np.logical_not(b))
    _same(spf.evaluate("y(i) = u(i) - (b(i) > 1)", u=u, b=b), u - (b > 1))


@pytest.mark.parametrize("expr, at, message", [
    ("R = -x(j)", "1:5: -x(j)", "numpy refuses it on bool values (TypeError: The numpy "
     "boolean negative, the `-` operator, is not supported"),
    ("y(i) = x(i) - x(i)", "1:13: x(i) - x(i)", "numpy refuses it on bool values (TypeError: "
     "numpy boolean subtract, the `-` operator, is not supported"),
    ("y(i) = -(not x(i)) + x(i) * 2", "1:8: -(not x(i))", "numpy refuses it on bool values"),
])
def test_what_numpy_refuses_as_written_is_an_spf_error(expr, at, message):
    """``-x(j)`` and ``x(i) - x(i)`` of booleans computed (the sign of a bool product was
    dropped); numpy raises TypeError."""
    with pytest.raises(spf.SpecError, match=re.escape(f"<string>:{at}: {message}")):
        spf.evaluate(expr, x=np.array([True, False, True]))


def test_an_unsigned_integer_to_a_negative_literal_power_is_refused():
    """``pow(A(i,j), -1)`` of uint64 computed [inf, 1.33] (``-1`` was numpy's strongly typed
    int64, so the power was a float); numpy refuses the Python int -1 for uint64."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:10: pow(A(i,j), -1): numpy refuses it on uint64 values "
            "(OverflowError: Python integer -1 out of bounds for uint64)")):
        spf.evaluate("R(i,j) = pow(A(i,j), -1)", A=np.array([[0, 3], [1, 2]], np.uint64))
    f = np.array([0.5, 4.0], np.float32)         # a literal's sign keeps it weak: float32
    _same(spf.evaluate("y(i) = max(x(i), -1) + pow(x(i), -2)", x=f),
          np.maximum(f, -1) + np.power(f, -2))


# inf and nan are never distributed over a sum

def test_an_infinite_coefficient_is_not_distributed_over_a_sum():
    """``((T(i,j,k) + 0.5) / 0) + 1`` of uint32 zeros gave nan: the sum was split into
    T * inf (0 * inf = nan) + 0.5 * inf; numpy's (T + 0.5) / 0 is inf at every point."""
    t = np.zeros((2, 2, 2), np.uint32)
    _same(spf.evaluate("R = ((T(i,j,k) + 0.5) / 0) + 1", T=t), np.float64(np.inf))
    d = np.array([[0.0, 1.0], [2.0, 0.0]])
    with np.errstate(divide="ignore"):
        want = ((d + 1) / 0).sum(1)
    _same(spf.evaluate("y(i) = (A(i,j) + 1) / 0", A=sp.csr_matrix(d)), want)
    _same(spf.evaluate("y(i) = (A(i,j) + 1) * log(0)", A=sp.csr_matrix(d)), -want)
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:26: a sum of products times a number that is not finite")):
        spf.evaluate("y(i) = (A(i,j) + B(i,j)) * inf", A=EYE, B=EYE)


@pytest.mark.parametrize("expr,numpy", [
    ("R(i,j) = ((B(3*i,j) / C(i,j)) + 2) / 0",      # B(3*i,j) reads row 0 only
     lambda b, c, x: np.vstack([(b[0] / c[0] + 2) / 0, np.zeros(3)])),
    ("R(i,j) = (B(i,j) / C(i,j) + 2) * inf", lambda b, c, x: (b / c + 2) * np.inf),
    ("R(i,j) = (x(i) + inf) * (B(i,j) / C(i,j) + 2)",
     lambda b, c, x: (x[:, None] + np.inf) * (b / c + 2)),
    ("R(i,j) = (x(i) / 0) * (B(i,j) * C(i,j) + 2)",
     lambda b, c, x: (x[:, None] / 0) * (b * c + 2))])
def test_one_product_plus_numbers_by_zero_is_one_value(expr, numpy):
    """``(B / C + 2) / 0`` was distributed as ``(B / C) * inf + 2 * inf``: nan where B is 0
    and C is not, numpy's inf; one product plus numbers divided by zero or times a value
    holding inf (``x(i) + inf``, ``x(i) / 0``) is one value, as one tensor plus numbers is."""
    b = np.array([[0.0, 0.0, 1.0], [2.0, 0.0, -1.0]])
    c = np.array([[1.0, 0.0, 0.0], [4.0, 2.0, 1.0]])
    x = np.array([1.0, -2.0])
    ops = {k: v for k, v in {"B": spf.Tensor.from_dense("CSR", b), "C": c, "x": x}.items()
           if f"{k}(" in expr}
    with np.errstate(all="ignore"):
        _same(spf.evaluate(expr, **ops, fill_values=True), numpy(b, c, x))


def test_a_value_holding_inf_times_a_sum_of_products_is_refused():
    """``(x(i) + inf) * (A(i,j) + B(i,j))`` was distributed: (x + inf) * A + (x + inf) * B is
    nan where A is 0 and B is not, numpy's inf; as for ``(A + B) * inf``, it is refused."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:23: a sum of products times a number that is not finite")):
        spf.evaluate("R(i,j) = (x(i) + inf) * (A(i,j) + B(i,j))", x=np.ones(2), A=EYE, B=EYE)


def test_a_product_times_inf_reads_every_operand_densely():
    """``(T * (T / 0)) / 0`` folded inf into the first factor only: the second iterated T's
    entries, so an all-zero T gave 0 (numpy: 0 * nan = nan at every point); and the first
    factor's value was typed apart from the product; the product is numpy's type of the
    statement as written (``(u <= v) / 0`` is float64)."""
    t = np.array([[[3, 4], [0, 3]], [[3, 0], [0, 4]], [[2, 3], [2, 3]]], np.uint64)
    with np.errstate(all="ignore"):
        for d in (t, t * 0):
            for expr in ("R(i) = (T(i,j,k) * (T(i,j,k) / 0)) / 0",
                         "R(i) = ((T(i,j,k) / 0) * T(i,j,k)) / 0"):
                _same(spf.evaluate(expr, T=spf.Tensor.from_dense("CSF", d)),
                      ((d * (d / 0)) / 0).sum((1, 2)))
        d = np.eye(2)
        _same(spf.evaluate("y(i) = A(i,j) * x(j) * log(0)", A=sp.csr_matrix(d), x=np.ones(2)),
              (d * np.log(0)).sum(1))
    f = np.array([0.0, 1.0], np.float32)
    b = spf.Tensor.from_dense("CSR", np.array([[0.0, 2.0], [1.0, 0.0]], np.float32))
    got = spf.evaluate("y(j) = ((u(i) <= v(j)) / 0) * B(i,j)", u=f, v=f, B=b)
    with np.errstate(all="ignore"):     # numpy's bool / 0 is float64, so is the product
        assert got.dtype == (((f[:, None] <= f) / 0) * b.to_dense()).dtype == np.float64
    with pytest.raises(spf.ArgumentError, match="must be a writeable C-contiguous float64"):
        spf.evaluate("y(j) = ((u(i) <= v(j)) / 0) * B(i,j)", u=f, v=f, B=b,
                     out=np.zeros(2, np.float32))       # never cast silently


def test_a_narrow_integer_product_negated_wraps_in_its_type():
    """``-A(i,j)`` of uint16 summed into int64 gave -1 per entry (C negates in int); numpy's
    negative wraps in uint16 (65535) before the sum adds it."""
    a = np.array([[1], [3], [4]], np.uint16)
    v = np.array([0, -3, 1], np.int64)
    got = spf.evaluate("R = (A(2*i + 1, j) + v(i)) + (-A(i, j))",
                       A=spf.Tensor.from_dense("SortedCOO", a), v=v)
    _same(got, np.int64(a[1, 0]) + v.sum() + np.negative(a).sum(dtype=np.int64))
    b = np.array([-128, 5], np.int8)
    w = np.array([1, 1])
    _same(spf.evaluate("y(i) = w(i) - b(i)", w=w, b=b), w - b)     # a sum subtracts in its type


def test_a_split_subtraction_of_booleans_is_not_a_negation():
    """A sum split off inside a value subtracted its operand through a '-' node, which
    numpy refuses on booleans: ``((B / 0) - B(-i+2,j)) / B(i,j)`` was refused."""
    d = np.ones((2, 3), bool)
    b = spf.Tensor.from_dense("DCSR", d)
    with np.errstate(all="ignore"):
        got = spf.evaluate("R(i,j) = ((B(i,j) / 0) - B(-i+2,j)) / B(i,j)", B=b,
                           out=np.zeros((2, 3)), fill_values=True)
        want = np.zeros((2, 3))
        want[1] = ((d[1] / 0) - d[1]) / d[1]
        want[0] = (d[0] / 0) / d[0]       # B(2, j) is outside B: that term adds nothing
    _same(got, want)


def test_a_product_of_an_infinite_value_and_a_sum_is_refused():
    """``((T or j) / 0) * (j - x(2*j))`` distributed the infinite value over the sum (inf *
    j - inf * x: nan where numpy's per-point product is inf); ``j - x(2*j)`` is one tensor
    plus an index value, no number, so the product is a sum of products times inf."""
    t = np.array([[[0, 4, 0, 2], [2, 3, 1, 1], [1, 4, 1, 2]],
                  [[3, 2, 3, 0], [4, 0, 3, 0], [1, 4, 1, 4]]], np.uint64)
    with pytest.raises(spf.SpecError, match="a sum of products times a number that is not"):
        spf.evaluate("R(i,j) = ((T(i,j,k + i + 1) or j) / 0) * (j - x(2*j))",
                     T=spf.Tensor.from_dense("COO3", t), x=np.zeros(3, np.uint64))


def test_a_scalar_times_inf_is_a_number_term():
    """A scalar divided by zero (no tensor in its term) must not be folded into a value of
    a tensor (there is none): it is inf, -inf or nan added into every element."""
    b = spf.Tensor.from_dense("CSR", np.eye(3))
    with np.errstate(all="ignore"):
        for s in (2.0, -1.0, 0.0):
            _same(spf.evaluate("R(i) = B(i,j) + 256 * (s / 0)", B=b, s=s),
                  np.ones(3) + 256 * (np.float64(s) / 0))


def test_a_scalar_added_to_one_tensor_is_a_term():
    """``i + (s + T(i,j,k))`` folded ``s + T`` into one value (one access and no number
    term) and refused "the scalar 's' inside a function"; s is a term of its own."""
    t = np.arange(8.0).reshape(2, 2, 2)
    _same(spf.evaluate("y(j) = 2 * (s + T(i,j,k))", s=np.float64(3), T=t),
          2 * t.sum((0, 2)) + 2 * 3.0)
    with pytest.raises(spf.SpecError, match="a term of index values only"):
        spf.evaluate("y(j) = i + (s + T(i,j,k))", s=np.float64(3), T=t)


# numpy's types: numpy scalars strongly typed, literals weakly, numbers alone in the output's

def test_numpy_scalars_promote_by_their_type():
    """A numpy scalar was typed as the kernel's output (``s = np.float32(3)`` refused as not
    converting to uint16; ``5 * ((T >= 3) * s)`` int64 for a np.uint16 ``s``); numpy 2
    promotes a numpy scalar by its type, a Python number weakly."""
    v = np.array([1, 2, 3], np.uint16)
    s = np.float32(3)
    want = s + (v * s).sum(dtype=np.float32) + s * s         # the number terms added once
    _same(spf.evaluate("R = s + (v(i)+s)*s", v=v, s=s), want)
    t = np.array([[[1, 5], [3, 2]]], np.int64)
    u = np.uint16(2)
    _same(spf.evaluate("R(j) = 5 * ((T(i,j,k) >= 3) * s)", T=t, s=u),
          (5 * ((t >= 3) * u)).sum(axis=(0, 2), dtype=np.uint16))
    f = np.array([1.5, 2.0], np.float32)
    _same(spf.evaluate("y(i) = s * x(i)", s=np.float64(2), x=f), np.float64(2) * f)
    _same(spf.evaluate("y(i) = s * x(i)", s=2.0, x=f), 2.0 * f)


def test_numbers_added_to_integer_sums_keep_the_integer_type():
    """A number term was typed float64 on its own: refused as not casting into the sum's
    integer type; numpy adds a Python int weakly (int32, int64 for a bool sum, uint32)."""
    k = spf.Kernel("R = (x(j)*x(j)) - 5", dtype={"x": "int32", "R": "int32"}).compile()
    x = np.array([3, -4, 100000], np.int32)
    _same(k(x=x), (x * x).sum(dtype=np.int32) - np.int32(5))
    a = np.array([[True, False], [True, True]])
    _same(spf.evaluate("R = A(i,j) + 0", A=a), np.int64(3))
    t = np.full((2, 2, 2), 4294967295, np.uint32)
    _same(spf.evaluate("R = T(i,j,k) + 1", T=t), t.sum(dtype=np.uint32) + np.uint32(1))
    _same(spf.evaluate("y(i) = x(i) - 3", x=np.array([0, 5], np.uint8)),
          np.array([0, 5], np.uint8) - 3)


def test_a_negative_coefficient_wraps_in_an_unsigned_type():
    """``-(256*x(j))`` of uint32 was refused (-256 does not fit uint32); numpy negates the
    uint32 product, wrapping; a negative literal written as such is numpy's refusal."""
    x = np.array([1, 2, 0], np.uint32)
    _same(spf.evaluate("R(j) = -(256*x(j))", x=x), -(256 * x))
    u = np.array([0, 3, 100], np.uint8)
    _same(spf.evaluate("R(j) = x(j) - (3 * x(j))", x=u), u - 3 * u)
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:13: x(j) * (-256): numpy refuses it on uint32 values (OverflowError: "
            "Python integer -256 out of bounds for uint32)")):
        spf.evaluate("R(j) = x(j) * -256", x=x)


@pytest.mark.parametrize("expr, extra", [
    ("y(i) = A(i,j) * x(j) + pow(2.5, -1)", 0.4),
    ("y(i) = A(i,j) * x(j) - log(1)", 0.0),
    ("y(i) = A(i,j) * x(j) + 3 * abs(-2) / 4", 1.5),
    ("y(i) = A(i,j) * x(j) - (1 < 2)", -1.0),
    ("y(i) = A(i,j) * x(j) + where(2 > 3, 1, 0.25) * 2", 0.5),
])
def test_a_term_of_numbers_is_a_number(expr, extra):
    """``pow(2.5, -1)`` and ``log(1)`` were refused as "a term of index values only"; numpy
    computes them (as numbers: added into every element once)."""
    d = np.array([[1.0, 0.0], [2.0, 3.0]])
    x = np.array([1.0, -1.0])
    np.testing.assert_allclose(spf.evaluate(expr, A=sp.csr_matrix(d), x=x), d @ x + extra)


def test_numbers_of_functions_are_numpys_scalars():
    """A function of numbers is numpy's scalar (strongly typed: float64 next to float32),
    a literal a Python number (weak); numpy's refusal of one is an spf error."""
    f = np.array([1.0, 2.0], np.float32)
    _same(spf.evaluate("y(i) = x(i) * w(i) + log(2)", x=f, w=f), f * f + np.log(2))
    _same(spf.evaluate("y(i) = x(i) * w(i) + 0.5", x=f, w=f), f * f + 0.5)
    _same(spf.evaluate("y(i) = x(i) * exp(1)", x=f), f * np.exp(1))
    _same(spf.evaluate("y(i) = max(x(i), 7 / 2)", x=f), np.maximum(f, 7 / 2))
    with pytest.raises(spf.SpecError, match=re.escape(
            "<string>:1:22: pow(2, -1): numpy refuses it (ValueError: Integers to negative "
            "integer powers are not allowed.)")):
        spf.evaluate("y(i) = x(i) * w(i) + pow(2, -1)", x=f, w=f)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16"])
def test_float_functions_of_narrow_integers_are_float32(dtype):
    """numpy gives float16 for sqrt of 8-bit integers (float32 for 16-bit); spf holds float16
    as float32 (docs/value-types.md)."""
    x = np.array([1, 4, 0, 1], dtype)
    w = np.array([2, 1, 3, 0], dtype)
    for expr, ref in [("y(i) = sqrt(x(i))", np.sqrt(x)), ("y(i) = exp(x(i)) * w(i)",
                                                           np.exp(x) * w),
                      ("s = sqrt(x(i)) * w(i)", (np.sqrt(x) * w).sum())]:
        got = spf.evaluate(expr, x=x, w=w) if "w(" in expr else spf.evaluate(expr, x=x)
        assert got.dtype == np.float32 and np.result_type(ref) in (np.float16, np.float32)
        np.testing.assert_allclose(got, ref.astype(np.float32), rtol=2e-3)


def test_the_round_two_c_compiles_warning_free():
    """A truth negated in an unsigned sum, numbers folded from functions and truths, a
    number term in an integer output: no warning under -Wall -Wextra."""
    from conftest import assert_compiles_clean
    for expr, dtype in [("R = -((not F(k)) + F(k)*F(k))", {"F": "uint32"}),
                        ("y(i) = F(i,j) * x(j) + log(2) - (1 < 2)", "float32"),
                        ("y(i) = max(x(i), 2 - 5) * pow(3, 2) + (x(i) + 1 - 4) - 7", "int8"),
                        ("y(i) = x(i+1) - 3", "uint16")]:
        assert_compiles_clean(spf.Kernel(expr, dtype=dtype).c_source())


# round 3: a negated integer wraps in its own type; messages name the tensors as written ---

def test_a_negated_operand_of_a_merged_sum_wraps_in_its_type():
    """A sparse output merging its operands' storage negated a run in C's int (int8 -128
    gave 128) or in the output's wider type; numpy's negative wraps in the operand's type
    (-128), then each term adds in the output's type."""
    a = np.array([[-128, 1, 0], [0, 127, 2]], np.int8)
    b = np.array([[0, 3, -128], [5, 0, -128]], np.int8)
    d = np.array([[1, 0, 1], [0, 1000, 0]], np.int32)
    A, B, D = (spf.Tensor.from_dense("CSR", m) for m in (a, b, d))
    for out in ("CSR", "DenseMatrix"):
        got = spf.evaluate("C(i,j) = -A(i,j) + D(i,j)", A=A, D=D, layouts={"C": out})
        _same(got.to_dense() if out == "CSR" else got, (-a).astype(np.int32) + d)
        k = spf.Kernel("C(i,j) = -A(i,j) - B(i,j)", {"A": "CSR", "B": "CSR", "C": out},
                       dtype={"A": "int8", "B": "int8", "C": "int32"}).compile()
        got = k(A=A, B=B)       # -A wraps in int8; the sum (int32, the output's) subtracts B
        _same(got.to_dense() if out == "CSR" else got,
              (-a).astype(np.int32) - b.astype(np.int32))
    k = spf.Kernel("C(i,j) = -min(A(i,j), B(i,j))", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   dtype={"A": "int8", "B": "int8", "C": "int32"})
    assert "union" in k.report()
    _same(k.compile()(A=A, B=B).to_dense(), (-np.minimum(a, b)).astype(np.int32))
    w = np.array([[-2 ** 31, 1], [0, 5]], np.int32)
    k = spf.Kernel("C(i,j) = -A(i,j) - B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   dtype={"A": "int32", "B": "int32", "C": "int64"}).compile()
    W = spf.Tensor.from_dense("CSR", w)
    _same(k(A=W, B=W).to_dense(), (-w).astype(np.int64) - w.astype(np.int64))


def test_refusals_name_a_tensor_read_again_as_written():
    """A tensor read again is renamed inside spf (``spf_B_2``); a refusal printed that."""
    B = spf.Tensor.from_dense("SymCSR", np.array([[True, False], [False, True]]))
    with pytest.raises(spf.SpecError) as err:
        spf.evaluate("R(i,j) = B(i,j) / B(i,j) - B(i,j)", B=B, layouts={"R": "CSR"})
    assert str(err.value) == (
        "<string>:1:10: B(i,j) / B(i,j): it divides by B(i,j), which is 0 where B stores "
        "nothing; pass fill_values=True to compute it densely, as numpy does (inf or nan "
        "where nothing is stored)")
    with pytest.raises(spf.SpecError) as err:
        spf.evaluate("R(i,j) = ((B(i-1,j) - B(i,j)) / B(i,j)) - B(i,j)", B=B,
                     layouts={"R": "CSR"})
    assert str(err.value).startswith("<string>:1:12: B(i-1,j) / B(i,j): it divides by "
                                     "B(i,j), which is 0 where B stores nothing;")
    with pytest.raises(spf.ArgumentError) as err:
        spf.evaluate("R(i,j) = F(i,j) * exp(F(i,j))", F=np.eye(2), G=1)
    assert "are neither tensors of 'R(i,j) = F(i,j) * exp(F(i,j))' (['F', 'R'])" in \
        str(err.value)


# a number coefficient keeps its type; the literal -2**63 (round 3) ------------------------

@pytest.mark.parametrize("written, numpy_of", [
    ("x(i) / 5 * 5", lambda x: x / 5 * 5), ("x(i) / 1", lambda x: x / 1),
    ("x(i) * 1.0", lambda x: x * 1.0), ("x(i) * (5.0/5)", lambda x: x * (5.0 / 5)),
    ("x(i) * -1.0", lambda x: x * -1.0), ("x(i) * 1", lambda x: x * 1),
    ("x(i) * 1.0 + x(i)", lambda x: x * 1.0 + x), ("-x(i)", lambda x: -x)])
def test_a_coefficient_folded_to_one_keeps_its_type(written, numpy_of):
    """A coefficient equal to 1 was dropped with its type: ``x(i) * 5/5`` of int32 was int32
    [1 2]; numpy's is float64 (a float literal or a division promotes, the int 1 does not),
    and ``x(i) * -1.0`` of int8 -128 is 128.0, not int8's wrapped negative (-128 * 5 would
    wrap in int8 before numpy divides)."""
    low = -25 if "/ 5" in written else -128
    for x in (np.array([1, 2], np.int32), np.array([low, 5, 0], np.int8)):
        _same(spf.evaluate(f"y(i) = {written}", x=x), numpy_of(x))


def test_a_coefficient_of_one_keeps_its_type_in_a_sparse_output_and_a_kernel():
    d = np.array([[-128, 0], [0, 5]], np.int8)
    A = spf.Tensor.from_dense("CSR", d)
    for written, want in [("A(i,j) * -1.0", d * -1.0), ("A(i,j) / 1", d / 1)]:
        got = spf.evaluate(f"C(i,j) = {written}", A=A, layouts={"C": "CSR"})
        _same(got.to_dense(), want)
    k = spf.Kernel("y(i) = x(i) / 5 * 5", {}, dtype={"x": "int32"})
    assert k.typing.output.name == "float64"
    with pytest.raises(spf.SpecError, match=re.escape(
            "dtype: the output 'y' is int32, and numpy computes 'x(i) * 1.0' in float64")):
        spf.Kernel("y(i) = x(i) * 1.0", {}, dtype="int32")


@pytest.mark.parametrize("written, numpy_of", [
    ("x(i) * (-9223372036854775808)", lambda x: x * -2 ** 63),
    ("-9223372036854775808 * x(i)", lambda x: -2 ** 63 * x),
    ("x(i) + (-9223372036854775808)", lambda x: x + -2 ** 63),
    ("-(x(i) * 4611686018427387904) * 2", lambda x: -(x * 2 ** 62) * 2)])
def test_the_literal_minus_2_to_the_63_multiplies_as_numpy(written, numpy_of):
    """``x * -N`` multiplies by the literal -N: -2**63 fits int64, but its size was checked
    alone and refused ("9223372036854775808 does not fit int64")."""
    x = np.array([1, 2, -3, 0])
    with np.errstate(over="ignore"):
        want = numpy_of(x)
    _same(spf.evaluate(f"y(i) = {written}", x=x), want)


def test_the_integer_2_to_the_63_is_still_refused_next_to_int64():
    x = np.array([1, 2])
    why = ("the integer 9223372036854775808 does not fit int64, the type numpy computes it "
           "in (numpy raises OverflowError: Python int too large to convert to C long)")
    for written, where in [("x(i) * 9223372036854775808", "1:13: x(i) * 9223372036854775808"),
                           ("-(9223372036854775808 * x(i))",    # at its '*'
                            "1:30: 9223372036854775808 * x(i)")]:
        with pytest.raises(spf.SpecError) as err:
            spf.evaluate(f"y(i) = {written}", x=x)
        assert str(err.value) == f"<string>:{where}: {why}"


_I32 = np.array([70000, 3, -5], np.int32)


@pytest.mark.parametrize("written, operands, step, at, types", [
    ("x(i) * x(i) * 2.0", {"x": _I32}, "x(i) * x(i)", "1:20", ("int32", "float64")),
    ("x(i) * 4611686018427387904 / 3", {"x": np.array([1, 2, -3])},
     "x(i) * 4611686018427387904", "1:35", ("int64", "float64")),
    ("x(i) * 5 / 5", {"x": np.array([-128, 3], np.int8)}, "x(i) * 5", "1:17",
     ("int8", "float64")),
    ("-x(i) / 2", {"x": np.array([-128, 3], np.int8)}, "-x(i)", "1:14", ("int8", "float64")),
    ("x(i) * x(i) * z(i)", {"x": _I32, "z": np.array([1, 2, 3])}, "x(i) * x(i)", "1:20",
     ("int32", "int64")),
    ("x(i) * x(i) * log(2)", {"x": _I32}, "x(i) * x(i)", "1:20", ("int32", "float64")),
    ("(x(i) * x(i) + 1.5) * 2.0", {"x": _I32}, "x(i) * x(i)", "1:28", ("int32", "float64"))])
def test_an_integer_step_before_a_type_change_is_refused(written, operands, step, at, types):
    """numpy computes (and wraps) ``x * x`` in int32 before ``* 2.0``; spf folds a product's
    numbers into one coefficient and multiplied in float64 (9.8e9 for numpy's 1.21e9):
    silently wrong, now a SpecError naming the step."""
    own, final = types
    with pytest.raises(spf.SpecError) as err:
        spf.evaluate(f"y(i) = {written}", **operands)
    assert str(err.value).startswith(
        f"<string>:{at}: {step} is {own} in numpy and may wrap there before ")
    assert f"spf multiplies a product's numbers and factors in one type ({final})" \
        in str(err.value)


@pytest.mark.parametrize("written, numpy_of", [
    ("2.0 * x(i) * x(i)", lambda x: 2.0 * x * x),          # float64 at every step
    ("x(i) * x(i) * 2", lambda x: x * x * 2),               # int32 throughout: wraps
    ("x(i) * 1 * 2.0 + x(i) / 2", lambda x: x * 1 * 2.0 + x / 2)])
def test_products_whose_steps_keep_their_type_still_compute_as_numpy(written, numpy_of):
    with np.errstate(over="ignore"):
        want = numpy_of(_I32)
    _same(spf.evaluate(f"y(i) = {written}", x=_I32), want)


@pytest.mark.parametrize("written", ["A(i,j) * 1.0", "A(i,j) / 1", "A(i,j) * 2", "A(i,j) * 1"])
def test_a_number_is_refused_under_a_semiring(written):
    """``* 1.0``, ``/ 1`` and ``* 1`` came to the coefficient 1 and were accepted under
    min_plus (where ``* 1`` is the semiring's mul by 1: A + 1)."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "semiring=min_plus: a subtracted product or a numeric coefficient has no "
            "meaning in a semiring")):
        spf.Kernel(f"y(i) = {written}", {"A": "CSR"}, semiring="min_plus")


_TRUTHS = np.array([[True, False], [False, True]])
_HALVES = np.array([-1.25, 2.75], np.float32)


@pytest.mark.parametrize("written, operands, numpy_of", [
    # a literal 1 is a literal: numpy promotes booleans times it to int64 (spf kept bool,
    # and -(1 * A) was True where numpy's is -1)
    ("y(i) = -(1 * A(i,j))", {"A": sp.csr_array(_TRUTHS)}, lambda A, x: -(1 * A).sum(1)),
    ("y(i,j) = 1 * D(i,j)", {"D": _TRUTHS}, lambda A, x: 1 * _TRUTHS),
    # each product is typed on its own: numpy's 1e300 * (x < 0) is float64 before the
    # float32 is added (spf promoted every factor and literal at once: float32, inf)
    ("y(i) = 1e300 * (x(i) < 0) + x(i)", {"x": _HALVES}, lambda A, x: 1e300 * (x < 0) + x),
    # a literal division by zero is a weak number, as a literal: float32 stays float32
    # (spf made it numpy's float64 scalar inside functions, but not as a coefficient)
    ("y(i) = max(x(i), 1 / 0)", {"x": _HALVES}, lambda A, x: np.maximum(x, np.float32(np.inf))),
    ("y(i) = where(x(i) > 0, x(i), -1 / 0)", {"x": _HALVES},
     lambda A, x: np.where(x > 0, x, np.float32(-np.inf)))])
def test_literals_promote_as_numpy_promotes_them(written, operands, numpy_of):
    _same(spf.evaluate(written, **operands), numpy_of(_TRUTHS, _HALVES))


@pytest.mark.parametrize("written", ["x(i) - (a(i) + b(i))", "a(i) + b(i) + x(i)",
                                     "(a(i) + b(i)) * x(i)", "(a(i) + b(i)) / 2"])
def test_a_sum_of_booleans_inside_wider_arithmetic_is_refused(written):
    """numpy's a + b of booleans is a logical or (1 where both hold); spf added the terms
    (x - 2 where numpy gives x - 1): silently wrong, now a SpecError naming the sum."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "a(i) + b(i) is a sum of booleans, which numpy computes as a logical or before")):
        spf.evaluate(f"y(i) = {written}", a=_TRUTHS[0], b=_TRUTHS[0],
                     **({"x": np.array([5, 5])} if "x(" in written else {}))


def test_a_sum_of_booleans_among_booleans_is_numpys_or():
    a, b = np.array([True, True, False]), np.array([True, False, False])
    _same(spf.evaluate("y(i) = a(i) + b(i)", a=a, b=b), a + b)
    _same(spf.evaluate("y(i) = (a(i) + b(i)) * a(i)", a=a, b=b), (a + b) * a)
    _same(spf.evaluate("y(i) = x(i) - (a(i) or b(i))", a=a, b=b, x=np.array([5, 5, 5])),
          np.array([5, 5, 5]) - np.logical_or(a, b))


def test_a_complex_number_to_the_power_zero_is_one():
    """C's cpow computes exp(0 * log z): nan at 0 and at nan, where numpy's z ** 0 is 1."""
    z = np.array([[0j, 1 + 2j], [complex(np.nan, 0), 3j]])
    _same(spf.evaluate("R(i,j) = pow(Z(i,j), 0)", Z=z), np.power(z, 0))


@pytest.mark.parametrize("written", ["(sign(j) + A(i,j)) / 0", "(j + A(i,j)) * inf"])
def test_a_tensor_plus_index_values_by_zero_is_a_sum_of_products(written):
    """``sign(j) + A(i,j)`` is one value in spf, but an index value is no number: numpy's
    result divided by 0 differs from the expansion's (inf where the expansion has nan)."""
    with pytest.raises(spf.SpecError, match="a sum of products"):
        spf.evaluate(f"y(i) = {written}", A=np.array([[1.0, -2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(spf.evaluate("y(i) = (A(i,j) + 1) / 0", A=np.eye(2)),
                                  [np.inf, np.inf])       # one tensor plus a number: one value


def test_a_divisors_sum_is_ambiguous_for_each_product_of_the_numerator():
    """``(F(k) - v(i)) / (F(k) - v(i))`` is ``F/(F - v) - v/(F - v)``: in the first product
    only the divisor reads i, so its sum over i is ambiguous (spf counted the numerator's
    reads together and computed it)."""
    with pytest.raises(spf.SpecError, match="so whether 'i' is summed inside"):
        spf.evaluate("R = (F(k) - v(i)) / (F(k) - v(i))", F=np.arange(1.0, 4.0),
                     v=np.array([0.5, 4.0]))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_division_is_numpys(dtype):
    """C's complex division (Annex G) gives 0 for 1 / (inf + nan i) and signs zeros its own
    way, where numpy's (Smith's method) gives nan + nan i and inf + nan i for 1 / 0."""
    a = np.array([1 + 2j, 3 - 1j, 1 + 0j, 0j, 1 + 0j], dtype)
    b = np.array([0j, 2 + 1j, complex(np.inf, 0), 0j, complex(np.inf, np.nan)], dtype)
    with np.errstate(all="ignore"):
        _same(spf.evaluate("y(i) = a(i) / b(i)", a=a, b=b), a / b)


def test_a_number_in_the_numerator_reads_no_index_away():
    """``(B(i,j) + nan) / (B(i+j+1, j-i) + 2)``: the number is no product reading nothing,
    so ``i`` is read beside the divisor's sum (it was refused as ambiguous)."""
    b = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = np.array([1.0, 2.0])
    want = np.zeros(2)
    for i, j in np.ndindex(2, 2):
        if i + j + 1 < 2 and 0 <= j - i < 2:        # every access in range
            want[j] += x[j] / ((b[i, j] + np.nan) / (b[i + j + 1, j - i] + 2))
    _same(spf.evaluate("R(j) = x(j) / ((B(i,j) + nan) / (B(i+j+1, j-i) + 2))", x=x, B=b),
          want)


def test_a_term_of_an_expansion_computes_in_the_statements_type():
    """``(T(i,j,k) + 7) * ((not x(j)) - x(j))`` of uint32 is uint32 in numpy, but its term
    ``7 * (not x(j))`` alone is int64 in numpy: each term of the expansion was checked again
    as a statement of its own and the uint32 output refused.  (A term sums over its own
    indices: ``7 * (not x(j))`` reads no ``k``.)"""
    d = np.array([[[0, 3], [1, 0], [0, 0]], [[2, 0], [0, 0], [4, 5]]], np.uint32)
    x = np.array([0, 2, 5], np.uint32)
    k = spf.Kernel("R(i,j) = (T(i,j,k) + 7) * ((not x(j)) - x(j))", {"T": "CSF"},
                   dtype={"T": "uint32", "x": "uint32", "R": "uint32"}).compile()
    with np.errstate(over="ignore"):
        per = np.logical_not(x) - x
        want = (d * per[None, :, None]).sum(2, dtype=np.uint32) + np.uint32(7) * per
    _same(k(T=spf.Tensor.from_dense("CSF", d), x=x, R=np.zeros((2, 3), np.uint32)), want)


# a narrow integer statement into a wider output -----------------------------------------

@pytest.mark.parametrize("out", ["uint8", "float64"])
def test_a_number_term_fits_the_statements_type_whatever_the_output(out):
    """``(128 - T*T) * 128`` of uint8 expands to the number term 16384, which numpy refuses
    in uint8, the statement's type: evaluate refused it, a Kernel into a float64 output
    added it as 16384.0 (16512 where numpy's uint8 statement, cast at the store, is 128)."""
    with pytest.raises(spf.SpecError, match=re.escape(
            "R(i,j) = 16384: the integer 16384 does not fit uint8, the type numpy computes it "
            "in")):
        spf.Kernel("R(i,j) = (128 - T(i,j,k)*T(i,j,k)) * 128", {},
                   dtype={"T": "uint8", "R": out}).compile()


def test_a_step_numpy_wraps_is_named_before_the_expansions_numbers():
    """``(128 - k) * (T * 128)``: numpy wraps ``T * 128`` in uint8 before the int64 ``128 - k``
    multiplies it; spf named the expansion's 16384 * T (not in numpy's expression) instead
    of that step, in every API."""
    t = np.full((2, 2, 1), 3, np.uint8)
    want = "T(i,j,k) * 128 is uint8 in numpy and may wrap there before"
    with pytest.raises(spf.SpecError, match=re.escape(want)):
        spf.evaluate("R(i,j) = (128 - k) * (T(i,j,k) * 128)", T=t)
    with pytest.raises(spf.SpecError, match=re.escape(want)):
        spf.Kernel("R(i,j) = (128 - k) * (T(i,j,k) * 128)", {},
                   dtype={"T": "uint8", "R": "float64"}).compile()
    _same(spf.evaluate("R(i,j) = (128 - T(i,j,k)) * (T(i,j,k) * 128)", T=t),
          ((128 - t) * (t * 128)).sum(2, dtype=np.uint8))     # no type change: uint8


def test_a_name_no_access_reads_is_a_scalar_operand():
    """``k * A(i,j)`` with no access reading k: k is a scalar operand, and a missing one said
    only "missing operand 'k'"; it now says why k is an operand."""
    why = "(a scalar: a name that no tensor's access reads as an index is a scalar operand)"
    with pytest.raises(spf.ArgumentError, match=re.escape(f"missing operand 'k' {why}")):
        spf.evaluate("R(i,j) = k * A(i,j)", A=EYE)
    with pytest.raises(spf.ArgumentError, match=re.escape(f"missing argument 'k' {why}")):
        spf.Kernel("R(i,j) = k * A(i,j)", {"A": "CSR"}).compile()(A=EYE)
    _same(spf.evaluate("R(i,j) = k * A(i,j)", A=np.eye(2), k=3.0), 3 * np.eye(2))
