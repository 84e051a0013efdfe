"""Every pair of shipped layouts of the same order converts, on random data with empty rows
and rectangular shapes where the layouts allow them, checked against numpy; every layout is
an output of a kernel (elementwise products; SpMV, SpGEMM and TTV where the result fits it).
The matrix of pairs is in docs/layouts.md ("Every pair converts"), kept true by
:func:`test_docs_matrix_lists_every_shipped_layout`."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import covering, lanes

import spf
from spf.front.layout_path import for_order, layout_names, load_layout

DOCS = Path(__file__).resolve().parents[1] / "docs" / "layouts.md"

# what some layouts can hold (the test's knowledge, not spf's): a symmetric matrix, a lower
# triangle, a 16x16 tile with one entry per aligned pair of columns
SQUARE = {"SymCSR": 16, "LowerTri": 16, "CUDAmma16x16": 16}


def _restrict(name: str, d: np.ndarray) -> np.ndarray:
    if load_layout(name).implicit is not None:     # a pattern layout: its constant, 1
        return (d != 0).astype(d.dtype)
    if name == "SymCSR":        # the entries whose mirror is an entry too, made equal
        return np.where((d != 0) & (d.T != 0), np.triu(d) + np.triu(d, 1).T, 0.0)
    if name == "LowerTri":
        return np.tril(d)
    if name == "CUDAmma16x16":
        out = d.copy()
        out[:, 1::2] = 0.0
        return out
    return d


@cache
def _layouts(order: int) -> tuple[str, ...]:
    out = []
    for name in layout_names():
        lay = load_layout(name)
        if lay.order_param is not None or lay.order == order:
            out.append(name)
    return tuple(out)


def _layout(name: str, order: int):
    lay = load_layout(name)
    return for_order(lay, order) if lay.order_param is not None else lay


def _data(order: int, names: tuple[str, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sides = {SQUARE[n] for n in names if n in SQUARE}
    if len(sides) > 1:
        pytest.skip("no matrix fits both layouts' fixed shapes")
    shape = (sides.pop(),) * 2 if sides else {1: (11,), 2: (13, 9), 3: (6, 5, 7)}[order]
    d = rng.random(shape) * (rng.random(shape) < 0.3)
    if order >= 2:
        d[min(2, shape[0] - 1)] = 0.0              # an empty row (slice)
    for _ in range(8):                      # until every restriction holds at once
        before = d
        for n in names:
            d = _restrict(n, d)
        if np.array_equal(before, d):
            break
    return d


DTYPES = ("float64", "int32", "float32", "bool", "complex128", "uint8", "int64", "complex64",
          "int8", "uint16", "int16", "uint32", "uint64")


def _dtype(*names: str) -> str:
    """The value type a case runs in: every type, cycling over the cases (deterministic)."""
    return DTYPES[sum(map(ord, "".join(names))) % len(DTYPES)]


def _typed(d: np.ndarray, dtype: str, names: tuple[str, ...] = ()) -> np.ndarray:
    """``d``'s pattern in ``dtype``: nonzero where ``d`` is (small integers, complex with an
    imaginary part; 1 where one of the layouts ``names`` is a pattern layout)."""
    kind = np.dtype(dtype).kind
    if any(load_layout(n).implicit is not None for n in names):
        return (d != 0).astype(dtype)
    if kind == "b":
        return d != 0
    if kind in "iu":
        return np.ceil(d * 50).astype(dtype)
    return (d + 1j * d).astype(dtype) if kind == "c" else d.astype(dtype)


PAIRS = [(order, a, b) for order in (1, 2, 3) for a in _layouts(order) for b in _layouts(order)]
FAST = covering(*[sorted({p[k] for p in PAIRS}) for k in (1, 2)])


@pytest.mark.parametrize("order,src,dst", lanes(
    PAIRS, lambda p: (p[1], p[2]) in FAST, ids=lambda p: f"{p[1]}-{p[2]}"))
def test_every_pair_converts(order, src, dst):
    # the fast lane's pairs in a type cycling over all 13 (every pair compiles its own
    # conversion per type: the others in float64, whose conversions the runs share)
    dtype = _dtype(src, dst) if (src, dst) in FAST else "float64"
    d = _typed(_data(order, (src, dst), seed=len(src) * 31 + len(dst)), dtype, (src, dst))
    t = spf.Tensor.from_dense(_layout(src, order), d)
    assert t.dtype == d.dtype
    np.testing.assert_array_equal(t.to_dense(), d)
    out = t.convert(_layout(dst, order), allow_padding=True)
    assert out.dtype == d.dtype
    np.testing.assert_array_equal(out.to_dense(), d)


OUTPUTS = [(order, name) for order in (1, 2, 3) for name in _layouts(order)]


@pytest.mark.parametrize("order,name", lanes(
    OUTPUTS, lambda c: c[1] in {"SV", "CSB", "HiCOO", "SymCSR", "DIA"},
    ids=lambda c: f"{c[1]}-{c[0]}"))
def test_every_layout_is_a_kernel_output(order, name):
    idx = "ijk"[:order]
    d = _data(order, (name,), seed=3)
    e = _data(order, (name,), seed=4) * 2
    lay = _layout(name, order)
    coo = _layout("COOTensor", order).with_index_type(lay.index_type)   # one kernel, one width
    dtype = _dtype(name)
    dt, et = _typed(d, dtype), _typed(e, dtype)
    a, b = (spf.Tensor.from_dense(coo, x) for x in (dt, et))
    pattern = lay.implicit is not None      # its entries' positions: the product's structure
    k = spf.Kernel(f"C({','.join(idx)}) = A({','.join(idx)}) * B({','.join(idx)})",
                   {"A": coo, "B": coo, "C": lay}, dtype=dtype, structure=pattern)
    c = k.compile()(A=a, B=b)
    assert c.dtype == np.dtype(dtype)
    with np.errstate(over="ignore"):
        want = dt * et
        np.testing.assert_allclose(_dense(c), (want != 0).astype(dtype) if pattern else want,
                                   rtol=1e-6)
    if order == 2 and name not in SQUARE:
        m = spf.Tensor.from_dense("CSR", d, index_type=lay.index_type)
        x = np.random.default_rng(5).random(d.shape[1])
        y = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR", "y": "SV"},
                       index_type=lay.index_type).compile()(A=m, x=x)
        np.testing.assert_allclose(y.to_dense(), d @ x)
        prod = spf.Kernel("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": lay},
                          structure=pattern)
        bt = spf.Tensor.from_dense("CSR", e.T.copy(), index_type=lay.index_type)
        want = d @ e.T
        np.testing.assert_allclose(_dense(prod.compile()(A=m, B=bt)),
                                   (want != 0) * 1.0 if pattern else want)
    if order == 3:
        v = np.arange(d.shape[2], dtype=float)
        ttv = spf.Kernel("Y(i,j) = T(i,j,k) * v(k)", {"T": lay, "Y": "CSR"})
        t = spf.Tensor.from_dense(lay, d)
        np.testing.assert_allclose(_dense(ttv.compile()(T=t, v=v)), d @ v)


def _dense(x) -> np.ndarray:
    return x.to_dense() if isinstance(x, spf.Tensor) else np.asarray(x)


def written_by(name: str, order: int) -> str:
    """How a conversion from the coordinate layout writes into ``name``."""
    lay = _layout(name, order)
    conv = spf.Conversion(_layout("COOTensor", order), lay, index_type=lay.index_type)
    if conv.writing is not None:
        return "written by its relation's solution"
    if lay.dense_array is not None:
        return "generated kernel (dense)"
    return "assembled by a generated kernel"


def pairs_table() -> str:
    rows = [f"| `{name}` | {order} | {written_by(name, order)} |"
            for order in (1, 2, 3) for name in _layouts(order)
            if load_layout(name).order_param is None or order == 3]
    return "\n".join(rows)


def test_docs_matrix_lists_every_shipped_layout():
    text = DOCS.read_text()
    table = text.split("<!-- pairs table: checked by tests/test_every_pair.py -->\n", 1)[1]
    table = table.split("<!-- end pairs table -->", 1)[0]
    assert table.splitlines()[2:] == pairs_table().splitlines(), pairs_table()
