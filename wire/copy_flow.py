"""The COPY sub-protocols (protocol core); the formats themselves are wire/copy.py's.

    COPY ... FROM STDIN: CopyInResponse, then CopyData* (Flush / Sync ignored) ending in
        CopyDone -> CommandComplete `COPY n` (or the row-failure ErrorResponse)
        CopyFail -> ErrorResponse 57014;  any other message -> 08P01, and that message is
        put back (Unread) to be handled after the COPY, as PostgreSQL does
    COPY ... TO STDOUT: CopyOutResponse, CopyData* (one per row), CopyDone, CommandComplete

`copy(be, statement, offset)` runs either, inside a Query or an Execute; it returns False
when it failed (the error is sent). COPY FROM is the one place the core waits for more
client input in the middle of a message's handling: each CopyData is a RECEIVE effect, and
each chunk that CopyIn cuts at row boundaries is inserted in the pool (a Call). COPY TO
streams its query's rows through `results.pipelined` (double-buffered, back-pressured).
"""
from __future__ import annotations

from engine.errors import EngineError
from planner.errors import SqlError
from planner.result import RowFailure, row_failure_report
from session import Statement
from wire import protocol as P
from wire.copy import MAX_REPORTED_FAILURES, CopyIn, CopyOut, Failure
from wire.effects import CONNECTION_ERRORS, FLUSH, RECEIVE, Call, Closed, Unread
from wire.portal import Rows
from wire.results import pipelined


def copy(be, stmt: Statement, offset: int):
    try:
        node = stmt.node
    except SqlError as e:
        be.error(e, offset)
        return False
    spec = node.args["spec"]
    if spec.direction == "to":
        query = Statement.parsed(node.args["query_text"], node.args.get("query"))
        return (yield from _copy_out(be, spec, query, offset + spec.query_offset))
    return (yield from _copy_in(be, spec))


def _copy_target(be, spec):
    catalog = be.host.db.catalog
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


def _copy_insert(table, chunk, failures: list[Failure]) -> int:
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


def _copy_in(be, spec):
    try:
        table, cols, types = yield Call(_copy_target, (be, spec))
        reader = CopyIn(spec, cols, types)
    except (SqlError, EngineError) as e:
        be.error(e)
        return False
    be.send(P.copy_in_response(spec.format == "binary", len(cols)))
    yield FLUSH
    applied, failures = 0, []
    error: BaseException | None = None
    while True:
        try:
            msg = yield RECEIVE
        except P.ProtocolViolation as e:
            if e.fatal:
                raise
            error = SqlError(e.message, e.sqlstate)
            break
        if msg is None:
            raise Closed()
        if isinstance(msg, P.CopyData):
            try:
                be.check_canceled()
                for chunk in reader.feed(msg.data):
                    applied += yield Call(_copy_insert, (table, chunk, failures))
            except CONNECTION_ERRORS:
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
            yield Unread(msg)
            error = SqlError(f"unexpected message type 0x{ord(type(msg).__name__[0]):02X}"
                             " during COPY from stdin", "08P01")
            break
    if error is None:
        try:
            for chunk in reader.finish():
                applied += yield Call(_copy_insert, (table, chunk, failures))
        except CONNECTION_ERRORS:
            raise
        except Exception as e:  # noqa: BLE001 - reported as the COPY's error
            error = e
    if error is not None:
        if isinstance(error, SqlError) and applied and error.sqlstate != "57014":
            error.message += (f" ({applied} row{'' if applied == 1 else 's'} "
                              f"{'was' if applied == 1 else 'were'} applied before the "
                              "error)")
        be.error(error)
        return False
    if failures:
        failures.sort(key=lambda f: f.line)
        first = failures[0]
        message, detail = row_failure_report(
            [RowFailure(f.line, f.sqlstate, f"line {f.line}: {f.message}")
             for f in failures], applied, MAX_REPORTED_FAILURES)
        be.send(P.error_response(P.error_fields(
            "ERROR", first.sqlstate, f"COPY {spec.table}: {message}", detail=detail,
            where=f"COPY {spec.table}, line {first.line}")))
        be.tx.failed()
        return False
    be.send(P.command_complete(f"COPY {applied}"))
    return True


def _copy_out(be, spec, query: Statement, offset: int):
    try:
        result = yield Call(be.dispatch, (query, None))
    except SqlError as e:
        be.error(e, offset if spec.query is not None else 0)
        return False
    rows = Rows(result)
    if rows.schema is None:
        be.error(SqlError(f"COPY query must return rows ({result.command} does not)",
                          "0A000"))
        return False
    be.send(P.copy_out_response(spec.format == "binary", len(rows.schema)))
    out = CopyOut(spec, rows.schema.names, be.time_zone(), be.float_digits())
    be.send(out.header())
    batch_rows, inline = be.config.batch_rows, be.config.inline_encode_rows

    def encoded():
        b = rows.take(batch_rows)
        return None if b is None else out.batch(b)

    def offload() -> bool:
        return rows.streaming or rows.remaining() >= inline

    def consume(data):
        be.send(data)
        yield from be.maybe_flush()

    try:
        yield from pipelined(be, encoded, offload, consume)
    except CONNECTION_ERRORS:
        rows.close()            # the client went away: the connection ends, no error
        raise
    except Exception as e:  # noqa: BLE001 - ends copy-out mode with the error
        rows.close()
        be.error(e)
        return False
    be.send(out.trailer())
    be.send(P.copy_done())
    be.send(P.command_complete(f"COPY {rows.sent}"))
    return True
