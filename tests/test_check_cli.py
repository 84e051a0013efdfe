"""``spf check LAYOUT FILE`` and :func:`spf.runtime.tensor_file.load_tensor_file`: tensor data in
``.npz`` and Matrix Market files checked against a layout."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import spf
from spf import cli
from spf.runtime.tensor_file import load_tensor_file

ROOT = Path(__file__).resolve().parent.parent

# a 3 x 4 CSR matrix: row 0 has columns 0, 2; row 1 column 1; row 2 columns 1, 3
CSR = {"numRows": 3, "numCols": 4, "rowPtr": [0, 2, 3, 5], "colIdx": [0, 2, 1, 1, 3],
       "data": [1.0, 2.0, 3.0, 4.0, 5.0]}
MATRIX = sp.random(8, 6, density=0.3, format="csr", random_state=0)


def savez(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


def mmwrite(path: Path, matrix) -> Path:
    scipy.io.mmwrite(path, matrix)
    return path


def check(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def check_error(capsys, *args: str) -> str:
    """The message of a failed ``spf check`` (exit status 2, nothing on stdout)."""
    code, out, err = check(capsys, *args)
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("spf: error: ") and err.count("\n") == 1, err
    return err[len("spf: error: "):].strip()


# ---------------------------------------------------------------------------------------
# .npz: the layout's fields
def test_valid_csr(tmp_path, capsys):
    path = savez(tmp_path / "csr.npz", **CSR)
    code, out, err = check(capsys, "CSR", path)
    assert (code, err) == (0, "")
    assert out == f"ok: {path} is a valid CSR tensor of shape (3, 4) with 5 stored entries\n"


def test_valid_csr_from_scipy_arrays(tmp_path, capsys):
    m = MATRIX
    path = savez(tmp_path / "m.npz", numRows=8, numCols=6, rowPtr=m.indptr, colIdx=m.indices,
                 data=m.data)
    code, out, _ = check(capsys, "CSR", path)
    assert code == 0
    assert out == f"ok: {path} is a valid CSR tensor of shape (8, 6) with {m.nnz} stored entries\n"


def test_load_tensor_file_returns_the_checked_tensor(tmp_path):
    path = savez(tmp_path / "csr.npz", **CSR)
    t = load_tensor_file("CSR", path)
    assert isinstance(t, spf.Tensor) and t.shape == (3, 4) and t["rowPtr"].dtype == np.int32
    expected = spf.Tensor.from_arrays("CSR", (3, 4), CSR).to_dense()
    assert np.array_equal(t.to_dense(), expected)


def test_col_idx_out_of_range(tmp_path, capsys):
    path = savez(tmp_path / "bad.npz", **{**CSR, "colIdx": [0, 2, 1, 1, 4]})
    assert check_error(capsys, "CSR", path) == (
        f"{path}: CSR tensor: 'colIdx' violates range (0 <= colIdx(a) <= numCols - 1) at "
        "the read colIdx[pj] = colIdx[4]: 4 > 3")


def test_col_idx_unsorted_within_a_row(tmp_path, capsys):
    path = savez(tmp_path / "unsorted.npz", **{**CSR, "colIdx": [2, 0, 1, 1, 3]})
    assert check_error(capsys, "CSR", path) == (
        f"{path}: CSR tensor: 'colIdx' violates periodic_monotonic (pi = pi' and a < a' -> "
        "colIdx(a) < colIdx(a'), period pi) at position 1: colIdx[1] = 0 is out of order")
    # the same arrays are fine for a layout that does not sort rows
    code, out, _ = check(capsys, "CSR_unsorted", path)
    assert code == 0 and "is a valid CSR_unsorted tensor" in out


def test_row_ptr_decreasing(tmp_path, capsys):
    path = savez(tmp_path / "rows.npz", **{**CSR, "rowPtr": [0, 3, 2, 5]})
    message = check_error(capsys, "CSR", path)
    assert message.startswith(f"{path}: CSR tensor: 'rowPtr' violates monotonic")
    assert "at positions 1, 2: 3, 2" in message


def test_extent_mismatch(tmp_path, capsys):
    path = savez(tmp_path / "short.npz", **{**CSR, "data": [1.0, 2.0, 3.0, 4.0]})
    assert check_error(capsys, "CSR", path) == (
        f"{path}: CSR tensor: 'data' has 4 elements but its extent [rowPtr(numRows)] is 5")


def bcsr_arrays(block: int) -> dict[str, np.ndarray]:
    t = spf.Tensor.from_scipy("BCSR", MATRIX, B=block)
    return {name: np.asarray(value) for name, value in t.fields.items()}


def test_bcsr_with_param(tmp_path, capsys):
    arrays = bcsr_arrays(2)
    path = savez(tmp_path / "bcsr.npz", **arrays)
    code, out, _ = check(capsys, "BCSR", path, "--param", "B=2")
    assert code == 0
    assert out == (f"ok: {path} is a valid BCSR tensor (B=2) of shape (8, 6) with "
                   f"{arrays['data'].size} stored entries\n")
    # with the default B = 8 the blocks do not match the data's extent
    message = check_error(capsys, "BCSR", path)
    assert message.startswith(f"{path}: BCSR tensor: 'data' has {arrays['data'].size} elements")


def test_bcsr_overlapping_blocks(tmp_path, capsys):
    # two 2 x 2 blocks in block row 0 starting at columns 0 and 1: they overlap (gap B)
    path = savez(tmp_path / "overlap.npz", numRows=2, numCols=4, numBlockRows=1,
                 rowPtr=[0, 2], colIdx=[0, 1], data=np.ones((2, 2, 2)))
    message = check_error(capsys, "BCSR", path, "--param", "B=2")
    assert message == (f"{path}: BCSR tensor: 'colIdx' violates periodic_monotonic (pi = pi' "
                       "and a < a' -> colIdx(a) + 2 <= colIdx(a'), period pi) at position 1: "
                       "colIdx[1] = 1 is out of order")


def test_int64(tmp_path, capsys):
    n = 5_000_000_000            # more columns than int32 holds
    path = savez(tmp_path / "wide.npz", numRows=2, numCols=n,
                 rowPtr=np.array([0, 1, 3], dtype=np.int64),
                 colIdx=np.array([4_000_000_000, 3, n - 1], dtype=np.int64), data=[1.0, 2.0, 3.0])
    code, out, _ = check(capsys, "CSR", path, "--index-type", "int64")
    assert code == 0
    assert out == (f"ok: {path} is a valid CSR tensor (int64 indices) of shape (2, {n}) with 3 "
                   "stored entries\n")
    assert load_tensor_file("CSR", path, index_type="int64")["colIdx"].dtype == np.int64
    assert check_error(capsys, "CSR", path) == (
        f"{path}: CSR tensor: numCols = {n} is outside 0..2147483647 (index_type='int32'); "
        "use index_type='int64'")


def test_int64_arrays_that_fit_int32(tmp_path, capsys):
    arrays = {k: np.asarray(v, dtype=np.int64) if k in ("rowPtr", "colIdx") else v
              for k, v in CSR.items()}
    path = savez(tmp_path / "csr64.npz", **arrays)
    code, out, _ = check(capsys, "CSR", path)
    assert code == 0 and out.startswith(f"ok: {path} is a valid CSR tensor of shape (3, 4)")


def test_missing_field(tmp_path, capsys):
    path = savez(tmp_path / "nocol.npz", **{k: v for k, v in CSR.items() if k != "colIdx"})
    assert check_error(capsys, "CSR", path) == (
        f"{path}: no array for field(s) colIdx of layout CSR (numRows, numCols, rowPtr, "
        "colIdx, data)")


def test_unknown_field_is_an_error(tmp_path, capsys):
    path = savez(tmp_path / "extra.npz", **CSR, shape=[3, 4])
    assert check_error(capsys, "CSR", path) == (
        f"{path}: array(s) shape not among the fields of layout CSR (numRows, numCols, rowPtr, "
        "colIdx, data)")


def test_wrong_layout(tmp_path, capsys):
    path = savez(tmp_path / "csr.npz", **CSR)
    assert check_error(capsys, "CSC", path) == (
        f"{path}: no array for field(s) colPtr, rowIdx; array(s) rowPtr, colIdx not among the "
        "fields of layout CSC (numRows, numCols, colPtr, rowIdx, data)")


@pytest.mark.parametrize("value, described", [
    (np.array([3]), "dtype int64, shape (1,)"),
    (np.array(3.0), "dtype float64, shape ()"),
])
def test_scalar_field_must_be_a_0d_integer(tmp_path, capsys, value, described):
    path = savez(tmp_path / "scalar.npz", **{**CSR, "numRows": value})
    assert check_error(capsys, "CSR", path) == (
        f"{path}: scalar field 'numRows' must be a 0-d integer array, got {described}")


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dia", "bsr"])
@pytest.mark.parametrize("layout", ["CSR", "CSR_lengths"])
def test_scipy_save_npz_file(tmp_path, capsys, fmt, layout):
    """A matrix scipy.sparse.save_npz wrote is stored in the layout, as a Matrix Market file
    is (issue 53: it was refused)."""
    path = tmp_path / "scipy.npz"
    sp.save_npz(path, MATRIX.asformat(fmt))
    code, out, err = check(capsys, layout, path)
    assert (code, err) == (0, "")
    assert out == (f"ok: {path} can be stored as a {layout} tensor of shape (8, 6) with "
                   f"{MATRIX.nnz} stored entries\n")
    t = load_tensor_file(layout, path)
    np.testing.assert_array_equal(t.to_dense(), MATRIX.toarray())
    if layout == "CSR_lengths":
        np.testing.assert_array_equal(t["rowLen"], np.diff(MATRIX.indptr))


@pytest.mark.parametrize("matrix", [sp.csr_matrix((0, 3)), sp.csr_matrix((4, 5)),
                                    sp.csr_matrix(([2.5], ([3], [0])), shape=(4, 5))])
def test_scipy_save_npz_edge_cases(tmp_path, matrix):
    path = tmp_path / "edge.npz"
    sp.save_npz(path, matrix)
    t = load_tensor_file("CSR", path)
    assert t.shape == matrix.shape
    np.testing.assert_array_equal(t.to_dense(), matrix.toarray())


def test_damaged_scipy_save_npz(tmp_path, capsys):
    path = savez(tmp_path / "bad.npz", format=np.array("xyz"), shape=np.array([2, 2]),
                 data=np.ones(1))
    assert check_error(capsys, "CSR", path) == (
        f'{path}: not a valid scipy.sparse.save_npz matrix: Unknown format "xyz_matrix"')
    path = savez(tmp_path / "short.npz", format=np.array("csr"), shape=np.array([2, 2]),
                 data=np.ones(1))
    assert check_error(capsys, "CSR", path) == (
        f"{path}: not a valid scipy.sparse.save_npz matrix: 'indices is not a file in the "
        "archive'")


# ---------------------------------------------------------------------------------------
# [derived] fields: either side of a pair, computed as Tensor.from_arrays does (issue 53)
LENGTHS = {"numRows": 3, "numCols": 4, "colIdx": CSR["colIdx"], "data": CSR["data"]}


@pytest.mark.parametrize("given", [{"rowLen": [2, 1, 2]}, {"rowPtr": CSR["rowPtr"]},
                                   {"rowLen": [2, 1, 2], "rowPtr": CSR["rowPtr"]}])
def test_derived_field_or_its_source(tmp_path, capsys, given):
    path = savez(tmp_path / "lengths.npz", **LENGTHS, **given)
    code, out, err = check(capsys, "CSR_lengths", path)
    assert (code, err) == (0, "")
    assert out == (f"ok: {path} is a valid CSR_lengths tensor of shape (3, 4) with 5 stored "
                   "entries\n")
    t = load_tensor_file("CSR_lengths", path)
    np.testing.assert_array_equal(t["rowLen"], [2, 1, 2])
    np.testing.assert_array_equal(t["rowPtr"], CSR["rowPtr"])
    want = spf.Tensor.from_arrays("CSR", (3, 4), CSR).to_dense()
    np.testing.assert_array_equal(t.to_dense(), want)


def test_derived_field_errors(tmp_path, capsys):
    path = savez(tmp_path / "none.npz", **LENGTHS)
    assert check_error(capsys, "CSR_lengths", path) == (
        f"{path}: no array for field(s) rowLen, rowPtr of layout CSR_lengths (numRows, numCols, "
        "rowLen, rowPtr, colIdx, data); rowPtr = prefix_sum(rowLen) is [derived]: give rowPtr "
        "or rowLen")
    path = savez(tmp_path / "disagree.npz", **LENGTHS, rowLen=[2, 1, 1], rowPtr=CSR["rowPtr"])
    assert check_error(capsys, "CSR_lengths", path) == (
        f"{path}: CSR_lengths tensor: rowPtr must be prefix_sum(rowLen) (derived); it differs "
        "at 3")
    path = savez(tmp_path / "empty.npz", numRows=0, numCols=4, rowLen=np.zeros(0, int),
                 colIdx=np.zeros(0, int), data=np.zeros(0))
    assert check(capsys, "CSR_lengths", path)[0] == 0


# ---------------------------------------------------------------------------------------
# file errors
def test_missing_file(tmp_path, capsys):
    path = tmp_path / "nope.npz"
    assert check_error(capsys, "CSR", path) == f"{path}: no such file"


def test_directory(tmp_path, capsys):
    path = tmp_path / "dir.npz"
    path.mkdir()
    assert check_error(capsys, "CSR", path) == f"{path}: not a file"


def test_wrong_extension(tmp_path, capsys):
    path = tmp_path / "m.txt"
    path.write_text("1 2 3\n")
    assert check_error(capsys, "CSR", path) == (
        f"{path}: not an .npz or Matrix Market file (spf reads .npz, .mtx, .mtx.gz, .mtx.bz2)")


@pytest.mark.parametrize("content", [b"", b"not an archive\n"])
def test_npz_that_is_no_archive(tmp_path, capsys, content):
    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    assert check_error(capsys, "CSR", path) == (
        f"{path}: not an .npz archive (a zip file of .npy arrays, as np.savez writes)")


def test_damaged_npz(tmp_path, capsys):
    path = tmp_path / "damaged.npz"
    path.write_bytes(savez(tmp_path / "good.npz", **CSR).read_bytes()[:100])
    assert check_error(capsys, "CSR", path).startswith(f"{path}: damaged .npz archive: ")


def test_npy_named_npz(tmp_path, capsys):
    path = tmp_path / "array.npz"
    with open(path, "wb") as f:
        np.save(f, np.arange(3))
    assert check_error(capsys, "CSR", path) == (
        f"{path}: a single .npy array, not an .npz archive of the layout's fields")


def test_npz_with_object_array(tmp_path, capsys):
    path = savez(tmp_path / "objects.npz", **{**CSR, "colIdx": np.array([0, "x"], dtype=object)})
    message = check_error(capsys, "CSR", path)
    assert message.startswith(f"{path}: cannot read array 'colIdx': Object arrays cannot be "
                              "loaded")


@pytest.mark.parametrize("name, reader", [("secret.npz", (np, "load")),
                                          ("secret.mtx", (scipy.io, "mmread"))])
def test_unreadable_file(tmp_path, capsys, monkeypatch, name, reader):
    path = tmp_path / name
    path.write_bytes(b"")

    def refuse(file, *args, **kwargs):   # as for a file without read permission (not root)
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr(*reader, refuse)
    assert check_error(capsys, "CSR", path) == (
        f"{path}: cannot read the file: [Errno 13] Permission denied: '{path}'")


def test_unknown_layout_and_parameter(tmp_path, capsys):
    path = savez(tmp_path / "csr.npz", **CSR)
    assert check_error(capsys, "NoSuchLayout", path).startswith(
        "NoSuchLayout: unknown layout 'NoSuchLayout'; known layouts: ")
    assert check_error(capsys, "CSR", path, "--param", "B=2").endswith(
        "layout CSR has no parameter(s) ['B']; its parameters: none")


def test_malformed_param_option(tmp_path, capsys):
    path = savez(tmp_path / "csr.npz", **CSR)
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "BCSR", str(path), "--param", "B"])
    assert exc.value.code == 2
    assert "--param expects PARAM=INT, got 'B'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Matrix Market: can the layout store the matrix?
def test_mtx_in_csr(tmp_path, capsys):
    path = mmwrite(tmp_path / "m.mtx", MATRIX)
    code, out, _ = check(capsys, "CSR", path)
    assert code == 0
    assert out == (f"ok: {path} can be stored as a CSR tensor of shape (8, 6) with "
                   f"{MATRIX.nnz} stored entries\n")


def test_mtx_in_bcsr_counts_the_blocks(tmp_path, capsys):
    path = mmwrite(tmp_path / "m.mtx", MATRIX)
    stored = spf.Tensor.from_scipy("BCSR", MATRIX, B=2).values.size
    code, out, _ = check(capsys, "BCSR", path, "--param", "B=2")
    assert code == 0
    assert out == (f"ok: {path} can be stored as a BCSR tensor (B=2) of shape (8, 6) with "
                   f"{stored} stored entries\n")


def test_mtx_gz_and_int64(tmp_path, capsys):
    plain = mmwrite(tmp_path / "m.mtx", MATRIX)
    path = tmp_path / "m.mtx.gz"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    code, out, _ = check(capsys, "COO", path, "--index-type", "int64")
    assert code == 0
    assert out.startswith(f"ok: {path} can be stored as a COO tensor (int64 indices) of shape "
                          "(8, 6)")
    t = load_tensor_file("COO", path, index_type="int64")
    assert np.array_equal(t.to_dense(), MATRIX.toarray())


def test_mtx_array_format(tmp_path, capsys):
    dense = np.array([[1.0, 0.0], [0.0, 4.0]])
    path = mmwrite(tmp_path / "dense.mtx", dense)
    code, out, _ = check(capsys, "DenseMatrix", path)
    assert code == 0 and "a DenseMatrix tensor of shape (2, 2) with 4 stored entries" in out
    code, out, _ = check(capsys, "CSR", path)
    assert code == 0 and "a CSR tensor of shape (2, 2) with 2 stored entries" in out


def test_mtx_the_layout_cannot_store(tmp_path, capsys):
    upper = sp.coo_matrix(([1.0, 2.0], ([0, 1], [0, 3])), shape=(4, 4))
    path = mmwrite(tmp_path / "upper.mtx", upper)
    assert check_error(capsys, "LowerTri", path) == (
        f"{path}: entry (1, 3) cannot be stored in LowerTri: its relation requires gj <= gi")


def test_mtx_in_a_vector_layout(tmp_path, capsys):
    path = mmwrite(tmp_path / "m.mtx", MATRIX)
    assert check_error(capsys, "SV", path) == (
        f"{path}: layout SV stores order-1 tensors, got shape (8, 6)")


def test_mtx_complex(tmp_path, capsys):
    path = mmwrite(tmp_path / "c.mtx", sp.coo_matrix(np.array([[1 + 2j, 0], [0, 1]])))
    assert check_error(capsys, "CSR", path) == (
        f"{path}: holds complex128 values; spf tensors hold real numbers")


@pytest.mark.parametrize("content", [
    "not matrix market\n",
    "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n",
])
def test_mtx_malformed(tmp_path, capsys, content):
    path = tmp_path / "bad.mtx"
    path.write_text(content)
    assert check_error(capsys, "CSR", path).startswith(
        f"{path}: not a valid Matrix Market file: ")


# ---------------------------------------------------------------------------------------
def run_spf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spf", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ})


def test_python_m_spf_check(tmp_path):
    good = savez(tmp_path / "csr.npz", **CSR)
    proc = run_spf("check", "CSR", str(good))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (f"ok: {good} is a valid CSR tensor of shape (3, 4) with 5 stored "
                           "entries\n")
    bad = savez(tmp_path / "bad.npz", **{**CSR, "colIdx": [0, 2, 1, 1, 4]})
    proc = run_spf("check", "CSR", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"spf: error: {bad}: CSR tensor: 'colIdx' violates range")
    assert "Traceback" not in proc.stderr
