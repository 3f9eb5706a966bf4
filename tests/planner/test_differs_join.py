"""EXISTS / NOT EXISTS with the one residual `y <> x` (planner/executor/joins.py,
`_differs_join`: the right side grouped to its min and max of y per key, TPC-H Q21's
"another supplier on the same order") answering as DuckDB: NULL keys, NULL x, groups
whose y are all NULL, one-valued and many-valued groups, both orientations of `<>`,
integer and date columns; and the shapes that keep the general residual join."""

from __future__ import annotations

import datetime as dt
import random

import pytest

import kudusql
from planner.executor import joins
from tests.planner.test_runtime_filters import _check, insert_both

duckdb = pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    r = random.Random(21)
    day0 = dt.date(2021, 3, 1)

    def maybe(v, p):
        return None if r.random() < p else v
    rows = []
    for i in range(3000):
        k = maybe(r.randrange(0, 400), 0.03)
        # keys below 40 hold one y value (or NULL) only; keys 40..59 only NULL y
        if k is not None and k < 40:
            y = maybe(k % 7, 0.2)
        elif k is not None and k < 60:
            y = None
        else:
            y = maybe(r.randrange(0, 6), 0.1)
        rows.append((i, k, y, maybe(day0 + dt.timedelta(days=r.randrange(0, 4)), 0.1)))
    con = kudusql.connect(str(tmp_path_factory.mktemp("differs")))
    duck = duckdb.connect()
    cur = con.cursor()
    cur.execute("CREATE TABLE li (id INT PRIMARY KEY, k INT, y INT, d DATE) "
                "PARTITION BY HASH (id) PARTITIONS 2")
    duck.execute("CREATE TABLE li (id INT, k INT, y INT, d DATE)")
    insert_both(cur, duck, "li", rows)
    yield con, duck
    con.close()
    duck.close()


QUERIES = [
    "SELECT count(*) FROM li a WHERE EXISTS (SELECT 1 FROM li b WHERE b.k = a.k AND b.y <> a.y)",
    "SELECT count(*) FROM li a WHERE NOT EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND b.y <> a.y)",
    "SELECT count(*) FROM li a WHERE EXISTS (SELECT 1 FROM li b WHERE b.k = a.k AND a.y <> b.y)",
    "SELECT a.id FROM li a WHERE a.id < 600 AND NOT EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND a.y <> b.y AND b.id > 100)",
    "SELECT count(*), sum(a.id) FROM li a WHERE EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND b.d <> a.d)",
    "SELECT count(*) FROM li a WHERE NOT EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND b.d <> a.d)",
    # two keys
    "SELECT count(*) FROM li a WHERE EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND b.d = a.d AND b.y <> a.y)",
    # TPC-H Q21's shape: both, one inside the other's result
    "SELECT a.k, count(*) FROM li a WHERE a.d > DATE '2021-03-01' AND EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND b.y <> a.y) AND NOT EXISTS "
    "(SELECT 1 FROM li c WHERE c.k = a.k AND c.y <> a.y AND c.d > a.d) GROUP BY a.k",
    "SELECT a.k, count(*) FROM li a WHERE EXISTS "
    "(SELECT 1 FROM li b WHERE b.k = a.k AND b.y <> a.y) AND NOT EXISTS "
    "(SELECT 1 FROM li c WHERE c.k = a.k AND c.y <> a.y AND c.d > DATE '2021-03-02') "
    "GROUP BY a.k",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_exists_with_a_differs_residual_answers_as_duckdb(dbs, sql):
    _check(*dbs, sql)


def test_the_grouped_path_is_taken_only_for_column_differs_column(dbs, monkeypatch):
    con, _ = dbs
    taken = []
    real = joins.JoinOperators._differs_join

    def spy(self, *a):
        taken.append(a[-2:])
        return real(self, *a)
    monkeypatch.setattr(joins.JoinOperators, "_differs_join", spy)
    cur = con.cursor()
    cur.execute(QUERIES[0])
    assert len(taken) == 1
    taken.clear()
    # an expression, another operator, a mixed-type pair: the general residual join
    for sql in ("SELECT count(*) FROM li a WHERE EXISTS "
                "(SELECT 1 FROM li b WHERE b.k = a.k AND b.y + 1 <> a.y)",
                "SELECT count(*) FROM li a WHERE EXISTS "
                "(SELECT 1 FROM li b WHERE b.k = a.k AND b.y < a.y)",
                "SELECT count(*) FROM li a WHERE EXISTS "
                "(SELECT 1 FROM li b WHERE b.k = a.k AND b.id <> a.d - DATE '2021-01-01')"):
        cur.execute(sql)
        cur.fetchall()
    assert taken == []
