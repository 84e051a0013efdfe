"""The ``spf`` command line: ``spf layouts``, ``generate``, ``analyze``, ``convert``, ``check``,
``cache`` and ``demo``.

User mistakes (any :class:`spf.SpfError`) print ``spf: error: <message>`` on stderr and
exit with status 2; ``spf demo`` exits with status 1 when a result does not match scipy.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .decide.options import OPTIONS, Form, Option
from .errors import SpfError

EXAMPLES = """\
examples:
  spf layouts
  spf generate "y(i) = A(i,j) * x(j)" -l A=CSR -l x=SV
  spf generate "y(i) = A(i,j) * x(j)" -l A=BCSR --param A.B=4 -o spmv_bcsr.c
  spf generate "y(i) = A(i,j) * x(j)" -l A=CSR --bounds "j <= i" --report
  spf generate tests/data/spmv.toml
  spf generate "y(i) = A(i,j) * x(j)" -l A=CSR --parallel --tile A.pi=256
  spf analyze "y(i) = A(i,j) * x(j)" -l A=DCSR --parallel
  spf analyze "v = A(i) * B(i)" -l A=SV -l B=SV --find loop --tile B.p=8 --json
  spf convert COO CSR -o coo_to_csr.c
  spf check CSR matrix.npz
  spf check BCSR matrix.mtx --param B=4
  spf cache info
  spf demo
