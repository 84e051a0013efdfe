"""Trust in the scanner (issue 52): a definition placed before the loops (``pk = 0``) comes
from the layout's relation, never from what its properties say about the index arrays, so no
index array is read at a position before the levels that make it one of the array's (a
SIGSEGV before: a ``range`` of ``rowPtr`` in 0..1 pinned ``pk = 0``, and ``colIdx[0]`` was
read, and searched up to, for a tensor with no entry).  A layout whose properties are false
for the data is refused with an spf error; one that declares no properties is read and
written correctly."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.errors import ArgumentError
from spf.front.layout_path import LAYOUT_DIR

S = np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 4.0], [0.0, 4.0, 5.0]])


def _symcsr(directory: Path, name: str, properties: str) -> str:
    """SymCSR renamed ``name``, without its packer, with ``properties`` in place of its own."""
    text = (LAYOUT_DIR / "SymCSR.toml").read_text()
    text = text.replace('name = "SymCSR"', f'name = "{name}"')
    text = re.sub(r"\n\[\[properties\]\].*", "", text, flags=re.S)
    text = re.sub(r"\n\[packer\].*", "", text, flags=re.S)
    path = directory / f"{name}.toml"
    path.write_text(text + properties)
    return str(path)


FALSE_RANGE = """
[[properties]]
kind = "range"
uf = "rowPtr"
min = "0"
max = "--1"
"""


def test_a_false_range_never_crashes_a_tensor_without_entries(tmp_path):
    path = _symcsr(tmp_path, "SymFalseRange", FALSE_RANGE)
    zeros = spf.Tensor.from_dense(path, np.zeros((3, 3)))
    np.testing.assert_array_equal(zeros.to_dense(), np.zeros((3, 3)))
    empty = spf.Tensor.from_dense(path, np.zeros((0, 0)))
    assert spf.evaluate("y(i) = A(i,j) * x(j)", A=empty, x=np.zeros(0)).shape == (0,)
    y = spf.evaluate("y(i) = A(i,j) * x(j)", A=zeros, x=np.ones(3))
    np.testing.assert_array_equal(y, np.zeros(3))


def test_no_index_array_is_read_before_a_position_is_known_to_be_one_of_its(tmp_path):
    """The range pins ``pk = 0`` for every point; that definition came from the properties
    and was placed first, so ``colIdx[0]`` was read (and a find searched up to it) before any
    row was known to hold position 0: reads of ``colIdx`` must follow those of ``rowPtr``."""
    path = _symcsr(tmp_path, "SymFalseRange", FALSE_RANGE)
    source = spf.Conversion(path, "COO").c_source()
    bodies = source.split("\nstatic int spf_convert_fill_term")[1:]
    assert bodies
    for body in bodies:
        if "A_colIdx[" in body:
            assert body.index("A_rowPtr[") < body.index("A_colIdx["), body


def test_a_false_range_is_refused_for_data_it_does_not_hold(tmp_path):
    path = _symcsr(tmp_path, "SymFalseRange", FALSE_RANGE)
    with pytest.raises(ArgumentError, match=r"SymFalseRange cannot hold these entries: .*'rowPtr' "
                                            r"violates range \(0 <= rowPtr\(a\) <= 1\)"):
        spf.Tensor.from_dense(path, S)


@pytest.mark.parametrize("shape", [(0, 0), (1, 1), (3, 3)])
def test_a_layout_without_properties_is_read_and_written(tmp_path, shape):
    """No facts at all: every bound from the relation alone; empty, one-entry and
    empty-row tensors against numpy."""
    path = _symcsr(tmp_path, "SymBare", "")
    m = S[:shape[0], :shape[1]].copy()
    if shape == (3, 3):
        m[1, :] = m[:, 1] = 0.0             # an empty row (and its mirrored column)
    t = spf.Tensor.from_dense(path, m)
    np.testing.assert_array_equal(t.to_dense(), m)
    x = np.arange(1.0, shape[1] + 1)
    np.testing.assert_allclose(spf.evaluate("y(i) = A(i,j) * x(j)", A=t, x=x), m @ x)
    back = t.convert("CSR")
    np.testing.assert_array_equal(back.to_dense(), m)
    np.testing.assert_array_equal(spf.Tensor.from_scipy(path, sp.csr_matrix(m)).to_dense(), m)
