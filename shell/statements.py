"""Splitting shell input into SQL statements and backslash commands (psql's rules).

    split(text)       -> list[Item]   what to run, in order
    is_complete(text) -> bool         the REPL's Enter key: run the buffer or add a line

A statement ends at a `;` that is outside string literals ('it''s', E'it\\'s'), quoted
identifiers ("a;b"), dollar quotes ($$ ... $$, $fn$ ... $fn$) and comments (-- to the end of
the line, /* nested /* */ */). A backslash command starts with `\\` where a statement would
start and runs to the end of its line:

    SELECT 1;  \\x          ->  Item(sql, "SELECT 1"), Item(command, "\\x")
    SELECT ';' -- ;         ->  Item(sql, "SELECT ';' -- ;", complete=False)

Text after the last `;` that holds more than blanks and comments is an incomplete statement:
`split` returns it with `complete=False`. A script (`-f`, standard input, `\\i`) still runs
it, as psql does; the REPL keeps reading lines until the buffer is complete.

The scanner jumps from one special character to the next with `str.find`/regex, so a large
script is split without a Python step per character. Deliberately not done: psql's
variables (`:name`), `\\g` after a statement, and backslash commands in the middle of one.
"""

from __future__ import annotations

import dataclasses
import re

# The next character that can change the lexical state.
_SPECIAL = re.compile(r"""['";\\$]|--|/\*""")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][\w\x80-\uffff]*)?\$")
_QUIT_WORDS = {"quit", "exit", "\\q"}


@dataclasses.dataclass(frozen=True)
class Item:
    kind: str          # "sql" or "command"
    text: str          # a statement without its `;`, or a backslash command line
    offset: int        # where `text` starts in the input
    complete: bool = True


def _blank(chunk: str) -> bool:
    return not chunk.strip()


def split(text: str) -> list[Item]:
    """Statements and backslash commands of `text`, in order (see the module docstring)."""
    items: list[Item] = []
    n = len(text)
    i = 0
    start = 0                  # start of the current statement
    content = False            # the current statement has something besides blanks/comments

    def flush(end: int, complete: bool) -> None:
        nonlocal content
        if content:
            raw = text[start:end]
            lead = len(raw) - len(raw.lstrip())
            items.append(Item("sql", raw.strip(), start + lead, complete))
        content = False

    while i < n:
        m = _SPECIAL.search(text, i)
        if m is None:
            if not _blank(text[i:]):
                content = True
            break
        if not content and not _blank(text[i:m.start()]):
            content = True
        tok = m.group()
        j = m.start()
        if tok == ";":
            flush(j, True)
            i = start = j + 1
        elif tok == "\\":
            if content:                      # mid-statement: just a character
                i = j + 1
                continue
            end = text.find("\n", j)
            end = n if end < 0 else end
            items.append(Item("command", text[j:end].strip(), j))
            i = start = end
        elif tok == "--":
            end = text.find("\n", j)
            i = n if end < 0 else end
        elif tok == "/*":
            depth, k = 1, j + 2
            while depth and k < n:
                o, c = text.find("/*", k), text.find("*/", k)
                if c < 0:
                    k = n
                    break
                if 0 <= o < c:
                    depth, k = depth + 1, o + 2
                else:
                    depth, k = depth - 1, c + 2
            if depth:                          # unterminated comment: incomplete
                content = True
                i = n
                break
            i = k
        elif tok == "$":
            content = True
            d = _DOLLAR_TAG.match(text, j)
            # `$1` is a parameter and `a$b` an identifier character, not a dollar quote.
            if d is None or (j and (text[j - 1].isalnum() or text[j - 1] == "_")):
                i = j + 1
                continue
            end = text.find(d.group(), d.end())
            if end < 0:
                i = n
                break
            i = end + len(d.group())
        else:                                  # ' or "
            content = True
            escapes = (tok == "'" and j > 0 and text[j - 1] in "eE"
                       and (j < 2 or not (text[j - 2].isalnum() or text[j - 2] == "_")))
            k = j + 1
            while True:
                q = text.find(tok, k)
                if q < 0:
                    k = n + 1                  # unterminated
                    break
                if escapes:
                    bs = 0
                    while text[q - 1 - bs] == "\\":
                        bs += 1
                    if bs % 2:
                        k = q + 1
                        continue
                if q + 1 < n and text[q + 1] == tok:     # doubled quote
                    k = q + 2
                    continue
                k = q + 1
                break
            if k > n:
                i = n
                break
            i = k
    flush(n, False)
    return items


def is_quit(text: str) -> bool:
    """`quit`, `exit` or `\\q` alone on the buffer (psql 11+ accepts the words too)."""
    return text.strip().rstrip(";").strip().lower() in _QUIT_WORDS


def is_complete(text: str) -> bool:
    """Whether the REPL should run `text` now (Enter) rather than start a new line: the
    buffer is blank, is `quit`/`exit`, ends with a backslash command, or every statement in
    it ends with `;`."""
    if _blank(text) or is_quit(text):
        return True
    items = split(text)
    return all(it.complete for it in items)
