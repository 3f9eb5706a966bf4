"""Delta records (RowChangeLists) in columnar form, and their vectorised application.

Every mutation of a row is a record keyed by (rowid, timestamp, seq):

    kind      meaning as a REDO (moves forward)          meaning as an UNDO (moves back)
    UPDATE    set the listed columns                      set the listed columns (old values)
    DELETE    the row stops existing                      the row did not exist yet (undoes INSERT)
    REINSERT  the row exists again with these values      the row existed with these values
                                                          (undoes DELETE)

`seq` orders records of one op that touch the same row (a batch may update a row twice).
A `DeltaBatch` holds records sorted by (rowid, ts, seq) as numpy arrays, plus, per column
that any record sets, a boolean "set" mask and an Arrow array of values aligned with the
records (only changed columns are stored: a DELETE-only store has no value columns).

Applying deltas to a block of base rows is a vectorised "last writer wins" (`resolve`):

- REDO records visible in the snapshot are applied oldest first, so for each row the newest
  visible record that sets a column decides its value, and the newest visible DELETE or
  REINSERT decides whether the row exists.
- UNDO records *not* visible in the snapshot are applied newest first (rolling back), so the
  *oldest* such record decides.

Both reduce to "pick the last (REDO) or first (UNDO) qualifying record per rowid" over sorted
arrays, i.e. a few numpy ops per block, never a Python loop per row.
"""

from __future__ import annotations

import enum
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

_EMPTY_I64 = np.empty(0, dtype=np.int64)


class MutationKind(enum.IntEnum):
    UPDATE = 1
    DELETE = 2
    REINSERT = 3


class DeltaType(enum.Enum):
    REDO = "redo"
    UNDO = "undo"


class DeltaBatch:
    """Columnar delta records; see the module docstring. Immutable by convention."""

    __slots__ = ("rowid", "ts", "seq", "kind", "columns")

    def __init__(self, rowid: np.ndarray, ts: np.ndarray, seq: np.ndarray, kind: np.ndarray,
                 columns: dict[int, tuple[np.ndarray, pa.Array]] | None = None):
        self.rowid = rowid
        self.ts = ts
        self.seq = seq
        self.kind = kind
        self.columns = columns or {}

    # -- construction ------------------------------------------------------------------
    @staticmethod
    def empty() -> "DeltaBatch":
        return DeltaBatch(_EMPTY_I64, _EMPTY_I64, _EMPTY_I64, np.empty(0, dtype=np.int8))

    @staticmethod
    def uniform(rowids: np.ndarray, ts: int, seq: int, kind: MutationKind,
                values: dict[int, pa.Array] | None = None) -> "DeltaBatch":
        """Records of one op and one kind; `values` set columns for every record."""
        n = len(rowids)
        cols = {}
        for cid, arr in (values or {}).items():
            cols[cid] = (np.ones(n, dtype=bool), arr)
        return DeltaBatch(np.asarray(rowids, dtype=np.int64), np.full(n, ts, dtype=np.int64),
                          np.full(n, seq, dtype=np.int64), np.full(n, int(kind), dtype=np.int8),
                          cols)

    def __len__(self) -> int:
        return len(self.rowid)

    @property
    def nbytes(self) -> int:
        n = 25 * len(self.rowid)
        for mask, values in self.columns.values():
            n += len(mask) + values.nbytes
        return n

    def take(self, idx: np.ndarray) -> "DeltaBatch":
        cols = {}
        pidx = pa.array(idx, type=pa.int64())
        for cid, (mask, values) in self.columns.items():
            m = mask[idx]
            if m.any():
                cols[cid] = (m, values.take(pidx))
        return DeltaBatch(self.rowid[idx], self.ts[idx], self.seq[idx], self.kind[idx], cols)

    def slice_rows(self, lo: int, hi: int) -> "DeltaBatch":
        """Records for rowids in [lo, hi) (requires sorted order)."""
        a = int(self.rowid.searchsorted(lo))     # the method: np.searchsorted's wrapper
        b = int(self.rowid.searchsorted(hi))     # costs more than the search (lookups)
        if a == 0 and b == len(self.rowid):
            return self
        cols = {}
        for cid, (mask, values) in self.columns.items():
            m = mask[a:b]
            if m.any():
                cols[cid] = (m, values.slice(a, b - a))
        return DeltaBatch(self.rowid[a:b], self.ts[a:b], self.seq[a:b], self.kind[a:b], cols)

    def select(self, keep: np.ndarray) -> "DeltaBatch":
        if keep.all():
            return self
        return self.take(np.flatnonzero(keep))

    def sorted(self) -> "DeltaBatch":
        if len(self.rowid) <= 1:
            return self
        order = np.lexsort((self.seq, self.ts, self.rowid))
        if np.array_equal(order, np.arange(len(order))):
            return self
        return self.take(order)

    @staticmethod
    def concat(batches: Iterable["DeltaBatch"], sort: bool = True) -> "DeltaBatch":
        batches = [b for b in batches if len(b)]
        if not batches:
            return DeltaBatch.empty()
        if len(batches) == 1:
            return batches[0].sorted() if sort else batches[0]
        all_cids = sorted({cid for b in batches for cid in b.columns})
        cols = {}
        for cid in all_cids:
            masks, values = [], []
            typ = next(b.columns[cid][1].type for b in batches if cid in b.columns)
            for b in batches:
                if cid in b.columns:
                    m, v = b.columns[cid]
                else:
                    m, v = np.zeros(len(b), dtype=bool), pa.nulls(len(b), type=typ)
                masks.append(m)
                values.append(v)
            cols[cid] = (np.concatenate(masks), pa.concat_arrays(values))
        out = DeltaBatch(np.concatenate([b.rowid for b in batches]),
                         np.concatenate([b.ts for b in batches]),
                         np.concatenate([b.seq for b in batches]),
                         np.concatenate([b.kind for b in batches]), cols)
        return out.sorted() if sort else out

    def min_ts(self) -> int:
        return int(self.ts.min()) if len(self.ts) else 0

    def max_ts(self) -> int:
        return int(self.ts.max()) if len(self.ts) else 0

    def to_records(self) -> list[tuple]:
        """The records as plain tuples (rowid, ts, seq, kind, {col_id: physical value} of
        the columns each sets, None when it sets none): the row-record form of
        deltamemstore.py, for a point lookup's few records."""
        vals: list[dict | None] = [None] * len(self.rowid)
        for cid, (mask, values) in self.columns.items():
            py = values.to_pylist()
            for i in np.flatnonzero(mask).tolist():   # a row's few records (lookup)
                d = vals[i]
                if d is None:
                    d = vals[i] = {}
                d[cid] = py[i]
        return list(zip(self.rowid.tolist(), self.ts.tolist(), self.seq.tolist(),
                        self.kind.tolist(), vals))

    def remap_rowids(self, mapping: np.ndarray) -> "DeltaBatch":
        """Rowids replaced by mapping[rowid] (used when a MemRowSet becomes DiskRowSets)."""
        return DeltaBatch(mapping[self.rowid], self.ts, self.seq, self.kind, self.columns)

    def drop_columns(self, keep_ids: set[int]) -> "DeltaBatch":
        cols = {c: v for c, v in self.columns.items() if c in keep_ids}
        return DeltaBatch(self.rowid, self.ts, self.seq, self.kind, cols)


