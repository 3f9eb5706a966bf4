"""The extended protocol's hot cases, answered by the protocol core straight from its
receive buffer: prepared point reads, prepared key writes, prepared single-row inserts,
pipelined INSERT batches.

`Backend.handle_next` (wire/backend.py) hands every Bind frame - decoded into a tuple by
`protocol.decode_bind`, no message object - to `on_bind(be, fields, end)` before anything
else, unless the pipeline failed (`ext_error`) or batches are off until Sync
(`batch_off`). It returns None (nothing consumed, nothing done: the Bind is then handled
as a message, the ordinary way) or the case's effects, like any handler of the core
(wire/effects.py): these are the same state machine as the ordinary path, on the same
state (statements, portals, transaction status, `be.out`), sans-I/O like the rest of the
core. `ServerConfig.fast_paths=False` switches them off (`Backend.hot`): every message
then takes the ordinary path, the differential tests' reference.

The frames following the Bind are read where they lie in the buffer (`be.inbuf` from
`be.rpos`), compared with the pre-encoded frames the cases expect; a case consumes input
by moving `be.rpos` past what it answered.

Point reads
-----------
Bind [Describe P] Execute Sync of a described statement the session has compiled into a
point read of plain columns (`Session.point_read`, planner/point_read.py), all four frames
already received: the Bind's key goes to `Table.lookup_now` on the event loop (bounded,
in-memory work; the table resolved once per catalog version, one tablet pinned, and
NOT_NOW for a read that would wait) and the reply - BindComplete, [RowDescription],
DataRow, CommandComplete (PortalSuspended for a row limit of 1, as the ordinary path
says), ReadyForQuery - is built here, the DataRow from the row's Python values by the
compiled `wire.pg_types.data_row` (encoders `value_encoder` and their `value_code`s, like
the RowDescription made once per statement and result formats): no Portal,
StatementResult, effect or Arrow table. The session's answer (the PointRead and its
table) is kept per statement with the parameter decoders and reply parts (`HotRead`),
and asked for again only when the session says it may have changed (its
`plans_generation`, the catalog's `catalog_version`, the parameters' types). Anything it cannot answer exactly as the
ordinary path would (no compiled point read, a key needing SQL's conversion rules, a
transaction block, an announced type that differs from the result's, a portal still
streaming, a tablet not open or an ALTER under way, frames not all here yet) is left to
the ordinary path having consumed nothing.
tests/wire/test_fastpath.py compares every reply of both paths.

Key writes
----------
Bind [Describe P] Execute Sync of a prepared `UPDATE t SET c = <expr>, ... WHERE pk = $1`
or `DELETE FROM t WHERE pk = $1` run before (so that its row-matching query is cached as
a point read, planner.dml `_matching`), whose SET values hold no subquery
(`Statement.key_write_shape`; `SET n = n + 1` is taken). No lost updates, as on the
ordinary path (planner/dml.py): the matching row is read at one snapshot S
(`Table.lookup_now(..., read_ts)`: the tablet's committed watermark less one, so the read
sees every op <= S and none after it), and the write carries S as the row's read
precondition (`READ_TS_COLUMN`, engine/tablet/row_check.py). A row changed since S - an
earlier write of it still waiting for its fsync is in flight, so not in S - fails with
CHANGED, nothing of it written: `_key_write_done` then leaves the frames unconsumed with
`batch_off` set, and the ordinary path runs the statement from the start (it re-reads and
retries; its row count, its 40001). On the event loop, the session's
`key_write_values` gives the matching row in plain Python values when every SET value is
a column, a parameter, a literal or an integer column plus or minus an integer literal
that stays in its type's range (`PointRead.values`: no Arrow, no evaluator); otherwise
`key_write_rows` gives it as Arrow (key and SET values computed by the executor's
evaluator: SQL semantics and errors unchanged) and `update_data` rounds it as the
ordinary UPDATE does. Plain values need no rounding: the small-write path takes a value
only when its type is exactly the column's (an int for an integer column, a Decimal that
fits exactly, ...), where rounding changes nothing, and declines the rest (the ordinary
path then runs it). `Table.write_small_deferred` applies it on the engine's small-write path up to its wait
for the WAL fsync, with `never_block`: a busy tablet (memory back-pressure, its write lock
held by maintenance) declines and the ordinary path writes on a pool thread, so the loop
never sleeps. That wait is the one effect, `Durable(finish)`: the adapter waits for the
fsync on the server's WAL sync thread, never on the loop, and resumes here when it is done
(writers of all connections share the tablet's fsyncs: group commit); the reply -
BindComplete, [NoData], CommandComplete `UPDATE n` / `DELETE n` (or the write's error),
ReadyForQuery - is then built. Anything this case cannot answer exactly as the ordinary
path would (no cached matching point read, a transaction block, RETURNING, a value the
small-write path will not take with certainty, an error while matching) is left to the
ordinary path having consumed and written nothing; the ordinary path then runs the
statement from the start (repeating the matching read changes nothing). An UPDATE /
DELETE on the small path fails only for a key that is not live, which both paths count
as 0 rows, or for a row changed since S (above). No statement clock: the work on the loop
is bounded and the fsync wait is not cancellable. tests/wire/test_fastpath_writes.py
compares both paths.

Single-row inserts
------------------
Bind [Describe P] Execute Sync of a described `INSERT / UPSERT INTO t [(cols)] VALUES ($1,
..., $n)` (no RETURNING, no ON CONFLICT: `Session.insert_row_target`): the parameters,
decoded, are the row (binding that statement gives them unchanged), written on the loop by
`Table.write_small_deferred(..., never_block=True)` and waited for on the WAL sync thread
like a key write; the reply is BindComplete, [NoData], then CommandComplete `INSERT 0 1`
or, for a row the engine refused (a duplicate key), the ErrorResponse the ordinary path
sends (`planner.dml.row_failures`, `Backend.row_failure_error`). A value the small-write
path does not take with certainty (module docstring of engine/tablet/small_write.py: a
string too long, an int for a DOUBLE column, NULL in a NOT NULL column, ...) leaves the
statement to the ordinary path having written nothing, so every error it reports is the
ordinary path's own. tests/wire/test_fastpath_writes.py compares both paths.

Pipelined batches
-----------------
asyncpg and psycopg `executemany`, JDBC `executeBatch` and SQLAlchemy's bulk inserts send
one prepared `INSERT/UPSERT ... VALUES ($1, ..., $n)` as many

    [Parse (the same unnamed statement again)] Bind [Describe portal] Execute

before one Sync. Run one by one each Execute is a statement with the engine's fixed cost
per write; here the run is read from the buffer and its parameter sets written as one
Arrow batch (`Session.execute_many(..., in_order=True)`, in the pool: it is long work).
While everything received so far could still belong to the run (no Sync, Flush or other
message yet), the case waits for more input (`NEED_INPUT`) until the adapter says the
client paused (`be.look_ahead_over`, after READ_WAIT): a driver sends a 5,000-row batch
in many TCP segments, and a client owes no reply before its Sync or Flush, so waiting for
the end of the run cannot stall one. The run is read by the batch decoder
`protocol.scan_run` (compiled in native/_wire.pyx: no Python loop per row).

Outcomes are those of running each Execute in order: the engine applies the sets up to
the first one that fails and none after it; the applied items get their replies
(ParseComplete, BindComplete, NoData, CommandComplete `INSERT 0 1`) and are consumed; the
failing set and everything after it stay in the buffer and run through the ordinary path
(`batch_off` until the next Sync), which gives the failing Execute its exact
ErrorResponse and skips the rest up to Sync. A Bind whose values do not decode ends the
batch the same way. Anything else (another statement, a named portal that exists, a
failed transaction block, a portal still streaming, a statement the session does not
batch) is left to the ordinary path untouched. The portal is left as the last applied
Execute would have left it. tests/wire/test_pipelined_batch.py compares both paths.
"""

