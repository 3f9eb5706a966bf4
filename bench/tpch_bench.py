"""TPC-H benchmark: load the eight tables into kudusql, run the 22 queries, and compare
each answer and time with DuckDB on the same parquet, in the same run.

    .venv/bin/python -m bench.tpch_bench --sf 1 [--queries 1,3,6] [--data bench-data]
                                         [--repeat N] [--keep] [--db DIR] [--strict]

Phases:
  [0] data     tpchgen-cli parquet, cached under DATA/tpch-sf<SF>/ (tpch/data.py)
  [1] load     a fresh kudusql data directory under DATA (removed unless --keep): CREATE
               TABLE through SQL and batched inserts (tpch/load.py); time and rows/s per
               table. `--db DIR` skips this phase and queries the database a
               run with --keep left in DIR (same --sf). Without the SQL layer (`kudusql.connect`) the tables are created
               through the engine catalog instead, and every query is reported FAILED.
               Then the maintenance manager is waited for until it finds nothing to do
               (the merging compactions the load leaves: printed with its time), so the
               queries run on settled tables, not beside a compaction.
  [2] kudusql  each query: best of --repeat runs (execute + fetch_arrow_table), and the
               least process CPU time of those runs (all threads: under load, a steadier
               figure than the wall time); peak RSS sampled while our queries run. A query that raises is FAILED, and the run
               goes on.
  [3] DuckDB   the same queries on the parquet (views, no import), `threads` = our
               parallelism (os.cpu_count() unless --duckdb-threads); run after ours so that
               DuckDB's memory does not count in our peak RSS.
  [4] answers  tpch.oracle.compare_query (order, tolerance, ties), then the table:
               query | ours ms | duckdb ms | ratio (ours / duckdb) | rows | correct
               and the geometric mean of the ratios over the queries that ran.

This is a benchmark, not a test: it exits 0 even when an answer is wrong or a query fails
(use --strict to exit 1 then). Timings on a shared machine are noisy: the load average is
printed with the summary.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import traceback

import pyarrow as pa

from bench.common import Results, load_avg
from bench.engine_bench import PeakRss, dir_size, fmt_bytes, release_memory, ru_maxrss_bytes
from tpch.data import generate
from tpch.oracle import geometric_mean
from tpch.load import load, parquet_row_counts
from tpch.oracle import compare_query, duckdb_connect, duckdb_run
from tpch.queries import parse_selection, query
from tpch.schema import TABLES


def open_database(path: str):
    """(kudusql connection or engine Catalog, None or the reason the SQL layer is missing)."""
    try:
        import kudusql

        connect = kudusql.connect
    except (ImportError, AttributeError) as e:
        from engine.catalog import Catalog

        return Catalog.open(path), f"SQL layer not built ({type(e).__name__}: {e})"
    return connect(path), None


def error_text(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    return text if len(text) <= 160 else text[:157] + "..."


class Outcome:
    """One query's result on one engine."""

    def __init__(self) -> None:
        self.seconds: float | None = None
        self.cpu_seconds: float | None = None   # the process's CPU time (all threads), best run
        self.table: pa.Table | None = None
        self.error: str | None = None
        self.traceback: str | None = None


def timed(fn, repeat: int) -> Outcome:
    """Best wall time of `repeat` calls of fn() -> pa.Table; an exception is recorded."""
    out = Outcome()
    for _ in range(repeat):
        out.table = None
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            table = fn()
        except Exception as e:  # noqa: BLE001 - a failing query is reported, not fatal
            out.error = error_text(e)
            out.traceback = traceback.format_exc()
            return out
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        out.table = table
        out.seconds = dt if out.seconds is None else min(out.seconds, dt)
        out.cpu_seconds = cpu if out.cpu_seconds is None else min(out.cpu_seconds, cpu)
    return out


def run_ours(conn, sql: str) -> pa.Table:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return cur.fetch_arrow_table()
    finally:
        cur.close()


# -- phases ---------------------------------------------------------------------------------
def phase_load(db, parquet_dir: str, res: Results) -> int:
    counts = parquet_row_counts(parquet_dir)
    total_rows = sum(counts.values())
    total = 0.0
    for t in TABLES:
        t0 = time.perf_counter()
        rows = load(db, parquet_dir, tables=(t,))[t]
        el = time.perf_counter() - t0
        total += el
        ok = rows == counts[t]
        print(f"  {t:<9} {rows:>11,} rows in {el:7.2f}s  {rows / el:>11,.0f} rows/s"
              f"{'' if ok else f'  MISMATCH: parquet has {counts[t]:,}'}", flush=True)
        if not ok:
            res.add(f"load {t}: rows", f"{rows:,}", f"{counts[t]:,}", False)
    rate = total_rows / total if total else 0.0
    print(f"  total     {total_rows:>11,} rows in {total:7.2f}s  {rate:>11,.0f} rows/s "
          "(CREATE TABLE, inserts and the final MemRowSet flush)")
    res.add("load time (s)", f"{total:.2f}")
    res.add("load rows/s", f"{rate:,.0f}")
    return total_rows


