"""``spf.tune``: the layouts and options of a kernel chosen for the user's own data.

For each sparse operand, every layout on the search path (``$SPF_LAYOUT_PATH``, then the
shipped ones) of the operand's order is a candidate, with its integer parameters at their
defaults and at half and twice them.  Each candidate is converted from the operand's own
layout by generated code; a layout that cannot hold the data (a conversion error, or more
than 75% padding: refused before anything that large is allocated) is pruned with the
reason.  The survivors are ranked by the bytes they store (sparse kernels are bound by
memory traffic) and the ``candidates`` smallest are compiled and measured on the data, with
the requested thread count; the choice is the fastest kernel, or, given ``calls``, the
smallest conversion time plus ``calls`` kernel calls.  The decision is kept on disk keyed by
a signature of the operands' structure, so a second matrix of the same family skips the
measurement.  Nothing here names a format: every layout is a file.
"""
from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ArgumentError, SpfError
from .front.layout import Layout
from .front.layout_path import layout_names, load_layout
from .kernel import Kernel
from .runtime.build import cache_dir
from .runtime.compiled import CompiledKernel
from .tensor import Tensor

MEASURED = 8            # candidates measured per operand by default
_kernels: dict[tuple, CompiledKernel] = {}      # built in this process, by statement
REPEATS = 5             # kernel calls timed per candidate (the median is kept)


@dataclass(frozen=True)
class Row:
    """One candidate of the report: the layout (with parameters) of the tuned operand, the
    options, the times measured (seconds; None: not measured) and what happened."""

    operand: str
    layout: str
    params: tuple[tuple[str, int], ...]
    options: tuple[tuple[str, Any], ...]
    bytes: int | None = None
    convert_s: float | None = None
    kernel_s: float | None = None
    break_even_calls: float | None = None   # calls after which it beats the operand's own
    status: str = "measured"                # measured, chosen, pruned: ..., not measured: ...

    def __str__(self) -> str:
        what = self.layout + "".join(f" {k}={v}" for k, v in self.params)
        times = "" if self.kernel_s is None else (
            f", kernel {self.kernel_s * 1e3:.3g} ms, conversion {self.convert_s * 1e3:.3g} ms"
            if self.convert_s is not None else f", kernel {self.kernel_s * 1e3:.3g} ms")
        even = "" if self.break_even_calls is None else \
            f", pays off after {self.break_even_calls:.3g} calls"
        return f"{self.operand}: {what}{times}{even}: {self.status}"


@dataclass
class Tuned:
    """The tuned kernel: ``kernel`` (compiled), ``operands`` (converted, by name),
    ``layouts``, ``options``, ``report`` (one :class:`Row` per candidate) and whether the
    decision came from the cache (``cached``).  Call it like the kernel: operands given as
    the same objects that were tuned reuse their converted copies; others are converted."""

    kernel: CompiledKernel
    operands: dict[str, Any]
    layouts: dict[str, Layout]
    options: dict[str, Any]
    report: list[Row]
    cached: bool = False
    _given: dict[str, Any] = field(default_factory=dict)   # name -> the object tuned (held:
    #                                                        its id is never reused meanwhile)

    def __call__(self, **operands: Any) -> Any:
        args = {}
        for name, value in operands.items():
            lay = self.layouts.get(name)
            if self._given.get(name) is value:
                args[name] = self.operands[name]            # tuned: converted once
            elif lay is not None and _is_sparse(value):
                tensor = _as_tensor(value)
                args[name] = tensor if tensor.layout == lay else tensor.convert(lay)
            else:
                args[name] = value
        return self.kernel(**args)

    def describe(self) -> str:
        head = "tuned (cached decision)" if self.cached else "tuned"
        chosen = ", ".join(f"{n}: {lay.name}" for n, lay in self.layouts.items())
        return "\n".join([f"{head}: {chosen}; options {self.options}"]
                         + [f"  {r}" for r in self.report])


