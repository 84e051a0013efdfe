"""TACO (the Tensor Algebra Compiler, tensor-compiler.org) as a contender, side by side.

TACO is not a Python package: build it from source (``cmake -DCMAKE_BUILD_TYPE=Release``, target
``taco-tool``) and point ``$SPF_TACO`` at its command-line tool ``bin/taco`` (or put ``taco`` on
``PATH``). Experiments that compare with TACO skip it, and say so, when neither is set.

At run time the tool writes the C library of an expression (``-write-source``: ``compute`` plus
TACO's own tensor struct); it is compiled with the flags every spf kernel gets and called through
ctypes on the same arrays spf reads (TACO's compressed levels are spf's pos/crd arrays).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from spf.runtime.build import build_library, load_library

DENSE, SPARSE = 0, 1        # taco_mode_t


def tool() -> str | None:
    """The TACO command-line tool: ``$SPF_TACO``, else ``taco`` on PATH, else None."""
    path = os.environ.get("SPF_TACO") or shutil.which("taco")
    return path if path and Path(path).is_file() else None


def version(path: str) -> str:
    """What ``taco -version`` prints (its git hash when built from a clone)."""
    out = subprocess.run([path, "-version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).strip().splitlines()[0] if out.stdout or out.stderr else "?"


def source(path: str, expression: str, formats: dict[str, str]) -> str:
    """TACO's C library for ``expression`` with ``formats`` (``{"A": "sss"}``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "taco_kernel.c"
        cmd = [path, expression, *(f"-f={t}:{f}" for t, f in formats.items()),
               "-print-nocolor", f"-write-source={out}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode or not out.is_file():
            raise RuntimeError(f"{' '.join(cmd)} failed: {run.stderr or run.stdout}")
        return out.read_text()


def compile_compute(text: str, openmp: bool) -> ctypes.CDLL:
    """``text`` compiled with spf's flags (and ``-fopenmp`` when ``openmp``)."""
    lib = load_library(str(build_library(text, ("-fopenmp",) if openmp else ())))
    lib.compute.restype = ctypes.c_int
    return lib


class TacoTensor(ctypes.Structure):
    """TACO's ``taco_tensor_t``."""
    _fields_ = [("order", ctypes.c_int32), ("dimensions", ctypes.POINTER(ctypes.c_int32)),
                ("csize", ctypes.c_int32), ("mode_ordering", ctypes.POINTER(ctypes.c_int32)),
                ("mode_types", ctypes.POINTER(ctypes.c_int)),
                ("indices", ctypes.POINTER(ctypes.POINTER(ctypes.c_void_p))),
                ("vals", ctypes.c_void_p), ("fill_value", ctypes.c_void_p),
                ("vals_size", ctypes.c_int32)]


def tensor(dims: Sequence[int], levels: Sequence[Sequence[np.ndarray]],
           vals: np.ndarray) -> TacoTensor:
    """A ``taco_tensor_t`` over existing arrays: per mode, ``[]`` for a dense level or
    ``[pos, crd]`` (int32) for a compressed one; ``vals`` float64.  The struct keeps every
    array it points to alive (``_keep``)."""
    order = len(dims)
    for level in levels:
        for a in level:
            if a.dtype != np.int32 or not a.flags.c_contiguous:
                raise TypeError("TACO's index arrays are contiguous int32")
    dims_c = (ctypes.c_int32 * order)(*dims)
    ordering = (ctypes.c_int32 * order)(*range(order))
    types = (ctypes.c_int * order)(*(SPARSE if level else DENSE for level in levels))
    per_mode = [(ctypes.c_void_p * 2)(*(a.ctypes.data for a in level)) if level else
                (ctypes.c_void_p * 2)() for level in levels]
    indices = (ctypes.POINTER(ctypes.c_void_p) * order)(
        *(ctypes.cast(m, ctypes.POINTER(ctypes.c_void_p)) for m in per_mode))
    t = TacoTensor(order, dims_c, 8, ordering, types, indices, vals.ctypes.data, None,
                   int(vals.size))
    t._keep = (dims_c, ordering, types, per_mode, indices, levels, vals)
    return t
