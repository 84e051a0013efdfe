"""Dependence analysis and its report (issue 4, paper Sec. 5.1, Fig. 7).

- Fig. 7: DCSR SpMV ``y(i) = A(i,j) * x(j)``: loop A_pi carries no dependence, disproved by
  the monotonic property of rowIdx; a user layout file that is DCSR without that property
  makes A_pi carry a dependence (and parallel=True then leaves it serial; a tensor with
  repeated rows, which that layout admits, still gives the right result).
- CSR SpMV is parallel on rows (disproved by isl alone); CSC and COO SpMV scatter into y and
  are reported as carrying a dependence on y, not parallelized; TTM on CSF is parallel on the
  root fibre loop A_p0; the dot product is a scalar reduction (reduction(+:spf_acc)).
- ``analysis().to_json()``: valid JSON with the documented keys (the same list is in
  docs/analysis.md), stable across calls, kernels and processes (hash seeds).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_compiles_clean

import spf

ROOT = Path(__file__).resolve().parent.parent
SPMV = "y(i) = A(i,j) * x(j)"
TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
DOT = "v = A(i) * B(i)"
PRAGMA = "#pragma omp parallel for schedule(guided,32)"

# The documented JSON format (docs/analysis.md, "Analysis JSON").
TOP_KEYS = ["version", "kernel", "output", "loops", "parallel_loop", "parallel_reason",
            "tiles", "notes"]
LOOP_KEYS = ["var", "carried", "dependence", "disproved_by", "parallel", "reduction",
             "private_output", "why"]
TILE_KEYS = ["var", "size", "tile_var", "guards"]

ROWIDX_MONOTONIC = "A: monotonic a < a' -> rowIdx(a) < rowIdx(a')"


def loop(analysis, var):
    (lp,) = [lp for lp in analysis.loops if lp.var == var]
    return lp


def dependence_relation(text: str) -> spf.Relation:
    """The printed dependence is SPF syntax; spf's parser takes no primes, so rename them."""
    return spf.Relation.parse(text.replace("'", "_2"))


# -- Fig. 7: DCSR, with and without the rowIdx property ------------------------------------
def test_fig7_dcsr_rowidx_monotonic_disproves_the_dependence():
    k = spf.Kernel(SPMV, {"A": "DCSR"})
    a = k.analysis()
    assert [lp.var for lp in a.loops] == ["A_pi", "A_pj"]
    pi = loop(a, "A_pi")
    assert not pi.carried and pi.dependence == ""
    assert pi.disproved_by == (ROWIDX_MONOTONIC,)
    # the inner loop accumulates into y(rowIdx(A_pi)) of its own row: carried
    pj = loop(a, "A_pj")
    assert pj.carried and not pj.parallel
    rel = dependence_relation(pj.dependence)
    assert rel.in_vars == ("A_pi", "A_pj") and rel.out_vars == ("A_pi_2", "A_pj_2")
    assert "A_pi = A_pi'" in pj.dependence and "A_pj + 1 <= A_pj'" in pj.dependence
    # not asked for parallel code: reported, not applied
    assert a.parallel_loop is None and not pi.parallel
    assert a.parallel_reason.endswith("parallel=False")
    text = str(a)
    assert "loop A_pi: carries no dependence\n" in text
    assert f"  disproved by: {ROWIDX_MONOTONIC}" in text
    assert "loop A_pj: carries a dependence\n  dependence: {[A_pi, A_pj] -> [A_pi', A_pj']" in text


def test_fig7_dcsr_parallel():
    k = spf.Kernel(SPMV, {"A": "DCSR"}, parallel=True)
    a = k.analysis()
    assert a.parallel_loop == k.parallel_loop == "A_pi"
    assert loop(a, "A_pi").parallel and not loop(a, "A_pj").parallel
    assert a.parallel_reason == f"loop A_pi carries no dependence ({ROWIDX_MONOTONIC})"
    assert "loop A_pi: carries no dependence (parallel)" in str(a)
    src = k.c_source()
    assert f"{PRAGMA}\n    for (spf_index_t A_pi = 0; A_pi < A_numNZRows; ++A_pi)" in src
    assert "y_data[y_p0] += spf_acc;" in src


