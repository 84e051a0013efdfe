"""A union destination's other parts checked by its generated writer, in C (issue 53 item 3):
each entry the first part leaves is found in another part with its value, and no other part
reads an entry the source lacks; no Python read-back.  Compared with scipy."""
from __future__ import annotations

import ctypes
import os
import re
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.back.status import Status
from spf.errors import ArgumentError
from spf.runtime import writer


def _symmetric(n: int, density: float, seed: int) -> sp.csr_matrix:
    a = sp.random(n, n, density, random_state=seed, format="csr")
    return (a + a.T).tocsr()


def _cases() -> dict[str, sp.csr_matrix]:
    rows = _symmetric(9, 0.3, 1).toarray()
    rows[[0, 4, 8]] = 0.0                               # empty rows (and their columns)
    rows[:, [0, 4, 8]] = 0.0
    return {"random": _symmetric(12, 0.3, 2), "empty_rows": sp.csr_matrix(rows),
            "empty": sp.csr_matrix((5, 5)), "one_diagonal": sp.csr_matrix(
                ([2.5], ([3], [3])), shape=(6, 6)), "one_pair": sp.csr_matrix(
                ([1.5, 1.5], ([1, 4], [4, 1])), shape=(6, 6))}


@pytest.mark.parametrize("layout", ["SymCSR", "HYB"])
@pytest.mark.parametrize("case", list(_cases()))
def test_symmetric_input_is_written(layout, case):
    m = _cases()[case]
    t = spf.Tensor.from_scipy("CSR", m).convert(layout, allow_padding=True)
    np.testing.assert_array_equal(t.to_scipy().toarray(), m.toarray())


def _refused(dense: np.ndarray) -> str:
    with pytest.raises(ArgumentError) as info:
        spf.Tensor.from_dense("CSR", dense).convert("SymCSR")
    return str(info.value)


def test_a_mirror_with_another_value_is_named():
    d = _symmetric(10, 0.4, 3).toarray()
    i, j = 6, 2
    d[i, j] = 7.0
    d[j, i] = 5.0
    assert _refused(d) == (f"SymCSR cannot hold these entries: ({i}, {j}): value 7.0, read "
                           "back 5.0 through part 2 of its relation (entries read through two "
                           "parts of the relation differ)")


def test_a_lower_entry_without_its_mirror_is_named():
    d = np.zeros((5, 5))
    d[3, 1] = 4.0
    assert _refused(d) == ("SymCSR cannot hold these entries: (3, 1) of the source (value 4.0) "
                           "is not read back: part 1 of its relation does not hold it and no "
                           "other part reads it")


def test_an_upper_entry_without_its_mirror_is_named():
    assert _refused(np.triu(np.ones((3, 3)))) == (
        "SymCSR cannot hold these entries: (1, 0) would be read back through part 2 of its "
        "relation, but the source has no entry there (read back: 1.0)")


def test_no_python_read_back(monkeypatch):
    """Conversions into a union, into a layout whose slots other tuples could read (SELL's
    padding) and into one that reads back by construction never call the read-back: the
    writer's C checks what it wrote."""
    def boom(*_: object) -> None:
        raise AssertionError("read back in Python")
    monkeypatch.setattr(writer, "read_back", boom)
    m = _symmetric(8, 0.4, 5)
    t = spf.Tensor.from_scipy("CSR", m)
    coo = spf.Tensor.from_scipy("COO", m.tocoo())
    for dst in ["SymCSR", "SELL_sigma", "ELL"]:
        np.testing.assert_array_equal(t.convert(dst).to_dense(), m.toarray())
        np.testing.assert_array_equal(coo.convert(dst).to_dense(), m.toarray())


def test_the_c_alone_refuses(tmp_path):
    """The conversion's C, called through ctypes with nothing of Python's checks after it:
    a non-symmetric input is refused by status, with the refusal the header lists."""
    conv = spf.Conversion("CSR", "SymCSR", name="spf_convert")
    code = conv.c_source()
    (tmp_path / "c.c").write_text(code)
    proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror",
                           "-shared", "-fPIC", "c.c", "-o", "c.so"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    lib = ctypes.CDLL(str(tmp_path / "c.so"))
    m = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [2.0, 3.0, 0.0], [0.0, 0.0, 4.0]]))
    ptr, col = m.indptr.astype(np.int32), m.indices.astype(np.int32)
    data = m.data.astype(np.float64)

    class CSR(ctypes.Structure):
        _fields_ = [("numRows", ctypes.c_int32), ("numCols", ctypes.c_int32),
                    ("rowPtr", ctypes.c_void_p), ("colIdx", ctypes.c_void_p),
                    ("data", ctypes.c_void_p)]
    struct = re.search(r"typedef struct spf_CSR \{\n(.*?)\n\} spf_CSR;", code, re.S)
    assert struct and re.findall(r"(\w+);", struct.group(1)) == [f for f, _ in CSR._fields_]
    a = CSR(3, 3, ptr.ctypes.data, col.ctypes.data, data.ctypes.data)
    out = (ctypes.c_char * 256)()
    err = np.zeros(64, np.int64)
    status = lib.spf_convert(out, err.ctypes.data_as(ctypes.c_void_p), None,
                             ctypes.c_int64(0), ctypes.byref(a))
    assert status == Status.REFUSED
    header: dict[str, str] = {}
    for k, line in re.findall(r"^ \*   (\d+): (.*)$", code, re.M):
        header.setdefault(k, line)          # the writer's refusals come first
    text = header[str(err[0])]
    assert "is not read back" in text and tuple(err[1:3]) == (1, 0)
