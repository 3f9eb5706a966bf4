"""The remote DB-API form: `kudusql.connect("postgresql://user:pw@host:port/db")` speaks to
`kudusql serve` (or any PostgreSQL server) with asyncpg, behind the same PEP 249 surface as
the embedded driver (kudusql/dbapi.py).

asyncpg is asynchronous; the connection owns a private event loop on a background thread
and each call waits for its coroutine. Parameters use the same pyformat style (`%s`,
`%(name)s`), converted to `$n`. Results are fetched whole (`fetch_arrow_table()` builds an
Arrow table from them). Errors keep the server's SQLSTATE and position and map to the same
exception classes; a statement whose rows partly failed (Kudu semantics on the server)
raises with the server's message, `detail` and `hint` (the other failed rows are in the
detail text, not a structured `row_errors` list). commit/rollback: autocommit, as the embedded driver.
"""

from __future__ import annotations

import asyncio
import threading

import pyarrow as pa

from kudusql import dbapi


class RemoteConnection:
    def __init__(self, dsn: str, **kwargs):
        import asyncpg
        # the exception class asyncpg raises for an error the server sent
        self.server_error: type[Exception] = asyncpg.PostgresError
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="kudusql-remote")
        self._thread.start()
        try:
            self.asyncpg_connection = self.run(asyncpg.connect(dsn, **kwargs))
        except BaseException:
            self._stop()
            raise
        self._closed = False

    def run(self, coro):
        """Wait for `coro` on the connection's event loop (its thread) and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def cursor(self) -> "RemoteCursor":
        if self._closed:
            raise dbapi.InterfaceError("connection is closed")
        return RemoteCursor(self)

    def execute(self, sql: str, params=None) -> "RemoteCursor":
        return self.cursor().execute(sql, params)

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.run(self.asyncpg_connection.close())
            finally:
                self._stop()

    def __enter__(self) -> "RemoteConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteCursor(dbapi.RowFetching):
    def __init__(self, conn: RemoteConnection):
        self.connection = conn
        self.description = None
        self.rowcount = -1
        self._rows: list[tuple] | None = None
        self._names: list[str] = []
        self._pos = 0

    def execute(self, sql: str, params=None) -> "RemoteCursor":
        """One statement through the extended protocol (typed parameters and results); a
        parameterless string of several statements through the simple protocol."""
        text, values = dbapi.convert_params(sql, params)
        run, conn = self.connection.run, self.connection.asyncpg_connection
        self._pos = 0
        try:
            try:
                stmt = run(conn.prepare(text))
            except self.connection.server_error as e:
                if values or getattr(e, "sqlstate", None) != "42601" or \
                        "multiple commands" not in str(e):
                    raise
                status = run(conn.execute(text))          # several statements, no params
                self._rows, self.description, self._names = None, None, []
                last = (status or "").split()[-1:] or ["-1"]
                self.rowcount = int(last[0]) if last[0].isdigit() else -1
                return self
            records = run(stmt.fetch(*values))
        except self.connection.server_error as e:
            raise self._error(e) from None
        attrs = stmt.get_attributes()
        if attrs:
            self._names = [a.name for a in attrs]
            self._rows = [tuple(r) for r in records]
            self.description = [(a.name, a.type.name, None, None, None, None, True)
                                for a in attrs]
            self.rowcount = len(self._rows)
        else:
            self._rows, self.description, self._names = None, None, []
            last = (stmt.get_statusmsg() or "").split()[-1:] or ["-1"]
            self.rowcount = int(last[0]) if last[0].isdigit() else -1
        return self

    @staticmethod
    def _error(e) -> dbapi.Error:
        sqlstate = getattr(e, "sqlstate", None)
        pos = getattr(e, "position", None)
        msg = getattr(e, "message", None) or str(e)
        detail = getattr(e, "detail", None)
        return dbapi.error_class(sqlstate)(msg, sqlstate, int(pos) if pos else None,
                                           detail=detail, hint=getattr(e, "hint", None))

    def executemany(self, sql: str, seq_of_params) -> "RemoteCursor":
        total = 0
        for p in seq_of_params:
            self.execute(sql, p)
            total += max(self.rowcount, 0)
        self.rowcount = total
        return self

    def _materialize(self) -> list[tuple]:
        if self._rows is None:
            raise dbapi.ProgrammingError("no results: the last statement returned no rows")
        return self._rows

    def fetch_arrow_table(self) -> pa.Table:
        rows = self.fetchall()
        cols = list(zip(*rows)) if rows else [[] for _ in self._names]
        return pa.table({n: pa.array(list(c)) for n, c in zip(self._names, cols)}) \
            if len(set(self._names)) == len(self._names) else \
            pa.Table.from_arrays([pa.array(list(c)) for c in cols], names=self._names)

    def close(self) -> None:
        self._rows = None
