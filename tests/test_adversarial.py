"""The standing adversarial suite: no silently wrong result, no crash and no raw exception.

Hypothesis draws what an adversarial user would write, spf runs it in a worker subprocess
(tests/adversarial_worker.py: a crash or a hang fails the example, not pytest), and every
outcome must be a result equal to numpy's or an spf error with a clear message:

- (a) random expressions of the language (functions, literals ``inf`` and ``nan`` included,
  division, comparisons, logic, index values, index arithmetic with offsets beyond the
  extents, strides, sums of indices) over random layouts and value types, by ``spf.evaluate``
  and by a compiled ``spf.Kernel``, against an independent numpy reference
  (tests/adversarial_oracle.py).  An spf error passes only where the documentation says the
  input is refused (:data:`DOCUMENTED_REFUSALS`, each citing its page) or numpy itself
  refuses it under every reading; a result the docs' reading and numpy's as written both
  allow (a sum of booleans the expansion counts) is not judged: ``unchecked (docs silent)``;
  one beyond the oracle's bounds (its MAX_OUTPUT, MAX_POINTS, MAX_WORK) is checked for
  crashes only: ``unchecked (oracle cap)``;
- (b) the shipped layout files mutated (the mutations of tests/test_fuzz_specs.py): one that
  loads must store, convert, read back and run small tensors correctly, or refuse with an
  spf error naming the file;
- (c) every shipped layout: random tensors stored by the writer (``from_dense``, ``convert``),
  checked by decoding the written fields with the relation (an independent reader) and read
  back; then those fields corrupted (out-of-range, negative, unsorted, duplicated, wrong
  lengths, NaN values, and the wrong arrays of tests/test_data_checks.py) and passed to
  ``from_arrays`` and a kernel: an spf error, or the result the corrupted fields mean.

Profiles (tests/conftest.py): ``short`` (the default, derandomized, for CI) and ``long``
(``--hypothesis-profile=long``: more examples; the tests then keep going after a failure
and report every one at the end).  ``$SPF_ADVERSARIAL_EXAMPLES`` sets the examples per
test; ``$SPF_ADVERSARIAL_KEEP_GOING=1`` keeps going under any profile; the counts of each
run (examples per test by outcome, expected errors by reason, the first
``$SPF_ADVERSARIAL_KEPT`` failures of each test, each with a self-contained repro: Python
with the data as literals, and spf's result beside the oracle's) are printed at the end of
the session and written to ``$SPF_ADVERSARIAL_SUMMARY`` when it names a file
(docs/development.md).
"""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import adversarial_jobs as aj
import adversarial_worker as aw
import numpy as np
import pytest
from adversarial_oracle import (
    BOOL_COUNTED,
    COMPARISONS,
    FUNCTIONS,
    Access,
    Call,
    Expected,
    Index,
    InvalidFieldsError,
    NoExtentError,
    Num,
    NumpyError,
    Op,
    RefusedError,
    Scalar,
    Statement,
    SumByZeroError,
    TooLargeError,
    UndecidedError,
    ValueIndexError,
    accesses,
    ambiguous_sum,
    as_written_refusal,
    decode,
    expanded,
    indices_of,
    number_only,
    output_shape,
    plain_extents,
    reading_terms,
    reference,
    stored_mask,
    value_dtype,
    value_kind,
    value_only_indices,
    walk,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_data_checks import BAD_ARRAYS, BAD_SCALARS
from test_fuzz_specs import (
    LAYOUT_NAMES,
    LAYOUTS,
    any_mutation,
    conjunct_mutation,
    mutated,
    properties_mutated,
    renamed,
    strings_mutated,
    token_mutation,
    toml_document,
    toml_mutated,
)

import spf

pytestmark = pytest.mark.fuzz


def _examples(weight: float) -> settings:
    """``weight`` times the profile's examples (``$SPF_ADVERSARIAL_EXAMPLES``: exactly that
    many), no deadline, slow data generation allowed."""
    forced = int(os.environ.get("SPF_ADVERSARIAL_EXAMPLES", "0"))
    n = forced or max(1, round(weight * settings.default.max_examples))
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def keep_going() -> bool:
    return os.environ.get("SPF_ADVERSARIAL_KEEP_GOING") == "1" or \
        settings.get_current_profile_name().startswith("long")


@pytest.fixture(scope="module")
def worker():
    w = aw.Worker()
    yield w
    w.close()
    aw.write_counts()


class Verdict:
    """The examples of one test: each is classified, counted, and (unless the suite keeps
    going) a failure raises at once so that hypothesis shrinks it."""

    def __init__(self, test: str) -> None:
        self.test = test
        self.failures: list[str] = []

    def record(self, klass: str, detail: str = "") -> None:
        """Count the example; ``detail``: the failure, or an expected error's reason."""
        failing = klass not in ("correct", "spf error (expected)", *aw.UNCHECKED)
        aw.tally(self.test, klass, detail)
        if failing:
            if not keep_going():
                raise AssertionError(f"{klass}: {detail}")
            self.failures.append(f"{klass}: {detail}")

    def run(self, prop: Callable[[], None]) -> None:
        prop()
        assert not self.failures, (f"{len(self.failures)} failing examples:\n" +
                                   "\n\n".join(self.failures[:20]))


def worst(outcomes: list[aw.Outcome]) -> aw.Outcome | None:
    """The first crash, hang or raw exception among a job's steps."""
    for kind in ("crash", "hang", "raw"):
        for o in outcomes:
            if o.kind == kind:
                return o
    return None


KLASS = {"crash": "crash", "hang": "hang", "raw": "raw exception"}
UNCLEAR = re.compile(r"ArrayRef\(|Aff\(|object at 0x|Traceback")
INTERNAL = re.compile(r"<string>:\S* .*\bT\.p\d")     # spf's own conversion kernels (T)


def close(got: np.ndarray, want: np.ndarray, scale: np.ndarray | None = None,
          narrow: bool = False) -> bool:
    """Equal for integers and bool; for floats within the type's rounding (``scale``: the
    magnitudes summed into each element; ``narrow``: float32 rounding whatever the type),
    non-finite values equal."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":
        return bool(np.array_equal(got.astype(np.int64) if got.dtype != np.uint64 else got,
                                   want.astype(np.int64) if want.dtype != np.uint64 else want))
    real = np.float32 if narrow or np.dtype(got.dtype).itemsize <= 4 or \
        np.result_type(want.dtype, np.float32) == np.float32 else np.float64
    tol = (2e-4 if real == np.float32 else 1e-9)
    scale = np.zeros(want.shape) if scale is None else scale
    g = got.astype(np.complex128)
    w = want.astype(np.complex128)
    if want.dtype.kind == "c":         # C's and numpy's complex products of inf differ
        odd = ~np.isfinite(w)
        if not np.array_equal(odd, ~np.isfinite(g)):
            return False
        g, w = np.where(odd, 0, g), np.where(odd, 0, w)
    for part in (np.real, np.imag):
        a, b = part(g), part(w)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if not np.array_equal(nan_a, nan_b):
            return False
        inf_b = np.isinf(b)
        if not np.array_equal(np.where(inf_b, a, 0), np.where(inf_b, b, 0)):
            return False
        fin = ~nan_b & ~inf_b
        if np.any(np.isinf(a[fin])):
            return False
        bound = tol * (1 + scale[fin] + np.abs(b[fin]))
        if np.any(np.abs(a[fin] - b[fin]) > bound):
            return False
    return True


# =============================================================================================
# (a) expressions
ROLES = {"A": ("i", "j"), "B": ("i", "j"), "x": ("j",), "v": ("i",), "T": ("i", "j", "k"),
         "F": ("k",)}
ROLE_LAYOUTS = {2: ["CSR", "CSC", "COO", "SortedCOO", "DCSR", "BCSR", "ELL", "DIA", "SymCSR",
                    "CSR_unsorted", "dense"],
                1: ["SV", "dense"], 3: ["COO3", "CSF", "dense"]}
PARAMS = {"BCSR": {"B": 2}}
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "complex128"]
SPARSE_OUTPUTS = {1: ["SV"], 2: ["CSR", "COO", "CSC", "DCSR", "SortedCOO"]}
EXTENTS = st.sampled_from([0, 1, 2, 2, 3, 3, 4, 5])
SMALL_OFFSETS = [-3, -2, -1, 1, 2, 3]
BIG_OFFSETS = [-7, 7, 6, -6, 2**31 - 1, 2**31, -2**31, 2**32, -2**32, 2**32 + 1, 2**33, 2**40,
               2**62, -2**62]
INTS = [0, 1, 2, 3, 5, 7]
BIG_INTS = [127, 128, 255, 256, 32768, 2**31, 2**32, 3037000499, 2**63 - 1, 2**63, 2**64,
            99999999999999999999999]
FLOATS = [0.5, 2.5, 0.25, 1e-3, 1e300]
SPECIALS = [math.inf, math.nan]
# names generated C or the language might collide with (docs: function names are reserved)
NAMES = ["linux", "unix", "NULL", "INT32_MAX", "EOF", "M_PI", "errno", "main", "free", "I",
         "A_data", "R_data", "x_p0", "A_pi", "T_p0", "R_p0", "i0", "data", "spf_x", "int",
         "double", "exp", "where", "sizeof", "restrict", "_Bool", "complex", "pow"]
RESERVED = {"spf_x", "int", "double", "exp", "where", "sizeof", "restrict", "_Bool", "pow"}
FUNCTION_NAMES = RESERVED & set(FUNCTIONS)


@dataclass(frozen=True)
class Design:
    """What an expression may use: the output's indices, the operands (role, layout,
    dtype), whether a scalar operand exists, the index extents."""

    out_indices: tuple[str, ...]
    operands: tuple[tuple[str, str, str], ...]
    scalar: str | None
    extents: dict[str, int]


def _aff(draw, role_index: str, indices: list[str], extent: int) -> tuple:
    kind = draw(st.sampled_from(["plain"] * 6 + ["offset", "offset", "big", "stride",
                                                  "sum", "reverse"]))
    if kind == "plain":
        return (((role_index, 1),), 0)
    if kind == "offset":
        return (((role_index, 1),), draw(st.sampled_from(SMALL_OFFSETS + [extent, -extent])))
    if kind == "big":
        return (((role_index, 1),), draw(st.sampled_from(BIG_OFFSETS)))
    if kind == "stride":
        return (((role_index, draw(st.sampled_from([2, 3]))),),
                draw(st.sampled_from([0, 0, 1, -1])))
    if kind == "reverse":
        return (((role_index, -1),), draw(st.sampled_from([extent - 1, extent, 2])))
    other = draw(st.sampled_from([k for k in indices if k != role_index] or [role_index]))
    if other == role_index:
        return (((role_index, 1),), 1)
    return (((role_index, 1), (other, draw(st.sampled_from([1, -1])))),
            draw(st.sampled_from([0, 0, 1, -2])))


@st.composite
def _access(draw, d: Design) -> Access:
    role = draw(st.sampled_from([r for r, _, _ in d.operands]))
    indices = sorted(d.extents)
    return Access(role, tuple(_aff(draw, r, indices, d.extents[r]) for r in ROLES[role]))


@st.composite
def _number(draw, exact: bool) -> Num:
    if exact:
        return Num(draw(st.sampled_from(INTS + [0.5, 2.5])))
    which = draw(st.sampled_from(["int"] * 5 + ["float"] * 3 + ["big", "special"]))
    pool = {"int": INTS, "float": FLOATS, "big": BIG_INTS, "special": SPECIALS}[which]
    return Num(draw(st.sampled_from(pool)))


UNARY = ["abs", "sign", "sqrt", "sin", "tanh", "exp", "cos", "log"]
EXACT_UNARY = ["abs", "sign"]
POWERS = [0, 1, 2, 3, 0.5, -1, -2, 41, 63]


@st.composite
def _node(draw, d: Design, depth: int, exact: bool = False) -> Any:
    """A random expression; ``exact``: one whose float value has no rounding for the
    operand values drawn (comparisons and conditions read only such expressions, so that
    a rounding difference cannot flip them)."""
    leaves = ["access"] * 6 + ["number"] * 2 + ["index"] + (["scalar"] if d.scalar else [])
    inner = ["+", "-", "*", "*", "neg", "cmp", "logic", "call", "call", "where"] + \
        ([] if exact else ["/", "/", "/0"])
    kind = draw(st.sampled_from(leaves + (inner if depth > 0 else [])))
    sub = lambda ex=exact: _node(d, depth - 1, ex)     # noqa: E731
    if kind == "access":
        return draw(_access(d))
    if kind == "number":
        return draw(_number(exact))
    if kind == "index":
        return Index(draw(st.sampled_from(sorted(d.extents))))
    if kind == "scalar":
        return Scalar(d.scalar)
    if kind in ("+", "-", "*", "/"):
        return Op(kind, (draw(sub()), draw(sub())))
    if kind == "/0":            # a literal zero divisor (integers: C traps where numpy does not)
        return Op("/", (draw(sub()), Num(0)))
    if kind == "neg":
        return Op("neg", (draw(sub()),))
    if kind == "cmp":
        return Op(draw(st.sampled_from(COMPARISONS)), (draw(sub(True)), draw(sub(True))))
    if kind == "logic":
        op = draw(st.sampled_from(["and", "or", "not"]))
        if op == "not":
            return Op("not", (draw(sub(True)),))
        return Op(op, (draw(sub(True)), draw(sub(True))))
    if kind == "where":
        return Call("where", (draw(sub(True)), draw(sub()), draw(sub())))
    fn = draw(st.sampled_from((EXACT_UNARY if exact else UNARY) + ["min", "max", "pow"]))
    if fn in ("min", "max"):
        return Call(fn, (draw(sub()), draw(sub())))
    if fn == "pow":
        c = draw(st.sampled_from(POWERS[:4] if exact else POWERS))
        return Call("pow", (draw(sub()), Num(c) if c >= 0 else Op("neg", (Num(-c),))))
    return Call(fn, (draw(sub()),))


def _values(draw, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Small exact values (k/4, small integers) at a drawn density, now and then a type's
    extreme or a non-finite value."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.3, 0.6, 1.0]))
    mask = rng.random(shape) < density
    if dt.kind == "b":
        return mask & (rng.random(shape) < 0.8)
    if dt.kind in "iu":
        low = 0 if dt.kind == "u" else -3
        a = np.where(mask, rng.integers(low, 5, shape), 0).astype(dt)
        if a.size and draw(st.integers(0, 9)) == 0:
            info = np.iinfo(dt)
            a.reshape(-1)[rng.integers(a.size)] = draw(st.sampled_from([info.min, info.max]))
    else:
        a = np.where(mask, rng.integers(-12, 13, shape) / 4, 0).astype(dt)
        if dt.kind == "c":
            a = a + 1j * np.where(mask, rng.integers(-8, 9, shape) / 4, 0)
        if a.size and draw(st.integers(0, 9)) == 0:
            a.reshape(-1)[rng.integers(a.size)] = draw(st.sampled_from(
                [np.nan, np.inf, -np.inf, 1e30]))
    return a


def _symmetric(a: np.ndarray) -> np.ndarray:
    upper = np.triu(a)
    return upper + np.triu(upper, 1).T


@st.composite
def designs(draw) -> Design:
    order = draw(st.sampled_from([0, 1, 1, 2, 2]))
    out_indices = ("i", "j")[:order] if order != 1 else (draw(st.sampled_from(["i", "j"])),)
    roles = draw(st.lists(st.sampled_from(sorted(ROLES)), min_size=1, max_size=3, unique=True))
    base = draw(st.sampled_from(DTYPES))
    operands = []
    for r in roles:
        layout = draw(st.sampled_from(ROLE_LAYOUTS[len(ROLES[r])]))
        dtype = base if draw(st.integers(0, 9)) < 7 else draw(st.sampled_from(DTYPES))
        operands.append((r, layout, dtype))
    extents = {k: draw(EXTENTS) for k in sorted({k for r in roles for k in ROLES[r]}
                                                | set(out_indices))}
    if any(lay == "SymCSR" for _, lay, _ in operands):
        extents["j"] = extents["i"] = extents.get("i", extents.get("j", 2))
    scalar = "s" if draw(st.integers(0, 4)) == 0 else None
    return Design(out_indices, tuple(operands), scalar, extents)


@dataclass(frozen=True)
class ExprCase:
    statement: Statement
    design: Design
    api: str
    out_layout: str | None
    fill_values: bool

    def payload(self, out: np.ndarray | None, out_dtype: str | None) -> dict:
        st_ = self.statement
        operands: dict[str, tuple] = {}
        for role, layout, _ in self.used():
            array = st_.tensors[role]
            operands[st_.name(role)] = ("dense", array) if layout == "dense" else \
                ("sparse", layout, array, PARAMS.get(layout, {}))
        if self.scalar_used():
            operands[st_.name(self.design.scalar)] = ("scalar",
                                                      st_.scalars[self.design.scalar])
        dtypes = {n: str(np.asarray(v[1] if v[0] != "sparse" else v[2]).dtype)
                  for n, v in operands.items()}
        if out_dtype is not None:       # None: spf's own (the oracle has no result)
            dtypes[st_.name(st_.output)] = out_dtype
        return {"expr": st_.text(), "operands": operands, "output": st_.name(st_.output),
                "out": out,
                "out_layout": self.out_layout, "api": self.api, "dtypes": dtypes,
                "fill_values": self.fill_values}

    def used(self) -> list[tuple[str, str, str]]:
        """The operands the expression reads: (name, layout, dtype)."""
        names = {a.tensor for a in accesses((self.statement.rhs,))}
        return [o for o in self.design.operands if o[0] in names]

    def scalar_used(self) -> bool:
        return any(isinstance(n, Scalar) for n in walk(self.statement.rhs))

    def describe(self, out_dtype: str | None = "float64") -> str:
        """The case in words, then a self-contained repro (the data as literals)."""
        st_ = self.statement
        parts = [f"expr: {st_.text()}", f"api: {self.api}"]
        for role, layout, dtype in self.used():
            a = st_.tensors[role]
            parts.append(f"{st_.name(role)}: {layout} {dtype} {a.shape} = {a.tolist()!r}")
        if self.scalar_used():
            s = st_.scalars[self.design.scalar]
            parts.append(f"{st_.name(self.design.scalar)} = {s!r} ({np.asarray(s).dtype})")
        if st_.out_shape is not None:
            parts.append(f"out = zeros({st_.out_shape})")
        if self.out_layout:
            parts.append(f"output layout {self.out_layout}")
        if self.fill_values:
            parts.append("fill_values=True")
        parts.append("repro:\n        " + self.repro(out_dtype).replace("\n", "\n        "))
        return "\n    ".join(parts)

    def repro(self, out_dtype: str | None) -> str:
        """Python that runs the case as the worker does (tests/adversarial_jobs.py)."""
        st_ = self.statement
        lines = ["import numpy as np", "import spf", "ops = {"]
        params: dict[str, dict] = {}
        for role, layout, _ in self.used():
            value = _literal(st_.tensors[role])
            if layout != "dense":
                p = PARAMS.get(layout, {})
                value = f"spf.Tensor.from_dense({layout!r}, {value}" + "".join(
                    f", {k}={v!r}" for k, v in p.items()) + ")"
                if p:
                    params[st_.name(role)] = p
            lines.append(f"    {st_.name(role)!r}: {value},")
        if self.scalar_used():
            lines.append(f"    {st_.name(self.design.scalar)!r}: "
                         f"{_literal(np.asarray(st_.scalars[self.design.scalar]))},")
        lines.append("}")
        out = None if st_.out_shape is None else \
            f"np.zeros({st_.out_shape!r}, dtype=np.{np.dtype(out_dtype or 'float64').name})"
        options = ", fill_values=True" if self.fill_values else ""
        output = st_.name(st_.output)
        if self.api == "evaluate":
            args = [repr(st_.text()), "**ops"] + ([f"out={out}"] if out else []) + \
                ([f"layouts={{{output!r}: {self.out_layout!r}}}"] if self.out_layout else []) \
                + ([f"params={params!r}"] if params else [])
            lines.append(f"result = spf.evaluate({', '.join(args)}{options})")
        else:
            layouts = {st_.name(r): lay for r, lay, _ in self.used() if lay != "dense"}
            if self.out_layout:
                layouts[output] = self.out_layout
            dtypes = self.payload(None, out_dtype)["dtypes"]
            lines.append(f"kernel = spf.Kernel({st_.text()!r}, {layouts!r}, dtype={dtypes!r}"
                         + (f", params={params!r}" if params else "") + f"{options}).compile()")
            lines.append("result = kernel(**ops" + (f", **{{{output!r}: {out}}}" if out else "")
                         + ")")
        lines.append("print(result)")
        return "\n".join(lines)


def _item(v: Any) -> str:
    """A Python literal of one value (``np.nan``, ``np.inf``, ``complex(..)`` spelled out)."""
    if isinstance(v, complex):
        return f"complex({_item(v.real)}, {_item(v.imag)})"
    if isinstance(v, float) and not math.isfinite(v):
        return "np.nan" if math.isnan(v) else ("np.inf" if v > 0 else "-np.inf")
    return repr(v)


def _literal(a: np.ndarray) -> str:
    """numpy code that rebuilds ``a`` exactly: its values, type and shape."""
    def nested(x: Any) -> str:
        return "[" + ", ".join(nested(y) for y in x) + "]" if isinstance(x, list) else _item(x)
    dtype = f"np.{a.dtype.name}" if a.dtype.kind in "biufc" else f"np.dtype({a.dtype.str!r})"
    if a.ndim == 0:
        return f"{dtype}({_item(a.item())})"
    text_ = f"np.array({nested(a.tolist())}, dtype={dtype})"
    return text_ + f".reshape({a.shape!r})" if a.size == 0 else text_


def _value_literal(v: Any) -> str:
    """A field's value as Python (arrays and numpy scalars as :func:`_literal` writes them)."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return f"np.array({_literal(v)})"
    if isinstance(v, (np.ndarray, np.generic)):
        return _literal(np.asarray(v))
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_value_literal(u) for u in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    return _item(v) if isinstance(v, (float, complex)) else repr(v)


