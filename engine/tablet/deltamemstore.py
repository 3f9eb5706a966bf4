"""DeltaMemStore: the in-memory store of mutations keyed by (rowid, timestamp).

Each DiskRowSet owns one DMS that receives UPDATEs and DELETEs of its rows; when it grows
too large it is flushed to a REDO DeltaFile and replaced by an empty one. The MemRowSet uses
the same structure for its rows' REDO chains (rowid = the row's position in the MemRowSet):
the chain of row r is the run of records with rowid r, in (timestamp, seq) order.

Concurrency contract: appends happen under the tablet's write lock (one writer at a time);
readers never lock. Appends add a new chunk to a list (atomic in CPython); a reader calls
`view()` which returns an immutable, sorted DeltaBatch of the chunks present at that moment.
The sorted view is cached and rebuilt lazily after new appends.

Point lookups (`rows_records`, MemRowSet / DiskRowSet `lookup_row`) find a row's records
without rebuilding that view after every write: the records appended since the view was
built ("pending") are indexed by rowid as they are appended (single-row writes append
small chunks), so a lookup takes its row's slice of the view by binary search plus the
few pending records of its row. The view is rebuilt (by a lookup) only once the pending
records exceed a quarter of it (at least PENDING_MIN). A row looked up with more than
ROW_PENDING_MAX pending chunks (a hot row of a skewed workload) keeps its records merged
on their own (`_hot_row`), extended by each new chunk of that row, so neither gathering
its chunks one by one nor rebuilding the whole view is paid per read. A mixed
read/update workload (YCSB-A) thus does not re-sort the whole store per read.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from engine.tablet.delta import DeltaBatch

PENDING_MIN = 1024          # pending records a lookup tolerates before rebuilding the view
INDEX_CHUNK_MAX = 64        # chunks up to this many records are indexed by rowid
_EMPTY = DeltaBatch.empty()
ROW_PENDING_MAX = 8         # pending chunks of the rows looked up before the view is rebuilt


class DeltaMemStore:
    def __init__(self) -> None:
        self._chunks: list[DeltaBatch] = []
        self._view: tuple[int, DeltaBatch] = (0, DeltaBatch.empty())
        self._view_lock = threading.Lock()
        self._nbytes = 0
        self._count = 0
        self.min_ts = None
        self.max_ts = None
        self.first_append_at: float | None = None
        # rowid -> positions in _chunks of pending chunks holding records of that row;
        # None when a pending chunk was too big to index (lookups then rebuild the view)
        self._pending: dict[int, list[int]] | None = {}
        # rowid -> (view chunk count, chunks merged up to, records) of hot rows (_hot_row)
        self._hot: dict[int, tuple[int, int, DeltaBatch]] = {}

    def append(self, batch: DeltaBatch) -> None:
        if not len(batch):
            return
        if len(batch) == 1:            # a single-row write: no numpy reductions
            lo = hi = int(batch.ts[0])
        else:
            lo, hi = batch.min_ts(), batch.max_ts()
        self.min_ts = lo if self.min_ts is None else min(self.min_ts, lo)
        self.max_ts = hi if self.max_ts is None else max(self.max_ts, hi)
        self._nbytes += batch.nbytes
        self._count += len(batch)
        pos = len(self._chunks)
        if self._view[0] == pos:
            self._pending = {}        # the view holds every chunk: a fresh, empty index
            self._hot = {}
        index = self._pending
        if index is not None:
            if len(batch) == 1:
                index.setdefault(int(batch.rowid[0]), []).append(pos)
            elif len(batch) <= INDEX_CHUNK_MAX:
                for r in set(batch.rowid.tolist()):  # a small chunk: a few rows each
                    index.setdefault(r, []).append(pos)
            else:
                self._pending = None
        self._chunks.append(batch)
        if self.first_append_at is None:
            self.first_append_at = time.monotonic()

    def rows_records(self, lo: int, hi: int) -> DeltaBatch:
        """The records of rowids [lo, hi), sorted by (rowid, ts, seq): the view's slice
        plus the matching pending records (see the module docstring); for point lookups,
        hi = lo + 1 (a wider range searches the index per rowid)."""
        if not self._count:
            return _EMPTY
        chunks = self._chunks
        n = len(chunks)
        cached_n, cached = self._view
        index = self._pending
        if cached_n == n:
            return _slice(cached, lo, hi)
        pending = self._count - len(cached)
        if index is None or hi - lo > 64 or pending > max(PENDING_MIN, len(cached) // 4):
            return _slice(self.view(), lo, hi)
        if hi == lo + 1 and lo not in index:   # a point lookup of a row with no pending
            return _slice(cached, lo, hi)       # records: the view's slice alone
        found = [index.get(r, ()) for r in range(lo, hi)]
        if sum(len(f) for f in found) > ROW_PENDING_MAX:
            if hi == lo + 1:
                return self._hot_row(lo, cached_n, cached, found[0], n)
            # a hot range updated many times since the view was built: one rebuild,
            # after which its lookups (and every other's) are one binary search again
            return _slice(self.view(), lo, hi)
        parts = [_slice(cached, lo, hi)]
        seen: set[int] = set()
        for positions in found:
            for p in positions:
                if cached_n <= p < n and p not in seen:
                    seen.add(p)
                    c = chunks[p]
                    parts.append(c.take(np.flatnonzero((c.rowid >= lo) & (c.rowid < hi))))
        if len(parts) == 1:
            return parts[0]
        return DeltaBatch.concat(parts)

    def _hot_row(self, row: int, cached_n: int, cached: DeltaBatch, positions: list[int],
                 n: int) -> DeltaBatch:
        """The records of a hot row (more than ROW_PENDING_MAX pending chunks: a Zipfian
        workload's favourite key), kept merged per row and extended by the chunks
        appended since, so each read costs the row's new records, not a rebuild of the
        whole view (which every read of such a row would otherwise pay again and again).
        Entries are (view chunk count, chunks merged up to, records); readers race only to
        store equally valid entries."""
        entry = self._hot.get(row)
        if entry is None or entry[0] != cached_n:
            entry = (cached_n, cached_n, _slice(cached, row, row + 1))
        _, upto, merged = entry
        parts = [merged]
        last = upto
        for p in positions:
            if upto <= p < n:
                c = self._chunks[p]
                parts.append(c if len(c) == 1 else c.take(np.flatnonzero(c.rowid == row)))
                last = max(last, p + 1)
        if len(parts) > 1:
            merged = DeltaBatch.concat(parts)
            self._hot[row] = (cached_n, last, merged)
        return merged

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def empty(self) -> bool:
        return self._count == 0

    def view(self) -> DeltaBatch:
        """All records appended so far, sorted by (rowid, ts, seq)."""
        chunks = self._chunks
        n = len(chunks)
        cached_n, cached = self._view
        if cached_n == n:
            return cached
        with self._view_lock:
            cached_n, cached = self._view
            if cached_n != n:
                merged = DeltaBatch.concat([cached] + chunks[cached_n:n])
                self._view = (n, merged)
                cached = merged
            return cached


def _slice(batch: DeltaBatch, lo: int, hi: int) -> DeltaBatch:
    """`batch.slice_rows(lo, hi)`; a row without records (most point lookups) gets the
    shared empty batch after one binary search, without building a sliced one."""
    rid = batch.rowid
    a = int(rid.searchsorted(lo))
    if a == len(rid) or rid[a] >= hi:
        return _EMPTY
    return batch.slice_rows(lo, hi)
