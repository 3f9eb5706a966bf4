"""DeltaMemStore: the in-memory store of mutations keyed by (rowid, timestamp).

Each DiskRowSet owns one DMS that receives UPDATEs and DELETEs of its rows; when it grows
too large it is flushed to a REDO DeltaFile and replaced by an empty one. The MemRowSet uses
the same structure for its rows' REDO chains (rowid = the row's position in the MemRowSet):
the chain of row r is the run of records with rowid r, in (timestamp, seq) order.

Concurrency contract: appends happen under the tablet's write lock (one writer at a time);
readers never lock. Appends add a new chunk to a list (atomic in CPython); a reader calls
`view()` which returns an immutable, sorted DeltaBatch of the chunks present at that moment.
The sorted view is cached and rebuilt lazily after new appends.
"""

from __future__ import annotations

import threading
import time

from engine.tablet.delta import DeltaBatch


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

    def append(self, batch: DeltaBatch) -> None:
        if not len(batch):
            return
        lo, hi = batch.min_ts(), batch.max_ts()
        self.min_ts = lo if self.min_ts is None else min(self.min_ts, lo)
        self.max_ts = hi if self.max_ts is None else max(self.max_ts, hi)
        self._nbytes += batch.nbytes
        self._count += len(batch)
        self._chunks.append(batch)
        if self.first_append_at is None:
            self.first_append_at = time.monotonic()

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
