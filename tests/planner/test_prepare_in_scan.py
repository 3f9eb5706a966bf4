"""A scan-fed GROUP BY prepares its input on the scan's pool threads
(planner/executor/aggregates.py `PrepareInScan`, core.py `_scan_batches`' `post`): once the
first morsel has fixed the plan, each chunk a pool thread reads is evaluated there into the
aggregation's input columns (expressions, int64 sums of decimals, run partials, with the
residual WHERE first), not on the Acero plan's one source thread. The answers are
DuckDB's - over many morsels, with a residual filter, keys in runs, NULLs, a sum whose
int64 budget runs out on a pool thread (the aggregation runs again with split sums), an
error raised on a pool thread - and EXPLAIN ANALYZE says how many chunks came prepared;
an expression that runs a subquery is prepared on the consumer's thread only."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import pyarrow as pa
import pytest

import kudusql
from planner import guard
from tests.planner.duck_match import same_answers

duckdb = pytest.importorskip("duckdb")

N = 12000


def _data(seed: int) -> pa.Table:
    r = random.Random(seed)
    cols = {"k": [], "line": [], "q": [], "p": [], "d": [], "f": [], "big": []}
    for i in range(N):
        cols["k"].append(i // 4)                    # runs of four, as lineitem's orders
        cols["line"].append(i % 4)
        cols["q"].append(None if r.random() < 0.05 else Decimal(r.randrange(0, 5000)) / 100)
        cols["p"].append(Decimal(r.randrange(0, 10 ** 7)) / 100)
        cols["d"].append(Decimal(r.randrange(0, 11)) / 100)
        cols["f"].append(r.choice(["A", "N", "R", None]))
        # |sum| past int64 after ~900 rows: the budget runs out a few morsels in
        cols["big"].append(Decimal(10 ** 16 + r.randrange(0, 1000)))
    types = {"k": pa.int64(), "line": pa.int32(), "q": pa.decimal128(12, 2),
             "p": pa.decimal128(15, 2), "d": pa.decimal128(15, 2), "f": pa.string(),
             "big": pa.decimal128(18, 0)}
    return pa.table({k: pa.array(v, types[k]) for k, v in cols.items()})


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    con = kudusql.connect(str(tmp_path_factory.mktemp("prepare_in_scan")))
    duck = duckdb.connect()
    cur = con.cursor()
    cols = ("k BIGINT NOT NULL, line INT NOT NULL, q DECIMAL(12,2), p DECIMAL(15,2), "
            "d DECIMAL(15,2) NOT NULL, f VARCHAR, big DECIMAL(18,0) NOT NULL")
    cur.execute(f"CREATE TABLE t ({cols}, PRIMARY KEY (k, line)) PARTITION BY HASH (k) "
                "PARTITIONS 3")
    duck.execute(f"CREATE TABLE t ({cols.replace('DECIMAL(12,2)', 'DECIMAL(38,2)')})")
    data = _data(11)
    table = con.database.catalog.table("t")
    for b in data.to_batches(max_chunksize=500):    # several batches and rowsets a tablet
        table.insert(pa.Table.from_batches([b]))
    duck.register("data", data)
    duck.execute("INSERT INTO t SELECT * FROM data")
    yield con, duck
    con.close()
    duck.close()


def _prepared(con, sql) -> tuple[int, int]:
    """(chunks prepared by the scan's threads, morsels prepared by the consumer)."""
    cur = con.cursor()
    cur.execute("EXPLAIN ANALYZE " + sql)
    text = "\n".join(r[0] for r in cur.fetchall())
    m = re.findall(r"input prepared on the scan's threads: (\d+) chunks; here: (\d+) "
                   r"morsels", text)
    assert m, text
    return int(m[-1][0]), int(m[-1][1])


QUERIES = [
    # Q01's shape: text keys, sums of decimal expressions, avg, count(x), count(*)
    "SELECT f, sum(q), sum(p * (1 - d)), sum(p * (1 - d) * (1 + d)), avg(q), avg(d), "
    "count(q), count(*) FROM t GROUP BY f",
    # with a residual filter, run on the same pool thread first
    "SELECT f, sum(p * (1 - d)), count(*) FROM t WHERE p * 2 > q * 3 + 1000 GROUP BY f",
    # keys in runs (Q18's subquery): partial sums per run on the pool threads
    "SELECT k, sum(q), count(*) FROM t GROUP BY k HAVING sum(q) > 120",
    # a sum past the int64 budget: Fallback(split) from a pool thread, then split sums
    "SELECT f, sum(big), count(*) FROM t GROUP BY f",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_answers_over_many_morsels(dbs, sql, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    same_answers(*dbs, sql)


@pytest.mark.parametrize("sql", QUERIES[:3])
def test_chunks_come_prepared_from_the_scan(dbs, sql, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    pooled, _here = _prepared(dbs[0], sql)
    assert pooled > 0


def test_a_subquery_in_an_argument_is_prepared_here(dbs, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    sql = "SELECT f, sum(q + (SELECT max(line) FROM t)) FROM t GROUP BY f"
    same_answers(*dbs, sql)
    pooled, here = _prepared(dbs[0], sql)
    assert pooled == 0 and here > 1


def test_an_error_on_a_pool_thread_is_the_statements(dbs, monkeypatch):
    monkeypatch.setattr(guard, "MORSEL_ROWS", 256)
    con, _ = dbs
    cur = con.cursor()
    with pytest.raises(kudusql.Error) as e:
        # 0 only from row 6000 on: raised by a morsel that is not the first one
        cur.execute("SELECT f, sum(p / (k - 1500)) FROM t GROUP BY f")
        cur.fetchall()
    assert getattr(e.value, "sqlstate", None) == "22012", e.value
