"""The connection's frame handling under any split of the client's byte stream.

The server reads frames straight from its receive buffer (wire/backend.py `feed` /
`handle_next`, wire/fastpath.py's hot cases reading the frames after a Bind where they
lie), so where TCP happens to cut the stream must not matter. A client script - startup,
simple queries, prepared point reads and key writes (hot cases), pipelined INSERT
batches with a failing row, errors skipped to Sync, a COPY FROM STDIN sent without
waiting, Flush, row limits - is sent in one piece (the reference) and then cut at random
points: one byte per write, small random pieces, several messages per piece. Every run
must get the same reply bytes (BackendKeyData's random key masked). The hot cases
decline a Bind whose following frames have not all arrived, so split runs also compare
them against the ordinary path."""

from __future__ import annotations

import random
import socket
import struct
import threading

import pytest

from tests.wire.conftest import start_server, stop_server
from tests.wire.raw_client import (
    INT8,
    SYNC,
    _cstr,
    _msg,
    bind,
    describe_portal,
    describe_statement,
    execute,
    parse,
)
from wire import fastpath
from wire.backend import Backend


def _q(sql: str) -> bytes:
    return _msg(b"Q", _cstr(sql))


def _script(rng: random.Random) -> bytes:
    body = struct.pack("!i", 196608) + _cstr("user") + _cstr("kudusql") + \
        _cstr("database") + _cstr("kudusql") + b"\0"
    out = [struct.pack("!i", len(body) + 4) + body]
    out += [_q("DROP TABLE IF EXISTS sp"),
            _q("CREATE TABLE sp (k BIGINT NOT NULL, v BIGINT, s TEXT, PRIMARY KEY (k)) "
               "PARTITION BY HASH (k) PARTITIONS 2"),
            _q("INSERT INTO sp VALUES " + ", ".join(f"({k}, {k * 10}, 's{k}')"
                                                     for k in range(20)))]
    out.append(parse("r", "SELECT v, s FROM sp WHERE k = $1", (INT8,)) +
               describe_statement("r") + SYNC)
    out.append(parse("u", "UPDATE sp SET v = v + $2 WHERE k = $1", ()) +
               describe_statement("u") + SYNC)
    ins = parse("", "INSERT INTO sp VALUES ($1, $2, $3)", ())
    for i in range(40):
        r = rng.random()
        k = rng.randrange(25)
        if r < 0.35:                      # a point read (hot), maybe described, maybe binary
            binary = rng.random() < 0.5
            v = [struct.pack("!q", k)] if binary else [str(k)]
            msg = bind("r", v, binary, rng.choice([(), (1,), (0, 1)]))
            if rng.random() < 0.5:
                msg += describe_portal()
            out.append(msg + execute(rng.choice([0, 1])) + SYNC)
        elif r < 0.6:                     # a key write (hot once its read is cached)
            msg = bind("u", [str(k), str(rng.randrange(5))])
            if rng.random() < 0.5:
                msg += describe_portal()
            out.append(msg + execute() + SYNC)
        elif r < 0.75:                    # a pipelined batch, sometimes a duplicate key
            base = 1000 + 100 * i
            keys = [base + j for j in range(rng.randrange(2, 8))]
            if rng.random() < 0.4:
                keys.insert(rng.randrange(1, len(keys)), rng.randrange(20))
            msg = ins
            for kk in keys:
                msg += bind("", [str(kk), str(kk), f"b{kk}"]) + describe_portal() + \
                    execute()
            out.append(msg + SYNC)
        elif r < 0.82:                    # an error in a pipeline: skipped to Sync
            out.append(bind("nope", []) + execute() + bind("r", [str(k)]) + execute() +
                       SYNC)
        elif r < 0.88:                    # Flush answers before Sync
            out.append(bind("r", [str(k)]) + execute() + _msg(b"H", b"") + SYNC)
        elif r < 0.94:                    # COPY FROM STDIN sent without waiting
            rows = "".join(f"{5000 + 10 * i + j}\t{j}\tc{j}\n" for j in range(3))
            out.append(_q("COPY sp FROM STDIN") + _msg(b"d", rows.encode()) +
                       _msg(b"c", b""))
        else:
            out.append(_q(f"SELECT count(*), sum(v) FROM sp WHERE k < {k}"))
    out.append(_q("SELECT k, v, s FROM sp ORDER BY k"))
    out.append(_msg(b"X", b""))
    return b"".join(out)


