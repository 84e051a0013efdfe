"""``spf.tune``: the layouts and options of a kernel chosen for the user's own data.

For the sparse operand, every layout on the search path (``$SPF_LAYOUT_PATH``, then the
shipped ones) of the operand's order is a candidate, with its integer parameters at their
defaults and at half and twice them.  The storage of each is estimated by converting
samples of the operand (its first rows holding about 1/32 and 1/8 of its entries:
:meth:`spf.Tensor.leading`; a small operand is converted whole) with the generated
conversions: the feature that decides a memory-bound kernel, the bytes read per call, with
the padding, block fill, slice widths and diagonals of every layout a user can write, and no
format named.  A layout that cannot hold a sample (a conversion error, more than 75% padding)
or would store more than 8 times the operand's own layout is pruned with the reason.  The
smallest survivors are converted in full (timed), compiled and measured on the data with
the requested thread count; then the options that change the fastest one's code
(``reassociate``; one thread when several were asked for; the innermost loop unrolled for
short rows; cache blocking of a nest that sweeps its output once per iteration of a
dependent outer loop; the loops of small constant extent innermost, a SELL slice's rows
kept in registers across its slots).  The choice is the fastest
kernel, or, given ``calls``, the smallest conversion time plus ``calls`` kernel calls.  The
decision is kept on disk keyed by a signature of the operand's structure, so a second
matrix of the same family skips the measurement.
"""
from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .back.register_block import MAX_LANES
from .binding import (
    bind_operands,
    index_width,
    infer_operand,
    operand_type,
    parsed_statement,
    split_keywords,
    typed_options,
)
from .concurrency import symbolic
from .errors import ArgumentError, GuardLoopWarning, SpfError, warn_user
from .front.functions import FUNCTIONS, SERIALS, definitions
from .front.layout import Layout
from .front.layout_path import layout_names, load_layout
from .front.storage import storage_or_none
from .front.value_types import VALUE_TYPES
from .kernel import Kernel
from .middle.scan import LevelKind
from .runtime.build import cache_dir
from .runtime.compiled import CompiledKernel
from .runtime.memory import allocation_limit
from .tensor import Tensor

MEASURED = 8            # candidates measured per operand by default
_kernels: dict[tuple, CompiledKernel] = {}      # built in this process, by statement
REPEATS = 5             # kernel calls timed per candidate (the median is kept)
SAMPLED_ABOVE = 1 << 16  # operands with more entries: storage estimated on samples
OVER_OWN = 8            # a candidate storing more than this times the operand's own: pruned
WINDOW = 1 << 14        # entries (and rows) the signature's quantiles, diagonals and
#                         blocks look at
CONFIRMED = 3           # the fastest candidates timed a second time, after the others
TILE = 2048             # iterations of a cache-blocked inner loop (its output block: 16 KB)
UNROLL = 8              # trip counts the innermost loop is unrolled for (short rows)


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
        what = self.layout + "".join(f" {k}={v}" for k, v in self.params + self.options
                                     if (k, v) != ("parallel", True) and k != "dtype")
        times = "" if self.kernel_s is None else (
            f", kernel {self.kernel_s * 1e3:.3g} ms, conversion {self.convert_s * 1e3:.3g} ms"
            if self.convert_s is not None else f", kernel {self.kernel_s * 1e3:.3g} ms")
        even = "" if self.break_even_calls is None else \
            f", pays off after {self.break_even_calls:.3g} calls"
        return f"{self.operand}: {what}{times}{even}: {self.status}"


@dataclass(frozen=True)
class _Held:
    """The tuned operand's conversion and what it was converted from: the Tensor given
    (``given``: a Tensor is immutable), or, for other data (a scipy matrix its owner may
    change in place), the layout, shape and copies of the arrays it was bound to
    (``arrays``; None where it needed no conversion: it is then bound at every call)."""

    converted: Tensor
    given: Tensor | None
    layout: Layout
    shape: tuple[int, ...]
    arrays: tuple[tuple[str, Any], ...] | None

    @classmethod
    def of(cls, value: Any, bound: Tensor, converted: Tensor) -> _Held:
        given = value if isinstance(value, Tensor) else None
        arrays = None if given is not None or converted is bound else tuple(
            (n, a.copy() if isinstance(a, np.ndarray) else a) for n, a in bound.fields.items())
        return cls(converted, given, bound.layout, bound.shape, arrays)

    def holds(self, value: Any, bound: Tensor | None = None) -> bool:
        """Whether ``value`` is what was converted: the Tensor given, or (``bound``: as
        spf.evaluate binds it) data of the same layout, shape and arrays, byte for byte."""
        if bound is None:
            return self.given is not None and value is self.given
        return self.arrays is not None and bound.layout == self.layout \
            and bound.shape == self.shape and all(_same(bound.fields[n], a)
                                                  for n, a in self.arrays)


