"""What builds the kernel of ``spf generate`` and ``spf analyze``: the kernel, its layouts and
their parameters, and one flag per kernel option, generated from the options schema
(:data:`spf.decide.options.OPTIONS`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..decide.options import OPTIONS, Form, Option

if TYPE_CHECKING:
    from ..kernel import Kernel

_REPEATED = (Form.SIZES, Form.FIND, Form.DTYPE)   # flags given once per loop variable or tensor
_ONE_OR_PER_TENSOR = (Form.FIND, Form.DTYPE)     # one value, or TENSOR=VALUE per tensor


def kernel_arguments(cmd: argparse.ArgumentParser) -> None:
    """The kernel, its layouts and their parameters, then one flag per kernel option."""
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


def build_kernel(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Kernel:
    """The Kernel the arguments of :func:`kernel_arguments` describe."""
    from ..kernel import Kernel
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


def _option_value(o: Option, given: Any, parser: argparse.ArgumentParser) -> Any:
    """What the command line gave for option ``o``, as the Python keyword takes it."""
    if given is None or o.form not in (*_REPEATED, Form.PAIR):
        return given
    example = ",".join(f"{k}={v}" for k, v in o.example.items()) \
        if isinstance(o.example, dict) else "B=hashmap"
    if o.form is Form.PAIR:
        return dict(_pairs([given], o.flag, example, parser))
    if o.form in _ONE_OR_PER_TENSOR and all("=" not in item for item in given):
        if len(given) > 1:
            parser.error(f"{o.flag}: give one value for every tensor, or TENSOR=VALUE per "
                         f"tensor; got {given}")
        return given[0]
    pairs = _pairs(given, o.flag, example, parser)
    if o.form in _ONE_OR_PER_TENSOR:
        return dict(pairs)
    sizes = {}
    for key, value in pairs:
        try:
            sizes[key] = int(value)
        except ValueError:
            parser.error(f"{o.flag} {key}: {value!r} is not an integer")
    return sizes


def _pairs(items: list[str], what: str, example: str,
           parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """``KEY=VALUE`` items as pairs (``what`` and ``example`` name them in errors)."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            parser.error(f"{what} must look like {example}, got {item!r}")
        out.append((key.strip(), value.strip()))
    return out
