"""The C templates shipped in ``templates/`` (installed as ``spf.templates``)."""
from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from string import Template

TEMPLATE_DIR = Path(str(resources.files("spf.templates")))   # installed inside the spf namespace


@cache
def text(name: str) -> str:
    """The template file ``name`` as it is."""
    return (TEMPLATE_DIR / name).read_text()


def template(name: str) -> Template:
    return Template(text(name))


def render(name: str, **args: str) -> str:
    """``name`` with its ``${...}`` placeholders filled."""
    return template(name).substitute(**args)
