"""Immutable decisions: a Kernel, its Plan and its analysis are made once and never change;
Kernel is a read-only facade over a product or a sum kernel.  Every kernel built here is also
run and compared with numpy/scipy."""
from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.assembly import Mode, for_stream
from spf.concurrency import symbolic
from spf.distributed import partition_of
from spf.product_kernel import ProductKernel
from spf.sum_kernel import SumKernel

SPMV = "y(i) = A(i,j) * x(j)"
ADD = "C(i,j) = A(i,j) + B(i,j)"


def matrix(shape: tuple[int, int], density: float, seed: int) -> sp.csr_matrix:
    """A random matrix whose row 1 is empty (when it has one)."""
    m = sp.random(*shape, density=density, format="lil", random_state=seed)
    if shape[0] > 1:
        m[1, :] = 0
    return sp.csr_matrix(m)


def test_a_kernel_cannot_be_changed():
    k = spf.Kernel(SPMV, {"A": "CSR"}, parallel=True)
    for name, value in (("name", "other"), ("plan", None), ("layouts", {}), ("extra", 1)):
        with pytest.raises(FrozenInstanceError, match=rf"^cannot assign to '{name}': a Kernel "
                           r"is immutable \(other options make another Kernel\)$"):
            setattr(k, name, value)
    with pytest.raises(FrozenInstanceError, match=r"^cannot delete 'plan': a Kernel is "
                       "immutable$"):
        del k.plan
    with pytest.raises(TypeError):
        k.layouts["A"] = k.layouts["x"]      # a read-only mapping
    assert k.name == "spf_kernel" and k.layouts["A"].name == "CSR"


def test_decisions_are_frozen():
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"})
    plan, analysis = k.plan, k.analysis()
    frozen = [(plan, "parallel_loop", "A_pi"), (plan.assembly, "mode", Mode.SORT),
              (analysis, "parallel_loop", "A_pi"), (analysis.loops[0], "parallel", True)]
    d = spf.Kernel("s = a(i) * b(i)", {"a": "SV", "b": "SV"}).decisions[0]
    frozen += [(d, "chosen", None), (d.chosen, "algorithm", "loop"), (d.find, "var", "b_p")]
    for value, field, new in frozen:
        with pytest.raises(FrozenInstanceError):
            setattr(value, field, new)
    assert isinstance(plan.decisions, tuple) and isinstance(plan.notes, tuple)
    assert isinstance(analysis.loops, tuple) and isinstance(analysis.notes, tuple)


def test_the_kernels_analysis_is_a_new_value_and_leaves_the_plan_alone():
    """The kernel's analysis adds tiles and notes to the plan's in a new value (the plan's
    own analysis keeps no tile: it used to gain one)."""
    k = spf.Kernel("s = A(i) * B(i)", {"A": "SV", "B": "SV"}, find="loop",
                   tile={"B.p": 8}, parallel=True)
    planned = k.plan.analysis()
    assert planned is k.plan.planned and planned.tiles == ()
    a = k.analysis()
    assert a is k.analysis() and a == k.analyses()[0]
    assert [t.tile_var for t in a.tiles] == ["B_p_tile"] and len(a.tiles[0].guards) == 1
    assert k.plan.analysis() is planned and planned.tiles == () and a.loops == planned.loops
    a2 = spf.Kernel("s = A(i) * B(i)", {"A": "SV", "B": "SV"}, find="loop",
                    tile={"B.p": 8}, parallel=True).analysis()
    assert a2 == a and a2.to_json() == a.to_json()
    A = spf.Tensor.from_coords("SV", (40,), [np.array([0, 9, 17, 39])], np.arange(1.0, 5.0))
    B = spf.Tensor.from_coords("SV", (40,), [np.array([9, 39])], np.array([2.0, 3.0]))
    assert k.compile()(A=A, B=B) == 2.0 * 2.0 + 4.0 * 3.0


def test_an_analysis_made_on_first_use_runs_under_the_lock(monkeypatch):
    """A product asked for no parallel loop analyses on first use: under ``symbolic``,
    once."""
    import spf.decide.plan as plan_module
    calls = []
    analyze = plan_module.analyze

    def checked(*args, **kwargs):
        calls.append(symbolic.depth)
        return analyze(*args, **kwargs)

    monkeypatch.setattr(plan_module, "analyze", checked)
    k = spf.Kernel(SPMV, {"A": "CSR"})
    assert calls == []
    assert k.analysis() is k.analysis() and k.analysis().parallel_loop is None
    assert len(calls) == 1 and calls[0] > 0


def test_terms_of_a_sum_are_planned_as_streams():
    """make_plan gives a term of a sum the streaming assembly: nothing changes it later."""
    k = spf.Kernel(ADD, {"A": "COO", "B": "CSR", "C": "CSR"})
    alone = spf.Kernel("C(i,j) = B(i,j)", {"B": "CSR", "C": "CSR"})
    assert alone.assembly.mode is Mode.APPEND
    assert k.terms[1].assembly.mode is Mode.WORKSPACE
    assert all(for_stream(t.plan.assembly) is t.plan.assembly for t in k.terms)
    for shape in [(5, 7), (1, 1), (0, 3)]:
        A, B = matrix(shape, 0.3, 1), matrix(shape, 0.4, 2)
        got = k.compile()(A=spf.Tensor.from_scipy("COO", A), B=B)
        np.testing.assert_array_equal(got.to_dense(), (A + B).toarray())


