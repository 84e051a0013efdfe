"""The jobs the adversarial suite's worker runs (tests/adversarial_worker.py): each builds
what its payload describes with spf and reports every step's outcome.  Nothing here judges
a result; the tests compare it with numpy."""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from adversarial_worker import Steps

import spf


def dense_of(result: Any) -> tuple[np.ndarray, str]:
    """A kernel's result as a dense array, with the Python type it came as."""
    kind = type(result).__name__
    if isinstance(result, spf.Tensor):
        return result.to_dense(), kind
    if hasattr(result, "toarray"):
        return result.toarray(), kind
    return np.asarray(result), kind


# -- expressions ---------------------------------------------------------------------------
def _operand(spec: tuple) -> Any:
    """An operand from its description: ("dense", array), ("scalar", value) or ("sparse",
    layout, array, params)."""
    if spec[0] == "sparse":
        _, layout, array, params = spec
        return spf.Tensor.from_dense(layout, array, **params)
    return spec[1]


@functools.cache
def _compiled(expr: str, layouts: tuple, dtypes: tuple, params: tuple,
              fill_values: bool) -> spf.CompiledKernel:
    return spf.Kernel(expr, dict(layouts), dtype=dict(dtypes),
                      params={t: dict(p) for t, p in params},
                      fill_values=fill_values).compile()


def expression(steps: Steps, case: dict) -> None:
    """``case["expr"]`` by ``spf.evaluate`` or a compiled ``spf.Kernel`` (``case["api"]``)."""
    operands: dict[str, Any] = {}
    built = steps.run("operands", lambda: operands.update(
        {n: _operand(s) for n, s in case["operands"].items()}))
    if built.kind != "value":
        return
    out = case["out"]
    options = {"fill_values": True} if case["fill_values"] else {}
    if case["api"] == "evaluate":
        layouts = {case["output"]: case["out_layout"]} if case["out_layout"] else None
        params = {t: p for t, (kind, *rest) in case["operands"].items()
                  if kind == "sparse" and (p := rest[2])}
        if params:
            options["params"] = params
        run = steps.run("evaluate", lambda: spf.evaluate(
            case["expr"], out=None if out is None else out.copy(), layouts=layouts,
            **operands, **options))
    else:
        layouts = {n: s[1] for n, s in case["operands"].items() if s[0] == "sparse"}
        if case["out_layout"]:
            layouts[case["output"]] = case["out_layout"]
        params = tuple((n, tuple(sorted(s[3].items()))) for n, s in case["operands"].items()
                       if s[0] == "sparse" and s[3])
        dtypes = tuple(sorted(case["dtypes"].items()))

        def call() -> Any:
            kernel = _compiled(case["expr"], tuple(sorted(layouts.items())), dtypes, params,
                               case["fill_values"])
            given = {} if out is None else {case["output"]: out.copy()}
            return kernel(**operands, **given)
        run = steps.run("kernel", call)
    if run.kind == "value":
        steps.run("read back", lambda: dense_of(run.value))
        steps.run("stored", lambda: {n: _described(t) for n, t in operands.items()
                                     if isinstance(t, spf.Tensor)})


# -- tensors of a layout: the writer read back, operands corrupted ---------------------------
def contraction(order: int) -> str:
    """A kernel reading an order-``order`` tensor M: its last index contracted with w."""
    idx = [f"i{k}" for k in range(order)]
    lhs = "v" if order == 1 else f"Y({','.join(idx[:-1])})"
    return f"{lhs} = M({','.join(idx)}) * w({idx[-1]})"


def _described(t: spf.Tensor) -> dict:
    return {"fields": dict(t.fields), "raw": t.layout.raw, "params": dict(t.layout.params),
            "shape": tuple(t.shape), "name": t.layout.name}


def _use(steps: Steps, t: spf.Tensor, x: np.ndarray, prefix: str = "") -> None:
    """``t`` read back (``to_dense``) and in a kernel."""
    steps.run(f"{prefix}to_dense", t.to_dense)
    steps.run(f"{prefix}kernel", lambda: dense_of(spf.evaluate(contraction(t.layout.order),
                                                                 M=t, w=x)))


def store(steps: Steps, payload: dict) -> None:
    """``payload["dense"]`` stored in ``payload["layout"]`` by ``from_dense`` and by
    ``convert`` from ``payload["source"]``, each read back and used in a kernel."""
    layout, params, dense, x = (payload[k] for k in ("layout", "params", "dense", "x"))
    made = steps.run("from_dense", lambda: spf.Tensor.from_dense(layout, dense, **params))
    if made.kind == "value":
        t = made.value
        steps.run("fields", lambda: _described(t))
        _use(steps, t, x)
    if payload.get("source"):
        src = steps.run("source", lambda: spf.Tensor.from_dense(payload["source"], dense))
        if src.kind == "value":
            conv = steps.run("convert", lambda: src.value.convert(layout, allow_padding=True,
                                                                   **params))
            if conv.kind == "value":
                _use(steps, conv.value, x, "converted ")


def tensor(steps: Steps, payload: dict) -> None:
    """A tensor from (possibly corrupted) fields: ``from_arrays`` with its checks, then read
    back and used in a kernel."""
    made = steps.run("from_arrays", lambda: spf.Tensor.from_arrays(
        payload["layout"], payload["shape"], payload["fields"], params=payload["params"]))
    if made.kind == "value":
        _use(steps, made.value, payload["x"])


# -- layout files ----------------------------------------------------------------------------
@functools.cache
def workdir() -> Path:
    """A directory for the layout files of this worker, with the shipped packers beside
    them (``packer = "CSR.py"`` resolves)."""
    from spf.front.layout_path import LAYOUT_DIR

    directory = Path(tempfile.mkdtemp(prefix="spf-adversarial-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    for packer in LAYOUT_DIR.glob("*.py"):
        shutil.copy(packer, directory)
    return directory


SOURCES = {1: "SV", 2: "CSR", 3: "COO3"}


def layout_file(steps: Steps, payload: dict) -> None:
    """A layout file written, loaded and, if it loads, used: each tensor of
    ``payload["tensors"]`` of its order stored, converted into it, read back, in a kernel."""
    path = workdir() / payload["file"]
    path.write_text(payload["text"], encoding="utf-8")
    loaded = steps.run("load", lambda: spf.load_layout(str(path)))
    if loaded.kind != "value":
        return
    layout = loaded.value
    steps.run("loaded", lambda: {"order": layout.order, "name": layout.name, "path": str(path)})
    for k, (dense, x) in enumerate(payload["tensors"].get(layout.order, [])):
        made = steps.run(f"#{k} from_dense", lambda d=dense: spf.Tensor.from_dense(layout, d))
        if made.kind == "value":
            steps.run(f"#{k} fields", lambda t=made.value: _described(t))
            _use(steps, made.value, x, f"#{k} ")
        source = SOURCES.get(layout.order)
        if source is None:
            continue
        conv = steps.run(f"#{k} convert", lambda d=dense, s=source: spf.Tensor.from_dense(
            s, d).convert(layout, allow_padding=True))
        if conv.kind == "value":
            _use(steps, conv.value, x, f"#{k} converted ")