@dataclass
class Tuned:
    """The tuned kernel: ``kernel`` (compiled), ``operands`` (converted, by name),
    ``layouts``, ``options``, ``report`` (one :class:`Row` per candidate), whether the
    decision came from the cache (``cached``) and the seconds it took (``decision_s``: the
    signature, the lookup or the measurements, the kernel; not the checks of the operands a
    call makes too (a scipy matrix wrapped into a validated Tensor) nor the final conversion
    of the operand, which is the chosen row's ``convert_s``).  Call it like the kernel: the
    tuned operand is bound as :func:`spf.evaluate` binds it (a scipy matrix: checked as it
    is now) and its conversion reused when it is the Tensor that was tuned or holds the same
    arrays as the data that was (compared byte for byte: a matrix changed in place since is
    converted again); any other is converted."""

    kernel: CompiledKernel
    operands: dict[str, Any]
    layouts: dict[str, Layout]
    options: dict[str, Any]
    report: list[Row]
    cached: bool = False
    decision_s: float = 0.0
    _held: dict[str, _Held] = field(default_factory=dict)   # the tuned operand, by name

    def __call__(self, **operands: Any) -> Any:
        args = {}
        for name, value in operands.items():
            lay = self.layouts.get(name)
            if name in self._held:
                args[name] = self._tuned_operand(name, value)
            elif lay is not None and _is_sparse(value):
                tensor = _as_tensor(value)
                args[name] = tensor if tensor.layout == lay else tensor.convert(lay)
            else:
                args[name] = value
        return self.kernel(**args)

    def _tuned_operand(self, name: str, value: Any) -> Any:
        """``value`` for the tuned operand ``name``: its held conversion when it holds what
        was converted, else bound and converted (and held for the next call)."""
        held, lay = self._held[name], self.layouts[name]
        if held.holds(value):
            return held.converted
        bound, _ = infer_operand(name, value, index_width(None, [value]), "tune",
                                 "a Tensor")
        if bound.layout == lay:
            return bound
        if held.holds(value, bound):
            return held.converted
        converted = bound.convert(lay)
        self._held = {**self._held, name: _Held.of(value, bound, converted)}
        return converted

    def describe(self) -> str:
        head = "tuned (cached decision)" if self.cached else "tuned"
        chosen = ", ".join(f"{n}: {lay.name}" for n, lay in self.layouts.items())
        return "\n".join([f"{head}: {chosen}; options {self.options}"]
                         + [f"  {r}" for r in self.report])


def tune(expr: str, *, budget_s: float | None = None, calls: int | None = None,
         candidates: int | Sequence[str] | None = None, threads: int | None = None,
         layouts: Mapping[str, str | Layout] | None = None, reassociate: bool = True,
         **operands: Any) -> Tuned:
    """Choose layouts and options for ``expr`` on ``operands`` (see the module docstring).

    ``budget_s``: stop estimating and measuring once this much time went into deciding (the
    best so far is kept); ``calls``: the number of calls expected (weighs conversion against
    kernel time; default: the fastest kernel); ``candidates``: how many candidates (layouts
    and option variants) are measured (default 8), or the names of the layouts to try;
    ``threads``: OpenMP threads measured and used (default: one; more builds the kernels
    with ``parallel=True``, and one thread is tried too); ``layouts``: the layouts of
    operands not to tune (others: their own); ``reassociate``: whether a kernel summing in
    another order (SIMD partial sums: rounding differs from the sequential sum) may be
    chosen.  The operands are checked and bound as :func:`spf.evaluate` binds them, and
    keep their value types."""
    threads = _positive("threads", 1 if threads is None else threads)
    names = None if candidates is None or isinstance(candidates, int) else list(candidates)
    measured = MEASURED if names is not None or candidates is None else \
        _positive("candidates", candidates)
    if calls is not None:
        _positive("calls", calls)
    start = time.perf_counter()     # deciding starts: the operands are checked and wrapped
    name, tensors, base = _bound(expr, dict(layouts or {}), operands)
    source = tensors[name]
    others = {n: v for n, v in tensors.items() if n != name}
    defaults = typed_options({"parallel": True} if threads > 1 else {}, tensors)
    key = _cache_key(expr, name, source, {**others, **base}, threads, defaults, calls, names,
                     reassociate)
    hit = _reused(_cached(key), key, expr, name, source, base, threads, defaults)
    if hit is not None:
        lay, options, kernel, converted, row = hit
        kernel(**others, **{name: converted})       # the operands checked as a call does
        return Tuned(kernel, {**tensors, name: converted}, {**base, name: lay}, options,
                     [row], True, time.perf_counter() - start - float(row.convert_s),
                     {name: _Held.of(operands[name], source, converted)})
    _checked(expr, {**base, name: source.layout}, defaults, threads, tensors)
    deadline = None if budget_s is None else start + budget_s
    rows, pool = _estimate_candidates(name, _Sampled.of(source), names, deadline)
    pool = _own_first(pool, source, name, names is None)
    trial = _Trial(expr, name, source, others, base, threads, calls, deadline, rows=rows)
    variants = _option_variants(defaults, threads, reassociate)
    layouts_measured = max(1, measured - len(variants) - 1)     # and one for tiling
    for k, (_, lay, row) in enumerate(pool):
        if k >= layouts_measured or trial.spent():
            why = "the budget was spent" if k < layouts_measured else \
                f"not among the {layouts_measured} measured: the operand's own and those " \
                "storing the fewest bytes"
            trial.rows.append(_with(row, status=f"not measured: {why}"))
            continue
        trial.run(lay, defaults, row)
    _try_options(trial, variants, defaults)
    trial.confirm()
    rows, best = trial.report()
    if best is None:
        raise SpfError(f"tune: no candidate layout of {name!r} could be measured:\n"
                       + "\n".join(f"  {r}" for r in rows))
    lay, options, converted, kernel, row = best
    _store(key, {"layout": lay.name, "params": list(row.params),
                 "options": {k: v for k, v in options.items() if k != "dtype"}})
    return Tuned(kernel, {**tensors, name: converted}, {**base, name: lay}, options, rows,
                 False, time.perf_counter() - start - float(row.convert_s or 0.0),
                 {name: _Held.of(operands[name], source, converted)})


