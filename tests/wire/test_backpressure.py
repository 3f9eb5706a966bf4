"""Back-pressure of the asyncio Protocol (wire/connection.py): a client that does not read
its result must slow the server down, not fill its memory.

A raw client asks for a result of tens of megabytes and does not read for a while: the
bytes the server has handed to its transport but not sent stay near the transport's
high-water mark plus one batch (`pause_writing` parks the core at its next FLUSH until
`resume_writing`), far below the result's size. Then the client reads everything and
gets every row."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.wire.conftest import start_server, stop_server
from tests.wire.raw_client import _cstr, _msg

ROWS = 300_000
WIDTH = 100


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("backpressure") / "db")
    yield r
    stop_server(r)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    body = struct.pack("!i", 196608) + _cstr("user") + _cstr("kudusql") + \
        _cstr("database") + _cstr("kudusql") + b"\0"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    return sock


def _read_until_ready(sock: socket.socket, count: int = 1) -> bytes:
    buf = b""
    while buf.count(b"Z\0\0\0\x05") < count:
        data = sock.recv(1 << 20)
        assert data, "the server closed the connection"
        buf += data
    return buf


def _stalled_pending(server) -> int:
    """Bytes waiting in the server's transport while the client does not read a ~37 MB
    result; then the result is read to its end and checked."""
    sock = _connect(server.port)
    try:
        _read_until_ready(sock)
        sock.sendall(_msg(b"Q", _cstr(
            f"CREATE TABLE IF NOT EXISTS big PRIMARY KEY (k) AS SELECT i * 100 + j AS k, "
            f"repeat('x', {WIDTH}) AS s FROM generate_series(1, {ROWS // 30}) AS a(i), "
            f"generate_series(0, 29) AS b(j)")))
        assert b"SERROR" not in _read_until_ready(sock)
        sock.sendall(_msg(b"Q", _cstr("SELECT k, s FROM big")))
        time.sleep(3)                               # not reading: the server must wait
        conns = list(server.thread.server.connections.values())
        pending = max(c.transport.get_write_buffer_size() for c in conns)
        got = b""
        while not got.endswith(b"Z\0\0\0\x05I"):
            got += sock.recv(1 << 20)
        assert got.count(b"D\0") >= ROWS and f"SELECT {ROWS}".encode() in got
        return pending
    finally:
        sock.close()


def test_a_client_that_does_not_read_slows_the_server(server):
    assert _stalled_pending(server) < ROWS * WIDTH / 4


def test_backpressure_checker_bites(server, monkeypatch):
    """Without pause_writing the whole result piles up in the transport: noticed."""
    from wire.connection import Connection
    monkeypatch.setattr(Connection, "pause_writing", lambda self: None)
    assert _stalled_pending(server) >= ROWS * WIDTH / 4
