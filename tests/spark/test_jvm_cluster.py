"""The JVM connector on a real local cluster (3 masters, 3 tablet servers, RF=3, separate
processes; the SQL front end killed before Spark touches the data): every tablet server
serves the Arrow stream endpoint; the connector, given their addresses ("endpoint") or
the masters' endpoints ("masters", no secret: each master answers `locate`, a follower
by asking the leader), plans one partition per tablet at one snapshot, each naming the
endpoints of the tablet servers holding a replica (leader first; Spark's preferred
locations are their hosts), reads and writes through them, and still reads every row
after one tablet server is killed -9 (the dead endpoint is skipped at connect, the client
library fails over among replicas). The JVM sink and change source run through the
masters' endpoints too.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pyarrow as pa

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from kudusql.spark.cluster import executor_catalog  # noqa: E402
from tests.cluster.conftest import LocalCluster, _run  # noqa: E402
from tests.spark.test_arrow_stream import call  # noqa: E402

LONG = os.environ.get("KUDUSQL_LONG") == "1"
# a cluster start plus ~30-60 s of Spark jobs: beyond the default suite's budget
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for Spark on a cluster")]


@pytest.fixture(scope="module")
def setup(tmp_path_factory, jvm):
    for c in _run(LocalCluster(str(tmp_path_factory.mktemp("jvm-cluster") / "c"), 3,
                               ("--masters", "3"))):
        with open(os.path.join(c.dir, "cluster.json")) as f:
            doc = json.load(f)
        tservers = [p for p in doc["processes"] if p["role"] == "tserver"]
        masters = [p for p in doc["processes"] if p["role"] == "master"]
        with c.connect() as conn:
            conn.execute("CREATE TABLE jc (k BIGINT PRIMARY KEY, g TEXT, v DOUBLE) "
                         "PARTITION BY HASH (k) PARTITIONS 3 WITH (replication_factor = 3)")
            conn.execute("INSERT INTO jc SELECT i, 'g' || (i % 5), i * 0.5 "
                         "FROM generate_series(0, 999) AS s(i)")
            conn.execute("CREATE TABLE js (id BIGINT PRIMARY KEY, ts TIMESTAMP, v DOUBLE) "
                         "PARTITION BY HASH (id) PARTITIONS 2 WITH (replication_factor = 3)")
            conn.execute("CREATE TABLE jch (k BIGINT PRIMARY KEY, s TEXT) "
                         "PARTITION BY HASH (k) PARTITIONS 3 WITH (replication_factor = 3)")
        front = next(p for p in c.processes() if p["role"] == "sql")
        os.kill(front["pid"], signal.SIGKILL)  # from here on only masters and tservers
        yield {"cluster": c, "tservers": tservers,
               "endpoints": [f"127.0.0.1:{p['arrow_port']}" for p in tservers],
               "masters": ",".join(m["addr"] for m in doc["masters"]),
               "master_endpoints": [f"127.0.0.1:{p['arrow_port']}" for p in masters],
               "secret": os.path.join(c.dir, "rpc-secret")}


def _read(spark, endpoints, **kw):
    r = spark.read.format("kudusql").option("endpoint", ",".join(endpoints)).option(
        "table", "jc")
    for k, v in kw.items():
        r = r.option(k, str(v))
    return r.load()


def _cluster_rows(setup):
    cat = executor_catalog(setup["masters"], setup["secret"], "LEADER_ONLY")
    t = cat.table("jc").scan_table(["k", "g", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("k", "g", "v"))))


def test_plan_names_replica_endpoints_and_one_snapshot(setup):
    status, plan = call(setup["endpoints"][0], {"op": "plan", "table": "jc"})
    assert status == 0, plan
    assert len(plan["tickets"]) == 3 == len(plan["locations"])
    assert len({tk["snapshot"] for tk in plan["tickets"]}) == 1 == len({plan["snapshot"]})
    for locs in plan["locations"]:  # RF=3: every tablet server holds every tablet
        assert sorted(locs) == sorted(setup["endpoints"])


def test_stream_sink_through_the_masters_exactly_once(jvm, setup, tmp_path):
    """writeStream.format("kudusql") with the masters' endpoints and no secret: the JVM
    connector's sink writes through the tablet servers' endpoints (wire/stream_sink.py
    there, over the client library), stopped and restarted from its checkpoint, and a
    replay of a batch whose commit Spark did not log writes nothing: 0 lost, 0 doubled."""
    from tests.spark.test_streaming import (check_exactly_once, forget_commit, last_batch,
                                            start_sink, stop_cleanly, wait_until)
    cat = executor_catalog(setup["masters"], setup["secret"], "LEADER_ONLY")
    t = cat.table("js")
    ck = str(tmp_path / "ck")

    def start():
        return start_sink(jvm, {"masters": ",".join(setup["master_endpoints"])}, "js", ck)
    q = start()
    wait_until(lambda: t.scan_table(["id"]).num_rows >= 600, what="first rows")
    stop_cleanly(q, start, ck)
    forget_commit(ck, last_batch(ck))     # as a kill -9 between the two commits leaves it
    q = start()
    wait_until(lambda: t.scan_table(["id"]).num_rows >= 1200, what="more rows")
    stop_cleanly(q, start, ck)
    assert check_exactly_once(cat, "js") >= 1200


def test_change_source_through_the_masters_exactly_once(jvm, setup, tmp_path):
    """readStream.format("kudusql") with the masters' endpoints and no secret: the JVM
    change source plans at the tablet servers' endpoints ("changes_plan" over the client
    library, each ticket naming its replicas' endpoints) and reads each tablet's changes
    from its leader; a mixed workload written through the client library, streamed across
    a restart from the checkpoint, arrives exactly once, in commit order per key."""
    import random

    from tests.spark.test_streaming import start_changes, workload
    cat = executor_catalog(setup["masters"], setup["secret"], "LEADER_ONLY")
    t = cat.table("jch")
    rng, state, expected = random.Random(11), {}, []
    workload(t, rng, 10, state, [])              # before the stream's start: not delivered
    start = t.current_timestamp()
    status, plan = call(setup["endpoints"][0], {"op": "changes_plan", "table": "jch",
                                                "start": start, "end": start + 1})
    assert status == 0 and len(plan["tickets"]) == 3 == len(plan["locations"])
    assert all(sorted(locs) == sorted(setup["endpoints"]) for locs in plan["locations"])
    ck, got = str(tmp_path / "ck"), {}
    target = {"masters": ",".join(setup["master_endpoints"])}
    q = start_changes(jvm, target, "jch", ck, got, str(start))
    workload(t, rng, 30, state, expected)
    q.processAllAvailable()
    q.stop()
    workload(t, rng, 20, state, expected)        # while the stream is down
    q = start_changes(jvm, target, "jch", ck, got, "latest")   # the checkpoint wins
    q.processAllAvailable()
    q.stop()
    assert q.exception() is None
    rows = [r for b in sorted(got) for r in got[b]]
    assert sorted(rows, key=repr) == sorted(expected, key=repr)
    seq: dict[int, list] = {}
    for b in sorted(got):
        for k, _, _, ts in got[b]:
            seq.setdefault(k, []).append(ts)
    assert all(v == sorted(v) for v in seq.values())


def test_masters_route_to_the_jvm_reader_and_writer(jvm, setup):
    """option("masters", the masters' endpoints) without rpc_secret_file: the JVM path
    (no Python worker: the plan is a DataSourceV2ScanExec of the Java scan), one partition
    per tablet with the replicas' hosts as preferred locations, the same rows as the
    client library reads; a write through it; every master (two are followers) answers
    `locate` alike; a dead first master is skipped."""
    from tests.spark.test_arrow_stream import call
    eps = sorted(setup["endpoints"])
    answers = []
    for m in setup["master_endpoints"]:
        deadline = time.monotonic() + 30
        while True:   # a tablet server's first heartbeat may precede its endpoint
            st, ans = call(m, {"op": "locate", "table": "jc"})
            assert st == 0, (m, ans)
            if sorted(ans["endpoints"]) == eps or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        answers.append(ans)
    assert all(sorted(a["endpoints"]) == eps for a in answers)
    assert all(a["tablets"] == answers[0]["tablets"] for a in answers)  # relayed
    assert [len(t["endpoints"]) for t in answers[0]["tablets"]] == [3, 3, 3]

    masters = ",".join(setup["master_endpoints"])
    df = (jvm.read.format("kudusql").option("masters", masters).option("table", "jc").load())
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "kudusql jc struct<" in plan and "Python" not in plan, plan   # the Java scan
    rdd = df._jdf.queryExecution().toRdd()
    assert rdd.getNumPartitions() == 3
    sc = jvm.sparkContext._jsc.sc()
    for i in range(3):
        assert sc.getPreferredLocs(rdd, i).toList().mkString(",") == "127.0.0.1"
    got = sorted(tuple(r) for r in df.collect())
    assert got == _cluster_rows(setup) and len(got) == 1000

    more = jvm.createDataFrame([(i, f"g{i % 5}", i * 0.5) for i in range(5000, 5100)],
                               "k long, g string, v double")
    (more.write.format("kudusql").mode("append").option("masters", masters)
     .option("table", "jc").save())
    after = sorted(tuple(r) for r in (jvm.read.format("kudusql").option("masters", masters)
                                      .option("table", "jc").load().collect()))
    assert after == _cluster_rows(setup) and len(after) == 1100
    # the same write again: the duplicates are row errors in SQL's words
    with pytest.raises(Exception) as e:
        (more.write.format("kudusql").mode("append").option("masters", masters)
         .option("table", "jc").save())
    assert "100 failed (ALREADY_PRESENT: 100)" in str(e.value), str(e.value)
    assert "(SQLSTATE 23505)" in str(e.value)

    # the first master's endpoint is a closed port: the next master answers
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_addr = f"127.0.0.1:{dead.getsockname()[1]}"
    dead.close()
    n = (jvm.read.format("kudusql").option("masters", f"{dead_addr},{masters}")
         .option("table", "jc").load().count())
    assert n == 1100
    # masters' RPC addresses are not their endpoints: a clear error, not a hang
    with pytest.raises(Exception) as e:
        jvm.read.format("kudusql").option("masters", setup["masters"]).option(
            "table", "jc").load()
    assert "SQLSTATE 08001" in str(e.value) and "arrow-port" in str(e.value), str(e.value)

    # clean up for the next test, which counts rows
    cat = executor_catalog(setup["masters"], setup["secret"], "LEADER_ONLY")
    cat.table("jc").delete(pa.table({"k": pa.array(range(5000, 5100), pa.int64())}))

    # the leader master killed -9: the followers elect a new one, which learns the tablet
    # servers from their next heartbeats; meanwhile a master that cannot answer (57P03)
    # or be reached (08001) is passed over for the next, and the read comes through
    leader = next(p for p in setup["cluster"].status()
                  if p["role"] == "master" and p.get("raft_role") == "LEADER")
    os.kill(leader["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        try:
            n = (jvm.read.format("kudusql").option("masters", masters).option("table", "jc")
                 .load().count())
            break
        except Exception as e:  # noqa: BLE001 - no leader yet, or none heard from yet
            assert time.monotonic() < deadline, str(e)
            time.sleep(1)
    assert n == 1000


def test_read_write_and_failover(jvm, setup):
    eps = setup["endpoints"]
    df = _read(jvm, eps)
    rdd = df._jdf.queryExecution().toRdd()
    assert rdd.getNumPartitions() == 3
    sc = jvm.sparkContext._jsc.sc()
    for i in range(3):
        assert sc.getPreferredLocs(rdd, i).toList().mkString(",") == "127.0.0.1"
    got = sorted(tuple(r) for r in df.collect())
    assert got == _cluster_rows(setup) and len(got) == 1000

    more = jvm.createDataFrame([(i, f"g{i % 5}", i * 0.5) for i in range(1000, 3000)],
                               "k long, g string, v double")
    (more.write.format("kudusql").mode("append").option("endpoint", ",".join(eps))
     .option("table", "jc").save())
    assert _read(jvm, eps).count() == 3000
    assert _read(jvm, eps).filter("k >= 2990 AND g = 'g1'").count() == 2  # 2991, 2996

    # kill -9 the tablet server whose endpoint comes first: every read still answers
    victim = setup["tservers"][0]
    os.kill(victim["pid"], signal.SIGKILL)
    rows = sorted(tuple(r) for r in _read(jvm, eps).collect())
    assert len(rows) == 3000 and [r[0] for r in rows] == list(range(3000))

    # every endpoint down: a clean error in SQL's words
    with pytest.raises(Exception) as e:
        _read(jvm, [eps[0]])
    assert "SQLSTATE 08001" in str(e.value) and "at io.kudusql" not in str(e.value)
