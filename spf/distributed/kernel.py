"""Partitioned runs of a compiled kernel on a Dask cluster (``dask.distributed``).

The partition comes from the kernel's own analysis (:meth:`spf.Kernel.analysis`): the
outermost loop runs over one operand's storage.  When it carries no dependence, ranges of
that operand's first storage coordinate write disjoint slices of the output, so the entries
are cut into ranges balanced by their count and the parts' slices are concatenated
(``rows``).  When it carries a reduction into the output, the entries are cut into parts of
equal size, each part computes a partial output over the whole shape, and the partial
outputs are combined by the semiring's add in a tree on the cluster (``nonzeros``); the
combining step is itself a generated sum kernel.  Parts are cut from the layout's own
storage arrays (its pointer arrays, composed, count the entries under each root position)
and sparse row blocks of the output are joined the same way, level by level; a layout with no
storage description (placed by position: DIA, ELL) goes through its entries and generated
conversions instead.  No format is named here.

Workers receive the kernel pickled with its C source and compile it once each (cached per
process, and in their kernel cache directory).  An operand given as an :class:`spf.Tensor`
(immutable) is cut and scattered once and reused by later calls; other operands are
scattered on every call.  :meth:`DistributedKernel.submit` keeps the result on the cluster
as a Dask collection of parts.

With a ``dask.array`` dense operand the call takes another route (:mod:`.halo`,
:mod:`.arrays`): the sparse operand is cut into 1-D or 2-D blocks renumbered to the columns
they read, each block gathers only those elements from the chunks holding them, and the
result is a lazy ``dask.array`` whose chunks stay on the workers.
"""
from __future__ import annotations

import contextlib
import math
import pickle
import uuid
import weakref
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..kernel import Kernel
from ..runtime.compiled import CompiledKernel
from ..runtime.operands import Operand
from ..tensor import Tensor, tensor_of
from . import arrays, worker
from .halo import HaloPlan, plan_blocks
from .partition import NONZEROS, ROWS, cut, join_rows, partition_of


