"""Layouts users already declare that the relation writer used to refuse (issue 53): a SELL-C-sigma
whose slot index comes before its row-in-slice index, CSB with 2-D block pointers, and BCSR
with R x C blocks and a numBlockCols field only a ``linear`` property pins; each written from
CSR and COO and read back as scipy says (empty rows, one entry, rectangular, empty)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.front.layout_path import load_layout
from spf.front.writing import write_plan

LAYOUTS = Path(__file__).resolve().parent.parent / "layouts"


def _variant(tmp_path: Path, base: str, name: str, edits: list[tuple[str, str]]) -> str:
    text = (LAYOUTS / f"{base}.toml").read_text().replace(f'name = "{base}"', f'name = "{name}"')
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


def _sell_slot_first(tmp_path: Path) -> str:
    return _variant(tmp_path, "SELL_sigma", "SELL_slot_first", [("{[s, r, k] ->", "{[s, k, r] ->")])


def _csb_2d(tmp_path: Path) -> str:
    return _variant(tmp_path, "CSB", "CSB_ptr2d", [
        ("blkStart(bi, bj) <= k < blkEnd(bi, bj)", "blkPtr(bi, bj) <= k < blkPtr(bi, bj + 1)"),
        ('blkStart = "int[numBlockRows][numBlockCols]"\nblkEnd = "int[numBlockRows][numBlockCols]"',
         'blkPtr = "int[numBlockRows][numBlockCols + 1]"')])


PIN = """
[[properties]]
kind = "linear"
holds = "HOLDS"
"""


def _bcsr_rc(tmp_path: Path, holds: str | None = "numCols <= C * numBlockCols and "
             "C * numBlockCols < numCols + C") -> str:
    path = _variant(tmp_path, "BCSR", "BCSR_RxC", [
        ('packer = "BCSR.py"\n', ""),
        ("0 <= pk < B and 0 <= pl < B and gi = B*pi + pk", "0 <= pk < R and 0 <= pl < C and "
         "gi = R*pi + pk"),
        ("[params]\nB = 8", "[params]\nR = 2\nC = 3"),
        ("double[rowPtr(numBlockRows)][B][B]", "double[rowPtr(numBlockRows)][R][C]"),
        ('numBlockRows = "int"\n', 'numBlockRows = "int"\nnumBlockCols = "int"\n'),
        ('gap = "B"', 'gap = "C"')])
    if holds is not None:
        Path(path).write_text(Path(path).read_text() + PIN.replace("HOLDS", holds))
    return path


def _matrices() -> list[sp.csr_matrix]:
    rng = np.random.default_rng(53)
    d = rng.integers(1, 9, (11, 7)).astype(float) * (rng.random((11, 7)) < 0.35)
    d[[2, 3, 8]] = 0                                    # empty rows
    one = np.zeros((5, 9))
    one[3, 7] = 2.5
    return [sp.csr_matrix(d), sp.csr_matrix(d.T), sp.csr_matrix(one),
            sp.csr_matrix((4, 6)), sp.csr_matrix((0, 0))]


def _check(path: str) -> None:
    for m in _matrices():
        coo = m.tocoo()
        unsorted = sp.coo_matrix((coo.data[::-1], (coo.row[::-1], coo.col[::-1])), m.shape)
        for t in (spf.Tensor.from_scipy("CSR", m), spf.Tensor.from_scipy("COO", unsorted)):
            out = t.convert(path, allow_padding=True)
            np.testing.assert_array_equal(out.to_dense(), m.toarray())
            np.testing.assert_array_equal(out.convert("CSR").to_dense(), m.toarray())
            if m.shape[1]:
                x = np.arange(1.0, m.shape[1] + 1)
                y = spf.evaluate("y(i) = A(i,j) * x(j)", A=out, x=x)
                np.testing.assert_allclose(np.asarray(y), m @ x)


def test_sell_with_its_slot_index_first_is_written(tmp_path):
    path = _sell_slot_first(tmp_path)
    _check(path)
    m = _matrices()[0]
    shipped = spf.Tensor.from_scipy("CSR", m).convert("SELL_sigma", allow_padding=True)
    mine = spf.Tensor.from_scipy("CSR", m).convert(path, allow_padding=True)
    for f in ("perm", "sliceWidth", "slicePtr", "colIdx", "data"):    # the same storage
        np.testing.assert_array_equal(np.asarray(mine.fields[f]), np.asarray(shipped.fields[f]))


def test_csb_with_two_dimensional_block_pointers_is_written(tmp_path):
    path = _csb_2d(tmp_path)
    _check(path)
    m = _matrices()[0]
    out = spf.Tensor.from_scipy("CSR", m).convert(path)
    ptr = np.asarray(out.fields["blkPtr"]).reshape(out.fields["numBlockRows"], -1)
    b = 4
    counts = [[m[b * i:b * i + b, b * j:b * j + b].nnz for j in range(ptr.shape[1] - 1)]
              for i in range(ptr.shape[0])]
    np.testing.assert_array_equal(np.diff(ptr, axis=1), counts)
    np.testing.assert_array_equal(ptr[1:, 0], ptr[:-1, -1])     # rows follow each other


def test_bcsr_with_rectangular_blocks_pins_num_block_cols_by_its_linear_property(tmp_path):
    path = _bcsr_rc(tmp_path)
    _check(path)
    out = spf.Tensor.from_scipy("CSR", _matrices()[0]).convert(path, allow_padding=True)
    assert out.fields["numBlockCols"] == -(-7 // 3)
    assert "numBlockCols = the least value its linear property allows" in \
        spf.Conversion("CSR", path).report()


@pytest.mark.parametrize("holds", [None, "numCols <= C * numBlockCols"])
def test_an_unpinned_scalar_field_names_the_property_that_would_pin_it(tmp_path, holds):
    path = _bcsr_rc(tmp_path, holds)
    with pytest.raises(spf.SpecError) as e:
        write_plan(load_layout(path))
    text = str(e.value)
    assert "layout BCSR_RxC cannot be written: the scalar field(s) numBlockCols are given " \
        "neither by the shape" in text
    assert 'a property kind = "linear" whose holds bounds numBlockCols below and above ' \
        "(or equates it) by given fields and parameters would pin it" in text
    assert "ArrayRef" not in text and "UFCall" not in text


@pytest.mark.slow
@pytest.mark.parametrize("make", [_sell_slot_first, _csb_2d, _bcsr_rc])
def test_as_a_kernel_output(tmp_path, make):
    m = _matrices()[0]
    c = spf.evaluate("C(i,j) = A(i,j) * 3", A=spf.Tensor.from_scipy("CSR", m),
                     layouts={"C": make(tmp_path)})
    np.testing.assert_array_equal(c.to_dense(), 3 * m.toarray())
