"""spf: a sparse polyhedral code generator for sparse tensor kernels.

Layouts are physical-to-logical relations with uninterpreted functions (``layouts/``);
kernels are tensor index notation.  See README.md for the file formats and API.
"""
__version__ = "0.1.0"

from .errors import ArgumentError, CompileError, SpecError, SpfError, SynthesisError  # noqa: E402
from .runtime.compiled import CompiledKernel  # noqa: E402
from .kernel import Kernel  # noqa: E402
from .conversion import Conversion  # noqa: E402
from .evaluation import evaluate  # noqa: E402
from .front.layout import Layout, layout_names, load_layout  # noqa: E402
from .front.relation import Relation  # noqa: E402
from .runtime.tensor import Tensor  # noqa: E402

__all__ = ["ArgumentError", "CompileError", "CompiledKernel", "Conversion", "Kernel", "Layout", "Relation",
           "SpecError", "SpfError", "SynthesisError", "Tensor", "evaluate", "layout_names",
           "load_layout"]
