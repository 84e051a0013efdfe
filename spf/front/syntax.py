"""Tokenizer and recursive-descent parsers for SPF formulas and index expressions.

Grammar (``{`` ... ``}`` is an SPF set or relation)::

    relation   := '{' tuple ['->' tuple] [':' formula] '}'
    tuple      := '[' [name {',' name}] ']'
    formula    := conj {'or' conj}
    conj       := item {('and' | '&&' | '∧') item}     (distributed into disjuncts)
    item       := chain | '(' formula ')'
    chain      := expr (cmp expr)+           cmp: < <= > >= = ==
    expr       := ['-'] term {('+'|'-') term}
    term       := factor {'*' factor}        (one side constant: affine)
    factor     := INT | name | name '(' expr {',' expr} ')' | '(' expr ')'

Every error is a :class:`spf.SpecError` naming source, line and column.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import SpecError
from .terms import Aff, Constraint, FloorDiv, UFCall

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*(?:\.[A-Za-z_][A-Za-z_0-9]*)?'*)
  | (?P<op>->|<=|>=|==|!=|\+=|&&|\|\||[-+*/%(){}\[\],:<>=;∧∨])
""", re.VERBOSE)

_KEYWORDS = {"and": "and", "or": "or"}
MAX_NESTING = 32   # parentheses, call arguments and unary minus inside one another
MAX_DISJUNCTS = 64  # disjuncts of a formula once 'and' is distributed over 'or'
MAX_INT = 2**63 - 1   # integer constants must fit the widest index type (int64)
C_KEYWORDS = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Alignas", "_Alignof", "_Atomic", "_Bool",
    "_Complex", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert", "_Thread_local"})


@dataclass(frozen=True)
class Token:
    kind: str  # 'num', 'name', 'op', 'end'
    text: str
    line: int
    column: int


def tokenize(text: str, source: str = "<string>", line0: int = 1, col0: int = 1) -> list[Token]:
    """Split ``text`` into tokens; positions are 1-based and offset by ``line0``/``col0``."""
    tokens: list[Token] = []
    pos, line, col = 0, line0, col0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise SpecError(f"unexpected character {text[pos]!r}", source, line, col)
        kind = m.lastgroup or ""
        chunk = m.group()
        if kind != "ws":
            if chunk == "∧":
                chunk = "and"
            elif chunk == "∨":
                chunk = "or"
            elif chunk == "&&":
                chunk = "and"
            elif chunk == "||":
                chunk = "or"
            if kind == "name" and chunk in _KEYWORDS:
                kind = "op"
            if chunk in ("and", "or"):
                kind = "op"
            tokens.append(Token(kind, chunk, line, col))
        for ch in chunk:
            if ch == "\n":
                line, col = line + 1, 1
            else:
                col += 1
        pos = m.end()
    tokens.append(Token("end", "", line, col))
    return tokens


