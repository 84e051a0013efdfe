"""Compile generated C into shared libraries (cached by hash) and describe structs for ctypes."""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import CompileError
from ..front.layout import Layout
from .memory import address

BASE_FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fPIC", "-shared", "-Wall")
# gcc only: its -O3 unroll-and-jam fuses two iterations of a loop around a dense inner loop
# (the nonzeros around TTM's or SpMM's column loop) and made those kernels up to 2x slower
# when built without OpenMP (measured: SpMM CSR x dense, 64 columns, 216 -> 93 ms).
GCC_FLAGS = ("-fno-loop-unroll-and-jam",)
KERNEL_FILE = re.compile(r"spf_[0-9a-f]{32}\.(so|c)")   # what build_library keeps
BUILD_PREFIX = "spf_build_"                           # its temporary build directories
BUILD_GRACE = 600.0   # seconds: a younger build directory may belong to a running compile


def compiler() -> str:
    return os.environ.get("CC", "cc")


@cache
def is_gcc(cc: str) -> bool:
    """Whether the C compiler ``cc`` is gcc."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return False            # build_library reports the missing compiler
    return "Free Software Foundation" in out and "clang" not in out


def compile_flags(flags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The flags every kernel (and every C baseline of the experiments) is compiled with:
    :data:`BASE_FLAGS`, :data:`GCC_FLAGS` when ``$CC`` is gcc, ``flags``, then
    ``$SPF_CFLAGS``."""
    return BASE_FLAGS + (GCC_FLAGS if is_gcc(compiler()) else ()) + flags + extra_flags()


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
    all_flags = compile_flags(tuple(flags))
    key = hashlib.sha256("\0".join([__version__, compiler(), *all_flags, source])
                         .encode()).hexdigest()[:32]
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    lib = directory / f"spf_{key}.so"
    if lib.exists():
        return lib
    with tempfile.TemporaryDirectory(dir=directory, prefix=BUILD_PREFIX) as tmp:
        c_file = Path(tmp) / "kernel.c"
        c_file.write_text(source)
        out = Path(tmp) / "kernel.so"
        try:
            proc = subprocess.run([compiler(), *all_flags, str(c_file), "-o", str(out)],
                                  capture_output=True, text=True)
        except OSError as exc:
            raise CompileError(f"cannot run the C compiler {compiler()!r} ($CC): {exc}") from None
        if proc.returncode != 0:
            raise CompileError(f"{compiler()} failed:\n{proc.stderr}\n--- source ---\n{source}")
        os.replace(c_file, directory / f"spf_{key}.c")  # atomic: concurrent builders agree
        os.replace(out, lib)
    return lib


@dataclass(frozen=True)
class CacheUsage:
    """Files spf keeps (or removed) in a cache directory."""

    directory: Path
    kernels: int   # compiled kernels (spf_*.so)
    files: int     # every file, those in build directories included
    size: int      # bytes


def cache_entries(directory: Path | None = None) -> list[Path]:
    """What spf made in the cache directory (default :func:`cache_dir`): kernels
    (``spf_<hash>.so``), their sources (``spf_<hash>.c``) and build directories
    (``spf_build_*``, left behind by interrupted compiles); nothing else."""
    directory = cache_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if not p.is_symlink() and (
        (KERNEL_FILE.fullmatch(p.name) and p.is_file())
        or (p.name.startswith(BUILD_PREFIX) and p.is_dir())))


def _files(entry: Path) -> list[Path]:
    return [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except FileNotFoundError:   # removed meanwhile by another process
        return 0


def _stale(build: Path, now: float) -> bool:
    """Whether a build directory is old enough that no compile uses it any more."""
    try:
        return now - build.stat().st_mtime >= BUILD_GRACE
    except FileNotFoundError:   # its compile just finished
        return False


def _usage(directory: Path, entries: list[Path]) -> CacheUsage:
    files = [f for entry in entries for f in _files(entry)]
    kernels = sum(e.suffix == ".so" for e in entries)   # build directories have no suffix
    return CacheUsage(directory, kernels, len(files), sum(map(_size, files)))


def cache_usage(directory: Path | None = None) -> CacheUsage:
    """The kernels, files and bytes spf keeps in the cache directory."""
    directory = cache_dir() if directory is None else directory
    return _usage(directory, cache_entries(directory))


def clear_cache(directory: Path | None = None) -> CacheUsage:
    """Remove :func:`cache_entries` (a build directory younger than ``BUILD_GRACE`` seconds
    is kept: a compile may be using it) and return what was removed.  Processes that
    already loaded a kernel keep it; others compile it again."""
    directory = cache_dir() if directory is None else directory
    now = time.time()
    entries = [e for e in cache_entries(directory) if e.is_file() or _stale(e, now)]
    removed = _usage(directory, entries)
    for entry in entries:
        try:
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except FileNotFoundError:   # removed meanwhile by another process
            pass
    return removed


@cache
def load_library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


_INDEX_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64}


@cache
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
    for name, v in fields.items():      # C reads each array as its declared element type
        spec = layout.fields.get(name)
        if spec is not None and spec.is_array and spec.ctype != "double" \
                and getattr(v, "dtype", None) is not None and v.dtype != layout.dtype_of(name):
            raise TypeError(f"{layout.name}.{name} has dtype {v.dtype}, not the "
                            f"{layout.dtype_of(name)} the C struct declares (a bug in spf: "
                            "please report it)")
    return cls(**{name: v if isinstance(v, int) else address(v) for name, v in fields.items()})
