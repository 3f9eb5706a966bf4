"""Clocks that issue HybridTime timestamps.

A HybridTime packs a physical time in microseconds and a logical counter into one int64:

    HybridTime = (physical_micros << 12) | logical        (12 logical bits, as in Kudu)

so timestamps sort like wall-clock time but stay unique and strictly increasing even when
many are issued in the same microsecond or the wall clock steps backwards. `LogicalClock`
issues 1, 2, 3, ... (Kudu's tests use one) so fuzz tests are deterministic.

Contract: `now()` is strictly greater than every value it returned before and every value
passed to `update()`; it is thread-safe.

Fault injection: `set_wall_offset(seconds)` shifts this process's wall clock as every
HybridClock built with the default wall reads it (the `failpoint` RPC's `clock_offset_s`,
engine/rpc): the nemesis of the Jepsen-style tests skews one process's clock by several
seconds, as an unsynchronised NTP would. Monotonic time (timeouts, leases) is not shifted.
"""

from __future__ import annotations

import threading
import time

LOGICAL_BITS = 12
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1

# Timestamp is a plain int at runtime; the alias documents intent in signatures.
Timestamp = int

MIN_TIMESTAMP: Timestamp = 0
MAX_TIMESTAMP: Timestamp = (1 << 63) - 1


def physical_micros(ts: Timestamp) -> int:
    return ts >> LOGICAL_BITS


def from_micros(micros: int, logical: int = 0) -> Timestamp:
    return (micros << LOGICAL_BITS) | logical


def upper_bound_for_micros(micros: int) -> Timestamp:
    """The greatest HybridTime within the given microsecond ("as of this instant")."""
    return (micros << LOGICAL_BITS) | LOGICAL_MASK


_wall_offset_ns = 0


def set_wall_offset(seconds: float) -> None:
    """Shift this process's wall clock by `seconds` (fault injection; 0 heals)."""
    global _wall_offset_ns
    _wall_offset_ns = int(seconds * 1e9)


def wall_offset() -> float:
    return _wall_offset_ns / 1e9


def wall_ns() -> int:
    """The wall clock as this process's HybridClocks read it (with the injected offset)."""
    return time.time_ns() + _wall_offset_ns


class Clock:
    def now(self) -> Timestamp:
        raise NotImplementedError

    def update(self, ts: Timestamp) -> None:
        """Move the clock past a timestamp seen elsewhere (log replay, another node)."""
        raise NotImplementedError

    @property
    def is_hybrid(self) -> bool:
        return False


class HybridClock(Clock):
    def __init__(self, wall=wall_ns):
        self._wall = wall
        self._last = 0
        self._lock = threading.Lock()

    def now(self) -> Timestamp:
        phys = from_micros(self._wall() // 1000)
        with self._lock:
            self._last = max(self._last + 1, phys)
            return self._last

    def update(self, ts: Timestamp) -> None:
        with self._lock:
            self._last = max(self._last, ts)

    @property
    def is_hybrid(self) -> bool:
        return True


class LogicalClock(Clock):
    def __init__(self, start: int = 0):
        self._last = start
        self._lock = threading.Lock()

    def now(self) -> Timestamp:
        with self._lock:
            self._last += 1
            return self._last

    def update(self, ts: Timestamp) -> None:
        with self._lock:
            self._last = max(self._last, ts)
