"""Crash fuzzer: custom layouts (with any subset of their properties, none included) and random,
often corrupted, arrays.  Whatever passes validation must run every kernel without reading out
of bounds (this script runs under AddressSanitizer and UndefinedBehaviorSanitizer, see
tests/test_sanitizers.py) and match a dense reference computed from the layout family's
meaning.  Not collected by pytest.

    python tests/sanitize/fuzz_layouts.py [EXAMPLES]     (default $SPF_FUZZ_EXAMPLES or 60)
"""
import hashlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spf

DIR = Path(tempfile.mkdtemp(prefix="spf_fuzz_layouts_"))
COUNTS = {"refused": 0, "ran": 0}
FIELDS = {
    "rows": {"numRows": "int", "numCols": "int", "rowPtr": "int[numRows + 1]",
             "colIdx": "int[rowPtr(numRows)]", "perm": "int[rowPtr(numRows)]",
             "data": "double[rowPtr(numRows)]"},
    "coords": {"numRows": "int", "numCols": "int", "nnz": "int", "rowIdx": "int[nnz]",
               "colIdx": "int[nnz]", "perm": "int[nnz]", "data": "double[nnz]"},
    "jds": {"numRows": "int", "numCols": "int", "numDiags": "int", "jdPtr": "int[numDiags + 1]",
            "perm": "int[numRows]", "colIdx": "int[jdPtr(numDiags)]",
            "data": "double[jdPtr(numDiags)]"},
}
RELATIONS = {
    "rows": "{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pj < rowPtr(pi + 1) "
            "and gi = pi and gj = colIdx(pj)}",
    "coords": "{[p] -> [gi, gj] : 0 <= p < nnz and gi = rowIdx(p) and gj = colIdx(p)}",
    "jds": "{[pd, pp] -> [gi, gj] : 0 <= pd < numDiags and jdPtr(pd) <= pp < jdPtr(pd + 1) and "
           "gi = perm(pp - jdPtr(pd)) and gj = colIdx(pp)}",
}
PROPERTIES = {
    "rows": ['kind = "monotonic"\nuf = "rowPtr"\norder = "<="',
             'kind = "range"\nuf = "rowPtr"\nmin = "0"',
             'kind = "range"\nuf = "colIdx"\nmin = "0"\nmax = "numCols - 1"',
             'kind = "periodic_monotonic"\nuf = "colIdx"\nperiod = "pi"\norder = "<"'],
    "coords": ['kind = "range"\nuf = "rowIdx"\nmin = "0"\nmax = "numRows - 1"',
               'kind = "range"\nuf = "colIdx"\nmin = "0"\nmax = "numCols - 1"',
               'kind = "injective"\nufs = ["rowIdx", "colIdx"]'],
    "jds": ['kind = "range"\nuf = "perm"\nmin = "0"\nmax = "numRows - 1"'],
}


def layout_file(family: str, props: tuple[int, ...], permuted: bool) -> str:
    """The TOML of one custom layout, written once (its name from its content)."""
    value = {"rows": "pj", "coords": "p", "jds": "pp"}[family]
    if permuted and family != "jds":
        value = f"perm({value})"
    fields = dict(FIELDS[family])
    lines = [f'relation = "{RELATIONS[family]}"', f'value = "data[{value}]"',
             'shape = ["numRows", "numCols"]', "[fields]"]
    lines += [f'{k} = "{v}"' for k, v in fields.items()]
    lines += [f"[[properties]]\n{PROPERTIES[family][k]}" for k in props]
    body = "\n".join(lines) + "\n"
    name = f"F{hashlib.sha256(body.encode()).hexdigest()[:12]}"
    path = DIR / f"{name}.toml"
    if not path.exists():
        path.write_text(f'name = "{name}"\n' + body)
    return str(path)


