"""C for assembled sparse outputs: the statement that feeds the coordinate stream, and the
count / assemble functions that turn the sorted stream into the output layout's arrays.

The count and assemble functions are generated from :class:`~spf.storage.Storage` alone:
for each stream entry, the first level whose coordinates differ from the previous entry's
opens a new position there and at every level below it (dense: ``parent * extent + coord``;
compressed: the next free position, its coordinate arrays written and the parent's pointer
moved past it).  Pointers of parents without entries are filled in afterwards.
"""
from __future__ import annotations

import re

from .assembly import AssemblyPlan
from .storage import Storage


def _linear(plan: AssemblyPlan, names, parts: range) -> str:
    """Row-major linearization of the key coordinates ``parts`` (descending ones flipped)."""
    text = ""
    for m in parts:
        coord = plan.key[m]
        if plan.descending[m]:
            coord = f"(spf_ext{m} - 1 - {coord})"
        text = f"(int64_t){coord}" if not text else f"({text}) * spf_ext{m} + {coord}"
    return text or "0"


def declare(w, plan: AssemblyPlan, names) -> None:
    """Extents of the key coordinates and the workspace, before the loops."""
    out = plan.output.name
    w.line(f"/* {plan.describe()}. */")
    starts = {0, plan.ordered} if plan.mode == "workspace" else {0}
    for m, ext in enumerate(plan.extents):
        # a group's first coordinate needs its extent only when flipped or sizing the workspace
        if m in starts and not plan.descending[m] and not (
                plan.mode == "workspace" and m >= plan.ordered):
            continue
        w.line(f"const int64_t spf_ext{m} = {names.aff(ext)};   /* extent of {plan.key[m]} */")
    if plan.mode == "workspace":
        size = " * ".join(f"spf_ext{m}" for m in range(plan.ordered, len(plan.key))) or "1"
        w.line("spf_workspace spf_ws;")
        w.line(f"if (spf_ws_init(&spf_ws, {size}, {'-1' if plan.ordered else '0'}))")
        w.line("    goto spf_out_of_memory;")
    w.line(f"{out}->n = 0;")


def statement(plan: AssemblyPlan, names, rhs: str) -> list[str]:
    out = plan.output.name
    n = len(plan.key)
    if plan.mode == "sort":
        return [f"if (spf_stream_push({out}, {_linear(plan, names, range(n))}, {rhs}))",
                "    goto spf_out_of_memory;"]
    lines = []
    if plan.ordered:
        lines += [f"const int64_t spf_group = {_linear(plan, names, range(plan.ordered))};",
                  f"if (spf_group != spf_ws.prefix && spf_ws_flush(&spf_ws, {out}, spf_group))",
                  "    goto spf_out_of_memory;"]
    lines.append(f"spf_ws_add(&spf_ws, {_linear(plan, names, range(plan.ordered, n))}, {rhs});")
    return lines


def finish(w, plan: AssemblyPlan) -> None:
    out = plan.output.name
    if plan.mode == "sort":
        w.line(f"spf_stream_sort_combine({out});")
        return
    w.line(f"if (spf_ws.prefix >= 0 && spf_ws_flush(&spf_ws, {out}, -1))")
    w.line("    goto spf_out_of_memory;")


def release(w, plan: AssemblyPlan) -> None:
    if plan.mode == "workspace":
        w.line("spf_ws_free(&spf_ws);")


