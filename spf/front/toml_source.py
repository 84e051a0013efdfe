"""Spec files (layout files, kernel files): their TOML read and parsed, and where their keys
and values are, so that an error names the line and column it is about.

Every error is a :class:`spf.SpecError` naming the file, and the line and column when known.
"""
from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError


def is_file(path: Path) -> bool:
    """Whether ``path`` names a file (False for names the system refuses: too long, ...)."""
    try:
        return path.is_file()
    except OSError:
        return False


def read_spec(path: str | Path, what: str) -> str:
    """The text of a spec file (``what`` names it in errors): UTF-8, universal newlines."""
    try:
        data = Path(path).read_bytes()
    except (OSError, ValueError) as exc:    # ValueError: a NUL in the path
        raise SpecError(f"cannot read {what}: {exc}", str(path)) from exc
    try:
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, start) + 1
        col = len(data[start:exc.start].decode("utf-8", "replace")) + 1
        raise SpecError(f"{what} is not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be "
                        "decoded", str(path), line, col) from None


def parse_toml(text: str, source: str) -> dict:
    """A TOML document; syntax errors become :class:`SpecError` with line and column."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        raise SpecError(f"invalid TOML: {exc}", source, line, col) from exc
    except RecursionError:    # tomllib recurses once per nested array or inline table
        raise SpecError("invalid TOML: arrays or inline tables nested too deeply",
                        source) from None


def locate(text: str, needle: str, start: int = 0) -> tuple[int, int]:
    """1-based line and column of ``needle`` in ``text`` at or after offset ``start``
    (1, 1 when not found)."""
    pos = text.find(needle, start)
    if pos < 0:
        return 1, 1
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _key_line(text: str, key: str, start: int = 0) -> re.Match[str] | None:
    """The first ``key = value`` line, or ``[key]`` / ``[key.sub]`` table header, at or after
    offset ``start``: group 2 is the key, group 3 what follows it (``=`` and blanks, or the
    ``]`` or ``.`` of a header)."""
    return re.compile(rf"^[ \t]*(\[\[?[ \t]*)?({re.escape(key)})[ \t]*(=[ \t]*|[\].])",
                      re.MULTILINE).search(text, start)


def key_position(text: str, key: str, start: int = 0) -> tuple[int, int, int] | None:
    """(line, column of the key, column of its value) of the first ``key = value`` line, or
    ``[key]`` / ``[key.sub]`` table header (whose value column is the key's), at or after
    offset ``start`` of a TOML text; None when there is none."""
    m = _key_line(text, key, start)
    if not m:
        return None
    line_start = text.rfind("\n", 0, m.start()) + 1
    key_col = m.start(2) - line_start + 1
    value_col = m.end() - line_start + 1 if m.group(3).startswith("=") else key_col
    return text.count("\n", 0, m.start()) + 1, key_col, value_col


def name_position(snippet: str, line: int, col: int, name: str, call: bool) -> tuple[int, int]:
    """Position of ``name`` (a call ``name(`` when ``call``) inside ``snippet``, which
    starts at ``line``:``col``; the snippet's start when not found."""
    word = rf"(?<![\w.]){re.escape(name)}"
    pattern = rf"{word}\s*\(" if call else rf"{word}(?![\w(])"
    m = re.search(pattern, snippet)
    if not m:
        return line, col
    before = snippet[:m.start()]
    if "\n" not in before:
        return line, col + m.start()
    return line + before.count("\n"), m.start() - before.rfind("\n")


@dataclass(frozen=True)
class TomlSource:
    """The text of a spec file and its name (``source``): the positions of its keys, tables
    and values, and errors positioned there."""

    text: str
    source: str = "<string>"

    @classmethod
    def read(cls, path: str | Path, what: str) -> TomlSource:
        """The spec file at ``path`` (``what`` names it in errors)."""
        return cls(read_spec(path, what), str(path))

    def parse(self) -> dict:
        """The TOML document."""
        return parse_toml(self.text, self.source)

    def table_start(self, header: str, nth: int = 0) -> int:
        """Offset of the ``nth`` line ``[header]`` / ``[[header]]`` (0 when absent)."""
        found = list(re.finditer(rf"^[ \t]*\[\[?\s*{re.escape(header)}\s*\]\]?", self.text,
                                 re.MULTILINE))
        return found[nth].start() if nth < len(found) else 0

    def key_at(self, key: str, start: int = 0, end: int | None = None,
               at_key: bool = False) -> tuple[int, int] | None:
        """Line and column of the value of the first ``key =`` (of the key itself with
        ``at_key``) between offsets ``start`` and ``end``; None when there is none."""
        found = key_position(self.text[:end], key, start)
        if not found:
            return None
        line, key_col, value_col = found
        return line, key_col if at_key else value_col

    def position(self, key: str, start: int = 0, at_key: bool = False) -> tuple[int, int]:
        """:meth:`key_at` from ``start`` to the end; 1, 1 when ``key`` is not found."""
        return self.key_at(key, start, at_key=at_key) or (1, 1)

    def error(self, message: str, key: str | None = None, start: int = 0,
              end: int | None = None, at_key: bool = False) -> SpecError:
        """An error at the value of ``key =`` (at the key itself with ``at_key``) searched
        between offsets ``start`` and ``end``, else at the line of offset ``start`` (the
        file's first line when 0)."""
        found = self.key_at(key, start, end, at_key) if key else None
        if found:
            return SpecError(message, self.source, *found)
        return SpecError(message, self.source, self.text.count("\n", 0, start) + 1, 1)

    def value_position(self, snippet: str, key: str | None = None,
                       start: int = 0) -> tuple[int, int]:
        """Position of ``snippet`` (the text of a TOML string), searched from the line of
        ``key =`` (itself searched from offset ``start``) when ``key`` is given."""
        m = _key_line(self.text, key, start) if key is not None else None
        return locate(self.text, snippet, m.start() if m else start)

    def string(self, table: Mapping[str, Any], key: str, required: bool = True) -> str | None:
        """The string ``table[key]`` (None when absent and not ``required``)."""
        if key not in table:
            if required:
                raise self.error(f"missing required key {key!r}")
            return None
        value = table[key]
        if not isinstance(value, str):
            raise self.error(f"{key!r} must be a string", key)
        return value
