"""Prints a :mod:`spf.back.ctree` tree as C with OpenMP pragmas.

A second target (ISPC, CUDA) is a second printer over the same tree: lowering does not change
(see docs/architecture.md, "How to add").
"""
from __future__ import annotations

from . import ctree as t

INDENT = "    "


class CPrinter:
    """C99 + OpenMP: ``Parallel`` becomes ``#pragma omp parallel for`` (or ``omp for`` inside a
    ``Team``), ``simd`` becomes ``#pragma omp simd``."""

    def definitions(self, items: list[t.Definition]) -> str:
        """File-level functions and structs, a blank line between two."""
        return "\n\n".join("\n".join(self._definition(d)) for d in items)

    def _definition(self, d: t.Definition) -> list[str]:
        out: list[str] = []
        if d.comment:
            self._node(t.Comment(d.comment), 0, out)
        if isinstance(d, t.Struct):
            out.append(f"typedef struct {d.name} {{")
            out.extend(f"{INDENT}{m};" for m in d.members)
            out.append(f"}} {d.name};")
        else:
            out += [str(d.signature), "{", *self.lines(d.body), "}"]
        return out

    def lines(self, nodes: list[t.Node], depth: int = 1) -> list[str]:
        out: list[str] = []
        for n in nodes:
            self._node(n, depth, out)
        return out

    # ------------------------------------------------------------------------------------
    def _node(self, n: t.Node, d: int, out: list[str]) -> None:
        pad = INDENT * d
        if isinstance(n, t.Comment):
            rows = n.text.split("\n")
            if len(rows) == 1:
                out.append(f"{pad}/* {rows[0]} */")
            else:
                out.append(f"{pad}/* {rows[0]}")
                out.extend(f"{pad} * {r}" if r else f"{pad} *" for r in rows[1:-1])
                out.append(f"{pad} * {rows[-1]} */")
        elif isinstance(n, t.Declare) and n.init and n.init.startswith("\n"):
            # an initializer over several lines: each continuation line indented once more
            out.append(f"{pad}{'const ' if n.const else ''}{n.ctype} {n.name} =")
            rows = n.init[1:].split("\n")
            out.extend(f"{pad}{INDENT}{r}" for r in rows[:-1])
            out.append(f"{pad}{INDENT}{rows[-1]};{_note(n.note)}")
        elif isinstance(n, t.Declare):
            init = f" = {n.init}" if n.init is not None else ""
            out.append(f"{pad}{'const ' if n.const else ''}{n.ctype} {n.name}{init};"
                       f"{_note(n.note)}")
        elif isinstance(n, t.Assign):
            out.append(f"{pad}{n.target} {n.op} {n.value};{_note(n.note)}")
        elif isinstance(n, t.Call):
            out.append(f"{pad}{n.expr};{_note(n.note)}")
        elif isinstance(n, t.Return):
            out.append(f"{pad}return {n.value};")
        elif isinstance(n, t.Goto):
            out.append(f"{pad}goto {n.label};")
        elif isinstance(n, t.Label):
            out.append(f"{n.name}:")
        elif isinstance(n, t.Snippet):
            out.extend(f"{pad}{row}" if row else "" for row in n.lines)
        elif isinstance(n, t.Hole):
            raise AssertionError("a hole of a visiting nest printed unfilled")
        else:
            self._compound(n, d, out)

    def _compound(self, n: t.Node, d: int, out: list[str]) -> None:
        pad = INDENT * d
        if isinstance(n, t.Block):
            self._body("{", n.body, d, out, True, n.note)
        elif isinstance(n, t.Team):
            out.append(f"{pad}#pragma omp parallel")
            out.extend(self.lines(n.body, d))
        elif isinstance(n, t.For):
            if n.parallel is not None:
                out.append(pad + self._omp(n.parallel))
            elif n.simd is not None:
                red = n.simd.reduction
                out.append(f"{pad}#pragma omp simd" + (
                    f" reduction({n.simd.reduction_op}:{', '.join(red)})" if red else ""))
            self._body(f"for ({n.init}; {n.cond}; {n.step})", n.body, d, out, n.braces)
        elif isinstance(n, t.While):
            self._body(f"while ({n.cond})", n.body, d, out, n.braces)
        elif isinstance(n, t.If) and n.orelse is not None:      # "} else {" cuddled
            self._if_chain(n, d, out, "if")
        elif isinstance(n, t.If):
            self._body(f"if ({n.cond})", n.body, d, out, n.braces, n.note)
        else:
            raise TypeError(f"no C for {type(n).__name__}")

    def _if_chain(self, n: t.If, d: int, out: list[str], head: str) -> None:
        """``if (...) {`` ... ``} else if (...) {`` ... ``} else {`` ... ``}``."""
        pad = INDENT * d
        out.append(f"{pad}{head} ({n.cond}) {{{_note(n.note)}")
        out.extend(self.lines(n.body, d + 1))
        rest = n.orelse
        if rest is None:
            out.append(f"{pad}}}")
        elif len(rest) == 1 and isinstance(rest[0], t.If) and rest[0].braces \
                and not n.else_note:
            self._if_chain(rest[0], d, out, "} else if")
        else:
            out.append(f"{pad}}} else {{{_note(n.else_note)}")
            out.extend(self.lines(rest, d + 1))
            out.append(f"{pad}}}")

    def _body(self, head: str, body: list[t.Node], d: int, out: list[str], braces: bool,
              note: str = "") -> None:
        pad = INDENT * d
        if not braces:
            if len(body) != 1:
                raise ValueError(f"'{head}' without braces needs one statement, has {len(body)}")
            out.append(f"{pad}{head}{_note(note)}")
            self._node(body[0], d + 1, out)
            return
        out.append(f"{pad}{head} {{{_note(note)}" if head != "{" else f"{pad}{{{_note(note)}")
        out.extend(self.lines(body, d + 1))
        out.append(f"{pad}}}")

    @staticmethod
    def _omp(p: t.Parallel) -> str:
        text = "#pragma omp parallel for" if p.team else "#pragma omp for"
        text += f" schedule({p.schedule.value})"
        if p.private:
            text += f" private({', '.join(p.private)})"
        if p.reduction:
            text += f" reduction({p.reduction_op}:{', '.join(p.reduction)})"
        return text


def _note(text: str) -> str:
    """A trailing comment."""
    return f"   /* {text} */" if text else ""
