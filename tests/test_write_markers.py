"""Derived marker arrays (issue 53, item 3): Finch's SparseByteMap keeps a byte table ``tbl(pi,
j)`` marking which columns of a row hold an entry and the sorted list ``srt`` of those columns;
the writer sets the markers from the list it writes (1 at each entry, 0 elsewhere).  Written as
Finch does (values at the table's slots, ``data[pi][srt(pk)]``) and with the values beside the
list (``data[pk]``), from every kind of source and by the conversion's C alone, checked against
scipy on empty rows, one entry, an empty matrix and rectangular shapes (a table the size of
the matrix is padding by design: ``allow_padding=True``)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from test_conversion_c_driver import NAME, _printed, driver

import spf

BYTEMAP = '''name = "ByteMap"
relation = """{[pi, pk] -> [gi, gj] : 0 <= pi < numRows and ptr(pi) <= pk < ptr(pi + 1)
              and gi = pi and gj = srt(pk) and 1 <= tbl(pi, srt(pk))}"""
value = "VALUE"
shape = ["numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
ptr = "int[numRows + 1]"
srt = "int[ptr(numRows)]"
tbl = "int[numRows][numCols]"
data = "DATA"

[[properties]]
kind = "monotonic"
uf = "ptr"
order = "<="

[[properties]]
kind = "range"
uf = "srt"
min = "0"
max = "numCols - 1"

[[properties]]
kind = "periodic_monotonic"
uf = "srt"
period = "pi"
order = "<"

[[properties]]
kind = "range"
uf = "tbl"
min = "0"
max = "1"
'''
VALUES = {"slots": ("data[pi][srt(pk)]", "double[numRows][numCols]"),   # Finch's
          "list": ("data[pk]", "double[ptr(numRows)]")}


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(5)
    out = {}
    for shape in [(8, 8), (10, 4), (3, 11)]:
        d = rng.random(shape) * (rng.random(shape) < 0.4)
        d[1] = 0.0                                      # an empty row
        out[f"{shape[0]}x{shape[1]}"] = sp.csr_matrix(d)
    out["one"] = sp.csr_matrix(([2.5], ([2], [4])), shape=(3, 5))
    out["empty"] = sp.csr_matrix((4, 6))
    return out


MATRICES = _matrices()


@pytest.fixture(scope="module", params=list(VALUES))
def layout(request, tmp_path_factory) -> str:
    value, data = VALUES[request.param]
    path = tmp_path_factory.mktemp("bytemap") / f"ByteMap_{request.param}.toml"
    path.write_text(BYTEMAP.replace("VALUE", value).replace("DATA", data)
                    .replace('"ByteMap"', f'"ByteMap_{request.param}"'))
    return str(path)


def _check(fields: dict, m: sp.csr_matrix, name: str) -> None:
    """The list is scipy's sorted CSR structure; the markers are its pattern, exactly."""
    np.testing.assert_array_equal(fields["ptr"], m.indptr, err_msg=name)
    np.testing.assert_array_equal(fields["srt"], m.indices, err_msg=name)
    np.testing.assert_array_equal(np.asarray(fields["tbl"]).reshape(m.shape),
                                  (m.toarray() != 0).astype(int), err_msg=name)


def test_a_byte_map_is_written_from_every_source(layout):
    convs = {src: spf.Conversion(src, layout, allow_padding=True).compile()
             for src in ("CSR", "COO")}
    for name, m in MATRICES.items():
        coo = m.tocoo()
        shuffled = np.random.default_rng(2).permutation(coo.nnz)      # entries out of order
        unsorted = sp.coo_matrix((coo.data[shuffled], (coo.row[shuffled], coo.col[shuffled])),
                                 m.shape)
        for src, given in (("CSR", m), ("COO", unsorted)):
            out = convs[src](spf.Tensor.from_scipy(src, given))
            _check(out.fields, m, f"{name} from {src}")
            np.testing.assert_array_equal(out.to_dense(), m.toarray(), err_msg=name)
            back = out.convert("CSR").to_scipy()
            assert (back != m).nnz == 0, name


def test_a_byte_map_is_written_by_its_c_alone(layout, tmp_path):
    """The conversion's ``c_source()`` called from a C ``main`` (no Python in between): the
    printed fields are scipy's structure with its pattern as markers."""
    conv = spf.Conversion("CSR", layout, name=NAME, allow_padding=True)
    tensors = [spf.Tensor.from_scipy("CSR", m) for m in MATRICES.values()]
    (tmp_path / "conversion.c").write_text(conv.c_source())
    (tmp_path / "main.c").write_text(driver(conv.c_source(), tensors))
    proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror",
                           "main.c", "-o", "main"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    for k, (name, m) in enumerate(MATRICES.items()):
        run = subprocess.run([str(Path(tmp_path) / "main"), str(k)], capture_output=True,
                             text=True)
        assert run.returncode == 0, f"{name}: {run.stderr}"
        fields = _printed(run.stdout, conv.dst)
        _check(fields, m, name)
        got = spf.Tensor.from_arrays(conv.dst, m.shape, fields)
        np.testing.assert_array_equal(got.to_dense(), m.toarray(), err_msg=name)
