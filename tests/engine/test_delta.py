"""Delta records (engine/tablet/delta.py), DeltaFiles and `compaction.fold_history`.

The central property (what makes time travel over flushed data correct): for any set of row
histories, base data + UNDO records + kept REDO records produced by `fold_history`, read the
way a DiskRowSet reads them (UNDOs not visible in the snapshot rolled back, newest first;
REDOs visible in it applied, oldest first), reproduce the state a naive replay of the
history gives at *every* timestamp.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.schema import ColumnSchema
from engine.tablet.compaction import fold_history
from engine.tablet.delta import (
    DeltaBatch,
    DeltaType,
    MutationKind,
    patch_array,
    patch_gathered,
    resolve,
)
from engine.tablet.deltafile import DeltaFile, write_delta_file
from engine.tablet.mvcc import MvccSnapshot
from engine.types import DataType

U, D, R = MutationKind.UPDATE, MutationKind.DELETE, MutationKind.REINSERT

# Non-key columns used by the generators: (id, physical type, value strategy).
COLS = {
    1: (pa.int64(), st.one_of(st.none(), st.integers(-5, 5))),
    2: (pa.binary(), st.one_of(st.none(), st.sampled_from([b"", b"a", b"\x00", b"bb"]))),
    3: (pa.float64(), st.one_of(st.none(), st.sampled_from([0.5, -1.0, 2.0]))),
    4: (pa.bool_(), st.one_of(st.none(), st.booleans())),
}
SCHEMA_COLS = [
    ColumnSchema("i", DataType.INT64, id=1),
    ColumnSchema("s", DataType.BINARY, id=2),
    ColumnSchema("f", DataType.DOUBLE, id=3),
    ColumnSchema("b", DataType.BOOL, id=4),
]


def make_batch(records: list[tuple], types: dict[int, pa.DataType] | None = None
               ) -> DeltaBatch:
    """records: (rowid, ts, seq, kind, {cid: value}) -> DeltaBatch in the given order."""
    types = types or {cid: t for cid, (t, _) in COLS.items()}
    n = len(records)
    cols = {}
    used = sorted({cid for r in records for cid in r[4]})
    for cid in used:
        mask = np.array([cid in r[4] for r in records], dtype=bool)
        vals = pa.array([r[4].get(cid) for r in records], type=types[cid])
        cols[cid] = (mask, vals)
    return DeltaBatch(np.array([r[0] for r in records], dtype=np.int64),
                      np.array([r[1] for r in records], dtype=np.int64),
                      np.array([r[2] for r in records], dtype=np.int64),
                      np.array([int(r[3]) for r in records], dtype=np.int8), cols)


def records_of(b: DeltaBatch) -> list[tuple]:
    out = []
    for i in range(len(b)):
        vals = {cid: vals[i].as_py() for cid, (mask, vals) in b.columns.items() if mask[i]}
        out.append((int(b.rowid[i]), int(b.ts[i]), int(b.seq[i]), MutationKind(int(b.kind[i])),
                    vals))
    return out


# -- DeltaBatch basics -------------------------------------------------------------------------


def test_uniform_and_basic_ops():
    b = DeltaBatch.uniform(np.array([3, 1]), 7, 2, U, {1: pa.array([10, 20])})
    assert len(b) == 2 and b.min_ts() == b.max_ts() == 7
    assert records_of(b) == [(3, 7, 2, U, {1: 10}), (1, 7, 2, U, {1: 20})]
    s = b.sorted()
    assert records_of(s) == [(1, 7, 2, U, {1: 20}), (3, 7, 2, U, {1: 10})]
    assert records_of(b.take(np.array([1]))) == [(1, 7, 2, U, {1: 20})]
    assert len(DeltaBatch.empty()) == 0
    assert DeltaBatch.empty().min_ts() == 0
    assert b.nbytes > 0
    d = DeltaBatch.uniform(np.array([5]), 1, 0, D)
    assert d.columns == {} and records_of(d) == [(5, 1, 0, D, {})]


@st.composite
def random_records(draw, max_rowid=8, max_n=30):
    n = draw(st.integers(0, max_n))
    recs = []
    for _ in range(n):
        kind = draw(st.sampled_from([U, U, D, R]))
        if kind is U:
            cids = draw(st.sets(st.sampled_from(sorted(COLS)), min_size=1))
        elif kind is R:
            cids = set(COLS)
        else:
            cids = set()
        vals = {cid: draw(COLS[cid][1]) for cid in sorted(cids)}
        recs.append((draw(st.integers(0, max_rowid)), draw(st.integers(1, 6)),
                     draw(st.integers(0, 3)), kind, vals))
    return recs


def _key(r):
    return (r[0], r[1], r[2])


PROP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROP
@given(st.lists(random_records(max_n=10), max_size=4))
def test_concat_sorts_and_aligns_columns(parts):
    # Distinct (rowid, ts, seq) so the sorted order is unique.
    seen, clean = set(), []
    for p in parts:
        q = [r for r in p if _key(r) not in seen and not seen.add(_key(r))]
        clean.append(q)
    batches = [make_batch(p) for p in clean]
    out = DeltaBatch.concat(batches)
    want = sorted((r for p in clean for r in p), key=_key)
    assert records_of(out) == want
    unsorted = DeltaBatch.concat(batches, sort=False)
    assert records_of(unsorted) == [r for p in clean for r in p]
    for mask, vals in out.columns.values():
        assert len(mask) == len(vals) == len(out)


@PROP
@given(random_records(), st.integers(-1, 10), st.integers(-1, 10))
def test_slice_rows_take_select(recs, lo, hi):
    b = make_batch(sorted(recs, key=_key)).sorted()
    all_recs = records_of(b)
    assert records_of(b.slice_rows(lo, hi)) == [r for r in all_recs if lo <= r[0] < hi]
    idx = np.array([i for i in range(len(b)) if i % 2 == 0], dtype=np.int64)
    assert records_of(b.take(idx)) == [all_recs[i] for i in idx]
    keep = np.array([r[3] != U for r in all_recs], dtype=bool)
    assert records_of(b.select(keep)) == [r for r, k in zip(all_recs, keep) if k]
    mapping = np.arange(20, dtype=np.int64)[::-1].copy()
    assert [r[0] for r in records_of(b.remap_rowids(mapping))] == [19 - r[0] for r in all_recs]
    dropped = b.drop_columns({1})
    assert set(dropped.columns) <= {1}


def test_stable_sort_keeps_order_of_equal_keys():
    recs = [(1, 5, 0, U, {1: 1}), (0, 5, 0, U, {1: 2}), (1, 5, 0, U, {1: 3})]
    assert [r[4][1] for r in records_of(make_batch(recs).sorted())] == [2, 1, 3]


# -- resolve vs naive sequential application ---------------------------------------------------


def naive_resolve(recs: list[tuple], start: int, n: int, redo: bool):
    """Apply records one by one: REDO oldest first, UNDO newest first. Returns (live, cols)."""
    order = sorted(recs, key=_key)
    if not redo:
        order = order[::-1]
    live: dict[int, int] = {}
    cols: dict[int, dict[int, object]] = {}
    for rowid, _ts, _seq, kind, vals in order:
        if not start <= rowid < start + n:
            continue
        if kind is not U:
            live[rowid - start] = 1 if kind is R else 0
        for cid, v in vals.items():
            cols.setdefault(cid, {})[rowid - start] = v
    return live, cols


@PROP
@given(random_records(max_rowid=12), st.integers(0, 4), st.booleans())
def test_resolve_matches_naive(recs, start, redo):
    n = 6
    inside = [r for r in recs if start <= r[0] < start + n]
    b = make_batch(sorted(inside, key=_key))
    res = resolve(b, start, n, redo, None)
    live, cols = naive_resolve(inside, start, n, redo)
    got_live = {} if res.live is None else {i: int(v) for i, v in enumerate(res.live) if v >= 0}
    assert got_live == live
    got_cols = {cid: dict(zip(pos.tolist(), vals.to_pylist()))
                for cid, (pos, vals) in res.patches.items()}
    assert got_cols == cols
    base_live = np.array([True, False, True, True, False, True])
    want = [bool(live[i]) if i in live else bool(base_live[i]) for i in range(n)]
    assert list(res.apply_live(base_live)) == want
    # col_ids restricts the computed patches
    res1 = resolve(b, start, n, redo, [1])
    assert set(res1.patches) <= {1}
    if 1 in cols:
        assert dict(zip(res1.patches[1][0].tolist(), res1.patches[1][1].to_pylist())) == cols[1]


@PROP
@given(st.lists(st.one_of(st.none(), st.integers(-9, 9)), min_size=1, max_size=20),
       st.data())
def test_patch_array_and_patch_gathered(base_vals, data):
    n = len(base_vals)
    base = pa.array(base_vals, type=pa.int64())
    positions = sorted(data.draw(st.sets(st.integers(0, n - 1))))
    new = [data.draw(st.one_of(st.none(), st.integers(100, 200))) for _ in positions]
    vals = pa.array(new, type=pa.int64())
    want = list(base_vals)
    for p, v in zip(positions, new):
        want[p] = v
    got = patch_array(base, np.array(positions, dtype=np.int64), vals)
    assert got.to_pylist() == want
    sel = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.int64)
    gathered = base.take(pa.array(sel, type=pa.int64()))
    got = patch_gathered(gathered, sel, np.array(positions, dtype=np.int64), vals)
    assert got.to_pylist() == [want[i] for i in sel]
    # values of another (castable) type are cast
    got = patch_array(base, np.array(positions, dtype=np.int64), vals.cast(pa.int32()))
    assert got.to_pylist() == want


# -- fold_history ------------------------------------------------------------------------------


def fold(n, inserts, redo_recs, cols=SCHEMA_COLS):
    """inserts: per row (insert_ts, {cid: value})."""
    base = {c.id: pa.array([inserts[r][1].get(c.id) for r in range(n)],
                           type=COLS[c.id][0]) for c in cols}
    redo = make_batch(sorted(redo_recs, key=_key)) if redo_recs else DeltaBatch.empty()
    return fold_history(n, base, np.array([i[0] for i in inserts], dtype=np.int64), redo, cols)


def read_at(T: int, n: int, new_base, undo: DeltaBatch, kept: DeltaBatch,
            cols=SCHEMA_COLS):
    """Read rows 0..n-1 at snapshot T the way a DiskRowSet does. -> list[dict | None]."""
    snap = MvccSnapshot.at(T)
    u = undo.select(~snap.is_committed_array(undo.ts)) if len(undo) else undo
    r = kept.select(snap.is_committed_array(kept.ts)) if len(kept) else kept
    live = np.ones(n, dtype=bool)
    arrays = {c.id: new_base[c.id] for c in cols}
    for recs, last in ((u, False), (r, True)):
        if not len(recs):
            continue
        res = resolve(recs, 0, n, last, None)
        live = res.apply_live(live)
        for cid, (pos, vals) in res.patches.items():
            arrays[cid] = patch_array(arrays[cid], pos, vals)
    pylists = {cid: a.to_pylist() for cid, a in arrays.items()}
    return [{cid: pylists[cid][i] for cid in pylists} if live[i] else None for i in range(n)]


def naive_at(T: int, inserts, redo_recs, n):
    out = []
    redo_recs = sorted(redo_recs, key=_key)
    for row in range(n):
        ins_ts, ins_vals = inserts[row]
        if ins_ts > T:
            out.append(None)
            continue
        state = dict(ins_vals)
        alive = True
        for rowid, ts, seq, kind, vals in redo_recs:
            if rowid != row or ts > T:
                continue
            if kind is D:
                alive = False
            elif kind is R:
                alive = True
                state = {cid: vals.get(cid) for cid in state}
            else:
                state.update(vals)
        out.append(dict(state) if alive else None)
    return out


def check_fold(n, inserts, redo_recs):
    new_base, undo, kept = fold(n, inserts, redo_recs)
    # outputs are sorted by (rowid, ts, seq) and the kept REDOs are only trailing DELETEs
    for b in (undo, kept):
        keys = list(zip(b.rowid.tolist(), b.ts.tolist(), b.seq.tolist()))
        assert keys == sorted(keys)
    assert all(k == D for k in kept.kind.tolist())
    assert len(kept.columns) == 0 or not any(m.any() for m, _ in kept.columns.values())
    # new base is the latest image of each row (the last live one for deleted rows)
    for c in SCHEMA_COLS:
        assert len(new_base[c.id]) == n
    max_ts = max([i[0] for i in inserts] + [r[1] for r in redo_recs], default=0)
    for T in range(0, max_ts + 2):
        got = read_at(T, n, new_base, undo, kept)
        want = naive_at(T, inserts, redo_recs, n)
        assert got == want, f"at T={T}"
    return new_base, undo, kept


def test_fold_design_doc_example():
    # INSERT ("row", 1) @1, UPDATE val=2 @2, DELETE @3, REINSERT ("row", 3) @4
    cols = [ColumnSchema("val", DataType.INT64, id=1)]
    inserts = [(1, {1: 1})]
    redo = [(0, 2, 0, U, {1: 2}), (0, 3, 0, D, {}), (0, 4, 0, R, {1: 3})]
    new_base, undo, kept = fold(1, inserts, redo, cols)
    assert new_base[1].to_pylist() == [3]
    assert len(kept) == 0
    # UNDO  @4 DELETE, @3 REINSERT ("row", 2), @2 UPDATE val=1, @1 DELETE
    recs = records_of(undo)
    assert [(r[1], r[3]) for r in recs] == [(1, D), (2, U), (3, R), (4, D)]
    by_ts = {r[1]: r for r in recs}
    assert by_ts[3][4] == {1: 2}
    assert by_ts[2][4] == {1: 1}
    assert by_ts[4][4] == {} and by_ts[1][4] == {}
    assert [read_at(T, 1, new_base, undo, kept, cols)[0] for T in range(6)] == [
        None, {1: 1}, {1: 2}, None, {1: 3}, {1: 3}]


def test_fold_trailing_delete_keeps_last_image_and_redo():
    cols = [ColumnSchema("val", DataType.INT64, id=1)]
    inserts = [(1, {1: 1}), (2, {1: 10})]
    redo = [(0, 3, 0, U, {1: 2}), (0, 5, 0, D, {}), (1, 4, 0, D, {})]
    new_base, undo, kept = fold(2, inserts, redo, cols)
    assert new_base[1].to_pylist() == [2, 10]
    assert records_of(kept) == [(0, 5, 0, D, {}), (1, 4, 0, D, {})]
    states = [read_at(T, 2, new_base, undo, kept, cols) for T in range(7)]
    assert [s[0] for s in states] == [None, {1: 1}, {1: 1}, {1: 2}, {1: 2}, None, None]
    assert [s[1] for s in states] == [None, None, {1: 10}, {1: 10}, None, None, None]


def test_fold_no_mutations():
    inserts = [(3, {1: 1, 2: b"x", 3: None, 4: True}), (1, {1: None, 2: None, 3: 1.0, 4: None})]
    new_base, undo, kept = check_fold(2, inserts, [])
    assert records_of(undo) == [(0, 3, -1, D, {}), (1, 1, -1, D, {})]
    assert len(kept) == 0


def test_fold_same_timestamp_chain():
    # one op updates, deletes, reinserts and updates the same row (seq orders them), and
    # the insert itself happened in the same op
    inserts = [(2, {1: 1, 2: b"a", 3: 0.5, 4: False})]
    redo = [(0, 2, 1, U, {1: 2}), (0, 2, 2, D, {}), (0, 2, 3, R, {1: 3, 2: None, 3: None,
                                                                   4: True}),
            (0, 2, 4, U, {2: b"z"}), (0, 3, 0, U, {1: 4}), (0, 3, 1, D, {})]
    check_fold(1, inserts, redo)


@st.composite
def histories(draw):
    """Random row histories on one shared timeline, valid like the tablet produces them."""
    n = draw(st.integers(1, 6))
    inserts, redo = [], []
    for row in range(n):
        ts = draw(st.integers(1, 4))
        vals = {cid: draw(strat) for cid, (_, strat) in COLS.items()}
        inserts.append((ts, vals))
        alive = True
        seq = 0  # seq of the last record at `ts` (the insert counts as seq 0 of its op)
        for _ in range(draw(st.integers(0, 8))):
            if draw(st.integers(0, 2)) == 0:  # same op as the previous record
                seq += 1
            else:
                ts += draw(st.integers(1, 2))
                seq = 0
            if alive:
                kind = draw(st.sampled_from([U, U, U, D]))
            else:
                kind = R
            if kind is U:
                cids = draw(st.sets(st.sampled_from(sorted(COLS)), min_size=1))
                v = {cid: draw(COLS[cid][1]) for cid in sorted(cids)}
            elif kind is R:
                v = {cid: draw(strat) for cid, (_, strat) in COLS.items()}
            else:
                v = {}
            redo.append((row, ts, seq, kind, v))
            alive = kind is not D
    return n, inserts, redo


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_fold_history_reproduces_every_timestamp(h):
    n, inserts, redo = h
    check_fold(n, inserts, redo)


def random_history(rng: random.Random, max_rows: int = 8, max_ops: int = 10):
    """Same shape as `histories`, from a seeded RNG (much cheaper than hypothesis draws)."""
    pools = {1: [None, -1, 0, 3], 2: [None, b"", b"\x00", b"q"], 3: [None, 1.5, -2.0],
             4: [None, True, False]}
    n = rng.randint(1, max_rows)
    inserts, redo = [], []
    for row in range(n):
        ts = rng.randint(1, 5)
        inserts.append((ts, {cid: rng.choice(p) for cid, p in pools.items()}))
        alive, seq = True, 0
        for _ in range(rng.randint(0, max_ops)):
            if rng.random() < 0.35:
                seq += 1
            else:
                ts += rng.randint(1, 3)
                seq = 0
            kind = (U if rng.random() < 0.7 else D) if alive else R
            if kind is U:
                cids = rng.sample(sorted(pools), rng.randint(1, len(pools)))
                v = {cid: rng.choice(pools[cid]) for cid in cids}
            elif kind is R:
                v = {cid: rng.choice(p) for cid, p in pools.items()}
            else:
                v = {}
            redo.append((row, ts, seq, kind, v))
            alive = kind is not D
    return n, inserts, redo


@pytest.mark.parametrize("seed", range(2))
def test_fold_history_seeded_bulk(seed):
    rng = random.Random(seed)
    for _ in range(120):
        n, inserts, redo = random_history(rng)
        try:
            check_fold(n, inserts, redo)
        except AssertionError as e:
            raise AssertionError(f"history n={n} inserts={inserts} redo={redo}") from e


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_fold_history_survives_delta_files(tmp_path_factory, h):
    """UNDO/REDO written as DeltaFiles and read back behave the same."""
    n, inserts, redo = h
    new_base, undo, kept = fold(n, inserts, redo)
    d = tmp_path_factory.mktemp("df")
    loaded = []
    for i, (batch, dtype) in enumerate(((undo, DeltaType.UNDO), (kept, DeltaType.REDO))):
        if not len(batch):
            loaded.append(batch)
            continue
        path = str(d / f"f{i}.df")
        desc = write_delta_file(path, batch, dtype, page_rows=3, fsync=False)
        assert desc["count"] == len(batch)
        assert desc["min_ts"] == batch.min_ts() and desc["max_ts"] == batch.max_ts()
        f = DeltaFile(path, desc)
        assert f.type is dtype and len(f) == len(batch)
        rec = f.records()
        assert records_of(rec) == records_of(batch)
        loaded.append(rec)
    max_ts = max([i[0] for i in inserts] + [r[1] for r in redo])
    for T in range(0, max_ts + 2):
        assert read_at(T, n, new_base, *loaded) == naive_at(T, inserts, redo, n)


def test_delta_file_round_trip_deletes_only(tmp_path):
    b = DeltaBatch.uniform(np.arange(10), 5, 0, D)
    desc = write_delta_file(str(tmp_path / "d.df"), b, DeltaType.REDO, page_rows=4, fsync=False)
    assert desc["columns"] == []
    f = DeltaFile(str(tmp_path / "d.df"), desc)
    assert records_of(f.records()) == records_of(b)
    assert f.nbytes > 0


@pytest.mark.parametrize("typ,vals", [
    (pa.binary(16), [b"\x01" * 16, None, b"\xff" * 16]),
    (pa.int8(), [1, None, -128]),
    (pa.binary(), [b"", None, b"\x00" * 100]),
])
def test_delta_file_value_types(tmp_path, typ, vals):
    b = DeltaBatch(np.array([0, 1, 2]), np.array([1, 1, 2]), np.array([0, 0, 0]),
                   np.array([int(U)] * 3, dtype=np.int8),
                   {7: (np.array([True, True, True]), pa.array(vals, type=typ))})
    desc = write_delta_file(str(tmp_path / "d.df"), b, DeltaType.UNDO, page_rows=2, fsync=False)
    rec = DeltaFile(str(tmp_path / "d.df"), desc).records()
    assert rec.columns[7][1].type == typ
    assert rec.columns[7][1].to_pylist() == vals
    assert rec.columns[7][0].tolist() == [True] * 3
