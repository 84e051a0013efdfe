"""Exception types raised by spf.

Every user-facing failure is one of these, so callers can tell a bad spec from a bad
argument from a missing property.
"""
from __future__ import annotations

import os
import sys
import warnings
from types import FrameType


class SpfError(Exception):
    """Base class of all spf errors."""


class SpecError(SpfError):
    """A malformed layout spec, kernel spec or SPF formula.

    The message names the source (a file path or ``"<string>"``), the line and column,
    and what was expected there.
    """

    def __init__(self, message: str, source: str = "<string>", line: int | None = None,
                 column: int | None = None):
        self.source = source
        self.line = line
        self.column = column
        self.detail = message
        where = source if line is None else f"{source}:{line}:{column}"
        super().__init__(f"{where}: {message}")


# why a bare name is an operand: said where a scalar operand is missing
SCALAR_OPERAND = " (a scalar: a name that no tensor's access reads as an index is a scalar operand)"


class SynthesisError(SpfError):
    """A requested code-generation choice is not valid for the given layouts."""


class ArgumentError(SpfError, ValueError):
    """Data passed to a compiled kernel (or a tensor constructor) does not fit its layout."""


class OutOfMemoryError(SpfError, MemoryError):
    """Generated C could not allocate what it needs (a find's state, a workspace, per-thread
    copies of an output, an assembled output's entries): ``malloc`` returned NULL.  Arrays
    spf allocates itself are checked first and refused as :class:`ArgumentError`."""


class CompileError(SpfError):
    """The C compiler rejected generated code (a bug in spf: please report it) or could not
    be run (``$CC``)."""


class GuardLoopWarning(UserWarning):
    """A lookup stays a guard loop (a scan of every position per iteration of the loops
    outside it) because no find template is valid: the kernel is right but may be slow."""


class ConvertedOperandWarning(UserWarning):
    """A scipy.sparse or pydata operand whose own arrays break a property of the kernel's
    layout (unsorted indices, duplicates) was converted into the layout by generated code: a
    copy on every call, which converting it once (``spf.Tensor.from_scipy``) avoids."""


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first caller outside the spf package (and the
    standard library's decorators between)."""
    package = os.path.dirname(os.path.abspath(__file__))
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename, package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


def _internal(filename: str, package: str) -> bool:
    return os.path.abspath(filename).startswith(package) or filename.startswith("<frozen") \
        or os.path.basename(filename) == "contextlib.py"
