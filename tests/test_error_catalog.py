"""Every row of the error catalog (docs/errors.md): the input raises the named error with that
message."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import spf

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `(\w+)` \| `(.+?)` \| `(.+)` \|$")


def catalog() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "errors.md").read_text()
    body = text.split("<!-- error catalog: start -->")[1].split("<!-- error catalog: end -->")[0]
    rows = [ROW.match(line) for line in body.splitlines() if line.startswith("| `")]
    assert all(rows), "a catalog row does not have the form | `Error` | `input` | `message` |"
    return [r.groups() for r in rows]


def pattern(message: str) -> re.Pattern:
    """The message with ``...`` standing for any text."""
    return re.compile(".*".join(re.escape(part) for part in message.split("...")), re.S)


@pytest.fixture(scope="module")
def namespace() -> dict:
    M = sp.random(4, 3, density=0.5, format="csr", random_state=0)
    return {"os": os, "np": np, "sp": sp, "spf": spf, "M": M,
            "A": spf.Tensor.from_scipy("CSR", M),
            "spmv": spf.Kernel("y(i) = A(i,j) * x(j)", {"A": "CSR"}).compile()}


def test_catalog_names_every_error_class():
    named = {error for error, _, _ in catalog()}
    classes = {c.__name__ for c in (spf.SpecError, spf.SynthesisError, spf.ArgumentError,
                                    spf.CompileError)}
    assert classes <= named


@pytest.mark.parametrize("error,source,message", catalog(), ids=lambda v: v[:40])
def test_catalog_row(error, source, message, namespace, monkeypatch):
    monkeypatch.chdir(ROOT)
    if source.startswith("$ "):
        words = source[2:].split()
        env = dict(os.environ)
        while "=" in words[0]:
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        assert words[0] == "spf"
        proc = subprocess.run([sys.executable, "-m", "spf", *words[1:]], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        got = proc.stderr.strip()
        assert got.startswith("spf: error: "), got
        assert pattern(message).fullmatch(got[len("spf: error: "):]), got
        return
    with pytest.raises(getattr(spf, error)) as info:
        eval(source, dict(namespace))
    assert pattern(message).fullmatch(str(info.value)), str(info.value)
