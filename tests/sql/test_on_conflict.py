"""INSERT ... ON CONFLICT (key) DO UPDATE (planner/on_conflict.py), checked against a model
and under concurrency.

The model-based test draws random upserts (random SET lists over EXCLUDED and the existing
row, an optional DO UPDATE WHERE, RETURNING *) and runs each on kudusql and on a Python
dict of rows that applies PostgreSQL's rule - insert the proposed row, or update the
existing one where WHERE holds - comparing the command's count, the rows returned and the
whole table after every statement. The concurrency tests check what the rounds of
`insert_or_update` promise: concurrent `SET n = c.n + 1` upserts lose no increment, and a
row deleted between the insert that found it and its update is inserted instead.
PostgreSQL's own answers to fixed statements are in the oracle corpus (`oc_*`,
tests/sql/pgoracle/corpus_returning.py).
"""

from __future__ import annotations

import random
import threading

import pytest

import kudusql

# (SQL, model: (existing row, proposed row) -> {column: new value})
_SETS = [
    ("n = EXCLUDED.n", lambda t, x: {"n": x["n"]}),
    ("n = c.n + EXCLUDED.n", lambda t, x: {
        "n": None if t["n"] is None or x["n"] is None else t["n"] + x["n"]}),
    ("v = coalesce(c.v, '') || coalesce(EXCLUDED.v, '-')", lambda t, x: {
        "v": (t["v"] or "") + (x["v"] if x["v"] is not None else "-")}),
    ("v = EXCLUDED.v, n = c.n", lambda t, x: {"v": x["v"], "n": t["n"]}),
    ("n = 0", lambda t, x: {"n": 0}),
]
_WHERES = [
    ("", lambda t, x: True),
    (" WHERE c.n < EXCLUDED.n", lambda t, x: t["n"] is not None and x["n"] is not None
     and t["n"] < x["n"]),
    (" WHERE c.v IS NULL", lambda t, x: t["v"] is None),
    (" WHERE EXCLUDED.v <> 'a'", lambda t, x: x["v"] is not None and x["v"] != "a"),
]


def _lit(v) -> str:
    return "NULL" if v is None else (f"'{v}'" if isinstance(v, str) else str(v))


@pytest.mark.parametrize("seed", range(4))
def test_upserts_agree_with_a_model(tmp_path, seed):
    rng = random.Random(seed)
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    part = rng.choice(["", " PARTITION BY HASH (k) PARTITIONS 3"])
    cur.execute("CREATE TABLE c (k INT PRIMARY KEY, v TEXT, n INT DEFAULT 5)" + part)
    model: dict[int, dict] = {}
    try:
        for step in range(40):
            keys = rng.sample(range(12), rng.randrange(1, 5))
            with_n = rng.random() < 0.7
            proposed = [{"k": k, "v": rng.choice([None, "a", "b", "cc"]),
                         "n": rng.choice([None, -3, 1, 8, 20]) if with_n else 5}
                        for k in keys]
            set_sql, set_fn = rng.choice(_SETS)
            where_sql, where_fn = rng.choice(_WHERES)
            cols = "k, v, n" if with_n else "k, v"
            values = ", ".join("(" + ", ".join(_lit(p[c.strip()]) for c in cols.split(","))
                               + ")" for p in proposed)
            sql = (f"INSERT INTO c ({cols}) VALUES {values} ON CONFLICT (k) DO UPDATE "
                   f"SET {set_sql}{where_sql} RETURNING k, v, n")
            affected = []
            for p in proposed:                   # the model: PostgreSQL's rule
                old = model.get(p["k"])
                if old is None:
                    model[p["k"]] = dict(p)
                    affected.append(dict(p))
                elif where_fn(old, p):
                    old.update(set_fn(old, p))
                    affected.append(dict(old))
            cur.execute(sql)
            got = sorted(cur.fetchall(), key=repr)
            assert cur.rowcount == len(affected), (step, sql)
            assert got == sorted([(r["k"], r["v"], r["n"]) for r in affected], key=repr), \
                (step, sql)
            cur.execute("SELECT k, v, n FROM c")
            assert sorted(cur.fetchall()) == sorted((r["k"], r["v"], r["n"])
                                                    for r in model.values()), (step, sql)
    finally:
        conn.close()


