"""The write-ahead log (engine/consensus/log.py) and the tablet's WAL replay.

Log level: append/read round trips across segment rolls, read_from(min_index), group
commit (concurrent writers share fsyncs), torn tails cut at every byte of the last record
(dropped, the file truncated, appends continue), a flipped byte in a middle record
(Corruption naming the file and offset), segment GC below the anchor.

Tablet level: unflushed writes come back after close (or no close at all) by WAL replay,
with their original timestamps, for wal_sync "commit" and "never" (process-level
durability, checked with a real SIGKILL); replay starts at the log anchor
(`Tablet.replayed_ops`); segments below the anchor are GC'd; new timestamps follow replayed
ones even when the wall clock went backwards; crash leftovers are removed on open.

Also regressions of engine bugs these tests and the crash test found: a zero-filled tail,
a flipped length byte in the last segment, a damaged first record of the last segment at
large indexes, and replay of ops whose rows later rowsets / REDO files already show in a
later state. Open engine bugs are pinned as strict xfails (`reason="engine bug: ..."`).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from engine import errors
from engine.clock import HybridClock
from engine.consensus.log import (JOIN_MAX_BYTES, MAGIC, WRITE, Log, LogEntry,
                                  _segment_name)
from engine.schema import ColumnSchema, Schema
from engine.tablet import Tablet, TabletConfig
from engine.types import DataType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REC_HEADER = 8  # payload_len u32 | crc32 u32


# -- helpers ---------------------------------------------------------------------------
def entry(i: int, rng: random.Random | None = None, size: int | None = None) -> LogEntry:
    rng = rng or random.Random(i)
    n = size if size is not None else rng.randrange(0, 300)
    return LogEntry(0, i, 1000 + 7 * i, WRITE, rng.randbytes(n))


def write_log(path, entries, segment_bytes=1 << 20, sync="never") -> list[tuple[str, int]]:
    """Append entries to a fresh log; returns each entry's (segment path, offset)."""
    log = Log(str(path), sync, segment_bytes)
    log.open_for_append(entries[0].index)
    where = []
    for e in entries:
        log.append(e)
        seg = log.segments()[-1][1]
        where.append((seg, log.segment_tail - len(e.encode())))
    log.close()
    return where


def read_all(path, min_index=1) -> list[LogEntry]:
    return list(Log(str(path)).read_from(min_index))


def flip(path: str, off: int, mask: int = 0x40) -> None:
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ mask]))


# -- round trips -----------------------------------------------------------------------
def test_round_trip_across_segment_rolls(tmp_path):
    rng = random.Random(1)
    entries = [entry(i, rng) for i in range(1, 301)]
    write_log(tmp_path, entries, segment_bytes=4096)
    log = Log(str(tmp_path))
    segs = log.segments()
    assert len(segs) > 10
    # each segment is named after its first entry, and names are increasing
    firsts = [f for f, _ in segs]
    assert firsts[0] == 1 and firsts == sorted(firsts)
    for f, p in segs:
        assert os.path.basename(p) == _segment_name(f)
    got = list(log.read_from(1))
    assert got == entries
    assert log.last_index == 300
    for start in (1, 2, firsts[3], firsts[3] + 1, firsts[-1], 299, 300):
        assert read_all(tmp_path, start) == entries[start - 1:]
    assert read_all(tmp_path, 301) == []


def test_append_after_reopen_continues_the_log(tmp_path):
    entries = [entry(i) for i in range(1, 51)]
    write_log(tmp_path, entries, segment_bytes=2048)
    log = Log(str(tmp_path), "commit", 2048)
    assert list(log.read_from(1)) == entries
    log.open_for_append(log.last_index + 1)
    more = [entry(i) for i in range(51, 101)]
    for e in more:
        log.append(e)
        log.wait_durable(e.index)
    log.close()
    assert read_all(tmp_path) == entries + more


def test_record_bytes_are_the_documented_layout(tmp_path):
    """Appended as a header and the body apart (`LogEntry.frame`, no copy of the body), a
    record is still exactly payload_len | crc32(payload) | payload on disk, the CRC over
    the whole payload (header fields and body), computed here independently."""
    import struct
    import zlib
    entries = [entry(i, size=n) for i, n in enumerate([0, 1, 7, 5000, 1 << 20], start=1)]
    log = Log(str(tmp_path), "never", 64 << 20)
    log.open_for_append(1)
    for e in entries:
        log.append(e)
    seg = log.segments()[-1][1]
    log.close()
    want = MAGIC
    for e in entries:
        payload = struct.pack("<QQQB", e.term, e.index, e.timestamp, e.type) + e.body
        want += struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
    with open(seg, "rb") as f:
        assert f.read() == want
    assert [(e.index, e.body) for e in read_all(tmp_path)] == \
        [(e.index, e.body) for e in entries]


def test_partial_raw_writes_are_completed():
    """A raw (unbuffered) write may write less than asked; the log writes the rest."""
    from engine.consensus.log import _write_all

    class Trickle:
        def __init__(self):
            self.out = bytearray()

        def write(self, b):
            n = min(3, len(b))
            self.out += bytes(b[:n])
            return n
    f = Trickle()
    _write_all(f, b"0123456789abcdef")
    assert bytes(f.out) == b"0123456789abcdef"


def test_empty_and_large_bodies(tmp_path):
    entries = [entry(1, size=0), entry(2, size=200_000), entry(3, size=1)]
    write_log(tmp_path, entries, segment_bytes=1024)
    assert read_all(tmp_path) == entries


def test_unknown_sync_policy(tmp_path):
    with pytest.raises(errors.InvalidArgument):
        Log(str(tmp_path), sync="sometimes")


# -- group commit ----------------------------------------------------------------------
@pytest.mark.parametrize("writers,per,segment_bytes", [
    (32, 1, 8 << 20),   # one append each: fewer fsyncs than writers
    (16, 25, 8 << 20),
    (16, 25, 4096),     # segments roll while others wait for their fsync
])
def test_group_commit(tmp_path, writers, per, segment_bytes):
    log = Log(str(tmp_path), "commit", segment_bytes)
    log.open_for_append(1)
    index_lock = threading.Lock()
    barrier = threading.Barrier(writers)
    done = []
    failures = []

    def writer(w):
        try:
            barrier.wait()
            for _ in range(per):
                with index_lock:  # the caller assigns indexes in order, under its lock
                    i = log.next_index()
                    log.append(entry(i, size=100))
                log.wait_durable(i)
                assert log._synced >= i
                done.append(i)
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a writer hung in wait_durable"
    assert not failures, failures
    assert sorted(done) == list(range(1, writers * per + 1))
    assert 1 <= log.fsyncs < writers * per, log.fsyncs
    log.close()
    assert [e.index for e in read_all(tmp_path)] == list(range(1, writers * per + 1))


