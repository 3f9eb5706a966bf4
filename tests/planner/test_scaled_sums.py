"""Sums of DECIMAL expressions on unscaled int64 values (planner/executor/scaled.py): the
split / combine of the sums against Python integers, and queries over random data with
NULLs and extreme values answering exactly as DuckDB does - with and without GROUP BY,
over many morsels, and through the fallback to the decimal path when a product might not
fit int64."""

from __future__ import annotations

import decimal
import random

import numpy as np
import pyarrow as pa
import pytest

import kudusql
from planner import guard
from planner.executor import scaled
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


# the int64 path: these sums (c's exceed int64: the split parts carry them)
INT_PATH = [
    "SELECT g, sum(a), sum(b), sum(d), sum(c), sum(e), count(*) FROM t GROUP BY g",
    "SELECT g, sum(a * (1 - d)), sum(a * (1 - d) * (1 + d)), avg(a) FROM t GROUP BY g",
    "SELECT g, sum(a + b), sum(b - a), sum(-a), sum(a * 0.5), sum(d * i) FROM t GROUP BY g",
    "SELECT sum(a * (1 - d)), sum(b * d + a), sum(2.25 - b), sum(c) FROM t",
    "SELECT g, sum(a * d) FROM t WHERE i > 0 GROUP BY g HAVING sum(d) > 0",
]
# products of extreme values that may not fit int64: the decimal path, after a fallback
FALLBACK = [
    "SELECT g, sum(c * d) FROM t GROUP BY g",
    "SELECT g, sum(e * (1 - d)), sum(a) FROM t GROUP BY g",
    "SELECT sum(c * d), sum(a * b) FROM t",
]
QUERIES = INT_PATH + FALLBACK


def _exact(rows):
    return sorted((tuple(v for v in r) for r in rows), key=repr)


def _check(con, duck, sql):
    cur = con.cursor()
    cur.execute(sql)
    ours = _exact(cur.fetchall())
    theirs = _exact(duck.execute(sql).fetchall())
    assert len(ours) == len(theirs), sql
    for a, b in zip(ours, theirs):
        for x, y in zip(a, b):
            if isinstance(y, float) or isinstance(x, float):
                assert float(x) == pytest.approx(float(y), rel=1e-12), (sql, a, b)
            else:
                assert x == y, (sql, a, b)       # decimals: exactly equal


@pytest.fixture
def counted(monkeypatch):
    """Counts the aggregations that took the int64 path and those that fell back."""
    calls = {"combine": 0, "fallback": 0}
    combine, values = scaled.combine, scaled.Tree.values

    def spy_combine(*a):
        calls["combine"] += 1
        return combine(*a)

    def spy_values(self, m, cache):
        try:
            return values(self, m, cache)
        except scaled.Fallback:
            calls["fallback"] += 1
            raise
    monkeypatch.setattr(scaled, "combine", spy_combine)
    monkeypatch.setattr(scaled.Tree, "values", spy_values)
    return calls


@pytest.mark.parametrize("sql", INT_PATH)
def test_decimal_sums_on_int64_answer_exactly_as_duckdb(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)   # (one morsel without GROUP BY:
    _check(*dbs, sql)                                # whole-column kernels instead)
    assert counted["combine"] and not counted["fallback"], "the int64 path was not taken"


@pytest.mark.parametrize("sql", FALLBACK)
def test_sums_that_may_not_fit_int64_fall_back_and_stay_exact(dbs, sql, counted,
                                                              monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 1024)
    _check(*dbs, sql)
    assert counted["fallback"] >= 1


@pytest.mark.parametrize("sql", QUERIES)
def test_with_the_default_morsels(dbs, sql):
    _check(*dbs, sql)


@pytest.mark.parametrize("sql", QUERIES)
def test_over_many_morsels_too(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)      # a stream of small morsels
    _check(*dbs, sql)


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
