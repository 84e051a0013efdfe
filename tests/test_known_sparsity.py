"""Outputs of known sparsity (issue 5, item 1): the output shares index arrays with an input
(share={"C": "A"}); checked against numpy."""
import numpy as np
import pytest
import scipy.sparse as sp

import spf

TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"
SDDMM = "C(i,j) = S(i,j) * A(i,k) * B(k,j)"


def tensor3(shape, density, seed):
    rng = np.random.default_rng(seed)
    t = np.zeros(shape)
    mask = rng.random(shape) < density
    t[mask] = rng.uniform(0.5, 1.5, np.count_nonzero(mask))
    return t


@pytest.fixture(scope="module")
def ttm():
    return {p: spf.Kernel(TTM, {"A": "CSF", "C": "CSF_CCD"}, share={"C": "A"},
                          parallel=p).compile() for p in (False, True)}


@pytest.mark.parametrize("shape,density,seed", [((6, 7, 8), 0.2, 0), ((40, 30, 50), 0.05, 1),
                                                ((5, 5, 5), 0.0, 2), ((1, 1, 1), 1.0, 3),
                                                ((70, 3, 20), 0.1, 4)])
def test_ttm_output_shares_the_first_two_levels(ttm, shape, density, seed):
    T = tensor3(shape, density, seed)
    B = np.random.default_rng(seed).random((shape[2], 16))
    A = spf.Tensor.from_dense("CSF", T)
    want = np.einsum("ijk,kl->ijl", T, B)
    fibres = np.any(T != 0, axis=2)           # the (i, j) fibres A stores
    for parallel, f in ttm.items():
        for threads in ((1, 2, 4) if parallel else (1,)):
            if parallel:
                f.set_num_threads(threads)
            C = f(A=A, B=B)
            assert isinstance(C, spf.Tensor) and C.layout.name == "CSF_CCD"
            assert np.shares_memory(C["idx1"], A["idx1"]) or not A["idx1"].size  # shared
            np.testing.assert_allclose(C.to_dense(), want, rtol=1e-12, atol=1e-12)
            assert np.all(C.to_dense()[~fibres] == 0)


def test_ttm_is_parallel_on_root_fibres_and_has_no_guards():
    k = spf.Kernel(TTM, {"A": "CSF", "C": "CSF_CCD"}, share={"C": "A"}, parallel=True)
    assert k.parallel_loop == "A_p0"
    body = k.c_source().split("int spf_kernel", 1)[1]
    assert "if (" not in body          # the shared positions are the same variables
    assert "C_data[(int64_t)(A_p1) * C_width + C_p2]" in body


@pytest.mark.parametrize("seed,shape,density", [(1, (30, 40), 0.1), (2, (50, 20), 0.02),
                                                (3, (10, 10), 0.0), (4, (1, 7), 0.5)])
@pytest.mark.parametrize("parallel", [False, True])
def test_sddmm_output_shares_the_csr_structure(seed, shape, density, parallel):
    rng = np.random.default_rng(seed)
    S = sp.random(*shape, density=density, format="csr", random_state=seed)
    A, B = rng.random((shape[0], 6)), rng.random((6, shape[1]))
    f = spf.Kernel(SDDMM, {"S": "CSR", "C": "CSR"}, share={"C": "S"},
                   parallel=parallel).compile()
    St = spf.Tensor.from_scipy("CSR", S)
    C = f(S=St, A=A, B=B)
    np.testing.assert_allclose(C.to_dense(), S.toarray() * (A @ B), rtol=1e-12, atol=1e-12)
    assert np.shares_memory(C["colIdx"], St["colIdx"]) or not S.nnz
    acc = spf.Kernel("C(i,j) += S(i,j) * A(i,k) * B(k,j)", {"S": "CSR", "C": "CSR"},
                     share={"C": "S"}).compile()
    again = acc(S=St, A=A, B=B, C=C)          # accumulates into the given output
    np.testing.assert_allclose(again.to_dense(), 2 * S.toarray() * (A @ B), rtol=1e-12)


