"""A replica whose disk fails (its log's fsync returns EIO) on a real RF=3 cluster.

Kudu's behaviour, which kudusql follows (engine/tserver/raft_host.py, "Failure"): the
replica is FAILED and stops — it neither acks, votes, leads nor serves — a leader hands
leadership over first, the tablet stays available with its other two replicas, and nothing
acknowledged is lost; the master replaces the FAILED replica when a live server is free.

The fault is injected the way Kudu's `--env_inject_eio` does it: the `failpoint` RPC's
`inject_eio {glob, after}` (engine/fs.py), honoured only by processes started with
KUDUSQL_FAULT_INJECTION=1. Writers insert unique keys through the SQL front end (the
cluster client underneath) the whole time; the history check: every acknowledged key is
read back exactly once, no key that was never attempted appears, no fresh key is refused
as a duplicate (a retry applied twice), and every tablet keeps accepting writes.

Default suite: one 3-server cluster, the leader's replica of one tablet and a follower's
replica of another fail while writes run. KUDUSQL_LONG=1 adds a 4-server cluster where the
FAILED replica is replaced (3-4-3), tombstoned, and a full restart keeps every row.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.cluster.conftest import LocalCluster, _run
from tests.cluster.test_cluster import Writers, _create, _keys, _wait_acks

LONG = os.environ.get("KUDUSQL_LONG") == "1"
BATCH_KEYS = 10_000_000  # the writers' keys are below; _every_tablet_takes_writes' above


@pytest.fixture
def eio_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("KUDUSQL_FAULT_INJECTION", "1")  # inherited by every process
    yield from _run(LocalCluster(str(tmp_path / "cluster")))


@pytest.fixture
def eio_cluster4(tmp_path, monkeypatch):
    monkeypatch.setenv("KUDUSQL_FAULT_INJECTION", "1")
    yield from _run(LocalCluster(str(tmp_path / "cluster"), 4,
                                 ("--tserver-unresponsive-timeout", "3")))


def _servers(c) -> dict[str, str]:
    return {p["uuid"]: p["addr"] for p in c.status() if p["role"] == "tserver"}


def _reports(rpc, servers) -> dict[str, dict]:
    """uuid -> that server's replica reports (tablet id -> report)."""
    return {u: rpc.call(a, "status")["tablets"] for u, a in servers.items()}


def _roles(rpc, servers, tid) -> dict[str, tuple]:
    return {u: (t.get(tid, {}).get("role"), t.get(tid, {}).get("state"))
            for u, t in _reports(rpc, servers).items()}


def _inject(rpc, addr, tid, after):
    """Fail every fsync of tablet `tid`'s log on the server at `addr` after `after` more."""
    got = rpc.call(addr, "failpoint", {"inject_eio": {"glob": f"*/tablets/{tid}/raft-wal",
                                                      "after": after}})
    assert got["inject_eio"]["after"] == after, got


