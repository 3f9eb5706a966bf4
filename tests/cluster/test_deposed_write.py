"""Exactly once across a leader change, at the point a client gives up on a leader: a write
pending on a leader that is then deposed (cut off before its entry reached anyone) must
never be acknowledged - its entry is replaced by the new leader's log at the same index -
and the client's retry of the same request on the new leader is applied exactly once
(engine/tserver/tablet_replica.py: waiters keyed by index *and term*, and failed when the
leader steps down - either alone keeps this test passing; without both, request 7 is
answered with the other client's result; result_tracker.py). Three in-process tablet
servers (test_tserver.py)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from engine.rpc.rpc import RemoteError
from tests.cluster.test_tserver import _leader, _wait, _write, servers  # noqa: F401


def _rows(keys, op=1):
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys],
                     "__op": pa.array([op] * len(keys), pa.int8())})


def _keys(t):
    return sorted(t.replicas["t1"].tablet.scan_table(["k"]).column("k").to_pylist())


def test_a_write_pending_on_a_deposed_leader_is_never_acknowledged(servers):
    ts, c = servers["ts"], servers["client"]
    _write(c, ts, 1, [1])
    old = _leader(ts)
    r = old.replicas["t1"]
    # cut off: nothing in or out of its Raft side (it still takes client RPCs)
    saved = (r.tick, r.deliver, old.transport.send)
    r.tick = lambda: None
    r.deliver = lambda msgs, executor: None
    old.transport.send = lambda addr, group, msg: None
    got: dict = {}

    def pending(seq, key):  # proposed on the old leader, reaching no one
        try:
            got[seq] = c.put(old.addr, {"tablet": "t1", "client_id": "c9", "seq": seq,
                                        "timeout_s": 20}, _rows([key]), timeout_s=25)
        except Exception as e:  # noqa: BLE001 - what the test looks at
            got[seq] = e
    # two: the new leader's first entry (its NO_OP) replaces the first, a write of another
    # client the second - an index-only match would hand that client's result to (c9, 7)
    ths = []
    for seq, key in ((6, 5), (7, 2)):
        ths.append(threading.Thread(target=pending, args=(seq, key)))
        ths[-1].start()
        _wait(lambda: r.raft.log.last_index > r.raft.commit_index + len(ths) - 1)
    pending_index = r.raft.log.last_index
    others = [t for t in ts if t is not old]
    new = _leader(others, timeout=15)
    # the new leader's log takes other entries at and after that index
    for seq, k in ((1, 3), (2, 4)):
        deadline = time.monotonic() + 10
        while True:
            try:
                c.put(new.addr, {"tablet": "t1", "client_id": "c8", "seq": seq}, _rows([k]))
                break
            except RemoteError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    assert new.replicas["t1"].raft.log.last_index >= pending_index
    r.tick, r.deliver, old.transport.send = saved  # heal: it hears the new term
    for th in ths:
        th.join(timeout=30)
        assert not th.is_alive()
    for seq in (6, 7):
        assert isinstance(got[seq], RemoteError), \
            f"request {seq}, replaced in the log, was answered {got[seq]!r}"
    _wait(lambda: all(_keys(t) == [1, 3, 4] for t in ts), timeout=15)
    # the client's retry of the same request on the new leader: applied once, answered
    # with its own result; again: the stored result, nothing applied twice
    leader = _leader(ts)
    first = c.put(leader.addr, {"tablet": "t1", "client_id": "c9", "seq": 7}, _rows([2]))
    assert first["num_applied"] == 1 and first["row_errors"] == []
    again = c.put(_leader(ts).addr, {"tablet": "t1", "client_id": "c9", "seq": 7},
                  _rows([2]))
    assert again == first
    _wait(lambda: all(_keys(t) == [1, 2, 3, 4] for t in ts), timeout=15)
