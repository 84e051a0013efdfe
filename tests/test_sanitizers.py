"""Generated C runs clean under AddressSanitizer and UndefinedBehaviorSanitizer.

The representative script (tests/sanitize/representative.py) runs in subprocesses, one per
case, with the sanitizer runtimes preloaded and ``SPF_CFLAGS`` adding the sanitizer flags to
every compile.
"""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
pytestmark = [pytest.mark.sanitizer, pytest.mark.slow]


def _cases() -> list[str]:
    """The representative script's case names."""
    spec = importlib.util.spec_from_file_location("representative",
                                                  HERE / "sanitize" / "representative.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CASES)


def _runtime(name: str) -> str | None:
    cc = os.environ.get("CC", "cc")
    try:
        path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return None
    return path if os.path.isabs(path) and os.path.exists(path) else None


ASAN, UBSAN = _runtime("libasan.so"), _runtime("libubsan.so")


@pytest.fixture(scope="module")
def sanitized_cache(tmp_path_factory) -> Path:
    """One cache of sanitized builds for the cases a worker runs (the checks of the layouts
    they share compile once)."""
    return tmp_path_factory.mktemp("sanitized-cache")


def sanitized_env(cache: Path) -> dict:
    env = dict(os.environ)
    env.update({
        "SPF_CACHE_DIR": str(cache),
        "SPF_CFLAGS": "-fsanitize=address,undefined -fno-omit-frame-pointer "
                      "-fno-sanitize-recover=all",
        "LD_PRELOAD": f"{ASAN} {UBSAN}",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    })
    return env


@pytest.mark.skipif(not (ASAN and UBSAN), reason="the C compiler has no sanitizer runtimes")
@pytest.mark.parametrize("case", _cases())
def test_representative_kernels_under_asan_and_ubsan(sanitized_cache, case):
    proc = subprocess.run([sys.executable, str(HERE / "sanitize" / "representative.py"), case],
                          env=sanitized_env(sanitized_cache), capture_output=True, text=True,
                          timeout=1500)
    report = proc.stdout[-3000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, report
    assert "SANITIZED RUN OK" in proc.stdout, report
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, report


@pytest.mark.fuzz
@pytest.mark.skipif(not (ASAN and UBSAN), reason="the C compiler has no sanitizer runtimes")
def test_custom_layout_fuzzer_under_asan_and_ubsan(sanitized_cache):
    """A short profile of the crash fuzzer (tests/sanitize/fuzz_layouts.py; run it longer by
    hand with an example count): custom layouts with any subset of their properties and
    corrupted arrays; what passes validation runs clean and matches the dense reference."""
    env = sanitized_env(sanitized_cache)
    env.setdefault("SPF_FUZZ_EXAMPLES", "60")
    proc = subprocess.run([sys.executable, str(HERE / "sanitize" / "fuzz_layouts.py")],
                          env=env, capture_output=True, text=True, timeout=1500)
    report = proc.stdout[-3000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, report
    assert "FUZZ OK" in proc.stdout, report
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, report
