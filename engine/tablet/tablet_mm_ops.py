"""The tablet's maintenance ops: flushes, compactions and history GC (Kudu's tablet_mm_ops).

`TabletMaintenance` is the half of `Tablet` that tidies storage; `Tablet` inherits it, so
every op is a method of the tablet (`t.flush_mrs()`) and `maintenance_ops()` offers them,
scored, to the MaintenanceManager (maintenance_manager.py), which runs the best one:

    op                     method                 what it does
    FlushMRS               flush_mrs              MemRowSet -> DiskRowSets (+ UNDO files)
    FlushDMS               flush_dms              every DeltaMemStore -> a REDO DeltaFile
    MinorDeltaCompaction   minor_delta_compact    a rowset's REDO files -> one REDO file
    MajorDeltaCompaction   major_delta_compact    a rowset's REDOs folded into its base
                                                  columns, old values kept as UNDOs
    MergingCompaction      compact_rowsets        overlapping DiskRowSets merged by key
    UndoDeltaBlockGC       gc_undo_deltas         UNDO files older than the history mark

Flush (`flush_mrs`), as in Kudu's flush with its "duplicating" phase made simple:
  1. under the write lock: freeze the MRS and swap in a new empty one; take the flush
     snapshot (every op so far has committed);
  2. without the lock: sort the frozen rows by key, fold histories into base + UNDO
     (`compaction.fold_history`), write DiskRowSets rolled at `drs_target_bytes`;
     meanwhile writers may still UPDATE/DELETE rows of the frozen MRS;
  3. under the write lock: re-apply the frozen MRS's mutations newer than the flush
     snapshot to the new DiskRowSets' DeltaMemStores (rowids translated), then swap the
     frozen MRS for the DiskRowSets and persist tablet metadata atomically.

Merging compaction (`compact_rowsets`) follows the same three steps over DiskRowSets; delta
compactions and UNDO GC work inside one rowset (delta_compaction.py) and only swap its
stores. Every op ends with the durable swap of tablet_metadata.py: new files first, then the
metadata naming them, then the old files are deleted (`_after_rowset_change`).

Locks: flushes, merging compactions and `alter_schema` hold the tablet's `_flush_lock`
(so they never overlap, and ALTER sees no flush half done); a rowset's `compact_lock`
keeps two compactions off one rowset. Writers wait only for the short swaps under the
write lock; readers never wait (they captured the components before the swap).

History: `history_gc_mark` is how far back compactions and GC may drop history — the
ancient history mark, but never past the oldest op the WAL may still replay, because
replay decides what each op saw from the rowsets' history (tablet_bootstrap.py).

The host contract (what these methods use of `Tablet`): `path`, `config`, `schema`,
`cache`, `log`, `mvcc`, the locks `_write_lock` and `_flush_lock`, `_components`,
`_last_ts`, `_next_rowset_id`, `_mrs_flushed_index`, `_key_ids`, `_non_key`, and the
methods `_new_mrs`, `_persist_metadata`, `anchor_index`, `ancient_history_mark`,
`memory_bytes`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from engine.key_encoding import binary_to_fixed
from engine.tablet.compaction import fold_history, merge_histories, unfold_history
from engine.tablet.compaction_policy import (
    CompactionPolicyConfig,
    RowSetInfo,
    select_rowsets_to_compact,
)
from engine.tablet.delta import DeltaBatch
from engine.tablet.diskrowset import (
    KEY_COLUMN,
    DiskRowSet,
    delete_obsolete,
    write_diskrowset,
)
from engine.tablet.maintenance_manager import MaintenanceOp
from engine.tablet.memrowset import MemRowSet
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.tablet_metadata import TabletComponents, rowset_dir, rowset_tree


class TabletMaintenance:
    """The maintenance ops of a Tablet (mixed into `Tablet`; see the module docstring)."""

    # -- the maintenance manager's view -------------------------------------------------
    def maintenance_ops(self) -> list:
        """Candidate maintenance ops with scores (see maintenance_manager.py)."""
        cfg = self.config
        comps = self._components
        ops = []
        pressure = self.memory_bytes() / max(cfg.memory_limit_bytes, 1)
        under_pressure = pressure >= cfg.memory_soft_fraction
        log_boost = self.log.size_bytes() / (64 * (1 << 20))

        def flush_score(due: float, bias: float) -> float:
            """Memory pressure first, then WAL retention, then the store's own size/age;
            `bias` keeps an MRS flush ahead of a DMS flush at equal urgency."""
            if under_pressure:
                return 99 + bias + 10 * pressure
            if log_boost >= 1:
                return 39 + bias + log_boost
            return 29 + bias + due if due >= 1 else 0.0

        mrs = comps.mrs
        if not mrs.empty():
            due = max(mrs.nbytes / cfg.mrs_flush_bytes, mrs.age_s() / cfg.mrs_flush_age_s)
            ops.append(MaintenanceOp("FlushMRS", flush_score(due, 1), self.flush_mrs))
        dms_bytes = sum(d.dms.nbytes for d in comps.drss)
        if dms_bytes:
            oldest = max(d.dms_age_s() for d in comps.drss)
            due = max(dms_bytes / cfg.dms_flush_bytes, oldest / cfg.dms_flush_age_s)
            ops.append(MaintenanceOp("FlushDMS", flush_score(due, 0), self.flush_dms))
        ahm = self.history_gc_mark()
        for d in comps.drss:
            ratio = d.redo_file_records() / max(d.num_rows, 1)
            if ratio >= cfg.major_compact_min_ratio:
                ops.append(MaintenanceOp("MajorDeltaCompaction", 10 + ratio,
                                         lambda d=d: self.major_delta_compact(d)))
            elif d.redo_file_count() >= cfg.minor_compact_min_files:
                ops.append(MaintenanceOp("MinorDeltaCompaction",
                                         5 + d.redo_file_count() / cfg.minor_compact_min_files,
                                         lambda d=d: self.minor_delta_compact(d)))
            gc = d.undo_gc_candidates(ahm)
            if gc:
                ops.append(MaintenanceOp("UndoDeltaBlockGC",
                                         1 + sum(f.count for f in gc) / 1e6,
                                         self.gc_undo_deltas))
        pick = self.pick_compaction()
        if pick:
            ids, score = pick
            ops.append(MaintenanceOp("MergingCompaction", 2 + 10 * score,
                                     lambda ids=ids: self.compact_rowsets(ids)))
        return ops

    def pick_compaction(self) -> tuple[list[int], float] | None:
        """Rowsets the budgeted knapsack policy would merge, with its score."""
        drss = self._components.drss
        if len(drss) < 2:
            return None
        infos = [RowSetInfo(d.id, d.base_bytes, d.min_key, d.max_key) for d in drss
                 if not d.compact_lock.locked()]
        sel = select_rowsets_to_compact(infos, CompactionPolicyConfig(
            budget_bytes=self.config.compaction_budget_bytes,
            target_rowset_bytes=self.config.drs_target_bytes))
        if not sel.ids:
            return None
        return list(sel.ids), sel.score

    # -- delta compactions and history GC ---------------------------------------------
    def _after_rowset_change(self) -> None:
        """Persist metadata naming the new files, then delete the files it no longer names
        (in that order: a crash between the two leaves only garbage, never a hole)."""
        with self._write_lock:
            self._persist_metadata()
        for d in self._components.drss:
            delete_obsolete(d)

    def minor_delta_compact(self, drs: DiskRowSet) -> int:
        n = drs.minor_delta_compact()
        if n:
            self._after_rowset_change()
        return n

    def major_delta_compact(self, drs: DiskRowSet) -> int:
        n = drs.major_delta_compact(self.history_gc_mark())
        if n:
            self._after_rowset_change()
        return n

    def gc_undo_deltas(self) -> int:
        """UndoDeltaBlockGC over every rowset; returns UNDO records dropped."""
        ahm = self.history_gc_mark()
        n = sum(d.gc_undo(ahm) for d in self._components.drss)
        if n:
            self._after_rowset_change()
        return n

    def compact_rowsets(self, ids: Sequence[int]) -> int:
        """Merging compaction of the DiskRowSets with these ids (Kudu's CompactRowSetsOp).

        The inputs' DMSs are flushed first (so every op up to index G is in their files),
        then their rows are merged by key — ghost versions of a key become one row whose
        history is all of theirs — rows deleted at or before the ancient history mark are
        dropped, histories are folded again into base + UNDO, and new rowsets are written
        with flushed_index G. Mutations that arrived meanwhile (ops after G, in the inputs'
        new DMSs) are moved to the outputs under the write lock, then the rowsets swap.
        Returns the number of input rows.
        """
        with self._flush_lock:
            comps = self._components
            inputs = [d for d in comps.drss if d.id in set(ids)]
            if len(inputs) < 2:
                return 0
            locked = []
            try:
                for d in inputs:
                    if not d.compact_lock.acquire(blocking=False):
                        return 0
                    locked.append(d)
                with self._write_lock:
                    pending = [(d, d.begin_dms_flush()) for d in inputs]
                    index, ts = self.log.last_index, self._last_ts
                self.mvcc.wait_for_safe(ts)
                for d, old in pending:
                    if old is not None:
                        d.finish_dms_flush(old, self.config.fsync, index)
                ahm = self.history_gc_mark()
                keys_l, ts_l, seq_l, fwd_l = [], [], [], []
                vals_l = {c.id: [] for c in self.schema.columns}
                offset = 0
                offsets = []
                for d in inputs:
                    st = d.capture()
                    n = d.num_rows
                    keys_l.append(binary_to_fixed(d.read_base_column(KEY_COLUMN)))
                    base = {c.id: d.read_column(c, st.readers) for c in self.schema.columns}
                    undo = DeltaBatch.concat([f.records() for f in st.undo])
                    redo = DeltaBatch.concat([f.records() for f in st.redo])
                    its, iseq, ivals, fwd = unfold_history(n, base, undo, redo, self._non_key)
                    ts_l.append(its)
                    seq_l.append(iseq)
                    for c in self.schema.columns:
                        vals_l[c.id].append(ivals[c.id] if c.id in ivals else base[c.id])
                    fwd_l.append(_shift(fwd, -offset))
                    offsets.append(offset)
                    offset += n
                keys = np.concatenate(keys_l)
                values = {cid: pa.concat_arrays(v) for cid, v in vals_l.items()}
                out_keys, out_of, base, out_ts, out_seq, merged, firsts = merge_histories(
                    keys, np.concatenate(ts_l), np.concatenate(seq_l), values,
                    DeltaBatch.concat(fwd_l), ahm, self._non_key)
                new_base, undo, kept = fold_history(len(out_keys), base, out_ts, merged,
                                                    self._non_key, insert_seq=out_seq)
                if len(undo):
                    undo = undo.select(undo.ts > ahm)
                pf = pa.array(firsts)
                arrays = [values[c.id].take(pf) if c.id in self._key_ids else new_base[c.id]
                          for c in self.schema.columns]
                full = pa.Table.from_arrays(arrays, schema=pa.schema(
                    [pa.field(c.name, c.physical_type) for c in self.schema.columns]))
                outputs, drs_of, local = self._write_rowsets(out_keys, full, undo, kept, index) \
                    if len(out_keys) else ([], np.empty(0, np.int64), np.empty(0, np.int64))
                with self._write_lock:
                    for d, off in zip(inputs, offsets):
                        late = DeltaBatch.concat([m.view() for m in d.capture().dmss])
                        if not len(late):
                            continue
                        rows = out_of[late.rowid + off]
                        late = late.select(rows >= 0)
                        rows = rows[rows >= 0]
                        for j in np.unique(drs_of[rows]):
                            part = late.select(drs_of[rows] == j)
                            outputs[int(j)].mutate(part.remap_rowids(
                                np.where(drs_of == j, local, -1)[out_of[np.arange(
                                    d.num_rows) + off]]).sorted())
                    comps = self._components
                    drss = [x for x in comps.drss if x not in inputs] + outputs
                    self._components = TabletComponents(comps.mrs, comps.frozen,
                                                        rowset_tree(drss), comps.schema)
                    self._persist_metadata()
                for d in inputs:
                    d.delete_files()
                return offset
            finally:
                for d in locked:
                    d.compact_lock.release()

    def compact_deltas(self) -> int:
        """Major-compact every rowset with REDO files (tests and benchmarks)."""
        return sum(self.major_delta_compact(d) for d in self._components.drss)


    # -- maintenance -------------------------------------------------------------------
    def flush_mrs(self) -> int:
        """Flush the MemRowSet to DiskRowSets; returns the number of rows flushed."""
        with self._flush_lock:
            with self._write_lock:
                comps = self._components
                old = comps.mrs
                if old.empty():
                    return 0
                old.frozen = True
                self._components = TabletComponents(self._new_mrs(), comps.frozen + (old,),
                                                    comps.tree, comps.schema)
                # Ops up to `flush_index` (timestamps <= flush_ts) have applied to `old`;
                # later ops insert into the new MRS and their mutations of old rows are
                # caught up below.
                flush_index, flush_ts = self.log.last_index, self._last_ts
            self.mvcc.wait_for_safe(flush_ts)
            snap = MvccSnapshot.at(flush_ts)
            new_drss, remap = self._write_flush(old, snap, flush_index)
            with self._write_lock:
                self._catch_up(old, snap, remap, new_drss)
                comps = self._components
                self._components = TabletComponents(
                    comps.mrs, tuple(f for f in comps.frozen if f is not old),
                    rowset_tree(list(comps.drss) + new_drss), comps.schema)
                self._mrs_flushed_index = max(self._mrs_flushed_index, flush_index)
                self._persist_metadata()
            return len(old)

    def _write_flush(self, mrs: MemRowSet, snap: MvccSnapshot, flush_index: int
                     ) -> tuple[list[DiskRowSet], tuple[np.ndarray, np.ndarray]]:
        # An MRS always has the tablet's schema: alter_schema flushes every MRS first, and
        # it cannot run while a flush does (both hold _flush_lock).
        assert mrs.schema is self.schema
        n, insert_ts, redo = mrs.capture()
        keys, order = mrs.sorted_rowids()
        data = mrs.table(n).take(pa.array(order))
        inv = np.empty(n, dtype=np.int64)
        inv[order] = np.arange(n, dtype=np.int64)
        committed = redo.select(snap.is_committed_array(redo.ts)) if len(redo) else redo
        redo_out = committed.remap_rowids(inv).sorted() if len(committed) else committed
        base = {c.id: data.column(c.name).combine_chunks() for c in self._non_key}
        new_base, undo, kept = fold_history(n, base, insert_ts[order], redo_out, self._non_key,
                                            insert_seq=mrs.insert_seqs(n)[order])
        arrays = [data.column(c.name).combine_chunks() if c.id in self._key_ids
                  else new_base[c.id] for c in self.schema.columns]
        full = pa.Table.from_arrays(arrays, schema=data.schema)
        new_drss, drs_of, local = self._write_rowsets(keys, full, undo, kept, flush_index)
        # mrs rowid -> (new drs index, rowid in it)
        return new_drss, (drs_of[inv], local[inv])

    def _write_rowsets(self, keys: np.ndarray, full: pa.Table, undo: DeltaBatch,
                       kept: DeltaBatch, flushed_index: int
                       ) -> tuple[list[DiskRowSet], np.ndarray, np.ndarray]:
        """Write key-sorted rows as DiskRowSets rolled every drs_target_bytes (in-memory
        size as the estimate); returns them and each row's (rowset index, rowid)."""
        n = full.num_rows
        per_row = max(full.nbytes / max(n, 1), 1)
        rows_per = max(int(self.config.drs_target_bytes // per_row), self.config.page_rows)
        drs_of = np.empty(n, dtype=np.int64)
        local = np.empty(n, dtype=np.int64)
        new_drss = []
        for j, a in enumerate(range(0, n, rows_per)):
            b = min(a + rows_per, n)
            self._next_rowset_id += 1
            rid = self._next_rowset_id
            d = rowset_dir(self.path, rid)
            meta = write_diskrowset(d, rid, self.schema, full.slice(a, b - a), keys[a:b],
                                    _shift(undo.slice_rows(a, b), a),
                                    _shift(kept.slice_rows(a, b), a), self.config,
                                    flushed_index)
            new_drss.append(DiskRowSet(d, self.schema, meta, self.cache, self.config))
            drs_of[a:b] = j
            local[a:b] = np.arange(b - a)
        return new_drss, drs_of, local

    def _catch_up(self, mrs: MemRowSet, snap: MvccSnapshot,
                  remap: tuple[np.ndarray, np.ndarray], new_drss: list[DiskRowSet]) -> None:
        """Move mutations of the frozen MRS made after the flush snapshot to the new DMSs."""
        _, _, redo = mrs.capture()
        if not len(redo):
            return
        late = redo.select(~snap.is_committed_array(redo.ts))
        if not len(late):
            return
        drs_of, local = remap
        target = drs_of[late.rowid]
        for j in np.unique(target):
            part = late.select(target == j)
            new_drss[int(j)].mutate(part.remap_rowids(local).sorted())

    def flush_dms(self) -> int:
        """Flush every DeltaMemStore to a REDO DeltaFile; returns records flushed."""
        with self._flush_lock:
            with self._write_lock:
                pending = [(d, d.begin_dms_flush()) for d in self._components.drss]
                index, ts = self.log.last_index, self._last_ts
            self.mvcc.wait_for_safe(ts)
            total = 0
            for d, old in pending:
                if old is not None:
                    total += len(old)
                    d.finish_dms_flush(old, self.config.fsync, index)
            if total:
                with self._write_lock:
                    self._persist_metadata()
            return total


    # -- history ----------------------------------------------------------------------
    def history_gc_mark(self) -> int:
        """History at or before this may be dropped by compactions and UNDO GC.

        The ancient history mark, but never past the oldest op the WAL may still replay:
        replay decides what each op saw from the rowsets' history (see `RowOps.locate`), so that
        history must outlive the log entries that need it.
        """
        anchor_ts = self.log.ts_at_or_before(self.anchor_index())
        ahm = self.ancient_history_mark()
        return ahm if anchor_ts is None else min(ahm, anchor_ts - 1)



def _shift(batch: DeltaBatch, offset: int) -> DeltaBatch:
    if not len(batch) or offset == 0:
        return batch
    return DeltaBatch(batch.rowid - offset, batch.ts, batch.seq, batch.kind, batch.columns)


