"""The right-hand side as an expression tree (issue 40, first part): numbers, parentheses and
unary minus expand into a sum of products with coefficients, checked against numpy on several
layouts; every construct not yet expressible is refused by name at its line and column."""
from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf
from spf.front.kernel_spec import parse_expr


def _m(seed: int, shape=(7, 5), dtype=np.float64) -> sp.csr_matrix:
    m = sp.random(*shape, density=0.4, format="csr", random_state=seed)
    m.data = np.random.default_rng(seed).integers(1, 9, m.nnz).astype(dtype)
    dense = m.toarray()
    dense[2] = 0                                      # an empty row
    return sp.csr_matrix(dense)


@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "DenseMatrix"])
def test_numbers_scale_products(layout):
    A, x, b = _m(1), np.arange(1.0, 6.0), np.linspace(-1, 1, 7)
    a = spf.Tensor.from_scipy(layout, A)
    np.testing.assert_allclose(spf.evaluate("y(i) = 2.5 * A(i,j) * x(j)", A=a, x=x),
                               2.5 * (A @ x))
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j) * 3 - 0.5 * b(i)", A=a,
                                            x=x, b=b), 3 * (A @ x) - 0.5 * b)
    np.testing.assert_allclose(spf.evaluate("y(i) = -(A(i,j) * x(j) - b(i))", A=a, x=x, b=b),
                               -(A @ x - b))


@pytest.mark.parametrize("out", ["CSR", "COO", "DCSR", "DenseMatrix"])
def test_parentheses_distribute(out):
    A, B, D = _m(1), _m(2), _m(3)
    layouts = {"A": "CSR", "B": "CSC", "D": "COO", "C": out}
    got = spf.evaluate("C(i,j) = (A(i,j) + 2 * B(i,j)) * D(i,j)", A=A, B=B, D=D,
                       layouts=layouts)
    got = got.to_dense() if isinstance(got, spf.Tensor) else got
    np.testing.assert_allclose(got, ((A + 2 * B).multiply(D)).toarray())
    got = spf.evaluate("C(i,j) = 0.5 * (A(i,j) - B(i,j))", A=A, B=B,
                       layouts={"A": "CSR", "B": "CSR", "C": out})
    got = got.to_dense() if isinstance(got, spf.Tensor) else got
    np.testing.assert_allclose(got, (0.5 * (A - B)).toarray())


def test_expansion_is_printed_and_numbers_promote_weakly():
    e = parse_expr("C(i,j) = -(A(i,j) + 2*B(i,j)) * D(i,j)")
    assert str(e) == "C(i,j) = -A(i,j) * D(i,j) - 2 * B(i,j) * D(i,j)"
    f32 = spf.Tensor.from_scipy("CSR", _m(4, dtype=np.float32))
    y = spf.evaluate("y(i) = 2.5 * A(i,j) * x(j)", A=f32, x=np.ones(5, np.float32))
    assert y.dtype == np.float32                    # a number does not widen float32
    ints = spf.Tensor.from_dense("CSR", np.array([[100, 0], [3, 4]], np.int8))
    y = spf.evaluate("y(i) = 3 * A(i,j) * x(j)", A=ints, x=np.ones(2, np.int8))
    assert y.dtype == np.int8 and list(y) == list(3 * np.array([[100, 0], [3, 4]], np.int8)
                                                  @ np.ones(2, np.int8))   # wraps alike
    y = spf.evaluate("y(i) = 0.5 * A(i,j) * x(j)", A=ints, x=np.ones(2, np.int8))
    assert y.dtype == np.float64 and list(y) == [50.0, 3.5]
    assert spf.evaluate("s = 2 * a(i) * b(i)", a=np.ones(3), b=np.ones(3)) == 6.0


