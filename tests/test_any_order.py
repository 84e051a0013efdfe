"""Layout files written for every order (``order = "N"``) and default layouts users extend
(a ``defaults.toml`` on ``$SPF_LAYOUT_PATH``): tensors of order 1 to 6 read, written and
converted, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import spf
from spf.front.dims import expand
from spf.front.layout_path import default_layout

SUBSCRIPTS = "ijklmn"


def sparse_array(shape: tuple[int, ...], density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random(shape) < density, rng.uniform(0.5, 2.0, shape), 0.0)


SHAPES = {1: (7,), 2: (5, 3), 3: (3, 4, 2), 4: (3, 4, 2, 5), 5: (2, 3, 1, 4, 3),
          6: (2, 2, 3, 1, 2, 3)}


def test_expansion_writes_the_text_once_per_dimension():
    table = {"relation": "{[$(p#)] -> [$(g#)] : $(g# = p#| and )}", "shape": ["n#", "$(m#)"],
             "fields": {"n#": "int", "data": "double$([n#]|)"},
             "properties": [{"kind": "range", "uf": "idx#", "max": "n# - 1"},
                            {"kind": "injective", "ufs": ["$(idx#)"]}]}
    out = expand(table, 3)
    assert out["relation"] == "{[p0, p1, p2] -> [g0, g1, g2] : g0 = p0 and g1 = p1 and g2 = p2}"
    assert out["shape"] == ["n0", "n1", "n2", "m0", "m1", "m2"]
    assert out["fields"] == {"n0": "int", "n1": "int", "n2": "int", "data": "double[n0][n1][n2]"}
    assert out["properties"] == [
        {"kind": "range", "uf": f"idx{d}", "max": f"n{d} - 1"} for d in range(3)] + [
        {"kind": "injective", "ufs": ["idx0", "idx1", "idx2"]}]
    assert expand({"relation": "{[p] -> [$(g#)] : $(g# = idx#(p)| and )}"}, 2)["relation"] \
        == "{[p] -> [g0, g1] : g0 = idx0(p) and g1 = idx1(p)}"


@pytest.mark.parametrize("order", [4, 5, 6])
def test_dense_default_for_any_order(order):
    shape = SHAPES[order]
    a, b = sparse_array(shape, 0.6, order), sparse_array(shape[1:], 0.9, order + 1)
    sub = SUBSCRIPTS[:order]
    expr = f"y(i) = A({', '.join(sub)}) * B({', '.join(sub[1:])})"
    y = spf.evaluate(expr, A=a, B=b)
    np.testing.assert_allclose(y, np.einsum(f"{sub},{sub[1:]}->i", a, b))
    assert default_layout(order).order == order
    assert default_layout(order).name == "DenseTensor"
    assert default_layout(3).name == "DenseTensor3"          # the listed order comes first


@pytest.mark.parametrize("order", [1, 2, 4, 5])
@pytest.mark.parametrize("case", ["random", "empty", "one"])
def test_coordinate_layout_of_any_order_round_trips(order, case):
    shape = SHAPES[order]
    a = {"random": sparse_array(shape, 0.3, 7), "empty": np.zeros(shape),
         "one": np.zeros(shape)}[case]
    if case == "one":
        a[tuple(n - 1 for n in shape)] = 2.5
    t = spf.Tensor.from_dense("COOTensor", a)
    assert t.layout.order == order and t.layout.params == {"N": order}
    np.testing.assert_array_equal(t.to_dense(), a)
    dense = t.convert("DenseTensor")
    assert dense.layout.params == {"N": order}
    np.testing.assert_array_equal(dense.to_dense(), a)
    back = spf.Tensor.from_dense("DenseTensor", a).convert("COOTensor")
    np.testing.assert_array_equal(back.to_dense(), a)
    assert back.values.size == np.count_nonzero(a)


def test_unsorted_coordinates_of_order_4_in_a_kernel_and_as_its_output():
    a, b = sparse_array(SHAPES[4], 0.3, 11), sparse_array(SHAPES[4], 0.6, 12)
    coo = spf.Tensor.from_dense("COOTensor", a)
    perm = np.random.default_rng(3).permutation(coo.values.size)
    fields = {k: (v[perm] if isinstance(v, np.ndarray) else v) for k, v in coo.fields.items()}
    shuffled = spf.Tensor.from_arrays("COOTensor", a.shape, fields)
    k = spf.Kernel("C(i,j,k,l) = A(i,j,k,l) * B(i,j,k,l)", {"A": "COOTensor", "C": "COOTensor"})
    out = k.compile()(A=shuffled, B=b)
    assert out.layout.name == "COOTensor" and out.layout.order == 4
    np.testing.assert_array_equal(out.to_dense(), a * b)
    x = np.random.default_rng(4).uniform(-1, 1, a.shape[3])
    y = spf.Kernel("Y(i,j,k) = A(i,j,k,l) * x(l)", {"A": "COOTensor"}).compile()(A=shuffled, x=x)
    np.testing.assert_allclose(y, np.einsum("ijkl,l->ijk", a, x))


def test_pydata_operand_of_order_4():
    sparse = pytest.importorskip("sparse")
    a, b = sparse_array(SHAPES[4], 0.3, 13), sparse_array(SHAPES[4][1:], 0.8, 14)
    y = spf.evaluate("y(i) = A(i,j,k,l) * B(j,k,l)", A=sparse.COO.from_numpy(a), B=b)
    np.testing.assert_allclose(y, np.einsum("ijkl,jkl->i", a, b))


USER_LAYOUT = """
name = "SortedCoords"
description = "Coordinates of any order, sorted by the first, unique."
order = "R"
relation = "{[p] -> [$(g#)] : 0 <= p < nnz and $(g# = c#(p)| and )}"
value = "v[p]"
shape = ["d#"]

