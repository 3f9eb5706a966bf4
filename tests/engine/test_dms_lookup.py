"""DeltaMemStore.rows_records (a point lookup's records of one row, found through the
pending-chunk index without re-sorting the store) against the sorted view's slice, over
random interleavings of small and large appends, views and lookups."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from engine.tablet import deltamemstore
from engine.tablet.delta import DeltaBatch, MutationKind
from engine.tablet.deltamemstore import DeltaMemStore


def _same(a: DeltaBatch, b: DeltaBatch) -> bool:
    if not (np.array_equal(a.rowid, b.rowid) and np.array_equal(a.ts, b.ts)
            and np.array_equal(a.seq, b.seq) and np.array_equal(a.kind, b.kind)):
        return False
    for cid in set(a.columns) | set(b.columns):
        ma, va = a.columns.get(cid, (np.zeros(len(a), bool), pa.nulls(len(a), pa.int64())))
        mb, vb = b.columns.get(cid, (np.zeros(len(b), bool), pa.nulls(len(b), pa.int64())))
        if not np.array_equal(ma, mb) or va.filter(pa.array(ma)).to_pylist() != \
                vb.filter(pa.array(mb)).to_pylist():
            return False
    return True


@pytest.mark.parametrize("seed", range(6))
def test_rows_records_equals_view_slice(seed, monkeypatch):
    monkeypatch.setattr(deltamemstore, "PENDING_MIN", 40)   # merges happen in the test
    rng = random.Random(seed)
    dms = DeltaMemStore()
    ts = 0
    for step in range(400):
        r = rng.random()
        if r < 0.75:
            ts += 1
            n = 1 if rng.random() < 0.7 else rng.choice([3, 100])   # big: not indexed
            rowids = np.array([rng.randrange(50) for _ in range(n)])
            vals = pa.array([rng.randrange(1000) for _ in range(n)], pa.int64())
            dms.append(DeltaBatch.uniform(rowids, ts, step, MutationKind.UPDATE, {7: vals}))
        elif r < 0.8:
            dms.view()
        else:
            row = rng.randrange(52)
            got = dms.rows_records(row, row + 1)
            assert _same(got, dms.view().slice_rows(row, row + 1)), (seed, step, row)


def test_lookup_does_not_rebuild_the_view_per_write():
    """After each single-row append a lookup reads the pending index, not a new view."""
    dms = DeltaMemStore()
    for i in range(200):
        dms.append(DeltaBatch.uniform(np.array([i % 7]), i + 1, 0, MutationKind.UPDATE,
                                      {1: pa.array([i], pa.int64())}))
    dms.view()
    built = dms._view
    for i in range(200, 260):
        dms.append(DeltaBatch.uniform(np.array([i % 20]), i + 1, 0, MutationKind.UPDATE,
                                      {1: pa.array([i], pa.int64())}))
        recs = dms.rows_records(i % 20, i % 20 + 1)
        assert recs.ts.max() == i + 1
    assert dms._view is built
    # a hot row: past ROW_PENDING_MAX pending chunks of it, its records are merged on
    # their own (and extended per new chunk), still without a rebuild of the view
    end = 260 + deltamemstore.ROW_PENDING_MAX + 1
    for i in range(260, end):
        dms.append(DeltaBatch.uniform(np.array([3]), i + 1, 0, MutationKind.UPDATE,
                                      {1: pa.array([i], pa.int64())}))
    assert dms.rows_records(3, 4).ts.max() == end
    for i in range(end, end + 5):
        dms.append(DeltaBatch.uniform(np.array([3, 4]), i + 1, 0, MutationKind.UPDATE,
                                      {1: pa.array([i, i], pa.int64())}))
        assert dms.rows_records(3, 4).ts.max() == i + 1
    assert dms._view is built and 3 in dms._hot
    got = dms.rows_records(3, 4)
    assert _same(got, dms.view().slice_rows(3, 4))


@pytest.mark.parametrize("seed", range(4))
def test_hot_rows_equal_a_fresh_merge(seed, monkeypatch):
    """Skewed appends (a few hot rows, chunks of one or several rows) and lookups that do
    not rebuild the view themselves: the hot-row merges (`_hot_row`) must hold exactly
    the records a fresh merge of every chunk holds."""
    monkeypatch.setattr(deltamemstore, "PENDING_MIN", 10_000)   # no rebuild by size
    calls = []
    real = DeltaMemStore._hot_row

    def counting(self, *a):
        calls.append(1)
        return real(self, *a)
    monkeypatch.setattr(DeltaMemStore, "_hot_row", counting)
    rng = random.Random(seed)
    dms = DeltaMemStore()
    for step in range(600):
        r = rng.random()
        if r < 0.6:
            n = 1 if rng.random() < 0.8 else rng.choice([2, 5])
            rowids = np.array([rng.choice([0, 0, 0, 1, 1, 2, rng.randrange(30)])
                               for _ in range(n)])
            dms.append(DeltaBatch.uniform(rowids, step + 1, 0, MutationKind.UPDATE,
                                          {7: pa.array([step] * n, pa.int64())}))
        elif r < 0.62:
            dms.view()
        else:
            row = rng.choice([0, 1, 2, rng.randrange(32)])
            got = dms.rows_records(row, row + 1)
            want = DeltaBatch.concat(list(dms._chunks)).slice_rows(row, row + 1)
            assert _same(got, want), (seed, step, row)
    assert len(calls) > 20, "hot rows were hardly merged: the test would not bite"
