"""Cluster benchmark: a local 3-tablet-server cluster against the embedded engine, same
data, same run (issue 13's figures).

  bulk      rows/s of Table.insert in 50,000-row batches of (bigint, bigint, text, double),
            4 hash partitions, `--rows` per load, each table timed from after its CREATE
            (which returns once the tablets have leaders): embedded Catalog (the anchor),
            cluster RF=1, cluster RF=3 (engine/client, DoPut to tablet leaders), in
            `--rounds` interleaved rounds so that a burst of load from other processes
            hits all three alike; medians of the rates and of the per-round ratios
  tpch      (only with `--only ...,tpch`) TPC-H at `--tpch-sf` (default 1) from the
            parquet cache in `--tpch-data` (bench/tpch_bench.py's layout, generated if
            missing): loaded embedded and into RF=3 tables on the cluster, every MemRowSet
            flushed on both, then each query on both (best of `--tpch-repeat`), answers
            checked against DuckDB; the geomean of the per-query ratios cluster / embedded
  ops       asyncpg, `--connections` connections (default 16), `--seconds` each: point
            SELECT by key and single-row INSERT of fresh keys, against `kudusql serve
            --data-dir` (embedded, the anchor) and the cluster's SQL front end (RF=3 table)
  failover  4 connections insert single rows into an RF=3 table; `--kills` times the
            tablet server leading the most tablets is killed with SIGKILL and restarted;
            the gap is the longest time any connection waited for an acknowledgement
            across the kill. Median and max.

Default Raft timing (100 ms ticks, election after 1-2 s of silence); fsync on everywhere.
Targets (issue 13): RF=3 bulk load >= 0.5x embedded; failover gap <= 3 s; TPC-H SF1
geomean cluster / embedded <= 1.5x. The TPC-H front end runs in this process (a Session
over the remote catalog, as `kudusql serve --masters` runs it), as the embedded one does.

    .venv/bin/python -m bench.cluster_bench [--rows 200000] [--rounds 3] [--seconds 5]
                          [--connections 16] [--kills 10] [--only bulk,ops,failover]
    .venv/bin/python -m bench.cluster_bench --only tpch --tpch-sf 1 --tpch-data bench-data

A benchmark, not a test: it always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
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
from engine import errors

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


def _load(session, catalog, name: str, rf: int, batches: list[pa.Table]) -> float:
    """rows/s of inserting `batches` into a new table (timed from after its CREATE)."""
    session.execute(DDL.format(name=name, rf=rf))
    t = catalog.table(name)
    rows = sum(b.num_rows for b in batches)
    t0 = time.perf_counter()
    for b in batches:
        r = t.insert(b)
        assert r.ok and r.num_applied == b.num_rows
    return rows / (time.perf_counter() - t0)


def _bulk(edb, cdb, rows: int, rounds: int) -> dict[str, float]:
    """`rounds` rounds of (embedded, RF=1, RF=3) loads, interleaved so that a burst of
    load from other processes hits all three alike; each figure is the median of its
    rounds, each ratio the median of the rounds' ratios."""
    batches = list(_batches(rows))  # generated once, outside the timings
    runs: dict[str, list[float]] = {"embedded": [], "rf1": [], "rf3": []}
    for i in range(rounds):
        runs["embedded"].append(_load(edb.session(), edb.catalog, f"bulk_e{i}", 1, batches))
        for rf in (1, 3):
            runs[f"rf{rf}"].append(_load(cdb.session(), cdb.catalog, f"bulk{rf}_{i}", rf,
                                         batches))
        print(f"  round {i + 1}: embedded {runs['embedded'][-1]:,.0f}, RF=1 "
              f"{runs['rf1'][-1]:,.0f}, RF=3 {runs['rf3'][-1]:,.0f} rows/s", flush=True)
    out = {f"load_{k}": statistics.median(v) for k, v in runs.items()}
    for rf in (1, 3):
        out[f"ratio_rf{rf}"] = statistics.median(
            c / e for c, e in zip(runs[f"rf{rf}"], runs["embedded"]))
    return out


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
    from kudusql.cluster import cluster_status, rpc_client_for
    rpc = rpc_client_for(data_dir, 3)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                if _caught_up(rpc, cluster_status(data_dir), name):
                    return
            except errors.EngineError:
                pass  # the restarted server is still starting (or busy): ask again
            time.sleep(0.5)
    finally:
        rpc.close()


