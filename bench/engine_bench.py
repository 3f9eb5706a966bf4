"""Single-tablet engine benchmark on TPC-H `lineitem`.

Measures, in one run at a given scale factor:

  1. bulk insert rows/s into one tablet, MemRowSet flushes included
     (target >= 300k rows/s);
  2. full scan of all columns, `tablet.scan_table()` vs `pyarrow.parquet.read_table()`
     on the same data (target: parquet_time / kudusql_time >= 1.0);
  3. a Q6-like selective scan with lazy materialization on vs off, projecting Q6's two
     columns and all 16 columns (target: off / on >= 3x), checked against a pyarrow Q6;
  4. point lookups by primary key, data on disk (target >= 20k lookups/s);
  5. RSS before / peak during the load, tablet size on disk vs the parquet file,
     number of DiskRowSets.

The lineitem parquet is generated once with `tpchgen-cli` and cached under
DATA_DIR/sf<SF>/; the tablet is written to a fresh temp dir under DATA_DIR and removed at
the end unless --keep is given.

    .venv/bin/python -m bench.engine_bench --sf 1 [--data-dir DIR] [--keep]

This is a benchmark, not a test: it exits 0 even when a figure misses its target (use
--strict to exit 1 on a MISS).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import gc
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import Results, load_avg
from engine.clock import HybridClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate, ScanStats, Tablet, TabletConfig
from engine.types import DataType
from tpch import data as tpch_data

try:  # declared in the `bench` extra; fall back to getrusage without it
    import psutil
except ImportError:  # pragma: no cover
    psutil = None

TARGET_INSERT_ROWS_S = 300_000
TARGET_SCAN_RATIO = 1.0
TARGET_LAZY_RATIO = 3.0
TARGET_LOOKUPS_S = 20_000

Q6_COLUMNS = ["l_extendedprice", "l_discount"]
Q6_SHIP_LO = dt.date(1994, 1, 1)
Q6_SHIP_HI = dt.date(1995, 1, 1)
Q6_DISC_LO = decimal.Decimal("0.05")
Q6_DISC_HI = decimal.Decimal("0.07")
Q6_QTY_LT = decimal.Decimal("24")


def lineitem_schema() -> Schema:
    """TPC-H lineitem, PRIMARY KEY (l_orderkey, l_linenumber), all columns NOT NULL."""

    def money(name: str) -> ColumnSchema:
        return ColumnSchema(name, DataType.DECIMAL, nullable=False, precision=15, scale=2)

    def col(name: str, t: DataType) -> ColumnSchema:
        return ColumnSchema(name, t, nullable=False)

    cols = [
        col("l_orderkey", DataType.INT64),
        col("l_partkey", DataType.INT64),
        col("l_suppkey", DataType.INT64),
        col("l_linenumber", DataType.INT32),
        money("l_quantity"),
        money("l_extendedprice"),
        money("l_discount"),
        money("l_tax"),
        col("l_returnflag", DataType.STRING),
        col("l_linestatus", DataType.STRING),
        col("l_shipdate", DataType.DATE),
        col("l_commitdate", DataType.DATE),
        col("l_receiptdate", DataType.DATE),
        col("l_shipinstruct", DataType.STRING),
        col("l_shipmode", DataType.STRING),
        col("l_comment", DataType.STRING),
    ]
    return Schema(cols, key=["l_orderkey", "l_linenumber"])


# -- helpers ---------------------------------------------------------------------------
def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def dir_size(path: str) -> tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(root, name))
                files += 1
            except OSError:
                pass
    return total, files


def release_memory() -> None:
    """Collect garbage and hand freed Arrow pool memory back to the OS, so that RSS
    figures measure what is live rather than the allocator's high-water mark."""
    gc.collect()
    pa.default_memory_pool().release_unused()


def current_rss() -> int | None:
    if psutil is None:
        return None
    return psutil.Process().memory_info().rss


def ru_maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024  # Linux reports KiB


