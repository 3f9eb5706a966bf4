"""Table: routed writes with per-row errors, scans, lookups and diff scans over several
hash x range tablets, checked against a Python model; one snapshot across tablets while
another thread writes."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from engine import errors
from engine.catalog import (
    NO_PARTITION,
    Catalog,
    HashBucketSchema,
    PartitionRowError,
    PartitionSchema,
    RangeSpec,
)
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate as P
from engine.tablet import OpType, TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never", history_max_age_s=1e12, page_rows=64)


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


SCHEMA = Schema([C("k", T.INT32), C("g", T.STRING), C("v", T.INT64)], key=["k", "g"])
GROUPS = ["a", "b", "c", "d", "e"]
# HASH(g) 3 x RANGE(k) [0,100) [100,200) [300,400): keys 200..299 and <0 / >=400 uncovered
RANGES = [(0, 100), (100, 200), (300, 400)]


def covered(k: int) -> bool:
    return any(lo <= k < hi for lo, hi in RANGES)


@pytest.fixture
def cat(tmp_path):
    c = Catalog.open(str(tmp_path), config=CFG, clock=LogicalClock(), parallelism=4)
    ps = PartitionSchema.create(SCHEMA, [HashBucketSchema(("g",), 3)], ["k"],
                                [RangeSpec(lo, hi) for lo, hi in RANGES])
    c.create_table("t", SCHEMA, ps)
    yield c
    c.close()


def batch(keys, vals, ops=None):
    t = pa.table({"k": pa.array([k for k, _ in keys], pa.int32()),
                  "g": [g for _, g in keys], "v": pa.array(vals, pa.int64())})
    return t


def apply_model(model: dict, ops, keys, vals) -> dict[int, str]:
    """Kudu semantics row by row; returns {row index: expected error code}."""
    errs = {}
    for i, (op, key, v) in enumerate(zip(ops, keys, vals)):
        if not covered(key[0]):
            errs[i] = NO_PARTITION
        elif op == OpType.INSERT:
            if key in model:
                errs[i] = "ALREADY_PRESENT"
            else:
                model[key] = v
        elif op == OpType.UPSERT:
            model[key] = v
        elif op == OpType.UPDATE:
            if key in model:
                model[key] = v
            else:
                errs[i] = "NOT_FOUND"
        else:
            if key in model:
                del model[key]
            else:
                errs[i] = "NOT_FOUND"
    return errs


def table_rows(t, **kw) -> dict:
    got = t.scan_table(["k", "g", "v"], **kw).to_pylist()
    out = {(r["k"], r["g"]): r["v"] for r in got}
    assert len(out) == len(got)
    return out


def test_write_scan_lookup_diff_against_model(cat):
    t = cat.table("t")
    rng = random.Random(7)
    model: dict = {}
    history = []  # (timestamp, model copy)
    opts = [OpType.INSERT, OpType.UPSERT, OpType.UPDATE, OpType.DELETE]
    for step in range(12):
        n = rng.choice([5, 50, 700])  # 700 rows: tablets written in parallel
        keys = [(rng.randrange(-20, 420), rng.choice(GROUPS)) for _ in range(n)]
        ops = [rng.choice(opts) for _ in range(n)]
        vals = [rng.randrange(1000) for _ in range(n)]
        want_errs = apply_model(model, ops, keys, vals)
        r = t.write(np.array([int(o) for o in ops], dtype=np.int8), batch(keys, vals))
        got_errs = {e.index: e.code for e in r.row_errors}
        assert got_errs == want_errs
        assert r.num_applied == n - len(want_errs)
        assert [e.index for e in r.row_errors] == sorted(got_errs)
        for e in r.row_errors:
            assert e.key == keys[e.index]
            if e.code == NO_PARTITION:
                assert isinstance(e, PartitionRowError) and e.sqlstate == "23514"
                assert repr(keys[e.index][0]) in e.message and '"t"' in e.message
        if r.tablet_timestamps:
            assert r.timestamp == max(r.tablet_timestamps.values())
        history.append((t.current_timestamp(), dict(model)))
        if step == 5:  # move some tablets' rows to DiskRowSets
            for tid in cat.get_table("t").tablet_ids[::2]:
                cat.tablet(tid).flush_mrs()
    assert table_rows(t) == model
    assert t.count_rows() == len(model)
    for ts, snap in history[::3]:  # time travel through each tablet at one timestamp
        assert table_rows(t, snapshot=ts) == snap
    for key in list(model)[:30] + [(250, "a"), (5, "zz"), (-1, "a")]:
        row = t.lookup(key)
        assert (row and row["v"]) == model.get(key)
    # predicates, including on the partition columns, prune and still return all matches
    for preds in ([P.equal("g", "b")], [P.range("k", 90, 310)], [P.in_list("g", ["a", "e"]),
                  P.less("k", 150)], [P.equal("k", 5), P.equal("g", "c")]):
        scan = t.scan(["k", "g", "v"], preds)
        got = {(r["k"], r["g"]): r["v"] for b in scan for r in b.to_pylist()}
        want = {key: v for key, v in model.items() if all(
            _match(p, {"k": key[0], "g": key[1], "v": v}) for p in preds)}
        assert got == want
        assert scan.stats.tablets_scanned + scan.stats.tablets_pruned == 9
        assert scan.stats.rows_returned == len(want)
    assert t.scan(predicates=[P.equal("g", "b")]).stats.tablets_scanned == 3
    assert t.scan(predicates=[P.equal("k", 5), P.equal("g", "c")]).stats.tablets_scanned == 1
    # diff scan between two points of history
    (t0, m0), (t1, m1) = history[3], history[8]
    d = {(r["k"], r["g"]): r for r in t.diff_scan(t0, t1).to_pylist()}
    changed = {key for key in set(m0) | set(m1) if m0.get(key) != m1.get(key)}
    assert changed <= set(d)
    for key, r in d.items():
        if key in m1:
            assert not r["is_deleted"] and r["v"] == m1[key]
        else:
            assert r["is_deleted"] and key in m0


def _match(p, row) -> bool:
    v = row[p.column]
    if p.kind == "in":
        return v in p.values
    if p.lower is not None and not (v >= p.lower if p.lower_inclusive else v > p.lower):
        return False
    if p.upper is not None and not (v <= p.upper if p.upper_inclusive else v < p.upper):
        return False
    return True


def test_bad_keys_and_dict_input(cat):
    t = cat.table("t")
    r = t.insert({"k": [1, None, 2, 250, 3], "g": ["a", "a", None, "a", "b"],
                  "v": [1, 2, 3, 4, 5]})
    assert [(e.index, e.code) for e in r.row_errors] == [
        (1, "NOT_NULL"), (2, "NOT_NULL"), (3, NO_PARTITION)]
    assert 'column "k"' in r.row_errors[0].message and r.row_errors[2].key == (250, "a")
    assert r.num_applied == 2
    # values of the wrong type in a non-key column: reported by the tablet, mapped back
    r = t.insert({"k": [10, 11, 12], "g": ["a", "b", "c"], "v": [1, "x", 3]})
    assert [(e.index, e.code) for e in r.row_errors] == [(1, "INVALID")]
    assert t.lookup((12, "c"))["v"] == 3 and t.lookup((11, "b")) is None
    r = t.insert({"k": [20, "bad", 330], "g": ["a", "b", "c"], "v": [1, 2, 3]})
    assert [(e.index, e.code) for e in r.row_errors] == [(1, "INVALID")]
    assert t.lookup((330, "c"))["v"] == 3
    with pytest.raises(errors.InvalidArgument, match="key column 'g' missing"):
        t.insert({"k": [1], "v": [1]})
    with pytest.raises(errors.ColumnNotFound):
        t.insert({"k": [1], "g": ["a"], "nope": [1]})
    with pytest.raises(errors.InvalidArgument, match="key has 1 values"):
        t.lookup((1,))
    assert t.write(OpType.INSERT, batch([], [])).num_applied == 0


def test_scan_with_unopened_and_empty_tablets(cat):
    cat.close()  # reopen: tablets are opened lazily, in parallel, by the first scan
    c2 = Catalog.open(cat.data_dir, config=CFG, clock=LogicalClock())
    try:
        t = c2.table("t")
        assert t.count_rows() == 0
        sc = t.scan()
        assert list(sc) == [] and sc.timestamp == 0
        assert t.scan_table([]).num_rows == 0
    finally:
        c2.close()


def test_snapshot_scans_while_writing(cat):
    """Every scan sees exactly the tablet ops with timestamp <= its snapshot, consistently
    across tablets, and the same snapshot read again later gives the same rows."""
    t = cat.table("t")
    keys = [(k, g) for k in list(range(0, 200)) + list(range(300, 400)) for g in "abc"]
    ps = cat.get_table("t").partition_schema
    tids = cat.get_table("t").tablet_ids
    tablet_of = {key: tids[ps.partition_index_for_key({"k": key[0], "g": key[1]})]
                 for key in keys}
    log = []  # (tablet timestamps, {key: v}) of each write
    stop = threading.Event()

    def writer():
        rng = random.Random(1)
        i = 0
        while not stop.is_set() and i < 40:
            i += 1
            sample = rng.sample(keys, 600)  # >= PARALLEL_WRITE_MIN_ROWS: tablets in parallel
            vals = [i] * len(sample)
            r = t.upsert(batch(sample, vals))
            assert r.ok
            log.append((r.tablet_timestamps, dict(zip(sample, vals))))

    th = threading.Thread(target=writer)
    th.start()
    seen = []
    try:
        while th.is_alive() and len(seen) < 60:
            sc = t.scan(["k", "g", "v"])
            got = {(r["k"], r["g"]): r["v"] for b in sc for r in b.to_pylist()}
            seen.append((sc.timestamp, got))
            time.sleep(0.005)
    finally:
        stop.set()
        th.join()
    assert len(log) > 10 and len({ts for ts, _ in seen}) > 5
    for ts, got in seen:
        want: dict = {}
        for stamps, writes in log:  # writes were issued in order: later ones overwrite
            for key, v in writes.items():
                if stamps[tablet_of[key]] <= ts:
                    want[key] = v
        assert got == want
        assert table_rows(t, snapshot=ts) == got  # repeatable


def test_string_view_columns_are_routed(cat):
    # parquet readers (tpchgen output) produce string_view; routing must still split rows
    rows = pa.table({"k": pa.array([1, 2, 150], pa.int32()),
                     "g": pa.array(["a", "b", "c"], pa.string_view()),
                     "v": pa.array([1, 2, 3], pa.int64())})
    r = cat.table("t").insert(rows)
    assert r.num_applied == 3 and not r.row_errors
    assert sorted(cat.table("t").scan_table(["k", "g"]).to_pylist(),
                  key=lambda d: d["k"]) == [{"k": 1, "g": "a"}, {"k": 2, "g": "b"},
                                            {"k": 150, "g": "c"}]


def test_scan_partition_reads_one_tablet_at_a_snapshot(cat):
    """One scan per partition (the Flight / Spark split) covers the table exactly once."""
    t = cat.table("t")
    keys = [(k, g) for k in range(0, 400, 7) if covered(k) for g in GROUPS]
    t.insert(batch(keys, list(range(len(keys)))))
    ts = t.current_timestamp()
    t.upsert(batch(keys[:5], [-1] * 5))  # after the snapshot: invisible at ts
    n = len(t.partition_schema.partitions)
    parts = []
    for i in range(n):
        sc = t.scan_partition(i, ["k", "g", "v"], snapshot=ts)
        rows = pa.Table.from_batches(list(sc), schema=sc_schema(t)).to_pylist()
        assert sc.stats.tablets_scanned == 1 and sc.stats.tablets_total == n
        # every row of partition i belongs to tablet i
        for r in rows:
            assert t.partition_schema.partition_index_for_key({"k": r["k"], "g": r["g"]}) == i
        parts.extend(rows)
    assert sorted((r["k"], r["g"], r["v"]) for r in parts) == sorted(
        (k, g, v) for (k, g), v in zip(keys, range(len(keys))))
    # predicates still prune: a partition the predicate rules out reads nothing
    pruned = [i for i in range(n) if i not in t.partition_schema.prune([P.equal("g", "a")])]
    assert pruned
    sc = t.scan_partition(pruned[0], ["k"], [P.equal("g", "a")], snapshot=ts)
    assert list(sc) == [] and sc.stats.tablets_scanned == 0
    with pytest.raises(errors.InvalidArgument):
        t.scan_partition(n, ["k"])


def sc_schema(t):
    return t.schema.arrow_schema(["k", "g", "v"])


def test_a_write_that_must_not_block_declines_a_busy_tablet(cat):
    """`write_small_deferred(..., never_block=True)` (the wire's key writes on its event
    loop): a tablet whose write lock is held (maintenance persisting metadata) or whose
    in-memory stores are past the soft limit declines with None and writes nothing; the
    same write then goes through, and blocking callers are unaffected."""
    t = cat.table("t")
    row = {"k": [5], "g": ["a"], "v": [50]}
    finish = t.write_small_deferred(OpType.INSERT, row, never_block=True)
    assert finish is not None and finish().num_applied == 1
    # every tablet of the table busy: its write lock held by another thread
    tablets = [s.tablet() for s in cat.lease_tablets(
        t.id, lambda m: list(m.tablet_ids)).handles]
    held, release = threading.Event(), threading.Event()

    def hold():
        for tb in tablets:
            tb._write_lock.acquire()
        held.set()
        release.wait(10)
        for tb in tablets:
            tb._write_lock.release()
    th = threading.Thread(target=hold)
    th.start()
    held.wait(10)
    try:
        assert t.write_small_deferred(OpType.UPDATE, {"k": [5], "g": ["a"], "v": [51]},
                                      never_block=True) is None
    finally:
        release.set()
        th.join(10)
    assert table_rows(t) == {(5, "a"): 50}                        # nothing was written
    # past the soft memory limit: declined too, while a blocking write waits and succeeds
    for tb in tablets:
        tb.config = dataclasses.replace(tb.config, memory_limit_bytes=1 << 40,
                                        memory_soft_fraction=0.0)
    assert t.write_small_deferred(OpType.UPDATE, {"k": [5], "g": ["a"], "v": [52]},
                                  never_block=True) is None
    assert table_rows(t) == {(5, "a"): 50}
    assert t.write_small(OpType.UPDATE, {"k": [5], "g": ["a"], "v": [53]}).num_applied == 1
    assert table_rows(t) == {(5, "a"): 53}


def test_lookup_now_equals_lookup_across_ddl(cat):
    """`Table.lookup_now` (the event loop's point lookup: metadata and routing kept per
    table version, a pin instead of a lease) answers every key as `lookup` does, on one
    long-lived facade, through each DDL that changes what a key means: a new range
    partition (a key that had no tablet gets one), a dropped one, ADD / DROP / RENAME
    COLUMN, and a drop and re-create of the table."""
    from engine.catalog.table import NOT_NOW
    t = cat.table("t")
    rng = random.Random(11)
    keys = [(k, g) for k in (5, 150, 250, 350, 450) for g in GROUPS[:3]]
    ok = [(k, g) for k, g in keys if covered(k)]
    t.insert(batch(ok, list(range(len(ok)))))

    def check(columns=None):
        for key in keys + [(rng.randrange(-5, 500), rng.choice(GROUPS))]:
            cols = columns if rng.random() < 0.7 else None
            now = t.lookup_now(key, cols)
            assert now is not NOT_NOW and now == t.lookup(key, cols), (key, cols)
    check(["v"])
    cat.add_range_partition("t", RangeSpec(200, 300))
    t.insert(batch([(250, "a")], [99]))
    assert t.lookup_now((250, "a"), ["v"]) == {"v": 99}
    check(["v"])
    cat.drop_range_partition("t", RangeSpec(300, 400))
    assert t.lookup_now((350, "a"), ["v"]) is None
    check(["v"])
    cat.add_column("t", C("w", T.INT32, nullable=True))
    check(["v", "w"])
    cat.rename_column("t", "v", "v2")
    for read in (t.lookup, t.lookup_now):
        with pytest.raises(errors.ColumnNotFound):
            read((5, "a"), ["v"])
    check(["v2", "w"])
    cat.drop_column("t", "w")
    check(["v2"])
    cat.drop_table("t")
    for read in (t.lookup, t.lookup_now):
        with pytest.raises(errors.NotFound):
            read((5, "a"), ["v2"])


def test_lookup_now_declines_what_would_wait(tmp_path):
    """NOT_NOW, nothing done, when the tablet is not open yet (a catalog just opened) or an
    ALTER waits for the table to drain; the pin is given back in every case, so the
    ALTER is not held up by it."""
    from engine.catalog.table import NOT_NOW
    c = Catalog.open(str(tmp_path), config=CFG, clock=LogicalClock(), parallelism=2)
    ps = PartitionSchema.create(SCHEMA, [HashBucketSchema(("g",), 2)], ["k"],
                                [RangeSpec(0, 1000)])
    c.create_table("u", SCHEMA, ps)
    c.table("u").insert(batch([(1, "a")], [10]))
    c.close()
    c = Catalog.open(str(tmp_path), config=CFG, clock=LogicalClock(), parallelism=2,
                     busy_timeout_s=5)
    try:
        t = c.table("u")
        assert t.lookup_now((1, "a"), ["v"]) is NOT_NOW        # its tablet is not open
        assert t.lookup((1, "a"), ["v"]) == {"v": 10}           # opens it
        assert t.lookup_now((1, "a"), ["v"]) == {"v": 10}
        # an ALTER draining the table (a scan holds a lease): declined, not waited for
        scan = t.scan(["v"])
        done = threading.Event()
        th = threading.Thread(target=lambda: (c.add_column(
            "u", C("w", T.INT32, nullable=True)), done.set()))
        th.start()
        deadline = time.monotonic() + 10
        while t.id not in c._draining and time.monotonic() < deadline:
            time.sleep(0.005)
        t0 = time.monotonic()
        assert t.lookup_now((1, "a"), ["v"]) is NOT_NOW
        assert time.monotonic() - t0 < 0.5
        list(scan)                                               # the lease goes
        th.join(10)
        assert done.is_set()
        assert t.lookup_now((1, "a"), ["v", "w"]) == {"v": 10, "w": None}
        assert all(s.refs == 0 for s in c._slots.values())
    finally:
        c.close()


def test_a_write_to_several_tablets_is_routed_once(cat, monkeypatch):
    """A write whose rows span several tablets is routed (hashed, sorted by tablet) once:
    the lease reuses the routing made under the same metadata object (`Table._hold`).
    Under new metadata (a DDL between the two) it routes again, and the rows still land
    where the new metadata says."""
    from engine.catalog import table as table_mod
    calls = []
    real = table_mod._route

    def counting(meta, rows):
        calls.append(meta)
        return real(meta, rows)
    monkeypatch.setattr(table_mod, "_route", counting)
    t = cat.table("t")
    keys = [(k, g) for k in (1, 150, 350) for g in GROUPS]
    r = t.insert(batch(keys, list(range(len(keys)))))
    assert r.num_applied == len(keys) and not r.row_errors
    assert len(calls) == 1
    assert table_rows(t) == {key: i for i, key in enumerate(keys)}

    # a range added between the first routing and the lease (new metadata): routed
    # again, so the rows of the new range land in it rather than failing NO_PARTITION
    calls.clear()
    real_lease = cat.lease_tablets
    added = []

    def lease_after_ddl(table_id, pick):
        if not added:
            added.append(cat.add_range_partition("t", RangeSpec(200, 300)))
        return real_lease(table_id, pick)
    monkeypatch.setattr(cat, "lease_tablets", lease_after_ddl)
    more = [(k, g) for k in (2, 250) for g in GROUPS]
    r = t.upsert(batch(more, [7] * len(more)))
    assert added
    assert r.num_applied == len(more) and not r.row_errors, r.row_errors
    assert table_rows(t)[(250, "e")] == 7
    assert {k: t.lookup(k, ["v"]) is not None for k in more} == {k: True for k in more}
    assert len(calls) == 2


def test_lookup_now_read_ts_is_the_snapshot_the_read_used(cat):
    """`Table.lookup_now(..., read_ts)` (the wire's key writes) reads at one timestamp S
    and gives it: every op <= S is seen, none after it - not an op still in flight, and
    not one committed above it (a plain lookup shows that one) - so a write under the
    precondition "unchanged since S" is refused for a row the read did not see change."""
    from engine.tablet.write_op import READ_TS_COLUMN
    t = cat.table("t")
    t.insert(batch([(5, "a"), (6, "a")], [0, 0]))          # one tablet (g = 'a', k < 100)
    fin1 = t.write_small_deferred(OpType.UPDATE, {"k": [5], "g": ["a"], "v": [1]})
    fin2 = t.write_small_deferred(OpType.UPDATE, {"k": [6], "g": ["a"], "v": [7]})
    assert fin2().num_applied == 1                          # committed above fin1, in flight
    assert t.lookup_now((6, "a"), ["v"]) == {"v": 7}
    got: list = []
    assert t.lookup_now((6, "a"), ["v"], got) == {"v": 0}  # not seen: above S
    s = got[0]
    assert t.lookup_now((5, "a"), ["v"], []) == {"v": 0}
    assert fin1().num_applied == 1
    for k in (5, 6):            # each row changed after S: its checked write is refused
        r = t.write_small(OpType.UPDATE, {"k": [k], "g": ["a"], "v": [100],
                                          READ_TS_COLUMN: [s]})
        assert [e.code for e in r.row_errors] == ["CHANGED"], k
    got.clear()
    row = t.lookup_now((6, "a"), ["v"], got)
    assert row == {"v": 7} and got[0] >= s
    r = t.write_small(OpType.UPDATE, {"k": [6], "g": ["a"], "v": [8],
                                      READ_TS_COLUMN: [got[0]]})
    assert r.num_applied == 1 and table_rows(t) == {(5, "a"): 1, (6, "a"): 8}


def test_lookup_now_read_ts_declines_a_row_committed_above_s(cat):
    """A key written (inserted) by an op that committed above S, over an op still in
    flight: not seen at S, so "no row" would be wrong - the client that wrote it would
    be told UPDATE 0 (tests/wire/test_asyncpg.py's concurrent writes saw it). The read
    at S declines (NOT_NOW), and the caller reads at the current snapshot; with nothing
    committed above S, a missing key is "no row" (None) as before."""
    from engine.catalog.table import NOT_NOW
    t = cat.table("t")
    t.insert(batch([(5, "a")], [0]))                         # one tablet (g = 'a')
    fin1 = t.write_small_deferred(OpType.UPDATE, {"k": [5], "g": ["a"], "v": [1]})
    fin2 = t.write_small_deferred(OpType.INSERT, {"k": [6], "g": ["a"], "v": [7]})
    assert fin2().num_applied == 1                 # key 6 committed above fin1, in flight
    assert t.lookup_now((6, "a"), ["v"]) == {"v": 7}
    got: list = []
    assert t.lookup_now((6, "a"), ["v"], got) is NOT_NOW
    assert got == []                               # no S for a read not made
    assert fin1().num_applied == 1
    assert t.lookup_now((6, "a"), ["v"], got) == {"v": 7} and len(got) == 1
    got.clear()
    assert t.lookup_now((7, "a"), ["v"], got) is None and len(got) == 1   # none above S
