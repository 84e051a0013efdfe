"""The options of a kernel, merged (call over kernel file) and validated once."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import SpecError
from ..finds import NAMES as ALGORITHMS
from ..front.kernel_spec import Expr, parse_bounds, parse_order
from ..front.semiring import PLUS_TIMES, Semiring, semiring_of
from ..front.syntax import C_KEYWORDS
from ..front.terms import Constraint
from ..middle.z3limit import z3_timeout

FIND_CHOICES = ("auto",) + ALGORITHMS
C_RESERVED = C_KEYWORDS | {"memset"}   # names generated C may not use


@dataclass(frozen=True)
class KernelOptions:
    """What :class:`spf.Kernel` takes besides the expression and the layouts (see its
    docstring); every field is checked when the options are made."""

    name: str = "spf_kernel"
    order: tuple[str, ...] | None = None
    find: "str | Mapping[str, str]" = "auto"
    parallel: bool = False
    bounds: tuple[Constraint, ...] = ()
    bounds_text: str | None = None
    tile: "Mapping[str, int] | None" = None
    share: tuple[str, str] | None = None
    drop_zeros: bool = False
    reassociate: bool = False
    index_type: str | None = None
    z3_timeout_ms: int = 0
    semiring: Semiring = PLUS_TIMES
    mask: str | None = None          # the output's structural mask (a tensor name)
    complement: bool = False         # the output takes entries outside the mask's
    fill_values: bool = False        # absent entries read as the semiring's zero


def kernel_options(expr: Expr, given: Mapping[str, Any],
                   from_file: Mapping[str, Any] | None = None) -> KernelOptions:
    """``given`` (the call's keywords, None where not given) over ``from_file`` (a kernel
    file's options), validated against ``expr``."""
    o = _merged(given, from_file or {})
    src = expr.source
    name = "spf_kernel" if o["name"] is None else o["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name) \
            or name in C_RESERVED:
        raise SpecError(f"kernel name {name!r} is not a valid C identifier", src)
    parallel = o["parallel"]
    if not isinstance(parallel, bool):
        raise SpecError(f"parallel must be True or False, got {parallel!r}", src)
    for flag in ("drop_zeros", "reassociate", "fill_values"):
        if not isinstance(o[flag], bool):
            raise SpecError(f"{flag} must be True or False, got {o[flag]!r}", src)
    order = parse_order(o["order"], src)
    bounds = o["bounds"]
    mask, complement = _check_mask(o["mask"], o["complement"], expr)
    if mask:
        masked = expr.with_mask(mask)   # checks the name against the statement's
        expr = expr if complement else masked     # share and find may name the mask
    return KernelOptions(
        name=name, order=tuple(order) if order else None, find=_check_find(o["find"], expr),
        parallel=parallel, bounds=tuple(parse_bounds(bounds)) if bounds else (),
        bounds_text=bounds, tile=o["tile"] or None, share=_check_share(o["share"], expr),
        drop_zeros=o["drop_zeros"], reassociate=o["reassociate"], index_type=o["index_type"],
        z3_timeout_ms=z3_timeout(o["z3_timeout_ms"], src),
        semiring=_check_semiring(o["semiring"], src), mask=mask, complement=complement,
        fill_values=o["fill_values"])


def _merged(given: Mapping[str, Any], from_file: Mapping[str, Any]) -> dict[str, Any]:
    """The call's value where it gives one, else the file's (``find="auto"`` and
    ``parallel=False`` count as not given)."""
    out = dict(given)
    for key, value in from_file.items():
        unset = (out.get(key) is None if key in ("name", "z3_timeout_ms", "semiring") else
                 out[key] == "auto" if key == "find" else not out.get(key))
        if unset:
            out[key] = value
    out.setdefault("find", "auto")
    out["parallel"] = False if out.get("parallel") is None else out["parallel"]
    for flag in ("drop_zeros", "reassociate", "complement", "fill_values"):
        out[flag] = False if out.get(flag) is None else out[flag]
    for key in ("name", "order", "bounds", "tile", "share", "index_type", "z3_timeout_ms",
                "semiring", "mask"):
        out.setdefault(key, None)
    return out


def _check_semiring(value: Any, source: str) -> Semiring:
    """A semiring by name, as given, or from a kernel file's table (``add``, ``mul``, ``zero``,
    ``one``, optionally ``associative`` and ``commutative``)."""
    if isinstance(value, Mapping):
        allowed = {"add", "mul", "zero", "one", "associative", "commutative"}
        unknown = sorted(set(value) - allowed)
        if unknown or not {"add", "mul", "zero"} <= set(value):
            raise SpecError(f"a semiring table needs add, mul and zero (and may give one, "
                            f"associative, commutative); got {sorted(value)}", source)
        return Semiring(**value)
    return semiring_of(value, source)


def _check_mask(mask: Any, complement: Any, expr: Expr) -> tuple[str | None, bool]:
    """``mask={"C": "M"}``: (the mask's name, whether it is complemented)."""
    if not isinstance(complement, bool):
        raise SpecError(f"complement must be True or False, got {complement!r}", expr.source)
    if not mask:
        if complement:
            raise SpecError("complement=True needs a mask (mask={output: tensor})", expr.source)
        return None, False
    if not isinstance(mask, Mapping) or len(mask) != 1:
        raise SpecError(f"mask must map the output to one tensor, such as "
                        f"{{{expr.output.tensor!r}: 'M'}}, got {mask!r}", expr.source)
    (out, name), = mask.items()
    if out != expr.output.tensor:
        raise SpecError(f"mask names {out!r}, but the output is {expr.output.tensor!r}",
                        expr.source)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):
        raise SpecError(f"mask: {name!r} is not a tensor name", expr.source)
    return name, complement


def _check_find(find: "str | Mapping[str, str]", expr: Expr) -> "str | dict[str, str]":
    choices = find.values() if isinstance(find, Mapping) else [find]
    for choice in choices:
        if choice not in FIND_CHOICES:
            raise SpecError(f"find={choice!r} is not a find algorithm; choose from "
                            f"{FIND_CHOICES}", expr.source)
    if isinstance(find, Mapping):
        for tname in find:
            if tname not in expr.tensors:
                raise SpecError(f"find names {tname!r}, which is not a tensor of the kernel",
                                expr.source)
        return dict(find)
    return find


def _check_share(share: Mapping[str, str] | None, expr: Expr) -> tuple[str, str] | None:
    if not share:
        return None
    if not isinstance(share, Mapping) or len(share) != 1:
        raise SpecError(f"share must map the output to one input tensor, got {share!r}",
                        expr.source)
    (out, source), = share.items()
    if out != expr.output.tensor:
        raise SpecError(f"share names {out!r}, but the output is {expr.output.tensor!r}",
                        expr.source)
    if source not in [a.tensor for a in expr.factors if a.indices]:
        raise SpecError(f"share: {source!r} is not an input tensor of the kernel", expr.source)
    return out, source
