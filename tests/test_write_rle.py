"""Writing layouts where one stored value covers a run of consecutive coordinates (Finch's
run-length lists, dense run-length lists and intervals, of arrays or scalar fields, written as
spf layouts): the writer stores maximal runs of equal values (spf.front.writing.Cover,
spf.store.lower), checked against numpy/scipy on empty rows, one entry, all-equal rows,
rectangular and empty tensors."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf

VECTOR = """name = "NAME"
relation = "RELATION"
value = "data[p]"
shape = ["n"]

[fields]
n = "int"
numRuns = "int"
FIELDS
data = "double[numRuns]"
"""
RUN_LIST = VECTOR.replace("RELATION", "{[p, q] -> [gi] : 0 <= p < numRuns and 0 <= q and "
                          "left(p) + q <= right(p) and gi = left(p) + q}").replace(
    "FIELDS", 'left = "int[numRuns]"\nright = "int[numRuns]"') + """
[[properties]]
kind = "monotonic"
uf = "left"
order = "<"
"""
DENSE_RLE = VECTOR.replace("RELATION", "{[p, q] -> [gi] : 0 <= p < numRuns and 0 <= q and "
                           "ends(p) + q < ends(p + 1) and gi = ends(p) + q}").replace(
    "FIELDS", 'ends = "int[numRuns + 1]"')
MATRIX = """name = "NAME"
relation = "RELATION"
value = "VALUE"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
FIELDS
"""
ROW_RUNS = MATRIX.replace("RELATION", "{[pi, p, q] -> [gi, gj] : 0 <= pi < numRows and "
                          "rowPtr(pi) <= p < rowPtr(pi + 1) and 0 <= q and left(p) + q <= "
                          "right(p) and gi = pi and gj = left(p) + q}").replace(
    "VALUE", "data[p]").replace("FIELDS", """rowPtr = "int[numRows + 1]"
left = "int[rowPtr(numRows)]"
right = "int[rowPtr(numRows)]"
data = "double[rowPtr(numRows)]"

[[properties]]
kind = "monotonic"
uf = "rowPtr"
order = "<="

[[properties]]
kind = "periodic_monotonic"
uf = "left"
period = "pi"
order = "<"
""")
INTERVAL = MATRIX.replace("RELATION", "{[pi, q] -> [gi, gj] : 0 <= pi < numRows and 0 <= q "
                          "and left(pi) + q <= right(pi) and gi = pi and gj = left(pi) + q}"
                          ).replace("VALUE", "data[pi]").replace("FIELDS", """left = "int[numRows]"
