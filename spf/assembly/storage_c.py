"""An assembled output's storage functions as code-tree definitions (the cursor, append,
finish, flush).

The statement hands each entry to one of two targets, by the function's role
(:class:`~.model.FunctionRole`):

- ``OUTPUT`` (a kernel whose result is the output tensor): entries reach the output
  layout's own arrays in storage order, through ``<name>_append``, generated from
  :class:`~spf.front.storage.Storage` alone.  For each entry, the first level whose coordinates
  differ from the previous entry's opens a new position there and at every level below it
  (dense: ``parent * extent + coord``; compressed: the next free position, its coordinate
  arrays written and the parent's pointer moved past it).  The arrays were sized by the
  caller from ``<name>_bound`` (the number of statement instances, an upper bound on the
  number of entries) and are trimmed afterwards; ``<name>_finish`` fills the pointers of
  parents without entries and reports how many positions each level used.
  Bucket mode (a dense level over a compressed one, no order from the loops): a first
  pass (``<name>_histogram``) counts each dense position's entries, the kernel scatters
  every entry to its position's segment, and ``spf_bucket_finish`` sorts and combines the
  segments in place and writes the pointers.
- ``STREAM`` (a term of a sum): entries are appended to a sorted (key, value) run, which
  the sum merges with the other terms' runs before appending the union to the output.

Keys are the output coordinates linearized row-major in storage order (``spf_ext[m]``:
extent of coordinate m; a coordinate stored decreasing is flipped).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..back import ctree as t
from ..back.names import field_ctype
from ..front.storage import Storage, StorageKind, StorageLevel
from .base import CAPACITY


@dataclass(frozen=True)
class _Shape:
    """The numbers of an output's storage that its storage functions are written from."""

    storage: Storage
    kernel: str
    struct: str

    @property
    def levels(self) -> tuple[StorageLevel, ...]:
        return self.storage.levels

    @property
    def n_dims(self) -> int:
        return len(self.storage.order)

    @property
    def first(self) -> list[int]:
        """The first coordinate of each level."""
        return [sum(len(lv.coords) for lv in self.levels[:k]) for k in range(len(self.levels))]

    @property
    def last(self) -> list[int]:
        return [self.first[k] + len(lv.coords) - 1 for k, lv in enumerate(self.levels)]

    @property
    def compressed(self) -> list[int]:
        return [k for k, lv in enumerate(self.levels) if lv.kind is StorageKind.COMPRESSED]

    @property
    def stepping(self) -> list[int]:
        """Coordinates that usually stay or step by one from entry to entry (each level's
        first, increasing coordinate but the key's last: a row of CSR's, COO's row): the next
        value (and in the last level, the one before) is tried before dividing."""
        return [self.first[k] for k in range(len(self.levels))
                if self.first[k] != self.n_dims - 1
                and not self.storage.descending[self.first[k]]]

    @property
    def cursor(self) -> str:
        return f"{self.kernel}_cursor"


def functions(storage: Storage, kernel: str, struct: str, workspace: bool,
              any_order: bool = False, last_only: bool = False) -> list[t.Definition]:
    """``<kernel>_cursor`` (its type and ``_init``), ``<kernel>_append``, ``<kernel>_finish``
    and, for a workspace, ``<kernel>_flush``: the output's storage, from its levels.

    Keys increase along the entries, so level k opens a new position exactly when the key
    reaches ``end_k``, the first key past the previous entry's coordinates of levels 0..k
    (with ``any_order``, a flushed group keeps the order its slots were touched in: they
    differ only in coordinates of the last level, which opens a position for every entry).
    ``last_only``: a workspace slot is the last level's one coordinate itself, so after its
    first entry a group only extends the last level (one capacity check, one pointer write).
    Only then are the level's coordinates decoded, dividing the key's remainder below its
    parent by the strides (a level's single increasing coordinate first tries the value after
    the previous one, which dense rows take every time); the last coordinate is that
    remainder itself.  The last level
    opens a position at every entry (keys are distinct).
    """
    sh = _Shape(storage, kernel, struct)
    items = [*_cursor(sh), _append(sh), _finish(sh)]
    if workspace:
        items.append(_flush(sh, any_order, last_only))
    return items


