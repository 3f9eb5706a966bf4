"""Table.changes / Tablet.changes (the change feed the Spark change source reads) against a
model: random write batches of INSERT / UPSERT / UPDATE / DELETE over a small key space,
with MemRowSet flushes and delta compactions in between; every successful row op is one
expected change (key, commit timestamp, the row it left, deleted?). For random windows
(s, e], `changes(s, e)` must return exactly the model's changes with s < ts <= e, each
once, in commit order per key; a start below the ancient history mark is refused."""

from __future__ import annotations

import random
import threading

import pyarrow as pa
import pytest

from engine import errors
from engine.catalog import Catalog, HashBucketSchema, PartitionSchema
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import OpType, Tablet, TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never", history_max_age_s=1e12, page_rows=16)
SCHEMA = Schema([ColumnSchema("k", T.INT64), ColumnSchema("v", T.STRING, nullable=True)],
                key=["k"])
OPS = [OpType.INSERT, OpType.UPSERT, OpType.UPDATE, OpType.DELETE]


@pytest.fixture
def table(tmp_path):
    c = Catalog.open(str(tmp_path), config=CFG, clock=LogicalClock(), parallelism=2)
    c.create_table("t", SCHEMA, PartitionSchema.create(SCHEMA, [HashBucketSchema(("k",), 3)]))
    yield c, c.table("t")
    c.close()


def _run_workload(cat, t, rng: random.Random, steps: int):
    """Apply random batches; returns (expected changes [(key, ts, v, deleted)], stamps)."""
    meta = t.metadata
    state: dict[int, str | None] = {}
    expected, stamps = [], [t.current_timestamp()]
    for step in range(steps):
        keys = rng.sample(range(40), rng.randint(1, 6))
        ops = [rng.choice(OPS) for _ in keys]
        vals = [f"s{step}-{k}" if rng.random() < 0.8 else None for k in keys]
        rows = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(vals, pa.string())})
        r = t.write([int(o) for o in ops], rows)
        failed = {e.index for e in r.row_errors}
        for i, (k, op, v) in enumerate(zip(keys, ops, vals)):
            live = k in state
            ok = {OpType.INSERT: not live, OpType.UPDATE: live, OpType.DELETE: live,
                  OpType.UPSERT: True}[op]
            assert ok == (i not in failed), (step, k, op, live)
            if not ok:
                continue
            tid = meta.tablet_ids[meta.partition_schema.partition_index_for_key_values((k,))]
            ts = r.tablet_timestamps[tid]
            if op == OpType.DELETE:
                deleted_v = state.pop(k)
                expected.append((k, ts, deleted_v, True))
            else:
                state[k] = v
                expected.append((k, ts, v, False))
        stamps.append(r.timestamp)
        if rng.random() < 0.15:   # push history into DiskRowSets: UNDO / REDO files
            for tid in meta.tablet_ids:
                tab = cat.tablet(tid)
                tab.flush_mrs()
                if rng.random() < 0.5:
                    tab.compact_deltas()
    return expected, stamps


def _got(t, s, e):
    out = t.changes(s, e)
    assert out.schema.names == ["k", "v", "is_deleted", "commit_ts"]
    return [(r["k"], r["commit_ts"], r["v"], r["is_deleted"]) for r in out.to_pylist()]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_changes_match_the_model(table, seed):
    cat, t = table
    rng = random.Random(seed)
    expected, stamps = _run_workload(cat, t, rng, 120)
    windows = [(stamps[0], stamps[-1])] + [tuple(sorted(rng.sample(stamps, 2)))
                                          for _ in range(15)]
    for s, e in windows:
        got = _got(t, s, e)
        want = [x for x in expected if s < x[1] <= e]
        # exactly once: no duplicates, nothing missing; a deleted row carries its last values
        assert sorted(got, key=repr) == sorted(want, key=repr), (s, e)
        per_key: dict[int, list[int]] = {}
        for k, ts, _, _ in got:
            per_key.setdefault(k, []).append(ts)
        assert all(v == sorted(v) for v in per_key.values())   # commit order per key
    # consecutive windows partition the history: a stream of micro-batches sees it all once
    cuts = sorted(set(rng.sample(stamps, 8)) | {stamps[0], stamps[-1]})
    pieces = [x for a, b in zip(cuts, cuts[1:]) for x in _got(t, a, b)]
    assert sorted(pieces, key=repr) == sorted(expected, key=repr)


