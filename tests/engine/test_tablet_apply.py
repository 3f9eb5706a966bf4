"""`Tablet.apply(op, timestamp)`: the one apply path, fed timestamps chosen elsewhere.

A replicated tablet's followers apply their leader's ops with the leader's timestamps.
Checked differentially: a random op stream is written to tablet A (which picks its own
timestamps), and the same ops are applied to tablet B with A's timestamps, B flushing and
compacting at other moments than A. B must give the same per-row results, and read the
same rows as A at every timestamp of the stream, before and after it is reopened (WAL
replay takes the same path).
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from engine import errors
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import OpType, Tablet, TabletConfig
from engine.tablet.write_op import WriteOp
from engine.types import DataType

CFG = TabletConfig(page_rows=8, drs_target_bytes=2048, fsync=False)
SCHEMA = Schema([ColumnSchema("k", DataType.INT32), ColumnSchema("v", DataType.INT64,
                                                                  nullable=True)], key=["k"])
OPS = [OpType.INSERT, OpType.UPSERT, OpType.UPDATE, OpType.DELETE]


def _rows(t: Tablet, ts: int) -> list[tuple]:
    tab = t.scan_table(snapshot=ts)
    return sorted(zip(tab.column("k").to_pylist(), tab.column("v").to_pylist()))


def _maintain(t: Tablet, rng: random.Random) -> None:
    x = rng.random()
    if x < 0.15:
        t.flush_mrs()
    elif x < 0.25:
        t.flush_dms()
    elif x < 0.3:
        t.compact_deltas()
    elif x < 0.33 and t.num_rowsets() >= 2:
        t.compact_rowsets([r["id"] for r in t.rowsets_info()])


@pytest.mark.parametrize("seed", range(4))
def test_follower_applies_leader_timestamps(tmp_path, seed):
    rng = random.Random(seed)
    a = Tablet.create(str(tmp_path / "a"), SCHEMA, CFG, LogicalClock())
    b = Tablet.create(str(tmp_path / "b"), SCHEMA, CFG, LogicalClock())
    stamps = []
    for _ in range(60):
        n = rng.randint(1, 12)
        ops = np.array([rng.choice(OPS) for _ in range(n)], dtype=np.int8)
        rows = pa.table({"k": pa.array([rng.randint(0, 30) for _ in range(n)], pa.int32()),
                         "v": pa.array([rng.randint(0, 99) for _ in range(n)], pa.int64())})
        ra = a.write(ops, rows)
        rb = b.apply(WriteOp(ops, rows), ra.timestamp)
        assert (rb.timestamp, rb.num_applied, rb.row_errors) == (
            ra.timestamp, ra.num_applied, ra.row_errors)
        stamps.append(ra.timestamp)
        _maintain(a, rng)
        _maintain(b, rng)
    want = {ts: _rows(a, ts) for ts in stamps}
    assert {ts: _rows(b, ts) for ts in stamps} == want
    b.close()
    b = Tablet.open(str(tmp_path / "b"), CFG, LogicalClock())
    assert {ts: _rows(b, ts) for ts in stamps} == want
    r = b.insert({"k": [1000], "v": [1]})  # its own clock resumes after the leader's
    assert r.timestamp > stamps[-1]
    a.close()
    b.close()


def test_a_timestamp_not_after_the_last_is_refused_and_leaves_no_trace(tmp_path):
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, CFG, LogicalClock())
    op = WriteOp(np.array([OpType.INSERT], np.int8),
                 pa.table({"k": pa.array([1], pa.int32()), "v": pa.array([5], pa.int64())}))
    r = t.apply(op, 100)
    assert r.timestamp == 100 and r.num_applied == 1
    last = t.log.last_index
    for ts in (100, 99):
        with pytest.raises(errors.InvalidArgument, match="not after the last applied"):
            t.apply(op, ts)
    assert t.log.last_index == last
    assert t.count_rows() == 1
    with pytest.raises(errors.InvalidArgument, match="timestamp"):
        t.apply(op, index=last + 1)
    t.close()
