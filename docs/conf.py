"""Sphinx configuration of spf's documentation: MyST pages and an API reference from docstrings.

Build (as ``.ci/run`` does): ``python -m sphinx -n -W --keep-going -b html docs docs/_build``.
Every warning is an error, every reference is checked (``nitpicky``), and so is every link
between pages and to a heading (``myst_heading_anchors``).
"""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

import spf

project = "spf"
author = "the spf authors"
version = release = spf.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 4
nitpicky = True
html_theme = "furo"
html_title = f"spf {release}"
autodoc_member_order = "bysource"
autodoc_typehints = "description"

DOCS = Path(__file__).resolve().parent
# Files of the repository outside docs/ that a page of the site includes: a link to the file
# (which works on GitHub) is a link to that page on the site.
INCLUDED = {DOCS.parent / "experiments" / "RESULTS": "results"}

logger = logging.getLogger(__name__)


def _lookup(path: str) -> Any:
    """The object a dotted path names (a module, then attributes), or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if part in getattr(obj, "__dataclass_fields__", {}):
                return obj      # a field without a class attribute
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj
    return None


def _public_name(obj: Any) -> str | None:
    """``spf.NAME`` (or ``spf.NAME.member``) when the API reference documents ``obj``."""
    for name in spf.__all__:
        public = getattr(spf, name)
        if obj is public:
            return f"spf.{name}"
        if inspect.isclass(public):
            for member, value in vars(public).items():
                if value is obj or getattr(value, "__func__", None) is obj:
                    return f"spf.{name}.{member}"
    return None


def _candidates(node: addnodes.pending_xref) -> list[str]:
    """Where a Python reference may point: as written, or relative to the documented object's
    own module and class (autodoc documents ``spf.Kernel``, written in ``spf.kernel``)."""
    target = node["reftarget"].lstrip(".~")
    module, cls = node.get("py:module"), node.get("py:class")
    owner = _lookup(f"{module}.{cls}") if module and cls else None
    home = getattr(owner, "__module__", None)
    return [target, *(f"{m}.{target}" for m in (module, home) if m),
            *(f"{m}.{cls}.{target}" for m in (module, home) if m and cls)]


def resolve_reference(app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref,
                      contnode: nodes.Element) -> nodes.Element | None:
    """A Python reference the documented names do not resolve: to its public name when the
    API reference documents the object (type hints name ``spf.front.layout.Layout``, the
    reference documents ``spf.Layout``); as plain code when it names an existing object that
    the site does not document (spf's internals, numpy, the standard library).  A name that
    exists nowhere stays unresolved, and ``nitpicky`` makes it an error."""
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    for path in _candidates(node):
        obj = _lookup(path)
        if obj is None:
            continue
        public = _public_name(obj)
        if public:
            return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                                       public, node, contnode)
        return contnode
    return None


def link_included_files(app: Sphinx, doctree: nodes.document) -> None:
    """A Markdown link to a repository file that a page includes points at that page."""
    for node in doctree.findall(addnodes.pending_xref):
        if node.get("reftype") == "myst" and node.get("refdomain") == "doc":
            page = INCLUDED.get(Path(app.srcdir, node["reftarget"]).resolve())
            if page:
                node["reftarget"] = page


def check_api_reference(app: Sphinx, env: BuildEnvironment) -> None:
    """Every name of ``spf.__all__`` is documented in the API reference."""
    documented = env.get_domain("py").objects
    for name in spf.__all__:
        if f"spf.{name}" not in documented:
            logger.warning("spf.%s (in spf.__all__) is missing from the API reference", name,
                           location="api")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", resolve_reference)
    app.connect("doctree-read", link_included_files)
    app.connect("env-check-consistency", check_api_reference)
    return {"parallel_read_safe": True}
