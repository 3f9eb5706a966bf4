"""Wire-server benchmark: kudusql against a local PostgreSQL (the anchor) in the same run,
when its binaries are installed; the summary prints kudusql / PostgreSQL ratios.

Closed-loop workloads, `--connections` connections in all (default 16), spread over
`--client-procs` client processes (default 2, each an asyncpg client on uvloop when it is
installed) so that the benchmark's own client is not what limits a server; each workload
runs `--seconds`, and the clients' CPU use is reported (CPU seconds per wall second summed
over the client processes: near `--client-procs` means the clients were the limit):

  point select   SELECT v, s FROM kv WHERE k = $1        (uniform random existing keys)
  update         UPDATE kv SET v = v + 1 WHERE k = $1
  insert         INSERT INTO kv_ins VALUES ($1, $2, $3)   (fresh keys)
  YCSB-A/B/C     reads SELECT v, s FROM kv WHERE k = $1 and updates UPDATE kv SET s = $2
                 WHERE k = $1, 50/50 (A), 95/5 (B), 100/0 (C), keys drawn from a scrambled
                 Zipfian distribution (theta 0.99) as in YCSB and the Kudu paper's runs

ops/s and p50 / p99 latency. Then:
  executemany    a driver's batch load: asyncpg `executemany` of INSERTs of 11 columns in
                 `--load-batch`-row batches (default 5,000) on one connection, rows/s
  stream         one large result (`--stream-rows`, default 1M rows of (bigint, bigint,
                 text)) through one connection: asyncpg fetch and COPY TO STDOUT, the
                 median of `--stream-repeat` runs (measured first, before the writes)
  DataRow        the encoder alone, in process (six typical columns, text and binary)
  execute_point  in process (no server): `Session.execute_point` of the point select, us
                 of the calling thread's CPU time per call, on a fresh table and again
                 after an update storm (5,000 updates)

kudusql runs as a separate process (`python -m kudusql serve`; `--kudusql-src DIR` runs it
from another checkout, e.g. `git archive <commit>` unpacked, for before/after figures) so
client and server do not share a GIL; PostgreSQL 15 is initdb'ed in a temp dir (run as
the `postgres` user when started as root), listening on 127.0.0.1 only, with default
durability (fsync on), like kudusql's WAL (group commit). Both are stopped and removed at
the end.

    .venv/bin/python -m bench.wire_bench [--seconds 5] [--connections 16] [--client-procs 2]
                                         [--rows 100000] [--stream-rows 1000000]
                                         [--stream-repeat 3] [--load-batch 5000]
                                         [--only point,update,...] [--no-postgres]

A benchmark, not a test: it always exits 0 (it prints ratios against the targets of
issue 17 but does not fail on them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.common import Results, load_avg, load_kv

PG_BIN_DIRS = ["/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin",
               "/usr/lib/postgresql/17/bin", "/usr/local/bin", "/usr/bin"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 60) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not come up")


# -- servers ----------------------------------------------------------------------------------
class Kudusql:
    name = "kudusql"

    def __init__(self, root: str, src: str | None = None):
        self.dir = os.path.join(root, "kudusql")
        self.port = free_port()
        env = dict(os.environ)
        if src:            # another checkout's code (its directory first on sys.path)
            env["PYTHONPATH"] = os.path.abspath(src)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kudusql", "serve", "--data-dir", self.dir, "--port",
             str(self.port), "--max-connections", "64"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            cwd=os.path.abspath(src) if src else None)
        wait_port(self.port)
        self.kw = {"host": "127.0.0.1", "port": self.port, "user": "kudusql",
                   "database": "kudusql"}

    def ddl(self, name: str, cols: str, key: str) -> str:
        return f"CREATE TABLE {name} ({cols}, PRIMARY KEY ({key})) " \
               f"PARTITION BY HASH ({key}) PARTITIONS 4"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Postgres:
    name = "postgres"

    def __init__(self, root: str, bindir: str):
        self.dir = os.path.join(root, "pg")
        self.port = free_port()
        self.bindir = bindir
        as_root = os.geteuid() == 0
        self.prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
        os.makedirs(self.dir)
        if as_root:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            os.chmod(root, 0o755)
        subprocess.run(self.prefix + [os.path.join(bindir, "initdb"), "-D",
                                      os.path.join(self.dir, "data"), "-A", "trust", "-U",
                                      "postgres"], check=True, capture_output=True)
        self.proc = subprocess.Popen(
            self.prefix + [os.path.join(bindir, "postgres"), "-D",
                           os.path.join(self.dir, "data"), "-p", str(self.port), "-h",
                           "127.0.0.1", "-k", self.dir, "-c", "max_connections=100"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)   # its own group: stop() signals postgres, not just runuser
        wait_port(self.port)
        time.sleep(0.5)
        self.kw = {"host": "127.0.0.1", "port": self.port, "user": "postgres",
                   "database": "postgres"}

    def ddl(self, name: str, cols: str, key: str) -> str:
        return f"CREATE TABLE {name} ({cols}, PRIMARY KEY ({key}))"

    def stop(self) -> None:
        # runuser does not pass SIGINT on to postgres: signal the whole group, else postgres
        # outlives the run until it notices its lock file is gone (up to a minute later).
        try:
            os.killpg(self.proc.pid, signal.SIGINT)     # fast shutdown
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        except ProcessLookupError:
            pass


def find_postgres() -> str | None:
    for d in PG_BIN_DIRS:
        if os.path.exists(os.path.join(d, "postgres")) and \
                os.path.exists(os.path.join(d, "initdb")):
            return d
    return None


# -- load ---------------------------------------------------------------------------------------
LOAD_COLS = ("k BIGINT NOT NULL, a INT, b BIGINT, c DOUBLE PRECISION, d VARCHAR(32), "
             "e VARCHAR(32), f BOOLEAN, g DATE, h TIMESTAMP, i NUMERIC(12, 2), j VARCHAR(32)")


async def load(server, rows: int, stream_rows: int) -> None:
    import asyncpg
    c = await asyncpg.connect(**server.kw)
    try:
        for name, cols in (("kv", "k BIGINT NOT NULL, v BIGINT, s VARCHAR(32)"),
                           ("kv_ins", "k BIGINT NOT NULL, v BIGINT, s VARCHAR(32)"),
                           ("big", "k BIGINT NOT NULL, v BIGINT, s VARCHAR(32)"),
                           ("load11", LOAD_COLS)):
            await c.execute(server.ddl(name, cols, "k"))
        for name, n in (("kv", rows), ("big", stream_rows)):
            step = 100_000
            for lo in range(0, n, step):
                recs = [(k, k % 1000, f"value-{k}") for k in range(lo, min(n, lo + step))]
                await c.copy_records_to_table(name, records=recs)
    finally:
        await c.close()


# -- client processes -------------------------------------------------------------------------
def zipfian(n: int, size: int, rng: np.random.Generator, theta: float = 0.99) -> np.ndarray:
    """YCSB's scrambled Zipfian key choice (Gray et al.'s generator, then FNV-1a-64 of
    the rank modulo n, so the hot keys are spread over the key space) over 0..n-1."""
    i = np.arange(1, n + 1, dtype=np.float64)
    zetan = float(np.sum(i ** -theta))
    zeta2 = 1 + 0.5 ** theta
    alpha = 1 / (1 - theta)
    eta = (1 - (2 / n) ** (1 - theta)) / (1 - zeta2 / zetan)
    u = rng.random(size)
    uz = u * zetan
    rank = (n * (eta * u - eta + 1) ** alpha).astype(np.int64)
    rank = np.where(uz < 1, 0, np.where(uz < zeta2, 1, rank))
    rank = np.clip(rank, 0, n - 1).astype(np.uint64)
    h = np.full(size, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for shift in range(0, 64, 8):            # FNV-1a over the rank's 8 bytes
            h ^= (rank >> np.uint64(shift)) & np.uint64(0xFF)
            h *= np.uint64(0x100000001B3)
    return (h % np.uint64(n)).astype(np.int64)


READ = "SELECT v, s FROM kv WHERE k = $1"
WORKLOADS = {
    # name: (statements, read fraction or None, key choice)
    "point select": ("point",),
    "update": ("update",),
    "insert": ("insert",),
    "YCSB-A (50/50)": ("ycsb", 0.5),
    "YCSB-B (95/5)": ("ycsb", 0.95),
    "YCSB-C (100/0)": ("ycsb", 1.0),
}


async def _client(kw: dict, workload: tuple, conns: int, seconds: float, start_at: float,
                  rows: int, wid_base: int) -> dict:
    import asyncpg
    pool = [await asyncpg.connect(**kw) for _ in range(conns)]
    lat: list[float] = []
    errors = 0
    kind = workload[0]
    span = {}

    async def worker(c, wid: int):
        nonlocal errors
        rng = np.random.default_rng(wid)
        m = 400_000
        keys = (zipfian(rows, m, rng) if kind == "ycsb" else rng.integers(0, rows, m)).tolist()
        reads = (rng.random(m) < workload[1]).tolist() if kind == "ycsb" else None
        read = await c.prepare(READ)
        if kind == "update":
            write = await c.prepare("UPDATE kv SET v = v + 1 WHERE k = $1")
        elif kind == "insert":
            write = await c.prepare("INSERT INTO kv_ins VALUES ($1, $2, $3)")
        else:
            write = await c.prepare("UPDATE kv SET s = $2 WHERE k = $1")
        await asyncio.sleep(max(0.0, start_at - time.time()))
        stop = time.perf_counter() + seconds
        i = 0
        x16 = "x" * 16
        while time.perf_counter() < stop:
            j = i % m
            t0 = time.perf_counter()
            try:
                if kind == "point" or (kind == "ycsb" and reads[j]):
                    await read.fetch(keys[j])
                elif kind == "update":
                    await write.fetch(keys[j])
                elif kind == "insert":
                    await write.fetch(wid * 10**9 + i, i, x16)
                else:
                    await write.fetch(keys[j], f"u{i:015d}")
            except asyncpg.PostgresError:
                errors += 1
            lat.append(time.perf_counter() - t0)
            i += 1

    async def timed():
        await asyncio.sleep(max(0.0, start_at - time.time()))
        c0, t0 = time.process_time(), time.perf_counter()
        span["start"] = (c0, t0)

    tasks = [worker(c, wid_base + i) for i, c in enumerate(pool)]
    await asyncio.gather(timed(), *tasks)
    c0, t0 = span["start"]
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    for c in pool:
        await c.close()
    return {"ops": len(lat), "lat": np.array(lat, dtype=np.float32), "errors": errors,
            "cpu": cpu, "wall": wall}


def _client_process(q, *args) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    try:
        q.put(asyncio.run(_client(*args)))
    except BaseException as e:  # noqa: BLE001 - reported by the parent
        q.put({"error": repr(e)})


def server_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system, and system alone: the kernel's share) of the server
    process and its children (PostgreSQL's backends) so far."""
    import psutil
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    total = system = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
        system += t.system
    return total, system


