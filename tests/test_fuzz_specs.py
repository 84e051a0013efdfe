"""Fuzzing the spec readers: malformed layout files, kernel expressions, kernel options and
kernel files give ``spf.SpecError`` (or ``spf.SynthesisError``: a valid spec, a choice that is
not valid for it), never a traceback from islpy, Z3, tomllib or Python itself.

Inputs are random mutations of the shipped layouts and of valid kernels, plus random text.
A spec that loads is used in a small kernel up to its C source (other tests run C).
"""
from __future__ import annotations

import itertools
import math
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spf
from spf.front.layout_path import LAYOUT_DIR

EXAMPLES = int(os.environ.get("SPF_FUZZ_EXAMPLES", "0")) or None
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def examples(n: int) -> settings:
    """``n`` examples (``$SPF_FUZZ_EXAMPLES`` overrides it for longer local runs)."""
    return settings(FUZZ, max_examples=EXAMPLES or n)


LAYOUTS = {p.stem: p.read_text() for p in sorted(LAYOUT_DIR.glob("*.toml"))
           if p.stem != "defaults"}
LAYOUT_NAMES = sorted(LAYOUTS)

# ---------------------------------------------------------------------------------------
# the property
ALLOWED = (spf.SpecError, spf.SynthesisError)


def check_message(err: spf.SpfError, source: str | None = None) -> None:
    """A non-empty message; a SpecError starts with its source (``source`` when given)."""
    text = str(err)
    assert text.strip(), f"empty message from {type(err).__name__}"
    if isinstance(err, spf.SpecError):
        assert err.detail.strip(), text
        assert text.startswith(err.source), text
        if source is not None:
            assert err.source == source and text.startswith(f"{source}:"), text


def build(expr: str, layouts: dict[str, Any] | None = None, **options: Any) -> None:
    """Generate the kernel's C; an allowed error must have a message."""
    try:
        spf.Kernel(expr, layouts, **options).c_source()
    except ALLOWED as err:
        check_message(err)


def kernels_for(layout: spf.Layout) -> list[tuple[str, dict[str, Any], str]]:
    """Small kernels that use ``layout`` as an input and, if it has one, as the output;
    with the name of the tensor in ``layout``."""
    order = layout.order
    if order == 1:
        return [("v = a(i) * b(i)", {"a": layout}, "a"),
                ("y(i) = A(i,j) * x(j)", {"A": "CSR", "y": layout}, "y")]
    if order == 2:
        return [("y(i) = A(i,j) * x(j)", {"A": layout}, "A"),
                ("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "C": layout}, "C")]
    indices = ",".join(f"i{k}" for k in range(order))
    return [(f"v = T({indices}) * s", {"T": layout}, "T")] if order else []


VARIANTS = ["default", "parallel", "reversed", "tile", "seqiter", "hashmap", "binsearch", "loop"]


def variant_options(variant: str, layout: spf.Layout, tensor: str) -> dict[str, Any]:
    """Kernel options that exercise ``layout`` (of tensor ``tensor``) in other ways."""
    if variant == "parallel":
        return {"parallel": True}
    if variant == "reversed":
        return {"order": [f"{tensor}.{v}" for v in reversed(layout.indices)]}
    if variant == "tile":
        return {"tile": {f"{tensor}.{v}": 4 for v in layout.indices[:1]}}
    return {} if variant == "default" else {"find": variant}


def check_layout_file(path: Path, variant: str = "default") -> None:
    """Load ``path``; if it loads, use it in the small kernels."""
    source = str(path.resolve())
    try:
        layout = spf.load_layout(str(path))
    except spf.SpecError as err:
        check_message(err, source)
        return
    for expr, layouts, tensor in kernels_for(layout):
        build(expr, layouts, **variant_options(variant, layout, tensor))


_serial = itertools.count()


def write(directory: Path, data: str | bytes) -> Path:
    """A new file (layouts are cached by path, so every spec gets its own)."""
    path = directory / f"spec{next(_serial)}.toml"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory with the shipped packers, so that ``packer = "CSR.py"`` still resolves."""
    directory = tmp_path_factory.mktemp("fuzz")
    for packer in LAYOUT_DIR.glob("*.py"):
        shutil.copy(packer, directory)
    return directory


# ---------------------------------------------------------------------------------------
# text mutations
TOKEN_RE = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+|->|<=|>=|==|&&|[-+*/%(){}\[\],:<>=\"']")
WEIRD = ["", " ", "<", "<=", "=", "==", "!=", ">", "]", "[", "(", ")", "{", "}", ",", ":", "->",
         "and", "or", "&&", "||", "∧", "+", "-", "*", "/", "%", "pi*pj", "pi * 2", "2 * 3",
         "99999999999999999999999999", "-99999999999999999999", "2147483648", "0", "-1",
         "pi", "pj", "pk", "p", "gi", "gj", "pz", "numRows", "rowPtr", "colIdx", "data",
         "nope(pi)", "rowPtr(pi, pj)", "rowPtr()", "colIdx(colIdx(pj))", "data(pi)", "B",
         "p'", "A.b", "é", "ü", "∑", "\u200b", "\x00", "\\", "\\u0041", '"', "'", '"""', "#",
         "\n", "\t", "[[properties]]", "[fields]", "[params]", "int", "double", "float",
         "int[", "int[]", "int[-1]", "int[0]", "int[pi]", "double[1.5]", "true", "1.5", "nan",
         "inf", "1e3", "[1, 2]", "{a = 1}", "floor", "exists", "min", "max", "uf",
         "kind", "order", "period", "with", "gap", "(" * 40 + "1" + ")" * 40, "-" * 50,
         "rowPtr(" * 40 + "pi" + ")" * 40, "+ 1" * 300, "\nx = " + "[" * 600 + "]" * 600 + "\n"]


def splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


@st.composite
def line_mutation(draw, text: str) -> str:
    lines = text.split("\n")
    i = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["delete", "duplicate", "swap", "truncate"]))
    if how == "delete":
        del lines[i]
    elif how == "duplicate":
        lines.insert(i, lines[i])
    elif how == "swap":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        return text[:draw(st.integers(0, len(text)))]
    return "\n".join(lines)


