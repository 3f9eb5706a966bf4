"""A Structured Streaming driver for tests and benchmarks, run as its own process (so a
test can kill -9 it): a rate source into a kudusql table through the `kudusql` sink.

    python tests/spark/stream_driver.py TARGET TABLE CHECKPOINT ROWS_PER_S [SECONDS]

TARGET is the Flight location (grpc://host:port: the PySpark sink) or the Arrow stream
endpoint's host:port (the JVM connector's sink).

Runs until killed (or SECONDS, then stops between two batches), printing "batch N" as
batches complete."""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> None:
    loc, table, ck, rate = argv[:4]
    seconds = float(argv[4]) if len(argv) > 4 else None
    key = "flight" if loc.startswith("grpc://") else "endpoint"
    from kudusql.spark import local_session

    spark = local_session("local[2]", app_name="kudusql-stream-driver",
                          **{"spark.driver.memory": "1g"})
    spark.sparkContext.setLogLevel("ERROR")
    def start():
        return (spark.readStream.format("rate").option("rowsPerSecond", int(rate))
                .option("numPartitions", 2).load()
                .selectExpr("value AS id", "timestamp AS ts", "value * 0.5 AS v")
                .writeStream.format("kudusql").option(key, loc).option("table", table)
                .option("checkpointLocation", ck).trigger(processingTime="1 second").start())
    q = start()
    print("started", flush=True)
    end = None if seconds is None else time.monotonic() + seconds
    seen = -1
    while end is None or time.monotonic() < end:
        p = q.lastProgress
        if p and p["batchId"] != seen:
            seen = p["batchId"]
            print(f"batch {seen} rows {p['numInputRows']}", flush=True)
        if q.exception() is not None:
            print(f"failed {q.exception()}", flush=True)
            sys.exit(1)
        time.sleep(0.2)
    # stop between two batches (a stop inside one leaves it for the next run to finish)
    for _ in range(20):
        while last(ck, "offsets") != last(ck, "commits"):
            time.sleep(0.05)
        q.stop()
        if last(ck, "offsets") == last(ck, "commits"):
            break
        q = start()
    spark.stop()


def last(ck: str, log: str) -> int:
    d = os.path.join(ck, log)
    return max((int(f) for f in os.listdir(d) if f.isdigit()), default=-1) \
        if os.path.isdir(d) else -1


if __name__ == "__main__":
    main(sys.argv[1:])
