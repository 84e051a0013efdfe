"""Issue 52, the runtime's part: spf.tune keeps value types and never serves a changed matrix
from an old conversion (item 9); caches keyed by an expression's text see a function
registered again (item 11); a damaged library in the kernel cache is detected and compiled
again, also by several processes and threads at once (item 15); an unusable cache directory
and a corrupt tune decision are clear errors or discarded with a warning, never raw
exceptions (item 18); spf.tune checks its operands and keywords as spf.evaluate does
(item 19)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import lanes

import spf
import spf.tuning as tuning
from spf import cli
from spf.front import functions
from spf.runtime import build

ROOT = Path(__file__).resolve().parent.parent
SPMV = "y(i) = A(i,j) * x(j)"
HANG = 300          # seconds after which a subprocess is taken to hang (not a speed limit)


@pytest.fixture
def cheap_tune(tmp_path, monkeypatch):
    """Decisions kept in a directory of this test; each layout at its default parameters and
    no option variants: one kernel per candidate (the tests are about operands, not the
    choice)."""
    monkeypatch.setattr(tuning, "_path", lambda key: tmp_path / "tune" / f"{key}.json")
    monkeypatch.setattr(tuning, "_variants", lambda layout: [dict(layout.params or {})])
    monkeypatch.setattr(tuning, "_option_variants", lambda *args: [])
    return tmp_path / "tune"


def _matrix(dtype=np.float64, seed: int = 0) -> sp.csr_matrix:
    M = sp.random(12, 9, density=0.3, format="csr", random_state=seed)
    M.data = np.arange(1, M.nnz + 1).astype(dtype)
    return M


# ---------------------------------------------------------------------------------------
# item 9: spf.tune and data changed in place, value types
def test_a_matrix_changed_in_place_is_converted_again(cheap_tune, monkeypatch):
    A, x = _matrix(), np.linspace(-1.0, 1.0, 9)
    tuned = spf.tune(SPMV, candidates=["SELL"], A=A, x=x)
    assert tuned.layouts["A"].name == "SELL"         # not A's own layout: a conversion held
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)
    A.data *= 2                                       # values changed in place
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)
    A.indices[:] = (A.indices + 1) % 9                # structure changed in place
    A.has_sorted_indices = False
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)
    np.testing.assert_allclose(tuned(A=A.copy(), x=x), A @ x)   # equal data, another object
    tensor = spf.Tensor.from_scipy("CSR", A).convert(tuned.layouts["A"])

    def refuse(*args, **kwargs):
        raise AssertionError("an unchanged operand was converted again")
    monkeypatch.setattr(spf.Tensor, "convert", refuse)
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)         # unchanged: the held conversion
    np.testing.assert_allclose(tuned(A=tensor, x=x), A @ x)    # a Tensor in the chosen layout


def test_a_matrix_kept_in_its_own_layout_is_read_at_every_call(cheap_tune):
    A, x = _matrix(), np.ones(9)
    tuned = spf.tune(SPMV, candidates=["CSR"], A=A, x=x)
    A.data[:] = -A.data
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)


@pytest.mark.parametrize("dtype", lanes([np.float32, np.int64, np.bool_, np.complex128],
                                         {np.float32, np.int64}, lambda t: t.__name__))
def test_tuned_kernels_keep_the_value_types(cheap_tune, dtype):
    A = _matrix(dtype)
    if dtype == np.int64:
        A.data[-1] = 2**60 + 1                        # exact in int64, not in float64
    if dtype == np.complex128:
        A.data = A.data * (1 - 2j)
    x = (np.arange(9) % 3).astype(dtype)
    expected = A @ x
    assert expected.dtype == dtype
    tuned = spf.tune(SPMV, candidates=["SELL"], A=A, x=x)
    y = tuned(A=A, x=x)
    assert y.dtype == dtype and tuned.kernel(**tuned.operands).dtype == dtype
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(y, spf.evaluate(SPMV, A=A, x=x))
    if dtype in (np.float32, np.int64):               # a Python number: weak, keeps dtype
        scaled = spf.tune("y(i) = a * A(i,j) * x(j)", candidates=["CSR"], a=2, A=A, x=x)
        np.testing.assert_array_equal(scaled(a=2, A=A, x=x), 2 * expected)
        assert scaled(a=2, A=A, x=x).dtype == dtype


def test_a_python_number_is_typed_as_evaluate_types_it(cheap_tune):
    A, x = _matrix(), np.arange(9.0)
    expr = "y(i) = a * A(i,j) * x(j)"
    tuned = spf.tune(expr, candidates=["CSR"], a=2 - 1j, A=A, x=x)    # widens to complex
    y = tuned(a=2 - 1j, A=A, x=x)
    assert y.dtype == np.complex128
    np.testing.assert_allclose(y, (2 - 1j) * (A @ x))
    np.testing.assert_array_equal(y, spf.evaluate(expr, a=2 - 1j, A=A, x=x))


def test_the_decision_key_holds_the_value_types(cheap_tune):
    x = np.ones(9)
    first = spf.tune(SPMV, candidates=["CSR", "SELL"], A=_matrix(), x=x)
    assert not first.cached
    again = spf.tune(SPMV, candidates=["CSR", "SELL"], A=_matrix(), x=x)
    assert again.cached
    single = spf.tune(SPMV, candidates=["CSR", "SELL"], A=_matrix(np.float32),
                      x=x.astype(np.float32))
    assert not single.cached and single(A=_matrix(np.float32), x=x).dtype == np.float32
    assert not spf.tune(SPMV, candidates=["CSR", "SELL"], A=_matrix(),
                        x=x.astype(np.float32)).cached       # another type of x


# ---------------------------------------------------------------------------------------
# item 11: a function registered again
def _define(name: str, scale: float, at_zero: float = 0.0) -> None:
    """``name(v) = scale * v + at_zero`` registered (again)."""
    functions.register(functions.Function(
        name, 1, lambda v: scale * v + at_zero,
        lambda args, vt: f"({scale!r} * ({args[0]}) + {at_zero!r})",
        functions.uninterpreted(name, at_zero)))


@pytest.fixture
def own_function():
    name = f"spf_test_{uuid.uuid4().hex[:8]}"
    yield name
    functions.FUNCTIONS.pop(name, None)
    getattr(functions, "SERIALS", {}).pop(name, None)


def test_evaluate_uses_the_definition_in_force(own_function):
    f = own_function
    A, x = _matrix(), np.arange(9.0)
    expr = f"y(i) = {f}(A(i,j)) * x(j)"
    _define(f, 2.0)
    np.testing.assert_allclose(spf.evaluate(expr, A=A, x=x), 2 * A @ x)
    _define(f, 3.0)
    np.testing.assert_allclose(spf.evaluate(expr, A=A, x=x), 3 * A @ x)
    _define(f, 1.0, at_zero=1.0)                      # now f(0) = 1: every j, not just entries
    np.testing.assert_allclose(spf.evaluate(expr, A=A, x=x), (A.toarray() + 1) @ x)


def test_a_kernel_keeps_the_definitions_it_was_built_with(own_function):
    f = own_function
    A, x = _matrix(), np.arange(9.0)
    _define(f, 1.0, at_zero=1.0)
    kernel = spf.Kernel(f"y(i) = {f}(A(i,j)) * x(j)", {"A": "CSR"})   # dense in j: f(0) = 1
    _define(f, 4.0)                                   # registered again before the C is made
    np.testing.assert_allclose(kernel.compile()(A=A, x=x), (A.toarray() + 1) @ x)
    assert "1.0 * (" in kernel.c_source() and "4.0 * (" not in kernel.c_source()


def test_tune_uses_the_definition_in_force(own_function, cheap_tune):
    f = own_function
    A, x = _matrix(), np.arange(9.0)
    expr = f"y(i) = {f}(A(i,j)) * x(j)"
    _define(f, 2.0)
    first = spf.tune(expr, candidates=["CSR"], A=A, x=x)
    np.testing.assert_allclose(first(A=A, x=x), 2 * A @ x)
    _define(f, 5.0)
    second = spf.tune(expr, candidates=["CSR"], A=A, x=x)
    assert not second.cached                          # the decision was made for the old one
    np.testing.assert_allclose(second(A=A, x=x), 5 * A @ x)
    np.testing.assert_allclose(spf.tune(expr, candidates=["CSR"], A=A, x=x)(A=A, x=x),
                               5 * A @ x)


# ---------------------------------------------------------------------------------------
# item 15: a damaged library in the kernel cache
ANSWER = 0x1234567
SOURCE = f"int spf_answer(void) {{ return {ANSWER}; }}\n"
LOAD = textwrap.dedent("""\
    import sys
    from spf.runtime import build
    print(build.load_library(str(build.build_library(sys.argv[1]))).spf_answer())