right = "int[numRows]"
data = "double[numRows]"
""")


SCALAR_INTERVAL = VECTOR.replace("RELATION", "{[q] -> [gi] : 0 <= q and lo + q < hi and gi = "
                                 "lo + q}").replace("data[p]", "val[0]").replace(
    'numRuns = "int"\nFIELDS\ndata = "double[numRuns]"',
    'lo = "int"\nhi = "int"\nval = "double[1]"')


def _layout(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace("NAME", name))
    return str(path)


def _runs(row: np.ndarray, dense: bool = False) -> list[tuple[int, int, float]]:
    """The maximal runs (first, last, value) of equal values at consecutive coordinates: of
    the nonzeros, or (``dense``) of every element."""
    out: list[tuple[int, int, float]] = []
    for c in (range(len(row)) if dense else np.flatnonzero(row)):
        if out and out[-1][1] == c - 1 and out[-1][2] == row[c]:
            out[-1] = (out[-1][0], int(c), out[-1][2])
        else:
            out.append((int(c), int(c), float(row[c])))
    return out


def _matrices() -> list[np.ndarray]:
    """Repeated values (an empty row, an all-equal row, equal values that are not consecutive),
    tall and wide, one entry, empty."""
    rng = np.random.default_rng(5)
    out = []
    for shape in [(7, 9), (10, 4), (3, 12)]:
        d = rng.integers(0, 3, shape).astype(float)
        d[1] = 0.0
        d[2] = 4.0
        d[0, :3] = [2.0, 0.0, 2.0]
        out.append(d)
    one = np.zeros((4, 5))
    one[3, 1] = 2.5
    return out + [one, np.zeros((6, 4))]


def _vectors() -> list[np.ndarray]:
    return [np.array([0, 2, 2, 2, 0, 0, 5, 5, 3, 0, 3.0]), np.array([1.0, 1, 1]),
            np.array([0, 0, 4.0]), np.zeros(5), np.zeros(0)]


def test_rows_of_runs_store_maximal_runs(tmp_path):
    path = _layout(tmp_path, "RowRuns", ROW_RUNS)
    for d in _matrices():
        want = [_runs(r) for r in d]
        flat = [x for w in want for x in w]
        m = sp.csr_matrix(d)
        for t in (spf.Tensor.from_scipy("CSR", m), spf.Tensor.from_scipy("COO", m.tocoo())):
            out = t.convert(path)
            np.testing.assert_array_equal(out["rowPtr"], np.cumsum([0] + [len(w) for w in want]))
            np.testing.assert_array_equal(out["left"], [x[0] for x in flat])
            np.testing.assert_array_equal(out["right"], [x[1] for x in flat])
            np.testing.assert_array_equal(out.values, [x[2] for x in flat])
            back = out.convert("CSR")
            np.testing.assert_array_equal(back.to_dense(), d)
            assert back.stored_entries() == m.nnz
    c = spf.evaluate("C(i,j) = A(i,j) * 2", A=spf.Tensor.from_dense("CSR", _matrices()[0]),
                     layouts={"C": path})
    np.testing.assert_array_equal(c.to_dense(), 2 * _matrices()[0])
    conv = spf.Conversion("CSR", path)
    assert "maximal runs: the fewest" in conv.c_source()
    assert "q = 0 at each maximal run of consecutive j holding one value" in conv.report()


@pytest.mark.parametrize("name, text, dense", [("RunList", RUN_LIST, False),
                                               ("DenseRLE", DENSE_RLE, True)])
def test_vector_run_lists(tmp_path, name, text, dense):
    path = _layout(tmp_path, name, text)
    for x in _vectors():
        want = _runs(x, dense)
        out = spf.Tensor.from_dense("SV", x).convert(path)
        if dense:       # every element covered: the gaps are runs of the fill
            np.testing.assert_array_equal(out["ends"], [0] + [r[1] + 1 for r in want])
        else:
            np.testing.assert_array_equal(out["left"], [r[0] for r in want])
            np.testing.assert_array_equal(out["right"], [r[1] for r in want])
        np.testing.assert_array_equal(out.values, [r[2] for r in want])
        np.testing.assert_array_equal(out.to_dense(), x)
        np.testing.assert_array_equal(spf.evaluate("y(i) = x(i)", x=out), x)


def test_interval_holds_one_run_per_row(tmp_path):
    path = _layout(tmp_path, "RowInterval", INTERVAL)
    d = np.array([[0, 2, 2, 0], [0, 0, 0, 0], [7, 7, 7, 7.0]])
    out = spf.Tensor.from_dense("CSR", d).convert(path)
    np.testing.assert_array_equal(out["left"], [1, 0, 0])
    np.testing.assert_array_equal(out["right"], [2, -1, 3])     # an empty row: an empty run
    np.testing.assert_array_equal(out.values, [2.0, 0.0, 7.0])
    np.testing.assert_array_equal(out.convert("CSR").to_dense(), d)
    assert out.convert("CSR").stored_entries() == 6
    d[0] = [0, 2, 0, 2]     # equal values, not consecutive: two runs in row 0
    with pytest.raises(spf.ArgumentError) as err:
        spf.Tensor.from_dense("CSR", d).convert(path)
    assert str(err.value) == "RowInterval holds one interval of one value per gi; the entries " \
        "at gi = 0 form 2 runs"


@pytest.mark.parametrize("bound, empty", [("lo + q < hi", (0, 0)), ("lo + q <= hi", (1, 0))])
def test_an_interval_of_scalar_fields_holds_one_run(tmp_path, bound, empty):
    """Finch's SparseInterval: scalar lo and hi, one value; a vector whose nonzeros are one
    run of one value is written (an empty one: an empty run, no field negative), any other is
    refused, naming its runs."""
    path = _layout(tmp_path, "VecInterval", SCALAR_INTERVAL.replace("lo + q < hi", bound))
    inclusive = bound.endswith("<= hi")
    for x in _vectors() + [np.array([0, 0, 1.5, 1.5, 0]), np.array([2, 0, 2.0])]:
        want = _runs(x)
        t = spf.Tensor.from_dense("SV", x)
        if len(want) > 1:
            with pytest.raises(spf.ArgumentError) as err:
                t.convert(path)
            assert str(err.value) == "VecInterval holds one interval of one value; the " \
                f"entries form {len(want)} runs"
            continue
        out = t.convert(path)
        lo, hi = (want[0][0], want[0][1] + (not inclusive)) if want else empty
        assert (out["lo"], out["hi"]) == (lo, hi)
        np.testing.assert_array_equal(out.values, [want[0][2] if want else 0.0])
        np.testing.assert_array_equal(out.to_dense(), x)
        np.testing.assert_array_equal(spf.evaluate("y(i) = x(i)", x=out), x)
        y = spf.evaluate("y(i) = x(i) * 2", x=t, layouts={"y": path})
        np.testing.assert_array_equal(y.to_dense(), 2 * x)
    assert f"hi = last(i){'' if inclusive else ' + 1'}; lo = i" in \
        spf.Conversion("SV", path).report()


def test_run_lengths_and_what_is_refused(tmp_path):
    lengths = _layout(tmp_path, "RunLengths", RUN_LIST.replace(
        "left(p) + q <= right(p)", "q < len(p)").replace('right = "int[numRuns]"',
                                                           'len = "int[numRuns]"'))
    x = _vectors()[0]
    out = spf.Tensor.from_dense("SV", x).convert(lengths)
    want = _runs(x)
    np.testing.assert_array_equal(out["len"], [r[1] - r[0] + 1 for r in want])
    np.testing.assert_array_equal(out.to_dense(), x)
    open_end = _layout(tmp_path, "OpenEnd", RUN_LIST.replace(    # right and pad: a choice
        "left(p) + q <= right(p)", "left(p) + q <= right(p) + pad(p)").replace(
        'right = "int[numRuns]"', 'right = "int[numRuns]"\npad = "int[numRuns]"'))
    with pytest.raises(spf.SpecError, match=r"layout OpenEnd cannot be written: layout index q "
                       r"places gi by one value slot for several coordinates .*it needs gi = "
                       r"start\(\.\.\.\) \+ q with one index array or scalar field start, "
                       r"and a bound q <= \.\.\. naming one index array read or scalar field "
                       r"where the run ends"):
        spf.Tensor.from_dense("SV", x).convert(open_end)


def test_the_c_alone_writes_runs(tmp_path):
    """CSR -> rows of runs by the conversion's C called from a C driver (no Python between):
    the printed fields equal those spf.convert gives."""
    from test_conversion_c_driver import _printed, driver
    path = _layout(tmp_path, "RowRuns", ROW_RUNS)
    conv = spf.Conversion("CSR", path, name="spf_convert")
    cases = _matrices()
    (tmp_path / "conversion.c").write_text(conv.c_source())
    (tmp_path / "main.c").write_text(driver(conv.c_source(), [
        spf.Tensor.from_dense("CSR", d) for d in cases]))
    proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror",
                           "main.c", "-o", "main"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    for k, d in enumerate(cases):
        run = subprocess.run([str(tmp_path / "main"), str(k)], capture_output=True, text=True)
        fields = _printed(run.stdout, conv.dst)
        want = spf.Tensor.from_dense("CSR", d).convert(path)
        for name, value in want.fields.items():
            np.testing.assert_array_equal(np.asarray(fields[name]), np.asarray(value))


def test_gaps_of_a_dense_run_list_hold_the_tensors_fill(tmp_path):
    """The writer writes gaps with what the tensor holds where it has no entry: the layout's
    fill for from_dense, the source's for a conversion (which keeps the tensor's fill), the
    semiring's zero for a kernel's output, whatever the destination's own fill."""
    path = _layout(tmp_path, "FilledRLE", DENSE_RLE.replace("shape =", "fill = 1.0\nshape ="))
    x = np.array([1, 2, 2, 1, 0, 1, 5, 5, 1.0])
    a = spf.Tensor.from_dense(path, x)          # the 1s are the fill: gaps, runs of 1
    assert a.fill == 1.0 and list(a["ends"]) == [0, 1, 3, 4, 5, 6, 8, 9]
    np.testing.assert_array_equal(a.values, [1, 2, 1, 0, 1, 5, 1])
    back = a.convert("SV").convert(path)        # the SV tensor keeps fill 1
    np.testing.assert_array_equal(back.to_dense(), x)
    for t in (spf.Tensor.from_dense("SV", x), spf.Tensor.from_dense("SV", x).with_fill(7.0)):
        out = t.convert(path)                   # gaps: the source's absent elements
        assert out.fill == t.fill
        np.testing.assert_array_equal(out.to_dense(), t.to_dense())
        np.testing.assert_array_equal(out.values, _runs_values(t.to_dense()))
    y = spf.evaluate("y(i) = x(i) * 2", x=spf.Tensor.from_dense("SV", x), layouts={"y": path})
    assert y.fill == 0.0
    np.testing.assert_array_equal(y.to_dense(), 2 * x)
    np.testing.assert_array_equal(y.values, _runs_values(2 * x))


