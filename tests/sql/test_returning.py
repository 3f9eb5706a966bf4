"""INSERT / UPDATE / DELETE ... RETURNING (planner/returning.py), checked by machine-made
statements and by real clients.

The metamorphic test draws random writes over a random table and checks each RETURNING
list against what plain queries show of the same rows: an UPDATE's returned rows are
the matching rows as a SELECT reads them afterwards, a DELETE's are the matching rows as
they were, an INSERT's are the new rows as stored (defaults filled in, values rounded),
and every statement returns exactly as many rows as it reports applied. PostgreSQL's own
answers to a fixed list of RETURNING statements are in the oracle corpus
(tests/sql/pgoracle/corpus_returning.py). The wire tests run asyncpg's prepared statements
(Parse, Describe of the statement: its RowDescription before any row) and psycopg.
"""

from __future__ import annotations

import asyncio
import decimal
import random

import pytest

import kudusql

SEEDS = range(4)
STEPS = 40


def _table(cur, rng):
    part = rng.choice(["", " PARTITION BY HASH (k) PARTITIONS 2",
                       " PARTITION BY HASH (k) PARTITIONS 3"])
    cur.execute("CREATE TABLE r (k INT PRIMARY KEY, v TEXT, n BIGINT DEFAULT 7, "
                "d DECIMAL(7,2), f DOUBLE)" + part)


def _value(rng, kind):
    if rng.random() < 0.15:
        return "NULL"
    if kind == "v":
        return "'" + rng.choice(["a", "bb", "Cc", "", "x y"]) + "'"
    if kind == "n":
        return str(rng.randrange(-50, 50))
    if kind == "d":
        return str(decimal.Decimal(rng.randrange(-99999, 99999)) / 1000)   # rounds to 2
    return repr(rng.uniform(-10, 10))


def _pred(rng) -> str:
    return rng.choice([
        f"k < {rng.randrange(0, 40)}", f"k % {rng.randrange(2, 5)} = {rng.randrange(0, 2)}",
        "v IS NULL", f"n > {rng.randrange(-50, 50)}", "d < 0 OR f > 1",
        f"k IN ({rng.randrange(40)}, {rng.randrange(40)}, {rng.randrange(40)})",
        f"k = {rng.randrange(40)}", "true"])


def _set(rng) -> str:
    return rng.choice([
        "n = n + 1", "v = v || '!'", "d = d * 1.5", "f = -f, n = 0", "v = NULL",
        "n = k * 2, d = 0.125", "v = upper(v), f = f + n"])


_LISTS = ["*", "k, v", "k, n + 1 AS m, upper(v), d * 2, f IS NULL", "k, CAST(d AS TEXT)",
          "k, CASE WHEN n > 0 THEN 'pos' ELSE 'other' END",
          # no column at all: still a row per applied row (it returned none at first)
          "'row' AS tag, 1 + 1"]


def _sorted(rows):
    return sorted(rows, key=repr)


