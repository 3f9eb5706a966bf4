"""The `kudusql` data source end to end (local-mode Spark, a real kudusql endpoint): write
through it, read back with pushed-down filters (checked in the server's scan statistics),
snapshot reads, per-row errors on insert. `format("kudusql")` with option "endpoint" is the
JVM connector (kudusql/spark/java/, Arrow IPC stream endpoint); with "flight" it is the
PySpark data source the connector hands over to — both are run here."""

from __future__ import annotations

import json

import pyarrow.flight as fl
import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from kudusql.spark import KudusqlDataSource, jvm_connector_loaded

N = 2000


def stats(server) -> list[dict]:
    return server.stats.snapshot()


@pytest.fixture(scope="module")
def table(db, server, spark):
    db.session().execute(
        "CREATE TABLE s (k INT NOT NULL, g STRING, v DOUBLE, PRIMARY KEY (k)) "
        "PARTITION BY HASH (k) PARTITIONS 4")
    df = spark.createDataFrame([(i, f"g{i % 5}", i * 0.5) for i in range(N)],
                               "k int, g string, v double")
    (df.write.format("kudusql").mode("append").option("endpoint", server.stream_address)
     .option("table", "s").save())
    return "s"


def target(server, path: str) -> tuple[str, str]:
    """The option naming the endpoint of a path: the JVM connector or the PySpark source."""
    return ("endpoint", server.stream_address) if path == "jvm" else ("flight", server.location)


@pytest.fixture(params=["jvm", "python"])
def path(request, spark):
    if request.param == "jvm" and not jvm_connector_loaded(spark):
        pytest.skip("the JVM connector is not on the classpath (no JDK to build it)")
    return request.param


def load(spark, server, table, path="jvm", **opts):
    r = spark.read.format("kudusql").option(*target(server, path)).option("table", table)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def test_write_then_read_everything(db, spark, server, table, path):
    assert db.catalog.table(table).count_rows() == N
    df = load(spark, server, table, path)
    assert df.schema.simpleString() == "struct<k:int,g:string,v:double>"
    got = sorted(tuple(r) for r in df.collect())
    assert got == [(i, f"g{i % 5}", i * 0.5) for i in range(N)]
    assert stats(server)[-1]["tablets_read"] == 4  # one Spark partition per tablet


def test_filters_are_pushed_down(spark, server, table, path):
    server.stats.clear()
    point = load(spark, server, table, path, pushdown="true").filter("k = 7").select(
        "v").collect()
    assert [r.v for r in point] == [3.5]
    q = stats(server)[-1]
    assert q["predicates"][0]["column"] == "k"
    assert (q["tablets_pruned"], q["tablets_read"], q["rows_returned"]) == (3, 1, 1)
    assert q["rows_scanned"] < N

    df = load(spark, server, table, path, pushdown="true").filter(
        "k < 100 and g in ('g1', 'g2') and v is not null")
    assert sorted(r.k for r in df.collect()) == [k for k in range(100) if k % 5 in (1, 2)]
    q = stats(server)[-1]
    assert {p["kind"] for p in q["predicates"]} >= {"range", "in", "is_not_null"}
    assert q["rows_returned"] == 40  # the engine filtered; Spark got 40 of 2000 rows

    # pushdown off: same answer, every row shipped to Spark
    assert load(spark, server, table, path, pushdown="false").filter("k = 7").count() == 1
    assert stats(server)[-1]["rows_returned"] == N


def test_snapshot_read_ignores_later_writes(spark, server, table):
    # planning picks the snapshot: partitions planned before a write never see it
    ds = KudusqlDataSource({"flight": server.location, "table": table})
    reader = ds.reader(ds.schema())
    parts = reader.partitions()
    assert len(parts) == 4
    later = spark.createDataFrame([(N + i, "new", 0.0) for i in range(10)],
                                  "k int, g string, v double")
    (later.write.format("kudusql").mode("append").option("flight", server.location)
     .option("table", table).save())
    assert sum(b.num_rows for p in parts for b in reader.read(p)) == N
    assert load(spark, server, table).count() == N + 10

    # an explicit snapshot option: time travel through Spark
    with fl.connect(server.location) as c:
        res = list(c.do_action(fl.Action("current_timestamp",
                                          json.dumps({"table": table}).encode())))
    ts = json.loads(res[0].body.to_pybytes())["timestamp"]
    more = spark.createDataFrame([(N + 100, "newer", 1.0)], "k int, g string, v double")
    (more.write.format("kudusql").mode("append").option("flight", server.location)
     .option("table", table).save())
    assert load(spark, server, table, snapshot=ts).count() == N + 10
    assert load(spark, server, table).count() == N + 11