def unordered_dcsr(tmp_path: Path) -> Path:
    """DCSR without ``monotonic rowIdx <`` (rows in any order, possibly repeated)."""
    text = (ROOT / "layouts" / "DCSR.toml").read_text()
    prop = '[[properties]]\nkind = "monotonic"\nuf = "rowIdx"\norder = "<"\n\n'
    assert prop in text
    text = text.replace(prop, "").replace('name = "DCSR"', 'name = "DCSR_any_rows"')
    text = text.replace('packer = "DCSR.py"',
                        f'packer = "{(ROOT / "layouts" / "DCSR.py").as_posix()}"')
    path = tmp_path / "DCSR_any_rows.toml"
    path.write_text(text)
    return path


def test_fig7_without_the_property_carries_a_dependence(tmp_path):
    path = unordered_dcsr(tmp_path)
    lay = spf.load_layout(str(path))
    assert not any(p.get("uf") == "rowIdx" and p.get("kind") == "monotonic"
                   for p in lay.raw["properties"])
    k = spf.Kernel(SPMV, {"A": str(path)}, parallel=True)
    a = k.analysis()
    pi = loop(a, "A_pi")
    assert pi.carried and pi.disproved_by == ()
    # two different stored rows A_pi < A_pi' with the same row index write the same y(i)
    rel = dependence_relation(pi.dependence)
    assert rel.in_vars == ("A_pi", "A_pj")
    assert "A.rowIdx(A_pi') = A.rowIdx(A_pi)" in pi.dependence
    assert "0 <= A_pi < A_pi'" in pi.dependence
    # not proven free: the rows run in parallel each thread into its own copy of y
    assert pi.parallel and pi.private_output and "private copy of y" in pi.why
    assert a.parallel_loop == "A_pi" == k.parallel_loop
    src = k.c_source()
    assert "spf_mine[y_p0]" in src
    assert_compiles_clean(src, ("-fopenmp",))

    # the layout admits repeated and unsorted rows: the serial kernel handles them
    fields = {"numRows": 4, "numCols": 3, "numNZRows": 3, "rowIdx": [2, 0, 2],
              "rowPtr": [0, 2, 3, 5], "colIdx": [0, 2, 1, 1, 2],
              "data": [1.0, 2.0, 3.0, 4.0, 5.0]}
    A = spf.Tensor.from_arrays(lay, (4, 3), fields)
    dense = np.zeros((4, 3))
    dense[2, 0], dense[2, 2], dense[0, 1] = 1.0, 2.0 + 5.0, 3.0
    dense[2, 1] = 4.0
    np.testing.assert_array_equal(A.to_dense(), dense)
    x = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(k.compile()(A=A, x=x), dense @ x)
    # the shipped DCSR rejects the same arrays (its property does not hold)
    with pytest.raises(spf.ArgumentError, match="monotonic"):
        spf.Tensor.from_arrays("DCSR", (4, 3), fields)


# -- the other SpMV layouts ------------------------------------------------------------------
def test_csr_spmv_parallel_on_rows_by_isl():
    k = spf.Kernel(SPMV, {"A": "CSR"}, parallel=True)
    a = k.analysis()
    pi = loop(a, "A_pi")
    assert not pi.carried and pi.parallel
    assert pi.disproved_by == ("isl (affine constraints)",)   # y(A_pi): no property needed
    assert loop(a, "A_pj").carried
    assert a.parallel_loop == "A_pi"
    assert f"{PRAGMA}\n    for (spf_index_t A_pi = 0;" in k.c_source()


@pytest.mark.parametrize("layout,outer", [("CSC", "A_pj"), ("COO", "A_p"),
                                          ("SortedCOO", "A_p")])
def test_scatter_spmv_carries_a_dependence_on_y(layout, outer):
    """The scatter loop carries a dependence through y only, so it runs in parallel with a
    private copy of y per thread (summed into y after the loop)."""
    k = spf.Kernel(SPMV, {"A": layout}, parallel=True)
    a = k.analysis()
    assert a.parallel_loop == outer == k.parallel_loop and k.plan.privatized
    first = a.loops[0]
    assert first.var == outer and first.carried and first.parallel and first.private_output
    assert "a scatter into y: each thread sums into a private copy of y" in first.why
    assert a.parallel_reason.startswith(f"the outermost loop {outer} carries a dependence only "
                                        "through the output y")
    assert first.dependence.startswith(f"{{[{outer}")
    dependence_relation(first.dependence)       # parses (primes renamed)
    if layout in ("CSC", "COO"):
        assert "A.rowIdx(" in first.dependence  # same row through the index array
    src = k.c_source()
    assert "spf_mine[y_p0] +=" in src and "free(spf_priv);" in src
    assert " * Parallel (OpenMP): loop " + outer + ", each thread summing into a private " \
        "copy of y" in src


