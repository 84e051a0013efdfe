"""The adversarial suite's worker: spf runs in a persistent subprocess, so that a crash of
generated C (SIGSEGV, SIGILL, SIGBUS, SIGFPE) or a hang fails one example instead of the
pytest process.

The test sends a job (its name and a small picklable payload); the worker runs its steps and
reports each step's outcome: a value, an spf error (type and text), a raw exception (type,
text, the traceback's last lines).  When the worker dies, the step it was in is reported as
``crash`` (with the signal and its stderr's tail) and the next call starts a fresh worker;
past the time limit it is killed and reported as ``hang``.  Kernels stay compiled in the
worker between jobs (``spf.evaluate`` keeps them; :func:`_compiled` for ``spf.Kernel``).

Counts: :func:`tally` records each example's classification per test; each pytest process
writes them to ``$SPF_ADVERSARIAL_COUNTS`` (a directory, set by ``tests/conftest.py``) at
the end of the module, and :func:`summary` prints the totals at the end of the session.
"""
from __future__ import annotations

import json
import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MEMORY_LIMIT = 6 << 30          # the worker's address space: a runaway allocation fails
JOB_SECONDS = 180               # one job (compiles included) may take this long


@dataclass(frozen=True)
class Outcome:
    """One step's result: ``kind`` is ``value``, ``spf`` (an spf error), ``raw`` (any other
    exception), ``crash`` (the worker died) or ``hang`` (killed at the time limit)."""

    kind: str
    value: Any = None
    error: str = ""          # the exception's type name, or the signal's
    message: str = ""
    step: str = ""

    def describe(self) -> str:
        if self.kind == "value":
            return f"{self.step}: value {self.value!r}"
        return f"{self.step}: {self.kind} {self.error}: {self.message}"


# -- the worker side ---------------------------------------------------------------------
def _send(stream, message: Any) -> None:
    data = memoryview(struct.pack("<Q", len(message := pickle.dumps(
        message, protocol=pickle.HIGHEST_PROTOCOL))) + message)
    while data:                      # an unbuffered pipe may take part of it
        data = data[stream.write(data):]
    stream.flush()


def _receive(stream) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", head)
    return pickle.loads(stream.read(size))


class Steps:
    """Runs a job's steps in the worker, announcing each before it starts (so that a crash
    names it) and catching what it raises."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.outcomes: list[Outcome] = []

    def run(self, step: str, work: Callable[[], Any]) -> Outcome:
        import spf

        _send(self.stream, ("step", step))
        try:
            outcome = Outcome("value", work(), step=step)
        except spf.SpfError as err:
            outcome = Outcome("spf", error=type(err).__name__, message=str(err), step=step)
        except Exception as err:         # a raw exception is what the suite looks for
            tail = "".join(traceback.format_exception(err)[-4:])
            outcome = Outcome("raw", error=type(err).__name__,
                              message=f"{err}\n{tail}", step=step)
        self.outcomes.append(outcome)
        return outcome


def serve() -> None:
    """The worker's loop: jobs from stdin, frames to the original stdout (generated C that
    prints writes to stderr instead)."""
    import adversarial_jobs

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    stdin = sys.stdin.buffer
    while True:
        try:
            job, payload = _receive(stdin)
        except EOFError:
            return
        steps = Steps(out)
        try:
            getattr(adversarial_jobs, job)(steps, payload)
        except Exception as err:         # a bug of the job itself: report it as raw
            steps.outcomes.append(Outcome("raw", error=type(err).__name__,
                                          message="".join(traceback.format_exception(err)),
                                          step=f"{job} (the job)"))
        _send(out, ("done", steps.outcomes))


# -- the test side -----------------------------------------------------------------------
class Worker:
    """A persistent worker subprocess, started on first use and after it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.fresh = True               # the last job ran in a worker started for it
        self.previous = "none"          # the last job that ran to its end
        self.stderr = tempfile.TemporaryFile()    # noqa: SIM115 (as long as the worker)

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
        return subprocess.Popen(
            [sys.executable, "-c", "import adversarial_worker; adversarial_worker.serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env,
            cwd=str(HERE.parent), bufsize=0)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-1500:].decode("utf-8", "replace")

    def call(self, job: str, payload: Any, timeout: float = JOB_SECONDS) -> list[Outcome]:
        """The job's step outcomes; a death or a hang ends the list with its step.  A death
        is retried once in a fresh worker: one that does not repeat there is reported with
        the job before it (an earlier kernel may have corrupted the heap)."""
        outcomes = self._call(job, payload, timeout)
        if outcomes[-1].kind != "crash" or self.fresh:
            self.previous = f"{job} {_short(payload)}"
            return outcomes
        again = self._call(job, payload, timeout)
        if again[-1].kind == "crash":
            return again
        died = outcomes[-1]
        return [*again[:-1], Outcome("crash", error=died.error, step=died.step, message=(
            f"did not repeat in a fresh worker; the job before it was {self.previous}\n"
            f"{died.message}"))]

    def _call(self, job: str, payload: Any, timeout: float) -> list[Outcome]:
        self.fresh = self.proc is None or self.proc.poll() is not None
        if self.fresh:
            self.proc = self._start()
        self.stderr.seek(0)
        self.stderr.truncate()
        proc = self.proc
        step, deadline = f"{job} (start)", time.monotonic() + timeout
        while True:
            try:
                if step == f"{job} (start)":
                    try:
                        _send(proc.stdin, (job, payload))
                    except BrokenPipeError:
                        raise EOFError from None
                    step = f"{job} (sent)"
                head = self._read(8, deadline)
                tag, body = pickle.loads(self._read(struct.unpack("<Q", head)[0], deadline))
            except TimeoutError:
                proc.kill()
                proc.wait()
                self.proc = None
                return [Outcome("hang", error="timeout", step=step,
                                message=f"no answer in {timeout:.0f} s")]
            except EOFError:
                code = proc.wait()
                self.proc = None
                name = signal.Signals(-code).name if code < 0 else f"exit status {code}"
                return [Outcome("crash", error=name, step=step, message=self._stderr_tail())]
            if tag == "done":
                return body
            step = body

    def _read(self, size: int, deadline: float) -> bytes:
        """``size`` bytes of the worker's answer (unbuffered: select sees what is left)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd, chunks, got = self.proc.stdout.fileno(), [], 0
        while got < size:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, size - got)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def _short(payload: Any) -> str:
    """A job's payload in a line: its expression or its layout."""
    if isinstance(payload, dict):
        for key in ("expr", "layout", "file"):
            if key in payload:
                return repr(payload[key])
    return "?"