@pytest.mark.parametrize("delay_us", [0, 1000])
def test_group_commit_acknowledges_only_what_an_fsync_covered(tmp_path, monkeypatch,
                                                               delay_us):
    """A writer returns from `wait_durable(i)` only after an fsync that started once entry
    i was written has returned: each fsync here records the last index appended when it
    started (all written before it, so covered) and is slow, so writers append during it
    and must wait for the next one. Acknowledging the appended-at-the-end index instead
    would pass the other group-commit tests and fail this one. With a commit delay
    (`delay_us`) too: records appended during a leader's delay join its fsync, those
    appended once it started do not."""
    import engine.consensus.log as log_mod
    log = Log(str(tmp_path), "commit", commit_delay_us=delay_us, commit_siblings=1)
    log.open_for_append(1)
    real_fsync = log_mod.fsync
    covered = [0]            # the highest index a returned fsync covered
    cover_lock = threading.Lock()

    def slow_fsync(fd, path):
        at_start = log._appended   # every index up to here was written before this fsync
        threading.Event().wait(0.002)
        real_fsync(fd, path)
        with cover_lock:
            covered[0] = max(covered[0], at_start)

    monkeypatch.setattr(log_mod, "fsync", slow_fsync)
    index_lock = threading.Lock()
    writers, per = 12, 15
    barrier = threading.Barrier(writers)
    failures = []

    def writer():
        try:
            barrier.wait()
            for _ in range(per):
                with index_lock:
                    i = log.next_index()
                    log.append(entry(i, size=60))
                log.wait_durable(i)
                with cover_lock:
                    assert covered[0] >= i, f"index {i} acknowledged, fsyncs covered {covered[0]}"
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a writer hung in wait_durable"
    assert not failures, failures[:3]
    assert 1 <= log.fsyncs < writers * per
    log.close()


def _until(cond, what: str) -> None:
    for _ in range(2000):
        if cond():
            return
        threading.Event().wait(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def test_commit_delay_groups_concurrent_writers_into_one_fsync(tmp_path, monkeypatch):
    """A leader that finds another writer waiting in the process (here one blocked in
    another log's fsync) waits the commit delay before its fsync; the writers that
    append meanwhile queue behind it and are covered by that one fsync. Without the
    delay the leader syncs at once and the writers after it need a second fsync."""
    import engine.consensus.log as log_mod
    real_fsync = log_mod.fsync
    gate = threading.Event()
    other_path = str(tmp_path / "other")
    other = Log(other_path, "commit")
    other.open_for_append(1)
    other.append(entry(1, size=20))

    def fsync(fd, path):
        if path == other_path:      # the sibling's commit: blocked until the end
            assert gate.wait(30)
        real_fsync(fd, path)

    monkeypatch.setattr(log_mod, "fsync", fsync)
    log = Log(str(tmp_path / "wal"), "commit", commit_delay_us=300_000, commit_siblings=1)
    log.open_for_append(1)
    base = len(log_mod._waiting)
    sibling = threading.Thread(target=other.wait_durable, args=(1,), daemon=True)
    done = {}

    def writer(i):
        log.wait_durable(i)
        done[i] = log._synced

    writers = [threading.Thread(target=writer, args=(i,), daemon=True) for i in (1, 2, 3, 4)]
    try:
        sibling.start()
        _until(lambda: len(log_mod._waiting) == base + 1, "the sibling to wait")
        log.append(entry(1, size=40))
        writers[0].start()
        _until(lambda: log.delays == 1, "the leader to wait the commit delay")
        assert log.fsyncs == 0
        for i in (2, 3, 4):
            log.append(entry(i, size=40))
            writers[i - 1].start()
        _until(lambda: len(log._waiters) == 3, "three writers queued behind the leader")
        for w in writers:
            w.join(10)
            assert not w.is_alive()
        assert done == {1: 4, 2: 4, 3: 4, 4: 4}
        assert log.fsyncs == 1 and log.delays == 1
    finally:
        gate.set()
    sibling.join(10)
    assert not sibling.is_alive()
    assert len(log_mod._waiting) == base, "a writer left the count of waiting writers"
    monkeypatch.setattr(log_mod, "fsync", real_fsync)
    log.close()
    other.close()


def test_commit_delay_never_delays_a_lone_writer(tmp_path):
    """With no other writer waiting, a leader fsyncs at once whatever the delay (each
    of 20 commits would sleep 0.5 s otherwise); `commit_siblings` 0 delays every
    leader, the setting PostgreSQL also allows."""
    import time

    import engine.consensus.log as log_mod
    base = len(log_mod._waiting)
    log = Log(str(tmp_path / "a"), "commit", commit_delay_us=500_000, commit_siblings=1)
    log.open_for_append(1)
    t0 = time.monotonic()
    for i in range(1, 21):
        log.append(entry(i, size=40))
        log.wait_durable(i)
    assert log.delays == 0 and log.fsyncs == 20
    assert time.monotonic() - t0 < 5, "a lone writer waited the commit delay"
    assert len(log_mod._waiting) == base
    log.close()
    always = Log(str(tmp_path / "b"), "commit", commit_delay_us=1000, commit_siblings=0)
    always.open_for_append(1)
    for i in range(1, 4):
        always.append(entry(i, size=40))
        always.wait_durable(i)
    assert always.delays == 3 and always.fsyncs == 3
    always.close()
    with pytest.raises(errors.InvalidArgument):
        Log(str(tmp_path / "c"), "commit", commit_delay_us=-1)


def test_tablet_passes_its_commit_delay_to_its_log(tmp_path):
    t = Tablet.create(str(tmp_path), SCHEMA, cfg(wal_commit_delay_us=250,
                                                 wal_commit_siblings=3))
    assert t.log.commit_delay == 250e-6 and t.log.commit_siblings == 3
    t.close()


def test_group_commit_wakes_only_covered_waiters_and_one_leader(tmp_path, monkeypatch):
    """When an fsync ends, its leader wakes the waiters it covered and hands the first
    uncovered one the next fsync; an uncovered waiter that does not lead sleeps on
    (it is not woken only to wait again: a wake-up costs a thread switch and the GIL)."""
    import engine.consensus.log as log_mod
    log = Log(str(tmp_path), "commit")
    log.open_for_append(1)
    real_fsync = log_mod.fsync
    gates = [threading.Event(), threading.Event()]
    calls = []

    def gated_fsync(fd, path):
        n = len(calls)
        calls.append(log._appended)
        assert gates[n].wait(10)
        real_fsync(fd, path)

    monkeypatch.setattr(log_mod, "fsync", gated_fsync)
    done = {}

    def waiter(i):
        log.wait_durable(i)
        done[i] = log._synced

    def until(cond):
        for _ in range(1000):
            if cond():
                return
            threading.Event().wait(0.01)
        raise AssertionError("timed out")

    log.append(entry(1, size=40))
    leader = threading.Thread(target=waiter, args=(1,), daemon=True)
    b = threading.Thread(target=waiter, args=(2,), daemon=True)
    c = threading.Thread(target=waiter, args=(3,), daemon=True)
    try:
        leader.start()
        until(lambda: len(calls) == 1)         # fsync 1 (covering index 1) is running
        log.append(entry(2, size=40))
        log.append(entry(3, size=40))
        b.start()
        until(lambda: len(log._waiters) == 1)
        c.start()
        until(lambda: len(log._waiters) == 2)
        c_entry = log._waiters[1]
        gates[0].set()                         # fsync 1 ends: index 1 acknowledged,
        until(lambda: len(calls) == 2)         # the writer of 2 leads fsync 2
        leader.join(10)
        assert done == {1: 1} and calls == [1, 3]
        assert log._waiters == [c_entry] and log._waiters[0] is c_entry, \
            "the waiter fsync 1 did not cover was woken (it queued again)"
    finally:
        for g in gates:
            g.set()
    for t in (b, c):
        t.join(10)
        assert not t.is_alive()
    assert done == {1: 1, 2: 3, 3: 3} and log.fsyncs == 2 and log._waiters == []
    monkeypatch.setattr(log_mod, "fsync", real_fsync)
    log.close()


def test_tablet_group_commit(tmp_path):
    """Concurrent Tablet writers with wal_sync="commit" share fsyncs; every write is back
    after reopen."""
    t = Tablet.create(str(tmp_path), SCHEMA, cfg(wal_segment_bytes=1 << 20))
    writers, per = 8, 20
    barrier = threading.Barrier(writers)
    failures = []

    def writer(w):
        try:
            barrier.wait()
            for j in range(per):
                r = t.insert({"k": [w * 1000 + j], "v": [j], "s": [None]})
                assert r.num_applied == 1
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not failures, failures
    assert 1 <= t.log.fsyncs < writers * per, t.log.fsyncs
    want = rows_of(t)
    assert len(want) == writers * per
    del t
    t = Tablet.open(str(tmp_path), cfg(wal_segment_bytes=1 << 20))
    assert t.replayed_ops == writers * per
    assert rows_of(t) == want
    t.close()


# -- a failed fsync is fail-stop ---------------------------------------------------------
def test_failed_fsync_wakes_every_waiter_and_stops_the_log(tmp_path, monkeypatch):
    """The writer running the group's fsync and the writers waiting for it all get
    IOFailure (58030) - before, the waiters slept until some later writer synced, forever
    on an idle tablet - and the log then refuses appends and waits without trying fsync
    again (a retry can succeed after the kernel dropped the failed pages)."""
    log = Log(str(tmp_path), "commit")
    log.open_for_append(1)
    for i in (1, 2, 3):
        log.append(entry(i, size=50))
    entered, release = threading.Event(), threading.Event()
    calls = []
    real_fsync = os.fsync

    def failing_fsync(fd):
        calls.append(fd)
        entered.set()
        release.wait(10)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    outcomes = {}

    def waiter(i):
        try:
            log.wait_durable(i)
            outcomes[i] = "durable"
        except errors.IOFailure as e:
            outcomes[i] = e

    syncer = threading.Thread(target=waiter, args=(1,))
    syncer.start()
    assert entered.wait(10)
    others = [threading.Thread(target=waiter, args=(i,)) for i in (2, 3)]
    for t in others:
        t.start()
    while len(log._waiters) < 2 and all(t.is_alive() for t in others):
        threading.Event().wait(0.01)
    release.set()
    for t in [syncer, *others]:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in [syncer, *others]), "a writer hung in wait_durable"
    assert sorted(outcomes) == [1, 2, 3]
    for e in outcomes.values():
        assert isinstance(e, errors.IOFailure) and e.sqlstate == "58030"
        assert "could not fsync the write-ahead log" in str(e) and "Error" not in str(e)[:5]
    assert len(calls) == 1
    monkeypatch.setattr(os, "fsync", real_fsync)   # the disk "recovers": still refused
    with pytest.raises(errors.IOFailure):
        log.wait_durable(3)
    with pytest.raises(errors.IOFailure):
        log.append(entry(4))
    with pytest.raises(errors.IOFailure):
        log.sync_appended()
    assert log._synced == 0
    log.close()


