"""Shared test helpers and the test lanes.

Lanes (markers registered in pyproject.toml; ``--strict-markers`` makes a misspelt one an
error):

- ``python -m pytest -q -n auto``: the full suite, what CI runs.
- ``python -m pytest -q -n 2 -m "not slow"``: the fast lane for development, every module
  with a sample of each large parametrized family (the first minutes of feedback).
- ``python -m pytest -q -m unit``: ``middle/`` and ``decide/`` alone (seconds): tests marked
  ``unit`` fail if they compile C (:func:`_unit_tests_compile_nothing`).
- ``-m sanitizer``, ``-m fuzz``, ``-m experiments``: generated C under AddressSanitizer and
  UBSan; hypothesis and mutation fuzzers; the experiments in quick mode.  Sanitizer and
  experiment tests are also ``slow``; fuzzers are ``slow`` where they take seconds.

A test is ``slow`` when it takes seconds (``--durations``) or is one of many cases of a
family: :func:`lanes` keeps a sample of a family in the fast lane (:func:`covering`: every
value of every parameter at least once) and marks the other cases ``slow``.

``assert_compiles_clean(src)`` compiles generated C with ``cc -O3 -fopenmp-simd -Wall -Werror
-c`` (the runtime compiles with ``-Wall``; tests hold generated code to zero warnings).  Import
it with ``from conftest import assert_compiles_clean`` or use the ``compiles_clean`` fixture.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Container, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

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


@pytest.fixture(scope="module")
def client():
    """A Dask client of a local cluster of two worker processes, one thread each (a module's
    tests share it; skipped without the ``distributed`` extra)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture
def compiles_clean():
    return assert_compiles_clean


# -- lanes ----------------------------------------------------------------------------------
def covering(*dims: Sequence[Any]) -> set[tuple[Any, ...]]:
    """A few combinations of the values of ``dims`` in which every value of every dimension
    appears: the k-th combination takes the (k + j)-th value of dimension j, cycling (so two
    dimensions with the same values pair different ones)."""
    n = max(len(d) for d in dims)
    return {tuple(d[(k + j) % len(d)] for j, d in enumerate(dims)) for k in range(n)}


def pairwise(cases: Sequence[tuple[Any, ...]], first: Iterable[tuple[Any, ...]] = ()
             ) -> list[tuple[Any, ...]]:
    """The cases, in their order, of a greedy pairwise covering of ``cases`` (``first`` kept
    first): every two values that some case puts at two of its positions are together in a
    kept case (each layout with each find, each kernel with each layout, each kernel with
    each find), so no kind of check is dropped while the product's other cases are."""
    def pairs(c: tuple[Any, ...]) -> set[tuple[Any, ...]]:
        return {(i, c[i], j, c[j]) for i in range(len(c)) for j in range(i + 1, len(c))}
    need = set().union(*(pairs(c) for c in cases))
    keep = set(first)
    for c in keep:
        need -= pairs(c)
    while need:
        best = max((c for c in cases if c not in keep), key=lambda c: len(pairs(c) & need))
        keep.add(best)
        need -= pairs(best)
    return [c for c in cases if c in keep]


def lanes(cases: Iterable[Any], fast: Container[Any] | Callable[[Any], bool],
          ids: Callable[[Any], str] | None = None) -> list[Any]:
    """``cases`` as pytest parameter sets (a tuple case gives one value per argument), the
    ones not in ``fast`` (or for which ``fast(case)`` is false) marked ``slow``."""
    keep = fast if callable(fast) else fast.__contains__
    out = []
    for case in cases:
        values = case if isinstance(case, tuple) else (case,)
        out.append(pytest.param(*values, id=None if ids is None else ids(case),
                                marks=() if keep(case) else pytest.mark.slow))
    return out


@pytest.fixture(autouse=True)
def _unit_tests_compile_nothing(request, monkeypatch):
    """A test marked ``unit`` fails if it calls the C compiler (``build_library``: kernels,
    conversions and a tensor's generated checks all compile through it)."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(source: str, flags: tuple[str, ...] = ()) -> Path:
        pytest.fail("a unit test compiled C (spf.runtime.build.build_library was called)")

    from spf.runtime import build
    monkeypatch.setattr(build, "build_library", refuse)


# -- hypothesis profiles; the adversarial suite's counts -----------------------------------
# ``short`` (the default, CI's) is derandomized; ``long`` (``--hypothesis-profile=long``) runs
# many more examples of tests/test_adversarial.py, which then keeps going after a failure.
settings.register_profile("short", max_examples=30, derandomize=True, database=None,
                          deadline=None)
settings.register_profile("long", max_examples=500, derandomize=False, database=None,
                          deadline=None)
settings.load_profile("short")
_COUNTS = "SPF_ADVERSARIAL_COUNTS"


def pytest_configure(config):
    """A directory for the adversarial suite's counts, shared with xdist's workers."""
    if not hasattr(config, "workerinput") and _COUNTS not in os.environ:
        os.environ[_COUNTS] = config._adversarial_counts = tempfile.mkdtemp(
            prefix="spf-adversarial-")


def pytest_collection_modifyitems(config, items):
    """No time limit per test under the long hypothesis profile (hours of examples)."""
    if config.getoption("hypothesis_profile", None) == "long":
        for item in items:
            item.add_marker(pytest.mark.timeout(0))


def pytest_terminal_summary(terminalreporter, config):
    """The adversarial suite's counts, also written to ``$SPF_ADVERSARIAL_SUMMARY``."""
    directory = getattr(config, "_adversarial_counts", None)
    if directory is None:
        return
    from adversarial_worker import summary
    lines = summary(directory)
    shutil.rmtree(directory, ignore_errors=True)
    if lines:
        terminalreporter.section("adversarial suite")
        for line in lines:
            terminalreporter.write_line(line)
        if os.environ.get("SPF_ADVERSARIAL_SUMMARY"):
            Path(os.environ["SPF_ADVERSARIAL_SUMMARY"]).write_text("\n".join(lines) + "\n")
