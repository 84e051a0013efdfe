"""The time limit of Z3 queries and the log of the queries Z3 left undecided (shared by the
loop nest's users: scanning stores one per nest, synthesis and analysis record into it)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import z3

from ..errors import SpecError

Z3_TIMEOUT_MS = 2000                # the default time limit of one query
Z3_TIMEOUT_MAX_MS = 3_600_000       # one hour: beyond that a kernel would seem to hang
Z3_TIMEOUT_ENV = "SPF_Z3_TIMEOUT_MS"


def z3_timeout(value: object = None, source: str = "<string>") -> int:
    """The time limit of each Z3 query in milliseconds: ``value`` if given, else
    ``$SPF_Z3_TIMEOUT_MS``, else :data:`Z3_TIMEOUT_MS`; SpecError unless an integer from 1 to
    :data:`Z3_TIMEOUT_MAX_MS`."""
    origin = "z3_timeout_ms"
    if value is None:
        text = os.environ.get(Z3_TIMEOUT_ENV, "").strip()
        if not text:
            return Z3_TIMEOUT_MS
        origin, value = Z3_TIMEOUT_ENV, int(text) if text.lstrip("-").isdigit() else text
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 1 <= value <= Z3_TIMEOUT_MAX_MS:
        raise SpecError(f"{origin} must be an integer number of milliseconds from 1 to "
                        f"{Z3_TIMEOUT_MAX_MS} (one hour), got {value!r}", source)
    return value


@dataclass
class Z3Limit:
    """The time limit of each Z3 query about one loop nest, and the queries Z3 left
    undecided.  An undecided query is never taken as a proof: the caller keeps the choice
    that needs none (the guard loop, a carried dependence, an unordered prefix)."""

    timeout_ms: int = Z3_TIMEOUT_MS
    undecided: list[str] = field(default_factory=list)   # "Z3 timed out ... on Q; fallback"

    def gave_up(self, solver: z3.Solver, query: str, fallback: str) -> str:
        """Record that ``solver`` answered unknown on ``query``; the short reason."""
        reason = solver.reason_unknown()
        short = f"Z3 timed out after {self.timeout_ms} ms" \
            if reason in ("timeout", "canceled") else f"Z3 gave no answer ({reason})"
        entry = f"{short} on {query}; {fallback}"
        if entry not in self.undecided:
            self.undecided.append(entry)
        return short
