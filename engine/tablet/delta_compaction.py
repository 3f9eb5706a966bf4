"""Delta compactions and UNDO GC inside one DiskRowSet (Kudu's delta_compaction.cc).

A DiskRowSet's reads get slower as REDO files pile up (each is opened and merged per scan)
and its UNDO history grows without bound. Three maintenance ops keep both in check; the
tablet schedules them (tablet_mm_ops.py) and persists the result:

  minor_delta_compact   REDO files -> one REDO file holding all their records (fewer files
                        to merge per read; nothing else changes).
  major_delta_compact   REDO records folded into the base data: the columns they change
                        are written as a new column file (`cols_NNNNNN.cf`, overriding
                        those columns of `base.cf`), the values they replace become UNDO
                        records, except those at or before the ancient history mark,
                        which no permitted read can need. A DELETE stays a REDO (the row's
                        base image is kept for reads before the delete). Only the current
                        schema's columns are folded: records of dropped columns go.
  gc_undo               UNDO files whose records are all at or before the ancient history
                        mark are dropped (Kudu's UndoDeltaBlockGC): no read at or after the
                        mark applies them, and reads before it are refused.

Invariants:
  - the DeltaMemStore is never touched: writes go on concurrently and stay in memory;
  - the result replaces the rowset's `DeltaStores` record (`_stores`) in one assignment
    under its `_swap_lock`, so a reader sees the stores before or after, never a mix, and
    a scan that captured the old record finishes reading the old files;
  - a rowset's `compact_lock` is held for a whole compaction, so two never work on one
    rowset at once (a merging compaction takes it too);
  - files replaced are not deleted here but listed in `obsolete_files`: the tablet deletes
    them once its metadata no longer names them (the durable swap of tablet_metadata.py),
    so a crash in between leaves the old, complete state.

`DeltaCompactions` is mixed into `DiskRowSet`; what it uses of its host: `dir`, `config`,
`schema`, `num_rows`, `_stores`, `_swap_lock`, `compact_lock`, `_file_seq`, `_col_files`,
`obsolete_files` and `read_column`.
"""

from __future__ import annotations

import os

from engine.cfile.cfile import (
    COMPRESSION_BY_NAME,
    ENCODING_BY_NAME,
    CFileReader,
    CFileWriter,
    fsync_dir,
)
from engine.cfile.encodings import Compression
from engine.tablet.compaction import fold_history
from engine.tablet.delta import DeltaBatch, DeltaType
from engine.tablet.delta_stores import DeltaStores
from engine.tablet.deltafile import DeltaFile, write_delta_file


