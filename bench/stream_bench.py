"""The Structured Streaming sink: rows/s sustained and how soon SQL sees a row.

    .venv/bin/python -m bench.stream_bench [--rate 60000] [--seconds 60] [--warmup 25]
                                           [--path python | jvm]

A `kudusql serve` process (pg wire, Flight and the Arrow stream endpoint, its own data
directory) and, in this process, a local[2] Spark driver running `rate (--rate rows/s) ->
writeStream.format("kudusql")` (insert mode, 1 s trigger, a checkpoint) on the path
`--path` names: `python` (default) the PySpark sink over Flight (option "flight"), `jvm`
the JVM connector's sink over the Arrow stream endpoint (option "endpoint"); the anchor
uses the same path's batch writer. Both in one run: `--path python,jvm` (one Spark
session, the paths one after the other on their own tables, figures per path). While it runs a poller asks the server over the
pg wire (psycopg) every ~0.2 s for the rows it has not seen yet, sampled (`id % 50 = 0`):

  sustained rows/s   rows in the table at the end of the window minus at its start,
                     over the window (after --warmup s: Spark's start and first batches)
  visible latency    per sampled row, the poll's answer time minus the row's `ts` (the
                     time the rate source stamped the row: Spark produced it) - p50/p99/max
                     over the rows stamped in the window; this includes the trigger
                     interval, the micro-batch, the write and the poll's own period
  anchor             the same rows/s through the batch writer of the same data source
                     (`df.write.format("kudusql")`, 1M rows of the same schema) in the
                     same run, after the stream (Spark warm): the streaming figure as a
                     ratio of it

Targets (issue 26): >= 50k rows/s sustained, <= 5 s p99. Prints the load average: the
machine is shared, and Spark's JVM and Python workers compete with the server for 2 cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from bench.common import Results, load_avg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: str) -> tuple[subprocess.Popen, int, int, int]:
    pg, flight, arrow = free_port(), free_port(), free_port()
    p = subprocess.Popen([sys.executable, "-m", "kudusql", "serve", "--data-dir", data,
                          "--port", str(pg), "--flight-port", str(flight),
                          "--arrow-port", str(arrow)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import psycopg
    for _ in range(300):
        try:
            psycopg.connect(f"host=127.0.0.1 port={pg} user=kudusql dbname=kudusql").close()
            return p, pg, flight, arrow
        except psycopg.OperationalError:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("kudusql serve did not start")


class Poller(threading.Thread):
    """Asks over the pg wire for sampled rows not seen yet; records when each appeared."""

    def __init__(self, dsn: str, every: int = 50, table: str = "ev"):
        super().__init__(daemon=True)
        self.dsn, self.every, self.table = dsn, every, table
        self.seen: dict[int, tuple[float, float]] = {}   # id -> (stamped, visible) epoch s
        self.stop = threading.Event()

    def run(self) -> None:
        import psycopg
        lo = 0
        with psycopg.connect(self.dsn, autocommit=True) as c:
            while not self.stop.is_set():
                rows = c.execute(f"SELECT id, ts FROM {self.table} WHERE id >= {lo} "
                                 f"AND id % {self.every} = 0").fetchall()
                now = time.time()
                for i, ts in rows:   # ~1/50 of the rows: a loop is fine here
                    if i not in self.seen:
                        self.seen[i] = (ts.replace(tzinfo=dt.timezone.utc).timestamp(), now)
                while lo in self.seen:
                    lo += self.every
                time.sleep(0.2)


def run_path(spark, a, tmp: str, dsn: str, path: str, target: dict, res: Results) -> None:
    """One path's stream (table ev_<path>) and its anchor (anchor_<path>), figures to res."""
    import psycopg
    ev, anchor_t = f"ev_{path}", f"anchor_{path}"
    with psycopg.connect(dsn, autocommit=True) as c:
        for t in (ev, anchor_t):
            c.execute(f"CREATE TABLE {t} (id BIGINT PRIMARY KEY, ts TIMESTAMP, v DOUBLE) "
                      "PARTITION BY HASH (id) PARTITIONS 4")
    poller = Poller(dsn, table=ev)
    q = (spark.readStream.format("rate").option("rowsPerSecond", a.rate)
         .option("numPartitions", 2).load()
         .selectExpr("value AS id", "timestamp AS ts", "value * 0.5 AS v")
         .writeStream.format("kudusql").options(**target).option("table", ev)
         .option("checkpointLocation", os.path.join(tmp, f"ck-{path}"))
         .trigger(processingTime="1 second").start())
    poller.start()

    def count() -> int:
        with psycopg.connect(dsn, autocommit=True) as c:
            return c.execute(f"SELECT count(*) FROM {ev}").fetchone()[0]
    time.sleep(a.warmup)
    w0, n0 = time.time(), count()
    loads = []
    while time.time() < w0 + a.seconds:
        time.sleep(5)
        loads.append(os.getloadavg()[0])
        if q.exception() is not None:
            raise RuntimeError(f"the stream failed: {q.exception()}")
    w1, n1 = time.time(), count()
    time.sleep(8)     # let the rows stamped in the window become visible
    poller.stop.set()
    q.stop()
    poller.join(5)
    # anchor, after the stream (Spark and its Python workers warm): the batch writer
    df = spark.range(a.anchor_rows, numPartitions=2).selectExpr(
        "id", "current_timestamp() AS ts", "id * 0.5 AS v")
    t0 = time.perf_counter()
    df.write.format("kudusql").mode("append").options(**target) \
        .option("table", anchor_t).save()
    anchor = a.anchor_rows / (time.perf_counter() - t0)
    rate = (n1 - n0) / (w1 - w0)
    lat = np.array([v - s for s, v in poller.seen.values() if w0 <= s <= w1])
    late = sum(1 for i in range(0, n1, 50) if i not in poller.seen)   # never seen
    res.add(f"[{path}] stream sink rows/s sustained", f"{rate:,.0f}", ">= 50,000",
            rate >= 50_000)
    res.add("  rate source offered rows/s", f"{a.rate:,}")
    res.add("  anchor: batch write rows/s", f"{anchor:,.0f}")
    res.add("  stream / batch write", f"{rate / anchor:.2f}x")
    if len(lat):
        p99 = float(np.percentile(lat, 99))
        res.add(f"[{path}] visible to SQL p50 (s)", f"{np.percentile(lat, 50):.2f}")
        res.add(f"[{path}] visible to SQL p99 (s)", f"{p99:.2f}", "<= 5", p99 <= 5.0)
        res.add(f"[{path}] visible to SQL max (s)", f"{lat.max():.2f}")
        res.add("  sampled rows in window", f"{len(lat):,}")
    res.add("  sampled rows never seen", f"{late:,}")
    res.add("  load average during window",
            f"{min(loads):.1f}-{max(loads):.1f}" if loads else "n/a")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=60000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=25.0)
    ap.add_argument("--anchor-rows", type=int, default=1_000_000)
    ap.add_argument("--path", default="python",
                    help="python (the PySpark sink over Flight), jvm (the JVM connector "
                         "over the Arrow stream endpoint), or both in turn: python,jvm")
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args(argv)
    paths = [p.strip() for p in a.path.split(",") if p.strip()]
    if not paths or any(p not in ("python", "jvm") for p in paths):
        ap.error("--path is python, jvm or a comma-separated list of them")

    tmp = tempfile.mkdtemp(prefix="kudusql-stream-bench-")
    srv, pg, flight, arrow = start_server(os.path.join(tmp, "db"))
    dsn = f"host=127.0.0.1 port={pg} user=kudusql dbname=kudusql"
    spark = None
    res = Results()
    try:
        from kudusql.spark import jvm_connector_loaded, local_session
        spark = local_session("local[2]", app_name="kudusql-stream-bench",
                              **{"spark.driver.memory": "2g",
                                 "spark.sql.session.timeZone": "UTC"})
        spark.sparkContext.setLogLevel("ERROR")
        if "jvm" in paths and not jvm_connector_loaded(spark):
            raise RuntimeError("--path jvm: the JVM connector is not loaded (no JDK?)")
        targets = {"python": {"flight": f"grpc://127.0.0.1:{flight}"},
                   "jvm": {"endpoint": f"127.0.0.1:{arrow}"}}
        for path in paths:
            run_path(spark, a, tmp, dsn, path, targets[path], res)
    finally:
        if spark is not None:
            spark.stop()
        srv.terminate()
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return res.report(f"stream sink, rate {a.rate:,}/s, {'/'.join(paths)}, {load_avg()}",
                      a.strict)


if __name__ == "__main__":
    sys.exit(main())