def valid_arrays(family: str, dense: np.ndarray, rng: np.random.Generator) -> dict:
    rows, cols = np.nonzero(dense)
    vals = dense[rows, cols]
    n = len(vals)
    perm = rng.permutation(n)
    if family == "rows":
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
        data = np.empty(n)
        data[perm] = vals
        return {"rowPtr": ptr, "colIdx": cols, "perm": perm, "data": data}
    if family == "coords":
        order = rng.permutation(n)
        data = np.empty(n)
        data[perm] = vals[order]
        return {"rowIdx": rows[order], "colIdx": cols[order], "perm": perm, "data": data}
    lengths = np.count_nonzero(dense, axis=1)
    by_length = np.argsort(-lengths, kind="stable")
    ptr, c, v = [0], [], []
    for d in range(int(lengths.max(initial=0))):
        for i in by_length:
            if lengths[i] > d:
                j = np.flatnonzero(dense[i])[d]
                c.append(j)
                v.append(dense[i, j])
        ptr.append(len(c))
    return {"jdPtr": ptr, "perm": by_length, "colIdx": c, "data": v}


def reference(family: str, shape: tuple[int, int], a: dict, permuted: bool) -> np.ndarray:
    """The dense matrix the arrays mean (plain Python indexing: raises on a bad index)."""
    out = np.zeros(shape)
    value = (lambda p: a["data"][a["perm"][p]]) if permuted else (lambda p: a["data"][p])
    if family == "rows":
        for i in range(shape[0]):
            for p in range(a["rowPtr"][i], a["rowPtr"][i + 1]):
                out[_ok(i, shape[0]), _ok(a["colIdx"][p], shape[1])] += \
                    value(_ok(p, len(a["data"])))
    elif family == "coords":
        for p in range(len(a["rowIdx"])):
            out[_ok(a["rowIdx"][p], shape[0]), _ok(a["colIdx"][p], shape[1])] += value(p)
    else:
        for d in range(len(a["jdPtr"]) - 1):
            for pp in range(a["jdPtr"][d], a["jdPtr"][d + 1]):
                i = a["perm"][_ok(pp - a["jdPtr"][d], len(a["perm"]))]
                out[_ok(i, shape[0]), _ok(a["colIdx"][pp], shape[1])] += a["data"][pp]
    return out


def _ok(k: int, n: int) -> int:
    if not 0 <= k < n:
        raise AssertionError(f"validation passed, but index {k} is outside 0..{n - 1}")
    return int(k)


@st.composite
def cases(draw):
    family = draw(st.sampled_from(sorted(FIELDS)))
    props = tuple(sorted(draw(st.sets(st.integers(0, len(PROPERTIES[family]) - 1)))))
    permuted = family != "jds" and draw(st.booleans())
    m, n = draw(st.integers(0, 6)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    dense = rng.random((m, n)) * (rng.random((m, n)) < draw(st.floats(0, 1)))
    arrays = {k: np.array(v) for k, v in valid_arrays(family, dense, rng).items()}
    for _ in range(draw(st.integers(0, 2))):        # corruptions
        name = draw(st.sampled_from(sorted(k for k in arrays if k != "data")))
        if len(arrays[name]):
            pos = draw(st.integers(0, len(arrays[name]) - 1))
            arrays[name][pos] = draw(st.integers(-3, max(m, n) + 3))
    return family, props, permuted, (m, n), arrays


def run(case) -> None:
    family, props, permuted, shape, arrays = case
    path = layout_file(family, props, permuted)
    try:
        t = spf.Tensor.from_arrays(path, shape, arrays)
    except spf.ArgumentError:
        COUNTS["refused"] += 1
        return
    COUNTS["ran"] += 1
    want = reference(family, shape, {k: np.asarray(v) for k, v in arrays.items()}, permuted)
    assert np.allclose(t.to_dense(), want), (case, t.to_dense(), want)
    x = np.arange(1.0, shape[1] + 1)
    spmv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": path}).compile()
    assert np.allclose(spmv(A=t, x=x), want @ x), case
    xs = np.where(np.arange(shape[1]) % 2 == 0, x, 0.0)
    spmspv = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": path, "x": "SV"}).compile()
    assert np.allclose(spmspv(A=t, x=spf.Tensor.from_dense("SV", xs)), want @ xs), case


def main(examples: int) -> None:
    test = settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))(given(cases())(run))
    test()
    print(f"FUZZ OK: {examples} examples ({COUNTS['ran']} cases passed validation and ran, "
          f"{COUNTS['refused']} refused; counts include hypothesis' shrinking runs)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("SPF_FUZZ_EXAMPLES", 60)))
