"""The startup phase of the protocol core: from the first packet to the first ReadyForQuery.

    [SSLRequest -> 'N' | 'S' + TLS] [GSSENCRequest -> 'N'] StartupMessage
    -> [NegotiateProtocolVersion] -> connection limit (FATAL 53300)
    -> authentication (wire.auth): trust, or AuthenticationXxx / PasswordMessage rounds
    -> AuthenticationOk, ParameterStatus x 13 (wire.settings.REPORTED), BackendKeyData,
       ReadyForQuery 'I'
    a CancelRequest instead: cancel that backend's statement, close, no reply

`handle(be, message)` is `Backend.handle` while `be.phase` is STARTUP or AUTH; like every
handler of the core it returns the effects it needs (wire/effects.py), here a generator or
`()`. Each PasswordMessage is one step of the authenticator (a Call: SCRAM's key
derivation takes milliseconds, off the event loop). Anything unexpected, or a refused
login, is `Fatal` (the adapter sends FATAL and closes). When the session is established
the phase turns READY and the session's handlers are registered (`Backend.established`).
"""
from __future__ import annotations

import logging

from planner.errors import SqlError
from planner.guard import format_bytes
from wire import auth as A
from wire import protocol as P
from wire.effects import FLUSH, START_TLS, Call, Fatal
from wire.settings import REPORTED, Settings

log = logging.getLogger("kudusql.wire")

STARTUP, AUTH, READY = "startup", "auth", "ready"


def handle(be, msg):
    if be.phase == AUTH:
        return _password(be, msg)
    match msg:
        case P.SSLRequest():
            if be.host.ssl_context is not None and not be.tls:
                return _start_tls(be)
            be.send(b"N")
            return (FLUSH,)
        case P.GSSENCRequest():
            be.send(b"N")
            return (FLUSH,)
        case P.CancelRequest(pid=pid, secret=secret):
            be.host.cancel(pid, secret)
            be.closed = True
            return ()
        case P.StartupMessage():
            return _start_session(be, msg)
        case _:
            raise Fatal("unexpected message during startup", "08P01")


def _start_tls(be):
    yield START_TLS          # the adapter refuses bytes that came before the upgrade
    be.tls = True


def _start_session(be, msg: P.StartupMessage):
    params = dict(msg.params)
    unknown = [k for k in params if k.startswith("_pq_.")]
    if msg.minor > 0 or unknown:
        be.send(P.negotiate_protocol_version(0, unknown))
        for k in unknown:
            params.pop(k)
    user = params.get("user")
    if not user:
        raise Fatal("no PostgreSQL user name specified in startup packet", "28000")
    be.user = user
    be.database = params.get("database") or user
    if be.config.require_tls and not be.tls:
        raise Fatal("this server requires SSL/TLS connections", "28000")
    if not be.host.register(be.conn):
        raise Fatal("sorry, too many clients already", "53300")
    be.registered = True
    record = be.host.users.get(user)
    be.startup_params, be.login_record = params, record
    method = be.host.auth_method(be.conn)
    if method == "trust":
        if record is None:
            raise Fatal(f'role "{user}" does not exist', "28000")
        return _established(be)
    be.authenticator = A.authenticator(method, record, user)
    be.send(be.authenticator.start())
    be.phase = AUTH
    return ()


def _password(be, msg):
    if not isinstance(msg, P.PasswordMessage):
        raise Fatal("expected a password response", "08P01")
    try:
        reply, done = yield Call(be.authenticator.step, (msg.data,))
    except A.AuthFailed as e:
        raise Fatal(e.message, e.sqlstate) from None
    be.send(reply)
    if done:
        be.authenticator = None
        yield from _established(be)


def _established(be):
    """Authenticated: the login check, settings, the session, and the greeting."""
    record = be.login_record
    if record is not None and not record.login:
        raise Fatal(f'role "{be.user}" is not permitted to log in', "28000")
    be.superuser = bool(record and record.superuser)
    params = be.startup_params
    limit = getattr(be.host.db, "query_mem_limit", None)
    if limit is not None:       # the server's default; a startup parameter overrides it
        params.setdefault("query_mem_limit", format_bytes(limit))
    try:
        be.settings = Settings(params, user=be.user, superuser=be.superuser,
                               port=be.host.port)
    except SqlError as e:
        raise Fatal(e.message, e.sqlstate) from None
    be.settings.live["transaction_read_only"] = lambda: "on" if be.tx.read_only else "off"
    be.established()
    be.send(P.auth_ok())
    for name in REPORTED:
        be.send(P.parameter_status(name, be.settings.values[name]))
    be.send(P.backend_key_data(be.pid, be.secret))
    be.send(P.ready_for_query(b"I"))
    yield FLUSH
    log.debug("pid %d: %s connected as %s", be.pid, be.peer, be.user)
