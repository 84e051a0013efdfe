"""Compiled kernels: a shared library and the calls into it.

Arguments become C struct pointers: a :class:`spf.Tensor` carries its struct (built
once, its arrays read-only), a dense numpy array gets one on the spot, and data as users hold
it (scipy.sparse, pydata sparse) goes through :mod:`spf.runtime.operands`.  ``argtypes`` are
set once per kernel, so a call costs a few microseconds beyond the C.
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ..assembly import AssemblyPlan
from ..back.status import Status
from ..decide.options import KernelOptions
from ..errors import SCALAR_OPERAND, ArgumentError, OutOfMemoryError
from ..front import index_expr
from ..front.kernel_spec import Expr
from ..front.layout import Layout
from ..front.semiring import Semiring
from ..front.value_types import Kind, Typing, ValueType
from ..middle.iteration_space import shared_fields
from . import build as runtime
from .assembled import check_values, run_assembling
from .memory import aligned_zeros, reserve
from .operands import DenseStruct, Operand
from .shapes import shape_plan
from .stored import StoredTensor, check_built_ranges, tensor_class
from .writer import rewritten


class KernelLike(Protocol):
    """What a compiled kernel reads of its kernel (an :class:`spf.Kernel`, in the layer above
    this one)."""

    @property
    def expr(self) -> Expr: ...
    @property
    def layouts(self) -> Mapping[str, Layout]: ...
    @property
    def options(self) -> KernelOptions: ...
    @property
    def name(self) -> str: ...
    @property
    def semiring(self) -> Semiring: ...
    @property
    def index_type(self) -> str: ...
    @property
    def typing(self) -> Typing: ...
    @property
    def mask(self) -> str | None: ...
    @property
    def mask_layout(self) -> Layout | None: ...
    @property
    def read_densely(self) -> Mapping[str, Layout]: ...
    @property
    def assembly(self) -> AssemblyPlan | None: ...
    @property
    def parallel_loop(self) -> str | None: ...
    @property
    def written(self) -> Layout | None: ...
    @property
    def privatized(self) -> bool: ...
    @property
    def decisions(self) -> tuple[Any, ...]: ...
    @property
    def terms(self) -> tuple[Any, ...]: ...     # a sum's (or union's) statements; a product: ()
    def c_source(self) -> str: ...


K = TypeVar("K", bound=KernelLike)


class CompiledKernel(Generic[K]):
    """Callable ``f(A=..., x=...)``: checks every argument, runs the C, returns the output.

    A tensor argument is an :class:`spf.Tensor` in the kernel's layout (checked when
    it was built; its struct is reused), a numpy array for a dense layout, or data as users
    hold it: a scipy.sparse matrix or array, a pydata ``sparse`` array
    (:mod:`spf.runtime.operands`: wrapped without a copy where the layout's storage matches,
    checked on every call).  ``source``: C to build instead of the kernel's own (a copy of it
    instrumented, say: the same functions with the same signatures)."""

    def __init__(self, kernel: K, source: str | None = None):
        self.kernel = kernel
        self._given_source = source
        self.source = kernel.c_source() if source is None else source
        flags: tuple[str, ...] = ("-fopenmp",) if kernel.parallel_loop else ()
        if kernel.typing.wraps:     # integer overflow wraps, as in numpy (C leaves it undefined)
            flags += ("-fwrapv",)
        lib = runtime.load_library(str(runtime.build_library(self.source, flags)))
        self._lib = lib
        expr = kernel.expr
        self._aliases = dict(expr.aliases)     # a tensor read again: the same argument
        # '+=' into an output the kernel assembles: the output's old entries, read as this
        # input, and a new tensor returned
        self._old_output = next((a for a, t in expr.aliases if t == expr.output.tensor), None)
        self.inputs = [a.tensor for a in expr.factors if a.tensor not in self._aliases]
        self.output = expr.output.tensor
        self._names = frozenset(self.inputs) | {self.output}
        self._masks = [a.tensor for a in expr.factors if a.pattern]
        mask, mask_layout = kernel.mask, kernel.mask_layout    # only a complemented one has one
        self._complement = Operand(mask, mask_layout, pattern=True) \
            if mask is not None and mask_layout is not None else None
        if self._complement is not None:
            self._names |= {self._complement.name}
        self._operands = [None if not a.indices else
                          Operand(a.tensor, kernel.layouts[a.tensor], a.pattern)
                          for a in expr.factors]
        # fill values with a mul zero does not annihilate: operands read as dense arrays
        self._densely = {name: Operand(name, lay) for name, lay in kernel.read_densely.items()}
        self._fills = kernel.options.fill_values     # an operand's absent entries: its fill
        self._private = kernel.privatized and bool(expr.output.indices)
        self._allocations = _allocations(kernel)
        self._out_dense = DenseStruct.of(kernel.layouts[self.output]) if expr.output.indices \
            else None
        # the struct of a dense output the kernel allocates, with nothing to accumulate into
        self._dense_output = self._out_dense if not expr.accumulate else None
        self._inputs = list(zip([a.tensor for a in expr.factors], self._operands))
        self._semiring = None if kernel.semiring.is_plus_times else kernel.semiring
        self._shapes = shape_plan(expr, kernel.index_type)
        self._what = f"output {self.output!r} of kernel {kernel.name}"    # allocations
        # the plain call: every input a tensor read as given, into a dense output of the
        # usual struct
        self._plain: tuple[DenseStruct, list[tuple[str, Operand]]] | None = None
        tensors = [(name, op) for name, op in self._inputs if op is not None]
        out = self._dense_output
        if out is not None and out.in_order and len(tensors) == len(self._inputs) \
                and not (self._densely or self._masks or self._semiring or self._fills):
            self._plain = (out, tensors)
        typing = kernel.typing
        self._dtype = typing.output.dtype          # the output's values
        self._zero = typing.output.value_of(kernel.semiring.zero)    # absent elements
        self._scalars = {name: typing.of(name) for name, op in self._inputs if op is None}
        inputs = [ctypes.c_void_p if op or typing.of(name).kind is Kind.COMPLEX
                  else _SCALAR_CTYPES[typing.of(name).name] for name, op in self._inputs]
        self._fn = _function(lib, kernel.name,
                             [ctypes.c_void_p] * (2 if kernel.assembly else 1) + inputs)
        if kernel.assembly is not None:
            extents = [ctypes.c_void_p] if kernel.assembly.ranged else []     # spf_ext
            self._bound = _function(lib, f"{kernel.name}_bound",
                                    [ctypes.c_void_p] + extents + inputs)
            # a bound counting slots without reading values: a product's C has one (a union
            # input's statement split into parts has none; its bound counts the nonzeros)
            self._bound_slots = _function(lib, f"{kernel.name}_bound_slots",
                                          [ctypes.c_void_p] + extents + inputs) \
                if kernel.assembly.drop_zeros and not kernel.terms else None

    def __reduce__(self) -> tuple:
        """Pickled as its kernel, which carries its C source: another process finds the
        library in its cache or compiles the source again."""
        return (CompiledKernel, (self.kernel, self._given_source))

    @staticmethod
    def _refuse_padding(name: str, bound: Any, why: str) -> None:
        """Under a semiring other than plus_times a stored 0.0 is an entry (``min_plus``: an
        edge of weight 0), and a mask's every stored slot is one, so padding spf added to fill
        a layout would change the result."""
        if isinstance(bound, StoredTensor) and bound.padding():
            raise ArgumentError(
                f"{name!r}: this {bound.layout.name} tensor stores {bound.padding()} padding "
                f"entries (0.0) besides its {bound.source_entries} entries, and {why}; use a "
                "layout that stores no padding, or build the tensor from arrays whose every "
                "stored value is an entry (Tensor.from_arrays)")

    def allocate_output(self, **inputs: Any) -> StoredTensor:
        """An output tensor for these inputs (dense, or sharing an input's structure) holding
        the semiring's zero, e.g. to call the kernel repeatedly without allocating."""
        bound = {a.tensor: op.tensor(inputs[a.tensor])
                 for a, op in zip(self.kernel.expr.factors, self._operands)
                 if op and a.tensor in inputs}
        shapes = {name: t.shape for name, t in bound.items()}
        extents = self._extents(shapes)
        out = self.kernel.expr.output
        if not out.indices:
            raise ArgumentError("allocate_output: the kernel's output is a scalar")
        if self.kernel.assembly is not None:
            raise ArgumentError(f"allocate_output: the output {self.output!r} is assembled by "
                                "the kernel (its structure depends on the inputs)")
        free = self._shapes.free()
        missing = [i for k, i in enumerate(out.indices) if i not in extents and k not in free]
        shape: tuple[int, ...] = ()
        if not missing:
            try:       # an extent index arithmetic sets: the points its terms reach
                shape = self._shapes.output_shape(shapes, None, self.output) if free else \
                    tuple(extents[i] for i in out.indices)
            except KeyError:
                missing = [out.indices[k] for k in free]
        if missing:
            raise ArgumentError(f"allocate_output: pass the inputs that fix index(es) {missing}")
        layout = self.kernel.layouts[self.output]
        if layout.dense_array is None:
            return self._shared_output(layout, None, shape, bound)
        array = aligned_zeros(shape, self._dtype, self._what)
        array.fill(self._zero)
        return self._filled(tensor_class().from_dense(layout, array))

    def distributed(self, client: Any, parts: int | None = None,
                    grid: tuple[int, int] | None = None) -> Any:
        """This kernel run in ``parts`` parts (default: one per worker) on the Dask cluster of
        ``client`` (a ``dask.distributed.Client``): a callable with the same arguments
        (:class:`spf.DistributedKernel`); with dask.array operands, in ``grid`` = (row
        blocks, column blocks) blocks (default: 1-D, or a square grid where the model moves
        fewer bytes)."""
        from .. import DistributedKernel  # the layer above, named through the package
        return DistributedKernel(self, client, parts, grid)

    def set_num_threads(self, n: int) -> None:
        """OpenMP threads for later calls of a parallel kernel (default: ``OMP_NUM_THREADS``)."""
        if not self.kernel.parallel_loop:
            raise ArgumentError("set_num_threads: this kernel has no parallel loop")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ArgumentError(f"set_num_threads: need a positive integer, got {n!r}")
        self._lib.omp_set_num_threads(ctypes.c_int(n))

    def __call__(self, **args: Any) -> Any:
        if not args.keys() <= self._names:
            raise ArgumentError(f"unknown argument(s) {sorted(args.keys() - self._names)}; the "
                                f"kernel takes {self.inputs} (and optionally the output "
                                f"{self.output!r})")
        if self._old_output is not None:
            if self.output not in args:
                raise ArgumentError(f"'+=' adds into {self.output!r}: pass its old value as "
                                    f"{self.output}=tensor (a new tensor is returned; the old "
                                    "one is not changed)")
            args = {**args, self._old_output: args[self.output]}
            del args[self.output]
        if self._aliases:
            args = {**args, **{a: args[t] for a, t in self._aliases.items() if t in args}}
        if self._complement is not None:
            return self._call_complemented(self._complement, args)
        if self._plain is not None and self.output not in args:
            return self._call_plain(args, *self._plain)
        return self._call(args)

    def _call_complemented(self, complement: Operand, args: dict[str, Any]) -> Any:
        """The product everywhere, then the entries of the mask ``complement`` in the dense
        output reset (to the semiring's zero for '=', to their previous values for '+='), or
        removed from the assembled output."""
        name = complement.name
        if name not in args:
            raise ArgumentError(f"missing argument {name!r} (the complemented mask)")
        args = dict(args)
        mask = complement.tensor(args.pop(name))
        self._refuse_padding(name, mask, "a mask's stored slot is an entry")
        hit = mask._entry_counts() != 0
        given = args.get(self.output)
        before = None
        if given is not None:      # checked before the call writes into it
            old = given.to_dense() if isinstance(given, StoredTensor) else np.asarray(given)
            self._check_mask_shape(name, hit.shape, old.shape)
            before = old[hit] if self.kernel.expr.accumulate else None
        result = self._call(args)
        self._check_mask_shape(name, hit.shape, result.shape)
        if isinstance(result, StoredTensor):
            return _without(result, hit)
        result[hit] = before if before is not None else self._zero
        return result

    def _dense_reading(self, name: str, value: Any) -> np.ndarray:
        """Operand ``name`` (given in its sparse layout) as a dense array holding, where it
        stores no entry, its own fill (``fill_values``: 0 for data from numpy, scipy or
        pydata, a Tensor's fill), else the semiring's zero."""
        tensor = self._densely[name].tensor(value)
        fill = self.kernel.typing.of(name).value_of(tensor.fill) \
            if self.kernel.options.fill_values else self._zero
        if fill != 0:       # padding holds 0.0: read as the fill where that is 0 too
            self._refuse_padding(name, tensor, f"its padding would read as entries, not as "
                                 f"{fill} (what it holds where it stores nothing)")
        reserve(math.prod(tensor.shape) * self._densely[name].layout.value_type.dtype.itemsize,
                f"{name!r} read as a dense array (shape {tensor.shape})")
        return tensor.to_dense(fill=fill)

    def _check_fill(self, name: str, bound: Any) -> None:
        """``fill_values``: an operand the kernel iterates over its stored entries (0, the
        semiring's zero, annihilates mul) must hold 0 where it stores nothing."""
        fill = getattr(bound, "fill", 0.0)
        if fill != 0:
            raise ArgumentError(
                f"{name!r} holds {fill} where it stores nothing (its fill), and this kernel "
                "(fill_values=True) iterates over its stored entries, which is right only "
                f"for a fill of 0 (the semiring's zero); pass {name}.with_fill(0.0), or its "
                "dense array")

    def _check_mask_shape(self, name: str, mask: tuple[int, ...],
                          out: tuple[int, ...]) -> None:
        if mask != out:
            raise ArgumentError(f"mask {name!r} has shape {mask}, the output "
                                f"{self.output!r} {out}")

    def _bind(self, args: Mapping[str, Any]) -> tuple[list[Any], dict[str, tuple[int, ...]],
                                                       dict[str, Any]]:
        """(per input: struct address or scalar, the inputs' shapes, what the addresses point
        into: kept alive until the call returns)."""
        values: list[Any] = []
        shapes: dict[str, tuple[int, ...]] = {}
        keep: dict[str, Any] = {}
        for name, op in self._inputs:
            if name not in args:
                raise ArgumentError(f"missing argument {name!r}" + SCALAR_OPERAND * (op is None))
            if op is None:
                vt = self._scalars[name]
                value = _typed_scalar(name, args[name], vt)
                if vt.kind is Kind.COMPLEX:         # by pointer (see back.names.scalar_param)
                    keep[name] = np.array([value], vt.dtype)
                    value = keep[name].ctypes.data
                values.append(value)
                continue
            value = self._dense_reading(name, args[name]) if name in self._densely \
                else args[name]
            address, shapes[name], keep[name] = op.bind(value)
            if self._fills and name not in self._densely and name not in self._masks:
                self._check_fill(name, keep[name])
            if name in self._masks:
                self._refuse_padding(name, keep[name], "a mask's stored slot is an entry")
            elif self._semiring is not None:
                self._refuse_padding(name, keep[name], f"under semiring {self._semiring.name} "
                                     "a stored value is an entry")
            values.append(address)
        return values, shapes, keep

    def _call_plain(self, args: Mapping[str, Any], output: DenseStruct,
                    inputs: list[tuple[str, Operand]]) -> Any:
        """The common call, kept short: tensor ``inputs`` read as given, the dense ``output``
        allocated here (no output passed); anything else goes through :meth:`_call`."""
        values = []
        shapes = {}
        keep = []
        for name, op in inputs:
            value = args.get(name)
            if value is None:
                return self._call(args)
            address, shapes[name], kept = op.bind(value)
            values.append(address)
            keep.append(kept)
        if self._shapes.disagree(shapes):
            self._extents(shapes)
        shape = self._shapes.output_shape(shapes, None, self.output)
        if self._private:
            self._reserve_private(shape)
        array = aligned_zeros(shape, self._dtype, self._what)
        out = output.fresh(array, shape)       # alive until the call returns
        self._ran(self._fn(ctypes.addressof(out), *values))
        return array

    def _call(self, args: Mapping[str, Any]) -> Any:
        values, shapes, keep = self._bind(args)
        out_shape = self._output_shape(shapes, args.get(self.output))
        if self._private:
            self._reserve_private(out_shape)
        if self._dense_output is not None and self.output not in args:
            array = aligned_zeros(out_shape, self._dtype, self._what)
            struct = self._dense_output.struct(array)
            if struct is not None:
                self._ran(self._fn(ctypes.addressof(struct), *values))
                return array
        assembly = self.kernel.assembly
        if assembly is not None:
            if self.output in args:
                raise ArgumentError(f"do not pass the output {self.output!r}: it is assembled "
                                    "by the kernel")
            return self._assemble(assembly, values, out_shape)
        if not self.kernel.expr.output.indices:
            return self._run_scalar(args, values)
        _alive, address, result = self._dense_or_shared_output(args.get(self.output), out_shape,
                                                              keep)
        self._ran(self._fn(address, *values))
        return result

    def _reserve_private(self, shape: tuple[int, ...]) -> None:
        """ArgumentError before the call when the per-thread copies of the output that its
        parallel loop sums into (one per OpenMP thread) would not fit."""
        max_threads = getattr(self._lib, "omp_get_max_threads", None)   # built without OpenMP
        threads = int(max_threads()) if max_threads is not None else 1
        reserve(threads * math.prod(shape) * self.kernel.typing.accumulate.dtype.itemsize,
                f"the per-thread copies of {self._what} ({threads} threads, shape {shape})")

    def _ran(self, status: int) -> None:
        """The error of the kernel's status when it is not 0: a value numpy refuses
        (:func:`~spf.runtime.assembled.check_values`), else an allocation of its own that
        failed (OutOfMemoryError)."""
        if status != Status.OK:
            check_values(status, self.kernel.name)
            raise OutOfMemoryError(f"kernel {self.kernel.name}: its C code could not allocate "
                                   f"{self._allocations} (malloc returned NULL): out of memory")

    def _output_shape(self, shapes: Mapping[str, tuple[int, ...]],
                      given: Any = None) -> tuple[int, ...]:
        """The output's extents from the inputs' shapes (which must agree: checked by the
        pairs :func:`~spf.runtime.shapes.shape_plan` listed, the message from
        :meth:`_extents`); a passed output (``given``) sets those only affine access
        indices bound."""
        if self._shapes.disagree(shapes):
            self._extents(shapes)
        return self._shapes.output_shape(shapes, getattr(given, "shape", None), self.output)

    def _run_scalar(self, args: Mapping[str, Any], values: list[Any]) -> Any:
        if self.output in args and not self.kernel.expr.accumulate:
            raise ArgumentError(f"{self.output!r} is assigned with '='; do not pass it")
        vt = self.kernel.typing.output
        start = args.get(self.output, vt.dtype.type(0))      # the type's 0 (bool: False)
        out = np.array([_typed_scalar(self.output, start, vt)], vt.dtype)
        self._ran(self._fn(out.ctypes.data, *values))
        return out[0]

    def _dense_or_shared_output(self, given: Any, shape: tuple[int, ...],
                                inputs: Mapping[str, Any]) -> tuple[Any, int, Any]:
        """(what to keep alive, struct address, what the call returns) for the output."""
        layout = self.kernel.layouts[self.output]
        if layout.dense_array is None:
            tensors = {n: t for n, t in inputs.items() if isinstance(t, StoredTensor)}
            t = self._shared_output(layout, given, shape, tensors)
            if given is not None:
                self._refuse_aliasing(t.values, inputs)
            return t, ctypes.addressof(t.struct), t
        if given is None:
            if self.kernel.expr.accumulate:
                raise ArgumentError(f"'+=' accumulates into {self.output!r}: pass it as "
                                    f"{self.output}=array")
            array = aligned_zeros(shape, self._dtype, self._what)
        else:
            array = given.to_dense() if isinstance(given, StoredTensor) else given
            if not isinstance(array, np.ndarray) or array.dtype != self._dtype \
                    or not array.flags.c_contiguous or array.shape != shape \
                    or not array.flags.writeable:
                raise ArgumentError(f"output {self.output!r} must be a writeable C-contiguous "
                                    f"{self._dtype} array of shape {shape}; got "
                                    f"{_received(array, shape, self._dtype)}")
            self._refuse_aliasing(array, inputs)
        struct = self._out_dense.struct(array) if self._out_dense else None
        if struct is None:   # a dense layout with more fields than extents and data
            struct = tensor_class().from_dense(layout, array).struct
        return struct, ctypes.addressof(struct), array

    def _refuse_aliasing(self, written: np.ndarray, inputs: Mapping[str, Any]) -> None:
        """ArgumentError when the output array the kernel writes shares memory with an input:
        the kernel would read entries it has already overwritten (no kernel is proven safe
        for that yet)."""
        for name, kept in inputs.items():
            if isinstance(kept, StoredTensor):
                arrays = [(f" (its field {f!r})", a) for f, a in kept.fields.items()
                          if isinstance(a, np.ndarray)]
            elif isinstance(kept, tuple):       # a dense operand: (struct, array)
                arrays = [("", kept[1])]
            else:                               # a complex scalar's own copy
                continue
            for what, array in arrays:
                if np.may_share_memory(written, array) and np.shares_memory(written, array):
                    raise ArgumentError(f"output {self.output!r} shares memory with input "
                                        f"{name!r}{what}: the kernel would read values it has "
                                        "already overwritten; pass a copy of one of them")

    def _assemble(self, assembly: AssemblyPlan, inputs: list[Any],
                  shape: tuple[int, ...]) -> StoredTensor:
        """The output the kernel assembles (``assembly``: how), sized, built and trimmed by
        :func:`spf.runtime.assembled.run_assembling`."""
        sizers = [self._bound] if self._bound_slots is None else [self._bound_slots, self._bound]
        fields = run_assembling(assembly, self._fn, sizers, inputs, shape,
                                self.kernel.name, self.output)
        layout = assembly.storage.layout        # every field written, [derived] ones too
        check_built_ranges(layout, fields, f"output {self.output!r} of kernel "
                                           f"{self.kernel.name}")
        built = tensor_class()._built(layout, tuple(shape), fields)
        written = self.kernel.written
        return self._filled(built if written is None
                            else rewritten(built, written, fill=self._zero))

    def _extents(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
        """Extent of each index from the input shapes; every index read plainly has one
        extent across the whole statement (one range per index)."""
        expr = self.kernel.expr
        extents: dict[str, int] = {}
        owner: dict[str, str] = {}
        for acc in (a for product in expr.products() for a in product.factors):
            if acc.tensor not in shapes:
                continue
            shape, derived = shapes[acc.tensor], dict(acc.arithmetic)
            for dim, (idx, n) in enumerate(zip(acc.indices, shape)):
                if idx in derived:
                    continue        # computed by index arithmetic: nothing to agree
                if idx in extents and extents[idx] != n:
                    raise ArgumentError(
                        f"index {idx!r} has extent {extents[idx]} in {owner[idx]} but {n} in "
                        f"{acc.tensor} (dimension {dim}); shapes must agree")
                extents.setdefault(idx, n)
                owner.setdefault(idx, f"{acc.tensor} (shape {shape})")
        return extents

    def _shared_output(self, layout: Layout, given: Any, shape: tuple[int, ...],
                       tensors: Mapping[str, StoredTensor]) -> StoredTensor:
        """The output of known sparsity: the source's index arrays and scalars, the extents
        for the remaining shape scalars, and a zeroed value array."""
        share = self.kernel.options.share
        assert share is not None, "a sparse output the kernel does not assemble is shared"
        source_name = share[1]
        source = tensors[source_name]
        shared = shared_fields(layout, source.layout)
        if given is not None:
            if not isinstance(given, StoredTensor) or given.layout != layout:
                raise ArgumentError(f"output {self.output!r} must be a Tensor in layout "
                                    f"{layout.name}")
            for f in shared:
                if not np.array_equal(given.fields[f], source.fields[f]):
                    raise ArgumentError(f"output {self.output!r}: field {f!r} differs from "
                                        f"{source_name}'s; it must share its structure")
            return self._filled(given)
        fields: dict[str, Any] = {f: source.fields[f] for f in shared}
        for dim, expr in enumerate(layout.shape):
            field = expr.as_name()
            if field is not None:
                fields.setdefault(field, shape[dim])
        value = layout.value_ref.array     # a pattern output is assembled, never shared
        scalars = {k: v for k, v in fields.items() if isinstance(v, int)}
        arrays = {k: v for k, v in fields.items() if not isinstance(v, int)}
        missing = [f for f in layout.fields if f not in fields and f != value]
        if missing:
            raise ArgumentError(f"output {self.output!r}: cannot derive field(s) {missing} of "
                                f"layout {layout.name} from {source_name}")
        size = 1
        for d in layout.fields[value].dims:
            size *= index_expr.evaluate(d, scalars, arrays)
        fields[value] = aligned_zeros(size, layout.value_type.dtype, self._what)
        fields[value].fill(self._zero)    # what '=' and '+=' start from
        return self._filled(tensor_class()(layout, shape, fields, check=False))

    def _filled(self, out: StoredTensor) -> StoredTensor:
        """``out``, the output tensor, whose absent elements hold the semiring's zero."""
        out.fill = self._zero
        return out



def _allocations(kernel: KernelLike) -> str:
    """What the C of ``kernel`` allocates, for the message when it could not."""
    out = kernel.expr.output.tensor
    what = [f"the state of its {d.chosen.algorithm} find of {d.find.var} in {d.find.use.name}"
            for d in kernel.decisions if d.chosen and d.chosen.algorithm != "binsearch"]
    if kernel.privatized:
        what.append(f"the per-thread copies of output {out!r}")
    if kernel.assembly is not None:
        what.append(f"the workspace and entry streams assembling output {out!r}")
    return ", ".join(what) or "its working memory"


def _without(tensor: StoredTensor, hit: np.ndarray) -> StoredTensor:
    """``tensor`` (assembled by a kernel) without its entries where ``hit`` is True: its
    entries as coordinate lists, filtered, converted back to its layout."""
    coords, values = tensor.entries()
    keep = ~hit[coords] if values.size else np.zeros(0, bool)
    return tensor.with_entries([c[keep] for c in coords], values[keep])


def _function(lib: ctypes.CDLL, name: str, argtypes: list[Any]) -> Any:
    """``lib.name`` returning its status (:class:`~spf.back.status.Status`), its argument
    types set once (struct pointers as addresses)."""
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    fn.argtypes = argtypes
    return fn


def _received(array: Any, shape: tuple[int, ...], dtype: np.dtype) -> str:
    """What an output argument that cannot be written is, for the message."""
    if not isinstance(array, np.ndarray):
        return type(array).__name__
    if array.shape != shape:
        return f"an array of shape {array.shape}"
    if array.dtype != dtype:
        return f"dtype {array.dtype}"
    if not array.flags.c_contiguous:
        return ("a Fortran-ordered (not C-contiguous) array" if array.flags.f_contiguous
                else "a strided view (not C-contiguous)")
    return "a read-only array"


_SCALAR_CTYPES: dict[str, Any] = {
    "bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double}


def _typed_scalar(name: str, value: Any, vt: ValueType) -> Any:
    """A scalar argument as ``vt`` (float64: :func:`_scalar`; another type: numpy's
    ``same_kind`` casting, Python numbers by their kind, the value unchanged)."""
    if vt.is_float64:
        return _scalar(name, value)
    if not isinstance(value, (int, float, complex, np.generic)) or isinstance(value, np.void):
        raise ArgumentError(f"{name!r} is a scalar; got {type(value).__name__}")
    kind = np.asarray(value).dtype.kind
    if _RANK.get(kind, 9) > _RANK[vt.kind.value] or (
            isinstance(value, np.generic) and not np.can_cast(value.dtype, vt.dtype,
                                                              "same_kind")):
        raise ArgumentError(f"{name!r} = {value!r} does not convert to {vt.name}, the "
                            "kernel's type for it (numpy's same_kind casting)")
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(value).astype(vt.dtype)
    if out != value:
        raise ArgumentError(f"{name!r} = {value!r} is not exactly a {vt.name}")
    return out.item()


_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}     # numpy's kinds, narrowest first


def _scalar(name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                     np.floating)):
        raise ArgumentError(f"{name!r} is a scalar; got {type(value).__name__}")
    exact = int(value) if isinstance(value, (int, np.integer)) else value
    try:
        out = float(value)
    except OverflowError:
        raise ArgumentError(f"{name!r} = {value} is beyond the range of float64, the type spf "
                            "computes in") from None
    if out != exact and out == out:
        raise ArgumentError(f"{name!r} = {value} is not exactly a float64, the type spf "
                            f"computes in (it would become {out!r}); pass float({name}) to "
                            "accept the rounding")
    return out