class PeakRss:
    """Samples the process RSS in a background thread while active."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "PeakRss":
        if psutil is not None:
            proc = psutil.Process()
            self.peak = proc.memory_info().rss

            def run() -> None:
                while not self._stop.wait(self.interval):
                    self.peak = max(self.peak, proc.memory_info().rss)

            self._thread = threading.Thread(target=run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.peak = max(self.peak, psutil.Process().memory_info().rss)


def best_of(fn, repeat: int = 3, warmup: int = 1):
    """(best wall seconds, last result) of `repeat` timed calls after `warmup` untimed
    ones; the process CPU seconds of the best call are left in `best_of.cpu`."""
    result = None
    for _ in range(warmup):
        result = fn()
        del result
        result = None
        gc.collect()
    best = float("inf")
    for i in range(repeat):
        if result is not None:
            del result
            result = None
            gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best:
            best, best_of.cpu = wall, cpu
    return best, result


best_of.cpu = 0.0


def find_tpchgen() -> str:
    try:
        return tpch_data.find_tpchgen()
    except tpch_data.TpchgenNotFound as e:
        sys.exit(str(e))


def ensure_parquet(data_dir: str, sf: float) -> str:
    """Generate (once) and return the path of lineitem.parquet for scale factor `sf`."""
    out_dir = os.path.join(data_dir, f"sf{sf:g}")
    path = os.path.join(out_dir, "lineitem.parquet")
    if os.path.exists(path):
        print(f"  using cached {path} ({fmt_bytes(os.path.getsize(path))})")
        return path
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".gen-", dir=out_dir)
    exe = find_tpchgen()
    print(f"  generating lineitem at SF {sf:g} with {exe} ...", flush=True)
    t0 = time.perf_counter()
    try:
        subprocess.run([exe, "parquet", "-s", f"{sf:g}", "--tables=lineitem",
                        f"--output-dir={tmp}"], check=True)
        os.replace(os.path.join(tmp, "lineitem.parquet"), path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  generated {path} ({fmt_bytes(os.path.getsize(path))}) in "
          f"{time.perf_counter() - t0:.1f}s")
    return path


def to_insertable(table: pa.Table) -> pa.Table:
    """string_view -> string (the engine's STRING arrow type), one chunk per column."""
    fields, arrays = [], []
    for f, arr in zip(table.schema, table.columns):
        if pa.types.is_string_view(f.type) or pa.types.is_large_string(f.type):
            arr = arr.cast(pa.string())
            f = pa.field(f.name, pa.string(), nullable=f.nullable)
        fields.append(pa.field(f.name, f.type, nullable=f.nullable))
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields)).combine_chunks()


def q6_predicates() -> list[ColumnPredicate]:
    return [
        ColumnPredicate.range("l_shipdate", Q6_SHIP_LO, Q6_SHIP_HI),
        ColumnPredicate.range("l_discount", Q6_DISC_LO, Q6_DISC_HI, upper_inclusive=True),
        ColumnPredicate.less("l_quantity", Q6_QTY_LT),
    ]


def revenue(table: pa.Table) -> decimal.Decimal:
    """SUM(l_extendedprice * l_discount) as an exact Decimal."""
    if table.num_rows == 0:
        return decimal.Decimal(0)
    v = pc.sum(pc.multiply(table.column("l_extendedprice"), table.column("l_discount")))
    return v.as_py() or decimal.Decimal(0)


def q6_reference(pq_table: pa.Table) -> tuple[int, decimal.Decimal]:
    """Q6 computed by pyarrow.compute directly on the parquet data."""
    t = pq_table
    d = t.column("l_discount")
    q = t.column("l_quantity")
    s = t.column("l_shipdate")
    mask = pc.and_(
        pc.and_(pc.greater_equal(s, pa.scalar(Q6_SHIP_LO, pa.date32())),
                pc.less(s, pa.scalar(Q6_SHIP_HI, pa.date32()))),
        pc.and_(pc.and_(pc.greater_equal(d, pa.scalar(Q6_DISC_LO, d.type)),
                        pc.less_equal(d, pa.scalar(Q6_DISC_HI, d.type))),
                pc.less(q, pa.scalar(Q6_QTY_LT, q.type))))
    sel = t.select(Q6_COLUMNS).filter(mask)
    return sel.num_rows, revenue(sel)



def stats_str(s: ScanStats) -> str:
    return ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}"
                     for k, v in asdict(s).items())


