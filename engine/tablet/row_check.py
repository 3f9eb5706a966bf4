"""Read preconditions of UPDATE / DELETE rows: "unchanged since my snapshot" (no lost updates).

An UPDATE computes its new values from the row as a snapshot at timestamp S showed it, and
writes them later. If another op changed the row in between, a blind write would throw
that change away (two `SET n = n + 1` both reading 5 and both writing 6). So the SQL
layer gives each UPDATE / DELETE row its S (the op's `READ_TS_COLUMN`, write_op.py), and
the tablet applies the row only if its live version has no mutation - UPDATE, DELETE,
REINSERT, or the insertion of a new version of the key - with a timestamp in (S, T), T
being the op's own timestamp; else nothing of the row is written and its outcome says
which (a per-row outcome, `changed_since` / `row_error`):

  - only UPDATEs in (S, T): CHANGED. The row the read saw is still there, changed: the
    SQL layer reads it again at a new snapshot, re-checks its WHERE and recomputes SET
    (PostgreSQL's READ COMMITTED EvalPlanQual, which follows the row's update chain to its
    newest version; planner/dml.py).
  - a DELETE, a REINSERT, or the insertion of the live version in (S, T): NOT_FOUND,
    "row deleted since it was read". The row the read saw was deleted; a row of the same
    key inserted since is another row (in PostgreSQL another tuple, which the statement's
    snapshot does not see and its update chain does not lead to), so the statement skips
    it and does not count it, as PostgreSQL's READ COMMITTED UPDATE / DELETE skip a target
    row deleted after their snapshot. Telling the two apart needs no further look-up: the
    records already read carry their kind (UNDO records too: an UNDO DELETE dates an
    insertion, an UNDO REINSERT a deletion); only records inside (S, T) are compared.

Why this is enough: the read at S saw every op with timestamp <= S (a snapshot read at S
waits until every op that took a timestamp <= S has committed, and no later op can take
one: `Tablet.wait_safe`). The check runs under the tablet's write lock, in the same
critical section that applies the row (both write paths: `RowOps._apply_round` and
small_write.py `apply_small`), so nothing can change the row between the check and the
write. A row whose newest mutation is <= S is therefore exactly the row the read saw.

Why (S, T) and not (S, now): at the original apply, every mutation in the stores is older
than T (timestamps are taken under the write lock, in log order). WAL replay and a Raft
follower apply the same op at the same T over the same prefix of the log, but flushed
files may already hold mutations of *later* ops (tablet_bootstrap.py); ignoring
timestamps >= T makes the check a function of the log prefix alone, so every replica and
every replay decides each row as the leader did (tests/engine/test_row_check.py replays
ops whose rows' later changes the flushed files hold and compares every row's outcome
with the original one: a replica keeps the outcome in its result tracker and answers a
retried request with it). Mutations at T itself are not looked at
here: an earlier row of the same op on the same key (two statements' UPDATEs joined in one
op by the write coalescer, as a cluster's front end joins every small write) is a change
for the later checked row all the same, which `RowOps` decides from the op itself (the
keys its earlier rounds wrote and whether one deleted or inserted the key; checked rows
never collapse into one).

Cost: only rows carrying a precondition are checked, and a store whose newest timestamp
is <= S (`max_ts`, kept by every delta store and file) is skipped without looking at the
row; the row's own records are read with the point-lookup accessors the stores already
have (`DeltaMemStore.row_records` / `rows_records`, `DeltaBatch.slice_rows`).
"""

from __future__ import annotations

import numpy as np

from engine.tablet.delta import MutationKind
from engine.tablet.write_op import READ_TS_COLUMN, RowErrorCode

# what `changed_since` finds in (since, before); ordered: GONE wins over UPDATED
UNCHANGED, UPDATED, GONE = 0, 1, 2
_UPDATE = int(MutationKind.UPDATE)


def row_error(change: int) -> tuple[str, str]:
    """The outcome (code, message) of a row whose precondition failed with `change`."""
    if change == GONE:
        return RowErrorCode.NOT_FOUND.value, "row deleted since it was read"
    return RowErrorCode.CHANGED.value, "row changed since it was read"


def _batch_change(recs, since: int, before: int) -> int:
    if not len(recs):
        return UNCHANGED
    window = (recs.ts > since) & (recs.ts < before)
    if not window.any():
        return UNCHANGED
    return GONE if (recs.kind[window] != _UPDATE).any() else UPDATED


def _dms_change(dms, rowid: int, since: int, before: int) -> int:
    """What a DeltaMemStore holds of `rowid` with since < ts < before."""
    if not len(dms) or dms.max_ts is None or dms.max_ts <= since:
        return UNCHANGED
    out = UNCHANGED
    for rec in dms.row_records(rowid):          # the row's few row records
        if since < rec[1] < before:             # (rowid, ts, seq, kind, values)
            if rec[3] != _UPDATE:
                return GONE
            out = UPDATED
    recs = dms.rows_records(rowid, rowid + 1)   # and its Arrow-chunk records
    return max(out, _batch_change(recs, since, before))


def _file_change(f, rowid: int, since: int, before: int) -> int:
    if f.max_ts <= since:
        return UNCHANGED
    return _batch_change(f.records().slice_rows(rowid, rowid + 1), since, before)


def changed_since(store, kind: int, rowid: int, since: int, before: int) -> int:
    """What happened to the live version of a row - `rowid` of `store`, a MemRowSet (kind 1
    active, 2 frozen) or a DiskRowSet (kind 3) - at timestamps in (since, before):
    UNCHANGED (0), UPDATED (updates only) or GONE (it was inserted, deleted or re-inserted
    then); truthy when the precondition fails. The caller holds the tablet's write lock."""
    if kind != 3:
        if since < store.insert_ts_of(rowid) < before:
            return GONE
        return _dms_change(store.redo, rowid, since, before)
    # a DiskRowSet row: its UNDOs date every change folded into the base data (the
    # insertion, and the updates / re-insertions a compaction merged); its REDO files and
    # DeltaMemStores every change since
    undo, redo, dmss, _ = store.capture()
    out = UNCHANGED
    for f in (*undo, *redo):
        out = max(out, _file_change(f, rowid, since, before))
        if out == GONE:
            return out
    for d in dmss:
        out = max(out, _dms_change(d, rowid, since, before))
    return out


def read_ts_values(rows) -> np.ndarray | None:
    """The per-row read timestamps of an op's Arrow rows (int64, -1 where a row has none),
    or None when the op carries no precondition."""
    if READ_TS_COLUMN not in rows.column_names:
        return None
    col = rows.column(READ_TS_COLUMN)
    return np.asarray(col.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