@st.composite
def char_mutation(draw, text: str) -> str:
    pos = draw(st.integers(0, len(text)))
    new = draw(st.one_of(st.sampled_from(WEIRD), st.characters(exclude_categories=["Cs"])))
    end = pos + draw(st.integers(0, 2))
    return splice(text, pos, min(end, len(text)), new)


@st.composite
def token_mutation(draw, text: str) -> str:
    """Replace one identifier, number or operator by another or by something odd."""
    tokens = list(TOKEN_RE.finditer(text))
    if not tokens:
        return text
    m = draw(st.sampled_from(tokens))
    other = st.sampled_from(tokens).map(lambda t: t.group())
    return splice(text, m.start(), m.end(), draw(st.one_of(st.sampled_from(WEIRD), other)))


def mutated(text: str, mutation: Callable) -> st.SearchStrategy[str]:
    """``text`` after 1 to 4 mutations drawn from ``mutation``."""
    @st.composite
    def go(draw) -> str:
        out = text
        for _ in range(draw(st.integers(1, 4))):
            out = draw(mutation(out))
        return out
    return go()


def any_mutation(text: str) -> st.SearchStrategy[str]:
    return st.one_of(line_mutation(text), char_mutation(text), token_mutation(text),
                     token_mutation(text))


# ---------------------------------------------------------------------------------------
# TOML-level mutations: the document's values changed, then written back
def toml_value(value: Any) -> str:
    """``value`` as inline TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if math.isfinite(value) else ("nan" if value != value else
                                                         ("inf" if value > 0 else "-inf"))
    if isinstance(value, str):
        return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}"
                             for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)


def toml_document(table: dict[str, Any]) -> str:
    """Top-level keys; tables as ``[name]`` sections and lists of tables as ``[[name]]``."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items()
             if not isinstance(v, dict) and not _tables(v)]
    for k, v in table.items():
        if isinstance(v, dict):
            lines += ["", f"[{toml_key(k)}]"] + [f"{toml_key(a)} = {toml_value(b)}"
                                                 for a, b in v.items()]
        elif _tables(v):
            for item in v:
                lines += ["", f"[[{toml_key(k)}]]"] + [f"{toml_key(a)} = {toml_value(b)}"
                                                       for a, b in item.items()]
    return "\n".join(lines) + "\n"


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


SPEC_STRINGS = ["", "pi", "numRows", "rowPtr", "colIdx", "int", "double", "int[numRows + 1]",
                "int[rowPtr(numRows)]", "double[numRows][numCols]", "int[0]", "int[-5]",
                "int[numRows * numCols]", "int[rowPtr(numRows, 1)]", "int[nope(1)]", "int[",
                "double[]", "int[99999999999999999999999]", "long[3]", "double", "int[B]",
                "range", "injective", "monotonic", "periodic_monotonic", "covary_monotonic",
                "sorted", "<", "<=", ">", ">=", "=<", "!=", "0", "-1", "numCols - 1", "pi*pj",
                "data[pj]", "data[pi][pj]", "data[pj / 0]", "data[]", "data", "rowPtr[pj]",
                "{[p] -> [i] : 0 <= p < len and i = idx(p)}", "{[p] : 0 <= p < n}",
                "{[] -> [] : }", "{[p] -> [gi, gj] : gi = p and gj = p}",
                "{[pi, pj] -> [gi, gj] : gi = pi*pj and gj = pj}", "CSR.py", "nope.py",
                "CSR.py:nofunc", "é", "numRows + 1", "x y", "B"]
SCALARS = st.one_of(st.sampled_from(SPEC_STRINGS), st.text(max_size=8),
                    st.integers(-2**70, 2**70), st.sampled_from([0, 1, -1, 2**31, 2**63]),
                    st.booleans(), st.floats(), st.none())
TOML_VALUES = st.recursive(
    SCALARS.filter(lambda v: v is not None),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(SPEC_STRINGS[:6] + ["uf", "kind"]),
                                            inner, max_size=3)),
    max_leaves=4)
KEYS = ["name", "description", "relation", "value", "shape", "fields", "params", "properties",
        "packer", "dense_array", "kind", "uf", "ufs", "order", "min", "max", "period", "with",
        "gap", "B", "numRows", "rowPtr", "data", "extra"]


def value_slots(value: dict | list) -> list[tuple[Any, Any]]:
    """(container, key) of every value in a TOML document, at any depth."""
    out = []
    for key, item in (value.items() if isinstance(value, dict) else enumerate(value)):
        out.append((value, key))
        if isinstance(item, (dict, list)):
            out += value_slots(item)
    return out


@st.composite
def toml_mutation(draw, table: dict[str, Any]) -> dict[str, Any]:
    """One value (at any depth) of another type or deleted, or a key added next to it."""
    slots = value_slots(table)
    if not slots:
        return table
    container, key = draw(st.sampled_from(slots))
    how = draw(st.sampled_from(["retype", "retype", "delete", "add"]))
    if how == "delete":
        del container[key]
    elif how == "add" and isinstance(container, dict):
        container[draw(st.sampled_from(KEYS))] = draw(TOML_VALUES)
    else:
        container[key] = draw(TOML_VALUES)
    return table


