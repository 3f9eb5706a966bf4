"""Where the wall time of a Spark load goes: CPU per thread of both processes, idle share.

    python -m bench.spark_load_profile --parquet DIR --data-dir DB [--table lineitem]
                                       [--repeat 2] [--batch-rows N]

Starts one Spark session (local[2]) and an embedded kudusql database with its Arrow stream
endpoint in this process, then writes the table(s) from the tpchgen parquet through the
JVM connector `--repeat` times (each into a freshly created table, the first run warming
the JVM), sampling every 0.5 s:

- this process's threads (the endpoint's put handlers, the maintenance flushes, ...) by
  name, CPU seconds from /proc/self/task;
- Spark's JVM (the child java process) per thread (executor task threads, GC, JIT);
- the machine: busy and idle share of all cores (/proc/stat), and the load average.

Prints, per run: wall seconds, rows/s, CPU seconds by thread group, and the share of the
wall time in which each process was busy (its CPU / wall). Two cores fully used by the
pipeline would show ~2.0 CPU-seconds per wall second in total.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import threading
import time

import psutil

CLK = os.sysconf("SC_CLK_TCK")


def _thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    out = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat") as f:
                s = f.read()
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        rest = s[s.rindex(")") + 2:].split()
        out[int(tid)] = (name, (int(rest[11]) + int(rest[12])) / CLK)
    return out


def _proc_cpu(pid: int) -> float:
    """CPU seconds of a process, its exited threads included."""
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    rest = s[s.rindex(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / CLK


def _cpu_times() -> tuple[float, float]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) / CLK, idle / CLK


def _group_py(name: str, pynames: dict[int, str], tid: int) -> str:
    n = pynames.get(tid, name)
    if "maint" in n.lower() or "flush" in n.lower() or "compact" in n.lower():
        return "py:maintenance"
    if n.startswith("Thread-") or "process_request" in n:
        return "py:put handlers"
    if tid == os.getpid():
        return "py:main"
    return "py:other"


def _group_jvm(name: str) -> str:
    if name.startswith("Executor task") or name.startswith("Executor"):
        return "jvm:tasks"
    if "GC" in name or name.startswith("G1") or "Conc" in name:
        return "jvm:gc"
    if "Compiler" in name or name.startswith("C1") or name.startswith("C2"):
        return "jvm:jit"
    return "jvm:other"


class PutTimer:
    """Wraps the endpoint's write_batches: per put connection, the wall seconds spent
    waiting for the client's next batch (reading the socket, decoding IPC) and the rest
    (conform + insert)."""

    def __init__(self):
        import wire.arrow_stream as ast
        self.mod = ast
        self.orig = ast.write_batches
        self.lock = threading.Lock()
        self.read_s = self.total_s = 0.0
        self.puts = 0

    def install(self):
        def timed(t, mode, batches):
            waited = 0.0

            def it():
                nonlocal waited
                src = iter(batches)
                while True:
                    t0 = time.perf_counter()
                    try:
                        b = next(src)
                    except StopIteration:
                        waited += time.perf_counter() - t0
                        return
                    waited += time.perf_counter() - t0
                    yield b
            t0 = time.perf_counter()
            try:
                return self.orig(t, mode, it())
            finally:
                with self.lock:
                    self.total_s += time.perf_counter() - t0
                    self.read_s += waited
                    self.puts += 1
        self.mod.write_batches = timed


class Sampler:
    def __init__(self, jvm_pid: int):
        self.jvm_pid = jvm_pid
        self.stop = threading.Event()
        self.samples: list = []

    def snap(self):
        pynames = {t.native_id: t.name for t in threading.enumerate()}
        py = {tid: (_group_py(n, pynames, tid), c)
              for tid, (n, c) in _thread_cpu(os.getpid()).items()}
        jvm = {tid: (_group_jvm(n), c) for tid, (n, c) in _thread_cpu(self.jvm_pid).items()}
        return (time.perf_counter(), py, jvm, _cpu_times(), _proc_cpu(os.getpid()),
                _proc_cpu(self.jvm_pid))

    def run(self):
        while not self.stop.wait(0.5):
            self.samples.append(self.snap())


def _delta(a, b) -> dict[str, float]:
    """CPU seconds per group between two per-thread snapshots (threads that died between
    them are lost; threads born count from zero)."""
    g: dict[str, float] = collections.defaultdict(float)
    for tid, (grp, c) in b.items():
        g[grp] += c - (a[tid][1] if tid in a else 0.0)
    return g


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parquet", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--table", default="lineitem")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch-rows", type=int, default=0)
    ap.add_argument("--ab", action="store_true",
                    help="alternate runs without / with the put's read-ahead "
                         "(wire.arrow_stream.PUT_READ_AHEAD_ROWS = 0 in even runs)")
    ap.add_argument("--option", action="append", default=[],
                    help="extra writer option key=value")
    args = ap.parse_args()

    import kudusql
    from kudusql.spark import local_session
    from tpch.data import parquet_files
    from tpch.load import create_tables, flush_table, parquet_row_counts
    from wire.arrow_stream import start_endpoints

    timer = PutTimer()
    timer.install()
    spark = local_session(app_name="kudusql-load-profile")
    me = psutil.Process()
    jvm = [c for c in me.children(recursive=True) if "java" in c.name()]
    jvm_pid = jvm[0].pid
    files = parquet_files(args.parquet)
    counts = parquet_row_counts(args.parquet)
    tables = args.table.split(",")
    import wire.arrow_stream as ast
    ahead = ast.PUT_READ_AHEAD_ROWS
    try:
        for r in range(args.repeat):
            d = f"{args.data_dir}-{r}"
            import wire.arrow_stream as ast
            if args.ab:
                ast.PUT_READ_AHEAD_ROWS = 0 if r % 2 == 0 else ahead
                print(f"run {r}: read-ahead {ast.PUT_READ_AHEAD_ROWS} rows")
            shutil.rmtree(d, ignore_errors=True)
            with kudusql.connect(d) as conn:
                create_tables(conn, tables)
                server = start_endpoints(conn.database)
                try:
                    s = Sampler(jvm_pid)
                    th = threading.Thread(target=s.run, daemon=True)
                    a = s.snap()
                    timer.read_s = timer.total_s = 0.0
                    timer.puts = 0
                    th.start()
                    for t in tables:
                        w = (spark.read.parquet(*files[t]).write.format("kudusql")
                             .mode("append").option("endpoint", server.stream_address)
                             .option("table", t).option("mode", "insert"))
                        if args.batch_rows:
                            w = w.option("batch_rows", str(args.batch_rows))
                        for kv in args.option:
                            w = w.option(*kv.split("=", 1))
                        w.save()
                    mid = s.snap()
                    for t in tables:
                        flush_table(conn.database.catalog, t)
                    b = s.snap()
                    s.stop.set()
                    th.join()
                finally:
                    server.shutdown()
            n = sum(counts[t] for t in tables)
            wall = b[0] - a[0]
            wall_w = mid[0] - a[0]
            py = _delta(a[1], b[1])
            jv = _delta(a[2], b[2])
            py["py:exited threads"] = (b[4] - a[4]) - sum(py.values())
            jv["jvm:exited threads"] = (b[5] - a[5]) - sum(jv.values())
            tot = (b[3][0] - a[3][0])
            idle = (b[3][1] - a[3][1])
            print(f"run {r}: {n:,} rows, write {wall_w:.1f} s + final flush "
                  f"{wall - wall_w:.1f} s = {n / wall:,.0f} rows/s; load avg "
                  f"{os.getloadavg()[0]:.1f}")
            print(f"  machine idle share {idle / tot:.0%} of {tot / wall:.1f} cores")
            print(f"  kudusql process CPU {sum(py.values()):.1f} s "
                  f"({sum(py.values()) / wall:.2f} cores): "
                  + ", ".join(f"{k[3:]} {v:.1f}" for k, v in sorted(py.items())))
            print(f"  Spark JVM CPU {sum(jv.values()):.1f} s "
                  f"({sum(jv.values()) / wall:.2f} cores): "
                  + ", ".join(f"{k[4:]} {v:.1f}" for k, v in sorted(jv.items())))
            print(f"  put connections {timer.puts}: {timer.total_s:.1f} s wall in all, "
                  f"{timer.read_s:.1f} s of it waiting for / decoding the client's batches, "
                  f"{timer.total_s - timer.read_s:.1f} s inserting")
            # a timeline: per 2 s, cores used by each process
            if os.environ.get("TIMELINE"):
                prev = a
                for smp in s.samples[3::4]:
                    dt = smp[0] - prev[0]
                    p = sum(_delta(prev[1], smp[1]).values()) / dt
                    j = sum(_delta(prev[2], smp[2]).values()) / dt
                    print(f"    t={smp[0] - a[0]:5.1f} py {p:.2f} jvm {j:.2f}")
                    prev = smp
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