# -- phases ----------------------------------------------------------------------------
def phase_load(tablet: Tablet, table: pa.Table, batch_rows: int, res: Results) -> dict:
    config = tablet.config
    n = table.num_rows
    release_memory()
    rss_before = current_rss()
    maxrss_before = ru_maxrss_bytes()
    flushes = 0
    flush_s = 0.0
    applied = 0
    errors = 0
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    with PeakRss() as peak:
        c0 = time.process_time()
        t0 = time.perf_counter()
        for a in range(0, n, batch_rows):
            r = tablet.insert(table.slice(a, batch_rows))
            applied += r.num_applied
            errors += len(r.row_errors)
            if tablet.mrs_bytes() >= config.mrs_flush_bytes:
                f0 = time.perf_counter()
                tablet.flush_mrs()
                flush_s += time.perf_counter() - f0
                flushes += 1
        f0 = time.perf_counter()
        tablet.flush_mrs()
        flush_s += time.perf_counter() - f0
        flushes += 1
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    maxrss_after = ru_maxrss_bytes()
    rss_peak = peak.peak if psutil is not None else None
    if maxrss_after > maxrss_before:
        # the process high-water mark rose during the load: it is the exact peak (the
        # sampler can miss short spikes)
        rss_peak = max(rss_peak or 0, maxrss_after)
    rate = n / elapsed
    print(f"  inserted {applied:,} rows ({errors} row errors) in {elapsed:.2f}s: "
          f"{rate:,.0f} rows/s (target >= {TARGET_INSERT_ROWS_S:,})")
    print(f"  process CPU {cpu:.2f}s (user {ru1.ru_utime - ru0.ru_utime:.2f}s, sys "
          f"{ru1.ru_stime - ru0.ru_stime:.2f}s, {ru1.ru_minflt - ru0.ru_minflt:,} minor page "
          f"faults)")
    print(f"  of which {flushes} flush_mrs() calls took {flush_s:.2f}s "
          f"(insert calls {elapsed - flush_s:.2f}s); "
          f"batches of {batch_rows:,} rows, mrs_flush_bytes={fmt_bytes(config.mrs_flush_bytes)}")
    print(f"  DiskRowSets: {tablet.num_rowsets()}, MRS rows after final flush: "
          f"{tablet.mrs_rows()}")
    if applied != n or errors:
        print(f"  WARNING: {n - applied:,} rows not applied, {errors} row errors")
    res.add("bulk insert (rows/s, flushes incl.)", f"{rate:,.0f}",
            f">= {TARGET_INSERT_ROWS_S:,}", rate >= TARGET_INSERT_ROWS_S and applied == n)
    return {"rss_before": rss_before, "rss_peak": rss_peak,
            "maxrss_before": maxrss_before, "maxrss_after": maxrss_after,
            "elapsed": elapsed, "applied": applied}


def phase_full_scan(tablet: Tablet, parquet_path: str, n: int, res: Results) -> None:
    t_k, tbl = best_of(lambda: tablet.scan_table())
    cpu_k = best_of.cpu
    k_rows = tbl.num_rows
    del tbl
    gc.collect()
    t_p, ptbl = best_of(lambda: pq.read_table(parquet_path))
    cpu_p = best_of.cpu
    p_rows = ptbl.num_rows
    del ptbl
    gc.collect()
    ratio = t_p / t_k
    ok_rows = k_rows == n == p_rows
    print(f"  kudusql scan_table(): {t_k * 1000:,.1f} ms ({k_rows:,} rows, "
          f"{k_rows / t_k:,.0f} rows/s; process CPU {cpu_k * 1000:,.0f} ms)")
    print(f"  pq.read_table():      {t_p * 1000:,.1f} ms ({p_rows:,} rows; process CPU "
          f"{cpu_p * 1000:,.0f} ms, pyarrow threads included)")
    print(f"  ratio parquet/kudusql = {ratio:.2f} (target >= {TARGET_SCAN_RATIO}); "
          f"row count {'matches' if ok_rows else 'MISMATCH'}")
    res.add("full scan: parquet_time / kudusql_time", f"{ratio:.2f}",
            f">= {TARGET_SCAN_RATIO}", ratio >= TARGET_SCAN_RATIO and ok_rows)
    res.add("  kudusql full scan (ms)", f"{t_k * 1000:,.1f}")
    res.add("  parquet read_table (ms)", f"{t_p * 1000:,.1f}")
    res.add("  full scan row count matches", str(ok_rows), "True", ok_rows)