def settle(db, res: Results, timeout_s: float = 1800.0) -> None:
    """Wait until the maintenance manager finds nothing to do (the merging compactions
    a load leaves behind): the queries are timed on the settled tables, not beside a
    compaction that takes one of the machine's cores. The wait is printed, not hidden."""
    database = getattr(db, "database", None)
    mm = getattr(database, "maintenance", None)
    if mm is None:
        return
    catalog = database.catalog
    for t in TABLES:                     # open every tablet: maintenance looks after those
        for tid in catalog.get_table(t).tablet_ids:
            catalog.tablet(tid)
    t0 = time.perf_counter()
    idle = mm.wait_idle(timeout=timeout_s)
    el = time.perf_counter() - t0
    ops = ", ".join(f"{name} x{st.runs}" for name, st in sorted(mm.stats.items()))
    print(f"  maintenance settled in {el:.1f}s ({ops or 'nothing to do'})"
          + ("" if idle else f"  STILL BUSY after {timeout_s:.0f}s"), flush=True)
    res.add("maintenance settle (s)", f"{el:.1f}")


def phase_ours(conn, numbers: list[int], repeat: int, reason: str | None
               ) -> tuple[dict[int, Outcome], int]:
    outs: dict[int, Outcome] = {}
    peak_rss = 0
    for n in numbers:
        if reason is not None:
            o = Outcome()
            o.error = reason
            outs[n] = o
            continue
        release_memory()
        with PeakRss() as peak:
            o = timed(lambda n=n: run_ours(conn, query(n)), repeat)
        peak_rss = max(peak_rss, peak.peak)
        outs[n] = o
        if o.error:
            print(f"  Q{n:02d}  FAILED  {o.error}", flush=True)
        else:
            print(f"  Q{n:02d}  {o.seconds * 1000:10,.1f} ms  {o.table.num_rows:,} rows  "
                  f"(cpu {o.cpu_seconds * 1000:,.0f} ms)", flush=True)
    return outs, peak_rss


def phase_duckdb(parquet_dir: str, numbers: list[int], repeat: int, threads: int
                 ) -> dict[int, Outcome]:
    con = duckdb_connect(parquet_dir, threads=threads)
    outs = {}
    try:
        for n in numbers:
            o = timed(lambda n=n: duckdb_run(con, query(n)), repeat)
            outs[n] = o
            shown = o.error or f"{o.seconds * 1000:10,.1f} ms  {o.table.num_rows:,} rows"
            print(f"  Q{n:02d}  {shown}", flush=True)
    finally:
        con.close()
    return outs


def phase_answers(numbers: list[int], ours: dict[int, Outcome], duck: dict[int, Outcome],
                  res: Results, verbose: bool) -> None:
    rows = []
    ratios = []
    correct = 0
    details = []
    for n in numbers:
        o, d = ours[n], duck[n]
        ours_ms = "FAILED" if o.error else f"{o.seconds * 1000:,.1f}"
        duck_ms = "FAILED" if d.error else f"{d.seconds * 1000:,.1f}"
        ratio = "-"
        if not o.error and not d.error:
            r = o.seconds / max(d.seconds, 1e-9)
            ratios.append(r)
            ratio = f"{r:,.1f}x"
        nrows = "-" if o.table is None else f"{o.table.num_rows:,}"
        if o.error:
            verdict = "FAILED"
            details.append(f"Q{n:02d} FAILED: {o.error}")
        elif d.error:
            verdict = "no oracle"
            details.append(f"Q{n:02d} DuckDB failed: {d.error}")
        else:
            problems = compare_query(n, o.table, d.table)
            if problems:
                verdict = "WRONG"
                details.append(f"Q{n:02d} differs from DuckDB:\n    " +
                               "\n    ".join(problems[:10]))
            else:
                verdict = "yes"
                correct += 1
        rows.append((f"Q{n:02d}", ours_ms, duck_ms, ratio, nrows, verdict))
    head = ("query", "ours ms", "duckdb ms", "ratio", "rows", "correct")
    w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    line = "-" * (sum(w) + 3 * (len(w) - 1))
    print(line)
    print(" | ".join(h.ljust(w[i]) if i in (0, 5) else h.rjust(w[i])
                     for i, h in enumerate(head)))
    print(line)
    for r in rows:
        print(" | ".join(v.ljust(w[i]) if i in (0, 5) else v.rjust(w[i])
                         for i, v in enumerate(r)))
    print(line)
    geo, _ = geometric_mean(ratios)
    if geo is not None:
        print(f"  geometric mean of ours/duckdb over {len(ratios)} queries: {geo:,.2f}x")
    for d in details if verbose else details[:10]:
        print(f"  {d}")
    if not verbose and len(details) > 10:
        print(f"  ... {len(details) - 10} more (use --verbose)")
    res.add("queries correct", f"{correct}/{len(numbers)}", f"{len(numbers)}/{len(numbers)}",
            correct == len(numbers))
    res.add("geomean ours/duckdb", "-" if geo is None else f"{geo:,.2f}x",
            f"over {len(ratios)} queries")


