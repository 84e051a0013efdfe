"""Layout files that describe one layout for every order.

A layout file whose key ``order`` names one of its parameters (``order = "N"``) stands for
one layout per value of that parameter, its order.  Its text says what is written once per
dimension ``d = 0 .. N-1`` (docs/layouts.md, "One file for every order"):

- ``$(TEXT)`` or ``$(TEXT|SEP)`` inside a string: ``TEXT`` once per dimension with ``#``
  replaced by ``d``, joined by ``SEP`` (``", "`` when not given);
- a list element, a field (its name and type) or a ``[[properties]]`` table that still holds
  a ``#`` outside ``$(...)``: one copy per dimension with ``#`` replaced by ``d``; a list
  element that is exactly ``$(TEXT)`` is also one element per dimension.
"""
from __future__ import annotations

from typing import Any


def expand(table: dict[str, Any], n: int) -> dict[str, Any]:
    """The layout file's table written out for order ``n`` (ValueError: an unclosed
    ``$(``)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key == "fields" and isinstance(value, dict):
            out[key] = _fields(value, n)
        elif key == "properties" and isinstance(value, list):
            out[key] = [copy for prop in value for copy in _per_dimension(_value(prop, n), n)]
        else:
            out[key] = _value(value, n)
    return out


def _repeats(text: str) -> list[tuple[int, int, str, str]]:
    """Each ``$(TEXT|SEP)`` of ``text``: its start, its end, TEXT and SEP (parentheses inside
    TEXT nest; the first ``|`` outside them starts SEP)."""
    found = []
    start = text.find("$(")
    while start >= 0:
        depth, pos, bar = 1, start + 2, -1
        while pos < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[pos], 0)
            if text[pos] == "|" and depth == 1 and bar < 0:
                bar = pos
            pos += 1
        if depth:
            raise ValueError(f"'$(' at offset {start} of {text!r} is never closed")
        body = text[start + 2:pos - 1] if bar < 0 else text[start + 2:bar]
        found.append((start, pos, body, ", " if bar < 0 else text[bar + 1:pos - 1]))
        start = text.find("$(", pos)
    return found


def _inline(text: str, n: int) -> str:
    out, last = [], 0
    for start, end, body, sep in _repeats(text):
        out += [text[last:start], sep.join(body.replace("#", str(d)) for d in range(n))]
        last = end
    return "".join(out) + text[last:]


def _whole(item: Any) -> str | None:
    """TEXT when ``item`` is exactly ``$(TEXT)``."""
    if not isinstance(item, str):
        return None
    found = _repeats(item)
    if len(found) == 1 and found[0][:2] == (0, len(item)) and "|" not in item:
        return found[0][2]
    return None


def _value(value: Any, n: int) -> Any:
    """``value`` with its ``$(...)`` written out and its list elements repeated."""
    if isinstance(value, str):
        return _inline(value, n)
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            whole = _whole(item)
            if whole is not None:
                out += [whole.replace("#", str(d)) for d in range(n)]
            else:
                out += _per_dimension(_value(item, n), n)
        return out
    if isinstance(value, dict):
        return {k: _value(v, n) for k, v in value.items()}
    return value


def _fields(fields: dict[str, Any], n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, ctype in fields.items():
        ctype = _value(ctype, n)
        copies = range(n) if "#" in name or _has_dim(ctype) else [None]
        for d in copies:
            field = name if d is None else name.replace("#", str(d))
            if field in out:
                raise ValueError(f"field {field!r} is written twice (by {name!r})")
            out[field] = ctype if d is None else _at(ctype, d)
    return out


def _per_dimension(value: Any, n: int) -> list[Any]:
    return [_at(value, d) for d in range(n)] if _has_dim(value) else [value]


def _has_dim(value: Any) -> bool:
    if isinstance(value, str):
        return "#" in value
    if isinstance(value, list):
        return any(_has_dim(v) for v in value)
    if isinstance(value, dict):
        return any(_has_dim(v) for v in value.values())
    return False


def _at(value: Any, d: int) -> Any:
    """``value`` with every ``#`` replaced by ``d``."""
    if isinstance(value, str):
        return value.replace("#", str(d))
    if isinstance(value, list):
        return [_at(v, d) for v in value]
    if isinstance(value, dict):
        return {k: _at(v, d) for k, v in value.items()}
    return value
