"""kill -9 of a Structured Streaming driver writing through the `kudusql` sink: the driver
(Python + its Spark JVM + Python workers, one process group) is killed while micro-batches
run, three times at random moments, then restarted from its checkpoint and run to a clean
stop. 0 lost rows (the rate source's ids are exactly 0..n-1), 0 doubled (insert mode: a
second copy of a row would fail the query; the committed batches' counts add up to n).
Both sinks: the PySpark source over Flight, the JVM connector over the Arrow stream
endpoint.

~2-4 minutes of Spark starts on a loaded 2-core machine: KUDUSQL_LONG=1."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from tests.spark.test_streaming import check_exactly_once, last_batch, wait_until  # noqa: E402

LONG = os.environ.get("KUDUSQL_LONG") == "1"
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for the kill -9 runs")]

DRIVER = os.path.join(os.path.dirname(__file__), "stream_driver.py")


def start_driver(target, table, ck, log, seconds=None):
    args = [sys.executable, DRIVER, target, table, ck, "3000"]
    if seconds is not None:
        args.append(str(seconds))
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=os.getcwd())


def kill9(p):
    os.killpg(p.pid, signal.SIGKILL)   # the driver, its JVM and its Python workers
    p.wait(30)


@pytest.mark.parametrize("path", ["flight", "jvm"])
def test_sink_exactly_once_across_kill_9_of_the_driver(db, server, tmp_path, path):
    pytest.importorskip("pyspark")
    if path == "jvm":
        from kudusql.spark import connector_jar
        if connector_jar() is None:
            pytest.skip("no JVM connector (no JDK to build it)")
    kv9 = "kv9" if path == "flight" else "kv9_" + path
    target = server.location if path == "flight" else server.stream_address
    db.session().execute(f"CREATE TABLE {kv9} (id BIGINT PRIMARY KEY, ts TIMESTAMP, "
                         "v DOUBLE) PARTITION BY HASH (id) PARTITIONS 2")
    t = db.catalog.table(kv9)
    ck = str(tmp_path / "ck")
    rng = random.Random(26)
    kills = 0
    with open(tmp_path / "driver.log", "ab") as log:
        for _ in range(3):
            before = t.count_rows()
            p = start_driver(target, kv9, ck, log)
            try:
                wait_until(lambda: t.count_rows() > before + 3000, timeout=180,
                           what="the driver's rows")
                time.sleep(rng.uniform(0.0, 1.5))    # somewhere inside a batch, or between
            finally:
                kill9(p)
            kills += 1
        half_written = last_batch(ck, "offsets") > last_batch(ck)
        p = start_driver(target, kv9, ck, log, seconds=25)
        assert p.wait(300) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    assert kills == 3
    n = check_exactly_once(db, kv9)
    print(f"{n} rows, exactly once across {kills} kill -9; a batch was half done at the "
          f"last kill: {half_written}")
