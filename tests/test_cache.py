"""The compiled-kernel cache: keys, concurrent builders, ``spf cache info`` / ``clear``."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from spf import cli
from spf.cli.cache import bytes_text
from spf.errors import CompileError
from spf.runtime import build as runtime

ROOT = Path(__file__).resolve().parent.parent
HASH = "0123456789abcdef0123456789abcdef"   # a name as build_library makes them


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh, not yet existing cache directory, and no extra compiler flags."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("SPF_CACHE_DIR", str(directory))
    monkeypatch.delenv("SPF_CFLAGS", raising=False)
    return directory


def answer(lib: Path) -> int:
    return ctypes.CDLL(str(lib)).spf_answer()


# ---------------------------------------------------------------------------------------
# keys
def test_same_source_and_flags_reuse_the_library(cache):
    source = "int spf_answer(void) { return 42; }\n"
    lib = runtime.build_library(source)
    stamp = lib.stat().st_mtime_ns
    assert runtime.build_library(source) == lib and lib.stat().st_mtime_ns == stamp
    assert answer(lib) == 42
    assert lib.with_suffix(".c").read_text() == source
    assert sorted(p.name for p in cache.iterdir()) == [lib.with_suffix(".c").name, lib.name]


def test_key_changes_with_source_flags_and_compiler(cache, monkeypatch):
    source = "int spf_answer(void) { return SPF_ANSWER; }\n"
    flagged = source.replace("SPF_ANSWER", "41")
    base = runtime.build_library(flagged)
    other_source = runtime.build_library(flagged.replace("41", "43"))
    monkeypatch.setenv("SPF_CFLAGS", "-DSPF_ANSWER=44")
    env_flags = runtime.build_library(source)
    monkeypatch.setenv("SPF_CFLAGS", "-DSPF_ANSWER=45")
    other_env_flags = runtime.build_library(source)
    monkeypatch.delenv("SPF_CFLAGS")
    call_flags = runtime.build_library(source, ("-DSPF_ANSWER=46",))
    libs = [base, other_source, env_flags, other_env_flags, call_flags]
    assert len(set(libs)) == len(libs)
    assert [answer(lib) for lib in libs] == [41, 43, 44, 45, 46]
    monkeypatch.setenv("CC", "no-such-compiler-spf")      # the compiler is part of the key
    with pytest.raises(CompileError, match="cannot run the C compiler 'no-such-compiler-spf'"):
        runtime.build_library(flagged)


def test_failed_compile_leaves_nothing(cache):
    with pytest.raises(CompileError, match="int spf_broken = ;"):
        runtime.build_library("int spf_broken = ;\n")
    assert list(cache.iterdir()) == []


# ---------------------------------------------------------------------------------------
# several processes building the same new kernel at once
HANG = 900      # seconds after which a worker of the test below is taken to hang
WORKER = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    import numpy as np
    import scipy.sparse as sp
    import spf

    barrier, name, me = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    M = sp.random(60, 50, density=0.1, format="csr", random_state=3)
    x = np.arange(50.0)
    A = spf.Tensor.from_scipy("CSR", M)
    kernel = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, name=name)
    (barrier / f"ready-{me}").touch()
    deadline = time.monotonic() + 900       # a hang guard (HANG), not a speed requirement
    while not (barrier / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.001)
    y = kernel.compile()(A=A, x=x)
    sys.exit(0 if np.allclose(y, M @ x) else "wrong result")
""")


