"""The outcome of one SQL statement, shared by the DB-API driver, the wire server and the shell.

Contract:
- `command` is the PostgreSQL command verb ("SELECT", "INSERT", "CREATE TABLE", ...);
  `tag()` renders the CommandComplete tag ("INSERT 0 5", "SELECT 3", "CREATE TABLE").
- Row-returning statements set `table` (a `pyarrow.Table`, possibly with zero rows but always
  with the result's column names and Arrow types); others leave it None.
- `rowcount`: rows returned (SELECT/SHOW/...) or rows affected (INSERT/UPSERT/UPDATE/DELETE);
  -1 when not meaningful (DDL).
- `row_errors`: per-row failures of a DML statement that still applied the other rows (Kudu
  semantics). Each is a `RowFailure` (1-based ordinal of the row in the statement, SQLSTATE,
  message, key tuple). The session raises them (IntegrityError in the DB-API) after the rows
  that succeeded are applied; `rowcount` is then the number applied.
- `notices`: informational messages (PostgreSQL NoticeResponse).
- `PointResult` (a StatementResult) is a primary-key point read's result carrying its one
  row as Python values (`row`, or None for no row): `table` is built from it only when
  asked for, so a consumer that takes Python values (the DB-API's row tuples,
  `plain_rows`) builds no Arrow per call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa


@dataclasses.dataclass(frozen=True)
class RowFailure:
    ordinal: int          # 1-based position of the row in the statement's rows
    sqlstate: str         # 23505 duplicate key, 23502 not null, 22P02, 22003, 23514, ...
    message: str          # names the row: its ordinal and key
    key: tuple | None = None


def rows_text(n: int) -> str:
    """`1 row`, `0 rows`, `5 rows`."""
    return f"{n} row" if n == 1 else f"{n} rows"


def row_failure_report(errors: list[RowFailure], applied: int,
                       max_listed: int = 10) -> tuple[str, str]:
    """(message, detail) of a statement some of whose rows failed, as the wire server, the
    DB-API and the shell report it: the message is the first failure (and how many more);
    the detail lists the other failures, never the first again, and says how many rows
    were applied: `2 rows were applied (each row is applied on its own).`"""
    first = errors[0]
    more = len(errors) - 1
    message = first.message + (f" (and {more} more failed {'row' if more == 1 else 'rows'})"
                               if more else "")
    lines = [f.message for f in errors[1:1 + max_listed]]
    if more > max_listed:
        lines.append(f"... and {more - max_listed} more")
    applied = max(applied, 0)
    lines.append(f"{rows_text(applied)} {'was' if applied == 1 else 'were'} applied (each "
                 "row is applied on its own).")
    return message, "\n".join(lines)


@dataclasses.dataclass
class StatementResult:
    command: str
    table: pa.Table | None = None
    rowcount: int = -1
    row_errors: list[RowFailure] = dataclasses.field(default_factory=list)
    notices: list[str] = dataclasses.field(default_factory=list)
    # EXPLAIN ANALYZE / diagnostics: whatever the executor wants to expose (plain data).
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    # A streamed SELECT (Session.execute_iter): `table` is None, `schema` is set and
    # `stream` yields RecordBatches; consume it before asking for the next result.
    stream: Iterator[pa.RecordBatch] | None = None
    schema: pa.Schema | None = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as RecordBatches, streamed or from `table`."""
        if self.stream is not None:
            return self.stream
        if self.table is None:
            return iter(())
        return iter(self.table.to_batches(max_chunksize=65536))

    def tag(self) -> str:
        if self.command == "INSERT" or self.command == "UPSERT":
            return f"INSERT 0 {max(self.rowcount, 0)}"
        if self.command in ("SELECT", "UPDATE", "DELETE", "COPY", "FETCH", "MOVE"):
            return f"{self.command} {max(self.rowcount, 0)}"
        return self.command

    @staticmethod
    def rows(command: str, table: pa.Table, **kw) -> "StatementResult":
        return StatementResult(command, table=table, rowcount=table.num_rows, **kw)


# Arrow types whose Python value, as a point read carries it, is exactly what
# `pa.Table.to_pylist` of the result gives (the same value and Python type): integers,
# float8, text and bool. Others (REAL as PostgreSQL prints it, dates past Python's years,
# intervals, decimals) go through the table.
def _plain_type(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_float64(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_boolean(t))


class PointResult(StatementResult):
    """A SELECT's result of at most one row carried as Python values (`row`: a tuple in
    `schema`'s column order, None when no row matched); `table` is made from it on first
    use (one `maker` per column: Python value -> one-element Array of its type,
    planner.point_read.one_value_array). `plain_rows()` gives the DB-API's row tuples
    without a table when every column's type has the same Python value either way."""

    def __init__(self, row: tuple | None, schema: pa.Schema, makers, plain: bool):
        # the dataclass fields set directly: no default factories' frames per point read
        self.command = "SELECT"
        self.rowcount = 0 if row is None else 1
        self.row_errors = []
        self.notices = []
        self.info = {}
        self.stream = None
        self.schema = None          # not a stream (StatementResult.schema's meaning)
        self.row = row
        self.row_schema = schema
        self._makers = makers
        self._plain = plain
        self._table = None

    @property
    def table(self) -> pa.Table:
        t = self._table
        if t is None:
            row = self.row
            if row is None:
                t = self.row_schema.empty_table()
            else:
                t = pa.Table.from_arrays([m(v) for m, v in zip(self._makers, row)],
                                         schema=self.row_schema)
            self._table = t
        return t

    @table.setter
    def table(self, value) -> None:
        self._table = value

    def plain_rows(self) -> list[tuple] | None:
        """The rows as the DB-API returns them (`[row]` or `[]`) when every column's type
        carries the same Python value as the table would give (`_plain_type`), else None
        (then read `table`)."""
        if not self._plain:
            return None
        return [] if self.row is None else [self.row]

    @staticmethod
    def plain_schema(schema: pa.Schema) -> bool:
        """True when `plain_rows` may answer for results of this schema."""
        return all(_plain_type(f.type) for f in schema)
