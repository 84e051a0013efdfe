"""The write path in C (spf.store): a conversion into a layout written by its relation is one C
file a C caller uses alone; its refusals and limits come back from the C."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import assert_compiles_clean

import spf
from spf.runtime.memory import allocation_limit

# a 6 x 5 matrix with an empty row, an empty column and rows of 0 to 3 entries
MATRIX = sp.csr_matrix(np.array([[0, 2, 0, 0, 1],
                                 [0, 0, 0, 0, 0],
                                 [3, 0, 4, 5, 0],
                                 [0, 0, 0, 0, 0],
                                 [6, 0, 0, 0, 0],
                                 [0, 7, 0, 8, 0]], dtype=float))

DRIVER = """
#include <stdio.h>
int main(void)
{
    static spf_index_t rowPtr[] = {ROWPTR};
    static spf_index_t colIdx[] = {COLIDX};
    static double data[] = {DATA};
    spf_CSR A = {NROWS, NCOLS, rowPtr, colIdx, data};
    DST B;
    int64_t err[64], sizes[64];
    int status = spf_convert(&B, err, sizes, 0, &A);
    if (status) {
        printf("status %d refusal %lld\\n", status, (long long)err[0]);
        return 0;
    }
PRINT
    return 0;
}
"""


def _driver(conv: spf.Conversion, a: sp.csr_matrix) -> str:
    """A C program converting ``a`` with the conversion's C alone and printing every field
    of the result (arrays by the sizes the conversion reports)."""
    lay = conv.dst
    lines, k = [], 0
    for name, spec in lay.fields.items():
        if spec.is_array:
            rank = len(spec.dims)
            size = " * ".join(f"sizes[{k + d}]" for d in range(rank))
            fmt = "%.17g" if name == lay.value.array else "%lld"
            cast = "(double)" if name == lay.value.array else "(long long)"
            lines.append(f'    printf("{name}");\n    for (int64_t q = 0; q < {size}; ++q) '
                         f'printf(" {fmt}", {cast}B.{name}[q]);\n    printf("\\n");\n'
                         f"    free(B.{name});")
            k += rank
        else:
            lines.append(f'    printf("{name} %lld\\n", (long long)B.{name});')
    text = DRIVER
    for key, value in {"ROWPTR": ", ".join(map(str, a.indptr)),
                       "COLIDX": ", ".join(map(str, a.indices)) or "0",
                       "DATA": ", ".join(repr(float(v)) for v in a.data) or "0.0",
                       "NROWS": str(a.shape[0]), "NCOLS": str(a.shape[1]),
                       "DST": f"spf_{lay.name}" if f"typedef struct spf_{lay.name} {{"
                       in conv.c_source() else _struct_name(conv.c_source(), lay.name),
                       "PRINT": "\n".join(lines)}.items():
        text = text.replace(key, value)
    return conv.c_source() + text


def _struct_name(src: str, layout: str) -> str:
    start = src.index(f"typedef struct spf_{layout}")
    return src[start:].split()[2]


def _run_c(program: str, tmp: Path) -> str:
    c_file, exe = tmp / "convert.c", tmp / "convert"
    c_file.write_text(program)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O1", "-Wall", "-Wextra", "-Werror", str(c_file), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("dst", ["SELL_sigma", "JDS", "DIA", "CSB"])
def test_the_conversion_c_alone_gives_every_field(dst, tmp_path):
    """Compiled with a small C driver, without Python in between: every field equals what
    the Python call gives (which is checked against scipy)."""
    params = {"CSB": {"B": 2}}.get(dst, {})
    conv = spf.Conversion("CSR", dst, allow_padding=True, **params)
    assert_compiles_clean(conv.c_source())
    out = _run_c(_driver(conv, MATRIX), tmp_path)
    t = conv.compile()(spf.Tensor.from_scipy("CSR", MATRIX))
    np.testing.assert_array_equal(t.to_dense(), MATRIX.toarray())
    printed = dict(line.split(" ", 1) if " " in line else (line, "")
                   for line in out.strip().splitlines())
    for name, spec in t.layout.fields.items():
        got = np.array(printed[name].split(), float) if spec.is_array \
            else float(printed[name])
        np.testing.assert_array_equal(got, np.asarray(t.fields[name], float).reshape(-1)
                                      if spec.is_array else float(t.fields[name]),
                                      err_msg=f"{dst}.{name}")


def test_a_refusal_comes_back_from_the_c(tmp_path):
    """An entry the destination cannot hold: the C returns SPF_REFUSED with the refusal's
    number, listed in the file's header; Python names the entry."""
    conv = spf.Conversion("CSR", "LowerTri")
    out = _run_c(_driver(conv, MATRIX[:5, :5].tocsr()), tmp_path)
    status, refusal = out.split()[1], int(out.split()[3])
    assert status == "4"
    header = conv.c_source().split("*/")[0]
    assert f"{refusal}: entry {{at}} cannot be stored in LowerTri" in header
    with pytest.raises(spf.ArgumentError, match=r"entry \(0, 1\) cannot be stored in LowerTri"):
        conv.compile()(spf.Tensor.from_scipy("CSR", MATRIX[:5, :5].tocsr()))


def test_the_byte_limit_is_checked_before_the_c_allocates():
    t = spf.Tensor.from_scipy("CSR", sp.eye(3000, format="csr"))
    with allocation_limit(1 << 12, "a test's limit"), \
            pytest.raises(spf.ArgumentError, match=r"SELL_sigma's .* would take .* MB, over"):
        t.convert("SELL_sigma")


@pytest.mark.parametrize("shape", [(0, 0), (4, 3), (1, 1)])
def test_empty_and_one_entry_tensors_are_written(shape):
    a = np.zeros(shape)
    if a.size:
        a[-1, -1] = 2.5
    for dst in ("SELL_sigma", "JDS", "ELLPACK_R", "CSR4"):
        out = spf.Tensor.from_dense("CSR", a).convert(dst, allow_padding=True)
        np.testing.assert_array_equal(out.to_dense(), a, err_msg=dst)