def phase_q6(tablet: Tablet, ref_rows: int, ref_rev: decimal.Decimal, res: Results) -> None:
    preds = q6_predicates()
    print(f"  predicates: l_shipdate >= {Q6_SHIP_LO} AND l_shipdate < {Q6_SHIP_HI} AND "
          f"l_discount BETWEEN {Q6_DISC_LO} AND {Q6_DISC_HI} AND l_quantity < {Q6_QTY_LT} "
          f"({len(preds)} ColumnPredicates)")
    print(f"  pyarrow reference on the parquet: {ref_rows:,} rows, revenue = {ref_rev}")
    variants = [("Q6 columns", Q6_COLUMNS), ("all 16 columns", tablet.schema.names)]
    for label, cols in variants:
        times, outs, stats, cpus = {}, {}, {}, {}
        for lazy in (True, False):
            def run(lazy=lazy, cols=cols):
                return pa.Table.from_batches(
                    list(tablet.scan(columns=cols, predicates=preds, lazy=lazy)),
                    schema=tablet.schema.arrow_schema(cols))
            t, out = best_of(run, repeat=5)
            cpus[lazy] = best_of.cpu
            st = ScanStats()
            for _ in tablet.scan(columns=cols, predicates=preds, lazy=lazy, stats=st):
                pass
            times[lazy], outs[lazy], stats[lazy] = t, out, st
        ratio = times[False] / times[True]
        rows_on, rows_off = outs[True].num_rows, outs[False].num_rows
        rev_on, rev_off = revenue(outs[True]), revenue(outs[False])
        ok = rows_on == rows_off == ref_rows and rev_on == rev_off == ref_rev
        print(f"  ({'a' if cols is Q6_COLUMNS else 'b'}) projecting {label}:")
        print(f"      lazy on : {times[True] * 1000:,.1f} ms (CPU {cpus[True] * 1000:,.0f} ms), "
              f"{rows_on:,} rows, revenue = {rev_on}")
        print(f"      lazy off: {times[False] * 1000:,.1f} ms (CPU {cpus[False] * 1000:,.0f} ms), "
              f"{rows_off:,} rows, revenue = {rev_off}")
        print(f"      ratio off/on = {ratio:.2f}x (target >= {TARGET_LAZY_RATIO}x); "
              f"results {'match the reference' if ok else 'MISMATCH'}")
        print(f"      ScanStats lazy on : {stats_str(stats[True])}")
        print(f"      ScanStats lazy off: {stats_str(stats[False])}")
        short = "2 cols" if cols is Q6_COLUMNS else "16 cols"
        res.add(f"Q6 lazy speed-up, {short} (off/on)", f"{ratio:.2f}x",
                f">= {TARGET_LAZY_RATIO}x", ratio >= TARGET_LAZY_RATIO)
        res.add(f"  Q6 {short}: lazy on / off (ms)",
                f"{times[True] * 1000:,.1f} / {times[False] * 1000:,.1f}")
        res.add(f"  Q6 {short}: rows + revenue match ref", str(ok), "True", ok)
        del outs
        gc.collect()


def _timed_lookups(tablet: Tablet, keys: list[tuple], cols: list[str] | None
                   ) -> tuple[np.ndarray, list, float]:
    lat = np.empty(len(keys), dtype=np.int64)
    out: list = [None] * len(keys)
    lookup = tablet.lookup
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    for i, k in enumerate(keys):
        s = clock()
        out[i] = lookup(k, cols)
        lat[i] = clock() - s
    return lat, out, time.perf_counter() - t0


