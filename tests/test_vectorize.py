"""Generated loops the compiler vectorizes, and ``reassociate=True``.

The kernels read every tensor field through a ``restrict`` local and mark the innermost loop
``#pragma omp simd`` where the dependence analysis proves it free (or, with
``reassociate=True``, where it only sums into one element).  gcc's ``-fopt-info-vec`` must
then report the statement's loop vectorized.  Results are checked against numpy/scipy.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.runtime.build import compile_flags, compiler, is_gcc

TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
SPMM = "C(i,l) = A(i,k) * B(k,l)"
SPMV = "y(i) = A(i,j) * x(j)"


def optimization_notes(src: str, kind: str) -> list[str]:
    """gcc's ``-fopt-info-<kind>-optimized`` lines for ``src`` compiled with spf's flags."""
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "kernel.c"
        c_file.write_text(src)
        flags = [f for f in compile_flags() if f != "-shared"]
        proc = subprocess.run([compiler(), *flags, f"-fopt-info-{kind}-optimized", "-c",
                               str(c_file), "-o", str(Path(tmp) / "k.o")],
                              capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.splitlines()


def vectorized_lines(src: str) -> set[int]:
    """Source lines gcc reports as the body of a vectorized loop."""
    return {int(line.split(":")[1]) for line in optimization_notes(src, "vec")
            if "loop vectorized" in line}


def simd_loop_lines(src: str, statement: str) -> set[int]:
    """The lines of the loop under the one ``omp simd`` pragma, up to ``statement`` (gcc
    reports a vectorized loop at its header or at a statement of its body)."""
    rows = src.splitlines()
    (pragma,) = [n for n, row in enumerate(rows, 1) if "#pragma omp simd" in row]
    (line,) = [n for n, row in enumerate(rows, 1) if statement in row]
    assert pragma < line
    return set(range(pragma + 1, line + 1))


needs_gcc = pytest.mark.skipif(not is_gcc(compiler()), reason="-fopt-info-vec is a gcc option")


@needs_gcc
@pytest.mark.parametrize("expr, layouts, statement", [
    (TTM, {"A": "CSF"}, "C_data[(int64_t)((int64_t)(C_p0) * C_n1 + C_p1) * C_n2 + C_p2] +="),
    (SPMM, {"A": "CSR"}, "C_data[(int64_t)(C_p0) * C_n1 + C_p1] +="),
    (SPMM, {"A": "COO"}, "C_data[(int64_t)(C_p0) * C_n1 + C_p1] +="),
])
def test_dense_inner_loop_vectorizes(expr, layouts, statement):
    k = spf.Kernel(expr, layouts)
    src = k.c_source()
    assert "#pragma omp simd\n" in src
    assert simd_loop_lines(src, statement) & vectorized_lines(src)


@needs_gcc
@pytest.mark.parametrize("expr, layouts", [(TTM, {"A": "CSF"}), (SPMM, {"A": "CSR"})])
def test_no_unroll_and_jam_around_the_dense_inner_loop(expr, layouts):
    # gcc's unroll-and-jam of the nonzero loop made these kernels up to 2x slower when built
    # without OpenMP; spf's flags turn it off (spf.runtime.build.GCC_FLAGS)
    src = spf.Kernel(expr, layouts).c_source()
    notes = optimization_notes(src, "loop")
    assert notes and not [n for n in notes if "unroll and jam" in n]


@needs_gcc
def test_reassociated_row_sum_vectorizes():
    src = spf.Kernel(SPMV, {"A": "CSR"}, reassociate=True).c_source()
    assert "#pragma omp simd reduction(+:spf_acc)" in src
    assert simd_loop_lines(src, "spf_acc += A_data[A_pj] * x_data[x_p0];") & \
        vectorized_lines(src)


def test_row_sum_keeps_its_order_without_reassociate():
    k = spf.Kernel(SPMV, {"A": "CSR"})
    assert "omp simd" not in k.c_source() and "simd:" not in k.report()


def test_report_names_the_simd_loop_and_why():
    k = spf.Kernel(SPMV, {"A": "CSR"}, reassociate=True)
    assert "simd: loop A_pj only sums into one element of y (reassociate=True" in k.report()
    assert "simd: loop B_p1 carries no dependence" in spf.Kernel(SPMM, {"A": "CSR"}).report()


def test_no_simd_where_a_find_runs_inside_the_loop():
    k = spf.Kernel(SPMV, {"A": "CSR", "x": "SV"}, find="seqiter", reassociate=True)
    assert "omp simd" not in k.c_source()


def _matrix(rng, shape, density, empty_rows=True):
    a = sp.random(*shape, density=density, format="csr", random_state=rng)
    if empty_rows and shape[0] > 2:
        a = a.tolil()
        a[1, :] = 0
        a = a.tocsr()
    a.eliminate_zeros()
    return a


@pytest.mark.parametrize("layout", ["CSR", "DCSR", "COO", "CSC", "ELL", "DIA"])
@pytest.mark.parametrize("shape, density", [((40, 70), 0.2), ((1, 1), 1.0), ((30, 1), 0.5),
                                            ((5, 300), 0.9), ((0, 4), 0.0), ((6, 9), 0.0)])
def test_reassociated_spmv_matches_scipy(layout, shape, density):
    rng = np.random.default_rng(sum(shape))
    a = _matrix(rng, shape, density)
    x = rng.standard_normal(shape[1])
    f = spf.Kernel(SPMV, {"A": layout}, reassociate=True).compile()
    A = spf.Tensor.from_scipy(layout, a)
    np.testing.assert_allclose(f(A=A, x=x), a @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["CSR", "COO", "CSF"])
def test_simd_dense_inner_loops_match_numpy(layout):
    rng = np.random.default_rng(3)
    if layout == "CSF":
        a = rng.standard_normal((5, 6, 7)) * (rng.random((5, 6, 7)) < 0.3)
        b = rng.standard_normal((7, 13))
        A = spf.Tensor.from_dense("CSF", a)
        got = spf.Kernel(TTM, {"A": "CSF"}).compile()(A=A, B=b)
        np.testing.assert_allclose(got, np.einsum("ijk,kl->ijl", a, b), rtol=1e-12, atol=1e-12)
        return
    a = _matrix(rng, (17, 11), 0.3)
    b = rng.standard_normal((11, 19))
    A = spf.Tensor.from_scipy(layout, a)
    got = spf.Kernel(SPMM, {"A": layout}).compile()(A=A, B=b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)


def test_reassociated_dot_and_parallel_spmv():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(1001), rng.standard_normal(1001)
    dot = spf.Kernel("v = a(i) * b(i)", reassociate=True)
    assert "#pragma omp simd reduction(+:spf_acc)" in dot.c_source()
    np.testing.assert_allclose(dot.compile()(a=a, b=b), a @ b, rtol=1e-12)
    m = _matrix(rng, (300, 200), 0.1)
    x = rng.standard_normal(200)
    k = spf.Kernel(SPMV, {"A": "CSR"}, reassociate=True, parallel=True)
    src = k.c_source()
    assert "#pragma omp parallel for" in src and "#pragma omp simd reduction" in src
    A = spf.Tensor.from_scipy("CSR", m)
    np.testing.assert_allclose(k.compile()(A=A, x=x), m @ x, rtol=1e-12, atol=1e-12)


def test_reassociate_must_be_a_bool():
    with pytest.raises(spf.SpecError, match="reassociate must be True or False, got 'yes'"):
        spf.Kernel(SPMV, {"A": "CSR"}, reassociate="yes")


def test_reassociate_from_cli_and_kernel_file(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spf", "generate", SPMV, "-l", "A=CSR",
                           "--reassociate"], capture_output=True, text=True, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    assert "#pragma omp simd reduction(+:spf_acc)" in proc.stdout
    spec = tmp_path / "k.toml"
    spec.write_text(f'expr = "{SPMV}"\nreassociate = true\n[layouts]\nA = "CSR"\n')
    assert "simd reduction" in spf.Kernel(str(spec)).c_source()
    spec.write_text(f'expr = "{SPMV}"\nreassociate = 1\n[layouts]\nA = "CSR"\n')
    with pytest.raises(spf.SpecError, match="reassociate must be True or False, got 1"):
        spf.Kernel(str(spec))
