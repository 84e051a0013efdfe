"""Shared test helpers.

``assert_compiles_clean(src)`` compiles generated C with ``cc -O3 -fopenmp-simd -Wall -Werror
-c`` (the runtime compiles with ``-Wall``; tests hold generated code to zero warnings).  Import
it with ``from conftest import assert_compiles_clean`` or use the ``compiles_clean`` fixture.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

CLEAN_FLAGS = ("-O3", "-fopenmp-simd", "-Wall", "-Werror", "-c")   # as the runtime compiles


def assert_compiles_clean(src: str, flags: tuple[str, ...] = ()) -> None:
    """Fail (showing the diagnostics and the source) unless ``src`` compiles warning-free."""
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "kernel.c"
        c_file.write_text(src)
        proc = subprocess.run([cc, *CLEAN_FLAGS, *flags, str(c_file), "-o",
                               str(Path(tmp) / "kernel.o")], capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), (
        f"{cc} {' '.join(CLEAN_FLAGS)} rejected the generated C:\n{proc.stderr}\n"
        f"--- source ---\n{src}")


@pytest.fixture
def compiles_clean():
    return assert_compiles_clean