@pytest.mark.parametrize("text, message, column", [
    ("y(i) = sqrt(A(i,j), 2)", "sqrt() takes 1 argument(s), got 2", 8),
    ("y(i) = (A(i,j) + B(i,j)) / 0", "division of a sum of products by zero", 26),
    ("y(i) = (A(i,j) + where(B(i,j), x(j), 1)) / nan", "division of a sum of products by nan",
     42),
    ("y(i) = exp(s) * A(i,j)", "the scalar 's' inside a function or a division", 12),
    ("O(i,j) = I(i*k, j) * F(k,j)", "I's index 1: i * k multiplies two indices (not affine)",
     13),
    ("y(i) = x(A(i,i))", "x's index 1: the access A(i,i) inside an index (indirect", 10),
    ("y(i) = x(i/2)", "x's index 1: the operator '/' is not supported in an index", 11),
    ("y(i) = x(i + 0.5)", "x's index 1: 0.5 is not an integer", 14),
    ("y(i) = A(i,j) * x(j) + i", "a term of index values only (i) is not supported yet", 24),
    ("C(i,j) = b(j)", "output index 'i' does not appear on the right-hand side", 1),
    ("y(i) = A(i,j) * not (i == j)", "'not' binds more loosely than '*'", 17),
    ("y(i) = 1e999 * A(i,j)", "number 1e999 is not finite", 8),
    ("y(i) = (A(i,j) * x(j)", "expected ')' closing the parenthesis", 22),
    ("y(i) = A(i,j) * * x(j)", "expected a tensor, a number, a function or '(', found '*'", 17),
])
def test_constructs_outside_the_language_are_named_where_they_are(text, message, column):
    with pytest.raises(spf.SpecError, match=f"<string>:1:{column}: " + re.escape(message)):
        parse_expr(text)


def test_limits_and_semirings():
    many = " * ".join(f"(a{k}(i) + b{k}(i))" for k in range(7))
    with pytest.raises(spf.SpecError, match="expands to more than 64 products"):
        parse_expr(f"y(i) = {many}")
    with pytest.raises(spf.SpecError, match="a numeric coefficient has no meaning in a "
                                            "semiring"):
        spf.Kernel("y(i) = 2 * A(i,j) * x(j)", {"A": "CSR"}, semiring="min_plus")
    with pytest.raises(spf.SpecError, match=r"expected an integer, found 2\.5"):
        spf.Semiring(add="a + 2.5", mul="a * b")


FUNCS = [("abs(A(i,j))", np.abs, False), ("exp(A(i,j))", np.exp, True),
         ("max(A(i,j), 0)", lambda a: np.maximum(a, 0), False),
         ("max(A(i,j), 0.5)", lambda a: np.maximum(a, 0.5), True),
         ("sqrt(abs(A(i,j))) / 2", lambda a: np.sqrt(np.abs(a)) / 2, False),
         ("cos(A(i,j)) - 1", lambda a: np.cos(a) - 1, False),
         ("2 / (A(i,j) - 3)", lambda a: 2 / (a - 3), True),
         ("sign(A(i,j))", np.sign, False), ("tanh(A(i,j) / 4)", lambda a: np.tanh(a / 4), False),
         ("pow(A(i,j), 2)", lambda a: np.power(a, 2), False),
         ("sin(A(i,j))", np.sin, False)]


@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "DenseMatrix"])
@pytest.mark.parametrize("expr,ref,dense", FUNCS)
def test_functions_of_one_tensor(expr, ref, dense, layout):
    """f(A) * x: A's entries suffice when Z3 proves f = 0 at 0 (abs, max(., 0), sqrt, sin,
    cos - 1); otherwise A is read densely (exp, max(., 0.5), 2 / (A - 3)), as numpy's
    dense result says."""
    A = _m(5) - 4 * (_m(5) != 0)                      # negative and positive entries
    a = spf.Tensor.from_scipy(layout, sp.csr_matrix(A))
    x = np.linspace(-2, 3, 5)
    k = spf.Kernel(f"y(i) = ({expr}) * x(j)", {"A": layout})
    assert (list(k.read_densely) == ["A"]) == (dense and layout != "DenseMatrix")
    sparse = layout != "DenseMatrix"         # a dense operand stores every element
    assert ("values: " in k.report()) == sparse
    assert ("read densely" in k.report()) == (dense and sparse)
    with np.errstate(all="ignore"):
        want = ref(A.toarray()) @ x
    np.testing.assert_allclose(k.compile()(A=a, x=x), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["int32", "float32", "complex128", "uint8"])
