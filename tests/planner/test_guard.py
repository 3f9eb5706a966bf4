"""The executor's QueryGuard, deterministically (no timing): with small morsels, every
operator kind consults the guard at least once per morsel of its input *while it runs*
(attributed to the plan node being computed), and a cancel raised at such a check stops
the statement with 57014; the memory meter fails a statement past its limit with 53200.
The timing side (a real server, real cancels) is tests/wire/test_cancel.py."""

from __future__ import annotations

import pytest

from kudusql.session import Database, QueryCanceled
from planner import executor as X
from planner import guard
from planner.errors import SqlError
from planner.guard import QueryGuard, format_bytes, parse_bytes

ROWS = 6000
MORSEL = 500

# operator kind -> (the logical node it runs as, a query whose time goes into that node)
QUERIES = {
    "Aggregate": "SELECT count(DISTINCT k * 7 % 1000), sum(v) FROM t",
    "GroupBy": "SELECT k % 10, count(DISTINCT v), max(s) FROM t GROUP BY 1",
    "Filter": "SELECT * FROM (SELECT k, sum(v) AS sv FROM t GROUP BY k) q WHERE sv % 3 = 0",
    "Project": "SELECT k * 2 + v, s || 'x' FROM t",
    "HashJoin": "SELECT count(*) FROM t a JOIN t b ON a.g = b.g",
    "CrossJoin": "SELECT count(*) FROM t a CROSS JOIN t b",
    "TopN": "SELECT k FROM t ORDER BY (k * 31) % 997 LIMIT 3",
    "Sort": "SELECT k FROM t ORDER BY (k * 31) % 997",
    "Distinct": "SELECT DISTINCT k % 1000 FROM t",
    "Union": "SELECT k FROM t UNION SELECT v FROM t",
    "Intersect": "SELECT k FROM t INTERSECT SELECT v FROM t",
    "Window": "SELECT k, sum(v) OVER (PARTITION BY g ORDER BY k) FROM t",
}
NODE = {"Aggregate": "Aggregate", "GroupBy": "Aggregate", "Filter": "Filter",
        "Project": "Project", "HashJoin": "MultiJoin", "CrossJoin": "MultiJoin",
        "TopN": "Sort", "Sort": "Sort", "Distinct": "Distinct", "Union": "SetOp",
        "Intersect": "SetOp", "Window": "Window"}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = Database.open(str(tmp_path_factory.mktemp("guard") / "db"), maintenance=False)
    s = d.session()
    s.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT, g BIGINT, s STRING) "
              "PARTITION BY HASH (k) PARTITIONS 2")
    s.execute("INSERT INTO t VALUES " + ",".join(f"({i}, {i * 3 % 5000}, {i % 40}, 's{i}')"
                                                 for i in range(ROWS)))
    yield d
    d.close()


class Recorder:
    """Wraps Executor.run to know which plan node is being computed; counts the guard's
    checks per node kind; raises 57014 at the `stop_at`-th check inside `target`."""

    def __init__(self, monkeypatch, target: str | None = None, stop_at: int = 0):
        self.stack: list[str] = []
        self.checks: dict[str, int] = {}
        self.target, self.stop_at = target, stop_at
        orig = X.Executor.run
        rec = self

        def run(ex, node):
            rec.stack.append(type(node).__name__)
            try:
                return orig(ex, node)
            finally:
                rec.stack.pop()
        monkeypatch.setattr(X.Executor, "run", run)
        monkeypatch.setattr(guard, "MORSEL_ROWS", MORSEL)

    def check(self) -> None:
        top = self.stack[-1] if self.stack else "-"
        self.checks[top] = self.checks.get(top, 0) + 1
        if top == self.target and self.checks[top] >= self.stop_at:
            raise QueryCanceled("canceling statement due to user request")