def closed_loop(server, workload: tuple, args, wid_base: int) -> dict:
    """`args.connections` connections over `args.client_procs` processes, each running
    the workload back to back for `args.seconds`: ops/s, latencies, client CPU."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = max(1, min(args.client_procs, args.connections))
    per = [args.connections // procs + (1 if i < args.connections % procs else 0)
           for i in range(procs)]
    start_at = time.time() + 3.0 + 0.15 * args.connections / procs
    ps = [ctx.Process(target=_client_process,
                      args=(q, server.kw, workload, n, args.seconds, start_at, args.rows,
                            wid_base + 1000 * i))
          for i, n in enumerate(per)]
    for p in ps:
        p.start()
    time.sleep(max(0.0, start_at - time.time()))
    cpu0, t0 = server_cpu(server.proc.pid), time.time()
    time.sleep(args.seconds)
    cpu1, t1 = server_cpu(server.proc.pid), time.time()
    outs = [q.get(timeout=args.seconds + 120) for _ in ps]
    for p in ps:
        p.join(30)
    bad = [o["error"] for o in outs if "error" in o]
    if bad:
        raise RuntimeError(f"client process failed: {bad[0]}")
    lat = np.concatenate([o["lat"] for o in outs])
    wall = max(o["wall"] for o in outs)
    rate = sum(o["ops"] for o in outs) / wall
    return {"rate": rate,
            "server_us": (cpu1[0] - cpu0[0]) / max(rate * (t1 - t0), 1) * 1e6,
            "server_sys_us": (cpu1[1] - cpu0[1]) / max(rate * (t1 - t0), 1) * 1e6,
            "p50": float(np.percentile(lat, 50)) * 1000,
            "p99": float(np.percentile(lat, 99)) * 1000,
            "errors": sum(o["errors"] for o in outs),
            "client_cpu": sum(o["cpu"] for o in outs) / wall}


# -- a driver's batch load ----------------------------------------------------------------------
async def executemany_load(server, batch: int, seconds: float) -> float:
    """rows/s of asyncpg executemany batches of 11-column INSERTs (at least one batch, then
    more until `seconds` have passed)."""
    import datetime
    import decimal

    import asyncpg
    c = await asyncpg.connect(**server.kw)
    try:
        stmt = "INSERT INTO load11 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        d0 = datetime.date(2020, 1, 1)
        t0 = datetime.datetime(2020, 1, 1)
        total, k = 0, 0
        start = time.perf_counter()
        while total == 0 or time.perf_counter() - start < seconds:
            recs = [(k + i, i, k + i * 7, i * 0.5, f"name-{i}", "abcdefgh", i % 2 == 0,
                     d0 + datetime.timedelta(days=i % 1000),
                     t0 + datetime.timedelta(seconds=i), decimal.Decimal(i) / 100,
                     "comment") for i in range(batch)]
            await c.executemany(stmt, recs)
            k += batch
            total += batch
        return total / (time.perf_counter() - start)
    finally:
        await c.close()


async def stream(server, n: int, repeat: int) -> tuple[float, float]:
    """(fetch rows/s, COPY TO rows/s), each the median of `repeat` runs: one run of either
    swings by +-30% on a shared machine (client-side decoding and GC pauses)."""
    import asyncpg
    c = await asyncpg.connect(**server.kw)
    fetch_rates, copy_rates = [], []
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            rows = await c.fetch("SELECT k, v, s FROM big")
            fetch_rates.append(len(rows) / (time.perf_counter() - t0))
            assert len(rows) == n, (len(rows), n)
            del rows
            received = 0

            async def sink(chunk: bytes) -> None:   # count and drop (no file I/O measured)
                nonlocal received
                received += len(chunk)

            t0 = time.perf_counter()
            await c.copy_from_query("SELECT k, v, s FROM big", output=sink)
            copy_rates.append(n / (time.perf_counter() - t0))
            assert received > 0
        return float(np.median(fetch_rates)), float(np.median(copy_rates))
    finally:
        await c.close()


def run_server(server, args, out: dict) -> None:
    t0 = time.perf_counter()
    asyncio.run(load(server, args.rows, args.stream_rows if "stream" in args.only else 0))
    print(f"  {server.name}: loaded {args.rows:,} rows in {time.perf_counter() - t0:.1f}s",
          flush=True)
    # Streaming first: after the write workloads both servers are busy with their own
    # background work for a while (kudusql flushes and compacts what was just written,
    # PostgreSQL writes back and checkpoints), which would be measured as streaming speed.
    if "stream" in args.only:
        out["stream"] = asyncio.run(stream(server, args.stream_rows, args.stream_repeat))
        print(f"  {server.name} stream: fetch {out['stream'][0]:,.0f} rows/s, "
              f"COPY TO {out['stream'][1]:,.0f} rows/s", flush=True)
    for n, (name, workload) in enumerate(WORKLOADS.items()):
        if _short(name) not in args.only:
            continue
        r = closed_loop(server, workload, args, 100_000 * (n + 1))
        out[name] = r
        print(f"  {server.name} {name}: {r['rate']:,.0f} ops/s p50 {r['p50']:.2f} ms "
              f"p99 {r['p99']:.2f} ms, server CPU {r['server_us']:.1f} us/op "
              f"({r['server_sys_us']:.1f} kernel), "
              f"client CPU {r['client_cpu']:.2f}"
              + (f" ({r['errors']} errors)" if r["errors"] else ""), flush=True)
    if "executemany" in args.only:
        out["executemany"] = asyncio.run(executemany_load(server, args.load_batch,
                                                          args.seconds))
        print(f"  {server.name} executemany: {out['executemany']:,.0f} rows/s", flush=True)


def _short(name: str) -> str:
    return {"point select": "point"}.get(name, name.split(" ")[0].lower())


def encoding(n: int) -> dict[str, float]:
    """The hot path alone, in-process: DataRow bytes for n rows of six typical columns
    (bigint, text, double, numeric(15,2), date, timestamp), text and binary, in 16k-row
    batches; and the cost of a one-row batch (a point query's result)."""
    import pyarrow as pa

    from wire import pg_types as T
    rng = np.random.default_rng(0)
    t = pa.table({"k": np.arange(n), "s": pa.array([f"name{i}" for i in range(n)]),
                  "f": rng.random(n),
                  "m": pa.array(np.arange(n)).cast(pa.decimal128(22, 2))
                  .cast(pa.decimal128(15, 2)),
                  "d": pa.array(np.arange(n, dtype=np.int32) % 20000).cast(pa.date32()),
                  "ts": pa.array(np.arange(n) * 1000003, pa.timestamp("us"))})
    out = {}
    for fmt, name in ((0, "text"), (1, "binary")):
        t0 = time.perf_counter()
        for b in t.to_batches(max_chunksize=16384):
            T.data_rows(b, [fmt] * 6)
        out[name] = n / (time.perf_counter() - t0)
    one = t.slice(0, 1).combine_chunks().to_batches()[0]
    t0 = time.perf_counter()
    for _ in range(2000):
        T.data_rows(one, [1] * 6)
    out["one_row_us"] = (time.perf_counter() - t0) / 2000 * 1e6
    return out


def point_in_process(rows: int, calls: int = 20_000, storm: int = 5_000) -> tuple:
    """us per `Session.execute_point` of the point select on a fresh table, and after
    `storm` single-row UPDATEs by key (uniform keys) through the same session; then the
    engine's CPU per op in the wire's hot cases: a point read (`Session.point_read` +
    `Table.lookup_now`) and a key write (`key_write_values`, else `key_write_rows`, +
    `Table.write_small`), which
    server CPU per op minus these is the wire's share of."""
    from kudusql.session import Database
    root = tempfile.mkdtemp(prefix="kudusql-point-")
    try:
        with Database.open(os.path.join(root, "db")) as db:
            s, t = load_kv(db, rows)
            rng = random.Random(1)
            keys = [rng.randrange(rows) for _ in range(calls)]
            s.execute(READ, [0])
            assert s.execute_point(READ, [0]) is not None, "not a point read"

            def timed() -> float:
                # this thread's CPU time: on a shared machine, wall time would also count
                # the time the thread waited for a core
                t0 = time.thread_time()
                for k in keys:
                    s.execute_point(READ, [k])
                return (time.thread_time() - t0) / calls * 1e6

            before = timed()
            for _ in range(storm):
                s.execute("UPDATE kv SET v = v + 1 WHERE k = $1", [rng.randrange(rows)])
            after = timed()
            # the engine's share of the wire's hot cases (wire/fastpath.py): what a point
            # read and a key write call into, CPU per op on this thread
            t0 = time.thread_time()
            for k in keys:
                fast, table = s.point_read(READ, [k])
                table.lookup_now(fast.key_values([k]), fast.columns or None)
            read_us = (time.thread_time() - t0) / calls * 1e6
            from engine.tablet.write_op import OpType
            from planner.dml import update_data
            upd = "UPDATE kv SET v = v + 1 WHERE k = $1"
            n = 2000
            t0 = time.thread_time()
            for k in keys[:n]:      # as wire/fastpath.py `key_write`: plain values first
                found = s.key_write_values(upd, [k])
                if found is not None:
                    row, table = found
                    table.write_small(OpType.UPDATE, dict(zip(["k", "v"], ([v] for v in row))))
                else:
                    rows_, table = s.key_write_rows(upd, [k])
                    table.write_small(OpType.UPDATE, update_data(table, rows_, ["v"]))
            update_us = (time.thread_time() - t0) / n * 1e6
            return before, after, read_us, update_us
    finally:
        shutil.rmtree(root, ignore_errors=True)


ALL = ("point", "update", "insert", "ycsb-a", "ycsb-b", "ycsb-c", "executemany", "stream",
       "encoding", "inprocess")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="per workload and server")
    ap.add_argument("--connections", type=int, default=16, help="client connections")
    ap.add_argument("--client-procs", type=int, default=2,
                    help="client processes the connections are spread over")
    ap.add_argument("--rows", type=int, default=100_000, help="rows in the point-op table")
    ap.add_argument("--stream-repeat", type=int, default=3,
                    help="streaming runs per server (the median is reported)")
    ap.add_argument("--stream-rows", type=int, default=1_000_000,
                    help="rows of the streamed result")
    ap.add_argument("--load-batch", type=int, default=5000, help="rows per executemany")
    ap.add_argument("--only", default=",".join(ALL),
                    help="comma-separated subset of " + ", ".join(ALL))
    ap.add_argument("--kudusql-src", default=None,
                    help="run the kudusql server from this checkout (before/after figures)")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL anchor")
    args = ap.parse_args(argv)
    args.only = {w.strip() for w in args.only.split(",") if w.strip()}
    try:
        import uvloop  # noqa: F401
        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    print(f"wire benchmark: {args.connections} connections over {args.client_procs} client "
          f"processes ({loop}), {args.seconds}s per workload; {load_avg()}", flush=True)
    root = tempfile.mkdtemp(prefix="kudusql-wire-bench-")
    results: dict[str, dict] = {}
    server_work = args.only - {"encoding", "inprocess"}
    try:
        servers = [("kudusql", lambda: Kudusql(root, args.kudusql_src))]
        bindir = None if args.no_postgres else find_postgres()
        if bindir:
            servers.append(("postgres", lambda: Postgres(root, bindir)))
        else:
            print("  (no PostgreSQL binaries found: kudusql only)")
        for name, make in servers if server_work else []:
            server = make()
            try:
                results[name] = {}
                run_server(server, args, results[name])
            finally:
                server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    res = Results()
    k, p = results.get("kudusql", {}), results.get("postgres")
    targets = {"point select": 0.5, "update": 0.25, "insert": 0.25, "YCSB-A (50/50)": 0.3}
    for name in WORKLOADS:
        if name not in k:
            continue
        r = k[name]
        res.add(f"{name} ops/s ({args.connections} conns)", f"{r['rate']:,.0f}")
        res.add(f"  {name} p50 / p99 ms", f"{r['p50']:.2f} / {r['p99']:.2f}",
                "p99 <= 3 ms" if name == "point select" else "-",
                r["p99"] <= 3 if name == "point select" else None)
        res.add(f"  {name} server CPU per op (us)", f"{r['server_us']:.1f}"
                + (f" (postgres {p[name]['server_us']:.1f})" if p else ""),
                "<= 30 us" if name == "point select" else "-",
                r["server_us"] <= 30 if name == "point select" else None)
        res.add(f"  {name} client CPU (cores)", f"{r['client_cpu']:.2f}"
                + (f" (postgres run {p[name]['client_cpu']:.2f})" if p else ""))
        if p:
            ratio = r["rate"] / p[name]["rate"]
            t = targets.get(name)
            res.add(f"  {name}: kudusql / postgres", f"{ratio:.2f}x",
                    f">= {t}x" if t else f"postgres {p[name]['rate']:,.0f} ops/s",
                    ratio >= t if t else None)
            res.add(f"  {name}: postgres ops/s, p50 / p99 ms", f"{p[name]['rate']:,.0f}",
                    f"{p[name]['p50']:.2f} / {p[name]['p99']:.2f}")
    if "executemany" in k:
        res.add(f"executemany load, {args.load_batch}-row batches, 11 cols (rows/s)",
                f"{k['executemany']:,.0f}")
        if p:
            ratio = k["executemany"] / p["executemany"]
            res.add("  executemany: kudusql / postgres", f"{ratio:.2f}x", ">= 1x", ratio >= 1)
            res.add("  executemany: postgres rows/s", f"{p['executemany']:,.0f}")
    if "stream" in k:
        res.add(f"stream {args.stream_rows:,} rows, asyncpg fetch (rows/s)",
                f"{k['stream'][0]:,.0f}")
        if p:
            res.add("  fetch: kudusql / postgres", f"{k['stream'][0] / p['stream'][0]:.2f}x",
                    f"postgres {p['stream'][0]:,.0f} rows/s")
        res.add("stream, COPY TO STDOUT (rows/s)", f"{k['stream'][1]:,.0f}")
        if p:
            res.add("  COPY: kudusql / postgres", f"{k['stream'][1] / p['stream'][1]:.2f}x",
                    f"postgres {p['stream'][1]:,.0f} rows/s")
    if "encoding" in args.only:
        enc = encoding(args.stream_rows)
        res.add("DataRow encoding, 6 columns, text (rows/s)", f"{enc['text']:,.0f}")
        res.add("DataRow encoding, 6 columns, binary (rows/s)", f"{enc['binary']:,.0f}")
        res.add("  one-row batch, 6 columns (us)", f"{enc['one_row_us']:.1f}")
    if "inprocess" in args.only:
        before, after, read_us, update_us = point_in_process(args.rows)
        res.add("execute_point in process (us)", f"{before:.1f}", "<= 15 us", before <= 15)
        res.add("  after 5,000 updates (us)", f"{after:.1f}",
                f"<= 1.2x ({after / before:.2f}x)", after <= 1.2 * before)
        res.add("engine CPU of a hot point read (us)", f"{read_us:.1f}")
        res.add("engine CPU of a hot key write (us)", f"{update_us:.1f}")
        for name, eng in (("point select", read_us), ("update", update_us)):
            if name in k:
                res.add(f"  {name}: wire's share (server CPU - engine, us/op)",
                        f"{k[name]['server_us'] - eng:.1f}")
    res.report("wire server (asyncpg)", strict=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
