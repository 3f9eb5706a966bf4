"""The PySpark source on a real local cluster (1 master, 3 tablet servers, RF=3, separate
processes) with real local-mode Spark: scan tokens, one partition per tablet, executors
reading and writing the tablet servers directly — the SQL front end is killed before Spark
touches the data, so nothing can go through it — and rows equal to the SQL answer."""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pyarrow as pa
import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from engine.tablet.scan_spec import ColumnPredicate  # noqa: E402
from kudusql.spark import KudusqlDataSource  # noqa: E402
from kudusql.spark.cluster import (  # noqa: E402
    ScanToken,
    executor_catalog,
    preferred_locations,
    read_cluster,
    scan_tokens,
    tokens_rdd,
)
from tests.cluster.conftest import LocalCluster, _run  # noqa: E402

N = 3000
LONG = os.environ.get("KUDUSQL_LONG") == "1"
# ~60-90 s of Spark jobs on a loaded machine: beyond the default suite's budget (the
# tokens themselves are checked without Spark in tests/cluster/test_scan_failover.py)
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for Spark on a cluster")]


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    yield from _run(LocalCluster(str(tmp_path_factory.mktemp("spark-cluster") / "c")))


@pytest.fixture(scope="module")
def setup(spark_cluster, spark):
    c = spark_cluster
    with open(os.path.join(c.dir, "cluster.json")) as f:
        doc = json.load(f)
    masters = ",".join(m["addr"] for m in doc["masters"])
    secret = os.path.join(c.dir, "rpc-secret")
    with c.connect() as conn:
        conn.execute("CREATE TABLE sc (k BIGINT PRIMARY KEY, g TEXT, v DOUBLE) "
                     "PARTITION BY HASH (k) PARTITIONS 3 WITH (replication_factor = 3)")
        conn.execute("INSERT INTO sc SELECT i, 'g' || (i % 5), i * 0.5 "
                     "FROM generate_series(0, 999) AS s(i)")
    # kill -9 the SQL front end: from here on Spark can only talk to masters and tservers
    front = next(p for p in c.processes() if p["role"] == "sql")
    os.kill(front["pid"], signal.SIGKILL)
    return {"masters": masters, "secret": secret, "cluster": c, "front": front}


def _opts(setup, **kw):
    return dict({"masters": setup["masters"], "rpc_secret_file": setup["secret"],
                 "table": "sc"}, **{k: str(v) for k, v in kw.items()})


def _load(spark, setup, **kw):
    r = spark.read.format("kudusql")
    for k, v in _opts(setup, **kw).items():
        r = r.option(k, v)
    return r.load()


def _sql_answer(setup):
    cat = executor_catalog(setup["masters"], setup["secret"], "LEADER_ONLY")
    t = cat.table("sc").scan_table(["k", "g", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("k", "g", "v"))))


def test_write_and_read_through_tablet_servers(spark, setup):
    df = spark.createDataFrame([(i, f"g{i % 5}", i * 0.5) for i in range(1000, N)],
                               "k long, g string, v double")
    w = df.write.format("kudusql").mode("append")
    for k, v in _opts(setup).items():
        w = w.option(k, v)
    w.save()
    want = _sql_answer(setup)
    assert want == [(i, f"g{i % 5}", i * 0.5) for i in range(N)]

    got = _load(spark, setup)
    assert sorted(tuple(r) for r in got.collect()) == want
    # one input partition per tablet, each carrying its replicas' host
    ds = KudusqlDataSource(_opts(setup))
    parts = ds.reader(ds.schema()).partitions()
    assert len(parts) == 3 and got.rdd.getNumPartitions() == 3
    toks = [ScanToken.deserialize(p.token) for p in parts]
    assert len({t.tablet_id for t in toks}) == 3 and len({t.snapshot for t in toks}) == 1
    assert all(p.locations == ["127.0.0.1"] and len(t.replicas) == 3
               for p, t in zip(parts, toks))

    # pushed filters prune tablets on the driver and filter in the tablet servers
    point = _load(spark, setup, pushdown="true").filter("k = 7").collect()
    assert [tuple(r) for r in point] == [(7, "g2", 3.5)]
    ds = KudusqlDataSource(_opts(setup, pushdown="true"))
    rd = ds.reader(ds.schema())
    assert list(rd.pushFilters(_filters_k_eq(7))) == []
    assert len(rd.partitions()) == 1


