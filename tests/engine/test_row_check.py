"""Read preconditions of UPDATE / DELETE rows (engine/tablet/row_check.py).

A row carrying READ_TS_COLUMN = S applies only if its live version has no change after S;
else it is CHANGED and nothing of it is written. Checked on the small-write path and the
general one, for a row in the active MemRowSet, in a DiskRowSet (DMS, REDO file, and
after a merging compaction: UNDOs), for deletes and re-insertions, and the decision must
survive WAL replay (the same answer from the log prefix alone).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.config import TabletConfig
from engine.schema import ColumnSchema, Schema
from engine.tablet import Tablet
from engine.tablet.write_op import READ_TS_COLUMN, OpType
from engine.types import DataType

CFG = TabletConfig(page_rows=8, drs_target_bytes=2048, fsync=False, wal_sync="never")


def _tablet(tmp_path, name="t"):
    s = Schema([ColumnSchema("k", DataType.INT64, nullable=False),
                ColumnSchema("n", DataType.INT64)], key=["k"])
    return Tablet.create(str(tmp_path / name), s, CFG)


def _write(t, op, k, n, read_ts, small):
    if small:
        cols = ["k", "n", READ_TS_COLUMN] if op == OpType.UPDATE else ["k", READ_TS_COLUMN]
        row = (k, n, read_ts) if op == OpType.UPDATE else (k, read_ts)
        if small == "one":          # the one-row call a Table's single-row write makes
            return t.write_one(int(op), tuple(cols), row, None)()
        return t.write_small([int(op)], cols, [row])
    data = {"k": pa.array([k], pa.int64())}
    if op == OpType.UPDATE:
        data["n"] = pa.array([n], pa.int64())
    data[READ_TS_COLUMN] = pa.array([read_ts], pa.int64())
    return t.write(op, pa.table(data))


def _n(t, k):
    row = t.lookup((k,))
    return None if row is None else row["n"]


@pytest.mark.parametrize("small", [True, "one", False])
@pytest.mark.parametrize("where", ["mrs", "dms", "redo", "compacted"])
def test_update_refused_after_a_newer_change(tmp_path, small, where):
    t = _tablet(tmp_path)
    t.insert(pa.table({"k": pa.array([1, 2], pa.int64()), "n": pa.array([0, 0], pa.int64())}))
    if where != "mrs":
        t.flush_mrs()
    s0 = t.current_timestamp()                      # the "read" of both rows
    t.update(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([5], pa.int64())}))
    if where == "redo":
        t.flush_dms()
    if where == "compacted":
        t.flush_dms()
        t.compact_rowsets([x["id"] for x in t.rowsets_info()])
    if small:
        assert t.small_writes == 0
    r = _write(t, OpType.UPDATE, 1, 1, s0, small)    # row 1 changed after s0: refused
    assert r.num_applied == 0 and [e.code for e in r.row_errors] == ["CHANGED"]
    assert r.row_errors[0].sqlstate == "40001"
    assert _n(t, 1) == 5                             # the concurrent change is kept
    r = _write(t, OpType.UPDATE, 2, 1, s0, small)    # row 2 did not change: applied
    assert r.num_applied == 1 and not r.row_errors and _n(t, 2) == 1
    if small:
        assert t.small_writes == 2
    s1 = t.current_timestamp()                       # a fresh read: applies
    r = _write(t, OpType.UPDATE, 1, 6, s1, small)
    assert r.num_applied == 1 and _n(t, 1) == 6
    r = _write(t, OpType.DELETE, 1, None, s0, small)   # a DELETE is checked alike
    assert [e.code for e in r.row_errors] == ["CHANGED"] and _n(t, 1) == 6
    # the decisions replay the same (the log prefix decides: later changes do not count)
    t.flush_mrs()
    t.close()
    t = Tablet.open(t.path, CFG)
    assert (_n(t, 1), _n(t, 2)) == (6, 1)


def _codes(r):
    return [(e.code, e.message) for e in r.row_errors]


GONE = [("NOT_FOUND", "row deleted since it was read")]


@pytest.mark.parametrize("small", [True, "one", False])
@pytest.mark.parametrize("op", [OpType.UPDATE, OpType.DELETE])
def test_deleted_and_reinserted_row_is_gone(tmp_path, small, op):
    """The row the read saw was deleted after it; the live row of its key is another one
    (inserted since): NOT_FOUND, as PostgreSQL skips such a row
    (tests/sql/test_lost_updates_pg.py), not CHANGED (which the SQL layer reads again)."""
    t = _tablet(tmp_path)
    t.insert(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([0], pa.int64())}))
    t.flush_mrs()                                     # the old version in a DiskRowSet
    s0 = t.current_timestamp()
    t.delete(pa.table({"k": pa.array([1], pa.int64())}))
    t.insert(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([9], pa.int64())}))
    r = _write(t, op, 1, 1, s0, small)                # a new version (MemRowSet insert)
    assert _codes(r) == GONE and _n(t, 1) == 9
    # re-inserted in the same MemRowSet (a REINSERT mutation)
    s1 = t.current_timestamp()
    t.delete(pa.table({"k": pa.array([1], pa.int64())}))
    t.insert(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([3], pa.int64())}))
    r = _write(t, op, 1, 1, s1, small)
    assert _codes(r) == GONE and _n(t, 1) == 3
    # deleted, re-inserted and flushed: the new version's DiskRowSet dates its insertion
    # in an UNDO record (UNDO DELETE)
    s2 = t.current_timestamp()
    t.delete(pa.table({"k": pa.array([1], pa.int64())}))
    t.insert(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([4], pa.int64())}))
    t.flush_mrs()
    r = _write(t, op, 1, 1, s2, small)
    assert _codes(r) == GONE and _n(t, 1) == 4
    # updated after the read, then deleted and re-inserted: gone all the same
    s3 = t.current_timestamp()
    t.update(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([5], pa.int64())}))
    t.delete(pa.table({"k": pa.array([1], pa.int64())}))
    t.insert(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([6], pa.int64())}))
    r = _write(t, op, 1, 1, s3, small)
    assert _codes(r) == GONE and _n(t, 1) == 6
    # only updated after the read: CHANGED (read again), whatever the store
    s4 = t.current_timestamp()
    t.update(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([7], pa.int64())}))
    r = _write(t, op, 1, 1, s4, small)
    assert [e.code for e in r.row_errors] == ["CHANGED"] and _n(t, 1) == 7
    # a row deleted after the read is not found, whatever the precondition
    t.delete(pa.table({"k": pa.array([1], pa.int64())}))
    r = _write(t, op, 1, 1, s4, small)
    assert [e.code for e in r.row_errors] == ["NOT_FOUND"]


def test_reinsertion_earlier_in_the_same_op_is_gone(tmp_path):
    """A coalesced op: one statement's DELETE and INSERT of a key, then another's checked
    UPDATE of it (read before both): the key's row is another one - NOT_FOUND."""
    t = _tablet(tmp_path)
    t.insert(pa.table({"k": pa.array([1, 2], pa.int64()), "n": pa.array([0, 0], pa.int64())}))
    s0 = t.current_timestamp()
    r = t.write([int(OpType.DELETE), int(OpType.INSERT), int(OpType.UPDATE),
                 int(OpType.UPDATE), int(OpType.UPDATE)], pa.table({
                     "k": pa.array([1, 1, 1, 2, 2], pa.int64()),
                     "n": pa.array([None, 8, 1, 5, 1], pa.int64()),
                     READ_TS_COLUMN: pa.array([-1, -1, s0, -1, s0], pa.int64())}))
    assert [(e.index, e.code) for e in r.row_errors] == [(2, "NOT_FOUND"), (4, "CHANGED")]
    assert (_n(t, 1), _n(t, 2)) == (8, 5)


