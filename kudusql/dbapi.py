"""PEP 249 (DB-API 2.0) driver for an embedded kudusql database.

    import kudusql
    conn = kudusql.connect("data-dir")
    cur = conn.cursor()
    cur.execute("INSERT INTO t VALUES (%s, %s)", (1, "a"))
    cur.execute("SELECT * FROM t WHERE k > %(lo)s", {"lo": 0})
    cur.fetchall(); cur.fetch_arrow_table(); cur.description

- paramstyle "pyformat" (`%s` and `%(name)s`, as psycopg); `%%` is a literal percent. Without
  parameters the SQL is passed through untouched.
- Every exception carries `sqlstate` (PostgreSQL's code), `position` (1-based, or None) and
  `detail` / `hint` (or None).
  Class by SQLSTATE class: 23 IntegrityError, 22 DataError, 42 ProgrammingError, 0A
  NotSupportedError, 08/53/57 OperationalError, XX InternalError, others DatabaseError.
- A write whose rows partly fail (Kudu: each row is applied on its own) raises after the
  good rows are applied; the exception has `row_errors` (a list of `RowFailure`: ordinal,
  sqlstate, message, key) and `rowcount` (rows applied). `cursor.rowcount` is set too.
- commit() is a no-op and rollback() cannot undo anything: each statement is applied when it
  runs (see README, "Transactions").
- A primary-key point read executed again (a cached plan) returns its row as the engine read
  it, without an Arrow table, when its columns are integers, DOUBLE, text or bool
  (`PointResult.plain_rows`); `fetch_arrow_table()` and the other types build the table.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable, Sequence

import pyarrow as pa

from engine.errors import EngineError
from session import Database, Session
from planner.errors import SqlError
from planner.result import PointResult, StatementResult, row_failure_report

apilevel = "2.0"
threadsafety = 1
paramstyle = "pyformat"


class Warning(Exception):  # noqa: A001 - the name PEP 249 requires
    pass


class Error(Exception):
    def __init__(self, message: str, sqlstate: str | None = None, position: int | None = None,
                 row_errors: list | None = None, rowcount: int = -1, *,
                 detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.position = position
        self.row_errors = list(row_errors or [])
        self.rowcount = rowcount
        self.detail = detail
        self.hint = hint


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class DataError(DatabaseError):
    pass


class OperationalError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


def error_class(sqlstate: str | None) -> type[Error]:
    cls = (sqlstate or "XX")[:2]
    return {"23": IntegrityError, "22": DataError, "42": ProgrammingError,
            "0A": NotSupportedError, "08": OperationalError, "53": OperationalError,
            "57": OperationalError, "XX": InternalError, "21": ProgrammingError,
            "54": OperationalError, "55": OperationalError}.get(cls, DatabaseError)


def _internal_error(e: Exception) -> Error:
    """An unexpected exception (a bug) as the driver raises it: engine errors keep their
    SQLSTATE and message; anything else is InternalError XX000 whose message names no
    Python class (the exception is chained as __cause__ for whoever debugs it)."""
    sqlstate = getattr(e, "sqlstate", None)
    if sqlstate:
        return error_class(sqlstate)(str(e), sqlstate)
    return InternalError("internal error", "XX000",
                         hint="This is a bug in kudusql: please report the statement "
                              "(the exception is this error's __cause__).")


def _from_sql_error(e: SqlError) -> Error:
    return error_class(e.sqlstate)(e.message, e.sqlstate, e.position,
                                   detail=getattr(e, "detail", None),
                                   hint=getattr(e, "hint", None))


# -- type objects (PEP 249) ----------------------------------------------------------------
class _TypeObject:
    def __init__(self, name: str, pred):
        self.name, self._pred = name, pred

    def __eq__(self, other) -> bool:
        return isinstance(other, pa.DataType) and self._pred(other)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name


STRING = _TypeObject("STRING", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t))
BINARY = _TypeObject("BINARY", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t))
NUMBER = _TypeObject("NUMBER", lambda t: pa.types.is_integer(t) or pa.types.is_floating(t)
                     or pa.types.is_decimal(t))
DATETIME = _TypeObject("DATETIME", lambda t: pa.types.is_temporal(t))
ROWID = _TypeObject("ROWID", lambda t: False)
Date, Time, Timestamp = _dt.date, _dt.time, _dt.datetime
Binary = bytes


def convert_params(sql: str, params) -> tuple[str, list]:
    """pyformat placeholders outside quotes/comments -> $n; returns (sql, values)."""
    if params is None:
        return sql, []
    named = isinstance(params, dict)
    values: list = []
    index: dict[str, int] = {}
    out = []
    i, n = 0, len(sql)
    seq = iter(params) if not named else None
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            j = i + 1
            while j < n:
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i:j + 1])
            i = j + 1
            continue
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
            continue
        if ch == "%" and i + 1 < n:
            nxt = sql[i + 1]
            if nxt == "%":
                out.append("%")
                i += 2
                continue
            if nxt == "s" and not named:
                try:
                    values.append(next(seq))
                except StopIteration:
                    raise ProgrammingError("not enough parameters for the placeholders",
                                           "42P02") from None
                out.append(f"${len(values)}")
                i += 2
                continue
            if nxt == "(" and named:
                j = sql.find(")s", i)
                if j < 0:
                    raise ProgrammingError("malformed %(name)s placeholder", "42601")
                name = sql[i + 2:j]
                if name not in params:
                    raise ProgrammingError(f"no parameter named {name!r}", "42P02")
                if name not in index:
                    values.append(params[name])
                    index[name] = len(values)
                out.append(f"${index[name]}")
                i = j + 2
                continue
        out.append(ch)
        i += 1
    if not named and next(seq, _SENTINEL) is not _SENTINEL:
        raise ProgrammingError("more parameters than placeholders", "42P02")
    return "".join(out), values


_SENTINEL = object()


class RowFetching:
    """fetchone / fetchmany / fetchall / iteration over `self._materialize()` (a list of
    tuples) from position `self._pos`; shared by the embedded and the remote cursor."""

    arraysize = 1
    _pos = 0

    def _materialize(self) -> list[tuple]:
        raise NotImplementedError

    def fetchone(self):
        rows = self._materialize()
        if self._pos >= len(rows):
            return None
        self._pos += 1
        return rows[self._pos - 1]

    def fetchmany(self, size: int | None = None):
        rows = self._materialize()
        size = self.arraysize if size is None else size
        out = rows[self._pos:self._pos + size]
        self._pos += len(out)
        return out

    def fetchall(self):
        rows = self._materialize()
        out = rows[self._pos:]
        self._pos = len(rows)
        return out

    def __iter__(self):
        while (row := self.fetchone()) is not None:
            yield row


class Cursor(RowFetching):

    def __init__(self, conn: "Connection"):
        self.connection = conn
        self._result: StatementResult | None = None
        self._table: pa.Table | None = None
        self._point: PointResult | None = None
        self._pos = 0
        self._rows: list[tuple] | None = None
        self.rowcount = -1
        self.lastrowid = None
        self.notices: list[str] = []
        self._closed = False

    # -- execution -------------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] | dict | None = None) -> "Cursor":
        self._check()
        text, values = convert_params(sql, params)
        try:
            results = self.connection.session.execute(text, values or None)
        except SqlError as e:
            self._reset(None)
            raise _from_sql_error(e) from None
        except Exception as e:  # noqa: BLE001 - the driver's boundary: see _internal_error
            self._reset(None)
            raise _internal_error(e) from e
        last = results[-1] if results else StatementResult("EMPTY")
        self._reset(last)
        self.notices = [n for r in results for n in r.notices]
        failures = [f for r in results for f in r.row_errors]
        if failures:
            message, detail = row_failure_report(failures, last.rowcount)
            raise error_class(failures[0].sqlstate)(message, failures[0].sqlstate, None,
                                                    failures, last.rowcount, detail=detail)
        return self

    def executemany(self, sql: str, seq_of_params: Iterable) -> "Cursor":
        """`INSERT/UPSERT ... VALUES (%s, ...)` goes to the database as one Arrow batch (row
        ordinals in errors = positions in `seq_of_params`); other statements run once per
        parameter set. rowcount is the total; row failures of all sets are raised at the
        end, after every other row was applied."""
        self._check()
        seq = list(seq_of_params)
        if seq:
            converted = [convert_params(sql, p) for p in seq]
            texts = {t for t, _ in converted}
            if len(texts) == 1:
                try:
                    r = self.connection.session.execute_many(texts.pop(),
                                                              [v for _, v in converted])
                except SqlError as e:
                    self._reset(None)
                    raise _from_sql_error(e) from None
                except Exception as e:  # noqa: BLE001 - the driver's boundary
                    self._reset(None)
                    raise _internal_error(e) from e
                if r is not None:
                    self._reset(r)
                    if r.row_errors:
                        first = r.row_errors[0]
                        raise error_class(first.sqlstate)(
                            f"{len(r.row_errors)} row(s) failed; first: {first.message}",
                            first.sqlstate, None, r.row_errors, r.rowcount)
                    return self
        total, failures, last_exc = 0, [], None
        seq_of_params = seq
        for p in seq_of_params:
            try:
                self.execute(sql, p)
                total += max(self.rowcount, 0)
            except IntegrityError as e:
                total += max(e.rowcount, 0)
                failures.extend(e.row_errors)
                last_exc = e
        self.rowcount = total
        if failures:
            raise type(last_exc)(f"{len(failures)} row(s) failed; first: "
                                 f"{failures[0].message}", failures[0].sqlstate, None,
                                 failures, total)
        return self

    def _reset(self, result: StatementResult | None) -> None:
        self._result = result
        # a point read's result (PointResult) carries its row: its table is made only if
        # asked for (`_arrow`), its tuple taken as it is where the types allow
        self._point = result if type(result) is PointResult else None
        self._table = result.table if result is not None and self._point is None else None
        self._pos = 0
        self._rows = None
        self.rowcount = result.rowcount if result is not None else -1

    # -- results ---------------------------------------------------------------------------
    def _arrow(self) -> pa.Table | None:
        """The result's table (a point read's made now)."""
        if self._point is not None:
            self._table, self._point = self._point.table, None
        return self._table

    @property
    def description(self):
        schema = self._point.row_schema if self._point is not None else \
            self._table.schema if self._table is not None else None
        if schema is None:
            return None
        return [(f.name, f.type, None, None,
                 getattr(f.type, "precision", None), getattr(f.type, "scale", None), True)
                for f in schema]

    @property
    def statusmessage(self) -> str | None:
        return self._result.tag() if self._result is not None else None

    def _materialize(self) -> list[tuple]:
        if self._table is None and self._point is None:
            raise ProgrammingError("no results: the last statement returned no rows")
        if self._rows is None and self._point is not None:
            # a point read's row as it was read, where its types give the same Python
            # values as the table (PointResult.plain_rows); else from the table
            self._rows = self._point.plain_rows()
            if self._rows is None:
                self._arrow()
        if self._rows is None:
            # DB-API rows are Python tuples: one conversion per column, then zip.
            cols = [_column_values(c, f.name)
                    for c, f in zip(self._table.columns, self._table.schema)]
            self._rows = list(zip(*cols)) if cols else [()] * self._table.num_rows
        return self._rows


    def fetch_arrow_table(self) -> pa.Table:
        if self._arrow() is None:
            raise ProgrammingError("no results: the last statement returned no rows")
        t = self._table.slice(self._pos)
        self._pos = self._table.num_rows
        return t

    def setinputsizes(self, sizes) -> None:
        pass

    def setoutputsize(self, size, column=None) -> None:
        pass

    def close(self) -> None:
        self._closed = True
        self._table = self._point = None

    def _check(self) -> None:
        if self._closed:
            raise InterfaceError("cursor is closed")
        self.connection.check_open()

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Connection:
    def __init__(self, database: Database, owns: bool = True):
        self.database = database
        self._owns = owns
        self._session = database.session()
        self._closed = False

    @property
    def session(self) -> Session:
        """The session this connection's statements run in (its settings, prepared
        statements and cursors)."""
        return self._session

    def cursor(self) -> Cursor:
        self.check_open()
        return Cursor(self)

    def execute(self, sql: str, params=None) -> Cursor:
        return self.cursor().execute(sql, params)

    def commit(self) -> None:
        self.check_open()

    def rollback(self) -> None:
        """Nothing to undo: every statement was applied when it ran (Kudu semantics)."""
        self.check_open()

    def cancel(self) -> None:
        self._session.cancel()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns:
                self.database.close()

    def check_open(self) -> None:
        """InterfaceError once the connection is closed."""
        if self._closed:
            raise InterfaceError("connection is closed")

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(dsn: str, **kwargs):
    """Open the embedded database in directory `dsn` (created if missing); `kudusql.connect`
    also takes a `postgresql://` DSN (kudusql/remote.py). Keywords go to `Database.open`
    (`maintenance`, `config`, `query_mem_limit`). The directory is this process's until the
    connection is closed: another process (or a second open here) gets OperationalError
    55006 naming the owner (docs/guarantees.md)."""
    if dsn.startswith(("postgresql://", "postgres://")):
        raise InterfaceError("a postgresql:// DSN is a server: connect with kudusql.connect")
    try:
        db = Database.open(dsn, **kwargs)
    except EngineError as e:        # e.g. 55006: another process owns the directory
        raise error_class(e.sqlstate)(str(e), e.sqlstate) from None
    return Connection(db)


def _column_values(col, name: str) -> list:
    """A result column as Python values (REAL as PostgreSQL prints it). A date or timestamp
    outside Python's years 1 to 9999 (PostgreSQL's dates run to 5874897 AD: `DATE
    '9999-12-31' + 1`) is a DataError (22008, as psycopg answers), never a bare
    OverflowError."""
    if pa.types.is_interval(col.type):
        return _interval_values(col)
    if pa.types.is_float32(col.type):
        # REAL values as the shortest decimal that reads back as the same float4 (3.9, not
        # 3.9000000953674316): what PostgreSQL prints and psycopg returns. Arrow's cast to
        # text writes that form; vectorised, both casts.
        return col.cast(pa.string()).cast(pa.float64()).to_pylist()
    try:
        return col.to_pylist()
    except (OverflowError, ValueError):
        if not (pa.types.is_date(col.type) or pa.types.is_timestamp(col.type)):
            raise
        kind = "date" if pa.types.is_date(col.type) else "timestamp"
        raise DataError(f'{kind} out of range for Python in column "{name}": Python holds '
                        "years 1 to 9999 only (fetch_arrow_table() returns the value)",
                        "22008") from None


def _interval_values(col) -> list:
    """INTERVAL values as datetime.timedelta, a year counted as 365 days and a month as 30
    (as psycopg reads PostgreSQL's '9 years 3 mons'), not pyarrow's MonthDayNano tuples."""
    def days(months: int) -> int:
        years = int(months / 12)                  # toward zero, as the text's fields are
        return years * 365 + (months - 12 * years) * 30
    return [None if v is None else _dt.timedelta(
        days=days(v.months) + v.days, microseconds=v.nanoseconds // 1000)
        for v in col.to_pylist()]   # a loop per value: interval result columns are rare