def _dict_literal(d: dict) -> str:
    return "{" + ", ".join(f"{k!r}: {_value_literal(v)}" for k, v in d.items()) + "}"


def _use_repro(tensor: str, order: int, x: np.ndarray) -> list[str]:
    """Lines reading ``tensor`` back and in the suite's kernel (tests/adversarial_jobs.py)."""
    return [f"print({tensor}.to_dense())",
            f"print(spf.evaluate({aj.contraction(order)!r}, M={tensor}, w={_literal(x)}))"]


@st.composite
def expression_cases(draw, api: str) -> ExprCase:
    d = draw(designs())
    rhs = draw(_node(d, draw(st.integers(1, 3))))
    used = indices_of((rhs,))
    assume(accesses((rhs,)))
    assume(set(d.out_indices) <= {k for a in accesses((rhs,)) for k in indices_of((a,))})
    assume(used <= set(d.extents))
    tensors = {}
    for role, layout, dtype in d.operands:
        shape = tuple(d.extents[k] for k in ROLES[role])
        a = _values(draw, shape, dtype)
        tensors[role] = _symmetric(a) if layout == "SymCSR" else a
    scalars = {}
    if d.scalar:
        dtype = draw(st.sampled_from(DTYPES))
        scalars[d.scalar] = np.dtype(dtype).type(draw(st.sampled_from([0, 1, 2, 3])))
    sparse = frozenset(r for r, lay, _ in d.operands if lay != "dense")
    names = {}
    for name in [r for r, _, _ in d.operands] + ([d.scalar] if d.scalar else []) + ["R"]:
        if draw(st.integers(0, 9)) == 0:
            other = draw(st.sampled_from(NAMES))
            if other not in names.values():
                names[name] = other
    statement = Statement("R", d.out_indices, rhs, tensors, scalars, sparse, names=names)
    out_layout = None
    if d.out_indices and draw(st.integers(0, 4)) == 0:
        out_layout = draw(st.sampled_from(SPARSE_OUTPUTS[len(d.out_indices)]))
    elif d.out_indices and draw(st.integers(0, 3)) == 0:       # out= of chosen extents
        try:
            natural = output_shape(statement)
        except (TooLargeError, NumpyError):
            natural = None
        if natural is not None:           # extents of indices read plainly are fixed
            plain = plain_extents(statement)
            shape = tuple(n if o in plain else max(0, n + draw(st.sampled_from([-2, -1, 1, 2])))
                          for o, n in zip(d.out_indices, natural))
            statement = replace(statement, out_shape=shape)
    return ExprCase(statement, d, api, out_layout, draw(st.integers(0, 6)) == 0)