@pytest.mark.parametrize("size", [80, JOIN_MAX_BYTES + 1])   # joined, and two writes
def test_failed_append_stops_the_log_and_leaves_a_torn_tail(tmp_path, size):
    """An append whose write fails after part of its record (a short write, then ENOSPC)
    is IOFailure, and no later record may follow the part written: reopened, the log holds
    every entry before it and drops the torn tail."""
    log = Log(str(tmp_path), "commit")
    log.open_for_append(1)
    for i in (1, 2):
        log.append(entry(i, size=80))
    real = log._f

    class FullDisk:            # the first 20 bytes go out (a short write), then ENOSPC
        def __init__(self):
            self.calls = 0

        def write(self, data):
            self.calls += 1
            if self.calls > 1:
                raise OSError(28, "No space left on device")
            return real.write(data[:20])

        def __getattr__(self, name):
            return getattr(real, name)

    log._f = FullDisk()
    with pytest.raises(errors.IOFailure) as ei:
        log.append(entry(3, size=size))
    assert "could not write the write-ahead log" in str(ei.value)
    log._f = real
    with pytest.raises(errors.IOFailure):
        log.append(entry(4, size=80))
    log.close()
    assert [e.index for e in read_all(tmp_path)] == [1, 2]


def test_a_write_the_stopped_log_refuses_leaves_no_op_in_flight(tmp_path, monkeypatch):
    """A write refused at its WAL append (the log stopped by a failed fsync) was started in
    MVCC first: it must be aborted there, or safe time and a flush, which waits for every
    op in flight, would wait for it for good."""
    t = Tablet.create(str(tmp_path), SCHEMA, cfg())
    t.insert({"k": [1], "v": [1], "s": [None]})

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(errors.IOFailure):
        t.insert({"k": [2], "v": [2], "s": [None]})
    monkeypatch.undo()
    with pytest.raises(errors.IOFailure):   # refused at the append
        t.insert({"k": [3], "v": [3], "s": [None]})
    waiter = threading.Thread(target=t.mvcc.wait_for_all_in_flight, daemon=True)
    waiter.start()
    waiter.join(timeout=10)
    assert not waiter.is_alive(), "an op refused by the log is still in flight"


def test_failed_fsync_fails_the_statement_and_every_later_write(tmp_path, monkeypatch):
    """Through SQL: the INSERT whose fsync failed is an error with SQLSTATE 58030 (not
    acknowledged: its outcome is unknown), and so is every later write to the tablet,
    although fsync works again; after a restart the database opens and takes writes."""
    import kudusql

    db = str(tmp_path / "db")
    con = kudusql.connect(db)
    cur = con.cursor()
    cur.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT) "
                "PARTITION BY RANGE (k) (PARTITION VALUES < 1000)")   # one tablet, one WAL
    cur.execute("INSERT INTO t VALUES (1, 1)")
    real_fsync = os.fsync

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(kudusql.Error) as ei:
        cur.execute("INSERT INTO t VALUES (2, 2)")
    assert ei.value.sqlstate == "58030", (ei.value.sqlstate, str(ei.value))
    monkeypatch.setattr(os, "fsync", real_fsync)
    with pytest.raises(kudusql.Error) as ei:
        cur.execute("INSERT INTO t VALUES (3, 3)")
    assert ei.value.sqlstate == "58030"
    con.close()
    con = kudusql.connect(db)
    cur = con.cursor()
    cur.execute("INSERT INTO t VALUES (4, 4)")
    cur.execute("SELECT k FROM t WHERE k IN (1, 3, 4) ORDER BY k")
    assert [r[0] for r in cur.fetchall()] == [1, 4]   # 3 was refused before its append
    con.close()


