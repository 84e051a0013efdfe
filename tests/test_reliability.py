"""Reliability: outputs that alias inputs are refused, relations must fix every logical
coordinate, parenthesized 'or' parses, and the messages users met are exact."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.front.layout_path import LAYOUT_DIR

M = sp.random(6, 6, density=0.4, format="csr", random_state=2)


@pytest.fixture(scope="module")
def acc():
    return spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}).compile()


def test_output_aliasing_an_input_is_refused(acc):
    x = np.ones(6)
    with pytest.raises(spf.ArgumentError, match=r"^output 'y' shares memory with input 'x': the "
                                                "kernel would read values it has already "
                                                "overwritten; pass a copy of one of them$"):
        acc(A=M, x=x, y=x)
    both = np.ones(12)
    with pytest.raises(spf.ArgumentError, match="output 'y' shares memory with input 'x'"):
        acc(A=M, x=both[:6], y=both[5:11])             # overlapping views
    with pytest.raises(spf.ArgumentError, match=r"output 'y' shares memory with input 'x' \(its "
                                                r"field 'data'\)"):
        acc(A=M, x=spf.Tensor.from_dense("DenseVector", x), y=x)
    y = both[6:].copy()
    np.testing.assert_allclose(acc(A=M, x=both[:6], y=y), 1 + M @ np.ones(6))   # disjoint


def test_shared_structure_output_aliasing_refused():
    sddmm = spf.Kernel("C(i,j) = A(i,j) * D(i,k) * E(k,j)", {"A": "CSR", "C": "CSR"},
                       share={"C": "A"}).compile()
    a = spf.Tensor.from_scipy("CSR", M)
    d, e = np.ones((6, 2)), np.ones((2, 6))
    c = sddmm.allocate_output(A=a, D=d, E=e)
    out = sddmm(A=a, D=d, E=e, C=c)
    np.testing.assert_allclose(out.to_dense(), M.toarray() * 2)
    with pytest.raises(spf.ArgumentError, match=r"output 'C' shares memory with input 'A' \(its "
                                                r"field 'data'\)"):
        sddmm(A=a, D=d, E=e, C=a)


def test_underdetermined_relation_is_a_spec_error(tmp_path):
    path = tmp_path / "Loose.toml"
    path.write_text('name = "Loose"\n'
                    'relation = "{[p] -> [g] : 0 <= p < nnz and 0 <= g < n}"\n'
                    'value = "data[p]"\nshape = ["n"]\n'
                    '[fields]\nn = "int"\nnnz = "int"\ndata = "double[nnz]"\n')
    with pytest.raises(spf.SpecError, match=r"Loose.toml:2:22: logical index 'g' is not "
                                            "determined by the layout indices and index arrays: "
                                            r"give it an equality such as g = p or g = idx\(p\)"):
        spf.load_layout(str(path))


def test_parenthesized_or():
    rel = spf.Relation.parse("{[p] -> [g] : 0 <= p < n and (g = p or g = p + 1)}")
    assert str(rel) == "{[p] -> [g] : (0 <= p < n and g = p) or (0 <= p < n and g = p + 1)}"
    assert str(spf.Relation.parse("{[p] -> [g] : (p + 1) <= n and g = p}")) == \
        "{[p] -> [g] : p < n and g = p}"
    with pytest.raises(spf.SpecError, match=r"1:49: expected '\)' closing the parenthesized "
                                            "formula, found '}'"):
        spf.Relation.parse("{[p] -> [g] : 0 <= p < n and (g = p or g = p + 1}")
    many = " and ".join(f"(p = {k} or p = {k + 1})" for k in range(7))
    with pytest.raises(spf.SpecError, match="more than 64 disjuncts"):
        spf.Relation.parse(f"{{[p] : {many}}}")


def test_loop_order_message():
    with pytest.raises(spf.SpecError, match=r"loop order: A.pj cannot run outside A.pi: its "
                                            r"upper bound depends on A.pi; place A.pi before "
                                            r"A.pj$"):
        spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, order=["A.pj", "A.pi"])


def test_layout_shadowing_a_shipped_one(tmp_path):
    mine = tmp_path / "CSR.toml"
    shutil.copy(LAYOUT_DIR / "CSR.toml", mine)
    shutil.copy(LAYOUT_DIR / "CSR.py", tmp_path / "CSR.py")
    f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": str(mine)}).compile()
    shipped = spf.Tensor.from_scipy("CSR", M)
    with pytest.raises(spf.ArgumentError) as info:
        f(A=shipped, x=np.ones(6))
    assert str(info.value) == (f"'A': the kernel was generated for layout CSR (from "
                               f"{mine.resolve()}) but got a tensor in layout CSR (from "
                               f"{(LAYOUT_DIR / 'CSR.toml').resolve()})")


def test_huge_parameter():
    with pytest.raises(spf.SpecError, match=r"parameter B = 1099511627776 of layout BCSR does "
                                            r"not fit index_type='int32' \(at most 2147483647\); "
                                            "use index_type='int64'"):
        spf.Tensor.from_scipy("BCSR", M, B=2 ** 40)


def test_layout_found_by_its_name_key(tmp_path, monkeypatch):
    text = (LAYOUT_DIR / "SV.toml").read_text().replace('name = "SV"', 'name = "MyVector"')
    (tmp_path / "my_vector_file.toml").write_text(text)
    shutil.copy(LAYOUT_DIR / "sparse_vector.py", tmp_path)
    monkeypatch.setenv("SPF_LAYOUT_PATH", str(tmp_path))
    lay = spf.load_layout("MyVector")
    assert lay.name == "MyVector"
    v = spf.Tensor.from_coords(lay, (5,), ([3, 1],), [1.0, 2.0])
    dot = spf.Kernel("s = a(i) * b(i)", {"a": "MyVector"}).compile()
    assert dot(a=v, b=np.arange(5.0)) == pytest.approx(3 * 1 + 1 * 2)


def test_generate_help_lists_every_find():
    out = subprocess.run([sys.executable, "-m", "spf", "generate", "--help"],
                         capture_output=True, text=True, check=True).stdout
    flat = " ".join(out.split())
    assert "auto, seqiter, densemap, hashmap, binsearch, loop" in flat


# --- every read in bounds, for layouts that declare no property ---------------------------
BARE = {
    "BareCSR": ("{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pj < rowPtr(pi + 1) "
                "and gi = pi and gj = colIdx(pj)}", "data[pj]", ["numRows", "numCols"],
                {"numRows": "int", "numCols": "int", "rowPtr": "int[numRows + 1]",
                 "colIdx": "int[rowPtr(numRows)]", "data": "double[rowPtr(numRows)]"}),
    "PermCOO": ("{[p] -> [gi, gj] : 0 <= p < nnz and gi = rowIdx(p) and gj = colIdx(p)}",
                "data[perm(p)]", ["numRows", "numCols"],
                {"numRows": "int", "numCols": "int", "nnz": "int", "rowIdx": "int[nnz]",
                 "colIdx": "int[nnz]", "perm": "int[nnz]", "data": "double[nnz]"}),
    "JDS": ("{[pd, pp] -> [gi, gj] : 0 <= pd < numDiags and jdPtr(pd) <= pp < jdPtr(pd + 1) "
            "and gi = perm(pp - jdPtr(pd)) and gj = colIdx(pp)}", "data[pp]",
            ["numRows", "numCols"],
            {"numRows": "int", "numCols": "int", "numDiags": "int", "jdPtr": "int[numDiags + 1]",
             "perm": "int[numRows]", "colIdx": "int[jdPtr(numDiags)]",
             "data": "double[jdPtr(numDiags)]"}),
}


def bare_layout(tmp_path, name: str) -> str:
    relation, value, shape, fields = BARE[name]
    lines = [f'name = "{name}"', f'relation = "{relation}"', f'value = "{value}"',
             f"shape = {shape!r}".replace("'", '"'), "[fields]"]
    lines += [f'{k} = "{v}"' for k, v in fields.items()]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def jds_arrays(dense: np.ndarray) -> dict:
    """Jagged diagonal storage: rows by decreasing length, diagonal d = the d-th entry of
    every row that has one."""
    rows = [np.flatnonzero(r) for r in dense]
    perm = np.argsort([-len(r) for r in rows], kind="stable")
    jd_ptr, cols, vals = [0], [], []
    for d in range(max((len(r) for r in rows), default=0)):
        for i in perm:
            if len(rows[i]) > d:
                cols.append(rows[i][d])
                vals.append(dense[i, rows[i][d]])
        jd_ptr.append(len(cols))
    return {"jdPtr": jd_ptr, "perm": perm, "colIdx": cols, "data": vals}


def test_bare_layouts_compute_right(tmp_path):
    dense = sp.random(7, 5, density=0.4, random_state=3).toarray()
    x = np.arange(1.0, 6.0)
    coo = sp.coo_matrix(dense)
    csr = sp.csr_matrix(dense)
    cases = {
        "BareCSR": {"rowPtr": csr.indptr, "colIdx": csr.indices, "data": csr.data},
        "PermCOO": {"rowIdx": coo.row, "colIdx": coo.col, "perm": np.arange(coo.nnz)[::-1],
                    "data": coo.data[::-1]},
        "JDS": jds_arrays(dense),
    }
    for name, arrays in cases.items():
        path = bare_layout(tmp_path, name)
        t = spf.Tensor.from_arrays(path, dense.shape, arrays)
        f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": path}).compile()
        np.testing.assert_allclose(f(A=t, x=x), dense @ x, err_msg=name)
        np.testing.assert_allclose(t.to_dense(), dense, err_msg=name)


OUT = ", for these index arrays: generated code would read out of bounds"


@pytest.mark.parametrize("name,arrays,message", [
    ("BareCSR", {"rowPtr": [0, 5, 2], "colIdx": [0, 1], "data": [1.0, 2.0]},
     "the read colIdx[pj] = colIdx[2] falls outside colIdx, whose extent [rowPtr[numRows]] is "
     "2" + OUT),
    ("BareCSR", {"rowPtr": [0, 1, 2], "colIdx": [0, 7], "data": [1.0, 2.0]},
     "colIdx[1] = 7 is outside 0..numCols - 1 = 0..2 (logical coordinate 1)"),
    ("PermCOO", {"rowIdx": [0, 1], "colIdx": [0, 1], "perm": [0, 2], "data": [1.0, 2.0]},
     "the read data[perm[p]] = data[2] falls outside data, whose extent [nnz] is 2" + OUT),
    ("PermCOO", {"rowIdx": [0, -1], "colIdx": [0, 1], "perm": [0, 1], "data": [1.0, 2.0]},
     "rowIdx[1] = -1 is outside 0..numRows - 1 = 0..1 (logical coordinate 0)"),
    ("JDS", {"jdPtr": [0, 3, 2], "perm": [0, 1], "colIdx": [0, 1], "data": [1.0] * 2},
     "the read perm[pp - jdPtr[pd]] = perm[2] falls outside perm, whose extent [numRows] is "
     "2" + OUT),
    ("JDS", {"jdPtr": [0, 2, 3], "perm": [0, 5], "colIdx": [0, 1, 2], "data": [1.0] * 3},
     "perm[1] = 5 is outside 0..numRows - 1 = 0..1 (logical coordinate 0)"),
])
def test_bare_layouts_refuse_reads_out_of_bounds(tmp_path, name, arrays, message):
    """Data that once passed every check and crashed the kernels is refused when built; the
    message names the read or the index array entry, its position and its value."""
    path = bare_layout(tmp_path, name)
    with pytest.raises(spf.ArgumentError) as info:
        spf.Tensor.from_arrays(path, (2, 3), arrays)
    assert str(info.value) == f"{name} tensor: {message}"


def test_refusals_name_the_real_reason(tmp_path):
    perm = bare_layout(tmp_path, "PermCOO")     # a value permutation: written (docs/layouts.md)
    a = sp.random(6, 5, density=0.4, format="csr", random_state=2)
    c = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": perm}).compile()(
        A=spf.Tensor.from_scipy("CSR", a), B=spf.Tensor.from_scipy("CSR", a.T.tocsr()))
    np.testing.assert_allclose(c.to_dense(), (a @ a.T).toarray())
    jds = bare_layout(tmp_path, "JDS")
    with pytest.raises(spf.SpecError, match=r"cannot convert into layout JDS: layout JDS cannot "
                                            r"be assembled: coordinate gi = perm\(pp - "
                                            r"jdPtr\(pd\)\) is neither .*; and layout JDS cannot "
                                            r"be written: "):
        spf.Conversion("CSR", jds)


# --- union layouts: HYB (ELL part + COO part) -------------------------------------------
@pytest.mark.parametrize("name", ["random", "long_row", "empty", "one"])
def test_hyb_as_input_and_conversion_source(name):
    m = {"random": sp.random(30, 20, density=0.15, format="csr", random_state=4),
         "long_row": sp.csr_matrix(np.vstack([np.ones((1, 20)),
                                              sp.random(9, 20, density=0.1,
                                                        random_state=5).toarray()])),
         "empty": sp.csr_matrix((5, 4)),
         "one": sp.csr_matrix(([3.0], ([2], [1])), shape=(4, 3))}[name]
    dense = m.toarray()
    t = spf.Tensor.from_scipy("HYB", m)
    assert t["nnz"] + np.count_nonzero(t["colIdx"] >= 0) == m.nnz
    np.testing.assert_allclose(t.to_dense(), dense)
    x = np.linspace(1.0, 2.0, m.shape[1])
    spmv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "HYB"}).compile()
    np.testing.assert_allclose(spmv(A=t, x=x), dense @ x)
    xs = np.where(np.arange(m.shape[1]) % 3 == 0, x, 0.0)
    spmspv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "HYB", "x": "SV"}).compile()
    np.testing.assert_allclose(spmspv(A=t, x=spf.Tensor.from_dense("SV", xs)), dense @ xs)
    b = np.random.default_rng(1).random((m.shape[1], 3))
    spmm = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "HYB"}).compile()
    np.testing.assert_allclose(spmm(A=t, B=b), dense @ b)
    for dst in ("CSR", "COO", "CSC", "DCSR", "DenseMatrix"):
        np.testing.assert_allclose(t.convert(dst).to_dense(), dense, err_msg=dst)


def test_hyb_written_and_checked():
    """Written into, HYB's first part (ELL) takes every entry and its COO part is left empty
    (nnz = 0): a union part left empty is accepted."""
    m = sp.random(12, 9, density=0.3, format="csr", random_state=3)
    c = spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "HYB"}).compile()(
        A=spf.Tensor.from_scipy("CSR", m), B=spf.Tensor.from_scipy("CSR", m))
    np.testing.assert_allclose(c.to_dense(), m.multiply(m).toarray())
    t = spf.Tensor.from_scipy("CSR", m).convert("HYB")
    assert t["nnz"] == 0 and t["width"] == max(np.diff(m.indptr))
    np.testing.assert_allclose(t.to_dense(), m.toarray())
    good = {"colIdx": [[0], [1], [-1]], "rowIdx": [0], "cooCol": [2], "data": [1.0, 2.0, 0.0, 3.0]}
    t = spf.Tensor.from_arrays("HYB", (3, 3), good)
    np.testing.assert_allclose(t.to_dense(), [[1, 0, 3], [0, 2, 0], [0, 0, 0]])
    with pytest.raises(spf.ArgumentError, match="HYB tensor: 'rowIdx' violates range"):
        spf.Tensor.from_arrays("HYB", (3, 3), {**good, "rowIdx": [3]})
    with pytest.raises(spf.ArgumentError, match=r"^HYB tensor: rowIdx\[0\] = 3 is outside "
                                                r"0..numRows - 1 = 0..2 \(logical coordinate 0\)$"):
        spf.Tensor.from_arrays("HYB", (3, 3), {**good, "rowIdx": [3]}, check=False)


def test_check_cli_lists_the_reads_it_checked(tmp_path, capsys):
    from spf import cli
    m = sp.random(5, 4, density=0.4, format="csr", random_state=0)
    path = tmp_path / "a.npz"
    np.savez(path, numRows=5, numCols=4, rowPtr=m.indptr, colIdx=m.indices, data=m.data)
    assert cli.main(["check", "CSR", str(path), "--reads"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("reads checked in bounds: rowPtr[numRows], colIdx[pj], logical "
                        "coordinate 0 in 0..numRows - 1, logical coordinate 1 in 0..numCols - 1, "
                        "data[pj], rowPtr[pi], rowPtr[pi + 1]")


SELL = """name = "SELL"
relation = "{[ps, pk, pr] -> [gi, gj] : 0 <= ps < numSlices and 0 <= pk < sliceWidth(ps) \
and 0 <= pr < C and gi = C*ps + pr and gi < numRows \
and 0 <= colIdx(slicePtr(ps) + C*pk + pr) and gj = colIdx(slicePtr(ps) + C*pk + pr)}"
value = "data[slicePtr(ps) + C*pk + pr]"
shape = ["numRows", "numCols"]
[params]
C = 2
[fields]
numRows = "int"
numCols = "int"
numSlices = "int"
sliceWidth = "int[numSlices]"
slicePtr = "int[numSlices + 1]"
colIdx = "int[slicePtr(numSlices)]"
data = "double[slicePtr(numSlices)]"
"""


def test_sell_c_without_properties(tmp_path):
    """SELL-2: slices of two rows stored column by column, padded with column -1."""
    path = tmp_path / "SELL.toml"
    path.write_text(SELL)
    dense = np.array([[1.0, 0, 2], [0, 3, 0], [4, 5, 6]])
    arrays = {"sliceWidth": [2, 3], "slicePtr": [0, 4, 10],
              "colIdx": [0, 1, 2, -1, 0, -1, 1, -1, 2, -1],
              "data": [1.0, 3.0, 2.0, 0.0, 4.0, 0.0, 5.0, 0.0, 6.0, 0.0]}
    t = spf.Tensor.from_arrays(str(path), (3, 3), arrays)
    np.testing.assert_allclose(t.to_dense(), dense)
    x = np.array([1.0, 2.0, 3.0])
    f = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": str(path)}).compile()
    np.testing.assert_allclose(f(A=t, x=x), dense @ x)
    with pytest.raises(spf.ArgumentError, match=r"^SELL tensor: the read colIdx\[2\*pk \+ pr \+ "
                                                r"slicePtr\[ps\]\] = colIdx\[10\] falls outside "
                                                r"colIdx, whose extent \[slicePtr\[numSlices\]\] "
                                                "is 10, for these index arrays"):
        spf.Tensor.from_arrays(str(path), (3, 3), {**arrays, "sliceWidth": [2, 9]})