# what the documentation says spf refuses: (name, does the input qualify, the message says)
def _divides_by_sparse(c: ExprCase) -> bool:
    return not c.fill_values and any(
        isinstance(n, Op) and n.op == "/" and any(a.tensor in c.statement.sparse
                                                  for a in accesses((n.args[1],)))
        for n in walk(c.statement.rhs))


def _complex_order(c: ExprCase) -> bool:
    return any(dt == "complex128" for _, _, dt in c.used()) and any(
        isinstance(n, Call) and n.fn in ("min", "max", "sign") for n in walk(c.statement.rhs))


def _unread_names(c: ExprCase) -> set[str]:
    """The index names no access reads and the output lacks: spf reads each as a scalar
    operand (docs/expressions.md, "Index values"), which the case does not give."""
    st = c.statement
    read = indices_of(tuple(accesses((st.rhs,))))
    return {n.name for n in walk(st.rhs) if isinstance(n, Index)} - read - set(st.out_indices)


def _scalar_in_value(c: ExprCase) -> bool:
    unread = _unread_names(c)

    def inside(n: Any, in_value: bool) -> bool:
        if isinstance(n, Scalar) or (isinstance(n, Index) and n.name in unread):
            return in_value
        if isinstance(n, Call) or (isinstance(n, Op) and n.op not in ("+", "-", "*", "neg")):
            return any(inside(a, True) for a in n.args)
        if isinstance(n, Op):
            return any(inside(a, in_value) for a in n.args)
        return False
    return inside(c.statement.rhs, False)


def _index_values_only(c: ExprCase) -> bool:
    return any(t.nodes() and not any(isinstance(n, (Access, Scalar)) for f in t.nodes()
                                     for n in walk(f))
               and any(isinstance(n, Index) for f in t.nodes() for n in walk(f))
               for t in expanded(c.statement.rhs, strict=False))


def _c_reserved_name(c: ExprCase) -> bool:
    return any(n in RESERVED - FUNCTION_NAMES for n in (c.statement.names or {}).values())


def _function_name(c: ExprCase) -> bool:
    return any(n in FUNCTION_NAMES for n in (c.statement.names or {}).values())


def _sparse_output_broadcast(c: ExprCase) -> bool:
    return c.out_layout is not None and any(
        not set(c.statement.out_indices) <= indices_of(t.nodes())
        for t in expanded(c.statement.rhs, strict=False))


def _ambiguous_sum(c: ExprCase) -> bool:
    return ambiguous_sum(c.statement.rhs, c.statement.out_indices) is not None


def _sum_refused(c: ExprCase) -> str:
    """What the expansion refuses (:class:`SumByZeroError`'s message), or ``""``: a sum of
    several products (not one product plus numbers, which is computed at every point)
    divided by the number 0 or times an inf or nan number."""
    try:
        expanded(c.statement.rhs)
    except SumByZeroError as err:
        return str(err)
    return ""


def _sum_by_zero(c: ExprCase) -> bool:
    return "divided by zero" in _sum_refused(c) or "divided by nan" in _sum_refused(c)


def _sum_times_not_finite(c: ExprCase) -> bool:
    return "times inf or nan" in _sum_refused(c)


def _value_only_index(c: ExprCase) -> bool:
    return bool(value_only_indices(c.statement))


def _negative_power(c: ExprCase) -> bool:
    """``pow`` of an integer or bool base (numpy's type as written) to a negative integer."""
    return any(isinstance(n, Call) and n.fn == "pow" and isinstance(n.args[1], Op)
               and n.args[1].op == "neg" and isinstance(n.args[1].args[0], Num)
               and isinstance(n.args[1].args[0].value, int)
               and value_kind(c.statement, n.args[0]) in ("b", "i", "u")
               for n in walk(c.statement.rhs))


def _huge_arithmetic(c: ExprCase) -> bool:
    return any(abs(k) >= 2**62 for a in accesses((c.statement.rhs,)) for ts, const in a.position
               for k in (const, *(m for _, m in ts)))


def _output_beyond_int32(c: ExprCase) -> bool:
    try:
        return any(n > 2**31 - 1 for n in output_shape(c.statement))
    except (TooLargeError, NumpyError):
        return False


def _no_extent(c: ExprCase) -> bool:
    try:
        output_shape(c.statement)
    except NoExtentError:
        return True
    except (TooLargeError, NumpyError):
        pass
    return False


def _output_beyond_memory(c: ExprCase) -> bool:
    size = output_size(c)
    return size is not None and size > 10**8


def _summands(n: Any) -> list[Any]:
    if isinstance(n, Op) and n.op in ("+", "-") and not number_only(n):
        return [s for a in n.args for s in _summands(a)]
    return [n]


def _may_wrap(n: Any) -> bool:
    """An integer negation, a product other than by the literal 1, or a sum holding one."""
    if not isinstance(n, Op) or n.op not in ("+", "-", "neg", "*") or number_only(n):
        return False
    if n.op == "neg" or (n.op == "*" and not any(
            isinstance(a, Num) and type(a.value) is int and a.value == 1 for a in n.args)):
        return True
    return any(_may_wrap(a) for a in n.args)


def _folded(n: Any) -> tuple[Any, ...]:
    """The operands the expansion folds into ``n``'s products (none: ``n`` is no such
    arithmetic; a division only by a number, its numerator)."""
    if not isinstance(n, Op) or n.op not in ("+", "-", "neg", "*", "/") or number_only(n) \
            or (n.op == "/" and not number_only(n.args[1])):
        return ()
    return n.args[:1] if n.op == "/" else n.args