def _bound(expr: str, fixed: Mapping[str, str | Layout], operands: Mapping[str, Any]
           ) -> tuple[str, dict[str, Any], dict[str, Layout]]:
    """(the operand to tune, the operands bound as :func:`spf.evaluate` binds them (the same
    checks and errors: a misspelt keyword, a missing operand, data spf cannot take), the
    layouts of the others that are tensors, each holding its operand's value type)."""
    parsed = parsed_statement(expr)
    _, given = split_keywords("tune", parsed.text, set(parsed.written_tensors), operands, ())
    bound, chosen = bind_operands(parsed, given, fixed, index_width(None, given.values()),
                                  "tune")
    tuned = [n for n, v in bound.items() if isinstance(v, Tensor) and v.layout.dense_array
             is None and n not in fixed]
    if len(tuned) != 1:
        raise ArgumentError(f"tune: needs exactly one sparse operand to tune among "
                            f"{sorted(given)}, found {tuned or 'none'} (give the others' "
                            "layouts with layouts=)")
    base = {}
    for n, lay in {**fixed, **chosen}.items():      # the output's too, when given
        if n != tuned[0]:
            lay = load_layout(lay) if isinstance(lay, str) else lay
            vt = None if n not in given or isinstance(fixed.get(n), Layout) else \
                operand_type(given[n])      # a Layout object brings its own value type
            base[n] = lay if vt is None else lay.with_value_type(vt)
    return tuned[0], bound, base


def _checked(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any],
             threads: int, operands: Mapping[str, Any]) -> None:
    """The operands checked as a call checks them (extents that must agree, values the
    kernel's types hold), by a call of the kernel on the operand's own layout (the first
    measured), before anything is measured: an ArgumentError is the caller's, raised as
    :func:`spf.evaluate` raises it (a kernel that cannot be built is reported with the
    candidates)."""
    try:
        kernel = _compiled(expr, layouts, options, threads)
    except ArgumentError:
        raise
    except SpfError:
        return
    kernel(**operands)


def _own_first(pool: list[tuple[int, Layout, Row]], source: Tensor, name: str,
               add: bool) -> list[tuple[int, Layout, Row]]:
    """The pool with the operand's own layout first (always measured: the baseline the
    break-even calls are counted against), added when it is not on the search path and
    ``add``."""
    own = [p for p in pool if p[1] == source.layout]
    if not own and add:
        lay = source.layout
        own = [(_nbytes(source), lay, Row(name, lay.name, tuple((lay.params or {}).items()),
                                           (), _nbytes(source)))]
    return own + [p for p in pool if p[1] != source.layout]


def _reused(hit: Mapping[str, Any] | None, key: str, expr: str, name: str, source: Tensor,
            base: Mapping[str, Layout], threads: int, defaults: Mapping[str, Any]
            ) -> tuple | None:
    """The cached decision applied to ``source``: its layout, options (the operands' value
    types from ``defaults``), kernel, the operand converted and the report's row; None when
    there is none, when it cannot be used (a warning says why: it is then discarded), or
    when its layout cannot hold this operand after all (a signature is coarse: then the
    operand is measured)."""
    if hit is None:
        return None
    try:
        lay = _candidate(hit["layout"], source, dict(hit["params"]))
        options = {**{k: v for k, v in defaults.items() if k == "dtype"}, **hit["options"]}
        kernel = _compiled(expr, {**base, name: lay}, options, threads)
    except SpfError as exc:
        _discard(key, str(exc).splitlines()[0])
        return None
    try:
        t0 = time.perf_counter()
        with allocation_limit(OVER_OWN * _nbytes(source),
                              f"spf.tune: {OVER_OWN}x the operand's own layout"):
            converted = source if lay == source.layout else source.convert(lay)
        seconds = time.perf_counter() - t0
    except SpfError:
        return None
    row = Row(name, lay.name, tuple(hit["params"]), tuple(options.items()), convert_s=seconds,
              status="chosen (cached decision: measured on a matrix of the same structure)")
    return lay, options, kernel, converted, row


