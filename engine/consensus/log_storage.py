"""LogStorage: the Raft log as the node sees it, with an in-memory and an on-disk form.

    first_index .. last_index      the retained entries (dense indexes)
    first_index - 1                the "snapshot" boundary: its term and timestamp are kept
                                   after the entries below first_index are GC'd or replaced
                                   by a tablet copy, so the AppendEntries consistency check
                                   and safe time still work there
    durable_index                  entries up to here survive a crash

`append(entries)` first drops every entry at or after entries[0].index (a divergent suffix:
the cut is durable when append returns), then adds the new ones, which become durable only
at the next `sync()`. The node never appends below its commit index, so nothing committed
is ever cut.

Implementations:
  MemoryLogStorage  the simulator's: `crash()` drops everything appended since the last
                    sync, exactly what a machine crash does to an unsynced WAL tail.
  WalLogStorage     the real one, over the tablet's WAL (`engine.consensus.log.Log`): the
                    Raft log *is* the WAL. Terms and timestamps of retained entries are kept
                    in memory (two ints per entry); the entries themselves in a bounded
                    cache of the newest ones (Kudu's LogCache), older ones are read back from
                    the segments. The snapshot boundary lives in `raft-log.json`, written
                    atomically before segments are deleted or the log is reset.
"""

from __future__ import annotations

import json
import os

from engine import errors
from engine.consensus.log import Log, LogEntry
from engine.fs import write_json_atomic


class LogStorage:
    first_index: int
    last_index: int
    durable_index: int
    _snap: tuple[int, int, int]     # (index, term, timestamp) just below the first entry

    def term(self, index: int) -> int | None:
        """Term of the entry at `index`; 0 for index 0; None if not retained."""
        return self._at(index, 1)

    def timestamp(self, index: int) -> int | None:
        return self._at(index, 2)

    def _at(self, index: int, field: int) -> int | None:
        """The term (field 1) or timestamp (field 2) at `index`: from the snapshot boundary
        or from the retained entry; None outside the log."""
        si = self._snap[0]
        if index == si:
            return self._snap[field]
        if si < index <= self.last_index:
            return self._retained(index - si - 1, field)
        return None

    def _retained(self, offset: int, field: int) -> int:
        """The term (field 1) or timestamp (field 2) of the offset-th retained entry."""
        raise NotImplementedError

    def entries(self, lo: int, hi: int) -> list[LogEntry]:
        """Entries lo..hi inclusive (both within first_index..last_index)."""
        raise NotImplementedError

    def append(self, entries: list[LogEntry]) -> None:
        raise NotImplementedError

    def sync(self) -> int:
        """Make every appended entry durable; returns the durable index."""
        raise NotImplementedError

    def gc(self, below: int) -> None:
        """May drop entries with index < below (never above last_index + 1)."""
        raise NotImplementedError

    def reset(self, index: int, term: int, timestamp: int) -> None:
        """Forget every entry; the log continues after (term, index) (tablet copy)."""
        raise NotImplementedError

    @property
    def last_term(self) -> int:
        return self.term(self.last_index) or 0


class MemoryLogStorage(LogStorage):
    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._snap = (0, 0, 0)  # (index, term, timestamp) just below the first entry
        self.first_index = 1
        self.last_index = 0
        self.durable_index = 0

    def _retained(self, offset: int, field: int) -> int:
        e = self._entries[offset]
        return e.term if field == 1 else e.timestamp

    def entries(self, lo: int, hi: int) -> list[LogEntry]:
        si = self._snap[0]
        assert lo > si and hi <= self.last_index, (lo, hi, si, self.last_index)
        return self._entries[lo - si - 1: hi - si]

    def append(self, entries: list[LogEntry]) -> None:
        if not entries:
            return
        first = entries[0].index
        si = self._snap[0]
        assert si < first <= self.last_index + 1, (first, si, self.last_index)
        del self._entries[first - si - 1:]
        self.durable_index = min(self.durable_index, first - 1)
        self._entries.extend(entries)
        self.last_index = entries[-1].index

    def sync(self) -> int:
        self.durable_index = self.last_index
        return self.durable_index

    def gc(self, below: int) -> None:
        si = self._snap[0]
        below = min(below, self.durable_index + 1)
        if below - 1 <= si:
            return
        e = self._entries[below - si - 2]
        self._snap = (e.index, e.term, e.timestamp)
        del self._entries[: below - si - 1]
        self.first_index = below

    def reset(self, index: int, term: int, timestamp: int) -> None:
        self._entries = []
        self._snap = (index, term, timestamp)
        self.first_index = index + 1
        self.last_index = self.durable_index = index

    def crash(self) -> None:
        """Lose every entry not yet synced (the simulator's machine crash)."""
        si = self._snap[0]
        del self._entries[self.durable_index - si:]
        self.last_index = self.durable_index


RAFT_LOG_FILE = "raft-log.json"


