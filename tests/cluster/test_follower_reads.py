"""READ_AT_SNAPSHOT on followers (TabletReplica.wait_safe_follower, the DoGet scan handler):
three in-process tablet servers replicating one tablet over real RPC."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from engine.rpc.rpc import RemoteError
from tests.cluster.test_tserver import _leader, _wait, _write, servers  # noqa: F401

HOUR = 3600 * 1_000_000 << 12  # an hour in HybridTime units (micros << 12 logical bits)


def _scan(c, t, ticket):
    s = c.get(t.addr, dict({"tablet": "t1", "columns": ["k", "v"]}, **ticket))
    batches = [b for b, _ in s.chunks()]
    return pa.Table.from_batches(batches).column("k").to_pylist() if batches else []


def test_followers_serve_snapshots_after_their_safe_time(servers):
    ts, c = servers["ts"], servers["client"]
    _write(c, ts, 1, list(range(0, 300, 2)))
    leader = _leader(ts)
    followers = [t for t in ts if t is not leader]
    snap = leader.replicas["t1"].tablet.current_timestamp()
    want = list(range(0, 300, 2))
    for f in followers:
        # READ_LATEST, or a snapshot without any_replica: not the leader
        with pytest.raises(RemoteError) as ei:
            _scan(c, f, {"snapshot": [snap, False]})
        assert ei.value.leader_uuid == leader.uuid
        got = _scan(c, f, {"snapshot": [snap, False], "any_replica": True, "ordered": True})
        assert got == want  # ordered: key order
    _write(c, ts, 2, [1, 3, 5])
    # the old snapshot is repeatable on every replica; a newer one sees the new rows
    for t in ts:
        assert _scan(c, t, {"snapshot": [snap, False], "any_replica": True,
                            "ordered": True}) == want
    # a snapshot after every entry a follower has applied (nothing stamped >= it yet): the
    # follower asks its leader which log index covers it, waits for that, then serves
    later = leader.replicas["t1"].tablet.current_timestamp() + 1
    for f in followers:
        got = _scan(c, f, {"snapshot": [later, True], "any_replica": True, "ordered": True})
        assert got == sorted(want + [1, 3, 5])
    # a write now gets a timestamp after `later` (the leader's clock moved past it)
    r = _write(c, ts, 3, [7])
    assert r["timestamp"] > later
    for t in ts:
        assert 7 not in _scan(c, t, {"snapshot": [later, True], "any_replica": True})


def test_a_follower_refuses_after_a_bounded_wait_when_it_cannot_be_safe(servers):
    ts, c = servers["ts"], servers["client"]
    _write(c, ts, 1, [1, 2, 3])
    leader = _leader(ts)
    _wait(lambda: all(t.replicas["t1"].tablet.count_rows() == 3 for t in ts))
    future = leader.replicas["t1"].tablet.current_timestamp() + HOUR
    leader.stop()
    servers["ts"] = [t for t in ts if t is not leader]  # stopped: teardown skips it
    f = servers["ts"][0]
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match="not safe at the snapshot"):
        _scan(c, f, {"snapshot": [future, True], "any_replica": True, "safe_wait_s": 0.5})
    assert time.monotonic() - t0 < 5.0
    # the same follower serves a snapshot it has applied, leader or no leader
    snap = f.replicas["t1"].safe_time()
    assert _scan(c, f, {"snapshot": [snap, False], "any_replica": True}) == [1, 2, 3]
