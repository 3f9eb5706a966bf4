"""The words of PostgreSQL's session commands, for their small grammars (planner/commands.py).

The dialect (planner/dialect.py) hands a command's text - SET, SHOW, BEGIN, COPY, DECLARE,
FETCH, CREATE USER, ... - to its grammar, which reads its operands through `Words`: a
cursor over the statement's tokens (words, quoted identifiers, string literals, numbers,
punctuation), comments skipped; string literals follow standard_conforming_strings
(backslashes are literal, '' is a quote) plus E'...' escapes and $tag$...$tag$ quoting.
Words are lower-cased, quoted identifiers kept as written, as PostgreSQL folds them.

Tokens are read lazily, as the grammar asks for them: a grammar that stops where a statement
inside its command begins (EXPLAIN's statement, DECLARE's query) never reads that
statement's operators (`||`, `~`, `@>` ...), which are the dialect's to parse. A character
none of these tokens covers is a syntax error where a grammar reads it; `group()` reads a
parenthesised part (COPY's (query)) whatever it holds.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterator

from planner.errors import SqlError

_TOKEN = re.compile(r"""
    (?P<ws>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<estr>[eE]'(?:[^'\\]|\\.|'')*')
  | (?P<str>'(?:[^']|'')*')
  | (?P<dstr>\$(?P<tag>(?:[A-Za-z_][A-Za-z0-9_]*)?)\$.*?\$(?P=tag)\$)
  | (?P<qid>"(?:[^"]|"")*")
  | (?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<param>\$\d+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)*)
  | (?P<op>::|<=|>=|<>|!=|[(),;=*.<>+\-/%\[\]])
""", re.VERBOSE | re.DOTALL)

_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'"}


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str      # word | qid | str | num | param | op | other (a character no grammar
                   # reads: a syntax error where one does)
    text: str      # words lower-cased; identifiers/strings unquoted
    raw: str
    pos: int       # 0-based offset in the statement


class LexError(SqlError):
    sqlstate = "42601"   # syntax_error


def _unescape_e(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n in _ESCAPES:
                out.append(_ESCAPES[n])
                i += 2
                continue
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            if m:
                out.append(chr(int(m.group(), 8)))
                i += 1 + len(m.group())
                continue
            m = re.match(r"x([0-9a-fA-F]{1,2})", body[i + 1:])
            if m:
                out.append(chr(int(m.group(1), 16)))
                i += 1 + len(m.group())
                continue
            out.append(n)
            i += 2
            continue
        if c == "'" and body[i + 1:i + 2] == "'":
            out.append("'")
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _lex(sql: str) -> Iterator[Token]:
    """The statement's tokens, one at a time; an unterminated quote is a LexError here."""
    pos = 0
    n = len(sql)
    while pos < n:
        m = _TOKEN.match(sql, pos)
        if m is None:
            if sql[pos] in "'\"":
                raise LexError("unterminated quoted string", position=pos + 1)
            yield Token("other", sql[pos], sql[pos], pos)
            pos += 1
            continue
        kind = m.lastgroup
        raw = m.group()
        if kind == "ws":
            pass
        elif kind == "word":
            yield Token("word", raw.lower(), raw, pos)
        elif kind == "qid":
            yield Token("qid", raw[1:-1].replace('""', '"'), raw, pos)
        elif kind == "str":
            yield Token("str", raw[1:-1].replace("''", "'"), raw, pos)
        elif kind == "estr":
            yield Token("str", _unescape_e(raw[2:-1]), raw, pos)
        elif kind == "dstr":
            tag = len(m.group("tag")) + 2
            yield Token("str", raw[tag:-tag], raw, pos)
        else:
            yield Token(kind, raw, raw, pos)
        pos = m.end()


def tokenize(sql: str) -> list[Token]:
    """All the statement's tokens (a LexError for a character no token covers)."""
    out = list(_lex(sql))
    for t in out:
        if t.kind == "other":
            raise _unknown(t)
    return out


def _unknown(t: Token) -> LexError:
    return LexError(f'syntax error at or near "{t.raw}"', position=t.pos + 1)


class Words:
    """A cursor over a statement's tokens for the small hand-written grammars."""

    def __init__(self, sql: str):
        self.sql = sql
        self.toks: list[Token] = []          # the tokens read so far
        self._lexer: Iterator[Token] | None = _lex(sql)
        self.i = 0

    def _fill(self, n: int) -> None:
        """Read tokens until `n` are read or the statement ends; semicolons that end the
        statement are not tokens."""
        while len(self.toks) < n and self._lexer is not None:
            t = next(self._lexer, None)
            semis = []
            while t is not None and t.raw == ";":
                semis.append(t)
                t = next(self._lexer, None)
            if t is None:
                self._lexer = None
                return
            self.toks.extend(semis)
            self.toks.append(t)

    def _token(self, j: int) -> Token | None:
        self._fill(j + 1)
        return self.toks[j] if j < len(self.toks) else None

    def peek(self, ahead: int = 0) -> Token | None:
        t = self._token(self.i + ahead)
        if t is not None and t.kind == "other":
            raise _unknown(t)
        return t

    def at_end(self) -> bool:
        return self._token(self.i) is None

    def next(self) -> Token | None:
        t = self.peek()
        if t is not None:
            self.i += 1
        return t

    def accept(self, *words: str) -> bool:
        """Consume the words (each a keyword or punctuation) if they come next."""
        for k, w in enumerate(words):
            t = self.peek(k)
            if t is None or t.kind not in ("word", "op") or t.text != w:
                return False
        self.i += len(words)
        return True

    def accept_any(self, *words: str) -> str | None:
        t = self.peek()
        if t is not None and t.kind in ("word", "op") and t.text in words:
            self.i += 1
            return t.text
        return None

    def ident(self) -> str | None:
        """An identifier: unquoted (lower-cased) or "quoted" (as written)."""
        t = self.peek()
        if t is not None and t.kind in ("word", "qid"):
            self.i += 1
            return t.text
        return None

    def group(self) -> tuple[int, int]:
        """Read a parenthesised part, from the "(" that comes next to its matching ")",
        whatever tokens it holds; the offsets of the two parentheses."""
        t = self.peek()
        if t is None or t.raw != "(":
            raise self.syntax_error('Expected (')
        start, depth = t.pos, 0
        while True:
            t = self._token(self.i)
            if t is None:
                raise SqlError("syntax error at end of input", "42601", len(self.sql) + 1)
            self.i += 1
            if t.kind == "op" and t.text == "(":
                depth += 1
            elif t.kind == "op" and t.text == ")":
                depth -= 1
                if depth == 0:
                    return start, t.pos

    def rest(self) -> str:
        """The statement text from the current token on."""
        t = self.peek()
        return "" if t is None else self.sql[t.pos:].rstrip().rstrip(";").rstrip()

    def position(self) -> int:
        t = self.peek()
        return (t.pos if t is not None else len(self.sql)) + 1

    def syntax_error(self, hint: str | None = None) -> SqlError:
        """PostgreSQL's syntax error at the current token (`syntax error at or near
        "TOKEN"`, or `at end of input`); `hint` says what the grammar expected."""
        t = self.peek()
        if t is None:
            return SqlError("syntax error at end of input", "42601",
                            len(self.sql.rstrip().rstrip(";").rstrip()) + 1, hint=hint)
        return SqlError(f'syntax error at or near "{t.raw}"', "42601", t.pos + 1, hint=hint)
