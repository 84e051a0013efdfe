"""``spf demo``: SpMSpV and SpMV generated, compiled, run and checked against scipy."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .common import Commands


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("demo", help="generate, compile and run SpMSpV and SpMV, check "
                         "against scipy")
    cmd.add_argument("--size", type=int, default=2000, help="matrix size (default 2000)")
    cmd.add_argument("--density", type=float, default=0.001,
                     help="matrix density (default 0.001)")
    cmd.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    cmd.add_argument("--quiet", action="store_true", help="do not print the generated C")
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Status 1 when a result differs from scipy's."""
    import numpy as np
    import scipy.sparse as sp

    from ..tensor import Tensor

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
    failed = sum(not _run_case(*case, quiet=args.quiet) for case in cases)
    return 1 if failed else 0


def _run_case(label: str, expr: str, layouts: dict[str, str], inputs: dict[str, Any],
              reference: Any, what: str, quiet: bool) -> bool:
    """Generate, compile and run one kernel, print its C (unless ``quiet``), its timings and
    whether it matches ``reference``."""
    import numpy as np

    from ..kernel import Kernel

    t0 = time.perf_counter()
    kernel = Kernel(expr, layouts, name=label.lower())
    source = kernel.c_source()
    t1 = time.perf_counter()
    fn = kernel.compile()
    t2 = time.perf_counter()
    y = fn(**inputs)
    t3 = time.perf_counter()
    if not quiet:
        print(f"\n# ---- {label}: {expr} with {layouts} ----")
        print(source)
    n = len(reference)
    err = float(np.max(np.abs(y - reference))) if n else 0.0
    tol = 1e-12 * max(1.0, float(np.max(np.abs(reference))) if n else 1.0)
    timing = (f"generate {1e3 * (t1 - t0):.1f} ms, compile {1e3 * (t2 - t1):.1f} ms, "
              f"run {1e3 * (t3 - t2):.2f} ms")
    if err <= tol:
        print(f"OK {label} ({what}): max abs error vs scipy {err:.3g} ({timing})")
        return True
    print(f"MISMATCH {label} ({what}): max abs error vs scipy {err:.3g} > {tol:.3g}")
    return False
