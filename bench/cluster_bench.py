"""Cluster benchmark: a local 3-tablet-server cluster against the embedded engine, same
data, same run (issue 13's figures).

  1. bulk load      rows/s of Table.insert in 50,000-row batches of (bigint, bigint, text,
                    double), 4 hash partitions: embedded Catalog (the anchor), cluster RF=1,
                    cluster RF=3 (through engine/client, DoPut to tablet leaders)
  2. point ops      asyncpg, `--connections` connections (default 16), `--seconds` each:
                    point SELECT by key and single-row INSERT of fresh keys, against
                    `kudusql serve --data-dir` (embedded, the anchor) and the cluster's
                    SQL front end (RF=3 table)
  3. failover gap   4 connections insert single rows into an RF=3 table; `--kills` times
                    the tablet server leading the most tablets is killed with SIGKILL and
                    restarted; the gap is the longest time any connection waited for an
                    acknowledgement across the kill. Median and max.

Default Raft timing (100 ms ticks, election after 1-2 s of silence); fsync on everywhere.
Targets (issue 13): RF=3 bulk load >= 0.5x embedded; failover gap <= 3 s. TPC-H SF1 on the
cluster is not measured here (see docs/cluster.md).

    .venv/bin/python -m bench.cluster_bench [--rows 200000] [--seconds 5]
                                            [--connections 16] [--kills 10]

A benchmark, not a test: it always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa

from bench.common import load_avg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _cli(*args, timeout=180) -> str:
    r = subprocess.run([sys.executable, "-m", "kudusql.cli", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise SystemExit(f"kudusql {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def _batches(rows: int, size: int = 50_000):
    rng = np.random.default_rng(1)
    for lo in range(0, rows, size):
        n = min(size, rows - lo)
        k = np.arange(lo, lo + n, dtype=np.int64)
        yield pa.table({"k": k, "a": rng.integers(0, 1 << 40, n),
                        "s": pa.array([f"row-{i}" for i in range(lo, lo + n)]),
                        "d": rng.random(n)})


DDL = ("CREATE TABLE {name} (k BIGINT PRIMARY KEY, a BIGINT, s TEXT, d DOUBLE) "
       "PARTITION BY HASH (k) PARTITIONS 4 WITH (replication_factor = {rf})")


def _load(session, catalog, name: str, rf: int, rows: int) -> float:
    session.execute(DDL.format(name=name, rf=rf))
    t = catalog.table(name)
    t0 = time.perf_counter()
    for b in _batches(rows):
        r = t.insert(b)
        assert r.ok and r.num_applied == b.num_rows
    return rows / (time.perf_counter() - t0)


_NEXT_KEY = [10_000_000]  # fresh insert keys, across every run


async def _point_ops(port: int, table: str, seconds: float, conns: int, nkeys: int,
                     inserts: bool = True) -> tuple[float, float]:
    import asyncpg
    cs = [await asyncpg.connect(host="127.0.0.1", port=port, user="kudusql",
                                database="kudusql") for _ in range(conns)]
    try:
        async def run(kind: str) -> float:
            stop = time.monotonic() + seconds
            done = 0
            next_key = _NEXT_KEY

            async def worker(c):
                nonlocal done
                while time.monotonic() < stop:
                    if kind == "select":
                        await c.fetch(f"SELECT a, s FROM {table} WHERE k = $1",
                                      random.randrange(nkeys))
                    else:
                        next_key[0] += 1
                        await c.execute(f"INSERT INTO {table} VALUES ($1, 1, 'x', 0.5)",
                                        next_key[0])
                    done += 1
            t0 = time.monotonic()
            await asyncio.gather(*(worker(c) for c in cs))
            return done / (time.monotonic() - t0)
        sel = await run("select")
        return sel, (await run("insert") if inserts else 0.0)
    finally:
        for c in cs:
            await c.close()


def _wait_caught_up(data_dir: str, name: str, timeout: float = 60.0) -> None:
    """Until the restarted server answers and every replica it hosts has applied what its
    leader had committed when we first looked (so the next kill leaves a majority)."""
    from engine.rpc.rpc import RpcClient, read_secret_file
    from kudusql.cluster import cluster_status
    rpc = RpcClient(read_secret_file(os.path.join(data_dir, "rpc-secret")), 3)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            st = {p["name"]: p for p in cluster_status(data_dir)}
            me = st[name]
            if me.get("uuid"):
                mine = rpc.call(me["addr"], "status")["tablets"]
                lead_commit = {}
                for p in st.values():
                    if p["role"] == "tserver" and p.get("uuid") and p["name"] != name:
                        for tid, t in rpc.call(p["addr"], "status")["tablets"].items():
                            if t["role"] == "LEADER":
                                lead_commit[tid] = t["commit_index"]
                # (a replica that leads again, e.g. of an RF=1 tablet, is caught up)
                if mine and all(t["role"] == "LEADER" or (
                        tid in lead_commit and t["applied_index"] >= lead_commit[tid] - 50)
                        for tid, t in mine.items()):
                    return
            time.sleep(0.5)
    finally:
        rpc.close()


def _failover(data_dir: str, port: int, kills: int) -> list[float]:
    import psycopg
    from kudusql.cluster import cluster_status, restart_process

    def connect():
        return psycopg.connect(host="127.0.0.1", port=port, user="kudusql",
                               dbname="kudusql", autocommit=True)
    with connect() as c:
        c.execute("CREATE TABLE fo (k BIGINT PRIMARY KEY, v TEXT) PARTITION BY HASH (k) "
                  "PARTITIONS 3 WITH (replication_factor = 3)")
    stop = threading.Event()
    acks: list[list[float]] = [[] for _ in range(4)]

    def writer(w):
        conn = connect()
        i = 0
        while not stop.is_set():
            i += 1
            try:
                conn.execute("INSERT INTO fo VALUES (%s, 'x')", (w * 10**8 + i,))
                acks[w].append(time.monotonic())
            except psycopg.Error:
                if conn.closed:
                    conn = connect()
        conn.close()
    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(4)]
    for t in threads:
        t.start()
    gaps = []
    try:
        for _ in range(kills):
            time.sleep(3)
            st = cluster_status(data_dir)
            victim = max((p for p in st if p["role"] == "tserver" and p["alive"]),
                         key=lambda p: p["leads"] or 0)
            t_kill = time.monotonic()
            os.kill(victim["pid"], signal.SIGKILL)
            time.sleep(10)
            worst = 0.0
            for times in acks:
                before = [t for t in times if t <= t_kill]
                after = [t for t in times if t > t_kill]
                if not after:
                    worst = float("inf")
                    continue
                seq = [before[-1] if before else t_kill] + after
                worst = max(worst, max(b - a for a, b in zip(seq, seq[1:])))
            gaps.append(worst)
            print(f"  kill -9 {victim['name']} (leading {victim['leads']}): gap {worst:.2f} s",
                  flush=True)
            restart_process(data_dir, victim["name"])
            _wait_caught_up(data_dir, victim["name"])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    return gaps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--kills", type=int, default=10)
    args = ap.parse_args(argv)

    from engine.client.client import RemoteCatalog
    from engine.rpc.rpc import read_secret_file
    from kudusql.session import Database

    print(f"load average at start: {load_avg()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="kudusql-cluster-bench-")
    cdir, edir = os.path.join(tmp, "cluster"), os.path.join(tmp, "embedded")
    cport, eport = _free_port(), _free_port()
    server = None
    results = {}
    try:
        # 1. bulk load
        db = Database.open(edir)
        try:
            results["load_embedded"] = _load(db.session(), db.catalog, "bulk", 1, args.rows)
            db.session().execute(DDL.format(name="kv", rf=1))
            kv = db.catalog.table("kv")
            for b in _batches(100_000):
                kv.insert(b)
        finally:
            db.close()
        print(f"embedded bulk load: {results['load_embedded']:,.0f} rows/s", flush=True)
        _cli("cluster", "start", "--data-dir", cdir, "--port", str(cport))
        masters = [m["addr"] for m in __import__("json").load(
            open(os.path.join(cdir, "cluster.json")))["masters"]]
        cat = RemoteCatalog.connect(masters, read_secret_file(os.path.join(cdir,
                                                                           "rpc-secret")))
        cdb = Database(cat, None)
        try:
            s = cdb.session()
            for rf in (1, 3):
                results[f"load_rf{rf}"] = _load(s, cat, f"bulk{rf}", rf, args.rows)
                print(f"cluster RF={rf} bulk load: {results[f'load_rf{rf}']:,.0f} rows/s",
                      flush=True)
            s.execute(DDL.format(name="kv", rf=3))
            kv = cat.table("kv")
            for b in _batches(100_000):
                kv.insert(b)
        finally:
            cdb.close()
        # 2. point operations over the wire
        server = subprocess.Popen([sys.executable, "-m", "kudusql.cli", "serve", "--data-dir",
                                   edir, "--port", str(eport)], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                asyncio.run(_point_ops(eport, "kv", 0.01, 1, 10, inserts=False))
                break
            except OSError:
                time.sleep(0.1)
        for name, port in (("embedded", eport), ("cluster", cport)):
            sel, ins = asyncio.run(_point_ops(port, "kv", args.seconds, args.connections,
                                              100_000))
            results[f"select_{name}"], results[f"insert_{name}"] = sel, ins
            print(f"{name}: point select {sel:,.0f} ops/s, single-row insert {ins:,.0f} "
                  f"ops/s ({args.connections} connections)", flush=True)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        server = None
        # 3. failover gap
        gaps = _failover(cdir, cport, args.kills)
    finally:
        if server is not None:
            server.kill()
        try:
            _cli("cluster", "stop", "--data-dir", cdir)
        except BaseException:  # noqa: BLE001 - report what we have
            pass
    e = results["load_embedded"]
    print("\nsummary (same run, same data)")
    print(f"  bulk load RF=1 / embedded: {results['load_rf1'] / e:.2f}x "
          f"({results['load_rf1']:,.0f} vs {e:,.0f} rows/s)")
    print(f"  bulk load RF=3 / embedded: {results['load_rf3'] / e:.2f}x (target >= 0.5x)")
    print(f"  point select cluster / embedded: "
          f"{results['select_cluster'] / results['select_embedded']:.2f}x")
    print(f"  single-row insert cluster / embedded: "
          f"{results['insert_cluster'] / results['insert_embedded']:.2f}x")
    print(f"  failover gap over {len(gaps)} kills: median {statistics.median(gaps):.2f} s, "
          f"max {max(gaps):.2f} s (target <= 3 s)")
    print(f"load average at end: {load_avg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
