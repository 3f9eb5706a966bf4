"""The protocol core (wire/backend.py) driven directly: frontend messages in, backend bytes
and effects out - no socket, no event loop, no thread pool.

The host is a real `wire.server.Server` (never started: no listener) over a real database;
`Driver` performs the effects the way the asyncio adapter does, synchronously: a Call runs
inline, RECEIVE takes the next scripted message, a Timer is recorded. Each test checks
both what the client would receive and which effects the core asked for."""

from __future__ import annotations

import ast
import pathlib
import struct

import pytest

import wire

from kudusql.session import Database
from wire import protocol as P
from wire.auth import UserStore
from wire.backend import Backend
from wire.effects import (
    Call,
    CancelTimer,
    Fatal,
    Flush,
    Join,
    Receive,
    Spawn,
    Timer,
    Unread,
)
from wire.server import Server, ServerConfig


class Driver:
    """The adapter's job without I/O: perform effects, collect the bytes."""

    def __init__(self, be: Backend):
        self.be = be
        self.inbox: list = []          # what RECEIVE hands out, in order
        self.unread: list = []
        self.effects: list = []
        self.timers: list = []

    def perform(self, effect):
        self.effects.append(type(effect))
        t = type(effect)
        if t is Call:
            return effect.fn(*effect.args)
        if t is Spawn:
            return effect.fn()
        if t is Join:
            return effect.handle
        if t is Receive:
            return self.inbox.pop(0) if self.inbox else None
        if t is Unread:
            self.unread.append(effect.message)
            return None
        if t is Timer:
            self.timers.append(effect.seconds)
            return object()
        return None                    # Flush, CancelTimer, StartTLS

    def handle(self, msg) -> list[tuple[bytes, bytes]]:
        """Feed one message; the backend messages it produced, as (type, body)."""
        effects = self.be.handle(msg)
        if type(effects) is tuple:
            for e in effects:
                self.perform(e)
        else:
            try:
                effect = next(effects)
                while True:
                    try:
                        value = self.perform(effect)
                    except Exception as exc:  # noqa: BLE001 - thrown in, as the adapter does
                        effect = effects.throw(exc)
                    else:
                        effect = effects.send(value)
            except StopIteration:
                pass
        return messages(self.be.data_to_send())


def messages(data: bytes) -> list[tuple[bytes, bytes]]:
    out, i = [], 0
    while i < len(data):
        kind = data[i:i + 1]
        (n,) = struct.unpack(">i", data[i + 1:i + 5])
        out.append((kind, data[i + 5:i + 1 + n]))
        i += 1 + n
    return out


def kinds(msgs) -> bytes:
    return b"".join(k for k, _ in msgs)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    db = Database.open(str(tmp_path_factory.mktemp("backend") / "db"), maintenance=False)
    server = Server(db, ServerConfig(port=0))
    yield server
    server.pool.shutdown()
    db.close()


@pytest.fixture
def drv(host):
    pid, secret = host.new_backend_key()
    be = Backend(host, host.config, pid, secret, peer="test")
    d = Driver(be)
    greeting = d.handle(P.StartupMessage(3, 0, {"user": "kudusql", "database": "kudusql"}))
    # AuthenticationOk, ParameterStatus..., BackendKeyData, ReadyForQuery 'I'
    assert greeting[0] == (b"R", b"\x00\x00\x00\x00")
    assert greeting[-2][0] == b"K" and greeting[-1] == (b"Z", b"I")
    assert Flush in d.effects and be.phase == "ready"
    host.register(be.conn)
    yield d
    host.unregister(be.conn)
    be.close()


def test_simple_query_runs_in_the_pool_and_answers(drv):
    drv.effects.clear()
    out = drv.handle(P.Query("SELECT 1 AS a, 'x' AS b"))
    assert kinds(out) == b"TDCZ"
    assert out[1][1].endswith(b"\x00\x00\x00\x011\x00\x00\x00\x01x")
    assert out[2][1] == b"SELECT 1\x00" and out[3] == (b"Z", b"I")
    assert drv.effects == [Call]            # the statement ran off the event loop


def test_extended_error_skips_to_sync(drv):
    assert drv.handle(P.Parse("", "SELECT 1/0", ())) == [(b"1", b"")]
    out = drv.handle(P.Bind("", "", (), (), ()))
    assert kinds(out) == b"2"
    out = drv.handle(P.Execute("", 0))
    assert kinds(out) == b"E" and b"C22012" in out[0][1]
    assert drv.be.ext_error
    drv.effects.clear()
    # everything up to Sync is skipped: no bytes, no effects
    assert drv.handle(P.Parse("", "SELECT 2", ())) == []
    assert drv.handle(P.Execute("", 0)) == [] and drv.effects == []
    assert drv.handle(P.Sync()) == [(b"Z", b"I")] and not drv.be.ext_error


