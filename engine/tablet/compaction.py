"""Turning row histories into base data + UNDO records (used by MemRowSet flush).

A flush, like every Kudu compaction, writes each row's *latest* version as base data and
its history as UNDO records, so time travel still works once the row is on disk. For the
tablet design doc's example row

    INSERT ("row", 1) @1,  UPDATE val=2 @2,  DELETE @3,  REINSERT ("row", 3) @4

the output is

    base  ("row", 3)
    UNDO  @4 DELETE,  @3 REINSERT ("row", 2),  @2 UPDATE val=1,  @1 DELETE

A row whose history *ends* in a DELETE keeps its last live image as base data and the final
DELETE as a REDO record, so a reader before the delete still finds it.

`fold_history` computes this for all rows at once: per column, the value a record
overwrote is found with a running maximum of "index of the last record that set this
column" over the (rowid, ts, seq)-sorted records, which is a handful of numpy ops per column
instead of a walk down each row's chain.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from engine.schema import ColumnSchema
from engine.tablet.delta import DeltaBatch, MutationKind, _pick


def _column_records(batch: DeltaBatch, cid: int, typ: pa.DataType
                    ) -> tuple[np.ndarray, pa.Array]:
    """(set mask, values) of one column over all records, typed like the base column."""
    m = len(batch)
    if cid in batch.columns:
        mask, vals = batch.columns[cid]
    else:
        mask, vals = np.zeros(m, dtype=bool), pa.nulls(m, type=typ)
    return mask, (vals.cast(typ) if vals.type != typ else vals)


def fold_history(n: int, base: dict[int, pa.Array], insert_ts: np.ndarray | None,
                 redo: DeltaBatch, columns: Sequence[ColumnSchema],
                 insert_seq: np.ndarray | None = None
                 ) -> tuple[dict[int, pa.Array], DeltaBatch, DeltaBatch]:
    """Fold committed REDO records (rowids 0..n-1 = output order, sorted) into base data.

    base: the values each row starts from (non-key columns by id): its inserted values for a
    flush, the current base data for a major delta compaction.
    insert_ts: each row's insertion timestamp (an UNDO DELETE is generated for it), or None
    when the rows' earlier history is already recorded elsewhere (major delta compaction).
    Returns (new base values, UNDO records, REDO records that stay REDO).
    """
    if insert_ts is None:
        insert_undo = DeltaBatch.empty()
    else:
        insert_undo = DeltaBatch(np.arange(n, dtype=np.int64),
                                 np.asarray(insert_ts, np.int64),
                                 np.full(n, -1, dtype=np.int64) if insert_seq is None
                                 else np.asarray(insert_seq, np.int64),
                                 np.full(n, int(MutationKind.DELETE), dtype=np.int8))
    m = len(redo)
    if m == 0:
        return dict(base), insert_undo, DeltaBatch.empty()
    rowid, kind = redo.rowid, redo.kind
    last = _pick(rowid, True)
    trailing = last[kind[last] == MutationKind.DELETE]
    invert = np.ones(m, dtype=bool)
    invert[trailing] = False
    ar = np.arange(m, dtype=np.int64)
    new_base: dict[int, pa.Array] = {}
    undo_cols: dict[int, tuple[np.ndarray, pa.Array]] = {}
    is_update = kind == MutationKind.UPDATE
    is_delete = kind == MutationKind.DELETE
    for col in columns:
        cid = col.id
        b = base[cid]
        mask, vals = _column_records(redo, cid, b.type)
        setter = np.where(mask, ar, -1)
        acc = np.maximum.accumulate(setter)
        prev = np.empty(m, dtype=np.int64)
        prev[0] = -1
        prev[1:] = acc[:-1]
        valid = prev >= 0
        valid[valid] &= rowid[prev[valid]] == rowid[valid]
        # Value each record overwrote: the previous setter in the row, else the base value.
        src = np.where(valid, prev, m + rowid)
        combined = pa.concat_arrays([vals, b])
        before = combined.take(pa.array(src))
        undo_mask = ((is_update & mask) | is_delete) & invert
        if undo_mask.any():
            undo_cols[cid] = (undo_mask, before)
        # Latest value per row: its last setter, else the base value.
        acc_last = acc[last]
        ok = acc_last >= 0
        ok[ok] &= rowid[acc_last[ok]] == rowid[last[ok]]
        final_src = np.arange(n, dtype=np.int64) + m
        final_src[rowid[last[ok]]] = acc_last[ok]
        new_base[cid] = combined.take(pa.array(final_src)) if ok.any() else b
    # UNDO kind is the inverse of the REDO kind.
    undo_kind = np.where(kind == MutationKind.UPDATE, MutationKind.UPDATE,
                         np.where(kind == MutationKind.DELETE, MutationKind.REINSERT,
                                  MutationKind.DELETE)).astype(np.int8)
    mut_undo = DeltaBatch(rowid, redo.ts, redo.seq, undo_kind, undo_cols).select(invert)
    kept = redo.take(trailing).drop_columns(set())
    undo = DeltaBatch.concat([insert_undo, mut_undo])
    return new_base, undo, kept


def unfold_history(n: int, base: dict[int, pa.Array], undo: DeltaBatch, redo: DeltaBatch,
                   columns: Sequence[ColumnSchema]
                   ) -> tuple[np.ndarray, np.ndarray, dict[int, pa.Array], DeltaBatch]:
    """The inverse of `fold_history`: base + UNDO + REDO -> insertion + forward records.

    Returns (insert_ts, insert_seq, inserted values, forward REDO records) per row. The
    oldest UNDO record of a row, if it is a DELETE, is the undo of the row's insertion;
    every other UNDO record becomes the forward op it undid, carrying the values the row
    had *after* that op — for column c, the value in the next newer UNDO record that sets
    c, else the base value (a reverse running minimum of setter indexes, per column). A row
    whose insertion is older than the retained history is taken as inserted at timestamp 0.
    """
    m = len(undo)
    insert_ts = np.zeros(n, dtype=np.int64)
    insert_seq = np.full(n, -1, dtype=np.int64)
    if m == 0:
        return insert_ts, insert_seq, dict(base), redo
    rowid, kind = undo.rowid, undo.kind
    first = _pick(rowid, False)
    is_first = np.zeros(m, dtype=bool)
    is_first[first] = True
    ins = is_first & (kind == MutationKind.DELETE)
    insert_ts[rowid[ins]] = undo.ts[ins]
    insert_seq[rowid[ins]] = undo.seq[ins]
    convert = ~ins
    ar = np.arange(m, dtype=np.int64)
    big = np.int64(m)
    ins_vals: dict[int, pa.Array] = {}
    fwd_cols: dict[int, tuple[np.ndarray, pa.Array]] = {}
    fwd_kind = np.where(kind == MutationKind.UPDATE, MutationKind.UPDATE,
                        np.where(kind == MutationKind.REINSERT, MutationKind.DELETE,
                                 MutationKind.REINSERT)).astype(np.int8)
    first_of_row = np.full(n, -1, dtype=np.int64)
    first_of_row[rowid[first]] = first
    for col in columns:
        cid = col.id
        b = base[cid]
        mask, vals = _column_records(undo, cid, b.type)
        setter = np.where(mask, ar, big)
        nxt_incl = np.minimum.accumulate(setter[::-1])[::-1]  # first setter at or after i
        nxt = np.empty(m, dtype=np.int64)
        nxt[:-1] = nxt_incl[1:]
        nxt[-1] = big
        ok = nxt < big
        ok[ok] &= rowid[nxt[ok]] == rowid[ok]
        combined = pa.concat_arrays([vals, b])
        after = combined.take(pa.array(np.where(ok, nxt, m + rowid)))
        set_mask = ((fwd_kind == MutationKind.UPDATE) & mask) | (
            fwd_kind == MutationKind.REINSERT)
        set_mask &= convert
        if set_mask.any():
            fwd_cols[cid] = (set_mask, after)
        # inserted values: state after the insertion record, or before all history
        src = np.arange(n, dtype=np.int64) + m
        has = first_of_row >= 0
        f = first_of_row[has]
        start_ok = np.where(ins[f], nxt[f], nxt_incl[f])
        good = (start_ok < big)
        good[good] &= rowid[start_ok[good]] == rowid[f[good]]
        rows_with = np.flatnonzero(has)
        src[rows_with[good]] = start_ok[good]
        ins_vals[cid] = combined.take(pa.array(src))
    fwd = DeltaBatch(rowid, undo.ts, undo.seq, fwd_kind, fwd_cols).select(convert)
    return insert_ts, insert_seq, ins_vals, DeltaBatch.concat([fwd, redo])


def merge_histories(keys: np.ndarray, insert_ts: np.ndarray, insert_seq: np.ndarray,
                    values: dict[int, pa.Array], fwd: DeltaBatch, ahm: int,
                    columns: Sequence[ColumnSchema]):
    """Merge row versions of the same key (ghosts) into one history per key.

    Versions of a key never overlap in time (at most one is live at once), so ordering them
    by when they ended gives the key's history: the oldest version's insertion is the row's
    insertion, each later version's insertion becomes a REINSERT. Keys whose history ends in
    a DELETE at or before the ancient history mark are dropped (history GC). Returns
    (unique sorted keys, old row -> output row (-1 = dropped), base values, insert_ts,
    insert_seq, forward records over output rows, the input row each output row's base
    came from).
    """
    n = len(keys)
    # Order versions by when they *ended* (their final DELETE; the live version last).
    # Insertion time cannot be used: once a version's insertion UNDO is collected it reads
    # as "inserted at 0" although it may be the newest version.
    end_ts = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    end_seq = np.zeros(n, dtype=np.int64)
    if len(fwd):
        last = _pick(fwd.rowid, True)
        dead = last[fwd.kind[last] == MutationKind.DELETE]
        end_ts[fwd.rowid[dead]] = fwd.ts[dead]
        end_seq[fwd.rowid[dead]] = fwd.seq[dead]
    order = np.lexsort((end_seq, end_ts, keys))
    sk = keys[order]
    new_key = np.ones(n, dtype=bool)
    new_key[1:] = sk[1:] != sk[:-1]
    group = np.cumsum(new_key) - 1  # output row per sorted input row
    out_of = np.empty(n, dtype=np.int64)
    out_of[order] = group
    firsts = order[new_key]
    later_pos = np.flatnonzero(~new_key)
    later = order[later_pos]  # versions after the first: their insert is a REINSERT
    parts = [fwd.remap_rowids(out_of)]
    if len(later):
        prev = order[later_pos - 1]
        # A version whose insertion time was collected re-inserted some time after the
        # previous version ended: place it just after that DELETE (both are older than the
        # ancient history mark, so no permitted read can tell the difference).
        unknown = insert_ts[later] <= end_ts[prev]
        r_ts = np.where(unknown, end_ts[prev], insert_ts[later])
        r_seq = np.where(unknown, end_seq[prev] + 1, insert_seq[later])
        reins_vals = {c.id: values[c.id].take(pa.array(later)) for c in columns}
        parts.append(DeltaBatch(out_of[later], r_ts, r_seq,
                                np.full(len(later), int(MutationKind.REINSERT), np.int8),
                                {cid: (np.ones(len(later), dtype=bool), v)
                                 for cid, v in reins_vals.items()}))
    merged = DeltaBatch.concat(parts)
    n_out = int(group[-1]) + 1 if n else 0
    base = {c.id: values[c.id].take(pa.array(firsts)) for c in columns}
    out_keys = keys[firsts]
    out_ts, out_seq = insert_ts[firsts], insert_seq[firsts]
    # History GC of deleted rows: the last record of a key is a DELETE at or before the AHM.
    drop = np.zeros(n_out, dtype=bool)
    if len(merged):
        last = _pick(merged.rowid, True)
        dead = last[(merged.kind[last] == MutationKind.DELETE) & (merged.ts[last] <= ahm)]
        drop[merged.rowid[dead]] = True
    if drop.any():
        keep = ~drop
        new_index = np.cumsum(keep) - 1
        merged = merged.select(keep[merged.rowid])
        merged = merged.remap_rowids(np.where(keep, new_index, -1))
        out_keys = out_keys[keep]
        out_ts, out_seq = out_ts[keep], out_seq[keep]
        sel = pa.array(np.flatnonzero(keep))
        base = {cid: v.take(sel) for cid, v in base.items()}
        out_of = np.where(keep[out_of], new_index[out_of], -1)
    firsts_kept = firsts if not drop.any() else firsts[~drop]
    return out_keys, out_of, base, out_ts, out_seq, merged, firsts_kept
