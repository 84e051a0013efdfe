"""Compile generated C into shared libraries (cached by hash) and describe structs for ctypes."""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from . import __version__
from .errors import CompileError
from .layout import Layout

BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-Wall")


def compiler() -> str:
    return os.environ.get("CC", "cc")


def cache_dir() -> Path:
    """``$SPF_CACHE_DIR``, else ``$XDG_CACHE_HOME/spf``, else ``~/.cache/spf``."""
    if os.environ.get("SPF_CACHE_DIR"):
        return Path(os.environ["SPF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "spf"


def extra_flags() -> tuple[str, ...]:
    """``$SPF_CFLAGS``: flags added to every compile (e.g. ``-fsanitize=address,undefined``)."""
    return tuple(os.environ.get("SPF_CFLAGS", "").split())


def build_library(source: str, flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` into a shared library; reuse a cached one with the same key."""
    all_flags = BASE_FLAGS + tuple(flags) + extra_flags()
    key = hashlib.sha256("\0".join([__version__, compiler(), *all_flags, source])
                         .encode()).hexdigest()[:32]
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    lib = directory / f"spf_{key}.so"
    if lib.exists():
        return lib
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        c_file = Path(tmp) / "kernel.c"
        c_file.write_text(source)
        out = Path(tmp) / "kernel.so"
        proc = subprocess.run([compiler(), *all_flags, str(c_file), "-o", str(out)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"{compiler()} failed:\n{proc.stderr}\n--- source ---\n{source}")
        (directory / f"spf_{key}.c").write_text(source)
        os.replace(out, lib)  # atomic: concurrent builders agree on the result
    return lib


@lru_cache(maxsize=None)
def load_library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


_INDEX_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64}


@lru_cache(maxsize=None)
def struct_type(layout: Layout) -> type[ctypes.Structure]:
    """The ctypes mirror of a layout's C struct (arrays as raw pointers)."""
    scalar = {"int": _INDEX_CTYPES[layout.index_type], "double": ctypes.c_double}
    fields = []
    for f in layout.fields.values():
        fields.append((f.name, ctypes.c_void_p if f.is_array else scalar[f.ctype]))
    return type(f"spf_{layout.name}", (ctypes.Structure,), {"_fields_": fields})


def make_struct(layout: Layout, fields: Mapping[str, Any]) -> ctypes.Structure:
    """A struct instance pointing at checked numpy arrays (the caller keeps them alive)."""
    cls = struct_type(layout)
    return cls(**{name: v if isinstance(v, int) else v.ctypes.data for name, v in fields.items()})