def _cursor(sh: _Shape) -> list[t.Definition]:
    levels, n_dims, n_levels, cur = sh.levels, sh.n_dims, len(sh.levels), sh.cursor
    members = [f"ext{m}" for m in range(n_dims)] + [f"st{m}" for m in range(n_dims)]
    members += [f"crd{m}" for m in sh.stepping]
    members += [f"end{k}, base{k}" for k in range(n_levels - 1)]
    members += [f"pos{k}" for k in range(n_levels)]
    members += [f"next{k}, cap{k}" for k in sh.compressed]
    comment = (f"Assembly of the output ({sh.storage.layout.name}): levels "
               + ", ".join(f"{lv.index} {lv.kind}" for lv in levels) + ".\n"
               "Entries arrive with strictly increasing keys (coordinates in level order, "
               "row-major\nover ext[]; st[m]: stride of coordinate m) and are appended at the "
               "end of each level;\ncap: positions the caller allocated for a compressed level.")
    body: list[t.Node] = [t.Assign(f"c->ext{m}", f"ext[{m}]") for m in range(n_dims)]
    body.append(t.Assign(f"c->st{n_dims - 1}", "1"))
    body += [t.Assign(f"c->st{m}", f"c->st{m + 1} * ext[{m + 1}]")
             for m in range(n_dims - 2, -1, -1)]
    for k in range(n_levels - 1):
        body += [t.Assign(f"c->end{k}", "0"), t.Assign(f"c->base{k}", "0")]
    body += [t.Assign(f"c->pos{k}", "0") for k in range(n_levels)]
    body += [t.Assign(f"c->crd{m}", "-1") for m in sh.stepping]
    for k in sh.compressed:
        body += [t.Assign(f"c->next{k}", "0"), t.Assign(f"c->cap{k}", f"cap[{k}]")]
    return [t.Struct(cur, ["int64_t " + ", ".join(members)], comment),
            t.Function(f"static void {cur}_init({cur} *restrict c, const int64_t *restrict "
                       "ext, const int64_t *restrict cap)", body)]


def _append(sh: _Shape) -> t.Function:
    storage, levels, n_levels = sh.storage, sh.levels, len(sh.levels)
    body: list[t.Node] = []
    for k, lv in enumerate(levels):
        below = f"key - c->base{k - 1}" if k else "key"
        opens: list[t.Node] = [t.Declare("int64_t", "r", below)]
        coords = _decode(sh, k, opens)
        if k < n_levels - 1:
            opens += [t.Assign(f"c->base{k}", "key - r"),
                      t.Assign(f"c->end{k}", f"c->base{k} + c->st{sh.last[k]}")]
        parent = f"c->pos{k - 1}" if k else "0"
        if lv.kind is StorageKind.DENSE:
            opens.append(t.Assign(f"c->pos{k}", f"{parent} * c->ext{sh.first[k]} + "
                                  f"c{sh.first[k]}" if k else f"c{sh.first[k]}"))
        else:
            opens += [t.If(f"c->next{k} >= c->cap{k}", [t.Return(str(CAPACITY))], braces=False),
                      t.Assign(f"c->pos{k}", f"c->next{k}++")]
            opens += [t.Assign(f"out->{arr}[c->pos{k}]", f"(spf_index_t)c{m}")
                      for m, (_, arr) in zip(coords, lv.coords)]
            if lv.pointer:
                opens.append(t.Assign(f"out->{lv.pointer}[{parent} + 1]",
                                      f"(spf_index_t)c->next{k}"))
        note = f"level {lv.index} ({lv.kind}): new position"
        body.append(t.If(f"key >= c->end{k}", opens, note=note) if k < n_levels - 1
                    else t.Block(opens, note=note))
    body += [t.Assign(f"out->{storage.value_array}[c->pos{n_levels - 1}]", "val")
             if storage.value_array else
             t.Call("(void)val", note="a pattern layout: every entry holds its constant"),
             t.Return()]
    return t.Function(f"static inline int {sh.kernel}_append({sh.cursor} *restrict c, "
                      f"{sh.struct} *restrict out, int64_t key, spf_value_t val)", body,
                      f"one entry after the previous one; {CAPACITY} if a level is full")