@pytest.mark.parametrize("seed", SEEDS)
def test_returning_lists_agree_with_queries_of_the_same_rows(tmp_path, seed):
    rng = random.Random(seed)
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    _table(cur, rng)
    try:
        for step in range(STEPS):
            lst = rng.choice(_LISTS)
            kind = rng.choice(["insert", "insert", "update", "delete"])
            if kind == "insert":
                keys = [rng.randrange(40) for _ in range(rng.randrange(1, 5))]
                cur.execute("SELECT k FROM r")
                present = {k for (k,) in cur.fetchall()}
                cols = rng.choice([["k", "v", "n", "d", "f"], ["k", "v"], ["k", "d"]])
                vals = ", ".join("(" + ", ".join([str(k)] + [_value(rng, c) for c in cols[1:]])
                                 + ")" for k in keys)
                sql = (f"INSERT INTO r ({', '.join(cols)}) VALUES {vals} "
                       f"ON CONFLICT DO NOTHING RETURNING {lst}")
                cur.execute(sql)
                got = cur.fetchall()
                new = []
                for k in keys:           # the first row of a key not present is applied
                    if k not in present:
                        present.add(k)
                        new.append(k)
                touched = new
            else:
                pred = _pred(rng)
                cur.execute(f"SELECT k FROM r WHERE {pred}")
                touched = [k for (k,) in cur.fetchall()]
                if kind == "delete":
                    cur.execute(f"SELECT {lst} FROM r WHERE {pred}")
                    before = cur.fetchall()
                    sql = f"DELETE FROM r WHERE {pred} RETURNING {lst}"
                else:
                    sql = f"UPDATE r SET {_set(rng)} WHERE {pred} RETURNING {lst}"
                cur.execute(sql)
                got = cur.fetchall()
            assert cur.rowcount == len(touched) == len(got), (step, sql)
            if kind == "delete":
                expect = before
            elif touched:
                cur.execute(f"SELECT {lst} FROM r WHERE k IN ({', '.join(map(str, touched))})")
                expect = cur.fetchall()
            else:
                expect = []
            assert _sorted(got) == _sorted(expect), (step, sql)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.wire.conftest import start_server, stop_server
    r = start_server(tmp_path_factory.mktemp("returning") / "db")
    yield r
    stop_server(r)


def test_asyncpg_prepared_returning(server):
    asyncpg = pytest.importorskip("asyncpg")

    async def run():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            await c.execute("CREATE TABLE ra (id INT PRIMARY KEY, name TEXT, "
                            "qty INT DEFAULT 5, price NUMERIC(8,2))")
            ins = await c.prepare("INSERT INTO ra (id, name, price) VALUES ($1, $2, $3) "
                                  "RETURNING id, qty, price, upper(name) AS up")
            # described before it ran: the columns and their types
            assert [a.name for a in ins.get_attributes()] == ["id", "qty", "price", "up"]
            row = await ins.fetchrow(1, "bolt", decimal.Decimal("1.005"))
            assert tuple(row) == (1, 5, decimal.Decimal("1.01"), "BOLT")
            row = await ins.fetchrow(2, None, None)
            assert tuple(row) == (2, 5, None, None)
            rows = await c.fetch("UPDATE ra SET qty = qty * $1 WHERE id >= $2 "
                                 "RETURNING id, qty", 3, 1)
            assert sorted(tuple(r) for r in rows) == [(1, 15), (2, 15)]
            assert await c.fetch("DELETE FROM ra WHERE id = $1 RETURNING *", 9) == []
            row = await c.fetchrow("DELETE FROM ra WHERE id = $1 RETURNING *", 2)
            assert tuple(row) == (2, None, 15, None)
            status = await c.execute("INSERT INTO ra (id) VALUES (7) RETURNING id")
            assert status == "INSERT 0 1"
            with pytest.raises(asyncpg.PostgresError) as ei:
                await c.fetch("INSERT INTO ra (id, name) VALUES ($1, 'x') "
                              "RETURNING count(*)", 8)
            assert ei.value.sqlstate == "42803"
            assert await c.fetchval("SELECT count(*) FROM ra WHERE id = 8") == 0
        finally:
            await c.close()

    asyncio.run(run())


def test_psycopg_returning_and_a_duplicate_key(server):
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE rp (id INT PRIMARY KEY, v TEXT)")
        cur = c.execute("INSERT INTO rp VALUES (%s, %s), (%s, %s) RETURNING id, v",
                        (1, "a", 2, "b"))
        assert sorted(cur.fetchall()) == [(1, "a"), (2, "b")]
        assert cur.statusmessage == "INSERT 0 2"
        # a duplicate key fails the statement (Kudu: the other rows stay applied)
        with pytest.raises(psycopg.errors.UniqueViolation):
            c.execute("INSERT INTO rp VALUES (3, 'c'), (1, 'dup') RETURNING id")
        assert sorted(c.execute("SELECT id FROM rp").fetchall()) == [(1,), (2,), (3,)]
        cur = c.execute("UPDATE rp SET v = v || %s WHERE id <= %s RETURNING v", ("!", 2))
        assert sorted(cur.fetchall()) == [("a!",), ("b!",)]