from __future__ import annotations

import operator
import struct

import numpy as np
import pyarrow as pa

from engine.catalog.table import NOT_NOW
from engine.tablet.write_op import READ_TS_COLUMN, OpType
from planner.dml import row_failures, update_data
from planner.errors import SqlError
from planner.expr import session_time_zone
from planner.point_read import NO_ROW
from planner.result import StatementResult
from wire import protocol as P
from wire import pg_types as T
from wire.effects import CONNECTION_ERRORS, NEED_INPUT, Call, Durable
from wire.extended_query import bind_params, decode_params, param_formats
from wire.params import numeric_column
from wire.portal import Portal, Rows

MAX_BATCH = 8192          # parameter sets written as one batch at most
READ_WAIT = 0.02          # s: how long a batch's look-ahead waits for more of its run
# (a gap in the input, not the whole wait: on a loaded machine a driver's process is
# often off its core for more than 2 ms, which cut its runs into pieces that each cost
# an fsync; a client owes no reply before Sync / Flush, so waiting costs nothing)

# pre-encoded frames the cases expect, and replies they send
_DESCRIBE_P = b"D\0\0\0\x06P\0"        # Describe of the unnamed portal
_EXECUTE = b"E\0\0\0\x09\0"            # Execute of the unnamed portal, then int32 max_rows
_SYNC = b"S\0\0\0\x04"
_BIND_COMPLETE = P.bind_complete()
_NO_DATA = P.no_data()
_PARSE_COMPLETE = P.parse_complete()
_SELECT_0 = P.command_complete("SELECT 0")
_SELECT_1 = P.command_complete("SELECT 1")
_SUSPENDED = P.portal_suspended()
_READY_IDLE = P.ready_for_query(b"I")
_I32 = struct.Struct("!i")


