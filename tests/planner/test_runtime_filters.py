"""Runtime join filters (planner/executor/runtime_filters.py): the filter itself, and joins
that use them answering as DuckDB does over the same random data (inner joins with chains
and transitive keys, left joins over grouped subqueries, EXISTS / NOT EXISTS, NOT IN with
NULLs, IN over a HAVING, LIMIT inside a subquery), in bitmap and in min/max mode."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pytest

import kudusql
from planner.executor import runtime_filters as rf

duckdb = pytest.importorskip("duckdb")


# -- the filter --------------------------------------------------------------------------------
def test_bitmap_filter_keeps_exactly_the_build_values_and_never_null():
    f = rf.RuntimeFilter.build("k", pa.int32(), pa.array([5, None, 9, 5, 1000], pa.int64()), "b")
    assert f.bits is not None and f.count == 4
    probe = pa.array([5, 6, None, 9, 1000, 1001, -3, 4], pa.int32())
    assert f.mask(probe).tolist() == [True, False, False, True, True, False, False, False]


def test_min_max_filter_over_a_wide_span(monkeypatch):
    monkeypatch.setattr(rf, "MAX_BITMAP", 16)
    f = rf.RuntimeFilter.build("k", pa.int64(), pa.array([10, 20, 1 << 40]), "b")
    assert f.bits is None
    assert f.mask(pa.array([9, 10, 15, 1 << 40, (1 << 40) + 1])).tolist() == \
        [False, True, True, True, False]


def test_empty_build_side_drops_every_row_and_other_types_get_no_filter():
    f = rf.RuntimeFilter.build("k", pa.int64(), pa.array([None], pa.int64()), "b")
    assert not f.mask(pa.array([0, 1, -1], pa.int64())).any()
    assert rf.RuntimeFilter.build("k", pa.string(), pa.array(["a"]), "b") is None
    assert rf.RuntimeFilter.build("k", pa.date32(), pa.array([1, 2]), "b") is None  # int vs date
    d = rf.RuntimeFilter.build("k", pa.date32(), pa.array([dt.date(2020, 1, 2)]), "b")
    assert d.mask(pa.array([dt.date(2020, 1, 2), dt.date(2020, 1, 3)])).tolist() == [True, False]


def test_a_filter_that_keeps_nearly_everything_switches_itself_off(monkeypatch):
    monkeypatch.setattr(rf, "ADAPT_ROWS", 100)
    f = rf.RuntimeFilter.build("k", pa.int64(), pa.array(np.arange(1000)), "b")
    batch = pa.record_batch({"k": pa.array(np.arange(64), pa.int64())})
    for _ in range(3):
        assert rf.apply([f], batch).num_rows == 64
    assert not f.active and "switched off" in f.describe()
    # a selective one stays on
    g = rf.RuntimeFilter.build("k", pa.int64(), pa.array([3]), "b")
    for _ in range(3):
        assert rf.apply([g], batch).num_rows == 1
    assert g.active


def test_zone_map_test_rules_out_blocks_without_a_key():
    f = rf.RuntimeFilter.build("k", pa.int64(), pa.array([100, 105, 5000], pa.int64()), "b")
    t = rf.ScanTest(f)
    assert not t.may_match(0, 99, 0, 10)          # below every key
    assert not t.may_match(106, 4999, 0, 10)      # between keys (the bitmap says so)
    assert not t.may_match(5001, 9000, 0, 10)     # above
    assert not t.may_match(100, 105, 10, 10)      # only NULLs
    assert t.may_match(101, 100000, 0, 10) and t.may_match(None, None, 0, 10)
    assert f.seen == 40 and f.kept == 0           # the skipped rows count as dropped
    wide = rf.RuntimeFilter.build("k", pa.int64(), pa.array([0, 1 << 20]), "b")
    assert rf.ScanTest(wide).may_match(1, 1 << 19, 0, 1)    # too wide to read: may match
    assert t.mask(pa.array([99, 100, None, 5000], pa.int64())).tolist() == \
        [False, True, False, True]


# -- joins against DuckDB ------------------------------------------------------------------------
TABLES = {
    "f": ("id INT NOT NULL, a INT, b INT, d DATE, PRIMARY KEY (id)", 4000),
    "d1": ("k INT NOT NULL, x INT, PRIMARY KEY (k)", 300),
    "d2": ("k INT NOT NULL, y INT, PRIMARY KEY (k)", 40),
    "g": ("gid INT NOT NULL, a INT, c INT, PRIMARY KEY (gid)", 1500),
    "days": ("d DATE NOT NULL, w INT, PRIMARY KEY (d)", 60),
}


def _data(seed: int) -> dict[str, list[tuple]]:
    r = random.Random(seed)
    day0 = dt.date(2020, 1, 1)

    def maybe(v, p=0.05):
        return None if r.random() < p else v
    return {
        "f": [(i, maybe(r.randrange(0, 400)), r.randrange(0, 100),
               maybe(day0 + dt.timedelta(days=r.randrange(0, 90)))) for i in range(4000)],
        "d1": [(k, r.randrange(0, 40)) for k in range(300)],
        "d2": [(k, r.randrange(0, 20)) for k in range(40)],
        "g": [(i, maybe(r.randrange(0, 500)), r.randrange(0, 10)) for i in range(1500)],
        "days": [(day0 + dt.timedelta(days=i), r.randrange(0, 7)) for i in range(0, 120, 2)],
    }


def _lit(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return str(v)


def insert_both(cur, duck, table: str, rows) -> None:
    """The same rows into kudusql (cursor `cur`) and DuckDB, 500 to an INSERT."""
    for i in range(0, len(rows), 500):
        values = ", ".join("(" + ", ".join(_lit(v) for v in row) + ")"
                           for row in rows[i:i + 500])
        cur.execute(f"INSERT INTO {table} VALUES {values}")
        duck.execute(f"INSERT INTO {table} VALUES {values}")


QUERIES = [
    # a chain of inner joins: d2 filters d1, which filters f
    "SELECT count(*), sum(f.b) FROM f, d1, d2 WHERE f.a = d1.k AND d1.x = d2.k AND d2.y < 3",
    # transitive keys: f.a = d1.k and g.a = f.a, so d1 filters g through f
    "SELECT count(*), sum(g.c) FROM f, d1, g WHERE f.a = d1.k AND g.a = f.a AND d1.x < 4",
    # the probe side's key is an expression on the build side
    "SELECT count(*) FROM f, d1 WHERE f.a = d1.k + 1 AND d1.x = 7",
    # a date key
    "SELECT count(*), sum(f.b) FROM f, days WHERE f.d = days.d AND days.w = 3",
    # a left join over a grouped subquery (a correlated scalar subquery, decorrelated)
    "SELECT d1.k, (SELECT sum(f.b) FROM f WHERE f.a = d1.k) FROM d1 WHERE d1.x < 3",
    "SELECT d1.k, s.t FROM d1 LEFT JOIN (SELECT a, sum(b) AS t FROM f GROUP BY a) s "
    "ON s.a = d1.k WHERE d1.x = 5",
    "SELECT count(*), sum(f.b) FROM f, d1 WHERE f.a = d1.k AND d1.x < 10 AND "
    "f.b < (SELECT avg(f2.b) FROM f f2 WHERE f2.a = f.a)",
    # EXISTS / NOT EXISTS, with and without a residual condition
    "SELECT count(*) FROM d1 WHERE d1.x < 5 AND EXISTS (SELECT 1 FROM f WHERE f.a = d1.k)",
    "SELECT count(*) FROM d1 WHERE d1.x < 5 AND NOT EXISTS "
    "(SELECT 1 FROM f WHERE f.a = d1.k AND f.b > 20)",
    "SELECT count(*) FROM f f1 WHERE f1.a < 30 AND EXISTS "
    "(SELECT 1 FROM f f2 WHERE f2.a = f1.a AND f2.id <> f1.id)",
    # NOT IN: a NULL in the subquery decides it (no filter may drop that NULL)
    "SELECT count(*) FROM d1 WHERE d1.x < 5 AND d1.k NOT IN (SELECT a FROM f WHERE b < 30)",
    "SELECT count(*) FROM d1 WHERE d1.x < 5 AND d1.k NOT IN "
    "(SELECT a FROM f WHERE b < 30 AND a IS NOT NULL)",
    # IN over a HAVING (the semi join's keys filter the joins' inputs)
    "SELECT count(*), sum(f.b) FROM f, d1 WHERE f.a = d1.k AND f.a IN "
    "(SELECT a FROM f GROUP BY a HAVING sum(b) > 700)",
    "SELECT count(*) FROM f, g WHERE f.a = g.a AND f.id IN "
    "(SELECT id FROM f WHERE b > 95)",
    # a LIMIT inside the subquery: filtering below it would change which rows it keeps
    "SELECT count(*) FROM d1 WHERE d1.k IN (SELECT a FROM f ORDER BY id LIMIT 25)",
    "SELECT d1.k, s.n FROM d1 LEFT JOIN (SELECT a, count(*) AS n FROM "
    "(SELECT a FROM f ORDER BY id LIMIT 300) l GROUP BY a) s ON s.a = d1.k WHERE d1.x = 2",
    # grouping sets: the filter stops at them
    "SELECT d1.k, s.t FROM d1 JOIN (SELECT a, b, sum(b) AS t FROM f GROUP BY ROLLUP (a, b)) s "
    "ON s.a = d1.k WHERE d1.x = 1",
    # d1 has no filter of its own: it waits for f, whose filter then thins it
    "SELECT count(*), sum(d1.x), sum(f.b) FROM d1, f WHERE f.a = d1.k AND f.b < 2",
]


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    data = _data(29)
    con = kudusql.connect(str(tmp_path_factory.mktemp("runtime_filters")))
    duck = duckdb.connect()
    cur = con.cursor()
    for name, (cols, _n) in TABLES.items():
        cur.execute(f"CREATE TABLE {name} ({cols}) PARTITION BY HASH "
                    f"({cols.split()[0]}) PARTITIONS 2")
        duck.execute(f"CREATE TABLE {name} ({cols.replace(' NOT NULL', '')})")
        insert_both(cur, duck, name, data[name])
    yield con, duck
    con.close()
    duck.close()


def _norm(rows):
    out = []
    for r in rows:
        out.append(tuple(float(v) if v is not None and not isinstance(v, (int, dt.date))
                         else v for v in r))
    return sorted(out, key=repr)


def _check(con, duck, sql):
    cur = con.cursor()
    cur.execute(sql)
    ours = _norm(cur.fetchall())
    theirs = _norm(duck.execute(sql).fetchall())
    assert len(ours) == len(theirs), sql
    for a, b in zip(ours, theirs):
        assert a == pytest.approx(b), (sql, a, b)


@pytest.mark.parametrize("sql", QUERIES)
def test_joins_with_runtime_filters_answer_as_duckdb(dbs, sql):
    _check(*dbs, sql)


@pytest.mark.parametrize("sql", QUERIES)
def test_joins_with_min_max_filters_answer_as_duckdb(dbs, sql, monkeypatch):
    monkeypatch.setattr(rf, "MAX_BITMAP", 8)
    monkeypatch.setattr(rf, "ADAPT_ROWS", 1 << 30)      # never switched off
    _check(*dbs, sql)


def test_explain_analyze_shows_the_filters_at_work(dbs):
    con, _ = dbs
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + QUERIES[0])
    plan = "\n".join(r[0] for r in cur.fetchall())
    # d2 -> d1 -> f, each scan thinned by the one before
    assert "runtime filter d1#" in plan and "runtime filter f#" in plan, plan
    assert "Peak Memory:" in plan
    cur.execute("EXPLAIN ANALYZE " + QUERIES[7])
    plan = "\n".join(r[0] for r in cur.fetchall())
    assert "runtime filter f#" in plan, plan      # the EXISTS subquery's scan


def test_the_filter_runs_inside_the_engine_scan(dbs):
    """In-process tables take the filter as a scan predicate: the scan returns only the
    rows the filter kept (decoding the other columns only there), not every row for the
    executor to filter afterwards."""
    import re
    con, _ = dbs
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + QUERIES[0])
    plan = "\n".join(r[0] for r in cur.fetchall())
    lines = plan.splitlines()
    at = next(i for i, ln in enumerate(lines) if "Scan f" in ln)
    block = "\n".join(lines[at:at + 8])
    returned = int(re.search(r"returned (\d+)", block).group(1))
    seen, kept = map(int, re.search(r"runtime filter f#\S+ IN .*: (\d+) -> (\d+) rows",
                                    block).groups())
    assert seen == 4000 and kept < seen, block
    assert returned == kept, block


def test_a_bare_scan_waits_for_an_input_that_can_filter_it(dbs):
    """d1 (300 rows, no filter of its own) is estimated smaller than f (4,000 rows halved
    for its one predicate), but read first it could filter nothing: it runs after f and
    reads only the rows whose key f kept (TPC-H Q10's customer after its orders)."""
    import re
    con, _ = dbs
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + QUERIES[-1])
    plan = "\n".join(r[0] for r in cur.fetchall())
    m = re.search(r"runtime filter d1#\S+ IN \"f#\S+\" .*: (\d+) -> (\d+) rows", plan)
    assert m is not None, plan
    assert int(m.group(1)) == 300 and int(m.group(2)) < 300, plan
    assert "runtime filter f#" not in plan, plan     # (d1 ran second: it filtered nothing)
