"""The protocol core: one client's v3 backend as a sans-I/O state machine.

    be = Backend(host, config, pid, secret, conn=adapter, peer="127.0.0.1:5000")
    be.feed(data)                    # what the client sent (any cut of its byte stream)
    effects = be.handle_next()       # the next message's effects, or NEED_INPUT
    effects = be.handle(message)     # or a decoded frontend message (wire/protocol.py)
    # perform each effect (wire/effects.py), send its value back in; then write
    # be.data_to_send() to the client

`Backend` holds everything one connection knows - the receive buffer, the phase
(startup, auth, ready), the Session, settings, transaction status, prepared statements
and portals, the error state of an extended-protocol pipeline - and turns input into
bytes (`out`) and effects (run this in the thread pool, wait for a write's durability,
wait for the client, read the next message, arm a statement timer). It imports no
asyncio and owns no socket: wire/connection.py is the asyncio Protocol that feeds it,
drives the effects and writes; tests/wire/test_backend.py drives it with messages alone.

Input: `feed(bytes)` appends to the receive buffer (`inbuf[rpos:]`); `handle_next()`
scans the next frame where it lies (`protocol.scan`). A Bind is decoded into its fields
(`protocol.decode_bind`, no message object) and offered to the hot cases first
(wire/fastpath.py `on_bind`: prepared point reads and key writes, pipelined INSERT
batches, answered from the buffer - part of this state machine, on this state, switched
off with `ServerConfig.fast_paths=False`); whatever they do not take, and every other
frame, becomes its message object and goes through `handle`. `next_message()` is the
message-at-a-time view (RECEIVE, COPY's sub-protocol), `unread(message)` puts one back.

The message flow, one file per part of the protocol:

    startup   wire/startup.py       SSLRequest, StartupMessage, authentication rounds
    simple    wire/simple_query.py  Query -> per statement: [RowDescription DataRow*]
                                    CommandComplete | EmptyQueryResponse | ErrorResponse
                                    (the rest skipped), then ReadyForQuery
    extended  wire/extended_query.py Parse/Bind/Describe/Execute/Close, Sync ->
                                    ReadyForQuery, Flush -> send now; after an error every
                                    message up to Sync is skipped (`ext_error`)
    results   wire/results.py       rows out: notices, RowDescription, DataRows batch by
                                    batch with back-pressure, CommandComplete
    copy      wire/copy_flow.py     COPY FROM STDIN / TO STDOUT sub-protocols (formats:
                                    wire/copy.py)

Threads: everything that can take time - running or describing a statement, a COPY chunk,
encoding a big batch, a SCRAM step - is a `Call` effect, run in the server's thread pool,
so one connection's query never stalls another's and a CancelRequest arriving on another
connection can reach the running statement (`cancel` -> `Session.cancel` -> 57014 at its
next check). The state here is touched by one thread at a time: the adapter awaits its own
pool call before it drives the core on. The functions handed to `Call` (`run`,
`describe_statement`, ...) are the only code here that runs in the pool.

Statements: the core reads no SQL. A Query's string becomes the session's front-door
Statements (`Session.statements`, session/frontdoor.py: each parsed once by the dialect
into a node), a Parse message's text one Statement (`Session.single_statement`), and each runs
through `Session.run`, which dispatches on the node's type. The commands whose state is
this connection's are run by handlers registered with the session once it is established
(`established`): transaction control (wire.transaction), SET/RESET/SHOW a setting
(wire.settings), CREATE/ALTER/DROP USER (wire.auth), DECLARE/FETCH/MOVE/CLOSE/DEALLOCATE/
DISCARD (here, on wire.portal's objects). The node's type picks the protocol: COPY
(KuduCopy) runs the copy sub-protocol, an empty statement is EmptyQueryResponse, and a
failed transaction block refuses all but ROLLBACK/COMMIT (wire.transaction). SQL PREPARE /
EXECUTE run in the session; DEALLOCATE and Parse treat the session's names and the
protocol's named statements as one namespace, and `prepared_statements` lists both for
pg_prepared_statements.

Errors: a SqlError becomes an ErrorResponse with S/V/C/M/P (+D/H); a statement whose rows
partly failed (Kudu semantics: the other rows are applied) ends in an ErrorResponse naming
the failed rows instead of CommandComplete (planner.result.row_failure_report). An
unexpected exception is XX000 `internal error; see the server log` (the traceback is
logged, never sent). A malformed message is FATAL 08P01 and closes this connection only
(`Fatal`, `Closed`: wire/effects.py).

Hot cases (wire/fastpath.py) are functions of this object: they read its buffer and
state and write its output like the handlers above, and use `on_sync`, `drop_portals`,
`error`, `start_statement` / `end_statement`. No pool call for a point read or a key
write: both are bounded in-memory work on the event loop; a key write's wait for its
WAL fsync is the `Durable` effect.
"""
from __future__ import annotations