def test_concurrent_increments_are_not_lost(tmp_path):
    """Four sessions each upsert `n = c.n + 1` 40 times over three keys: every key ends
    with exactly the number of statements that named it (inserted by the first, updated
    by the rest, each update checked "unchanged since read" and re-read when it was)."""
    from kudusql.dbapi import Connection
    main = kudusql.connect(str(tmp_path / "db"))
    main.cursor().execute("CREATE TABLE c (k INT PRIMARY KEY, n BIGINT) "
                          "PARTITION BY HASH (k) PARTITIONS 2")
    counts = [[0, 0, 0] for _ in range(4)]
    errors = []

    def work(i):
        rng = random.Random(i)
        c = Connection(main.database, owns=False)
        try:
            cur = c.cursor()
            for _ in range(40):
                k = rng.randrange(3)
                cur.execute("INSERT INTO c VALUES (%s, 1) ON CONFLICT (k) DO UPDATE "
                            "SET n = c.n + 1", (k,))
                assert cur.rowcount == 1
                counts[i][k] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert not errors, errors
        cur = main.cursor()
        cur.execute("SELECT k, n FROM c ORDER BY k")
        expect = [(k, sum(c[k] for c in counts)) for k in range(3) if any(c[k] for c in counts)]
        assert cur.fetchall() == expect
    finally:
        main.close()


def test_a_row_deleted_before_its_update_is_inserted_instead(tmp_path, monkeypatch):
    """Deterministic: another session deletes row 1 after this statement's insert found it
    and before its update is written; the update finds no row (NOT_FOUND) and the proposed
    row is inserted in the next round (PostgreSQL's insert-or-update guarantee)."""
    from kudusql.dbapi import Connection
    from planner import dml
    c = kudusql.connect(str(tmp_path / "db"))
    other = Connection(c.database, owns=False)
    cur = c.cursor()
    cur.execute("CREATE TABLE c (k INT PRIMARY KEY, v TEXT)")
    cur.execute("INSERT INTO c VALUES (1, 'old'), (2, 'old')")
    real, raced = dml.apply_update, []

    def racing(*args):
        if not raced:
            raced.append(1)
            other.cursor().execute("DELETE FROM c WHERE k = 1")
        return real(*args)

    monkeypatch.setattr(dml, "apply_update", racing)
    try:
        cur.execute("INSERT INTO c VALUES (1, 'new'), (2, 'new') ON CONFLICT (k) DO UPDATE "
                    "SET v = c.v || '+' || EXCLUDED.v RETURNING k, v")
        assert sorted(cur.fetchall()) == [(1, "new"), (2, "old+new")]
        assert cur.rowcount == 2 and raced
        cur.execute("SELECT k, v FROM c ORDER BY k")
        assert cur.fetchall() == [(1, "new"), (2, "old+new")]
    finally:
        monkeypatch.undo()
        other.close()
        c.close()


def test_refusals_write_nothing(tmp_path):
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE c (k INT PRIMARY KEY, v TEXT, n INT)")
    cur.execute("INSERT INTO c VALUES (1, 'a', 1)")
    for sql, state in [
            ("INSERT INTO c VALUES (2, 'b', 2) ON CONFLICT DO UPDATE SET n = 1", "42601"),
            ("INSERT INTO c VALUES (2, 'b', 2) ON CONFLICT (v) DO UPDATE SET n = 1", "42P10"),
            ("INSERT INTO c VALUES (2, 'b', 2) ON CONFLICT ON CONSTRAINT x DO UPDATE "
             "SET n = 1", "42704"),
            ("INSERT INTO c VALUES (2, 'b', 2), (2, 'c', 3) ON CONFLICT (k) DO UPDATE "
             "SET n = 1", "21000"),
            ("INSERT INTO c VALUES (2, 'b', 2) ON CONFLICT (k) DO UPDATE SET n = n + 1",
             "42702"),
            ("INSERT INTO c VALUES (2, 'b', 2) ON CONFLICT (k) DO UPDATE SET k = 3", "0A000"),
            ("UPSERT INTO c VALUES (2, 'b', 2) ON CONFLICT (k) DO UPDATE SET n = 1", "42601")]:
        with pytest.raises(kudusql.Error) as ei:
            cur.execute(sql)
        assert ei.value.sqlstate == state, sql
    cur.execute("SELECT k, v, n FROM c")
    assert cur.fetchall() == [(1, "a", 1)]
    conn.close()


