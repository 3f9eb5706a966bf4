"""WITH RECURSIVE (planner/binder/bind.py recursive_cte, the executor's RecursiveUnion)
against DuckDB, whose recursive UNION / UNION ALL have PostgreSQL's semantics: random
graphs (cycles, self-loops, NULL ends, duplicate edges) and random traversals - reachability
with UNION (which must stop on cycles), depth-bounded walks with UNION ALL (every path
counted), paths built as text - compared as multisets. The PostgreSQL oracle holds the
hand-picked corners and the 42P19 rules; this also checks that a recursion that never ends
is stopped by statement_timeout, by query_mem_limit and by cancel."""

from __future__ import annotations

import random
import threading
import time

import duckdb
import pytest

import kudusql


def _edges(rng: random.Random, nodes: int, n: int) -> list[tuple]:
    return [(i, rng.randrange(nodes), None if rng.random() < 0.05 else rng.randrange(nodes),
             rng.randint(1, 9)) for i in range(n)]


def _queries(rng: random.Random, nodes: int) -> list[str]:
    start = rng.randrange(nodes)
    depth = rng.randint(1, 5)
    return [
        # reachability: UNION stops when a step finds nothing new (cycles included)
        f"WITH RECURSIVE r(v) AS (SELECT {start} UNION SELECT e.b FROM e JOIN r ON e.a = r.v "
        f"WHERE e.b IS NOT NULL) SELECT v FROM r",
        # every walk up to a depth, with its cost: UNION ALL keeps each one
        f"WITH RECURSIVE w(v, d, cost) AS (SELECT a, 0, 0 FROM e WHERE a = {start} UNION ALL "
        f"SELECT e.b, w.d + 1, w.cost + e.w FROM w JOIN e ON e.a = w.v WHERE w.d < {depth}) "
        f"SELECT v, d, cost FROM w",
        # paths as text, aggregated outside
        f"WITH RECURSIVE p(v, path, d) AS (SELECT {start}, CAST({start} AS VARCHAR), 0 "
        f"UNION ALL SELECT e.b, p.path || '-' || CAST(e.b AS VARCHAR), p.d + 1 FROM p "
        f"JOIN e ON e.a = p.v WHERE p.d < {min(depth, 3)} AND e.b IS NOT NULL) "
        f"SELECT d, count(*), max(path), min(length(path)) FROM p GROUP BY d",
        # several anchor rows, a filter and a derived table in the recursive term
        f"WITH RECURSIVE s(v, k) AS (SELECT DISTINCT a, 0 FROM e WHERE w > {rng.randint(3, 8)} "
        f"UNION SELECT x, k + 1 FROM (SELECT e.b AS x, s.k FROM s JOIN e ON e.a = s.v) q "
        f"WHERE k < {depth} AND x IS NOT NULL) SELECT v, k FROM s",
    ]


def _multiset(rows) -> list:
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.mark.parametrize("seed", range(6))
def test_recursive_queries_agree_with_duckdb(seed, tmp_path):
    rng = random.Random(seed)
    nodes = rng.choice([1, 4, 12, 40])
    data = _edges(rng, nodes, rng.choice([0, 3, 20, 80]))
    con = kudusql.connect(str(tmp_path / "db"))
    duck = duckdb.connect()
    for db in (con, duck):
        db.execute("CREATE TABLE e (id INT PRIMARY KEY, a INT, b INT, w INT)")
    if data:
        con.cursor().executemany("INSERT INTO e VALUES (%s, %s, %s, %s)", data)
        duck.executemany("INSERT INTO e VALUES (?, ?, ?, ?)", data)
    con.execute("SET statement_timeout = '30s'")     # a recursion gone wrong fails, not hangs
    for _ in range(5):
        for sql in _queries(rng, nodes):
            cur = con.cursor()
            cur.execute(sql)
            assert _multiset(cur.fetchall()) == _multiset(duck.execute(sql).fetchall()), sql
    con.close()
    duck.close()


_ENDLESS = "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s) SELECT count(*) FROM s"


def test_a_recursion_that_never_ends_is_stopped(tmp_path):
    con = kudusql.connect(str(tmp_path / "db"))
    cur = con.cursor()
    cur.execute("SET statement_timeout = '300ms'")
    with pytest.raises(kudusql.Error) as e:
        cur.execute(_ENDLESS)
    assert e.value.sqlstate == "57014"
    cur.execute("SET statement_timeout = 0")
    # the rows double each step: the memory meter stops it
    cur.execute("SET query_mem_limit = '20MB'")
    with pytest.raises(kudusql.Error) as e:
        cur.execute("WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
                    "CROSS JOIN (VALUES (1), (2)) v(x)) SELECT count(*) FROM s")
    assert e.value.sqlstate == "53200"
    # and a cancel from another thread
    cur.execute("RESET query_mem_limit")
    timer = threading.Timer(0.3, con.cancel)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(kudusql.Error) as e:
        cur.execute(_ENDLESS)
    timer.join()
    assert e.value.sqlstate == "57014" and time.monotonic() - t0 < 30
    cur.execute("WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 3) "
                "SELECT n FROM s")          # the connection is fine afterwards
    assert cur.fetchall() == [(1,), (2,), (3,)]
    con.close()
