"""Leader leases on real tablet servers (three in-process servers, real RPC): a leader
cut off from its followers that has not noticed yet — it neither ticks nor hears anything,
as after a SIGSTOP it was just resumed from — must not answer a lookup from its stale
state once a new leader took a write (engine/consensus/raft.py, Leader leases;
TabletReplica.check_leader_ready)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from engine.rpc.rpc import RemoteError
from tests.cluster.test_tserver import _leader, _wait, _write, servers  # noqa: F401


def _put(c, t, key: int, value: str):
    return c.put(t.addr, {"tablet": "t1", "client_id": "c2", "seq": 1},
                 pa.table({"k": pa.array([key], pa.int64()), "v": [value],
                           "__op": pa.array([2], pa.int8())}))  # 2: UPDATE


def _cut_off_while_a_new_leader_writes(servers, rate=None):
    """Write k=1 'v1', freeze the leader's Raft side (as SIGSTOP would: no ticks, nothing in,
    nothing out; its RPC server still answers, as a resumed process does before its threads
    catch up), its lease clock slowed to `rate` from that moment if one is given, and wait until
    a new leader among the others has taken the write k=1 'new'. Returns (client, the old
    leader's server), the old one still believing it leads."""
    ts, c = servers["ts"], servers["client"]
    _write(c, ts, 1, [1])
    old = _leader(ts)
    r = old.replicas["t1"]
    assert c.call(old.addr, "lookup", {"tablet": "t1", "key": [1]})["v"] == "v1"
    if rate is not None:
        r.raft._mono = _slowed(rate)
    r.tick = lambda: None
    r.deliver = lambda msgs, executor: None
    old.transport.send = lambda addr, group, msg: None
    others = [t for t in ts if t is not old]
    new = _leader(others, timeout=15)
    deadline = time.monotonic() + 10
    while True:
        try:
            _put(c, new, 1, "new")
            break
        except RemoteError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    _wait(lambda: c.call(new.addr, "lookup", {"tablet": "t1", "key": [1]})["v"] == "new")
    assert r.raft.is_leader  # it still believes it leads
    return c, old


def test_a_cut_off_leader_refuses_lookups_after_a_new_leader_took_a_write(servers):
    c, old = _cut_off_while_a_new_leader_writes(servers)
    t0 = time.monotonic()
    with pytest.raises(RemoteError) as ei:
        c.call(old.addr, "lookup", {"tablet": "t1", "key": [1]})
    assert "lease" in str(ei.value)
    # bounded: it waited for at most two heartbeat periods for a renewal (30 ms ticks)
    assert time.monotonic() - t0 < 2.0
    with pytest.raises(RemoteError):
        c.call(old.addr, "tablet_ts", {"tablet": "t1"})


def _slowed(rate: float):
    """A monotonic clock that runs `rate` times as fast as real time from now on (what the
    `monotonic_rate` failpoint does to a whole process, engine/clock.py)."""
    real0 = time.monotonic()
    return lambda: real0 + (time.monotonic() - real0) * rate


@pytest.mark.parametrize("rate", [0.92, 0.02])
def test_a_cut_off_leader_with_a_slow_clock(servers, rate):
    """The leases' clock-rate bound (engine/consensus/raft.py: rates differing by less than
    ~11%) at work. The cut-off leader's monotonic clock runs slow from the moment it is cut
    off: within the bound (0.92) it refuses the lookup once a new leader took a write, as
    above; far beyond it (0.02: its lease lasts 50 times as long in real time) it answers
    from its stale state - a stale read, which is why the bound is stated. (The harness's
    clock-rate nemesis stays inside the bound; its lease-break nemesis, named on purpose,
    does this to a process-level leader under the register checker: tests/cluster/
    test_jepsen.py::test_a_broken_lease_shows_as_stale_reads.)"""
    c, old = _cut_off_while_a_new_leader_writes(servers, rate)
    if rate > 0.9:
        with pytest.raises(RemoteError, match="lease"):
            c.call(old.addr, "lookup", {"tablet": "t1", "key": [1]})
    else:
        assert c.call(old.addr, "lookup", {"tablet": "t1", "key": [1]})["v"] == "v1"
