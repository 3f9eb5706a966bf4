"""The extended query protocol (protocol core): Parse, Bind, Describe, Execute, Close.

    Parse     -> PreparedStatement (wire/portal.py), ParseComplete; "" = the unnamed one
    Bind      -> parameters decoded (wire.pg_types.decode_param; a parameter of unspecified
                 type takes the type the statement implies, which may describe it first),
                 Portal, BindComplete
    Describe  S: ParameterDescription, RowDescription | NoData (worked out once, kept)
              P: RowDescription | NoData; a plain statement's portal not yet described is
                 run here, so the result's own types describe it and it is planned once
    Execute   the portal runs once (`Backend.run` in the pool; a cached primary-key point
              read on the event loop, `run_point`), its rows streamed (wire/results.py);
              a row limit suspends it (PortalSuspended) and the next Execute resumes it
    Close     S / P, CloseComplete (closing a statement closes its portals)

Sync (ReadyForQuery, the implicit transaction's portals dropped) and Flush are
`Backend.handle`'s. An error in any of these is sent as ErrorResponse and sets
`Backend.ext_error`: every message up to the next Sync is then skipped. Portals and
cursors share one namespace, as in PostgreSQL (a DECLAREd cursor can be Described and
Executed by name). COPY through Execute runs the copy sub-protocol (wire/copy_flow.py).

`param_formats` and `decode_params` (what `bind_params` is made of) are also the hot
cases' (wire/fastpath.py): one decoding for both.
"""
from __future__ import annotations

from planner.errors import SqlError
from planner.result import StatementResult
from wire import copy_flow
from wire import protocol as P
from wire import pg_types as T
from wire.effects import CONNECTION_ERRORS, Call
from wire.portal import Portal, PreparedStatement, Rows
from wire.results import send_result


def handle(be, msg):
    """Effects of one extended-protocol message (Parse and Close need none)."""
    t = type(msg)
    if t is P.Parse or t is P.Close:
        try:
            on_parse(be, msg) if t is P.Parse else on_close(be, msg)
        except CONNECTION_ERRORS:
            raise
        except Exception as e:  # noqa: BLE001 - reported to the client, then skip to Sync
            be.error(e)
            be.ext_error = True
        return ()
    return _guarded(be, msg)


def _guarded(be, msg):
    try:
        match msg:
            case P.Bind():
                yield from on_bind(be, msg)
            case P.Describe():
                yield from on_describe(be, msg)
            case P.Execute():
                yield from on_execute(be, msg)
    except CONNECTION_ERRORS:
        raise
    except Exception as e:  # noqa: BLE001 - reported to the client, then skip to Sync
        be.error(e)
        be.ext_error = True


def on_parse(be, msg: P.Parse) -> None:
    if msg.name and (msg.name in be.statements
                     or msg.name in getattr(be.session, "prepared", {})):
        raise SqlError(f'prepared statement "{msg.name}" already exists', "42P05")
    # parsed when first needed (Describe, Bind, Execute), once
    stmt = PreparedStatement(msg.name, msg.sql, msg.param_oids,
                             be.session.single_statement(msg.sql))
    be.statements[msg.name] = stmt
    be.send(P.parse_complete())


def on_close(be, msg: P.Close) -> None:
    if msg.kind == "S":
        stmt = be.statements.pop(msg.name, None)
        if stmt is not None:
            be.drop_portals(lambda p: p.statement is stmt)
    else:
        be.drop_portals(lambda p: p.name == msg.name)
    be.send(P.close_complete())


def _statement(be, name: str) -> PreparedStatement:
    stmt = be.statements.get(name)
    if stmt is None:
        if name == "":
            raise SqlError("unnamed prepared statement does not exist", "26000")
        raise SqlError(f'prepared statement "{name}" does not exist', "26000")
    return stmt


def _portal(be, name: str) -> Portal:
    p = be.portals.get(name)
    if p is None:
        raise SqlError(f'portal "{name}" does not exist' if name else
                       "unnamed portal does not exist", "34000")
    return p


def ensure_described(be, stmt: PreparedStatement):
    if not stmt.described:
        if stmt.kind == "plain":
            yield Call(be.describe_statement, (stmt,))
        else:
            be.describe_statement(stmt)


def on_bind(be, msg: P.Bind):
    stmt = _statement(be, msg.statement)
    if msg.portal and msg.portal in be.portals:
        raise SqlError(f'portal "{msg.portal}" already exists', "42P03")
    params = yield from bind_params(be, stmt, msg)
    be.drop_portals(lambda p: p.name == msg.portal)
    be.portals[msg.portal] = Portal(msg.portal, stmt, params, msg.result_formats)
    be.send(P.bind_complete())