def test_size_of_a_log_whose_segment_goes_meanwhile(tmp_path, monkeypatch):
    """A segment deleted between the listing and its stat (gc, or the tablet removed while
    the maintenance policy weighs its log) counts nothing instead of raising."""
    log = Log(str(tmp_path), "never", segment_bytes=256)
    log.open_for_append(1)
    for i in range(1, 6):
        log.append(entry(i, size=200))
    listed = log.segments()
    size = log.size_bytes()
    gone = listed[0][1]
    gone_bytes = os.path.getsize(gone)
    os.unlink(gone)
    monkeypatch.setattr(Log, "segments", lambda self: listed)
    assert len(listed) > 1 and log.size_bytes() == size - gone_bytes
    log.close()


def test_sync_never_does_not_fsync_on_commit(tmp_path):
    log = Log(str(tmp_path), "never")
    log.open_for_append(1)
    for i in range(1, 21):
        log.append(entry(i))
        log.wait_durable(i)
    assert log.fsyncs == 0
    # entries reached the OS: another reader sees them without close
    assert [e.index for e in read_all(tmp_path)] == list(range(1, 21))
    log.close()


# -- torn tails ------------------------------------------------------------------------
@pytest.mark.parametrize("segment_bytes", [1 << 20, 1])
def test_torn_tail_at_every_offset(tmp_path, segment_bytes):
    """Cut the last segment at every byte inside its last record: that record is dropped,
    the earlier ones are intact, the file is truncated, and appends continue.
    segment_bytes=1 puts every record in a segment of its own."""
    entries = [entry(i, size=12) for i in range(1, 6)]
    src = tmp_path / "src"
    where = write_log(src, entries, segment_bytes=segment_bytes)
    seg, start = where[-1]
    end = os.path.getsize(seg)
    assert end - start == len(entries[-1].encode())
    for cut in range(start, end):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(src, d)
        p = os.path.join(d, os.path.basename(seg))
        os.truncate(p, cut)
        log = Log(str(d), "commit", segment_bytes)
        assert list(log.read_from(1)) == entries[:-1], f"cut at {cut}"
        assert log.last_index == 4
        assert os.path.getsize(p) == max(start, len(MAGIC)), f"not truncated (cut {cut})"
        log.open_for_append(5)
        new = [entry(5, size=7), entry(6, size=9)]
        for e in new:
            log.append(e)
            log.wait_durable(e.index)
        log.close()
        assert read_all(d) == entries[:-1] + new, f"cut at {cut}"
        shutil.rmtree(d)


def test_torn_tail_bad_crc_of_last_record_is_dropped(tmp_path):
    entries = [entry(i, size=40) for i in range(1, 6)]
    where = write_log(tmp_path, entries)
    seg, start = where[-1]
    flip(seg, os.path.getsize(seg) - 1)  # last payload byte: a torn sector
    assert read_all(tmp_path) == entries[:-1]
    assert os.path.getsize(seg) == start


def test_segment_torn_inside_its_magic(tmp_path):
    """A crash while creating a segment leaves it shorter than the magic: dropped."""
    entries = [entry(i, size=40) for i in range(1, 6)]
    write_log(tmp_path, entries)
    for n in range(len(MAGIC)):
        p = os.path.join(tmp_path, _segment_name(6))
        with open(p, "wb") as f:
            f.write(MAGIC[:n])
        log = Log(str(tmp_path), "commit")
        assert list(log.read_from(1)) == entries
        log.open_for_append(6)
        log.append(entry(6))
        log.wait_durable(6)
        log.close()
        assert read_all(tmp_path) == entries + [entry(6)]
        os.unlink(p)


def test_zero_filled_tail_is_dropped(tmp_path):
    """What an unsynced append can leave after a power loss on ext4/xfs (the size grew,
    the data blocks did not): a tail of zeros is a torn tail, not corruption."""
    entries = [entry(i, size=40) for i in range(1, 6)]
    where = write_log(tmp_path, entries)
    with open(where[-1][0], "ab") as f:
        f.write(bytes(64))
    assert read_all(tmp_path) == entries


# -- corruption ------------------------------------------------------------------------
def _corruption_setup(tmp_path, segment_bytes):
    entries = [entry(i, size=40) for i in range(1, 8)]
    src = tmp_path / "src"
    where = write_log(src, entries, segment_bytes=segment_bytes)
    return entries, src, where


def _expect_corruption(d, seg, off):
    with pytest.raises(errors.Corruption) as ei:
        read_all(d)
    msg = str(ei.value)
    assert os.path.basename(seg) in msg and f"offset {off}" in msg, msg


# -- preallocation ----------------------------------------------------------------------
def _open_log(path, n, segment_bytes=1 << 20, size=40):
    """An open log (not closed: as a crash leaves it) holding entries 1..n."""
    log = Log(str(path), "commit", segment_bytes)
    log.open_for_append(1)
    entries = [entry(i, size=size) for i in range(1, n + 1)]
    for e in entries:
        log.append(e)
        log.wait_durable(e.index)
    return log, entries


def test_preallocated_segment_is_cut_to_its_records(tmp_path):
    """The segment being written is preallocated ahead of its records; size_bytes counts
    records; a rolled or closed segment is exactly its records."""
    log, entries = _open_log(tmp_path, 30, segment_bytes=600)
    segs = log.segments()
    assert len(segs) > 2
    cur = segs[-1][1]
    assert os.path.getsize(cur) > log.segment_tail
    sealed = sum(os.path.getsize(p) for _, p in segs[:-1])
    assert sealed == sum(len(e.encode()) for e in entries) - (log.segment_tail - len(MAGIC)) \
        + len(MAGIC) * (len(segs) - 1)
    assert log.size_bytes() == sealed + log.segment_tail
    assert log.read_range(1, 30) == entries        # an open log reads up to its zeros
    log.close()
    assert os.path.getsize(cur) == log.segment_tail
    assert read_all(tmp_path) == entries


def test_crash_with_preallocated_tail_keeps_every_record(tmp_path):
    """A copy of an open log (a crash: the last segment ends in preallocated zeros) reads
    back every record, drops the zeros, and takes appends after them."""
    log, entries = _open_log(tmp_path / "src", 20)
    assert os.path.getsize(log.segments()[-1][1]) == 1 << 20     # capped at segment_bytes
    d = tmp_path / "crash"
    shutil.copytree(tmp_path / "src", d)
    seg = os.path.join(d, os.path.basename(log.segments()[-1][1]))
    tail = log.segment_tail
    log.close()
    assert os.path.getsize(seg) > tail
    again = Log(str(d), "commit")
    assert list(again.read_from(1)) == entries
    assert os.path.getsize(seg) == tail
    again.open_for_append(21)
    again.append(entry(21))
    again.wait_durable(21)
    again.close()
    assert read_all(d) == entries + [entry(21)]


