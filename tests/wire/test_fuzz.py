"""Protocol fuzzing from fixed seeds: random and mutated frontend message streams.

1. The codec alone: any byte string fed in any chunking either decodes or raises
   ProtocolViolation - nothing else.
2. The live server: mutated versions of real message sequences (simple and extended
   query, COPY, auth-less startup variations) sent over real sockets, several clients at
   once. The server must answer or close each connection, never crash a handler (no
   "connection ... failed" log record) and keep serving a well-behaved client.

3. At scale (tests/wire/fuzz_scale.py): a slice against a real `kudusql serve` process, with
   generated SQL, a canary session and RSS samples; the full runs are its command line.

A few seconds by default (the slice ~30 s); KUDUSQL_LONG=1 runs many more iterations.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import random
import socket
import struct

import pytest

from wire import protocol as P

LONG = os.environ.get("KUDUSQL_LONG") == "1"


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def startup(user: str = "kudusql", extra: bytes = b"") -> bytes:
    body = struct.pack("!i", P.PROTOCOL_3_0) + b"user\0" + user.encode() + b"\0" + extra + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def bind(portal: bytes, stmt: bytes, params: list[bytes | None], fmts=(0,), rfmts=(0,)):
    body = portal + b"\0" + stmt + b"\0" + struct.pack("!h", len(fmts)) + \
        b"".join(struct.pack("!h", f) for f in fmts) + struct.pack("!h", len(params))
    for p in params:
        body += struct.pack("!i", -1) if p is None else struct.pack("!i", len(p)) + p
    return msg(b"B", body + struct.pack("!h", len(rfmts)) +
               b"".join(struct.pack("!h", f) for f in rfmts))


CORPUS = [
    msg(b"Q", b"SELECT 1; SELECT 'a' || 'b'\0"),
    msg(b"Q", b"BEGIN; SELECT k, v FROM fz WHERE k < 5; COMMIT\0"),
    msg(b"Q", b"INSERT INTO fz VALUES (100, 'x'), (1, 'dup')\0"),
    msg(b"Q", b"SET statement_timeout = 50; SHOW statement_timeout; RESET ALL\0"),
    msg(b"Q", b"DECLARE c CURSOR WITH HOLD FOR SELECT * FROM fz; FETCH 2 FROM c; CLOSE c\0"),
    msg(b"P", b"s\0SELECT k, v FROM fz WHERE k = $1\0\0\0") + msg(b"D", b"Ss\0") + msg(b"H") +
    bind(b"p", b"s", [b"\0\0\0\3"], (1,), (1,)) + msg(b"E", b"p\0\0\0\0\1") + msg(b"S"),
    msg(b"P", b"\0SELECT $1::int + 1\0\0\1\0\0\0\x17") +
    bind(b"", b"", [b"41"]) + msg(b"D", b"P\0") + msg(b"E", b"\0\0\0\0\0") + msg(b"S"),
    msg(b"Q", b"COPY fz (k, v) FROM STDIN\0") + msg(b"d", b"200\tc\n201\t\\N\n") + msg(b"c"),
    msg(b"Q", b"COPY fz FROM STDIN (FORMAT binary)\0") +
    msg(b"d", b"PGCOPY\n\xff\r\n\0" + b"\0" * 8 + b"\0\2\0\0\0\4\0\0\1\x2c\xff\xff\xff\xff"
        + b"\xff\xff") + msg(b"c"),
    msg(b"Q", b"COPY (SELECT * FROM fz) TO STDOUT (FORMAT csv, HEADER)\0"),
    msg(b"Q", b"COPY fz FROM STDIN\0") + msg(b"f", b"client gave up\0"),
    msg(b"C", b"Pp\0") + msg(b"C", b"Ss\0") + msg(b"S"),
    msg(b"Q", b"CREATE USER fuzzer PASSWORD 'x'; DROP USER fuzzer\0"),
    msg(b"F", b"\0\0\0\1"),
]


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if not b:
            b += rng.randbytes(rng.randint(1, 8))
            continue
        i = rng.randrange(len(b))
        if op == 0:
            b[i] = rng.randrange(256)
        elif op == 1:
            b[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 2:
            del b[i:i + rng.randint(1, 16)]
        elif op == 3:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 32)]
        elif op == 4:
            del b[i:]
        elif op == 5 and len(b) >= i + 5:       # a length field gets a random value
            b[i + 1:i + 5] = struct.pack("!i", rng.choice([-1, 0, 3, 4, 5, 1 << 20,
                                                           rng.randrange(1 << 16)]))
        else:
            b += rng.choice(CORPUS)
    return bytes(b)


def split(data: bytes) -> list[tuple[bytes, bytes]]:
    out, i = [], 0
    while i + 5 <= len(data):
        n = struct.unpack_from("!i", data, i + 1)[0]
        out.append((data[i:i + 1], data[i + 5:i + 1 + n]))
        i += 1 + n
    return out


_SQL_DAMAGE = [b"'", b"(", b")", b";", b"$1", b"$2", b"\\", b"--", b"/*", b" ", b"\xff",
               b"NULL", b",", b"::int", b"9" * 30, b"E'\\", b"\"", b"COPY", b"FETCH"]


def _damage_sql(rng: random.Random, sql: bytes) -> bytes:
    i = rng.randrange(len(sql) + 1)
    return sql[:i] + rng.choice(_SQL_DAMAGE) + sql[i + rng.randint(0, 3):]


def mutate_bodies(rng: random.Random, data: bytes, sql: bool = True) -> bytes:
    """Keep every message well-formed, damage what it means: SQL text (unless not `sql`),
    statement and portal names, parameter values and formats, row limits."""
    msgs = split(data)
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(msgs))
        kind, body = msgs[k]
        if not sql and kind in (b"Q", b"P"):
            continue
        if kind == b"Q":
            body = _damage_sql(rng, body[:-1]).replace(b"\0", b"") + b"\0"
        elif kind == b"P":
            name, sql, rest = body.split(b"\0", 2)
            body = name + b"\0" + _damage_sql(rng, sql).replace(b"\0", b"") + b"\0" + rest
        elif kind == b"B" and len(body) > 12:
            i = rng.randrange(len(body) - 4, len(body) - 2)   # a value byte near the end
            body = body[:i] + bytes([rng.randrange(256)]) + body[i + 1:]
        elif kind == b"E":
            body = body.split(b"\0")[0] + b"\0" + struct.pack("!i", rng.choice([0, 1, -1, 7]))
        elif kind in (b"D", b"C"):
            body = body[:1] + rng.choice([b"", b"p", b"s", b"nope"]) + b"\0"
        elif kind == b"d":
            body = mutate(rng, body)
        msgs[k] = (kind, body)
    if rng.random() < 0.2:
        rng.shuffle(msgs)
    return b"".join(msg(kind, body) for kind, body in msgs)


def test_decoder_never_raises_anything_but_protocol_violation():
    rng = random.Random(20240601)
    n = 20000 if LONG else 2000
    for _ in range(n):
        if rng.random() < 0.3:
            data = rng.randbytes(rng.randint(0, 64))
        else:
            data = mutate(rng, startup() + b"".join(rng.choices(CORPUS, k=3)))
        d = P.FrontendDecoder(max_message=1 << 16)
        try:
            pos = 0
            while pos < len(data):
                step = rng.randint(1, 64)
                d.feed(data[pos:pos + step])
                pos += step
                while d.next() is not None:
                    pass
        except P.ProtocolViolation:
            pass


def _session(port: int, payload: bytes, timeout: float) -> str:
    """Send the payload, then a well-formed Sync + Query; read until that query's answer,
    EOF or a quiet timeout. Returns how it ended."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(payload + msg(b"S") + msg(b"Q", b"SELECT 'alive'\0"))
            buf = b""
            while True:
                data = s.recv(65536)
                if not data:
                    return "closed"
                buf += data
                if b"alive" in buf:
                    return "answered"
        except TimeoutError:
            return "timeout"
        except (ConnectionResetError, BrokenPipeError):
            return "reset"


