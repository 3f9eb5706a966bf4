"""wire/stream_sink.py on a real embedded catalog, without Spark: the replays Spark makes
after a crash, done by hand. Batch N half applied by a crashed run, then replayed by a new
run: every row is in once, no duplicate-key error for the rows the first attempt applied,
while a genuine duplicate (a key an earlier batch wrote, or the same key with other
values) is still reported; a committed batch replayed writes nothing; a failed batch stays
failed; upsert mode; the progress records are pruned."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.catalog import Catalog
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import TabletConfig
from engine.types import DataType as T
from wire import stream_sink as ss
from wire.flight import write_batches

SCHEMA = Schema([ColumnSchema("id", T.INT64), ColumnSchema("g", T.STRING),
                 ColumnSchema("v", T.DOUBLE, nullable=True)], key=["id", "g"])


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(str(tmp_path), config=TabletConfig(fsync=False, wal_sync="never"),
                     clock=LogicalClock())
    c.create_table("t", SCHEMA)
    yield c
    c.close()


def rows(ids, v=1.0, g="a"):
    return pa.table({"id": pa.array(ids, pa.int64()), "g": [g] * len(ids),
                     "v": pa.array([None if i % 7 == 0 else v * i for i in ids], pa.float64())})


def write(cat, sb, tbl, mode="insert"):
    return ss.write_batch(cat, "t", sb, mode, iter(tbl.to_batches(max_chunksize=7)),
                          write_batches)


def contents(cat):
    return sorted(tuple(r.values()) for r in cat.table("t").scan_table().to_pylist())


def test_a_half_applied_batch_replayed_by_a_new_run_applies_each_row_once(cat):
    s0 = ss.SinkBatch("t:q", 0, "run1")
    assert write(cat, s0, rows(range(0, 20)))["failed"] == 0
    ss.commit_batch(cat, s0, ss.COMMITTED, {"rows": 20})
    # batch 1, run 1: one task wrote rows 20..29 of 20..39 when the driver was killed
    s1 = ss.SinkBatch("t:q", 1, "run1")
    assert write(cat, s1, rows(range(20, 30)))["applied"] == 10
    # run 2 replays batch 1: 20..39 again, plus one genuine duplicate of batch 0's key 5
    # and key 21 twice in the replay (the second is a real duplicate in any attempt)
    replay = pa.concat_tables([rows(range(20, 40)), rows([5]), rows([21])])
    s = write(cat, ss.SinkBatch("t:q", 1, "run2"), replay)
    assert (s["already_applied"], s["applied"], s["failed"]) == (10, 10, 2)
    assert s["failed_by_code"] == {"ALREADY_PRESENT": 2}
    assert contents(cat) == sorted(tuple(r.values()) for r in rows(range(0, 40)).to_pylist())


def test_a_replayed_key_with_other_values_is_a_duplicate(cat):
    write(cat, ss.SinkBatch("t:q", 0, "run1"), rows([1, 2, 3]))
    s = write(cat, ss.SinkBatch("t:q", 0, "run2"), rows([1, 2, 3], v=2.0))
    # row 0 has v NULL in both (null-equal): the first attempt's; 1..3 differ
    assert (s["already_applied"], s["failed"]) == (0, 3)
    s = write(cat, ss.SinkBatch("t:q", 0, "run3"), rows([1, 2, 3]))
    assert (s["already_applied"], s["failed"]) == (3, 0)


def test_a_task_retry_in_the_same_run_is_a_replay(cat):
    write(cat, ss.SinkBatch("t:q", 4, "run1"), rows([1, 2]))
    s = write(cat, ss.SinkBatch("t:q", 4, "run1", attempt=1), rows([1, 2, 3]))
    assert (s["already_applied"], s["applied"], s["failed"]) == (2, 1, 0)
    # another task of the same run and attempt: not a replay, duplicates are errors
    s = write(cat, ss.SinkBatch("t:q", 4, "run1"), rows([3]))
    assert s["failed"] == 1


def test_committed_and_failed_batches_are_not_written_again(cat):
    sb = ss.SinkBatch("t:q", 7, "run1")
    write(cat, sb, rows([1]))
    ss.commit_batch(cat, sb, ss.COMMITTED, {"rows": 1, "applied": 1, "failed": 0})
    s = write(cat, ss.SinkBatch("t:q", 7, "run2"), rows([1, 2]))
    assert s["skipped"] == ss.COMMITTED and s["rows"] == 0
    assert contents(cat) == sorted(tuple(r.values()) for r in rows([1]).to_pylist())
    bad = ss.SinkBatch("t:q", 8, "run2")
    ss.commit_batch(cat, bad, ss.FAILED, {"rows": 1, "failed": 1}, "ALREADY_PRESENT ...")
    assert write(cat, ss.SinkBatch("t:q", 8, "run3"), rows([9]))["skipped"] == ss.FAILED
    assert ss.batch_record(cat, "t:q", 8)["message"] == "ALREADY_PRESENT ..."
    # other sinks are independent
    assert write(cat, ss.SinkBatch("t:other", 7, "r"), rows([50]))["applied"] == 1


def test_upsert_replays_are_idempotent(cat):
    write(cat, ss.SinkBatch("t:q", 0, "run1"), rows([1, 2]), "upsert")
    s = write(cat, ss.SinkBatch("t:q", 0, "run2"), rows([1, 2, 3]), "upsert")
    assert (s["applied"], s["failed"]) == (3, 0)
    assert contents(cat) == sorted(tuple(r.values()) for r in rows([1, 2, 3]).to_pylist())


def test_old_progress_records_are_pruned(cat):
    for b in range(ss.RETAIN_BATCHES + 5):
        ss.commit_batch(cat, ss.SinkBatch("t:q", b, "r"), ss.COMMITTED, {})
    prog = cat.table(ss.PROGRESS_TABLE).scan_table().to_pylist()
    assert sorted(r["batch_id"] for r in prog) == list(range(5, ss.RETAIN_BATCHES + 5))
