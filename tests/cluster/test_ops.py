"""Operability of a real cluster (1 master, 3 tablet servers, 1 SQL front end, separate
processes on 127.0.0.1): every process's HTTP port (/metrics, /status.json, /), metric
values that move with the writes and scans, SHOW TABLETS per replica, the kudu_system
tables, EXPLAIN ANALYZE naming the servers, and what all of them say after kill -9 of a
tablet server."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.error
import urllib.request

import psycopg
import pytest

from tests.cluster.conftest import LocalCluster, _run

ROWS = 40


def http_get(addr: str, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", ""


def metric(addr: str, name: str, **labels) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
    _, _, text = http_get(addr, "/metrics")
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


@pytest.fixture(scope="module")
def opscluster(tmp_path_factory):
    # a server silent for 3 s counts as dead (the kill -9 test waits for FAILED)
    c = LocalCluster(str(tmp_path_factory.mktemp("ops") / "cluster"), 3,
                     ("--tserver-unresponsive-timeout", "3"))
    yield from _run(c)


def _by_role(status: list[dict], role: str) -> list[dict]:
    return [p for p in status if p["role"] == role]


def test_http_metrics_status_and_sql_views(opscluster):
    c = opscluster
    status = c.status()
    assert len(status) == 5
    for p in status:
        assert p["alive"] and p["http_addr"], p
        code, ctype, text = http_get(p["http_addr"], "/metrics")
        assert code == 200 and ctype.startswith("text/plain"), (p, code)
        assert "process_resident_memory_bytes" in text
        code, ctype, body = http_get(p["http_addr"], "/status.json")
        assert code == 200 and ctype == "application/json"
        assert json.loads(body)["role"] == p["role"]
        code, ctype, page = http_get(p["http_addr"], "/")
        assert code == 200 and ctype.startswith("text/html") and "<h1>" in page
        assert http_get(p["http_addr"], "/nothing-here")[0] == 404
    tservers = _by_role(status, "tserver")
    master = _by_role(status, "master")[0]
    sql = _by_role(status, "sql")[0]

    def total(name, **labels):
        return sum(metric(t["http_addr"], name, **labels) for t in tservers)

    conn = c.connect()
    conn.execute("CREATE TABLE s (k BIGINT PRIMARY KEY, v TEXT) "
                 "PARTITION BY HASH (k) PARTITIONS 3 WITH (replication_factor = 3)")
    ins0, scans0 = total("kudusql_rows_written_total", op="insert"), \
        total("kudusql_scans_total", outcome="ok")
    stmts0 = metric(sql["http_addr"], "kudusql_sql_statements_total", command="INSERT")
    values = ", ".join(f"({k}, 'v{k}')" for k in range(ROWS))
    conn.execute(f"INSERT INTO s VALUES {values}")
    conn.execute("UPDATE s SET v = 'changed' WHERE k < 10")
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("INSERT INTO s VALUES (1, 'again')")
    # rows are counted on the leaders that applied them; the refused row is not
    assert total("kudusql_rows_written_total", op="insert") - ins0 == ROWS
    assert total("kudusql_rows_written_total", op="update") == 10
    assert total("kudusql_row_errors_total", code="ALREADY_PRESENT") == 1
    assert total("kudusql_write_duration_seconds_count") >= 3
    assert metric(sql["http_addr"], "kudusql_sql_statements_total",
                  command="INSERT") - stmts0 == 2
    assert metric(sql["http_addr"], "kudusql_sql_statements_total", command="INSERT",
                  outcome="23") == 1
    assert metric(sql["http_addr"], "kudusql_sql_rows_affected_total",
                  command="INSERT") == ROWS
    assert conn.execute("SELECT count(*) FROM s").fetchone()[0] == ROWS
    assert total("kudusql_scans_total", outcome="ok") - scans0 >= 3
    assert total("kudusql_scan_rows_returned_total") >= ROWS
    assert sum(metric(t["http_addr"], "kudusql_tablet_replicas", role="LEADER")
               for t in tservers) == 3

    # each tablet server's status page: its replicas with role, term, state, WAL bytes
    uuids = {t["uuid"]: t for t in tservers}
    leaders = 0
    for t in tservers:
        st = json.loads(http_get(t["http_addr"], "/status.json")[2])
        assert st["uuid"] == t["uuid"] and st["rpc_addr"] == t["addr"]
        assert st["rss_bytes"] > 10 * 2**20 and st["heartbeat_age_s"] is not None
        assert len(st["tablets"]) == 3
        for r in st["tablets"]:
            assert r["table"] == "s" and r["state"] == "RUNNING" and r["term"] >= 1
            assert r["wal_bytes"] > 0 and r["leader"] in uuids
            leaders += r["role"] == "LEADER"
    assert leaders == 3
    mst = json.loads(http_get(master["http_addr"], "/status.json")[2])
    assert mst["raft_role"] == "LEADER" and [t["name"] for t in mst["tables"]] == ["s"]
    assert {t["uuid"]: t["http_addr"] for t in mst["tservers"] if t["live"]} == \
        {t["uuid"]: t["http_addr"] for t in tservers}
    assert metric(master["http_addr"], "kudusql_tservers", state="live") == 3
    assert metric(master["http_addr"], "kudusql_rpc_requests_total",
                  method="tserver_heartbeat", outcome="ok") > 0

    # SHOW TABLETS: one row per replica, each tablet's leader first
    rows = conn.execute("SHOW TABLETS s").fetchall()
    assert len(rows) == 9
    for i in range(0, 9, 3):
        tablet = rows[i:i + 3]
        assert {r[0] for r in tablet} == {tablet[0][0]} and tablet[0][2] == 3
        assert [r[5] for r in tablet] == ["LEADER", "FOLLOWER", "FOLLOWER"]
        assert all(r[6] == "RUNNING" for r in tablet)
        assert {(r[3], r[4]) for r in tablet} == {(u, t["addr"]) for u, t in uuids.items()}
    leader_of = {r[0]: r[4] for r in rows if r[5] == "LEADER"}

    # the kudu_system tables, with SQL over them
    servers = conn.execute("SELECT uuid, role, rpc_addr, http_addr, live, replicas, leaders "
                           "FROM kudu_system.servers ORDER BY role, rpc_addr").fetchall()
    assert [s[1] for s in servers] == ["master", "tserver", "tserver", "tserver"]
    assert servers[0][2] == master["addr"] and servers[0][3] == master["http_addr"]
    assert all(s[4] for s in servers)
    assert sum(s[6] for s in servers[1:]) == 3 and all(s[5] == 3 for s in servers[1:])
    by_server = conn.execute(
        "SELECT s.rpc_addr, count(*) FROM kudu_system.replicas r JOIN kudu_system.servers s "
        "ON r.server_uuid = s.uuid WHERE r.role = 'LEADER' AND r.table_name = 's' "
        "GROUP BY s.rpc_addr").fetchall()
    assert sum(n for _, n in by_server) == 3
    assert dict(by_server) == {a: list(leader_of.values()).count(a)
                               for a in set(leader_of.values())}
    parts = conn.execute("SELECT tablet_id, partition FROM kudu_system.replicas "
                         "WHERE table_name = 's'").fetchall()
    assert set(parts) == {(r[0], r[1]) for r in rows} and len(parts) == 9
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("SELECT * FROM kudu_system.nothing")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("DROP TABLE kudu_system.servers")

    # EXPLAIN ANALYZE names the server that served each tablet: the leaders
    plan = [r[0] for r in conn.execute("EXPLAIN ANALYZE SELECT * FROM s")]
    served = [ln for ln in plan if "served by tserver" in ln]
    assert served, plan
    named = {}
    for ln in served:
        m = re.search(r"served by tserver (\w+) at (\S+): (\d+) tablets? \(([^)]*)\)", ln)
        assert m, ln
        for tid in m.group(4).split(", "):
            named[tid] = m.group(2)
    assert named == {tid[:8]: addr for tid, addr in leader_of.items()}
    conn.close()


def test_master_stream_endpoint_locates_tablet_servers(opscluster):
    """Tablet servers report their Arrow stream endpoint in heartbeats; the master's own
    endpoint (`cluster start` gives it one) answers `locate` without the cluster secret:
    the live servers' endpoints and, per tablet, its replicas' (leader first); every
    other request is refused in SQL's words, a missing table is 42P01."""
    from tests.spark.test_arrow_stream import call
    c = opscluster
    procs = c.processes()
    master = next(p for p in procs if p["role"] == "master")
    want = sorted(f"127.0.0.1:{p['arrow_port']}" for p in procs if p["role"] == "tserver")
    ep = f"127.0.0.1:{master['arrow_port']}"
    conn = c.connect()
    conn.execute("CREATE TABLE loc (k BIGINT PRIMARY KEY, v TEXT) "
                 "PARTITION BY HASH (k) PARTITIONS 2 WITH (replication_factor = 3)")
    conn.close()
    deadline = time.monotonic() + 30
    while True:   # a server's first heartbeat may precede its endpoint: the next names it
        status, ans = call(ep, {"op": "locate", "table": "loc"})
        assert status == 0, ans
        if sorted(ans["endpoints"]) == want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(ans["endpoints"]) == want
    by_uuid = {t["uuid"]: t for t in c.status() if t["role"] == "tserver"}
    assert len(ans["tablets"]) == 2 and ans["table_id"]
    rpc_of_stream = {f"127.0.0.1:{p['arrow_port']}": p["addr"] for p in procs
                     if p["role"] == "tserver"}
    for t in ans["tablets"]:
        assert sorted(t["endpoints"]) == want
        # the first is the server whose replica leads the tablet
        leader = next(u for u, s in by_uuid.items() if s["addr"] == rpc_of_stream[
            t["endpoints"][0]])
        st = json.loads(http_get(by_uuid[leader]["http_addr"], "/status.json")[2])
        assert next(r for r in st["tablets"] if r["tablet_id"] == t["tablet_id"])[
            "role"] == "LEADER"
    assert call(ep, {"op": "locate"})[1]["endpoints"] == ans["endpoints"]
    status, err = call(ep, {"op": "locate", "table": "no_such"})
    assert status == 1 and err["sqlstate"] == "42P01", err
    status, err = call(ep, {"op": "plan", "table": "loc"})
    assert status == 1 and err["sqlstate"] == "0A000" and "locate" in err["message"]
    with c.connect() as conn:   # the next test counts each server's replicas
        conn.execute("DROP TABLE loc")