def on_bind(be, fields: tuple, end: int):
    """The hot cases' hook for a Bind frame ending at `end` (its fields from
    `protocol.decode_bind`): None when none applies (nothing consumed), else effects."""
    stmt = be.statements.get(fields[1])
    if stmt is None:
        return None
    case = stmt.fast.get("case")
    if case is None:
        case = stmt.fast["case"] = _case(stmt)
    if case == "select":
        return point_read(be, stmt, fields, end)
    if case == "insert":
        done = row_insert(be, stmt, fields, end)
        return done if done is not None else pipelined_batch(be, stmt, fields, end)
    if case == "write":
        return key_write(be, stmt, fields, end)
    return None


def _case(stmt) -> str:
    if stmt.kind != "plain":
        return ""
    verb = stmt.statement.verb
    if verb is None:
        return "write" if _write_plan(stmt) is not None else ""
    return verb


def _tail(be, p: int):
    """After a Bind of the unnamed portal ending at `p`: (describe, max_rows, end of the
    Sync) when [Describe P] Execute Sync follow, all received; else None."""
    buf = be.inbuf
    describe = buf.startswith(_DESCRIBE_P, p)
    if describe:
        p += 7
    if not buf.startswith(_EXECUTE, p) or not buf.startswith(_SYNC, p + 10):
        return None
    return describe, _I32.unpack_from(buf, p + 6)[0], p + 15


def _simple(be, fields) -> bool:
    """A Bind the point read and key write cases may take: the unnamed portal, outside a
    transaction block, no portal streaming."""
    if fields[0] or be.tx.in_block or be.tx.status != b"I":
        return False
    return not any(p.rows is not None and p.rows.streaming for p in be.portals.values())


def _consume(be, after: int) -> None:
    """A hot case took the frames up to `after`: the read position moves past them, and
    the unnamed portal this Bind would have replaced on the ordinary path is gone."""
    be.rpos = after
    if "" in be.portals:
        be.drop_portals(lambda p: p.name == "")


# -- point reads ---------------------------------------------------------------------------
class HotRead:
    """What the point read keeps per prepared statement, parameter format codes, result
    format codes and Describe (in `stmt.fast`), so that an op repeats none of the
    lookups that gave it: the parameter decoders (`_param_decoders`), and once an op
    found one, the session's answer (`Session.point_read`: the PointRead and its table)
    with what it stays valid for - the session, its `plans_generation`, the
    `catalog_version` of its `point_read_source()` and the parameters' Python types
    (that method's promise) - and the reply's parts made for that PointRead: the
    RowDescription (or None), the value encoders and their `value_code`s (`plan`; ()
    when this case cannot answer it)."""

    __slots__ = ("decoders", "session", "generation", "source", "version", "types",
                 "fast", "table", "plan")

    def __init__(self, decoders: tuple):
        self.decoders = decoders
        self.session = None             # no answer kept yet
        self.generation = self.source = self.version = self.types = None
        self.fast = self.table = None
        self.plan = ()

    def keep(self, session, types: tuple, fast, table, plan) -> None:
        """Keep the session's answer for `types`, when the session promises it stays
        valid (a catalog that numbers its versions)."""
        self.fast, self.table, self.plan = fast, table, plan
        source = getattr(session, "point_read_source", None)
        source = source() if source is not None else None
        version = getattr(source, "catalog_version", None)
        if version is None:
            self.session = None         # ask the session every time
            return
        self.session, self.generation = session, session.plans_generation
        self.source, self.version, self.types = source, version, types


