"""Writing layouts whose positions follow from the coordinates rather than from ranked keys
alone (spf.front.writing): the key order a layout's ordering properties declare (a
diagonal-major COO), runs of consecutive coordinates (skyline, Finch's band and block list) and
a run whose slots are shared by rank (JDS); each checked against numpy/scipy on empty rows, one
entry and rectangular shapes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf import cli
from spf.front.layout_path import load_layout
from spf.front.writing import write_plan

HEADER = """name = "NAME"
relation = "RELATION"
value = "VALUE"
shape = ["numRows", "numCols"]
"""

DIAG_COO = HEADER.replace("VALUE", "data[p]") + """
[fields]
numRows = "int"
numCols = "int"
numNNZ = "int"
rowIdx = "int[numNNZ]"
diag = "int[numNNZ]"
data = "double[numNNZ]"

[[properties]]
kind = "monotonic"
uf = "diag"
order = "ORDER"

[[properties]]
kind = "covary_monotonic"
uf = "rowIdx"
with = "diag"
order = "<"

[[properties]]
kind = "range"
uf = "rowIdx"
min = "0"
max = "numRows - 1"

[[properties]]
kind = "range"
uf = "diag"
min = "1 - numRows"
max = "numCols - 1"

[[properties]]
kind = "injective"
ufs = ["rowIdx", "diag"]
"""
DIAG_RELATIONS = {      # the same relation, spelled two ways
    "DiagCOO": "{[p] -> [gi, gj] : 0 <= p < numNNZ and gi = rowIdx(p) and "
               "gj = rowIdx(p) + diag(p)}",
    "DiagCOO2": "{[p] -> [gi, gj] : 0 <= p < numNNZ and gi = rowIdx(p) and gj - gi = diag(p)}"}

POINTER_FIELDS = """
[fields]
numRows = "int"
numCols = "int"
rowPtr = "int[numRows + 1]"
EXTRA
data = "double[rowPtr(numRows)]"

[[properties]]
kind = "monotonic"
uf = "rowPtr"
order = "<="
"""
SKYLINE = HEADER.replace("VALUE", "data[pk]").replace(
    "RELATION", "{[pi, pk] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pk < rowPtr(pi + 1) "
    "and gi = pi and gj = pi + pk - rowPtr(pi + 1) + 1}") + POINTER_FIELDS.replace("EXTRA", "")
BAND = HEADER.replace("VALUE", "data[pk]").replace(
    "RELATION", "{[pi, pk] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pk < rowPtr(pi + 1) "
    "and gi = pi and gj = pk + last(pi) - rowPtr(pi + 1) + 1}") + POINTER_FIELDS.replace(
    "EXTRA", 'last = "int[numRows]"')
VBL = HEADER.replace("VALUE", "data[q]").replace(
    "RELATION", "{[pi, pr, q] -> [gi, gj] : 0 <= pi < numRows and ptr(pi) <= pr < ptr(pi + 1) "
    "and ofs(pr) <= q < ofs(pr + 1) and gi = pi and gj = q + idx(pr) - ofs(pr + 1) + 1}") + """
[fields]
numRows = "int"
numCols = "int"
ptr = "int[numRows + 1]"
idx = "int[ptr(numRows)]"
ofs = "int[ptr(numRows) + 1]"
data = "double[ofs(ptr(numRows))]"