@pytest.mark.parametrize("which", [0, 3, 19])
def test_damaged_record_before_preallocated_zeros_is_corruption(tmp_path, which):
    """Records after a damaged one, then preallocated zeros: corruption, not a torn tail
    (the zeros must not hide the acknowledged records after the damage)."""
    log, entries = _open_log(tmp_path / "src", 20)
    off = len(MAGIC) + sum(len(e.encode()) for e in entries[:which])
    d = tmp_path / "crash"
    shutil.copytree(tmp_path / "src", d)
    seg = os.path.join(d, os.path.basename(log.segments()[-1][1]))
    log.close()
    flip(seg, off + REC_HEADER + 30)
    size = os.path.getsize(seg)
    if which == 19:       # the last record: a torn tail, dropped
        assert read_all(d) == entries[:-1]
        return
    _expect_corruption(d, seg, off)
    assert os.path.getsize(seg) == size


def test_log_without_preallocation(tmp_path, monkeypatch):
    """A file system that cannot preallocate (EOPNOTSUPP): the log writes without it."""
    import errno as _errno

    def refuse(fd, off, n):
        raise OSError(_errno.EOPNOTSUPP, "not supported")
    monkeypatch.setattr(os, "posix_fallocate", refuse)
    log, entries = _open_log(tmp_path, 10)
    assert os.path.getsize(log.segments()[-1][1]) == log.segment_tail
    log.close()
    assert read_all(tmp_path) == entries


@pytest.mark.parametrize("segment_bytes", [1 << 20, 200])
def test_flipped_byte_in_middle_record_is_corruption(tmp_path, segment_bytes):
    """Every byte of a middle record's CRC and payload, flipped: Corruption naming the
    segment and the record's offset; the file is left alone."""
    entries, src, where = _corruption_setup(tmp_path, segment_bytes)
    seg, start = where[3]
    size = len(entries[3].encode())
    for b in range(4, size):  # the length field is covered by the test below
        d = tmp_path / f"flip{b}"
        shutil.copytree(src, d)
        p = os.path.join(d, os.path.basename(seg))
        flip(p, start + b)
        before = os.path.getsize(p)
        _expect_corruption(d, seg, start)
        assert os.path.getsize(p) == before
        shutil.rmtree(d)


def test_flipped_length_byte_in_middle_of_older_segment_is_corruption(tmp_path):
    entries, src, where = _corruption_setup(tmp_path, 200)
    seg, start = where[3]
    assert seg != where[-1][0]
    for b in range(4):
        for mask in (0x01, 0x40, 0x80):
            d = tmp_path / f"flip{b}-{mask}"
            shutil.copytree(src, d)
            flip(os.path.join(d, os.path.basename(seg)), start + b, mask)
            with pytest.raises(errors.Corruption) as ei:
                read_all(d)
            assert os.path.basename(seg) in str(ei.value)
            shutil.rmtree(d)


def test_flipped_length_byte_in_middle_record_of_last_segment_is_corruption(tmp_path):
    """A middle record whose length now points past the end of the file is corruption,
    not a torn tail: truncating there would silently drop acknowledged records."""
    entries, src, where = _corruption_setup(tmp_path, 1 << 20)
    seg, start = where[1]
    for b in range(4):
        for mask in (0x01, 0x10, 0x80):  # e.g. byte 2, 0x01: payload_len += 65536
            d = tmp_path / f"flip{b}-{mask}"
            shutil.copytree(src, d)
            p = os.path.join(d, os.path.basename(seg))
            flip(p, start + b, mask)
            size = os.path.getsize(p)
            _expect_corruption(d, seg, start)
            assert os.path.getsize(p) == size, (
                f"the segment was truncated from {size} to {os.path.getsize(p)} bytes")
            shutil.rmtree(d)


@pytest.mark.parametrize("first_index", [1, 1000, 20_000_000])
def test_corrupt_first_record_of_last_segment_is_corruption(tmp_path, first_index):
    """Nothing valid before the damaged record in this segment: the records after it must
    still be recognised (indexes past 2**24 too), so this is corruption, not a torn tail."""
    entries = [entry(i, size=40) for i in range(first_index, first_index + 5)]
    where = write_log(tmp_path, entries)
    seg, start = where[0]
    flip(seg, start + REC_HEADER + 30)
    size = os.path.getsize(seg)
    try:
        _expect_corruption(tmp_path, seg, start)
    finally:
        assert os.path.getsize(seg) == size, "the segment was truncated"


def test_torn_tail_whose_payload_embeds_a_record_is_dropped(tmp_path):
    entries = [entry(i, size=40) for i in range(1, 6)]
    inner = LogEntry(0, 7, 1049, WRITE, b"z" * 10).encode()
    last = LogEntry(0, 6, 1042, WRITE, b"a" * 20 + inner + b"b" * 200)
    where = write_log(tmp_path, entries + [last])
    seg, _ = where[-1]
    os.truncate(seg, os.path.getsize(seg) - 100)  # cut after the embedded record
    assert read_all(tmp_path) == entries


def test_bad_magic_of_older_segment_is_corruption(tmp_path):
    entries, src, where = _corruption_setup(tmp_path, 200)
    seg = where[0][0]
    flip(seg, 3)
    with pytest.raises(errors.Corruption) as ei:
        read_all(src)
    assert os.path.basename(seg) in str(ei.value)


def test_corrupt_last_record_of_older_segment_is_corruption(tmp_path):
    """Only the final record of the final segment may be torn."""
    entries, src, where = _corruption_setup(tmp_path, 200)
    segs = Log(str(src)).segments()
    assert len(segs) >= 3
    seg = segs[0][1]
    last_in_seg = max(i for i, (s, _) in enumerate(where) if s == seg)
    flip(seg, os.path.getsize(seg) - 1)
    _expect_corruption(src, seg, where[last_in_seg][1])
    # and a cut-short older segment too
    entries, src2, where = _corruption_setup(tmp_path / "b", 200)
    seg = Log(str(src2)).segments()[0][1]
    os.truncate(seg, os.path.getsize(seg) - 3)
    with pytest.raises(errors.Corruption):
        read_all(src2)


