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
# A cached library ends with a record of itself: MAGIC, its size (8 bytes, little-endian) and
# its SHA-256, appended after the compiler's output (the loader ignores bytes past the ELF
# file's contents).  A library is loaded only when its record matches: a truncated, empty,
# garbled or changed file (a full disk, a copy cut short, another tool) is compiled again
# instead of being mapped (a truncated one would kill the process with SIGBUS).
MAGIC = b"spf-kernel-lib-1"
RECORD = len(MAGIC) + 8 + hashlib.sha256().digest_size


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


def _cache_origin() -> str:
    """Where :func:`cache_dir` took the directory from, as a user sets it."""
    if os.environ.get("SPF_CACHE_DIR"):
        return "$SPF_CACHE_DIR"
    return "$XDG_CACHE_HOME/spf" if os.environ.get("XDG_CACHE_HOME") else \
        "the default, ~/.cache/spf"


def unusable_cache(directory: Path, exc: OSError) -> CompileError:
    """The error for a cache directory spf cannot create or write into: the directory,
    where it was set and the fix."""
    blocker = next((p for p in (directory, *directory.parents)
                    if p.exists() and not p.is_dir()), None)
    why = "it is a file, not a directory" if blocker == directory else \
        f"{blocker} is a file, not a directory" if blocker is not None else \
        (exc.strerror or str(exc)).lower() + (f" ({exc.filename})" if exc.filename else "")
    return CompileError(f"the kernel cache directory {directory} ({_cache_origin()}) cannot "
                        f"be used: {why}; set SPF_CACHE_DIR to a writable directory")


def usable_cache_dir() -> Path:
    """:func:`cache_dir`, created if needed; CompileError (:func:`unusable_cache`) when it
    cannot be."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unusable_cache(directory, exc) from None
    return directory


def extra_flags() -> tuple[str, ...]:
    """``$SPF_CFLAGS``: flags added to every compile (e.g. ``-fsanitize=address,undefined``)."""
    return tuple(os.environ.get("SPF_CFLAGS", "").split())


def build_library(source: str, flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` into a shared library; reuse a cached one with the same key whose
    record matches (:data:`MAGIC`), else compile it (again) and replace the file atomically."""
    all_flags = compile_flags(tuple(flags))
    key = hashlib.sha256("\0".join([__version__, compiler(), *all_flags, source])
                         .encode()).hexdigest()[:32]
    directory = usable_cache_dir()
    lib = directory / f"spf_{key}.so"
    if damage(lib) is None:
        return lib
    try:
        with tempfile.TemporaryDirectory(dir=directory, prefix=BUILD_PREFIX) as tmp:
            (Path(tmp) / "kernel.c").write_text(source)
            _compile(source, all_flags, Path(tmp))
            sealed = Path(tmp) / "sealed.so"
            sealed.write_bytes(_sealed((Path(tmp) / "kernel.so").read_bytes()))
            os.replace(Path(tmp) / "kernel.c", directory / f"spf_{key}.c")
            os.replace(sealed, lib)         # atomic: concurrent builders and loaders agree
    except OSError as exc:
        raise unusable_cache(directory, exc) from None
    return lib


def _compile(source: str, flags: tuple[str, ...], tmp: Path) -> None:
    """``kernel.c`` in ``tmp`` into ``kernel.so`` there (run in ``tmp`` with relative names,
    so that the library does not depend on the build directory's name)."""
    try:
        proc = subprocess.run([compiler(), *flags, "kernel.c", "-o", "kernel.so"], cwd=tmp,
                              capture_output=True, text=True)
    except OSError as exc:
        raise CompileError(f"cannot run the C compiler {compiler()!r} ($CC): {exc}") from None
    if proc.returncode != 0:
        raise CompileError(f"{compiler()} failed:\n{proc.stderr}\n--- source ---\n{source}")


def _sealed(library: bytes) -> bytes:
    """``library`` with its record appended."""
    return library + MAGIC + len(library).to_bytes(8, "little") + \
        hashlib.sha256(library).digest()


def damage(lib: Path) -> str | None:
    """Why ``lib`` is not a library as :func:`build_library` wrote it (missing, cut short,
    not spf's, changed), or None when its size and SHA-256 match its record."""
    try:
        data = lib.read_bytes()
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    body, record = data[:-RECORD], data[-RECORD:]
    if len(data) < RECORD or not record.startswith(MAGIC):
        return f"is not a library spf wrote ({len(data)} bytes without spf's record: cut " \
            "short, empty or another file)"
    size = int.from_bytes(record[len(MAGIC):len(MAGIC) + 8], "little")
    if size != len(body):
        return f"has {len(body)} bytes where its record says {size}"
    if hashlib.sha256(body).digest() != record[len(MAGIC) + 8:]:
        return "does not match its recorded SHA-256 (changed after it was written)"
    return None


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
    """The library at ``path`` (from :func:`build_library`), loaded once per process after
    its record was checked: a damaged file is never mapped."""
    why = damage(Path(path))
    if why is not None:
        raise CompileError(f"the compiled kernel {path} {why}; it was damaged after spf "
                           "checked it (compiling the kernel again replaces it)")
    try:
        return ctypes.CDLL(path)
    except OSError as exc:
        raise CompileError(f"cannot load the compiled kernel {path}: {exc}") from None


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
