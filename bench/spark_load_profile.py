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

Profiles (of the last run):
- `--direct`: after the Spark runs, the same table(s) loaded by the direct loader
  (`tpch.load.insert_parquet`, no Spark) into a fresh database of this process, sampled
  the same way: the server's CPU per row on both paths side by side.
- `--pyspy PATH`: py-spy (`--pyspy-bin`, e.g. installed with `pip install --target`)
  records this process during the last Spark run (collapsed stacks, `--threads`) and the
  direct run (PATH.direct); `--top` prints the functions with the most samples.
- `--jfr PATH`: Java Flight Recorder (`jcmd JFR.start`, settings=profile) records Spark's
  JVM during the last run; the executor tasks' execution samples are summarised (the
  methods on top of the stack, and the frames most often anywhere in it).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
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
    def __init__(self, jvm_pid: int | None):
        self.jvm_pid = jvm_pid
        self.stop = threading.Event()
        self.samples: list = []

    def snap(self):
        pynames = {t.native_id: t.name for t in threading.enumerate()}
        py = {tid: (_group_py(n, pynames, tid), c)
              for tid, (n, c) in _thread_cpu(os.getpid()).items()}
        jvm = None if self.jvm_pid is None else {
            tid: (_group_jvm(n), c) for tid, (n, c) in _thread_cpu(self.jvm_pid).items()}
        return (time.perf_counter(), py, jvm, _cpu_times(), _proc_cpu(os.getpid()),
                None if self.jvm_pid is None else _proc_cpu(self.jvm_pid))

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


def _pyspy_start(binary: str, out: str, extra: str = "") -> subprocess.Popen:
    p = subprocess.Popen([binary, "record", "--pid", str(os.getpid()), "--threads",
                          "--rate", "200", "--format", "raw", "-o", out] + extra.split(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)   # attached before the run starts
    return p


def _pyspy_stop(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGINT)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def pyspy_top(path: str, n: int = 25) -> None:
    """The functions of a py-spy raw (collapsed) profile: the share of samples with the
    function on top of the stack (self) and anywhere in it (total), threads together."""
    self_: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    all_ = 0
    with open(path) as f:
        for line in f:
            stack, _, cnt = line.rstrip().rpartition(" ")
            c = int(cnt)
            frames = [fr.split(" (")[0] + " " + fr.split("/")[-1].rstrip(")")
                      for fr in stack.split(";")[1:]]   # [0]: the thread
            if not frames:
                continue
            all_ += c
            self_[frames[-1]] += c
            for fr in set(frames):
                total[fr] += c
    print(f"  py-spy {path}: {all_} samples (on CPU)")
    print("    self:")
    for fr, c in self_.most_common(n):
        print(f"      {c / all_:6.1%}  {fr}")
    print("    total:")
    for fr, c in total.most_common(n):
        print(f"      {c / all_:6.1%}  {fr}")


def jfr_top(path: str, n: int = 30) -> None:
    """Summarise a JFR recording's execution samples of Spark's executor task threads."""
    out = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample",
                          "--stack-depth", "64", path], capture_output=True, text=True,
                         check=True).stdout
    self_: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    samples = 0
    for ev in out.split("jdk.ExecutionSample {")[1:]:
        if "Executor task" not in ev:
            continue
        body = ev.split("stackTrace = [", 1)[-1]
        frames = [ln.strip().split(" line:")[0].split("(")[0] for ln in body.splitlines()
                  if ln.startswith("    ") and "line:" in ln]
        if not frames:
            continue
        samples += 1
        self_[frames[0]] += 1
        for fr in set(frames):
            total[fr] += 1
    print(f"  JFR {path}: {samples} executor-task samples")
    print("    self:")
    for fr, c in self_.most_common(n):
        print(f"      {c / samples:6.1%}  {fr}")
    print("    total:")
    for fr, c in total.most_common(n):
        print(f"      {c / samples:6.1%}  {fr}")


