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


def fold_history(n: int, base: dict[int, pa.Array], insert_ts: np.ndarray | None,
                 redo: DeltaBatch, columns: Sequence[ColumnSchema]
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
                                 np.full(n, -1, dtype=np.int64),
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
        if cid in redo.columns:
            mask, vals = redo.columns[cid]
        else:
            mask, vals = np.zeros(m, dtype=bool), pa.nulls(m, type=b.type)
        if vals.type != b.type:
            vals = vals.cast(b.type)
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