[[properties]]
kind = "periodic_monotonic"
uf = "idx"
period = "pi"
order = "ORDER"
"""


def _layout(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace("NAME", name))
    return str(path)


def _matrices(lower: bool = False) -> list[sp.csr_matrix]:
    """Random with an empty row, tall and wide, one entry, empty (for ``lower``, lower
    triangles whose rows end at their diagonal: a tall one's last rows empty)."""
    rng = np.random.default_rng(7)
    out = []
    for shape in [(9, 9), (11, 6), (5, 12)]:
        d = rng.random(shape) * (rng.random(shape) < 0.35)
        d[1] = 0.0
        if lower:
            d = np.tril(d)
            d[shape[1]:] = 0.0
        out.append(sp.csr_matrix(d))
    out.append(sp.csr_matrix(([2.5], ([3], [1])), shape=(4, 5)))
    out.append(sp.csr_matrix((6, 4)))
    return out


def _sources(m: sp.csr_matrix) -> list[spf.Tensor]:
    """``m`` in CSR and as an unsorted coordinate list."""
    coo = m.tocoo()
    perm = np.random.default_rng(1).permutation(coo.nnz)
    unsorted = sp.coo_matrix((coo.data[perm], (coo.row[perm], coo.col[perm])), m.shape)
    return [spf.Tensor.from_scipy("CSR", m), spf.Tensor.from_scipy("COO", unsorted)]


# --- key order: the layout's ordering properties, not the order of the equalities ----------

@pytest.mark.parametrize("order", ["<=", ">="])
def test_diagonal_major_coo_ranks_by_its_declared_order(tmp_path, order):
    paths = {name: _layout(tmp_path, name, DIAG_COO.replace("RELATION", rel).replace(
        '"ORDER"', f'"{order}"')) for name, rel in DIAG_RELATIONS.items()}
    for m in _matrices():
        coo = m.tocoo()
        diag = coo.col - coo.row
        want = np.lexsort((coo.row, -diag if order == ">=" else diag))
        written = []
        for path in paths.values():
            for t in _sources(m):
                out = t.convert(path)
                np.testing.assert_array_equal(out.to_dense(), m.toarray())
                np.testing.assert_array_equal(out["diag"], diag[want])
                np.testing.assert_array_equal(out["rowIdx"], coo.row[want])
                np.testing.assert_array_equal(out.values, coo.data[want])
                np.testing.assert_array_equal(out.convert("CSR").to_dense(), m.toarray())
                written.append(out)
        for out in written[1:]:         # both spellings, both sources: the same tensor
            for f in ("rowIdx", "diag", "data"):
                np.testing.assert_array_equal(out[f], written[0][f])
    report = spf.Conversion("CSR", paths["DiagCOO"]).report()
    assert "p = position of (diag(p), rowIdx(p))" in report


def test_diagonal_major_coo_as_a_kernel_output(tmp_path):
    path = _layout(tmp_path, "DiagCOO", DIAG_COO.replace(
        "RELATION", DIAG_RELATIONS["DiagCOO"]).replace('"ORDER"', '"<="'))
    m = _matrices()[0]
    c = spf.evaluate("C(i,j) = A(i,j) * 3", A=spf.Tensor.from_scipy("CSR", m),
                     layouts={"C": path})
    np.testing.assert_array_equal(c.to_dense(), 3 * m.toarray())
    assert list(c["diag"]) == sorted(c["diag"])


# --- runs of consecutive coordinates ---------------------------------------------------------

def _skyline(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """rowPtr and data of a lower triangle: each row from its first entry to the diagonal."""
    lengths = [i - np.flatnonzero(r)[0] + 1 if r.any() else 0 for i, r in enumerate(d)]
    data = [d[i, i - n + 1:i + 1] for i, n in enumerate(lengths)]
    return np.concatenate([[0], np.cumsum(lengths)]), np.concatenate(data + [np.zeros(0)])


def test_skyline_is_written_by_every_path(tmp_path):
    path = _layout(tmp_path, "Skyline", SKYLINE)
    for m in _matrices(lower=True):
        ptr, data = _skyline(m.toarray())
        outs = [t.convert(path, allow_padding=True) for t in _sources(m)]
        outs.append(spf.Conversion("COO", path, allow_padding=True).compile()(
            spf.Tensor.from_scipy("COO", m)))
        for out in outs:
            np.testing.assert_array_equal(out["rowPtr"], ptr)
            np.testing.assert_array_equal(out.values, data)
            np.testing.assert_array_equal(out.to_dense(), m.toarray())
    m = _matrices(lower=True)[0]
    m.setdiag(1.0)                  # a profile without much padding
    a = spf.Tensor.from_scipy("CSR", m)
    np.testing.assert_array_equal(spf.Tensor.from_scipy(path, m).to_dense(), m.toarray())
    c = spf.evaluate("C(i,j) = A(i,j) * B(i,j)", A=a, B=a, layouts={"C": path})
    assert c.layout.name == "Skyline"
    np.testing.assert_allclose(c.to_dense(), m.multiply(m).toarray())
    x = np.arange(9.0)
    np.testing.assert_allclose(spf.evaluate("y(i) = S(i,j) * x(j)", S=c, x=x),
                               m.multiply(m) @ x)


@pytest.mark.slow
def test_skyline_output_is_tuned(tmp_path):
    path = _layout(tmp_path, "Skyline", SKYLINE)
    m = _matrices(lower=True)[0]
    m.setdiag(1.0)
    a = spf.Tensor.from_scipy("CSR", m)
    tuned = spf.tune("C(i,j) = A(i,j) * 2", A=a, layouts={"C": path},
                     candidates=["CSR"], calls=1)
    assert tuned.layouts["C"].name == "Skyline"
    np.testing.assert_array_equal(tuned(A=a).to_dense(), 2 * m.toarray())


def test_skyline_conversion_c_and_report_from_the_command_line(tmp_path, capsys):
    path = _layout(tmp_path, "Skyline", SKYLINE)
    assert cli.main(["convert", "CSR", path, "--report", "-o", str(tmp_path / "s.c")]) == 0
    report = capsys.readouterr().out
    assert "pk = rowPtr(pi + 1) + (-i + j - 1) (a run of consecutive coordinates per (pi), " \
           "each group's run ending at offset -1" in report
    assert (tmp_path / "s.c").read_text().startswith("/*")


def test_skyline_refuses_an_entry_past_the_diagonal_by_name(tmp_path):
    path = _layout(tmp_path, "Skyline", SKYLINE)
    d = np.zeros((4, 3))
    d[2, 0] = d[0, 1] = 1.0
    with pytest.raises(spf.ArgumentError, match=r"^entry \(0, 1\) cannot be written into "
                       r"Skyline: its relation puts it at pk = rowPtr\(pi \+ 1\) \+ "
                       r"\(-gi \+ gj - 1\) = rowPtr\(pi \+ 1\) \+ 0, but requires "
                       r"pk < rowPtr\(pi \+ 1\)$"):
        spf.Tensor.from_dense("CSR", d).convert(path)
    d = np.zeros((4, 3))
    d[3, 0] = 1.0                   # its run would end at column 3, outside the shape
    with pytest.raises(spf.ArgumentError, match=r"Skyline cannot hold these entries: .* "
                       r"logical coordinate 1 = pi \+ pk - rowPtr\[pi \+ 1\] \+ 1 = 3 at "
                       r"pi = 3, pk = 3 is outside 0..numCols - 1 = 0..2"):
        spf.Tensor.from_dense("CSR", d).convert(path)
    d = np.zeros((40, 40))
    d[39, 0] = 1.0                  # one entry, a run of 40 slots
    with pytest.raises(spf.ArgumentError, match="padding"):
        spf.Tensor.from_dense("CSR", d).convert(path)


def _blocks(d: np.ndarray) -> list[list[np.ndarray]]:
    """Each row's maximal runs of consecutive stored columns."""
    out = []
    for r in d:
        cols = np.flatnonzero(r)
        out.append(np.split(cols, np.flatnonzero(np.diff(cols) != 1) + 1) if cols.size else [])
    return out


def test_band_chooses_each_rows_run(tmp_path):
    path = _layout(tmp_path, "Band", BAND)
    for m in _matrices():
        d = m.toarray()
        rows = [np.flatnonzero(r) for r in d]
        lengths = [r[-1] - r[0] + 1 if r.size else 0 for r in rows]
        for t in _sources(m):
            out = t.convert(path, allow_padding=True)
            np.testing.assert_array_equal(out.to_dense(), d)
            np.testing.assert_array_equal(np.diff(out["rowPtr"]), lengths)
            np.testing.assert_array_equal(out["last"], [r[-1] if r.size else 0 for r in rows])
            np.testing.assert_array_equal(out.values, np.concatenate(
                [d[i, r[0]:r[-1] + 1] for i, r in enumerate(rows) if r.size] + [np.zeros(0)]))


@pytest.mark.parametrize("order", ["<", ">"])
def test_block_list_stores_maximal_runs(tmp_path, order):
    """Finch's SparseBlockList: one block per maximal run of consecutive columns (no explicit
    zeros), in the order the property of idx declares."""
    path = _layout(tmp_path, "VBL", VBL.replace('"ORDER"', f'"{order}"'))
    for m in _matrices():
        d = m.toarray()
        rows = [b[::-1] if order == ">" else b for b in _blocks(d)]
        blocks = [b for row in rows for b in row]
        for t in _sources(m):
            out = t.convert(path)
            np.testing.assert_array_equal(out.to_dense(), d)
            np.testing.assert_array_equal(out["ptr"], np.cumsum([0] + [len(r) for r in rows]))
            np.testing.assert_array_equal(out["idx"], [b[-1] for b in blocks])
            np.testing.assert_array_equal(out["ofs"], np.cumsum([0] + [len(b) for b in blocks]))
            assert out.values.size == m.nnz


# --- run-length values: one stored value covering a run of coordinates --------------------

RLE = HEADER.replace("VALUE", "data[pr]").replace(
    "RELATION", "{[pi, pr, q] -> [gi, gj] : 0 <= pi < numRows and ptr(pi) <= pr < ptr(pi + 1) "
    "and ofs(pr) <= q < ofs(pr + 1) and gi = pi and gj = q + idx(pr) - ofs(pr)}") + """
[fields]
numRows = "int"
numCols = "int"
ptr = "int[numRows + 1]"
idx = "int[ptr(numRows)]"
ofs = "int[ptr(numRows) + 1]"
data = "double[ptr(numRows)]"
"""
RUN_LIST = HEADER.replace("VALUE", "data[p]").replace(
    "RELATION", "{[p, q] -> [gi] : 0 <= p < numRuns and ofs(p) <= q < ofs(p + 1) and "
    "gi = q + idx(p) - ofs(p)}").replace('["numRows", "numCols"]', '["n"]') + """
[fields]
n = "int"
numRuns = "int"
ofs = "int[numRuns + 1]"
idx = "int[numRuns]"
data = "double[numRuns]"
"""


def _runs(row: np.ndarray) -> list[tuple[int, int, float]]:
    """A row's maximal runs of consecutive nonzero entries holding one value: (start,
    length, value)."""
    out: list[tuple[int, int, float]] = []
    for j in np.flatnonzero(row):
        if out and out[-1][0] + out[-1][1] == j and out[-1][2] == row[j]:
            out[-1] = (out[-1][0], out[-1][1] + 1, out[-1][2])
        else:
            out.append((int(j), 1, float(row[j])))
    return out


def test_run_length_rows_store_maximal_runs_of_one_value(tmp_path):
    """Finch's SparseRLE under a dense level: the value is read at the run (``data[pr]``), so
    the runs are the maximal ones of consecutive columns holding equal values; from CSR and
    an unsorted coordinate list, with empty rows, one entry, rectangular and empty."""
    path = _layout(tmp_path, "RLE", RLE)
    d = np.array([[0, 2, 2, 2, 0, 3, 3], [0, 0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 1, 1, 5],
                  [4, 0, 4, 0, 4, 0, 4.0]])
    for m in [sp.csr_matrix(d), *(sp.csr_matrix(np.round(x.toarray() * 2) / 2)
                                  for x in _matrices())]:
        full = m.toarray()
        rows = [_runs(r) for r in full]
        runs = [r for row in rows for r in row]
        for t in _sources(m):
            out = t.convert(path)
            np.testing.assert_array_equal(out.to_dense(), full)
            np.testing.assert_array_equal(out["ptr"], np.cumsum([0] + [len(r) for r in rows]))
            np.testing.assert_array_equal(out["idx"], [r[0] for r in runs])
            np.testing.assert_array_equal(out["ofs"], np.cumsum([0] + [r[1] for r in runs]))
            np.testing.assert_array_equal(out.values, [r[2] for r in runs])
    report = spf.Conversion("CSR", path).report()
    assert "the maximal run of consecutive j holding one value" in report


def test_a_run_list_vector_from_unordered_coordinates(tmp_path):
    """A vector as runs (Finch's SparseRLE): equal values that are not consecutive are
    separate runs; the coordinates given in any order; C of the conversion writes it alone."""
    path = _layout(tmp_path, "RunList", RUN_LIST)
    x = np.array([0, 2, 2, 2, 0, 7, 2, 2, 0, 9.0])
    order = np.array([6, 1, 9, 3, 7, 2, 5])
    t = spf.Tensor.from_coords(path, (10,), [order], x[order])
    np.testing.assert_array_equal(t.to_dense(), x)
    np.testing.assert_array_equal(t["idx"], [1, 5, 6, 9])
    np.testing.assert_array_equal(t["ofs"], [0, 3, 4, 6, 7])
    np.testing.assert_array_equal(t.values, [2, 7, 2, 9])
    for v in [np.zeros(4), np.array([0, 0, 3.0])]:
        e = spf.Tensor.from_dense(path, v)
        np.testing.assert_array_equal(e.to_dense(), v)
        assert e["numRuns"] == np.count_nonzero(v)
    code = spf.Conversion("SV", path).c_source()
    assert "runs of consecutive offsets holding one value" in code


# --- JDS: a run whose slots the entries of one row share, ranked ---------------------------

def _jds(d: np.ndarray) -> dict[str, np.ndarray]:
    """Rows by decreasing length (stably), diagonal k = the k-th entry of every row having
    one."""
    rows = [np.flatnonzero(r) for r in d]
    perm = np.argsort([-len(r) for r in rows], kind="stable")
    ptr, cols, vals = [0], [], []
    for k in range(max((len(r) for r in rows), default=0)):
        for i in perm:
            if len(rows[i]) > k:
                cols.append(rows[i][k])
                vals.append(d[i, rows[i][k]])
        ptr.append(len(cols))
    return {"jdPtr": np.array(ptr), "perm": perm, "colIdx": np.array(cols, int),
            "data": np.array(vals)}


def test_jds_is_written_and_read_as_scipy_says():
    plan = write_plan(load_layout("JDS"))
    assert [p.index for p in plan.first.positions] == ["pd", "pp"]
    for m in _matrices():
        d = m.toarray()
        want = _jds(d)
        for t in [*_sources(m), spf.Tensor.from_scipy("JDS", m)]:
            out = t if t.layout.name == "JDS" else t.convert("JDS")
            for f in ("jdPtr", "perm", "colIdx"):
                np.testing.assert_array_equal(out[f], want[f])
            np.testing.assert_array_equal(out.values, want["data"])
            assert out["numDiags"] == len(want["jdPtr"]) - 1
            np.testing.assert_array_equal(out.convert("CSR").to_dense(), d)
        x = np.arange(1.0, d.shape[1] + 1)
        np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=out, x=x), d @ x)
    m = _matrices()[1]
    c = spf.evaluate("C(i,j) = A(i,k) * B(k,j)", A=spf.Tensor.from_scipy("CSR", m),
                     B=m.T.tocsr(), layouts={"C": "JDS"})
    np.testing.assert_allclose(c.to_dense(), (m @ m.T).toarray())


