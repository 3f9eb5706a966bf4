"""Wire fast paths: prepared point reads and key writes, and pipelined batches of one
prepared INSERT.

Point reads
-----------
A prepared `SELECT cols FROM t WHERE pk = $1` executed as Bind, [Describe portal],
Execute, Sync (asyncpg `fetch`, psycopg, JDBC after prepareThreshold) is the hot path of
an OLTP client. When the session has it cached as a point read of plain columns
(`Session.point_read`, planner/fastpath.py) and the statement was described, the Bind's
key goes straight to `Table.lookup` and the reply - BindComplete, [RowDescription],
DataRow, CommandComplete, ReadyForQuery - is built here from the row's Python values
(`wire.types.value_encoder`), with the RowDescription and the encoders made once per
statement and result formats: no Portal, no StatementResult, no Arrow table. Anything it
cannot answer exactly as the ordinary path would (no compiled point read, a key that
needs SQL's conversion rules, a transaction block, a column whose announced
type differs from the result's, a type the value encoders do not cover) takes the
ordinary path, having consumed nothing. tests/wire/test_fastpath.py runs both paths on
generated tables and keys and compares every reply.

Key writes
----------
A prepared `UPDATE t SET c = <expr>, ... WHERE pk = $1` or `DELETE FROM t WHERE pk = $1`
executed as Bind, [Describe portal], Execute, Sync, run before so that its row-matching
query is cached as a point read (planner.dml `_matching`), is run here: the
session's `key_write_rows` gives the matching row (key and SET values, computed by the
executor's evaluator: SQL semantics and errors unchanged), `update_data` rounds it as the
ordinary UPDATE does, and `Table.write_small` writes it on the engine's small-write path;
the reply is BindComplete, [NoData], CommandComplete `UPDATE n` / `DELETE n`,
ReadyForQuery, built here. No Portal, no StatementResult per op, no statement dispatch,
no AST copy. The one thread hop left is the write itself (it waits for its WAL fsync,
which must not block the event loop). Anything this path cannot answer exactly as the
ordinary one would - no cached matching point read, a transaction block, RETURNING,
a value the small-write path will not take with certainty (it then writes nothing), an
error while matching - goes the ordinary way, having consumed and written nothing; the
ordinary path then runs the statement from the start (the matching read is repeated,
it changes nothing). An UPDATE / DELETE on the small path fails only for a key that is
not live, which both paths count as 0 rows. tests/wire/test_fastpath_writes.py runs both
paths (`fast_paths=False`) on random statements and compares every reply and the final
tables.

Pipelined batches
-----------------
A driver's run of Bind/Execute pairs of one prepared INSERT or
UPSERT, sent before one Sync, applied as one engine write.

asyncpg and psycopg `executemany`, JDBC `executeBatch` and SQLAlchemy's bulk inserts all
send one prepared `INSERT ... VALUES ($1, ..., $n)` as many

    [Parse (the same unnamed statement again)] Bind [Describe portal] Execute

before a single Sync. Run one by one, each Execute is a statement of its own with the
engine's fixed cost per write (~0.6-1 ms): a few hundred rows per second. Here the
messages the client has already sent (the decoder's buffer: nothing is waited for) are
looked at together when the first Bind arrives, and the parameter sets of the run are
written as one Arrow batch (`Session.execute_many(..., in_order=True)`, the engine's
`Table.write(..., in_order=True)`).

Outcomes are those of running each Execute in order:
- each message gets its own reply, in order: ParseComplete, BindComplete, NoData (the
  portal's Describe: an INSERT returns no rows), CommandComplete `INSERT 0 1`;
- the engine applies the sets up to the first one that fails and none after it; that
  set and everything after it go back to the connection's message queue
  (`Connection.pushback`) and run through the ordinary path one by one (`batch_off` until
  the next Sync), which gives the failing Execute its exact ErrorResponse and, per the
  protocol, skips the rest up to Sync. A Bind whose values do not decode ends the batch
  the same way: it is replayed and fails in the ordinary path.
- anything else (another statement, a named portal that exists, a transaction block in
  the failed state, a portal still streaming, a statement the session does not batch:
  `execute_many` returns None) is left to the ordinary path untouched.

The unnamed (or named) portal is left as the last Execute would have left it: run, its
statement and parameters those of the last set.

Where this lives: a stated exception to the sans-I/O core
----------------------------------------------------------
The protocol core (wire/backend.py and its parts) is sans-I/O: `Backend.handle(message)`
returns bytes and effects, knows no asyncio, and is driven with messages alone by
tests/wire/test_backend.py. This module is the one deliberate exception: asyncio code on
the adapter (wire/connection.py), which calls `on_bind(conn, bind)` for a Bind before the
core sees it, and which reads and writes the connection's state through the adapter's
members, private ones included. It is kept here on purpose (issue 17, fast data): these
paths exist to remove the per-operation fixed cost - in issue 17's profile of a point
select, ~150 of ~205 us of event-loop time were wire and object plumbing - so they build
the reply bytes directly on the event loop and skip what the core costs per message (a
Portal and a StatementResult, effect objects, generator round trips; for a batch, one
statement per Execute). The look-ahead also reads the socket itself (`_read_more`),
which the core cannot. The price is coupling to the adapter: a change to the core's state
behind these members must keep their meaning. tests/wire/test_fastpath.py,
test_fastpath_writes.py and test_pipelined_batch.py run each fast path and the ordinary
path (`fast_paths=False`) and compare every reply, which is what catches a drift.

The adapter members used are the `Adapter` protocol below (wire/connection.py's
Connection has them; most forward to the core's state). The fast paths name the protocol,
not the Connection class, so this module does not import the adapter that imports it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from engine.tablet.write_op import OpType
from planner.errors import SqlError
from planner.result import StatementResult
from planner.dml import update_data
from wire import protocol as P
from wire import types as T
from wire.portal import Portal, Rows


class Adapter(Protocol):
    """What the fast paths use of the asyncio adapter (wire/connection.py Connection)."""

    config: Any             # the server's settings: `fast_paths`
    batch_off: bool         # the batch look-ahead is off until the next Sync
    pushback: deque         # messages the look-ahead read and gives back, in order
    decoder: Any            # the message decoder: `next()`

    @property
    def statements(self) -> dict: ...       # name -> the core's prepared statement
    @property
    def portals(self) -> dict: ...          # name -> Portal
    @property
    def tx(self) -> Any: ...                # the transaction block: status, in_block, check()
    @property
    def session(self) -> Any: ...           # session.Session

    def send(self, data: bytes) -> None: ...
    async def flush(self) -> None: ...
    async def _read_more(self) -> bool: ...     # read the socket into the decoder
    async def _bind_params(self, stmt, msg) -> list: ...    # the core's bind_params
    async def _blocking(self, fn, *args): ...   # a call in the server's thread pool
    def _begin_statement(self) -> Any: ...      # statement timeout timer, core's `running`
    def _end_statement(self, timer) -> None: ...
    def _drop_portals(self, which) -> None: ...
    def _on_sync(self) -> None: ...


MAX_BATCH = 8192          # parameter sets written as one batch at most
READ_WAIT = 0.002         # s: how long the look-ahead waits for more of a run (see there)


_RUN = (P.Parse, P.Bind, P.Describe, P.Execute)


async def _look_ahead(conn: Adapter) -> list:
    """The messages received after the current one, taken out of the queue (a malformed
    one is kept as its ProtocolViolation, raised when the queue reaches it).

    While everything received so far could still belong to the run (no Sync, Flush or
    other message yet), more is read as long as it keeps arriving within READ_WAIT: a
    driver sends a 5,000-row batch in many TCP segments, and one write for all of it
    beats one per segment. A client owes no reply before its Sync or Flush (protocol),
    so waiting for the end of the run cannot stall one; a pause ends the wait anyway."""
    out = list(conn.pushback)
    conn.pushback.clear()
    while len(out) < 4 * MAX_BATCH:
        try:
            msg = conn.decoder.next()
        except P.ProtocolViolation as e:
            out.append(e)
            break
        if msg is not None:
            out.append(msg)
            if not isinstance(msg, _RUN):
                break
            continue
        try:
            if not await asyncio.wait_for(conn._read_more(), READ_WAIT):
                break                               # the client closed the connection
        except asyncio.TimeoutError:
            break
    return out


def _items(first: P.Bind, stmt, msgs: list) -> tuple[list[tuple[int, int]], int]:
    """The run of [Parse] Bind [Describe P] Execute items at the head of `first` + `msgs`:
    ([(start, end) message spans into [first] + msgs], messages used)."""
    seq = [first] + msgs
    spans = []
    i = 0
    while i < len(seq) and len(spans) < MAX_BATCH:
        start = j = i
        m = seq[j]
        if isinstance(m, P.Parse):
            if not (m.name == stmt.name == "" and m.sql == stmt.sql
                    and tuple(m.param_oids) == tuple(stmt.param_oids)):
                break
            j += 1
            m = seq[j] if j < len(seq) else None
        if not (isinstance(m, P.Bind) and m.statement == stmt.name
                and m.portal == first.portal):
            break
        j += 1
        m = seq[j] if j < len(seq) else None
        if isinstance(m, P.Describe) and m.kind == "P" and m.name == first.portal:
            j += 1
            m = seq[j] if j < len(seq) else None
        if not (isinstance(m, P.Execute) and m.portal == first.portal):
            break
        spans.append((start, j + 1))
        i = j + 1
    return spans, i


async def on_bind(conn: Adapter, bind: P.Bind) -> bool:
    """The connection's hook for a Bind (outside a failed pipeline): True when the fast
    paths here answered it and what followed it, False to take the ordinary path."""
    stmt = conn.statements.get(bind.statement)
    if stmt is None or stmt.kind != "plain" or not conn.config.fast_paths:
        return False
    verb = stmt.statement.verb
    if verb == "select":
        return await point_read(conn, stmt, bind)
    if verb == "insert":
        return await pipelined_batch(conn, bind)
    if verb is None:
        return await key_write(conn, stmt, bind)
    return False


async def pipelined_batch(conn: Adapter, first: P.Bind) -> bool:
    """Handle `first` and the pipelined run it starts as one batch; False (nothing done,
    nothing consumed) when it is not such a run."""
    stmt = conn.statements.get(first.statement)
    run = getattr(conn.session, "execute_many", None)
    if run is None or conn.tx.status == b"E" or \
            (first.portal and first.portal in conn.portals) or \
            any(p.rows is not None and p.rows.streaming for p in conn.portals.values()):
        return False
    msgs = await _look_ahead(conn)
    spans, used = _items(first, stmt, msgs)
    if len(spans) < 2:
        conn.pushback.extendleft(reversed(msgs))
        return False
    seq = [first] + msgs
    binds = [next(m for m in seq[a:b] if isinstance(m, P.Bind)) for a, b in spans]
    # decode every Bind first; one that fails ends the batch before it
    try:
        first_params = await conn._bind_params(stmt, first)
    except Exception:  # noqa: BLE001 - replayed below: the ordinary path reports it
        first_params = None
    columns, count = ([], 0) if first_params is None else \
        decode_columns(stmt, binds, first_params)
    result = None
    if count:
        timer = conn._begin_statement()
        try:
            conn.tx.check(stmt.statement)
            result = await conn._blocking(run, stmt.sql, None, True, columns)
        except SqlError:        # the session's errors (all of them: its boundary): the
            result = None       # ordinary path runs the sets one by one and reports it
        finally:
            conn._end_statement(timer)
    done = 0 if result is None else min(max(result.rowcount, 0), count)
    if done == 0:
        # nothing applied: every message, `first` aside, goes back for the ordinary path
        conn.pushback.extendleft(reversed(msgs))
        conn.batch_off = True
        return False
    # replies for the applied items, in order
    tag = P.command_complete(StatementResult(result.command, rowcount=1).tag())
    for a, b in spans[:done]:
        for m in seq[a:b]:
            if isinstance(m, P.Parse):
                conn.send(P.parse_complete())
            elif isinstance(m, P.Bind):
                conn.send(P.bind_complete())
            elif isinstance(m, P.Describe):
                conn.send(P.no_data())
            else:
                conn.send(tag)
    conn._drop_portals(lambda p: p.name == first.portal)
    last = StatementResult(result.command, rowcount=1)
    conn.portals[first.portal] = Portal(first.portal, stmt,
                                        [c[done - 1] for c in columns] if columns else [],
                                        first.result_formats, last, Rows(last),
                                        executed=True)
    # everything not applied goes back, in order, for the ordinary path
    rest_from = spans[done][0] if done < len(spans) else used
    rest = seq[rest_from:]
    conn.pushback.extendleft(reversed(rest))
    if done < len(spans):
        conn.batch_off = True
    return True


# -- the parameter columns of a run ---------------------------------------------------------
# binary formats decoded a column at a time: oid -> (big-endian numpy type, width)
_BINARY_FIXED = {20: (">i8", 8), 23: (">i4", 4), 21: (">i2", 2), 701: (">f8", 8),
                 700: (">f4", 4), 16: ("u1", 1), 1082: (">i4", 4), 1114: (">i8", 8),
                 1184: (">i8", 8)}
_TEXT_OIDS = {25, 1043, 1042, 19, 18}
_PG_EPOCH_DAYS = 10957                       # 1970-01-01 -> 2000-01-01
_PG_EPOCH_US = _PG_EPOCH_DAYS * 86_400_000_000
# Python's date/datetime range (what decoding one value accepts), relative to 2000-01-01
_DATE_DAYS = (-730119, 2921939)              # 0001-01-01 .. 9999-12-31
_TS_US = (_DATE_DAYS[0] * 86_400_000_000, (_DATE_DAYS[1] + 1) * 86_400_000_000 - 1)


def decode_columns(stmt, binds: list, first_params: list) -> tuple[list, int]:
    """The runs' parameters as one column per parameter (a pyarrow Array, or a list of
    Python values where a column is decoded value by value), and how many Binds they
    cover: those before the first one that differs in shape from the first Bind (count
    or formats) or holds a value that does not decode. The values are exactly what
    `Connection._bind_params` gives for each Bind, in the Arrow types `pa.array` infers
    from those Python values (integers int64, floats double, ...).

    Per value in Python only where a column needs it (text format, NUMERIC, ...); the
    fixed-width binary formats and binary text are converted a column at a time."""
    n = len(first_params)
    first = binds[0]
    shape = (first.param_formats, len(first.params), first.result_formats)
    count = len(binds)
    for j, b in enumerate(binds):
        if (b.param_formats, len(b.params), b.result_formats) != shape:
            count = j
            break
    pf = first.param_formats
    fmts = [0] * n if not pf else ([pf[0]] * n if len(pf) == 1 else list(pf))
    oids = list(stmt.param_oids) + [0] * max(0, n - len(stmt.param_oids))
    columns = []
    for i in range(n):
        raw = [b.params[i] for b in binds[:count]]
        arrow = stmt.param_types[i] if stmt.described else None
        oid = oids[i]
        if oid in (0, T.UNKNOWN) and arrow is not None:
            oid = T.type_oid(arrow)[0]
        col = _binary_column(raw, oid) if fmts[i] == 1 else None
        if col is None:
            col = [first_params[i]]
            try:
                for v in raw[1:]:    # a loop per value: formats without a column decoder
                    col.append(T.decode_param(v, fmts[i], oids[i], arrow))
            except Exception:  # noqa: BLE001 - this Bind fails in the ordinary path
                count = len(col)
        columns.append(col)
    return [c[:count] for c in columns], count


def _binary_column(raw: list, oid: int):
    """A column of binary-format values of type `oid` as an Arrow array, or None when it
    takes the value-by-value path (another type, a value of the wrong size, a date or
    timestamp outside Python's range, bad UTF-8: that path reports the error)."""
    if oid in _TEXT_OIDS:
        try:
            return pa.array(raw, pa.binary()).cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None
    spec = _BINARY_FIXED.get(oid)
    if spec is None:
        return None
    dtype, width = spec
    nulls = raw.count(None)
    if nulls == len(raw):
        return None                    # all NULL: pa.array infers the null type
    present = [v for v in raw if v is not None] if nulls else raw
    if set(map(len, present)) != {width}:
        return None
    values = np.frombuffer(b"".join(present), dtype=dtype)
    if oid == 16:
        values = values != 0
    elif oid in (700, 701):
        values = values.astype(np.float64)
    elif oid == 1082:
        if values.min() < _DATE_DAYS[0] or values.max() > _DATE_DAYS[1]:
            return None
        values = values.astype(np.int32) + _PG_EPOCH_DAYS
    elif oid in (1114, 1184):
        if values.min() < _TS_US[0] or values.max() > _TS_US[1]:
            return None
        values = values.astype(np.int64) + _PG_EPOCH_US
    else:
        values = values.astype(np.int64)
    mask = None
    if nulls:
        mask = np.array([v is None for v in raw])
        full = np.zeros(len(raw), dtype=values.dtype)
        full[~mask] = values
        values = full
    typ = {16: pa.bool_(), 700: pa.float64(), 701: pa.float64(), 1082: pa.date32(),
           1114: pa.timestamp("us"), 1184: pa.timestamp("us")}.get(oid, pa.int64())
    return pa.array(values, typ, mask=mask)


# -- point reads ------------------------------------------------------------------------------
_NULL = b"\xff\xff\xff\xff"
_S32 = T._S32


def _peek(conn: Adapter, n: int) -> list:
    """Up to n messages already received (not waited for), left in the queue."""
    while len(conn.pushback) < n:
        try:
            msg = conn.decoder.next()
        except P.ProtocolViolation as e:
            conn.pushback.append(e)
            break
        if msg is None:
            break
        conn.pushback.append(msg)
    return list(conn.pushback)[:n]


def _point_plan(stmt, bind: P.Bind, fast, describe: bool):
    """(RowDescription bytes or None, encoders) for this statement, result formats and
    point read, cached on the statement; None when the fast path cannot answer it."""
    key = (bind.result_formats, id(fast), describe)
    plan = stmt.fast.get(key)
    if plan is not None:
        return plan or None
    plan = ()
    schema = fast.schema
    announced = stmt.result_oids
    if stmt.rows_announced and announced is not None and len(announced) == len(schema):
        try:
            fmts = T.result_formats(bind.result_formats, len(schema))
        except T.ParamError:
            fmts = None
        if fmts is not None and all(T.type_oid(f.type)[0] == a[0]
                                    for f, a in zip(schema, announced)):
            encs = [T.value_encoder(f.type, fmt) for f, fmt in zip(schema, fmts)]
            if all(e is not None for e in encs):
                desc = P.row_description(T.field_descriptions(
                    stmt.schema, fmts, announced)) if describe else None
                plan = (desc, encs)
    if len(stmt.fast) > 16:
        stmt.fast.clear()
    stmt.fast[key] = plan
    return plan or None


async def point_read(conn: Adapter, stmt, bind: P.Bind) -> bool:
    """Bind [Describe P] Execute Sync of a cached point read, answered here (see the
    module docstring); False (nothing consumed) for anything else."""
    point = getattr(conn.session, "point_read", None)
    if point is None or conn.tx.in_block or bind.portal or conn.tx.status != b"I" or \
            not stmt.described:
        return False
    nxt = _peek(conn, 3)
    describe = bool(nxt) and isinstance(nxt[0], P.Describe) and nxt[0].kind == "P" and \
        nxt[0].name == ""
    rest = nxt[1:] if describe else nxt
    if len(rest) < 2 or not isinstance(rest[0], P.Execute) or rest[0].portal != "" or \
            not isinstance(rest[1], P.Sync):
        return False
    if any(p.rows is not None and p.rows.streaming for p in conn.portals.values()):
        return False
    try:
        params = await conn._bind_params(stmt, bind)
        found = point(stmt.sql, params)
        if found is None:
            return False
        fast, table = found
        plan = _point_plan(stmt, bind, fast, describe)
        if plan is None:
            return False
        key = fast.key_values(params)
        if key is None:
            return False
        row = table.lookup(key, fast.columns or None)
    except Exception:  # noqa: BLE001 - the ordinary path runs it and reports the error
        return False
    desc, encs = plan
    conn._drop_portals(lambda p: p.name == "")
    for _ in range(3 if describe else 2):          # the messages answered here
        conn.pushback.popleft()
    conn.send(P.bind_complete())
    if describe:
        conn.send(desc)
    if row is None:
        conn.send(_SELECT_0)
    else:
        parts = [_S16.pack(len(encs))]
        for enc, col in zip(encs, fast.plain):   # a loop per column of one row
            v = row[col]
            if v is None:
                parts.append(_NULL)
            else:
                b = enc(v)
                parts.append(_S32.pack(len(b)))
                parts.append(b)
        body = b"".join(parts)
        conn.send(b"D" + _S32.pack(len(body) + 4) + body)
        # a row limit of 1 is reached: suspended, as the ordinary path (and PostgreSQL) say
        conn.send(_SUSPENDED if rest[0].max_rows == 1 else _SELECT_1)
    conn._on_sync()
    await conn.flush()
    return True


_S16 = T._S16
_SELECT_0 = P.command_complete("SELECT 0")
_SELECT_1 = P.command_complete("SELECT 1")
_SUSPENDED = P.portal_suspended()


# -- key writes ---------------------------------------------------------------------------------
def _write_plan(stmt):
    """('UPDATE', SET column names) or ('DELETE', []) for a plain UPDATE / DELETE statement
    this path can run (the front door's `Statement.key_write_shape`), cached on the
    statement; None otherwise."""
    plan = stmt.fast.get("write")
    if plan is None:
        shape = getattr(stmt.statement, "key_write_shape", None)
        plan = stmt.fast["write"] = (shape() if shape is not None else None) or ()
    return plan or None


async def key_write(conn: Adapter, stmt, bind: P.Bind) -> bool:
    """Bind [Describe P] Execute Sync of a prepared UPDATE / DELETE by the full primary
    key, answered here (module docstring); False (nothing consumed, nothing written) for
    anything else."""
    find = getattr(conn.session, "key_write_rows", None)
    if find is None or conn.tx.in_block or bind.portal or conn.tx.status != b"I":
        return False
    nxt = _peek(conn, 3)
    describe = bool(nxt) and isinstance(nxt[0], P.Describe) and nxt[0].kind == "P" and \
        nxt[0].name == ""
    rest = nxt[1:] if describe else nxt
    if len(rest) < 2 or not isinstance(rest[0], P.Execute) or rest[0].portal != "" or \
            not isinstance(rest[1], P.Sync):
        return False
    if any(p.rows is not None and p.rows.streaming for p in conn.portals.values()):
        return False
    plan = _write_plan(stmt)
    if plan is None:
        return False
    verb, names = plan
    try:
        params = await conn._bind_params(stmt, bind)
        conn.tx.check(stmt.statement)
    except Exception:  # noqa: BLE001 - the ordinary path runs it and reports the error
        return False

    def write():
        """In the pool (the write waits for its WAL fsync): the matching row, then the
        small-write path; None when either says 'not here' (nothing written)."""
        found = find(stmt.sql, params)
        if found is None:
            return None
        rows, table = found
        if rows.num_rows == 0:
            return 0
        if verb == "UPDATE":
            r = table.write_small(OpType.UPDATE, update_data(table, rows, names))
        else:
            r = table.write_small(OpType.DELETE, pa.Table.from_arrays(
                rows.columns, names=table.schema.key_names))
        # the small path reports ALREADY_PRESENT / NOT_FOUND only (engine/tablet/
        # small_write.py), and an UPDATE / DELETE of a row gone meanwhile counts 0, as
        # the ordinary path counts it
        return None if r is None else r.num_applied

    timer = conn._begin_statement()
    try:
        try:
            count = await conn._blocking(write)
        except Exception:  # noqa: BLE001 - nothing was written: the ordinary path reports
            return False
    finally:
        conn._end_statement(timer)
    if count is None:
        return False
    conn._drop_portals(lambda p: p.name == "")
    for _ in range(3 if describe else 2):          # the messages answered here
        conn.pushback.popleft()
    conn.send(P.bind_complete())
    if describe:
        conn.send(P.no_data())
    conn.send(P.command_complete(StatementResult(verb, rowcount=count).tag()))
    conn._on_sync()
    await conn.flush()
    return True
