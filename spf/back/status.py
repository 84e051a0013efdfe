"""What a generated function returns: one enum for its C (``enum spf_status``, printed from
:class:`Status`) and for the runtime, which turns each status into its error.

A value numpy refuses at run time (an integer raised to a negative integer power) is
reported per call: the function keeps a local status (:data:`VALUE_STATUS`, declared by
:func:`value_status_declaration`) that the value's helper sets through a pointer, and
returns it; nothing is shared between calls, so threads calling one kernel at once never see
each other's errors."""
from __future__ import annotations

from enum import IntEnum

from ..front.functions import VALUE_STATUS
from . import ctree as t

__all__ = ["VALUE_STATUS", "Status", "c_enum", "c_name", "value_status_declaration"]


class Status(IntEnum):
    """The statuses of a generated function (0: it completed)."""

    OK = 0
    OUT_OF_MEMORY = 1       # an allocation of its own failed (malloc returned NULL)
    CAPACITY = 2            # an assembled output outgrew the arrays its bound sized
    NEGATIVE_POWER = 3      # an integer raised to a negative integer power (numpy refuses)
    REFUSED = 4             # entries a layout cannot hold (spf.store: spf_err says which)


def c_name(status: Status) -> str:
    """The status's name in C: ``SPF_NEGATIVE_POWER``."""
    return f"SPF_{status.name}"


def c_enum() -> str:
    """``enum spf_status``, the C side of :class:`Status`."""
    members = ", ".join(f"{c_name(s)} = {s.value}" for s in Status)
    return ("#ifndef SPF_STATUS_DEFINED   /* once per file: several pieces may need it */\n"
            "#define SPF_STATUS_DEFINED\n"
            "/* what a generated function returns (spf.back.status.Status) */\n"
            f"enum spf_status {{ {members} }};\n#endif")


def value_status_declaration() -> t.Declare:
    """The function's own status of its values, set by the helpers that compute them."""
    return t.Declare("int", VALUE_STATUS, c_name(Status.OK),
                     note="set (atomically) where a value numpy refuses is computed")
