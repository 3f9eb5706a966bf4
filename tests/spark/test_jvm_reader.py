"""The JVM connector (format "kudusql" with option "endpoint") against oracles.

Differential: a random table (every pushable type, NULLs, NaN in the DOUBLE column) read
with random filters and projections through the connector with pushdown on must give the
rows Spark gives with pushdown off (Spark's own semantics, NaN included) and, for filters
that do not touch the DOUBLE column, the rows kudusql's SQL gives for the same WHERE.
Pruning and pushdown are seen in the endpoint's scan statistics (columns shipped, rows
returned); one partition per tablet with the endpoint's host as preferred location, one
snapshot; errors in SQL's words. KUDUSQL_LONG=1 runs many more random filters."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import random
import socket

import pyarrow as pa
import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")


ROWS = 600
CASES = 200 if os.environ.get("KUDUSQL_LONG") else 16
COLUMNS = ["k", "i", "s", "d", "dt", "dec", "b", "ts"]
T0 = dt.datetime(2020, 1, 1, 12, 0, 0)


@pytest.fixture(scope="module")
def rtable(db, server, jvm):
    rng = random.Random(26)
    db.session().execute(
        "CREATE TABLE r (k BIGINT NOT NULL, i INT, s STRING, d DOUBLE, dt DATE, "
        "dec DECIMAL(10,2), b BOOLEAN, ts TIMESTAMP, PRIMARY KEY (k)) PARTITION BY HASH (k) PARTITIONS 3")

    def maybe(v):
        return None if rng.random() < 0.12 else v

    cols = {
        "k": pa.array(range(ROWS), pa.int64()),
        "i": pa.array([maybe(rng.randint(-5, 20)) for _ in range(ROWS)], pa.int32()),
        "s": pa.array([maybe(rng.choice(["a", "b", "ab", "B", "", "zz", "é"]))
                       for _ in range(ROWS)], pa.string()),
        "d": pa.array([maybe(rng.choice([float("nan"), -1.5, 0.0, 2.0, 2.5, 10.0]))
                       for _ in range(ROWS)], pa.float64()),
        "dt": pa.array([maybe(dt.date(2020, 1, 1) + dt.timedelta(days=rng.randint(0, 30)))
                        for _ in range(ROWS)], pa.date32()),
        "dec": pa.array([maybe(decimal.Decimal(rng.randint(-500, 2000)) / 100)
                         for _ in range(ROWS)], pa.decimal128(10, 2)),
        "b": pa.array([maybe(rng.random() < 0.5) for _ in range(ROWS)], pa.bool_()),
        "ts": pa.array([maybe(T0 + dt.timedelta(seconds=rng.randint(0, 50) * 3600))
                        for _ in range(ROWS)], pa.timestamp("us")),
    }
    t = db.catalog.table("r")
    res = t.insert(pa.table(cols, schema=t.schema.arrow_schema()))
    assert not res.row_errors
    return "r"


def _literal(rng: random.Random, col: str) -> str:
    return {
        "k": lambda: str(rng.randint(-10, ROWS + 10)),
        "i": lambda: str(rng.randint(-6, 21)),
        "s": lambda: repr(rng.choice(["a", "b", "ab", "B", "", "zz", "é", "c"])),
        "d": lambda: rng.choice(["-1.5", "0.0", "2.0", "2.25", "10.0", "100.0"]),
        "dt": lambda: f"DATE '{dt.date(2020, 1, 1) + dt.timedelta(days=rng.randint(-2, 32))}'",
        "dec": lambda: f"{decimal.Decimal(rng.randint(-600, 2100)) / 100}",
        "b": lambda: rng.choice(["true", "false"]),
        # {TS}: TIMESTAMP_NTZ in Spark (the column's type there), TIMESTAMP in kudusql SQL
        "ts": lambda: "{TS} '%s'" % (T0 + dt.timedelta(seconds=rng.randint(-2, 52) * 3600)),
    }[col]()


def random_filter(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.25:
        op = rng.choice(["AND", "OR"])
        return f"({random_filter(rng, depth + 1)} {op} {random_filter(rng, depth + 1)})"
    if depth < 2 and r < 0.32:
        return f"NOT ({random_filter(rng, depth + 1)})"
    col = rng.choice(COLUMNS)
    kind = rng.random()
    if kind < 0.12:
        return f"{col} IS {rng.choice(['', 'NOT '])}NULL"
    if kind < 0.3:
        vals = ", ".join(_literal(rng, col) for _ in range(rng.randint(1, 4)))
        return f"{col} IN ({vals})"
    return f"{col} {rng.choice(['=', '<', '<=', '>', '>=', '<>'])} {_literal(rng, col)}"


def read(spark, server, table, **opts):
    r = (spark.read.format("kudusql").option("endpoint", server.stream_address)
         .option("table", table))
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def rows_of(df) -> list[tuple]:
    def norm(v):
        return "NaN" if isinstance(v, float) and v != v else v  # NaN != NaN in tuples

    def key(v):
        return (v is None, str(v))  # None and mixed types sort without errors
    return sorted((tuple(norm(v) for v in r) for r in df.collect()),
                  key=lambda t: [key(v) for v in t])


def test_random_filters_match_spark_and_sql(db, jvm, server, rtable):
    rng = random.Random(2026)
    sess = db.session()
    for case in range(CASES):
        where = random_filter(rng)
        cols = rng.sample(COLUMNS[1:], rng.randint(0, 3))
        cols = ["k"] + cols  # the key first: it tells the rows apart
        spark_where = where.replace("{TS}", "TIMESTAMP_NTZ")
        on = rows_of(read(jvm, server, rtable).filter(spark_where).select(*cols))
        off = rows_of(read(jvm, server, rtable, pushdown="false").filter(spark_where)
                      .select(*cols))
        assert on == off, f"case {case}: {spark_where} (pushdown on vs off)"
        if " d " not in f" {where} ".replace("(", " ").replace(")", " "):
            got = sorted(r[0] for r in on)
            res = sess.execute(f"SELECT k FROM r WHERE {where.replace('{TS}', 'TIMESTAMP')}")[-1]
            want = sorted(res.table.column("k").to_pylist())
            assert got == want, f"case {case}: {where} (connector vs kudusql SQL)"


def test_pruning_and_pushdown_ship_less(jvm, server, rtable):
    server.stats.clear()
    df = read(jvm, server, rtable).filter("i >= 3 AND s IN ('a', 'b')").select("dec")
    n = df.count()
    q = server.stats.snapshot()[-1]
    assert q["columns"] == [] and n > 0           # count(): no column shipped at all
    kinds = sorted(p["kind"] for p in q["predicates"])
    assert "in" in kinds and "range" in kinds
    assert q["rows_returned"] == n < ROWS          # the engine filtered: n rows shipped

    rows = read(jvm, server, rtable).filter("i >= 3 AND s IN ('a', 'b')").select(
        "k", "dec").collect()
    q = server.stats.snapshot()[-1]
    assert sorted(q["columns"]) == ["dec", "k"]   # only the projected columns
    assert q["rows_returned"] == len(rows) == n

    # not pushable exactly (a lower bound on a DOUBLE, NaN): only d IS NOT NULL is pushed,
    # Spark filters d > 1.0 (NaN rows included, as Spark orders NaN above numbers)
    not_null = read(jvm, server, rtable).filter("d IS NOT NULL").count()
    got = read(jvm, server, rtable).filter("d > 1.0").select("k").collect()
    q = server.stats.snapshot()[-1]
    assert [p["kind"] for p in q["predicates"]] == ["is_not_null"]
    assert q["rows_returned"] == not_null > len(got)


def test_one_partition_per_tablet_one_snapshot_and_locations(jvm, server, rtable):
    server.stats.clear()
    df = read(jvm, server, rtable).select("k")
    rdd = df._jdf.queryExecution().toRdd()
    sc = jvm.sparkContext._jsc.sc()
    assert rdd.getNumPartitions() == 3
    host = server.stream_address.rsplit(":", 1)[0]
    for i in range(3):
        assert list(sc.getPreferredLocs(rdd, i).toList().mkString(",").split(",")) == [host]
    assert df.count() == ROWS
    q = server.stats.snapshot()[-1]
    assert (q["tablets_total"], q["tablets_read"]) == (3, 3)
    # pruning by the hash partitioning: a key equality reads one tablet of three
    assert read(jvm, server, rtable).filter("k = 17").count() == 1
    q = server.stats.snapshot()[-1]
    assert (q["tablets_pruned"], q["tablets_read"]) == (2, 1)


def test_snapshot_option_reads_the_past(db, jvm, server, rtable):
    ts = db.catalog.table(rtable).current_timestamp()
    t = db.catalog.table(rtable)
    t.insert(pa.table({"k": pa.array([ROWS + 1], pa.int64())},
                      schema=pa.schema([t.schema.arrow_schema().field("k")])))
    assert read(jvm, server, rtable, snapshot=ts).count() == ROWS
    assert read(jvm, server, rtable).count() == ROWS + 1
    t.delete(pa.table({"k": pa.array([ROWS + 1], pa.int64())}))


def test_errors_are_in_sql_words(jvm, server, rtable):
    with pytest.raises(Exception) as e:
        read(jvm, server, "no_such_table")
    msg = str(e.value)
    assert 'table "no_such_table" does not exist (SQLSTATE 42P01)' in msg
    assert "java." not in msg and "at io.kudusql" not in msg

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()  # nothing listens there any more
    with pytest.raises(Exception) as e:
        jvm.read.format("kudusql").option("endpoint", dead).option("table", rtable).load()
    msg = str(e.value)
    assert f"cannot reach the kudusql endpoint at {dead}" in msg and "08001" in msg
    assert "java." not in msg


def test_task_errors_reach_python_in_sql_words(db, jvm, server):
    """An error inside a Spark task is KudusqlSparkError with the SQLSTATE, not Java
    frames inside "Job aborted". Here a DataFrame's second collect() reuses its planned
    tickets (Spark keeps the executed plan), but the table was re-created in between: the
    server refuses the tickets in the tasks."""
    from kudusql.spark.errors import KudusqlSparkError

    sess = db.session()
    sess.execute("CREATE TABLE te (k BIGINT PRIMARY KEY) PARTITION BY HASH (k) PARTITIONS 2")
    sess.execute("INSERT INTO te VALUES (1), (2), (3)")
    df = read(jvm, server, "te")
    assert len(df.collect()) == 3
    sess.execute("DROP TABLE te")
    sess.execute("CREATE TABLE te (k BIGINT PRIMARY KEY) PARTITION BY HASH (k) PARTITIONS 2")
    with pytest.raises(KudusqlSparkError) as e:
        df.collect()
    msg = str(e.value)
    assert msg.startswith("kudusql: ") and "re-created" in msg
    assert e.value.sqlstate == msg[-6:-1] != "XX000"
    assert "at io.kudusql" not in msg and "Job aborted" not in msg and "java." not in msg


def test_a_put_failing_early_reports_its_error(db, jvm, server, monkeypatch, caplog):
    """A large write whose first 200k-row chunk fails on the server reports that chunk's
    error (here a refused insert: 53200), not 08001: the endpoint answers and keeps
    reading the task's stream (lingering close), and the writer, seeing the answer
    arrive, stops at its next batch and reads it (KudusqlWrite.Writer.flush): the
    endpoint dropped far less than the ~48 MB the task would have sent."""
    import logging
    import re

    from engine import errors
    from kudusql.spark.errors import KudusqlSparkError
    from wire import flight

    db.session().execute("CREATE TABLE pf (k BIGINT PRIMARY KEY, v BIGINT) "
                         "PARTITION BY HASH (k) PARTITIONS 2")
    real = flight.write_batches.__globals__["conform"]
    calls = []

    def refusing(table, target):
        calls.append(table.num_rows)
        if len(calls) == 1:
            raise errors.ServiceUnavailable("memory limit reached: the insert was refused "
                                            "(test)")
        return real(table, target)
    monkeypatch.setitem(flight.write_batches.__globals__, "conform", refusing)
    caplog.set_level(logging.DEBUG, logger="kudusql.arrow_stream")
    df = jvm.range(0, 3_000_000, numPartitions=1).selectExpr("id AS k", "id * 2 AS v")
    with pytest.raises(KudusqlSparkError) as e:
        (df.write.format("kudusql").mode("append").option("endpoint", server.stream_address)
         .option("table", "pf").save())
    assert e.value.sqlstate == "53200", str(e.value)
    assert "memory limit reached" in str(e.value)
    assert len(calls) == 1 and calls[0] >= flight.PUT_CHUNK_ROWS   # the first chunk
    lingered = [r.getMessage() for r in caplog.records if "failed put" in r.getMessage()]
    assert len(lingered) == 1, lingered
    m = re.search(r"dropped (\d+) bytes of the client's stream, to (.*)", lingered[0])
    assert m and int(m.group(1)) < 16 << 20 and m.group(2) != "cut off", lingered