# -- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.tpch_bench",
        description="TPC-H on kudusql: load, the 22 queries, answers and times checked "
                    "against DuckDB on the same parquet in the same run.",
        epilog="The parquet is cached under DATA/tpch-sf<SF>/; the database goes to a "
               "fresh directory under DATA, removed unless --keep.")
    ap.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    ap.add_argument("--queries", help="queries to run, e.g. 1,3,6 or 1-5 (default: all 22)")
    ap.add_argument("--data", default="bench-data",
                    help="bench data root (default ./bench-data)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="timed runs per query and engine, the best is kept (default 1)")
    ap.add_argument("--duckdb-threads", type=int, default=None,
                    help="DuckDB threads (default: os.cpu_count(), our parallelism)")
    ap.add_argument("--keep", action="store_true", help="keep the kudusql data directory")
    ap.add_argument("--db", help="reuse the database a run with --keep left at this path "
                                 "(loaded at the same --sf): no load phase, never removed")
    ap.add_argument("--verbose", action="store_true",
                    help="print every mismatch and the traceback of failed queries")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 if a query fails or answers wrongly")
    args = ap.parse_args(argv)
    if args.sf <= 0:
        ap.error("--sf must be > 0")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    try:
        numbers = parse_selection(args.queries)
    except ValueError as e:
        ap.error(str(e))
    threads = args.duckdb_threads or os.cpu_count() or 1

    data_root = os.path.abspath(args.data)
    os.makedirs(data_root, exist_ok=True)
    res = Results()
    print(f"== kudusql TPC-H benchmark, SF {args.sf:g}, queries "
          f"{','.join(map(str, numbers))}, best of {args.repeat} ==")
    print(f"  python {sys.version.split()[0]}, pyarrow {pa.__version__}, {os.cpu_count()} "
          f"CPUs, DuckDB threads {threads}, {load_avg()}")

    print("\n[0] data")
    parquet_dir = os.path.join(data_root, f"tpch-sf{args.sf:g}")
    t0 = time.perf_counter()
    generate(args.sf, parquet_dir, log=lambda m: print(f"  {m}", flush=True))
    pq_bytes, _ = dir_size(parquet_dir)
    print(f"  parquet in {parquet_dir} ({fmt_bytes(pq_bytes)}; ready in "
          f"{time.perf_counter() - t0:.1f}s)")

    reuse = args.db is not None
    if reuse:
        db_dir = os.path.abspath(args.db)
        if not os.path.isdir(db_dir):
            ap.error(f"--db {args.db}: no such directory")
    else:
        db_dir = tempfile.mkdtemp(prefix=f"kudusql-tpch-sf{args.sf:g}-", dir=data_root)
    db, reason = open_database(db_dir)
    load_peak = None
    try:
        if reuse:
            print(f"\n[1] reusing the database at {db_dir} (no load)")
        else:
            print(f"\n[1] load into {db_dir}" + (f"  ({reason}: loading through the engine "
                                                  "catalog)" if reason else ""))
            release_memory()
            with PeakRss() as load_peak:
                phase_load(db, parquet_dir, res)
        settle(db, res)
        disk, _ = dir_size(db_dir)
        print(f"  on disk {fmt_bytes(disk)} (parquet {fmt_bytes(pq_bytes)})")
        res.add("database on disk", fmt_bytes(disk))

        print(f"\n[2] kudusql, best of {args.repeat}")
        ours, ours_peak = phase_ours(db, numbers, args.repeat, reason)
        if reason:
            print(f"  every query FAILED: {reason}")
        if args.verbose:
            for n, o in ours.items():
                if o.traceback:
                    print(f"  --- Q{n:02d} ---\n{o.traceback}")

        print(f"\n[3] DuckDB on the parquet, best of {args.repeat}, threads={threads}")
        duck = phase_duckdb(parquet_dir, numbers, args.repeat, threads)

        print("\n[4] answers (ratio = ours / duckdb; correct = same answer as DuckDB)")
        phase_answers(numbers, ours, duck, res, args.verbose)

        if load_peak is not None:
            res.add("peak RSS during the load", fmt_bytes(load_peak.peak) if load_peak.peak
                    else "n/a (psutil missing)")
        res.add("peak RSS during our queries", fmt_bytes(ours_peak) if ours_peak else "n/a")
        res.add("ru_maxrss (process, DuckDB included)", fmt_bytes(ru_maxrss_bytes()))
    finally:
        close = getattr(db, "close", None)
        if close:
            close()
        if args.keep or reuse:
            print(f"\n  kept the database at {db_dir}")
        else:
            shutil.rmtree(db_dir, ignore_errors=True)
    return res.report(f"TPC-H SF {args.sf:g}, {len(numbers)} queries", args.strict)


if __name__ == "__main__":
    sys.exit(main())
