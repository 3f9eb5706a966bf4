"""The change-data source: change rows/s through the JVM connector and the PySpark source.

    .venv/bin/python -m bench.change_bench [--inserts 300000] [--batch 5000]
                                           [--updates 40] [--deletes 20] [--repeat 2]
                                           [--path jvm,python]

A `kudusql serve` process (its own data directory) holds a table `chg (k BIGINT PRIMARY
KEY, s TEXT, v DOUBLE)`, hash-partitioned four ways, written over the pg wire with a mixed
workload before any stream starts: `--inserts` rows in statements of `--batch` rows, then
`--updates` UPDATE statements of `--batch / 2` rows each and `--deletes` DELETE statements
of `--batch / 5` rows each (every statement one commit per tablet, so each tablet's change
feed holds ~(inserts / batch + updates + deletes) commits: one diff scan each).

Then, in this process, a local[2] Spark session runs for each path in turn (`--path`,
`--repeat` rounds, alternated: jvm, python, jvm, python, ...) a change stream of the whole
history, `readStream.format("kudusql").option("startingOffsets", "earliest")` into the
`noop` sink (nothing collected), from `start()` to `processAllAvailable()` (a catch-up:
one micro-batch holds every change), with a fresh checkpoint each time, each run after the
server's maintenance has settled (`settle`: its CPU below 5% for a second). Per run it prints
the change rows (the progress reports' numInputRows, checked against the workload's
count), the wall time and change rows/s, and the CPU seconds per 1,000 change rows of the
server process and of Spark's side (its JVM and the JVM's children: the Python workers of
the PySpark source), psutil, with the load average. The machine is shared: judge by CPU
per row more than by wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import psutil

from bench.common import load_avg
from bench.stream_bench import start_server


def workload(dsn: str, a) -> int:
    """Writes the mixed workload; returns the number of changes it made (one per row op)."""
    import psycopg
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE chg (k BIGINT PRIMARY KEY, s TEXT, v DOUBLE) "
                  "PARTITION BY HASH (k) PARTITIONS 4")
        for lo in range(0, a.inserts, a.batch):
            hi = min(a.inserts, lo + a.batch) - 1
            c.execute(f"INSERT INTO chg SELECT g, 'r' || g, g * 0.5 "
                      f"FROM generate_series({lo}, {hi}) AS g")
        changes = a.inserts
        step = a.batch // 2
        for i in range(a.updates):
            lo = (i * step) % max(1, a.inserts - step)
            n = c.execute(f"UPDATE chg SET s = 'u{i}', v = v + 1 "
                          f"WHERE k BETWEEN {lo} AND {lo + step - 1}").rowcount
            changes += n
        step = a.batch // 5
        for i in range(a.deletes):
            lo = a.inserts - (i + 1) * step
            n = c.execute(f"DELETE FROM chg WHERE k BETWEEN {lo} AND {lo + step - 1}"
                          ).rowcount
            changes += n
    return changes


def cpu(p: psutil.Process, children: bool = False) -> dict[int, float]:
    """CPU seconds per process: `p`, and with `children` every descendant, each with the
    CPU of its own exited (waited-for) children (PySpark's workers, forked by its daemon)."""
    procs = [p] + (p.children(recursive=True) if children else [])
    out = {}
    for q in procs:
        try:
            t = q.cpu_times()
            out[q.pid] = t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return out


def used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU between two `cpu` samples, over the processes alive at the second (a process
    that exited in between is counted in its parent's children times, if waited for)."""
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


def settle(server: psutil.Process, timeout: float = 120.0) -> None:
    """Wait until the server is idle (its maintenance - MemRowSet flushes, compactions
    of the workload - is done): its CPU over 1 s below 5%, so that the next run's server
    CPU is the change reads'."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        c0 = server.cpu_times()
        time.sleep(1.0)
        c1 = server.cpu_times()
        if (c1.user + c1.system) - (c0.user + c0.system) < 0.05:
            return


def run_once(spark, target: dict, ck: str, server: psutil.Process, jvm: psutil.Process
             ) -> tuple[int, float, float, float]:
    settle(server)
    s0, j0 = cpu(server), cpu(jvm, children=True)
    t0 = time.perf_counter()
    q = (spark.readStream.format("kudusql").options(**target).option("table", "chg")
         .option("startingOffsets", "earliest").load()
         .writeStream.format("noop").option("checkpointLocation", ck).start())
    q.processAllAvailable()
    wall = time.perf_counter() - t0
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    q.stop()
    if q.exception() is not None:
        raise RuntimeError(f"the change stream failed: {q.exception()}")
    return rows, wall, used(s0, cpu(server)), used(j0, cpu(jvm, children=True))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inserts", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--deletes", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--path", default="jvm,python")
    ap.add_argument("--data-dir", default=None,
                    help="where the server's database goes (default: a temporary dir)")
    a = ap.parse_args(argv)
    paths = [p.strip() for p in a.path.split(",") if p.strip()]
    tmp = tempfile.mkdtemp(prefix="kudusql-change-bench-", dir=a.data_dir)
    proc = None
    spark = None
    try:
        proc, pg, flight, arrow = start_server(os.path.join(tmp, "db"))
        dsn = f"host=127.0.0.1 port={pg} user=kudusql dbname=kudusql"
        t0 = time.perf_counter()
        changes = workload(dsn, a)
        print(f"workload: {changes:,} changes written in {time.perf_counter() - t0:.1f} s "
              f"({load_avg()})", flush=True)
        from kudusql.spark import jvm_connector_loaded, local_session
        spark = local_session("local[2]", app_name="kudusql-change-bench",
                              **{"spark.ui.showConsoleProgress": "false",
                                 # a Python worker starting at load ~20 took longer
                                 # than the 15 s default to connect back
                                 "spark.python.authenticate.socketTimeout": "120s"})
        spark.sparkContext.setLogLevel("ERROR")
        if "jvm" in paths and not jvm_connector_loaded(spark):
            raise SystemExit("the JVM connector is not loaded (no JDK?)")
        jvm = psutil.Process(int(spark._jvm.java.lang.ProcessHandle.current().pid()))
        server = psutil.Process(proc.pid)
        targets = {"jvm": {"endpoint": f"127.0.0.1:{arrow}"},
                   "python": {"flight": f"grpc://127.0.0.1:{flight}"}}
        print(f"{'run':>4} {'path':>6} {'changes':>9} {'wall s':>7} {'rows/s':>9} "
              f"{'server cpu s/1k':>15} {'spark cpu s/1k':>14}  load", flush=True)
        n = 0
        for r in range(a.repeat):
            for path in paths:
                rows, wall, s_cpu, j_cpu = run_once(spark, targets[path],
                                                    os.path.join(tmp, f"ck-{n}"), server, jvm)
                n += 1
                ok = "" if rows == changes else f"  (expected {changes:,}!)"
                print(f"{r:>4} {path:>6} {rows:>9,} {wall:>7.2f} {rows / wall:>9,.0f} "
                      f"{s_cpu / rows * 1000:>15.4f} {j_cpu / rows * 1000:>14.4f}  "
                      f"{os.getloadavg()[0]:.1f}{ok}", flush=True)
                if rows != changes:
                    return 1
        print(load_avg())
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except Exception:  # noqa: BLE001 - a server that does not stop is killed
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