def pick_run_ends(rowid: np.ndarray, take_last: bool) -> np.ndarray:
    """Indices of the last (or first) record of each run of equal rowids (sorted input)."""
    n = len(rowid)
    if n == 0:
        return _EMPTY_I64
    if take_last:
        ends = np.flatnonzero(rowid[1:] != rowid[:-1])
        return np.append(ends, n - 1)
    starts = np.flatnonzero(rowid[1:] != rowid[:-1]) + 1
    return np.insert(starts, 0, 0)


class Resolution:
    """The outcome of applying deltas to a block [start, start + n) of base rows.

    live:    int8 per row: -1 = unchanged, 0 = not live, 1 = live
    patches: col_id -> (row positions within the block, values) of cells to overwrite
    """

    __slots__ = ("live", "patches")

    def __init__(self, live: np.ndarray | None, patches: dict[int, tuple[np.ndarray, pa.Array]]):
        self.live = live
        self.patches = patches

    def apply_live(self, base_live: np.ndarray) -> np.ndarray:
        if self.live is None:
            return base_live
        return np.where(self.live >= 0, self.live == 1, base_live)


def resolve(recs: DeltaBatch, start: int, n: int, take_last: bool,
            col_ids: Sequence[int] | None) -> Resolution:
    """Reduce applicable, sorted records for rows [start, start+n) to per-row outcomes.

    take_last=True for REDO (oldest first), False for UNDO (newest first; oldest wins).
    col_ids restricts which column patches are computed (None = all).
    """
    live = None
    liv = np.flatnonzero(recs.kind != MutationKind.UPDATE)
    if len(liv):
        sel = liv[pick_run_ends(recs.rowid[liv], take_last)]
        live = np.full(n, -1, dtype=np.int8)
        live[recs.rowid[sel] - start] = (recs.kind[sel] == MutationKind.REINSERT)
    patches = {}
    for cid, (mask, values) in recs.columns.items():
        if col_ids is not None and cid not in col_ids:
            continue
        idx = np.flatnonzero(mask)
        if not len(idx):
            continue
        sel = idx[pick_run_ends(recs.rowid[idx], take_last)]
        patches[cid] = (recs.rowid[sel] - start, values.take(pa.array(sel, type=pa.int64())))
    return Resolution(live, patches)


def patch_array(base: pa.Array, positions: np.ndarray, values: pa.Array) -> pa.Array:
    """base with base[positions[i]] = values[i] (vectorised via one take)."""
    if not len(positions):
        return base
    n = len(base)
    if values.type != base.type:
        values = values.cast(base.type)
    idx = np.arange(n, dtype=np.int64)
    idx[positions] = n + np.arange(len(positions), dtype=np.int64)
    return pa.concat_arrays([base, values]).take(pa.array(idx))


def patch_gathered(gathered: pa.Array, sel: np.ndarray, positions: np.ndarray,
                   values: pa.Array) -> pa.Array:
    """Like patch_array, for an array holding only the block rows listed in sorted `sel`."""
    if not len(positions) or not len(sel):
        return gathered
    where = np.searchsorted(sel, positions)
    where_c = np.minimum(where, len(sel) - 1)
    hit = sel[where_c] == positions
    if not hit.any():
        return gathered
    return patch_array(gathered, where_c[hit], values.filter(pa.array(hit)))