[params]
R = 2

[fields]
"d#" = "int"
nnz = "int"
"c#" = "int[nnz]"
v = "double[nnz]"

[[properties]]
kind = "range"
uf = "c#"
min = "0"
max = "d# - 1"

[[properties]]
kind = "monotonic"
uf = "c0"
order = "<="

[[properties]]
kind = "injective"
ufs = ["$(c#)"]
"""


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    (tmp_path / "SortedCoords.toml").write_text(USER_LAYOUT)
    (tmp_path / "defaults.toml").write_text(
        '[dense]\n2 = "DenseMatrix"\n\n[pydata]\nany = ["SortedCoords"]\n')
    monkeypatch.setenv("SPF_LAYOUT_PATH", str(tmp_path))
    return tmp_path


def test_a_users_layout_for_every_order_and_their_defaults(user_dir):
    a = sparse_array(SHAPES[5], 0.3, 15)
    t = spf.Tensor.from_dense("SortedCoords", a)
    assert t.layout.params == {"R": 5}
    np.testing.assert_array_equal(t.to_dense(), a)
    assert np.all(np.diff(t["c0"]) >= 0)
    np.testing.assert_array_equal(
        spf.Tensor.from_dense("COOTensor", a).convert("SortedCoords").to_dense(), a)
    sparse = pytest.importorskip("sparse")
    b = sparse_array(SHAPES[4], 0.3, 16)
    x = np.arange(1.0, SHAPES[4][3] + 1)
    y = spf.evaluate("Y(i,j,k) = A(i,j,k,l) * x(l)", A=sparse.COO.from_numpy(b), x=x)
    np.testing.assert_allclose(y, np.einsum("ijkl,l->ijk", b, x))


def test_a_users_defaults_come_first(tmp_path, monkeypatch):
    (tmp_path / "defaults.toml").write_text('[dense]\nany = "RowsOfAnyOrder"\n3 = "DenseTensor"\n')
    monkeypatch.setenv("SPF_LAYOUT_PATH", str(tmp_path))
    assert default_layout(3).name == "DenseTensor" and default_layout(3).order == 3
    assert default_layout(2).name == "DenseMatrix"               # the shipped file's own key
    with pytest.raises(spf.SpecError, match="unknown layout 'RowsOfAnyOrder'"):
        default_layout(4)                                        # the user's `any` comes first


def test_a_default_of_the_wrong_order_is_refused(tmp_path, monkeypatch):
    (tmp_path / "defaults.toml").write_text('[dense]\n4 = "DenseMatrix"\n')
    monkeypatch.setenv("SPF_LAYOUT_PATH", str(tmp_path))
    with pytest.raises(spf.SpecError, match="default layout for order 4, DenseMatrix, stores "
                                            "order-2 tensors"):
        default_layout(4)


@pytest.mark.parametrize("change, message", [
    (('order = "R"', 'order = "Q"'), r"'order' must name one of the layout's parameters "
                                     r"\(\['R'\]\), got 'Q'"),
    (("R = 2", "R = 0"), "layout SortedCoords: its order R = 0 must be between 1 and 16"),
    (("R = 2", "R = 17"), "its order R = 17 must be between 1 and 16"),
    (('nnz = "int"', 'nnz = "int"\nd1 = "int"'), "layout SortedCoords: field 'd1' is written "
                                                 "twice"),
    (('"c#" = "int[nnz]"', '"c#" = "int[$(nnz]"'), r"'\$\(' at offset 4 of 'int\[\$\(nnz\]' "
                                                   "is never closed"),
])
def test_mistakes_in_a_file_for_every_order(tmp_path, change, message):
    path = tmp_path / "SortedCoords.toml"
    path.write_text(USER_LAYOUT.replace(*change))
    with pytest.raises(spf.SpecError, match=message):
        spf.load_layout(path)


def test_an_explicit_order_that_does_not_fit_the_data_is_refused():
    with pytest.raises(spf.ArgumentError, match="layout DenseTensor stores order-3 tensors, "
                                                r"got shape \(3, 4, 2, 5\)"):
        spf.Tensor.from_dense("DenseTensor", np.zeros(SHAPES[4]), N=3)
