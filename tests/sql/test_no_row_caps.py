"""No arbitrary row caps (issue 27): set-returning functions make their rows at run time a
morsel at a time (L.Series), and a cross join of two 30,000-row tables starts, runs under
the query memory limit (53200 past it) and stops on statement_timeout (57014) within about
one chunk of work. Answers are checked against numpy / Python."""

from __future__ import annotations

import datetime as dt
import time

import numpy as np
import pytest

import kudusql


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = kudusql.connect(str(tmp_path_factory.mktemp("caps")))
    cur = c.cursor()
    cur.execute("CREATE TABLE a (k INT PRIMARY KEY, x INT) PARTITION BY HASH (k) PARTITIONS 2")
    cur.execute("CREATE TABLE b (k INT PRIMARY KEY, y INT) PARTITION BY HASH (k) PARTITIONS 2")
    cur.execute("INSERT INTO a SELECT g, g % 101 FROM generate_series(1, 30000) AS g")
    cur.execute("INSERT INTO b SELECT g, g % 997 FROM generate_series(1, 30000) AS g")
    yield c
    c.close()


def q(con, sql):
    cur = con.cursor()
    cur.execute(sql)
    return cur.fetchall() if cur.description else None


def test_generate_series_beyond_the_old_cap(con):
    assert q(con, "SELECT count(*), min(g), max(g) FROM generate_series(1, 100000) AS g") \
        == [(100000, 1, 100000)]
    assert q(con, "SELECT count(*) FROM generate_series(1, 3000000) AS g "
                  "WHERE g % 7 = 0") == [(3000000 // 7,)]
    assert q(con, "SELECT count(*) FROM (SELECT generate_series(1, 100000) AS g) s") == \
        [(100000,)]
    assert q(con, "SELECT g FROM generate_series(100000, 1, -33333) AS g") == \
        [(100000,), (66667,), (33334,), (1,)]
    assert q(con, "SELECT v, o FROM generate_series(5, 7) WITH ORDINALITY AS t(v, o)") == \
        [(5, 1), (6, 2), (7, 3)]


def test_timestamp_series_by_minutes(con):
    rows = q(con, "SELECT count(*), max(t) FROM generate_series(TIMESTAMP '2026-01-01', "
                  "TIMESTAMP '2026-12-31 23:59', INTERVAL '1 minute') AS t")
    assert rows == [(365 * 24 * 60, dt.datetime(2026, 12, 31, 23, 59))]
    # a month step keeps PostgreSQL's repeated addition (Jan 31 -> Feb 28 -> Mar 28)
    assert [r[0].day for r in q(con, "SELECT t FROM generate_series(DATE '2026-01-31', "
                                     "DATE '2026-04-30', INTERVAL '1 month') AS t")] == \
        [31, 28, 28, 28]


def test_a_non_equi_join_of_the_30000_row_tables(con):
    """The product (900M rows) is never held: each chunk is filtered as it is made."""
    xs = np.arange(1, 30001) % 101
    ys = np.arange(1, 30001) % 997
    want = int(np.sum(np.searchsorted(np.sort(ys), xs - 900, side="left")))
    assert q(con, "SELECT count(*) FROM a JOIN b ON b.y < a.x - 900") == [(want,)]


def test_a_cross_join_runs_under_the_memory_limit(con):
    q(con, "SET query_mem_limit = '64MB'")
    try:
        with pytest.raises(kudusql.Error) as e:
            q(con, "SELECT sum(a.x + b.y) FROM a CROSS JOIN b")
        assert e.value.sqlstate == "53200"
    finally:
        q(con, "RESET query_mem_limit")


def test_a_cross_join_stops_on_statement_timeout(con):
    q(con, "SET statement_timeout = '300ms'")
    try:
        t0 = time.monotonic()
        with pytest.raises(kudusql.Error) as e:
            q(con, "SELECT count(*) FROM a JOIN b ON a.x + b.y = a.k")
        took = time.monotonic() - t0
    finally:
        q(con, "SET statement_timeout = 0")
    assert e.value.sqlstate == "57014"
    assert took < 0.3 + 1.5, took          # one chunk of work past the deadline, loaded box


def test_a_large_fan_out_hash_join_keeps_only_its_matches(con):
    """A self join on a 2-valued key of 4000 rows makes 8M rows; with a condition over
    both sides it runs under a 24MB limit, because each output batch of the hash join is
    filtered (and cut to the columns used) as Acero makes it. Before, the whole output
    (~130MB) was collected first and the statement failed with 53200."""
    q(con, "CREATE TABLE fan (k INT PRIMARY KEY, g INT)")
    q(con, "INSERT INTO fan SELECT g, g % 2 FROM generate_series(1, 4000) AS g")
    k = np.arange(1, 4001)
    a, b = np.meshgrid(k, k, indexing="ij")
    same = (a % 2) == (b % 2)
    hit = same & ((a * 7 + b) % 1009 == 0)
    q(con, "SET query_mem_limit = '24MB'")
    try:
        assert q(con, "SELECT count(*), sum(x.k - y.k) FROM fan x JOIN fan y ON x.g = y.g "
                      "WHERE (x.k * 7 + y.k) % 1009 = 0") == [
            (int(hit.sum()), int((a - b)[hit].sum()))]
        with pytest.raises(kudusql.Error) as e:       # the unfiltered product does not fit
            q(con, "SELECT sum(x.k + y.k) FROM fan x JOIN fan y ON x.g = y.g")
        assert e.value.sqlstate == "53200"
    finally:
        q(con, "RESET query_mem_limit")