def test_jds_without_an_order_leaves_gaps_and_is_refused(tmp_path):
    text = Path(load_layout("JDS").source).read_text().replace('name = "JDS"',
                                                                'name = "JDSUnordered"')
    path = tmp_path / "JDSUnordered.toml"
    path.write_text(text.replace('uf = "perm"\norder = ">="', 'uf = "perm"'))
    d = np.zeros((3, 3))
    d[0, 0] = d[2, 0] = d[2, 2] = 1.0       # rows of 1, 0 and 2 entries, left in row order
    with pytest.raises(spf.ArgumentError, match=r"cannot be written into JDSUnordered: its "
                       "group's run at pp would have a slot without an entry"):
        spf.Tensor.from_dense("CSR", d).convert(str(path))
    d[1, 1] = d[0, 1] = 1.0                 # lengths 2, 1, 2 in row order: a gap still
    with pytest.raises(spf.ArgumentError, match="slot without an entry"):
        spf.Tensor.from_dense("CSR", d).convert(str(path))
    d[2, 2] = 0.0                           # lengths 2, 1, 1: every row as long as the next
    np.testing.assert_array_equal(spf.Tensor.from_dense("CSR", d).convert(
        str(path)).to_dense(), d)


def test_a_complex_kernel_output_written_by_its_relation_keeps_its_type():
    """The entry list a written output is computed into has the output's value type."""
    d = np.zeros((4, 3), complex)
    d[0, 1], d[3, 2] = 1 + 2j, 3 - 1j
    a = spf.Tensor.from_dense("COO", d)
    c = spf.evaluate("C(i,j) = A(i,j) * 2", A=a, layouts={"C": "CSR4"})
    assert c.dtype == np.complex128
    np.testing.assert_array_equal(c.to_dense(), 2 * d)