# -- counts --------------------------------------------------------------------------------
CLASSES = ("correct", "spf error (expected)", "spf error (not documented)",
           "silently wrong", "crash", "raw exception", "hang", "unchecked (docs silent)",
           "unchecked (oracle cap)")
UNCHECKED = CLASSES[7:]     # run, not judged (counted with their reason)
_COUNTS: dict[str, Counter] = defaultdict(Counter)
_FAILURES: dict[str, list[str]] = defaultdict(list)
_REASONS: dict[str, Counter] = defaultdict(Counter)
MAX_KEPT = int(os.environ.get("SPF_ADVERSARIAL_KEPT", "40"))   # failures kept per test


def tally(test: str, klass: str, detail: str = "") -> None:
    """Count one example of ``test`` as ``klass`` (one of :data:`CLASSES`); ``detail``: the
    failure, or for an expected spf error its reason."""
    assert klass in CLASSES, klass
    _COUNTS[test][klass] += 1
    if klass == CLASSES[1] or klass in UNCHECKED:
        _REASONS[test][f"{klass}: {detail}" if klass in UNCHECKED else detail or "?"] += 1
    elif detail and len(_FAILURES[test]) < MAX_KEPT:
        _FAILURES[test].append(f"[{klass}] {detail}")


def write_counts() -> None:
    """This process's counts, into ``$SPF_ADVERSARIAL_COUNTS`` (when set)."""
    directory = os.environ.get("SPF_ADVERSARIAL_COUNTS")
    if not directory or not _COUNTS:
        return
    path = Path(directory) / f"{os.getpid()}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"counts": _COUNTS, "failures": _FAILURES,
                                "reasons": _REASONS}))
    _COUNTS.clear()
    _FAILURES.clear()
    _REASONS.clear()


def summary(directory: str) -> list[str]:
    """The lines of the session's summary: examples per test, by class, and the first
    failures of each test."""
    counts: dict[str, Counter] = defaultdict(Counter)
    failures: dict[str, list[str]] = defaultdict(list)
    reasons: Counter = Counter()
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        for test, c in data["counts"].items():
            counts[test].update(c)
        for test, f in data["failures"].items():
            failures[test] += f
        for test, r in data["reasons"].items():
            reasons.update({f"{test.split('[')[0]}: {k}": v for k, v in r.items()})
    if not counts:
        return []
    total: Counter = Counter()
    lines = ["adversarial suite: examples per test and their outcomes"]
    for test in sorted(counts):
        total.update(counts[test])
        lines.append(f"  {test}: {_counts_text(counts[test])}")
    lines.append(f"  all: {_counts_text(total)}")
    lines.append("expected spf errors (and unchecked examples) by reason:")
    lines += [f"  {n:6d}  {reason}" for reason, n in reasons.most_common(30)]
    for test in sorted(failures):
        lines.append(f"failures of {test} (first {MAX_KEPT} per process):")
        lines += [f"    {f}" for f in failures[test]]
    return lines


def _counts_text(c: Counter) -> str:
    return f"{sum(c.values())} examples: " + ", ".join(f"{k} {c[k]}" for k in CLASSES)
