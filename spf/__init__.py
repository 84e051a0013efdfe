"""spf: a sparse polyhedral code generator for sparse tensor kernels.

Layouts are physical-to-logical relations with uninterpreted functions (``layouts/``);
kernels are tensor index notation.  See docs/ for the file formats and the API.
"""
from .errors import (
    ArgumentError,
    CompileError,
    ConvertedOperandWarning,
    GuardLoopWarning,
    OutOfMemoryError,
    SpecError,
    SpfError,
    SynthesisError,
)

# The API is imported on first use (PEP 562): ``import spf`` stays cheap (no islpy, z3, numpy
# until a kernel, layout or tensor is needed).  Everything is imported together; the runtime
# finds ``Tensor`` and ``DistributedKernel`` here, the layer above it (runtime/stored.py).
_LAZY = {
    "CompiledKernel": "runtime.compiled", "Kernel": "kernel", "Conversion": "conversion",
    "evaluate": "evaluation", "Layout": "front.layout", "layout_names": "front.layout_path",
    "load_layout": "front.layout_path", "Relation": "front.relation", "Tensor": "tensor",
    "Semiring": "front.semiring", "DistributedKernel": "distributed",
    "KernelOptions": "decide.options",
    "aslinearoperator": "linalg", "tune": "tuning", "Tuned": "tuning",
}


def _load_api() -> None:
    import importlib
    for name, module in _LAZY.items():
        globals()[name] = getattr(importlib.import_module(f".{module}", __name__), name)


def _version() -> str:
    """The installed distribution's version: pyproject.toml is its one source."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("spf")
    except PackageNotFoundError:    # imported from a checkout that was never installed
        return "0+unknown"


def __getattr__(name: str):
    import importlib
    if name == "__version__":
        globals()[name] = _version()
        return globals()[name]
    if name in _LAZY:
        _load_api()
        return globals()[name]
    try:    # a subpackage or module (spf.kernel, spf.runtime) used as an attribute
        module = importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module 'spf' has no attribute {name!r}") from None
    _load_api()
    return module


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["ArgumentError", "CompileError", "CompiledKernel", "Conversion",
           "ConvertedOperandWarning", "DistributedKernel", "GuardLoopWarning",
           "Kernel", "KernelOptions", "Layout", "OutOfMemoryError", "Relation",
           "Semiring", "SpecError", "SpfError", "SynthesisError", "Tensor", "aslinearoperator",
           "evaluate",
           "layout_names", "load_layout"]