def _caught_up(rpc, status: list[dict], name: str) -> bool:
    st = {p["name"]: p for p in status}
    me = st[name]
    if not me.get("uuid"):
        return False
    mine = rpc.call(me["addr"], "status")["tablets"]
    lead_commit = {}
    for p in st.values():
        if p["role"] == "tserver" and p.get("uuid") and p["name"] != name:
            for tid, t in rpc.call(p["addr"], "status")["tablets"].items():
                if t["role"] == "LEADER":
                    lead_commit[tid] = t["commit_index"]
    # (a replica that leads again, e.g. of an RF=1 tablet, is caught up)
    return bool(mine) and all(t["role"] == "LEADER" or (
        tid in lead_commit and t["applied_index"] >= lead_commit[tid] - 50)
        for tid, t in mine.items())


def _failover(data_dir: str, port: int, kills: int, gaps: list[float]) -> None:
    """Append the gap of each of `kills` kills to `gaps` (kept if a later one fails)."""
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


def _tpch(edb, cdb, cluster_dir: str, sf: float, data: str, numbers: list[int],
          repeat: int) -> dict:
    """TPC-H at `sf`: the same parquet loaded embedded and into RF=3 tables on the cluster
    (Table.insert in 200,000-row batches, every MemRowSet flushed afterwards on both, so
    that both scan DiskRowSets), then each query on both, alternating, best of `repeat`;
    every answer is checked against DuckDB (tpch/oracle.py). The geomean of the per-query
    ratios cluster / embedded is the figure (target <= 1.5x)."""
    from bench.tpch_bench import timed
    from tpch.data import generate
    import pyarrow.parquet as pq
    from tpch.load import flush_table, insertable
    from tpch.oracle import compare_query, duckdb_answer, geometric_mean
    from tpch.queries import query
    from tpch.schema import TABLES, create_statement

    pq_dir = os.path.join(data, f"tpch-sf{sf:g}")  # bench/tpch_bench.py's cache layout
    files = generate(sf, pq_dir, log=lambda m: print(f"  {m}", flush=True))
    out: dict = {"queries": {}}
    for name, db in (("embedded", edb), ("cluster", cdb)):
        s = db.session()
        t0 = time.perf_counter()
        rows = 0
        for t in TABLES:
            s.execute(create_statement(t))  # RF=3 on the cluster (3 tablet servers)
            tbl = db.catalog.table(t)
            for f in files[t]:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=200_000):
                    r = tbl.insert(insertable(batch))
                    assert r.ok and r.num_applied == batch.num_rows, (t, r.row_errors[:3])
                    rows += batch.num_rows
        load_s = time.perf_counter() - t0
        if name == "embedded":
            for t in TABLES:
                flush_table(db.catalog, t)
        else:
            _flush_cluster(cluster_dir)
        out[f"load_{name}"] = rows / load_s
        print(f"  TPC-H SF{sf:g} load {name}: {rows:,} rows in {load_s:.1f} s "
              f"({rows / load_s:,.0f} rows/s)", flush=True)
    sessions = {"embedded": edb.session(), "cluster": cdb.session()}
    ratios = []
    for n in numbers:
        res = {}
        for name, s in sessions.items():
            o = timed(lambda s=s, n=n: s.execute(query(n))[-1].table, repeat)
            if o.error:
                print(f"  Q{n:02d} {name}: FAILED {o.error}", flush=True)
            res[name] = o
        e, c = res["embedded"], res["cluster"]
        if e.error or c.error:
            continue
        wrong = compare_query(n, c.table, duckdb_answer(pq_dir, n))
        ratio = c.seconds / e.seconds
        ratios.append(ratio)
        out["queries"][n] = (e.seconds, c.seconds)
        print(f"  Q{n:02d}  embedded {e.seconds * 1000:9,.0f} ms  cluster "
              f"{c.seconds * 1000:9,.0f} ms  {ratio:5.2f}x"
              f"{'  WRONG: ' + wrong[0] if wrong else ''}", flush=True)
    out["geomean"], out["ran"] = geometric_mean(ratios)
    return out