def _point_plan(stmt, rf: tuple, fast, describe: bool):
    """(RowDescription bytes or None, encoders, `value_code`s) for this statement, result
    formats and point read; () when this case cannot answer it."""
    schema = fast.schema
    announced = stmt.result_oids
    if stmt.rows_announced and announced is not None and len(announced) == len(schema):
        try:
            fmts = T.result_formats(rf, len(schema))
        except T.ParamError:
            fmts = None
        if fmts is not None and all(T.type_oid(f.type)[0] == a[0]
                                    for f, a in zip(schema, announced)):
            encs = [T.value_encoder(f.type, fmt) for f, fmt in zip(schema, fmts)]
            if all(e is not None for e in encs):
                desc = P.row_description(T.field_descriptions(
                    stmt.schema, fmts, announced)) if describe else None
                codes = tuple(T.value_code(f.type, fmt) for f, fmt in zip(schema, fmts))
                return (desc, tuple(encs), codes)
    return ()


def _hot_read(stmt, fields: tuple, describe: bool) -> HotRead:
    """The statement's HotRead for this Bind's format codes and Describe (made once)."""
    key = ("read", fields[2], fields[4], describe)
    hot = stmt.fast.get(key)
    if hot is None:
        if len(stmt.fast) > 16:
            stmt.fast.clear()
        hot = stmt.fast[key] = HotRead(_param_decoders(stmt, fields))
    return hot


def point_read(be, stmt, fields: tuple, end: int):
    """Bind [Describe P] Execute Sync of a cached point read, answered here (module
    docstring): () when answered, None (nothing consumed) for anything else."""
    # `_simple` and `_tail` inlined: this is the hottest case, and each frame counts
    if not stmt.described or fields[0] or be.tx.status != b"I" or \
            be.settings.low_float_digits:
        return None     # (extra_float_digits < 1: floats as the ordinary path prints them)
    portals = be.portals
    if portals and any(p.rows is not None and p.rows.streaming for p in portals.values()):
        return None
    buf = be.inbuf
    p = end
    describe = buf.startswith(_DESCRIBE_P, p)
    if describe:
        p += 7
    if not buf.startswith(_EXECUTE, p) or not buf.startswith(_SYNC, p + 10):
        return None
    max_rows = _I32.unpack_from(buf, p + 6)[0]
    session = be.session
    try:
        hot = stmt.fast.get(("read", fields[2], fields[4], describe)) or \
            _hot_read(stmt, fields, describe)
        dec, values = hot.decoders, fields[3]
        if len(dec) != len(values) or not dec:
            return None             # a parameter count the ordinary path reports
        params = [dec[0](values[0])] if len(dec) == 1 else \
            [d(v) for d, v in zip(dec, values)]
        types = tuple(map(type, params))
        # the session's answer kept while it promises it unchanged (`HotRead`): no plan
        # cache lookup per op
        if hot.session is session and hot.types == types and \
                hot.version == hot.source.catalog_version and \
                hot.generation == session.plans_generation:
            fast, table, plan = hot.fast, hot.table, hot.plan
        else:
            point = getattr(session, "point_read", None)
            found = point(stmt.sql, params) if point is not None else None
            if found is None:
                return None
            fast, table = found
            # (held by `hot`, the PointRead cannot be another at the same address)
            plan = hot.plan if hot.fast is fast else \
                _point_plan(stmt, fields[4], fast, describe)
            hot.keep(session, types, fast, table, plan)
        if not plan:
            return None
        # a key of plain values (ints, strs) as it is; a key parameter of another type
        # converts in the session's TimeZone (a timestamptz for a TIMESTAMP key is read
        # as its local time there)
        key = fast.plain_key(params)
        if key is None:
            with session_time_zone(session.time_zone):
                key = fast.key_values(params)
            if key is None:
                return None
        row = table.lookup_now(key, fast.columns or None)
        if row is NOT_NOW:
            return None             # it would wait (a tablet to open, an ALTER): the pool
    except Exception:  # noqa: BLE001 - the ordinary path runs it and reports the error
        return None
    desc, encs, codes = plan
    be.rpos = p + 15
    if row is None:
        reply = [_BIND_COMPLETE, desc, _SELECT_0] if describe else \
            [_BIND_COMPLETE, _SELECT_0]
    else:
        # the row's Python values straight into its DataRow (compiled: native/_wire.pyx);
        # a row limit of 1 is reached: suspended, as the ordinary path (and PostgreSQL) say
        data = T.data_row(row, fast.plain, codes, encs)
        done = _SUSPENDED if max_rows == 1 else _SELECT_1
        reply = [_BIND_COMPLETE, desc, data, done] if describe else \
            [_BIND_COMPLETE, data, done]
    if portals:
        # `_consume` and `Backend.on_sync`: the unnamed portal this Bind replaces goes,
        # and the implicit transaction's portals with the Sync
        if "" in portals:
            be.drop_portals(lambda p: p.name == "")
        be.send(b"".join(reply))
        be.on_sync()
    else:
        # `on_sync` with nothing to drop (status I, not in a block: checked above; the
        # hot cases run only with `ext_error` and `batch_off` clear): ReadyForQuery joined
        # to the reply, one output piece
        be.look_ahead_over = False
        reply.append(_READY_IDLE)
        be.send(b"".join(reply))
    return ()