def test_kill9_shows_failed_replicas_and_new_leaders(opscluster):
    c = opscluster
    status = c.status()
    tservers = _by_role(status, "tserver")
    master = _by_role(status, "master")[0]
    conn = c.connect()
    rows = conn.execute("SHOW TABLETS s").fetchall()
    leads = {}
    for r in rows:
        if r[5] == "LEADER":
            leads[r[3]] = leads.get(r[3], 0) + 1
    victim = next(t for t in tservers if t["uuid"] == max(leads, key=leads.get))
    survivors = [t for t in tservers if t is not victim]
    el0 = sum(metric(t["http_addr"], "kudusql_raft_elections_total") for t in survivors)
    lc0 = sum(metric(t["http_addr"], "kudusql_raft_leader_changes_total") for t in survivors)
    os.kill(victim["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        rows = conn.execute("SHOW TABLETS s").fetchall()
        failed = {r[6] for r in rows if r[3] == victim["uuid"]} == {"FAILED"}
        led = {r[0] for r in rows if r[5] == "LEADER" and r[3] != victim["uuid"]}
        if failed and len(led) == 3:
            break
        assert time.monotonic() < deadline, rows
        time.sleep(0.3)
    assert sum(metric(t["http_addr"], "kudusql_raft_elections_total")
               for t in survivors) > el0
    assert sum(metric(t["http_addr"], "kudusql_raft_leader_changes_total")
               for t in survivors) > lc0
    assert metric(master["http_addr"], "kudusql_tservers", state="dead") == 1
    dead = conn.execute("SELECT live, replicas FROM kudu_system.servers WHERE uuid = %s",
                        (victim["uuid"],)).fetchall()
    assert dead == [(False, 3)]
    assert conn.execute("SELECT count(*) FROM s").fetchone()[0] == ROWS
    st = {p["name"]: p for p in c.status()}
    assert not st[next(p["name"] for p in status if p["uuid"] == victim["uuid"])]["alive"]
    conn.close()