"""


class _Parser(argparse.ArgumentParser):
    """Usage mistakes print the usage of the command at hand, then ``spf: error: ...`` (as
    every other error does) and exit with status 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"spf: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spf", description="Sparse polyhedral code generator: C for sparse tensor kernels "
        "from layout relations with uninterpreted functions.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"spf {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    lay = sub.add_parser("layouts", help="list the layouts on the search path")
    lay.add_argument("--markdown", action="store_true",
                     help="print a Markdown table (name, relation, fields)")

    gen = sub.add_parser("generate", help="generate C for a kernel",
                         description="Generate C for a kernel given in tensor index notation "
                         "or as a kernel spec file (.toml).")
    _kernel_arguments(gen)
    gen.add_argument("-o", "--output", metavar="FILE", help="write the C to FILE instead of stdout")
    gen.add_argument("--report", action="store_true",
                     help="also print the iteration space, loop order and per-loop decisions")

    ana = sub.add_parser("analyze", help="dependences, parallel loop and tiling of a kernel",
                         description="Print the dependence analysis of a kernel (paper Sec. 5): "
                         "per loop, the carried dependence (an SPF relation) or what disproved "
                         "it, the parallel loop and why, tiles and their tile-skipping guards. "
                         "The kernel is built with the same options as `spf generate`.")
    _kernel_arguments(ana)
    ana.add_argument("--json", action="store_true",
                     help="print the analysis as JSON (format documented in README.md)")

    conv = sub.add_parser("convert", help="generate C converting one layout into another",
                          description="Generate the C of a conversion from layout SRC to layout "
                          "DST, derived from their relations (B(i,j) = A(i,j) with A in SRC and "
                          "B assembled in DST).")
    conv.add_argument("src", metavar="SRC", help="source layout: a name or a .toml path")
    conv.add_argument("dst", metavar="DST", help="destination layout: a name or a .toml path")
    conv.add_argument("-o", "--output", metavar="FILE",
                      help="write the C to FILE instead of stdout")
    _layout_param_argument(conv, " (repeatable; goes to the layouts that declare it)")
    zeros = conv.add_mutually_exclusive_group()
    zeros.add_argument("--keep-zeros", action="store_true",
                       help="store entries whose value is 0.0, padding of a dense source too")
    zeros.add_argument("--drop-zeros", action="store_true",
                       help="store no entry whose value is 0.0, explicit zeros included "
                       "(default: only a dense source's padding is dropped)")
    conv.add_argument("--name", metavar="NAME", default="spf_convert",
                      help="name of the generated C function (default spf_convert)")
    conv.add_argument("--report", action="store_true",
                      help="also print how the destination is assembled and why")
    _index_type_argument(conv)

    check = sub.add_parser("check", help="check tensor data in a file against a layout",
                           description="Check that FILE holds a tensor LAYOUT can store, with "
                           "the checks of spf.Tensor.from_arrays: extents, shape and every "
                           "property LAYOUT declares. An .npz (np.savez) holds one array per "
                           "field of LAYOUT, named by the field (scalar fields as 0-d arrays); "
                           "an array that is no field is an error. A Matrix Market file (.mtx, "
                           ".mtx.gz, .mtx.bz2) holds a matrix, which is stored in LAYOUT "
                           "(spf.Tensor.from_scipy): the check says whether LAYOUT can hold it.")
    check.add_argument("layout", metavar="LAYOUT", help="a layout name or a .toml path")
    check.add_argument("file", metavar="FILE", help="an .npz of the layout's fields or a "
                       "Matrix Market file (.mtx)")
    _layout_param_argument(check)
    _index_type_argument(check)
    check.add_argument("--reads", action="store_true",
                       help="also list the array reads of generated code that were checked "
                       "to stay inside their arrays for this tensor")

    cache = sub.add_parser("cache", help="show or clear the compiled-kernel cache",
                           description="The cache of compiled kernels (spf_*.so, their spf_*.c "
                           "and build directories) in $SPF_CACHE_DIR, else "
                           "$XDG_CACHE_HOME/spf, else ~/.cache/spf. Nothing else there is "
                           "touched.")
    actions = cache.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("info", help="print the directory, the number of kernels and their size")
    actions.add_parser("clear", help="remove the compiled kernels (they are compiled again "
                       "when needed)")

    demo = sub.add_parser("demo", help="generate, compile and run SpMSpV and SpMV, check "
                          "against scipy")
    demo.add_argument("--size", type=int, default=2000, help="matrix size (default 2000)")
    demo.add_argument("--density", type=float, default=0.001,
                      help="matrix density (default 0.001)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--quiet", action="store_true", help="do not print the generated C")
    for command in sub.choices.values():      # errors print the usage of their command
        command.set_defaults(subparser=command)
    return parser


def _kernel_arguments(cmd: argparse.ArgumentParser) -> None:
    """What builds the kernel, shared by ``generate`` and ``analyze``: the kernel, its layouts
    and their parameters, then one flag per kernel option (from the options schema)."""
    cmd.add_argument("kernel", metavar="EXPR_OR_KERNEL_FILE",
                     help='index notation such as "y(i) = A(i,j) * x(j)", or a .toml kernel file')
    cmd.add_argument("-l", "--layout", action="append", default=[], metavar="TENSOR=LAYOUT",
                     help="layout of a tensor: a layout name or a .toml path (repeatable; "
                     "tensors without one are dense)")
    cmd.add_argument("--param", action="append", default=[], metavar="TENSOR.PARAM=INT",
                     help="layout parameter of a tensor, e.g. A.B=4 (repeatable)")
    for o in OPTIONS:
        choices = f" (choices: {', '.join(o.choices())})" if o.choices else ""
        if o.form is Form.FLAG:
            cmd.add_argument(o.flag, action="store_true", default=None, help=o.help)
        elif o.form in _REPEATED:
            cmd.add_argument(o.flag, action="append", metavar=o.metavar,
                             help=f"{o.help}{choices} (repeatable)")
        else:
            cmd.add_argument(o.flag, metavar=o.metavar, help=o.help + choices,
                             type=int if o.form is Form.INTEGER else str)


_REPEATED = (Form.SIZES, Form.FIND)     # flags given once per loop variable or tensor


def _option_value(o: Option, given: Any, parser: argparse.ArgumentParser) -> Any:
    """What the command line gave for option ``o``, as the Python keyword takes it."""
    if given is None or o.form not in (*_REPEATED, Form.PAIR):
        return given
    example = ",".join(f"{k}={v}" for k, v in o.example.items()) \
        if isinstance(o.example, dict) else "B=hashmap"
    if o.form is Form.PAIR:
        return dict(_pairs([given], o.flag, example, parser))
    if o.form is Form.FIND and all("=" not in item for item in given):
        if len(given) > 1:
            parser.error(f"{o.flag}: give one algorithm for every find, or TENSOR=ALGORITHM "
                         f"per tensor; got {given}")
        return given[0]
    pairs = _pairs(given, o.flag, example, parser)
    if o.form is Form.FIND:
        return dict(pairs)
    sizes = {}
    for key, value in pairs:
        try:
            sizes[key] = int(value)
        except ValueError:
            parser.error(f"{o.flag} {key}: {value!r} is not an integer")
    return sizes


def _layout_param_argument(cmd: argparse.ArgumentParser, where: str = " (repeatable)") -> None:
    cmd.add_argument("--param", action="append", default=[], metavar="PARAM=INT",
                     help=f"layout parameter, e.g. B=4{where}")


def _index_type_argument(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--index-type", choices=("int32", "int64"),
                     help="width of index arrays, sizes and loop indices (default int32; "
                     "int64 for tensors with more than 2**31 - 1 entries or positions)")


def _version() -> str:
    from . import __version__
    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 demo mismatch, 2 user error)."""
    args = _parser().parse_args(argv)
    parser = args.subparser
    try:
        if args.command == "layouts":
            return cmd_layouts(args)
        if args.command == "generate":
            return cmd_generate(args, parser)
        if args.command == "analyze":
            return cmd_analyze(args, parser)
        if args.command == "convert":
            return cmd_convert(args, parser)
        if args.command == "check":
            return cmd_check(args, parser)
        if args.command == "cache":
            return cmd_cache(args)
        return cmd_demo(args)
    except SpfError as exc:
        print(f"spf: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `spf layouts | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


# ---------------------------------------------------------------------------------------
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fields_text(lay) -> str:
    """Fields as written in the layout file (parameters not substituted)."""
    raw = lay.raw.get("fields", {})
    return ", ".join(f"{name}: {_one_line(raw.get(name, f.ctype))}"
                     for name, f in lay.fields.items())


def _properties_text(lay) -> str:
    return "; ".join(p.text() for p in lay.properties) or "none"


def cmd_layouts(args: argparse.Namespace) -> int:
    import textwrap

    from .front.layout import layout_names, load_layout
    status = 0
    if args.markdown:
        print("| Layout | Relation (layout indices -> logical indices) | Fields | Properties |")
        print("|---|---|---|---|")
    for name in layout_names():
        try:
            lay = load_layout(name)
        except SpfError as exc:
            print(f"spf: error: layout {name}: {exc}", file=sys.stderr)
            status = 2
            continue
        relation = _one_line(lay.raw.get("relation", lay.relation))
        fields = _fields_text(lay)
        params = ", ".join(f"{k} = {v}" for k, v in lay.params.items())
        props = _properties_text(lay)
        if args.markdown:
            cells = [f"`{lay.name}`", f"`{relation}`",
                     fields + (f" (params: {params})" if params else ""), props]
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            continue
        print(lay.name)
        for label, text in (("", _one_line(lay.description)), ("relation:   ", relation),
                            ("fields:     ", fields), ("params:     ", params),
                            ("properties: ", props)):
            if text:
                print(textwrap.fill(text, width=100, initial_indent="    " + label,
                                    subsequent_indent="    " + " " * len(label),
                                    break_long_words=False, break_on_hyphens=False))
    return status


def _pairs(items: list[str], what: str, example: str,
           parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            parser.error(f"{what} must look like {example}, got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


def _build_kernel(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The Kernel described by the shared options of ``generate`` and ``analyze``."""
    from .kernel import Kernel
    layouts = dict(_pairs(args.layout, "-l", "A=CSR", parser))
    params: dict[str, dict[str, int]] = {}
    for key, value in _pairs(args.param, "--param", "A.B=4", parser):
        tensor, dot, pname = key.partition(".")
        if not dot or not pname:
            parser.error(f"--param must name a tensor and a parameter (A.B=4), got {key!r}")
        try:
            params.setdefault(tensor, {})[pname] = int(value)
        except ValueError:
            parser.error(f"--param {key}: {value!r} is not an integer")
    expr = args.kernel
    if expr.endswith(".toml") and not Path(expr).is_file():
        parser.error(f"kernel file not found: {expr}")
    options = {o.name: _option_value(o, getattr(args, o.name), parser) for o in OPTIONS}
    return Kernel(expr, layouts, params=params, **options)