def test_replay_ignores_changes_after_the_op(tmp_path):
    """An op that applied at T must apply again on replay even though flushed files
    already hold a later change of the same row (its check ignores timestamps >= T)."""
    t = _tablet(tmp_path)
    t.insert(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([0], pa.int64())}))
    t.flush_mrs()
    s0 = t.current_timestamp()
    r = _write(t, OpType.UPDATE, 1, 1, s0, False)
    assert r.num_applied == 1
    t.update(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([2], pa.int64())}))
    t.flush_dms()       # both mutations in a REDO file, the WAL still holds both ops
    t.close()
    t = Tablet.open(t.path, CFG)
    assert _n(t, 1) == 2
    assert t.write(OpType.UPDATE, pa.table({"k": pa.array([1], pa.int64()),
                                             "n": pa.array([3], pa.int64())})).num_applied == 1
    t.close()
    t = Tablet.open(t.path, CFG)
    assert _n(t, 1) == 3


def test_two_checked_updates_of_one_key_in_one_op(tmp_path):
    """Two statements' UPDATEs of one key joined in one op (the write coalescer does this
    for concurrent writes, a cluster's for every small one): the first applies, the
    second sees it as a change (same timestamp: an earlier round of the op), not a
    collapse of the two into the last."""
    t = _tablet(tmp_path)
    t.insert(pa.table({"k": pa.array([1, 2], pa.int64()), "n": pa.array([5, 5], pa.int64())}))
    s0 = t.current_timestamp()
    r = t.write(OpType.UPDATE, pa.table({
        "k": pa.array([1, 2, 1], pa.int64()), "n": pa.array([6, 6, 6], pa.int64()),
        READ_TS_COLUMN: pa.array([s0, s0, s0], pa.int64())}))
    assert r.num_applied == 2
    assert [(e.index, e.code) for e in r.row_errors] == [(2, "CHANGED")]
    assert (_n(t, 1), _n(t, 2)) == (6, 6)
    # without preconditions the old collapse stays: both count, the last value wins
    r = t.write(OpType.UPDATE, pa.table({"k": pa.array([1, 1], pa.int64()),
                                         "n": pa.array([7, 8], pa.int64())}))
    assert r.num_applied == 2 and _n(t, 1) == 8


