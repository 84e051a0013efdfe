"""Periodic monotonicity is checked by code generated from the layout relation."""
import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.read_check import _checker

PERIODIC = [n for n in spf.layout_names()
            if any(p.kind == "periodic_monotonic" for p in spf.load_layout(n).properties)]


def test_periodic_layouts_found():
    assert {"CSR", "CSC", "DCSR", "BCSR", "CSF"} <= set(PERIODIC)


@pytest.mark.parametrize("name", PERIODIC)
def test_checker_source_compiles_clean(name, compiles_clean):
    for part in spf.load_layout(name).parts():     # a union layout is checked part by part
        checker = _checker(part)
        assert checker is not None and "int spf_check(" in checker.source
        compiles_clean(checker.source)


@pytest.mark.parametrize("name", ["CSR", "DCSR", "CSC", "BCSR"])
def test_packed_tensors_pass_and_a_swap_is_rejected(name):
    m = sp.random(30, 40, density=0.3, format="csr", random_state=7)
    t = spf.Tensor.from_scipy(name, m)
    arr = {"CSR": "colIdx", "DCSR": "colIdx", "CSC": "rowIdx", "BCSR": "colIdx"}[name]
    fields = dict(t.fields)
    ptr = fields["colPtr" if name == "CSC" else "rowPtr"]
    lengths = np.diff(ptr)
    seg = int(np.flatnonzero(lengths >= 2)[0])     # a row (column) with two entries
    first = int(ptr[seg])
    swapped = fields[arr].copy()
    swapped[first], swapped[first + 1] = swapped[first + 1], swapped[first]
    fields[arr] = swapped
    with pytest.raises(spf.ArgumentError) as err:
        spf.Tensor.from_arrays(name, m.shape, fields, params=dict(t.layout.params))
    text = str(err.value)
    assert f"'{arr}' violates periodic_monotonic" in text
    assert f"position {first + 1}" in text


def test_csf_inner_fibre_order_is_checked():
    coords = (np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([0, 2, 3]))
    t = spf.Tensor.from_coords("CSF", (2, 2, 4), coords, [1.0, 2.0, 3.0])
    fields = dict(t.fields)
    fields["idx2"] = fields["idx2"][[1, 0, 2]]
    with pytest.raises(spf.ArgumentError, match="'idx2' violates periodic_monotonic"):
        spf.Tensor.from_arrays("CSF", (2, 2, 4), fields)


def test_unchecked_construction_skips_the_check():
    fields = {"numRows": 2, "numCols": 3, "rowPtr": np.array([0, 2, 2]),
              "colIdx": np.array([2, 0]), "data": np.ones(2)}
    with pytest.raises(spf.ArgumentError):
        spf.Tensor.from_arrays("CSR", (2, 3), fields)
    t = spf.Tensor.from_arrays("CSR", (2, 3), fields, check=False)
    assert t.shape == (2, 3)
