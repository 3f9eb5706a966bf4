"""The monotonic-rate failpoint (engine/clock.py `set_monotonic_rate`, the `failpoint` RPC's
`monotonic_rate`): what the Jepsen-style harness's clock-rate nemesis moves. A process
whose rate is r measures leader leases and paces its Raft ticks in a clock that gains r
seconds per real second; the rate is refused over RPC unless the process runs with
KUDUSQL_FAULT_INJECTION=1, as the disk failpoint is."""

from __future__ import annotations

import os
import threading
import time

import pytest

from engine import clock, errors
from tests.cluster.conftest import free_port


@pytest.fixture
def rate_reset():
    yield
    clock._mono_state = (1.0, 0.0, 0.0)  # back to plain time.monotonic()


def test_monotonic_runs_at_the_rate_and_never_goes_back(monkeypatch, rate_reset):
    real = [100.0]
    monkeypatch.setattr(clock.time, "monotonic", lambda: real[0])
    assert clock.monotonic() == 100.0 and clock.monotonic_rate() == 1.0
    clock.set_monotonic_rate(0.5)
    real[0] = 110.0
    assert clock.monotonic() == pytest.approx(105.0)  # 10 real s, 5 of its own
    clock.set_monotonic_rate(3.0)  # only the slope changes: no jump
    assert clock.monotonic() == pytest.approx(105.0)
    real[0] = 112.0
    assert clock.monotonic() == pytest.approx(111.0)
    clock.set_monotonic_rate(1.0)  # healed: the rate, not the time gained
    real[0] = 113.0
    assert clock.monotonic() == pytest.approx(112.0) and clock.monotonic_rate() == 1.0
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(errors.InvalidArgument, match="positive"):
            clock.set_monotonic_rate(bad)


def test_the_failpoint_rpc_sets_the_rate_only_with_fault_injection(monkeypatch, rate_reset):
    from engine.rpc.rpc import RpcClient, RpcServer
    srv = RpcServer("127.0.0.1", free_port(), "s3cret", {})
    c = RpcClient("s3cret", 5)
    try:
        monkeypatch.delenv("KUDUSQL_FAULT_INJECTION", raising=False)
        with pytest.raises(errors.InvalidArgument, match="KUDUSQL_FAULT_INJECTION"):
            c.call(srv.addr, "failpoint", {"monotonic_rate": 2.0})
        assert clock.monotonic_rate() == 1.0
        monkeypatch.setenv("KUDUSQL_FAULT_INJECTION", "1")
        got = c.call(srv.addr, "failpoint", {"monotonic_rate": 2.0})
        assert got["monotonic_rate"] == 2.0 and clock.monotonic_rate() == 2.0
        got = c.call(srv.addr, "failpoint", {"monotonic_rate": 1.0})
        assert got["monotonic_rate"] == 1.0
    finally:
        c.close()
        srv.shutdown()


class _Replica:
    """What TabletServer._tick_loop ticks: records the real time of each tick."""

    def __init__(self, stop: threading.Event, n: int):
        self.at: list[float] = []
        self.stop, self.n = stop, n
        self.tablet_id = "t"
        self.raft = type("R", (), {"term": 1, "leader_uuid": None})()

    def tick(self):
        self.at.append(time.monotonic())
        if len(self.at) >= self.n:
            self.stop.set()


class _Server:
    def __init__(self, tick_s: float, n: int):
        self.tick_s = tick_s
        self._stop = threading.Event()
        self.replica = _Replica(self._stop, n)
        self.replicas = {"t": self.replica}
        self.metrics = type("M", (), {"observe_raft": lambda *a: None})()


def test_a_slow_monotonic_clock_ticks_a_tablet_server_slower_in_real_time(rate_reset):
    """The tick grid is in the rate's time: at rate 0.5 the grid points of 20 ms ticks are
    40 ms of real time apart, so k ticks span at least (k - 1) x 40 ms (a late tick is
    allowed - load - and the next one then comes at its grid point, sooner; an early one
    is not: the lease argument's quiet period counts ticks)."""
    from engine.tserver.tablet_server import TabletServer
    clock.set_monotonic_rate(0.5)
    s = _Server(0.02, 8)
    t = threading.Thread(target=TabletServer._tick_loop, args=(s,), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive()
    at = s.replica.at
    assert len(at) == 8 and at[-1] - at[0] >= 7 * 0.04 * 0.97, at  # 3%: timer slop


def test_raft_hosts_measure_leases_with_the_rate_clock(tmp_path):
    """A replica's leader lease (RaftConsensus's `monotonic`) is read from the clock the
    failpoint moves, not from time.monotonic."""
    from engine.consensus.consensus_metadata import ConsensusMetadata
    from engine.consensus.messages import RaftConfig, RaftPeer
    from engine.consensus.raft import RaftOptions
    from engine.rpc.rpc import RpcClient
    from engine.tserver.raft_host import RaftHost, Transport
    d = str(tmp_path / "r")
    os.makedirs(d)
    RaftHost.create_metadata(d, ConsensusMetadata(0, None, RaftConfig(0, (RaftPeer("a"),))),
                             fsync=False)
    rpc = RpcClient("s", 1)
    h = RaftHost("g", "a", d, clock.HybridClock(), Transport(rpc), RaftOptions(),
                 fsync=False)
    try:
        assert h.raft._mono is clock.monotonic
    finally:
        h.close()
        rpc.close()