def tune(expr: str, *, budget_s: float | None = None, calls: int | None = None,
         candidates: int | Sequence[str] | None = None, threads: int | None = None,
         layouts: Mapping[str, str | Layout] | None = None, **operands: Any) -> Tuned:
    """Choose layouts and options for ``expr`` on ``operands`` (see the module docstring).

    ``budget_s``: stop measuring once this much time went into tuning (the best so far is
    kept); ``calls``: the number of calls expected (weighs conversion against kernel time;
    default: the fastest kernel); ``candidates``: how many layouts are measured per operand
    (default 8), or the names of the layouts to try;
    ``threads``: OpenMP threads measured and used (default: one; more builds the kernels
    with ``parallel=True``); ``layouts``: the layouts of operands not to tune (others:
    their own)."""
    start = time.perf_counter()
    threads = _positive("threads", 1 if threads is None else threads)
    names = None if candidates is None or isinstance(candidates, int) else list(candidates)
    measured = MEASURED if names is not None or candidates is None else \
        _positive("candidates", candidates)
    if calls is not None:
        _positive("calls", calls)
    fixed = dict(layouts or {})
    tensors = {n: _as_tensor(v) if n not in fixed and _is_sparse(v) else v
               for n, v in operands.items()}
    tuned = [n for n, v in tensors.items() if isinstance(v, Tensor) and v.layout.dense_array
             is None and n not in fixed]
    if len(tuned) != 1:
        raise ArgumentError(f"tune: needs exactly one sparse operand to tune among "
                            f"{sorted(operands)}, found {tuned or 'none'} (give the others' "
                            "layouts with layouts=)")
    name = tuned[0]
    base = {n: v.layout for n, v in tensors.items() if isinstance(v, Tensor) and n != name}
    base.update({n: (load_layout(v) if isinstance(v, str) else v) for n, v in fixed.items()})
    options = {"parallel": True} if threads > 1 else {}
    key = _cache_key(expr, name, tensors[name], threads, options, calls, names)
    hit = _cached(key)
    if hit is not None:
        lay = load_layout(hit["layout"], tensors[name].layout.index_type, **dict(hit["params"]))
        kernel = _compiled(expr, {**base, name: lay}, options, threads)
        converted = tensors[name].convert(lay)
        row = Row(name, lay.name, tuple(hit["params"]), tuple(options.items()),
                  status="chosen (cached decision: measured on a matrix of the same structure)")
        return Tuned(kernel, {**tensors, name: converted}, {**base, name: lay}, options,
                     [row], True, {name: operands[name]})
    deadline = None if budget_s is None else start + budget_s
    rows, pool = _convert_candidates(name, tensors[name], names, deadline)
    others = {n: v for n, v in tensors.items() if n != name}
    rows, best = _measure(expr, name, pool, others, base, options, threads, measured,
                          budget_s, start, calls, rows, tensors[name])
    if best is None:
        raise SpfError(f"tune: no candidate layout of {name!r} could be measured:\n"
                       + "\n".join(f"  {r}" for r in rows))
    lay, converted, kernel, row = best
    _store(key, {"layout": lay.name, "params": list(row.params)})
    return Tuned(kernel, {**tensors, name: converted}, {**base, name: lay}, options, rows,
                 False, {name: operands[name]})