def _decoded(stmt, fields: tuple) -> list | None:
    """The Bind's parameters decoded by `_param_decoders` (cached on the statement per
    format codes), or None when they must be decoded the ordinary way."""
    dec = stmt.fast.get(("decode", fields[2], fields[4]))
    if dec is None:
        dec = stmt.fast[("decode", fields[2], fields[4])] = _param_decoders(stmt, fields)
    values = fields[3]
    if len(dec) != len(values):
        return None
    return [d(v) for d, v in zip(dec, values)]


_BINARY_INT = {20: struct.Struct("!q").unpack, 23: struct.Struct("!i").unpack,
               21: struct.Struct("!h").unpack}


def _param_decoders(stmt, fields: tuple) -> tuple:
    """One decoder per parameter of a Bind of `stmt` with these format codes (cached on
    the statement per format codes): what `decode_params` does value by value, a
    binary int2 / int4 / int8 (declared, or implied by the statement) unpacked directly (a wrong size raises,
    and the ordinary path then reports it as its own error); () when the point read
    must not decode here (not described, a parameter count the ordinary path reports).
    Bad format codes raise, as `param_formats` does."""
    values = fields[3]
    n = len(values)
    if not stmt.described or n != len(stmt.param_desc_oids):
        return ()
    fmts = param_formats(fields[2], values, fields[4])
    oids, types = stmt.param_oids, stmt.param_types
    decode = T.decode_param
    out = []
    for i in range(n):
        oid = oids[i] if i < len(oids) else 0
        t = types[i] if types else None
        # an undeclared type (asyncpg declares none) is the one the statement implies,
        # as `parse_binary` reads it
        unpack = _BINARY_INT.get(T.type_oid(t)[0] if oid in (0, T.UNKNOWN) and t is not None
                                 else oid) if fmts[i] == 1 else None
        if unpack is not None:
            out.append(lambda v, u=unpack: None if v is None else u(v)[0])
        else:
            out.append(lambda v, f=fmts[i], o=oid, t=types[i] if types else None:
                       decode(v, f, o, t))
    return tuple(out)


# -- key writes ------------------------------------------------------------------------------
def _write_plan(stmt):
    """('UPDATE', SET column names) or ('DELETE', []) for a plain UPDATE / DELETE statement
    this case can run (the front door's `Statement.key_write_shape`); None otherwise."""
    shape = getattr(stmt.statement, "key_write_shape", None)
    return shape() if shape is not None else None


