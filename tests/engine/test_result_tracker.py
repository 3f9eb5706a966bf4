"""Exactly-once writes across restarts, log GC, tablet copies and expiry (issue 24, item 2):
engine/tserver/result_tracker.py and TabletReplica. Replicas are opened in temp dirs with
a Transport that sends nowhere; a sole voter (RF=1) leads by itself, or entries are fed to
`apply_entries` directly (the state machine every replica runs), no network."""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa

from engine import errors
from engine.clock import HybridClock, LOGICAL_BITS
from engine.config import TabletConfig
from engine.consensus.log import LogEntry
from engine.consensus.raft import RaftOptions
from engine.schema import ColumnSchema as C
from engine.schema import DataType as T
from engine.schema import Schema
from engine.tablet.write_op import OpType, WriteOp
from engine.tserver.result_tracker import ResultTracker, checkpoint_indexes
from engine.tserver.tablet_copy import CopySessions, run_copy
from engine.tserver.tablet_replica import REPLICATED_WRITE, TabletReplica, encode_request

SCHEMA = Schema([C("k", T.INT64), C("v", T.STRING)], key=["k"])
UPSERT, INSERT = int(OpType.UPSERT), int(OpType.INSERT)
CFG = TabletConfig(fsync=False, wal_sync="never", wal_segment_bytes=2048)


class _Nowhere:
    def send(self, addr, group, msg):
        pass


def _open(d, uuid="u1", **opts):
    return TabletReplica(d, uuid, HybridClock(), _Nowhere(),
                         RaftOptions(election_timeout_ticks=3, **opts), CFG)


def _replica(tmp_path, name="r", **opts):
    d = str(tmp_path / name)
    TabletReplica.create(d, "t1", "x", "t", SCHEMA, [("u1", "")], CFG, HybridClock())
    return d, _open(d, **opts)


