"""Ordered tablet scans (Kudu's OrderMode ORDERED): rows in primary-key order, resumable
after a key. `Tablet.open_scan(..., order_mode=OrderMode.ORDERED)` prepares the scan (MVCC
snapshot, captured rowsets, bounds) exactly as the unordered one does and hands the
captured sources to `ordered_batches` here.

Kudu's fault-tolerant scanner (ReadMode READ_AT_SNAPSHOT + OrderMode ORDERED) returns a
tablet's rows sorted by primary key, so a client that loses its tablet server mid-scan can
open the same scan on another replica at the same snapshot with the last key it received as
an exclusive lower bound: no row is lost and none repeated, although the replicas' files
differ (every replica flushes and compacts on its own, so a position inside a rowset means
nothing elsewhere; a key does).

An unordered scan reads the MemRowSets in insert order, then each DiskRowSet; the ordered
one reads the same components at the same MVCC snapshot, one source per rowset, and
merges them by key:

- every DiskRowSet is stored in key order: its blocks stream as they are read;
- the MemRowSets (the live one and any being flushed) are in insert order: their matching
  rows are collected (a MemRowSet is bounded by the flush threshold) and sorted once;
- the merge is vectorised: each round takes from every source the rows whose key is <= the
  smallest "last buffered key" among the sources (`np.searchsorted` on the sorted encoded
  keys), so the source that set that bound is used up and progress is guaranteed; the
  round's rows are ordered with one `argsort` (skipped when a single source contributes;
  `key_order` sorts the keys as 64-bit words, not as byte strings).
  At a snapshot a key is live in at most one rowset, so the merged keys are unique.

Keys are the engine's order-preserving encoding (`engine.key_encoding.encode_keys`, the
bytes the rowsets compare), so a resume key is understood by every replica. Each batch
goes out with its last key; `resume_after` (an encoded key) restarts strictly after it.
Key columns not in the projection are read for the ordering and dropped from the batches.
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine.key_encoding import encode_keys
from engine.schema import ColumnSchema
from engine.tablet.diskrowset import ScanStats
from engine.tablet.scan_spec import BoundPredicate

# the sorted MemRowSet rows are fed to the merge in slices of this many rows
MRS_SLICE_ROWS = 32_768


def ordered_batches(mrs_caps: list, drs_caps: list, snap, n_out: int,
                    scan_cols: Sequence[ColumnSchema], key_cols: Sequence[ColumnSchema],
                    bound: Sequence[BoundPredicate], out_schema: pa.Schema,
                    scan_schema: pa.Schema, lower: bytes | None, upper: bytes | None,
                    lazy: bool, resume_after: bytes | None, stats: ScanStats,
                    batch_rows: int | None,
                    to_batch: Callable[[dict, Sequence[ColumnSchema], pa.Schema],
                                       pa.RecordBatch]
                    ) -> Iterator[tuple[pa.RecordBatch, bytes]]:
    """(batch, its last encoded key) pairs in key order over captured MemRowSets
    (`mrs_caps`: (MemRowSet, capture)) and DiskRowSets (`drs_caps`) at `snap`. The first
    `n_out` of `scan_cols` are the projection (`out_schema`); the rest are key columns read
    for the order only. `lower` already includes `resume_after`; `batch_rows` caps the rows
    per batch (Kudu's scanner batch size); `to_batch` is the tablet's block-to-Arrow
    conversion."""
    after = None if resume_after is None else np.bytes_(resume_after)

    def keyed(blocks) -> Iterator[tuple[np.ndarray, pa.RecordBatch]]:
        for block in blocks:
            k = encode_keys([block[c.id] for c in key_cols], key_cols)
            b = to_batch(block, scan_cols, scan_schema)
            if after is not None:
                keep = k > after
                if not keep.all():
                    idx = np.flatnonzero(keep)
                    k, b = k[idx], b.take(pa.array(idx))
            if len(k):
                yield k, b

    def mem_source() -> Iterator[tuple[np.ndarray, pa.RecordBatch]]:
        parts = [kb for m, cap in mrs_caps
                 for kb in keyed(m.scan(scan_cols, bound, snap, lower, upper, stats, cap))]
        if not parts:
            return
        k = np.concatenate([p[0] for p in parts])
        b = pa.concat_batches([p[1] for p in parts])
        order = key_order(k)
        k, b = k[order], b.take(pa.array(order))
        for s in range(0, len(k), MRS_SLICE_ROWS):
            yield k[s:s + MRS_SLICE_ROWS], b.slice(s, MRS_SLICE_ROWS)

    def drs_source(d, cap) -> Iterator[tuple[np.ndarray, pa.RecordBatch]]:
        return keyed(d.scan(scan_cols, bound, snap, lower, upper, stats, lazy, cap))

    sources = [mem_source()] + [drs_source(d, cap) for d, cap in drs_caps]
    keep_idx = list(range(n_out))

    def out(k: np.ndarray, b: pa.RecordBatch) -> tuple[pa.RecordBatch, bytes]:
        if n_out:
            ob = b.select(keep_idx) if n_out < b.num_columns else b
            ob = pa.RecordBatch.from_arrays(ob.columns, schema=out_schema)
        else:  # count-only scan: rows without columns
            ob = pa.record_batch({"_": pa.nulls(b.num_rows)}).select([])
        return ob, bytes(k[-1])

    for k, b in merge_by_key(sources):
        if not batch_rows or len(k) <= batch_rows:
            yield out(k, b)
            continue
        for s in range(0, len(k), batch_rows):
            yield out(k[s:s + batch_rows], b.slice(s, batch_rows))


def merge_by_key(sources: list[Iterator[tuple[np.ndarray, pa.RecordBatch]]]
                 ) -> Iterator[tuple[np.ndarray, pa.RecordBatch]]:
    """Merge sources of (sorted encoded keys, rows) into one key-ordered stream (see the
    module docstring). Keys are unique across sources."""
    bufs: list[list] = []  # [keys, batch, iterator]
    for it in sources:
        first = next(it, None)
        if first is not None:
            bufs.append([first[0], first[1], it])
    while bufs:
        if len(bufs) == 1:  # one source left: stream it as it is
            k, b, it = bufs[0]
            yield k, b
            yield from it
            return
        bound = min(x[0][-1] for x in bufs)
        ks, bs = [], []
        for x in bufs:
            cut = int(np.searchsorted(x[0], bound, side="right"))
            if cut:
                ks.append(x[0][:cut])
                bs.append(x[1].slice(0, cut))
                x[0], x[1] = x[0][cut:], x[1].slice(cut)
        nxt = []
        for x in bufs:
            if not len(x[0]):
                more = next(x[2], None)
                if more is None:
                    continue
                x[0], x[1] = more
            nxt.append(x)
        bufs = nxt
        if len(ks) == 1:
            yield ks[0], bs[0]
        else:
            k = np.concatenate(ks)
            order = key_order(k)
            yield k[order], pa.concat_batches(bs).take(pa.array(order))


def key_order(keys: np.ndarray) -> np.ndarray:
    """`np.argsort` of encoded keys (an ``S<w>`` array), as integers: the NUL-padded bytes
    read as big-endian 64-bit words compare exactly as the byte strings do, and sorting
    words (one argsort, or a lexsort over the words of wider keys) is several times faster
    than comparing byte strings."""
    n, w = len(keys), keys.dtype.itemsize
    if n < 2 or w == 0:
        return np.arange(n)
    words = -(-w // 8)
    m = np.zeros((n, words * 8), dtype=np.uint8)
    m[:, :w] = np.frombuffer(np.ascontiguousarray(keys).tobytes(), dtype=np.uint8
                             ).reshape(n, w)
    u = m.view(">u8").astype(np.uint64)
    if words == 1:
        return np.argsort(u[:, 0])  # keys are unique: stability does not matter
    return np.lexsort(u.T[::-1])

