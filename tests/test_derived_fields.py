"""``[derived]`` fields written by the generated C (issue 53): a conversion into a layout with
a derived field, and a kernel's output assembled in one, write every field of the
destination in C (the derived array from the one the levels write), so a C caller needs
nothing else; checked against scipy, and from a C driver without Python in between."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.errors import SpecError
from spf.front.layout_path import load_layout
from spf.front.storage import storage_of


def _matrices() -> dict[str, sp.csr_matrix]:
    rng = np.random.default_rng(7)
    d = rng.random((9, 13)) * (rng.random((9, 13)) < 0.35)
    d[[0, 4, 8]] = 0.0                                  # empty rows, first and last among them
    return {"random": sp.csr_matrix(d), "empty": sp.csr_matrix((5, 3)),
            "one": sp.csr_matrix(([2.5], ([3], [0])), shape=(4, 6)),
            "no_rows": sp.csr_matrix((0, 4))}


MATRICES = _matrices()

# A C main reading a compressed source (pointer, indices, values) from stdin, converting it
# with spf_convert and printing every field of the CSR_lengths result.
DRIVER = r"""
#include "conversion.c"
#include <stdio.h>

static spf_index_t *read_ints(int64_t n)
{
    spf_index_t *a = malloc(sizeof(spf_index_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t k = 0; k < n; ++k) {
        long v;
        if (scanf("%ld", &v) != 1)
            exit(3);
        a[k] = (spf_index_t)v;
    }
    return a;
}

int main(void)
{
    long rows, cols, nnz, outer;
    if (scanf("%ld %ld %ld %ld", &rows, &cols, &nnz, &outer) != 4)
        return 3;
    SRC A = {0};
    A.numRows = (spf_index_t)rows;
    A.numCols = (spf_index_t)cols;
    A.PTR = read_ints(outer + 1);
    A.IDX = read_ints(nnz);
    A.data = malloc(sizeof(double) * (size_t)(nnz > 0 ? nnz : 1));
    for (long k = 0; k < nnz; ++k)
        if (scanf("%lf", &A.data[k]) != 1)
            return 3;
    DST B = {0};
    int64_t err[64];
    if (spf_convert(&B, err, NULL, 0, &A))     /* sizes, allocates and sets every field */
        return 2;
    const long n = (long)B.rowPtr[B.numRows];
    printf("rowLen");
    for (long r = 0; r < rows; ++r)
        printf(" %ld", (long)B.rowLen[r]);
    printf("\nrowPtr");
    for (long r = 0; r <= rows; ++r)
        printf(" %ld", (long)B.rowPtr[r]);
    printf("\ncolIdx");
    for (long k = 0; k < n; ++k)
        printf(" %ld", (long)B.colIdx[k]);
    printf("\ndata");
    for (long k = 0; k < n; ++k)
        printf(" %.17g", B.data[k]);
    printf("\n");
    return 0;
}
"""

# source layout -> (its pointer field, its index field, scipy format)
SOURCES = {"CSR": ("rowPtr", "colIdx", "csr"), "CSC": ("colPtr", "rowIdx", "csc")}


@pytest.fixture(scope="module")
def drivers(tmp_path_factory) -> dict[str, Path]:
    """A C program per source layout: the conversion's ``c_source()`` and :data:`DRIVER`
    (CSR: entries appended in order; CSC: counted, then scattered)."""
    out = {}
    for src, (ptr, idx, _) in SOURCES.items():
        code = spf.Conversion(src, "CSR_lengths").c_source()
        m = re.search(r"int spf_convert\((\w+) \*restrict B, int64_t \*restrict spf_err, "
                      r"int64_t \*restrict spf_sizes, int64_t spf_max_bytes, "
                      r"const (\w+) \*restrict A\)", code)
        assert m, code
        folder = tmp_path_factory.mktemp(f"driver_{src}")
        (folder / "conversion.c").write_text(code)
        main = (DRIVER.replace("SRC", m.group(2)).replace("DST", m.group(1))
                .replace("PTR", ptr).replace("IDX", idx))
        (folder / "main.c").write_text(main)
        proc = subprocess.run([os.environ.get("CC", "cc"), "-O2", "-fopenmp-simd", "-Wall",
                               "-Wextra", "-Werror", "main.c", "-o", "main"], cwd=folder,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        out[src] = folder / "main"
    return out


@pytest.mark.parametrize("src", sorted(SOURCES))
@pytest.mark.parametrize("kind", sorted(MATRICES))
def test_c_driver_gets_the_derived_field(drivers, src, kind):
    """The C alone writes rowLen (the levels write rowPtr; rowLen follows by its
    [derived] definition), compared with scipy's row lengths."""
    m = MATRICES[kind]
    ptr_fmt = SOURCES[src][2]
    s = m.asformat(ptr_fmt)
    outer = m.shape[0] if ptr_fmt == "csr" else m.shape[1]
    numbers = [*m.shape, s.nnz, outer, *s.indptr, *s.indices]
    stdin = " ".join(map(str, numbers)) + " " + " ".join(repr(float(v)) for v in s.data)
    proc = subprocess.run([str(drivers[src])], input=stdin, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = {line.split(" ")[0]: line.split(" ")[1:] for line in proc.stdout.splitlines()}
    want = m.tocsr()
    want.sort_indices()
    np.testing.assert_array_equal(np.array(got["rowLen"], int), np.diff(want.indptr))
    np.testing.assert_array_equal(np.array(got["rowPtr"], int), want.indptr)
    np.testing.assert_array_equal(np.array(got["colIdx"], int), want.indices)
    np.testing.assert_array_equal(np.array(got["data"], float), want.data)


def test_generated_c_states_the_derived_pass():
    src = spf.Conversion("CSR", "CSR_lengths").c_source()
    assert "then rowLen from rowPtr, as [derived] rowPtr = prefix_sum(rowLen)" in src
    assert "B->rowLen[spf_d] = (spf_index_t)(B->rowPtr[spf_d + 1] - B->rowPtr[spf_d]);" in src


@pytest.mark.parametrize("kind", sorted(MATRICES))
def test_conversions_and_outputs_into_a_derived_layout(kind):
    """From Python: conversions (appended, scattered) and a kernel's output (a sum of two
    terms, merged) in CSR_lengths, every field against scipy."""
    m = MATRICES[kind]
    for src in ("CSR", "CSC", "COO"):
        t = spf.Tensor.from_scipy(src, m.asformat(src.lower())).convert("CSR_lengths")
        np.testing.assert_array_equal(t["rowLen"], np.diff(m.indptr))
        np.testing.assert_array_equal(t["rowPtr"], m.indptr)
        np.testing.assert_array_equal(t.to_dense(), m.toarray())
    a = spf.Tensor.from_scipy("CSR", m)
    y = spf.evaluate("C(i,j) = A(i,j) * B(i,j) + A(i,j)", A=a, B=a, layouts={"C": "CSR_lengths"})
    want = sp.csr_matrix(m.multiply(m) + m)
    np.testing.assert_array_equal(y["rowLen"], np.diff(want.indptr))
    np.testing.assert_allclose(y.to_dense(), want.toarray())


def _variant(tmp_path: Path, name: str, old: str, new: str) -> str:
    text = Path(load_layout("COO").source).read_text()
    assert old in text
    path = tmp_path / f"{name}.toml"
    text = re.sub(r'packer = ".*"\n', "", text)       # its packer lies next to COO's file
    path.write_text(text.replace('name = "COO"', f'name = "{name}"').replace(old, new))
    return str(path)


def test_a_prefix_sum_of_a_written_array_is_computed(tmp_path):
    """The other direction: the levels write the source (a coordinate array), and the C
    computes the derived field, its prefix sum."""
    path = _variant(tmp_path, "COOcum", 'data = "double[numNNZ]"',
                    'data = "double[numNNZ]"\nrowCum = "int[numNNZ + 1]"\n\n'
                    '[derived]\nrowCum = "prefix_sum(2 * rowIdx)"')
    m = MATRICES["random"]
    t = spf.Tensor.from_scipy("CSR", m).convert(path)
    coo = m.tocoo()
    np.testing.assert_array_equal(t["rowCum"], np.concatenate([[0], np.cumsum(2 * coo.row)]))
    assert "rowCum" in spf.Conversion("CSR", path).c_source().split("spf_convert_fill_finish(")[-1]


def test_an_array_nothing_writes_is_refused(tmp_path):
    path = _variant(tmp_path, "COOextra", 'data = "double[numNNZ]"',
                    'data = "double[numNNZ]"\nextra = "int[numNNZ]"')
    with pytest.raises(SpecError, match=r"the array\(s\) extra are written by no level"):
        storage_of(load_layout(path))


def test_a_scaled_pointer_is_not_assembled(tmp_path):
    """rowPtr = prefix_sum(2 * rowLen): the levels would write one position per entry, not
    a multiple of 2 per row, so the layout is not assembled in storage order."""
    text = Path(load_layout("CSR_lengths").source).read_text()
    path = tmp_path / "Twice.toml"
    path.write_text(text.replace('name = "CSR_lengths"', 'name = "Twice"').replace(
        '"prefix_sum(rowLen)"', '"prefix_sum(2 * rowLen)"'))
    with pytest.raises(SpecError, match=r"rowPtr is \[derived\] as prefix_sum\(2 \* rowLen\), "
                                        "so it grows by multiples of 2, which the levels"):
        storage_of(load_layout(str(path)))