@st.composite
def toml_mutated(draw, text: str) -> str:
    table = tomllib.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        table = draw(toml_mutation(table))
    return toml_document(table)


# ---------------------------------------------------------------------------------------
# mutations of the strings inside a document (it stays valid TOML)
CONJUNCTS = ["pi = pj", "gi = gj", "gi = 2*pi", "gi = pi + pj", "gj = rowPtr(pi)", "pi < 0",
             "0 <= colIdx(pj)", "pj = colIdx(pj)", "p = idx(p)", "gi = -1", "numRows < pi",
             "0 <= pi", "gi = pi or gi = pj", "colIdx(pi, pj) = 1", "pi = gi", "1 = 1", "0 = 1"]


@st.composite
def conjunct_mutation(draw, text: str) -> str:
    """Drop, duplicate, reorder or add a conjunct of a formula, or join two with 'or'."""
    head, sep, body = text.partition(":")
    if not sep:
        return text
    body, close, tail = body.rpartition("}")
    parts = [c.strip() for c in body.split(" and ")]
    how = draw(st.sampled_from(["drop", "duplicate", "swap", "add", "or"]))
    i = draw(st.integers(0, len(parts) - 1))
    if how == "drop":
        del parts[i]
    elif how == "duplicate":
        parts.insert(i, parts[i])
    elif how == "swap":
        j = draw(st.integers(0, len(parts) - 1))
        parts[i], parts[j] = parts[j], parts[i]
    elif how == "add":
        parts.insert(i, draw(st.sampled_from(CONJUNCTS)))
    else:
        return f"{head}: {' and '.join(parts[:i + 1])} or {' and '.join(parts[i:])}{close}{tail}"
    return f"{head}: {' and '.join(parts)} {close}{tail}"


def string_ops(text: str) -> st.SearchStrategy[str]:
    return st.one_of(token_mutation(text), token_mutation(text), char_mutation(text),
                     conjunct_mutation(text))


