"""What several ``spf`` commands share: the parser class, layout parameters, the index
width, and writing generated C."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..front.layout import INDEX_WIDTHS

Commands = argparse._SubParsersAction     # what a command module adds its parser to


class Parser(argparse.ArgumentParser):
    """Usage mistakes print the usage of the command at hand, then ``spf: error: ...`` (as
    every other error does) and exit with status 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"spf: error: {message}\n")


def layout_param_argument(cmd: argparse.ArgumentParser, where: str = " (repeatable)") -> None:
    """``--param PARAM=INT``: a parameter of the layouts of a command."""
    cmd.add_argument("--param", action="append", default=[], metavar="PARAM=INT",
                     help=f"layout parameter, e.g. B=4{where}")


def layout_params(items: list[str], parser: argparse.ArgumentParser) -> dict[str, int]:
    """``--param PARAM=INT`` options as a dict."""
    params = {}
    for text in items:
        key, eq, value = text.partition("=")
        if not eq or not key.strip() or not value.strip().lstrip("-").isdigit():
            parser.error(f"--param expects PARAM=INT, got {text!r}")
        params[key.strip()] = int(value)
    return params


def index_type_argument(cmd: argparse.ArgumentParser) -> None:
    """``--index-type``: the width of a command's index arrays."""
    cmd.add_argument("--index-type", choices=INDEX_WIDTHS,
                     help="width of index arrays, sizes and loop indices (default int32; "
                     "int64 for tensors with more than 2**31 - 1 entries or positions)")


def write_source(args: argparse.Namespace, source: str, report: Callable[[], str]) -> int:
    """Print the C, or write it to ``--output``; then the report with ``--report``."""
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
