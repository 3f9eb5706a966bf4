"""What the shell talks to: an embedded database directory or a server on the Postgres wire.

Both backends give the shell one result shape, so there is one formatter (pgcli's
`(title, rows, headers, status)`), used by SQL statements and backslash commands alike:

    Result(status="SELECT 2", table=pyarrow.Table, notices=(...), row_errors=(...),
           title=None, footer=())

Contract of a backend:
- `execute(sql)` runs every statement in `sql` and returns one `Result` per statement, or
  raises `BackendError` (SQLSTATE, message, 1-based `position` into `sql`, detail, hint).
  A DML statement whose rows partly failed (Kudu's per-row semantics) returns normally with
  `row_errors`; the shell prints every one of them.
- `cancel()` may be called from any thread while `execute` runs; the statement then fails
  with SQLSTATE 57014. Embedded: `Session.cancel()`. Remote: a real CancelRequest on a
  separate socket (libpq's PQcancel via psycopg's `Connection.cancel_safe`).
- `begin()`: the shell's user sees a statement start (it is called on the shell's thread
  just before `execute` is handed to a worker): a cancel from then on belongs to that
  statement even when it comes before the worker reaches the engine (embedded; a remote
  server, like PostgreSQL, ignores a cancel that comes before its statement).
- `tables()` / `columns(table)` feed completion from a background thread *while* `execute`
  may be running: each backend answers them on a second session / connection of its own.
- `close()` releases everything; `target` is what `\\c` reconnects to; `name` is shown in
  the prompt.

`open_backend(target)` picks the implementation: a `postgres://` / `postgresql://` URI or a
libpq `key=value` string is remote; anything else is a data directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import decimal
import logging
import os
import threading
from typing import Protocol

import pyarrow as pa

CANCELED = "57014"
log = logging.getLogger("kudusql.shell")


@dataclasses.dataclass(frozen=True)
class RowError:
    """One failed row of a DML statement whose other rows were applied."""
    ordinal: int                  # 1-based position of the row in the statement
    sqlstate: str
    message: str
    key: tuple | None = None


@dataclasses.dataclass(frozen=True)
class Result:
    """What one statement or one backslash command produced."""
    status: str = ""                         # command tag ("INSERT 0 5", "SELECT 2") or a message
    table: pa.Table | None = None            # rows to show; None for statements without rows
    notices: tuple[str, ...] = ()
    row_errors: tuple[RowError, ...] = ()
    title: str | None = None                 # centred above the rows (\d, \dt)
    footer: tuple[str, ...] = ()             # lines after the rows (\d: key, partitioning)
    row_count: bool = True                   # print "(n rows)" under the rows (not for \d)

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names) if self.table is not None else []

    @property
    def command(self) -> str:
        """The verb of the status: "INSERT", "CREATE TABLE", "SELECT"."""
        words = self.status.split()
        while words and words[-1].isdigit():
            words.pop()
        return " ".join(words).upper()


class BackendError(Exception):
    """A statement failed (or the connection did). Positions are 1-based into the SQL
    passed to `execute`, PostgreSQL's ErrorResponse `P` field."""

    def __init__(self, message: str, sqlstate: str = "XX000", position: int | None = None,
                 detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.position = position
        self.detail = detail
        self.hint = hint


class Backend(Protocol):
    name: str
    target: str

    def execute(self, sql: str) -> list[Result]: ...
    def begin(self) -> None: ...
    def cancel(self) -> None: ...
    def tables(self) -> list[str]: ...
    def columns(self, table: str) -> list[str]: ...
    def close(self) -> None: ...


def is_dsn(target: str) -> bool:
    t = target.strip()
    return t.startswith(("postgres://", "postgresql://")) or (
        "=" in t and not os.path.exists(t))


def open_backend(target: str, *, maintenance: bool = True) -> Backend:
    """A RemoteBackend for a DSN, else an EmbeddedBackend on the directory `target`."""
    if is_dsn(target):
        return RemoteBackend(target)
    return EmbeddedBackend(target, maintenance=maintenance)


# ---------------------------------------------------------------------------------------------
# Embedded: the session layer (session/) in this process


class EmbeddedBackend:
    """A data directory opened in this process (`session.Database`)."""

    def __init__(self, data_dir: str, *, maintenance: bool = True):
        from session import Database
        from planner.errors import SqlError
        self._SqlError = SqlError
        self.target = data_dir
        self.name = os.path.basename(os.path.abspath(data_dir)) or "kudusql"
        try:
            self.db = Database.open(data_dir, maintenance=maintenance)
        except SqlError as e:
            raise _from_sql_error(e) from None
        except Exception as e:  # noqa: BLE001 - boundary: any engine error opening the catalog
            state = getattr(e, "sqlstate", None)       # an engine error says what it is
            raise BackendError(str(e) if state else f"could not open {data_dir}: {e}",
                               state or "08006") from None
        self.session = self.db.session()
        self._meta = self.db.session()          # completion queries, on their own session
        self._meta_lock = threading.Lock()
        self._begun = False

    def begin(self) -> None:
        self.session.reset_cancel()
        self._begun = True

    def execute(self, sql: str) -> list[Result]:
        begun, self._begun = self._begun, False
        try:
            out = self.session.execute(sql, keep_cancel=begun)
        except self._SqlError as e:
            raise _from_sql_error(e) from None
        except Exception as e:  # noqa: BLE001 - boundary: engine errors carry a SQLSTATE
            if getattr(e, "sqlstate", None):
                raise BackendError(str(e), e.sqlstate) from None
            log.error("internal error", exc_info=e)
            raise BackendError("internal error", "XX000", hint=_BUG_HINT) from None
        return [_from_statement_result(r) for r in out if r.command != "EMPTY"]

    def cancel(self) -> None:
        self.session.cancel()

    def _meta_query(self, sql: str) -> pa.Table | None:
        with self._meta_lock:
            try:
                rs = self._meta.execute(sql)
            except self._SqlError:
                return None
        return rs[0].table if rs else None

    def tables(self) -> list[str]:
        t = self._meta_query("SHOW TABLES")
        return [] if t is None else t.column("name").to_pylist()

    def columns(self, table: str) -> list[str]:
        t = self._meta_query(f"DESCRIBE {quote_ident(table)}")
        return [] if t is None else t.column("name").to_pylist()

    def close(self) -> None:
        self.db.close()


_BUG_HINT = "This is a bug in kudusql: please report the statement (the traceback is " \
    "logged by the kudusql.shell logger)."


def _from_sql_error(e) -> BackendError:
    return BackendError(e.message, e.sqlstate, e.position, getattr(e, "detail", None),
                        getattr(e, "hint", None))


def _from_statement_result(r) -> Result:
    return Result(
        status=r.tag(), table=r.table, notices=tuple(r.notices),
        row_errors=tuple(RowError(f.ordinal, f.sqlstate, f.message, f.key)
                         for f in r.row_errors))


def quote_ident(name: str) -> str:
    """`name` as an SQL identifier: bare when it is a plain lower-case word."""
    if name and (name[0].isalpha() or name[0] == "_") and all(
            c.isalnum() or c == "_" for c in name) and name == name.lower():
        return name
    return '"' + name.replace('"', '""') + '"'


# ---------------------------------------------------------------------------------------------
# Remote: a kudusql (or any PostgreSQL) server through psycopg 3

# PostgreSQL type OIDs -> Arrow types for the columns psycopg returns as Python objects.
_OID_TYPES = {
    16: pa.bool_(), 17: pa.binary(), 20: pa.int64(), 21: pa.int16(), 23: pa.int32(),
    25: pa.string(), 700: pa.float32(), 701: pa.float64(), 1043: pa.string(),
    1042: pa.string(), 19: pa.string(), 1082: pa.date32(), 1083: pa.time64("us"),
    1114: pa.timestamp("us"), 1184: pa.timestamp("us", tz="UTC"),
}
_NUMERIC = 1700


class RemoteBackend:
    """A server reached with a DSN (`postgresql://user@host:5433/db`), through psycopg 3."""

    def __init__(self, dsn: str):
        try:
            import psycopg
        except ImportError:  # pragma: no cover - depends on the installation
            raise BackendError('connecting to a server needs psycopg 3: '
                               'pip install "psycopg[binary]"', "08001") from None
        self._psycopg = psycopg
        self.target = dsn
        self._notices: list[str] = []
        try:
            self.conn = psycopg.connect(dsn, autocommit=True)
            self._meta = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            first, _, rest = str(e).strip().partition("\n")
            raise BackendError(f"could not connect to {dsn}: {first}", "08006",
                               hint=" ".join(rest.split()) or None) from None
        self.conn.add_notice_handler(self._notice)
        self.name = self.conn.info.dbname or "kudusql"
        self._meta_lock = threading.Lock()

    def _notice(self, diag) -> None:
        self._notices.append(diag.message_primary or "")

    def execute(self, sql: str) -> list[Result]:
        psycopg = self._psycopg
        out: list[Result] = []
        self._notices.clear()
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql)                 # no parameters: the simple query protocol
                while True:
                    table = _to_arrow(cur) if cur.description is not None else None
                    out.append(Result(status=cur.statusmessage or "", table=table,
                                      notices=tuple(self._notices)))
                    self._notices.clear()
                    if not cur.nextset():
                        break
        except psycopg.Error as e:
            d = e.diag
            pos = d.statement_position
            raise BackendError(d.message_primary or str(e).strip(),
                               d.sqlstate or ("08006" if self.conn.closed else "XX000"),
                               int(pos) if pos else None, d.message_detail,
                               d.message_hint) from None
        return out

    def begin(self) -> None:
        pass

    def cancel(self) -> None:
        try:
            cancel = getattr(self.conn, "cancel_safe", None) or self.conn.cancel
            cancel()
        except self._psycopg.Error:
            pass

    def _meta_rows(self, sql: str, params=None) -> list[tuple] | None:
        with self._meta_lock:
            try:
                return self._meta.execute(sql, params).fetchall()
            except self._psycopg.Error:
                return None

    def tables(self) -> list[str]:
        rows = self._meta_rows(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND table_type = 'BASE TABLE' ORDER BY table_name")
        if rows is None:
            rows = self._meta_rows("SHOW TABLES") or []
        return [r[0] for r in rows]

    def columns(self, table: str) -> list[str]:
        rows = self._meta_rows(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position", (table,))
        if not rows:
            rows = self._meta_rows(f"DESCRIBE {quote_ident(table)}") or []
        return [r[0] for r in rows]

    def close(self) -> None:
        for c in (self.conn, self._meta):
            with contextlib.suppress(self._psycopg.Error, OSError):
                c.close()


def _to_arrow(cur) -> pa.Table:
    """The cursor's rows as a pyarrow Table: column-wise, typed by the column OIDs."""
    names = [d.name for d in cur.description]
    rows = cur.fetchall()
    cols = list(zip(*rows)) if rows else [() for _ in names]
    arrays = []
    for d, values in zip(cur.description, cols):
        typ = _OID_TYPES.get(d.type_code)
        if d.type_code == _NUMERIC:
            typ = _numeric_type(values)
        try:
            arrays.append(pa.array(values, type=typ) if typ is not None or values
                          else pa.array(values, type=pa.string()))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in values],
                                   type=pa.string()))
    # Names may repeat (SELECT 1 AS a, 2 AS a): build from arrays, not a dict.
    return pa.Table.from_arrays(arrays, names=names)


def _numeric_type(values) -> pa.DataType | None:
    """NUMERIC without a declared scale: the widest scale seen (text when NaN/inf)."""
    scale, digits = 0, 1
    for v in values:
        if v is None:
            continue
        if not isinstance(v, decimal.Decimal) or not v.is_finite():
            return pa.string()
        t = v.as_tuple()
        s = max(0, -t.exponent)
        scale = max(scale, s)
        digits = max(digits, len(t.digits) - s)
    if scale + digits > 38:
        return pa.string()
    return pa.decimal128(scale + digits, scale)


__all__ = [
    "CANCELED",
    "Backend",
    "BackendError",
    "EmbeddedBackend",
    "RemoteBackend",
    "Result",
    "RowError",
    "open_backend",
    "quote_ident",
]