# mul(0, x) = x: zero does not annihilate it, so fill values read A densely
PLUS_PLUS = spf.Semiring(add="a + b", mul="a + b", zero=0, one=0)

CASES = {    # expr, layouts, options, the arguments from (A, x), the reference
    "product": (SPMV, {"A": "CSR"}, {}, lambda A, x: {"A": A, "x": x}, lambda A, x: A @ x),
    "sum": (ADD, {"A": "CSR", "B": "CSR", "C": "CSR"}, {},
            lambda A, x: {"A": A, "B": 2 * A}, lambda A, x: (3 * A).toarray()),
    "union layout": (SPMV, {"A": "HYB"}, {},
                     lambda A, x: {"A": spf.Tensor.from_scipy("HYB", A), "x": x},
                     lambda A, x: A @ x),
    "mask": (SPMV, {"A": "CSR", "m": "SV"}, {"mask": {"y": "m"}},
             lambda A, x: {"A": A, "x": x, "m": spf.Tensor.from_coords(
                 "SV", (A.shape[0],), [np.array([0, 1, 4])], np.ones(3))},
             lambda A, x: np.where(np.isin(np.arange(A.shape[0]), [0, 1, 4]), A @ x, 0.0)),
    "fill values": (SPMV, {"A": "CSR"}, {"semiring": PLUS_PLUS, "fill_values": True},
                    lambda A, x: {"A": A, "x": x}, lambda A, x: (A.toarray() + x).sum(axis=1)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_facade_reads_one_kernel_of_either_kind(case):
    expr, layouts, options, arguments, reference = CASES[case]
    k = spf.Kernel(expr, layouts, **options)
    body = k._body
    assert isinstance(body, SumKernel if case in ("sum", "union layout") else ProductKernel)
    assert k.expr is body.setup.expr and k.options is body.setup.options
    assert list(k.read_densely) == (["A"] if case == "fill values" else [])
    if isinstance(body, SumKernel):
        assert len(k.terms) == len(k.analyses()) == 2 and k.terms is k.terms
        assert k.nest is k.terms[0].nest and k.order == k.terms[0].order
        assert k.decisions == k.terms[0].decisions + k.terms[1].decisions
        with pytest.raises(AttributeError, match=r"^a sum has no single plan: each of its "
                           r"terms has one \(kernel\.terms\[k\]\.plan\)$"):
            k.plan  # noqa: B018
    else:
        assert k.terms == () and k.runs is None and k.nest is k.plan.nest
        assert k.analyses() == (k.analysis(),) and k.decisions is k.plan.decisions
    rng = np.random.default_rng(5)
    for shape, density in [((6, 5), 0.4), ((6, 5), 0.0), ((6, 5), 1 / 30), ((9, 1), 0.5)]:
        A = matrix(shape, density, 3)
        A.data = rng.integers(1, 9, A.nnz).astype(float)
        x = rng.integers(-3, 4, shape[1]).astype(float)
        got = k.compile()(**arguments(A, x))
        got = got.to_dense() if isinstance(got, spf.Tensor) else got
        np.testing.assert_array_equal(got, reference(A, x), err_msg=f"{case} {shape} {density}")


def test_a_kernel_pickles_with_its_decisions():
    k = spf.Kernel(SPMV, {"A": "COO"}, parallel=True)
    src = k.c_source()
    back = pickle.loads(pickle.dumps(k))
    assert back.c_source() == src and back.plan.parallel_loop == k.plan.parallel_loop
    with pytest.raises(FrozenInstanceError):
        back.name = "other"
    A, x = matrix((7, 4), 0.5, 4), np.arange(4.0)
    np.testing.assert_allclose(back.compile()(A=spf.Tensor.from_scipy("COO", A), x=x), A @ x)


def test_conversions_and_partitions_read_the_facade():
    conv = spf.Conversion("COO", "CSR")
    assert isinstance(conv.kernel._body, ProductKernel) and conv.kernel.assembly is not None
    A = matrix((5, 3), 0.5, 6)
    got = conv.compile()(spf.Tensor.from_scipy("COO", A))
    np.testing.assert_array_equal(got.to_scipy().toarray(), A.toarray())
    part = partition_of(spf.Kernel(SPMV, {"A": "CSR"}))
    assert (part.operand, part.mode, part.dim, part.out_axis) == ("A", "rows", 0, 0)
    with pytest.raises(spf.SpecError, match=r"is a sum of terms; a distributed run "
                       r"partitions one product"):
        partition_of(spf.Kernel(ADD, {"A": "CSR", "B": "CSR", "C": "CSR"}))
