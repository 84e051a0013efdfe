"""``spf analyze``: the dependence analysis of a kernel, as text or JSON."""
from __future__ import annotations

import argparse
import json

from .common import Commands
from .kernel_options import build_kernel, kernel_arguments


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("analyze", help="dependences, parallel loop and tiling of a kernel",
                         description="Print the dependence analysis of a kernel (paper Sec. 5): "
                         "per loop, the carried dependence (an SPF relation) or what disproved "
                         "it, the parallel loop and why, tiles and their tile-skipping guards. "
                         "The kernel is built with the same options as `spf generate`.")
    kernel_arguments(cmd)
    cmd.add_argument("--json", action="store_true",
                     help="print the analysis as JSON (its format is described in "
                     "docs/analysis.md, section Analysis JSON)")
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """One analysis, or one per term of a sum (under ``terms`` in JSON)."""
    analyses = build_kernel(args, parser).analyses()
    if args.json:
        docs = [a.to_dict() for a in analyses]
        print(json.dumps(docs[0] if len(docs) == 1 else {"version": 1, "terms": docs}, indent=2))
    else:
        print("\n\n".join(f"term {k}:\n{a}" if len(analyses) > 1 else str(a)
                          for k, a in enumerate(analyses)))
    return 0
