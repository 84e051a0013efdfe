"""Structural masks (issue 23): ``mask={"C": "M"}`` restricts the output to M's entries (one
more operand of the product, intersected, its values not read); ``complement=True`` keeps the
elements outside them.  Checked against dense numpy references on several layouts, serial and
parallel, with the mask driving the loops (masked SpGEMM by dot products, triangle counting)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.errors import ArgumentError, SpecError

SPMV = "y(i) = A(i,j) * x(j)"


def matrix(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    m.data = rng.integers(1, 9, m.nnz).astype(float)
    m.sort_indices()
    return m


def sparse_vector(n: int, entries: list[int], layout: str = "SV") -> spf.Tensor:
    idx = np.array(entries, dtype=np.int64)
    return spf.Tensor.from_coords(layout, (n,), [idx], np.full(len(idx), 7.0))


def pattern(m) -> np.ndarray:
    return (sp.csr_matrix(m) != 0).toarray() if sp.issparse(m) else m != 0


VECTOR_MASKS = [([], "empty mask"), ([3], "one entry"), ([0, 2, 5, 6, 11], "several"),
                (list(range(12)), "every row")]


@pytest.mark.parametrize("layout", ["CSR", "CSC", "COO", "DCSR", "ELL"])
@pytest.mark.parametrize("mask_layout", ["SV", "SV_unsorted"])
@pytest.mark.parametrize("parallel", [False, True])
def test_masked_spmv(layout, mask_layout, parallel):
    A = matrix(12, 9, 0.3, 1)
    x = np.arange(1.0, 10.0)
    full = A @ x
    for complement in (False, True):
        k = spf.Kernel(SPMV, {"A": layout, "m": mask_layout}, mask={"y": "m"},
                       complement=complement, parallel=parallel).compile()
        for entries, what in VECTOR_MASKS:
            hit = np.zeros(12, bool)
            hit[entries] = True
            keep = ~hit if complement else hit
            got = k(A=A, x=x, m=sparse_vector(12, entries[::-1] if mask_layout ==
                                              "SV_unsorted" else entries, mask_layout))
            np.testing.assert_allclose(got, np.where(keep, full, 0.0), err_msg=what)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("mask_layout", ["CSR", "COO", "DCSR"])
def test_masked_spgemm_dense_output(parallel, mask_layout):
    A, B = matrix(10, 7, 0.3, 2), matrix(7, 8, 0.3, 3)
    M = matrix(10, 8, 0.25, 4)
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "M": mask_layout},
                   mask={"C": "M"}, parallel=parallel).compile()
    np.testing.assert_allclose(k(A=A, B=B, M=M), (A @ B).toarray() * pattern(M))
    empty = sp.csr_matrix((10, 8))
    np.testing.assert_array_equal(k(A=A, B=B, M=empty), np.zeros((10, 8)))


@pytest.mark.parametrize("parallel", [False, True])
def test_masked_dot_products_into_the_masks_structure(parallel):
    """C<M> = A * B' with C sharing M's index arrays: the mask drives i and j, one dot product
    per entry of M, the second row found by a forward scan."""
    k = spf.Kernel("C(i,j) = A(i,k) * B(j,k)", {"A": "CSR", "B": "CSR", "M": "CSR", "C": "CSR"},
                   mask={"C": "M"}, share={"C": "M"}, parallel=parallel)
    assert k.order[:3] == ("M_pi", "A_pi", "M_pj"), k.order
    assert [d.chosen.algorithm for d in k.decisions] == ["seqiter"]
    assert "mask: M (structural)" in k.report()
    f = k.compile()
    for shape, seed in [((9, 11), 5), ((1, 1), 6), ((6, 4), 7)]:
        A, B = matrix(shape[0], shape[1], 0.4, seed), matrix(shape[0] + 2, shape[1], 0.4, seed + 1)
        M = matrix(shape[0], shape[0] + 2, 0.5, seed + 2)
        C = f(A=A, B=B, M=M)
        dense = (A @ B.T).toarray()
        rows, cols = M.nonzero()
        np.testing.assert_allclose(C.to_scipy().toarray()[rows, cols], dense[rows, cols])
        assert np.array_equal(C["colIdx"], M.indices)


def triangles_dense(adjacency: np.ndarray) -> int:
    return round(np.trace(np.linalg.matrix_power(adjacency, 3)) / 6)


def undirected(n: int, density: float, seed: int) -> sp.csr_matrix:
    upper = sp.triu(sp.random(n, n, density, random_state=seed), 1)
    g = ((upper + upper.T) != 0).astype(float).tocsr()
    g.sort_indices()
    return g


@pytest.mark.parametrize("parallel", [False, True])
def test_triangle_count_plus_pair_with_mask(parallel):
    """Triangles: sum of C<L> = L * L' under plus_pair, L the strictly lower triangle."""
    k = spf.Kernel("C(i,j) = A(i,k) * B(j,k)", {"A": "CSR", "B": "CSR", "L": "CSR", "C": "CSR"},
                   mask={"C": "L"}, share={"C": "L"}, semiring="plus_pair",
                   parallel=parallel).compile()
    for n, density, seed in [(30, 0.2, 1), (50, 0.1, 2), (5, 0.0, 3), (3, 1.0, 4)]:
        g = undirected(n, density, seed)
        L = sp.tril(g, -1).tocsr()
        L.data[:] = 5.0             # pair ignores the values
        C = k(A=L, B=L, L=L)
        assert int(C.values.sum()) == triangles_dense(g.toarray()), (n, density)