def bind_params(be, stmt: PreparedStatement, msg: P.Bind):
    """The Bind's parameter values, checked and decoded (effects: a statement that has
    to be described first)."""
    fmts = param_formats(msg.param_formats, msg.params, msg.result_formats)
    oids = stmt.param_oids
    if not stmt.described and any(v is not None and not (oids[i] if i < len(oids) else 0)
                                  for i, v in enumerate(msg.params)):
        yield from ensure_described(be, stmt)
    return decode_params(stmt, fmts, msg.params)


def param_formats(pf: tuple, values: tuple, rf: tuple) -> list[int]:
    """Each parameter's format code, the Bind's format codes checked (08P01, 22023)."""
    n = len(values)
    if len(pf) not in (0, 1, n) and not (n == 0):
        raise SqlError(f"bind message has {len(pf)} parameter formats but {n} "
                       "parameters", "08P01")
    fmts = [0] * n if not pf else ([pf[0]] * n if len(pf) == 1 else list(pf))
    for f in fmts:
        if f not in (0, 1):
            raise SqlError(f"unsupported format code: {f}", "22023")
    for f in rf:
        if f not in (0, 1):
            raise SqlError(f"unsupported format code: {f}", "22023")
    return fmts


def decode_params(stmt: PreparedStatement, fmts: list[int], values: tuple) -> list:
    """The values decoded by their formats and types (wire.pg_types.decode_param), once the
    statement is described if a value's type is unspecified: what an ordinary Bind
    decodes; wire/fastpath.py's hot cases decode with it too."""
    n = len(values)
    if stmt.described and n != len(stmt.param_desc_oids):
        raise SqlError(f'bind message supplies {n} parameters, but prepared statement '
                       f'"{stmt.name}" requires {len(stmt.param_desc_oids)}', "08P01")
    oids = stmt.param_oids
    no = len(oids)
    types = stmt.param_types if stmt.described else None
    decode = T.decode_param
    return [decode(v, fmts[i], oids[i] if i < no else 0, types[i] if types else None)
            for i, v in enumerate(values)]


def on_describe(be, msg: P.Describe):
    if msg.kind == "S":
        stmt = _statement(be, msg.name)
        yield from ensure_described(be, stmt)
        be.send(P.parameter_description(stmt.param_desc_oids))
        if stmt.schema is None:
            be.send(P.no_data())
        else:
            be.send(P.row_description(T.field_descriptions(
                stmt.schema, None, stmt.result_oids)))
            stmt.rows_announced = True
        return
    portal = _portal(be, msg.name)
    if portal.result is None:
        stmt = portal.statement
        if stmt.rows_announced or stmt.kind != "plain":
            yield from ensure_described(be, stmt)
            schema = stmt.schema
            portal.announced = stmt.result_oids
        else:
            # run it now: the result's own types describe it, and it is planned once
            yield from run_portal(be, portal)
            schema = portal.rows.schema
    else:
        schema = (portal.rows or Rows(portal.result)).schema
    if schema is None:
        be.send(P.no_data())
        return
    if portal.announced is None:
        portal.announced = [T.type_oid(f.type) for f in schema]
    fmts = T.result_formats(portal.result_formats, len(schema))
    be.send(P.row_description(T.field_descriptions(schema, fmts, portal.announced)))


def run_portal(be, portal: Portal):
    stmt = portal.statement
    if portal.params and stmt.kind == "plain" and run_point(be, portal):
        return
    timer = yield from be.start_statement()
    try:
        portal.result, portal.rows = yield Call(be.run, (stmt.statement, portal.params))
    finally:
        yield from be.end_statement(timer)


def run_point(be, portal: Portal) -> bool:
    """Run a cached primary-key point read right here, without a pool call (see
    Session.execute_point): it is bounded in-memory work, cheaper than the trip to the
    thread pool and back. False (nothing done) for anything else, or while a portal still
    streams (the session must first settle it, which is not bounded work)."""
    if be.streaming():
        return False
    stmt = portal.statement
    be.tx.check(stmt.statement)
    result = be.session.execute_point(stmt.sql, portal.params)
    if result is None:
        return False
    portal.result, portal.rows = result, Rows(result)
    portal.rows.fill(be.config.batch_rows)
    return True


def on_execute(be, msg: P.Execute):
    portal = _portal(be, msg.portal)
    stmt = portal.statement
    if portal.result is None:
        if stmt.kind == "empty":
            be.send(P.empty_query_response())
            return
        if stmt.kind == "copy":
            timer = yield from be.start_statement()
            try:
                be.tx.check(stmt.statement)
                if not (yield from copy_flow.copy(be, stmt.statement, 0)):
                    be.ext_error = True
            finally:
                yield from be.end_statement(timer)
            portal.result = StatementResult("COPY")
            portal.executed = True
            return
        yield from run_portal(be, portal)
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
    timer = yield from be.start_statement()
    try:
        ok = yield from send_result(be, result, fmts, announced, describe=False, rows=rows,
                                    limit=max(msg.max_rows, 0))
    finally:
        yield from be.end_statement(timer)
    if not ok:
        be.ext_error = True
