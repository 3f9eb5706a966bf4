"""What fault tolerance costs a tablet scan: the key-ordered scan (Tablet.open_scan with
OrderMode.ORDERED, engine/tablet/ordered_scan.py) against the tablet's unordered scan, same
tablet, same run, interleaved.

    python -m bench.ordered_scan_bench [--rows 400000] [--flushes 4] [--repeat 5]
    python -m bench.ordered_scan_bench --cluster [--rows 400000]

Two layouts: keys inserted in random order (every DiskRowSet overlaps every other and the
MemRowSet: the merge does real work) and in key order (rowsets disjoint: mostly one source
per round). Prints the best time of each and the ratio ordered / unordered.

`--cluster` measures what a user sees instead: a local cluster (`kudusql cluster start`, 1
tablet server, a 4-tablet table loaded in random key order), the client library scanning
the whole table with fault-tolerant (ordered) scans and without, interleaved.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np

from engine.clock import LogicalClock
from engine.schema import ColumnSchema as C
from engine.schema import Schema
from engine.tablet import Tablet, TabletConfig
from engine.tablet.tablet import OrderMode
from engine.types import DataType as T

SCHEMA = Schema([C("k", T.INT64), C("a", T.INT64), C("s", T.STRING)], key=["k"])


def build(path: str, rows: int, flushes: int, shuffled: bool) -> Tablet:
    t = Tablet.create(path, SCHEMA, config=TabletConfig(fsync=False), clock=LogicalClock())
    keys = np.arange(rows, dtype=np.int64)
    if shuffled:
        np.random.default_rng(1).shuffle(keys)
    parts = np.array_split(keys, flushes + 1)
    for i, part in enumerate(parts):
        for s in range(0, len(part), 50_000):
            k = part[s:s + 50_000]
            t.insert({"k": k.tolist(), "a": (k * 3).tolist(),
                      "s": [f"row {x}" for x in k.tolist()]})
        if i < flushes:
            t.flush_mrs()  # the last part stays in the MemRowSet
    return t


def best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def _free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cluster(rows: int, repeat: int) -> None:
    import subprocess
    import sys

    from kudusql.cluster import remote_catalog_for

    d = tempfile.mkdtemp(prefix="kudusql-obench-cluster-")
    cli = [sys.executable, "-m", "kudusql.cli", "cluster"]
    try:
        subprocess.run(cli + ["start", "--data-dir", d, "--tservers", "1", "--port",
                             str(_free_port())],
                       check=True, capture_output=True, timeout=120)
        cat = remote_catalog_for(d)
        from engine.catalog.partition import HashBucketSchema, PartitionSchema
        cat.create_table("t", SCHEMA, PartitionSchema.create(
            SCHEMA, [HashBucketSchema(("k",), 4)]))
        t = cat.table("t")
        keys = np.arange(rows, dtype=np.int64)
        np.random.default_rng(1).shuffle(keys)
        for s in range(0, rows, 50_000):
            k = keys[s:s + 50_000]
            t.insert({"k": k.tolist(), "a": (k * 3).tolist(),
                      "s": [f"row {x}" for x in k.tolist()]})

        def run(ft: bool):
            cat.client.fault_tolerant_scans = ft
            return sum(b.num_rows for b in t.scan(["k", "a", "s"]))
        assert run(True) == run(False) == rows
        u = o = float("inf")
        for _ in range(repeat):
            u = min(u, best(lambda: run(False), 1))
            o = min(o, best(lambda: run(True), 1))
        print(f"cluster, 1 tablet server, 4 tablets, {rows} rows in random key order, full "
              f"scan through the client: unordered {u * 1000:.0f} ms ({rows / u:,.0f} rows/s), "
              f"fault tolerant (ordered) {o * 1000:.0f} ms ({rows / o:,.0f} rows/s), "
              f"ratio {o / u:.2f}x")
        cat.close()
    finally:
        subprocess.run(cli + ["stop", "--data-dir", d], capture_output=True, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--flushes", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cluster", action="store_true")
    a = ap.parse_args()
    if a.cluster:
        cluster(a.rows, a.repeat)
        return
    for shuffled in (True, False):
        d = tempfile.mkdtemp(prefix="kudusql-obench-")
        try:
            t = build(d, a.rows, a.flushes, shuffled)
            cols = ["k", "a", "s"]

            def unordered():
                return sum(b.num_rows for b in t.scan(cols))

            def ordered():
                return sum(b.num_rows for b, _ in t.open_scan(
                    cols, order_mode=OrderMode.ORDERED)[1])
            assert unordered() == ordered() == a.rows
            u = o = float("inf")
            for _ in range(a.repeat):  # interleaved: the same load on both
                u = min(u, best(unordered, 1))
                o = min(o, best(ordered, 1))
            layout = "random key order" if shuffled else "key order"
            print(f"{a.rows} rows, {a.flushes} DiskRowSets + MemRowSet, inserted in {layout}: "
                  f"unordered {u * 1000:.0f} ms ({a.rows / u:,.0f} rows/s), ordered "
                  f"{o * 1000:.0f} ms ({a.rows / o:,.0f} rows/s), ratio {o / u:.2f}x")
            t.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
