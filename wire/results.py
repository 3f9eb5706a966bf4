"""Rows out: a statement's result as protocol messages, batch by batch (protocol core).

    send_result(be, result, formats, announced, describe=..., rows=..., limit=...)
        notices, [RowDescription], DataRow* (at most `limit`), then CommandComplete, the
        row-failure ErrorResponse, or PortalSuspended when the limit is reached

Used by both query protocols (wire/simple_query.py, wire/extended_query.py); COPY TO
streams through `pipelined` too (wire/copy_flow.py). Like the rest of the core these are
generators of effects (wire/effects.py), no I/O.

Streaming and back-pressure: results go out `ServerConfig.batch_rows` rows at a time,
encoded a column at a time by wire.pg_types.data_rows; pending output is flushed (FLUSH: the
adapter writes and awaits the transport's drain) every `flush_bytes`, so a slow client
slows the sender and memory stays bounded by about one batch. A small result already in
memory (a point query's row) is encoded right here, inline; a stream (its next batch runs
the scan) or a big batch is encoded in the pool, double-buffered: the next batch is
Spawned as soon as the current one is handed out, so it is encoded while this one is
written and drained.
"""
from __future__ import annotations

import contextlib

from planner.result import StatementResult
from wire import protocol as P
from wire import pg_types as T
from wire.effects import Call, Join, Spawn
from wire.portal import Rows


def send_result(be, result: StatementResult, formats: list[int] | None,
                announced: list | None, *, describe: bool,
                rows: Rows | None = None, limit: int = 0):
    """Notices, [RowDescription], DataRows (at most `limit`, 0 = all, read from `rows`),
    then CommandComplete or the row-failure error. Returns False on failure; when the
    limit is reached, sends PortalSuspended instead and returns True."""
    be.notices(result)
    if result.command == "EMPTY":
        be.send(P.empty_query_response())
        return True
    if rows is None:
        rows = Rows(result)
    sent = 0
    if rows.schema is not None:
        if formats is None:
            formats = [1 if result.info.get("binary") else 0] * len(rows.schema)
        if describe:
            be.send(P.row_description(T.field_descriptions(rows.schema, formats,
                                                           announced)))
        sent = yield from stream(be, rows, formats, announced, limit)
        if limit > 0 and sent == limit:
            be.send(P.portal_suspended())
            return True
    if result.row_errors:
        be.row_failure_error(result)
        return False
    if rows.schema is not None and result.command in ("SELECT", "FETCH"):
        be.send(P.command_complete(f"{result.command} {sent}"))
    else:
        be.send(P.command_complete(result.tag()))
    return True


def _encoded(rows: Rows, want: int, formats: list[int], announced, zone: str,
             float_digits: int = 1):
    """(rows, DataRow bytes) of the next batch; None at the end (may run a scan).
    `float_digits`: extra_float_digits (<= 0: text floats with fewer digits)."""
    batch = rows.take(want)
    if batch is None:
        return None
    if announced is not None:
        batch = T.conform(batch, announced)
    if float_digits < 1:
        batch = T.apply_float_digits(batch, formats, float_digits)
    return batch.num_rows, T.data_rows(batch, formats, zone)


def pipelined(be, step, offload, consume):
    """Effects: `consume(item)` (a generator of effects) for each `step()` result up to
    the first None. A step runs in the pool when `offload()` says so (a scan to pull, or a
    big batch to encode), and then the next step starts there (Spawn) as soon as the
    current result is handed out: double buffering. Steps never overlap (`Rows` is read by
    one thread at a time); leaving early waits for a step in flight."""
    pending = None
    try:
        while True:
            be.check_canceled()
            if pending is not None:
                item, pending = (yield Join(pending)), None
            else:
                item = (yield Call(step)) if offload() else step()
            if item is None:
                return
            if offload():
                pending = yield Spawn(step)
            yield from consume(item)
    finally:
        if pending is not None:
            with contextlib.suppress(Exception):   # the error that ends us is reported
                yield Join(pending)


def stream(be, rows: Rows, formats: list[int], announced: list | None, limit: int):
    """DataRows batch by batch, flushing (and waiting for the client) as output builds
    up; returns how many rows were sent."""
    step_rows, inline = be.config.batch_rows, be.config.inline_encode_rows
    zone = be.time_zone()           # timestamptz text: in the session's TimeZone
    digits = be.float_digits()      # float text: extra_float_digits
    taken = 0

    def want() -> int:
        return step_rows if limit <= 0 else min(step_rows, limit - taken)

    def step():
        nonlocal taken
        if want() <= 0:
            return None
        got = _encoded(rows, want(), formats, announced, zone, digits)
        if got is not None:
            taken += got[0]
        return got

    def offload() -> bool:
        return rows.streaming or want() >= inline and rows.remaining() >= inline

    sent = 0
    if not offload():
        # a small result already in memory (a point query's row): encoded right here,
        # without the pipeline's machinery
        while (got := step()) is not None:
            sent += got[0]
            be.send(got[1])
        yield from be.maybe_flush()
        return sent

    def consume(item):
        nonlocal sent
        sent += item[0]
        be.send(item[1])
        yield from be.maybe_flush()

    yield from pipelined(be, step, offload, consume)
    return sent
