"""The key-write fast path (wire/fastpath.py `key_write`) against the ordinary path.

Differential: prepared UPDATE / DELETE statements by the full primary key (SET of a
parameter, of an expression over the row, NULL, NUMERIC rounding, VARCHAR(n), an
overflowing expression, a timestamptz printed in the session's zone, a composite key) and near misses (an extra condition, a
statement the path does not take), executed with random parameters (existing, deleted
and absent keys, values that do not convert, NULL keys, text and binary) with and
without Describe of the portal, between re-INSERTs, over a raw protocol socket to a
server with the fast paths and to one without (`fast_paths=False`). Every reply must be
the same, byte for byte, and so must the tables at the end.
"""

from __future__ import annotations

import random
import struct

import pytest

import wire.fastpath as fastpath
from session.session import Session
from tests.wire.conftest import record_answers, start_server, stop_server
from tests.wire.raw_client import (
    INT8,
    SYNC,
    Raw,
    bind,
    describe_portal,
    describe_statement,
    execute,
    parse,
)

DDL = [
    "CREATE TABLE w1 (k BIGINT NOT NULL, i INT, s TEXT, vc VARCHAR(4), n NUMERIC(6, 2), "
    "d DOUBLE PRECISION NOT NULL DEFAULT 0, b BIGINT, PRIMARY KEY (k)) PARTITION BY HASH (k) PARTITIONS 3",
    "CREATE TABLE w2 (a INT NOT NULL, b TEXT NOT NULL, v DOUBLE PRECISION, "
    "PRIMARY KEY (a, b)) PARTITION BY HASH (a) PARTITIONS 2",
]
STATEMENTS = [
    ("UPDATE w1 SET i = $2 WHERE k = $1", "ki"),
    ("UPDATE w1 SET i = i + 1, s = $2 WHERE k = $1", "ks"),
    ("UPDATE w1 SET vc = $2 WHERE k = $1", "ks"),
    ("UPDATE w1 SET n = $2 WHERE k = $1", "kn"),
    ("UPDATE w1 SET i = NULL, d = 2.5 WHERE k = $1", "k"),
    ("UPDATE w1 SET d = NULL WHERE k = $1", "k"),
    ("UPDATE w1 SET i = i * 100000 WHERE k = $1", "k"),
    ("DELETE FROM w1 WHERE k = $1", "k"),
    ("UPDATE w2 SET v = $3 WHERE a = $1 AND b = $2", "abv"),
    ("DELETE FROM w2 WHERE b = $2 AND a = $1", "ab"),
    ("UPDATE w1 SET i = 7 WHERE k = $1 AND i > 0", "k"),
    ("INSERT INTO w1 (k, i, s) VALUES ($1, $2, 'again')", "ki"),
    # the matching row in plain Python values (PointRead.values): literals, an integer
    # column plus or minus a literal (overflowing INT for some rows), a column copied,
    # and near misses (an int literal into DOUBLE, SET of the key)
    ("UPDATE w1 SET i = 1 + i, vc = 'lit' WHERE k = $1", "k"),
    ("UPDATE w1 SET i = (i + 2147483645) WHERE k = $1", "k"),
    ("UPDATE w1 SET b = i + 2147483645 WHERE k = $1", "k"),
    ("UPDATE w1 SET i = i - -3, s = NULL WHERE k = $1", "k"),
    ("UPDATE w1 SET s = vc, d = -3 WHERE k = $1", "k"),
    ("UPDATE w1 SET s = vc, vc = s WHERE k = $1", "k"),
    ("UPDATE w1 SET k = $2 WHERE k = $1", "ki"),
    ("UPDATE w2 SET v = NULL WHERE a = $1 AND b = $2", "ab"),
    # a SET value the session's TimeZone decides (timestamptz as text: the sessions are
    # in Asia/Kolkata, so a value computed in UTC differs)
    ("UPDATE w1 SET s = CAST(TIMESTAMPTZ '2026-01-01 00:00+00' + i * INTERVAL '1 hour' "
     "AS TEXT) WHERE k = $1", "k"),
    # single-row INSERT / UPSERT of parameters (wire/fastpath.py `row_insert`): new,
    # duplicate and NULL keys, values that do not convert, too long, NUMERIC rounding,
    # omitted columns (defaults), and near misses (ON CONFLICT, RETURNING, too few
    # target columns)
    ("INSERT INTO w1 (k, i, s) VALUES ($1, $2, $3)", "kis"),
    ("INSERT INTO w1 (k, vc, n) VALUES ($1, $2, $3)", "ksn"),
    ("INSERT INTO w1 VALUES ($1, $2)", "ki"),
    ("UPSERT INTO w1 (k, i) VALUES ($1, $2)", "ki"),
    ("INSERT INTO w2 VALUES ($1, $2, $3)", "abv"),
    ("INSERT INTO w2 (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING", "ab"),
    ("INSERT INTO w1 (k, i) VALUES ($1, $2) RETURNING k", "ki"),
    ("INSERT INTO w1 (k, i, s) VALUES ($1, $2)", "ki"),
]


def _param(rng: random.Random, kind: str):
    """(value, binary-capable) of one parameter."""
    r = rng.random()
    if kind in "ka":
        if r < 0.08:
            return rng.choice([None, "x", str(2**70)])
        return str(rng.randrange(30))
    if kind == "i":
        return rng.choice([None, "5", "-3", str(2**40), "abc"]) if r < 0.2 else \
            str(rng.randrange(-9, 9))
    if kind == "s":
        return rng.choice([None, "", "ab", "abcdefg", "\u00e9t\u00e9"])
    if kind == "n":
        return rng.choice(["1.005", "12.5", "-0.01", "99999.99", "1e9", "nan?", None])
    if kind == "b":
        return rng.choice(["x", "y", "z"])
    if kind == "v":
        return rng.choice([None, "1.5", "-2", "abc"])
    raise AssertionError(kind)