def test_functions_follow_numpys_types(dtype):
    """abs keeps an integer type, sqrt of integers is float64 (of uint8 float16, held as
    float32), float32 stays float32, abs of a complex number is real; complex values have
    no max."""
    d = np.array([[4, 0, 9], [0, 0, 0], [1, 16, 0]]).astype(dtype)
    a = spf.Tensor.from_dense("CSR", d)
    x = np.array([1, 2, 3]).astype(dtype)
    for expr, ref in [("abs(A(i,j))", np.abs), ("sqrt(A(i,j))", np.sqrt)]:
        got = spf.evaluate(f"y(i) = {expr} * x(j)", A=a, x=x)
        want = ref(d) @ x
        held = np.float32 if want.dtype == np.float16 else want.dtype   # float16 as float32
        assert got.dtype == held, (expr, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    if dtype == "complex128":
        with pytest.raises(spf.SpecError, match=r"max\(\) is not defined on complex values"):
            spf.Kernel("y(i) = max(A(i,j), 0) * x(j)", {"A": "CSR"}, dtype=dtype)


def test_functions_in_sums_and_sparse_outputs_and_refusals():
    A, B = _m(1), _m(2)
    layouts = {"A": "CSR", "B": "COO", "C": "CSR"}
    got = spf.evaluate("C(i,j) = abs(A(i,j) - 5) + sqrt(B(i,j))", A=A, B=B, layouts=layouts)
    # abs(A - 5) is 5 at 0: A is read densely, every element takes part (as numpy's)
    np.testing.assert_allclose(got.to_dense(), np.abs(A.toarray() - 5) + np.sqrt(B.toarray()))
    with pytest.raises(spf.SpecError, match=r"functions and divisions of values .* are not "
                                            r"supported under a semiring"):
        spf.Kernel("y(i) = abs(A(i,j)) * x(j)", {"A": "CSR"}, semiring="min_plus")
    src = spf.Kernel("y(i) = exp(A(i,j) / 2) * x(j)", {"A": "CSR"}, dtype="float32").c_source()
    assert "#include <tgmath.h>" in src
    assert_compiles_clean(src)


@pytest.mark.filterwarnings("ignore::spf.GuardLoopWarning")       # COO looks itself up
@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "DenseMatrix"])
def test_a_tensor_read_twice_in_one_product(layout):
    """A(i,j) * A(i,j) and A(i,k) * A(k,j): the tensor is passed once and read as a second
    operand (spf_A_2), looked up like any other."""
    A = _m(6, (6, 6)) - 3 * (_m(6, (6, 6)) != 0)
    a = spf.Tensor.from_scipy(layout, sp.csr_matrix(A))
    d = A.toarray()
    frob = spf.Kernel("s = A(i,j) * A(i,j)", {"A": layout}).compile()
    assert frob.inputs == ["A"]
    np.testing.assert_allclose(frob(A=a), (d * d).sum())
    x = np.linspace(-1, 2, 6)
    got = spf.evaluate("y(i) = sign(A(i,j)) * tanh(A(i,j)) * x(j)", A=a, x=x)
    np.testing.assert_allclose(got, (np.sign(d) * np.tanh(d)) @ x)
    square = spf.Kernel("C(i,j) = A(i,k) * A(k,j)", {"A": layout, "C": "CSR"}).compile()
    np.testing.assert_allclose(square(A=a).to_dense(), d @ d)
    np.testing.assert_allclose(spf.evaluate("y(i) = a * x(i) * a", a=3.0, x=x), 3 * x * 3)


def test_reading_a_tensor_twice_refusals():
    with pytest.raises(spf.SpecError, match="tensor 'A' is used with 2 and 1 indices"):
        parse_expr("y(i) = A(i,j) * A(j) * x(j)")

    class Client:                      # enough of a dask client to reach the check
        scatter = submit = gather = None

    k = spf.Kernel("s = A(i,j) * A(i,j)", {"A": "CSR"}).compile()
    with pytest.raises(spf.ArgumentError, match="reads 'A' twice in one product; "
                                                "partitioning such a kernel is not supported"):
        k.distributed(Client())