def _flush_cluster(cluster_dir: str) -> None:
    """Flush every MemRowSet on every tablet server (the `flush` action)."""
    from kudusql.cluster import cluster_status, rpc_client_for
    rpc = rpc_client_for(cluster_dir, 600)
    try:
        for p in cluster_status(cluster_dir):
            if p["role"] == "tserver" and p["alive"]:
                rpc.call(p["addr"], "flush", {}, timeout_s=600)
    finally:
        rpc.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows per bulk load")
    ap.add_argument("--rounds", type=int, default=3,
                    help="bulk-load rounds (embedded, RF=1, RF=3 each); medians reported")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--only", default="bulk,ops,failover",
                    help="sections to run: bulk, ops, failover, tpch (comma separated)")
    ap.add_argument("--tpch-sf", type=float, default=1.0)
    ap.add_argument("--tpch-data", default="bench-data",
                    help="parquet cache directory (tpch/data.py)")
    ap.add_argument("--tpch-queries", default="1-22")
    ap.add_argument("--tpch-repeat", type=int, default=1)
    args = ap.parse_args(argv)
    only = set(args.only.split(","))

    from kudusql.cluster import remote_catalog_for
    from kudusql.session import Database

    print(f"load average at start: {load_avg()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="kudusql-cluster-bench-")
    cdir, edir = os.path.join(tmp, "cluster"), os.path.join(tmp, "embedded")
    cport, eport = _free_port(), _free_port()
    server = None
    results: dict = {}
    gaps: list[float] = []
    try:
        _cli("cluster", "start", "--data-dir", cdir, "--port", str(cport))
        cat = remote_catalog_for(cdir)
        cdb = Database(cat, None)
        db = Database.open(edir)
        try:
            # 1. bulk load
            if "bulk" in only:
                results.update(_bulk(db, cdb, args.rows, args.rounds))
            # 2. TPC-H
            if "tpch" in only:
                from tpch.queries import parse_selection
                results["tpch"] = _tpch(db, cdb, cdir, args.tpch_sf, args.tpch_data,
                                        parse_selection(args.tpch_queries), args.tpch_repeat)
            if "ops" in only:
                for name, d, rf in (("embedded", db, 1), ("cluster", cdb, 3)):
                    d.session().execute(DDL.format(name="kv", rf=rf))
                    kv = d.catalog.table("kv")
                    for b in _batches(100_000):
                        kv.insert(b)
        finally:
            db.close()
            cdb.close()
        # 3. point operations over the wire
        if "ops" in only:
            server = subprocess.Popen([sys.executable, "-m", "kudusql.cli", "serve",
                                       "--data-dir", edir, "--port", str(eport)], cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(300):
                try:
                    asyncio.run(_point_ops(eport, "kv", 0.01, 1, 10, inserts=False))
                    break
                except OSError:
                    time.sleep(0.1)
            for name, port in (("embedded", eport), ("cluster", cport)):
                sel, ins = asyncio.run(_point_ops(port, "kv", args.seconds,
                                                  args.connections, 100_000))
                results[f"select_{name}"], results[f"insert_{name}"] = sel, ins
                print(f"{name}: point select {sel:,.0f} ops/s, single-row insert {ins:,.0f} "
                      f"ops/s ({args.connections} connections)", flush=True)
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
            server = None
        # 4. failover gap
        if "failover" in only:
            try:
                _failover(cdir, cport, args.kills, gaps)
            except Exception as e:  # noqa: BLE001 - a benchmark: report what was measured
                print(f"  failover stopped after {len(gaps)} kills: {type(e).__name__}: {e}",
                      flush=True)
    finally:
        if server is not None:
            server.kill()
        try:
            _cli("cluster", "stop", "--data-dir", cdir)
        except BaseException:  # noqa: BLE001 - report what we have
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nsummary (same run, same data)")
    if "load_embedded" in results:
        e = results["load_embedded"]
        print(f"  bulk load, median of {args.rounds} rounds of {args.rows:,} rows: embedded "
              f"{e:,.0f} rows/s")
        for rf in (1, 3):
            print(f"  bulk load RF={rf} / embedded: {results[f'ratio_rf{rf}']:.2f}x "
                  f"({results[f'load_rf{rf}']:,.0f} rows/s)"
                  + ("  (target >= 0.5x)" if rf == 3 else ""))
    if "tpch" in results:
        t = results["tpch"]
        g = "n/a" if t["geomean"] is None else f"{t['geomean']:.2f}x"
        print(f"  TPC-H SF{args.tpch_sf:g} RF=3 geomean cluster / embedded: "
              f"{g} over {t['ran']} queries (target <= 1.5x); load "
              f"{t['load_cluster']:,.0f} vs {t['load_embedded']:,.0f} rows/s")
    if "select_embedded" in results:
        print(f"  point select cluster / embedded: "
              f"{results['select_cluster'] / results['select_embedded']:.2f}x")
        print(f"  single-row insert cluster / embedded: "
              f"{results['insert_cluster'] / results['insert_embedded']:.2f}x")
    if gaps:
        print(f"  failover gap over {len(gaps)} kills: median {statistics.median(gaps):.2f} "
              f"s, max {max(gaps):.2f} s (target <= 3 s)")
    print(f"load average at end: {load_avg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