def test_masked_sum_and_semiring():
    A, B = matrix(8, 8, 0.3, 8), matrix(8, 8, 0.3, 9)
    M = matrix(8, 8, 0.5, 10)
    k = spf.Kernel("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "COO", "M": "CSR"},
                   mask={"C": "M"}, semiring="min_plus").compile()
    inf = np.inf
    a = np.where(pattern(A), A.toarray(), inf)
    b = np.where(pattern(B), B.toarray(), inf)
    np.testing.assert_array_equal(k(A=A, B=B, M=M), np.where(pattern(M), np.minimum(a, b), inf))


def test_complement_resets_to_the_semirings_zero_and_accumulate_keeps_old_values():
    A = matrix(12, 9, 0.3, 11)
    x = np.arange(1.0, 10.0)
    hit = np.zeros(12, bool)
    hit[[1, 4]] = True
    m = sparse_vector(12, [1, 4])
    k = spf.Kernel(SPMV, {"A": "CSR", "m": "SV"}, mask={"y": "m"}, complement=True,
                   semiring="min_plus")
    assert "complement of m" in k.report() and "Mask: complement of m" in k.c_source()
    got = k.compile()(A=A, x=x, m=m)
    from test_semiring import reference_spmv
    np.testing.assert_array_equal(got, np.where(hit, np.inf, reference_spmv("min_plus", A, x)))
    acc = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR", "m": "SV"}, mask={"y": "m"},
                     complement=True).compile()
    y = np.full(12, 100.0)
    acc(A=A, x=x, m=m, y=y)
    np.testing.assert_allclose(y, np.where(hit, 100.0, 100.0 + A @ x))
    with pytest.raises(ArgumentError, match="mask 'm' has shape"):
        acc(A=A, x=x, m=sparse_vector(11, [1]), y=y)     # refused before y is written
    np.testing.assert_allclose(y, np.where(hit, 100.0, 100.0 + A @ x))


def test_masked_accumulate_touches_only_the_masks_entries():
    A = matrix(12, 9, 0.3, 12)
    x = np.arange(1.0, 10.0)
    k = spf.Kernel("y(i) += A(i,j) * x(j)", {"A": "CSR", "m": "SV"}, mask={"y": "m"}).compile()
    y = np.full(12, 1.0)
    k(A=A, x=x, m=sparse_vector(12, [0, 5]), y=y)
    expect = np.ones(12)
    expect[[0, 5]] += (A @ x)[[0, 5]]
    np.testing.assert_allclose(y, expect)


def test_kernel_file_mask(tmp_path):
    spec = tmp_path / "masked.toml"
    spec.write_text('expr = "y(i) = A(i,j) * x(j)"\nmask = {y = "m"}\ncomplement = true\n'
                    '[layouts]\nA = "CSR"\nm = "SV"\n')
    k = spf.Kernel(str(spec))
    assert k.mask == "m" and k.complement
    A = matrix(6, 4, 0.5, 13)
    got = k.compile()(A=A, x=np.ones(4), m=sparse_vector(6, [2]))
    expect = A @ np.ones(4)
    expect[2] = 0.0
    np.testing.assert_allclose(got, expect)
    bad = tmp_path / "bad.toml"
    bad.write_text('expr = "y(i) = A(i,j) * x(j)"\nmask = "m"\n')
    with pytest.raises(SpecError, match="mask must map the output to one tensor, such as"):
        spf.Kernel(str(bad))


@pytest.mark.parametrize("options, match", [
    ({"mask": {"y": "A"}}, "mask 'A' is already a name"),
    ({"mask": {"z": "m"}}, "mask names 'z', but the output is 'y'"),
    ({"mask": ["m"]}, "mask must map the output to one tensor"),
    ({"mask": {"y": "1m"}}, "is not a tensor name"),
    ({"complement": True}, "complement=True needs a mask"),
    ({"mask": {"y": "m"}, "complement": "yes"}, "complement must be True or False"),
])
def test_bad_masks_are_spec_errors(options, match):
    with pytest.raises(SpecError, match=match):
        spf.Kernel(SPMV, {"A": "CSR"}, **options)