def test_concurrent_builds_of_one_kernel(cache, tmp_path):
    workers = 3
    name = f"spmv_{uuid.uuid4().hex}"           # a kernel no cache holds yet
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "SPF_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(barrier), name, str(k)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for k in range(workers)]
    try:
        deadline = time.monotonic() + HANG      # hang guards, not speed requirements
        while len(list(barrier.glob("ready-*"))) < workers:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "workers did not get ready (hung?)"
            time.sleep(0.01)
        (barrier / "go").touch()                 # all compile at once
        results = [p.communicate(timeout=HANG) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * workers, results
    sources = [c for c in cache.glob("spf_*.c") if f"int {name}(" in c.read_text()]
    assert len(sources) == 1
    assert [lib.name for lib in cache.glob("spf_*.so") if lib.stem == sources[0].stem] == \
        [sources[0].with_suffix(".so").name]
    assert sorted(p.stem for p in cache.glob("spf_*.so")) == \
        sorted(p.stem for p in cache.glob("spf_*.c"))       # every kernel with its source
    assert not list(cache.glob(f"{runtime.BUILD_PREFIX}*"))  # no build directory left


# ---------------------------------------------------------------------------------------
# spf cache info / clear
def populate(cache: Path) -> None:
    """Two kernels, a leftover and a running build, and files spf did not make."""
    cache.mkdir()
    for key in (HASH, HASH[::-1]):
        (cache / f"spf_{key}.so").write_bytes(b"x" * 1000)
        (cache / f"spf_{key}.c").write_text("int f(void);\n")   # 13 bytes
    old = cache / f"{runtime.BUILD_PREFIX}old"
    old.mkdir()
    (old / "kernel.c").write_text("int g;\n")                    # 7 bytes
    stale = time.time() - runtime.BUILD_GRACE - 10
    os.utime(old, (stale, stale))
    running = cache / f"{runtime.BUILD_PREFIX}running"
    running.mkdir()
    (running / "kernel.c").write_text("int h;\n")
    for other in ("notes.txt", "spf_mine.so", f"spf_{HASH}.so.bak", "spf_build_file"):
        (cache / other).write_text("keep me\n")
    (cache / "tmpabc").mkdir()
    (cache / f"spf_{HASH[:31]}g.c").write_text("keep me\n")


def cache_cmd(capsys, action: str) -> str:
    assert cli.main(["cache", action]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_info_and_clear_without_a_directory(cache, capsys):
    assert cache_cmd(capsys, "info") == (f"directory: {cache} (does not exist)\nkernels:   0\n"
                                         "files:     0 (0 B)\n")
    assert cache_cmd(capsys, "clear") == f"removed 0 kernels, 0 files (0 B) from {cache}\n"
    assert not cache.exists()


def test_info_counts_what_spf_made(cache, capsys):
    populate(cache)
    size = 2 * (1000 + 13) + 2 * 7
    assert cache_cmd(capsys, "info") == (f"directory: {cache}\nkernels:   2\n"
                                         f"files:     6 ({size / 1024:.1f} KiB)\n")


def test_clear_removes_only_what_spf_made(cache, capsys):
    populate(cache)
    assert cache_cmd(capsys, "clear") == (
        f"removed 2 kernels, 5 files ({(2 * 1013 + 7) / 1024:.1f} KiB) from {cache}\n")
    assert sorted(p.name for p in cache.iterdir()) == sorted([
        f"{runtime.BUILD_PREFIX}running", "notes.txt", "spf_mine.so", f"spf_{HASH}.so.bak",
        "spf_build_file", "tmpabc", f"spf_{HASH[:31]}g.c"])
    assert cache_cmd(capsys, "info").endswith("kernels:   0\nfiles:     1 (7 B)\n")


def test_clear_then_compile_again(cache, capsys):
    source = "int spf_answer(void) { return 7; }\n"
    lib = runtime.build_library(source)
    assert "kernels:   1\n" in cache_cmd(capsys, "info")
    assert cache_cmd(capsys, "clear").startswith("removed 1 kernel, 2 files (")
    assert not lib.exists()
    assert runtime.build_library(source) == lib and answer(lib) == 7


def test_cache_error_is_reported(cache, capsys, monkeypatch):
    def refuse(directory):
        raise PermissionError(13, "Permission denied", str(directory / f"spf_{HASH}.so"))

    monkeypatch.setattr(runtime, "clear_cache", refuse)
    assert cli.main(["cache", "clear"]) == 2
    assert capsys.readouterr().err == (
        f"spf: error: cache clear: [Errno 13] Permission denied: '{cache}/spf_{HASH}.so'\n")


def test_cache_needs_an_action(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["cache"])
    assert exc.value.code == 2
    assert "the following arguments are required: ACTION" in capsys.readouterr().err


def test_python_m_spf_cache(cache):
    populate(cache)
    env = {**os.environ, "SPF_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "spf", "cache", "clear"], capture_output=True,
                          text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("removed 2 kernels, 5 files (")


@pytest.mark.parametrize("size, text", [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"),
                                        (5 * 1024 ** 2, "5.0 MiB"), (3 * 1024 ** 3, "3.0 GiB")])
def test_sizes_for_people(size, text):
    assert bytes_text(size) == text
