"""In-order writes (`Table.write(..., in_order=True)`, a driver's pipelined batch): the rows
behave as if written one at a time, stopping at the first failure.

Differential: random batches (repeated keys, keys already present, NULL in a NOT NULL
column, values out of the column's range, INSERT and UPSERT mixed) are written in order on
one table and row by row (stopping at the first row error) on another; the applied count,
the failing row and its code, and the final rows must be the same."""

from __future__ import annotations

import random
import threading

import numpy as np
import pyarrow as pa
import pytest

from engine import errors
from engine.catalog import Catalog, HashBucketSchema, PartitionSchema
from engine.clock import LogicalClock
from engine.schema import ColumnSchema, Schema
from engine.tablet import TabletConfig
from engine.tablet.write_op import OpType
from engine.types import DataType as T

CFG = TabletConfig(fsync=False, wal_sync="never", history_max_age_s=1e12)
SCHEMA = Schema([ColumnSchema("k", T.INT64), ColumnSchema("v", T.INT32, nullable=False),
                 ColumnSchema("s", T.STRING)], key=["k"])


def _open(path) -> Catalog:
    c = Catalog.open(str(path), config=CFG, clock=LogicalClock())
    c.create_table("t", SCHEMA, PartitionSchema.create(
        SCHEMA, [HashBucketSchema(("k",), 3)], [], []))
    return c


def _rows(ks, vs, ss) -> pa.Table:
    return pa.table({"k": pa.array(ks, pa.int64()), "v": pa.array(vs, pa.int64()),
                     "s": pa.array(ss, pa.string())})


def _content(table) -> list:
    return sorted(table.scan_table().to_pylist(), key=lambda r: r["k"])


def _random_batch(rng: random.Random, n: int):
    ks = [rng.randrange(40) for _ in range(n)]
    vs = [None if rng.random() < 0.03 else (2**40 if rng.random() < 0.03 else rng.randrange(9))
          for _ in range(n)]
    ss = [rng.choice([None, "a", "bb"]) for _ in range(n)]
    ops = np.array([rng.choice([OpType.INSERT] * 3 + [OpType.UPSERT]) for _ in range(n)],
                   dtype=np.int8)
    return ops, _rows(ks, vs, ss)


@pytest.mark.parametrize("seed", range(12))
def test_in_order_matches_row_by_row(tmp_path, seed):
    rng = random.Random(seed)
    a, b = _open(tmp_path / "a"), _open(tmp_path / "b")
    try:
        ta, tb = a.table("t"), b.table("t")
        pre = _rows(list(range(0, 40, 7)), [1] * 6, ["p"] * 6)
        ta.insert(pre)
        tb.insert(pre)
        for _ in range(4):
            ops, batch = _random_batch(rng, rng.randrange(1, 60))
            r = ta.write(ops, batch, in_order=True)
            applied, failed = 0, None
            for i in range(batch.num_rows):
                one = tb.write(ops[i:i + 1], batch.slice(i, 1))
                if one.row_errors:
                    failed = (i, one.row_errors[0].code)
                    break
                applied += 1
            assert r.num_applied == applied
            got = None if not r.row_errors else (r.row_errors[0].index, r.row_errors[0].code)
            assert got == failed
            assert len(r.row_errors) <= 1
            assert _content(ta) == _content(tb)
    finally:
        a.close()
        b.close()


def test_in_order_stops_at_duplicate_in_batch(tmp_path):
    c = _open(tmp_path)
    try:
        t = c.table("t")
        r = t.insert(_rows([1, 2, 1, 3], [1, 1, 1, 1], ["x"] * 4), in_order=True)
        assert r.num_applied == 2
        assert [(e.index, e.code, e.key) for e in r.row_errors] == [(2, "ALREADY_PRESENT", (1,))]
        assert [x["k"] for x in _content(t)] == [1, 2]
        # a plain write applies every row it can (Kudu semantics): the contrast
        r = t.insert(_rows([4, 1, 5], [1, 1, 1], ["x"] * 3))
        assert r.num_applied == 2 and [e.index for e in r.row_errors] == [1]
    finally:
        c.close()


def test_in_order_rejects_update_rows(tmp_path):
    c = _open(tmp_path)
    try:
        with pytest.raises(errors.InvalidArgument):
            c.table("t").write(OpType.UPDATE, _rows([1], [1], ["x"]), in_order=True)
    finally:
        c.close()


def test_concurrent_in_order_writes_stay_exact(tmp_path):
    """Writers racing for the same keys: each one's rows apply exactly up to its first
    failure (no row after a failure is ever applied), and no two writers deadlock."""
    c = _open(tmp_path)
    try:
        t = c.table("t")
        outcomes = {}

        def writer(w):
            rng = random.Random(w)
            ks = [rng.randrange(200) for _ in range(150)]
            r = t.insert(_rows(ks, [w] * 150, [None] * 150), in_order=True)
            outcomes[w] = (ks, r)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert not any(th.is_alive() for th in threads)
        owner = {row["k"]: row["v"] for row in _content(t)}
        for w, (ks, r) in outcomes.items():
            n = r.num_applied
            assert all(owner[k] == w for k in ks[:n])            # its prefix is its own
            if r.row_errors:
                assert r.row_errors[0].index == n
                assert ks[n] in owner and (owner[ks[n]] != w or ks[n] in ks[:n])
        assert sum(r.num_applied for _, r in outcomes.values()) == len(owner)
    finally:
        c.close()


def test_in_order_converts_each_tablets_rows_once(tmp_path, monkeypatch):
    """A tablet whose rows all apply hands its check's conversion (`first_failure(op,
    converted)`) to its apply: one conversion per tablet, not two; a tablet cut at the
    first failure converts its prefix afresh (the differential test above checks those
    answers)."""
    from engine.tablet.tablet_write import TabletWriter
    calls = []
    real = TabletWriter._convert

    def spy(self, table, ops, bad):
        calls.append(table.num_rows)
        return real(self, table, ops, bad)
    monkeypatch.setattr(TabletWriter, "_convert", spy)
    c = _open(tmp_path)
    try:
        t = c.table("t")
        r = t.insert(_rows(list(range(30)), [1] * 30, ["x"] * 30), in_order=True)
        assert r.num_applied == 30 and not r.row_errors
        assert len(calls) == 3 and sum(calls) == 30      # 3 tablets, each converted once
        assert [x["k"] for x in _content(t)] == list(range(30))
        calls.clear()
        r = t.insert(_rows(list(range(30, 40)) + [5] + list(range(40, 49)), [2] * 20,
                     ["y"] * 20), in_order=True)
        assert r.num_applied == 10 and [(e.index, e.code) for e in r.row_errors] == \
            [(10, "ALREADY_PRESENT")]
        # the checks convert all 20 rows; every tablet holds rows on both sides of the
        # failure here, so each is cut and its prefix (10 rows in all) converted afresh
        assert sum(calls) == 20 + 10
        assert [x["k"] for x in _content(t)] == list(range(40))
    finally:
        c.close()
