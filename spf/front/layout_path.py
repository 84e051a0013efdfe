"""Layouts by name: the search path (``$SPF_LAYOUT_PATH``, then the shipped layouts, the
package data ``spf.layouts``), loading a layout by name, path or object with its parameters,
the default layouts listed in the ``defaults.toml`` files of the search path, and binding
the order of a layout file written for every order.
"""
from __future__ import annotations

import os
import tomllib
from collections.abc import Container
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .layout import Layout
from .layout_file import MAX_GENERIC_ORDER, load_file
from .toml_source import is_file

LAYOUT_DIR = Path(str(resources.files("spf.layouts")))   # installed inside the spf namespace
DEFAULTS = "defaults.toml"    # the default layouts, in any directory of the search path


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
    object keeps its own when None; files load as int32, or int64 when they declare an
    int64 index array)."""
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


def for_order(layout: Layout, order: int, given: Container[str] = ()) -> Layout:
    """``layout`` for a tensor of ``order`` dimensions: a file written for every order gets
    its order parameter bound to ``order`` unless it is among the ``given`` parameters;
    other layouts are returned as they are (their order is checked where they are used)."""
    param = layout.order_param
    if param is None or param in given or layout.order == order:
        return layout
    if not 1 <= order <= MAX_GENERIC_ORDER:
        raise SpecError(f"layout {layout.name} describes orders 1 to {MAX_GENERIC_ORDER}, "
                        f"not {order}", layout.source)
    return layout.with_params(**{param: order})


def load_for_order(name_or_path: str | os.PathLike | Layout, order: int,
                   index_type: str | None = None, /, **params: int) -> Layout:
    """:func:`load_layout` for a tensor of ``order`` dimensions (:func:`for_order`: a file
    written for every order takes ``order`` unless ``params`` give its order)."""
    return for_order(load_layout(name_or_path, index_type, **params), order, params)


def default_layout(order: int) -> Layout:
    """The layout used for a tensor of ``order`` dimensions that was given no layout: the one
    ``defaults.toml`` lists under ``[dense]`` for the order, else under ``[dense] any``."""
    names = default_layouts("dense", str(order))
    if not names:
        raise SpecError(f"no default layout for order {order}: no defaults.toml on the "
                        f"layout search path lists [dense] {order} or [dense] any",
                        str(LAYOUT_DIR / DEFAULTS))
    layout = for_order(load_layout(names[0]), order)
    if layout.order != order:
        raise SpecError(f"the default layout for order {order}, {layout.name}, stores "
                        f"order-{layout.order} tensors", str(layout.source))
    return layout


def default_layouts(table: str, key: str) -> tuple[str, ...]:
    """Layout names listed under ``[table] key`` in the ``defaults.toml`` files of the layout
    search path (the first file that lists the key; where none does and ``key`` is an order,
    the first that lists ``any``; empty when none lists either): e.g. the layouts to try for
    a scipy matrix.  A file on ``$SPF_LAYOUT_PATH`` comes before the shipped one."""
    return _default_names(table, key, tuple(layout_dirs()))


@cache
def _default_names(table: str, key: str, dirs: tuple[Path, ...]) -> tuple[str, ...]:
    files = [(d / DEFAULTS, _defaults(d / DEFAULTS)) for d in dirs if is_file(d / DEFAULTS)]
    for wanted in (key, "any") if key.isdigit() else (key,):
        for path, data in files:
            section = data.get(table, {})
            names = section.get(wanted) if isinstance(section, dict) else None
            if names is None:
                continue
            if isinstance(names, str):
                return (names,)
            if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
                return tuple(names)
            raise SpecError(f"[{table}] {wanted} must be a layout name or a list of layout "
                            f"names, got {names!r}", str(path))
    return ()


@cache
def _defaults(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"cannot read default layouts: {exc}", str(path)) from exc