import collections
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
from planner.result import StatementResult, row_failure_report
from planner.query import QUERY_TYPES
from session import QueryCanceled, Statement
from wire import auth as A
from wire import extended_query, fastpath, simple_query, startup
from wire import protocol as P
from wire import pg_types as T
from wire.copy import MAX_REPORTED_FAILURES
from wire.effects import FLUSH, NEED_INPUT, CancelTimer, Fatal, Timer
from wire.pg_catalog import format_type
from wire.portal import Fetch, Portal, PreparedStatement, Rows, fetch
from wire.settings import Settings, canonical, parse_bool_setting
from wire.transaction import TransactionState

log = logging.getLogger("kudusql.wire")

_FLUSH = (FLUSH,)
_READY = {s: P.ready_for_query(s) for s in (b"I", b"T", b"E")}   # pre-encoded


class Host(Protocol):
    """What a connection needs from its server (wire/server.py `Server`): the listener's
    bookkeeping, the users, the thread pool and the session factory. Named here so that
    the connection's modules do not import the server that imports them. `conn` is the
    object the server knows the connection by (the adapter, wire/connection.py)."""

    config: Any
    db: Any
    users: A.UserStore
    pool: Any
    port: int
    ssl_context: Any
    session_factory: Any

    def register(self, conn: Any) -> bool: ...
    def unregister(self, conn: Any) -> None: ...
    def cancel(self, pid: int, secret: int) -> None: ...
    def new_backend_key(self) -> tuple[int, int]: ...
    def auth_method(self, conn: Any) -> str: ...