def _wait_failed(rpc, servers, uuid, tid, timeout_s=20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        rep = rpc.call(servers[uuid], "status")["tablets"].get(tid, {})
        if rep.get("state") == "FAILED":
            return rep
        assert time.monotonic() < deadline, f"{uuid}'s replica of {tid} never FAILED: {rep}"
        time.sleep(0.1)


def _wait_new_leader(rpc, servers, tid, not_on, timeout_s=20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        roles = _roles(rpc, servers, tid)
        lead = [u for u, (role, state) in roles.items()
                if role == "LEADER" and state == "RUNNING" and u != not_on]
        if lead:
            return lead[0]
        assert time.monotonic() < deadline, f"no new leader of {tid}: {roles}"
        time.sleep(0.1)


def _check_history(c, w: Writers) -> set[int]:
    # an INSERT of a fresh key can only fail as a duplicate if a retry applied it twice
    assert not [e for e in w.errors if e.startswith("23505")], w.errors[:5]
    with c.connect() as conn:
        keys = _keys(conn)
    assert len(keys) == len(set(keys)), "a key was read back more than once"
    present = {k for k in keys if 0 <= k < BATCH_KEYS}  # the writers' keys
    lost = w.all_acked() - present
    assert not lost, f"lost {len(lost)} acknowledged rows, e.g. {sorted(lost)[:5]}"
    assert present <= w.all_attempted(), "rows that were never attempted appeared"
    return present


def _every_tablet_takes_writes(c, base: int) -> None:
    """A batch of keys spread over every hash bucket is acknowledged whole."""
    with c.connect() as conn:
        conn.execute("INSERT INTO s SELECT x, 0, 'after' FROM generate_series(%s, %s) g(x)",
                     (base, base + 299))
        n = conn.execute("SELECT count(*) FROM s WHERE k BETWEEN %s AND %s",
                         (base, base + 299)).fetchone()[0]
    assert n == 300


def _fail_leader_then_follower(c, rpc, servers, w: Writers) -> tuple:
    """With writers running: fail the log of tablet A's leader, then of a follower of
    another tablet B (on another server). Returns ((A, victim), (B, victim), when A's
    leader was failed)."""
    reports = _reports(rpc, servers)
    tablets = sorted({tid for t in reports.values() for tid in t})
    assert len(tablets) == 3, reports
    leader_of = {tid: u for u, t in reports.items() for tid, r in t.items()
                 if r.get("role") == "LEADER"}
    a = tablets[0]
    lv = leader_of[a]
    _wait_acks(w, 100)
    acked0 = len(w.all_acked())
    t_fail = time.monotonic()
    _inject(rpc, servers[lv], a, after=2)
    _wait_acks(w, acked0 + 200, timeout=60)
    _every_tablet_takes_writes(c, 10_000_000)  # A included: available without its leader
    new = _wait_new_leader(rpc, servers, a, not_on=lv)
    print(f"\nleader {lv[:8]} of {a[:8]} failed its disk; {new[:8]} leads")
    rep = _wait_failed(rpc, servers, lv, a)
    assert "disk failed" in rep["error"] and "injected EIO" in rep["error"], rep
    assert rep["role"] == "UNKNOWN", rep
    # B: a tablet the first victim does not lead; its victim a follower on another server
    b = next(tid for tid in tablets[1:] if leader_of[tid] != lv)
    fv = next(u for u in servers if u not in (lv, leader_of[b]))
    acked1 = len(w.all_acked())
    _inject(rpc, servers[fv], b, after=2)
    _wait_acks(w, acked1 + 200, timeout=60)
    _every_tablet_takes_writes(c, 20_000_000)
    rep = _wait_failed(rpc, servers, fv, b)
    assert rep["role"] == "UNKNOWN", rep
    # the failed replicas stay failed (they neither vote nor serve); the others run
    roles = _reports(rpc, servers)
    assert roles[lv][a]["state"] == "FAILED" and roles[fv][b]["state"] == "FAILED"
    for u, t in roles.items():
        for tid, r in t.items():
            if (u, tid) not in ((lv, a), (fv, b)):
                assert r["state"] == "RUNNING", (u, tid, r)
    return (a, lv), (b, fv), t_fail


def test_a_failed_disk_fails_the_replica_and_the_tablet_stays_available(eio_cluster):
    from kudusql.cluster import rpc_client_for
    c = eio_cluster
    rpc = rpc_client_for(c.dir, 5)
    try:
        servers = _servers(c)
        with c.connect() as conn:
            _create(conn)
            conn.execute("INSERT INTO s VALUES (-1, -1, 'first')")
        with Writers(c) as w:
            (a, lv), (b, fv), t_fail = _fail_leader_then_follower(c, rpc, servers, w)
        gap = w.gap_after(t_fail)
        print(f"write gap after the leader's disk failed: {gap:.2f} s; "
              f"{len(w.all_acked())} acked, "
              f"{len(w.all_attempted()) - len(w.all_acked())} unknown")
        assert gap < 5.0, f"writes resumed only after {gap:.2f} s"
        _check_history(c, w)
        _every_tablet_takes_writes(c, 30_000_000)
        # a failed disk does not take its server down; it says why, once, at CRITICAL
        assert all(p["alive"] for p in c.status())
        logs = c.logs()
        assert "disk failed" in logs and "stopped for good" in logs
        # a stopped replica serves nothing: asked directly, it refuses
        with pytest.raises(Exception, match="has failed"):
            rpc.call(servers[lv], "tablet_ts", {"tablet": a})
    finally:
        rpc.close()


@pytest.mark.skipif(not LONG, reason="KUDUSQL_LONG=1: re-replication of a FAILED replica")
def test_a_failed_replica_is_replaced_and_a_restart_keeps_every_row(eio_cluster4):
    from kudusql.cluster import rpc_client_for
    c = eio_cluster4
    rpc = rpc_client_for(c.dir, 5)
    try:
        with c.connect() as conn:
            _create(conn)
            conn.execute("INSERT INTO s VALUES (-1, -1, 'first')")
        servers = _servers(c)
        master = next(p for p in c.processes() if p["role"] == "master")["addr"]
        table_id = rpc.call(master, "get_table", {"name": "s"})["table"]["id"]

        def locations():
            return rpc.call(master, "locations", {"table_id": table_id})["locations"]
        reports = _reports(rpc, servers)
        leader_of = {tid: u for u, t in reports.items() for tid, r in t.items()
                     if r.get("role") == "LEADER"}
        a = sorted(leader_of)[0]
        lv = leader_of[a]
        with Writers(c) as w:
            _wait_acks(w, 100)
            _inject(rpc, servers[lv], a, after=2)
            _wait_failed(rpc, servers, lv, a)
            # replaced: three live replicas, none on the victim (3-4-3 through the leader)
            deadline = time.monotonic() + 60
            while True:
                reps = locations()[a]["replicas"]
                if len(reps) == 3 and lv not in [r["uuid"] for r in reps] and \
                        all(r["live"] for r in reps):
                    break
                assert time.monotonic() < deadline, f"FAILED replica not replaced: {reps}"
                time.sleep(0.5)
            # and the evicted FAILED replica becomes a tombstone on its server
            deadline = time.monotonic() + 30
            while a not in rpc.call(servers[lv], "status")["tombstones"]:
                assert time.monotonic() < deadline, "the evicted FAILED replica stayed"
                time.sleep(0.5)
            _wait_acks(w, len(w.all_acked()) + 200, timeout=60)
        present = _check_history(c, w)
        # every replica of the tablet, the new one included, serves every row as leader
        for r in locations()[a]["replicas"]:
            c.make_leader(a, r["uuid"], timeout_s=30)
            with c.connect() as conn:
                assert {k for k in _keys(conn) if 0 <= k < BATCH_KEYS} == present
        c.stop()
        c.start(first=False)
        with c.connect() as conn:
            assert {k for k in _keys(conn) if 0 <= k < BATCH_KEYS} == present
        _every_tablet_takes_writes(c, 30_000_000)
    finally:
        rpc.close()