# -- GC --------------------------------------------------------------------------------
def test_gc_deletes_only_whole_segments_below_the_anchor(tmp_path):
    entries = [entry(i, size=60) for i in range(1, 101)]
    write_log(tmp_path, entries, segment_bytes=500)
    firsts = [f for f, _ in Log(str(tmp_path)).segments()]
    assert len(firsts) > 5
    for anchor in [1, firsts[1] - 1, firsts[1], firsts[1] + 1, firsts[3], 100, 101, 10 ** 6]:
        d = tmp_path / f"gc{anchor}"
        shutil.copytree(tmp_path, d, ignore=shutil.ignore_patterns("gc*"))
        log = Log(str(d))
        removed = log.gc(anchor)
        left = [f for f, _ in log.segments()]
        # keep a segment iff it holds an entry >= anchor, or it is the newest one
        want = [f for j, f in enumerate(firsts)
                if j == len(firsts) - 1 or firsts[j + 1] - 1 >= anchor]
        assert left == want, (anchor, left, want)
        assert removed == len(firsts) - len(want)
        assert read_all(d, anchor) == entries[min(anchor, 101) - 1:]


def test_gc_never_deletes_the_segment_being_written(tmp_path):
    log = Log(str(tmp_path), "commit", 300)
    log.open_for_append(1)
    for i in range(1, 30):
        log.append(entry(i, size=50))
    log.wait_durable(29)
    log.gc(10 ** 9)
    segs = log.segments()
    assert len(segs) == 1
    for i in range(30, 35):
        log.append(entry(i, size=50))
    log.wait_durable(34)
    log.close()
    assert [e.index for e in read_all(tmp_path, 1)][-5:] == [30, 31, 32, 33, 34]


# -- tablet level ----------------------------------------------------------------------
SCHEMA = Schema([ColumnSchema("k", DataType.INT64),
                 ColumnSchema("v", DataType.INT64, nullable=True),
                 ColumnSchema("s", DataType.STRING, nullable=True)], key=["k"])


def cfg(**kw) -> TabletConfig:
    base = dict(page_rows=16, drs_target_bytes=4096, fsync=False, wal_segment_bytes=4096)
    base.update(kw)
    return TabletConfig(**base)


def rows_of(t: Tablet, snapshot=None) -> list[tuple]:
    tbl = t.scan_table(snapshot=snapshot)
    return sorted(zip(*(tbl.column(c).to_pylist() for c in ("k", "v", "s"))))


def workload(t: Tablet, rng: random.Random, n_ops: int) -> list[tuple[int, list]]:
    """Random upsert / update / delete batches; returns [(timestamp, rows after the op)]."""
    history = []
    live: list[int] = []
    for _ in range(n_ops):
        r = rng.random()
        if r < 0.5 or not live:
            ks = rng.sample(range(1000), rng.randint(1, 20))
            res = t.upsert({"k": ks, "v": [rng.randrange(100) for _ in ks],
                            "s": [rng.choice([None, "a", "bb", "\u00e9"]) for _ in ks]})
        elif r < 0.75:
            ks = rng.sample(live, min(len(live), rng.randint(1, 10)))
            res = t.update({"k": ks, "v": [-1] * len(ks)})
        else:
            ks = rng.sample(live, min(len(live), rng.randint(1, 10)))
            res = t.delete({"k": ks})
        assert not res.row_errors
        state = rows_of(t)
        live = [k for k, _, _ in state]
        history.append((res.timestamp, state))
    return history


@pytest.mark.parametrize("wal_sync", ["commit", "never"])
@pytest.mark.parametrize("close", [True, False])
def test_unflushed_writes_survive_reopen(tmp_path, wal_sync, close):
    c = cfg(wal_sync=wal_sync)
    t = Tablet.create(str(tmp_path), SCHEMA, c)
    history = workload(t, random.Random(3), 40)
    want = rows_of(t)
    if close:
        t.close()
    # else: abandoned without close, as a crashed process leaves it (the OS has the data)
    t2 = Tablet.open(str(tmp_path), c)
    assert t2.replayed_ops == 40
    assert rows_of(t2) == want
    for ts, state in history:  # original timestamps: time travel is unchanged
        assert rows_of(t2, snapshot=ts) == state
    r = t2.insert({"k": [5000], "v": [1], "s": ["x"]})
    assert r.timestamp > history[-1][0]
    t2.close()
    t3 = Tablet.open(str(tmp_path), c)
    assert rows_of(t3) == sorted(want + [(5000, 1, "x")])
    t3.close()


def test_replay_starts_at_the_log_anchor(tmp_path):
    c = cfg(wal_segment_bytes=1 << 20)
    t = Tablet.create(str(tmp_path), SCHEMA, c)
    for i in range(5):
        t.insert({"k": [i], "v": [i], "s": ["a"]})
    t.close()
    t = Tablet.open(str(tmp_path), c)
    assert t.replayed_ops == 5
    t.flush_mrs()  # everything is in a DiskRowSet now
    for i in range(5, 8):
        t.insert({"k": [i], "v": [i], "s": ["b"]})
    t.close()
    t = Tablet.open(str(tmp_path), c)
    assert t.replayed_ops == 3  # only the inserts after the flush
    t.flush_mrs()
    t.update({"k": [0, 6], "v": [100, 600]})  # DMS mutations of flushed rows
    t.close()
    t = Tablet.open(str(tmp_path), c)
    assert t.replayed_ops == 1
    assert rows_of(t) == [(0, 100, "a"), (1, 1, "a"), (2, 2, "a"), (3, 3, "a"), (4, 4, "a"),
                          (5, 5, "b"), (6, 600, "b"), (7, 7, "b")]
    t.flush_dms()
    t.close()
    t = Tablet.open(str(tmp_path), c)
    assert t.replayed_ops == 0
    assert rows_of(t)[0] == (0, 100, "a")
    t.close()
    t = Tablet.open(str(tmp_path), c)  # reopening again replays nothing new
    assert t.replayed_ops == 0
    t.close()


def test_flushes_gc_wal_segments(tmp_path):
    c = cfg(wal_segment_bytes=2048)
    t = Tablet.create(str(tmp_path), SCHEMA, c)
    for i in range(60):
        t.insert({"k": list(range(i * 10, i * 10 + 10)), "v": [i] * 10, "s": ["x" * 20] * 10})
    wal = os.path.join(str(tmp_path), "wal")
    assert len(Log(wal).segments()) > 5
    t.flush_mrs()
    assert len(Log(wal).segments()) == 1
    t.update({"k": [1, 2], "v": [0, 0]})
    for i in range(60, 70):
        t.insert({"k": [i * 10], "v": [i], "s": ["x" * 100]})
    t.flush_mrs()
    # the DMS still holds the update: segments from its op on must stay
    segs = Log(wal).segments()
    t.flush_dms()
    assert len(Log(wal).segments()) <= len(segs)
    assert len(Log(wal).segments()) == 1
    t.close()
    t = Tablet.open(str(tmp_path), c)
    assert t.replayed_ops == 0
    assert len(rows_of(t)) == 610
    t.close()