def _lead(r, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        r.tick()
        try:
            r.check_leader_ready()
            return r
        except errors.EngineError:
            assert time.monotonic() < deadline, "the sole voter did not lead in time"
            time.sleep(0.01)


def _rows(k, v):
    return pa.table({"k": pa.array([k], pa.int64()), "v": [v]})


def _write(r, seq, k, v, first_incomplete, op=UPSERT, client="c1"):
    return r.write(client, seq, first_incomplete, np.array([op], np.int8), _rows(k, v), 10.0)


def _value(r, k):
    t = r.tablet.scan_table(["k", "v"]).to_pydict()
    return dict(zip(t["k"], t["v"])).get(k)


def _entry(index, ts, seq, fi, k, v, op=UPSERT, client="c1"):
    body = encode_request(client, seq, WriteOp(np.array([op], np.int8), _rows(k, v)), fi)
    return LogEntry(1, index, ts, REPLICATED_WRITE, body)


def _feed(r, entries):
    """Append to the replica's log and apply (what a follower does once they commit)."""
    with r.lock:
        r.storage.append(entries)
        r.storage.sync()
        r.apply_entries(entries)


SEC = 1_000_000 << LOGICAL_BITS  # one second of hybrid time


def test_replicas_decide_alike_about_a_duplicate_after_one_restarted(tmp_path):
    """The same log on two replicas; one flushes and restarts between the first copy of a
    request and a second copy of it (proposed again by a new leader). Before, the restarted
    one had an empty tracker, applied the second copy and overwrote the later write 2:
    the replicas diverged."""
    t0 = 1_700_000_000 * SEC
    log = [_entry(1, t0, 1, 1, 1, "a"), _entry(2, t0 + 1, 2, 1, 1, "b"),
           _entry(3, t0 + 2, 1, 1, 1, "a")]  # request 1 again: a duplicate
    da, a = _replica(tmp_path, "a")
    db, b = _replica(tmp_path, "b")
    try:
        _feed(a, log)
        _feed(b, log[:2])
        b.tablet.flush_mrs()
        b.close()
        b = _open(db)
        with b.lock:
            b.apply_entries(log[2:])
        assert _value(a, 1) == _value(b, 1) == "b"
        assert a.tracker.get("c1", 1) == b.tracker.get("c1", 1)
    finally:
        a.close()
        b.close()


def test_expiry_counts_log_time_so_replicas_forget_alike():
    """A client idle for longer than retain_s of *log* time is forgotten at the same entry
    on every replica, however the state was split by restarts (checkpoint and reload)."""
    t0 = 1_000 * SEC
    steps = [(1, t0, "c", 1, 1), (2, t0 + 5 * SEC, "d", 1, 1),
             (3, t0 + 200 * SEC, "c", 1, 1),     # c idle 200 s > 100 s: forgotten, applied
             (4, t0 + 201 * SEC, "c", 1, 1)]     # a duplicate of entry 3
    full = ResultTracker(retain_s=100)
    split = ResultTracker(retain_s=100)
    got_full, got_split = [], []
    for i, s in enumerate(steps):
        got_full.append(full.step(*s, lambda s=s: {"n": s[0]})[1])
        if i == 2:  # a "restart": the state through its checkpoint form
            split = ResultTracker.from_dict(split.to_dict())
        got_split.append(split.step(*s, lambda s=s: {"n": s[0]})[1])
    assert got_full == got_split == [True, True, True, False]
    assert full.get("c", 1) == split.get("c", 1) == {"n": 3}
    assert full.clients() == split.clients() == 1  # d swept at entry 4 on both


def test_a_retry_is_recognised_after_flush_log_gc_and_restart(tmp_path, monkeypatch):
    """Before, the tracker was rebuilt only from entries re-applied after the flushed state:
    a retry of a request older than that was applied again (here: an UPSERT retry
    overwriting a later acknowledged write)."""
    from engine.tserver import tablet_replica
    monkeypatch.setattr(tablet_replica, "GC_MIN_ENTRIES", 5)
    d, r = _replica(tmp_path, log_retention_entries=5)
    try:
        _lead(r)
        first = _write(r, 1, 1, "a", 1)
        _write(r, 2, 1, "b", 1)  # the client still waits for 1 (a slow answer)
        for seq in range(3, 40):
            _write(r, seq, 100 + seq, "x" * 200, 1)
        r.tablet.flush_mrs()
        for seq in range(40, 60):  # more entries: the host GCs the log below the anchor
            _write(r, seq, 100 + seq, "x" * 200, 1)
        assert r.storage.first_index > 3, "the log was not GC'd past the first writes"
        r.close()
        r = _lead(_open(d, log_retention_entries=5))
        assert r.storage.first_index > 3
        again = _write(r, 1, 1, "a", 1)  # the retry of request 1
        assert again == first
        assert _value(r, 1) == "b"
    finally:
        r.close()


def test_a_retry_below_first_incomplete_is_refused_not_applied(tmp_path):
    """A late copy of request 1 after the client moved on (first_incomplete 70): STALE,
    never applied. Before, the leader dropped the result and applied it again, an UPSERT
    overwriting the later write."""
    d, r = _replica(tmp_path)
    try:
        _lead(r)
        _write(r, 1, 1, "a", 1)
        _write(r, 2, 1, "b", 2)
        for seq in range(3, 71):
            _write(r, seq, 100 + seq, "x", seq)
        late = _write(r, 1, 1, "a", 1)
        assert _value(r, 1) == "b"
        assert late["error"]["sqlstate"] == "XX000"
        assert "not applied" in late["error"]["message"]
        # and decided so at apply time too (a copy already in the log, on every replica)
        ts = r.storage.timestamp(r.storage.last_index)
        n = r.storage.last_index + 1
        with r.lock:
            e = r.raft.propose(REPLICATED_WRITE, encode_request(
                "c1", 1, WriteOp(np.array([UPSERT], np.int8), _rows(1, "a")), 1))
            r.process()
        assert e.index >= n and e.timestamp > ts
        deadline = time.monotonic() + 10
        while r._view.applied < e.index:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert _value(r, 1) == "b"
    finally:
        r.close()


class _LocalRpc:
    """run_copy's calls answered by a CopySessions in this process."""

    def __init__(self, sessions, replica):
        self.sessions, self.replica = sessions, replica

    def call(self, addr, action, p, timeout_s=None):
        if action == "copy_begin":
            return self.sessions.begin(self.replica)
        return getattr(self.sessions, action.split("_")[1])(p)


def test_a_tablet_copy_carries_the_tracker(tmp_path):
    """Before, install_copy started the copied replica with an empty tracker: a retry of a
    request applied before the copied index was applied again there."""
    ds, src = _replica(tmp_path, "src")
    dd = str(tmp_path / "dst")
    TabletReplica.create(dd, "t1", "x", "t", SCHEMA, [("u1", "")], CFG, HybridClock())
    dst = _open(dd, uuid="u2")
    try:
        _lead(src)
        first = _write(src, 1, 1, "a", 1)
        _write(src, 2, 1, "b", 1)
        sessions = CopySessions(str(tmp_path / "sessions"))
        assert run_copy(dst, _LocalRpc(sessions, src), "src")
        a = dst._view.applied
        assert a == src.tablet.anchor_index() - 1
        assert dst.tracker.get("c1", 1) == first
        assert dst.tracker.lookup("c1", 1) == first
        assert a in checkpoint_indexes(dst.tablet.path)
        # a second copy of request 1 after the copied state: skipped there as on the source
        t = src.storage.timestamp(a) + 1
        with dst.lock:
            dst.apply_entries([_entry(a + 1, t, 1, 1, 1, "a")])
        assert _value(dst, 1) == "b"
    finally:
        src.close()
        dst.close()


def test_old_envelopes_still_decode():
    """Entries written before first_incomplete joined the envelope replay unchanged."""
    import struct

    from engine.tserver.tablet_replica import decode_request
    op = WriteOp(np.array([UPSERT], np.int8), _rows(1, "a")).encode()
    old = struct.pack("<HQ", 2, 7) + b"c1" + op
    assert decode_request(old) == ("c1", 7, 0, op)
    assert decode_request(encode_request("c1", 7, WriteOp.decode(op), 5))[:3] == ("c1", 7, 5)


def test_checkpoint_written_before_the_metadata_and_pruned_after(tmp_path):
    d, r = _replica(tmp_path)
    try:
        _lead(r)
        _write(r, 1, 1, "a", 1)
        r.tablet.flush_mrs()
        f1 = r.tablet.anchor_index() - 1
        _write(r, 2, 2, "a", 1)
        r.tablet.flush_mrs()
        f2 = r.tablet.anchor_index() - 1
        assert f2 > f1 and checkpoint_indexes(r.tablet.path) == [f2]
    finally:
        r.close()
    assert os.path.isdir(d)
