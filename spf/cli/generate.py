"""``spf generate``: the C of a kernel, optionally with its report."""
from __future__ import annotations

import argparse

from .common import Commands, write_source
from .kernel_options import build_kernel, kernel_arguments


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("generate", help="generate C for a kernel",
                         description="Generate C for a kernel given in tensor index notation "
                         "or as a kernel spec file (.toml).")
    kernel_arguments(cmd)
    cmd.add_argument("-o", "--output", metavar="FILE", help="write the C to FILE instead of stdout")
    cmd.add_argument("--report", action="store_true",
                     help="also print the iteration space, loop order and per-loop decisions")
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    kernel = build_kernel(args, parser)
    return write_source(args, kernel.c_source(), kernel.report)
