"""Completion of keywords, tables, columns, functions and backslash commands.

    completer = SqlCompleter()
    completer.refresh(backend)        # background thread: tables(), then columns(t) each
    completer.wait_refreshed(5)       # (tests) block until the metadata swap happened

The metadata is an immutable `Metadata` snapshot swapped in one assignment when a refresh
finishes, so completions computed while a refresh runs see the old snapshot whole (pgcli's
swappable completer). The REPL refreshes at start, after `\\c`, and after DDL.

What is offered depends on the text before the cursor, within the current statement:

    \\<prefix>                         backslash command names (from the registry)
    \\d <prefix>, \\tablets <prefix>   tables; \\format / \\x: their choices; \\i, \\o: files
    ... FROM | JOIN | INTO | UPDATE | TABLE | DESCRIBE | TABLETS | PARTITIONS <prefix>
                                      tables (and table functions)
    <alias>.<prefix>                  columns of the table the alias (or name) stands for
    anything else                     columns of the tables the statement names, then
                                      functions, then keywords

Matching is a case-insensitive prefix match; keywords follow the case of what was typed.
Deliberately simple: no parse of the statement, no ranking by frequency of use.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable

from prompt_toolkit.completion import Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from shell import commands
from shell.backend import quote_ident

KEYWORDS = (
    "ADD", "ALL", "ALTER", "ANALYZE", "AND", "AS", "ASC", "BEGIN", "BETWEEN", "BLOCK_SIZE",
    "BY", "CASE", "CAST", "COLUMN", "COLUMNS", "COMMENT", "COMMIT", "COMPRESSION", "CREATE",
    "CROSS", "DEFAULT", "DELETE", "DESC", "DESCRIBE", "DISTINCT", "DISTRIBUTE", "DROP",
    "ELSE", "ENCODING", "END", "EXCEPT", "EXISTS", "EXPLAIN", "EXTRACT", "FALSE", "FIRST",
    "FOR", "FROM", "FULL", "GROUP", "HASH", "HAVING", "IF", "IN", "INNER", "INSERT",
    "INTERSECT", "INTERVAL", "INTO", "IS", "JOIN", "KEY", "KUDU", "LAST", "LEFT", "LIKE",
    "ILIKE", "LIMIT", "NOT", "NULL", "NULLS", "OF", "OFFSET", "ON", "OR", "ORDER", "OUTER",
    "PARTITION", "PARTITIONS", "PRIMARY", "RANGE", "RENAME", "RIGHT", "ROLLBACK", "SELECT",
    "SET", "SHOW", "STORED", "SYSTEM_TIME", "TABLE", "TABLES", "TABLETS", "TBLPROPERTIES",
    "THEN", "TO", "TRUE", "UNION", "UPDATE", "UPSERT", "USING", "VALUE", "VALUES", "WHEN",
    "WHERE", "WITH", "BIGINT", "BINARY", "BOOL", "BOOLEAN", "DATE", "DECIMAL", "DOUBLE",
    "FLOAT", "INT", "INTEGER", "REAL", "SMALLINT", "STRING", "TIMESTAMP", "TINYINT",
    "VARCHAR", "AUTO_ENCODING", "PLAIN_ENCODING", "PREFIX_ENCODING", "RLE", "DICT_ENCODING",
    "BIT_SHUFFLE", "LZ4", "SNAPPY", "ZLIB",
)

FUNCTIONS = (
    "abs", "avg", "bool_and", "bool_or", "ceil", "coalesce", "concat", "concat_ws", "count",
    "current_date", "current_timestamp", "date_trunc", "exp", "extract", "floor", "greatest",
    "initcap", "least", "left", "length", "ln", "log", "lower", "lpad", "ltrim", "max", "min",
    "mod", "now", "nullif", "pi", "power", "random", "regexp_like", "repeat", "replace",
    "reverse", "right", "round", "rpad", "rtrim", "sign", "sqrt", "starts_with", "stddev",
    "stddev_pop", "strpos", "substr", "substring", "sum", "table_changes", "trim", "trunc",
    "upper", "variance", "var_pop",
)

TABLE_FUNCTIONS = ("table_changes",)

# Keywords after which a table name comes.
_TABLE_CONTEXT = {"FROM", "JOIN", "INTO", "UPDATE", "TABLE", "DESCRIBE", "DESC", "TABLETS",
                  "PARTITIONS"}
_WORD = re.compile(r'(?:"[^"]*|[\w$]+)$')
_TOKEN = re.compile(r"""'(?:[^']|'')*'?|"(?:[^"]|"")*"?|--[^\n]*|[\w$.]+|[(),;]|\S""")
_REF = re.compile(r"""\b(?:FROM|JOIN|UPDATE|INTO|TABLE)\s+("(?:[^"]|"")+"|[\w$]+)"""
                  r"""(?:\s+(?:AS\s+)?(?!(?:WHERE|JOIN|ON|GROUP|ORDER|LIMIT|LEFT|RIGHT|INNER|"""
                  r"""FULL|CROSS|SET|VALUES|UNION|USING|HAVING|FOR|SELECT|WITH)\b)([\w$]+))?""",
                  re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Metadata:
    tables: tuple[str, ...] = ()
    columns: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


class SqlCompleter(Completer):
    """prompt_toolkit completer over a `Metadata` snapshot (see the module docstring)."""

    def __init__(self) -> None:
        self.metadata = Metadata()
        self._refreshed = threading.Event()
        self._generation = 0
        self._lock = threading.Lock()
        self._paths = PathCompleter(expanduser=True)

    # -- background refresh --------------------------------------------------------------

    def refresh(self, backend, *, wait: bool = False) -> threading.Thread:
        """Reload tables and columns from `backend` on a daemon thread. A newer refresh
        supersedes an older one still running (its result is dropped)."""
        with self._lock:
            self._generation += 1
            gen = self._generation
            self._refreshed.clear()

        def work() -> None:
            try:
                tables = tuple(backend.tables())
                columns = {t: tuple(backend.columns(t)) for t in tables}
                meta = Metadata(tables, columns)
            except Exception:  # noqa: BLE001 - a closed or broken backend: keep the old one
                meta = None
            with self._lock:
                if gen == self._generation:
                    if meta is not None:
                        self.metadata = meta
                    self._refreshed.set()

        t = threading.Thread(target=work, name="kudusql-completion-refresh", daemon=True)
        t.start()
        if wait:
            t.join()
        return t

    def wait_refreshed(self, timeout: float | None = None) -> bool:
        return self._refreshed.wait(timeout)

    # -- completion ------------------------------------------------------------------------

    def get_completions(self, document: Document, complete_event) -> Iterable[Completion]:
        text = document.text_before_cursor
        stmt_start = _statement_start(text)
        before = text[stmt_start:]
        stripped = before.lstrip()
        if stripped.startswith("\\"):
            yield from self._command_completions(stripped, document, complete_event)
            return
        m = _WORD.search(before)
        word = m.group() if m else ""
        dotted = re.search(r'("(?:[^"]|"")+"|[\w$]+)\.([\w$]*)$', before)
        meta = self.metadata
        if dotted:
            qualifier, prefix = dotted.group(1), dotted.group(2)
            table = self._resolve(qualifier, document.text[stmt_start:])
            cols = meta.columns.get(table, ())
            yield from _matches(prefix, cols, "column")
            return
        previous = _previous_token(before[:len(before) - len(word)])
        if previous.upper() in _TABLE_CONTEXT or (
                previous == "," and _last_keyword(before) in ("FROM", "JOIN")):
            yield from _matches(word, meta.tables, "table", quote=True)
            if previous.upper() in ("FROM", "JOIN") or previous == ",":
                yield from _matches(word, TABLE_FUNCTIONS, "function")
            return
        seen: set[str] = set()
        stmt = document.text[stmt_start:]
        refs = [t for t, _alias in _references(stmt) if t in meta.columns]
        for t in refs:
            for c in _matches(word, meta.columns[t], "column"):
                if c.text not in seen:
                    seen.add(c.text)
                    yield c
        yield from _matches(word, FUNCTIONS, "function")
        upper = not word or word[0].isupper()
        yield from _matches(word, KEYWORDS if upper else tuple(k.lower() for k in KEYWORDS),
                            "keyword")
        if not refs:    # nothing named yet: table names are likely (SELECT * FROM comes later)
            yield from _matches(word, meta.tables, "table", quote=True)

    def _command_completions(self, stripped: str, document: Document, event):
        if " " not in stripped:
            low = stripped.lower()
            for name in commands.command_names():
                if name.lower().startswith(low):
                    yield Completion(name, start_position=-len(stripped),
                                     display_meta=commands.REGISTRY[name].help)
            return
        name, _, arg = stripped.partition(" ")
        cmd = commands.REGISTRY.get(name)
        if cmd is None or cmd.completes is None:
            return
        arg = arg.lstrip()
        if cmd.completes == "table":
            yield from _matches(arg, self.metadata.tables, "table", quote=True)
        elif cmd.completes in ("file", "target"):
            sub = Document(arg, len(arg))
            yield from self._paths.get_completions(sub, event)
        else:
            yield from _matches(arg, cmd.completes.split("|"), "")

    def _resolve(self, qualifier: str, stmt: str) -> str:
        q = qualifier[1:-1].replace('""', '"') if qualifier.startswith('"') else \
            qualifier.lower()
        for table, alias in _references(stmt):
            if alias and alias.lower() == q.lower():
                return table
        return q


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


def _references(stmt: str) -> list[tuple[str, str | None]]:
    """(table, alias) for each `FROM t [AS] a` / `JOIN t a` / ... in the statement."""
    return [(_unquote(m.group(1)), m.group(2)) for m in _REF.finditer(stmt)]


def _statement_start(text: str) -> int:
    """Offset just after the last top-level `;` (or backslash command line) in `text`."""
    from shell.statements import split
    items = split(text)
    if not items:
        return len(text) - len(text.lstrip()) if text.strip() else len(text)
    last = items[-1]
    if last.complete and last.kind == "sql":
        return len(text)            # right after a complete statement: a new one starts
    return last.offset


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text) if not t.startswith("--")]


def _previous_token(text: str) -> str:
    toks = _tokens(text)
    return toks[-1] if toks else ""


def _last_keyword(text: str) -> str:
    for t in reversed(_tokens(text)):
        if t.upper() in ("FROM", "JOIN", "WHERE", "SELECT", "ON", "GROUP", "ORDER", "SET"):
            return t.upper()
    return ""


def _matches(prefix: str, candidates: Iterable[str], meta: str, *,
             quote: bool = False) -> Iterable[Completion]:
    raw = prefix.removeprefix('"')
    low = raw.lower()
    for c in candidates:
        if c.lower().startswith(low):
            text = quote_ident(c) if quote else c
            yield Completion(text, start_position=-len(prefix), display_meta=meta)