@pytest.mark.parametrize("verb", ["UPDATE", "DELETE"])
def test_rows_changed_between_read_and_write_return_as_finally_written(tmp_path, monkeypatch,
                                                                        verb):
    """Deterministic: another session changes row 1 (to no longer match) and row 2 (a new
    n) between this statement's read and its write; the rows are read again
    (planner/dml.py `write_reread`): RETURNING gives row 2 as finally written (UPDATE: n
    recomputed from the new version; DELETE: the version deleted) and not row 1."""
    from kudusql.dbapi import Connection
    from planner import dml
    c = kudusql.connect(str(tmp_path / "db"))
    other = Connection(c.database, owns=False)
    cur = c.cursor()
    cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, n BIGINT, tag TEXT)")
    cur.execute("INSERT INTO t VALUES (1, 0, 'a'), (2, 0, 'a'), (3, 0, 'a')")
    name = "apply_update" if verb == "UPDATE" else "apply_delete"
    real, raced = getattr(dml, name), []

    def racing(*args):
        if not raced:
            raced.append(1)
            o = other.cursor()
            o.execute("UPDATE t SET tag = 'b' WHERE k = 1")
            o.execute("UPDATE t SET n = 10 WHERE k = 2")
        return real(*args)

    monkeypatch.setattr(dml, name, racing)
    try:
        if verb == "UPDATE":
            cur.execute("UPDATE t SET n = n + 1 WHERE tag = 'a' RETURNING k, n, tag")
            assert sorted(cur.fetchall()) == [(2, 11, "a"), (3, 1, "a")]
        else:
            cur.execute("DELETE FROM t WHERE tag = 'a' RETURNING k, n")
            assert sorted(cur.fetchall()) == [(2, 10), (3, 0)]
        assert cur.rowcount == 2 and raced
    finally:
        monkeypatch.undo()
        other.close()
        c.close()


def _one(cur, sql, params=None):
    cur.execute(sql, params)
    return cur.fetchall()


def test_update_returns_values_as_stored(tmp_path):
    """An UPDATE's SET values are computed in their own types; RETURNING shows what the
    table stored (review39: it showed 1.23456789 for a REAL, 'abcdef' for a VARCHAR(3),
    the text of a timestamp)."""
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, r REAL, b BIGINT, s VARCHAR(3), "
                "ts TIMESTAMP)")
    cur.execute("INSERT INTO t (k) VALUES (1)")
    got = _one(cur, "UPDATE t SET r = 1.23456789, b = 1, s = 'abcdef', ts = '2024-01-01' "
                    "WHERE k = 1 RETURNING r, s, b, ts")
    assert got == _one(cur, "SELECT r, s, b, ts FROM t")
    assert got[0][1] == "abc" and abs(got[0][0] - 1.2345679) < 1e-6
    assert _one(cur, "UPDATE t SET s = NULL WHERE k = 1 RETURNING s") == [(None,)]
    conn.close()


def test_subqueries_in_returning_read_the_tables_before_the_write(tmp_path):
    """Correlated ones too (review39: they read after it, as uncorrelated ones did not),
    and the statement's WITH list is visible to the RETURNING list."""
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO t VALUES (1, 10), (6, 60), (7, 70)")
    assert sorted(_one(cur, "DELETE FROM t WHERE k IN (6, 7) RETURNING k, "
                            "(SELECT v FROM t t2 WHERE t2.k = t.k)")) == [(6, 60), (7, 70)]
    assert _one(cur, "INSERT INTO t VALUES (100, 1) RETURNING "
                     "EXISTS (SELECT 1 FROM t t2 WHERE t2.k = t.k)") == [(False,)]
    assert _one(cur, "WITH w AS (SELECT 5 AS n) UPDATE t SET v = v + 1 WHERE k = 1 "
                     "RETURNING (SELECT n FROM w)") == [(5,)]
    conn.close()
