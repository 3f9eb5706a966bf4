"""Timestamp / timestamptz parameters in non-UTC sessions over the wire, against
PostgreSQL 15's recorded answers (tests/wire/tz_param_cases.py says what runs and how
the answers were recorded): asyncpg (binary), psycopg text and binary; Asia/Kolkata (a
half-hour offset), America/New_York (DST) and UTC; the fast paths on and off.

A timestamptz parameter is an instant (an offset in its text, or binary microseconds
since 2000-01-01 UTC); a timestamp parameter ignores an offset written in its text; a
timestamptz stored into a TIMESTAMP column is the session's local time."""

from __future__ import annotations

import asyncio
import json

import pytest

import wire.fastpath as fastpath
from session.session import Session
from tests.wire.conftest import record_answers, start_server, stop_server
from tests.wire.tz_param_cases import CLIENTS, EXPECTED, ZONES, scenario


@pytest.fixture(scope="module", params=[True, False], ids=["fast", "ordinary"])
def server(request, tmp_path_factory):
    r = start_server(tmp_path_factory.mktemp("tzp") / "db", fast_paths=request.param)
    r.fast = request.param
    yield r
    stop_server(r)


@pytest.fixture(scope="module")
def expected():
    with open(EXPECTED) as f:
        return json.load(f)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("client", CLIENTS)
def test_answers_match_postgres(server, expected, client, zone, monkeypatch):
    taken = {n: record_answers(monkeypatch, fastpath, n)
             for n in ("point_read", "key_write", "row_insert")}
    taken["key_write_rows"] = record_answers(monkeypatch, Session, "key_write_rows")
    taken["execute_many"] = record_answers(monkeypatch, Session, "execute_many")
    got = asyncio.run(scenario(client, server.dsn(), zone))
    if server.fast:             # the fast paths really took some of it
        took = {n: a.count(True) for n, a in taken.items()}
        assert took["key_write"] and took["key_write_rows"], took
        assert (took["point_read"] and took["row_insert"]) if client == "asyncpg" else \
            took["execute_many"], took
    want = expected[f"{client} {zone}"]
    assert got.keys() == want.keys()
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not wrong, f"{len(wrong)} answers differ from PostgreSQL's: {wrong}"


def test_point_read_fast_path_key_in_the_session_zone(tmp_path, monkeypatch):
    """A timestamptz key parameter (text with an offset, binary) against a TIMESTAMP key
    column compares in the session's zone on the point-read fast path too: replies byte
    for byte those of the ordinary path, and the row PostgreSQL finds (k = 05:30 in
    Kolkata is 00:00 UTC: `2020-01-01 00:00+00` matches it, not the row k = 00:00)."""
    import struct

    from tests.wire.raw_client import SYNC, Raw, bind, describe_statement, execute, parse
    answered = record_answers(monkeypatch, fastpath, "point_read")
    servers = [start_server(tmp_path / "a"), start_server(tmp_path / "b", fast_paths=False)]
    clients = [Raw(s.port) for s in servers]
    try:
        for c in clients:
            c.query("SET TIME ZONE 'Asia/Kolkata'")
            c.query("CREATE TABLE pk (k TIMESTAMP NOT NULL, n INT, PRIMARY KEY (k))")
            c.query("INSERT INTO pk VALUES ('2020-01-01 00:00', 1), ('2020-01-01 05:30', 2)")
        sql = "SELECT n FROM pk WHERE k = $1"
        binary = struct.pack("!q", 0)       # 2000-01-01 00:00 UTC: no row
        us = (20 * 365 + 5) * 86_400_000_000        # 2020-01-01 00:00 UTC
        for oid in (1184, 1114):
            data = parse("s", sql, (oid,)) + describe_statement("s") + SYNC
            assert clients[0].run(data) == clients[1].run(data)
            for _ in range(3):      # the first run caches the point read
                for values, is_binary in (([b"2020-01-01 00:00:00+00"], False),
                                          ([b"2020-01-01 05:30:00+05:30"], False),
                                          ([b"2020-01-01 05:30:00"], False),
                                          ([struct.pack("!q", us)], True), ([binary], True)):
                    data = bind("s", values, is_binary) + execute() + SYNC
                    r = [c.run(data) for c in clients]
                    assert r[0] == r[1], (oid, values)
                    rows = [m for m in r[0] if m[0] == "D"]
                    if oid == 1184 and values[0] != b"2020-01-01 05:30:00" and \
                            values[0] != binary:
                        assert rows == [("D", b"\x00\x01\x00\x00\x00\x012")], (oid, values)
            clients[0].query("DEALLOCATE s")
            clients[1].query("DEALLOCATE s")
    finally:
        for c in clients:
            c.close()
        for s in servers:
            stop_server(s)
    assert answered.count(True) > 10, answered
