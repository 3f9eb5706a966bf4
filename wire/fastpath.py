"""Pipelined batches: a driver's run of Bind/Execute pairs of one prepared INSERT or
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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.result import StatementResult
from wire import protocol as P
from wire.portal import Portal, Rows

if TYPE_CHECKING:
    from wire.connection import Connection

MAX_BATCH = 8192          # parameter sets written as one batch at most
_BATCH_WORDS = ("insert", "upsert")


def _look_ahead(conn: Connection) -> list:
    """The messages already received after the current one, taken out of the queue (a
    malformed one is kept as its ProtocolViolation, raised when the queue reaches it)."""
    out = list(conn.pushback)
    conn.pushback.clear()
    while len(out) < 4 * MAX_BATCH:
        try:
            msg = conn.decoder.next()
        except P.ProtocolViolation as e:
            out.append(e)
            break
        if msg is None:
            break
        out.append(msg)
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


async def pipelined_batch(conn: Connection, first: P.Bind) -> bool:
    """Handle `first` and the pipelined run it starts as one batch; False (nothing done,
    nothing consumed) when it is not such a run."""
    stmt = conn.statements.get(first.statement)
    run = getattr(conn.session, "execute_many", None)
    if stmt is None or run is None or not conn.config.pipeline_batches or \
            stmt.kind != "plain" or not stmt.words or \
            stmt.words[0] not in _BATCH_WORDS or conn.tx.status == b"E" or \
            (first.portal and first.portal in conn.portals) or \
            any(p.rows is not None and p.rows.streaming for p in conn.portals.values()):
        return False
    msgs = _look_ahead(conn)
    spans, used = _items(first, stmt, msgs)
    if len(spans) < 2:
        conn.pushback.extendleft(reversed(msgs))
        return False
    seq = [first] + msgs
    # decode every Bind first; one that fails ends the batch before it
    param_sets = []
    for a, b in spans:
        bind = next(m for m in seq[a:b] if isinstance(m, P.Bind))
        try:
            param_sets.append(await conn._bind_params(stmt, bind))
        except Exception:  # noqa: BLE001 - replayed below: the ordinary path reports it
            break
    result = None
    if param_sets:
        timer = conn._begin_statement()
        try:
            conn.tx.check(stmt.words)
            result = await conn._blocking(run, stmt.sql, param_sets, True)
        except (P.ProtocolViolation, ConnectionError, OSError):
            raise
        except Exception as e:  # noqa: BLE001 - the ordinary path runs them and reports it
            from wire.connection import Closed, Fatal
            if isinstance(e, (Closed, Fatal)):
                raise
            result = None
        finally:
            conn._end_statement(timer)
    done = 0 if result is None else min(max(result.rowcount, 0), len(param_sets))
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
    conn.portals[first.portal] = Portal(first.portal, stmt, param_sets[done - 1],
                                        first.result_formats, last, Rows(last),
                                        executed=True)
    # everything not applied goes back, in order, for the ordinary path
    rest_from = spans[done][0] if done < len(spans) else used
    rest = seq[rest_from:]
    conn.pushback.extendleft(reversed(rest))
    if done < len(spans):
        conn.batch_off = True
    return True