def _filters_k_eq(v):
    from pyspark.sql.datasource import EqualTo
    return [EqualTo(("k",), v)]


def test_scan_token_rdd_has_the_replica_hosts_as_preferred_locations(spark, setup):
    df, snap, rdd = read_cluster(spark, setup["masters"], setup["secret"], "sc",
                                 predicates=[ColumnPredicate.range("k", 0, 2500)])
    assert rdd.getNumPartitions() == 3
    assert preferred_locations(rdd) == [["127.0.0.1"]] * 3
    got = sorted(tuple(r) for r in df.collect())
    assert got == [r for r in _sql_answer(setup) if r[0] < 2500]
    # locations are the tokens' hosts, not a constant: tokens naming other hosts
    cat = executor_catalog(setup["masters"], setup["secret"])
    _, toks = scan_tokens(cat, "sc", ["k"], snapshot=snap)
    fake = [dataclasses.replace(t, replicas=tuple((u, f"host{i}-{j}.example:7050")
                                                  for j, (u, _) in enumerate(t.replicas)))
            for i, t in enumerate(toks)]
    assert preferred_locations(tokens_rdd(spark, fake)) == [
        sorted(f"host{i}-{j}.example" for j in range(3)) for i in range(3)]


def test_streaming_sink_and_change_source_on_the_cluster(spark, setup, tmp_path):
    """The stream sink writes from every task to the tablet leaders, exactly once across a
    forced replay; the change source reads each tablet's leader (the "changes" RPC) -
    with the SQL front end dead."""
    from engine.catalog import HashBucketSchema, PartitionSchema
    from engine.schema import ColumnSchema, Schema
    from engine.types import DataType as T
    from tests.spark.test_streaming import (
        check_exactly_once, forget_commit, last_batch, start_changes, start_sink,
        stop_cleanly, wait_until)

    cat = executor_catalog(setup["masters"], setup["secret"], "LEADER_ONLY")
    schema = Schema([ColumnSchema("id", T.INT64), ColumnSchema("ts", T.TIMESTAMP,
                                                                nullable=True),
                     ColumnSchema("v", T.DOUBLE, nullable=True)], key=["id"])
    cat.create_table("evc", schema, PartitionSchema.create(schema, [HashBucketSchema(
        ("id",), 3)]), replication_factor=3)
    opts = {"masters": setup["masters"], "rpc_secret_file": setup["secret"]}
    ck = str(tmp_path / "ck")

    def start():
        return start_sink(spark, opts, "evc", ck)
    q = start()
    wait_until(lambda: cat.table("evc").count_rows() >= 800, timeout=180, what="rows")
    stop_cleanly(q, start, ck)
    n1 = check_exactly_once(cat, "evc")
    forget_commit(ck, last_batch(ck))            # a crash between the two commits
    q = start()
    wait_until(lambda: cat.table("evc").count_rows() >= n1 + 400, timeout=180, what="more")
    stop_cleanly(q, start, ck)
    n = check_exactly_once(cat, "evc")

    got = {}
    q = start_changes(spark, opts, "evc", str(tmp_path / "ckc"), got, "earliest")
    q.processAllAvailable()
    cat.table("evc").update(pa.table({"id": pa.array([0, 1, 2], pa.int64()),
                                      "v": pa.array([-1.0] * 3)}))
    q.processAllAvailable()
    q.stop()
    rows = [r for b in sorted(got) for r in got[b]]
    inserts = sorted(r[0] for r in rows if r[2] != -1.0)
    assert inserts == list(range(n))             # every insert once
    assert sorted((r[0], r[2], r[3]) for r in rows if r[2] == -1.0) == [
        (0, -1.0, False), (1, -1.0, False), (2, -1.0, False)]
