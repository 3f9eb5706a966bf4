"""Log: the tablet's write-ahead log, shaped to become its Raft log later.

Every write op is appended as a `LogEntry(term, index, timestamp, type, payload)` before the
write is acknowledged. Indexes are dense and increasing; `term` is 0 until Raft arrives.

On disk the log is a directory of segments, each named after the index of its first entry:

    wal-00000000000000000001.log   [magic "KSQLWAL1"] [record] [record] ...
    wal-00000000000000004097.log   a new segment once the current one passes segment_bytes

    record  = payload_len u32 | crc32(payload) u32 | payload
    payload = term u64 | index u64 | timestamp u64 | type u8 | body

Durability (`sync` policy):
  "commit"  each writer waits until an fsync covers its entry. Group commit: one waiter runs
            fsync for every entry appended so far while the others wait for it, so N
            concurrent writers cost ~1 fsync, not N. When it ends, its leader wakes only
            the waiters it covered and hands the first uncovered one the next fsync
            (`wait_durable`, `_wake`).
  "never"   entries reach the OS page cache only (bulk loads; a machine crash can lose the
            tail, a process crash cannot).

Commit delay (PostgreSQL's commit_delay / commit_siblings): a writer about to lead an
fsync first sleeps `commit_delay_us` when at least `commit_siblings` other writers are
waiting for durability in this process (`_waiting`: any log's, so writers on a server's
other tablets count), so that records appended meanwhile join its group; a lone writer
never waits. Durability is unchanged: the fsync still covers only what was appended
before it started, and nobody is acknowledged before an fsync covering them has ended.
0 turns it off (`TabletConfig.wal_commit_delay_us`; the measurement behind the default
is in docs/wire.md, "tenth pass").

A failed fsync is fail-stop: the error wakes every writer waiting for that sync with
`errors.IOFailure` (58030), and the log then refuses every append and wait (`failed`) until
it is opened again. So does a failed append (the record it cut short must stay the tail).
Retrying the fsync would be wrong: Linux may drop the dirty pages of a failed write-back
and report the next fsync as a success, acknowledging a write that is not on disk
(PostgreSQL's "fsyncgate", which it answers with a PANIC). Recovery is a restart, which
replays what the disk really holds.

Reading (`read_from`) validates every record. A torn tail — the last record of the last
segment cut short or failing its CRC, as a crash mid-append leaves it — is dropped and the
file truncated there. Any other bad record stops the open with `Corruption` naming the file
and offset: silently skipping an acknowledged write would be data loss.

Preallocation. The segment being written is extended ahead of its records in steps of
PREALLOC_BYTES (`posix_fallocate`), and records are written into that space, so a commit's
fsync does not change the file's size: with the size unchanged, the file system has no
inode update to journal on most fsyncs (measured on this machine's ext4, one record
appended and fsynced at a time: 119 us of CPU and 0.81 ms per record against 166 us and
1.36 ms when every append grew the file; docs/wire.md, "Issue 25, the write path (fifth
pass)"). The allocated space reads as zeros, which reading treats as the unsynced tail a
crash leaves (below): the last segment's zeros are truncated away at recovery. A segment is
cut back to its records when the log rolls past it or closes, so a sealed segment never
ends in zeros. Where the file system cannot preallocate, the log writes without it.

Segment GC (`gc(anchor)`): a segment whose entries all precede the log anchor (the oldest
index whose effects are not yet in flushed files) is deleted. `before_anchor(anchor)` is
called by the tablet before it persists a new anchor (a no-op here; a replica's log view
checkpoints its result tracker there, engine/tserver/result_tracker.py).

Raft (engine/consensus/raft.py, through `log_storage.WalLogStorage`) also needs: reading an
index range of an open log without recovery side effects (`read_range`), cutting a divergent
suffix (`truncate_after`, durable when it returns) and starting over after a tablet copy
(`reset`). Entry types other than WRITE (NO_OP, CHANGE_CONFIG) are Raft's; WAL replay in
`Tablet._bootstrap` skips them.
"""

