"""Wire-server benchmark: asyncpg against `kudusql serve` and, in the same run, a local
PostgreSQL (the anchor) when its binaries are installed.

For each server, with `--connections` asyncpg connections (default 16) running for
`--seconds` each:

  1. point select   SELECT v, s FROM kv WHERE k = $1        (random existing keys)
  2. update         UPDATE kv SET v = v + 1 WHERE k = $1
  3. insert         INSERT INTO kv_ins VALUES ($1, $2, $3)   (fresh keys)

ops/s and p50 / p99 latency; and, measured first (before the write workloads), 4. streaming one
large result (`--stream-rows`, default 1M rows of (bigint, bigint, text)) through one
connection: rows/s with asyncpg's fetch (binary, decoded into Records) and with COPY TO
STDOUT (text, not decoded), the median of `--stream-repeat` runs each. The summary prints
kudusql / PostgreSQL ratios, and 5. the DataRow encoder alone (in-process rows/s for six
typical columns, text and binary, and the cost of a one-row batch).

kudusql runs as a separate process (`python -m kudusql serve`) so client and server do not
share a GIL; PostgreSQL 15 is initdb'ed in a temp dir (run as the `postgres` user when
started as root), listening on 127.0.0.1 only, with default durability (fsync on), like
kudusql's WAL (group commit). Both are stopped and removed at the end.

    .venv/bin/python -m bench.wire_bench [--seconds 5] [--connections 16]
                                         [--rows 100000] [--stream-rows 1000000]
                                         [--stream-repeat 3]

A benchmark, not a test: it always exits 0 (figures have no targets).
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

from bench.common import Results, load_avg

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

    def __init__(self, root: str):
        self.dir = os.path.join(root, "kudusql")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kudusql", "serve", "--data-dir", self.dir, "--port",
             str(self.port), "--max-connections", "64"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        time.sleep(0.5)
        self.kw = {"host": "127.0.0.1", "port": self.port, "user": "postgres",
                   "database": "postgres"}

    def ddl(self, name: str, cols: str, key: str) -> str:
        return f"CREATE TABLE {name} ({cols}, PRIMARY KEY ({key}))"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)     # fast shutdown
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def find_postgres() -> str | None:
    for d in PG_BIN_DIRS:
        if os.path.exists(os.path.join(d, "postgres")) and \
                os.path.exists(os.path.join(d, "initdb")):
            return d
    return None


# -- workloads --------------------------------------------------------------------------------
async def load(server, rows: int, stream_rows: int) -> None:
    import asyncpg
    c = await asyncpg.connect(**server.kw)
    try:
        for name, cols in (("kv", "k BIGINT NOT NULL, v BIGINT, s VARCHAR(32)"),
                           ("kv_ins", "k BIGINT NOT NULL, v BIGINT, s VARCHAR(32)"),
                           ("big", "k BIGINT NOT NULL, v BIGINT, s VARCHAR(32)")):
            await c.execute(server.ddl(name, cols, "k"))
        for name, n in (("kv", rows), ("big", stream_rows)):
            step = 100_000
            for lo in range(0, n, step):
                recs = [(k, k % 1000, f"value-{k}") for k in range(lo, min(n, lo + step))]
                await c.copy_records_to_table(name, records=recs)
    finally:
        await c.close()


async def closed_loop(server, conns: int, seconds: float, make_args, sql: str):
    """`conns` connections each running `sql` back to back; (ops, latencies in s)."""
    import asyncpg
    pool = [await asyncpg.connect(**server.kw) for _ in range(conns)]
    lat: list[float] = []
    stop = time.perf_counter() + seconds
    errors = 0

    async def worker(c, wid: int):
        nonlocal errors
        stmt = await c.prepare(sql)
        rng = random.Random(wid)
        i = 0
        while time.perf_counter() < stop:
            args = make_args(rng, wid, i)
            t0 = time.perf_counter()
            try:
                await stmt.fetch(*args)
            except asyncpg.PostgresError:
                errors += 1
            lat.append(time.perf_counter() - t0)
            i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c, i) for i, c in enumerate(pool)))
    elapsed = time.perf_counter() - t0
    for c in pool:
        await c.close()
    return len(lat) / elapsed, np.array(lat), errors


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


async def run_server(server, args, out: dict) -> None:
    t0 = time.perf_counter()
    await load(server, args.rows, args.stream_rows)
    print(f"  {server.name}: loaded {args.rows:,} + {args.stream_rows:,} rows in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    rows = args.rows
    workloads = {
        "point select": ("SELECT v, s FROM kv WHERE k = $1",
                         lambda rng, w, i: (rng.randrange(rows),)),
        "update": ("UPDATE kv SET v = v + 1 WHERE k = $1",
                   lambda rng, w, i: (rng.randrange(rows),)),
        "insert": ("INSERT INTO kv_ins VALUES ($1, $2, $3)",
                   lambda rng, w, i: (w * 10**9 + i, i, "x" * 16)),
    }
    # Streaming first: after the write workloads both servers are busy with their own
    # background work for a while (kudusql flushes and compacts what was just written,
    # PostgreSQL writes back and checkpoints), which would be measured as streaming speed.
    out["stream"] = await stream(server, args.stream_rows, args.stream_repeat)
    print(f"  {server.name} stream: fetch {out['stream'][0]:,.0f} rows/s, "
          f"COPY TO {out['stream'][1]:,.0f} rows/s", flush=True)
    for name, (sql, mk) in workloads.items():
        rate, lat, errors = await closed_loop(server, args.connections, args.seconds, mk, sql)
        out[name] = (rate, np.percentile(lat, 50) * 1000, np.percentile(lat, 99) * 1000)
        print(f"  {server.name} {name}: {rate:,.0f} ops/s p50 {out[name][1]:.2f} ms "
              f"p99 {out[name][2]:.2f} ms" + (f" ({errors} errors)" if errors else ""),
              flush=True)


def encoding(n: int) -> dict[str, float]:
    """The hot path alone, in-process: DataRow bytes for n rows of six typical columns
    (bigint, text, double, numeric(15,2), date, timestamp), text and binary, in 16k-row
    batches; and the cost of a one-row batch (a point query's result)."""
    import pyarrow as pa

    from wire import types as T
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="per workload and server")
    ap.add_argument("--connections", type=int, default=16, help="asyncpg connections")
    ap.add_argument("--rows", type=int, default=100_000, help="rows in the point-op table")
    ap.add_argument("--stream-repeat", type=int, default=3,
                    help="streaming runs per server (the median is reported)")
    ap.add_argument("--stream-rows", type=int, default=1_000_000,
                    help="rows of the streamed result")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL anchor")
    args = ap.parse_args(argv)
    print(f"wire benchmark: {args.connections} connections, {args.seconds}s per workload; "
          f"{load_avg()}", flush=True)
    root = tempfile.mkdtemp(prefix="kudusql-wire-bench-")
    results: dict[str, dict] = {}
    try:
        servers = [("kudusql", lambda: Kudusql(root))]
        bindir = None if args.no_postgres else find_postgres()
        if bindir:
            servers.append(("postgres", lambda: Postgres(root, bindir)))
        else:
            print("  (no PostgreSQL binaries found: kudusql only)")
        for name, make in servers:
            server = make()
            try:
                results[name] = {}
                asyncio.run(run_server(server, args, results[name]))
            finally:
                server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    enc = encoding(args.stream_rows)
    res = Results()
    res.add("DataRow encoding, 6 columns, text (rows/s)", f"{enc['text']:,.0f}")
    res.add("DataRow encoding, 6 columns, binary (rows/s)", f"{enc['binary']:,.0f}")
    res.add("  one-row batch, 6 columns (us)", f"{enc['one_row_us']:.1f}")
    k, p = results["kudusql"], results.get("postgres")
    for name in ("point select", "update", "insert"):
        rate, p50, p99 = k[name]
        res.add(f"{name} ops/s ({args.connections} conns)", f"{rate:,.0f}")
        res.add(f"  {name} p50 / p99 ms", f"{p50:.2f} / {p99:.2f}")
        if p:
            res.add(f"  {name}: kudusql / postgres", f"{rate / p[name][0]:.2f}x",
                    f"postgres {p[name][0]:,.0f} ops/s, p50 {p[name][1]:.2f} ms")
    res.add(f"stream {args.stream_rows:,} rows, asyncpg fetch (rows/s)",
            f"{k['stream'][0]:,.0f}")
    if p:
        res.add("  fetch: kudusql / postgres", f"{k['stream'][0] / p['stream'][0]:.2f}x",
                f"postgres {p['stream'][0]:,.0f} rows/s")
    res.add("stream, COPY TO STDOUT (rows/s)", f"{k['stream'][1]:,.0f}")
    if p:
        res.add("  COPY: kudusql / postgres", f"{k['stream'][1] / p['stream'][1]:.2f}x",
                f"postgres {p['stream'][1]:,.0f} rows/s")
    res.report("wire server (asyncpg)", strict=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
