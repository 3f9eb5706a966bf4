"""The JVM connector's batch write from a columnar scan (BulkPut): a DataFrame read from
Parquet is written by copying Spark's column vectors into Arrow column by column, not row
by row. Differential: the same Parquet rows (every type the columnar copy handles, NULLs,
NaN, empty and non-ASCII strings, decimals held as ints, longs and wider) written once
through the columnar path and once through the row path (a filter in the plan makes it
rows) give the same table, and both equal the rows pyarrow wrote. The path taken is seen
in BulkPut's counters. Spark's NOT NULL check and kudusql's row errors read the same on
both paths."""

from __future__ import annotations

import datetime as dt
import decimal
import random
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

ROWS = 5000   # more than one Parquet batch (4096 rows) and several Arrow batches below
COLS = ("k BIGINT NOT NULL, b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INT, f REAL, "
        "d DOUBLE, s STRING NOT NULL, bin BINARY, dt DATE, ts TIMESTAMP, "
        "d5 DECIMAL(5,2), d15 DECIMAL(15,2), d30 DECIMAL(30,5)")


def counters(spark) -> tuple[int, int]:
    bp = spark._jvm.io.kudusql.spark.BulkPut
    return int(bp.columnarWrites()), int(bp.rowWrites())


def parquet_rows(path, n: int = ROWS, seed: int = 26, null_key_col: str | None = None):
    rng = random.Random(seed)
    D = decimal.Decimal

    def maybe(v):
        return None if rng.random() < 0.1 else v
    t0 = dt.datetime(2021, 3, 4, 5, 6, 7, 890123)
    cols = {
        "k": pa.array(range(n), pa.int64()),
        "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
        "i8": pa.array([maybe(rng.randint(-128, 127)) for _ in range(n)], pa.int8()),
        "i16": pa.array([maybe(rng.randint(-32768, 32767)) for _ in range(n)], pa.int16()),
        "i32": pa.array([maybe(rng.randint(-2**31, 2**31 - 1)) for _ in range(n)], pa.int32()),
        "f": pa.array([maybe(rng.choice([1.5, -0.0, float("inf"), 3.25e10]))
                       for _ in range(n)], pa.float32()),
        "d": pa.array([maybe(rng.choice([float("nan"), -1e300, 0.1, 2.5]))
                       for _ in range(n)], pa.float64()),
        "s": pa.array([rng.choice(["", "a", "héllo", "日本語", "x" * rng.randint(0, 300)])
                       for _ in range(n)], pa.string()),
        "bin": pa.array([maybe(bytes(rng.randrange(256) for _ in range(rng.randint(0, 9))))
                         for _ in range(n)], pa.binary()),
        "dt": pa.array([maybe(dt.date(1969, 12, 25) + dt.timedelta(days=rng.randint(0, 30000)))
                        for _ in range(n)], pa.date32()),
        "ts": pa.array([maybe(t0 + dt.timedelta(microseconds=rng.randint(-10**15, 10**15)))
                        for _ in range(n)], pa.timestamp("us")),
        "d5": pa.array([maybe(D(rng.randint(-99999, 99999)).scaleb(-2)) for _ in range(n)],
                       pa.decimal128(5, 2)),
        "d15": pa.array([maybe(D(rng.randint(-10**15 + 1, 10**15 - 1)).scaleb(-2))
                         for _ in range(n)], pa.decimal128(15, 2)),
        "d30": pa.array([maybe(D(rng.randint(-10**30 + 1, 10**30 - 1)).scaleb(-5))
                         for _ in range(n)], pa.decimal128(30, 5)),
    }
    if null_key_col:
        cols[null_key_col] = pa.array([None if i == n // 2 else v for i, v in
                                       enumerate(cols[null_key_col].to_pylist())],
                                      cols[null_key_col].type)
    t = pa.table(cols)
    pq.write_table(t, path, row_group_size=1500)
    return t


def table_rows(db, name: str) -> list[dict]:
    got = pa.Table.from_batches(list(db.catalog.table(name).scan())).to_pylist()
    return sorted(got, key=lambda r: r["k"])


def norm(rows: list[dict]) -> list[tuple]:
    def v(x):
        return "NaN" if isinstance(x, float) and x != x else x
    return [tuple(v(r[c]) for c in sorted(r)) for r in rows]


def save(df, server, table, **opts):
    w = (df.write.format("kudusql").mode("append").option("endpoint", server.stream_address)
         .option("table", table))
    for k, v in opts.items():
        w = w.option(k, str(v))
    w.save()


def test_columnar_and_row_writes_give_the_same_table(db, jvm, server, tmp_path):
    path = str(tmp_path / "all.parquet")
    sent = parquet_rows(path)
    for name in ("bp_col", "bp_row"):
        db.session().execute(f"CREATE TABLE {name} ({COLS}, PRIMARY KEY (k)) "
                             f"PARTITION BY HASH (k) PARTITIONS 3")
    df = jvm.read.parquet(path)
    c0, r0 = counters(jvm)
    save(df, server, "bp_col", batch_rows=1000)       # several Arrow batches per task
    c1, r1 = counters(jvm)
    assert (c1 - c0, r1 - r0) == (1, 0)               # the columnar copy
    save(df.where("k >= 0"), server, "bp_row", batch_rows=1000)   # a filter: rows
    c2, r2 = counters(jvm)
    assert (c2 - c1, r2 - r1) == (0, 1)
    col, row = table_rows(db, "bp_col"), table_rows(db, "bp_row")
    assert len(col) == ROWS
    assert norm(col) == norm(row)
    # and both are what pyarrow wrote (TIMESTAMP is the engine's naive UTC micros)
    schema = db.catalog.table("bp_col").schema.arrow_schema()
    want = sent.select(schema.names).cast(schema).to_pylist()
    assert norm(col) == norm(sorted(want, key=lambda r: r["k"]))


