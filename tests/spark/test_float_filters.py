"""Pushed filters on FLOAT / DOUBLE columns are exact, on both readers (differential).

Spark orders NaN above every number (NaN > 1 and NaN = NaN are true) and -0.0 = 0.0, as
kudusql's scan predicates now do too. A filter either goes to the engine with Spark's
meaning or stays in Spark. The oracle is Spark itself over the same rows as an in-memory
DataFrame (not Parquet: `test_parquet_is_no_oracle`): random filters (comparisons, IN,
<=>, IS [NOT] NULL, NOT, AND, OR) with NaN, +-infinity, -0.0, 0.0, NULL and ordinary
literals must select the same keys through the JVM connector ("endpoint") and the
PySpark source ("flight", pushdown on) as Spark does. Half of each tablet's rows are
flushed to a DiskRowSet first, so page zone maps (min/max, which skip NaN) take part.
KUDUSQL_LONG=1 runs many more filters."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import DoubleType, FloatType, LongType, StructField, StructType

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from kudusql.spark import jvm_connector_loaded

ROWS = 400
CASES = 300 if os.environ.get("KUDUSQL_LONG") else 15  # each case: two Spark jobs
NAN, INF = float("nan"), float("inf")
VALUES = [NAN, INF, -INF, -0.0, 0.0, 1.5, -2.0, 3.0, 1e300, -1e-300, 7.25]
LITERALS = ["NaN", "Infinity", "-Infinity", "-0.0", "0.0", "1.5", "-2.0", "3.0", "2.0",
            "1e300", "-1e-300", "7.25", "100.0"]


@pytest.fixture(scope="module")
def ftable(db, server, spark, tmp_path_factory):
    rng = random.Random(2611)
    db.session().execute(
        "CREATE TABLE fl (k BIGINT NOT NULL, d DOUBLE, f FLOAT, PRIMARY KEY (k)) "
        "PARTITION BY HASH (k) PARTITIONS 3")

    def col():
        return [None if rng.random() < 0.1 else rng.choice(VALUES) for _ in range(ROWS)]

    data = pa.table({"k": pa.array(range(ROWS), pa.int64()),
                     "d": pa.array(col(), pa.float64()),
                     "f": pa.array(col(), pa.float32())})
    t = db.catalog.table("fl")
    first = data.slice(0, ROWS // 2)
    assert not t.insert(first.cast(t.schema.arrow_schema())).row_errors
    for tid in db.catalog.get_table("fl").tablet_ids:  # the first half into DiskRowSets
        db.catalog.tablet(tid).flush_mrs()
    assert not t.insert(data.slice(ROWS // 2).cast(t.schema.arrow_schema())).row_errors
    path = tmp_path_factory.mktemp("fl") / "fl.parquet"
    pq.write_table(data, path)
    schema = StructType([StructField("k", LongType(), False), StructField("d", DoubleType()),
                         StructField("f", FloatType())])
    memory = spark.createDataFrame([tuple(r.values()) for r in data.to_pylist()], schema)
    return memory, str(path)


def _literal(rng: random.Random, col: str) -> str:
    typ = "DOUBLE" if col == "d" else "FLOAT"
    return f"CAST('{rng.choice(LITERALS)}' AS {typ})"  # typed: the filter names the column


def random_filter(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.2:
        op = rng.choice(["AND", "OR"])
        return f"({random_filter(rng, depth + 1)} {op} {random_filter(rng, depth + 1)})"
    if depth < 2 and r < 0.27:
        return f"NOT ({random_filter(rng, depth + 1)})"
    col = rng.choice(["d", "f"])
    kind = rng.random()
    if kind < 0.1:
        return f"{col} IS {rng.choice(['', 'NOT '])}NULL"
    if kind < 0.25:
        vals = ", ".join(_literal(rng, col) for _ in range(rng.randint(1, 3)))
        return f"{col} IN ({vals})"
    op = rng.choice(["=", "<", "<=", ">", ">=", "<>", "<=>"])
    return f"{col} {op} {_literal(rng, col)}"


def keys(df) -> list[int]:
    return sorted(r[0] for r in df.select("k").collect())


def _jvm(spark, server):
    return (spark.read.format("kudusql").option("endpoint", server.stream_address)
            .option("table", "fl").load())


def _python(spark, server):
    # a fresh DataFrame per query: PySpark 4.3's planning cache (docs/spark.md)
    return (spark.read.format("kudusql").option("flight", server.location)
            .option("table", "fl").option("pushdown", "true").load())


READERS = {"jvm": _jvm, "python": _python}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_float_filters_match_parquet(spark, server, ftable, reader):
    if reader == "jvm" and not jvm_connector_loaded(spark):
        pytest.skip("the JVM connector is not on the classpath (no JDK to build it)")
    load = READERS[reader]
    oracle, _ = ftable
    assert keys(load(spark, server)) == list(range(ROWS))
    rng = random.Random(26 if reader == "jvm" else 62)
    # the filters that lost NaN rows before they were kept in Spark come first
    wheres = ["d > CAST('1.5' AS DOUBLE)", "f >= CAST('-2.0' AS FLOAT)",
              "d >= CAST('-0.0' AS DOUBLE)", "d = CAST('0.0' AS DOUBLE)",
              "d IN (CAST('-0.0' AS DOUBLE), CAST('3.0' AS DOUBLE))"]
    wheres += [random_filter(rng) for _ in range(CASES)]
    for case, where in enumerate(wheres):
        want = keys(oracle.filter(where))
        got = keys(load(spark, server).filter(where))
        assert got == want, (f"case {case} ({reader}): WHERE {where}: "
                             f"{len(got)} rows, Spark in memory {len(want)}; "
                             f"missing {sorted(set(want) - set(got))[:8]}, "
                             f"extra {sorted(set(got) - set(want))[:8]}")


def test_parquet_is_no_oracle(spark, ftable):
    """Why the oracle is in memory: Spark over Parquet drops NaN rows that Spark's own
    semantics keep (row groups skipped by NaN-less statistics)."""
    oracle, path = ftable
    where = "f > CAST('Infinity' AS FLOAT)"
    nan_rows = oracle.filter("isnan(f)").count()
    assert nan_rows and keys(oracle.filter(where)) == keys(oracle.filter("isnan(f)"))
    assert spark.read.parquet(path).filter(where).count() < nan_rows
