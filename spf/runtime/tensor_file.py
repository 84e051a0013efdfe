"""Tensors read from files and checked against a layout (``spf check LAYOUT FILE``).

Two kinds of file: an ``.npz`` archive (``np.savez``) holding the layout's fields by name (a
``[derived]`` field or its source may be left out: it is computed from the other), and a
matrix, stored in the layout, so that checking it says whether the layout can hold it: a
Matrix Market file (``.mtx``, also gzip- or bzip2-compressed) or an ``.npz`` that
``scipy.sparse.save_npz`` wrote.
"""
from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..front.layout import Layout
from ..front.layout_path import load_layout
from .stored import StoredTensor, tensor_class

MATRIX_MARKET = (".mtx", ".mtx.gz", ".mtx.bz2")
KINDS = (".npz",) + MATRIX_MARKET
SCIPY_KEYS = frozenset({"format", "shape"})    # in every archive scipy.sparse.save_npz writes


def is_matrix_market(path: str | os.PathLike) -> bool:
    """Whether ``path`` is named like a Matrix Market file."""
    return os.fspath(path).endswith(MATRIX_MARKET)


def holds_a_matrix(path: str | os.PathLike, layout: Layout) -> bool:
    """Whether ``path`` (read by :func:`load_tensor_file` into ``layout``) holds a matrix to
    store in the layout rather than the layout's fields: a Matrix Market file or a
    ``scipy.sparse.save_npz`` archive."""
    if is_matrix_market(path):
        return True
    try:
        with np.load(path, allow_pickle=False) as archive:
            return _saved_by_scipy(set(archive.files), layout)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, AttributeError, TypeError):
        return False     # not an archive: a file load_tensor_file refuses


def _saved_by_scipy(names: set[str], layout: Layout) -> bool:
    """Whether arrays named ``names`` are what ``scipy.sparse.save_npz`` writes (its format
    and shape beside the arrays), not fields of ``layout``."""
    return names >= SCIPY_KEYS and not SCIPY_KEYS & set(layout.fields)


def load_tensor_file(layout: str | Layout, path: str | os.PathLike,
                     params: Mapping[str, int] | None = None,
                     index_type: str | None = None) -> StoredTensor:
    """The tensor in ``path`` stored in ``layout`` (with layout ``params`` and ``index_type``),
    checked like ``Tensor.from_arrays(..., check=True)``: extents, shape, every property.

    An ``.npz`` holds one array per field, named by the field (scalar fields as 0-d integer
    arrays); the shape comes from the layout's ``shape``; a missing field (but a ``[derived]``
    field or its source, computed from the other) or an array that is no field of the
    layout is an error.  A Matrix Market file, or an ``.npz`` of ``scipy.sparse.save_npz``,
    holds a matrix, stored with :meth:`spf.Tensor.from_scipy` (an array-format one with
    :meth:`spf.Tensor.from_dense`).

    Raises :class:`ArgumentError`, its message starting with the path, for a file that is
    missing, unreadable or of another kind, or whose data does not fit the layout;
    :class:`spf.SpecError` for an unknown layout or parameter.
    """
    lay = load_layout(layout, index_type, **(params or {}))
    file = Path(path)
    try:
        if not os.fspath(path).endswith(KINDS):
            raise ArgumentError(f"not an .npz or Matrix Market file (spf reads "
                                f"{', '.join(KINDS)})")
        if not file.exists():
            raise ArgumentError("no such file")
        if not file.is_file():
            raise ArgumentError("not a file")
        if is_matrix_market(file):
            return _from_matrix(lay, _read_matrix_market(file))
        return _from_npz(lay, file)
    except ArgumentError as exc:
        raise ArgumentError(f"{path}: {exc}") from None


def _from_npz(layout: Layout, file: Path) -> StoredTensor:
    arrays = _read_npz(file)
    if _saved_by_scipy(set(arrays), layout):
        return _from_matrix(layout, _load_scipy_npz(file))
    # a [derived] field or its source: computed from the other, as Tensor.from_arrays does
    computed = {d.source if d.field in arrays else d.field for d in layout.derived.values()
                if (d.field in arrays) != (d.source in arrays)}
    missing = [f for f in layout.fields if f not in arrays and f not in computed]
    unknown = [a for a in arrays if a not in layout.fields]
    if missing or unknown:
        pairs = [f"{d.field} = {d.text()} is [derived]: give {d.field} or {d.source}"
                 for d in layout.derived.values() if d.field in missing]
        problems = ([f"no array for field(s) {', '.join(missing)}"] if missing else []) + \
                   ([f"array(s) {', '.join(unknown)} not among the fields"] if unknown else [])
        raise ArgumentError(f"{'; '.join(problems)} of layout {layout.name} "
                            f"({', '.join(layout.fields)})"
                            + "".join(f"; {p}" for p in pairs))
    fields: dict[str, Any] = {name: arrays[name] if spec.is_array else _scalar(name, arrays[name])
                              for name, spec in layout.fields.items() if name in arrays}
    scalars = {k: v for k, v in fields.items() if isinstance(v, int)}
    shape = tuple(s.evaluate(scalars) for s in layout.shape)
    return tensor_class().from_arrays(layout, shape, fields)


def _scalar(name: str, array: np.ndarray) -> int:
    if array.shape != () or array.dtype.kind not in "iu":
        raise ArgumentError(f"scalar field {name!r} must be a 0-d integer array, got dtype "
                            f"{array.dtype}, shape {array.shape}")
    return int(array)


def _read_npz(file: Path) -> dict[str, np.ndarray]:
    """Every array in the archive (pickled objects are refused)."""
    try:
        archive = np.load(file, allow_pickle=False)
    except OSError as exc:
        raise ArgumentError(f"cannot read the file: {exc}") from None
    except (ValueError, EOFError):
        raise ArgumentError("not an .npz archive (a zip file of .npy arrays, as np.savez "
                            "writes)") from None
    except zipfile.BadZipFile as exc:
        raise ArgumentError(f"damaged .npz archive: {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ArgumentError("a single .npy array, not an .npz archive of the layout's fields")
    with archive:
        out = {}
        for name in archive.files:
            try:
                out[name] = archive[name]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                raise ArgumentError(f"cannot read array {name!r}: {exc}") from None
    return out


def _load_scipy_npz(file: Path) -> Any:
    """The matrix ``scipy.sparse.save_npz`` wrote to ``file`` (pickles refused)."""
    import scipy.sparse
    try:
        return scipy.sparse.load_npz(file)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ArgumentError(f"not a valid scipy.sparse.save_npz matrix: {exc}") from None


def _read_matrix_market(file: Path) -> Any:
    import scipy.io
    try:
        return scipy.io.mmread(file)
    except OSError as exc:
        raise ArgumentError(f"cannot read the file: {exc}") from None
    except (ValueError, EOFError) as exc:
        raise ArgumentError(f"not a valid Matrix Market file: {exc}") from None


def _from_matrix(layout: Layout, matrix: Any) -> StoredTensor:
    """``matrix`` (scipy.sparse or, from an array-format file, numpy) stored in ``layout``."""
    if matrix.dtype.kind not in "biuf":
        raise ArgumentError(f"holds {matrix.dtype} values; spf tensors hold real numbers")
    if isinstance(matrix, np.ndarray):
        return tensor_class().from_dense(layout, matrix)
    return tensor_class().from_scipy(layout, matrix)
