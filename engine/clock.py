"""Clocks that issue HybridTime timestamps.

A HybridTime packs a physical time in microseconds and a logical counter into one int64:

    HybridTime = (physical_micros << 12) | logical        (12 logical bits, as in Kudu)

so timestamps sort like wall-clock time but stay unique and strictly increasing even when
many are issued in the same microsecond or the wall clock steps backwards. `LogicalClock`
issues 1, 2, 3, ... (Kudu's tests use one) so fuzz tests are deterministic.

Contract: `now()` is strictly greater than every value it returned before and every value
passed to `update()`; it is thread-safe.

Bounded updates (`HybridClock(max_error_s)`, `--max-clock-error`, 10 s by default as
Kudu's). Timestamps that come from *outside the cluster's servers* — a client's propagated
timestamp (`ts` of a write or scan), a snapshot the user or another server's tablet chose —
go through `update_bounded`, which refuses (`ClockError`, SQLSTATE 22008) one more than
`max_error_s` ahead of the local wall clock: a client with a broken clock, or a server far
out of sync, must not drag every timestamp of this server (and, through its log, of every
replica) into the future, where no later wall-clock reading ever passes it again. Raft
traffic between servers uses the unbounded `update`: an entry a leader stamped is part of
the replicated history (every replica must take it as it is, and its clock must pass it so
it can lead later with increasing timestamps); refusing it would only stall the replica
behind a leader it cannot change. Such an update is logged (at most once a minute) instead.
22008 (datetime_field_overflow) rather than a retryable 57P03: retrying at once cannot help,
the timestamp is wrong until the clocks agree again; the message names the offset.

Fault injection: `set_wall_offset(seconds)` shifts this process's wall clock as every
HybridClock built with the default wall reads it (the `failpoint` RPC's `clock_offset_s`,
engine/rpc): the nemesis of the Jepsen-style tests skews one process's clock by several
seconds, as an unsynchronised NTP would. Monotonic time (timeouts, leases) is not shifted.

Monotonic rate (fault injection): `monotonic()` is the monotonic time the servers' Raft
peers measure leader leases with and pace their ticks by (engine/tserver/raft_host.py,
tablet_server.py `_tick_loop`, master.py `_tick_loop`). `set_monotonic_rate(r)` (the
`failpoint` RPC's `monotonic_rate`) makes it run r times as fast as real time from now on
(continuous and never going back: only its slope changes), as a drifting or
mis-virtualised clock would. Raft's leases are safe while no server's rate differs from
another's by more than ~11% (engine/consensus/raft.py, Leader leases); the Jepsen-style
harness's `clock-rate` nemesis moves one process's rate within that bound.
"""

from __future__ import annotations

import logging
import threading
import time

from engine import errors

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


log = logging.getLogger(__name__)

DEFAULT_MAX_ERROR_S = 10.0  # Kudu's default bound on how far ahead an update may be


class ClockError(errors.InvalidArgument):
    """A timestamp too far ahead of this server's clock (see the module docstring)."""

    sqlstate = "22008"


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


# (rate, real time when it was set, this process's monotonic() then): one tuple, replaced
# whole, so a reader never sees half an update
_mono_state: tuple[float, float, float] = (1.0, 0.0, 0.0)
_mono_lock = threading.Lock()


def monotonic() -> float:
    """Seconds, never going back: time.monotonic() run at the injected rate (see the module
    docstring; exactly time.monotonic() until a rate is injected)."""
    rate, real0, local0 = _mono_state
    if rate == 1.0 and real0 == 0.0:
        return time.monotonic()
    return local0 + (time.monotonic() - real0) * rate


def monotonic_rate() -> float:
    """How many seconds of `monotonic()` pass per real second (1.0 unless injected)."""
    return _mono_state[0]


def set_monotonic_rate(rate: float) -> None:
    """From now on `monotonic()` runs `rate` times as fast as real time (fault injection;
    1.0 heals the rate, not the time already gained or lost)."""
    global _mono_state
    rate = float(rate)
    if not rate > 0:
        raise errors.InvalidArgument(f"monotonic_rate must be positive, not {rate}")
    with _mono_lock:
        now_local = monotonic()
        _mono_state = (rate, time.monotonic(), now_local)


class Clock:
    def now(self) -> Timestamp:
        raise NotImplementedError

    def update(self, ts: Timestamp) -> None:
        """Move the clock past a timestamp seen elsewhere (log replay, another node)."""
        raise NotImplementedError

    def update_bounded(self, ts: Timestamp) -> None:
        """`update` for a timestamp from outside the servers (a client's, a snapshot):
        refused with ClockError if too far ahead (HybridClock); others: `update`."""
        self.update(ts)

    @property
    def is_hybrid(self) -> bool:
        return False


class HybridClock(Clock):
    def __init__(self, wall=wall_ns, max_error_s: float = DEFAULT_MAX_ERROR_S):
        self._wall = wall
        self._last = 0
        self._lock = threading.Lock()
        self.max_error_s = max_error_s
        self._warned = float("-inf")  # monotonic time of the last far-ahead warning

    def now(self) -> Timestamp:
        # from_micros in line: every write op asks (Tablet.start_op)
        phys = (self._wall() // 1000) << LOGICAL_BITS
        with self._lock:
            last = self._last + 1
            self._last = last = phys if phys > last else last
            return last

    def update(self, ts: Timestamp) -> None:
        ahead_us = physical_micros(ts) - self._wall() // 1000
        if ahead_us > self.max_error_s * 1e6:
            t = time.monotonic()
            if t - self._warned >= 60:
                self._warned = t
                log.warning("clock moved %.3f s ahead of the local wall clock by a peer's "
                            "timestamp (max clock error %.3g s): are the servers' clocks "
                            "synchronised?", ahead_us / 1e6, self.max_error_s)
        with self._lock:
            self._last = max(self._last, ts)

    def update_bounded(self, ts: Timestamp) -> None:
        ahead_us = physical_micros(ts) - self._wall() // 1000
        if ahead_us > self.max_error_s * 1e6:
            raise ClockError(
                f"timestamp {ts} is {ahead_us / 1e6:.3f} s ahead of this server's clock, more "
                f"than the maximum clock error of {self.max_error_s:g} s "
                f"(--max-clock-error); the client's or another server's clock is wrong")
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
