"""A hash aggregation fed partial aggregates of runs (planner/executor/aggregates.py,
`_run_partials`): where a scan's batches bring the GROUP BY keys in runs of equal values
(a table whose primary key starts with them, as TPC-H's lineitem with l_orderkey), each
run is summed and counted in the morsel and the hash aggregation sums the partials.
Queries over such a table - with NULL values, runs split across morsels and batches, a
part of the table without runs, NULL keys - answer as DuckDB does; aggregates without a
partial form here take the ordinary path."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import kudusql
from planner import guard
from planner.executor import aggregates
from tests.planner.duck_match import same_answers

duckdb = pytest.importorskip("duckdb")

N_KEYS = 1500
UNIQUE_FROM = 1000       # keys from here on have one row each (no runs)


def _rows(seed: int) -> list[tuple]:
    r = random.Random(seed)
    rows = []
    for k in range(N_KEYS):
        for line in range(1 if k >= UNIQUE_FROM else r.randrange(1, 8)):
            q = None if r.random() < 0.1 else f"{r.randrange(-5000, 5000) / 100:.2f}"
            p = None if r.random() < 0.05 else f"{r.randrange(0, 10 ** 7) / 100:.2f}"
            g = None if k % 7 == 0 else k % 3     # one per key: NULL keys in runs too
            rows.append((k, line, q, p, g, r.choice("ABCDEFGH")))
    return rows


def _lit(v) -> str:
    if v is None:
        return "NULL"
    return f"'{v}'" if isinstance(v, str) and not v[0].isdigit() and v[0] != "-" else str(v)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("run_partials")))
    duck = duckdb.connect()
    cur = con.cursor()
    cols = "k BIGINT NOT NULL, line INT NOT NULL, q DECIMAL(12,2), p DECIMAL(15,2), g INT, " \
           "f VARCHAR"
    cur.execute(f"CREATE TABLE t ({cols}, PRIMARY KEY (k, line)) PARTITION BY HASH (k) "
                "PARTITIONS 2")
    duck.execute(f"CREATE TABLE t ({cols.replace('DECIMAL(12,2)', 'DECIMAL(38,2)')})")
    rows = _rows(5)
    for i in range(0, len(rows), 500):
        values = ", ".join("(" + ", ".join(_lit(x) for x in row) + ")"
                           for row in rows[i:i + 500])
        cur.execute(f"INSERT INTO t VALUES {values}")
        duck.execute(f"INSERT INTO t VALUES {values}")
    yield con, duck
    con.close()
    duck.close()


RUNS = [
    "SELECT k, sum(q) FROM t GROUP BY k",
    "SELECT k, sum(q), count(*), count(q), avg(p), sum(p * (1 - q)) FROM t GROUP BY k",
    "SELECT k FROM t GROUP BY k HAVING sum(q) > 10",
    "SELECT k, g, sum(p), count(q) FROM t GROUP BY k, g",
    "SELECT g, k, count(*) FROM t WHERE k < 1200 GROUP BY g, k",
]
# aggregates with no partial form here: min / max, DISTINCT, sums of integers
ORDINARY = [
    "SELECT k, sum(q), max(p) FROM t GROUP BY k",
    "SELECT k, count(DISTINCT line % 3), sum(q) FROM t GROUP BY k",
    "SELECT k, sum(line) FROM t GROUP BY k",
]
QUERIES = RUNS + ORDINARY


@pytest.fixture
def counted(monkeypatch):
    """Counts morsels fed as partials: reduced to runs, and passed row by row."""
    calls = {"reduced": 0, "rows": 0}
    partials = aggregates._run_partials

    def spy(cols, gkeys, sums, counts, rows, n):
        out = partials(cols, gkeys, sums, counts, rows, n)
        key = gkeys[0]
        calls["reduced" if len(out[key]) < n else "rows"] += 1
        return out
    monkeypatch.setattr(aggregates, "_run_partials", spy)
    return calls


@pytest.mark.parametrize("sql", QUERIES)
def test_with_the_default_morsels(dbs, sql):
    same_answers(*dbs, sql)


@pytest.mark.parametrize("sql", QUERIES)
def test_over_many_morsels(dbs, sql, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 128)      # runs split between morsels
    same_answers(*dbs, sql)


@pytest.mark.parametrize("sql", RUNS)
def test_runs_are_summed_in_the_morsel(dbs, sql, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 128)
    same_answers(*dbs, sql)
    assert counted["reduced"], counted


def test_morsels_without_runs_go_row_by_row_in_the_same_form(dbs, counted, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 128)
    same_answers(*dbs, RUNS[1])
    assert counted["reduced"] and counted["rows"], counted


@pytest.mark.parametrize("sql", ORDINARY)
def test_aggregates_without_partials_take_the_ordinary_path(dbs, sql, counted,
                                                            monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 128)
    same_answers(*dbs, sql)
    assert not counted["reduced"] and not counted["rows"]


def test_keys_without_runs_take_the_ordinary_path(dbs, counted):
    same_answers(*dbs, "SELECT f, sum(q), count(*) FROM t GROUP BY f")
    assert not counted["reduced"] and not counted["rows"]


def test_runs_of_few_groups_take_the_ordinary_path(dbs, counted, monkeypatch):
    """g is one value per key (runs of a key's rows) but only four groups: cutting runs
    costs more than a hash table that small (TPC-H Q01's flags)."""
    monkeypatch.setattr(guard, "MORSEL_ROWS", 512)
    same_answers(*dbs, "SELECT g, sum(q), count(*) FROM t GROUP BY g")
    assert not counted["reduced"] and not counted["rows"]


def test_run_partials_sum_count_and_keep_a_run_of_nulls_null():
    cols = {"k": pa.array([1, 1, 2, 2, 2, 3, None, None], pa.int64()),
            "s": pa.array([5, None, None, None, None, 7, 1, 2], pa.int64()),
            "c": pa.array([True, None, None, True, True, None, True, True])}
    out = aggregates._run_partials(cols, ["k"], ["s"], ["c"], True, 8)
    assert out["k"].to_pylist() == [1, 2, 3, None]
    assert out["s"].to_pylist() == [5, None, 7, 3]
    assert out["c"].to_pylist() == [1, 2, 0, 2]
    assert out[aggregates._RUN_ROWS].to_pylist() == [2, 3, 1, 2]
    assert np.array_equal(aggregates._run_starts([cols["k"]]), [0, 2, 5, 6])


def test_interval_keys_in_runs_take_the_ordinary_path(dbs, counted):
    """Intervals have no equality kernel to find runs with (it was an internal error, in a
    ROLLUP's grouping over a timestamp difference)."""
    con, _ = dbs
    cur = con.cursor()
    cur.execute("SELECT k, TIMESTAMP '2020-01-02 00:00:00' - TIMESTAMP '2020-01-01 00:00:00' "
                "AS i, count(*) FROM t GROUP BY k, i ORDER BY k LIMIT 3")
    got = cur.fetchall()
    assert [r[0] for r in got] == [0, 1, 2] and all(r[2] >= 1 for r in got)
    assert not counted["reduced"] and not counted["rows"]


def test_sorted_sums_match_acero_hash_sums():
    """`_sorted_sums` (a streamed aggregation of run partials with one integer key) gives
    Acero's hash_sum groups: unsorted and negative keys, NULL sums (a group with no value
    stays NULL), an empty input; a key with NULLs or not an integer is left to Acero."""
    from pyarrow import acero
    r = np.random.default_rng(3)
    n = 5000
    keys = pa.array(r.integers(-2500, 2500, n), pa.int64())     # 1-2 rows a group
    s = pa.array(r.integers(-10 ** 12, 10 ** 12, n), pa.int64(), mask=r.random(n) < 0.3)
    c = pa.array(r.integers(0, 5, n), pa.int64())
    t = pa.table({"k": keys, "s": s, "c": c})
    spec = [("s", "hash_sum", None, "S"), ("c", "hash_sum", None, "C")]
    got = aggregates._sorted_sums(t, "k", spec)
    want = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(t)),
        acero.Declaration("aggregate", acero.AggregateNodeOptions(spec, keys=["k"]))]
    ).to_table()
    assert got.sort_by("k").select(["k", "S", "C"]).equals(
        want.sort_by("k").select(["k", "S", "C"]))
    assert want.column("S").null_count > 0       # groups of NULLs only, compared
    empty = aggregates._sorted_sums(t.slice(0, 0), "k", spec)
    assert empty.num_rows == 0 and empty.column_names == ["k", "S", "C"]
    assert aggregates._sorted_sums(t.set_column(0, "k", pa.array(
        [None] + [1] * (n - 1), pa.int64())), "k", spec) is None
    assert aggregates._sorted_sums(t.set_column(0, "k", keys.cast(pa.string())), "k",
                                   spec) is None


def test_streamed_run_partials_are_summed_by_sorting(dbs, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 128)
    used = []
    sorted_sums = aggregates._sorted_sums

    def spy(t, key, spec):
        out = sorted_sums(t, key, spec)
        used.append(out is not None)
        return out
    monkeypatch.setattr(aggregates, "_sorted_sums", spy)
    same_answers(*dbs, RUNS[1])
    assert used == [True]