def string_leaves(table: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(container, key) of every string in a TOML document."""
    return [(c, k) for c, k in value_slots(table) if isinstance(c[k], str)]


@st.composite
def strings_mutated(draw, text: str) -> str:
    """``text`` with one to three of its TOML strings mutated."""
    table = tomllib.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        container, key = draw(st.sampled_from([(c, k) for c, k in string_leaves(table)
                                               if k not in ("description", "name")]))
        container[key] = draw(mutated(container[key], string_ops))
    return toml_document(table)


RENAMES = ["pi", "pj", "gi", "gj", "p", "numRows", "rowPtr", "colIdx", "data", "B", "nan",
           "min", "max", "floor", "exists", "and", "or", "true", "infty", "int", "double",
           "spf_x", "A_pi", "x1", "_", "__prime", "p__prime", "i", "j", "len", "v", "NaN"]


def rename(value: Any, old: str, new: str) -> Any:
    """``value`` (a TOML document or part of one) with the identifier ``old`` renamed in
    every string and every table key."""
    if isinstance(value, str):
        return re.sub(rf"\b{re.escape(old)}\b", new, value)
    if isinstance(value, list):
        return [rename(v, old, new) for v in value]
    if isinstance(value, dict):
        return {rename(k, old, new): rename(v, old, new) for k, v in value.items()}
    return value


@st.composite
def renamed(draw, text: str) -> str:
    """One identifier (a layout index, field, parameter, ...) renamed everywhere."""
    table = tomllib.loads(text)
    names = sorted({n for container, key in string_leaves(table)
                    if key not in ("description", "name", "kind", "packer", "order")
                    for n in re.findall(r"\b[A-Za-z_]\w*\b", container[key])})
    old = draw(st.sampled_from(names))
    return toml_document({k: rename(v, old, draw(st.sampled_from(RENAMES)))
                          for k, v in table.items()})


# ---------------------------------------------------------------------------------------
# properties: well-formed, of the layout's own index arrays, but not necessarily true
def relation_indices(table: dict[str, Any]) -> list[str]:
    m = re.search(r"\{\s*\[([^\]]*)\]", str(table.get("relation", "")))
    return [v.strip() for v in m.group(1).split(",") if v.strip()] if m else []


@st.composite
def a_property(draw, arrays: list[str], scalars: list[str], indices: list[str]) -> dict:
    bounds = st.sampled_from(scalars + ["0", "-1", "1", "99999999999999999999"]).flatmap(
        lambda b: st.sampled_from([b, f"{b} - 1", f"2*{b}", f"-{b}"]))
    kind = draw(st.sampled_from(["range", "injective", "monotonic", "periodic_monotonic",
                                 "covary_monotonic"]))
    prop: dict[str, Any] = {"kind": kind, "uf": draw(st.sampled_from(arrays))}
    if kind == "range":
        for key in draw(st.lists(st.sampled_from(["min", "max"]), min_size=1, unique=True)):
            prop[key] = draw(bounds)
    elif kind == "injective":
        prop = {"kind": kind, "ufs": draw(st.lists(st.sampled_from(arrays), min_size=1,
                                                   max_size=3, unique=True))}
    else:
        prop["order"] = draw(st.sampled_from(["<", "<=", ">", ">="]))
        if draw(st.booleans()):
            prop["gap"] = draw(st.sampled_from(["0", "1", "B", "2147483647"]))
    if kind == "periodic_monotonic":
        prop["period"] = draw(st.lists(st.sampled_from(indices), min_size=1, max_size=2,
                                       unique=True)) if indices else "pi"
    if kind == "covary_monotonic":
        prop["with"] = draw(st.sampled_from(arrays))
    return prop


@st.composite
def properties_mutated(draw, text: str) -> str:
    """Properties replaced, added or dropped."""
    table = tomllib.loads(text)
    fields = table["fields"]
    arrays = [f for f, t in fields.items() if t.startswith("int[")]
    if not arrays:
        return text
    scalars = [f for f, t in fields.items() if t == "int"] + list(table.get("params", {}))
    props = table.setdefault("properties", [])
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(props)))
        if at < len(props) and draw(st.booleans()):
            del props[at]
        else:
            props.insert(at, draw(a_property(arrays, scalars, relation_indices(table))))
    return toml_document(table)


# ---------------------------------------------------------------------------------------
# layout files
def layout_texts(mutation: Callable[[str], st.SearchStrategy[str]]) -> st.SearchStrategy[str]:
    return st.sampled_from(LAYOUT_NAMES).flatmap(lambda n: mutation(LAYOUTS[n]))


@pytest.mark.fuzz
@pytest.mark.slow
@examples(400)
@given(text=layout_texts(lambda t: mutated(t, any_mutation)), variant=st.sampled_from(VARIANTS))
def test_mutated_layout_text(workdir, text, variant):
    check_layout_file(write(workdir, text), variant)


@pytest.mark.fuzz
@pytest.mark.slow
@examples(600)
@given(text=layout_texts(strings_mutated), variant=st.sampled_from(VARIANTS))
def test_mutated_layout_strings(workdir, text, variant):
    check_layout_file(write(workdir, text), variant)


@pytest.mark.fuzz
@pytest.mark.slow
@examples(300)
@given(text=layout_texts(renamed), variant=st.sampled_from(VARIANTS))
def test_renamed_layout_names(workdir, text, variant):
    check_layout_file(write(workdir, text), variant)


@pytest.mark.fuzz
@pytest.mark.slow
@examples(400)
@given(text=layout_texts(toml_mutated), variant=st.sampled_from(VARIANTS))
def test_mutated_layout_values(workdir, text, variant):
    check_layout_file(write(workdir, text), variant)


@pytest.mark.fuzz
@pytest.mark.slow
@examples(300)
@given(text=layout_texts(properties_mutated), variant=st.sampled_from(VARIANTS))
def test_mutated_layout_properties(workdir, text, variant):
    check_layout_file(write(workdir, text), variant)


@pytest.mark.fuzz
@examples(200)
@given(text=st.text(max_size=200))
def test_random_layout_text(workdir, text):
    check_layout_file(write(workdir, text))


@pytest.mark.fuzz
@examples(100)
@given(data=st.binary(max_size=100))
def test_random_layout_bytes(workdir, data):
    check_layout_file(write(workdir, LAYOUTS["CSR"].encode() + data))


# ---------------------------------------------------------------------------------------
# kernel expressions and options
EXPRS = ["y(i) = A(i,j) * x(j)", "C(i,j) = A(i,k) * B(k,j)", "v = a(i) * b(i)",
         "y(i) += alpha * A(i,j) * x(j)", "C(i,j) = A(i,j) + B(i,j)",
         "y(i) = A(i,j) * x(j) - b(i)", "Y(i,j) = T(i,j,k) * x(k)"]
EXPR_LAYOUTS = {"A": ["CSR", "COO", "DIA", "BCSR", "ELL", "SV", "CSF", "DenseMatrix",
                      "LowerTri", "CSC", "SortedCOO", "NoSuch", "x/y.toml", "CSR.toml", ""],
                "B": ["CSR", "CSC", "COO", "SV"], "C": ["CSR", "COO", "DIA", "DenseMatrix"],
                "a": ["SV", "SV_unsorted", "CSR"], "b": ["SV", "SV_decreasing"],
                "x": ["SV", "DenseVector", "CSR"], "y": ["SV", "DenseVector"],
                "T": ["CSF", "COO3"], "Y": ["CSR", "DenseMatrix"], "v": ["SV"], "Q": ["CSR"]}
VARIABLES = ["A.pi", "A.pj", "A.pk", "A.p", "A.pd", "B.pi", "B.pj", "C.pi", "x.p", "a.p", "b.p",
             "i", "j", "k", "l", "A_pi", "A.", ".pi", "A.pi.pj", "A.pi,A.pj", "", " ", "é",
             "A.p'", "A.pi_tile", "Q.pi"]
OPTION_VALUES = st.one_of(st.integers(-2**70, 2**70), st.sampled_from([0, 1, -1, 2**31, 2**64]),
                          st.booleans(), st.floats(), st.none(), st.text(max_size=4),
                          st.lists(st.integers(-3, 3), max_size=2),
                          st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))
BOUNDS = ["j <= i", "i < j", "0 <= k", "i = j", "j <= i and i <= j + 2", "k <= i", "i*j <= 1",
          "j <= ", "i <= 99999999999999999999999", "A <= i", "i != j", "i <= j or j <= i",
          "A(i) <= j", "j <= i <= k", "", "1 <= 0", "2*i = 1"]


INDEX_NAMES = ["i", "j", "k", "A", "x", "A_pi", "A_pj", "x_p0", "y_p0", "pi", "spf_i", "int",
               "nan", "min", "exists", "i_tile", "A_pi_tile", "_", "while", "None", "ü"]


@st.composite
def renamed_expr(draw, text: str) -> str:
    """One tensor or index of a kernel renamed everywhere."""
    old = draw(st.sampled_from(sorted(set(re.findall(r"[A-Za-z_]\w*", text)))))
    return re.sub(rf"\b{re.escape(old)}\b", draw(st.sampled_from(INDEX_NAMES)), text)


def expression() -> st.SearchStrategy[str]:
    valid = st.sampled_from(EXPRS)
    return st.one_of(valid, valid.flatmap(lambda e: mutated(e, any_mutation)),
                     valid.flatmap(renamed_expr))


@st.composite
def layouts_for(draw, expr: str) -> dict[str, Any]:
    names = sorted(set(re.findall(r"[A-Za-z]\w*", expr)) | {"Q"})
    chosen = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    return {n: draw(st.one_of(st.sampled_from(EXPR_LAYOUTS.get(n, LAYOUT_NAMES)),
                              st.sampled_from(LAYOUT_NAMES), OPTION_VALUES)) for n in chosen}


def variables() -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(st.sampled_from(VARIABLES), max_size=3),
                     st.sampled_from(VARIABLES), OPTION_VALUES)


@st.composite
def options(draw) -> dict[str, Any]:
    """Some of the Kernel options, each well-formed, malformed or of the wrong type."""
    choices = {
        "order": variables(),
        "find": st.one_of(st.sampled_from(["auto", "seqiter", "hashmap", "binsearch", "loop",
                                            "binary"]),
                          st.dictionaries(st.sampled_from(["A", "B", "x", "a", "b", "Q", "y"]),
                                          st.one_of(st.sampled_from(["seqiter", "hashmap",
                                                                     "auto", "x"]),
                                                    OPTION_VALUES), max_size=2),
                          OPTION_VALUES),
        "bounds": st.one_of(st.sampled_from(BOUNDS),
                            st.sampled_from(BOUNDS[:5]).flatmap(
                                lambda b: mutated(b, any_mutation)), OPTION_VALUES),
        "tile": st.one_of(st.dictionaries(st.sampled_from(VARIABLES),
                                          st.one_of(st.integers(-2, 300), OPTION_VALUES),
                                          max_size=2), OPTION_VALUES),
        "params": st.one_of(st.dictionaries(st.sampled_from(["A", "B", "x", "Q", "C"]),
                                            st.one_of(st.dictionaries(
                                                st.sampled_from(["B", "N", "numRows", ""]),
                                                st.one_of(st.integers(-2, 2**70),
                                                          OPTION_VALUES), max_size=2),
                                                OPTION_VALUES), max_size=2), OPTION_VALUES),
        "share": st.one_of(st.dictionaries(st.sampled_from(["C", "y", "A", "Y", "v"]),
                                           st.one_of(st.sampled_from(["A", "B", "x", "C"]),
                                                     OPTION_VALUES), max_size=2),
                           OPTION_VALUES),
        "parallel": st.one_of(st.booleans(), OPTION_VALUES),
        "name": st.one_of(st.sampled_from(["k", "spmv", "int", "1x", "a b", "é"]),
                          OPTION_VALUES),
        "index_type": st.one_of(st.sampled_from(["int32", "int64", "int16"]), OPTION_VALUES),
        "drop_zeros": st.one_of(st.booleans(), OPTION_VALUES),
    }
    keys = draw(st.lists(st.sampled_from(sorted(choices)), max_size=3, unique=True))
    return {k: draw(choices[k]) for k in keys}


@pytest.mark.fuzz
@pytest.mark.slow
@examples(600)
@given(data=st.data())
def test_mutated_kernels(data):
    expr = data.draw(expression())
    build(expr, data.draw(layouts_for(expr)), **data.draw(options()))


@pytest.mark.fuzz
@pytest.mark.slow
@examples(300)
@given(expr=st.one_of(st.text(max_size=40), st.sampled_from(EXPRS)), opts=options())
def test_random_expressions(expr, opts):
    build(expr, None, **opts)


# ---------------------------------------------------------------------------------------
# kernel files
KERNEL_FILE = """\
expr = "y(i) = A(i,j) * x(j)"
name = "spmv_csr"
order = ["A.pi", "A.pj"]
bounds = "j <= i"
find = "auto"
parallel = false
tile = {"A.pi" = 256}
index_type = "int32"

[layouts]
A = "CSR"

[params.A]
"""
KERNEL_FILES = [KERNEL_FILE,
                KERNEL_FILE.replace('"CSR"', '"BCSR"') + "B = 4\n",
                'expr = "C(i,j) = S(i,j) * A(i,k) * B(k,j)"\nshare = {C = "S"}\n'
                '[layouts]\nC = "CSR"\nS = "CSR"\n',
                'expr = "v = a(i) * b(i)"\nfind = {b = "seqiter"}\n'
                '[layouts]\na = "SV"\nb = "SV"\n',
                'expr = "y(i) = A(i,j) * x(j)"\n[layouts]\nA = "MyLayout.toml"\n']


@st.composite
def kernel_file_text(draw) -> str:
    text = draw(st.sampled_from(KERNEL_FILES))
    return draw(st.one_of(mutated(text, any_mutation), toml_mutated(text),
                          strings_mutated(text)))


def check_kernel_file(path: Path) -> None:
    try:
        spf.Kernel(str(path)).c_source()
    except ALLOWED as err:
        check_message(err)


@pytest.mark.fuzz
@pytest.mark.slow
@examples(500)
@given(text=kernel_file_text())
def test_mutated_kernel_files(workdir, text):
    (workdir / "MyLayout.toml").write_text(LAYOUTS["CSR"])
    check_kernel_file(write(workdir, text))


@pytest.mark.fuzz
@examples(150)
@given(layout=layout_texts(lambda t: mutated(t, any_mutation)))
def test_kernel_file_with_mutated_layout(workdir, layout):
    """A kernel file naming a layout file next to it: a bad layout gives its own error."""
    path = write(workdir, layout)
    kernel = write(workdir, f'expr = "y(i) = A(i,j) * x(j)"\n[layouts]\nA = "{path.name}"\n')
    try:
        spf.load_layout(str(path))
        bad = None
    except spf.SpecError as err:
        bad = str(err)
    try:
        spf.Kernel(str(kernel)).c_source()
    except ALLOWED as err:
        check_message(err)
        assert bad is None or str(err) == bad, (str(err), bad)
    else:
        assert bad is None


# ---------------------------------------------------------------------------------------
# what the fuzzer found, each with its exact message
CSR_TEXT = LAYOUTS["CSR"].replace('packer = "CSR.py"\n', "")


def spec_error(call: Callable[[], Any]) -> str:
    with pytest.raises(spf.SpecError) as info:
        call()
    check_message(info.value)
    return str(info.value)


def test_layout_file_not_utf8(tmp_path):
    path = tmp_path / "Latin1.toml"
    text = CSR_TEXT.replace('"Compressed', '"Compre\xdfed')
    path.write_bytes(text.encode("latin-1"))
    column = text.splitlines()[1].index("\xdf") + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:2:{column}: layout file is not UTF-8 text: byte 0xdf cannot be decoded")


def test_kernel_file_not_utf8(tmp_path):
    path = tmp_path / "k.toml"
    path.write_bytes(b'expr = "y(i) = A(i,j) * x(j)"\n# caf\xe9\n')
    assert spec_error(lambda: spf.Kernel(str(path))) == (
        f"{path}:2:6: kernel file is not UTF-8 text: byte 0xe9 cannot be decoded")


@pytest.mark.parametrize("old, new, kind", [("gi", "rowPtr", "field"), ("pj", "numRows", "field"),
                                            ("pk", "B", "parameter")])
def test_relation_variable_named_like_a_field(tmp_path, old, new, kind):
    """A layout index named like a field made composition rename the field's calls too
    (KeyError '_m10' while printing C)."""
    text = LAYOUTS["BCSR" if kind == "parameter" else "CSR"].replace("packer = ", "# packer = ")
    path = tmp_path / "Clash.toml"
    text = re.sub(rf"\b{old}\b", new, text)
    path.write_text(text)
    column = re.search(rf"\b{new}\b", text.splitlines()[2]).start() + 1     # in the tuple
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:3:{column}: relation variable '{new}' has the name of a {kind}; rename one of "
        "them")


@pytest.mark.parametrize("name", ["nan", "min", "exists", "floor", "infty", "true"])
def test_isl_keywords_as_names(tmp_path, name):
    """Names that are isl keywords used to make isl fail to parse the encoded set."""
    path = tmp_path / f"Named_{name}.toml"
    path.write_text(re.sub(r"\bpj\b", name, CSR_TEXT))
    spf.Kernel("y(i) = A(i,j) * x(j)", {"A": str(path)}).c_source()
    kernel = f"y(i) = A(i,{name}) * x({name})"
    if name != "nan":
        spf.Kernel(kernel, {"A": "CSR"}).c_source()
        return
    with pytest.raises(spf.SpecError, match=r"<string>:1:12: A's index 2: nan is not an "
                                            r"integer"):      # a literal of the kernel notation
        spf.Kernel(kernel, {"A": "CSR"})


@pytest.mark.parametrize("field", ["int", "double", "restrict", "_Bool"])
def test_field_named_like_a_c_keyword(tmp_path, field):
    """It was accepted, and the C compiler rejected the struct."""
    path = tmp_path / "Keyword.toml"
    text = re.sub(r"\bnumCols\b", field, CSR_TEXT)
    path.write_text(text)
    line = text.splitlines().index(f'{field} = "int"') + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:{line}:1: field name '{field}' must be an identifier and not a C keyword (it "
        "names a member of the C struct)")


def test_parameter_name_must_be_an_identifier(tmp_path):
    path = tmp_path / "P.toml"
    path.write_text(CSR_TEXT + '\n[params]\n"a b" = 3\n')
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:{len(CSR_TEXT.splitlines()) + 2}:1: parameter name 'a b' must be an "
        "identifier and not a C keyword")


@pytest.mark.parametrize("value", [[1], True, 1.5, "4", 0, 2**70])
def test_layout_parameter_of_wrong_type(value):
    """A list was hashed for the layout cache (TypeError); True passed as 1."""
    assert spec_error(lambda: spf.load_layout("BCSR", B=value)).endswith(
        f"BCSR.toml: parameter B of layout BCSR must be a positive integer of at most 64 bits, "
        f"got {value!r}")
    message = spec_error(lambda: spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "BCSR"},
                                            params={"A": {"B": value}}))
    assert message.endswith(f"must be a positive integer of at most 64 bits, got {value!r}")


def test_kernel_file_parameter_of_wrong_type(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\n[layouts]\nA = "BCSR"\n[params.A]\nB = [4]\n')
    assert spec_error(lambda: spf.Kernel(str(path))).endswith(
        "parameter B of layout BCSR must be a positive integer of at most 64 bits, got [4]")


KERNEL = "y(i) = A(i,j) * x(j)"


@pytest.mark.parametrize("options, message", [
    ({"name": [-1]}, "kernel name [-1] is not a valid C identifier"),
    ({"params": [2]}, "params must map tensor names to tables of layout parameters such as "
                      "{'A': {'B': 4}}, got [2]"),
    ({"params": {"A": [-3, 0]}}, "params must map tensor names to tables of layout parameters "
                                 "such as {'A': {'B': 4}}, got {'A': [-3, 0]}"),
    ({"order": False}, "order must be a list of loop variables such as ['A.pi', 'A.pj'] or a "
                       "comma-separated string, got False"),
    ({"order": [2, -3]}, "order must be a list of loop variables such as ['A.pi', 'A.pj'] or "
                         "a comma-separated string, got [2, -3]"),
    ({"bounds": 1}, "bounds must be a string such as 'j <= i', got 1"),
    ({"bounds": [-3]}, "bounds must be a string such as 'j <= i', got [-3]"),
    ({"tile": {1: 4}}, "tile names 1, which is not a variable of the iteration space"),
])
def test_kernel_option_of_wrong_type(options, message):
    """Each raised TypeError, ValueError or AttributeError from inside spf."""
    assert spec_error(lambda: spf.Kernel(KERNEL, {"A": "CSR"}, **options)) == (
        f"<string>: {message}")


@pytest.mark.parametrize("expr", ["y(i) = A(i,j) * x(j) - b(i)", "C(i,j) = A(i,j) + B(i,j)"])
def test_sum_option_of_wrong_type(expr):
    """Sums split the order and bounds themselves (AttributeError, TypeError)."""
    assert "order must be" in spec_error(lambda: spf.Kernel(expr, order=-249))
    assert "bounds must be" in spec_error(lambda: spf.Kernel(expr, bounds=[-3]))


def test_kernel_arguments_of_wrong_type():
    assert spec_error(lambda: spf.Kernel(3)) == (
        "<string>: a kernel is a string in tensor index notation such as "
        "'y(i) = A(i,j) * x(j)', got 3")
    assert spec_error(lambda: spf.Kernel(KERNEL, [1])) == (
        "<string>: layouts must map tensor names to layout names, paths or Layout objects, "
        "got [1]")


SV_TEXT = LAYOUTS["SV"].replace("packer = ", "# packer = ")


@pytest.mark.parametrize("old, new, why", [
    ("i = idx(p)}", "i = idx(p) and 0 = 1}", "its constraints contradict each other"),
    ("0 <= p < len", "0 <= p < len and len < 0", "its constraints contradict each other"),
    ('max = "size - 1"', 'max = "-1"', "the range properties contradict it")])
def test_relation_without_entries(tmp_path, old, new, why):
    """Such layouts loaded; kernels then said 'loop over a_p is unbounded' or 'disjunctive
    relations are not supported'."""
    path = tmp_path / "Empty.toml"
    path.write_text(SV_TEXT.replace(old, new))
    column = SV_TEXT.splitlines()[2].index("{") + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:3:{column}: the relation holds for no entry whatever the values of the fields "
        f"and parameters: {why}")


