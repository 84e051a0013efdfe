"""The write path in C (spf.store): limits and edge cases (the C of each conversion called
from a C driver: tests/test_conversion_c_driver.py)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.runtime.memory import allocation_limit


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