def test_insert_duplicates_are_reported_and_upsert_applies(db, spark, server, table, path):
    a, b = (1, 2) if path == "jvm" else (3, 4)
    new = N + 500 + a
    rows = spark.createDataFrame([(a, "dup", 9.0), (b, "dup", 9.0), (new, "ok", 9.0)],
                                 "k int, g string, v double").coalesce(1)
    w = (rows.write.format("kudusql").mode("append").option(*target(server, path))
         .option("table", table))
    with pytest.raises(Exception, match=r"3 rows, 1 applied, 2 failed \(ALREADY_PRESENT: 2\)"):
        w.save()
    t = db.catalog.table(table)
    assert t.lookup((new,))["g"] == "ok"  # the good row stays applied (Kudu semantics)
    assert t.lookup((a,))["g"] == f"g{a}"
    w.option("mode", "upsert").save()
    assert t.lookup((a,))["g"] == "dup"


def test_overwrite_is_refused(spark, server, table):
    rows = spark.createDataFrame([(1, "x", 1.0)], "k int, g string, v double")
    with pytest.raises(Exception, match=r"(?i)overwrite|truncate"):
        (rows.write.format("kudusql").mode("overwrite").option("endpoint", server.stream_address)
         .option("table", table).save())


@pytest.mark.parametrize("which", [
    "jvm",
    pytest.param("python", marks=pytest.mark.xfail(
        strict=False, reason="PySpark 4.3: a DataFrame whose filters were pushed reuses that "
        "planned scan for a later query without pushable filters (why pushdown is opt-in "
        "on the PySpark source; docs/spark.md)"))])
def test_reusing_a_dataframe_after_pushdown(spark, server, table, which):
    df = load(spark, server, table, which, pushdown="true")
    assert df.filter("k < 10").count() == 10
    assert df.count() > 10


def test_decimals_are_written_exactly(db, spark, server, path):
    """DECIMAL columns through a write, compared value by value with what was sent. The
    JVM writer puts precision <= 18 as unscaled longs (DecimalLongWriter), wider ones
    through Spark's BigDecimal writer: negatives, zero, each column's extremes and nulls
    for both, and the 18-digit bound itself."""
    import decimal
    import random

    import pyarrow as pa
    name = f"dec_{path}"
    db.session().execute(
        f"CREATE TABLE {name} (k INT NOT NULL, a DECIMAL(15,2), b DECIMAL(18,0), "
        f"c DECIMAL(4,4), d DECIMAL(38,10), PRIMARY KEY (k)) "
        f"PARTITION BY HASH (k) PARTITIONS 2")
    rng = random.Random(26)
    D = decimal.Decimal

    def value(digits: int, scale: int):
        r = rng.random()
        top = 10 ** digits - 1
        if r < 0.1:
            return None
        if r < 0.2:
            u = rng.choice([top, -top, 0, 1, -1])
        else:
            u = rng.randint(-top, top) // 10 ** rng.randint(0, digits - 1)
        return D(u).scaleb(-scale, decimal.Context(prec=60))
    rows = [(k, value(15, 2), value(18, 0), value(4, 4), value(38, 10)) for k in range(600)]
    df = spark.createDataFrame(rows, "k int, a decimal(15,2), b decimal(18,0), "
                                     "c decimal(4,4), d decimal(38,10)").repartition(3)
    (df.write.format("kudusql").mode("append").option(*target(server, path))
     .option("table", name).save())
    got = pa.Table.from_batches(list(db.catalog.table(name).scan())).to_pylist()
    assert sorted((r["k"], r["a"], r["b"], r["c"], r["d"]) for r in got) == rows