@pytest.mark.parametrize("old, new, key, message", [
    ('period = "pi"', "period = 5", "period",
     "property #4 (periodic_monotonic): period must name layout indices of ['pi', 'pj']"),
    ('min = "0"\nmax', "min = [0]\nmax", "min",
     "property #3 (range): min must be an integer or a string (an affine expression), got [0]"),
    ('min = "0"\nmax', 'min = "nope(0)"\nmax', "min",
     "property #3 (range): min must be affine in scalar fields, parameters and layout indices, "
     "got 'nope(0)'"),
    ('period = "pi"', 'period = "pi"\ngap = 1.5', "gap",
     "property #4 (periodic_monotonic): gap must be an integer or a string (an affine "
     "expression), got 1.5"),
    ("", '[[properties]]\nkind = "injective"\nufs = ["colIdx", "rowPtr"]', "ufs",
     "property #5 (injective): the index arrays must be one-dimensional, of one extent"),
    ("", '[[properties]]\nkind = "covary_monotonic"\nuf = "colIdx"\norder = "<"\n'
         'with = ["rowPtr"]', "with",
     "property #5 (covary_monotonic): 'with' must name an index array"),
    ("", '[[properties]]\nkind = "covary_monotonic"\nuf = "colIdx"\norder = "<"\n'
         'with = "rowPtr"', "with",
     "property #5 (covary_monotonic): 'with' must name an index array of the extent of "
     "'colIdx'"),
])
def test_malformed_property(tmp_path, old, new, key, message):
    """A number or a list where a name was expected raised TypeError; min = [0] and gap = 1.5
    were parsed as text at line 1; a call in min was accepted; arrays of other extents in one
    injective tuple (or as 'with') failed in numpy when a tensor was built."""
    text = CSR_TEXT.replace(old, new, 1) if old else f"{CSR_TEXT}\n{new}\n"
    path = tmp_path / "Prop.toml"
    path.write_text(text)
    keys = [ln.split(" =")[0] for ln in new.splitlines()]
    line = text[:text.index(new)].count("\n") + 1 + keys.index(key)
    column = len(f"{key} = ") + 1        # the offending value
    assert spec_error(lambda: spf.load_layout(str(path))) == f"{path}:{line}:{column}: {message}"


