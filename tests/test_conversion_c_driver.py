"""The C of a conversion called from a C driver, without Python in between (issue 53: "the C
of each conversion compiled and called from a small C driver in a test").

For each pair, the test writes one C program: the conversion's ``c_source()`` plus a ``main``
holding a few source tensors as static arrays (packed from scipy matrices or numpy arrays:
empty rows, one entry, rectangular, empty) that converts the one named on its command line
and prints every field of the destination.  It is compiled once per pair with ``cc -O1 -Wall
-Wextra -Werror`` and run once per tensor; the printed fields are compared with scipy's
(numpy's for order 3) matrix, and field by field with ``spf.convert`` (the same C through
ctypes).

Every conversion's file follows one calling convention, whichever way its destination is
built (assembled level by level by :mod:`spf.assembly`, or written by its relation,
:mod:`spf.store`): ``int <name>(B *, int64_t *spf_err, int64_t *spf_sizes, int64_t
spf_max_bytes, const A *)`` sizes, allocates (``malloc``) and sets every field of B; the driver
takes nothing from Python (no sizes, no zeroing, no count fields): it calls ``<name>``, prints
every field of B (each array's length from its struct comment, over B's own fields) and frees
each array.  A refusal (a status) is printed as ``status <s> refusal <k>`` (``k``: its number
in the file's header).
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf
from spf.back.status import Status
from spf.runtime.memory import allocation_limit

NAME = "spf_convert"


def _matrices() -> dict[str, sp.csr_matrix]:
    """Small matrices: empty rows (first and last), one entry, rectangular both ways, empty."""
    rng = np.random.default_rng(53)
    d = np.round(rng.random((7, 10)) * (rng.random((7, 10)) < 0.4), 3)
    d[[0, 3, 6]] = 0.0
    return {"empty_rows": sp.csr_matrix(d), "tall": sp.csr_matrix(d.T),
            "one": sp.csr_matrix(([2.5], ([2], [4])), shape=(3, 5)),
            "empty": sp.csr_matrix((4, 6))}


def _vectors() -> dict[str, np.ndarray]:
    return {"some": np.array([0.0, 1.5, 0.0, 0.0, -2.0, 3.25, 0.0]),
            "one": np.array([0.0, 0.0, 4.0]), "empty": np.zeros(5)}


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    t = np.round(rng.random((3, 4, 5)) * (rng.random((3, 4, 5)) < 0.3), 3)
    t[1] = 0.0                                          # an empty slice
    one = np.zeros((2, 3, 2))
    one[1, 2, 0] = 7.0
    return {"some": t, "one": one, "empty": np.zeros((2, 2, 3))}


MATRICES, VECTORS, TENSORS = _matrices(), _vectors(), _tensors()
# (source, destination): destinations assembled level by level (spf.assembly), from sources of
# every kind of level
PAIRS = [("CSR", "CSC"), ("CSR", "COO"), ("CSR", "DCSR"), ("CSR", "SortedCOO"),
         ("CSR", "CSR_unsorted"), ("CSR", "CSR_lengths"), ("CSC", "CSR"), ("COO", "CSR"),
         ("DCSR", "CSC"), ("SV", "SV_decreasing"), ("COOTensor", "CSF"),
         # destinations written by their relations (spf.store): one function allocating B
         ("CSR", "SELL_sigma"), ("CSR", "ELLPACK_R"), ("CSR", "CSR4"), ("CSR", "JDS"),
         ("CSR", "DIA"), ("CSR", "ELL"), ("COO", "BCSR"), ("CSR", "BlockedELL"),
         ("CSC", "CSB"), ("CSR", "SELL"), ("COOTensor", "CSRSlices"), ("COOTensor", "HiCOO"),
         ("CSC", "CSRDict"),
         # dense destinations: B's extents set and its array allocated by the same entry
         ("CSR", "DenseMatrix"), ("SV", "DenseVector"), ("COOTensor", "DenseTensor3")]
PARAMS = {"BCSR": {"B": 2}, "BlockedELL": {"B": 2}, "CSB": {"B": 2}}
FAST = {("CSR", "CSC"), ("CSR", "DCSR"), ("COO", "CSR"), ("CSR", "CSR_lengths"),
        ("CSR", "SELL_sigma"), ("CSR", "DIA"), ("CSC", "CSB"), ("CSR", "DenseMatrix")}


def _inputs(order: int) -> dict[str, np.ndarray]:
    if order == 1:
        return VECTORS
    if order == 3:
        return TENSORS
    return {k: m.toarray() for k, m in MATRICES.items()}


def _source(layout: str, dense: np.ndarray) -> spf.Tensor:
    if dense.ndim == 2:
        return spf.Tensor.from_scipy(layout, sp.csr_matrix(dense))
    return spf.Tensor.from_dense(layout, dense)


# -- reading the generated file --------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    name: str
    ctype: str                  # its element type (spf_index_t, int64_t, double, ...)
    dims: str | None            # an array's length as its struct comment gives it


def _struct(code: str, type_name: str) -> list[Field]:
    """The fields of struct ``type_name`` in the generated file."""
    t = re.escape(type_name)
    body = re.search(rf"typedef struct {t} \{{\n(.*?)\n\}} {t};", code, re.S)
    assert body, f"no struct {type_name} in the generated file"
    out = []
    for line in body.group(1).splitlines():
        m = re.match(r"\s*(?:const )?([\w ]+?)\s*(\*restrict )?(\w+);(?:\s*/\* \[(.*)\] \*/)?",
                     line)
        assert m, line
        assert bool(m.group(2)) == bool(m.group(4)), f"an array without its length: {line}"
        out.append(Field(m.group(3), m.group(1), m.group(4)))
    return out


def _signature(code: str) -> tuple[str, str]:
    """(destination struct, source struct) from ``<name>``'s signature."""
    m = re.search(rf"int {NAME}\((\w+) \*restrict B, int64_t \*restrict spf_err, "
                  r"int64_t \*restrict spf_sizes, int64_t spf_max_bytes, "
                  r"const (\w+) \*restrict A\)", code)
    assert m, f"no {NAME} of the conversions' calling convention in:\n{code}"
    return m.group(1), m.group(2)