def test_live_server_survives_mutated_streams(server, caplog):
    s = server.db.session()
    s.execute("CREATE TABLE fz (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2")
    s.execute("INSERT INTO fz VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    rng = random.Random(7)
    n = 2000 if LONG else 150
    payloads = []
    for _ in range(n):
        body = b"".join(rng.choices(CORPUS, k=rng.randint(1, 4)))
        r = rng.random()
        if r < 0.1:
            payloads.append(mutate(rng, startup() + body))   # the startup packet too
        elif r < 0.4:
            payloads.append(startup() + mutate(rng, body))   # framing damage: FATAL 08P01
        else:
            payloads.append(startup() + mutate_bodies(rng, body))
    caplog.set_level(logging.ERROR, logger="kudusql.wire")
    with cf.ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda p: _session(server.port, p, 1.0), payloads))
    # framing damage closes the connection (FATAL 08P01) or leaves the server waiting for
    # the rest of a message; damage inside messages is answered with errors
    assert outcomes.count("answered") > n // 3, {k: outcomes.count(k) for k in set(outcomes)}
    crashed = [r for r in caplog.records if "failed" in r.getMessage()]
    assert not crashed, crashed[0].getMessage()
    assert server.thread._thread.is_alive()
    assert _session(server.port, startup(), 5.0) == "answered"