from __future__ import annotations

import bisect
import dataclasses
import errno
import os
import struct
import threading
import time
import zlib
from typing import Iterator

import native
from engine import errors
from engine.fs import fsync, fsync_dir

MAGIC = b"KSQLWAL1"
_REC = struct.Struct("<II")
_ENTRY = struct.Struct("<QQQB")

WRITE = 1
# `Log.append` joins header and body into one write up to this body size
JOIN_MAX_BYTES = 64 << 10
# the segment being written is preallocated this far ahead of its records
PREALLOC_BYTES = 1 << 20
NO_OP = 2  # a new Raft leader's first entry (commits the entries of earlier terms)
CHANGE_CONFIG = 3  # body: a RaftConfig (engine/consensus/messages.py), JSON


@dataclasses.dataclass(frozen=True)
class LogEntry:
    term: int
    index: int
    timestamp: int
    type: int
    body: bytes

    def encode(self) -> bytes:
        return b"".join(self.frame())

    def frame(self) -> tuple[bytes, bytes]:
        """The record as (header, body): written one after the other they are `encode()`,
        without copying the body (a bulk write's body is its rows, megabytes: joining
        them into one record cost two full copies per write)."""
        head = _ENTRY.pack(self.term, self.index, self.timestamp, self.type)
        crc = zlib.crc32(self.body, zlib.crc32(head))
        return _REC.pack(len(head) + len(self.body), crc) + head, self.body


def _write_all(f, data) -> None:
    """Write all of `data` to the unbuffered file `f` (a raw write may be partial)."""
    view = memoryview(data)
    while view:
        n = f.write(view)
        view = view[n:]


def _segment_name(first_index: int) -> str:
    return f"wal-{first_index:020d}.log"


def wal_record_py(index: int, timestamp: int, body: bytes) -> bytes:
    """The framed record of a local write, as one bytes object: `LogEntry(0, index,
    timestamp, WRITE, body).encode()` without the entry. The specification of the
    compiled `wal_record` (native/_write.pyx), which hands it every call it does not
    decide itself; `wal_record` is whichever of the two runs (`Log.append_write`)."""
    head = _ENTRY.pack(0, index, timestamp, WRITE)
    return _REC.pack(len(head) + len(body), zlib.crc32(body, zlib.crc32(head))) + head + body


wal_record = native.kernel("_write", "wal_record", wal_record_py, "fallback_record")


# Every writer waiting in `Log.wait_durable` of any log of this process, one element each
# (the WAL sync thread of the wire server stands for each write of its batch): the
# commit delay's count of active writers ("on the server"). A list as a counter:
# append / pop / extend / del of a slice are single operations under the GIL, no lock.
_waiting: list = []