""")


@pytest.fixture
def scratch_cache(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("SPF_CACHE_DIR", str(directory))
    monkeypatch.delenv("SPF_CFLAGS", raising=False)
    return directory


def _damaged(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[:len(data) // 2]
    if how == "empty":
        return b""
    if how == "garbage":
        return b"\x7fELF" + bytes(range(256)) * 20
    assert how == "changed"                           # the same size, another answer
    old, new = ANSWER.to_bytes(4, "little"), (ANSWER + 1).to_bytes(4, "little")
    assert data.count(old) == 1
    return data.replace(old, new)


@pytest.mark.parametrize("how", lanes(["truncated", "empty", "garbage", "changed"],
                                       {"truncated", "changed"}))
def test_a_damaged_library_is_compiled_again(scratch_cache, how):
    lib = build.build_library(SOURCE)
    whole = lib.read_bytes()
    lib.write_bytes(_damaged(whole, how))
    proc = subprocess.run([sys.executable, "-c", LOAD, SOURCE], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ), timeout=HANG)
    assert proc.returncode == 0, proc.stderr         # SIGBUS: -7
    assert proc.stdout.strip() == str(ANSWER)
    assert lib.read_bytes() == whole                 # replaced by the whole library


@pytest.mark.parametrize("how", ["empty", "garbage"])
def test_a_library_damaged_after_it_was_built_is_not_loaded(scratch_cache, how):
    lib = build.build_library(SOURCE.replace("spf_answer", f"spf_answer_{how}"))
    lib.write_bytes(_damaged(lib.read_bytes(), how))
    with pytest.raises(spf.CompileError, match=rf"^the compiled kernel {lib} is not a library "
                       r"spf wrote \(\d+ bytes without spf's record: cut short, empty or "
                       r"another file\); it was damaged after spf checked it"):
        build.load_library(str(lib))


WORKER = textwrap.dedent("""\
    import sys, threading, time
    from pathlib import Path
    import numpy as np
    import scipy.sparse as sp
    import spf

    barrier, name, me = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    M = sp.random(30, 20, density=0.2, format="csr", random_state=1)
    x = np.arange(20.0)
    kernel = spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}, name=name)
    (barrier / f"ready-{me}").touch()
    deadline = time.monotonic() + 300       # a hang guard, not a speed requirement
    while not (barrier / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.001)
    right = []

    def work():
        right.append(np.allclose(kernel.compile()(A=M, x=x), M @ x))
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(0 if right == [True] * 3 else f"wrong results: {right}")
""")


@pytest.mark.slow
def test_processes_and_threads_rebuild_a_truncated_kernel_at_once(scratch_cache, tmp_path):
    name = f"spmv_{uuid.uuid4().hex}"
    # built as CompiledKernel builds it, not loaded here: truncating a library this process
    # had mapped would kill it
    lib = build.build_library(spf.Kernel(SPMV, {"A": "CSR"}, name=name).c_source())
    lib.write_bytes(_damaged(lib.read_bytes(), "truncated"))
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = 2
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(barrier), name, str(k)],
                              cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(workers)]
    try:
        deadline = time.monotonic() + HANG
        while len(list(barrier.glob("ready-*"))) < workers:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "workers did not get ready (hung?)"
            time.sleep(0.01)
        (barrier / "go").touch()
        results = [p.communicate(timeout=HANG) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * workers, results
    assert build.damage(lib) is None
    assert not list(scratch_cache.glob(f"{build.BUILD_PREFIX}*"))


# ---------------------------------------------------------------------------------------
# item 18: an unusable cache directory, a corrupt tune decision
def test_a_cache_directory_that_is_a_file(tmp_path, monkeypatch, capsys):
    file = tmp_path / "not-a-dir"
    file.write_text("")
    monkeypatch.setenv("SPF_CACHE_DIR", str(file))
    with pytest.raises(spf.CompileError) as info:
        build.build_library(SOURCE)
    assert str(info.value) == (f"the kernel cache directory {file} ($SPF_CACHE_DIR) cannot be "
                               "used: it is a file, not a directory; set SPF_CACHE_DIR to a "
                               "writable directory")
    monkeypatch.setenv("SPF_CACHE_DIR", str(file / "below"))
    with pytest.raises(spf.CompileError) as info:
        spf.evaluate("y(i) = x(i) * 7", x=np.ones(3))
    assert str(info.value) == (f"the kernel cache directory {file / 'below'} ($SPF_CACHE_DIR) "
                               f"cannot be used: {file} is a file, not a directory; set "
                               "SPF_CACHE_DIR to a writable directory")
    assert cli.main(["cache", "info"]) == 0
    assert capsys.readouterr().out.startswith(f"directory: {file / 'below'} (does not exist)")
    monkeypatch.setenv("SPF_CACHE_DIR", str(file))
    assert cli.main(["cache", "info"]) == 0
    assert capsys.readouterr().out.startswith(f"directory: {file} (not a directory)\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_cache_directory_that_cannot_be_written(tmp_path, monkeypatch):
    directory = tmp_path / "read-only"
    directory.mkdir(mode=0o500)
    monkeypatch.setenv("SPF_CACHE_DIR", str(directory))
    try:
        with pytest.raises(spf.CompileError, match=rf"^the kernel cache directory {directory} "
                           r"\(\$SPF_CACHE_DIR\) cannot be used: permission denied \(.*\); set "
                           "SPF_CACHE_DIR to a writable directory$"):
            build.build_library(SOURCE)
    finally:
        directory.chmod(0o700)


def test_a_cache_directory_refusing_writes(scratch_cache, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(scratch_cache / "spf_build_x"))
    monkeypatch.setattr(build.tempfile, "TemporaryDirectory", refuse)
    with pytest.raises(spf.CompileError) as info:
        build.build_library(SOURCE.replace("spf_answer", "spf_answer_refused"))
    assert str(info.value) == (f"the kernel cache directory {scratch_cache} ($SPF_CACHE_DIR) "
                               f"cannot be used: permission denied ({scratch_cache}/"
                               "spf_build_x); set SPF_CACHE_DIR to a writable directory")


CORRUPT = {
    "not JSON": (b"{not json", "Expecting property name enclosed in double quotes"),
    "not UTF-8": (b"\xff\xfe\x00garbage", ""),
    "nested": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "schema": (b'{"layout": 5, "params": [], "options": {}}', "its layout is not a name"),
    "params": (b'{"layout": "CSR", "params": [["C", 4, 1]], "options": {}}',
               "its params are not a list of [name, integer] pairs"),
    "option": (b'{"layout": "CSR", "params": [], "options": {"evil": 1}}',
               "its options are not an object of ['order', 'parallel', 'reassociate', 'tile', "
               "'unroll']"),
    "value": (b'{"layout": "CSR", "params": [], "options": {"unroll": "x"}}',
              "unroll must be an integer"),
    "layout": (b'{"layout": "NoSuchLayout", "params": [], "options": {}}',
               "unknown layout 'NoSuchLayout'"),
}


@pytest.mark.parametrize("kind", list(CORRUPT))
def test_a_corrupt_decision_is_discarded_and_measured_again(cheap_tune, kind):
    A, x = _matrix(), np.ones(9)
    spf.tune(SPMV, candidates=["CSR"], A=A, x=x)
    [path] = cheap_tune.glob("*.json")
    content, why = CORRUPT[kind]
    path.write_bytes(content)
    with pytest.warns(UserWarning, match=r"^spf\.tune: the decision kept in .* is discarded "
                      r"\(") as record:
        tuned = spf.tune(SPMV, candidates=["CSR"], A=A, x=x)
    message = str(record[0].message)
    assert message.startswith(f"spf.tune: the decision kept in {path} is discarded (")
    assert why in message and message.endswith("); the candidates are measured again and it "
                                               "is replaced")
    assert not tuned.cached
    np.testing.assert_allclose(tuned(A=A, x=x), A @ x)
    assert json.loads(path.read_text())["layout"] == "CSR"        # replaced
    assert spf.tune(SPMV, candidates=["CSR"], A=A, x=x).cached


# ---------------------------------------------------------------------------------------
# item 19: tune's operands and keywords checked as spf.evaluate checks them
@pytest.mark.parametrize("operands, message", [
    ({"x": np.ones(8)}, "index 'j' has extent 9 in A (shape (12, 9)) but 8 in x (dimension "
     "0); shapes must agree"),
    ({"xx": np.ones(9)}, "{caller}: ['xx'] are "),
    ({}, "{caller}: missing operand 'x'"),
    ({"x": "ones"}, "{caller}: 'x': expected an spf.Tensor, a numpy array, a scipy.sparse "
     "matrix or array, a pydata sparse array or a number, got str"),
], ids=["shape", "misspelt", "missing", "type"])
def test_tune_refuses_operands_as_evaluate_does(cheap_tune, operands, message):
    A = _matrix()
    for caller, call in (("evaluate", spf.evaluate), ("tune", spf.tune)):
        with pytest.raises(spf.ArgumentError) as info:
            call(SPMV, A=A, **operands)
        assert str(info.value).startswith(message.format(caller=caller))
    with pytest.raises(spf.ArgumentError) as info:
        spf.tune(SPMV, A=A, xx=np.ones(9))
    assert str(info.value) == ("tune: ['xx'] are not tensors of 'y(i) = A(i,j) * x(j)' "
                               "(['A', 'x', 'y'])")
    assert not cheap_tune.exists()                    # nothing measured, nothing kept