def _literals_beyond_type(c: ExprCase) -> bool:
    """A product's integer literals, multiplied into one coefficient, exceed the integer type
    of its factors (``(256 * x(j)) * 256`` of uint16: 65536)."""
    st = c.statement
    try:
        terms = expanded(st.rhs, strict=False)
    except Exception:           # refused or raised for another reason, judged elsewhere
        return False
    for t in terms:
        tensors = tuple(f for f in t.factors if not number_only(f))
        coef = t.coefficient
        if not tensors or t.divided or not isinstance(coef, Fraction) or coef.denominator != 1:
            continue
        product = tensors[0]
        for f in tensors[1:]:
            product = Op("*", (product, f))
        dtype = value_dtype(st, product)
        if dtype is not None and dtype.kind in "iu" and \
                not np.iinfo(dtype).min <= abs(coef) <= np.iinfo(dtype).max:
            return True
    return False


def _wraps_before_type_change(c: ExprCase) -> bool:
    """An integer product, negation or sum of them that numpy computes in its own type
    before a number, index value or factor of another type multiplies it or a number
    divides it, outside functions (computed as written)."""
    st = c.statement

    def found(n: Any) -> bool:
        folded = _folded(n)
        if folded and n.op in ("*", "/"):
            mine = value_dtype(st, n)
            for s in (s for f in folded for s in _summands(f)):
                own = value_dtype(st, s) if _may_wrap(s) else mine
                if own is not None and own != mine and own.kind in "iu":
                    return True
        return any(found(f) for f in folded)
    return found(st.rhs)


def _truth_sum_in_wider(c: ExprCase) -> bool:
    """A sum of booleans (numpy's logical or) directly inside arithmetic of another type,
    outside functions (computed as written)."""
    st = c.statement

    def found(n: Any) -> bool:
        folded = _folded(n)
        if any(isinstance(f, Op) and f.op == "+" and not number_only(f)
               and value_kind(st, f) == "b" and value_kind(st, n) not in ("b", None)
               for f in folded):
            return True
        return any(found(f) for f in folded)
    return found(st.rhs)


DOCUMENTED_REFUSALS: list[tuple[str, Callable[[ExprCase], bool], str]] = [
    # docs/expressions.md, "Functions of tensors": c / x refused unless fill_values=True
    ("division by a sparse operand's absent entries", _divides_by_sparse, "fill_values=True"),
    # docs/expressions.md, "Functions of tensors": min, max and sign refused on complex values
    ("min, max or sign of complex values", _complex_order, "complex"),
    # docs/expressions.md, "Not yet": a scalar inside a function (the table of "Functions of
    # tensors" counts c / x, comparisons and logic as functions)
    ("a scalar inside a function", _scalar_in_value, "scalar"),
    # docs/expressions.md, "Index values": a name no access reads is a scalar operand (the
    # case gives none: "missing operand", "missing argument")
    ("a name no access reads, a scalar not given", lambda c: bool(_unread_names(c)),
     "a name that no tensor's access reads as an index is a scalar operand"),
    # docs/expressions.md, "Not yet": a term of index values only
    ("a term of index values only", _index_values_only, "index values only"),
    # docs/errors.md: a name C or spf reserves ("C keyword or spf_ prefix")
    ("a name C reserves", _c_reserved_name, "reserved"),
    # docs/expressions.md, "Not yet": the function names are reserved (no tensor takes one;
    # the parser then reads a call, whatever it says)
    ("a function's name as a tensor's", _function_name, ""),
    # docs/expressions.md, "Broadcasting": a sparse output of a term without its indices
    ("a broadcast term into a sparse output", _sparse_output_broadcast, ""),
    # docs/expressions.md, "Broadcasting" (and the catalog of docs/errors.md): a sum inside a
    # function, a comparison or a divisor whose terms differ in a summed index nothing else
    # in the product reads: inside or outside is ambiguous
    ("a sum inside a function whose terms differ in a summed index", _ambiguous_sum,
     "is ambiguous"),
    # docs/expressions.md, "Numbers, parentheses, division by a number": a sum divided by
    # zero is refused (each product must be divided by itself)
    ("a sum of products divided by zero or nan", _sum_by_zero,
     "division of a sum of products by"),
    # docs/expressions.md (same place) and docs/errors.md: a sum of several products times
    # inf or nan is refused
    ("a sum of products times inf or nan", _sum_times_not_finite,
     "a sum of products times a number that is not finite"),
    # docs/expressions.md, "One range per index for the whole statement": an index no tensor
    # reads plainly that a term uses only as a value has no range there and is refused
    ("an index read plainly nowhere used only as a value", _value_only_index,
     "so its range there is unknown"),
    # docs/expressions.md ("Whatever numpy refuses") and docs/errors.md: an integer to a
    # negative integer power
    ("an integer to a negative integer power", _negative_power,
     "Integers to negative integer powers are not allowed"),
    # docs/value-types.md, "Products of mixed types": an integer step numpy computes (and
    # may wrap) in its own type before a type change (`x(i) * x(i) * 2.0` of int32)
    # docs/value-types.md, "Products of mixed types": a product's literals are one
    # coefficient, which must fit the product's integer type
    ("a product's literals beyond its integer type", _literals_beyond_type, "does not fit"),
    ("an integer step numpy wraps before a type change", _wraps_before_type_change,
     "may wrap there before"),
    # docs/value-types.md, "Products of mixed types": a sum of booleans (numpy's or) inside
    # arithmetic of another type (`x(i) - (a(i) + b(i))`)
    ("a sum of booleans inside arithmetic of another type", _truth_sum_in_wider,
     "is a sum of booleans"),
    # docs/expressions.md, "Index arithmetic": an offset or stride of 2^62 or more, or
    # arithmetic the call's extents carry past 2^62
    ("index arithmetic beyond 2^62", _huge_arithmetic, "2^62"),
    # docs/expressions.md, "Index arithmetic": an output extent beyond the index type
    ("an output extent beyond int32", _output_beyond_int32, "index_type='int64'"),
    # docs/expressions.md, "The output's extent": an output index no tensor reads plainly
    # and only terms on other terms' coordinates read has no extent
    ("an output index no input gives an extent", _no_extent, "is set by no input"),
    # docs/errors.md: an array sized by the data larger than the machine's memory is refused
    # before it is allocated
    ("an output larger than memory", _output_beyond_memory, ""),
]


def documented_refusal(c: ExprCase, message: str) -> str | None:
    for name, applies, says in DOCUMENTED_REFUSALS:
        if says in message and applies(c):
            return name
    return None


def _sum_by_zero_only(c: ExprCase) -> bool:
    """The only documented refusal that applies is a sum divided by zero."""
    try:
        reading_terms(c.statement, "expanded")
    except SumByZeroError:
        return not _ambiguous_sum(c) and not _value_only_index(c)
    except RefusedError:
        return False
    return False


@dataclass
class Expectation:
    """What the oracle says of a case: the readings' results; why numpy refuses under
    every reading (any spf error is then right: docs/expressions.md, "Whatever numpy
    refuses is a SpecError"); what the docs say spf refuses."""

    results: list[Expected]
    numpy_refuses: str | None = None
    docs_refuse: str | None = None
    too_large: bool = False


def expected_results(c: ExprCase) -> Expectation:
    results, numpy_errors, too_large = [], [], False
    docs_refuse = None
    for reading in ("expanded", "grouped"):
        for refuse in (True, False):
            try:
                results.append(reference(c.statement, reading, refuse=refuse))
            except RefusedError as err:
                docs_refuse = str(err)
                continue
            except NumpyError as err:
                numpy_errors.append(f"{reading}: numpy raises {err}")
            except TooLargeError:
                too_large = True
            break
    written = as_written_refusal(c.statement)
    if docs_refuse or written:
        results = []
    if docs_refuse and not written and _sum_by_zero_only(c):    # or numpy's value of it
        with contextlib.suppress(NumpyError, TooLargeError):
            results = [reference(c.statement, "zero whole", refuse=False)]
    numpy_refuses = f"numpy raises {written}" if written else numpy_errors[0] \
        if numpy_errors and not results and len(numpy_errors) + too_large == 2 else None
    return Expectation(results, numpy_refuses, docs_refuse, too_large)


def _stored(outcomes: list[aw.Outcome]) -> dict[str, np.ndarray]:
    """Where each sparse operand stores an entry, its fields read by the relation (the
    suite's own reader; an operand it cannot read: where it is nonzero)."""
    o = step_values(outcomes).get("stored")
    masks: dict[str, np.ndarray] = {}
    for name, f in (o.value.items() if o is not None and o.kind == "value" else ()):
        with contextlib.suppress(UndecidedError, InvalidFieldsError):
            masks[name] = stored_mask(f["raw"], f["params"], f["fields"], f["shape"])
    return masks


def _matches(c: ExprCase, got: np.ndarray, results: list[Expected],
             stored: dict[str, np.ndarray]) -> Expected | None:
    for r in results:
        if close(got, r.value, r.scale, r.narrow):
            return r
        if r.empty and got.ndim == r.value.ndim and _constant(got, r):
            return r        # nothing reaches any point: the docs leave the extents open
    if not any(np.asarray(v).dtype.kind in "fc" and not np.all(np.isfinite(v))
               for v in [r.value for r in results] + [a for _, a in _read(c)]):
        return None         # no inf or nan in the result or the data: no structural reading
    sparse = sorted(c.statement.sparse & {a.tensor for a in accesses((c.statement.rhs,))})
    subsets = [frozenset(s) for n in range(1, len(sparse) + 1)
               for s in itertools.combinations(sparse, n)]
    for reading, over in itertools.product(("expanded", "grouped"), subsets):
        try:           # non-finite: the products over these operands' entries skip the rest
            r = reference(c.statement, reading, structural=over, stored=stored)
        except (NumpyError, TooLargeError):
            continue
        if close(got, r.value, r.scale, r.narrow):
            return r
    return None


def _read(c: ExprCase) -> list[tuple[str, Any]]:
    """The data of the tensors and scalars the expression reads."""
    st = c.statement
    return [(r, st.tensors[r]) for r, _, _ in c.used()] + \
        ([(c.design.scalar, st.scalars[c.design.scalar])] if c.scalar_used() else [])


def _bool_counted(c: ExprCase, got: np.ndarray) -> bool:
    """``got`` is the expansion's result with its bool products counted (:data:`BOOL_COUNTED`)."""
    try:
        r = reference(c.statement, BOOL_COUNTED)
    except (NumpyError, TooLargeError):
        return False
    return close(got, r.value, r.scale, r.narrow)