class Backend:
    def __init__(self, host: Host, config, pid: int, secret: int, *, conn: Any = None,
                 peer: str = ""):
        self.host = host
        self.config = config
        self.pid, self.secret = pid, secret
        self.conn = conn if conn is not None else self
        self.peer = peer
        self.phase = startup.STARTUP
        self.closed = False            # Terminate, or a CancelRequest was served
        self.out: list[bytes] = []
        self.out_bytes = 0
        self.user = ""
        self.database = ""
        self.superuser = False
        self.tls = False
        self.registered = False
        self.authenticator = None
        self.startup_params: dict = {}
        self.login_record = None
        self.session = None
        self.settings: Settings | None = None
        # the access mode is the session's (session/access_mode.py): one check for every
        # front end; this connection's default_transaction_read_only is handed to it
        self.tx = TransactionState(lambda: self.session.access)
        self.statements: dict[str, PreparedStatement] = {}
        self.portals: dict[str, Portal] = {}
        self.ext_error = False
        self.batch_off = False       # wire.fastpath: no pipelined batch until the next Sync
        self.running = False
        self.cancel_reason: str | None = None
        # input: what the client sent and the core has not consumed, `inbuf[rpos:]`
        self.inbuf: bytes | bytearray = b""
        self.rpos = 0
        self.startup_framing = True    # no type byte before the StartupMessage
        self.pushback: collections.deque = collections.deque()   # Unread messages
        self.hot = bool(getattr(config, "fast_paths", True))     # wire/fastpath.py on
        self.looking_ahead = False     # a batch's look-ahead waits for more input
        self.look_ahead_over = False   # ... and is told to stop waiting (the adapter)
        self.run_scan = None           # ... and how far it read (wire/fastpath.py `_run`)
        self.max_message = getattr(config, "max_message_bytes", P.DEFAULT_MAX_MESSAGE)

    # -- output -----------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        if data:
            self.out.append(data)
            self.out_bytes += len(data)

    def data_to_send(self) -> bytes:
        """The bytes produced so far, taken out."""
        out = self.out
        data = b"".join(out) if len(out) != 1 else out[0]
        out.clear()
        self.out_bytes = 0
        return data

    def maybe_flush(self):
        """Effects: a flush once the pending output reaches `flush_bytes`."""
        if self.out_bytes >= self.config.flush_bytes:
            yield FLUSH

    # -- input --------------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Bytes the client sent, in order. Kept as they came while nothing else is
        buffered (the common case: whole messages per read, no copy)."""
        buf = self.inbuf
        if self.rpos >= len(buf):
            self.inbuf, self.rpos = data, 0
            return
        if type(buf) is not bytearray:
            buf = self.inbuf = bytearray(memoryview(buf)[self.rpos:])
            self.rpos = 0
        elif self.rpos:
            del buf[:self.rpos]
            self.rpos = 0
        buf += data

    def buffered(self) -> int:
        """Bytes received and not consumed yet."""
        return len(self.inbuf) - self.rpos

    def unread(self, msg) -> None:
        """A message put back: it is the next one handled (COPY's Unread)."""
        self.pushback.appendleft(msg)

    def next_message(self) -> P.Message | None:
        """The next complete message (a put-back one first), None until more bytes
        arrive; a malformed one raises its ProtocolViolation, having been consumed."""
        if self.pushback:
            return self.pushback.popleft()
        frame = P.scan(self.inbuf, self.rpos, self.startup_framing, self.max_message)
        if frame is None:
            return None
        kind, start, end = frame
        body = self.inbuf[start:end]
        self.rpos = end
        msg = P.parse(kind, body if type(body) is bytes else bytes(body))
        if kind == P.STARTUP and type(msg) is P.StartupMessage:
            self.startup_framing = False
        return msg

    def handle_next(self):
        """The effects of the next input, as `handle` returns them, or NEED_INPUT when no
        complete message is buffered (or a batch's look-ahead waits for more, see
        wire/fastpath.py: then NEED_INPUT too, and `look_ahead_over` ends the wait). A
        Bind goes to the hot cases first (wire/fastpath.py `on_bind`), straight from the
        receive buffer; whatever they do not answer, and every other message, is decoded
        into its message object and handled. Non-fatal protocol violations (bad UTF-8)
        are answered here; fatal ones raise."""
        try:
            if self.pushback or self.startup_framing or self.phase != startup.READY:
                msg = self.next_message()
                if msg is None:
                    return NEED_INPUT
                return self.handle(msg)
            frame = P.scan(self.inbuf, self.rpos, False, self.max_message)
            if frame is None:
                return NEED_INPUT
            kind, start, end = frame
            if kind != 66:              # not a Bind
                body = self.inbuf[start:end]
                self.rpos = end
                return self.handle(P.parse(kind, body if type(body) is bytes
                                           else bytes(body)))
            try:
                fields = P.decode_bind(self.inbuf, start, end)
            except P.ProtocolViolation:
                self.rpos = end
                raise
            if self.hot and not self.ext_error and not self.batch_off:
                effects = fastpath.on_bind(self, fields, end)
                if effects is not None:
                    return effects
            self.rpos = end
            return self.handle(P.Bind(*fields))
        except P.ProtocolViolation as e:
            if e.fatal or self.phase != startup.READY:
                raise
            self.violation(e)
            return ()

    # -- messages ---------------------------------------------------------------------------
    def handle(self, msg: P.Message):
        """The effects of one frontend message: a generator, or a tuple (often empty)."""
        if self.phase != startup.READY:
            return startup.handle(self, msg)
        if self.ext_error and type(msg) is not P.Sync:
            return ()
        match msg:
            case P.Query():
                return simple_query.on_query(self, msg.sql)
            case P.Parse() | P.Bind() | P.Describe() | P.Execute() | P.Close():
                return extended_query.handle(self, msg)
            case P.Sync():
                self.on_sync()
                return _FLUSH
            case P.Flush():
                return _FLUSH
            case P.Terminate():
                self.closed = True
                return ()
            case P.CopyData() | P.CopyDone() | P.CopyFail():
                return ()  # stray copy messages after a failed COPY: ignored (protocol)
            case P.FunctionCall():
                self.error(SqlError("the function call protocol is not supported", "0A000"))
                self.send(P.ready_for_query(self.tx.status))
                return ()
            case _:
                raise Fatal(f"unexpected message {type(msg).__name__}", "08P01")

    def violation(self, e: P.ProtocolViolation) -> None:
        """A message that was framed right but did not decode (not fatal: 22021)."""
        self.error(SqlError(e.message, e.sqlstate))
        if e.kind == b"Q":
            self.send(P.ready_for_query(self.tx.status))
        elif e.kind != b"S":
            self.ext_error = True

    def fatal(self, message: str, sqlstate: str) -> None:
        """The FATAL ErrorResponse that ends the connection (the adapter then closes)."""
        self.send(P.error_response(P.error_fields("FATAL", sqlstate, message)))

    def on_sync(self) -> None:
        self.ext_error = False
        self.batch_off = False
        self.look_ahead_over = False
        tx = self.tx
        if self.portals and not tx.in_block:
            # the implicit transaction ends: its portals go (WITH HOLD cursors stay)
            self.drop_portals(lambda p: not p.hold)
        self.send(_READY[tx.status])

    def close(self) -> None:
        """The connection ended: release the portals (and their open scans)."""
        self.drop_portals(lambda p: True)

    # -- errors and notices -----------------------------------------------------------------
    def error(self, exc: BaseException, offset: int = 0) -> None:
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

    def notices(self, result: StatementResult) -> None:
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

    def row_failure_error(self, result: StatementResult) -> None:
        message, detail = row_failure_report(result.row_errors, result.rowcount,
                                             MAX_REPORTED_FAILURES)
        self.send(P.error_response(P.error_fields("ERROR", result.row_errors[0].sqlstate,
                                                  message, detail=detail)))
        self.tx.failed()

    # -- the statement clock ----------------------------------------------------------------
    def cancel(self, reason: str = "user") -> None:
        """Interrupt the running statement (called on the adapter's thread)."""
        if self.running and self.cancel_reason is None:
            self.cancel_reason = reason
            if self.session is not None:
                self.session.cancel()

    def begin_statement(self) -> int:
        """Start the statement clock (cancel requests apply from here); returns the
        statement_timeout in milliseconds (0: none) for the caller to arm."""
        self.running = True
        self.cancel_reason = None
        if self.session is not None:
            self.session.reset_cancel()    # a cancel that came after the last one ended
        self.hand_settings_to_session()
        return self.settings.statement_timeout_ms if self.settings is not None else 0

    def time_zone(self) -> str:
        """The session's TimeZone (a PostgreSQL zone name), which text results show
        timestamptz values in."""
        return self.session.time_zone if self.session is not None else "UTC"

    def float_digits(self) -> int:
        """extra_float_digits, which text results show floats with (<= 0: fewer digits,
        planner/expr/float_text.py `float_digits_text`)."""
        return self.settings.extra_float_digits if self.settings is not None else 1

    def hand_settings_to_session(self) -> None:
        """The settings the session acts on, from this connection's (wire.settings keeps
        them): the query memory limit, the TimeZone statements run and timestamptz
        values print in, and extra_float_digits for `::text` of floats. Cheap when nothing
        changed (the session compares)."""
        if self.settings is not None and self.session is not None:
            self.session.query_mem_limit = self.settings.query_mem_limit_bytes
            self.session.set_time_zone(self.settings.values["TimeZone"])
            self.session.float_digits = self.settings.extra_float_digits

    def start_statement(self):
        """Effects: `begin_statement`, and a Timer for statement_timeout; returns the
        timer's handle (None without a timeout) for `end_statement`."""
        ms = self.begin_statement()
        if ms > 0:
            return (yield Timer(ms / 1000))
        return None

    def end_statement(self, timer):
        if timer is not None:
            yield CancelTimer(timer)
        self.running = False

    def check_canceled(self) -> None:
        if self.cancel_reason is not None:
            raise QueryCanceled("canceling statement due to user request")

    # -- the session's commands that are this connection's ----------------------------------
    def established(self) -> None:
        """The session exists (startup done): make it and register the handlers of the
        session commands whose state is this connection's (planner/commands.py nodes)."""
        self.session = self.host.session_factory(self.conn)
        self.session.access.default_of = self.settings   # default_transaction_read_only
        h = self.session.handlers
        h[KuduTransaction] = self._transaction
        h[KuduSet] = h[KuduReset] = h[KuduShowSetting] = self._setting
        h[KuduRole] = lambda stmt, params: self.host.users.execute(stmt.node, self.user)
        h[KuduDeclare] = self._declare
        h[KuduFetch] = self._fetch
        h[KuduClose] = self._close
        h[KuduDeallocate] = self._deallocate
        h[KuduDiscard] = self._discard
        self.hand_settings_to_session()     # a TimeZone given in the StartupMessage
        self.phase = startup.READY

    def _transaction(self, stmt: Statement, params) -> StatementResult:
        r = self.tx.execute(stmt.node, self.session)
        if r.command in ("COMMIT", "ROLLBACK") and not self.tx.in_block:
            self.end_transaction()
        return r

    def _setting(self, stmt: Statement, params) -> StatementResult:
        node = stmt.node
        name = node.args.get("name")
        if name is not None and canonical(name) == "transaction_read_only" and \
                not node.args.get("noop"):
            # the transaction's access mode (wire/transaction.py), not a stored setting
            # (SHOW reads it: `Settings.live`)
            if isinstance(node, KuduSet):
                value = node.args.get("value")
                on = value is not None and parse_bool_setting("transaction_read_only",
                                                              value)
                notices = self.tx.set_read_only(on, node.verb == "SET TRANSACTION")
                return StatementResult("SET", notices=notices)
        r = self.settings.execute(node)
        self.hand_settings_to_session()     # the next statement of this string runs in it
        return r

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
            self.drop_portals(lambda p: True)
            return StatementResult("CLOSE CURSOR ALL")
        if name not in self.portals:
            raise SqlError(f'cursor "{name}" does not exist', "34000")
        self.drop_portals(lambda p: p.name == name)
        return StatementResult("CLOSE CURSOR")

    def _deallocate(self, stmt: Statement, params) -> StatementResult:
        """One namespace, as in PostgreSQL: the protocol's named statements and the
        session's SQL-level PREPAREs."""
        node = stmt.node
        prepared = self.session.prepared
        if node.this is None:
            for k in [k for k in self.statements if k != ""]:
                del self.statements[k]
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
            self.drop_portals(lambda p: True)
        return StatementResult(f"DISCARD {what}".strip())

    def _declare(self, stmt: Statement, params: list | None) -> StatementResult:
        d = stmt.node.args
        if not d.get("hold") and not self.tx.in_block:
            raise SqlError("DECLARE CURSOR can only be used in transaction blocks", "25P01")
        if d["name"] in self.portals:
            raise SqlError(f'cursor "{d["name"]}" already exists', "42P03")
        query = Statement.parsed(d["query_text"], d.get("query"))
        if query.node is not None and not isinstance(query.node, QUERY_TYPES):
            # PostgreSQL's grammar takes a SELECT / VALUES only: refused before anything
            # runs (a DELETE or EXPLAIN ANALYZE of one would be performed, then refused)
            text = d["query_text"]
            lead = len(text) - len(text.lstrip())
            raise SqlError(f'syntax error at or near "{text.split(None, 1)[0]}"', "42601",
                           position=d["query_offset"] + lead + 1)
        try:
            result = self.dispatch(query, params, stream=False)
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

    def drop_portals(self, which) -> None:
        for name in [k for k, p in self.portals.items() if which(p)]:
            self.portals.pop(name).close()

    def end_transaction(self) -> None:
        self.drop_portals(lambda p: not p.hold)

    def settle_streams(self) -> None:
        """Before the session runs another statement, portals still streaming (suspended
        by a row limit) read their remaining rows into memory."""
        for p in self.portals.values():
            if p.rows is not None and p.rows.streaming:
                p.rows.materialize()

    def streaming(self) -> bool:
        """Whether a portal is suspended in the middle of a stream."""
        return any(p.rows is not None and p.rows.streaming for p in self.portals.values())

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

    # -- statements (these run in the pool: Call effects) ------------------------------------
    def dispatch(self, stmt: Statement, params: list | None,
                 stream: bool = True) -> StatementResult:
        """Run one statement (not COPY) through the session. With `stream`, a SELECT may
        come back as a stream of batches (Rows reads both)."""
        self.settle_streams()
        return self.session.run(stmt, params, stream=stream)

    def run(self, stmt: Statement, params: list | None
            ) -> tuple[StatementResult | None, Rows | None]:
        """`dispatch`, then the first batch of rows read in the same pool call: a small
        result is then complete without another trip to the pool. The statement is parsed
        here (off the event loop) if it was not yet; (None, None) for a COPY, which the
        caller runs (its sub-protocol)."""
        self.tx.check(stmt)
        if isinstance(stmt.node, KuduCopy):
            return None, None
        result = self.dispatch(stmt, params)
        rows = Rows(result)
        rows.fill(self.config.batch_rows)
        return result, rows

    def describe_sql(self, stmt: Statement) -> tuple[list, pa.Schema | None]:
        """(parameter Arrow types, result schema) without running the statement."""
        node = stmt.node
        if node is None:
            return [], None
        if isinstance(node, KuduShowSetting):
            return [], self.settings.execute(node).table.schema   # SHOW is side-effect free
        if isinstance(node, KuduDeclare):
            types, _ = self.describe_sql(Statement.parsed(node.args["query_text"],
                                                          node.args.get("query")))
            return types, None
        if isinstance(node, KuduFetch):
            p = self.portals.get(node.args["name"])
            if p is not None and p.result is not None and p.result.table is not None:
                return [], p.result.table.schema
            return [], None
        types, schema = self.session.describe(stmt)
        return list(types), schema

    def describe_statement(self, stmt: PreparedStatement) -> None:
        if stmt.described:
            return
        types, schema = self.describe_sql(stmt.statement)
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
