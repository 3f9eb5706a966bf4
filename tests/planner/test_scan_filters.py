"""A scan's residual WHERE (what the engine scan cannot take: column against column, LIKE,
arithmetic, OR, a scalar subquery) runs on the pool thread that read each chunk of a
tablet's batches (`TableScan.filter_chunks`, planner/executor/core.py `_ChunkFilter`):
answers as DuckDB's over random data with NULLs, in morsels smaller than a chunk too; it
runs off the caller's thread for a table of several tablets; it sees the session's time
zone there; and a data error it raises comes out with its SQLSTATE. Columns read by the
filter only are dropped as it filters (`Executor._scan_kept`): the scan's result has only
the columns read above it, and answers (a count with no column read above, DISTINCT,
UNION, a join, the main-thread path) are DuckDB's."""

from __future__ import annotations

import datetime as dt
import random
import threading
import zoneinfo

import pytest

import kudusql
from planner import guard
from planner.executor import core

duckdb = pytest.importorskip("duckdb")

COLS = "id INT NOT NULL, a INT, b INT, s TEXT, d1 DATE, d2 DATE, PRIMARY KEY (id)"
ROWS = 3000


def _data(seed: int) -> list[tuple]:
    r = random.Random(seed)
    day0 = dt.date(2021, 3, 1)
    words = ["special", "requests", "pending", "deposits", "quick", "ironic"]

    def maybe(v, p=0.08):
        return None if r.random() < p else v
    return [(i, maybe(r.randrange(-50, 50)), maybe(r.randrange(0, 100)),
             maybe(" ".join(r.choice(words) for _ in range(r.randrange(1, 5)))),
             maybe(day0 + dt.timedelta(days=r.randrange(0, 60))),
             maybe(day0 + dt.timedelta(days=r.randrange(0, 60)))) for i in range(ROWS)]


def _lit(v) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if v is None:
        return "NULL"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    return str(v)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("scan_filters")))
    duck = duckdb.connect()
    cur = con.cursor()
    cur.execute(f"CREATE TABLE t ({COLS}) PARTITION BY HASH (id) PARTITIONS 4")
    duck.execute(f"CREATE TABLE t ({COLS})")
    rows = [tuple(_lit(v) for v in row) for row in _data(35)]
    for i in range(0, len(rows), 500):
        values = ", ".join("(" + ", ".join(row) + ")" for row in rows[i:i + 500])
        cur.execute(f"INSERT INTO t VALUES {values}")
        duck.execute(f"INSERT INTO t VALUES {values}")
    yield con, duck
    con.close()
    duck.close()


QUERIES = [
    "SELECT id, a, b FROM t WHERE a < b",
    "SELECT count(*), sum(b) FROM t WHERE d1 < d2 AND a + b > 20",
    "SELECT id FROM t WHERE s NOT LIKE '%special%requests%'",
    "SELECT id, s FROM t WHERE s LIKE '%quick%' OR a * 2 = b",
    "SELECT count(*) FROM t WHERE CASE WHEN a > 0 THEN b ELSE -b END > 40",
    "SELECT id FROM t WHERE b > (SELECT avg(b) FROM t) AND d1 <> d2",
    "SELECT a, count(*) FROM t WHERE a <> b AND d2 > d1 GROUP BY a",
    "SELECT count(*) FROM t WHERE coalesce(a, b) IS NULL OR a IS DISTINCT FROM b - 50",
    # a subquery the filter runs per batch (it scans on the same pool: not in the scan's
    # threads, where it waited on its own pool's chunks forever)
    "SELECT id FROM t WHERE a IN (SELECT b - 3 FROM t) OR a > 40",
    # columns read by the filter only, dropped once it has run: none left but a count,
    # DISTINCT / UNION over what is left, a join, and the main-thread path (a subplan)
    "SELECT count(*) FROM t WHERE s NOT LIKE '%special%' AND d1 < d2",
    "SELECT DISTINCT a FROM t WHERE s LIKE '%quick%' AND b > a",
    "SELECT a FROM t WHERE d1 < d2 UNION SELECT b FROM t WHERE s LIKE '%ironic%'",
    "SELECT x.id, y.b FROM t x JOIN t y ON x.a = y.a WHERE x.s NOT LIKE '%pending%' "
    "AND y.d1 > y.d2",
    "SELECT id, b FROM t WHERE s IN (SELECT s FROM t WHERE a > 45) OR d1 < d2",
]