@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "DenseMatrix"])
def test_index_values_as_factors(layout):
    """An index's value (int64, as numpy's np.indices) multiplies the tensor factor it
    stands with: A(i,j) * j, A(i,j) * (i - j) (two terms), exp(A(i,j) * j / 4) (dense)."""
    A = _m(7)
    a = spf.Tensor.from_scipy(layout, A)
    d = A.toarray()
    rows, cols = np.indices(d.shape)
    x = np.linspace(-1, 2, 5)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * j * x(j)", A=a, x=x),
                               (d * cols) @ x)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * (i - j)", A=a),
                               (d * (rows - cols)).sum(axis=1))
    np.testing.assert_allclose(spf.evaluate("y(i) = exp(A(i,j) * j / 4)", A=a),
                               np.exp(d * cols / 4).sum(axis=1))
    ints = spf.evaluate("y(i) = A(i,j) * i", A=spf.Tensor.from_scipy(layout, A.astype(np.int8)))
    assert ints.dtype == np.int64                    # int8 times an int64 index, as numpy
    np.testing.assert_array_equal(ints, (d.astype(np.int8) * rows).sum(axis=1))


@pytest.mark.parametrize("layout", ["CSR", "COO", "DCSR", "DenseMatrix"])
def test_comparisons_logic_and_where(layout):
    """Comparisons are 1 or 0 (numpy's bool), logic takes nonzero as true, where() chooses;
    on index values (a diagonal, a band) and on one tensor's values."""
    A = _m(8) - 4 * (_m(8) != 0)
    a = spf.Tensor.from_scipy(layout, A)
    d = A.toarray()
    rows, cols = np.indices(d.shape)
    x = np.linspace(-1, 2, 5)
    cases = [("y(i) = A(i,j) * (i == j)", (d * (rows == cols)).sum(axis=1)),
             ("y(i) = A(i,j) * (i <= j and j < i + 2)",
              (d * ((rows <= cols) & (cols < rows + 2))).sum(axis=1)),
             ("y(i) = A(i,j) * (not (i == j) or j == 0)",
              (d * ((rows != cols) | (cols == 0))).sum(axis=1)),
             ("y(i) = where(A(i,j) > 0, A(i,j), 0) * x(j)", np.where(d > 0, d, 0) @ x),
             ("y(i) = (A(i,j) < -2) * x(j)", (d < -2) @ x),
             ("y(i) = (A(i,j) < 1) * x(j)", (d < 1) @ x)]           # true at 0: dense
    for expr, want in cases:
        k = spf.Kernel(expr, {"A": layout})
        dense = "(A(i,j) < 1)" in expr and layout != "DenseMatrix"
        assert (list(k.read_densely) == ["A"]) == dense, expr
        got = k.compile()(A=a, **({"x": x} if "x(j)" in expr else {}))
        np.testing.assert_allclose(got, want, err_msg=expr)
    src = spf.Kernel("y(i) = where(A(i,j) > 0, A(i,j), 0) * (i != j) * x(j)", {"A": "CSR"},
                     dtype="float32").c_source()
    assert_compiles_clean(src)


