"""Read-only transactions (wire/transaction.py): BEGIN / START TRANSACTION READ ONLY,
SET TRANSACTION READ ONLY, SET transaction_read_only, SET SESSION CHARACTERISTICS AS
TRANSACTION READ ONLY and default_transaction_read_only refuse writes with 25006, as
PostgreSQL 15 does.

- `test_statements_match_postgres`: a script of statements run one by one with psycopg
  against kudusql, every answer (command status or SQLSTATE and message, rows) compared
  with PostgreSQL 15's, recorded in read_only_expected.json by
  `.venv/bin/python -m tests.wire.test_read_only 'host=... port=P user=postgres dbname=postgres'`.
- `test_fast_paths_refuse_as_the_ordinary_path`: prepared key writes, single-row inserts,
  point reads and pipelined batches whose statements are warm (the fast paths take them),
  then read-only: every reply byte for byte the same with the fast paths on and off
  (`fast_paths=False`), every write 25006, nothing written.
- `test_clients_executemany_refused`: asyncpg and psycopg executemany (pipelined batches)
  refused as a whole, fast paths on and off.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import asyncpg
import psycopg
import pytest

import wire.fastpath as fastpath
from tests.wire.conftest import record_answers, start_server, stop_server
from tests.wire.raw_client import INT4, INT8, SYNC, TEXT, Raw, bind, describe_portal, \
    describe_statement, execute, parse

EXPECTED = os.path.join(os.path.dirname(__file__), "read_only_expected.json")

SCRIPT = """
DROP TABLE IF EXISTS ro
CREATE TABLE ro (k INT NOT NULL, v INT, PRIMARY KEY (k))
INSERT INTO ro VALUES (1, 1)
SHOW transaction_read_only
SHOW default_transaction_read_only
BEGIN READ ONLY
SHOW transaction_read_only
SELECT k, v FROM ro ORDER BY k
INSERT INTO ro VALUES (2, 2)
ROLLBACK
BEGIN READ ONLY
UPDATE ro SET v = 5
ROLLBACK
BEGIN READ ONLY
DELETE FROM ro
ROLLBACK
START TRANSACTION READ ONLY, ISOLATION LEVEL SERIALIZABLE
SHOW transaction_read_only
CREATE TABLE ro2 (a INT NOT NULL, PRIMARY KEY (a))
ROLLBACK
BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY
DROP TABLE ro
ROLLBACK
BEGIN TRANSACTION READ ONLY
ALTER TABLE ro ADD COLUMN z INT
ROLLBACK
BEGIN NOT DEFERRABLE, READ ONLY
TRUNCATE ro
ROLLBACK
BEGIN READ ONLY
CREATE VIEW rov AS SELECT 1 AS one
ROLLBACK
BEGIN
SET TRANSACTION READ ONLY
SHOW transaction_read_only
INSERT INTO ro VALUES (3, 3)
ROLLBACK
BEGIN
SET transaction_read_only = on
UPDATE ro SET v = 6 WHERE k = 1
ROLLBACK
BEGIN READ ONLY
SELECT 1
SET TRANSACTION READ WRITE
ROLLBACK
BEGIN READ ONLY
SET TRANSACTION READ WRITE
SHOW transaction_read_only
INSERT INTO ro VALUES (4, 4)
COMMIT
SET TRANSACTION READ ONLY
SHOW transaction_read_only
INSERT INTO ro VALUES (5, 5)
SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY
SHOW default_transaction_read_only
SHOW transaction_read_only
INSERT INTO ro VALUES (6, 6)
UPDATE ro SET v = 7 WHERE k = 1
DELETE FROM ro WHERE k = 1
CREATE TABLE ro3 (a INT NOT NULL, PRIMARY KEY (a))
EXPLAIN ANALYZE INSERT INTO ro VALUES (7, 7)
SELECT k, v FROM ro ORDER BY k
BEGIN
SHOW transaction_read_only
INSERT INTO ro VALUES (8, 8)
ROLLBACK
BEGIN READ WRITE
SHOW transaction_read_only
INSERT INTO ro VALUES (9, 9)
COMMIT
SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE
SHOW default_transaction_read_only
SET default_transaction_read_only = on
SHOW transaction_read_only
INSERT INTO ro VALUES (10, 10)
SET default_transaction_read_only = 'maybe'
SET default_transaction_read_only = no
SHOW default_transaction_read_only
SET default_transaction_read_only = 't'
SHOW default_transaction_read_only
RESET default_transaction_read_only
SHOW transaction_read_only
INSERT INTO ro VALUES (11, 11)
SELECT k, v FROM ro ORDER BY k
""".strip().splitlines()


def run_script(dsn: str) -> list:
    out = []
    with psycopg.connect(dsn, autocommit=True) as c:
        for sql in SCRIPT:
            try:
                cur = c.execute(sql)
                rows = [list(map(str, r)) for r in cur.fetchall()] \
                    if cur.description and not sql.startswith("EXPLAIN") else None
                out.append([sql, cur.statusmessage, rows])
            except psycopg.Error as e:
                out.append([sql, "ERROR", e.sqlstate, e.diag.message_primary])
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("read_only")
    fast = start_server(root / "a")
    slow = start_server(root / "b", fast_paths=False)
    yield fast, slow
    stop_server(fast)
    stop_server(slow)


@pytest.mark.parametrize("which", [0, 1], ids=["fast", "ordinary"])
def test_statements_match_postgres(pair, which):
    with open(EXPECTED) as f:
        want = json.load(f)
    got = run_script(pair[which].dsn())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w


def test_set_transaction_outside_a_block_warns(pair):
    notices = []
    with psycopg.connect(pair[0].dsn(), autocommit=True) as c:
        c.add_notice_handler(lambda n: notices.append((n.severity, n.message_primary)))
        c.execute("SET TRANSACTION READ ONLY")
        assert c.execute("SHOW transaction_read_only").fetchone() == ("off",)
    assert notices == [("WARNING", "SET TRANSACTION can only be used in transaction blocks")]


KW = "CREATE TABLE kw (k BIGINT NOT NULL, i INT, s TEXT, PRIMARY KEY (k))"
PREPARED = [
    ("ins", "INSERT INTO kw (k, i, s) VALUES ($1, $2, $3)", (INT8, INT4, TEXT)),
    ("ups", "UPSERT INTO kw (k, i) VALUES ($1, $2)", (INT8, INT4)),
    ("upd", "UPDATE kw SET i = $2 WHERE k = $1", (INT8, INT4)),
    ("upx", "UPDATE kw SET i = i + 1, s = $2 WHERE k = $1", (INT8, TEXT)),
    ("del", "DELETE FROM kw WHERE k = $1", (INT8,)),
    ("sel", "SELECT k, i, s FROM kw WHERE k = $1", (INT8,)),
]
WARM = {"ins": ["1", "10", "a"], "ups": ["2", "20"], "upd": ["1", "11"],
        "upx": ["1", "b"], "del": ["99"], "sel": ["1"]}


def _exchange(name: str, values: list, describe: bool) -> bytes:
    return bind(name, values) + (describe_portal() if describe else b"") + execute() + SYNC


def _batch(sql: str, rows: list) -> bytes:
    data = parse("", sql, (INT8, INT4, TEXT))
    for r in rows:
        data += bind("", r) + execute()
    return data + SYNC


def test_fast_paths_refuse_as_the_ordinary_path(pair, monkeypatch):
    answered = {n: record_answers(monkeypatch, fastpath, n)
                for n in ("row_insert", "key_write", "point_read")}
    clients = [Raw(s.port) for s in pair]
    try:
        def both(data: bytes) -> list:
            replies = [c.run(data) for c in clients]
            assert replies[0] == replies[1], data
            return replies[0]

        def table() -> list:
            q = [c.query("SELECT k, i, s FROM kw ORDER BY k") for c in clients]
            assert q[0] == q[1]
            return q[0]

        for c in clients:
            c.query("SET default_transaction_read_only = off")
            c.query("DROP TABLE IF EXISTS kw")
            c.query(KW)
        for name, sql, oids in PREPARED:
            both(parse(name, sql, oids) + describe_statement(name) + SYNC)
        # warm: each runs twice read-write (the second run is the fast path's)
        for _ in range(2):
            for name, values in WARM.items():
                both(_exchange(name, values, False))
        both(_batch("INSERT INTO kw (k, i, s) VALUES ($1, $2, $3)",
                    [[str(k), "1", "x"] for k in range(100, 110)]))
        before = table()
        warm_counts = {n: a.count(True) for n, a in answered.items()}
        assert all(warm_counts.values()), warm_counts     # the fast paths took them
        for mode in ("SET default_transaction_read_only = on",
                     "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"):
            for c in clients:
                c.query(mode)
            for describe in (False, True):
                for name, values in WARM.items():
                    r = both(_exchange(name, values, describe))
                    errors = [m for m in r if m[0] == "E"]
                    if name == "sel":
                        assert not errors
                    else:
                        assert errors and errors[0][1] == "25006", r
                for sql in ("INSERT INTO kw (k, i, s) VALUES ($1, $2, $3)",
                            "UPSERT INTO kw (k, i, s) VALUES ($1, $2, $3)"):
                    r = both(_batch(sql, [[str(k), "2", "y"] for k in range(200, 240)]))
                    errors = [m for m in r if m[0] == "E"]
                    assert len(errors) == 1 and errors[0][1] == "25006", r
            after = table()
            assert after == before, (mode, [r for r in after if r not in before],
                                     [r for r in before if r not in after])
            for c in clients:
                c.query("SET default_transaction_read_only = off")
        # read-write again: the same statements write (the refusals left no state behind)
        for name, values in WARM.items():
            r = both(_exchange(name, values, False))
            assert not any(m[0] == "E" for m in r) or name == "ins", (name, r)
        both(_exchange("ins", ["500", "5", "z"], False))
        assert len(table()) == len(before) + 1
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("which", [0, 1], ids=["fast", "ordinary"])
def test_clients_executemany_refused(pair, which):
    srv = pair[which]
    with psycopg.connect(srv.dsn(), autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS em")
        c.execute("CREATE TABLE em (k BIGINT NOT NULL, v INT, PRIMARY KEY (k))")
        c.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        with pytest.raises(psycopg.Error) as e:
            c.cursor().executemany("INSERT INTO em VALUES (%s, %s)",
                                   [(k, k) for k in range(50)])
        assert e.value.sqlstate == "25006"

    async def with_asyncpg():
        conn = await asyncpg.connect(**srv.asyncpg_kw())
        try:
            await conn.execute("SET default_transaction_read_only = on")
            with pytest.raises(asyncpg.PostgresError) as e:
                await conn.executemany("INSERT INTO em VALUES ($1, $2)",
                                       [(k, k) for k in range(50)])
            assert e.value.sqlstate == "25006"
            async with conn.transaction(readonly=True):
                with pytest.raises(asyncpg.PostgresError) as e:
                    await conn.execute("INSERT INTO em VALUES (1, 1)")
                assert e.value.sqlstate == "25006"
            await conn.execute("SET default_transaction_read_only = off")
            return await conn.fetchval("SELECT count(*) FROM em")
        finally:
            await conn.close()
    assert asyncio.run(with_asyncpg()) == 0


if __name__ == "__main__":
    got = run_script(sys.argv[1])
    with open(EXPECTED, "w") as f:
        json.dump(got, f, indent=0)
        f.write("\n")
    print(f"recorded {len(got)} answers in {EXPECTED}")


def test_show_all_and_current_setting_give_the_mode_in_force(pair):
    with psycopg.connect(pair[0].dsn(), autocommit=True) as c:
        def shown():
            every = dict((r[0], r[1]) for r in c.execute("SHOW ALL").fetchall())
            one = c.execute("SELECT current_setting('transaction_read_only')").fetchone()[0]
            return every["transaction_read_only"], one
        assert shown() == ("off", "off")
        c.execute("BEGIN READ ONLY")
        assert shown() == ("on", "on")
        c.execute("ROLLBACK")
        assert shown() == ("off", "off")
        c.execute("SET default_transaction_read_only = on")
        assert shown() == ("on", "on")
        c.execute("BEGIN READ WRITE")
        assert shown() == ("off", "off")
        c.execute("COMMIT")
        c.execute("RESET default_transaction_read_only")
