"""CPU per row of a put's server side, without Spark or a socket.

    python -m bench.put_cpu --parquet DIR/lineitem.parquet [--rows 655360] [--repeat 3]
                            [--data-dir DIR] [--profile] [--encode]

Reads the first `--rows` rows of a tpchgen parquet file in 64k-row batches as the JVM
writer sends them (string_view columns as utf8; DECIMAL(<=18) stays decimal128), creates
the TPC-H table in a fresh embedded database (maintenance off: no flushes) and times
`wire.flight.write_batches(table, "insert", batches)`, the work of the Arrow stream
endpoint's put once the batches are read: per 200k-row chunk the cast to the table's
types, the routing to tablets and the tablets' inserts (on the catalog's pool threads).

Prints per run the process CPU (all threads) and the calling thread's CPU (the routing,
the chunking, the conversion), both per row, and the load average: on a shared machine
judge by the CPU figures, in before/after pairs run alternately. `--profile`: cProfile
of the calling thread (the pool threads' inserts show only as waits). `--encode`: instead,
the WAL body of the first 64k rows as bytes (`WriteOp.encode`) against the Arrow buffer
(`WriteOp.encode_for_log`), alternated, thread CPU per row, median of 10 per round.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq


def read_batches(path: str, rows: int) -> list[pa.RecordBatch]:
    pf = pq.ParquetFile(path)
    out, n = [], 0
    for b in pf.iter_batches(batch_size=65536):
        schema = pa.schema([pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type)
                            else f for f in b.schema])
        out.append(b.cast(schema))
        n += b.num_rows
        if n >= rows:
            break
    return out


def run_once(batches: list[pa.RecordBatch], table: str, data_dir: str | None,
             profile: bool) -> tuple[int, float, float]:
    from kudusql.session import Database
    from tpch.schema import create_statement
    from wire import flight

    d = Database.open(tempfile.mkdtemp(dir=data_dir), maintenance=False)
    try:
        d.session().execute(create_statement(table))
        t = d.catalog.table(table)
        prof = cProfile.Profile() if profile else None
        c0, m0 = time.process_time(), time.thread_time()
        if prof:
            prof.enable()
        r = flight.write_batches(t, "insert", iter(batches))
        if prof:
            prof.disable()
        c1, m1 = time.process_time(), time.thread_time()
        if r["failed"]:
            raise SystemExit(f"{r['failed']} rows failed: {r['errors'][:3]}")
        if prof:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        return r["rows"], c1 - c0, m1 - m0
    finally:
        d.close()


def compare_encode(batch: pa.RecordBatch, rounds: int) -> None:
    import statistics

    import numpy as np

    from engine.tablet.write_op import WriteOp
    op = WriteOp(np.zeros(batch.num_rows, np.int8), pa.Table.from_batches([batch]))
    for r in range(rounds):
        for name, f in (("encode", op.encode), ("encode_for_log", op.encode_for_log)):
            ts = []
            for _ in range(10):
                c = time.thread_time()
                f()
                ts.append(time.thread_time() - c)
            print(f"round {r}: {name} {statistics.median(ts) / batch.num_rows * 1e9:.0f} "
                  f"ns/row (load {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parquet", required=True, help="a tpchgen parquet file")
    ap.add_argument("--table", default=None, help="TPC-H table (default: the file's stem)")
    ap.add_argument("--rows", type=int, default=655360)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default=None, help="where the databases go (temp dirs)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--encode", action="store_true", help="time the WAL body's encoding")
    a = ap.parse_args()
    table = a.table or os.path.splitext(os.path.basename(a.parquet))[0]
    batches = read_batches(a.parquet, a.rows)
    if a.encode:
        compare_encode(batches[0], a.repeat)
        return
    for i in range(a.repeat):
        n, cpu, main_cpu = run_once(batches, table, a.data_dir, a.profile)
        print(f"run {i}: {n} rows, process CPU {cpu / n * 1e6:.3f} us/row, calling thread "
              f"{main_cpu / n * 1e6:.3f} us/row (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
