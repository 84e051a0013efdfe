"""The public Kernel API: spec -> iteration space -> loop nest -> C -> compiled callable.

:class:`Kernel` is a read-only facade: :func:`spf.kernel_setup.resolve` turns what it is given
into a :class:`~spf.kernel_setup.Setup`, from which either a
:class:`~spf.product_kernel.ProductKernel` (one statement: space, order, plan) or a
:class:`~spf.sum_kernel.SumKernel` (statement splitting: one product kernel per term) is
built; every attribute reads the setup or that kernel.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import FrozenInstanceError
from functools import cache, cached_property
from typing import Any, NoReturn, Protocol

from .assembly import AssemblyPlan
from .assembly.merge import Run
from .concurrency import symbolic
from .decide.analysis import Analysis
from .decide.options import OPTIONS, KernelOptions
from .decide.plan import Plan
from .decide.synthesis import Decision
from .front.functions import FUNCTIONS, Function, keeping
from .front.kernel_spec import Expr
from .front.layout import Layout
from .front.semiring import Semiring
from .front.value_types import Typing
from .kernel_setup import Setup, resolve
from .middle.iteration_space import IterationSpace
from .middle.scan import LoopNest
from .product_kernel import ProductKernel
from .runtime.compiled import CompiledKernel
from .sum_kernel import SumKernel


class _Statement(Protocol):
    """What :class:`Kernel` reads of a product or a sum kernel."""

    @property
    def setup(self) -> Setup: ...
    @property
    def names(self) -> Mapping[str, str]: ...
    @property
    def space(self) -> IterationSpace: ...
    @property
    def order(self) -> tuple[str, ...]: ...
    @property
    def order_why(self) -> tuple[str, ...]: ...
    @property
    def nest(self) -> LoopNest: ...
    @property
    def decisions(self) -> tuple[Decision, ...]: ...
    @property
    def assembly(self) -> AssemblyPlan | None: ...
    @property
    def parallel_loop(self) -> str | None: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def terms(self) -> tuple[ProductKernel, ...]: ...
    @property
    def runs(self) -> tuple[Run, ...] | None: ...
    @property
    def analysis(self) -> Analysis: ...
    @property
    def analyses(self) -> tuple[Analysis, ...]: ...
    @property
    def source(self) -> str: ...
    def report(self) -> str: ...


class Kernel:
    """A kernel in tensor index notation with a layout per tensor.

    ``expr`` is the statement (``"y(i) = A(i,j) * x(j)"``) or the path of a kernel spec file
    (``.toml``).  ``layouts`` maps tensor names to layout names, paths or :class:`Layout`
    objects; tensors not named are dense.  ``params`` maps tensor names to layout parameters
    (``{"A": {"B": 4}}``).  The other keywords are the options of :class:`KernelOptions`
    (listed below); ``options`` gives them as one :class:`KernelOptions`, whose fields left
    at their defaults do not count as given.  Options given in the call override a kernel
    file's.

    A sum (``C(i,j) = A(i,j) + B(i,j)``, ``y(i) = A(i,j) * x(j) - b(i)``) is split into one
    statement per term (``terms``: a product Kernel each, with the same options; ``order``
    names apply to the terms that have them).  ``space``, ``nest`` and ``decisions`` are
    those of the first term.  A Kernel is immutable: every decision is made when it is
    built; other options make another Kernel.
    """

    _body: _Statement
    _functions: Mapping[str, Function]   # the expression language's functions when built

    @symbolic
    def __init__(self, expr: str | Expr, layouts: Mapping[str, str | Layout] | None = None,
                 *, params: Mapping[str, Mapping[str, int]] | None = None,
                 options: KernelOptions | None = None, **keywords: Any):
        kept = dict(FUNCTIONS)      # a function registered again later: this Kernel keeps its
        with keeping(kept):         # definition (its C, made on first use, included)
            setup = resolve(expr, layouts, params, options, keywords)
            body = SumKernel.build(setup) if setup.splits else ProductKernel.build(setup)
            if setup.union is not None and not body.runs:     # operands not sorted runs
                setup = setup.without_union()
                body = ProductKernel.build(setup)
        object.__setattr__(self, "_body", body)
        object.__setattr__(self, "_functions", kept)

    @classmethod
    def _of(cls, body: _Statement, functions: Mapping[str, Function]) -> Kernel:
        """The Kernel over ``body`` (a term of a sum) with the sum's ``functions``."""
        kernel = cls.__new__(cls)
        object.__setattr__(kernel, "_body", body)
        object.__setattr__(kernel, "_functions", functions)
        return kernel

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the functions' definitions (code): another process derives what
        this one had not yet (a compiled kernel's C is derived) with its own."""
        return {"_body": self._body}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_body", state["_body"])
        object.__setattr__(self, "_functions", {})

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise FrozenInstanceError(f"cannot assign to {name!r}: a Kernel is immutable (other "
                                  "options make another Kernel)")

    def __delattr__(self, name: str) -> NoReturn:
        raise FrozenInstanceError(f"cannot delete {name!r}: a Kernel is immutable")

    # what it was made from -------------------------------------------------------------
    @property
    def expr(self) -> Expr:
        """The statement (a structural mask appended as one more factor)."""
        return self._body.setup.expr

    @property
    def options(self) -> KernelOptions:
        """The options, checked against the statement."""
        return self._body.setup.options

    @property
    def layouts(self) -> Mapping[str, Layout]:
        """Each tensor's layout (read-only; operands read densely have the dense one)."""
        return self._body.setup.layouts

    @property
    def written(self) -> Layout | None:
        """The output's layout when the kernel assembles an entry list that is then written
        into it (see :mod:`spf.front.writing`); ``layouts`` has the entry list's."""
        return self._body.setup.written

    @property
    def name(self) -> str:
        """The name of the generated C function."""
        return self.options.name

    @property
    def semiring(self) -> Semiring:
        return self.options.semiring

    @property
    def index_type(self) -> str:
        """The width of index arrays, sizes and loop indices."""
        return self._body.setup.index_type

    @property
    def typing(self) -> Typing:
        """The value types: each tensor's, the output's, the accumulator's."""
        return self._body.setup.typing

    @property
    def mask(self) -> str | None:
        """The mask tensor, if any."""
        return self._body.setup.mask

    @property
    def complement(self) -> bool:
        """The mask is complemented (applied after the product by the runtime)."""
        return self.options.complement

    @property
    def mask_layout(self) -> Layout | None:
        """A complemented mask's layout (it is no operand of the product)."""
        return self._body.setup.mask_layout

    @property
    def read_densely(self) -> Mapping[str, Layout]:
        """Fill values whose zero does not annihilate mul: the operands read as dense arrays,
        with the layouts they are given in."""
        return self._body.setup.read_densely

    @property
    def c_names(self) -> Mapping[str, str]:
        """The tensors, scalars and indices that the generated C names otherwise, and those
        names (``NULL``: ``spf_u_NULL``): the space, the nest, the analysis and the report
        use them too."""
        return self._body.names

    # the decisions ---------------------------------------------------------------------
    @property
    def space(self) -> IterationSpace:
        """The iteration space (a sum: the first term's)."""
        return self._body.space

    @property
    def order(self) -> tuple[str, ...]:
        """The loop variables, outermost first (a sum: the first term's)."""
        return self._body.order

    @property
    def order_why(self) -> tuple[str, ...]:
        """Why the default loop order moved a loop."""
        return self._body.order_why

    @property
    def nest(self) -> LoopNest:
        """The scanned loop nest (a sum: the first term's)."""
        return self._body.nest

    @property
    def decisions(self) -> tuple[Decision, ...]:
        """Every find's decision (a sum: every term's)."""
        return self._body.decisions

    @property
    def assembly(self) -> AssemblyPlan | None:
        """How the kernel assembles its output (None: it does not)."""
        return self._body.assembly

    @property
    def parallel_loop(self) -> str | None:
        """The loop run with OpenMP, if any (a sum: the first term's that has one)."""
        return self._body.parallel_loop

    @property
    def plan(self) -> Plan:
        """Every decision about a product kernel (a sum has one per term)."""
        return self._body.plan

    @property
    def privatized(self) -> bool:
        """Whether a parallel loop sums into per-thread copies of the output (a sum: any
        term's)."""
        return any(t.privatized for t in self.terms) if self.terms else self.plan.privatized

    @cached_property
    def terms(self) -> tuple[Kernel, ...]:
        """A sum's product kernels, one per term and part (a product: none)."""
        return tuple(Kernel._of(t, self._functions) for t in self._body.terms)

    # derived on first use --------------------------------------------------------------
    @property
    @symbolic
    def runs(self) -> tuple[Run, ...] | None:
        """For an assembled sum whose every term is an operand stored in the output's storage
        order (proved by Z3 per term): the runs the kernel merges level by level."""
        with keeping(self._functions):
            return self._body.runs

    @symbolic
    def analysis(self) -> Analysis:
        """Dependences carried by each loop, the parallel loop, tiling (paper Sec. 5); for a
        sum, that of the first term (see :meth:`analyses`)."""
        with keeping(self._functions):
            return self._body.analysis

    @symbolic
    def analyses(self) -> tuple[Analysis, ...]:
        """One analysis per statement (per term of a sum)."""
        with keeping(self._functions):
            return self._body.analyses

    @symbolic
    def c_source(self) -> str:
        """The generated C: struct typedefs and the kernel function (for a sum, one static
        function per term before it; for an assembled output, its storage functions after)."""
        with keeping(self._functions):
            return self._body.source

    @symbolic
    def report(self) -> str:
        """Iteration space, loop order and per-level decisions, as text."""
        with keeping(self._functions):
            return self._body.report()

    def complement_note(self) -> str:
        """What a complemented mask does (it is not part of the plan)."""
        return self._body.setup.complement_note()

    def fill_note(self) -> str:
        """What absent entries mean for this kernel (a report line)."""
        return self._body.setup.fill_note()

    def compile(self) -> CompiledKernel[Kernel]:
        """Compile (or fetch from the cache) and return a callable."""
        return CompiledKernel(self)


def _signature_and_doc() -> None:
    """``Kernel``'s signature and the options part of its docstring, from the schema."""
    kw, defaults = inspect.Parameter.KEYWORD_ONLY, KernelOptions()
    params = [inspect.Parameter("expr", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("layouts", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=None),
              inspect.Parameter("params", kw, default=None),
              inspect.Parameter("options", kw, default=None)]
    params += [inspect.Parameter(o.name, kw, default=_shown(getattr(defaults, o.name)))
               for o in OPTIONS]
    Kernel.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    lines = [f"    ``{o.name}`` ({o.form.value}): {o.help}." for o in OPTIONS]
    Kernel.__doc__ = (Kernel.__doc__ or "") + "\n    Options:\n\n" + "\n".join(lines) + "\n"


def _shown(default: Any) -> Any:
    """An option's default as a user writes it (a semiring by its name)."""
    return default.name if isinstance(default, Semiring) else default


_signature_and_doc()


@cache
def dense_copy_kernel(layout: Layout) -> CompiledKernel[Kernel]:
    """``D(i...) = T(i...)`` with D dense: unpacks any layout through its own relation."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    return Kernel(f"D({idx}) = T({idx})", {"T": layout}, name="spf_to_dense").compile()


@cache
def entry_count_kernel(layout: Layout) -> CompiledKernel[Kernel]:
    """``n = T(i...) * one`` under plus_pair: the number of entries ``layout``'s relation
    yields for a tensor (stored slots outside it, such as ELL's padding, are not counted)."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    return Kernel(f"n = T({idx}) * one", {"T": layout}, semiring="plus_pair",
                  name="spf_entry_count", dtype={"n": "float64", "one": "float64"}).compile()


@cache
def pattern_kernel(layout: Layout) -> CompiledKernel[Kernel]:
    """``D(i...) = T(i...) * one`` under plus_pair, D dense: how many entries ``layout``'s
    relation yields at each coordinate (nonzero where the tensor has an entry)."""
    idx = ",".join(f"i{k}" for k in range(layout.order))
    return Kernel(f"D({idx}) = T({idx}) * one", {"T": layout}, semiring="plus_pair",
                  name="spf_pattern", dtype={"D": "float64", "one": "float64"}).compile()