def _decode(sh: _Shape, k: int, body: list[t.Node]) -> list[int]:
    """Statements decoding level ``k``'s coordinates from the key's remainder ``r``, added
    to ``body``; returns the coordinates decoded."""
    storage, n_dims, n_levels, stepping = sh.storage, sh.n_dims, len(sh.levels), sh.stepping
    coords = []
    for m in range(sh.first[k], sh.last[k] + 1):
        if m in stepping:
            st = f"(uint64_t)c->st{m}"
            if k == n_levels - 1:       # every entry decodes it: often the same as before
                body += [t.Declare("int64_t", f"d{m}", f"r - c->crd{m} * c->st{m}", const=True),
                         t.Declare("int64_t", f"c{m}", f"(uint64_t)d{m} < {st} ? c->crd{m} : "
                                   f"(uint64_t)(d{m} - c->st{m}) < {st} ? c->crd{m} + 1 : "
                                   f"r / c->st{m}", const=True,
                                   note="the same as before, the next, or divided")]
            else:                       # decoded when it changes
                body += [t.Declare("int64_t", f"next{m}", f"(c->crd{m} + 1) * c->st{m}",
                                   const=True),
                         t.Declare("int64_t", f"c{m}", f"r >= next{m} && r - next{m} < "
                                   f"c->st{m} ? c->crd{m} + 1 : r / c->st{m}", const=True)]
            body.append(t.Assign(f"c->crd{m}", f"c{m}"))
            body += [t.Assign(f"c->crd{q}", "-1", note="a new parent: its children restart")
                     for q in stepping if q > m]
            body.append(t.Assign("r", f"c{m} * c->st{m}", "-="))
            coords.append(m)
            continue
        digit = "r" if m == n_dims - 1 else f"r / c->st{m}"
        if storage.descending[m]:
            digit = f"c->ext{m} - 1 - {digit}" if digit == "r" \
                else f"c->ext{m} - 1 - ({digit})"
        body.append(t.Declare("int64_t", f"c{m}", digit, const=True))
        if m != n_dims - 1 and (m < sh.last[k] or k < n_levels - 1):
            flipped = f"(c->ext{m} - 1 - c{m})" if storage.descending[m] else f"c{m}"
            body.append(t.Assign("r", f"{flipped} * c->st{m}", "-="))
        coords.append(m)
    return coords


def _finish(sh: _Shape) -> t.Function:
    levels = sh.levels
    body: list[t.Node] = []
    for k, lv in enumerate(levels):
        if lv.kind is StorageKind.DENSE:
            parent = f"size[{k - 1}] * " if k else ""
            body.append(t.Assign(f"size[{k}]", f"{parent}c->ext{sh.first[k]}"))
        else:
            body.append(t.Assign(f"size[{k}]", f"c->next{k}"))
    for k, lv in enumerate(levels):
        if lv.pointer:          # its parent is the level above
            ptr = f"out->{lv.pointer}"
            body.append(t.For("int64_t q = 1", f"q <= size[{k - 1}]", "++q", [
                t.If(f"{ptr}[q] < {ptr}[q - 1]", [t.Assign(f"{ptr}[q]", f"{ptr}[q - 1]")],
                     braces=False)], braces=False))
    if not any(lv.pointer for lv in levels):
        body.append(t.Call("(void)out", note="no pointers to fill"))
    return t.Function(f"static void {sh.kernel}_finish(const {sh.cursor} *restrict c, "
                      f"{sh.struct} *restrict out, int64_t *restrict size)", body,
                      "pointers of parents without entries; positions used by each level")


def derived_passes(storage: Storage, out: str) -> list[t.Node]:
    """After the levels are complete (``<out>_size``: the positions each level used): each
    ``[derived]`` array the levels do not write, from the one they do (see
    :meth:`~spf.front.storage.Storage.derived_passes`), so the output has every field."""
    nodes: list[t.Node] = []
    for dp in storage.derived_passes():
        d = dp.derived
        field, source = f"{out}->{d.field}", f"{out}->{d.source}"
        elem = _elem(storage, dp.computed)
        written = f"{out}_size[{dp.level}]" + (" + 1" if dp.pointer else "")
        if dp.to_source:
            steps = f"{out}_size[{dp.level}]" if dp.pointer else f"{written} - 1"
            diff = f"{field}[spf_d + 1] - {field}[spf_d]"
            step = diff if d.scale == 1 else f"({diff}) / {d.scale}"
            nodes += [t.Comment(f"{d.source}: {d.field} is {d.text()} ([derived]), so {d.source} "
                                f"is {d.field}'s differences"
                                + (f" divided by {d.scale}" if d.scale != 1 else "")),
                      t.For("int64_t spf_d = 0", f"spf_d < {steps}", "++spf_d",
                            [t.Assign(f"{source}[spf_d]", f"({elem})({step})")], braces=False)]
        else:
            term = f"{source}[spf_d]" if d.scale == 1 else f"{d.scale} * {source}[spf_d]"
            nodes += [t.Comment(f"{d.field}: {d.text()} ([derived]), the prefix sum of {d.source}"),
                      t.Assign(f"{field}[0]", "0"),
                      t.For("int64_t spf_d = 0", f"spf_d < {written}", "++spf_d", [t.Assign(
                          f"{field}[spf_d + 1]", f"({elem})({field}[spf_d] + {term})")],
                            braces=False)]
    return nodes