@pytest.mark.parametrize("payload", [
    b"\0\0\0\x08\x04\xd2\x16\x2f" + startup(),             # SSLRequest then startup
    b"\0\0\0\x08\x04\xd2\x16\x30" + startup(),             # GSSENCRequest then startup
    startup(extra=b"options\0-c statement_timeout=5s\0_pq_.x\0y\0"),
])
def test_pre_startup_requests(server, payload):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(payload[:8])
        if payload[4:8] in (b"\x04\xd2\x16\x2f", b"\x04\xd2\x16\x30"):
            assert s.recv(1) == b"N"
            payload = payload[8:]
        else:
            s.sendall(payload[8:])
            payload = b""
        s.sendall(payload + msg(b"Q", b"SHOW statement_timeout\0"))
        buf = b""
        while b"Z\0\0\0\5I" not in buf[buf.find(b"T"):] if b"T" in buf else True:
            data = s.recv(65536)
            assert data
            buf += data
        assert b"R\0\0\0\x08\0\0\0\0" in buf


def test_at_scale_slice_against_a_server_process():
    """A slice of tests/wire/fuzz_scale.py (its docstring says what is checked): a real
    `kudusql serve` process, damaged client traffic and generated SQL from several client
    processes, a canary session and RSS samples. ~30 s; KUDUSQL_LONG=1 runs 25x more."""
    from tests.wire.fuzz_scale import run
    scale = 25 if LONG else 1
    rep = run(messages=4000 * scale, statements=1500 * scale, workers=3, bound=10.0,
              seed=20261125, log=lambda s: None)
    m, s, srv = rep["messages"], rep["statements"], rep["server"]
    assert srv["alive_at_end"] and srv["rss_over_limit_after_s"] is None, srv
    assert m["messages"] >= 4000 * scale and m["outcomes"].get("hung", 0) == 0, m["outcomes"]
    assert m["outcomes"].get("answered", 0) > m["connections"] // 4, m["outcomes"]
    assert s["statements"] >= 1500 * scale and s["hung"] == 0 and s["closed"] == 0, s
    assert s["errors"] > s["statements"] // 10          # near-valid statements do fail
    assert not s["leaks"], s["leaks"][:3]
    assert rep["canary"]["bad"] == 0 and rep["canary"]["ok"] > 0, rep["canary"]


def test_hang_detection_bites():
    """The fuzzer's verdicts on a listener that never answers: one that closes on EOF is
    'closed_after_halfclose', one that ignores EOF too is 'hung'."""
    import threading

    from tests.wire.fuzz_scale import _exchange

    def serve(close_on_eof: bool):
        lsock = socket.create_server(("127.0.0.1", 0))

        def loop():
            c, _ = lsock.accept()
            while c.recv(65536) or not close_on_eof:
                if not close_on_eof:
                    threading.Event().wait(3)
                    break
            c.close()
            lsock.close()
        threading.Thread(target=loop, daemon=True).start()
        return lsock.getsockname()[1]

    assert _exchange(serve(True), startup(), bound=1.0, answer_wait=0.2) == \
        "closed_after_halfclose"
    assert _exchange(serve(False), startup(), bound=1.0, answer_wait=0.2) == "hung"