class WalLogStorage(LogStorage):
    """The Raft log over the tablet's WAL directory (see the module docstring)."""

    def __init__(self, path: str, segment_bytes: int = 8 << 20, cache_entries: int = 4096,
                 fsync: bool = True):
        self.path = path
        self.fsync = fsync
        self.epoch = 0  # bumped by every cut or reset (sync_begin / sync_done)
        self.cache_entries = cache_entries
        self.log = Log(path, "commit", segment_bytes)
        self._snap = (0, 0, 0)
        try:
            with open(os.path.join(path, RAFT_LOG_FILE)) as f:
                d = json.load(f)
            self._snap = (d["index"], d["term"], d["timestamp"])
        except FileNotFoundError:
            pass
        except (ValueError, KeyError) as e:
            raise errors.Corruption(f"{path}/{RAFT_LOG_FILE}: {e}") from e
        si = self._snap[0]
        self._terms: list[int] = []
        self._ts: list[int] = []
        self._cache: dict[int, LogEntry] = {}
        expect = si + 1
        for e in self.log.read_from(expect):
            if e.index < expect:
                continue  # GC'd below the boundary but its segment not yet deleted
            if e.index != expect:
                raise errors.Corruption(
                    f"{path}: WAL entry {e.index} follows {expect - 1}: the Raft log has a gap")
            self._remember(e)
            expect += 1
        self.first_index = si + 1
        self.last_index = expect - 1
        self.durable_index = self.last_index
        self.log.open_for_append(self.last_index + 1)

    def _remember(self, e: LogEntry) -> None:
        self._terms.append(e.term)
        self._ts.append(e.timestamp)
        self._cache[e.index] = e
        if len(self._cache) > self.cache_entries:
            # dicts keep insertion order: the oldest cached entry goes first
            del self._cache[next(iter(self._cache))]

    def _retained(self, offset: int, field: int) -> int:
        return (self._terms if field == 1 else self._ts)[offset]

    def entries(self, lo: int, hi: int) -> list[LogEntry]:
        si = self._snap[0]
        assert lo > si and hi <= self.last_index, (lo, hi, si, self.last_index)
        if lo in self._cache:
            return [self._cache[i] for i in range(lo, hi + 1)]
        return self.log.read_range(lo, hi)

    def append(self, entries: list[LogEntry]) -> None:
        if not entries:
            return
        first = entries[0].index
        si = self._snap[0]
        assert si < first <= self.last_index + 1, (first, si, self.last_index)
        if first <= self.last_index:
            self.epoch += 1
            self.log.truncate_after(first - 1)
            del self._terms[first - si - 1:]
            del self._ts[first - si - 1:]
            for i in range(first, self.last_index + 1):
                self._cache.pop(i, None)
            self.last_index = first - 1
            self.durable_index = min(self.durable_index, first - 1)
        for e in entries:
            self.log.append(e)
            self._remember(e)
        self.last_index = entries[-1].index

    def sync(self) -> int:
        if self.fsync:
            self.log.sync_now()
        self.durable_index = self.last_index
        return self.durable_index

    # A sync in the background (the Raft host's leader path): `sync_begin` under the
    # host's lock, `sync_run` without it (appends go on meanwhile), `sync_done` under the
    # lock again. A cut of the log or a reset in between bumps `epoch` and voids the
    # result (the entries it covered may have been replaced by undurable ones).
    def sync_begin(self) -> int:
        return self.epoch

    def sync_run(self) -> int:
        """fsync what is appended now (no host lock needed); the last index covered."""
        return self.log.sync_appended() if self.fsync else self.log.last_index

    def sync_done(self, index: int, epoch: int) -> bool:
        if epoch != self.epoch:
            return False
        self.durable_index = max(self.durable_index, min(index, self.last_index))
        return True

    def gc(self, below: int) -> None:
        below = min(below, self.durable_index + 1)
        firsts = [first for first, _ in self.log.segments()]
        keep_from = max([f for f in firsts if f <= below], default=None)
        si = self._snap[0]
        if keep_from is None or keep_from - 1 <= si:
            return
        new_si = keep_from - 1
        self._write_boundary(new_si, self.term(new_si), self.timestamp(new_si))  # first
        self.log.gc(keep_from)
        drop = new_si - si
        del self._terms[:drop]
        del self._ts[:drop]
        for i in range(si + 1, keep_from):
            self._cache.pop(i, None)
        self._snap = self._boundary
        self.first_index = keep_from

    def _write_boundary(self, index: int, term: int, ts: int) -> None:
        self._boundary = (index, term, ts)
        write_json_atomic(os.path.join(self.path, RAFT_LOG_FILE),
                          {"index": index, "term": term, "timestamp": ts}, self.fsync)

    def reset(self, index: int, term: int, timestamp: int) -> None:
        self.epoch += 1
        self._write_boundary(index, term, timestamp)
        self.log.reset(index + 1)
        self._snap = (index, term, timestamp)
        self._terms, self._ts, self._cache = [], [], {}
        self.first_index = index + 1
        self.last_index = self.durable_index = index

    def close(self) -> None:
        self.log.close()
