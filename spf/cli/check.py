"""``spf check``: whether tensor data in a file (an .npz of fields, a matrix: Matrix Market or
scipy's save_npz) fits a layout."""
from __future__ import annotations

import argparse

from .common import Commands, index_type_argument, layout_param_argument, layout_params


def add_parser(sub: Commands) -> argparse.ArgumentParser:
    cmd = sub.add_parser("check", help="check tensor data in a file against a layout",
                         description="Check that FILE holds a tensor LAYOUT can store, with "
                         "the checks of spf.Tensor.from_arrays: extents, shape and every "
                         "property LAYOUT declares. An .npz (np.savez) holds one array per "
                         "field of LAYOUT, named by the field (scalar fields as 0-d arrays); "
                         "an array that is no field is an error; a [derived] field or its "
                         "source may be left out, as it is computed from the other. A Matrix "
                         "Market file (.mtx, .mtx.gz, .mtx.bz2) or an .npz that "
                         "scipy.sparse.save_npz wrote holds a matrix, which is stored in "
                         "LAYOUT (spf.Tensor.from_scipy): the check says whether LAYOUT can "
                         "hold it.")
    cmd.add_argument("layout", metavar="LAYOUT", help="a layout name or a .toml path")
    cmd.add_argument("file", metavar="FILE", help="an .npz of the layout's fields, or a "
                     "matrix: a Matrix Market file (.mtx) or a scipy.sparse.save_npz .npz")
    layout_param_argument(cmd)
    index_type_argument(cmd)
    cmd.add_argument("--reads", action="store_true",
                     help="also list the array reads of generated code that were checked "
                     "to stay inside their arrays for this tensor")
    return cmd


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..runtime.tensor_file import holds_a_matrix, load_tensor_file
    tensor = load_tensor_file(args.layout, args.file, layout_params(args.param, parser),
                              args.index_type)
    lay = tensor.layout
    details = [f"{k}={v}" for k, v in lay.params.items()]
    details += [f"{lay.index_type} indices"] if lay.index_type != "int32" else []
    what = f"{lay.name} tensor" + (f" ({', '.join(details)})" if details else "")
    verdict = (f"can be stored as a {what}" if holds_a_matrix(args.file, lay)
               else f"is a valid {what}")
    print(f"ok: {args.file} {verdict} of shape {tensor.shape} with {tensor.values.size} "
          "stored entries")
    if args.reads:
        from ..read_check import checked_reads
        for part, reads in checked_reads(lay):
            where = f" (part {part} of the union)" if part is not None else ""
            print(f"reads checked in bounds{where}: {', '.join(reads)}")
    return 0
