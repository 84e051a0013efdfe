"""Golden snapshots of generated C: a safety net for changes to lowering and printing.

Each case generates the C of one kernel or conversion (every find, parallel, tiled, each
assembly mode, sums, unions, conversions) and compares it byte for byte with
``tests/golden/<case>.c``.  A change to generated code shows up here as a diff; when it is
intended, regenerate the files with ``SPF_UPDATE_GOLDEN=1 python -m pytest
tests/test_golden.py`` and explain every changed file in the commit message.
"""
from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import assert_compiles_clean

import spf

GOLDEN = Path(__file__).resolve().parent / "golden"
SPMV = "y(i) = A(i,j) * x(j)"
DOT = "v = A(i) * B(i)"
SPMSPM = "C(i,j) = A(i,k) * B(k,j)"
ELTWISE = "C(i,j) = A(i,j) * B(i,j)"


def kernel(expr: str, layouts: dict, **options) -> Callable[[], str]:
    return lambda: spf.Kernel(expr, layouts, **options).c_source()


def conversion(src: str, dst: str, **params) -> Callable[[], str]:
    return lambda: spf.Conversion(src, dst, **params).c_source()


CASES: dict[str, Callable[[], str]] = {
    # finds (paper Table 1, Fig. 2, Fig. 11)
    "dot_sv_sv_auto": kernel(DOT, {"A": "SV", "B": "SV"}),
    "dot_sv_sv_binsearch": kernel(DOT, {"A": "SV", "B": "SV"}, find="binsearch"),
    "dot_sv_sv_hashmap": kernel(DOT, {"A": "SV", "B": "SV"}, find="hashmap"),
    "dot_sv_sv_loop": kernel(DOT, {"A": "SV", "B": "SV"}, find="loop"),
    "dot_sv_unsorted_auto": kernel(DOT, {"A": "SV", "B": "SV_unsorted"}),
    "dot_unsorted_sv_auto": kernel(DOT, {"A": "SV_unsorted", "B": "SV"}),
    "fig11_auto": kernel("v = A(i) * B(i) * C(i)",
                         {"A": "SV", "B": "SV_decreasing", "C": "SV_unsorted"}),
    "spmspv_csr_sv_auto": kernel(SPMV, {"A": "CSR", "x": "SV"}),
    "spmspv_csr_sv_seqiter": kernel(SPMV, {"A": "CSR", "x": "SV"}, find="seqiter"),
    "spmspv_csr_unsorted_hashmap": kernel(SPMV, {"A": "CSR", "x": "SV_unsorted"},
                                          find="hashmap"),
    "spmspv_sortedcoo_sv_auto": kernel(SPMV, {"A": "SortedCOO", "x": "SV"}),
    "spmspv_bcsr_sv_auto": kernel(SPMV, {"A": "BCSR", "x": "SV"}, params={"A": {"B": 3}}),
    "spmspv_ell_unsorted_auto": kernel(SPMV, {"A": "ELL", "x": "SV_unsorted"}),
    # dense vectors: no find
    "spmv_csr": kernel(SPMV, {"A": "CSR"}),
    "spmv_csr_accumulate": kernel("y(i) += A(i,j) * x(j)", {"A": "CSR"}),
    "spmv_coo": kernel(SPMV, {"A": "COO"}),
    "spmv_csc": kernel(SPMV, {"A": "CSC"}),
    "spmv_ell": kernel(SPMV, {"A": "ELL"}),
    "spmv_dia": kernel(SPMV, {"A": "DIA"}),
    "spmv_dcsr": kernel(SPMV, {"A": "DCSR"}),
    "spmv_hyb": kernel(SPMV, {"A": "HYB"}),
    "spmm_csr_dense": kernel(SPMSPM, {"A": "CSR", "B": "DenseMatrix"}),
    "spmspm_csr_csc_dense": kernel(SPMSPM, {"A": "CSR", "B": "CSC"}),
    "ttv_csf": kernel("y(i,j) = A(i,j,k) * x(k)", {"A": "CSF"}),
    # parallel
    "spmv_csr_parallel": kernel(SPMV, {"A": "CSR"}, parallel=True),
    "spmspv_csr_sv_parallel": kernel(SPMV, {"A": "CSR", "x": "SV"}, parallel=True),
    "ttm_csf_parallel": kernel("C(i,j,l) = A(i,j,k) * B(k,l)", {"A": "CSF"}, parallel=True),
    # tiling (paper Fig. 8)
    "dot_tiled_loop": kernel(DOT, {"A": "SV", "B": "SV"}, find="loop", tile={"B.p": 8}),
    # sums (statement splitting)
    "sum_dense": kernel("y(i) = A(i,j) * x(j) + B(i,j) * x(j)", {"A": "CSR", "B": "COO"}),
    "sum_assembled": kernel("C(i,j) = A(i,j) + B(i,j) - D(i,j)",
                            {"A": "CSR", "B": "COO", "D": "DCSR", "C": "CSR"}),
    "sum_merged_csr": kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"}),
    "sum_merged_dcsr": kernel("C(i,j) = A(i,j) - B(i,j) + D(i,j)",
                              {"A": "DCSR", "B": "DCSR", "D": "DCSR", "C": "DCSR"}),
    # assembled outputs: each mode
    "spmspv_append_sv": kernel(SPMV, {"A": "CSR", "x": "SV", "y": "SV"}),
    "spmspm_workspace_csr": kernel(SPMSPM, {"A": "CSR", "B": "CSR", "C": "CSR"}),
    "spmspm_bucket_coo_csr": kernel(SPMSPM, {"A": "COO", "B": "CSR", "C": "CSR"}),
    "spmspm_sort_dcsr": kernel(SPMSPM, {"A": "COO", "B": "CSR", "C": "DCSR"}),
    "eltwise_append_csr": kernel(ELTWISE, {"A": "CSR", "B": "CSR", "C": "CSR"}),
    "spmspm_rows_parallel_csr": kernel(SPMSPM, {"A": "CSR", "B": "CSR", "C": "CSR"},
                                       parallel=True),
    # index arithmetic: a convolution of a sparse image, a strided read
    "conv2d_csr_dense": kernel("O(i,j) = I(i-k,j-l) * F(k,l)",
                               {"I": "CSR", "F": "DenseMatrix", "O": "DenseMatrix"}),
    "strided_spmv_csr": kernel("y(i) = A(i,2*j) * x(j)", {"A": "CSR", "x": "DenseVector"}),
    # index width
    "dot_int64": kernel(DOT, {"A": "SV", "B": "SV_unsorted"}, index_type="int64"),
    # conversions
    "convert_coo_csr": conversion("COO", "CSR"),
    "convert_csr_csc": conversion("CSR", "CSC"),
    "convert_dia_csr": conversion("DIA", "CSR"),
    "convert_hyb_csr": conversion("HYB", "CSR"),
    "convert_csr_dense": conversion("CSR", "DenseMatrix"),
    "convert_csr_ell": conversion("CSR", "ELL"),
}


