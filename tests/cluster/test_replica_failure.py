"""Tablet copy installs atomically; broken replicas fail alone (issue 24, item 6).

- engine/tserver/tablet_copy.py: a crash at every step of an install opens either the old
  replica state or the new one (data, Raft log, consensus metadata from the same side),
  never a mix; the replica then catches up (in-process servers; and a real process exit at
  a failpoint, os._exit, as kill -9 leaves it).
- engine/tserver/tablet_server.py: a replica that cannot be opened at start is FAILED, the
  server serves the others.
- engine/tserver/raft_host.py: a Raft safety violation or a failed apply stops the replica
  (FAILED, CRITICAL log), it is not logged and stepped on.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pytest

from engine.clock import HybridClock
from engine.config import TabletConfig
from engine.consensus.log import NO_OP, LogEntry
from engine.consensus.messages import AppendEntries, OpId
from engine.consensus.raft import RaftOptions
from engine.rpc.rpc import RemoteError, RpcClient
from engine.tserver import tablet_copy
from engine.tserver.raft_host import ReplicaFailed, Transport
from engine.tserver.status import replica_report, web_status
from engine.tserver.tablet_copy import (
    FAILPOINT_ENV,
    INSTALL_STEPS,
    CopyFailpoint,
    CopySessions,
    run_copy,
)
from engine.tserver.tablet_replica import REPLICATED_WRITE, TabletNotRunning, TabletReplica
from engine.tserver.tablet_server import TabletServer
from tests.cluster.test_tserver import (  # noqa: F401 - gc_cluster: a fixture
    SCHEMA,
    SECRET,
    _wait,
    _write,
    caught_up_by_copy,
    gc_cluster,
    gcd_lagger,
)

CFG = TabletConfig(fsync=True, wal_sync="commit", wal_segment_bytes=2048)
OPTS = RaftOptions(heartbeat_ticks=1, election_timeout_ticks=6, log_retention_entries=20)


# -- one replica, in-process, no network ---------------------------------------------------------
def _open(path, uuid, peers, transport, clock=None) -> TabletReplica:
    clock = clock or HybridClock()
    if not os.path.exists(path):
        TabletReplica.create(str(path), "t1", "x", "t", SCHEMA, [(p, "") for p in peers],
                             CFG, clock)
    return TabletReplica(str(path), uuid, clock, transport, OPTS, CFG)


def _insert(r: TabletReplica, seq: int, keys) -> dict:
    rows = pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]})
    return r.write("c1", seq, 0, np.ones(len(keys), np.int8), rows, timeout_s=10)


class _Loopback:
    """run_copy's RPC client, calling the source's CopySessions in this process."""

    def __init__(self, sessions: CopySessions, src: TabletReplica):
        self.sessions, self.src = sessions, src

    def call(self, addr, method, p, timeout_s=None):
        if method == "copy_begin":
            return self.sessions.begin(self.src)
        return {"copy_fetch": self.sessions.fetch, "copy_end": self.sessions.end}[method](p)


def _state(r: TabletReplica) -> tuple:
    """What must come from one side of an install: data, Raft log, consensus metadata."""
    return (r.tablet.count_rows(), r.tablet.anchor_index(), r.storage.first_index,
            r.storage.last_index, r.raft.term, r.raft.voted_for,
            [p.uuid for p in r.raft.committed_config.peers])


@pytest.fixture
def source(tmp_path):
    """A sole-voter replica "src" with flushed rows and a log suffix past its flush."""
    transport = Transport(RpcClient(SECRET))
    src = _open(tmp_path / "src", "src", ["src"], transport)
    deadline = time.monotonic() + 10
    while not src.raft.is_leader:
        assert time.monotonic() < deadline
        src.tick()
        time.sleep(0.01)
    _wait(lambda: _try_ready(src))
    for i in range(5):
        _insert(src, i + 1, range(i * 10, i * 10 + 10))
    src.tablet.flush_mrs()
    _insert(src, 6, [100, 101])  # the suffix: logged and applied, not flushed
    sessions = CopySessions(str(tmp_path / "src-server"))
    try:
        yield src, _Loopback(sessions, src), transport
    finally:
        src.close()
        transport.stop()


def _try_ready(r) -> bool:
    try:
        r.check_leader_ready()
        return True
    except Exception:  # noqa: BLE001 - not yet
        return False


@pytest.mark.parametrize("step", INSTALL_STEPS)
def test_a_crash_at_every_install_step_opens_the_old_or_the_new_state(
        tmp_path, source, monkeypatch, step):
    src, rpc, transport = source
    ddir = tmp_path / "dst"
    dst = _open(ddir, "dst", ["src", "dst"], transport)
    with dst.lock:  # a vote of term 0, to see it kept (same term) or dropped
        dst.raft.voted_for = "src"
        dst.cmeta_store.save(dst.raft.metadata())
    old = _state(dst)
    assert old[0] == 0 and old[3] == 0
    monkeypatch.setenv(FAILPOINT_ENV, f"{step}:raise")
    with pytest.raises((CopyFailpoint, ReplicaFailed)):
        run_copy(dst, rpc, "src")
    committed = INSTALL_STEPS.index(step) >= INSTALL_STEPS.index("committed")
    # past the point where the old state was closed the live replica is FAILED
    assert (dst.failed is not None) == committed, dst.failed
    if committed:
        assert replica_report(dst)["state"] == "FAILED"
    dst.close()  # "the crash": nothing more is written (a FAILED replica's files stay)
    monkeypatch.delenv(FAILPOINT_ENV)

    again = _open(ddir, "dst", ["src", "dst"], transport)  # recovery runs at open
    try:
        got = _state(again)
        a = src.tablet.anchor_index() - 1
        new = (52, a + 1, a + 1, src.storage.last_index, src.raft.term, None, ["src"])
        assert got == (new if committed else old), (step, got, old, new)
        left = sorted(os.listdir(ddir))
        assert left == ["consensus-meta.json", "raft-wal", "replica.json", "tablet"], left
        if not committed:  # the copy is asked for again and now installs
            assert run_copy(again, rpc, "src")
            assert _state(again) == new
    finally:
        again.close()


# -- the whole copy in a Raft group: crash in the install, restart, catch up --------------------
def test_a_failed_install_leaves_the_replica_failed_and_a_restart_rolls_it_forward(
        tmp_path, gc_cluster, monkeypatch):
    start, state = gc_cluster
    i, port = gcd_lagger(start, state)
    ts, c = state["ts"], state["client"]
    monkeypatch.setenv(FAILPOINT_ENV, "moved-raft-wal:raise")  # tablet moved, log not yet
    ts[i] = start(i, port)
    _wait(lambda: ts[i].replicas["t1"].failed is not None, timeout=30)
    st = ts[i].status()["tablets"]["t1"]
    assert st["state"] == "FAILED" and st["role"] == "UNKNOWN"
    assert "tablet copy install failed" in st["error"]
    with pytest.raises(RemoteError, match="has failed"):
        c.call(ts[i].addr, "lookup", {"tablet": "t1", "key": [1]})
    monkeypatch.delenv(FAILPOINT_ENV)
    ts[i].stop()
    ts[i] = start(i, port)  # recovery finishes the install: new data, new log, new cmeta
    r = ts[i].replicas["t1"]
    assert r.failed is None and r.storage.first_index > 2
    assert r.tablet.anchor_index() == r.storage.first_index
    caught_up_by_copy(ts, c, i)


def test_a_process_killed_in_the_install_restarts_consistent(tmp_path, gc_cluster):
    """A real process exit (os._exit: no cleanup, as kill -9) half-way through the install's
    roll forward; the restarted server opens the new state and catches up."""
    start, state = gc_cluster
    i, port = gcd_lagger(start, state)
    ts, c = state["ts"], state["client"]
    peers = {t.uuid: t.addr for t in ts}
    child = (
        "import sys, time\n"
        "from engine.config import TabletConfig\n"
        "from engine.tserver import tablet_replica\n"
        "from engine.tserver.tablet_server import TabletServer\n"
        "tablet_replica.GC_MIN_ENTRIES = 20\n"
        "cfg = TabletConfig(fsync=False, wal_sync='never', wal_segment_bytes=2048)\n"
        f"t = TabletServer({str(tmp_path / f'ts{i}')!r}, '127.0.0.1', {port}, {SECRET!r}, [],"
        " tick_ms=30, election_ticks=6, fsync=False, tablet_config=cfg,"
        " log_retention_entries=20)\n"
        f"t.directory.update({peers!r})\n"
        "time.sleep(60)\n"
        "sys.exit(3)\n")
    env = dict(os.environ, **{FAILPOINT_ENV: "moved-tablet"})
    proc = subprocess.run([sys.executable, "-c", child], env=env, timeout=90,
                          capture_output=True, text=True, cwd=os.getcwd())
    assert proc.returncode == 137, proc.stderr[-3000:]
    assert "tablet copy failpoint at moved-tablet" in proc.stderr
    d = tmp_path / f"ts{i}" / "tablets" / "t1"
    assert (d / tablet_copy.READY).is_dir()  # killed between the commit and its end
    ts[i] = start(i, port)
    assert not (d / tablet_copy.READY).exists()
    r = ts[i].replicas["t1"]
    assert r.failed is None and r.tablet.anchor_index() == r.storage.first_index > 2
    caught_up_by_copy(ts, c, i)


# -- start-up: one broken replica does not stop the server -----------------------------------
def test_a_replica_that_cannot_open_is_failed_and_the_server_serves_the_rest(tmp_path):
    def start(i, port=0):
        return TabletServer(str(tmp_path / f"ts{i}"), "127.0.0.1", port, SECRET, [],
                            tick_ms=30, election_ticks=6, fsync=False)
    ts = [start(i) for i in range(3)]
    c = RpcClient(SECRET)
    try:
        peers = [[t.uuid, t.addr] for t in ts]
        for tid in ("t1", "t2"):
            for t in ts:
                c.call(t.addr, "create_replica", {"tablet_id": tid, "table_id": "x",
                                                  "table_name": f"tab_{tid}",
                                                  "schema": SCHEMA.to_dict(), "peers": peers})
        _write(c, ts, 1, [1, 2])
        victim = 2
        port = ts[victim].server.port
        ts[victim].stop()
        bad = tmp_path / f"ts{victim}" / "tablets" / "t2" / "consensus-meta.json"
        bad.write_bytes(b"{ not json")
        ts[victim] = start(victim, port)  # without the fix: Corruption out of __init__
        t = ts[victim]
        assert bad.read_bytes() == b"{ not json"  # left untouched
        st = t.status()["tablets"]
        assert st["t2"]["state"] == "FAILED" and st["t2"]["role"] == "UNKNOWN"
        assert "consensus-meta.json" in st["t2"]["error"] and st["t2"]["table"] == "tab_t2"
        assert st["t1"]["state"] != "FAILED"
        page = {x["tablet_id"]: x for x in web_status(t)["tablets"]}
        assert page["t2"]["state"] == "FAILED" and "error" in page["t2"]
        with pytest.raises(RemoteError, match="has failed"):
            c.call(t.addr, "lookup", {"tablet": "t2", "key": [1]})
        assert c.call(t.addr, "create_replica", {  # not created over its files
            "tablet_id": "t2", "table_id": "x", "table_name": "tab_t2",
            "schema": SCHEMA.to_dict(), "peers": peers}) == {"created": False}
        # t1 on that server serves (catches up); t2's other replicas go on without it
        _write(c, ts, 2, [3])
        _wait(lambda: t.replicas["t1"].tablet.count_rows() == 3)
        live = [x for x in ts if x is not t]
        res = c.put(_leader_of(live, "t2").addr, {"tablet": "t2", "client_id": "c2",
                                                  "seq": 1}, _rows([7]))
        assert res["num_applied"] == 1
        assert c.call(t.addr, "delete_replica", {"tablet_id": "t2"})["deleted"] is True
        assert "t2" not in t.status()["tablets"]
    finally:
        for t in ts:
            try:
                t.stop()
            except Exception:  # noqa: BLE001 - teardown
                pass
        c.close()


def _rows(keys):
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys],
                     "__op": pa.array([1] * len(keys), pa.int8())})


def _leader_of(ts, tid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t in ts:
            r = t.replicas.get(tid)
            if r is not None and not r.stopped and _try_ready(r):
                return t
        time.sleep(0.02)
    raise AssertionError(f"no leader of {tid}")


# -- safety violations and failed applies are not swallowed ----------------------------------
def _follower(tmp_path):
    transport = Transport(RpcClient(SECRET))
    return _open(tmp_path / "f", "f", ["L", "f"], transport), transport


def _entries(term, lo, hi, type_=NO_OP, body=b""):
    return tuple(LogEntry(term, i, 1000 + i, type_, body) for i in range(lo, hi + 1))


def _deliver(r, msgs):
    with cf.ThreadPoolExecutor(1) as pool:
        r.deliver(msgs, pool)  # the network path (RaftHost._drain)


def test_a_leader_overwriting_a_committed_entry_fails_the_replica(tmp_path, caplog):
    r, transport = _follower(tmp_path)
    try:
        _deliver(r, [AppendEntries("L", "f", 1, OpId(0, 0), _entries(1, 1, 3), 3, 0)])
        assert r.raft.commit_index == 3 and r._view.applied == 3 and r.failed is None
        caplog.set_level(logging.CRITICAL, logger="engine.tserver.raft_host")
        # a (broken) leader of term 2 rewrites entries 1..3, committed here
        _deliver(r, [AppendEntries("L", "f", 2, OpId(0, 0), _entries(2, 1, 3), 3, 0)])
        assert r.failed is not None and "SAFETY VIOLATION" in r.failed
        assert r.stopped and replica_report(r)["state"] == "FAILED"
        crit = [x for x in caplog.records if x.levelno == logging.CRITICAL]
        assert len(crit) == 1 and "SAFETY VIOLATION" in crit[0].getMessage()
        assert crit[0].exc_info is not None  # with the traceback
        assert "overwrites committed entry" in str(crit[0].exc_info[1])
        # stopped: neither stepped nor ticked any more
        before = (r.raft.term, r.storage.last_index, r.raft.commit_index)
        _deliver(r, [AppendEntries("L", "f", 3, OpId(3, 2), _entries(3, 4, 5), 5, 0)])
        for _ in range(20):
            r.tick()
        assert (r.raft.term, r.storage.last_index, r.raft.commit_index) == before
        assert len([x for x in caplog.records if x.levelno == logging.CRITICAL]) == 1
    finally:
        r.close()
        transport.stop()


def test_an_apply_that_raises_fails_the_replica(tmp_path, caplog):
    r, transport = _follower(tmp_path)
    try:
        caplog.set_level(logging.CRITICAL, logger="engine.tserver.raft_host")
        bad = _entries(1, 2, 2, REPLICATED_WRITE, b"\x01")  # not a request envelope
        _deliver(r, [AppendEntries("L", "f", 1, OpId(0, 0), _entries(1, 1, 1) + bad, 2, 0)])
        assert r.failed is not None and r.failed.startswith("apply failed")
        assert r.stopped and r._view.applied == 1  # entry 2 was never counted applied
        crit = [x for x in caplog.records if x.levelno == logging.CRITICAL]
        assert len(crit) == 1 and "apply failed" in crit[0].getMessage()
        with pytest.raises(TabletNotRunning):
            r.write("c", 1, 0, np.ones(1, np.int8),
                    pa.table({"k": pa.array([1], pa.int64()), "v": ["x"]}), 1.0)
    finally:
        r.close()
        transport.stop()


def test_a_transient_error_while_stepping_is_logged_and_the_replica_goes_on(
        tmp_path, monkeypatch, caplog):
    r, transport = _follower(tmp_path)
    try:
        calls = []

        def flaky(msg):  # e.g. the network: a peer's address cannot be resolved
            calls.append(msg)
            raise RemoteError("peer unreachable")
        monkeypatch.setattr(r.raft, "step", flaky)
        _deliver(r, [AppendEntries("L", "f", 1, OpId(0, 0), _entries(1, 1, 1), 1, 0)])
        assert calls and r.failed is None and not r.stopped
        assert not [x for x in caplog.records if x.levelno == logging.CRITICAL]
    finally:
        r.close()
        transport.stop()


def test_an_install_in_our_own_term_keeps_our_vote(tmp_path, source):
    """cmeta of an install: term = max(ours, the source's); the vote is kept when that is
    our term (a vote must never be forgotten within its term), else dropped (the
    parametrized test above: term 0 -> the source's, vote dropped)."""
    src, rpc, transport = source
    dst = _open(tmp_path / "d2", "dst", ["src", "dst"], transport)
    try:
        with dst.lock:
            dst.raft.term, dst.raft.voted_for = src.raft.term, "dst"
            dst.cmeta_store.save(dst.raft.metadata())
        assert run_copy(dst, rpc, "src")
        assert (dst.raft.term, dst.raft.voted_for) == (src.raft.term, "dst")
        with open(tmp_path / "d2" / "consensus-meta.json") as f:
            cm = json.load(f)
        assert cm["current_term"] == src.raft.term and cm["voted_for"] == "dst"
        assert [p["uuid"] for p in cm["committed_config"]["peers"]] == ["src"]
    finally:
        dst.close()