def _c_length(dims: str, scalars: set[str]) -> str:
    """C for an array length from its struct comment (``(numRows + 1)``, ``rowPtr(numRows)``,
    ``ptr2(ptr1(n0))``, ``numRows][width``: the product) over ``B``'s fields."""
    def c(node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            return str(node.value)
        if isinstance(node, ast.Name) and node.id in scalars:
            return f"(int64_t)B.{node.id}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return f"(int64_t)B.{node.func.id}[{c(node.args[0])}]"
        if isinstance(node, ast.BinOp):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(node.op)]
            return f"({c(node.left)} {op} {c(node.right)})"
        raise AssertionError(f"unexpected array length {dims!r}")
    return " * ".join(f"({c(ast.parse(d, mode='eval').body)})" for d in dims.split("]["))


# -- the driver ------------------------------------------------------------------------------
def _c_array(ctype: str, name: str, values: np.ndarray) -> str:
    items = [repr(float(v)) for v in values] if ctype in ("double", "float") \
        else [str(int(v)) for v in values]
    return f"static {ctype} {name}[{max(len(items), 1)}] = {{{', '.join(items) or '0'}}};"


def _case(k: int, tensor: spf.Tensor, src: list[Field], src_type: str) -> tuple[list[str], str]:
    """Static arrays of case ``k`` (its fields) and the C converting it."""
    arrays, inits = [], []
    for f in src:
        value = tensor.fields[f.name]
        if f.dims is None:
            inits.append(f"A.{f.name} = {int(value)};")
        else:
            arrays.append(_c_array(f.ctype, f"c{k}_{f.name}", np.asarray(value).ravel()))
            inits.append(f"A.{f.name} = c{k}_{f.name};")
    return arrays, f"    case {k}: {{\n        {src_type} A = {{0}};\n        " \
        + "\n        ".join(inits) + "\n        return run(&A);\n    }"