def key_write(be, stmt, fields: tuple, end: int):
    """Bind [Describe P] Execute Sync of a prepared UPDATE / DELETE by the full primary
    key, applied here (module docstring): its effects, or None (nothing consumed, nothing
    written) for anything else."""
    find = getattr(be.session, "key_write_rows", None)
    values = getattr(be.session, "key_write_values", None)
    if find is None or not _simple(be, fields):
        return None
    tail = _tail(be, end)
    if tail is None:
        return None
    describe, _, after = tail
    plan = stmt.fast.get("write")
    if plan is None:
        plan = stmt.fast["write"] = _write_plan(stmt)
    verb, names = plan
    try:
        fmts = param_formats(fields[2], fields[3], fields[4])
        oids = stmt.param_oids
        if not stmt.described and any(v is not None and not (oids[i] if i < len(oids)
                                                              else 0)
                                       for i, v in enumerate(fields[3])):
            return None             # describing it is the pool's work: the ordinary path
        params = decode_params(stmt, fmts, fields[3])
        be.tx.check(stmt.statement)
        finish = None
        read_ts: list = []      # the snapshot S the matching row is read at (lookup_now)
        plain = values(stmt.sql, params, read_ts) if values is not None else None
        if plain is not None:           # the matching row in Python values: no Arrow
            row, table = plain
            if row is not NO_ROW:
                names = table.schema.key_names + names
                if len(set(names)) != len(names):
                    return None         # SET of a key column: the ordinary path says no
                data = {c: [v] for c, v in zip(names, row)}
                data[READ_TS_COLUMN] = read_ts   # written only if unchanged since S
                finish = table.write_small_deferred(
                    OpType.UPDATE if verb == "UPDATE" else OpType.DELETE, data,
                    never_block=True)
                if finish is None:      # not for the small path: nothing was written
                    return None
            found = None
        else:
            read_ts.clear()
            found = find(stmt.sql, params, read_ts)
            if found is None:
                return None
        rows, table = found if found is not None else (None, None)
        if rows is not None and rows.num_rows:
            if len(read_ts) != 1:
                return None     # not read at one known snapshot: the ordinary path
            if verb == "UPDATE":
                # rounded in the session's TimeZone (a timestamptz SET into a
                # TIMESTAMP column is its local time), as the ordinary UPDATE is
                with session_time_zone(be.session.time_zone):
                    data = update_data(table, rows, names, read_ts[0])
                finish = table.write_small_deferred(OpType.UPDATE, data, never_block=True)
            else:
                finish = table.write_small_deferred(OpType.DELETE, pa.Table.from_arrays(
                    rows.columns + [pa.array(read_ts, pa.int64())],
                    names=table.schema.key_names + [READ_TS_COLUMN]), never_block=True)
            if finish is None:      # not for the small path: nothing was written
                return None
    except Exception:  # noqa: BLE001 - nothing was written: the ordinary path reports it
        return None
    if finish is None:
        _consume(be, after)
        _write_reply(be, describe, verb, 0)
        return ()
    # the frames' end relative to the read position: the buffer may be compacted (`feed`)
    # while the write waits off the loop, which moves absolute offsets
    return _key_write_done(be, finish, describe, verb, after - be.rpos)


def _durable(be, finish, describe: bool):
    """Effects: wait for a hot write's durability off the loop; its result, or None after
    replying with the write's failure as its ErrorResponse (a lost connection raises)."""
    try:
        return (yield Durable(finish))
    except CONNECTION_ERRORS:
        raise
    except Exception as e:  # noqa: BLE001 - the write's failure, reported as its error
        _failed(be, describe, e)
        return None


def _failed(be, describe: bool, e: Exception) -> None:
    """Reply with a hot write's failure as its ErrorResponse."""
    be.send(_BIND_COMPLETE)
    if describe:
        be.send(_NO_DATA)
    be.error(e)
    be.on_sync()


def _key_write_done(be, finish, describe: bool, verb: str, length: int):
    """Effects: wait for the write's durability off the loop, then reply; the statement's
    frames (`length` bytes from the read position, which the buffer's compaction may have
    moved meanwhile) are consumed then, unless the row changed since its read (CHANGED:
    nothing was written): they are left to the ordinary path (`batch_off` until their
    Sync), which runs the statement from the start - it re-reads the row and retries, as
    planner/dml.py `write_reread` does for every UPDATE / DELETE."""
    try:
        r = yield Durable(finish)
    except CONNECTION_ERRORS:
        raise
    except Exception as e:  # noqa: BLE001 - the write's failure, reported as its error
        _consume(be, be.rpos + length)
        _failed(be, describe, e)
        return
    if r.row_errors and any(e.code == "CHANGED" for e in r.row_errors):
        be.batch_off = True     # the Bind again, the ordinary way: re-read and retried
        return
    _consume(be, be.rpos + length)
    # the small path reports ALREADY_PRESENT / NOT_FOUND / CHANGED only (engine/tablet/
    # small_write.py; CHANGED went back above): an UPDATE / DELETE of a row gone
    # meanwhile counts 0, as the ordinary path counts it
    _write_reply(be, describe, verb, r.num_applied)


def _write_reply(be, describe: bool, verb: str, count: int) -> None:
    be.send(_BIND_COMPLETE)
    if describe:
        be.send(_NO_DATA)
    be.send(P.command_complete(StatementResult(verb, rowcount=count).tag()))
    be.on_sync()


