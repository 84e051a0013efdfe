"""The ``spf`` command line: ``spf layouts``, ``generate``, ``analyze``, ``convert``, ``check``,
``cache`` and ``demo``, one module each (its arguments and what it does); :func:`main` builds
the parser from them and runs the command given.

User mistakes (any :class:`spf.SpfError`) print ``spf: error: <message>`` on stderr and
exit with status 2; ``spf demo`` exits with status 1 when a result does not match scipy.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..errors import SpfError
from . import analyze, cache, check, convert, demo, generate, layouts
from .common import Parser

COMMANDS = (layouts, generate, analyze, convert, check, cache, demo)

EXAMPLES = """\
examples:
  spf layouts
  spf generate "y(i) = A(i,j) * x(j)" -l A=CSR -l x=SV
  spf generate "y(i) = A(i,j) * x(j)" -l A=BCSR --param A.B=4 -o spmv_bcsr.c
  spf generate "y(i) = A(i,j) * x(j)" -l A=CSR --bounds "j <= i" --report
  spf generate path/to/kernel.toml
  spf generate "y(i) = A(i,j) * x(j)" -l A=CSR --parallel --tile A.pi=256
  spf analyze "y(i) = A(i,j) * x(j)" -l A=DCSR --parallel
  spf analyze "v = A(i) * B(i)" -l A=SV -l B=SV --find loop --tile B.p=8 --json
  spf convert COO CSR -o coo_to_csr.c
  spf check CSR matrix.npz
  spf check BCSR matrix.mtx --param B=4
  spf cache info
  spf demo
"""


def make_parser() -> argparse.ArgumentParser:
    """The parser of every command; each command's parser sets ``func`` (what runs it) and
    ``subparser`` (itself: usage mistakes found later print its usage)."""
    parser = Parser(
        prog="spf", description="Sparse polyhedral code generator: C for sparse tensor kernels "
        "from layout relations with uninterpreted functions.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"spf {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        cmd = command.add_parser(sub)
        cmd.set_defaults(func=command.run, subparser=cmd)
    return parser


def _version() -> str:
    from .. import __version__
    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 demo mismatch, 2 user error)."""
    args = make_parser().parse_args(argv)
    try:
        return args.func(args, args.subparser)
    except SpfError as exc:
        print(f"spf: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `spf layouts | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