def driver(code: str, tensors: list[spf.Tensor]) -> str:
    """A C program: the conversion ``code``, then ``main(argc, argv)`` converting the source
    ``tensors[int(argv[1])]`` and printing every field of B, one line each (``name v ...``)."""
    dst_type, src_type = _signature(code)
    src, dst = _struct(code, src_type), _struct(code, dst_type)
    scalars = {f.name for f in dst if f.dims is None}
    lines = [f"    {dst_type} B = {{0}};",
             "    int64_t spf_err[64], spf_sizes[64];",
             f"    const int spf_status = {NAME}(&B, spf_err, spf_sizes, 0, A);",
             "    if (spf_status) {",
             '        printf("status %d refusal %lld\\n", spf_status, (long long)spf_err[0]);',
             "        return 0;", "    }"]
    for f in dst:
        if f.dims is None:
            lines.append(f'    printf("{f.name} %lld\\n", (long long)B.{f.name});')
            continue
        fmt, cast = ("%.17g", "(double)") if f.ctype in ("double", "float") \
            else ("%lld", "(long long)")
        n = _c_length(f.dims, scalars)
        lines.append(f'    printf("{f.name}");\n    for (int64_t q = 0; q < {n}; ++q)\n'
                     f'        printf(" {fmt}", {cast}B.{f.name}[q]);\n    printf("\\n");')
    lines += [f"    free(B.{f.name});" for f in dst if f.dims is not None]
    arrays, cases = [], []
    for k, t in enumerate(tensors):
        a, case = _case(k, t, src, src_type)
        arrays += a
        cases.append(case)
    return "\n".join([
        '#include "conversion.c"', "#include <stdio.h>", "", *arrays, "",
        f"static int run(const {src_type} *A)", "{", *lines, "    return 0;", "}", "",
        "int main(int argc, char **argv)", "{", "    if (argc != 2)", "        return 3;",
        "    switch (atoi(argv[1])) {", *cases, "    }", "    return 3;", "}", ""])


# -- the tests -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """(source, destination) -> its compiled driver, built on first use (one compile each)."""
    return {"folder": tmp_path_factory.mktemp("c_driver")}       # type: ignore[dict-item]


def _program(programs: dict, src: str, dst: str) -> tuple[Path, spf.Conversion, list[str]]:
    key = (src, dst)
    if key not in programs:
        conv = spf.Conversion(src, dst, name=NAME, allow_padding=True, **PARAMS.get(dst, {}))
        cases = _inputs(conv.src.order)
        tensors = [_source(src, d) for d in cases.values()]
        folder = programs["folder"] / f"{src}_{dst}"
        folder.mkdir()
        (folder / "conversion.c").write_text(conv.c_source())
        (folder / "main.c").write_text(driver(conv.c_source(), tensors))
        proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra",
                               "-Werror", "main.c", "-o", "main"], cwd=folder,
                              capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), \
            f"{proc.stderr}\n--- main.c ---\n{(folder / 'main.c').read_text()}"
        programs[key] = (folder / "main", conv, list(cases))
    return programs[key]


def _printed(stdout: str, layout: spf.Layout) -> dict[str, object]:
    """The fields the driver printed, as numpy arrays of the layout's types."""
    out: dict[str, object] = {}
    for line in stdout.splitlines():
        name, *values = line.split(" ")
        if not layout.fields[name].dims:        # a scalar field
            out[name] = int(values[0])
        elif name == layout.value.array:
            out[name] = np.array(values, dtype=layout.value_type.dtype)
        else:
            out[name] = np.array(values, dtype=np.int64).astype(layout.dtype_of(name))
    return out


@pytest.mark.parametrize("src,dst", [pytest.param(*p, id=f"{p[0]}-{p[1]}",
                                                  marks=() if p in FAST else pytest.mark.slow)
                                     for p in PAIRS])