class DeltaCompactions:
    """Delta compactions and UNDO GC of a DiskRowSet (see the module docstring)."""

    def redo_file_count(self) -> int:
        return len(self._stores.redo)

    def redo_file_records(self) -> int:
        return sum(len(f) for f in self._stores.redo)

    def undo_gc_candidates(self, ahm: int) -> list[DeltaFile]:
        """UNDO files all of whose records are at or before the ancient history mark."""
        return [f for f in self._stores.undo if f.max_ts <= ahm]

    def _next_file(self, prefix: str, ext: str) -> tuple[str, str]:
        self._file_seq += 1
        name = f"{prefix}_{self._file_seq:06d}.{ext}"
        return name, os.path.join(self.dir, name)

    def _write_delta(self, batch: DeltaBatch, dtype: DeltaType) -> DeltaFile | None:
        if not len(batch):
            return None
        name, path = self._next_file(dtype.value, "df")
        desc = write_delta_file(path, batch, dtype, self.config.page_rows, self.config.fsync)
        desc["file"] = name
        return DeltaFile(path, desc)

    def gc_undo(self, ahm: int) -> int:
        """UndoDeltaBlockGC: drop UNDO files older than the ancient history mark. No read
        at or after the mark applies them, and reads before it are refused."""
        with self._swap_lock:
            st = self._stores
            dead = [f for f in st.undo if f.max_ts <= ahm]
            if not dead:
                return 0
            self._stores = st.replace(undo=tuple(f for f in st.undo if f not in dead))
        self.obsolete_files += [f.path for f in dead]
        return sum(f.count for f in dead)

    def minor_delta_compact(self) -> int:
        """Merge all REDO DeltaFiles into one (fewer files to open and merge per read)."""
        with self.compact_lock:
            inputs = self._stores.redo
            if len(inputs) < 2:
                return 0
            merged = DeltaBatch.concat([f.records() for f in inputs])
            out = self._write_delta(merged, DeltaType.REDO)
            with self._swap_lock:
                st = self._stores
                rest = tuple(f for f in st.redo if f not in inputs)
                self._stores = st.replace(redo=(out,) + rest)
            self.obsolete_files += [f.path for f in inputs]
            return len(merged)

    def major_delta_compact(self, ahm: int) -> int:
        """Fold REDO DeltaFiles into base data, turning them into UNDO records.

        Only the columns the REDOs change are rewritten (a new column file overrides them);
        the values they replace become UNDO records, except those at or before the ancient
        history mark, which no permitted read can need. A DELETE stays a REDO (the row's
        base image is kept for reads before the delete). The DMS is not touched: writes
        continue concurrently and stay in memory.
        """
        with self.compact_lock:
            st = self._stores
            inputs = st.redo
            if not inputs:
                return 0
            recs = DeltaBatch.concat([f.records() for f in inputs])
            # Only the schema's columns: records of dropped columns are discarded here.
            cols = [c for c in self.schema.columns if c.id in recs.columns]
            readers = st.readers
            base = {c.id: self.read_column(c, readers) for c in cols}
            new_base, undo_new, kept = fold_history(self.num_rows, base, None, recs, cols)
            if len(undo_new):
                undo_new = undo_new.select(undo_new.ts > ahm)
            col_file = None
            new_readers = dict(readers)
            if cols:
                name, path = self._next_file("cols", "cf")
                w = CFileWriter(path, fsync=self.config.fsync)
                try:
                    for c in cols:
                        w.add_column(f"c{c.id}", new_base[c.id], self.config.page_rows,
                                     ENCODING_BY_NAME[c.encoding],
                                     COMPRESSION_BY_NAME.get(c.compression, Compression.NONE))
                    w.finish({"num_rows": self.num_rows})
                except BaseException:
                    w.abort()
                    raise
                r = CFileReader(path)
                for c in cols:
                    new_readers[c.id] = r.columns[f"c{c.id}"]
                col_file = {"file": name, "columns": [c.id for c in cols]}
            undo_file = self._write_delta(undo_new, DeltaType.UNDO)
            kept_file = self._write_delta(kept, DeltaType.REDO)
            if self.config.fsync:
                fsync_dir(self.dir)
            with self._swap_lock:
                st = self._stores
                rest = tuple(f for f in st.redo if f not in inputs)
                self._stores = DeltaStores(st.undo + ((undo_file,) if undo_file else ()),
                                           ((kept_file,) if kept_file else ()) + rest, st.dmss,
                                           new_readers)
                if col_file:
                    self._col_files.append(col_file)
                old_files = self._drop_superseded_col_files(new_readers)
            self.obsolete_files += [f.path for f in inputs]
            self.obsolete_files += [os.path.join(self.dir, name) for name in old_files]
            return len(recs)

    def _drop_superseded_col_files(self, readers: dict) -> list[str]:
        """Column files (other than base.cf) no column reads from any more."""
        used = {os.path.basename(r_path) for r_path in
                (getattr(r, "path", "") for r in readers.values())}
        gone = [cf["file"] for cf in self._col_files
                if cf["file"] != "base.cf" and cf["file"] not in used]
        self._col_files = [cf for cf in self._col_files if cf["file"] not in gone]
        return gone
