"""MvccManager and MvccSnapshot: which op timestamps a reader may see.

Every write op takes a timestamp from the clock and registers it as *in flight*
(`start_op`). It applies its changes to the stores, tagged with that timestamp, while
readers ignore it; then `commit_op` makes it visible. An op that fails before applying
anything is `abort_op`-ed. Legal transitions, per timestamp:

    (unknown) --start_op--> IN_FLIGHT --commit_op--> COMMITTED
                                      \\--abort_op--> (forgotten)

A snapshot is "all timestamps < all_committed_before, plus the listed ones above it":

    MvccSnapshot(all_committed_before=8, committed={9, 11})
      committed:   ... 5 6 7 | 9 . 11        (8 and 10 still in flight when taken)

`take_snapshot()` gives the latest consistent state; `MvccSnapshot.at(T)` is a time-travel
snapshot that sees every op with timestamp <= T. A snapshot at T is only *repeatable* once
no op with timestamp <= T can still commit; `wait_for_safe(T)` blocks until then.

Visibility checks are vectorised (`is_committed_array`) so a scan filters a whole column of
timestamps with one numpy expression.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from engine.clock import MAX_TIMESTAMP, Timestamp


@dataclasses.dataclass(frozen=True)
class MvccSnapshot:
    all_committed_before: Timestamp
    committed: frozenset = frozenset()

    @staticmethod
    def at(ts: Timestamp) -> "MvccSnapshot":
        """Everything with timestamp <= ts."""
        return MvccSnapshot(ts + 1)

    @staticmethod
    def including_all() -> "MvccSnapshot":
        return MvccSnapshot(MAX_TIMESTAMP)

    def is_committed(self, ts: Timestamp) -> bool:
        return ts < self.all_committed_before or ts in self.committed

    def is_committed_array(self, ts: np.ndarray) -> np.ndarray:
        mask = ts < self.all_committed_before
        if self.committed:
            mask |= np.isin(ts, np.fromiter(self.committed, dtype=np.int64))
        return mask

    def may_have_committed_at_or_after(self, ts: Timestamp) -> bool:
        """False if no timestamp >= ts is visible (lets a scan skip a whole delta store)."""
        return ts < self.all_committed_before or any(t >= ts for t in self.committed)

    def may_have_uncommitted_at_or_before(self, ts: Timestamp) -> bool:
        """False if every timestamp <= ts is visible (lets a scan skip all UNDOs)."""
        return ts >= self.all_committed_before

    @property
    def upper_bound(self) -> Timestamp:
        """No timestamp >= this is visible."""
        return max([self.all_committed_before, *(t + 1 for t in self.committed)])


class MvccManager:
    def __init__(self) -> None:
        # the lock itself on the hot paths (`with self._lock`: no Python-level
        # Condition.__enter__ / __exit__ frames); the condition only for the waits, and
        # notified only when someone waits (`_waiters`, changed under the lock)
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._waiters = 0
        self._in_flight: set[Timestamp] = set()
        self._last_committed: Timestamp = 0
        self._idle_snapshot = MvccSnapshot(1)   # take_snapshot's, kept while unchanged
        self._max_started: Timestamp = 0
        # ops that committed while an older one is still in flight: a snapshot lists them
        # (its watermark stops at the oldest in-flight op), else a writer's own committed
        # op would be invisible to its next read until that older op commits
        self._committed_above: set[Timestamp] = set()

    def start_op(self, ts: Timestamp) -> None:
        with self._lock:
            if ts <= self._max_started or ts <= self._last_committed:
                raise AssertionError(f"timestamp {ts} not monotonic (max {self._max_started})")
            self._in_flight.add(ts)
            self._max_started = ts

    def start_op_now(self, clock) -> Timestamp:
        """`start_op` at `clock.now()`, the timestamp taken under the MVCC lock: no op then
        holds a timestamp that MVCC does not know yet, which `fence` relies on."""
        with self._lock:
            ts = clock.now()
            if ts <= self._max_started or ts <= self._last_committed:
                raise AssertionError(f"timestamp {ts} not monotonic (max {self._max_started})")
            self._in_flight.add(ts)
            self._max_started = ts
            return ts

    def fence(self, ts: Timestamp, clock) -> None:
        """Move `clock` past `ts` under the MVCC lock: every op that took its timestamp
        with `start_op_now` before is in flight or done here, and every later one takes a
        timestamp > ts; `wait_for_safe(ts)` after this makes a read at ts repeatable even
        for a ts beyond every op started so far (a fresh timestamp, or another tablet's
        latest). Without the lock, an op between its `clock.now()` and its `start_op`
        could get a timestamp <= ts that the wait does not see."""
        with self._lock:
            clock.update(ts)

    def commit_op(self, ts: Timestamp) -> None:
        with self._lock:
            in_flight = self._in_flight
            in_flight.remove(ts)
            if ts > self._last_committed:
                self._last_committed = ts
            if in_flight:                # `_prune` after adding ts, in line: every write
                low = min(in_flight)
                self._committed_above = {t for t in self._committed_above if t > low}
                if ts > low:
                    self._committed_above.add(ts)
            elif self._committed_above:
                self._committed_above.clear()
            if self._waiters:
                self._cond.notify_all()

    def abort_op(self, ts: Timestamp) -> None:
        with self._lock:
            self._in_flight.discard(ts)
            self._prune()
            if self._waiters:
                self._cond.notify_all()

    def _prune(self) -> None:
        """Keep only committed timestamps above the oldest in-flight op (lock held)."""
        if not self._in_flight:
            self._committed_above.clear()
        elif self._committed_above:
            low = min(self._in_flight)
            self._committed_above = {t for t in self._committed_above if t > low}

    def adjust_for_replay(self, ts: Timestamp) -> None:
        """After bootstrap: ops up to ts are committed."""
        with self._lock:
            self._last_committed = max(self._last_committed, ts)
            self._max_started = max(self._max_started, ts)

    def take_snapshot(self) -> MvccSnapshot:
        """All committed ops, as of now."""
        with self._lock:
            if not self._in_flight:
                # the same snapshot while nothing commits (immutable: shared; a point
                # read takes one per op, and a frozen dataclass costs a frame to make)
                snap = self._idle_snapshot
                if snap.all_committed_before != self._last_committed + 1:
                    snap = self._idle_snapshot = MvccSnapshot(self._last_committed + 1)
                return snap
            # everything below the oldest in-flight op, and the ops above it that have
            # committed (Kudu's snapshot: a watermark plus committed timestamps)
            return MvccSnapshot(min(self._in_flight), frozenset(self._committed_above))

    def last_committed(self) -> Timestamp:
        with self._lock:
            return self._last_committed

    def safe_time(self) -> Timestamp:
        """Every op with timestamp <= safe_time() has committed or aborted."""
        with self._lock:
            if self._in_flight:
                return min(self._in_flight) - 1
            return self._max_started

    def wait_for_safe(self, ts: Timestamp, timeout: float | None = None) -> bool:
        with self._lock:
            if not self._in_flight or min(self._in_flight) > ts:
                return True            # nothing to wait for (the common case)
            self._waiters += 1
            try:
                return self._cond.wait_for(
                    lambda: not any(t <= ts for t in self._in_flight), timeout=timeout)
            finally:
                self._waiters -= 1

    def wait_for_all_in_flight(self) -> None:
        with self._lock:
            target = set(self._in_flight)
            self._waiters += 1
            try:
                self._cond.wait_for(lambda: not (target & self._in_flight))
            finally:
                self._waiters -= 1