def test_new_timestamps_follow_replayed_ones_when_the_wall_clock_went_back(tmp_path):
    c = cfg()
    t = Tablet.create(str(tmp_path), SCHEMA, c)
    tss = [t.insert({"k": [i], "v": [i], "s": [None]}).timestamp for i in range(10)]
    del t  # crash: no close, no flush
    frozen = HybridClock(wall=lambda: 1_000_000_000)  # 1970: far behind the replayed ops
    t = Tablet.open(str(tmp_path), c, clock=frozen)
    assert t.replayed_ops == 10
    assert t.current_timestamp() >= tss[-1]
    r = t.insert({"k": [99], "v": [1], "s": ["late"]})
    assert r.timestamp > tss[-1]
    assert rows_of(t, snapshot=tss[4]) == [(i, i, None) for i in range(5)]
    t.close()


def test_tablet_open_reports_wal_corruption(tmp_path):
    c = cfg(wal_segment_bytes=1 << 20)
    t = Tablet.create(str(tmp_path), SCHEMA, c)
    for i in range(5):
        t.insert({"k": [i], "v": [i], "s": ["payload"]})
    del t
    seg = Log(os.path.join(str(tmp_path), "wal")).segments()[-1][1]
    first_rec = len(MAGIC)
    flip(seg, first_rec + REC_HEADER + 30)  # inside the first (of 5) records' payload
    with pytest.raises(errors.Corruption) as ei:
        Tablet.open(str(tmp_path), c)
    assert os.path.basename(seg) in str(ei.value) and f"offset {first_rec}" in str(ei.value)


def test_crash_leftovers_are_removed_on_open(tmp_path):
    c = cfg()
    t = Tablet.create(str(tmp_path), SCHEMA, c)
    t.insert({"k": list(range(100)), "v": list(range(100)), "s": ["a"] * 100})
    t.flush_mrs()
    t.update({"k": [1], "v": [7]})
    t.close()
    root = str(tmp_path)
    rs = os.path.join(root, "rowsets")
    live = sorted(os.listdir(rs))
    os.makedirs(os.path.join(rs, "99999999.tmp"))  # a flush that never finished
    os.makedirs(os.path.join(rs, "99999998"))
    open(os.path.join(rs, live[0], "redo_999999.df"), "wb").write(b"half")
    open(os.path.join(root, "tablet-meta.json.tmp"), "w").write("{")
    t = Tablet.open(root, c)
    assert sorted(os.listdir(rs)) == live
    assert "redo_999999.df" not in os.listdir(os.path.join(rs, live[0]))
    assert not [f for f in os.listdir(root) if f.endswith(".tmp")]
    assert (1, 7, "a") in rows_of(t)
    t.close()


_KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from engine.schema import ColumnSchema, Schema
    from engine.tablet import Tablet, TabletConfig
    from engine.types import DataType
    schema = Schema([ColumnSchema("k", DataType.INT64),
                     ColumnSchema("v", DataType.INT64, nullable=True),
                     ColumnSchema("s", DataType.STRING, nullable=True)], key=["k"])
    cfg = TabletConfig(page_rows=16, drs_target_bytes=4096, fsync=False,
                       wal_segment_bytes=4096, wal_sync=sys.argv[2])
    t = Tablet.create(sys.argv[1], schema, cfg)
    for i in range(50):
        r = t.upsert({"k": [i, i + 1], "v": [i, i], "s": [str(i), None]})
        if i == 25:
            t.flush_mrs()
        print(r.timestamp, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.parametrize("wal_sync", ["commit", "never"])
def test_sigkill_after_acknowledged_writes(tmp_path, wal_sync):
    """A real process crash (SIGKILL) loses nothing acknowledged, with "never" too."""
    d = str(tmp_path / "t")
    p = subprocess.run([sys.executable, "-c", _KILL_SCRIPT, d, wal_sync], cwd=ROOT,
                       capture_output=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()
    tss = [int(x) for x in p.stdout.split()]
    assert len(tss) == 50
    t = Tablet.open(d, cfg(wal_sync=wal_sync))
    assert t.replayed_ops == 24
    want = {}
    for i in range(50):
        want[i], want[i + 1] = (i, str(i)), (i, None)
    assert rows_of(t) == sorted((k, v, s) for k, (v, s) in want.items())
    # time travel to an op before and after the flush
    assert rows_of(t, snapshot=tss[0]) == [(0, 0, "0"), (1, 0, None)]
    assert len(rows_of(t, snapshot=tss[40])) == 42
    t.close()


# -- replay regressions (found by test_crash_recovery.py's "full" profile) --------------
def _kv_schema():
    return Schema([ColumnSchema("k", DataType.INT64),
                   ColumnSchema("v", DataType.INT64, nullable=True)], key=["k"])


def _kv(t, snapshot=None):
    return sorted((r["k"], r["v"]) for r in t.scan_table(snapshot=snapshot).to_pylist())


def test_replay_delete_then_reinsert_flushed(tmp_path):
    """Replay of a DELETE whose row lives in an older DiskRowSet (its DMS lost in the crash)
    while a re-insert of the key was flushed to a newer DiskRowSet: the DELETE must reach the
    old rowset, or the old row comes back live (a duplicate key). Found by the crash test."""
    t = Tablet.create(str(tmp_path), _kv_schema(), TabletConfig(fsync=False))
    t.insert({"k": [1], "v": [1]})
    t.update({"k": [1], "v": [2]})
    t.flush_mrs()                      # DRS A: k=1 (flushed_index 2)
    t.delete({"k": [1]})               # A's DMS (never flushed)
    t.insert({"k": [1], "v": [4]})     # a new MRS row
    t.flush_mrs()                      # DRS B: k=1 (flushed_index 4)
    assert _kv(t) == [(1, 4)]
    t.close()                          # no crash needed: a clean close loses it too
    t = Tablet.open(str(tmp_path), TabletConfig(fsync=False))
    assert _kv(t) == [(1, 4)]


def test_replay_failed_insert_of_row_deleted_in_flushed_redo(tmp_path):
    """Replay of an INSERT that failed with ALREADY_PRESENT (its key live in a DiskRowSet
    whose later DELETE is already in a REDO file) must fail again: the row looks dead to
    the final state, but it was live when the op ran. Found by the crash test."""
    t = Tablet.create(str(tmp_path), _kv_schema(), TabletConfig(fsync=False))
    t.insert({"k": [1], "v": [1]})
    t.flush_mrs()                               # DRS A: k=1
    t.insert({"k": [2], "v": [2]})              # keeps the MRS (and the anchor) behind
    r = t.insert({"k": [1], "v": [3]})
    assert [e.code for e in r.row_errors] == ["ALREADY_PRESENT"]
    t.delete({"k": [1]})
    t.flush_dms()                               # A's REDO holds the delete
    t.close()
    t = Tablet.open(str(tmp_path), TabletConfig(fsync=False))
    assert _kv(t) == [(2, 2)]
    assert _kv(t, snapshot=r.timestamp) == [(1, 1), (2, 2)]


def test_replay_upsert_of_row_deleted_in_flushed_redo(tmp_path):
    """Replay of an UPSERT of a DiskRowSet row whose later DELETE is already in a REDO file
    is an update that is already durable, not an insert of a new MemRowSet row (which time
    travel between the two ops would show as a second copy of the key)."""
    t = Tablet.create(str(tmp_path), _kv_schema(), TabletConfig(fsync=False))
    t.insert({"k": [1], "v": [1]})
    t.flush_mrs()                               # DRS A: k=1
    t.insert({"k": [2], "v": [2]})              # keeps the MRS (and the anchor) behind
    ts = t.upsert({"k": [1], "v": [3]}).timestamp
    t.delete({"k": [1]})
    t.flush_dms()                               # A's REDO: upsert + delete; flushed_index 4
    assert _kv(t, snapshot=ts) == [(1, 3), (2, 2)]
    t.close()
    t = Tablet.open(str(tmp_path), TabletConfig(fsync=False))
    assert _kv(t) == [(2, 2)]
    assert _kv(t, snapshot=ts) == [(1, 3), (2, 2)]


# -- injected EIO (engine/fs.py; the cluster's disk-failure tests use it) ---------------------
def test_injected_eio_fails_fsyncs_of_matching_logs_after_n(tmp_path):
    """`inject_eio(glob, after)`: fsyncs of a matching log succeed `after` times, then fail
    (IOFailure, the log stopped); a log whose path does not match is untouched; a segment
    roll's fsync counts as a failure of the log like any other."""
    from engine import fs
    a = Log(str(tmp_path / "a" / "raft-wal"), "commit", segment_bytes=8 << 20)
    b = Log(str(tmp_path / "b" / "raft-wal"), "commit", segment_bytes=200)
    a.open_for_append(1)
    b.open_for_append(1)
    try:
        fs.inject_eio(str(tmp_path / "a" / "*"), after=2)
        for i in (1, 2):
            a.append(LogEntry(0, i, i, WRITE, b"x"))
            a.wait_durable(i)
        a.append(LogEntry(0, 3, 3, WRITE, b"x"))
        with pytest.raises(errors.IOFailure, match="injected EIO"):
            a.wait_durable(3)
        with pytest.raises(errors.IOFailure):
            a.append(LogEntry(0, 4, 4, WRITE, b"x"))
        for i in range(1, 20):  # b rolls segments (fsyncs) without failing
            b.append(LogEntry(0, i, i, WRITE, b"y" * 50))
        b.wait_durable(19)
        fs.inject_eio(str(tmp_path / "b" / "*"), after=0)
        with pytest.raises(errors.IOFailure, match="injected EIO"):
            for i in range(20, 40):  # the first roll fails, stopping the log
                b.append(LogEntry(0, i, i, WRITE, b"y" * 50))
        assert b.failed is not None
        with pytest.raises(errors.IOFailure):
            b.truncate_after(5)  # a stopped log is not cut either
    finally:
        fs.inject_eio(None)
        a.close()
        b.close()
    assert fs.injected_eio() is None


def test_inject_eio_over_rpc_needs_the_environment_flag(monkeypatch):
    from engine import fs
    from engine.rpc.rpc import RpcServer
    monkeypatch.delenv(fs.FAULT_INJECTION_ENV, raising=False)
    with pytest.raises(errors.InvalidArgument, match="KUDUSQL_FAULT_INJECTION"):
        RpcServer._failpoint({"inject_eio": {"glob": "*", "after": 0}})
    assert fs.injected_eio() is None
    monkeypatch.setenv(fs.FAULT_INJECTION_ENV, "1")
    try:
        got = RpcServer._failpoint({"inject_eio": {"glob": "*/x", "after": 3}})
        assert got["inject_eio"] == {"glob": "*/x", "after": 3}
    finally:
        RpcServer._failpoint({"inject_eio": None})
    assert fs.injected_eio() is None


def test_append_write_is_append_of_a_write_entry(tmp_path):
    """`append_write` (the local write path's) writes the bytes `append(LogEntry(0, i, ts,
    WRITE, body))` writes: the two logs are byte-identical, and read back as those entries."""
    entries = [entry(i, size=n) for i, n in enumerate([0, 1, 90, 5000, JOIN_MAX_BYTES + 1], 1)]
    a, b = Log(str(tmp_path / "a"), "never"), Log(str(tmp_path / "b"), "never")
    for log in (a, b):
        log.open_for_append(1)
    for e in entries:
        a.append(e)
        b.append_write(e.index, e.timestamp, e.body)
    a.close()
    b.close()
    (pa_,), (pb,) = [[p for _, p in log.segments()] for log in (a, b)]
    with open(pa_, "rb") as fa, open(pb, "rb") as fb:
        assert fa.read() == fb.read()
    assert read_all(tmp_path / "b") == entries


def test_a_bulk_write_is_logged_from_its_arrow_buffer_as_the_same_bytes(tmp_path):
    """A large write op's WAL body is the Arrow buffer it was encoded into
    (`WriteOp.encode_for_log`, no copy into bytes), a small one's still bytes; the log
    written from the buffer is byte-identical to the one written from `encode()`'s bytes
    and reads back as the same entries (and ops)."""
    import numpy as np
    import pyarrow as pa

    from engine.tablet.write_op import WriteOp
    n = 5000
    big = WriteOp(np.zeros(n, np.int8), pa.table({"k": pa.array(range(n), pa.int64()),
                                                  "s": [f"row {i:06d}" * 3 for i in range(n)]}))
    small = WriteOp(np.zeros(2, np.int8), pa.table({"k": [1, 2], "s": ["a", "b"]}))
    assert isinstance(small.encode_for_log(), bytes)
    body = big.encode_for_log()
    assert isinstance(body, pa.Buffer) and body.size > JOIN_MAX_BYTES
    assert body.to_pybytes() == big.encode()
    a, b = Log(str(tmp_path / "a"), "never"), Log(str(tmp_path / "b"), "never")
    for log in (a, b):
        log.open_for_append(1)
    for i, op in enumerate((small, big, small), 1):
        a.append_write(i, 100 + i, op.encode())
        b.append_write(i, 100 + i, op.encode_for_log())
    a.close()
    b.close()
    (pa_,), (pb,) = [[p for _, p in log.segments()] for log in (a, b)]
    with open(pa_, "rb") as fa, open(pb, "rb") as fb:
        assert fa.read() == fb.read()
    got = read_all(tmp_path / "b")
    assert [e.body for e in got] == [small.encode(), big.encode(), small.encode()]
    assert WriteOp.decode(got[1].body).rows.equals(big.rows)


@pytest.mark.parametrize("keep", [0, 7, 20])
def test_truncate_after_in_a_preallocated_segment(tmp_path, keep):
    """Raft's suffix cut in the segment being written (preallocated: zeros after its
    records) keeps entries up to `keep`, and later appends follow them, not the zeros."""
    log, entries = _open_log(tmp_path, 20)
    log.truncate_after(keep)
    new = [entry(i, size=33) for i in range(keep + 1, keep + 4)]
    for e in new:
        log.append(e)
        log.wait_durable(e.index)
    assert log.read_range(1, 100) == entries[:keep] + new
    log.close()
    assert read_all(tmp_path) == entries[:keep] + new