def _norm(rows) -> list:
    return sorted((tuple(float(v) if hasattr(v, "as_integer_ratio") and
                         not isinstance(v, int) else v for v in r) for r in rows), key=repr)


@pytest.mark.parametrize("morsel", [None, 97])
@pytest.mark.parametrize("sql", QUERIES)
def test_residual_filters_in_the_scan_answer_as_duckdb(dbs, sql, morsel, monkeypatch):
    if morsel:                      # a chunk filtered in several morsels
        monkeypatch.setattr(guard, "MORSEL_ROWS", morsel)
    con, duck = dbs
    cur = con.cursor()
    cur.execute(sql)
    assert _norm(cur.fetchall()) == _norm(duck.execute(sql).fetchall()), sql


def test_the_filter_runs_on_the_scan_threads(dbs, monkeypatch):
    con, _ = dbs
    threads = []
    call = core._ChunkFilter.__call__

    def spy(self, batches):
        threads.append(threading.current_thread() is threading.main_thread())
        return call(self, batches)
    monkeypatch.setattr(core._ChunkFilter, "__call__", spy)
    cur = con.cursor()
    cur.execute("SELECT count(*) FROM t WHERE a < b")
    assert cur.fetchall()[0][0] > 0
    assert threads and not any(threads)        # every chunk filtered off the caller's thread


def test_the_filter_sees_the_session_time_zone(tmp_path):
    con = kudusql.connect(str(tmp_path))
    cur = con.cursor()
    cur.execute("CREATE TABLE z (id INT PRIMARY KEY, ts TIMESTAMP) "
                "PARTITION BY HASH (id) PARTITIONS 4")
    base = dt.datetime(2024, 1, 1)
    stamps = [base + dt.timedelta(minutes=7 * i) for i in range(400)]
    cur.execute("INSERT INTO z VALUES " + ", ".join(
        f"({i}, TIMESTAMP '{s.isoformat(sep=' ')}')" for i, s in enumerate(stamps)))
    cur.execute("SET TIME ZONE 'Asia/Kolkata'")
    # the local time becomes an instant in the session's zone (5:30 ahead of UTC)
    cur.execute("SELECT id FROM z WHERE CAST(ts AS TIMESTAMPTZ) < "
                "TIMESTAMPTZ '2024-01-01 06:00:00+00'")
    got = sorted(r[0] for r in cur.fetchall())
    zone = zoneinfo.ZoneInfo("Asia/Kolkata")
    limit = dt.datetime(2024, 1, 1, 6, tzinfo=dt.timezone.utc)
    want = [i for i, s in enumerate(stamps) if s.replace(tzinfo=zone) < limit]
    assert len(want) == 99 and got == want
    con.close()


def test_a_data_error_in_the_filter_keeps_its_sqlstate(dbs):
    con, _ = dbs
    cur = con.cursor()
    with pytest.raises(Exception) as e:
        cur.execute("SELECT id FROM t WHERE b / (a - a) > 1")
        cur.fetchall()
    assert getattr(e.value, "sqlstate", None) == "22012"


@pytest.mark.parametrize("sql, read_above", [
    ("SELECT id FROM t WHERE s NOT LIKE '%special%requests%'", {"id"}),
    ("SELECT a, b FROM t WHERE d1 < d2 AND s LIKE '%quick%'", {"a", "b"}),
    ("SELECT id FROM t WHERE s IN (SELECT s FROM t WHERE a > 45) OR d1 < d2", {"id"}),
])
def test_columns_read_by_the_filter_only_leave_the_scan(dbs, sql, read_above, monkeypatch):
    """The scan's result (what is held, and what joins and aggregations above copy) has no
    column only its filter reads: TPC-H Q13's o_comment carried 15M rows through its join
    at SF10."""
    con, duck = dbs
    kinds = dict(core.OPERATORS)
    run_scan = kinds[core.L.Scan][1]
    seen = []

    def spy(ex, node):
        t = run_scan(ex, node)
        if node.table == "t" and node.filters:
            seen.append({k.rsplit(".", 1)[-1] for k in t.column_names})
        return t
    monkeypatch.setitem(core.OPERATORS, core.L.Scan, ("core", spy))
    cur = con.cursor()
    cur.execute(sql)
    assert _norm(cur.fetchall()) == _norm(duck.execute(sql).fetchall())
    assert seen and seen[-1] == read_above, seen
