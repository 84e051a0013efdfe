"""Packer round trips for every shipped layout, and validation of hand-built tensors.

Layouts are discovered at run time (``spf.layout_names()``), so a new layout file with a
packer is covered automatically.  ``to_dense()`` runs a generated kernel, so a round trip
checks the packer *and* the layout's relation.  References are numpy arrays built from the
original input, never spf output.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spf

PACK_ERRORS = (spf.ArgumentError, ValueError)

# Layouts whose packer must represent every tensor of their order.  Other layouts with a
# packer (e.g. LowerTri, CUDAmma16x16) may refuse a case: that case is skipped for them, and
# test_every_layout_packs_some_case makes sure each of them still round-trips something.
GENERAL = {"DenseVector", "DenseMatrix", "DenseTensor3", "SV", "SV_unsorted", "SV_decreasing",
           "CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "ELL", "DIA", "CSF"}


def _packable(order: int) -> list[str]:
    out = []
    for name in spf.layout_names():
        lay = spf.load_layout(name)
        if lay.packer and lay.order == order:
            out.append(name)
    return out


LAYOUTS = {k: _packable(k) for k in (1, 2, 3)}


# ------------------------------------------------------------------------------ cases
def _random(shape, density, seed, lower=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2.0, 2.0, size=shape)
    a[rng.random(shape) >= density] = 0.0
    if lower:
        a = np.tril(a)
    return a


def _one(shape, at, value=3.5):
    a = np.zeros(shape)
    a[at] = value
    return a


def _empty_rows():
    a = _random((6, 5), 0.7, 11)
    a[[0, 2, 5], :] = 0.0
    return a


def _one_per_pair_16(seed):
    """16x16 with at most one nonzero per aligned column pair of a row (CUDA mma sparsity)."""
    rng = np.random.default_rng(seed)
    a = np.zeros((16, 16))
    for r in range(16):
        for pair in range(8):
            if rng.random() < 0.6:
                a[r, 2 * pair + rng.integers(2)] = rng.uniform(-2, 2)
    return a


CASES = {
    1: {
        "empty": np.zeros(9),
        "one_first": _one((9,), 0),
        "one_last": _one((9,), 8),
        "full": np.arange(1.0, 8.0),
        "size1": np.array([4.25]),
        "size0": np.zeros(0),
        "random0": _random((40,), 0.3, 0),
        "random1": _random((40,), 0.5, 1),
        "random2": _random((17,), 0.2, 2),
    },
    2: {
        "empty": np.zeros((5, 4)),
        "empty_rows": _empty_rows(),
        "empty_cols": _empty_rows().T.copy(),
        "one": _one((4, 6), (2, 3)),
        "one_corner": _one((6, 4), (5, 3), -1.5),
        "full": np.arange(1.0, 21.0).reshape(4, 5),
        "rect_7x13": _random((7, 13), 0.3, 3),
        "rect_13x7": _random((13, 7), 0.3, 4),
        "square0": _random((10, 10), 0.25, 5),
        "square1": _random((12, 12), 0.5, 6),
        "lower_square": _random((9, 9), 0.5, 7, lower=True),
        "lower_one": _one((5, 5), (3, 1)),
        "lower_empty": np.zeros((4, 4)),
        "mma16": _one_per_pair_16(8),
        "zero_rows": np.zeros((0, 5)),
        "zero_cols": np.zeros((3, 0)),
        "zero_square": np.zeros((0, 0)),
    },
    3: {
        "empty": np.zeros((3, 4, 5)),
        "one": _one((3, 4, 5), (1, 2, 3)),
        "empty_slices": _random((4, 3, 5), 0.5, 9) * np.array([0, 1, 0, 1])[:, None, None],
        "full": np.arange(1.0, 13.0).reshape(2, 3, 2),
        "zero_dim": np.zeros((2, 0, 3)),
        "random0": _random((5, 6, 7), 0.2, 10),
        "random1": _random((3, 8, 2), 0.5, 12),
    },
}


def _shuffled_coords_with_duplicates(a: np.ndarray, seed: int):
    """Nonzeros of ``a`` in random order, some split into two entries with equal coordinates
    (their values sum to the original), plus an explicit entry pair that cancels to zero."""
    rng = np.random.default_rng(seed)
    nz = np.nonzero(a)
    coords = [c.astype(np.int64) for c in nz]
    values = a[nz].astype(np.float64)
    split = rng.random(len(values)) < 0.4
    dup_coords = [c[split] for c in coords]
    dup_values = values[split] * 0.25
    values = values.copy()
    values[split] -= dup_values
    coords = [np.concatenate([c, d]) for c, d in zip(coords, dup_coords)]
    values = np.concatenate([values, dup_values])
    if len(values):  # an existing nonzero gets +1 and -1 more: net unchanged
        k = int(rng.integers(len(values)))
        coords = [np.concatenate([c, [c[k], c[k]]]) for c in coords]
        values = np.concatenate([values, [1.0, -1.0]])
    perm = rng.permutation(len(values))
    return tuple(c[perm] for c in coords), values[perm]


def _pack(layout: str, build):
    """Run ``build()``; for layouts outside GENERAL, a refusal skips the case."""
    try:
        return build()
    except PACK_ERRORS as exc:
        if layout in GENERAL:
            raise
        pytest.skip(f"{layout} cannot represent this case: {exc}")


def _check(t: spf.Tensor, expected: np.ndarray, layout: str):
    assert t.layout.name == layout
    assert t.shape == expected.shape
    got = t.to_dense()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)


def _params_variants(layout: str):
    """Default parameters, plus a small block size for layouts with a block parameter B."""
    variants = [{}]
    if "B" in spf.load_layout(layout).params:
        variants.append({"B": 3})
    return variants


def _round_trip_ids(order):
    return [(lay, case) for lay in LAYOUTS[order] for case in CASES[order]]


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("order", [1, 2, 3])
def test_layouts_discovered(order):
    assert LAYOUTS[order], f"no layout with a packer stores order-{order} tensors"


@pytest.mark.parametrize("layout,case", _round_trip_ids(2))
def test_round_trip_matrix(layout, case):
    a = CASES[2][case]
    for params in _params_variants(layout):
        # from_dense
        _check(_pack(layout, lambda: spf.Tensor.from_dense(layout, a, **params)), a, layout)
        # from_scipy: CSR input (sorted, unique) and COO input (shuffled, duplicates)
        _check(_pack(layout, lambda: spf.Tensor.from_scipy(layout, sp.csr_matrix(a), **params)),
               a, layout)
        coords, values = _shuffled_coords_with_duplicates(a, seed=len(case))
        coo = sp.coo_matrix((values, coords), shape=a.shape)
        _check(_pack(layout, lambda: spf.Tensor.from_scipy(layout, coo, **params)), a, layout)
        # from_coords with shuffled, duplicate coordinates
        _check(_pack(layout, lambda: spf.Tensor.from_coords(layout, a.shape, coords, values,
                                                            **params)), a, layout)


@pytest.mark.parametrize("layout,case", _round_trip_ids(1))
def test_round_trip_vector(layout, case):
    a = CASES[1][case]
    _check(_pack(layout, lambda: spf.Tensor.from_dense(layout, a)), a, layout)
    coords, values = _shuffled_coords_with_duplicates(a, seed=len(case))
    _check(_pack(layout, lambda: spf.Tensor.from_coords(layout, a.shape, coords, values)),
           a, layout)


@pytest.mark.parametrize("layout,case", _round_trip_ids(3))
def test_round_trip_order3(layout, case):
    a = CASES[3][case]
    _check(_pack(layout, lambda: spf.Tensor.from_dense(layout, a)), a, layout)
    coords, values = _shuffled_coords_with_duplicates(a, seed=len(case))
    _check(_pack(layout, lambda: spf.Tensor.from_coords(layout, a.shape, coords, values)),
           a, layout)


@pytest.mark.parametrize("layout", LAYOUTS[1] + LAYOUTS[2] + LAYOUTS[3])
def test_every_layout_packs_some_case(layout):
    order = spf.load_layout(layout).order
    packed = 0
    for a in CASES[order].values():
        try:
            t = spf.Tensor.from_dense(layout, a)
        except PACK_ERRORS:
            continue
        _check(t, a, layout)
        packed += int(np.count_nonzero(a) > 0)
    assert packed, f"{layout} packed none of the nonempty test cases"


# ------------------------------------------------------------------------------ stored order
def _coords_in_order(n, seed):
    rng = np.random.default_rng(seed)
    idx = rng.choice(n, size=n // 2, replace=False)
    return idx, rng.uniform(1, 2, size=len(idx))


def test_sv_orders():
    idx, vals = _coords_in_order(30, 0)
    assert not np.all(np.diff(idx) > 0)
    t = spf.Tensor.from_coords("SV", (30,), (idx,), vals)
    assert np.all(np.diff(t["idx"]) > 0)
    t = spf.Tensor.from_coords("SV_decreasing", (30,), (idx,), vals)
    assert np.all(np.diff(t["idx"]) < 0)
    t = spf.Tensor.from_coords("SV_unsorted", (30,), (idx,), vals)
    np.testing.assert_array_equal(t["idx"], idx)   # the caller's order is kept
    np.testing.assert_array_equal(t["val"], vals)
    assert t["len"] == len(idx) and t["size"] == 30


def test_sorted_coo_order():
    a = _random((9, 11), 0.4, 20)
    coords, values = _shuffled_coords_with_duplicates(a, 3)
    t = spf.Tensor.from_coords("SortedCOO", a.shape, coords, values)
    rows, cols = t["rowIdx"], t["colIdx"]
    assert np.all(np.diff(rows) >= 0)
    same = np.diff(rows) == 0
    assert np.all(np.diff(cols)[same] > 0)
    assert t["numNNZ"] == np.count_nonzero(a)
    u = spf.Tensor.from_coords("COO", a.shape, coords, values)
    assert u["numNNZ"] == np.count_nonzero(a)


def test_csc_matches_scipy():
    a = _random((7, 13), 0.35, 21)
    t = spf.Tensor.from_scipy("CSC", sp.coo_matrix(a))
    ref = sp.csc_matrix(a)
    ref.sort_indices()
    np.testing.assert_array_equal(t["colPtr"], ref.indptr)
    np.testing.assert_array_equal(t["rowIdx"], ref.indices)
    np.testing.assert_array_equal(t["data"], ref.data)
    assert (t["numRows"], t["numCols"]) == (7, 13)


# ------------------------------------------------------------------------------ validation
def _csr_arrays():
    # [[1, 0, 2], [0, 0, 0], [0, 3, 0]]
    return {"numRows": 3, "numCols": 3, "rowPtr": np.array([0, 2, 2, 3]),
            "colIdx": np.array([0, 2, 1]), "data": np.array([1.0, 2.0, 3.0])}


def _with(base, **changes):
    out = dict(base)
    out.update(changes)
    return out


def test_valid_csr_from_arrays():
    t = spf.Tensor.from_arrays("CSR", (3, 3), _csr_arrays())
    np.testing.assert_array_equal(t.to_dense(), [[1, 0, 2], [0, 0, 0], [0, 3, 0]])
    assert t["rowPtr"].dtype == np.int32 and t["data"].dtype == np.float64


BROKEN = [
    # layout, shape, arrays, words the message must contain
    ("CSR", (3, 3), _with(_csr_arrays(), rowPtr=np.array([0, 2, 1, 3])), ["rowPtr", "monotonic"]),
    ("CSR", (3, 3), _with(_csr_arrays(), rowPtr=np.array([-1, 2, 2, 3])), ["rowPtr", "range"]),
    ("CSR", (3, 3), _with(_csr_arrays(), colIdx=np.array([0, 3, 1])), ["colIdx", "range"]),
    ("CSR", (3, 3), _with(_csr_arrays(), colIdx=np.array([0, -1, 1])), ["colIdx", "range"]),
    ("CSR", (3, 3), _with(_csr_arrays(), colIdx=np.array([0, 2])), ["colIdx", "3"]),
    ("CSR", (3, 3), _with(_csr_arrays(), data=np.ones(4)), ["data"]),
    ("CSR", (3, 3), _with(_csr_arrays(), rowPtr=np.array([0, 2, 3])), ["rowPtr"]),
    ("CSR", (3, 3), _with(_csr_arrays(), data=np.array([1, 2, 3], dtype=object)),
     ["data", "object", "not supported"]),
    ("CSR", (3, 3), _with(_csr_arrays(), colIdx=np.array([0.0, 2.0, 1.0])), ["colIdx", "float"]),
    ("CSR", (3, 3), _with(_csr_arrays(), numRows=2.5), ["numRows"]),
    ("CSR", (3, 3), _with(_csr_arrays(), numCols=-3), ["numCols"]),
    ("CSR", (3, 4), _csr_arrays(), ["shape"]),
    ("CSR", (3, 3), {k: v for k, v in _csr_arrays().items() if k != "colIdx"}, ["colIdx"]),
    ("CSR", (3, 3), _with(_csr_arrays(), extra=np.ones(3)), ["extra"]),
    ("CSC", (3, 3), {"numRows": 3, "numCols": 3, "colPtr": np.array([0, 1, 1, 3]),
                     "rowIdx": np.array([0, 3, 1]), "data": np.ones(3)}, ["rowIdx", "range"]),
    ("CSC", (3, 3), {"numRows": 3, "numCols": 3, "colPtr": np.array([0, 2, 1, 3]),
                     "rowIdx": np.array([0, 2, 1]), "data": np.ones(3)}, ["colPtr", "monotonic"]),
    ("CSC", (3, 3), {"numRows": 3, "numCols": 3, "colPtr": np.array([0, 1, 1, 3]),
                     "rowIdx": np.array([0, 2, 1]), "data": np.ones(2)}, ["data"]),
    ("SV", (5,), {"size": 5, "len": 3, "idx": np.array([0, 3, 2]), "val": np.ones(3)},
     ["idx", "monotonic"]),
    ("SV", (5,), {"size": 5, "len": 3, "idx": np.array([0, 2, 5]), "val": np.ones(3)},
     ["idx", "range"]),
    ("SV", (5,), {"size": 5, "len": 3, "idx": np.array([0, 2, 3]), "val": np.ones(2)}, ["val"]),
    ("SV_decreasing", (5,), {"size": 5, "len": 3, "idx": np.array([4, 2, 3]), "val": np.ones(3)},
     ["idx", "monotonic"]),
    ("SV_decreasing", (5,), {"size": 5, "len": 2, "idx": np.array([2, 2]), "val": np.ones(2)},
     ["idx", "monotonic"]),
    ("SV_unsorted", (5,), {"size": 5, "len": 3, "idx": np.array([3, 1, 3]), "val": np.ones(3)},
     ["idx", "injective"]),
    ("SV_unsorted", (5,), {"size": 5, "len": 2, "idx": np.array([3, -1]), "val": np.ones(2)},
     ["idx", "range"]),
    ("SV_unsorted", (5,), {"size": 5, "len": 2, "idx": np.array([3, 1]),
                           "val": np.array(["a", "b"])}, ["val", "not supported"]),
    ("COO", (3, 3), {"numRows": 3, "numCols": 3, "numNNZ": 3, "rowIdx": np.array([0, 2, 0]),
                     "colIdx": np.array([1, 1, 1]), "data": np.ones(3)}, ["injective"]),
    ("SortedCOO", (3, 3), {"numRows": 3, "numCols": 3, "numNNZ": 3,
                           "rowIdx": np.array([0, 2, 1]), "colIdx": np.array([0, 1, 2]),
                           "data": np.ones(3)}, ["rowIdx", "monotonic"]),
    ("SortedCOO", (3, 3), {"numRows": 3, "numCols": 3, "numNNZ": 3,
                           "rowIdx": np.array([0, 1, 1]), "colIdx": np.array([0, 2, 1]),
                           "data": np.ones(3)}, ["colIdx", "covary"]),
    ("SortedCOO", (3, 3), {"numRows": 3, "numCols": 3, "numNNZ": 3,
                           "rowIdx": np.array([0, 1, 1]), "colIdx": np.array([0, 1, 1]),
                           "data": np.ones(3)}, ["colIdx"]),
    ("SortedCOO", (3, 3), {"numRows": 3, "numCols": 3, "numNNZ": 3,
                           "rowIdx": np.array([0, 1, 3]), "colIdx": np.array([0, 1, 1]),
                           "data": np.ones(3)}, ["rowIdx", "range"]),
]


@pytest.mark.parametrize("layout,shape,arrays,words", BROKEN,
                         ids=[f"{b[0]}-{k}" for k, b in enumerate(BROKEN)])
def test_validation_rejects(layout, shape, arrays, words):
    with pytest.raises(spf.ArgumentError) as info:
        spf.Tensor.from_arrays(layout, shape, arrays)
    message = str(info.value)
    for w in words:
        assert w in message, f"message {message!r} should mention {w!r}"
