"""engine/tserver: three in-process tablet servers replicating one tablet over real RPC.

(The process-level kill -9 tests are in test_cluster.py; these check the replica logic:
replication, exactly-once retries, failover, restart from the WAL.)"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from engine import errors
from engine.rpc.rpc import RemoteError, RpcClient
from engine.schema import ColumnSchema as C
from engine.schema import DataType as T
from engine.schema import Schema
from engine.tserver.tablet_server import TabletServer

SCHEMA = Schema([C("k", T.INT64), C("v", T.STRING)], key=["k"])
SECRET = "test-secret"


def _start(path, port=0):
    return TabletServer(path, "127.0.0.1", port, SECRET, [], tick_ms=30, election_ticks=6,
                        fsync=False)


@pytest.fixture
def servers(tmp_path):
    ts = [_start(str(tmp_path / f"ts{i}")) for i in range(3)]
    c = RpcClient(SECRET)
    peers = [[t.uuid, t.addr] for t in ts]
    for t in ts:
        c.call(t.addr, "create_replica", {"tablet_id": "t1", "table_id": "x",
                                          "table_name": "t", "schema": SCHEMA.to_dict(),
                                          "peers": peers})
    state = {"ts": ts, "client": c, "path": tmp_path}
    try:
        yield state
    finally:
        for t in state["ts"]:
            try:
                t.stop()
            except Exception:  # noqa: BLE001 - teardown: stop the others
                pass
        c.close()


def _leader(ts, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t in ts:
            r = t.replicas.get("t1")
            if r is not None and not r.stopped and r.raft.is_leader:
                try:
                    r.check_leader_ready()
                    return t
                except errors.EngineError:
                    pass
        time.sleep(0.02)
    raise AssertionError("no leader within the timeout")


def _rows(keys):
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys],
                     "__op": pa.array([1] * len(keys), pa.int8())})


def _write(c, ts, seq, keys, client_id="c1", timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        t = _leader(ts)
        try:
            return c.put(t.addr, {"tablet": "t1", "client_id": client_id, "seq": seq},
                         _rows(keys))
        except (RemoteError, errors.ServiceUnavailable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _count(t):
    return t.replicas["t1"].tablet.count_rows()


def _wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_replicates_and_retries_apply_once(servers):
    ts, c = servers["ts"], servers["client"]
    r = _write(c, ts, 1, [1, 2, 3])
    assert r["num_applied"] == 3 and r["row_errors"] == []
    again = _write(c, ts, 1, [1, 2, 3])  # the same request id: the stored result
    assert again == r
    r2 = _write(c, ts, 2, [3, 4])
    assert r2["num_applied"] == 1 and [e[1] for e in r2["row_errors"]] == ["ALREADY_PRESENT"]
    _wait(lambda: all(_count(t) == 4 for t in ts))
    follower = next(t for t in ts if t is not _leader(ts))
    with pytest.raises(RemoteError) as ei:
        c.put(follower.addr, {"tablet": "t1", "client_id": "c1", "seq": 3}, _rows([9]))
    assert ei.value.leader_uuid == _leader(ts).uuid  # NOT_THE_LEADER with a hint


def test_failover_and_restart_keep_every_acknowledged_row(servers):
    ts, c, path = servers["ts"], servers["client"], servers["path"]
    _write(c, ts, 1, list(range(100)))
    old = _leader(ts)
    i = ts.index(old)
    old.stop()
    rest = [t for t in ts if t is not old]
    t0 = time.monotonic()
    _write(c, rest, 2, list(range(100, 200)))
    assert time.monotonic() - t0 < 5
    ports = [t.server.port for t in ts]
    ts[i] = _start(str(path / f"ts{i}"), ports[i])  # restarts from its WAL and catches up
    servers["ts"] = ts
    _wait(lambda: _count(ts[i]) == 200)
    for t in ts:
        t.stop()
    ts[:] = [_start(str(path / f"ts{j}"), ports[j]) for j in range(3)]  # all restart
    _write(c, ts, 3, [1000])
    leader = _leader(ts)
    assert _count(leader) == 201
    _wait(lambda: all(_count(t) == 201 for t in ts))


def test_restart_after_flush_starts_from_the_flushed_state(servers):
    """Replicas restart from flushed rowsets + the log after them (applied index = the
    flushed index): no row lost, none doubled, MVCC accepts the re-applied ops."""
    ts, c, path = servers["ts"], servers["client"], servers["path"]
    _write(c, ts, 1, list(range(100)))
    _wait(lambda: all(_count(t) == 100 for t in ts))
    for t in ts:
        t.replicas["t1"].tablet.flush_mrs()
    _write(c, ts, 2, list(range(100, 150)))
    _wait(lambda: all(_count(t) == 150 for t in ts))
    ports = [t.server.port for t in ts]
    for t in ts:
        t.stop()
    ts[:] = [_start(str(path / f"ts{j}"), ports[j]) for j in range(3)]
    for t in ts:
        assert t.replicas["t1"].raft.last_applied >= 2  # started past the flushed ops
    r = _write(c, ts, 3, [149, 150])  # 149 exists: one row error, one applied
    assert r["num_applied"] == 1 and [e[1] for e in r["row_errors"]] == ["ALREADY_PRESENT"]
    _wait(lambda: all(_count(t) == 151 for t in ts))
    rows = _leader(ts).replicas["t1"].tablet.scan_table(["k"]).column("k").to_pylist()
    assert sorted(rows) == list(range(151))


@pytest.fixture
def gc_cluster(tmp_path, monkeypatch):
    """(start(i, port=0) -> TabletServer, state): servers whose logs are GC'd in steps of
    20 entries and 2 KB segments, keeping 20 entries for a lagging peer, so a replica that
    misses ~120 writes needs a tablet copy. Every server in state["ts"] and the client in
    state["client"] are stopped at teardown."""
    from engine.config import TabletConfig
    from engine.tserver import tablet_replica
    monkeypatch.setattr(tablet_replica, "GC_MIN_ENTRIES", 20)
    cfg = TabletConfig(fsync=False, wal_sync="never", wal_segment_bytes=2048)

    def start(i, port=0):
        return TabletServer(str(tmp_path / f"ts{i}"), "127.0.0.1", port, SECRET, [],
                            tick_ms=30, election_ticks=6, fsync=False, tablet_config=cfg,
                            log_retention_entries=20)
    state = {"ts": [], "client": None}
    try:
        yield start, state
    finally:
        for t in state["ts"]:
            try:
                t.stop()
            except Exception:  # noqa: BLE001 - teardown
                pass
        if state["client"] is not None:
            state["client"].close()


def gcd_lagger(start, state) -> tuple[int, int]:
    """Three servers of `gc_cluster` (into state["ts"], their client state["client"]); one
    is stopped while the others' logs are GC'd past what it needs. Returns (index of the
    lagger, its port); rows 0..120 are written."""
    ts = state["ts"]
    ts += [start(i) for i in range(3)]
    c = state["client"] = RpcClient(SECRET)
    peers = [[t.uuid, t.addr] for t in ts]
    for t in ts:
        c.call(t.addr, "create_replica", {"tablet_id": "t1", "table_id": "x",
                                          "table_name": "t", "schema": SCHEMA.to_dict(),
                                          "peers": peers})
    _write(c, ts, 1, [0])
    lagger = next(t for t in ts if t is not _leader(ts))
    i, port = ts.index(lagger), lagger.server.port
    lagger.stop()
    live = [t for t in ts if t is not lagger]
    for k in range(1, 120):
        _write(c, live, k + 1, [k])
        if k % 40 == 0:
            for t in live:
                t.replicas["t1"].tablet.flush_mrs()
    for t in live:
        t.replicas["t1"].tablet.flush_mrs()
    _write(c, live, 200, [120])
    # neither live replica's log holds what the lagger needs (whichever leads next)
    _wait(lambda: all(t.replicas["t1"].storage.first_index > 2 for t in live))
    return i, port


def caught_up_by_copy(ts, c, i) -> None:
    """Server i's replica got the 121 rows by tablet copy (its log starts after them) and
    then follows the log: one more write reaches it."""
    _wait(lambda: _count(ts[i]) == 121, timeout=30)
    r = ts[i].replicas["t1"]
    assert r.storage.first_index > 2  # its log starts after the copied state
    _write(c, ts, 500, [1000])
    _wait(lambda: _count(ts[i]) == 122)
    got = sorted(r.tablet.scan_table(["k"]).column("k").to_pylist())
    assert got == list(range(121)) + [1000]


def test_a_replica_behind_the_gcd_log_gets_a_tablet_copy(gc_cluster):
    """A follower down while the leader's log is GC'd past it catches up by tablet copy:
    files pinned by hard links on the leader, its log reset after the copied state."""
    start, state = gc_cluster
    i, port = gcd_lagger(start, state)
    ts = state["ts"]
    ts[i] = start(i, port)
    caught_up_by_copy(ts, state["client"], i)


def test_a_request_in_the_log_twice_is_applied_once(servers):
    """A retry proposed again by a new leader while the first copy is still in the log
    (the apply-time check of the result tracker): both entries commit, one applies."""
    import numpy as np

    from engine.tablet.write_op import WriteOp
    from engine.tserver.tablet_replica import REPLICATED_WRITE, encode_request
    ts, c = servers["ts"], servers["client"]
    _write(c, ts, 1, [1])
    leader = _leader(ts)
    r = leader.replicas["t1"]
    rows = _rows([2]).drop_columns(["__op"])
    body = encode_request("c9", 7, WriteOp(np.array([1], np.int8), rows))
    with r.lock:
        first = r.raft.propose(REPLICATED_WRITE, body)
        second = r.raft.propose(REPLICATED_WRITE, body)
        r.process()
    _wait(lambda: all(t.replicas["t1"]._view.applied >= second.index for t in ts))
    for t in ts:
        rep = t.replicas["t1"]
        assert rep.tracker.get("c9", 7)["num_applied"] == 1
        assert sorted(rep.tablet.scan_table(["k"]).column("k").to_pylist()) == [1, 2]
    assert first.index < second.index
    # and a client retry of that id gets the first result, not a duplicate-key error
    again = c.put(_leader(ts).addr, {"tablet": "t1", "client_id": "c9", "seq": 7},
                  _rows([2]))
    assert again["num_applied"] == 1 and again["row_errors"] == []


def test_result_tracker_forgets_old_results_and_idle_clients():
    """In log time (the entries' hybrid timestamps): every replica forgets alike."""
    from engine.clock import LOGICAL_BITS
    from engine.tserver.result_tracker import ResultTracker
    sec = 1_000_000 << LOGICAL_BITS
    rt = ResultTracker(retain_s=100.0)
    idx = iter(range(1, 1000))

    def step(cid, seq, t, fi=0):
        return rt.step(next(idx), int(t * sec), cid, seq, fi, lambda: {"n": seq})
    step("a", 1, 0)
    step("b", 1, 0)
    step("a", 2, 50)
    assert rt.get("a", 1) == {"n": 1} and len(rt) == 3
    step("a", 3, 120)   # b's last entry is past retain_s: forgotten; a is not
    assert rt.get("b", 1) is None and rt.get("a", 1) == {"n": 1}
    assert rt.clients() == 1 and len(rt) == 3
    for seq in range(4, 80):                 # the client's first_incomplete prunes
        step("a", seq, 121, fi=70)
    assert rt.get("a", 69) is None and rt.get("a", 70) == {"n": 70}
    assert rt.lookup("a", 5)["error"]["sqlstate"] == "XX000"  # STALE


def test_followers_forget_results_by_age(servers):
    """A client that goes away never raises its first_incomplete again: without the age
    rule every replica kept its results forever (issue 13's review). Age counts in log
    time, so the followers forget it too, at the same entry."""
    from engine.tserver.result_tracker import ResultTracker
    ts, c = servers["ts"], servers["client"]
    for t in ts:  # (the live tracker only: the checkpointed one keeps 10 minutes)
        t.replicas["t1"].tracker = ResultTracker(retain_s=0.3)
    for seq in range(1, 6):
        _write(c, ts, seq, [seq], client_id=f"client-{seq}")
    _wait(lambda: all(_count(t) == 5 for t in ts))
    time.sleep(0.4)
    _write(c, ts, 6, [6], client_id="late")   # its record runs the due sweep everywhere
    _wait(lambda: all(t.replicas["t1"].tracker.clients() == 1 for t in ts))