def test_injective_property_of_a_two_dimensional_array(tmp_path):
    """ELL's colIdx(pi, pk) declared injective reached Z3 as a one-argument function
    (Z3Exception 'index out of bounds' during find synthesis)."""
    text = LAYOUTS["ELL"].replace("packer = ", "# packer = ")
    path = tmp_path / "E.toml"
    path.write_text(f'{text}\n[[properties]]\nkind = "injective"\nuf = "colIdx"\n')
    line = len(text.splitlines()) + 4
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:{line}:6: property #2 (injective): the index arrays must be one-dimensional, "
        "of one extent")


def deep(what: str, n: int) -> str:
    """SV's relation with an ``n`` levels deep bound or coordinate."""
    if what == "calls":
        return SV_TEXT.replace("i = idx(p)", "i = " + "idx(" * n + "p" + ")" * n)
    bound = {"parens": "(" * n + "len" + ")" * n, "minus": "-" * (n + 1) + "len"}[what]
    return SV_TEXT.replace("0 <= p < len", f"0 <= p < {bound}")


@pytest.mark.parametrize("what, token, before", [("parens", "(", 33), ("minus", "-", 34),
                                                 ("calls", "idx(", 33)])
def test_deeply_nested_expression(tmp_path, what, token, before):
    """2000 levels raised RecursionError; 32 still load.  The error is at the token after
    the 33rd level (the first minus is not nested)."""
    path = tmp_path / "Deep.toml"
    path.write_text(deep(what, 32))
    spf.load_layout(str(path))
    path = tmp_path / "Deeper.toml"
    text = deep(what, 2000)
    path.write_text(text)
    column = text.splitlines()[2].index(token * 2) + len(token) * before + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:3:{column}: expression nested more than 32 levels deep")


