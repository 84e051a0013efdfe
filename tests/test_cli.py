"""The ``spf`` command line."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_compiles_clean

import spf
from spf import cli

ROOT = Path(__file__).resolve().parent.parent
SPMV_FILE = ROOT / "tests" / "data" / "spmv.toml"


def run_spf(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m spf ARGS`` in a subprocess (the installed entry point's code path)."""
    return subprocess.run([sys.executable, "-m", "spf", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**os.environ})


# ---------------------------------------------------------------------------------------
def test_layouts_lists_every_layout(capsys):
    assert cli.main(["layouts"]) == 0
    out = capsys.readouterr().out
    for name in spf.layout_names():
        assert re.search(rf"^{re.escape(name)}$", out, re.MULTILINE), name
    assert "relation:   {[pi, pj] -> [gi, gj]" in out
    assert "Compressed sparse row" in out


def test_layouts_markdown(capsys):
    assert cli.main(["layouts", "--markdown"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(spf.layout_names())
    assert any(r.startswith("| `CSR` | `{[pi, pj] -> [gi, gj]") for r in rows)


def test_python_m_spf_layouts():
    proc = run_spf("layouts")
    assert proc.returncode == 0, proc.stderr
    assert "CSR" in proc.stdout and "SV" in proc.stdout


@pytest.mark.skipif(shutil.which("spf") is None, reason="the spf script is not on PATH")
def test_console_script():
    proc = subprocess.run(["spf", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("spf ")


def test_generate_to_file_compiles(tmp_path):
    out = tmp_path / "spmv.c"
    proc = run_spf("generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    src = out.read_text()
    assert "int spf_kernel(" in src and "A_rowPtr[A_pi]" in src
    assert_compiles_clean(src)


def test_generate_to_stdout_with_options(capsys):
    code = cli.main(["generate", "y(i) = A(i,j) * x(j)", "-l", "A=BCSR", "-l", "x=SV",
                     "--param", "A.B=4", "--bounds", "j <= i", "--order", "A.pi,A.pj",
                     "--name", "spmspv_bcsr", "--report"])
    out = capsys.readouterr().out
    assert code == 0
    assert "int spmspv_bcsr(" in out
    assert "A: BCSR {'B': 4}" in out
    assert "loop order: A_pi, A_pj" in out          # from --report
    src = out[:out.index("kernel: ")]
    assert_compiles_clean(src)


def test_generate_from_kernel_file(capsys):
    assert cli.main(["generate", str(SPMV_FILE)]) == 0
    out = capsys.readouterr().out
    assert "int spmv_csr(" in out
    assert "A: CSR" in out
    assert_compiles_clean(out)


def test_generate_kernel_file_with_overrides(capsys):
    assert cli.main(["generate", str(SPMV_FILE), "-l", "x=SV", "--name", "other"]) == 0
    out = capsys.readouterr().out
    assert "int other(" in out and "x: SV" in out


def test_demo():
    proc = run_spf("demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^OK SpMSpV", proc.stdout, re.MULTILINE), proc.stdout
    assert re.search(r"^OK SpMV", proc.stdout, re.MULTILINE), proc.stdout
    assert proc.stdout.count("#include <stdint.h>") == 2      # both kernels' C is printed
    assert "const spf_SV *restrict x" in proc.stdout


def test_demo_reports_a_mismatch(monkeypatch, capsys):
    right = spf.CompiledKernel.__call__

    def wrong(self, **args):               # wrong for both kernels (n = 40)
        if self.kernel.name.startswith("spf_convert"):   # building the demo's tensors
            return right(self, **args)
        return np.full(40, 1.0)
    monkeypatch.setattr(spf.CompiledKernel, "__call__", wrong)
    assert cli.main(["demo", "--size", "40", "--density", "0.1", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH SpMSpV" in out and "MISMATCH SpMV" in out


@pytest.mark.parametrize("args, message", [
    (["generate", "y(i) = A(i,j) *", "-l", "A=CSR"],
     "spf: error: <string>:1:16: expected a tensor, a number, a function or '(', found end "
     "of input"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "A=NoSuch"], "spf: error: NoSuch: unknown layout"),
    (["generate", "y(i) = A(i) * x(i)", "-l", "A=CSR"], "used with 1 indices"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "B=CSR"], "layout given for 'B'"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "--order", "A.pz"], "order names 'A.pz'"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "A=BCSR", "--param", "A.C=2"], "no parameter"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "A"], "spf: error: -l must look like A=CSR"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "A=BCSR", "--param", "A.B=x"], "not an integer"),
    (["generate", "missing.toml"], "spf: error: kernel file not found: missing.toml"),
    (["frobnicate"], "spf: error: argument COMMAND: invalid choice"),
])
def test_errors_exit_2_without_traceback(args, message):
    proc = run_spf(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "spf: error:" in proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_error_in_process(capsys):
    assert cli.main(["generate", "C(i,j) = A(i,j) + x(j)", "-l", "A=CSR", "-l", "C=CSR"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spf: error: <string>: term x(j) does not use the output index(es) "
                          "['i']")


def test_bad_output_path(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "k.c"
    assert cli.main(["generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "-o", str(target)]) == 2
    assert "spf: error: cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("param", ["name", "allow_padding", "keep_zeros", "index_type"])
def test_convert_param_named_like_a_conversion_keyword(param, tmp_path, capsys):
    """``spf convert --param`` binds a layout parameter even when it is named like a keyword
    of spf.Conversion (it used to become that keyword: ``name=4`` crashed with a TypeError,
    ``allow_padding=1`` allowed padding)."""
    assert cli.main(["convert", "COO", "CSR", "--param", f"{param}=1"]) == 2
    assert re.fullmatch(rf"spf: error: .*CSR\.toml: unknown layout parameter\(s\) \['{param}'\]: "
                        r"COO takes none, CSR takes none\n", capsys.readouterr().err)
    text = (spf.front.layout_path.LAYOUT_DIR / "BCSR.toml").read_text()
    path = tmp_path / "Blocks.toml"     # BCSR with its block size B renamed
    path.write_text(re.sub(r"\bB\b", param, text).replace('packer = "BCSR.py"\n', ""))
    assert cli.main(["convert", "COO", str(path), "--param", f"{param}=4"]) == 0
    renamed = capsys.readouterr().out
    assert cli.main(["convert", "COO", "BCSR", "--param", "B=4"]) == 0
    # the same C, but for the struct's name and comment, which name the parameter
    def same(c: str) -> str:
        return re.sub(r"spf_BCSR_\w+", "spf_BCSR", c.replace(f"{param} x {param}", "B x B"))
    assert same(renamed) == same(capsys.readouterr().out)


# ---------------------------------------------------------------------------------------
# spf analyze, and --parallel / --tile of spf generate (issue 4)
def test_analyze_fig7_text(capsys):
    assert cli.main(["analyze", "y(i) = A(i,j) * x(j)", "-l", "A=DCSR", "--parallel"]) == 0
    out = capsys.readouterr().out
    assert out == str(spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "DCSR"},
                                 parallel=True).analysis()) + "\n"
    assert "loop A_pi: carries no dependence (parallel)" in out
    assert "disproved by: A: monotonic a < a' -> rowIdx(a) < rowIdx(a')" in out
    assert "loop A_pj: carries a dependence" in out
    assert "parallel: A_pi" in out


def test_analyze_json_subprocess():
    proc = run_spf("analyze", "v = A(i) * B(i)", "-l", "A=SV", "-l", "B=SV", "--find", "loop",
                   "--tile", "B.p=8", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["kernel"] == "v = A(i) * B(i)"
    assert data["parallel_loop"] is None
    (tile,) = data["tiles"]
    assert tile["tile_var"] == "B_p_tile" and "B->idx[(8*B_p_tile)] <= i" in tile["guards"][0]
    again = run_spf("analyze", "v = A(i) * B(i)", "-l", "A=SV", "-l", "B=SV", "--find", "loop",
                    "--tile", "B.p=8", "--json")
    assert again.stdout == proc.stdout                    # stable output


def test_analyze_scatter_and_options(capsys):
    assert cli.main(["analyze", "y(i) = A(i,j) * x(j)", "-l", "A=CSC", "--parallel",
                     "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parallel_loop"] == "A_pj" and data["loops"][0]["private_output"]
    assert data["parallel_reason"].startswith("the outermost loop A_pj carries a dependence "
                                              "only through the output y")
    # the same kernel options as generate: --order, --tile, --param
    assert cli.main(["analyze", "y(i) = A(i,j) * x(j)", "-l", "A=BCSR", "--param", "A.B=4",
                     "--tile", "A.pi=16", "--order", "A.pi_tile,A.pi,A.pj", "--parallel"]) == 0
    out = capsys.readouterr().out
    assert "parallel: A_pi_tile" in out and "tile A_pi by 16 (tile loop A_pi_tile)" in out


def test_analyze_kernel_file(tmp_path, capsys):
    path = tmp_path / "tiled.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\nparallel = true\ntile = {"A.pi" = 64}\n\n'
                    '[layouts]\nA = "CSR"\n')
    assert cli.main(["analyze", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parallel_loop"] == "A_pi_tile"
    assert data["tiles"] == [{"var": "A_pi", "size": 64, "tile_var": "A_pi_tile", "guards": []}]
    assert cli.main(["analyze", str(SPMV_FILE)]) == 0
    assert "parallel: none" in capsys.readouterr().out


def test_generate_parallel_and_tile(capsys):
    assert cli.main(["generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "--parallel",
                     "--tile", "A.pi=256"]) == 0
    src = capsys.readouterr().out
    assert ("#pragma omp parallel for schedule(guided,32)\n"
            "    for (spf_index_t A_pi_tile = 0;") in src
    assert "for (spf_index_t A_pi = 256*A_pi_tile;" in src
    assert " * Parallel (OpenMP): loop A_pi_tile" in src
    assert_compiles_clean(src, ("-fopenmp",))
    assert cli.main(["generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR"]) == 0
    assert "#pragma" not in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["analyze", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "--tile", "A.pi"],
     "spf: error: --tile must look like A.pi=256, got 'A.pi'"),
    (["analyze", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "--tile", "A.pi=x"],
     "spf: error: --tile A.pi: 'x' is not an integer"),
    (["analyze", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "--tile", "A.pi=0"],
     "tile size of 'A.pi' must be a positive integer, got 0"),
    (["generate", "y(i) = A(i,j) * x(j)", "-l", "A=CSR", "--tile", "A.pq=4"],
     "tile names 'A.pq'"),
    (["analyze", "v = A(i) * B(i)", "-l", "A=SV", "-l", "B=SV_unsorted", "--find", "loop",
      "--tile", "B.p=8", "--order", "B.p_tile,A.p,B.p"], "is not legal"),
    (["analyze", "missing.toml"], "spf: error: kernel file not found: missing.toml"),
])
def test_analyze_errors_exit_2(args, message):
    proc = run_spf(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


