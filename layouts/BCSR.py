"""Reference packer for BCSR with B x B blocks.

Blocks are row-aligned (block row pi covers rows B*pi .. B*pi+B-1).  Within a block row,
blocks are placed greedily, each starting at the leftmost nonzero not yet covered (the layout
is unaligned: colIdx is any column), so blocks of a row never overlap and every logical entry
is stored once.  A block may run past the last row or column; the relation's
``gi < numRows and gj < numCols`` masks those slots (they hold 0 and are never read).
"""
import numpy as np


def pack(shape, coords, values, params):
    b = params["B"]
    n_rows, n_cols = shape
    n_block_rows = -(-n_rows // b)
    rows, cols = coords
    order = np.lexsort((cols, rows // b))
    rows, cols, values = rows[order], cols[order], values[order]
    row_ptr = [0]
    col_idx, blocks = [], []
    start = 0
    for bi in range(n_block_rows):
        end = start + int(np.searchsorted(rows[start:] // b, bi, side="right"))
        k = start
        while k < end:
            c0 = int(cols[k])
            block = np.zeros((b, b), dtype=values.dtype)
            while k < end and cols[k] < c0 + b:
                block[rows[k] - b * bi, cols[k] - c0] = values[k]
                k += 1
            col_idx.append(c0)
            blocks.append(block)
        row_ptr.append(len(col_idx))
        start = end
    data = np.array(blocks, dtype=values.dtype).reshape(-1) if blocks else np.zeros(0, values.dtype)
    return {"numRows": n_rows, "numCols": n_cols, "numBlockRows": n_block_rows,
            "rowPtr": np.array(row_ptr), "colIdx": np.array(col_idx, dtype=np.int64),
            "data": data}
