"""Tablet.open_scan(order_mode=ORDERED) (engine/tablet/ordered_scan.py): the key-ordered,
resumable tablet scan behind fault-tolerant scans, checked against the tablet's own unordered scan (the oracle) over
random histories: inserts, updates, deletes and re-inserts spread over MemRowSets and several
DiskRowSets (small rowsets and pages, flushes and compactions in between), composite keys
with strings (the variable-width key encoding, NUL bytes included), projections without the
key, predicates, old snapshots, and a resume after every possible key."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.clock import LogicalClock
from engine.key_encoding import encode_key
from engine.schema import ColumnSchema as C
from engine.schema import Schema
from engine.tablet import ColumnPredicate, OpType, Tablet, TabletConfig
from engine.tablet.ordered_scan import merge_by_key
from engine.tablet.tablet import OrderMode
from engine.types import DataType as T

SMALL = TabletConfig(page_rows=8, drs_target_bytes=2048, fsync=False)
SCHEMA = Schema([C("a", T.STRING), C("b", T.INT32), C("v", T.INT64, nullable=True)],
                key=["a", "b"])
A = ["", "a", "a\x00", "a\x00b", "ab", "b", "\u00e9"]


def _rows(keys, v):
    return {"a": [k[0] for k in keys], "b": [k[1] for k in keys], "v": [v] * len(keys)}


def _apply_history(t: Tablet, rng: random.Random, steps: int) -> list[int]:
    """Random writes with flushes/compactions; returns timestamps after some steps."""
    stamps = []
    for _ in range(steps):
        keys = {(rng.choice(A), rng.randint(-20, 20)) for _ in range(rng.randint(1, 12))}
        keys = sorted(keys)
        op = rng.choice([OpType.UPSERT, OpType.UPSERT, OpType.DELETE, OpType.INSERT])
        t.write(op, _rows(keys, rng.randint(-5, 5)))
        r = rng.random()
        if r < 0.25:
            t.flush_mrs()
        elif r < 0.3 and t.num_rowsets() > 1:
            t.compact_rowsets([d.id for d in t._components.drss][:2])
        elif r < 0.35:
            t.flush_dms()
        if rng.random() < 0.3:
            stamps.append(t.current_timestamp())
    stamps.append(t.current_timestamp())
    return stamps


def _oracle(t, names, preds, snap):
    tbl = t.scan_table(["a", "b"] + [n for n in names if n not in ("a", "b")], preds, snap)
    rows = sorted(zip(*(tbl.column(c).to_pylist() for c in tbl.column_names)),
                  key=lambda r: (r[0].encode(), r[1]))
    return rows, tbl.column_names


def _collect(t, names, preds, snap, after=None):
    return list(t.open_scan(names, preds, snap, order_mode=OrderMode.ORDERED,
                            resume_after=after)[1])


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 40))
def test_ordered_scan_equals_the_sorted_unordered_scan_and_resumes_exactly(tmp_path_factory,
                                                                          seed, steps):
    rng = random.Random(seed)
    t = Tablet.create(str(tmp_path_factory.mktemp("t")), SCHEMA, config=SMALL,
                      clock=LogicalClock())
    try:
        stamps = _apply_history(t, rng, steps)
        snap = rng.choice(stamps)
        names = rng.choice([["a", "b", "v"], ["v"], ["b"], []])
        preds = rng.choice([[], [ColumnPredicate.range("b", -5, 6)],
                            [ColumnPredicate.range("a", "a", "b")]])
        want, cols = _oracle(t, names, preds, snap)
        batches = _collect(t, names, preds, snap)
        got_n = sum(b.num_rows for b, _ in batches)
        assert got_n == len(want)
        # every batch's last key is the encoding of its last row's key, keys strictly rise
        keys = [encode_key(r[:2], SCHEMA.key_columns) for r in want]
        assert [k for _, k in batches] == [keys[i - 1] for i in
                                           np.cumsum([b.num_rows for b, _ in batches])]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        if names:
            tbl = pa.Table.from_batches([b for b, _ in batches]) if batches else None
            got = list(zip(*(tbl.column(n).to_pylist() for n in names))) if tbl else []
            assert got == [tuple(r[cols.index(n)] for n in names) for r in want]
        # resume after any key returned (and before the first): exactly the rest
        for i in sorted(rng.sample(range(len(keys)), min(4, len(keys)))):
            rest = _collect(t, names, preds, snap, after=keys[i])
            assert sum(b.num_rows for b, _ in rest) == len(keys) - i - 1
            assert [k for _, k in rest][-1:] == keys[-1:] if i + 1 < len(keys) else not rest
    finally:
        t.close()


def test_merge_interleaves_sources_and_keeps_unique_keys():
    def src(keys, size):
        keys = np.array(sorted(keys), dtype="S8")
        for s in range(0, len(keys), size):
            k = keys[s:s + size]
            yield k, pa.record_batch({"k": pa.array([x.decode() for x in k])})
    rng = random.Random(7)
    universe = [f"{i:05d}".encode() for i in range(3000)]
    rng.shuffle(universe)
    parts = [universe[0:1000], universe[1000:1010], universe[1010:3000]]
    out = list(merge_by_key([src(parts[0], 64), src(parts[1], 3), src(parts[2], 500)]))
    keys = [x for k, _ in out for x in k.tolist()]
    assert keys == sorted(universe)
    assert [r for _, b in out for r in b.column("k").to_pylist()] == [k.decode() for k in keys]