def test_masks_that_cannot_apply():
    with pytest.raises(SpecError, match="the output 's' is a scalar"):
        spf.Kernel("s = a(i) * b(i)", {"a": "SV"}, mask={"s": "m"})
    with pytest.raises(SpecError, match="shares 'A''s structure, which a complemented mask"):
        spf.Kernel("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR", "m": "CSR"},
                   share={"C": "A"}, mask={"C": "m"}, complement=True)
    with pytest.raises(SpecError, match="has 2 indices"):
        spf.Kernel(SPMV, {"A": "CSR", "m": "CSR"}, mask={"y": "m"}, complement=True)


def test_mask_of_another_shape_and_padded_masks_are_refused():
    A = matrix(8, 6, 0.4, 14)
    x = np.ones(6)
    for complement in (False, True):
        k = spf.Kernel(SPMV, {"A": "CSR", "m": "SV"}, mask={"y": "m"},
                       complement=complement).compile()
        with pytest.raises(ArgumentError, match="9"):
            k(A=A, x=x, m=sparse_vector(9, [1]))
        if complement:
            with pytest.raises(ArgumentError, match="complemented mask"):
                k(A=A, x=x)
    dense = np.zeros((4, 4))
    dense[0, 0] = dense[3, 3] = 1.0
    padded = spf.Tensor.from_dense("BCSR", dense, B=2)
    assert padded.padding() > 0
    k = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "M": "BCSR"},
                   params={"M": {"B": 2}}, mask={"C": "M"}).compile()
    eye = sp.identity(4, format="csr")
    with pytest.raises(ArgumentError, match="a mask's stored slot is an entry"):
        k(A=eye, B=eye, M=padded)


def test_cli_mask_flags():
    import subprocess
    import sys
    base = [sys.executable, "-m", "spf", "generate", SPMV, "--layout", "A=CSR",
            "--layout", "m=SV"]
    out = subprocess.run(base + ["--mask", "y=m"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Generated by spf: y(i)<m> = A(i,j) * x(j)" in out.stdout
    out = subprocess.run(base + ["--mask", "y=m", "--complement"], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "Mask: complement of m" in out.stdout, out.stderr
    out = subprocess.run(base + ["--mask", "m"], capture_output=True, text=True)
    assert out.returncode != 0 and "spf: error: --mask must look like C=M, got 'm'" in out.stderr


def test_evaluate_with_a_mask():
    A = matrix(10, 7, 0.4, 15)
    x = np.arange(1.0, 8.0)
    m = sparse_vector(10, [2, 3, 9])
    got = spf.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x, m=m, mask={"y": "m"})
    keep = np.isin(np.arange(10), [2, 3, 9])
    np.testing.assert_allclose(got, np.where(keep, A @ x, 0.0))
    got = spf.evaluate("y(i) = A(i,j) * x(j)", A=A, x=x, m=m, mask={"y": "m"}, complement=True)
    np.testing.assert_allclose(got, np.where(keep, 0.0, A @ x))


@pytest.mark.parametrize("out", ["SV", "SV_unsorted"])
@pytest.mark.parametrize("mask_layout", ["SV", "DenseVector"])
def test_complement_removes_the_masks_entries_from_an_assembled_output(out, mask_layout):
    A = sp.random(30, 20, 0.15, format="csr", random_state=4)
    x = np.random.default_rng(5).random(20)
    for m in (np.zeros(30), np.ones(30), (np.arange(30) % 3 == 0).astype(float)):
        k = spf.Kernel(SPMV, {"A": "CSR", "y": out, "m": mask_layout}, mask={"y": "m"},
                       complement=True, semiring="max_times")
        assert "are removed (the output is rebuilt without them)" in k.report()
        got = k.compile()(A=A, x=x, m=spf.Tensor.from_dense(mask_layout, m))
        assert isinstance(got, spf.Tensor) and got.layout.name == out and got.fill == -np.inf
        # a dense mask stores every element (structural: its values are not read)
        covered = m != 0 if mask_layout == "SV" else np.ones(30, bool)
        Ad = A.toarray()
        reached = (Ad != 0).any(axis=1) & ~covered
        expect = np.where(Ad != 0, Ad * x, -np.inf).max(axis=1)
        np.testing.assert_array_equal(got.to_dense(), np.where(reached, expect, -np.inf))
        assert got.values.size == reached.sum()