def test_columnar_write_keeps_spark_not_null_check(db, jvm, server, tmp_path):
    """A NULL in a column the table declares NOT NULL fails the write with Spark's own
    NOT NULL error on both paths (the columnar copy evaluates Spark's check on the row
    that holds it)."""
    path = str(tmp_path / "nulls.parquet")
    parquet_rows(path, n=300, null_key_col="s")
    db.session().execute(f"CREATE TABLE bp_nn ({COLS}, PRIMARY KEY (k))")
    df = jvm.read.parquet(path)
    msgs = []
    for d in (df, df.where("k >= 0")):
        c0, r0 = counters(jvm)
        with pytest.raises(Exception) as e:
            save(d, server, "bp_nn")
        msgs.append(str(e.value))
        c1, r1 = counters(jvm)
        assert (c1 - c0) + (r1 - r0) == 1
    for m in msgs:
        assert "NOT_NULL_ASSERT_VIOLATION" in m or "NULL value appeared" in m, m[:500]


def test_columnar_write_reports_row_errors_as_before(db, jvm, server, tmp_path):
    path = str(tmp_path / "dups.parquet")
    parquet_rows(path, n=400)
    db.session().execute(f"CREATE TABLE bp_dup ({COLS}, PRIMARY KEY (k))")
    df = jvm.read.parquet(path)
    save(df.where("k < 100"), server, "bp_dup")
    c0, _ = counters(jvm)
    with pytest.raises(Exception, match=r"400 rows, 300 applied, 100 failed "
                                        r"\(ALREADY_PRESENT: 100\).*SQLSTATE 23505"):
        save(df, server, "bp_dup")
    assert counters(jvm)[0] == c0 + 1
    assert db.catalog.table("bp_dup").count_rows() == 400
    save(df, server, "bp_dup", mode="upsert")
    assert db.catalog.table("bp_dup").count_rows() == 400


def last_write_metrics(spark, after: int) -> dict:
    """The WriteMetrics of the first finished SQL execution after id `after` that has
    them, from Spark's SQL status store (what the SQL tab shows), read once the listener
    recorded it (bounded wait)."""
    store = spark._jsparkSession.sharedState().statusStore()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        execs = store.executionsList()
        for i in range(execs.size()):
            e = execs.apply(i)
            if e.executionId() <= after or e.completionTime().isEmpty():
                continue
            values = store.executionMetrics(e.executionId())
            ms = e.metrics()
            out = {}
            for j in range(ms.size()):
                m = ms.apply(j)
                v = values.get(m.accumulatorId())
                if m.name().startswith("rows ") and v.isDefined():
                    out[m.name()] = v.get()
            if len(out) == 3:
                return out
        time.sleep(0.2)
    raise AssertionError(f"no finished execution after {after} with the write metrics")


def last_execution(spark) -> int:
    execs = spark._jsparkSession.sharedState().statusStore().executionsList()
    return max((execs.apply(i).executionId() for i in range(execs.size())), default=-1)


def output_records(spark) -> int:
    """Every stage's output records so far (the tasks' outputMetrics.recordsWritten)."""
    store = spark._jsc.sc().statusStore()
    stages = store.stageList(None, False, False, getattr(store, "stageList$default$4")(),
                             None)
    return sum(stages.apply(i).outputRecords() for i in range(stages.size()))


def test_batch_write_reports_rows_as_sql_metrics(db, jvm, server, tmp_path):
    """A batch write is a V1 write (BulkPut's own job), which loses what DataSource V2's
    writing tasks report; the connector's Write reports the rows sent, applied and failed
    as driver metrics instead (WriteMetrics: Spark's V1 fallback puts them on the write's
    plan node), on the columnar and the row path, also for a write whose rows failed; and
    its tasks set their output records as V2's writing tasks do."""
    path = str(tmp_path / "m.parquet")
    parquet_rows(path, n=700)
    db.session().execute(f"CREATE TABLE bp_met ({COLS}, PRIMARY KEY (k))")
    df = jvm.read.parquet(path)
    e0, o0 = last_execution(jvm), output_records(jvm)
    save(df.where("k < 200"), server, "bp_met")                   # rows
    assert last_write_metrics(jvm, e0) == {
        "rows sent to kudusql": "200", "rows applied by kudusql": "200",
        "rows failed (row errors)": "0"}
    e1 = last_execution(jvm)
    save(df, server, "bp_met", ignore_row_errors="true")         # columnar
    assert last_write_metrics(jvm, e1) == {
        "rows sent to kudusql": "700", "rows applied by kudusql": "500",
        "rows failed (row errors)": "200"}
    deadline = time.monotonic() + 60       # the listener records stages asynchronously
    while output_records(jvm) - o0 < 900 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert output_records(jvm) - o0 == 900