class DistributedKernel:
    """``f(A=..., x=...)`` like the local call, run in ``parts`` parts on a Dask cluster
    (see the module docstring; ``partition`` says how and why)."""

    def __init__(self, compiled: CompiledKernel[Kernel], client: Any, parts: int | None = None,
                 grid: tuple[int, int] | None = None):
        kernel = compiled.kernel
        if not all(hasattr(client, m) for m in ("scatter", "submit", "gather")):
            raise ArgumentError("distributed: client must be a dask.distributed.Client, got "
                                f"{type(client).__name__}")
        if kernel.expr.aliases:
            tensor = kernel.expr.aliases[0][1]
            raise ArgumentError(f"distributed: {kernel.expr.text!r} reads {tensor!r} twice in "
                                "one product; partitioning such a kernel is not supported "
                                "yet (call it locally)")
        self.compiled, self.client = compiled, client
        workers = len(client.scheduler_info().get("workers", {}))
        self.parts = parts if parts is not None else max(workers, 1)
        if isinstance(self.parts, bool) or not isinstance(self.parts, int) or self.parts < 1:
            raise ArgumentError(f"distributed: parts must be a positive integer, got {parts!r}")
        self.partition = partition_of(kernel)
        self.output = kernel.expr.output.tensor
        kernel.c_source()                       # shipped with the kernel
        self._blobs = {"kernel": pickle.dumps(kernel)}
        if self.partition.mode == NONZEROS and kernel.expr.output.indices:
            self._blobs["combine"] = pickle.dumps(_combining_kernel(kernel))
        self._blob_futures: dict[str, Any] = {}
        name = self.partition.operand           # cut in the layout the caller gives it
        self._operand = Operand(name, kernel.read_densely.get(name, kernel.layouts[name]))
        self._parts_cache, self._shared_cache = _ScatterCache(), _ScatterCache()
        self._plans, self._statics = _ScatterCache(), _ScatterCache()
        self._homes = _ScatterCache()
        self.grid = _checked_grid(grid, self.parts)

    def plan(self, **args: Any) -> HaloPlan:
        """The blocks a call with dask.array operands runs and what each gathers from the
        dense operand's chunks (``args``: the cut operand, and the dense one as a dask.array
        for its chunks; else the plan for chunks like the output's row blocks), with the
        bytes a call moves (:meth:`HaloPlan.bytes_per_call`)."""
        name = self.partition.operand
        tensor = tensor_of(self._operand.tensor(args[name]))
        plan = self._plan(tensor, args.get(name) if isinstance(args.get(name), Tensor) else None)
        dense = arrays.dense_operand(self.compiled.kernel, name, self._row_dim())
        x = args.get(dense)
        return plan.for_chunks(tuple(x.chunks[0])) if x is not None and _is_dask_array(x) \
            else plan

    def forget(self) -> None:
        """Drop what was scattered (operands' parts, the kernel), so the next call scatters
        again: after Dask reported data lost with a worker (the worker plugins holding a
        call's kernel and positions are set up again on restarted workers by Dask)."""
        self._parts_cache.clear()
        self._shared_cache.clear()
        self._statics.clear()
        self._homes.clear()
        self._blob_futures.clear()

    def _check(self, args: dict[str, Any]) -> None:
        if self.partition.operand not in args:
            raise ArgumentError(f"missing argument {self.partition.operand!r}")
        if self.output in args:
            raise ArgumentError(f"distributed: do not pass the output {self.output!r}; the "
                                "parts' outputs are combined into a new one")

    def __call__(self, **args: Any) -> Any:
        self._check(args)
        if any(_is_dask_array(v) for v in args.values()):
            return self._dask_call(args)
        return self.submit(**args).compute()

    def submit(self, **args: Any) -> Parts:
        """The call started on the cluster, its result held there as a Dask collection of
        parts (:class:`Parts`: ``compute()`` gives what the call returns)."""
        self._check(args)
        name = self.partition.operand
        if any(_is_dask_array(v) for v in args.values()):
            raise ArgumentError("distributed: submit() takes in-memory operands; a call with "
                                "dask.array operands returns a dask.array already")
        parts = self._parts(args[name])
        shared = {k: self._shared(v) for k, v in args.items() if k != name}
        futures = [self.client.submit(worker.run_part, self._blob("kernel"), {**shared, name: part},
                                      span, self.partition.out_axis, pure=False)
                   for part, span in parts]
        if self.partition.mode == ROWS:
            return Parts(futures, tuple(s for _, s in parts), self.partition.cut_axes()[1])
        return Parts([self._reduce(futures)], (), None)

    # dask.array operands --------------------------------------------------------------
    def _row_dim(self) -> int:
        """The cut operand's dimension that is the output's first index."""
        expr = self.compiled.kernel.expr
        access = next(a for a in expr.factors if a.tensor == self.partition.operand)
        out = expr.output.indices
        if not out or out[0] not in access.indices:
            raise ArgumentError(f"distributed: dask.array operands need the output's first "
                                f"index to be one of {self.partition.operand}'s; "
                                f"{expr.text!r} has not")
        return access.indices.index(out[0])

    def _plan(self, tensor: Tensor, keep: Tensor | None) -> HaloPlan:
        """The blocks of ``tensor`` (cached while ``keep``, an immutable Tensor, lives)."""
        def make() -> HaloPlan:
            grid = self.grid or _model_grid(tensor, self._row_dim(), self.parts)
            return plan_blocks(tensor, self._row_dim(), grid)
        return self._plans.get(keep, make) if keep is not None else make()

    def _dask_call(self, args: dict[str, Any]) -> Any:
        kernel, name = self.compiled.kernel, self.partition.operand
        dense = arrays.dense_operand(kernel, name, self._row_dim())
        x = args.get(dense)
        if not _is_dask_array(x) or len(args) != 2:
            raise ArgumentError(f"distributed: with dask.array operands, pass {name} (the "
                                f"sparse operand) and {dense} as a dask.array only")
        x = arrays.single_chunked(x)
        value = args[name]
        tensor = tensor_of(self._operand.tensor(value))
        expect = tensor.shape[1 - self._row_dim()]
        if x.shape[0] != expect:
            raise ArgumentError(f"distributed: {dense} has {x.shape[0]} rows, {name} "
                                f"{expect} columns")
        if not isinstance(value, Tensor):
            raise ArgumentError(f"distributed: with dask.array operands, pass {name} as an "
                                "spf.Tensor (built once, e.g. spf.Tensor.from_scipy: its "
                                f"blocks are cut and scattered once), got "
                                f"{type(value).__name__}")
        keep = value
        plan = self._plan(tensor, keep).for_chunks(tuple(x.chunks[0]))

        def scatter_parts() -> list[Any]:
            return self.client.scatter([b.local for b in plan.blocks], hash=False)

        parts = self._parts_cache.get(keep, scatter_parts)

        def register() -> str:
            plugin = f"spf-static-{uuid.uuid4().hex}"
            data = arrays.static_data(plan, self._blobs["kernel"])
            self.client.register_plugin(worker.Static(plugin, data), name=plugin)
            # removed with the blocks' futures: no cache and no result graph needs them
            weakref.finalize(parts[0], _unregister, self.client, plugin)
            return plugin
        plugin = self._statics.get(keep, register, (plan.chunks, id(parts[0])))

        def holders() -> list[str]:            # one round trip, once per scatter
            held = self.client.who_has(parts)
            return [next(iter(held.get(p.key, ())), "") for p in parts]
        homes = self._homes.get(keep, holders, id(parts[0]))
        dtype = np.dtype(kernel.typing.of(self.output).name)
        return arrays.call(plan, plugin, name, parts, homes, dense, x, self.output,
                           kernel.semiring, dtype)

    # operands ------------------------------------------------------------------------
    def _blob(self, which: str) -> Any:
        """The pickled kernel on every worker (scattered again if the cluster lost it)."""
        future = self._blob_futures.get(which)
        if future is None or not _alive(future):
            future = self.client.scatter(self._blobs[which], broadcast=True, hash=False)
            self._blob_futures[which] = future
        return future

    def _parts(self, value: Any) -> list[tuple[Any, tuple]]:
        """The partitioned operand's parts as futures, cut and scattered once per Tensor."""
        tensor = tensor_of(self._operand.tensor(value))

        def scatter() -> list[tuple[Any, tuple]]:
            pieces = cut(tensor, self.partition, self.parts)
            futures = self.client.scatter([p for p, _ in pieces], hash=False)
            return list(zip(futures, [span for _, span in pieces]))
        return self._parts_cache.get(tensor, scatter) if isinstance(value, Tensor) \
            else scatter()

    def _shared(self, value: Any) -> Any:
        """An operand every part reads: a Tensor is scattered to all workers once."""
        if isinstance(value, Tensor):
            return self._shared_cache.get(value, lambda: self.client.scatter(
                value, broadcast=True, hash=False))
        if isinstance(value, np.ndarray):
            return self.client.scatter(value, broadcast=True, hash=False)
        return value

    # results -------------------------------------------------------------------------
    def _reduce(self, futures: list[Any]) -> Any:
        """Pairs of partial outputs combined on the cluster until one is left."""
        semiring = self.compiled.kernel.semiring
        blob = self._blob("combine") if "combine" in self._blobs else None
        while len(futures) > 1:
            pairs = [self.client.submit(worker.combine_pair, blob, semiring, a, b, pure=False)
                     for a, b in zip(futures[::2], futures[1::2])]
            futures = pairs + ([futures[-1]] if len(futures) % 2 else [])
        return futures[0]


