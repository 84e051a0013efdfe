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


def test_the_writer_skips_copies_fills_and_narrowing_it_does_not_need():
    """Issue 53 (speed): an index array stored per entry is written in its own width (no
    int64 array narrowed afterwards), arrays every slot of which the entries write are not
    filled first, and coordinates arriving in key order are ranked without int64 copies."""
    text = spf.Conversion("CSR", "CSR4").c_source()
    writer = text[text.index("int spf_convert_write("):text.index("int spf_convert(")]
    assert "spf_index_t * spf_colIdx_" in writer and "spf_out_colIdx" not in writer
    assert "spf_st_values(spf_data_" in writer and ", !(" in writer     # zeroed only if padded
    in_order, out_of_order = writer.split("if (!spf_in_order_")
    assert "spf_st_vector(n);" not in in_order.split("ranks of the keys within their groups")[1]
    assert "spf_st_ranks(" in out_of_order and "spf_st_ranks(" not in in_order


@pytest.mark.parametrize("src", ["CSR", "CSC"])      # entries in key order, and not
def test_written_layouts_match_scipy_from_ordered_and_unordered_entries(src):
    a = sp.random(37, 23, density=0.2, format="csr", random_state=3)
    a[5, :] = 0                                      # an empty row
    a.eliminate_zeros()
    t = spf.Tensor.from_scipy(src, a if src == "CSR" else a.tocsc())
    for dst in ("ELL", "CSR4", "JDS"):
        out = t.convert(dst, allow_padding=True)
        np.testing.assert_array_equal(out.to_dense(), a.toarray(), err_msg=f"{src}->{dst}")