def _seed_rows(rng: random.Random) -> list[str]:
    out = [f"INSERT INTO w1 (k, i, s, vc, n) VALUES ({k}, {rng.randrange(-5, 5)}, "
           f"'s{k}', 'v', {k}.25)" for k in range(0, 30, 2)]
    out += [f"INSERT INTO w2 VALUES ({a}, '{b}', {a})" for a in range(10) for b in "xy"]
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("fastpath_writes")
    fast = start_server(root / "a")
    slow = start_server(root / "b", fast_paths=False)
    yield fast, slow
    stop_server(fast)
    stop_server(slow)


def test_key_writes_fast_equal_ordinary(pair, monkeypatch):
    inserted = record_answers(monkeypatch, fastpath, "row_insert")
    plain = record_answers(monkeypatch, Session, "key_write_values")
    answered = record_answers(monkeypatch, fastpath, "key_write")
    rng = random.Random(17)
    clients = [Raw(s.port) for s in pair]
    try:
        setup = ["SET TIME ZONE 'Asia/Kolkata'", "DROP TABLE IF EXISTS w1",
                 "DROP TABLE IF EXISTS w2", *DDL, *_seed_rows(rng)]
        for c in clients:
            for sql in setup:
                c.query(sql)
        for qi, (sql, kinds) in enumerate(STATEMENTS):
            oids = (INT8,) if kinds[0] == "k" and rng.random() < 0.5 else ()
            data = parse(f"w{qi}", sql, oids) + describe_statement(f"w{qi}") + SYNC
            assert clients[0].run(data) == clients[1].run(data)
        for round_ in range(400):
            qi = rng.randrange(len(STATEMENTS))
            sql, kinds = STATEMENTS[qi]
            values = [_param(rng, k) for k in kinds]
            binary = kinds[0] == "k" and values[0] not in (None, "x", str(2**70)) and \
                len(kinds) == 1 and rng.random() < 0.3
            if binary:
                values = [struct.pack("!q", int(values[0]))]
            data = bind(f"w{qi}", values, binary)
            if rng.random() < 0.4:
                data += describe_portal()
            data += execute() + SYNC
            replies = [c.run(data) for c in clients]
            assert replies[0] == replies[1], (round_, sql, values)
        for table in ("w1", "w2"):
            q = [c.query(f"SELECT * FROM {table} ORDER BY 1, 2") for c in clients]
            assert q[0] == q[1], table
    finally:
        for c in clients:
            c.close()
    assert answered.count(True) > 40, "the fast path hardly answered"
    assert answered.count(False) > 10, "the near misses never went the ordinary way"
    assert plain.count(True) > 40, "the plain-value matching read hardly answered"
    assert inserted.count(True) > 30, "the single-row insert hardly answered"
    assert inserted.count(False) > 10, "no insert went the ordinary way"


def test_key_write_checker_bites(pair, monkeypatch):
    """Break the fast path on purpose (it reports one row too many): the comparison
    must notice."""
    from planner.result import StatementResult
    real = StatementResult.tag

    def wrong(self):
        t = real(self)
        return t + "1" if t.startswith(("UPDATE", "DELETE")) else t
    monkeypatch.setattr(fastpath, "StatementResult", type(
        "Broken", (StatementResult,), {"tag": wrong}))
    with pytest.raises(AssertionError):
        test_key_writes_fast_equal_ordinary(pair, monkeypatch)


def test_single_row_insert_follows_ddl(pair, monkeypatch):
    """A prepared single-row INSERT keeps its resolved target (`Session.insert_row_target`,
    per catalog version): after DROP COLUMN, a column of that name added back at the end,
    DROP / CREATE with the columns in another order and ADD COLUMN, it must write where
    the ordinary path writes, reply for reply and row for row."""
    inserted = record_answers(monkeypatch, fastpath, "row_insert")
    clients = [Raw(s.port) for s in pair]
    steps = [
        "CREATE TABLE w3 (k BIGINT NOT NULL, a BIGINT, c BIGINT DEFAULT 7, PRIMARY KEY (k))",
        "ALTER TABLE w3 DROP COLUMN a",
        # a again, now after c: a target kept from before would put $2 into a, not c
        "ALTER TABLE w3 ADD COLUMN a BIGINT",
        "DROP TABLE w3",
        "CREATE TABLE w3 (a BIGINT NOT NULL, k BIGINT, PRIMARY KEY (a))",
        "ALTER TABLE w3 ADD COLUMN c BIGINT DEFAULT 7",
    ]
    try:
        for c in clients:
            c.query("DROP TABLE IF EXISTS w3")
        key = 0
        for i, ddl in enumerate(steps):
            for c in clients:
                c.query(ddl)
            if i == 0:      # prepared once, before every DDL but the first
                data = parse("ins", "INSERT INTO w3 VALUES ($1, $2)", (INT8, INT8)) + \
                    describe_statement("ins") + SYNC
                assert clients[0].run(data) == clients[1].run(data)
            for _ in range(3):
                key += 1
                data = bind("ins", [struct.pack("!q", key), struct.pack("!q", 100 + key)],
                            True) + execute() + SYNC
                replies = [c.run(data) for c in clients]
                assert replies[0] == replies[1], (ddl, key)
            q = [c.query("SELECT * FROM w3 ORDER BY 1") for c in clients]
            assert q[0] == q[1], ddl
    finally:
        for c in clients:
            c.close()
    assert inserted.count(True) >= 9, "the single-row insert hardly answered"
