"""Delta compactions inside one DiskRowSet (Kudu's delta_compaction.cc), and UNDO GC.

A DiskRowSet's reads get slower as REDO files pile up (each is opened and merged per scan)
and its UNDO history grows without bound. Three maintenance ops keep both in check; the
tablet schedules them (tablet_mm_ops.py) and persists the result:

  MinorDeltaCompaction  REDO files -> one REDO file holding all their records (fewer files
                        to merge per read; nothing else changes).
  MajorDeltaCompaction  REDO records folded into the base data: the columns they change
                        are written as a new column file (`cols_NNNNNN.cf`, overriding
                        those columns of `base.cf`), the values they replace become UNDO
                        records, except those at or before the ancient history mark,
                        which no permitted read can need. A DELETE stays a REDO (the row's
                        base image is kept for reads before the delete). Only the current
                        schema's columns are folded: records of dropped columns go.
  DiskRowSet.gc_undo    UNDO files whose records are all at or before the ancient history
                        mark are dropped (Kudu's UndoDeltaBlockGC): no read at or after the
                        mark applies them, and reads before it are refused.

Invariants:
  - the DeltaMemStore is never touched: writes go on concurrently and stay in memory;
  - the result replaces the rowset's `DeltaStores` record in one assignment
    (`replace_stores`) under its `swap_lock`, so a reader sees the stores before or
    after, never a mix, and a scan that captured the old record finishes reading the old
    files;
  - a rowset's `compact_lock` is held for a whole compaction, so two never work on one
    rowset at once (a merging compaction takes it too);
  - files replaced are not deleted here but listed in `obsolete_files`: the tablet deletes
    them once its metadata no longer names them (the durable swap of tablet_metadata.py),
    so a crash in between leaves the old, complete state.

`MinorDeltaCompaction` and `MajorDeltaCompaction` are made for one rowset and run once
(`run()`); `DiskRowSet.minor_delta_compact()` / `major_delta_compact(ahm)` run them. What
they use of the rowset is its public interface, nothing private (a test holds that:
tests/engine/test_tablet_interfaces.py): `dir`, `config`, `schema`, `num_rows`,
`compact_lock`, `swap_lock`, `capture()` / `replace_stores(...)`, `write_delta(...)`,
`new_file(...)`, `add_column_file(...)`, `read_column(...)` and `obsolete_files`. UNDO GC
(`DiskRowSet.gc_undo`) is one swap of the rowset's stores and lives with them.
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


class MinorDeltaCompaction:
    """All REDO DeltaFiles of a rowset merged into one (fewer files to open and merge per
    read; nothing else changes)."""

    def __init__(self, drs) -> None:
        # `drs`: the DiskRowSet (not imported here: diskrowset.py imports this module)
        self.drs = drs

    def run(self) -> int:
        """Records merged (0: fewer than two REDO files)."""
        drs = self.drs
        with drs.compact_lock:
            inputs = drs.capture().redo
            if len(inputs) < 2:
                return 0
            merged = DeltaBatch.concat([f.records() for f in inputs])
            out = drs.write_delta(merged, DeltaType.REDO)
            with drs.swap_lock:
                st = drs.capture()
                rest = tuple(f for f in st.redo if f not in inputs)
                drs.replace_stores(st.replace(redo=(out,) + rest))
            drs.obsolete_files += [f.path for f in inputs]
            return len(merged)


class MajorDeltaCompaction:
    """REDO DeltaFiles of a rowset folded into its base data, turning them into UNDO
    records.

    Only the columns the REDOs change are rewritten (a new column file overrides them);
    the values they replace become UNDO records, except those at or before the ancient
    history mark `ahm`, which no permitted read can need. A DELETE stays a REDO (the row's
    base image is kept for reads before the delete). The DMS is not touched: writes
    continue concurrently and stay in memory.
    """

    def __init__(self, drs, ahm: int) -> None:
        self.drs, self.ahm = drs, ahm

    def run(self) -> int:
        """REDO records folded (0: no REDO files)."""
        drs, ahm = self.drs, self.ahm
        with drs.compact_lock:
            st = drs.capture()
            inputs = st.redo
            if not inputs:
                return 0
            recs = DeltaBatch.concat([f.records() for f in inputs])
            # Only the schema's columns: records of dropped columns are discarded here.
            cols = [c for c in drs.schema.columns if c.id in recs.columns]
            readers = st.readers
            base = {c.id: drs.read_column(c, readers) for c in cols}
            new_base, undo_new, kept = fold_history(drs.num_rows, base, None, recs, cols)
            if len(undo_new):
                undo_new = undo_new.select(undo_new.ts > ahm)
            col_file = None
            new_readers = dict(readers)
            if cols:
                name, path = drs.new_file("cols", "cf")
                w = CFileWriter(path, fsync=drs.config.fsync)
                try:
                    for c in cols:
                        w.add_column(f"c{c.id}", new_base[c.id], drs.config.page_rows,
                                     ENCODING_BY_NAME[c.encoding],
                                     COMPRESSION_BY_NAME.get(c.compression, Compression.NONE))
                    w.finish({"num_rows": drs.num_rows})
                except BaseException:
                    w.abort()
                    raise
                r = CFileReader(path)
                for c in cols:
                    new_readers[c.id] = r.columns[f"c{c.id}"]
                col_file = {"file": name, "columns": [c.id for c in cols]}
            undo_file = drs.write_delta(undo_new, DeltaType.UNDO)
            kept_file = drs.write_delta(kept, DeltaType.REDO)
            if drs.config.fsync:
                fsync_dir(drs.dir)
            with drs.swap_lock:
                st = drs.capture()
                rest = tuple(f for f in st.redo if f not in inputs)
                drs.replace_stores(DeltaStores(
                    st.undo + ((undo_file,) if undo_file else ()),
                    ((kept_file,) if kept_file else ()) + rest, st.dmss, new_readers))
                old_files = drs.add_column_file(col_file, new_readers)
            drs.obsolete_files += [f.path for f in inputs]
            drs.obsolete_files += [os.path.join(drs.dir, name) for name in old_files]
            return len(recs)
