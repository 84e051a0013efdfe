"""Issue 52, generated C and memory: every index-array read of a kernel is in bounds, whatever
the index arithmetic, and the sizing pass of an assembled output is an upper bound.

The adversarial suite crashed now and then (SIGSEGV, depending on what earlier jobs had left
on the heap) and once met ``'R' outgrew the arrays sized by spf_kernel_bound``: a SymCSR
operand read with index arithmetic (``A(i + 3, j)``, ``A(i, 2*j)``) made its nest read
``rowPtr`` past the end (a 0x0 operand's ``rowPtr[4]``), as the scanner left ``pi < numRows``
to an inner level that implies it through the layout's range of ``colIdx`` (or to the
parameters' context); the positions read there led further astray, and the sizing pass
counted from other values past the end than the kernel.  A read past the end of an array
does not fail by itself, so the kernels run in a subprocess on *fenced* operands: each array
ends where a page without access begins, and any read past its end faults at once.  Results
are compared with numpy.

The same fences found two more reads past the end with index arithmetic: an affine access
index read by two tensors (``B(i+1, k) * A(i+1, j)``) was given one extent for both, so the
loop over B's rows read A's ``rowPtr`` as far; and an array of SeqIter states was filled with
each key's first position before any search, reading ``rowPtr`` at keys the nest never
reaches (the array spans a loop bound like ``5`` from ``A(-j+3, j+2)``).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from functools import cache

import numpy as np
import pytest

pytestmark = pytest.mark.slow

_RUN = textwrap.dedent("""
    import ctypes, json, mmap, sys
    import numpy as np, spf

    PAGE = mmap.PAGESIZE
    _libc = ctypes.CDLL(None)
    _libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _kept = []

    def fenced(a):
        \"\"\"A copy of ``a`` whose last byte is followed by a page without access.\"\"\"
        a = np.ascontiguousarray(a)
        pages = -(-a.nbytes // PAGE) + 1
        m = mmap.mmap(-1, pages * PAGE)
        raw = np.frombuffer(m, np.uint8)
        assert _libc.mprotect(raw.ctypes.data + (pages - 1) * PAGE, PAGE, 0) == 0
        start = (pages - 1) * PAGE - a.nbytes
        out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
        out[...] = a
        _kept.append(m)
        return out

    def fence(t):
        \"\"\"The tensor ``t`` with every array fenced (a Tensor keeps arrays of its types).\"\"\"
        fields = {k: fenced(v) if isinstance(v, np.ndarray) else v for k, v in t.fields.items()}
        out = spf.Tensor.from_arrays(t.layout, t.shape, fields)
        assert all(out.fields[k].ctypes.data == f.ctypes.data
                   for k, f in fields.items() if isinstance(f, np.ndarray))
        return out

    cases = json.loads(sys.argv[1])
    out, kernels = {}, {}
    for name, (expr, layouts, dtype, fill, operands) in cases.items():
        key = json.dumps([expr, layouts, dtype, fill])
        if key not in kernels:
            kernels[key] = spf.Kernel(expr, layouts, dtype=dtype, fill_values=fill).compile()
        k = kernels[key]
        args = {}
        for t, (layout, flat, dt, shape) in operands.items():
            d = np.array(flat, dt).reshape(shape)
            args[t] = fence(spf.Tensor.from_dense(layout, d)) if layout else fenced(d)
        r = k(**args)
        r = r.to_dense() if hasattr(r, "to_dense") else np.asarray(r)
        out[name] = [list(r.shape), r.tolist()]
    print(json.dumps(out))
""")


def _operand(layout: str | None, a: np.ndarray) -> list:
    """An operand for the subprocess: its layout (None: a numpy array), values, type, shape."""
    return [layout, a.ravel().tolist(), str(a.dtype), list(a.shape)]


def _run(cases: dict) -> dict:
    """Each case's result (shape, values) from a subprocess; a crash fails the test."""
    run = subprocess.run([sys.executable, "-c", _RUN, json.dumps(cases)], capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, f"exit {run.returncode}:\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.splitlines()[-1])


def _symmetric(n: int, dtype: str, seed: int, values=(1, 2, 3)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.choice(np.array(values), (n, n)) * (rng.random((n, n)) < 0.6)
    m = np.triu(m) + np.triu(m, 1).T
    return m.astype(dtype)


# -- C1: A(i + 3, j) * v(i) * A(i + j, j) over SymCSR -----------------------------------------

_OFFSETS = "R = A(i + 3, j) * (v(i) * A(i + j, j))"


def _offsets_reference(a: np.ndarray, v: np.ndarray) -> int:
    """numpy's uint32 sum over i < len(v), j < A's columns, where both reads are in A."""
    n = len(v)
    total = 0
    for i in range(n):
        for j in range(a.shape[1]):
            if i + 3 < a.shape[0] and i + j < a.shape[0]:
                total += int(a[i + 3, j]) * int(v[i]) * int(a[i + j, j])
    return total % 2 ** 32


@cache
def _offsets_runs() -> tuple[dict, dict]:
    """(operands, results) of the offsets kernel over SymCSR of 0, 1, 3, 4 and 7 rows."""
    operands = {}
    for n in (0, 1, 3, 4, 7):
        a = _symmetric(n, "uint32", n)
        v = np.arange(1, n + 1, dtype=np.uint32)
        operands[f"n={n}"] = (a, v)
    cases = {name: [_OFFSETS, {"A": "SymCSR"}, {"A": "uint32", "v": "uint32", "R": "uint32"},
                    False, {"A": _operand("SymCSR", a), "v": _operand(None, v)}]
             for name, (a, v) in operands.items()}
    return operands, _run(cases)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 7])
def test_offset_rows_of_a_symmetric_operand_are_read_in_bounds(n):
    """The nest tests ``pi < numRows`` before reading ``rowPtr[pi + 1]`` at ``pi = i + 3``
    (the old nest read ``rowPtr[4]`` of a 0x0 operand: SIGSEGV on fenced arrays)."""
    operands, results = _offsets_runs()
    a, v = operands[f"n={n}"]
    shape, value = results[f"n={n}"]
    assert shape == [] and value == _offsets_reference(a, v)


# -- C1 and C2: a sum with index arithmetic into a DCSR output --------------------------------

_SUM = "R(i,j) = ((B(-i + 2, -j + 3) + A(i, j)) + A(i, 2*j)) + A(i, j)"
_ISSUE_A = np.array([[True, True, False], [True, True, False], [False, False, False]])
_ISSUE_B = np.array([[-3.0, -2.5, 0.0], [-2.5, 2.5, np.nan], [0.0, np.nan, 0.0]], np.float32)


def _sum_reference(a: np.ndarray, b: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """numpy's float32 value of the statement at each element of an output of ``shape``."""
    r = np.zeros(shape, np.float32)
    na, nb = a.shape[0], b.shape[0]
    for i in range(shape[0]):
        for j in range(shape[1]):
            x = np.float32(0)
            if 0 <= 2 - i < nb and 0 <= 3 - j < nb:
                x = b[2 - i, 3 - j]
            if i < na and j < na:
                x = x + np.float32(a[i, j])
            if i < na and 2 * j < na:
                x = x + np.float32(a[i, 2 * j])
            if i < na and j < na:
                x = x + np.float32(a[i, j])
            r[i, j] = x
    return r


_SUM_OPERANDS = {
    "issue": (_ISSUE_A, _ISSUE_B),
    "both 0x0": (np.zeros((0, 0), bool), np.zeros((0, 0), np.float32)),
    "both 1x1": (np.ones((1, 1), bool), np.full((1, 1), 2.5, np.float32)),
    "A 0x0": (np.zeros((0, 0), bool), _ISSUE_B),
    "B 0x0": (_ISSUE_A, np.zeros((0, 0), np.float32)),
    "A 1x1, B 4x4": (np.ones((1, 1), bool), _symmetric(4, "float32", 1, (-1.5, 2.0))),
    "A 5x5, B 2x2": (_symmetric(5, "bool", 2, (True,)), _symmetric(2, "float32", 3, (4.0,))),
    "A 7x7, B 3x3": (_symmetric(7, "bool", 4, (True,)), _symmetric(3, "float32", 5, (-1.0,))),
}


@cache
def _sum_runs() -> dict:
    cases = {f"{name}, fill_values={fill}": [
        _SUM, {"A": "SymCSR", "B": "SymCSR", "R": "DCSR"},
        {"A": "bool", "B": "float32", "R": "float32"}, fill,
        {"A": _operand("SymCSR", a), "B": _operand("SymCSR", b)}]
        for name, (a, b) in _SUM_OPERANDS.items() for fill in (False, True)}
    return _run(cases)


@pytest.mark.parametrize("fill", [False, True])
@pytest.mark.parametrize("name", sorted(_SUM_OPERANDS))
def test_sum_with_index_arithmetic_into_dcsr_reads_in_bounds_and_is_sized(name, fill):
    """Each term's loop over A's rows stops at ``numRows`` (``A(i, 2*j)``: the old loop ran to
    ``2*numCols(R) - 1``, past ``rowPtr``'s end, and its sizing pass counted from there: a
    crash, or ``RuntimeError: 'R' outgrew the arrays sized by spf_kernel_bound``)."""
    a, b = _SUM_OPERANDS[name]
    shape, values = _sum_runs()[f"{name}, fill_values={fill}"]
    got = np.array(values, np.float32).reshape(shape)
    if name == "issue":     # the extents of docs/expressions.md, "The output's extent"
        assert shape == [3, 4]
    np.testing.assert_array_equal(got, _sum_reference(a, b, tuple(shape)))


# -- an affine access index read by tensors of different extents -----------------------------

_SHARED = "R = B(i+1, k) * A(i+1, j)"
_SHARED_OPERANDS = {
    "A 1x2, B 4x2": (np.array([[1.0, 2.0]]), np.arange(1.0, 9.0).reshape(4, 2)),
    "A 4x2, B 1x3": (np.arange(1.0, 9.0).reshape(4, 2), np.array([[1.0, 0.0, 3.0]])),
    "A 0x0, B 3x3": (np.zeros((0, 0)), np.ones((3, 3))),
    "A 3x1, B 0x2": (np.ones((3, 1)), np.zeros((0, 2))),
    "A 5x3, B 2x4": (np.eye(5, 3), np.arange(8.0).reshape(2, 4)),
}


@cache
def _shared_runs() -> dict:
    return _run({name: [_SHARED, {"A": "CSR", "B": "CSR"}, None, False,
                        {"A": _operand("CSR", a), "B": _operand("CSR", b)}]
                 for name, (a, b) in _SHARED_OPERANDS.items()})


@pytest.mark.parametrize("name", sorted(_SHARED_OPERANDS))
def test_an_affine_index_read_by_two_tensors_keeps_each_ones_extent(name):
    """``i+1`` ranges over the rows of A and of B, each read only within its own (the old
    nest took B's row count for A's too and read A's ``rowPtr`` past its end)."""
    a, b = _SHARED_OPERANDS[name]
    rows = min(a.shape[0], b.shape[0])      # i + 1 must be a row of both
    want = sum(a[r].sum() * b[r].sum() for r in range(rows))
    shape, value = _shared_runs()[name]
    assert shape == [] and value == want


# -- an array of SeqIter states over keys no search reaches -----------------------------------

_STATES = "R = B(i, -i+2) * A(-j+3, j+2)"
_STATES_OPERANDS = {
    "2x2": (np.array([[0.0, -2.0], [0.0, -1.0]]), np.array([[0.0, 0.0], [0.0, -3.0]])),
    "0x0": (np.zeros((0, 0)), np.zeros((0, 0))),
    "4x6, 3x3": (np.arange(24.0).reshape(4, 6), np.arange(9.0).reshape(3, 3)),
    "7x7, 1x3": (np.arange(49.0).reshape(7, 7) % 3, np.array([[0.0, 2.0, 5.0]])),
}


def _states_reference(a: np.ndarray, b: np.ndarray) -> float:
    """Every i with (i, 2-i) in B times every j with (3-j, j+2) in A."""
    left = sum(b[i, 2 - i] for i in range(b.shape[0]) if 0 <= 2 - i < b.shape[1])
    right = sum(a[3 - j, j + 2] for j in range(-2, 4)
                if 0 <= 3 - j < a.shape[0] and 0 <= j + 2 < a.shape[1])
    return float(left * right)


@cache
def _states_runs() -> dict:
    return _run({name: [_STATES, {"A": "CSR", "B": "CSC"}, None, False,
                        {"A": _operand("CSR", a), "B": _operand("CSC", b)}]
                 for name, (a, b) in _STATES_OPERANDS.items()})


@pytest.mark.parametrize("name", sorted(_STATES_OPERANDS))
def test_an_array_of_seqiter_states_reads_only_where_a_search_runs(name):
    """The array of A's states spans A_pi < 6 (``j+2 <= 5``); each entry starts at
    ``rowPtr[A_pi]`` when its first search runs (the old code filled all six at once, reading
    ``rowPtr`` of a 2x2 A at 3..5)."""
    a, b = _STATES_OPERANDS[name]
    shape, value = _states_runs()[name]
    assert shape == [] and value == _states_reference(a, b)
