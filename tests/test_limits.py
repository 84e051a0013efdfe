"""Solver limits (issue 8): a time limit per Z3 query, an operation limit per isl operation.

- Z3: an unknown answer is never a proof.  With every query timing out (``z3.Solver.check``
  answering unknown for "timeout", as Z3 does when it reaches ``z3_timeout_ms``) finds are
  guard loops, a loop that only Z3 could show free is not parallel, an assembled output has
  no ordered prefix and a tiling is refused; the report and the analysis (text and JSON)
  name each query and what was assumed; results still equal numpy/scipy.  A proof by isl
  alone (CSR rows) still counts.
- A genuinely undecidable query (a cubic without solutions added to every query) reaches
  the real 1 ms limit, set through the Kernel option.
- ``z3_timeout_ms`` comes from the Kernel option, a kernel file, ``--z3-timeout-ms`` or
  ``$SPF_Z3_TIMEOUT_MS``; zero, negative, non-integer and over-an-hour values are SpecErrors.
- isl: with a low ``$SPF_ISL_MAX_OPERATIONS`` scanning and relation operations raise a
  SpecError naming the operation; the counter is reset per top-level operation; the default
  leaves a wide margin over the shipped kernels.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import z3

import spf
import spf.cli
from spf.front.isl_bridge import ISL_MAX_OPERATIONS
from spf.middle.z3limit import Z3_TIMEOUT_MAX_MS, Z3_TIMEOUT_MS

SPMV = "y(i) = A(i,j) * x(j)"
FIG11 = "v = A(i) * B(i) * C(i)"
FIG11_LAYOUTS = {"A": "SV", "B": "SV_decreasing", "C": "SV_unsorted"}
TIMED_OUT = "Z3 timed out after 1 ms on"


@pytest.fixture
def z3_times_out(monkeypatch):
    """Every Z3 query ends as one that reached its time limit."""
    monkeypatch.setattr(z3.Solver, "check", lambda self, *args: z3.unknown)
    monkeypatch.setattr(z3.Solver, "reason_unknown", lambda self: "timeout")


def _vectors() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b, c = np.zeros(50), np.zeros(50), np.zeros(50)
    a[[1, 4, 7, 30]] = 1.0
    b[[4, 7, 9, 30]] = 2.0
    c[[7, 30, 49]] = 3.0
    return a, b, c


def _fig11(kernel: spf.Kernel) -> float:
    a, b, c = _vectors()
    return kernel.compile()(**{t: spf.Tensor.from_dense(lay, v)
                               for (t, lay), v in zip(FIG11_LAYOUTS.items(), (a, b, c))})


# -- Z3: unknown is never a proof ---------------------------------------------------------
def test_finds_fall_back_to_the_guard_loop(z3_times_out):
    k = spf.Kernel(FIG11, FIG11_LAYOUTS, z3_timeout_ms=1)
    assert [d.chosen for d in k.decisions] == [None, None]
    assert all(list(d.valid) == ["loop"] and d.alternatives == []
               for d in k.decisions)
    report = k.report()
    assert f"{TIMED_OUT} Eq. 4 of SeqIter (forward while key < target) for the lookup of B" \
        in report
    assert "assumed satisfiable: SeqIter forward while key < target is not used" in report
    assert "is satisfiable (assumed: Z3 timed out after 1 ms)" in report    # no counterexample
    assert "the range is not sorted (assumed: Z3 timed out after 1 ms)" in report
    assert "Z3 queries left undecided (limit 1 ms per query" in report
    notes = k.analysis().notes
    assert any(n.startswith(f"{TIMED_OUT} the uniqueness of the match") for n in notes)
    a, b, c = _vectors()
    assert np.isclose(_fig11(k), np.sum(a * b * c))


def test_forced_find_needs_a_proof(z3_times_out):
    with pytest.raises(spf.SynthesisError, match=r"find='hashmap' .*assumed: Z3 timed out"):
        spf.Kernel(FIG11, FIG11_LAYOUTS, find={"C": "hashmap"}, z3_timeout_ms=1)


def test_no_parallel_loop_without_a_proof(z3_times_out):
    M = sp.random(60, 40, density=0.1, format="csr", random_state=3)
    x = np.random.default_rng(3).uniform(size=40)
    k = spf.Kernel(SPMV, {"A": "DCSR"}, parallel=True, z3_timeout_ms=1)
    ana = k.analysis()
    # nothing proven: the rows are not shared as free iterations, only with a private copy of
    # y per thread (which needs no proof)
    assert k.parallel_loop == "A_pi" == ana.parallel_loop and k.plan.privatized
    assert all(lp.carried for lp in ana.loops) and ana.loops[0].private_output
    assert ana.loops[0].why.startswith("Z3 timed out after 1 ms: assumed to carry it")
    note = f"{TIMED_OUT} whether loop A_pi carries a dependence; assumed carried: loop A_pi " \
           "is not parallel"
    assert note in ana.notes and note in str(ana)
    assert note in json.loads(ana.to_json())["notes"]
    assert "spf_mine" in k.c_source()
    assert np.allclose(k.compile()(A=spf.Tensor.from_scipy("DCSR", M), x=x), M @ x)
    # isl's proof needs no Z3: CSR rows stay parallel
    csr = spf.Kernel(SPMV, {"A": "CSR"}, parallel=True, z3_timeout_ms=1)
    assert csr.parallel_loop == "A_pi"
    assert csr.analysis().loops[0].disproved_by == ("isl (affine constraints)",)


def test_assembled_output_is_unordered(z3_times_out):
    A = sp.random(30, 20, density=0.15, format="csr", random_state=4)
    B = sp.random(20, 25, density=0.15, format="csr", random_state=5)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
                   z3_timeout_ms=1)
    plan = k.assembly
    assert plan.ordered == 0 and not plan.bucket_sorted and not plan.unique
    assert "assumed unordered, the safe choice" in plan.why
    assert any(n.startswith(f"{TIMED_OUT} whether (i, j) never decreases") for n in
               k.analysis().notes)
    C = k.compile()(A=spf.Tensor.from_scipy("CSR", A), B=spf.Tensor.from_scipy("CSR", B))
    assert np.allclose(C.to_dense(), (A @ B).toarray())


def test_tiling_needs_a_proof(z3_times_out):
    with pytest.raises(spf.SynthesisError, match=r"not legal: .*\(assumed: Z3 timed out "
                                                 r"after 1 ms\)"):
        spf.Kernel("v = A(i) * B(i)", {"A": "SV", "B": "SV"}, find="loop", tile={"B.p": 8},
                   order=["B.p_tile", "A.p", "B.p"], z3_timeout_ms=1)


def test_a_hard_query_reaches_the_real_limit(monkeypatch):
    """x^3 + y^3 = z^3 has no positive solution, which Z3 cannot show: every query that the
    rest does not already refute runs into the 1 ms limit."""
    check, limits = z3.Solver.check, []
    x, y, w = z3.Ints("spf_hard_x spf_hard_y spf_hard_w")

    def hard(self, *args):
        self.add(x > 0, y > 0, w > 0, x * x * x + y * y * y == w * w * w)
        return check(self, *args)

    def record(self, *args, **kwargs):
        if args and args[0] == "timeout":
            limits.append(args[1])
        return set_param(self, *args, **kwargs)

    set_param = z3.Solver.set
    monkeypatch.setattr(z3.Solver, "check", hard)
    monkeypatch.setattr(z3.Solver, "set", record)
    k = spf.Kernel(FIG11, FIG11_LAYOUTS, z3_timeout_ms=1)
    assert limits and set(limits) == {1}
    assert k.nest.z3.undecided and all(u.startswith(TIMED_OUT) for u in k.nest.z3.undecided)
    a, b, c = _vectors()
    assert np.isclose(_fig11(k), np.sum(a * b * c))


# -- where the limit comes from -----------------------------------------------------------
def test_timeout_sources(monkeypatch, tmp_path, capsys, z3_times_out):
    monkeypatch.delenv("SPF_Z3_TIMEOUT_MS", raising=False)
    assert spf.Kernel(SPMV, {"A": "CSR"}).nest.z3.timeout_ms == Z3_TIMEOUT_MS
    monkeypatch.setenv("SPF_Z3_TIMEOUT_MS", "7")
    assert spf.Kernel(SPMV, {"A": "CSR"}).nest.z3.timeout_ms == 7
    k = spf.Kernel(SPMV, {"A": "CSR"}, z3_timeout_ms=1)      # the option wins
    assert k.options.z3_timeout_ms == 1 and k.nest.z3.timeout_ms == 1
    total = spf.Kernel("y(i) = A(i,j) * x(j) + B(i,j) * x(j)", {"A": "CSR", "B": "COO"},
                       z3_timeout_ms=3)
    assert {t.nest.z3.timeout_ms for t in total.terms} == {3}
    path = tmp_path / "dcsr.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\nz3_timeout_ms = 1\nparallel = true\n'
                    '[layouts]\nA = "DCSR"\n')
    assert spf.Kernel(str(path)).nest.z3.timeout_ms == 1
    assert spf.Kernel(str(path), z3_timeout_ms=5).nest.z3.timeout_ms == 5
    assert spf.cli.main(["analyze", str(path)]) == 0
    assert f"note: {TIMED_OUT} whether loop A_pi carries" in capsys.readouterr().out
    assert spf.cli.main(["generate", SPMV, "-l", "A=DCSR", "--z3-timeout-ms", "1",
                         "--parallel", "--report"]) == 0
    out = capsys.readouterr().out
    assert "Z3 queries left undecided (limit 1 ms per query" in out
    assert f"  {TIMED_OUT} whether loop A_pi carries a dependence" in out


@pytest.mark.parametrize("value", [0, -5, 1.5, "100", True, Z3_TIMEOUT_MAX_MS + 1,
                                   10 ** 12])
def test_bad_timeout(value):
    with pytest.raises(spf.SpecError, match=r"z3_timeout_ms must be an integer number of "
                                            r"milliseconds from 1 to 3600000 \(one hour\), got"):
        spf.Kernel(SPMV, {"A": "CSR"}, z3_timeout_ms=value)


@pytest.mark.parametrize("text", ["abc", "-1", "2.5", "0", "99999999999"])
def test_bad_timeout_in_the_environment(monkeypatch, text):
    monkeypatch.setenv("SPF_Z3_TIMEOUT_MS", text)
    with pytest.raises(spf.SpecError, match=r"SPF_Z3_TIMEOUT_MS must be an integer number"):
        spf.Kernel(SPMV, {"A": "CSR"})


def test_bad_timeout_in_files_and_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "k.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\nz3_timeout_ms = "fast"\n')
    with pytest.raises(spf.SpecError,
                       match=r"k.toml:2:17: z3_timeout_ms must be an integer number of millisec"):
        spf.Kernel(str(path))
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\nz3_timeout_ms = 0\n')
    with pytest.raises(spf.SpecError,
                       match=r"k.toml:2:17: z3_timeout_ms must be an integer number"):
        spf.Kernel(str(path))
    assert spf.cli.main(["generate", SPMV, "--z3-timeout-ms", "-3"]) == 2
    assert "z3_timeout_ms must be an integer number" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        spf.cli.main(["analyze", SPMV, "--z3-timeout-ms", "soon"])
    assert exit_.value.code == 2 and "--z3-timeout-ms" in capsys.readouterr().err


# -- isl: a bounded number of operations ---------------------------------------------------
def test_isl_operation_limit(monkeypatch):
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", "1000")
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel(SPMV, {"A": "CSR"})      # scanning takes about 42,000
    assert str(err.value) == ("<string>: isl exceeded 1000 operations while scanning the "
                              "iteration space of y(i) = A(i,j) * x(j); simplify the relation "
                              "or raise SPF_ISL_MAX_OPERATIONS")
    rel = spf.Relation.parse("{[p, q] -> [i] : 0 <= p < n and 0 <= q < p and i = 2*p + q}")
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", "100")           # each takes about 1,900
    with pytest.raises(spf.SpecError, match=r"isl exceeded 100 operations while simplifying "
                                            r"a relation; simplify the relation or raise "
                                            r"SPF_ISL_MAX_OPERATIONS"):
        rel.simplify()
    with pytest.raises(spf.SpecError, match="while testing a relation for emptiness"):
        rel.is_empty()
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", "0")             # no limit
    assert not rel.is_empty()
    monkeypatch.delenv("SPF_ISL_MAX_OPERATIONS")
    assert "for (" in spf.Kernel(SPMV, {"A": "CSR"}).c_source()


def test_isl_counter_is_reset_per_operation(monkeypatch):
    """A budget that covers one scan but not ten: ten kernels in a row still build."""
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", "100000")
    for n in range(10):
        spf.Kernel(SPMV, {"A": "CSR"}, name=f"k{n}")
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", "5000")
    with pytest.raises(spf.SpecError, match="isl exceeded 5000 operations"):
        spf.Kernel(SPMV, {"A": "CSR"})


@pytest.mark.parametrize("text", ["lots", "-1", "1e6"])
def test_bad_isl_limit(monkeypatch, text):
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", text)
    with pytest.raises(spf.SpecError, match=r"SPF_ISL_MAX_OPERATIONS must be a non-negative "
                                            r"integer \(0: no limit\)"):
        spf.Kernel(SPMV, {"A": "CSR"})


def test_isl_limit_leaves_a_margin(monkeypatch):
    """The heaviest kernels measured take about 430,000 operations (three BCSR operands;
    the tests at most 220,000): they build with a tenth of the default."""
    assert ISL_MAX_OPERATIONS >= 20_000_000
    monkeypatch.setenv("SPF_ISL_MAX_OPERATIONS", str(ISL_MAX_OPERATIONS // 10))
    spf.Kernel("v = A(i,j) * B(i,j) * C(i,j)", {"A": "BCSR", "B": "BCSR", "C": "BCSR"},
               find="loop").report()
    spf.Kernel("Y(i,j) = A(i,j,k) * x(k)", {"A": "CSF"}, parallel=True).analysis()
