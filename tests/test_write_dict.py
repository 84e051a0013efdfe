"""A value permutation (issue 53, item 3): a layout whose values are read through an index array
the relation does not read (``val[perm(pk)]``, a frozen dictionary: Finch's SparseDict) is
written with each value at the entry's number in the order the entries arrive (insertion
order), ``perm`` mapping each position to it, unless a ``monotonic`` property pins ``perm``
(the identity, or the reverse), or a ``periodic_monotonic`` one whose period holds every
position (else refused, naming what is left open); a key array read through it is refused,
naming it; checked against numpy/scipy, and by the C alone."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from test_conversion_c_driver import NAME, _printed, driver

import spf

MATRICES = {
    "random": sp.random(9, 7, 0.35, format="csr", random_state=11),
    "empty_rows": sp.csr_matrix(np.array([[0, 0, 0], [1.5, 0, 2.0], [0, 0, 0], [0, 3.0, 0]])),
    "one": sp.csr_matrix(([2.5], ([2], [4])), shape=(3, 5)),
    "empty": sp.csr_matrix((4, 6)),
    "wide": sp.random(2, 30, 0.3, format="csr", random_state=3),
}


@pytest.mark.parametrize("src", ["CSR", "CSC", "COO"])
def test_every_source_converts_into_a_value_permutation(src):
    conv = spf.Conversion(src, "CSRDict").compile()
    for name, m in MATRICES.items():
        out = conv(spf.Tensor.from_scipy(src, m.asformat(src.lower())))
        np.testing.assert_array_equal(out.to_dense(), m.toarray(), err_msg=name)
        perm = np.asarray(out.fields["perm"])
        np.testing.assert_array_equal(np.sort(perm), np.arange(m.nnz), err_msg=name)
        back = out.convert("CSR").to_scipy()
        assert (back != m).nnz == 0, name


def test_values_are_kept_in_insertion_order():
    """Entries given out of order keep their values in the order given; perm maps each
    sorted position to its value's slot."""
    rows, cols = np.array([2, 0, 1, 0]), np.array([1, 2, 0, 0])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    t = spf.Tensor.from_coords("CSRDict", (3, 3), [rows, cols], vals)
    np.testing.assert_array_equal(t.fields["val"], vals)
    np.testing.assert_array_equal(t.fields["idx"], [0, 2, 0, 1])
    np.testing.assert_array_equal(t.fields["perm"], [3, 1, 2, 0])
    np.testing.assert_array_equal(t.to_dense(), sp.coo_matrix((vals, (rows, cols)),
                                                              shape=(3, 3)).toarray())


def test_a_value_permutation_as_a_kernel_output_and_operand():
    a = MATRICES["random"]
    csc = spf.Tensor.from_scipy("CSC", a.tocsc())
    k = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSC", "B": "CSC", "C": "CSRDict"})
    c = k.compile()(A=csc, B=csc)
    np.testing.assert_allclose(c.to_dense(), a.multiply(a).toarray())
    x = np.arange(a.shape[1], dtype=float)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=c, x=x)
    np.testing.assert_allclose(y, a.multiply(a) @ x)


def test_the_report_says_what_chose_perm():
    report = spf.Conversion("CSR", "CSRDict").report()
    assert "perm(pk) = the entry's number (the values in the order the entries arrive)" in report


# -- a value permutation pinned by a property; the key array read through it ------------------
CSRDICT = (Path(__file__).parent.parent / "layouts" / "CSRDict.toml").read_text()
PINNED = """
[[properties]]
kind = "monotonic"
uf = "perm"
order = "ORDER"
"""


def _dict_layout(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace('name = "CSRDict"', f'name = "{name}"'))
    return str(path)


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_monotonic_property_pins_the_value_permutation(tmp_path, order):
    """Increasing, perm is the identity (the values in the keys' order); decreasing, the
    reverse: whatever order the entries arrive in."""
    path = _dict_layout(tmp_path, "PinnedDict", CSRDICT + PINNED.replace("ORDER", order))
    rows, cols = np.array([2, 0, 1, 0]), np.array([1, 2, 0, 0])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    t = spf.Tensor.from_coords(path, (3, 3), [rows, cols], vals)
    sorted_vals = [4.0, 2.0, 3.0, 1.0]                 # (0, 0), (0, 2), (1, 0), (2, 1)
    np.testing.assert_array_equal(t.fields["perm"], [0, 1, 2, 3] if order == "<" else [3, 2, 1, 0])
    np.testing.assert_array_equal(t.fields["val"], sorted_vals if order == "<"
                                  else sorted_vals[::-1])
    np.testing.assert_array_equal(t.to_dense(), sp.coo_matrix((vals, (rows, cols)),
                                                              shape=(3, 3)).toarray())
    conv = spf.Conversion("COO", path).compile()
    for name, m in MATRICES.items():
        out = conv(spf.Tensor.from_scipy("COO", m.tocoo()))
        perm = np.asarray(out.fields["perm"])
        np.testing.assert_array_equal(perm, np.arange(m.nnz)[::1 if order == "<" else -1],
                                      err_msg=name)
        np.testing.assert_array_equal(out.to_dense(), m.toarray(), err_msg=name)
        assert (out.convert("CSR").to_scipy() != m).nnz == 0, name