# -- single-row inserts ---------------------------------------------------------------------
def row_insert(be, stmt, fields: tuple, end: int):
    """Bind [Describe P] Execute Sync of a prepared `INSERT / UPSERT INTO t [(cols)]
    VALUES ($1, ..., $n)`, written here (module docstring): its effects, or None
    (nothing consumed, nothing written) for anything else."""
    target_of = getattr(be.session, "insert_row_target", None)
    if target_of is None or not _simple(be, fields):
        return None
    tail = _tail(be, end)
    if tail is None:
        return None
    describe, _, after = tail
    try:
        if not stmt.described:
            return None             # describing it is the pool's work: the ordinary path
        params = _decoded(stmt, fields)
        if params is None:
            return None             # a parameter count the ordinary path reports
        be.tx.check(stmt.statement)
        found = target_of(stmt.sql, len(params))
        if found is None:
            return None
        target, cols, upsert = found
        finish = target.table.write_small_deferred(
            OpType.UPSERT if upsert else OpType.INSERT,
            {c: [v] for c, v in zip(cols, params)}, never_block=True)
        if finish is None:          # not for the small path: nothing was written
            return None
    except Exception:  # noqa: BLE001 - nothing was written: the ordinary path reports it
        return None
    _consume(be, after)
    return _row_insert_done(be, finish, describe, target, "UPSERT" if upsert else "INSERT")


def _row_insert_done(be, finish, describe: bool, target, verb: str):
    """Effects: wait for the insert's durability off the loop, then reply as the
    ordinary path does (`planner.dml.insert_rows`: a failed row is an ErrorResponse)."""
    r = yield from _durable(be, finish, describe)
    if r is None:
        return
    result = StatementResult(verb, rowcount=r.num_applied, row_errors=row_failures(
        target.name, target.table.schema, r.row_errors))
    be.send(_BIND_COMPLETE)
    if describe:
        be.send(_NO_DATA)
    if result.row_errors:
        be.row_failure_error(result)
    else:
        be.send(P.command_complete(result.tag()))
    be.on_sync()


# -- pipelined batches --------------------------------------------------------------------------
def _parse_frame(stmt) -> bytes | None:
    """The Parse frame that re-prepares the unnamed statement `stmt` unchanged."""
    if stmt.name:
        return None
    body = b"\0" + stmt.sql.encode("utf-8") + b"\0" + struct.pack(
        f"!h{len(stmt.param_oids)}I", len(stmt.param_oids), *stmt.param_oids)
    return b"P" + _I32.pack(len(body) + 4) + body


def _run(be, stmt, first: tuple, first_end: int):
    """The run of [Parse] Bind [Describe P] Execute items from the first Bind (at
    `be.rpos`): ([(end of item, Bind fields)] with ends relative to `be.rpos`, complete)
    - complete False while everything received could still belong to the run. A scan
    that waited for more input goes on where it stopped (`be.run_scan`: nothing is
    consumed meanwhile), so a run arriving in many pieces is decoded once."""
    buf, base = be.inbuf, be.rpos
    portal = first[0]
    pe = portal.encode("utf-8") + b"\0"
    describe = b"D" + _I32.pack(len(pe) + 5) + b"P" + pe
    execute = b"E" + _I32.pack(len(pe) + 8) + pe
    parse = stmt.fast.get("parse")
    if parse is None:
        parse = stmt.fast["parse"] = _parse_frame(stmt) or b""
    items = []
    p, fields, bind_end = base, first, first_end
    scan = be.run_scan
    be.run_scan = None
    if scan is not None and scan[0] is stmt and scan[1] == first:
        items = scan[2]
        if items:
            p, fields = base + items[-1][0], None
    complete = P.scan_run(buf, p, fields, bind_end, portal, stmt.name, parse, describe,
                          execute, base, items, MAX_BATCH, be.max_message)
    if not complete:
        be.run_scan = (stmt, first, items)
    return items, complete


def pipelined_batch(be, stmt, first: tuple, first_end: int):
    """The run the Bind `first` starts, as one batch (module docstring): its effects,
    NEED_INPUT while the run may go on, or None (nothing consumed) when it is not a run."""
    run = getattr(be.session, "execute_many", None)
    if run is None or be.tx.status == b"E" or (first[0] and first[0] in be.portals) or \
            any(p.rows is not None and p.rows.streaming for p in be.portals.values()):
        return None
    items, complete = _run(be, stmt, first, first_end)
    if not complete and not be.look_ahead_over:
        be.looking_ahead = True     # the adapter ends the wait after READ_WAIT
        return NEED_INPUT
    be.look_ahead_over = False
    if len(items) < 2:
        return None
    return _batch(be, stmt, first, items, run)