@pytest.mark.parametrize("layout", ["CSR", "DCSR", "COO", "SortedCOO"])
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("shape,density,seed", [((30, 20), 0.2, 1), ((8, 50), 0.0, 2),
                                                ((12, 9), 0.05, 3)])
def test_spmv_like_kernels_write_into_a_prebuilt_sparse_output(layout, parallel, shape,
                                                               density, seed):
    """C = diag(d) A diag(x) into the structure of A (scaling, an SpMV-like kernel)."""
    rng = np.random.default_rng(seed)
    A = sp.random(*shape, density=density, format="csr", random_state=seed)
    x, d = rng.random(shape[1]), rng.random(shape[0])
    k = spf.Kernel("C(i,j) = A(i,j) * x(j) * d(i)", {"A": layout, "C": layout},
                   share={"C": "A"}, parallel=parallel)
    At = spf.Tensor.from_scipy(layout, A)
    C = k.compile()(A=At, x=x, d=d)
    assert C.layout.name == layout
    np.testing.assert_allclose(C.to_dense(), (sp.diags(d) @ A @ sp.diags(x)).toarray(),
                               rtol=1e-12, atol=1e-12)
    if parallel and layout in ("CSR", "DCSR"):
        assert k.parallel_loop == "A_pi"


def test_share_errors():
    with pytest.raises(spf.SpecError, match="not an input tensor"):
        spf.Kernel(SDDMM, {"S": "CSR", "C": "CSR"}, share={"C": "Z"})
    with pytest.raises(spf.SpecError, match="but the output is"):
        spf.Kernel(SDDMM, {"S": "CSR", "C": "CSR"}, share={"S": "A"})
    with pytest.raises(spf.SpecError,
                       match=r"cannot share index arrays \['rowIdx', 'colIdx'\] with 'S'"):
        spf.Kernel(SDDMM, {"S": "CSR", "C": "COO"}, share={"C": "S"})
    f = spf.Kernel("C(i,j) += S(i,j) * A(i,k) * B(k,j)", {"S": "CSR", "C": "CSR"},
                   share={"C": "S"}).compile()
    S = sp.random(5, 6, density=0.5, format="csr", random_state=0)
    other = spf.Tensor.from_scipy("CSR", sp.random(5, 6, density=0.5, format="csr",
                                                   random_state=1))
    with pytest.raises(spf.ArgumentError, match="must share its structure"):
        f(S=spf.Tensor.from_scipy("CSR", S), A=np.ones((5, 2)), B=np.ones((2, 6)), C=other)


def test_share_in_a_kernel_file(tmp_path):
    path = tmp_path / "ttm.toml"
    path.write_text('expr = "C(i,j,l) = A(i,j,k) * B(k,l)"\nshare = {C = "A"}\n'
                    '[layouts]\nA = "CSF"\nC = "CSF_CCD"\n')
    k = spf.Kernel(str(path))
    assert k.options.share == ("C", "A")
    T = tensor3((4, 5, 6), 0.3, 9)
    B = np.random.default_rng(9).random((6, 16))
    C = k.compile()(A=spf.Tensor.from_dense("CSF", T), B=B)
    np.testing.assert_allclose(C.to_dense(), np.einsum("ijk,kl->ijl", T, B), rtol=1e-12)
    bad = tmp_path / "bad.toml"
    bad.write_text('expr = "C(i,j,l) = A(i,j,k) * B(k,l)"\nshare = "A"\n')
    with pytest.raises(spf.SpecError, match="share must map the output to one tensor"):
        spf.Kernel(str(bad))


def test_allocate_output_shares_the_structure():
    k = spf.Kernel(TTM, {"A": "CSF", "C": "CSF_CCD"}, share={"C": "A"}).compile()
    T = tensor3((4, 5, 6), 0.3, 11)
    A = spf.Tensor.from_dense("CSF", T)
    B = np.random.default_rng(11).random((6, 16))
    C = k.allocate_output(A=A, B=B)
    assert C.shape == (4, 5, 16) and not C.values.any()
    assert np.shares_memory(C["ptr1"], A["ptr1"])
    with pytest.raises(spf.ArgumentError, match="fix index"):
        k.allocate_output(A=A)