def functions(storage: Storage, kernel: str, struct: str) -> str:
    """``<kernel>_count``, ``<kernel>_assemble`` and ``<kernel>_free`` for the output.

    Keys increase along the stream, so level k opens a new position exactly when the key
    reaches ``end_k``, the first key past the previous entry's coordinates of levels 0..k.
    Only then are the level's coordinates decoded, dividing the key's remainder below its
    parent by the strides; the last coordinate is that remainder itself.  The last level
    opens a position at every entry (keys are distinct).
    """
    levels = storage.levels
    n_levels = len(levels)
    n_dims = len(storage.order)
    first = [sum(len(lv.coords) for lv in levels[:k]) for k in range(n_levels)]
    last = [first[k] + len(lv.coords) - 1 for k, lv in enumerate(levels)]
    strides = [f"const int64_t st{n_dims - 1} = 1;"] + [
        f"const int64_t st{m} = st{m + 1} * ext[{m + 1}];" for m in range(n_dims - 2, -1, -1)]
    lines = [
        f"/* Storage of the output ({storage.layout.name}) from its sorted, duplicate-free stream:",
        " * levels " + ", ".join(f"{lv.index} {lv.kind}" for lv in levels) + ".  Key = "
        "coordinates in level order, row-major over ext[]; stm: stride of coordinate m. */",
        "",
    ]

    # count: compressed levels above the last count their openings; the last has one per entry
    scanned = [k for k in range(n_levels - 1) if levels[k].kind == "compressed"]
    lines += [f"/* positions of each level: count[k] for level k */",
              f"void {kernel}_count(const spf_stream *restrict s, const int64_t *restrict ext, "
              "int64_t *restrict count)", "{"]
    if scanned:
        lines += ["    " + x for x in strides[:n_dims - min(last[k] for k in scanned)]]
        lines.append("    int64_t " + ", ".join(f"end{k} = 0" for k in scanned) + ";")
        for k in scanned:
            lines.append(f"    count[{k}] = 0;")
        lines += ["    for (int64_t e = 0; e < s->n; ++e) {",
                  "        const int64_t key = s->key[e];"]
        for k in scanned:
            st = f"st{last[k]}"
            lines += [f"        if (key >= end{k}) {{   /* level {levels[k].index}: new position */",
                      f"            count[{k}]++;",
                      f"            end{k} = (key / {st} + 1) * {st};", "        }"]
        lines.append("    }")
    if levels[-1].kind == "compressed":
        lines.append(f"    count[{n_levels - 1}] = s->n;")
    for k, lv in enumerate(levels):
        if lv.kind == "dense":
            parent = f"count[{k - 1}] * " if k else ""
            lines.append(f"    count[{k}] = {parent}ext[{first[k]}];")
    lines += ["}", ""]

    # assemble
    lines += [f"/* fills the arrays of out (allocated from {kernel}_count, pointers zeroed) */",
              f"void {kernel}_assemble(const spf_stream *restrict s, const int64_t *restrict ext, "
              f"{struct} *restrict out)", "{"]
    strides_at = len(lines)
    decl = [f"end{k} = 0, base{k} = 0" for k in range(n_levels - 1)]
    decl += [f"pos{k} = 0" for k in range(n_levels)]
    decl += [f"next{k} = 0" for k, lv in enumerate(levels) if lv.kind == "compressed"]
    lines += [f"    int64_t {', '.join(decl)};",
              "    for (int64_t e = 0; e < s->n; ++e) {",
              "        const int64_t key = s->key[e];"]
    for k, lv in enumerate(levels):
        below = f"key - base{k - 1}" if k else "key"
        if k < n_levels - 1:
            lines.append(f"        if (key >= end{k}) {{   /* level {lv.index} ({lv.kind}): "
                         "new position */")
        else:
            lines.append(f"        {{   /* level {lv.index} ({lv.kind}): new position */")
        lines.append(f"            int64_t r = {below};")
        coords = []
        for t, m in enumerate(range(first[k], last[k] + 1)):
            digit = "r" if m == n_dims - 1 else f"r / st{m}"
            if storage.descending[m]:
                digit = f"ext[{m}] - 1 - {digit}" if digit == "r" else f"ext[{m}] - 1 - ({digit})"
            lines.append(f"            const int64_t c{m} = {digit};")
            if m != n_dims - 1 and (m < last[k] or k < n_levels - 1):
                flipped = f"(ext[{m}] - 1 - c{m})" if storage.descending[m] else f"c{m}"
                lines.append(f"            r -= {flipped} * st{m};")
            coords.append(m)
        if k < n_levels - 1:
            lines += [f"            base{k} = key - r;", f"            end{k} = base{k} + st{last[k]};"]
        parent = f"pos{k - 1}" if k else "0"
        if lv.kind == "dense":
            lines.append(f"            pos{k} = {parent} * ext[{first[k]}] + c{first[k]};"
                         if k else f"            pos{k} = c{first[k]};")
        else:
            lines.append(f"            pos{k} = next{k}++;")
            for m, (_, arr) in zip(coords, lv.coords):
                lines.append(f"            out->{arr}[pos{k}] = (int32_t)c{m};")
            if lv.pointer:
                lines.append(f"            out->{lv.pointer}[{parent} + 1] = (int32_t)next{k};")
        lines.append("        }")
    lines += [f"        out->{storage.value_array}[pos{n_levels - 1}] = s->val[e];", "    }"]
    parents = {lv.index: k for k, lv in enumerate(levels)}
    for k, lv in enumerate(levels):
        if lv.pointer:
            size = _positions(levels, parents[lv.parent], first)
            lines += [f"    /* parents without entries: {lv.pointer} carries the previous end */",
                      f"    for (int64_t q = 1; q <= {size}; ++q)",
                      f"        if (out->{lv.pointer}[q] < out->{lv.pointer}[q - 1])",
                      f"            out->{lv.pointer}[q] = out->{lv.pointer}[q - 1];"]
    used = [int(m) for m in re.findall(r"\bst(\d+)\b", "\n".join(lines[strides_at:]))]
    if used:    # st{m} is defined from st{m + 1}: keep the chain down to the smallest used
        lines[strides_at:strides_at] = ["    " + x for x in strides[:n_dims - min(used)]]
    lines += ["}", "",
              f"void {kernel}_free(spf_stream *s)", "{", "    spf_stream_free(s);", "}"]
    return "\n".join(lines)


def _positions(levels, k: int, first: list[int]) -> str:
    """C expression (inside assemble) of the number of positions of level k."""
    if levels[k].kind == "dense":
        parent = f"{_positions(levels, k - 1, first)} * " if k else ""
        return f"{parent}ext[{first[k]}]"
    return f"next{k}"
