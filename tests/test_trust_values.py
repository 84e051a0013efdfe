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
            "99999999999999999999999 * x(i): the integer 99999999999999999999999 does not fit "
            "int64")):
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
