"""Layouts by name: the search path (``$SPF_LAYOUT_PATH``, then the shipped layouts, the
package data ``spf.layouts``), loading a layout by name, path or object with its parameters,
and the default layouts listed in ``layouts/defaults.toml``.
"""
from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .layout import Layout
from .layout_file import load_file
from .toml_source import is_file

LAYOUT_DIR = Path(str(resources.files("spf.layouts")))   # installed inside the spf namespace


def layout_dirs() -> list[Path]:
    """Search path for layout names: ``$SPF_LAYOUT_PATH`` entries, then the shipped ``layouts/``."""
    extra = [Path(p) for p in os.environ.get("SPF_LAYOUT_PATH", "").split(os.pathsep) if p]
    return extra + [LAYOUT_DIR]


def layout_names() -> list[str]:
    """Names of all layouts on the search path."""
    names: set[str] = set()
    for d in layout_dirs():
        if d.is_dir():
            names |= {p.stem for p in d.glob("*.toml") if p.stem != "defaults"}
    return sorted(names)


def resolve_layout_path(name_or_path: str | os.PathLike) -> Path:
    """The file of a layout given by path (``.toml`` or with a directory) or by name: the
    first ``NAME.toml`` on the search path, else the first file there declaring that name."""
    text = os.fspath(name_or_path)
    path = Path(text)
    if path.suffix == ".toml" or os.sep in text or "/" in text:
        if not is_file(path):
            raise SpecError(f"layout file not found: {text}", text)
        return path.resolve()
    for d in layout_dirs():
        cand = d / f"{text}.toml"
        if is_file(cand):
            return cand.resolve()
    for d in layout_dirs():      # a file named otherwise whose ``name`` key is ``text``
        for cand in sorted(d.glob("*.toml")) if d.is_dir() else []:
            if _name_key(cand) == text:
                return cand.resolve()
    raise SpecError(f"unknown layout {text!r}; known layouts: {', '.join(layout_names())}", text)


def _name_key(path: Path) -> str | None:
    """The ``name`` a layout file declares (None when it cannot be read)."""
    try:
        name = tomllib.loads(path.read_text()).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) else None


def load_layout(name_or_path: str | os.PathLike | Layout, index_type: str | None = None,
                **params: int) -> Layout:
    """Load a layout by name (from the search path) or by path, binding ``params``;
    ``index_type`` ("int32" or "int64") sets the width of its index fields (a Layout
    object keeps its own when None; files load as int32)."""
    if isinstance(name_or_path, Layout):
        lay = name_or_path.with_params(**params)
        return lay if index_type is None else lay.with_index_type(index_type)
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise SpecError(f"a layout is given by name, path or Layout object, not "
                        f"{type(name_or_path).__name__} {name_or_path!r}")
    path = resolve_layout_path(name_or_path)
    layout = load_file(str(path), ())
    if params:
        unknown = set(params) - set(layout.params)
        if unknown:
            raise SpecError(f"layout {layout.name} has no parameter(s) {sorted(unknown)}; "
                            f"its parameters: {sorted(layout.params) or 'none'}", str(path))
        layout = layout.with_params(**params)
    return layout if index_type is None else layout.with_index_type(index_type)


def default_layout(order: int) -> Layout:
    """The layout used for a tensor of ``order`` dimensions that was given no layout."""
    return load_layout(_default_names("dense", str(order)))


@cache
def default_layouts(table: str, key: str) -> tuple[str, ...]:
    """Layout names listed in ``layouts/defaults.toml`` under ``[table] key`` (a name or a
    list of names; empty when not listed): e.g. the layouts to try for a scipy matrix."""
    try:
        names = _default_names(table, key)
    except SpecError:
        return ()
    return (names,) if isinstance(names, str) else tuple(names)


def _default_names(table: str, key: str) -> Any:
    path = LAYOUT_DIR / "defaults.toml"
    try:
        data = _defaults(path)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"cannot read default layouts: {exc}", str(path)) from exc
    names = data.get(table, {}).get(key)
    if names is None:
        what = f"order {key}" if table == "dense" else f"[{table}] {key}"
        raise SpecError(f"no default layout for {what}", str(path))
    return names


@cache
def _defaults(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())