def _constant(got: np.ndarray, want: Expected) -> bool:
    """``got`` holds only the value every element of ``want`` holds (if it has none: what
    the number terms add into every element)."""
    values = np.unique(want.value.reshape(-1)) if want.value.size else want.base.reshape(-1)
    return len(values) == 1 and close(got, np.full(got.shape, values[0], want.value.dtype))


def check_expression(worker: aw.Worker, verdict: Verdict, c: ExprCase) -> None:
    e = expected_results(c)
    capped = e.too_large and not e.results and not e.docs_refuse and \
        not (output_size(c) or 0) > 10**8       # beyond the oracle's bounds, not memory's
    out_dtype = str(e.results[0].value.dtype) if e.results else None
    out = None
    if c.statement.out_shape is not None and e.results:
        out = np.zeros(c.statement.out_shape, out_dtype)
    outcomes = worker.call("expression", c.payload(out, out_dtype))
    want = "\n    ".join(f"the oracle ({r.reading}): {r.value.dtype} {r.value.shape} "
                         f"{r.value.tolist()!r}" for r in e.results) or \
        f"the oracle: {e.docs_refuse or e.numpy_refuses or 'too large'}"
    detail = f"{want}\n    {c.describe(out_dtype)}"
    bad = worst(outcomes)
    if bad is not None:
        verdict.record(KLASS[bad.kind], f"{bad.describe()}\n    {detail}")
        return
    if capped:                  # no crash; its result or error is not judged
        verdict.record("unchecked (oracle cap)", "beyond the oracle's bounds (MAX_OUTPUT, "
                       "MAX_POINTS, MAX_WORK of tests/adversarial_oracle.py)")
        return
    final = next(o for o in reversed(outcomes) if o.step != "stored")
    if final.kind == "spf":
        message = final.message
        if UNCLEAR.search(message) or not message.strip():
            verdict.record("spf error (not documented)",
                           f"unclear message: {final.describe()}\n    {detail}")
            return
        reason = documented_refusal(c, message) or \
            (f"numpy refuses ({e.numpy_refuses.split(': ', 1)[1][:70]})"
             if e.numpy_refuses else None)
        if reason is None and e.results and all(r.empty for r in e.results) and \
                "extent" in message:
            reason = "extents of an output no point reaches"
        if reason is None and e.too_large and not e.results and not e.docs_refuse:
            reason = "the output is too large"
        if reason:
            verdict.record("spf error (expected)", reason)
            return
        verdict.record("spf error (not documented)", f"{final.describe()}\n    {detail}")
        return
    got, kind = final.value
    if not e.results:
        why = (f"the docs say spf refuses it ({e.docs_refuse})" if e.docs_refuse else
               f"numpy refuses it ({e.numpy_refuses})" if e.numpy_refuses else
               "the output is too large")
        verdict.record("silently wrong", f"{why}, spf returned {kind} {np.asarray(got).dtype} "
                       f"{np.shape(got)} {np.asarray(got).tolist()!r}\n    {detail}")
        return
    match = _matches(c, got, e.results, _stored(outcomes))
    if match is None and _bool_counted(c, got):
        verdict.record("unchecked (docs silent)", "a bool sum inside a wider expression: "
                       "numpy or's it, the expansion counts it")
        return
    if match is None:
        verdict.record("silently wrong", f"spf returned {got.dtype} {got.shape} "
                       f"{got.tolist()!r}\n    {detail}")
        return
    if got.dtype != match.value.dtype and c.api == "evaluate":
        verdict.record("silently wrong", f"type {got.dtype} ({kind}), numpy's is "
                       f"{match.value.dtype}\n    {detail}")
        return
    verdict.record("correct")


def output_size(c: ExprCase) -> int | None:
    try:
        return math.prod(output_shape(c.statement))
    except (TooLargeError, NumpyError):
        return None


@pytest.mark.slow
@pytest.mark.parametrize("api", ["evaluate", "kernel"])
def test_expressions(worker, api):
    """Random statements against numpy (by ``spf.evaluate`` or a compiled Kernel)."""
    verdict = Verdict(f"expressions[{api}]")

    @_examples(10)
    @given(case=expression_cases(api))
    def prop(case):
        check_expression(worker, verdict, case)

    verdict.run(prop)


def _aff_of(text_: str) -> tuple:
    """``"i+1"``, ``"-j-1"``, ``"i+j-2"``, ``"2*i"`` as the oracle's affine form."""
    terms: dict[str, int] = {}
    const = 0
    for sign, coef, name, number in re.findall(r"([+-]?)\s*(?:(\d+)\*)?(?:([a-z])|(\d+))",
                                               text_.replace(" ", "")):
        k = -1 if sign == "-" else 1
        if name:
            terms[name] = terms.get(name, 0) + k * int(coef or 1)
        else:
            const += k * int(number)
    return tuple(terms.items()), const


def _at(tensor: str, *position: str) -> Access:
    return Access(tensor, tuple(_aff_of(p) for p in position))


def _op(op: str, *args: Any) -> Op:
    return Op(op, tuple(Num(a) if isinstance(a, (int, float)) else a for a in args))


_X = np.arange(1.0, 5.0)
_M = np.array([[0.0, 3.0], [3.0, 0.0]])
ORACLE_CASES = {   # docs/expressions.md and docs/value-types.md, each example: (statement, result)
    "one range per index": (Statement("s", (), _op("-", _at("x", "i+1"), _at("x", "i")),
                                      {"x": _X}, {}, frozenset()), -1.0),
    "a number term into every element": (Statement(
        "y", ("i",), _op("-", _at("x", "i+1"), 3), {"x": _X}, {}, frozenset(),
        out_shape=(4,)), [-1.0, 0.0, 1.0, -3.0]),
    "a stencil keeps the extent": (Statement(
        "y", ("i",), _op("+", _at("x", "i"), _at("x", "i-3")), {"x": _X}, {}, frozenset()),
        [1.0, 2.0, 3.0, 5.0]),
    "a concatenation": (Statement("c", ("i",), _op("+", _at("x", "i"), _at("v", "i-4")),
                                  {"x": _X, "v": 2 * _X}, {}, frozenset()),
                        np.concatenate([_X, 2 * _X]).tolist()),
    "i over B's rows in both terms": (Statement(
        "r", ("j",), _op("-", _at("B", "i", "j"), _at("B", "i-2", "j")), {"B": _M}, {},
        frozenset({"B"})), [3.0, 3.0]),
    "a division distributes": (Statement(
        "y", ("i",), _op("/", _op("+", _op("*", _at("B", "i", "j"), _at("x", "j")),
                                  _at("v", "i")), _at("v", "i")),
        {"B": _M, "x": np.array([1.0, 2.0]), "v": np.array([1.0, 2.0])}, {}, frozenset()),
        ((_M @ [1.0, 2.0] + [1.0, 2.0]) / [1.0, 2.0]).tolist()),
    "a value index takes the statement's range": (Statement(
        "r", ("j",), _op("+", _op("*", _at("F", "k"), _at("B", "i", "j")),
                         _op("*", _at("B", "i", "j"), Index("k"))),
        {"F": np.ones(3), "B": _M}, {}, frozenset()), (3 * _M.sum(0) + 3 * _M.sum(0)).tolist()),
    "a term's points from all its accesses": (Statement(
        "r", ("i", "j"), _at("v", "i+j-2"), {"v": np.array([1.0, 2.0])}, {}, frozenset()),
        [[0.0, 0.0, 1.0, 2.0], [0.0, 1.0, 2.0, 0.0], [1.0, 2.0, 0.0, 0.0],
         [2.0, 0.0, 0.0, 0.0]]),
    "one tensor plus numbers by zero": (Statement(
        "y", ("i",), _op("/", _op("+", _at("B", "i", "j"), 1), 0), {"B": _M}, {},
        frozenset({"B"})), [math.inf, math.inf]),
    "one product plus numbers by zero": (Statement(
        "y", ("j",), _op("/", _op("+", _op("/", _at("B", "i", "j"), _at("x", "j")), 2), 0),
        {"B": np.array([[0.0, 0.0]]), "x": np.array([1.0, 0.0])}, {}, frozenset({"B"})),
        [math.inf, math.nan]),
    "what the expansion makes": (Statement(
        "r", (), Op("neg", (_op("+", Op("not", (_at("F", "k"),)),
                                _op("*", _at("F", "k"), _at("F", "k"))),)),
        {"F": np.array([0, 4, 0], np.uint32)}, {}, frozenset()), 4294967278),
    "float16 held as float32": (Statement(
        "y", ("i",), Call("sqrt", (_at("x", "i"),)), {"x": np.array([4, 9], np.int8)}, {},
        frozenset()), np.array([2.0, 3.0], np.float32)),
    "a function of numbers is numpy's float64": (Statement(
        "y", ("i",), _op("*", _at("x", "i"), Call("log", (Num(2),))),
        {"x": np.ones(2, np.float32)}, {}, frozenset()), np.full(2, math.log(2))),
    "a division by a number is a true division": (Statement(
        "y", ("i",), _op("*", _op("/", _at("x", "i"), 5), 5),
        {"x": np.array([1, 2], np.int32)}, {}, frozenset()), np.array([1.0, 2.0])),
    "5 / 5 is a float": (Statement(
        "y", ("i",), _op("+", _at("x", "i"), _op("/", 5, 5)),
        {"x": np.array([1, 2], np.int32)}, {}, frozenset()), np.array([2.0, 3.0])),
    "a literal is weak": (Statement("y", ("i",), _op("*", _at("x", "i"), 0.5),
                                    {"x": np.ones(2, np.float32)}, {}, frozenset()),
                          np.full(2, 0.5, np.float32)),
    "accesses that contradict have no point": (Statement(
        "r", (), _at("T", "i-j-2", "j-i", "k"), {"T": np.ones((3, 4, 4))}, {}, frozenset()),
        0.0),
    "a broadcast sum in a quotient is computed as written": (Statement(
        "r", ("i", "j"), _op("/", _op("-", _at("x", "i"), _at("B", "i", "j")), _at("c", "i")),
        {"x": np.ones(2), "B": np.array([[0.0, 1.0], [0.0, 0.0]]), "c": np.array([0.0, 1.0])},
        {}, frozenset()), [[math.inf, math.nan], [1.0, 1.0]]),
}
ORACLE_REFUSALS = {   # the docs say refused: (statement, the oracle's exception)
    "a sum inside a function": (Statement(
        "y", ("i",), Call("exp", (_op("+", _op("*", _at("B", "i", "j"), _at("x", "j")),
                                      _at("v", "i")),)),
        {"B": _M, "x": _X[:2], "v": _X[:2]}, {}, frozenset()), RefusedError),
    "a sum of products by zero": (Statement(
        "y", ("i",), _op("/", _op("+", _at("B", "i", "j"), _at("B", "i", "j")), 0),
        {"B": _M}, {}, frozenset()), SumByZeroError),
    "a sum of products times inf": (Statement(
        "y", ("i",), _op("*", _op("+", _at("B", "i", "j"), _at("B", "i", "j")), math.inf),
        {"B": _M}, {}, frozenset()), SumByZeroError),
    "a sum of products times a product divided by zero": (Statement(
        "y", ("i",), _op("*", _op("/", _at("x", "i"), 0), _op("-", Index("i"), Index("i"))),
        {"x": _X}, {}, frozenset()), SumByZeroError),
    "an index only a value, read plainly nowhere": (Statement(
        "r", ("j",), _op("+", _op("*", _at("F", "k+1"), _at("B", "i", "j")),
                         _op("*", _at("B", "i", "j"), Index("k"))),
        {"F": np.ones(3), "B": _M}, {}, frozenset()), ValueIndexError),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(ORACLE_CASES))
