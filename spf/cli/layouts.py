"""``spf layouts``: the layouts on the search path, as text or as a Markdown table."""
from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING

from ..errors import SpfError
from .common import Commands

if TYPE_CHECKING:
    from ..front.layout import Layout


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("layouts", help="list the layouts on the search path")
    cmd.add_argument("--markdown", action="store_true",
                     help="print a Markdown table (name, relation, fields)")
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Every layout on the search path; one that does not load is reported (status 2)."""
    from ..front.layout_path import layout_names, load_layout
    status = 0
    if args.markdown:
        print("| Layout | Relation (layout indices -> logical indices) | Fields | Properties |")
        print("|---|---|---|---|")
    for name in layout_names():
        try:
            lay = load_layout(name)
        except SpfError as exc:
            print(f"spf: error: layout {name}: {exc}", file=sys.stderr)
            status = 2
            continue
        if args.markdown:
            print(_row(lay))
        else:
            _describe(lay)
    return status


def _row(lay: Layout) -> str:
    """The layout's row of the Markdown table."""
    params = _params_text(lay)
    cells = [f"`{lay.name}`", f"`{_relation_text(lay)}`",
             _fields_text(lay) + (f" (params: {params})" if params else ""),
             _properties_text(lay)]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _describe(lay: Layout) -> None:
    """The layout's name, then its description, relation, fields, parameters and properties
    wrapped at 100 columns."""
    print(lay.name)
    for label, text in (("", _one_line(lay.description)), ("relation:   ", _relation_text(lay)),
                        ("fields:     ", _fields_text(lay)), ("params:     ", _params_text(lay)),
                        ("properties: ", _properties_text(lay))):
        if text:
            print(textwrap.fill(text, width=100, initial_indent="    " + label,
                                subsequent_indent="    " + " " * len(label),
                                break_long_words=False, break_on_hyphens=False))


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _relation_text(lay: Layout) -> str:
    """The relation as written in the layout file."""
    return _one_line(lay.raw.get("relation", lay.relation))


def _fields_text(lay: Layout) -> str:
    """Fields as written in the layout file (parameters not substituted)."""
    raw, derived = lay.raw.get("fields", {}), lay.raw.get("derived", {})
    text = ", ".join(f"{name}: {_one_line(raw.get(name, f.ctype))}"
                     + (f" = {derived[name]}" if name in derived else "")
                     for name, f in lay.fields.items())
    return text if lay.implicit is None else f"{text}; no value array, every entry {lay.value}"


def _params_text(lay: Layout) -> str:
    return ", ".join(f"{k} = {v}" for k, v in lay.params.items())


def _properties_text(lay: Layout) -> str:
    return "; ".join(p.text() for p in lay.properties) or "none"