def phase_lookups(tablet: Tablet, table: pa.Table, n_lookups: int, seed: int,
                  res: Results) -> None:
    n = table.num_rows
    rng = np.random.default_rng(seed)
    ok_all = True
    for label, cols in (("all columns", None), ("columns=['l_extendedprice']",
                                               ["l_extendedprice"])):
        idx = rng.choice(n, size=min(n_lookups, n), replace=False)
        pidx = pa.array(idx)
        okeys = table.column("l_orderkey").take(pidx).to_pylist()
        lkeys = table.column("l_linenumber").take(pidx).to_pylist()
        expect = table.column("l_extendedprice").take(pidx).to_pylist()
        keys = list(zip(okeys, lkeys))
        cache = tablet.cache
        h0, m0 = cache.hits, cache.misses
        lat, out, elapsed = _timed_lookups(tablet, keys, cols)
        hits, misses_c = cache.hits - h0, cache.misses - m0
        rate = len(keys) / elapsed
        # the same keys again: every page they touch is now decoded in the block cache
        # (unless the working set exceeds block_cache_bytes)
        lat2, _, elapsed2 = _timed_lookups(tablet, keys, cols)
        misses = sum(1 for r in out if r is None)
        wrong = sum(1 for r, e in zip(out, expect) if r is not None and r["l_extendedprice"] != e)
        ok = misses == 0 and wrong == 0
        ok_all &= ok
        p50, p99 = np.percentile(lat, [50, 99]) / 1000.0
        print(f"  {label}: {len(keys):,} lookups in {elapsed:.2f}s = {rate:,.0f}/s; "
              f"p50 {p50:,.1f} us, p99 {p99:,.1f} us, max {lat.max() / 1000:,.1f} us; "
              f"{misses} not found, {wrong} wrong values")
        print(f"      block cache: {hits:,} hits, {misses_c:,} misses (page decodes), "
              f"{fmt_bytes(cache.nbytes)} cached of {fmt_bytes(cache.capacity)}")
        w50, w99 = np.percentile(lat2, [50, 99]) / 1000.0
        print(f"      same keys again (warm cache): {len(keys) / elapsed2:,.0f}/s; "
              f"p50 {w50:,.1f} us, p99 {w99:,.1f} us (info only)")
        short = "all cols" if cols is None else "1 col"
        res.add(f"point lookups/s, {short}", f"{rate:,.0f}", f">= {TARGET_LOOKUPS_S:,}",
                rate >= TARGET_LOOKUPS_S)
        res.add(f"  lookup p50 / p99 (us), {short}", f"{p50:,.1f} / {p99:,.1f}")
        res.add(f"  warm re-run lookups/s, {short}", f"{len(keys) / elapsed2:,.0f}")
    res.add("  lookups found + correct", str(ok_all), "True", ok_all)