def test_c_driver_converts(programs, src, dst):
    """Each source tensor converted by the C alone: the printed fields are a valid tensor in
    ``dst`` (built with every check) holding the source's matrix, and equal, field by field,
    those of the same conversion run through ctypes."""
    exe, conv, names = _program(programs, src, dst)
    for k, case in enumerate(names):
        dense = _inputs(conv.src.order)[case]
        proc = subprocess.run([str(exe), str(k)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{case}: exit {proc.returncode}\n{proc.stderr}"
        fields = _printed(proc.stdout, conv.dst)
        assert set(fields) == set(conv.dst.fields), (case, sorted(fields))
        got = spf.Tensor.from_arrays(conv.dst, dense.shape, fields)
        if dense.ndim == 2:
            np.testing.assert_array_equal(got.to_scipy().toarray(), sp.csr_matrix(dense).toarray(),
                                          err_msg=case)
        np.testing.assert_array_equal(got.to_dense(), dense, err_msg=case)
        want = _source(src, dense).convert(dst, allow_padding=True, **PARAMS.get(dst, {}))
        for name, value in want.fields.items():
            np.testing.assert_array_equal(np.asarray(fields[name]), np.asarray(value),
                                          err_msg=f"{case}: field {name}")


def test_a_refusal_comes_back_from_the_c(programs):
    """An entry the destination cannot hold: the C alone returns SPF_REFUSED with the
    refusal's number, which the file's header lists; through Python it names the entry."""
    conv = spf.Conversion("CSR", "LowerTri", name=NAME)
    upper = np.array([[1.0, 2.0], [0.0, 3.0]])
    folder = programs["folder"] / "refusal"
    folder.mkdir()
    (folder / "conversion.c").write_text(conv.c_source())
    (folder / "main.c").write_text(driver(conv.c_source(), [_source("CSR", upper)]))
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror", "main.c",
                    "-o", "main"], cwd=folder, check=True, capture_output=True, text=True)
    out = subprocess.run([str(folder / "main"), "0"], capture_output=True, text=True).stdout
    status, refusal = re.fullmatch(r"status (\d+) refusal (\d+)\n", out).groups()
    assert int(status) == Status.REFUSED
    header = conv.c_source().split("*/")[0]
    assert f"{refusal}: entry {{at}} cannot be stored in LowerTri: its relation requires " \
        "gj <= gi" in header
    with pytest.raises(spf.ArgumentError, match=r"entry \(0, 1\) cannot be stored in LowerTri"):
        conv.compile()(_source("CSR", upper))


@pytest.mark.parametrize("fill", [7.0, -np.inf])
def test_a_dense_destination_gets_the_fill_from_the_c(programs, fill):
    """``<name>_with_fill`` of a dense destination, called from C with a source holding
    ``fill`` where it has no entry: every element no entry reaches holds it, those with an
    entry their value (an explicit 0 included), as ``Tensor.to_dense`` gives them."""
    conv = spf.Conversion("CSR", "DenseMatrix", name=NAME)
    cases = [MATRICES["empty_rows"], MATRICES["one"], MATRICES["empty"],
             sp.csr_matrix(([0.0, 2.0], ([0, 1], [1, 0])), shape=(2, 3))]   # a stored 0
    tensors = [spf.Tensor.from_scipy("CSR", m) for m in cases]
    folder = programs["folder"] / f"fill_{abs(fill)}"
    folder.mkdir()
    (folder / "conversion.c").write_text(conv.c_source())
    main = driver(conv.c_source(), tensors).replace(
        f"{NAME}(&B, spf_err, spf_sizes, 0, A)", f"{NAME}_with_fill(&B, spf_err, spf_sizes, 0, "
        f"A, &spf_given_fill)").replace("static int run(", f"static const double spf_given_fill "
                                        f"= {'-INFINITY' if fill < 0 else fill};\nstatic int run(")
    (folder / "main.c").write_text("#include <math.h>\n" + main)
    subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror", "main.c",
                    "-o", "main"], cwd=folder, check=True, capture_output=True, text=True)
    for k, (m, tensor) in enumerate(zip(cases, tensors)):
        out = subprocess.run([str(folder / "main"), str(k)], capture_output=True, text=True)
        fields = _printed(out.stdout, conv.dst)
        want = tensor.with_fill(fill).to_dense()
        np.testing.assert_array_equal(np.asarray(fields["data"]).reshape(m.shape), want)
        got = tensor.with_fill(fill).convert("DenseMatrix")
        assert got.fill == fill
        np.testing.assert_array_equal(got.to_dense(), want)


# -- a kernel's assembled output, by its C alone ----------------------------------------------
KERNELS = {   # expression, layouts, operand pairs (in MATRICES; "T", "ET": one's, empty's .T)
    "add": ("C(i,j) = A(i,j) + B(i,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
            [("empty_rows", "empty_rows"), ("one", "one"), ("empty", "empty")]),
    "spgemm": ("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"},
               [("empty_rows", "tall"), ("tall", "empty_rows"), ("one", "T")]),
    "spgemm_coo": ("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "COO"},
                   [("empty_rows", "tall"), ("empty", "ET")]),
}