@pytest.mark.parametrize("layouts", [{"A": "CSR", "B": "COO"}, {"A": "DCSR", "B": "CSC"}])
def test_expressions_of_several_tensors(layouts):
    """Z3 decides per operand whether the expression is 0 where it stores nothing: both
    stay sparse for where(B > 0, A, 0); max(A, B) and A > B need every element of both; A /
    B is refused unless fill_values=True, then equals numpy's dense result (nan, inf)."""
    A, B = _m(1) - 4 * (_m(1) != 0), _m(2)
    a, b = A.toarray(), B.toarray()
    x = np.linspace(-1, 2, 5)
    cases = [("max(A(i,j), B(i,j))", np.maximum(a, b), ["A", "B"]),
             ("(A(i,j) > B(i,j))", a > b, ["A", "B"]),
             ("where(B(i,j) > 0, A(i,j), 0)", np.where(b > 0, a, 0), []),
             ("A(i,j) * exp(B(i,j))", a * np.exp(b), ["B"]),
             ("abs(A(i,j) - B(i,j)) / 2", np.abs(a - b) / 2, ["A", "B"])]
    for expr, dense, read_densely in cases:
        k = spf.Kernel(f"y(i) = {expr} * x(j)", layouts)
        assert sorted(k.read_densely) == read_densely, expr
        np.testing.assert_allclose(k.compile()(A=A, B=B, x=x), dense @ x, err_msg=expr)
    with pytest.raises(spf.SpecError, match=r"1:8: A\(i,j\) / B\(i,j\): it divides by "
                                            r"B\(i,j\), which is 0 where B stores nothing; "
                                            "pass fill_values=True"):
        spf.Kernel("y(i) = A(i,j) / B(i,j)", layouts)
    k = spf.Kernel("y(i) = A(i,j) / B(i,j)", layouts, fill_values=True)
    with np.errstate(all="ignore"):
        want = (a / b).sum(axis=1)
    np.testing.assert_allclose(k.compile()(A=A, B=B), want)      # nan where b is 0
    assert np.isnan(want).all()
    dense_x = np.array([0.0, 1, 2, -1, 3])           # a dense operand's zeros are values
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) / x(j)", A=A, x=dense_x),
                                   (a / dense_x).sum(axis=1))


UNIONS = [("max(A(i,j), B(i,j))", np.maximum), ("2 * min(A(i,j), B(i,j))",
                                                 lambda a, b: 2 * np.minimum(a, b)),
          ("where(A(i,j) > B(i,j), A(i,j), B(i,j))", lambda a, b: np.where(a > b, a, b)),
          ("abs(A(i,j) - B(i,j))", lambda a, b: np.abs(a - b))]


@pytest.mark.parametrize("layout, parallel", [("CSR", False), ("CSR", True), ("CSC", False),
                                              ("DCSR", False), ("SortedCOO", False)])
def test_union_of_entries_merged(layout, parallel):
    """An expression 0 where both operands store nothing but not where one does iterates
    the union of their entries: a merge of their storage (sparse output in their levels),
    each entry's value the expression of both (0 for the one without it)."""
    A, B = _m(1) - 4 * (_m(1) != 0), _m(2)
    a, b = A.toarray(), B.toarray()
    for expr, ref in UNIONS:
        k = spf.Kernel(f"C(i,j) = {expr}", {"A": layout, "B": layout, "C": layout},
                       parallel=parallel)
        assert not k.read_densely and "union of their entries suffices" in k.report(), expr
        assert "_merge" in k.c_source()
        got = k.compile()(A=spf.Tensor.from_scipy(layout, A), B=spf.Tensor.from_scipy(layout, B))
        np.testing.assert_allclose(got.to_dense(), ref(a, b), err_msg=expr)
        stored = (a != 0) | (b != 0)                 # exactly the union is stored
        assert len(got.values) == stored.sum(), expr


def test_union_falls_back_to_a_dense_read():
    """Operands whose storage is not sorted runs in the output's levels (COO, CSR_unsorted)
    or a dense output: the expression reads them densely (the same values)."""
    A, B = _m(1) - 4 * (_m(1) != 0), _m(2)
    want = np.maximum(A.toarray(), B.toarray())
    for layouts in ({"A": "COO", "B": "COO", "C": "COO"},
                    {"A": "CSR_unsorted", "B": "CSR", "C": "CSR"},
                    {"A": "CSR", "B": "CSR"}):
        k = spf.Kernel("C(i,j) = max(A(i,j), B(i,j))", layouts)
        assert sorted(k.read_densely) == ["A", "B"]
        got = k.compile()(A=spf.Tensor.from_scipy(layouts["A"], A),
                          B=spf.Tensor.from_scipy(layouts["B"], B))
        np.testing.assert_allclose(got.to_dense() if isinstance(got, spf.Tensor) else got, want)