def test_scatter_with_finds_is_not_parallelized():
    """Finds keep state the threads would share: no private copies, no parallel loop."""
    k = spf.Kernel(SPMV, {"A": "COO", "x": "SV"}, parallel=True)
    a = k.analysis()
    assert a.parallel_loop is None and not k.plan.privatized
    assert "scatter into the shared output y" in a.loops[0].why
    assert "omp parallel" not in k.c_source() and "not parallelized" in str(a)


def test_csc_inner_loop_is_free_but_not_chosen():
    """CSC: rows within a column are distinct (periodic monotonic rowIdx), so A_pi carries
    no dependence, but it runs over one column's segment of colPtr: too short to share out."""
    a = spf.Kernel(SPMV, {"A": "CSC"}, parallel=True).analysis()
    pi = loop(a, "A_pi")
    assert not pi.carried and not pi.parallel
    assert pi.disproved_by == (
        "A: periodic_monotonic pj = pj' and a < a' -> rowIdx(a) < rowIdx(a')",)
    assert "loop A_pi carries none but runs over one segment of a pointer array" \
        in a.parallel_reason and a.loops[0].private_output


def test_dia_shares_out_the_rows_of_each_diagonal():
    """DIA: the diagonal loop carries the dependence on y (every diagonal adds into y(i)),
    the row loop inside it does not (y(A_pi), isl): every thread runs the diagonals, the rows
    of each are shared out, a barrier between diagonals keeps the order of the adds."""
    k = spf.Kernel(SPMV, {"A": "DIA"}, parallel=True)
    a = k.analysis()
    pd, pi = loop(a, "A_pd"), loop(a, "A_pi")
    assert pd.carried and not pd.parallel and "every thread" in pd.why
    assert not pi.carried and pi.parallel and pi.disproved_by == ("isl (affine constraints)",)
    assert a.parallel_loop == k.parallel_loop == "A_pi"
    src = k.c_source()
    assert "#pragma omp parallel\n    for (spf_index_t A_pd = 0;" in src
    assert "#pragma omp for schedule(static)\n        for (spf_index_t A_pi" in src


def test_inner_parallel_loop_with_a_find_is_refused():
    """An inner free loop under a carried one, with a find outside it: the find state would be
    shared by the threads running the outer loop, so nothing is parallelized."""
    k = spf.Kernel(SPMV, {"A": "DIA", "x": "SV"}, parallel=True)
    assert k.parallel_loop is None and "omp parallel" not in k.c_source()
    assert any("inner loop and the nest has finds" in n for n in k.analysis().notes)


@pytest.mark.parametrize("lx,proof", [
    ("SV", "x: monotonic a < a' -> idx(a) < idx(a')"),
    ("SV_decreasing", "x: monotonic a < a' -> idx(a) > idx(a')"),
    ("SV_unsorted", "x: injective a != a' -> (idx(a)) != (idx(a'))")])
def test_spmspv_find_loop_carries_nothing_by_uniqueness(lx, proof):
    """CSR x SV: the searched x_p loop matches one position per A_pj (unique coordinates),
    which each sparse-vector layout states with its own property."""
    a = spf.Kernel(SPMV, {"A": "CSR", "x": lx}, parallel=True).analysis()
    assert a.parallel_loop == "A_pi"
    assert [lp.var for lp in a.loops] == ["A_pi", "A_pj", "x_p"]
    assert loop(a, "x_p").disproved_by == (proof,)
    assert "A.colIdx(A_pj) = x.idx(x_p)" in loop(a, "A_pj").dependence


# -- TTM on CSF, the dot product ---------------------------------------------------------------
def test_ttm_csf_parallel_on_root_fibres():
    k = spf.Kernel(TTM, {"A": "CSF"}, parallel=True)
    a = k.analysis()
    assert [lp.var for lp in a.loops] == ["A_p0", "A_p1", "A_p2", "B_p1"]
    p0, p1, p2, last = a.loops
    assert not p0.carried and p0.parallel
    assert p0.disproved_by == ("A: monotonic a < a' -> idx0(a) < idx0(a')",)
    assert not p1.carried and "periodic_monotonic" in p1.disproved_by[0]
    assert p2.carried                                      # the contraction index k
    assert not last.carried and last.disproved_by == ("isl (affine constraints)",)
    assert a.parallel_loop == "A_p0"
    assert f"{PRAGMA}\n    for (spf_index_t A_p0 = 0; A_p0 < A_n0; ++A_p0)" in k.c_source()


