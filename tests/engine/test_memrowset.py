"""MemRowSet (engine/tablet/memrowset.py): key index, REDO chains, snapshots, and its flush
into DiskRowSets (Tablet.flush_mrs + compaction.fold_history end to end)."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa

from engine.clock import LogicalClock
from engine.key_encoding import encode_key, encode_keys
from engine.schema import ColumnSchema, Schema
from engine.tablet import ColumnPredicate, OpType, ScanStats, Tablet, TabletConfig
from engine.tablet.delta import DeltaBatch, MutationKind
from engine.tablet.memrowset import MemRowSet
from engine.tablet.mvcc import MvccSnapshot
from engine.tablet.tablet_mm_ops import FlushMRSOp
from engine.types import DataType

P = ColumnPredicate


def C(name, typ, **kw):
    return ColumnSchema(name, typ, **kw)


SCHEMA = Schema([C("k", DataType.STRING), C("v", DataType.INT64), C("w", DataType.STRING)],
                key=["k"])
V_ID = SCHEMA.column("v").id
W_ID = SCHEMA.column("w").id


def phys_batch(keys: list[str], vs: list, ws: list) -> tuple[np.ndarray, pa.RecordBatch]:
    k = pa.array([x.encode() for x in keys], pa.binary())
    batch = pa.RecordBatch.from_arrays(
        [k, pa.array(vs, pa.int64()), pa.array([None if w is None else w.encode() for w in ws],
                                               pa.binary())],
        schema=pa.schema([pa.field(c.name, c.physical_type) for c in SCHEMA.columns]))
    return encode_keys([k], SCHEMA.key_columns), batch


def scan_mrs(mrs, snap, columns=None, preds=(), lower=None, upper=None):
    cols = [SCHEMA.column(n) for n in (columns or SCHEMA.names)]
    out = []
    for block in mrs.scan(cols, list(preds), snap, lower, upper, ScanStats()):
        arrs = [block[c.id].to_pylist() for c in cols]
        out.extend(zip(*arrs))
    return sorted(out, key=repr)


# -- the MemRowSet on its own ------------------------------------------------------------------


def test_key_index_over_many_runs():
    rng = random.Random(3)
    mrs = MemRowSet(SCHEMA, 1)
    assert mrs.empty() and mrs.key_range() is None
    keys = [f"k{i:04d}\x00{i % 7}" for i in range(600)]
    rng.shuffle(keys)
    pos = 0
    rowid_of = {}
    while pos < len(keys):  # batches of varied sizes exercise the binary-counter merging
        n = rng.choice([1, 1, 2, 3, 8, 30, 70])
        chunk = keys[pos:pos + n]
        enc, batch = phys_batch(chunk, list(range(pos, pos + len(chunk))), [None] * len(chunk))
        rids = mrs.insert(enc, batch, ts=1 + pos)
        assert list(rids) == list(range(pos, pos + len(chunk)))  # rowid = insertion position
        rowid_of.update(zip(chunk, rids.tolist()))
        pos += len(chunk)
    assert len(mrs) == 600 and not mrs.empty()
    assert len(mrs._runs) <= math.ceil(math.log2(600)) + 1  # O(log n) runs
    probe = keys[:50] + ["nope", "", "k0001", "k0001\x00"]
    enc = encode_keys([pa.array([p.encode() for p in probe], pa.binary())], SCHEMA.key_columns)
    found = mrs.find(enc)
    for p, e, f in zip(probe, enc, found):
        assert f == rowid_of.get(p, -1)
        assert mrs.find_one(bytes(e)) == f
    sk, srid = mrs.sorted_rowids()
    assert list(sk) == sorted(sk)
    assert sorted(srid.tolist()) == list(range(600))
    assert srid.tolist() == [rowid_of[k] for k in sorted(keys)]
    lo, hi = mrs.key_range()
    assert lo == encode_key((min(keys),), SCHEMA.key_columns)
    assert hi == encode_key((max(keys),), SCHEMA.key_columns)
    assert mrs.nbytes > 0


def test_sorted_rowids_of_runs_already_in_key_order_and_not():
    """Batches inserted in key order (a bulk load of sorted data) give runs whose
    concatenation is the key order (no sort); runs that overlap or go backwards are
    sorted: both answer as sorting every key would."""
    # (batches of 64, 16, 4, 1 rows stay four runs: each is less than half the one before)
    cases = {
        "ascending": [list(range(0, 64)), list(range(64, 80)), list(range(80, 84)), [84]],
        "descending runs": [list(range(21, 85)), list(range(5, 21)), list(range(1, 5)), [0]],
        "overlapping": [list(range(0, 128, 2)), list(range(1, 33, 2)), [40.5, 2.5, 90.5, 7.5],
                        [9.5]],
        "one backwards": [list(range(0, 64)), list(range(64, 80)), [0.5, 81, 82, 83], [84]],
        "unsorted batches": [list(range(63, -1, -1)), list(range(79, 63, -1)),
                             [83, 80, 82, 81], [84]],
    }
    for name, batches in cases.items():
        mrs = MemRowSet(SCHEMA, 1)
        rowid_of, pos = {}, 0
        for b in batches:
            ks = [f"k{i:05.1f}" for i in b]
            enc, batch = phys_batch(ks, list(range(pos, pos + len(ks))), [None] * len(ks))
            rowid_of.update(zip(ks, mrs.insert(enc, batch, ts=1 + pos).tolist()))
            pos += len(ks)
        assert len(mrs._runs) == 4, name
        sk, srid = mrs.sorted_rowids()
        assert list(sk) == sorted(sk), name
        assert srid.tolist() == [rowid_of[k] for k in sorted(rowid_of)], name


def test_flush_of_rows_inserted_in_key_order_and_not(tmp_path):
    """A flush writes the rows in key order whether they were inserted in it (rowids are
    the key order: no reordering copy) or not; an update after the flush reaches the row."""
    for name, order in (("sorted", range(40)), ("reversed", range(39, -1, -1)),
                        ("shuffled", random.Random(5).sample(range(40), 40))):
        t = make(tmp_path / name)
        keys = [f"{i:03d}" for i in order]
        for i in range(0, 40, 8):
            t.insert({"k": keys[i:i + 8], "v": [int(k) for k in keys[i:i + 8]],
                      "w": [f"w{k}" for k in keys[i:i + 8]]})
        assert t.flush_mrs() == 40
        got = t.scan_table().to_pylist()
        assert [r["k"] for r in got] == sorted(keys), name       # key order on disk
        assert all(r["v"] == int(r["k"]) and r["w"] == f"w{r['k']}" for r in got), name
        t.update({"k": ["007"], "v": [-7]})
        assert {r["k"]: r["v"] for r in t.scan_table().to_pylist()}["007"] == -7, name


def test_snapshots_and_redo_chains():
    mrs = MemRowSet(SCHEMA, 1)
    e1, b1 = phys_batch(["a", "b"], [1, 2], ["x", None])
    mrs.insert(e1, b1, ts=5)
    e2, b2 = phys_batch(["c"], [3], ["y"])
    mrs.insert(e2, b2, ts=7)
    # row 0 ("a"): UPDATE v=10 @8, DELETE @9, REINSERT (v=11, w=None) @10
    mrs.append_mutations(DeltaBatch.uniform(np.array([0]), 8, 0, MutationKind.UPDATE,
                                            {V_ID: pa.array([10], pa.int64())}))
    mrs.append_mutations(DeltaBatch.uniform(np.array([0]), 9, 0, MutationKind.DELETE),
                         np.array([False]))
    assert not mrs.latest_live(np.array([0]))[0]
    mrs.append_mutations(DeltaBatch.uniform(
        np.array([0]), 10, 0, MutationKind.REINSERT,
        {V_ID: pa.array([11], pa.int64()), W_ID: pa.nulls(1, pa.binary())}), np.array([True]))
    assert list(mrs.latest_live(np.array([0, 1, 2]))) == [True, True, True]
    expect = {
        4: [],
        5: [(b"a", 1, b"x"), (b"b", 2, None)],
        7: [(b"a", 1, b"x"), (b"b", 2, None), (b"c", 3, b"y")],
        8: [(b"a", 10, b"x"), (b"b", 2, None), (b"c", 3, b"y")],
        9: [(b"b", 2, None), (b"c", 3, b"y")],
        10: [(b"a", 11, None), (b"b", 2, None), (b"c", 3, b"y")],
    }
    for ts, rows in expect.items():
        snap = MvccSnapshot.at(ts)
        assert scan_mrs(mrs, snap) == rows, ts
        for rid, key in enumerate([b"a", b"b", b"c"]):
            want = next((r for r in rows if r[0] == key), None)
            got = mrs.lookup_row(rid, SCHEMA.columns, snap)
            assert (None if got is None else tuple(got[c.id] for c in SCHEMA.columns)) == want
    # a snapshot that has 8 but not 7 in flight (non-contiguous committed set)
    snap = MvccSnapshot(7, frozenset({8}))
    assert scan_mrs(mrs, snap) == [(b"a", 10, b"x"), (b"b", 2, None)]
    # predicates see the patched values; key bounds are [lower, upper)
    snap = MvccSnapshot.at(10)
    from engine.tablet.scan_spec import BoundPredicate
    bp = BoundPredicate(P.greater("v", 5), SCHEMA.column("v"))
    assert scan_mrs(mrs, snap, preds=[bp]) == [(b"a", 11, None)]
    assert scan_mrs(mrs, snap, lower=b"b") == [(b"b", 2, None), (b"c", 3, b"y")]
    assert scan_mrs(mrs, snap, lower=b"a\x01", upper=b"c") == [(b"b", 2, None)]
    assert scan_mrs(mrs, snap, columns=["w"]) == sorted([(None,), (None,), (b"y",)], key=repr)
    assert list(mrs.changed_rowids(7, 9)) == [0]
    assert list(mrs.changed_rowids(5, 7)) == [2]
    assert list(mrs.changed_rowids(0, 100)) == [0, 1, 2]


# -- through the Tablet ------------------------------------------------------------------------


def make(tmp_path, **cfg):
    config = TabletConfig(fsync=False, **{"page_rows": 4, **cfg})
    return Tablet.create(str(tmp_path / "t"), SCHEMA, config, LogicalClock())


def rows_of(t, **kw):
    return sorted((r["k"], r["v"], r["w"]) for r in t.scan_table(**kw).to_pylist())


def test_flush_rolls_into_several_diskrowsets(tmp_path):
    t = make(tmp_path, drs_target_bytes=1)
    keys = [f"{i:03d}" for i in range(37)]
    random.Random(1).shuffle(keys)
    for i in range(0, 37, 10):
        t.insert({"k": keys[i:i + 10], "v": list(range(i, i + len(keys[i:i + 10]))),
                  "w": ["x"] * len(keys[i:i + 10])})
    before = rows_of(t)
    assert t.mrs_rows() == 37 and t.num_rowsets() == 0
    assert t.flush_mrs() == 37
    assert t.mrs_rows() == 0
    # drs_target_bytes=1 rolls a new rowset at every page boundary (page_rows=4)
    assert t.num_rowsets() == math.ceil(37 / 4)
    info = t.rowsets_info()
    assert sum(i["rows"] for i in info) == 37
    assert all(i["rows"] <= 4 for i in info)
    ranges = sorted((i["min_key"], i["max_key"]) for i in info)
    for (lo1, hi1), (lo2, _) in zip(ranges, ranges[1:]):
        assert lo1 <= hi1 < lo2  # disjoint, in key order
    assert rows_of(t) == before
    assert t.flush_mrs() == 0  # nothing left


def test_flush_with_default_target_makes_one_rowset(tmp_path):
    t = make(tmp_path)
    t.insert({"k": [str(i) for i in range(50)], "v": list(range(50))})
    t.flush_mrs()
    assert t.num_rowsets() == 1
    assert t.rowsets_info()[0]["rows"] == 50


def _apply_model(model, op, k, v, w):
    if op == "insert":
        model[k] = (v, w)
    elif op == "update":
        model[k] = (v, model[k][1])
    else:
        del model[k]


def test_random_histories_in_mrs_and_after_flush(tmp_path):
    """Insert/update/delete/reinsert chains (several per op) read back at every timestamp,
    while in the MemRowSet and again after flushing (base + UNDO + REDO on disk)."""
    rng = random.Random(11)
    t = make(tmp_path, drs_target_bytes=64)
    model: dict[str, tuple] = {}
    states = []
    keyspace = [f"k{i}" for i in range(12)] + ["", "k1\x00"]
    for _ in range(40):
        ops, ks, vs, ws = [], [], [], []
        scratch = dict(model)
        for _ in range(rng.randint(1, 4)):
            k = rng.choice(keyspace)
            if k in scratch:
                op = rng.choice(["update", "update", "delete"])
            else:
                op = "insert"
            v, w = rng.randint(-5, 5), rng.choice([None, "a", "b\x00"])
            _apply_model(scratch, op, k, v, w)
            ops.append({"insert": OpType.INSERT, "update": OpType.UPDATE,
                        "delete": OpType.DELETE}[op])
            ks.append(k)
            vs.append(v)
            ws.append(w)
        # UPDATE rows carry w too, so it is set as well: make the model agree
        r = t.write(ops, {"k": ks, "v": vs, "w": ws})
        assert r.ok, r.row_errors
        for op, k, v, w in zip(ops, ks, vs, ws):
            if op == OpType.UPDATE:
                model[k] = (v, w)
            else:
                _apply_model(model, "insert" if op == OpType.INSERT else "delete", k, v, w)
        states.append((r.timestamp, dict(model)))

    def check():
        for ts, state in states:
            want = sorted((k, v, w) for k, (v, w) in state.items())
            assert rows_of(t, snapshot=ts) == want, ts
        for k in keyspace:
            got = t.lookup((k,))
            assert (None if got is None else (got["v"], got["w"])) == model.get(k)

    check()
    assert t.flush_mrs() > 0
    assert t.num_rowsets() > 1
    check()
    # deleted-in-the-MRS keys are ghosts on disk now; they can be inserted again
    dead = [k for k in keyspace if k not in model]
    if dead:
        r = t.insert({"k": dead, "v": [99] * len(dead)})
        assert r.ok
        for k in dead:
            model[k] = (99, None)
        states.append((r.timestamp, dict(model)))
        check()
        t.flush_mrs()
        check()


def test_mrs_scan_predicates_and_bounds(tmp_path):
    t = make(tmp_path)
    t.insert({"k": ["a", "b", "c", "d"], "v": [1, None, 3, 4], "w": ["x", "y", None, "z"]})
    t.update({"k": ["c"], "v": [30]})
    t.delete({"k": ["d"]})
    assert rows_of(t, predicates=[P.greater("v", 2)]) == [("c", 30, None)]
    assert rows_of(t, predicates=[P.is_null("v")]) == [("b", None, "y")]
    assert rows_of(t, predicates=[P.in_list("w", ["x", "z"])]) == [("a", 1, "x")]
    assert rows_of(t, lower_key=("b",), upper_key=("c",)) == [("b", None, "y")]
    assert t.count_rows() == 3
    ts = t.current_timestamp()
    assert rows_of(t, predicates=[P.equal("v", 3)], snapshot=ts - 2) == [("c", 3, None)]


def test_writes_during_flush_are_caught_up(tmp_path, monkeypatch):
    """Flush phase 2 runs without the write lock: UPDATE/DELETE of rows of the frozen
    MemRowSet made meanwhile must land in the new DiskRowSets' DeltaMemStores, inserts go to
    the new MemRowSet, and readers see one consistent tablet throughout."""
    t = Tablet.create(str(tmp_path / "t"), Schema(
        [C("k", DataType.INT32), C("v", DataType.INT64)], key=["k"]),
        TabletConfig(page_rows=4, drs_target_bytes=1, fsync=False), LogicalClock())
    t.insert({"k": list(range(10)), "v": list(range(10))})
    t.delete({"k": [9]})
    history = []

    def state():
        return sorted((r["k"], r["v"]) for r in t.scan_table().to_pylist())

    def record(r):
        assert r.ok, r.row_errors
        history.append((r.timestamp, state()))

    original = FlushMRSOp.write_flush

    def flush_with_concurrent_writes(op, mrs, snap, *args):
        assert state() == [(i, i) for i in range(9)]
        record(t.update({"k": [1, 2], "v": [100, 200]}))        # frozen MRS rows
        record(t.delete({"k": [3]}))
        record(t.insert({"k": [3, 9], "v": [33, 99]}))          # dead in the frozen MRS
        r = t.insert({"k": [4], "v": [44]})                     # live in the frozen MRS
        assert [e.code for e in r.row_errors] == ["ALREADY_PRESENT"]
        record(t.update({"k": [3], "v": [333]}))                # now in the new MRS
        out = original(op, mrs, snap, *args)
        record(t.update({"k": [5], "v": [500]}))                # files written, not swapped
        record(t.delete({"k": [6]}))
        return out

    monkeypatch.setattr(FlushMRSOp, "write_flush", flush_with_concurrent_writes)
    assert t.flush_mrs() == 10
    monkeypatch.undo()
    final = [(0, 0), (1, 100), (2, 200), (3, 333), (4, 4), (5, 500), (7, 7), (8, 8), (9, 99)]
    assert state() == final
    assert t.mrs_rows() == 2  # keys 3 and 9
    assert sum(i["dms_records"] for i in t.rowsets_info()) == 5  # 1, 2, 3, 5, 6
    for ts, want in history:
        assert sorted((r["k"], r["v"]) for r in t.scan_table(snapshot=ts).to_pylist()) == want
    assert t.lookup((6,)) is None and t.lookup((3,)) == {"k": 3, "v": 333}
    t.flush_dms()
    t.flush_mrs()
    assert state() == final
    for ts, want in history:
        assert sorted((r["k"], r["v"]) for r in t.scan_table(snapshot=ts).to_pylist()) == want


def test_cell_reader_equals_as_py():
    """`cell_reader` (lookup_row's buffer reads) against Arrow's own `as_py`, for every
    physical type, with and without nulls, on sliced arrays (a non-zero offset)."""
    import random

    from engine.tablet.memrowset import cell_reader
    rng = random.Random(3)
    gens = {pa.int8(): lambda: rng.randrange(-128, 128),
            pa.int32(): lambda: rng.randrange(-2**31, 2**31),
            pa.int64(): lambda: rng.randrange(-2**63, 2**63),
            pa.float32(): lambda: rng.random() * 1e6, pa.float64(): lambda: rng.random(),
            pa.bool_(): lambda: rng.random() < 0.5,
            pa.binary(): lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(5))),
            pa.decimal128(20, 2): lambda: None}
    for typ, gen in gens.items():
        for nulls in (False, True):
            vals = [None if nulls and rng.random() < 0.3 else gen() for _ in range(50)]
            arr = pa.array(vals, typ)
            for a in (arr, arr.slice(7, 30), arr.slice(0, 0)):
                read = cell_reader(a)
                assert [read(i) for i in range(len(a))] == a.to_pylist(), (typ, nulls)


def test_tail_rows_against_a_model(monkeypatch):
    """Single-row inserts on the tail (`insert_row`) mixed with Arrow batch inserts,
    explicit and implicit materialisation and the tail's cut (tiny TAIL_MAX and trim so
    every path runs): every key probe, lookup, `find`, scan, `sorted_rowids` and
    `key_range` must agree with a model of the rows, at the latest and older snapshots;
    a reader thread probing and scanning all along must never see a row go missing."""
    import threading

    from engine.tablet import memrowset
    monkeypatch.setattr(memrowset, "TAIL_MAX", 7)
    monkeypatch.setattr(memrowset, "_TAIL_TRIM", 5)
    rng = random.Random(11)
    mrs = MemRowSet(SCHEMA, 1)
    cols = [SCHEMA.column(n) for n in SCHEMA.names]
    model: dict[str, tuple] = {}        # key -> (k, v, w) physical values
    rowids: dict[str, int] = {}
    seen_ts: list[tuple[int, int]] = []  # (ts, rows then)
    stop = threading.Event()
    errors: list = []

    def reader():
        # rows are never removed: a key once found stays found with its rowid
        found: dict[bytes, int] = {}
        rr = random.Random(5)
        while not stop.is_set():
            try:
                for k, r in list(found.items()):
                    if mrs.find_one(k) != r:
                        errors.append(("lost", k))
                n = len(mrs)
                if rr.random() < 0.1 and len(mrs.sorted_rowids()[0]) < n:
                    errors.append(("sorted_rowids short of", n))
                for k in list(rowids)[:n]:
                    ek = encode_key([k.encode()], SCHEMA.key_columns)
                    r = mrs.find_one(ek)
                    if r >= 0:
                        found[ek] = r
            except Exception as e:      # noqa: BLE001 - reported by the test
                errors.append(repr(e))
                return
    th = threading.Thread(target=reader)
    th.start()
    try:
        ts = 0
        for step in range(700):
            r = rng.random()
            ts += 1
            if r < 0.7:
                k = f"key{rng.randrange(10**6):06d}"
                if k in model:
                    continue
                v = rng.choice([None, rng.randrange(1000)])
                w = rng.choice([None, "", "x" * rng.randrange(4)])
                vals = (k.encode(), v, None if w is None else w.encode())
                ek = encode_key([k.encode()], SCHEMA.key_columns)
                rowids[k] = mrs.insert_row(ek, vals, ts, 20)
                model[k] = vals
            elif r < 0.8:
                new = [f"bulk{step:04d}{i}" for i in range(rng.randrange(1, 5))]
                ks, batch = phys_batch(new, [step] * len(new), [None] * len(new))
                for k, rid in zip(new, mrs.insert(ks, batch, ts)):
                    rowids[k] = int(rid)
                    model[k] = (k.encode(), step, None)
            elif r < 0.85:
                mrs.materialise(rng.randrange(len(mrs) + 1))
            seen_ts.append((ts, len(model)))
            if step % 50 == 0 or step == 699:
                snap = MvccSnapshot.including_all()
                assert scan_mrs(mrs, snap) == sorted(model.values(), key=repr), step
                t_old, n_old = seen_ts[rng.randrange(len(seen_ts))]
                assert len(scan_mrs(mrs, MvccSnapshot.at(t_old))) == n_old, step
                keys, order = mrs.sorted_rowids()
                assert [bytes(x) for x in keys] == sorted(
                    encode_key([k.encode()], SCHEMA.key_columns) for k in model)
                if model:
                    assert mrs.key_range() == (bytes(keys[0]), bytes(keys[-1]))
            for k in rng.sample(sorted(model), min(3, len(model))):
                ek = encode_key([k.encode()], SCHEMA.key_columns)
                assert mrs.find_one(ek) == rowids[k]
                row = mrs.lookup_row(rowids[k], cols, MvccSnapshot.including_all())
                assert tuple(row[c.id] for c in cols) == model[k], (step, k)
        probe = sorted(model)[:20] + ["absent"]
        enc = np.array([encode_key([k.encode()], SCHEMA.key_columns) for k in probe])
        assert mrs.find(enc).tolist() == [rowids.get(k, -1) for k in probe]
    finally:
        stop.set()
        th.join()
    assert not errors, errors[:5]