def _try_options(trial: _Trial, variants: list[dict[str, Any]],
                 defaults: dict[str, Any]) -> None:
    """Measure the option variants on the fastest layout with the default options, each
    where it changes the generated code (else reported as not measured, and why)."""
    if not trial.results:
        return
    lay, _, converted, _, row = min(trial.results, key=lambda r: trial.cost(r[4]))
    assert converted is not None            # the best keeps its converted operand
    layouts = {**trial.base, trial.name: lay}
    default = _source(trial.expr, layouts, defaults)
    tensors = {*layouts, *trial.others}
    shaped = [o for o in (_tiled(trial.expr, layouts, defaults, tensors),
                          _lanes_inner(trial.expr, layouts, defaults, tensors)) if o]
    for options in variants + shaped:
        why = "the budget was spent" if trial.spent() else ""
        try:
            if not why and _source(trial.expr, layouts, options) == default:
                why = "the same code as the default options"
        except SpfError as exc:
            trial.rows.append(_with(row, options=tuple(options.items()),
                                    status=f"pruned: {str(exc).splitlines()[0]}"))
            continue
        if why:
            trial.rows.append(_with(row, options=tuple(options.items()), kernel_s=None,
                                    status=f"not measured: {why}"))
        else:
            trial.run(lay, options, row, converted)


def _tiled(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any],
           tensors: set[str]) -> dict[str, Any] | None:
    """``options`` with cache blocking where the default nest sweeps its innermost loop's
    whole range once per iteration of an outer loop carrying a dependence (DIA: the rows
    once per diagonal, the output read and written each time): the innermost loop cut into
    :data:`TILE` iterations, its tile loop outermost, so that each tile's block of the
    output stays in cache over the outer loop; None where the nest is not so."""
    loops = _kernel(expr, layouts, options).analysis().loops
    if len(loops) < 2 or not loops[0].carried or loops[-1].carried:
        return None
    names = [_dotted(loop.var, tensors) for loop in loops]
    return {**options, "tile": {names[-1]: TILE}, "order": [f"{names[-1]}_tile", *names]}


def _lanes_inner(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any],
                 tensors: set[str]) -> dict[str, Any] | None:
    """``options`` with the loops of small constant extent innermost (a SELL slice's rows
    inside its slots: the slice's sums are then kept in registers across the slots and the
    rows run as SIMD lanes); None where they already are, or there are none."""
    loops = [lv for lv in _kernel(expr, layouts, options).nest.levels
             if lv.kind is LevelKind.LOOP]
    lanes = [lv for lv in loops if (span := lv.constant_span()) and span[1] <= MAX_LANES]
    order = [lv for lv in loops if lv not in lanes] + lanes
    if not lanes or order == loops:
        return None
    return {**options, "order": [_dotted(lv.var, tensors) for lv in order]}


def _dotted(var: str, tensors: set[str]) -> str:
    """A loop variable of the generated C (``A_pi``) as options name it (``A.pi``)."""
    for name in sorted(tensors, key=len, reverse=True):
        if var.startswith(name + "_"):
            return f"{name}.{var[len(name) + 1:]}"
    return var                          # a logical index: named as it is