def python_calls(work: Callable[[], Any]) -> int:
    """The Python function calls ``work()`` makes: a measure of its work that does not depend
    on the machine's speed or load."""
    count = 0

    def profile(frame, event: str, arg) -> None:
        nonlocal count
        count += event == "call"

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def test_nested_calls_scan_in_polynomial_time(tmp_path):
    """The scanner collected the variables of nested calls once per path through them:
    2**n steps, minutes for 24 levels.  From 8 to 16 levels, the work grew 33-fold then and
    grows 3-fold now; more than cubic growth (8-fold) fails."""
    def calls(depth: int) -> int:
        path = tmp_path / f"Nested{depth}.toml"
        path.write_text(deep("calls", depth))
        return python_calls(lambda: spf.Kernel("v = a(i) * b(i)", {"a": str(path)}).c_source())

    calls(2)            # what spf builds once per process is built outside the count
    assert calls(16) < 8 * calls(8)


def test_long_index_expression(tmp_path):
    """A value subscript of 3000 terms raised RecursionError wherever it was walked."""
    text = CSR_TEXT.replace('value = "data[pj]"', f'value = "data[pj{" + 0" * 3000}]"')
    path = tmp_path / "Long.toml"
    path.write_text(text)
    column = text.splitlines()[3].index("+ 0") + 256 * len("+ 0 ") + 1     # the 257th '+'
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:4:{column}: more than 256 operators in one index expression")


