"""The front door: a client's string -> Statements, each parsed once by the KuduSQL dialect.

    split_statements(sql)    (offset, text) of each statement (top-level `;`), cached
    Statement(text, offset)  one statement; `.node` its node, parsed on first use by
                             planner.dialect.parse_sql (queries, DML, DDL and the session
                             commands of planner/commands.py), None for an empty statement
    Statement.ast()          the node for a layer that may change it (the planner)

Every front end hands the session Statements: the DB-API driver and the shell through
`Session.execute`, the wire server through `Session.statements` / `Session.single_statement` and
`Session.run` (it looks at the node's type only to pick its protocol: COPY's sub-protocol,
an empty query, what a failed transaction block still accepts). Nothing above the session
parses SQL: the wire reads none (tests/test_layering.py keeps sqlglot out of wire/), and
the shell only cuts its input at `;` as psql does (shell/statements.py).

Parses are cached by text (process-wide, statements up to `CACHE_TEXT_BYTES`): clients send
the same statement texts again and again, and the wire's extended protocol parses at Parse.
A cached node is shared (between sessions and threads), so it is never handed to the
planner: `ast()` gives a copy (about a fifth of a parse), except for the session commands'
nodes, which nothing changes.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.tokens import TokenType

from planner.commands import KuduCommand, KuduExplain
from planner.dialect import KuduSQL, parse_sql, syntax_error
from planner.errors import SqlError

CACHE_TEXT_BYTES = 4096
_READ_ONLY = (KuduCommand,)
_UNPARSED = object()


@functools.lru_cache(maxsize=1024)
def split_statements(sql: str) -> tuple[tuple[int, str], ...]:
    """(offset, text) of each statement in `sql` (split at top-level semicolons); cached,
    since clients send the same statement texts again and again."""
    try:
        tokens = KuduSQL().tokenize(sql)
    except Exception as e:  # noqa: BLE001 - sqlglot's TokenError: an unterminated string...
        raise syntax_error(sql, e) from None
    out = []
    seg_start = None
    for t in tokens:
        if t.token_type == TokenType.SEMICOLON:
            if seg_start is not None:
                out.append((seg_start, sql[seg_start:t.start].rstrip()))
            seg_start = None
        elif seg_start is None:
            seg_start = t.start
    if seg_start is not None:
        out.append((seg_start, sql[seg_start:].rstrip()))
    return tuple(out)


def _parse_one(text: str) -> exp.Expr | None:
    asts = parse_sql(text)
    if len(asts) > 1:
        raise SqlError("cannot insert multiple commands into a prepared statement", "42601")
    node = asts[0] if asts else None
    _fold_write_identifiers(node)
    return node


def _fold_write_identifiers(node) -> None:
    """INSERT / UPSERT / UPDATE / DELETE (also under EXPLAIN): unquoted identifiers fold to
    lower case, quoted ones keep theirs (PostgreSQL's rule, which the binder applies to
    queries; the writers read table and column names off the node: `INSERT INTO Tab`
    was 42P01 for a table created as `CREATE TABLE Tab`). In place: once per parse."""
    inner = node.this if isinstance(node, KuduExplain) else node
    if isinstance(inner, (exp.Insert, exp.Update, exp.Delete)):
        normalize_identifiers(inner, dialect="postgres")


_parse_cached = functools.lru_cache(maxsize=512)(_parse_one)


class Statement:
    """One statement of a client's string: `text`, `offset` (where it starts in that
    string: the caller adds it to error positions) and its node, parsed once."""

    __slots__ = ("text", "offset", "_node", "_shared", "_spent")

    def __init__(self, text: str, offset: int = 0, node: Any = _UNPARSED):
        """`node`: the statement's node when it was parsed as part of another (`parsed`)."""
        self.text = text
        self.offset = offset
        self._node = node
        self._shared = node is not _UNPARSED   # the node is the parse cache's (or another's)
        self._spent = False        # our own node went to the planner (it may have changed)

    @property
    def node(self) -> exp.Expr | None:
        """The statement's node (SqlError 42601 if it does not parse); None: empty."""
        if self._node is _UNPARSED:
            self._shared = len(self.text) <= CACHE_TEXT_BYTES
            self._node = _parse_cached(self.text) if self._shared else _parse_one(self.text)
        return self._node

    def ast(self) -> exp.Expr | None:
        """The node for a layer that may change it: a copy of a shared node, our own node
        the first time (parsed again after that)."""
        node = self.node
        if node is None or isinstance(node, _READ_ONLY):
            return node
        if self._shared:
            return node.copy()
        if self._spent:
            return _parse_one(self.text)
        self._spent = True
        return node

    @property
    def verb(self) -> str | None:
        """'select' (a SELECT), 'insert' (INSERT or UPSERT) or None (anything else, or a
        statement that does not parse): what lets a front end pick a fast path (the wire's
        point reads and pipelined batches, wire/fastpath.py) without reading SQL."""
        try:
            node = self.node
        except SqlError:
            return None
        if isinstance(node, exp.Select):
            return "select"
        if isinstance(node, exp.Insert):       # KuduUpsert is an exp.Insert
            return "insert"
        return None

    def write_tag(self) -> str | None:
        """The command tag a read-only transaction refuses this statement by (PostgreSQL's
        25006 `cannot execute <tag> in a read-only transaction`): 'INSERT', 'UPDATE',
        'DELETE', 'UPSERT', 'COPY FROM', 'CREATE TABLE', 'DROP VIEW', 'ALTER TABLE',
        'TRUNCATE TABLE', 'CREATE ROLE', ...; None for a statement that writes nothing
        (or does not parse: its own error comes first)."""
        try:
            node = self.node
        except SqlError:
            return None
        return write_tag(node)

    def key_write_shape(self) -> tuple[str, list[str]] | None:
        """('UPDATE', SET column names) or ('DELETE', []) for a plain UPDATE / DELETE (no
        RETURNING, FROM / USING, WITH, ORDER BY, LIMIT; SET of distinct plain columns to
        values without a subquery: `_has_subquery`), else None: what the wire's key-write
        fast path (wire/fastpath.py) needs to know of the statement, without reading SQL."""
        try:
            node = self.node
        except SqlError:
            return None
        if node is None or any(node.args.get(a) for a in (
                "returning", "from", "from_", "using", "with", "with_", "order", "limit")):
            return None
        if isinstance(node, exp.Update):
            names = []
            for a in node.expressions:
                if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column) or \
                        a.this.table or _has_subquery(a.expression):
                    return None
                names.append(a.this.name)
            return ("UPDATE", names) if names and len(set(names)) == len(names) else None
        if isinstance(node, exp.Delete):
            return ("DELETE", [])
        return None

    @classmethod
    def parsed(cls, text: str, node: exp.Expr | None, offset: int = 0) -> Statement:
        """A statement already parsed as part of another (DECLARE's query, what COPY TO
        reads, EXPLAIN's statement): its node is shared with that one's."""
        return cls(text, offset, node)

    def __repr__(self) -> str:
        return f"Statement({self.text!r}, offset={self.offset})"


