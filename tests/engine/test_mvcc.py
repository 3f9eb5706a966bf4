"""MvccManager / MvccSnapshot (engine/tablet/mvcc.py) and the clocks (engine/clock.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.clock import (
    LOGICAL_BITS,
    MAX_TIMESTAMP,
    HybridClock,
    LogicalClock,
    from_micros,
    physical_micros,
    upper_bound_for_micros,
)
from engine.tablet.mvcc import MvccManager, MvccSnapshot

# -- MvccManager -------------------------------------------------------------------------------


def visible(snap: MvccSnapshot, upto: int = 20) -> set[int]:
    return {t for t in range(1, upto) if snap.is_committed(t)}


def test_state_transitions_and_snapshots():
    m = MvccManager()
    assert visible(m.take_snapshot()) == set()
    m.start_op(1)
    assert not m.take_snapshot().is_committed(1)  # in flight: invisible
    m.commit_op(1)
    assert m.last_committed() == 1
    assert m.take_snapshot().is_committed(1)
    m.start_op(2)
    m.start_op(3)
    m.commit_op(3)
    s = m.take_snapshot()
    # 2 is in flight: never visible; 1 is. 3 may or may not be (conservative snapshot), but
    # if 3 is visible then so must be everything the snapshot claims below it.
    assert s.is_committed(1) and not s.is_committed(2)
    assert m.last_committed() == 3
    m.commit_op(2)
    s = m.take_snapshot()
    assert {1, 2, 3} <= visible(s) and not s.is_committed(4)
    # aborted ops never become visible as data (their timestamp may be covered harmlessly)
    m.start_op(5)
    m.abort_op(5)
    m.start_op(6)
    m.commit_op(6)
    s = m.take_snapshot()
    assert {1, 2, 3, 6} <= visible(s)
    assert m.safe_time() == 6


def test_start_op_must_be_monotonic():
    m = MvccManager()
    m.start_op(5)
    with pytest.raises(AssertionError):
        m.start_op(5)
    with pytest.raises(AssertionError):
        m.start_op(4)
    m.commit_op(5)
    with pytest.raises(AssertionError):
        m.start_op(3)
    m.start_op(9)
    m.abort_op(9)
    with pytest.raises(AssertionError):
        m.start_op(9)  # an aborted timestamp is never reused either


def test_adjust_for_replay():
    m = MvccManager()
    m.adjust_for_replay(100)
    assert m.last_committed() == 100
    assert m.take_snapshot().is_committed(100)
    assert not m.take_snapshot().is_committed(101)
    with pytest.raises(AssertionError):
        m.start_op(100)
    m.start_op(101)
    assert m.safe_time() == 100
    m.commit_op(101)
    assert m.safe_time() == 101


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["start", "commit", "abort", "snap"]),
                          st.integers(0, 10)), max_size=40))
def test_random_manager_sequences(ops):
    """Model check: snapshots never show in-flight/aborted ops and always show every op that
    committed before the oldest in-flight one; safe_time is below every in-flight op."""
    m = MvccManager()
    next_ts = 1
    in_flight: list[int] = []
    committed: set[int] = set()
    aborted: set[int] = set()
    for op, pick in ops:
        if op == "start":
            m.start_op(next_ts)
            in_flight.append(next_ts)
            next_ts += 1
        elif op in ("commit", "abort") and in_flight:
            ts = in_flight.pop(pick % len(in_flight))
            if op == "commit":
                m.commit_op(ts)
                committed.add(ts)
            else:
                m.abort_op(ts)
                aborted.add(ts)
        s = m.take_snapshot()
        low = min(in_flight, default=next_ts)
        for t in range(1, next_ts + 2):
            if t in in_flight:
                assert not s.is_committed(t)
            elif t in committed and t < low:
                assert s.is_committed(t)
            if t >= next_ts:
                assert not s.is_committed(t)  # never issued
        assert m.last_committed() == max(committed, default=0)
        st_ = m.safe_time()
        assert all(st_ < t for t in in_flight)
        if not in_flight:
            assert st_ == next_ts - 1
        # a snapshot is closed downwards below its first invisible committed op
        ts_arr = np.arange(0, next_ts + 2, dtype=np.int64)
        arr = s.is_committed_array(ts_arr)
        assert list(arr) == [s.is_committed(int(t)) for t in ts_arr]


def test_wait_for_safe_with_a_thread():
    m = MvccManager()
    m.start_op(1)
    m.commit_op(1)
    m.start_op(5)
    m.start_op(7)
    assert m.wait_for_safe(4, timeout=0)  # nothing in flight at or below 4
    assert not m.wait_for_safe(5, timeout=0.01)
    done = threading.Event()
    result = []

    def waiter():
        result.append(m.wait_for_safe(5, timeout=10))
        done.set()

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.05)
    assert not done.is_set()  # still blocked by op 5
    m.commit_op(5)
    assert done.wait(5)
    th.join()
    assert result == [True]
    # 7 is still in flight: waiting for it times out; an abort also releases waiters
    assert not m.wait_for_safe(7, timeout=0.01)
    th2 = threading.Thread(target=lambda: result.append(m.wait_for_safe(100, timeout=10)))
    th2.start()
    time.sleep(0.02)
    m.abort_op(7)
    th2.join(5)
    assert result == [True, True]


def test_wait_for_all_in_flight():
    m = MvccManager()
    m.start_op(1)
    m.start_op(2)
    finished = threading.Event()

    def waiter():
        m.wait_for_all_in_flight()
        finished.set()

    th = threading.Thread(target=waiter)
    th.start()
    m.commit_op(2)
    time.sleep(0.02)
    assert not finished.is_set()
    m.start_op(3)  # started after the wait began: not waited for
    m.commit_op(1)
    assert finished.wait(5)
    th.join()
    m.commit_op(3)


# -- MvccSnapshot ------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [0, 1, 2, 17, 2 ** 40])
def test_snapshot_at_sees_ts_le_T(T):
    s = MvccSnapshot.at(T)
    assert s.is_committed(T)
    assert s.is_committed(T - 1) or T == 0
    assert not s.is_committed(T + 1)
    arr = np.array([T - 1, T, T + 1, T + 100], dtype=np.int64)
    assert list(s.is_committed_array(arr)) == [True, True, False, False]
    assert s.upper_bound == T + 1


def test_including_all():
    s = MvccSnapshot.including_all()
    assert s.is_committed(MAX_TIMESTAMP - 1)
    assert s.is_committed(1)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30), st.frozensets(st.integers(0, 40), max_size=6),
       st.integers(0, 45))
def test_snapshot_predicates_agree_with_brute_force(acb, extra, probe):
    committed = frozenset(t for t in extra if t >= acb)
    s = MvccSnapshot(acb, committed)
    ts = np.arange(0, 50, dtype=np.int64)
    brute = [t < acb or t in committed for t in range(50)]
    assert [s.is_committed(int(t)) for t in ts] == brute
    assert list(s.is_committed_array(ts)) == brute
    # the same on a shuffled array with repeats
    rnd = np.array(list(reversed(range(50))) * 2, dtype=np.int64)
    assert list(s.is_committed_array(rnd)) == [brute[t] for t in rnd]
    # skip tests are conservative: "False" must be true facts
    if not s.may_have_committed_at_or_after(probe):
        assert not any(brute[probe:])
    else:
        assert any(brute[probe:])  # and exact here
    if not s.may_have_uncommitted_at_or_before(probe):
        assert all(brute[: probe + 1])
    assert not any(brute[s.upper_bound:])


# -- clocks ------------------------------------------------------------------------------------


def test_hybrid_time_packing():
    ts = from_micros(1234, 5)
    assert physical_micros(ts) == 1234
    assert ts & ((1 << LOGICAL_BITS) - 1) == 5
    assert upper_bound_for_micros(1234) == from_micros(1235) - 1
    assert from_micros(1234, 4095) < from_micros(1235, 0)


class FakeWall:
    def __init__(self, ns: int):
        self.ns = ns

    def __call__(self) -> int:
        return self.ns


def test_hybrid_clock_monotonic_under_backwards_steps():
    wall = FakeWall(1_000_000_000)
    c = HybridClock(wall=wall)
    assert c.is_hybrid
    seen = [c.now()]
    assert physical_micros(seen[0]) == 1_000_000
    steps = [0, 0, 5_000, -2_000_000, -1, 0, 3_000_000, -10_000_000_000, 1, 0]
    for d in steps:
        wall.ns += d
        seen.append(c.now())
    assert all(b > a for a, b in zip(seen, seen[1:]))
    # physical time follows the wall clock again once it moves past the last timestamp
    wall.ns = 2_000_000_000
    t = c.now()
    assert physical_micros(t) == 2_000_000 and t > seen[-1]
    # same microsecond: the logical counter advances
    assert c.now() == t + 1


def test_hybrid_clock_update():
    wall = FakeWall(1_000)
    c = HybridClock(wall=wall)
    far = from_micros(10 ** 9, 7)
    c.update(far)
    assert c.now() > far
    c.update(5)  # updating backwards is a no-op
    a = c.now()
    assert a > far + 1


def test_hybrid_clock_threads_unique():
    c = HybridClock(wall=FakeWall(42_000))
    out: list[list[int]] = [[] for _ in range(4)]

    def run(i):
        out[i].extend(c.now() for _ in range(500))

    ths = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    allv = [v for o in out for v in o]
    assert len(set(allv)) == len(allv)
    for o in out:
        assert all(b > a for a, b in zip(o, o[1:]))


def test_hybrid_clock_real_wall():
    c = HybridClock()
    a = c.now()
    b = c.now()
    assert b > a
    assert abs(physical_micros(a) - time.time_ns() // 1000) < 60_000_000


def test_logical_clock():
    c = LogicalClock()
    assert not c.is_hybrid
    assert [c.now(), c.now(), c.now()] == [1, 2, 3]
    c.update(10)
    assert c.now() == 11
    c.update(4)
    assert c.now() == 12
    c2 = LogicalClock(start=100)
    assert c2.now() == 101


def test_snapshot_sees_ops_committed_after_an_older_in_flight_one():
    """Read your writes: an op that committed while an older one is still in flight is in
    the next snapshot (it was left out until the older op committed, which made a
    connection's UPDATE miss the row its own INSERT had just committed)."""
    m = MvccManager()
    m.start_op(10)
    m.start_op(11)
    m.commit_op(11)
    snap = m.take_snapshot()
    assert snap.is_committed(11) and not snap.is_committed(10)
    m.start_op(12)
    m.commit_op(10)
    snap = m.take_snapshot()
    assert snap.is_committed(10) and snap.is_committed(11) and not snap.is_committed(12)
    m.commit_op(12)
    assert m.take_snapshot() == MvccSnapshot(13)
    assert m._committed_above == set()