# candidates --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Sampled:
    """The operand and the samples its candidates' storage is estimated on: its first rows
    (:meth:`Tensor.leading`) holding about 1/32 and 1/8 of its entries; an operand of at
    most :data:`SAMPLED_ABOVE` entries is its own single, exact sample."""

    tensor: Tensor
    samples: tuple[tuple[int, int, Tensor], ...]       # (rows, entries, sample)
    entries: int

    @classmethod
    def of(cls, tensor: Tensor) -> _Sampled:
        rows = _coordinates(tensor)[0]
        n = len(rows)
        if n <= SAMPLED_ABOVE or tensor.shape[0] < 2:
            return cls(tensor, ((tensor.shape[0], n, tensor),), n)
        ends = np.cumsum(np.bincount(rows, minlength=tensor.shape[0]))
        samples = []
        for part in (32, 8):
            m = min(int(np.searchsorted(ends, n // part)) + 1, tensor.shape[0])
            samples.append((m, int(ends[m - 1]), tensor.leading(m, trim=True)))
        return cls(tensor, tuple(samples), n)

    def where(self) -> str:
        return "" if len(self.samples) == 1 else \
            f" (estimated on its first {self.samples[0][0]} and {self.samples[1][0]} rows)"

    def _converted(self, sample: Tensor, lay: Layout) -> Tensor:
        try:
            with allocation_limit(OVER_OWN * _nbytes(self.tensor),
                                  f"spf.tune: {OVER_OWN}x the operand's own layout"):
                return sample if lay == sample.layout else sample.convert(lay)
        except SpfError as exc:
            if len(self.samples) == 1:
                raise
            raise SpfError(f"{str(exc).splitlines()[0]} (a sample of its first "
                            f"{sample.shape[0]} rows)") from exc

    def estimate(self, lay: Layout, limit: float) -> int:
        """The bytes ``lay`` would store for the whole operand: converted exactly, or
        extrapolated linearly in the entries from the samples' conversions (the first
        sample alone already refuses a layout over ``limit`` bytes); SpfError (with the
        conversion's reason) when it cannot hold a sample, or over the limit."""
        points: list[tuple[int, int]] = []
        for _, entries, sample in self.samples:
            size = _nbytes(self._converted(sample, lay))
            guess = size if len(self.samples) == 1 else \
                size * self.entries / max(entries, 1) if not points else \
                max(size, points[0][1] + (size - points[0][1]) * (self.entries - points[0][0])
                    / max(entries - points[0][0], 1))
            if guess > limit:
                raise SpfError(f"it would store about {guess / 1e6:.3g} MB, over "
                               f"{OVER_OWN}x the operand's own layout{self.where()}")
            points.append((entries, size))
        return int(guess)


def _estimate_candidates(name: str, sampled: _Sampled, names: list[str] | None,
                         deadline: float | None) -> tuple[list[Row], list[tuple]]:
    """Every layout of the operand's order (``names``: those only) with parameter
    variants, its storage estimated on the samples (pruned with the reason when it cannot
    hold them); the survivors by the bytes they would store."""
    tensor = sampled.tensor
    limit = OVER_OWN * _nbytes(tensor)
    rows: list[Row] = []
    pool: list[tuple[int, Layout, Row]] = []
    for lay_name in names if names is not None else layout_names():
        if deadline is not None and time.perf_counter() > deadline:
            rows.append(Row(name, lay_name, (), (), status="not tried: the budget was spent"))
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
                lay = _candidate(lay_name, tensor, params)
                size = sampled.estimate(lay, limit)
            except SpfError as exc:
                rows.append(Row(name, lay_name, tuple(params.items()), (),
                                status=f"pruned: {str(exc).splitlines()[0]}"))
                continue
            pool.append((size, lay, Row(name, lay_name, tuple(params.items()), (), size)))
    pool.sort(key=lambda p: (p[0], p[1].name))
    return rows, pool


def _candidate(layout: str, operand: Tensor, params: Mapping[str, int]) -> Layout:
    """Layout ``layout`` with ``params``, holding ``operand``'s index and value types."""
    return load_layout(layout, operand.layout.index_type, **params).with_value_type(
        operand.layout.value_type)


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
@dataclass
class _Trial:
    """What is measured: the statement, the tuned operand (``name``, ``source``), the other
    operands and layouts, the thread count and the calls weighed (None: fastest kernel)."""

    expr: str
    name: str
    source: Tensor
    others: Mapping[str, Any]
    base: Mapping[str, Layout]
    threads: int
    calls: int | None
    deadline: float | None
    results: list[tuple[Layout, dict[str, Any], Tensor | None, CompiledKernel, Row]] = \
        field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def spent(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def cost(self, row: Row) -> float:
        return float(row.kernel_s or 0.0) if self.calls is None else \
            float(row.convert_s or 0.0) + self.calls * float(row.kernel_s or 0.0)

    def run(self, lay: Layout, options: dict[str, Any], row: Row,
            converted: Tensor | None = None) -> None:
        """Convert (timed; its code compiled on the samples already), compile and time one
        candidate; only the best so far keeps its converted operand."""
        try:
            if converted is None:       # else: the row's conversion, measured already
                t0 = time.perf_counter()
                with allocation_limit(OVER_OWN * _nbytes(self.source),
                                      f"spf.tune: {OVER_OWN}x the operand's own layout"):
                    converted = self.source if lay == self.source.layout else \
                        self.source.convert(lay)
                row = _with(row, convert_s=time.perf_counter() - t0
                            if lay != self.source.layout else 0.0)
            row = _with(row, bytes=_nbytes(converted), options=tuple(options.items()))
            kernel = _compiled(self.expr, {**self.base, self.name: lay}, options, self.threads)
            args = {**self.others, self.name: converted}
            row = _with(row, kernel_s=_median(kernel, args))
        except SpfError as exc:
            self.rows.append(_with(row, status=f"pruned: {str(exc).splitlines()[0]}"))
            return
        self.results.append((lay, options, converted, kernel, row))
        ranked = sorted(range(len(self.results)), key=lambda k: self.cost(self.results[k][4]))
        kept = {id(self.results[k][2]) for k in ranked[:CONFIRMED]}
        self.results = [r if id(r[2]) in kept else (*r[:2], None, *r[3:])
                        for r in self.results]

    def confirm(self) -> None:
        """Time the :data:`CONFIRMED` fastest again, after all the others ran, and keep each
        one's faster median: a candidate that drew a slow moment of a shared machine is
        not lost, nor is one that drew a fast moment chosen on it alone."""
        ranked = sorted(range(len(self.results)), key=lambda k: self.cost(self.results[k][4]))
        for k in ranked[:CONFIRMED]:
            lay, options, converted, kernel, row = self.results[k]
            if converted is None or self.spent():
                continue
            again = _median(kernel, {**self.others, self.name: converted})
            self.results[k] = (lay, options, converted, kernel,
                               _with(row, kernel_s=min(float(row.kernel_s or again), again)))

    def report(self) -> tuple[list[Row], tuple | None]:
        """The rows, the chosen first, each measured one with the calls after which it
        beats the operand's own layout with the default options."""
        own = self.source.layout
        own_s = next((r.kernel_s for lay, opts, _, _, r in self.results
                      if lay == own and opts == self.results[0][1]), None)
        self.results.sort(key=lambda r: self.cost(r[4]))
        done = []
        for k, (lay, _, _, _, row) in enumerate(self.results):
            mine, conv = float(row.kernel_s or 0.0), float(row.convert_s or 0.0)
            even = conv / (own_s - mine) if own_s is not None and lay != own \
                and mine < own_s else None
            done.append(_with(row, break_even_calls=even,
                              status="chosen" if k == 0 else "measured"))
        best = self.results[0] if self.results else None
        return done + self.rows, best


def _option_variants(options: Mapping[str, Any], threads: int,
                     reassociate: bool) -> list[dict[str, Any]]:
    """The options tried on the fastest layout besides the default ones: ``reassociate``
    (SIMD partial sums; when allowed), and one thread where several were asked for (an
    operand too small to share out)."""
    tried = []
    if reassociate:
        tried.append({**options, "reassociate": True})
    if threads > 1:
        tried.append({**options, "parallel": False})
    tried.append({**options, "unroll": UNROLL})
    return tried


def _source(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any]) -> str:
    return _kernel(expr, layouts, options).c_source()


def _compiled(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any],
              threads: int) -> CompiledKernel:
    """The kernel, built once per process (a cached decision then costs no code
    generation; the definitions of the functions it calls are part of the key), with
    ``threads`` OpenMP threads."""
    key = (expr, definitions(expr), tuple(sorted((n, lay.key) for n, lay in layouts.items())),
           json.dumps(options, sort_keys=True))
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = _kernel(expr, layouts, options).compile()
    if threads > 1 and kernel.kernel.parallel_loop:
        kernel.set_num_threads(threads)
    return kernel


def _kernel(expr: str, layouts: Mapping[str, Layout], options: Mapping[str, Any]) -> Kernel:
    """A candidate's kernel; its GuardLoopWarning (a guard loop no find replaces) is not
    shown: the candidate is spf's, not the user's, and is measured like any other (the
    chosen kernel's ``analysis()`` and report still say it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GuardLoopWarning)
        return Kernel(expr, dict(layouts), **options)


def _median(kernel: CompiledKernel, args: Mapping[str, Any]) -> float:
    """The median time of a call after warm-up calls (at least 3 and 5 ms: caches, page
    tables, the clock frequency; the first candidate measured is not to pay for them): at
    least REPEATS calls, more (up to 200) until 20 ms were spent, so that a microsecond
    kernel is not decided by one timer tick.  A dense output the statement assigns is
    allocated once and passed back (a fresh one per call would time the allocator: its page
    faults fell on the first candidates measured, before the allocator kept freed memory)."""
    t0 = time.perf_counter()
    out = kernel(**args)
    if isinstance(out, np.ndarray) and kernel.output not in args \
            and not kernel.kernel.expr.accumulate:
        args = {**args, kernel.output: out}
    for k in range(200):
        kernel(**args)
        if k >= 2 and time.perf_counter() - t0 > 0.005:
            break
    times: list[float] = []
    while len(times) < REPEATS or (sum(times) < 0.02 and len(times) < 200):
        t0 = time.perf_counter()
        kernel(**args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _with(row: Row, **changes: Any) -> Row:
    return Row(**{**asdict(row), **changes})


def _nbytes(tensor: Tensor) -> int:
    return sum(a.nbytes for a in tensor.fields.values() if isinstance(a, np.ndarray))


# the cache ---------------------------------------------------------------------------------
def signature(tensor: Tensor) -> dict[str, Any]:
    """The structure a decision depends on, coarsely (log2 buckets unless said): the shape,
    the entries, the outer segments' lengths (rows of a row-major layout: median, 90th
    percentile, maximum), the distance of the entries from the diagonal (median, 90th
    percentile, maximum) and the shares on and below and on and above it (in quarters: a
    triangular matrix is told from a full one), and, over a window of 16,384 consecutive
    stored entries, the entries per distinct diagonal and per occupied 8 x 8 block: matrices
    of one family share it.  Quantiles and shares are taken over at most 16,384 entries (and
    rows) spread over the matrix; a layout whose storage is a dense level over a compressed one
    gives its lengths and sampled coordinates from its pointer and coordinate arrays
    without a pass over its entries."""
    lengths, (rows, cols), (wr, wc), n = _structure(tensor)

    def bucket(x: float) -> int:
        return int(math.log2(x + 1))
    offsets = cols - rows if len(rows) else np.zeros(1, np.int64)
    blocks = _distinct((wr // 8) * (tensor.shape[1] // 8 + 1) + wc // 8)
    diagonals = _distinct(wc - wr)
    quantiles = [50, 90, 100]
    return {"shape": [bucket(s) for s in tensor.shape], "nnz": bucket(n),
            "rows": [bucket(float(q)) for q in np.percentile(
                lengths[::max(1, len(lengths) // WINDOW)], quantiles[:2])]
            + [bucket(float(lengths.max()))] if len(lengths) else [0, 0, 0],
            "offsets": [bucket(float(q)) for q in np.percentile(np.abs(offsets), quantiles)],
            "lower": round(4 * float(np.mean(offsets <= 0))),
            "upper": round(4 * float(np.mean(offsets >= 0))),
            "per_diagonal": bucket(len(wr) / max(diagonals, 1)),
            "per_block": bucket(len(wr) / max(blocks, 1)),
            "dtype": tensor.values.dtype.name}


Coordinates = tuple[np.ndarray, np.ndarray]


def _distinct(values: np.ndarray) -> int:
    """How many distinct values (sorted: numpy's hashed unique is slower on these sizes)."""
    ordered = np.sort(values)
    return int(np.count_nonzero(np.diff(ordered))) + 1 if len(ordered) else 0


def _structure(tensor: Tensor) -> tuple[np.ndarray, Coordinates, Coordinates, int]:
    """The outer segments' lengths, the (row, column) coordinates of at most
    :data:`WINDOW` entries spread over the storage and of a window of as many consecutive
    ones, and the number of entries."""
    storage = storage_or_none(tensor.layout)
    level = storage.levels[-1] if storage is not None else None
    arrays = [a for _, a in level.coords if a is not None] if level is not None else []
    if tensor.layout.order == 2 and storage is not None and level is not None \
            and level.pointer is not None and arrays \
            and storage.is_dense_over_compressed() and storage.order in ((0, 1), (1, 0)):
        ptr = np.asarray(tensor.fields[level.pointer])[:tensor.shape[storage.order[0]] + 1]
        crd = np.asarray(tensor.fields[arrays[0]])
        n = int(ptr[-1]) if len(ptr) else 0

        def at(positions: np.ndarray) -> Coordinates:
            outer = np.searchsorted(ptr, positions, side="right").astype(np.int64) - 1
            inner = crd[positions].astype(np.int64)
            return (outer, inner) if storage.order == (0, 1) else (inner, outer)
        start = max(0, n // 2 - WINDOW // 2)
        return (np.diff(ptr), at(np.arange(0, n, max(1, n // WINDOW))),
                at(np.arange(start, min(n, start + WINDOW))), n)
    rows, cols = _coordinates(tensor)
    n = len(rows)
    step, start = max(1, n // WINDOW), max(0, n // 2 - WINDOW // 2)
    return (np.bincount(rows, minlength=tensor.shape[0]), (rows[::step], cols[::step]),
            (rows[start:start + WINDOW], cols[start:start + WINDOW]), n)


def _coordinates(tensor: Tensor) -> Coordinates:
    coo = tensor.to_scipy().tocoo() if tensor.layout.order == 2 else None
    if coo is None:
        raise ArgumentError("tune: only matrices (order 2) are tuned yet")
    return coo.row.astype(np.int64), coo.col.astype(np.int64)


def _cache_key(expr: str, name: str, tensor: Tensor, others: Mapping[str, Any],
               threads: int, options: Mapping[str, Any], calls: int | None,
               names: list[str] | None, reassociate: bool) -> str:
    """The decision's key: the statement and the definitions of the functions it calls,
    what was asked, the tuned operand's signature (its value type included) and the other
    operands' layouts with their value types (a sparse x is another kernel than a dense
    one), dense shapes (powers of two) and types, or scalar types."""
    text = json.dumps({"expr": expr, "operand": name, "threads": threads, "calls": calls,
                       "functions": [_definition(f) for f, _ in definitions(expr)],
                       "own": repr(tensor.layout.key),
                       "reassociate": reassociate,
                       "options": sorted(options), "layouts": names or layout_names(),
                       "signature": signature(tensor),
                       "others": {n: _described(v) for n, v in others.items()}},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _described(value: Any) -> Any:
    """An operand other than the tuned one, as the decision depends on it."""
    if isinstance(value, Layout):
        return repr(value.key)
    if isinstance(value, Tensor):
        return repr(value.layout.key)
    array = np.asarray(value) if not isinstance(value, str) else None
    if array is None or array.dtype == object:
        return repr(type(value).__name__)
    if array.ndim == 0:                 # a scalar: its type (a Python number: weakly typed)
        return type(value).__name__ if isinstance(value, (bool, int, float, complex)) \
            else array.dtype.name
    return [[int(math.log2(d + 1)) for d in array.shape], array.dtype.name]


_definitions: dict[tuple[str, int], str] = {}


def _definition(name: str) -> str:
    """Function ``name``'s definition as the same text in every process (a decision kept on
    disk outlives the process): its C and numpy's result type on each kind of value, and
    what Z3 is told of it."""
    serial = SERIALS[name]
    if (name, serial) not in _definitions:
        fn = FUNCTIONS[name]
        args = [f"a{k}" for k in range(fn.arity)]
        parts = [fn.name, str(fn.arity), str(fn.real_only)]
        for vt in (VALUE_TYPES[t] for t in ("bool", "int64", "float64", "complex128")):
            try:
                with np.errstate(all="ignore"):
                    out = fn.numpy(*[np.ones(1, vt.dtype)] * fn.arity)
                parts += [fn.c(args, vt), np.asarray(out).dtype.name]
            except Exception as exc:    # a user's function refusing this type: part of it
                parts.append(type(exc).__name__)
        import z3
        with symbolic:
            term, facts = fn.z3([z3.Real(a) for a in args], z3)
            parts += [str(term), *map(str, facts)]
        _definitions[(name, serial)] = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return _definitions[(name, serial)]


def _path(key: str) -> Path:
    return cache_dir() / "tune" / f"{key}.json"


TUNED_OPTIONS = frozenset({"parallel", "reassociate", "unroll", "tile", "order"})


def _cached(key: str) -> dict[str, Any] | None:
    """The decision kept for ``key``; None when there is none, or when it is corrupt (a
    warning says why; it is measured again and replaced)."""
    try:
        data = _path(key).read_bytes()
    except OSError:
        return None
    try:
        return _valid(json.loads(data))
    except (ValueError, RecursionError) as exc:     # JSON's and UTF-8's errors: ValueErrors
        _discard(key, str(exc) if isinstance(exc, ValueError) else "nested too deeply")
        return None


def _valid(decision: Any) -> dict[str, Any]:
    """``decision`` when it is one as :func:`_store` writes it, else ValueError saying why."""
    if not isinstance(decision, dict) or set(decision) != {"layout", "params", "options"}:
        raise ValueError("not an object with the keys layout, params and options")
    if not isinstance(decision["layout"], str):
        raise ValueError("its layout is not a name")
    params = decision["params"]
    if not isinstance(params, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
            and isinstance(p[1], int) and not isinstance(p[1], bool) for p in params):
        raise ValueError("its params are not a list of [name, integer] pairs")
    options = decision["options"]
    if not isinstance(options, dict) or not set(options) <= TUNED_OPTIONS:
        raise ValueError(f"its options are not an object of {sorted(TUNED_OPTIONS)}")
    return decision


def _discard(key: str, why: str) -> None:
    warn_user(f"spf.tune: the decision kept in {_path(key)} is discarded ({why}); the "
              "candidates are measured again and it is replaced", UserWarning)


def _store(key: str, decision: Mapping[str, Any]) -> None:
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{time.time_ns()}.tmp")
        tmp.write_text(json.dumps(decision))
        tmp.replace(path)           # atomic: a concurrent reader sees all or nothing
    except OSError:
        pass                        # a read-only cache: the decision is just not kept


def _same(array: Any, kept: Any) -> bool:
    """Whether a field equals the copy kept of it, byte for byte (an array) or by value."""
    if not isinstance(kept, np.ndarray):
        return bool(array == kept)
    if not isinstance(array, np.ndarray) or array.dtype != kept.dtype \
            or array.shape != kept.shape:
        return False
    return bool(np.array_equal(_bits(array), _bits(kept)))


def _bits(array: np.ndarray) -> np.ndarray:
    """``array``'s bytes as unsigned integers (NaNs and signed zeros compare as stored)."""
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return flat.view(np.uint64) if flat.size % 8 == 0 else flat


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
