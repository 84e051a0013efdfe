"""``spf cache info`` and ``spf cache clear``: the compiled-kernel cache."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import Commands


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("cache", help="show or clear the compiled-kernel cache",
                         description="The cache of compiled kernels (spf_*.so, their spf_*.c "
                         "and build directories) in $SPF_CACHE_DIR, else "
                         "$XDG_CACHE_HOME/spf, else ~/.cache/spf. Nothing else there is "
                         "touched.")
    actions = cmd.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("info", help="print the directory, the number of kernels and their "
                       "size").set_defaults(act=_info)
    actions.add_parser("clear", help="remove the compiled kernels (they are compiled again "
                       "when needed)").set_defaults(act=_clear)
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..runtime.build import cache_dir
    directory = cache_dir()
    try:
        print(args.act(directory))
    except OSError as exc:
        print(f"spf: error: cache {args.action}: {exc}", file=sys.stderr)
        return 2
    return 0


def _info(directory: Path) -> str:
    from ..runtime.build import cache_usage
    usage = cache_usage(directory)
    missing = "" if directory.is_dir() else " (not a directory)" if directory.exists() \
        else " (does not exist)"
    return (f"directory: {directory}{missing}\nkernels:   {usage.kernels}\n"
            f"files:     {usage.files} ({bytes_text(usage.size)})")


def _clear(directory: Path) -> str:
    from ..runtime.build import clear_cache
    removed = clear_cache(directory)
    return (f"removed {_count(removed.kernels, 'kernel')}, {_count(removed.files, 'file')} "
            f"({bytes_text(removed.size)}) from {directory}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def bytes_text(size: int) -> str:
    """``size`` bytes for people: 512 B, 12.3 KiB, 4.5 MiB."""
    if size < 1024:
        return f"{size} B"
    scaled = size / 1024
    for unit in ("KiB", "MiB"):
        if scaled < 1024:
            return f"{scaled:.1f} {unit}"
        scaled /= 1024
    return f"{scaled:.1f} GiB"