# candidates --------------------------------------------------------------------------------
def _convert_candidates(name: str, tensor: Tensor, names: list[str] | None,
                        deadline: float | None) -> tuple[list[Row], list[tuple]]:
    """Every layout of the operand's order (``names``: those only) with parameter
    variants, converted (pruned with the reason when it cannot hold the data); the
    survivors by the bytes they store."""
    rows: list[Row] = []
    pool: list[tuple[int, Layout, Tensor, Row]] = []
    for lay_name in names if names is not None else layout_names():
        if deadline is not None and time.perf_counter() > deadline:
            rows.append(Row(name, lay_name, (), (), status="not converted: the budget was "
                                                           "spent"))
            continue
        try:
            plain = load_layout(lay_name)
        except SpfError as exc:
            rows.append(Row(name, lay_name, (), (), status=f"pruned: {exc}"))
            continue
        why = f"order {plain.order}, the operand's is {tensor.layout.order}" \
            if plain.order != tensor.layout.order else "a dense layout" \
            if plain.dense_array is not None else "a union of parts (not tuned yet)" \
            if len(plain.parts()) > 1 else ""
        if why:
            if names is not None:           # asked for by name: say why it is left out
                rows.append(Row(name, lay_name, (), (), status=f"pruned: {why}"))
            continue
        for params in _variants(plain):
            try:
                lay = load_layout(lay_name, tensor.layout.index_type, **params)
                converted = tensor if lay == tensor.layout else tensor.convert(lay)
            except SpfError as exc:
                rows.append(Row(name, lay_name, tuple(params.items()), (),
                                status=f"pruned: {str(exc).splitlines()[0]}"))
                continue
            size = sum(a.nbytes for a in converted.fields.values() if isinstance(a, np.ndarray))
            row = Row(name, lay_name, tuple(params.items()), (), size)
            pool.append((size, lay, converted, row))
    pool.sort(key=lambda p: (p[0], p[1].name))
    return rows, pool


def _variants(layout: Layout) -> list[dict[str, int]]:
    """The layout's integer parameters at their defaults, and each at half and twice it."""
    params = dict(layout.params or {})
    out = [dict(params)]
    for key, value in params.items():
        for other in (value // 2, value * 2):
            if other >= 1 and other != value:
                out.append({**params, key: other})
    return out


# measurement -------------------------------------------------------------------------------
def _measure(expr: str, name: str, pool: list[tuple], others: Mapping[str, Any],
             base: Mapping[str, Layout], options: Mapping[str, Any], threads: int,
             measured: int, budget_s: float | None, start: float, calls: int | None,
             rows: list[Row], source: Tensor) -> tuple[list[Row], tuple | None]:
    """Compile and time the ``measured`` smallest candidates; the best by kernel time (or
    by conversion + ``calls`` kernel calls), each with the calls after which it beats the
    operand's own layout (``source``'s); the rest reported as not measured."""
    own = source.layout
    results = []
    for k, (_, lay, converted, row) in enumerate(pool):
        if k >= measured or (budget_s is not None and time.perf_counter() - start > budget_s):
            why = "the budget was spent" if k < measured else \
                f"not among the {measured} storing the fewest bytes"
            rows.append(_with(row, status=f"not measured: {why}"))
            continue
        try:
            kernel = _compiled(expr, {**base, name: lay}, options, threads)
            args = {**others, name: converted}
            kernel(**args)
            kernel_s = _median(kernel, args)
        except SpfError as exc:
            rows.append(_with(row, status=f"pruned: {str(exc).splitlines()[0]}"))
            continue
        seconds = 0.0 if lay == own else _timed(source, lay)    # its code compiled already
        results.append((lay, converted, kernel, _with(
            row, kernel_s=kernel_s, convert_s=seconds, options=tuple(options.items()))))
    own_s = next((r.kernel_s for lay, _, _, r in results if lay == own), None)

    def cost(item: tuple) -> float:
        row = item[3]
        return row.kernel_s if calls is None else row.convert_s + calls * row.kernel_s
    results.sort(key=cost)
    done = []
    for k, (lay, _, _, row) in enumerate(results):
        mine, conv = float(row.kernel_s or 0.0), float(row.convert_s or 0.0)
        even = conv / (own_s - mine) if own_s is not None and lay != own and mine < own_s \
            else None
        done.append(_with(row, break_even_calls=even, status="chosen" if k == 0 else "measured"))
    best = (results[0][0], results[0][1], results[0][2], done[0]) if results else None
    return done + rows, best


def _compiled(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any],
              threads: int) -> CompiledKernel:
    """The kernel, built once per process (a cached decision then costs no code
    generation), with ``threads`` OpenMP threads."""
    key = (expr, tuple(sorted((n, lay.key) for n, lay in layouts.items())),
           tuple(sorted(options.items())))
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = Kernel(expr, dict(layouts), **options).compile()
    if threads > 1 and kernel.kernel.parallel_loop:
        kernel.set_num_threads(threads)
    return kernel


