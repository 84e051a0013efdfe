"""Issue 52, the expansion's refusals and extents (what the adversarial suite found): an
output index no access bounds is refused whatever the data; a sum inside a function whose
products differ in a summed index is refused whatever multiplies it (inf, nan, a division by
zero) and whatever else is added to it; a value's sum at a linear position is split into the
documented terms, so each term keeps its own indices and points (the output's extent
included).  References: numpy on the dense arrays, the expansion of docs/expressions.md."""
from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest

import spf


def ambiguous(the_sum: str, inside: str, has: str, index: str, lacks: str) -> str:
    """The start of the refusal of an ambiguous sum, as a regular expression."""
    return re.escape(f"the sum {the_sum} inside {inside}: {has} reads index {index!r} and "
                     f"{lacks} does not, and nothing else in the product reads {index!r}")


# -- an output index no access bounds -------------------------------------------------------
UNBOUNDED = re.escape("the extent of 'R' along 'i' is set by no input ('i' appears only "
                      "inside index arithmetic whose accesses do not bound it): pass the "
                      "output")


@cache
def unbounded_kernel() -> spf.CompiledKernel[spf.Kernel]:
    return spf.Kernel("R(i) = B(i - k, j)", {"B": "CSR"}).compile()


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (2, 3)])
def test_an_index_no_access_bounds_is_refused_whatever_the_data(shape):
    """Any i is k away from a row of B: no extent, also where B is empty (compiled once)."""
    dense = np.arange(1.0, 1.0 + shape[0] * shape[1]).reshape(shape)
    B = spf.Tensor.from_dense("CSR", dense)
    with pytest.raises(spf.ArgumentError, match=UNBOUNDED):
        unbounded_kernel()(B=B)
    # an output passed chooses the extent: R(i) sums B(i - k, j) over every k and j
    np.testing.assert_array_equal(unbounded_kernel()(B=B, R=np.zeros(4)),
                                  np.full(4, dense.sum()))


@pytest.mark.parametrize("n", [0, 2])
def test_an_unbounded_index_is_refused_by_evaluate_whatever_the_data(n):
    B = spf.Tensor.from_dense("SymCSR", np.ones((n, n), np.int64))
    with pytest.raises(spf.ArgumentError, match=UNBOUNDED):
        spf.evaluate("R(i) = B(i - k, j)", B=B)


# -- a sum inside a function, whatever multiplies it ------------------------------------------
T_BOOL = np.array([[[True, False]], [[True, False]]])
F_INT = np.array([3, 0])


@pytest.mark.parametrize("times", ["/ 0", "* inf", "* nan", "* (1 / 0)"])
def test_an_ambiguous_sum_is_refused_whatever_the_coefficient(times):
    with pytest.raises(spf.SpecError, match=ambiguous(
            "T(i-3,j,j+k) + j", "(T(i-3,j,j+k) + j) > F(k)", "T(i-3,j,j+k)", "i", "j")):
        spf.evaluate(f"R = ((T(i - 3, j, k + j) + j) > F(k)) {times}", F=F_INT, T=T_BOOL)


def test_an_ambiguous_sum_times_inf_inside_a_function_is_refused():
    A, b = np.array([[1.0, -2.0], [0.5, -1.0]]), np.array([1.0, -1.0])
    with pytest.raises(spf.SpecError, match=ambiguous(
            "A(i,j) + b(i)", "exp((A(i,j) + b(i)) * inf)", "A(i,j)", "j", "b(i)")):
        spf.evaluate("y(i) = exp((A(i,j) + b(i)) * inf)", A=A, b=b)
    # one tensor plus numbers times inf is one value at every point (docs/expressions.md)
    x = np.array([1.0, 2.0])
    with np.errstate(invalid="ignore"):
        want = np.exp((A + 1) * np.inf) @ x
    np.testing.assert_array_equal(spf.evaluate("y(i) = exp((A(i,j) + 1) * inf) * x(j)", A=A,
                                               x=x), want)


# -- the products of the sum, whatever else is added to it ----------------------------------
def test_an_ambiguous_sum_is_refused_when_its_accesses_fall_outside():
    """The refusal is the statement's: every access of T and A here is out of range."""
    A = spf.Tensor.from_dense("ELL", np.array([[4, -3], [-2, -1], [-3, -2**63]], np.int64))
    T = spf.Tensor.from_dense("CSF", np.ones((3, 2, 4), bool))
    with pytest.raises(spf.SpecError, match=ambiguous(
            "j + T(-i+2,j+2,k+3)", "abs((j + T(-i+2,j+2,k+3)) + where(A(i+1099511627776,3*j), "
            "T(i,j+2147483647,k), 7))", "T(-i+2,j+2,k+3)", "k", "j")):
        spf.evaluate("R(i) = abs(((j + T(-i + 2, j + 2, k + 3)) + where(A(i + 1099511627776, "
                     "3*j), T(i, j + 2147483647, k), 7)))", A=A, T=T)


T3 = np.arange(24.0).reshape(2, 3, 4) % 5 - 2
U3 = np.arange(24.0).reshape(2, 3, 4) % 3
w = np.array([1.0, -2.0, 0.5, 3.0])
a, b = np.array([1.0, 2.0]), np.array([3.0, -1.0, 2.0])


