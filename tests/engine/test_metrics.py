"""engine/metrics: the per-process registry, the counting wrappers and the HTTP server, in
process (the real processes are tests/cluster/test_ops.py and tests/wire/test_status_http.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pyarrow as pa
import pytest
from prometheus_client import generate_latest

from engine import errors
from engine.metrics.metrics import ServerMetrics
from engine.metrics.webserver import StatusServer, render_html


def _value(m: ServerMetrics, name: str, **labels) -> float:
    v = m.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


def test_registries_are_per_process_object():
    a, b = ServerMetrics("tserver"), ServerMetrics("tserver")
    a.elections.inc()
    assert _value(a, "kudusql_raft_elections_total") == 1
    assert _value(b, "kudusql_raft_elections_total") == 0


def test_rows_written_by_op_less_refused_rows():
    m = ServerMetrics("tserver")
    rows = pa.table({"k": [1, 2, 3, 4, 5], "__op": pa.array([1, 1, 1, 2, 3], pa.int8())})
    # rows 0 and 4 refused: 2 inserts, 1 update applied; 1 delete refused
    write = m.instrument_write(lambda cmd, t: {"timestamp": 1, "num_applied": 3,
                                               "row_errors": [[0, "ALREADY_PRESENT", "", [1]],
                                                              [4, "NOT_FOUND", "", [5]]]},
                               "__op")
    write({}, rows)
    assert _value(m, "kudusql_rows_written_total", op="insert") == 2
    assert _value(m, "kudusql_rows_written_total", op="update") == 1
    assert _value(m, "kudusql_rows_written_total", op="delete") == 0
    assert _value(m, "kudusql_row_errors_total", code="NOT_FOUND") == 1
    assert _value(m, "kudusql_rpc_requests_total", method="write", outcome="ok") == 1
    assert _value(m, "kudusql_write_duration_seconds_count") == 1


def test_rpc_outcomes_and_scan_counting():
    m = ServerMetrics("tserver")

    def refuse(p):
        raise errors.ServiceUnavailable("not the leader")

    def fail(p):
        raise errors.InvalidArgument("bad")
    h = m.instrument({"ok": lambda p: 1, "refuse": refuse, "fail": fail})
    assert h["ok"](None) == 1
    with pytest.raises(errors.ServiceUnavailable):
        h["refuse"](None)
    with pytest.raises(errors.InvalidArgument):
        h["fail"](None)
    assert _value(m, "kudusql_rpc_requests_total", method="refuse", outcome="refused") == 1
    assert _value(m, "kudusql_rpc_requests_total", method="fail", outcome="error") == 1
    batches = [pa.record_batch({"a": [1, 2, 3]}), pa.record_batch({"a": [4]})]
    scan = m.instrument_scan(lambda t: (batches[0].schema, iter(batches)))
    schema, it = scan({})
    assert _value(m, "kudusql_scans_total", outcome="ok") == 0  # counted when done
    assert sum(b.num_rows for b in it) == 4
    assert _value(m, "kudusql_scans_total", outcome="ok") == 1
    assert _value(m, "kudusql_scan_rows_returned_total") == 4


def test_elections_and_leader_changes_from_sampled_raft_state():
    m = ServerMetrics("tserver")
    m.observe_raft("t1", 5, "a")         # first sight (a restart): nothing counted
    m.observe_raft("t1", 5, "a")
    m.observe_raft("t1", 6, None)        # an election under way
    m.observe_raft("t1", 8, "b")         # two terms later, b leads
    m.observe_raft("t1", 8, "b")
    assert _value(m, "kudusql_raft_elections_total") == 3
    assert _value(m, "kudusql_raft_leader_changes_total") == 1


def test_status_gauges_and_sql_statements():
    m = ServerMetrics("sql")
    m.status_collector(lambda: {"tablets": [
        {"tablet_id": "t1", "table": "a", "role": "LEADER", "state": "RUNNING", "term": 3,
         "commit_index": 9, "applied_index": 7, "wal_bytes": 100},
        {"tablet_id": "t2", "table": "a", "role": "FOLLOWER", "state": "RUNNING", "term": 3,
         "wal_bytes": 50}],
        "maintenance": [{"op": "FlushMRS", "runs": 2, "seconds": 0.5, "last_seconds": 0.2}]})
    m.statement("INSERT", 0.01, 5)
    m.statement("SELECT", 0.01, 100)  # rows of a SELECT are not "affected"
    m.statement("insert", 0.01, None, "23505")
    assert _value(m, "kudusql_sql_statements_total", command="INSERT", outcome="ok") == 1
    assert _value(m, "kudusql_sql_statements_total", command="INSERT", outcome="23") == 1
    assert _value(m, "kudusql_sql_rows_affected_total", command="INSERT") == 5
    assert _value(m, "kudusql_sql_rows_affected_total", command="SELECT") == 0
    assert _value(m, "kudusql_tablet_replicas", role="LEADER", state="RUNNING") == 1
    assert _value(m, "kudusql_raft_apply_lag_entries", tablet="t1", table="a") == 2
    assert _value(m, "kudusql_wal_bytes", tablet="t2", table="a") == 50
    assert _value(m, "kudusql_maintenance_op_runs_total", op="FlushMRS") == 2
    assert b"kudusql_sql_statements_total" in generate_latest(m.registry)


def test_status_server_pages_and_404():
    m = ServerMetrics("master")
    state = {"role": "master", "note": "<script>x</script>", "tservers": [
        {"uuid": "u1", "addr": "127.0.0.1:1", "live": True, "last_heartbeat_s": 0.5}]}
    m.status_collector(lambda: state)
    srv = StatusServer("127.0.0.1", 0, m.registry, lambda: state, "test <server>")
    try:
        base = f"http://{srv.addr}"
        with urllib.request.urlopen(base + "/status.json", timeout=5) as r:
            assert json.loads(r.read()) == state
        with urllib.request.urlopen(base + "/", timeout=5) as r:
            page = r.read().decode()
        assert "&lt;script&gt;" in page and "<script>" not in page  # escaped
        assert "test &lt;server&gt;" in page and "u1" in page
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            text = r.read().decode()
        assert 'kudusql_tservers{state="live"} 1.0' in text
        assert 'kudusql_tserver_heartbeat_age_seconds{addr="127.0.0.1:1",uuid="u1"} 0.5' in text
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/nope", timeout=5)
        assert e.value.code == 404
    finally:
        srv.stop()


def test_render_html_lists_and_scalars():
    page = render_html("t", {"rss_bytes": 3 * 2**20, "tablets": [], "x": [{"a": 1}]})
    assert "3.0 MiB" in page and "tablets (0)" in page and "<td>1</td>" in page
