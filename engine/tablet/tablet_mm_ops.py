"""The tablet's maintenance ops: flushes, compactions and history GC (Kudu's tablet_mm_ops).

One class per op, as in Kudu (FlushMRSOp, FlushDeltaMemStoresOp, CompactRowSetsOp,
MinorDeltaCompactionOp, MajorDeltaCompactionOp, UndoDeltaBlockGCOp). An op is made for one
tablet (and, for a delta compaction, one of its rowsets); `perform()` runs it and returns
the rows or records it processed. `maintenance_ops(tablet)` offers the ones worth running,
scored, to the MaintenanceManager (maintenance_manager.py), which runs the best one; the
tablet's own methods (`Tablet.flush_mrs()`, `compact_rowsets(ids)`, ...) perform one now.

    op class                 Tablet method          what it does
    FlushMRSOp               flush_mrs              MemRowSet -> DiskRowSets (+ UNDO files)
    FlushDeltaMemStoresOp    flush_dms              every DeltaMemStore -> a REDO DeltaFile
    MinorDeltaCompactionOp   minor_delta_compact    a rowset's REDO files -> one REDO file
    MajorDeltaCompactionOp   major_delta_compact    a rowset's REDOs folded into its base
                                                    columns, old values kept as UNDOs
    CompactRowSetsOp         compact_rowsets        overlapping DiskRowSets merged by key
    UndoDeltaBlockGCOp       gc_undo_deltas         UNDO files older than the history mark

What an op uses of its tablet is the tablet's public interface, nothing private (a test
holds that: tests/engine/test_tablet_interfaces.py): `path`, `config`, `schema`, `cache`,
`log`, `mvcc`, `write_lock`, `flush_lock`, `components` and `swap_components(...)`,
`new_memrowset()`, `allocate_rowset_id()`, `last_timestamp`, `mark_mrs_flushed(index)`,
`persist_metadata()`, `history_gc_mark()`, `memory_bytes()`, and the methods that
perform each op (`flush_mrs`, `flush_dms`, `minor_delta_compact`, `major_delta_compact`,
`gc_undo_deltas`, `compact_rowsets`: what `maintenance_ops` schedules). (`tablet`
parameters are a Tablet, its type not imported: tablet.py imports this module.)

Flush (`FlushMRSOp`), as in Kudu's flush with its "duplicating" phase made simple:
  1. `freeze`, under the write lock: freeze the MRS and swap in a new empty one; take the
     flush snapshot (every op so far has committed);
  2. `write_flush`, without the lock: sort the frozen rows by key, fold histories into base
     + UNDO (`compaction.fold_history`), write DiskRowSets rolled at `drs_target_bytes`
     (of in-memory size; a merge rolls at that size on disk, as its policy weighs it);
     meanwhile writers may still UPDATE/DELETE rows of the frozen MRS;
  3. `catch_up`, under the write lock: re-apply the frozen MRS's mutations newer than the
     flush snapshot to the new DiskRowSets' DeltaMemStores (rowids translated); then the
     frozen MRS is swapped for the DiskRowSets and tablet metadata persisted atomically.

Merging compaction (`CompactRowSetsOp`) follows the same three steps over DiskRowSets; delta
compactions and UNDO GC work inside one rowset (delta_compaction.py) and only swap its
stores. Every op ends with the durable swap of tablet_metadata.py: new files first, then the
metadata naming them, then the old files are deleted (`after_rowset_change`).

Locks: flushes, merging compactions and `alter_schema` hold the tablet's `flush_lock`
(so they never overlap, and ALTER sees no flush half done); a rowset's `compact_lock`
keeps two compactions off one rowset. Writers wait only for the short swaps under the
write lock; readers never wait (they captured the components before the swap).

History: `Tablet.history_gc_mark` is how far back compactions and GC may drop history —
the ancient history mark, but never past the oldest op the WAL may still replay, because
replay decides what each op saw from the rowsets' history (tablet_bootstrap.py).
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


# -- the maintenance manager's view ----------------------------------------------------
def maintenance_ops(tablet) -> list[MaintenanceOp]:
    """Candidate maintenance ops of `tablet` with scores (see maintenance_manager.py).
    Each runs through the tablet's method for it (`tablet.flush_mrs`, ...), which performs
    the op class: what the tablet's own callers do, and where a tool wrapping the tablet's
    maintenance (tests/engine/kill_campaign.py) sees every op."""
    cfg = tablet.config
    comps = tablet.components
    ops = []
    pressure = tablet.memory_bytes() / max(cfg.memory_limit_bytes, 1)
    under_pressure = pressure >= cfg.memory_soft_fraction
    log_boost = tablet.log.size_bytes() / (64 * (1 << 20))

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
        ops.append(MaintenanceOp("FlushMRS", flush_score(due, 1), tablet.flush_mrs))
    dms_bytes = sum(d.dms.nbytes for d in comps.drss)
    if dms_bytes:
        oldest = max(d.dms_age_s() for d in comps.drss)
        due = max(dms_bytes / cfg.dms_flush_bytes, oldest / cfg.dms_flush_age_s)
        ops.append(MaintenanceOp("FlushDMS", flush_score(due, 0),
                                 tablet.flush_dms))
    ahm = tablet.history_gc_mark()
    for d in comps.drss:
        ratio = d.redo_file_records() / max(d.num_rows, 1)
        if ratio >= cfg.major_compact_min_ratio:
            ops.append(MaintenanceOp("MajorDeltaCompaction", 10 + ratio,
                                     lambda d=d: tablet.major_delta_compact(d)))
        elif d.redo_file_count() >= cfg.minor_compact_min_files:
            ops.append(MaintenanceOp("MinorDeltaCompaction",
                                     5 + d.redo_file_count() / cfg.minor_compact_min_files,
                                     lambda d=d: tablet.minor_delta_compact(d)))
        gc = d.undo_gc_candidates(ahm)
        if gc:
            ops.append(MaintenanceOp("UndoDeltaBlockGC",
                                     1 + sum(f.count for f in gc) / 1e6,
                                     tablet.gc_undo_deltas))
    pick = pick_compaction(tablet)
    if pick:
        ids, score = pick
        ops.append(MaintenanceOp("MergingCompaction", 2 + 10 * score,
                                 lambda ids=ids: tablet.compact_rowsets(ids)))
    return ops


def pick_compaction(tablet) -> tuple[list[int], float] | None:
    """Rowsets of `tablet` the budgeted knapsack policy would merge, with its score."""
    drss = tablet.components.drss
    if len(drss) < 2:
        return None
    infos = [RowSetInfo(d.id, d.base_bytes, d.min_key, d.max_key) for d in drss
             if not d.compact_lock.locked()]
    sel = select_rowsets_to_compact(infos, CompactionPolicyConfig(
        budget_bytes=tablet.config.compaction_budget_bytes,
        target_rowset_bytes=tablet.config.drs_target_bytes))
    if not sel.ids:
        return None
    return list(sel.ids), sel.score


def after_rowset_change(tablet) -> None:
    """Persist metadata naming the new files, then delete the files it no longer names
    (in that order: a crash between the two leaves only garbage, never a hole)."""
    with tablet.write_lock:
        tablet.persist_metadata()
    for d in tablet.components.drss:
        delete_obsolete(d)


# -- delta compactions and history GC (inside one rowset: delta_compaction.py) -----------
class MinorDeltaCompactionOp:
    """A rowset's REDO DeltaFiles merged into one (Kudu's MinorDeltaCompactionOp)."""

    def __init__(self, tablet, drs: DiskRowSet) -> None:
        self.tablet, self.drs = tablet, drs

    def perform(self) -> int:
        """Records merged (0: nothing to do)."""
        n = self.drs.minor_delta_compact()
        if n:
            after_rowset_change(self.tablet)
        return n


class MajorDeltaCompactionOp:
    """A rowset's REDOs folded into its base columns, the values they replace kept as
    UNDOs down to the history GC mark (Kudu's MajorDeltaCompactionOp)."""

    def __init__(self, tablet, drs: DiskRowSet) -> None:
        self.tablet, self.drs = tablet, drs

    def perform(self) -> int:
        """REDO records folded (0: nothing to do)."""
        n = self.drs.major_delta_compact(self.tablet.history_gc_mark())
        if n:
            after_rowset_change(self.tablet)
        return n


class UndoDeltaBlockGCOp:
    """UNDO files of every rowset that lie wholly at or before the history GC mark
    dropped (Kudu's UndoDeltaBlockGCOp)."""

    def __init__(self, tablet) -> None:
        self.tablet = tablet

    def perform(self) -> int:
        """UNDO records dropped."""
        t = self.tablet
        ahm = t.history_gc_mark()
        n = sum(d.gc_undo(ahm) for d in t.components.drss)
        if n:
            after_rowset_change(t)
        return n


# -- merging compaction ------------------------------------------------------------------
class CompactRowSetsOp:
    """Merging compaction of the DiskRowSets with these ids (Kudu's CompactRowSetsOp).

    The inputs' DMSs are flushed first (so every op up to index G is in their files),
    then their rows are merged by key — ghost versions of a key become one row whose
    history is all of theirs — rows deleted at or before the ancient history mark are
    dropped, histories are folded again into base + UNDO, and new rowsets are written
    with flushed_index G. Mutations that arrived meanwhile (ops after G, in the inputs'
    new DMSs) are moved to the outputs under the write lock, then the rowsets swap.
    """

    def __init__(self, tablet, ids: Sequence[int]) -> None:
        self.tablet, self.ids = tablet, list(ids)

    def perform(self) -> int:
        """The number of input rows (0: fewer than two inputs, or one is busy)."""
        t = self.tablet
        with t.flush_lock:
            comps = t.components
            inputs = [d for d in comps.drss if d.id in set(self.ids)]
            if len(inputs) < 2:
                return 0
            locked = []
            try:
                for d in inputs:
                    if not d.compact_lock.acquire(blocking=False):
                        return 0
                    locked.append(d)
                return self._merge(inputs)
            finally:
                for d in locked:
                    d.compact_lock.release()

    def _merge(self, inputs: list[DiskRowSet]) -> int:
        """The compaction proper, the inputs' compact locks held."""
        t = self.tablet
        schema = t.schema        # fixed while the flush lock is held (alter_schema takes it)
        non_key = schema.non_key_columns
        key_ids = {c.id for c in schema.key_columns}
        with t.write_lock:
            pending = [(d, d.begin_dms_flush()) for d in inputs]
            index, ts = t.log.last_index, t.last_timestamp
        t.mvcc.wait_for_safe(ts)
        for d, old in pending:
            if old is not None:
                d.finish_dms_flush(old, t.config.fsync, index)
        ahm = t.history_gc_mark()
        keys_l, ts_l, seq_l, fwd_l = [], [], [], []
        vals_l = {c.id: [] for c in schema.columns}
        offset = 0
        offsets = []
        for d in inputs:
            st = d.capture()
            n = d.num_rows
            keys_l.append(binary_to_fixed(d.read_base_column(KEY_COLUMN)))
            base = {c.id: d.read_column(c, st.readers) for c in schema.columns}
            undo = DeltaBatch.concat([f.records() for f in st.undo])
            redo = DeltaBatch.concat([f.records() for f in st.redo])
            its, iseq, ivals, fwd = unfold_history(n, base, undo, redo, non_key)
            ts_l.append(its)
            seq_l.append(iseq)
            for c in schema.columns:
                vals_l[c.id].append(ivals[c.id] if c.id in ivals else base[c.id])
            fwd_l.append(_shift(fwd, -offset))
            offsets.append(offset)
            offset += n
        keys = np.concatenate(keys_l)
        values = {cid: pa.concat_arrays(v) for cid, v in vals_l.items()}
        out_keys, out_of, base, out_ts, out_seq, merged, firsts = merge_histories(
            keys, np.concatenate(ts_l), np.concatenate(seq_l), values,
            DeltaBatch.concat(fwd_l), ahm, non_key)
        new_base, undo, kept = fold_history(len(out_keys), base, out_ts, merged,
                                            non_key, insert_seq=out_seq)
        if len(undo):
            undo = undo.select(undo.ts > ahm)
        pf = pa.array(firsts)
        arrays = [values[c.id].take(pf) if c.id in key_ids else new_base[c.id]
                  for c in schema.columns]
        full = pa.Table.from_arrays(arrays, schema=pa.schema(
            [pa.field(c.name, c.physical_type) for c in schema.columns]))
        on_disk = sum(d.base_bytes for d in inputs) / max(1, sum(d.num_rows for d in inputs)) \
            if all(d.base_bytes for d in inputs) else 0.0
        outputs, drs_of, local = write_rowsets(t, out_keys, full, undo, kept, index,
                                               on_disk) \
            if len(out_keys) else ([], np.empty(0, np.int64), np.empty(0, np.int64))
        with t.write_lock:
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
            comps = t.components
            drss = [x for x in comps.drss if x not in inputs] + outputs
            t.swap_components(TabletComponents(comps.mrs, comps.frozen,
                                               rowset_tree(drss), comps.schema))
            t.persist_metadata()
        for d in inputs:
            d.delete_files()
        return offset


# -- flushes -----------------------------------------------------------------------------
class FlushMRSOp:
    """The MemRowSet flushed to DiskRowSets (Kudu's FlushMRSOp), in the three steps of
    the module docstring: `freeze`, `write_flush`, `catch_up`."""

    def __init__(self, tablet) -> None:
        self.tablet = tablet

    def perform(self) -> int:
        """The number of rows flushed."""
        t = self.tablet
        with t.flush_lock:
            with t.write_lock:
                frozen = self.freeze()
            if frozen is None:
                return 0
            old, flush_index, flush_ts = frozen
            t.mvcc.wait_for_safe(flush_ts)
            snap = MvccSnapshot.at(flush_ts)
            new_drss, remap = self.write_flush(old, snap, flush_index)
            with t.write_lock:
                self.catch_up(old, snap, remap, new_drss)
                comps = t.components
                t.swap_components(TabletComponents(
                    comps.mrs, tuple(f for f in comps.frozen if f is not old),
                    rowset_tree(list(comps.drss) + new_drss), comps.schema))
                t.mark_mrs_flushed(flush_index)
                t.persist_metadata()
            return len(old)

    def freeze(self) -> tuple[MemRowSet, int, int] | None:
        """Step 1 (the caller holds the write lock): the MemRowSet frozen and a new one
        swapped in; (frozen MRS, flush index, flush timestamp), or None when it is empty.
        Ops up to the flush index (timestamps <= the flush timestamp) have applied to the
        frozen MRS; later ops insert into the new MRS and their mutations of old rows are
        caught up in step 3."""
        t = self.tablet
        comps = t.components
        old = comps.mrs
        if old.empty():
            return None
        old.frozen = True
        t.swap_components(TabletComponents(t.new_memrowset(), comps.frozen + (old,),
                                           comps.tree, comps.schema))
        return old, t.log.last_index, t.last_timestamp

    def write_flush(self, mrs: MemRowSet, snap: MvccSnapshot, flush_index: int
                    ) -> tuple[list[DiskRowSet], tuple[np.ndarray, np.ndarray]]:
        """Step 2 (no lock): the frozen rows as DiskRowSets, and each MRS rowid's (new
        rowset index, rowid in it)."""
        t = self.tablet
        schema = t.schema
        # An MRS always has the tablet's schema: alter_schema flushes every MRS first, and
        # it cannot run while a flush does (both hold the flush lock).
        assert mrs.schema is schema
        non_key = schema.non_key_columns
        key_ids = {c.id for c in schema.key_columns}
        n, insert_ts, redo = mrs.capture()
        keys, order = mrs.sorted_rowids()
        ident = np.arange(n, dtype=np.int64)
        if np.array_equal(order, ident):
            # rows inserted in key order (a bulk load of sorted data, each tablet's share
            # of it): the rowids are the key order, no reordering copy of every column
            data, inv, ts, seqs = mrs.table(n), ident, insert_ts, mrs.insert_seqs(n)
        else:
            data = mrs.table(n).take(pa.array(order))
            inv = np.empty(n, dtype=np.int64)
            inv[order] = ident
            ts, seqs = insert_ts[order], mrs.insert_seqs(n)[order]
        committed = redo.select(snap.is_committed_array(redo.ts)) if len(redo) else redo
        redo_out = committed.remap_rowids(inv).sorted() if len(committed) else committed
        base = {c.id: data.column(c.name).combine_chunks() for c in non_key}
        new_base, undo, kept = fold_history(n, base, ts, redo_out, non_key, insert_seq=seqs)
        arrays = [data.column(c.name).combine_chunks() if c.id in key_ids
                  else new_base[c.id] for c in schema.columns]
        full = pa.Table.from_arrays(arrays, schema=data.schema)
        new_drss, drs_of, local = write_rowsets(t, keys, full, undo, kept, flush_index)
        # mrs rowid -> (new drs index, rowid in it)
        return new_drss, (drs_of[inv], local[inv])

    def catch_up(self, mrs: MemRowSet, snap: MvccSnapshot,
                 remap: tuple[np.ndarray, np.ndarray], new_drss: list[DiskRowSet]) -> None:
        """Step 3 (the caller holds the write lock): mutations of the frozen MRS made after
        the flush snapshot moved to the new DMSs."""
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


class FlushDeltaMemStoresOp:
    """Every rowset's DeltaMemStore flushed to a REDO DeltaFile (Kudu's
    FlushDeltaMemStoresOp)."""

    def __init__(self, tablet) -> None:
        self.tablet = tablet

    def perform(self) -> int:
        """The number of delta records flushed."""
        t = self.tablet
        with t.flush_lock:
            with t.write_lock:
                pending = [(d, d.begin_dms_flush()) for d in t.components.drss]
                index, ts = t.log.last_index, t.last_timestamp
            t.mvcc.wait_for_safe(ts)
            total = 0
            for d, old in pending:
                if old is not None:
                    total += len(old)
                    d.finish_dms_flush(old, t.config.fsync, index)
            if total:
                with t.write_lock:
                    t.persist_metadata()
            return total


def write_rowsets(tablet, keys: np.ndarray, full: pa.Table, undo: DeltaBatch,
                  kept: DeltaBatch, flushed_index: int, disk_bytes_per_row: float = 0.0
                  ) -> tuple[list[DiskRowSet], np.ndarray, np.ndarray]:
    """Write key-sorted rows as new DiskRowSets of `tablet`, rolled every drs_target_bytes;
    returns them and each row's (rowset index, rowid).

    The size is measured as the compaction policy measures it, in bytes on disk: a merge
    passes its inputs' `base_bytes` per row (the same rows, encoded again). A flush has no
    such measure and rolls by the rows' in-memory size, which is larger (encodings,
    compression), so its rowsets are smaller than the target and are merged once. Rolled
    by the in-memory size, a merge's outputs were under the target on disk too: the
    small-rowset bonus chose them again, forever."""
    cfg = tablet.config
    n = full.num_rows
    per_row = disk_bytes_per_row if disk_bytes_per_row > 0 else \
        max(full.nbytes / max(n, 1), 1)
    rows_per = max(int(cfg.drs_target_bytes // per_row), cfg.page_rows)
    drs_of = np.empty(n, dtype=np.int64)
    local = np.empty(n, dtype=np.int64)
    new_drss = []
    for j, a in enumerate(range(0, n, rows_per)):
        b = min(a + rows_per, n)
        rid = tablet.allocate_rowset_id()
        d = rowset_dir(tablet.path, rid)
        meta = write_diskrowset(d, rid, tablet.schema, full.slice(a, b - a), keys[a:b],
                                _shift(undo.slice_rows(a, b), a),
                                _shift(kept.slice_rows(a, b), a), cfg, flushed_index)
        new_drss.append(DiskRowSet(d, tablet.schema, meta, tablet.cache, cfg))
        drs_of[a:b] = j
        local[a:b] = np.arange(b - a)
    return new_drss, drs_of, local


def _shift(batch: DeltaBatch, offset: int) -> DeltaBatch:
    if not len(batch) or offset == 0:
        return batch
    return DeltaBatch(batch.rowid - offset, batch.ts, batch.seq, batch.kind, batch.columns)