def test_a_sum_is_ambiguous_by_its_products():
    # j is added to T and to T again: the sum j + T + T, whose j does not read k
    with pytest.raises(spf.SpecError, match=ambiguous(
            "j + T(i,j,k)", "abs((j + T(i,j,k)) + T(i,j,k))", "T(i,j,k)", "k", "j")):
        spf.evaluate("R(i) = abs((j + T(i, j, k)) + T(i, j, k))", T=T3)
    # the expansion a*a + a*b + b*a + b*b: a*a does not read k
    with pytest.raises(spf.SpecError, match=ambiguous(
            "a(j) + b(k)", "exp((a(j) + b(k)) * (a(j) + b(k)))", "a(j)", "j", "b(k)")):
        spf.evaluate("s = exp((a(j) + b(k)) * (a(j) + b(k)))", a=a, b=b)
    # a sum multiplied by what reads the index: every product reads it
    got = spf.evaluate("y(i) = abs((j + T(i, j, k)) * w(k))", T=T3, w=w)
    j = np.arange(3)[None, :, None]
    np.testing.assert_allclose(got, np.abs((j + T3) * w).sum(axis=(1, 2)))


def test_a_divided_sum_keeps_each_products_indices():
    """(j + T + U) / c is j/c + T/c + U/c: j/c is summed over j only (not once per k)."""
    c = np.array([1.0, 2.0])
    got = spf.evaluate("y(i) = (j + T(i,j,k) + U(i,j,k)) / c(i)", T=T3, U=U3, c=c)
    np.testing.assert_allclose(got, (np.arange(3).sum() + T3.sum((1, 2)) + U3.sum((1, 2))) / c)


def test_a_divided_sum_keeps_each_products_points():
    """(x(i+1) - 3 + x(i+1)) / c: -3/c(i) at every i, also where x(i+1) reads nothing."""
    x, c = np.arange(1.0, 5.0), np.arange(1.0, 5.0)
    got = spf.evaluate("y(i) = (x(i+1) - 3 + x(i+1)) / c(i)", x=x, c=c)
    np.testing.assert_allclose(got, (2 * np.append(x[1:], 0.0) - 3) / c)


# -- a term's extent: the products of the expansion -------------------------------------------
def test_a_number_added_to_a_tensor_reaches_as_far_as_its_product():
    """u(-j+2) * (B(j) - 3) is u(-j+2)*B(j) - 3*u(-j+2): the second term reaches j = 2."""
    u, B = np.array([2.0, 5.0]), np.array([4.0, 7.0])
    want = np.zeros(3)
    for j in range(3):
        if 0 <= 2 - j < 2:
            want[j] += u[2 - j] * (B[j] if j < 2 else 0.0) - 3 * u[2 - j]
    np.testing.assert_array_equal(spf.evaluate("R(j) = u(-j+2) * (B(j) - 3)", u=u, B=B),
                                  want)


def test_a_term_times_a_non_finite_number_reaches_as_far_as_its_product():
    """unix * (B/0 - 0/0) is unix*B*inf - unix*nan: the second term does not read B, so j
    reaches 2 through -j + 2 (the output's extent is 3)."""
    kernel = spf.Kernel("R(j) = unix(i + 1, -j + 2, k + i) * ((B(i, j) / 0) - (0 / 0))",
                        {"unix": "COO3", "B": "ELL"},
                        dtype={"unix": "uint8", "B": "uint8", "R": "float64"}).compile()
    unix = np.zeros((3, 2, 2), np.uint8)
    B = np.array([[0, 3], [4, 255], [0, 0]], np.uint8)
    got = kernel(unix=spf.Tensor.from_dense("COO3", unix), B=spf.Tensor.from_dense("ELL", B))
    np.testing.assert_array_equal(got, [0.0, np.nan, np.nan])


def test_a_quotient_by_a_tensor_is_distributed_over_its_numerator():
    """(i - T/5) / T(-i+4, j-1, k) is i/T(...) - (T/5)/T(...) (docs/expressions.md): where
    both T's are 0 the second is 0/0, nan, in every row."""
    T = np.array([[[0, 0, 4], [4, 0, 3], [0, 2, 0]], [[0, 0, 0], [0, 0, 0], [0, 2, 0]],
                  [[0, 3, 0], [0, 0, 0], [0, 2, 0]], [[0, 0, 0], [0, 0, 0], [0, 1, 0]],
                  [[0, 0, 0], [0, 4, 0], [0, 0, 2]]], np.uint16)
    want = np.zeros(5)
    with np.errstate(all="ignore"):
        for i in range(5):
            for j in range(1, 3):               # j - 1 and j both in range
                for k in range(3):
                    d = T[4 - i, j - 1, k]
                    want[i] += np.float64(i) / d - (T[i, j, k] / 5) / d
        got = spf.evaluate("R(i) = (i - (T(i, j, k) / 5)) / T(-i + 4, j - 1, k)", T=T)
    np.testing.assert_array_equal(got, want)
