"""Sums of DECIMAL expressions on unscaled int64 values (planner/executor/scaled.py): the
split / combine and the single sum's widen against Python integers, and queries over
random data with NULLs and extreme values answering exactly as DuckDB does - with and
without GROUP BY, over many morsels, through the fallback from the single int64 sum to
the split sums when a sum might wrap, and to the decimal path when a product might not
fit int64; calls repeated in one aggregation (sum(x) beside avg(x)) computed once."""

from __future__ import annotations

import decimal
import random

import numpy as np
import pyarrow as pa
import pytest

import kudusql
from planner import guard
from planner.executor import scaled
from tests.planner.duck_match import same_answers
from tests.planner.test_runtime_filters import insert_both

duckdb = pytest.importorskip("duckdb")


# -- the kernel ----------------------------------------------------------------------------
def test_split_then_combine_is_exact_for_extreme_int64_sums():
    rng = np.random.default_rng(7)
    edge = [0, 1, -1, (1 << 63) - 1, -(1 << 63), (1 << 32) - 1, -(1 << 32), 1 << 32]
    for trial in range(20):
        n = int(rng.integers(1, 3000))
        v = rng.integers(-(1 << 63), (1 << 63) - 1, n, dtype=np.int64, endpoint=True)
        v[: min(n, len(edge))] = edge[: min(n, len(edge))]
        valid = rng.random(n) > 0.1 if trial % 2 else None
        groups = rng.integers(0, 5, n)
        hi, lo = scaled.split(v, valid, n)
        t = pa.table({"g": groups, "hi": hi, "lo": lo})
        r = t.group_by("g").aggregate([("hi", "sum"), ("lo", "sum")])
        got = scaled.combine(r["hi_sum"], r["lo_sum"], 3).to_pylist()
        for g, d in zip(r["g"].to_pylist(), got):
            sel = (groups == g) if valid is None else ((groups == g) & valid)
            want = sum(int(x) for x in v[sel]) if sel.any() else None
            assert d == (None if want is None else decimal.Decimal(want).scaleb(-3)), g


def test_a_group_of_only_nulls_sums_to_null():
    hi, lo = scaled.split(np.array([5, 7], np.int64), np.array([False, False]), 2)
    t = pa.table({"g": [1, 1], "hi": hi, "lo": lo})
    r = t.group_by("g").aggregate([("hi", "sum"), ("lo", "sum")])
    assert scaled.combine(r["hi_sum"], r["lo_sum"], 2).to_pylist() == [None]


def test_widen_is_exact_at_the_int64_extremes():
    v = [0, 1, -1, (1 << 63) - 1, -(1 << 63), None, 12345]
    got = scaled.widen(pa.array(v, pa.int64()), 2).to_pylist()
    assert got == [None if x is None else decimal.Decimal(x).scaleb(-2) for x in v]


def test_budget_refuses_a_sum_that_could_reach_2_to_the_63():
    b = scaled.Budget()
    b.add("k", 1 << 40, 1 << 22)          # 2**62
    b.add("j", (1 << 62), 1)              # another sum: its own budget
    with pytest.raises(scaled.Fallback) as e:
        b.add("k", 1 << 40, 1 << 22)      # 2**63: Arrow's int64 sum might wrap
    assert e.value.split
    assert scaled.next_mode(scaled.SINGLE, e.value) == scaled.SPLIT
    assert scaled.next_mode(scaled.SPLIT, scaled.Fallback(split=True)) is None
    assert scaled.next_mode(scaled.SINGLE, scaled.Fallback()) is None


# -- queries against DuckDB ----------------------------------------------------------------
COLS = "id INT NOT NULL, g INT, a DECIMAL(15,2), b DECIMAL(12,4), c DECIMAL(18,0), " \
       "d DECIMAL(4,2), e DECIMAL(15,2), i INT, PRIMARY KEY (id)"
N = 3000


