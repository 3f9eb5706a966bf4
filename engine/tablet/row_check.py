"""Read preconditions of UPDATE / DELETE rows: "unchanged since my snapshot" (no lost updates).

An UPDATE computes its new values from the row as a snapshot at timestamp S showed it, and
writes them later. If another op changed the row in between, a blind write would throw
that change away (two `SET n = n + 1` both reading 5 and both writing 6). So the SQL
layer gives each UPDATE / DELETE row its S (the op's `READ_TS_COLUMN`, write_op.py), and
the tablet applies the row only if its live version has no mutation - UPDATE, DELETE,
REINSERT, or the insertion of a new version of the key - with a timestamp in (S, T), T
being the op's own timestamp; else the row fails with CHANGED (a per-row outcome, like
NOT_FOUND) and nothing of it is written. The SQL layer then reads the row again at a new
snapshot, re-checks its WHERE and recomputes SET (PostgreSQL's READ COMMITTED
EvalPlanQual; planner/dml.py).

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
every replay decides each row as the leader did. Mutations at T itself are not looked at
here: an earlier row of the same op on the same key (two statements' UPDATEs joined in one
op by the write coalescer, as a cluster's front end joins every small write) is a change
for the later checked row all the same, which `RowOps` decides from the op itself (the
keys its earlier rounds wrote; checked rows never collapse into one).

Cost: only rows carrying a precondition are checked, and a store whose newest timestamp
is <= S (`max_ts`, kept by every delta store and file) is skipped without looking at the
row; the row's own records are read with the point-lookup accessors the stores already
have (`DeltaMemStore.row_records` / `rows_records`, `DeltaBatch.slice_rows`).
"""

from __future__ import annotations

import numpy as np


def _dms_changed(dms, rowid: int, since: int, before: int) -> bool:
    """Whether a DeltaMemStore holds a record of `rowid` with since < ts < before."""
    if not len(dms) or dms.max_ts is None or dms.max_ts <= since:
        return False
    for rec in dms.row_records(rowid):          # the row's few row records
        if since < rec[1] < before:
            return True
    recs = dms.rows_records(rowid, rowid + 1)   # and its Arrow-chunk records
    return bool(len(recs) and ((recs.ts > since) & (recs.ts < before)).any())


def _file_changed(f, rowid: int, since: int, before: int) -> bool:
    if f.max_ts <= since:
        return False
    recs = f.records().slice_rows(rowid, rowid + 1)
    return bool(len(recs) and ((recs.ts > since) & (recs.ts < before)).any())


def changed_since(store, kind: int, rowid: int, since: int, before: int) -> bool:
    """Whether the live version of a row - `rowid` of `store`, a MemRowSet (kind 1 active,
    2 frozen) or a DiskRowSet (kind 3) - was inserted or mutated at a timestamp in
    (since, before). The caller holds the tablet's write lock."""
    if kind != 3:
        return since < store.insert_ts_of(rowid) < before or \
            _dms_changed(store.redo, rowid, since, before)
    # a DiskRowSet row: its UNDOs date every change folded into the base data (the
    # insertion, and the updates / re-insertions a compaction merged); its REDO files and
    # DeltaMemStores every change since
    undo, redo, dmss, _ = store.capture()
    for f in undo:
        if _file_changed(f, rowid, since, before):
            return True
    for f in redo:
        if _file_changed(f, rowid, since, before):
            return True
    return any(_dms_changed(d, rowid, since, before) for d in dmss)


def read_ts_values(rows) -> np.ndarray | None:
    """The per-row read timestamps of an op's Arrow rows (int64, -1 where a row has none),
    or None when the op carries no precondition."""
    from engine.tablet.write_op import READ_TS_COLUMN
    if READ_TS_COLUMN not in rows.column_names:
        return None
    col = rows.column(READ_TS_COLUMN)
    return np.asarray(col.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