def test_deeply_nested_toml(tmp_path):
    """tomllib raised RecursionError."""
    path = tmp_path / "Arrays.toml"
    path.write_text(f"{CSR_TEXT}\nextra = {'[' * 2000}{']' * 2000}\n")
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}: invalid TOML: arrays or inline tables nested too deeply")


def test_name_too_long_for_the_file_system(tmp_path):
    """A packer or layout name longer than the system allows raised OSError (ENAMETOOLONG)
    from Path.is_file."""
    long = "x" * 5000
    path = tmp_path / "P.toml"
    path.write_text(f'packer = "{long}.py"\n{CSR_TEXT}')
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:1:10: packer file '{long}.py' not found next to the layout file")
    assert "unknown layout 'xxxx" in spec_error(lambda: spf.load_layout(long))
    assert spec_error(lambda: spf.load_layout(f"{long}.toml")) == (
        f"{long}.toml: layout file not found: {long}.toml")


DENSE_TEXT = LAYOUTS["DenseVector"].replace("packer = ", "# packer = ")


@pytest.mark.parametrize("old, new", [("double[n0]", "double[n0 / 0]"),
                                      ("data[p0]", "data[p0 / 0]")])
def test_division_by_zero_in_an_index_expression(tmp_path, old, new):
    """An extent n0 / 0 loaded, and building a tensor raised ZeroDivisionError."""
    text = DENSE_TEXT.replace(old, new)
    path = tmp_path / "Div.toml"
    path.write_text(text)
    line, = (n for n, ln in enumerate(text.splitlines(), 1) if new in ln)
    column = text.splitlines()[line - 1].index("/ 0") + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:{line}:{column}: division by zero")


def test_division_by_a_zero_field(tmp_path):
    """A divisor that is zero for the data is the data's fault: ArgumentError."""
    path = tmp_path / "Div.toml"
    path.write_text(DENSE_TEXT.replace("double[n0]", "double[n0 / n0 * n0]"))
    with pytest.raises(spf.ArgumentError, match=r"cannot size 'data': division by zero in "
                                                r"\(n0 / n0\)"):
        spf.Tensor.from_arrays(spf.load_layout(str(path)), (0,), {"n0": 0, "data": []})


@pytest.mark.parametrize("old, new", [("0 <= p < len", "0 <= p < 99999999999999999999"),
                                      ('max = "size - 1"', 'max = "size - 99999999999999999999"'),
                                      ("double[len]", "double[len + 99999999999999999999]")])
def test_integer_beyond_64_bits(tmp_path, old, new):
    """It reached the C code as a literal no C integer type holds (a warning, and truncated
    bounds)."""
    text = SV_TEXT.replace(old, new)
    path = tmp_path / "Big.toml"
    path.write_text(text)
    line, = (n for n, ln in enumerate(text.splitlines(), 1) if "99999" in ln)
    column = text.splitlines()[line - 1].index("99999") + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:{line}:{column}: integer 99999999999999999999 does not fit in 64 bits")


def test_parameter_default_beyond_64_bits(tmp_path):
    text = LAYOUTS["BCSR"].replace("packer = ", "# packer = ").replace("B = 8", f"B = {2**64}")
    path = tmp_path / "Big.toml"
    path.write_text(text)
    line = text.splitlines().index(f"B = {2**64}") + 1
    assert spec_error(lambda: spf.load_layout(str(path))) == (
        f"{path}:{line}:5: parameter 'B' must have an integer default that fits in 64 bits")