def _data(seed: int) -> list[tuple]:
    """a, b, d: TPC-H-like magnitudes with NULLs, zeros, negatives and each column's
    largest values; c and e: often their type's extremes (c's sums exceed int64)."""
    r = random.Random(seed)

    def dec(s, top, extreme=0.0, null=0.08):
        if r.random() < null:
            return None
        x = r.random()
        if x < extreme:
            u = r.choice([10 ** top - 1, -(10 ** top - 1)])
        elif x < extreme + 0.05:
            u = 0
        else:
            u = r.randrange(-10 ** r.randrange(1, 10), 10 ** 9)
        return decimal.Decimal(u).scaleb(-s)
    rows = []
    for i in range(N):
        rows.append((i, None if r.random() < 0.05 else r.randrange(0, 6),
                     dec(2, 9, 0.02), dec(4, 9, 0.02), dec(0, 18, 0.3, 0.02),
                     decimal.Decimal(r.randrange(-9999, 10000)).scaleb(-2)
                     if r.random() > 0.05 else None,
                     dec(2, 15, 0.1), None if r.random() < 0.05
                     else r.randrange(-10 ** 6, 10 ** 6)))
    return rows


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("scaled_sums")))
    duck = duckdb.connect()
    cur = con.cursor()
    cur.execute(f"CREATE TABLE t ({COLS}) PARTITION BY HASH (id) PARTITIONS 2")
    # DuckDB types its products within the operands' precision and then overflows: its
    # columns are declared 38 digits wide (the same values, computed exactly in int128)
    wide = COLS.replace(" NOT NULL", "")
    for p in ("15,2", "12,4", "18,0", "4,2"):
        wide = wide.replace(f"DECIMAL({p})", f"DECIMAL(38,{p.split(',')[1]})")
    duck.execute(f"CREATE TABLE t ({wide})")
    insert_both(cur, duck, "t", _data(29))
    yield con, duck
    con.close()
    duck.close()


# the int64 path, single sums (their bounds times the rows stay below 2**63)
SINGLE_PATH = [
    "SELECT g, sum(a), sum(b), sum(d), count(*) FROM t GROUP BY g",
    "SELECT g, sum(a * (1 - d)), avg(a), sum(a) FROM t GROUP BY g",
    "SELECT sum(a * (1 - d)), sum(b * d + a), sum(2.25 - b) FROM t",
]
# the int64 path, split sums after the single one's budget ran out (c's and e's sums may
# exceed int64: the split parts carry them)
SPLIT_PATH = [
    "SELECT g, sum(a), sum(b), sum(d), sum(c), sum(e), count(*) FROM t GROUP BY g",
    "SELECT sum(a * (1 - d)), sum(c), avg(c), sum(e) FROM t",
    # (a bound of ~1e17 a row: 1024-row morsels take the single sum past 2**63)
    "SELECT g, sum(a * (1 - d) * (1 + d)), avg(a), sum(a) FROM t GROUP BY g",
]
INT_PATH = SINGLE_PATH + SPLIT_PATH + [
    "SELECT g, sum(a * (1 - d)), sum(a * (1 - d) * (1 + d)), avg(a) FROM t GROUP BY g",
    "SELECT g, sum(a + b), sum(b - a), sum(-a), sum(a * 0.5), sum(d * i) FROM t GROUP BY g",
    "SELECT g, sum(a * d) FROM t WHERE i > 0 GROUP BY g HAVING sum(d) > 0",
]
# products of extreme values that may not fit int64: the decimal path, after a fallback
FALLBACK = [
    "SELECT g, sum(c * d) FROM t GROUP BY g",
    "SELECT g, sum(e * (1 - d)), sum(a) FROM t GROUP BY g",
    "SELECT sum(c * d), sum(a * b) FROM t",
]
QUERIES = INT_PATH + FALLBACK




@pytest.fixture
def counted(monkeypatch):
    """Counts the aggregations that took the int64 path (single: widen; split: combine)
    and those that fell back (to the split sums: budget; to decimals: fallback)."""
    calls = {"combine": 0, "widen": 0, "budget": 0, "fallback": 0}
    combine, widen, values = scaled.combine, scaled.widen, scaled.Tree.values
    add = scaled.Budget.add

    def spy_combine(*a):
        calls["combine"] += 1
        return combine(*a)

    def spy_widen(*a):
        calls["widen"] += 1
        return widen(*a)

    def spy_add(self, *a):
        try:
            return add(self, *a)
        except scaled.Fallback:
            calls["budget"] += 1
            raise

    def spy_values(self, m, cache):
        try:
            return values(self, m, cache)
        except scaled.Fallback:
            calls["fallback"] += 1
            raise
    monkeypatch.setattr(scaled, "combine", spy_combine)
    monkeypatch.setattr(scaled, "widen", spy_widen)
    monkeypatch.setattr(scaled.Budget, "add", spy_add)
    monkeypatch.setattr(scaled.Tree, "values", spy_values)
    return calls


