"""Prepared statements and portals (the extended protocol's objects) and SQL cursors.

    Parse    -> PreparedStatement(name, sql, client parameter OIDs)    "" = unnamed
    Describe S: parameter types and result schema, worked out once and kept
    Bind     -> Portal(statement, decoded parameters, result formats)   "" = unnamed
    Execute  -> the portal runs once; its result (a StatementResult: an Arrow table) is
                kept with a row position, so Execute with a row limit resumes where the
                last one stopped (PortalSuspended) and never runs the query again
    DECLARE c CURSOR FOR q -> a Portal named c (SQL cursors and protocol portals share one
                namespace, as in PostgreSQL: psycopg Describes a DECLAREd cursor by name)
    FETCH / MOVE [direction] [FROM | IN] c,  CLOSE c | CLOSE ALL
    DEALLOCATE [PREPARE] name | ALL

Lifetimes (PostgreSQL's): the unnamed statement and portal are replaced by the next
Parse/Bind; named statements live until Close/DEALLOCATE; portals end with their
transaction - at Sync outside a transaction block, at COMMIT/ROLLBACK inside one - unless
DECLAREd WITH HOLD. Closing a statement closes the portals made from it.

Results are materialised (the engine returns whole Arrow tables today), so every cursor
is scrollable: FETCH accepts all of PostgreSQL's directions.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pyarrow as pa

from planner.commands import KuduCommand, KuduCopy, KuduExplain, KuduFetch
from planner.dialect import KuduDeallocate
from planner.errors import SqlError
from planner.result import StatementResult


@dataclasses.dataclass
class PreparedStatement:
    name: str
    sql: str
    param_oids: tuple[int, ...]
    statement: object                           # the front door's Statement (session/)
    described: bool = False
    param_types: list[pa.DataType | None] = dataclasses.field(default_factory=list)
    schema: pa.Schema | None = None             # None: returns no rows
    result_oids: list[tuple[int, int]] | None = None   # what Describe S announced
    param_desc_oids: list[int] = dataclasses.field(default_factory=list)  # ditto
    rows_announced: bool = False                # a RowDescription for it was sent
    fast: dict = dataclasses.field(default_factory=dict)  # wire.fastpath's, per statement

    @property
    def kind(self) -> str:
        """empty | copy | wire (a command the connection answers: described without the
        pool) | plain (the session's: a query, DML, DDL, EXPLAIN; or one that does not
        parse, whose error comes when it is described or run)."""
        try:
            node = self.statement.node
        except SqlError:
            return "plain"
        if node is None:
            return "empty"
        if isinstance(node, KuduCopy):
            return "copy"
        if isinstance(node, (KuduCommand, KuduDeallocate)) and \
                not isinstance(node, KuduExplain):
            return "wire"
        return "plain"


class Rows:
    """A result's rows read forward once, a batch at a time: from its materialised table
    or from its stream (`StatementResult.stream`, when the session streams a SELECT).

    Rows pulled from the source but not handed out yet wait in `_buf`; `fill(n)` pulls
    until n rows wait or the source is exhausted, so a small result is read to its end in
    one go and `streaming` turns False (the caller then needs no thread for the rest).
    Pulling from a stream runs the scan: callers do it off the event loop."""

    def __init__(self, result: StatementResult):
        self.table = result.table
        self.stream = getattr(result, "stream", None) if result.table is None else None
        self.schema = result.table.schema if result.table is not None else \
            getattr(result, "schema", None)
        self._it = iter(self.table.to_batches()) if self.table is not None else \
            (iter(self.stream) if self.stream is not None else iter(()))
        self._buf: list[pa.RecordBatch] = []
        self._buffered = 0
        self.sent = 0
        self.exhausted = False        # the source has nothing more (rows may wait in _buf)

    @property
    def streaming(self) -> bool:
        """Whether reading on may run the scan (False: what is left is in memory)."""
        return self.stream is not None and not self.exhausted

    def remaining(self) -> int:
        """Rows left when not streaming (a lower bound while streaming)."""
        if self.table is not None:
            return self.table.num_rows - self.sent
        return self._buffered

    def fill(self, n: int) -> None:
        while self._buffered < n and not self.exhausted:
            try:
                b = next(self._it)
            except StopIteration:
                self.exhausted = True
                break
            for rb in (b.to_batches() if isinstance(b, pa.Table) else [b]):
                if rb.num_rows:
                    self._buf.append(rb)
                    self._buffered += rb.num_rows

    def take(self, max_rows: int) -> pa.RecordBatch | None:
        """The next at most `max_rows` rows as one batch; None when there are no more."""
        self.fill(max_rows)
        if not self._buf:
            return None
        parts, got = [], 0
        while self._buf and got < max_rows:
            b = self._buf.pop(0)
            if got + b.num_rows > max_rows:
                cut = max_rows - got
                self._buf.insert(0, b.slice(cut))
                b = b.slice(0, cut)
            parts.append(b)
            got += b.num_rows
        self._buffered -= got
        self.sent += got
        if len(parts) == 1:
            return parts[0]
        return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]

    def materialize(self) -> None:
        """Read the rest of a stream into memory (the session is about to run another
        statement; an open scan must not interleave with it)."""
        if self.stream is None or self.exhausted:
            return
        self.fill(1 << 62)
        self.close()

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # abandoning a scan must not fail anyone
                close()


@dataclasses.dataclass
class Portal:
    name: str
    statement: PreparedStatement | None
    params: list
    result_formats: tuple[int, ...] = ()
    result: StatementResult | None = None       # set once the portal has run
    rows: Rows | None = None                    # its rows, read forward by Execute
    pos: int = 0                                # cursor position (FETCH / MOVE)
    announced: list[tuple[int, int]] | None = None  # OIDs a RowDescription promised
    hold: bool = False                          # DECLARE ... WITH HOLD
    cursor: bool = False                        # made by DECLARE
    binary: bool = False                        # DECLARE BINARY
    executed: bool = False                      # an Execute has run it

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()


@dataclasses.dataclass(frozen=True)
class Fetch:
    name: str
    move: bool
    kind: str              # "forward" | "backward" | "absolute" | "relative"
    count: int | None      # None = ALL

    @classmethod
    def of(cls, node: KuduFetch) -> Fetch:
        a = node.args
        return cls(a["name"], bool(a.get("move")), a["kind"], a.get("count"))


def fetch(portal: Portal, f: Fetch) -> StatementResult:
    """FETCH / MOVE on a cursor: rows from its materialised result."""
    table = portal.result.table if portal.result is not None else None
    n = table.num_rows if table is not None else 0
    pos = portal.pos                       # rows before the cursor (PostgreSQL: 0 = before 1)
    if f.kind == "forward":
        end = n if f.count is None else min(n, pos + f.count)
        start = pos
        new = end
    elif f.kind == "backward":
        start = 0 if f.count is None else max(0, pos - f.count - 1)
        end = max(0, pos - 1)
        new = start + 1 if end > start else 0
        rows = table.slice(start, end - start) if table is not None else None
        rows = rows.take(pa.array(range(rows.num_rows - 1, -1, -1))) if rows is not None \
            and rows.num_rows else rows
        portal.pos = new
        return _fetched(f, rows, portal)
    elif f.kind == "absolute":
        k = f.count if f.count is not None and f.count >= 0 else n + 1 + (f.count or 0)
        k = max(0, min(k, n + 1))
        start, end, new = max(k - 1, 0), k if 1 <= k <= n else max(k - 1, 0), k
    else:   # relative
        k = max(0, min(pos + (f.count or 0), n + 1))
        start, end, new = max(k - 1, 0), k if 1 <= k <= n else max(k - 1, 0), k
    portal.pos = min(new, n)
    rows = table.slice(start, max(0, end - start)) if table is not None else None
    return _fetched(f, rows, portal)


def _fetched(f: Fetch, rows, portal: Portal) -> StatementResult:
    count = rows.num_rows if rows is not None else 0
    if f.move:
        return StatementResult("MOVE", rowcount=count)
    if rows is None:
        rows = pa.table({})
    return StatementResult("FETCH", table=rows, rowcount=count)