def _runs_values(x: np.ndarray) -> list[float]:
    return [r[2] for r in _runs(x, True)]


def test_slots_no_entry_writes_hold_the_fill():
    """DIA's slots inside a stored diagonal that no entry writes are read by its relation:
    they hold the tensor's fill (inf here), so the tensor reads back as given."""
    m = np.array([[1, 0, 0], [0, 0, 2], [3, 0, 4.0]])
    a = spf.Tensor.from_scipy("CSR", sp.csr_matrix(m)).with_fill(np.inf)
    d = a.convert("DIA")
    assert d.fill == np.inf and np.isinf(d.values).sum() == d.values.size - 4
    np.testing.assert_array_equal(d.convert("CSR").to_dense(), np.where(m == 0, np.inf, m))


SYM_RUNS = MATRIX.replace("RELATION", "{[pi, p, q] -> [gi, gj] : (0 <= pi < numRows and "
                          "rowPtr(pi) <= p < rowPtr(pi + 1) and 0 <= q and left(p) + q <= "
                          "right(p) and gi = pi and gj = left(p) + q and left(p) + q >= pi) or "
                          "(0 <= pi < numRows and rowPtr(pi) <= p < rowPtr(pi + 1) and 0 <= q "
                          "and left(p) + q <= right(p) and gj = pi and gi = left(p) + q and "
                          "left(p) + q > pi)}").replace(
    'shape = ["numRows", "numCols"]', 'shape = ["numRows", "numRows"]').replace(
    'numCols = "int"\n', "").split("[[properties]]")[0]


