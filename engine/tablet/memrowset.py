"""MemRowSet: the in-memory store that receives every INSERT of a tablet.

Logically (tablet design doc) the MRS is a key-ordered set of rows, each with its insertion
timestamp and a REDO chain of UPDATE / DELETE / REINSERT mutations:

    row 0: (ts=5, key=k1, v=1) -> (ts=7, UPDATE v=3) -> (ts=9, DELETE)
    row 1: (ts=6, key=k0, v=8)

A reader at snapshot S sees a row iff its insertion timestamp is committed in S, then
applies each mutation committed in S in order. Rows are never removed: a DELETE is a
mutation, and inserting a deleted key again appends a REINSERT to the same row.

Physically, to keep bulk inserts vectorised in Python, the MRS is split in three parts:

    data         append-only Arrow batches in *insertion* order (physical types);
                 a row's rowid is its insertion position and never changes
    key index    sorted runs of (encoded key, rowid), merged like a binary counter
                 (amortised O(log n) work per row, O(log n) runs to probe); a batch
                 or runs already in key order (a sorted bulk load) are not sorted again
    REDO chains  a DeltaMemStore keyed by (rowid, ts, seq): the chain of row r is the
                 run of records with rowid r

plus two arrays indexed by rowid: the insertion timestamp and the *latest* liveness (used
by the write path, which runs under the tablet's write lock).

Scans read the data in insertion order (Kudu's scans are unordered); a flush sorts by key.
Readers never lock: they capture the row count first and then the arrays, which writers
replace before publishing a larger count.

Single-row inserts (`insert_row`, the small-write path) append plain Python values to a
*tail* instead of an Arrow batch each: rows [arrow_n, n) are tuples of physical values in
a list (`_tail`), their keys in a dict (`_tail_keys`), so an insert makes no Arrow or
numpy call beyond its three per-row array cells. The tail becomes one Arrow batch and one
key-index run (`materialise`) when a reader needs Arrow (scans, flushes, the vectorised
`find` of the general write path: each calls it first) or once it holds TAIL_MAX rows;
point lookups read a tail row's tuple directly.

    rowids  [0 ............ arrow_n) [arrow_n ........ n)
            Arrow batches + key runs  tail: (key, values) tuples + key dict

Materialising takes `_mat_lock` (so does the general `insert`, which materialises the
tail before appending its batch: batches stay in rowid order). The tail list is only
appended to by the writer, and replaced as a whole (with its base rowid, one attribute)
by the writer once its materialised prefix is long; a reader that captured an older
list reads valid, unchanged entries from it. A key moves from the tail dict to a run by
publishing the run first and deleting the dict entry after, and `find_one` probes the
dict before the runs, so a concurrent probe finds it in one or the other.

An MRS keeps the schema it was created with for its whole life: ALTER TABLE
(`Tablet.alter_schema`) flushes it and starts a new MRS with the new schema. Readers ask
for columns by id (`_column`); one this MRS does not have reads as its default.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine.convert import default_array
from engine.key_encoding import find_sorted
from engine.schema import ColumnSchema, Schema
from engine.tablet.delta import DeltaBatch, patch_array, resolve
from engine.tablet.deltamemstore import DeltaMemStore
from engine.tablet.mvcc import MvccSnapshot

TAIL_MAX = 1024       # tail rows (single-row inserts) a MemRowSet keeps before Arrow
_TAIL_TRIM = 4096     # materialised rows at the head of the tail list before it is cut


class _GrowableArray:
    """A numpy array with amortised O(1) append; readers slice [:n] of a captured array."""

    def __init__(self, dtype) -> None:
        self.arr = np.empty(1024, dtype=dtype)

    def ensure(self, n: int) -> None:
        if n > len(self.arr):
            new = np.empty(max(n, 2 * len(self.arr)), dtype=self.arr.dtype)
            new[: len(self.arr)] = self.arr
            self.arr = new


def cell_reader(arr: pa.Array):
    """A function: position -> the Python value (`as_py`) of `arr` there, reading a
    fixed-width numeric or a binary column without nulls straight from its buffers (a
    point lookup's cell costs ~0.3 us instead of an Arrow scalar's ~1 us)."""
    t = arr.type
    if arr.null_count == 0 and len(arr):
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            # `ndarray.item(off)`: the Python value with no numpy scalar and no frame of
            # ours in between (`values[off].item()`'s value)
            return arr.to_numpy(zero_copy_only=True).item
        if pa.types.is_binary(t):
            bufs = arr.buffers()
            offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
            data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
            return lambda off: bytes(data[offsets[off]:offsets[off + 1]])
    return lambda off: arr[off].as_py()


class MemRowSet:
    def __init__(self, schema: Schema, mrs_id: int) -> None:
        self.schema = schema
        self.id = mrs_id
        self._batches: list[pa.RecordBatch] = []
        self._batch_keys: list[np.ndarray] = []
        self._batch_starts: list[int] = []
        self._n = 0
        self._insert_ts = _GrowableArray(np.int64)
        self._insert_seq = _GrowableArray(np.int64)
        self._live = _GrowableArray(bool)
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted keys, rowids)
        self.redo = DeltaMemStore()
        self._key_ids = frozenset(c.id for c in schema.key_columns)
        # (insert batch index, column id) -> `cell_reader` of that column (lookup_row)
        self._cells: dict[tuple[int, int], object] = {}
        self._nbytes = 0
        self._table_cache: tuple[int, pa.Table] | None = None
        self._cache_lock = threading.Lock()
        self.min_ts: int | None = None
        self.frozen = False
        self._first_insert_at: float | None = None
        # the tail of single-row inserts (module docstring): (rowid of list[0], list of
        # (key, physical values in schema order)); rows below _arrow_n are in batches
        self._tail: tuple[int, list] = (0, [])
        self._tail_keys: dict[bytes, int] = {}
        self._arrow_n = 0
        self._mat_lock = threading.Lock()
        self._phys_schema = pa.schema([pa.field(c.name, c.physical_type)
                                       for c in schema.columns])

    # -- sizes ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        return self._nbytes + self.redo.nbytes + 9 * self._n

    def empty(self) -> bool:
        return self._n == 0

    def age_s(self) -> float:
        """Seconds since the first insert (how long the oldest row has been unflushed)."""
        return 0.0 if self._first_insert_at is None else time.monotonic() - self._first_insert_at

    # -- write path (caller holds the tablet write lock) ------------------------------------
    def insert(self, keys: np.ndarray, batch: pa.RecordBatch, ts: int, seq: int = 0
               ) -> np.ndarray:
        """Append new rows (keys must not exist in this MRS). Returns their rowids."""
        with self._mat_lock:
            self._materialise_locked(self._n)
            return self._insert_locked(keys, batch, ts, seq)

    def _insert_locked(self, keys: np.ndarray, batch: pa.RecordBatch, ts: int, seq: int
                       ) -> np.ndarray:
        assert not self.frozen
        n = len(keys)
        start = self._n
        rowids = np.arange(start, start + n, dtype=np.int64)
        self._insert_ts.ensure(start + n)
        self._live.ensure(start + n)
        self._insert_ts.arr[start:start + n] = ts
        self._insert_seq.ensure(start + n)
        self._insert_seq.arr[start:start + n] = seq
        self._live.arr[start:start + n] = True
        self._batches.append(batch)
        self._batch_keys.append(keys)
        self._batch_starts.append(start)
        self._nbytes += batch.nbytes
        if n > 1 and not (keys[1:] >= keys[:-1]).all():
            order = np.argsort(keys, kind="stable")
            self._add_run(keys[order], rowids[order])
        else:
            self._add_run(keys, rowids)             # a batch in key order (a bulk load)
        if self.min_ts is None:
            self.min_ts = ts
            self._first_insert_at = time.monotonic()
        self._arrow_n = start + n
        self._n = start + n  # publish last
        return rowids

    def insert_row(self, key: bytes, values: tuple, ts: int, nbytes: int) -> int:
        """Append one new row as plain values to the tail (module docstring): `key`
        encoded (not in this MRS), `values` its physical Python values in this MRS's
        schema order, `nbytes` its size as Arrow would count it. Returns its rowid."""
        assert not self.frozen
        rowid = self._n
        if rowid >= len(self._live.arr):
            self._insert_ts.ensure(rowid + 1)
            self._insert_seq.ensure(rowid + 1)
            self._live.ensure(rowid + 1)
        self._insert_ts.arr[rowid] = ts
        self._insert_seq.arr[rowid] = 0
        self._live.arr[rowid] = True
        base, tail = self._tail
        if base + len(tail) != rowid:          # Arrow rows came after the last tail
            tail = []
            self._tail = (rowid, tail)
        elif rowid - base >= _TAIL_TRIM + TAIL_MAX and self._arrow_n - base >= _TAIL_TRIM:
            cut = self._arrow_n - base         # drop the materialised head
            tail = tail[cut:]
            self._tail = (base + cut, tail)
        tail.append((key, values))
        self._tail_keys[key] = rowid
        self._nbytes += nbytes
        if self.min_ts is None:
            self.min_ts = ts
            self._first_insert_at = time.monotonic()
        self._n = rowid + 1  # publish last
        if rowid + 1 - self._arrow_n >= TAIL_MAX:
            self.materialise()
        return rowid

    def materialise(self, n: int | None = None) -> None:
        """Make rows [0, n) (default: all) Arrow batches and key-index runs: the tail's
        rows as one batch (module docstring). Any thread; cheap when nothing is due."""
        if (self._n if n is None else n) <= self._arrow_n:
            return
        with self._mat_lock:
            self._materialise_locked(self._n if n is None else n)

    def _materialise_locked(self, n: int) -> None:
        start = self._arrow_n
        if n <= start:
            return
        base, tail = self._tail
        rows = tail[start - base:n - base]
        m = len(rows)
        assert m == n - start, "the tail lost rows"
        keys = np.array([r[0] for r in rows], dtype=bytes)
        # one Arrow array per column from the rows' Python values (the conversion itself)
        cols = list(zip(*[r[1] for r in rows]))
        phys = self._phys_schema
        batch = pa.RecordBatch.from_arrays(
            [pa.array(cols[i], type=f.type) for i, f in enumerate(phys)], schema=phys)
        self._batches.append(batch)
        self._batch_keys.append(keys)
        self._batch_starts.append(start)
        rowids = np.arange(start, n, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self._add_run(keys[order], rowids[order])
        self._arrow_n = n                       # the rows are in Arrow now
        pop = self._tail_keys.pop
        for r in rows:                          # after the run is published
            pop(r[0], None)

    def _add_run(self, keys: np.ndarray, rowids: np.ndarray) -> None:
        runs = list(self._runs)
        runs.append((keys, rowids))
        # Binary-counter merging: merge while the newest run is at least half the size of the
        # one before it, so there are O(log n) runs and each row is merged O(log n) times.
        while len(runs) >= 2 and len(runs[-1][0]) * 2 >= len(runs[-2][0]):
            (k2, r2), (k1, r1) = runs.pop(), runs.pop()
            runs.append(_merge_runs([(k1, r1), (k2, r2)]))
        self._runs = runs

    def append_mutations(self, batch: DeltaBatch, live_after: np.ndarray | None = None) -> None:
        """Add REDO records; live_after[i] is the row's liveness after record i (or None)."""
        self.redo.append(batch)
        if live_after is not None:
            self._live.arr[batch.rowid] = live_after

    def append_mutation_row(self, rowid: int, ts: int, kind: int, values: dict | None,
                            types: dict, nbytes: int, live_after: bool | None) -> None:
        """Add one REDO record as plain values (`DeltaMemStore.append_row`, the
        small-write path); `live_after`: the row's liveness after it (None: unchanged)."""
        self.redo.append_row(rowid, ts, kind, values, types, nbytes)
        if live_after is not None:
            self._live.arr[rowid] = live_after

    def set_live(self, rowids: np.ndarray, live: bool) -> None:
        self._live.arr[rowids] = live

    # -- lookups --------------------------------------------------------------------------
    def find(self, keys: np.ndarray) -> np.ndarray:
        """rowid of each key in this MRS (live or not), -1 if absent. Vectorised (the
        tail is materialised first)."""
        self.materialise()
        out = np.full(len(keys), -1, dtype=np.int64)
        for run_keys, run_rowids in self._runs:
            if not len(run_keys):
                continue
            pos = np.searchsorted(run_keys, keys)
            pos_c = np.minimum(pos, len(run_keys) - 1)
            hit = run_keys[pos_c] == keys
            out[hit] = run_rowids[pos_c[hit]]
        return out

    def find_one(self, key: bytes) -> int:
        rid = self._tail_keys.get(key)         # the tail first (module docstring)
        if rid is not None:
            return rid
        for run_keys, run_rowids in self._runs:
            pos = find_sorted(run_keys, key)
            if pos >= 0:
                return run_rowids.item(pos)     # (a Python int, no numpy scalar)
        return -1

    def insert_seqs(self, n: int) -> np.ndarray:
        """The op-internal sequence (write round) each of the first n rows was inserted in."""
        return self._insert_seq.arr[:n]

    def latest_live(self, rowids: np.ndarray) -> np.ndarray:
        return self._live.arr[rowids]

    def latest_live_one(self, rowid: int) -> bool:
        """`latest_live` of one row (the small-write path's scalar probe)."""
        return bool(self._live.arr[rowid])

    def insert_ts_of(self, rowid: int) -> int:
        """The insertion timestamp of one row (row_check.py's read preconditions)."""
        return int(self._insert_ts.arr[rowid])

    # -- read path ------------------------------------------------------------------------
    def capture(self) -> tuple[int, np.ndarray, DeltaBatch]:
        """(row count, insertion timestamps, REDO records) consistent for a reader."""
        n = self._n
        return n, self._insert_ts.arr[:n], self.redo.view()

    def table(self, n: int) -> pa.Table:
        """The first n rows (insertion order, physical types) as one Arrow table."""
        cached = self._table_cache
        if cached is not None and cached[0] == n:
            return cached[1]
        self.materialise(n)
        batches = self._batches
        starts = self._batch_starts
        k = int(np.searchsorted(starts, n, "left"))
        used = batches[:k]
        t = pa.Table.from_batches(used, schema=self._physical_schema())
        if t.num_rows > n:
            t = t.slice(0, n)
        with self._cache_lock:
            self._table_cache = (n, t)
        return t

    def batches(self, n: int) -> list[tuple[int, pa.RecordBatch, np.ndarray]]:
        """(first rowid, batch, keys) triples covering rows [0, n)."""
        self.materialise(n)
        out = []
        for start, b, k in zip(self._batch_starts, self._batches, self._batch_keys):
            if start >= n:
                break
            if start + b.num_rows > n:
                b = b.slice(0, n - start)
                k = k[: n - start]
            out.append((start, b, k))
        return out

    def _visible_redo(self, redo: DeltaBatch, snapshot: MvccSnapshot) -> DeltaBatch:
        if not len(redo):
            return redo
        return redo.select(snapshot.is_committed_array(redo.ts))

    def scan(self, columns: Sequence[ColumnSchema], predicates, snapshot: MvccSnapshot,
             lower: bytes | None, upper: bytes | None, stats, cap=None
             ) -> Iterator[dict[int, pa.Array]]:
        """Yield {col_id: physical array} per insert batch for live matching rows.

        `cap` is a capture() taken when the scan was opened (default: now)."""
        n, insert_ts, redo = cap or self.capture()
        redo = self._visible_redo(redo, snapshot)
        for start, batch, keys in self.batches(n):
            m = batch.num_rows
            live = snapshot.is_committed_array(insert_ts[start:start + m])
            res = resolve(redo.slice_rows(start, start + m), start, m, True, None) \
                if len(redo) else None
            if res is not None:
                live = res.apply_live(live)
            if lower is not None:
                live &= keys >= lower
            if upper is not None:
                live &= keys < upper
            stats.rows_scanned += m
            if not live.any():
                continue
            cols = {}
            need = {c.id: c for c in columns} | {p.col_id: p.col for p in predicates}
            for cid, col in need.items():
                arr = self._column(batch, col)
                if res is not None and cid in res.patches:
                    pos, vals = res.patches[cid]
                    arr = patch_array(arr, pos, vals)
                cols[cid] = arr
            for p in predicates:
                live &= p.evaluate(cols[p.col_id])
            cnt = int(live.sum())
            if not cnt:
                continue
            stats.rows_returned += cnt
            if cnt < m:
                keep = pa.array(np.flatnonzero(live))
                out = {c.id: cols[c.id].take(keep) for c in columns}
            else:
                out = {c.id: cols[c.id] for c in columns}
            yield out if columns else {"__count__": cnt}

    def materialize(self, columns: Sequence[ColumnSchema], snapshot: MvccSnapshot,
                    rowids: np.ndarray | None = None
                    ) -> Iterator[tuple[int, np.ndarray, dict[int, pa.Array], np.ndarray]]:
        """Every row per insert batch: (first rowid, live mask, physical columns, keys);
        with `rowids` (sorted), only the batches holding one of them (a diff scan's
        changed rows: the others are not resolved at all)."""
        n, insert_ts, redo = self.capture()
        redo = self._visible_redo(redo, snapshot)
        for start, batch, keys in self.batches(n):
            m = batch.num_rows
            if rowids is not None and not _holds_any(rowids, start, start + m):
                continue
            live = snapshot.is_committed_array(insert_ts[start:start + m])
            res = resolve(redo.slice_rows(start, start + m), start, m, True, None) \
                if len(redo) else None
            if res is not None:
                live = res.apply_live(live)
            cols = {}
            for c in columns:
                arr = self._column(batch, c)
                if res is not None and c.id in res.patches:
                    arr = patch_array(arr, *res.patches[c.id])
                cols[c.id] = arr
            yield start, live, cols, keys

    def changed_rowids(self, start_ts: int, end_ts: int) -> np.ndarray:
        n, insert_ts, redo = self.capture()
        a = np.flatnonzero((insert_ts > start_ts) & (insert_ts <= end_ts))
        b = redo.rowid[(redo.ts > start_ts) & (redo.ts <= end_ts)]
        return np.union1d(a, b)

    def change_timestamps(self, start_ts: int, end_ts: int, distinct: bool = True
                          ) -> np.ndarray:
        """Sorted distinct commit timestamps of the inserts and REDO records in
        (start_ts, end_ts] (Tablet.changes splits a diff scan at each of them); with
        `distinct` false, one per record, unsorted (Tablet.change_counts)."""
        n, insert_ts, redo = self.capture()
        a = insert_ts[(insert_ts > start_ts) & (insert_ts <= end_ts)]
        b = redo.ts[(redo.ts > start_ts) & (redo.ts <= end_ts)]
        if not distinct:
            return np.concatenate((a, b)).astype(np.int64, copy=False)
        return np.union1d(a, b).astype(np.int64, copy=False)

    def lookup_row(self, rowid: int, columns: Sequence[ColumnSchema], snapshot: MvccSnapshot
                   ) -> dict[int, object] | None:
        """Physical values of one row at a snapshot (None if not live)."""
        if rowid >= self._n:
            return None
        ts = self._insert_ts.arr.item(rowid)    # `snapshot.is_committed(ts)` in line
        if ts >= snapshot.all_committed_before and ts not in snapshot.committed:
            return None
        # the row's REDO records by rowid, without re-sorting the store or building Arrow
        # for single-row writes (deltamemstore.py `row_changes`)
        redo = self.redo
        changed = redo.row_changes(
            rowid, snapshot, [c.id for c in columns if c.id not in self._key_ids]) \
            if len(redo) and redo.may_have_row(rowid) else None
        vals = None
        if changed is not None:
            live, vals = changed
            if live == 0:
                return None
        base, tail = self._tail
        if base <= rowid < base + len(tail):   # a tail row: its tuple (module docstring)
            values = tail[rowid - base][1]
            out = {}
            for c in columns:
                if vals and c.id in vals:
                    out[c.id] = vals[c.id]
                else:
                    i = self.schema.position_of_id(c.id)
                    out[c.id] = values[i] if i is not None else \
                        default_array(c, 1)[0].as_py()
            return out
        k = bisect.bisect_right(self._batch_starts, rowid) - 1   # a list: no numpy call
        batch = self._batches[k]
        off = rowid - self._batch_starts[k]
        out = {}
        cells = self._cells
        for c in columns:
            if vals and c.id in vals:
                out[c.id] = vals[c.id]
            else:
                read = cells.get((k, c.id))
                if read is None:
                    read = cells[(k, c.id)] = cell_reader(self._column(batch, c))
                out[c.id] = read(off)
        return out

    def _column(self, batch: pa.RecordBatch, col: ColumnSchema) -> pa.Array:
        """A column of one insert batch, matched by column id (see the module docstring)."""
        i = self.schema.position_of_id(col.id)
        return batch.column(i) if i is not None else default_array(col, batch.num_rows)

    def _physical_schema(self) -> pa.Schema:
        return self._phys_schema

    def sorted_rowids(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, rowids) of every row in key order (merges the key-index runs)."""
        self.materialise()
        runs = self._runs
        if not runs:
            return np.empty(0, dtype="S1"), np.empty(0, dtype=np.int64)
        if len(runs) == 1:
            return runs[0]
        return _merge_runs(runs)

    def key_range(self) -> tuple[bytes, bytes] | None:
        self.materialise()
        runs = self._runs
        if not runs or self._n == 0:
            return None
        return (min(bytes(r[0][0]) for r in runs if len(r[0])),
                max(bytes(r[0][-1]) for r in runs if len(r[0])))

    def physical_schema(self) -> pa.Schema:
        return self._physical_schema()

    def column_ids(self) -> Sequence[int]:
        return [c.id for c in self.schema.columns]


def _merge_runs(runs: list) -> tuple[np.ndarray, np.ndarray]:
    """(keys, rowids) of key-sorted runs merged in key order, ties in run order. Runs that
    follow one another in key order (a bulk load of sorted batches) are only
    concatenated; otherwise a stable sort of the concatenation."""
    k = np.concatenate([r[0] for r in runs])
    r = np.concatenate([r[1] for r in runs])
    if all(len(a[0]) for a in runs) and all(
            a[0][-1] <= b[0][0] for a, b in zip(runs, runs[1:])):
        return k, r
    order = np.argsort(k, kind="stable")
    return k[order], r[order]


def _holds_any(rowids: np.ndarray, lo: int, hi: int) -> bool:
    """Whether sorted `rowids` has a value in [lo, hi)."""
    a = int(np.searchsorted(rowids, lo))
    return a < len(rowids) and int(rowids[a]) < hi