def kernel_driver(code: str, name: str, cases: list[dict[str, spf.Tensor]]) -> str:
    """A C program: the kernel's file, then ``main`` calling ``<name>_new`` on the operands of
    case ``argv[1]`` (static arrays) and printing every field of the output."""
    m = re.search(rf"int {name}_new\((\w+) \*restrict (\w+), int64_t \*restrict spf_err, "
                  r"int64_t \*restrict spf_sizes, int64_t spf_max_bytes, (.*)\)", code)
    assert m, f"no {name}_new in:\n{code}"
    out_type, params = m.group(1), m.group(3).split(", ")
    inputs = [re.fullmatch(r"const (\w+) \*restrict (\w+)", p).groups() for p in params]
    dst = _struct(code, out_type)
    scalars = {f.name for f in dst if f.dims is None}
    lines = ["    const int spf_status = "
             f"{name}_new(&spf_out, spf_err, NULL, 0, {', '.join(f'&{n}' for _, n in inputs)});",
             "    if (spf_status) {",
             '        printf("status %d refusal %lld\\n", spf_status, (long long)spf_err[0]);',
             "        return 0;", "    }"]
    for f in dst:
        if f.dims is None:
            lines.append(f'    printf("{f.name} %lld\\n", (long long)spf_out.{f.name});')
            continue
        fmt, cast = ("%.17g", "(double)") if f.ctype in ("double", "float") \
            else ("%lld", "(long long)")
        length = _c_length(f.dims, scalars).replace("B.", "spf_out.")
        lines.append(f'    printf("{f.name}");\n    for (int64_t q = 0; q < {length}; ++q)\n'
                     f'        printf(" {fmt}", {cast}spf_out.{f.name}[q]);\n    printf("\\n");')
    arrays, body = [], []
    for k, case in enumerate(cases):
        inits = []
        for struct, n in inputs:
            for f in _struct(code, struct):
                value = case[n].fields[f.name]
                if f.dims is None:
                    inits.append(f"{n}.{f.name} = {int(value)};")
                else:
                    arrays.append(_c_array(f.ctype, f"c{k}_{n}_{f.name}",
                                           np.asarray(value).ravel()))
                    inits.append(f"{n}.{f.name} = c{k}_{n}_{f.name};")
        body.append(f"    if (k == {k}) {{\n        " + "\n        ".join(inits) + "\n    }")
    decls = [f"    {s} {n} = {{0}};" for s, n in inputs]
    return "\n".join([
        '#include "kernel.c"', "#include <stdio.h>", "", *arrays, "",
        "int main(int argc, char **argv)", "{", "    if (argc != 2)", "        return 3;",
        "    const int k = atoi(argv[1]);", *decls, *body,
        f"    {out_type} spf_out = {{0}};", "    int64_t spf_err[64];", *lines,
        *(f"    free(spf_out.{f.name});" for f in dst if f.dims is not None),
        "    return 0;", "}", ""])


@pytest.mark.parametrize("which", sorted(KERNELS))
def test_a_kernel_output_is_assembled_by_its_c_alone(tmp_path, which):
    """A kernel whose sparse output is assembled: its ``c_source()`` holds ``<name>_new``,
    which sizes, allocates, fills and trims the output from the operands alone; a C driver
    calls it and prints the output, compared with scipy and field by field with the kernel
    called through Python."""
    expr, layouts, pairs = KERNELS[which]
    kernel = spf.Kernel(expr, layouts)
    code = kernel.c_source()
    mats = {**MATRICES, "T": MATRICES["one"].T.tocsr(), "ET": MATRICES["empty"].T.tocsr()}
    cases = [{"A": spf.Tensor.from_scipy("CSR", mats[a]),
              "B": spf.Tensor.from_scipy("CSR", mats[b])} for a, b in pairs]
    (tmp_path / "kernel.c").write_text(code)
    (tmp_path / "main.c").write_text(kernel_driver(code, kernel.name, cases))
    proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror",
                           "main.c", "-o", "main"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    run = kernel.compile()
    out_layout = run.kernel.layouts["C"]
    for k, ((a, b), case) in enumerate(zip(pairs, cases)):
        printed = subprocess.run([str(tmp_path / "main"), str(k)], capture_output=True,
                                 text=True, check=True).stdout
        fields = _printed(printed, out_layout)
        want = (mats[a] + mats[b]) if which == "add" else mats[a] @ mats[b]
        got = spf.Tensor.from_arrays(out_layout, want.shape, fields)
        np.testing.assert_allclose(got.to_dense(), want.toarray(), err_msg=f"{a}, {b}")
        through_python = run(**case)
        for name, value in through_python.fields.items():
            np.testing.assert_array_equal(np.asarray(fields[name]), np.asarray(value),
                                          err_msg=f"{a}, {b}: field {name}")


