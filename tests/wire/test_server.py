"""Server-level behaviour: startup parameters, authentication methods and user management,
the connection limit, malformed input (FATAL 08P01, the others keep working), extended
protocol edge cases over a raw socket, SQLAlchemy's dialect initialisation, the CLI's
refusal to expose trust authentication."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import time

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa

from kudusql.cli import main as cli_main
from tests.wire.conftest import start_server, stop_server
from wire import protocol as P
from wire.server import ConfigError, ServerConfig, check_config


# -- a minimal raw client ---------------------------------------------------------------------
class Raw:
    def __init__(self, port: int, user: str = "kudusql", startup: bool = True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        if startup:
            body = struct.pack("!i", P.PROTOCOL_3_0) + b"user\0" + user.encode() + b"\0\0"
            self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
            self.until(b"Z")

    def send(self, kind: bytes, body: bytes = b"") -> None:
        self.sock.sendall(kind + struct.pack("!i", len(body) + 4) + body)

    def recv(self) -> tuple[bytes, bytes] | None:
        while True:
            if len(self.buf) >= 5:
                n = struct.unpack_from("!i", self.buf, 1)[0]
                if len(self.buf) >= n + 1:
                    m = (self.buf[:1], self.buf[5:n + 1])
                    self.buf = self.buf[n + 1:]
                    return m
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data

    def until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        out = []
        while True:
            m = self.recv()
            if m is None:
                return out
            out.append(m)
            if m[0] == kind:
                return out

    def close(self) -> None:
        self.sock.close()


def fields(body: bytes) -> dict[str, str]:
    out = {}
    for part in body.rstrip(b"\0").split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode()
    return out


def test_startup_parameters_and_backend_key(server):
    r = Raw(server.port, startup=False)
    body = struct.pack("!i", P.PROTOCOL_3_0) + b"user\0kudusql\0application_name\0t1\0" \
        b"client_encoding\0'utf-8'\0\0"
    r.sock.sendall(struct.pack("!i", len(body) + 4) + body)
    msgs = r.until(b"Z")
    assert msgs[0] == (b"R", b"\0\0\0\0")
    status = dict(m[1].rstrip(b"\0").decode().split("\0") for m in msgs if m[0] == b"S")
    assert status["server_version"].startswith("15.") and status["client_encoding"] == "UTF8"
    assert status["application_name"] == "t1" and status["integer_datetimes"] == "on"
    assert status["DateStyle"] == "ISO, MDY" and status["standard_conforming_strings"] == "on"
    pid, _ = struct.unpack("!ii", next(m[1] for m in msgs if m[0] == b"K"))
    r.send(b"Q", b"select pg_backend_pid(); SET application_name = 'x'\0")
    msgs = r.until(b"Z")
    row = next(m[1] for m in msgs if m[0] == b"D")
    assert int(row[6:]) == pid
    assert (b"S", b"application_name\0x\0") in msgs
    r.close()


def test_extended_protocol_edge_cases(server):
    r = Raw(server.port)
    # pipeline: Parse/Bind/Describe/Execute x2 with a row limit, then Sync
    r.send(b"P", b"s1\0SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3\0\0\0")
    r.send(b"B", b"p1\0s1\0\0\0\0\0\0\0")
    r.send(b"D", b"Pp1\0")
    r.send(b"E", b"p1\0" + struct.pack("!i", 2))
    r.send(b"E", b"p1\0" + struct.pack("!i", 2))
    r.send(b"S")
    kinds = [m[0] for m in r.until(b"Z")]
    assert kinds == [b"1", b"2", b"T", b"D", b"D", b"s", b"D", b"C", b"Z"]
    # duplicate statement name, unknown portal: error, rest skipped until Sync
    r.send(b"P", b"s1\0SELECT 1\0\0\0")
    r.send(b"E", b"nope\0\0\0\0\0")
    r.send(b"S")
    msgs = r.until(b"Z")
    assert [m[0] for m in msgs] == [b"E", b"Z"] and fields(msgs[0][1])["C"] == "42P05"
    r.send(b"E", b"nope\0\0\0\0\0")
    r.send(b"S")
    msgs = r.until(b"Z")
    assert fields(msgs[0][1])["C"] == "34000"
    # Flush answers without Sync (asyncpg's prepare)
    r.send(b"P", b"s2\0SELECT $1::int\0\0\0")
    r.send(b"D", b"Ss2\0")
    r.send(b"H")
    msgs = [r.recv() for _ in range(3)]
    assert [m[0] for m in msgs] == [b"1", b"t", b"T"]
    assert msgs[1][1] == b"\0\1\0\0\0\x17"           # int4
    # a Bind with one format code and no parameters (asyncpg), Close, Sync
    r.send(b"B", b"\0s2\0\0\1\0\1\0\0\0\0")
    r.send(b"C", b"Ss2\0")
    r.send(b"S")
    msgs = r.until(b"Z")
    assert fields(msgs[0][1])["C"] == "08P01"       # 1 parameter required, 0 given
    # empty query, stray copy messages are ignored
    r.send(b"d", b"junk")
    r.send(b"c")
    r.send(b"Q", b"\0")
    assert [m[0] for m in r.until(b"Z")] == [b"I", b"Z"]
    r.close()


def test_transaction_status_and_failed_block(server):
    r = Raw(server.port)
    r.send(b"Q", b"BEGIN; SELECT 1\0")
    assert r.until(b"Z")[-1] == (b"Z", b"T")
    r.send(b"Q", b"SELECT nosuch_column\0")
    msgs = r.until(b"Z")
    assert msgs[-1] == (b"Z", b"E")
    r.send(b"Q", b"SELECT 1\0")
    msgs = r.until(b"Z")
    assert fields(msgs[0][1])["C"] == "25P02" and msgs[-1] == (b"Z", b"E")
    r.send(b"Q", b"ROLLBACK\0")
    msgs = r.until(b"Z")
    notice = next(m for m in msgs if m[0] == b"N")
    assert fields(notice[1])["S"] == "WARNING" and "not undo" in fields(notice[1])["M"]
    assert msgs[-1] == (b"Z", b"I")
    r.close()


def test_malformed_message_is_fatal_08P01_and_others_keep_working(server):
    good = Raw(server.port)
    bad = Raw(server.port)
    bad.sock.sendall(b"Q\0\0\0\2")                    # length < 4
    msgs = bad.until(b"Z")
    assert len(msgs) == 1 and fields(msgs[0][1])["S"] == "FATAL" and \
        fields(msgs[0][1])["C"] == "08P01"
    assert bad.recv() is None                         # closed
    bad2 = Raw(server.port)
    bad2.send(b"Q", b"no terminator")
    assert fields(bad2.until(b"Z")[0][1])["C"] == "08P01"
    good.send(b"Q", b"SELECT 42\0")
    assert any(m[0] == b"D" and m[1].endswith(b"42") for m in good.until(b"Z"))
    good.close()


def test_connection_limit(tmp_path):
    r = start_server(tmp_path / "db", max_connections=2)
    try:
        a, b = Raw(r.port), Raw(r.port)
        c = Raw(r.port, startup=False)
        body = struct.pack("!i", P.PROTOCOL_3_0) + b"user\0kudusql\0\0"
        c.sock.sendall(struct.pack("!i", len(body) + 4) + body)
        f = fields(c.until(b"Z")[0][1])
        assert f["C"] == "53300" and f["S"] == "FATAL"
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            psycopg.connect(r.dsn())
        a.close()
        for _ in range(50):                             # the slot frees up
            try:
                with psycopg.connect(r.dsn()) as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
                break
            except psycopg.OperationalError:
                time.sleep(0.02)
        else:
            pytest.fail("slot not released")
        b.close()
    finally:
        stop_server(r)


@pytest.mark.parametrize("method", ["scram-sha-256", "md5", "password"])
def test_password_authentication(tmp_path, method):
    r = start_server(tmp_path / "db", auth=method)
    try:
        r.server.users.set_password("kudusql", "s3cret")
        with psycopg.connect(r.dsn(password="s3cret")) as c:
            assert c.execute("SELECT current_user").fetchone() == ("kudusql",)
            c.execute("CREATE USER alice WITH PASSWORD 'pw1'")
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(r.dsn(password="wrong"))
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(r.dsn(user="nobody", password="x"))

        async def apg():
            c = await asyncpg.connect(**r.asyncpg_kw(user="alice", password="pw1"))
            try:
                assert await c.fetchval("SELECT session_user") == "alice"
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await c.execute("CREATE USER mallory")
                await c.execute("ALTER USER alice PASSWORD 'pw2'")
            finally:
                await c.close()
            with pytest.raises(asyncpg.InvalidPasswordError):
                await asyncpg.connect(**r.asyncpg_kw(user="alice", password="pw1"))
            c = await asyncpg.connect(**r.asyncpg_kw(user="alice", password="pw2"))
            await c.close()
        asyncio.run(apg())
        with psycopg.connect(r.dsn(password="s3cret"), autocommit=True) as c:
            c.execute("DROP USER alice")
            with pytest.raises(psycopg.errors.UndefinedObject):
                c.execute("DROP USER alice")
            c.execute("DROP USER IF EXISTS alice")
    finally:
        stop_server(r)
    # users.json survives a restart
    r = start_server(tmp_path / "db", auth=method)
    try:
        with psycopg.connect(r.dsn(password="s3cret")) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
    finally:
        stop_server(r)


def test_trust_refuses_unknown_roles(server):
    with pytest.raises(psycopg.OperationalError, match='role "ghost" does not exist'):
        psycopg.connect(server.dsn(user="ghost"))


def test_sqlalchemy_dialect_initialisation_and_text_queries(server):
    s = server.db.session()
    s.execute("CREATE TABLE sa_t (id INT PRIMARY KEY, name STRING) PARTITION BY HASH (id) "
              "PARTITIONS 2")
    for url in (f"postgresql+psycopg://kudusql@127.0.0.1:{server.port}/kudusql",
                f"postgresql+asyncpg://kudusql@127.0.0.1:{server.port}/kudusql"):
        if "asyncpg" in url:
            from sqlalchemy.ext.asyncio import create_async_engine

            async def go(url=url):
                eng = create_async_engine(url)
                async with eng.begin() as conn:
                    await conn.execute(sa.text("INSERT INTO sa_t VALUES (:i, :n)"),
                                       [{"i": 10, "n": "x"}, {"i": 11, "n": "y"}])
                    rows = await conn.execute(sa.text("SELECT id, name FROM sa_t WHERE id > :i"
                                                      " ORDER BY id"), {"i": 9})
                    assert rows.all() == [(10, "x"), (11, "y")]
                await eng.dispose()
            asyncio.run(go())
        else:
            eng = sa.create_engine(url)
            with eng.begin() as conn:
                assert eng.dialect.server_version_info[:1] == (15,)
                conn.execute(sa.text("INSERT INTO sa_t VALUES (:i, :n)"), {"i": 1, "n": "a"})
                assert conn.execute(sa.text("SELECT name FROM sa_t WHERE id = :i"),
                                    {"i": 1}).scalar() == "a"
            eng.dispose()


def test_trust_on_a_public_address_is_refused(capsys):
    with pytest.raises(ConfigError, match="trust"):
        check_config(ServerConfig(host="0.0.0.0"))
    check_config(ServerConfig(host="0.0.0.0", auth="scram-sha-256"))
    check_config(ServerConfig(host="127.0.0.1,::1"))
    assert cli_main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "refusing to listen" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")
def test_tls(tmp_path):
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    r = start_server(tmp_path / "db", tls_cert=str(cert), tls_key=str(key), require_tls=True)
    try:
        with psycopg.connect(r.dsn(sslmode="require")) as c:
            assert c.pgconn.ssl_in_use
            assert c.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="requires SSL"):
            psycopg.connect(r.dsn(sslmode="disable"))

        async def apg():
            ctx = ssl.create_default_context(cafile=str(cert))
            ctx.check_hostname = False
            c = await asyncpg.connect(**r.asyncpg_kw(ssl=ctx))
            try:
                assert await c.fetchval("SELECT 2") == 2
            finally:
                await c.close()
        asyncio.run(apg())
    finally:
        stop_server(r)
