"""What interval and time-zone expressions cost (planner/expr/intervals.py, timezones.py):
each expression evaluated over one Arrow table of N rows, against integer addition over
the same rows as the anchor, in the same run.

    python -m bench.interval_bench [--rows 1000000] [--repeat 3]

Prints the best time of each, its ratio to the anchor and rows per second, and the load
average (the figures move with it).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from bench.common import load_avg
from planner.dialect import parse_sql
from planner.expr import evaluate, session_time_zone

CASES = [
    ("anchor: g + 1 (integer)", "g + 1"),
    ("ts + g * interval '1 second'", "ts + g * INTERVAL '1 second'"),
    ("ts + g * interval '1 month'", "ts + g * INTERVAL '1 month'"),
    ("(ts - ts2) / 7", "(ts - ts2) / 7"),
    ("s::interval (1000 distinct texts)", "CAST(s AS INTERVAL)"),
    ("(g || ' seconds')::interval", "CAST(CAST(g AS TEXT) || ' seconds' AS INTERVAL)"),
    ("date_bin(15 min, ts, origin)",
     "date_bin(INTERVAL '15 minutes', ts, TIMESTAMP '2001-01-01')"),
    ("ts AT TIME ZONE 'America/New_York'", "ts AT TIME ZONE 'America/New_York'"),
    ("date_trunc('day', tstz) in New York", "date_trunc('day', CAST(ts AS TIMESTAMPTZ))"),
]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n = args.rows
    rng = np.random.default_rng(1)
    t = pa.table({
        "g": pa.array(rng.integers(0, 100_000, n), pa.int32()),
        "ts": pa.array(rng.integers(0, 2**50, n), pa.timestamp("us")),
        "ts2": pa.array(rng.integers(0, 2**50, n), pa.timestamp("us")),
        "s": pa.array(np.char.add(rng.integers(0, 1000, n).astype(str), " seconds")),
    })
    best: dict[str, float] = {}
    with session_time_zone("America/New_York"):
        for name, sql in CASES:
            node = parse_sql(f"SELECT {sql} FROM x")[0].expressions[0]
            evaluate(node, t.slice(0, 1000))                 # warm up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                evaluate(node, t)
                times.append(time.perf_counter() - t0)
            best[name] = min(times)
    anchor = best[CASES[0][0]]
    print(f"{n:,} rows, best of {args.repeat}, {load_avg()}")
    for name, secs in best.items():
        print(f"  {name:40s} {secs * 1000:8.1f} ms  {secs / anchor:7.1f}x anchor  "
              f"{n / secs / 1e6:7.1f} M rows/s")


if __name__ == "__main__":
    main()