def test_oracle_follows_the_docs(name):
    """The oracle gives the documented result of each example (both readings), in its
    type (no spf: the oracle alone)."""
    statement, want = ORACLE_CASES[name]
    want = np.asarray(want)
    for reading in ("expanded", "grouped"):
        if reading == "expanded" and name in ("what the expansion makes", "a broadcast sum "
                                              "in a quotient is computed as written"):
            continue            # -(not F) is refused in bool, x/0 - B/0 is nan: the grouped
            #                     reading subtracts, divides the sum as written
        got = reference(statement, reading)
        assert got.value.dtype == (want.dtype if want.dtype != np.int64 else got.value.dtype)
        np.testing.assert_allclose(got.value.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("rhs,out", [
    (_op("*", _op("*", Index("k"), _at("A", "i-7", "j-7")), _at("x", "j")), ("i", "j")),
    (Call("sign", (Call("where", (_op("<=", Index("j"), 0.5), _at("x", "i"), Num(0))),)), ())])
def test_a_name_no_access_reads_is_a_documented_scalar(rhs, out):
    """An index name no access reads is a scalar operand to spf (docs/expressions.md,
    "Index values"): its refusals ("missing operand 'k' (a scalar: ...)", "the scalar 'j'
    inside a function") were counted as undocumented."""
    a, x = np.zeros((3, 3), np.uint32), np.zeros(3, np.uint8)
    design = Design(out, (("A", "dense", "uint32"), ("x", "dense", "uint8")), None,
                    {"i": 3, "j": 3, "k": 3})
    case = ExprCase(Statement("R", out, rhs, {"A": a, "x": x}, {}, frozenset()), design,
                    "evaluate", None, False)
    with pytest.raises(spf.SpfError) as err:
        spf.evaluate(case.statement.text(), **{r: case.statement.tensors[r]
                                                for r, _, _ in case.used()})
    assert documented_refusal(case, str(err.value)) is not None, str(err.value)


@pytest.mark.unit
def test_a_comparison_over_stored_entries_with_nan_data_is_structural():
    """``(pow(M(-k+2), 2) * (I(i,j) * I(i,j))) != I(i,j)`` into bool with a nan in M: spf
    iterates I's entries (the comparison is false where I is 0, in real arithmetic: the
    documented structural convention), numpy's dense nan != 0 is true there; the suite tried
    the structural readings only for a result holding inf or nan, never for a bool one."""
    i = np.array([[-0.25, 0.0, 0.0, -1.5], [2.25, 0.0, -1.0, 1.75], [0.0, 0.0, 0.0, np.nan]])
    m = np.array([0.0, 0.0, np.nan])
    rhs = _op("!=", _op("*", Call("pow", (_at("x", "-k+2"), Num(2))),
                        _op("*", _at("A", "i", "j"), _at("A", "i", "j"))), _at("A", "i", "j"))
    design = Design(("i", "j"), (("A", "ELL", "float64"), ("x", "dense", "float64")), None,
                    {"i": 3, "j": 4, "k": 3})
    case = ExprCase(Statement("R", ("i", "j"), rhs, {"A": i, "x": m}, {}, frozenset({"A"})),
                    design, "kernel", "CSR", False)
    e = expected_results(case)
    spf_result = (i != 0) | np.isnan(i)        # the entries of I only
    assert _matches(case, spf_result, e.results, {}) is not None


@pytest.mark.unit
def test_oracle_keeps_a_not_finite_term_at_every_point():
    """``(i * 0.25) * (v(i+1) - inf) * (v(i) - 0.5)``: the -inf term is at every point
    (docs/expressions.md: ``x(i+1) - 3`` is -3 where x(i+1) reads nothing), times ``v(i) -
    0.5`` as one value; the oracle folded the whole product into one value over v(i+1)'s
    points, 0 at the last element where spf gives inf - inf j."""
    v = np.array([1.75 + 1j, -3 + 1.25j, -1.25 + 1j])
    rhs = _op("*", _op("*", _op("*", Index("i"), 0.25), _op("-", _at("v", "i+1"), math.inf)),
              _op("+", _at("v", "i"), -0.5))
    statement = Statement("R", ("i",), rhs, {"v": v}, {}, frozenset({"v"}))
    for reading in ("expanded", "grouped"):
        got = reference(statement, reading).value
        assert got.dtype == np.complex128 and not np.isfinite(got).any(), (reading, got)


@pytest.mark.unit
def test_oracle_bounds_its_memory(monkeypatch):
    """An output of shape (2^31 + 1, 0) made the oracle allocate np.arange(2^31 + 1) to
    broadcast a term over it (24 GB in the long profile); an empty output adds nothing, and
    a term broadcast over more than MAX_WORK elements is TooLargeError (the suite counts the
    example ``unchecked (oracle cap)``)."""
    import adversarial_oracle as ao
    x = np.arange(1.0, 4.0)
    wide = Statement("R", ("i", "j"), _at("x", "j"), {"x": x}, {}, frozenset(),
                     out_shape=(2**31 + 1, 0))
    assert reference(wide, "expanded").value.shape == (2**31 + 1, 0)
    broad = replace(wide, out_shape=(1000, 3))
    np.testing.assert_array_equal(reference(broad, "expanded").value, np.tile(x, (1000, 1)))
    monkeypatch.setattr(ao, "MAX_WORK", 2999)
    with pytest.raises(TooLargeError, match="3 points broadcast over"):
        reference(broad, "expanded")


@pytest.mark.unit
def test_oracle_reads_a_chain_of_equalities_as_spf_does():
    """A mutated DIA relation chains ``gj = pi = offset(pd)`` (``gj = pi`` and ``pi =
    offset(pd)``); the oracle's reader took ``gj`` to be the comparison ``pi = offset(pd)``
    and called spf's correct write silently wrong (the long profile, 2026-11-29)."""
    from spf.front.layout_path import LAYOUT_DIR
    text = (LAYOUT_DIR / "DIA.toml").read_text().replace(
        "gj = pi + offset(pd)", "gj = pi = offset(pd)").replace('packer = "DIA.py"\n', "")
    fields = {"numRows": 2, "numCols": 2, "numDiags": 1, "offset": np.array([1]),
              "data": np.array([[0.0, 5.0]])}
    want = [[0.0, 0.0], [0.0, 5.0]]
    np.testing.assert_array_equal(decode(tomllib.loads(text), {}, fields, (2, 2)), want)


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(ORACLE_REFUSALS))
def test_oracle_refuses_what_the_docs_refuse(name):
    statement, error = ORACLE_REFUSALS[name]
    for reading in ("expanded", "grouped"):
        with pytest.raises(error):
            reference(statement, reading)


@pytest.mark.unit
def test_numpy_refusals_as_written():
    """``-(-v)`` of booleans: numpy refuses the expression as written, whatever the
    expansion makes of it (docs/expressions.md)."""
    v = np.array([True, False])
    twice = Statement("y", ("i",), Op("neg", (Op("neg", (_at("v", "i"),)),)), {"v": v}, {},
                      frozenset())
    assert "boolean negative" in as_written_refusal(twice)
    once = Statement("y", ("i",), _op("-", 1, _at("v", "i")), {"v": v}, {}, frozenset())
    assert as_written_refusal(once) is None


# =============================================================================================
# (b) mutated layout files
@st.composite
def relation_edit(draw, relation: str, scalars: list[str]) -> str:
    """One semantic change: a comparison of two of the relation's variables or of one with
    a scalar field added (``gj <= gi``: fewer entries storable), a conjunct dropped, the
    logical coordinates swapped (a transpose), a lower bound moved."""
    m = re.fullmatch(r"\{\s*\[([^\]]*)\]\s*->\s*\[([^\]]*)\]\s*:(.*)\}", relation.strip(), re.S)
    if not m or " or " in m.group(3):
        return draw(conjunct_mutation(relation))
    pvars = [v.strip() for v in m.group(1).split(",") if v.strip()]
    gvars = [v.strip() for v in m.group(2).split(",") if v.strip()]
    parts = [c.strip() for c in m.group(3).split(" and ")]
    how = draw(st.sampled_from(["compare", "compare", "bound", "drop", "swap", "shift"]))
    variables = pvars + gvars
    if how == "compare" and len(variables) > 1:
        a, b = draw(st.permutations(variables))[:2]
        op = draw(st.sampled_from(["<", "<=", "=", ">="]))
        shift = draw(st.sampled_from(["", "", " + 1", " - 1", " + 2"]))
        parts.insert(draw(st.integers(0, len(parts))), f"{a} {op} {b}{shift}")
    elif how == "bound" and scalars:
        v = draw(st.sampled_from(variables))
        parts.append(draw(st.sampled_from([f"{v} >= 1", f"{v} < {draw(st.sampled_from(scalars))} "
                                           "- 1", f"{v} <= 1", f"2 <= {v}"])))
    elif how == "drop" and len(parts) > 1:
        del parts[draw(st.integers(0, len(parts) - 1))]
    elif how == "swap" and len(gvars) > 1:
        a, b = gvars[:2]
        parts = [re.sub(rf"\b({a}|{b})\b", lambda g: b if g.group(1) == a else a, c)
                 for c in parts]
    else:
        parts = [c.replace("0 <=", "1 <=", 1) for c in parts]
    return f"{{[{', '.join(pvars)}] -> [{', '.join(gvars)}] : {' and '.join(parts)}}}"