@pytest.mark.parametrize("sql", INT_PATH)
def test_decimal_sums_on_int64_answer_exactly_as_duckdb(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)   # (one morsel without GROUP BY:
    same_answers(*dbs, sql)                          # whole-column kernels instead)
    assert counted["combine"] + counted["widen"] and not counted["fallback"], \
        "the int64 path was not taken"


@pytest.mark.parametrize("sql", SINGLE_PATH)
def test_small_sums_run_as_single_int64_sums(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)
    same_answers(*dbs, sql)
    assert counted["widen"] and not counted["combine"] and not counted["budget"]


@pytest.mark.parametrize("sql", SPLIT_PATH)
def test_sums_that_might_wrap_one_int64_run_split_and_stay_exact(dbs, sql, counted,
                                                                 monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)
    same_answers(*dbs, sql)
    assert counted["budget"] >= 1 and counted["combine"] and not counted["fallback"]


@pytest.mark.parametrize("sql", FALLBACK)
def test_sums_that_may_not_fit_int64_fall_back_and_stay_exact(dbs, sql, counted,
                                                              monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)
    same_answers(*dbs, sql)
    assert counted["fallback"] >= 1


@pytest.mark.parametrize("sql", QUERIES)
def test_with_the_default_morsels(dbs, sql):
    same_answers(*dbs, sql)


@pytest.mark.parametrize("sql", QUERIES)
def test_over_many_morsels_too(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)      # a stream of small morsels
    same_answers(*dbs, sql)


def test_explain_analyze_counts_a_fallback_scan_once(dbs, counted):
    """A GROUP BY over a scan that falls back reads the scan again: EXPLAIN ANALYZE shows
    the scan's rows once, not the sum of both readings, and says it read it again."""
    con, _ = dbs
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + FALLBACK[0])
    text = "\n".join(r[0] for r in cur.fetchall())
    assert counted["fallback"] >= 1
    scan = next(line for line in text.splitlines() if "Scan t" in line)
    assert f"rows={N} " in scan, text
    assert "input read again" in text


# -- repeated calls ------------------------------------------------------------------------
REPEATED = [
    "SELECT g, sum(a), avg(a), sum(a), count(a), avg(d), sum(d), count(d), "
    "count(DISTINCT i), count(DISTINCT i) FROM t GROUP BY g",
    "SELECT sum(a), avg(a), min(b), min(b), max(i), max(i) FROM t",
    "SELECT g, sum(r), avg(r), sum(r) FROM (SELECT g, CAST(i AS REAL) AS r FROM t) s GROUP BY g",
]


@pytest.mark.parametrize("sql", REPEATED)
def test_repeated_calls_answer_as_duckdb(dbs, sql, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)
    same_answers(*dbs, sql)


def test_a_repeated_call_is_computed_once(dbs, monkeypatch):
    """sum(a) twice and avg(a)'s sum: one sum of a in the aggregation's spec."""
    from planner.executor import aggregates
    specs = []
    plan = aggregates.AggregateOperators.aggregate_plan

    def spy(self, t, keys, spec, prepare, **kw):
        specs.append(spec)
        return plan(self, t, keys, spec, prepare, **kw)
    monkeypatch.setattr(aggregates.AggregateOperators, "aggregate_plan", spy)
    same_answers(*dbs, "SELECT g, sum(a), avg(a), sum(a) FROM t GROUP BY g")
    sums = [e for spec in specs for e in spec if e[1] == "hash_sum"]
    assert len(sums) == 1, specs


def test_sum_of_real_beside_avg_of_real_keeps_their_types(dbs):
    """sum(real) is real, avg(real) double precision (PostgreSQL), also when the one
    computes the other's sum (either first)."""
    con, duck = dbs
    cur = con.cursor()
    inner = "(SELECT g, CAST(i AS REAL) AS r FROM t) s"
    for sql, want in ((f"SELECT sum(r), avg(r) FROM {inner}", ["float", "double"]),
                      (f"SELECT avg(r), sum(r) FROM {inner}", ["double", "float"]),
                      (f"SELECT g, avg(r), sum(r) FROM {inner} GROUP BY g",
                       ["int32", "double", "float"])):
        cur.execute(sql)
        got = cur.fetch_arrow_table()
        assert [str(f.type) for f in got.schema] == want, sql
        ours = sorted(zip(*got.to_pydict().values()), key=repr)
        theirs = sorted(duck.execute(sql).fetchall(), key=repr)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            for x, y in zip(a, b):
                assert x == y if y is None else x == pytest.approx(y, rel=1e-6), sql