class Parser:
    """Cursor over tokens with helpers that raise positioned :class:`SpecError`."""

    def __init__(self, text: str, source: str = "<string>", line0: int = 1, col0: int = 1,
                 constants: Mapping[str, int] | None = None):
        self.source = source
        self.constants = dict(constants or {})
        self.tokens = tokenize(text, source, line0, col0)
        self.i = 0
        self.depth = 0
        self.divisions = False      # "x / c": floor division by a positive constant
        self.affine_names: dict[Aff, str] = {}    # an access index's expression -> its name

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, tok: Token | None = None) -> SpecError:
        tok = tok or self.tok
        return SpecError(message, self.source, tok.line, tok.column)

    def peek(self, text: str) -> bool:
        return self.tok.kind != "end" and self.tok.text == text

    def accept(self, text: str) -> bool:
        if self.peek(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.peek(text):
            found = "end of input" if self.tok.kind == "end" else repr(self.tok.text)
            raise self.error(f"expected {what or repr(text)}, found {found}")
        tok = self.tok
        self.i += 1
        return tok

    def name(self, what: str = "a name") -> Token:
        if self.tok.kind != "name":
            found = "end of input" if self.tok.kind == "end" else repr(self.tok.text)
            raise self.error(f"expected {what}, found {found}")
        tok = self.tok
        self.i += 1
        return tok

    def number(self) -> int:
        """Consume an integer literal of at most :data:`MAX_INT`."""
        tok = self.tok
        if not tok.text.isdigit():
            raise self.error(f"expected an integer, found {tok.text}")
        if int(tok.text) > MAX_INT:
            raise self.error(f"integer {tok.text} does not fit in 64 bits")
        self.i += 1
        return int(tok.text)

    @contextmanager
    def nested(self) -> Iterator[None]:
        """One level deeper (a parenthesis, call or unary minus); refused past
        :data:`MAX_NESTING`, long before Python's recursion limit."""
        if self.depth == MAX_NESTING:
            raise self.error(f"expression nested more than {MAX_NESTING} levels deep")
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def expect_end(self) -> None:
        if self.tok.kind != "end":
            raise self.error(f"unexpected {self.tok.text!r} after the end of the expression")

    # affine expressions ----------------------------------------------------------------
    def aff(self) -> Aff:
        neg = self.accept("-")
        result = self.term()
        if neg:
            result = -result
        while self.peek("+") or self.peek("-"):
            op = self.tok.text
            self.i += 1
            t = self.term()
            result = result + t if op == "+" else result - t
        return result

    def term(self) -> Aff:
        start = self.tok
        result = self.factor()
        while self.accept("*"):
            rhs_tok = self.tok
            rhs = self.factor()
            if result.is_const:
                result = rhs * result.const
            elif rhs.is_const:
                result = result * rhs.const
            else:
                raise self.error("non-affine product: one factor of '*' must be a constant",
                                 rhs_tok)
        while self.divisions and self.peek("/"):
            self.i += 1
            den_tok = self.tok
            den = self.factor()
            if not den.is_const or den.const <= 0:
                raise self.error("'/' divides by a positive constant (floor division)", den_tok)
            result = Aff.num(result.const // den.const) if result.is_const \
                else Aff.var(FloorDiv(result, den.const))
        if self.peek("/") or self.peek("%"):
            raise self.error(f"{self.tok.text!r} is not allowed in an affine expression", start)
        return result

    def factor(self) -> Aff:
        tok = self.tok
        if tok.kind == "num":
            return Aff.num(self.number())
        if self.accept("-"):
            with self.nested():
                return -self.factor()
        if self.accept("("):
            with self.nested():
                inner = self.aff()
            self.expect(")")
            return inner
        if tok.kind == "name":
            self.i += 1
            if self.accept("("):
                with self.nested():
                    args = [self.aff()]
                    while self.accept(","):
                        args.append(self.aff())
                self.expect(")", "')' closing the call")
                return Aff.var(UFCall(tok.text, tuple(args)))
            if tok.text in self.constants:
                return Aff.num(self.constants[tok.text])
            return Aff.var(tok.text)
        found = "end of input" if tok.kind == "end" else repr(tok.text)
        raise self.error(f"expected a number, name, call or '(', found {found}")

    # formulas ----------------------------------------------------------------------------
    _CMP = ("<", "<=", ">", ">=", "=", "==")

    def chain(self) -> list[Constraint]:
        lhs = self.aff()
        if not any(self.peek(op) for op in self._CMP):
            if self.peek("!="):
                raise self.error("'!=' is not supported: write two disjuncts joined by 'or'")
            raise self.error("expected a comparison (<, <=, >, >=, =)")
        out: list[Constraint] = []
        while any(self.peek(op) for op in self._CMP):
            op = self.tok.text
            self.i += 1
            rhs = self.aff()
            if op == "<":
                out.append(Constraint.ge(rhs, lhs + 1))
            elif op == "<=":
                out.append(Constraint.ge(rhs, lhs))
            elif op == ">":
                out.append(Constraint.ge(lhs, rhs + 1))
            elif op == ">=":
                out.append(Constraint.ge(lhs, rhs))
            else:
                out.append(Constraint.eq(lhs, rhs))
            lhs = rhs
        return out

    def conjunction(self) -> list[Constraint]:
        """Comparison chains joined by ``and`` (no ``or``)."""
        out = self.chain()
        while self.accept("and"):
            out.extend(self.chain())
        return out

    def formula(self) -> list[list[Constraint]]:
        """The disjuncts of a formula (disjunctive normal form of ``and``/``or`` with
        parentheses)."""
        if self.peek("}") or self.tok.kind == "end":
            return [[]]
        return self.disjunction()

    def disjunction(self) -> list[list[Constraint]]:
        disjuncts = self.conjunct_dnf()
        while self.accept("or"):
            disjuncts += self.conjunct_dnf()
        return disjuncts

    def conjunct_dnf(self) -> list[list[Constraint]]:
        """Items joined by ``and``, distributed over the ``or`` of parenthesized items."""
        start = self.tok
        disjuncts = self.formula_item()
        while self.accept("and"):
            right = self.formula_item()
            disjuncts = [a + b for a in disjuncts for b in right]
            if len(disjuncts) > MAX_DISJUNCTS:
                raise self.error(f"the formula has more than {MAX_DISJUNCTS} disjuncts once "
                                 "'and' is distributed over 'or'", start)
        return disjuncts

    def formula_item(self) -> list[list[Constraint]]:
        """A comparison chain, or a parenthesized formula (``(a = p or a = p + 1)``)."""
        if not self.peek("("):
            return [self.chain()]
        start = self.i
        try:
            return [self.chain()]        # ``(p + 1) <= n``: parentheses of an expression
        except SpecError:
            self.i = start
        self.expect("(")
        with self.nested():
            inner = self.disjunction()
        self.expect(")", "')' closing the parenthesized formula")
        return inner

    def tuple_vars(self) -> list[str]:
        self.expect("[", "'[' opening a tuple")
        names: list[str] = []
        if not self.peek("]"):
            while True:
                tok = self.name("a variable name")
                if tok.text in names:
                    raise self.error(f"variable {tok.text!r} appears twice in the tuple", tok)
                names.append(tok.text)
                if not self.accept(","):
                    break
        self.expect("]", "',' or ']'")
        return names


@dataclass
class ParsedRelation:
    in_vars: list[str]
    out_vars: list[str] | None  # None for a set
    disjuncts: list[list[Constraint]]


def parse_relation_text(text: str, source: str = "<string>", line0: int = 1,
                        col0: int = 1, constants: Mapping[str, int] | None = None
                        ) -> ParsedRelation:
    """Parse ``{[..] -> [..] : formula}`` or ``{[..] : formula}``; ``constants`` are
    named integers (layout parameters) substituted while parsing."""
    p = Parser(text, source, line0, col0, constants)
    p.expect("{", "'{' opening a set or relation")
    in_vars = p.tuple_vars()
    out_vars = None
    if p.accept("->"):
        out_vars = p.tuple_vars()
        clash = set(in_vars) & set(out_vars)
        if clash:
            raise p.error(f"variable(s) {sorted(clash)} used in both tuples")
    disjuncts: list[list[Constraint]] = [[]]
    if p.accept(":"):
        disjuncts = p.formula()
    p.expect("}", "'}' closing the set or relation")
    p.expect_end()
    return ParsedRelation(in_vars, out_vars, disjuncts)


def parse_aff(text: str, source: str = "<string>", line0: int = 1, col0: int = 1,
              constants: Mapping[str, int] | None = None, divisions: bool = False) -> Aff:
    """An affine expression; with ``divisions``, ``x / c`` is ``floor(x / c)``."""
    p = Parser(text, source, line0, col0, constants)
    p.divisions = divisions
    result = p.aff()
    p.expect_end()
    return result


def parse_constraints(text: str, source: str = "<string>", line0: int = 1,
                      col0: int = 1, constants: Mapping[str, int] | None = None
                      ) -> list[Constraint]:
    """Parse a conjunction such as ``j <= i and 0 <= k`` (``constants`` substituted)."""
    p = Parser(text, source, line0, col0, constants)
    out = p.conjunction()
    p.expect_end()
    return out
