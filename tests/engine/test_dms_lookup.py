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


# -- row records (append_row: the small-write path's plain values) ------------------------
_TYPES = {1: pa.int64(), 2: pa.binary(), 3: pa.float64()}


def _row_values(rng: random.Random, kind: int) -> dict | None:
    """Values a record sets: a DELETE none, a REINSERT every column (as the write paths
    log them), an UPDATE some."""
    if kind == MutationKind.DELETE:
        return None
    cids = list(_TYPES) if kind == MutationKind.REINSERT else rng.sample(list(_TYPES),
                                                                         rng.randint(1, 3))
    gen = {1: lambda: rng.choice([None, rng.randrange(100)]),
           2: lambda: rng.choice([None, b"", bytes([rng.randrange(256)])]),
           3: lambda: rng.choice([None, rng.random()])}
    return {c: gen[c]() for c in cids}


def _reference(dms: DeltaMemStore, row: int, snap, want):
    """`resolve` (the scans' vectorised rule) over the row's visible records of the full
    view: (liveness, {col: value}) as row_changes returns them, None if none visible."""
    from engine.tablet.delta import resolve
    recs = dms.view().slice_rows(row, row + 1)
    recs = recs.select(snap.is_committed_array(recs.ts)) if len(recs) else recs
    if not len(recs):
        return None
    res = resolve(recs, row, 1, True, None)
    live = -1 if res.live is None else int(res.live[0])
    vals = {cid: v[0].as_py() for cid, (_, v) in res.patches.items()}
    return live, vals


@pytest.mark.parametrize("seed", range(8))
def test_row_changes_equal_resolve_over_the_view(seed, monkeypatch):
    """Random interleavings of row records and Arrow chunks (one row may have both),
    views, and lookups at random snapshots (older ones, and ones with later ops
    committed out of order): `row_changes` must give what `resolve` gives over the full
    sorted view, and the view must hold every record appended either way."""
    from engine.tablet.mvcc import MvccSnapshot
    monkeypatch.setattr(deltamemstore, "PENDING_MIN", 30)
    rng = random.Random(seed)
    dms = DeltaMemStore()
    model: list[tuple] = []          # every record: (rowid, ts, seq, kind, values)
    ts = 0
    for step in range(500):
        r = rng.random()
        row = rng.randrange(12)
        if r < 0.5:
            ts += 1
            # rows 0-3 only ever get UPDATEs (a lookup may stop early on their chains)
            kind = rng.choice([1, 1, 1, 2, 3]) if row >= 4 else 1
            vals = _row_values(rng, kind)
            dms.append_row(row, ts, kind, vals, _TYPES, 30)
            model.append((row, ts, 0, kind, vals))
        elif r < 0.62:
            ts += 1
            n = rng.choice([1, 2, 4])
            kind = rng.choice([1, 1, 2, 3])
            rowids = np.array([rng.randrange(0 if kind == 1 else 4, 12) for _ in range(n)])
            vals = [_row_values(rng, kind) for _ in range(n)]
            cols = {}
            for cid, t in _TYPES.items():
                mask = np.array([v is not None and cid in v for v in vals])
                if mask.any():
                    cols[cid] = (mask, pa.array([v.get(cid) if v else None for v in vals], t))
            seqs = np.arange(n)
            dms.append(DeltaBatch(rowids.astype(np.int64), np.full(n, ts, np.int64), seqs,
                                  np.full(n, kind, np.int8), cols))
            model += [(int(rowids[i]), ts, i, kind, vals[i]) for i in range(n)]
        elif r < 0.66:
            dms.view()
        else:
            acb = rng.randint(0, ts + 1)
            later = frozenset(t for t in range(acb, ts + 1) if rng.random() < 0.3)
            snap = MvccSnapshot(acb, later)
            want = rng.choice([None, [1], [2, 3], [1, 2, 3]])
            got = dms.row_changes(row, snap, want)
            ref = _reference(dms, row, snap, want)
            if ref is None or got is None:
                assert got == ref, (seed, step, row)
                continue
            assert got[0] == ref[0], (seed, step, row, got, ref)
            if ref[0] != 0:                 # a deleted row's values are never read
                keys = ref[1].keys() if want is None else [c for c in want if c in ref[1]]
                assert {c: got[1].get(c, "absent") for c in keys} == \
                    {c: ref[1][c] for c in keys}, (seed, step, row, got, ref)
    view = dms.view()
    assert len(view) == len(model) == len(dms)
    got = sorted(view.to_records(), key=lambda r: (r[0], r[1], r[2]))
    assert got == sorted(model, key=lambda r: (r[0], r[1], r[2]))
