"""Find algorithms as plug-ins: every module of this package that defines ``ALGORITHM`` (a
:class:`~spf.finds.base.FindAlgorithm`) is a find template.  :data:`REGISTRY` maps their
names (the ``find=`` option) to them, in Auto's order of preference."""
from __future__ import annotations

import importlib
import pkgutil

from .base import FindAlgorithm

_SUPPORT = {"base", "checks", "model"}


def _discover() -> dict[str, FindAlgorithm]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _SUPPORT:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        algorithm = getattr(module, "ALGORITHM", None)
        if isinstance(algorithm, FindAlgorithm):
            found.append(algorithm)
    return {a.name: a for a in sorted(found, key=lambda a: (a.preference, a.name))}


REGISTRY: dict[str, FindAlgorithm] = _discover()
NAMES: tuple[str, ...] = tuple(REGISTRY) + ("loop",)     # "loop": keep the guard loop
