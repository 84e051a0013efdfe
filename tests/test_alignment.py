"""Arrays spf allocates for kernels to write start on a 64-byte boundary (a cache line), so a
vectorized loop over an output row never splits its loads and stores over two lines; arrays
under SMALL bytes keep numpy's alignment (aligning them costs as much as the loop saves)."""
from __future__ import annotations

import numpy as np
import pytest

import spf
from spf.runtime.memory import ALIGNMENT, SMALL, aligned_zeros

TTM = "C(i,j,l) = A(i,j,k) * B(k,l)"


def aligned(a: np.ndarray) -> bool:
    return a.ctypes.data % ALIGNMENT == 0 or a.nbytes < SMALL


@pytest.mark.parametrize("shape", [0, 1, 7, (3, 5), (2, 3, 16), 128, (130, 1), (1000, 17)])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_aligned_zeros(shape, dtype):
    for _ in range(20):          # numpy's own alignment varies from one allocation to the next
        a = aligned_zeros(shape, dtype)
        assert aligned(a)
        assert a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
        assert a.shape == ((shape,) if isinstance(shape, int) else shape)
        assert not a.any()


def test_outputs_spf_allocates_are_aligned():
    rng = np.random.default_rng(0)
    dense = (rng.random((9, 5, 7)) < 0.3) * rng.random((9, 5, 7))
    A = spf.Tensor.from_dense("CSF", dense)
    B = rng.random((7, 16))
    reference = np.einsum("ijk,kl->ijl", dense, B)
    fibres = spf.Kernel(TTM, {"A": "CSF", "C": "CSF_CCD"}, share={"C": "A"}).compile()
    full = spf.Kernel(TTM, {"A": "CSF"}).compile()
    for _ in range(10):
        C = fibres.allocate_output(A=A, B=B)
        assert aligned(C.fields["data"])
        fibres(A=A, B=B, C=C)
        np.testing.assert_allclose(C.to_dense(), reference)
        D = full(A=A, B=B)
        assert aligned(D)
        np.testing.assert_allclose(D, reference)
        assert aligned(full.allocate_output(A=A, B=B).values)


def test_converted_values_are_aligned():
    rng = np.random.default_rng(1)
    for n in range(30, 150, 13):
        m = np.eye(n) + np.diag(rng.random(n - 1), 1)
        for layout in ("ELL", "DIA"):
            t = spf.Tensor.from_dense(layout, m)
            assert aligned(t.values), (layout, n)
            np.testing.assert_allclose(t.to_dense(), m)