def _flush(sh: _Shape, any_order: bool, last_only: bool) -> t.Function:
    kernel, cur = sh.kernel, sh.cursor
    take = t.Declare("int64_t", "n", "spf_ws_release(ws)", const=True,
                     note="the layout keeps them unordered") if any_order \
        else t.Declare("int64_t", "n", "spf_ws_order(ws)", const=True)
    body: list[t.Node] = [
        t.Declare("int64_t", "base", "ws->prefix * ws->size", const=True), take,
        t.Declare("int64_t *restrict", "list", "ws->list", const=True),
        t.Declare("spf_value_t *restrict", "val", "ws->val", const=True),
        t.Declare(cur, "local", "*c", note="in registers while the group is appended"),
        t.Declare("int", "status", "0")]
    if last_only:
        body += _flush_last_level(sh)
    else:
        body.append(t.For("int64_t t = 0", "t < n && !status", "++t", [t.Assign(
            "status", f"{kernel}_append(&local, out, base + list[t], val[list[t]])")],
            braces=False))
    body += [t.Assign("*c", "local"), t.Assign("ws->n", "0"), t.Assign("ws->prefix", "next"),
             t.Return("status")]
    return t.Function(f"static int {kernel}_flush(spf_workspace *restrict ws, {cur} *restrict "
                      f"c, {sh.struct} *restrict out, int64_t next)", body,
                      "append the workspace's group"
                      + (" in the order first touched" if any_order else " in key order")
                      + ", start group next")


def _elem(storage: Storage, field: str) -> str:
    """The C type of an output index array's elements (its own width or spf_index_t)."""
    return field_ctype(storage.layout.fields[field], storage.layout)


def _flush_last_level(sh: _Shape) -> list[t.Node]:
    storage, last = sh.storage, sh.levels[-1]
    k, m = len(sh.levels) - 1, sh.n_dims - 1
    crd_array = last.arrays[0]
    crd = "ws->size - 1 - list[t]" if storage.descending[m] else "list[t]"
    values = storage.value_array        # None: a pattern layout stores no values
    extend: list[t.Node] = [
        t.Declare(f"{_elem(storage, crd_array)} *restrict", "crd",
                  f"out->{last.coords[0][1]} + local.next{k} - 1"),
        *([t.Declare("spf_value_t *restrict", "dst", f"out->{values} + local.next{k} - 1")]
          if values else []),
        t.For("int64_t t = 1", "t < n", "++t", [t.Assign(
            "crd[t]", f"({_elem(storage, crd_array)})({crd})"),
            *([t.Assign("dst[t]", "val[list[t]]")] if values else [])]),
        t.Assign(f"local.next{k}", "n - 1", "+="),
        t.Assign(f"local.pos{k}", f"local.next{k} - 1")]
    if last.pointer:
        parent = f"local.pos{k - 1}" if k else "0"
        extend.append(t.Assign(f"out->{last.pointer}[{parent} + 1]",
                               f"(spf_index_t)local.next{k}"))
    return [
        t.Comment("the first entry opens the group's positions above the last level; the\n"
                  f"others only extend level {last.index}: a slot is its coordinate"),
        t.If("n > 0", [t.Assign("status", f"{sh.kernel}_append(&local, out, base + list[0], "
                                          "val[list[0]])")], braces=False),
        t.If("n > 1 && !status", [t.If(f"local.next{k} + n - 1 > local.cap{k}",
                                       [t.Assign("status", str(CAPACITY))], orelse=extend)])]
