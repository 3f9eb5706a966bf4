"""DeltaFile: an immutable on-disk store of REDO or UNDO records of one DiskRowSet.

A DeltaFile is a CFile whose columns are the DeltaBatch arrays, sorted by
(rowid, timestamp, seq):

    rowid   ts   seq   kind   c<id>      c<id>$set  ...   (one value/set pair per column
                                                           that any record changes)

so "only changed columns are stored", and a store of DELETEs only has no value columns.
The footer records the delta type, the record count and the min/max timestamp; a scanner
skips a whole file when its timestamp range cannot matter for its snapshot (for example all
UNDOs of a file whose newest timestamp is committed in a "latest" snapshot).

Records are loaded on first use and kept (deltas are small next to base data; the block cache
bounds the rest of the engine's memory).
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from engine.cfile.cfile import CFileReader, CFileWriter
from engine.cfile.encodings import Compression
from engine.tablet.delta import DeltaBatch, DeltaType


def write_delta_file(path: str, batch: DeltaBatch, dtype: DeltaType, page_rows: int,
                     fsync: bool = True) -> dict:
    """Write sorted records; returns the descriptor stored in rowset metadata."""
    w = CFileWriter(path, fsync=fsync)
    try:
        w.add_column("rowid", pa.array(batch.rowid, type=pa.int64()), page_rows)
        w.add_column("ts", pa.array(batch.ts, type=pa.int64()), page_rows)
        w.add_column("seq", pa.array(batch.seq, type=pa.int64()), page_rows)
        w.add_column("kind", pa.array(batch.kind, type=pa.int8()), page_rows)
        for cid, (mask, values) in sorted(batch.columns.items()):
            w.add_column(f"c{cid}", values, page_rows, compression=Compression.LZ4)
            w.add_column(f"c{cid}$set", pa.array(mask, type=pa.bool_()), page_rows)
        desc = {"type": dtype.value, "count": len(batch), "min_ts": batch.min_ts(),
                "max_ts": batch.max_ts(), "columns": sorted(batch.columns)}
        w.finish(desc)
    except BaseException:
        w.abort()
        raise
    return desc


class DeltaFile:
    def __init__(self, path: str, desc: dict):
        self.path = path
        self.type = DeltaType(desc["type"])
        self.count = desc["count"]
        self.min_ts = desc["min_ts"]
        self.max_ts = desc["max_ts"]
        self.column_ids = desc["columns"]
        self._batch: DeltaBatch | None = None
        self._lock = threading.Lock()
        # Mapped now, read later: once mapped, the records stay readable even after a
        # compaction or UNDO GC unlinks the file under a long-running scan.
        self._reader = CFileReader(path)

    def __len__(self) -> int:
        return self.count

    def records(self) -> DeltaBatch:
        b = self._batch
        if b is not None:
            return b
        with self._lock:
            if self._batch is None:
                self._batch = self._load()
            return self._batch

    def _load(self) -> DeltaBatch:
        r = self._reader

        def full(name: str) -> pa.Array:
            col = r.column(name)
            parts = [col.decode(p) for p in range(col.num_pages)]
            return pa.concat_arrays(parts) if parts else pa.array([], type=col.type)

        def np_full(name: str, dtype) -> np.ndarray:
            return np.asarray(full(name).to_numpy(zero_copy_only=False), dtype=dtype)

        cols = {}
        for cid in self.column_ids:
            cols[cid] = (np_full(f"c{cid}$set", bool), full(f"c{cid}"))
        return DeltaBatch(np_full("rowid", np.int64), np_full("ts", np.int64),
                          np_full("seq", np.int64), np_full("kind", np.int8), cols)

    @property
    def nbytes(self) -> int:
        return self._batch.nbytes if self._batch is not None else 0