def test_a_union_of_runs_holds_the_upper_triangles_runs(tmp_path):
    """Symmetric storage of row runs (a union: the upper triangle's maximal runs, the lower
    triangle read as their mirror): the runs are of the entries the first part holds, and
    the writer checks that the second part reads exactly the others."""
    text = SYM_RUNS.replace("VALUE", "data[p]").replace("FIELDS", """rowPtr = "int[numRows + 1]"
left = "int[rowPtr(numRows)]"
right = "int[rowPtr(numRows)]"
data = "double[rowPtr(numRows)]"
""")
    path = _layout(tmp_path, "SymRuns", text)
    d = np.array([[1, 2, 2, 0], [2, 3, 3, 3], [2, 3, 0, 5], [0, 3, 5, 5.0]])
    for t in (spf.Tensor.from_dense("CSR", d), spf.Tensor.from_dense("COO", d)):
        out = t.convert(path)
        want = [[(a + i, b + i, v) for a, b, v in _runs(row[i:])] for i, row in enumerate(d)]
        np.testing.assert_array_equal(out["rowPtr"], np.cumsum([0] + [len(w) for w in want]))
        np.testing.assert_array_equal(out["left"], [r[0] for w in want for r in w])
        np.testing.assert_array_equal(out["right"], [r[1] for w in want for r in w])
        np.testing.assert_array_equal(out.values, [r[2] for w in want for r in w])
        np.testing.assert_array_equal(out.to_dense(), d)
        np.testing.assert_array_equal(out.convert("CSR", keep_zeros=True).to_dense(), d)
        back = out.convert("CSR")       # each part drops its own zeros (they pad the runs)
        np.testing.assert_array_equal(back.to_dense(), d)
        assert back.stored_entries() == np.count_nonzero(d)
        x = np.arange(4.0)
        np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=out, x=x), d @ x)
    empty = spf.Tensor.from_dense("CSR", np.zeros((3, 3))).convert(path)
    assert list(empty["rowPtr"]) == [0, 0, 0, 0]
    lower = d.copy()
    lower[3, 0] = 7         # no mirror image in the upper triangle
    with pytest.raises(spf.ArgumentError, match=r"\(3, 0\) of the source \(value 7.0\) is "
                       "not read back"):
        spf.Tensor.from_dense("CSR", lower).convert(path)
    lower = d.copy()
    lower[2, 1] = 4         # its mirror holds 3
    with pytest.raises(spf.ArgumentError, match=r"\(2, 1\): value 4.0, read back 3.0 through "
                       "part 2"):
        spf.Tensor.from_dense("CSR", lower).convert(path)