def report(label: str, n: int, a, mid, b) -> None:
    wall = b[0] - a[0]
    wall_w = mid[0] - a[0]
    py = _delta(a[1], b[1])
    py["py:exited threads"] = (b[4] - a[4]) - sum(py.values())
    tot = (b[3][0] - a[3][0])
    idle = (b[3][1] - a[3][1])
    print(f"{label}: {n:,} rows, write {wall_w:.1f} s + final flush "
          f"{wall - wall_w:.1f} s = {n / wall:,.0f} rows/s; load avg "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  machine idle share {idle / tot:.0%} of {tot / wall:.1f} cores")
    pc = sum(py.values())
    print(f"  kudusql process CPU {pc:.1f} s = {pc / n * 1e6:.2f} us/row "
          f"({pc / wall:.2f} cores): "
          + ", ".join(f"{k[3:]} {v:.1f}" for k, v in sorted(py.items())))
    if a[2] is not None:
        jv = _delta(a[2], b[2])
        jv["jvm:exited threads"] = (b[5] - a[5]) - sum(jv.values())
        jc = sum(jv.values())
        print(f"  Spark JVM CPU {jc:.1f} s = {jc / n * 1e6:.2f} us/row "
              f"({jc / wall:.2f} cores): "
              + ", ".join(f"{k[4:]} {v:.1f}" for k, v in sorted(jv.items())))


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
    ap.add_argument("--direct", action="store_true",
                    help="then load the same table(s) directly (no Spark), sampled alike")
    ap.add_argument("--pyspy", default=None, help="py-spy raw profile of the last run here")
    ap.add_argument("--pyspy-bin", default="py-spy")
    ap.add_argument("--pyspy-args", default="",
                    help='more py-spy record arguments, e.g. "--gil" (samples holding it)')
    ap.add_argument("--jfr", default=None, help="JFR recording of Spark's JVM, last run")
    ap.add_argument("--top", type=int, default=25, help="functions shown per profile")
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
                    last = r == args.repeat - 1
                    spy = _pyspy_start(args.pyspy_bin, args.pyspy, args.pyspy_args) \
                        if args.pyspy and last else None
                    if args.jfr and last:
                        subprocess.run(["jcmd", str(jvm_pid), "JFR.start", "name=kload",
                                        "settings=profile", f"filename={args.jfr}"],
                                       check=True, capture_output=True)
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
                    if spy is not None:
                        _pyspy_stop(spy)
                    if args.jfr and last:
                        subprocess.run(["jcmd", str(jvm_pid), "JFR.stop", "name=kload"],
                                       check=True, capture_output=True)
                finally:
                    server.shutdown()
            shutil.rmtree(d, ignore_errors=True)
            n = sum(counts[t] for t in tables)
            report(f"run {r}", n, a, mid, b)
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
    if args.pyspy:
        pyspy_top(args.pyspy, args.top)
    if args.jfr:
        jfr_top(args.jfr, args.top)
    if args.direct:
        direct(args, files, counts, tables)


def direct(args, files, counts, tables) -> None:
    """The same tables loaded by the direct loader, sampled as the Spark runs are."""
    import kudusql
    from tpch.load import create_tables, flush_table, insert_parquet
    d = f"{args.data_dir}-direct"
    shutil.rmtree(d, ignore_errors=True)
    with kudusql.connect(d) as conn:
        create_tables(conn, tables)
        s = Sampler(None)
        th = threading.Thread(target=s.run, daemon=True)
        out = f"{args.pyspy}.direct" if args.pyspy else None
        spy = _pyspy_start(args.pyspy_bin, out, args.pyspy_args) if out else None
        a = s.snap()
        th.start()
        for t in tables:
            insert_parquet(conn.database.catalog, t, files[t])
        mid = s.snap()
        for t in tables:
            flush_table(conn.database.catalog, t)
        b = s.snap()
        s.stop.set()
        th.join()
        if spy is not None:
            _pyspy_stop(spy)
    shutil.rmtree(d, ignore_errors=True)
    report("direct", sum(counts[t] for t in tables), a, mid, b)
    if out:
        pyspy_top(out, args.top)


if __name__ == "__main__":
    main()
