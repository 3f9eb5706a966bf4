"""Regression: a hot key write whose input buffer is compacted while it waits.

wire/fastpath.py `key_write` answers from the receive buffer and consumes its frames only
once the write is durable (so that a row CHANGED since its read can be left to the
ordinary path). Bytes the client sends meanwhile are appended by `Backend.feed`, which
first drops what was consumed before and moves the read position to 0; an end offset
kept as an absolute position then pointed past the next message's start, and the
server answered the next statement with "invalid frontend message type" (08P01),
seen as a 1-in-3 failure of tests/wire/test_split_stream.py's byte-by-byte run. Here
the same order of events is forced: no socket, the protocol core driven directly."""

from __future__ import annotations

import struct

import pytest

from kudusql.session import Database
from tests.wire.raw_client import SYNC, _cstr, _msg, bind, describe_statement, execute, parse
from tests.wire.test_backend import Driver, messages
from wire import protocol as P
from wire.backend import Backend
from wire.effects import NEED_INPUT, Durable
from wire.server import Server, ServerConfig


@pytest.fixture
def drv(tmp_path):
    db = Database.open(str(tmp_path / "db"), maintenance=False)
    server = Server(db, ServerConfig(port=0))
    pid, secret = server.new_backend_key()
    be = Backend(server, server.config, pid, secret, peer="test")
    d = Driver(be)
    body = struct.pack("!i", 196608) + _cstr("user") + _cstr("kudusql") + \
        _cstr("database") + _cstr("kudusql") + b"\0"
    be.feed(struct.pack("!i", len(body) + 4) + body)   # the startup packet, as framed
    server.register(be.conn)
    assert (b"Z", b"I") in _run_ready(d)
    yield d
    server.unregister(be.conn)
    be.close()
    server.pool.shutdown()
    db.close()


def _run_ready(d: Driver) -> list:
    """Handle every complete buffered message, performing effects inline; the replies."""
    while True:
        effects = d.be.handle_next()
        if effects is NEED_INPUT:
            return messages(d.be.data_to_send())
        _perform(d, effects)


def _perform(d: Driver, effects, before_durable=None) -> None:
    if type(effects) is tuple:
        for e in effects:
            d.perform(e)
        return
    try:
        effect = next(effects)
        while True:
            if type(effect) is Durable:
                if before_durable is not None:
                    before_durable()
                effect = effects.send(effect.finish())
                continue
            effect = effects.send(d.perform(effect))
    except StopIteration:
        pass


def test_key_write_survives_a_compaction_while_it_waits(drv):
    d = drv
    for sql in ("CREATE TABLE kw (k BIGINT NOT NULL, v BIGINT, PRIMARY KEY (k)) "
                "PARTITION BY HASH (k) PARTITIONS 2",
                "INSERT INTO kw VALUES (1, 10), (2, 20)"):
        d.handle(P.Query(sql))
    d.be.data_to_send()
    upd = parse("u", "UPDATE kw SET v = v + 1 WHERE k = $1", ()) + describe_statement("u") + SYNC
    d.be.feed(upd)
    _run_ready(d)
    write = bind("u", ["1"]) + execute() + SYNC
    for _ in range(3):              # run it until its matching read is cached (the hot case)
        d.be.feed(write)
        _run_ready(d)
    # a statement before the key write in the same buffer: the read position is not 0
    # when the key write starts, so a compaction during its wait moves offsets
    d.be.feed(write + write)
    first = d.be.handle_next()
    _perform(d, first)
    while d.be.rpos < len(write):   # the first statement's remaining frames
        _perform(d, d.be.handle_next())
    d.be.data_to_send()
    hot = d.be.handle_next()
    assert hot is not NEED_INPUT and type(hot) is not tuple, "the key write was not hot"
    # the next statement arrives while the write waits for its fsync: feed compacts
    _perform(d, hot, before_durable=lambda: d.be.feed(bind("u", ["2"]) + execute() + SYNC))
    out = _run_ready(d)
    kinds = b"".join(k for k, _ in out)
    assert b"E" not in kinds, out
    assert [b for k, b in out if k == b"C"] == [b"UPDATE 1\x00", b"UPDATE 1\x00"], out
    d.be.feed(_msg(b"Q", _cstr("SELECT k, v FROM kw ORDER BY k")))
    rows = [b for k, b in _run_ready(d) if k == b"D"]
    assert rows == [b"\x00\x02\x00\x00\x00\x011\x00\x00\x00\x0215",
                    b"\x00\x02\x00\x00\x00\x012\x00\x00\x00\x0221"], rows