@pytest.mark.parametrize("layout", ["CSR", "COO", "DCSR", "DenseMatrix"])
def test_broadcasting_lower_order_terms_and_numbers(layout):
    """A term that leaves out an output index is broadcast along it, as numpy's; a number
    is a term too. The output must be dense (a sparse one would store every element)."""
    A = _m(9)
    a = spf.Tensor.from_scipy(layout, A)
    d = A.toarray()
    b, c = np.linspace(-1, 1, 5), np.arange(7.0)
    got = spf.evaluate("C(i,j) = A(i,j) + c(i) - 2 * b(j) + 1", A=a, b=b, c=c,
                       layouts={"C": "DenseMatrix"})
    np.testing.assert_allclose(got, d + c[:, None] - 2 * b[None, :] + 1)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * b(j) + 3", A=a, b=b),
                               d @ b + 3)
    np.testing.assert_allclose(spf.evaluate("s = c(i) * c(i) - 1", c=c), c @ c - 1)
    k = spf.Kernel("y(i) += A(i,j) * b(j) + t", {"A": layout}, parallel=True).compile()
    np.testing.assert_allclose(k(A=a, b=b, t=2.0, y=np.ones(7)), 1 + d @ b + 2)
    with pytest.raises(spf.SpecError, match=r"term b\(j\) does not use the output "
                                            r"index\(es\) \['i'\]: broadcast along them it "
                                            "fills every element, so the output 'C' must be "
                                            "dense"):
        spf.Kernel("C(i,j) = A(i,j) + b(j)", {"A": layout, "C": "CSR"})


def test_an_index_value_times_a_scalar_keeps_the_index():
    """``s * j`` folds the index value into the scalar factor's value, which the product
    prints (it printed the scalar alone: ``-(s)`` for ``(b + s) * (-j)``)."""
    a = np.array([[0, 1], [2, 0]], np.uint8)
    s = np.uint32(3)
    got = spf.evaluate("R(i,j) = ((A(i,j) < A(i,j)) + s) * (-j)", A=a, s=s)
    j = np.arange(2)[None, :]
    want = ((a < a) + s) * (-j)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    x = np.arange(4.0)
    for scalar in (np.float32(2.5), np.int8(-128), np.complex128(1 + 2j)):
        got = spf.evaluate("y(i) = s * i + x(i)", s=scalar, x=x)
        assert np.array_equal(got, scalar * np.arange(4) + x)


def test_a_bucketed_output_whose_find_is_sized_by_an_output_extent():
    """The histogram pass of a bucketed sparse output takes the output's extents when a
    find's state is as long as one (``spf_ext`` was undeclared there: a CompileError)."""
    d = np.array([[1, 3, 2], [4, 0, 5], [0, 7, 1]], np.int8)
    expr = "R(i,j) = A(i - j + 1, -j + 3) * A(i, j - i)"
    got = spf.evaluate(expr, A=spf.Tensor.from_dense("SortedCOO", d)).toarray()
    assert np.array_equal(got, spf.evaluate(expr, A=d))
    one = spf.evaluate(expr, A=spf.Tensor.from_dense("SortedCOO", d[:1]))
    assert np.array_equal(one.toarray(), [[0, 6]])


def test_an_appended_output_skips_groups_before_its_extent():
    """A loop over an operand's rows at a positive offset visits groups before the output's
    first row (i = row - 2^40): they have no pointer to set (it was written at a negative
    index: SIGSEGV)."""
    d = np.array([[0, 4], [7, 4], [1, 0], [0, 2]], np.uint32)
    for expr in ("R(i,j) = A(i + 1099511627776, j + 1) * A(i - 3, j)", "R(i,j) = A(i + 2, j)"):
        k = spf.Kernel(expr, {"A": "DCSR", "R": "CSR"},
                       dtype={"A": "uint32", "R": "uint32"}).compile()
        got = k(A=spf.Tensor.from_dense("DCSR", d)).to_dense()
        assert np.array_equal(got, spf.evaluate(expr, A=d))
