"""``spf convert``: the C of a conversion between two layouts, optionally with its report."""
from __future__ import annotations

import argparse

from .common import (
    Commands,
    index_type_argument,
    layout_param_argument,
    layout_params,
    write_source,
)


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("convert", help="generate C converting one layout into another",
                         description="Generate the C of a conversion from layout SRC to layout "
                         "DST, derived from their relations (B(i,j) = A(i,j) with A in SRC and "
                         "B assembled in DST).")
    cmd.add_argument("src", metavar="SRC", help="source layout: a name or a .toml path")
    cmd.add_argument("dst", metavar="DST", help="destination layout: a name or a .toml path")
    cmd.add_argument("-o", "--output", metavar="FILE",
                     help="write the C to FILE instead of stdout")
    layout_param_argument(cmd, " (repeatable; goes to the layouts that declare it)")
    zeros = cmd.add_mutually_exclusive_group()
    zeros.add_argument("--keep-zeros", action="store_true",
                       help="store entries whose value is 0.0, padding of a dense source too")
    zeros.add_argument("--drop-zeros", action="store_true",
                       help="store no entry whose value is 0.0, explicit zeros included "
                       "(default: only a dense source's padding is dropped)")
    cmd.add_argument("--name", metavar="NAME", default="spf_convert",
                     help="name of the generated C function (default spf_convert)")
    cmd.add_argument("--report", action="store_true",
                     help="also print how the destination is assembled and why")
    index_type_argument(cmd)
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..conversion import Conversion, bind_layouts
    keep = True if args.keep_zeros else False if args.drop_zeros else None
    # the layouts are bound here: a parameter named like a keyword of Conversion is a parameter
    src, dst = bind_layouts(args.src, args.dst, layout_params(args.param, parser))
    conv = Conversion(src, dst, name=args.name, keep_zeros=keep, index_type=args.index_type)
    return write_source(args, conv.c_source(), conv.report)
