"""One options schema: every option of spf.KernelOptions is accepted by spf.Kernel's keywords, a
kernel file, spf.evaluate and the spf command with the same meaning (the same checked options
and the same C), and the documentation's table (docs/kernels.md) is the schema's."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import spf
from spf import cli, evaluation
from spf.cli.kernel_options import build_kernel
from spf.decide.options import NAMES, OPTIONS, cli_args, markdown_table, option, toml_text

ROOT = Path(__file__).resolve().parent.parent
SPMV = ("y(i) = A(i,j) * x(j)", {"A": "CSR"})
SPGEMM = ("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR"})
MASKED = ("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR", "M": "CSR"})
PATTERN = ("C(i,j) = A(i,k) * B(k,j)", {"A": "CSR", "B": "CSR", "C": "CSR_pattern"})

# per option: the kernel it is tried on, its value there, and options it needs besides
CASES = {
    "name": (SPMV, "my_spmv", {}),
    "order": (SPMV, ("A.pi", "A.pj"), {}),
    "find": (("v = a(i) * b(i)", {"a": "SV", "b": "SV"}), "binsearch", {}),
    "parallel": (SPMV, True, {}),
    "bounds": (SPMV, "j <= i", {}),
    "tile": (SPMV, {"A.pi": 8}, {}),
    "share": (("C(i,j) = A(i,j) * B(i,j)", {"A": "CSR", "C": "CSR"}), {"C": "A"}, {}),
    "drop_zeros": (SPGEMM, True, {}),
    "structure": (PATTERN, True, {}),
    "reassociate": (SPMV, True, {}),
    "unroll": (SPMV, 3, {}),
    "index_type": (SPMV, "int64", {}),
    "z3_timeout_ms": (SPMV, 5000, {}),
    "dtype": (SPMV, "float32", {}),
    "accumulate": (SPMV, "float64", {"dtype": "float32"}),
    "semiring": (SPMV, "min_plus", {}),
    "mask": (MASKED, {"C": "M"}, {}),
    "complement": (MASKED, True, {"mask": {"C": "M"}}),
    "fill_values": (SPMV, True, {"semiring": "max_plus"}),
}


def test_every_option_has_a_case():
    assert set(CASES) == set(NAMES)


def _operands(kernel: spf.Kernel, layouts: dict, index_type: str | None,
              dtype: str = "float64") -> dict:
    """Random operands of the kernel's inputs (its mask too) in their layouts (dense ones
    as numpy), of ``dtype``."""
    rng = np.random.default_rng(0)
    orders = {a.tensor: len(a.indices) for a in kernel.expr.factors}
    if kernel.mask:
        orders[kernel.mask] = len(kernel.expr.output.indices)
    out = {}
    for name, order in orders.items():
        dense = (rng.random((4,) * order) * (rng.random((4,) * order) < .5)).astype(dtype)
        lay = layouts.get(name)
        out[name] = dense if lay is None else \
            spf.Tensor.from_dense(lay, dense, index_type=index_type)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_option_means_the_same_at_every_entry_point(name, tmp_path, capsys):
    (expr, layouts), value, needs = CASES[name]
    given = {**needs, name: value}
    python = spf.Kernel(expr, layouts, **given)
    source = python.c_source()

    # a kernel file
    path = tmp_path / "k.toml"
    lines = [f'expr = "{expr}"'] + [toml_text(option(n), v) for n, v in given.items()]
    path.write_text("\n".join(lines + ["[layouts]"] + [f'{t} = "{lay}"'
                                                        for t, lay in layouts.items()]) + "\n")
    from_file = spf.Kernel(str(path))
    assert from_file.options == python.options and from_file.c_source() == source

    # the command line: the kernel it builds, and the C `spf generate` prints
    args = ["generate", expr] + [a for t, lay in layouts.items() for a in ("-l", f"{t}={lay}")]
    args += [a for n, v in given.items() for a in cli_args(option(n), v)]
    parsed = cli.make_parser().parse_args(args)
    assert build_kernel(parsed, parsed.subparser).options == python.options
    assert cli.main(args) == 0
    assert capsys.readouterr().out == source

    # spf.evaluate: the kernel it builds and keeps
    evaluation.clear_cache()
    operands = _operands(python, layouts, given.get("index_type"),
                         given.get("dtype", "float64"))
    spf.evaluate(expr, layouts=layouts, **operands, **given)
    (compiled,) = evaluation._kernels.values()
    assert compiled.kernel.options == python.options
    assert compiled.kernel.c_source() == source


def test_options_object_and_keywords():
    opts = spf.KernelOptions(parallel=True, tile={"A.pi": 8})
    k = spf.Kernel(*SPMV, options=opts, name="mine")
    assert (k.options.parallel, dict(k.options.tile), k.options.name) == (True, {"A.pi": 8}, "mine")
    with pytest.raises(spf.SpecError, match=r"options must be an spf.KernelOptions, got dict"):
        spf.Kernel(*SPMV, options={"parallel": True})


@pytest.mark.parametrize("make, message", [
    (lambda: spf.Kernel(*SPMV, paralel=True),
     "<string>: unknown option 'paralel' (did you mean 'parallel'?); the options are name, "
     "order, find, parallel, bounds, tile, share, drop_zeros, structure, reassociate, unroll, "
     "index_type, z3_timeout_ms, dtype, accumulate, semiring, mask, complement, fill_values"),
    (lambda: spf.Kernel(*SPMV, tile={"A.pi": 0}),
     "<string>: tile size of 'A.pi' must be a positive integer, got 0"),
    (lambda: spf.KernelOptions(share={"C": "A", "D": "B"}),
     "<string>: share must map the output to one tensor, such as {'C': 'A'}, got "
     "{'C': 'A', 'D': 'B'}"),
    (lambda: spf.KernelOptions(index_type="int16"),
     "<string>: index_type must be one of 'int32', 'int64', got 'int16'"),
    (lambda: spf.evaluate(SPMV[0], A=np.eye(2), x=np.ones(2), reassociate="yes"),
     "<string>: reassociate must be True or False, got 'yes'"),
])
def test_bad_options(make, message):
    with pytest.raises(spf.SpecError) as err:
        make()
    assert str(err.value) == message


def test_bad_option_in_a_kernel_file_points_at_its_value(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\n  drop_zeros = "yes"\n[layouts]\nA = "CSR"\n')
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel(str(path))
    assert str(err.value) == f"{path}:2:16: drop_zeros must be True or False, got 'yes'"


def test_evaluate_takes_every_option():
    """reassociate was refused by evaluate before the schema."""
    A = spf.Tensor.from_dense("CSR", np.arange(12.0).reshape(3, 4))
    y = spf.evaluate(SPMV[0], A=A, x=np.ones(4), reassociate=True)
    np.testing.assert_allclose(y, np.arange(12.0).reshape(3, 4).sum(axis=1))


def test_kernel_signature_and_docstring_list_every_option():
    import inspect
    params = inspect.signature(spf.Kernel).parameters
    assert [p for p in params if p in NAMES] == list(NAMES)
    assert all(f"``{o.name}``" in spf.Kernel.__doc__ for o in OPTIONS)


def test_cli_help_lists_every_option(capsys):
    with pytest.raises(SystemExit):
        cli.main(["generate", "--help"])
    text = capsys.readouterr().out
    assert all(o.flag in text for o in OPTIONS)


def test_docs_table_is_the_schema():
    text = (ROOT / "docs" / "kernels.md").read_text()
    table = re.search(r"<!-- options table: start -->\n(.*?)\n<!-- options table: end -->",
                      text, re.S)
    assert table and table.group(1) == markdown_table()


@pytest.mark.parametrize("text, message", [
    ('expr = "y(i) = A(i,j) * x(j)"\nfind = {Q = "hashmap"}\n[layouts]\nA = "CSR"\n',
     "2:8: find names 'Q', which is not a tensor of the kernel"),
    ('expr = "y(i) = A(i,j) * x(j)"\nshare = {y = "B"}\n[layouts]\nA = "CSR"\n',
     "2:9: share: 'B' is not an input tensor of the kernel"),
    ('expr = "y(i) = A(i,j) * x(j)"\n[layouts]\nA = "CSR"\n  B = "CSR"\n',
     "4:3: layout given for 'B', which is not a tensor of 'y(i) = A(i,j) * x(j)'"),
    ('expr = "y(i) = A(i,j) * x(j)"\n[layouts]\nA = "CSRR"\n',
     "3:1: the layout of 'A': CSRR: unknown layout 'CSRR'; known layouts: "),
])
def test_kernel_file_errors_found_against_the_statement_are_located(tmp_path, text, message):
    """Options and layouts a kernel file names are checked against its statement after
    parsing; the errors still point into the file."""
    path = tmp_path / "k.toml"
    path.write_text(text)
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel(str(path))
    assert str(err.value).startswith(f"{path}:{message}")


def test_a_mistake_made_in_the_call_is_not_located_in_the_file(tmp_path):
    path = tmp_path / "k.toml"
    path.write_text('expr = "y(i) = A(i,j) * x(j)"\nfind = "auto"\n[layouts]\nA = "CSR"\n')
    with pytest.raises(spf.SpecError) as err:
        spf.Kernel(str(path), find={"Q": "loop"})
    assert str(err.value) == f"{path}: find names 'Q', which is not a tensor of the kernel"


def test_a_sum_gives_its_terms_every_option_it_does_not_name():
    """A split statement's terms each take the statement's options, except those the sum
    kernel names: set per term, applied once to the statement, or refused (re-listing the
    options by hand for each term let a new one skip the terms silently).  Each carried
    option is tried with its case's value: a new option must reach the terms or be named."""
    from dataclasses import fields

    from spf import sum_kernel
    from spf.decide.options import KernelOptions
    per_term = {"order", "find", "bounds", "name", "index_type", "dtype"}
    named = per_term | set(sum_kernel.STATEMENT_ONLY) | set(sum_kernel.UNSUPPORTED)
    assert named <= {f.name for f in fields(KernelOptions)}
    carried = [n for n in NAMES if n not in named]
    assert carried
    for name in carried:
        _, value, extra = CASES[name]
        if name == "structure":     # a dense y stores values: refused for the whole sum
            with pytest.raises(spf.SpecError, match="drop structure=True"):
                spf.Kernel("y(i) = A(i,j) * x(j) + A(i,j) * z(j)", {"A": "CSR"},
                           structure=True)
            continue
        k = spf.Kernel("y(i) = A(i,j) * x(j) + A(i,j) * z(j)", {"A": "CSR"},
                       **{name: value, **extra})
        statement = k._body.setup.options
        assert len(k._body.terms) == 2
        for term in k._body.terms:
            assert getattr(term.setup.options, name) == getattr(statement, name), name
    for name in sum_kernel.UNSUPPORTED:
        _, value, extra = CASES[name]
        with pytest.raises(spf.SpecError, match=f"{name} is not supported for sums"):
            spf.Kernel("C(i,j) = A(i,j) * B(i,j) + A(i,j)",
                       {"A": "CSR", "B": "CSR", "C": "CSR"}, **{name: value, **extra})