class Parts:
    """A distributed call's result held on the workers as parts, a Dask collection:
    ``compute()`` (or ``dask.compute``) gathers and joins them into what the local call
    returns (row slices concatenated, sparse ones array by array in the output layout; a
    reduced result as it is), ``persist()`` keeps them computed on the cluster."""

    def __init__(self, futures: list[Any], spans: tuple, axis: int | None,
                 name: str | None = None):
        self.futures, self.spans, self.axis = list(futures), spans, axis
        self.name = name or f"spf-parts-{uuid.uuid4().hex}"

    def __len__(self) -> int:
        return len(self.futures)

    def __dask_graph__(self) -> Any:
        from dask.highlevelgraph import HighLevelGraph
        layer: dict[Any, Any] = dict(zip(self.__dask_keys__(), self.futures))
        return HighLevelGraph.from_collections(self.name, layer, dependencies=())

    def __dask_keys__(self) -> list[Any]:
        return [(self.name, k) for k in range(len(self.futures))]

    def __dask_layers__(self) -> tuple[str, ...]:
        return (self.name,)

    def __dask_tokenize__(self) -> str:
        return self.name

    def __dask_postcompute__(self) -> tuple[Any, tuple]:
        return _joined, (self.spans, self.axis)

    def __dask_postpersist__(self) -> tuple[Any, tuple]:
        return _rebuilt, (self.spans, self.axis, self.name)

    @staticmethod
    def __dask_optimize__(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        return dsk

    def __dask_scheduler__(self, *args: Any, **kwargs: Any) -> Any:
        return self.futures[0].client.get(*args, **kwargs)

    def compute(self) -> Any:
        import dask
        return dask.compute(self)[0]

    def persist(self) -> Parts:
        import dask
        return dask.persist(self)[0]


def _joined(results: list[Any], spans: tuple, axis: int | None) -> Any:
    return join_rows(results, list(spans), axis) if axis is not None else results[0]


def _rebuilt(dsk: Any, spans: tuple, axis: int | None, name: str,
             rename: Any = None) -> Parts:
    keys = sorted((k for k in dsk if isinstance(k, tuple) and k[0] == name),
                  key=lambda k: k[1])
    return Parts([dsk[k] for k in keys], spans, axis, name)


class _ScatterCache:
    """Futures of data scattered for an immutable Tensor: kept while the Tensor lives (then
    released, so the cluster frees the data) and while the cluster holds them (data a lost
    worker held is scattered again)."""

    def __init__(self) -> None:
        self._entries: dict[tuple, tuple[Any, Any]] = {}    # (id, extra) -> (weakref, value)

    def clear(self) -> None:
        self._entries.clear()

    def get(self, tensor: Tensor, make: Any, extra: Any = None) -> Any:
        key = (id(tensor), extra)
        hit = self._entries.get(key)
        if hit is not None and hit[0]() is tensor and _alive(hit[1]):
            return hit[1]
        value = make()
        self._entries[key] = (weakref.ref(tensor), value)
        weakref.finalize(tensor, self._entries.pop, key, None)
        return value


def _unregister(client: Any, plugin: str) -> None:
    """Remove a worker plugin, from a finalizer: it runs wherever the garbage collector
    frees the futures, possibly inside a client call holding the client's locks, so it
    never waits there (a blocking ``unregister_worker_plugin`` deadlocked against the
    client's own loop): the removal is handed to that loop, as a future's release is."""
    with contextlib.suppress(Exception):       # the loop may be closed by now
        client.loop.add_callback(_unregistered, client, plugin)


async def _unregistered(client: Any, plugin: str) -> None:
    """On the client's loop: ask the scheduler to remove ``plugin`` from every worker
    (quietly when the client or cluster is gone already)."""
    with contextlib.suppress(Exception):
        await client.scheduler.unregister_worker_plugin(name=plugin)


def _alive(value: Any) -> bool:
    """Whether every future in ``value`` (a future; a list of futures, of (future, span)
    pairs or of dicts of futures; anything else holds none) still has its data on the
    cluster, as far as the client knows (a future of data a dead worker held turns ``lost``
    when the scheduler tells the client; :meth:`DistributedKernel.forget` does not wait)."""
    if isinstance(value, (HaloPlan, str)):      # no futures: a plan, a plugin's name
        return True
    items = value if isinstance(value, list) else [value]
    futures = []
    for item in items:
        if isinstance(item, tuple):
            item = item[0]
        if not isinstance(item, str):             # a worker's address: no future
            futures += list(item.values()) if isinstance(item, dict) else [item]
    return all(f.status == "finished" for f in futures)


def _is_dask_array(value: Any) -> bool:
    return type(value).__module__.startswith("dask.array") and hasattr(value, "chunks")


def _checked_grid(grid: Any, parts: int) -> tuple[int, int] | None:
    """``grid`` (row blocks, column blocks) checked: positive integers."""
    if grid is None:
        return None
    if not (isinstance(grid, (tuple, list)) and len(grid) == 2 and all(
            isinstance(g, int) and not isinstance(g, bool) and g >= 1 for g in grid)):
        raise ArgumentError(f"distributed: grid must be (row blocks, column blocks), two "
                            f"positive integers, got {grid!r}")
    return int(grid[0]), int(grid[1])


def _model_grid(tensor: Tensor, row_dim: int, parts: int) -> tuple[int, int]:
    """1-D row blocks, or a square 2-D grid of ``parts`` blocks when ``parts`` is a square
    of at least 4 and, in the model, it moves fewer bytes per call in all (ties: its busiest
    worker receives fewer)."""
    side = math.isqrt(parts)
    if side < 2 or side * side != parts:
        return (parts, 1)
    one_d = plan_blocks(tensor, row_dim, (parts, 1), local=False)
    two_d = plan_blocks(tensor, row_dim, (side, side), local=False)
    one, two = one_d.bytes_per_call(), two_d.bytes_per_call()
    if (two["total"], two["max_node"]) < (one["total"], one["max_node"]):
        return (side, side)
    return (parts, 1)


def _combining_kernel(kernel: Kernel) -> Kernel:
    """``C(idx) = P(idx) + Q(idx)`` in the output's layout under the kernel's semiring: the
    union of two partial outputs, equal coordinates combined by add."""
    out = kernel.expr.output
    idx = ",".join(f"i{k}" for k in range(len(out.indices)))
    lay = kernel.layouts[out.tensor]
    k = Kernel(f"C({idx}) = P({idx}) + Q({idx})", {"P": lay, "Q": lay, "C": lay},
               semiring=kernel.semiring, name="spf_combine")
    k.c_source()
    return k