def test_asyncpg_prepared_upsert_with_returning(tmp_path):
    """Over the wire: a prepared upsert (Parse, Describe: its RowDescription), run as an
    insert and then as an update, and executemany of it (one statement per set)."""
    import asyncio
    asyncpg = pytest.importorskip("asyncpg")
    from tests.wire.conftest import start_server, stop_server
    server = start_server(tmp_path / "db")

    async def run():
        c = await asyncpg.connect(**server.asyncpg_kw())
        try:
            await c.execute("CREATE TABLE u (k INT PRIMARY KEY, hits BIGINT, last TEXT)")
            st = await c.prepare("INSERT INTO u VALUES ($1, 1, $2) ON CONFLICT (k) DO UPDATE "
                                 "SET hits = u.hits + 1, last = EXCLUDED.last "
                                 "RETURNING k, hits, last")
            assert [a.name for a in st.get_attributes()] == ["k", "hits", "last"]
            assert tuple(await st.fetchrow(1, "a")) == (1, 1, "a")
            assert tuple(await st.fetchrow(1, "b")) == (1, 2, "b")
            await c.executemany("INSERT INTO u VALUES ($1, 1, $2) ON CONFLICT (k) DO UPDATE "
                                "SET hits = u.hits + 1", [(1, "c"), (2, "d"), (2, "e")])
            rows = await c.fetch("SELECT k, hits, last FROM u ORDER BY k")
            assert [tuple(r) for r in rows] == [(1, 3, "b"), (2, 2, "d")]
        finally:
            await c.close()

    try:
        asyncio.run(run())
    finally:
        stop_server(server)


def test_review_findings(tmp_path):
    """review39's findings, each once: RETURNING of updated rows whose SET values are of
    other types (XX000 after the rows were written), a quoted table name and alias, a WITH
    list in DO UPDATE, VARCHAR(3) keys that the table cuts to one (21000, nothing written)."""
    conn = kudusql.connect(str(tmp_path / "db"))
    cur = conn.cursor()
    cur.execute("CREATE TABLE u (k INT PRIMARY KEY, b BIGINT, ts TIMESTAMP)")
    cur.execute("INSERT INTO u VALUES (1, 1, NULL)")
    cur.execute("INSERT INTO u VALUES (1, 5), (2, 6) ON CONFLICT (k) DO UPDATE "
                "SET b = EXCLUDED.b, ts = '2024-05-05' RETURNING k, b")
    assert sorted(cur.fetchall()) == [(1, 5), (2, 6)]
    cur.execute('CREATE TABLE "Up" (k INT PRIMARY KEY, v INT)')
    cur.execute('INSERT INTO "Up" VALUES (1, 5) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v')
    cur.execute('INSERT INTO "Up" AS "T" VALUES (1, 7) ON CONFLICT (k) DO UPDATE '
                'SET v = "T".v + 1 RETURNING v')
    assert cur.fetchall() == [(6,)]
    cur.execute("WITH w AS (SELECT 9 AS n) INSERT INTO u VALUES (1, 0) ON CONFLICT (k) "
                "DO UPDATE SET b = (SELECT n FROM w) RETURNING b")
    assert cur.fetchall() == [(9,)]
    cur.execute("CREATE TABLE vk (k VARCHAR(3) PRIMARY KEY, v INT)")
    with pytest.raises(kudusql.Error) as ei:
        cur.execute("INSERT INTO vk VALUES ('abcd', 1), ('abce', 2) ON CONFLICT (k) "
                    "DO UPDATE SET v = vk.v + EXCLUDED.v")
    assert ei.value.sqlstate == "21000"
    cur.execute("SELECT count(*) FROM vk")
    assert cur.fetchall() == [(0,)]
    conn.close()
