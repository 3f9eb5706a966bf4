"""A JVM connector scan whose tablet server dies mid-stream resumes, on a real cluster.

A tablet server's Arrow stream endpoint reads through the client library's fault-tolerant
scans, which return a tablet's rows in primary-key order at the ticket's snapshot: the same
sequence from every endpoint (checked here first, over the protocol: two endpoints, and
`skip`). The connector's reader, when its stream breaks after N rows, opens the same
ticket at the partition's next endpoint with skip = N (KudusqlReaderFactory.Reader).

The kill: a table of one tablet (RF=3) large enough that its stream outlasts the socket
buffers; a Spark job reads it through `rdd.mapPartitions`, whose Python function, at the
first row, says so (a file) and waits; Spark's feeding of the worker and the TCP window
then hold the stream mid-tablet; the test kills -9 the tablet server whose endpoint serves
it, lets the function go on, and checks every row arrived exactly once. In local[N] Spark
does not retry a failed task, so without the resume the job fails.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

pytest.importorskip("pyspark.sql.datasource", reason="pyspark>=4 is not installed")

from tests.cluster.conftest import LocalCluster, _run  # noqa: E402
from tests.spark.test_arrow_stream import call, request, status_json  # noqa: E402

LONG = os.environ.get("KUDUSQL_LONG") == "1"
pytestmark = [pytest.mark.long,
              pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for Spark on a cluster")]

ROWS = 120_000
PAD = 240   # bytes of text per row: ~30 MB, several times what the buffers hold


@pytest.fixture(scope="module")
def setup(tmp_path_factory, jvm):
    for c in _run(LocalCluster(str(tmp_path_factory.mktemp("jvm-resume") / "c"))):
        with open(os.path.join(c.dir, "cluster.json")) as f:
            doc = json.load(f)
        tservers = [p for p in doc["processes"] if p["role"] == "tserver"]
        with c.connect() as conn:
            conn.execute("CREATE TABLE r (k BIGINT PRIMARY KEY, pad TEXT) "
                         "WITH (replication_factor = 3)")
            for lo in range(0, ROWS, 40_000):
                conn.execute(f"INSERT INTO r SELECT i, repeat('x', {PAD}) || i "
                             f"FROM generate_series({lo}, {lo + 39_999}) AS s(i)")
        yield {"cluster": c, "tservers": tservers,
               "endpoints": [f"127.0.0.1:{p['arrow_port']}" for p in tservers]}


def _scan_keys(address: str, ticket: dict, skip: int = 0) -> list[int]:
    import pyarrow as pa
    req = {"op": "scan", "ticket": ticket}
    if skip:
        req["skip"] = skip
    s, f = request(address, req)
    with s:
        assert f.read(1) == b"\x00"
        t = pa.ipc.open_stream(f).read_all()
        assert status_json(f)[0] == 0
        return t.column("k").to_pylist()


def test_scans_are_resumable_in_key_order(setup):
    eps = setup["endpoints"]
    st, plan = call(eps[0], {"op": "plan", "table": "r", "columns": ["k"]})
    assert st == 0 and plan["resumable"] is True and len(plan["tickets"]) == 1
    tk = plan["tickets"][0]
    full = _scan_keys(eps[0], tk)
    assert full == list(range(ROWS))                      # primary-key order, all rows
    assert _scan_keys(eps[1], tk) == full                 # the same from another server
    assert _scan_keys(eps[2], tk, skip=12_345) == full[12_345:]
    assert _scan_keys(eps[1], tk, skip=ROWS) == []


def test_tablet_server_killed_mid_read(jvm, setup, tmp_path):
    c, eps = setup["cluster"], setup["endpoints"]
    st, plan = call(eps[0], {"op": "plan", "table": "r"})
    serving = plan["locations"][0][0]       # the reader asks the first location first
    victim = next(p for p in setup["tservers"] if f"127.0.0.1:{p['arrow_port']}" == serving)
    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    def hold(rows):
        import os as _os
        import time as _time
        first = True
        for r in rows:
            if first:
                first = False
                open(started, "w").close()
                deadline = _time.time() + 120
                while not _os.path.exists(go) and _time.time() < deadline:
                    _time.sleep(0.05)
            yield (r[0], len(r[1]))

    df = (jvm.read.format("kudusql").option("endpoint", ",".join(eps))
          .option("table", "r").load())
    out: dict = {}

    def run():
        try:
            out["rows"] = df.rdd.mapPartitions(hold).collect()
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            out["error"] = e
    th = threading.Thread(target=run, daemon=True)
    th.start()
    deadline = time.time() + 180
    while not os.path.exists(started):
        assert time.time() < deadline and th.is_alive(), out.get("error")
        time.sleep(0.1)
    time.sleep(1.0)   # let the buffers fill: the stream now waits mid-tablet
    os.kill(victim["pid"], signal.SIGKILL)
    open(go, "w").close()
    th.join(300)
    assert not th.is_alive(), "the Spark job did not finish"
    assert "error" not in out, out.get("error")
    rows = out["rows"]
    assert sorted(k for k, _ in rows) == list(range(ROWS))          # none lost, none twice
    assert all(n == PAD + len(str(k)) for k, n in rows)
    # the stream broke mid-tablet and another endpoint resumed it after the rows delivered
    assert "resumed: skipping the" in c.logs()