# -- main ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.engine_bench",
        description="Benchmark the single-tablet engine on TPC-H lineitem: bulk insert, "
                    "full scan vs parquet, Q6 with lazy materialization on/off, point "
                    "lookups, memory and on-disk size. Prints a summary with targets.",
        epilog="The parquet is cached under DATA_DIR/sf<SF>/lineitem.parquet; the tablet "
               "goes to a fresh temp dir under DATA_DIR, removed unless --keep.")
    ap.add_argument("--sf", type=float, default=0.1,
                    help="TPC-H scale factor (default 0.1; 1 = ~6M lineitem rows)")
    ap.add_argument("--data-dir", default="bench-data",
                    help="bench data root for the parquet cache and the tablet "
                         "(default ./bench-data)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the tablet directory after the run (its path is printed)")
    ap.add_argument("--batch-rows", type=int, default=100_000,
                    help="rows per tablet.insert() call (default 100000)")
    ap.add_argument("--lookups", type=int, default=20_000,
                    help="point lookups per variant (default 20000)")
    ap.add_argument("--seed", type=int, default=42, help="RNG seed for lookup keys")
    ap.add_argument("--wal-sync", choices=["never", "commit"], default="never",
                    help="WAL sync policy of the tablet (default: never, the bulk-load mode; "
                         "'commit' fsyncs every insert batch)")
    ap.add_argument("--strict", action="store_true",
                    help="exit with status 1 if any figure misses its target")
    args = ap.parse_args(argv)
    if args.sf <= 0:
        ap.error("--sf must be > 0")

    data_dir = os.path.abspath(args.data_dir)
    os.makedirs(data_dir, exist_ok=True)
    res = Results()
    # fsync=True and the other defaults; the WAL sync policy of a bulk load is a choice the
    # loader makes (Kudu-style "never" for bulk loads), so it is a flag, printed with results.
    config = TabletConfig(wal_sync=args.wal_sync)
    print(f"  WAL sync policy for the load: {args.wal_sync}")

    print(f"== kudusql engine benchmark: TPC-H lineitem, SF {args.sf:g} ==")
    print(f"  python {sys.version.split()[0]}, pyarrow {pa.__version__}, numpy {np.__version__}"
          f", {os.cpu_count()} CPUs, {load_avg()}")
    print(f"  {config}")

    print("\n[0] data")
    parquet_path = ensure_parquet(data_dir, args.sf)
    parquet_bytes = os.path.getsize(parquet_path)
    t0 = time.perf_counter()
    pq_table = pq.read_table(parquet_path)
    table = to_insertable(pq_table)
    n = table.num_rows
    print(f"  read + converted {n:,} rows in {time.perf_counter() - t0:.2f}s "
          f"(in-memory {fmt_bytes(table.nbytes)}; not timed)")
    ref_rows, ref_rev = q6_reference(pq_table)
    del pq_table
    release_memory()

    tablet_dir = tempfile.mkdtemp(prefix=f"tablet-sf{args.sf:g}-", dir=data_dir)
    tablet = None
    try:
        tablet = Tablet.create(tablet_dir, lineitem_schema(), config=config,
                               clock=HybridClock())

        print(f"\n[1] bulk insert into one tablet ({tablet_dir})")
        load = phase_load(tablet, table, args.batch_rows, res)

        print("\n[2] full scan, all 16 columns (best of 3 after a warm-up)")
        phase_full_scan(tablet, parquet_path, n, res)

        print("\n[3] Q6-like selective scan, lazy materialization on vs off (best of 5)")
        phase_q6(tablet, ref_rows, ref_rev, res)

        print(f"\n[4] point lookups by primary key, data on disk (MRS rows: "
              f"{tablet.mrs_rows()}), single thread")
        phase_lookups(tablet, table, args.lookups, args.seed, res)

        print("\n[5] memory and disk")
        tablet.close()
        disk_bytes, disk_files = dir_size(tablet_dir)
        nrs = tablet.num_rowsets()
        if load["rss_before"] is not None:
            print(f"  RSS before the load: {fmt_bytes(load['rss_before'])}; peak during the "
                  f"load: {fmt_bytes(load['rss_peak'])} "
                  f"(+{fmt_bytes(load['rss_peak'] - load['rss_before'])}; psutil sampling + ru_maxrss)")
        print(f"  ru_maxrss before / after the load: {fmt_bytes(load['maxrss_before'])} / "
              f"{fmt_bytes(load['maxrss_after'])} (process-lifetime high-water mark)")
        print(f"  in-memory arrow table being inserted: {fmt_bytes(table.nbytes)}")
        print(f"  tablet on disk: {fmt_bytes(disk_bytes)} in {disk_files} files, "
              f"{nrs} DiskRowSets; parquet file: {fmt_bytes(parquet_bytes)}; "
              f"ratio tablet/parquet = {disk_bytes / parquet_bytes:.2f}")
        if load["rss_before"] is not None:
            res.add("RSS before load", fmt_bytes(load["rss_before"]))
            res.add("peak RSS during load", fmt_bytes(load["rss_peak"]))
        res.add("ru_maxrss (process lifetime)", fmt_bytes(load["maxrss_after"]))
        res.add("tablet on disk", fmt_bytes(disk_bytes))
        res.add("parquet file", fmt_bytes(parquet_bytes))
        res.add("tablet / parquet size", f"{disk_bytes / parquet_bytes:.2f}")
        res.add("DiskRowSets", str(nrs))
    finally:
        if args.keep:
            print(f"\n  kept the tablet at {tablet_dir}")
        else:
            shutil.rmtree(tablet_dir, ignore_errors=True)

    return res.report(f"TPC-H lineitem SF {args.sf:g}, {n:,} rows", args.strict)


if __name__ == "__main__":
    sys.exit(main())
