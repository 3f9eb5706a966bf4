"""Repeated aggregations computed once per statement (planner/executor/shared.py): answers
as DuckDB's over the same random data when a WITH query is read twice (TPC-H Q15's shape),
when the first reading ran under a selective runtime join filter (its result is then only
part of the aggregation and must not be kept), and when the two readings differ; and the
fingerprint that decides which plans are the same."""

from __future__ import annotations

import pytest

from planner.executor import shared as shared_mod
from tests.planner.test_runtime_filters import _check, dbs  # noqa: F401 - the fixture

duckdb = pytest.importorskip("duckdb")

REUSED = "result of an identical aggregation earlier in the statement, reused"

# (query, whether one aggregation is reused)
QUERIES = [
    # TPC-H Q15's shape: the WITH query joined, and read again by a scalar subquery
    ("WITH r AS (SELECT a, sum(b) AS t FROM f WHERE b < 60 GROUP BY a) "
     "SELECT d1.k, r.t FROM d1, r WHERE d1.k = r.a AND r.t = (SELECT max(t) FROM r)", True),
    # the first reading is filtered at run time by the few d2 keys (selective): the
    # subquery needs every group
    ("WITH r AS (SELECT a, sum(b) AS t, count(*) AS n FROM f GROUP BY a) "
     "SELECT d2.k, r.t, (SELECT count(*) FROM r) AS groups, (SELECT sum(n) FROM r) AS rows "
     "FROM d2, r WHERE d2.k = r.a AND d2.y < 3", True),
    # two readings joined to each other (different aliases of the same table)
    ("WITH r AS (SELECT a, sum(b) AS t FROM f GROUP BY a) "
     "SELECT x.a, x.t, y.t FROM r x JOIN r y ON y.a = x.a + 1 WHERE x.t > 500", True),
    # the same text over different filters: two aggregations, nothing shared
    ("SELECT (SELECT sum(b) FROM f WHERE a < 100), (SELECT sum(b) FROM f WHERE a < 101)",
     False),
    ("SELECT x.a, x.t, y.t FROM (SELECT a, sum(b) AS t FROM f GROUP BY a) x "
     "JOIN (SELECT a, sum(b + 1) AS t FROM f GROUP BY a) y ON y.a = x.a", False),
]


def _explain(con, sql) -> str:
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + sql)
    return "\n".join(r[0] for r in cur.fetchall())


@pytest.mark.parametrize("sql,reused", QUERIES)
def test_repeated_aggregations_answer_as_duckdb(dbs, sql, reused):  # noqa: F811
    con, duck = dbs
    _check(con, duck, sql)
    assert (REUSED in _explain(con, sql)) == reused


ROLLED = "rolled up from the result of a grouped aggregation of the same rows"
_JOINED = "FROM f, d1 WHERE f.a = d1.k AND d1.x < 150"
# (query, whether a scalar aggregate is rolled up from a grouped one)
ROLLUPS = [
    # TPC-H Q11's shape: HAVING against a fraction of the total over the same join
    (f"SELECT a, sum(b) AS t {_JOINED} GROUP BY a "
     f"HAVING sum(b) > (SELECT sum(b) * 0.002 {_JOINED})", True),
    (f"SELECT a, sum(b * 0.5) AS t {_JOINED} GROUP BY a "
     f"HAVING sum(b * 0.5) > (SELECT sum(b * 0.5) * 0.002 {_JOINED})", True),
    # counts (count(x) and avg's) are summed, extremes of extremes (a date too)
    ("SELECT a, count(*), avg(b), max(d) FROM f WHERE b < 60 GROUP BY a "
     "HAVING count(*) * 300 > (SELECT count(*) FROM f WHERE b < 60) "
     "AND avg(b) < (SELECT avg(b) FROM f WHERE b < 60) "
     "AND max(d) < (SELECT max(d) FROM f WHERE b < 60)", True),
    # other rows (another filter), another argument, or a float sum: computed apart
    ("SELECT a, sum(b) FROM f WHERE b < 60 GROUP BY a "
     "HAVING sum(b) > (SELECT sum(b) * 0.002 FROM f WHERE b < 61)", False),
    ("SELECT a, sum(b) FROM f GROUP BY a HAVING sum(b) > (SELECT sum(b + 1) * 0.002 FROM f)",
     False),
    ("SELECT a, sum(b * 1.5::float) FROM f GROUP BY a "
     "HAVING sum(b * 1.5::float) > (SELECT sum(b * 1.5::float) * 0.002 FROM f)", False),
    # no rows at all: the scalar sum is NULL and the count 0, as over the rows
    ("SELECT a, sum(b), count(*) FROM f WHERE a > 100000 GROUP BY a "
     "HAVING sum(b) > coalesce((SELECT sum(b) FROM f WHERE a > 100000), 0) "
     "OR count(*) >= (SELECT count(*) FROM f WHERE a > 100000)", True),
]


@pytest.mark.parametrize("sql,rolled", ROLLUPS)
def test_scalar_aggregates_rolled_up_answer_as_duckdb(dbs, sql, rolled):  # noqa: F811
    con, duck = dbs
    _check(con, duck, sql)
    assert (ROLLED in _explain(con, sql)) == rolled


def test_a_rolled_up_total_is_the_total_of_the_rows(dbs):  # noqa: F811
    con, duck = dbs
    sql = (f"SELECT t.a, t.s, (SELECT sum(b) {_JOINED}) FROM (SELECT a, sum(b) AS s "
           f"{_JOINED} GROUP BY a) t WHERE t.s > (SELECT sum(b) * 0.002 {_JOINED})")
    _check(con, duck, sql)


def test_fingerprints_see_through_internal_names_only(tmp_path):
    import sqlglot

    import kudusql
    from planner import logical as L
    from planner.dialect import KuduSQL
    from planner.query import plan_query

    con = kudusql.connect(str(tmp_path))
    con.cursor().execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    catalog = con.database.catalog

    def aggs(sql):
        out = plan_query(catalog, sqlglot.parse_one(sql, read=KuduSQL), sql)
        return [n for n in L.all_nodes(out.plan) if isinstance(n, L.Aggregate)]
    a, b = aggs("SELECT (SELECT sum(v) FROM t), (SELECT sum(v) FROM t AS x)")
    assert shared_mod.fingerprint(a) == shared_mod.fingerprint(b) is not None
    a, b = aggs("SELECT (SELECT sum(v) FROM t), (SELECT sum(v) FROM t WHERE k > 1)")
    assert shared_mod.fingerprint(a) != shared_mod.fingerprint(b)
    a, b = aggs("SELECT (SELECT sum(v) FROM t), (SELECT sum(v + 0) FROM t)")
    assert shared_mod.fingerprint(a) != shared_mod.fingerprint(b)
    (a,) = aggs("SELECT (SELECT sum(v + random()) FROM t)")
    assert shared_mod.fingerprint(a) is None
    con.close()
