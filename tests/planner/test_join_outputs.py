"""A streamed hash join (`joins.hash_join` as an Acero plan) writes only the columns read
above it and never its evaluated copies of the keys (`$lk` / `$rk`): each output column is
a fresh buffer per batch. Answers of left / full / semi / anti / inner joins reading a
subset of the columns are DuckDB's, in morsels small enough to stream."""

from __future__ import annotations

import random

import pytest

import kudusql
from planner import guard
from planner.executor import core
from tests.planner.test_runtime_filters import insert_both

duckdb = pytest.importorskip("duckdb")

ROWS = 2000


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("join_outputs")))
    duck = duckdb.connect()
    cur = con.cursor()
    r = random.Random(29)
    for name in ("a", "b"):
        cols = "id INT NOT NULL, k INT, x INT, s TEXT, PRIMARY KEY (id)"
        cur.execute(f"CREATE TABLE {name} ({cols}) PARTITION BY HASH (id) PARTITIONS 2")
        duck.execute(f"CREATE TABLE {name} ({cols})")
        rows = [f"({i}, {'NULL' if r.random() < 0.05 else r.randrange(300)}, "
                f"{r.randrange(-9, 9)}, 'w{r.randrange(50)}')" for i in range(ROWS)]
        for i in range(0, ROWS, 500):
            values = ", ".join(rows[i:i + 500])
            cur.execute(f"INSERT INTO {name} VALUES {values}")
            duck.execute(f"INSERT INTO {name} VALUES {values}")
    yield con, duck
    con.close()
    duck.close()


QUERIES = [
    "SELECT a.id, count(b.x) FROM a LEFT JOIN b ON a.k = b.k GROUP BY a.id",
    "SELECT a.s, b.id FROM a FULL JOIN b ON a.k = b.k AND a.x = b.x",
    "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND b.x = a.x)",
    "SELECT id, s FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k)",
    "SELECT a.id, b.s FROM a JOIN b ON a.k = b.k WHERE a.x < b.x",
    "SELECT count(*) FROM a JOIN b ON a.k = b.k",
]


def _norm(rows) -> list:
    return sorted(rows, key=repr)


@pytest.fixture
def streamed(monkeypatch):
    """Morsels of 64 rows (every join here streams); the output columns of each join."""
    monkeypatch.setattr(guard, "MORSEL_ROWS", 64)
    outputs = []
    collect = core.Executor.collect

    def spy(self, reader, each=None):
        outputs.append(list(reader.schema.names))
        return collect(self, reader, each)
    monkeypatch.setattr(core.Executor, "collect", spy)
    return outputs


@pytest.mark.parametrize("sql", QUERIES)
def test_streamed_joins_answer_as_duckdb(dbs, sql, streamed):
    con, duck = dbs
    cur = con.cursor()
    cur.execute(sql)
    assert _norm(cur.fetchall()) == _norm(duck.execute(sql).fetchall()), sql
    assert streamed, "the join did not stream"
    assert not any(c.startswith(("$lk", "$rk")) for cols in streamed for c in cols), streamed


def test_a_streamed_join_writes_only_the_columns_read_above(dbs, streamed):
    con, _ = dbs
    cur = con.cursor()
    cur.execute("SELECT a.id, count(b.x) FROM a LEFT JOIN b ON a.k = b.k GROUP BY a.id")
    assert len(cur.fetchall()) == ROWS
    joined = [cols for cols in streamed if any(c.endswith(".x") for c in cols)]
    assert joined, streamed
    # a.id and b.x are read above; a.k, b.k (the keys) and b.id are not
    assert sorted(c.rsplit(".", 1)[-1] for c in joined[0]) == ["id", "x"], joined


@pytest.fixture(scope="module")
def wide_narrow(tmp_path_factory):
    """`w`: 300 rows with a 200-byte text; `n`: 1,200 rows of two integers."""
    con = kudusql.connect(str(tmp_path_factory.mktemp("build_side")))
    duck = duckdb.connect()
    cur = con.cursor()
    r = random.Random(38)
    tables = {
        "w": ("id INT NOT NULL, t TEXT, PRIMARY KEY (id)",
              [(i, f"'{chr(97 + i % 26) * 200}'") for i in range(300)]),
        "n": ("id INT NOT NULL, wid INT, PRIMARY KEY (id)",
              [(i, None if r.random() < 0.05 else r.randrange(400)) for i in range(1200)]),
    }
    for name, (cols, rows) in tables.items():
        cur.execute(f"CREATE TABLE {name} ({cols}) PARTITION BY HASH (id) PARTITIONS 2")
        duck.execute(f"CREATE TABLE {name} ({cols})")
        insert_both(cur, duck, name, rows)
    yield con, duck
    con.close()
    duck.close()


BUILD_SIDE_QUERIES = [
    "SELECT w.id, w.t, n.id FROM w JOIN n ON w.id = n.wid",
    "SELECT w.id, n.id FROM w LEFT JOIN n ON w.id = n.wid",
    "SELECT n.id, w.t FROM n LEFT JOIN w ON w.id = n.wid",
    "SELECT id, t FROM w WHERE EXISTS (SELECT 1 FROM n WHERE n.wid = w.id)",
    "SELECT id, t FROM w WHERE NOT EXISTS (SELECT 1 FROM n WHERE n.wid = w.id)",
]


@pytest.mark.parametrize("small", [False, True])
def test_the_side_with_fewer_bytes_builds(wide_narrow, small, monkeypatch):
    """300 wide rows (60 kB of text) against 1,200 narrow ones (~10 kB): the narrow side
    builds the hash table (`joins.build_cost`), though it has more rows; every join kind
    that may swap its sides answers as DuckDB, streamed (64-row morsels) or not."""
    import re
    if small:
        monkeypatch.setattr(guard, "MORSEL_ROWS", 64)
    con, duck = wide_narrow
    cur = con.cursor()
    for sql in BUILD_SIDE_QUERIES:
        cur.execute(sql)
        assert _norm(cur.fetchall()) == _norm(duck.execute(sql).fetchall()), sql
    cur.execute("EXPLAIN ANALYZE " + BUILD_SIDE_QUERIES[0])
    plan = "\n".join(r[0] for r in cur.fetchall())
    m = re.search(r"\((\d+) probe x (\d+) build", plan)
    assert m is not None, plan
    assert (int(m.group(1)), int(m.group(2))) == (300, 1200), plan