def statements(sql: str) -> list[Statement]:
    """The Statements of a client's string (not parsed yet: each parses when it runs, so a
    syntax error in the third stops the string there, after the first two ran)."""
    return [Statement(text, offset) for offset, text in split_statements(sql)]


def write_tag(node) -> str | None:
    """`Statement.write_tag` of a parsed node."""
    from planner.commands import KuduCopy, KuduExplain, KuduRole, KuduUpsert
    if node is None:
        return None
    if isinstance(node, KuduUpsert):
        return "UPSERT"
    if isinstance(node, exp.Insert):
        return "INSERT"
    if isinstance(node, exp.Update):
        return "UPDATE"
    if isinstance(node, exp.Delete):
        return "DELETE"
    if isinstance(node, exp.Merge):
        return "MERGE"
    if isinstance(node, exp.TruncateTable):
        return "TRUNCATE TABLE"
    if isinstance(node, (exp.Create, exp.Drop)):
        kind = str(node.args.get("kind") or "TABLE").upper()
        return f"{'CREATE' if isinstance(node, exp.Create) else 'DROP'} {kind}"
    if isinstance(node, exp.Alter):
        return f"ALTER {str(node.args.get('kind') or 'TABLE').upper()}"
    if isinstance(node, KuduCopy):
        return "COPY FROM" if node.args["spec"].direction == "from" else None
    if isinstance(node, KuduRole):
        return node.verb
    if isinstance(node, KuduExplain) and node.args.get("analyze"):
        return write_tag(node.this)
    if isinstance(node, exp.Select) and node.args.get("into") is not None:
        return "SELECT INTO"
    return None


def _has_subquery(e: exp.Expression) -> bool:
    """Whether an UPDATE's SET value holds a subquery (it may read other rows and tables:
    the ordinary path). A value reading the row's own columns (`SET n = n + 1`) is the
    fast path's: it writes under a read precondition, "unchanged since the snapshot the
    row was read at", and a row changed meanwhile goes back to the ordinary path, which
    re-reads it (wire/fastpath.py `key_write`, planner/dml.py)."""
    return any(isinstance(n, (exp.Subquery, exp.Select)) for n in e.walk())
