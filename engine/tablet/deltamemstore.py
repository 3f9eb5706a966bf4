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

Row records (`append_row`): the small-write path (small_write.py) adds one mutation of one
row at a time as plain Python values, `(rowid, ts, seq, kind, {col_id: physical value})`,
with no Arrow or numpy call. They are kept in append order (`_rows`) and chained by rowid
(`_chains`), and become Arrow only when a reader needs the sorted columnar view: `view()`
(scans, flushes, compactions) turns the row records appended since it last ran into one
DeltaBatch in one step (`_materialise`) and merges it with the chunks'. Point lookups
(`row_changes`) never build Arrow for them: a row's chain is walked newest first in
Python, stopping at the newest visible DELETE / REINSERT or once every wanted column
the row's records set at all has its newest visible value. The Arrow chunks' records of
the row (bulk writes, rowids remapped by a flush) are looked up as before
(`rows_records`, over the chunks only) and, when a row has both kinds, merged with its
chain by (ts, seq): the outcome is exactly `resolve` over all the row's records,
whatever their mix.

    append(batch)   ->  _chunks  --+--> rows_records / _chunk_view (lookups, Arrow part)
                                   +--> view() = chunks + _materialise(_rows) (scans, flush)
    append_row(..)  ->  _rows, _chains[rowid] --> row_changes (lookups, Python)

Concurrency is that of the chunks: records are appended under the tablet's write lock,
lists only grow (appends are atomic in CPython), and a reader works on the lengths it saw.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa

from engine.tablet.delta import DeltaBatch, MutationKind

PENDING_MIN = 1024          # pending records a lookup tolerates before rebuilding the view
INDEX_CHUNK_MAX = 64        # chunks up to this many records are indexed by rowid
_EMPTY = DeltaBatch.empty()
ROW_PENDING_MAX = 8         # pending chunks of the rows looked up before the view is rebuilt
_UPDATE = int(MutationKind.UPDATE)
_REINSERT = int(MutationKind.REINSERT)
# What a row record costs in Python objects beyond its values' Arrow size (its tuple, its
# values dict, int / bytes objects, two list slots; ~500 bytes measured with tracemalloc
# for a one-column UPDATE): `nbytes` counts it, so flushes and the memory limit see the
# memory single-row writes really use.
ROW_RECORD_OVERHEAD = 450