@pytest.mark.parametrize("kind", list(QUERIES))
def test_operator_checks_per_morsel_and_stops(db, kind, monkeypatch):
    rec = Recorder(monkeypatch)
    s = db.session()
    monkeypatch.setattr(s, "_guard", lambda: QueryGuard(rec.check, 0))
    s.execute(QUERIES[kind])
    node = NODE[kind]
    assert rec.checks.get(node, 0) >= ROWS // MORSEL - 1, (kind, rec.checks)
    # a cancel in the middle of that operator stops the statement
    stop = Recorder(monkeypatch, node, max(1, rec.checks[node] // 2))
    monkeypatch.setattr(s, "_guard", lambda: QueryGuard(stop.check, 0))
    with pytest.raises(SqlError) as e:
        s.execute(QUERIES[kind])
    assert e.value.sqlstate == "57014"


def test_memory_limit_counts_what_the_plan_holds(db, monkeypatch):
    s = db.session()
    g = QueryGuard(None, 0)
    monkeypatch.setattr(s, "_guard", lambda: g)
    q = "SELECT count(DISTINCT a.s || b.s) FROM t a CROSS JOIN t b WHERE a.k < 100"
    s.execute(q)
    assert g.peak > 100 * ROWS * 8            # the cross join's output was held
    s.query_mem_limit = g.peak // 2
    monkeypatch.undo()
    with pytest.raises(SqlError) as e:
        s.execute(q)
    assert e.value.sqlstate == "53200" and e.value.message == "out of memory"
    assert "query_mem_limit" in e.value.detail
    s.execute("SET query_mem_limit = '0'")
    s.execute(q)
    s.execute("SET query_mem_limit = DEFAULT")
    assert s.query_mem_limit == db.query_mem_limit


def test_sizes():
    assert parse_bytes("2GB") == 2 << 30 and parse_bytes("512 mb") == 512 << 20
    assert parse_bytes("1024") == 1024 and parse_bytes("0") == 0
    assert format_bytes(2 << 30) == "2GB" and format_bytes(1536 << 10) == "1536kB"
    assert format_bytes(parse_bytes("64MB")) == "64MB"
    with pytest.raises(SqlError) as e:
        parse_bytes("lots")
    assert e.value.sqlstate == "22023"


def test_embedded_statement_timeout_stops_the_statement(db):
    """SET statement_timeout holds in an embedded session too (the DB-API, the shell): the
    statement stops at the next check past its deadline with 57014 and PostgreSQL's
    message; 0 / DEFAULT / RESET switch it off; a bad value is 22023."""
    import time
    s = db.session()
    slow = "SELECT count(*) FROM t a CROSS JOIN t b WHERE (a.k * b.v) % 7 = 1"
    s.execute("SET statement_timeout = '200ms'")
    t0 = time.monotonic()
    with pytest.raises(QueryCanceled) as e:
        s.execute(slow)
    assert time.monotonic() - t0 < 5
    assert e.value.sqlstate == "57014" and "statement timeout" in str(e.value)
    assert s.execute("SELECT count(*) FROM t")[-1].table.to_pylist() == [{"count": ROWS}]
    for off in ("SET statement_timeout = 0", "SET statement_timeout TO DEFAULT",
                "RESET statement_timeout", "RESET ALL"):
        s.execute("SET statement_timeout = 1")
        s.execute(off)
        assert s.statement_timeout_ms == 0, off
    with pytest.raises(SqlError) as e:
        s.execute("SET statement_timeout = 'soon'")
    assert e.value.sqlstate == "22023"
    s.execute("SET statement_timeout = '1min'")
    assert s.statement_timeout_ms == 60_000


@pytest.mark.parametrize("seed", range(3))
def test_sample_sort_is_the_stable_sort(seed, monkeypatch):
    """Executor.sorts.sort_indices (sample sort, a check between steps) gives exactly the
    permutation of one stable pc.sort_indices call: keys with NULLs and duplicates,
    ascending and descending, NULLs first and last, a second key, several types."""
    import datetime as dt

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from planner import logical as L
    monkeypatch.setattr(guard, "MORSEL_ROWS", 300)
    rng = np.random.default_rng(seed)
    n = 5000 + seed * 777
    pools = {
        "int": pa.array(rng.integers(-50, 50 + seed * 200, n)),
        "float": pa.array(rng.normal(size=n).round(1)),
        "date": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(d))
                          for d in rng.integers(0, 400, n)]),
        "ts": pa.array(rng.integers(0, 10**6, n).astype("datetime64[us]")),
        "skew": pa.array(np.where(rng.random(n) < 0.9, 7, rng.integers(0, 100, n))),
    }
    checks = []
    ex = X.Executor(None, check_cancel=lambda: checks.append(1))
    for name, col in pools.items():
        mask = pa.array(rng.random(n) < 0.1)
        col = pc.if_else(mask, pa.scalar(None, col.type), col) if seed % 2 else col
        second = pa.array(rng.integers(0, 5, n))
        for desc in (False, True):
            for nf in (None, True, False):
                work, keys = {}, []
                X.add_sort_key(work, keys, "s0", col, L.SortKey(None, desc, nf))
                X.add_sort_key(work, keys, "s1", second, L.SortKey(None, False, None))
                t = pa.table(work)
                want = pc.sort_indices(t, sort_keys=keys)
                got = ex.sorts.sort_indices(t, keys)
                assert got.equals(want), (name, desc, nf)
    assert len(checks) > 100            # it did work in steps


def test_group_by_over_a_scan_does_not_hold_its_input(db, monkeypatch):
    # the scan's batches stream into the hash aggregation: the meter sees the groups, not
    # the ROWS input rows (which a join above a scan, by contrast, holds)
    s = db.session()
    g = QueryGuard(None, 0)
    monkeypatch.setattr(s, "_guard", lambda: g)
    s.execute("SELECT k % 10, sum(v), max(s) FROM t GROUP BY 1")
    streamed = g.peak
    g2 = QueryGuard(None, 0)
    monkeypatch.setattr(s, "_guard", lambda: g2)
    s.execute("SELECT a.k % 10, sum(a.v), max(a.s) FROM t a JOIN t b ON a.k = b.k GROUP BY 1")
    assert streamed * 10 < ROWS * 8 < g2.peak, (streamed, g2.peak)