def test_an_assembled_conversion_is_refused_over_the_byte_limit_by_its_c():
    """Through Python, an assembled destination is built by the same entry point a C caller
    calls: the byte limit is checked there, before it allocates, and named as the written
    destinations' is; within the limit the result is scipy's."""
    m = MATRICES["empty_rows"]
    t = spf.Tensor.from_scipy("CSR", m)
    conv = spf.Conversion("CSR", "CSC").compile()
    with allocation_limit(64, "a test limit"), pytest.raises(
            spf.ArgumentError, match=r"^CSC's arrays would take 0\.000\d+ MB, over the "
                                     r"6\.4e-05 MB allowed \(a test limit\)$"):
        conv(t)
    got = conv(t).to_scipy()
    assert got.format == "csc" and (got != m.tocsc()).nnz == 0


def test_a_dense_conversion_is_refused_over_the_byte_limit_by_its_c():
    """A dense destination is allocated by the conversion's own entry point, as the sparse
    ones are: over the byte limit it is refused before it allocates, naming its array; within
    the limit it holds scipy's matrix."""
    m = MATRICES["empty_rows"]
    conv = spf.Conversion("CSR", "DenseMatrix").compile()
    t = spf.Tensor.from_scipy("CSR", m)
    with allocation_limit(64, "a test limit"), pytest.raises(
            spf.ArgumentError, match=r"^DenseMatrix's data would take 0\.00056 MB, over the "
                                     r"6\.4e-05 MB allowed \(a test limit\)$"):
        conv(t)
    np.testing.assert_array_equal(conv(t).to_dense(), m.toarray())


EVEN_ROWS = """name = "EvenRows"
description = "CSR of the even rows: row pi is logical row 2*pi (the odd rows are empty)."
relation = "{[pi, pj] -> [gi, gj] : 0 <= pi < numRows and rowPtr(pi) <= pj < rowPtr(pi + 1) \
and gi = 2 * pi and gj = colIdx(pj)}"
value = "data[pj]"
shape = ["2 * numRows", "numCols"]

[fields]
numRows = "int"
numCols = "int"
rowPtr = "int[numRows + 1]"
colIdx = "int[rowPtr(numRows)]"
data = "double[rowPtr(numRows)]"
"""


def test_extents_beyond_the_index_type_are_refused_by_the_c(tmp_path):
    """A source whose row extent is twice a field (2^30 rows stored: 2^31 logical rows): the
    destination's int32 fields cannot hold that extent.  Its C entry point refuses before it
    reads the source (the arrays here hold one row), with the refusal its header lists (the
    C alone, from a driver; it used to crash); through Python, the runtime's own words; a
    dense destination likewise."""
    from types import SimpleNamespace
    path = tmp_path / "EvenRows.toml"
    path.write_text(EVEN_ROWS)
    rows = 2 ** 30
    fields = {"numRows": rows, "numCols": 3, "rowPtr": np.array([0, 0], np.int32),
              "colIdx": np.zeros(1, np.int32), "data": np.zeros(1)}
    conv = spf.Conversion(str(path), "CSR", name=NAME)
    code = conv.c_source()
    (tmp_path / "main.c").write_text(driver(code, [SimpleNamespace(fields=fields)]))
    (tmp_path / "conversion.c").write_text(code)
    proc = subprocess.run([os.environ.get("CC", "cc"), "-O1", "-Wall", "-Wextra", "-Werror",
                           "main.c", "-o", "main"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    out = subprocess.run([str(tmp_path / "main"), "0"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    status, refusal = re.fullmatch(r"status (\d+) refusal (\d+)\n", out.stdout).groups()
    assert int(status) == Status.REFUSED
    text = "output 'B': CSR's rowPtr is int32, which cannot hold {x0} (the output's extents " \
        "and positions)"
    assert f" {refusal}: {text}\n" in code.split("#include")[0]     # the file's header
    for dst, name in (("CSR", "rowPtr"), ("DenseMatrix", "n0")):
        run = spf.Conversion(str(path), dst).compile()
        with pytest.raises(spf.ArgumentError, match=rf"^output 'B': {dst}'s {name} is int32, "
                           rf"which cannot hold {2 * rows} \(the output's extents"):
            run(spf.Tensor._built(run.conversion.src, (2 * rows, 3), fields))