class Log:
    def __init__(self, path: str, sync: str = "commit", segment_bytes: int = 8 << 20,
                 commit_delay_us: int = 0, commit_siblings: int = 0):
        if sync not in ("commit", "never"):
            raise errors.InvalidArgument(f"unknown WAL sync policy {sync!r}")
        if commit_delay_us < 0 or commit_siblings < 0:
            raise errors.InvalidArgument(
                f"commit delay {commit_delay_us} us and commit siblings {commit_siblings} "
                f"must not be negative")
        self.path = path
        self.sync = sync
        self.segment_bytes = segment_bytes
        # the commit delay (module docstring, "Commit delay"): seconds, and how many other
        # writers must be waiting in the process for a leader to wait that long
        self.commit_delay = commit_delay_us / 1e6
        self.commit_siblings = commit_siblings
        self.delays = 0         # fsyncs whose leader waited the commit delay first
        os.makedirs(path, exist_ok=True)
        self._lock = threading.Lock()
        # `_sync_lock` guards the indexes below, `_syncing` and `_waiters`: the writers
        # waiting for another's fsync, each as [index, a lock it blocks on, whether it
        # was handed the lead], released only for the ones that fsync covers and one more
        # to lead the next (`_wake`). Invariant: waiters only while `_syncing`.
        self._sync_lock = threading.Lock()
        self._waiters: list[list] = []
        self._f = None
        self._seg_size = 0      # bytes of records (and magic) in the current segment
        self._alloc_end = 0     # the current segment's file size, preallocation included
        self._prealloc = True   # False once the file system refused posix_fallocate
        self._last_index = 0
        self._appended = 0  # last index written to the OS
        self._synced = 0  # last index known durable
        self._syncing = False
        # the first failed fsync or append (fail-stop); `_stopped()` refuses with its text
        self.failed: errors.IOFailure | None = None
        self.bytes_written = 0
        self.fsyncs = 0
        self._seg_first_ts: dict[int, int] = {}  # segment first index -> its first timestamp
        # (index, timestamp) of every entry not yet below the last gc() anchor, so the
        # timestamp of the anchor op is known exactly (history GC must not pass it).
        self._index_ts: list[tuple[int, int]] = []

    # -- reading / recovery ----------------------------------------------------------------
    def segments(self) -> list[tuple[int, str]]:
        out = []
        for name in os.listdir(self.path):
            if name.startswith("wal-") and name.endswith(".log"):
                out.append((int(name[4:-4]), os.path.join(self.path, name)))
        return sorted(out)

    def read_from(self, min_index: int) -> Iterator[LogEntry]:
        """Entries with index >= min_index, validating as described in the module doc."""
        segs = self.segments()
        for i, (first, path) in enumerate(segs):
            nxt = segs[i + 1][0] if i + 1 < len(segs) else None
            if nxt is not None and nxt <= min_index:
                continue  # every entry here precedes min_index
            last_segment = i == len(segs) - 1
            for entry in self._read_segment(path, last_segment):
                self._seg_first_ts.setdefault(first, entry.timestamp)
                self._index_ts.append((entry.index, entry.timestamp))
                self._last_index = max(self._last_index, entry.index)
                if entry.index >= min_index:
                    yield entry

    def _read_segment(self, path: str, last_segment: bool) -> Iterator[LogEntry]:
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
            if last_segment and len(data) < len(MAGIC):
                self._truncate(path, 0, torn=True)  # crashed while creating it
                return
            raise errors.Corruption(f"{path}: not a WAL segment (bad magic)")
        off = len(MAGIC)
        last_index = None
        while off < len(data):
            bad = None
            if off + _REC.size > len(data):
                bad = "truncated record header"
            else:
                n, crc = _REC.unpack_from(data, off)
                end = off + _REC.size + n
                if end > len(data):
                    bad = "truncated record"
                else:
                    payload = data[off + _REC.size: end]
                    if zlib.crc32(payload) != crc or n < _ENTRY.size:
                        bad = "checksum mismatch"
            if bad is not None:
                # Torn only at the end of the final segment with nothing valid after it
                # (a crash mid-append, or the zeros an unsynced append can leave after a
                # power loss). A valid record further on means a damaged record in the
                # middle: acknowledged writes follow, so that is corruption.
                expect = (last_index + 1) if last_index is not None else int(
                    os.path.basename(path)[4:-4])
                if last_segment and not self._valid_chain_after(data, off, expect):
                    self._truncate(path, off, torn=True)
                    return
                raise errors.Corruption(
                    f"{path}: corrupt WAL record at offset {off} ({bad}); refusing to open "
                    f"the tablet because acknowledged writes follow it")
            term, index, ts, typ = _ENTRY.unpack_from(payload, 0)
            last_index = index
            yield LogEntry(term, index, ts, typ, payload[_ENTRY.size:])
            off = end

    @classmethod
    def _valid_chain_after(cls, data: bytes, off: int, expect: int) -> bool:
        """Do well-formed records follow `off`, chained to the end of the file? (error path
        only: a scan over the rest of one segment.)

        The damaged record at `off` should have index `expect`; records after it carry the
        next indexes. A candidate must have such an index and be followed by consecutive
        records up to the end of the file (or a torn last one, or zeros: `_tail_after`).
        A candidate inside the
        damaged record's claimed extent counts only if that record validates when cut off
        right there (its length field was what got damaged); otherwise it is part of a torn
        record's own payload.
        """
        if not any(data[off:]):
            return False  # only zeros: an unsynced tail
        hdr = _REC.size + _ENTRY.size
        claimed_end, claimed_crc = off, None
        if off + _REC.size <= len(data):
            n0, claimed_crc = _REC.unpack_from(data, off)
            claimed_end = off + _REC.size + n0
        # a record starts with a non-zero length: no candidate among the trailing zeros
        last = min(len(data) - hdr + 1, len(data.rstrip(b"\0")))
        for p in range(off + 1, last):
            n, _ = _REC.unpack_from(data, p)
            if n < _ENTRY.size or p + _REC.size + n > len(data):
                continue
            idx = struct.unpack_from("<Q", data, p + _REC.size + 8)[0]
            if not expect < idx <= expect + 1024 or cls._record_index(data, p) is None:
                continue
            q, nxt = p, idx
            while True:
                got = cls._record_index(data, q)
                if got is None or got != nxt:
                    break
                n, _ = _REC.unpack_from(data, q)
                q += _REC.size + n
                nxt += 1
            if not cls._tail_after(data, q):
                continue  # the chain does not reach the end of the file
            if p < claimed_end and zlib.crc32(data[off + _REC.size: p]) != claimed_crc:
                # Inside the damaged record's own claimed extent, and that record does not
                # validate as ending here: bytes of a torn record's payload that happen to
                # look like records (e.g. WAL bytes stored in a BINARY column).
                continue
            return True  # a damaged record with acknowledged records after it
        return False

    @staticmethod
    def _tail_after(data: bytes, q: int) -> bool:
        """Is everything from `q` on the end of the written records: nothing, zeros (a
        preallocated or unsynced tail), or one torn record - too short for a header,
        claiming more bytes than the file holds, or followed by zeros only?"""
        rest = len(data) - q
        if rest < _REC.size + _ENTRY.size:
            return True
        end = q + _REC.size + _REC.unpack_from(data, q)[0]
        return end > len(data) or not any(data[end:])

    @staticmethod
    def _record_index(data: bytes, p: int) -> int | None:
        """Index of a well-formed record at p (valid length and CRC), else None."""
        if p + _REC.size + _ENTRY.size > len(data):
            return None
        n, crc = _REC.unpack_from(data, p)
        if n < _ENTRY.size or p + _REC.size + n > len(data):
            return None
        if zlib.crc32(data[p + _REC.size: p + _REC.size + n]) != crc:
            return None
        return struct.unpack_from("<Q", data, p + _REC.size + 8)[0]

    @staticmethod
    def _truncate(path: str, off: int, torn: bool) -> None:
        with open(path, "r+b") as f:
            f.truncate(max(off, len(MAGIC)) if off else 0)
            f.flush()
            fsync(f.fileno(), path)

    # -- writing ---------------------------------------------------------------------------
    def open_for_append(self, next_index: int) -> None:
        """Start a fresh segment for entries from next_index on (after recovery)."""
        self._last_index = max(self._last_index, next_index - 1)
        self._appended = self._synced = self._last_index
        self._roll(next_index)

    def _roll(self, first_index: int) -> None:
        if self._f is not None:
            self._seal()
            fsync(self._f.fileno(), self.path)
            self._f.close()
        path = os.path.join(self.path, _segment_name(first_index))
        if os.path.exists(path):  # an empty or torn segment left by a crash: start over
            os.unlink(path)
        # written at the file position, not appended: the file is preallocated ahead
        self._f = open(path, "wb", buffering=0)
        self._seg_first = first_index
        self._f.write(MAGIC)
        self._seg_size = self._alloc_end = len(MAGIC)
        self._preallocate(0)
        fsync(self._f.fileno(), self.path)
        fsync_dir(self.path)

    def _preallocate(self, need: int) -> None:
        """Extend the current segment's allocation to cover `need` more bytes of records
        and PREALLOC_BYTES after them, but not past `segment_bytes` (module docstring,
        "Preallocation"); nothing where the file system cannot (the records' writes
        then grow the file)."""
        if not self._prealloc:
            return
        end = self._seg_size + need
        end += min(PREALLOC_BYTES, max(self.segment_bytes - end, 0))
        if end <= self._alloc_end:
            return
        try:
            os.posix_fallocate(self._f.fileno(), self._alloc_end, end - self._alloc_end)
        except AttributeError:          # no posix_fallocate on this platform
            self._prealloc = False
            return
        except OSError as e:
            # the file system cannot: write without; anything else (ENOSPC) is left to
            # the record's own write, which reports it as the log's failure
            if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                self._prealloc = False
            return
        self._alloc_end = end

    def _seal(self) -> None:
        """Cut the current segment back to its records (its preallocated zeros dropped)."""
        if self._alloc_end > self._seg_size:
            self._f.truncate(self._seg_size)
            self._alloc_end = self._seg_size

    @property
    def last_index(self) -> int:
        return self._last_index

    def next_index(self) -> int:
        return self._last_index + 1

    def append(self, entry: LogEntry) -> None:
        """Write an entry to the OS (the caller assigns indexes in order, under its lock)."""
        head, body = entry.frame()
        self._append(entry.index, entry.timestamp, head, body)

    def append_write(self, index: int, timestamp: int, body: bytes) -> None:
        """`append(LogEntry(0, index, timestamp, WRITE, body))`, the same bytes, without
        the entry object: a local tablet's write (`Tablet.start_op`) logs every op
        through here. A body above JOIN_MAX_BYTES may be any buffer-protocol object (a
        bulk write's Arrow buffer: `WriteOp.encode_for_log`); it is not kept."""
        if len(body) <= JOIN_MAX_BYTES:     # one record object, written in one call
            self._append(index, timestamp, wal_record(index, timestamp, body), b"")
            return
        head = _ENTRY.pack(0, index, timestamp, WRITE)
        self._append(index, timestamp,
                      _REC.pack(len(head) + len(body), zlib.crc32(body, zlib.crc32(head)))
                      + head, body)

    def _append(self, index: int, timestamp: int, head: bytes, body: bytes) -> None:
        """`append` of a framed record (`LogEntry.frame`)."""
        size = len(head) + len(body)
        with self._lock:
            if self.failed is not None:
                raise self._stopped()
            if self._seg_size >= self.segment_bytes:
                try:  # fsyncs the full segment: its failure stops the log like any other
                    self._roll(index)
                except OSError as e:
                    raise self._fail(e, "fsync") from e
            if self._seg_size == len(MAGIC):
                self._seg_first_ts[self._seg_first] = timestamp
            if self._seg_size + size > self._alloc_end:
                self._preallocate(size)
            self._index_ts.append((index, timestamp))
            # A small record (a single-row write's, ~100 bytes) is joined and written in
            # one system call; a large one in two writes, header then body, to spare
            # copying the body: cut between them by a crash, it is a torn tail (short,
            # or failing its CRC), which reading drops, as for one write cut short
            try:
                if len(body) <= JOIN_MAX_BYTES:
                    data = head + body
                    n = self._f.write(data)
                    if n != size:               # a raw write may be partial
                        _write_all(self._f, memoryview(data)[n:])
                else:
                    _write_all(self._f, head)
                    _write_all(self._f, body)
            except OSError as e:
                # a record cut short here must stay the tail: no later record after it
                raise self._fail(e, "write") from e
            self._seg_size += size
            self.bytes_written += size
            self._last_index = index
            with self._sync_lock:
                self._appended = index

    def wait_durable(self, index: int, writers: int = 1, delay: bool = True) -> None:
        """Return once `index` is durable under the sync policy (group commit).

        The first writer to find no fsync running leads: it fsyncs everything appended
        so far, outside the locks. A writer that comes while an fsync runs waits on a
        lock of its own; when that fsync ends, its leader wakes exactly the waiters it
        covered and, if some are left, the first of them to lead the next one (`_wake`).
        A single waking call for all (a condition's notify_all) also woke the writers
        the ended fsync did not cover, which took the GIL only to wait again: at 16
        threads over 4 tablets that was 0.5 needless wake-ups per write (docs/wire.md,
        "group commit, precise wake-ups").

        Commit delay (module docstring): a leader first waits `commit_delay` if at
        least `commit_siblings` other writers are waiting in this process, so that the
        writers appending meanwhile share its fsync. `writers`: how many writes this
        call waits for (the wire's WAL sync thread waits once for a batch); `delay`
        False: never wait the delay (a caller that waited it already)."""
        if self.sync == "never":
            return
        waiting = _waiting
        if writers == 1:
            waiting.append(None)
        else:
            waiting.extend([None] * writers)
        lock = self._sync_lock
        lock.acquire()
        try:
            while self._synced < index:
                if self.failed is not None:
                    raise self._stopped()
                if self._syncing:
                    w = threading.Lock()
                    w.acquire()
                    entry = [index, w, False]
                    self._waiters.append(entry)
                    lock.release()
                    try:
                        w.acquire()
                    except BaseException:
                        # interrupted (KeyboardInterrupt in the main thread): leave the
                        # queue, and if handed the lead already, pass it on
                        lock.acquire()
                        if entry in self._waiters:
                            self._waiters.remove(entry)
                        elif entry[2]:
                            self._syncing = False
                            self._wake()
                        raise
                    lock.acquire()
                    if not entry[2]:    # covered (or the log failed): the loop decides
                        continue
                    # handed the lead (`_wake` left `_syncing` set for it): sync now
                else:
                    self._syncing = True
                lock.release()
                target = 0
                failure = None
                done = False
                try:
                    if delay and self.commit_delay and \
                            len(waiting) - writers >= self.commit_siblings:
                        # writers coming meanwhile queue behind this fsync (`_syncing`)
                        self.delays += 1
                        time.sleep(self.commit_delay)
                    # fsync a duplicate of the descriptor outside the append lock, so
                    # writers keep appending (the next group) while this one syncs;
                    # every index up to `_appended` was written before the fsync starts
                    with self._lock:
                        target = self._appended
                        fd = os.dup(self._f.fileno())
                    try:
                        fsync(fd, self.path)
                    finally:
                        os.close(fd)
                    self.fsyncs += 1
                    done = True
                except OSError as e:
                    failure = self._fail(e, "fsync")
                finally:
                    lock.acquire()
                    self._syncing = False
                    if done and target > self._synced:
                        self._synced = target
                    # the waiters learn the outcome whatever it was (an exception other
                    # than OSError here: the first uncovered waiter takes the lead)
                    if self._waiters:
                        self._wake()
                if failure is not None:
                    raise failure from failure.__cause__
        finally:
            lock.release()
            if writers == 1:
                waiting.pop()
            else:
                del waiting[-writers:]

    def _wake(self) -> None:
        """Wake the waiters an fsync just covered, and hand the first uncovered one the
        lead of the next fsync (`_syncing` stays set for it, so no writer coming
        meanwhile starts another); every waiter if the log failed. The caller holds
        `_sync_lock` and has cleared `_syncing`."""
        waiters = self._waiters
        if self.failed is not None:
            self._waiters = []
            for entry in waiters:
                entry[1].release()
            return
        synced = self._synced
        left = []
        lead = None
        for entry in waiters:   # a loop over the few writers waiting on this log
            if entry[0] <= synced:
                entry[1].release()
            elif lead is None:
                lead = entry
            else:
                left.append(entry)
        self._waiters = left
        if lead is not None:
            lead[2] = True
            self._syncing = True
            lead[1].release()

    def _stopped(self) -> errors.IOFailure:
        """A fresh error, with the first failure's text, for a call the stopped log
        refuses (not the one exception object re-raised in every thread)."""
        return errors.IOFailure(str(self.failed))

    def _fail(self, e: OSError, what: str) -> errors.IOFailure:
        """Record a failed fsync or write (fail-stop: see the module docstring)."""
        failure = errors.IOFailure(
            f"could not {what} the write-ahead log {self.path}: {e.strerror or e}; whether "
            f"its last writes are durable is unknown, and it refuses writes until the "
            f"server is restarted")
        failure.__cause__ = e
        self.failed = failure
        return failure

    def sync_appended(self) -> int:
        """fsync every entry appended so far and return the last index covered, holding
        the append lock only to pick the file (appends go on during the fsync; earlier
        segments were synced when rolled). For a caller that tracks durability itself
        (the Raft host's background sync, which must not trust `_synced` across a
        concurrent `truncate_after`)."""
        with self._lock:
            if self._f is None:
                raise ValueError(f"{self.path}: the log is closed")
            if self.failed is not None:
                raise self._stopped()
            index = self._last_index
            fd = os.dup(self._f.fileno())
        try:
            fsync(fd, self.path)
        except OSError as e:
            raise self._fail(e, "fsync") from e
        finally:
            os.close(fd)
        self.fsyncs += 1
        return index

    def sync_now(self) -> None:
        with self._lock:
            if self.failed is not None:
                raise self._stopped()
            if self._f is not None:
                try:
                    fsync(self._f.fileno(), self.path)
                except OSError as e:
                    raise self._fail(e, "fsync") from e
        with self._sync_lock:
            self._synced = self._appended

    def ts_at_or_before(self, index: int) -> int | None:
        """The timestamp of the entry at `index` (or of the first entry after it), None if
        no retained entry is at or after `index` (nothing left to replay)."""
        with self._lock:
            i = bisect.bisect_left(self._index_ts, (index, -1))
            return self._index_ts[i][1] if i < len(self._index_ts) else None

    def before_anchor(self, anchor_index: int) -> None:
        """Called by the tablet before it persists metadata with this replay anchor (a
        replicated tablet's log view checkpoints its result tracker here); nothing here."""

    def gc(self, anchor_index: int) -> int:
        """Delete segments whose entries all have index < anchor_index."""
        with self._lock:
            i = bisect.bisect_left(self._index_ts, (anchor_index, -1))
            if i:
                del self._index_ts[:i]
        segs = self.segments()
        removed = 0
        for i, (first, path) in enumerate(segs[:-1]):  # never the segment being written
            if segs[i + 1][0] <= anchor_index:
                os.unlink(path)
                self._seg_first_ts.pop(first, None)
                removed += 1
        if removed:
            fsync_dir(self.path)
        return removed

    # -- Raft: range reads, suffix truncation, reset ----------------------------------------
    def read_range(self, lo: int, hi: int) -> list[LogEntry]:
        """Entries with lo <= index <= hi of an open log (no recovery side effects: nothing
        is truncated or recorded). Stops at an incomplete record (being written)."""
        out: list[LogEntry] = []
        with self._lock:
            if self._f is not None:
                self._f.flush()
            segs = self.segments()
        for i, (first, path) in enumerate(segs):
            nxt = segs[i + 1][0] if i + 1 < len(segs) else None
            if (nxt is not None and nxt <= lo) or first > hi:
                continue
            with open(path, "rb") as f:
                data = f.read()
            off = len(MAGIC)
            while off + _REC.size <= len(data):
                n, crc = _REC.unpack_from(data, off)
                end = off + _REC.size + n
                if end > len(data) or n < _ENTRY.size:  # being written, or preallocated
                    break
                payload = data[off + _REC.size: end]
                if zlib.crc32(payload) != crc:
                    raise errors.Corruption(f"{path}: corrupt WAL record at offset {off}")
                term, index, ts, typ = _ENTRY.unpack_from(payload, 0)
                if index > hi:
                    return out
                if index >= lo:
                    out.append(LogEntry(term, index, ts, typ, payload[_ENTRY.size:]))
                off = end
        return out

    def truncate_after(self, index: int) -> None:
        """Remove every entry with index > `index` (a divergent Raft suffix), durably; appends
        continue at index + 1 in the segment that holds `index`."""
        with self._lock:
            if self.failed is not None:  # a stopped log is neither cut nor written
                raise self._stopped()
            if self._f is not None:
                self._f.close()
                self._f = None
            segs = self.segments()
            keep = [(first, path) for first, path in segs if first <= index]
            for first, path in segs[len(keep):]:
                os.unlink(path)
                self._seg_first_ts.pop(first, None)
            if keep:
                first, path = keep[-1]
                with open(path, "rb") as f:
                    data = f.read()
                off = len(MAGIC)
                while off + _REC.size <= len(data):
                    n, _ = _REC.unpack_from(data, off)
                    if off + _REC.size + n > len(data) or n < _ENTRY.size:  # or zeros
                        break
                    if _ENTRY.unpack_from(data, off + _REC.size)[1] > index:
                        break
                    off += _REC.size + n
                with open(path, "r+b") as f:
                    f.truncate(off)
                    try:
                        fsync(f.fileno(), self.path)
                    except OSError as e:
                        raise self._fail(e, "fsync") from e
                self._f = open(path, "r+b", buffering=0)
                self._f.seek(off)
                self._seg_first = first
                self._seg_size = self._alloc_end = off
            fsync_dir(self.path)
            i = bisect.bisect_right(self._index_ts, (index, 1 << 64))
            del self._index_ts[i:]
            self._last_index = min(self._last_index, index)
            with self._sync_lock:
                self._appended = min(self._appended, index)
                self._synced = min(self._synced, index)
        if self._f is None:  # nothing at or below `index` was retained
            self._roll(index + 1)

    def reset(self, next_index: int) -> None:
        """Delete every segment and continue at `next_index` (after a tablet copy)."""
        with self._lock:
            if self.failed is not None:
                raise self._stopped()
            if self._f is not None:
                self._f.close()
                self._f = None
            for _, path in self.segments():
                os.unlink(path)
            self._seg_first_ts.clear()
            self._index_ts.clear()
            fsync_dir(self.path)
            self._last_index = next_index - 1
            with self._sync_lock:
                self._appended = self._synced = next_index - 1
        self._roll(next_index)

    def size_bytes(self) -> int:
        """Bytes of the segments on disk; a segment that `gc` (or a removal of the whole
        tablet) deletes between the listing and its stat counts nothing: the maintenance
        policy asks this while those run, and must not fail for it."""
        n = 0
        current = self._seg_first if self._f is not None else None
        for first, p in self.segments():
            if first == current:     # its records, not its preallocated space
                n += self._seg_size
                continue
            try:
                n += os.path.getsize(p)
            except FileNotFoundError:
                pass
        return n

    @property
    def segment_tail(self) -> int:
        """Bytes written to the current segment (its magic and records): where the next
        record goes. Its file is longer while open (preallocation)."""
        return self._seg_size

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                try:
                    if self.failed is None:  # a failed log's pages are not trusted to sync
                        self._f.flush()
                        try:
                            self._seal()
                            fsync(self._f.fileno(), self.path)
                        except OSError as e:
                            raise self._fail(e, "fsync") from e
                finally:
                    self._f.close()
                    self._f = None
