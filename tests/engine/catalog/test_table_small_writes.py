"""Table's small-write strategy (engine/catalog/table_small_writes.py) against a dict model.

Random single-row (and a few few-row) INSERT / UPDATE / DELETE / UPSERT writes through
`Table.write` go the small way: routed on their keys (`PartitionSchema.route_key`, whose
whole-key encoding the tablet then uses instead of encoding the key again), the tablet
pinned, the rows checked with the tablet's per-column-list `SmallPlan`. Flushes, delta
flushes, compactions and a RENAME COLUMN (the tablets keep the old name) are interleaved.
Every write's result (applied count; each row error's index, code and key) must be the
model's, and so must the table now and at every earlier write's timestamp (scans and
point lookups: time travel over row records, flushed deltas and compacted rowsets).

Three partitionings: HASH over the whole key (routing encodes the whole key: handed to
the tablet), RANGE over the whole key (the same through the range level), and HASH(k2) x
RANGE(k1) (no level encodes the whole key: the tablet encodes it).
"""

from __future__ import annotations

import random

import pytest

from engine.catalog import Catalog, HashBucketSchema, PartitionSchema, RangeSpec
from engine.catalog.partition import PartitionSchema as _PS
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import OpType, TabletConfig
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never", history_max_age_s=1e12, page_rows=8)
SCHEMA = Schema([ColumnSchema("k1", T.INT32, nullable=False),
                 ColumnSchema("k2", T.STRING, nullable=False),
                 ColumnSchema("v", T.INT64), ColumnSchema("s", T.STRING)],
                key=["k1", "k2"])
K2 = ["a", "b", "c", "zz"]


def layout(kind: str) -> PartitionSchema:
    if kind == "hash_key":
        return PartitionSchema.create(SCHEMA, [HashBucketSchema(("k1", "k2"), 3)], [], [])
    if kind == "range_key":
        return PartitionSchema.create(SCHEMA, [], ["k1", "k2"], [
            RangeSpec(None, (10, "b")), RangeSpec((10, "b"), (25, "")),
            RangeSpec((25, ""), None)])
    return PartitionSchema.create(SCHEMA, [HashBucketSchema(("k2",), 2)], ["k1"],
                                  [RangeSpec(None, 20), RangeSpec(20, None)])


def expect(model: dict, op: OpType, rows: list) -> tuple[int, list]:
    """(applied, [(index, code, key)]) of a write of rows [(key, v, s)], applying it to
    `model` ({key: (v, s)}): Kudu's per-row semantics."""
    applied, errs = 0, []
    for i, (key, v, s) in enumerate(rows):
        live = key in model
        if op == OpType.INSERT and live:
            errs.append((i, "ALREADY_PRESENT", key))
        elif op in (OpType.UPDATE, OpType.DELETE) and not live:
            errs.append((i, "NOT_FOUND", key))
        else:
            applied += 1
            if op == OpType.DELETE:
                del model[key]
            elif op == OpType.UPDATE:
                model[key] = (v, model[key][1])
            else:                 # INSERT, UPSERT (all columns given)
                model[key] = (v, s)
    return applied, errs


def table_state(t, vcol: str, snapshot=None) -> dict:
    rows = t.scan_table(snapshot=snapshot).to_pylist()
    return {(r["k1"], r["k2"]): (r[vcol], r["s"]) for r in rows}


def run(tmp_path, kind: str, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    cat = Catalog.open(str(tmp_path / kind), config=CFG, clock=LogicalClock(),
                       parallelism=2)
    try:
        cat.create_table("t", SCHEMA, layout(kind))
        t = cat.table("t")
        tids = t.metadata.tablet_ids
        model: dict = {}
        history: list[tuple[int, dict]] = []   # (a write's timestamp, the model after it)
        vcol = "v"
        for step in range(steps):
            op = rng.choice([OpType.INSERT, OpType.INSERT, OpType.UPDATE, OpType.DELETE,
                             OpType.UPSERT])
            n = 1 if rng.random() < 0.85 else rng.randint(2, 3)
            keys = rng.sample([(k1, k2) for k1 in range(0, 40, 3) for k2 in K2], n)
            rows = [(k, rng.randrange(1000), rng.choice(["x", "yy", None]))
                    for k in keys]
            data = {"k1": [k[0] for k, _, _ in rows], "k2": [k[1] for k, _, _ in rows]}
            if op != OpType.DELETE:
                data[vcol] = [v for _, v, _ in rows]
            if op in (OpType.INSERT, OpType.UPSERT):
                data["s"] = [s for _, _, s in rows]
            want = expect(model, op, rows)
            r = t.write(op, data)
            got = (r.num_applied, [(e.index, e.code, e.key) for e in r.row_errors])
            assert got == want, (kind, seed, step, op, rows)
            # each written tablet's op timestamp, the largest the write's (one-row
            # writes: one tablet, built without merge_results on the waiting path)
            if n == 1:
                assert list(r.tablet_timestamps.values()) == [r.timestamp] and \
                    set(r.tablet_timestamps) <= set(tids), (kind, seed, step)
            elif r.tablet_timestamps:
                assert max(r.tablet_timestamps.values()) == r.timestamp
            if r.timestamp:
                history.append((r.timestamp, dict(model)))
            # time travel: the table at an earlier write's timestamp, by lookups and scans
            if history:
                ts, then = history[rng.randrange(len(history))]
                for k in rng.sample(keys + list(then)[:3], min(4, len(keys) + len(then))):
                    row = t.lookup(k, [vcol, "s"], snapshot=ts)
                    assert (None if row is None else (row[vcol], row["s"])) == \
                        then.get(k), (kind, seed, step, "lookup at", ts, k)
                if step % 10 == 0:
                    assert table_state(t, vcol, ts) == then, (kind, seed, step, "scan at")
            if step % 15 == 0:
                assert table_state(t, vcol) == model, (kind, seed, step)
            x = rng.random()
            tablet = cat.tablet(rng.choice(tids))
            if x < 0.05:
                tablet.flush_mrs()
            elif x < 0.08:
                tablet.flush_dms()
            elif x < 0.10 and tablet.num_rowsets() > 1:
                tablet.compact_rowsets([i["id"] for i in tablet.rowsets_info()])
            elif x < 0.11:
                tablet.compact_deltas()
            if step == steps // 2:        # the tablets keep "v": the write renames
                cat.rename_column("t", vcol, "w")
                vcol = "w"
        assert table_state(t, vcol) == model
        small = sum(cat.tablet(tid).small_writes for tid in tids)
        assert small >= 0.9 * steps, f"the small-write path was hardly taken ({small})"
    finally:
        cat.close()


@pytest.mark.parametrize("kind", ["hash_key", "range_key", "hash_range"])
@pytest.mark.parametrize("seed", range(2))
def test_small_writes_match_the_model(tmp_path, kind, seed):
    run(tmp_path, kind, seed, 160)


def test_model_check_bites(tmp_path, monkeypatch):
    """Hand the tablet a wrong key encoding from routing (the neighbour key's: one line
    wrong in the hand-off), and the model check must notice."""
    real = _PS.route_key

    def wrong(self, key):
        p, enc = real(self, key)
        if enc is None:
            return p, enc
        return p, real(self, [key[0] + 1] + list(key[1:]))[1]
    monkeypatch.setattr(_PS, "route_key", wrong)
    with pytest.raises(AssertionError):
        run(tmp_path, "hash_key", 0, 60)
