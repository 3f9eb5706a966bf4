"""`kudusql serve --data-dir D --http-port N` (embedded): a real server process whose HTTP
port serves /metrics, /status.json and the status page; the SQL statement metrics and the
tablets' state move when rows are written."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import psycopg

from tests.wire.real_server import real_server


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def _sample(text: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(prefix))


def test_embedded_serve_metrics_and_status(tmp_path):
    http = _free_port()
    with real_server(tmp_path / "db", "--http-port", str(http)) as srv:
        deadline = time.monotonic() + 30
        while True:
            try:
                st = json.loads(_get(http, "/status.json"))
                break
            except OSError:
                assert time.monotonic() < deadline, srv.stderr_lines[-5:]
                time.sleep(0.1)
        assert st["role"] == "sql" and st["mode"] == "embedded" and st["tablets"] == []
        assert st["http_addr"] == f"127.0.0.1:{http}"
        before = _get(http, "/metrics")
        with psycopg.connect(srv.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT) "
                         "PARTITION BY HASH (k) PARTITIONS 2")
            conn.execute("INSERT INTO t VALUES " +
                         ", ".join(f"({k}, 'x')" for k in range(25)))
            conn.execute("DELETE FROM t WHERE k < 5")
            assert conn.execute("SELECT http_addr FROM kudu_system.servers").fetchall() == \
                [(f"127.0.0.1:{http}",)]
        after = _get(http, "/metrics")
        key = 'kudusql_sql_rows_affected_total{command="INSERT"}'
        assert _sample(after, key) - _sample(before, key) == 25
        key = 'kudusql_sql_rows_affected_total{command="DELETE"}'
        assert _sample(after, key) == 5
        assert _sample(after, 'kudusql_sql_statements_total{command="CREATE",outcome="ok"}') == 1
        assert _sample(after, "kudusql_wal_bytes") > 0
        assert _sample(after, 'kudusql_tablet_replicas{role="LEADER",state="RUNNING"}') == 2
        assert _sample(after, "process_resident_memory_bytes") > 0
        st = json.loads(_get(http, "/status.json"))
        assert {(t["table"], t["state"], t["memrowset_rows"]) for t in st["tablets"]} <= \
            {("t", "RUNNING", n) for n in range(26)}
        assert sum(t["memrowset_rows"] for t in st["tablets"]) >= 20
        assert isinstance(st["maintenance"], list) and st["rss_bytes"] > 0
        page = _get(http, "/")
        assert "kudusql SQL front end" in page and "tablets (2)" in page