def _mask_key(reply: bytes) -> bytes:
    """BackendKeyData ('K', 12 bytes: pid and secret) is random per connection."""
    i = reply.find(b"K\0\0\0\x0c")
    return reply if i < 0 else reply[:i + 5] + b"\0" * 8 + reply[i + 13:]


def _run(port: int, data: bytes, cuts: list[int]) -> bytes:
    """Send `data` cut at `cuts`, read every reply byte until the server closes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    got: list[bytes] = []

    def reader():
        while True:
            try:
                b = sock.recv(65536)
            except OSError:
                return
            if not b:
                return
            got.append(b)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        prev = 0
        for c in cuts + [len(data)]:
            if c > prev:
                sock.sendall(data[prev:c])
                prev = c
        t.join(60)
    finally:
        sock.close()
    assert not t.is_alive(), "the server did not close the connection after Terminate"
    return _mask_key(b"".join(got))


def _cuts(rng: random.Random, n: int, mode: str) -> list[int]:
    if mode == "bytes":
        return list(range(1, n))
    if mode == "small":
        out, p = [], 0
        while p < n:
            p += rng.randrange(1, 40)
            out.append(p)
        return out
    return sorted(rng.sample(range(1, n), min(n - 1, rng.randrange(3, 30))))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("split") / "db")
    yield r
    stop_server(r)


@pytest.mark.parametrize("seed", range(3))
def test_split_stream_same_replies(server, seed, monkeypatch):
    answered = {}
    real = fastpath.on_bind

    def counting(be, fields, end):
        out = real(be, fields, end)
        key = "hot" if out is not None else "ordinary"
        answered[key] = answered.get(key, 0) + 1
        return out
    monkeypatch.setattr(fastpath, "on_bind", counting)
    rng = random.Random(seed)
    data = _script(rng)
    _run(server.port, data, [])           # the table exists from here on (DROP's NOTICE)
    answered.clear()
    whole = _run(server.port, data, [])
    assert whole.count(b"Z\0\0\0\x05") > 40 and b"E\0" in whole   # it did run, errors too
    assert answered.get("hot", 0) > 10, answered        # the hot cases answered
    for mode in ("pieces", "small", "bytes" if seed == 0 else "pieces"):
        split = _run(server.port, data, _cuts(rng, len(data), mode))
        assert split == whole, mode


def test_split_checker_bites(server, monkeypatch):
    """Break the receive buffer on purpose (bytes of a frame cut by TCP are dropped when
    the next piece arrives): the split runs must notice."""
    rng = random.Random(5)
    data = _script(rng)
    _run(server.port, data, [])
    whole = _run(server.port, data, [])

    def broken_feed(self, data):
        self.inbuf, self.rpos = data, 0
    monkeypatch.setattr(Backend, "feed", broken_feed)
    split = _run_bounded(server.port, data, _cuts(rng, len(data), "small"))
    with pytest.raises(AssertionError):
        assert split == whole


def _run_bounded(port: int, data: bytes, cuts: list[int]) -> bytes:
    """`_run` for a server that may never answer or hang up early (the broken one)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=3)
    got = []
    try:
        prev = 0
        try:
            for c in cuts + [len(data)]:
                sock.sendall(data[prev:c])
                prev = c
        except OSError:
            pass                        # it hung up (FATAL on what it misread)
        while True:
            try:
                b = sock.recv(65536)
            except OSError:
                break
            if not b:
                break
            got.append(b)
    finally:
        sock.close()
    return _mask_key(b"".join(got))