@st.composite
def relation_mutated(draw, text: str) -> str:
    """One change to the relation (:func:`relation_edit`, or a conjunct or token of
    tests/test_fuzz_specs.py), the packer dropped or kept: mutations that often load."""
    table = tomllib.loads(text)
    scalars = [f for f, t in table["fields"].items() if t == "int"] + \
        list(table.get("params", {}))
    how = draw(st.sampled_from(["edit", "edit", "edit", "conjunct", "token"]))
    relation = table["relation"]
    table["relation"] = draw(relation_edit(relation, scalars) if how == "edit" else
                             conjunct_mutation(relation) if how == "conjunct" else
                             token_mutation(relation))
    if "packer" in table and draw(st.booleans()):
        del table["packer"]
    return toml_document(table)


MUTATIONS: dict[str, Callable[[str], st.SearchStrategy[str]]] = {
    "text": lambda t: mutated(t, any_mutation), "strings": strings_mutated,
    "values": toml_mutated, "names": renamed, "properties": properties_mutated,
    "relation": relation_mutated}


def small_tensors(draw, order: int, how_many: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Small tensors of ``order`` (empty, one entry, an empty row, rectangular, random),
    each with a dense vector for the kernel."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fixed = {1: [np.zeros(4), np.array([0.0, 2.0, 0.0]), np.array([1.0, 0.0, -3.0, 4.0])],
             2: [np.zeros((3, 4)), np.array([[0.0, 0.0], [0.0, 5.0]]),
                 np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]]),
                 np.array([[0.0, 1.5, 0.0, 0.0, -2.0], [4.0, 0.0, 0.0, 0.0, 0.0]]),
                 np.zeros((0, 3))],
             3: [np.zeros((2, 2, 2)), np.arange(12.0).reshape(2, 3, 2) % 3]}.get(order, [])
    out = []
    for _ in range(how_many):
        if fixed and draw(st.booleans()):
            dense = draw(st.sampled_from(fixed))
        else:
            shape = tuple(int(rng.integers(1, 5)) for _ in range(order))
            dense = np.where(rng.random(shape) < 0.4, rng.integers(-4, 5, shape), 0) * 1.0
        x = rng.integers(1, 4, dense.shape[-1] if order else 1) * 1.0
        out.append((dense, x))
    return out