def cmd_generate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    kernel = _build_kernel(args, parser)
    return _write_source(args, kernel.c_source(), kernel.report)


def _layout_params(items: list[str], parser: argparse.ArgumentParser) -> dict[str, int]:
    """``--param PARAM=INT`` options as a dict."""
    params = {}
    for text in items:
        key, eq, value = text.partition("=")
        if not eq or not key.strip() or not value.strip().lstrip("-").isdigit():
            parser.error(f"--param expects PARAM=INT, got {text!r}")
        params[key.strip()] = int(value)
    return params


def cmd_convert(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .conversion import Conversion
    keep = True if args.keep_zeros else False if args.drop_zeros else None
    conv = Conversion(args.src, args.dst, name=args.name, keep_zeros=keep,
                      index_type=args.index_type, **_layout_params(args.param, parser))
    return _write_source(args, conv.c_source(), conv.report)


def _write_source(args: argparse.Namespace, source: str, report) -> int:
    if args.output:
        try:
            Path(args.output).write_text(source)
        except OSError as exc:
            print(f"spf: error: cannot write {args.output}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(source)
    if args.report:
        print(report())
    return 0


def cmd_analyze(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    analyses = _build_kernel(args, parser).analyses()
    if args.json:
        import json
        docs = [a.to_dict() for a in analyses]
        print(json.dumps(docs[0] if len(docs) == 1 else {"version": 1, "terms": docs}, indent=2))
    else:
        print("\n\n".join(f"term {k}:\n{a}" if len(analyses) > 1 else str(a)
                          for k, a in enumerate(analyses)))
    return 0


def cmd_check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .runtime.tensor_file import is_matrix_market, load_tensor_file
    tensor = load_tensor_file(args.layout, args.file, _layout_params(args.param, parser),
                              args.index_type)
    lay = tensor.layout
    details = [f"{k}={v}" for k, v in lay.params.items()]
    details += [f"{lay.index_type} indices"] if lay.index_type != "int32" else []
    what = f"{lay.name} tensor" + (f" ({', '.join(details)})" if details else "")
    verdict = (f"can be stored as a {what}" if is_matrix_market(args.file)
               else f"is a valid {what}")
    print(f"ok: {args.file} {verdict} of shape {tensor.shape} with {tensor.values.size} "
          "stored entries")
    if args.reads:
        from .read_check import checked_reads
        for part, reads in checked_reads(lay):
            where = f" (part {part} of the union)" if part is not None else ""
            print(f"reads checked in bounds{where}: {', '.join(reads)}")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _bytes_text(size: int) -> str:
    """``size`` bytes for people: 512 B, 12.3 KiB, 4.5 MiB."""
    if size < 1024:
        return f"{size} B"
    scaled = size / 1024
    for unit in ("KiB", "MiB"):
        if scaled < 1024:
            return f"{scaled:.1f} {unit}"
        scaled /= 1024
    return f"{scaled:.1f} GiB"


def cmd_cache(args: argparse.Namespace) -> int:
    from .runtime import build as runtime
    directory = runtime.cache_dir()
    try:
        if args.action == "info":
            usage = runtime.cache_usage(directory)
            missing = "" if directory.is_dir() else " (does not exist)"
            print(f"directory: {directory}{missing}\nkernels:   {usage.kernels}\n"
                  f"files:     {usage.files} ({_bytes_text(usage.size)})")
        else:
            removed = runtime.clear_cache(directory)
            print(f"removed {_count(removed.kernels, 'kernel')}, {_count(removed.files, 'file')} "
                  f"({_bytes_text(removed.size)}) from {directory}")
    except OSError as exc:
        print(f"spf: error: cache {args.action}: {exc}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np
    import scipy.sparse as sp

    from .kernel import Kernel
    from .tensor import Tensor

    if args.size < 1 or not 0 <= args.density <= 1:
        print("spf: error: --size must be positive and --density within 0..1", file=sys.stderr)
        return 2
    n = args.size
    rng = np.random.default_rng(args.seed)
    A = sp.random(n, n, density=args.density, format="csr", random_state=rng)
    x_sparse = sp.random(n, 1, density=0.05, format="csc", random_state=rng).toarray().ravel()
    x_dense = rng.standard_normal(n)
    A_csr = Tensor.from_scipy("CSR", A)
    print(f"# matrix A: {n} x {n}, {A.nnz} nonzeros (density {args.density}, seed {args.seed})")

    cases = [
        ("SpMSpV", "y(i) = A(i,j) * x(j)", {"A": "CSR", "x": "SV"},
         {"A": A_csr, "x": Tensor.from_dense("SV", x_sparse)}, A @ x_sparse,
         f"CSR x SV, x has {np.count_nonzero(x_sparse)} nonzeros"),
        ("SpMV", "y(i) = A(i,j) * x(j)", {"A": "CSR"},
         {"A": A_csr, "x": x_dense}, A @ x_dense, "CSR x dense vector"),
    ]
    failed = 0
    for label, expr, layouts, inputs, reference, what in cases:
        t0 = time.perf_counter()
        kernel = Kernel(expr, layouts, name=label.lower())
        source = kernel.c_source()
        t1 = time.perf_counter()
        fn = kernel.compile()
        t2 = time.perf_counter()
        y = fn(**inputs)
        t3 = time.perf_counter()
        if not args.quiet:
            print(f"\n# ---- {label}: {expr} with {layouts} ----")
            print(source)
        err = float(np.max(np.abs(y - reference))) if n else 0.0
        tol = 1e-12 * max(1.0, float(np.max(np.abs(reference))) if n else 1.0)
        timing = (f"generate {1e3 * (t1 - t0):.1f} ms, compile {1e3 * (t2 - t1):.1f} ms, "
                  f"run {1e3 * (t3 - t2):.2f} ms")
        if err <= tol:
            print(f"OK {label} ({what}): max abs error vs scipy {err:.3g} ({timing})")
        else:
            print(f"MISMATCH {label} ({what}): max abs error vs scipy {err:.3g} > {tol:.3g}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