def _batch(be, stmt, first: tuple, items: list, run):
    binds = [f for _, f in items]
    first_msg = P.Bind(*first)
    try:
        first_params = yield from bind_params(be, stmt, first_msg)
    except CONNECTION_ERRORS:
        raise
    except Exception:  # noqa: BLE001 - replayed: the ordinary path reports it
        first_params = None
    columns, count = ([], 0) if first_params is None else \
        decode_columns(stmt, binds, first_params)
    result = None
    if count:
        timer = yield from be.start_statement()
        try:
            be.tx.check(stmt.statement)
            result = yield Call(run, (stmt.sql, None, True, columns))
        except SqlError:        # the session's errors (all of them: its boundary): the
            result = None       # ordinary path runs the sets one by one and reports it
        finally:
            yield from be.end_statement(timer)
    done = 0 if result is None else min(max(result.rowcount, 0), count)
    if done == 0:
        be.batch_off = True     # nothing applied: the Bind again, the ordinary way
        return
    # replies for the applied items' frames ([Parse] Bind [Describe] Execute each), in
    # order, made in one piece (`protocol.batch_replies`, compiled); they are consumed
    tag = P.command_complete(StatementResult(result.command, rowcount=1).tag())
    end = be.rpos + items[done - 1][0]
    be.send(P.batch_replies(be.inbuf, be.rpos, end, _PARSE_COMPLETE, _BIND_COMPLETE,
                            _NO_DATA, tag))
    be.rpos = end
    be.drop_portals(lambda x: x.name == first[0])
    last = StatementResult(result.command, rowcount=1)
    be.portals[first[0]] = Portal(first[0], stmt,
                                  [c[done - 1] for c in columns] if columns else [],
                                  first[4], last, Rows(last), executed=True)
    if done < len(items):
        be.batch_off = True     # the failing set and the rest: the ordinary path


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


_FORMATS, _VALUES, _RESULTS = (operator.itemgetter(i) for i in (2, 3, 4))   # Bind fields


def decode_columns(stmt, binds: list, first_params: list) -> tuple[list, int]:
    """The runs' parameters (Bind fields tuples, `protocol.decode_bind`'s) as one column
    per parameter (a pyarrow Array, or a list of Python values where a column is decoded
    value by value), and how many Binds they cover: those before the first one that
    differs in shape from the first Bind (count or formats) or holds a value that does
    not decode. The values are exactly what `bind_params` gives for each Bind, in the
    Arrow types `pa.array` infers from those Python values (integers int64, floats
    double, ...).

    Per value in Python only where a column needs it (text format, ...); the fixed-width
    binary formats and binary text are converted a column at a time, and binary NUMERIC
    by the compiled decoder (`params.numeric_column`: Decimals, value by value in C)."""
    n = len(first_params)
    first = binds[0]
    count = len(binds)
    # the shapes compared without a Python loop (a set of the (formats, count, result
    # formats) triples); only when they differ is the first that differs looked for
    if len(set(zip(map(_FORMATS, binds), map(len, map(_VALUES, binds)),
                   map(_RESULTS, binds)))) > 1:
        shape = (first[2], len(first[3]), first[4])
        for j, b in enumerate(binds):   # a loop per Bind: where the first other shape is
            if (b[2], len(b[3]), b[4]) != shape:
                count = j
                break
    pf = first[2]
    fmts = [0] * n if not pf else ([pf[0]] * n if len(pf) == 1 else list(pf))
    oids = list(stmt.param_oids) + [0] * max(0, n - len(stmt.param_oids))
    # the values by parameter: the Binds' value tuples transposed (by zip, in C)
    by_param = list(zip(*map(_VALUES, binds[:count]))) if n == len(first[3]) else None
    columns = []
    for i in range(n):
        raw = by_param[i] if by_param is not None else [b[3][i] for b in binds[:count]]
        arrow = stmt.param_types[i] if stmt.described else None
        oid = oids[i]
        if oid in (0, T.UNKNOWN) and arrow is not None:
            oid = T.type_oid(arrow)[0]
        col = _binary_column(raw, oid) if fmts[i] == 1 else None
        if col is None:
            col = [first_params[i]]
            try:
                if fmts[i] == 1 and oid == 1700:   # binary NUMERIC: `decode_param`'s
                    numeric_column(raw[1:], col)   # decoder, compiled (native/_wire.pyx)
                else:
                    for v in raw[1:]:    # a loop per value: formats without a column decoder
                        col.append(T.decode_param(v, fmts[i], oids[i], arrow))
            except Exception:  # noqa: BLE001 - this Bind fails in the ordinary path
                count = len(col)
        columns.append(col)
    return [c[:count] for c in columns], count


def _binary_column(raw, oid: int):
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
           1114: pa.timestamp("us"), 1184: pa.timestamp("us", "UTC")}.get(oid, pa.int64())
    return pa.array(values, typ, mask=mask)