def test_describe_then_execute_with_row_limit_suspends(drv):
    drv.handle(P.Parse("s", "SELECT * FROM (VALUES (1), (2), (3)) AS v(x)", ()))
    out = drv.handle(P.Describe("S", "s"))
    assert kinds(out) == b"tT"
    drv.handle(P.Bind("p", "s", (), (), ()))
    assert kinds(drv.handle(P.Execute("p", 2))) == b"DDs"     # PortalSuspended
    assert kinds(drv.handle(P.Execute("p", 0))) == b"DC"      # resumed, not re-run
    assert kinds(drv.handle(P.Sync())) == b"Z"
    assert "p" not in drv.be.portals                         # the implicit transaction ended


def test_copy_from_stdin_receives_its_data(drv):
    drv.handle(P.Query("CREATE TABLE bk (k INT PRIMARY KEY, v STRING) "
                       "PARTITION BY HASH (k) PARTITIONS 2"))
    drv.inbox = [P.CopyData(b"1\tone\n2\t"), P.CopyData(b"two\n"), P.Flush(), P.CopyDone()]
    drv.effects.clear()
    out = drv.handle(P.Query("COPY bk FROM STDIN"))
    assert kinds(out) == b"GCZ" and out[1][1] == b"COPY 2\x00"
    assert drv.effects.count(Receive) == 4 and not drv.inbox
    out = drv.handle(P.Query("SELECT v FROM bk ORDER BY k"))
    assert [body[6:] for k, body in out if k == b"D"] == [b"one", b"two"]


def test_copy_in_puts_back_an_unexpected_message(drv):
    drv.handle(P.Query("CREATE TABLE bk2 (k INT PRIMARY KEY) "
                       "PARTITION BY HASH (k) PARTITIONS 2"))
    stray = P.Query("SELECT 1")
    drv.inbox = [P.CopyData(b"1\n"), stray]
    out = drv.handle(P.Query("COPY bk2 FROM STDIN"))
    assert kinds(out) == b"GEZ" and b"C08P01" in out[1][1]
    assert drv.unread == [stray]            # handled after the COPY, as PostgreSQL does


def test_statement_timeout_arms_and_disarms_a_timer(drv):
    drv.handle(P.Query("SET statement_timeout = '5s'"))
    drv.effects.clear()
    drv.timers.clear()
    assert kinds(drv.handle(P.Query("SELECT 1"))) == b"TDCZ"
    assert drv.timers == [5.0]
    assert drv.effects == [Timer, Call, CancelTimer]
    assert not drv.be.running


def test_failed_block_refuses_until_rollback(drv):
    drv.handle(P.Query("BEGIN"))
    out = drv.handle(P.Query("SELECT 1/0"))
    assert out[-1] == (b"Z", b"E")
    out = drv.handle(P.Query("SELECT 1"))
    assert b"C25P02" in out[0][1] and out[-1] == (b"Z", b"E")
    assert drv.handle(P.Query("ROLLBACK"))[-1] == (b"Z", b"I")


def test_startup_without_user_is_fatal(host):
    be = Backend(host, host.config, 1, 2, peer="test")
    with pytest.raises(Fatal) as e:
        be.handle(P.StartupMessage(3, 0, {"database": "kudusql"}))
    assert e.value.sqlstate == "28000"


def test_terminate_closes(drv):
    assert drv.handle(P.Terminate()) == [] and drv.be.closed


def test_password_rounds_are_a_phase_of_handle(host):
    users = UserStore(None)
    users.set_password("kudusql", "secret")
    server = Server(host.db, ServerConfig(port=0, auth="password"), users=users)
    try:
        for password, ok in ((b"secret\0", True), (b"wrong\0", False)):
            d = Driver(Backend(server, server.config, 1, 2, peer="test"))
            out = d.handle(P.StartupMessage(3, 0, {"user": "kudusql"}))
            assert out == [(b"R", b"\x00\x00\x00\x03")]     # AuthenticationCleartextPassword
            assert d.be.phase == "auth" and d.be.session is None
            if ok:
                out = d.handle(P.PasswordMessage(password))
                assert out[0] == (b"R", b"\x00\x00\x00\x00") and out[-1] == (b"Z", b"I")
                assert Call in d.effects and d.be.phase == "ready"
            else:
                with pytest.raises(Fatal) as e:
                    d.handle(P.PasswordMessage(password))
                assert e.value.sqlstate == "28P01" and d.be.session is None
            server.unregister(d.be.conn)
    finally:
        server.pool.shutdown()


CORE = ("backend", "effects", "startup", "simple_query", "extended_query", "results",
        "copy_flow")
IO_MODULES = {"asyncio", "socket", "ssl", "selectors", "threading", "concurrent"}


def io_imports(source: str) -> set[str]:
    """The I/O and concurrency modules a source file imports (at any depth)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & IO_MODULES


def test_the_core_does_no_io():
    """The sans-I/O contract, checked on the source: no part of the core imports asyncio,
    sockets, TLS or threads (the adapter, wire/connection.py, does all of that)."""
    root = pathlib.Path(wire.__file__).parent
    for name in CORE:
        assert io_imports((root / f"{name}.py").read_text()) == set(), name
    # the check bites: the adapter is the one that does I/O
    assert "asyncio" in io_imports((root / "connection.py").read_text())