def contracted(dense: np.ndarray, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.tensordot(dense, x, axes=([dense.ndim - 1], [0]))


def step_values(outcomes: list[aw.Outcome]) -> dict[str, aw.Outcome]:
    return {o.step: o for o in outcomes}


def _read_back_wrong(outcomes: dict[str, aw.Outcome], prefix: str, dense: np.ndarray,
                     x: np.ndarray) -> str | None:
    """What a tensor meant to hold ``dense`` read back wrong (None: nothing)."""
    o = outcomes.get(f"{prefix}to_dense")
    if o is not None and o.kind == "value" and not close(o.value, dense):
        return f"{prefix}to_dense gave {np.asarray(o.value).tolist()!r}"
    o = outcomes.get(f"{prefix}kernel")
    if o is not None and o.kind == "value" and not close(o.value[0], contracted(dense, x)):
        return (f"{prefix}kernel gave {np.asarray(o.value[0]).tolist()!r}, numpy "
                f"{contracted(dense, x).tolist()!r}")
    return None


def _decoded_wrong(fields: aw.Outcome | None, dense: np.ndarray) -> str | None:
    """What the written fields mean under the relation, if not ``dense`` (the suite reads
    the relation itself; a relation it cannot read is skipped)."""
    if fields is None or fields.kind != "value":
        return None
    f = fields.value
    try:
        got = decode(f["raw"], f["params"], f["fields"], f["shape"])
    except UndecidedError:
        return None
    except InvalidFieldsError as err:
        return f"the written fields {f['fields']!r} do not decode: {err}"
    if close(got, dense):
        return None
    return f"the written fields {f['fields']!r} mean {got.tolist()!r} under the relation"


_files = itertools.count()


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_mutated_layout_files(worker, kind):
    """A mutated shipped layout: refused with its file:line:col, or correct for small
    tensors stored, converted, read back and used in a kernel."""
    verdict = Verdict(f"layout files[{kind}]")

    @_examples(1.5)
    @given(data=st.data())
    def prop(data):
        name = data.draw(st.sampled_from(LAYOUT_NAMES), label="layout")
        text = data.draw(MUTATIONS[kind](LAYOUTS[name]), label="text")
        tensors = {order: small_tensors(data.draw, order, 2) for order in (1, 2, 3)}
        file = f"mutated{os.getpid()}_{next(_files)}.toml"
        outcomes = worker.call("layout_file", {"file": file, "text": text,
                                               "tensors": tensors})
        check_layout_file(verdict, file, text, tensors, outcomes)

    verdict.run(prop)


def layout_file_repro(file: str, text: str, tensors: dict) -> str:
    """Python that stores, converts and reads back the tensors in the mutated layout."""
    lines = ["import shutil, tempfile", "from pathlib import Path", "import numpy as np",
             "import spf", "from spf.front.layout_path import LAYOUT_DIR",
             "folder = Path(tempfile.mkdtemp())",
             "for packer in LAYOUT_DIR.glob('*.py'):", "    shutil.copy(packer, folder)",
             f"(folder / {file!r}).write_text({text!r})",
             f"L = spf.load_layout(str(folder / {file!r}))",
             f"tensors = {_dict_literal(tensors)}",
             "for dense, x in tensors.get(L.order, []):",
             "    t = spf.Tensor.from_dense(L, dense)",
             "    print(t.fields, t.to_dense())",
             f"    print(spf.evaluate({{1: {aj.contraction(1)!r}, 2: {aj.contraction(2)!r}, "
             f"3: {aj.contraction(3)!r}}}[L.order], M=t, w=x))",
             "    source = {1: 'SV', 2: 'CSR', 3: 'COO3'}[L.order]",
             "    c = spf.Tensor.from_dense(source, dense).convert(L, allow_padding=True)",
             "    print(c.to_dense())"]
    return "\n".join(lines)


def check_layout_file(verdict: Verdict, file: str, text: str, tensors: dict,
                      outcomes: list[aw.Outcome]) -> None:
    used = {o: [(d.tolist(), x.tolist()) for d, x in ts] for o, ts in tensors.items() if ts}
    detail = (f"layout file {file} (a mutation of a shipped layout):\n{text}\n"
              f"tensors (and vectors) by order: {used!r}\n"
              f"repro:\n{layout_file_repro(file, text, tensors)}")
    bad = worst(outcomes)
    if bad is not None:
        verdict.record(KLASS[bad.kind], f"{bad.describe()}\n{detail}")
        return
    steps = step_values(outcomes)
    load = steps["load"]
    if load.kind == "spf":
        if not re.match(rf"^\S*{re.escape(file)}(:\d+:\d+)?: ", load.message):
            verdict.record("spf error (not documented)",
                           f"load refused without the file's position: {load.message}"
                           f"\n{detail}")
        else:
            verdict.record("spf error (expected)", "refused when loaded")
        return
    info = steps["loaded"].value
    refused = False
    for o in outcomes:
        if o.kind != "spf":
            continue
        refused = True
        if (file not in o.message and not re.search(rf"\b{re.escape(info['name'])}\b",
                                                     o.message)) or UNCLEAR.search(o.message) \
                or INTERNAL.search(o.message):
            verdict.record("spf error (not documented)",
                           f"an error that names neither the file nor the layout "
                           f"{info['name']!r}: {o.describe()}\n{detail}")
            return
    for k, (dense, x) in enumerate(tensors.get(info["order"], [])):
        wrong = _decoded_wrong(steps.get(f"#{k} fields"), dense)
        for prefix in (f"#{k} ", f"#{k} converted "):
            wrong = wrong or _read_back_wrong(steps, prefix, dense, x)
            if wrong:
                verdict.record("silently wrong", f"{wrong}; the tensor was "
                               f"{dense.tolist()!r} (x = {x.tolist()!r})\n{detail}")
                return
    if refused:
        verdict.record("spf error (expected)", "loaded, the tensors refused")
    else:
        verdict.record("correct")


# =============================================================================================
# (c) every shipped layout: the writer's output, then corrupted operands
LAYOUT_PARAMS = {"BCSR": {"B": [1, 2, 3]}, "BlockedELL": {"B": [1, 2]}, "CSB": {"B": [2, 3]},
                 "HiCOO": {"B": [2]}, "SELL": {"C": [1, 2, 4]},
                 "SELL_sigma": {"C": [2], "sigma": [2, 4]}, "COOTensor": {"N": [2, 3, 4]},
                 "DenseTensor": {"N": [1, 2, 3]}}
SOURCES = {1: "SV", 2: "CSR", 3: "COO3"}


def layout_order(name: str, params: dict) -> int:
    return params.get("N") or spf.load_layout(name).order


@st.composite
def layout_tensor(draw, name: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """(params, a dense tensor ``name`` can store, a vector for the kernel)."""
    params = {k: draw(st.sampled_from(v)) for k, v in LAYOUT_PARAMS.get(name, {}).items()}
    order = layout_order(name, params)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if name == "CUDAmma16x16":
        dense = np.zeros((16, 16))
        for r in range(16):
            for p in range(8):
                if rng.random() < 0.3:
                    dense[r, 2 * p + rng.integers(2)] = rng.integers(-4, 5) or 1
    else:
        shape = tuple(draw(st.sampled_from([0, 1, 2, 3, 5])) if order < 3 else
                      draw(st.sampled_from([1, 2, 3])) for _ in range(order))
        if name in ("SymCSR", "LowerTri"):
            shape = (shape[0], shape[0])
        density = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
        dense = np.where(rng.random(shape) < density, rng.integers(-4, 5, shape), 0) * 1.0
        if shape and shape[0] > 1 and draw(st.booleans()):
            dense[min(1, shape[0] - 1)] = 0          # an empty row
        if name == "SymCSR":
            dense = _symmetric(dense)
        if name == "LowerTri":
            dense = np.tril(dense)
        if spf.load_layout(name).implicit is not None:     # a pattern layout holds 1s
            dense = (dense != 0) * 1.0
    x = rng.integers(1, 4, dense.shape[-1]) * 1.0
    return params, dense, x


@pytest.mark.parametrize("name", spf.layout_names())
def test_writer_read_back(worker, name):
    """Random tensors stored in every shipped layout (``from_dense``, ``convert``): the
    written fields decode to the tensor by the relation, and read back (``to_dense``, a
    kernel) equal numpy."""
    verdict = Verdict(f"writer read back[{name}]")

    @_examples(0.3)
    @given(case=layout_tensor(name))
    def prop(case):
        params, dense, x = case
        order = layout_order(name, params)
        outcomes = worker.call("store", {"layout": name, "params": params, "dense": dense,
                                         "x": x, "source": SOURCES.get(order)})
        source = SOURCES.get(order)
        lines = ["import numpy as np", "import spf", f"dense = {_literal(dense)}",
                 f"t = spf.Tensor.from_dense({name!r}, dense"
                 + "".join(f", {k}={v!r}" for k, v in params.items()) + ")",
                 "print(t.fields)", *_use_repro("t", order, x)]
        if source:
            lines += [f"c = spf.Tensor.from_dense({source!r}, dense).convert({name!r}, "
                      "allow_padding=True" + "".join(f", {k}={v!r}" for k, v in params.items())
                      + ")", *_use_repro("c", order, x)]
        detail = (f"{name} {params}: {dense.tolist()!r}, x = {x.tolist()!r}\n    repro:\n"
                  + "\n".join(f"        {line}" for line in lines))
        bad = worst(outcomes)
        if bad is not None:
            verdict.record(KLASS[bad.kind], f"{bad.describe()}\n    {detail}")
            return
        steps = step_values(outcomes)
        refused = [o for o in outcomes if o.kind == "spf"]
        if refused:
            verdict.record("spf error (not documented)",
                           f"a tensor the layout can hold was refused: "
                           f"{refused[0].describe()}\n    {detail}")
            return
        wrong = _read_back_wrong(steps, "", dense, x) or \
            _read_back_wrong(steps, "converted ", dense, x)
        wrong = wrong or _decoded_wrong(steps.get("fields"), dense)
        if wrong:
            verdict.record("silently wrong", f"{wrong}\n    {detail}")
        else:
            verdict.record("correct")

    verdict.run(prop)


INDEX_VALUES = [-1, -2, 2**31 - 1, 2**31, 10**6]


def _quietly(make: Callable[[], Any], otherwise: Any = None) -> Any:
    """``make()``, or ``otherwise`` where an earlier corruption left nothing it applies to."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return make()
        except (TypeError, ValueError, OverflowError, IndexError):
            return otherwise


@st.composite
def corruption(draw, fields: dict, raw: dict) -> tuple[dict, str]:
    """``fields`` with one or two things made wrong, and what."""
    specs = raw["fields"]
    value_array = raw["value"].split("[", 1)[0].strip()     # a number: no value array
    derived = set(raw.get("derived") or {})
    fields = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in fields.items()
              if k not in derived}
    arrays = [k for k, s in specs.items() if "[" in s and k in fields]
    index_arrays = [k for k in arrays if k != value_array]
    scalars = [k for k, s in specs.items() if "[" not in s and k in fields]
    held = value_array in fields        # else a pattern layout: its entries' last index array
    entries = value_array if held else (index_arrays or [value_array])[-1]
    done = []
    for _ in range(draw(st.integers(1, 2))):
        kinds = (["nan"] if held else []) + (["entry", "entry", "unsorted", "duplicate", "length"]
                           if index_arrays else []) + (["scalar"] if scalars else []) + \
            ["bad array"]
        kind = draw(st.sampled_from(kinds))
        name = value_array
        if kind == "nan":
            a = _quietly(lambda: np.array(fields[value_array]))
            if a is not None and a.size and a.dtype.kind in "fc":
                a.reshape(-1)[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from(
                    [np.nan, np.inf, -np.inf]))
                fields[value_array] = a
        elif kind == "entry":
            name = draw(st.sampled_from(index_arrays))
            a = _quietly(lambda a=fields[name]: np.array(a).astype(np.int64))
            if a is not None and a.size:
                k = draw(st.integers(0, a.size - 1))
                flat = a.reshape(-1)
                flat[k] = draw(st.sampled_from(INDEX_VALUES + [a.size, int(flat[k]) + 1,
                                                               int(flat[k]) - 1]))
                fields[name] = a
        elif kind == "unsorted":
            name = draw(st.sampled_from(index_arrays))
            rev = draw(st.booleans())
            fields[name] = _quietly(lambda a=fields[name]: np.array(a)[::-1].copy() if rev
                                    else np.roll(np.array(a), 1), fields[name])
        elif kind == "duplicate":
            n = _quietly(lambda: np.size(fields[entries]), 0)
            same = [k for k in index_arrays if _quietly(lambda k=k: np.size(fields[k])) == n]
            if n >= 2:
                k = draw(st.integers(0, n - 2))
                for name in same:
                    a = np.array(fields[name])
                    a.reshape(-1)[k + 1] = a.reshape(-1)[k]
                    fields[name] = a
        elif kind == "length":
            name = draw(st.sampled_from(arrays))
            shorter = draw(st.booleans())
            fields[name] = _quietly(lambda a=fields[name]: np.array(a).reshape(-1)[:-1]
                                    if shorter else np.append(np.array(a).reshape(-1), 0),
                                    fields[name])
        elif kind == "scalar":
            name = draw(st.sampled_from(scalars))
            bad = draw(st.sampled_from(BAD_SCALARS))
            fields[name] = _quietly(lambda v=fields[name]: bad(int(v)), fields[name])
            kind = f"scalar {name} = {fields[name]!r}"
        else:
            name = draw(st.sampled_from(arrays))
            bad = draw(st.sampled_from(BAD_ARRAYS))
            fields[name] = _quietly(lambda a=fields[name]: bad(np.array(a)), fields[name])
        done.append(kind if kind.startswith("scalar") else f"{kind} {name}"
                    if kind != "nan" else "nan in the values")
    return fields, ", ".join(done)


@pytest.mark.parametrize("name", spf.layout_names())
def test_corrupted_operands(worker, name):
    """A valid tensor's fields corrupted: ``from_arrays`` (with its checks) and a kernel give
    an spf error, or the result the fields mean under the relation (decoded by the suite);
    never a crash, a raw exception or a result from fields that mean no tensor."""
    verdict = Verdict(f"corrupted operands[{name}]")

    @_examples(0.5)
    @given(data=st.data())
    def prop(data):
        params, dense, x = data.draw(layout_tensor(name), label="tensor")
        made = worker.call("store", {"layout": name, "params": params, "dense": dense,
                                     "x": x, "source": None})
        steps = step_values(made)
        assume("fields" in steps and steps["fields"].kind == "value")
        valid = steps["fields"].value
        fields, what = data.draw(corruption(valid["fields"], valid["raw"]), label="what")
        outcomes = worker.call("tensor", {"layout": name, "params": params,
                                          "shape": valid["shape"], "fields": fields, "x": x})
        lines = ["import numpy as np", "import spf",
                 f"fields = {_dict_literal(fields)}",
                 f"t = spf.Tensor.from_arrays({name!r}, {tuple(valid['shape'])!r}, fields, "
                 f"params={params!r})", *_use_repro("t", len(valid["shape"]), x)]
        detail = (f"{name} {params} {valid['shape']}: {what}; fields {fields!r}, "
                  f"x = {x.tolist()!r}\n    repro:\n"
                  + "\n".join(f"        {line}" for line in lines))
        check_corrupted(verdict, outcomes, valid, fields, x, detail)

    verdict.run(prop)


def check_corrupted(verdict: Verdict, outcomes: list[aw.Outcome], valid: dict, fields: dict,
                    x: np.ndarray, detail: str) -> None:
    bad = worst(outcomes)
    if bad is not None:
        verdict.record(KLASS[bad.kind], f"{bad.describe()}\n    {detail}")
        return
    steps = step_values(outcomes)
    errors = [o for o in outcomes if o.kind == "spf"]
    if any(UNCLEAR.search(o.message) or INTERNAL.search(o.message) for o in errors):
        verdict.record("spf error (not documented)", f"unclear message: "
                       f"{errors[0].describe()}\n    {detail}")
        return
    try:
        meaning: np.ndarray | None = decode(valid["raw"], valid["params"], fields,
                                            tuple(valid["shape"]))
    except InvalidFieldsError as err:
        results = [o for o in outcomes if o.kind == "value" and o.step != "from_arrays"]
        if results:
            verdict.record("silently wrong", f"fields that mean no tensor ({err}) were "
                           f"accepted: {results[0].describe()}\n    {detail}")
        else:
            verdict.record("spf error (expected)", f"refused fields that mean no tensor: "
                           f"{errors[0].error}" if errors else "?")
        return
    except UndecidedError:
        meaning = None
    if meaning is not None:
        wrong = _read_back_wrong(steps, "", meaning, x)
        if wrong:
            verdict.record("silently wrong", f"{wrong}; the fields mean "
                           f"{meaning.tolist()!r}\n    {detail}")
            return
    if errors:
        verdict.record("spf error (expected)", f"refused fields with a meaning: "
                       f"{errors[0].error} at {errors[0].step}")
    else:
        verdict.record("correct")


def test_a_products_literals_beyond_its_type_is_a_documented_refusal():
    """``(256 * x(j)) * 256`` of uint16: the coefficient 65536 does not fit uint16 (spf
    refuses, docs/value-types.md); the long profile counted it undocumented."""
    rhs = _op("*", _op("*", Num(256), _at("x", "j")), Num(256))
    x = np.zeros(3, np.uint16)
    design = Design(("j",), (("x", "dense", "uint16"),), None, {"j": 3})
    case = ExprCase(Statement("R", ("j",), rhs, {"x": x}, {}, frozenset()), design,
                    "evaluate", None, False)
    with pytest.raises(spf.SpecError) as err:
        spf.evaluate(case.statement.text(), x=x)
    assert documented_refusal(case, str(err.value)) is not None, str(err.value)
