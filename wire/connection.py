"""One client connection: the v3 protocol's message flow around one `Session`.

    startup   [SSLRequest -> 'N' | 'S' + TLS] [GSSENCRequest -> 'N'] StartupMessage
              -> connection limit (FATAL 53300) -> auth (wire.auth) -> AuthenticationOk,
              ParameterStatus x 13, BackendKeyData, ReadyForQuery
              (a CancelRequest instead: cancel that backend's statement, close, no reply)
    simple    Query -> per statement: [RowDescription DataRow*] CommandComplete |
              EmptyQueryResponse | ErrorResponse (the rest skipped), then ReadyForQuery
    extended  Parse/Bind/Describe/Execute/Close, Sync -> ReadyForQuery, Flush -> send now;
              after an error every message up to Sync is skipped
    copy      COPY ... FROM STDIN: CopyInResponse, CopyData* CopyDone | CopyFail
              COPY ... TO STDOUT: CopyOutResponse, CopyData*, CopyDone

Threads: the asyncio loop only moves bytes and keeps protocol state. Everything that can
take time - running a statement, describing one, inserting a COPY chunk, encoding a big
batch - runs in the server's thread pool (`_blocking`), so one connection's query never
stalls another's, and a CancelRequest arriving on another connection can reach the
running statement (`Session.cancel` -> 57014 at its next check). The connection's state is
touched by at most one thread at a time: the loop awaits its own pool call.

Results stream batch by batch (`ServerConfig.batch_rows` rows, encoded by
wire.types.data_rows); the output is flushed every `flush_bytes` and the transport's drain
is awaited (back-pressure: a slow client slows the sender, memory stays bounded by one
batch). A portal's result is kept with a row position, so Execute with a row limit
continues it (PortalSuspended) without running the query again.

Statements: this module reads no SQL. A Query's string becomes the session's front-door
Statements (`Session.statements`, session/frontdoor.py: each parsed once by the dialect
into a node), a Parse message's text one Statement (`Session.statement`), and each runs
through `Session.run`, which dispatches on the node's type. The commands whose state is
this connection's are run by handlers registered with the session at startup
(`_register_handlers`): transaction control (wire.transaction), SET/RESET/SHOW a setting
(wire.settings), CREATE/ALTER/DROP USER (wire.auth), DECLARE/FETCH/MOVE/CLOSE/DEALLOCATE/
DISCARD (wire.portal). The node's type picks the protocol: COPY (KuduCopy) runs the copy
sub-protocol (wire.copy), an empty statement is EmptyQueryResponse, and a failed
transaction block refuses all but ROLLBACK/COMMIT (wire.transaction). SQL PREPARE /
EXECUTE run in the session; DEALLOCATE and Parse treat the session's names and the
protocol's named statements as one namespace, and `prepared_statements` lists both for
pg_prepared_statements.

Errors: a SqlError becomes an ErrorResponse with S/V/C/M/P (+D/H); a statement whose rows
partly failed (Kudu semantics: the other rows are applied) ends in an ErrorResponse naming
the failed rows instead of CommandComplete (planner.result.row_failure_report). An
unexpected exception is XX000 `internal error; see the server log` (the traceback is
logged, never sent). A malformed message is FATAL 08P01 and closes
this connection only; an unexpected exception is XX000 for that statement, logged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any, Protocol

import pyarrow as pa

from engine.errors import EngineError
from planner.commands import (
    KuduClose,
    KuduCopy,
    KuduDeclare,
    KuduDiscard,
    KuduFetch,
    KuduReset,
    KuduRole,
    KuduSet,
    KuduShowSetting,
    KuduTransaction,
)
from planner.dialect import KuduDeallocate
from planner.errors import SqlError
from planner.guard import format_bytes
from planner.result import RowFailure, StatementResult, row_failure_report
from session import QueryCanceled, Statement
from wire import auth as A
from wire import protocol as P
from wire import types as T
from wire.copy import MAX_REPORTED_FAILURES, CopyIn, CopyOut, Failure
from wire.fastpath import on_bind
from wire.pg_catalog import format_type
from wire.portal import Fetch, Portal, PreparedStatement, Rows, fetch
from wire.settings import REPORTED, Settings
from wire.transaction import TransactionState


class Host(Protocol):
    """What a connection needs from its server (wire/server.py `Server`): the listener's
    bookkeeping, the users, the thread pool and the session factory. Named here so that
    this module does not import the server that imports it."""

    config: Any
    db: Any
    users: A.UserStore
    pool: Any
    port: int
    ssl_context: Any
    session_factory: Any

    def register(self, conn: Connection) -> bool: ...
    def unregister(self, conn: Connection) -> None: ...
    def cancel(self, pid: int, secret: int) -> None: ...
    def new_backend_key(self) -> tuple[int, int]: ...
    def auth_method(self, conn: Connection) -> str: ...


log = logging.getLogger("kudusql.wire")


class Fatal(Exception):
    """End the connection after sending a FATAL ErrorResponse."""

    def __init__(self, message: str, sqlstate: str):
        super().__init__(message)
        self.message, self.sqlstate = message, sqlstate


class Closed(Exception):
    """The client went away."""


# not a statement's failure: these end the connection (handled in Connection.run)
_CONNECTION_ERRORS = (P.ProtocolViolation, Fatal, Closed, ConnectionError)


class Connection:
    def __init__(self, server: Host, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter):
        self.server = server
        self.config = server.config
        self.reader, self.writer = reader, writer
        self.decoder = P.FrontendDecoder(self.config.max_message_bytes)
        self.pushback: collections.deque = collections.deque()
        self.out: list[bytes] = []
        self.out_bytes = 0
        self.pid, self.secret = server.new_backend_key()
        self.user = ""
        self.database = ""
        self.superuser = False
        self.session = None
        self.settings: Settings | None = None
        self.tx = TransactionState()
        self.statements: dict[str, PreparedStatement] = {}
        self.portals: dict[str, Portal] = {}
        self.ext_error = False
        self.batch_off = False       # wire.fastpath: no pipelined batch until the next Sync
        self.running = False
        self.cancel_reason: str | None = None
        self.tls = False
        self.registered = False
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    # -- I/O --------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        if data:
            self.out.append(data)
            self.out_bytes += len(data)

    async def flush(self) -> None:
        if self.out:
            data = b"".join(self.out) if len(self.out) > 1 else self.out[0]
            self.out.clear()
            self.out_bytes = 0
            self.writer.write(data)
        await self.writer.drain()

    async def maybe_flush(self) -> None:
        if self.out_bytes >= self.config.flush_bytes:
            await self.flush()

    async def next_message(self) -> P.Message | None:
        """The next frontend message (None: the client closed the connection). Output is
        flushed before waiting for input, so a client that waits is never left waiting."""
        if self.pushback:
            msg = self.pushback.popleft()
            if isinstance(msg, P.ProtocolViolation):   # met while wire.fastpath looked ahead
                raise msg
            return msg
        while True:
            msg = self.decoder.next()
            if msg is not None:
                return msg
            if self.out:
                await self.flush()
            if not await self._read_more():
                return None

    async def _read_more(self) -> bool:
        """Read what the client sent next into the decoder; False once it has closed the
        connection (EOF or a socket error)."""
        try:
            data = await self.reader.read(self.config.read_bytes)
        except (ConnectionError, OSError):
            return False
        if not data:
            return False
        self.decoder.feed(data)
        return True

    # -- lifecycle --------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            if await self._startup():
                await self._serve()
        except Fatal as e:
            await self._fatal(e.message, e.sqlstate)
        except P.ProtocolViolation as e:
            await self._fatal(e.message, e.sqlstate)
        except (ConnectionError, OSError, Closed, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("connection %s (pid %d) failed", self.peer, self.pid)
            await self._fatal("internal error; see the server log", "XX000")
        finally:
            self.server.unregister(self)
            self._drop_portals(lambda p: True)
            with contextlib.suppress(Exception):   # the transport may be broken already
                self.writer.close()

    async def _fatal(self, message: str, sqlstate: str) -> None:
        with contextlib.suppress(Exception):   # the peer may be gone already
            self.send(P.error_response(P.error_fields("FATAL", sqlstate, message)))
            await self.flush()

    def cancel(self, reason: str = "user") -> None:
        """Interrupt the running statement (called on the loop thread)."""
        if self.running and self.cancel_reason is None:
            self.cancel_reason = reason
            if self.session is not None:
                self.session.cancel()

    # -- startup ----------------------------------------------------------------------------
    async def _startup(self) -> bool:
        while True:
            msg = await self.next_message()
            if msg is None:
                return False
            match msg:
                case P.SSLRequest():
                    if self.server.ssl_context is not None and not self.tls:
                        if self.decoder.buffered():
                            raise Fatal("received unencrypted data after SSL request",
                                        "08P01")
                        self.writer.write(b"S")
                        await self.writer.drain()
                        await self.writer.start_tls(self.server.ssl_context)
                        self.tls = True
                    else:
                        self.writer.write(b"N")
                        await self.writer.drain()
                case P.GSSENCRequest():
                    self.writer.write(b"N")
                    await self.writer.drain()
                case P.CancelRequest(pid=pid, secret=secret):
                    self.server.cancel(pid, secret)
                    return False
                case P.StartupMessage():
                    return await self._start_session(msg)
                case _:
                    raise Fatal("unexpected message during startup", "08P01")

    async def _start_session(self, msg: P.StartupMessage) -> bool:
        params = dict(msg.params)
        unknown = [k for k in params if k.startswith("_pq_.")]
        if msg.minor > 0 or unknown:
            self.send(P.negotiate_protocol_version(0, unknown))
            for k in unknown:
                params.pop(k)
        user = params.get("user")
        if not user:
            raise Fatal("no PostgreSQL user name specified in startup packet", "28000")
        self.user = user
        self.database = params.get("database") or user
        if self.config.require_tls and not self.tls:
            raise Fatal("this server requires SSL/TLS connections", "28000")
        if not self.server.register(self):
            raise Fatal("sorry, too many clients already", "53300")
        self.registered = True
        record = self.server.users.get(user)
        method = self.server.auth_method(self)
        if method == "trust":
            if record is None:
                raise Fatal(f'role "{user}" does not exist', "28000")
        else:
            await self._authenticate(A.authenticator(method, record, user))
        if record is not None and not record.login:
            raise Fatal(f'role "{user}" is not permitted to log in', "28000")
        self.superuser = bool(record and record.superuser)
        limit = getattr(self.server.db, "query_mem_limit", None)
        if limit is not None:       # the server's default; a startup parameter overrides it
            params.setdefault("query_mem_limit", format_bytes(limit))
        try:
            self.settings = Settings(params, user=user, superuser=self.superuser,
                                     port=self.server.port)
        except SqlError as e:
            raise Fatal(e.message, e.sqlstate) from None
        self.session = self.server.session_factory(self)
        self._register_handlers()
        self.send(P.auth_ok())
        for name in REPORTED:
            self.send(P.parameter_status(name, self.settings.values[name]))
        self.send(P.backend_key_data(self.pid, self.secret))
        self.send(P.ready_for_query(b"I"))
        await self.flush()
        log.debug("pid %d: %s connected as %s", self.pid, self.peer, user)
        return True

    async def _authenticate(self, auth) -> None:
        self.send(auth.start())
        while True:
            await self.flush()
            msg = await self.next_message()
            if msg is None:
                raise Closed()
            if not isinstance(msg, P.PasswordMessage):
                raise Fatal("expected a password response", "08P01")
            try:
                reply, done = await self._blocking(auth.step, msg.data)
            except A.AuthFailed as e:
                raise Fatal(e.message, e.sqlstate) from None
            self.send(reply)
            if done:
                return

    # -- main loop --------------------------------------------------------------------------
    async def _serve(self) -> None:
        while True:
            try:
                msg = await self.next_message()
            except P.ProtocolViolation as e:
                if e.fatal:
                    raise
                await self._soft_violation(e)
                continue
            if msg is None or isinstance(msg, P.Terminate):
                return
            if self.ext_error and not isinstance(msg, P.Sync):
                continue
            if isinstance(msg, P.Bind) and not self.batch_off and \
                    await on_bind(self, msg):
                continue
            match msg:
                case P.Query():
                    await self._on_query(msg.sql)
                case P.Parse() | P.Bind() | P.Describe() | P.Execute() | P.Close():
                    await self._extended(msg)
                case P.Sync():
                    self._on_sync()
                    await self.flush()
                case P.Flush():
                    await self.flush()
                case P.CopyData() | P.CopyDone() | P.CopyFail():
                    pass    # stray copy messages after a failed COPY: ignored (protocol)
                case P.FunctionCall():
                    self._error(SqlError("the function call protocol is not supported",
                                         "0A000"))
                    self.send(P.ready_for_query(self.tx.status))
                case _:
                    raise Fatal(f"unexpected message {type(msg).__name__}", "08P01")

    async def _soft_violation(self, e: P.ProtocolViolation) -> None:
        self._error(SqlError(e.message, e.sqlstate))
        if e.kind == b"Q":
            self.send(P.ready_for_query(self.tx.status))
        elif e.kind != b"S":
            self.ext_error = True

    # -- errors and notices -----------------------------------------------------------------
    def _error(self, exc: BaseException, offset: int = 0) -> None:
        """Send the ErrorResponse for `exc` (a failed statement)."""
        if isinstance(exc, QueryCanceled) or (isinstance(exc, SqlError)
                                              and exc.sqlstate == "57014"):
            msg = "canceling statement due to statement timeout" \
                if self.cancel_reason == "timeout" else exc.message
            fields = P.error_fields("ERROR", "57014", msg)
        elif isinstance(exc, SqlError):
            pos = exc.position + offset if exc.position is not None else None
            fields = P.error_fields("ERROR", exc.sqlstate or "XX000", exc.message,
                                    position=pos, detail=getattr(exc, "detail", None),
                                    hint=getattr(exc, "hint", None),
                                    where=getattr(exc, "where", None))
            if getattr(exc, "routine", None):
                fields["R"] = exc.routine
        elif isinstance(exc, T.ParamError):
            fields = P.error_fields("ERROR", exc.sqlstate, exc.message)
        elif isinstance(exc, EngineError):
            fields = P.error_fields("ERROR", exc.sqlstate, str(exc))
        else:
            log.error("pid %d: internal error", self.pid, exc_info=exc)
            # the exception's own text is Python's (class names, reprs): it goes to the log
            fields = P.error_fields("ERROR", "XX000", "internal error; see the server log",
                                    hint="This is a bug in kudusql: please report the "
                                         "statement and the server log entry.")
        self.send(P.error_response(fields))
        self.tx.failed()

    def _notices(self, result: StatementResult) -> None:
        for n in result.notices:
            sev = "NOTICE"
            for s in ("WARNING", "NOTICE", "INFO"):
                if n.startswith(s + ": "):
                    sev, n = s, n[len(s) + 2:]
                    break
            if result.command == "ROLLBACK" and sev == "NOTICE":
                sev = "WARNING"
            code = "01000" if sev == "WARNING" else "00000"
            self.send(P.notice_response(P.error_fields(sev, code, n)))
        if self.settings is not None:
            for k, v in self.settings.drain_changed():
                self.send(P.parameter_status(k, v))

    def _row_failure_error(self, result: StatementResult) -> None:
        message, detail = row_failure_report(result.row_errors, result.rowcount,
                                             MAX_REPORTED_FAILURES)
        self.send(P.error_response(P.error_fields("ERROR", result.row_errors[0].sqlstate,
                                                  message, detail=detail)))
        self.tx.failed()

    # -- blocking work ----------------------------------------------------------------------
    async def _blocking(self, fn, *args):
        fut = asyncio.get_running_loop().run_in_executor(self.server.pool, fn, *args)
        if not self.running:
            return await fut
        return await self._watching(fut)

    async def _watching(self, fut):
        """Await a running statement's pool call while watching the socket: when the
        client goes away (EOF, reset) the statement is canceled, stops at its next check
        (~100 ms of work, planner/guard.py) and the connection ends (Closed). Bytes that
        arrive meanwhile (pipelined messages) go to the decoder for later."""
        watch = asyncio.ensure_future(self._peer_gone())
        try:
            done, _ = await asyncio.wait({fut, watch}, return_when=asyncio.FIRST_COMPLETED)
            if fut in done or not watch.result():
                return await fut
            self.cancel("connection")
            t0 = asyncio.get_running_loop().time()
            with contextlib.suppress(Exception):      # the statement's end is not news
                await fut
            loop_time = asyncio.get_running_loop().time()
            log.info("connection %s (pid %d) lost during a statement; the statement "
                     "stopped after %.0f ms", self.peer, self.pid, (loop_time - t0) * 1000)
            raise Closed()
        finally:
            if not watch.done():
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watch         # one reader at a time: let this one finish first

    async def _peer_gone(self) -> bool:
        """True once the client has closed the connection; False if it sent so much while
        the statement ran that watching stops (the decoder keeps what it sent)."""
        while self.decoder.buffered() < 4 * self.config.read_bytes:
            if not await self._read_more():
                return True
        return False

    def _begin_statement(self):
        """Start the statement clock: cancel requests apply and statement_timeout runs."""
        self.running = True
        self.cancel_reason = None
        if self.session is not None:
            self.session.reset_cancel()    # a cancel that came after the last one ended
        if self.settings is not None and self.session is not None:
            self.session.query_mem_limit = self.settings.query_mem_limit_bytes
        ms = self.settings.statement_timeout_ms if self.settings is not None else 0
        if ms > 0:
            return asyncio.get_running_loop().call_later(ms / 1000, self.cancel, "timeout")
        return None

    def _end_statement(self, timer) -> None:
        if timer is not None:
            timer.cancel()
        self.running = False

    def _check_canceled(self) -> None:
        if self.cancel_reason is not None:
            raise QueryCanceled("canceling statement due to user request")

    # -- statements (run in the pool) --------------------------------------------------------
    def _register_handlers(self) -> None:
        """The session commands whose state is this connection's: the session dispatches
        their nodes (planner/commands.py) to these."""
        h = self.session.handlers
        h[KuduTransaction] = self._transaction
        h[KuduSet] = h[KuduReset] = h[KuduShowSetting] = self._setting
        h[KuduRole] = lambda stmt, params: self.server.users.execute(stmt.node, self.user)
        h[KuduDeclare] = self._declare
        h[KuduFetch] = self._fetch
        h[KuduClose] = self._close
        h[KuduDeallocate] = self._deallocate
        h[KuduDiscard] = self._discard

    def _dispatch(self, stmt: Statement, params: list | None,
                  stream: bool = True) -> StatementResult:
        """Run one statement (not COPY) through the session. With `stream`, a SELECT may
        come back as a stream of batches (Rows reads both)."""
        self._settle_streams()
        return self.session.run(stmt, params, stream=stream)

    def _transaction(self, stmt: Statement, params) -> StatementResult:
        r = self.tx.execute(stmt.node, self.session)
        if r.command in ("COMMIT", "ROLLBACK") and not self.tx.in_block:
            self._end_transaction()
        return r

    def _setting(self, stmt: Statement, params) -> StatementResult:
        return self.settings.execute(stmt.node)

    def _fetch(self, stmt: Statement, params) -> StatementResult:
        f = Fetch.of(stmt.node)
        portal = self.portals.get(f.name)
        if portal is None:
            raise SqlError(f'cursor "{f.name}" does not exist', "34000")
        r = fetch(portal, f)
        if portal.binary:
            r.info["binary"] = True
        return r

    def _close(self, stmt: Statement, params) -> StatementResult:
        name = stmt.node.args.get("name")
        if name is None:
            self._drop_portals(lambda p: True)
            return StatementResult("CLOSE CURSOR ALL")
        if name not in self.portals:
            raise SqlError(f'cursor "{name}" does not exist', "34000")
        self._drop_portals(lambda p: p.name == name)
        return StatementResult("CLOSE CURSOR")

    def _deallocate(self, stmt: Statement, params) -> StatementResult:
        """One namespace, as in PostgreSQL: the protocol's named statements and the
        session's SQL-level PREPAREs."""
        node = stmt.node
        prepared = self.session.prepared
        if node.this is None:
            self.statements = {k: v for k, v in self.statements.items() if k == ""}
            prepared.clear()
            return StatementResult("DEALLOCATE ALL")
        name = node.this.name if node.this.args.get("quoted") else node.this.name.lower()
        if self.statements.pop(name, None) is None and prepared.pop(name, None) is None:
            raise SqlError(f'prepared statement "{name}" does not exist', "26000")
        return StatementResult("DEALLOCATE")

    def _discard(self, stmt: Statement, params) -> StatementResult:
        what = stmt.node.args.get("what") or ""
        if what == "ALL":
            if self.tx.in_block:
                raise SqlError("DISCARD ALL cannot run inside a transaction block", "25001")
            self.settings.reset_all()
            self.statements.clear()
            self._drop_portals(lambda p: True)
        return StatementResult(f"DISCARD {what}".strip())

    def _drop_portals(self, which) -> None:
        for name in [k for k, p in self.portals.items() if which(p)]:
            self.portals.pop(name).close()

    def _run(self, stmt: Statement, params: list | None
             ) -> tuple[StatementResult | None, Rows | None]:
        """`_dispatch`, then the first batch of rows read in the same pool call: a small
        result is then complete without another trip to the pool. The statement is parsed
        here (off the event loop) if it was not yet; (None, None) for a COPY, which the
        caller runs (its sub-protocol)."""
        self.tx.check(stmt)
        if isinstance(stmt.node, KuduCopy):
            return None, None
        result = self._dispatch(stmt, params)
        rows = Rows(result)
        rows.fill(self.config.batch_rows)
        return result, rows

    def _end_transaction(self) -> None:
        self._drop_portals(lambda p: not p.hold)

    def _settle_streams(self) -> None:
        """Before the session runs another statement, portals still streaming (suspended
        by a row limit) read their remaining rows into memory."""
        for p in self.portals.values():
            if p.rows is not None and p.rows.streaming:
                p.rows.materialize()

    def _declare(self, stmt: Statement, params: list | None) -> StatementResult:
        d = stmt.node.args
        if not d.get("hold") and not self.tx.in_block:
            raise SqlError("DECLARE CURSOR can only be used in transaction blocks", "25P01")
        if d["name"] in self.portals:
            raise SqlError(f'cursor "{d["name"]}" already exists', "42P03")
        try:
            result = self._dispatch(Statement.parsed(d["query_text"], d.get("query")), params,
                                    stream=False)
        except SqlError as e:
            if e.position is not None:
                e.position += d["query_offset"]
            raise
        if result.table is None:
            raise SqlError(f"cannot open {result.command} query as cursor", "42P11")
        binary = bool(d.get("binary"))
        self.portals[d["name"]] = Portal(d["name"], None, [], (1,) if binary else (), result,
                                         hold=bool(d.get("hold")), cursor=True, binary=binary)
        return StatementResult("DECLARE CURSOR")

    def _describe_sql(self, stmt: Statement) -> tuple[list, pa.Schema | None]:
        """(parameter Arrow types, result schema) without running the statement."""
        node = stmt.node
        if node is None:
            return [], None
        if isinstance(node, KuduShowSetting):
            return [], self.settings.execute(node).table.schema   # SHOW is side-effect free
        if isinstance(node, KuduDeclare):
            types, _ = self._describe_sql(Statement.parsed(node.args["query_text"],
                                                           node.args.get("query")))
            return types, None
        if isinstance(node, KuduFetch):
            p = self.portals.get(node.args["name"])
            if p is not None and p.result is not None and p.result.table is not None:
                return [], p.result.table.schema
            return [], None
        types, schema = self.session.describe(stmt)
        return list(types), schema

    def _describe_statement(self, stmt: PreparedStatement) -> None:
        if stmt.described:
            return
        types, schema = self._describe_sql(stmt.statement)
        n = max(len(stmt.param_oids), len(types))
        oids, arrow = [], []
        for i in range(n):
            client = stmt.param_oids[i] if i < len(stmt.param_oids) else 0
            t = types[i] if i < len(types) else None
            if client:
                oids.append(client)
                arrow.append(T.arrow_type_for(client) or t)
            elif t is not None and not pa.types.is_null(t):
                oids.append(T.type_oid(t)[0])
                arrow.append(t)
            else:
                oids.append(T.TEXT)
                arrow.append(None)
        stmt.param_types = arrow
        stmt.param_desc_oids = oids
        stmt.schema = schema
        stmt.result_oids = [T.type_oid(f.type) for f in schema] if schema is not None else None
        stmt.described = True

    # -- simple query -----------------------------------------------------------------------
    async def _on_query(self, sql: str) -> None:
        body = sql.strip()
        try:
            if ";" in body.rstrip(";"):
                stmts = self.session.statements(sql)
            else:
                stmts = [Statement(body.rstrip(";").rstrip(), len(sql) - len(sql.lstrip()))] \
                    if body.rstrip(";").strip() else []
        except SqlError as e:
            self._error(e)
            self.send(P.ready_for_query(self.tx.status))
            return
        if not stmts:
            self.send(P.empty_query_response())
        for stmt in stmts:
            if not await self._run_simple(stmt):
                break
        self.send(P.ready_for_query(self.tx.status))

    async def _run_simple(self, stmt: Statement) -> bool:
        timer = self._begin_statement()
        try:
            result, rows = await self._blocking(self._run, stmt, None)
            if result is None:
                return await self._copy(stmt, stmt.offset, None)
            return await self._send_result(result, None, None, describe=True, rows=rows)
        except _CONNECTION_ERRORS:
            raise
        except Exception as e:  # noqa: BLE001 - one statement failed; the connection lives
            self._error(e, stmt.offset)
            return False
        finally:
            self._end_statement(timer)

    async def _send_result(self, result: StatementResult, formats: list[int] | None,
                           announced: list | None, *, describe: bool,
                           rows: Rows | None = None, limit: int = 0) -> bool:
        """Notices, [RowDescription], DataRows (at most `limit`, 0 = all, read from `rows`),
        then CommandComplete or the row-failure error. Returns False on failure; when the
        limit is reached, sends PortalSuspended instead and returns True."""
        self._notices(result)
        if result.command == "EMPTY":
            self.send(P.empty_query_response())
            return True
        if rows is None:
            rows = Rows(result)
        sent = 0
        if rows.schema is not None:
            if formats is None:
                formats = [1 if result.info.get("binary") else 0] * len(rows.schema)
            if describe:
                self.send(P.row_description(T.field_descriptions(rows.schema, formats,
                                                                 announced)))
            sent = await self._stream(rows, formats, announced, limit)
            if limit > 0 and sent == limit:
                self.send(P.portal_suspended())
                return True
        if result.row_errors:
            self._row_failure_error(result)
            return False
        if rows.schema is not None and result.command in ("SELECT", "FETCH"):
            self.send(P.command_complete(f"{result.command} {sent}"))
        else:
            self.send(P.command_complete(result.tag()))
        return True

    def _encoded(self, rows: Rows, want: int, formats: list[int], announced):
        """(rows, DataRow bytes) of the next batch; None at the end (may run a scan)."""
        batch = rows.take(want)
        if batch is None:
            return None
        if announced is not None:
            batch = T.conform(batch, announced)
        return batch.num_rows, T.data_rows(batch, formats)

    async def _pipelined(self, step, offload):
        """Async iterator over `step()` results up to the first None. A step runs in the
        pool when `offload()` says so (a scan to pull, or a big batch to encode), and then
        the next step starts there as soon as the current result is handed out: the batch
        after this one is encoded while this one is written and drained, so a fast client
        never waits for the encoder (double buffering). Steps never overlap (`Rows` is read
        by one thread at a time); leaving early waits for a step in flight."""
        pending = None
        try:
            while True:
                self._check_canceled()
                if pending is not None:
                    item, pending = await pending, None
                else:
                    item = await self._blocking(step) if offload() else step()
                if item is None:
                    return
                if offload():
                    pending = asyncio.ensure_future(self._blocking(step))
                yield item
        finally:
            if pending is not None:
                with contextlib.suppress(Exception):   # the error that ends us is reported
                    await pending

    async def _stream(self, rows: Rows, formats: list[int], announced: list | None,
                      limit: int) -> int:
        """DataRows batch by batch, flushing (and waiting for the client) as output builds
        up; returns how many rows were sent."""
        step_rows, inline = self.config.batch_rows, self.config.inline_encode_rows
        taken = 0

        def want() -> int:
            return step_rows if limit <= 0 else min(step_rows, limit - taken)

        def step():
            nonlocal taken
            if want() <= 0:
                return None
            got = self._encoded(rows, want(), formats, announced)
            if got is not None:
                taken += got[0]
            return got

        def offload() -> bool:
            return rows.streaming or want() >= inline and rows.remaining() >= inline

        sent = 0
        if not offload():
            # a small result already in memory (a point query's row): encoded right here,
            # without the pipeline's generator and pool machinery
            while (got := step()) is not None:
                sent += got[0]
                self.send(got[1])
            await self.maybe_flush()
            return sent
        async with contextlib.aclosing(self._pipelined(step, offload)) as batches:
            async for n, data in batches:
                sent += n
                self.send(data)
                await self.maybe_flush()
        return sent

    # -- extended protocol ------------------------------------------------------------------
    async def _extended(self, msg) -> None:
        try:
            match msg:
                case P.Parse():
                    self._on_parse(msg)
                case P.Bind():
                    await self._on_bind(msg)
                case P.Describe():
                    await self._on_describe(msg)
                case P.Execute():
                    await self._on_execute(msg)
                case P.Close():
                    self._on_close(msg)
        except _CONNECTION_ERRORS:
            raise
        except Exception as e:  # noqa: BLE001 - reported to the client, then skip to Sync
            self._error(e)
            self.ext_error = True

    def prepared_statements(self) -> list[dict]:
        """pg_prepared_statements: the session's PREPAREs and the named protocol ones."""
        rows = [{"name": p.name, "statement": p.statement,
                 "prepare_time": p.prepare_time, "from_sql": True,
                 "parameter_types": list(p.type_names),
                 "generic_plans": 0, "custom_plans": 0}
                for p in getattr(self.session, "prepared", {}).values()]
        rows += [{"name": st.name, "statement": st.sql, "from_sql": False,
                  "parameter_types": [format_type(o, -1) for o in
                                      (st.param_desc_oids or st.param_oids)],
                  "generic_plans": 0, "custom_plans": 0}
                 for st in self.statements.values() if st.name]
        return rows

    def _on_parse(self, msg: P.Parse) -> None:
        if msg.name and (msg.name in self.statements
                         or msg.name in getattr(self.session, "prepared", {})):
            raise SqlError(f'prepared statement "{msg.name}" already exists', "42P05")
        # parsed when first needed (Describe, Bind, Execute), once
        stmt = PreparedStatement(msg.name, msg.sql, msg.param_oids,
                                 self.session.statement(msg.sql))
        self.statements[msg.name] = stmt
        self.send(P.parse_complete())

    def _statement(self, name: str) -> PreparedStatement:
        stmt = self.statements.get(name)
        if stmt is None:
            if name == "":
                raise SqlError("unnamed prepared statement does not exist", "26000")
            raise SqlError(f'prepared statement "{name}" does not exist', "26000")
        return stmt

    async def _ensure_described(self, stmt: PreparedStatement) -> None:
        if not stmt.described:
            if stmt.kind == "plain":
                await self._blocking(self._describe_statement, stmt)
            else:
                self._describe_statement(stmt)

    async def _on_bind(self, msg: P.Bind) -> None:
        stmt = self._statement(msg.statement)
        if msg.portal and msg.portal in self.portals:
            raise SqlError(f'portal "{msg.portal}" already exists', "42P03")
        params = await self._bind_params(stmt, msg)
        self._drop_portals(lambda p: p.name == msg.portal)
        self.portals[msg.portal] = Portal(msg.portal, stmt, params, msg.result_formats)
        self.send(P.bind_complete())

    async def _bind_params(self, stmt: PreparedStatement, msg: P.Bind) -> list:
        """The Bind's parameter values, checked and decoded (also wire.fastpath's)."""
        values = msg.params
        n = len(values)
        pf = msg.param_formats
        if len(pf) not in (0, 1, n) and not (n == 0):
            raise SqlError(f"bind message has {len(pf)} parameter formats but {n} "
                           "parameters", "08P01")
        fmts = [0] * n if not pf else ([pf[0]] * n if len(pf) == 1 else list(pf))
        for f in fmts:
            if f not in (0, 1):
                raise SqlError(f"unsupported format code: {f}", "22023")
        for f in msg.result_formats:
            if f not in (0, 1):
                raise SqlError(f"unsupported format code: {f}", "22023")
        oids = list(stmt.param_oids) + [0] * max(0, n - len(stmt.param_oids))
        need = any(v is not None and not oids[i] for i, v in enumerate(values))
        if need:
            await self._ensure_described(stmt)
        if stmt.described and n != len(stmt.param_desc_oids):
            raise SqlError(f'bind message supplies {n} parameters, but prepared statement '
                           f'"{stmt.name}" requires {len(stmt.param_desc_oids)}', "08P01")
        params = []
        for i, v in enumerate(values):
            arrow = stmt.param_types[i] if stmt.described else None
            params.append(T.decode_param(v, fmts[i], oids[i], arrow))
        return params

    def _portal(self, name: str) -> Portal:
        p = self.portals.get(name)
        if p is None:
            raise SqlError(f'portal "{name}" does not exist' if name else
                           "unnamed portal does not exist", "34000")
        return p

    async def _on_describe(self, msg: P.Describe) -> None:
        if msg.kind == "S":
            stmt = self._statement(msg.name)
            await self._ensure_described(stmt)
            self.send(P.parameter_description(stmt.param_desc_oids))
            if stmt.schema is None:
                self.send(P.no_data())
            else:
                self.send(P.row_description(T.field_descriptions(
                    stmt.schema, None, stmt.result_oids)))
                stmt.rows_announced = True
            return
        portal = self._portal(msg.name)
        if portal.result is None:
            stmt = portal.statement
            if stmt.rows_announced or stmt.kind != "plain":
                await self._ensure_described(stmt)
                schema = stmt.schema
                portal.announced = stmt.result_oids
            else:
                # run it now: the result's own types describe it, and it is planned once
                await self._run_portal(portal)
                schema = portal.rows.schema
        else:
            schema = (portal.rows or Rows(portal.result)).schema
        if schema is None:
            self.send(P.no_data())
            return
        if portal.announced is None:
            portal.announced = [T.type_oid(f.type) for f in schema]
        fmts = T.result_formats(portal.result_formats, len(schema))
        self.send(P.row_description(T.field_descriptions(schema, fmts, portal.announced)))

    async def _run_portal(self, portal: Portal) -> None:
        stmt = portal.statement
        if portal.params and stmt.kind == "plain" and self._run_point(portal):
            return
        timer = self._begin_statement()
        try:
            portal.result, portal.rows = await self._blocking(self._run, stmt.statement,
                                                              portal.params)
        finally:
            self._end_statement(timer)

    def _run_point(self, portal: Portal) -> bool:
        """Run a cached primary-key point read right here on the event loop (see
        Session.execute_point): it is bounded in-memory work, cheaper than the trip to the
        thread pool and back. False (nothing done) for anything else, or while a portal still
        streams (the session must first settle it, which is not bounded work)."""
        if any(p.rows is not None and p.rows.streaming for p in self.portals.values()):
            return False
        stmt = portal.statement
        self.tx.check(stmt.statement)
        result = self.session.execute_point(stmt.sql, portal.params)
        if result is None:
            return False
        portal.result, portal.rows = result, Rows(result)
        portal.rows.fill(self.config.batch_rows)
        return True

    async def _on_execute(self, msg: P.Execute) -> None:
        portal = self._portal(msg.portal)
        stmt = portal.statement
        if portal.result is None:
            if stmt.kind == "empty":
                self.send(P.empty_query_response())
                return
            if stmt.kind == "copy":
                timer = self._begin_statement()
                try:
                    self.tx.check(stmt.statement)
                    if not await self._copy(stmt.statement, 0, portal):
                        self.ext_error = True
                finally:
                    self._end_statement(timer)
                portal.result = StatementResult("COPY")
                portal.executed = True
                return
            await self._run_portal(portal)
        elif portal.executed and (portal.rows or Rows(portal.result)).schema is None:
            raise SqlError(f'portal "{portal.name}" cannot be run', "55000")
        portal.executed = True
        result = portal.result
        if portal.rows is None:
            portal.rows = Rows(result)
            if portal.cursor and portal.pos:
                portal.rows.take(portal.pos)
        rows = portal.rows
        ncols = len(rows.schema) if rows.schema is not None else 0
        fmts = T.result_formats(portal.result_formats, ncols)
        announced = portal.announced
        if announced is None and stmt is not None and stmt.rows_announced:
            announced = stmt.result_oids
        if announced is not None and rows.schema is not None and \
                len(announced) != len(rows.schema):
            err = SqlError("cached plan must not change result type", "0A000")
            err.routine = "RevalidateCachedQuery"
            raise err
        timer = self._begin_statement()
        try:
            ok = await self._send_result(result, fmts, announced, describe=False, rows=rows,
                                         limit=max(msg.max_rows, 0))
        finally:
            self._end_statement(timer)
        if not ok:
            self.ext_error = True

    def _on_close(self, msg: P.Close) -> None:
        if msg.kind == "S":
            stmt = self.statements.pop(msg.name, None)
            if stmt is not None:
                self._drop_portals(lambda p: p.statement is stmt)
        else:
            self._drop_portals(lambda p: p.name == msg.name)
        self.send(P.close_complete())

    def _on_sync(self) -> None:
        self.ext_error = False
        self.batch_off = False
        if not self.tx.in_block:
            # the implicit transaction ends: its portals go (WITH HOLD cursors stay)
            self._drop_portals(lambda p: not p.hold)
        self.send(P.ready_for_query(self.tx.status))

    # -- COPY -------------------------------------------------------------------------------
    async def _copy(self, stmt: Statement, offset: int, portal: Portal | None) -> bool:
        try:
            node = stmt.node
        except SqlError as e:
            self._error(e, offset)
            return False
        spec = node.args["spec"]
        if spec.direction == "to":
            query = Statement.parsed(node.args["query_text"], node.args.get("query"))
            return await self._copy_out(spec, query, offset + spec.query_offset)
        return await self._copy_in(spec)

    def _copy_target(self, spec):
        catalog = self.server.db.catalog
        if not catalog.has_table(spec.table):
            raise SqlError(f'relation "{spec.table}" does not exist', "42P01")
        table = catalog.table(spec.table)
        schema = table.schema
        cols = list(spec.columns) if spec.columns else list(schema.names)
        for c in cols:
            if not schema.has_column(c):
                raise SqlError(f'column "{c}" of relation "{spec.table}" does not exist',
                               "42703")
        if len(set(cols)) != len(cols):
            raise SqlError("column specified more than once", "42701")
        return table, cols, [schema.column(c).arrow_type for c in cols]

    def _copy_insert(self, table, chunk, failures: list[Failure]) -> int:
        failures.extend(chunk.failures)
        if chunk.table.num_rows == 0:
            return 0
        r = table.insert(chunk.table)
        keys = table.schema.key_names
        for e in r.row_errors:
            line = int(chunk.lines[e.index])
            if e.code == "ALREADY_PRESENT":
                vals = ", ".join(str(v) for v in (e.key or ()))
                msg = (f'duplicate key value violates the primary key of "{table.name}": '
                       f"Key ({', '.join(keys)})=({vals}) already exists")
            else:
                msg = e.message
            failures.append(Failure(line, e.sqlstate, msg))
        return r.num_applied

    async def _copy_in(self, spec) -> bool:
        try:
            table, cols, types = await self._blocking(self._copy_target, spec)
            reader = CopyIn(spec, cols, types)
        except (SqlError, EngineError) as e:
            self._error(e)
            return False
        self.send(P.copy_in_response(spec.format == "binary", len(cols)))
        await self.flush()
        applied, failures = 0, []
        error: BaseException | None = None
        while True:
            try:
                msg = await self.next_message()
            except P.ProtocolViolation as e:
                if e.fatal:
                    raise
                error = SqlError(e.message, e.sqlstate)
                break
            if msg is None:
                raise Closed()
            if isinstance(msg, P.CopyData):
                try:
                    self._check_canceled()
                    for chunk in reader.feed(msg.data):
                        applied += await self._blocking(self._copy_insert, table, chunk,
                                                        failures)
                except _CONNECTION_ERRORS:
                    raise                   # the client went away: the connection ends
                except Exception as e:  # noqa: BLE001 - ends the COPY with an error
                    error = e
                    break
            elif isinstance(msg, P.CopyDone):
                break
            elif isinstance(msg, P.CopyFail):
                error = SqlError(f"COPY from stdin failed: {msg.message}", "57014")
                break
            elif isinstance(msg, (P.Flush, P.Sync)):
                continue
            else:
                self.pushback.append(msg)
                error = SqlError(f"unexpected message type 0x{ord(type(msg).__name__[0]):02X}"
                                 " during COPY from stdin", "08P01")
                break
        if error is None:
            try:
                for chunk in reader.finish():
                    applied += await self._blocking(self._copy_insert, table, chunk, failures)
            except _CONNECTION_ERRORS:
                raise
            except Exception as e:  # noqa: BLE001 - reported as the COPY's error
                error = e
        if error is not None:
            if isinstance(error, SqlError) and applied and error.sqlstate != "57014":
                error.message += (f" ({applied} row{'' if applied == 1 else 's'} "
                                  f"{'was' if applied == 1 else 'were'} applied before the "
                                  "error)")
            self._error(error)
            return False
        if failures:
            failures.sort(key=lambda f: f.line)
            first = failures[0]
            message, detail = row_failure_report(
                [RowFailure(f.line, f.sqlstate, f"line {f.line}: {f.message}")
                 for f in failures], applied, MAX_REPORTED_FAILURES)
            self.send(P.error_response(P.error_fields(
                "ERROR", first.sqlstate, f"COPY {spec.table}: {message}", detail=detail,
                where=f"COPY {spec.table}, line {first.line}")))
            self.tx.failed()
            return False
        self.send(P.command_complete(f"COPY {applied}"))
        return True

    async def _copy_out(self, spec, query: Statement, offset: int) -> bool:
        try:
            result = await self._blocking(self._dispatch, query, None)
        except SqlError as e:
            self._error(e, offset if spec.query is not None else 0)
            return False
        rows = Rows(result)
        if rows.schema is None:
            self._error(SqlError(f"COPY query must return rows ({result.command} does not)",
                                 "0A000"))
            return False
        self.send(P.copy_out_response(spec.format == "binary", len(rows.schema)))
        out = CopyOut(spec, rows.schema.names)
        self.send(out.header())

        def encoded():
            b = rows.take(self.config.batch_rows)
            return None if b is None else out.batch(b)

        def offload() -> bool:
            return rows.streaming or rows.remaining() >= self.config.inline_encode_rows

        try:
            async with contextlib.aclosing(self._pipelined(encoded, offload)) as chunks:
                async for data in chunks:
                    self.send(data)
                    await self.maybe_flush()
        except _CONNECTION_ERRORS:
            rows.close()            # the client went away: the connection ends, no error
            raise
        except Exception as e:  # noqa: BLE001 - ends copy-out mode with the error
            rows.close()
            self._error(e)
            return False
        self.send(out.trailer())
        self.send(P.copy_done())
        self.send(P.command_complete(f"COPY {rows.sent}"))
        return True