def _outcome(r):
    return r.num_applied, [(e.index, e.code) for e in r.row_errors]


@pytest.mark.parametrize("small", [True, "one", False])
@pytest.mark.parametrize("flush", ["dms", "mrs"])
def test_replay_decides_every_row_as_the_original_apply(tmp_path, monkeypatch, small, flush):
    """WAL replay - and a Raft follower, which applies a committed entry the same way
    (`Tablet.apply` with the entry's index and timestamp) - gives every row of every op
    the outcome the original apply gave it, although the flushed files already hold later
    changes of the checked rows (flush "dms": an update and a delete in a REDO file) or
    the replayed ops' own inserts (flush "mrs": the MemRowSet's rows in a DiskRowSet, while
    the unflushed DeltaMemStore keeps the replay's start early): the check looks at (S, T)
    only, and an insert a flushed file holds still counts. The outcome is no detail: a
    replica keeps it in its result tracker and answers a retried request with it, so a
    replayed CHANGED for a row that was written would have the statement read it again
    and write it a second time (and a replayed insert counted 0 would answer `INSERT 0
    0` for a row it inserted)."""
    t = _tablet(tmp_path)
    one = lambda k, n: pa.table({"k": pa.array([k], pa.int64()),  # noqa: E731
                                 "n": pa.array([n], pa.int64())})
    t.insert(pa.table({"k": pa.array([1, 2, 3], pa.int64()),
                       "n": pa.array([0, 0, 0], pa.int64())}))
    t.flush_mrs()                                   # rows 1-3 in a DiskRowSet
    original = []
    s0 = t.current_timestamp()                      # the checked rows' read
    for write in (
            lambda: t.insert(one(4, 0)),            # in the MemRowSet: replay starts here
            lambda: _write(t, OpType.UPDATE, 1, 1, s0, small),   # applied; then changed:
            lambda: t.update(one(1, 2)),
            lambda: _write(t, OpType.UPDATE, 2, 1, s0, small),   # applied; then deleted
            lambda: t.delete(pa.table({"k": pa.array([2], pa.int64())})),  # and inserted
            lambda: t.insert(one(2, 9)),            # again (a MemRowSet row)
            lambda: t.update(one(3, 5)),
            lambda: _write(t, OpType.UPDATE, 3, 1, s0, small),   # CHANGED
            lambda: _write(t, OpType.DELETE, 1, None, s0, small),  # CHANGED
            lambda: _write(t, OpType.UPDATE, 2, 1, s0, small)):  # NOT_FOUND (gone)
        original.append(_outcome(write()))
    assert [o[0] for o in original] == [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    before = {k: _n(t, k) for k in (1, 2, 3, 4)}
    assert before == {1: 2, 2: 9, 3: 5, 4: 0}
    if flush == "dms":
        t.flush_dms()           # the DiskRowSet's REDO file: every mutation of rows 1-3
    else:
        t.flush_mrs()           # rows 4 and 2's new version: in a new DiskRowSet
    t.close()

    replayed = []
    real = Tablet.apply

    def recording(self, op, timestamp=None, *, index=None):
        r = real(self, op, timestamp, index=index)
        if index is not None:
            replayed.append(_outcome(r))
        return r
    monkeypatch.setattr(Tablet, "apply", recording)
    t = Tablet.open(t.path, CFG)
    assert t.replayed_ops == len(original)
    assert replayed == original
    assert {k: _n(t, k) for k in (1, 2, 3, 4)} == before