def test_changes_refuses_a_start_below_the_ancient_history_mark(tmp_path):
    cat = Catalog.open(str(tmp_path), config=TabletConfig(fsync=False, wal_sync="never",
                                                          history_max_age_s=5),
                       clock=LogicalClock())
    try:
        cat.create_table("t", SCHEMA)
        t = cat.table("t")
        for i in range(20):
            t.insert(pa.table({"k": pa.array([i], pa.int64()), "v": ["x"]}))
        ahm = t.ancient_history_mark()
        assert ahm > 0
        with pytest.raises(errors.SnapshotTooOld) as e:
            t.changes(ahm - 1, t.current_timestamp())
        assert e.value.sqlstate == "22023"
        assert len(t.changes(ahm, t.current_timestamp())) > 0
    finally:
        cat.close()


class _PausingClock:
    """The tablet's clock, except that the first `now()` in thread `who` stops for a while
    after taking its timestamp: a writer caught between its timestamp and its MVCC start."""

    def __init__(self, inner):
        self.inner, self.who, self.ts = inner, None, None
        self.taken, self.go = threading.Event(), threading.Event()

    def now(self):
        ts = self.inner.now()
        if threading.get_ident() == self.who and self.ts is None:
            self.ts = ts
            self.taken.set()
            self.go.wait(10)
        return ts

    def update(self, ts):
        self.inner.update(ts)

    def update_bounded(self, ts):
        self.inner.update_bounded(ts)

    @property
    def is_hybrid(self):
        return self.inner.is_hybrid


def test_a_read_at_a_fresh_timestamp_waits_for_a_writer_that_holds_an_older_one(tmp_path):
    """A change stream on an idle table moves its offset to a fresh timestamp T
    (Table.safe_now) and reads (offset, T] later: `wait_safe(T)` must cover an op that took
    its timestamp (<= T) but is not yet in MVCC, else a read at T misses it and the next
    window starts after it (a change lost). The writer here stops right after its
    timestamp; the read at T must wait for it and see its row."""
    tab = Tablet.create(str(tmp_path / "t"), SCHEMA, config=CFG, clock=LogicalClock())
    try:
        clock = _PausingClock(tab.clock)
        tab.clock = clock

        def write():
            clock.who = threading.get_ident()
            tab.insert(pa.table({"k": pa.array([1], pa.int64()), "v": ["x"]}))
        w = threading.Thread(target=write)
        w.start()
        assert clock.taken.wait(10)
        fresh = clock.inner.now()            # after the paused writer's timestamp
        assert fresh > clock.ts
        seen = []
        r = threading.Thread(target=lambda: seen.append(tab.changes(0, fresh).num_rows))
        r.start()
        r.join(0.5)                          # the read may not finish before the writer
        clock.go.set()
        w.join(10)
        r.join(10)
        assert seen == [1]
        assert tab.changes(0, fresh).num_rows == 1
    finally:
        tab.close()


def test_safe_now_is_fresh_and_safe_on_every_tablet(table):
    """Table.safe_now: at or after every write so far, on every tablet, and every later
    write commits above it (a window ending at it is final)."""
    _cat, t = table
    t.insert(pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))
    before = t.current_timestamp()
    now = t.safe_now()
    assert now > before
    r = t.insert(pa.table({"k": pa.array([4], pa.int64()), "v": ["d"]}))
    assert min(r.tablet_timestamps.values()) > now
    assert len(t.changes(0, now)) == 3 and len(t.changes(now, t.current_timestamp())) == 1
