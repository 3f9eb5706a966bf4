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
from engine.tablet.delta import DeltaBatch, MutationKind, pick_run_ends


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
    last = pick_run_ends(rowid, True)
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
    first = pick_run_ends(rowid, False)
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

    Versions of a key never overlap in time (at most one is live at once), so all the
    events of a key's input rows — each row's insertion and its forward records — sorted by
    (timestamp, seq) are the key's history: the first insertion is the key's insertion,
    every later one becomes a REINSERT. An input row may itself hold several versions (the
    output of an earlier merge: insert, DELETE, REINSERT ...) with another row's version in
    one of its gaps, which is why events are merged rather than whole rows ordered.

    An insertion older than the retained history reads as "inserted at 0" (its UNDO was
    collected) although it may belong to the newest version. Such a row's insertion is
    placed just before its own first forward record, after every other row's event that
    precedes that record (nothing of another version can lie between a version's start and
    its first event), or after the key's last event if the row has no forward record (it
    is then the version live at the end). Both are at or before the ancient history mark,
    so no permitted read can tell the difference.

    Keys whose history ends in a DELETE at or before the ancient history mark are dropped
    (history GC). Returns (unique sorted keys, old row -> output row (-1 = dropped), base
    values, insert_ts, insert_seq, forward records over output rows, the input row each
    output row's base came from).
    """
    n = len(keys)
    m = len(fwd)
    ins_ts = np.asarray(insert_ts, dtype=np.int64).copy()
    ins_seq = np.asarray(insert_seq, dtype=np.int64).copy()
    unknown = np.flatnonzero(ins_ts == 0)
    if len(unknown):
        _place_unknown_insertions(keys, ins_ts, ins_seq, unknown, fwd)
    # Every event of every key: insertions (tie 0) sort before forward records (tie 1) at
    # an equal (ts, seq) — only an insertion placed above can meet its own first record.
    ev_key = np.concatenate([keys, keys[fwd.rowid]]) if m else keys
    ev_ts = np.concatenate([ins_ts, fwd.ts])
    ev_seq = np.concatenate([ins_seq, fwd.seq])
    ev_tie = np.concatenate([np.zeros(n, np.int8), np.ones(m, np.int8)])
    order = np.lexsort((ev_tie, ev_seq, ev_ts, ev_key))
    ins_order = order[order < n]  # input rows, by their insertion's place in the history
    sk = keys[ins_order]
    new_key = np.ones(n, dtype=bool)
    new_key[1:] = sk[1:] != sk[:-1]
    group = np.cumsum(new_key) - 1  # output row per input row in ins_order
    out_of = np.empty(n, dtype=np.int64)
    out_of[ins_order] = group
    firsts = ins_order[new_key]
    later = ins_order[~new_key]  # insertions after the key's first one: REINSERTs
    parts = [fwd.remap_rowids(out_of)]
    if len(later):
        reins_vals = {c.id: values[c.id].take(pa.array(later)) for c in columns}
        parts.append(DeltaBatch(out_of[later], ins_ts[later], ins_seq[later],
                                np.full(len(later), int(MutationKind.REINSERT), np.int8),
                                {cid: (np.ones(len(later), dtype=bool), v)
                                 for cid, v in reins_vals.items()}))
    merged = DeltaBatch.concat(parts)
    n_out = int(group[-1]) + 1 if n else 0
    base = {c.id: values[c.id].take(pa.array(firsts)) for c in columns}
    out_keys = keys[firsts]
    out_ts, out_seq = ins_ts[firsts], ins_seq[firsts]
    # History GC of deleted rows: the last record of a key is a DELETE at or before the AHM.
    drop = np.zeros(n_out, dtype=bool)
    if len(merged):
        last = pick_run_ends(merged.rowid, True)
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


def _place_unknown_insertions(keys: np.ndarray, ins_ts: np.ndarray, ins_seq: np.ndarray,
                              unknown: np.ndarray, fwd: DeltaBatch) -> None:
    """Give the rows in `unknown` (insertion collected: ts 0) the (ts, seq + 1) of the
    known event of their key that precedes their first forward record (see
    merge_histories); rows with no such event stay at (0, -1). In place."""
    n = len(keys)
    known = np.flatnonzero(ins_ts != 0)
    e_key = np.concatenate([keys[known], keys[fwd.rowid]]) if len(fwd) else keys[known]
    e_ts = np.concatenate([ins_ts[known], fwd.ts])
    e_seq = np.concatenate([ins_seq[known], fwd.seq])
    order = np.lexsort((e_seq, e_ts, e_key))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    s_key = e_key[order]
    # first forward record of each row (fwd is sorted by rowid, ts, seq), as a position
    first_rec = np.full(n, -1, dtype=np.int64)
    if len(fwd):
        firsts = pick_run_ends(fwd.rowid, False)
        first_rec[fwd.rowid[firsts]] = firsts
    fr = first_rec[unknown]
    has = fr >= 0
    p = np.searchsorted(s_key, keys[unknown], "right")  # no record: after the key's last
    p[has] = pos[len(known) + fr[has]]
    prev = p - 1
    ok = prev >= 0
    ok[ok] &= s_key[prev[ok]] == keys[unknown[ok]]
    rows = unknown[ok]
    src = order[prev[ok]]
    ins_ts[rows] = e_ts[src]
    ins_seq[rows] = e_seq[src] + 1