def _median(kernel: CompiledKernel, args: Mapping[str, Any]) -> float:
    """The median time of a call: at least REPEATS calls, more (up to 200) until 20 ms
    were spent, so that a microsecond kernel is not decided by one timer tick."""
    times: list[float] = []
    while len(times) < REPEATS or (sum(times) < 0.02 and len(times) < 200):
        t0 = time.perf_counter()
        kernel(**args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _timed(tensor: Tensor, layout: Layout) -> float:
    """A conversion's time, its code already compiled by a first conversion."""
    t0 = time.perf_counter()
    tensor.convert(layout)
    return time.perf_counter() - t0


def _with(row: Row, **changes: Any) -> Row:
    return Row(**{**asdict(row), **changes})


# the cache ---------------------------------------------------------------------------------
def signature(tensor: Tensor) -> dict[str, Any]:
    """The structure a decision depends on, coarsely: the shape and the number of entries
    (powers of two), the row lengths' median, 90th percentile and maximum and the spread of
    the column offsets from the diagonal (log2 buckets): matrices of one family share it."""
    rows, cols = _coordinates(tensor)
    n = len(rows)

    def bucket(x: float) -> int:
        return int(math.log2(x + 1))
    lengths = np.bincount(rows, minlength=tensor.shape[0]) if tensor.shape[0] else np.zeros(1)
    offsets = np.abs(cols - rows) if n else np.zeros(1)
    return {"shape": [bucket(s) for s in tensor.shape], "nnz": bucket(n),
            "rows": [bucket(float(np.percentile(lengths, q))) for q in (50, 90, 100)],
            "offsets": [bucket(float(np.percentile(offsets, q))) for q in (50, 90, 100)],
            "dtype": tensor.values.dtype.name}


def _coordinates(tensor: Tensor) -> tuple[np.ndarray, np.ndarray]:
    coo = tensor.to_scipy().tocoo() if tensor.layout.order == 2 else None
    if coo is None:
        raise ArgumentError("tune: only matrices (order 2) are tuned yet")
    return coo.row.astype(np.int64), coo.col.astype(np.int64)


def _cache_key(expr: str, name: str, tensor: Tensor, threads: int,
               options: Mapping[str, Any], calls: int | None, names: list[str] | None) -> str:
    text = json.dumps({"expr": expr, "operand": name, "threads": threads, "calls": calls,
                       "options": sorted(options), "layouts": names or layout_names(),
                       "signature": signature(tensor)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _path(key: str) -> Path:
    return cache_dir() / "tune" / f"{key}.json"


def _cached(key: str) -> dict[str, Any] | None:
    try:
        return json.loads(_path(key).read_text())
    except (OSError, ValueError):
        return None


def _store(key: str, decision: Mapping[str, Any]) -> None:
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.time_ns()}.tmp")
        tmp.write_text(json.dumps(decision))
        tmp.replace(path)           # atomic: a concurrent reader sees all or nothing
    except OSError:
        pass                        # a read-only cache: the decision is just not kept


# operands ----------------------------------------------------------------------------------
def _is_sparse(value: Any) -> bool:
    return isinstance(value, Tensor) or hasattr(value, "tocsr")


def _as_tensor(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "tocsr"):
        return Tensor.from_scipy("CSR", value)
    return value


def _positive(what: str, n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArgumentError(f"tune: {what} must be a positive integer, got {n!r}")
    return n