class DeltaMemStore:
    def __init__(self) -> None:
        self._chunks: list[DeltaBatch] = []
        self._view: tuple[int, DeltaBatch] = (0, DeltaBatch.empty())
        self._view_lock = threading.Lock()
        self._nbytes = 0
        self._count = 0
        self._chunk_count = 0      # records in _chunks (the rest are row records)
        self.min_ts = None
        self.max_ts = None
        self.first_append_at: float | None = None
        # rowid -> positions in _chunks of pending chunks holding records of that row;
        # None when a pending chunk was too big to index (lookups then rebuild the view)
        self._pending: dict[int, list[int]] | None = {}
        # rowid -> (view chunk count, chunks merged up to, records) of hot rows (_hot_row)
        self._hot: dict[int, tuple[int, int, DeltaBatch]] = {}
        # row records (module docstring): append order, and by rowid; `_live_first`: the
        # position in its chain of each row's oldest DELETE / REINSERT record
        self._rows: list[tuple] = []
        self._chains: dict[int, list[tuple]] = {}
        self._live_first: dict[int, int] = {}
        self._chain_cols: dict[int, set] = {}        # the columns each row's chain sets
        self._types: dict[int, pa.DataType] = {}    # physical type of each column set
        self._last_types = None
        # the full view: (chunks in it, row records in it, records), built by view()
        self._full: tuple[int, int, DeltaBatch] = (0, 0, DeltaBatch.empty())

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
        self._chunk_count += len(batch)
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

    def append_row(self, rowid: int, ts: int, kind: int, values: dict | None,
                   types: dict[int, pa.DataType], nbytes: int) -> None:
        """Add one record as plain values (module docstring): `values` {col_id: physical
        Python value} of the columns it sets (None for a DELETE), `types` the physical
        Arrow type of (at least) those columns, `nbytes` its size as Arrow would count it
        (`nbytes` adds ROW_RECORD_OVERHEAD for the Python objects). The caller holds the
        tablet's write lock."""
        if types is not self._last_types:
            self._types.update(types)
            self._last_types = types
        rec = (rowid, ts, 0, kind, values)
        chain = self._chains.get(rowid)
        if chain is None:
            chain = self._chains[rowid] = []
        if kind != _UPDATE and rowid not in self._live_first:
            self._live_first[rowid] = len(chain)
        if values:
            cols = self._chain_cols.get(rowid)
            if cols is None:
                self._chain_cols[rowid] = set(values)
            else:
                cols.update(values)
        chain.append(rec)
        self._rows.append(rec)
        if self.min_ts is None:
            self.min_ts = self.max_ts = ts
            if self.first_append_at is None:
                self.first_append_at = time.monotonic()
        elif ts > self.max_ts:
            self.max_ts = ts
        elif ts < self.min_ts:
            self.min_ts = ts
        self._nbytes += nbytes + ROW_RECORD_OVERHEAD
        self._count += 1

    def row_changes(self, rowid: int, snapshot, want) -> tuple[int, dict] | None:
        """The REDO records of one row visible at `snapshot`, applied: (liveness, values)
        with liveness -1 (no visible DELETE / REINSERT), 0 (deleted) or 1 (reinserted)
        and values {col_id: physical value} of the newest visible record setting each
        column (at least those of `want`, a set of column ids, or every column when None);
        None when no record of the row is visible. Exactly `resolve` over the row's
        records (module docstring)."""
        if not self._count:
            return None
        chain = self._chains.get(rowid)
        first_live = self._live_first.get(rowid)
        cols = self._chain_cols.get(rowid)
        if self._chunks:
            recs = self.rows_records(rowid, rowid + 1)
            if len(recs):
                # a row with Arrow records too (rare: a bulk write and single-row ones
                # of one row in one store): all its records in (ts, seq) order
                chain = sorted(recs.to_records() + list(chain or ()),
                               key=lambda r: (r[1], r[2]))
                first_live = first_liveness(chain)
                cols = None
        if not chain:
            return None
        if want is not None and cols is not None:
            # a column no record of the row sets keeps its base value: not waited for
            want = [c for c in want if c in cols]
        return apply_chain(chain, snapshot, want, first_live)

    def may_have_row(self, rowid: int) -> bool:
        """False when no record of `rowid` is here (a point read then skips `row_changes`
        and the wanted-column list it takes): no Arrow chunks and no row record of it."""
        return bool(self._chunks) or rowid in self._chains

    def row_records(self, rowid: int) -> list[tuple]:
        """The row records (`append_row`) of one row, oldest first (a copy)."""
        return list(self._chains.get(rowid, ()))

    def rows_records(self, lo: int, hi: int) -> DeltaBatch:
        """The records of rowids [lo, hi) appended as Arrow chunks (`append`), sorted by
        (rowid, ts, seq): the chunk view's slice plus the matching pending records (see
        the module docstring); for point lookups, hi = lo + 1 (a wider range searches the
        index per rowid). Row records are not included: `row_changes` covers both."""
        if not self._chunks:
            return _EMPTY
        chunks = self._chunks
        n = len(chunks)
        cached_n, cached = self._view
        index = self._pending
        if cached_n == n:
            return _slice(cached, lo, hi)
        pending = self._chunk_count - len(cached)
        if index is None or hi - lo > 64 or pending > max(PENDING_MIN, len(cached) // 4):
            return _slice(self._chunk_view(), lo, hi)
        if hi == lo + 1 and lo not in index:   # a point lookup of a row with no pending
            return _slice(cached, lo, hi)       # records: the view's slice alone
        found = [index.get(r, ()) for r in range(lo, hi)]
        if sum(len(f) for f in found) > ROW_PENDING_MAX:
            if hi == lo + 1:
                return self._hot_row(lo, cached_n, cached, found[0], n)
            # a hot range updated many times since the view was built: one rebuild,
            # after which its lookups (and every other's) are one binary search again
            return _slice(self._chunk_view(), lo, hi)
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
        """All records appended so far (chunks and row records), sorted by (rowid, ts,
        seq). Without row records it is the chunks' view itself."""
        if not self._rows:
            return self._chunk_view()
        n = len(self._chunks)
        m = len(self._rows)
        cached_n, cached_m, cached = self._full
        if cached_n == n and cached_m == m:
            return cached
        with self._view_lock:
            cached_n, cached_m, cached = self._full
            if cached_n != n or cached_m != m:
                parts = [cached] + self._chunks[cached_n:n]
                parts.append(self._materialise(self._rows[cached_m:m]))
                cached = DeltaBatch.concat(parts)
                self._full = (n, m, cached)
            return cached

    def _materialise(self, rows: list[tuple]) -> DeltaBatch:
        """Row records as one DeltaBatch (unsorted): one array per field, built from
        Python lists in one call each (the records are Python values: a pass over them
        per column is the conversion itself)."""
        if not rows:
            return _EMPTY
        rowid, ts, seq, kind, values = zip(*rows)
        cols = {}
        cids = {c for v in values if v for c in v}
        for cid in sorted(cids):
            mask = np.fromiter((v is not None and cid in v for v in values), dtype=bool,
                               count=len(rows))
            vals = pa.array([v.get(cid) if v else None for v in values],
                            type=self._types[cid])
            cols[cid] = (mask, vals)
        return DeltaBatch(np.array(rowid, dtype=np.int64), np.array(ts, dtype=np.int64),
                          np.array(seq, dtype=np.int64), np.array(kind, dtype=np.int8),
                          cols)

    def _chunk_view(self) -> DeltaBatch:
        """The records appended as chunks, sorted by (rowid, ts, seq)."""
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


def apply_chain(chain: list[tuple], snapshot, want, first_live: int | None = None
                ) -> tuple[int, dict] | None:
    """One row's REDO records `chain` (row-record tuples in (ts, seq) order) applied at
    `snapshot`, as `DeltaMemStore.row_changes` returns them. `first_live`: the position
    of the oldest DELETE / REINSERT in `chain` (None: there is none); with `want` it lets
    the walk stop early. The walk is newest first: the newest visible record setting a
    column gives its value, the newest visible DELETE / REINSERT the row's liveness, and
    a REINSERT sets every non-key column, so nothing older matters after either."""
    acb = snapshot.all_committed_before
    committed = snapshot.committed
    live = -1
    vals: dict = {}
    seen = False
    need = None if want is None else set(want)    # wanted columns not found yet
    for i in range(len(chain) - 1, -1, -1):   # a row's records, newest first
        rec = chain[i]
        ts = rec[1]
        if ts >= acb and ts not in committed:
            continue
        seen = True
        values = rec[4]
        if values:
            for cid, v in values.items():
                if cid not in vals:
                    vals[cid] = v
                    if need:
                        need.discard(cid)
        if rec[3] != _UPDATE:
            live = 1 if rec[3] == _REINSERT else 0
            break
        if need is not None and not need and (first_live is None or first_live >= i):
            break                # nothing older can change the wanted columns
    return (live, vals) if seen else None


def first_liveness(chain: list[tuple]) -> int | None:
    """The position of the oldest DELETE / REINSERT record in `chain` (None: none)."""
    return next((i for i, r in enumerate(chain) if r[3] != _UPDATE), None)


def _slice(batch: DeltaBatch, lo: int, hi: int) -> DeltaBatch:
    """`batch.slice_rows(lo, hi)`; a row without records (most point lookups) gets the
    shared empty batch after one binary search, without building a sliced one."""
    rid = batch.rowid
    a = int(rid.searchsorted(lo))
    if a == len(rid) or rid[a] >= hi:
        return _EMPTY
    return batch.slice_rows(lo, hi)