def test_dot_product_is_a_scalar_reduction():
    k = spf.Kernel(DOT, {"A": "SV", "B": "SV_unsorted"}, parallel=True)
    a = k.analysis()
    assert all(lp.carried and lp.dependence == "every instance updates the scalar v"
               for lp in a.loops)
    first = a.loops[0]
    assert first.var == "A_p" and first.reduction and first.parallel
    assert "reduction(+:...)" in first.why
    assert a.parallel_loop == "A_p"
    assert a.parallel_reason == "loop A_p carries only the reduction into the scalar v"
    src = k.c_source()
    # every run-time branch (DenseMap, HashMap) reduces over the parallel loop
    assert len(re.findall(rf"{re.escape(PRAGMA)} reduction\(\+:spf_acc\)\n *for "
                          r"\(spf_index_t A_p = 0;", src)) == 2
    assert src.index("spf_acc_t spf_acc = 0.0;") < src.index(PRAGMA) < src.index("*v += spf_acc;")
    a_serial = spf.Kernel(DOT, {"A": "SV", "B": "SV_unsorted"}).analysis()
    assert a_serial.parallel_loop is None and not a_serial.loops[0].parallel
    assert a_serial.loops[0].reduction


# -- JSON -----------------------------------------------------------------------------------
JSON_KERNELS = [(SPMV, {"A": "DCSR"}, {}), (SPMV, {"A": "CSC"}, {"parallel": True}),
                (TTM, {"A": "CSF"}, {"parallel": True}), (DOT, {"A": "SV", "B": "SV"}, {}),
                (DOT, {"A": "SV", "B": "SV"}, {"find": "loop", "tile": {"B.p": 8}}),
                (SPMV, {"A": "CSR"}, {"tile": {"A.pi": 16}, "parallel": True})]


@pytest.mark.parametrize("expr,layouts,options", JSON_KERNELS)
def test_json_has_the_documented_keys(expr, layouts, options):
    a = spf.Kernel(expr, layouts, **options).analysis()
    text = a.to_json()
    data = json.loads(text)
    assert list(data) == TOP_KEYS
    assert data["version"] == 1
    assert data["kernel"] == expr
    assert isinstance(data["output"], str) and isinstance(data["parallel_reason"], str)
    assert data["parallel_loop"] is None or isinstance(data["parallel_loop"], str)
    assert data["loops"] and all(list(lp) == LOOP_KEYS for lp in data["loops"])
    for lp in data["loops"]:
        assert isinstance(lp["carried"], bool) and isinstance(lp["disproved_by"], list)
        assert (lp["dependence"] != "") == lp["carried"]
        assert lp["carried"] or lp["disproved_by"]
    assert [lp["var"] for lp in data["loops"] if lp["parallel"]] == \
        ([data["parallel_loop"]] if data["parallel_loop"] else [])
    assert all(list(t) == TILE_KEYS for t in data["tiles"])
    assert isinstance(data["notes"], list)
    assert data == a.to_dict()
    # stable: the same text twice, and from a second kernel built the same way
    assert a.to_json() == text
    assert spf.Kernel(expr, layouts, **options).analysis().to_json() == text


def test_json_tiles_entry():
    data = json.loads(spf.Kernel(DOT, {"A": "SV", "B": "SV"}, find="loop",
                                 tile={"B.p": 8}).analysis().to_json())
    (tile,) = data["tiles"]
    assert tile["var"] == "B_p" and tile["size"] == 8 and tile["tile_var"] == "B_p_tile"
    (guard,) = tile["guards"]
    assert "B->idx[(8*B_p_tile)] <= i" in guard


def test_json_is_stable_across_processes():
    """Set iteration order (PYTHONHASHSEED) must not change the report."""
    code = ("import spf; print(spf.Kernel('y(i) = A(i,j) * x(j)', {'A': 'DCSR', 'x': 'SV'}, "
            "parallel=True).analysis().to_json())")
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    json.loads(outs[0])


def test_docs_document_every_json_key():
    text = (ROOT / "docs" / "analysis.md").read_text()
    start = text.index("## Analysis JSON")
    section = text[start:text.index("\n## ", start) if "\n## " in text[start:] else None]
    for key in TOP_KEYS + LOOP_KEYS + TILE_KEYS:
        assert re.search(rf"`{re.escape(key)}`", section), f"docs do not document {key!r}"


def test_analysis_is_cached_and_does_not_change_the_kernel():
    k = spf.Kernel(SPMV, {"A": "CSR"})
    src = k.c_source()
    assert k.analysis() is k.analysis()
    assert k.c_source() == src and "#pragma" not in src