def _diff(want: str, got: str, name: str) -> str:
    lines = list(difflib.unified_diff(want.splitlines(), got.splitlines(), f"golden/{name}.c",
                                      "generated", lineterm=""))
    return "\n".join(lines[:200] + (["..."] if len(lines) > 200 else []))


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_c_matches_golden(name):
    got = CASES[name]()
    path = GOLDEN / f"{name}.c"
    if os.environ.get("SPF_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(got)
        return
    assert path.is_file(), f"no golden file {path.name}: run with SPF_UPDATE_GOLDEN=1"
    want = path.read_text()
    assert got == want, f"generated C of {name} changed:\n{_diff(want, got, name)}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_c_compiles_clean(name):
    src = (GOLDEN / f"{name}.c").read_text()
    assert_compiles_clean(src, ("-fopenmp",) if "#pragma omp" in src else ())


def test_no_stale_golden_files():
    stale = sorted(p.stem for p in GOLDEN.glob("*.c") if p.stem not in CASES)
    assert not stale, f"golden files without a case: {stale}"


_HASHES = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import spf
from test_golden import CASES, kernel
cases = dict(CASES)
for name in spf.layout_names():      # every shipped layout read into a dense output
    lay = spf.load_layout(name, **({"B": 2} if "B" in spf.load_layout(name).params else {}))
    idx = ",".join("ijk"[:lay.order])
    cases[f"copy_{name}"] = kernel(f"D({idx}) = T({idx})", {"T": lay})
import os, tempfile
from test_reliability import SELL       # a slot's column read through two index arrays
path = os.path.join(tempfile.mkdtemp(), "SELL.toml")
with open(path, "w") as fh:
    fh.write(SELL)
sell = spf.load_layout(path)
sell = sell.with_params(**{p: 4 for p in sell.params})
cases["copy_sell"] = kernel("D(i,j) = T(i,j)", {"T": sell})
print(json.dumps({name: hashlib.sha256(make().encode()).hexdigest()
                  for name, make in cases.items()}))
"""


@pytest.mark.slow
def test_generated_c_does_not_depend_on_the_hash_seed():
    """Two processes with different string hash seeds generate the same C for every case
    (a choice made by iterating a set once named the index array of a comment by chance)."""
    import json
    import subprocess
    import sys
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", _HASHES, str(Path(__file__).parent)],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    assert runs[0] == runs[1], sorted(k for k in runs[0] if runs[0][k] != runs[1][k])