def test_a_reversed_value_permutation_needs_a_scalar_extent(tmp_path):
    text = (CSRDICT + PINNED.replace("ORDER", ">")).replace('nnz = "int"\n', "").replace(
        'max = "nnz"\n', "").replace("[nnz]", "[rowPtr(numRows)]")
    path = _dict_layout(tmp_path, "ReversedDict", text)
    with pytest.raises(spf.SpecError) as err:
        spf.Conversion("CSR", path)
    assert str(err.value).endswith(
        "layout ReversedDict cannot be written: its monotonic property (perm >) makes the value "
        "permutation perm the reverse, perm(pk) = n - 1 - pk, but its extent rowPtr(numRows) is "
        "not a scalar field")


def test_a_key_array_read_through_the_permutation_is_refused_naming_it(tmp_path):
    """``gj = idx(perm(pk))`` (the keys in insertion order too): the position pk is ranked
    by a key read through perm, which nothing chooses; the refusal says so."""
    text = CSRDICT.replace("gj = idx(pk)", "gj = idx(perm(pk))")
    path = _dict_layout(tmp_path, "KeysThroughPerm", text)
    with pytest.raises(spf.SpecError) as err:
        spf.Conversion("CSR", path)
    assert str(err.value).endswith(
        "layout KeysThroughPerm cannot be written: idx(perm(pk)) is read at a position computed "
        "from perm, which nothing determines")


def test_a_pinned_value_permutation_is_written_by_its_c_alone(tmp_path):
    """The reversed permutation's conversion from a C ``main``, no Python in between."""
    path = _dict_layout(tmp_path, "ReversedDict", CSRDICT + PINNED.replace("ORDER", ">"))
    conv = spf.Conversion("CSR", path, name=NAME)
    (tmp_path / "conversion.c").write_text(conv.c_source())
    (tmp_path / "main.c").write_text(driver(conv.c_source(), [
        spf.Tensor.from_scipy("CSR", m) for m in MATRICES.values()]))
    proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror",
                           "main.c", "-o", "main"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    for k, (name, m) in enumerate(MATRICES.items()):
        run = subprocess.run([str(tmp_path / "main"), str(k)], capture_output=True, text=True)
        assert run.returncode == 0, f"{name}: {run.stderr}"
        fields = _printed(run.stdout, conv.dst)
        np.testing.assert_array_equal(fields["perm"], np.arange(m.nnz)[::-1], err_msg=name)
        np.testing.assert_array_equal(fields["val"], m.data[::-1], err_msg=name)
        got = spf.Tensor.from_arrays(conv.dst, m.shape, fields)
        np.testing.assert_array_equal(got.to_dense(), m.toarray(), err_msg=name)


# -- a value permutation ordered by a periodic_monotonic property -----------------------------
VECDICT = """name = "NAME"
relation = "{[s, pk] -> [gi] : s = 0 and ptr(s) <= pk < ptr(s + 1) and gi = idx(pk)}"
value = "val[perm(pk)]"
shape = ["n"]

[fields]
n = "int"
nnz = "int"
ptr = "int[2]"
idx = "int[nnz]"
perm = "int[nnz]"
val = "double[nnz]"

[[properties]]
kind = "periodic_monotonic"
uf = "idx"
period = "s"
order = "<"

[[properties]]
kind = "permutation"
uf = "perm"
"""
PERIODIC = """
[[properties]]
kind = "periodic_monotonic"
uf = "perm"
period = "PERIOD"
order = "ORDER"
"""


@pytest.mark.parametrize("order", ["<", ">"])
def test_a_periodic_monotonic_over_one_period_pins_the_value_permutation(tmp_path, order):
    """A vector dictionary under one root position (``s = 0``, Finch's levels): its period
    holds every position, so it orders perm over the whole array, as ``monotonic`` does."""
    path = _dict_layout(tmp_path, "RootDict", VECDICT.replace("NAME", "RootDict") + PERIODIC
                        .replace("PERIOD", "s").replace("ORDER", order))
    idx, vals = np.array([4, 1, 2]), np.array([1.0, 2.0, 3.0])
    t = spf.Tensor.from_coords(path, (6,), [idx], vals)
    np.testing.assert_array_equal(t.fields["perm"], [0, 1, 2] if order == "<" else [2, 1, 0])
    np.testing.assert_array_equal(t.fields["val"], [2.0, 3.0, 1.0][::1 if order == "<" else -1])
    want = np.zeros(6)
    want[idx] = vals
    np.testing.assert_array_equal(t.to_dense(), want)
    conv = spf.Conversion("SV", path).compile()
    for x in [want, np.zeros(4), np.zeros(0), np.array([0, 0, 2.5])]:
        out = conv(spf.Tensor.from_dense("SV", x))
        nnz = np.count_nonzero(x)
        np.testing.assert_array_equal(out.fields["perm"],
                                      np.arange(nnz)[::1 if order == "<" else -1])
        np.testing.assert_array_equal(out.fields["val"],
                                      x[x != 0][::1 if order == "<" else -1])
        np.testing.assert_array_equal(out.to_dense(), x)
    assert "perm(pk) = " + ("pk" if order == "<" else "nnz - pk - 1") in \
        spf.Conversion("SV", path).report()


def test_a_periodic_monotonic_over_each_row_is_refused_naming_what_is_open(tmp_path):
    """perm sorted within each row leaves open which slots of val each row's values take."""
    path = _dict_layout(tmp_path, "RowSortedDict", CSRDICT + PERIODIC.replace(
        "PERIOD", "pi").replace("ORDER", "<"))
    with pytest.raises(spf.SpecError) as err:
        spf.Conversion("CSR", path)
    assert str(err.value).endswith(
        "layout RowSortedDict cannot be written: its periodic_monotonic property (perm <, "
        "period pi) orders the value permutation perm only within each pi: it leaves open which "
        "slots of val the entries of each pi take; a monotonic property of perm (order < or >, "
        "over the whole array) would pin it")
