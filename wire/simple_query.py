"""The simple query protocol (protocol core): one Query message, one or more statements.

    Query -> per statement: [RowDescription DataRow*] CommandComplete | EmptyQueryResponse
             | ErrorResponse (the statements after a failed one are skipped)
          -> ReadyForQuery (with the transaction status after the last one)

The string is split by the session's front door (`Session.statements`): each statement is
parsed once, by the dialect, when it runs (off the event loop, inside `Backend.run`). A
string with no top-level `;` is one statement and is not split at all. Results are text
format unless the statement says otherwise (FETCH from a BINARY cursor); a COPY runs its
sub-protocol (wire/copy_flow.py) in the middle of the Query. Each statement has its own
statement clock (`Backend.start_statement`: cancel and statement_timeout apply to it).
"""
from __future__ import annotations

from planner.errors import SqlError
from session import Statement
from wire import copy_flow
from wire import protocol as P
from wire.effects import CONNECTION_ERRORS, Call
from wire.results import send_result


def on_query(be, sql: str):
    body = sql.strip()
    try:
        if ";" in body.rstrip(";"):
            stmts = be.session.statements(sql)
        else:
            stmts = [Statement(body.rstrip(";").rstrip(), len(sql) - len(sql.lstrip()))] \
                if body.rstrip(";").strip() else []
    except SqlError as e:
        be.error(e)
        be.send(P.ready_for_query(be.tx.status))
        return
    if not stmts:
        be.send(P.empty_query_response())
    for stmt in stmts:
        if not (yield from _run_simple(be, stmt)):
            break
    be.send(P.ready_for_query(be.tx.status))


def _run_simple(be, stmt: Statement):
    timer = yield from be.start_statement()
    try:
        result, rows = yield Call(be.run, (stmt, None))
        if result is None:
            return (yield from copy_flow.copy(be, stmt, stmt.offset))
        return (yield from send_result(be, result, None, None, describe=True, rows=rows))
    except CONNECTION_ERRORS:
        raise
    except Exception as e:  # noqa: BLE001 - one statement failed; the connection lives
        be.error(e, stmt.offset)
        return False
    finally:
        yield from be.end_statement(timer)
