"""Import time of spf (issue 22 target: ``import spf`` at most 0.2 s).

    python -m experiments.import_time [--quick]

Each measurement is a fresh Python process (``sys.executable -c ...``) timing, inside it,
``import spf`` alone; ``import spf`` and then the first use of the API (``spf.Kernel``: the
package loads islpy, z3, numpy and its modules then); and ``import numpy`` for scale.  Median
over the runs.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

from .common import print_table, write_csv

TARGET_S = 0.2
CASES = [
    ("import spf", "import spf", ""),
    ("import spf; spf.Kernel (first use)", "import spf", "spf.Kernel"),
    ("import numpy", "import numpy", ""),
]


def _once(setup: str, first_use: str) -> float:
    code = ("import time; t = time.perf_counter(); " + setup + "; " + (first_use or "pass")
            + "; print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return float(out.strip())


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else 15
    rows = []
    for label, setup, use in CASES:
        _once(setup, use)       # warm the file system cache
        rows.append({"what": label, "median_s": statistics.median(
            _once(setup, use) for _ in range(runs)), "runs": runs})
    print_table(rows, ["what", "median_s", "runs"])
    print("wrote", write_csv("import_time", rows, args.quick))
    return rows


def describe(rows: list[dict]) -> str:
    """Markdown for RESULTS.md."""
    lines = [__doc__.split("\n\n", 2)[2].replace("\n", " ").strip(), "",
             "| what | median (s) |", "|---|---|"]
    lines += [f"| {r['what']} | {float(r['median_s']):.3f} |" for r in rows]
    spf_alone = next(float(r["median_s"]) for r in rows if r["what"] == "import spf")
    lines += ["", f"**Target** `import spf` <= {TARGET_S} s: "
              f"{'met' if spf_alone <= TARGET_S else 'NOT met'} ({spf_alone:.3f} s). The API is "
              "loaded on first use (PEP 562 `__getattr__` in `spf/__init__.py`), so the first "
              "`spf.Kernel` still pays for islpy, z3 and numpy (the second row)."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
