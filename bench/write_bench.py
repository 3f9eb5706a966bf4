"""Single-row writes and point reads in process: the engine API, the SQL session, sqlite3.

What it measures (one thread, no wire; issue 25's in-process figures):

  engine update / insert / upsert   `Table.update / insert / upsert` of one row given as a
                                    dict of one-element lists (the engine's small-write
                                    path), ops/s of wall time and us of this thread's CPU
                                    per op (`time.thread_time`: on a shared machine wall
                                    time also counts waiting for a core; CPU time includes
                                    the fsync system call's own CPU, not the wait for the
                                    disk)
  engine update, N threads          the same UPDATE from each of --threads thread counts
                                    (default 1,4,16) at once (their WAL fsyncs shared by
                                    group commit and the commit delay), ops/s of wall
                                    time, us of process CPU per op (`getrusage`: every
                                    thread, the fsyncs' kernel time included) and updates
                                    per fsync (summed over the table's four tablet logs)
  session update / insert / upsert  `Session.execute` of `UPDATE kv SET v = $1 WHERE k = $2`,
                                    `INSERT INTO kv VALUES ($1, $2, $3)`,
                                    `UPSERT INTO kv VALUES ($1, $2, $3)`: the SQL path the
                                    wire server runs
  execute_point                     us of CPU per `Session.execute_point` of
                                    `SELECT v, s FROM kv WHERE k = $1` (bench/wire_bench.py's
                                    definition): on the fresh table, after a storm of 5,000
                                    single-row UPDATEs by uniform keys through the session
                                    (wire_bench's storm), and after a hot storm (5,000
                                    UPDATEs on the 500 keys then read: 10 per key)

The anchor, measured in the same run: sqlite3 in process (WAL journal, synchronous=NORMAL,
the same table and statements, `INSERT ... ON CONFLICT DO UPDATE` for the upsert).
`--kudusql-src DIR` also measures another checkout of kudusql (a subprocess with DIR first
on sys.path, e.g. `git -C /work/main archive main | tar -x -C /tmp/before`), for
before/after ratios. kudusql runs with its default durability (every commit fsynced, group
commit); sqlite's synchronous=NORMAL does not fsync a WAL commit at all, so its write
figures are an upper bound, not a like-for-like durability comparison.

    .venv/bin/python -m bench.write_bench [--rows 100000] [--ops 3000] [--reads 20000]
                                          [--threads 1,4,16] [--kudusql-src DIR] [--json]
                                          [--wal-sync commit|never] [--commit-delay US]
                                          [--commit-siblings N]

`--commit-delay` / `--commit-siblings` set kudusql's WAL commit delay (engine/config.py
`wal_commit_delay_us` / `wal_commit_siblings`) for this checkout's run only.

With --wal-sync never kudusql does not fsync its WAL: the figures are then the engine's
own CPU cost (on this machine an fsync costs the writing thread ~0.1-0.2 ms of CPU in the
kernel besides its latency, more than the engine's work for a single-row op).

A benchmark, not a test: it always exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

from bench.common import Results, load_avg, load_kv

READ = "SELECT v, s FROM kv WHERE k = $1"
STORM = 5_000
HOT_KEYS = 500


def _timed(fn, n: int) -> tuple[float, float]:
    """(ops/s of wall time, us of this thread's CPU per op) of fn(i) for i < n."""
    w0, c0 = time.perf_counter(), time.thread_time()
    for i in range(n):
        fn(i)
    c1, w1 = time.thread_time(), time.perf_counter()
    return n / (w1 - w0), (c1 - c0) / n * 1e6


def _logs(t) -> list:
    """The WALs of table `t`'s tablets (opened)."""
    lease = t.catalog.lease_tablets(t.id, lambda m: m.tablet_ids)
    try:
        return [tablet.log for tablet in t._open(lease.handles)]
    finally:
        lease.release()


def _threads(fn, n: int, threads: int, logs: list) -> tuple[float, float, float]:
    """(ops/s of wall time, us of process CPU per op, ops per fsync of `logs`) of n calls
    fn(i) split over `threads` threads."""
    per = n // threads
    barrier = threading.Barrier(threads + 1)

    def run(t):
        barrier.wait()
        for i in range(t * per, (t + 1) * per):
            fn(i)
    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    f0 = sum(log.fsyncs for log in logs)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    barrier.wait()
    w0 = time.perf_counter()
    for t in ts:
        t.join()
    w1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    m = per * threads
    cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / m * 1e6
    return m / (w1 - w0), cpu, m / max(sum(log.fsyncs for log in logs) - f0, 1)


def measure_kudusql(rows: int, ops: int, reads: int, threads,
                    wal_sync: str = "commit", commit: dict | None = None) -> dict:
    """The kudusql figures (module docstring) of the kudusql on sys.path. `threads`: the
    thread counts of the threaded update (an int: one); `commit`: TabletConfig fields
    (the commit delay's) set for this run."""
    from engine.config import TabletConfig
    from kudusql.session import Database

    out: dict = {}
    root = tempfile.mkdtemp(prefix="kudusql-write-bench-")
    try:
        with Database.open(os.path.join(root, "db"),
                           config=TabletConfig(wal_sync=wal_sync, **(commit or {}))) as db:
            s, t = load_kv(db, rows)
            rng = random.Random(1)
            keys = [rng.randrange(rows) for _ in range(max(ops, reads))]
            s.execute(READ, [0])
            assert s.execute_point(READ, [0]) is not None, "not a point read"

            def point(ks) -> float:
                for k in ks[:200]:                       # warm
                    s.execute_point(READ, [k])
                c0 = time.thread_time()
                for k in ks:
                    s.execute_point(READ, [k])
                return (time.thread_time() - c0) / len(ks) * 1e6

            out["point_fresh_us"] = point(keys[:reads])
            # the point read after storms, before the write figures add rows: wire_bench's
            # (uniform keys, v = v + 1) ...
            for _ in range(STORM):
                s.execute("UPDATE kv SET v = v + 1 WHERE k = $1", [rng.randrange(rows)])
            out["point_storm_us"] = point(keys[:reads])
            # ... and on the keys read (each read key has ~10 newer versions)
            hot = [rng.randrange(rows) for _ in range(HOT_KEYS)]
            for i in range(STORM):
                s.execute("UPDATE kv SET v = v + 1 WHERE k = $1", [hot[i % HOT_KEYS]])
            out["point_hot_storm_us"] = point([hot[i % HOT_KEYS] for i in range(reads)])
            # the engine API: one row as a dict of one-element lists
            out["engine_update"] = _timed(
                lambda i: t.update({"k": [keys[i]], "v": [i]}), ops)
            fresh = rows + 10_000_000
            out["engine_insert"] = _timed(
                lambda i: t.insert({"k": [fresh + i], "v": [i], "s": ["new"]}), ops)
            out["engine_upsert"] = _timed(
                lambda i: t.upsert({"k": [keys[i] if i % 2 else fresh + ops + i],
                                    "v": [i], "s": ["up"]}), ops)
            logs = _logs(t)
            out["engine_update_threads"] = {
                str(n): _threads(lambda i: t.update({"k": [keys[i % len(keys)]], "v": [i]}),
                                 max(ops, 250 * n), n, logs)
                for n in ([threads] if isinstance(threads, int) else threads)}
            # the SQL session (what the wire server runs)
            s.execute("UPDATE kv SET v = $1 WHERE k = $2", [0, 0])
            out["session_update"] = _timed(
                lambda i: s.execute("UPDATE kv SET v = $1 WHERE k = $2", [i, keys[i]]), ops)
            fresh2 = fresh + 3 * ops + 1_000_000
            out["session_insert"] = _timed(
                lambda i: s.execute("INSERT INTO kv VALUES ($1, $2, $3)",
                                    [fresh2 + i, i, "ins"]), ops)
            out["session_upsert"] = _timed(
                lambda i: s.execute("UPSERT INTO kv VALUES ($1, $2, $3)",
                                    [keys[i] if i % 2 else fresh2 + ops + i, i, "ups"]), ops)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def measure_sqlite(rows: int, ops: int, reads: int) -> dict:
    """The anchor: sqlite3 in process, WAL mode, synchronous=NORMAL."""
    out: dict = {}
    root = tempfile.mkdtemp(prefix="sqlite-write-bench-")
    try:
        con = sqlite3.connect(os.path.join(root, "db.sqlite"), isolation_level=None,
                              check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        con.execute("CREATE TABLE kv (k INTEGER PRIMARY KEY, v INTEGER, s TEXT)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO kv VALUES (?, ?, ?)",
                        ((i, i % 1000, f"value-{i}") for i in range(rows)))
        con.execute("COMMIT")
        rng = random.Random(1)
        keys = [rng.randrange(rows) for _ in range(max(ops, reads))]

        def point(ks) -> float:
            c0 = time.thread_time()
            for k in ks:
                con.execute("SELECT v, s FROM kv WHERE k = ?", (k,)).fetchall()
            return (time.thread_time() - c0) / len(ks) * 1e6

        out["point_fresh_us"] = point(keys[:reads])
        fresh = rows + 10_000_000
        out["session_update"] = _timed(lambda i: con.execute(
            "UPDATE kv SET v = ? WHERE k = ?", (i, keys[i])), ops)
        out["session_insert"] = _timed(lambda i: con.execute(
            "INSERT INTO kv VALUES (?, ?, ?)", (fresh + i, i, "ins")), ops)
        out["session_upsert"] = _timed(lambda i: con.execute(
            "INSERT INTO kv VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v, "
            "s = excluded.s", (keys[i] if i % 2 else fresh + ops + i, i, "ups")), ops)
        for _ in range(STORM):
            con.execute("UPDATE kv SET v = v + 1 WHERE k = ?", (rng.randrange(rows),))
        out["point_storm_us"] = point(keys[:reads])
        con.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def measure_other(src: str, args) -> dict:
    """measure_kudusql of the checkout at `src`, in a subprocess with `src` first on
    sys.path."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    # this file's measure_kudusql, loaded by path (the other checkout may have no
    # write_bench), over the engine of `src` (first on sys.path)
    code = ("import sys, json, importlib.util; sys.path.insert(0, %r); "
            "spec = importlib.util.spec_from_file_location('write_bench_here', %r); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "print(json.dumps(m.measure_kudusql(%d, %d, %d, %r, %r)))"
            % (os.path.abspath(src), os.path.abspath(__file__), args.rows, args.ops,
               args.reads, args.threads, args.wal_sync))
    r = subprocess.run([sys.executable, "-c", code], cwd=os.path.abspath(src), env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--reads", type=int, default=20_000)
    ap.add_argument("--threads", default="1,4,16",
                    help="thread counts of the threaded update, comma-separated")
    ap.add_argument("--commit-delay", type=int, default=None, metavar="US",
                    help="kudusql's WAL commit delay for this checkout's run "
                         "(default: the engine's)")
    ap.add_argument("--commit-siblings", type=int, default=None, metavar="N")
    ap.add_argument("--kudusql-src", help="another kudusql checkout to compare with")
    ap.add_argument("--wal-sync", choices=["commit", "never"], default="commit",
                    help="kudusql's WAL durability: commit (default: every op fsynced, "
                         "group commit) or never (the engine's own cost, no fsync)")
    ap.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = ap.parse_args(argv)
    args.threads = [int(n) for n in args.threads.split(",")]
    commit = {}
    if args.commit_delay is not None:
        commit["wal_commit_delay_us"] = args.commit_delay
    if args.commit_siblings is not None:
        commit["wal_commit_siblings"] = args.commit_siblings
    print(f"write_bench: {args.rows} rows, {args.ops} ops, {args.reads} reads, kudusql WAL "
          f"sync {args.wal_sync}; {load_avg()}", flush=True)
    lite = measure_sqlite(args.rows, args.ops, args.reads)
    ours = measure_kudusql(args.rows, args.ops, args.reads, args.threads, args.wal_sync,
                           commit)
    other = measure_other(args.kudusql_src, args) if args.kudusql_src else None
    if args.json:
        print(json.dumps({"sqlite": lite, "kudusql": ours, "other": other}, indent=1))
    res = Results()

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"
    for name in ("engine_update", "engine_insert", "engine_upsert", "session_update",
                 "session_insert", "session_upsert"):
        ops_s, cpu = ours[name]
        anchor = lite.get(name.replace("engine_", "session_"))
        text = f"{ops_s:,.0f}/s, {cpu:.0f} us CPU ({1e6 / cpu:,.0f}/s CPU-bound)"
        if anchor:
            text += f"; sqlite {anchor[0]:,.0f}/s ({ratio(ops_s, anchor[0])})"
        if other:
            text += f"; before {other[name][0]:,.0f}/s, {other[name][1]:.0f} us " \
                    f"({ratio(ops_s, other[name][0])})"
        target = "-"
        ok = None
        if name == "engine_update":
            target, ok = ">= 10,000/s", ops_s >= 10_000
        res.add(name.replace("_", " ") + " (1 thread)", text, target, ok)
    for n, (v, cpu, per_fsync) in ours["engine_update_threads"].items():
        text = f"{v:,.0f}/s, {cpu:.0f} us CPU, {per_fsync:.2f} per fsync"
        before = other and other["engine_update_threads"].get(n)
        if before:
            text += f"; before {before[0]:,.0f}/s, {before[1]:.0f} us, " \
                    f"{before[2]:.2f} per fsync ({ratio(v, before[0])})"
        res.add(f"engine update ({n} thread{'s' if n != '1' else ''}, in all)", text,
                ">= 10,000/s", v >= 10_000)
    fresh = ours["point_fresh_us"]
    for name, label in (("point_fresh_us", "execute_point fresh (us CPU)"),
                        ("point_storm_us", "execute_point after storm (us CPU)"),
                        ("point_hot_storm_us", "execute_point after hot storm (us CPU)")):
        v = ours[name]
        text = f"{v:.1f}"
        if name in lite:
            text += f"; sqlite {lite[name]:.1f} ({v / lite[name]:.1f}x its time)"
        if other and name in other:
            text += f"; before {other[name]:.1f} ({ratio(other[name], v)} faster)"
        if name == "point_fresh_us":
            res.add(label, text, "<= 15 us", v <= 15)
        else:
            res.add(label, text, "<= 1.2x fresh", v <= 1.2 * fresh)
    res.report("in-process single-row writes and point reads", strict=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
